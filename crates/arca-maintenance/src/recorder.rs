//! A backend wrapper for tests that records the order of deletions and of the syncs that
//! make them durable, as a power cut would see them.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use arca_backend::{Backend, FileInfo, FileType, Result};

/// Records every deletion and every [`Backend::sync_removals`], in order.
#[derive(Debug)]
pub(crate) struct Recorder {
    inner: Arc<dyn Backend>,
    log: Mutex<Vec<String>>,
    /// Writes of packs and index files are recorded too.
    writes: bool,
}

impl Recorder {
    pub(crate) fn new(inner: Arc<dyn Backend>) -> Self {
        Recorder {
            inner,
            log: Mutex::default(),
            writes: false,
        }
    }

    /// A recorder that also records the writes of packs and index files.
    pub(crate) fn with_writes(inner: Arc<dyn Backend>) -> Self {
        Recorder {
            writes: true,
            ..Self::new(inner)
        }
    }

    /// What happened, repeats of one step merged.
    pub(crate) fn log(&self) -> Vec<String> {
        let mut log = self.log.lock().unwrap().clone();
        log.dedup();
        log
    }

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
        if self.writes && matches!(t, FileType::Pack | FileType::Index) {
            self.note(format!("write {t:?}"));
        }
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
