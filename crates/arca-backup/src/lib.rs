//! Backing up paths into a snapshot: walk, change detection against a parent snapshot,
//! content-defined chunking, dedup against the index, and the sealing/packing/upload
//! pipeline ([`saver`]).
//!
//! Entries that cannot be read are skipped with a [`Warning`] and the snapshot is marked
//! incomplete; only repository failures abort a backup. Packs, then index files, then the
//! snapshot are written, so an aborted backup never leaves a snapshot pointing at nothing.

mod archiver;
mod assemble;
mod dedup;
pub mod estimate;
pub mod filter;
mod gomatch;
mod holes;
mod links;
mod pipeline;
mod pool;
mod prefetch;
mod reader;
mod report;
pub mod saver;
pub mod scan;
pub mod sources;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arca_format::{Id, Snapshot};
use arca_fs::pattern::PatternError;
use arca_repo::profile::StageProfile;
use arca_repo::{RepoError, Repository, SnapshotFilter};
use chrono::{DateTime, FixedOffset, Local};

use crate::archiver::Fatal;
pub use crate::filter::Excludes;
use crate::filter::Filter;
use crate::pipeline::{Shape, Source};
use crate::saver::SaverConfig;
use crate::sources::SourceTree;

/// Files read at once by default: enough to keep a disk's queue busy with small files (on
/// the 100,000-file set, 12 readers took 9.1-9.9 s cold where 4 took 9.9-11.1 s).
pub const DEFAULT_READERS: usize = 12;
/// Of those, files of 32 KiB or more read at once at most: each holds a buffer of
/// up to twice the largest chunk, and the disk reads fewer files side by side faster.
pub const MEDIUM_READS: usize = 4;
/// Packs uploaded at once by default to a backend with round trips (1 to a local disk).
pub const DEFAULT_UPLOADS: usize = 2;
/// Default memory budget for data in flight.
pub const DEFAULT_MEMORY: u64 = 256 << 20;

/// How the parent snapshot (for change detection) is chosen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ParentMode {
    /// The newest snapshot of this host holding at least the same paths.
    #[default]
    Auto,
    /// No parent: read every file.
    None,
    /// This snapshot.
    Id(Id),
}

/// A callback taking a path.
pub type PathHook = std::sync::Arc<dyn Fn(&std::path::Path) + Send + Sync>;

/// Callbacks into the walk, for tests that need a file to vanish or change at an exact moment.
#[derive(Clone, Default)]
pub struct Hooks {
    /// Called with a file's path just before it is opened for reading.
    pub before_read: Option<PathHook>,
    /// Called with a directory's path just before the walk lists it.
    pub before_list: Option<PathHook>,
    /// Called with a directory's path once the walk listed it, before it looks at its
    /// entries.
    pub after_list: Option<PathHook>,
    /// The most directories held open for the readers to open their files in (default: by
    /// the open-file limit); past it, and with 0, files are opened by their path.
    pub lent_folders: Option<usize>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooks")
    }
}

/// What to back up and how.
#[derive(Debug, Clone, Default)]
pub struct BackupOptions {
    /// Paths to back up (made absolute).
    pub paths: Vec<PathBuf>,
    /// What to leave out.
    pub excludes: Excludes,
    /// Tags for the snapshot.
    pub tags: Vec<String>,
    /// Host name to record (default: this host).
    pub hostname: Option<String>,
    /// Parent selection.
    pub parent: ParentMode,
    /// Read every file even when the parent says it is unchanged.
    pub force: bool,
    /// Trust the parent's record of a file whose ctime alone changed (restic's
    /// `--ignore-ctime`: a `chmod -R`, or a file system that sets ctimes of its own).
    pub ignore_ctime: bool,
    /// Trust the parent's record of a file whose inode number or ctime alone changed
    /// (restic's `--ignore-inode`, which implies `--ignore-ctime`: FUSE and network mounts
    /// that number inodes anew on every mount make up ctimes too).
    pub ignore_inode: bool,
    /// zstd level for this backup (default: the repository's).
    pub compression: Option<i32>,
    /// Do not cross file-system boundaries.
    pub one_file_system: bool,
    /// Compressing and sealing threads (0 = one per core).
    pub workers: usize,
    /// Files read at once (0 = the default, [`DEFAULT_READERS`]).
    pub read_concurrency: usize,
    /// Packs uploaded at once (0 = the default, [`DEFAULT_UPLOADS`]).
    pub upload_queue: usize,
    /// Bytes of file data in flight between reading and uploading (0 = [`DEFAULT_MEMORY`]).
    pub memory: u64,
    /// Capping (FAST'13): within each segment of about 20 MiB of the read stream, blocks
    /// reference at most this many packs written before this backup; blocks in other old
    /// packs are stored again. 0 = no capping.
    pub cap: usize,
    /// Set (from a signal handler) to stop the backup: what was queued is uploaded and
    /// indexed, and no snapshot is written.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Snapshot time (default: now).
    pub time: Option<DateTime<FixedOffset>>,
    /// Read, chunk and count everything, write nothing: no pack, index or snapshot.
    pub dry_run: bool,
    /// Write no snapshot when its tree is the parent's (nothing changed), as restic's
    /// `--skip-if-unchanged`.
    pub skip_if_unchanged: bool,
    /// Test hooks.
    #[doc(hidden)]
    pub hooks: Hooks,
}

/// Why an entry was skipped or is suspect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    /// Could not be read; missing from the snapshot.
    Unreadable,
    /// Disappeared during the backup; missing from the snapshot.
    Vanished,
    /// Changed while it was read; stored as read, possibly inconsistent.
    ChangedWhileRead,
    /// A directory that contains itself (bind mount loop); its contents are not stored.
    Loop,
    /// A symlink to a directory with backed-up paths below it, named itself (`link` and
    /// `link/file`) or found in a backed-up directory (`dir` and `dir/link/file`): stored as
    /// the directory it leads to, holding only those paths, not as a symlink.
    Followed,
}

/// A per-entry problem.
#[derive(Debug, Clone)]
pub struct Warning {
    /// Entry concerned.
    pub path: PathBuf,
    /// Class.
    pub kind: WarningKind,
    /// Message naming what failed.
    pub message: String,
}

impl Warning {
    /// Whether the entry is missing from the snapshot (which is then incomplete).
    pub fn is_error(&self) -> bool {
        matches!(
            self.kind,
            WarningKind::Unreadable | WarningKind::Vanished | WarningKind::Loop
        )
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Live progress, read by the CLI's progress display.
#[derive(Debug, Default)]
pub struct Progress {
    /// Files processed.
    pub files: AtomicU64,
    /// File bytes processed (read or reused).
    pub bytes: AtomicU64,
    /// Bytes actually read from files.
    pub bytes_read: AtomicU64,
    /// Files found so far by the estimate scan ([`scan`]), for a progress bar's total.
    pub total_files: AtomicU64,
    /// Bytes of the files found so far by the estimate scan.
    pub total_bytes: AtomicU64,
    /// The estimate scan has finished: the totals are complete.
    pub totals_final: std::sync::atomic::AtomicBool,
}

impl Progress {
    pub(crate) fn add(&self, files: u64, bytes: u64, read: u64) {
        self.files.fetch_add(files, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.bytes_read.fetch_add(read, Ordering::Relaxed);
    }
}

/// Receives warnings as they happen.
pub trait Observer: Sync {
    /// An entry was skipped or is suspect.
    fn warning(&self, w: &Warning);
    /// A regular file was met: new (no parent entry), changed (read again) or unchanged
    /// (taken from the parent snapshot), for `backup -v`.
    fn file(&self, _path: &Path, _change: FileChange) {}
}

/// What a backup found of a file against its parent snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileChange {
    /// Not in the parent snapshot: read.
    New,
    /// In the parent snapshot but changed (size, mtime, ctime or inode): read again.
    Modified,
    /// In the parent snapshot and unchanged: its content is taken from there.
    Unchanged,
}

impl FileChange {
    /// restic's word for it (`new`, `modified`, `unchanged`).
    pub fn name(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Modified => "modified",
            Self::Unchanged => "unchanged",
        }
    }
}

impl<F: Fn(&Warning) + Sync> Observer for F {
    fn warning(&self, w: &Warning) {
        self(w)
    }
}

/// A fatal backup error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// The repository failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// A path named for backup cannot be used.
    #[error("{}: {source}", arca_format::text::shown(path))]
    Source {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An exclude pattern is invalid.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// No paths were given.
    #[error("no paths to back up")]
    NoPaths,
    /// Every path given is excluded by the patterns: the snapshot would be empty.
    #[error(
        "every path given is excluded (by the exclude patterns or --exclude-larger-than): \
         nothing to back up, no snapshot saved"
    )]
    AllExcluded,
    /// `--stdin` read nothing: the program feeding it most likely failed.
    #[error(
        "no data read from standard input: no snapshot saved (did the program feeding it \
         fail?)"
    )]
    EmptyStdin,
    /// `--stdin` could not be read to its end (the warning before says why).
    #[error("standard input could not be read to its end (the error is above): no snapshot saved")]
    StdinUnreadable,
    /// The user interrupted the backup; what was uploaded is indexed.
    #[error(
        "interrupted: no snapshot was written; {} ({}) {} saved and indexed, and the next \
         backup will not upload {} again",
        arca_format::text::count(*packs, "pack"),
        arca_format::text::human_bytes(*bytes),
        if *packs == 1 { "was" } else { "were" },
        if *packs == 1 { "it" } else { "them" }
    )]
    Cancelled {
        /// Packs uploaded and indexed before stopping.
        packs: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// `--memory` leaves too little for the packs in flight.
    #[error(
        "--memory {budget} bytes is too small for this repository (packs of {pack_size} bytes, \
         chunks of up to {chunk_max}): at least {needed} bytes are needed"
    )]
    Memory {
        /// The budget given.
        budget: u64,
        /// The least that works with this repository's pack size and upload queue.
        needed: u64,
        /// The repository's pack size.
        pack_size: u32,
        /// Its largest chunk.
        chunk_max: u64,
    },
}

/// The outcome of a backup.
#[derive(Debug, Clone)]
pub struct BackupReport {
    /// The new snapshot's id (all zeros after a dry run).
    pub snapshot_id: Id,
    /// Nothing was written.
    pub dry_run: bool,
    /// No snapshot was written: its tree is the parent's (`skip_if_unchanged`); the id is
    /// all zeros. New data cannot have been stored: the tree names every blob.
    pub skipped: bool,
    /// Entries left out by the exclusion rules.
    pub excluded: u64,
    /// Files read again only because their inode number is not the one the parent snapshot
    /// recorded (size and times unchanged). On file systems that number files anew at each
    /// mount (FUSE and SMB mounts, exFAT) that is every file; `ignore_inode` trusts them.
    pub renumbered: u64,
    /// The snapshot.
    pub snapshot: Snapshot,
    /// Problems met.
    pub warnings: Vec<Warning>,
    /// Seconds taken.
    pub duration_seconds: f64,
    /// Where each stage spent its time.
    pub profile: Vec<StageProfile>,
    /// Seconds per phase before and after the pipeline: index, packs (the listing that
    /// finds an interrupted backup's packs), parent (finding it and loading its trees),
    /// pipeline, snapshot.
    pub phases: Vec<(&'static str, f64)>,
    /// Blocks stored again by `--cap`, and their bytes.
    pub capped: (u64, u64),
    /// Directory listings of the parent snapshot that could not be read (tree id, why):
    /// their folders were read again from disk and their listings stored again, so this
    /// snapshot does not depend on the unreadable copies.
    pub parent_unreadable: Vec<(Id, String)>,
}

fn parent_for(
    repo: &Repository,
    opts: &BackupOptions,
    host: &str,
    paths: &[String],
    limit: DateTime<FixedOffset>,
) -> Result<Option<(Id, Snapshot)>, RepoError> {
    match &opts.parent {
        ParentMode::None => Ok(None),
        ParentMode::Id(id) => Ok(Some((*id, repo.load_snapshot(id)?))),
        ParentMode::Auto => {
            let filter = SnapshotFilter::host(host);
            // As restic: the newest snapshot of this host that holds at least these paths
            // (`backup /a` after `backup /a /b` finds the files of /a unchanged), none newer
            // than this snapshot's time (`--time` in the past, or now: a snapshot dated in
            // the future, by a clock ahead or `--time`, stayed the parent until that date).
            Ok(repo
                .list_snapshots(&filter)?
                .into_iter()
                .rev()
                .filter(|(_, s)| s.time <= limit)
                .find(|(_, s)| paths.iter().all(|p| s.paths.contains(p))))
        }
    }
}

/// The metadata read-ahead of a backup's sources, started before the repository is opened:
/// deriving the password's key takes a tenth of a second of both cores, during which the
/// disk would otherwise idle, so the sources' cold directories and inodes load meanwhile.
/// Hand it to [`backup_with`]; dropped unused, its threads stop.
pub struct ReadAhead(prefetch::Prefetcher);

impl ReadAhead {
    /// Starts reading ahead below `paths` (those that cannot be read are left to the backup
    /// to report), honouring `excludes`.
    pub fn start(paths: &[PathBuf], excludes: &Excludes) -> Result<Self, BackupError> {
        let filter = std::sync::Arc::new(Filter::new(excludes)?);
        let p = prefetch::Prefetcher::start(archiver::PREFETCH_THREADS, filter);
        let abs: Vec<PathBuf> = paths
            .iter()
            .filter_map(|p| sources::absolute(p).ok())
            .collect();
        p.warm(&abs);
        Ok(Self(p))
    }
}

/// Backs up `opts.paths` into a new snapshot.
pub fn backup(
    repo: &Repository,
    opts: &BackupOptions,
    progress: &Progress,
    observer: &dyn Observer,
) -> Result<BackupReport, BackupError> {
    backup_with(repo, opts, None, progress, observer)
}

/// [`backup`], with the read-ahead already started by [`ReadAhead::start`] on the same paths
/// and exclusions (one is started here otherwise).
pub fn backup_with(
    repo: &Repository,
    opts: &BackupOptions,
    ahead: Option<ReadAhead>,
    progress: &Progress,
    observer: &dyn Observer,
) -> Result<BackupReport, BackupError> {
    if opts.paths.is_empty() {
        return Err(BackupError::NoPaths);
    }
    let mut abs = vec![];
    // A path that cannot be looked at is warned about and left out, as restic does; only
    // when none can be is the backup refused.
    let mut missing = vec![];
    let mut first_error = None;
    for p in &opts.paths {
        let a = sources::absolute(p).map_err(|source| BackupError::Source {
            path: p.clone(),
            source,
        })?;
        match arca_fs::lstat(&a) {
            Ok(_) => abs.push(a),
            Err(source) => {
                missing.push(Warning {
                    message: format!("{}: {source}; not backed up", arca_format::text::shown(&a)),
                    path: a.clone(),
                    kind: WarningKind::Unreadable,
                });
                first_error.get_or_insert(BackupError::Source { path: a, source });
            }
        }
    }
    if abs.is_empty()
        && let Some(e) = first_error
    {
        return Err(e);
    }
    for w in &missing {
        observer.warning(w);
    }
    abs.sort();
    abs.dedup();
    // A named path the patterns exclude is not in the snapshot: not among its paths either
    // (it was listed, and `ls`/`restore` of it then failed). All of them excluded is refused
    // in `run`.
    let filter = Filter::new(&opts.excludes)?;
    let shown: Vec<String> = abs
        .iter()
        .filter(|p| !filter.excludes_named(p))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let sources = SourceTree::build(&abs);
    let early = ahead.map(|a| a.0);
    run(
        repo,
        opts,
        (shown, missing),
        (early, &abs),
        progress,
        observer,
        |parent_root| Source::Paths(&sources, parent_root),
    )
}

/// Backs up what `reader` yields (standard input, for `--stdin`) as the single file `/NAME`.
pub fn backup_reader(
    repo: &Repository,
    opts: &BackupOptions,
    name: &[u8],
    reader: &mut dyn std::io::Read,
    progress: &Progress,
    observer: &dyn Observer,
) -> Result<BackupReport, BackupError> {
    for part in name.split(|&b| b == b'/') {
        if let Err(e) = arca_format::tree::validate_name(part) {
            return Err(BackupError::Source {
                path: PathBuf::from(&*String::from_utf8_lossy(name)),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()),
            });
        }
    }
    // Recorded as paths are: a name that is not UTF-8 with U+FFFD (FORMAT.md).
    let shown = vec![format!("/{}", String::from_utf8_lossy(name))];
    // As restic: standard input is read whole whatever a parent says, so none is chosen
    // (one was recorded and printed, though nothing was taken from it; nor could
    // `--skip-if-unchanged` skip with it: the file's times are the backup's).
    let no_parent;
    let opts = if opts.parent == ParentMode::Auto {
        no_parent = BackupOptions {
            parent: ParentMode::None,
            ..opts.clone()
        };
        &no_parent
    } else {
        opts
    };
    run(
        repo,
        opts,
        (shown, vec![]),
        (None, &[]),
        progress,
        observer,
        |_| Source::Stdin(name, reader),
    )
}

/// The part of a backup common to every source: parent, pipeline, snapshot. `shown` are the
/// snapshot's paths, `missing` the warnings about named paths left out.
fn run<'w>(
    repo: &Repository,
    opts: &BackupOptions,
    (shown, missing): (Vec<String>, Vec<Warning>),
    (early, warm): (Option<prefetch::Prefetcher>, &[PathBuf]),
    progress: &Progress,
    observer: &dyn Observer,
    walk: impl FnOnce(Option<Id>) -> Source<'w>,
) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    // The run's real start; `--time` sets only the snapshot's time, as restic's.
    let run_start = Local::now().fixed_offset();
    let start_time = opts.time.unwrap_or(run_start);
    let filter = std::sync::Arc::new(Filter::new(&opts.excludes)?);
    // As restic ("snapshot is empty"): a snapshot holding none of the paths named would
    // pass for a backup of them (`warm` is empty only for `--stdin`).
    if !warm.is_empty() && warm.iter().all(|p| filter.excludes_named(p)) {
        return Err(BackupError::AllExcluded);
    }
    // Metadata read-ahead starts now: the source's directories warm up while the index and
    // the parent's trees load.
    let prefetch = early.unwrap_or_else(|| {
        let p =
            prefetch::Prefetcher::start(archiver::PREFETCH_THREADS, std::sync::Arc::clone(&filter));
        p.warm(warm);
        p
    });
    let hostname = opts
        .hostname
        .clone()
        .unwrap_or_else(arca_repo::host::hostname);
    let mut phases = Phases::new();
    // The index, the listing of the packs and the parent snapshot are read side by side (on
    // a cold cache each waits for the disk).
    let (index, listed, parent) = std::thread::scope(|s| {
        let listing =
            (!opts.dry_run).then(|| s.spawn(|| repo.list_ids(arca_backend::FileType::Pack)));
        let parent = s.spawn(|| parent_for(repo, opts, &hostname, &shown, start_time));
        let index = repo.load_index();
        let listed = listing.map(|h| h.join().unwrap_or_else(|_| Err(thread_failed("listing"))));
        let parent = parent
            .join()
            .unwrap_or_else(|_| Err(thread_failed("parent")));
        (index, listed, parent)
    });
    let mut index = index?;
    phases.done("index");
    let mut gone_packs = std::collections::HashSet::new();
    if let Some(listed) = listed {
        let listed = listed?;
        let held: std::collections::HashSet<Id> = listed.iter().map(|(id, _)| *id).collect();
        // Index the packs an interrupted backup uploaded, so their blobs are not sent again.
        arca_repo::recover::adopt_listed(repo, &mut index, listed)?;
        // The packs the index names that are not there (lost, deleted by hand): what only
        // they hold is stored again, so this snapshot is whole (restic references it).
        gone_packs = (0u32..)
            .zip(index.packs())
            .filter(|(_, p)| !held.contains(&p.id))
            .map(|(i, _)| i)
            .collect();
        phases.done("packs");
    }
    let parent = parent?;
    let mut shape = shape(repo, opts)?;
    shape.gone_packs = gone_packs;
    shape.reuse_metadata = !opts.force
        && parent
            .as_ref()
            .is_some_and(|(_, s)| s.uid == nix::unistd::geteuid().as_raw());
    // Its start as it really was (its `time` may be given with --time); none recorded: every
    // record is trusted, as before.
    shape.settled_before = parent
        .as_ref()
        .and_then(|(_, s)| s.summary.backup_start)
        .map_or(i64::MAX, |t| t.timestamp());
    let parents = parent
        .as_ref()
        .map(|(_, snap)| arca_repo::trees::load_all(repo, &index, snap.tree, 0));
    let parent_root = parent.as_ref().map(|(_, s)| s.tree);
    phases.done("parent");
    let out = pipeline::run(
        repo,
        &index,
        &parents,
        filter,
        prefetch,
        opts,
        &shape,
        progress,
        observer,
        walk(parent_root),
    );
    phases.done("pipeline");
    // Ctrl-C while the last packs were uploading (the sources all read): no snapshot, as
    // anywhere else in the backup; what was uploaded is indexed. A stage that stopped because
    // of it reports no error of its own.
    if opts
        .cancel
        .as_ref()
        .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
    {
        let (packs, bytes) = out
            .saved
            .as_ref()
            .map_or((0, 0), |s| (s.packs, s.pack_bytes));
        return Err(BackupError::Cancelled { packs, bytes });
    }
    // A repository error in the pipeline is the real cause when the walk stopped early.
    let stats = out.saved?;
    let root = match out.root {
        Ok(id) => id,
        Err(Fatal::Repo(e)) => return Err(e.into()),
        Err(Fatal::Cancelled) => {
            return Err(BackupError::Cancelled {
                packs: stats.packs,
                bytes: stats.pack_bytes,
            });
        }
        Err(Fatal::Stopped) => {
            return Err(RepoError::Invalid {
                what: "backup pipeline",
                detail: "stopped without an error".into(),
            }
            .into());
        }
    };
    let (mut summary, counts) = (out.summary, out.counts);
    // As restic: `false | arca backup --stdin` saved an empty file, exit 0, and a failed
    // dump went unnoticed until the restore (`warm` is empty only for `--stdin`).
    if warm.is_empty() && summary.total_bytes_processed == 0 {
        // A read that failed midway stored nothing either; "no data read" denied the error
        // printed just before it (hunt 30).
        return Err(match out.warnings.iter().any(Warning::is_error) {
            true => BackupError::StdinUnreadable,
            false => BackupError::EmptyStdin,
        });
    }
    let mut warnings = missing;
    warnings.extend(out.warnings);
    summary.data_added_packed = stats.blob_bytes;
    summary.backup_start = Some(run_start);
    summary.backup_end = Some(Local::now().fixed_offset());
    summary.errors = warnings.iter().filter(|w| w.is_error()).count() as u64;
    let (uid, gid) = arca_repo::host::ids();
    let snapshot = Snapshot {
        time: start_time,
        tree: root,
        paths: shown,
        hostname,
        username: arca_repo::host::username(),
        uid,
        gid,
        tags: opts.tags.clone(),
        parent: parent.map(|(id, _)| id),
        original: None,
        copied_tree: None,
        program_version: format!("arca {}", env!("CARGO_PKG_VERSION")),
        complete: summary.errors == 0,
        summary,
    };
    let skipped = opts.skip_if_unchanged && parent_root == Some(root);
    // A dry run or a skipped snapshot saves nothing; its report carries the all-zero id.
    let snapshot_id = if opts.dry_run || skipped {
        Id::default()
    } else {
        repo.save_snapshot(&snapshot)?
    };
    phases.done("snapshot");
    Ok(BackupReport {
        snapshot_id,
        dry_run: opts.dry_run,
        skipped,
        excluded: counts.excluded,
        renumbered: counts.renumbered,
        snapshot,
        warnings,
        duration_seconds: started.elapsed().as_secs_f64(),
        profile: out.profile,
        phases: phases.0,
        capped: out.capped,
        parent_unreadable: parents.map(|p| p.failed().to_vec()).unwrap_or_default(),
    })
}

/// The error for a helper thread that panicked (a bug).
fn thread_failed(what: &'static str) -> RepoError {
    RepoError::Invalid {
        what: "backup",
        detail: format!("the thread reading the {what} failed"),
    }
}

/// Seconds per phase, each measured from the end of the one before.
struct Phases(Vec<(&'static str, f64)>, Instant);

impl Phases {
    fn new() -> Self {
        Self(vec![], Instant::now())
    }

    fn done(&mut self, name: &'static str) {
        let now = Instant::now();
        self.0.push((name, (now - self.1).as_secs_f64()));
        self.1 = now;
    }
}

/// The network's shape from the options: threads, uploads and the memory budget.
fn shape(repo: &Repository, opts: &BackupOptions) -> Result<Shape, BackupError> {
    let or = |v: usize, d: usize| if v == 0 { d } else { v };
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    // A local disk takes a pack in milliseconds: one upload in flight keeps it busy, and
    // every pack in flight holds a pack's worth of memory.
    let local = repo.backend().hints().local;
    let uploads = or(opts.upload_queue, if local { 1 } else { DEFAULT_UPLOADS });
    let readers = or(opts.read_concurrency, DEFAULT_READERS);
    let medium_reads = readers.min(MEDIUM_READS);
    // Packs being filled (data and tree), queued and uploading are outside the blob budget;
    // a medium buffer and the large file's holds up to two maximal chunks, a reader's own
    // buffer a small file.
    let pack = u64::from(repo.config().pack_size) * 9 / 8;
    let chunk = repo.chunker().max_size() as u64;
    let fixed = pack * (3 + uploads as u64)
        + chunk * 2 * (medium_reads as u64 + 1)
        + reader::SMALL_FILE * 2 * readers as u64;
    let needed = fixed + chunk * 2;
    // The default grows with the repository's pack and chunk sizes (with packs of 64 MiB or
    // chunks of 16 MiB every backup failed for want of memory unless --memory was raised).
    let budget = if opts.memory == 0 {
        DEFAULT_MEMORY.max(fixed + chunk * 8)
    } else {
        opts.memory
    };
    if budget < needed {
        return Err(BackupError::Memory {
            budget,
            needed,
            pack_size: repo.config().pack_size,
            chunk_max: chunk,
        });
    }
    Ok(Shape {
        saver: SaverConfig {
            level: opts.compression.unwrap_or(repo.config().compression),
            workers: or(opts.workers, cores),
            uploads,
            budget: budget - fixed,
            producers: medium_reads + 1,
            dry_run: opts.dry_run,
        },
        readers,
        medium_reads,
        reuse_metadata: false,
        settled_before: i64::MAX,
        gone_packs: Default::default(),
    })
}
