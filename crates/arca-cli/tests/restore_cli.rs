//! `arca restore` end to end: dry run, JSON progress and summary, the profile, bad flags,
//! Ctrl-C, a restore killed with SIGKILL and run again, and reflinks on btrfs.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arca_testkit::{compare, is_root, random_bytes};
use common::*;

fn restored(target: &Path, src: &Path) -> PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

fn same_tree(src: &Path, target: &Path) {
    let d = compare::diff_trees(src, &restored(target, src));
    assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));
}

/// 40 files of 250 KiB: enough reads that a slow backend makes the restore take seconds.
fn many_files(src: &Path) {
    fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..40u64 {
        fs::write(src.join(format!("d/f{i:02}")), random_bytes(i, 250_000)).unwrap();
    }
}

fn small_packs(e: &Env) {
    e.init(&[
        "--pack-size",
        "1MiB",
        "--chunk-min",
        "64KiB",
        "--chunk-avg",
        "128KiB",
        "--chunk-max",
        "256KiB",
    ]);
}

#[test]
fn dry_run_json_profile_and_bad_flags() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    small_packs(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();

    let s = e.json(&["restore", "latest", "--target", t, "--json"]);
    assert_eq!(s["message_type"], "summary");
    assert_eq!(s["dry_run"], false);
    assert_eq!(s["files_restored"], 5);
    assert_eq!(s["errors"], 0);
    assert!(s["fetched_bytes"].as_u64().unwrap() > 0);
    assert!(s["plan"]["packs_to_read"].as_u64().unwrap() > 0);
    let stages: Vec<&str> = s["profile"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["name"].as_str().unwrap())
        .collect();
    // A restore this small fits in the page cache's dirty allowance: no direct writes.
    assert_eq!(
        stages,
        ["scheduler", "fetch", "decode+write"],
        "{}",
        s["profile"]
    );
    assert_eq!(s["profile"]["tuning"]["direct_writes"], 0);
    same_tree(&src, &target);
    let forced = e.path("t-direct");
    let d = e.json(&[
        "restore",
        "latest",
        "--target",
        forced.to_str().unwrap(),
        "--json",
        "--direct-io",
        "always",
    ]);
    let stages: Vec<&str> = d["profile"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        ["scheduler", "fetch", "decode+write", "direct write"],
        "{}",
        d["profile"]
    );
    same_tree(&src, &forced);
    for bad in [
        &["--direct-io", "sometimes"][..],
        &["--direct-io", "always", "--no-direct-io"],
    ] {
        let o = e.run(&[&["restore", "latest", "--target", t][..], bad].concat());
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
    }

    // Something extra, something missing: the dry run names both and changes nothing.
    let out = restored(&target, &src);
    fs::write(out.join("extra"), b"x").unwrap();
    fs::remove_file(out.join("top.bin")).unwrap();
    let text = e.ok(&["restore", "latest", "--target", t, "--dry-run", "--delete"]);
    assert!(
        text.contains(&format!(
            "would delete file {}",
            out.join("extra").display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "would restore file {}",
            out.join("top.bin").display()
        )),
        "{text}"
    );
    assert!(
        text.contains("would fetch") && text.contains("delete 1 entry"),
        "{text}"
    );
    assert!(out.join("extra").exists() && !out.join("top.bin").exists());
    let lines = e.ok(&[
        "restore",
        "latest",
        "--target",
        t,
        "--dry-run",
        "--delete",
        "--json",
    ]);
    let objs: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(objs.iter().any(|o| o["message_type"] == "verbose_status"
        && o["action"] == "deleted"
        && o["item"].as_str().unwrap().ends_with("/extra")));
    let sum = objs.last().unwrap();
    assert_eq!(
        (&sum["dry_run"], &sum["plan"]["deletes"]),
        (&true.into(), &1.into())
    );
    assert_eq!(sum["fetched_bytes"], 0);

    // The real restore with --delete, --verify and the profile.
    let text = e.ok(&[
        "restore",
        "latest",
        "--target",
        t,
        "--delete",
        "--verify",
        "--profile",
    ]);
    for want in [
        "decode+write",
        "waiting for input",
        "FAST'13 speed factor",
        "peak block memory",
        "knobs: fetchers",
        "verified 5 files",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    same_tree(&src, &target);
    // Nothing left to do: said so.
    let text = e.ok(&["restore", "latest", "--target", t]);
    assert!(text.contains("nothing to fetch"), "{text}");

    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        t,
        "--overwrite",
        "sometimes",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("sometimes"), "{}", stderr(&o));
    // Bad values are usage errors (2) naming the option.
    let o = e.run(&["restore", "latest", "--target", t, "--fetchers", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'--fetchers <N>'"), "{}", stderr(&o));
    let o = e.run(&["restore", "latest", "--target", t, "--memory", "lots"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("lots"), "{}", stderr(&o));
    // A file where the target directory should be.
    fs::write(e.path("not-a-dir"), b"x").unwrap();
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        e.path("not-a-dir").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not-a-dir"), "{}", stderr(&o));
}

/// Starts a slow restore (every request waits `latency`, one read at a time).
fn slow_restore(e: &Env, target: &Path, latency: &str) -> std::process::Child {
    e.cmd(&[
        "--backend-latency",
        latency,
        "restore",
        "latest",
        "--target",
        target.to_str().unwrap(),
        "--fetchers",
        "1",
        "--read-gap",
        "0",
        "--json",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0)
    .spawn()
    .unwrap()
}

/// Waits until `n` files under `dir` are complete: their mtime, set last, is the source's.
fn wait_for_files(src: &Path, dir: &Path, n: usize, limit: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        let done = arca_testkit::files_under(dir)
            .iter()
            .filter(|p| {
                let orig = src.join(p.strip_prefix(restored(dir, src)).unwrap());
                let (Ok(a), Ok(b)) = (fs::metadata(p), fs::metadata(orig)) else {
                    return false;
                };
                a.modified().ok() == b.modified().ok()
            })
            .count();
        if done >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("restore made no progress within {limit:?}");
}

#[test]
fn ctrl_c_exits_130_and_a_rerun_finishes() {
    let e = Env::new();
    let src = e.path("src");
    many_files(&src);
    small_packs(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let target = e.path("t");
    let child = slow_restore(&e, &target, "40ms");
    wait_for_files(&src, &target, 3, Duration::from_secs(60));
    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
    // A second Ctrl-C before the first is acted on stops at once, and says so (it ended in
    // silence).
    let child = slow_restore(&e, &target, "40ms");
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..2 {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(!stderr(&o).trim().is_empty(), "nothing said");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    same_tree(&src, &target);
}

#[test]
fn a_restore_killed_midway_is_finished_without_fetching_again() {
    let e = Env::new();
    let src = e.path("src");
    many_files(&src);
    small_packs(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let full = e.json(&[
        "restore",
        "latest",
        "--target",
        e.path("full").to_str().unwrap(),
        "--json",
    ]);
    let full_fetched = full["fetched_bytes"].as_u64().unwrap();

    let target = e.path("t");
    let mut child = slow_restore(&e, &target, "40ms");
    wait_for_files(&src, &target, 20, Duration::from_secs(60));
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let done_before = arca_testkit::files_under(&target).len();
    assert!(done_before < 40, "the restore finished before the kill");

    let s = e.json(&[
        "restore",
        "latest",
        "--target",
        target.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(s["errors"], 0);
    let again = s["fetched_bytes"].as_u64().unwrap();
    let in_place = s["plan"]["bytes_in_place"].as_u64().unwrap();
    assert!(in_place >= 20 * 250_000, "{s}");
    assert!(
        again < full_fetched * 6 / 10,
        "the rerun fetched {again} of {full_fetched}: what was in place was fetched again"
    );
    same_tree(&src, &target);
}

/// A loop-mounted btrfs, unmounted on drop.
struct Btrfs {
    mnt: PathBuf,
}

impl Btrfs {
    fn new(dir: &Path) -> Option<Self> {
        let ok = |c: &mut Command| {
            c.stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !is_root() || !ok(Command::new("mkfs.btrfs").arg("--version")) {
            eprintln!("skipped: needs root and mkfs.btrfs (btrfs-progs)");
            return None;
        }
        let img = dir.join("btrfs.img");
        let mnt = dir.join("mnt");
        fs::create_dir_all(&mnt).unwrap();
        fs::File::create(&img).unwrap().set_len(300 << 20).unwrap();
        assert!(ok(Command::new("mkfs.btrfs").args(["-q", "-f"]).arg(&img)));
        if !ok(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt))
        {
            eprintln!("skipped: cannot loop-mount here");
            return None;
        }
        Some(Self { mnt })
    }
}

impl Drop for Btrfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

fn shared_extents(p: &Path) -> bool {
    let o = Command::new("filefrag").arg("-v").arg(p).output().unwrap();
    String::from_utf8_lossy(&o.stdout).contains("shared")
}

#[test]
fn duplicates_share_storage_on_btrfs() {
    let e = Env::new();
    let Some(fs_) = Btrfs::new(e.tmp.path()) else {
        return;
    };
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let data = random_bytes(9, 8 << 20);
    fs::write(src.join("original"), &data).unwrap();
    fs::write(src.join("copy"), &data).unwrap();
    fs::write(src.join("other"), random_bytes(10, 1 << 20)).unwrap();
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let target = fs_.mnt.join("t");
    let s = e.json(&[
        "restore",
        "latest",
        "--target",
        target.to_str().unwrap(),
        "--json",
    ]);
    assert!(s["blocks_copied"].as_u64().unwrap() > 0, "{s}");
    same_tree(&src, &target);
    let out = restored(&target, &src);
    Command::new("sync").status().unwrap();
    assert!(
        shared_extents(&out.join("copy")),
        "the copy does not share extents"
    );
    assert!(shared_extents(&out.join("original")));
    assert!(!shared_extents(&out.join("other")));
}

/// Where extents are shared, a restore that fits thanks to reflinks is not refused for want of
/// the space its files' full sizes would take: files sharing blocks are not reserved whole
/// (320 MiB of copies of one 16 MiB file on a 300 MiB btrfs failed with "No space left").
#[test]
fn copies_beyond_the_free_space_fit_on_btrfs() {
    let e = Env::new();
    let Some(fs_) = Btrfs::new(e.tmp.path()) else {
        return;
    };
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let data = random_bytes(11, 16 << 20);
    for i in 0..20 {
        fs::write(src.join(format!("copy{i:02}")), &data).unwrap();
    }
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let target = fs_.mnt.join("t");
    let o = e.run(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    same_tree(&src, &target);
}

/// A target named through a symlink to a folder restores into that folder, with or without
/// a trailing slash, as restic does; a symlink to nothing is refused naming it.
#[test]
fn a_target_named_through_a_symlink_is_the_folder_it_points_to() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let real = e.path("real");
    fs::create_dir(&real).unwrap();
    let link = e.path("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    e.ok(&["restore", "latest", "--target", link.to_str().unwrap()]);
    same_tree(&src, &real);
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        &format!("{}/", link.display()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing to fetch"));
    let dangling = e.path("dangling");
    std::os::unix::fs::symlink(e.path("nowhere"), &dangling).unwrap();
    let o = e.run(&["restore", "latest", "--target", dangling.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("dangling"), "{}", stderr(&o));
}

/// The summary says what a restore left alone: files kept by `--overwrite never` are counted
/// (not passed off as already right), and patterns that match nothing are warned about.
#[test]
fn the_summary_names_what_was_left_alone() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "latest", "--target", t]);
    let changed = restored(&target, &src).join("top.bin");
    fs::write(&changed, b"changed by the user").unwrap();
    let out = e.ok(&["restore", "latest", "--target", t, "--overwrite", "never"]);
    assert!(
        out.contains("5 files left as they are (--overwrite never)"),
        "{out}"
    );
    assert!(!out.contains("already holds"), "{out}");
    assert_eq!(fs::read(&changed).unwrap(), b"changed by the user");

    // What cannot be restored is said so, not counted as left alone: a folder where the
    // snapshot has a file, and the files of a folder that a file stands in for.
    let blocked = e.path("t3");
    e.ok(&["restore", "latest", "--target", blocked.to_str().unwrap()]);
    let at = restored(&blocked, &src);
    fs::remove_file(at.join("top.bin")).unwrap();
    fs::create_dir(at.join("top.bin")).unwrap();
    fs::remove_dir_all(at.join("docs")).unwrap();
    fs::write(at.join("docs"), b"a file where a folder was").unwrap();
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        blocked.to_str().unwrap(),
        "--overwrite",
        "never",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("3 of the snapshot's files were not restored"),
        "{out}"
    );
    assert!(out.contains("2 files left as they are"), "{out}");
    // Its dry run says so by its exit code too (it exited 0, hunt 12).
    let b = blocked.to_str().unwrap();
    let o = e.run(&["restore", "latest", "--target", b, "--dry-run"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("could not restore 1"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = e.run(&["restore", "latest", "--target", b]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("1 of the snapshot's files was not restored"),
        "{out}"
    );
    // The same failure is not counted again as an entry.
    assert!(!out.contains("could not be restored"), "{out}");
    assert!(!out.contains("left as they are"), "{out}");
    assert!(
        stderr(&o).contains("a directory is in the way"),
        "{}",
        stderr(&o)
    );
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        e.path("t2").to_str().unwrap(),
        "--include",
        "/no/such/path",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("matches the --include/--exclude patterns"),
        "{}",
        stderr(&o)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("already holds"), "{out}");
}

/// `ID:SUBFOLDER` restores that folder's contents directly into the target (restic's form);
/// `--delete` acts inside backed-up folders only, as for the whole snapshot; a folder the
/// snapshot lacks is an error naming it.
#[test]
fn a_subfolder_restores_into_the_target_itself() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let docs = format!("latest:{}/docs", src.display());

    let target = e.path("t");
    e.ok(&["restore", &docs, "--target", target.to_str().unwrap()]);
    let d = compare::diff_trees(&src.join("docs"), &target);
    assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));
    assert!(!target.join("top.bin").exists());

    // Inside the backed-up folder: --delete removes what the snapshot lacks.
    fs::write(target.join("stray"), b"not in the snapshot").unwrap();
    fs::write(target.join("deep/stray"), b"not in the snapshot").unwrap();
    e.ok(&[
        "restore",
        &docs,
        "--target",
        target.to_str().unwrap(),
        "--delete",
    ]);
    assert!(!target.join("stray").exists() && !target.join("deep/stray").exists());
    let d = compare::diff_trees(&src.join("docs"), &target);
    assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));

    // Above the backed-up folder: the folders on the way down were never backed up, and
    // --delete leaves their other entries alone.
    let parent = src.parent().unwrap();
    let above = e.path("above");
    fs::create_dir_all(&above).unwrap();
    fs::write(above.join("keep me"), b"never backed up").unwrap();
    let spec = format!("latest:{}", parent.display());
    e.ok(&[
        "restore",
        &spec,
        "--target",
        above.to_str().unwrap(),
        "--delete",
    ]);
    assert_eq!(fs::read(above.join("keep me")).unwrap(), b"never backed up");
    let d = compare::diff_trees(&src, &above.join("src"));
    assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));

    let o = e.run(&[
        "restore",
        &format!("latest:{}/nope", src.display()),
        "--target",
        e.path("t3").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("/nope is not in snapshot"),
        "{}",
        stderr(&o)
    );
    assert!(!e.path("t3").exists());
}

#[test]
fn a_single_file_restores_into_the_target() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    let odd = OsStr::from_bytes(b"bytes \xff\xfe");
    fs::write(src.join("docs/deep").join(odd), b"not UTF-8").unwrap();
    std::os::unix::fs::symlink("../a.txt", src.join("docs/deep/link")).unwrap();
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let spec = |rel: &[u8]| {
        use std::os::unix::ffi::OsStringExt;
        let mut v = format!("latest:{}/", src.display()).into_bytes();
        v.extend_from_slice(rel);
        std::ffi::OsString::from_vec(v)
    };
    let restore = |rel: &[u8], target: &Path, extra: &[&str]| {
        e.cmd(&["restore"])
            .arg(spec(rel))
            .arg("--target")
            .arg(target)
            .args(extra)
            .output()
            .unwrap()
    };

    // A file lands in the target itself, with its metadata; nothing else comes along.
    let t = e.path("t");
    let o = restore(b"docs/a.txt", &t, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<_> = fs::read_dir(&t)
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![OsStr::new("a.txt")]);
    let (want, got) = (src.join("docs/a.txt"), t.join("a.txt"));
    assert_eq!(fs::read(&got).unwrap(), fs::read(&want).unwrap());
    let (w, g) = (fs::metadata(&want).unwrap(), fs::metadata(&got).unwrap());
    assert_eq!(g.modified().unwrap(), w.modified().unwrap());
    assert_eq!(g.permissions(), w.permissions());

    // A name that is not UTF-8, and a symlink (restored as the link, not followed).
    let mut rel = b"docs/deep/".to_vec();
    rel.extend_from_slice(odd.as_bytes());
    let o = restore(&rel, &t, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(t.join(odd)).unwrap(), b"not UTF-8");
    let o = restore(b"docs/deep/link", &t, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        fs::read_link(t.join("link")).unwrap(),
        Path::new("../a.txt")
    );

    // Run again with --delete: the file is in place, and the entries the restore did not
    // bring are left alone.
    fs::write(t.join("a.txt"), b"changed").unwrap();
    let o = restore(b"docs/a.txt", &t, &["--delete"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        fs::read(t.join("a.txt")).unwrap(),
        fs::read(src.join("docs/a.txt")).unwrap()
    );
    assert!(t.join(odd).exists() && t.join("link").symlink_metadata().is_ok());

    // A path the snapshot does not have, one below a file, and --include are refused.
    for rel in [&b"docs/nope"[..], b"docs/a.txt/x"] {
        let o = restore(rel, &e.path("t2"), &[]);
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        let shown = String::from_utf8_lossy(rel);
        assert!(
            err.contains(&format!("{shown} is not in snapshot")),
            "{err}"
        );
    }
    let o = restore(b"docs/a.txt", &e.path("t2"), &["--include", "*"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--include cannot narrow"),
        "{}",
        stderr(&o)
    );
    // The entry is named byte for byte (it was shown with U+FFFD).
    let o = restore(&rel, &e.path("t2"), &["--include", "*"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("--include cannot narrow") && err.contains("\\x") && !err.contains('\u{fffd}'),
        "{err}"
    );
    assert!(!e.path("t2").exists());
}

/// Attributes a user may not set (trusted.*, as anyone but root) are reported in one error
/// naming each, and the file they belong to counts as one entry not restored.
#[test]
fn an_attribute_not_set_is_named_and_its_file_counted_once() {
    if !is_root() {
        return;
    }
    let e = Env::new();
    let nobody = e.unprivileged();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let f = src.join("f");
    fs::write(&f, b"content").unwrap();
    for (k, v) in [("trusted.a", "1"), ("trusted.b", "2"), ("user.c", "3")] {
        if xattr::set(&f, k, v.as_bytes()).is_err() {
            eprintln!("skipped: no trusted xattrs here");
            return;
        }
    }
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let open = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(e.path(""))
        .status()
        .unwrap();
    assert!(open.success());
    let target = e.path("t");
    fs::create_dir(&target).unwrap();
    std::os::unix::fs::chown(&target, Some(65534), Some(65534)).unwrap();
    let o = e.run_as(
        nobody,
        &[
            "--no-lock",
            "restore",
            "latest",
            "--target",
            target.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    // One error for the namespace, naming both.
    assert_eq!(
        err.matches("(attributes trusted.a, trusted.b): ").count(),
        1,
        "{err}"
    );
    assert_eq!(err.matches("set xattr").count(), 1, "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("1 entry could not be restored"), "{out}");
    let got = restored(&target, &src).join("f");
    assert_eq!(fs::read(&got).unwrap(), b"content");
    assert_eq!(
        xattr::get(&got, "user.c").unwrap().as_deref(),
        Some(&b"3"[..])
    );
}

/// A user who is not root restores again into their own earlier restore, whose folders of
/// mode 000 and 0500 they cannot enter or write: the folders are opened to them while the
/// restore runs, what is missing inside is restored, and the modes are put back.
#[test]
fn a_user_restores_again_into_folders_it_cannot_enter() {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        return; // backing up a folder of mode 000 takes root
    }
    let e = Env::new();
    let nobody = e.unprivileged();
    let src = e.path("src");
    fs::create_dir_all(src.join("closed/sub")).unwrap();
    fs::create_dir_all(src.join("ro")).unwrap();
    fs::write(src.join("closed/f"), b"in a closed folder").unwrap();
    fs::write(src.join("closed/sub/g"), b"deeper").unwrap();
    fs::write(src.join("ro/x"), b"in a read-only folder").unwrap();
    fs::set_permissions(src.join("closed"), fs::Permissions::from_mode(0o000)).unwrap();
    fs::set_permissions(src.join("ro"), fs::Permissions::from_mode(0o500)).unwrap();
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let open = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&e.repo)
        .status()
        .unwrap();
    assert!(open.success());
    let target = e.path("t");
    fs::create_dir(&target).unwrap();
    std::os::unix::fs::chown(&target, Some(65534), Some(65534)).unwrap();
    let restore = || {
        let o = e.run_as(
            nobody,
            &[
                "--no-lock",
                "restore",
                "latest",
                "--target",
                target.to_str().unwrap(),
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    restore();
    let out = restored(&target, &src);
    // Damage inside both folders (as root), then restore again as the user.
    fs::remove_file(out.join("closed/f")).unwrap();
    fs::write(out.join("closed/sub/g"), b"changed").unwrap();
    fs::remove_file(out.join("ro/x")).unwrap();
    // A dry run first: it cannot look inside the closed folder, which the real run opens;
    // it said "cannot restore" for what the real run then restored (hunt 11).
    let o = e.run_as(
        nobody,
        &[
            "--no-lock",
            "restore",
            "latest",
            "--target",
            target.to_str().unwrap(),
            "--dry-run",
            "-v",
        ],
    );
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!said.contains("cannot restore"), "{said}");
    assert!(said.contains("closed/f"), "{said}");
    restore();
    let mode = |p: &str| {
        fs::symlink_metadata(out.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!((mode("closed"), mode("ro")), (0o000, 0o500));
    assert_eq!(
        fs::read(out.join("closed/f")).unwrap(),
        b"in a closed folder"
    );
    assert_eq!(fs::read(out.join("closed/sub/g")).unwrap(), b"deeper");
    assert_eq!(
        fs::read(out.join("ro/x")).unwrap(),
        b"in a read-only folder"
    );
    // A third run finds everything in place.
    restore();
    assert_eq!((mode("closed"), mode("ro")), (0o000, 0o500));

    // The target itself closed: the dry run and the real run both refuse at once, naming
    // it (the dry run promised a full restore, exit 0; the real run failed every entry).
    fs::set_permissions(&target, fs::Permissions::from_mode(0o000)).unwrap();
    for extra in [&["--dry-run"][..], &[]] {
        let mut args = vec![
            "--no-lock",
            "restore",
            "latest",
            "--target",
            target.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = e.run_as(nobody, &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {err}");
        assert!(
            err.contains(target.to_str().unwrap()) && err.contains("cannot list or enter"),
            "{err}"
        );
    }
    fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn case_insensitive_include_and_exclude() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for f in ["Notes.TXT", "ÉTÉ.txt", "photo.JPG", "a.bin"] {
        fs::write(src.join(f), f.as_bytes()).unwrap();
    }
    e.ok(&["backup", src.to_str().unwrap()]);
    let names = |t: &Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(t.join(src.strip_prefix("/").unwrap()))
            .unwrap()
            .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let t1 = e.path("t1");
    e.ok(&[
        "restore",
        "latest",
        "--target",
        t1.to_str().unwrap(),
        "--iinclude",
        "*.txt",
    ]);
    assert_eq!(names(&t1), ["Notes.TXT", "ÉTÉ.txt"]);
    let t2 = e.path("t2");
    let t = t2.to_str().unwrap();
    e.ok(&[
        "restore",
        "latest",
        "--target",
        t,
        "--iexclude",
        "été.TXT",
        "--iexclude",
        "*.jpg",
    ]);
    assert_eq!(names(&t2), ["Notes.TXT", "a.bin"]);
}

/// `--include-file` and `--exclude-file` (and their case-blind forms) read patterns from files
/// as restic 0.17's restore does: one per line, comments and blank lines skipped, merged with
/// the patterns given on the command line; a missing pattern file is named.
#[test]
fn pattern_files_select_what_is_restored() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for (p, body) in [
        ("docs/a.txt", "a"),
        ("docs/b.md", "b"),
        ("docs/C.TXT", "c"),
        ("img/x.png", "x"),
        ("img/y.txt", "y"),
    ] {
        fs::create_dir_all(src.join(p).parent().unwrap()).unwrap();
        fs::write(src.join(p), body).unwrap();
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let files = |target: &Path| -> Vec<String> {
        let mut v: Vec<String> = arca_testkit::files_under(&restored(target, &src))
            .iter()
            .map(|p| {
                p.strip_prefix(restored(target, &src))
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect();
        v.sort();
        v
    };
    let inc = e.path("inc.txt");
    fs::write(&inc, "# text files\n\n*.txt\n").unwrap();
    let exc = e.path("exc.txt");
    fs::write(&exc, "img\n").unwrap();
    let t1 = e.path("t1");
    e.ok(&[
        "restore",
        "latest",
        "--target",
        t1.to_str().unwrap(),
        "--include-file",
        inc.to_str().unwrap(),
        "--exclude-file",
        exc.to_str().unwrap(),
        "--include",
        "*.md",
    ]);
    assert_eq!(files(&t1), ["docs/a.txt", "docs/b.md"]);
    let t2 = e.path("t2");
    e.ok(&[
        "restore",
        "latest",
        "--target",
        t2.to_str().unwrap(),
        "--iinclude-file",
        inc.to_str().unwrap(),
        "--iexclude-file",
        exc.to_str().unwrap(),
    ]);
    assert_eq!(files(&t2), ["docs/C.TXT", "docs/a.txt"]);
    let missing = e.path("nope.txt");
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        e.path("t3").to_str().unwrap(),
        "--include-file",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(missing.to_str().unwrap()),
        "{}",
        stderr(&o)
    );
    assert!(!e.path("t3").exists(), "nothing restored");
}

/// A file repaired in place whose damage lies in zeros that fill only part of a 4 KiB block
/// (its zero tail) is whole afterwards, in the default mode and with `--overwrite always`:
/// those zeros were skipped as if they were a hole, the old bytes stayed, and the file was
/// called updated (hunt 12).
#[test]
fn damage_in_zeros_that_fill_part_of_a_block_is_repaired() {
    use std::os::unix::fs::FileExt;
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let mut content = random_bytes(11, 3000);
    content.resize(6000, 0);
    fs::write(src.join("f"), &content).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "latest", "--target", t]);
    let f = restored(&target, &src).join("f");
    for mode in ["if-changed", "always"] {
        let mtime = fs::metadata(&f).unwrap().modified().unwrap();
        let file = fs::OpenOptions::new().write(true).open(&f).unwrap();
        file.write_all_at(b"X", 5000).unwrap();
        if mode == "always" {
            file.set_modified(mtime).unwrap();
        }
        drop(file);
        e.ok(&["restore", "latest", "--target", t, "--overwrite", mode]);
        assert!(fs::read(&f).unwrap() == content, "{mode}: still damaged");
    }
}

/// A dry run exits 3 when the real run would, also when what it cannot restore is a folder
/// with no file in it (hunt 13: an empty folder replaced by a file in the target, with
/// `--overwrite never`, gave exit 0 in the dry run and 3 in the real run).
#[test]
fn a_dry_run_exits_as_the_real_run_for_a_blocked_folder_without_files() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("empty")).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "--target", t]);
    let empty = restored(&target, &src).join("empty");
    fs::remove_dir(&empty).unwrap();
    fs::write(&empty, b"a file").unwrap();
    let args = ["restore", "latest", "--target", t, "--overwrite", "never"];
    let dry = e.run(&[&args[..], &["--dry-run"]].concat());
    let real = e.run(&args);
    assert_eq!(real.status.code(), Some(3), "{}", stderr(&real));
    assert_eq!(dry.status.code(), Some(3), "{}", stderr(&dry));
}
