//! Writing the page-aligned middle of a large block of a fresh file around the page cache
//! (`O_DIRECT`): the data goes from the worker's buffer to the disk without the kernel copying
//! it into newly allocated page-cache pages, which is most of a buffered restore's CPU time.
//!
//! Only whole pages that lie inside one block go direct; the partial pages at a block's edges
//! (shared with its neighbours) are written through the page cache, so no page is ever written
//! both ways. Zero pages are skipped, as [`write_sparse`] does: the file is fresh and sized.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use nix::fcntl::{FcntlArg, OFlag, fcntl};

use crate::sparse::{HOLE_BLOCK, is_zero, write_sparse};

/// Alignment of direct writes: offsets, lengths and buffer addresses. 4 KiB covers every
/// logical block size Linux file systems use on x86 and arm64 pages.
pub const DIRECT_ALIGN: usize = 4096;

/// A direct write is only worth its synchronous wait for a large enough span; smaller blocks go
/// through the page cache.
pub const DIRECT_MIN: usize = 128 << 10;

/// The largest single direct write (the bounce buffer's size).
const DIRECT_MAX: usize = 4 << 20;

/// A reusable buffer whose slices start at a [`DIRECT_ALIGN`]ed address.
#[derive(Default)]
pub struct AlignedBuf {
    raw: Vec<u8>,
}

impl AlignedBuf {
    /// An aligned slice of `len` bytes (contents unspecified).
    fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        if self.raw.len() < len + DIRECT_ALIGN {
            self.raw.resize(len + DIRECT_ALIGN, 0);
        }
        let off = self.raw.as_ptr().align_offset(DIRECT_ALIGN);
        &mut self.raw[off..off + len]
    }
}

/// What [`write_sparse_direct`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectWrite {
    /// Bytes written (not counting skipped zero pages).
    pub written: u64,
    /// Of those, bytes written around the page cache.
    pub direct: u64,
    /// The file system refused direct I/O: the middle went through the page cache, and later
    /// writes should not try again.
    pub unsupported: bool,
}

/// Writes `data` at `offset` of the fresh, sized `file` (the range reads as zeros), sending the
/// whole non-zero pages of its middle with `O_DIRECT` through `bounce` when the span is large
/// enough. The descriptor's flags are restored before returning, whatever happens.
pub fn write_sparse_direct(
    file: &File,
    offset: u64,
    data: &[u8],
    bounce: &mut AlignedBuf,
) -> io::Result<DirectWrite> {
    let align = DIRECT_ALIGN as u64;
    let end = offset + data.len() as u64;
    let mid_start = offset.div_ceil(align) * align;
    let mid_end = end / align * align;
    if mid_end <= mid_start || ((mid_end - mid_start) as usize) < DIRECT_MIN {
        return Ok(DirectWrite {
            written: write_sparse(file, offset, data)?,
            ..DirectWrite::default()
        });
    }
    let head = (mid_start - offset) as usize;
    let tail = (mid_end - offset) as usize;
    let mut w = write_middle(file, mid_start, &data[head..tail], bounce)?;
    w.written += write_sparse(file, offset, &data[..head])?;
    w.written += write_sparse(file, mid_end, &data[tail..])?;
    Ok(w)
}

/// Writes the aligned middle: runs of non-zero pages, direct (the rest through the page
/// cache if direct I/O is refused).
fn write_middle(
    file: &File,
    offset: u64,
    data: &[u8],
    bounce: &mut AlignedBuf,
) -> io::Result<DirectWrite> {
    let fd = file.as_raw_fd();
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    if fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_DIRECT)).is_err() {
        return Ok(DirectWrite {
            written: write_sparse(file, offset, data)?,
            direct: 0,
            unsupported: true,
        });
    }
    let res = write_runs(file, offset, data, bounce);
    // Restored even after an error: the descriptor serves unaligned writes next.
    let restored = fcntl(fd, FcntlArg::F_SETFL(flags));
    let (direct, refused_at) = res?;
    restored?;
    let mut w = DirectWrite {
        written: direct,
        direct,
        unsupported: refused_at.is_some(),
    };
    if let Some(pos) = refused_at {
        w.written += write_sparse(file, offset + pos as u64, &data[pos..])?;
    }
    Ok(w)
}

/// The direct writes of [`write_middle`], on a descriptor in `O_DIRECT` mode. Returns the bytes
/// written and, when the file system refused direct I/O (`EINVAL`), the position from which
/// nothing was written.
fn write_runs(
    file: &File,
    offset: u64,
    data: &[u8],
    bounce: &mut AlignedBuf,
) -> io::Result<(u64, Option<usize>)> {
    let page = HOLE_BLOCK as usize;
    let mut written = 0u64;
    let mut pos = 0usize;
    while pos < data.len() {
        if is_zero(&data[pos..pos + page]) {
            pos += page;
            continue;
        }
        let mut end = pos + page;
        while end < data.len() && end - pos < DIRECT_MAX && !is_zero(&data[end..end + page]) {
            end += page;
        }
        let buf = bounce.slice_mut(end - pos);
        buf.copy_from_slice(&data[pos..end]);
        match file.write_all_at(buf, offset + pos as u64) {
            Ok(()) => written += (end - pos) as u64,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok((written, Some(pos))),
            Err(e) => return Err(e),
        }
        pos = end;
    }
    Ok((written, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
            .collect()
    }

    #[test]
    fn blocks_at_unaligned_offsets_land_exactly() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = File::create(&p).unwrap();
        // Three neighbours sharing edge pages, one of them with a zero run in its middle.
        let a = pattern(300_001, 1);
        let mut b = pattern(700_003, 2);
        b[100_000..400_000].fill(0);
        let c = pattern(DIRECT_MIN + 5_000, 3);
        let size = (a.len() + b.len() + c.len()) as u64;
        f.set_len(size).unwrap();
        let mut bounce = AlignedBuf::default();
        // Out of order, as workers land them.
        let at_b = a.len() as u64;
        let at_c = at_b + b.len() as u64;
        let wb = write_sparse_direct(&f, at_b, &b, &mut bounce).unwrap();
        let wc = write_sparse_direct(&f, at_c, &c, &mut bounce).unwrap();
        let wa = write_sparse_direct(&f, 0, &a, &mut bounce).unwrap();
        for w in [wa, wb, wc] {
            assert!(w.written > 0 && !w.unsupported, "{w:?}");
            assert!(w.direct > 0 && w.direct < w.written, "{w:?}");
        }
        // The zero pages of b's zero run were skipped.
        assert!(wb.written <= (b.len() - 300_000 + 8192) as u64, "{wb:?}");
        // Buffered writes through the same descriptor still work (flags restored).
        f.write_all_at(b"x", 7).unwrap();
        drop(f);
        let back = std::fs::read(&p).unwrap();
        let mut want = [a, b, c].concat();
        want[7] = b'x';
        assert_eq!(back.len(), want.len());
        assert!(back == want, "content differs");
        // The zero run stayed (mostly) a hole.
        let m = std::fs::metadata(&p).unwrap();
        assert!(
            (m.blocks() * 512) < size - 250_000,
            "{} bytes allocated of {size}",
            m.blocks() * 512
        );
    }

    #[test]
    fn small_blocks_go_through_the_page_cache() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = File::create(&p).unwrap();
        f.set_len(10_000).unwrap();
        let data = pattern(9_000, 4);
        let mut bounce = AlignedBuf::default();
        let w = write_sparse_direct(&f, 1_000, &data, &mut bounce).unwrap();
        assert_eq!((w.written, w.direct), (9_000, 0));
        assert!(bounce.raw.is_empty());
        drop(f);
        assert_eq!(&std::fs::read(&p).unwrap()[1_000..], &data[..]);
    }

    #[test]
    fn aligned_slices_are_aligned() {
        let mut b = AlignedBuf::default();
        for len in [1, 4096, 100_000] {
            assert_eq!(b.slice_mut(len).as_ptr() as usize % DIRECT_ALIGN, 0);
        }
    }
}
