//! `rewrite` on the hand-built fixture of `repair`: which trees change and which keep their
//! ids, what is reported, dry runs, forgetting, shared subtrees and unreadable listings.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use arca_backend::FileType;
use arca_format::{Id, NodeKind};

use super::*;
use crate::check::check;
use crate::repair::fixture::{Fx, build, chunk, snapshot};
use crate::{CheckOptions, CheckReport};

fn only<'p>(paths: &'p [&'p str]) -> impl Fn(&Path, bool) -> bool + 'p {
    move |p: &Path, _| paths.iter().any(|x| Path::new(x) == p)
}

fn run(fx: &Fx, excluded: &Excluded<'_>, opts: &RewriteOptions) -> RewriteReport {
    let index = fx.repo.load_index().unwrap();
    let snaps: Vec<(Id, Snapshot)> = fx
        .repo
        .list_snapshots(&Default::default())
        .unwrap()
        .into_iter()
        .collect();
    rewrite_snapshots(&fx.repo, &index, &snaps, Some(excluded), opts).unwrap()
}

fn clean(rep: &CheckReport) {
    assert!(rep.is_ok(), "{:?}", rep.errors);
}

/// Every file of the repository, with its bytes.
fn files(fx: &Fx) -> Vec<(FileType, String, Vec<u8>)> {
    let mut out = vec![];
    for t in [FileType::Pack, FileType::Index, FileType::Snapshot] {
        for f in fx.backend.list(t).unwrap() {
            let b = fx.backend.read(t, &f.name).unwrap();
            out.push((t, f.name, b));
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

#[test]
fn dropping_a_file_keeps_the_untouched_subtree_id() {
    let fx = build();
    let old_root = fx.tree(&fx.root);
    let sub_id = old_root.find(b"sub").unwrap().subtree.unwrap();
    let packs_before = fx.ids(FileType::Pack).len();

    let rep = run(&fx, &only(&["/b"]), &RewriteOptions::default());
    assert_eq!(rep.snapshots.len(), 1);
    let r = &rep.snapshots[0];
    assert_eq!(r.original, fx.snapshot);
    let b_len = chunk("b0").len() as u64;
    assert_eq!(
        r.removed,
        vec![Removed {
            path: "/b".into(),
            kind: NodeKind::File,
            files: 1,
            bytes: b_len,
        }]
    );
    assert_eq!((r.files_removed, r.bytes_removed), (1, b_len));
    assert_eq!(rep.trees_written, 1, "only the root listing changes");
    assert_eq!(rep.packs_written, 1);
    assert!(rep.index_file.is_some());
    assert_eq!(fx.ids(FileType::Pack).len(), packs_before + 1);

    // The original stays; the copy has the new root, the same `sub` listing, and the tag.
    let new_id = r.new_id.unwrap();
    let mut snaps = fx.ids(FileType::Snapshot);
    snaps.sort();
    let mut want = vec![fx.snapshot, new_id];
    want.sort();
    assert_eq!(snaps, want);
    let new = fx.repo.load_snapshot(&new_id).unwrap();
    let old = fx.repo.load_snapshot(&fx.snapshot).unwrap();
    assert_eq!(new.tags, vec!["daily", REWRITE_TAG]);
    assert_eq!(
        (new.time, &new.paths, &new.hostname),
        (old.time, &old.paths, &old.hostname)
    );
    assert_ne!(new.tree, old.tree);
    let root = fx.tree(&new.tree);
    let names: Vec<&[u8]> = root.nodes.iter().map(|n| n.name.as_slice()).collect();
    assert_eq!(names, vec![&b"a"[..], b"sub"]);
    assert_eq!(root.find(b"sub").unwrap().subtree, Some(sub_id));
    assert_eq!(
        root.find(b"a"),
        old_root.find(b"a"),
        "kept nodes are unchanged"
    );
    clean(&check(&fx.repo, CheckOptions::default()).unwrap());
}

#[test]
fn a_deep_drop_rewrites_every_listing_above_it() {
    let fx = build();
    let old_root = fx.tree(&fx.root);
    let rep = run(&fx, &only(&["/sub/c"]), &RewriteOptions::default());
    assert_eq!(rep.trees_written, 2, "the emptied `sub` and the root");
    let r = &rep.snapshots[0];
    assert_eq!(r.removed.len(), 1);
    assert_eq!(r.removed[0].path, Path::new("/sub/c"));
    let new = fx.repo.load_snapshot(&r.new_id.unwrap()).unwrap();
    let root = fx.tree(&new.tree);
    let sub = root.find(b"sub").unwrap();
    assert_ne!(sub.subtree, old_root.find(b"sub").unwrap().subtree);
    assert!(fx.tree(&sub.subtree.unwrap()).nodes.is_empty());
    let mut meta = sub.clone();
    meta.subtree = old_root.find(b"sub").unwrap().subtree;
    assert_eq!(
        Some(&meta),
        old_root.find(b"sub"),
        "the directory's metadata is kept"
    );
    clean(&check(&fx.repo, CheckOptions::default()).unwrap());
}

#[test]
fn a_dropped_directory_counts_everything_below_it() {
    let fx = build();
    let rep = run(&fx, &only(&["/sub", "/sub/c"]), &RewriteOptions::default());
    let r = &rep.snapshots[0];
    assert_eq!(
        r.removed,
        vec![Removed {
            path: "/sub".into(),
            kind: NodeKind::Dir,
            files: 1,
            bytes: chunk("c0").len() as u64,
        }],
        "what is inside a dropped directory is not listed again"
    );
    assert_eq!(rep.trees_written, 1);
}

#[test]
fn nothing_matching_writes_nothing() {
    let fx = build();
    let before = files(&fx);
    let rep = run(
        &fx,
        &only(&["/nope", "/sub/nope"]),
        &RewriteOptions::default(),
    );
    assert!(rep.snapshots[0].new.is_none());
    assert_eq!(rep.modified(), 0);
    assert_eq!((rep.trees_written, rep.packs_written), (0, 0));
    assert_eq!(files(&fx), before);
}

#[test]
fn a_dry_run_reports_the_same_and_writes_nothing() {
    let fx = build();
    let before = files(&fx);
    let dry = run(
        &fx,
        &only(&["/sub/c"]),
        &RewriteOptions {
            dry_run: true,
            forget: true,
            ..Default::default()
        },
    );
    assert_eq!(files(&fx), before);
    let r = &dry.snapshots[0];
    assert!(r.new_id.is_none() && !r.forgotten);
    assert_eq!(dry.trees_written, 2);
    assert_eq!(dry.packs_written, 0);
    let real = run(&fx, &only(&["/sub/c"]), &RewriteOptions::default());
    assert_eq!(real.snapshots[0].removed, r.removed);
    assert_eq!(
        real.snapshots[0].new.as_ref().unwrap().tree,
        r.new.as_ref().unwrap().tree,
        "a dry run computes the same root"
    );
}

#[test]
fn forget_removes_the_original_and_adds_no_tag() {
    let fx = build();
    let rep = run(
        &fx,
        &only(&["/a"]),
        &RewriteOptions {
            forget: true,
            ..Default::default()
        },
    );
    let r = &rep.snapshots[0];
    assert!(r.forgotten);
    assert_eq!(fx.ids(FileType::Snapshot), vec![r.new_id.unwrap()]);
    let new = fx.repo.load_snapshot(&r.new_id.unwrap()).unwrap();
    assert_eq!(new.tags, vec!["daily"]);
    clean(&check(&fx.repo, CheckOptions::default()).unwrap());
}

#[test]
fn snapshots_sharing_trees_share_the_work() {
    let fx = build();
    let second = fx
        .repo
        .save_snapshot(&snapshot(fx.root, &["other"]))
        .unwrap();
    let rep = run(&fx, &only(&["/sub/c"]), &RewriteOptions::default());
    assert_eq!(rep.snapshots.len(), 2);
    assert_eq!(rep.trees_written, 2, "each new listing stored once");
    let roots: Vec<Id> = rep
        .snapshots
        .iter()
        .map(|r| r.new.as_ref().unwrap().tree)
        .collect();
    assert_eq!(roots[0], roots[1]);
    assert!(rep.snapshots.iter().any(|r| r.original == second));
    assert!(rep.snapshots.iter().all(|r| r.removed.len() == 1));
    clean(&check(&fx.repo, CheckOptions::default()).unwrap());
}

#[test]
fn the_summary_totals_lose_what_was_dropped() {
    let mut s = snapshot(Id([1; 32]), &["rewrite"]);
    s.summary.total_files_processed = 10;
    s.summary.total_bytes_processed = 1000;
    s.summary.files_new = 4;
    let n = rewritten(
        (Id([5; 32]), &s),
        Id([2; 32]),
        3,
        300,
        &RewriteOptions::default(),
    );
    assert_eq!(n.tree, Id([2; 32]));
    assert_eq!(
        n.original,
        Some(Id([5; 32])),
        "it names the snapshot it was made from"
    );
    let again = rewritten(
        (Id([6; 32]), &n),
        Id([3; 32]),
        0,
        0,
        &RewriteOptions::default(),
    );
    assert_eq!(again.original, Some(Id([5; 32])), "the first of the chain");
    assert_eq!(n.tags, vec!["rewrite"], "the tag is not doubled");
    assert_eq!(n.summary.total_files_processed, 7);
    assert_eq!(n.summary.total_bytes_processed, 700);
    assert_eq!(n.summary.files_new, 4);
    let n = rewritten(
        (Id([5; 32]), &s),
        Id([2; 32]),
        30,
        3000,
        &RewriteOptions {
            forget: true,
            ..Default::default()
        },
    );
    assert_eq!(n.summary.total_files_processed, 0);
}

#[test]
fn an_unreadable_listing_stops_before_anything_is_saved() {
    let fx = build();
    fx.delete_pack(&fx.sub_pack);
    let index = fx.repo.load_index().unwrap();
    let snaps = fx.repo.list_snapshots(&Default::default()).unwrap();
    let before = fx.ids(FileType::Snapshot);
    let err = rewrite_snapshots(
        &fx.repo,
        &index,
        &snaps,
        Some(&only(&["/b"])),
        &RewriteOptions::default(),
    )
    .unwrap_err();
    match &err {
        RewriteError::Listing { snapshot, path, .. } => {
            assert_eq!(*snapshot, fx.snapshot);
            assert_eq!(path, Path::new("/sub"));
        }
        e => panic!("unexpected {e}"),
    }
    assert!(err.to_string().contains("/sub"), "{err}");
    assert_eq!(fx.ids(FileType::Snapshot), before);
}

#[test]
fn the_same_tree_at_two_paths_is_rewritten_per_path() {
    let fx = build();
    let mut root = fx.tree(&fx.root);
    let sub = root.find(b"sub").unwrap().clone();
    let mut twin = sub.clone();
    twin.name = b"twin".to_vec();
    root.nodes.push(twin);
    root.sort();
    let mut w = store::TreeWriter::new(&fx.repo, false);
    let root_id = w.store(&root, "test root", |_| false).unwrap();
    w.flush().unwrap();
    fx.repo
        .save_index(&arca_format::IndexFile {
            supersedes: vec![],
            packs: w.packs,
        })
        .unwrap();
    fx.delete(FileType::Snapshot, &fx.snapshot);
    fx.repo.save_snapshot(&snapshot(root_id, &[])).unwrap();

    let rep = run(&fx, &only(&["/twin/c"]), &RewriteOptions::default());
    let r = &rep.snapshots[0];
    let paths: Vec<&Path> = r.removed.iter().map(|x| x.path.as_path()).collect();
    assert_eq!(paths, vec![Path::new("/twin/c")]);
    let new_root = fx.tree(&r.new.as_ref().unwrap().tree);
    assert_eq!(new_root.find(b"sub").unwrap().subtree, sub.subtree);
    assert_ne!(new_root.find(b"twin").unwrap().subtree, sub.subtree);
    assert!(
        fx.tree(&new_root.find(b"twin").unwrap().subtree.unwrap())
            .nodes
            .is_empty()
    );
}

#[test]
fn a_dropped_directory_may_be_unreadable() {
    let fx = build();
    fx.delete_pack(&fx.sub_pack);
    let rep = run(&fx, &only(&["/sub"]), &RewriteOptions::default());
    let r = &rep.snapshots[0];
    assert_eq!(
        r.removed,
        vec![Removed {
            path: "/sub".into(),
            kind: NodeKind::Dir,
            files: 0,
            bytes: 0,
        }],
        "what it held cannot be counted"
    );
    let root = fx.tree(&r.new.as_ref().unwrap().tree);
    assert!(root.find(b"sub").is_none());
    assert!(root.find(b"a").is_some() && root.find(b"b").is_some());
}

/// A `rewrite --forget` stopped after saving a copy, before removing its original, left both;
/// the rerun rewrote the original again and saved a second, equal copy (the hunter counted 43
/// snapshots instead of 40). The rerun now takes the copy and removes the original.
#[test]
fn a_rerun_after_a_stop_takes_the_copy_already_saved() {
    let fx = build();
    let name = fx.snapshot.to_hex();
    let original = fx.backend.read(FileType::Snapshot, &name).unwrap();
    let forget = RewriteOptions {
        forget: true,
        ..Default::default()
    };
    let first = run(&fx, &only(&["/b"]), &forget);
    let copy = first.snapshots[0].new_id.unwrap();
    // As if stopped before the original went.
    fx.backend
        .write(FileType::Snapshot, &name, &original)
        .unwrap();
    assert_eq!(fx.ids(FileType::Snapshot).len(), 2);
    let rerun = run(&fx, &only(&["/b"]), &forget);
    let redone: Vec<_> = rerun.snapshots.iter().filter_map(|r| r.new_id).collect();
    assert_eq!(redone, [copy]);
    assert_eq!(fx.ids(FileType::Snapshot), [copy]);
}

/// restic's `rewrite --new-host --new-time`: only the metadata changes (no tree is read or
/// written, the tree id stays); a snapshot that already has the values is left alone.
#[test]
fn new_metadata_changes_only_the_host_and_time() {
    let fx = build();
    let old = fx.repo.load_snapshot(&fx.snapshot).unwrap();
    let packs_before = fx.ids(FileType::Pack);
    let time = chrono::DateTime::parse_from_rfc3339("2020-02-03T04:05:06+01:00").unwrap();
    let opts = RewriteOptions {
        metadata: NewMetadata {
            hostname: Some("elsewhere".into()),
            time: Some(time),
        },
        ..Default::default()
    };
    let index = fx.repo.load_index().unwrap();
    let snaps = fx.repo.list_snapshots(&Default::default()).unwrap();
    let rep = rewrite_snapshots(&fx.repo, &index, &snaps, None, &opts).unwrap();
    let r = &rep.snapshots[0];
    assert!(r.removed.is_empty());
    assert_eq!(r.old_hostname.as_deref(), Some(old.hostname.as_str()));
    assert_eq!(r.old_time, Some(old.time));
    let new = fx.repo.load_snapshot(&r.new_id.unwrap()).unwrap();
    let mut want = old.clone();
    want.hostname = "elsewhere".into();
    want.time = time;
    want.original = Some(fx.snapshot);
    want.tags.push(REWRITE_TAG.into());
    assert_eq!(new, want);
    assert_eq!(fx.ids(FileType::Pack), packs_before, "no tree written");
    assert_eq!(rep.index_file, None);

    // The copy has the values already: nothing to do.
    let again =
        rewrite_snapshots(&fx.repo, &index, &[(r.new_id.unwrap(), new)], None, &opts).unwrap();
    assert!(again.snapshots[0].new.is_none());
    assert_eq!(fx.ids(FileType::Snapshot).len(), 2);
}
