//! arca's snapshots as a read-only FUSE file system, laid out like restic's mount (by id, by
//! time, by host, by tag), its files read on demand through a bounded block cache.
//!
//! [`mount`] reads the snapshot list and the index, mounts through `fuser` (no libfuse: the
//! kernel's `/dev/fuse`, and the `fusermount3` helper where mounting needs privileges) and
//! serves requests on background threads until the file system is unmounted, by
//! [`Unmounter::unmount`] or by `fusermount3 -u` from outside; [`Mounted::wait`] returns then.
//!
//! Memory stays bounded whatever is read: decrypted data blobs live in an LRU block cache of
//! a fixed size, decoded trees in a smaller one, an open file costs its list of blobs with
//! their offsets, and the kernel's forgotten entries are dropped. Trees are loaded when a
//! folder is first looked into. The snapshot list is read again (cheaply: one listing, and
//! only new snapshot files and the index loaded) when a virtual folder is used and some
//! seconds have passed, so snapshots made while mounted appear.

mod attr;
mod cache;
mod fs;
mod layout;
mod reader;
mod state;

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arca_format::Id;
use arca_repo::{RepoError, Repository, SnapshotFilter};
use fuser::{MountOption, SessionACL, SessionUnmounter};

use crate::state::State;

/// Where the file system reports failures the kernel only sees as EIO (a blob that cannot be
/// read, a snapshot list that cannot be refreshed): one line each.
pub type Report = Arc<dyn Fn(&str) + Send + Sync>;

/// Why mounting, serving or unmounting failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The mountpoint cannot be used.
    #[error("mountpoint {}: {reason}", path.display())]
    Mountpoint {
        /// The mountpoint given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// FUSE is missing on this machine.
    #[error("FUSE is not available: {0}")]
    NoFuse(String),
    /// The kernel or `fusermount3` refused the mount.
    #[error("cannot mount at {}: {source}", path.display())]
    Mount {
        /// The mountpoint.
        path: PathBuf,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// Reading the repository failed.
    #[error("{op}: {source}")]
    Repo {
        /// What was being read.
        op: String,
        /// The failure.
        #[source]
        source: RepoError,
    },
    /// A data blob's plain length is not the one its file's tree gives.
    #[error("data blob {} holds {actual} bytes where its tree says {expected}", id.short())]
    BlobLength {
        /// The blob.
        id: Id,
        /// Length in the tree.
        expected: u32,
        /// Length read.
        actual: u64,
    },
    /// The session serving requests ended with an error.
    #[error("FUSE session at {}: {source}", path.display())]
    Session {
        /// The mountpoint.
        path: PathBuf,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// Unmounting failed.
    #[error("cannot unmount {}: {reason}", path.display())]
    Unmount {
        /// The mountpoint.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl MountError {
    fn repo(op: impl Into<String>, source: RepoError) -> Self {
        MountError::Repo {
            op: op.into(),
            source,
        }
    }
}

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// Let other users (and root) use the mount; the stored modes are then enforced by the
    /// kernel (`default_permissions`). Needs `user_allow_other` in /etc/fuse.conf for
    /// non-root users.
    pub allow_other: bool,
    /// Bytes of decrypted data kept in memory: three quarters for data blobs, a quarter (at
    /// least 4 MiB) for trees.
    pub cache_size: u64,
    /// Least time between two readings of the snapshot list.
    pub refresh_interval: Duration,
    /// Threads answering the kernel's requests.
    pub threads: usize,
}

impl Default for MountOptions {
    fn default() -> Self {
        Self {
            allow_other: false,
            cache_size: 64 << 20,
            refresh_interval: Duration::from_secs(5),
            threads: 4,
        }
    }
}

/// Checks that `path` is an empty folder.
pub fn check_mountpoint(path: &Path) -> Result<(), MountError> {
    let bad = |reason: String| MountError::Mountpoint {
        path: path.to_path_buf(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => bad("does not exist (create an empty folder first)".into()),
        // What a FUSE mount whose process died leaves behind.
        _ if e.raw_os_error() == Some(nix::errno::Errno::ENOTCONN as i32) => bad(format!(
            "{e}: a mount whose process ended is still there; unmount it first \
             (fusermount3 -u {})",
            path.display()
        )),
        _ => bad(e.to_string()),
    })?;
    if !meta.is_dir() {
        return Err(bad("is not a folder".into()));
    }
    let mut entries = std::fs::read_dir(path).map_err(|e| bad(e.to_string()))?;
    if entries.next().is_some() {
        return Err(bad("is not empty".into()));
    }
    Ok(())
}

/// The `fusermount3` helper (or the older `fusermount`): `$FUSERMOUNT_PATH`, then `$PATH`
/// and the usual system folders.
pub fn fusermount() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FUSERMOUNT_PATH").map(PathBuf::from)
        && p.is_file()
    {
        return Some(p);
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map(PathBuf::from));
    ["fusermount3", "fusermount"]
        .iter()
        .flat_map(|name| dirs.iter().map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Checks that FUSE can be used here: the kernel's device and the mount helper. Returns the
/// helper.
pub fn check_fuse() -> Result<PathBuf, MountError> {
    if !Path::new("/dev/fuse").exists() {
        return Err(MountError::NoFuse(
            "/dev/fuse does not exist (load the fuse kernel module: modprobe fuse; in a \
             container, pass the device in)"
                .into(),
        ));
    }
    // fuser opens the device itself before it tries fusermount3: it must be usable by us.
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        let hint = if e.kind() == io::ErrorKind::PermissionDenied {
            " (it is usually crw-rw-rw-: chmod 666 /dev/fuse)"
        } else {
            ""
        };
        return Err(MountError::NoFuse(format!(
            "cannot open /dev/fuse: {e}{hint}"
        )));
    }
    fusermount().ok_or_else(|| {
        MountError::NoFuse(
            "fusermount3 was not found (install FUSE 3's tools: apt-get install fuse3, \
             dnf install fuse3, pacman -S fuse3)"
                .into(),
        )
    })
}

/// Mounts the snapshots of `repo` passing `filter` at `mountpoint` and serves them on
/// background threads; failures while serving go to `report`.
pub fn mount(
    repo: Repository,
    filter: SnapshotFilter,
    mountpoint: &Path,
    opts: &MountOptions,
    report: Report,
) -> Result<Mounted, MountError> {
    let fusermount = check_fuse()?;
    check_mountpoint(mountpoint)?;
    let state = State::load(repo, filter, opts, report)?;
    let snapshots = state.snapshot_count();
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::RO,
        MountOption::NoSuid,
        MountOption::NoDev,
        MountOption::FSName("arca".into()),
        MountOption::Subtype("arca".into()),
    ];
    if opts.allow_other {
        config.acl = SessionACL::All;
        config.mount_options.push(MountOption::DefaultPermissions);
    }
    config.n_threads = Some(opts.threads.max(1));
    let path = mountpoint.to_path_buf();
    let mut session =
        fuser::Session::new(state, mountpoint, &config).map_err(|source| MountError::Mount {
            path: path.clone(),
            source,
        })?;
    let unmounter = Unmounter {
        inner: Arc::new(Mutex::new(session.unmount_callable())),
        requested: Arc::new(AtomicBool::new(false)),
        mountpoint: path.clone(),
        fusermount,
    };
    let thread = std::thread::Builder::new()
        .name("arca-mount".into())
        .spawn(move || session.run())
        .map_err(|source| MountError::Session {
            path: path.clone(),
            source,
        })?;
    Ok(Mounted {
        thread,
        unmounter,
        snapshots,
        path,
    })
}

/// A mounted repository.
#[derive(Debug)]
pub struct Mounted {
    thread: JoinHandle<io::Result<()>>,
    unmounter: Unmounter,
    snapshots: usize,
    path: PathBuf,
}

impl Mounted {
    /// How many snapshots were there when mounting.
    pub fn snapshots(&self) -> usize {
        self.snapshots
    }

    /// Something any thread can unmount with (a signal handler's).
    pub fn unmounter(&self) -> Unmounter {
        self.unmounter.clone()
    }

    /// Waits until the file system is unmounted (by [`Unmounter::unmount`] or from outside).
    pub fn wait(self) -> Result<(), MountError> {
        let path = self.path;
        match self.thread.join() {
            Ok(Ok(())) => Ok(()),
            // Asked to unmount, the kernel may end a detached session by aborting its
            // connection rather than closing it: the file system is gone either way.
            Ok(Err(e))
                if e.raw_os_error() == Some(nix::errno::Errno::ECONNABORTED as i32)
                    && self.unmounter.requested.load(Ordering::Relaxed) =>
            {
                Ok(())
            }
            Ok(Err(source)) => Err(MountError::Session { path, source }),
            Err(_) => Err(MountError::Session {
                path,
                source: io::Error::other("the request thread panicked"),
            }),
        }
    }
}

/// How an unmount went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmounted {
    /// The file system is gone.
    Now,
    /// It was busy (open files, a shell inside): it is detached from the folder tree and the
    /// session ends when the last user lets go. Carries the first attempt's error.
    Lazily(String),
}

/// Unmounts a [`Mounted`] from any thread.
#[derive(Debug, Clone)]
pub struct Unmounter {
    inner: Arc<Mutex<SessionUnmounter>>,
    /// Set once an unmount was asked for (shared by every clone).
    requested: Arc<AtomicBool>,
    mountpoint: PathBuf,
    fusermount: PathBuf,
}

impl Unmounter {
    /// Unmounts; a busy mount is detached lazily (`fusermount3 -u -z`).
    pub fn unmount(&self) -> Result<Unmounted, MountError> {
        self.requested.store(true, Ordering::Relaxed);
        let first = self
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unmount();
        let Err(e) = first else {
            return Ok(Unmounted::Now);
        };
        let out = Command::new(&self.fusermount)
            .args(["-u", "-z", "--"])
            .arg(&self.mountpoint)
            .output();
        match out {
            Ok(o) if o.status.success() => Ok(Unmounted::Lazily(e.to_string())),
            Ok(o) => Err(MountError::Unmount {
                path: self.mountpoint.clone(),
                reason: format!("{e}; {}", String::from_utf8_lossy(&o.stderr).trim()),
            }),
            Err(e2) => Err(MountError::Unmount {
                path: self.mountpoint.clone(),
                reason: format!("{e}; running {}: {e2}", self.fusermount.display()),
            }),
        }
    }

    /// The helper to unmount with from a shell (`fusermount3`).
    pub fn helper_name(&self) -> String {
        self.fusermount
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "fusermount3".into())
    }
}
