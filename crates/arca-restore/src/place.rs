//! The workers: every block read from the repository is decrypted, decompressed and checked
//! against its id before anything is written; blocks land at their offsets with positioned
//! writes (zero pages of new files stay holes); local sources are copied inside the kernel.
//! The last block of a file finishes it.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use arca_format::BlobKind;
use arca_fs::FsError;
use arca_repo::blob::BlobOpener;
use arca_repo::{Index, PackRef, Repository};
use crossbeam_channel::{Receiver, Sender};

use crate::ctx::Shared;
use crate::direct::{DirectJob, DirectQueue};
use crate::jobs::lost;
use crate::jobs::{Done, FetchJob, PlaceJob, PlaceOp, Target, Work};
use crate::profile::{Clock, Post};
use crate::scan::EntryAction;

/// One worker thread's state.
pub(crate) struct Worker<'a, 's> {
    sh: &'a Shared<'s>,
    repo: &'a Repository,
    index: &'a Index,
    packs: &'a [PackRef],
    opener: BlobOpener,
    /// Files open for the current job (closed at its end, or earlier past `max_open`).
    open: HashMap<u32, File>,
    /// Files this worker keeps open at most (beyond those with direct writes in flight): a
    /// pack of small files spans thousands, and the process may open only so many.
    max_open: usize,
    sources: HashMap<u32, File>,
    scratch: Vec<u8>,
    /// Large blocks of new files go to the direct writers through this.
    direct: DirectQueue,
}

impl<'a, 's> Worker<'a, 's> {
    pub fn new(
        sh: &'a Shared<'s>,
        repo: &'a Repository,
        index: &'a Index,
        direct: Option<Sender<DirectJob>>,
    ) -> Self {
        Self {
            sh,
            repo,
            index,
            packs: index.packs(),
            opener: BlobOpener::new(),
            open: HashMap::new(),
            max_open: max_open_files(),
            sources: HashMap::new(),
            scratch: vec![],
            direct: DirectQueue::new(direct),
        }
    }

    /// Runs until the work channel closes. A job's report goes out once its direct writes
    /// landed; meanwhile the worker takes the next job.
    pub fn run(mut self, work: Receiver<Work>, done: Sender<Done>, post: Post<'_>) -> Clock {
        let mut clock = Clock::new();
        post.post("waiting for blocks to place");
        loop {
            for d in self.direct.take_ready() {
                // The channel has room for every job in flight: never blocks.
                let _ = done.send(d);
            }
            let w = if self.direct.in_flight() == 0 {
                work.recv()
            } else {
                crossbeam_channel::select! {
                    recv(work) -> w => w,
                    recv(self.direct.replies()) -> r => {
                        if let Ok(r) = r {
                            clock.waited_in();
                            self.direct.settle(self.sh, &mut self.open, r);
                            self.close_idle();
                            clock.busy();
                        }
                        continue;
                    }
                }
            };
            let Ok(w) = w else { break };
            clock.waited_in();
            self.direct.begin();
            let d = match w {
                Work::Fetched(job) => {
                    post.post(format!(
                        "decoding and writing {} blocks of pack {}",
                        job.blobs.len(),
                        self.packs[job.pack as usize].id.short()
                    ));
                    self.fetched(job)
                }
                Work::Place(job) => {
                    post.post(format!("placing {} local blocks", job.ops.len()));
                    self.place(job)
                }
            };
            self.direct.end(d);
            self.close_idle();
            self.sources.clear();
            clock.busy();
            post.post("waiting for blocks to place");
        }
        clock.waited_in();
        post.post("waiting for the last direct writes");
        self.direct.drain(self.sh, &mut self.open);
        for d in self.direct.take_ready() {
            let _ = done.send(d);
        }
        clock.waited_out();
        clock
    }

    /// Closes idle files once more than `max_open` are open (a file closed before its last
    /// block is opened again for it; one finished is closed for good).
    fn bound_open(&mut self) {
        if self.open.len() > self.max_open {
            self.close_idle();
        }
    }

    /// Closes the files no direct write of this worker still needs.
    fn close_idle(&mut self) {
        let direct = &self.direct;
        self.open.retain(|&f, _| direct.busy(f));
    }

    /// Decodes every blob of a read and writes it to its targets.
    fn fetched(&mut self, mut job: FetchJob) -> Done {
        let sh = self.sh;
        let pack = self.packs[job.pack as usize].id;
        let mut d = Done {
            job: job.id,
            ..Done::default()
        };
        let mut buf = std::mem::take(&mut job.buf);
        for jb in job.blobs {
            if sh.stopped() {
                break;
            }
            let bp = &sh.plan.blobs[jb.blob as usize];
            let len = u64::from(bp.raw_len);
            let start = job.at + jb.rel as usize;
            let opened = match (&job.failed, buf.get_mut(start..start + bp.length as usize)) {
                (Some(why), _) => Err(why.clone()),
                (None, None) => Err("read came back short".into()),
                (None, Some(sealed)) => self
                    .opener
                    .open(
                        self.repo.key(),
                        self.repo.sealer(),
                        BlobKind::Data,
                        bp.id,
                        pack,
                        sealed,
                        bp.raw_len,
                    )
                    .map_err(|e| e.to_string()),
            };
            // A blob stored twice (two backups of the same new data at once, `backup --cap`)
            // is taken from its other copy: the file failed on the damaged one while the
            // intact one sat in another pack.
            // One that came in damaged is read once more: a fault on the way (restic
            // rereads too) fails no file.
            let copy;
            let plain = match opened {
                Ok(p) => p,
                Err(why) => match other_copy(
                    self.repo,
                    self.index,
                    bp.id,
                    job.failed.is_none() || job.short,
                ) {
                    Some((c, other)) => {
                        copy = c;
                        let counter = if other {
                            &sh.counters.other_copies
                        } else {
                            &sh.counters.retries
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                        &copy
                    }
                    None => {
                        for &t in &jb.targets {
                            sh.fail_file(t.file, || lost(sh, t, &why));
                            sh.op_done(t.file, self.open.get(&t.file));
                            d.settled += len;
                        }
                        d.failed.push((jb.blob, why));
                        continue;
                    }
                },
            };
            sh.counters.decoded.fetch_add(1, Ordering::Relaxed);
            sh.counters
                .fetched_useful
                .fetch_add(u64::from(bp.length), Ordering::Relaxed);
            let mut landed: Option<Target> = None;
            for (i, &t) in jb.targets.iter().enumerate() {
                // Uses after the first that landed are local copies of the block fetched
                // once, counted so whichever way they are made (as the plan counts them); after
                // a first write that failed, the next is the block's first write.
                let u = Use::of(landed.is_some(), i + 1 < jb.targets.len());
                let ok = match landed {
                    // Where the file system shares extents, later uses are copies of the first
                    // (reflinks where the offsets allow): it is on disk, written through the
                    // page cache ([`Use::FirstOfSeveral`]); elsewhere a copy costs what a
                    // write from memory costs.
                    Some(src) if sh.reflink => {
                        if copy_between(sh, &mut self.open, src, t, len) {
                            sh.op_done(t.file, self.open.get(&t.file));
                            true
                        } else {
                            land(sh, &mut self.open, &mut self.direct, jb.blob, t, plain, u)
                        }
                    }
                    _ => land(sh, &mut self.open, &mut self.direct, jb.blob, t, plain, u),
                };
                if ok && landed.is_none() {
                    landed = Some(t);
                }
                d.settled += len;
            }
            match landed {
                Some(t) => d.placed.push((jb.blob, t)),
                // Every write failed: later uses must not copy from here.
                None if !jb.targets.is_empty() => d.retry.push((jb.blob, vec![])),
                None => {}
            }
            if jb.keep {
                d.kept.push((jb.blob, Arc::from(plain)));
            }
            self.bound_open();
        }
        // Kept at its length: the next read into it zero-fills nothing.
        d.buffer = Some(buf);
        d
    }

    /// Places blocks from local sources.
    fn place(&mut self, job: PlaceJob) -> Done {
        let sh = self.sh;
        let mut d = Done {
            job: job.id,
            ..Done::default()
        };
        for op in job.ops {
            if sh.stopped() {
                break;
            }
            self.bound_open();
            match op {
                PlaceOp::Write {
                    blob,
                    data,
                    targets,
                } => {
                    let len = data.len() as u64;
                    let mut landed = None;
                    let n = targets.len();
                    for (i, t) in targets.into_iter().enumerate() {
                        // A copy once a use landed (see `fetched`).
                        let u = Use::of(landed.is_some(), i + 1 < n);
                        if land(sh, &mut self.open, &mut self.direct, blob, t, &data, u)
                            && u != Use::Copy
                        {
                            landed = Some(t);
                        }
                        d.settled += len;
                    }
                    match landed {
                        Some(t) => d.placed.push((blob, t)),
                        None => d.retry.push((blob, vec![])),
                    }
                }
                PlaceOp::Zero { blob, targets } => {
                    let len = u64::from(sh.plan.blobs[blob as usize].raw_len);
                    for t in targets {
                        self.zero(t, len);
                        sh.op_done(t.file, self.open.get(&t.file));
                        d.settled += len;
                    }
                }
                PlaceOp::Copy {
                    src,
                    dst,
                    len,
                    parts,
                } => match self.copy(src, dst, len) {
                    Ok(()) => {
                        sh.counters.copied.fetch_add(len, Ordering::Relaxed);
                        sh.counters
                            .copied_blocks
                            .fetch_add(parts.len() as u64, Ordering::Relaxed);
                        sh.progress.bytes.fetch_add(len, Ordering::Relaxed);
                        for _ in &parts {
                            sh.op_done(dst.file, self.open.get(&dst.file));
                        }
                        d.settled += len;
                    }
                    Err(CopyError::Target(e)) => {
                        failed_write(sh, dst.file, &e);
                        for _ in &parts {
                            sh.op_done(dst.file, self.open.get(&dst.file));
                        }
                        d.settled += len;
                    }
                    Err(CopyError::Source) => {
                        for (b, t) in parts {
                            d.retry.push((b, vec![t]));
                        }
                    }
                },
                PlaceOp::Reuse {
                    blob,
                    from,
                    offset,
                    targets,
                } => {
                    let bp = &sh.plan.blobs[blob as usize];
                    self.scratch.resize(bp.raw_len as usize, 0);
                    let ok = from.read_exact_at(&mut self.scratch, offset).is_ok()
                        && self.repo.key().blob_id(&self.scratch) == bp.id;
                    if !ok {
                        d.retry.push((blob, targets));
                        continue;
                    }
                    let data = std::mem::take(&mut self.scratch);
                    let len = data.len() as u64;
                    let mut landed = None;
                    let n = targets.len();
                    for (i, t) in targets.into_iter().enumerate() {
                        // Read from the tree once; further uses, once one landed, are local
                        // copies of it (see `fetched`). Every use of a block the target
                        // itself lends is a local copy, as the plan counts it.
                        let u = if from.local {
                            Use::Copy
                        } else {
                            Use::of(landed.is_some(), i + 1 < n)
                        };
                        if land(sh, &mut self.open, &mut self.direct, blob, t, &data, u)
                            && landed.is_none()
                        {
                            landed = Some(t);
                            if !from.local {
                                sh.counters.reused.fetch_add(len, Ordering::Relaxed);
                                sh.counters.reused_blocks.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        d.settled += len;
                    }
                    self.scratch = data;
                    match landed {
                        Some(t) => d.placed.push((blob, t)),
                        // Every write failed: later uses must not wait for, or copy from, here
                        // (as for a fetched block).
                        None => d.retry.push((blob, vec![])),
                    }
                }
            }
        }
        d
    }

    /// Makes `len` bytes at `t` zeros in a file being patched: a hole where the file system
    /// can punch one, written zeros elsewhere.
    fn zero(&mut self, t: Target, len: u64) {
        let sh = self.sh;
        let res = file(sh, &mut self.open, t.file).and_then(|file| {
            let path = &sh.plan.file_path(t.file);
            if arca_fs::punch_hole(file, t.offset, len) {
                return Ok(());
            }
            let zeros = vec![0u8; len.min(1 << 20) as usize];
            let mut done = 0;
            while done < len {
                let n = (len - done).min(zeros.len() as u64) as usize;
                file.write_all_at(&zeros[..n], t.offset + done)
                    .map_err(|e| FsError::new("write", path, e))?;
                done += n as u64;
            }
            Ok(())
        });
        match res {
            Ok(()) => {
                sh.counters.holes.fetch_add(len, Ordering::Relaxed);
                sh.progress.bytes.fetch_add(len, Ordering::Relaxed);
            }
            Err(e) => failed_write(sh, t.file, &e),
        }
    }

    /// Copies `len` bytes from where the restore put them to `dst`.
    fn copy(&mut self, src: Target, dst: Target, len: u64) -> Result<(), CopyError> {
        if !self.sources.contains_key(&src.file) {
            let f = arca_fs::open_noatime(&self.sh.plan.file_path(src.file))
                .map_err(|_| CopyError::Source)?;
            self.sources.insert(src.file, f);
        }
        let path = self.sh.plan.file_path(dst.file);
        file(self.sh, &mut self.open, dst.file).map_err(CopyError::Target)?;
        let (Some(from), Some(to)) = (self.sources.get(&src.file), self.open.get(&dst.file)) else {
            return Err(CopyError::Source);
        };
        match arca_fs::copy_range(from, src.offset, to, dst.offset, len) {
            Ok(_) => Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::ENOSPC)
                    || e.raw_os_error() == Some(libc::EDQUOT) =>
            {
                Err(CopyError::Target(FsError::new("write", &path, e)))
            }
            Err(_) => Err(CopyError::Source),
        }
    }
}

/// The open file `f`, created and sized on first use.
pub(crate) fn file<'m>(
    sh: &Shared,
    open: &'m mut HashMap<u32, File>,
    f: u32,
) -> Result<&'m File, FsError> {
    match open.entry(f) {
        std::collections::hash_map::Entry::Occupied(o) => Ok(o.into_mut()),
        std::collections::hash_map::Entry::Vacant(v) => Ok(v.insert(sh.open_file(f)?)),
    }
}

/// Blob `id` read and verified from another of its copies, when the index knows more than
/// one (the one the plan chose failed), or, with `reread` (its bytes came but did not
/// verify), from the same one read again; with whether there was another copy. A read on the
/// worker's thread: rare, and bounded by the backend's retries.
fn other_copy(
    repo: &Repository,
    index: &Index,
    id: arca_format::Id,
    reread: bool,
) -> Option<(Vec<u8>, bool)> {
    let other = index.locations(BlobKind::Data, &id).nth(1).is_some();
    if !other && !reread {
        return None;
    }
    Some((repo.read_blob(index, BlobKind::Data, &id).ok()?, other))
}

/// Files one worker keeps open: a sixteenth of what the process may open, 1 to 256 (at
/// least 8 took more than a `ulimit -n` of 32 allowed, with the other threads' files).
fn max_open_files() -> usize {
    usize::try_from(arca_fs::open_files_allowed() / 16)
        .unwrap_or(usize::MAX)
        .clamp(1, 256)
}

/// What a use of a block is, to [`land`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// The block's first write, with further uses after it in the job: written through the
    /// page cache, so that whether it landed is known before the next uses count as copies
    /// of it or copy from it (a direct write that failed later left them counted as copies,
    /// and, where extents are shared, copied from a range never written).
    FirstOfSeveral,
    /// The block's first write, and its last use in the job.
    Only,
    /// A further use of a block placed already: counted as copied locally.
    Copy,
}

impl Use {
    /// The use after those before it: whether one `landed`, whether `more` follow.
    fn of(landed: bool, more: bool) -> Self {
        match (landed, more) {
            (true, _) => Use::Copy,
            (false, true) => Use::FirstOfSeveral,
            (false, false) => Use::Only,
        }
    }
}

/// Writes block `blob`'s `data` at target `t` and counts the target down, now or (for a span
/// handed to the direct writers) when it lands. Returns false when the file failed
/// (reported); a direct write that fails later is undone when it lands. A [`Use::Copy`] (a
/// further use of a block the job already placed, from the same data) counts as copied
/// locally, not written: the plan cannot know whether a later use will find the block on
/// disk (a copy) or still in memory (this), and counts every later use as a copy (the dry run
/// said "copy 2 MiB locally", the real run "copied 0 B"). A block with a span handed to a
/// direct writer is counted when that lands, and not at all if it fails.
#[allow(clippy::too_many_arguments)]
fn land(
    sh: &Shared,
    open: &mut HashMap<u32, File>,
    direct: &mut DirectQueue,
    blob: u32,
    t: Target,
    data: &[u8],
    u: Use,
) -> bool {
    let dup = u == Use::Copy;
    let fresh =
        sh.scan.entries[sh.plan.files[t.file as usize].entry as usize] != EntryAction::Patch;
    let span = (fresh && u != Use::FirstOfSeveral && direct.enabled(sh))
        .then(|| arca_fs::direct_span(t.offset, data.len()))
        .flatten();
    let path = || sh.plan.file_path(t.file);
    let res = file(sh, open, t.file).and_then(|file| {
        let failed = |e| FsError::new("write", &path(), e);
        match &span {
            // The edges through the page cache now; the whole pages between them go to a
            // direct writer (no copy into fresh page-cache pages).
            Some(mid) => {
                let head = sh.write_fresh(t.file, file, t.offset, &data[..mid.start]);
                let end = t.offset + mid.end as u64;
                let tail = sh.write_fresh(t.file, file, end, &data[mid.end..]);
                Ok(head.map_err(failed)? + tail.map_err(failed)?)
            }
            None if fresh => sh.write_fresh(t.file, file, t.offset, data).map_err(failed),
            // Into an existing file (a repair in place): zero pages become holes here too.
            None => arca_fs::write_sparse_over(file, t.offset, data).map_err(failed),
        }
    });
    let mut len = data.len() as u64;
    let mut queued = false;
    let res = match (res, span) {
        (Ok(n), Some(mid)) => {
            let at = t.offset + mid.start as u64;
            let middle = &data[mid];
            queued = direct.submit(sh, open, blob, t, at, middle, data.len() as u64, dup);
            if queued {
                len -= middle.len() as u64;
                Ok(n)
            } else {
                // No writer took it: the middle through the page cache after all.
                file(sh, open, t.file).and_then(|f| {
                    sh.write_fresh(t.file, f, at, middle)
                        .map(|m| n + m)
                        .map_err(|e| FsError::new("write", &path(), e))
                })
            }
        }
        (res, _) => res,
    };
    let ok = match res {
        Ok(_) => {
            let c = &sh.counters;
            if queued {
                // Counted, the whole block, when its middle lands (`DirectQueue::settle`).
            } else if dup {
                c.copied.fetch_add(data.len() as u64, Ordering::Relaxed);
                c.copied_blocks.fetch_add(1, Ordering::Relaxed);
            } else {
                // The whole block, its zero pages included: they are left as holes, but the
                // plan cannot see them inside a block, and counts holes as all-zero blocks.
                c.written.fetch_add(len, Ordering::Relaxed);
            }
            sh.progress.bytes.fetch_add(len, Ordering::Relaxed);
            true
        }
        Err(e) => {
            failed_write(sh, t.file, &e);
            false
        }
    };
    if !queued {
        sh.op_done(t.file, open.get(&t.file));
    }
    ok
}

/// Copies `len` bytes from `src` to `t` between two files this restore wrote. Returns false
/// when the copy failed (the caller writes from memory instead).
fn copy_between(
    sh: &Shared,
    open: &mut HashMap<u32, File>,
    src: Target,
    t: Target,
    len: u64,
) -> bool {
    if file(sh, open, src.file).is_err() || file(sh, open, t.file).is_err() {
        return false;
    }
    let (Some(from), Some(to)) = (open.get(&src.file), open.get(&t.file)) else {
        return false;
    };
    match arca_fs::copy_range(from, src.offset, to, t.offset, len) {
        Ok(_) => {
            sh.counters.copied.fetch_add(len, Ordering::Relaxed);
            sh.counters.copied_blocks.fetch_add(1, Ordering::Relaxed);
            sh.progress.bytes.fetch_add(len, Ordering::Relaxed);
            true
        }
        Err(_) => false,
    }
}

/// A write to file `f` failed: fatal (disk full...) or the file's failure.
pub(crate) fn failed_write(sh: &Shared, f: u32, e: &FsError) {
    sh.file_fs_error(f, e);
}

enum CopyError {
    /// The source cannot be read (or is short): fetch the blocks instead.
    Source,
    /// The destination failed.
    Target(FsError),
}
