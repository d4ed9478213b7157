//! The map of a sparse file, as a tar stores it (GNU tar's sparse format 1.0 in pax): the
//! file's data regions, its non-hole blobs with adjacent ones merged, as offset and length.
//! The map is known from the node's content list before any content is written, so the
//! archive stays a stream. A file ending in a hole has a last region of no bytes at its size
//! (as GNU tar writes it), so extraction sets the length.
//!
//! Regions start and end on 512-byte boundaries (but at the file's end), taking in the zeros
//! of the holes around them: GNU tar reads (and writes) each region's data padded to whole
//! blocks, libarchive and Python's tarfile read the regions back to back; with aligned
//! regions both are the same bytes.

use arca_format::{ContentRef, Id};

/// The data regions of a file with holes, and where its content has got to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SparseMap {
    /// Offset and length of each data region, in order, on 512-byte boundaries but for the
    /// file's end (the last may be `(size, 0)`).
    pub regions: Vec<(u64, u64)>,
    /// The file's size.
    pub size: u64,
    /// Content offset reached by [`SparseMap::route`].
    at: u64,
    /// First region not yet wholly passed.
    next: usize,
}

impl SparseMap {
    /// The map of a file of `size` bytes holding `content`, if at least one of its blobs is
    /// `hole` (id and length); `None` for a file without holes.
    pub fn of(content: &[ContentRef], hole: (Id, u32), size: u64) -> Option<SparseMap> {
        let is_hole = |c: &ContentRef| c.id == hole.0 && c.len == hole.1;
        if !content.iter().any(is_hole) {
            return None;
        }
        let mut regions: Vec<(u64, u64)> = vec![];
        let mut at = 0u64;
        for c in content {
            let len = u64::from(c.len);
            if !is_hole(c) && len > 0 {
                match regions.last_mut() {
                    Some((off, n)) if *off + *n == at => *n += len,
                    _ => regions.push((at, len)),
                }
            }
            at += len;
        }
        let mut aligned: Vec<(u64, u64)> = vec![];
        for (off, n) in regions {
            let (a, b) = (
                off / 512 * 512,
                (off + n).div_ceil(512).saturating_mul(512).min(size),
            );
            match aligned.last_mut() {
                Some((o, l)) if *o + *l >= a => *l = b.max(*o + *l) - *o,
                _ => aligned.push((a, b - a)),
            }
        }
        let mut regions = aligned;
        if regions.last().is_none_or(|&(off, n)| off + n < size) {
            regions.push((size, 0));
        }
        Some(SparseMap {
            regions,
            size,
            at: 0,
            next: 0,
        })
    }

    /// Bytes of data the archive holds (the regions' lengths).
    pub fn data_len(&self) -> u64 {
        self.regions.iter().map(|r| r.1).sum()
    }

    /// The map as it leads the member's data: the number of regions, then each one's offset
    /// and length, in decimal, one to a line, padded with zeros to a 512-byte block.
    pub fn text(&self) -> Vec<u8> {
        let mut t = format!("{}\n", self.regions.len());
        for (off, n) in &self.regions {
            t.push_str(&format!("{off}\n{n}\n"));
        }
        let mut t = t.into_bytes();
        t.resize(t.len().div_ceil(512) * 512, 0);
        t
    }

    /// Takes the file's next `n` bytes of content: the parts of them inside data regions, as
    /// ranges relative to them (the rest lies in holes and is not stored).
    pub fn route(&mut self, n: u64) -> Vec<(usize, usize)> {
        let (start, end) = (self.at, self.at + n);
        self.at = end;
        let mut out = vec![];
        while let Some(&(off, len)) = self.regions.get(self.next) {
            if off >= end {
                break;
            }
            let (a, b) = (off.max(start), (off + len).min(end));
            if a < b {
                out.push(((a - start) as usize, (b - start) as usize));
            }
            if off + len > end {
                break;
            }
            self.next += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn c(id: u8, len: u32) -> ContentRef {
        ContentRef {
            id: Id([id; 32]),
            len,
        }
    }

    #[test]
    fn data_regions_merge_align_and_a_trailing_hole_ends_the_map() {
        let hole = (Id([0; 32]), 1024);
        assert_eq!(SparseMap::of(&[c(1, 1024), c(2, 50)], hole, 1074), None);
        // A hole blob's id with another length is data.
        assert_eq!(SparseMap::of(&[c(0, 600)], hole, 600), None);
        let content = [
            c(0, 1024),
            c(1, 300),
            c(2, 700),
            c(0, 1024),
            c(3, 5),
            c(0, 1024),
        ];
        let m = SparseMap::of(&content, hole, 4077).unwrap();
        // (1024, 1000) and (3048, 5), widened to blocks; the file ends in a hole.
        assert_eq!(m.regions, [(1024, 1024), (2560, 512), (4077, 0)]);
        assert_eq!(m.data_len(), 1536);
        let t = m.text();
        assert_eq!(t.len(), 512);
        assert_eq!(&t[..28], b"3\n1024\n1024\n2560\n512\n4077\n0\n");
        assert!(t[28..].iter().all(|&b| b == 0));
        // Ending in data: no empty region, and the last one ends at the size; all holes:
        // one empty region.
        let m = SparseMap::of(&[c(0, 1024), c(1, 7)], hole, 1031).unwrap();
        assert_eq!(m.regions, [(1024, 7)]);
        let m = SparseMap::of(&[c(0, 1024), c(0, 1024)], hole, 2048).unwrap();
        assert_eq!(m.regions, [(2048, 0)]);
        // Regions that meet once widened are one.
        let small = (Id([0; 32]), 100);
        let m = SparseMap::of(&[c(1, 10), c(0, 100), c(2, 20)], small, 130).unwrap();
        assert_eq!(m.regions, [(0, 130)]);
    }

    #[test]
    fn content_is_routed_to_its_data_regions_however_it_is_cut() {
        let hole = (Id([0; 32]), 1024);
        let content = [c(1, 10), c(0, 1024), c(2, 20), c(0, 1024)];
        let m = SparseMap::of(&content, hole, 2078).unwrap();
        assert_eq!(m.regions, [(0, 512), (1024, 512), (2078, 0)]);
        let mut a = m.clone();
        assert_eq!(a.route(2078), [(0, 512), (1024, 1536)]);
        assert_eq!(a.route(0), []);
        let mut b = m;
        assert_eq!(b.route(5), [(0, 5)]);
        assert_eq!(b.route(10), [(0, 10)]);
        assert_eq!(b.route(1100), [(0, 497), (1009, 1100)]);
        assert_eq!(b.route(5), [(0, 5)]);
        assert_eq!(b.route(958), [(0, 416)]);
    }
}
