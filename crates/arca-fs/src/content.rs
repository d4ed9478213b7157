//! File content on restore: opening files to patch or create, preallocating the ranges that
//! will hold data, copying ranges between files (`copy_file_range`, a reflink where the file
//! system shares extents), and reading without moving access times.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use nix::dir::{Dir, Type};
use nix::fcntl::{FallocateFlags, OFlag, fallocate};
use nix::sys::stat::Mode;

use crate::errno;

/// Opens (creating it if missing) a file whose content is to be written, for reading too
/// (later copies take blocks from it), without truncating it and without following a symlink
/// in its last component. A new file gets the permission bits of `mode` (less the umask) and
/// read and write for its owner, so the file's final mode often needs no change of its own;
/// special bits (setuid, setgid, sticky) are never set here.
/// Reading through it (a later block copied from it) does not move its access time.
pub fn open_for_restore(path: &Path, mode: u32) -> io::Result<File> {
    let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    if let Some(b) = crate::beneath::target_of(path) {
        let mode = Mode::from_bits_truncate(mode & 0o777 | 0o600);
        return crate::fds::patiently(|| noatime_if_allowed(|f| b.open(path, flags | f, mode)));
    }
    crate::io_on_long_path(path, |p| open_for_restore_short(p, mode))
}

/// Runs `open` with `O_NOATIME`, and without it where the process may not use it (not the
/// file's owner, not root).
fn noatime_if_allowed(open: impl Fn(OFlag) -> io::Result<OwnedFd>) -> io::Result<File> {
    match open(OFlag::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(OFlag::empty()),
        r => r,
    }
    .map(File::from)
}

fn open_for_restore_short(path: &Path, mode: u32) -> io::Result<File> {
    let open = |flags| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(mode & 0o777 | 0o600)
            .custom_flags(flags | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    };
    match open(libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(0),
        r => r,
    }
}

/// Opens a file for reading without updating its access time when the process may do so
/// (owner or root); otherwise opens it normally. Never follows a final symlink, and never
/// waits: a FIFO found where a file was (replaced since it was looked at) is opened at once
/// instead of blocking until a writer comes (O_NONBLOCK does nothing to regular files).
pub fn open_noatime(path: &Path) -> io::Result<File> {
    if let Some(b) = crate::beneath::target_of(path) {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        return crate::fds::patiently(|| {
            noatime_if_allowed(|f| b.open(path, flags | f, Mode::empty()))
        });
    }
    crate::io_on_long_path(path, open_noatime_short)
}

fn open_noatime_short(path: &Path) -> io::Result<File> {
    let open = |flags| {
        OpenOptions::new()
            .read(true)
            .custom_flags(flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
    };
    match open(libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(0),
        r => r,
    }
}

/// Opens directory `path` (relative to the directory `at` when given), without following a
/// final symlink and without updating its access time when the process may do so.
pub fn open_dir_fd_noatime(at: Option<BorrowedFd<'_>>, path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
    let at = at.unwrap_or(nix::fcntl::AT_FDCWD);
    match nix::fcntl::openat(at, path, flags | OFlag::O_NOATIME, Mode::empty()) {
        Err(nix::errno::Errno::EPERM) => nix::fcntl::openat(at, path, flags, Mode::empty()),
        r => r,
    }
    .map_err(errno)
}

/// Opens directory `path` (relative to the directory `at` when given) for listing, as
/// [`open_dir_fd_noatime`].
pub fn open_dir_noatime(at: Option<BorrowedFd<'_>>, path: &Path) -> io::Result<Dir> {
    Dir::from_fd(open_dir_fd_noatime(at, path)?).map_err(errno)
}

/// The entries of an open directory (without `.` and `..`): each name, with its type when
/// the file system reports one. A failed read of the listing is an error, never a shorter
/// listing (nix before 0.30 took a failed `readdir_r` for the end of the directory).
pub fn dir_entries(dir: &mut Dir) -> io::Result<Vec<(Vec<u8>, Option<Type>)>> {
    let mut out = vec![];
    for entry in dir.iter() {
        let entry = entry.map_err(errno)?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            out.push((name.to_vec(), entry.file_type()));
        }
    }
    Ok(out)
}

/// The names in directory `path` (without `.` and `..`), read without updating its access
/// time when the process may do so.
pub fn list_dir_names(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    let mut dir = crate::io_on_long_path(path, |p| open_dir_noatime(None, p))?;
    Ok(dir_entries(&mut dir)?.into_iter().map(|(n, _)| n).collect())
}

/// A folder listed by [`list_dir_names_and_ids`]: its names, the (device, inode) of the
/// folder itself and of the one that holds it (its `..`), both looked up from the open
/// folder, not by path (`None` where that failed: a folder that may be listed but not
/// searched), and the folder itself, still open.
pub struct Listing {
    /// The names, without `.` and `..`.
    pub names: Vec<Vec<u8>>,
    /// The folder listed.
    pub id: Option<(u64, u64)>,
    /// The folder holding it.
    pub parent: Option<(u64, u64)>,
    /// The folder listed, open: its entries are looked at and opened relative to it, so
    /// they are the entries listed even when a folder on its path is renamed and replaced
    /// meanwhile (by path, another folder's entries of the same names were taken).
    pub dir: crate::DirHandle,
}

/// As [`list_dir_names`], with the identities of the folder listed and of its parent, and
/// the folder kept open: a walk that reaches a folder by its path can tell that it is still
/// inside the folder it listed before, and not reached through a folder above replaced by a
/// symlink since, and it looks at the entries in the folder it listed.
pub fn list_dir_names_and_ids(path: &Path) -> io::Result<Listing> {
    let fd = crate::io_on_long_path(path, |p| open_dir_fd_noatime(None, p))?;
    let id = nix::sys::stat::fstat(&fd)
        .ok()
        .map(|st| (st.st_dev, st.st_ino));
    let parent = nix::sys::stat::fstatat(&fd, "..", nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| (st.st_dev, st.st_ino));
    // The listing reads through a descriptor of its own, closed with it.
    let mut dir = Dir::from_fd(crate::fds::patiently(|| fd.try_clone())?).map_err(errno)?;
    let names = dir_entries(&mut dir)?.into_iter().map(|(n, _)| n).collect();
    Ok(Listing {
        names,
        id,
        parent,
        dir: crate::DirHandle(fd),
    })
}

/// The names in directory `path` (without `.` and `..`), each with whether it is a
/// directory, read without updating the directory's access time when the process may do so.
pub fn list_dir_noatime(path: &Path) -> io::Result<Vec<(Vec<u8>, bool)>> {
    let mut dir = crate::io_on_long_path(path, |p| open_dir_noatime(None, p))?;
    Ok(dir_entries(&mut dir)?
        .into_iter()
        .map(|(name, kind)| {
            let is_dir = match kind {
                Some(t) => t == Type::Directory,
                None => std::fs::symlink_metadata(path.join(std::ffi::OsStr::from_bytes(&name)))
                    .is_ok_and(|m| m.is_dir()),
            };
            (name, is_dir)
        })
        .collect())
}

/// Reserves disk space for `len` bytes at `offset` so the file system can lay the data out
/// in one piece. File systems without `fallocate` are not an error: the space is then
/// allocated as the data is written.
pub fn preallocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let (Ok(off), Ok(l)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Ok(());
    };
    match fallocate(file, FallocateFlags::empty(), off, l) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EOPNOTSUPP | nix::errno::Errno::ENOSYS) => Ok(()),
        Err(e) => Err(errno(e)),
    }
}

/// Gives `len` bytes at `offset` of `file` back as a hole (the size stays), where the file
/// system can; false where it cannot (the range then holds what it held).
pub fn punch_hole(file: &File, offset: u64, len: u64) -> bool {
    let (Ok(off), Ok(l)) = (i64::try_from(offset), i64::try_from(len)) else {
        return false;
    };
    fallocate(
        file,
        FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE,
        off,
        l,
    )
    .is_ok()
}

/// Copies `len` bytes from `src` at `src_off` to `dst` at `dst_off` inside the kernel
/// (`copy_file_range`: a reflink on btrfs and XFS when the ranges are block-aligned, a
/// page-cache copy elsewhere), falling back to read and write where the kernel cannot.
/// Returns the bytes copied through user space by the fallback (0 when the kernel copied).
pub fn copy_range(src: &File, src_off: u64, dst: &File, dst_off: u64, len: u64) -> io::Result<u64> {
    // A file system shares extents only between block-aligned ranges: when both offsets sit
    // at the same place within a block, the unaligned head and tail are copied apart so the
    // middle can be shared.
    const BLOCK: u64 = 4096;
    if len >= 2 * BLOCK && src_off % BLOCK == dst_off % BLOCK && !src_off.is_multiple_of(BLOCK) {
        let head = BLOCK - src_off % BLOCK;
        let body = (len - head) / BLOCK * BLOCK;
        let mut copied = 0;
        for (o, l) in [(0, head), (head, body), (head + body, len - head - body)] {
            if l > 0 {
                copied += copy_range_inner(src, src_off + o, dst, dst_off + o, l)?;
            }
        }
        return Ok(copied);
    }
    copy_range_inner(src, src_off, dst, dst_off, len)
}

fn copy_range_inner(
    src: &File,
    src_off: u64,
    dst: &File,
    dst_off: u64,
    len: u64,
) -> io::Result<u64> {
    let mut done = 0u64;
    while done < len {
        let (Ok(mut so), Ok(mut dof)) =
            (i64::try_from(src_off + done), i64::try_from(dst_off + done))
        else {
            break;
        };
        let want = usize::try_from(len - done).unwrap_or(usize::MAX);
        match nix::fcntl::copy_file_range(
            src.as_fd(),
            Some(&mut so),
            dst.as_fd(),
            Some(&mut dof),
            want,
        ) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("source ends before offset {}", src_off + done),
                ));
            }
            Ok(n) => done += n as u64,
            Err(
                nix::errno::Errno::EXDEV
                | nix::errno::Errno::ENOSYS
                | nix::errno::Errno::EOPNOTSUPP
                | nix::errno::Errno::EINVAL,
            ) => break,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(errno(e)),
        }
    }
    if done == len {
        return Ok(0);
    }
    // The kernel cannot copy between these files: through a buffer.
    let mut buf = vec![0u8; (len - done).min(1 << 20) as usize];
    let mut copied = 0u64;
    while done < len {
        let n = ((len - done) as usize).min(buf.len());
        src.read_exact_at(&mut buf[..n], src_off + done)?;
        dst.write_all_at(&buf[..n], dst_off + done)?;
        done += n as u64;
        copied += n as u64;
    }
    Ok(copied)
}

/// Whether the file system holding `path` shares extents between files (btrfs, XFS, bcachefs),
/// so that copying a range between two files there costs no space.
pub fn shares_extents(path: &Path) -> bool {
    use nix::sys::statfs::{BTRFS_SUPER_MAGIC, FsType, XFS_SUPER_MAGIC, statfs};
    let bcachefs = FsType(0xca45_1a4e);
    match statfs(path) {
        Ok(s) => {
            let t = s.filesystem_type();
            t == BTRFS_SUPER_MAGIC || t == XFS_SUPER_MAGIC || t == bcachefs
        }
        Err(_) => false,
    }
}

/// Whether the file system holding `path` (or, when `path` is not there, its folder) may
/// refuse Unix metadata even to root: FAT, exFAT and NTFS (in the kernel or through FUSE)
/// keep no owners and hold no FIFOs or device nodes; NFS with root_squash and SMB mounts
/// refuse owners.
pub fn may_refuse_unix_metadata(path: &Path) -> bool {
    use nix::sys::statfs::{FUSE_SUPER_MAGIC, FsType, MSDOS_SUPER_MAGIC, NFS_SUPER_MAGIC, statfs};
    const OTHERS: [FsType; 5] = [
        FsType(0x2011_bab0), // exFAT
        FsType(0x5346_544e), // NTFS
        FsType(0xfe53_4d42), // SMB2
        FsType(0xff53_4d42), // CIFS
        FsType(0x517b),      // SMB
    ];
    let at = match path.symlink_metadata() {
        Ok(_) => path,
        Err(_) => path.parent().unwrap_or(path),
    };
    statfs(at).is_ok_and(|s| {
        let t = s.filesystem_type();
        [FUSE_SUPER_MAGIC, MSDOS_SUPER_MAGIC, NFS_SUPER_MAGIC].contains(&t) || OTHERS.contains(&t)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_range_copies_and_reports_short_sources() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&a, &data).unwrap();
        let src = open_noatime(&a).unwrap();
        let dst = open_for_restore(&b, 0o644).unwrap();
        dst.set_len(200_000).unwrap();
        preallocate(&dst, 0, 200_000).unwrap();
        copy_range(&src, 1000, &dst, 5000, 150_000).unwrap();
        let back = std::fs::read(&b).unwrap();
        assert_eq!(back.len(), 200_000);
        assert_eq!(&back[5000..155_000], &data[1000..151_000]);
        assert!(back[..5000].iter().all(|&x| x == 0));
        assert!(copy_range(&src, 299_000, &dst, 0, 5000).is_err());
        // Reopening without truncation keeps the content.
        drop(dst);
        let again = open_for_restore(&b, 0o644).unwrap();
        assert_eq!(again.metadata().unwrap().len(), 200_000);
        // A new file gets the permission bits asked for (less the umask) and owner read and
        // write; never special bits.
        use std::os::unix::fs::PermissionsExt;
        let c = d.path().join("c");
        drop(open_for_restore(&c, 0o4710).unwrap());
        let m = std::fs::metadata(&c).unwrap().permissions().mode() & 0o7777;
        assert_eq!(m & 0o7000, 0, "{m:o}");
        assert_eq!(m & 0o700, 0o700, "{m:o}");
        assert_eq!(m & 0o067, 0, "{m:o}");
        // A symlink in the last component is refused.
        std::os::unix::fs::symlink(&a, d.path().join("l")).unwrap();
        assert!(open_for_restore(&d.path().join("l"), 0o644).is_err());
        assert!(open_noatime(&d.path().join("l")).is_err());
        let _ = shares_extents(d.path());
    }
}
