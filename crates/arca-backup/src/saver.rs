//! The blob-saving pipeline: sealing workers → packer → uploader, joined by bounded
//! channels with no cycle. Errors travel down as values; the first one stops the stages
//! upstream (their sends fail) and is returned by [`Saver::finish`], the single place that
//! shuts the pipeline down.
//!
//! The uploader writes an index file every few packs, so an interrupted backup leaves
//! uploaded packs indexed and a rerun does not upload them again.

use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexFile};
use arca_repo::blob::{SealedBlob, seal_blob};
use arca_repo::pack::{FinishedPack, PackWriter};
use arca_repo::{RepoError, Repository};
use crossbeam_channel::{Receiver, Sender, bounded};

/// Index checkpoint: write an index file after this many packs...
const CHECKPOINT_PACKS: usize = 32;
/// ...or after this much time with unindexed packs.
const CHECKPOINT_AGE: Duration = Duration::from_secs(300);

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
}

/// Handle of a running pipeline.
pub struct Saver<'scope> {
    jobs: Option<Sender<Job>>,
    workers: Vec<ScopedJoinHandle<'scope, Result<(), RepoError>>>,
    packer: ScopedJoinHandle<'scope, Result<u64, RepoError>>,
    uploader: ScopedJoinHandle<'scope, Result<SaverStats, RepoError>>,
}

/// The pipeline has stopped because a stage failed; [`Saver::finish`] returns the cause.
#[derive(Debug)]
pub struct Stopped;

impl<'scope> Saver<'scope> {
    /// Starts the stages on `scope` with `workers` sealing threads. With `dry_run` the packs
    /// are made and counted but neither they nor index files are written.
    pub fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        repo: &'env Repository,
        level: i32,
        workers: usize,
        dry_run: bool,
    ) -> Self {
        let workers = workers.max(1);
        let (job_tx, job_rx) = bounded::<Job>(workers * 2);
        let (blob_tx, blob_rx) = bounded::<SealedBlob>(workers * 2);
        let (pack_tx, pack_rx) = bounded::<FinishedPack>(1);
        let worker_handles = (0..workers)
            .map(|_| {
                let rx = job_rx.clone();
                let tx = blob_tx.clone();
                scope.spawn(move || seal_stage(repo, level, rx, tx))
            })
            .collect();
        drop(blob_tx);
        let pack_size = repo.config().pack_size as usize;
        let packer = scope.spawn(move || pack_stage(repo, pack_size, blob_rx, pack_tx));
        let uploader = scope.spawn(move || upload_stage(repo, pack_rx, dry_run));
        Self {
            jobs: Some(job_tx),
            workers: worker_handles,
            packer,
            uploader,
        }
    }

    /// Queues a blob. Blocks while the pipeline is full; fails once a stage has stopped.
    pub fn save(&self, kind: BlobKind, id: Id, data: Vec<u8>) -> Result<(), Stopped> {
        match &self.jobs {
            Some(tx) => tx.send(Job { kind, id, data }).map_err(|_| Stopped),
            None => Err(Stopped),
        }
    }

    /// Closes the input, waits for every blob to be uploaded and indexed, and returns the
    /// statistics or the first error of any stage.
    pub fn finish(mut self) -> Result<SaverStats, RepoError> {
        self.jobs = None;
        let mut first: Option<RepoError> = None;
        let mut keep = |r: Result<(), RepoError>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        for w in self.workers {
            keep(
                w.join()
                    .unwrap_or_else(|_| Err(panic_error("sealing worker"))),
            );
        }
        let blob_bytes = match self
            .packer
            .join()
            .unwrap_or_else(|_| Err(panic_error("packer")))
        {
            Ok(b) => b,
            Err(e) => {
                keep(Err(e));
                0
            }
        };
        let up = self
            .uploader
            .join()
            .unwrap_or_else(|_| Err(panic_error("uploader")));
        if let Some(e) = first {
            return Err(e);
        }
        let mut stats = up?;
        stats.blob_bytes = blob_bytes;
        Ok(stats)
    }
}

fn panic_error(stage: &str) -> RepoError {
    RepoError::Invalid {
        what: "backup pipeline",
        detail: format!("{stage} thread panicked"),
    }
}

fn seal_stage(
    repo: &Repository,
    level: i32,
    rx: Receiver<Job>,
    tx: Sender<SealedBlob>,
) -> Result<(), RepoError> {
    let sealer = repo.sealer().clone();
    for job in rx {
        let blob = seal_blob(&sealer, job.kind, job.id, &job.data, level)?;
        drop(job.data);
        if tx.send(blob).is_err() {
            // The packer stopped; its error is reported by finish().
            break;
        }
    }
    Ok(())
}

fn pack_stage(
    repo: &Repository,
    pack_size: usize,
    rx: Receiver<SealedBlob>,
    tx: Sender<FinishedPack>,
) -> Result<u64, RepoError> {
    let new = |kind| PackWriter::new(kind, pack_size + pack_size / 8);
    let mut writers = [new(BlobKind::Data), new(BlobKind::Tree)];
    let mut sealed_bytes = 0u64;
    for blob in rx {
        sealed_bytes += blob.bytes.len() as u64;
        let slot = blob.kind.code() as usize;
        writers[slot].add(&blob)?;
        if writers[slot].size() >= pack_size {
            let full = std::mem::replace(&mut writers[slot], new(blob.kind));
            if tx.send(full.finish(repo.sealer())?).is_err() {
                return Ok(sealed_bytes);
            }
        }
    }
    for w in writers {
        if !w.is_empty() && tx.send(w.finish(repo.sealer())?).is_err() {
            break;
        }
    }
    Ok(sealed_bytes)
}

fn upload_stage(
    repo: &Repository,
    rx: Receiver<FinishedPack>,
    dry_run: bool,
) -> Result<SaverStats, RepoError> {
    let backend = Arc::clone(repo.backend());
    let mut stats = SaverStats::default();
    let mut pending = IndexFile::default();
    let mut oldest: Option<Instant> = None;
    let flush = |pending: &mut IndexFile, stats: &mut SaverStats| -> Result<(), RepoError> {
        if !pending.packs.is_empty() {
            stats.index_files.push(repo.save_index(pending)?);
            pending.packs.clear();
        }
        Ok(())
    };
    for pack in rx {
        if !dry_run {
            backend.write(FileType::Pack, &pack.id.to_hex(), &pack.bytes)?;
        }
        stats.packs += 1;
        stats.pack_bytes += pack.bytes.len() as u64;
        if dry_run {
            continue;
        }
        pending.packs.push(pack.index);
        let since = *oldest.get_or_insert_with(Instant::now);
        if pending.packs.len() >= CHECKPOINT_PACKS || since.elapsed() >= CHECKPOINT_AGE {
            flush(&mut pending, &mut stats)?;
            oldest = None;
        }
    }
    flush(&mut pending, &mut stats)?;
    Ok(stats)
}
