//! File attributes as the kernel sees them: a snapshot's node as stored (mode, owner, size,
//! times, links, device numbers) and the virtual folders and links above the snapshots.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arca_format::{Id, Node, NodeKind, Timespec};
use fuser::{FileAttr, FileType, INodeNo};

/// Block size reported by `stat`.
const BLKSIZE: u32 = 4096;

/// The FUSE type of a node kind.
pub(crate) fn file_type(k: NodeKind) -> FileType {
    match k {
        NodeKind::File => FileType::RegularFile,
        NodeKind::Dir => FileType::Directory,
        NodeKind::Symlink => FileType::Symlink,
        NodeKind::Fifo => FileType::NamedPipe,
        NodeKind::CharDev => FileType::CharDevice,
        NodeKind::BlockDev => FileType::BlockDevice,
        NodeKind::Socket => FileType::Socket,
    }
}

/// A stored time as a file time (times before 1970 included).
pub(crate) fn system_time(t: Timespec) -> SystemTime {
    let nsec = Duration::from_nanos(u64::from(t.nsec.min(999_999_999)));
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.sec.unsigned_abs()) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + nsec
    }
}

/// A device number as stored (glibc's 64-bit `dev_t`) in the kernel's 32-bit encoding, which
/// FUSE carries: minor's low byte, major, then minor's high bits.
pub(crate) fn kernel_rdev(rdev: u64) -> u32 {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    ((minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)) as u32
}

/// The 512-byte blocks a file's data takes: its size less its all-zero blobs of `hole`'s id
/// (the holes of a sparse file, which restore leaves as holes), so that `du` counts what a
/// restore writes and `cp --sparse=auto` copies a sparse file as sparse.
fn data_blocks(n: &Node, hole: &Id) -> u64 {
    let holes: u64 = n
        .content
        .iter()
        .filter(|c| c.id == *hole)
        .map(|c| u64::from(c.len))
        .sum();
    n.size.saturating_sub(holes).div_ceil(512)
}

/// The attributes of a snapshot's node, shown under inode `ino`; `hole` is the id of an
/// all-zero blob of the chunker's largest size.
pub(crate) fn node_attr(ino: u64, n: &Node, hole: &Id) -> FileAttr {
    let kind = n.kind();
    let size = match kind {
        NodeKind::File => n.size,
        NodeKind::Symlink => n.link_target.len() as u64,
        _ => 0,
    };
    let blocks = match kind {
        NodeKind::File => data_blocks(n, hole),
        _ => size.div_ceil(512),
    };
    let min_links = if kind == NodeKind::Dir { 2 } else { 1 };
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks,
        atime: system_time(n.atime),
        mtime: system_time(n.mtime),
        ctime: system_time(n.ctime),
        crtime: system_time(n.mtime),
        kind: file_type(kind),
        perm: (n.mode & 0o7777) as u16,
        nlink: u32::try_from(n.nlink).unwrap_or(u32::MAX).max(min_links),
        uid: n.uid,
        gid: n.gid,
        rdev: match kind {
            NodeKind::CharDev | NodeKind::BlockDev => kernel_rdev(n.rdev),
            _ => 0,
        },
        blksize: BLKSIZE,
        flags: 0,
    }
}

/// Owner and group of the virtual entries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owner {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// The attributes of a virtual folder (read and search for all).
pub(crate) fn dir_attr(ino: u64, mtime: SystemTime, owner: Owner) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: mtime,
        mtime,
        ctime: mtime,
        crtime: mtime,
        kind: FileType::Directory,
        perm: 0o555,
        nlink: 2,
        uid: owner.uid,
        gid: owner.gid,
        rdev: 0,
        blksize: BLKSIZE,
        flags: 0,
    }
}

/// The attributes of a virtual symbolic link to `target`.
pub(crate) fn link_attr(ino: u64, target: &[u8], mtime: SystemTime, owner: Owner) -> FileAttr {
    let size = target.len() as u64;
    FileAttr {
        size,
        blocks: size.div_ceil(512),
        kind: FileType::Symlink,
        perm: 0o777,
        nlink: 1,
        ..dir_attr(ino, mtime, owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_and_times() {
        // glibc's makedev(1, 3) and makedev(7, 200); makedev(259, 70000) has high minor bits.
        assert_eq!(kernel_rdev(0x103), 0x103);
        assert_eq!(kernel_rdev(0x7c8), 0x7c8);
        let glibc = |major: u64, minor: u64| {
            ((major & 0xfff) << 8)
                | ((major & !0xfff) << 32)
                | (minor & 0xff)
                | ((minor & !0xff) << 12)
        };
        let kernel =
            |major: u32, minor: u32| (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
        assert_eq!(kernel_rdev(glibc(259, 70000)), kernel(259, 70000));
        let t = system_time(Timespec {
            sec: 1_500_000_000,
            nsec: 987_654_321,
        });
        assert_eq!(
            t.duration_since(UNIX_EPOCH).ok(),
            Some(Duration::new(1_500_000_000, 987_654_321))
        );
        let before = system_time(Timespec { sec: -2, nsec: 5 });
        assert_eq!(
            UNIX_EPOCH.duration_since(before).ok(),
            Some(Duration::new(1, 999_999_995))
        );
    }

    #[test]
    fn node_attributes_as_stored() {
        let n = Node {
            name: b"f".to_vec(),
            kind: Some(NodeKind::File),
            mode: 0o4755,
            uid: 1234,
            gid: 5678,
            size: 1000,
            nlink: 3,
            ..Default::default()
        };
        let a = node_attr(9, &n, &Id([7; 32]));
        assert_eq!(
            (a.perm, a.uid, a.gid, a.size, a.nlink),
            (0o4755, 1234, 5678, 1000, 3)
        );
        assert_eq!((a.kind, a.blocks), (FileType::RegularFile, 2));
        let l = Node {
            kind: Some(NodeKind::Symlink),
            link_target: b"../x".to_vec(),
            ..Default::default()
        };
        let a = node_attr(2, &l, &Id([7; 32]));
        assert_eq!((a.size, a.nlink), (4, 1));
    }

    /// A sparse file's holes (its all-zero blobs of the largest size) take no blocks: `du`
    /// of a mounted 3 GiB file with 100 KiB of data showed 3 GiB, and `cp -a` out of the
    /// mount wrote every zero, the file no longer looking sparse.
    #[test]
    fn a_sparse_files_holes_take_no_blocks() {
        let hole = Id([7; 32]);
        let blob = |id: u8, len: u32| arca_format::ContentRef {
            id: Id([id; 32]),
            len,
        };
        let n = Node {
            kind: Some(NodeKind::File),
            size: (8 << 20) * 3 + 1000 + 513,
            content: vec![
                blob(1, 1000),
                blob(7, 8 << 20),
                blob(7, 8 << 20),
                blob(2, 513),
                blob(7, 8 << 20),
            ],
            ..Default::default()
        };
        let a = node_attr(3, &n, &hole);
        assert_eq!((a.size, a.blocks), ((8 << 20) * 3 + 1513, 3));
        // A file without holes takes its size.
        let full = Node {
            content: vec![blob(1, 1000), blob(2, 513)],
            size: 1513,
            ..n
        };
        assert_eq!(node_attr(3, &full, &hole).blocks, 3);
    }
}
