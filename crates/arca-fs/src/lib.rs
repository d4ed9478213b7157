//! The file-system side of arca, shared by backup and restore: reading an entry's metadata
//! into a tree [`Node`], and creating entries and applying metadata and holes on restore.
//!
//! Paths are handled as raw bytes (`OsStr`), so names that are not UTF-8 pass unchanged.

use std::io;
use std::path::{Path, PathBuf};

mod apply;
mod at;
mod batch;
mod beneath;
mod content;
mod direct;
mod fds;
mod long;
mod mounts;
pub mod pattern;
mod read;
mod sparse;

pub use apply::{
    MetadataOptions, OWNER_OP, SPECIAL_OPS, apply_file_metadata, apply_metadata, create_special,
    create_symlink, file_xattrs_match, metadata_matches, set_times, stat_matches, xattrs_match,
    xattrs_match_at,
};
pub use at::{DirHandle, Stat};
pub use batch::{BatchReader, open_files_allowed};
pub use beneath::{Confined, confine};
pub use content::{
    Listing, copy_range, dir_entries, list_dir_names, list_dir_names_and_ids, list_dir_noatime,
    may_refuse_unix_metadata, open_dir_fd_noatime, open_dir_noatime, open_for_restore,
    open_noatime, preallocate, punch_hole, shares_extents,
};
pub use direct::{
    AlignedBuf, DIRECT_ALIGN, DIRECT_MIN, DirectWrite, direct_span, open_direct, write_pages_direct,
};
pub use fds::patiently;
pub use long::{ShortPath, io_on_long_path, is_too_long, lstat, on_long_path};
pub use mounts::mount_point_within;
pub use read::{NameCache, read_node, read_node_at, read_node_since, read_xattrs, read_xattrs_at};
pub use sparse::{is_zero, write_sparse, write_sparse_over, write_sparse_reserved};

pub use arca_format::Node;

/// How the temporary files arca writes before renaming them into place are named (`.tmp-`
/// and a random or process-specific part).
pub const TEMP_PREFIX: &str = ".tmp-";

/// Whether `e` is a temporary file ([`TEMP_PREFIX`]) last written more than `older_than` ago:
/// one left by a process killed while writing it. False when its age cannot be had.
pub fn is_stale_temp(e: &std::fs::DirEntry, older_than: std::time::Duration) -> bool {
    e.file_name()
        .as_encoded_bytes()
        .starts_with(TEMP_PREFIX.as_bytes())
        && e.metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > older_than)
}

/// A file-system operation failed on a path.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}{detail}: {source}", arca_format::text::shown(path))]
pub struct FsError {
    /// What was being done.
    pub op: &'static str,
    /// The path.
    pub path: PathBuf,
    /// What on the path, when the path alone does not say (empty, or " (attribute x)").
    pub detail: String,
    /// The error.
    #[source]
    pub source: io::Error,
}

impl FsError {
    /// Wraps an I/O error with its operation and path.
    pub fn new(op: &'static str, path: &Path, source: io::Error) -> Self {
        // Refused even to root: an attribute of the entry or its folder says why.
        let detail = if source.raw_os_error() == Some(libc::EPERM) {
            refused_by_attribute(path).unwrap_or_default()
        } else {
            String::new()
        };
        Self {
            op,
            path: path.to_path_buf(),
            detail,
            source,
        }
    }
    /// As [`Self::new`], for extended attribute `name` of `path`.
    pub fn xattr(op: &'static str, path: &Path, name: &[u8], source: io::Error) -> Self {
        Self {
            detail: format!(" (attribute {})", String::from_utf8_lossy(name)),
            ..Self::new(op, path, source)
        }
    }
    /// As [`Self::xattr`], for several attributes failing alike (a few named, the rest
    /// counted).
    pub fn xattrs(op: &'static str, path: &Path, names: &[&[u8]], source: io::Error) -> Self {
        const NAMED: usize = 4;
        if let [name] = names {
            return Self::xattr(op, path, name, source);
        }
        let mut list: Vec<String> = names
            .iter()
            .take(NAMED)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect();
        if names.len() > NAMED {
            list.push(format!("{} more", names.len() - NAMED));
        }
        Self {
            detail: format!(" (attributes {})", list.join(", ")),
            ..Self::new(op, path, source)
        }
    }
    /// Whether this is an error about extended attributes ([`Self::xattr`], [`Self::xattrs`]).
    pub fn is_xattr(&self) -> bool {
        self.detail.starts_with(" (attribute")
    }
    /// Whether the entry no longer exists.
    pub fn is_not_found(&self) -> bool {
        self.source.kind() == io::ErrorKind::NotFound
    }
    /// Whether the disk is full.
    pub fn is_no_space(&self) -> bool {
        matches!(
            self.source.raw_os_error(),
            Some(libc::ENOSPC) | Some(libc::EDQUOT)
        )
    }
}

/// Converts a nix errno into an I/O error.
pub(crate) fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// The statx attributes of `path` (not following a symlink) that the kernel reports, masked
/// by those it supports (`STATX_ATTR_*`).
#[allow(unsafe_code)]
pub(crate) fn statx_attributes(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a zeroed statx is a valid value for the kernel to fill.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `buf` a statx the call may write.
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            0,
            &mut buf,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(buf.stx_attributes & buf.stx_attributes_mask)
}

/// Which of `path` and its folder is immutable or append-only (`chattr +i`, `+a`), said for
/// an operation refused with EPERM ("Operation not permitted" gave no hint of it).
fn refused_by_attribute(path: &Path) -> Option<String> {
    for p in [Some(path), path.parent()].into_iter().flatten() {
        let Ok(attrs) = statx_attributes(p) else {
            continue;
        };
        let what = if attrs & libc::STATX_ATTR_IMMUTABLE as u64 != 0 {
            "immutable (`chattr -i` lifts it)"
        } else if attrs & libc::STATX_ATTR_APPEND as u64 != 0 {
            "append-only (`chattr -a` lifts it)"
        } else {
            continue;
        };
        // The message names `path` already: named again, it read twice.
        let which = if p == path { "it" } else { "its folder" };
        return Some(format!(" ({which} is {what})"));
    }
    None
}
