//! Creating symlinks and special files, and applying a node's metadata to a restored entry:
//! owner, then xattrs (the entry's extra ones removed) and mode (chown clears setuid and
//! capabilities), then times, last.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use arca_format::{Node, NodeKind};
use nix::sys::stat::{Mode, SFlag, UtimensatFlags, futimens, mknod, utimensat};
use nix::sys::time::TimeSpec;

use crate::{FsError, errno};

/// What an error setting an entry's owner says it was doing ([`FsError::op`]).
pub const OWNER_OP: &str = "change owner of";

/// Which metadata to restore.
#[derive(Debug, Clone, Copy)]
pub struct MetadataOptions {
    /// Set uid/gid (needs root; without it, ownership errors are ignored as restic does).
    pub owner: bool,
    /// Whether we run as root; ownership failures are errors only then.
    pub is_root: bool,
    /// Restore extended attributes.
    pub xattrs: bool,
}

impl Default for MetadataOptions {
    fn default() -> Self {
        let is_root = nix::unistd::geteuid().is_root();
        Self {
            owner: true,
            is_root,
            xattrs: true,
        }
    }
}

/// Creates a symlink at `path` pointing to the node's target.
pub fn create_symlink(path: &Path, node: &Node) -> Result<(), FsError> {
    crate::io_on_long_path(path, |p| {
        std::os::unix::fs::symlink(OsStr::from_bytes(&node.link_target), p)
    })
    .map_err(|e| FsError::new("create symlink", path, e))
}

/// Creates a FIFO, socket or device node at `path`.
pub fn create_special(path: &Path, node: &Node) -> Result<(), FsError> {
    crate::long::fs_on_long_path(path, |p| create_special_short(p, node))
}

/// What an error creating a FIFO, a socket or a device node says it was doing
/// ([`FsError::op`]).
pub const SPECIAL_OPS: [&str; 4] = [
    "create FIFO",
    "create socket",
    "create character device",
    "create block device",
];

fn create_special_short(path: &Path, node: &Node) -> Result<(), FsError> {
    let (kind, op) = match node.kind() {
        NodeKind::Fifo => (SFlag::S_IFIFO, SPECIAL_OPS[0]),
        NodeKind::Socket => (SFlag::S_IFSOCK, SPECIAL_OPS[1]),
        NodeKind::CharDev => (SFlag::S_IFCHR, SPECIAL_OPS[2]),
        NodeKind::BlockDev => (SFlag::S_IFBLK, SPECIAL_OPS[3]),
        other => {
            return Err(FsError::new(
                "create",
                path,
                io::Error::other(format!("{} is not a special file", other.name())),
            ));
        }
    };
    let perm = Mode::from_bits_truncate(node.mode & 0o777);
    mknod(path, kind, perm, node.rdev as libc::dev_t).map_err(|e| {
        // exfat-fuse, which holds no FIFOs, makes an empty regular file under the name and
        // then fails: the name was free (else EEXIST), so what is there now is that file,
        // which would pass for a restored entry.
        if e != nix::errno::Errno::EEXIST
            && fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0)
        {
            let _ = fs::remove_file(path);
        }
        FsError::new(op, path, errno(e))
    })
}

fn timespec(t: arca_format::Timespec) -> TimeSpec {
    TimeSpec::new(t.sec as libc::time_t, i64::from(t.nsec) as libc::c_long)
}

/// Which of owner and mode an entry whose current metadata is `have` already carries. The
/// mode counts only when the owner is not changed: chown clears setuid and setgid bits.
fn already(have: Option<&fs::Metadata>, node: &Node, opts: MetadataOptions) -> (bool, bool) {
    use std::os::unix::fs::MetadataExt;
    let owner_ok = have.is_some_and(|m| m.uid() == node.uid && m.gid() == node.gid);
    let mode_ok =
        have.is_some_and(|m| m.mode() & 0o7777 == node.mode & 0o7777) && (owner_ok || !opts.owner);
    (owner_ok, mode_ok)
}

/// Applies the node's owner, xattrs, mode and times to `path`, in that order: chown clears
/// setuid bits and file capabilities, so it comes first; times come last. With `have`, the
/// entry's current metadata (an lstat), an owner or mode it already has is not set again.
/// Returns every failure; the caller decides whether it is fatal for the entry.
pub fn apply_metadata(
    path: &Path,
    node: &Node,
    opts: MetadataOptions,
    have: Option<&fs::Metadata>,
) -> Vec<FsError> {
    let errs = apply_metadata_short(path, node, opts, have);
    if !errs.iter().any(|e| crate::is_too_long(&e.source)) {
        return errs;
    }
    match crate::ShortPath::new(path) {
        Ok(short) => apply_metadata_short(short.path(), node, opts, have)
            .into_iter()
            .map(crate::long::renamed(path))
            .collect(),
        Err(_) => errs,
    }
}

fn apply_metadata_short(
    path: &Path,
    node: &Node,
    opts: MetadataOptions,
    have: Option<&fs::Metadata>,
) -> Vec<FsError> {
    let mut errs = vec![];
    let is_link = node.kind() == NodeKind::Symlink;
    let (owner_ok, mode_ok) = already(have, node, opts);
    if opts.owner
        && !owner_ok
        && let Err(e) = std::os::unix::fs::lchown(path, Some(node.uid), Some(node.gid))
        && (opts.is_root || e.raw_os_error() != Some(libc::EPERM))
    {
        errs.push(FsError::new(OWNER_OP, path, e));
    }
    if opts.xattrs {
        remove_extra_xattrs(
            path,
            node,
            opts,
            xattr::list(path),
            |n| xattr::remove(path, n),
            &mut errs,
        );
        set_xattrs(
            path,
            node,
            is_link,
            |k, v| xattr::set(path, k, v),
            &mut errs,
        );
    }
    if !is_link
        && !mode_ok
        && let Err(e) = fs::set_permissions(path, fs::Permissions::from_mode(node.mode & 0o7777))
    {
        errs.push(FsError::new("change mode of", path, e));
    }
    if let Err(e) = utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &timespec(node.atime),
        &timespec(node.mtime),
        UtimensatFlags::NoFollowSymlink,
    ) {
        errs.push(FsError::new("set times of", path, errno(e)));
    }
    errs
}

/// Sets only the access and modification times of `path` (not following a symlink): after
/// reading a symlink, which moves its access time.
pub fn set_times(path: &Path, node: &Node) -> Result<(), FsError> {
    crate::long::fs_on_long_path(path, |p| set_times_short(p, node))
}

fn set_times_short(path: &Path, node: &Node) -> Result<(), FsError> {
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &timespec(node.atime),
        &timespec(node.mtime),
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(|e| FsError::new("set times of", path, errno(e)))
}

/// As [`apply_metadata`], for a regular file through its open descriptor (no path lookups);
/// `path` names the file in errors. With `have`, the file's current metadata, an owner or
/// mode it already has is not set again (each change is an inode write).
pub fn apply_file_metadata(
    file: &File,
    path: &Path,
    node: &Node,
    opts: MetadataOptions,
    have: Option<&fs::Metadata>,
) -> Vec<FsError> {
    use xattr::FileExt;
    let mut errs = vec![];
    let (owner_ok, mode_ok) = already(have, node, opts);
    if opts.owner
        && !owner_ok
        && let Err(e) = std::os::unix::fs::fchown(file, Some(node.uid), Some(node.gid))
        && (opts.is_root || e.raw_os_error() != Some(libc::EPERM))
    {
        errs.push(FsError::new(OWNER_OP, path, e));
    }
    if opts.xattrs {
        remove_extra_xattrs(
            path,
            node,
            opts,
            file.list_xattr(),
            |n| file.remove_xattr(n),
            &mut errs,
        );
        set_xattrs(path, node, false, |k, v| file.set_xattr(k, v), &mut errs);
    }
    if !mode_ok && let Err(e) = file.set_permissions(fs::Permissions::from_mode(node.mode & 0o7777))
    {
        errs.push(FsError::new("change mode of", path, e));
    }
    if let Err(e) = futimens(file, &timespec(node.atime), &timespec(node.mtime)) {
        errs.push(FsError::new("set times of", path, errno(e)));
    }
    errs
}

/// Whether the entry at `path`, whose lstat is `meta`, already carries the node's metadata
/// (mode, times, owner when restored as root, and exactly the node's xattrs), so a restore
/// that finds it in place has nothing to apply.
pub fn metadata_matches(
    path: &Path,
    meta: &fs::Metadata,
    node: &Node,
    opts: MetadataOptions,
) -> bool {
    stat_matches(&meta.into(), node, opts) && xattrs_match(path, node, opts)
}

/// [`metadata_matches`] without the xattrs: what an lstat alone can tell.
pub fn stat_matches(meta: &crate::Stat, node: &Node, opts: MetadataOptions) -> bool {
    let is_link = node.kind() == NodeKind::Symlink;
    if !is_link && meta.mode & 0o7777 != node.mode & 0o7777 {
        return false;
    }
    if opts.owner && opts.is_root && (meta.uid != node.uid || meta.gid != node.gid) {
        return false;
    }
    let same = |t: arca_format::Timespec, (sec, nsec): (i64, i64)| {
        t.sec == sec && i64::from(t.nsec) == nsec
    };
    same(node.mtime, meta.mtime) && same(node.atime, meta.atime)
}

/// Whether the entry at `path` carries exactly the node's xattrs: each of them, and none the
/// node lacks (but [`KEPT_XATTRS`]). True when xattrs are not restored, or the file system
/// has none.
pub fn xattrs_match(path: &Path, node: &Node, opts: MetadataOptions) -> bool {
    if !opts.xattrs {
        return true;
    }
    listed_xattrs_match(
        xattr::list(path).map(|names| names.collect()),
        |k| xattr::get(path, k),
        node,
    )
}

/// [`xattrs_match`] for entry `name` of directory `dir`, listed by name there where the
/// kernel can (`path` is the entry's path, for the rest).
pub fn xattrs_match_at(
    dir: &crate::DirHandle,
    name: &[u8],
    path: &Path,
    node: &Node,
    opts: MetadataOptions,
) -> bool {
    if !opts.xattrs {
        return true;
    }
    match dir.xattr_names(name) {
        Some(names) => listed_xattrs_match(names, |k| xattr::get(path, k), node),
        None => xattrs_match(path, node, opts),
    }
}

/// [`xattrs_match`] for a file open for reading.
pub fn file_xattrs_match(file: &File, node: &Node, opts: MetadataOptions) -> bool {
    use xattr::FileExt;
    if !opts.xattrs {
        return true;
    }
    listed_xattrs_match(
        file.list_xattr().map(|names| names.collect()),
        |k| file.get_xattr(k),
        node,
    )
}

/// Whether the attributes `names` (as listed) are exactly the node's, with the node's values
/// (`get` reads one).
fn listed_xattrs_match(
    names: io::Result<Vec<std::ffi::OsString>>,
    get: impl Fn(&OsStr) -> io::Result<Option<Vec<u8>>>,
    node: &Node,
) -> bool {
    match names {
        Ok(names) => {
            if extra_xattrs(names.into_iter(), node).next().is_some() {
                return false;
            }
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return node.xattrs.is_empty(),
        Err(_) => return false,
    }
    node.xattrs.iter().all(|(k, v)| {
        get(OsStr::from_bytes(k))
            .ok()
            .flatten()
            .is_some_and(|have| &have == v)
    })
}

/// Whether setting an attribute failed for want of room (the value is larger than the file
/// system takes, or the file's room for attributes is full): the file's further attributes
/// are not tried, as restic does (a file of 3,000 attributes printed an error for each of
/// the 2,900 that did not fit).
fn no_room(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::E2BIG | libc::ERANGE)
    )
}

/// Sets the node's attributes on the entry at `path` with `set`, adding what fails to `errs`.
/// An attribute refused for its whole namespace ([`refuses_namespace`]) is one error, naming
/// every attribute of that namespace, which are not tried further; once the entry has no
/// room left, the rest are not tried either ([`no_room`]).
fn set_xattrs(
    path: &Path,
    node: &Node,
    is_link: bool,
    mut set: impl FnMut(&OsStr, &[u8]) -> std::io::Result<()>,
    errs: &mut Vec<FsError>,
) {
    /// A refused namespace, the names refused in it, and why.
    type Refused<'a> = (&'a [u8], Vec<&'a [u8]>, std::io::Error);
    let mut refused: Vec<Refused> = vec![];
    for (k, v) in &node.xattrs {
        if let Some((_, names, _)) = refused.iter_mut().find(|r| r.0 == namespace(k)) {
            names.push(k);
            continue;
        }
        if let Err(e) = set(OsStr::from_bytes(k), v) {
            // Symlinks cannot carry user.* attributes on Linux; nothing to restore.
            if is_link && e.raw_os_error() == Some(libc::EPERM) && namespace(k) == b"user" {
                continue;
            }
            if refuses_namespace(&e) {
                refused.push((namespace(k), vec![k], e));
                continue;
            }
            let full = no_room(&e);
            errs.push(FsError::xattr("set xattr on", path, k, e));
            if full {
                break;
            }
        }
    }
    for (_, names, e) in refused {
        errs.push(FsError::xattrs("set xattr on", path, &names, e));
    }
}

/// Whether setting an attribute failed for a reason that holds for its whole namespace (the
/// file system has no `user.*` attributes, or only root may set `trusted.*`): the entry's
/// further attributes of that namespace are not tried (40 attributes on a file system
/// without any printed 40 errors).
fn refuses_namespace(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOTSUP | libc::EPERM | libc::EACCES)
    )
}

/// An attribute name's namespace: what comes before its first dot (`user`, `trusted`).
fn namespace(name: &[u8]) -> &[u8] {
    name.split(|&b| b == b'.').next().unwrap_or(name)
}

/// Attributes a restore leaves on an entry although the snapshot lacks them: the security
/// label the target system's policy gives every file (a snapshot made where there is no
/// such policy has none).
pub const KEPT_XATTRS: &[&[u8]] = &[b"security.selinux"];

/// The attributes among `names` (an entry's) that the node lacks: a restore removes them, so
/// that a stale attribute or POSIX ACL entry (`system.posix_acl_access`) in the target does
/// not outlive it and keep granting access the snapshot does not.
fn extra_xattrs<'a>(
    names: impl Iterator<Item = std::ffi::OsString> + 'a,
    node: &'a Node,
) -> impl Iterator<Item = std::ffi::OsString> + 'a {
    names.filter(move |n| {
        let n = n.as_bytes();
        !KEPT_XATTRS.contains(&n) && !node.xattrs.iter().any(|(k, _)| k.as_slice() == n)
    })
}

/// Removes from the entry at `path` (named in errors) the attributes among `names` (its own,
/// as listed) that the node lacks, with `remove`; failures go to `errs`.
fn remove_extra_xattrs(
    path: &Path,
    node: &Node,
    opts: MetadataOptions,
    names: io::Result<impl Iterator<Item = std::ffi::OsString>>,
    remove: impl Fn(&OsStr) -> io::Result<()>,
    errs: &mut Vec<FsError>,
) {
    match names {
        Ok(names) => {
            for name in extra_xattrs(names, node) {
                if let Err(e) = remove(&name)
                    && !removal_refused_harmlessly(&e, opts)
                {
                    errs.push(FsError::xattr(
                        "remove xattr from",
                        path,
                        name.as_bytes(),
                        e,
                    ));
                }
            }
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => {}
        Err(e) => errs.push(FsError::new("list xattrs of", path, e)),
    }
}

/// Whether a refused removal of an extra attribute is no error: not root, an attribute of a
/// namespace only root may change (as for ownership, which is not restored then either).
fn removal_refused_harmlessly(e: &io::Error, opts: MetadataOptions) -> bool {
    !opts.is_root && e.raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NameCache, read_node};
    use arca_format::Timespec;

    /// An attribute or ACL the snapshot lacks does not outlive a restore: it makes the
    /// metadata differ, and applying the metadata removes it (by path and by descriptor).
    #[test]
    fn extra_xattrs_and_acls_are_removed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        fs::write(&p, b"x").unwrap();
        if xattr::set(&p, "user.probe", b"1").is_err() {
            return; // no user xattrs on this file system
        }
        let node = Node {
            name: b"f".to_vec(),
            kind: Some(NodeKind::File),
            mode: 0o644,
            xattrs: vec![(b"user.keep".to_vec(), b"k".to_vec())],
            ..Node::default()
        };
        let opts = MetadataOptions::default();
        // An ACL granting another user access (user 65534), in its on-disk form: header,
        // then (tag, perm, id) entries.
        let mut acl = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [(1u16, 6u16, u32::MAX), (2, 6, 65534), (4, 4, u32::MAX)] {
            acl.extend(tag.to_le_bytes());
            acl.extend(perm.to_le_bytes());
            acl.extend(id.to_le_bytes());
        }
        acl.extend(16u16.to_le_bytes());
        acl.extend(6u16.to_le_bytes());
        acl.extend(u32::MAX.to_le_bytes());
        acl.extend(32u16.to_le_bytes());
        acl.extend(4u16.to_le_bytes());
        acl.extend(u32::MAX.to_le_bytes());
        let has_acl = xattr::set(&p, "system.posix_acl_access", &acl).is_ok();
        xattr::set(&p, "user.keep", b"k").unwrap();
        assert!(!xattrs_match(&p, &node, opts), "the extra ones are seen");
        let errs = apply_metadata(&p, &node, opts, None);
        assert!(errs.is_empty(), "{errs:?}");
        let names: Vec<_> = xattr::list(&p).unwrap().collect();
        assert_eq!(names, ["user.keep"], "acl was set: {has_acl}");
        assert!(xattrs_match(&p, &node, opts));
        // Through the descriptor, as a restored file's metadata is applied.
        xattr::set(&p, "user.stale", b"1").unwrap();
        let f = File::open(&p).unwrap();
        let errs = apply_file_metadata(&f, &p, &node, opts, None);
        assert!(errs.is_empty(), "{errs:?}");
        let names: Vec<_> = xattr::list(&p).unwrap().collect();
        assert_eq!(names, ["user.keep"]);
        // A node without xattrs: any (but the security label) makes the metadata differ.
        let bare = Node {
            xattrs: vec![],
            ..node
        };
        assert!(!xattrs_match(&p, &bare, opts));
    }

    #[test]
    fn metadata_round_trips_through_a_node() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        fs::write(&p, b"x").unwrap();
        let node = Node {
            name: b"f".to_vec(),
            kind: Some(NodeKind::File),
            mode: 0o4751,
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
            mtime: Timespec {
                sec: 1_000_000_000,
                nsec: 123_456_789,
            },
            atime: Timespec {
                sec: 1_100_000_000,
                nsec: 987_654_321,
            },
            xattrs: vec![(b"user.arca".to_vec(), b"value".to_vec())],
            ..Node::default()
        };
        let errs = apply_metadata(&p, &node, MetadataOptions::default(), None);
        assert!(errs.is_empty(), "{errs:?}");
        let meta = fs::symlink_metadata(&p).unwrap();
        let back = read_node(&p, b"f", &meta, &mut NameCache::new()).unwrap();
        assert_eq!(back.mode, 0o4751);
        assert_eq!(back.mtime, node.mtime);
        assert_eq!(back.atime, node.atime);
        assert_eq!(back.xattrs, node.xattrs);
        assert!(metadata_matches(
            &p,
            &meta,
            &node,
            MetadataOptions::default()
        ));
        let q = d.path().join("g");
        fs::write(&q, b"y").unwrap();
        let qm = fs::symlink_metadata(&q).unwrap();
        assert!(!metadata_matches(
            &q,
            &qm,
            &node,
            MetadataOptions::default()
        ));
        let f = File::options().write(true).open(&q).unwrap();
        let errs = apply_file_metadata(&f, &q, &node, MetadataOptions::default(), None);
        assert!(errs.is_empty(), "{errs:?}");
        drop(f);
        let qm = fs::symlink_metadata(&q).unwrap();
        assert!(metadata_matches(&q, &qm, &node, MetadataOptions::default()));
        let back = read_node(&q, b"g", &qm, &mut NameCache::new()).unwrap();
        assert_eq!(
            (back.mode, back.mtime, back.atime),
            (0o4751, node.mtime, node.atime)
        );
        assert_eq!(back.xattrs, node.xattrs);
    }

    /// An entry whose mode is already right but whose owner is wrong gets both: the chown
    /// clears setuid and setgid, so the mode must be set again after it. Through a path and
    /// through a descriptor. (Needs root to give files away; skipped otherwise.)
    #[test]
    fn a_right_mode_is_set_again_after_a_chown() {
        use std::os::unix::fs::MetadataExt;
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let node = Node {
            kind: Some(NodeKind::File),
            mode: 0o6755,
            uid: 0,
            gid: 0,
            ..Node::default()
        };
        let opts = MetadataOptions::default();
        for via_fd in [false, true] {
            let p = d.path().join(format!("suid-{via_fd}"));
            fs::write(&p, b"#!/bin/sh\n").unwrap();
            std::os::unix::fs::chown(&p, Some(1234), Some(1234)).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o6755)).unwrap();
            let have = fs::symlink_metadata(&p).unwrap();
            assert_eq!((have.mode() & 0o7777, have.uid()), (0o6755, 1234));
            let errs = if via_fd {
                let f = File::options().write(true).open(&p).unwrap();
                apply_file_metadata(&f, &p, &node, opts, Some(&have))
            } else {
                apply_metadata(&p, &node, opts, Some(&have))
            };
            assert!(errs.is_empty(), "{errs:?}");
            let now = fs::symlink_metadata(&p).unwrap();
            assert_eq!(
                (now.mode() & 0o7777, now.uid(), now.gid()),
                (0o6755, 0, 0),
                "through a descriptor: {via_fd}"
            );
        }
        // Right owner and mode, wrong times: only the times are set, and the owner and mode
        // stay (a directory, as a metadata-only restore finishes them).
        let dir = d.path().join("dir");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o2750)).unwrap();
        let node = Node {
            kind: Some(NodeKind::Dir),
            mode: 0o2750,
            uid: 0,
            gid: 0,
            mtime: Timespec { sec: 77, nsec: 8 },
            ..Node::default()
        };
        let have = fs::symlink_metadata(&dir).unwrap();
        assert!(apply_metadata(&dir, &node, opts, Some(&have)).is_empty());
        let now = fs::symlink_metadata(&dir).unwrap();
        assert_eq!(
            (now.mode() & 0o7777, now.mtime(), now.mtime_nsec()),
            (0o2750, 77, 8)
        );
    }

    #[test]
    fn symlinks_and_fifos() {
        let d = tempfile::tempdir().unwrap();
        let l = d.path().join("l");
        let node = Node {
            kind: Some(NodeKind::Symlink),
            link_target: b"does/not/exist".to_vec(),
            mtime: Timespec { sec: 5, nsec: 6 },
            ..Node::default()
        };
        create_symlink(&l, &node).unwrap();
        assert!(apply_metadata(&l, &node, MetadataOptions::default(), None).is_empty());
        let meta = fs::symlink_metadata(&l).unwrap();
        let back = read_node(&l, b"l", &meta, &mut NameCache::new()).unwrap();
        assert_eq!(back.link_target, node.link_target);
        assert_eq!(back.mtime, node.mtime);
        let f = d.path().join("p");
        create_special(
            &f,
            &Node {
                kind: Some(NodeKind::Fifo),
                mode: 0o640,
                ..Node::default()
            },
        )
        .unwrap();
        let meta = fs::symlink_metadata(&f).unwrap();
        assert_eq!(
            read_node(&f, b"p", &meta, &mut NameCache::new())
                .unwrap()
                .kind,
            Some(NodeKind::Fifo)
        );
    }
}
