//! Before any content moves: removes what `--delete` and replaced entries require, creates
//! the directories (level by level, each level in parallel), and settles every entry that
//! needs no content: symlinks, FIFOs, devices, files already in place or left alone.

use std::fs;
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;

use arca_format::NodeKind;
use arca_fs::FsError;

use crate::ctx::Shared;
use crate::hashing::parallel_map;
use crate::plan::{EntryKind, NO_PARENT};
use crate::scan::{DirAction, EntryAction};

/// Removes a non-directory entry, or with `dirs` a directory tree too; `why` names the
/// operation in errors ("delete" for `--delete`, "replace" for an entry in the way). A tree
/// holding a mount point is left whole: the mount point cannot be removed (EBUSY), and going
/// into it deleted the mounted file system's content (a bind mount, a disk) first.
fn remove(path: &Path, dirs: bool, why: &'static str) -> Result<(), FsError> {
    match arca_fs::lstat(path) {
        Ok(m) if m.is_dir() && dirs => {
            if let Some(e) = mount_refusal(path, why) {
                return Err(e);
            }
            match arca_fs::io_on_long_path(path, |p| fs::remove_dir_all(p)) {
                Ok(()) => Ok(()),
                // remove_dir_all does not say which entry it could not remove (an immutable
                // file deep inside was reported as its top folder): a second pass finds it.
                Err(e) => match first_blocker(path) {
                    Some((at, e)) => Err(FsError::new(why, &at, e)),
                    None if arca_fs::lstat(path).is_err() => Ok(()),
                    None => Err(FsError::new(why, path, e)),
                },
            }
        }
        Ok(m) if m.is_dir() => Err(FsError::new(
            why,
            path,
            io::Error::new(io::ErrorKind::AlreadyExists, "a directory is in the way"),
        )),
        Ok(_) => arca_fs::io_on_long_path(path, |p| fs::remove_file(p))
            .map_err(|e| FsError::new(why, path, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(FsError::new("stat", path, e)),
    }
}

/// Why the folder tree at `path` is left whole, when it holds a mount point: removing it
/// fails at the mount point (EBUSY), and going into it deleted the mounted file system's
/// content first. `why` names the operation, as in [`remove`].
pub(crate) fn mount_refusal(path: &Path, why: &'static str) -> Option<FsError> {
    let mount = arca_fs::mount_point_within(path)?;
    let msg = if mount == path {
        "it is a mount point; nothing removed".to_string()
    } else {
        format!(
            "{} is a mount point; nothing removed",
            arca_format::text::shown(&mount)
        )
    };
    Some(FsError::new(why, path, io::Error::other(msg)))
}

/// Removes what it can of the tree at `dir`, depth first, and returns the first entry that
/// cannot be removed, with why (the folders holding it stay).
fn first_blocker(dir: &Path) -> Option<(std::path::PathBuf, io::Error)> {
    use std::os::unix::ffi::OsStrExt;
    let names = match arca_fs::list_dir_names(dir) {
        Ok(n) => n,
        Err(e) => return Some((dir.to_path_buf(), e)),
    };
    let mut first = None;
    for name in names {
        let p = dir.join(std::ffi::OsStr::from_bytes(&name));
        let blocked = match arca_fs::lstat(&p) {
            Ok(m) if m.is_dir() => first_blocker(&p),
            Ok(_) => arca_fs::io_on_long_path(&p, |q| fs::remove_file(q))
                .err()
                .map(|e| (p, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => Some((p, e)),
        };
        first = first.or(blocked);
    }
    first.or_else(|| {
        arca_fs::io_on_long_path(dir, |q| fs::remove_dir(q))
            .err()
            .map(|e| (dir.to_path_buf(), e))
    })
}

impl Shared<'_> {
    /// Runs the preparation on `threads` threads. Returns false when the restore must stop.
    pub fn prepare(&self, threads: usize) -> bool {
        let plan = self.plan;
        let scan = self.scan;
        let stop = self.stop_flag();
        // What --delete removes. A folder that could not go, where the snapshot has another
        // entry, is not tried again as that entry's replacement (one error, not three).
        let mut undeleted = std::collections::HashSet::new();
        for d in &scan.deletes {
            if let Err(e) = remove(&d.path, true, "delete") {
                self.counters.deletes_failed.fetch_add(1, Ordering::Relaxed);
                self.fs_error(&e);
                undeleted.insert(d.path.as_path());
            }
        }
        // Directories, parents before children: one level at a time, in parallel.
        let mut depth = vec![0u32; plan.dirs.len()];
        for d in 1..plan.dirs.len() {
            depth[d] = depth[plan.dirs[d].parent as usize] + 1;
        }
        let deepest = depth.iter().copied().max().unwrap_or(0);
        let mut levels: Vec<Vec<u32>> = vec![vec![]; deepest as usize + 1];
        for (d, &l) in depth.iter().enumerate().skip(1) {
            levels[l as usize].push(d as u32);
        }
        for level in &levels {
            parallel_map(level.len(), threads, stop, |i| self.make_dir(level[i]));
            if self.stopped() {
                return false;
            }
        }
        // Entries without content to fetch.
        parallel_map(plan.entries.len(), threads, stop, |e| {
            self.settle_entry(e as u32, &undeleted)
        });
        // Directories with nothing inside are complete now.
        for d in 1..plan.dirs.len() {
            if plan.dirs[d].children == 0 {
                self.dir_complete(d as u32);
                let p = plan.dirs[d].parent;
                if p != NO_PARENT {
                    self.child_done(p);
                }
            }
        }
        !self.stopped()
    }

    fn make_dir(&self, d: u32) {
        let dp = &self.plan.dirs[d as usize];
        // Inside a directory that could not be made: that one error says it.
        if self.dir_failed(dp.parent) {
            self.dir_failed[d as usize].store(true, Ordering::Release);
            return;
        }
        let res = match &self.scan.dirs[d as usize] {
            DirAction::Exists | DirAction::Followed => return,
            DirAction::Blocked(msg) => {
                if crate::scan::reported(msg) {
                    self.issue(&dp.path, msg.clone());
                }
                return;
            }
            DirAction::Replace => remove(&dp.path, false, "replace"),
            DirAction::Create => Ok(()),
        };
        let res =
            res.and_then(
                |()| match arca_fs::io_on_long_path(&dp.path, |p| fs::create_dir(p)) {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dp.path.is_dir() => {
                        Ok(())
                    }
                    r => r.map_err(|e| FsError::new("create directory", &dp.path, e)),
                },
            );
        match res {
            Ok(()) => {
                self.progress.entries.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.dir_failed[d as usize].store(true, Ordering::Release);
                self.fs_error(&e);
            }
        }
    }

    /// Finishes entry `e`, whose content is right: sets its metadata unless it is right
    /// (`meta_ok`) or the scan set it (`meta_set`, through the file it hashed).
    pub fn keep_entry(&self, e: u32, meta_ok: bool, meta_set: bool) {
        let ep = &self.plan.entries[e as usize];
        let path = &self.plan.entry_path(e);
        if !meta_ok && !meta_set {
            // What it has now, so that only what differs is changed (an append-only file
            // whose atime alone differed got "cannot change owner/mode" errors).
            let have = arca_fs::lstat(path).ok();
            // Reported; the entry is in place all the same, and its other names are made.
            for err in arca_fs::apply_metadata(path, &ep.meta.node(), self.metadata, have.as_ref())
            {
                if self.fs_error(&err) {
                    return;
                }
            }
        }
        if matches!(ep.kind, EntryKind::File(_)) {
            self.counters.files_done.fetch_add(1, Ordering::Relaxed);
            self.progress.files.fetch_add(1, Ordering::Relaxed);
        }
        self.make_links(e, true);
        self.entry_done(e);
    }

    /// Removes file entry `e` (hashed while content moved, found unusable: it has other
    /// names, or cannot be read) so that it is written anew. False when it could not be
    /// removed: the entry is then reported and finished as failed.
    pub fn remove_for_rewrite(&self, e: u32, f: u32) -> bool {
        let path = &self.plan.entry_path(e);
        match remove(path, false, "replace") {
            Ok(()) => true,
            Err(err) => {
                self.file_flags[f as usize].fetch_or(crate::ctx::FAILED, Ordering::AcqRel);
                self.fs_error(&err);
                self.make_links(e, false);
                self.entry_done(e);
                false
            }
        }
    }

    /// Settles entry `e` if it needs no content from the repository; removes what is in the
    /// way of files that do.
    /// `undeleted`: the folders `--delete` failed to remove (already reported).
    fn settle_entry(&self, e: u32, undeleted: &std::collections::HashSet<&Path>) {
        let ep = &self.plan.entries[e as usize];
        let path = &self.plan.entry_path(e);
        let action = &self.scan.entries[e as usize];
        // Looked up only for entries to replace (most entries are not).
        let reported = || undeleted.contains(path.as_path());
        if self.dir_failed(ep.parent) {
            // Its directory's error says it: a file fails silently (its writes find no
            // directory), anything else is given up.
            match ep.kind {
                EntryKind::File(f) => {
                    self.file_flags[f as usize].fetch_or(crate::ctx::FAILED, Ordering::AcqRel);
                }
                EntryKind::Link(_) => return,
                _ => {
                    self.entry_done(e);
                    return;
                }
            }
        }
        match (ep.kind, action) {
            // Made when the entry it links to is done.
            (EntryKind::Link(_), _) => {}
            // The file fails (its writes would meet the folder still there), once.
            (EntryKind::File(f), EntryAction::Replace) if reported() => {
                self.file_flags[f as usize].fetch_or(crate::ctx::FAILED, Ordering::AcqRel);
            }
            (EntryKind::File(f), EntryAction::Replace) => {
                if let Err(err) = remove(path, true, "replace") {
                    self.file_fs_error(f, &err);
                }
            }
            (EntryKind::File(_), EntryAction::Create | EntryAction::Patch) => {}
            (_, EntryAction::Skip) => {
                self.make_links(e, true);
                self.entry_done(e);
            }
            (_, EntryAction::Blocked(msg)) => {
                if crate::scan::reported(msg) {
                    self.issue(path, msg.clone());
                }
                self.make_links(e, false);
                self.entry_done(e);
            }
            (_, EntryAction::Keep { meta_ok, meta_set }) => self.keep_entry(e, *meta_ok, *meta_set),
            (_, EntryAction::Create | EntryAction::Replace | EntryAction::Patch) => {
                let res = (if *action == EntryAction::Replace {
                    if reported() {
                        self.make_links(e, false);
                        self.entry_done(e);
                        return;
                    }
                    remove(path, true, "replace")
                } else {
                    Ok(())
                })
                .and_then(|()| match ep.meta.kind {
                    NodeKind::Symlink => arca_fs::create_symlink(path, &ep.meta.node()),
                    _ => arca_fs::create_special(path, &ep.meta.node()),
                });
                let mut ok = res.is_ok();
                match res {
                    Ok(()) => {
                        for err in
                            arca_fs::apply_metadata(path, &ep.meta.node(), self.metadata, None)
                        {
                            ok = false;
                            if self.fs_error(&err) {
                                return;
                            }
                        }
                    }
                    Err(err) => {
                        if self.fs_error(&err) {
                            return;
                        }
                    }
                }
                self.make_links(e, ok);
                self.entry_done(e);
            }
        }
    }
}
