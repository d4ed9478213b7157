//! A commit (a snapshot, an index file) whose lock is removed while the file is written: the
//! lock is checked again after the write, and the commit fails and is taken back. A test
//! binary of its own: it removes the locks of the whole process.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arca_backend::{Backend, FileInfo, FileType, MemoryBackend};
use arca_format::{ChunkerParams, Id, IndexFile, KdfParams, Snapshot};
use arca_repo::{InitOptions, LockKind, RepoError, Repository};

/// A memory backend on which a write of a snapshot or an index file removes every lock
/// first, while `armed`: `unlock --remove-all`, or a prune taking the lock for stale, during
/// a write that takes long on a slow remote.
#[derive(Debug, Default)]
struct Unlocking {
    inner: MemoryBackend,
    armed: AtomicBool,
}

impl Backend for Unlocking {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> arca_backend::Result<()> {
        self.inner.create()
    }
    fn list(&self, t: FileType) -> arca_backend::Result<Vec<FileInfo>> {
        self.inner.list(t)
    }
    fn read(&self, t: FileType, name: &str) -> arca_backend::Result<Vec<u8>> {
        self.inner.read(t, name)
    }
    fn read_range(&self, t: FileType, n: &str, o: u64, l: u64) -> arca_backend::Result<Vec<u8>> {
        self.inner.read_range(t, n, o, l)
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> arca_backend::Result<()> {
        if matches!(t, FileType::Snapshot | FileType::Index) && self.armed.load(Ordering::SeqCst) {
            for l in self.inner.list(FileType::Lock)? {
                self.inner.delete(FileType::Lock, &l.name)?;
            }
        }
        self.inner.write(t, name, data)
    }
    fn delete(&self, t: FileType, name: &str) -> arca_backend::Result<()> {
        self.inner.delete(t, name)
    }
    fn stat(&self, t: FileType, name: &str) -> arca_backend::Result<FileInfo> {
        self.inner.stat(t, name)
    }
}

fn snapshot() -> Snapshot {
    Snapshot {
        time: chrono::Utc::now().fixed_offset(),
        tree: Id::default(),
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
    }
}

#[test]
fn a_lock_removed_during_a_commit_fails_it_and_takes_it_back() {
    let b = Arc::new(Unlocking::default());
    let opts = InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        chunker: ChunkerParams {
            min: 4096,
            avg: 16384,
            max: 65536,
        },
        ..InitOptions::default()
    };
    let repo = Repository::init(b.clone(), b"pw", &opts).unwrap();
    let count = |t| b.list(t).unwrap().len();

    let lock = repo.lock_for(LockKind::Shared, "backup").unwrap();
    repo.save_snapshot(&snapshot()).unwrap();
    repo.save_index(&IndexFile::default()).unwrap();
    assert_eq!((count(FileType::Snapshot), count(FileType::Index)), (1, 1));

    b.armed.store(true, Ordering::SeqCst);
    let e = repo.save_snapshot(&snapshot()).unwrap_err();
    assert!(matches!(e, RepoError::LockRemoved { .. }), "{e}");
    assert_eq!(count(FileType::Snapshot), 1, "the snapshot is taken back");
    drop(lock);

    let lock = repo.lock_for(LockKind::Shared, "backup").unwrap();
    let e = repo.save_index(&IndexFile::default()).unwrap_err();
    assert!(matches!(e, RepoError::LockRemoved { .. }), "{e}");
    assert_eq!(count(FileType::Index), 1, "the index file is taken back");
    drop(lock);
}
