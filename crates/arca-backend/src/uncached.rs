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
