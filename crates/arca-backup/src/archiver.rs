//! The walk: lists directories depth first in name order, decides per file whether the parent
//! snapshot's content list can be reused, hands changed files to the readers and every
//! directory's entries to the tree assembler. It never reads file contents itself.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Instant;

use arca_format::{BlobKind, Id, Node, NodeKind, SnapshotSummary, Tree};
use arca_fs::{DirHandle, NameCache, Stat, read_node_at};
use arca_repo::RepoError;
use arca_repo::profile::Clock;
use crossbeam_channel::Sender;

use crate::WarningKind;
use crate::assemble::{DirId, Msg, Slot};
use crate::filter::{Filter, Verdict};
use crate::pipeline::Ctx;
use crate::pipeline::ParentTrees;
use crate::prefetch::Prefetcher;
use crate::reader::FileJob;
use crate::sources::{SourceTree, join};

/// Why the walk stopped.
#[derive(Debug)]
pub(crate) enum Fatal {
    /// A repository operation failed.
    Repo(RepoError),
    /// A later stage stopped; its error is reported by the pipeline.
    Stopped,
    /// The user interrupted the backup.
    Cancelled,
}

impl From<RepoError> for Fatal {
    fn from(e: RepoError) -> Self {
        Fatal::Repo(e)
    }
}

/// Threads reading metadata ahead of the walk (they mostly wait for the disk).
pub(crate) const PREFETCH_THREADS: usize = 32;
/// A stat slower than this on average (ns) came from the disk, not the cache.
pub(crate) const COLD_STAT_NS: f64 = 6_000.0;
/// Directories held open at most for their files' jobs ([`Walker::lend`])...
const LENT_FOLDERS: usize = 64;
/// ... and at most this share of the open-file limit.
const LENT_SHARE: u64 = 16;

/// Whether the parent's entry shows the file unchanged (restic's rule: type, size, mtime,
/// ctime and inode all equal).
pub(crate) fn unchanged(parent: &Node, now: &Node) -> bool {
    unchanged_but(parent, now, false, false)
}

/// [`unchanged`], leaving out the ctime or the inode number when told to
/// (`--ignore-ctime`, `--ignore-inode`).
pub(crate) fn unchanged_but(parent: &Node, now: &Node, ctime: bool, inode: bool) -> bool {
    parent.kind == Some(NodeKind::File)
        && now.kind == Some(NodeKind::File)
        && parent.size == now.size
        && parent.mtime == now.mtime
        && (ctime || parent.ctime == now.ctime)
        && (inode || parent.inode == now.inode)
}

/// What a walk counts that the snapshot does not store.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WalkCounts {
    /// Entries left out by the exclusion rules.
    pub excluded: u64,
    /// Files read again only because their inode number is not the parent snapshot's
    /// (see [`crate::BackupReport::renumbered`]).
    pub renumbered: u64,
}

/// Work found in a directory, done once its entries have been sent.
enum Later<'t> {
    /// A changed file for the readers.
    Read(Box<FileJob>),
    /// A subdirectory to walk: its id, path, (device, inode), its listing in the parent
    /// snapshot, and the backed-up paths below it that the walk may not reach by itself.
    Walk(
        DirId,
        PathBuf,
        (u64, u64),
        Option<Id>,
        Option<&'t SourceTree>,
    ),
    /// A directory on the way to the backed-up paths.
    Virtual(DirId, PathBuf, &'t SourceTree, Option<Id>),
    /// A directory stored empty (excluded contents, another file system, a loop).
    Empty(DirId, Option<Id>),
    /// A directory whose contents a tag file excludes: stored with the tag file alone, as
    /// restic stores it (a restored cache keeps its `CACHEDIR.TAG`, so later backups of the
    /// restored tree still leave it out).
    Tagged(DirId, PathBuf, (u64, u64), Option<Id>, Vec<u8>),
}

/// A directory listed: its entries, to be sent, and the work they leave, done in order
/// (depth first) by [`Walker::drive`].
struct Listed<'t> {
    id: DirId,
    link: Option<(DirId, u32)>,
    old: Option<Id>,
    slots: Vec<Slot>,
    later: Vec<(u32, Later<'t>)>,
    /// The directory's (device, inode), from the directory the walk listed (not by path):
    /// what its subdirectories must be in.
    seen: Option<(u64, u64)>,
}

impl Listed<'_> {
    /// A directory stored with nothing in it.
    fn empty(id: DirId, link: Option<(DirId, u32)>, old: Option<Id>) -> Self {
        Self {
            id,
            link,
            old,
            slots: vec![],
            later: vec![],
            seen: None,
        }
    }
}

/// Where an entry's walk starts: its directory's device, which `one_file_system` keeps the
/// walk on (none for a backed-up path: a mount point named is backed up), and the backed-up
/// paths below the entry ([`SourceTree`]'s children of a target).
#[derive(Clone, Copy)]
struct Within<'t, 'f> {
    dev: Option<u64>,
    nested: Option<&'t SourceTree>,
    /// The directory the walk listed the entry in.
    folder: Option<&'f Folder>,
}

/// A directory the walk listed, held open while it looks at its entries: each entry's
/// metadata is taken relative to it (`fstatat`), so it is the entry listed even when a
/// folder on the path is renamed and replaced meanwhile (by path, the walk took another
/// folder's entries of the same names).
struct Folder {
    dir: Arc<DirHandle>,
    /// Its (device, inode), as listed.
    id: Option<(u64, u64)>,
    /// Whether its files' jobs take it along, for the readers to open them in it too; else
    /// they open them by path (see [`Walker::lend`]).
    lent: bool,
}

pub(crate) struct Walker<'c, 'a, 's> {
    ctx: &'c Ctx<'a, 's>,
    parents: &'c ParentTrees,
    jobs: Sender<FileJob>,
    out: Sender<Msg>,
    names: NameCache,
    filter: Arc<Filter>,
    prefetch: Prefetcher,
    /// Hard-linked files whose content is known, by (device, inode).
    linked: HashMap<(u64, u64), Node>,
    /// Hard-linked files a reader is reading, by (device, inode).
    reading: HashMap<(u64, u64), Node>,
    ancestors: Vec<(u64, u64)>,
    next_dir: DirId,
    summary: SnapshotSummary,
    /// What the walk counted besides the snapshot's summary.
    counts: WalkCounts,
    /// Moving average of the walk's own stat times (ns).
    stat_ns: f64,
    /// Directories whose files' jobs took them along, until the last is read: their
    /// descriptors stay open until then.
    lent: Vec<Weak<DirHandle>>,
    /// How many of those may be open at once ([`Walker::lend`]).
    lend_max: usize,
    pub(crate) clock: Clock,
}

impl<'c, 'a, 's> Walker<'c, 'a, 's> {
    pub(crate) fn new(
        ctx: &'c Ctx<'a, 's>,
        parents: &'c ParentTrees,
        filter: Arc<Filter>,
        prefetch: Prefetcher,
        jobs: Sender<FileJob>,
        out: Sender<Msg>,
    ) -> Self {
        Self {
            ctx,
            parents,
            jobs,
            out,
            names: NameCache::new(),
            prefetch,
            filter,
            linked: HashMap::new(),
            reading: HashMap::new(),
            ancestors: vec![],
            next_dir: 0,
            summary: SnapshotSummary::default(),
            counts: WalkCounts::default(),
            stat_ns: COLD_STAT_NS * 2.0,
            lent: vec![],
            lend_max: ctx.opts.hooks.lent_folders.unwrap_or_else(|| {
                let allowed = arca_fs::open_files_allowed() / LENT_SHARE;
                usize::try_from(allowed).map_or(LENT_FOLDERS, |n| n.min(LENT_FOLDERS))
            }),
            clock: Clock::new(),
        }
    }

    /// Whether a directory just listed may go along with its files' jobs. Its descriptor
    /// then stays open until its last file is read; these are few (the jobs queued, the
    /// files being read, and the files of the directories above the walk that sort after
    /// the folder it is in), but a tree thousands of levels deep, or a low `ulimit -n`,
    /// would hold too many: past [`Self::lend_max`], files are opened by their path, which
    /// the readers check still leads into the directory listed.
    fn lend(&mut self, dir: &Arc<DirHandle>) -> bool {
        self.lent.retain(|w| w.strong_count() > 0);
        if self.lent.len() >= self.lend_max {
            return false;
        }
        self.lent.push(Arc::downgrade(dir));
        true
    }

    /// Ends the walk, closing its channels; returns its counters and clock.
    pub(crate) fn into_parts(self) -> (SnapshotSummary, WalkCounts, Clock) {
        (self.summary, self.counts, self.clock)
    }

    fn new_dir(&mut self) -> DirId {
        self.next_dir += 1;
        self.next_dir
    }

    fn send(&mut self, msg: Msg) -> Result<(), Fatal> {
        self.clock.busy();
        let r = self.out.send(msg).map_err(|_| Fatal::Stopped);
        self.clock.waited_out();
        r
    }

    fn dispatch(&mut self, job: FileJob) -> Result<(), Fatal> {
        self.clock.busy();
        let r = self.jobs.send(job).map_err(|_| Fatal::Stopped);
        self.clock.waited_out();
        r
    }

    fn parent_tree(&self, id: Option<Id>) -> Option<Tree> {
        // A damaged parent only costs re-reading; it does not fail the backup.
        self.parents.as_ref()?.get(&id?)
    }

    /// Walks the whole tree of sources; the root is directory 0.
    pub(crate) fn run(&mut self, src: &SourceTree, parent_root: Option<Id>) -> Result<(), Fatal> {
        let root = Path::new("/");
        if src.target {
            let key = fs::symlink_metadata(root)
                .ok()
                .map_or((0, 0), |m| (m.dev(), m.ino()));
            self.ancestors.push(key);
            let at = (key.0, None);
            let first = self.walk_dir(0, None, root, at, parent_root, None, Some(src))?;
            self.drive(first, true)
        } else {
            let first = self.walk_virtual(0, None, root, src, parent_root)?;
            self.drive(first, false)
        }
    }

    /// Sends each directory's entries, then its files to the readers, then walks its
    /// subdirectories in order, depth first, from `first` down, with a stack of its own (no
    /// recursion: a tree thousands of levels deep overflowed the thread's stack). `ancestors`
    /// holds the directories on the way to the one being walked (loops are not followed);
    /// `walked` says whether `first`'s is among them.
    fn drive<'t>(&mut self, first: Listed<'t>, walked: bool) -> Result<(), Fatal> {
        // Per directory whose work is under way: its id, whether it is in `ancestors`, its
        // (device, inode) as listed, and the work left.
        type Frame<'t> = (
            DirId,
            bool,
            Option<(u64, u64)>,
            std::vec::IntoIter<(u32, Later<'t>)>,
        );
        let mut stack: Vec<Frame<'t>> = vec![];
        let mut next = Some((first, walked));
        loop {
            if let Some((l, walked)) = next.take() {
                self.send(Msg::Dir {
                    id: l.id,
                    parent: l.link,
                    old: l.old,
                    slots: l.slots,
                })?;
                stack.push((l.id, walked, l.seen, l.later.into_iter()));
            }
            let Some((id, _, _, work)) = stack.last_mut() else {
                return Ok(());
            };
            let id = *id;
            let Some((slot, work)) = work.next() else {
                if let Some((_, true, _, _)) = stack.pop() {
                    self.ancestors.pop();
                }
                continue;
            };
            if self.ctx.cancelled() {
                return Err(Fatal::Cancelled);
            }
            let me = Some((id, slot));
            next = match work {
                Later::Read(job) => {
                    self.dispatch(*job)?;
                    None
                }
                Later::Walk(child, path, key, old, nested) => {
                    let within = stack.last().and_then(|f| f.2);
                    self.ancestors.push(key);
                    Some((
                        self.walk_dir(child, me, &path, (key.0, within), old, None, nested)?,
                        true,
                    ))
                }
                Later::Tagged(child, path, key, old, tag) => {
                    let within = stack.last().and_then(|f| f.2);
                    self.ancestors.push(key);
                    let at = (key.0, within);
                    let l = self.walk_dir(child, me, &path, at, old, Some(&tag), None)?;
                    Some((l, true))
                }
                Later::Virtual(child, path, src, old) => {
                    Some((self.walk_virtual(child, me, &path, src, old)?, false))
                }
                Later::Empty(child, old) => Some((Listed::empty(child, me, old), false)),
            };
        }
    }

    /// A directory on the way to backed-up paths: only the named children are listed.
    fn walk_virtual<'t>(
        &mut self,
        id: DirId,
        link: Option<(DirId, u32)>,
        dir: &Path,
        src: &'t SourceTree,
        old: Option<Id>,
    ) -> Result<Listed<'t>, Fatal> {
        let parent = self.parent_tree(old);
        let mut slots = vec![];
        let mut later = vec![];
        // As restic: a named path in a folder that an exclusion tag marks (`--exclude-caches`,
        // `--exclude-if-present`) is left out, but the tag itself; named paths escaped it.
        let tag = if src.children.values().any(|c| c.target) {
            self.filter.tagged(dir).ok().flatten()
        } else {
            None
        };
        for (name, child) in &src.children {
            let path = join(dir, name);
            // A folder above backed-up paths that a pattern matches excludes them all.
            if self.filter.excludes_target(&path)
                || (child.target && tag.as_ref().is_some_and(|t| t.as_bytes() != &name[..]))
            {
                self.counts.excluded += 1;
                continue;
            }
            let meta = match arca_fs::lstat(&path) {
                Ok(m) => Stat::from(&m),
                Err(e) => {
                    self.ctx.report.warn_io(&path, "stat", &e);
                    continue;
                }
            };
            let pnode = parent.as_ref().and_then(|t| t.find(name));
            let slot = slots.len() as u32;
            let done = if child.target && !self.follows(&path, &meta, child) {
                let within = Within {
                    dev: None,
                    nested: Some(child),
                    folder: None,
                };
                self.entry(id, slot, path, name, &meta, pnode, within)?
            } else {
                self.on_the_way(path, name, meta, child, pnode)
            };
            if let Some((s, l)) = done {
                slots.push(s);
                later.extend(l.map(|l| (slot, l)));
            }
        }
        Ok(Listed {
            id,
            link,
            old,
            slots,
            later,
            seen: None,
        })
    }

    /// Whether backed-up path `src`, a symlink with backed-up paths below it (`link` and
    /// `link/file`), is stored as the directory it leads to (warned): as a symlink, the paths
    /// below it were left out without a word.
    fn follows(&mut self, path: &Path, meta: &Stat, src: &SourceTree) -> bool {
        if !meta.is_symlink() || src.children.is_empty() {
            return false;
        }
        let msg = format!(
            "{}: a symlink given with paths below it; stored as the directory it leads to, \
             holding only those paths (the symlink and the rest of that directory are not in \
             the snapshot)",
            arca_format::text::shown(path)
        );
        self.ctx.report.warn(path, WarningKind::Followed, msg);
        true
    }

    /// Warns that symlink `path`, found in a backed-up directory, is stored as the directory
    /// it leads to because a backed-up path lies below it (`backup a a/link/photos`): the
    /// symlink is not in the snapshot (it was left out without a word).
    fn replaced_by_way(&mut self, path: &Path) {
        let msg = format!(
            "{}: a symlink with a backed-up path below it; stored as the directory it leads \
             to, holding only that path (the symlink and the rest of that directory are not in \
             the snapshot)",
            arca_format::text::shown(path)
        );
        self.ctx.report.warn(path, WarningKind::Followed, msg);
    }

    /// A directory on the way to backed-up paths (`src`, not itself one), stored as the
    /// directory it is or, reached through a symlink (`/home -> /var/home`), as the directory
    /// it leads to, as restic does; only the backed-up paths in it are walked.
    fn on_the_way<'t>(
        &mut self,
        path: PathBuf,
        name: &[u8],
        meta: Stat,
        src: &'t SourceTree,
        pnode: Option<&Node>,
    ) -> Option<(Slot, Option<Later<'t>>)> {
        let meta = if meta.is_symlink() {
            match arca_fs::io_on_long_path(&path, |p| std::fs::metadata(p)) {
                Ok(m) => Stat::from(&m),
                Err(e) => {
                    self.ctx.report.warn_io(&path, "stat", &e);
                    return None;
                }
            }
        } else {
            meta
        };
        let earlier = pnode.filter(|p| self.ctx.reuse_metadata && self.ctx.settled(p));
        let node = match read_node_at(None, &path, name, &meta, &mut self.names, earlier) {
            Ok(n) => n,
            Err(e) => {
                self.ctx.report.warn_io(&path, e.op, &e.source);
                return None;
            }
        };
        if node.kind() != NodeKind::Dir {
            let msg = format!(
                "{}: is no longer a directory, skipped",
                arca_format::text::shown(&path)
            );
            self.ctx.report.warn(&path, WarningKind::Vanished, msg);
            return None;
        }
        let old = pnode.filter(|p| p.is_dir()).and_then(|p| p.subtree);
        let child_id = self.new_dir();
        Some((
            Slot::Dir(node),
            Some(Later::Virtual(child_id, path, src, old)),
        ))
    }

    /// Lists a real directory and sends its entries. `at` is the directory's device and,
    /// when the walk listed the directory holding it, that one's (device, inode).
    #[allow(clippy::too_many_arguments)]
    fn walk_dir<'t>(
        &mut self,
        id: DirId,
        link: Option<(DirId, u32)>,
        dir: &Path,
        at: (u64, Option<(u64, u64)>),
        old: Option<Id>,
        only: Option<&[u8]>,
        nested: Option<&'t SourceTree>,
    ) -> Result<Listed<'t>, Fatal> {
        if self.ctx.cancelled() {
            return Err(Fatal::Cancelled);
        }
        if let Some(h) = &self.ctx.opts.hooks.before_list {
            h(dir);
        }
        let (dev, within) = at;
        let (mut names, seen, held) = match arca_fs::list_dir_names_and_ids(dir) {
            // Not in the directory listed before it: a folder above it was renamed away and
            // replaced since (by a symlink, or another folder), and the path now leads
            // elsewhere (whose contents, from outside the tree, were stored under this name
            // without a word).
            Ok(l) if within.is_some_and(|w| l.parent.is_some_and(|p| p != w)) => {
                let msg = format!(
                    "{}: replaced during backup (a folder above it was moved); stored empty",
                    arca_format::text::shown(dir)
                );
                self.ctx.report.warn(dir, WarningKind::Vanished, msg);
                return Ok(Listed::empty(id, link, old));
            }
            Ok(l) => (l.names, l.id, Arc::new(l.dir)),
            Err(e) => {
                // The folder's entry is already in its parent's listing: it is stored with
                // its metadata and nothing in it, and the warning says so.
                let (kind, msg) = if e.kind() == std::io::ErrorKind::NotFound {
                    let m = format!(
                        "{}: vanished during backup; stored empty",
                        arca_format::text::shown(dir)
                    );
                    (WarningKind::Vanished, m)
                } else {
                    let m = format!(
                        "{}: cannot list directory: {e}; stored empty",
                        arca_format::text::shown(dir)
                    );
                    (WarningKind::Unreadable, m)
                };
                self.ctx.report.warn(dir, kind, msg);
                return Ok(Listed::empty(id, link, old));
            }
        };
        if let Some(h) = &self.ctx.opts.hooks.after_list {
            h(dir);
        }
        if let Some(only) = only {
            names.retain(|n| n == only);
        }
        names.sort();
        // Read ahead while metadata comes from the disk; on a warm cache it only costs.
        if self.stat_ns > COLD_STAT_NS || self.prefetch.disk_bound() {
            self.prefetch.hint(dir, dev, &names);
        }
        let parent = self.parent_tree(old);
        let mut slots = Vec::with_capacity(names.len());
        let mut later = vec![];
        let folder = Folder {
            lent: self.lend(&held),
            dir: held,
            id: seen,
        };
        for name in names {
            let path = join(dir, &name);
            let verdict = self.filter.judge(&path);
            if verdict == Verdict::Excluded {
                self.counts.excluded += 1;
                continue;
            }
            let t = Instant::now();
            let meta = folder.dir.lstat(&name);
            self.stat_ns = 0.95 * self.stat_ns + 0.05 * t.elapsed().as_nanos() as f64;
            let meta = match meta {
                Ok(m) => m,
                Err(e) => {
                    self.ctx.report.warn_io(&path, "stat", &e);
                    continue;
                }
            };
            if verdict == Verdict::KeptIfDir {
                let dev = self.ctx.opts.one_file_system.then_some(dev);
                if !meta.is_dir() || !self.filter.takes_back_in(&path, dev) {
                    self.counts.excluded += 1;
                    continue;
                }
            }
            let pnode = parent.as_ref().and_then(|t| t.find(&name));
            let slot = slots.len() as u32;
            let mut within = Within {
                dev: Some(dev),
                nested: None,
                folder: Some(&folder),
            };
            // A backed-up path below this one: where the walk would not reach it as named
            // (through a symlink, or onto another file system with `one_file_system`), the
            // way to it is stored as when it is backed up alone, and it is walked as a
            // backed-up path; else the walk goes on, watching for the ones further down.
            let crosses = self.ctx.opts.one_file_system && meta.dev != dev;
            let done = match nested.and_then(|n| n.children.get(&name)) {
                Some(sub)
                    if (!sub.target && (meta.is_symlink() || crosses))
                        || (sub.target && self.follows(&path, &meta, sub)) =>
                {
                    if !sub.target && meta.is_symlink() {
                        self.replaced_by_way(&path);
                    }
                    self.on_the_way(path, &name, meta, sub, pnode)
                }
                Some(sub) => {
                    within.nested = Some(sub);
                    if sub.target && crosses {
                        within.dev = None;
                    }
                    self.entry(id, slot, path, &name, &meta, pnode, within)?
                }
                None => self.entry(id, slot, path, &name, &meta, pnode, within)?,
            };
            if let Some((s, l)) = done {
                slots.push(s);
                later.extend(l.map(|l| (slot, l)));
            }
        }
        drop(parent);
        // Files opened by path (not in the directory held): the folder moved away and
        // replaced meanwhile (by a symlink to a folder outside the tree), their paths lead
        // into another folder. They are read only if their path leads into the folder
        // listed (its folders are walked only if they are in it, see above).
        if !folder.lent
            && let Some(s) = seen
            && later.iter().any(|(_, l)| matches!(l, Later::Read(_)))
            && !arca_fs::lstat(dir).is_ok_and(|m| (m.dev(), m.ino()) == s)
        {
            for (_, l) in &mut later {
                if let Later::Read(job) = l {
                    job.strict = true;
                }
            }
        }
        Ok(Listed {
            id,
            link,
            old,
            slots,
            later,
            seen,
        })
    }

    /// One entry of any kind: its slot and the work it leaves; `None` when it was skipped.
    #[allow(clippy::too_many_arguments)]
    fn entry<'t>(
        &mut self,
        dir: DirId,
        slot: u32,
        path: PathBuf,
        name: &[u8],
        meta: &Stat,
        parent: Option<&Node>,
        within: Within<'t, '_>,
    ) -> Result<Option<(Slot, Option<Later<'t>>)>, Fatal> {
        let earlier = parent.filter(|p| self.ctx.reuse_metadata && self.ctx.settled(p));
        let at = within.folder.map(|f| &*f.dir);
        let node = read_node_at(at, &path, name, meta, &mut self.names, earlier);
        let mut node = match node {
            Ok(n) => n,
            Err(e) => {
                self.ctx.report.warn_io(&path, e.op, &e.source);
                return Ok(None);
            }
        };
        let parent = parent.filter(|p| p.kind == node.kind);
        match node.kind() {
            NodeKind::File if self.filter.too_large(node.size) => {
                self.counts.excluded += 1;
                Ok(None)
            }
            NodeKind::File => Ok(Some(self.file(
                dir,
                slot,
                path,
                node,
                parent,
                within.folder,
            ))),
            NodeKind::Dir => {
                let key = (node.dev, node.inode);
                let old = parent.and_then(|p| p.subtree);
                let child = self.new_dir();
                if self.ancestors.contains(&key) {
                    let msg = format!(
                        "{}: directory contains itself (file-system loop), contents skipped",
                        arca_format::text::shown(&path)
                    );
                    self.ctx.report.warn(&path, WarningKind::Loop, msg);
                    return Ok(Some((Slot::Dir(node), Some(Later::Empty(child, None)))));
                }
                let crosses =
                    self.ctx.opts.one_file_system && within.dev.is_some_and(|d| d != node.dev);
                let tagged = match self.filter.tagged(&path) {
                    Ok(t) => t,
                    Err((tag, e)) => {
                        // The directory is backed up: leaving out what the user may need is
                        // worse than storing a cache.
                        let msg = format!(
                            "{}: cannot read exclusion tag: {e}; directory backed up",
                            arca_format::text::shown(&tag)
                        );
                        self.ctx.report.warn(&tag, WarningKind::Unreadable, msg);
                        None
                    }
                };
                let later = match tagged {
                    _ if crosses => Later::Empty(child, old),
                    Some(tag) => Later::Tagged(child, path, key, old, tag.into_bytes()),
                    None => Later::Walk(child, path, key, old, within.nested),
                };
                node.subtree = None;
                Ok(Some((Slot::Dir(node), Some(later))))
            }
            _ => {
                self.summary.other_entries += 1;
                Ok(Some((Slot::Ready(node), None)))
            }
        }
    }

    /// A regular file: reused from the parent, linked to a name already seen, or read.
    fn file<'t>(
        &mut self,
        dir: DirId,
        slot: u32,
        path: PathBuf,
        mut node: Node,
        parent: Option<&Node>,
        folder: Option<&Folder>,
    ) -> (Slot, Option<Later<'t>>) {
        self.summary.total_files_processed += 1;
        self.summary.total_bytes_processed += node.size;
        let key = (node.dev, node.inode);
        let (known, opts) = (&self.ctx.known, self.ctx.opts);
        // The parent's entry, when it stands for this file but perhaps for its inode number.
        let reusable = parent.filter(|p| {
            !opts.force
                && unchanged_but(p, &node, opts.ignore_ctime || opts.ignore_inode, true)
                && self.ctx.settled(p)
                && p.content
                    .iter()
                    .all(|c| known.contains(BlobKind::Data, &c.id))
        });
        if reusable.is_some_and(|p| !opts.ignore_inode && p.inode != node.inode) {
            self.counts.renumbered += 1;
        } else if let Some(p) = reusable {
            node.content = p.content.clone();
            self.summary.files_unmodified += 1;
            self.ctx.report.file(&path, crate::FileChange::Unchanged);
            self.ctx.progress.add(1, node.size, 0);
            if node.nlink > 1 {
                self.linked.insert(key, node.clone());
            }
            return (Slot::Ready(node), None);
        }
        if node.nlink > 1 {
            // A further name of a file already seen: counted and told (`-v`) as a name of
            // its own, new or modified by what the parent snapshot had there, as restic
            // counts every name.
            if let Some(seen) = self.linked.get(&key).filter(|s| unchanged(s, &node)) {
                node.content = seen.content.clone();
                self.ctx.progress.add(1, node.size, 0);
                let change = count_name(&mut self.summary, parent.is_some());
                self.ctx.report.file(&path, change);
                return (Slot::Ready(node), None);
            }
            if self.reading.get(&key).is_some_and(|s| unchanged(s, &node))
                && let Some(link) = self.ctx.links.follow(key, &path)
            {
                self.ctx.progress.add(1, node.size, 0);
                return (Slot::Link(node, link, path, parent.is_some()), None);
            }
            self.reading.insert(key, node.clone());
        }
        let job = FileJob {
            dir,
            slot,
            path,
            changed: parent.is_some(),
            link: (node.nlink > 1).then(|| self.ctx.links.lead(key)),
            node,
            folder: folder.and_then(|f| f.id),
            strict: false,
            at: folder.filter(|f| f.lent).map(|f| Arc::clone(&f.dir)),
        };
        (Slot::Reading, Some(Later::Read(Box::new(job))))
    }
}

/// Counts a file name whose content was read (or taken from another name of the same file):
/// modified when the parent snapshot had an entry there, else new.
pub(crate) fn count_name(summary: &mut SnapshotSummary, changed: bool) -> crate::FileChange {
    if changed {
        summary.files_changed += 1;
        crate::FileChange::Modified
    } else {
        summary.files_new += 1;
        crate::FileChange::New
    }
}

mod stdin;
#[cfg(test)]
mod tests;
