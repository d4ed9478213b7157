//! Which blobs the repository or this backup already has, shared by the readers and the tree
//! assembler: exactly one of them stores a new blob, however many meet it at once.

use std::collections::HashSet;
use std::sync::Mutex;

use arca_format::{BlobKind, Id};
use arca_repo::Index;

/// Lock shards: readers hashing different files rarely meet on one.
const SHARDS: usize = 16;

/// Capping (FAST'13): the read stream is cut into segments of this many bytes; within one,
/// blocks may reference at most `--cap` packs written before this backup.
pub(crate) const SEGMENT: u64 = 20 << 20;

/// The current capping segment: bytes read into it and the old packs admitted.
#[derive(Debug, Default)]
struct Segment {
    bytes: u64,
    packs: Vec<u32>,
}

/// The loaded index plus the blobs queued by this backup.
pub(crate) struct Known<'a> {
    index: &'a Index,
    /// Blobs claimed by this run, by kind then shard.
    claimed: [Vec<Mutex<HashSet<Id>>>; 2],
    /// Data blobs this run stores again under `--cap`.
    copied: Mutex<HashSet<Id>>,
    /// The capping segment, shared by all readers: one stream, as FAST'13 caps it.
    segment: Mutex<Segment>,
    /// Directory listings whose stored copies could not be read (damaged, their pack gone):
    /// stored again when met, rather than referenced.
    distrusted: HashSet<Id>,
    /// Packs the index names that the repository does not hold: a blob only they hold is
    /// stored again (a backup after a pack was lost referenced the lost data, exit 0).
    gone: HashSet<u32>,
}

impl<'a> Known<'a> {
    /// Knows what `index` holds, except the listings of `distrusted`, whose stored copies
    /// could not be read, and the blobs held only by the `gone` packs: this run stores those
    /// again when it meets them.
    pub(crate) fn new(index: &'a Index, distrusted: HashSet<Id>, gone: HashSet<u32>) -> Self {
        let shards = || (0..SHARDS).map(|_| Mutex::new(HashSet::new())).collect();
        Self {
            index,
            claimed: [shards(), shards()],
            copied: Mutex::new(HashSet::new()),
            segment: Mutex::new(Segment::default()),
            distrusted,
            gone,
        }
    }

    /// Whether the repository holds a copy of the blob that can be used.
    fn stored(&self, kind: BlobKind, id: &Id) -> bool {
        let held = if self.gone.is_empty() {
            self.index.contains(kind, id)
        } else {
            self.index
                .locations(kind, id)
                .any(|l| !self.gone.contains(&l.pack_index))
        };
        held && !(kind == BlobKind::Tree && self.distrusted.contains(id))
    }

    fn shard(&self, kind: BlobKind, id: &Id) -> &Mutex<HashSet<Id>> {
        let byte = id.as_bytes()[0] as usize;
        &self.claimed[kind.code() as usize & 1][byte % SHARDS]
    }

    /// Whether the blob is in the repository or queued by this run.
    pub(crate) fn contains(&self, kind: BlobKind, id: &Id) -> bool {
        self.stored(kind, id)
            || self
                .shard(kind, id)
                .lock()
                .is_ok_and(|set| set.contains(id))
    }

    /// Claims a blob for storing: true for exactly one caller of a blob neither the
    /// repository nor this run has; that caller must queue it.
    pub(crate) fn claim(&self, kind: BlobKind, id: &Id) -> bool {
        if self.stored(kind, id) {
            return false;
        }
        match self.shard(kind, id).lock() {
            Ok(mut set) => set.insert(*id),
            // A panicked holder: store again rather than risk losing the blob.
            Err(poisoned) => poisoned.into_inner().insert(*id),
        }
    }

    /// Counts `len` bytes read into the capping segment; a full segment starts the next.
    pub(crate) fn advance(&self, len: u64) {
        let mut seg = self.segment.lock().unwrap_or_else(|p| p.into_inner());
        seg.bytes += len;
        if seg.bytes >= SEGMENT {
            *seg = Segment::default();
        }
    }

    /// Whether a data blob stored before this run lies beyond the cap: none of its packs is
    /// among the segment's first `cap` old packs, and there is no room to admit one. A blob
    /// stored twice already (an earlier capped run copied it) is never copied again: the
    /// segment admits packs in the order it meets them, so the copy's pack was as often
    /// beyond the cap as the original's, and every run stored the same blocks once more
    /// (the repository grew by the copies on every backup).
    pub(crate) fn beyond_cap(&self, id: &Id, cap: usize) -> bool {
        let mut first = None;
        let mut copies = 0;
        let mut seg = self.segment.lock().unwrap_or_else(|p| p.into_inner());
        for l in self.index.locations(BlobKind::Data, id) {
            if seg.packs.contains(&l.pack_index) {
                return false;
            }
            first.get_or_insert(l.pack_index);
            copies += 1;
        }
        // Not stored before this run: its pack is one of this backup's own.
        let Some(pack) = first else {
            return false;
        };
        if seg.packs.len() < cap {
            seg.packs.push(pack);
            return false;
        }
        copies < 2
    }

    /// Claims storing an already stored data blob once more (`--cap`): true for exactly one
    /// caller per blob and run.
    pub(crate) fn claim_copy(&self, id: &Id) -> bool {
        self.copied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(*id)
    }
}
