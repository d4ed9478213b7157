//! Prune on a nearly full disk: the index is rewritten file by file, each old file deleted as
//! soon as the new ones cover it (the files naming only deleted packs first), so that the
//! rewrite needs room for one file, not for the whole index.

use std::sync::{Arc, Mutex};

use arca_backend::{
    Backend, BackendError, ErrorKind, FileInfo, FileType, MemoryBackend, Result as BackendResult,
};
use arca_format::ContentRef;

use super::fixture::Fixture;
use super::thorough;

/// A disk whose index files may take `cap` bytes in all (packs and the rest take none).
#[derive(Debug)]
struct IndexQuota {
    inner: MemoryBackend,
    cap: Mutex<u64>,
}

impl IndexQuota {
    fn index_bytes(&self) -> u64 {
        let files = self.inner.list(FileType::Index).unwrap();
        files.iter().map(|f| f.size).sum()
    }
}

impl Backend for IndexQuota {
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
        self.inner.read(t, name)
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> BackendResult<Vec<u8>> {
        self.inner.read_range(t, name, offset, len)
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> BackendResult<()> {
        if t == FileType::Index
            && self.index_bytes() + data.len() as u64 > *self.cap.lock().unwrap()
        {
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

/// Two backups of about the same size, each with its index file; the first one forgotten.
/// With no room for a new index file beside both old ones, prune deletes the forgotten
/// backup's index file first (it names only packs to delete), then writes the new index in
/// its room, and frees the forgotten backup's packs. Before, it wrote the new index first
/// and failed for lack of space every time, freeing nothing.
#[test]
fn a_prune_without_room_for_a_second_index_frees_space() {
    let quota = Arc::new(IndexQuota {
        inner: MemoryBackend::new(),
        cap: Mutex::new(u64::MAX),
    });
    let mut f = Fixture::new(quota.clone());
    let backup = |f: &mut Fixture, seed: u64| {
        // Many small blobs: the index file is as large as the data is small.
        let blobs: Vec<ContentRef> = (0..400).map(|i| f.data(seed + i, 64)).collect();
        let root = f.tree(vec![Fixture::file("f", blobs)]);
        f.snapshot(root)
    };
    let old = backup(&mut f, 1_000);
    let _new = backup(&mut f, 2_000);
    f.forget(old);
    let clean = f.verify();
    let packs_before = f.packs();
    let full = quota.index_bytes();
    assert_eq!(quota.inner.list(FileType::Index).unwrap().len(), 2);
    // Room for half an index file more.
    *quota.cap.lock().unwrap() = full + full / 4;
    let (_, report) = f.prune(&thorough()).unwrap();
    assert_eq!(report.index_files_deleted, 2, "{report:?}");
    assert!(report.packs_deleted > 0, "{report:?}");
    assert!(
        quota.index_bytes() <= full / 2 + full / 8,
        "{}",
        quota.index_bytes()
    );
    assert!(f.packs().len() < packs_before.len());
    assert_eq!(f.verify(), clean);
    assert_eq!(f.indexed(), clean, "nothing unused is left");
}
