//! What the restore loads of a snapshot's directory listings: the selection that decides,
//! path by path, which directories it needs. The listings are loaded in bulk by
//! [`arca_repo::trees::TreeLoader`] (level by level, tree blobs grouped by pack, nearby ones
//! merged into one ranged read, several reads at once), with [`Selection::decide`] as its
//! `keep`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arca_format::{Id, Tree};
use arca_fs::pattern::PathMatcher;

/// The include and exclude patterns (or the one entry restored), and what they make of one
/// path.
pub(crate) struct Selection {
    /// Include patterns, case-sensitive and not (an entry matching any is included).
    pub includes: Vec<PathMatcher>,
    /// Exclude patterns, case-sensitive and not.
    pub excludes: Vec<PathMatcher>,
    /// The entries restored (with what they hold), when some are named.
    pub only: Vec<PathBuf>,
}

impl Selection {
    /// Whether the root is selected as a whole (nothing narrows the restore but excludes).
    pub fn root_selected(&self) -> bool {
        self.includes.is_empty() && self.only.is_empty()
    }

    /// Whether include or exclude patterns (or a single entry) were given (without, every entry belongs and its
    /// path is not looked at).
    pub fn has_patterns(&self) -> bool {
        !self.includes.is_empty() || !self.excludes.is_empty() || !self.only.is_empty()
    }

    /// Whether something below the folder at snapshot path `dir`, selected as a whole, could
    /// still be left out: an exclude pattern, or a `!` include taking something back.
    pub fn may_leave_out_below(&self, dir: &Path) -> bool {
        self.excludes.iter().any(|x| x.may_match_below(dir))
            || self.includes.iter().any(|m| m.takes_back_below(dir))
    }

    /// Whether the entry (a directory when `is_dir`) at snapshot path `path` belongs to the
    /// restore, given whether its parent is selected as a whole: `None` = left out;
    /// `Some(selected)` = kept, and selected as a whole (a directory may be kept only to reach
    /// included entries below).
    pub fn decide(&self, is_dir: bool, path: &Path, parent_selected: bool) -> Option<bool> {
        if let Some(x) = self.excludes.iter().find(|x| x.matches(path)) {
            // A folder that a `!` pattern takes something back from is entered for it.
            return (is_dir && x.takes_back_below(path)).then_some(false);
        }
        if !self.only.is_empty() && !parent_selected {
            if self.only.iter().any(|o| o == path) {
                return Some(true);
            }
            return (is_dir && self.only.iter().any(|o| o.starts_with(path))).then_some(false);
        }
        // Below a selected folder an entry is selected too, unless a `!` include takes it
        // back: then its own match decides (it was selected all the same, so `--include dir
        // --include '!dir/mine'` overwrote `mine`, and `--delete` emptied it).
        let taken_back = || {
            path.parent()
                .is_some_and(|p| self.includes.iter().any(|m| m.takes_back_below(p)))
        };
        let selected = self.includes.is_empty()
            || (parent_selected && !taken_back())
            || self.includes.iter().any(|m| m.matches(path));
        if selected {
            return Some(true);
        }
        (is_dir && self.includes.iter().any(|m| m.may_match_below(path))).then_some(false)
    }
}

/// Directory listings by tree id, as verified plaintext (decoded nodes take three times the
/// memory; the plan decodes each listing again when it walks it); a listing that could not be
/// read holds the reason.
pub(crate) type Trees = arca_repo::trees::Listings;

/// How many times the walk from `root` enters each loaded listing: one per path it lies at.
/// A listing found at two paths (a bind mount backed up twice, two copies of a folder)
/// passes that count on to every listing inside it, so counting its parents' listings, each
/// once, fell short, and the plan dropped a nested listing after its first use: the second
/// path's folders came back empty, exit 0. Counted parents first (Kahn's order); counts
/// saturate, and a listing at more paths than that is simply never dropped.
pub(crate) fn uses(trees: &Trees, root: Id) -> HashMap<Id, u64> {
    // The listings the walk can reach, their subdirectories' listings, and how many
    // references each gets from them.
    let mut kids: HashMap<Id, Vec<Id>> = HashMap::new();
    let mut parents: HashMap<Id, u64> = HashMap::from([(root, 0)]);
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        let mut v = vec![];
        if let Some(Ok(plain)) = trees.get(&id) {
            let _ = Tree::visit(plain, |n| v.extend(n.subtree));
        }
        for &c in &v {
            let n = parents.entry(c).or_insert(0);
            if *n == 0 && c != root {
                todo.push(c);
            }
            *n += 1;
        }
        kids.insert(id, v);
    }
    let mut uses: HashMap<Id, u64> = HashMap::from([(root, 1)]);
    let mut ready = vec![root];
    while let Some(id) = ready.pop() {
        let mine = uses.get(&id).copied().unwrap_or(0);
        for c in kids.remove(&id).unwrap_or_default() {
            let u = uses.entry(c).or_insert(0);
            *u = u.saturating_add(mine);
            if let Some(n) = parents.get_mut(&c) {
                *n -= 1;
                if *n == 0 {
                    ready.push(c);
                }
            }
        }
    }
    uses
}
