//! A commit (a snapshot, an index file) whose lock is removed while the file is written: the
//! lock is checked again after the write, and the commit fails and is taken back. A test
//! binary of its own: it removes the locks of the whole process (its tests take turns).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arca_backend::{Backend, BackendError, FileInfo, FileType, MemoryBackend};
use arca_format::{ChunkerParams, Id, IndexFile, KdfParams, Snapshot};
use arca_repo::{InitOptions, LockKind, RepoError, Repository};

/// A memory backend on which a write of a snapshot or an index file removes every lock
/// first, while `armed`: `unlock --remove-all`, or a prune taking the lock for stale, during
/// a write that takes long on a slow remote.
#[derive(Debug, Default)]
struct Unlocking {
    inner: MemoryBackend,
    armed: AtomicBool,
    /// Looks at a lock file (stat).
    lock_looks: AtomicUsize,
    /// Deletes of snapshot and index files fail (permission denied).
    refuse_delete: AtomicBool,
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
        if matches!(t, FileType::Snapshot | FileType::Index)
            && self.refuse_delete.load(Ordering::SeqCst)
        {
            let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
            return Err(BackendError::io("delete", t.path(name), denied));
        }
        self.inner.delete(t, name)
    }
    fn stat(&self, t: FileType, name: &str) -> arca_backend::Result<FileInfo> {
        if t == FileType::Lock {
            self.lock_looks.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.stat(t, name)
    }
}

/// Held while a test runs: a commit checks every lock of the process, the other test's too.
static TURN: Mutex<()> = Mutex::new(());

fn init(b: &Arc<Unlocking>) -> Repository {
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
    Repository::init(b.clone(), b"pw", &opts).unwrap()
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
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let b = Arc::new(Unlocking::default());
    let repo = init(&b);
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

/// A backup writes its last index file, then at once its snapshot: the look at the lock after
/// the index file stands for the one before the snapshot (three looks, not four), and a lock
/// removed between them still fails the snapshot, which is taken back.
#[test]
fn an_index_file_and_the_snapshot_after_it_look_at_the_lock_three_times() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let b = Arc::new(Unlocking::default());
    let repo = init(&b);
    let count = |t| b.list(t).unwrap().len();

    let lock = repo.lock_for(LockKind::Shared, "backup").unwrap();
    let looks = b.lock_looks.load(Ordering::SeqCst);
    repo.save_index(&IndexFile::default()).unwrap();
    repo.save_snapshot(&snapshot()).unwrap();
    assert_eq!(b.lock_looks.load(Ordering::SeqCst) - looks, 3);

    repo.save_index(&IndexFile::default()).unwrap();
    for l in b.list(FileType::Lock).unwrap() {
        b.delete(FileType::Lock, &l.name).unwrap();
    }
    let e = repo.save_snapshot(&snapshot()).unwrap_err();
    assert!(matches!(e, RepoError::LockRemoved { .. }), "{e}");
    assert_eq!(count(FileType::Snapshot), 1, "the snapshot is taken back");
    drop(lock);
}

/// A commit whose lock was lost and that cannot be removed again is named in the error, with
/// what to do: it is still there (it said only that the lock was lost).
#[test]
fn a_commit_that_cannot_be_taken_back_is_named() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let b = Arc::new(Unlocking::default());
    let repo = init(&b);
    let count = |t| b.list(t).unwrap().len();
    b.refuse_delete.store(true, Ordering::SeqCst);
    b.armed.store(true, Ordering::SeqCst);

    let lock = repo.lock_for(LockKind::Shared, "backup").unwrap();
    let e = repo.save_snapshot(&snapshot()).unwrap_err().to_string();
    let id = b.list(FileType::Snapshot).unwrap()[0].name.clone();
    assert!(
        e.contains("was removed by another process")
            && e.contains(&format!("once snapshot {id} was written;"))
            && e.contains("still there")
            && e.contains(&format!("`arca forget {id}`"))
            && !e.contains("nothing more was committed"),
        "{e}"
    );
    drop(lock);

    let lock = repo.lock_for(LockKind::Shared, "backup").unwrap();
    let e = repo
        .save_index(&IndexFile::default())
        .unwrap_err()
        .to_string();
    let id = b.list(FileType::Index).unwrap()[0].name.clone();
    assert!(
        e.contains(&format!("once index file {id} was written;"))
            && e.contains("still there")
            && e.contains("`arca repair index` before the next backup"),
        "{e}"
    );
    assert_eq!((count(FileType::Snapshot), count(FileType::Index)), (1, 1));
    drop(lock);
}
