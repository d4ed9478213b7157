//! Which blobs the repository or this backup already has, shared by the readers and the tree
//! assembler: exactly one of them stores a new blob, however many meet it at once.

use std::collections::HashSet;
use std::sync::Mutex;

use arca_format::{BlobKind, Id};
use arca_repo::Index;

/// Lock shards: readers hashing different files rarely meet on one.
const SHARDS: usize = 16;

/// The loaded index plus the blobs queued by this backup.
pub(crate) struct Known<'a> {
    index: &'a Index,
    /// Blobs claimed by this run, by kind then shard.
    claimed: [Vec<Mutex<HashSet<Id>>>; 2],
}

impl<'a> Known<'a> {
    pub(crate) fn new(index: &'a Index) -> Self {
        let shards = || (0..SHARDS).map(|_| Mutex::new(HashSet::new())).collect();
        Self {
            index,
            claimed: [shards(), shards()],
        }
    }

    fn shard(&self, kind: BlobKind, id: &Id) -> &Mutex<HashSet<Id>> {
        let byte = id.as_bytes()[0] as usize;
        &self.claimed[kind.code() as usize & 1][byte % SHARDS]
    }

    /// Whether the blob is in the repository or queued by this run.
    pub(crate) fn contains(&self, kind: BlobKind, id: &Id) -> bool {
        self.index.contains(kind, id)
            || self
                .shard(kind, id)
                .lock()
                .is_ok_and(|set| set.contains(id))
    }

    /// Claims a blob for storing: true for exactly one caller of a blob neither the
    /// repository nor this run has; that caller must queue it.
    pub(crate) fn claim(&self, kind: BlobKind, id: &Id) -> bool {
        if self.index.contains(kind, id) {
            return false;
        }
        match self.shard(kind, id).lock() {
            Ok(mut set) => set.insert(*id),
            // A panicked holder: store again rather than risk losing the blob.
            Err(poisoned) => poisoned.into_inner().insert(*id),
        }
    }
}
