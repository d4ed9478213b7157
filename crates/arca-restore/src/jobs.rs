//! The messages of the restore network: what the scheduler asks fetchers and workers to do,
//! and the one kind of report every job ends with.

use std::path::PathBuf;
use std::sync::Arc;

/// Where one block goes: file, offset, and which use of the plan it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub file: u32,
    pub offset: u64,
}

/// A blob carried by a ranged read, and what to do with it.
#[derive(Debug)]
pub(crate) struct JobBlob {
    pub blob: u32,
    /// Offset of the sealed blob in the read.
    pub rel: u64,
    /// Write it here.
    pub targets: Vec<Target>,
    /// Hand the plaintext back for the cache (its uses lie ahead).
    pub keep: bool,
}

/// One ranged read of a pack.
#[derive(Debug)]
pub(crate) struct FetchJob {
    pub id: u32,
    pub pack: u32,
    pub offset: u64,
    pub len: u64,
    pub blobs: Vec<JobBlob>,
    /// The buffer to read into (reused from earlier reads).
    pub buf: Vec<u8>,
    /// Where the read's bytes start in `buf`.
    pub at: usize,
}

/// Placing a block without fetching it.
#[derive(Debug)]
pub(crate) enum PlaceOp {
    /// Copy a run of blocks from where this restore (or the scan) found them in the target:
    /// `len` bytes from `src` to `dst`, standing for the block uses in `parts`.
    Copy {
        src: Target,
        dst: Target,
        len: u64,
        parts: Vec<(u32, Target)>,
    },
    /// Copy it from a file of a `--reuse-from` tree, after checking it.
    Reuse {
        blob: u32,
        path: PathBuf,
        offset: u64,
        targets: Vec<Target>,
    },
    /// Write it from memory (the cache had it).
    Write {
        blob: u32,
        data: Arc<[u8]>,
        targets: Vec<Target>,
    },
    /// Make it zeros (a hole) in a file being patched.
    Zero { blob: u32, targets: Vec<Target> },
}

/// Block placements bundled into one job.
#[derive(Debug)]
pub(crate) struct PlaceJob {
    pub id: u32,
    pub ops: Vec<PlaceOp>,
}

/// Work for the workers.
#[derive(Debug)]
pub(crate) enum Work {
    /// A read came back: decode its blobs and place them.
    Fetched(FetchJob),
    /// Place blocks from local sources.
    Place(PlaceJob),
}

/// How a job ended; exactly one per job, sent on a channel that never fills.
#[derive(Debug, Default)]
pub(crate) struct Done {
    pub job: u32,
    /// Blobs now on disk, and where (later uses copy from there).
    pub placed: Vec<(u32, Target)>,
    /// Plaintexts for the cache.
    pub kept: Vec<(u32, Arc<[u8]>)>,
    /// Blobs that cannot be had; their targets in this job have been failed already.
    pub failed: Vec<(u32, String)>,
    /// Targets to serve from the repository after all (a local source was unusable).
    pub retry: Vec<(u32, Vec<Target>)>,
    /// File bytes this job settled (placed or failed), for the assembly window.
    pub settled: u64,
    /// The read's buffer, for reuse.
    pub buffer: Option<Vec<u8>>,
}
