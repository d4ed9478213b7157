//! Content-defined chunking with FastCDC (gear hash, normalized chunking level 2) whose gear
//! table is derived from a secret key, so chunk boundaries reveal nothing about known files.
//!
//! [`Chunker::cut`] finds one boundary in a slice; [`StreamChunker`] cuts a reader into
//! owned chunks with one reusable buffer, so memory stays at about twice the maximum chunk.

use std::io::{self, Read};

use arca_format::ChunkerParams;

/// Cut-point finder for one key and one set of sizes.
#[derive(Clone)]
pub struct Chunker {
    gear: std::sync::Arc<[u64; 256]>,
    min: usize,
    avg: usize,
    max: usize,
    mask_small: u64,
    mask_large: u64,
}

impl std::fmt::Debug for Chunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Chunker({}/{}/{})", self.min, self.avg, self.max)
    }
}

/// A mask with `ones` bits set, spread over the top 48 bits of the hash. A gear hash bit at
/// position k depends on the last k+1 bytes, so high bits give the largest window.
fn spread_mask(ones: u32) -> u64 {
    let ones = ones.clamp(1, 48);
    let mut m = 0u64;
    for j in 0..ones {
        m |= 1u64 << (63 - (j * 48 / ones));
    }
    m
}

impl Chunker {
    /// A chunker keyed with `key`. `params` must be valid ([`ChunkerParams::validate`]).
    pub fn new(key: &[u8; 32], params: ChunkerParams) -> Self {
        let mut bytes = [0u8; 256 * 8];
        let mut h = blake3::Hasher::new_keyed(key);
        h.update(b"arca fastcdc gear table v1");
        h.finalize_xof().fill(&mut bytes);
        let mut gear = [0u64; 256];
        for (g, b) in gear.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            *g = u64::from_le_bytes(a);
        }
        let bits = params.avg.trailing_zeros();
        Self {
            gear: std::sync::Arc::new(gear),
            min: params.min as usize,
            avg: params.avg as usize,
            max: params.max as usize,
            mask_small: spread_mask(bits + 2),
            mask_large: spread_mask(bits.saturating_sub(2)),
        }
    }

    /// The largest chunk this chunker emits.
    pub fn max_size(&self) -> usize {
        self.max
    }

    /// Length of the first chunk of `data`. When `data` is shorter than the maximum chunk and
    /// holds no boundary, the whole of it is returned, so callers pass at least `max` bytes
    /// unless they are at the end of the input.
    pub fn cut(&self, data: &[u8]) -> usize {
        let mut n = data.len();
        if n <= self.min {
            return n;
        }
        if n > self.max {
            n = self.max;
        }
        let normal = self.avg.min(n);
        let mut hash = 0u64;
        let gear = &*self.gear;
        for (i, &b) in data[self.min..normal].iter().enumerate() {
            hash = (hash << 1).wrapping_add(gear[b as usize]);
            if hash & self.mask_small == 0 {
                return self.min + i + 1;
            }
        }
        let start = normal.max(self.min);
        for (i, &b) in data[start..n].iter().enumerate() {
            hash = (hash << 1).wrapping_add(gear[b as usize]);
            if hash & self.mask_large == 0 {
                return start + i + 1;
            }
        }
        n
    }

    /// Chunk lengths of a complete in-memory input.
    pub fn lengths(&self, mut data: &[u8]) -> Vec<usize> {
        let mut out = Vec::with_capacity(data.len() / self.avg + 1);
        while !data.is_empty() {
            let c = self.cut(data);
            out.push(c);
            data = &data[c..];
        }
        out
    }
}

/// Cuts a reader into chunks with one buffer of twice the maximum chunk size, which can be
/// handed from file to file so that small files cost no allocation.
pub struct StreamChunker<'c, R> {
    chunker: &'c Chunker,
    reader: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
}

impl<'c, R: Read> StreamChunker<'c, R> {
    /// Chunks `reader` with a new buffer.
    pub fn new(chunker: &'c Chunker, reader: R) -> Self {
        Self::with_buffer(chunker, reader, Vec::new())
    }

    /// Chunks `reader`, reusing `buf` (grown to twice the maximum chunk size if needed).
    pub fn with_buffer(chunker: &'c Chunker, reader: R, mut buf: Vec<u8>) -> Self {
        if buf.len() < chunker.max * 2 {
            buf.resize(chunker.max * 2, 0);
        }
        Self {
            chunker,
            reader,
            buf,
            start: 0,
            end: 0,
            eof: false,
        }
    }

    /// Gives the buffer back for the next file.
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    /// Reads until at least `max` bytes are buffered past `start`, or the input ends.
    fn fill(&mut self) -> io::Result<()> {
        let max = self.chunker.max;
        while !self.eof && self.end - self.start < max {
            if self.buf.len() - self.end < max - (self.end - self.start) {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The next chunk, `None` at the end of the input.
    pub fn next_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        self.fill()?;
        let avail = &self.buf[self.start..self.end];
        if avail.is_empty() {
            return Ok(None);
        }
        let n = self.chunker.cut(avail);
        let chunk = avail[..n].to_vec();
        self.start += n;
        Ok(Some(chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn small() -> ChunkerParams {
        ChunkerParams {
            min: 1024,
            avg: 4096,
            max: 16384,
        }
    }

    fn pseudo_random(seed: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut h = blake3::Hasher::new();
        h.update(&seed.to_le_bytes());
        out.resize(len, 0);
        h.finalize_xof().fill(&mut out);
        out
    }

    fn chunks(c: &Chunker, data: &[u8]) -> Vec<Vec<u8>> {
        let mut out = vec![];
        let mut s = StreamChunker::new(c, data);
        while let Some(ch) = s.next_chunk().unwrap() {
            out.push(ch);
        }
        out
    }

    #[test]
    fn default_sizes_average_near_target() {
        let c = Chunker::new(&[3; 32], ChunkerParams::default());
        let data = pseudo_random(1, 64 << 20);
        let lens = c.lengths(&data);
        let avg = data.len() / lens.len();
        assert!((700 << 10..1500 << 10).contains(&avg), "average {avg}");
        assert!(
            lens[..lens.len() - 1]
                .iter()
                .all(|&l| (256 << 10..=4 << 20).contains(&l))
        );
    }

    #[test]
    fn zeros_and_empty() {
        let c = Chunker::new(&[3; 32], small());
        assert!(chunks(&c, &[]).is_empty());
        let z = vec![0u8; 100_000];
        let ch = chunks(&c, &z);
        assert_eq!(ch.iter().map(Vec::len).sum::<usize>(), z.len());
    }

    #[test]
    fn key_changes_boundaries() {
        let data = pseudo_random(9, 1 << 20);
        let a = Chunker::new(&[1; 32], small()).lengths(&data);
        let b = Chunker::new(&[2; 32], small()).lengths(&data);
        assert_ne!(a, b);
        assert_eq!(a, Chunker::new(&[1; 32], small()).lengths(&data));
    }

    #[test]
    fn insertions_usually_change_one_chunk() {
        let c = Chunker::new(&[6; 32], small());
        let mut total = 0;
        for seed in 0..200u64 {
            let data = pseudo_random(seed, 300_000);
            let at = (seed as usize * 7919) % 250_000;
            let mut edited = data[..at].to_vec();
            edited.extend_from_slice(b"inserted");
            edited.extend_from_slice(&data[at..]);
            let before = chunks(&c, &data);
            let set: std::collections::HashSet<&Vec<u8>> = before.iter().collect();
            total += chunks(&c, &edited)
                .iter()
                .filter(|x| !set.contains(x))
                .count();
        }
        assert!(total < 300, "{total} new chunks over 200 insertions");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn chunks_cover_input_within_bounds(seed in any::<u64>(), len in 0usize..200_000) {
            let c = Chunker::new(&[5; 32], small());
            let data = pseudo_random(seed, len);
            let ch = chunks(&c, &data);
            prop_assert_eq!(&ch.concat(), &data);
            for (i, x) in ch.iter().enumerate() {
                prop_assert!(x.len() <= 16384);
                if i + 1 < ch.len() {
                    prop_assert!(x.len() >= 1024);
                }
            }
            let lens: Vec<usize> = ch.iter().map(Vec::len).collect();
            prop_assert_eq!(lens, c.lengths(&data));
        }

        #[test]
        fn boundaries_recover_after_an_insertion(seed in any::<u64>(), at in 0usize..300_000,
                                                 ins in proptest::collection::vec(any::<u8>(), 1..5000)) {
            let c = Chunker::new(&[6; 32], small());
            let data = pseudo_random(seed, 400_000);
            let mut edited = data[..at].to_vec();
            edited.extend_from_slice(&ins);
            edited.extend_from_slice(&data[at..]);
            let before = chunks(&c, &data);
            let after = chunks(&c, &edited);
            // Chunks wholly before the edit are unchanged, and after a few chunks the
            // boundaries fall back into step: all but a handful of chunks are shared.
            let set: std::collections::HashSet<&Vec<u8>> = before.iter().collect();
            let fresh = after.iter().filter(|x| !set.contains(x)).count();
            // Resynchronisation length is geometric; 20 is beyond one chance in millions.
            prop_assert!(fresh <= 20, "{} new chunks of {}", fresh, after.len());
            let mut off = 0;
            for (x, y) in before.iter().zip(&after) {
                if off + x.len() > at { break; }
                prop_assert_eq!(x, y);
                off += x.len();
            }
        }
    }
}
