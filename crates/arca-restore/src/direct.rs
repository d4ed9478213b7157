//! The direct writers: threads that write the page-aligned middles of large blocks of new files
//! around the page cache (`O_DIRECT`) while the workers decode on. A worker waits for its own
//! writes before it reports its job, so whatever a report says is on disk is on disk.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use arca_fs::{AlignedBuf, DirectWrite, FsError};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};

use crate::ctx::Shared;
use crate::jobs::{Done, Target};
use crate::place::{failed_write, file};
use crate::profile::{Clock, Post};

/// Direct writes one worker may have in flight...
const IN_FLIGHT: usize = 4;
/// ...and their bytes, past the first write (the memory staged for the disk).
const IN_FLIGHT_BYTES: usize = 8 << 20;

/// One direct write: a staged span and where it goes.
pub(crate) struct DirectJob {
    file: Arc<File>,
    /// The file's space was reserved: skipped zero pages are punched out.
    reserved: bool,
    offset: u64,
    buf: AlignedBuf,
    len: usize,
    slot: usize,
    reply: Sender<DirectDone>,
}

/// A direct write's outcome, back to its worker with the buffer.
pub(crate) struct DirectDone {
    buf: AlignedBuf,
    slot: usize,
    result: io::Result<DirectWrite>,
}

/// A writer thread: runs until every worker is gone.
pub(crate) fn writer(rx: Receiver<DirectJob>, post: Post<'_>) -> Clock {
    let mut clock = Clock::new();
    post.post("waiting for spans to write");
    while let Ok(j) = rx.recv() {
        clock.waited_in();
        post.post(format!("writing {} KiB direct", j.len >> 10));
        let result = arca_fs::write_pages_direct(&j.file, j.offset, j.buf.slice(j.len), j.reserved);
        drop(j.file);
        clock.busy();
        // The reply channel has room for every write its worker has in flight: never blocks.
        let _ = j.reply.send(DirectDone {
            buf: j.buf,
            slot: j.slot,
            result,
        });
        post.post("waiting for spans to write");
    }
    clock.waited_in();
    clock
}

/// A write in flight, and what it stands for.
struct Pending {
    blob: u32,
    target: Target,
    /// File offset of the span, and its length.
    offset: u64,
    len: usize,
    /// The job it belongs to (a slot of [`DirectQueue::held`]).
    job: usize,
    /// The whole block's length, counted when the span lands: as copied for a further use
    /// of a block placed already (`dup`), as written otherwise.
    block: u64,
    dup: bool,
}

/// A job whose report waits for its direct writes.
#[derive(Default)]
struct Held {
    /// The report, once the job itself is through.
    done: Option<Done>,
    /// Its writes still in flight.
    writes: usize,
    /// Its blocks whose write failed: no copy sources.
    failed: Vec<(u32, Target)>,
}

/// A worker's side of the direct writers: stages spans, keeps a few in flight, and settles
/// them (counters, fallback, failure, the file's countdown) as they land. A job's report is
/// held until its last write landed; the worker goes on with the next job meanwhile.
pub(crate) struct DirectQueue {
    tx: Option<Sender<DirectJob>>,
    reply_tx: Sender<DirectDone>,
    reply_rx: Receiver<DirectDone>,
    pending: Vec<Option<Pending>>,
    in_flight: usize,
    in_flight_bytes: usize,
    free: Vec<AlignedBuf>,
    /// Direct descriptors of files with writes in flight or of the current job.
    files: HashMap<u32, Arc<File>>,
    held: Vec<Held>,
    /// The slot of `held` of the job being worked on.
    current: usize,
    /// Reports free to go.
    ready: Vec<Done>,
}

impl DirectQueue {
    /// A queue sending to `tx`; `None` writes everything through the page cache.
    pub fn new(tx: Option<Sender<DirectJob>>) -> Self {
        let (reply_tx, reply_rx) = bounded(IN_FLIGHT);
        Self {
            tx,
            reply_tx,
            reply_rx,
            pending: (0..IN_FLIGHT).map(|_| None).collect(),
            in_flight: 0,
            in_flight_bytes: 0,
            free: vec![],
            files: HashMap::new(),
            held: vec![],
            current: 0,
            ready: vec![],
        }
    }

    /// Whether spans can go direct now.
    pub fn enabled(&self, sh: &Shared) -> bool {
        self.tx.is_some() && sh.direct.load(Ordering::Relaxed)
    }

    /// Writes in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Where the writers answer.
    pub fn replies(&self) -> &Receiver<DirectDone> {
        &self.reply_rx
    }

    /// Whether file `f` has writes in flight (its descriptors must stay open).
    pub fn busy(&self, f: u32) -> bool {
        self.pending.iter().flatten().any(|p| p.target.file == f)
    }

    /// A job starts: its writes are counted against its report.
    pub fn begin(&mut self) {
        self.current = match self
            .held
            .iter()
            .position(|h| h.done.is_none() && h.writes == 0)
        {
            Some(i) => i,
            None => {
                self.held.push(Held::default());
                self.held.len() - 1
            }
        };
    }

    /// The current job is through: its report goes out once its writes landed.
    pub fn end(&mut self, d: Done) {
        let i = self.current;
        self.held[i].done = Some(d);
        self.release(i);
        let busy: Vec<u32> = self
            .pending
            .iter()
            .flatten()
            .map(|p| p.target.file)
            .collect();
        self.files.retain(|f, _| busy.contains(f));
    }

    /// Reports whose writes all landed.
    pub fn take_ready(&mut self) -> std::vec::Drain<'_, Done> {
        self.ready.drain(..)
    }

    /// Moves the report of slot `i` to the ready ones if nothing of it is in flight.
    fn release(&mut self, i: usize) {
        let h = &mut self.held[i];
        if h.writes > 0 {
            return;
        }
        let Some(mut d) = h.done.take() else {
            return;
        };
        for (blob, t) in h.failed.drain(..) {
            if let Some(k) = d.placed.iter().position(|&p| p == (blob, t)) {
                d.placed.swap_remove(k);
                d.retry.push((blob, vec![]));
            }
        }
        self.ready.push(d);
    }

    /// Sends `data`, to land at `offset` of file `target.file` (already created and sized), to
    /// a writer. Returns false when it could not (the caller writes it through the page cache).
    /// The file's countdown for `target` is settled when the write lands, and the whole block
    /// (`block` bytes, of which `data` is the middle) counted then: as copied for a `dup` (a
    /// further use of a block placed already), as written otherwise; not at all if it fails.
    #[allow(clippy::too_many_arguments)]
    pub fn submit(
        &mut self,
        sh: &Shared,
        open: &mut HashMap<u32, File>,
        blob: u32,
        target: Target,
        offset: u64,
        data: &[u8],
        block: u64,
        dup: bool,
    ) -> bool {
        let Some(tx) = self.tx.clone() else {
            return false;
        };
        let f = target.file;
        let direct = match self.files.get(&f) {
            Some(d) => Arc::clone(d),
            None => match arca_fs::open_direct(&sh.plan.file_path(f)) {
                Ok(d) => {
                    let d = Arc::new(d);
                    self.files.insert(f, Arc::clone(&d));
                    d
                }
                Err(e) => {
                    if e.raw_os_error() == Some(libc::EINVAL) {
                        sh.direct.store(false, Ordering::Relaxed);
                    }
                    return false;
                }
            },
        };
        // Settle what landed; if the disk is still behind, this block goes through the page
        // cache instead of waiting (the CPU copy and the disk then work side by side).
        while let Ok(d) = self.reply_rx.try_recv() {
            self.settle(sh, open, d);
        }
        if self.in_flight >= IN_FLIGHT
            || (self.in_flight > 0 && self.in_flight_bytes + data.len() > IN_FLIGHT_BYTES)
        {
            return false;
        }
        let Some(slot) = self.pending.iter().position(Option::is_none) else {
            return false;
        };
        let mut buf = self.free.pop().unwrap_or_default();
        buf.slice_mut(data.len()).copy_from_slice(data);
        let job = DirectJob {
            file: direct,
            reserved: sh.reserved(f),
            offset,
            buf,
            len: data.len(),
            slot,
            reply: self.reply_tx.clone(),
        };
        if let Err(e) = tx.try_send(job) {
            self.free.push(e.into_inner().buf);
            return false;
        }
        self.pending[slot] = Some(Pending {
            blob,
            target,
            offset,
            len: data.len(),
            job: self.current,
            block,
            dup,
        });
        self.held[self.current].writes += 1;
        self.in_flight += 1;
        self.in_flight_bytes += data.len();
        true
    }

    /// Waits for every write in flight and settles it.
    pub fn drain(&mut self, sh: &Shared, open: &mut HashMap<u32, File>) {
        while self.in_flight > 0 {
            if !self.wait_one(sh, open) {
                break;
            }
        }
    }

    /// Waits for one write to land and settles it. Returns false when the restore stopped and
    /// the writers no longer answer: what is in flight is abandoned, the reports go out.
    fn wait_one(&mut self, sh: &Shared, open: &mut HashMap<u32, File>) -> bool {
        loop {
            match self.reply_rx.recv_timeout(Duration::from_millis(200)) {
                Ok(d) => {
                    self.settle(sh, open, d);
                    return true;
                }
                Err(RecvTimeoutError::Timeout) if !sh.stopped() => {}
                Err(_) => {
                    self.pending.iter_mut().for_each(|p| *p = None);
                    self.in_flight = 0;
                    self.in_flight_bytes = 0;
                    for i in 0..self.held.len() {
                        self.held[i].writes = 0;
                        self.release(i);
                    }
                    return false;
                }
            }
        }
    }

    /// Settles a landed write: counters, the page-cache fallback if direct I/O was refused,
    /// the failure if it failed, the file's countdown, its job's report.
    pub fn settle(&mut self, sh: &Shared, open: &mut HashMap<u32, File>, done: DirectDone) {
        let Some(p) = self.pending.get_mut(done.slot).and_then(Option::take) else {
            return;
        };
        self.in_flight -= 1;
        self.in_flight_bytes -= p.len;
        let data = done.buf.slice(p.len);
        let path = || sh.plan.file_path(p.target.file);
        let res = match done.result {
            Ok(DirectWrite {
                written,
                refused_at: None,
            }) => Ok(written),
            // The file system refused direct I/O: the rest through the page cache, and no
            // more direct writes.
            Ok(DirectWrite {
                written,
                refused_at: Some(pos),
            }) => {
                sh.direct.store(false, Ordering::Relaxed);
                file(sh, open, p.target.file).and_then(|f| {
                    sh.write_fresh(p.target.file, f, p.offset + pos as u64, &data[pos..])
                        .map(|_| written)
                        .map_err(|e| FsError::new("write", &path(), e))
                })
            }
            Err(e) => Err(FsError::new("write", &path(), e)),
        };
        let held = &mut self.held[p.job];
        match res {
            Ok(direct) => {
                let c = &sh.counters;
                let len = p.len as u64;
                // The whole block, zero pages included, as `place::land` counts them.
                if p.dup {
                    c.copied.fetch_add(p.block, Ordering::Relaxed);
                    c.copied_blocks.fetch_add(1, Ordering::Relaxed);
                } else {
                    c.written.fetch_add(p.block, Ordering::Relaxed);
                }
                c.direct.fetch_add(direct, Ordering::Relaxed);
                sh.progress.bytes.fetch_add(len, Ordering::Relaxed);
            }
            Err(e) => {
                failed_write(sh, p.target.file, &e);
                held.failed.push((p.blob, p.target));
            }
        }
        held.writes -= 1;
        if self.free.len() < IN_FLIGHT {
            self.free.push(done.buf);
        }
        sh.op_done(p.target.file, open.get(&p.target.file));
        self.release(p.job);
    }
}
