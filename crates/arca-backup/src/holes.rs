//! Reading sparse files without reading their holes: a reader that asks the file system where
//! data lies (SEEK_DATA / SEEK_HOLE) and produces the zeros of holes from memory.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;

use nix::unistd::{Whence, lseek};

/// Reads a file front to back, skipping the disk for holes.
pub(crate) struct HoleSkippingReader<'f> {
    file: &'f File,
    pos: u64,
    size: u64,
    /// Current data region [start, end) when known.
    data_end: u64,
    /// Start of the next data region when `pos` is in a hole.
    hole_end: u64,
    sparse_aware: bool,
}

impl<'f> HoleSkippingReader<'f> {
    /// A reader over `file` of `size` bytes. `sparse` turns on hole detection; otherwise it is
    /// a plain positional reader.
    pub(crate) fn new(file: &'f File, size: u64, sparse: bool) -> Self {
        Self {
            file,
            pos: 0,
            size,
            data_end: 0,
            hole_end: 0,
            sparse_aware: sparse,
        }
    }

    fn locate(&mut self) {
        let fd = self.file;
        let at = i64::try_from(self.pos).unwrap_or(i64::MAX);
        match lseek(fd, at, Whence::SeekData) {
            Ok(d) if d as u64 > self.pos => {
                self.hole_end = d as u64;
                self.data_end = self.pos;
            }
            Ok(_) => {
                self.hole_end = self.pos;
                self.data_end = lseek(fd, at, Whence::SeekHole)
                    .map(|h| h as u64)
                    .unwrap_or(self.size);
            }
            // ENXIO: no data after pos, the rest is a hole up to the file's size now, or pos
            // is at or past its end: a file truncated while it is read ends where it ends
            // (the size stat'ed before would pad it with zeros it never held).
            Err(nix::errno::Errno::ENXIO) => {
                let now = self.file.metadata().map_or(self.size, |m| m.len());
                self.size = now.max(self.pos);
                self.hole_end = self.size;
                self.data_end = self.pos;
            }
            // Unsupported: read everything.
            Err(_) => {
                self.sparse_aware = false;
            }
        }
    }
}

impl HoleSkippingReader<'_> {
    /// Learns where the region at `pos` ends, once `pos` has left the one known.
    fn locate_if_past(&mut self) {
        if self.sparse_aware
            && self.pos < self.size
            && self.pos >= self.data_end
            && self.pos >= self.hole_end
        {
            self.locate();
        }
    }
}

impl arca_chunker::KnownZeros for HoleSkippingReader<'_> {
    fn zeros_ahead(&mut self) -> u64 {
        self.locate_if_past();
        if self.sparse_aware {
            self.hole_end.saturating_sub(self.pos)
        } else {
            0
        }
    }

    fn skip_zeros(&mut self, n: u64) {
        self.pos += n.min(self.hole_end.saturating_sub(self.pos));
    }
}

impl Read for HoleSkippingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.locate_if_past();
        if self.sparse_aware && self.pos < self.hole_end {
            let n = ((self.hole_end - self.pos) as usize).min(buf.len());
            buf[..n].fill(0);
            self.pos += n as u64;
            return Ok(n);
        }
        let mut want = buf.len();
        if self.sparse_aware && self.data_end > self.pos {
            want = want.min((self.data_end - self.pos) as usize);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        // The file may have grown past the size we saw; keep reading until EOF then.
        if self.pos > self.size {
            self.size = self.pos;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    /// A sparse file truncated while it is read gives what it held, not zeros up to the
    /// size it had when the read began.
    #[test]
    fn a_file_truncated_while_read_ends_where_it_ends() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s");
        let f = File::create(&p).unwrap();
        f.set_len(8 << 20).unwrap();
        f.write_all_at(&[9u8; 1 << 20], 0).unwrap();
        let sparse = f.metadata().unwrap().blocks() * 512 < 8 << 20;
        for cut in [1 << 20, 0] {
            f.set_len(8 << 20).unwrap();
            f.write_all_at(&[9u8; 1 << 20], 0).unwrap();
            let r_file = File::open(&p).unwrap();
            let mut r = HoleSkippingReader::new(&r_file, 8 << 20, sparse);
            let mut buf = vec![0u8; 1 << 20];
            let mut total = 0;
            while total < 1 << 20 {
                total += r.read(&mut buf).unwrap();
            }
            f.set_len(cut).unwrap();
            loop {
                let n = r.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                total += n;
            }
            assert_eq!(total, 1 << 20, "cut to {cut}");
        }
    }

    #[test]
    fn reads_sparse_and_dense_files_identically() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s");
        let mut f = File::create(&p).unwrap();
        f.set_len(10 << 20).unwrap();
        f.write_all_at(b"start", 0).unwrap();
        f.write_all_at(&[7u8; 100_000], 3 << 20).unwrap();
        f.write_all_at(b"end", (10 << 20) - 3).unwrap();
        f.flush().unwrap();
        let expect = std::fs::read(&p).unwrap();
        for sparse in [true, false] {
            let f = File::open(&p).unwrap();
            let mut r = HoleSkippingReader::new(&f, 10 << 20, sparse);
            let mut got = vec![];
            let mut buf = vec![0u8; 300_000];
            loop {
                let n = r.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, expect);
        }
    }
}
