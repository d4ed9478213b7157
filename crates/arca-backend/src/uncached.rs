//! Reading and writing local files around the page cache (`O_DIRECT`): for data read once
//! and used once (packs during a restore, files hashed against a snapshot) and for packs
//! written (synced to disk at once anyway), caching costs a kernel copy into fresh pages and
//! memory for nothing. Offsets, lengths and the buffer are aligned inside a reused buffer.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Reads shorter than this go through the page cache: the saving would not pay for the
/// alignment.
pub const WORTH_IT: u64 = 128 << 10;
/// Alignment of direct reads (offset, length and buffer address).
const ALIGN: usize = 4096;

/// Opens `path` for direct reads (without moving its access time where allowed); `None` when
/// the file system does not do direct I/O.
pub fn open(path: &Path) -> io::Result<Option<File>> {
    let open = |flags| {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC | flags)
            .open(path)
    };
    match open(libc::O_NOATIME).or_else(|e| {
        if e.raw_os_error() == Some(libc::EPERM) {
            open(0)
        } else {
            Err(e)
        }
    }) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads `len` bytes at `offset` of `f` (opened by [`open`]) into `buf`; returns where they
/// start in `buf`. Fails with `UnexpectedEof` when the file ends first.
pub fn read(f: &File, offset: u64, len: u64, buf: &mut Vec<u8>) -> io::Result<usize> {
    let start = offset - offset % ALIGN as u64;
    let end = (offset + len).div_ceil(ALIGN as u64) * ALIGN as u64;
    let span = usize::try_from(end - start).map_err(|_| io::Error::other("range too long"))?;
    let (skew, window) = aligned_window(buf, span);
    let mut got = 0usize;
    while got < span {
        match f.read_at(&mut window[got..], start + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        // A short read that is not block-aligned is the end of the file.
        if !got.is_multiple_of(ALIGN) {
            break;
        }
    }
    let lead = (offset - start) as usize;
    if got < lead + len as usize {
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("file is {size} bytes, wanted {len} bytes at offset {offset}"),
        ));
    }
    Ok(skew + lead)
}

/// A window of `len` bytes inside `buf` (resized to fit) that starts at an [`ALIGN`]ed
/// address, and where it starts in `buf`.
fn aligned_window(buf: &mut Vec<u8>, len: usize) -> (usize, &mut [u8]) {
    // The allocation is reused across calls, so only its growth is ever zero-filled.
    buf.resize(len + ALIGN, 0);
    let skew = buf.as_ptr().align_offset(ALIGN);
    (skew, &mut buf[skew..skew + len])
}

/// Largest single direct write.
const WRITE_CHUNK: usize = 1 << 20;

thread_local! {
    /// Each writing thread's staging buffer for direct writes.
    static BOUNCE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Writes `data` into the empty file at `path` (just created by the caller, who syncs it)
/// around the page cache: whole pages through an aligned staging buffer, the last one padded
/// and the file then cut to its size. Returns `false`, having written nothing, when the file
/// system does not do direct I/O; the caller then writes normally.
pub fn write_new(path: &Path, data: &[u8]) -> io::Result<bool> {
    let f = match OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(false),
        Err(e) => return Err(e),
    };
    BOUNCE.with_borrow_mut(|buf| {
        let (_, window) = aligned_window(buf, WRITE_CHUNK);
        let mut at = 0usize;
        while at < data.len() {
            let n = (data.len() - at).min(WRITE_CHUNK);
            let padded = n.div_ceil(ALIGN) * ALIGN;
            window[..n].copy_from_slice(&data[at..at + n]);
            window[n..padded].fill(0);
            match f.write_all_at(&window[..padded], at as u64) {
                Ok(()) => {}
                Err(e) if at == 0 && e.raw_os_error() == Some(libc::EINVAL) => return Ok(false),
                Err(e) => return Err(e),
            }
            at += n;
        }
        if !data.len().is_multiple_of(ALIGN) {
            f.set_len(data.len() as u64)?;
        }
        Ok(true)
    })
}

/// A new file written front to back around the page cache, for files synced as soon as they
/// are complete (packs): whole pages go out through an aligned staging buffer of
/// [`WRITE_CHUNK`] bytes, and [`Appender::finish`] writes the last page padded and cuts the
/// file to its size. Where the file system refuses direct I/O, it writes normally.
pub struct Appender {
    path: std::path::PathBuf,
    file: File,
    direct: bool,
    stage: Vec<u8>,
    /// Bytes staged, not yet written.
    fill: usize,
    /// Bytes written to the file.
    written: u64,
}

impl std::fmt::Debug for Appender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Appender")
            .field("path", &self.path)
            .field("direct", &self.direct)
            .field("len", &self.len())
            .finish()
    }
}

impl Appender {
    /// Creates `path`, which must not exist.
    pub fn create_new(path: &Path) -> io::Result<Self> {
        let open = |flags| {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_CLOEXEC | flags)
                .open(path)
        };
        let (file, direct) = match open(libc::O_DIRECT) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (open(0)?, false),
            Err(e) => return Err(e),
        };
        Ok(Self {
            path: path.to_path_buf(),
            file,
            direct,
            stage: Vec::new(),
            fill: 0,
            written: 0,
        })
    }

    /// Bytes appended so far.
    pub fn len(&self) -> u64 {
        self.written + self.fill as u64
    }

    /// Whether nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `data`.
    pub fn append(&mut self, mut data: &[u8]) -> io::Result<()> {
        if !self.direct {
            self.file.write_all_at(data, self.written)?;
            self.written += data.len() as u64;
            return Ok(());
        }
        while !data.is_empty() {
            let n = (WRITE_CHUNK - self.fill).min(data.len());
            let (_, window) = aligned_window(&mut self.stage, WRITE_CHUNK);
            window[self.fill..self.fill + n].copy_from_slice(&data[..n]);
            self.fill += n;
            data = &data[n..];
            if self.fill == WRITE_CHUNK {
                self.flush(WRITE_CHUNK)?;
            }
        }
        Ok(())
    }

    /// Writes the first `padded` staged bytes (a multiple of the alignment) at the end of
    /// what is written; falls back to ordinary writes when the very first direct write is
    /// refused.
    fn flush(&mut self, padded: usize) -> io::Result<()> {
        let (_, window) = aligned_window(&mut self.stage, WRITE_CHUNK);
        match self.file.write_all_at(&window[..padded], self.written) {
            Ok(()) => {}
            Err(e) if self.written == 0 && e.raw_os_error() == Some(libc::EINVAL) => {
                self.file = OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_CLOEXEC)
                    .open(&self.path)?;
                self.direct = false;
                self.file.write_all_at(&window[..self.fill], 0)?;
                self.written = self.fill as u64;
                self.fill = 0;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        self.written += self.fill.min(padded) as u64;
        self.fill = 0;
        Ok(())
    }

    /// Writes what is staged and returns the file (for the caller to sync), cut to the bytes
    /// appended.
    pub fn finish(mut self) -> io::Result<File> {
        if self.direct && self.fill > 0 {
            let end = self.len();
            let padded = self.fill.div_ceil(ALIGN) * ALIGN;
            let (_, window) = aligned_window(&mut self.stage, WRITE_CHUNK);
            window[self.fill..padded].fill(0);
            self.flush(padded)?;
            if !end.is_multiple_of(ALIGN as u64) {
                self.file.set_len(end)?;
            }
        }
        Ok(self.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_writes_of_any_length_read_back_exactly() {
        let d = tempfile::tempdir().unwrap();
        for len in [
            1usize,
            4096,
            4097,
            WRITE_CHUNK,
            WRITE_CHUNK + 12_345,
            3 * WRITE_CHUNK - 1,
        ] {
            let p = d.path().join(format!("f{len}"));
            File::create(&p).unwrap();
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let direct = write_new(&p, &data).unwrap();
            assert_eq!(
                std::fs::read(&p).unwrap(),
                data,
                "len {len} (direct: {direct})"
            );
        }
    }
}
