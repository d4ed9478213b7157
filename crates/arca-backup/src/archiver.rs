//! The walk: reads directories depth first in name order, decides per file whether the
//! parent snapshot's content list can be reused, chunks and hashes what changed, sends new
//! blobs to the saver and builds one tree blob per directory, bottom up.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arca_chunker::{Chunker, StreamChunker};
use arca_format::{BlobKind, ContentRef, Id, Node, NodeKind, SnapshotSummary, Timespec, Tree};
use arca_fs::{NameCache, read_node};
use arca_repo::{Index, RepoError, Repository};

use crate::filter::Filter;
use crate::holes::HoleSkippingReader;
use crate::prefetch::Prefetcher;
use crate::saver::Saver;
use crate::sources::{SourceTree, join};
use crate::{BackupOptions, Observer, Progress, Warning, WarningKind};

/// Why the walk stopped.
#[derive(Debug)]
pub(crate) enum Fatal {
    /// A repository operation failed.
    Repo(RepoError),
    /// The saver stopped; its error is reported by `Saver::finish`.
    Stopped,
}

impl From<RepoError> for Fatal {
    fn from(e: RepoError) -> Self {
        Fatal::Repo(e)
    }
}

/// Threads reading metadata ahead of the walk (they mostly wait for the disk).
const PREFETCH_THREADS: usize = 8;
/// A stat slower than this on average (ns) came from the disk, not the cache.
pub(crate) const COLD_STAT_NS: f64 = 6_000.0;

pub(crate) struct Archiver<'a, 's> {
    repo: &'a Repository,
    index: &'a Index,
    saver: &'a Saver<'s>,
    chunker: Chunker,
    buf: Vec<u8>,
    known: HashSet<(BlobKind, Id)>,
    names: NameCache,
    filter: Arc<Filter>,
    prefetch: Prefetcher,
    opts: &'a BackupOptions,
    progress: &'a Progress,
    observer: &'a dyn Observer,
    summary: SnapshotSummary,
    warnings: Vec<Warning>,
    hardlinks: HashMap<(u64, u64), Node>,
    ancestors: Vec<(u64, u64)>,
    fs_dev: Option<u64>,
    zero_ids: HashMap<usize, Id>,
    /// Entries left out by the exclusion rules.
    excluded: u64,
    /// Moving average of the walk's own stat times (ns).
    stat_ns: f64,
}

/// Whether the parent's entry shows the file unchanged (restic's rule: size, mtime, ctime
/// and inode all equal).
fn unchanged(parent: &Node, now: &Node) -> bool {
    parent.kind == Some(NodeKind::File)
        && parent.size == now.size
        && parent.mtime == now.mtime
        && parent.ctime == now.ctime
        && parent.inode == now.inode
}

impl<'a, 's> Archiver<'a, 's> {
    pub(crate) fn new(
        repo: &'a Repository,
        index: &'a Index,
        saver: &'a Saver<'s>,
        filter: Arc<Filter>,
        opts: &'a BackupOptions,
        progress: &'a Progress,
        observer: &'a dyn Observer,
    ) -> Self {
        Self {
            repo,
            index,
            saver,
            chunker: repo.chunker(),
            buf: Vec::new(),
            known: HashSet::new(),
            names: NameCache::new(),
            prefetch: Prefetcher::start(PREFETCH_THREADS, Arc::clone(&filter)),
            filter,
            opts,
            progress,
            observer,
            summary: SnapshotSummary::default(),
            warnings: vec![],
            hardlinks: HashMap::new(),
            ancestors: vec![],
            fs_dev: None,
            zero_ids: HashMap::new(),
            excluded: 0,
            stat_ns: COLD_STAT_NS * 2.0,
        }
    }

    pub(crate) fn into_parts(self) -> (SnapshotSummary, Vec<Warning>, u64) {
        (self.summary, self.warnings, self.excluded)
    }

    fn warn(&mut self, path: &Path, kind: WarningKind, message: String) {
        let w = Warning {
            path: path.to_path_buf(),
            kind,
            message,
        };
        self.observer.warning(&w);
        self.warnings.push(w);
    }

    fn warn_io(&mut self, path: &Path, what: &str, e: &io::Error) {
        let kind = if e.kind() == io::ErrorKind::NotFound {
            WarningKind::Vanished
        } else {
            WarningKind::Unreadable
        };
        let msg = match kind {
            WarningKind::Vanished => format!("{}: vanished during backup, skipped", path.display()),
            _ => format!("{}: cannot {what}: {e}; skipped", path.display()),
        };
        self.warn(path, kind, msg);
    }

    fn is_known(&self, kind: BlobKind, id: &Id) -> bool {
        self.known.contains(&(kind, *id)) || self.index.contains(kind, id)
    }

    /// Queues a blob unless the repository or this run already has it; returns whether it
    /// was new.
    fn store(&mut self, kind: BlobKind, id: Id, data: Vec<u8>) -> Result<bool, Fatal> {
        if self.is_known(kind, &id) {
            return Ok(false);
        }
        self.known.insert((kind, id));
        match kind {
            BlobKind::Data => self.summary.data_blobs += 1,
            BlobKind::Tree => self.summary.tree_blobs += 1,
        }
        self.summary.data_added += data.len() as u64;
        self.saver
            .save(kind, id, data)
            .map_err(|_| Fatal::Stopped)?;
        Ok(true)
    }

    fn save_tree(&mut self, tree: &Tree, parent: Option<&Node>) -> Result<Id, Fatal> {
        let bytes = tree.encode().map_err(|e| RepoError::format("tree", e))?;
        let id = self.repo.key().blob_id(&bytes);
        match parent.and_then(|p| p.subtree) {
            Some(old) if old == id => self.summary.dirs_unmodified += 1,
            Some(_) => self.summary.dirs_changed += 1,
            None => self.summary.dirs_new += 1,
        }
        self.store(BlobKind::Tree, id, bytes)?;
        Ok(id)
    }

    fn parent_subtree(&mut self, parent: Option<&Node>) -> Option<Tree> {
        let id = parent.filter(|p| p.is_dir())?.subtree?;
        // A damaged parent only costs re-reading; it does not fail the backup.
        self.repo.load_tree(self.index, &id).ok()
    }

    /// Backs up the whole tree of sources; returns the root tree id.
    pub(crate) fn run(
        &mut self,
        src: &SourceTree,
        parent_root: Option<&Tree>,
        parent_root_id: Option<Id>,
    ) -> Result<Id, Fatal> {
        let root = Path::new("/");
        let root_node = parent_root_id.map(|id| Node {
            kind: Some(NodeKind::Dir),
            subtree: Some(id),
            ..Node::default()
        });
        if src.target {
            self.fs_dev = fs::symlink_metadata(root).ok().map(|m| m.dev());
            let tree = self.dir_listing(root, self.fs_dev.unwrap_or(0), parent_root)?;
            return self.save_tree(&tree, root_node.as_ref());
        }
        let tree = self.virtual_listing(root, src, parent_root)?;
        self.save_tree(&tree, root_node.as_ref())
    }

    /// A directory on the way to backed-up paths: only the named children are listed.
    fn virtual_listing(
        &mut self,
        dir: &Path,
        src: &SourceTree,
        parent: Option<&Tree>,
    ) -> Result<Tree, Fatal> {
        let mut tree = Tree::default();
        for (name, child) in &src.children {
            let path = join(dir, name);
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) => {
                    self.warn_io(&path, "stat", &e);
                    continue;
                }
            };
            let pnode = parent.and_then(|t| t.find(name)).cloned();
            let node = if child.target {
                self.fs_dev = Some(meta.dev());
                self.entry(&path, name, &meta, pnode.as_ref())?
            } else {
                let mut node = match read_node(&path, name, &meta, &mut self.names) {
                    Ok(n) => n,
                    Err(e) => {
                        self.warn_io(&path, e.op, &e.source);
                        continue;
                    }
                };
                if node.kind() != NodeKind::Dir {
                    self.warn(
                        &path,
                        WarningKind::Vanished,
                        format!("{}: is no longer a directory, skipped", path.display()),
                    );
                    continue;
                }
                let ptree = self.parent_subtree(pnode.as_ref());
                let sub = self.virtual_listing(&path, child, ptree.as_ref())?;
                node.subtree = Some(self.save_tree(&sub, pnode.as_ref())?);
                Some(node)
            };
            if let Some(n) = node {
                tree.nodes.push(n);
            }
        }
        Ok(tree)
    }

    /// One entry of any kind; `None` when it was skipped.
    fn entry(
        &mut self,
        path: &Path,
        name: &[u8],
        meta: &Metadata,
        parent: Option<&Node>,
    ) -> Result<Option<Node>, Fatal> {
        let mut node = match read_node(path, name, meta, &mut self.names) {
            Ok(n) => n,
            Err(e) => {
                self.warn_io(path, e.op, &e.source);
                return Ok(None);
            }
        };
        let parent = parent.filter(|p| p.kind == node.kind);
        match node.kind() {
            NodeKind::File if self.filter.too_large(node.size) => {
                self.excluded += 1;
                return Ok(None);
            }
            NodeKind::File => return self.file(path, node, parent),
            NodeKind::Dir => {
                let key = (node.dev, node.inode);
                if self.ancestors.contains(&key) {
                    self.warn(
                        path,
                        WarningKind::Loop,
                        format!(
                            "{}: directory contains itself (file-system loop), contents skipped",
                            path.display()
                        ),
                    );
                    node.subtree = Some(self.save_tree(&Tree::default(), None)?);
                    return Ok(Some(node));
                }
                let crosses =
                    self.opts.one_file_system && self.fs_dev.is_some_and(|d| d != node.dev);
                let tagged = match self.filter.tagged(path) {
                    Ok(t) => t.is_some(),
                    Err((tag, e)) => {
                        // The directory is backed up: leaving out what the user may need is
                        // worse than storing a cache.
                        let msg = format!(
                            "{}: cannot read exclusion tag: {e}; directory backed up",
                            tag.display()
                        );
                        self.warn(&tag, WarningKind::Unreadable, msg);
                        false
                    }
                };
                let tree = if crosses || tagged {
                    Tree::default()
                } else {
                    let ptree = self.parent_subtree(parent);
                    self.ancestors.push(key);
                    let t = self.dir_listing(path, node.dev, ptree.as_ref());
                    self.ancestors.pop();
                    t?
                };
                node.subtree = Some(self.save_tree(&tree, parent)?);
            }
            _ => self.summary.other_entries += 1,
        }
        Ok(Some(node))
    }

    /// Lists and backs up a real directory.
    fn dir_listing(&mut self, dir: &Path, dev: u64, parent: Option<&Tree>) -> Result<Tree, Fatal> {
        let mut names = match arca_fs::list_dir_names(dir) {
            Ok(n) => n,
            Err(e) => {
                self.warn_io(dir, "list directory", &e);
                return Ok(Tree::default());
            }
        };
        names.sort();
        // Read ahead while metadata comes from the disk; on a warm cache it only costs.
        if self.stat_ns > COLD_STAT_NS || self.prefetch.disk_bound() {
            self.prefetch.hint(dir, dev, &names);
        }
        let mut tree = Tree {
            nodes: Vec::with_capacity(names.len()),
        };
        for name in names {
            let path = join(dir, &name);
            if self.filter.excludes_path(&path) {
                self.excluded += 1;
                continue;
            }
            let t = Instant::now();
            let meta = fs::symlink_metadata(&path);
            self.stat_ns = 0.95 * self.stat_ns + 0.05 * t.elapsed().as_nanos() as f64;
            let meta = match meta {
                Ok(m) => m,
                Err(e) => {
                    self.warn_io(&path, "stat", &e);
                    continue;
                }
            };
            let pnode = parent.and_then(|t| t.find(&name));
            if let Some(n) = self.entry(&path, &name, &meta, pnode)? {
                tree.nodes.push(n);
            }
        }
        Ok(tree)
    }

    fn file(
        &mut self,
        path: &Path,
        mut node: Node,
        parent: Option<&Node>,
    ) -> Result<Option<Node>, Fatal> {
        self.summary.total_files_processed += 1;
        self.summary.total_bytes_processed += node.size;
        if !self.opts.force
            && let Some(p) = parent
            && unchanged(p, &node)
            && p.content
                .iter()
                .all(|c| self.is_known(BlobKind::Data, &c.id))
        {
            node.content = p.content.clone();
            self.summary.files_unmodified += 1;
            self.progress.add(1, node.size, 0);
            return Ok(Some(node));
        }
        if node.nlink > 1
            && let Some(seen) = self.hardlinks.get(&(node.dev, node.inode))
            && unchanged(seen, &node)
        {
            node.content = seen.content.clone();
            self.progress.add(1, node.size, 0);
            return Ok(Some(node));
        }
        match self.read_content(path, &mut node)? {
            true => {}
            false => return Ok(None),
        }
        if parent.is_some() {
            self.summary.files_changed += 1;
        } else {
            self.summary.files_new += 1;
        }
        if node.nlink > 1 {
            self.hardlinks.insert((node.dev, node.inode), node.clone());
        }
        Ok(Some(node))
    }

    /// The blob id of a chunk; all-zero chunks (holes, zero-filled images) are hashed once per
    /// length.
    fn chunk_id(&mut self, chunk: &[u8]) -> Id {
        if chunk.first() == Some(&0) && arca_fs::is_zero(chunk) {
            let key = self.repo.key();
            return *self
                .zero_ids
                .entry(chunk.len())
                .or_insert_with(|| key.blob_id(chunk));
        }
        self.repo.key().blob_id(chunk)
    }

    /// Chunks everything `reader` yields and queues the new blobs; `None` when reading failed
    /// (warned, naming `path`).
    fn chunk_reader<R: Read>(
        &mut self,
        path: &Path,
        reader: R,
    ) -> Result<Option<(Vec<ContentRef>, u64)>, Fatal> {
        let buf = std::mem::take(&mut self.buf);
        let chunker = self.chunker.clone();
        let mut sc = StreamChunker::with_buffer(&chunker, reader, buf);
        let mut content = vec![];
        let mut total = 0u64;
        let result = loop {
            match sc.next_chunk() {
                Ok(Some(chunk)) => {
                    let len = chunk.len() as u32;
                    let id = self.chunk_id(&chunk);
                    total += u64::from(len);
                    self.progress.add(0, u64::from(len), u64::from(len));
                    content.push(ContentRef { id, len });
                    if let Err(f) = self.store(BlobKind::Data, id, chunk) {
                        break Err(f);
                    }
                }
                Ok(None) => break Ok(true),
                Err(e) => {
                    self.warn_io(path, "read", &e);
                    break Ok(false);
                }
            }
        };
        self.buf = sc.into_buffer();
        self.progress.add(1, 0, 0);
        Ok(result?.then_some((content, total)))
    }

    /// Backs up what `reader` yields as one file `/NAME` (`--stdin`), owned by the current
    /// user, mode 0644, dated now; returns the root tree id.
    pub(crate) fn run_stdin<R: Read>(&mut self, name: &[u8], reader: R) -> Result<Id, Fatal> {
        let (uid, gid) = arca_repo::host::ids();
        let ns = arca_repo::host::now_ns();
        let now = Timespec {
            sec: ns.div_euclid(1_000_000_000),
            nsec: ns.rem_euclid(1_000_000_000) as u32,
        };
        let path = join(Path::new("/"), name);
        let mut node = Node {
            name: name.to_vec(),
            kind: Some(NodeKind::File),
            mode: 0o644,
            uid,
            gid,
            user: arca_repo::host::username().into_bytes(),
            mtime: now,
            atime: now,
            ctime: now,
            nlink: 1,
            ..Node::default()
        };
        let mut tree = Tree::default();
        if let Some((content, total)) = self.chunk_reader(&path, reader)? {
            node.content = content;
            node.size = total;
            self.summary.files_new += 1;
            self.summary.total_files_processed += 1;
            self.summary.total_bytes_processed += total;
            tree.nodes.push(node);
        }
        self.save_tree(&tree, None)
    }

    fn open(path: &Path) -> io::Result<File> {
        let mut o = fs::OpenOptions::new();
        o.read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NOATIME);
        match o.open(path) {
            // O_NOATIME is refused on files we do not own.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path),
            r => r,
        }
    }

    /// Reads and chunks a file; false when it was skipped with a warning.
    fn read_content(&mut self, path: &Path, node: &mut Node) -> Result<bool, Fatal> {
        if let Some(h) = &self.opts.hooks.before_read {
            h(path);
        }
        let file = match Self::open(path) {
            Ok(f) => f,
            Err(e) => {
                self.warn_io(path, "open", &e);
                return Ok(false);
            }
        };
        // One fstat: the entry is still the file we listed, and whether it has holes.
        let sparse = match file.metadata() {
            Ok(m) if m.is_file() && m.ino() == node.inode => m.blocks() * 512 < m.len(),
            Ok(_) => {
                self.warn(
                    path,
                    WarningKind::Vanished,
                    format!("{}: replaced during backup, skipped", path.display()),
                );
                return Ok(false);
            }
            Err(e) => {
                self.warn_io(path, "stat", &e);
                return Ok(false);
            }
        };
        let reader = HoleSkippingReader::new(&file, node.size, sparse);
        let Some((content, total)) = self.chunk_reader(path, reader)? else {
            return Ok(false);
        };
        if let Ok(after) = file.metadata() {
            let mtime = (after.mtime(), after.mtime_nsec());
            let before = (node.mtime.sec, i64::from(node.mtime.nsec));
            if after.len() != node.size || mtime != before || total != node.size {
                let msg = format!(
                    "{}: changed while it was read; stored as read ({total} bytes)",
                    path.display()
                );
                self.warn(path, WarningKind::ChangedWhileRead, msg);
            }
        }
        node.size = total;
        node.content = content;
        Ok(true)
    }
}
