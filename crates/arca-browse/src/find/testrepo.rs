//! Test support: an in-memory repository holding hand-made listings, and data blobs known to
//! the index only (find and diff never read file content).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use arca_backend::{Backend, FileType, MemoryBackend};
use arca_format::{
    BlobKind, ContentRef, Id, IndexFile, IndexPack, KdfParams, Node, NodeKind, PackEntry, Timespec,
    Tree,
};
use arca_repo::blob::seal_blob;
use arca_repo::pack::PackWriter;
use arca_repo::{Index, InitOptions, Repository};

/// A repository being filled.
pub(crate) struct TestRepo {
    pub(crate) repo: Repository,
    pack: PackWriter,
    packs: Vec<IndexPack>,
    data: Vec<PackEntry>,
    data_packs: u8,
}

impl TestRepo {
    pub(crate) fn new() -> Self {
        let opts = InitOptions {
            kdf: KdfParams {
                memory_kib: 64,
                iterations: 1,
                parallelism: 1,
            },
            ..InitOptions::default()
        };
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        Self {
            repo: Repository::init(backend, b"pw", &opts).unwrap(),
            pack: PackWriter::new(BlobKind::Tree, 1 << 16),
            packs: vec![],
            data: vec![],
            data_packs: 0,
        }
    }

    /// Stores a listing of `nodes` (sorted here) and returns its id.
    pub(crate) fn tree(&mut self, nodes: Vec<Node>) -> Id {
        let mut t = Tree { nodes };
        t.sort();
        let bytes = t.encode().unwrap();
        let id = self.repo.key().blob_id(&bytes);
        let sealed = seal_blob(self.repo.sealer(), BlobKind::Tree, id, &bytes, 0).unwrap();
        self.pack.add(&sealed).unwrap();
        id
    }

    /// A data blob `Id([seed; 32])` of `len` plain bytes, known to the index.
    pub(crate) fn data(&mut self, seed: u8, len: u32) -> ContentRef {
        let id = Id([seed; 32]);
        if !self.data.iter().any(|e| e.id == id) {
            self.data.push(PackEntry {
                id,
                offset: 0,
                length: len + 40,
                raw_length: len,
            });
        }
        ContentRef { id, len }
    }

    /// Writes the pending pack and an index file naming everything so far; loads the index.
    pub(crate) fn finish(&mut self) -> Index {
        let full = std::mem::replace(&mut self.pack, PackWriter::new(BlobKind::Tree, 1 << 16));
        if !full.is_empty() {
            let p = full.finish(self.repo.sealer()).unwrap();
            self.repo
                .backend()
                .write(FileType::Pack, &p.id.to_hex(), &p.bytes)
                .unwrap();
            self.packs.push(p.index);
        }
        let mut packs = self.packs.clone();
        if !self.data.is_empty() {
            self.data_packs += 1;
            let mut blobs = std::mem::take(&mut self.data);
            let mut end = 8;
            for b in &mut blobs {
                b.offset = end;
                end += b.length;
            }
            packs.push(IndexPack {
                id: Id([0xd0 + self.data_packs; 32]),
                kind: BlobKind::Data,
                size: u64::from(end) + 100,
                blobs,
            });
        }
        self.packs.clear();
        self.repo
            .save_index(&IndexFile {
                supersedes: vec![],
                packs,
            })
            .unwrap();
        self.repo.load_index().unwrap()
    }
}

fn t(sec: i64) -> Timespec {
    Timespec { sec, nsec: 0 }
}

/// A file node.
pub(crate) fn file(name: &[u8], content: Vec<ContentRef>, mtime: i64) -> Node {
    Node {
        name: name.to_vec(),
        kind: Some(NodeKind::File),
        mode: 0o644,
        size: content.iter().map(|c| u64::from(c.len)).sum(),
        mtime: t(mtime),
        ctime: t(mtime),
        content,
        ..Node::default()
    }
}

/// A directory node.
pub(crate) fn dir(name: &[u8], sub: Id) -> Node {
    Node {
        name: name.to_vec(),
        kind: Some(NodeKind::Dir),
        mode: 0o755,
        subtree: Some(sub),
        ..Node::default()
    }
}

/// A symbolic link node.
pub(crate) fn symlink(name: &[u8], target: &[u8]) -> Node {
    Node {
        name: name.to_vec(),
        kind: Some(NodeKind::Symlink),
        mode: 0o777,
        link_target: target.to_vec(),
        ..Node::default()
    }
}
