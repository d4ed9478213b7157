//! What the target already holds: every planned path is looked at (in parallel) and given an
//! action by the overwrite policy; files that cannot be trusted by size and mtime are hashed
//! block by block, so only wrong blocks are fetched; `--delete` finds what the snapshot lacks.
//! The only change made here: a file hashed and found whole whose metadata is wrong gets it
//! set through the descriptor it was read with (not in a dry run).

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use arca_format::{Node, NodeKind};
use arca_fs::MetadataOptions;

use crate::RestoreIssue;
use crate::handles::DirCache;
use crate::hashing::{BlockChecker, LARGE, parallel_map, parallel_map_with, parallel_update_with};
use crate::options::Overwrite;
use crate::plan::{EntryKind, Plan};
use crate::small_files::{SmallFile, hash_small};
use crate::trees::Selection;

mod deletions;
mod doomed;
mod groups;

/// Why an entry inside a folder that is not restored is not restored either: the folder's
/// own reason is reported, not this one.
pub(crate) const PARENT_BLOCKED: &str = "its parent is not restored";

/// Whether a reason for not restoring an entry is reported (not [`PARENT_BLOCKED`]).
pub(crate) fn reported(reason: &str) -> bool {
    !reason.is_empty() && reason != PARENT_BLOCKED
}

/// The reasons the scan gives for the folders and entries it leaves (not those inside a
/// folder left already), as the real run reports them.
pub(crate) fn blocked_reasons(plan: &Plan, scan: &Scan) -> Vec<RestoreIssue> {
    let dirs = scan.dirs.iter().enumerate().filter_map(|(d, a)| match a {
        DirAction::Blocked(why) if reported(why) => Some((plan.dirs[d].path.clone(), why)),
        _ => None,
    });
    let entries = scan
        .entries
        .iter()
        .enumerate()
        .filter_map(|(e, a)| match a {
            EntryAction::Blocked(why) if reported(why) => Some((plan.entry_path(e as u32), why)),
            _ => None,
        });
    dirs.chain(entries)
        .map(|(path, why)| RestoreIssue {
            path,
            message: why.clone(),
        })
        .collect()
}

/// Whether this process may write into existing file `path`: one it may not (mode 0444 as a
/// non-root user) is replaced, as restic does, not opened for writing in place, which fails.
fn writable(path: &Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::W_OK) != Err(nix::errno::Errno::EACCES)
}

/// What happens to a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DirAction {
    /// Missing: create it.
    Create,
    /// A non-directory is in the way: remove it, then create.
    Replace,
    /// Already there.
    Exists,
    /// A folder above the backed-up paths that the target has as a symlink to a folder
    /// inside the target: restored through, its metadata left alone (see
    /// [`crate::followed::followed_links`]).
    Followed,
    /// Cannot be restored (the reason); its whole subtree is left alone.
    Blocked(String),
}

/// What happens to a non-directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EntryAction {
    /// Nothing there: create it (links: link, replacing a different entry at link time).
    Create,
    /// Something else there: remove it, then create.
    Replace,
    /// Right content already there; `meta_ok` when its metadata was right too, `meta_set`
    /// when it was wrong and the scan has set it.
    Keep { meta_ok: bool, meta_set: bool },
    /// An existing file that holds some of its blocks: write the others in place.
    Patch,
    /// Left as it is (overwrite policy).
    Skip,
    /// Cannot be restored (the reason; [`PARENT_BLOCKED`] inside a folder that is not).
    Blocked(String),
}

impl EntryAction {
    /// Whether the entry gets content written (new, replaced or patched).
    pub fn writes(&self) -> bool {
        matches!(self, Self::Create | Self::Replace | Self::Patch)
    }
}

/// What looking at an existing entry decided.
enum Decided {
    Done(EntryAction),
    /// The file must be hashed first.
    Hash(SmallFile),
}

/// An entry of the target that the snapshot does not have (`--delete`).
#[derive(Debug, Clone)]
pub(crate) struct Deletion {
    pub path: PathBuf,
    pub is_dir: bool,
}

/// The target's state against the plan.
#[derive(Debug, Default, Clone)]
pub(crate) struct Scan {
    pub dirs: Vec<DirAction>,
    pub entries: Vec<EntryAction>,
    /// Per block use: the target file already holds it.
    pub in_place: Vec<bool>,
    pub deletes: Vec<Deletion>,
    /// Extra folders `--delete` leaves where they are (they hold a mount point), with why.
    pub kept: Vec<crate::RestoreIssue>,
    /// Per directory: it exists with metadata other than the snapshot's (counted and listed
    /// by the plan's summary; the finish sets it either way).
    pub dir_meta_wrong: Vec<bool>,
    /// Files hashed, and bytes read doing so.
    pub files_hashed: u64,
    pub bytes_hashed: u64,
    /// Files left to hash while content moves ([`Scanner::defer`]): their entries say
    /// `Patch` until then, and `deferred_entry` marks them.
    pub deferred: Vec<SmallFile>,
    pub deferred_entry: Vec<bool>,
    /// Per entry (empty when none was): hashing settled it ([`Scan::record`]), before content
    /// moved or while it did.
    pub hashed_entry: Vec<bool>,
    /// Per entry (empty when none was): a further name of a hard-link group that is its first
    /// name's inode already, left as it is ([`Scanner::settle_links_of`]).
    pub linked_entry: Vec<bool>,
    /// Per entry (empty when none was): a further name of a hard-link group that the target
    /// holds as another inode (the group split, or another file there), which the link
    /// replaces: listed as an update, not as new.
    pub link_over: Vec<bool>,
}

impl Scan {
    /// What an empty target needs: everything created.
    pub fn empty(plan: &Plan) -> Self {
        Scan {
            dirs: vec![DirAction::Create; plan.dirs.len()],
            entries: vec![EntryAction::Create; plan.entries.len()],
            in_place: vec![false; plan.uses.len()],
            dir_meta_wrong: vec![false; plan.dirs.len()],
            ..Scan::default()
        }
    }

    /// Whether entry `e` was hashed, or waits to be: what the target holds under its path
    /// was not trusted by size and mtime.
    pub fn hashed_or_deferred(&self, e: u32) -> bool {
        self.is_deferred(e) || self.hashed_entry.get(e as usize).is_some_and(|&h| h)
    }

    /// Whether entry `e`, a further name of a hard-link group, is its first name's inode
    /// already: in place, though left alone (Skip).
    pub fn is_linked(&self, e: u32) -> bool {
        self.linked_entry.get(e as usize).is_some_and(|&l| l)
    }

    /// Whether entry `e`, a further name of a hard-link group, replaces what the target
    /// holds under its name.
    pub fn links_over(&self, e: u32) -> bool {
        self.link_over.get(e as usize).is_some_and(|&l| l)
    }

    /// Whether entry `e` waits for its hashing.
    pub fn is_deferred(&self, e: u32) -> bool {
        self.deferred_entry.get(e as usize).is_some_and(|&d| d)
    }

    /// Records what hashing found for `h`.
    pub fn record(
        &mut self,
        plan: &Plan,
        h: &SmallFile,
        action: EntryAction,
        held: Option<Vec<bool>>,
    ) {
        if self.hashed_entry.is_empty() {
            self.hashed_entry = vec![false; plan.entries.len()];
        }
        self.hashed_entry[h.entry as usize] = true;
        if let Some(held) = held {
            let fp = plan.files[h.file as usize];
            self.files_hashed += 1;
            // A file replaced holds nothing in place (whole, it lends its blocks instead).
            if action != EntryAction::Replace {
                self.in_place[fp.first as usize..fp.end as usize].copy_from_slice(&held);
            }
        }
        self.entries[h.entry as usize] = action;
    }
}

/// What hashing found for one file: its action and which blocks it holds.
pub(crate) type Settled = (EntryAction, Option<Vec<bool>>);

/// Looks at the target.
pub(crate) struct Scanner<'a> {
    pub plan: &'a Plan,
    pub overwrite: Overwrite,
    pub delete: bool,
    pub metadata: MetadataOptions,
    pub sel: &'a Selection,
    /// The snapshot's backed-up paths: `--delete` acts only at or below them, never in the
    /// folders above them (their other entries were never part of the backup).
    pub roots: &'a [PathBuf],
    /// The folders restored through a symlink of the target
    /// ([`crate::followed::followed_links`]), sorted.
    pub follow: &'a [u32],
    /// The symlinks of the target not restored through, as two folders of the snapshot
    /// would be one there, with the reason; sorted.
    pub clashing: &'a [(u32, String)],
    pub checker: &'a BlockChecker<'a>,
    /// Threads looking at entries and hashing the files that cannot be trusted: mostly
    /// waiting for inodes and blocks to be read, so many of them keep the disk's queue full.
    pub threads: usize,
    /// Set the metadata of whole files that lack it while they are open (not a dry run).
    pub fix_metadata: bool,
    /// Files changed since a restore that may not have reached the disk: hashed, not trusted
    /// by size and mtime.
    pub durable: &'a crate::durable::Durability,
    /// Leave the files that must be hashed for [`Scanner::hash`] (their entries say `Patch`
    /// meanwhile), so that the restore moves the content of the others at the same time.
    pub defer: bool,
    pub stop: &'a AtomicBool,
    /// The local repository read from ([`crate::guard`]): its folder, wherever the target
    /// reaches it, is never restored over nor deleted, nor is a folder holding it.
    pub repository: Option<&'a crate::guard::Repository>,
    /// The entries and folders whose path may alias another's on a case-insensitive target.
    pub risky: &'a crate::aliases::Risky,
    /// Per folder, once the scan has looked at folders: whether what the target holds under
    /// its path is the restore's to look at (it exists as a folder, or is a symlink the
    /// restore goes through). A path under a folder to be replaced or made leads elsewhere,
    /// as through a symlink the restore will replace.
    pub looked: &'a std::sync::OnceLock<Vec<bool>>,
    /// The target's inodes with several names that entries reach.
    pub inodes: &'a crate::inodes::SharedInodes,
    /// How finely the target keeps mtimes: a file restored there has the snapshot's, cut.
    pub grain: &'a crate::grain::Grain,
}

/// Whether snapshot path `p` is at or below one of the backed-up `roots` (not one of the
/// folders above them, which hold only the way down).
pub(crate) fn backed_up(roots: &[PathBuf], p: &Path) -> bool {
    roots.iter().any(|r| p.starts_with(r))
}

fn is_empty_dir(p: &Path) -> bool {
    match arca_fs::list_dir_noatime(p) {
        Ok(names) => names.is_empty(),
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

impl Scanner<'_> {
    /// Decides every entry's action. An empty or missing target is recognised at once.
    pub fn scan(&self) -> Scan {
        let plan = self.plan;
        let mut scan = Scan::empty(plan);
        if is_empty_dir(&plan.dirs[0].path) {
            return scan;
        }
        scan.dirs[0] = DirAction::Exists;
        // One level at a time, parents first: a folder the user cannot enter is opened to
        // them (see `dir_action`) before what it holds is looked at.
        let mut depth = vec![0u32; plan.dirs.len()];
        let mut levels: Vec<Vec<usize>> = vec![];
        for d in 1..plan.dirs.len() {
            let l = depth[plan.dirs[d].parent as usize] + 1;
            depth[d] = l;
            if levels.len() < l as usize {
                levels.resize(l as usize, vec![]);
            }
            levels[l as usize - 1].push(d);
        }
        for level in &levels {
            let dirs = &scan.dirs;
            let found = parallel_map_with(
                level.len(),
                self.threads,
                self.stop,
                || DirCache::new(plan, self.follow),
                |at, i| {
                    let d = level[i];
                    match &dirs[plan.dirs[d].parent as usize] {
                        DirAction::Blocked(_) => (DirAction::Blocked(PARENT_BLOCKED.into()), false),
                        DirAction::Create | DirAction::Replace => (DirAction::Create, false),
                        DirAction::Exists | DirAction::Followed => self.dir_action(at, d),
                    }
                },
            );
            for (&d, a) in level.iter().zip(found) {
                let (action, meta_wrong) = a.unwrap_or((DirAction::Create, false));
                scan.dirs[d] = action;
                scan.dir_meta_wrong[d] = meta_wrong;
            }
        }
        let _ = self.looked.set(
            scan.dirs
                .iter()
                .map(|a| matches!(a, DirAction::Exists | DirAction::Followed))
                .collect(),
        );
        // Every entry is looked at first; the files that cannot be trusted are hashed after
        // ([`Self::hash`]). Stays so for entries not reached when stopped.
        scan.entries.fill(EntryAction::Skip);
        let dirs = &scan.dirs;
        let to_hash = parallel_update_with(
            &mut scan.entries,
            self.threads,
            self.stop,
            || DirCache::new(plan, self.follow),
            |at, e, slot| {
                let looked = match &dirs[plan.entries[e].parent as usize] {
                    DirAction::Exists | DirAction::Followed => self.entry_action(at, e),
                    DirAction::Blocked(_) => {
                        Ok(Decided::Done(EntryAction::Blocked(PARENT_BLOCKED.into())))
                    }
                    _ => Ok(Decided::Done(EntryAction::Create)),
                };
                match looked {
                    Ok(Decided::Done(a)) => *slot = a,
                    Ok(Decided::Hash(h)) => return Some(h), // stays Skip until hashed
                    Err(err) if self.opened_by_real_run(plan.entries[e].parent, &err) => {
                        *slot = EntryAction::Create;
                    }
                    Err(err) => {
                        *slot = EntryAction::Blocked(format!(
                            "{}: cannot look at the existing entry: {err}",
                            arca_format::text::shown(&plan.entry_path(e as u32))
                        ));
                    }
                }
                None
            },
        );
        // An inode that entries of two groups reach is two files of the snapshot joined in
        // the target: each is split, even where its own extra names could be names its
        // source file had that the restore leaves out (hunt 27: each took the other's name
        // for one of those, and both were kept, one file).
        for e in self.inodes.seal(plan) {
            if matches!(scan.entries[e as usize], EntryAction::Keep { .. }) {
                scan.entries[e as usize] = EntryAction::Replace;
                // Right in content: its blocks are copied from it, not fetched.
                if let EntryKind::File(f) = plan.entries[e as usize].kind {
                    self.inodes.note_lender(e, f);
                }
            }
        }
        if self.delete {
            self.spare_mounts(&mut scan);
            self.find_deletions(&mut scan);
            crate::spare::keep_mounted(&mut scan);
        }
        // What stands where the snapshot has a folder goes whatever --delete says (as a file
        // is replaced by a file), and is said: `-v`, the dry run and the count name it.
        for (d, a) in scan.dirs.iter().enumerate() {
            if *a == DirAction::Replace {
                scan.deletes.push(Deletion {
                    path: plan.dirs[d].path.clone(),
                    is_dir: false,
                });
            }
        }
        if let Some(repo) = self.repository {
            self.spare_repository(&mut scan, repo);
        }
        if self.delete {
            self.keep_groups_losing_deleted_names(&mut scan);
        }
        if self.defer && !to_hash.is_empty() {
            scan.deferred_entry = vec![false; plan.entries.len()];
            for h in &to_hash {
                scan.entries[h.entry as usize] = EntryAction::Patch;
                scan.deferred_entry[h.entry as usize] = true;
            }
            scan.deferred = to_hash;
            self.settle_links(&mut scan);
            return scan;
        }
        let scan = std::sync::Mutex::new(scan);
        self.hash(to_hash, &|h, (a, held)| {
            scan.lock()
                .unwrap_or_else(|p| p.into_inner())
                .record(plan, h, a, held);
        });
        let mut scan = scan.into_inner().unwrap_or_else(|p| p.into_inner());
        scan.bytes_hashed = self.checker.bytes_read.load(Ordering::Relaxed);
        self.settle_links(&mut scan);
        scan
    }

    /// Whether entry `e`'s path in the target is the restore's to look at ([`Self::looked`]):
    /// a name reached through a symlink the restore replaces is another file's (counting it
    /// let a fix in place reach a file outside the restore, hunt 18).
    fn looked_at(&self, e: u32) -> bool {
        let parent = self.plan.entries[e as usize].parent as usize;
        self.looked
            .get()
            .is_some_and(|l| l.get(parent).is_some_and(|&x| x))
    }

    /// Hard links already in place are left: a further name that is the same inode as the
    /// first, which stays as it is, needs nothing (dry runs and `-v` said "restore hardlink"
    /// for each such name).
    fn settle_links(&self, scan: &mut Scan) {
        for (&first, links) in &self.plan.links {
            // A name to link that the target holds already (as another inode, or one settled
            // below) is replaced: an update.
            for &l in links {
                if scan.entries[l as usize] == EntryAction::Create
                    && self.looked_at(l)
                    && arca_fs::lstat(&self.plan.entry_path(l)).is_ok()
                {
                    if scan.link_over.is_empty() {
                        scan.link_over = vec![false; self.plan.entries.len()];
                    }
                    scan.link_over[l as usize] = true;
                }
            }
            // A first name kept, or patched in place, stays this inode (not one still to be
            // hashed: it says Patch until then, and may be replaced).
            let stays = match scan.entries[first as usize] {
                EntryAction::Skip | EntryAction::Keep { .. } => true,
                EntryAction::Patch => !scan.is_deferred(first),
                _ => false,
            };
            if stays {
                self.settle_links_of(first, links, scan);
            }
        }
    }

    /// The further names `links` of `first`, which stays the inode it is, that are that inode
    /// already: left as they are (Skip).
    pub(crate) fn settle_links_of(&self, first: u32, links: &[u32], scan: &mut Scan) {
        let Ok(f) = arca_fs::lstat(&self.plan.entry_path(first)) else {
            return;
        };
        for &l in links {
            if scan.entries[l as usize] == EntryAction::Create
                && self.looked_at(l)
                && arca_fs::lstat(&self.plan.entry_path(l))
                    .is_ok_and(|m| m.ino() == f.ino() && m.dev() == f.dev())
            {
                scan.entries[l as usize] = EntryAction::Skip;
                if scan.linked_entry.is_empty() {
                    scan.linked_entry = vec![false; self.plan.entries.len()];
                }
                scan.linked_entry[l as usize] = true;
            }
        }
    }

    /// Hashes the files that could not be trusted and hands each one's outcome to `settled`
    /// as soon as it is known (on the hashing threads): the small ones in disk order, many
    /// reads at a time, then the large ones a few at a time. (Hashing them at once, by the
    /// thread that looked, read one file per disk request.) Files not reached when stopped
    /// are not handed on.
    pub fn hash(&self, mut files: Vec<SmallFile>, settled: &(dyn Fn(&SmallFile, Settled) + Sync)) {
        let plan = self.plan;
        files.sort_unstable_by_key(|h| h.size >= LARGE);
        let (small, large) = files.split_at(files.partition_point(|h| h.size < LARGE));
        // Handed on by the reading threads themselves: `hash_small`'s store runs one thread
        // at a time, and what `settled` does (finishing entries and their folders) would
        // then hold up every reader.
        hash_small(
            self.checker,
            small,
            self.follow,
            self.stop,
            |h, read| settled(h, self.settle(h, read)),
            |_, ()| {},
        );
        parallel_map(large.len(), self.threads, self.stop, |k| {
            let h = &large[k];
            let path = plan.entry_path(h.entry);
            let read = self
                .checker
                .held_open(&path, h.size, plan.file_uses(h.file));
            settled(h, self.settle(h, read));
        });
    }

    /// The action for directory `d`, whose parent exists, and whether it exists with other
    /// metadata than the snapshot's.
    fn dir_action(&self, at: &mut DirCache<'_>, d: usize) -> (DirAction, bool) {
        let dp = &self.plan.dirs[d];
        let is_repository = |id: (u64, u64)| self.repository.is_some_and(|r| r.folder == id);
        if let Ok(i) = self.clashing.binary_search_by_key(&(d as u32), |c| c.0) {
            return (DirAction::Blocked(self.clashing[i].1.clone()), false);
        }
        if self.follow.binary_search(&(d as u32)).is_ok() {
            // A symlink in the target leading to the repository's folder.
            if self.repository.is_some()
                && fs::metadata(&dp.path).is_ok_and(|m| is_repository((m.dev(), m.ino())))
            {
                return (DirAction::Blocked(crate::guard::reason(&dp.path)), false);
            }
            return (DirAction::Followed, false);
        }
        let name = dp.path.file_name().map_or(&[][..], |n| n.as_bytes());
        let action = match at.stat(dp.parent, name) {
            Ok(None) => DirAction::Create,
            // The repository's folder, however the target reaches it (by name, a bind mount).
            Ok(Some(m)) if m.is_dir() && is_repository((m.dev, m.ino)) => {
                DirAction::Blocked(crate::guard::reason(&dp.path))
            }
            Ok(Some(m)) if m.is_dir() => {
                let meta_wrong = dp.meta.as_ref().is_some_and(|meta| {
                    let node = meta.node();
                    !(arca_fs::stat_matches(&m, &node, self.metadata)
                        && at.xattrs_match(dp.parent, name, &dp.path, &node, self.metadata))
                });
                self.open_to_owner(&dp.path, &m);
                return (DirAction::Exists, meta_wrong);
            }
            Ok(Some(_)) if self.overwrite == Overwrite::Never => DirAction::Blocked(format!(
                "{}: not replacing the existing entry with a directory (--overwrite never)",
                arca_format::text::shown(&dp.path)
            )),
            // A file (or link) where the snapshot has a folder: replaced as a file would be,
            // and listed and counted as deleted; under if-newer, not when it is the newer.
            Ok(Some(m))
                if self.overwrite == Overwrite::IfNewer
                    && dp.meta.as_ref().is_some_and(|meta| {
                        let t = meta.node().mtime;
                        self.grain
                            .not_older(m.dev, m.mtime, (t.sec, i64::from(t.nsec)))
                    }) =>
            {
                DirAction::Blocked(format!(
                    "{}: not replacing the newer entry with a directory (--overwrite if-newer)",
                    arca_format::text::shown(&dp.path)
                ))
            }
            Ok(Some(_)) => DirAction::Replace,
            Err(e) if self.opened_by_real_run(dp.parent, &e) => DirAction::Create,
            Err(e) => DirAction::Blocked(format!("{}: {e}", arca_format::text::shown(&dp.path))),
        };
        (action, false)
    }

    /// In a dry run, whether failing to look inside folder `d` is the dry run's own doing: a
    /// folder of the user's they may not enter (mode 000 or 0500), which the real run opens
    /// to them ([`Self::open_to_owner`]) before it looks inside. What it holds is then taken
    /// as to be written (the dry run said "cannot restore" where the real run succeeded).
    fn opened_by_real_run(&self, d: u32, e: &io::Error) -> bool {
        !self.fix_metadata
            && !self.metadata.is_root
            && e.kind() == io::ErrorKind::PermissionDenied
            && arca_fs::lstat(&self.plan.dirs[d as usize].path)
                .is_ok_and(|m| m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw())
    }

    /// Gives the user read, write and search rights on an existing folder of theirs that
    /// lacks them (a restored folder of mode 0500 or 000), so that what it holds can be looked
    /// at and restored by a user who is not root; the folder gets the snapshot's mode back
    /// when it is finished, as a folder the restore creates does. Not in a dry run.
    fn open_to_owner(&self, path: &Path, m: &arca_fs::Stat) {
        use std::os::unix::fs::PermissionsExt;
        if !self.fix_metadata
            || self.metadata.is_root
            || m.mode & 0o700 == 0o700
            || m.uid != nix::unistd::geteuid().as_raw()
        {
            return;
        }
        let _ = fs::set_permissions(path, fs::Permissions::from_mode((m.mode | 0o700) & 0o7777));
    }

    /// The action for an entry whose directory exists, or the existing size and link count
    /// when the file must be hashed first.
    fn entry_action(&self, at: &mut DirCache<'_>, e: usize) -> io::Result<Decided> {
        let ep = &self.plan.entries[e];
        let node = &ep.meta.node();
        let Some(m) = at.stat_entry(e as u32)? else {
            return Ok(Decided::Done(EntryAction::Create));
        };
        if m.nlink > 1 {
            self.inodes.note(m.dev, m.ino, e as u32);
        }
        let path = || self.plan.entry_path(e as u32);
        let snap_mtime = (node.mtime.sec, i64::from(node.mtime.nsec));
        if m.is_dir() {
            return Ok(Decided::Done(if self.overwrite == Overwrite::Never {
                EntryAction::Skip
            } else if self.overwrite == Overwrite::IfNewer
                && self.grain.not_older(m.dev, m.mtime, snap_mtime)
            {
                // A newer folder where the snapshot has an older file is kept, with all it
                // holds, as a newer file where it has a folder is (`--delete` deleted it).
                EntryAction::Blocked(format!(
                    "{}: not replacing the newer entry with a file (--overwrite if-newer)",
                    arca_format::text::shown(&path())
                ))
            } else if self.delete {
                EntryAction::Replace
            } else {
                EntryAction::Blocked(format!(
                    "{}: a directory is in the way (use --delete to replace it)",
                    arca_format::text::shown(&path())
                ))
            }));
        }
        match self.overwrite {
            Overwrite::Never => return Ok(Decided::Done(EntryAction::Skip)),
            Overwrite::IfNewer if self.grain.not_older(m.dev, m.mtime, snap_mtime) => {
                return Ok(Decided::Done(EntryAction::Skip));
            }
            _ => {}
        }
        let keep = |at: &mut DirCache<'_>| EntryAction::Keep {
            meta_ok: arca_fs::stat_matches(&m, node, self.metadata)
                && at.xattrs_match(ep.parent, &ep.name, &path(), node, self.metadata),
            meta_set: false,
        };
        let action = match ep.kind {
            // Decided when the link is made: right inode, or replaced. Until then its content
            // may serve the group's file (its first name missing, or replaced).
            EntryKind::Link(first) => {
                if let EntryKind::File(f) = self.plan.entries[first as usize].kind
                    && m.is_file()
                    && self.trusted(&m, f, node)
                {
                    self.inodes.note_lender(e as u32, f);
                }
                EntryAction::Create
            }
            EntryKind::Symlink => {
                let target = ep.meta.link_target();
                if !m.is_symlink() {
                    EntryAction::Replace
                } else if self.overwrite == Overwrite::IfChanged
                    && self.trusted_link(&m, target.len(), node)
                {
                    // As a file: trusted by size and mtime, and not read, which would move
                    // its access time (relatime moves one not newer than the link's ctime,
                    // as every restored link's is), to be set back at once.
                    keep(at)
                } else if at.read_link_keeping_atime(e as u32, m.atime)? == target {
                    keep(at)
                } else {
                    EntryAction::Replace
                }
            }
            EntryKind::Special => {
                if same_special(&m, node) {
                    keep(at)
                } else {
                    EntryAction::Replace
                }
            }
            EntryKind::File(f) => {
                if !m.is_file() {
                    EntryAction::Replace
                } else if self.overwrite == Overwrite::IfChanged && self.trusted(&m, f, node) {
                    keep(at)
                } else {
                    return Ok(Decided::Hash(SmallFile {
                        entry: e as u32,
                        file: f,
                        nlink: u32::try_from(m.nlink).unwrap_or(u32::MAX),
                        size: m.size,
                        ino: m.ino,
                    }));
                }
            }
        };
        // An entry with more names than the restore gives it (hard links to files the
        // snapshot keeps apart, maybe outside the target) is replaced, even when it is right:
        // kept, it would stay one file with those names, so that writing one changed the
        // other (hunt 25); and setting its metadata would change theirs.
        let action = match action {
            EntryAction::Keep { meta_ok, .. }
                if self.foreign_names(e as u32, m.nlink, m.dev, m.ino, meta_ok) =>
            {
                // Unless those names are all ones `--delete` removes (known only later).
                if self.delete {
                    self.inodes.note_split_for_names(e as u32, meta_ok);
                }
                // Right in content: its blocks are copied from it, not fetched.
                if let EntryKind::File(f) = ep.kind {
                    self.inodes.note_lender(e as u32, f);
                }
                EntryAction::Replace
            }
            a => a,
        };
        Ok(Decided::Done(action))
    }

    /// Whether existing file `m` is trusted by size and mtime to hold file `f`'s content
    /// (`node`: the snapshot's metadata for it), unless it may not have reached the disk.
    fn trusted(&self, m: &arca_fs::Stat, f: u32, node: &Node) -> bool {
        m.size == self.plan.files[f as usize].size
            && self
                .grain
                .same(m.dev, m.mtime, (node.mtime.sec, i64::from(node.mtime.nsec)))
            && !self.durable.distrusts(m.ctime)
    }

    /// Whether existing symlink `m` is trusted by its size (the length of its target) and
    /// mtime to point where the snapshot's (`target_len` bytes long) does, as files are.
    fn trusted_link(&self, m: &arca_fs::Stat, target_len: usize, node: &Node) -> bool {
        usize::try_from(m.size).is_ok_and(|s| s == target_len)
            && self
                .grain
                .same(m.dev, m.mtime, (node.mtime.sec, i64::from(node.mtime.nsec)))
            && !self.durable.distrusts(m.ctime)
    }

    /// Whether inode `ino` of entry `e`, with `nlink` names, has names beyond those of its
    /// hard-link group that the target gives it: names of another file (hard links the
    /// snapshot does not have, maybe outside the target). Kept, the two would stay one file,
    /// so that writing one changed the other (hunt 25); written into, or given metadata, it
    /// would change that file. `untouched` (an entry kept as it is, right in content and
    /// metadata) also allows the names the source file had that the restore leaves out (not
    /// selected, or outside the backup): those may be its own. Never for an inode to be
    /// written or changed: one of them could be a file outside the target. Names that
    /// `--delete` removes are not counted: they are gone before anything is written.
    fn foreign_names(&self, e: u32, nlink: u64, dev: u64, ino: u64, untouched: bool) -> bool {
        let plan = self.plan;
        // Two files of the snapshot the scan found joined are split, also when the other
        // name is gone by the time this one is hashed: a real run hashing while content
        // moves had then replaced it, and kept this one where the dry run replaced both.
        if self.inodes.shared_with_another(plan, e, dev, ino) {
            return true;
        }
        if nlink <= 1 {
            return false;
        }
        let left_out = if untouched {
            let in_plan = 1 + plan.links.get(&e).map_or(0, |l| l.len() as u64);
            plan.source_nlink
                .get(&e)
                .map_or(0, |&n| n.saturating_sub(in_plan))
        } else {
            0
        };
        let nlink = nlink.saturating_sub(self.inodes.doomed_names(dev, ino));
        nlink > self.names_here(e, dev, ino).saturating_add(left_out)
    }

    /// How many names of entry `e`'s hard-link group in this restore the target already
    /// gives inode `ino`: its link count beyond them counts names that are not the restore's
    /// (elsewhere in the target, or outside it), which a change of its metadata would change
    /// too. (Counting the group's names instead missed a name outside when another name of
    /// the group had been split off.)
    fn names_here(&self, e: u32, dev: u64, ino: u64) -> u64 {
        let plan = self.plan;
        let Some(links) = plan.links.get(&e) else {
            return 1;
        };
        let here = links.iter().filter(|&&l| {
            self.looked_at(l)
                && arca_fs::lstat(&plan.entry_path(l))
                    .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
        });
        1 + here.count() as u64
    }

    /// Settles existing entry `h.entry`, which could not be trusted, from what hashing it
    /// found (`read`: the blocks it holds and the file, open): Keep when every block is there
    /// and the size is right (its metadata set now through the open file if it is wrong),
    /// Patch otherwise (Replace when it has other names, which writing into it would change
    /// too, or cannot be read or written, as a read-only file of the user). Returns the action
    /// and which blocks the file holds. A file whose every name is one of its hard-link
    /// group's in this restore is patched: writing it gives them all the snapshot's content.
    fn settle(
        &self,
        h: &SmallFile,
        read: io::Result<(Vec<bool>, fs::File)>,
    ) -> (EntryAction, Option<Vec<bool>>) {
        let plan = self.plan;
        let ep = &plan.entries[h.entry as usize];
        let fp = plan.files[h.file as usize];
        let path = plan.entry_path(h.entry);
        let Ok((held, file)) = read else {
            return (EntryAction::Replace, None);
        };
        if held.iter().all(|&x| x) && h.size == fp.size {
            let node = ep.meta.node();
            // Read again from the open file: reading may have moved its access time.
            let have = file.metadata().ok();
            let meta_ok = have.as_ref().is_some_and(|m| {
                arca_fs::stat_matches(&m.into(), &node, self.metadata)
                    && arca_fs::file_xattrs_match(&file, &node, self.metadata)
            });
            // Names beyond the restore's are split off, right or not (see entry_action).
            if h.nlink > 1
                && have.as_ref().is_none_or(|m| {
                    self.foreign_names(h.entry, m.nlink(), m.dev(), m.ino(), meta_ok)
                })
            {
                // Right in content: its blocks are copied from it, not fetched (the blocks
                // it holds go with it: `Scan::record` counts none in place).
                self.inodes.note_lender(h.entry, h.file);
                return (EntryAction::Replace, Some(held));
            }
            let meta_set = !meta_ok
                && self.fix_metadata
                && arca_fs::apply_file_metadata(&file, &path, &node, self.metadata, have.as_ref())
                    .is_empty();
            (EntryAction::Keep { meta_ok, meta_set }, Some(held))
        } else if !writable(&path)
            || (h.nlink > 1
                && file
                    .metadata()
                    .is_ok_and(|m| self.foreign_names(h.entry, m.nlink(), m.dev(), m.ino(), false)))
        {
            (EntryAction::Replace, Some(vec![false; held.len()]))
        } else {
            (EntryAction::Patch, Some(held))
        }
    }
}

fn same_special(m: &arca_fs::Stat, node: &Node) -> bool {
    match node.kind() {
        NodeKind::Fifo => m.is_fifo(),
        NodeKind::Socket => m.is_socket(),
        NodeKind::CharDev => m.is_char_device() && m.rdev == node.rdev,
        NodeKind::BlockDev => m.is_block_device() && m.rdev == node.rdev,
        _ => false,
    }
}
