//! Copy between repositories built by hand: translated and by id, again (nothing new), dry
//! runs, damaged source data.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use arca_backend::{Backend, FileType, MemoryBackend};
use arca_format::config::ContentKeys;
use arca_format::{BlobKind, Id, KdfParams, NodeKind};
use arca_repo::{InitOptions, Repository, SnapshotFilter};

use super::*;
use crate::check::{CheckOptions, check};
use crate::repair::fixture::{self, Fx, chunk, snapshot};

/// A target repository sharing `src`'s blob-id and chunker keys.
fn twin(src: &Repository) -> Repository {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let opts = InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        ..InitOptions::default()
    };
    let keys = ContentKeys::new(src.key().id_key(), src.key().chunker_key());
    Repository::init_with_content_keys(backend, b"pw", &opts, Some(keys)).unwrap()
}

/// Copies every snapshot of `fx` into `dst` in one run.
fn copy_all(fx: &Fx, dst: &Repository, opts: CopyOptions) -> (Vec<SnapshotCopy>, CopyReport) {
    let src_index = fx.repo.load_index().unwrap();
    let dst_index = dst.load_index().unwrap();
    let mut c = Copier::new(&fx.repo, &src_index, dst, &dst_index, opts);
    let copies = fx
        .repo
        .list_snapshots(&SnapshotFilter::default())
        .unwrap()
        .iter()
        .map(|(id, s)| c.copy_snapshot(id, s).unwrap())
        .collect();
    (copies, c.report())
}

/// The files of the fixture's snapshot as the target holds them: names and contents.
fn files(dst: &Repository, root: Id) -> Vec<(String, Vec<u8>)> {
    let index = dst.load_index().unwrap();
    let mut out = vec![];
    let mut stack = vec![(String::new(), root)];
    while let Some((prefix, id)) = stack.pop() {
        for n in dst.load_tree(&index, &id).unwrap().nodes {
            let name = format!("{prefix}/{}", String::from_utf8_lossy(&n.name));
            if n.kind() == NodeKind::Dir {
                stack.push((name, n.subtree.unwrap()));
                continue;
            }
            let mut bytes = vec![];
            for c in &n.content {
                bytes.extend(dst.read_blob(&index, BlobKind::Data, &c.id).unwrap());
            }
            out.push((name, bytes));
        }
    }
    out.sort();
    out
}

fn expected_files() -> Vec<(String, Vec<u8>)> {
    let cat = |names: &[&str]| names.iter().flat_map(|n| chunk(n)).collect::<Vec<u8>>();
    vec![
        ("/a".into(), cat(&["a0", "a1", "a2"])),
        ("/b".into(), cat(&["b0"])),
        ("/sub/c".into(), cat(&["c0"])),
    ]
}

fn clean(repo: &Repository) {
    let r = check(
        repo,
        CheckOptions {
            read_data: true,
            workers: 2,
        },
    )
    .unwrap();
    assert!(r.is_ok(), "{:?}", r.errors);
}

#[test]
fn translated_copy_rebuilds_trees_and_dedups_on_the_second_run() {
    let fx = fixture::build();
    let (dst, _) = fixture::repo();
    let (copies, report) = copy_all(&fx, &dst, CopyOptions::default());
    assert_eq!(copies.len(), 1);
    let c = &copies[0];
    assert!(!same_ids(&fx.repo, &dst));
    assert_ne!(c.snapshot.tree, fx.root, "translated trees get new ids");
    assert_eq!((c.stored.data_blobs, c.stored.tree_blobs), (5, 2));
    assert_eq!(c.stored.data_bytes, 5 * chunk("a0").len() as u64);
    assert_eq!(report.data_blobs_read, 5);
    assert_eq!(report.index_files_written, 1);
    assert_eq!(report.packs_written, 2);
    let saved = dst.load_snapshot(&c.id.unwrap()).unwrap();
    assert_eq!(saved, c.snapshot);
    let original = snapshot(fx.root, &["daily"]);
    assert_eq!(
        saved.original,
        Some(fx.snapshot),
        "the copy names its original"
    );
    assert!(same_snapshot(&saved, (&fx.snapshot, &original), false));
    assert!(!same_snapshot(&saved, (&Id([9; 32]), &original), false));
    // The source tree is recorded: a source snapshot rewritten to another tree with the same
    // totals (`rewrite --forget` dropping only a symlink or an empty folder) is no longer
    // taken for the one copied (it was skipped: hunt 22).
    assert_eq!(saved.copied_tree, Some(fx.root));
    let mut rewritten = original.clone();
    rewritten.tree = Id([5; 32]);
    rewritten.original = Some(fx.snapshot);
    assert!(!same_snapshot(&saved, (&Id([6; 32]), &rewritten), false));
    // Through a third repository and back (trees of three id spaces: 1 here, 2 and 3 in
    // the others), every copy names the first tree: no snapshot is copied twice (hunt 23).
    let first = snapshot(Id([1; 32]), &["daily"]);
    let in_b = Snapshot {
        tree: Id([2; 32]),
        copied_tree: Some(Id([1; 32])),
        original: Some(fx.snapshot),
        ..first.clone()
    };
    let in_c = Snapshot {
        tree: Id([3; 32]),
        ..in_b.clone()
    };
    assert!(
        same_snapshot(&in_c, (&fx.snapshot, &first), false),
        "C from A"
    );
    assert!(
        same_snapshot(&in_c, (&Id([8; 32]), &in_b), false),
        "C from B"
    );
    assert!(
        same_snapshot(&first, (&Id([8; 32]), &in_b), false),
        "A from B"
    );
    assert!(
        same_snapshot(&in_b, (&Id([9; 32]), &in_c), false),
        "B from C"
    );
    assert_eq!(files(&dst, saved.tree), expected_files());
    clean(&dst);

    // A second run reads the data again (ids must be computed) but stores nothing, and
    // rebuilds the same root tree.
    let (again, report) = copy_all(&fx, &dst, CopyOptions::default());
    assert_eq!(again[0].stored, Counts::default());
    assert_eq!(again[0].snapshot.tree, saved.tree);
    assert_eq!(report.data_blobs_read, 5);
    assert_eq!(report.packs_written, 0);
}

#[test]
fn copy_by_id_keeps_trees_and_reads_only_missing_data() {
    let fx = fixture::build();
    let dst = twin(&fx.repo);
    assert!(same_ids(&fx.repo, &dst));
    // Reopened, the target still uses the copied keys (they are in its config), while its
    // sealing key is its own: the source's key cannot open its config.
    let reopened = Repository::open(dst.backend().clone(), b"pw").unwrap();
    assert!(same_ids(&fx.repo, &reopened));
    assert_eq!(reopened.key().chunker_key(), fx.repo.key().chunker_key());
    assert!(reopened.config().content_keys.is_some());
    // Version 2, or 3 when the cipher is not XChaCha20-Poly1305.
    assert_eq!(
        reopened.config().version(),
        if reopened.config().cipher == arca_format::Cipher::XChaCha20Poly1305 {
            2
        } else {
            3
        }
    );
    assert!(Repository::open(dst.backend().clone(), b"other").is_err());

    let (dry, report) = copy_all(
        &fx,
        &reopened,
        CopyOptions {
            dry_run: true,
            readers: 1,
        },
    );
    assert_eq!((dry[0].stored.data_blobs, dry[0].stored.tree_blobs), (5, 2));
    assert_eq!(dry[0].id, None);
    assert_eq!(report.data_blobs_read, 0, "by id, a dry run reads no data");
    assert!(dst.list_ids(FileType::Pack).unwrap().is_empty());
    assert!(dst.list_ids(FileType::Snapshot).unwrap().is_empty());

    let (copies, report) = copy_all(&fx, &reopened, CopyOptions::default());
    let c = &copies[0];
    assert_eq!(c.snapshot.tree, fx.root, "by id, trees keep their ids");
    assert_eq!(c.snapshot.copied_tree, None, "nothing to record");
    assert_eq!((c.stored.data_blobs, c.stored.tree_blobs), (5, 2));
    assert_eq!(report.data_blobs_read, 5);
    assert_eq!(files(&reopened, fx.root), expected_files());
    clean(&reopened);

    let (again, report) = copy_all(&fx, &reopened, CopyOptions::default());
    assert_eq!(again[0].stored, Counts::default());
    assert_eq!(report.data_blobs_read, 0);
    assert_eq!(report.packs_written, 0);
}

#[test]
fn damaged_source_data_fails_naming_blob_and_pack_and_saves_no_snapshot() {
    for missing in [false, true] {
        damaged_source_data(missing);
    }
}

/// A flipped byte in a source data pack, or the pack missing (its error was the bare OS
/// error, without the blob or the check to run: hunt 22).
fn damaged_source_data(missing: bool) {
    let fx = fixture::build();
    let (dst, _) = fixture::repo();
    let size = fx.data2.size as usize;
    if missing {
        fx.delete(FileType::Pack, &fx.data2.id);
    } else {
        fx.flip(FileType::Pack, &fx.data2.id, size / 3);
    }
    let src_index = fx.repo.load_index().unwrap();
    let dst_index = dst.load_index().unwrap();
    let mut c = Copier::new(
        &fx.repo,
        &src_index,
        &dst,
        &dst_index,
        CopyOptions::default(),
    );
    let s = fx.repo.load_snapshot(&fx.snapshot).unwrap();
    let err = c.copy_snapshot(&fx.snapshot, &s).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, CopyError::BadBlob { pack, .. } if pack == fx.data2.id),
        "{msg}"
    );
    assert!(msg.contains(&fx.data2.id.to_hex()), "{msg}");
    assert!(msg.contains("arca check"), "{msg}");
    assert_eq!(msg.contains("the pack is missing"), missing, "{msg}");
    assert!(dst.list_ids(FileType::Snapshot).unwrap().is_empty());
}

/// A data blob stored twice, one copy damaged or its pack gone: the copy reads the other,
/// as restore and check do (hunt 30: the copy stopped at the first copy, naming it damaged,
/// while the snapshot restored whole). Each copy is damaged in turn: whichever the index
/// names first, one run takes the way round.
#[test]
fn a_damaged_copy_of_a_blob_gives_way_to_another() {
    for missing in [false, true] {
        for damage_second in [false, true] {
            let fx = fixture::build();
            let other = fixture::pack(&fx.repo, BlobKind::Data, &[chunk("a2"), chunk("c0")]);
            fx.repo
                .save_index(&arca_format::IndexFile {
                    supersedes: vec![],
                    packs: vec![other.clone()],
                })
                .unwrap();
            let victim = if damage_second { &other } else { &fx.data2 };
            if missing {
                fx.delete(FileType::Pack, &victim.id);
            } else {
                fx.flip(FileType::Pack, &victim.id, victim.size as usize / 3);
            }
            let dst = twin(&fx.repo);
            let (copies, _) = copy_all(&fx, &dst, CopyOptions::default());
            assert_eq!(copies.len(), 1);
            let snaps = dst.list_snapshots(&SnapshotFilter::default()).unwrap();
            assert_eq!(files(&dst, snaps[0].1.tree), expected_files());
            clean(&dst);
        }
    }
}

/// A snapshot whose listing a newer arca wrote is not copied, and not called damage: the
/// error says to copy it with the newer arca (it sent the user to `check`, which says only to
/// upgrade: hunt 30), and the caller goes on with the other snapshots.
#[test]
fn a_newer_listing_is_not_damage() {
    let fx = fixture::build();
    let mut bytes = arca_format::Tree::default().encode().unwrap();
    bytes[4] = 2;
    let tid = fx.repo.key().blob_id(&bytes);
    let p = fixture::pack(&fx.repo, BlobKind::Tree, &[bytes]);
    fx.repo
        .save_index(&arca_format::IndexFile {
            supersedes: vec![],
            packs: vec![p],
        })
        .unwrap();
    let dst = twin(&fx.repo);
    let src_index = fx.repo.load_index().unwrap();
    let dst_index = dst.load_index().unwrap();
    let mut c = Copier::new(
        &fx.repo,
        &src_index,
        &dst,
        &dst_index,
        CopyOptions::default(),
    );
    let s = snapshot(tid, &["newer"]);
    let err = c.copy_snapshot(&tid, &s).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, CopyError::NewerTree { .. }), "{msg}");
    assert!(
        msg.contains("newer arca") && !msg.contains("check"),
        "{msg}"
    );
    // The run goes on: the fixture's snapshot copies whole.
    let s = fx.repo.load_snapshot(&fx.snapshot).unwrap();
    let copied = c.copy_snapshot(&fx.snapshot, &s).unwrap();
    assert_eq!(files(&dst, copied.snapshot.tree), expected_files());
}

#[test]
fn snapshot_identity() {
    let mut a = snapshot(Id([1; 32]), &["x", "y"]);
    let mut b = snapshot(Id([2; 32]), &["y", "x"]);
    let id = Id([7; 32]);
    // A backup alike in time, names and totals is no copy (its content may differ: the
    // source snapshot was skipped and never copied, hunt H18); one naming its original,
    // made before `copied_tree` was recorded, is taken by its totals.
    assert!(!same_snapshot(&a, (&id, &b), false));
    a.original = Some(id);
    assert!(same_snapshot(&a, (&id, &b), false));
    assert!(!same_snapshot(&a, (&id, &b), true));
    b.tree = a.tree;
    assert!(same_snapshot(&a, (&id, &b), true));
    b.parent = Some(Id([3; 32]));
    assert!(same_snapshot(&a, (&id, &b), true));
    for change in [
        |s: &mut Snapshot| s.hostname.push('2'),
        |s: &mut Snapshot| s.tags.push("z".into()),
        |s: &mut Snapshot| s.paths = vec!["/other".into()],
        |s: &mut Snapshot| s.time += chrono::Duration::nanoseconds(1),
        |s: &mut Snapshot| s.username.clear(),
        // What `rewrite --forget` changes besides the tree.
        |s: &mut Snapshot| s.summary.total_files_processed += 1,
        |s: &mut Snapshot| s.summary.total_bytes_processed += 1,
    ] {
        let mut c = a.clone();
        change(&mut c);
        assert!(!same_snapshot(&a, (&id, &c), false));
    }
    // A copy naming its original is a copy of that snapshot only, or of a snapshot made from
    // the same original (a copy of a copy).
    let copy = a.clone();
    assert!(same_snapshot(&copy, (&id, &b), true));
    assert!(!same_snapshot(&copy, (&Id([8; 32]), &b), true));
    let mut tagged = b.clone();
    tagged.original = Some(id);
    assert!(same_snapshot(&copy, (&Id([8; 32]), &tagged), true));
}

/// A field a newer arca added to the source snapshot's JSON is in the copy too (hunt 29
/// compat F5: copy dropped it).
#[test]
fn unknown_snapshot_fields_are_copied() {
    let fx = fixture::build();
    let body = fx.repo.load_file(FileType::Snapshot, &fx.snapshot).unwrap();
    let mut nb = body[..6].to_vec();
    nb.extend_from_slice(b"{\"future_field\":{\"keep\":\"me\"},");
    nb.extend_from_slice(&body[7..]);
    fx.repo.save_file(FileType::Snapshot, &nb).unwrap();
    fx.delete(FileType::Snapshot, &fx.snapshot);
    let (dst, _) = fixture::repo();
    let (copies, _) = copy_all(&fx, &dst, CopyOptions::default());
    assert_eq!(copies.len(), 1);
    let saved = dst
        .load_file(FileType::Snapshot, &copies[0].id.unwrap())
        .unwrap();
    let text = String::from_utf8_lossy(&saved[6..]);
    assert!(text.contains(r#""future_field":{"keep":"me"}"#), "{text}");
}
