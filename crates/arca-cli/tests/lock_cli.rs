//! Locks from outside: backups share the repository, prune waits for them (refuses while they
//! run and the backup still ends complete), a killed process's lock does not block anyone and
//! `unlock` removes it.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::time::{Duration, Instant};

use arca_testkit::random_bytes;
use common::*;

fn lock_files(e: &Env) -> usize {
    fs::read_dir(e.repo.join("locks"))
        .map(|d| d.flatten().filter(|f| f.file_name().len() == 64).count())
        .unwrap_or(0)
}

fn tree(e: &Env, n: u64) -> std::path::PathBuf {
    let src = e.path("src");
    for i in 0..n {
        let d = src.join(format!("d{}", i % 5));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join(format!("f{i}")), random_bytes(i, 100_000)).unwrap();
    }
    src
}

/// Waits until the repository shows `n` locks (bounded).
fn wait_locks(e: &Env, n: usize) {
    let start = Instant::now();
    while lock_files(e) < n {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no lock appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn prune_refuses_while_a_backup_runs_and_the_backup_completes() {
    let e = Env::new();
    let src = tree(&e, 60);
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
    let s = src.to_str().unwrap();
    e.ok(&["backup", "--quiet", s]);
    assert_eq!(lock_files(&e), 0, "a finished backup leaves no lock");
    fs::write(src.join("new"), random_bytes(999, 3_000_000)).unwrap();
    // A backup whose snapshot takes 10 s to write holds its shared lock meanwhile. (With
    // every request taking 30 ms it held it for 0.3 to 0.6 s, against 0.12 to 0.16 s for the
    // second backup and the prune below: a loaded machine could let it finish first.)
    let backup = e
        .cmd(&["backup", "--json", s])
        .env("ARCA_TEST_FAULTS", "write:snapshot:always:delay=10s")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_locks(&e, 1);
    // A second backup shares the repository, and so do the repairs' dry runs, which only
    // read (they took an exclusive lock and were refused); a real repair is refused.
    e.ok(&["backup", "--quiet", s]);
    e.ok(&["repair", "index", "--dry-run"]);
    e.ok(&["repair", "snapshots", "--dry-run"]);
    let repair = e.run(&["repair", "index"]);
    assert_eq!(repair.status.code(), Some(11), "{}", stderr(&repair));
    let prune = e.run(&["prune"]);
    assert_eq!(prune.status.code(), Some(11), "{}", stderr(&prune));
    let err = stderr(&prune);
    assert!(
        err.contains("locked by backup") && err.contains("shared lock"),
        "{err}"
    );
    let out = backup.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(summary["complete"], true, "{summary}");
    assert_eq!(lock_files(&e), 0);
    // Now prune runs, and everything is intact.
    e.ok(&["prune"]);
    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(0, Vec::len), 0, "{check}");
}

#[test]
fn retry_lock_waits_for_the_holder_and_gives_up_with_exit_11() {
    let e = Env::new();
    let src = tree(&e, 30);
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
    let s = src.to_str().unwrap();
    // A backup whose snapshot takes 5 s to write holds its shared lock meanwhile. (With
    // every request taking 200 ms it held it about a second beyond the prune's 1 s retry: a
    // loaded machine could let it finish first, and the prune then ran.)
    let slow_backup = || {
        e.cmd(&["backup", "--quiet", s])
            .env("ARCA_TEST_FAULTS", "write:snapshot:always:delay=5s")
            .spawn()
            .unwrap()
    };
    let mut backup = slow_backup();
    wait_locks(&e, 1);
    // Too little patience: refused with restic's exit code for a locked repository.
    let t = Instant::now();
    let prune = e.run(&["prune", "--retry-lock", "1s"]);
    assert_eq!(prune.status.code(), Some(11), "{}", stderr(&prune));
    let err = stderr(&prune);
    assert!(err.contains("trying again for up to 1s"), "{err}");
    assert!(
        err.contains("still after trying again for 1s (--retry-lock)"),
        "{err}"
    );
    // The holder, and what to do about it, are said once: the final error points back to
    // the line that named them (it repeated it whole).
    assert_eq!(err.matches("locked by backup").count(), 1, "{err}");
    assert_eq!(err.matches("arca unlock").count(), 1, "{err}");
    assert!(err.contains("by the holder named above"), "{err}");
    assert!(t.elapsed() >= Duration::from_secs(1), "it did not wait");
    assert!(backup.wait().unwrap().success());
    // Enough patience: prune waits for the backup and then runs.
    fs::write(src.join("new"), random_bytes(7, 2_000_000)).unwrap();
    let mut backup = slow_backup();
    wait_locks(&e, 1);
    let prune = e.run(&["prune", "--retry-lock", "5m"]);
    assert!(prune.status.success(), "{}", stderr(&prune));
    assert!(backup.wait().unwrap().success());
    assert_eq!(
        e.json(&["snapshots", "--json"]).as_array().unwrap().len(),
        2
    );
    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(0, Vec::len), 0, "{check}");
    // A bad value is a usage error.
    let bad = e.run(&["prune", "--retry-lock", "soon"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn a_killed_process_leaves_a_stale_lock_that_blocks_nobody() {
    let e = Env::new();
    let src = tree(&e, 30);
    e.init(&SMALL_CHUNKS);
    let s = src.to_str().unwrap();
    let killed = || {
        let mut child = e
            .cmd(&["backup", "--quiet", "--backend-latency", "50ms", s])
            .spawn()
            .unwrap();
        wait_locks(&e, 1);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(lock_files(&e), 1, "SIGKILL leaves the lock file");
    };
    killed();
    // Its process is gone: an exclusive command goes ahead, and deletes the stale lock.
    e.ok(&["prune", "--dry-run"]);
    assert_eq!(lock_files(&e), 0);
    killed();
    let out = e.ok(&["unlock"]);
    assert!(out.contains("removed 1 lock"), "{out}");
    assert_eq!(lock_files(&e), 0);
    e.ok(&["backup", "--quiet", s]);
}

#[test]
fn a_junk_lock_file_blocks_and_plain_unlock_removes_it() {
    let e = Env::new();
    let src = tree(&e, 3);
    e.init(&[]);
    let s = src.to_str().unwrap();
    e.ok(&["backup", "--quiet", s]);
    // A file in locks/ that is no lock as arca writes one (junk, an empty file): it blocks
    // (it was taken for stale once: a backup ran under it), and plain `unlock` removes it
    // (only `--remove-all` did, which removes live locks too).
    let locks = e.repo.join("locks");
    fs::create_dir_all(&locks).unwrap();
    let name = "ab".repeat(32);
    for junk in [&b"not a lock anyone wrote"[..], b""] {
        fs::write(locks.join(&name), junk).unwrap();
        let o = e.run(&["backup", "--quiet", s]);
        assert_eq!(o.status.code(), Some(11), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(&name) && err.contains("is damaged"), "{err}");
        // Its 64-digit name once, not once per part of the message.
        assert_eq!(err.matches(name.as_str()).count(), 1, "{err}");
        assert!(err.contains("`arca unlock` removes it"), "{err}");
        assert!(!err.contains("if that process is gone"), "{err}");
        let o = e.run(&["prune"]);
        assert_eq!(o.status.code(), Some(11), "{}", stderr(&o));
        let out = e.ok(&["unlock"]);
        assert!(out.contains("removed 1 lock"), "{out}");
        assert_eq!(lock_files(&e), 0);
    }
    // `--json` (after or before the command's name): one summary line (it printed the text
    // form).
    for args in [&["unlock", "--json"][..], &["--json", "unlock"]] {
        fs::write(locks.join(&name), b"junk").unwrap();
        let out = e.ok(args);
        assert_eq!(out.lines().count(), 1, "{out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["message_type"], "summary", "{v}");
        assert_eq!(v["removed_locks"], 1, "{v}");
        assert_eq!(v["kept_locks"].as_array().map(Vec::len), Some(0), "{v}");
    }
    assert_eq!(lock_files(&e), 0);
    e.ok(&["backup", "--quiet", s]);
}

/// A number without a unit after one with a unit is refused, as Go's `time.ParseDuration`
/// (restic's) refuses it: `10ms5` was read as 10 ms and 5 s.
#[test]
fn retry_lock_wants_a_unit_after_each_number() {
    let e = Env::new();
    e.init(&[]);
    for bad in ["10ms5", "1m5", "1h-5m", " "] {
        let o = e.run(&["snapshots", "--retry-lock", bad]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {err}");
        assert!(err.contains(&format!("'{bad}'")), "{bad:?}: {err}");
    }
    e.ok(&["snapshots", "--retry-lock", "1m30s"]);
    e.ok(&["snapshots", "--retry-lock", "5"]);
}

/// On a read-only repository, a command that changes it (an exclusive lock: forget, prune)
/// says so; it printed only "Read-only file system". A reading command still points at
/// `--no-lock`.
#[test]
fn a_read_only_repository_says_which_commands_cannot_run() {
    let e = Env::new();
    if !arca_testkit::is_root() {
        return;
    }
    // The repository's own folder is a tmpfs, remounted read-only once it holds a snapshot.
    fs::create_dir_all(&e.repo).unwrap();
    if nix::mount::mount(
        Some("tmpfs"),
        &e.repo,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("size=16m"),
    )
    .is_err()
    {
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    let _unmount = Unmount(e.repo.clone());
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    nix::mount::mount(
        None::<&str>,
        &e.repo,
        None::<&str>,
        nix::mount::MsFlags::MS_REMOUNT | nix::mount::MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .unwrap();
    let o = e.run(&["forget", "--keep-last", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot be written, and forget"),
        "{}",
        stderr(&o)
    );
    let o = e.run(&["check"]);
    assert!(stderr(&o).contains("--no-lock"), "{}", stderr(&o));
    e.ok(&["check", "--no-lock"]);
    // A repair's dry run only reads: it runs with --no-lock, and without it is pointed
    // there (it took an exclusive lock whatever --no-lock said, and said repair writes).
    let packs = e.ok(&["list", "packs"]);
    let pack = packs.lines().next().unwrap().to_string();
    for args in [
        &["repair", "index", "--dry-run"][..],
        &["repair", "snapshots", "--dry-run"],
        &["repair", "packs", &pack, "--dry-run"],
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert!(
            err.contains("--no-lock") && !err.contains("writes to it"),
            "{args:?}: {err}"
        );
        e.ok(&[args, &["--no-lock"]].concat());
    }
    // A backup's dry run writes nothing and takes no lock (hunt 11: it said backup writes).
    let out = e.ok(&["backup", "--dry-run", src.to_str().unwrap()]);
    assert!(out.contains("dry run: nothing was written"), "{out}");
    // Copying from it: told to use --no-lock (it said copy writes to it), which leaves the
    // written target locked.
    let dst = Env::new();
    dst.init(&[]);
    let copy = |extra: &[&str]| {
        dst.cmd(&[extra, &["copy", "--from-repo", e.repo.to_str().unwrap()]].concat())
            .env("ARCA_FROM_PASSWORD", "test password")
            .output()
            .unwrap()
    };
    let o = copy(&[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("to only read the repository, run with --no-lock"),
        "{}",
        stderr(&o)
    );
    let o = copy(&["--no-lock"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        dst.json(&["snapshots", "--json"]).as_array().unwrap().len(),
        1
    );
}

/// A lock that cannot be written for a full disk: the message says the disk is full, and a
/// reading command is pointed at --no-lock, as for a read-only repository.
#[test]
fn a_full_repository_disk_is_named_when_locking() {
    let e = Env::new();
    e.init(&[]);
    let full = |args: &[&str]| {
        e.cmd(args)
            .env("ARCA_TEST_FAULTS", "write:lock:always:nospace")
            .output()
            .unwrap()
    };
    let o = full(&["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("disk is full: free some space, or run with --no-lock"),
        "{}",
        stderr(&o)
    );
    let o = full(&["forget", "--keep-last", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("disk is full: free some space first"),
        "{}",
        stderr(&o)
    );
}

/// Under --json the error line, all a reader parses, names the lock's holder itself (it
/// pointed back at a plain-text line); `--retry-lock 0` does not claim to have tried again.
#[test]
fn a_lock_error_under_json_names_the_holder() {
    let e = Env::new();
    let src = tree(&e, 30);
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
    let mut backup = e
        .cmd(&[
            "backup",
            "--quiet",
            "--backend-latency",
            "1s",
            src.to_str().unwrap(),
        ])
        .spawn()
        .unwrap();
    wait_locks(&e, 1);
    let prune = e.run(&["prune", "--retry-lock", "0"]);
    assert_eq!(prune.status.code(), Some(11), "{}", stderr(&prune));
    assert!(
        !stderr(&prune).contains("trying again"),
        "{}",
        stderr(&prune)
    );
    let prune = e.run(&["prune", "--json", "--retry-lock", "1s"]);
    assert_eq!(prune.status.code(), Some(11), "{}", stderr(&prune));
    let last = stderr(&prune)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    let exit: serde_json::Value = serde_json::from_str(&last).unwrap();
    let message = exit["message"].as_str().unwrap();
    assert!(message.contains("locked by backup"), "{message}");
    assert!(!message.contains("named above"), "{message}");
    let _ = backup.kill();
    let _ = backup.wait();
}

/// `--no-lock` is for commands that only read. A backup with it ran beside a prune, which
/// deleted the data the backup then referenced: exit 0, a damaged snapshot (hunt 29).
/// Commands that write lock all the same, as restic's; their dry runs and readers do not.
#[test]
fn commands_that_write_lock_despite_no_lock() {
    let e = Env::new();
    let src = tree(&e, 3);
    e.init(&[]);
    let s = src.to_str().unwrap();
    e.ok(&["backup", "--quiet", s]);
    // A lock every command must respect (unreadable: taken for a live exclusive one).
    let locks = e.repo.join("locks");
    fs::create_dir_all(&locks).unwrap();
    fs::write(locks.join("cd".repeat(32)), b"held elsewhere").unwrap();
    for args in [
        &["--no-lock", "backup", "--quiet", s][..],
        &["--no-lock", "tag", "--add", "x", "latest"],
        &["--no-lock", "rewrite", "--exclude", "*.nothing", "latest"],
        &["--no-lock", "recover"],
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(11), "{args:?}: {}", stderr(&o));
    }
    for args in [
        &["--no-lock", "snapshots"][..],
        &["--no-lock", "backup", "--dry-run", "--quiet", s],
        &["--no-lock", "tag", "--dry-run", "--add", "x", "latest"],
        &["--no-lock", "recover", "--dry-run"],
    ] {
        e.ok(args);
    }
}

/// As restic's, the commands that read what prune or forget delete take a shared lock:
/// `ls`, `snapshots`, `cat` of repository data and `list blobs` wait for (or are refused
/// by) an exclusive lock; with `--no-lock` they read all the same. A prune ran under an
/// `ls`, and the `ls` failed with "No such file". Names, config and keys need no lock.
#[test]
fn reading_commands_take_a_shared_lock() {
    let e = Env::new();
    let src = tree(&e, 3);
    e.init(&[]);
    let s = src.to_str().unwrap();
    e.ok(&["backup", "--quiet", s]);
    let snap = e.ok(&["list", "snapshots"]).trim().to_string();
    // A lock taken for a live exclusive one (it cannot be read).
    let locks = e.repo.join("locks");
    fs::create_dir_all(&locks).unwrap();
    fs::write(locks.join("ef".repeat(32)), b"held elsewhere").unwrap();
    for args in [
        &["ls", "latest"][..],
        &["snapshots"],
        &["cat", "snapshot", &snap],
        &["list", "blobs"],
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(11), "{args:?}: {}", stderr(&o));
        e.ok(&[&["--no-lock"], args].concat());
    }
    for args in [
        &["list", "snapshots"][..],
        &["cat", "config"],
        &["key", "list"],
    ] {
        e.ok(args);
    }
}
