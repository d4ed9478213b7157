//! Writing a local repository's files: the temporary names writes go through, the sink that
//! writes a file in pieces and renames it into place, and the fsync of a folder.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::LocalBackend;
use crate::{BackendError, ErrorKind, FileSink, FileType, Result};

/// A temporary name in `dir`, `.tmp-` and 16 random hex digits (what
/// [`Backend::remove_stale_temp`](crate::Backend::remove_stale_temp) looks for).
pub(super) fn temp_name(dir: &Path) -> io::Result<PathBuf> {
    let mut rnd = [0u8; 8];
    getrandom::getrandom(&mut rnd).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(dir.join(format!(".tmp-{}", hex::encode(rnd))))
}

/// A failure of a file written in pieces, before its name is known: named by its folder
/// (`write a new pack in R/data`), not by its temporary name, which is removed at once.
pub(super) fn sink_error(t: FileType, tmp: &Path, e: io::Error) -> BackendError {
    BackendError::io(writing(t), LocalBackend::shown(folder(tmp)), e)
}

fn writing(t: FileType) -> &'static str {
    if t == FileType::Pack {
        "write a new pack in"
    } else {
        "write a new file in"
    }
}

fn folder(tmp: &Path) -> &Path {
    tmp.parent().unwrap_or(tmp)
}

/// A file written in pieces ([`Backend::sink`](crate::Backend::sink)): a temporary file in
/// its type's folder, synced and renamed into place by the commit; removed when dropped
/// before it.
///
/// The pieces go through the page cache: a write is a copy into memory that the kernel
/// writes out in the background, so the thread filling the file (a backup's packer) never
/// waits for the disk. The commit (a backup's uploader) syncs the file, then drops its
/// cached pages, which would only push other data out of the cache. Written around the
/// cache with `O_DIRECT`, the packer waited for every piece: a pipeline stall of about a
/// second on a 512 MiB backup.
pub(super) struct LocalSink {
    pub(super) backend: LocalBackend,
    pub(super) t: FileType,
    pub(super) tmp: PathBuf,
    pub(super) file: Option<File>,
    pub(super) len: u64,
}

impl std::fmt::Debug for LocalSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSink")
            .field("tmp", &self.tmp)
            .field("len", &self.len)
            .finish()
    }
}

impl FileSink for LocalSink {
    fn write(&mut self, data: &[u8]) -> Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(BackendError::new(
                writing(self.t),
                LocalBackend::shown(folder(&self.tmp)),
                ErrorKind::Other,
                "written after a failed write".into(),
            ));
        };
        match file.write_all(data) {
            Ok(()) => {
                self.len += data.len() as u64;
                Ok(())
            }
            Err(e) => {
                // What was written is of no use any more; the drop removes it.
                self.file = None;
                Err(sink_error(self.t, &self.tmp, e))
            }
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn commit(mut self: Box<Self>, name: &str) -> Result<()> {
        use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};

        let p = self.backend.file(self.t, name);
        let failed = |e| BackendError::io("write", LocalBackend::shown(&p), e);
        let f = self
            .file
            .take()
            .ok_or_else(|| failed(io::Error::other("commit after a failed write")))?;
        f.sync_all().map_err(failed)?;
        // Synced pages are clean: dropping them is free. A hint: its failure changes nothing.
        let _ = posix_fadvise(&f, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED);
        drop(f);
        match fs::rename(&self.tmp, &p) {
            // A missing shard of `data/` (see `recreate_dir`).
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.tmp.exists() => {
                let dir = p.parent().unwrap_or(&self.backend.root);
                self.backend.recreate_dir(dir).map_err(failed)?;
                fs::rename(&self.tmp, &p).map_err(failed)?;
            }
            r => r.map_err(failed)?,
        }
        // Renamed: nothing for the drop to remove, even if the sync below fails.
        self.tmp = PathBuf::new();
        sync_dir(p.parent().unwrap_or(&self.backend.root)).map_err(failed)
    }
}

impl Drop for LocalSink {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    arca_fs::patiently(|| File::open(dir))?.sync_all()
}
