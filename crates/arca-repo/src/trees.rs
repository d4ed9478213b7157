//! Loading a snapshot's directory listings in bulk: level by level, the tree blobs a level
//! needs are grouped by pack, nearby ones merged into one ranged read ([`ranges::coalesce`]),
//! and the reads run on several threads, so a remote repository costs a few requests per
//! level, not one per directory. Listings are kept as verified plaintext (decoded nodes take
//! about three times the memory) and decoded on use.
//!
//! Restore loads the listings its selection keeps ([`TreeLoader::load`]); backup loads every
//! listing of its parent snapshot ([`load_all`]).

pub mod ranges;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arca_format::{BlobKind, Id, NodeRef, Tree};

use crate::blob::BlobOpener;
use crate::{Index, Repository};
use ranges::{Read, Span, coalesce, read_with_retry};

/// One listing's verified plaintext, or why it could not be read (naming the pack, not the
/// listing: the caller names the listing, by its tree id or its path).
pub type Listing = Result<Vec<u8>, String>;

/// Directory listings by tree id (see [`Listing`]).
pub type Listings = HashMap<Id, Listing>;

/// Decides, for the directory `node` (as it lies in its parent's listing) at snapshot path
/// `path` (absolute, `/` being the root) whose parent is selected as a whole or not, whether
/// its listing is loaded:
/// `None` = left out (with everything below it); `Some(selected)` = loaded, and passed on to
/// its subdirectories as their parent's flag. The root is always loaded, selected.
pub type Keep<'k> = dyn Fn(&NodeRef<'_>, &Path, bool) -> Option<bool> + 'k;

/// Loads directory listings in bulk, counting what it costs.
#[derive(Debug)]
pub struct TreeLoader<'a> {
    /// The repository read.
    pub repo: &'a Repository,
    /// Where the tree blobs are.
    pub index: &'a Index,
    /// Two tree blobs of a pack closer than this are read as one range.
    pub read_gap: u64,
    /// Largest single ranged read.
    pub max_read: u64,
    /// Ranged reads in flight.
    pub threads: usize,
    /// Stops loading (the listings read so far are returned) and cuts retry backoffs short.
    pub stop: &'a AtomicBool,
    /// Ranged reads made (a retried read counts once).
    pub requests: AtomicU64,
    /// Bytes read.
    pub bytes: AtomicU64,
    /// Reads retried after transient backend failures.
    pub retries: AtomicU64,
}

impl<'a> TreeLoader<'a> {
    /// A loader with gap, read size and threads chosen for the repository's backend (as
    /// restore chooses them by default), counters at zero.
    pub fn new(repo: &'a Repository, index: &'a Index, stop: &'a AtomicBool) -> Self {
        const MIB: u64 = 1 << 20;
        let hints = repo.backend().hints();
        let latency = hints.latency.unwrap_or(if hints.local {
            Duration::ZERO
        } else {
            Duration::from_millis(30)
        });
        let (read_gap, max_read, threads) = if hints.local {
            (256 << 10, 2 * MIB, 4)
        } else {
            // Bandwidth-delay product: what one round trip leaves unread on the link.
            let gap = hints
                .bandwidth
                .map(|b| ((b as f64 * latency.as_secs_f64()) as u64).clamp(256 << 10, 8 * MIB))
                .unwrap_or(MIB);
            let threads = if latency >= Duration::from_millis(5) {
                16
            } else {
                8
            };
            (gap, (4 * MIB).max(gap * 2), threads)
        };
        Self {
            repo,
            index,
            read_gap,
            max_read,
            threads,
            stop,
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            retries: AtomicU64::new(0),
        }
    }

    /// Loads the listings below `root` that `keep` keeps, level by level. Every listing
    /// looked for is in the result: its verified plaintext (it decodes as a tree), or why it
    /// could not be had; the subdirectories of a listing that could not be had are not
    /// looked for.
    pub fn load(&self, root: Id, keep: &Keep<'_>) -> Listings {
        let mut trees = Listings::new();
        let mut level: Vec<(Id, PathBuf, bool)> = vec![(root, PathBuf::from("/"), true)];
        while !level.is_empty() && !self.stop.load(Ordering::Relaxed) {
            let mut want: Vec<Id> = level
                .iter()
                .map(|(id, ..)| *id)
                .filter(|id| !trees.contains_key(id))
                .collect();
            want.sort_unstable();
            want.dedup();
            trees.extend(self.fetch(&want));
            let mut next = vec![];
            for (id, path, selected) in &level {
                let Some(Ok(plain)) = trees.get(id) else {
                    continue;
                };
                // Only the directories are needed here: walked in place, not decoded.
                let _ = Tree::visit(plain, |node| {
                    let Some(sub) = node.subtree else {
                        return;
                    };
                    let child = path.join(OsStr::from_bytes(node.name));
                    if let Some(sel_child) = keep(&node, &child, *selected) {
                        next.push((sub, child, sel_child));
                    }
                });
            }
            level = next;
        }
        trees
    }

    /// Fetches and verifies the listings `ids`, several ranged reads at once. A listing
    /// whose copy cannot be had (a damaged blob, a missing pack) is read from its next copy
    /// when the index knows another (a backup stores a listing again when it finds the
    /// stored one damaged); it fails only when every copy does. The first copy is read twice
    /// before that: a fault on the way (a flipped byte in transit) fails no listing.
    fn fetch(&self, ids: &[Id]) -> Vec<(Id, Listing)> {
        let mut out = vec![];
        let mut first_error: HashMap<Id, String> = HashMap::new();
        // Each listing with the copy to read next; read again once, those that came in
        // damaged.
        let mut todo: Vec<(Id, usize)> = ids.iter().map(|&id| (id, 0)).collect();
        let mut reread: std::collections::HashSet<Id> = std::collections::HashSet::new();
        while !todo.is_empty() {
            let mut by_copy: std::collections::BTreeMap<usize, Vec<Id>> = Default::default();
            for (id, copy) in todo.drain(..) {
                by_copy.entry(copy).or_default().push(id);
            }
            for (copy, ids) in by_copy {
                for (id, got, damaged) in self.fetch_copy(&ids, copy) {
                    let Err(why) = got else {
                        out.push((id, got));
                        continue;
                    };
                    let next = if damaged && reread.insert(id) {
                        copy
                    } else {
                        copy + 1
                    };
                    let another = next == copy
                        || self
                            .index
                            .locations(BlobKind::Tree, &id)
                            .nth(next)
                            .is_some();
                    if another && !self.stop.load(Ordering::Relaxed) {
                        first_error.entry(id).or_insert(why);
                        todo.push((id, next));
                    } else {
                        let why = match first_error.remove(&id) {
                            Some(first) if copy == 0 && first == why => {
                                format!("{first} (read twice)")
                            }
                            Some(first) if copy == 0 => format!("{first}; read again: {why}"),
                            Some(first) => format!("{first}; its other copies: {why}"),
                            None => why,
                        };
                        out.push((id, Err(why)));
                    }
                }
            }
        }
        out
    }

    /// Fetches and verifies copy number `copy` (0 = the first the index names) of each
    /// listing of `ids`; with each, whether it came but did not verify.
    fn fetch_copy(&self, ids: &[Id], copy: usize) -> Vec<(Id, Listing, bool)> {
        let mut out = vec![];
        let mut spans = vec![];
        for id in ids {
            match self.index.locations(BlobKind::Tree, id).nth(copy) {
                Some(loc) => spans.push(Span {
                    pack: loc.pack_index,
                    offset: u64::from(loc.offset),
                    len: u64::from(loc.length),
                    item: (*id, loc.raw_length),
                }),
                None => out.push((*id, Err("not in the index".to_string()), false)),
            }
        }
        let reads = coalesce(spans, self.read_gap, self.max_read);
        let loaded = crate::par::map_ordered(
            &reads,
            self.threads,
            || (vec![], BlobOpener::new()),
            |(buf, opener), r| {
                let mut got = vec![];
                self.read_one(r, buf, opener, &mut got);
                got
            },
        );
        for (r, got) in reads.iter().zip(loaded) {
            match got {
                Some(got) => out.extend(got),
                None => out.extend(
                    r.items
                        .iter()
                        .map(|s| (s.item.0, Err("the reader thread failed".to_string()), false)),
                ),
            }
        }
        out
    }

    fn read_one(
        &self,
        r: &Read<(Id, u32)>,
        buf: &mut Vec<u8>,
        opener: &mut BlobOpener,
        got: &mut Vec<(Id, Listing, bool)>,
    ) {
        let pack = self.index.packs()[r.pack as usize].id;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let at = match read_with_retry(
            self.repo.backend().as_ref(),
            &pack,
            r.offset,
            r.len,
            buf,
            self.stop,
        ) {
            Ok((at, retries)) => {
                self.retries
                    .fetch_add(u64::from(retries), Ordering::Relaxed);
                at
            }
            Err(e) => {
                got.extend(
                    r.items
                        .iter()
                        .map(|s| (s.item.0, Err(e.to_string()), false)),
                );
                return;
            }
        };
        self.bytes.fetch_add(r.len, Ordering::Relaxed);
        for s in &r.items {
            let (id, raw_len) = s.item;
            let start = at + (s.offset - r.offset) as usize;
            let Some(sealed) = buf.get_mut(start..start + s.len as usize) else {
                got.push((id, Err("the read came back short".into()), false));
                continue;
            };
            let mut damaged = false;
            let res = opener
                .open(
                    self.repo.key(),
                    self.repo.sealer(),
                    BlobKind::Tree,
                    id,
                    pack,
                    sealed,
                    raw_len,
                )
                .map_err(|e| {
                    damaged = true;
                    copy_damaged(&pack, &e)
                })
                .and_then(|plain| {
                    // Checked here so that a bad listing is reported as one.
                    Tree::visit(plain, |_| {})
                        .map(|_| plain.to_vec())
                        .map_err(|e| format!("not a valid listing: {e}"))
                });
            got.push((id, res, damaged));
        }
    }
}

/// Why the copy of a listing in `pack` did not open, without the listing's id: every caller
/// names the listing (its tree id, or its path) itself.
fn copy_damaged(pack: &Id, e: &crate::RepoError) -> String {
    format!("the copy in pack {pack} is {}", e.blob_cause())
}

/// Every directory listing of a snapshot (a backup's parent), as verified plaintext by tree
/// id, decoded on demand. A listing that could not be loaded, and everything below it, is
/// absent: the backup reads those directories' files again instead of trusting the parent.
#[derive(Debug, Default)]
pub struct ParentTrees {
    listings: HashMap<Id, Vec<u8>>,
    failed: Vec<(Id, String)>,
    requests: u64,
    bytes: u64,
    retries: u64,
}

impl ParentTrees {
    /// The listing `id`, decoded; `None` if it was not loaded.
    pub fn get(&self, id: &Id) -> Option<Tree> {
        self.listings
            .get(id)
            .and_then(|plain| Tree::decode(plain).ok())
    }

    /// Whether the listing `id` was loaded.
    pub fn contains(&self, id: &Id) -> bool {
        self.listings.contains_key(id)
    }

    /// Listings loaded.
    pub fn len(&self) -> usize {
        self.listings.len()
    }

    /// Whether no listing was loaded (not even the root).
    pub fn is_empty(&self) -> bool {
        self.listings.is_empty()
    }

    /// The listings that could not be loaded, and why (those below them were not looked
    /// for).
    pub fn failed(&self) -> &[(Id, String)] {
        &self.failed
    }

    /// Ranged reads made.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Bytes read.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Reads retried after transient backend failures.
    pub fn retries(&self) -> u64 {
        self.retries
    }

    /// Plaintext bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.listings.values().map(Vec::len).sum()
    }
}

/// Loads every directory listing below `root` (the root's included) with `threads` ranged
/// reads in flight (0 = chosen for the backend), each distinct listing once. Never fails:
/// what could not be loaded is absent (see [`ParentTrees::failed`]).
pub fn load_all(repo: &Repository, index: &Index, root: Id, threads: usize) -> ParentTrees {
    let stop = AtomicBool::new(false);
    let mut loader = TreeLoader::new(repo, index, &stop);
    if threads > 0 {
        loader.threads = threads;
    }
    // A subtree met again (an unchanged copy of a directory) is not walked again.
    let seen = RefCell::new(HashSet::from([root]));
    let keep = |node: &NodeRef<'_>, _: &Path, _: bool| {
        let sub = node.subtree?;
        seen.borrow_mut().insert(sub).then_some(true)
    };
    let loaded = loader.load(root, &keep);
    let mut out = ParentTrees {
        requests: loader.requests.load(Ordering::Relaxed),
        bytes: loader.bytes.load(Ordering::Relaxed),
        retries: loader.retries.load(Ordering::Relaxed),
        ..ParentTrees::default()
    };
    for (id, listing) in loaded {
        match listing {
            Ok(plain) => {
                out.listings.insert(id, plain);
            }
            Err(why) => out.failed.push((id, why)),
        }
    }
    out.failed.sort_unstable_by_key(|f| f.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arca_backend::{
        Backend, Fault, FaultBackend, FileType, MemoryBackend, MeteredBackend, Op, Rule, Throttle,
        Trigger,
    };
    use arca_format::{IndexFile, IndexPack, Node, NodeKind};

    use crate::blob::seal_blob;
    use crate::pack::PackWriter;

    /// A snapshot's trees as a backup writes them: children before parents, tree blobs
    /// packed into packs of about `PACK_CAP` bytes.
    struct Fixture {
        repo: Repository,
        index: Index,
        root: Id,
        /// Every distinct tree.
        trees: HashMap<Id, Tree>,
        packs: Vec<IndexPack>,
    }

    const PACK_CAP: usize = 12 << 10;

    use crate::testing::repo as init;

    struct Writer<'r> {
        repo: &'r Repository,
        pack: PackWriter,
        packs: Vec<IndexPack>,
        trees: HashMap<Id, Tree>,
    }

    impl Writer<'_> {
        fn store(&mut self, tree: Tree) -> Id {
            let bytes = tree.encode().unwrap();
            let id = self.repo.key().blob_id(&bytes);
            if self.trees.insert(id, tree).is_none() {
                let sealed = seal_blob(self.repo.sealer(), BlobKind::Tree, id, &bytes, 3).unwrap();
                self.pack.add(&sealed).unwrap();
                if self.pack.size() >= PACK_CAP {
                    self.flush();
                }
            }
            id
        }

        fn flush(&mut self) {
            let full = std::mem::replace(&mut self.pack, PackWriter::new(BlobKind::Tree, 1 << 16));
            if full.is_empty() {
                return;
            }
            let p = full.finish(self.repo.sealer()).unwrap();
            self.repo
                .backend()
                .write(FileType::Pack, &p.id.to_hex(), &p.bytes)
                .unwrap();
            self.packs.push(p.index);
        }

        /// A directory `depth` levels down with `fanout[depth]` subdirectories and a few
        /// files; leaves hold an `empty` directory (one tree shared by all of them).
        fn dir(&mut self, name: &str, depth: usize, fanout: &[usize]) -> Id {
            let mut nodes = vec![];
            for f in 0..3 {
                nodes.push(Node {
                    name: format!("{name}-file{f}").into_bytes(),
                    kind: Some(NodeKind::File),
                    mode: 0o644,
                    mtime: arca_format::Timespec {
                        sec: (depth * 10 + f) as i64,
                        nsec: 0,
                    },
                    ..Node::default()
                });
            }
            let subdirs: Vec<(String, Id)> = match fanout.get(depth) {
                Some(&n) => (0..n)
                    .map(|i| {
                        let sub = format!("{name}.{i}");
                        let id = self.dir(&sub, depth + 1, fanout);
                        (sub, id)
                    })
                    .collect(),
                None => vec![("empty".to_string(), self.store(Tree::default()))],
            };
            for (sub, id) in subdirs {
                nodes.push(Node {
                    name: sub.into_bytes(),
                    kind: Some(NodeKind::Dir),
                    mode: 0o755,
                    subtree: Some(id),
                    ..Node::default()
                });
            }
            let mut tree = Tree { nodes };
            tree.sort();
            self.store(tree)
        }
    }

    /// 1 + 6 + 30 + 120 + 240 directories (with the shared empty one, 398 distinct trees).
    fn fixture(backend: Arc<dyn Backend>) -> Fixture {
        let repo = init(backend);
        let mut w = Writer {
            repo: &repo,
            pack: PackWriter::new(BlobKind::Tree, 1 << 16),
            packs: vec![],
            trees: HashMap::new(),
        };
        let root = w.dir("d", 0, &[6, 5, 4, 2]);
        w.flush();
        let (trees, packs) = (w.trees, w.packs);
        repo.save_index(&IndexFile {
            supersedes: vec![],
            packs: packs.clone(),
        })
        .unwrap();
        let index = repo.load_index().unwrap();
        Fixture {
            repo,
            index,
            root,
            trees,
            packs,
        }
    }

    /// The trees reachable from `root` without passing through one of `bad`.
    fn reachable(trees: &HashMap<Id, Tree>, root: Id, bad: &HashSet<Id>) -> HashSet<Id> {
        let mut seen = HashSet::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            if bad.contains(&id) || !seen.insert(id) {
                continue;
            }
            stack.extend(trees[&id].nodes.iter().filter_map(|n| n.subtree));
        }
        seen
    }

    #[test]
    fn load_all_reads_every_tree_in_few_requests() {
        let metered = Arc::new(MeteredBackend::new(
            MemoryBackend::new(),
            Throttle::default(),
        ));
        let f = fixture(metered.clone());
        assert_eq!(f.trees.len(), 398);
        assert!(f.packs.len() >= 4, "{} packs", f.packs.len());
        let before = metered.stats().snapshot().requests;
        let got = load_all(&f.repo, &f.index, f.root, 4);
        let requests = metered.stats().snapshot().requests - before;
        assert!(got.failed().is_empty(), "{:?}", got.failed());
        assert_eq!(got.len(), f.trees.len());
        for (id, tree) in &f.trees {
            assert_eq!(got.get(id).as_ref(), Some(tree), "tree {id}");
        }
        // Five levels, each a read or so per pack: far fewer requests than trees.
        assert_eq!(got.requests(), requests);
        assert!(
            requests <= 5 * f.packs.len() as u64 && requests * 10 < f.trees.len() as u64,
            "{requests} requests for {} trees in {} packs",
            f.trees.len(),
            f.packs.len()
        );
        assert_eq!(got.retries(), 0);
        assert!(got.bytes() > 0);
        assert!(got.memory_bytes() > 0);
        assert_eq!(got.get(&Id([7; 32])), None);
    }

    #[test]
    fn corrupted_tree_pack_leaves_its_trees_absent() {
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let f = fixture(backend.clone());
        // A pack of inner directories (the root's is the last one): every blob damaged.
        let victim = &f.packs[f.packs.len() / 2];
        let mut bytes = backend.read(FileType::Pack, &victim.id.to_hex()).unwrap();
        for e in &victim.blobs {
            bytes[(e.offset + e.length / 2) as usize] ^= 0x55;
        }
        backend
            .write(FileType::Pack, &victim.id.to_hex(), &bytes)
            .unwrap();
        let bad: HashSet<Id> = victim.blobs.iter().map(|e| e.id).collect();
        assert!(!bad.contains(&f.root));

        let got = load_all(&f.repo, &f.index, f.root, 2);
        let want = reachable(&f.trees, f.root, &bad);
        assert!(want.len() > f.trees.len() / 2 && want.len() < f.trees.len());
        let loaded: HashSet<Id> = f
            .trees
            .keys()
            .filter(|id| got.contains(id))
            .copied()
            .collect();
        assert_eq!(loaded, want);
        assert_eq!(got.len(), want.len());
        for id in &want {
            assert_eq!(got.get(id).as_ref(), Some(&f.trees[id]));
        }
        // The damaged listings the walk met are reported, and nothing else.
        assert!(!got.failed().is_empty());
        for (id, why) in got.failed() {
            assert!(bad.contains(id), "{id}: {why}");
            assert!(why.contains(&victim.id.to_hex()), "{why}");
            // The listing's id is for the caller to name, once.
            assert!(!why.contains(&id.to_hex()), "{why}");
        }
    }

    #[test]
    fn transient_read_failures_are_retried() {
        let fault = Arc::new(FaultBackend::new(MemoryBackend::new()));
        let f = fixture(fault.clone());
        fault.add(Rule {
            op: Some(Op::Read),
            file_type: Some(FileType::Pack),
            trigger: Trigger::Nth(2),
            fault: Fault::Fail(std::io::ErrorKind::TimedOut),
        });
        let got = load_all(&f.repo, &f.index, f.root, 1);
        assert_eq!(fault.fired(), 1);
        assert_eq!(got.retries(), 1);
        assert_eq!(got.len(), f.trees.len());
        assert!(got.failed().is_empty());
        // A permanent failure is not retried: the root alone is looked for, and fails.
        fault.clear();
        fault.add(Rule {
            op: Some(Op::Read),
            file_type: Some(FileType::Pack),
            trigger: Trigger::Always,
            fault: Fault::Fail(std::io::ErrorKind::PermissionDenied),
        });
        let got = load_all(&f.repo, &f.index, f.root, 1);
        assert_eq!(fault.fired(), 2, "one more fault, not retried");
        assert!(got.is_empty());
        assert_eq!(got.failed().len(), 1);
        assert_eq!(got.failed()[0].0, f.root);
    }

    #[test]
    fn keep_prunes_what_is_loaded() {
        let f = fixture(Arc::new(MemoryBackend::new()));
        let stop = AtomicBool::new(false);
        let loader = TreeLoader::new(&f.repo, &f.index, &stop);
        let calls = RefCell::new(0usize);
        // Only /d.2 and what is below it; /d.2 itself kept but not selected, so its
        // subdirectories see an unselected parent and pass on a selected one.
        let keep = |node: &NodeRef<'_>, path: &Path, parent: bool| {
            *calls.borrow_mut() += 1;
            assert!(node.is_dir());
            if !path.starts_with("/d.2") {
                return None;
            }
            let is_top = path == Path::new("/d.2");
            let below_top = path.parent() == Some(Path::new("/d.2"));
            assert_eq!(parent, is_top || !below_top, "{path:?}");
            Some(!is_top)
        };
        let got = loader.load(f.root, &keep);
        let d2 = f.trees[&f.root]
            .find(b"d.2")
            .and_then(|n| n.subtree)
            .unwrap();
        let mut want = reachable(&f.trees, d2, &HashSet::new());
        want.insert(f.root);
        let keys: HashSet<Id> = got.keys().copied().collect();
        assert_eq!(keys, want);
        assert!(got.values().all(Result::is_ok));
        // The root's six directories, then every directory below /d.2 (by path: the shared
        // empty tree once per leaf).
        assert_eq!(*calls.borrow(), 6 + 5 + 20 + 40 + 40);
        assert!(loader.requests.load(Ordering::Relaxed) > 0);

        // Stopped before it starts: nothing is read.
        stop.store(true, Ordering::Relaxed);
        let loader = TreeLoader::new(&f.repo, &f.index, &stop);
        assert!(loader.load(f.root, &|_, _, _| Some(true)).is_empty());
        assert_eq!(loader.requests.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_root_missing_from_the_index_loads_nothing() {
        let f = fixture(Arc::new(MemoryBackend::new()));
        let got = load_all(&f.repo, &f.index, Id([9; 32]), 0);
        assert!(got.is_empty());
        assert_eq!(got.requests(), 0);
        assert_eq!(
            got.failed(),
            &[(Id([9; 32]), "not in the index".to_string())]
        );
        assert_eq!(got.get(&Id([9; 32])), None);
    }
}
