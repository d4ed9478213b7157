//! `copy`: snapshots from one repository into another, re-encrypted for the target, skipping
//! the snapshots and blobs the target already has; any pair of backends.
//!
//! Two repositories whose keys give the same data the same blob id ([`same_ids`]: the target
//! was made with `init --copy-chunker-params` from the source, or the other way round) copy
//! **by id**: the trees are copied as they are and only the blobs the target's index lacks
//! are read. Otherwise blobs are **translated**: every data blob the snapshot uses is read and
//! hashed with the target's key (source id → target id is remembered for the run), stored when
//! the target lacks it, and the trees are rebuilt bottom-up with the new ids, so tree ids
//! change too. Chunk boundaries stay the source's either way.
//!
//! Per snapshot: the source trees are loaded in bulk ([`TreeLoader`], subtrees handled
//! earlier in the run are not loaded again) and walked once; the data blobs wanted are read
//! from the source packs in merged ranged reads on several threads, verified, compressed at
//! the target's level and sealed with the target's key on those threads (`read.rs`), packed
//! by kind and uploaded (`sink.rs`); then the trees; then the index file naming the new packs;
//! last the snapshot. That is backup's write order, so a copy stopped anywhere leaves a
//! usable target (at worst packs no index names, which the next backup adopts).
//!
//! Memory: the listings of one snapshot (as plaintext), 32 to 64 bytes per blob copied in
//! the run (to skip it next time), the reads in flight (a few MiB per reader), and one open
//! pack per kind.

mod read;
mod sink;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use arca_backend::BackendError;
use arca_format::{BlobKind, Id, NodeRef, Snapshot, Tree};
use arca_repo::blob::seal_blob;
use arca_repo::trees::TreeLoader;
use arca_repo::trees::ranges::{Span, coalesce};
use arca_repo::{Index, RepoError, Repository};

use read::{Got, ReadCtx};
use sink::Sink;

/// How a copy runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopyOptions {
    /// Ranged reads of source packs in flight (0 = chosen for the source's backend, as
    /// restore chooses them).
    pub readers: usize,
    /// Count what would be copied, write nothing (by id, data blobs are not even read).
    pub dry_run: bool,
}

/// Why a copy failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum CopyError {
    /// A repository operation failed (source or target; the message names the location).
    Repo(Box<RepoError>),
    /// A listing of the source snapshot could not be read.
    UnreadableTree {
        /// Source tree id.
        id: Id,
        /// Why.
        error: String,
    },
    /// A listing of the source snapshot was made by a newer arca: this snapshot cannot be
    /// copied by this build (not damage).
    NewerTree {
        /// Source tree id.
        id: Id,
        /// What the listing says of its version.
        error: String,
    },
    /// The source snapshot uses a blob its index does not list.
    MissingBlob {
        /// Kind.
        kind: BlobKind,
        /// Source blob id.
        id: Id,
    },
    /// A source blob did not read back or verify.
    BadBlob {
        /// Source blob id.
        id: Id,
        /// Source pack.
        pack: Id,
        /// What was wrong.
        error: String,
    },
}

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CopyError::Repo(e) => e.fmt(f),
            CopyError::UnreadableTree { id, error } => write!(
                f,
                "source tree {id} cannot be read ({error}); run `arca check` on the source"
            ),
            CopyError::NewerTree { id, error } => write!(
                f,
                "source tree {id} cannot be read ({error}); copy this snapshot with the newer \
                 arca"
            ),
            CopyError::MissingBlob { kind, id } => write!(
                f,
                "source {kind} blob {id} is not in the source's index; run `arca check` on the \
                 source"
            ),
            CopyError::BadBlob { id, pack, error } => write!(
                f,
                "source data blob {id} in pack {pack} cannot be copied: {error}; run `arca check \
                 --read-data` on the source"
            ),
        }
    }
}

impl std::error::Error for CopyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CopyError::Repo(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl From<RepoError> for CopyError {
    fn from(e: RepoError) -> Self {
        CopyError::Repo(Box::new(e))
    }
}

impl From<BackendError> for CopyError {
    fn from(e: BackendError) -> Self {
        CopyError::Repo(Box::new(e.into()))
    }
}

/// Blobs stored (or, in a dry run, that would be) and their plain bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Data blobs.
    pub data_blobs: u64,
    /// Plain bytes of the data blobs.
    pub data_bytes: u64,
    /// Tree blobs.
    pub tree_blobs: u64,
    /// Plain bytes of the tree blobs.
    pub tree_bytes: u64,
}

impl Counts {
    fn minus(self, o: Counts) -> Counts {
        Counts {
            data_blobs: self.data_blobs - o.data_blobs,
            data_bytes: self.data_bytes - o.data_bytes,
            tree_blobs: self.tree_blobs - o.tree_blobs,
            tree_bytes: self.tree_bytes - o.tree_bytes,
        }
    }
}

/// One snapshot copied.
#[derive(Debug, Clone)]
pub struct SnapshotCopy {
    /// The new snapshot's id in the target (`None` in a dry run).
    pub id: Option<Id>,
    /// The snapshot as saved: the source's fields, the target's root tree, no parent.
    pub snapshot: Snapshot,
    /// What this snapshot added to the target.
    pub stored: Counts,
}

/// What a whole run did.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopyReport {
    /// Blobs stored in the target.
    pub stored: Counts,
    /// Data blobs read from the source (by id only the missing ones; translated, every data
    /// blob not met earlier in the run).
    pub data_blobs_read: u64,
    /// Bytes read from source packs (trees and data).
    pub bytes_read: u64,
    /// Packs uploaded to the target.
    pub packs_written: u64,
    /// Bytes of those packs.
    pub bytes_written: u64,
    /// Index files written to the target.
    pub index_files_written: u64,
}

/// Text the two keys are probed with by [`same_ids`].
const PROBE: &[u8] = b"arca copy: do these two repositories identify blobs alike?";

/// Whether `a` and `b` give the same data the same blob id (then copying goes by id).
pub fn same_ids(a: &Repository, b: &Repository) -> bool {
    a.key().blob_id(PROBE) == b.key().blob_id(PROBE)
}

/// Whether `copy` is a copy of source snapshot `id` (`original`): the same time, host, user,
/// uid, gid, paths and tags (as sets), and, when the repositories identify blobs alike
/// (`same_tree`), the same root tree; otherwise the first tree of the chain either records
/// ([`Snapshot::copied_tree`]), or for copies made before it was recorded, the same totals of
/// files and bytes (what `rewrite` changes: a rewritten snapshot keeps its original, time and
/// tags, and was taken for a copy of the snapshot it was made from; dropping only symlinks or
/// empty folders changes no total, and such a rewrite was skipped: hunt 22). A copy that names its original (all that
/// `copy` made since the field exists) must name this one's: two snapshots alike in all the
/// rest (two imports with the same `--time`) are told apart, as restic tells them. The parent
/// is not compared (a copy has none).
pub fn same_snapshot(copy: &Snapshot, (id, original): (&Id, &Snapshot), same_tree: bool) -> bool {
    fn as_set(v: &[String]) -> HashSet<&String> {
        v.iter().collect()
    }
    let first = original.original.unwrap_or(*id);
    copy.original.is_none_or(|o| o == first)
        && copy.time == original.time
        && copy.hostname == original.hostname
        && copy.username == original.username
        && copy.uid == original.uid
        && copy.gid == original.gid
        && copy.paths.len() == original.paths.len()
        && as_set(&copy.paths) == as_set(&original.paths)
        && copy.tags.len() == original.tags.len()
        && as_set(&copy.tags) == as_set(&original.tags)
        && if same_tree {
            copy.tree == original.tree
        } else {
            // Either may name the first tree of its chain: `copy` is a copy of `original`, or
            // of the snapshot `original` was copied from, or (back again) its source.
            let linked = copy.copied_tree == Some(original.tree)
                || (copy.copied_tree.is_some() && copy.copied_tree == original.copied_tree)
                || original.copied_tree == Some(copy.tree);
            let totals = copy.summary.total_files_processed
                == original.summary.total_files_processed
                && copy.summary.total_bytes_processed == original.summary.total_bytes_processed;
            // The totals only for a copy made before `copied_tree` was recorded (it names an
            // original): a backup with the same time and totals but other content was taken
            // for a copy, and the source snapshot never copied (hunt H18).
            linked || (copy.copied_tree.is_none() && copy.original.is_some() && totals)
        }
}

/// Copies snapshots from one repository into another; remembers, for the run, what it has
/// stored and how source ids translate.
pub struct Copier<'a> {
    src: &'a Repository,
    src_index: &'a Index,
    dst: &'a Repository,
    dst_index: &'a Index,
    same_ids: bool,
    opts: CopyOptions,
    /// Source data id → target data id (translating only).
    data_map: HashMap<Id, Id>,
    /// Source tree id → target tree id, for every tree handled in the run.
    tree_map: HashMap<Id, Id>,
    /// Target ids stored in this run.
    stored_data: HashSet<Id>,
    stored_trees: HashSet<Id>,
    sink: Sink<'a>,
    report: CopyReport,
}

impl fmt::Debug for Copier<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Copier({:?} -> {:?})", self.src, self.dst)
    }
}

impl<'a> Copier<'a> {
    /// A copier from `src` (with its loaded index) into `dst` (with its index, which tells
    /// what the target already has). Both repositories should be locked (shared).
    pub fn new(
        src: &'a Repository,
        src_index: &'a Index,
        dst: &'a Repository,
        dst_index: &'a Index,
        opts: CopyOptions,
    ) -> Self {
        Self {
            src,
            src_index,
            dst,
            dst_index,
            same_ids: same_ids(src, dst),
            opts,
            data_map: HashMap::new(),
            tree_map: HashMap::new(),
            stored_data: HashSet::new(),
            stored_trees: HashSet::new(),
            sink: Sink::new(dst),
            report: CopyReport::default(),
        }
    }

    /// Whether blobs are copied by id (else translated).
    pub fn same_ids(&self) -> bool {
        self.same_ids
    }

    /// What the run has done so far.
    pub fn report(&self) -> CopyReport {
        let mut r = self.report;
        r.packs_written = self.sink.packs_written;
        r.bytes_written = self.sink.bytes_written;
        r.index_files_written = self.sink.index_files_written;
        r
    }

    /// Copies one source snapshot: its blobs the target lacks, then the index, then the
    /// snapshot (not in a dry run). On failure, the packs already uploaded are indexed, so a
    /// rerun does not upload them again.
    pub fn copy_snapshot(&mut self, id: &Id, snap: &Snapshot) -> Result<SnapshotCopy, CopyError> {
        let before = self.report.stored;
        let got = self.copy_inner(id, snap);
        if got.is_err() {
            // Best effort: the error being reported is the first one.
            let _ = self.sink.index_uploaded();
        }
        let (id, snapshot) = got?;
        Ok(SnapshotCopy {
            id,
            snapshot,
            stored: self.report.stored.minus(before),
        })
    }

    fn copy_inner(
        &mut self,
        src_id: &Id,
        snap: &Snapshot,
    ) -> Result<(Option<Id>, Snapshot), CopyError> {
        if !self.tree_map.contains_key(&snap.tree) {
            let listings = self.load_trees(snap.tree)?;
            let (order, data) = self.walk(&listings, snap.tree)?;
            self.copy_data(&data)?;
            for id in order {
                let plain = listings.get(&id).ok_or_else(|| CopyError::UnreadableTree {
                    id,
                    error: "not loaded".into(),
                })?;
                self.copy_tree(id, plain)?;
            }
            self.sink.flush()?;
        }
        let tree = *self
            .tree_map
            .get(&snap.tree)
            .ok_or_else(|| CopyError::UnreadableTree {
                id: snap.tree,
                error: "not loaded".into(),
            })?;
        let mut copy = snap.clone();
        copy.tree = tree;
        copy.parent = None;
        // Translated, the trees cannot be compared: the tree of the chain's first snapshot
        // is kept for later runs (a copy of a copy keeps the one its source carries, so that
        // copies through a third repository, or back, are recognised: hunt 23). By id, the
        // source's record stays as it is.
        if !self.same_ids {
            copy.copied_tree = Some(snap.copied_tree.unwrap_or(snap.tree));
        }
        copy.original.get_or_insert(*src_id);
        let id = if self.opts.dry_run {
            None
        } else {
            // With the fields this build does not know (a newer arca's), as the source has them.
            let body = self
                .src
                .load_file(arca_backend::FileType::Snapshot, src_id)
                .unwrap_or_default();
            Some(self.dst.save_snapshot_keeping(&copy, &body)?)
        };
        Ok((id, copy))
    }

    /// The verified plaintext of every listing below `root` not handled earlier in the run.
    fn load_trees(&mut self, root: Id) -> Result<HashMap<Id, Vec<u8>>, CopyError> {
        let stop = AtomicBool::new(false);
        let mut loader = TreeLoader::new(self.src, self.src_index, &stop);
        if self.opts.readers > 0 {
            loader.threads = self.opts.readers;
        }
        let done = &self.tree_map;
        let seen = RefCell::new(HashSet::from([root]));
        let keep = |node: &NodeRef<'_>, _: &Path, _: bool| {
            let sub = node.subtree?;
            (!done.contains_key(&sub) && seen.borrow_mut().insert(sub)).then_some(true)
        };
        let loaded = loader.load(root, &keep);
        self.report.bytes_read += loader.bytes.load(Ordering::Relaxed);
        let mut out = HashMap::with_capacity(loaded.len());
        for (id, listing) in loaded {
            match listing {
                Ok(plain) => {
                    out.insert(id, plain);
                }
                Err(error) => {
                    // Read again to tell a newer arca's listing from damage (the loader's
                    // reasons are text).
                    let newer = self
                        .src
                        .load_tree(self.src_index, &id)
                        .is_err_and(|e| e.is_newer_format());
                    return Err(match newer {
                        true => CopyError::NewerTree { id, error },
                        false => CopyError::UnreadableTree { id, error },
                    });
                }
            }
        }
        Ok(out)
    }

    /// Walks the listings from `root`: the trees to handle, children before parents, and the
    /// data blobs to read, in order of first use, each once.
    fn walk(
        &self,
        listings: &HashMap<Id, Vec<u8>>,
        root: Id,
    ) -> Result<(Vec<Id>, Vec<Id>), CopyError> {
        let mut order = vec![];
        let mut data = vec![];
        let mut seen_trees = HashSet::new();
        let mut seen_data = HashSet::new();
        let mut stack = vec![(root, false)];
        while let Some((id, expanded)) = stack.pop() {
            if expanded {
                order.push(id);
                continue;
            }
            if self.tree_map.contains_key(&id) || !seen_trees.insert(id) {
                continue;
            }
            let tree = decode(listings, id)?;
            stack.push((id, true));
            for node in &tree.nodes {
                for c in &node.content {
                    if !self.data_done(&c.id) && seen_data.insert(c.id) {
                        data.push(c.id);
                    }
                }
            }
            // Reversed, so that subdirectories are expanded in name order.
            for sub in tree.nodes.iter().rev().filter_map(|n| n.subtree) {
                if !self.tree_map.contains_key(&sub) && !seen_trees.contains(&sub) {
                    stack.push((sub, false));
                }
            }
        }
        Ok((order, data))
    }

    /// Whether nothing is left to do for source data blob `id`.
    fn data_done(&self, id: &Id) -> bool {
        if self.same_ids {
            self.stored_data.contains(id) || self.dst_index.contains(BlobKind::Data, id)
        } else {
            self.data_map.contains_key(id)
        }
    }

    /// Reads, verifies, re-seals and stores the data blobs `wanted` (source ids).
    fn copy_data(&mut self, wanted: &[Id]) -> Result<(), CopyError> {
        let mut spans = Vec::with_capacity(wanted.len());
        for (order, id) in wanted.iter().enumerate() {
            let loc = self
                .src_index
                .get(BlobKind::Data, id)
                .ok_or(CopyError::MissingBlob {
                    kind: BlobKind::Data,
                    id: *id,
                })?;
            if self.opts.dry_run && self.same_ids {
                // By id, what is missing is known without reading it.
                self.stored_data.insert(*id);
                self.report.stored.data_blobs += 1;
                self.report.stored.data_bytes += u64::from(loc.raw_length);
                continue;
            }
            spans.push(Span {
                pack: loc.pack_index,
                offset: u64::from(loc.offset),
                len: u64::from(loc.length),
                item: (*id, loc.raw_length, order),
            });
        }
        if spans.is_empty() {
            return Ok(());
        }
        let stop = AtomicBool::new(false);
        let mut ctx = ReadCtx::new(self.src, self.src_index, self.dst, self.dst_index, &stop);
        ctx.same_ids = self.same_ids;
        ctx.seal = !self.opts.dry_run;
        if self.opts.readers > 0 {
            ctx.threads = self.opts.readers;
        }
        let mut reads = coalesce(spans, ctx.read_gap, ctx.max_read);
        // Roughly the order the snapshot uses the data in, which is how the target's packs
        // will be laid out (what restore reads together).
        reads.sort_by_key(|r| r.items.iter().map(|s| s.item.2).min());
        let Self {
            data_map,
            stored_data,
            sink,
            report,
            same_ids,
            ..
        } = self;
        let bytes = read::read_all(&ctx, &reads, |got: Vec<Got>| {
            for g in got {
                report.data_blobs_read += 1;
                if !*same_ids {
                    data_map.insert(g.source, g.target);
                }
                if g.new && stored_data.insert(g.target) {
                    report.stored.data_blobs += 1;
                    report.stored.data_bytes += u64::from(g.raw_len);
                    if let Some(b) = &g.sealed {
                        sink.add(b)?;
                    }
                }
            }
            Ok(())
        })?;
        self.report.bytes_read += bytes;
        Ok(())
    }

    /// Stores source tree `id` (its listing `plain`), translated unless ids are the same;
    /// its subtrees and data are handled already.
    fn copy_tree(&mut self, id: Id, plain: &[u8]) -> Result<(), CopyError> {
        let translated;
        let (target, bytes) = if self.same_ids {
            (id, plain)
        } else {
            let mut tree = Tree::decode(plain).map_err(|e| CopyError::UnreadableTree {
                id,
                error: e.to_string(),
            })?;
            for node in &mut tree.nodes {
                for c in &mut node.content {
                    c.id = *self.data_map.get(&c.id).ok_or(CopyError::MissingBlob {
                        kind: BlobKind::Data,
                        id: c.id,
                    })?;
                }
                if let Some(sub) = &mut node.subtree {
                    *sub = *self.tree_map.get(sub).ok_or(CopyError::MissingBlob {
                        kind: BlobKind::Tree,
                        id: *sub,
                    })?;
                }
            }
            translated = tree.encode().map_err(|e| CopyError::UnreadableTree {
                id,
                error: e.to_string(),
            })?;
            (self.dst.key().blob_id(&translated), translated.as_slice())
        };
        if !self.dst_index.contains(BlobKind::Tree, &target) && self.stored_trees.insert(target) {
            self.report.stored.tree_blobs += 1;
            self.report.stored.tree_bytes += bytes.len() as u64;
            if !self.opts.dry_run {
                let level = self.dst.config().compression;
                let sealed = seal_blob(self.dst.sealer(), BlobKind::Tree, target, bytes, level)?;
                self.sink.add(&sealed)?;
            }
        }
        self.tree_map.insert(id, target);
        Ok(())
    }
}

fn decode(listings: &HashMap<Id, Vec<u8>>, id: Id) -> Result<Tree, CopyError> {
    let plain = listings.get(&id).ok_or_else(|| CopyError::UnreadableTree {
        id,
        error: "not loaded".into(),
    })?;
    Tree::decode(plain).map_err(|e| {
        // Not damage: `check` says to upgrade, and sending the user to it was wrong (hunt 30).
        let error = e.to_string();
        match e.is_newer() {
            true => CopyError::NewerTree { id, error },
            false => CopyError::UnreadableTree { id, error },
        }
    })
}
