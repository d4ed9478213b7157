//! The restore plan, made from the snapshot's trees and the index alone before any data is
//! read: every directory and entry with its target path, every file's blocks with their
//! offsets, and every distinct blob with its pack and byte range (the FAST'13 "recipe").

mod planner;
#[cfg(test)]
pub(crate) mod tests;

pub(crate) use planner::Planner;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use arca_format::{Id, Node, NodeKind, NodeRef, Timespec, Xattrs};

use crate::RestoreIssue;

/// No parent (the target directory itself).
pub(crate) const NO_PARENT: u32 = u32::MAX;

/// What a restore applies to an entry: a tree node without what restores do not use (names
/// of owners, change-detection fields, content), in a fraction of a node's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    pub kind: NodeKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: Timespec,
    pub atime: Timespec,
    pub rdev: u64,
    /// Symlink target and extended attributes, when there are any.
    pub extra: Option<Box<(Vec<u8>, Xattrs)>>,
}

impl Meta {
    fn from_node(n: &NodeRef<'_>) -> Self {
        let xattrs: Xattrs = n.xattrs().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        let extra = (!n.link_target.is_empty() || !xattrs.is_empty())
            .then(|| Box::new((n.link_target.to_vec(), xattrs)));
        Self {
            kind: n.kind,
            mode: n.mode,
            uid: n.uid,
            gid: n.gid,
            mtime: n.mtime,
            atime: n.atime,
            rdev: n.rdev,
            extra,
        }
    }

    /// A node carrying this metadata, for the file-system calls (allocates only for symlink
    /// targets and xattrs).
    pub fn node(&self) -> Node {
        let (link_target, xattrs) = self.extra.as_deref().cloned().unwrap_or_default();
        Node {
            kind: Some(self.kind),
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            mtime: self.mtime,
            atime: self.atime,
            rdev: self.rdev,
            link_target,
            xattrs,
            ..Node::default()
        }
    }

    /// The symlink target.
    pub fn link_target(&self) -> &[u8] {
        self.extra.as_deref().map_or(&[], |e| e.0.as_slice())
    }
}

/// A directory of the restore; `dirs[0]` is the target directory itself.
#[derive(Debug)]
pub(crate) struct DirPlan {
    /// Path in the target.
    pub path: PathBuf,
    /// Path in the snapshot (for patterns).
    pub snap_path: PathBuf,
    /// Its metadata (none for the target directory).
    pub meta: Option<Meta>,
    /// Parent directory, [`NO_PARENT`] for the target.
    pub parent: u32,
    /// Whether the directory is restored as a whole (not only to reach included entries).
    pub selected: bool,
    /// Entries and subdirectories of the plan directly inside.
    pub children: u32,
    /// Names the snapshot has in this directory (kept only for `--delete`).
    pub names: Vec<Vec<u8>>,
    /// Whether its listing was read.
    pub listed: bool,
    /// Subfolders the snapshot has here that hold nothing selected (so the plan left them
    /// out), each listed as far down as it goes; kept only for `--delete`, which must still
    /// look in the target's copies of them for selected extras.
    pub bare: Vec<Vec<u8>>,
}

/// How a non-directory entry is restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// A regular file: index into [`Plan::files`].
    File(u32),
    /// A symlink.
    Symlink,
    /// A FIFO, socket or device.
    Special,
    /// A hard link to an earlier entry (index into [`Plan::entries`]).
    Link(u32),
}

/// A non-directory entry (its path is its directory's path and its name, see
/// [`Plan::entry_path`]: a full path per entry would double the plan's size).
#[derive(Debug)]
pub(crate) struct EntryPlan {
    /// File name.
    pub name: Box<[u8]>,
    /// Metadata to apply.
    pub meta: Meta,
    /// Directory holding it.
    pub parent: u32,
    /// How it is restored.
    pub kind: EntryKind,
}

/// A regular file's content.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FilePlan {
    /// Its entry.
    pub entry: u32,
    /// Size in bytes.
    pub size: u64,
    /// Its blocks: `uses[first..end]`.
    pub first: u32,
    /// End of its blocks.
    pub end: u32,
}

/// One block of a file: which blob lands at which offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockUse {
    /// The blob.
    pub blob: u32,
    /// The file (index into [`Plan::files`]).
    pub file: u32,
    /// Offset in the file.
    pub offset: u64,
}

/// A distinct data blob the restore needs.
#[derive(Debug, Clone)]
pub(crate) struct BlobPlan {
    /// Blob id.
    pub id: Id,
    /// Pack position in the index.
    pub pack: u32,
    /// Offset of the sealed blob in its pack.
    pub offset: u32,
    /// Sealed length.
    pub length: u32,
    /// Plain length.
    pub raw_len: u32,
    /// All zeros (a hole): never fetched.
    pub zero: bool,
    /// Not in the index, or not the length the file's listing gives it: it cannot be had
    /// for this use.
    pub missing: bool,
    /// The length the index gives the blob when the listing gives another (a damaged or
    /// forged listing: its bytes would land shifted, cut or padded).
    pub indexed_len: Option<u32>,
}

impl BlobPlan {
    /// Whether it is read from its pack: neither a hole nor missing from the index.
    pub fn in_pack(&self) -> bool {
        !self.zero && !self.missing
    }

    /// Why a missing blob cannot be had.
    pub fn missing_reason(&self) -> String {
        match self.indexed_len {
            Some(n) => format!(
                "the listing gives data blob {} {} bytes, but it holds {n}",
                self.id, self.raw_len
            ),
            None => format!("data blob {} is not in the index", self.id),
        }
    }
}

/// Everything the restore will do, before it does anything.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub dirs: Vec<DirPlan>,
    pub entries: Vec<EntryPlan>,
    pub files: Vec<FilePlan>,
    pub uses: Vec<BlockUse>,
    pub blobs: Vec<BlobPlan>,
    /// For each entry that others hard-link to, the linking entries.
    pub links: HashMap<u32, Vec<u32>>,
    /// For each entry (not a link) whose file had several names in the source, how many it
    /// had there: names the restore leaves out (not selected, outside the backup) may still
    /// share its inode in the target.
    pub source_nlink: HashMap<u32, u64>,
    /// Problems found while planning (unreadable listings).
    pub issues: Vec<RestoreIssue>,
    /// Bytes of all files.
    pub total_bytes: u64,
}

impl Plan {
    /// The blocks of file `f`.
    pub fn file_uses(&self, f: u32) -> &[BlockUse] {
        let fp = &self.files[f as usize];
        &self.uses[fp.first as usize..fp.end as usize]
    }

    /// Path of entry `e` in the target.
    pub fn entry_path(&self, e: u32) -> PathBuf {
        let ep = &self.entries[e as usize];
        self.dirs[ep.parent as usize]
            .path
            .join(OsStr::from_bytes(&ep.name))
    }

    /// Path of file `f` in the target.
    pub fn file_path(&self, f: u32) -> PathBuf {
        self.entry_path(self.files[f as usize].entry)
    }
}
