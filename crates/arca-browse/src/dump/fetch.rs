//! The dump's fetcher: file contents as ranged pack reads. Consecutive blobs of one pack
//! (across files too) are merged into one read while the gap between them stays under the
//! read gap and the read under its largest size; a few reads run at once on their own
//! threads, which also open (decrypt, decompress, verify) their blobs; entries and plaintext
//! leave in archive order.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

use arca_backend::FileType;
use arca_format::{BlobKind, Id, NodeKind};
use arca_repo::{RepoError, Repository};

use super::walk::Item;
use super::{Dump, DumpError, Msg, snapshot_path};

/// Slots waiting to leave past this many, the fetcher stops reading ahead and drains.
const MAX_SLOTS: usize = 4096;

/// One blob of a read.
struct Want {
    id: Id,
    /// Offset in the pack.
    offset: u64,
    length: u32,
    raw_len: u32,
    /// The file it belongs to (for errors).
    file: std::sync::Arc<[u8]>,
}

/// A read being gathered: blobs of one pack, in order.
struct Group {
    seq: u64,
    pack: Id,
    start: u64,
    end: u64,
    raw: u64,
    wants: Vec<Want>,
}

type Opened = Result<VecDeque<Vec<u8>>, DumpError>;

/// A read issued, and how many of its blobs have not left yet.
struct InFlight<'scope> {
    seq: u64,
    handle: Option<ScopedJoinHandle<'scope, Opened>>,
    blobs: Option<VecDeque<Vec<u8>>>,
}

/// What leaves next, in order.
enum Slot {
    Entry(Box<super::Entry>),
    /// The next `count` blobs of read `seq`.
    Blobs {
        seq: u64,
        count: usize,
    },
    Zeros(u64),
    Failed(DumpError),
}

/// Turns the walker's entries into entries and plaintext for the writer.
pub(crate) struct Fetcher<'a, 'scope, 'env> {
    repo: &'a Repository,
    index: &'a arca_repo::Index,
    scope: &'scope Scope<'scope, 'env>,
    out: SyncSender<Msg>,
    read_gap: u64,
    max_read: u64,
    in_flight_max: usize,
    gather: Duration,
    /// Id and length of an all-zero block of the largest chunk size: written, never read.
    zero: (Id, u32),
    slots: VecDeque<Slot>,
    open: Option<Group>,
    reads: VecDeque<InFlight<'scope>>,
    next_seq: u64,
    reads_made: u64,
}

impl<'a, 'scope, 'env> Fetcher<'a, 'scope, 'env>
where
    'a: 'scope,
{
    /// A fetcher for `dump`'s repository, spawning its reads in `scope`.
    pub fn new(dump: &Dump<'a>, scope: &'scope Scope<'scope, 'env>, out: SyncSender<Msg>) -> Self {
        Fetcher {
            repo: dump.repo,
            index: dump.index,
            scope,
            out,
            read_gap: dump.read_gap,
            max_read: dump.max_read.max(1),
            in_flight_max: dump.reads_in_flight.max(1),
            gather: dump.gather,
            zero: super::hole_blob(dump.repo),
            slots: VecDeque::new(),
            open: None,
            reads: VecDeque::new(),
            next_seq: 0,
            reads_made: 0,
        }
    }

    /// Runs until the walker is done (or the writer gone, or a failure sent).
    pub fn run(mut self, items: Receiver<Item>) {
        loop {
            let item = match items.try_recv() {
                Ok(i) => i,
                Err(TryRecvError::Empty) => {
                    // The walker is behind (loading a listing): wait a moment for it, then
                    // issue what is gathered and hand everything on.
                    let idle = self.open.is_none() && self.slots.is_empty();
                    match items.recv_timeout(if idle { Duration::ZERO } else { self.gather }) {
                        Ok(i) => i,
                        Err(RecvTimeoutError::Disconnected) => break,
                        Err(RecvTimeoutError::Timeout) => {
                            if !self.flush_all() {
                                return;
                            }
                            match items.recv() {
                                Ok(i) => i,
                                Err(_) => break,
                            }
                        }
                    }
                }
                Err(TryRecvError::Disconnected) => break,
            };
            match item {
                Item::Entry(e) => self.add(e),
                Item::Failed(e) => self.slots.push_back(Slot::Failed(e)),
            }
            if !self.forward_ready() {
                return;
            }
            if self.slots.len() > MAX_SLOTS && !self.flush_all() {
                return;
            }
        }
        if self.flush_all() {
            let _ = self.out.send(Msg::Reads(self.reads_made));
        }
    }

    /// Queues an entry and its blobs.
    fn add(&mut self, e: Box<super::Entry>) {
        let content = if e.link.is_none() && e.node.kind() == NodeKind::File {
            e.node.content.clone()
        } else {
            vec![]
        };
        let file: std::sync::Arc<[u8]> = e.path.clone().into();
        self.slots.push_back(Slot::Entry(e));
        for c in content {
            if c.id == self.zero.0 && c.len == self.zero.1 {
                self.slots.push_back(Slot::Zeros(u64::from(c.len)));
                continue;
            }
            let Some(loc) = self.index.get(BlobKind::Data, &c.id) else {
                self.slots.push_back(Slot::Failed(DumpError::Repo {
                    path: snapshot_path(&file),
                    source: RepoError::BlobNotFound {
                        kind: BlobKind::Data,
                        id: c.id,
                    },
                }));
                return;
            };
            if loc.raw_length != c.len {
                self.slots.push_back(Slot::Failed(DumpError::Entry {
                    path: snapshot_path(&file),
                    detail: format!(
                        "the listing gives data blob {} {} bytes, but it holds {} (damaged \
                         listing; `arca check` names the snapshots, `arca repair snapshots` \
                         cuts the file there)",
                        c.id, c.len, loc.raw_length
                    ),
                }));
                return;
            }
            let want = Want {
                id: c.id,
                offset: u64::from(loc.offset),
                length: loc.length,
                raw_len: loc.raw_length,
                file: file.clone(),
            };
            let end = want.offset + u64::from(want.length);
            // A blob joins the read when it lies within the read gap of its range, before or
            // after it: a backup's readers store the blobs of neighbouring files in the order
            // they finish, so the next file's blob is as often just before the last one's
            // (hunt H12: taking only blobs after it made a read per two small files, their
            // ranges overlapping).
            let fits = self.open.as_ref().is_some_and(|g| {
                g.pack == loc.pack.id
                    && want.offset <= g.end + self.read_gap
                    && end + self.read_gap >= g.start
                    && end.max(g.end) - want.offset.min(g.start) <= self.max_read
                    && g.raw + u64::from(want.raw_len) <= self.max_read
            });
            if !fits {
                self.issue();
                self.open = Some(Group {
                    seq: self.next_seq,
                    pack: loc.pack.id,
                    start: want.offset,
                    end: want.offset,
                    raw: 0,
                    wants: vec![],
                });
                self.next_seq += 1;
            }
            let Some(g) = self.open.as_mut() else {
                continue;
            };
            g.start = g.start.min(want.offset);
            g.end = g.end.max(end);
            g.raw += u64::from(want.raw_len);
            g.wants.push(want);
            let seq = g.seq;
            match self.slots.back_mut() {
                Some(Slot::Blobs { seq: s, count }) if *s == seq => *count += 1,
                _ => self.slots.push_back(Slot::Blobs { seq, count: 1 }),
            }
        }
    }

    /// Starts the read being gathered, waiting first for room among the reads in flight.
    fn issue(&mut self) {
        let Some(g) = self.open.take() else {
            return;
        };
        while self.reads.len() >= self.in_flight_max {
            if !self.forward_one() {
                break;
            }
        }
        let repo = self.repo;
        let seq = g.seq;
        let handle = self.scope.spawn(move || read(repo, g));
        self.reads_made += 1;
        self.reads.push_back(InFlight {
            seq,
            handle: Some(handle),
            blobs: None,
        });
    }

    /// Hands on the slots at the front that need no waiting; false when the writer is gone.
    fn forward_ready(&mut self) -> bool {
        loop {
            let ready = match self.slots.front() {
                None => return true,
                Some(Slot::Blobs { seq, .. }) => {
                    self.open.as_ref().is_none_or(|g| g.seq != *seq)
                        && self.reads.iter().find(|r| r.seq == *seq).is_some_and(|r| {
                            r.blobs.is_some() || r.handle.as_ref().is_some_and(|h| h.is_finished())
                        })
                }
                Some(_) => true,
            };
            if !ready {
                return true;
            }
            if !self.forward_one() {
                return false;
            }
        }
    }

    /// Issues the gathered read and hands everything on; false when the writer is gone or a
    /// failure was sent.
    fn flush_all(&mut self) -> bool {
        self.issue();
        while !self.slots.is_empty() {
            if !self.forward_one() {
                return false;
            }
        }
        true
    }

    /// Hands on the front slot, waiting for its read if need be; false when the writer is
    /// gone or a failure was sent.
    fn forward_one(&mut self) -> bool {
        let Some(slot) = self.slots.pop_front() else {
            return true;
        };
        match slot {
            Slot::Entry(e) => self.out.send(Msg::Entry(e)).is_ok(),
            Slot::Zeros(n) => self.out.send(Msg::Zeros(n)).is_ok(),
            Slot::Failed(e) => {
                let _ = self.out.send(Msg::Failed(e));
                false
            }
            Slot::Blobs { seq, count } => {
                if self.open.as_ref().is_some_and(|g| g.seq == seq) {
                    self.issue();
                }
                let Some(pos) = self.reads.iter().position(|r| r.seq == seq) else {
                    let _ = self.out.send(Msg::Failed(DumpError::Internal(format!(
                        "read {seq} is not in flight"
                    ))));
                    return false;
                };
                let r = &mut self.reads[pos];
                if r.blobs.is_none() {
                    let opened = match r.handle.take().map(ScopedJoinHandle::join) {
                        Some(Ok(o)) => o,
                        _ => Err(DumpError::Internal("a read thread panicked".into())),
                    };
                    match opened {
                        Ok(b) => r.blobs = Some(b),
                        Err(e) => {
                            let _ = self.out.send(Msg::Failed(e));
                            return false;
                        }
                    }
                }
                for _ in 0..count {
                    let Some(b) = r.blobs.as_mut().and_then(VecDeque::pop_front) else {
                        let _ = self.out.send(Msg::Failed(DumpError::Internal(format!(
                            "read {seq} returned too few blobs"
                        ))));
                        return false;
                    };
                    if self.out.send(Msg::Data(b)).is_err() {
                        return false;
                    }
                }
                if r.blobs.as_ref().is_some_and(VecDeque::is_empty) {
                    self.reads.remove(pos);
                }
                true
            }
        }
    }
}

/// Reads one range of a pack and opens its blobs, in order.
fn read(repo: &Repository, g: Group) -> Opened {
    let path = |w: &Want| -> PathBuf { snapshot_path(&w.file) };
    let first = g
        .wants
        .first()
        .map(path)
        .unwrap_or_else(|| PathBuf::from("/"));
    let sealed = repo
        .backend()
        .read_range(FileType::Pack, &g.pack.to_hex(), g.start, g.end - g.start)
        .map_err(|e| DumpError::Repo {
            path: first.clone(),
            source: RepoError::from(e),
        })?;
    let mut out = VecDeque::with_capacity(g.wants.len());
    for w in &g.wants {
        let at = (w.offset - g.start) as usize;
        let bytes = sealed
            .get(at..at + w.length as usize)
            .ok_or_else(|| DumpError::Repo {
                path: path(w),
                source: RepoError::BlobCorrupt {
                    kind: BlobKind::Data,
                    id: w.id,
                    pack: g.pack,
                    detail: format!(
                        "pack read returned {} bytes, short of the blob at {}",
                        sealed.len(),
                        w.offset
                    ),
                },
            })?;
        let plain = repo
            .open_blob(BlobKind::Data, &w.id, &g.pack, bytes, w.raw_len)
            .map_err(|source| DumpError::Repo {
                path: path(w),
                source,
            })?;
        out.push_back(plain);
    }
    Ok(out)
}
