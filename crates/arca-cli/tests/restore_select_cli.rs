//! What a restore selects with `--include`, `--exclude` and their case-insensitive forms, and
//! what `--delete` may remove under them: never an entry of the target that the selection
//! leaves out.

#![allow(clippy::unwrap_used)]

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;

use common::*;

/// A name with a byte that is not UTF-8, in a folder whose name is upper-case UTF-8 beyond
/// ASCII: `--iexclude 'ärger/*.tmp'` covers it as it covers `junk.tmp`, so `--delete` leaves
/// both (the path was folded as ASCII only, `ÄRGER` stayed as it was, and the file went).
#[test]
fn a_case_insensitive_pattern_folds_every_name_of_a_path_with_bytes_that_are_not_utf8() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    let dir = src.join("ÄRGER");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("keep.txt"), b"keep").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let t = e.path("t");
    e.ok(&["restore", "-q", "latest", "--target", t.to_str().unwrap()]);
    let at = t.join(dir.strip_prefix("/").unwrap());
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
