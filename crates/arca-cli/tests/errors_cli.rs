//! Error messages name the path or object and the cause exactly once.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;

use common::*;

fn once(haystack: &str, needle: &str) {
    assert_eq!(
        haystack.matches(needle).count(),
        1,
        "{needle:?} not exactly once in:\n{haystack}"
    );
}

#[test]
fn causes_and_names_appear_once() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"hello").unwrap();
    e.ok(&["backup", "--quiet", src.to_str().unwrap()]);

    let o = e.run(&["backup", "/nonexistent/arca-test-path"]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    once(&err, "/nonexistent/arca-test-path");
    once(&err, "No such file or directory");

    let o = e.run(&["restore", "latest", "--target", "/dev/null/x"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    once(&err, "/dev/null/x");
    once(&err, "Not a directory");

    // A corrupt index file: named once, with its cause.
    let index = fs::read_dir(e.repo.join("index"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let name = index.file_name().unwrap().to_string_lossy().into_owned();
    arca_testkit::flip_byte(&index, 20).unwrap();
    let o = e.run(&["ls", "latest"]);
    let err = stderr(&o);
    once(&err, &name);
    once(&err, "does not match its id");

    let missing = Env::remote(e.path("nowhere").display().to_string(), vec![]);
    let o = missing.run(&["snapshots"]);
    assert_eq!(o.status.code(), Some(1));
    once(&stderr(&o), "does not exist");
}
