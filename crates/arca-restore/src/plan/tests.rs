//! The restore plan's tests: listings met twice, a file's blocks and offsets, hard links,
//! pruned directories and damaged listings; and the node and plan builders other tests use.

use std::path::Path;

use arca_format::{BlobKind, ContentRef, IndexFile, IndexPack, PackEntry, Tree};
use arca_repo::Index;

use super::*;
use crate::trees::{Selection, Trees, uses};

/// A file node of `blobs` (`(id byte, length)`), as tests build them.
pub(crate) fn file(name: &str, blobs: &[(u8, u32)], inode: u64, nlink: u64) -> Node {
    Node {
        name: name.as_bytes().to_vec(),
        kind: Some(NodeKind::File),
        size: blobs.iter().map(|b| u64::from(b.1)).sum(),
        inode,
        nlink,
        content: blobs
            .iter()
            .map(|&(i, len)| ContentRef {
                id: Id([i; 32]),
                len,
            })
            .collect(),
        ..Node::default()
    }
}

pub(crate) fn dir(name: &str, sub: u8) -> Node {
    Node {
        name: name.as_bytes().to_vec(),
        kind: Some(NodeKind::Dir),
        subtree: Some(Id([sub; 32])),
        ..Node::default()
    }
}

/// The plan of `trees` from `root` into `target`: an empty index, nothing selected
/// apart, every directory's names kept.
pub(crate) fn planned(trees: Trees, root: Id, target: &Path) -> Plan {
    let index = Index::from_files([&IndexFile {
        supersedes: vec![],
        packs: vec![],
    }]);
    let sel = Selection {
        includes: vec![],
        excludes: vec![],
        only: vec![],
    };
    Planner {
        index: &index,
        sel: &sel,
        target,
        keep_names: true,
        zero_id: Id([0; 32]),
    }
    .build(trees, root)
}

/// One listing at two paths (a bind mount backed up beside its source), with a folder
/// inside: that folder's listing is entered twice, and its files are planned under both
/// paths. It was dropped after the first, and the second path's folder came back empty.
#[test]
fn a_listing_nested_in_one_met_twice_is_walked_twice() {
    let enc = |nodes| Ok(Tree { nodes }.encode().unwrap());
    let mut trees = Trees::new();
    // root: alias/ and real/ share listing 101, which holds sub/ (102), deep/ (103).
    trees.insert(
        Id([100; 32]),
        enc(vec![dir("alias", 101), dir("real", 101)]),
    );
    trees.insert(Id([101; 32]), enc(vec![dir("sub", 102)]));
    trees.insert(
        Id([102; 32]),
        enc(vec![dir("deep", 103), file("f", &[], 1, 1)]),
    );
    trees.insert(Id([103; 32]), enc(vec![file("g", &[], 2, 1)]));
    let uses = uses(&trees, Id([100; 32]));
    assert_eq!(
        [100, 101, 102, 103].map(|i| uses[&Id([i; 32])]),
        [1, 2, 2, 2]
    );
    let p = planned(trees, Id([100; 32]), Path::new("/t"));
    assert!(p.issues.is_empty(), "{:?}", p.issues);
    let mut files: Vec<PathBuf> = p.files.iter().map(|f| p.entry_path(f.entry)).collect();
    files.sort();
    assert_eq!(
        files,
        [
            "/t/alias/sub/deep/g",
            "/t/alias/sub/f",
            "/t/real/sub/deep/g",
            "/t/real/sub/f"
        ]
        .map(PathBuf::from)
    );
}

#[test]
fn recipe_has_offsets_shared_blobs_links_and_pruned_dirs() {
    let mut trees = Trees::new();
    let enc = |nodes| Ok(Tree { nodes }.encode().unwrap());
    trees.insert(
        Id([100; 32]),
        enc(vec![
            dir("a", 101),
            dir("b", 102),
            file("f", &[(1, 10), (2, 20), (1, 10)], 7, 2),
        ]),
    );
    trees.insert(
        Id([101; 32]),
        enc(vec![
            file("g", &[(2, 20)], 8, 1),
            file("h", &[(1, 10), (2, 20), (1, 10)], 7, 2),
        ]),
    );
    trees.insert(Id([102; 32]), Err("lost".into()));
    let index = Index::from_files([&IndexFile {
        supersedes: vec![],
        packs: vec![IndexPack {
            id: Id([50; 32]),
            kind: BlobKind::Data,
            size: 1000,
            blobs: vec![
                PackEntry {
                    id: Id([1; 32]),
                    offset: 8,
                    length: 40,
                    raw_length: 10,
                },
                PackEntry {
                    id: Id([2; 32]),
                    offset: 48,
                    length: 50,
                    raw_length: 20,
                },
            ],
        }],
    }]);
    let sel = Selection {
        includes: vec![],
        excludes: vec![],
        only: vec![],
    };
    let p = Planner {
        index: &index,
        sel: &sel,
        target: Path::new("/t"),
        keep_names: true,
        zero_id: Id([0; 32]),
    }
    .build(trees.clone(), Id([100; 32]));
    assert_eq!(p.dirs.len(), 3);
    assert_eq!(p.dirs[1].path, Path::new("/t/a"));
    assert_eq!(p.issues.len(), 1, "{:?}", p.issues);
    assert_eq!(p.blobs.len(), 2);
    let f = p
        .files
        .iter()
        .find(|f| p.entry_path(f.entry) == Path::new("/t/a/h"))
        .unwrap();
    let offsets: Vec<u64> = p.uses[f.first as usize..f.end as usize]
        .iter()
        .map(|u| u.offset)
        .collect();
    assert_eq!(offsets, vec![0, 10, 30]);
    assert_eq!(
        p.uses[f.first as usize].blob,
        p.uses[f.first as usize + 2].blob
    );
    // h (same inode as f) comes first in the walk (a/ before f): f links to a/h.
    let h = (0..p.entries.len() as u32)
        .find(|&e| p.entry_path(e) == Path::new("/t/a/h"))
        .unwrap();
    assert!(
        p.links[&h]
            .iter()
            .any(|&l| p.entry_path(l) == Path::new("/t/f"))
    );
    assert_eq!(p.dirs[0].children, 3);
    assert_eq!(p.dirs[0].names.len(), 3);

    // With an include pattern, b/ (lost) and f are left out, a/ kept for a/g only.
    let sel = Selection {
        includes: vec![arca_fs::pattern::PathMatcher::new(&["/a/g".to_string()]).unwrap()],
        excludes: vec![],
        only: vec![],
    };
    let p = Planner {
        index: &index,
        sel: &sel,
        target: Path::new("/t"),
        keep_names: false,
        zero_id: Id([0; 32]),
    }
    .build(trees, Id([100; 32]));
    assert_eq!(p.entries.len(), 1);
    assert_eq!(p.dirs.len(), 2);
    assert!(!p.dirs[1].selected);
}

#[test]
fn damaged_listings_fail_their_files_instead_of_misplacing_bytes() {
    let mut trees = Trees::new();
    let enc = |nodes| Ok(Tree { nodes }.encode().unwrap());
    trees.insert(
        Id([100; 32]),
        enc(vec![
            // Blob 1 holds 10 bytes: a listing giving it 15 would place its bytes and
            // 5 zeros, and shift whatever follows.
            file("long", &[(1, 15), (2, 20)], 1, 1),
            file("right", &[(1, 10)], 2, 1),
            // One inode, two contents: not one file linked twice.
            file("x", &[(1, 10)], 9, 2),
            file("y", &[(2, 20)], 9, 2),
            file("z", &[(1, 10)], 9, 2),
        ]),
    );
    let entry = |id: u8, offset: u32, raw_length: u32| PackEntry {
        id: Id([id; 32]),
        offset,
        length: raw_length + 30,
        raw_length,
    };
    let index = Index::from_files([&IndexFile {
        supersedes: vec![],
        packs: vec![IndexPack {
            id: Id([50; 32]),
            kind: BlobKind::Data,
            size: 1000,
            blobs: vec![entry(1, 8, 10), entry(2, 48, 20)],
        }],
    }]);
    let sel = Selection {
        includes: vec![],
        excludes: vec![],
        only: vec![],
    };
    let p = Planner {
        index: &index,
        sel: &sel,
        target: Path::new("/t"),
        keep_names: true,
        zero_id: Id([0; 32]),
    }
    .build(trees, Id([100; 32]));
    let blob_of = |name: &str, i: usize| {
        let f = p
            .files
            .iter()
            .find(|f| p.entry_path(f.entry) == Path::new("/t").join(name))
            .unwrap();
        &p.blobs[p.uses[f.first as usize + i].blob as usize]
    };
    let bad = blob_of("long", 0);
    assert!(bad.missing && !bad.in_pack());
    assert_eq!(bad.indexed_len, Some(10));
    assert!(
        bad.missing_reason().contains("gives data blob"),
        "{}",
        bad.missing_reason()
    );
    // The blob's right uses are not hit.
    assert!(blob_of("right", 0).in_pack());
    assert!(blob_of("long", 1).in_pack());
    // y is a file of its own; z, alike x, is linked to it.
    let e = |name: &str| {
        (0..p.entries.len() as u32)
            .find(|&e| p.entry_path(e) == Path::new("/t").join(name))
            .unwrap()
    };
    assert!(matches!(
        p.entries[e("y") as usize].kind,
        EntryKind::File(_)
    ));
    assert_eq!(p.links[&e("x")], vec![e("z")]);
}
