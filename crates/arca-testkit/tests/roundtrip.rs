//! Round trip of a tree holding every entry kind: bytes and all metadata must come back.

#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::MetadataExt;

use arca_testkit::{compare, generate};
use common::*;

#[test]
fn every_entry_kind_round_trips_with_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let g = generate::every_kind(&src, 1).unwrap();
    let expected = compare::snapshot(&src).unwrap();
    let repo = init(local(&tmp.path().join("repo")));
    let report = do_backup(&repo, &src).unwrap();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert!(report.snapshot.complete);
    // The source is untouched by the backup, atimes included.
    assert!(compare::diff(&expected, &src, &compare::snapshot(&src).unwrap(), &src).is_empty());

    let target = tmp.path().join("target");
    let r = do_restore(&repo, "latest", &target).unwrap();
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert!(r.hardlinks >= 2);
    let out = restored(&target, &src);
    let actual = compare::snapshot(&out).unwrap();
    let diffs = compare::diff(&expected, &src, &actual, &out);
    assert!(diffs.is_empty(), "restore differs:\n{}", diffs.join("\n"));
    // Holes are kept.
    let sparse = out.join(g.sparse.file_name().unwrap());
    let m = sparse.metadata().unwrap();
    assert_eq!(m.len(), 8 << 20);
    assert!(
        m.blocks() * 512 < 1 << 20,
        "sparse file takes {} bytes",
        m.blocks() * 512
    );
    // The parent directories of the backed-up path are restored too.
    assert!(out.parent().unwrap().is_dir());
    if g.acl {
        let acl = &actual[std::path::Path::new("dir/text.log")].xattrs;
        assert!(
            acl.iter().any(|(k, _)| k == b"system.posix_acl_access"),
            "ACL lost: {acl:?}"
        );
    }
    if g.devices {
        assert!(actual.values().any(|e| e.kind == 'c') && actual.values().any(|e| e.kind == 'b'));
    }
}

#[test]
fn restoring_over_an_existing_tree_replaces_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    generate::every_kind(&src, 2).unwrap();
    let expected = compare::snapshot(&src).unwrap();
    let repo = init(local(&tmp.path().join("repo")));
    do_backup(&repo, &src).unwrap();
    let target = tmp.path().join("target");
    do_restore(&repo, "latest", &target).unwrap();
    let out = restored(&target, &src);
    // Damage the restored tree: change content, replace a file with a symlink pointing
    // outside the target, delete entries.
    std::fs::write(out.join("small.txt"), b"changed").unwrap();
    std::fs::remove_file(out.join("empty")).unwrap();
    let outside = tmp.path().join("outside");
    std::fs::write(&outside, b"must not be overwritten").unwrap();
    std::fs::remove_file(out.join("name with spaces")).unwrap();
    std::os::unix::fs::symlink(&outside, out.join("name with spaces")).unwrap();
    let r = do_restore(&repo, "latest", &target).unwrap();
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    let diffs = compare::diff(&expected, &src, &compare::snapshot(&out).unwrap(), &out);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    assert_eq!(std::fs::read(&outside).unwrap(), b"must not be overwritten");
}

/// An incremental backup takes unchanged entries' xattrs and symlink targets from the parent
/// snapshot; an xattr change (which moves the ctime) and a replaced symlink must still be
/// seen, and each restore must match its source exactly.
#[test]
fn incremental_backups_see_xattr_and_symlink_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    generate::every_kind(&src, 3).unwrap();
    let repo = init(local(&tmp.path().join("repo")));
    do_backup(&repo, &src).unwrap();
    // Nothing changed: the second snapshot reuses the parent's metadata and still restores
    // exactly. (The tree is compared as it was before the backup: reading a new symlink
    // moves its access time under relatime.)
    let before = compare::snapshot(&src).unwrap();
    do_backup(&repo, &src).unwrap();
    let check = |label: &str, expected: std::collections::BTreeMap<_, _>| {
        let target = tmp.path().join(format!("target-{label}"));
        let r = do_restore(&repo, "latest", &target).unwrap();
        assert!(r.issues.is_empty(), "{label}: {:?}", r.issues);
        let out = restored(&target, &src);
        let diffs = compare::diff(&expected, &src, &compare::snapshot(&out).unwrap(), &out);
        assert!(diffs.is_empty(), "{label}:\n{}", diffs.join("\n"));
        expected
    };
    check("unchanged", before);
    // Same content, same mtime; only the xattrs and a symlink change.
    xattr::set(src.join("small.txt"), "user.comment", b"a changed note").unwrap();
    xattr::remove(src.join("small.txt"), "user.binary").unwrap();
    xattr::set(src.join("dir"), "user.added", b"new").unwrap();
    let link = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.symlink_metadata().unwrap().file_type().is_symlink())
        .expect("a symlink in the tree");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("a/new/target", &link).unwrap();
    // An access time days ahead, as the generator gives every entry, so that reading the
    // link (relatime, here and in the comparisons) does not move it.
    let ahead = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 5 * 86_400;
    generate::set_times(&link, (ahead, 5), (1_500_000_000, 7)).unwrap();
    let before = compare::snapshot(&src).unwrap();
    do_backup(&repo, &src).unwrap();
    let expected = check("changed", before);
    let small = &expected[std::path::Path::new("small.txt")].xattrs;
    assert!(
        small
            .iter()
            .any(|(k, v)| k == b"user.comment" && v == b"a changed note")
    );
}
