//! `arca mount` for real through FUSE: a tree of every entry kind mounted and compared byte
//! for byte and metadata for metadata with its source, a multi-MB file read at odd offsets,
//! the folders by id, time, host and tag listed, writes refused with EROFS, a snapshot made
//! while mounted appearing, and clean ends by `fusermount3 -u`, SIGINT and SIGTERM (a busy
//! mount detached, the process ending when its last file closes); bad mountpoints refused.
//! FUSE tests are skipped, saying why, where /dev/fuse or fusermount3 is missing (and fail
//! instead when ARCA_REQUIRE_E2E is set, as in CI).

#![allow(clippy::unwrap_used)]

mod common;
#[macro_use]
#[path = "common/mount.rs"]
mod mount;

use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arca_testkit::{compare, generate, is_root, random_bytes};
use common::*;
use mount::*;
use nix::sys::signal::{Signal, kill};

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The snapshots as `snapshots --json` gives them, oldest first: (short id, time folder name).
fn snapshot_names(e: &Env) -> Vec<(String, String)> {
    let v = e.json(&["snapshots", "--json"]);
    let mut out: Vec<(chrono::DateTime<chrono::FixedOffset>, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let t = chrono::DateTime::parse_from_rfc3339(s["time"].as_str().unwrap()).unwrap();
            (t, s["short_id"].as_str().unwrap().to_string())
        })
        .collect();
    out.sort();
    let mut named: Vec<(String, String)> = vec![];
    for (t, id) in out {
        let base = t.format("%Y-%m-%dT%H:%M:%S%:z").to_string();
        let mut name = base.clone();
        let mut n = 1;
        while named.iter().any(|(_, x)| *x == name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        named.push((id, name));
    }
    named
}

fn errno(r: std::io::Result<impl Sized>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

fn unmount_message(mnt: &Path) -> String {
    let m = mnt.display();
    format!("mounted 1 snapshot at {m}; press Ctrl-C or run `fusermount3 -u {m}` to unmount\n")
}

/// A mount ended by a signal said only that it was mounted; or, when the kernel still held a
/// file just read and closed (seen once under a loaded machine), that it was busy and detached.
fn assert_ended_by_signal(stderr: &str, mnt: &Path) {
    let rest = stderr
        .strip_prefix(unmount_message(mnt).as_str())
        .unwrap_or_else(|| panic!("{stderr}"));
    let busy = format!("arca mount: {} is busy", mnt.display());
    assert!(
        rest.is_empty() || (rest.starts_with(&busy) && rest.lines().count() == 1),
        "{stderr}"
    );
}

#[test]
fn mount_shows_snapshots_as_stored_and_ends_with_fusermount() {
    require_fuse!();
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    let g = generate::every_kind(&src, 7).unwrap();
    let big = random_bytes(9, 5_000_000);
    fs::write(src.join("big.bin"), &big).unwrap();
    e.ok(&[
        "backup",
        src.to_str().unwrap(),
        "--host",
        "testhost",
        "--tag",
        "daily",
    ]);
    let snaps = snapshot_names(&e);
    let (short, time) = snaps[0].clone();
    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &["--refresh-interval", "100ms"]);

    // The folders above the snapshots.
    assert_eq!(names(&mnt), ["hosts", "ids", "snapshots", "tags"]);
    assert_eq!(names(&mnt.join("ids")), [short.as_str()]);
    assert_eq!(names(&mnt.join("snapshots")), [time.as_str(), "latest"]);
    assert_eq!(
        fs::read_link(mnt.join("snapshots/latest")).unwrap(),
        Path::new(&time)
    );
    assert_eq!(names(&mnt.join("hosts")), ["testhost"]);
    assert_eq!(
        names(&mnt.join("hosts/testhost")),
        [time.as_str(), "latest"]
    );
    assert_eq!(names(&mnt.join("tags")), ["daily"]);
    assert_eq!(names(&mnt.join("tags/daily")), [time.as_str(), "latest"]);
    let first = src
        .components()
        .nth(1)
        .unwrap()
        .as_os_str()
        .to_str()
        .unwrap();
    assert_eq!(names(&mnt.join("ids").join(&short)), [first]);
    let inside = src.strip_prefix("/").unwrap();
    let snap = mnt.join("ids").join(&short).join(inside);
    assert!(fs::metadata(mnt.join("ids")).unwrap().is_dir());

    // Every entry as stored: kinds, modes, owners, sizes, times (ns), symlinks, devices,
    // xattrs, hard-link groups, then every byte.
    let d = compare::diff_trees(&src, &snap);
    assert!(d.is_empty(), "{}", d.join("\n"));
    let by_time = mnt.join("snapshots/latest").join(inside);
    assert_eq!(
        fs::read(by_time.join("small.txt")).unwrap(),
        b"hello arca\n"
    );
    let by_tag = mnt.join("tags/daily").join(&time).join(inside);
    assert_eq!(fs::read(by_tag.join("big.bin")).unwrap(), big);

    // Metadata stat by stat.
    let (s, a) = (
        fs::symlink_metadata(src.join("small.txt")).unwrap(),
        fs::symlink_metadata(snap.join("small.txt")).unwrap(),
    );
    assert_eq!(
        (a.mode(), a.size(), a.uid(), a.gid(), a.nlink()),
        (s.mode(), 11, s.uid(), s.gid(), 1)
    );
    assert_eq!((a.mtime(), a.mtime_nsec()), (s.mtime(), s.mtime_nsec()));
    assert_eq!((a.atime(), a.atime_nsec()), (s.atime(), s.atime_nsec()));
    if is_root() {
        assert_eq!((a.uid(), a.gid()), (1234, 5678));
    }
    let hard: Vec<_> = ["hard-1", "dir/hard-2", "dir/nested/hard-3"]
        .iter()
        .map(|p| fs::metadata(snap.join(p)).unwrap())
        .collect();
    assert!(
        hard.iter()
            .all(|h| h.nlink() == 3 && h.ino() == hard[0].ino())
    );
    assert_ne!(hard[0].ino(), a.ino());
    assert_eq!(
        fs::read_link(snap.join("link-rel")).unwrap(),
        Path::new("small.txt")
    );
    assert_eq!(
        fs::read_link(snap.join("loop-a")).unwrap(),
        Path::new("loop-b")
    );
    let l = fs::symlink_metadata(snap.join("link-abs")).unwrap();
    assert!(l.file_type().is_symlink());
    assert_eq!(l.size(), "/nonexistent/arca/absolute target".len() as u64);
    assert_eq!(fs::metadata(snap.join("setuid")).unwrap().mode(), 0o104755);
    assert_eq!(fs::metadata(snap.join("sticky")).unwrap().mode(), 0o41777);
    if g.devices {
        let c = fs::symlink_metadata(snap.join("chardev")).unwrap();
        let s = fs::symlink_metadata(src.join("chardev")).unwrap();
        assert!(c.file_type().is_char_device());
        assert_eq!(
            (c.mode(), c.rdev()),
            (s.mode(), nix::sys::stat::makedev(1, 3))
        );
        let b = fs::symlink_metadata(snap.join("blockdev")).unwrap();
        assert!(b.file_type().is_block_device());
        assert_eq!(b.rdev(), nix::sys::stat::makedev(7, 200));
    }

    // Random access at odd offsets, across blob boundaries and past the end.
    let f = fs::File::open(snap.join("big.bin")).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 5_000_000);
    let mut seed = 12345u64;
    let mut offsets: Vec<(u64, usize)> = vec![
        (0, 1),
        (1, 7),
        (65_535, 2),
        (1_000_003, 300_001),
        (4_999_999, 10),
        (5_000_000, 10),
        (6_000_000, 5),
    ];
    for _ in 0..40 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        offsets.push((
            (seed >> 33) % 5_000_000,
            ((seed >> 13) % 200_000) as usize + 1,
        ));
    }
    for (off, len) in offsets {
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            let n = f.read_at(&mut buf[got..], off + got as u64).unwrap();
            if n == 0 {
                break;
            }
            got += n;
        }
        let lo = (off as usize).min(big.len());
        let hi = (off as usize + len).min(big.len());
        assert_eq!(&buf[..got], &big[lo..hi], "{len} bytes at {off}");
    }
    let mut f = f;
    f.seek(SeekFrom::End(-10)).unwrap();
    let mut tail = vec![];
    f.read_to_end(&mut tail).unwrap();
    assert_eq!(tail, &big[big.len() - 10..]);
    f.seek(SeekFrom::Start(777_777)).unwrap();
    let mut piece = [0u8; 4321];
    f.read_exact(&mut piece).unwrap();
    assert_eq!(&piece[..], &big[777_777..777_777 + 4321]);
    drop(f);

    // Read-only.
    let erofs = Some(libc::EROFS);
    assert_eq!(errno(fs::File::create(snap.join("new"))), erofs);
    assert_eq!(
        errno(
            fs::OpenOptions::new()
                .write(true)
                .open(snap.join("small.txt"))
        ),
        erofs
    );
    assert_eq!(errno(fs::create_dir(mnt.join("ids/new"))), erofs);
    assert_eq!(errno(fs::remove_file(snap.join("small.txt"))), erofs);
    assert_eq!(
        errno(fs::rename(snap.join("small.txt"), snap.join("moved"))),
        erofs
    );
    assert_eq!(
        errno(fs::set_permissions(
            snap.join("small.txt"),
            fs::Permissions::from_mode(0o600)
        )),
        erofs
    );
    assert_eq!(
        errno(std::os::unix::fs::symlink("x", snap.join("l"))),
        erofs
    );

    // A snapshot made while mounted appears after a refresh, its new data readable.
    fs::write(src.join("later.txt"), b"made while mounted").unwrap();
    e.ok(&[
        "backup",
        src.to_str().unwrap(),
        "--host",
        "testhost",
        "--tag",
        "weekly",
    ]);
    let snaps = snapshot_names(&e);
    let (short2, time2) = snaps[1].clone();
    let t = Instant::now();
    while names(&mnt.join("ids")).len() < 2 {
        assert!(t.elapsed() < LIMIT, "the new snapshot did not appear");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut ids = vec![short.clone(), short2.clone()];
    ids.sort();
    assert_eq!(names(&mnt.join("ids")), ids);
    assert_eq!(names(&mnt.join("tags")), ["daily", "weekly"]);
    assert_eq!(
        names(&mnt.join("snapshots")),
        [time.as_str(), time2.as_str(), "latest"]
    );
    assert_eq!(
        fs::read_link(mnt.join("snapshots/latest")).unwrap(),
        Path::new(&time2)
    );
    let new = mnt.join("snapshots/latest").join(inside).join("later.txt");
    assert_eq!(fs::read(new).unwrap(), b"made while mounted");

    // `fusermount3 -u` ends the process cleanly.
    let st = Command::new("fusermount3")
        .arg("-u")
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success());
    let st = m.wait_exit();
    assert_eq!(st.code(), Some(0), "{}", m.stderr());
    assert!(!mounted(&mnt));
    assert_eq!(m.stderr(), unmount_message(&mnt));
}

#[test]
fn mount_filters_snapshots_and_ends_on_sigint() {
    require_fuse!();
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    e.ok(&["backup", src.to_str().unwrap(), "--host", "alpha"]);
    e.ok(&[
        "backup",
        src.to_str().unwrap(),
        "--host",
        "beta",
        "--tag",
        "x",
    ]);
    let v = e.json(&["snapshots", "--json", "--host", "alpha"]);
    let alpha = v[0]["short_id"].as_str().unwrap().to_string();
    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &["--host", "alpha"]);
    assert_eq!(names(&mnt.join("ids")), [alpha.as_str()]);
    assert_eq!(names(&mnt.join("hosts")), ["alpha"]);
    assert!(names(&mnt.join("tags")).is_empty());
    let inside = src.strip_prefix("/").unwrap();
    let c = mnt
        .join("ids")
        .join(&alpha)
        .join(inside)
        .join("docs/deep/c.bin");
    assert_eq!(
        fs::read(c).unwrap(),
        fs::read(src.join("docs/deep/c.bin")).unwrap()
    );

    kill(m.pid(), Signal::SIGINT).unwrap();
    let st = m.wait_exit();
    assert_eq!(st.code(), Some(0), "{}", m.stderr());
    assert!(!mounted(&mnt));
    assert_ended_by_signal(&m.stderr(), &mnt);
}

#[test]
fn a_damaged_snapshot_file_is_left_out_of_the_mount() {
    require_fuse!();
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    e.ok(&["backup", src.to_str().unwrap()]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let v = e.json(&["snapshots", "--json"]);
    let (bad, good) = (
        v[0]["id"].as_str().unwrap(),
        v[1]["short_id"].as_str().unwrap(),
    );
    let file = e.repo.join("snapshots").join(bad);
    let mut bytes = fs::read(&file).unwrap();
    bytes[30] ^= 0xff;
    fs::write(&file, &bytes).unwrap();
    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &["--refresh-interval", "100ms"]);
    assert_eq!(names(&mnt.join("ids")), [good]);
    m.wait_stderr("damaged snapshot file");
    // Later snapshots still show.
    e.ok(&["backup", src.to_str().unwrap()]);
    let t = Instant::now();
    while names(&mnt.join("ids")).len() < 2 {
        assert!(
            t.elapsed() < LIMIT,
            "the new snapshot never showed: {}",
            m.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    kill(m.pid(), Signal::SIGINT).unwrap();
    assert_eq!(m.wait_exit().code(), Some(0), "{}", m.stderr());
}

/// A file whose data cannot be read gives EIO, and the mount's message names the blob and the
/// file, once however often the kernel retries (it named neither, for every retry).
#[test]
fn a_lost_pack_is_reported_once_with_its_blob_and_file() {
    require_fuse!();
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("lost.bin"), random_bytes(5, 300_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    // The largest pack holds the file's data.
    let mut packs: Vec<PathBuf> = fs::read_dir(e.repo.join("data"))
        .unwrap()
        .flat_map(|d| fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .collect();
    packs.sort_by_key(|p| fs::metadata(p).unwrap().len());
    fs::remove_file(packs.last().unwrap()).unwrap();
    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &[]);
    let file = mnt
        .join("snapshots/latest")
        .join(src.strip_prefix("/").unwrap())
        .join("lost.bin");
    for _ in 0..3 {
        assert_eq!(errno(fs::read(&file)), Some(libc::EIO));
    }
    m.wait_stderr("lost.bin");
    let err = m.stderr();
    // The file by its path in the mount, the blob once (it was named twice, the file by
    // its name alone).
    let shown = format!("{}/lost.bin\", data blob ", src.display());
    assert!(err.contains("reading file \"/snapshots/20"), "{err}");
    assert!(err.contains(&shown), "{err}");
    assert_eq!(err.matches("lost.bin").count(), 1, "{err}");
    assert_eq!(err.matches("data blob ").count(), 1, "{err}");
    kill(m.pid(), Signal::SIGINT).unwrap();
    assert_eq!(m.wait_exit().code(), Some(0), "{}", m.stderr());
}

#[test]
fn a_mountpoint_reached_through_a_symlink_is_named_as_mounted() {
    require_fuse!();
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    e.ok(&["backup", src.to_str().unwrap()]);
    let mnt = mountpoint(&e);
    let link = e.path("link");
    std::os::unix::fs::symlink(&mnt, &link).unwrap();
    let mut m = Mount::start_via(&e, &link, &mnt, &[]);
    // The unmount command it prints works as printed.
    let st = Command::new("fusermount3")
        .arg("-u")
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(m.wait_exit().code(), Some(0), "{}", m.stderr());
    assert_eq!(m.stderr(), unmount_message(&mnt));
}

#[test]
fn busy_mount_detaches_on_sigterm_and_ends_when_released() {
    require_fuse!();
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    e.ok(&["backup", src.to_str().unwrap()]);
    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &[]);
    let inside = src.strip_prefix("/").unwrap();
    let path = mnt.join("snapshots/latest").join(inside).join("top.bin");
    let want = fs::read(src.join("top.bin")).unwrap();
    let f = fs::File::open(&path).unwrap();

    kill(m.pid(), Signal::SIGTERM).unwrap();
    m.wait_stderr("is busy");
    assert!(!mounted(&mnt), "a busy mount is detached at once");
    assert!(
        m.child.try_wait().unwrap().is_none(),
        "the open file is still served"
    );
    let mut buf = vec![0u8; want.len()];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), want.len());
    assert_eq!(buf, want);
    drop(f);
    let st = m.wait_exit();
    assert_eq!(st.code(), Some(0), "{}", m.stderr());
}

/// A second SIGTERM while a busy mount waits for its last user ends the process at once, and
/// still removes its repository lock.
#[test]
fn a_second_signal_ends_a_busy_mount_and_removes_its_lock() {
    require_fuse!();
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    e.ok(&["backup", src.to_str().unwrap()]);
    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &[]);
    assert_eq!(e.ok(&["list", "locks"]).lines().count(), 1);
    let inside = src.strip_prefix("/").unwrap();
    let f = fs::File::open(mnt.join("snapshots/latest").join(inside).join("top.bin")).unwrap();
    kill(m.pid(), Signal::SIGTERM).unwrap();
    m.wait_stderr("is busy");
    kill(m.pid(), Signal::SIGTERM).unwrap();
    let st = m.wait_exit();
    assert_eq!(st.code(), Some(130), "{}", m.stderr());
    drop(f);
    assert_eq!(e.ok(&["list", "locks"]), "", "the lock was left behind");
}

/// A failure reported while stderr is a closed pipe (`arca mount M 2>&1 | head -1`) does not
/// end the process: the mount keeps serving and still ends cleanly.
#[test]
fn a_closed_stderr_does_not_kill_the_mount() {
    require_fuse!();
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    e.ok(&["backup", src.to_str().unwrap()]);
    let mnt = mountpoint(&e);
    let args = [
        "mount",
        mnt.to_str().unwrap(),
        "--refresh-interval",
        "100ms",
    ];
    let mut child = e
        .cmd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The pipe is closed now; the guard unmounts and ends the process whatever happens.
    let mut m = Mount {
        child,
        mnt: mnt.clone(),
        err: Arc::new(Mutex::new(first.clone())),
    };
    assert!(first.starts_with("mounted 1 snapshot"), "{first}");
    // A damaged snapshot file appearing makes the mount report it.
    let v = e.json(&["snapshots", "--json"]);
    let good = v[0]["id"].as_str().unwrap();
    let snaps = e.repo.join("snapshots");
    let mut bytes = fs::read(snaps.join(good)).unwrap();
    bytes[30] ^= 0xff;
    fs::write(snaps.join("ab".repeat(32)), &bytes).unwrap();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(1) {
        assert_eq!(fs::read_dir(mnt.join("ids")).unwrap().count(), 1);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(m.child.try_wait().unwrap().is_none(), "arca mount ended");
    let inside = src.strip_prefix("/").unwrap();
    let top = mnt.join("snapshots/latest").join(inside).join("top.bin");
    assert_eq!(
        fs::read(top).unwrap(),
        fs::read(src.join("top.bin")).unwrap()
    );
    kill(m.pid(), Signal::SIGINT).unwrap();
    assert_eq!(m.wait_exit().code(), Some(0));
    assert!(!mounted(&mnt));
}

/// Mounting where a killed mount left its dead file system says what it is and how to clear it.
#[test]
fn a_dead_mount_at_the_mountpoint_is_named_with_its_cure() {
    require_fuse!();
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    e.ok(&["backup", src.to_str().unwrap()]);
    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &[]);
    kill(m.pid(), Signal::SIGKILL).unwrap();
    m.wait_exit();
    assert!(mounted(&mnt), "the killed mount stays, dead");
    let o = e.run(&["mount", mnt.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let p = mnt.display();
    assert_eq!(
        stderr(&o),
        format!(
            "arca: mountpoint {p}: Transport endpoint is not connected (os error 107): a mount \
             whose process ended is still there; unmount it first (fusermount3 -u {p})\n"
        )
    );
}

/// `access(X_OK)` (`test -x`, `find -executable`) answers as exec does: only files with an
/// x bit are executable; folders can be searched.
#[test]
fn only_files_with_an_x_bit_are_reported_executable() {
    require_fuse!();
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    fs::write(src.join("plain"), b"data").unwrap();
    fs::set_permissions(src.join("plain"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(src.join("tool"), b"#!/bin/sh\n").unwrap();
    fs::set_permissions(src.join("tool"), fs::Permissions::from_mode(0o750)).unwrap();
    e.ok(&["backup", src.to_str().unwrap()]);
    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &[]);
    let snap = mnt
        .join("snapshots/latest")
        .join(src.strip_prefix("/").unwrap());
    let x = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::X_OK);
    assert_eq!(x(&snap.join("plain")), Err(nix::errno::Errno::EACCES));
    assert_eq!(x(&snap.join("tool")), Ok(()));
    assert_eq!(x(&snap.join("docs")), Ok(()));
    assert_eq!(x(&mnt.join("ids")), Ok(()));
    let r = nix::unistd::access(&snap.join("plain"), nix::unistd::AccessFlags::R_OK);
    assert_eq!(r, Ok(()));
    kill(m.pid(), Signal::SIGINT).unwrap();
    assert_eq!(m.wait_exit().code(), Some(0), "{}", m.stderr());
}

/// The FUSE control file system's folder for the connection serving `f` (its name is the
/// kernel's encoding of the mount's device number), mounting the control file system when
/// it is not; None where that cannot be had.
fn fuse_connection(f: &fs::File) -> Option<PathBuf> {
    let ctl = Path::new("/sys/fs/fuse/connections");
    if fs::read_dir(ctl).ok()?.next().is_none() {
        let _ = Command::new("mount")
            .args(["-t", "fusectl", "fusectl"])
            .arg(ctl)
            .stderr(Stdio::null())
            .status();
    }
    let dev = f.metadata().ok()?.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let id = (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
    let dir = ctl.join(id.to_string());
    dir.join("abort").exists().then_some(dir)
}

/// A detached mount whose connection the kernel aborts (here through the control file
/// system) instead of closing it after the unmount was asked for: the mount still ends
/// cleanly, exit code 0. (CI once saw the kernel end a released mount this way.)
#[test]
fn an_aborted_connection_after_an_unmount_ends_the_mount_cleanly() {
    require_fuse!();
    if !is_root() {
        return;
    }
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    e.ok(&["backup", src.to_str().unwrap()]);
    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &[]);
    let inside = src.strip_prefix("/").unwrap();
    let f = fs::File::open(mnt.join("snapshots/latest").join(inside).join("top.bin")).unwrap();
    let Some(conn) = fuse_connection(&f) else {
        eprintln!("no FUSE control file system here; skipped");
        kill(m.pid(), Signal::SIGINT).unwrap();
        drop(f);
        m.wait_exit();
        return;
    };
    kill(m.pid(), Signal::SIGTERM).unwrap();
    m.wait_stderr("is busy");
    fs::write(conn.join("abort"), "1").unwrap();
    drop(f);
    let st = m.wait_exit();
    assert_eq!(st.code(), Some(0), "{}", m.stderr());
    assert!(!mounted(&mnt));
}

#[test]
fn mount_refuses_unusable_mountpoints() {
    let e = Env::new();
    e.init(&[]);
    let missing = e.path("missing");
    let file = e.path("file");
    fs::write(&file, b"x").unwrap();
    let full = e.path("full");
    fs::create_dir(&full).unwrap();
    fs::write(full.join("x"), b"x").unwrap();
    for (p, why) in [
        (&missing, "does not exist (create an empty folder first)"),
        (&file, "is not a folder"),
        (&full, "is not empty"),
    ] {
        let o = e.run(&["mount", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(
            stderr(&o),
            format!("arca: mountpoint {}: {why}\n", p.display())
        );
    }
    let dir = e.path("empty");
    fs::create_dir(&dir).unwrap();
    let o = e.run(&["mount", dir.to_str().unwrap(), "--cache-size", "lots"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid value 'lots' for '--cache-size <SIZE>'"),
        "{}",
        stderr(&o)
    );
}

/// Under `--allow-other` the kernel checks permissions (default_permissions): a POSIX ACL
/// stored with a file applies as its mode does. The ACL was shown (getfacl) but not applied,
/// and a user it shuts out read the file through the mount (hunt H7).
#[test]
fn allow_other_applies_stored_acls() {
    require_fuse!();
    if !is_root() || Command::new("setfacl").arg("--version").output().is_err() {
        eprintln!("skipped: needs root and setfacl (apt-get install acl)");
        return;
    }
    let e = Env::new();
    e.init(&[]);
    // Every folder on the way open to others, as stored in the snapshot too.
    fs::set_permissions(e.path(""), fs::Permissions::from_mode(0o755)).unwrap();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::set_permissions(&src, fs::Permissions::from_mode(0o755)).unwrap();
    for (name, acl) in [("denied", true), ("open", false)] {
        let f = src.join(name);
        fs::write(&f, b"secret").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        if acl {
            let ok = Command::new("setfacl")
                .args(["-m", "u:nobody:---"])
                .arg(&f)
                .status()
                .unwrap()
                .success();
            if !ok {
                eprintln!("skipped: this file system takes no ACL");
                return;
            }
        }
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let mnt = mountpoint(&e);
    fs::set_permissions(&mnt, fs::Permissions::from_mode(0o755)).unwrap();
    let mut m = Mount::start(&e, &mnt, &["--allow-other"]);
    let dir = mnt
        .join("snapshots/latest")
        .join(src.strip_prefix("/").unwrap());
    let cat_as_nobody = |name: &str| {
        use std::os::unix::process::CommandExt;
        Command::new("cat")
            .arg(dir.join(name))
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap()
    };
    let open = cat_as_nobody("open");
    assert_eq!(open.stdout, b"secret", "{}", stderr(&open));
    let denied = cat_as_nobody("denied");
    assert!(
        !denied.status.success(),
        "read through the mount despite the ACL"
    );
    assert!(
        stderr(&denied).contains("Permission denied"),
        "{}",
        stderr(&denied)
    );
    kill(m.pid(), Signal::SIGINT).unwrap();
    assert_eq!(m.wait_exit().code(), Some(0), "{}", m.stderr());
}
