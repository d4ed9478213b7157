//! Paths longer than the kernel takes in one system call (PATH_MAX, 4096 bytes): the folder
//! holding the entry is opened a few components at a time and the entry is named through
//! `/proc/self/fd`, so a backup reaches every entry however deep it lies.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, open, openat};

use crate::FsError;
use nix::sys::stat::Mode;

/// Each step opens at most this many bytes of path (well below PATH_MAX).
pub(crate) const STEP: usize = 2048;

/// Whether `e` says that a path was too long for the kernel.
pub fn is_too_long(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENAMETOOLONG)
}

/// A short name for a long path: the folder holding it, opened step by step (and kept open
/// while this lives), and the path through `/proc/self/fd`.
pub struct ShortPath {
    _dir: OwnedFd,
    path: PathBuf,
}

impl ShortPath {
    /// Opens the folders of `path` but its last component (from `/`, or from the current
    /// folder for a relative path), a few at a time, without following a symlink at the end
    /// of a step.
    pub fn new(path: &Path) -> io::Result<Self> {
        let bytes = path.as_os_str().as_bytes();
        let Some(cut) = bytes.iter().rposition(|b| *b == b'/') else {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        };
        let (dir, last) = (&bytes[..cut], &bytes[cut + 1..]);
        if last.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
        let errno = |e: nix::Error| io::Error::from_raw_os_error(e as i32);
        let start = if bytes.starts_with(b"/") { "/" } else { "." };
        let mut fd = open(start, flags, Mode::empty()).map_err(errno)?;
        let mut rest = dir.strip_prefix(b"/").unwrap_or(dir);
        while !rest.is_empty() {
            // Up to STEP bytes, ending at a component's end.
            let mut end = rest.len().min(STEP);
            if end < rest.len() {
                end = rest[..end]
                    .iter()
                    .rposition(|b| *b == b'/')
                    .ok_or_else(|| io::Error::from_raw_os_error(libc::ENAMETOOLONG))?;
            }
            let step = OsStr::from_bytes(&rest[..end]);
            fd = openat(&fd, step, flags, Mode::empty()).map_err(errno)?;
            rest = rest[end..].strip_prefix(b"/").unwrap_or(&rest[end..]);
        }
        let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .join(OsStr::from_bytes(last));
        Ok(Self { _dir: fd, path })
    }

    /// The short name, valid while `self` lives.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Runs `op` on `path`, and when the path is too long for the kernel, again on its
/// [`ShortPath`]. `too_long` tells the error that asks for it.
pub fn on_long_path<T, E>(
    path: &Path,
    too_long: impl Fn(&E) -> bool,
    mut op: impl FnMut(&Path) -> Result<T, E>,
) -> Result<T, E> {
    match op(path) {
        Err(e) if too_long(&e) => match ShortPath::new(path) {
            Ok(short) => op(short.path()),
            Err(_) => Err(e),
        },
        r => r,
    }
}

/// `lstat` (`symlink_metadata`) of a path of any length.
pub fn lstat(path: &Path) -> io::Result<std::fs::Metadata> {
    io_on_long_path(path, |p| std::fs::symlink_metadata(p))
}

/// [`on_long_path`] for operations that fail with an [`io::Error`], and [`FsError`]s that
/// name `path`, not its short name.
pub(crate) fn fs_on_long_path<T>(
    path: &Path,
    op: impl FnMut(&Path) -> Result<T, FsError>,
) -> Result<T, FsError> {
    match crate::beneath::target_of(path) {
        Some(b) => b.run(path, |e| FsError::new("reach", path, e), op),
        None => on_long_path(path, |e: &FsError| is_too_long(&e.source), op),
    }
    .map_err(renamed(path))
}

/// Gives an error about a short name the path it stands for.
pub(crate) fn renamed(path: &Path) -> impl Fn(FsError) -> FsError + '_ {
    move |mut e| {
        e.path = path.to_path_buf();
        e
    }
}

/// [`on_long_path`] for operations that fail with an [`io::Error`]; an operation that finds
/// no file descriptor left is tried again after short pauses ([`crate::fds::patiently`]).
pub fn io_on_long_path<T>(
    path: &Path,
    mut op: impl FnMut(&Path) -> io::Result<T>,
) -> io::Result<T> {
    crate::fds::patiently(|| match crate::beneath::target_of(path) {
        // Below a restore's target: its folder opened beneath the target (beneath.rs).
        Some(b) => b.run(path, |e| e, &mut op),
        None => on_long_path(path, is_too_long, &mut op),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn entries_below_path_max_are_reached() {
        let tmp = tempfile::tempdir().unwrap();
        let mut deep = tmp.path().to_path_buf();
        // 40 levels of 100-byte names: about 4 KiB below the temporary folder.
        let level = "d".repeat(100);
        let mut rel = PathBuf::new();
        for _ in 0..45 {
            rel.push(&level);
        }
        // Created step by step through the short names themselves.
        for c in rel.components() {
            deep.push(c);
            io_on_long_path(&deep, |p| std::fs::create_dir(p)).unwrap();
        }
        let file = deep.join("leaf");
        assert!(file.as_os_str().len() > 4096);
        assert!(is_too_long(&std::fs::write(&file, b"x").unwrap_err()));
        io_on_long_path(&file, |p| std::fs::write(p, b"deep")).unwrap();
        let m = io_on_long_path(&file, |p| std::fs::symlink_metadata(p)).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(
            io_on_long_path(&file, |p| std::fs::read(p)).unwrap(),
            b"deep"
        );
        let names = io_on_long_path(&deep, crate::list_dir_names).unwrap();
        assert_eq!(names, vec![b"leaf".to_vec()]);
        // A relative long path, from the current folder up to the root and down again.
        let here = std::env::current_dir().unwrap();
        let mut rel = PathBuf::new();
        for _ in here.components().skip(1) {
            rel.push("..");
        }
        let rel = rel.join(file.strip_prefix("/").unwrap());
        assert!(rel.is_relative());
        assert_eq!(
            io_on_long_path(&rel, |p| std::fs::read(p)).unwrap(),
            b"deep"
        );
        // A short path is used as it is; a missing long one is not found.
        assert!(io_on_long_path(tmp.path(), |p| std::fs::symlink_metadata(p)).is_ok());
        let missing = deep.join("nope");
        let e = io_on_long_path(&missing, |p| std::fs::symlink_metadata(p)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        // Clean up from the bottom (remove_dir_all cannot either).
        let mut p = file;
        io_on_long_path(&p, |p| std::fs::remove_file(p)).unwrap();
        while p.pop() && p.starts_with(tmp.path()) && p != tmp.path() {
            io_on_long_path(&p, |p| std::fs::remove_dir(p)).unwrap();
        }
    }
}
