//! A small repository built by hand for the tests of this crate ([`build`]): one snapshot of
//! three files in four packs, and the means to damage it.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use arca_backend::{Backend, FileType, MemoryBackend};
use arca_format::{
    BlobKind, ContentRef, Id, IndexFile, IndexPack, KdfParams, Node, NodeKind, Snapshot, Tree,
};
use arca_repo::blob::seal_blob;
use arca_repo::pack::PackWriter;
use arca_repo::{InitOptions, Repository};

/// The fixture's repository and what is where: one snapshot of `/a` (three blobs, the last in
/// another pack), `/b` (one blob) and `/sub/c` (one blob in the second data pack), with the
/// listing of `/sub` and the root in packs of their own.
pub(crate) struct Fx {
    pub repo: Repository,
    pub backend: Arc<dyn Backend>,
    pub snapshot: Id,
    /// `/a`'s first two blobs and `/b`.
    pub data1: IndexPack,
    /// `/a`'s last blob and `/sub/c`.
    pub data2: IndexPack,
    /// The listing of `/sub`.
    pub sub_pack: IndexPack,
    /// The root listing.
    pub root_pack: IndexPack,
    /// The root tree's id.
    pub root: Id,
    /// The only index file.
    pub index_file: Id,
}

/// A new repository with a cheap key.
pub(crate) fn repo() -> (Repository, Arc<dyn Backend>) {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let opts = InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        ..InitOptions::default()
    };
    (
        Repository::init(backend.clone(), b"pw", &opts).unwrap(),
        backend,
    )
}

/// Bytes of chunk `name`.
pub(crate) fn chunk(name: &str) -> Vec<u8> {
    format!("chunk {name} ").repeat(100).into_bytes()
}

/// Writes a pack of `blobs` (no index file names it); returns its index entry.
pub(crate) fn pack(repo: &Repository, kind: BlobKind, blobs: &[Vec<u8>]) -> IndexPack {
    let mut w = PackWriter::new(kind, 1 << 16);
    for b in blobs {
        let id = repo.key().blob_id(b);
        w.add(&seal_blob(repo.sealer(), kind, id, b, 3).unwrap())
            .unwrap();
    }
    let p = w.finish(repo.sealer()).unwrap();
    repo.backend()
        .write(FileType::Pack, &p.id.to_hex(), &p.bytes)
        .unwrap();
    p.index
}

/// A file node listing `chunks`.
pub(crate) fn file(repo: &Repository, name: &str, chunks: &[&str]) -> Node {
    let content: Vec<ContentRef> = chunks
        .iter()
        .map(|c| {
            let b = chunk(c);
            ContentRef {
                id: repo.key().blob_id(&b),
                len: b.len() as u32,
            }
        })
        .collect();
    Node {
        name: name.as_bytes().to_vec(),
        kind: Some(NodeKind::File),
        mode: 0o644,
        size: content.iter().map(|c| u64::from(c.len)).sum(),
        content,
        ..Node::default()
    }
}

/// A snapshot of `tree` with tags.
pub(crate) fn snapshot(tree: Id, tags: &[&str]) -> Snapshot {
    let json = format!(
        r#"{{"time":"2026-01-02T03:04:05+00:00","tree":"{tree}","paths":["/"],
        "hostname":"h","username":"u","uid":1,"gid":2,"tags":{tags:?},"parent":null,
        "program_version":"arca test","complete":true}}"#
    );
    let mut body = b"ASNP\x01\x00".to_vec();
    body.extend_from_slice(json.as_bytes());
    Snapshot::decode(&body).unwrap()
}

/// Builds the fixture.
pub(crate) fn build() -> Fx {
    let (repo, backend) = repo();
    let data1 = pack(
        &repo,
        BlobKind::Data,
        &[chunk("a0"), chunk("a1"), chunk("b0")],
    );
    let data2 = pack(&repo, BlobKind::Data, &[chunk("a2"), chunk("c0")]);
    let sub = Tree {
        nodes: vec![file(&repo, "c", &["c0"])],
    };
    let sub_bytes = sub.encode().unwrap();
    let sub_id = repo.key().blob_id(&sub_bytes);
    let sub_pack = pack(&repo, BlobKind::Tree, &[sub_bytes]);
    let root = Tree {
        nodes: vec![
            file(&repo, "a", &["a0", "a1", "a2"]),
            file(&repo, "b", &["b0"]),
            Node {
                name: b"sub".to_vec(),
                kind: Some(NodeKind::Dir),
                mode: 0o755,
                subtree: Some(sub_id),
                ..Node::default()
            },
        ],
    };
    let root_bytes = root.encode().unwrap();
    let root_id = repo.key().blob_id(&root_bytes);
    let root_pack = pack(&repo, BlobKind::Tree, &[root_bytes]);
    let index_file = repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![
                data1.clone(),
                data2.clone(),
                sub_pack.clone(),
                root_pack.clone(),
            ],
        })
        .unwrap();
    let snapshot = repo.save_snapshot(&snapshot(root_id, &["daily"])).unwrap();
    Fx {
        repo,
        backend,
        snapshot,
        data1,
        data2,
        sub_pack,
        root_pack,
        root: root_id,
        index_file,
    }
}

impl Fx {
    /// Stores `root` as a new snapshot's root listing (its own pack and index file).
    pub(crate) fn add_snapshot(&self, root: &Tree) -> Id {
        let bytes = root.encode().unwrap();
        let id = self.repo.key().blob_id(&bytes);
        let p = pack(&self.repo, BlobKind::Tree, &[bytes]);
        self.repo
            .save_index(&IndexFile {
                supersedes: vec![],
                packs: vec![p],
            })
            .unwrap();
        self.repo
            .save_snapshot(&snapshot(id, &["crafted"]))
            .unwrap()
    }

    /// The four packs: `data1`, `data2`, `sub_pack`, `root_pack`.
    pub(crate) fn packs(&self) -> Vec<IndexPack> {
        [&self.data1, &self.data2, &self.sub_pack, &self.root_pack]
            .map(IndexPack::clone)
            .to_vec()
    }

    /// Deletes a repository file.
    pub(crate) fn delete(&self, t: FileType, id: &Id) {
        self.backend.delete(t, &id.to_hex()).unwrap();
    }

    /// Deletes a pack file.
    pub(crate) fn delete_pack(&self, p: &IndexPack) {
        self.delete(FileType::Pack, &p.id);
    }

    /// Flips a byte of a repository file.
    pub(crate) fn flip(&self, t: FileType, id: &Id, at: usize) {
        let mut b = self.backend.read(t, &id.to_hex()).unwrap();
        b[at] ^= 0x20;
        self.backend.write(t, &id.to_hex(), &b).unwrap();
    }

    /// The ids of the files of a type.
    pub(crate) fn ids(&self, t: FileType) -> Vec<Id> {
        self.repo
            .list_ids(t)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }

    /// Tree `id`, read through a freshly loaded index.
    pub(crate) fn tree(&self, id: &Id) -> Tree {
        let index = self.repo.load_index().unwrap();
        self.repo.load_tree(&index, id).unwrap()
    }
}
