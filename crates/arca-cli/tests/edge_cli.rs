//! Edge cases of backup and restore met by trying them as a restic user would: read-only
//! files in the target, odd sources and targets.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;

fn restored(target: &Path, src: &Path) -> std::path::PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

/// A file of the target that the user may not write (mode 0444, as a non-root user) and whose
/// content is wrong is replaced, as restic does: it failed with "create …: Permission denied"
/// and exit 3, the old content left in place.
#[test]
fn restore_replaces_read_only_file_of_the_user() {
    let e = Env::new();
    let nobody = e.unprivileged();
    let as_user = |args: &[&str]| {
        let o = e.run_as(nobody, args);
        assert!(o.status.success(), "arca {args:?}: {}", stderr(&o));
        o
    };
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/f"), b"right content\n").unwrap();
    fs::write(src.join("g"), b"other file\n").unwrap();
    as_user(&["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"]);
    as_user(&["backup", src.to_str().unwrap()]);
    let target = e.path("target");
    let t = target.to_str().unwrap();
    as_user(&["restore", "latest", "--target", t]);
    let f = restored(&target, &src).join("d/f");
    // Written in place, the file keeps its owner (the user).
    fs::write(&f, b"WRONG content\n").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o444)).unwrap();
    let o = as_user(&["restore", "latest", "--target", t]);
    assert_eq!(fs::read(&f).unwrap(), b"right content\n", "{}", stderr(&o));
    let mode = fs::metadata(&f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

/// Whether process `pid` holds `path` open.
fn holds_open(pid: u32, path: &Path) -> bool {
    fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
        fds.flatten()
            .any(|fd| fs::read_link(fd.path()).is_ok_and(|t| t == path))
    })
}

/// A file replaced by a FIFO between the listing and the read (a program recreating its
/// files) is skipped with a warning: opening it waited for a writer, and the backup hung for
/// ever (SIGTERM included). The FIFO takes the file's place while arca reads the large file
/// listed before it.
#[test]
fn backup_skips_file_replaced_by_fifo_while_running() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let big = src.join("a-big");
    fs::write(&big, arca_testkit::random_bytes(7, 48 << 20)).unwrap();
    fs::write(src.join("z-small"), b"small").unwrap();
    let fifo = e.path("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let mut child = e
        .cmd(&["backup", "--read-concurrency", "1", src.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !holds_open(child.id(), &big) {
        if child.try_wait().unwrap().is_some() || start.elapsed().as_secs() > 20 {
            panic!(
                "arca never opened {} (read it before the small file?)",
                big.display()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    fs::rename(&fifo, src.join("z-small")).unwrap();
    let swapped = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if swapped.elapsed().as_secs() > 10 {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the backup hangs opening the FIFO that replaced a file");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("z-small: replaced during backup, skipped"),
        "{err}"
    );
}

/// A bind mount, unmounted when dropped.
struct BindMount(std::path::PathBuf);

impl BindMount {
    fn new(from: &Path, at: &Path) -> Option<Self> {
        fs::create_dir_all(at).ok()?;
        let ok = std::process::Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(at)
            .status()
            .ok()?
            .success();
        ok.then(|| BindMount(at.to_path_buf()))
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// `--delete` of a folder the snapshot lacks does not go into a mount point inside it: the
/// mounted file system's files (here a bind mount of a folder outside the target) were
/// deleted, then the mount point itself failed with "Device or resource busy".
#[test]
fn restore_delete_leaves_mounted_file_systems_alone() {
    if !arca_testkit::is_root() {
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"file").unwrap();
    e.ok(&["backup", src.to_str().unwrap()]);
    let outside = e.path("outside");
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("sub/precious"), b"not in the target").unwrap();
    let target = e.path("target");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "latest", "--target", t]);
    let extra = restored(&target, &src).join("extra");
    let Some(_mount) = BindMount::new(&outside, &extra.join("mnt")) else {
        return;
    };
    let o = e.run(&["restore", "latest", "--target", t, "--delete"]);
    let err = stderr(&o);
    assert!(
        outside.join("sub/precious").exists(),
        "deleted through the mount point: {err}"
    );
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("mnt is a mount point"), "{err}");
}
