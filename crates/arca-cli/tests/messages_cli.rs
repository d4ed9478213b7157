//! How text output says counts and paths: one of a thing in the singular ("1 file", not "1
//! files"), and a path with bytes that are not UTF-8 (or control characters) escaped as
//! `\xff`, as listings show it, not as U+FFFD.

#![allow(clippy::unwrap_used)]

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use common::*;

/// The plural nouns text output counts; "1 " before any of them is a count said wrong.
const PLURALS: [&str; 12] = [
    "files",
    "snapshots",
    "entries",
    "packs",
    "blobs",
    "trees",
    "errors",
    "dirs",
    "directories",
    "reads",
    "paths",
    "hard links",
];

fn no_plural_after_one(text: &str) {
    for p in PLURALS {
        for at in text.match_indices(&format!("1 {p}")).map(|(i, _)| i) {
            let before = text[..at].chars().last();
            assert!(
                before.is_some_and(|c| c.is_ascii_digit() || c == '.'),
                "\"1 {p}\" in:\n{text}"
            );
        }
    }
}

/// A backup, restore, forget and prune of one file said "Processed: 1 files", "verified 1
/// files", "removed 1 snapshots", "1 snapshots, 3 trees walked".
#[test]
fn one_thing_is_counted_in_the_singular() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"hello").unwrap();
    let out = e.ok(&["backup", src.to_str().unwrap()]);
    assert!(out.contains("Processed:   1 file, "), "{out}");
    no_plural_after_one(&out);

    let target = e.path("t");
    let out = e.ok(&[
        "restore",
        "latest",
        "--target",
        target.to_str().unwrap(),
        "--verify",
    ]);
    assert!(
        out.contains(": 1 file (1 new, 0 updated, 0 unchanged)"),
        "{out}"
    );
    assert!(out.contains("in 1 read from 1 pack;"), "{out}");
    assert!(out.lines().any(|l| l == "verified 1 file"), "{out}");
    no_plural_after_one(&out);

    let out = e.ok(&["snapshots"]);
    assert_eq!(out.lines().last(), Some("1 snapshot"), "{out}");

    e.ok(&["backup", "--quiet", "--force", src.to_str().unwrap()]);
    let out = e.ok(&["forget", "--keep-last", "1"]);
    assert!(out.contains("keep 1 snapshot:"), "{out}");
    assert!(out.contains("remove 1 snapshot:"), "{out}");
    assert!(out.lines().any(|l| l == "removed 1 snapshot"), "{out}");
    no_plural_after_one(&out);

    let out = e.ok(&["prune"]);
    assert!(out.starts_with("1 snapshot, "), "{out}");
    no_plural_after_one(&out);
    let out = e.ok(&["check"]);
    assert!(out.contains("1 snapshot"), "{out}");
    no_plural_after_one(&out);
}

/// `dump --target` and the dump library's errors name paths as the rest of arca does: a
/// byte that is not UTF-8 as `\xff`; they showed it as U+FFFD, so the name could not be
/// told from another or typed again.
#[test]
fn dump_errors_escape_odd_bytes_in_paths() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    let odd = src.join(OsStr::from_bytes(b"e\xff"));
    fs::create_dir_all(&odd).unwrap();
    fs::write(odd.join("g"), b"z").unwrap();
    e.ok(&["backup", "--quiet", src.to_str().unwrap()]);
    let shown = format!("{}/e\\xff", src.display());

    // DumpError::NotAFolder, from the library.
    let mut deeper = odd.join("g").into_os_string();
    deeper.push("/h");
    let o = e.cmd(&["dump", "latest"]).arg(&deeper).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{shown}/g is not a folder in the snapshot")),
        "{err}"
    );
    assert!(!err.contains('\u{fffd}'), "{err}");

    // --target in a folder that does not exist.
    let target: PathBuf = e.path("out").join(OsStr::from_bytes(b"no\xffdir/f"));
    let o = e
        .cmd(&["dump", "latest"])
        .arg(odd.join("g"))
        .arg("--target")
        .arg(&target)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot create {}/out/no\\xffdir/f",
            e.path("").display().to_string().trim_end_matches('/')
        )),
        "{err}"
    );
    assert!(!err.contains('\u{fffd}'), "{err}");
}
