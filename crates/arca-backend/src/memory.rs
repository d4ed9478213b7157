//! An in-memory backend for tests and benchmarks of the pipeline without disk I/O.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{Backend, BackendError, BackendHints, ErrorKind, FileInfo, FileType, Result};

type Files = HashMap<(FileType, String), Arc<Vec<u8>>>;

/// A repository held in memory.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    files: Mutex<Files>,
    created: Mutex<bool>,
}

impl MemoryBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }

    fn files(&self) -> MutexGuard<'_, Files> {
        // A panic while holding this lock cannot leave the map inconsistent: every update is
        // a single insert or remove.
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn missing(op: &'static str, t: FileType, name: &str) -> BackendError {
        BackendError::io(
            op,
            format!("memory:{}", t.path(name)),
            io::Error::from(io::ErrorKind::NotFound),
        )
    }
}

impl Backend for MemoryBackend {
    fn location(&self) -> String {
        "memory:".into()
    }
    fn create(&self) -> Result<()> {
        let mut c = self.created.lock().unwrap_or_else(|p| p.into_inner());
        if *c || !self.files().is_empty() {
            return Err(BackendError::new(
                "create repository",
                "memory:",
                ErrorKind::AlreadyExists,
                "a repository already exists here".into(),
            ));
        }
        *c = true;
        Ok(())
    }
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        Ok(self
            .files()
            .iter()
            .filter(|((ft, _), _)| *ft == t)
            .map(|((_, n), d)| FileInfo {
                name: n.clone(),
                size: d.len() as u64,
            })
            .collect())
    }
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        self.files()
            .get(&(t, name.to_string()))
            .map(|d| d.to_vec())
            .ok_or_else(|| Self::missing("read", t, name))
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let files = self.files();
        let d = files
            .get(&(t, name.to_string()))
            .ok_or_else(|| Self::missing("read", t, name))?;
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= d.len() as u64)
            .ok_or_else(|| {
                BackendError::new(
                    "read",
                    format!("memory:{}", t.path(name)),
                    ErrorKind::ShortRead,
                    format!(
                        "file is {} bytes, wanted {len} bytes at offset {offset}",
                        d.len()
                    ),
                )
            })?;
        Ok(d[offset as usize..end as usize].to_vec())
    }
    fn hints(&self) -> BackendHints {
        BackendHints {
            local: true,
            ..Default::default()
        }
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        self.files()
            .insert((t, name.to_string()), Arc::new(data.to_vec()));
        Ok(())
    }
    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        self.files()
            .remove(&(t, name.to_string()))
            .map(|_| ())
            .ok_or_else(|| Self::missing("delete", t, name))
    }
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        self.files()
            .get(&(t, name.to_string()))
            .map(|d| FileInfo {
                name: name.to_string(),
                size: d.len() as u64,
            })
            .ok_or_else(|| Self::missing("stat", t, name))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn conformance() {
        let b = super::MemoryBackend::new();
        crate::Backend::create(&b).unwrap();
        crate::conformance(&b);
    }
}
