//! Loading a snapshot's directory listings in bulk: level by level, the tree blobs a level
//! needs are grouped by pack, nearby ones merged into one ranged read, and the reads run on
//! several threads, so a remote repository costs a few requests per level, not one per folder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arca_format::{BlobKind, Id, Node, Tree};
use arca_fs::pattern::PathMatcher;
use arca_repo::blob::BlobOpener;
use arca_repo::{Index, Repository};

use crate::fetch::read_with_retry;
use crate::ranges::{Span, coalesce};

/// The include and exclude patterns, and what they make of one path.
pub(crate) struct Selection {
    pub includes: Option<PathMatcher>,
    pub excludes: Option<PathMatcher>,
}

impl Selection {
    /// Whether the entry `node` at snapshot path `path` belongs to the restore, given whether
    /// its parent is selected as a whole: `None` = left out; `Some(selected)` = kept, and
    /// selected as a whole (a directory may be kept only to reach included entries below).
    pub fn decide(&self, node: &Node, path: &Path, parent_selected: bool) -> Option<bool> {
        if self.excludes.as_ref().is_some_and(|x| x.matches(path)) {
            return None;
        }
        let selected = parent_selected || self.includes.as_ref().is_none_or(|m| m.matches(path));
        if selected {
            return Some(true);
        }
        (node.is_dir()
            && self
                .includes
                .as_ref()
                .is_some_and(|m| m.may_match_below(path)))
        .then_some(false)
    }
}

/// Directory listings by tree id, as verified plaintext (decoded nodes take three times the
/// memory; the plan decodes each listing again when it walks it); a listing that could not be
/// read holds the reason.
pub(crate) type Trees = HashMap<Id, Listing>;

/// One listing's verified plaintext, or why it could not be read.
pub(crate) type Listing = Result<Vec<u8>, String>;

/// Loads every listing the restore needs, starting at `root`.
pub(crate) struct TreeLoader<'a> {
    pub repo: &'a Repository,
    pub index: &'a Index,
    pub read_gap: u64,
    pub max_read: u64,
    pub threads: usize,
    pub stop: &'a AtomicBool,
    /// Requests made and bytes read.
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
}

impl TreeLoader<'_> {
    /// Loads the listings below `root` that `sel` keeps, level by level.
    pub fn load(&self, root: Id, sel: &Selection) -> Trees {
        let mut trees = Trees::new();
        let mut level: Vec<(Id, PathBuf, bool)> = vec![(root, PathBuf::from("/"), true)];
        while !level.is_empty() && !self.stop.load(Ordering::Relaxed) {
            let mut want: Vec<Id> = level
                .iter()
                .map(|(id, ..)| *id)
                .filter(|id| !trees.contains_key(id))
                .collect();
            want.sort_unstable();
            want.dedup();
            trees.extend(self.fetch(&want));
            let mut next = vec![];
            for (id, path, selected) in &level {
                let Some(Ok(plain)) = trees.get(id) else {
                    continue;
                };
                let Ok(tree) = Tree::decode(plain) else {
                    continue;
                };
                for node in tree.nodes.iter().filter(|n| n.is_dir()) {
                    let child = path.join(std::ffi::OsStr::from_bytes(&node.name));
                    if let (Some(sel_child), Some(sub)) =
                        (sel.decide(node, &child, *selected), node.subtree)
                    {
                        next.push((sub, child, sel_child));
                    }
                }
            }
            level = next;
        }
        trees
    }

    /// Fetches and decodes the listings `ids`, several ranged reads at once.
    fn fetch(&self, ids: &[Id]) -> Vec<(Id, Listing)> {
        let mut out = vec![];
        let mut spans = vec![];
        for id in ids {
            match self.index.get(BlobKind::Tree, id) {
                Some(loc) => spans.push(Span {
                    pack: loc.pack_index,
                    offset: u64::from(loc.offset),
                    len: u64::from(loc.length),
                    item: (*id, loc.raw_length),
                }),
                None => out.push((*id, Err("not in the index".to_string()))),
            }
        }
        let reads = coalesce(spans, self.read_gap, self.max_read);
        let next = AtomicUsize::new(0);
        let threads = self.threads.clamp(1, reads.len().max(1));
        let loaded: Vec<Vec<(Id, Listing)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut got = vec![];
                        let mut buf = vec![];
                        let mut opener = BlobOpener::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(r) = reads.get(i) else { break };
                            self.read_one(r, &mut buf, &mut opener, &mut got);
                        }
                        got
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        out.extend(loaded.into_iter().flatten());
        out
    }

    fn read_one(
        &self,
        r: &crate::ranges::Read<(Id, u32)>,
        buf: &mut Vec<u8>,
        opener: &mut BlobOpener,
        got: &mut Vec<(Id, Listing)>,
    ) {
        let pack = self.index.packs()[r.pack as usize].id;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let at = match read_with_retry(
            self.repo.backend().as_ref(),
            &pack,
            r.offset,
            r.len,
            buf,
            self.stop,
        ) {
            Ok((at, _)) => at,
            Err(e) => {
                got.extend(r.items.iter().map(|s| (s.item.0, Err(e.to_string()))));
                return;
            }
        };
        self.bytes.fetch_add(r.len, Ordering::Relaxed);
        for s in &r.items {
            let (id, raw_len) = s.item;
            let start = at + (s.offset - r.offset) as usize;
            let Some(sealed) = buf.get_mut(start..start + s.len as usize) else {
                got.push((id, Err("the read came back short".into())));
                continue;
            };
            let res = opener
                .open(
                    self.repo.key(),
                    self.repo.sealer(),
                    BlobKind::Tree,
                    id,
                    pack,
                    sealed,
                    raw_len,
                )
                .map_err(|e| e.to_string())
                .and_then(|plain| {
                    // Checked here so that a bad listing is reported as one.
                    Tree::decode(plain)
                        .map(|_| plain.to_vec())
                        .map_err(|e| format!("tree {id}: {e}"))
                });
            got.push((id, res));
        }
    }
}

use std::os::unix::ffi::OsStrExt;
