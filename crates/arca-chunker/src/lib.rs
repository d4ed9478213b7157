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
    /// The hash after 64 or more zero bytes: the fixed point of `h = 2h + gear[0]`.
    zero_fixed: u64,
    /// The first chunk of `max` or more zero bytes: every chunk that starts inside a run of
    /// zeros reaching `max` bytes ahead has this length ([`Self::cut`] looks no further).
    zero_cut: usize,
}

/// Number of leading zero bytes of `s`.
fn zero_prefix(s: &[u8]) -> usize {
    let mut n = 0;
    for c in s.chunks(64) {
        if c.iter().fold(0u8, |a, &x| a | x) == 0 {
            n += c.len();
        } else {
            return n + c.iter().position(|&x| x != 0).unwrap_or(c.len());
        }
    }
    n
}

impl std::fmt::Debug for Chunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Chunker({}/{}/{})", self.min, self.avg, self.max)
    }
}

/// A mask with `ones` bits set, spread over bits 15..=62 of the hash. A gear hash bit at
/// position k depends on the last k+1 bytes, so high bits give the largest window; bit 63 is
/// left out so that a two-bytes-per-step loop (FastCDC 2020's shifted masks) finds the same
/// cut points.
fn spread_mask(ones: u32) -> u64 {
    let ones = ones.clamp(1, 48);
    let mut m = 0u64;
    for j in 0..ones {
        m |= 1u64 << (62 - (j * 48 / ones));
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
        let mut c = Self {
            gear: std::sync::Arc::new(gear),
            min: params.min as usize,
            avg: params.avg as usize,
            max: params.max as usize,
            mask_small: spread_mask(bits + 2),
            mask_large: spread_mask(bits.saturating_sub(2)),
            zero_fixed: gear[0].wrapping_neg(),
            zero_cut: 0,
        };
        c.zero_cut = c.cut(&vec![0u8; c.max]);
        c
    }

    /// The largest chunk this chunker emits.
    pub fn max_size(&self) -> usize {
        self.max
    }

    /// The smallest chunk this chunker emits, but for a file's last (or only) one.
    pub fn min_size(&self) -> usize {
        self.min
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
        if let Some(c) = self.scan(&data[..normal], self.min, self.mask_small, &mut hash) {
            return c;
        }
        let start = normal.max(self.min);
        self.scan(&data[..n], start, self.mask_large, &mut hash)
            .unwrap_or(n)
    }

    /// Rolls the gear hash over `data[from..]`, returning the offset just past the first byte
    /// at which `hash & mask == 0`. After 64 zero bytes the hash is always `zero_fixed`; when
    /// that value cannot satisfy the mask, the rest of a zero run is skipped at memory speed
    /// without changing the result (sparse and zero-filled files chunk fast).
    fn scan(&self, data: &[u8], from: usize, mask: u64, hash: &mut u64) -> Option<usize> {
        let gear = &*self.gear;
        let skip = self.zero_fixed & mask != 0;
        let mut h = *hash;
        let mut i = from;
        while i < data.len() {
            h = (h << 1).wrapping_add(gear[data[i] as usize]);
            i += 1;
            if h & mask == 0 {
                *hash = h;
                return Some(i);
            }
            if skip && h == self.zero_fixed {
                i += zero_prefix(&data[i..]);
            }
        }
        *hash = h;
        None
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

/// A reader that knows where its input is zeros without producing them, as a sparse file's
/// holes: [`StreamChunker::next_chunk_or_zeros`] then passes over long runs without memory.
pub trait KnownZeros: Read {
    /// How many bytes from the reader's position are known to be zeros (0: none known).
    fn zeros_ahead(&mut self) -> u64;
    /// Moves the position `n` bytes on, `n` at most what [`Self::zeros_ahead`] said.
    fn skip_zeros(&mut self, n: u64);
}

/// What [`StreamChunker::next_chunk_or_zeros`] found next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// A chunk, in the buffer given.
    Chunk,
    /// A chunk of this many zero bytes, not produced (the buffer given is left empty).
    Zeros(usize),
    /// The end of the input.
    End,
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

    /// Chunks `reader`, reusing `buf`. The buffer grows as the input needs, up to twice the
    /// maximum chunk size, so that a small file costs a small buffer.
    pub fn with_buffer(chunker: &'c Chunker, reader: R, mut buf: Vec<u8>) -> Self {
        let first = (64 << 10).min(chunker.max * 2);
        if buf.len() < first {
            buf.resize(first, 0);
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
            let full_size = self.buf.len() >= max * 2;
            if self.end == self.buf.len() && self.start == 0 {
                // Full of unconsumed input: grow (never past twice the maximum, which
                // always leaves room here since less than `max` is buffered).
                let grown = (self.buf.len() * 2).clamp(64 << 10, max * 2);
                self.buf.resize(grown.max(self.buf.len() + 1), 0);
            } else if self.end == self.buf.len()
                || (full_size && self.buf.len() - self.end < max - (self.end - self.start))
            {
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
        let mut chunk = Vec::new();
        Ok(self.next_chunk_into(&mut chunk)?.then_some(chunk))
    }

    /// The next chunk into `out` (cleared first, so that callers can reuse buffers); false
    /// at the end of the input.
    pub fn next_chunk_into(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        self.fill()?;
        out.clear();
        let avail = &self.buf[self.start..self.end];
        if avail.is_empty() {
            return Ok(false);
        }
        let n = self.chunker.cut(avail);
        out.extend_from_slice(&avail[..n]);
        self.start += n;
        Ok(true)
    }
}

impl<R: KnownZeros> StreamChunker<'_, R> {
    /// As [`Self::next_chunk_into`], except that a chunk lying wholly in a run of zeros the
    /// reader knows of (with what is buffered) is neither read nor copied: its length is
    /// returned, the same cut as reading it would give.
    pub fn next_chunk_or_zeros(&mut self, out: &mut Vec<u8>) -> io::Result<Next> {
        if !self.eof {
            let ahead = self.reader.zeros_ahead();
            let buffered = &self.buf[self.start..self.end];
            if ahead > 0
                && (buffered.len() as u64).saturating_add(ahead) >= self.chunker.max as u64
                && zero_prefix(buffered) == buffered.len()
            {
                let n = self.chunker.zero_cut;
                if n <= buffered.len() {
                    self.start += n;
                } else {
                    self.reader.skip_zeros((n - buffered.len()) as u64);
                    self.start = 0;
                    self.end = 0;
                }
                out.clear();
                return Ok(Next::Zeros(n));
            }
        }
        Ok(if self.next_chunk_into(out)? {
            Next::Chunk
        } else {
            Next::End
        })
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
    fn zero_runs_still_cut_when_the_fixed_point_matches_a_mask() {
        let mut c = Chunker::new(&[8; 32], small());
        // A mask the zero-run hash satisfies: cuts must fall inside zero runs, as in the
        // reference loop, so the skip must not be taken.
        let bit = (15..63).find(|b| c.zero_fixed & (1u64 << b) == 0).unwrap();
        c.mask_large = 1u64 << bit;
        let data = with_zero_runs(3, 100_000, &[(10_000, 50_000)]);
        let mut rest = &data[..];
        let mut cuts_in_zeros = 0;
        let mut off = 0;
        while !rest.is_empty() {
            let a = c.cut(rest);
            assert_eq!(a, reference_cut(&c, rest));
            if (10_000..60_000).contains(&(off + a)) {
                cuts_in_zeros += 1;
            }
            off += a;
            rest = &rest[a..];
        }
        assert!(cuts_in_zeros > 0);
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

    /// The plain byte-at-a-time FastCDC loop, as specified in docs/FORMAT.md.
    fn reference_cut(c: &Chunker, data: &[u8]) -> usize {
        let n = data.len().min(c.max);
        if data.len() <= c.min {
            return data.len();
        }
        let mut h = 0u64;
        for (i, &b) in data.iter().enumerate().take(n).skip(c.min) {
            h = (h << 1).wrapping_add(c.gear[b as usize]);
            let mask = if i < c.avg {
                c.mask_small
            } else {
                c.mask_large
            };
            if h & mask == 0 {
                return i + 1;
            }
        }
        n
    }

    /// A reader over `data` that knows `holes` (zeroed ranges) and reads `step` bytes at
    /// most, never across a hole's edge, as a sparse file's reader does.
    struct Holey<'d> {
        data: &'d [u8],
        pos: usize,
        holes: &'d [(usize, usize)],
        step: usize,
    }

    impl Holey<'_> {
        fn hole_end(&self) -> Option<usize> {
            self.holes
                .iter()
                .filter(|&&(a, b)| (a..b).contains(&self.pos))
                .map(|&(_, b)| b)
                .max()
        }
    }

    impl Read for Holey<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let mut end = self.data.len().min(self.pos + self.step.min(buf.len()));
            if let Some(h) = self.hole_end() {
                end = end.min(h);
            } else if let Some(a) = self
                .holes
                .iter()
                .map(|h| h.0)
                .filter(|&a| a > self.pos)
                .min()
            {
                end = end.min(a);
            }
            let n = end - self.pos;
            buf[..n].copy_from_slice(&self.data[self.pos..end]);
            self.pos = end;
            Ok(n)
        }
    }

    impl KnownZeros for &mut Holey<'_> {
        fn zeros_ahead(&mut self) -> u64 {
            self.hole_end().map_or(0, |h| (h - self.pos) as u64)
        }
        fn skip_zeros(&mut self, n: u64) {
            assert!(n <= self.zeros_ahead());
            self.pos += n as usize;
        }
    }

    fn with_zero_runs(seed: u64, len: usize, runs: &[(usize, usize)]) -> Vec<u8> {
        let mut d = pseudo_random(seed, len);
        for &(at, l) in runs {
            let at = at % len;
            let end = (at + l).min(len);
            d[at..end].iter_mut().for_each(|b| *b = 0);
        }
        d
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn zero_run_fast_path_cuts_like_the_reference(seed in any::<u64>(), key in any::<[u8; 32]>(),
                runs in proptest::collection::vec((any::<usize>(), 0usize..60_000), 0..6)) {
            let c = Chunker::new(&key, small());
            let data = with_zero_runs(seed, 150_000, &runs);
            let mut rest = &data[..];
            while !rest.is_empty() {
                let a = c.cut(rest);
                prop_assert_eq!(a, reference_cut(&c, rest));
                rest = &rest[a..];
            }
        }

        #[test]
        fn known_zero_runs_are_passed_over_with_the_cuts_reading_gives(seed in any::<u64>(),
                key in any::<[u8; 32]>(), step in 1usize..40_000,
                runs in proptest::collection::vec((any::<usize>(), 0usize..90_000), 0..6)) {
            let c = Chunker::new(&key, small());
            let data = with_zero_runs(seed, 200_000, &runs);
            let holes: Vec<(usize, usize)> = runs.iter()
                .map(|&(at, l)| (at % data.len(), (at % data.len() + l).min(data.len())))
                .collect();
            let read = chunks(&c, &data);
            let mut r = Holey { data: &data, pos: 0, holes: &holes, step };
            let mut sc = StreamChunker::new(&c, &mut r);
            let (mut got, mut skipped, mut out) = (vec![], 0, vec![]);
            loop {
                match sc.next_chunk_or_zeros(&mut out).unwrap() {
                    Next::Chunk => got.push(out.clone()),
                    Next::Zeros(n) => {
                        prop_assert!(out.is_empty());
                        got.push(vec![0; n]);
                        skipped += 1;
                    }
                    Next::End => break,
                }
            }
            prop_assert_eq!(got, read);
            let long_hole = holes.iter().any(|&(a, b)| b - a >= 3 * c.max_size());
            prop_assert!(!long_hole || skipped > 0);
        }

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
            // Resynchronisation length is geometric: with normalized chunking each chunk
            // falls back into step with a chance of about 0.4 (20,000 trials: median 2 new
            // chunks, 1 in 1,000 above 13, a maximum of 20), so 40 is about one chance in
            // 10^8 per case.
            prop_assert!(fresh <= 40, "{} new chunks of {}", fresh, after.len());
            let mut off = 0;
            for (x, y) in before.iter().zip(&after) {
                if off + x.len() > at { break; }
                prop_assert_eq!(x, y);
                off += x.len();
            }
        }
    }
}
