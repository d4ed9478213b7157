//! `arca rewrite`: snapshots rewritten without the paths an exclusion predicate selects (the
//! CLI builds it from backup's `--exclude` patterns), or with another host name or time
//! ([`NewMetadata`], restic's `--new-host` and `--new-time`), the originals kept or forgotten.
//!
//! Each chosen snapshot's listings are loaded in bulk ([`arca_repo::trees::TreeLoader`]) and
//! rewritten bottom-up: a dropped entry leaves its listing, a listing that changed is stored as
//! a new tree blob (sealed, packed, uploaded as packs fill), every listing above it changes in
//! turn, and a subtree with nothing to drop keeps its id. Each distinct (tree, path) pair is
//! rewritten once per run, so snapshots sharing subtrees share the work. A snapshot with
//! nothing to drop is left alone.
//!
//! Write order, as every command that adds data: the new packs, one index file naming them,
//! then per snapshot its copy and only then (with `forget`) the deletion of its original, so a
//! crash leaves each original or its rewritten copy, never neither, and both for at most one
//! snapshot; a rerun takes that copy instead of saving another. Call [`rewrite_snapshots`] with
//! the repository locked: shared is enough when nothing is forgotten (only new files are
//! written, as a backup does), exclusive with `forget`.

pub(crate) mod store;
mod walk;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

use arca_backend::FileType;
use arca_format::{Id, IndexFile, NodeKind, Snapshot};
use arca_repo::{Index, RepoError, Repository};
use chrono::{DateTime, FixedOffset};

use walk::Walker;

/// The tag a rewritten snapshot gets when its original is kept (as restic's `rewrite`).
pub const REWRITE_TAG: &str = "rewrite";

/// Decides whether the entry at an absolute snapshot path (`/` being the snapshot's root),
/// a directory or not (the flag), is dropped, with everything below it.
pub type Excluded<'e> = dyn Fn(&Path, bool) -> bool + 'e;

/// New values for fields of the rewritten snapshots (restic's `rewrite --new-host` and
/// `--new-time`); `None` keeps the snapshot's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewMetadata {
    /// The host name to record.
    pub hostname: Option<String>,
    /// The time to record.
    pub time: Option<DateTime<FixedOffset>>,
}

impl NewMetadata {
    /// The new host name, when it differs from the snapshot's.
    pub fn hostname_for(&self, s: &Snapshot) -> Option<&str> {
        self.hostname.as_deref().filter(|h| *h != s.hostname)
    }

    /// The new time, when it differs from the snapshot's (the same instant in another
    /// time zone counts as a change: the zone is recorded too).
    pub fn time_for(&self, s: &Snapshot) -> Option<DateTime<FixedOffset>> {
        self.time.filter(|t| !same_time(t, &s.time))
    }

    /// Whether the snapshot's host name or time would change.
    pub fn changes(&self, s: &Snapshot) -> bool {
        self.hostname_for(s).is_some() || self.time_for(s).is_some()
    }
}

/// Whether two times are the same instant in the same zone (the zone is recorded too).
fn same_time(a: &DateTime<FixedOffset>, b: &DateTime<FixedOffset>) -> bool {
    a == b && a.offset() == b.offset()
}

/// Options of [`rewrite_snapshots`].
#[derive(Debug, Clone, Default)]
pub struct RewriteOptions {
    /// Delete each original once its rewritten copy is saved (no [`REWRITE_TAG`] is added).
    pub forget: bool,
    /// Compute and report; write and delete nothing.
    pub dry_run: bool,
    /// Host name and time to set.
    pub metadata: NewMetadata,
}

/// One entry dropped from a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// Absolute path in the snapshot.
    pub path: PathBuf,
    /// What it was.
    pub kind: NodeKind,
    /// Regular files dropped with it (1 for a file, those below it for a directory).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// A chosen snapshot and what became of it.
#[derive(Debug, Clone)]
pub struct RewrittenSnapshot {
    /// The original snapshot's id.
    pub original: Id,
    /// The rewritten snapshot (saved, or that a dry run would save); `None` when nothing
    /// matched and the snapshot is left alone.
    pub new: Option<Snapshot>,
    /// The saved copy's id (`None` in a dry run or when left alone).
    pub new_id: Option<Id>,
    /// The copy was in the repository already (an earlier run saved it and stopped before
    /// removing the original, or ran without `forget`): it is taken and nothing is saved.
    pub adopted: bool,
    /// What was dropped, in tree order.
    pub removed: Vec<Removed>,
    /// Regular files dropped.
    pub files_removed: u64,
    /// Their bytes.
    pub bytes_removed: u64,
    /// Whether the original was deleted.
    pub forgotten: bool,
    /// Every backed-up path of the snapshot is excluded: it is left as it is (an empty
    /// snapshot that still names its paths would only mislead; `forget` removes it).
    pub emptied: bool,
    /// The host name it had, when the copy records another.
    pub old_hostname: Option<String>,
    /// The time it had, when the copy records another.
    pub old_time: Option<DateTime<FixedOffset>>,
}

/// What [`rewrite_snapshots`] did (or would do, in a dry run).
#[derive(Debug, Default)]
pub struct RewriteReport {
    /// The chosen snapshots, in the order given.
    pub snapshots: Vec<RewrittenSnapshot>,
    /// New tree blobs written (that would be, in a dry run).
    pub trees_written: usize,
    /// New packs written.
    pub packs_written: usize,
    /// The index file naming them.
    pub index_file: Option<Id>,
}

impl RewriteReport {
    /// Snapshots that changed (or would).
    pub fn modified(&self) -> usize {
        self.snapshots.iter().filter(|s| s.new.is_some()).count()
    }
}

/// Why a rewrite stopped. Nothing the user can see changed unless the error says otherwise:
/// packs written before it are unindexed (a later backup adopts them, prune removes them).
#[derive(Debug)]
pub enum RewriteError {
    /// The repository failed.
    Repo(RepoError),
    /// A directory listing of a snapshot cannot be read: the snapshot is not rewritten (run
    /// `check`, then `repair snapshots`).
    Listing {
        /// The snapshot.
        snapshot: Id,
        /// The directory's path in it.
        path: PathBuf,
        /// Its tree id.
        tree: Id,
        /// Why.
        detail: String,
    },
}

impl fmt::Display for RewriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RewriteError::Repo(e) => write!(f, "{e}"),
            RewriteError::Listing {
                snapshot,
                path,
                tree,
                detail,
            } => write!(
                f,
                "snapshot {}: cannot read the listing of {} (tree {}): {detail}; nothing was \
                 rewritten (run `arca check`)",
                snapshot.short(),
                arca_format::text::shown(path),
                tree.short()
            ),
        }
    }
}

impl std::error::Error for RewriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RewriteError::Repo(e) => Some(e),
            RewriteError::Listing { .. } => None,
        }
    }
}

impl From<RepoError> for RewriteError {
    fn from(e: RepoError) -> Self {
        RewriteError::Repo(e)
    }
}

/// Rewrites `snapshots` (id and snapshot, each once) without the entries `excluded` selects
/// (`None`: no tree is read, only the metadata of `opts` changes), using `index` (the
/// repository's loaded index). A snapshot with nothing to drop and no field to change is left
/// alone. See the module documentation for the order of writes and the lock to hold.
pub fn rewrite_snapshots(
    repo: &Repository,
    index: &Index,
    snapshots: &[(Id, Snapshot)],
    excluded: Option<&Excluded<'_>>,
    opts: &RewriteOptions,
) -> Result<RewriteReport, RewriteError> {
    let mut rep = RewriteReport::default();
    let none = |_: &Path, _: bool| false;
    let mut walker = Walker::new(repo, index, excluded.unwrap_or(&none), opts.dry_run);
    for (id, s) in snapshots {
        let mut r = RewrittenSnapshot {
            original: *id,
            new: None,
            new_id: None,
            adopted: false,
            removed: vec![],
            files_removed: 0,
            bytes_removed: 0,
            forgotten: false,
            emptied: false,
            old_hostname: None,
            old_time: None,
        };
        let Some(excluded) = excluded else {
            // Only the metadata changes: the tree stays.
            if opts.metadata.changes(s) {
                r.new = Some(rewritten((*id, s), s.tree, 0, 0, opts));
            }
            rep.snapshots.push(r.with_old_metadata(s));
            continue;
        };
        // Every backed-up path excluded (itself or a folder above it): the snapshot is left as
        // it is, and no tree is written for it (they were, and stayed unused until a prune).
        let dropped = |p: &String| {
            Path::new(p)
                .ancestors()
                .filter(|a| a.parent().is_some())
                .any(|a| excluded(a, true))
        };
        if !s.paths.is_empty() && s.paths.iter().all(dropped) {
            r.emptied = true;
            rep.snapshots.push(r);
            continue;
        }
        let o = walker.rewrite(*id, s.tree)?;
        if o.changed() {
            r.removed = o.removed(Path::new("/"));
            r.files_removed = o.files;
            r.bytes_removed = o.bytes;
            let gone = |p: &String| r.removed.iter().any(|d| Path::new(p).starts_with(&d.path));
            if !s.paths.is_empty() && s.paths.iter().all(gone) {
                r.emptied = true;
            } else {
                r.new = Some(rewritten((*id, s), o.id, o.files, o.bytes, opts));
            }
        } else if opts.metadata.changes(s) {
            r.new = Some(rewritten((*id, s), s.tree, 0, 0, opts));
        }
        rep.snapshots.push(r.with_old_metadata(s));
    }
    walker.out.flush()?;
    rep.trees_written = walker.out.written;
    rep.packs_written = walker.out.packs.len();
    if opts.dry_run {
        return Ok(rep);
    }
    if !walker.out.packs.is_empty() {
        rep.index_file = Some(repo.save_index(&IndexFile {
            supersedes: vec![],
            packs: std::mem::take(&mut walker.out.packs),
        })?);
    }
    // A copy a stopped run saved (its original not yet removed) is taken, not saved again;
    // each original goes right after its copy is saved, so a stop leaves at most one pair.
    let saved = if rep.snapshots.iter().any(|r| r.new.is_some()) {
        repo.list_snapshots_report(&arca_repo::SnapshotFilter::default())?
            .0
    } else {
        vec![]
    };
    for r in &mut rep.snapshots {
        let Some(new) = &r.new else {
            continue;
        };
        r.new_id = Some(match crate::saved_copy(&saved, new) {
            Some(copy) => {
                r.adopted = true;
                copy
            }
            None => repo.save_snapshot_replacing(new, &r.original)?,
        });
        if opts.forget {
            match repo
                .backend()
                .delete(FileType::Snapshot, &r.original.to_hex())
            {
                Ok(()) => r.forgotten = true,
                Err(e) if e.is_not_found() => r.forgotten = true,
                Err(e) => return Err(RepoError::from(e).into()),
            }
        }
    }
    if opts.forget {
        // An original back after a power cut would lack the packs a later prune removes.
        repo.backend().sync_removals().map_err(RepoError::from)?;
    }
    Ok(rep)
}

impl RewrittenSnapshot {
    /// Records the host name and time the original had, where its copy records others.
    fn with_old_metadata(mut self, s: &Snapshot) -> Self {
        if let Some(new) = &self.new {
            self.old_hostname = (new.hostname != s.hostname).then(|| s.hostname.clone());
            self.old_time = (!same_time(&new.time, &s.time)).then_some(s.time);
        }
        self
    }
}

/// The copy of snapshot `id` with root `tree`: same paths and parent, the time and host of
/// `opts.metadata` or its own, and `id` as its original (unless it has one already);
/// [`REWRITE_TAG`] added unless the original is forgotten; the summary's totals less what was
/// dropped (the other counts describe the backup run and stay).
fn rewritten(
    (id, s): (Id, &Snapshot),
    tree: Id,
    files: u64,
    bytes: u64,
    opts: &RewriteOptions,
) -> Snapshot {
    let mut new = s.clone();
    if tree != s.tree {
        new.tree = tree;
        // No longer the tree a copy was made of: its chain starts again at its own tree, so
        // that `copy` does not take it for a copy of the snapshot it was made from (with no
        // `copied_tree`, equal totals did: a rewrite dropping only a symlink).
        new.copied_tree = Some(tree);
    }
    if let Some(h) = opts.metadata.hostname_for(s) {
        new.hostname = h.to_string();
    }
    if let Some(t) = opts.metadata.time_for(s) {
        new.time = t;
    }
    new.original.get_or_insert(id);
    if !opts.forget && !new.tags.iter().any(|t| t == REWRITE_TAG) {
        new.tags.push(REWRITE_TAG.to_string());
    }
    new.summary.total_files_processed = new.summary.total_files_processed.saturating_sub(files);
    new.summary.total_bytes_processed = new.summary.total_bytes_processed.saturating_sub(bytes);
    new
}
