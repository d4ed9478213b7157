//! Writing local files around the page cache (`O_DIRECT`): a pack written is synced to disk at
//! once anyway, so caching it costs a kernel copy into fresh pages and memory for nothing.
//! Offsets, lengths and the buffer are aligned inside a reused staging buffer.

use std::cell::RefCell;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Writes shorter than this go through the page cache: the saving would not pay for the
/// alignment. Also the size from which reads of a file are worth read-ahead advice.
pub const WORTH_IT: u64 = 128 << 10;
/// Alignment of direct writes (offset, length and buffer address).
const ALIGN: usize = 4096;

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
    let f = match arca_fs::patiently(|| {
        OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
            .open(path)
    }) {
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
            std::fs::File::create(&p).unwrap();
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
