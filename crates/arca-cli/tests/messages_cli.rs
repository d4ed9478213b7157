//! How text output says counts: one of a thing in the singular ("1 file", not "1 files").

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;

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
