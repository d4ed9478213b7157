//! The blob-saving pipeline: sealing workers → packer → uploaders, joined by bounded
//! channels with no cycle. Errors travel down as values; the first one stops the stages
//! upstream (their sends fail) and is returned by [`Saver::finish`], the single place that
//! shuts the pipeline down.
//!
//! A byte budget bounds the blob data between [`Saver::save`] and the packer whatever the
//! file sizes; the uploaders write an index file every few packs or seconds, so a killed
//! backup leaves its uploaded packs indexed and a rerun does not upload them again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexFile};
use arca_repo::blob::{SealedBlob, compress_blob_into, seal_into};
use arca_repo::pack::{FinishedPack, PackWriter};
use arca_repo::profile::{Clock, StageProfile, stage};
use arca_repo::{RepoError, Repository};
use crossbeam_channel::{Receiver, Sender, bounded};

use crate::pool::Pool;

/// Index checkpoint: write an index file after this many packs...
const CHECKPOINT_PACKS: usize = 8;
/// ...or after this much time with unindexed packs.
const CHECKPOINT_AGE: Duration = Duration::from_secs(20);

/// Chunk buffers up to this capacity are recycled (chunks average 1 MiB, at most 4 MiB;
/// sealing adds a few bytes).
const POOLED_CHUNK: usize = (4 << 20) + (64 << 10);

/// How the pipeline runs.
#[derive(Debug, Clone, Copy)]
pub struct SaverConfig {
    /// zstd level (0: none).
    pub level: i32,
    /// Compressing and sealing threads.
    pub workers: usize,
    /// Packs being uploaded at once.
    pub uploads: usize,
    /// Bytes of blob data allowed between `save` and the packer.
    pub budget: u64,
    /// Threads that may fill large chunk buffers at once (readers of files over a small
    /// reader buffer).
    pub producers: usize,
    /// Make and count packs but write nothing.
    pub dry_run: bool,
}

/// A blob to store.
struct Job {
    kind: BlobKind,
    id: Id,
    data: Vec<u8>,
}

/// What the pipeline stored.
#[derive(Debug, Default, Clone)]
pub struct SaverStats {
    /// Packs uploaded.
    pub packs: u64,
    /// Bytes uploaded in packs.
    pub pack_bytes: u64,
    /// Sealed bytes of the blobs stored.
    pub blob_bytes: u64,
    /// Index files written.
    pub index_files: Vec<Id>,
    /// Where the stages spent their time.
    pub profile: Vec<StageProfile>,
}

/// Counts the bytes of blob data in flight; `acquire` waits while the budget is spent.
#[derive(Debug)]
struct Budget {
    limit: u64,
    state: Mutex<(u64, bool)>,
    freed: Condvar,
}

impl Budget {
    fn new(limit: u64) -> Self {
        Self {
            limit,
            state: Mutex::new((0, false)),
            freed: Condvar::new(),
        }
    }

    /// Takes `n` bytes, waiting for room (a blob larger than the whole budget passes when
    /// nothing else is in flight); false once the pipeline has closed.
    fn acquire(&self, n: u64) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while !s.1 && s.0 > 0 && s.0 + n > self.limit {
            s = self.freed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.1 {
            return false;
        }
        s.0 += n;
        true
    }

    fn release(&self, n: u64) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.0 = s.0.saturating_sub(n);
        self.freed.notify_all();
    }

    /// Wakes every waiter for good: the stage that frees bytes has stopped.
    fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.freed.notify_all();
    }
}

/// Closes the budget when the packer ends, whichever way it ends.
struct CloseOnDrop<'a>(&'a Budget);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Buffers handed back by later stages: chunk data (reader → sealer), sealed blobs
/// (sealer → packer) and packs (packer → uploader).
#[derive(Debug)]
struct Pools {
    chunks: Pool,
    sealed: Pool,
    packs: Pool,
}

/// A sealed blob and the plaintext bytes it holds of the budget.
struct Sealed {
    blob: SealedBlob,
    held: u64,
}

type Handle<'s, T> = ScopedJoinHandle<'s, Result<T, RepoError>>;

/// Handle of a running pipeline.
pub struct Saver<'scope> {
    jobs: Option<Sender<Job>>,
    budget: Arc<Budget>,
    pools: Arc<Pools>,
    workers: Vec<Handle<'scope, (Clock, Duration)>>,
    packer: Handle<'scope, (u64, Clock)>,
    uploaders: Vec<Handle<'scope, Clock>>,
    index: Arc<Mutex<Checkpoint>>,
    repo: &'scope Repository,
    dry_run: bool,
}

/// The pipeline has stopped because a stage failed; [`Saver::finish`] returns the cause.
#[derive(Debug)]
pub struct Stopped;

impl<'scope> Saver<'scope> {
    /// Starts the stages on `scope`.
    pub fn start<'env: 'scope>(
        scope: &'scope Scope<'scope, 'env>,
        repo: &'env Repository,
        cfg: SaverConfig,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Self {
        let workers = cfg.workers.max(1);
        let uploads = cfg.uploads.max(1);
        let (job_tx, job_rx) = bounded::<Job>(workers);
        let (blob_tx, blob_rx) = bounded::<Sealed>(workers);
        // Handed over, not queued: an uploader idles while the next pack fills, and a queued
        // pack would hold a pack's worth of memory for nothing.
        let (pack_tx, pack_rx) = bounded::<FinishedPack>(0);
        let budget = Arc::new(Budget::new(cfg.budget.max(1)));
        // Enough free buffers for everything the stages hold at once (each producer and worker
        // one, each channel its capacity), so that steady state allocates nothing: with the
        // allocator returning large buffers to the system (the CLI's `malloc` module) every
        // fresh one costs page faults.
        let pack_size = repo.config().pack_size as usize;
        let pools = Arc::new(Pools {
            chunks: Pool::new(workers * 2 + cfg.producers + 2, POOLED_CHUNK),
            sealed: Pool::new(workers * 2 + 2, POOLED_CHUNK),
            packs: Pool::new(uploads + 1, usize::MAX),
        });
        let worker_handles = (0..workers)
            .map(|_| {
                let rx = job_rx.clone();
                let tx = blob_tx.clone();
                let pools = Arc::clone(&pools);
                scope.spawn(move || seal_stage(repo, cfg.level, rx, tx, &pools))
            })
            .collect();
        drop(blob_tx);
        let (b, p) = (Arc::clone(&budget), Arc::clone(&pools));
        let packer = scope
            .spawn(move || pack_stage(repo, pack_size, !cfg.dry_run, blob_rx, pack_tx, &b, &p));
        let index = Arc::new(Mutex::new(Checkpoint::default()));
        let failed = Arc::new(AtomicBool::new(false));
        let uploaders = (0..uploads)
            .map(|_| {
                let rx = pack_rx.clone();
                let (index, failed) = (Arc::clone(&index), Arc::clone(&failed));
                let pools = Arc::clone(&pools);
                let cancel = cancel.clone();
                scope.spawn(move || {
                    let stop = Stop {
                        failed: &failed,
                        cancel: cancel.as_deref(),
                    };
                    upload_stage(repo, rx, cfg.dry_run, &index, stop, &pools.packs)
                })
            })
            .collect();
        Self {
            jobs: Some(job_tx),
            budget,
            pools,
            workers: worker_handles,
            packer,
            uploaders,
            index,
            repo,
            dry_run: cfg.dry_run,
        }
    }

    /// An empty buffer for a chunk, recycled from blobs already sealed.
    pub(crate) fn buffer(&self) -> Vec<u8> {
        self.pools.chunks.take()
    }

    /// Hands back a chunk buffer that was not queued.
    pub(crate) fn recycle(&self, buf: Vec<u8>) {
        self.pools.chunks.give(buf);
    }

    /// Queues a blob. Blocks while the budget or the pipeline is full; fails once a stage
    /// has stopped.
    pub fn save(&self, kind: BlobKind, id: Id, data: Vec<u8>) -> Result<(), Stopped> {
        let Some(tx) = &self.jobs else {
            return Err(Stopped);
        };
        let n = data.len() as u64;
        if !self.budget.acquire(n) {
            return Err(Stopped);
        }
        tx.send(Job { kind, id, data }).map_err(|_| {
            self.budget.release(n);
            Stopped
        })
    }

    /// Closes the input, waits for every blob to be uploaded and indexed, and returns the
    /// statistics or the first error of any stage.
    pub fn finish(mut self) -> Result<SaverStats, RepoError> {
        self.jobs = None;
        let mut first: Option<RepoError> = None;
        let mut keep = |e: RepoError| {
            first.get_or_insert(e);
        };
        let mut seal_clocks = vec![];
        let mut compress = Duration::ZERO;
        for w in self.workers {
            match w
                .join()
                .unwrap_or_else(|_| Err(panic_error("sealing worker")))
            {
                Ok((c, z)) => {
                    seal_clocks.push(c);
                    compress += z;
                }
                Err(e) => keep(e),
            }
        }
        let (blob_bytes, pack_clock) = match self
            .packer
            .join()
            .unwrap_or_else(|_| Err(panic_error("packer")))
        {
            Ok((b, c)) => (b, vec![c]),
            Err(e) => {
                keep(e);
                (0, vec![])
            }
        };
        let mut up_clocks = vec![];
        for u in self.uploaders {
            match u.join().unwrap_or_else(|_| Err(panic_error("uploader"))) {
                Ok(c) => up_clocks.push(c),
                Err(e) => keep(e),
            }
        }
        if let Some(e) = first {
            return Err(e);
        }
        let mut cp = std::mem::take(&mut *self.index.lock().unwrap_or_else(|p| p.into_inner()));
        if !self.dry_run {
            cp.flush(self.repo)?;
        }
        let mut stats = cp.stats;
        stats.blob_bytes = blob_bytes;
        // Compressing and sealing run on the same threads: the compression share of their
        // busy time is reported as its own stage.
        let mut seal = stage("seal", &seal_clocks);
        seal.busy = (seal.busy - compress.as_secs_f64()).max(0.0);
        stats.profile = vec![
            StageProfile {
                name: "compress",
                threads: seal_clocks.len(),
                busy: compress.as_secs_f64(),
                wait_in: 0.0,
                wait_out: 0.0,
            },
            seal,
            stage("pack", &pack_clock),
            stage("upload", &up_clocks),
        ];
        Ok(stats)
    }
}

fn panic_error(stage: &str) -> RepoError {
    RepoError::Invalid {
        what: "backup pipeline",
        detail: format!("{stage} thread panicked"),
    }
}

/// Returns the compression time besides the thread's clock.
fn seal_stage(
    repo: &Repository,
    level: i32,
    rx: Receiver<Job>,
    tx: Sender<Sealed>,
    pools: &Pools,
) -> Result<(Clock, Duration), RepoError> {
    let sealer = repo.sealer().clone();
    let mut clock = Clock::new();
    let mut compress = Duration::ZERO;
    let mut packed = Vec::new();
    for job in rx.iter() {
        clock.waited_in();
        let t = Instant::now();
        let smaller = compress_blob_into(&job.data, level, &mut packed);
        compress += t.elapsed();
        let payload = smaller.then_some(packed.as_slice());
        let out = pools.sealed.take();
        let blob = seal_into(&sealer, job.kind, job.id, &job.data, payload, out)?;
        let held = job.data.len() as u64;
        pools.chunks.give(job.data);
        clock.busy();
        let sent = tx.send(Sealed { blob, held });
        clock.waited_out();
        if sent.is_err() {
            // The packer stopped; its error is reported by finish().
            break;
        }
    }
    clock.waited_in();
    Ok((clock, compress))
}

fn pack_stage(
    repo: &Repository,
    pack_size: usize,
    stream: bool,
    rx: Receiver<Sealed>,
    tx: Sender<FinishedPack>,
    budget: &Budget,
    pools: &Pools,
) -> Result<(u64, Clock), RepoError> {
    let _close = CloseOnDrop(budget);
    // Data packs go straight into their file where the backend writes in pieces (a local
    // folder), instead of filling a pack-sized buffer first; tree packs stay in memory
    // (small, and a cache keeps a copy of them).
    let new = |kind| -> Result<PackWriter, RepoError> {
        if stream
            && kind == BlobKind::Data
            && let Some(sink) = repo.backend().sink(FileType::Pack)?
        {
            return Ok(PackWriter::streaming(kind, sink));
        }
        let mut buf = pools.packs.take();
        buf.reserve(pack_size + pack_size / 8);
        Ok(PackWriter::with_buffer(kind, buf))
    };
    let mut writers = [new(BlobKind::Data)?, new(BlobKind::Tree)?];
    let mut sealed_bytes = 0u64;
    let mut clock = Clock::new();
    for Sealed { blob, held } in rx.iter() {
        clock.waited_in();
        sealed_bytes += blob.bytes.len() as u64;
        let slot = blob.kind.code() as usize;
        let kind = blob.kind;
        writers[slot].add(&blob)?;
        pools.sealed.give(blob.bytes);
        budget.release(held);
        if writers[slot].size() >= pack_size {
            let full = std::mem::replace(&mut writers[slot], new(kind)?);
            let pack = full.finish(repo.sealer())?;
            clock.busy();
            let sent = tx.send(pack);
            clock.waited_out();
            if sent.is_err() {
                return Ok((sealed_bytes, clock));
            }
        } else {
            clock.busy();
        }
    }
    clock.waited_in();
    for w in writers {
        if !w.is_empty() {
            let pack = w.finish(repo.sealer())?;
            clock.busy();
            let sent = tx.send(pack);
            clock.waited_out();
            if sent.is_err() {
                break;
            }
        }
    }
    Ok((sealed_bytes, clock))
}

/// Packs uploaded but not yet named in an index file, and the running totals.
#[derive(Debug, Default)]
struct Checkpoint {
    pending: IndexFile,
    oldest: Option<Instant>,
    stats: SaverStats,
}

impl Checkpoint {
    fn flush(&mut self, repo: &Repository) -> Result<(), RepoError> {
        if !self.pending.packs.is_empty() {
            self.stats.index_files.push(repo.save_index(&self.pending)?);
            self.pending.packs.clear();
        }
        self.oldest = None;
        Ok(())
    }
}

/// What stops the uploaders: another uploader's failure, or Ctrl-C (the packs being
/// uploaded finish and are indexed; the ones after them are not sent, and the stages before
/// stop as their hand-over fails).
#[derive(Clone, Copy)]
struct Stop<'a> {
    failed: &'a AtomicBool,
    cancel: Option<&'a AtomicBool>,
}

impl Stop<'_> {
    fn now(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
            || self.cancel.is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

fn upload_stage(
    repo: &Repository,
    rx: Receiver<FinishedPack>,
    dry_run: bool,
    index: &Mutex<Checkpoint>,
    stop: Stop<'_>,
    packs: &Pool,
) -> Result<Clock, RepoError> {
    let failed = stop.failed;
    let backend = Arc::clone(repo.backend());
    let mut clock = Clock::new();
    for mut pack in rx.iter() {
        clock.waited_in();
        if stop.now() {
            break;
        }
        if !dry_run {
            if pack.index.kind == BlobKind::Tree {
                // A cache keeps tree packs: the next backup reads these listings locally.
                backend.note_tree_packs(&[pack.id.to_hex()]);
            }
            if let Err(e) = pack.store(backend.as_ref()) {
                failed.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        let mut cp = index.lock().unwrap_or_else(|p| p.into_inner());
        cp.stats.packs += 1;
        cp.stats.pack_bytes += pack.index.size;
        if !dry_run {
            cp.pending.packs.push(pack.index);
            let since = *cp.oldest.get_or_insert_with(Instant::now);
            let due =
                cp.pending.packs.len() >= CHECKPOINT_PACKS || since.elapsed() >= CHECKPOINT_AGE;
            if due && let Err(e) = cp.flush(repo) {
                failed.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        drop(cp);
        packs.give(pack.bytes);
        clock.busy();
    }
    clock.waited_in();
    Ok(clock)
}
