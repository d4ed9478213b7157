//! A repository laid out by hand for prune's tests.

#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arca_backend::{
    Backend, BackendError, ErrorKind, FileInfo, FileType, MemoryBackend, Result as BackendResult,
};
use arca_format::{
    BlobKind, ContentRef, Id, IndexFile, IndexPack, KdfParams, Node, NodeKind, Snapshot, Tree,
};
use arca_repo::blob::seal_blob;
use arca_repo::pack::PackWriter;
use arca_repo::{InitOptions, Repository};

use super::super::*;

/// A repository whose packs are laid out by hand: blobs go into the open pack of their kind
/// until [`Fixture::cut`] closes it; [`Fixture::index`] writes an index file for the packs
/// closed since the last one, as a backup does at its end.
pub(super) struct Fixture {
    pub(super) repo: Repository,
    pub(super) backend: Arc<dyn Backend>,
    pub(super) contents: HashMap<Id, Vec<u8>>,
    pub(super) writers: [PackWriter; 2],
    pub(super) pending: Vec<IndexPack>,
    pub(super) time: i64,
}

pub(super) fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    blake3::Hasher::new()
        .update(&seed.to_le_bytes())
        .finalize_xof()
        .fill(&mut out);
    out
}

impl Fixture {
    pub(super) fn new(backend: Arc<dyn Backend>) -> Self {
        let opts = InitOptions {
            kdf: KdfParams {
                memory_kib: 64,
                iterations: 1,
                parallelism: 1,
            },
            pack_size: 1 << 20,
            ..InitOptions::default()
        };
        let repo = Repository::init(backend.clone(), b"pw", &opts).unwrap();
        Self {
            repo,
            backend,
            contents: HashMap::new(),
            writers: [
                PackWriter::new(BlobKind::Data, 1 << 16),
                PackWriter::new(BlobKind::Tree, 1 << 16),
            ],
            pending: vec![],
            time: 0,
        }
    }

    pub(super) fn add(&mut self, kind: BlobKind, plain: &[u8]) -> Id {
        let id = self.repo.key().blob_id(plain);
        let sealed = seal_blob(self.repo.sealer(), kind, id, plain, 3).unwrap();
        self.writers[kind.code() as usize].add(&sealed).unwrap();
        id
    }

    /// A data blob of `len` incompressible bytes.
    pub(super) fn data(&mut self, seed: u64, len: usize) -> ContentRef {
        let plain = bytes(seed, len);
        let id = self.add(BlobKind::Data, &plain);
        self.contents.insert(id, plain);
        ContentRef {
            id,
            len: len as u32,
        }
    }

    pub(super) fn file(name: &str, content: Vec<ContentRef>) -> Node {
        Node {
            name: name.as_bytes().to_vec(),
            kind: Some(NodeKind::File),
            mode: 0o644,
            size: content.iter().map(|c| u64::from(c.len)).sum(),
            content,
            ..Node::default()
        }
    }

    /// Stores a tree of `nodes`; returns its id.
    pub(super) fn tree(&mut self, mut nodes: Vec<Node>) -> Id {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let plain = Tree { nodes }.encode().unwrap();
        self.add(BlobKind::Tree, &plain)
    }

    pub(super) fn dir(&mut self, name: &str, nodes: Vec<Node>) -> Node {
        let id = self.tree(nodes);
        Node {
            name: name.as_bytes().to_vec(),
            kind: Some(NodeKind::Dir),
            mode: 0o755,
            subtree: Some(id),
            ..Node::default()
        }
    }

    /// Closes the open packs and uploads them.
    pub(super) fn cut(&mut self) {
        for kind in [BlobKind::Data, BlobKind::Tree] {
            let w = std::mem::replace(
                &mut self.writers[kind.code() as usize],
                PackWriter::new(kind, 1 << 16),
            );
            if w.is_empty() {
                continue;
            }
            let p = w.finish(self.repo.sealer()).unwrap();
            self.backend
                .write(FileType::Pack, &p.id.to_hex(), &p.bytes)
                .unwrap();
            self.pending.push(p.index);
        }
    }

    /// Closes the open packs and writes an index file naming every pack not yet indexed.
    pub(super) fn index(&mut self) {
        self.cut();
        let packs = std::mem::take(&mut self.pending);
        self.repo
            .save_index(&IndexFile {
                supersedes: vec![],
                packs,
            })
            .unwrap();
    }

    pub(super) fn snapshot(&mut self, root: Id) -> Id {
        self.index();
        self.time += 1;
        let time = chrono::DateTime::parse_from_rfc3339(&format!(
            "2026-01-01T00:00:{:02}+00:00",
            self.time
        ))
        .unwrap();
        self.repo
            .save_snapshot(&Snapshot {
                time,
                tree: root,
                paths: vec!["/data".into()],
                hostname: "h".into(),
                username: "u".into(),
                uid: 0,
                gid: 0,
                tags: vec![],
                parent: None,
                original: None,
                copied_tree: None,
                program_version: "test".into(),
                complete: true,
                summary: Default::default(),
            })
            .unwrap()
    }

    pub(super) fn forget(&self, snapshot: Id) {
        self.backend
            .delete(FileType::Snapshot, &snapshot.to_hex())
            .unwrap();
    }

    /// Plans and executes a prune.
    pub(super) fn prune(
        &self,
        opts: &PruneOptions,
    ) -> Result<(PrunePlan, PruneReport), PruneError> {
        let index = self.repo.load_index()?;
        let plan = plan(&self.repo, &index, opts)?;
        let report = execute(&self.repo, &plan, &Progress::default())?;
        Ok((plan, report))
    }

    /// Reads every blob of every snapshot through a freshly loaded index, checks each data
    /// blob against what was stored, and returns the blobs used.
    pub(super) fn verify(&self) -> HashSet<(BlobKind, Id)> {
        let index = self.repo.load_index().unwrap();
        let mut used = HashSet::new();
        for (sid, _) in self.repo.list_ids(FileType::Snapshot).unwrap() {
            let s = self.repo.load_snapshot(&sid).unwrap();
            let mut stack = vec![s.tree];
            while let Some(t) = stack.pop() {
                if !used.insert((BlobKind::Tree, t)) {
                    continue;
                }
                let tree = self.repo.load_tree(&index, &t).unwrap();
                for n in &tree.nodes {
                    stack.extend(n.subtree);
                    for c in &n.content {
                        let got = self.repo.read_blob(&index, BlobKind::Data, &c.id).unwrap();
                        assert_eq!(&got, &self.contents[&c.id], "blob {}", c.id);
                        used.insert((BlobKind::Data, c.id));
                    }
                }
            }
        }
        used
    }

    /// Every blob the index files name.
    pub(super) fn indexed(&self) -> HashSet<(BlobKind, Id)> {
        let mut out = HashSet::new();
        for (_, f) in self.repo.load_index_files().unwrap() {
            for p in f.unwrap().packs {
                out.extend(p.blobs.iter().map(|b| (p.kind, b.id)));
            }
        }
        out
    }

    /// Every file of the repository, with its bytes.
    pub(super) fn files(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = vec![];
        for t in FileType::ALL {
            for f in self.backend.list(t).unwrap() {
                let b = self.backend.read(t, &f.name).unwrap();
                out.push((t.path(&f.name), b));
            }
        }
        out.sort();
        out
    }

    pub(super) fn packs(&self) -> HashSet<Id> {
        self.repo
            .list_ids(FileType::Pack)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }
}

/// Two snapshots: `old` alone uses pack `only_old` (data) and the blobs `x1`, `x2` of the
/// mixed pack; `new` alone uses `y1` of the mixed pack and the pack `only_new`; both use the
/// pack `shared`.
pub(super) struct Two {
    pub(super) f: Fixture,
    pub(super) old: Id,
    pub(super) new: Id,
}

pub(super) fn two(backend: Arc<dyn Backend>) -> Two {
    let mut f = Fixture::new(backend);
    let shared: Vec<ContentRef> = (0..3).map(|i| f.data(100 + i, 3000)).collect();
    f.cut();
    let old_only: Vec<ContentRef> = (0..4).map(|i| f.data(200 + i, 4000)).collect();
    f.cut();
    // The mixed pack: two blobs of the old snapshot, one of the new.
    let x = [f.data(300, 5000), f.data(301, 5000)];
    let y = f.data(302, 2000);
    f.cut();
    let shared_file = Fixture::file("shared", shared.clone());
    let docs = f.dir("docs", vec![shared_file.clone()]);
    let root_old = f.tree(vec![
        docs.clone(),
        Fixture::file("old", old_only),
        Fixture::file("mixed", x.to_vec()),
    ]);
    let old = f.snapshot(root_old);
    let new_only: Vec<ContentRef> = (0..2).map(|i| f.data(400 + i, 3500)).collect();
    f.cut();
    let root_new = f.tree(vec![
        docs,
        Fixture::file("new", new_only),
        Fixture::file("mixed", vec![y]),
    ]);
    let new = f.snapshot(root_new);
    Two { f, old, new }
}

/// A local disk where the files of one type may take `cap` bytes in all: a write of that type
/// that would pass it fails as a full disk (the other types take no room).
#[derive(Debug)]
pub(super) struct Quota {
    pub(super) inner: MemoryBackend,
    /// The type of the files that take room.
    kind: FileType,
    pub(super) cap: Mutex<u64>,
    /// The names of the files read, a name per read.
    pub(super) reads: Mutex<Vec<String>>,
}

impl Quota {
    pub(super) fn new(kind: FileType, cap: u64) -> Self {
        Quota {
            inner: MemoryBackend::new(),
            kind,
            cap: Mutex::new(cap),
            reads: Mutex::new(vec![]),
        }
    }

    /// The reads of pack `id` so far.
    pub(super) fn reads_of(&self, id: &Id) -> usize {
        let name = id.to_hex();
        self.reads
            .lock()
            .unwrap()
            .iter()
            .filter(|n| **n == name)
            .count()
    }

    /// The bytes the files of its type take.
    pub(super) fn used(&self) -> u64 {
        self.inner
            .list(self.kind)
            .unwrap()
            .iter()
            .map(|f| f.size)
            .sum()
    }
}

impl Backend for Quota {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> BackendResult<()> {
        self.inner.create()
    }
    fn list(&self, t: FileType) -> BackendResult<Vec<FileInfo>> {
        self.inner.list(t)
    }
    fn read(&self, t: FileType, name: &str) -> BackendResult<Vec<u8>> {
        self.reads.lock().unwrap().push(name.to_string());
        self.inner.read(t, name)
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> BackendResult<Vec<u8>> {
        self.reads.lock().unwrap().push(name.to_string());
        self.inner.read_range(t, name, offset, len)
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> BackendResult<()> {
        if t == self.kind && self.used() + data.len() as u64 > *self.cap.lock().unwrap() {
            return Err(BackendError::new(
                "write",
                t.path(name),
                ErrorKind::NoSpace,
                "no space left on device".into(),
            ));
        }
        self.inner.write(t, name, data)
    }
    fn delete(&self, t: FileType, name: &str) -> BackendResult<()> {
        self.inner.delete(t, name)
    }
    fn stat(&self, t: FileType, name: &str) -> BackendResult<FileInfo> {
        self.inner.stat(t, name)
    }
}
