//! The mounted repository's state: the snapshots and their virtual folders, the index, the
//! inodes the kernel holds, open files and folders, the caches; lookups, listings, reads.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use arca_backend::FileType as RepoFile;
use arca_format::{BlobKind, ContentRef, Id, Node, NodeKind, Tree};
use arca_repo::{Index, Repository, SnapshotFilter};
use fuser::{Errno, FileAttr, FileType};

use crate::attr::{self, Owner};
use crate::cache::Cache;
use crate::layout::{self, Layout, Virtual};
use crate::reader::FileMap;
use crate::{MountError, MountOptions, Report};

/// A snapshot's entry the kernel has looked up.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) node: Arc<Node>,
    /// The inode of the snapshot folder it is shown under.
    pub(crate) root: u64,
    /// The inode of its folder.
    pub(crate) parent: u64,
    /// Lookups not yet forgotten by the kernel.
    lookups: u64,
}

/// One name of a listing.
#[derive(Debug)]
pub(crate) struct DirItem {
    pub(crate) ino: u64,
    pub(crate) kind: FileType,
    pub(crate) name: Vec<u8>,
}

/// An open file or folder.
#[derive(Debug, Clone)]
pub(crate) enum Handle {
    /// A file's blocks.
    File(Arc<FileMap>),
    Dir(Arc<Vec<DirItem>>),
}

/// What a folder's inode lists.
enum Folder {
    Virtual(Arc<Layout>),
    Tree {
        tree: Option<Id>,
        root: u64,
        parent: u64,
    },
}

/// When the snapshot list was last read, and which snapshot files it had.
struct Refresh {
    seen: HashSet<Id>,
    last: Instant,
}

/// Everything the file system's threads share.
pub(crate) struct State {
    repo: Repository,
    filter: SnapshotFilter,
    index: RwLock<Arc<Index>>,
    /// The index files [`State::index`] was loaded from (listed just before); held while the
    /// index is loaded again.
    index_files: Mutex<HashSet<Id>>,
    layout: RwLock<Arc<Layout>>,
    refresh: Mutex<Refresh>,
    refresh_every: Duration,
    entries: Mutex<HashMap<u64, Entry>>,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
    blocks: Cache<Id, Arc<Vec<u8>>>,
    trees: Cache<Id, Arc<Tree>>,
    /// The id of an all-zero blob of the chunker's largest size: a hole of a sparse file.
    hole: Id,
    pub(crate) owner: Owner,
    report: Report,
    /// Messages already reported (at most [`TOLD_MAX`]).
    told: Mutex<std::collections::HashSet<String>>,
}

/// Distinct messages a mount reports, at most.
const TOLD_MAX: usize = 10_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T: Clone>(l: &RwLock<T>) -> T {
    l.read().unwrap_or_else(|e| e.into_inner()).clone()
}

fn write<T>(l: &RwLock<T>, v: T) {
    *l.write().unwrap_or_else(|e| e.into_inner()) = v;
}

/// Roughly the memory a decoded tree takes.
fn tree_weight(t: &Tree) -> u64 {
    let per_node = std::mem::size_of::<Node>();
    let per_blob = std::mem::size_of::<ContentRef>();
    let bytes: usize = t
        .nodes
        .iter()
        .map(|n| {
            per_node
                + n.name.len()
                + n.user.len()
                + n.group.len()
                + n.link_target.len()
                + n.xattrs
                    .iter()
                    .map(|(k, v)| k.len() + v.len() + 48)
                    .sum::<usize>()
                + n.content.len() * per_blob
        })
        .sum();
    bytes as u64 + 64
}

/// The inode of `node` in the folder `parent` of the snapshot shown at `root`: hard links
/// of one file share one, when the snapshot gives them the same content and times (a file
/// that changed while the backup read it is stored with each name's own content, as
/// `restore` and `dump` give them; one inode served the first name opened for both).
fn content_ino(parent: u64, root: u64, node: &Node) -> u64 {
    if !node.is_dir() && node.nlink > 1 && node.inode != 0 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (node.size, node.mtime.sec, node.mtime.nsec, node.mode).hash(&mut h);
        for c in &node.content {
            (c.id.prefix16(), c.len).hash(&mut h);
        }
        layout::hardlink_ino(root, node.dev, node.inode, h.finish())
    } else {
        layout::child_ino(parent, &node.name)
    }
}

/// Loads the snapshots among `ids` that pass `filter`.
/// The snapshots `ids` passing `filter`; a damaged snapshot file is reported and left out
/// (as `arca snapshots` does), so that one damaged file does not keep the others from
/// showing.
fn load_snapshots(
    repo: &Repository,
    filter: &SnapshotFilter,
    ids: impl Iterator<Item = Id>,
    report: &Report,
) -> Result<Vec<(Id, Arc<arca_format::Snapshot>)>, MountError> {
    let mut out = vec![];
    for id in ids {
        let s = match repo.load_snapshot(&id) {
            Ok(s) => s,
            Err(e) if e.is_unusable() => {
                report(&arca_repo::damaged_snapshot_message(&id, &e));
                continue;
            }
            Err(e) => return Err(MountError::repo("loading a snapshot", e)),
        };
        if filter.matches(&s) {
            out.push((id, Arc::new(s)));
        }
    }
    Ok(out)
}

fn list_snapshot_ids(repo: &Repository) -> Result<HashSet<Id>, MountError> {
    Ok(repo
        .list_ids(RepoFile::Snapshot)
        .map_err(|e| MountError::repo("listing snapshots", e))?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// The repository's index files, listed.
fn list_index(repo: &Repository) -> Result<Vec<(Id, u64)>, MountError> {
    repo.list_ids(RepoFile::Index)
        .map_err(|e| MountError::repo("listing the index files", e))
}

/// The index loaded from the index files `listed` (one listing serves the comparison with
/// the last load and the load), and their ids.
fn load_listed(
    repo: &Repository,
    listed: &[(Id, u64)],
) -> Result<(HashSet<Id>, Index), MountError> {
    let index = repo
        .load_index_listed(listed)
        .map_err(|e| MountError::repo("loading the index", e))?;
    Ok((listed.iter().map(|(id, _)| *id).collect(), index))
}

/// The repository's index files, listed, then the index loaded from them.
fn load_index(repo: &Repository) -> Result<(HashSet<Id>, Index), MountError> {
    load_listed(repo, &list_index(repo)?)
}

/// Whether a read missed: the pack the index places the blob in is gone, or no pack the
/// index names holds it.
fn missed(e: &arca_repo::RepoError) -> bool {
    match e {
        arca_repo::RepoError::Backend(b) => b.is_not_found(),
        arca_repo::RepoError::BlobNotFound { .. } => true,
        _ => false,
    }
}

impl State {
    /// Reads the snapshots passing `filter` and the index.
    pub(crate) fn load(
        repo: Repository,
        filter: SnapshotFilter,
        opts: &MountOptions,
        report: Report,
    ) -> Result<Self, MountError> {
        let seen = list_snapshot_ids(&repo)?;
        let snaps = load_snapshots(&repo, &filter, seen.iter().copied(), &report)?;
        let (files, index) = load_index(&repo)?;
        let trees = (opts.cache_size / 4).max(4 << 20);
        let hole = repo.hole_blob_id();
        Ok(Self {
            hole,
            index: RwLock::new(Arc::new(index)),
            index_files: Mutex::new(files),
            layout: RwLock::new(Arc::new(Layout::build(snaps))),
            refresh: Mutex::new(Refresh {
                seen,
                last: Instant::now(),
            }),
            refresh_every: opts.refresh_interval,
            entries: Mutex::new(HashMap::new()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            blocks: Cache::new(opts.cache_size.saturating_sub(trees)),
            trees: Cache::new(trees),
            owner: Owner {
                uid: nix::unistd::getuid().as_raw(),
                gid: nix::unistd::getgid().as_raw(),
            },
            repo,
            filter,
            report,
            told: Mutex::new(std::collections::HashSet::new()),
        })
    }

    /// How many snapshots are shown.
    pub(crate) fn snapshot_count(&self) -> usize {
        read(&self.layout).snapshots.len()
    }

    fn layout(&self) -> Arc<Layout> {
        read(&self.layout)
    }

    /// Reports a failure and gives the kernel EIO.
    /// Reports `e` (once: the kernel retries a failed read, and every retry failed the same
    /// way) and gives the error the kernel passes on.
    fn fail(&self, e: &MountError) -> Errno {
        let msg = e.to_string();
        let mut told = lock(&self.told);
        if told.len() < TOLD_MAX && told.insert(msg.clone()) {
            drop(told);
            (self.report)(&msg);
        }
        Errno::EIO
    }

    /// Reads the snapshot list again when `refresh_every` has passed since the last time
    /// (another thread already doing it is not waited for). New snapshot files are loaded
    /// (and the index with them); removed ones are dropped.
    fn maybe_refresh(&self) {
        let Ok(mut r) = self.refresh.try_lock() else {
            return;
        };
        if r.last.elapsed() < self.refresh_every {
            return;
        }
        r.last = Instant::now();
        if let Err(e) = self.reload(&mut r) {
            (self.report)(&e.to_string());
        }
    }

    fn reload(&self, r: &mut Refresh) -> Result<(), MountError> {
        let ids = list_snapshot_ids(&self.repo)?;
        if ids == r.seen {
            return Ok(());
        }
        let mut snaps: Vec<_> = self
            .layout()
            .snapshots
            .iter()
            .filter(|(id, _)| ids.contains(id))
            .cloned()
            .collect();
        let new = load_snapshots(
            &self.repo,
            &self.filter,
            ids.difference(&r.seen).copied(),
            &self.report,
        )?;
        if !new.is_empty() {
            let mut files = lock(&self.index_files);
            let (listed, index) = load_index(&self.repo)?;
            write(&self.index, Arc::new(index));
            *files = listed;
        }
        snaps.extend(new);
        write(&self.layout, Arc::new(Layout::build(snaps)));
        r.seen = ids;
        Ok(())
    }

    /// Runs `read` with the index; when it misses (a pack the index names is gone, or the blob
    /// is in none of its packs), loads the index again if its files changed since it was
    /// loaded, and runs `read` once more. A prune or a repair run meanwhile (a mount with
    /// `--no-lock` does not keep them out) moves blobs to new packs and deletes the old ones:
    /// every read of a moved blob failed until a new snapshot made the index load again.
    fn with_index<T>(
        &self,
        read_with: impl Fn(&Index) -> Result<T, arca_repo::RepoError>,
    ) -> Result<T, arca_repo::RepoError> {
        let index = read(&self.index);
        match read_with(&index) {
            Err(e) if missed(&e) => {
                if self.reload_index(&index) {
                    let index = read(&self.index);
                    read_with(&index)
                } else {
                    Err(e)
                }
            }
            got => got,
        }
    }

    /// Loads the index again after a read with `failed` missed, unless another thread did
    /// meanwhile; not when the repository's index files are those it was loaded from (a
    /// damaged or lost pack is not looked for again on every read). Whether there is a newer
    /// index to read with.
    fn reload_index(&self, failed: &Arc<Index>) -> bool {
        let mut files = lock(&self.index_files);
        if !Arc::ptr_eq(&read(&self.index), failed) {
            return true;
        }
        let got = list_index(&self.repo).and_then(|listed| {
            let same =
                listed.len() == files.len() && listed.iter().all(|(id, _)| files.contains(id));
            if same {
                return Ok(false);
            }
            let (listed, index) = load_listed(&self.repo, &listed)?;
            write(&self.index, Arc::new(index));
            *files = listed;
            Ok(true)
        });
        got.unwrap_or_else(|e| {
            (self.report)(&e.to_string());
            false
        })
    }

    /// The listing `id` of the folder `folder` (an inode, named in the message of a
    /// failure: each folder that cannot be listed is reported once, in a line of its own).
    fn tree(&self, id: &Id, folder: u64) -> Result<Arc<Tree>, Errno> {
        self.trees
            .get_or_load(id, || {
                let t = self.with_index(|index| self.repo.load_tree(index, id))?;
                let w = tree_weight(&t);
                Ok((Arc::new(t), w))
            })
            .map_err(|e| {
                let op = format!(
                    "reading the listing of folder {:?} (tree {})",
                    self.path(folder),
                    id.short()
                );
                self.fail(&MountError::repo(op, e))
            })
    }

    /// The path of inode `ino` in the mount, from its names as far as they are known (the
    /// kernel holds the folders above an entry it looked up; `…` stands for one that is not
    /// known).
    fn path(&self, mut ino: u64) -> String {
        let l = self.layout();
        let entries = lock(&self.entries);
        let mut names: Vec<Vec<u8>> = vec![];
        // Bounded: a folder's parent chain is short, and never loops.
        for _ in 0..4096 {
            if ino == layout::ROOT {
                break;
            }
            if let Some(e) = entries.get(&ino) {
                names.push(e.node.name.clone());
                ino = e.parent;
                continue;
            }
            let parent = match l.nodes.get(&ino) {
                Some(Virtual::Dir { parent, .. } | Virtual::Snapshot { parent, .. }) => *parent,
                _ => {
                    names.push("…".into());
                    break;
                }
            };
            let name = match l.nodes.get(&parent) {
                Some(Virtual::Dir { entries, .. }) => entries
                    .iter()
                    .find(|&(_, &child)| child == ino)
                    .map(|(name, _)| name.clone()),
                _ => None,
            };
            names.push(name.unwrap_or_else(|| "…".into()));
            ino = parent;
        }
        let mut path = vec![];
        for name in names.iter().rev() {
            path.push(b'/');
            path.extend_from_slice(name);
        }
        if path.is_empty() {
            path.push(b'/');
        }
        String::from_utf8_lossy(&path).into_owned()
    }

    /// One data blob of file `ino`, from the block cache or the repository.
    fn blob(&self, c: &ContentRef, ino: u64) -> Result<Arc<Vec<u8>>, MountError> {
        self.blocks.get_or_load(&c.id, || {
            let b = self
                .with_index(|index| self.repo.read_blob(index, BlobKind::Data, &c.id))
                .map_err(|e| {
                    // The file by its path in the mount (its name alone did not say which
                    // snapshot's), and the blob unless the error names it (it read twice).
                    let blob = match e.to_string().contains(&c.id.short()) {
                        true => String::new(),
                        false => format!(", data blob {}", c.id.short()),
                    };
                    let op = format!("reading file {:?}{blob}", self.path(ino));
                    MountError::repo(op, e)
                })?;
            let w = b.len() as u64;
            Ok((Arc::new(b), w))
        })
    }

    /// A looked-up snapshot entry.
    pub(crate) fn entry(&self, ino: u64) -> Option<Entry> {
        lock(&self.entries).get(&ino).cloned()
    }

    fn folder(&self, ino: u64) -> Result<Folder, Errno> {
        let l = self.layout();
        match l.nodes.get(&ino) {
            Some(Virtual::Dir { .. }) => return Ok(Folder::Virtual(l)),
            Some(Virtual::Snapshot { parent, snapshot }) => {
                return Ok(Folder::Tree {
                    tree: Some(l.snapshots[*snapshot].1.tree),
                    root: ino,
                    parent: *parent,
                });
            }
            Some(Virtual::Link { .. }) => return Err(Errno::ENOTDIR),
            None => {}
        }
        let e = self.entry(ino).ok_or(Errno::ENOENT)?;
        if !e.node.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        Ok(Folder::Tree {
            tree: e.node.subtree,
            root: e.root,
            parent: e.parent,
        })
    }

    /// The attributes of any inode.
    pub(crate) fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let l = self.layout();
        match l.nodes.get(&ino) {
            Some(Virtual::Dir { mtime, .. }) => Ok(attr::dir_attr(ino, *mtime, self.owner)),
            Some(Virtual::Snapshot { snapshot, .. }) => {
                let t = layout::system_time(&l.snapshots[*snapshot].1);
                Ok(attr::dir_attr(ino, t, self.owner))
            }
            Some(Virtual::Link { target, mtime }) => {
                Ok(attr::link_attr(ino, target, *mtime, self.owner))
            }
            None => {
                let e = self.entry(ino).ok_or(Errno::ENOENT)?;
                Ok(attr::node_attr(ino, &e.node, &self.hole))
            }
        }
    }

    /// Whether `ino` is a virtual entry (its attributes may change on a refresh).
    pub(crate) fn is_virtual(&self, ino: u64) -> bool {
        self.layout().nodes.contains_key(&ino)
    }

    /// Looks `name` up in the folder `parent`; a snapshot entry found is counted as held by
    /// the kernel until forgotten.
    pub(crate) fn lookup(&self, parent: u64, name: &[u8]) -> Result<FileAttr, Errno> {
        if matches!(self.layout().nodes.get(&parent), Some(Virtual::Dir { .. })) {
            self.maybe_refresh();
        }
        match self.folder(parent)? {
            Folder::Virtual(l) => {
                let ino = l.child(parent, name).ok_or(Errno::ENOENT)?;
                self.attr(ino)
            }
            Folder::Tree { tree: None, .. } => Err(Errno::ENOENT),
            Folder::Tree {
                tree: Some(tree),
                root,
                ..
            } => {
                let t = self.tree(&tree, parent)?;
                let node = t.find(name).ok_or(Errno::ENOENT)?;
                let ino = content_ino(parent, root, node);
                let a = attr::node_attr(ino, node, &self.hole);
                let mut entries = lock(&self.entries);
                let e = entries.entry(ino).or_insert_with(|| Entry {
                    node: Arc::new(node.clone()),
                    root,
                    parent,
                    lookups: 0,
                });
                e.lookups += 1;
                Ok(a)
            }
        }
    }

    /// The kernel dropped `n` lookups of `ino`.
    pub(crate) fn forget(&self, ino: u64, n: u64) {
        let mut entries = lock(&self.entries);
        if let Some(e) = entries.get_mut(&ino) {
            e.lookups = e.lookups.saturating_sub(n);
            if e.lookups == 0 {
                entries.remove(&ino);
            }
        }
    }

    fn add_handle(&self, h: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, h);
        fh
    }

    /// An open file or folder.
    pub(crate) fn handle(&self, fh: u64) -> Option<Handle> {
        lock(&self.handles).get(&fh).cloned()
    }

    /// Closes a file or folder.
    pub(crate) fn release(&self, fh: u64) {
        lock(&self.handles).remove(&fh);
    }

    /// Opens a folder: its listing is taken now and served from the handle.
    pub(crate) fn open_dir(&self, ino: u64) -> Result<u64, Errno> {
        if matches!(self.layout().nodes.get(&ino), Some(Virtual::Dir { .. })) {
            self.maybe_refresh();
        }
        let mut items = vec![];
        let folder = self.folder(ino)?;
        let up = match &folder {
            Folder::Virtual(l) => match l.nodes.get(&ino) {
                Some(Virtual::Dir { parent, .. }) => *parent,
                _ => ino,
            },
            Folder::Tree { parent, .. } => *parent,
        };
        for (name, i) in [(&b"."[..], ino), (&b".."[..], up)] {
            items.push(DirItem {
                ino: i,
                kind: FileType::Directory,
                name: name.to_vec(),
            });
        }
        match folder {
            Folder::Virtual(l) => {
                if let Some(Virtual::Dir { entries, .. }) = l.nodes.get(&ino) {
                    for (name, &child) in entries {
                        let kind = match l.nodes.get(&child) {
                            Some(Virtual::Link { .. }) => FileType::Symlink,
                            _ => FileType::Directory,
                        };
                        items.push(DirItem {
                            ino: child,
                            kind,
                            name: name.clone(),
                        });
                    }
                }
            }
            Folder::Tree { tree: None, .. } => {}
            Folder::Tree {
                tree: Some(tree),
                root,
                ..
            } => {
                let t = self.tree(&tree, ino)?;
                for n in &t.nodes {
                    items.push(DirItem {
                        ino: content_ino(ino, root, n),
                        kind: attr::file_type(n.kind()),
                        name: n.name.clone(),
                    });
                }
            }
        }
        Ok(self.add_handle(Handle::Dir(Arc::new(items))))
    }

    /// Opens a snapshot's regular file for reading.
    pub(crate) fn open_file(&self, ino: u64) -> Result<u64, Errno> {
        if self.is_virtual(ino) {
            return Err(Errno::EISDIR);
        }
        let e = self.entry(ino).ok_or(Errno::ENOENT)?;
        match e.node.kind() {
            NodeKind::File => {}
            NodeKind::Dir => return Err(Errno::EISDIR),
            _ => return Err(Errno::EINVAL),
        }
        let map = FileMap::new(&e.node.content);
        Ok(self.add_handle(Handle::File(Arc::new(map))))
    }

    /// Reads from an open file.
    pub(crate) fn read(&self, ino: u64, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let Some(Handle::File(map)) = self.handle(fh) else {
            return Err(Errno::EBADF);
        };
        map.read(offset, size, |c| self.blob(c, ino))
            .map_err(|e| self.fail(&e))
    }

    /// The target of a symbolic link.
    pub(crate) fn readlink(&self, ino: u64) -> Result<Vec<u8>, Errno> {
        if let Some(v) = self.layout().nodes.get(&ino) {
            return match v {
                Virtual::Link { target, .. } => Ok(target.clone()),
                _ => Err(Errno::EINVAL),
            };
        }
        let e = self.entry(ino).ok_or(Errno::ENOENT)?;
        if e.node.kind() != NodeKind::Symlink {
            return Err(Errno::EINVAL);
        }
        Ok(e.node.link_target.clone())
    }

    /// How many snapshot entries the kernel holds (for `statfs`).
    pub(crate) fn held(&self) -> u64 {
        lock(&self.entries).len() as u64
    }
}

#[cfg(test)]
mod tests;
