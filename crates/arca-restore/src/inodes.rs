//! The target's inodes that several entries of the restore reach: a hard link in the target
//! between two files the snapshot keeps apart must be split, even where each file alone could
//! account for its extra names (names its source file had that the restore leaves out).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::plan::{EntryKind, Plan};

/// Collected while the scan looks at entries; sealed once it has looked at them all.
#[derive(Debug, Default)]
pub(crate) struct SharedInodes {
    seen: Mutex<Vec<((u64, u64), u32)>>,
    map: OnceLock<HashMap<(u64, u64), Vec<u32>>>,
}

/// The hard-link group of entry `e`: its first entry.
fn group(plan: &Plan, e: u32) -> u32 {
    match plan.entries[e as usize].kind {
        EntryKind::Link(first) => first,
        _ => e,
    }
}

impl SharedInodes {
    /// Entry `e`'s path in the target is inode `ino` of device `dev`, which has several names.
    pub fn note(&self, dev: u64, ino: u64, e: u32) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(((dev, ino), e));
    }

    /// Every entry has been looked at: returns the entries whose inode is also another
    /// group's entry's (to be split).
    pub fn seal(&self, plan: &Plan) -> Vec<u32> {
        let seen = std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()));
        let mut map: HashMap<(u64, u64), Vec<u32>> = HashMap::new();
        for (k, e) in seen {
            map.entry(k).or_default().push(e);
        }
        let mut split = vec![];
        for entries in map.values() {
            let g = group(plan, entries[0]);
            if entries.iter().any(|&e| group(plan, e) != g) {
                split.extend_from_slice(entries);
            }
        }
        let _ = self.map.set(map);
        split
    }

    /// Whether inode `ino` is also an entry's of another group than `e`'s (unknown, false,
    /// before [`Self::seal`]).
    pub fn shared_with_another(&self, plan: &Plan, e: u32, dev: u64, ino: u64) -> bool {
        let g = group(plan, e);
        self.map
            .get()
            .and_then(|m| m.get(&(dev, ino)))
            .is_some_and(|es| es.iter().any(|&o| group(plan, o) != g))
    }
}
