//! Blocks read ahead of their turn, kept in memory until then. The plan knows when every
//! block is next needed, so when room runs out the block needed farthest in the future goes
//! first (Belady's rule, optimal for a known future); it is read again when its turn comes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Decoded blocks by blob, ordered by next use.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    blocks: HashMap<u32, (u32, Arc<[u8]>)>,
    by_next_use: BTreeSet<(u32, u32)>,
    /// Bytes held.
    pub bytes: u64,
    /// Bytes of blocks on their way in (read, not yet decoded).
    pub reserved: u64,
    /// Blocks served from memory.
    pub hits: u64,
    /// Blocks dropped to make room.
    pub evictions: u64,
}

impl Cache {
    /// Holds `data` of blob `b`, next needed at use `next_use`.
    pub fn insert(&mut self, b: u32, next_use: u32, data: Arc<[u8]>) {
        self.bytes += data.len() as u64;
        if let Some((old_next, old)) = self.blocks.insert(b, (next_use, data)) {
            self.bytes -= old.len() as u64;
            self.by_next_use.remove(&(old_next, b));
        }
        self.by_next_use.insert((next_use, b));
    }

    /// Takes blob `b` out for use.
    pub fn take(&mut self, b: u32) -> Option<Arc<[u8]>> {
        let (next, data) = self.blocks.remove(&b)?;
        self.by_next_use.remove(&(next, b));
        self.bytes -= data.len() as u64;
        self.hits += 1;
        Some(data)
    }

    /// The block needed farthest ahead: (next use, blob).
    pub fn farthest(&self) -> Option<(u32, u32)> {
        self.by_next_use.last().copied()
    }

    /// Drops blob `b` (to make room); returns whether it was held.
    pub fn evict(&mut self, b: u32) -> bool {
        match self.blocks.remove(&b) {
            Some((next, data)) => {
                self.by_next_use.remove(&(next, b));
                self.bytes -= data.len() as u64;
                self.evictions += 1;
                true
            }
            None => false,
        }
    }

    /// Bytes held or on their way in.
    pub fn total(&self) -> u64 {
        self.bytes + self.reserved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn farthest_next_use_goes_first() {
        let mut c = Cache::default();
        c.insert(1, 50, Arc::from(vec![0u8; 10]));
        c.insert(2, 20, Arc::from(vec![0u8; 5]));
        c.insert(3, 90, Arc::from(vec![0u8; 7]));
        assert_eq!(c.bytes, 22);
        assert_eq!(c.farthest(), Some((90, 3)));
        assert!(c.evict(3));
        assert_eq!(c.farthest(), Some((50, 1)));
        assert_eq!(c.take(2).map(|d| d.len()), Some(5));
        assert!(c.take(2).is_none());
        assert_eq!((c.bytes, c.hits, c.evictions), (10, 1, 1));
        c.insert(1, 10, Arc::from(vec![0u8; 3]));
        assert_eq!((c.bytes, c.farthest()), (3, Some((10, 1))));
    }
}
