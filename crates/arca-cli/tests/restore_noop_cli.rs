//! A restore into a target that already holds the snapshot changes nothing there: not even
//! the change times of its symbolic links, which the scan trusts by size and mtime as files.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::*;

/// A symlink's access time, mtime and change time, to the nanosecond.
fn times(p: &Path) -> [(i64, i64); 3] {
    let m = fs::symlink_metadata(p).unwrap();
    [
        (m.atime(), m.atime_nsec()),
        (m.mtime(), m.mtime_nsec()),
        (m.ctime(), m.ctime_nsec()),
    ]
}

/// Every no-op restore read each link, which moved its access time (relatime moves one not
/// newer than the link's ctime: every restored link's), and then set its times back: each
/// link's ctime moved on every run, and a no-op restore made two system calls per link.
#[test]
fn a_no_op_restore_leaves_symlinks_untouched() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    fs::write(src.join("g"), b"y").unwrap();
    std::os::unix::fs::symlink("f", src.join("ln")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "-t", t]);
    let ln = target.join(src.strip_prefix("/").unwrap()).join("ln");
    let restored = times(&ln);
    // Change times count in clock ticks: a change now would show.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let o = e.ok(&["restore", "latest", "-t", t]);
    assert!(o.contains("(0 new, 0 updated, 2 unchanged)"), "{o}");
    assert_eq!(times(&ln), restored);
    // A file whose metadata alone was wrong is named so, as the dry run and --json name it
    // (the summary counted it "unchanged").
    let f = target.join(src.strip_prefix("/").unwrap()).join("f");
    arca_testkit::generate::set_times(&f, (1, 0), (1, 0)).unwrap();
    let o = e.ok(&["restore", "latest", "-t", t]);
    assert!(
        o.contains("(0 new, 0 updated, 1 metadata fixed, 1 unchanged)"),
        "{o}"
    );

    // --overwrite always reads the link; its access time is put back as the snapshot has it.
    e.ok(&["restore", "-q", "--overwrite", "always", "latest", "-t", t]);
    assert_eq!(times(&ln)[..2], restored[..2]);

    // As a file, a link is trusted by its size and mtime: one pointing elsewhere (a target
    // as long) dated as the snapshot's is kept by default, and replaced when always read.
    fs::remove_file(&ln).unwrap();
    std::os::unix::fs::symlink("g", &ln).unwrap();
    arca_testkit::generate::set_times(&ln, restored[0], restored[1]).unwrap();
    e.ok(&["restore", "-q", "latest", "-t", t]);
    assert_eq!(fs::read_link(&ln).unwrap(), Path::new("g"));
    e.ok(&["restore", "-q", "--overwrite", "always", "latest", "-t", t]);
    // (Times first: reading the link here moves its access time.)
    assert_eq!(times(&ln)[..2], restored[..2]);
    assert_eq!(fs::read_link(&ln).unwrap(), Path::new("f"));
}
