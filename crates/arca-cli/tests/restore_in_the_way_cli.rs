//! What a restore does with an entry of the target standing where the snapshot has a folder
//! of the same name: replaced as a file is, under the same `--overwrite` rules, and always
//! said (listed, counted and reasoned, in the dry run too).

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::*;

/// A repository holding `src/adir/x` and `src/afile`, and a target where each stands as the
/// other kind: a file `adir` (dated `when`) and a folder `afile` holding a file.
fn swapped(e: &Env, when: SystemTime) -> (PathBuf, PathBuf) {
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("adir")).unwrap();
    fs::write(src.join("adir/x"), b"in").unwrap();
    fs::write(src.join("afile"), b"f").unwrap();
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800); // 2020
    for p in [src.join("adir"), src.join("afile")] {
        fs::File::open(&p).unwrap().set_modified(old).unwrap();
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let t = e.path("t");
    let at = t.join(src.strip_prefix("/").unwrap());
    fs::create_dir_all(at.join("afile")).unwrap();
    fs::write(at.join("afile/inner"), b"other data").unwrap();
    fs::write(at.join("adir"), b"precious").unwrap();
    fs::File::options()
        .write(true)
        .open(at.join("adir"))
        .unwrap()
        .set_modified(when)
        .unwrap();
    (t, at)
}

fn restore(e: &Env, t: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let o = e.run(
        &[
            &["restore", "latest", "--target", t.to_str().unwrap(), "-v"],
            extra,
        ]
        .concat(),
    );
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr(&o),
    )
}

/// The file in the way of the folder was removed without a word: not listed by `-v` or the
/// dry run, "deleted 0 entries", and under `if-newer` even when it was the newer.
#[test]
fn a_file_in_the_way_of_a_folder_is_replaced_and_said() {
    let e = Env::new();
    let (t, at) = swapped(
        &e,
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000),
    );
    let adir = at.join("adir").display().to_string();
    let (code, out, err) = restore(&e, &t, &["--dry-run"]);
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(
        out.contains(&format!("would delete file {adir}\n")),
        "{out}"
    );
    assert!(out.contains("delete 1 entry"), "{out}");
    // The dry run gives the reason the folder in the way of `afile` is left, as the real
    // run does.
    assert!(
        err.contains("afile: a directory is in the way (use --delete to replace it)"),
        "{err}"
    );
    assert_eq!(fs::read(at.join("adir")).unwrap(), b"precious");
    let (code, out, err) = restore(&e, &t, &[]);
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(out.contains(&format!("delete file {adir}\n")), "{out}");
    assert!(out.contains("deleted 1 entry"), "{out}");
    assert_eq!(fs::read(at.join("adir/x")).unwrap(), b"in");
    assert_eq!(fs::read(at.join("afile/inner")).unwrap(), b"other data");
}

/// `--overwrite if-newer` leaves a newer entry of the target alone, whatever its kind.
#[test]
fn if_newer_keeps_a_newer_file_in_the_way_of_a_folder() {
    let e = Env::new();
    let newer = SystemTime::now() + Duration::from_secs(3600);
    let (t, at) = swapped(&e, newer);
    for extra in [
        &["--dry-run", "--overwrite", "if-newer"][..],
        &["--overwrite", "if-newer"],
    ] {
        let (code, out, err) = restore(&e, &t, extra);
        assert_eq!(code, Some(3), "{out}{err}");
        assert!(
            err.contains(
                "adir: not replacing the newer entry with a directory (--overwrite if-newer)"
            ),
            "{err}"
        );
        assert!(!out.contains("delete file"), "{out}");
        assert_eq!(fs::read(at.join("adir")).unwrap(), b"precious");
    }
    // The newer folder where the snapshot has an older file is kept too, with what it holds,
    // `--delete` or not (with it, the folder and the user's file in it were deleted).
    for extra in [
        &["--overwrite", "if-newer", "--delete", "--dry-run"][..],
        &["--overwrite", "if-newer", "--delete"],
    ] {
        let (code, out, err) = restore(&e, &t, extra);
        assert_eq!(code, Some(3), "{out}{err}");
        assert!(
            err.contains("afile: not replacing the newer entry with a file (--overwrite if-newer)"),
            "{err}"
        );
        assert!(!out.contains("delete dir"), "{out}");
        assert_eq!(fs::read(at.join("afile/inner")).unwrap(), b"other data");
    }
    // An older one is replaced.
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800); // 2000
    fs::File::open(at.join("afile"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let (code, out, err) = restore(&e, &t, &["--overwrite", "if-newer", "--delete"]);
    assert_eq!(code, Some(3), "{out}{err}");
    assert_eq!(fs::read(at.join("afile")).unwrap(), b"f");
}
