//! Marking the blobs snapshots use: every snapshot's trees, level by level, each distinct
//! tree once, the bits of the index locations of every blob reached set in one bitmap.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arca_backend::{ErrorKind, FileType};
use arca_format::{BlobKind, Id, Tree};
use arca_repo::blob::BlobOpener;
use arca_repo::trees::TreeLoader;
use arca_repo::trees::ranges::{Read, Span, coalesce, read_with_retry};
use arca_repo::{BlobLocation, Index, Repository};

use super::{Progress, PruneError, TreeFault};

/// Missing blobs named in the error.
const EXAMPLES: usize = 5;

/// One bit per index location (`Index::positions`), set from any thread.
#[derive(Debug)]
pub(super) struct Marks {
    words: Vec<AtomicU64>,
}

impl Marks {
    /// `n` bits, all clear.
    pub(super) fn new(n: usize) -> Self {
        Self {
            words: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Sets bit `pos`; true if it was clear.
    pub(super) fn set(&self, pos: usize) -> bool {
        let bit = 1u64 << (pos % 64);
        self.words[pos / 64].fetch_or(bit, Ordering::Relaxed) & bit == 0
    }

    /// Whether bit `pos` is set.
    pub(super) fn get(&self, pos: usize) -> bool {
        self.words[pos / 64].load(Ordering::Relaxed) & (1u64 << (pos % 64)) != 0
    }

    /// Clears bit `pos`.
    pub(super) fn clear(&self, pos: usize) {
        self.words[pos / 64].fetch_and(!(1u64 << (pos % 64)), Ordering::Relaxed);
    }
}

/// What the walk went through.
#[derive(Debug, Default)]
pub(super) struct Walked {
    pub(super) snapshots: usize,
    pub(super) trees: u64,
}

/// A tree to read: its id and where it is (48 bytes; a level may hold many).
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: Id,
    pack: u32,
    offset: u32,
    length: u32,
    raw_length: u32,
}

impl Pending {
    fn new(id: Id, loc: &BlobLocation) -> Self {
        Self {
            id,
            pack: loc.pack_index,
            offset: loc.offset,
            length: loc.length,
            raw_length: loc.raw_length,
        }
    }
}

/// A blob claimed by the walk.
enum Claim {
    /// Marked now for the first time: the location to read it from.
    New(BlobLocation),
    /// Already marked (a tree met before).
    Seen,
    /// Not indexed, or only in packs that are missing or damaged.
    Missing,
}

#[derive(Default)]
struct Missing {
    trees: u64,
    data: u64,
    examples: Vec<(BlobKind, Id)>,
    /// Each missing blob is counted once, however many snapshots use it.
    seen: std::collections::HashSet<(bool, Id)>,
}

struct Walker<'a> {
    repo: &'a Repository,
    index: &'a Index,
    usable: &'a [bool],
    marks: &'a Marks,
    missing: Mutex<Missing>,
    progress: &'a Progress,
}

impl Walker<'_> {
    /// Marks every usable location of a blob; the first usable location decides whether the
    /// blob is new (exactly one caller sees `New` for it, whichever thread).
    fn claim(&self, kind: BlobKind, id: &Id) -> Claim {
        let mut first: Option<(BlobLocation, bool)> = None;
        for (pos, loc) in self.index.positions(kind, id) {
            if !self.usable[loc.pack_index as usize] {
                continue;
            }
            let fresh = self.marks.set(pos);
            first.get_or_insert((loc, fresh));
        }
        match first {
            None => {
                let mut m = self.missing.lock().unwrap_or_else(|p| p.into_inner());
                if !m.seen.insert((kind == BlobKind::Tree, *id)) {
                    return Claim::Missing;
                }
                match kind {
                    BlobKind::Tree => m.trees += 1,
                    BlobKind::Data => m.data += 1,
                }
                if m.examples.len() < EXAMPLES {
                    m.examples.push((kind, *id));
                }
                Claim::Missing
            }
            Some((loc, true)) => Claim::New(loc),
            Some((_, false)) => Claim::Seen,
        }
    }

    /// Reads the trees of one merged read, marks what they reference and returns the
    /// subtrees seen for the first time.
    fn read(
        &self,
        r: &Read<(Id, u32)>,
        buf: &mut Vec<u8>,
        opener: &mut BlobOpener,
        stop: &AtomicBool,
        next: &mut Vec<Pending>,
    ) -> Result<(), PruneError> {
        let pack = self.index.packs()[r.pack as usize].id;
        // The messages name the tree and, when damaged, its pack: the causes name neither.
        let damaged = |id: Id, error: String| PruneError::UnreadableTree {
            id,
            error,
            fault: TreeFault::Damaged { pack },
        };
        let first = r.items.first().map(|s| s.item.0).unwrap_or_default();
        let (at, _) = read_with_retry(
            self.repo.backend().as_ref(),
            &pack,
            r.offset,
            r.len,
            buf,
            stop,
        )
        .map_err(|e| match e.kind {
            // The pack ends before the tree: damaged, as a flipped byte is.
            ErrorKind::ShortRead => damaged(first, format!("cut short ({})", e.source)),
            kind => PruneError::UnreadableTree {
                id: first,
                error: e.to_string(),
                fault: if kind == ErrorKind::NotFound {
                    TreeFault::Missing
                } else {
                    TreeFault::Unreadable
                },
            },
        })?;
        for s in &r.items {
            let (id, raw_len) = s.item;
            let start = at + (s.offset - r.offset) as usize;
            let sealed = buf
                .get_mut(start..start + s.len as usize)
                .ok_or_else(|| damaged(id, "cut short".into()))?;
            let plain = opener
                .open(
                    self.repo.key(),
                    self.repo.sealer(),
                    BlobKind::Tree,
                    id,
                    pack,
                    sealed,
                    raw_len,
                )
                .map_err(|e| damaged(id, e.blob_cause()))?;
            let tree = Tree::decode(plain).map_err(|e| {
                // Not damage: a listing of a newer arca, which this one cannot read.
                if e.is_newer() {
                    PruneError::UnreadableTree {
                        id,
                        error: e.to_string(),
                        fault: TreeFault::Newer,
                    }
                } else {
                    damaged(id, format!("damaged: not a valid listing: {e}"))
                }
            })?;
            for node in &tree.nodes {
                for c in &node.content {
                    self.claim(BlobKind::Data, &c.id);
                }
                if let Some(sub) = node.subtree
                    && let Claim::New(loc) = self.claim(BlobKind::Tree, &sub)
                {
                    next.push(Pending::new(sub, &loc));
                }
            }
            Progress::bump(&self.progress.trees, 1);
            self.progress.go_on()?;
        }
        Ok(())
    }
}

/// Marks in `marks` the blobs every snapshot uses, at their locations in packs that are
/// `usable` (by pack position). Fails, marking stopped, when a snapshot or a tree cannot be
/// read or a used blob has no usable location.
pub(super) fn mark_used(
    repo: &Repository,
    index: &Index,
    usable: &[bool],
    marks: &Marks,
    threads: usize,
    ignore: &[Id],
    progress: &Progress,
) -> Result<Walked, PruneError> {
    let stop = AtomicBool::new(false);
    // The loader's choices for this backend: gap, largest read, reads in flight.
    let loader = TreeLoader::new(repo, index, &stop);
    let (gap, max_read) = (loader.read_gap, loader.max_read);
    let threads = if threads == 0 {
        loader.threads
    } else {
        threads
    };
    let w = Walker {
        repo,
        index,
        usable,
        marks,
        missing: Mutex::new(Missing::default()),
        progress,
    };
    let mut walked = Walked::default();
    let mut level: Vec<Pending> = vec![];
    for (id, _) in repo.list_ids(FileType::Snapshot)? {
        if ignore.contains(&id) {
            continue;
        }
        let snap = repo
            .load_snapshot(&id)
            .map_err(|error| PruneError::UnreadableSnapshot {
                id,
                error: Box::new(error),
            })?;
        walked.snapshots += 1;
        if let Claim::New(loc) = w.claim(BlobKind::Tree, &snap.tree) {
            level.push(Pending::new(snap.tree, &loc));
        }
    }
    while !level.is_empty() {
        walked.trees += level.len() as u64;
        let spans = level
            .drain(..)
            .map(|t| Span {
                pack: t.pack,
                offset: u64::from(t.offset),
                len: u64::from(t.length),
                item: (t.id, t.raw_length),
            })
            .collect();
        let reads = coalesce(spans, gap, max_read);
        level = read_level(&w, &reads, threads, &stop)?;
    }
    let m = w.missing.into_inner().unwrap_or_else(|p| p.into_inner());
    if m.trees + m.data > 0 {
        return Err(PruneError::MissingBlobs {
            trees: m.trees,
            data: m.data,
            examples: m.examples,
        });
    }
    Ok(walked)
}

/// Runs the reads of one level on `threads` threads; returns the next level, or the first
/// error (the other threads stop at their next read).
fn read_level(
    w: &Walker<'_>,
    reads: &[Read<(Id, u32)>],
    threads: usize,
    stop: &AtomicBool,
) -> Result<Vec<Pending>, PruneError> {
    let next_read = AtomicUsize::new(0);
    let threads = threads.clamp(1, reads.len().max(1));
    let results: Vec<Result<Vec<Pending>, PruneError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let (mut buf, mut opener, mut next) = (vec![], BlobOpener::new(), vec![]);
                    while !stop.load(Ordering::Relaxed) {
                        let Some(r) = reads.get(next_read.fetch_add(1, Ordering::Relaxed)) else {
                            break;
                        };
                        if let Err(e) = w.read(r, &mut buf, &mut opener, stop, &mut next) {
                            stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                    Ok(next)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    stop.store(true, Ordering::Relaxed);
                    Err(PruneError::UnreadableTree {
                        id: Id::default(),
                        error: "a tree reader thread failed".into(),
                        fault: TreeFault::Unreadable,
                    })
                })
            })
            .collect()
    });
    let mut next = vec![];
    for r in results {
        next.extend(r?);
    }
    Ok(next)
}
