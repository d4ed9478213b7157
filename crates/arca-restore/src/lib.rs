//! Restoring a snapshot under a target directory, as a concurrent network planned from the
//! snapshot's trees and the index before any data is read (see docs/ARCHITECTURE.md).
//!
//! Phases: load the trees in bulk ([`trees`]; the target's inodes are read meanwhile,
//! [`warm`]), make the plan ([`plan`]), look at what the target already holds ([`scan`],
//! [`reuse`]), create directories and settle entries without content ([`prepare`]), then move
//! content through the network ([`network`]: [`schedule`] → [`fetch`] → [`place`], finishing
//! files and directories as they complete, [`finish`]) while the files that could not be
//! trusted are hashed ([`late`]).
//! A failing entry is reported and the rest restored; a full disk, an unusable target or
//! Ctrl-C stops every stage.

mod aliases;
mod cache;
mod canon;
mod ctx;
mod direct;
mod durable;
mod fetch;
mod finish;
mod followed;
mod footprint;
mod grain;
mod guard;
mod handles;
mod hashing;
mod inodes;
mod jobs;
mod late;
mod network;
pub mod options;
mod place;
mod plan;
mod prefetch;
mod prepare;
pub mod profile;
mod reuse;
pub mod roots;
mod scan;
mod schedule;
mod small_files;
mod spare;
mod summary;
mod trees;
mod warm;
mod watchdog;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arca_format::Snapshot;
use arca_fs::pattern::{PathMatcher, PatternError};
use arca_repo::{Index, RepoError, Repository};

pub use footprint::{PlanFootprint, plan_footprint};
pub use options::{DirectIo, Overwrite, Resolved, RestoreOptions, Tuning, dirty_allowance};
pub use profile::StageProfile;
pub use summary::{Action, PlanSummary, PlannedEntry};

/// An entry that could not be restored (fully).
#[derive(Debug, Clone)]
pub struct RestoreIssue {
    /// Path in the target.
    pub path: PathBuf,
    /// What failed.
    pub message: String,
}

impl std::fmt::Display for RestoreIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Live counters for a progress display. Totals are set once the plan is made.
#[derive(Debug, Default)]
pub struct Progress {
    /// Entries completed (any kind).
    pub entries: AtomicU64,
    /// Regular files completed.
    pub files: AtomicU64,
    /// File bytes in place (written, copied or found right).
    pub bytes: AtomicU64,
    /// Entries in the restore.
    pub entries_total: AtomicU64,
    /// Regular files in the restore.
    pub files_total: AtomicU64,
    /// File bytes to put in place (those already right excluded).
    pub bytes_total: AtomicU64,
}

/// Receives what happens as it happens.
pub trait Observer: Sync {
    /// An entry failed.
    fn issue(&self, issue: &RestoreIssue);
    /// The restore made no progress for a while; `report` says what each stage waits for.
    fn stall(&self, report: &str) {
        let _ = report;
    }
    /// What the restore will do with one entry (called for every entry that changes, before
    /// anything is changed; with `dry_run` that is all that happens). Files the restore must
    /// hash to know (their size or mtime is wrong) are told once it is done: they are hashed
    /// while the other files' content moves.
    fn planned(&self, entry: &PlannedEntry<'_>) {
        let _ = entry;
    }
}

impl<F: Fn(&RestoreIssue) + Sync> Observer for F {
    fn issue(&self, issue: &RestoreIssue) {
        self(issue)
    }
}

/// A restore that could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// The repository failed (reading the index...).
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// The target directory cannot be created or written.
    #[error("target {}: {source}", arca_format::text::shown(path))]
    Target {
        /// The target.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The target is the repository the restore reads from, or lies inside it.
    #[error(
        "target {}: inside the repository {} this restore reads from (restoring there would \
         overwrite its files, and --delete delete them); choose another target",
        arca_format::text::shown(target),
        arca_format::text::shown(repository)
    )]
    TargetInRepository {
        /// The target.
        target: PathBuf,
        /// The repository's folder.
        repository: PathBuf,
    },
    /// The disk holding the target is full.
    #[error(
        "cannot {op} {}: {source}; the restore stopped{}",
        arca_format::text::shown(path),
        match unfinished {
            0 => ": free some space and run it again".into(),
            // Those begun: "4 files unfinished" read as if 4 were all that was missing.
            1 => ", 1 file left partly written: free some space and run it again to finish \
                  the restore".into(),
            n => format!(", {n} files left partly written: free some space and run it again \
                          to finish the restore"),
        }
    )]
    NoSpace {
        /// What could not be done: "write", "create directory", "create symlink"...
        op: &'static str,
        /// The entry it was done to.
        path: PathBuf,
        /// The error.
        source: io::Error,
        /// Files written into but not finished when it stopped (dated before their snapshot
        /// time, so that any rerun looks at them again).
        unfinished: u64,
    },
    /// A pattern is invalid.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// The snapshot's root directory listing cannot be had (read or decoded).
    #[error("cannot read the snapshot's root directory listing {tree}: {detail}")]
    RootListing {
        /// The listing's id.
        tree: arca_format::Id,
        /// Why (an I/O error is not damage: a rerun may read it).
        detail: String,
    },
    /// Stopped on request (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
    /// A bug: a stage of the restore network failed.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The outcome of a restore.
#[derive(Debug, Clone, Default)]
pub struct RestoreReport {
    /// Regular files in place at the end (restored, updated or found right).
    pub files: u64,
    /// Directories in the restore.
    pub dirs: u64,
    /// Symlinks, FIFOs, devices and sockets.
    pub others: u64,
    /// Further names of hard-link groups in place at the end (linked, or found linked).
    pub hardlinks: u64,
    /// File bytes in the restore (holes included).
    pub bytes: u64,
    /// Bytes of data blocks this run put in files (all-zero blocks, which are holes, and
    /// blocks already in place excluded; a block's zero pages, left as holes all the same,
    /// count with it, as the plan's `bytes_to_write` counts them).
    pub bytes_written: u64,
    /// Entries that failed.
    pub issues: Vec<RestoreIssue>,
    /// Seconds taken.
    pub duration_seconds: f64,
    /// What the plan said the restore would do.
    pub plan: PlanSummary,
    /// Whether this was a dry run (nothing changed).
    pub dry_run: bool,
    /// Bytes read from the repository for file content, and the reads that did it.
    pub fetched_bytes: u64,
    /// Ranged reads of file content.
    pub requests: u64,
    /// Reads of directory listings, and their bytes.
    pub tree_requests: u64,
    /// Bytes of directory listings read.
    pub tree_bytes: u64,
    /// Distinct packs read.
    pub packs_read: u64,
    /// Blocks read more than once (evicted from the cache before their turn).
    pub rereads: u64,
    /// Blocks served from the cache.
    pub cache_hits: u64,
    /// Blocks dropped from the cache to make room.
    pub evictions: u64,
    /// Blocks decoded from repository reads.
    pub blocks_decoded: u64,
    /// Blocks taken from another copy in the repository because the one read was damaged
    /// or missing (`arca check --read-data` names the damage).
    pub other_copies: u64,
    /// Blocks and bytes placed as local copies instead of fetched: further uses of a block
    /// the target holds or this restore fetched or read (copied in the target, or written
    /// again from the same data), as the plan's `bytes_to_copy` counts them.
    pub blocks_copied: u64,
    /// Bytes placed as local copies instead of fetched.
    pub bytes_copied: u64,
    /// Blocks and bytes taken from `--reuse-from` trees.
    pub blocks_reused: u64,
    /// Bytes taken from `--reuse-from` trees.
    pub bytes_reused: u64,
    /// Bytes of all-zero blocks left as holes (the plan's `bytes_holes`).
    pub bytes_holes: u64,
    /// Bytes written around the page cache (`O_DIRECT`).
    pub bytes_direct: u64,
    /// Bytes of pack ranges announced to a local repository ahead of the reads (prefetch
    /// hints, so the disk has many requests queued).
    pub bytes_hinted: u64,
    /// Files hashed because their size or mtime could not be trusted, and bytes read.
    pub files_hashed: u64,
    /// Bytes read hashing existing files.
    pub bytes_hashed: u64,
    /// Entries of the target looked at ahead of the scan, while the trees loaded.
    pub entries_warmed: u64,
    /// Files read back by `--verify`.
    pub files_verified: u64,
    /// Of those, files that differ from the snapshot (each is also in `issues`).
    pub verify_failures: u64,
    /// Entries `--delete` could not remove, or in a dry run would leave (each is also in
    /// `issues`; `plan.deletes` counts only those removed).
    pub deletes_failed: u64,
    /// Entries whose owner the target's file system refuses even to root (FAT, exFAT and
    /// NTFS keep none; NFS with root_squash and SMB mounts refuse them): the first is in
    /// `issues`, with why, the others are only counted here.
    pub owners_refused: u64,
    /// Most block data held at once (reads in flight and cache).
    pub peak_memory: u64,
    /// Reads retried after transient failures.
    pub retries: u64,
    /// Stall reports the watchdog made.
    pub stalls: u64,
    /// Time per stage of the network.
    pub stages: Vec<StageProfile>,
    /// Seconds per phase: trees, plan, scan, prepare, content (and the hashing of the target's
    /// untrusted files that ran during it), verify.
    pub phases: Vec<(&'static str, f64)>,
    /// The knobs as chosen.
    pub tuning: Option<Resolved>,
}

fn matcher(p: &[String], ignore_case: bool) -> Result<Option<PathMatcher>, PatternError> {
    if p.is_empty() {
        Ok(None)
    } else {
        PathMatcher::with_case(p, ignore_case).map(Some)
    }
}

/// Threads warming the target's inodes ([`warm`]): mostly waiting for the disk.
const WARM_THREADS: usize = 8;

/// Restores `snapshot` as described by `opts`.
pub fn restore(
    repo: &Repository,
    index: &Index,
    snapshot: &Snapshot,
    opts: &RestoreOptions,
    progress: &Progress,
    observer: &dyn Observer,
) -> Result<RestoreReport, RestoreError> {
    let started = Instant::now();
    let mut phases = vec![];
    let mut lap = {
        let mut t = Instant::now();
        move |name: &'static str, phases: &mut Vec<(&'static str, f64)>| {
            phases.push((name, t.elapsed().as_secs_f64()));
            t = Instant::now();
        }
    };
    let sel = trees::Selection {
        includes: [
            matcher(&opts.includes, false)?,
            matcher(&opts.iincludes, true)?,
        ]
        .into_iter()
        .flatten()
        .collect(),
        excludes: [
            matcher(&opts.excludes, false)?,
            matcher(&opts.iexcludes, true)?,
        ]
        .into_iter()
        .flatten()
        .collect(),
        only: opts.only.clone(),
    };
    let t = opts.tuning.resolve(repo.backend().hints());
    // A target named through a symlink is where the link points (symlinks found inside the
    // target are never followed).
    let resolved;
    let opts = match fs::symlink_metadata(&opts.target) {
        Ok(m) if m.file_type().is_symlink() => {
            resolved = RestoreOptions {
                target: fs::canonicalize(&opts.target).map_err(|source| {
                    // A link to nothing: say so, and where it leads.
                    let source = match (source.kind(), fs::read_link(&opts.target)) {
                        (io::ErrorKind::NotFound, Ok(to)) => io::Error::new(
                            io::ErrorKind::NotFound,
                            format!(
                                "a symlink to {}, which does not exist (or leads through \
                                 something that does not)",
                                arca_format::text::shown(&to)
                            ),
                        ),
                        _ => source,
                    };
                    RestoreError::Target {
                        path: opts.target.clone(),
                        source,
                    }
                })?,
                ..opts.clone()
            };
            &resolved
        }
        _ => opts,
    };
    let repository = match repo.backend().local_folder() {
        Some(folder) => guard::repository(&opts.target, &folder)?,
        None => None,
    };
    let existed = match fs::symlink_metadata(&opts.target) {
        Ok(m) if !m.is_dir() => {
            return Err(RestoreError::Target {
                path: opts.target.clone(),
                source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        // A folder this user cannot list or enter fails every entry (hunt 30: the dry run
        // promised a full restore, exit 0, and the real run restored nothing, exit 3): say so
        // once, before anything. Its mode is the user's to change, not the restore's (only
        // folders of the snapshot are opened to their owner while the restore runs).
        Ok(_) => match nix::unistd::access(
            &opts.target,
            nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::X_OK,
        ) {
            Ok(()) => true,
            Err(e) => {
                return Err(RestoreError::Target {
                    path: opts.target.clone(),
                    source: io::Error::new(
                        io::Error::from(e).kind(),
                        format!("cannot list or enter the folder: {}", e.desc()),
                    ),
                });
            }
        },
        Err(_) if opts.dry_run => false,
        Err(_) => {
            fs::create_dir_all(&opts.target).map_err(|source| RestoreError::Target {
                path: opts.target.clone(),
                source,
            })?;
            false
        }
    };
    // Before anything is written: what an earlier restore wrote may not have reached the
    // disk (hunt 30: zero-filled after a power cut, and trusted by size and mtime).
    // On its own thread, while the trees load: its marker is synced twice (3-30 ms), and the
    // scan is the first to need it.
    let durable = (existed || !opts.dry_run).then(|| {
        let (state, target, dry_run) = (opts.state_dir.clone(), opts.target.clone(), opts.dry_run);
        std::thread::spawn(move || durable::Durability::begin(state.as_deref(), &target, dry_run))
    });
    // The scan will look at every entry of the folders the snapshot lands in: their inodes
    // are read from the disk now, while the trees load and the plan is made. Not for a
    // subset (most of what the walk would read is not restored).
    let warmer = (existed && sel.root_selected()).then(|| {
        let roots = snapshot
            .paths
            .iter()
            .map(|p| target_path(&opts.target, Path::new(p)))
            .collect();
        warm::Warmer::start(roots, WARM_THREADS)
    });
    let stop = std::sync::atomic::AtomicBool::new(false);
    // Each tree reader holds a read and the trees it decodes. Locally four keep up with the
    // disk (the listings of 100,000 files load in 0.2 s), and eight cost 4-5 MiB more peak
    // memory; a remote backend needs as many as it has requests in flight.
    let tree_readers = if repo.backend().hints().local {
        t.fetchers.min(4)
    } else {
        t.fetchers
    };
    let loader = arca_repo::trees::TreeLoader {
        read_gap: t.read_gap,
        max_read: t.max_read,
        threads: tree_readers,
        ..arca_repo::trees::TreeLoader::new(repo, index, opts.cancel.as_deref().unwrap_or(&stop))
    };
    let loaded = loader.load(snapshot.tree, &|node, path, parent_selected| {
        sel.decide(node.is_dir(), path, parent_selected)
    });
    if opts
        .cancel
        .as_ref()
        .is_some_and(|c| c.load(Ordering::Relaxed))
    {
        return Err(RestoreError::Interrupted);
    }
    if let Some(Err(e)) = loaded.get(&snapshot.tree) {
        // Not "invalid snapshot": an I/O error or a permission is not damage.
        return Err(RestoreError::RootListing {
            tree: snapshot.tree,
            detail: e.clone(),
        });
    }
    lap("trees", &mut phases);
    let zero_id = repo.hole_blob_id();
    let plan = plan::Planner {
        index,
        sel: &sel,
        target: &opts.target,
        keep_names: opts.delete,
        zero_id,
    }
    .build(loaded, snapshot.tree);
    lap("plan", &mut phases);
    // Threads that mostly wait for the disk (hashing, verifying) and for inodes (looking at
    // the target: a deep queue reads a cold directory tree several times faster).
    let io_threads = (t.workers * 2).max(8);
    // 16 kept the disk as busy as 32 on the 100,000-file set here, with less time lost to
    // switching between blocked threads (no-op 1.2-1.3 s against 1.3-1.45 s). Fewer under a
    // low limit of open files: each keeps up to 8 folders open (hunt 29: a scan under
    // `ulimit -n 32` failed on folders).
    let stat_threads = usize::try_from(arca_fs::open_files_allowed() / 32)
        .unwrap_or(16)
        .clamp(2, 16);
    let checker = hashing::BlockChecker {
        key: repo.key(),
        plan: &plan,
        bytes_read: AtomicU64::new(0),
        large: hashing::Slots::new(t.workers * 2),
        zero_ids: Default::default(),
    };
    let roots = match &opts.roots {
        Some(r) => r.clone(),
        None => roots::exact_roots(&plan, &snapshot.paths),
    };
    let warmed = warmer.map_or(0, warm::Warmer::finish);
    let followed = followed::followed_links(&plan, &roots);
    // From here on every path operation below the target opens its folder beneath the
    // target, through no symlink but those followed (arca-fs beneath.rs): a folder swapped
    // for a symlink while the restore runs leads nowhere (files were written outside the
    // target through one).
    let through: Vec<PathBuf> = followed
        .links
        .iter()
        .map(|&d| plan.dirs[d as usize].path.clone())
        .collect();
    let _confined = arca_fs::confine(&opts.target, &through);
    let risky = aliases::risky_paths(&plan);
    let looked = std::sync::OnceLock::new();
    let inodes = inodes::SharedInodes::default();
    // Joined before the scan, and so before anything is written into the target.
    let durable = durable.and_then(|h| h.join().ok()).unwrap_or_default();
    let grain = grain::Grain::new(&plan.dirs[0].path, !opts.dry_run);
    let scanner = scan::Scanner {
        plan: &plan,
        risky: &risky,
        looked: &looked,
        inodes: &inodes,
        grain: &grain,
        repository: repository.as_ref(),
        follow: &followed.links,
        clashing: &followed.clashes,
        overwrite: opts.overwrite,
        delete: opts.delete,
        metadata: opts.metadata,
        sel: &sel,
        roots: &roots,
        checker: &checker,
        threads: stat_threads,
        fix_metadata: !opts.dry_run,
        durable: &durable,
        // Files that must be hashed are hashed while the others' content moves, except in a
        // dry run (nothing moves) and with --reuse-from (which looks at the scan's outcome).
        defer: !opts.dry_run && opts.reuse_from.is_empty(),
        stop: opts.cancel.as_deref().unwrap_or(&stop),
    };
    let mut scan = scanner.scan();
    let aliases = aliases::Aliases::new(&plan, &risky, &mut scan);
    scan.unlink_blocked_groups(&plan);
    let deferred = std::mem::take(&mut scan.deferred);
    // What the target holds where the restore will not find it (files replaced though
    // right, further names of a group written anew): copied from there, not fetched.
    let lenders = inodes.take_lenders();
    let (mut reusable, to_hold) = reuse::local(&plan, &scan, lenders.clone());
    if !opts.reuse_from.is_empty() {
        let found = reuse::find(
            &plan,
            &scan,
            (&opts.target, &roots),
            &opts.reuse_from,
            &checker,
            stat_threads,
            opts.cancel.as_deref().unwrap_or(&stop),
        );
        for (b, from) in found {
            reusable.entry(b).or_insert(from);
        }
    }
    if opts
        .cancel
        .as_ref()
        .is_some_and(|c| c.load(Ordering::Relaxed))
    {
        return Err(RestoreError::Interrupted);
    }
    let summary = summary::summarize(&plan, &scan, &reusable, observer, summary::Tell::Settled);
    progress.entries_total.store(
        (plan.entries.len() + plan.dirs.len() - 1) as u64,
        Ordering::Relaxed,
    );
    progress
        .files_total
        .store(plan.files.len() as u64, Ordering::Relaxed);
    progress
        .bytes_total
        .store(summary.bytes_to_place, Ordering::Relaxed);
    lap("scan", &mut phases);
    let mut t = t;
    if opts.tuning.direct_io == DirectIo::Auto && summary.bytes_to_write < dirty_allowance() {
        // The page cache takes it all without throttling: the copy into it is cheaper than
        // waiting for the disk (which writes it after the restore returns).
        t.direct_writes = 0;
    }
    let mut report = RestoreReport {
        // A dry run restores nothing (the plan says what it would).
        dirs: if opts.dry_run {
            0
        } else {
            plan.dirs.len() as u64 - 1
        },
        plan: summary,
        dry_run: opts.dry_run,
        tree_requests: loader.requests.load(Ordering::Relaxed),
        tree_bytes: loader.bytes.load(Ordering::Relaxed),
        retries: loader.retries.load(Ordering::Relaxed),
        files_hashed: scan.files_hashed,
        bytes_hashed: scan.bytes_hashed,
        entries_warmed: warmed,
        tuning: Some(t),
        ..RestoreReport::default()
    };
    for i in &plan.issues {
        observer.issue(i);
    }
    report.issues = plan.issues.clone();
    // Extra folders --delete leaves (they hold a mount point): said before anything is
    // written, and counted as not deleted, in the dry run too.
    for i in &scan.kept {
        observer.issue(i);
    }
    report.issues.extend(scan.kept.iter().cloned());
    report.deletes_failed = scan.kept.len() as u64;
    if opts.dry_run {
        // Why what cannot be restored cannot be: the real run says it as it goes, and the
        // dry run, where the fix (`--delete`, another mode) is chosen, said only "cannot".
        for i in scan::blocked_reasons(&plan, &scan) {
            observer.issue(&i);
            report.issues.push(i);
        }
        report.duration_seconds = started.elapsed().as_secs_f64();
        report.phases = phases;
        return Ok(report);
    }

    let mut sh = ctx::Shared::new(
        &plan,
        &scan,
        opts.metadata,
        &t,
        progress,
        observer,
        opts.cancel.as_deref(),
    );
    sh.aliases = aliases;
    // Before `prepare` removes them.
    reuse::hold(&to_hold);
    // Files found whole while content moves may be held too, up to the same number.
    let room =
        std::sync::atomic::AtomicUsize::new(reuse::held_at_most().saturating_sub(to_hold.len()));
    drop(to_hold);
    let ready = sh.prepare(io_threads);
    lap("prepare", &mut phases);
    // What hashing finds while content moves, for the summary and the report.
    let after = (!deferred.is_empty()).then(|| std::sync::Mutex::new(scan.clone()));
    let mut hashed_for = None;
    if ready {
        let (late_tx, late_rx) = crossbeam_channel::unbounded();
        let (net, hashing) = std::thread::scope(|s| {
            let hasher = if let Some(after) = &after {
                let late_scanner = scan::Scanner {
                    stop: sh.stop_flag(),
                    ..scanner
                };
                let (sh, deferred, room) = (&sh, deferred, &room);
                Some(s.spawn(move || {
                    let began = Instant::now();
                    late::hash_while_restoring(&late_scanner, sh, deferred, late_tx, after, room);
                    began.elapsed().as_secs_f64()
                }))
            } else {
                drop(late_tx);
                None
            };
            let net = network::run(&sh, repo, index, t, reusable, late_rx, observer);
            (net, hasher.and_then(|h| h.join().ok()))
        });
        hashed_for = hashing;
        report.packs_read = net.sched.packs_read;
        report.rereads = net.sched.rereads;
        report.cache_hits = net.sched.cache_hits;
        report.evictions = net.sched.evictions;
        report.peak_memory = net.sched.peak_memory;
        report.stages = net.stages;
        report.stalls = net.stalls;
    }
    lap("content", &mut phases);
    if let Some(secs) = hashed_for {
        // Not a phase of its own: the files to hash were hashed during the content phase.
        phases.push(("hashing (during content)", secs));
    }
    let unfinished = sh.date_unfinished();
    if let Some(mut e) = sh.take_fatal() {
        if let RestoreError::NoSpace { unfinished: n, .. } = &mut e {
            *n = unfinished;
        }
        return Err(e);
    }
    let after = after.map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()));
    let scan = match &after {
        Some(done) => {
            // The target's own blocks lent to the files written, those found whole while
            // content moved included (with --reuse-from nothing is hashed then).
            let mut lenders = lenders;
            lenders.extend(inodes.take_lenders());
            report.plan = summary::summarize(
                &plan,
                done,
                &reuse::local(&plan, done, lenders).0,
                observer,
                summary::Tell::Deferred,
            );
            report.files_hashed = done.files_hashed;
            report.bytes_hashed = checker.bytes_read.load(Ordering::Relaxed);
            done
        }
        None => &scan,
    };
    let c = &sh.counters;
    let deletes_failed = c.deletes_failed.load(Ordering::Relaxed);
    report.deletes_failed += deletes_failed;
    report.plan.deletes = report.plan.deletes.saturating_sub(deletes_failed);
    report.fetched_bytes = c.fetched.load(Ordering::Relaxed);
    report.requests = c.requests.load(Ordering::Relaxed);
    report.retries += c.retries.load(Ordering::Relaxed);
    report.blocks_decoded = c.decoded.load(Ordering::Relaxed);
    report.other_copies = c.other_copies.load(Ordering::Relaxed);
    report.blocks_copied = c.copied_blocks.load(Ordering::Relaxed);
    report.bytes_copied = c.copied.load(Ordering::Relaxed);
    report.blocks_reused = c.reused_blocks.load(Ordering::Relaxed);
    report.bytes_reused = c.reused.load(Ordering::Relaxed);
    report.bytes_holes = c.holes.load(Ordering::Relaxed);
    report.bytes_direct = c.direct.load(Ordering::Relaxed);
    report.bytes_hinted = c.hinted.load(Ordering::Relaxed);
    report.bytes_written = c.written.load(Ordering::Relaxed) + report.bytes_copied;
    report.files = c.files_done.load(Ordering::Relaxed);
    let failed = |f: u32| sh.file_flags[f as usize].load(Ordering::Relaxed) & ctx::FAILED != 0;
    for (f, fp) in plan.files.iter().enumerate() {
        if !failed(f as u32)
            && !matches!(
                scan.entries[fp.entry as usize],
                scan::EntryAction::Skip | scan::EntryAction::Blocked(_)
            )
        {
            report.bytes += fp.size;
        }
    }
    // What lies in a directory that could not be made is not counted.
    let made = |e: &plan::EntryPlan| !sh.dir_failed(e.parent);
    // Nor are folders left alone (the repository read from, and what it holds).
    let not_made = sh
        .dir_failed
        .iter()
        .zip(&scan.dirs)
        .skip(1)
        .filter(|(f, a)| f.load(Ordering::Relaxed) || matches!(a, scan::DirAction::Blocked(_)));
    report.dirs = report.dirs.saturating_sub(not_made.count() as u64);
    report.issues.extend(sh.take_issues());
    report.owners_refused = sh.owners_refused();
    // Nor what the scan found in the way, or what failed: the summary counted a symlink and
    // a hard link that were reported not restored (hunt 30).
    let failed_paths: std::collections::HashSet<&Path> =
        report.issues.iter().map(|i| i.path.as_path()).collect();
    let restored = |e: u32| {
        made(&plan.entries[e as usize])
            && !matches!(
                scan.entries[e as usize],
                scan::EntryAction::Skip | scan::EntryAction::Blocked(_)
            )
            && (failed_paths.is_empty() || !failed_paths.contains(plan.entry_path(e).as_path()))
    };
    report.hardlinks = plan
        .links
        .iter()
        .filter(|(first, _)| {
            // A first name left as it is (--overwrite never, if-newer) still gets its
            // further names linked (they were listed, and not counted).
            (restored(**first)
                || (scan.entries[**first as usize] == scan::EntryAction::Skip
                    && made(&plan.entries[**first as usize])))
                && match plan.entries[**first as usize].kind {
                    plan::EntryKind::File(f) => !failed(f),
                    _ => true,
                }
        })
        .flat_map(|(_, links)| links)
        // A name already linked counts as a file found right does (it was left out, so that
        // a restore with nothing to do said "0 hard links" where the first said 2).
        .filter(|&&l| restored(l) || (scan.is_linked(l) && made(&plan.entries[l as usize])))
        .count() as u64;
    report.others = (0..plan.entries.len() as u32)
        .filter(|&e| {
            matches!(
                plan.entries[e as usize].kind,
                plan::EntryKind::Symlink | plan::EntryKind::Special
            ) && restored(e)
        })
        .count() as u64;
    if opts.verify {
        let (n, issues) = reuse::verify(
            &plan,
            scan,
            &failed,
            &checker,
            stat_threads,
            opts.cancel.as_deref().unwrap_or(&stop),
        );
        report.files_verified = n;
        report.verify_failures = issues.len() as u64;
        for i in issues {
            observer.issue(&i);
            report.issues.push(i);
        }
        lap("verify", &mut phases);
    }
    if opts
        .cancel
        .as_ref()
        .is_some_and(|c| c.load(Ordering::Relaxed))
    {
        return Err(RestoreError::Interrupted);
    }
    report.phases = phases;
    report.duration_seconds = started.elapsed().as_secs_f64();
    durable.finish();
    Ok(report)
}

/// Where `path`, an absolute path of the snapshot, lands under `target`.
pub fn target_path(target: &Path, path: &Path) -> PathBuf {
    target.join(path.strip_prefix("/").unwrap_or(path))
}
