//! The paths restore's errors name about the target and `--reuse-from` show their bytes that
//! are not UTF-8 escaped (`\xff`), as its listing does: `Path::display` made them U+FFFD, so
//! that two such names read alike.

#![allow(clippy::unwrap_used)]

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;

use common::*;

#[test]
fn target_and_reuse_from_errors_escape_bytes_that_are_not_utf8() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);

    // A target that is a regular file: refused, named with its byte escaped.
    let file = e.tmp.path().join(OsStr::from_bytes(b"t\xff"));
    fs::write(&file, b"not a folder").unwrap();
    let o = e
        .cmd(&["restore", "latest", "--target"])
        .arg(&file)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("t\\xff"), "{err}");
    assert!(!err.contains('\u{FFFD}'), "{err}");

    // A symlink to nothing as the target: where it leads is named so too.
    let link = e.tmp.path().join("link");
    std::os::unix::fs::symlink(OsStr::from_bytes(b"gone\xfe"), &link).unwrap();
    let o = e
        .cmd(&["restore", "latest", "--target"])
        .arg(&link)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("gone\\xfe"), "{err}");

    // A --reuse-from folder that is not there.
    let t = e.path("t");
    let o = e
        .cmd(&[
            "restore",
            "latest",
            "--target",
            t.to_str().unwrap(),
            "--reuse-from",
        ])
        .arg(e.tmp.path().join(OsStr::from_bytes(b"r\xfd")))
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("r\\xfd"), "{err}");
    // One that is a file.
    let o = e
        .cmd(&[
            "restore",
            "latest",
            "--target",
            t.to_str().unwrap(),
            "--reuse-from",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(
        err.contains("t\\xff' for '--reuse-from <DIR>': not a folder"),
        "{err}"
    );
}
