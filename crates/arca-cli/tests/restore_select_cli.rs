//! What a restore selects with `--include`, `--exclude` and their case-insensitive forms, and
//! what `--delete` may remove under them: never an entry of the target that the selection
//! leaves out.

#![allow(clippy::unwrap_used)]

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use common::*;

/// A new repository holding one snapshot of `src` (its `files`, by path below it), restored
/// into `t`: returns `src`, `t` and where `src` is inside `t`.
fn restored(e: &Env, files: &[(&str, &[u8])]) -> (PathBuf, PathBuf, PathBuf) {
    e.init(&[]);
    let src = e.path("src");
    for (name, data) in files {
        let p = src.join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let t = e.path("t");
    e.ok(&["restore", "-q", "latest", "--target", t.to_str().unwrap()]);
    let at = t.join(src.strip_prefix("/").unwrap());
    (src, t, at)
}

/// A name with a byte that is not UTF-8, in a folder whose name is upper-case UTF-8 beyond
/// ASCII: `--iexclude 'ärger/*.tmp'` covers it as it covers `junk.tmp`, so `--delete` leaves
/// both (the path was folded as ASCII only, `ÄRGER` stayed as it was, and the file went).
#[test]
fn a_case_insensitive_pattern_folds_every_name_of_a_path_with_bytes_that_are_not_utf8() {
    let e = Env::new();
    let (src, t, at) = restored(&e, &[("ÄRGER/keep.txt", b"keep")]);
    let dir = src.join("ÄRGER");
    let at = at.join("ÄRGER");
    let odd = at.join(OsStr::from_bytes(b"junk\xff.tmp"));
    fs::write(&odd, b"mine").unwrap();
    fs::write(at.join("junk.tmp"), b"mine too").unwrap();
    fs::write(at.join("extra"), b"not excluded").unwrap();

    let args = [
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--delete",
        "--iexclude",
        "ärger/*.tmp",
    ];
    let dry = e.ok(&[&args[..], &["--dry-run"]].concat());
    assert!(dry.contains("delete 1 entry"), "{dry}");
    assert!(!dry.contains("junk"), "{dry}");
    e.ok(&args);
    assert_eq!(fs::read(&odd).unwrap(), b"mine");
    assert_eq!(fs::read(at.join("junk.tmp")).unwrap(), b"mine too");
    assert!(!at.join("extra").exists());

    // And an include so written selects that name.
    let t2 = e.path("t2");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(OsStr::from_bytes(b"new\xfe.tmp")), b"new").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let out = e.ok(&[
        "restore",
        "latest",
        "--target",
        t2.to_str().unwrap(),
        "--iinclude",
        "ärger/*.tmp",
    ]);
    let at2 = t2.join(dir.strip_prefix("/").unwrap());
    assert_eq!(
        fs::read(at2.join(OsStr::from_bytes(b"new\xfe.tmp"))).unwrap(),
        b"new",
        "{out}"
    );
    assert!(!at2.join("keep.txt").exists());
}

/// `--delete` removes an extra folder only with what the selection covers in it: one holding
/// an excluded file keeps it (and the folders leading to it), and a folder in the way of a
/// file of the snapshot that holds one stays, the file not restored (exit 3), the dry run
/// saying so alike. Each was removed whole, the excluded files with it.
#[test]
fn delete_leaves_excluded_entries_inside_extra_folders() {
    let e = Env::new();
    let (_, t, at) = restored(&e, &[("d/file", b"snapshot's"), ("d/kept", b"kept")]);
    let d = at.join("d");
    // An extra folder with an excluded file deep inside, and other entries.
    fs::create_dir_all(d.join("extra/sub/deeper")).unwrap();
    fs::write(d.join("extra/sub/deeper/notes.keep"), b"mine").unwrap();
    fs::write(d.join("extra/sub/other"), b"extra").unwrap();
    fs::write(d.join("extra/other"), b"extra").unwrap();
    fs::create_dir_all(d.join("extra/clean")).unwrap();
    fs::write(d.join("extra/clean/x"), b"extra").unwrap();
    // An extra folder with nothing excluded: removed whole, as before.
    fs::create_dir_all(d.join("gone/sub")).unwrap();
    fs::write(d.join("gone/sub/x"), b"extra").unwrap();
    // A folder where the snapshot has a file, holding an excluded file.
    fs::remove_file(d.join("file")).unwrap();
    fs::create_dir_all(d.join("file")).unwrap();
    fs::write(d.join("file/a.keep"), b"mine too").unwrap();

    let args = [
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--delete",
        "--exclude",
        "*.keep",
    ];
    let o = e.run(&[&args[..], &["--dry-run"]].concat());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}{}", stderr(&o));
    assert!(out.contains("delete 4 entries"), "{out}");
    assert!(out.contains("would delete file"), "{out}");
    assert!(out.contains("cannot restore file"), "{out}");
    let o = e.run(&args);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}{}", stderr(&o));
    assert!(stderr(&o).contains("holds entries"), "{}", stderr(&o));
    assert!(out.contains("deleted 4 entries"), "{out}");
    assert_eq!(
        fs::read(d.join("extra/sub/deeper/notes.keep")).unwrap(),
        b"mine"
    );
    assert_eq!(fs::read(d.join("file/a.keep")).unwrap(), b"mine too");
    for gone in ["extra/sub/other", "extra/other", "extra/clean", "gone"] {
        assert!(!d.join(gone).exists(), "{gone}");
    }
    assert_eq!(fs::read(d.join("kept")).unwrap(), b"kept");

    // Without the exclude, the folders go whole and the file is restored.
    e.ok(&[
        "restore",
        "-q",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--delete",
    ]);
    assert!(!d.join("extra").exists());
    assert_eq!(fs::read(d.join("file")).unwrap(), b"snapshot's");
}

/// An extra folder holding both an excluded file and a mount point is refused whole, as one
/// without the excluded file is: taken entry by entry, the files on the mounted file system
/// went.
#[test]
fn an_extra_folder_holding_a_mount_is_not_taken_apart() {
    let e = Env::new();
    let (_, t, at) = restored(&e, &[("f", b"x")]);
    let extra = at.join("extra");
    let mnt = extra.join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    fs::write(extra.join("a.keep"), b"mine").unwrap();
    fs::write(extra.join("other"), b"extra").unwrap();
    let mounted = arca_testkit::is_root()
        && nix::mount::mount(
            Some("tmpfs"),
            &mnt,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .is_ok();
    if !mounted {
        eprintln!("cannot mount here: skipped");
        return;
    }
    let _unmount = Unmount(&mnt);
    fs::write(mnt.join("data"), b"on the mount").unwrap();
    fs::write(mnt.join("b.keep"), b"excluded, on the mount").unwrap();
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--delete",
        "--exclude",
        "*.keep",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a mount point"), "{}", stderr(&o));
    assert_eq!(fs::read(mnt.join("data")).unwrap(), b"on the mount");
    assert_eq!(fs::read(extra.join("a.keep")).unwrap(), b"mine");
    assert!(extra.join("other").exists());
}

/// An extra folder tree thousands of folders deep, with an excluded file at its bottom, is
/// walked without exhausting a thread's stack (walked by recursion, the restore aborted).
#[test]
fn a_deep_extra_folder_with_an_excluded_file_is_walked() {
    let e = Env::new();
    let (_, t, at) = restored(&e, &[("f", b"x")]);
    let top = at.join("deep");
    // Built through a descriptor per level: the path soon exceeds PATH_MAX.
    fs::create_dir(&top).unwrap();
    let mut dir = nix::dir::Dir::open(
        &top,
        nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    for _ in 0..10_000 {
        nix::sys::stat::mkdirat(&dir, "x", nix::sys::stat::Mode::from_bits_truncate(0o755))
            .unwrap();
        dir = nix::dir::Dir::openat(
            &dir,
            "x",
            nix::fcntl::OFlag::O_DIRECTORY,
            nix::sys::stat::Mode::empty(),
        )
        .unwrap();
    }
    let fd = nix::fcntl::openat(
        &dir,
        "a.keep",
        nix::fcntl::OFlag::O_CREAT | nix::fcntl::OFlag::O_WRONLY,
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    drop(fd);
    fs::write(top.join("x/other"), b"extra").unwrap();
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--delete",
        "--exclude",
        "*.keep",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("deleted 1 entry"), "{out}");
    assert!(!top.join("x/other").exists());
    assert!(top.join("x/x").is_dir());
}

/// A dry run's summary puts the bytes to put in place after the files new and updated, which
/// both count in them: "would restore 0 files (4 B), update 1" gave the bytes of the file to
/// update as if they were those of no new file.
#[test]
fn a_dry_runs_bytes_to_place_cover_the_files_to_update_too() {
    let e = Env::new();
    let (_, t, at) = restored(&e, &[("a", b"four")]);
    let a = at.join("a");
    fs::write(&a, b"FOUR").unwrap();
    let dry = e.ok(&[
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--overwrite",
        "always",
        "--dry-run",
    ]);
    assert!(
        dry.contains("would restore 0 files, update 1 (4 B to put in place)"),
        "{dry}"
    );
}

/// `ID:FOLDER --delete` into `/` is refused: the folder's contents would stand for the whole
/// file system and everything else in `/` would go (restic does it). Asked as a dry run, so
/// that a missing refusal cannot harm the machine; the whole snapshot into `/` is not refused.
#[test]
fn a_folder_of_a_snapshot_with_delete_into_the_root_is_refused() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("docs")).unwrap();
    fs::write(src.join("docs/a"), b"a").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let folder = format!("latest:{}", src.join("docs").display());
    for target in ["/", "/.", "//"] {
        let o = e.run(&[
            "restore",
            &folder,
            "--target",
            target,
            "--delete",
            "--dry-run",
        ]);
        assert_eq!(o.status.code(), Some(1), "{target}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("would stand for the whole file system"),
            "{}",
            stderr(&o)
        );
    }
    // Without --delete, or into a folder, it runs.
    e.ok(&["restore", &folder, "--target", "/", "--dry-run"]);
    let t = e.path("t");
    e.ok(&[
        "restore",
        &folder,
        "--target",
        t.to_str().unwrap(),
        "--delete",
    ]);
    assert_eq!(fs::read(t.join("a")).unwrap(), b"a");
}

/// `--include '*.txt' --delete`: extra folders that no pattern names, holding matching files
/// among others. The matching files go, the others and their folders stay (the whole folder
/// stayed, its `f.txt` too); a folder that matches goes whole.
#[test]
fn delete_with_an_include_reaches_into_extra_folders() {
    let e = Env::new();
    let files: [(&str, &[u8]); 3] = [("a.txt", b"a"), ("d/b.txt", b"b"), ("d/c.bin", b"c")];
    let (_, t, at) = restored(&e, &files);
    fs::create_dir_all(at.join("extra/sub")).unwrap();
    fs::write(at.join("extra/f.txt"), b"extra").unwrap();
    fs::write(at.join("extra/sub/g.txt"), b"extra").unwrap();
    fs::write(at.join("extra/other.bin"), b"mine").unwrap();
    fs::write(at.join("d/extra.txt"), b"extra").unwrap();
    fs::write(at.join("d/extra.bin"), b"mine").unwrap();
    fs::create_dir_all(at.join("all.txt/in")).unwrap();
    fs::write(at.join("all.txt/in/x.bin"), b"extra").unwrap();

    let args = [
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--delete",
        "--include",
        "*.txt",
    ];
    let dry = e.ok(&[&args[..], &["--dry-run", "-v"]].concat());
    assert!(dry.contains("delete 4 entries"), "{dry}");
    for gone in ["extra/f.txt", "extra/sub/g.txt", "d/extra.txt", "all.txt"] {
        let path = at.join(gone).display().to_string();
        let listed = dry
            .lines()
            .any(|l| l.starts_with("would delete ") && l.ends_with(&path));
        assert!(listed, "{path}: {dry}");
    }
    assert!(at.join("extra/f.txt").exists());
    let out = e.ok(&args);
    assert!(out.contains("deleted 4 entries"), "{out}");
    for gone in ["extra/f.txt", "extra/sub/g.txt", "d/extra.txt", "all.txt"] {
        assert!(!at.join(gone).exists(), "{gone}");
    }
    assert_eq!(fs::read(at.join("extra/other.bin")).unwrap(), b"mine");
    assert_eq!(fs::read(at.join("d/extra.bin")).unwrap(), b"mine");
    assert!(at.join("extra/sub").is_dir());
    for (name, data) in files {
        assert_eq!(fs::read(at.join(name)).unwrap(), data, "{name}");
    }
}

/// `--include '*.txt' --delete` and folders the snapshot has that hold no `.txt` at any
/// depth (`b`, `b/c`): the plan leaves them out, and their stale `.txt` files stayed while
/// those of folders the snapshot lacks went. Their own files stay.
#[test]
fn delete_with_an_include_reaches_into_snapshot_folders_holding_no_match() {
    let e = Env::new();
    let files: [(&str, &[u8]); 3] = [("a/x.txt", b"x"), ("b/y.dat", b"y"), ("b/c/z.dat", b"z")];
    let (_, t, at) = restored(&e, &files);
    for stale in ["b/extra.txt", "b/c/extra.txt", "a/extra.txt"] {
        fs::write(at.join(stale), b"stale").unwrap();
    }
    fs::write(at.join("b/c/mine.bin"), b"mine").unwrap();
    let args = [
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--delete",
        "--include",
        "*.txt",
    ];
    let dry = e.ok(&[&args[..], &["--dry-run", "-v"]].concat());
    assert!(dry.contains("delete 3 entries"), "{dry}");
    let out = e.ok(&[&args[..], &["-v"]].concat());
    assert!(out.contains("deleted 3 entries"), "{out}");
    for stale in ["b/extra.txt", "b/c/extra.txt", "a/extra.txt"] {
        assert!(!at.join(stale).exists(), "{stale}: {out}");
    }
    assert_eq!(fs::read(at.join("b/c/mine.bin")).unwrap(), b"mine");
    for (name, data) in files {
        assert_eq!(fs::read(at.join(name)).unwrap(), data, "{name}");
    }
}
