//! Writing the page-aligned middle of a large block of a fresh file around the page cache
//! (`O_DIRECT`): the data goes from an aligned buffer to the disk without the kernel copying it
//! into newly allocated page-cache pages, which is most of a buffered restore's CPU time.
//!
//! Only whole pages that lie inside one block go direct ([`direct_span`]); the partial pages at
//! a block's edges (shared with its neighbours) go through the page cache, so no page is ever
//! written both ways. Zero pages are skipped, as [`write_sparse`](crate::write_sparse) does:
//! the file is fresh and sized. The direct writes use a descriptor of their own
//! ([`open_direct`]), so buffered writes to the same file never see `O_DIRECT`.

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::sparse::{HOLE_BLOCK, is_zero};

/// Alignment of direct writes: offsets, lengths and buffer addresses. 4 KiB covers every
/// logical block size Linux file systems use on x86 and arm64 pages.
pub const DIRECT_ALIGN: usize = 4096;

/// A direct write is only worth its setup for a large enough span; smaller blocks go through
/// the page cache.
pub const DIRECT_MIN: usize = 128 << 10;

/// A reusable buffer whose slices start at a [`DIRECT_ALIGN`]ed address.
#[derive(Default)]
pub struct AlignedBuf {
    raw: Vec<u8>,
}

impl AlignedBuf {
    /// An aligned slice of `len` bytes (contents unspecified), growing the buffer if needed.
    pub fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        if self.raw.len() < len + DIRECT_ALIGN {
            self.raw.resize(len + DIRECT_ALIGN, 0);
        }
        let off = self.raw.as_ptr().align_offset(DIRECT_ALIGN);
        &mut self.raw[off..off + len]
    }

    /// The first `len` bytes of the aligned slice (as last filled by [`Self::slice_mut`]).
    pub fn slice(&self, len: usize) -> &[u8] {
        let off = self.raw.as_ptr().align_offset(DIRECT_ALIGN);
        self.raw.get(off..off + len).unwrap_or_default()
    }

    /// Bytes the buffer holds.
    pub fn capacity(&self) -> usize {
        self.raw.len()
    }
}

/// The part of a block of `len` bytes at `offset` worth writing direct: the range, within the
/// block, of the whole pages it covers, when that is at least [`DIRECT_MIN`].
pub fn direct_span(offset: u64, len: usize) -> Option<Range<usize>> {
    let align = DIRECT_ALIGN as u64;
    let end = offset + len as u64;
    let mid_start = offset.div_ceil(align) * align;
    let mid_end = end / align * align;
    if mid_end <= mid_start || ((mid_end - mid_start) as usize) < DIRECT_MIN {
        return None;
    }
    Some((mid_start - offset) as usize..(mid_end - offset) as usize)
}

/// Opens an existing file for direct writes. `EINVAL` means the file system refuses direct I/O.
pub fn open_direct(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// What [`write_pages_direct`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectWrite {
    /// Bytes written (zero pages are skipped).
    pub written: u64,
    /// The file system refused direct I/O from this position of the data on: nothing from
    /// there was written, the caller writes it through the page cache.
    pub refused_at: Option<usize>,
}

/// Writes the non-zero pages of `data` at `offset` of `file` (opened with [`open_direct`]).
/// `data` must start at an aligned address, and `offset` and its length must be multiples of
/// [`DIRECT_ALIGN`] (a [`direct_span`] staged in an [`AlignedBuf`]). With `reserved` (the
/// file's space was preallocated), the zero pages skipped are punched out of the reservation.
pub fn write_pages_direct(
    file: &File,
    offset: u64,
    data: &[u8],
    reserved: bool,
) -> io::Result<DirectWrite> {
    let page = HOLE_BLOCK as usize;
    if !offset.is_multiple_of(DIRECT_ALIGN as u64)
        || !data.len().is_multiple_of(page)
        || !(data.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "direct write of an unaligned span",
        ));
    }
    let mut w = DirectWrite::default();
    let mut pos = 0usize;
    while pos < data.len() {
        if is_zero(&data[pos..pos + page]) {
            let mut end = pos + page;
            while end < data.len() && is_zero(&data[end..end + page]) {
                end += page;
            }
            if reserved {
                let _ = crate::punch_hole(file, offset + pos as u64, (end - pos) as u64);
            }
            pos = end;
            continue;
        }
        let mut end = pos + page;
        while end < data.len() && !is_zero(&data[end..end + page]) {
            end += page;
        }
        match file.write_all_at(&data[pos..end], offset + pos as u64) {
            Ok(()) => w.written += (end - pos) as u64,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                w.refused_at = Some(pos);
                return Ok(w);
            }
            Err(e) => return Err(e),
        }
        pos = end;
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write_sparse;
    use std::os::unix::fs::MetadataExt;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
            .collect()
    }

    /// Writes a block as the restore does: edges buffered, the middle direct.
    fn land(f: &File, direct: &File, offset: u64, data: &[u8], buf: &mut AlignedBuf) -> u64 {
        let Some(mid) = direct_span(offset, data.len()) else {
            return write_sparse(f, offset, data).unwrap();
        };
        let mut n = write_sparse(f, offset, &data[..mid.start]).unwrap();
        n += write_sparse(f, offset + mid.end as u64, &data[mid.end..]).unwrap();
        let len = mid.len();
        buf.slice_mut(len).copy_from_slice(&data[mid.clone()]);
        let w =
            write_pages_direct(direct, offset + mid.start as u64, buf.slice(len), false).unwrap();
        assert_eq!(w.refused_at, None);
        assert!(w.written > 0);
        n + w.written
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
        let direct = open_direct(&p).unwrap();
        let mut buf = AlignedBuf::default();
        // Out of order, as workers land them.
        let at_b = a.len() as u64;
        let at_c = at_b + b.len() as u64;
        let wb = land(&f, &direct, at_b, &b, &mut buf);
        land(&f, &direct, at_c, &c, &mut buf);
        land(&f, &direct, 0, &a, &mut buf);
        // The zero pages of b's zero run were skipped.
        assert!(wb <= (b.len() - 300_000 + 8192) as u64, "{wb}");
        // Buffered writes through the other descriptor are unaffected.
        f.write_all_at(b"x", 7).unwrap();
        drop((f, direct));
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
    fn small_blocks_have_no_direct_span() {
        assert_eq!(direct_span(1_000, 9_000), None);
        assert_eq!(direct_span(1, DIRECT_MIN), None);
        assert_eq!(direct_span(0, DIRECT_MIN), Some(0..DIRECT_MIN));
        let r = direct_span(100, DIRECT_MIN + 10_000).unwrap();
        assert_eq!((r.start, (100 + r.end) % DIRECT_ALIGN), (3996, 0));
    }

    #[test]
    fn unaligned_spans_are_refused_before_the_kernel_sees_them() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        File::create(&p).unwrap().set_len(1 << 20).unwrap();
        let f = open_direct(&p).unwrap();
        let mut buf = AlignedBuf::default();
        buf.slice_mut(8192).fill(1);
        let e = write_pages_direct(&f, 100, buf.slice(8192), false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = write_pages_direct(&f, 0, &buf.slice(8192)[..5000], false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn aligned_slices_are_aligned() {
        let mut b = AlignedBuf::default();
        for len in [1, 4096, 100_000] {
            assert_eq!(b.slice_mut(len).as_ptr() as usize % DIRECT_ALIGN, 0);
            assert_eq!(b.slice(len).len(), len);
        }
    }
}
