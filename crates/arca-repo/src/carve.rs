//! Carving: finds the sealed blobs of a pack whose header and index entries are both lost.
//! Each blob's bytes are decrypted from its nonce, unauthenticated, only to learn where it
//! ends; every blob found is then authenticated under the id its plaintext hashes to, so
//! nothing that did not verify is ever returned.
//!
//! A compressed blob ends where its zstd frame does. A stored (uncompressed) one ends at
//! one of: the chunker's cut in its plaintext (a data chunk that is not a file's last), the
//! length a snapshot gives a blob that no index places (`wanted`), or the next position
//! where a compressed blob or the pack header starts (5 decrypted bytes tell: flag 1 and
//! zstd's magic, or "APHD"). What lies between the blobs found is reported as unresolved.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;

use arca_chunker::Chunker;
use arca_crypto::{MasterKey, Sealer};
use arca_format::envelope::HEADER_LEN;
use arca_format::pack::{HEADER_MAGIC, PackEntry, PackTrailer, TRAILER_LEN};
use arca_format::tree::MAGIC as TREE_MAGIC;
use arca_format::{BlobKind, Id, Tree};

use crate::blob::{FLAG_RAW, FLAG_ZSTD};

const NONCE: usize = 24;
const TAG: usize = 16;
/// The smallest sealed blob: nonce, flag, tag.
const MIN_BLOB: usize = NONCE + 1 + TAG;
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// Bytes a stored blob's search may authenticate at positions where any stored blob could
/// start (one in 256 by chance): enough for the lengths of files' last chunks up to the
/// smallest chunk (about 256 KiB) to be found without the snapshots, bounded so that a
/// pack of them is carved in seconds.
const WEAK_BUDGET: usize = 128 << 20;
/// No blob's plaintext is larger (the format's u32 raw length).
const MAX_RAW: u64 = u32::MAX as u64;

/// A blob the snapshots reference that no index places: what carving may find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    /// What kind the snapshots use it as.
    pub kind: BlobKind,
    /// Its plaintext length, when a file's content list gives it (trees do not).
    pub len: Option<u32>,
}

/// What [`carve`] found in a pack.
#[derive(Debug, Default)]
pub struct Carved {
    /// The kind of the blobs found: tree when every one is a tree (a snapshot uses it as
    /// one, or its plaintext is a tree listing), data otherwise.
    pub kind: Option<BlobKind>,
    /// Blobs that verified, in file order.
    pub entries: Vec<PackEntry>,
    /// Where the pack header starts, when found (it and the trailer are accounted for).
    pub header_at: Option<u64>,
    /// Byte ranges (offset, length) that are neither a blob that verified, the envelope
    /// nor the header: what may hold blobs that could not be found.
    pub unresolved: Vec<(u64, u64)>,
}

impl Carved {
    /// Bytes of the pack that could not be accounted for.
    pub fn unresolved_bytes(&self) -> u64 {
        self.unresolved.iter().map(|(_, n)| n).sum()
    }
}

/// Finds the blobs of `bytes`, a whole pack file of this repository whose header does not
/// open (see the module documentation). `wanted` narrows the search for stored blobs; it
/// may be empty.
pub fn carve(
    key: &MasterKey,
    sealer: &Sealer,
    chunker: &Chunker,
    bytes: &[u8],
    wanted: &HashMap<Id, Wanted>,
) -> Carved {
    let lens: BTreeSet<usize> = wanted
        .values()
        .filter_map(|w| w.len.map(|l| l as usize))
        .collect();
    let c = Carver {
        key,
        sealer,
        chunker,
        bytes,
        wanted,
        lens,
    };
    c.run()
}

struct Carver<'a> {
    key: &'a MasterKey,
    sealer: &'a Sealer,
    chunker: &'a Chunker,
    bytes: &'a [u8],
    wanted: &'a HashMap<Id, Wanted>,
    lens: BTreeSet<usize>,
}

/// What 5 decrypted bytes at a position say starts there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// The pack header ("APHD").
    Header,
    /// A compressed blob (flag 1, zstd's magic).
    Compressed,
    /// A stored tree listing (flag 0, the listing's magic "ATRE").
    StoredTree,
    /// Possibly a stored blob (flag 0).
    Stored,
    /// Nothing this format writes.
    Nothing,
}

impl Start {
    /// Rare by chance (2⁻³² or less per position): taken for where a blob ends.
    fn is_strong(self) -> bool {
        matches!(self, Start::Header | Start::Compressed | Start::StoredTree)
    }
}

/// A blob that verified: its entry and whether it reads as a tree listing.
struct Found {
    entry: PackEntry,
    tree: bool,
}

impl Carver<'_> {
    fn run(&self) -> Carved {
        let len = self.bytes.len();
        let mut out = Carved::default();
        if len <= HEADER_LEN {
            if len > 0 {
                out.unresolved.push((0, len as u64));
            }
            return out;
        }
        let mut end = self.header_from_trailer().unwrap_or(len);
        let mut pos = HEADER_LEN;
        let mut gap: Option<usize> = None;
        let mut found: Vec<Found> = vec![];
        while pos < end {
            if self.start(pos) == Start::Header {
                end = pos;
                break;
            }
            match self.find(pos, end, true) {
                Ok(f) => {
                    if let Some(g) = gap.take() {
                        out.unresolved.push((g as u64, (pos - g) as u64));
                    }
                    pos += f.entry.length as usize;
                    found.push(f);
                }
                Err(strong) => {
                    gap.get_or_insert(pos);
                    pos = self.resume_after(pos, end, strong);
                }
            }
        }
        let pos = pos.min(end);
        if let Some(g) = gap.take() {
            out.unresolved.push((g as u64, (pos - g) as u64));
        }
        if end < len {
            out.header_at = Some(end as u64);
        }
        let tree = !found.is_empty()
            && found.iter().all(|f| match self.wanted.get(&f.entry.id) {
                Some(w) => w.kind == BlobKind::Tree,
                None => f.tree,
            });
        if !found.is_empty() {
            out.kind = Some(if tree { BlobKind::Tree } else { BlobKind::Data });
        }
        out.entries = found.into_iter().map(|f| f.entry).collect();
        out
    }

    /// Where the header starts, when the trailer is intact and its length leads to a
    /// position that decrypts to the header's magic.
    fn header_from_trailer(&self) -> Option<usize> {
        let len = self.bytes.len();
        let t = PackTrailer::decode(self.bytes).ok()?;
        let start = len.checked_sub(TRAILER_LEN + t.header_len as usize)?;
        (start >= HEADER_LEN && self.start(start) == Start::Header).then_some(start)
    }

    fn nonce(&self, pos: usize) -> Option<[u8; NONCE]> {
        let mut n = [0u8; NONCE];
        n.copy_from_slice(self.bytes.get(pos..pos + NONCE)?);
        Some(n)
    }

    /// Plaintext bytes `from..to` of what was sealed at `pos`, unauthenticated; `None` past
    /// the end of the file.
    fn decrypt(&self, pos: usize, from: usize, to: usize) -> Option<Vec<u8>> {
        let nonce = self.nonce(pos)?;
        let ct = pos + NONCE;
        let mut b = self.bytes.get(ct + from..ct + to)?.to_vec();
        self.sealer
            .decrypt_unauthenticated(&nonce, from as u64, &mut b);
        Some(b)
    }

    fn start(&self, pos: usize) -> Start {
        let (Some(nonce), Some(b)) = (
            self.nonce(pos),
            self.bytes.get(pos + NONCE..pos + NONCE + 5),
        ) else {
            return Start::Nothing;
        };
        let mut head = [0u8; 5];
        head.copy_from_slice(b);
        self.sealer.decrypt_unauthenticated(&nonce, 0, &mut head);
        if head[..4] == HEADER_MAGIC {
            Start::Header
        } else if head[0] == FLAG_ZSTD && head[1..] == ZSTD_MAGIC {
            Start::Compressed
        } else if head[0] == FLAG_RAW && head[1..] == TREE_MAGIC {
            Start::StoredTree
        } else if head[0] == FLAG_RAW {
            Start::Stored
        } else {
            Start::Nothing
        }
    }

    /// The next position after `from`, and before `end`, where a compressed blob, a stored
    /// listing or the header starts; `end` when there is none.
    fn next_strong(&self, from: usize, end: usize) -> usize {
        (from..end)
            .find(|&p| self.start(p).is_strong())
            .unwrap_or(end)
    }

    /// The blob sealed at `pos`, ending by `end`, once it verified. `scan`: a stored blob
    /// may also end where the next one starts, found by trying every position (slow; not
    /// for a guess at a neighbour); then a failure gives the next strong start, where to
    /// look on.
    fn find(&self, pos: usize, end: usize, scan: bool) -> Result<Found, Option<usize>> {
        if pos + MIN_BLOB > end {
            return Err(None);
        }
        match self.start(pos) {
            Start::Compressed => {
                let found = self.frame_at(pos, end).and_then(|(frame, plain)| {
                    let raw = decompress(&plain[1..1 + frame])?;
                    self.verified(pos, NONCE + 1 + frame + TAG, &raw)
                });
                found.ok_or(None)
            }
            Start::Stored | Start::StoredTree => self.stored(pos, end, scan),
            Start::Header | Start::Nothing => Err(None),
        }
    }

    /// Where to look on after no blob verified at `pos`: where it most likely ended, when
    /// a blob verifies there (a damaged blob's frame still parses; a damaged chunk's cut
    /// rarely moves; the snapshots give the lengths of the blobs they miss), otherwise the
    /// next compressed blob or the header.
    fn resume_after(&self, pos: usize, end: usize, strong: Option<usize>) -> usize {
        if pos + MIN_BLOB > end {
            return end;
        }
        // A guess that runs to `end` proves nothing (the scan below gets there too).
        let fits = |q: usize| {
            q < end && (self.start(q) == Start::Header || self.find(q, end, false).is_ok())
        };
        match self.start(pos) {
            Start::Compressed => {
                if let Some((frame, _)) = self.frame_at(pos, end) {
                    let q = pos + NONCE + 1 + frame + TAG;
                    if fits(q) {
                        return q;
                    }
                }
            }
            Start::Stored | Start::StoredTree => {
                let max = end - pos - MIN_BLOB;
                let cut = self
                    .decrypt(pos, 1, 1 + self.chunker.max_size().min(max))
                    .map(|p| self.chunker.cut(&p));
                let guesses = cut.into_iter().chain(self.lens.range(..=max).copied());
                for l in guesses {
                    let q = pos + MIN_BLOB + l;
                    // Only where something this format writes starts.
                    if self.start(q) != Start::Nothing && fits(q) {
                        return q;
                    }
                }
            }
            Start::Header | Start::Nothing => {}
        }
        strong.unwrap_or_else(|| self.next_strong(pos + 1, end))
    }

    /// Checks that `bytes[pos..pos + sealed_len]` is blob `id` as this repository sealed it.
    fn verified(&self, pos: usize, sealed_len: usize, plain: &[u8]) -> Option<Found> {
        let id = self.key.blob_id(plain);
        let sealed = self.bytes.get(pos..pos + sealed_len)?;
        self.sealer
            .authenticate(id.as_bytes(), sealed, &|| format!("blob {id}"))
            .ok()?;
        Some(Found {
            entry: PackEntry {
                id,
                offset: u32::try_from(pos).ok()?,
                length: u32::try_from(sealed_len).ok()?,
                raw_length: u32::try_from(plain.len()).ok()?,
            },
            tree: Tree::decode(plain).is_ok(),
        })
    }

    /// The length of the zstd frame of the compressed blob at `pos` (its blocks' headers
    /// give it), and the plaintext decrypted to find it (flag first).
    fn frame_at(&self, pos: usize, end: usize) -> Option<(usize, Vec<u8>)> {
        let avail = end - pos - NONCE;
        let mut plain: Vec<u8> = vec![];
        let mut step = 64 << 10;
        let frame = loop {
            let to = (plain.len() + step).min(avail);
            let more = self.decrypt(pos, plain.len(), to)?;
            plain.extend_from_slice(&more);
            match zstd::zstd_safe::find_frame_compressed_size(&plain[1..]) {
                Ok(n) => break n,
                Err(_) if to < avail => step *= 2,
                Err(_) => return None,
            }
        };
        (NONCE + 1 + frame + TAG <= end - pos).then_some((frame, plain))
    }

    /// The stored blob at `pos`: its end tried at the chunker's cut and at the lengths of
    /// wanted blobs (those must hash to a wanted id to be authenticated), shortest first;
    /// with `scan`, then at every position up to the next strong start (a compressed blob,
    /// a stored listing, the header): there, and, within a budget of bytes authenticated,
    /// wherever a stored blob may start (a flag 0, one position in 256).
    fn stored(&self, pos: usize, end: usize, scan: bool) -> Result<Found, Option<usize>> {
        // The payload may run to `end`, less the flag and the tag.
        let max = end - pos - MIN_BLOB;
        let mut plain: Vec<u8> = vec![];
        let mut hasher = self.key.blob_id_hasher();
        let mut fed = 0usize;
        let mut try_len = |len: usize, must_be_wanted: bool, plain: &mut Vec<u8>| {
            if len > max {
                return None;
            }
            if plain.len() < 1 + len {
                let more = self.decrypt(pos, plain.len(), 1 + len)?;
                plain.extend_from_slice(&more);
            }
            if len < fed {
                // Below what was hashed already: hash afresh.
                hasher = self.key.blob_id_hasher();
                fed = 0;
            }
            hasher.update(&plain[1 + fed..1 + len]);
            fed = len;
            if must_be_wanted && !self.wanted.contains_key(&hasher.finish()) {
                return None;
            }
            self.verified(pos, MIN_BLOB + len, &plain[1..1 + len])
        };
        // Wanted lengths below the smallest chunk first (files' last chunks): they need no
        // more decrypted than themselves.
        let min = self.chunker.min_size().min(max);
        for &len in self.lens.range(..min) {
            if let Some(f) = try_len(len, true, &mut plain) {
                return Ok(f);
            }
        }
        // With `scan`, the positions up to the smallest chunk first (files' last chunks end
        // there: found without decrypting a largest chunk's worth for each); then the cut,
        // found in as much as the largest chunk, the longer wanted lengths and, with `scan`,
        // the positions beyond.
        let mut budget = WEAK_BUDGET;
        for phase in 0..2 {
            if phase == 1 {
                let window = self.chunker.max_size().min(max);
                if plain.len() < 1 + window {
                    let more = self.decrypt(pos, plain.len(), 1 + window).ok_or(None)?;
                    plain.extend_from_slice(&more);
                }
                let cut = self.chunker.cut(&plain[1..1 + window]);
                // Length → whether the blob must be a wanted one to be worth authenticating.
                let mut tries: BTreeMap<usize, bool> =
                    self.lens.range(min..=max).map(|&l| (l, true)).collect();
                tries.insert(cut, false);
                for (len, must) in tries {
                    if let Some(f) = try_len(len, must, &mut plain) {
                        return Ok(f);
                    }
                }
            }
            if !scan {
                continue;
            }
            let lens = if phase == 0 { 0..min } else { min..max };
            for len in lens {
                let e = pos + MIN_BLOB + len;
                match self.start(e) {
                    s if s.is_strong() => return try_len(len, false, &mut plain).ok_or(Some(e)),
                    Start::Stored if budget >= len => {
                        budget -= len;
                        if let Some(f) = try_len(len, false, &mut plain) {
                            return Ok(f);
                        }
                    }
                    _ => {}
                }
            }
        }
        if !scan {
            return Err(None);
        }
        try_len(max, false, &mut plain).ok_or(Some(end))
    }
}

/// The plaintext of one zstd frame, bounded by what a blob may hold.
fn decompress(frame: &[u8]) -> Option<Vec<u8>> {
    let size = zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten();
    if size.is_some_and(|n| n > MAX_RAW) {
        return None;
    }
    let mut out = Vec::with_capacity(size.unwrap_or(0).min(64 << 20) as usize);
    let dec = zstd::stream::read::Decoder::with_buffer(frame).ok()?;
    dec.single_frame()
        .take(MAX_RAW + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 <= MAX_RAW).then_some(out)
}

#[cfg(test)]
mod tests;
