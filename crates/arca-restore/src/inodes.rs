//! The target's inodes that several entries of the restore reach: a hard link in the target
//! between two files the snapshot keeps apart must be split, even where each file alone could
//! account for its extra names (names its source file had that the restore leaves out); and
//! the further names of inodes that `--delete` removes, which do not count as extra names.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use crate::plan::{EntryKind, Plan};

/// Collected while the scan looks at entries; sealed once it has looked at them all.
#[derive(Debug, Default)]
pub(crate) struct SharedInodes {
    seen: Mutex<Vec<((u64, u64), u32)>>,
    map: OnceLock<HashMap<(u64, u64), Vec<u32>>>,
    /// Entries right in content that were to be replaced only for names their inode has
    /// beyond the restore's, with whether their metadata was right: looked at again once
    /// `--delete`'s deletions are known ([`Self::doom`]).
    split_for_names: Mutex<Vec<(u32, bool)>>,
    /// The names `--delete` removes that are further names of an inode with several.
    doomed: OnceLock<HashMap<(u64, u64), Vec<PathBuf>>>,
    /// Entries whose path holds a file's content (by size and mtime) that the restore may
    /// remove or link over: (entry, file). See [`crate::reuse::local`].
    lenders: Mutex<Vec<(u32, u32)>>,
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

    /// Entry `e`, right in content (`meta_ok`: and metadata), is to be replaced only for the
    /// names its inode has beyond the restore's.
    pub fn note_split_for_names(&self, e: u32, meta_ok: bool) {
        self.split_for_names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((e, meta_ok));
    }

    /// Entry `e`'s path holds the content of the snapshot's file `f` (by size and mtime),
    /// and the restore may remove it or link over it: it can lend its blocks.
    pub fn note_lender(&self, e: u32, f: u32) {
        self.lenders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((e, f));
    }

    /// The entries [`Self::note_lender`] noted.
    pub fn take_lenders(&self) -> Vec<(u32, u32)> {
        std::mem::take(&mut *self.lenders.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The entries [`Self::note_split_for_names`] noted.
    pub fn take_split_for_names(&self) -> Vec<(u32, bool)> {
        std::mem::take(
            &mut *self
                .split_for_names
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// `--delete` removes the names `deleted` (not folders; the files inside the folders it
    /// removes included): those that are names of an inode with several are not names of
    /// their own for [`Self::doomed_names`].
    pub fn doom<'p>(&self, deleted: impl Iterator<Item = &'p std::path::Path>) {
        let mut map: HashMap<(u64, u64), Vec<PathBuf>> = HashMap::new();
        for path in deleted {
            if let Ok(m) = arca_fs::lstat(path)
                && m.nlink() > 1
                && !m.is_dir()
            {
                map.entry((m.dev(), m.ino()))
                    .or_default()
                    .push(path.to_path_buf());
            }
        }
        // A name given twice is one name.
        for paths in map.values_mut() {
            paths.sort_unstable();
            paths.dedup();
        }
        let _ = self.doomed.set(map);
    }

    /// How many names of inode `ino` of device `dev` that `--delete` removes are still there
    /// (none once removed, or before [`Self::doom`]).
    pub fn doomed_names(&self, dev: u64, ino: u64) -> u64 {
        let Some(paths) = self.doomed.get().and_then(|m| m.get(&(dev, ino))) else {
            return 0;
        };
        paths
            .iter()
            .filter(|p| arca_fs::lstat(p).is_ok_and(|m| m.dev() == dev && m.ino() == ino))
            .count() as u64
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
