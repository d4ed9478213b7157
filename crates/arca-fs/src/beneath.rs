//! Keeping a restore inside its target: while a restore runs, every path operation of this
//! crate on a path below its target opens the folder holding the entry beneath the target
//! without following a symlink (`openat2`), so a folder swapped for a symlink mid-restore
//! leads nowhere instead of outside the target.
//!
//! The restore registers its target ([`confine`]); [`crate::io_on_long_path`] (which every
//! path-based call here goes through) then runs the operation on `/proc/self/fd/N/name`, N
//! being the folder so opened. Folders the restore deliberately goes through although the
//! target has them as symlinks (`lib -> usr/lib`, found by the restore's plan) are opened
//! once, at registration, and checked to lie inside the target. Where `openat2` or `/proc`
//! is missing (Linux before 5.6, a seccomp filter, no /proc mounted) paths are used as they
//! are, as before.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat2};
use nix::sys::stat::Mode;

/// A restore target and the folders reached through its symlinks.
#[derive(Debug)]
pub struct Beneath {
    /// The target as the restore names it: the paths it works on start with it.
    root: PathBuf,
    fd: OwnedFd,
    /// Folders the restore goes through although the target has them as symlinks, with the
    /// folder each leads to (inside the target); longest first.
    through: Vec<(PathBuf, OwnedFd)>,
}

/// Registered targets (usually one; `arca ui` may run restores side by side).
static TARGETS: RwLock<Vec<Arc<Beneath>>> = RwLock::new(Vec::new());
/// How many are registered: path operations check it before taking the lock.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Set once `openat2` is refused: paths are then used as they are.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// Keeps a target registered while it lives.
#[derive(Debug)]
pub struct Confined(Option<Arc<Beneath>>);

impl Drop for Confined {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            let mut all = TARGETS.write().unwrap_or_else(|p| p.into_inner());
            all.retain(|x| !Arc::ptr_eq(x, &b));
            COUNT.store(all.len(), Ordering::Release);
        }
    }
}

/// The flags every resolution below a target uses: beneath it, no symlink anywhere.
fn strict() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS
}

/// Registers `root` (an existing folder) for the life of the returned value: operations on
/// paths below it resolve their folders beneath it. `through`: folders below `root` that
/// the target has as symlinks to folders inside it, which operations go through. A link
/// that leads out of the target (now) is left out: paths through it are refused. When the
/// system cannot confine (no `openat2`, no /proc), nothing is registered.
pub fn confine(root: &Path, through: &[PathBuf]) -> Confined {
    if UNSUPPORTED.load(Ordering::Relaxed) || !Path::new("/proc/self/fd").is_dir() {
        return Confined(None);
    }
    let dir = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let Ok(fd) = open(root, dir, Mode::empty()) else {
        return Confined(None);
    };
    // Probe: a kernel without openat2 (or a filter refusing it) says so here.
    match openat2(&fd, ".", OpenHow::new().flags(dir).resolve(strict())) {
        Ok(_) => {}
        Err(_) => {
            UNSUPPORTED.store(true, Ordering::Relaxed);
            return Confined(None);
        }
    }
    let inside = |f: &OwnedFd| {
        let (Ok(real), Ok(top)) = (
            std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())),
            std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())),
        ) else {
            return false;
        };
        real.starts_with(&top)
    };
    let mut links: Vec<(PathBuf, OwnedFd)> = through
        .iter()
        .filter(|p| p.starts_with(root) && *p != root)
        .filter_map(|p| {
            let f = open(p.as_path(), dir, Mode::empty()).ok()?;
            inside(&f).then(|| (p.clone(), f))
        })
        .collect();
    links.sort_by_key(|(p, _)| std::cmp::Reverse(p.as_os_str().len()));
    let b = Arc::new(Beneath {
        root: root.to_path_buf(),
        fd,
        through: links,
    });
    let mut all = TARGETS.write().unwrap_or_else(|p| p.into_inner());
    all.push(b.clone());
    COUNT.store(all.len(), Ordering::Release);
    Confined(Some(b))
}

/// The registered target `path` lies strictly below, if any.
pub(crate) fn target_of(path: &Path) -> Option<Arc<Beneath>> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    let all = TARGETS.read().unwrap_or_else(|p| p.into_inner());
    all.iter()
        .filter(|b| path.starts_with(&b.root) && path != b.root)
        .max_by_key(|b| b.root.as_os_str().len())
        .cloned()
}

/// The error of a path that leads through a symlink the restore does not go through.
fn through_symlink() -> io::Error {
    io::Error::other(
        "a folder on the way is a symlink (not followed: a restore writes only inside its \
         target)",
    )
}

impl Beneath {
    /// The folder `path` is resolved from (the target, or a folder reached through one of
    /// its symlinks) and the rest of the path.
    fn locate<'p>(&self, path: &'p Path) -> Option<(BorrowedFd<'_>, &'p Path)> {
        let (base, rel) = self
            .through
            .iter()
            .find(|(p, _)| path.starts_with(p) && path != p)
            .map_or(
                (self.fd.as_fd(), path.strip_prefix(&self.root)),
                |(p, f)| (f.as_fd(), path.strip_prefix(p)),
            );
        rel.ok().map(|r| (base, r))
    }

    /// Opens `path` (below the target) in one call, its folders resolved as [`Self::run`]
    /// resolves them, with `flags` and `mode` (for a file it creates).
    pub(crate) fn open(&self, path: &Path, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
        let open_plain = |p: &Path| open(p, flags, mode).map_err(io::Error::from);
        let Some((base, rel)) = self.locate(path) else {
            return open_plain(path);
        };
        let how = OpenHow::new().flags(flags).mode(mode).resolve(strict());
        match openat2(base, rel, how) {
            Ok(fd) => Ok(fd),
            // A symlink met: the entry itself (O_NOFOLLOW's ELOOP, which callers act on) or
            // a folder on the way; and a path too long for one call. The folder is then
            // opened on its own, and tells which.
            Err(nix::Error::ELOOP | nix::Error::EXDEV | nix::Error::ENAMETOOLONG) => {
                self.run(path, |e| e, open_plain)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Runs `op` on a name for `path` (below the target) whose folder was opened beneath the
    /// target, through no symlink but the registered ones. `err` makes the caller's error of
    /// a resolution that failed.
    pub(crate) fn run<T, E>(
        &self,
        path: &Path,
        err: impl Fn(io::Error) -> E,
        mut op: impl FnMut(&Path) -> Result<T, E>,
    ) -> Result<T, E> {
        let Some((base, rel)) = self.locate(path) else {
            return op(path);
        };
        let bytes = rel.as_os_str().as_bytes();
        let (dir, name) = match bytes.iter().rposition(|b| *b == b'/') {
            Some(cut) => (&bytes[..cut], &bytes[cut + 1..]),
            None => (&[][..], bytes),
        };
        let opened;
        let folder = if dir.is_empty() {
            base.as_raw_fd()
        } else {
            opened = open_beneath(base, dir).map_err(|e| {
                err(match e.raw_os_error() {
                    Some(libc::ELOOP | libc::EXDEV) => through_symlink(),
                    _ => e,
                })
            })?;
            opened.as_raw_fd()
        };
        let short = PathBuf::from(format!("/proc/self/fd/{folder}")).join(OsStr::from_bytes(name));
        op(&short)
    }
}

/// Opens folder `dir` (relative) beneath `base` through no symlink, a few components at a
/// time when it is longer than the kernel takes at once.
fn open_beneath(base: BorrowedFd<'_>, dir: &[u8]) -> io::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(strict());
    let errno = |e: nix::Error| io::Error::from_raw_os_error(e as i32);
    let mut fd: Option<OwnedFd> = None;
    let mut rest = dir;
    while !rest.is_empty() {
        let mut end = rest.len().min(crate::long::STEP);
        if end < rest.len() {
            end = rest[..end]
                .iter()
                .rposition(|b| *b == b'/')
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENAMETOOLONG))?;
        }
        let step = OsStr::from_bytes(&rest[..end]);
        let next = match &fd {
            Some(f) => openat2(f, step, how),
            None => openat2(base, step, how),
        }
        .map_err(errno)?;
        fd = Some(next);
        rest = rest[end..].strip_prefix(b"/").unwrap_or(&rest[end..]);
    }
    fd.ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::fs;

    /// While a target is registered, a folder of it swapped for a symlink leads nowhere:
    /// nothing is created, read or removed through it; the folders registered as gone
    /// through still are; paths outside the target are used as they are; and once the
    /// registration ends, paths are plain paths again.
    #[test]
    fn a_symlink_in_the_target_is_not_gone_through() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("t");
        let outside = tmp.path().join("outside");
        fs::create_dir_all(target.join("usr/lib")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(&outside, target.join("d")).unwrap();
        std::os::unix::fs::symlink("usr/lib", target.join("lib")).unwrap();
        std::os::unix::fs::symlink(&outside, target.join("out")).unwrap();
        let through = [target.join("lib"), target.join("out")];
        let guard = confine(&target, &through);
        if guard.0.is_none() {
            return; // no openat2 here: nothing to test
        }
        let write = |p: &Path| crate::io_on_long_path(p, |q| fs::write(q, b"x"));
        let e = write(&target.join("d/new")).unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert!(!outside.join("new").exists());
        assert!(crate::io_on_long_path(&target.join("d/secret"), |q| fs::read(q)).is_err());
        assert!(crate::io_on_long_path(&target.join("d/secret"), |q| fs::remove_file(q)).is_err());
        assert!(outside.join("secret").exists());
        // The final component itself is the caller's to treat (O_NOFOLLOW, lstat): here a
        // symlink named is the symlink.
        let m = crate::lstat(&target.join("d")).unwrap();
        assert!(m.file_type().is_symlink());
        // Through a registered link inside the target; not through one leading out.
        write(&target.join("lib/ok")).unwrap();
        assert_eq!(fs::read(target.join("usr/lib/ok")).unwrap(), b"x");
        assert!(write(&target.join("out/new")).is_err());
        assert!(!outside.join("new").exists());
        // Files opened to restore, in one call: through a symlink of the target, refused; a
        // symlink named itself, ELOOP as O_NOFOLLOW says (callers replace it); through a
        // registered link, opened.
        let e = crate::open_for_restore(&target.join("d/new"), 0o644).unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        let e = crate::open_for_restore(&target.join("d"), 0o644).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        assert!(crate::open_noatime(&target.join("d/secret")).is_err());
        crate::open_for_restore(&target.join("lib/file"), 0o644).unwrap();
        assert!(target.join("usr/lib/file").exists());
        assert!(!outside.join("new").exists());
        // Deep below the target, in plain folders.
        let deep = target.join("a/b/c");
        for d in ["a", "a/b", "a/b/c"] {
            crate::io_on_long_path(&target.join(d), |q| fs::create_dir(q)).unwrap();
        }
        write(&deep.join("f")).unwrap();
        assert_eq!(fs::read(deep.join("f")).unwrap(), b"x");
        // Outside the target: as it is.
        write(&outside.join("plain")).unwrap();
        drop(guard);
        write(&target.join("d/after")).unwrap();
        assert!(outside.join("after").exists());
    }
}
