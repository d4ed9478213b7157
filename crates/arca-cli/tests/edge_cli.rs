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

/// A bind mount, unmounted when dropped. Made from a shell that went to the mount point's
/// folder one level at a time, so that it may lie deeper than the 4096 bytes a path can
/// have.
struct BindMount(String);

impl BindMount {
    fn new(from: &Path, at: &Path) -> Option<Self> {
        use std::fmt::Write;
        let quote =
            |p: &std::ffi::OsStr| format!("'{}'", p.to_str().unwrap().replace('\'', "'\\''"));
        let mut cd = String::from("cd /");
        for c in at.parent()?.components().skip(1) {
            let c = quote(c.as_os_str());
            let _ = write!(cd, " && mkdir -p {c} && cd {c}");
        }
        let name = quote(at.file_name()?);
        // bash, not dash: dash's cd fails once the path it keeps passes 4096 bytes.
        let made = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "{cd} && mkdir -p {name} && mount --bind {} {name}",
                quote(from.as_os_str())
            ))
            .status()
            .ok()?
            .success();
        made.then(|| BindMount(format!("{cd} && umount {name}")))
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg("-c")
            .arg(&self.0)
            .status();
    }
}

/// `--delete` of a folder the snapshot lacks does not go into a mount point inside it: the
/// mounted file system's files (here a bind mount of a folder outside the target) were
/// deleted, then the mount point itself failed with "Device or resource busy".
/// Also below a path longer than 4096 bytes, where the mount table could not be matched and
/// the mounted file system was emptied (hunt 23).
#[test]
fn restore_delete_leaves_mounted_file_systems_alone() {
    if delete_beside_a_mount(false) {
        assert!(
            delete_beside_a_mount(true),
            "the deep bind mount could not be made"
        );
    }
}

/// False when the bind mount could not be made (not root, no permission).
fn delete_beside_a_mount(deep: bool) -> bool {
    if !arca_testkit::is_root() {
        return false;
    }
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    // The folder the mount lies in: the source itself, or 24 levels of 200-byte names below.
    let mut inner = src.clone();
    if deep {
        for i in 0..24 {
            inner.push(format!("{i:02}{}", "d".repeat(198)));
            arca_fs::io_on_long_path(&inner, |p| fs::create_dir(p)).unwrap();
        }
        assert!(inner.as_os_str().len() > 4096);
    }
    arca_fs::io_on_long_path(&inner.join("f"), |p| fs::write(p, b"file")).unwrap();
    e.ok(&["backup", src.to_str().unwrap()]);
    let outside = e.path("outside");
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("sub/precious"), b"not in the target").unwrap();
    let target = e.path("target");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "latest", "--target", t]);
    let extra = restored(&target, &inner).join("extra");
    let Some(_mount) = BindMount::new(&outside, &extra.join("mnt")) else {
        return false;
    };
    assert!(outside.join("sub/precious").exists());
    // The dry run says what the real run does: the folder is left, reported, exit 3 (it
    // listed the folder as deleted, exit 0).
    let o = e.run(&["restore", "latest", "--target", t, "--delete", "--dry-run"]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(3), "{out}{err}");
    assert!(
        err.contains("mnt is a mount point; nothing removed"),
        "{err}"
    );
    assert!(!out.contains("would delete"), "{out}");
    assert!(out.contains("1 entry would not be deleted"), "{out}");
    let o = e.run(&["restore", "latest", "--target", t, "--delete"]);
    let err = stderr(&o);
    assert!(
        outside.join("sub/precious").exists(),
        "deleted through the mount point: {err}"
    );
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("mnt is a mount point"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error")).count(),
        1,
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("1 entry could not be deleted"), "{out}");
    true
}

/// A mount point where the snapshot has a file, with `--delete`: one error naming it once
/// (it was three: delete, replace, and create "Is a directory"), and the file counted as not
/// restored.
#[test]
fn a_mount_point_in_place_of_a_file_is_one_error() {
    if !arca_testkit::is_root() {
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("x"), b"file").unwrap();
    fs::write(src.join("y"), b"other").unwrap();
    e.ok(&["backup", src.to_str().unwrap()]);
    let outside = e.path("outside");
    fs::create_dir_all(&outside).unwrap();
    let target = e.path("target");
    let x = restored(&target, &src).join("x");
    let Some(_mount) = BindMount::new(&outside, &x) else {
        return;
    };
    let t = target.to_str().unwrap();
    // The dry run says so too (it promised to replace the folder, exit 0: hunt 30); so does
    // a folder in the way holding a mount point deeper down.
    let o = e.run(&["restore", "latest", "--target", t, "--delete", "--dry-run"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = e.run(&["restore", "latest", "--target", t, "--delete"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error")).count(),
        1,
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{}: a directory is in the way, and it is a mount point; nothing removed",
            x.display()
        )),
        "{err}"
    );
    assert_eq!(
        fs::read(restored(&target, &src).join("y")).unwrap(),
        b"other"
    );
    drop(_mount);
    let y = restored(&target, &src).join("y");
    fs::remove_file(&y).unwrap();
    let Some(_deeper) = BindMount::new(&outside, &y.join("m")) else {
        return;
    };
    let o = e.run(&["restore", "latest", "--target", t, "--delete", "--dry-run"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let o = e.run(&["restore", "latest", "--target", t, "--delete"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("/m is a mount point; nothing removed"),
        "{err}"
    );
    assert!(outside.exists());
}

/// A repository of `user` holding a backup of 20 files.
fn small_backup(e: &Env, user: Option<u32>) -> std::path::PathBuf {
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..20 {
        fs::write(
            src.join(format!("f{i}")),
            arca_testkit::random_bytes(i, 100_000),
        )
        .unwrap();
    }
    let init = ["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    for args in [&init[..], &["backup", "-q", src.to_str().unwrap()]] {
        let o = e.run_as(user, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    src
}

/// Under an address-space limit (`ulimit -v`) the commands work with what they are given:
/// `snapshots` failed below about 1.1 GiB (the command thread's 1 GiB stack reservation) and a
/// backup of a few files below 1.6 GiB (glibc's arenas), with a panic or an abort; and a limit
/// too small to start at all is named.
#[test]
fn address_space_limits_are_lived_with_or_named() {
    use nix::sys::resource::Resource::RLIMIT_AS;
    let e = Env::new();
    let src = small_backup(&e, None);
    let mib = |m: u64| m << 20;
    let o = run_limited(e.cmd(&["snapshots"]), RLIMIT_AS, mib(256));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run_limited(
        e.cmd(&["backup", "-q", "--force", src.to_str().unwrap()]),
        RLIMIT_AS,
        mib(400),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let target = e.path("target");
    let o = run_limited(
        e.cmd(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]),
        RLIMIT_AS,
        mib(400),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        fs::read(restored(&target, &src).join("f7")).unwrap(),
        fs::read(src.join("f7")).unwrap()
    );
    let o = run_limited(e.cmd(&["snapshots"]), RLIMIT_AS, mib(48));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("ulimit -v"), "{}", stderr(&o));
}

/// A thread the system refuses (here: a process limit) ends the command with a message and
/// exit code 1, and its lock removed, instead of a panic report (exit 101) and a lock left
/// behind, whichever thread it is.
#[test]
fn refused_threads_end_the_command_cleanly() {
    use nix::sys::resource::Resource::RLIMIT_NPROC;
    let e = Env::new();
    // Root ignores process limits: the commands run as an unprivileged user, who then has
    // no other process (as the tests' own user, the test runner's threads would count).
    let Some(nobody) = e.unprivileged() else {
        return;
    };
    let src = small_backup(&e, Some(nobody));
    let target = e.path("target");
    let runs: [&[&str]; 3] = [
        &["check"],
        &["backup", "-q", "--force", src.to_str().unwrap()],
        &["restore", "-q", "latest", "-t", target.to_str().unwrap()],
    ];
    let mut refused = 0;
    for args in runs {
        for threads in 1..=6 {
            let mut c = e.cmd(args);
            std::os::unix::process::CommandExt::uid(&mut c, nobody);
            std::os::unix::process::CommandExt::gid(&mut c, nobody);
            let o = run_limited(c, RLIMIT_NPROC, threads);
            let err = stderr(&o);
            assert!(!err.contains("panicked"), "{args:?} {threads}: {err}");
            match o.status.code() {
                Some(0) => {}
                Some(1) => {
                    assert!(err.contains("cannot start"), "{args:?} {threads}: {err}");
                    refused += 1;
                }
                other => panic!("{args:?} with {threads} threads: {other:?} {err}"),
            }
            let locks = fs::read_dir(e.repo.join("locks")).unwrap().count();
            assert_eq!(locks, 0, "{args:?} {threads}: lock left behind");
        }
    }
    assert!(
        refused > 3,
        "the limits refused too few threads to test anything"
    );
}

/// A key file that cannot be read does not lock out the passwords of the other keys: opening
/// stopped at the first unreadable key file in name order, so a valid password failed with
/// "Permission denied" on a key that was not its own, depending on the names.
#[test]
fn an_unreadable_key_file_does_not_lock_out_the_others() {
    let e = Env::new();
    let Some(nobody) = e.unprivileged() else {
        return;
    };
    let run = |args: &[&str], password: &str| {
        let mut c = e.cmd(args);
        c.env("ARCA_PASSWORD", password);
        std::os::unix::process::CommandExt::uid(&mut c, nobody);
        std::os::unix::process::CommandExt::gid(&mut c, nobody);
        c.output().unwrap()
    };
    let init = ["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    assert!(run(&init, "one").status.success());
    let second = e.path("second");
    fs::write(&second, "two\n").unwrap();
    let o = run(
        &[
            "key",
            "add",
            "--new-password-file",
            second.to_str().unwrap(),
        ],
        "one",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["key", "list", "--json"], "two");
    let keys: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = |current: bool| {
        keys.as_array()
            .unwrap()
            .iter()
            .find(|k| k["current"] == current)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // The key left readable must sort after the unreadable one (the case that failed): key
    // names are hashes, so the roles follow their order. (Adding keys until the second one
    // sorted higher could fail: 30 tries are few when the first name starts with "f".)
    let (own, good, bad) = if id(true) > id(false) {
        (id(true), "two", "one")
    } else {
        (id(false), "one", "two")
    };
    // Every key but the second password's is made unreadable.
    let mut others = 0;
    for f in fs::read_dir(e.repo.join("keys")).unwrap() {
        let f = f.unwrap();
        if f.file_name().to_str() != Some(own.as_str()) {
            fs::set_permissions(f.path(), fs::Permissions::from_mode(0o000)).unwrap();
            others += 1;
        }
    }
    assert_eq!(others, 1);
    let o = run(&["snapshots"], good);
    assert!(o.status.success(), "{}", stderr(&o));
    // The other password's key is the unreadable one: its error is given, naming the file.
    let o = run(&["snapshots"], bad);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("Permission denied"), "{}", stderr(&o));
    assert!(stderr(&o).contains("keys/"), "{}", stderr(&o));
}

/// A key derivation that cannot have its memory says so: it was reported as "invalid key
/// derivation parameters", which points at a key file that is fine.
#[test]
fn key_derivation_out_of_memory_is_named() {
    use nix::sys::resource::Resource::RLIMIT_AS;
    let e = Env::new();
    e.ok(&[
        "init",
        "--kdf-memory-kib",
        "524288",
        "--kdf-iterations",
        "1",
    ]);
    let o = run_limited(e.cmd(&["snapshots"]), RLIMIT_AS, 320 << 20);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("needs 512 MiB of memory"), "{err}");
    assert!(!err.contains("invalid"), "{err}");
}

/// A file that cannot be written is named once, however many of its blocks meet the error:
/// a restore printed one "create …" line per block of a large file.
#[test]
fn a_file_that_cannot_be_written_is_named_once() {
    let e = Env::new();
    let Some(nobody) = e.unprivileged() else {
        return;
    };
    let run = |args: &[&str]| e.run_as(Some(nobody), args);
    let mut init = vec!["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    init.extend_from_slice(&SMALL_CHUNKS);
    assert!(run(&init).status.success());
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/big"), arca_testkit::random_bytes(1, 3 << 20)).unwrap();
    fs::write(src.join("ok"), b"fine").unwrap();
    let o = run(&["backup", "-q", src.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The folder exists in the target and the user may not write into it.
    let target = e.path("target");
    let d = restored(&target, &src).join("d");
    fs::create_dir_all(&d).unwrap();
    fs::set_permissions(target.as_path(), fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(restored(&target, &src), fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o555)).unwrap();
    let o = run(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(err.matches("d/big").count(), 1, "{err}");
    assert_eq!(
        fs::read(restored(&target, &src).join("ok")).unwrap(),
        b"fine"
    );
}

/// The target replaced by a file during the restore ends it with one message (as a target
/// that disappears), instead of one "Not a directory" line per entry left.
#[test]
fn a_target_replaced_by_a_file_stops_the_restore() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..100 {
        fs::write(
            src.join(format!("f{i}")),
            arca_testkit::random_bytes(i, 4000),
        )
        .unwrap();
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    // Every pack read waits, so the restore is still placing files when the target goes.
    let child = e
        .cmd(&[
            "restore",
            "-q",
            "latest",
            "-t",
            target.to_str().unwrap(),
            "--fetchers",
            "1",
        ])
        .env("ARCA_TEST_FAULTS", "read:pack:always:delay=2s")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !restored(&target, &src).is_dir() {
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    fs::rename(&target, e.path("moved")).unwrap();
    fs::write(&target, b"a file now").unwrap();
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no longer a directory"), "{err}");
    assert!(err.lines().count() <= 2, "{err}");
    assert_eq!(fs::read(&target).unwrap(), b"a file now");
}

/// Holes smaller than a chunk, or at a file's ends, stay holes in a default restore: the
/// files were preallocated whole, which filled them (a 1 MiB hole came back as 1 MiB of
/// allocated zeros); `--no-preallocate` kept them.
#[test]
fn holes_inside_chunks_stay_holes() {
    use std::os::unix::fs::MetadataExt;
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let mut start = fs::File::create(src.join("hole-start")).unwrap();
    start.set_len(3 << 20).unwrap();
    std::io::Seek::seek(&mut start, std::io::SeekFrom::End(0)).unwrap();
    std::io::Write::write_all(&mut start, &arca_testkit::random_bytes(1, 300_000)).unwrap();
    let mut end = fs::File::create(src.join("hole-end")).unwrap();
    std::io::Write::write_all(&mut end, &arca_testkit::random_bytes(2, 300_000)).unwrap();
    end.set_len(3 << 20).unwrap();
    drop((start, end));
    let allocated = |p: &Path| fs::metadata(p).unwrap().blocks() * 512;
    if allocated(&src.join("hole-end")) > 1 << 20 {
        return; // the test folder's file system keeps no holes
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    for name in ["hole-start", "hole-end"] {
        let back = restored(&target, &src).join(name);
        assert_eq!(fs::read(&back).unwrap(), fs::read(src.join(name)).unwrap());
        assert!(
            allocated(&back) < 1 << 20,
            "{name}: {} bytes allocated",
            allocated(&back)
        );
    }
}

/// An attribute larger than the target's file system holds fails that entry only: ext4 says
/// "no space" for it, which stopped the whole restore as a full disk.
#[test]
fn an_attribute_too_large_for_the_target_fails_only_its_file() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    // A tmpfs holds attributes of 8000 bytes; ext4 (with 4 KiB blocks) does not.
    if !arca_testkit::is_root()
        || nix::mount::mount(
            Some("tmpfs"),
            &src,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some("size=4m"),
        )
        .is_err()
    {
        return;
    }
    let _unmount = Unmount(&src);
    let big = vec![b'x'; 8000];
    fs::write(src.join("a"), b"with a large attribute").unwrap();
    if xattr::set(src.join("a"), "user.big", &big).is_err() {
        return;
    }
    for n in ["b", "c"] {
        fs::write(src.join(n), n).unwrap();
    }
    // Many small attributes: more than an ext4 inode has room for.
    fs::write(src.join("m"), b"many").unwrap();
    let many = (0..600).all(|i| {
        xattr::set(
            src.join("m"),
            format!("user.attr_{i}"),
            format!("value_{i}").as_bytes(),
        )
        .is_ok()
    });
    let probe = e.path("probe");
    fs::write(&probe, b"").unwrap();
    if xattr::set(&probe, "user.big", &big).is_ok() {
        return; // the target's file system holds it: nothing to test
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let o = e.run(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("larger than this file system allows"), "{err}");
    // Once a file's room for attributes is full, its further attributes are not tried: one
    // error, not one per attribute left (hundreds).
    if many {
        let m = format!("{}/m (attribute", restored(&target, &src).display());
        assert!(err.matches(&m).count() <= 1, "{err}");
        assert_eq!(
            fs::read(restored(&target, &src).join("m")).unwrap(),
            b"many"
        );
    }
    let back = restored(&target, &src);
    for n in ["b", "c"] {
        assert_eq!(fs::read(back.join(n)).unwrap(), n.as_bytes());
    }
    assert_eq!(fs::read(back.join("a")).unwrap(), b"with a large attribute");
}

/// A target file that is also a name of a file outside the target (a hard link) does not pass
/// the snapshot's metadata on to that file: a restore whose content was in place applied
/// mode, owner, times and attributes to the shared inode. It is replaced instead.
#[test]
fn metadata_does_not_leak_through_hard_links_out_of_the_target() {
    use std::os::unix::fs::MetadataExt;
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for n in ["same-mtime", "other-mtime"] {
        fs::write(src.join(n), n).unwrap();
        fs::set_permissions(src.join(n), fs::Permissions::from_mode(0o640)).unwrap();
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let back = restored(&target, &src);
    fs::create_dir_all(&back).unwrap();
    let outside = e.path("outside");
    fs::create_dir_all(&outside).unwrap();
    for n in ["same-mtime", "other-mtime"] {
        let o = outside.join(n);
        fs::write(&o, n).unwrap();
        fs::set_permissions(&o, fs::Permissions::from_mode(0o600)).unwrap();
        if n == "same-mtime" {
            let m = fs::metadata(src.join(n)).unwrap();
            let t = nix::sys::time::TimeSpec::new(m.mtime(), m.mtime_nsec());
            nix::sys::stat::utimensat(
                nix::fcntl::AT_FDCWD,
                &o,
                &t,
                &t,
                nix::sys::stat::UtimensatFlags::NoFollowSymlink,
            )
            .unwrap();
        }
        fs::hard_link(&o, back.join(n)).unwrap();
    }
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    for n in ["same-mtime", "other-mtime"] {
        let o = fs::metadata(outside.join(n)).unwrap();
        assert_eq!(o.mode() & 0o7777, 0o600, "{n}: the outside file changed");
        assert_eq!(fs::read(outside.join(n)).unwrap(), n.as_bytes());
        let r = fs::metadata(back.join(n)).unwrap();
        assert_eq!(r.mode() & 0o7777, 0o640, "{n}");
        assert_eq!(r.nlink(), 1, "{n}");
        assert_eq!(fs::read(back.join(n)).unwrap(), n.as_bytes());
    }
}

/// A hard-link group the restore made itself keeps its links when only its metadata is
/// wrong: it is fixed in place, not replaced.
#[test]
fn a_restored_link_group_gets_its_metadata_fixed_in_place() {
    use std::os::unix::fs::MetadataExt;
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"linked").unwrap();
    fs::hard_link(src.join("a"), src.join("b")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    let back = restored(&target, &src);
    let ino = fs::metadata(back.join("a")).unwrap().ino();
    fs::set_permissions(back.join("a"), fs::Permissions::from_mode(0o600)).unwrap();
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    for n in ["a", "b"] {
        let m = fs::metadata(back.join(n)).unwrap();
        assert_eq!(m.ino(), ino, "{n} was replaced");
        assert_eq!(
            m.mode() & 0o7777,
            fs::metadata(src.join("a")).unwrap().mode() & 0o7777
        );
    }
}

/// Attributes a user cannot see (`trusted.*`) are stored by root's next backup, although the
/// files are unchanged since the user's: unchanged entries took their attributes from the
/// parent snapshot, so they were never read again, even with `--force`.
#[test]
fn root_stores_the_attributes_a_user_could_not_see() {
    let e = Env::new();
    let Some(nobody) = e.unprivileged() else {
        return;
    };
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    if xattr::set(src.join("f"), "trusted.arca-test", b"root only").is_err() {
        return;
    }
    let init = ["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    for args in [&init[..], &["backup", "-q", src.to_str().unwrap()]] {
        let o = e.run_as(Some(nobody), args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    let back = restored(&target, &src).join("f");
    assert_eq!(
        xattr::get(&back, "trusted.arca-test").unwrap().as_deref(),
        Some(&b"root only"[..])
    );
}

/// A restore stopped by a full disk leaves its unfinished files dated before their snapshot
/// time, so that a rerun with `--overwrite if-newer` restores them again: they had their full
/// size and the time of the write, newer than the snapshot, and were kept wrong with exit 0.
/// Files dated 1970 or earlier in the snapshot too: 1970 was not older than they are.
#[test]
fn files_a_stopped_restore_left_unfinished_are_restored_by_a_rerun() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    // Dated 1960, 1970 (a reproducible build's 0), and now.
    let times = [-315_619_200, 0, -1, i64::MAX];
    for (i, &t) in times.iter().enumerate() {
        let f = src.join(format!("f{i}"));
        fs::write(&f, arca_testkit::random_bytes(i as u64, 3 << 20)).unwrap();
        if t != i64::MAX {
            arca_testkit::generate::set_times(&f, (t, 0), (t, 0)).unwrap();
        }
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    fs::create_dir_all(&target).unwrap();
    let mount = |opts: &str, flags| {
        nix::mount::mount(Some("tmpfs"), &target, Some("tmpfs"), flags, Some(opts))
    };
    if !arca_testkit::is_root() || mount("size=7m", nix::mount::MsFlags::empty()).is_err() {
        return;
    }
    let _unmount = Unmount(&target);
    let restore = |mode: &str| {
        e.run(&[
            "restore",
            "-q",
            "latest",
            "-t",
            target.to_str().unwrap(),
            "--overwrite",
            mode,
        ])
    };
    // The default mode trusted a file whose size and mtime match: an unfinished file dated
    // 1970 matched a snapshot file dated 1970.
    for mode in ["if-newer", "if-changed"] {
        let o = restore(mode);
        assert_eq!(o.status.code(), Some(1), "{mode}: {}", stderr(&o));
        assert!(stderr(&o).contains("No space left"), "{}", stderr(&o));
        mount("size=64m", nix::mount::MsFlags::MS_REMOUNT).unwrap();
        let o = restore(mode);
        assert!(o.status.success(), "{mode}: {}", stderr(&o));
        for i in 0..4 {
            let n = format!("f{i}");
            assert!(
                fs::read(restored(&target, &src).join(&n)).unwrap()
                    == fs::read(src.join(&n)).unwrap(),
                "{mode}: {n} is wrong"
            );
        }
        let top = src.strip_prefix("/").unwrap().components().next().unwrap();
        fs::remove_dir_all(target.join(top)).unwrap();
        mount("size=7m", nix::mount::MsFlags::MS_REMOUNT).unwrap();
    }
}

/// `key passwd` whose new key file is damaged on the way keeps the old key: it said "password
/// changed", removed the old key, and neither password opened the repository any more.
#[test]
fn a_damaged_new_key_changes_nothing() {
    let e = Env::new();
    e.init(&[]);
    let new = e.path("new");
    fs::write(&new, "new password\n").unwrap();
    for args in [
        &[
            "key",
            "passwd",
            "--new-password-file",
            new.to_str().unwrap(),
        ][..],
        &["key", "add", "--new-password-file", new.to_str().unwrap()],
    ] {
        let o = e
            .cmd(args)
            .env("ARCA_TEST_FAULTS", "write:key:always:corrupt")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("did not read back"), "{}", stderr(&o));
        e.ok(&["snapshots"]);
        assert_eq!(fs::read_dir(e.repo.join("keys")).unwrap().count(), 1);
    }
}

/// Commands that replace a snapshot (tag, rewrite --forget) read the replacement back before
/// removing the original: a replacement damaged on the way cost the original, exit 0.
#[test]
fn a_damaged_replacement_snapshot_keeps_the_original() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"keep me").unwrap();
    fs::write(src.join("g"), b"drop me").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let before = e.ok(&["list", "snapshots"]);
    let exclude = src.join("g");
    for args in [
        &["tag", "--add", "x", "latest"][..],
        &[
            "rewrite",
            "--forget",
            "--exclude",
            exclude.to_str().unwrap(),
            "latest",
        ],
    ] {
        let o = e
            .cmd(args)
            .env("ARCA_TEST_FAULTS", "write:snapshot:always:corrupt")
            .output()
            .unwrap();
        assert_ne!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert_eq!(e.ok(&["list", "snapshots"]), before, "{args:?}");
    }
    e.ok(&["check"]);
}

/// `key add`, `key passwd` and `key remove` print nothing with `-q`, as restic's.
#[test]
fn key_commands_are_quiet_with_q() {
    let e = Env::new();
    e.init(&[]);
    let new = e.path("new");
    fs::write(&new, "new password\n").unwrap();
    let n = new.to_str().unwrap();
    let added = e
        .cmd(&["key", "add", "-q", "--new-password-file", n])
        .output()
        .unwrap();
    assert!(added.status.success(), "{}", stderr(&added));
    assert_eq!(String::from_utf8_lossy(&added.stdout), "");
    let keys = e.json(&["key", "list", "--json"]);
    let other = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["current"] != true)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for args in [
        &["key", "remove", "-q", &other][..],
        &["key", "passwd", "-q", "--new-password-file", n],
    ] {
        let o = e.cmd(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "", "{args:?}");
    }
}
