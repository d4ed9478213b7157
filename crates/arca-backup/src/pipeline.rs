//! The backup network and the one place that starts and stops it: the walk (this thread) →
//! readers → saver, and walk + readers → tree assembler → saver; bounded channels, no cycle.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use arca_format::{Id, SnapshotSummary};
use arca_repo::profile::{StageProfile, stage};
use arca_repo::{Index, RepoError, Repository};
use crossbeam_channel::bounded;

use crate::archiver::{Fatal, Walker};
use crate::assemble::{self, Msg};
use crate::dedup::Known;
use crate::filter::Filter;
use crate::links::Links;
use crate::pool::Buffers;
use crate::prefetch::Prefetcher;
use crate::reader::{FileJob, FileReader, ReadTimes};
use crate::report::Reporter;
use crate::saver::{Saver, SaverConfig, SaverStats};
use crate::{BackupOptions, Observer, Progress, Warning};

/// What every stage shares.
pub(crate) struct Ctx<'a, 's> {
    pub repo: &'a Repository,
    pub known: Known<'a>,
    pub saver: &'a Saver<'s>,
    pub progress: &'a Progress,
    pub report: Reporter<'a>,
    pub opts: &'a BackupOptions,
    /// [`Shape::reuse_metadata`].
    pub reuse_metadata: bool,
    /// The second the parent snapshot's backup started (`i64::MAX` without one). On a file
    /// system that keeps whole seconds (ext3, FAT, many NFS servers: the entry's mtime and
    /// ctime have no nanoseconds), an entry the parent recorded with an mtime or ctime in that
    /// second or later may have changed again within the same second after it was read,
    /// unseen: its record is not trusted (git's "racy" rule). The snapshot kept the old
    /// content for good, and restic does the same. (Where times have nanoseconds the window
    /// is a clock tick, or none on kernels that give every change after a stat a new time.)
    pub settled_before: i64,
    /// The one buffer large files are read through, so that they are streamed one at a time.
    pub large: Buffers,
    /// The buffers of the other files too big for a reader's own small buffer: as many such
    /// files are read at once as there are buffers, whatever the number of readers.
    pub medium: Buffers,
    /// The names of hard-linked files being read, shared by the walk and the readers.
    pub links: Links,
}

impl Ctx<'_, '_> {
    /// Whether the parent snapshot's record of an entry can be trusted for change detection
    /// ([`Ctx::settled_before`]).
    pub(crate) fn settled(&self, parent: &arca_format::Node) -> bool {
        let whole_seconds = parent.mtime.nsec == 0 && parent.ctime.nsec == 0;
        !whole_seconds
            || (parent.mtime.sec < self.settled_before && parent.ctime.sec < self.settled_before)
    }

    /// Whether the user asked the backup to stop.
    pub(crate) fn cancelled(&self) -> bool {
        self.opts
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// The parent snapshot's directory listings, loaded in bulk up front (a few ranged reads per
/// level of the tree, not one request per directory); none without a parent. A listing that
/// could not be loaded is absent: its files are read again.
pub(crate) type ParentTrees = Option<arca_repo::trees::ParentTrees>;

/// Adds the counters of `b` to `a`.
pub(crate) fn add_summary(a: &mut SnapshotSummary, b: &SnapshotSummary) {
    a.files_new += b.files_new;
    a.files_changed += b.files_changed;
    a.files_unmodified += b.files_unmodified;
    a.dirs_new += b.dirs_new;
    a.dirs_changed += b.dirs_changed;
    a.dirs_unmodified += b.dirs_unmodified;
    a.other_entries += b.other_entries;
    a.data_blobs += b.data_blobs;
    a.tree_blobs += b.tree_blobs;
    a.data_added += b.data_added;
    a.total_files_processed += b.total_files_processed;
    a.total_bytes_processed += b.total_bytes_processed;
}

/// Where the walk comes from.
pub(crate) enum Source<'r> {
    /// The tree of paths, with the parent snapshot's root listing.
    Paths(&'r crate::sources::SourceTree, Option<Id>),
    /// One stream stored as `/NAME`.
    Stdin(&'r [u8], &'r mut dyn std::io::Read),
}

/// What the network produced.
pub(crate) struct Outcome {
    pub root: Result<Id, Fatal>,
    pub summary: SnapshotSummary,
    pub warnings: Vec<Warning>,
    pub counts: crate::archiver::WalkCounts,
    pub saved: Result<SaverStats, RepoError>,
    pub profile: Vec<StageProfile>,
    /// Blocks stored again by capping, and their bytes.
    pub capped: (u64, u64),
}

/// Knobs of the network.
pub(crate) struct Shape {
    pub saver: SaverConfig,
    pub readers: usize,
    /// Files bigger than a reader's own buffer read at once.
    pub medium_reads: usize,
    /// Entries unchanged since the parent snapshot (same inode and ctime) take their extended
    /// attributes from it instead of reading them. Not with `--force`, nor when the parent was
    /// made by another user: a user sees fewer attributes than root (no `trusted.*`), and
    /// ctime does not change with who reads.
    pub reuse_metadata: bool,
    /// [`Ctx::settled_before`].
    pub settled_before: i64,
    /// Packs the index names that the repository does not hold ([`Index::packs`]
    /// positions): their blobs are stored again when met, not referenced.
    pub gone_packs: std::collections::HashSet<u32>,
}

/// Runs the whole backup network over `source` and shuts it down.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    repo: &Repository,
    index: &Index,
    parents: &ParentTrees,
    filter: Arc<Filter>,
    prefetch: Prefetcher,
    opts: &BackupOptions,
    shape: &Shape,
    progress: &Progress,
    observer: &dyn Observer,
    source: Source<'_>,
) -> Outcome {
    std::thread::scope(|outer| {
        let saver = Saver::start(outer, repo, shape.saver, opts.cancel.clone());
        let ctx = Ctx {
            repo,
            // Listings of the parent that could not be read are stored again if met.
            known: Known::new(
                index,
                parents
                    .iter()
                    .flat_map(|p| p.failed().iter().map(|(id, _)| *id))
                    .collect(),
                shape.gone_packs.clone(),
            ),
            saver: &saver,
            reuse_metadata: shape.reuse_metadata,
            settled_before: shape.settled_before,
            progress,
            report: Reporter::new(observer),
            opts,
            large: Buffers::new(1),
            medium: Buffers::new(shape.medium_reads),
            links: Links::default(),
        };
        let readers = shape.readers.max(1);
        let (job_tx, job_rx) = bounded::<FileJob>(readers * 4);
        let (msg_tx, msg_rx) = bounded::<Msg>(1024);
        let (walked, reads, assembled) = std::thread::scope(|inner| {
            let reader_handles: Vec<_> = (0..readers)
                .map(|_| {
                    let (rx, tx, ctx) = (job_rx.clone(), msg_tx.clone(), &ctx);
                    inner.spawn(move || FileReader::new(ctx).run(rx, tx))
                })
                .collect();
            drop(job_rx);
            let assembler = inner.spawn(|| assemble::run(&ctx, msg_rx));
            let mut walker =
                Walker::new(&ctx, parents, Arc::clone(&filter), prefetch, job_tx, msg_tx);
            let root = match source {
                Source::Paths(src, parent_root) => walker.run(src, parent_root),
                Source::Stdin(name, reader) => walker.run_stdin(name, reader),
            };
            walker.clock.busy();
            // Dropping the walker closes its senders: the readers finish their queue, then
            // the assembler sees every sender gone.
            let (summary, counts, clock) = walker.into_parts();
            let reads: Vec<_> = reader_handles
                .into_iter()
                .filter_map(|h| h.join().ok())
                .map(|r| (r.summary, r.times, r.copied, r.skipped))
                .collect();
            let assembled = assembler.join().ok();
            ((root, summary, counts, clock), reads, assembled)
        });
        let (root, mut summary, counts, walk_clock) = walked;
        let mut times: Vec<ReadTimes> = vec![];
        let mut capped = (0, 0);
        // Files the walk counted as processed but that could not be read are not in the
        // snapshot (a file that vanished was counted among 31 processed, 30 stored).
        let mut skipped = (0, 0);
        for (s, t, c, k) in &reads {
            add_summary(&mut summary, s);
            times.push(*t);
            capped = (capped.0 + c.0, capped.1 + c.1);
            skipped = (skipped.0 + k.0, skipped.1 + k.1);
        }
        let mut profile = vec![stage("walk", std::slice::from_ref(&walk_clock))];
        profile.extend(ReadTimes::stages(&times));
        let root = match assembled {
            Some(a) => {
                add_summary(&mut summary, &a.summary);
                skipped = (skipped.0 + a.skipped.0, skipped.1 + a.skipped.1);
                profile.push(stage("assemble", std::slice::from_ref(&a.clock)));
                match (root, a.error, a.root) {
                    (Err(Fatal::Stopped), None, _) if ctx.cancelled() => Err(Fatal::Cancelled),
                    (Err(f), ..) => Err(f),
                    (Ok(()), Some(e), _) => Err(Fatal::Repo(e)),
                    (Ok(()), None, Some(id)) => Ok(id),
                    // Readers stop taking files on Ctrl-C, so the tree stays unfinished.
                    (Ok(()), None, None) if ctx.cancelled() => Err(Fatal::Cancelled),
                    (Ok(()), None, None) => Err(Fatal::Stopped),
                }
            }
            None => Err(Fatal::Repo(RepoError::Invalid {
                what: "backup pipeline",
                detail: "tree assembler thread panicked".into(),
            })),
        };
        summary.total_files_processed = summary.total_files_processed.saturating_sub(skipped.0);
        summary.total_bytes_processed = summary.total_bytes_processed.saturating_sub(skipped.1);
        let warnings = ctx.report.into_list();
        let saved = saver.finish();
        if let Ok(s) = &saved {
            profile.extend(s.profile.iter().cloned());
        }
        Outcome {
            root,
            summary,
            warnings,
            counts,
            saved,
            profile,
            capped,
        }
    })
}
