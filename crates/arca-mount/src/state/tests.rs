//! Tests of the mount's state below FUSE.

#![allow(clippy::unwrap_used)]

use arca_backend::{Backend, MemoryBackend};
use arca_format::{IndexFile, KdfParams, Snapshot};
use arca_repo::blob::seal_blob;
use arca_repo::pack::PackWriter;
use arca_repo::{InitOptions, LockKind};

use super::*;

fn dir(name: &str, subtree: Id) -> Node {
    Node {
        name: name.into(),
        kind: Some(NodeKind::Dir),
        mode: 0o755,
        subtree: Some(subtree),
        ..Node::default()
    }
}

fn file(name: &str) -> Node {
    Node {
        name: name.into(),
        kind: Some(NodeKind::File),
        mode: 0o644,
        nlink: 1,
        ..Node::default()
    }
}

/// Writes `trees` in one pack and an index file naming it; returns the pack and the ids.
fn tree_pack(repo: &Repository, trees: &[Tree]) -> (Id, Vec<Id>) {
    let mut w = PackWriter::new(BlobKind::Tree, 1 << 16);
    let mut ids = vec![];
    for t in trees {
        let data = t.encode().unwrap();
        let id = repo.key().blob_id(&data);
        w.add(&seal_blob(repo.sealer(), BlobKind::Tree, id, &data, 0).unwrap())
            .unwrap();
        ids.push(id);
    }
    let p = w.finish(repo.sealer()).unwrap();
    repo.backend()
        .write(RepoFile::Pack, &p.id.to_hex(), &p.bytes)
        .unwrap();
    repo.save_index(&IndexFile {
        supersedes: vec![],
        packs: vec![p.index],
    })
    .unwrap();
    (p.id, ids)
}

/// Two folders whose listings are lost with the same pack are each reported, by their
/// path in the mount and their tree id, once each.
#[test]
fn each_unreadable_folder_listing_is_reported_by_name() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let opts = InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        ..InitOptions::default()
    };
    let repo = Repository::init(b, b"pw", &opts).unwrap();
    let held = repo.lock(LockKind::Exclusive).unwrap();
    let (lost_pack, subtrees) = tree_pack(
        &repo,
        &[
            Tree {
                nodes: vec![file("x")],
            },
            Tree {
                nodes: vec![file("y")],
            },
        ],
    );
    let (_, root) = tree_pack(
        &repo,
        &[Tree {
            nodes: vec![dir("a", subtrees[0]), dir("b", subtrees[1])],
        }],
    );
    let snap = Snapshot {
        time: chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05+00:00").unwrap(),
        tree: root[0],
        paths: vec!["/s".into()],
        hostname: "h".into(),
        username: "u".into(),
        uid: 0,
        gid: 0,
        tags: vec![],
        parent: None,
        original: None,
        copied_tree: None,
        program_version: String::new(),
        complete: true,
        summary: Default::default(),
    };
    repo.save_snapshot(&snap).unwrap();
    drop(held);

    let told = Arc::new(Mutex::new(vec![]));
    let report: Report = {
        let told = Arc::clone(&told);
        Arc::new(move |m: &str| lock(&told).push(m.to_string()))
    };
    let state = State::load(
        repo.clone(),
        SnapshotFilter::default(),
        &MountOptions::default(),
        report,
    )
    .unwrap();
    let time = layout::time_name(&snap);
    let l = state.layout();
    let snapshots = l.child(layout::ROOT, b"snapshots").unwrap();
    let shown = l.child(snapshots, time.as_bytes()).unwrap();
    let a = state.lookup(shown, b"a").unwrap().ino.0;
    let b = state.lookup(shown, b"b").unwrap().ino.0;
    repo.backend()
        .delete(RepoFile::Pack, &lost_pack.to_hex())
        .unwrap();
    for ino in [a, b, a, b] {
        assert_eq!(state.open_dir(ino).unwrap_err(), Errno::EIO);
    }
    let told = lock(&told).clone();
    assert_eq!(told.len(), 2, "{told:?}");
    for (line, name, tree) in [(&told[0], "a", subtrees[0]), (&told[1], "b", subtrees[1])] {
        let path = format!("\"/snapshots/{time}/{name}\"");
        assert!(line.contains(&path), "{line}");
        assert!(line.contains(&format!("tree {}", tree.short())), "{line}");
    }
}

/// Writes `blobs` of `kind` in one pack; returns its index entry and the ids.
fn pack_of(
    repo: &Repository,
    kind: BlobKind,
    blobs: &[&[u8]],
) -> (arca_format::IndexPack, Vec<Id>) {
    let mut w = PackWriter::new(kind, 1 << 16);
    let mut ids = vec![];
    for data in blobs {
        let id = repo.key().blob_id(data);
        w.add(&seal_blob(repo.sealer(), kind, id, data, 0).unwrap())
            .unwrap();
        ids.push(id);
    }
    let p = w.finish(repo.sealer()).unwrap();
    repo.backend()
        .write(RepoFile::Pack, &p.id.to_hex(), &p.bytes)
        .unwrap();
    (p.index, ids)
}

fn test_repo() -> Repository {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let opts = InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        ..InitOptions::default()
    };
    Repository::init(b, b"pw", &opts).unwrap()
}

fn snapshot_of(tree: Id) -> Snapshot {
    Snapshot {
        time: chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05+00:00").unwrap(),
        tree,
        paths: vec!["/s".into()],
        hostname: "h".into(),
        username: "u".into(),
        uid: 0,
        gid: 0,
        tags: vec![],
        parent: None,
        original: None,
        copied_tree: None,
        program_version: String::new(),
        complete: true,
        summary: Default::default(),
    }
}

/// A prune run while mounted without a lock moves a file's data to a new pack and deletes
/// the old one (and the index file naming it): a read of the file finds the pack gone,
/// loads the index again and reads from the new pack (it failed with EIO until a new
/// snapshot made the index load). A pack lost for good still fails, without loading the
/// index again.
#[test]
fn a_read_whose_pack_was_repacked_loads_the_index_again() {
    let repo = test_repo();
    let data: &[u8] = b"the file's only block";
    let (old_data, blob) = pack_of(&repo, BlobKind::Data, &[data]);
    let mut f = file("f");
    f.size = data.len() as u64;
    f.content = vec![ContentRef {
        id: blob[0],
        len: data.len() as u32,
    }];
    let root = Tree { nodes: vec![f] };
    let root_bytes = root.encode().unwrap();
    let (trees, root_id) = pack_of(&repo, BlobKind::Tree, &[&root_bytes]);
    let old_index = repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![old_data.clone(), trees.clone()],
        })
        .unwrap();
    let snap = snapshot_of(root_id[0]);
    repo.save_snapshot(&snap).unwrap();

    let told = Arc::new(Mutex::new(vec![]));
    let report: Report = {
        let told = Arc::clone(&told);
        Arc::new(move |m: &str| lock(&told).push(m.to_string()))
    };
    let state = State::load(
        repo.clone(),
        SnapshotFilter::default(),
        &MountOptions::default(),
        report,
    )
    .unwrap();
    let l = state.layout();
    let snapshots = l.child(layout::ROOT, b"snapshots").unwrap();
    let shown = l
        .child(snapshots, layout::time_name(&snap).as_bytes())
        .unwrap();
    let ino = state.lookup(shown, b"f").unwrap().ino.0;
    let fh = state.open_file(ino).unwrap();

    // As prune repacks: the blob in a new pack, a new index file superseding the old one,
    // then the old index file and the old pack deleted.
    let (new_data, _) = pack_of(&repo, BlobKind::Data, &[data, b"another block"]);
    repo.save_index(&IndexFile {
        supersedes: vec![old_index],
        packs: vec![new_data.clone(), trees],
    })
    .unwrap();
    repo.backend()
        .delete(RepoFile::Index, &old_index.to_hex())
        .unwrap();
    repo.backend()
        .delete(RepoFile::Pack, &old_data.id.to_hex())
        .unwrap();
    assert_eq!(state.read(ino, fh, 0, 4096).unwrap(), data);
    assert!(lock(&told).is_empty(), "{:?}", lock(&told));

    // Lost for good: the read fails, and the index, whose files did not change, is not
    // loaded again for it.
    repo.backend()
        .delete(RepoFile::Pack, &new_data.id.to_hex())
        .unwrap();
    let index = read(&state.index);
    let got = state.with_index(|i| repo.read_blob(i, BlobKind::Data, &blob[0]));
    assert!(got.is_err_and(|e| missed(&e)));
    assert!(Arc::ptr_eq(&index, &read(&state.index)));
}

/// Two names of one hard-linked file share an inode when the snapshot gives them the same
/// content; when it gives them different contents (the file changed while the backup read
/// it), each keeps its own, as restore and dump give them.
#[test]
fn hard_links_share_an_inode_only_with_the_same_content() {
    let linked = |name: &str, blob: u8| Node {
        nlink: 2,
        dev: 9,
        inode: 77,
        size: 5,
        content: vec![arca_format::ContentRef {
            id: Id([blob; 32]),
            len: 5,
        }],
        ..file(name)
    };
    let (a, b) = (linked("a", 1), linked("b", 1));
    assert_eq!(content_ino(10, 1, &a), content_ino(11, 1, &b));
    let changed = linked("b", 2);
    assert_ne!(content_ino(10, 1, &a), content_ino(11, 1, &changed));
    // Another snapshot shows its own.
    assert_ne!(content_ino(10, 1, &a), content_ino(10, 2, &a));
}
