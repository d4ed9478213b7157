//! Reading an entry's metadata (lstat, symlink target, xattrs, owner names) into a [`Node`].

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use arca_format::{Node, NodeKind, Timespec};

use crate::{DirHandle, FsError, Stat};

/// Caches uid → user name and gid → group name lookups.
#[derive(Debug, Default)]
pub struct NameCache {
    users: HashMap<u32, Vec<u8>>,
    groups: HashMap<u32, Vec<u8>>,
}

impl NameCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }
    /// User name of `uid`, empty when unknown.
    pub fn user(&mut self, uid: u32) -> Vec<u8> {
        self.users
            .entry(uid)
            .or_insert_with(|| {
                nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                    .ok()
                    .flatten()
                    .map(|u| u.name.into_bytes())
                    .unwrap_or_default()
            })
            .clone()
    }
    /// Group name of `gid`, empty when unknown.
    pub fn group(&mut self, gid: u32) -> Vec<u8> {
        self.groups
            .entry(gid)
            .or_insert_with(|| {
                nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
                    .ok()
                    .flatten()
                    .map(|g| g.name.into_bytes())
                    .unwrap_or_default()
            })
            .clone()
    }
}

fn ts(sec: i64, nsec: i64) -> Timespec {
    Timespec {
        sec,
        nsec: u32::try_from(nsec.clamp(0, 999_999_999)).unwrap_or(0),
    }
}

/// Reads the extended attributes of `path` without following symlinks, sorted by name.
/// A file system without xattr support yields none.
pub fn read_xattrs(path: &Path) -> Result<arca_format::Xattrs, FsError> {
    collect_xattrs(path, path, xattr::list(path).map(|n| n.collect()))
}

/// [`read_xattrs`] of entry `name` of `dir` (whose path is `path`, named in errors): the
/// entry's own, whatever has been renamed on the way to it since `dir` was opened.
pub fn read_xattrs_at(
    dir: &DirHandle,
    name: &[u8],
    path: &Path,
) -> Result<arca_format::Xattrs, FsError> {
    let at = dir.entry_path(name);
    let at = at.as_deref().unwrap_or(path);
    let names = match dir.xattr_names(name) {
        Some(names) => names,
        None => xattr::list(at).map(|n| n.collect()),
    };
    collect_xattrs(at, path, names)
}

/// The values of the attributes `names` of the entry at `at` (whose path is `path`, named in
/// errors), sorted by name.
fn collect_xattrs(
    at: &Path,
    path: &Path,
    names: io::Result<Vec<std::ffi::OsString>>,
) -> Result<arca_format::Xattrs, FsError> {
    let names = match names {
        Ok(n) => n,
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return Ok(vec![]),
        Err(e) => return Err(FsError::new("list xattrs of", path, e)),
    };
    let mut out = vec![];
    for name in names {
        match xattr::get(at, &name) {
            Ok(Some(v)) => out.push((name.as_bytes().to_vec(), v)),
            // Removed between list and get.
            Ok(None) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENODATA) => {}
            Err(e) => return Err(FsError::xattr("read xattr of", path, name.as_bytes(), e)),
        }
    }
    out.sort();
    Ok(out)
}

/// Whether this process reads files and directories owned by `uid` without moving their
/// atime: `O_NOATIME` is allowed to their owner and to root.
fn reads_keep_atime(uid: u32) -> bool {
    static EUID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let euid = *EUID.get_or_init(|| nix::unistd::geteuid().as_raw());
    euid == 0 || euid == uid
}

/// Builds a node (without content or subtree) from `meta`, the lstat of `path`.
/// The symlink target and xattrs are read from `path`.
pub fn read_node(
    path: &Path,
    name: &[u8],
    meta: &fs::Metadata,
    names: &mut NameCache,
) -> Result<Node, FsError> {
    read_node_since(path, name, meta, names, None)
}

/// Builds a node as [`read_node`] does, but takes the symlink target and the xattrs from
/// `earlier` (the entry at the same path in an earlier snapshot) instead of reading them when
/// it is the same inode with the same change time: Linux moves an inode's ctime whenever its
/// xattrs change (as for any change but reads and atime), and a symlink's target cannot
/// change without a new inode. This saves two path lookups and, on a cold cache, an xattr
/// block read per unchanged entry. Such an entry also keeps the atime of `earlier` when this
/// process cannot read it without moving its atime (symlinks; files and directories of other
/// owners unless root): otherwise the backup's own reads would change the listings.
pub fn read_node_since(
    path: &Path,
    name: &[u8],
    meta: &fs::Metadata,
    names: &mut NameCache,
    earlier: Option<&Node>,
) -> Result<Node, FsError> {
    read_node_at(None, path, name, &Stat::from(meta), names, earlier)
}

/// [`read_node_since`] from an entry's lstat `meta`, reading its symlink target and xattrs
/// as entry `name` of `dir` when given (its metadata then all comes from the directory
/// `dir` is, whatever has been renamed since on the way to it), else by `path` (which
/// errors name either way).
pub fn read_node_at(
    dir: Option<&DirHandle>,
    path: &Path,
    name: &[u8],
    meta: &Stat,
    names: &mut NameCache,
    earlier: Option<&Node>,
) -> Result<Node, FsError> {
    match dir {
        Some(dir) => read_node_short(path, Some(dir), name, meta, names, earlier),
        None => crate::long::fs_on_long_path(path, |p| {
            read_node_short(p, None, name, meta, names, earlier)
        }),
    }
}

fn read_node_short(
    path: &Path,
    dir: Option<&DirHandle>,
    name: &[u8],
    meta: &Stat,
    names: &mut NameCache,
    earlier: Option<&Node>,
) -> Result<Node, FsError> {
    let kind = if meta.is_file() {
        NodeKind::File
    } else if meta.is_dir() {
        NodeKind::Dir
    } else if meta.is_symlink() {
        NodeKind::Symlink
    } else if meta.is_fifo() {
        NodeKind::Fifo
    } else if meta.is_char_device() {
        NodeKind::CharDev
    } else if meta.is_block_device() {
        NodeKind::BlockDev
    } else if meta.is_socket() {
        NodeKind::Socket
    } else {
        return Err(FsError::new(
            "read",
            path,
            io::Error::other("unknown file type"),
        ));
    };
    let ctime = ts(meta.ctime.0, meta.ctime.1);
    let same = earlier.filter(|e| e.kind == Some(kind) && e.inode == meta.ino && e.ctime == ctime);
    // Reading an entry moves its atime where atimes are kept, unless it is opened with
    // O_NOATIME, which only its owner (or root) may do, and which readlink lacks. For an
    // entry unchanged since `earlier` that this process cannot read without moving its
    // atime, the atime seen now is most likely the last backup's own read: taking it would
    // store every listing holding such entries again on every run with nothing changed. The
    // atime of `earlier` is kept instead.
    let atime = match same {
        Some(e) if kind == NodeKind::Symlink || !reads_keep_atime(meta.uid) => e.atime,
        _ => ts(meta.atime.0, meta.atime.1),
    };
    let link_target = match same {
        Some(e) => e.link_target.clone(),
        None if kind == NodeKind::Symlink => match dir {
            Some(dir) => dir.read_link(name),
            None => fs::read_link(path).map(|t| t.into_os_string().into_vec()),
        }
        .map_err(|e| FsError::new("read symlink", path, e))?,
        None => vec![],
    };
    let xattrs = match (same, dir) {
        (Some(e), _) => e.xattrs.clone(),
        (None, Some(dir)) => read_xattrs_at(dir, name, path)?,
        (None, None) => read_xattrs(path)?,
    };
    Ok(Node {
        name: name.to_vec(),
        kind: Some(kind),
        mode: meta.mode & 0o7777,
        uid: meta.uid,
        gid: meta.gid,
        user: names.user(meta.uid),
        group: names.group(meta.gid),
        mtime: ts(meta.mtime.0, meta.mtime.1),
        atime,
        ctime,
        dev: meta.dev,
        inode: meta.ino,
        nlink: meta.nlink,
        rdev: if matches!(kind, NodeKind::CharDev | NodeKind::BlockDev) {
            meta.rdev
        } else {
            0
        },
        size: if kind == NodeKind::File { meta.size } else { 0 },
        link_target,
        xattrs,
        content: vec![],
        subtree: None,
    })
}
