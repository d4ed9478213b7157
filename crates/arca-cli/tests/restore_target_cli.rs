//! Restoring into a target that holds more than the snapshot: attributes and ACL entries the
//! snapshot lacks are removed (they would keep granting access), an extra entry that
//! `--delete` cannot remove is reported as not deleted, and a symlinked folder above the
//! backed-up paths (`/lib -> usr/lib`) is restored through.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use arca_testkit::is_root;
use common::*;

fn restored(target: &Path, src: &Path) -> PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

fn names(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = xattr::list(p)
        .unwrap()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n != "security.selinux")
        .collect();
    v.sort();
    v
}

#[test]
fn attributes_the_snapshot_lacks_do_not_survive_a_restore() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/f"), b"hi").unwrap();
    if xattr::set(src.join("d/f"), "user.kept", b"1").is_err() {
        eprintln!("no user xattrs here: skipped");
        return;
    }
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "latest", "--target", t]);
    let f = restored(&target, &src).join("d/f");
    let d = restored(&target, &src).join("d");
    assert_eq!(names(&f), ["user.kept"]);
    // Someone adds an attribute to the file and an ACL entry for another user to the folder
    // (where setfacl exists); the next restore takes them away again.
    xattr::set(&f, "user.stale", b"x").unwrap();
    xattr::set(&d, "user.stale", b"x").unwrap();
    let acl = Command::new("setfacl")
        .args(["-m", "u:nobody:rwx"])
        .arg(&d)
        .status()
        .is_ok_and(|s| s.success());
    if acl {
        assert!(names(&d).contains(&"system.posix_acl_access".to_string()));
    }
    let out = e.ok(&["restore", "latest", "--target", t]);
    assert!(out.contains("nothing to fetch"), "{out}");
    assert_eq!(names(&f), ["user.kept"]);
    assert!(names(&d).is_empty(), "{:?}", names(&d));
    // A restore that finds them reports the metadata it fixed, also in a dry run.
    xattr::set(&f, "user.stale", b"x").unwrap();
    let dry = e.json(&["restore", "latest", "--target", t, "--dry-run", "--json"]);
    assert_eq!(dry["plan"]["files_metadata"], 1, "{dry}");
    assert_eq!(names(&f), ["user.kept", "user.stale"]);
    // A file that is hashed (`--overwrite always`), its mode and times right, has its
    // attributes looked at through the open file: the extra one goes, the changed value
    // comes back.
    xattr::set(&f, "user.kept", b"changed").unwrap();
    let mtime = fs::metadata(&f).unwrap().modified().unwrap();
    let out = e.ok(&["restore", "latest", "--target", t, "--overwrite", "always"]);
    assert!(out.contains("nothing to fetch"), "{out}");
    assert_eq!(names(&f), ["user.kept"]);
    assert_eq!(
        xattr::get(&f, "user.kept").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(fs::metadata(&f).unwrap().modified().unwrap(), mtime);
}

/// A folder whose only difference is an attribute (mode and times right) loses it on the next
/// restore: the finish skips listing a folder's attributes again only where the scan found
/// them right, not for every folder that exists.
#[test]
fn a_folder_wrong_only_in_its_attributes_is_fixed() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/f"), b"hi").unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "latest", "--target", t]);
    let d = restored(&target, &src).join("d");
    if xattr::set(&d, "user.stale", b"x").is_err() {
        eprintln!("no user xattrs here: skipped");
        return;
    }
    let out = e.ok(&["restore", "latest", "--target", t]);
    assert!(out.contains("nothing to fetch"), "{out}");
    assert!(names(&d).is_empty(), "{:?}", names(&d));
}

#[test]
fn an_entry_delete_cannot_remove_is_reported_as_not_deleted() {
    if !is_root() {
        eprintln!("needs root for chattr +i: skipped");
        return;
    }
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"hi").unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "latest", "--target", t]);
    let extra = restored(&target, &src).join("extra");
    fs::write(&extra, b"x").unwrap();
    let pinned = Command::new("chattr")
        .arg("+i")
        .arg(&extra)
        .status()
        .is_ok_and(|s| s.success());
    if !pinned {
        eprintln!("chattr +i refused here: skipped");
        return;
    }
    let o = e.run(&["restore", "latest", "--target", t, "--delete", "--json"]);
    let _ = Command::new("chattr").arg("-i").arg(&extra).status();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("delete {}", extra.display())),
        "the error names the deletion: {err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(summary["plan"]["deletes"], 0, "{summary}");
    assert_eq!(summary["plan"]["deletes_failed"], 1, "{summary}");
    let text = e.run(&["restore", "latest", "--target", t, "--delete"]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains("deleted 1 entry"), "{text}");
    assert!(!extra.exists());

    // Inside a folder to delete: the error names the file (it named the folder), and what
    // could go went.
    let folder = restored(&target, &src).join("extra-folder");
    fs::create_dir_all(folder.join("sub")).unwrap();
    fs::write(folder.join("sub/free"), b"x").unwrap();
    let locked = folder.join("sub/locked");
    fs::write(&locked, b"x").unwrap();
    assert!(
        Command::new("chattr")
            .arg("+i")
            .arg(&locked)
            .status()
            .unwrap()
            .success()
    );
    let o = e.run(&["restore", "latest", "--target", t, "--delete"]);
    let _ = Command::new("chattr").arg("-i").arg(&locked).status();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "delete {0} (it is immutable (`chattr -i` lifts it)): Operation not permitted",
            locked.display()
        )),
        "{}",
        stderr(&o)
    );
    assert!(!folder.join("sub/free").exists());
}

/// A metadata fix changes only what differs: on an append-only file whose access time alone
/// was wrong, the restore also tried to change its owner and mode, and reported those
/// failures too.
#[test]
fn a_metadata_fix_changes_only_what_differs() {
    if !is_root() {
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"log").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    let f = restored(&target, &src).join("f");
    let set = |flag: &str| {
        Command::new("chattr")
            .arg(flag)
            .arg(&f)
            .status()
            .is_ok_and(|s| s.success())
    };
    let t = nix::sys::time::TimeSpec::new(1_000_000_000, 0);
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &f,
        &t,
        &nix::sys::time::TimeSpec::UTIME_OMIT,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
    if !set("+a") {
        return; // no append-only flag on this file system
    }
    let o = e.run(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    set("-a");
    let err = stderr(&o);
    assert!(!err.contains("change owner"), "{err}");
    assert!(!err.contains("change mode"), "{err}");
}

/// A folder above the backed-up paths that the target has as a symlink to a folder inside it
/// (`/lib -> usr/lib` of a merged-/usr system, for a backup of `/lib/os-release`) is restored
/// through, as restic does, and the link stays; the restore replaced it with a folder holding
/// only the snapshot's file, which with `--target /` breaks the system. A link leading out
/// of the target is not followed: nothing is written outside.
#[test]
fn a_symlinked_folder_above_the_backup_is_restored_through() {
    let e = Env::new();
    let base = e.path("m");
    fs::create_dir_all(base.join("usr/lib")).unwrap();
    fs::write(base.join("usr/lib/os-release"), b"ID=arca").unwrap();
    std::os::unix::fs::symlink("usr/lib", base.join("lib")).unwrap();
    e.init(&[]);
    let file = base.join("lib/os-release");
    e.ok(&["backup", "-q", file.to_str().unwrap()]);

    // The target mirrors the machine: the link, and more in the folder it leads to.
    let target = e.path("t");
    let root = restored(&target, &base);
    fs::create_dir_all(root.join("usr/lib")).unwrap();
    fs::write(root.join("usr/lib/libc.so"), b"elf").unwrap();
    std::os::unix::fs::symlink("usr/lib", root.join("lib")).unwrap();
    let t = target.to_str().unwrap();
    let dry = e.ok(&["restore", "latest", "--target", t, "--dry-run", "-v"]);
    assert!(!dry.contains("would restore dir"), "{dry}");
    e.ok(&["restore", "latest", "--target", t]);
    assert!(fs::symlink_metadata(root.join("lib")).unwrap().is_symlink());
    assert_eq!(
        fs::read(root.join("usr/lib/os-release")).unwrap(),
        b"ID=arca"
    );
    assert_eq!(fs::read(root.join("usr/lib/libc.so")).unwrap(), b"elf");
    // Again: nothing to do, the link kept.
    // (Reading the file above moved its access time: that alone is put back.)
    let out = e.ok(&["restore", "latest", "--target", t]);
    assert!(out.contains("(0 new, 0 updated"), "{out}");
    assert!(fs::symlink_metadata(root.join("lib")).unwrap().is_symlink());

    // A link leading out of the target is replaced by the folder; outside stays as it was.
    let outside = e.path("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::remove_file(root.join("lib")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("lib")).unwrap();
    e.ok(&["restore", "latest", "--target", t]);
    assert!(
        fs::read_dir(&outside).unwrap().next().is_none(),
        "written outside"
    );
    assert!(fs::symlink_metadata(root.join("lib")).unwrap().is_dir());
    assert_eq!(fs::read(root.join("lib/os-release")).unwrap(), b"ID=arca");
}

/// Through such a link, two of the snapshot's entries would be one file (an old system's
/// `/lib/x` and `/usr/lib/x` restored onto a merged /usr), or files would land in a backed-up
/// folder: both were written into one inode, a mix of the two, exit 0, and `--delete`
/// deleted what landed in the backed-up folder while calling it unchanged (hunt 19). The
/// link is not restored through, nor replaced; its entries are reported, exit 3, and
/// nothing else changes. Entries that do not meet still go through.
#[test]
fn a_symlinked_folder_that_would_merge_two_of_the_snapshots_is_not_restored_through() {
    let e = Env::new();
    let base = e.path("m");
    for d in ["lib", "usr/lib", "usr/share"] {
        fs::create_dir_all(base.join(d)).unwrap();
    }
    fs::write(base.join("lib/x"), b"old lib x").unwrap();
    fs::write(base.join("lib/only"), b"only in lib").unwrap();
    fs::write(base.join("usr/lib/x"), b"usr lib x, longer").unwrap();
    fs::write(base.join("usr/share/s"), b"share").unwrap();
    e.init(&[]);
    let arg = |p: &str| base.join(p).to_str().unwrap().to_string();
    e.ok(&["backup", "-q", &arg("lib/x"), &arg("usr/lib/x")]);
    e.ok(&["backup", "-q", &arg("lib/only"), &arg("usr/lib/x")]);
    e.ok(&["backup", "-q", &arg("lib/only"), &arg("usr")]);
    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let id = |i: usize| snaps[i]["id"].as_str().unwrap().to_string();

    let target = e.path("t");
    let t = target.to_str().unwrap();
    let root = restored(&target, &base);
    let fresh = || {
        let _ = fs::remove_dir_all(&target);
        fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::os::unix::fs::symlink("usr/lib", root.join("lib")).unwrap();
    };
    // Same name on both sides: not through the link, the other one whole.
    fresh();
    let o = e.run(&["restore", &id(0), "--target", t]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("not restored through this symlink"), "{err}");
    assert!(
        err.contains(&format!("{}/lib/x would be the snapshot's", root.display())),
        "{err}"
    );
    assert_eq!(
        fs::read(root.join("usr/lib/x")).unwrap(),
        b"usr lib x, longer"
    );
    assert!(fs::symlink_metadata(root.join("lib")).unwrap().is_symlink());
    let dry = e.run(&["restore", &id(0), "--target", t, "--dry-run"]);
    assert_eq!(dry.status.code(), Some(3), "{}", stderr(&dry));

    // Different names: restored through, as before, and stays so.
    fresh();
    e.ok(&["restore", &id(1), "--target", t]);
    assert_eq!(fs::read(root.join("usr/lib/only")).unwrap(), b"only in lib");
    assert_eq!(
        fs::read(root.join("usr/lib/x")).unwrap(),
        b"usr lib x, longer"
    );
    let out = e.ok(&["restore", &id(1), "--target", t, "--delete"]);
    assert!(out.contains("(0 new, 0 updated"), "{out}");
    assert_eq!(fs::read(root.join("usr/lib/only")).unwrap(), b"only in lib");

    // Into a backed-up folder: `--delete` there never removes what came through the link.
    fresh();
    for _ in 0..3 {
        let o = e.run(&["restore", &id(2), "--target", t, "--delete"]);
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("inside the snapshot's backed-up "),
            "{}",
            stderr(&o)
        );
        assert!(!root.join("usr/lib/only").exists());
        assert_eq!(
            fs::read(root.join("usr/lib/x")).unwrap(),
            b"usr lib x, longer"
        );
        assert_eq!(fs::read(root.join("usr/share/s")).unwrap(), b"share");
        assert!(fs::symlink_metadata(root.join("lib")).unwrap().is_symlink());
    }

    // Into a backed-up file the target has as a folder: `--delete` replaced that folder,
    // and with it the snapshot's file the restore had put there through the link, exit 0
    // for it (hunt 21).
    e.ok(&["backup", "-q", &arg("usr/share/s"), &arg("lib/only")]);
    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let last = snaps[3]["id"].as_str().unwrap().to_string();
    let _ = fs::remove_dir_all(&target);
    fs::create_dir_all(root.join("usr/share/s")).unwrap();
    std::os::unix::fs::symlink("usr/share/s", root.join("lib")).unwrap();
    let o = e.run(&["restore", &last, "--target", t, "--delete"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("not restored through this symlink"), "{err}");
    assert!(err.contains("would be the snapshot's backed-up "), "{err}");
    // The folder became the snapshot's file; the link, now to a file, is replaced by the
    // snapshot's folder on the next run.
    e.ok(&["restore", &last, "--target", t, "--delete"]);
    assert_eq!(fs::read(root.join("lib/only")).unwrap(), b"only in lib");
    assert_eq!(fs::read(root.join("usr/share/s")).unwrap(), b"share");

    // A folder of one name on both sides is no clash by itself: its files differ (hunt 21).
    for (d, f) in [("lib/sub", "f1"), ("usr/lib/sub", "f2")] {
        fs::create_dir_all(base.join(d)).unwrap();
        fs::write(base.join(d).join(f), f.as_bytes()).unwrap();
    }
    let v: serde_json::Value = serde_json::from_str(&e.ok(&[
        "backup",
        "-q",
        "--json",
        &arg("lib/only"),
        &arg("lib/sub/f1"),
        &arg("usr/lib/sub/f2"),
    ]))
    .unwrap();
    let sub = v["snapshot_id"].as_str().unwrap().to_string();
    fresh();
    e.ok(&["restore", &sub, "--target", t]);
    assert_eq!(fs::read(root.join("usr/lib/only")).unwrap(), b"only in lib");
    assert_eq!(fs::read(root.join("usr/lib/sub/f1")).unwrap(), b"f1");
    assert_eq!(fs::read(root.join("usr/lib/sub/f2")).unwrap(), b"f2");
    assert!(fs::symlink_metadata(root.join("lib")).unwrap().is_symlink());
}

/// A hard link of the snapshot whose first name the restore leaves as it is (`--overwrite
/// never` keeps a symlink there) is not linked to it: the missing second name became that
/// symlink (to a file outside the target), exit 0. It is reported, exit 3.
#[test]
fn a_hard_link_is_not_made_to_a_kept_symlink() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"hello").unwrap();
    fs::hard_link(src.join("a"), src.join("b")).unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    let root = restored(&target, &src);
    fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", root.join("a")).unwrap();
    for mode in ["never", "if-newer"] {
        let _ = fs::remove_file(root.join("b"));
        let o = e.run(&["restore", "latest", "--target", t, "--overwrite", mode]);
        assert_eq!(o.status.code(), Some(3), "{mode}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("is a symlink, left as it was"),
            "{}",
            stderr(&o)
        );
        assert!(
            fs::symlink_metadata(root.join("b")).is_err(),
            "{mode}: b made"
        );
        assert!(fs::symlink_metadata(root.join("a")).unwrap().is_symlink());
    }
    // The default mode replaces the symlink, and links both names again.
    e.ok(&["restore", "latest", "--target", t]);
    assert_eq!(fs::read(root.join("b")).unwrap(), b"hello");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        fs::metadata(root.join("a")).unwrap().ino(),
        fs::metadata(root.join("b")).unwrap().ino()
    );
}

/// A restore that repairs a block of a sparse file in place keeps the block's zero pages as
/// holes, as a first restore does: the repaired chunk's zeros were written as data (3 MiB
/// allocated where 1 MiB was needed).
#[test]
fn a_repair_in_place_keeps_a_sparse_file_sparse() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let f = fs::File::create(src.join("sparse")).unwrap();
    f.set_len(100 << 20).unwrap();
    f.write_all_at(&arca_testkit::random_bytes(3, 1 << 20), 50 << 20)
        .unwrap();
    drop(f);
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "--target", t]);
    let file = restored(&target, &src).join("sparse");
    let first = fs::metadata(&file).unwrap().blocks();
    if first * 512 > 4 << 20 {
        eprintln!("no holes on this file system: skipped");
        return;
    }
    // A page of the data goes bad; the restore puts it right.
    let g = fs::OpenOptions::new().write(true).open(&file).unwrap();
    g.write_all_at(&[0x55; 4096], (50 << 20) + 5 * 4096)
        .unwrap();
    g.sync_all().unwrap();
    drop(g);
    let out = e.ok(&["restore", "latest", "--target", t]);
    assert!(out.contains("1 updated"), "{out}");
    assert!(
        fs::read(&file).unwrap() == fs::read(src.join("sparse")).unwrap(),
        "repaired wrong"
    );
    let after = fs::metadata(&file).unwrap().blocks();
    assert!(
        after <= first + 8,
        "the repair allocated zeros: {first} blocks before, {after} after"
    );
}

/// A `!` include takes back part of a folder an earlier include selected, as restic's does:
/// that part is neither restored over nor emptied by `--delete` (arca overwrote `mine/notes`
/// and deleted `mine/draft`, exit 0).
#[test]
fn a_negated_include_protects_what_it_takes_back() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("keep")).unwrap();
    fs::create_dir_all(src.join("mine")).unwrap();
    fs::write(src.join("keep/f"), b"data").unwrap();
    fs::write(src.join("mine/notes"), b"snap").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "--target", t]);
    let out = restored(&target, &src);
    fs::write(out.join("mine/notes"), b"my newer notes").unwrap();
    fs::write(out.join("mine/draft"), b"my draft").unwrap();
    fs::write(out.join("keep/f"), b"changed").unwrap();
    let s = src.to_str().unwrap();
    let mine = format!("!{s}/mine");
    e.ok(&[
        "restore",
        "latest",
        "--target",
        t,
        "--include",
        s,
        "--include",
        &mine,
        "--delete",
    ]);
    assert_eq!(fs::read(out.join("mine/notes")).unwrap(), b"my newer notes");
    assert_eq!(fs::read(out.join("mine/draft")).unwrap(), b"my draft");
    assert_eq!(
        fs::read(out.join("keep/f")).unwrap(),
        b"data",
        "the rest is restored"
    );
}

/// `--delete` inside a backed-up folder whose name is not UTF-8: the snapshot lists the path
/// with the bytes replaced, and nothing inside was found to be backed up (a stale file stayed,
/// "deleted 0 entries", exit 0).
#[test]
fn delete_works_below_a_backed_up_path_that_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src").join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"1").unwrap();
    let o = e.cmd(&["backup", "-q"]).arg(&src).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "--target", t]);
    let stale = restored(&target, &src).join("stale");
    fs::write(&stale, b"x").unwrap();
    let out = e.ok(&["restore", "latest", "--target", t, "--delete"]);
    assert!(out.contains("deleted 1 entry"), "{out}");
    assert!(!stale.exists());
    assert_eq!(fs::read(restored(&target, &src).join("f")).unwrap(), b"1");
    // And with the folder named as SNAPSHOT:FOLDER.
    let inner = e.path("inner");
    let mut spec = std::ffi::OsString::from("latest:");
    spec.push(&src);
    let o = e
        .cmd(&["restore", "-q", "--target", inner.to_str().unwrap()])
        .arg(&spec)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    fs::write(inner.join("stale"), b"x").unwrap();
    let o = e
        .cmd(&["restore", "--delete", "--target", inner.to_str().unwrap()])
        .arg(&spec)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !inner.join("stale").exists(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(fs::read(inner.join("f")).unwrap(), b"1");
}

/// A hard link already in place is left, and said so: a dry run said "would restore
/// hardlink" for it after a full restore, and `-v` "restore hardlink".
#[test]
fn a_hard_link_in_place_is_left() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("x")).unwrap();
    fs::create_dir_all(src.join("y")).unwrap();
    fs::write(src.join("x/h1"), b"hl").unwrap();
    fs::hard_link(src.join("x/h1"), src.join("y/h2")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "--target", t]);
    let dry = e.ok(&["restore", "latest", "--target", t, "--dry-run"]);
    assert!(dry.contains("leave hardlink"), "{dry}");
    assert!(!dry.contains("restore hardlink"), "{dry}");
    // A name that is another file is linked again: an update of that name.
    let h2 = restored(&target, &src).join("y/h2");
    fs::remove_file(&h2).unwrap();
    fs::write(&h2, b"hl").unwrap();
    let dry = e.ok(&["restore", "latest", "--target", t, "--dry-run"]);
    assert!(dry.contains("would update hardlink"), "{dry}");
    e.ok(&["restore", "-q", "latest", "--target", t]);
    use std::os::unix::fs::MetadataExt;
    let ino = |p: &Path| fs::metadata(p).unwrap().ino();
    assert_eq!(ino(&h2), ino(&restored(&target, &src).join("x/h1")));
}

/// A target whose file system takes no attributes (ramfs): the file's content is whole, so it
/// keeps its other hard-link names and its mtime, and the refused attributes are one error per
/// entry. The second name was never made ("not linked: … was not restored"), the file was
/// dated 1970 as if unfinished, and each of its 40 attributes printed its own error.
#[test]
fn attributes_the_target_refuses_fail_neither_the_content_nor_the_links() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"content").unwrap();
    fs::hard_link(src.join("a"), src.join("b")).unwrap();
    for i in 0..40 {
        if xattr::set(src.join("a"), format!("user.k{i}"), b"v").is_err() {
            eprintln!("no user xattrs here: skipped");
            return;
        }
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    fs::create_dir_all(&target).unwrap();
    if !is_root()
        || nix::mount::mount(
            Some("ramfs"),
            &target,
            Some("ramfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .is_err()
    {
        eprintln!("cannot mount a ramfs here: skipped");
        return;
    }
    let _unmount = Unmount(&target);
    let t = target.to_str().unwrap();
    for pass in 0..2 {
        let o = e.run(&["restore", "-q", "latest", "-t", t]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "pass {pass}: {err}");
        assert_eq!(err.matches("set xattr").count(), 1, "pass {pass}: {err}");
        assert!(!err.contains("not linked"), "pass {pass}: {err}");
        let back = restored(&target, &src);
        let (a, b) = (
            fs::metadata(back.join("a")).unwrap(),
            fs::metadata(back.join("b")).unwrap(),
        );
        use std::os::unix::fs::MetadataExt;
        assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "pass {pass}");
        assert_eq!(fs::read(back.join("b")).unwrap(), b"content");
        let orig = fs::metadata(src.join("a")).unwrap();
        assert_eq!(
            (a.mtime(), a.mtime_nsec()),
            (orig.mtime(), orig.mtime_nsec()),
            "pass {pass}"
        );
    }
}

/// A folder that cannot be made (a user restoring into a folder root owns) is one error:
/// what lies inside is not tried, nor is metadata set on the missing folder, and the summary
/// does not count it. It printed an error for each entry inside and four more for the
/// folder's owner, attributes, mode and times, and counted everything as restored.
#[test]
fn a_folder_that_cannot_be_made_is_one_error() {
    use std::os::unix::fs::PermissionsExt;
    let e = Env::new();
    let Some(nobody) = e.unprivileged() else {
        return;
    };
    let src = e.path("src");
    fs::create_dir_all(src.join("d/sub/deep")).unwrap();
    fs::write(src.join("d/sub/deep/f1"), b"one").unwrap();
    fs::write(src.join("d/sub/f2"), vec![7u8; 300_000]).unwrap();
    fs::hard_link(src.join("d/sub/f2"), src.join("d/sub/f2-link")).unwrap();
    std::os::unix::fs::symlink("f2", src.join("d/sub/ln")).unwrap();
    fs::create_dir_all(src.join("e")).unwrap();
    fs::write(src.join("e/f3"), b"three").unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let open = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(e.path(""))
        .status()
        .unwrap();
    assert!(open.success());
    let target = e.path("t");
    let back = restored(&target, &src);
    // Every folder down to the backed-up one is the user's, but d, which root keeps.
    fs::create_dir_all(back.join("d")).unwrap();
    let mut p = back.clone();
    while p != e.path("") {
        std::os::unix::fs::chown(&p, Some(nobody), Some(nobody)).unwrap();
        p.pop();
    }
    fs::set_permissions(back.join("d"), fs::Permissions::from_mode(0o755)).unwrap();
    let o = e.run_as(
        Some(nobody),
        &[
            "--no-lock",
            "restore",
            "latest",
            "--target",
            target.to_str().unwrap(),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(err.matches("/d/sub").count(), 1, "{err}");
    assert!(err.contains("create directory"), "{err}");
    assert_eq!(fs::read(back.join("e/f3")).unwrap(), b"three");
    let out = String::from_utf8_lossy(&o.stdout);
    // Restored: the root's folders down to src, src, d and e; not sub and deep, nor the
    // symlink and hard link inside.
    assert!(out.contains(" 0 other, 0 hard links"), "{out}");
}

/// A dry run changes nothing: reading the target's symlinks moved their access times (the
/// real run puts them back, a dry run did not). A symlink `--delete` would remove is named as
/// one (it was called a file).
#[test]
fn a_dry_run_leaves_symlink_times_alone_and_names_what_it_would_delete() {
    use std::os::unix::fs::MetadataExt;
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    std::os::unix::fs::symlink("f", src.join("ln")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "-t", t]);
    let back = restored(&target, &src);
    // Older than its mtime: relatime moves it on the next read.
    arca_testkit::generate::set_times(&back.join("ln"), (1000, 0), (2000, 0)).unwrap();
    std::os::unix::fs::symlink("f", back.join("extra")).unwrap();
    let o = e.ok(&["restore", "--dry-run", "--delete", "latest", "-t", t]);
    let m = fs::symlink_metadata(back.join("ln")).unwrap();
    assert_eq!((m.atime(), m.mtime()), (1000, 2000));
    assert!(
        o.contains(&format!(
            "would delete symlink {}",
            back.join("extra").display()
        )),
        "{o}"
    );
}

/// A read-only mount inside the target fails what lies on it, each named; the rest of the
/// target is restored. It stopped the whole restore (exit 1, "target …/ro/new: Read-only
/// file system"), leaving files elsewhere unwritten.
#[test]
fn a_read_only_mount_inside_the_target_fails_only_what_is_on_it() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for d in ["ro", "rw"] {
        fs::create_dir_all(src.join(d)).unwrap();
    }
    fs::write(src.join("ro/new"), b"cannot land").unwrap();
    fs::write(src.join("rw/x"), b"lands").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let back = restored(&target, &src);
    let ro = back.join("ro");
    fs::create_dir_all(&ro).unwrap();
    let bind = |flags| {
        nix::mount::mount(
            Some(&ro),
            &ro,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND | flags,
            None::<&str>,
        )
    };
    if !is_root() || bind(nix::mount::MsFlags::empty()).is_err() {
        eprintln!("cannot bind-mount here: skipped");
        return;
    }
    let _unmount = Unmount(&ro);
    bind(nix::mount::MsFlags::MS_REMOUNT | nix::mount::MsFlags::MS_RDONLY).unwrap();
    let o = e.run(&["restore", "latest", "-t", target.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("{}", ro.join("new").display())),
        "{err}"
    );
    assert_eq!(fs::read(back.join("rw/x")).unwrap(), b"lands");
    // A target that is read-only as a whole still stops the restore at once, naming it.
    fs::remove_file(back.join("rw/x")).unwrap();
    for flags in [
        nix::mount::MsFlags::MS_BIND,
        nix::mount::MsFlags::MS_BIND
            | nix::mount::MsFlags::MS_REMOUNT
            | nix::mount::MsFlags::MS_RDONLY,
    ] {
        nix::mount::mount(Some(&target), &target, None::<&str>, flags, None::<&str>).unwrap();
    }
    let _unmount_target = Unmount(&target);
    let o = e.run(&["restore", "latest", "-t", target.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("target {}: Read-only", target.display())),
        "{err}"
    );
}

/// The repository inside the folder a restore rolls back (hunt 11): `--delete` deleted it when
/// it was excluded from the backup (exit 0), or deleted the snapshot being restored when it
/// was backed up with the folder (its copy in the snapshot predates that snapshot's files), and
/// a target inside the repository had the repository's files deleted. It is now left alone, and
/// a target inside it is refused before anything is touched.
#[test]
fn a_restore_never_writes_into_nor_deletes_its_own_repository() {
    let mut e = Env::new();
    e.repo = e.path("data/repo");
    let data = e.path("data");
    fs::create_dir_all(&data).unwrap();
    fs::write(data.join("a"), b"one").unwrap();
    e.init(&[]);
    let d = data.to_str().unwrap();
    let folder = format!("latest:{d}");
    let snapshots = |e: &Env| e.json(&["snapshots", "--json"]).as_array().unwrap().len();
    // Excluded from the backup: the snapshot lacks it, so --delete took it for extra.
    e.ok(&["backup", "-q", d, "--exclude", e.repo.to_str().unwrap()]);
    fs::write(data.join("a"), b"changed").unwrap();
    let out = e.ok(&["restore", &folder, "--target", d, "--delete"]);
    assert!(out.contains("deleted 0 entries"), "{out}");
    assert_eq!(fs::read(data.join("a")).unwrap(), b"one");
    assert_eq!(snapshots(&e), 1);
    // Backed up with the folder: the snapshot's copy of the repository lacks the files the
    // backup wrote after listing it, its own snapshot among them.
    e.ok(&["backup", "-q", d]);
    fs::write(data.join("a"), b"changed again").unwrap();
    let o = e.run(&["restore", &folder, "--target", d, "--delete"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the repository this restore reads from; left as it is"),
        "{}",
        stderr(&o)
    );
    assert_eq!(fs::read(data.join("a")).unwrap(), b"one");
    assert_eq!(snapshots(&e), 2);
    e.ok(&["check", "--read-data"]);
    // A target that is the repository, or lies inside it, is refused.
    for t in [
        e.repo.clone(),
        e.repo.join("data"),
        e.repo.join("new/folder"),
    ] {
        let o = e.run(&[
            "restore",
            &folder,
            "--target",
            t.to_str().unwrap(),
            "--delete",
        ]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("inside the repository"),
            "{}",
            stderr(&o)
        );
    }
    assert!(!e.repo.join("new").exists());
    // However the target names it (hunt 14): through a folder the restore would create and
    // `..` (the whole repository was deleted), or a bind mount of the folder holding it.
    let around = e.path("data/missing/../repo");
    let o = e.run(&[
        "restore",
        &folder,
        "--target",
        around.to_str().unwrap(),
        "--delete",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!e.path("data/missing").exists());
    let view = e.path("view");
    fs::create_dir_all(&view).unwrap();
    let bound = arca_testkit::is_root()
        && Command::new("mount")
            .arg("--bind")
            .args([&data, &view])
            .status()
            .is_ok_and(|s| s.success());
    if bound {
        let _unmount = Unmount(&view);
        let v = view.to_str().unwrap();
        let o = e.run(&["restore", &folder, "--target", v, "--delete"]);
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("the repository this restore reads from"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(snapshots(&e), 2);
    e.ok(&["check", "--read-data"]);
}

/// A `--reuse-from` that is missing or not a folder (a typo) is refused, naming it, before
/// anything is read: it was taken in silence, and every block fetched (hunt 16). It is a bad
/// value, exit 2 as the others, and named once (it was exit 1).
#[test]
fn a_reuse_folder_that_is_not_one_is_refused() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let file = src.join("f");
    for (dir, says) in [
        (e.path("nowhere"), "No such file or directory"),
        (file.clone(), "not a folder"),
    ] {
        let o = e.run(&[
            "restore",
            "latest",
            "-t",
            target.to_str().unwrap(),
            "--reuse-from",
            dir.to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let want = format!(
            "error: invalid value '{}' for '--reuse-from <DIR>': {says}",
            dir.display()
        );
        assert!(err.contains(&want), "{err}");
        let named = dir.display().to_string();
        assert_eq!(err.matches(&named).count(), 1, "{err}");
        assert!(!target.exists());
    }
}

/// The listing names a new file with its size, holes and all, as restic does: a sparse file
/// was listed with the bytes of its data chunks (a 20 MiB file as 12 MiB, hunt 16).
#[test]
fn a_sparse_file_is_listed_with_its_size() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let f = fs::File::create(src.join("sparse")).unwrap();
    f.set_len(8 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[7u8; 100_000], (8 << 20) - 100_000).unwrap();
    drop(f);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let out = e.ok(&[
        "restore",
        "latest",
        "-t",
        target.to_str().unwrap(),
        "--dry-run",
        "-v",
    ]);
    let line = format!(
        "would restore file {} (8.00 MiB)",
        restored(&target, &src).join("sparse").display()
    );
    assert!(out.contains(&line), "{out}");
}

/// A file the restore may not change because it is immutable (`chattr +i`, which refuses
/// root too) is named as such; the error said only "Operation not permitted" (hunt 17).
#[test]
fn an_immutable_file_in_the_way_is_named_as_such() {
    if !is_root() {
        eprintln!("skipped: chattr needs root");
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"one").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    fs::write(src.join("f"), b"two").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let f = restored(&target, &src).join("f");
    let chattr = |flag: &str| Command::new("chattr").arg(flag).arg(&f).status();
    if !chattr("+i").is_ok_and(|s| s.success()) {
        eprintln!("skipped: this file system has no immutable attribute");
        return;
    }
    let o = e.run(&["restore", "latest", "-t", target.to_str().unwrap()]);
    chattr("-i").unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    // The path once (it was named again inside the parentheses).
    let says = format!("{} (it is immutable (`chattr -i` lifts it))", f.display());
    assert!(stderr(&o).contains(&says), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches(&f.display().to_string()).count(),
        1,
        "{}",
        stderr(&o)
    );
}

/// `backup /x/dir\xff /x/dir\xfe/sub`: both paths read `/x/dir\u{FFFD}...` once their bytes
/// that are not UTF-8 are replaced, so `/x/dir\xfe`, only on the way to `sub`, looked backed
/// up, and `--delete` removed a file of the user's from it (hunt 30), in a whole restore and in
/// one of the folder (`ID:/x/dir\xfe`).
#[test]
fn delete_stays_inside_backed_up_paths_whose_names_are_not_utf8() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    let x = e.path("src/x");
    let ff = x.join(OsStr::from_bytes(b"dir\xff"));
    let fe = x.join(OsStr::from_bytes(b"dir\xfe"));
    fs::create_dir_all(&ff).unwrap();
    fs::create_dir_all(fe.join("sub")).unwrap();
    fs::write(ff.join("f"), b"a").unwrap();
    fs::write(fe.join("sub/g"), b"b").unwrap();
    e.init(&[]);
    let o = e
        .cmd(&["backup"])
        .arg(&ff)
        .arg(fe.join("sub"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));

    // The whole snapshot.
    let t = e.path("t");
    e.ok(&["restore", "latest", "--target", t.to_str().unwrap()]);
    let above = restored(&t, &fe);
    fs::write(above.join("mine"), b"precious").unwrap();
    fs::write(restored(&t, &fe.join("sub")).join("extra"), b"x").unwrap();
    fs::write(restored(&t, &ff).join("extra"), b"x").unwrap();
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--delete",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(above.join("mine")).unwrap(), b"precious");
    // Inside the backed-up paths, --delete still deletes.
    assert!(!restored(&t, &fe.join("sub")).join("extra").exists());
    assert!(!restored(&t, &ff).join("extra").exists());
    assert_eq!(fs::read(restored(&t, &ff).join("f")).unwrap(), b"a");

    // One folder of it, the one only on the way to `sub`.
    let t2 = e.path("t2");
    let mut spec = b"latest:".to_vec();
    spec.extend_from_slice(fe.as_os_str().as_bytes());
    let spec = OsStr::from_bytes(&spec);
    let o = e
        .cmd(&["restore"])
        .arg(spec)
        .arg("--target")
        .arg(&t2)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    fs::write(t2.join("mine"), b"precious").unwrap();
    fs::write(t2.join("sub/extra"), b"x").unwrap();
    let o = e
        .cmd(&["restore"])
        .arg(spec)
        .arg("--target")
        .arg(&t2)
        .arg("--delete")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(t2.join("mine")).unwrap(), b"precious");
    assert!(!t2.join("sub/extra").exists());
    assert_eq!(fs::read(t2.join("sub/g")).unwrap(), b"b");
}

/// `--reuse-from` the original source (the backed-up folder itself, as the help suggests)
/// lends its blocks to a whole-snapshot restore: only an older restore's layout (or `/`)
/// did, and the original source gave nothing, unsaid (hunt 30).
#[test]
fn the_original_source_lends_its_blocks() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    let content: Vec<u8> = (0..400_000u32).map(|i| (i * 13 % 241) as u8).collect();
    fs::write(src.join("d/f"), &content).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let out = e.ok(&[
        "restore",
        "latest",
        "-t",
        target.to_str().unwrap(),
        "--reuse-from",
        src.to_str().unwrap(),
        "--json",
    ]);
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert!(
        summary["bytes_reused"].as_u64().unwrap() >= content.len() as u64,
        "{summary}"
    );
    assert_eq!(summary["fetched_bytes"].as_u64(), Some(0), "{summary}");
    assert_eq!(
        fs::read(restored(&target, &src).join("d/f")).unwrap(),
        content
    );
}

/// A symlink and a hard link the restore could not make (a folder in the way of each) are
/// not counted as restored: the summary said "1 other, 1 hard links" beside their errors
/// (hunt 30).
#[test]
fn entries_in_the_way_are_not_counted_as_restored() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"content").unwrap();
    fs::hard_link(src.join("a"), src.join("hard")).unwrap();
    std::os::unix::fs::symlink("a", src.join("link")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let count = |o: &std::process::Output| -> serde_json::Value {
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    };
    let args = [
        "restore",
        "latest",
        "-t",
        target.to_str().unwrap(),
        "--json",
    ];
    let o = e.run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = count(&o);
    assert_eq!(
        (s["others_restored"].as_u64(), s["hardlinks"].as_u64()),
        (Some(1), Some(1)),
        "{s}"
    );
    let out = restored(&target, &src);
    for name in ["hard", "link"] {
        fs::remove_file(out.join(name)).unwrap();
        fs::create_dir(out.join(name)).unwrap();
        fs::write(out.join(name).join("mine"), b"x").unwrap();
    }
    let o = e.run(&args);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let s = count(&o);
    assert_eq!(
        (s["others_restored"].as_u64(), s["hardlinks"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
}

/// An error line names a file whose name is not UTF-8 with its bytes escaped (`\xff`), as the
/// listing (`-v`, `ls`) does: it showed U+FFFD, and two such names read alike.
#[test]
fn errors_show_names_that_are_not_utf8_escaped() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let odd = OsStr::from_bytes(b"f\xff");
    fs::write(src.join(odd), b"a").unwrap();
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let t = e.path("t");
    e.ok(&["restore", "latest", "--target", t.to_str().unwrap()]);
    // A folder in the way of the file: not replaced without --delete.
    let f = restored(&t, &src).join(odd);
    fs::remove_file(&f).unwrap();
    fs::create_dir(&f).unwrap();
    let o = e.run(&["restore", "latest", "--target", t.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("/f\\xff: a directory is in the way (use --delete to replace it)"),
        "{err}"
    );
    assert!(!err.contains('\u{FFFD}'), "{err}");
}
