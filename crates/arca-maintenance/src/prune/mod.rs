//! `prune`: removing the data no snapshot uses.
//!
//! **Planning** ([`plan`]) changes nothing. It lists the packs, walks the trees of every
//! snapshot level by level (the tree blobs of a level grouped by pack and read in merged
//! ranges, on a few threads) and marks every blob they reach in a bitmap over the index's
//! locations ([`arca_repo::Index::positions`]): one bit per location next to the index's 32
//! bytes. A blob stored several times keeps one marked copy, the one in the pack with the
//! largest used share. Then, per pack: the used and unused blobs and bytes, and a decision:
//!
//! * **delete** a pack none of whose blobs is used (or one whose size differs from the index:
//!   damaged, and not needed, or the walk would have stopped);
//! * **repack** packs with used and unused blobs, the largest unused share first, until the
//!   unused bytes left are at most `max_unused`: a size, or a percentage of the repository
//!   after prune (restic's `--max-unused`: P % allows P / (100 - P) of the used bytes). The
//!   emptiest packs free the most per byte copied; with `repack_small`, packs below 80 % of
//!   the target pack size (at least two of a kind, or with other packs of that kind being
//!   repacked); repacking stops at `max_repack_bytes` of packs;
//! * **keep** the others; packs an index names but the backend lacks are dropped from the
//!   index; packs no index names are deleted (the exclusive lock keeps backups away, so none
//!   of them belongs to a backup in progress), except those an earlier prune that stopped
//!   while repacking wrote: a pack no index names whose header opens, whose bytes are whole
//!   and all of whose blobs are used blobs the repack needs (and no other adopted pack holds)
//!   is **adopted**: named by the new index, its blobs not copied again (see `adopt`).
//!
//! A blob a snapshot uses that is not indexed (or only in missing or damaged packs), a tree or
//! snapshot that cannot be read: planning fails and nothing is deleted.
//!
//! **Executing** ([`execute`]) goes in the order that keeps every snapshot readable whenever
//! it stops:
//!
//! 0. the unreferenced packs are deleted (no snapshot needs them, and their space may be
//!    what repacking needs), but for the adopted ones. With packs adopted, an index naming
//!    them (and every pack still needed) is written first, the old index files deleted, and
//!    the packs to delete and the repacked packs whose used blobs the adopted packs all hold
//!    deleted: a rerun of a prune stopped by a full disk frees space before it writes;
//! 1. the used blobs of the packs to repack are read (merged ranged reads), verified and
//!    copied, still sealed, into new packs (tree and data blobs apart), which are uploaded;
//! 2. new index files are written naming the new packs, then every kept pack (up to
//!    [`INDEX_BLOBS`] blobs per file, fewer when a file does not fit); each old index file
//!    is deleted as soon as the files written name every kept pack it names (those naming
//!    none first), and the file that completes it lists it as superseded: the rewrite needs
//!    room for one index file, not for the whole index, so a prune on a nearly full disk
//!    frees space;
//! 3. the old index files left are deleted;
//! 4. the packs to delete and the repacked packs are deleted;
//! 5. temporary files (`.tmp-*`) older than an hour are removed.
//!
//! Stopped after 1, the new packs are unreferenced (the next prune adopts them); during 2 or
//! 3, old and new index files both name live packs (blobs may be listed twice, which the index
//! allows); during 4, the packs left are unreferenced. A second prune finishes the job.
//!
//! **Memory**: the index (32 bytes per location) and one bit per location, a few dozen bytes
//! per pack, the trees of one level of the walk (48 bytes each), 24 bytes per used blob of the
//! packs being repacked, and a few packs of blobs in flight while repacking. Planning is linear
//! in the index: over a synthetic index of 10 million blobs, marking (one lookup per used
//! blob) takes about 3 s and deciding about 2 s (release build).

mod adopt;
mod decide;
mod execute;
mod packer;
mod walk;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexPack};
use arca_repo::{Index, RepoError, Repository};

pub use execute::{execute, stale_temp_files};

/// Blobs per index file written by prune (about 4 MiB of entries).
pub const INDEX_BLOBS: usize = 100_000;

/// How much unused space is tolerated before packs are repacked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxUnused {
    /// Packs are repacked, largest unused share first, until unused bytes take at most this
    /// percentage of the repository (as restic's `--max-unused P%`); 100 is unlimited.
    Percent(f64),
    /// Packs are repacked, largest unused share first, until at most this many unused bytes
    /// are left in the repository.
    Bytes(u64),
    /// Only packs without any used blob are deleted; nothing is repacked.
    Unlimited,
}

impl Default for MaxUnused {
    fn default() -> Self {
        MaxUnused::Percent(5.0)
    }
}

/// What prune does.
#[derive(Debug, Clone, Default)]
pub struct PruneOptions {
    /// Unused space tolerated (default 5 % of the repository).
    pub max_unused: MaxUnused,
    /// At most this many bytes of packs are repacked (`None`: no limit).
    pub max_repack_bytes: Option<u64>,
    /// Also repack packs smaller than 80 % of the target pack size.
    pub repack_small: bool,
    /// Ranged reads in flight (0: chosen for the backend).
    pub threads: usize,
    /// Delete every pack when there is no snapshot at all (refused otherwise: a snapshots
    /// folder lost or emptied by a copy or sync tool looks just like that).
    pub allow_remove_all: bool,
    /// Snapshots counted as gone (`forget --prune --dry-run`: those the forget would
    /// remove). Only a plan may ignore snapshots: [`execute`] refuses such a plan.
    pub ignore_snapshots: Vec<Id>,
}

/// What happens to one indexed pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackAction {
    /// Stays, named by the new index.
    Keep,
    /// Its used blobs are copied into new packs, then it is deleted.
    Repack,
    /// Deleted: no blob of it is used (or it is damaged and not needed).
    Delete,
    /// Named by the index but absent from the backend: left out of the new index.
    Forget,
}

/// One indexed pack and what prune does with it.
#[derive(Debug, Clone)]
pub struct PackPlan {
    /// Pack id.
    pub id: Id,
    /// Kind of its blobs.
    pub kind: BlobKind,
    /// Size from the index.
    pub size: u64,
    /// Blobs used by some snapshot (one copy of each blob counts).
    pub used_blobs: u32,
    /// Blobs no snapshot uses (and extra copies).
    pub unused_blobs: u32,
    /// Sealed bytes of the used blobs.
    pub used_bytes: u64,
    /// Sealed bytes of the unused blobs.
    pub unused_bytes: u64,
    /// The decision.
    pub action: PackAction,
}

/// A number of packs and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// Packs.
    pub packs: u64,
    /// Their size in bytes.
    pub bytes: u64,
}

impl Count {
    fn add(&mut self, bytes: u64) {
        self.packs += 1;
        self.bytes += bytes;
    }
}

/// The plan in numbers.
#[derive(Debug, Clone, Default)]
pub struct PlanStats {
    /// Snapshots walked.
    pub snapshots: usize,
    /// Distinct trees walked.
    pub trees: u64,
    /// Distinct blobs used by snapshots.
    pub used_blobs: u64,
    /// Their sealed bytes.
    pub used_bytes: u64,
    /// Blobs no snapshot uses, extra copies included.
    pub unused_blobs: u64,
    /// Their sealed bytes.
    pub unused_bytes: u64,
    /// Extra copies of used blobs (counted as unused).
    pub duplicate_blobs: u64,
    /// Packs kept.
    pub keep: Count,
    /// Packs repacked.
    pub repack: Count,
    /// Used bytes copied out of the repacked packs.
    pub repack_used_bytes: u64,
    /// Blobs copied out of the repacked packs.
    pub repack_blobs: u64,
    /// Packs deleted because no blob of theirs is used.
    pub delete: Count,
    /// Of those, packs whose size differs from the index (damaged).
    pub damaged: Count,
    /// Packs in the backend that no index names, deleted.
    pub unreferenced: Count,
    /// Packs no index names that an earlier, stopped prune wrote, adopted: indexed, their
    /// blobs not repacked again.
    pub adopted: Count,
    /// Blobs they hold.
    pub adopted_blobs: u64,
    /// Packs the index names that the backend lacks, dropped from the index.
    pub missing: Count,
    /// Index files now.
    pub index_files: usize,
    /// Bytes freed, about (deleted packs minus the new packs' size).
    pub freed_bytes: u64,
}

/// What [`execute`] will do, decided by [`plan`].
#[derive(Debug, Clone, Default)]
pub struct PrunePlan {
    /// Every indexed pack (in index order) with its decision.
    pub packs: Vec<PackPlan>,
    /// Packs no index names (id, size): deleted.
    pub unreferenced: Vec<(Id, u64)>,
    /// Packs no index names that hold blobs the repack needs, as their headers list them:
    /// named by the new index instead of deleted (see the module documentation).
    pub adopted: Vec<IndexPack>,
    /// The index files read; replaced by new ones when [`PrunePlan::rewrite_index`].
    pub index_files: Vec<Id>,
    /// Whether the index is rewritten (packs go away, or the index is spread over more files
    /// than needed).
    pub rewrite_index: bool,
    /// The plan in numbers.
    pub stats: PlanStats,
    /// Planned as if some snapshots were gone ([`PruneOptions::ignore_snapshots`]): a
    /// preview, never executed.
    pub preview: bool,
    /// The used blobs of the packs to repack, by pack position and offset.
    keep: Vec<KeepBlob>,
    /// Kept copies of blobs stored more than once whose other copy goes away, by pack
    /// position and offset: verified before anything is written.
    sole_copies: Vec<SoleCopy>,
    /// Kept copies of used blobs that packs no index names hold too (`other`: position in
    /// [`PrunePlan::unreferenced`]): verified before those packs are deleted.
    orphan_copies: Vec<SoleCopy>,
}

impl PrunePlan {
    /// Whether executing the plan changes nothing in the repository (but for stale temporary
    /// files).
    pub fn is_empty(&self) -> bool {
        !self.rewrite_index && self.unreferenced.is_empty()
    }
}

/// A used blob in a pack to repack: where it is and its id prefix (checked against the
/// pack's own header before it is copied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct KeepBlob {
    pack: u32,
    offset: u32,
    key: [u8; 16],
}

/// The copy of a used blob that prune keeps while it drops another copy (in pack position
/// `other`): where it is and its id prefix. Chosen from the index alone, it is read and
/// authenticated first: a damaged kept copy would make the other, deleted, copy the only
/// intact one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SoleCopy {
    pack: u32,
    offset: u32,
    key: [u8; 16],
    other: u32,
}

/// What [`execute`] did.
#[derive(Debug, Clone, Default)]
pub struct PruneReport {
    /// New packs written (repacked blobs).
    pub packs_written: u64,
    /// Their bytes.
    pub bytes_written: u64,
    /// Blobs copied into them.
    pub blobs_repacked: u64,
    /// New index files (first, when packs were adopted and more was repacked after, the
    /// ones written before the repack and deleted at its end).
    pub index_files_written: Vec<Id>,
    /// Old index files deleted.
    pub index_files_deleted: u64,
    /// Packs deleted.
    pub packs_deleted: u64,
    /// Their bytes.
    pub bytes_deleted: u64,
    /// Stale temporary files removed.
    pub temp_files_removed: u64,
    /// Packs written by an earlier, stopped prune that were adopted (indexed).
    pub packs_adopted: u64,
    /// Their bytes.
    pub bytes_adopted: u64,
}

impl PruneReport {
    /// Bytes freed: deleted packs minus new packs.
    pub fn freed_bytes(&self) -> u64 {
        self.bytes_deleted.saturating_sub(self.bytes_written)
    }
}

/// Why prune could not read a tree ([`PruneError::UnreadableTree`]), for the advice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeFault {
    /// Its copy in this pack is damaged (or does not decode): `repair packs` salvages the
    /// rest of the pack.
    Damaged {
        /// The pack holding it.
        pack: Id,
    },
    /// The pack holding it is gone.
    Missing,
    /// It could not be read (access denied, an outage): nothing is known to be damaged.
    Unreadable,
    /// It was made by a newer arca: intact, but this one cannot tell what it uses.
    Newer,
}

/// Why prune stopped. Nothing an index names was deleted unless the step that failed came
/// after the new index was written (see the module documentation); the packs no index
/// names go first.
#[derive(Debug)]
#[non_exhaustive]
pub enum PruneError {
    /// A repository operation failed.
    Repo(Box<RepoError>),
    /// Snapshots use blobs that are not indexed, or only in missing or damaged packs.
    MissingBlobs {
        /// Tree blobs missing.
        trees: u64,
        /// Data blobs missing.
        data: u64,
        /// A few of them.
        examples: Vec<(BlobKind, Id)>,
    },
    /// A tree of a snapshot could not be read, so what it references is unknown.
    UnreadableTree {
        /// Tree id.
        id: Id,
        /// Why, naming neither the tree nor, when damaged, its pack.
        error: String,
        /// Whether the tree is damaged or could not be read at all.
        fault: TreeFault,
    },
    /// A snapshot could not be read.
    UnreadableSnapshot {
        /// Snapshot id.
        id: Id,
        /// Why.
        error: Box<RepoError>,
    },
    /// A pack to repack does not hold what the index says, or a used blob in it is damaged.
    BadPack {
        /// Pack id.
        id: Id,
        /// What is wrong.
        error: String,
        /// Whether its bytes are damaged (else its header and the index disagree).
        damaged: bool,
    },
    /// The copy prune keeps of a blob stored twice is damaged, and the other copy would go.
    DamagedCopy {
        /// The pack holding the damaged copy.
        pack: Id,
        /// The blob.
        blob: Id,
        /// The pack holding the other copy.
        other: Id,
        /// Whether an index names that pack (else `repair index` must index it first).
        other_indexed: bool,
        /// What is wrong with it ("damaged: …", "unreadable: …").
        error: String,
    },
    /// The repository changed between planning and executing.
    Changed(String),
    /// Stopped on request ([`Progress::cancel`]) at a point where nothing is lost: what was
    /// written is left for the next prune, nothing more is deleted.
    Cancelled,
    /// An index file is damaged: the packs it lists would look unused.
    DamagedIndex {
        /// The index file.
        id: Id,
        /// Why it cannot be read.
        why: String,
    },
    /// An index file was made by a newer arca: this build cannot know which packs it lists.
    NewerIndex {
        /// The index file.
        id: Id,
        /// What the file says of its version.
        why: String,
    },
    /// No snapshot at all, while packs hold data: every pack would go.
    NoSnapshots {
        /// Packs the index names.
        packs: usize,
        /// Their bytes.
        bytes: u64,
    },
}

impl fmt::Display for PruneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NOTHING: &str = "nothing was deleted";
        // Repacking comes after the packs no index names are deleted.
        const NOTHING_INDEXED: &str = "nothing an index names was deleted";
        match self {
            PruneError::Repo(e) => e.fmt(f),
            PruneError::MissingBlobs {
                trees,
                data,
                examples,
            } => {
                let n = trees + data;
                write!(
                    f,
                    "snapshots use {n} {} that {} not in the index or whose packs are \
                     missing or damaged ({trees} trees, {data} data blobs",
                    if n == 1 { "blob" } else { "blobs" },
                    if n == 1 { "is" } else { "are" }
                )?;
                if let Some((kind, id)) = examples.first() {
                    write!(f, "; first: {kind} blob {id}")?;
                }
                write!(
                    f,
                    "); {NOTHING}. Run `arca check` to see what is affected and the repairs to \
                     run, in this order: `arca repair index` for blobs in packs no index names, \
                     `arca repair packs ID` for damaged packs, packs of the wrong size and \
                     packs in no index whose header is damaged (it keeps the blobs that \
                     verify), then `arca repair snapshots --forget` for \
                     what is lost"
                )
            }
            PruneError::UnreadableTree {
                id,
                error,
                fault: TreeFault::Damaged { pack },
            } => write!(
                f,
                "tree {id} in pack {pack} is {error}, so the data it uses is unknown; \
                 {NOTHING}. Run `arca repair packs {}` (it keeps the blobs that verify), then \
                 `arca repair snapshots --forget` for what is lost",
                pack.short()
            ),
            PruneError::UnreadableTree {
                id,
                error,
                fault: TreeFault::Missing,
            } => write!(
                f,
                "tree {id} cannot be read ({error}), so the data it uses is unknown; \
                 {NOTHING}. Run `arca check` to see what is affected and the repairs to run"
            ),
            // Not damage: the tree may well be whole.
            PruneError::UnreadableTree {
                id,
                error,
                fault: TreeFault::Unreadable,
            } => write!(
                f,
                "tree {id} cannot be read ({error}), so the data it uses is unknown; \
                 {NOTHING}. Make the repository readable (the file's permissions, the \
                 connection) and run prune again"
            ),
            PruneError::UnreadableTree {
                id,
                error,
                fault: TreeFault::Newer,
            } => write!(
                f,
                "tree {id} cannot be read ({error}), so the data it uses is unknown; \
                 {NOTHING}. Prune this repository with the newer arca"
            ),
            PruneError::UnreadableSnapshot { error, .. } if error.is_newer_format() => write!(
                f,
                "{error}: the data it uses is unknown; {NOTHING}. Prune this repository with \
                 the newer arca"
            ),
            // The error names the snapshot file already.
            PruneError::UnreadableSnapshot { id, error } if error.is_corruption() => write!(
                f,
                "{error}: the data it uses is unknown; {NOTHING}. Remove the damaged snapshot \
                 with `arca forget {}` (or every damaged one with `arca repair snapshots \
                 --forget`)",
                id.short()
            ),
            PruneError::UnreadableSnapshot { error, .. } => write!(f, "{error}; {NOTHING}"),
            PruneError::BadPack {
                id,
                error,
                damaged: true,
            } => write!(
                f,
                "pack {id} cannot be repacked: {error}; {NOTHING_INDEXED}. Run `arca repair packs {}` \
                 (it keeps the blobs that verify), then prune again",
                id.short()
            ),
            PruneError::BadPack { id, error, .. } => write!(
                f,
                "pack {id} cannot be repacked: {error}; {NOTHING_INDEXED}. Run `arca repair index \
                 --read-all-packs` (it indexes the pack as its header says), then prune again"
            ),
            PruneError::DamagedCopy {
                pack,
                blob,
                other,
                error,
                other_indexed: false,
            } => write!(
                f,
                "blob {blob} is stored twice: its indexed copy, in pack {}, is {error}, and \
                 the other is in pack {}, which no index names and prune would delete; \
                 {NOTHING}. Run `arca repair index` (it indexes pack {}), then `arca repair \
                 packs {}` (it keeps the blobs that verify), then prune again",
                pack.short(),
                other.short(),
                other.short(),
                pack.short()
            ),
            PruneError::DamagedCopy {
                pack,
                blob,
                other,
                error,
                ..
            } => write!(
                f,
                "blob {blob} is stored twice: the copy prune would keep, in pack {}, is \
                 {error}, and the other, in pack {}, would be deleted; {NOTHING}. Run `arca \
                 repair packs {}` (it keeps the blobs that verify), then prune again",
                pack.short(),
                other.short(),
                pack.short()
            ),
            PruneError::Changed(what) => write!(
                f,
                "the repository changed while prune ran ({what}); {NOTHING_INDEXED}. Run prune again"
            ),
            PruneError::NoSnapshots { packs, bytes } => write!(
                f,
                "the repository has no snapshot, yet {packs} pack(s) of {bytes} bytes hold data: \
                 prune would delete them all. A snapshots folder lost or emptied (by a copy or \
                 sync tool, or a listing that failed) looks like this: check it first. To \
                 delete all data, run prune with --unsafe-allow-remove-all; {NOTHING}"
            ),
            PruneError::Cancelled => write!(
                f,
                "prune cancelled before it deleted anything more; the next prune tidies what \
                 it wrote"
            ),
            PruneError::DamagedIndex { id, why } => write!(
                f,
                "index file {} is damaged ({why}); prune changed nothing: run `arca repair \
                 index` first",
                &id.to_hex()[..10]
            ),
            // Not damage: `repair index` leaves such a file alone, and sending the user
            // there made a loop (hunt 30).
            PruneError::NewerIndex { id, why } => write!(
                f,
                "index file {} cannot be read ({why}), so the packs it lists are unknown; \
                 {NOTHING}. Prune this repository with the newer arca",
                &id.to_hex()[..10]
            ),
        }
    }
}

impl std::error::Error for PruneError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PruneError::Repo(e) | PruneError::UnreadableSnapshot { error: e, .. } => Some(&**e),
            _ => None,
        }
    }
}

impl From<RepoError> for PruneError {
    fn from(e: RepoError) -> Self {
        PruneError::Repo(Box::new(e))
    }
}

impl From<arca_backend::BackendError> for PruneError {
    fn from(e: arca_backend::BackendError) -> Self {
        PruneError::Repo(Box::new(e.into()))
    }
}

/// What prune is doing, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Walking the snapshots' trees.
    Walking,
    /// Copying used blobs into new packs.
    Repacking,
    /// Writing the new index.
    WritingIndex,
    /// Deleting old index files and packs.
    Deleting,
    /// Finished.
    Done,
}

/// Counters a progress display reads while prune runs.
#[derive(Debug, Default)]
pub struct Progress {
    phase: AtomicU8,
    /// Trees walked.
    pub trees: AtomicU64,
    /// Packs to repack read.
    pub packs_read: AtomicU64,
    /// Packs to repack, in all.
    pub packs_to_read: AtomicU64,
    /// New packs written.
    pub packs_written: AtomicU64,
    /// Index files written.
    pub index_files_written: AtomicU64,
    /// Files deleted (index files and packs).
    pub files_deleted: AtomicU64,
    /// Files to delete, in all.
    pub files_to_delete: AtomicU64,
    /// Set to stop ([`Self::cancel`], or by its other holder: [`Self::with_cancel`]).
    cancelled: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Progress {
    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Walking,
            1 => Phase::Repacking,
            2 => Phase::WritingIndex,
            3 => Phase::Deleting,
            _ => Phase::Done,
        }
    }

    fn set_phase(&self, p: Phase) {
        self.phase.store(p as u8, Ordering::Relaxed);
    }

    /// A progress whose prune stops once `flag` is set (see [`Self::cancel`]).
    pub fn with_cancel(flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Self {
        Self {
            cancelled: flag,
            ..Self::default()
        }
    }

    /// Asks the prune to stop at its next safe point (between trees walked, packs repacked,
    /// and before the deletions): it then fails with [`PruneError::Cancelled`].
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// [`PruneError::Cancelled`] once [`Self::cancel`] was called.
    fn go_on(&self) -> Result<(), PruneError> {
        if self.cancelled.load(Ordering::Relaxed) {
            Err(PruneError::Cancelled)
        } else {
            Ok(())
        }
    }

    fn bump(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Plans a prune of `repo` whose index (all index files) is `index`; changes nothing.
pub fn plan(
    repo: &Repository,
    index: &Index,
    opts: &PruneOptions,
) -> Result<PrunePlan, PruneError> {
    plan_with_progress(repo, index, opts, &Progress::default())
}

/// Plans a prune of `repo` over its whole index, counting in `progress`; refuses while an
/// index file is damaged (a damaged index file hides the packs it lists: prune would take
/// them for unused and delete data snapshots need).
pub fn plan_repository(
    repo: &Repository,
    opts: &PruneOptions,
    progress: &Progress,
) -> Result<PrunePlan, PruneError> {
    let (index, damaged) = repo.load_index_report()?;
    // A damaged file first: repairing it comes before anything else.
    let worst = damaged
        .iter()
        .find(|(_, e)| !e.is_newer_format())
        .or(damaged.first());
    if let Some((id, e)) = worst {
        // The cause alone: the error names the file too.
        let (id, why) = (*id, e.cause());
        return Err(if e.is_newer_format() {
            PruneError::NewerIndex { id, why }
        } else {
            PruneError::DamagedIndex { id, why }
        });
    }
    plan_with_progress(repo, &index, opts, progress)
}

/// [`plan`], counting the trees walked in `progress`.
pub fn plan_with_progress(
    repo: &Repository,
    index: &Index,
    opts: &PruneOptions,
    progress: &Progress,
) -> Result<PrunePlan, PruneError> {
    progress.set_phase(Phase::Walking);
    let index_files: Vec<Id> = repo
        .list_ids(FileType::Index)?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let listed = repo.list_ids(FileType::Pack)?;
    let packs = decide::PackState::of(index, &listed);
    let marks = walk::Marks::new(index.len());
    let walked = walk::mark_used(
        repo,
        index,
        &packs.usable,
        &marks,
        opts.threads,
        &opts.ignore_snapshots,
        progress,
    )?;
    progress.go_on()?;
    let mut plan = decide::decide(
        index,
        &marks,
        &packs,
        opts,
        u64::from(repo.config().pack_size),
    );
    if walked.snapshots == 0 && !opts.allow_remove_all && !index.packs().is_empty() {
        return Err(PruneError::NoSnapshots {
            packs: index.packs().len(),
            bytes: index.packs().iter().map(|p| p.size).sum(),
        });
    }
    plan.preview = !opts.ignore_snapshots.is_empty();
    plan.stats.snapshots = walked.snapshots;
    plan.stats.trees = walked.trees;
    plan.stats.index_files = index_files.len();
    plan.unreferenced = listed
        .iter()
        .zip(&packs.listed_indexed)
        .filter(|(_, indexed)| !**indexed)
        .map(|(p, _)| *p)
        .collect();
    // Reads the headers of the packs no index names: under the exclusive lock, so none of
    // them is being written.
    let scanned = adopt::adopt(
        repo,
        index,
        &marks,
        &mut plan,
        u64::from(repo.config().pack_size),
    )?;
    for (_, size) in &plan.unreferenced {
        plan.stats.unreferenced.add(*size);
    }
    plan.orphan_copies =
        decide::orphan_copies(repo, index, &marks, &plan.unreferenced, scanned.as_ref())?;
    plan.stats.freed_bytes += plan.stats.unreferenced.bytes;
    let changed = plan.packs.iter().any(|p| p.action != PackAction::Keep);
    let blobs: u64 = plan
        .packs
        .iter()
        .filter(|p| p.action == PackAction::Keep)
        .map(|p| u64::from(p.used_blobs) + u64::from(p.unused_blobs))
        .sum::<u64>()
        + plan.stats.repack_blobs
        + plan.stats.adopted_blobs;
    let files_needed = blobs.div_ceil(INDEX_BLOBS as u64).max(1) as usize;
    plan.rewrite_index = changed || index_files.len() > files_needed;
    plan.index_files = index_files;
    Ok(plan)
}
