//! Restores onto, and backups from, a real case-insensitive file system: exFAT through
//! exfat-fuse, in an image on a loop device. exfat-fuse gives each name its own inode number,
//! so `Report.txt` and `report.txt` look like two files to anything that compares inodes, and
//! numbers files anew at each mount.
//!
//! Needs root, `mkfs.exfat`, `mount.exfat-fuse` and `losetup`; skipped without them, unless
//! `ARCA_REQUIRE_EXFAT` is set (CI), which makes a missing piece a failure.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// An exFAT file system mounted at a folder of the test's, taken down when dropped.
struct Exfat {
    dir: PathBuf,
    device: String,
}

impl Drop for Exfat {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

impl Exfat {
    /// Mounts the file system again, then looks its files up in the order `names` gives:
    /// exfat-fuse numbers inodes in the order names are first looked up after a mount.
    fn remount(&self, names: &[PathBuf]) {
        assert!(
            Command::new("umount")
                .arg(&self.dir)
                .status()
                .unwrap()
                .success()
        );
        let mounted = Command::new("mount.exfat-fuse")
            .arg(&self.device)
            .arg(&self.dir)
            .status()
            .unwrap();
        assert!(mounted.success());
        for n in names {
            fs::symlink_metadata(n).unwrap();
        }
    }
}

/// Makes and mounts an exFAT image at `e`'s `ex`; `None` (said on stderr) where that
/// cannot be done here.
fn exfat(e: &Env) -> Option<Exfat> {
    let skip = |why: &str| {
        assert!(
            std::env::var_os("ARCA_REQUIRE_EXFAT").is_none(),
            "ARCA_REQUIRE_EXFAT is set, and {why}"
        );
        eprintln!("skipped: {why}");
        None
    };
    if !arca_testkit::is_root() {
        return skip("a loop device needs root");
    }
    let image = e.path("exfat.img");
    fs::File::create(&image).unwrap().set_len(64 << 20).unwrap();
    let made = Command::new("mkfs.exfat")
        .arg(&image)
        .output()
        .is_ok_and(|o| o.status.success());
    if !made {
        return skip("no mkfs.exfat (exfatprogs)");
    }
    let Some(device) = Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&image)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    else {
        return skip("no free loop device");
    };
    let dir = e.path("ex");
    fs::create_dir_all(&dir).unwrap();
    let mounted = Command::new("mount.exfat-fuse")
        .arg(&device)
        .arg(&dir)
        .output()
        .is_ok_and(|o| o.status.success());
    let ex = Exfat { dir, device };
    if !mounted {
        return skip("cannot mount with mount.exfat-fuse (exfat-fuse, /dev/fuse)");
    }
    // It is the case-insensitive file system this test is about.
    fs::write(ex.dir.join("Probe"), b"").unwrap();
    assert!(ex.dir.join("probe").exists());
    fs::remove_file(ex.dir.join("Probe")).unwrap();
    Some(ex)
}

/// The one name of `folder` that folds equal to `name`.
fn stored(folder: &Path, name: &str) -> String {
    let names: Vec<String> = fs::read_dir(folder)
        .unwrap()
        .map(|d| d.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.eq_ignore_ascii_case(name))
        .collect();
    assert_eq!(names.len(), 1, "{folder:?}: {names:?}");
    names[0].clone()
}

/// Two files and two folders whose names differ only in case: each name the file system
/// keeps holds what the snapshot has under that name, the other is reported (exit 3), and
/// `--delete` removes nothing the snapshot has under either name. Reruns change nothing.
/// Before, with inode numbers per name, `a.txt` was written into `A.txt` without a word,
/// `docs/x` into `Docs/x`, each rerun swapped them back, and `--delete` removed `docs/y` as
/// an extra entry of `Docs`.
#[test]
fn names_that_differ_only_in_case_never_overwrite_each_other() {
    let e = Env::new();
    let Some(ex) = exfat(&e) else { return };
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("Docs")).unwrap();
    fs::create_dir_all(src.join("docs")).unwrap();
    let content = |n: &str| format!("the snapshot's {n}\n");
    for n in ["A.txt", "a.txt", "Docs/x", "docs/x", "docs/y", "other"] {
        fs::write(src.join(n), content(n)).unwrap();
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = ex.dir.join("r");
    let snap = format!("latest:{}", src.display());
    let restore = |extra: &[&str]| {
        let mut a = vec!["restore", &snap, "--target", target.to_str().unwrap()];
        a.extend_from_slice(extra);
        let o = e.run(&a);
        (o.status.code(), stderr(&o))
    };
    let mut kept = None;
    for extra in [&[][..], &[], &["--delete"], &["--delete"]] {
        let (code, err) = restore(extra);
        assert_eq!(code, Some(3), "{extra:?}: {err}");
        assert!(err.contains("differ only in case"), "{err}");
        let file = stored(&target, "a.txt");
        let dir = stored(&target, "docs");
        let other_file = if file == "A.txt" { "a.txt" } else { "A.txt" };
        let other_dir = if dir == "Docs" { "docs" } else { "Docs" };
        assert!(err.contains(&format!("r/{other_file}")), "{err}");
        assert!(err.contains(&format!("r/{other_dir}/x")), "{err}");
        // The name kept holds its own content, in every run the same.
        let now = (file.clone(), dir.clone());
        assert_eq!(*kept.get_or_insert(now.clone()), now);
        assert_eq!(
            fs::read_to_string(target.join(&file)).unwrap(),
            content(&file)
        );
        let x = format!("{dir}/x");
        assert_eq!(fs::read_to_string(target.join(&x)).unwrap(), content(&x));
        // docs/y lands in the folder kept, and --delete does not take it for extra.
        assert_eq!(
            fs::read_to_string(target.join(&dir).join("y")).unwrap(),
            content("docs/y"),
            "{extra:?}"
        );
        assert_eq!(
            fs::read_to_string(target.join("other")).unwrap(),
            content("other")
        );
    }
}

/// exFAT keeps mtimes to the second here (exfat-fuse), so a restored file's mtime is the
/// snapshot's cut: a rerun trusts it all the same (nothing hashed, nothing written), and so
/// does `--overwrite if-newer`, while a file changed since is still found and put right.
/// Before, every rerun hashed every file, and `if-newer` restored them all again.
#[test]
fn a_rerun_trusts_mtimes_the_file_system_kept_to_its_grain() {
    let e = Env::new();
    let Some(ex) = exfat(&e) else { return };
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..8u64 {
        fs::write(
            src.join(format!("f{i}")),
            arca_testkit::random_bytes(i, 50_000),
        )
        .unwrap();
        // A time with nanoseconds, as most files have (one already whole is kept whole).
        let t = nix::sys::time::TimeSpec::new(1_700_000_000 + i as i64, 123_456_789);
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            &src.join(format!("f{i}")),
            &t,
            &t,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = ex.dir.join("r");
    let snap = format!("latest:{}", src.display());
    let restore = |extra: &[&str]| {
        let mut a = vec![
            "restore",
            &snap,
            "--target",
            target.to_str().unwrap(),
            "--json",
        ];
        a.extend_from_slice(extra);
        e.json(&a)
    };
    restore(&[]);
    let kept = fs::metadata(target.join("f0")).unwrap();
    assert_ne!(
        std::os::unix::fs::MetadataExt::mtime_nsec(&kept),
        123_456_789,
        "this exFAT keeps nanoseconds: the test shows nothing"
    );
    for extra in [&[][..], &["--overwrite", "if-newer"]] {
        let s = restore(extra);
        assert_eq!(s["files_hashed"], 0, "{extra:?}: {s}");
        assert_eq!(s["bytes_written"], 0, "{extra:?}: {s}");
    }
    // Changed since, same size: its mtime is now, so it is hashed and put right.
    let mut changed = fs::read(target.join("f3")).unwrap();
    changed[0] ^= 0xff;
    fs::write(target.join("f3"), &changed).unwrap();
    let s = restore(&[]);
    assert_eq!(s["files_hashed"], 1, "{s}");
    assert_eq!(
        fs::read(target.join("f3")).unwrap(),
        fs::read(src.join("f3")).unwrap()
    );
    // No probe file is left in the target.
    let names: Vec<_> = fs::read_dir(&target)
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 8, "{names:?}");
}

/// Names exFAT does not take (`?`, `:`, `|`, bytes that are not UTF-8), symlinks and FIFOs
/// fail with the reason: exfat-fuse says "No such file or directory" of a name in a folder
/// that is there, "Function not implemented" of a symlink, "Input/output error" of a FIFO
/// (after making an empty file under its name). A hard link, which exFAT cannot make,
/// is written as a copy, and said so (it was missing). The other entries are restored.
#[test]
fn names_the_file_system_refuses_say_why() {
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    let Some(ex) = exfat(&e) else { return };
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("a|b")).unwrap();
    fs::write(src.join("what?"), b"q").unwrap();
    fs::write(src.join("a|b/in"), b"i").unwrap();
    fs::write(src.join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"b").unwrap();
    fs::write(src.join("fine"), b"f").unwrap();
    std::os::unix::fs::symlink("fine", src.join("link")).unwrap();
    fs::hard_link(src.join("fine"), src.join("hard")).unwrap();
    nix::unistd::mkfifo(
        &src.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = ex.dir.join("r");
    let snap = format!("latest:{}", src.display());
    let o = e.run(&["restore", &snap, "--target", target.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    for (name, c) in [("what?", "'?'"), ("a|b", "'|'")] {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("r/{name}:")))
            .unwrap_or_else(|| panic!("{name}: {err}"));
        assert!(
            line.contains(&format!("the name holds {c}")),
            "{line}\n{err}"
        );
    }
    for (name, why) in [
        ("bad\\xff", "not UTF-8"),
        ("r/link", "makes no symlinks"),
        ("r/hard", "written as a copy of"),
        ("r/pipe", "may hold no FIFOs"),
    ] {
        let line = err.lines().find(|l| l.contains(name)).unwrap();
        assert!(line.contains(why), "{line}");
    }
    assert_eq!(fs::read(target.join("fine")).unwrap(), b"f");
    // exfat-fuse left an empty file under the FIFO's name: removed, not passed off as it.
    assert!(target.join("pipe").symlink_metadata().is_err());
    // The hard link's content is there all the same, with its time.
    assert_eq!(fs::read(target.join("hard")).unwrap(), b"f");
    assert_eq!(
        fs::metadata(target.join("hard"))
            .unwrap()
            .modified()
            .unwrap(),
        fs::metadata(target.join("fine"))
            .unwrap()
            .modified()
            .unwrap()
    );
}

/// A backup of files whose inode numbers changed with a remount, and nothing else, reads them
/// again (their inode is part of what says a file is unchanged, as restic's) and says why,
/// naming `--ignore-inode`; with it they are trusted, and the note is not printed. Before,
/// every backup of an exFAT stick read everything again without a word.
#[test]
fn a_backup_after_a_remount_that_renumbered_files_names_ignore_inode() {
    use std::os::unix::fs::MetadataExt;
    let stdout = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let e = Env::new();
    let Some(ex) = exfat(&e) else { return };
    e.init(&[]);
    let src = ex.dir.join("src");
    fs::create_dir_all(&src).unwrap();
    let names: Vec<PathBuf> = (0..12).map(|i| src.join(format!("f{i:02}"))).collect();
    for (i, n) in names.iter().enumerate() {
        fs::write(n, format!("file {i}\n")).unwrap();
        // Times in the past: a file changed in the second its backup ran is read again
        // anyway (whole-second times cannot tell a later change in that second).
        let t = nix::sys::time::TimeSpec::new(1_700_000_000, 0);
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            n,
            &t,
            &t,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
    }
    let backup = |extra: &[&str]| {
        let mut a = vec!["backup", src.to_str().unwrap()];
        a.extend_from_slice(extra);
        let o = e.run(&a);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        o
    };
    backup(&[]);

    let before = fs::metadata(&names[0]).unwrap().ino();
    let reversed: Vec<PathBuf> = names.iter().rev().cloned().collect();
    ex.remount(&reversed);
    assert_ne!(
        fs::metadata(&names[0]).unwrap().ino(),
        before,
        "this exfat-fuse kept its inode numbers: the test shows nothing"
    );
    let o = backup(&[]);
    let err = stderr(&o);
    assert!(
        err.contains("note: 12 files read again only because their inode numbers")
            && err.contains("--ignore-inode"),
        "{err}"
    );
    assert!(
        stdout(&o).contains("0 new, 12 changed, 0 unmodified"),
        "{}",
        stdout(&o)
    );

    ex.remount(&names);
    let o = backup(&["--ignore-inode"]);
    assert!(!stderr(&o).contains("note:"), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("0 new, 0 changed, 12 unmodified"),
        "{}",
        stdout(&o)
    );
}

/// Restoring as root onto a file system that keeps no owners: the first entry whose owner it
/// refuses is an error saying why, the others are counted in one line, not one error each
/// (a restore of a home folder onto an exFAT stick printed one per file); their contents
/// are restored, and the exit code says something was not (3).
#[test]
fn owners_a_file_system_refuses_are_said_once_and_counted() {
    let e = Env::new();
    let Some(ex) = exfat(&e) else { return };
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    let mut owned = vec![];
    for i in 0..5 {
        let f = src.join(format!("d/f{i}"));
        fs::write(&f, format!("file {i}")).unwrap();
        std::os::unix::fs::lchown(&f, Some(1000 + i), Some(1000)).unwrap();
        owned.push(format!("f{i}"));
    }
    fs::write(src.join("root's"), b"r").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = ex.dir.join("r");
    let snap = format!("latest:{}", src.display());
    let o = e.run(&["restore", &snap, "--target", target.to_str().unwrap()]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(3), "{out}{err}");
    let owner_lines: Vec<&str> = err.lines().filter(|l| l.contains("change owner")).collect();
    assert_eq!(owner_lines.len(), 1, "{err}");
    assert!(
        owner_lines[0].contains("does not let even root set owners"),
        "{err}"
    );
    assert!(
        err.contains("4 more entries whose owner the file system refused"),
        "{err}"
    );
    assert!(out.contains("5 entries could not be restored"), "{out}");
    // Under -q too: errors are not quieted.
    let o = e.run(&["restore", "-q", &snap, "--target", target.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("4 more entries whose owner the file system refused"),
        "{}",
        stderr(&o)
    );
    for (i, name) in owned.iter().enumerate() {
        assert_eq!(
            fs::read_to_string(target.join("d").join(name)).unwrap(),
            format!("file {i}")
        );
    }
    let s: serde_json::Value = {
        let o = e.run(&[
            "restore",
            &snap,
            "--target",
            target.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(o.status.code(), Some(3));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    };
    assert_eq!(s["owners_refused"], 5, "{s}");
}
