//! Restoring a snapshot under a target directory: every backed-up absolute path lands at
//! `target/<path>`. Directories are created first, file content is written at its offsets
//! with zero blocks left as holes, file metadata follows the content, and a directory's
//! metadata is applied after all its children.
//!
//! A failing entry is reported and the rest restored; a full disk or an unusable target stops
//! the restore. Memory does not grow with data size: one tree per directory level and one
//! blob at a time are held.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arca_format::{BlobKind, Id, Node, NodeKind, Snapshot};
use arca_fs::pattern::{PathMatcher, PatternError};
use arca_fs::{MetadataOptions, apply_metadata, create_special, create_symlink, write_sparse};
use arca_repo::{Index, RepoError, Repository};

/// What to restore and how.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Directory under which the snapshot's absolute paths are created.
    pub target: PathBuf,
    /// Restore only paths matching these patterns (and what is inside them).
    pub includes: Vec<String>,
    /// Skip paths matching these patterns (and what is inside them).
    pub excludes: Vec<String>,
    /// Metadata to apply.
    pub metadata: MetadataOptions,
}

/// An entry that could not be restored (fully).
#[derive(Debug, Clone)]
pub struct RestoreIssue {
    /// Path in the target.
    pub path: PathBuf,
    /// What failed.
    pub message: String,
}

impl std::fmt::Display for RestoreIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Live counters for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    /// Entries restored.
    pub entries: AtomicU64,
    /// File bytes restored.
    pub bytes: AtomicU64,
}

/// Receives per-entry problems as they happen.
pub trait Observer: Sync {
    /// An entry failed.
    fn issue(&self, issue: &RestoreIssue);
}

impl<F: Fn(&RestoreIssue) + Sync> Observer for F {
    fn issue(&self, issue: &RestoreIssue) {
        self(issue)
    }
}

/// A restore that could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// The repository failed (reading the root tree, the index...).
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// The target directory cannot be created or written.
    #[error("target {}: {source}", path.display())]
    Target {
        /// The target.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The disk holding the target is full.
    #[error("disk full while writing {}: {source}", path.display())]
    NoSpace {
        /// File being written.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A pattern is invalid.
    #[error(transparent)]
    Pattern(#[from] PatternError),
}

/// The outcome of a restore.
#[derive(Debug, Clone, Default)]
pub struct RestoreReport {
    /// Regular files restored.
    pub files: u64,
    /// Directories created.
    pub dirs: u64,
    /// Symlinks, FIFOs, devices and sockets created.
    pub others: u64,
    /// Hard links made.
    pub hardlinks: u64,
    /// File bytes restored (holes included).
    pub bytes: u64,
    /// Bytes actually written (holes excluded).
    pub bytes_written: u64,
    /// Entries that failed.
    pub issues: Vec<RestoreIssue>,
    /// Seconds taken.
    pub duration_seconds: f64,
}

struct DirFrame {
    dest: PathBuf,
    node: Node,
    created: bool,
}

struct Restorer<'a> {
    repo: &'a Repository,
    index: &'a Index,
    opts: &'a RestoreOptions,
    includes: Option<PathMatcher>,
    excludes: Option<PathMatcher>,
    progress: &'a Progress,
    observer: &'a dyn Observer,
    report: RestoreReport,
    links: HashMap<(u64, u64), PathBuf>,
    stack: Vec<DirFrame>,
    last_blob: Option<(Id, Vec<u8>)>,
}

/// Restores `snapshot` as described by `opts`.
pub fn restore(
    repo: &Repository,
    index: &Index,
    snapshot: &Snapshot,
    opts: &RestoreOptions,
    progress: &Progress,
    observer: &dyn Observer,
) -> Result<RestoreReport, RestoreError> {
    let started = Instant::now();
    let matcher = |p: &[String]| -> Result<Option<PathMatcher>, PatternError> {
        if p.is_empty() {
            Ok(None)
        } else {
            PathMatcher::new(p).map(Some)
        }
    };
    fs::create_dir_all(&opts.target).map_err(|source| RestoreError::Target {
        path: opts.target.clone(),
        source,
    })?;
    let mut r = Restorer {
        repo,
        index,
        opts,
        includes: matcher(&opts.includes)?,
        excludes: matcher(&opts.excludes)?,
        progress,
        observer,
        report: RestoreReport::default(),
        links: HashMap::new(),
        stack: vec![],
        last_blob: None,
    };
    let root = repo.load_tree(index, &snapshot.tree)?;
    r.restore_dir(&root, Path::new("/"), &opts.target, r.includes.is_none())?;
    let mut report = r.report;
    report.duration_seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn join(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(std::ffi::OsStr::from_bytes(name))
}

impl Restorer<'_> {
    fn issue(&mut self, path: &Path, message: String) {
        let i = RestoreIssue {
            path: path.to_path_buf(),
            message,
        };
        self.observer.issue(&i);
        self.report.issues.push(i);
    }

    fn fs_issue(&mut self, e: &arca_fs::FsError) -> Result<(), RestoreError> {
        if e.is_no_space() {
            return Err(RestoreError::NoSpace {
                path: e.path.clone(),
                source: io::Error::from_raw_os_error(libc::ENOSPC),
            });
        }
        self.issue(&e.path, e.to_string());
        Ok(())
    }

    /// Creates the directories on the stack that are not created yet.
    fn ensure_parents(&mut self) -> Result<bool, RestoreError> {
        for i in 0..self.stack.len() {
            if self.stack[i].created {
                continue;
            }
            let dest = self.stack[i].dest.clone();
            if let Err(e) = make_dir(&dest) {
                self.fs_issue(&e)?;
                return Ok(false);
            }
            self.stack[i].created = true;
            self.report.dirs += 1;
        }
        Ok(true)
    }

    fn restore_dir(
        &mut self,
        tree: &arca_format::Tree,
        snap_dir: &Path,
        dest_dir: &Path,
        selected: bool,
    ) -> Result<(), RestoreError> {
        for node in &tree.nodes {
            let snap_path = join(snap_dir, &node.name);
            let dest = join(dest_dir, &node.name);
            if self
                .excludes
                .as_ref()
                .is_some_and(|x| x.matches(&snap_path))
            {
                continue;
            }
            let included = selected || self.includes.as_ref().is_none_or(|m| m.matches(&snap_path));
            if node.is_dir() {
                if !included
                    && !self
                        .includes
                        .as_ref()
                        .is_some_and(|m| m.may_match_below(&snap_path))
                {
                    continue;
                }
                let Some(sub_id) = node.subtree else { continue };
                let sub = match self.repo.load_tree(self.index, &sub_id) {
                    Ok(t) => t,
                    Err(e) => {
                        if included && self.ensure_parents()? {
                            // Keep the directory itself even when its listing is lost.
                            let _ = make_dir(&dest);
                        }
                        self.issue(
                            &dest,
                            format!("{}: cannot read directory listing: {e}", dest.display()),
                        );
                        continue;
                    }
                };
                self.stack.push(DirFrame {
                    dest: dest.clone(),
                    node: node.clone(),
                    created: false,
                });
                if included && !self.ensure_parents()? {
                    self.stack.pop();
                    continue;
                }
                let res = self.restore_dir(&sub, &snap_path, &dest, included);
                let frame = self.stack.pop();
                res?;
                if let Some(f) = frame.filter(|f| f.created) {
                    for e in apply_metadata(&f.dest, &f.node, self.opts.metadata) {
                        self.fs_issue(&e)?;
                    }
                }
                continue;
            }
            if !included || !self.ensure_parents()? {
                continue;
            }
            self.restore_entry(node, &dest)?;
        }
        Ok(())
    }

    fn restore_entry(&mut self, node: &Node, dest: &Path) -> Result<(), RestoreError> {
        if let Err(e) = clear(dest) {
            return self.fs_issue(&e);
        }
        let link_key = (node.nlink > 1).then_some((node.dev, node.inode));
        if let Some(first) = link_key.and_then(|k| self.links.get(&k)).cloned() {
            match fs::hard_link(&first, dest) {
                Ok(()) => {
                    self.report.hardlinks += 1;
                    self.progress.entries.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(e) => {
                    // Fall back to restoring a separate copy.
                    self.issue(
                        dest,
                        format!(
                            "{}: cannot hard-link to {}: {e}; restoring a copy",
                            dest.display(),
                            first.display()
                        ),
                    );
                }
            }
        }
        let ok = match node.kind() {
            NodeKind::File => self.restore_file(node, dest)?,
            NodeKind::Symlink => match create_symlink(dest, node) {
                Ok(()) => true,
                Err(e) => {
                    self.fs_issue(&e)?;
                    false
                }
            },
            NodeKind::Dir => false,
            _ => match create_special(dest, node) {
                Ok(()) => true,
                Err(e) => {
                    self.fs_issue(&e)?;
                    false
                }
            },
        };
        if !ok {
            return Ok(());
        }
        match node.kind() {
            NodeKind::File => self.report.files += 1,
            _ => self.report.others += 1,
        }
        self.progress.entries.fetch_add(1, Ordering::Relaxed);
        for e in apply_metadata(dest, node, self.opts.metadata) {
            self.fs_issue(&e)?;
        }
        if let Some(k) = link_key {
            self.links.insert(k, dest.to_path_buf());
        }
        Ok(())
    }

    fn blob(&mut self, id: &Id) -> Result<&[u8], RepoError> {
        if self.last_blob.as_ref().is_none_or(|(last, _)| last != id) {
            let data = self.repo.read_blob(self.index, BlobKind::Data, id)?;
            self.last_blob = Some((*id, data));
        }
        Ok(self
            .last_blob
            .as_ref()
            .map(|(_, d)| d.as_slice())
            .unwrap_or(&[]))
    }

    /// Writes a file's content; false (with an issue recorded) when it failed.
    fn restore_file(&mut self, node: &Node, dest: &Path) -> Result<bool, RestoreError> {
        let file = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dest)
        {
            Ok(f) => f,
            Err(e) => {
                self.fs_issue(&arca_fs::FsError::new("create", dest, e))?;
                return Ok(false);
            }
        };
        if let Err(e) = file.set_len(node.size) {
            self.fs_issue(&arca_fs::FsError::new("size", dest, e))?;
            return Ok(false);
        }
        let mut offset = 0u64;
        for c in &node.content {
            let written = match self.blob(&c.id) {
                Ok(data) => write_sparse(&file, offset, data).map(|w| (w, data.len() as u64)),
                Err(e) => {
                    self.issue(
                        dest,
                        format!("{}: content at offset {offset} lost: {e}", dest.display()),
                    );
                    return Ok(false);
                }
            };
            match written {
                Ok((w, len)) => {
                    self.report.bytes_written += w;
                    self.report.bytes += len;
                    self.progress.bytes.fetch_add(len, Ordering::Relaxed);
                    offset += len;
                }
                Err(e) => {
                    self.fs_issue(&arca_fs::FsError::new("write", dest, e))?;
                    return Ok(false);
                }
            }
        }
        drop(file);
        Ok(true)
    }
}

/// Removes whatever non-directory entry is at `p`, so the restored entry replaces it and no
/// write follows a symlink out of the target.
fn clear(p: &Path) -> Result<(), arca_fs::FsError> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Err(arca_fs::FsError::new(
            "replace",
            p,
            io::Error::new(io::ErrorKind::AlreadyExists, "a directory is in the way"),
        )),
        Ok(_) => fs::remove_file(p).map_err(|e| arca_fs::FsError::new("replace", p, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(arca_fs::FsError::new("stat", p, e)),
    }
}

/// Creates a directory, replacing a non-directory in the way; an existing directory is kept.
fn make_dir(p: &Path) -> Result<(), arca_fs::FsError> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => fs::remove_file(p).map_err(|e| arca_fs::FsError::new("replace", p, e))?,
        Err(_) => {}
    }
    fs::create_dir(p).map_err(|e| arca_fs::FsError::new("create directory", p, e))
}
