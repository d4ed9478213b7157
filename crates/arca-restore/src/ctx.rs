//! State every stage of a running restore shares: the plan and the scan (read-only), per-file
//! and per-directory completion counters, the counters behind progress and the profile, the
//! issues found, and the one stop flag that any fatal error or Ctrl-C raises.

use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

use arca_fs::{FsError, MetadataOptions};

use crate::aliases::Aliases;
use crate::options::Resolved;
use crate::plan::{NO_PARENT, Plan};
use crate::scan::Scan;
use crate::{Observer, Progress, RestoreError, RestoreIssue};

/// File flag: created (sized, preallocated) by this restore.
pub(crate) const CREATED: u8 = 1;
/// File flag: some content could not be restored.
pub(crate) const FAILED: u8 = 2;
/// File flag: its space was reserved (preallocated), so zero blocks skipped when writing are
/// punched out again (or they would stay allocated zeros instead of holes).
pub(crate) const RESERVED: u8 = 4;
/// File flag: finished, its metadata set.
pub(crate) const DONE: u8 = 8;
/// File flag: opened for writing by this restore (created, or being patched).
pub(crate) const TOUCHED: u8 = 16;

/// Run-wide counters (for the report, the profile and the watchdog).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Bytes read from the repository for data.
    pub fetched: AtomicU64,
    /// Ranged reads of data.
    pub requests: AtomicU64,
    /// Reads retried after a transient failure.
    pub retries: AtomicU64,
    /// Sealed bytes of the blobs those reads were for.
    pub fetched_useful: AtomicU64,
    /// Blocks decoded (decrypted, decompressed, verified).
    pub decoded: AtomicU64,
    /// Blocks taken from another copy because the one read was damaged or missing.
    pub other_copies: AtomicU64,
    /// File bytes of data blocks placed by writes from memory (their zero pages, left as
    /// holes, included: the plan counts holes as all-zero blocks, and cannot see inside one).
    pub written: AtomicU64,
    /// Blocks and bytes copied from the target itself instead of fetched, or written again
    /// from data a job already placed (see `place::land`).
    pub copied_blocks: AtomicU64,
    pub copied: AtomicU64,
    /// Blocks and bytes taken from `--reuse-from` trees.
    pub reused_blocks: AtomicU64,
    pub reused: AtomicU64,
    /// Of those, bytes written around the page cache (`O_DIRECT`).
    pub direct: AtomicU64,
    /// Bytes of all-zero blocks left as holes or punched.
    pub holes: AtomicU64,
    /// Bytes of pack ranges hinted to the backend ahead of the fetchers.
    pub hinted: AtomicU64,
    /// Files completed (content and metadata).
    pub files_done: AtomicU64,
    /// Any completed unit of work (the watchdog's heartbeat).
    pub beats: AtomicU64,
    /// Entries `--delete` could not remove.
    pub deletes_failed: AtomicU64,
}

/// Shared state of one restore.
pub(crate) struct Shared<'a> {
    pub plan: &'a Plan,
    pub scan: &'a Scan,
    /// Files whose names a case-insensitive target takes for one (set after `new`).
    pub aliases: Aliases,
    pub metadata: MetadataOptions,
    pub preallocate: bool,
    /// Large blocks of new files are written with `O_DIRECT` (cleared when the target's file
    /// system refuses it).
    pub direct: AtomicBool,
    /// The target's file system shares extents: later uses of a block are copied (reflinks)
    /// rather than written again.
    pub reflink: bool,
    /// Files not to reserve space for although they are large: where extents are shared,
    /// those with a block some other use shares (their space comes from reflinks, and a
    /// reservation of their whole size made a restore that fits fail for want of space).
    pub unreserved: Vec<bool>,
    pub file_pending: Vec<AtomicU32>,
    pub file_flags: Vec<AtomicU8>,
    pub dir_pending: Vec<AtomicU32>,
    /// Directories that could not be made (reported once): what lies inside fails silently.
    pub dir_failed: Vec<AtomicBool>,
    pub counters: Counters,
    pub progress: &'a Progress,
    observer: &'a dyn Observer,
    issues: Mutex<Vec<RestoreIssue>>,
    /// Entries whose owner the file system refused ([`Self::owner_refused`]).
    owners_refused: AtomicU64,
    stop: AtomicBool,
    fatal: Mutex<Option<RestoreError>>,
    cancel: Option<&'a AtomicBool>,
}

impl<'a> Shared<'a> {
    pub fn new(
        plan: &'a Plan,
        scan: &'a Scan,
        metadata: MetadataOptions,
        tuning: &Resolved,
        progress: &'a Progress,
        observer: &'a dyn Observer,
        cancel: Option<&'a AtomicBool>,
    ) -> Self {
        let reflink = plan
            .dirs
            .first()
            .is_some_and(|d| arca_fs::shares_extents(&d.path));
        Self {
            plan,
            scan,
            aliases: Aliases::default(),
            metadata,
            preallocate: tuning.preallocate,
            direct: AtomicBool::new(tuning.direct_writes > 0),
            reflink,
            unreserved: if reflink && tuning.preallocate {
                sharing_files(plan)
            } else {
                vec![]
            },
            file_pending: plan.files.iter().map(|_| AtomicU32::new(0)).collect(),
            file_flags: plan.files.iter().map(|_| AtomicU8::new(0)).collect(),
            dir_pending: plan
                .dirs
                .iter()
                .map(|d| AtomicU32::new(d.children))
                .collect(),
            dir_failed: plan.dirs.iter().map(|_| AtomicBool::new(false)).collect(),
            counters: Counters::default(),
            progress,
            observer,
            issues: Mutex::new(vec![]),
            owners_refused: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            fatal: Mutex::new(None),
            cancel,
        }
    }

    /// Whether every stage should stop (a fatal error, or Ctrl-C).
    pub fn stopped(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return true;
        }
        if self.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            self.fail(RestoreError::Interrupted);
            return true;
        }
        false
    }

    /// The stop flag, for helpers that only poll it.
    pub fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }

    /// Stops the restore with `e` (the first fatal error wins).
    pub fn fail(&self, e: RestoreError) {
        let mut f = self.fatal.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(e);
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    /// The fatal error, if any.
    pub fn take_fatal(&self) -> Option<RestoreError> {
        self.fatal.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Records a problem with one entry.
    pub fn issue(&self, path: &Path, message: String) {
        let i = RestoreIssue {
            path: path.to_path_buf(),
            message,
        };
        self.observer.issue(&i);
        self.issues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(i);
    }

    /// Writes `data` at `offset` of file `f` (fresh: the range reads as zeros), leaving its
    /// aligned zero blocks holes. Returns the bytes written.
    pub fn write_fresh(
        &self,
        f: u32,
        file: &std::fs::File,
        offset: u64,
        data: &[u8],
    ) -> io::Result<u64> {
        if self.reserved(f) {
            arca_fs::write_sparse_reserved(file, offset, data)
        } else {
            arca_fs::write_sparse(file, offset, data)
        }
    }

    /// Whether file `f`'s space was reserved ([`RESERVED`]).
    pub fn reserved(&self, f: u32) -> bool {
        self.file_flags[f as usize].load(Ordering::Relaxed) & RESERVED != 0
    }

    /// The problems recorded so far.
    pub fn take_issues(&self) -> Vec<RestoreIssue> {
        std::mem::take(&mut *self.issues.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A file-system error on an entry: fatal when the disk is full or the target is gone
    /// or read-only, otherwise an issue of that entry. Returns whether it was fatal.
    pub fn fs_error(&self, e: &FsError) -> bool {
        self.fatal_fs_error(e) || {
            if !self.owner_refused(e) {
                self.issue(&e.path, entry_error(e));
            }
            false
        }
    }

    /// Whether `e` is an owner the target's file system refuses even to root (a non-root
    /// restore does not report owners it may not set): on FAT, exFAT or NTFS, which keep
    /// none, and on NFS with root_squash or SMB, every file but root's meets it. The first
    /// is an issue, saying why; the others are counted ([`Self::owners_refused`]), not
    /// listed one by one.
    fn owner_refused(&self, e: &FsError) -> bool {
        if e.op != arca_fs::OWNER_OP
            || e.source.raw_os_error() != Some(libc::EPERM)
            || !arca_fs::may_refuse_unix_metadata(&e.path)
        {
            return false;
        }
        if self.owners_refused.fetch_add(1, Ordering::Relaxed) == 0 {
            self.issue(
                &e.path,
                format!(
                    "{e} (this file system does not let even root set owners: FAT, exFAT and \
                     NTFS keep none, NFS with root_squash and SMB mounts refuse them; further \
                     entries whose owner it refuses are counted, not listed)"
                ),
            );
        }
        true
    }

    /// Entries whose owner the file system refused ([`Self::owner_refused`]).
    pub fn owners_refused(&self) -> u64 {
        self.owners_refused.load(Ordering::Relaxed)
    }

    /// A file-system error writing file `f`: fatal as [`Self::fs_error`], otherwise the
    /// file's failure, reported once however many of its blocks meet it. Returns whether it
    /// was fatal.
    pub fn file_fs_error(&self, f: u32, e: &FsError) -> bool {
        self.fatal_fs_error(e) || {
            self.fail_file(f, || entry_error(e));
            false
        }
    }

    /// Stops the restore if `e` is fatal: the disk is full, or the target is gone, replaced
    /// or read-only. Returns whether it was.
    fn fatal_fs_error(&self, e: &FsError) -> bool {
        match e.source.raw_os_error() {
            // ext4 and btrfs say "no space" for an attribute larger than they hold: that
            // entry's problem, not a full disk (which the next write finds).
            Some(libc::ENOSPC | libc::EDQUOT) if !e.is_xattr() => {
                self.fail(RestoreError::NoSpace {
                    op: e.op,
                    path: e.path.clone(),
                    source: io::Error::from_raw_os_error(libc::ENOSPC),
                    unfinished: 0,
                });
                true
            }
            // The target's file system is read-only: nothing can be restored. A read-only
            // mount inside the target fails only what lies on it (it stopped the restore,
            // leaving the rest of the target unwritten).
            Some(libc::EROFS) if target_read_only(&self.plan.dirs[0].path) => {
                self.fail(RestoreError::Target {
                    path: self.plan.dirs[0].path.clone(),
                    source: io::Error::from_raw_os_error(libc::EROFS),
                });
                true
            }
            // Missing (or "not a directory") because the target itself is gone or was
            // replaced by a file: nothing more can be restored.
            Some(libc::ENOENT | libc::ENOTDIR) if !self.plan.dirs[0].path.is_dir() => {
                let gone = if self.plan.dirs[0].path.symlink_metadata().is_ok() {
                    "the target directory was replaced during the restore: it is no longer a directory"
                } else {
                    "the target directory disappeared during the restore"
                };
                self.fail(RestoreError::Target {
                    path: self.plan.dirs[0].path.clone(),
                    source: io::Error::new(io::ErrorKind::NotFound, gone),
                });
                true
            }
            _ => false,
        }
    }

    /// Whether directory `d` could not be made (nor, then, anything inside it).
    pub fn dir_failed(&self, d: u32) -> bool {
        d != NO_PARENT && self.dir_failed[d as usize].load(Ordering::Acquire)
    }

    /// Marks file `f` as failed, reporting `message` the first time.
    pub fn fail_file(&self, f: u32, message: impl FnOnce() -> String) {
        let prev = self.file_flags[f as usize].fetch_or(FAILED, Ordering::AcqRel);
        if prev & FAILED == 0 {
            self.issue(&self.plan.file_path(f), message());
        }
    }
}

/// Whether the file system holding `target` is mounted read-only (an error to stat it counts
/// as read-only: the target is in trouble).
fn target_read_only(target: &std::path::Path) -> bool {
    nix::sys::statvfs::statvfs(target).map_or(true, |s| {
        s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY)
    })
}

/// The message of an entry's file-system error, with a hint where the error misleads.
fn entry_error(e: &FsError) -> String {
    match e.source.raw_os_error() {
        Some(libc::ENOSPC | libc::E2BIG | libc::ERANGE) if e.is_xattr() => {
            format!(
                "{e} (the attribute is larger than this file system allows, or the file's room \
                 for attributes is full; its further attributes were not set)"
            )
        }
        // exFAT says "no such file", FAT and NTFS "invalid argument", for a name they do not
        // take, in a folder that is there.
        Some(libc::ENOENT | libc::EINVAL) if e.op.starts_with("create") || e.op == "link" => {
            match refused_character(&e.path) {
                Some(c) => format!(
                    "{e} (the name holds {c}, which this file system may not take in names: \
                     FAT, exFAT and NTFS refuse \" * : < > ? \\ | and control characters)"
                ),
                None => e.to_string(),
            }
        }
        Some(libc::ENOSYS | libc::EPERM | libc::EOPNOTSUPP) if e.op == "create symlink" => {
            format!("{e} (this file system makes no symlinks: FAT and exFAT have none)")
        }
        Some(libc::EIO | libc::EPERM | libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL)
            if arca_fs::SPECIAL_OPS.contains(&e.op)
                && arca_fs::may_refuse_unix_metadata(&e.path) =>
        {
            format!(
                "{e} (this file system may hold no FIFOs, sockets or device nodes: FAT, exFAT \
                 and NTFS have none)"
            )
        }
        _ if let Some(why) = no_link(e) => format!("{e} ({why})"),
        Some(libc::EILSEQ) => {
            format!("{e} (this file system stores names as Unicode, and this name is not UTF-8)")
        }
        _ => e.to_string(),
    }
}

/// Why hard link `e` could not be made, when the file system makes none (exFAT, FAT) or no
/// more for this file; `None` for any other failure.
pub(crate) fn no_link(e: &FsError) -> Option<&'static str> {
    if e.op != "link" {
        return None;
    }
    match e.source.raw_os_error() {
        Some(libc::EPERM | libc::EOPNOTSUPP) => {
            Some("this file system makes no hard links: FAT and exFAT have none")
        }
        Some(libc::EMLINK) => Some("the file has as many names as this file system allows"),
        _ => None,
    }
}

/// The first character of `path`'s name that FAT, exFAT and NTFS refuse in names, shown,
/// when the folder holding it is there (else the folder is what is missing).
fn refused_character(path: &std::path::Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    if !path.parent().is_some_and(std::path::Path::is_dir) {
        return None;
    }
    let name = path.file_name()?.as_bytes();
    let c = *name
        .iter()
        .find(|&&c| c < 0x20 || b"\"*:<>?\\|".contains(&c))?;
    Some(if c < 0x20 {
        format!("the control character \\x{c:02x}")
    } else {
        format!("'{}'", char::from(c))
    })
}

/// For every file of `plan`, whether one of its blocks has another use (in it or elsewhere).
fn sharing_files(plan: &Plan) -> Vec<bool> {
    let mut uses = vec![0u8; plan.blobs.len()];
    for u in &plan.uses {
        let n = &mut uses[u.blob as usize];
        *n = n.saturating_add(1);
    }
    (0..plan.files.len() as u32)
        .map(|f| plan.file_uses(f).iter().any(|u| uses[u.blob as usize] > 1))
        .collect()
}
