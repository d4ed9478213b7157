//! Builds a tree holding every entry kind arca must preserve.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use nix::sys::stat::{Mode, SFlag, UtimensatFlags, mknod, utimensat};
use nix::sys::time::TimeSpec;

use crate::{is_root, random_bytes, text_bytes};

fn io_err(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// Sets atime and mtime (nanoseconds) without following symlinks.
pub fn set_times(p: &Path, atime: (i64, i64), mtime: (i64, i64)) -> io::Result<()> {
    utimensat(
        nix::fcntl::AT_FDCWD,
        p,
        &TimeSpec::new(atime.0, atime.1),
        &TimeSpec::new(mtime.0, mtime.1),
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(io_err)
}

/// A POSIX access ACL granting user 1000 rw-, encoded as the Linux xattr value.
pub fn acl_xattr() -> Vec<u8> {
    let mut v = vec![2, 0, 0, 0];
    let entry = |tag: u16, perm: u16, id: u32| {
        let mut e = tag.to_le_bytes().to_vec();
        e.extend_from_slice(&perm.to_le_bytes());
        e.extend_from_slice(&id.to_le_bytes());
        e
    };
    v.extend(entry(0x01, 6, u32::MAX)); // user::rw-
    v.extend(entry(0x02, 6, 1000)); // user:1000:rw-
    v.extend(entry(0x04, 4, u32::MAX)); // group::r--
    v.extend(entry(0x10, 6, u32::MAX)); // mask::rw-
    v.extend(entry(0x20, 4, u32::MAX)); // other::r--
    v
}

/// What the generated tree contains beyond regular content, for the caller's assertions.
#[derive(Debug, Default)]
pub struct Generated {
    /// Root of the tree.
    pub root: PathBuf,
    /// Whether device nodes were created (root only).
    pub devices: bool,
    /// Whether a POSIX ACL was set.
    pub acl: bool,
    /// The sparse file.
    pub sparse: PathBuf,
}

/// Creates under `root` a tree with every entry kind: regular files (empty, small, text,
/// random multi-chunk, sparse), nested and empty directories, symlinks (relative, absolute,
/// dangling, looping), hard links, a FIFO, a socket, device nodes when root, setuid/setgid/
/// sticky modes, owners (when root), nanosecond times, xattrs and an ACL, names that are not
/// UTF-8 and names with spaces and newlines.
pub fn every_kind(root: &Path, seed: u64) -> io::Result<Generated> {
    fs::create_dir_all(root)?;
    let d = |p: &str| root.join(p);
    fs::create_dir_all(d("dir/nested/deeper"))?;
    fs::create_dir_all(d("empty dir"))?;
    fs::write(d("empty"), b"")?;
    fs::write(d("small.txt"), b"hello arca\n")?;
    fs::write(d("dir/text.log"), text_bytes(seed, 300_000))?;
    fs::write(d("dir/nested/random.bin"), random_bytes(seed + 1, 700_000))?;
    fs::write(d("dir/nested/deeper/tiny"), b"x")?;
    // Sparse: 8 MiB with two small data islands.
    let sparse = d("sparse.img");
    {
        let f = fs::File::create(&sparse)?;
        f.set_len(8 << 20)?;
        use std::os::unix::fs::FileExt;
        f.write_all_at(&random_bytes(seed + 2, 10_000), 1 << 20)?;
        f.write_all_at(b"tail island", (6 << 20) + 123)?;
    }
    // Names.
    fs::write(
        root.join(OsStr::from_bytes(b"latin1-\xe9t\xe9")),
        b"not utf-8 name",
    )?;
    fs::write(d("name with spaces"), b"spaces")?;
    fs::write(d("line\nbreak"), b"newline in name")?;
    fs::write(d("unicode-✓-名前"), b"utf-8 name")?;
    // Links.
    symlink("small.txt", d("link-rel"))?;
    symlink("/nonexistent/arca/absolute target", d("link-abs"))?;
    symlink("does/not/exist", d("link-dangling"))?;
    symlink("loop-b", d("loop-a"))?;
    symlink("loop-a", d("loop-b"))?;
    symlink("..", d("dir/link-up"))?;
    fs::write(d("hard-1"), b"shared inode content")?;
    fs::hard_link(d("hard-1"), d("dir/hard-2"))?;
    fs::hard_link(d("hard-1"), d("dir/nested/hard-3"))?;
    // Special files.
    nix::unistd::mkfifo(&d("fifo"), Mode::from_bits_truncate(0o640)).map_err(io_err)?;
    drop(std::os::unix::net::UnixListener::bind(d("socket"))?);
    let devices = is_root();
    if devices {
        mknod(
            &d("chardev"),
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o620),
            nix::sys::stat::makedev(1, 3),
        )
        .map_err(io_err)?;
        mknod(
            &d("blockdev"),
            SFlag::S_IFBLK,
            Mode::from_bits_truncate(0o600),
            nix::sys::stat::makedev(7, 200),
        )
        .map_err(io_err)?;
    }
    // Modes.
    fs::write(d("setuid"), b"#!/bin/sh\n")?;
    fs::set_permissions(d("setuid"), fs::Permissions::from_mode(0o4755))?;
    fs::write(d("setgid"), b"g")?;
    fs::set_permissions(d("setgid"), fs::Permissions::from_mode(0o2750))?;
    fs::create_dir(d("sticky"))?;
    fs::set_permissions(d("sticky"), fs::Permissions::from_mode(0o1777))?;
    fs::write(d("readonly"), b"ro")?;
    fs::set_permissions(d("readonly"), fs::Permissions::from_mode(0o444))?;
    fs::create_dir(d("locked dir"))?;
    fs::write(d("locked dir/inside"), b"inside a 0500 dir")?;
    // Owners.
    if is_root() {
        std::os::unix::fs::lchown(d("small.txt"), Some(1234), Some(5678))?;
        std::os::unix::fs::lchown(d("link-rel"), Some(4321), Some(8765))?;
        std::os::unix::fs::lchown(d("dir/nested"), Some(65534), Some(65534))?;
    }
    // Extended attributes and an ACL.
    xattr::set(d("small.txt"), "user.comment", b"a note")?;
    xattr::set(d("small.txt"), "user.binary", &[0, 1, 2, 255])?;
    xattr::set(d("dir"), "user.dir-attr", b"on a directory")?;
    let acl = xattr::set(d("dir/text.log"), "system.posix_acl_access", &acl_xattr()).is_ok();
    // Times, with nanoseconds, applied last and bottom-up so that later writes do not move them.
    // Access times lie a few days ahead so that relatime never updates them while tests read
    // the trees (reading a symlink or listing a directory would otherwise move them).
    let future = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64 / 86_400 * 86_400)
        .unwrap_or(1_800_000_000)
        + 3 * 86_400;
    let mut all = vec![];
    collect(root, &mut all)?;
    all.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for (i, p) in all.iter().enumerate() {
        let i = i as i64;
        set_times(
            p,
            (future + i * 7, 111_111_111 + i),
            (1_500_000_000 + i * 13, 987_654_321 - i),
        )?;
    }
    fs::set_permissions(d("locked dir"), fs::Permissions::from_mode(0o500))?;
    set_times(&d("locked dir"), (future, 5), (1_500_000_000, 6))?;
    set_times(root, (future + 1, 1), (1_500_000_001, 2))?;
    Ok(Generated {
        root: root.to_path_buf(),
        devices,
        acl,
        sparse,
    })
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for e in fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        if e.file_type()?.is_dir() {
            collect(&p, out)?;
        }
        out.push(p);
    }
    Ok(())
}
