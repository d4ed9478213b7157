//! Looking at and opening entries by name inside an open directory: a scan of many files
//! walks each directory's path once instead of once per entry.
//!
//! A cold look at 100,000 files by absolute path spent a tenth of its processor time walking
//! the same ten leading path components again for every file.

use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};

use crate::errno;

/// What `lstat` says about an entry, whichever way it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Type and permission bits (`st_mode`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Names the inode has.
    pub nlink: u64,
    /// Inode number.
    pub ino: u64,
    /// Device of the file system holding it (with `ino`, which file it is).
    pub dev: u64,
    /// Device number of a device node.
    pub rdev: u64,
    /// Modification time: seconds, nanoseconds.
    pub mtime: (i64, i64),
    /// Access time: seconds, nanoseconds.
    pub atime: (i64, i64),
    /// Status change time: seconds, nanoseconds.
    pub ctime: (i64, i64),
}

impl Stat {
    fn is(&self, kind: SFlag) -> bool {
        self.mode & SFlag::S_IFMT.bits() == kind.bits()
    }
    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.is(SFlag::S_IFDIR)
    }
    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.is(SFlag::S_IFREG)
    }
    /// A symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.is(SFlag::S_IFLNK)
    }
    /// A FIFO.
    pub fn is_fifo(&self) -> bool {
        self.is(SFlag::S_IFIFO)
    }
    /// A socket.
    pub fn is_socket(&self) -> bool {
        self.is(SFlag::S_IFSOCK)
    }
    /// A character device.
    pub fn is_char_device(&self) -> bool {
        self.is(SFlag::S_IFCHR)
    }
    /// A block device.
    pub fn is_block_device(&self) -> bool {
        self.is(SFlag::S_IFBLK)
    }
}

impl From<&fs::Metadata> for Stat {
    fn from(m: &fs::Metadata) -> Self {
        Self {
            mode: m.mode(),
            uid: m.uid(),
            gid: m.gid(),
            size: m.size(),
            nlink: m.nlink(),
            ino: m.ino(),
            dev: m.dev(),
            rdev: m.rdev(),
            mtime: (m.mtime(), m.mtime_nsec()),
            atime: (m.atime(), m.atime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

impl From<FileStat> for Stat {
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)] // field widths vary by target
    fn from(s: FileStat) -> Self {
        Self {
            mode: s.st_mode as u32,
            uid: s.st_uid,
            gid: s.st_gid,
            size: u64::try_from(s.st_size).unwrap_or(0),
            nlink: s.st_nlink as u64,
            ino: s.st_ino as u64,
            dev: s.st_dev as u64,
            rdev: s.st_rdev as u64,
            mtime: (s.st_mtime as i64, s.st_mtime_nsec as i64),
            atime: (s.st_atime as i64, s.st_atime_nsec as i64),
            ctime: (s.st_ctime as i64, s.st_ctime_nsec as i64),
        }
    }
}

/// `listxattrat(2)` (Linux 6.13), numbered alike on every architecture Rust builds for.
const SYS_LISTXATTRAT: libc::c_long = 465;

/// Set once the kernel has said it has no `listxattrat`.
static NO_LISTXATTRAT: AtomicBool = AtomicBool::new(false);

/// The names in a buffer `listxattr` filled: each ends with a NUL.
fn split_names(list: &[u8]) -> Vec<OsString> {
    list.split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| OsStr::from_bytes(n).to_os_string())
        .collect()
}

/// An open directory (a path handle: it can look at and open its entries, not list them).
#[derive(Debug)]
pub struct DirHandle(pub(crate) OwnedFd);

impl DirHandle {
    /// Opens directory `path`, not following a symlink in its last component.
    pub fn open(path: &Path) -> io::Result<Self> {
        crate::io_on_long_path(path, |p| Self::open_at(nix::fcntl::AT_FDCWD, p.as_os_str()))
    }

    /// Opens directory `path`, following a symlink in its last component too.
    pub fn open_following(path: &Path) -> io::Result<Self> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        crate::io_on_long_path(path, |p| {
            nix::fcntl::openat(nix::fcntl::AT_FDCWD, p.as_os_str(), flags, Mode::empty())
                .map(Self)
                .map_err(errno)
        })
    }

    /// Opens directory `name` inside this one, not following a symlink.
    pub fn open_dir(&self, name: &[u8]) -> io::Result<Self> {
        // Out of descriptors, tried again as `open`'s are (through `io_on_long_path`): other
        // threads close theirs soon (a restore's scan of an existing target failed on
        // folders under `ulimit -n 32`).
        crate::fds::patiently(|| Self::open_at(self.0.as_fd(), OsStr::from_bytes(name)))
    }

    fn open_at(at: BorrowedFd<'_>, path: &OsStr) -> io::Result<Self> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
        nix::fcntl::openat(at, path, flags, Mode::empty())
            .map(Self)
            .map_err(errno)
    }

    /// `lstat` of entry `name`; `None` when nothing is there (or a non-directory is where
    /// the path expects a directory).
    pub fn stat(&self, name: &[u8]) -> io::Result<Option<Stat>> {
        match nix::sys::stat::fstatat(
            &self.0,
            OsStr::from_bytes(name),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(s) => Ok(Some(s.into())),
            Err(Errno::ENOENT | Errno::ENOTDIR) => Ok(None),
            Err(e) => Err(errno(e)),
        }
    }

    /// `lstat` of entry `name`, as [`Self::stat`], with a missing entry an error
    /// (`NotFound`) like any other.
    pub fn lstat(&self, name: &[u8]) -> io::Result<Stat> {
        nix::sys::stat::fstatat(
            &self.0,
            OsStr::from_bytes(name),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map(Stat::from)
        .map_err(errno)
    }

    /// A path that leads to entry `name` of this directory whatever has been renamed since
    /// it was opened (`/proc/self/fd/N/name`), for the calls that take only a path (reading
    /// an extended attribute); `None` without `/proc`.
    pub(crate) fn entry_path(&self, name: &[u8]) -> Option<std::path::PathBuf> {
        static PROC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if !*PROC.get_or_init(|| Path::new("/proc/self/fd").is_dir()) {
            return None;
        }
        let mut p = std::path::PathBuf::from(format!("/proc/self/fd/{}", self.0.as_raw_fd()));
        p.push(OsStr::from_bytes(name));
        Some(p)
    }

    /// Opens file `name` for reading without updating its access time when the process may
    /// do so; never follows a symlink, and never waits for a writer of a FIFO found there.
    pub fn open_noatime(&self, name: &[u8]) -> io::Result<File> {
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK;
        let name = OsStr::from_bytes(name);
        crate::fds::patiently(|| {
            match nix::fcntl::openat(&self.0, name, flags | OFlag::O_NOATIME, Mode::empty()) {
                Err(Errno::EPERM) => nix::fcntl::openat(&self.0, name, flags, Mode::empty()),
                r => r,
            }
            .map(File::from)
            .map_err(errno)
        })
    }

    /// The names of the extended attributes of entry `name`, not following a symlink, asked
    /// by name in this directory (`listxattrat`); `None` where the kernel has no such call
    /// (before Linux 6.13) or a filter refuses it, for the caller to ask by the entry's path.
    /// (By full path, a no-op restore of 100,000 files walked the same ten leading path
    /// components again for each.)
    pub fn xattr_names(&self, name: &[u8]) -> Option<io::Result<Vec<OsString>>> {
        if NO_LISTXATTRAT.load(Ordering::Relaxed) {
            return None;
        }
        let name = CString::new(name).ok()?;
        let list = |buf: &mut [u8]| {
            // SAFETY: the descriptor is open, the name is NUL-terminated and the buffer
            // is writable for its length (none is written when it is empty).
            #[allow(unsafe_code)]
            let n = unsafe {
                libc::syscall(
                    SYS_LISTXATTRAT,
                    self.0.as_raw_fd(),
                    name.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                    buf.as_mut_ptr(),
                    buf.len(),
                )
            };
            usize::try_from(n).map_err(|_| io::Error::last_os_error())
        };
        let mut small = [0u8; 1024];
        let mut result = list(&mut small).map(|n| split_names(&small[..n]));
        // Longer lists: asked for their size, then read (a few times, should they grow
        // in between).
        for _ in 0..4 {
            match &result {
                Err(e) if e.raw_os_error() == Some(libc::ERANGE) => {}
                _ => break,
            }
            result = list(&mut [0u8; 0]).and_then(|size| {
                let mut buf = vec![0u8; size.max(1)];
                list(&mut buf).map(|n| split_names(&buf[..n]))
            });
        }
        match result {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                NO_LISTXATTRAT.store(true, Ordering::Relaxed);
                None
            }
            // Refused by a seccomp filter (a container's), or failed in a way the call
            // by path reports as it does.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => None,
            r => Some(r),
        }
    }

    /// The target of symlink `name`.
    pub fn read_link(&self, name: &[u8]) -> io::Result<Vec<u8>> {
        nix::fcntl::readlinkat(&self.0, OsStr::from_bytes(name))
            .map(|t| t.into_vec())
            .map_err(errno)
    }

    /// The target of symlink `name`, leaving its access time at `atime` (seconds and
    /// nanoseconds: what it was before), which reading a link moves: for looking without
    /// changing anything (a restore's scan of its target).
    pub fn read_link_keeping_atime(&self, name: &[u8], atime: (i64, i64)) -> io::Result<Vec<u8>> {
        let target = self.read_link(name)?;
        let _ = nix::sys::stat::utimensat(
            &self.0,
            OsStr::from_bytes(name),
            &nix::sys::time::TimeSpec::new(atime.0 as libc::time_t, atime.1 as libc::c_long),
            &nix::sys::time::TimeSpec::UTIME_OMIT,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        );
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A FIFO where a file was expected (replaced since it was looked at) is opened at once;
    /// a blocking open waited for a writer for ever.
    #[test]
    fn a_fifo_is_opened_without_waiting_for_a_writer() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("p");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (dir, path) = (d.path().to_path_buf(), fifo.clone());
        std::thread::spawn(move || {
            let h = DirHandle::open(&dir).unwrap();
            let by_name = h.open_noatime(b"p").map(|_| ());
            let by_path = crate::open_noatime(&path).map(|_| ());
            let _ = tx.send((by_name.is_ok(), by_path.is_ok()));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(5));
        if got.is_err() {
            // Let the blocked opens go before failing.
            for _ in 0..2 {
                let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            }
        }
        assert_eq!(
            got,
            Ok((true, true)),
            "an open of a FIFO waited for a writer"
        );
    }

    #[test]
    fn looks_at_and_opens_entries_by_name() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("f"), b"hello").unwrap();
        std::os::unix::fs::symlink("f", d.path().join("l")).unwrap();
        fs::create_dir(d.path().join("sub")).unwrap();
        let h = DirHandle::open(d.path()).unwrap();

        let f = h.stat(b"f").unwrap().unwrap();
        let m = fs::symlink_metadata(d.path().join("f")).unwrap();
        assert_eq!(f, Stat::from(&m));
        assert!(f.is_file() && !f.is_dir() && f.size == 5);
        assert!(h.stat(b"l").unwrap().unwrap().is_symlink());
        assert!(h.stat(b"sub").unwrap().unwrap().is_dir());
        fs::write(d.path().join("sub/g"), b"").unwrap();
        let sub = h.open_dir(b"sub").unwrap();
        assert!(sub.stat(b"g").unwrap().unwrap().is_file());
        assert!(h.open_dir(b"l").is_err() && h.open_dir(b"f").is_err());
        assert_eq!(h.stat(b"missing").unwrap(), None);
        assert_eq!(h.stat(b"f/below").unwrap(), None);

        let mut s = String::new();
        h.open_noatime(b"f")
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "hello");
        assert!(h.open_noatime(b"l").is_err(), "a symlink is not followed");
        assert_eq!(h.read_link(b"l").unwrap(), b"f");
        assert_eq!(
            h.open_noatime(b"missing").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    /// Attributes listed by name in the directory are the entry's own, however many, and a
    /// symlink's are its own, not its target's.
    #[test]
    fn lists_xattrs_by_name() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        fs::write(&f, b"x").unwrap();
        std::os::unix::fs::symlink("f", d.path().join("l")).unwrap();
        if xattr::set(&f, "user.a", b"1").is_err() {
            return; // no user xattrs on this file system
        }
        let h = DirHandle::open(d.path()).unwrap();
        let Some(names) = h.xattr_names(b"f") else {
            return; // a kernel before 6.13: callers ask by path
        };
        assert_eq!(names.unwrap(), vec![OsString::from("user.a")]);
        assert_eq!(
            h.xattr_names(b"l").unwrap().unwrap(),
            Vec::<OsString>::new()
        );
        // More names than the first buffer holds.
        let mut want: Vec<OsString> = (0..60)
            .map(|i| OsString::from(format!("user.{i:03}-{}", "n".repeat(40))))
            .collect();
        for n in &want {
            xattr::set(&f, n, b"v").unwrap();
        }
        want.push("user.a".into());
        want.sort();
        let mut got = h.xattr_names(b"f").unwrap().unwrap();
        got.sort();
        assert_eq!(got, want);
        assert_eq!(
            h.xattr_names(b"missing").unwrap().unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    /// An entry looked at in a directory held open is that directory's, though the
    /// directory was renamed away and another put at its path since: its lstat, symlink
    /// target and xattrs (by path, the other directory's were read).
    #[test]
    fn entries_are_looked_at_in_the_directory_held_whatever_is_renamed() {
        let d = tempfile::tempdir().unwrap();
        let (dir, other) = (d.path().join("dir"), d.path().join("other"));
        for (p, target) in [(&dir, "mine"), (&other, "theirs")] {
            fs::create_dir(p).unwrap();
            fs::write(p.join("f"), target).unwrap();
            std::os::unix::fs::symlink(target, p.join("l")).unwrap();
        }
        let xattrs = xattr::set(dir.join("f"), "user.a", b"1").is_ok();
        let listing = crate::list_dir_names_and_ids(&dir).unwrap();
        let mine = fs::symlink_metadata(dir.join("f")).unwrap();
        fs::rename(&dir, d.path().join("moved")).unwrap();
        fs::rename(&other, &dir).unwrap();

        let h = &listing.dir;
        assert_eq!(h.lstat(b"f").unwrap(), Stat::from(&mine));
        assert_eq!(
            h.lstat(b"missing").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let mut names = crate::NameCache::new();
        let at = |name: &[u8], names: &mut crate::NameCache| {
            let path = dir.join(OsStr::from_bytes(name));
            let stat = h.lstat(name).unwrap();
            crate::read_node_at(Some(h), &path, name, &stat, names, None).unwrap()
        };
        assert_eq!(at(b"l", &mut names).link_target, b"mine");
        let f = at(b"f", &mut names);
        assert_eq!((f.inode, f.size), (mine.ino(), 4));
        if xattrs {
            assert_eq!(f.xattrs, vec![(b"user.a".to_vec(), b"1".to_vec())]);
        }
        // By path: the other directory's.
        let l = fs::symlink_metadata(dir.join("l")).unwrap();
        let by_path = crate::read_node(&dir.join("l"), b"l", &l, &mut names).unwrap();
        assert_eq!(by_path.link_target, b"theirs");
    }

    #[test]
    fn names_that_are_not_utf8_pass() {
        let d = tempfile::tempdir().unwrap();
        let name = std::ffi::OsString::from_vec(vec![b'a', 0xff, b'b']);
        fs::write(d.path().join(&name), b"x").unwrap();
        let h = DirHandle::open(d.path()).unwrap();
        assert!(h.stat(name.as_bytes()).unwrap().unwrap().is_file());
        assert!(h.open_noatime(name.as_bytes()).is_ok());
    }

    #[test]
    fn a_symlink_is_not_opened_as_a_directory() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", d.path().join("link")).unwrap();
        assert!(DirHandle::open(&d.path().join("link")).is_err());
        assert!(DirHandle::open(&d.path().join("real")).is_ok());
    }
}
