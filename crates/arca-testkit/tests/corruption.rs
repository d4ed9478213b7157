//! Damaged packs: a flipped byte and a truncated pack are caught by `check --read-data`
//! (naming pack, snapshot and file) and by restore, which restores everything else.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use arca_backend::FileType;
use arca_format::{BlobKind, Id};
use arca_maintenance::{CheckOptions, check};
use arca_repo::Repository;
use arca_testkit::random_bytes;
use common::*;

struct Setup {
    _tmp: tempfile::TempDir,
    repo_dir: PathBuf,
    src: PathBuf,
    target: PathBuf,
    repo: Repository,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..6u64 {
        fs::write(src.join(format!("file{i}")), random_bytes(i, 400_000)).unwrap();
    }
    let repo_dir = tmp.path().join("repo");
    let repo = init(local(&repo_dir));
    do_backup(&repo, &src).unwrap();
    let target = tmp.path().join("target");
    Setup {
        repo_dir,
        src,
        target,
        repo,
        _tmp: tmp,
    }
}

/// The index and the tree of the source folder in the latest snapshot.
fn source_tree(s: &Setup) -> (arca_repo::Index, arca_format::Tree) {
    let index = s.repo.load_index().unwrap();
    let (_, snap) = s.repo.find_snapshot("latest", &Default::default()).unwrap();
    let mut tree = s.repo.load_tree(&index, &snap.tree).unwrap();
    for comp in s.src.components().skip(1) {
        let name = comp.as_os_str().as_encoded_bytes();
        let sub = tree.find(name).unwrap().subtree.unwrap();
        tree = s.repo.load_tree(&index, &sub).unwrap();
    }
    (index, tree)
}

/// How many source files have no blob in `pack` (which pack a file lands in depends on the
/// backup's thread timing).
fn files_outside(s: &Setup, pack: Id) -> usize {
    let (index, tree) = source_tree(s);
    (0..6)
        .filter(|i| {
            let node = tree.find(format!("file{i}").as_bytes()).unwrap();
            node.content
                .iter()
                .all(|c| index.get(BlobKind::Data, &c.id).unwrap().pack.id != pack)
        })
        .count()
}

/// The data pack holding `file`'s first blob, and that blob's offset in it.
fn pack_of(s: &Setup, file: &str) -> (PathBuf, Id, u32) {
    let (index, tree) = source_tree(s);
    let node = tree.find(file.as_bytes()).unwrap();
    let loc = index.get(BlobKind::Data, &node.content[0].id).unwrap();
    let hex = loc.pack.id.to_hex();
    (
        s.repo_dir.join("data").join(&hex[..2]).join(&hex),
        loc.pack.id,
        loc.offset,
    )
}

fn affected_paths(rep: &arca_maintenance::CheckReport) -> Vec<PathBuf> {
    rep.affected.iter().flat_map(|a| a.paths.clone()).collect()
}

#[test]
fn flipped_byte_is_caught_by_read_data_and_restore() {
    let s = setup();
    let (path, pack, offset) = pack_of(&s, "file3");
    arca_testkit::flip_byte(&path, u64::from(offset) + 100).unwrap();
    // Structure alone looks fine: sizes match.
    assert!(check(&s.repo, CheckOptions::default()).unwrap().is_ok());
    let rep = check(
        &s.repo,
        CheckOptions {
            read_data: true,
            workers: 2,
        },
    )
    .unwrap();
    assert!(!rep.is_ok());
    assert_eq!(rep.damaged_packs.len(), 1);
    assert_eq!(rep.damaged_packs[0].id, pack);
    assert!(
        affected_paths(&rep).contains(&s.src.join("file3")),
        "{:?}",
        rep.affected
    );
    let r = do_restore(&s.repo, "latest", &s.target).unwrap();
    assert!(
        r.issues
            .iter()
            .any(|i| i.path.ends_with("file3") && i.message.contains("damaged")),
        "{:?}",
        r.issues
    );
    // Every file the damage does not touch is restored intact.
    let damaged: Vec<PathBuf> = affected_paths(&rep);
    for i in 0..6 {
        let p = s.src.join(format!("file{i}"));
        if !damaged.contains(&p) {
            assert_eq!(
                fs::read(restored(&s.target, &p)).unwrap(),
                fs::read(&p).unwrap()
            );
        }
    }
}

#[test]
fn truncated_pack_is_caught_by_check_and_restore() {
    let s = setup();
    let (path, pack, _) = pack_of(&s, "file1");
    let outside = files_outside(&s, pack);
    arca_testkit::truncate_by(&path, 1000).unwrap();
    let rep = check(&s.repo, CheckOptions::default()).unwrap();
    assert!(!rep.is_ok());
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains(&pack.to_hex()) && e.contains("size")),
        "{:?}",
        rep.errors
    );
    assert!(affected_paths(&rep).contains(&s.src.join("file1")));
    let rep = check(
        &s.repo,
        CheckOptions {
            read_data: true,
            workers: 1,
        },
    )
    .unwrap();
    assert!(!rep.is_ok());
    // Said once for its size and once for the blobs lost; not also for its id and header,
    // which a cut pack cannot match (four errors for one cut).
    let about: Vec<&String> = rep
        .errors
        .iter()
        .filter(|e| e.contains(&pack.to_hex()))
        .collect();
    assert_eq!(about.len(), 2, "{about:?}");
    assert!(
        about.iter().any(|e| e.contains("blobs damaged")),
        "{about:?}"
    );
    let r = do_restore(&s.repo, "latest", &s.target).unwrap();
    assert!(!r.issues.is_empty());
    // Everything outside the damaged pack is restored.
    assert!(
        r.files as usize >= outside,
        "{} files, {outside} outside",
        r.files
    );
}

#[test]
fn missing_pack_and_damaged_index_are_reported() {
    let s = setup();
    let (path, pack, _) = pack_of(&s, "file0");
    fs::remove_file(&path).unwrap();
    let rep = check(&s.repo, CheckOptions::default()).unwrap();
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains(&pack.to_hex()) && e.contains("missing")),
        "{:?}",
        rep.errors
    );
    // A damaged index file is named.
    let idx = s.repo.list_ids(FileType::Index).unwrap()[0].0;
    arca_testkit::flip_byte(&s.repo_dir.join("index").join(idx.to_hex()), 40).unwrap();
    let rep = check(&s.repo, CheckOptions::default()).unwrap();
    assert!(
        rep.errors.iter().any(|e| e.contains(&idx.to_hex())),
        "{:?}",
        rep.errors
    );
    let _ = Path::new("/");
}

/// A damaged directory listing in the parent snapshot: the next backup reads that folder
/// again and stores its listing again (the same id, a new copy) instead of referencing the
/// damaged copy, and readers take the copy that opens, so the new snapshot restores whole,
/// and so does the old one.
#[test]
fn a_damaged_listing_is_stored_again_by_the_next_backup() {
    let s = setup();
    let sub = s.src.join("sub");
    fs::create_dir(&sub).unwrap();
    for i in 0..3u64 {
        fs::write(sub.join(format!("inner{i}")), random_bytes(100 + i, 3000)).unwrap();
    }
    let first = do_backup(&s.repo, &s.src).unwrap();
    let (index, tree) = source_tree(&s);
    let listing = tree.find(b"sub").unwrap().subtree.unwrap();
    let loc = index.get(BlobKind::Tree, &listing).unwrap();
    let hex = loc.pack.id.to_hex();
    let pack = s.repo_dir.join("data").join(&hex[..2]).join(&hex);
    arca_testkit::flip_byte(&pack, u64::from(loc.offset) + u64::from(loc.length) / 2).unwrap();
    // The damage is there: the listing cannot be read.
    assert!(s.repo.load_tree(&index, &listing).is_err());

    let second = do_backup(&s.repo, &s.src).unwrap();
    assert_eq!(
        second
            .parent_unreadable
            .iter()
            .map(|(id, _)| *id)
            .collect::<Vec<_>>(),
        vec![listing],
        "{:?}",
        second.parent_unreadable
    );
    assert!(second.snapshot.complete);
    let index = s.repo.load_index().unwrap();
    assert_eq!(index.locations(BlobKind::Tree, &listing).count(), 2);
    assert_eq!(s.repo.load_tree(&index, &listing).unwrap().nodes.len(), 3);
    for (snapshot, target) in [
        (second.snapshot_id, s.target.join("new")),
        (first.snapshot_id, s.target.join("old")),
    ] {
        let snapshot = snapshot.to_hex();
        let r = do_restore(&s.repo, &snapshot, &target).unwrap();
        assert!(r.issues.is_empty(), "{:?}", r.issues);
        let diffs = arca_testkit::compare::diff_trees(&s.src, &restored(&target, &s.src));
        assert!(diffs.is_empty(), "{diffs:?}");
    }
    // A third backup finds nothing wrong with its parent.
    let third = do_backup(&s.repo, &s.src).unwrap();
    assert!(third.parent_unreadable.is_empty());
}
