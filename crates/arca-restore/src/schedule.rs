//! The scheduler: the one thread that owns the restore's progress. It admits files in plan
//! order into an assembly window and gives every block a source: already in place, a copy
//! of a block this restore already wrote, the cache, a `--reuse-from` tree, or the
//! repository. Repository reads are grouped by pack in order of first need, merged across
//! small gaps, and kept within the memory budget; blocks read ahead of their turn are cached
//! with Belady eviction.
//!
//! Work flows one way (scheduler → fetchers → workers) through bounded channels. Every job
//! ends with exactly one report on a channel with room for every job that can be in flight,
//! so reporting never blocks and no choice of queue sizes or budget can deadlock.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use crate::cache::Cache;
use crate::ctx::Shared;
use crate::jobs::{
    Done, FetchJob, Late, PlaceJob, PlaceOp, Target, Work, lost, merge_copies, op_bytes, op_cost,
};
use crate::options::Resolved;
use crate::profile::{Clock, Post};
use crate::scan::EntryAction;

mod reads;

/// No further use.
const NEVER: u32 = u32::MAX;
/// Place jobs are sent once they hold this many operations...
const BATCH_OPS: usize = 256;
/// ...or this many bytes to place.
const BATCH_BYTES: u64 = 8 << 20;

/// Where a blob stands.
#[derive(Debug, Clone)]
enum State {
    /// Not requested yet.
    Idle,
    /// Waiting for a read of its pack to be issued.
    Pending,
    /// Being read, decoded or written.
    InFlight,
    /// In the cache.
    Cached,
    /// On disk here: later uses copy from there.
    Placed(Target),
    /// Cannot be had.
    Failed(Arc<str>),
    /// Needed, and maybe held by a file of the target still being hashed: fetched only if
    /// none of them holds it.
    Awaiting,
}

/// What the scheduler saw, for the report.
#[derive(Debug, Default, Clone)]
pub(crate) struct SchedStats {
    pub fetch_jobs: u64,
    pub place_jobs: u64,
    pub packs_read: u64,
    pub rereads: u64,
    pub cache_hits: u64,
    pub evictions: u64,
    pub peak_memory: u64,
    pub blocks_fetched: u64,
}

/// The channels of the network, seen from the scheduler.
pub(crate) struct Links {
    pub fetch: Sender<FetchJob>,
    pub work: Sender<Work>,
    pub done: Receiver<Done>,
    /// Files hashed while content moves, to be admitted as they come; disconnected when
    /// hashing is over (or there was none).
    pub late: Receiver<Late>,
}

pub(crate) struct Scheduler<'a, 's> {
    sh: &'a Shared<'s>,
    t: Resolved,
    reuse: crate::reuse::Reusable,
    state: Vec<State>,
    first_need: Vec<u32>,
    pack_blobs: HashMap<u32, Vec<u32>>,
    waiting: HashMap<u32, Vec<Target>>,
    pending: HashMap<u32, Vec<u32>>,
    pack_queue: VecDeque<u32>,
    fetched_once: Vec<bool>,
    packs_seen: Vec<bool>,
    cache: Cache,
    /// Jobs in flight: (memory cost, read-ahead bytes reserved in the cache).
    jobs: HashMap<u32, (u64, u64)>,
    next_job: u32,
    fetch_inflight: usize,
    place_inflight: usize,
    inflight_cost: u64,
    admit: Vec<u32>,
    cursor: usize,
    window_used: u64,
    batch: Vec<PlaceOp>,
    batch_bytes: u64,
    /// Bytes of block data held by operations not yet sent.
    batch_cost: u64,
    pool: Vec<Vec<u8>>,
    /// Blocks the late files already hold, until each is admitted.
    late_held: HashMap<u32, Vec<bool>>,
    /// Per blob: uses of it in files still being hashed (empty when none are).
    maybe_held: Vec<u32>,
    /// Per pack: its blobs that files still being hashed may hold (empty when none are). A
    /// pack is not read while any is unsettled: what those files turn out to need is then
    /// read with the rest, in one pass over the pack, instead of a second pass (which read
    /// the packs of a partial restore of many small files twice: 1.86x the full restore's
    /// bytes).
    unsettled: Vec<u32>,
    /// Packs set aside until their blobs are settled, in the order they came up, and
    /// whether each is still set aside.
    held_back: Vec<u32>,
    is_held_back: Vec<bool>,
    stats: SchedStats,
}

impl<'a, 's> Scheduler<'a, 's> {
    /// Prepares the schedule: which files get content, when each blob is first needed, and
    /// which verified blocks of the target can already serve as copy sources.
    pub fn new(sh: &'a Shared<'s>, t: Resolved, reuse: crate::reuse::Reusable) -> Self {
        let plan = sh.plan;
        let scan = sh.scan;
        let mut state = vec![State::Idle; plan.blobs.len()];
        let mut first_need = vec![NEVER; plan.blobs.len()];
        let mut admit = vec![];
        let mut maybe_held = vec![];
        for (f, fp) in plan.files.iter().enumerate() {
            let writes = scan.entries[fp.entry as usize].writes();
            if scan.is_deferred(fp.entry) {
                // Admitted once hashed; until then, whatever it may hold is not fetched.
                maybe_held.resize(plan.blobs.len(), 0);
                for u in fp.first..fp.end {
                    maybe_held[plan.uses[u as usize].blob as usize] += 1;
                }
                continue;
            }
            if writes {
                admit.push(f as u32);
            }
            for u in fp.first..fp.end {
                let bu = plan.uses[u as usize];
                if scan.in_place[u as usize] {
                    if matches!(state[bu.blob as usize], State::Idle) {
                        state[bu.blob as usize] = State::Placed(Target {
                            file: bu.file,
                            offset: bu.offset,
                        });
                    }
                } else if writes && first_need[bu.blob as usize] == NEVER {
                    first_need[bu.blob as usize] = u;
                }
            }
        }
        let mut pack_blobs: HashMap<u32, Vec<u32>> = HashMap::new();
        for (b, bp) in plan.blobs.iter().enumerate() {
            if bp.missing {
                state[b] = State::Failed(Arc::from(bp.missing_reason()));
            } else if bp.in_pack() && first_need[b] != NEVER {
                pack_blobs.entry(bp.pack).or_default().push(b as u32);
            }
        }
        for v in pack_blobs.values_mut() {
            v.sort_by_key(|&b| plan.blobs[b as usize].offset);
        }
        let packs = pack_blobs.keys().max().map_or(0, |&m| m as usize + 1);
        let mut unsettled = vec![];
        if !maybe_held.is_empty() {
            // Only blobs read from a pack count (a missing one has no pack).
            for (b, bp) in plan.blobs.iter().enumerate() {
                if maybe_held[b] > 0 && bp.in_pack() {
                    let p = bp.pack as usize;
                    if unsettled.len() <= p {
                        unsettled.resize(p + 1, 0);
                    }
                    unsettled[p] += 1;
                }
            }
        }
        let is_held_back = vec![false; unsettled.len()];
        Self {
            sh,
            t,
            reuse,
            state,
            first_need,
            pack_blobs,
            waiting: HashMap::new(),
            pending: HashMap::new(),
            pack_queue: VecDeque::new(),
            fetched_once: vec![false; plan.blobs.len()],
            packs_seen: vec![false; packs],
            cache: Cache::default(),
            jobs: HashMap::new(),
            next_job: 0,
            fetch_inflight: 0,
            place_inflight: 0,
            inflight_cost: 0,
            admit,
            cursor: 0,
            window_used: 0,
            batch: vec![],
            batch_bytes: 0,
            batch_cost: 0,
            pool: vec![],
            late_held: HashMap::new(),
            maybe_held,
            unsettled,
            held_back: vec![],
            is_held_back,
            stats: SchedStats::default(),
        }
    }

    /// Block data held now: reads in flight, cached blocks, operations carrying data.
    fn memory(&self) -> u64 {
        self.inflight_cost + self.cache.total() + self.batch_cost
    }

    fn raw(&self, b: u32) -> u64 {
        u64::from(self.sh.plan.blobs[b as usize].raw_len)
    }

    /// Most fetch jobs in flight: one per fetcher, plus one per worker (being decoded or
    /// waiting for a worker) and one per direct writer (a decoded job whose report waits for
    /// its last write); more would only hold memory.
    fn max_fetch(&self) -> usize {
        Self::max_fetch_of(&self.t)
    }

    fn max_fetch_of(t: &Resolved) -> usize {
        t.fetchers + t.workers + t.direct_writes
    }

    /// Most place jobs in flight.
    fn max_place(&self) -> usize {
        self.t.queue + self.t.workers
    }

    /// Capacity of the report channel: one slot for every job that can be in flight.
    pub fn done_capacity(t: &Resolved) -> usize {
        Self::max_fetch_of(t) + (t.queue + t.workers) + 1
    }

    /// Runs the restore's content phase to the end (or until a stop).
    pub fn run(mut self, links: Links, post: Post<'_>) -> (SchedStats, Clock) {
        let mut clock = Clock::new();
        // Files still being hashed may come in (until the channel disconnects).
        let mut late = links.late.clone();
        let mut hashing = true;
        loop {
            if self.sh.stopped() {
                break;
            }
            while hashing {
                match late.try_recv() {
                    Ok(l) => self.on_late(l),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        late = crossbeam_channel::never();
                        hashing = false;
                        self.hashing_over();
                    }
                }
            }
            self.admit_files(&links, &mut clock);
            self.issue_fetches(&links, &mut clock);
            self.flush(&links, &mut clock, true);
            let busy = self.fetch_inflight + self.place_inflight;
            if busy == 0
                && !hashing
                && self.cursor == self.admit.len()
                && self.pack_queue.is_empty()
                && self.batch.is_empty()
            {
                break;
            }
            post.post(format!(
                "waiting for {} reads and {} placements; {} files admitted of {}; cache {} KiB{}",
                self.fetch_inflight,
                self.place_inflight,
                self.cursor,
                self.admit.len(),
                self.cache.bytes >> 10,
                if hashing {
                    "; files of the target still being hashed"
                } else {
                    ""
                }
            ));
            clock.busy();
            crossbeam_channel::select! {
                recv(links.done) -> d => match d {
                    Ok(d) => {
                        clock.waited_in();
                        self.on_done(d);
                        while let Ok(d) = links.done.try_recv() {
                            self.on_done(d);
                        }
                    }
                    Err(_) => break,
                },
                // (Its end is taken at the top of the loop.)
                recv(late) -> l => {
                    clock.waited_in();
                    if let Ok(l) = l {
                        self.on_late(l);
                    }
                }
                default(Duration::from_millis(100)) => clock.waited_in(),
            }
        }
        // Stopped or finished: the caller closes the work channels; late reports are drained
        // there.
        self.fail_leftovers();
        self.stats.cache_hits = self.cache.hits;
        self.stats.evictions = self.cache.evictions;
        clock.busy();
        (self.stats, clock)
    }

    /// Takes a file hashed while content moved: the blocks it holds become copy sources, and
    /// one to write is admitted (its reads wait for their packs to be settled).
    fn on_late(&mut self, l: Late) {
        let plan = self.sh.plan;
        let fp = plan.files[l.file as usize];
        if let Some(from) = &l.lender {
            for bu in plan.file_uses(l.file) {
                if !plan.blobs[bu.blob as usize].zero {
                    self.reuse
                        .entry(bu.blob)
                        .or_insert_with(|| (from.clone(), bu.offset));
                }
            }
        }
        let mut copies = vec![];
        for (u, &h) in (fp.first..fp.end).zip(&l.held) {
            let bu = plan.uses[u as usize];
            let b = bu.blob;
            if let Some(m) = self.maybe_held.get_mut(b as usize)
                && *m > 0
            {
                *m -= 1;
                if *m == 0 && plan.blobs[b as usize].in_pack() {
                    self.settled(plan.blobs[b as usize].pack);
                }
            }
            match self.state[b as usize] {
                State::Idle | State::Awaiting if h => {
                    let at = Target {
                        file: bu.file,
                        offset: bu.offset,
                    };
                    self.state[b as usize] = State::Placed(at);
                    for t in self.waiting.remove(&b).unwrap_or_default() {
                        copies.push((t, at, self.raw(b), b));
                    }
                }
                State::Awaiting if self.maybe_held.get(b as usize).is_none_or(|&m| m == 0) => {
                    self.state[b as usize] = State::Idle;
                    self.request(b);
                }
                _ => {}
            }
        }
        for op in merge_copies(copies) {
            self.push_op(op);
        }
        if l.write {
            // Admitted now: its blocks wait, like everyone's, for their pack to be settled.
            self.admit.push(l.file);
            self.late_held.insert(l.file, l.held);
        }
    }

    /// One more blob of `pack` is settled: when none is left, the pack may be read.
    fn settled(&mut self, pack: u32) {
        let Some(n) = self.unsettled.get_mut(pack as usize) else {
            return;
        };
        *n = n.saturating_sub(1);
        if *n == 0 && std::mem::replace(&mut self.is_held_back[pack as usize], false) {
            self.pack_queue.push_front(pack);
        }
    }

    /// Every file of the target is hashed (or the restore stops): packs set aside may be
    /// read, and blocks still awaited are fetched.
    fn hashing_over(&mut self) {
        self.maybe_held = vec![];
        self.unsettled = vec![];
        for p in std::mem::take(&mut self.held_back).into_iter().rev() {
            if std::mem::replace(&mut self.is_held_back[p as usize], false) {
                self.pack_queue.push_front(p);
            }
        }
        let awaited: Vec<u32> = self
            .waiting
            .keys()
            .copied()
            .filter(|&b| matches!(self.state[b as usize], State::Awaiting))
            .collect();
        for b in awaited {
            self.state[b as usize] = State::Idle;
            self.request(b);
        }
    }

    /// Admits files in plan order while the window has room, giving each block a source.
    fn admit_files(&mut self, links: &Links, clock: &mut Clock) {
        let plan = self.sh.plan;
        // An empty window always takes one more file, however large: progress under any
        // window size.
        while self.cursor < self.admit.len()
            && (self.window_used < self.t.window || self.window_used == 0)
        {
            let f = self.admit[self.cursor];
            self.cursor += 1;
            let fp = plan.files[f as usize];
            let fresh = self.sh.scan.entries[fp.entry as usize] != EntryAction::Patch;
            let mut ops = 1u32; // the admission token, released below
            let mut copies: Vec<(Target, Target, u64, u32)> = vec![];
            let held = self.late_held.remove(&f);
            for u in fp.first..fp.end {
                let in_place = match &held {
                    Some(h) => h.get((u - fp.first) as usize).is_some_and(|&x| x),
                    None => self.sh.scan.in_place[u as usize],
                };
                if in_place {
                    continue;
                }
                let bu = plan.uses[u as usize];
                let b = bu.blob;
                let bp = &plan.blobs[b as usize];
                if bp.zero && fresh {
                    // A hole: nothing to write, but placed all the same (the progress total
                    // counts it), and counted as a hole (the summary left these out, and
                    // disagreed with the dry run by gigabytes on a sparse file; hunt 26).
                    self.sh
                        .progress
                        .bytes
                        .fetch_add(u64::from(bp.raw_len), Ordering::Relaxed);
                    self.sh
                        .counters
                        .holes
                        .fetch_add(u64::from(bp.raw_len), Ordering::Relaxed);
                    continue;
                }
                let t = Target {
                    file: f,
                    offset: bu.offset,
                };
                let len = u64::from(bp.raw_len);
                ops += 1;
                self.window_used += len;
                if bp.zero {
                    self.push_op(PlaceOp::Zero {
                        blob: b,
                        targets: vec![t],
                    });
                    continue;
                }
                match self.state[b as usize].clone() {
                    State::Placed(src) => copies.push((t, src, len, b)),
                    State::Cached => match self.cache.take(b) {
                        Some(data) => {
                            self.state[b as usize] = State::InFlight;
                            self.push_op(PlaceOp::Write {
                                blob: b,
                                data,
                                targets: vec![t],
                            });
                        }
                        None => {
                            self.waiting.entry(b).or_default().push(t);
                            self.request(b);
                        }
                    },
                    State::Pending | State::InFlight | State::Awaiting => {
                        self.waiting.entry(b).or_default().push(t);
                    }
                    State::Failed(why) => {
                        ops -= 1;
                        self.window_used -= len;
                        self.sh.fail_file(f, || lost(self.sh, t, &why));
                    }
                    State::Idle => {
                        self.waiting.entry(b).or_default().push(t);
                        if self.maybe_held.get(b as usize).is_some_and(|&m| m > 0) {
                            self.state[b as usize] = State::Awaiting;
                        } else {
                            self.request(b);
                        }
                    }
                }
            }
            self.sh.file_pending[f as usize].store(ops, std::sync::atomic::Ordering::Release);
            for op in merge_copies(copies) {
                self.push_op(op);
            }
            if self.batch.len() >= BATCH_OPS || self.batch_bytes >= BATCH_BYTES {
                self.flush(links, clock, false);
            }
            // Releasing the token finishes the file here if nothing was left to do.
            self.sh.op_done(f, None);
        }
    }

    /// Asks for blob `b`: from a file that lends it when one does (a `--reuse-from` tree's,
    /// or the target's own), else from its pack.
    fn request(&mut self, b: u32) {
        if let Some((from, offset)) = self.reuse.get(&b) {
            let targets = self.waiting.remove(&b).unwrap_or_default();
            self.state[b as usize] = State::InFlight;
            self.push_op(PlaceOp::Reuse {
                blob: b,
                from: from.clone(),
                offset: *offset,
                targets,
            });
            return;
        }
        self.state[b as usize] = State::Pending;
        let pack = self.sh.plan.blobs[b as usize].pack;
        let list = self.pending.entry(pack).or_default();
        if list.is_empty() {
            self.pack_queue.push_back(pack);
        }
        list.push(b);
    }

    fn push_op(&mut self, op: PlaceOp) {
        self.batch_bytes += op_bytes(self.sh, &op);
        self.batch_cost += op_cost(&op);
        self.batch.push(op);
    }

    /// Sends the pending place operations as one job (when `all`, whatever their number).
    fn flush(&mut self, links: &Links, clock: &mut Clock, all: bool) {
        while !self.batch.is_empty()
            && (all || self.batch.len() >= BATCH_OPS || self.batch_bytes >= BATCH_BYTES)
            && self.place_inflight < self.max_place()
        {
            let n = self.batch.len().min(BATCH_OPS);
            let ops: Vec<PlaceOp> = self.batch.drain(..n).collect();
            let cost: u64 = ops.iter().map(op_cost).sum();
            self.batch_bytes -= ops.iter().map(|op| op_bytes(self.sh, op)).sum::<u64>();
            self.batch_cost -= cost;
            let id = self.job_id(cost, 0);
            self.place_inflight += 1;
            self.stats.place_jobs += 1;
            clock.busy();
            if links.work.send(Work::Place(PlaceJob { id, ops })).is_err() {
                self.sh
                    .fail(crate::RestoreError::Internal("workers stopped".into()));
            }
            clock.waited_out();
        }
    }

    fn job_id(&mut self, cost: u64, kept: u64) -> u32 {
        let id = self.next_job;
        self.next_job = self.next_job.wrapping_add(1);
        self.jobs.insert(id, (cost, kept));
        self.inflight_cost += cost;
        self.stats.peak_memory = self.stats.peak_memory.max(self.memory());
        id
    }

    /// Takes a job's report: blobs become copy sources, cached, failed or requested again.
    fn on_done(&mut self, d: Done) {
        if let Some((cost, kept)) = self.jobs.remove(&d.job) {
            self.inflight_cost -= cost;
            // Read-ahead blocks stop being "on their way": they are cached below, or lost.
            self.cache.reserved -= kept;
        }
        if let Some(buf) = d.buffer {
            self.fetch_inflight = self.fetch_inflight.saturating_sub(1);
            // Keep as many buffers as reads can be in flight; drop the rest.
            if self.pool.len() < self.max_fetch() && buf.capacity() as u64 <= self.t.max_read * 2 {
                self.pool.push(buf);
            }
        } else {
            self.place_inflight = self.place_inflight.saturating_sub(1);
        }
        self.window_used = self.window_used.saturating_sub(d.settled);
        let mut copies = vec![];
        for (b, at) in d.placed {
            self.state[b as usize] = State::Placed(at);
            for t in self.waiting.remove(&b).unwrap_or_default() {
                copies.push((t, at, self.raw(b), b));
            }
        }
        for op in merge_copies(copies) {
            self.push_op(op);
        }
        for (b, data) in d.kept {
            match self.waiting.remove(&b) {
                Some(targets) if !targets.is_empty() => {
                    self.push_op(PlaceOp::Write {
                        blob: b,
                        data,
                        targets,
                    });
                }
                _ => {
                    self.state[b as usize] = State::Cached;
                    self.cache.insert(b, self.first_need[b as usize], data);
                }
            }
        }
        for (b, why) in d.failed {
            let why: Arc<str> = Arc::from(why);
            self.state[b as usize] = State::Failed(why.clone());
            if let Some(targets) = self.waiting.remove(&b) {
                for t in targets {
                    self.window_used = self.window_used.saturating_sub(self.raw(b));
                    self.sh.fail_file(t.file, || lost(self.sh, t, &why));
                    self.sh.op_done(t.file, None);
                }
            }
        }
        for (b, targets) in d.retry {
            self.retry(b, targets);
        }
        self.stats.peak_memory = self.stats.peak_memory.max(self.memory());
    }

    /// Serves `targets` of blob `b` from the repository after all: a local source (a copy,
    /// a `--reuse-from` file) was unusable, or no write of a fetched blob succeeded.
    fn retry(&mut self, b: u32, targets: Vec<Target>) {
        if let State::Failed(why) = self.state[b as usize].clone() {
            for t in targets {
                self.window_used = self.window_used.saturating_sub(self.raw(b));
                self.sh.fail_file(t.file, || lost(self.sh, t, &why));
                self.sh.op_done(t.file, None);
            }
            return;
        }
        self.reuse.remove(&b);
        let waiting = self.waiting.entry(b).or_default();
        waiting.extend(targets);
        if waiting.is_empty() {
            self.waiting.remove(&b);
            if !matches!(self.state[b as usize], State::Pending) {
                self.state[b as usize] = State::Idle;
            }
            return;
        }
        if !matches!(self.state[b as usize], State::Pending) {
            self.state[b as usize] = State::Idle;
            self.request(b);
        }
    }

    /// After a stop, targets still waiting will never be served.
    fn fail_leftovers(&mut self) {
        if self.sh.stopped() {
            return;
        }
        for (b, targets) in std::mem::take(&mut self.waiting) {
            for t in targets {
                self.sh.fail_file(t.file, || {
                    format!(
                        "{}: content at offset {} was never scheduled (blob {})",
                        arca_format::text::shown(&self.sh.plan.file_path(t.file)),
                        t.offset,
                        self.sh.plan.blobs[b as usize].id
                    )
                });
                self.sh.op_done(t.file, None);
            }
        }
    }
}
