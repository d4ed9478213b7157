//! The in-memory index: every blob's location in 30 bytes, in one sorted vector searched by
//! binary search within a bucket. Keys are the first 16 bytes of the blob id.
//!
//! Truncating keys to 128 bits is safe: blobs are authenticated with their full id when
//! read, so a collision cannot return wrong data, and for keyed random ids the chance of any
//! collision among 2^32 blobs is below 2^-64 (the same id width kopia uses).

use std::collections::HashMap;

use arca_format::{BlobKind, Id, IndexFile};

/// A pack known to the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackRef {
    /// Pack id.
    pub id: Id,
    /// Kind of its blobs.
    pub kind: BlobKind,
    /// Pack file size.
    pub size: u64,
}

/// Where a blob is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobLocation {
    /// Position of the pack in [`Index::packs`].
    pub pack_index: u32,
    /// The pack.
    pub pack: PackRef,
    /// Offset of the sealed blob in the pack.
    pub offset: u32,
    /// Length of the sealed blob.
    pub length: u32,
    /// Plain length.
    pub raw_length: u32,
}

/// One location in 30 bytes: the key, then the pack position and offset (u32 each) and the
/// sealed and plain lengths (24 bits each), as 2-byte words so that nothing pads the entry
/// to 32. A length that does not fit 24 bits (blobs of 16 MiB and more: huge directory
/// listings, chunks of repositories made with `--chunk-max` above 16 MiB) is [`LARGE`] here
/// and kept whole in [`Index::large`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    key: [u8; 16],
    pack: [u16; 2],
    offset: [u16; 2],
    lengths: [u16; 3],
}

/// The 24-bit length field's mark for "too large: see the side table".
const LARGE: u32 = (1 << 24) - 1;

fn split(v: u32) -> [u16; 2] {
    [v as u16, (v >> 16) as u16]
}

fn join(w: [u16; 2]) -> u32 {
    u32::from(w[0]) | (u32::from(w[1]) << 16)
}

impl Entry {
    fn new(key: [u8; 16], pack: u32, offset: u32, length: u32, raw_length: u32) -> Self {
        let (l, r) = (length.min(LARGE), raw_length.min(LARGE));
        Self {
            key,
            pack: split(pack),
            offset: split(offset),
            lengths: [
                l as u16,
                ((l >> 16) | ((r & 0xff) << 8)) as u16,
                (r >> 8) as u16,
            ],
        }
    }
    fn pack(&self) -> u32 {
        join(self.pack)
    }
    fn offset(&self) -> u32 {
        join(self.offset)
    }
    /// Sealed and plain length as stored (either may be [`LARGE`]).
    fn lengths(&self) -> (u32, u32) {
        let [a, b, c] = self.lengths.map(u32::from);
        (a | ((b & 0xff) << 16), (b >> 8) | (c << 8))
    }
}

/// Blob id → location, for all loaded index files.
#[derive(Debug, Default, Clone)]
pub struct Index {
    packs: Vec<PackRef>,
    entries: Vec<Entry>,
    /// `starts[b]` = first entry whose key's top `bits` bits are ≥ b (one more slot at the
    /// end): a lookup searches only its bucket. Ids are uniform, so about eight entries per
    /// bucket, half a byte per blob.
    starts: Vec<u32>,
    bits: u32,
    /// Some blob has more than one location.
    copies: bool,
    /// (pack position, offset) → sealed and plain length, for the blobs whose lengths do not
    /// fit an entry.
    large: HashMap<(u32, u32), (u32, u32)>,
}

/// Collects index files, then sorts once.
#[derive(Debug, Default)]
pub struct IndexBuilder {
    packs: Vec<PackRef>,
    pack_pos: HashMap<Id, u32>,
    entries: Vec<Entry>,
    large: HashMap<(u32, u32), (u32, u32)>,
}

impl IndexBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds every pack of an index file. A pack listed twice is taken once.
    pub fn add(&mut self, file: &IndexFile) {
        for p in &file.packs {
            if self.pack_pos.contains_key(&p.id) {
                continue;
            }
            let pos = self.packs.len() as u32;
            self.pack_pos.insert(p.id, pos);
            self.packs.push(PackRef {
                id: p.id,
                kind: p.kind,
                size: p.size,
            });
            for b in &p.blobs {
                if b.length >= LARGE || b.raw_length >= LARGE {
                    self.large.insert((pos, b.offset), (b.length, b.raw_length));
                }
            }
            self.entries.extend(
                p.blobs
                    .iter()
                    .map(|b| Entry::new(b.id.prefix16(), pos, b.offset, b.length, b.raw_length)),
            );
        }
    }

    /// Sorts the entries. A blob stored in several packs (by `--cap`, concurrent backups or
    /// a rerun after a crash) keeps every location, lowest pack position first.
    pub fn finish(self) -> Index {
        let Self {
            packs,
            mut entries,
            mut large,
            ..
        } = self;
        entries.sort_unstable_by(|a, b| a.key.cmp(&b.key).then(a.pack().cmp(&b.pack())));
        entries.dedup_by(|a, b| a.key == b.key && a.pack == b.pack);
        entries.shrink_to_fit();
        large.shrink_to_fit();
        let copies = entries.windows(2).any(|w| w[0].key == w[1].key);
        let (starts, bits) = buckets(&entries);
        Index {
            packs,
            entries,
            starts,
            bits,
            copies,
            large,
        }
    }
}

/// The top `bits` bits of a key.
fn bucket(key: &[u8; 16], bits: u32) -> usize {
    if bits == 0 {
        return 0;
    }
    // Most significant byte first: buckets follow the entries' lexicographic order.
    let top = key[..4]
        .iter()
        .fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
    (top >> (32 - bits)) as usize
}

/// The bucket table of sorted `entries`: eight to sixteen entries per bucket (half a byte
/// per blob at most); a lookup's scan reads four to eight cache lines side by side. (Four to
/// eight per bucket took one byte per blob, which left a 10-million-blob index at 31.1-32.2
/// bytes of RSS per blob, against 30.7-30.9 now; its prune planning took about 10% less.)
fn buckets(entries: &[Entry]) -> (Vec<u32>, u32) {
    let bits = (entries.len() / 8).max(1).ilog2().min(24);
    let n = 1usize << bits;
    let mut starts = Vec::with_capacity(n + 1);
    let mut i = 0usize;
    for b in 0..n {
        while i < entries.len() && bucket(&entries[i].key, bits) < b {
            i += 1;
        }
        starts.push(i as u32);
    }
    starts.push(entries.len() as u32);
    (starts, bits)
}

impl Index {
    /// Builds an index from index files.
    pub fn from_files<'a>(files: impl IntoIterator<Item = &'a IndexFile>) -> Self {
        let mut b = IndexBuilder::new();
        for f in files {
            b.add(f);
        }
        b.finish()
    }

    /// Finds a blob of a given kind (its first location when it has several).
    pub fn get(&self, kind: BlobKind, id: &Id) -> Option<BlobLocation> {
        self.locations(kind, id).next()
    }

    /// Every location of a blob of a given kind, lowest pack position first.
    pub fn locations(&self, kind: BlobKind, id: &Id) -> impl Iterator<Item = BlobLocation> + '_ {
        self.positions(kind, id).map(|(_, loc)| loc)
    }

    /// Every location of a blob of a given kind with its position in `0..len()`, lowest pack
    /// position first. Positions number all locations of this index once each (in id prefix
    /// order), so a bitmap of [`Index::len`] bits can mark locations; see [`Index::at`].
    pub fn positions(
        &self,
        kind: BlobKind,
        id: &Id,
    ) -> impl Iterator<Item = (usize, BlobLocation)> + '_ {
        let key = id.prefix16();
        let (lo, hi) = match self.starts.len() {
            0 => (0, self.entries.len()),
            _ => {
                let b = bucket(&key, self.bits);
                (self.starts[b] as usize, self.starts[b + 1] as usize)
            }
        };
        // A bucket holds a few entries side by side: a linear scan reads them in order.
        let start = lo
            + self.entries[lo..hi]
                .iter()
                .take_while(|e| e.key < key)
                .count();
        self.entries[start..]
            .iter()
            .enumerate()
            .take_while(move |(_, e)| e.key == key)
            .filter(move |(_, e)| self.packs[e.pack() as usize].kind == kind)
            .map(move |(i, e)| (start + i, self.location(e)))
    }

    /// The location at position `pos` (see [`Index::positions`]) and the first 16 bytes of its
    /// blob's id; `None` past the end. Locations of one id prefix have consecutive positions.
    pub fn at(&self, pos: usize) -> Option<([u8; 16], BlobLocation)> {
        self.entries.get(pos).map(|e| (e.key, self.location(e)))
    }

    fn location(&self, e: &Entry) -> BlobLocation {
        let (pack, offset) = (e.pack(), e.offset());
        let (mut length, mut raw_length) = e.lengths();
        if (length == LARGE || raw_length == LARGE)
            && let Some(&(l, r)) = self.large.get(&(pack, offset))
        {
            (length, raw_length) = (l, r);
        }
        BlobLocation {
            pack_index: pack,
            pack: self.packs[pack as usize],
            offset,
            length,
            raw_length,
        }
    }

    /// Whether some blob is stored in more than one pack.
    pub fn has_copies(&self) -> bool {
        self.copies
    }

    /// Whether a blob of `kind` is present.
    pub fn contains(&self, kind: BlobKind, id: &Id) -> bool {
        self.get(kind, id).is_some()
    }

    /// All packs.
    pub fn packs(&self) -> &[PackRef] {
        &self.packs
    }

    /// Number of blob locations (a blob stored in two packs counts twice).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no blob is indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Approximate heap bytes used.
    pub fn memory_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.packs.capacity() * std::mem::size_of::<PackRef>()
            + self.starts.capacity() * std::mem::size_of::<u32>()
            + self.large.capacity() * 24
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arca_format::{IndexPack, PackEntry};

    #[test]
    fn entry_is_30_bytes_and_lookup_works() {
        assert_eq!(std::mem::size_of::<Entry>(), 30);
        let id = |i: u8| Id([i; 32]);
        let pe = |i: u8, off| PackEntry {
            id: id(i),
            offset: off,
            length: 10,
            raw_length: 7,
        };
        let f = IndexFile {
            supersedes: vec![],
            packs: vec![
                IndexPack {
                    id: id(100),
                    kind: BlobKind::Data,
                    size: 100,
                    blobs: vec![pe(1, 8), pe(2, 18)],
                },
                IndexPack {
                    id: id(101),
                    kind: BlobKind::Tree,
                    size: 100,
                    blobs: vec![pe(2, 8), pe(3, 18)],
                },
                IndexPack {
                    id: id(102),
                    kind: BlobKind::Data,
                    size: 100,
                    blobs: vec![pe(1, 8)],
                },
            ],
        };
        let ix = Index::from_files([&f, &f]);
        assert_eq!(ix.packs().len(), 3);
        // Blob 1 is in packs 100 and 102: both locations are kept, the first pack first.
        assert_eq!(ix.len(), 5);
        assert!(ix.has_copies());
        let copies: Vec<Id> = ix
            .locations(BlobKind::Data, &id(1))
            .map(|l| l.pack.id)
            .collect();
        assert_eq!(copies, vec![id(100), id(102)]);
        assert_eq!(ix.get(BlobKind::Data, &id(1)).unwrap().pack.id, id(100));
        assert_eq!(ix.locations(BlobKind::Tree, &id(1)).count(), 0);
        let l = ix.get(BlobKind::Data, &id(2)).unwrap();
        assert_eq!(
            (l.pack.id, l.offset, l.length, l.raw_length),
            (id(100), 18, 10, 7)
        );
        assert_eq!(ix.get(BlobKind::Tree, &id(2)).unwrap().pack.id, id(101));
        assert!(ix.get(BlobKind::Tree, &id(1)).is_none());
        assert!(!ix.contains(BlobKind::Data, &id(9)));
        // Positions number every location once, and `at` gives each one back.
        let mut seen = vec![false; ix.len()];
        for (i, kind) in [
            (1, BlobKind::Data),
            (2, BlobKind::Data),
            (2, BlobKind::Tree),
            (3, BlobKind::Tree),
        ] {
            for (pos, loc) in ix.positions(kind, &id(i)) {
                assert!(!std::mem::replace(&mut seen[pos], true));
                assert_eq!(ix.at(pos), Some((id(i).prefix16(), loc)));
            }
        }
        assert!(seen.iter().all(|s| *s));
        assert_eq!(ix.at(ix.len()), None);
    }

    #[test]
    fn lengths_of_any_size_come_back() {
        // 24-bit lengths in the entry, the rest in the side table; both kinds around the edge.
        let cases = [
            (0u32, 0u32),
            (1, 1),
            ((1 << 24) - 2, (1 << 24) - 2),
            ((1 << 24) - 1, 5),
            (7, 1 << 24),
            (64 << 20, (64 << 20) + 40),
            (u32::MAX, u32::MAX),
            (0x00ab_cdef, 0x0012_3456),
        ];
        let blobs: Vec<PackEntry> = cases
            .iter()
            .enumerate()
            .map(|(i, &(length, raw_length))| PackEntry {
                id: Id([i as u8 + 1; 32]),
                offset: u32::MAX - i as u32,
                length,
                raw_length,
            })
            .collect();
        let f = IndexFile {
            supersedes: vec![],
            packs: vec![IndexPack {
                id: Id([9; 32]),
                kind: BlobKind::Data,
                size: u64::MAX,
                blobs,
            }],
        };
        let ix = Index::from_files([&f]);
        for (i, &(length, raw_length)) in cases.iter().enumerate() {
            let l = ix.get(BlobKind::Data, &Id([i as u8 + 1; 32])).unwrap();
            assert_eq!(
                (l.offset, l.length, l.raw_length),
                (u32::MAX - i as u32, length, raw_length)
            );
        }
    }

    #[test]
    fn bucketed_lookup_finds_every_blob_and_nothing_else() {
        // Keys hashed from counters (uniform, as blob ids are), with runs of equal top bits
        // and both kinds under one id, for sizes around the bucket-count steps.
        for n in [1usize, 3, 4, 7, 64, 1000, 5000] {
            let id = |i: usize| Id(*blake3::hash(&(i as u64).to_le_bytes()).as_bytes());
            let blobs = |kind_off: usize| -> Vec<PackEntry> {
                (0..n)
                    .filter(|i| i % 3 != kind_off)
                    .map(|i| PackEntry {
                        id: id(i),
                        offset: i as u32,
                        length: 1,
                        raw_length: 1,
                    })
                    .collect()
            };
            let f = IndexFile {
                supersedes: vec![],
                packs: vec![
                    IndexPack {
                        id: Id([1; 32]),
                        kind: BlobKind::Data,
                        size: 1,
                        blobs: blobs(0),
                    },
                    IndexPack {
                        id: Id([2; 32]),
                        kind: BlobKind::Tree,
                        size: 1,
                        blobs: blobs(1),
                    },
                ],
            };
            let ix = Index::from_files([&f]);
            for i in 0..n {
                let data = ix.get(BlobKind::Data, &id(i));
                let tree = ix.get(BlobKind::Tree, &id(i));
                assert_eq!(
                    data.map(|l| l.offset),
                    (i % 3 != 0).then_some(i as u32),
                    "n={n} i={i}"
                );
                assert_eq!(
                    tree.map(|l| l.offset),
                    (i % 3 != 1).then_some(i as u32),
                    "n={n} i={i}"
                );
            }
            for i in n..n + 200 {
                assert!(!ix.contains(BlobKind::Data, &id(i)), "n={n} absent {i}");
            }
            assert!(
                ix.memory_bytes() <= n * 2 * 31 + 4 * 8 + 200,
                "n={n}: {}",
                ix.memory_bytes()
            );
        }
    }
}
