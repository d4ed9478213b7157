//! Files made by a newer arca (a higher body version, an unknown node kind) are not damage:
//! check proposes no repair for them, and the repairs leave them as they are (hunt 29:
//! `repair snapshots --forget` deleted them, and `repair index` a newer index file).

#![allow(clippy::unwrap_used)]

use arca_backend::FileType;
use arca_format::{BlobKind, IndexFile, Node, NodeKind, Tree};

use super::fixture::{build, pack, snapshot};
use super::*;
use crate::CheckOptions;
use crate::check::check;

/// Re-saves file `id` of type `t` with its body's u16 version set to 2 (sealed with the
/// repository's key, as a newer arca would write it); returns the new id.
fn bump_version(fx: &super::fixture::Fx, t: FileType, id: &arca_format::Id) -> arca_format::Id {
    let mut body = fx.repo.load_file(t, id).unwrap();
    body[4] = 2;
    let new = fx.repo.save_file(t, &body).unwrap();
    fx.delete(t, id);
    new
}

#[test]
fn a_newer_snapshot_is_reported_and_left_alone() {
    let fx = build();
    let newer = bump_version(&fx, FileType::Snapshot, &fx.snapshot);
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert!(!rep.is_ok());
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains("made by a newer arca")),
        "{:?}",
        rep.errors
    );
    assert!(rep.repairs.is_empty(), "{:?}", rep.repairs);
    let r = repair_snapshots(
        &fx.repo,
        &RepairSnapshotsOptions {
            forget: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.damaged_files_deleted, 0);
    assert_eq!(r.newer.len(), 1, "{:?}", r.newer);
    assert_eq!(fx.ids(FileType::Snapshot), vec![newer]);
}

#[test]
fn a_tree_of_an_unknown_node_kind_is_not_damage() {
    let fx = build();
    // A root listing with a node of kind 8 (a newer arca's), sealed and indexed.
    let mut tree = Tree {
        nodes: vec![Node {
            name: b"future".to_vec(),
            kind: Some(NodeKind::Fifo),
            mode: 0o644,
            ..Node::default()
        }],
    };
    let base = Tree::default().encode().unwrap();
    let mut bytes = tree.encode().unwrap();
    let at = base.len() + 4 + 6;
    assert_eq!(bytes[at], NodeKind::Fifo.code());
    bytes[at] = 8;
    tree.nodes.clear();
    let tid = fx.repo.key().blob_id(&bytes);
    let p = pack(&fx.repo, BlobKind::Tree, &[bytes]);
    fx.repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![p],
        })
        .unwrap();
    let s = fx.repo.save_snapshot(&snapshot(tid, &["future"])).unwrap();
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains("made by a newer arca")),
        "{:?}",
        rep.errors
    );
    assert!(rep.repairs.is_empty(), "{:?}", rep.repairs);
    let r = repair_snapshots(
        &fx.repo,
        &RepairSnapshotsOptions {
            forget: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(r.damaged.is_empty(), "{:?}", r.damaged);
    assert_eq!(r.newer.len(), 1, "{:?}", r.newer);
    let mut left = fx.ids(FileType::Snapshot);
    left.sort();
    let mut want = vec![fx.snapshot, s];
    want.sort();
    assert_eq!(left, want);
    // Prune refuses too, without calling it damage or sending the user to `repair packs`.
    let index = fx.repo.load_index().unwrap();
    let e =
        crate::prune::plan(&fx.repo, &index, &crate::prune::PruneOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            crate::prune::PruneError::UnreadableTree {
                fault: crate::prune::TreeFault::Newer,
                ..
            }
        ) && msg.contains("newer arca")
            && !msg.contains("repair"),
        "{msg}"
    );
}

#[test]
fn repair_index_keeps_a_newer_index_file() {
    let fx = build();
    let newer = bump_version(&fx, FileType::Index, &fx.index_file);
    let r = repair_index(&fx.repo, RepairIndexOptions::default()).unwrap();
    assert_eq!(r.newer_index_files.len(), 1, "{:?}", r.newer_index_files);
    assert!(r.damaged_index_files.is_empty());
    assert!(!r.deleted.contains(&newer));
    assert!(fx.ids(FileType::Index).contains(&newer));
    // Not superseded by the new index either.
    for id in fx.ids(FileType::Index).iter().filter(|id| **id != newer) {
        let f = fx.repo.load_index_file(id).unwrap();
        assert!(!f.supersedes.contains(&newer));
    }
    // Prune refuses, calling it what it is: `repair index` was its advice, a loop (hunt 30).
    let e = crate::prune::plan_repository(
        &fx.repo,
        &crate::prune::PruneOptions::default(),
        &crate::prune::Progress::default(),
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, crate::prune::PruneError::NewerIndex { .. })
            && msg.contains("newer arca")
            && !msg.contains("repair")
            && !msg.contains("damaged"),
        "{msg}"
    );
}

/// A data blob of a newer arca's compression (flag 2), in a pack no longer of its indexed
/// size (so the repair reads it), used by two snapshots of different trees: both are left
/// alone. The second one was cut and, with `--forget`, its original deleted: the memo of
/// the blob's read kept "unusable" and dropped "newer" (hunt 30).
#[test]
fn a_newer_data_blob_spares_every_snapshot_using_it() {
    use arca_format::ContentRef;
    use arca_format::key::NONCE_LEN;
    use arca_repo::blob::SealedBlob;
    use arca_repo::pack::PackWriter;
    let fx = build();
    let plain = b"a newer arca's payload".to_vec();
    let id = fx.repo.key().blob_id(&plain);
    let nonce = [7u8; NONCE_LEN];
    let mut bytes = nonce.to_vec();
    bytes.push(2);
    bytes.extend_from_slice(&plain);
    fx.repo
        .sealer()
        .seal_tail(id.as_bytes(), &nonce, &mut bytes, NONCE_LEN)
        .unwrap();
    let mut w = PackWriter::new(BlobKind::Data, 1 << 16);
    w.add(&SealedBlob {
        kind: BlobKind::Data,
        id,
        raw_len: plain.len() as u32,
        bytes,
    })
    .unwrap();
    let p = w.finish(fx.repo.sealer()).unwrap();
    let mut file = p.bytes.clone();
    file.push(b'Z');
    fx.backend
        .write(FileType::Pack, &p.id.to_hex(), &file)
        .unwrap();
    fx.repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![p.index],
        })
        .unwrap();
    let mut made = vec![fx.snapshot];
    for name in ["x", "y"] {
        made.push(fx.add_snapshot(&Tree {
            nodes: vec![Node {
                name: name.as_bytes().to_vec(),
                kind: Some(NodeKind::File),
                mode: 0o644,
                size: plain.len() as u64,
                content: vec![ContentRef {
                    id,
                    len: plain.len() as u32,
                }],
                ..Node::default()
            }],
        }));
    }
    let r = repair_snapshots(
        &fx.repo,
        &RepairSnapshotsOptions {
            forget: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.newer.len(), 2, "{:?}", r.newer);
    assert!(r.damaged.is_empty(), "{:?}", r.damaged);
    assert_eq!(r.damaged_files_deleted, 0);
    let mut left = fx.ids(FileType::Snapshot);
    left.sort();
    made.sort();
    assert_eq!(left, made);
}

/// Replaces pack `data1` of `fx` by one holding the same blobs under a header a newer arca
/// wrote (sealed with the repository's key, body version 2), indexed in a new index file
/// replacing the fixture's; returns the new pack's id.
fn newer_header_pack(fx: &super::fixture::Fx) -> arca_format::Id {
    use arca_format::IndexPack;
    let old = fx
        .backend
        .read(FileType::Pack, &fx.data1.id.to_hex())
        .unwrap();
    let (id, bytes) = arca_testkit::packs::with_newer_header(
        &old,
        fx.data1.kind,
        &fx.data1.blobs,
        |aad, plain, out| fx.repo.sealer().seal_into(aad, plain, out).unwrap(),
    );
    fx.backend
        .write(FileType::Pack, &id.to_hex(), &bytes)
        .unwrap();
    fx.delete_pack(&fx.data1);
    fx.delete(FileType::Index, &fx.index_file);
    let mut packs = fx.packs();
    packs[0] = IndexPack {
        id,
        size: bytes.len() as u64,
        ..fx.data1.clone()
    };
    fx.repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs,
        })
        .unwrap();
    id
}

/// An intact pack (it hashes to its name, its blobs verify) whose header a newer arca wrote:
/// check reports it as such and proposes no repair (it proposed `repair packs`, which leaves
/// such a pack alone: hunt 30).
#[test]
fn check_proposes_no_repair_for_a_newer_pack_header() {
    let fx = build();
    newer_header_pack(&fx);
    let rep = check(
        &fx.repo,
        CheckOptions {
            read_data: true,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains("made by a newer arca")),
        "{:?}",
        rep.errors
    );
    assert!(rep.repairs.is_empty(), "{:?}", rep.repairs);
}

/// `repair packs` on a pack it leaves alone (its header a newer arca wrote) writes nothing:
/// the index files stay as they are, names and bytes (it wrote the whole index again).
#[test]
fn repair_packs_writes_nothing_when_it_leaves_every_pack_alone() {
    let fx = build();
    let id = newer_header_pack(&fx);
    let index_files = || -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = fx
            .backend
            .list(FileType::Index)
            .unwrap()
            .into_iter()
            .map(|f| {
                let bytes = fx.backend.read(FileType::Index, &f.name).unwrap();
                (f.name, bytes)
            })
            .collect();
        v.sort();
        v
    };
    let before = index_files();
    let rep = repair_packs(&fx.repo, &[id], RepairPacksOptions::default()).unwrap();
    assert_eq!(rep.newer_packs.len(), 1, "{:?}", rep.newer_packs);
    assert!(rep.packs.is_empty(), "{:?}", rep.packs);
    assert!(
        rep.index_files_written.is_empty(),
        "{:?}",
        rep.index_files_written
    );
    assert!(
        rep.index_files_deleted.is_empty(),
        "{:?}",
        rep.index_files_deleted
    );
    assert!(rep.new_packs.is_empty() && rep.packs_deleted.is_empty());
    assert_eq!(index_files(), before);
    assert!(fx.backend.read(FileType::Pack, &id.to_hex()).is_ok());
}
