//! The order in which forget and prune delete, as a power cut would see it: each kind's
//! deletions made durable before the next kind's begin.

use std::sync::{Arc, Mutex};

use arca_backend::{Backend, FileInfo, FileType, MemoryBackend, Result};

use super::fixture::two;
use super::thorough;

/// Records every deletion and every [`Backend::sync_removals`], in order.
#[derive(Debug, Default)]
struct Recorder {
    inner: MemoryBackend,
    log: Mutex<Vec<String>>,
}

impl Recorder {
    fn note(&self, what: String) {
        self.log.lock().unwrap().push(what);
    }
}

impl Backend for Recorder {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> Result<()> {
        self.inner.create()
    }
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        self.inner.list(t)
    }
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        self.inner.read(t, name)
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.inner.read_range(t, name, offset, len)
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        self.inner.write(t, name, data)
    }
    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        if t != FileType::Lock {
            self.note(format!("delete {t:?}"));
        }
        self.inner.delete(t, name)
    }
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        self.inner.stat(t, name)
    }
    fn sync_removals(&self) -> Result<()> {
        self.note("sync".into());
        self.inner.sync_removals()
    }
}

/// A power cut must never leave a forgotten snapshot, or an index file naming deleted packs,
/// while the packs are gone: on btrfs the snapshots came back after the packs were gone
/// (hunt 22). Each kind's deletions are synced before the next kind's.
#[test]
fn forget_and_prune_make_each_kind_of_deletion_durable_before_the_next() {
    let rec = Arc::new(Recorder::default());
    let t = two(rec.clone());
    let f = &t.f;
    let failed = crate::forget::remove_snapshots(&f.repo, &[t.old]).unwrap();
    assert!(failed.is_empty());
    let (_, r) = f.prune(&thorough()).unwrap();
    assert!(r.packs_deleted > 0 && r.index_files_deleted > 0, "{r:?}");
    let mut log = rec.log.lock().unwrap().clone();
    log.dedup();
    assert_eq!(
        log,
        [
            "delete Snapshot",
            "sync",
            "delete Index",
            "sync",
            "delete Pack",
            "sync"
        ],
    );
}
