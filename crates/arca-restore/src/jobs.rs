//! The messages of the restore network: what the scheduler asks fetchers and workers to do,
//! and the one kind of report every job ends with; what a block that cannot be had says.

use std::sync::Arc;

use crate::ctx::Shared;

/// Where one block goes: file, offset, and which use of the plan it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub file: u32,
    pub offset: u64,
}

/// A file the scan had to hash, hashed while content moved: it holds the blocks `held` says
/// (one per use of the file), and is to be written (`write`) or is whole already. A file
/// right in content that is written anew all the same (for its names beyond the restore's)
/// lends its blocks from the old inode, held open (`lender`).
#[derive(Debug)]
pub(crate) struct Late {
    pub file: u32,
    pub held: Vec<bool>,
    pub write: bool,
    pub lender: Option<std::sync::Arc<crate::reuse::Source>>,
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
    /// The read failed (not an outage: the pack is missing or cut short), with this cause:
    /// the workers take each blob from another copy, or fail its files.
    pub failed: Option<String>,
    /// The pack was there but shorter than the read: the blobs before its end may be whole,
    /// and are read one by one (a cut pack failed every file with a block in the read).
    pub short: bool,
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
    /// Copy it from a file that lends it (a `--reuse-from` tree's, or the target's own),
    /// after checking it.
    Reuse {
        blob: u32,
        from: std::sync::Arc<crate::reuse::Source>,
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

/// The message for a block that cannot be had.
pub(crate) fn lost(sh: &Shared, t: Target, why: &str) -> String {
    format!(
        "{}: content at offset {} not restored: {why}",
        arca_format::text::shown(&sh.plan.file_path(t.file)),
        t.offset
    )
}

/// Turns single-block copies into as few copies as possible: runs that are contiguous both
/// in the source file and in the destination file become one copy (a whole duplicated file
/// becomes one `copy_file_range`, which a file system with shared extents turns into a
/// reflink).
pub(crate) fn merge_copies(mut copies: Vec<(Target, Target, u64, u32)>) -> Vec<PlaceOp> {
    copies.sort_by_key(|(dst, ..)| (dst.file, dst.offset));
    let mut out: Vec<PlaceOp> = vec![];
    for (dst, src, len, blob) in copies {
        if let Some(PlaceOp::Copy {
            src: s,
            dst: d,
            len: l,
            parts,
        }) = out.last_mut()
            && d.file == dst.file
            && d.offset + *l == dst.offset
            && s.file == src.file
            && s.offset + *l == src.offset
        {
            *l += len;
            parts.push((blob, dst));
            continue;
        }
        out.push(PlaceOp::Copy {
            src,
            dst,
            len,
            parts: vec![(blob, dst)],
        });
    }
    out
}

/// File bytes an operation places (for batching).
pub(crate) fn op_bytes(sh: &Shared, op: &PlaceOp) -> u64 {
    let raw = |b: &u32| u64::from(sh.plan.blobs[*b as usize].raw_len);
    match op {
        PlaceOp::Copy { len, .. } => *len,
        PlaceOp::Reuse { blob, targets, .. }
        | PlaceOp::Write { blob, targets, .. }
        | PlaceOp::Zero { blob, targets } => raw(blob) * targets.len() as u64,
    }
}

/// Memory an operation holds.
pub(crate) fn op_cost(op: &PlaceOp) -> u64 {
    match op {
        PlaceOp::Write { data, .. } => data.len() as u64,
        _ => 0,
    }
}
