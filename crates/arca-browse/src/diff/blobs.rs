//! The blobs one side of a diff refers to, as a bitmap over the index's positions (one bit
//! per blob location, whatever the number of files), plus the few blobs the index lacks.

use std::collections::HashMap;

use arca_format::{BlobKind, Id};
use arca_repo::Index;

use super::DiffStat;

/// A set of blobs.
#[derive(Debug)]
pub(crate) struct BlobSet {
    bits: Vec<u64>,
    /// Blobs not in the index, with their plain length as the trees give it.
    missing: HashMap<(BlobKind, Id), u64>,
}

impl BlobSet {
    pub(crate) fn new(index: &Index) -> Self {
        Self {
            bits: vec![0; index.len().div_ceil(64)],
            missing: HashMap::new(),
        }
    }

    /// Adds blob `id` of `kind` (`len`: its plain length if the index does not know it).
    pub(crate) fn insert(&mut self, index: &Index, kind: BlobKind, id: &Id, len: u64) {
        match index.positions(kind, id).next() {
            Some((pos, _)) => self.bits[pos / 64] |= 1 << (pos % 64),
            None => {
                self.missing.insert((kind, *id), len);
            }
        }
    }

    /// Counts the blobs of `self` that `other` lacks into `stat` (count and plain bytes).
    pub(crate) fn count_missing_from(&self, other: &BlobSet, index: &Index, stat: &mut DiffStat) {
        let mut add = |kind: BlobKind, len: u64| {
            match kind {
                BlobKind::Data => stat.data_blobs += 1,
                BlobKind::Tree => stat.tree_blobs += 1,
            }
            stat.bytes += len;
        };
        for (w, (mine, theirs)) in self.bits.iter().zip(&other.bits).enumerate() {
            let mut only = mine & !theirs;
            while only != 0 {
                let bit = only.trailing_zeros() as usize;
                only &= only - 1;
                if let Some((_, loc)) = index.at(w * 64 + bit) {
                    add(loc.pack.kind, u64::from(loc.raw_length));
                }
            }
        }
        for ((kind, id), len) in &self.missing {
            if !other.missing.contains_key(&(*kind, *id)) {
                add(*kind, *len);
            }
        }
    }
}
