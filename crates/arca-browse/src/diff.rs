//! `diff`: what changed between two snapshots (or two folders of them), from the listings
//! alone: entries added, removed, modified, of another type or with other metadata, and the
//! data and tree blobs (and their bytes) added and removed. Listings with equal ids are
//! skipped unread, and no file content is read.
//!
//! Output follows restic's `diff`: `+` added, `-` removed, `M` content modified (`M?` when
//! every other attribute is equal: probable bit rot), `T` type changed, `U` metadata changed
//! (only when asked); folders end with `/`. Beyond restic, a symlink with another target or a
//! device with another number counts as modified, and a folder that became something else (or
//! the reverse) lists its contents as removed (added). Blob counts follow restic too: a blob
//! is added when the changed part of the second side uses it and the changed part of the
//! first does not (listings equal on both sides are not read, so a blob that moved into or
//! out of an unchanged folder still counts).

mod blobs;
#[cfg(test)]
mod tests;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use arca_format::{BlobKind, Id, Node, NodeKind, Tree};
use arca_repo::{Index, RepoError, Repository};

use blobs::BlobSet;

/// Options of a diff.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiffOptions {
    /// Report metadata changes (`U`): mode, owner, mtime, ctime, extended attributes.
    pub metadata: bool,
}

/// Counts of one side of a diff (added or removed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiffStat {
    /// Files.
    pub files: u64,
    /// Folders.
    pub dirs: u64,
    /// Other entries (symlinks, devices, FIFOs, sockets).
    pub others: u64,
    /// Distinct data blobs.
    pub data_blobs: u64,
    /// Distinct tree blobs.
    pub tree_blobs: u64,
    /// Plain bytes of those blobs.
    pub bytes: u64,
}

impl DiffStat {
    fn count(&mut self, n: &Node) {
        match n.kind() {
            NodeKind::File => self.files += 1,
            NodeKind::Dir => self.dirs += 1,
            _ => self.others += 1,
        }
    }
}

/// The summary of a diff.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiffStats {
    /// Files whose content changed (`M`).
    pub changed_files: u64,
    /// What the second side adds.
    pub added: DiffStat,
    /// What the first side had and the second lacks.
    pub removed: DiffStat,
}

/// One changed entry.
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    /// Absolute path (bytes), ending with `/` for a folder.
    pub path: &'a [u8],
    /// `+`, `-`, or letters among `T`, `M`, `?`, `U`.
    pub modifier: &'a str,
}

/// Receives the changes in name order (depth first); an error stops the diff.
pub type ChangeSink<'s> = dyn FnMut(&Change<'_>) -> std::io::Result<()> + 's;

/// A diff failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiffError {
    /// The repository failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// A listing could not be read.
    #[error("cannot read the listing of {path}{} (tree {id}): {source}", in_snapshot(*.side))]
    Listing {
        /// Its tree id.
        id: Id,
        /// Where it is (odd bytes escaped).
        path: String,
        /// Which of the two snapshots it is in, when known (a listing both have is read for
        /// the first).
        side: Option<DiffSide>,
        /// Why.
        source: Box<RepoError>,
    },
    /// A path to look up is not usable.
    #[error("invalid path {0:?}: `..` is not allowed")]
    BadPath(String),
    /// Writing the changes failed.
    #[error("writing the changes: {0}")]
    Output(#[from] std::io::Error),
}

/// A folder node standing for a snapshot's root listing `tree`.
pub fn root_node(tree: Id) -> Node {
    Node {
        kind: Some(NodeKind::Dir),
        mode: 0o755,
        subtree: Some(tree),
        ..Node::default()
    }
}

/// The entry at `path` (bytes, `/`-separated, relative to `start`; empty or `/` is `start`
/// itself) below the folder node `start`; `None` if there is none.
pub fn find_node(
    repo: &Repository,
    index: &Index,
    start: &Node,
    path: &[u8],
) -> Result<Option<Node>, DiffError> {
    let mut here = start.clone();
    let mut walked = Vec::new();
    for name in path
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
    {
        if name == b".." {
            return Err(DiffError::BadPath(
                String::from_utf8_lossy(path).into_owned(),
            ));
        }
        let Some(sub) = here.subtree.filter(|_| here.is_dir()) else {
            return Ok(None);
        };
        let t = load(repo, index, sub, &walked, None)?;
        let Some(n) = t.find(name) else {
            return Ok(None);
        };
        walked.push(b'/');
        walked.extend_from_slice(name);
        here = n.clone();
    }
    Ok(Some(here))
}

/// The two snapshots a diff compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffSide {
    /// The first one given (what `-` lines were in).
    First,
    /// The second one (what `+` lines are in).
    Second,
}

fn in_snapshot(side: Option<DiffSide>) -> &'static str {
    match side {
        Some(DiffSide::First) => " in the first snapshot",
        Some(DiffSide::Second) => " in the second snapshot",
        None => "",
    }
}

fn load(
    repo: &Repository,
    index: &Index,
    id: Id,
    path: &[u8],
    side: Option<DiffSide>,
) -> Result<Tree, DiffError> {
    repo.load_tree(index, &id)
        .map_err(|source| DiffError::Listing {
            id,
            path: match path {
                [] => "/".into(),
                p => arca_format::text::shown(Path::new(OsStr::from_bytes(p))).into_owned(),
            },
            side,
            source: Box::new(source),
        })
}

/// Compares entry `a` (first side) with `b` (second side) found at `path` (`/` for two
/// snapshot roots, whose own difference is not reported), everything below them included,
/// handing each change to `sink`; returns the summary.
pub fn diff(
    repo: &Repository,
    index: &Index,
    a: Option<&Node>,
    b: Option<&Node>,
    path: &[u8],
    opts: DiffOptions,
    sink: &mut ChangeSink<'_>,
) -> Result<DiffStats, DiffError> {
    let mut d = Differ {
        repo,
        index,
        opts,
        before: BlobSet::new(index),
        after: BlobSet::new(index),
        stats: DiffStats::default(),
        sink,
    };
    let top = path.is_empty() || path == b"/";
    d.pair(a, b, if top { b"/" } else { path }, top)?;
    let mut stats = d.stats;
    d.before
        .count_missing_from(&d.after, index, &mut stats.removed);
    d.after
        .count_missing_from(&d.before, index, &mut stats.added);
    Ok(stats)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Removed,
    Added,
}

impl Side {
    /// The snapshot that has what this side lists.
    fn snapshot(self) -> DiffSide {
        match self {
            Side::Removed => DiffSide::First,
            Side::Added => DiffSide::Second,
        }
    }
}

struct Differ<'a, 's> {
    repo: &'a Repository,
    index: &'a Index,
    opts: DiffOptions,
    before: BlobSet,
    after: BlobSet,
    stats: DiffStats,
    sink: &'a mut ChangeSink<'s>,
}

/// `path` with a `/` appended for a folder.
fn shown(path: &[u8], dir: bool) -> Vec<u8> {
    let mut p = path.to_vec();
    if dir && !p.ends_with(b"/") {
        p.push(b'/');
    }
    p
}

/// `folder` (ending with `/`) joined with `name`.
fn join(folder: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(folder.len() + name.len() + 1);
    p.extend_from_slice(folder);
    if !p.ends_with(b"/") {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// Mode, owner, modification and change times and extended attributes are equal. The access
/// time is left out: reading an entry changes it, and backups themselves read symlinks and
/// folders, so it would mark most of them.
fn same_metadata(a: &Node, b: &Node) -> bool {
    a.mode == b.mode
        && a.uid == b.uid
        && a.gid == b.gid
        && a.user == b.user
        && a.group == b.group
        && a.mtime == b.mtime
        && a.ctime == b.ctime
        && a.xattrs == b.xattrs
}

/// Everything but the content list is equal.
fn same_except_content(a: &Node, b: &Node) -> bool {
    same_metadata(a, b)
        && a.kind == b.kind
        && a.size == b.size
        && a.dev == b.dev
        && a.inode == b.inode
        && a.nlink == b.nlink
        && a.rdev == b.rdev
        && a.link_target == b.link_target
}

impl Differ<'_, '_> {
    fn emit(&mut self, path: &[u8], modifier: &str) -> Result<(), DiffError> {
        (self.sink)(&Change { path, modifier })?;
        Ok(())
    }

    /// Adds the blobs `n` refers to (its content, or its listing) to one side's set.
    fn add_blobs(&mut self, side: Side, n: &Node) {
        let set = match side {
            Side::Removed => &mut self.before,
            Side::Added => &mut self.after,
        };
        match n.kind() {
            NodeKind::File => {
                for c in &n.content {
                    set.insert(self.index, BlobKind::Data, &c.id, u64::from(c.len));
                }
            }
            NodeKind::Dir => {
                if let Some(s) = &n.subtree {
                    set.insert(self.index, BlobKind::Tree, s, 0);
                }
            }
            _ => {}
        }
    }

    fn pair(
        &mut self,
        a: Option<&Node>,
        b: Option<&Node>,
        path: &[u8],
        top: bool,
    ) -> Result<(), DiffError> {
        if let Some(a) = a {
            self.add_blobs(Side::Removed, a);
        }
        if let Some(b) = b {
            self.add_blobs(Side::Added, b);
        }
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (Some(a), None) => return self.one(Side::Removed, a, path),
            (None, Some(b)) => return self.one(Side::Added, b, path),
            (None, None) => return Ok(()),
        };
        let here = shown(path, b.is_dir());
        let mut m = String::new();
        if a.kind() != b.kind() {
            m.push('T');
        }
        if a.kind() == NodeKind::File && b.kind() == NodeKind::File && a.content != b.content {
            m.push('M');
            self.stats.changed_files += 1;
            if same_except_content(a, b) {
                m.push('?');
            }
        } else if a.kind() == b.kind() && (a.link_target != b.link_target || a.rdev != b.rdev) {
            m.push('M');
        } else if self.opts.metadata && !same_metadata(a, b) {
            m.push('U');
        }
        if !m.is_empty() && !top {
            self.emit(&here, &m)?;
        }
        match (a.is_dir(), b.is_dir()) {
            (true, true) => match (a.subtree, b.subtree) {
                (Some(x), Some(y)) if x != y => self.both(x, y, &here),
                _ => Ok(()),
            },
            (true, false) => self.all(Side::Removed, a.subtree, &shown(path, true)),
            (false, true) => self.all(Side::Added, b.subtree, &here),
            (false, false) => Ok(()),
        }
    }

    /// An entry only one side has (its blobs already counted), and all below it.
    fn one(&mut self, side: Side, n: &Node, path: &[u8]) -> Result<(), DiffError> {
        let here = shown(path, n.is_dir());
        self.emit(
            &here,
            match side {
                Side::Removed => "-",
                Side::Added => "+",
            },
        )?;
        match side {
            Side::Removed => self.stats.removed.count(n),
            Side::Added => self.stats.added.count(n),
        }
        if n.is_dir() {
            self.all(side, n.subtree, &here)?;
        }
        Ok(())
    }

    /// Everything in the listing `tree` of folder `folder`, which only one side has.
    fn all(&mut self, side: Side, tree: Option<Id>, folder: &[u8]) -> Result<(), DiffError> {
        let Some(id) = tree else { return Ok(()) };
        let t = load(self.repo, self.index, id, folder, Some(side.snapshot()))?;
        for n in &t.nodes {
            self.add_blobs(side, n);
            self.one(side, n, &join(folder, &n.name))?;
        }
        Ok(())
    }

    /// Two different listings of the folder `folder`, entry by entry in name order.
    fn both(&mut self, x: Id, y: Id, folder: &[u8]) -> Result<(), DiffError> {
        let ta = load(self.repo, self.index, x, folder, Some(DiffSide::First))?;
        let tb = load(self.repo, self.index, y, folder, Some(DiffSide::Second))?;
        let (mut i, mut j) = (0, 0);
        while i < ta.nodes.len() || j < tb.nodes.len() {
            let (a, b) = match (ta.nodes.get(i), tb.nodes.get(j)) {
                (Some(a), Some(b)) => match a.name.cmp(&b.name) {
                    std::cmp::Ordering::Less => (Some(a), None),
                    std::cmp::Ordering::Greater => (None, Some(b)),
                    std::cmp::Ordering::Equal => (Some(a), Some(b)),
                },
                (a, b) => (a, b),
            };
            if a.is_some() {
                i += 1;
            }
            if b.is_some() {
                j += 1;
            }
            let name = a.or(b).map(|n| n.name.as_slice()).unwrap_or_default();
            self.pair(a, b, &join(folder, name), false)?;
        }
        Ok(())
    }
}
