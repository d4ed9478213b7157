//! A small read-only FUSE file system whose directories and files fail the way failing disks
//! and network file systems do: a directory whose listing fails at once, one whose listing
//! fails after its first entries, and a file whose reads fail past its first MiB. Tests mount
//! it to check that such failures are reported, never taken for shorter listings or files.
//!
//! ```text
//! /ok            "ok\n"
//! /bad/          listing fails with EIO
//! /short/        lists "a" and "b", then the next read of the listing fails with EIO
//! /short/a, /b   "a\n", "b\n"
//! /broken        3 MiB; reads below 1 MiB give data, reads at or past 1 MiB fail with EIO
//! ```

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen, Request,
};

/// Where the broken file's reads start failing.
pub const BROKEN_FROM: u64 = 1 << 20;
/// The broken file's size.
pub const BROKEN_SIZE: u64 = 3 << 20;

const ROOT: u64 = 1;
const BAD: u64 = 2;
const SHORT: u64 = 3;
const OK: u64 = 4;
const BROKEN: u64 = 5;
const A: u64 = 6;
const B: u64 = 7;

/// (inode, parent, name, kind)
const ENTRIES: [(u64, u64, &str, FileType); 6] = [
    (BAD, ROOT, "bad", FileType::Directory),
    (BROKEN, ROOT, "broken", FileType::RegularFile),
    (OK, ROOT, "ok", FileType::RegularFile),
    (SHORT, ROOT, "short", FileType::Directory),
    (A, SHORT, "a", FileType::RegularFile),
    (B, SHORT, "b", FileType::RegularFile),
];

fn content(ino: u64) -> &'static [u8] {
    match ino {
        OK => b"ok\n",
        A => b"a\n",
        B => b"b\n",
        _ => b"",
    }
}

fn attr(ino: u64) -> Option<FileAttr> {
    let kind = if ino == ROOT {
        FileType::Directory
    } else {
        ENTRIES.iter().find(|e| e.0 == ino)?.3
    };
    let size = match ino {
        BROKEN => BROKEN_SIZE,
        _ => content(ino).len() as u64,
    };
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    Some(FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: t,
        mtime: t,
        ctime: t,
        crtime: t,
        kind,
        perm: if kind == FileType::Directory {
            0o755
        } else {
            0o644
        },
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    })
}

/// Nothing is cached by the kernel: every listing and read reaches the file system.
const TTL: Duration = Duration::ZERO;

struct Faulty;

impl Filesystem for Faulty {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match ENTRIES
            .iter()
            .find(|e| e.1 == parent.0 && OsStr::new(e.2) == name)
            .and_then(|e| attr(e.0))
        {
            Some(a) => reply.entry(&TTL, &a, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // Every read reaches `read`, in the caller's sizes (no read-ahead hiding a failure).
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino.0 == BROKEN {
            if offset + u64::from(size) > BROKEN_FROM {
                reply.error(Errno::EIO);
            } else {
                reply.data(&vec![0x5a; size as usize]);
            }
            return;
        }
        let c = content(ino.0);
        let start = (offset as usize).min(c.len());
        let end = (start + size as usize).min(c.len());
        reply.data(&c[start..end]);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match ino.0 {
            BAD => return reply.error(Errno::EIO),
            // The first read of the listing gives "a" and "b"; the next one fails.
            SHORT if offset > 0 => return reply.error(Errno::EIO),
            _ => {}
        }
        let children = ENTRIES.iter().filter(|e| e.1 == ino.0);
        for (i, e) in children.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(e.0), i as u64 + 1, e.3, e.2) {
                break;
            }
        }
        reply.ok();
    }
}

/// The file system, mounted; unmounted when dropped.
pub struct FaultFs {
    session: Option<fuser::BackgroundSession>,
    path: PathBuf,
}

impl FaultFs {
    /// Mounts the file system at `mountpoint` (an existing empty directory).
    pub fn mount(mountpoint: &Path) -> std::io::Result<Self> {
        let mut config = fuser::Config::default();
        config.mount_options = vec![MountOption::RO, MountOption::FSName("arca-faultfs".into())];
        let session = fuser::spawn_mount(Faulty, mountpoint, &config)?;
        let fs = Self {
            session: Some(session),
            path: mountpoint.to_path_buf(),
        };
        // Answering: the root can be looked at.
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while fs::metadata(mountpoint.join("ok")).is_err() {
            if std::time::Instant::now() > until {
                return Err(std::io::Error::other("faultfs did not answer within 10 s"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(fs)
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FaultFs {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
    }
}

/// Why FUSE cannot be used here, if it cannot: no `/dev/fuse`, or no `fusermount3` (Debian:
/// fuse3), which mounts for an unprivileged process and unmounts.
pub fn fuse_missing() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    if let Err(e) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("cannot open /dev/fuse: {e}"));
    }
    if fusermount3().is_none() {
        return Some("fusermount3 is not installed (Debian: apt-get install fuse3)".into());
    }
    None
}

/// The `fusermount3` on `PATH`, or in /usr/bin or /bin.
pub fn fusermount3() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/bin", "/bin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|d| d.join("fusermount3"))
        .find(|p| p.is_file())
}

/// Whether a FUSE test can run here; says why not when it cannot. Where FUSE was meant to be
/// installed (`ARCA_REQUIRE_E2E` set, as in CI) a missing piece fails the test instead of
/// skipping it, so a broken install is not hidden.
pub fn require_fuse() -> bool {
    let Some(why) = fuse_missing() else {
        return true;
    };
    assert!(
        std::env::var_os("ARCA_REQUIRE_E2E").is_none(),
        "ARCA_REQUIRE_E2E is set but {why}"
    );
    eprintln!("skipping this FUSE test: {why}");
    false
}
