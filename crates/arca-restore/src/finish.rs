//! Finishing entries: a file gets its metadata when its last block lands, then its hard links
//! are made; each finished entry counts down its directory, and a directory gets its metadata
//! when its last child is done, which counts down its own parent.

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::Ordering;

use arca_fs::FsError;

use crate::ctx::{CREATED, DONE, FAILED, RESERVED, Shared, TOUCHED};
use crate::plan::{EntryKind, NO_PARENT};
use crate::scan::{DirAction, EntryAction};

/// Files smaller than this are not preallocated: the file system's delayed allocation already
/// places them well, and the call would cost more than it saves.
const PREALLOCATE_MIN: u64 = 64 << 10;

impl Shared<'_> {
    /// Opens file `f` for writing its content. The first opener sizes it and reserves space
    /// for its data (holes stay holes); others just open it.
    pub fn open_file(&self, f: u32) -> Result<File, FsError> {
        let plan = self.plan;
        let fp = plan.files[f as usize];
        let path = &plan.entry_path(fp.entry);
        let mode = plan.entries[fp.entry as usize].meta.mode;
        let file = arca_fs::open_for_restore(path, mode).map_err(|e| {
            // A folder or symlink of the snapshot under another case of this name.
            match self.aliases.alias(plan, fp.entry) {
                Some(other) => FsError::new("create", path, crate::aliases::taken(&other)),
                None => FsError::new("create", path, e),
            }
        })?;
        // Before anything is written, and before the file counts as touched (an unfinished
        // file is dated or removed): the file may be another's under a case-insensitive name.
        self.aliases
            .claim(plan, f, &file)
            .map_err(|e| FsError::new("create", path, e))?;
        if self.file_flags[f as usize].load(Ordering::Acquire) & CREATED == 0 {
            self.file_flags[f as usize].fetch_or(TOUCHED, Ordering::AcqRel);
            let fresh = self.scan.entries[fp.entry as usize] != EntryAction::Patch;
            // Truncating to the size a file already has still costs a journaled setattr. A
            // small new file takes its size from its blocks as they land, and finish_file
            // sets it where a hole ends the file (a tenth of the system time of restoring
            // 100,000 small files went to sizing them first).
            let sized = if fresh {
                fp.size < PREALLOCATE_MIN
            } else {
                file.metadata().is_ok_and(|m| m.len() == fp.size)
            };
            if !sized {
                file.set_len(fp.size)
                    .map_err(|e| FsError::new("set size of", path, e))?;
            }
            // A file holding all-zero chunks is sparse: reserving space would fill its holes,
            // so only files without them are reserved. Zero blocks inside chunks that also
            // hold data (holes smaller than a chunk, or at a chunk's edge) are punched out of
            // the reservation as they are written ([`RESERVED`]).
            if fresh
                && self.preallocate
                && fp.size >= PREALLOCATE_MIN
                && !self.unreserved.get(f as usize).is_some_and(|&u| u)
                && !plan
                    .file_uses(f)
                    .iter()
                    .any(|u| plan.blobs[u.blob as usize].zero)
            {
                arca_fs::preallocate(&file, 0, fp.size)
                    .map_err(|e| FsError::new("reserve space for", path, e))?;
                self.file_flags[f as usize].fetch_or(RESERVED, Ordering::AcqRel);
            }
            self.file_flags[f as usize].fetch_or(CREATED, Ordering::AcqRel);
        }
        Ok(file)
    }

    /// Dates every file this restore wrote into but did not finish (it failed, or the restore
    /// stopped: disk full, Ctrl-C) before its snapshot time: 1970, or a second before the
    /// snapshot's mtime when that is 1970 or earlier. Such a file has its full size and the
    /// time of the write, so a rerun with `--overwrite if-newer` took it for newer than the
    /// snapshot and kept it, wrong; now every mode looks at it again. A file that cannot be
    /// dated so (the file system cannot go that far back) is removed, so the rerun writes it
    /// anew. Best effort. Returns how many files were unfinished.
    pub fn date_unfinished(&self) -> u64 {
        let mut n = 0;
        for (f, flags) in self.file_flags.iter().enumerate() {
            let flags = flags.load(Ordering::Acquire);
            if flags & TOUCHED != 0 && flags & DONE == 0 {
                n += 1;
                let path = self.plan.file_path(f as u32);
                let e = self.plan.files[f].entry;
                let snap = self.plan.entries[e as usize].meta.mtime;
                let mark = unfinished_mark(snap);
                let dated = arca_fs::io_on_long_path(&path, |p| {
                    nix::sys::stat::utimensat(
                        nix::fcntl::AT_FDCWD,
                        p,
                        &nix::sys::time::TimeSpec::UTIME_OMIT,
                        &nix::sys::time::TimeSpec::new(mark as libc::time_t, 0),
                        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
                    )
                    .map_err(std::io::Error::from)?;
                    fs::symlink_metadata(p)
                });
                // Not dated, or not before the snapshot's time (clamped by the file system):
                // if-newer would keep it.
                let kept = match &dated {
                    Ok(m) => (m.mtime(), m.mtime_nsec()) >= (snap.sec, i64::from(snap.nsec)),
                    Err(_) => true,
                };
                if kept {
                    let _ = arca_fs::io_on_long_path(&path, |p| fs::remove_file(p));
                }
            }
        }
        n
    }

    /// One unit of work on file `f` is over (done or failed). The last one finishes the file;
    /// `fd` is an open descriptor of it when the caller has one.
    pub fn op_done(&self, f: u32, fd: Option<&File>) {
        self.counters.beats.fetch_add(1, Ordering::Relaxed);
        if self.file_pending[f as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finish_file(f, fd);
        }
    }

    /// Finishes file `f`: creates and sizes it if nothing was written, applies its metadata
    /// (not for a failed file, whose mtime then tells the next restore to look again), makes
    /// its hard links and counts down its directory. A metadata error is reported; it does not
    /// fail the file.
    fn finish_file(&self, f: u32, fd: Option<&File>) {
        let e = self.plan.files[f as usize].entry;
        let path = &self.plan.entry_path(e);
        let mut ok = self.file_flags[f as usize].load(Ordering::Acquire) & FAILED == 0;
        if ok && !self.stopped() {
            let opened = match fd {
                Some(_) => None,
                None => Some(self.open_file(f)),
            };
            let file = match (fd, &opened) {
                (Some(fd), _) => Ok(fd),
                (None, Some(Ok(file))) => Ok(file),
                (None, Some(Err(err))) => Err(err),
                (None, None) => return,
            };
            match file {
                Ok(file) => {
                    // What the file is now: its size (short when a hole ends it, or longer
                    // when something was there before), and the owner and mode it was
                    // created with, which need not be set again when they are right.
                    let have = file.metadata().ok();
                    let size = self.plan.files[f as usize].size;
                    let resized = match &have {
                        Some(m) if m.len() == size => Ok(()),
                        _ => file.set_len(size),
                    };
                    // Metadata that cannot be set (an attribute the file system refuses) is
                    // reported, but the content is whole: the file counts as restored, keeps
                    // the times set after the failure, and gets its other names.
                    let errs = match resized {
                        Ok(()) => arca_fs::apply_file_metadata(
                            file,
                            path,
                            &self.plan.entries[e as usize].meta.node(),
                            self.metadata,
                            have.as_ref(),
                        ),
                        Err(err) => {
                            ok = false;
                            vec![FsError::new("set size of", path, err)]
                        }
                    };
                    for err in errs {
                        if self.fs_error(&err) {
                            return;
                        }
                    }
                }
                Err(err) => {
                    ok = false;
                    if self.fs_error(err) {
                        return;
                    }
                }
            }
            if ok {
                self.file_flags[f as usize].fetch_or(DONE, Ordering::AcqRel);
                self.counters.files_done.fetch_add(1, Ordering::Relaxed);
                self.progress.files.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.make_links(e, ok);
        self.entry_done(e);
    }

    /// Makes the hard links to entry `e` (after its content and metadata); `ok` says whether
    /// the entry itself is in place.
    pub fn make_links(&self, e: u32, ok: bool) {
        let Some(links) = self.plan.links.get(&e) else {
            return;
        };
        let first = &self.plan.entry_path(e);
        for &l in links {
            let lpath = self.plan.entry_path(l);
            match &self.scan.entries[l as usize] {
                EntryAction::Skip => {}
                // Its directory could not be made (reported).
                _ if self.dir_failed(self.plan.entries[l as usize].parent) => {}
                EntryAction::Blocked(msg) if crate::scan::reported(msg) => {
                    self.issue(&lpath, msg.clone());
                }
                EntryAction::Blocked(_) => {}
                _ if !ok => self.issue(
                    &lpath,
                    format!(
                        "{}: not linked: {} was not restored",
                        arca_format::text::shown(&lpath),
                        arca_format::text::shown(first)
                    ),
                ),
                _ => {
                    let kind = &self.plan.entries[e as usize].kind;
                    if let Err(err) = link(first, kind, &lpath, || self.aliases.alias(self.plan, l))
                        && self.link_failed(err, first, l)
                    {
                        return;
                    }
                }
            }
            self.entry_done(l);
        }
    }

    /// Hard link `l` to `first` could not be made (`err`): where the file system makes no
    /// hard links (exFAT, FAT) or no more of them for this file, a regular file is written as
    /// a copy instead, with its metadata, and said so (exit 3: not one file as in the
    /// snapshot, but nothing missing). Returns whether the error was fatal.
    fn link_failed(&self, err: FsError, first: &std::path::Path, l: u32) -> bool {
        let Some(why) =
            crate::ctx::no_link(&err).filter(|_| arca_fs::lstat(first).is_ok_and(|m| m.is_file()))
        else {
            return self.fs_error(&err);
        };
        let path = &err.path;
        let copied = arca_fs::io_on_long_path(path, |p| fs::copy(first, p))
            .map_err(|e| FsError::new("copy", path, e));
        if let Err(e) = copied {
            return self.fs_error(&e);
        }
        let node = self.plan.entries[l as usize].meta.node();
        for e in arca_fs::apply_metadata(path, &node, self.metadata, None) {
            if self.fs_error(&e) {
                return true;
            }
        }
        self.issue(
            path,
            format!(
                "{}: written as a copy of {}: {why} (a change to one will not show in the other)",
                arca_format::text::shown(path),
                arca_format::text::shown(first),
            ),
        );
        false
    }

    /// Entry `e` is complete (or given up on): its directory may now be complete too.
    pub fn entry_done(&self, e: u32) {
        self.progress.entries.fetch_add(1, Ordering::Relaxed);
        self.child_done(self.plan.entries[e as usize].parent);
    }

    /// One child of directory `d` is complete; the last one finishes the directory, and so on
    /// upwards.
    pub fn child_done(&self, mut d: u32) {
        loop {
            if self.dir_pending[d as usize].fetch_sub(1, Ordering::AcqRel) != 1 {
                return;
            }
            self.dir_complete(d);
            d = self.plan.dirs[d as usize].parent;
            if d == NO_PARENT {
                return;
            }
        }
    }

    /// Applies a directory's metadata once everything inside is done.
    pub fn dir_complete(&self, d: u32) {
        let dp = &self.plan.dirs[d as usize];
        let Some(meta) = &dp.meta else { return };
        let node = &meta.node();
        // A folder restored through a symlink of the target is not the snapshot's to date.
        if matches!(
            self.scan.dirs[d as usize],
            DirAction::Blocked(_) | DirAction::Followed
        ) || self.dir_failed(d)
            || self.stopped()
        {
            return;
        }
        let exists = self.scan.dirs[d as usize] == DirAction::Exists;
        let have = exists.then(|| arca_fs::lstat(&dp.path).ok()).flatten();
        // A folder the scan found with the snapshot's metadata still has its xattrs: the
        // restore sets a folder's xattrs only here, so only what writing inside it changes
        // (its times) is looked at again. (Listing them again cost one llistxattr by full
        // path per folder on a restore with nothing to do.)
        let xattrs_right = exists && !self.scan.dir_meta_wrong[d as usize];
        if have.as_ref().is_some_and(|m| {
            arca_fs::stat_matches(&m.into(), node, self.metadata)
                && (xattrs_right || arca_fs::xattrs_match(&dp.path, node, self.metadata))
        }) {
            return;
        }
        for err in arca_fs::apply_metadata(&dp.path, node, self.metadata, have.as_ref()) {
            if self.fs_error(&err) {
                return;
            }
        }
    }
}

/// Makes `path` a hard link to `first`, unless it already is one; replaces a different
/// non-directory entry in the way, unless that is another name's on a case-insensitive target
/// (`alias` finds it). Refuses when `first` is not of its snapshot entry's `kind` (a regular
/// file, or a symlink or FIFO, which Linux hard-links too).
fn link(
    first: &std::path::Path,
    kind: &EntryKind,
    path: &std::path::Path,
    alias: impl FnOnce() -> Option<std::path::PathBuf>,
) -> Result<(), FsError> {
    let target = arca_fs::lstat(first).map_err(|e| FsError::new("stat", first, e))?;
    // The first name left as it was (`--overwrite never` or `if-newer` kept a symlink, a
    // FIFO or a folder there): linking to it made this name that symlink or FIFO.
    let fits = match kind {
        EntryKind::Symlink => target.is_symlink(),
        EntryKind::Special => !(target.is_file() || target.is_dir() || target.is_symlink()),
        _ => target.is_file(),
    };
    if !fits {
        let what = if target.is_dir() {
            "a directory"
        } else if target.is_symlink() {
            "a symlink"
        } else {
            "not a regular file"
        };
        return Err(FsError::new(
            "link",
            path,
            std::io::Error::other(format!(
                "not linked: {} is {what}, left as it was",
                arca_format::text::shown(first)
            )),
        ));
    }
    let existing = arca_fs::lstat(path);
    // The name is another entry's of the snapshot on this file system (`e` for `E`, a name
    // of the same file there): the link is not made (it looked made, and was counted).
    if existing.is_ok()
        && let Some(other) = alias()
    {
        return Err(FsError::new("link", path, crate::aliases::taken(&other)));
    }
    match existing {
        Ok(m) if m.dev() == target.dev() && m.ino() == target.ino() => return Ok(()),
        Ok(m) if m.is_dir() => {
            return Err(FsError::new(
                "link",
                path,
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a directory is in the way",
                ),
            ));
        }
        Ok(_) => arca_fs::io_on_long_path(path, |p| fs::remove_file(p))
            .map_err(|e| FsError::new("replace", path, e))?,
        Err(_) => {}
    }
    // Both names reached as every path of the target is (long ones through short names,
    // and never through a symlink of the target: a file outside it is not linked in).
    let linked = arca_fs::io_on_long_path(first, |f| {
        arca_fs::io_on_long_path(path, |p| fs::hard_link(f, p))
    });
    linked.map_err(|e| FsError::new("link", path, e))
}

/// The modification time an unfinished file gets: 1970, or a second before the snapshot's
/// mtime when that is not after 1970 (a file dated 1960, or 0 by a reproducible build).
fn unfinished_mark(snap: arca_format::Timespec) -> i64 {
    if snap.sec > 0 {
        0
    } else {
        snap.sec.saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    use super::link;
    use crate::plan::EntryKind;

    /// A name the target's file system takes for another entry's (case-insensitive) is not
    /// removed to make the link: that removed the other entry's file (hunt 15).
    #[test]
    fn a_link_never_replaces_another_names_file() {
        let tmp = tempfile::tempdir().unwrap();
        let (first, path) = (tmp.path().join("first"), tmp.path().join("Other"));
        std::fs::write(&first, b"first").unwrap();
        std::fs::write(&path, b"another entry's").unwrap();
        let err = link(&first, &EntryKind::File(0), &path, || {
            Some(PathBuf::from("/t/other"))
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("takes this name for /t/other"),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"another entry's");
        // Not an alias: replaced by the link.
        link(&first, &EntryKind::File(0), &path, || None).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
    }

    /// Symlinks and FIFOs are hard-linked as Linux lets them be; a first name of another
    /// kind than its entry's (kept by `--overwrite never`) is still refused.
    #[test]
    fn symlinks_and_fifos_are_linked_when_the_entry_is_one() {
        let tmp = tempfile::tempdir().unwrap();
        let sym = tmp.path().join("sym");
        std::os::unix::fs::symlink("nowhere", &sym).unwrap();
        let fifo = tmp.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for (first, kind) in [(&sym, EntryKind::Symlink), (&fifo, EntryKind::Special)] {
            let other = tmp.path().join("second");
            link(first, &kind, &other, || None).unwrap();
            let (a, b) = (
                std::fs::symlink_metadata(first).unwrap(),
                std::fs::symlink_metadata(&other).unwrap(),
            );
            assert_eq!(a.ino(), b.ino());
            std::fs::remove_file(&other).unwrap();
        }
        let err = link(&sym, &EntryKind::File(0), &tmp.path().join("x"), || None).unwrap_err();
        assert!(err.to_string().contains("is a symlink"), "{err}");
    }
}
