//! Processes sharing one repository, and commands interrupted at awkward moments, from
//! outside: what `lock_cli`, `crash_suite` and `backup_crash` do not cover.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use arca_testkit::random_bytes;
use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Lock files in the repository.
/// Sends `sig` to a child this test started and has not waited for.
fn signal(child: &Child, sig: Signal) {
    let _ = kill(Pid::from_raw(child.id() as i32), sig);
}

/// Starts `arca ARGS` with the test faults `faults` (`ARCA_TEST_FAULTS`), its output captured.
fn with_faults(e: &Env, args: &[&str], faults: &str) -> Child {
    hangup_default(&mut e.cmd(args))
        .env("ARCA_TEST_FAULTS", faults)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `args` run with the lock refreshed every 100 ms and lost after 300 ms without a refresh,
/// and `faults` injected.
fn with_lock_faults(e: &Env, args: &[&str], faults: &str) -> std::process::Output {
    e.cmd(args)
        .env("ARCA_TEST_LOCK_TIMING", "100,300")
        .env("ARCA_TEST_FAULTS", faults)
        .output()
        .unwrap()
}

/// The command stopped, before it committed, because its lock could not be refreshed.
fn assert_lock_lost(o: &std::process::Output) {
    assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
    assert!(
        stderr(o).contains("could not be refreshed"),
        "{}",
        stderr(o)
    );
}

fn lock_files(e: &Env) -> usize {
    fs::read_dir(e.repo.join("locks"))
        .map(|d| d.flatten().filter(|f| f.file_name().len() == 64).count())
        .unwrap_or(0)
}

/// Waits until the repository shows `n` locks (bounded).
fn wait_locks(e: &Env, n: usize) {
    let start = Instant::now();
    while lock_files(e) < n {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no lock appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_backup_finishing_during_check_is_not_reported_as_damage() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), random_bytes(1, 200_000)).unwrap();
    e.init(&[]);
    let s = src.to_str().unwrap();
    e.ok(&["backup", "--quiet", s]);
    // A check whose listing of the snapshots stalls for a while; a backup (sharing the
    // repository) writes its index file and then its snapshot meanwhile. Check read the
    // index first and the snapshots second: it found the new snapshot's trees in no index,
    // called the snapshot damaged and proposed `repair snapshots --forget`.
    let check = with_faults(
        &e,
        &["check", "--json"],
        "list:snapshot:always:delay=1500ms",
    );
    wait_locks(&e, 1);
    // Past the check's loading of the index (a few requests to a local folder).
    std::thread::sleep(Duration::from_millis(300));
    fs::write(src.join("b"), random_bytes(2, 100_000)).unwrap();
    e.ok(&["backup", "--quiet", s]);
    let out = check.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        report["errors"].as_array().map_or(1, Vec::len),
        0,
        "{report}"
    );
    assert_eq!(
        e.json(&["snapshots", "--json"]).as_array().unwrap().len(),
        2
    );
}

/// `init` options for a cheap key.
const CHEAP_KEY: [&str; 5] = ["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];

/// Dates every file under `dir` two minutes back, as the leftovers of an init interrupted
/// that long ago are.
fn age_files(dir: &std::path::Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let then = nix::sys::time::TimeSpec::new(now.as_secs() as i64 - 120, 0);
    for e in entries.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => age_files(&e.path()),
            // Key files are read-only: their times are set by name.
            Ok(_) => {
                let _ = nix::sys::stat::utimensat(
                    nix::fcntl::AT_FDCWD,
                    &e.path(),
                    &then,
                    &then,
                    nix::sys::stat::UtimensatFlags::NoFollowSymlink,
                );
            }
            Err(_) => {}
        }
    }
}

#[test]
fn init_runs_again_where_an_interrupted_init_stopped() {
    let e = Env::new();
    // An init that stopped before its config (here the config's write is refused; a kill
    // or a full disk leave the same): the folders and a key file are there.
    let o = e
        .cmd(&CHEAP_KEY)
        .env("ARCA_TEST_FAULTS", "write:config:always:denied")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(fs::read_dir(e.repo.join("keys")).unwrap().count(), 1);
    // At once, its key may be another init's about to write its config (removing it left a
    // repository no password opens): refused, the key kept.
    let o = e.run(&CHEAP_KEY);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("another init is creating a repository here"),
        "{}",
        stderr(&o)
    );
    assert_eq!(fs::read_dir(e.repo.join("keys")).unwrap().count(), 1);
    // A minute on, init again clears it (it made nothing: "the folder is not empty").
    age_files(&e.repo);
    e.ok(&CHEAP_KEY);
    assert_eq!(
        e.ok(&["list", "keys"]).lines().count(),
        1,
        "the old key is gone"
    );
    // Killed at points spread over an init's run: init again always works.
    for ms in [5u64, 20, 40, 70, 110] {
        let k = Env::new();
        let mut child = k
            .cmd(&[&CHEAP_KEY[..], &["--backend-latency", "10ms"]].concat())
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(ms));
        let _ = child.kill();
        child.wait().unwrap();
        age_files(&k.repo);
        let o = k.run(&CHEAP_KEY);
        let err = stderr(&o);
        assert!(
            o.status.success() || err.contains("a repository already exists"),
            "{err}"
        );
    }
    // The repository works.
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), random_bytes(3, 50_000)).unwrap();
    e.ok(&["backup", "--quiet", src.to_str().unwrap()]);
    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(1, Vec::len), 0, "{check}");
    // A folder holding anything else is still refused, and left as it was.
    for extra in ["notes.txt", "keys/notes.txt", "data/00/file"] {
        let k = Env::new();
        fs::create_dir_all(k.repo.join("keys")).unwrap();
        fs::create_dir_all(k.repo.join("data/00")).unwrap();
        fs::write(k.repo.join(extra), b"mine").unwrap();
        let o = k.run(&CHEAP_KEY);
        assert!(
            stderr(&o).contains("the folder is not empty"),
            "{}",
            stderr(&o)
        );
        assert_eq!(fs::read(k.repo.join(extra)).unwrap(), b"mine");
    }
}

#[test]
fn two_commands_waiting_for_the_lock_do_not_collide_for_ever() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"f").unwrap();
    e.ok(&["backup", "--quiet", src.to_str().unwrap()]);
    // Two exclusive commands started together (cron jobs of the same minute, say). Each
    // writes its lock and, its first listing of the locks stalled, sees the other's: both
    // back out. They tried again after the same pauses, so in step, colliding at every
    // attempt until both gave up with exit 11 having done nothing.
    let start = Instant::now();
    let children: Vec<_> = ["one", "two"]
        .into_iter()
        .map(|tag| {
            e.cmd(&[
                "--backend-latency",
                "30ms",
                "--retry-lock",
                "10s",
                "tag",
                "--add",
                tag,
                "latest",
            ])
            .env("ARCA_TEST_FAULTS", "list:lock:nth=1:delay=300ms")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert!(start.elapsed() < Duration::from_secs(10));
    let snaps = e.json(&["snapshots", "--json"]);
    let tags = &snaps.as_array().unwrap()[0]["tags"];
    assert_eq!(tags.as_array().map(Vec::len), Some(2), "{snaps}");
}

#[test]
fn restore_and_diff_of_latest_while_a_backup_finishes() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/a"), random_bytes(1, 100_000)).unwrap();
    e.init(&[]);
    let s = src.to_str().unwrap();
    e.ok(&["backup", "--quiet", s]);
    let first = e.ok(&["list", "snapshots"]).trim().to_string();
    let sub = format!("latest:{s}/d");
    let target = e.path("target");
    let t = target.to_str().unwrap();
    // Each command's listing of the snapshots stalls while a backup writes its index and
    // its snapshot. The index was read before `latest` was found: the new snapshot's root
    // was "not in the index" and the restore failed with "invalid snapshot".
    for (i, args) in [
        vec!["restore", "--quiet", "latest", "--target", t],
        vec!["restore", "--quiet", &sub, "--target", t],
        vec!["diff", &first, "latest"],
    ]
    .into_iter()
    .enumerate()
    {
        let child = e
            .cmd(&args)
            .env("ARCA_TEST_FAULTS", "list:snapshot:always:delay=1s")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_locks(&e, 1);
        std::thread::sleep(Duration::from_millis(300));
        fs::write(
            src.join(format!("d/new{i}")),
            random_bytes(10 + i as u64, 50_000),
        )
        .unwrap();
        e.ok(&["backup", "--quiet", s]);
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    // The restores brought back the newest snapshot, with the file of the last backup
    // but one.
    assert!(
        target
            .join(format!("{}/d/new0", s.trim_start_matches('/')))
            .exists()
    );
    assert!(target.join("new1").exists());
}

/// Ctrl-C, SIGTERM or SIGHUP (an ssh session dropped) to a command holding a lock (other than
/// backup, restore and mount, which stop gently on their own) removes the lock before the
/// process ends: a lock left behind kept other hosts waiting half an hour for it to go stale.
#[test]
fn a_signal_to_a_locking_command_removes_its_lock() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), random_bytes(3, 50_000)).unwrap();
    e.init(&[]);
    e.ok(&["backup", "--quiet", src.to_str().unwrap()]);
    let snaps = e.json(&["snapshots", "--json"]);
    let id = snaps[0]["id"].as_str().unwrap().to_string();
    let cases: [(&[&str], Signal); 4] = [
        // Shared: the listing of the snapshots stalls.
        (&["check"], Signal::SIGTERM),
        (&["check"], Signal::SIGHUP),
        // Exclusive.
        (&["forget", "--keep-last", "1"], Signal::SIGINT),
        (&["tag", "--add", "x", &id], Signal::SIGTERM),
    ];
    for (args, sig) in cases {
        // The listing stalls for 30 s; ending within 10 s is ending on the signal, with
        // room for a loaded machine (the bound was 3 s against a 5 s stall).
        let child = with_faults(&e, args, "list:snapshot:always:delay=30s");
        wait_locks(&e, 1);
        signal(&child, sig);
        let started = Instant::now();
        let out = child.wait_with_output().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{args:?} took {:?} to end",
            started.elapsed()
        );
        assert_eq!(out.status.code(), Some(130), "{args:?}: {}", stderr(&out));
        assert_eq!(lock_files(&e), 0, "{args:?} left its lock");
        assert!(
            stderr(&out).contains("lock is removed"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // Nothing waits for a stale lock now: an exclusive command runs at once.
    e.ok(&["tag", "--add", "y", &id]);
}

/// A signal to `mount` while it still loads the repository (after taking its lock, before
/// it mounts and handles signals itself) ends it removing the lock; it was left behind.
#[test]
fn a_signal_to_a_mount_still_loading_removes_its_lock() {
    if !arca_testkit::faultfs::require_fuse() {
        return;
    }
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), random_bytes(4, 10_000)).unwrap();
    e.init(&[]);
    e.ok(&["backup", "--quiet", src.to_str().unwrap()]);
    let mnt = e.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    // The listing of the snapshots stalls: the mount is loading for 20 s.
    let child = with_faults(
        &e,
        &["mount", mnt.to_str().unwrap()],
        "list:snapshot:always:delay=20s",
    );
    wait_locks(&e, 1);
    signal(&child, Signal::SIGTERM);
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    // Against the 20 s stall: at once, with room for a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(lock_files(&e), 0, "the mount left its lock");
    assert!(stderr(&out).contains("lock is removed"), "{}", stderr(&out));
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(mnt.to_str().unwrap()), "mounted after all");
}

/// A command whose lock could not be refreshed for so long that others may take it for
/// stale commits nothing: a backup saved its snapshot (a prune meanwhile could have deleted
/// its data) and a prune deleted. Here refreshes fail, and "long" is 300 ms.
#[test]
fn a_lock_that_could_not_be_refreshed_stops_the_commit() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), random_bytes(1, 200_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let snapshots = || fs::read_dir(e.repo.join("snapshots")).unwrap().count();
    let faulty = |args: &[&str], faults: &str| with_lock_faults(&e, args, faults);
    fs::write(src.join("g"), random_bytes(2, 200_000)).unwrap();
    let o = faulty(
        &["backup", "-q", src.to_str().unwrap()],
        "write:lock:from=2:denied,write:pack:always:delay=800ms",
    );
    assert_lock_lost(&o);
    assert_eq!(snapshots(), 1, "the backup saved its snapshot");
    // The same without the failing refreshes saves it.
    let o = faulty(
        &["backup", "-q", src.to_str().unwrap()],
        "write:pack:always:delay=800ms",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(snapshots(), 2);

    let first = e
        .ok(&["list", "snapshots"])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    e.ok(&["forget", &first]);
    let packs = || e.ok(&["list", "packs"]).lines().count();
    let before = packs();
    let o = faulty(
        &["prune", "--max-unused", "0"],
        "write:lock:from=2:denied,write:index:always:delay=800ms",
    );
    assert_lock_lost(&o);
    assert!(packs() >= before, "the prune deleted packs");
    e.ok(&["check", "--read-data"]);
    e.ok(&["prune", "--max-unused", "0"]);
    e.ok(&["check", "--read-data"]);
}

/// Ctrl-C (or SIGTERM) while a backup uploads its last packs, its sources all read, stops it
/// without a snapshot and with exit 130: the signal was ignored once reading was over, and the
/// backup saved its snapshot and exited 0.
#[test]
fn a_signal_during_the_last_uploads_stops_the_backup() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), random_bytes(5, 3 << 20)).unwrap();
    e.init(&SMALL_CHUNKS);
    // Every pack takes 3 s to upload: the reading is long over when the signal comes.
    let child = with_faults(
        &e,
        &["backup", "--quiet", "--json", src.to_str().unwrap()],
        "write:pack:always:delay=3s",
    );
    wait_locks(&e, 1);
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, Signal::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    // Under --json, said as every fatal error is (it was a plain text line).
    let err = stderr(&out);
    let last: serde_json::Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    assert_eq!(last["message_type"], "exit_error", "{err}");
    assert_eq!(last["code"], 130, "{err}");
    assert!(
        last["message"].as_str().unwrap().contains("interrupted"),
        "{err}"
    );
    assert_eq!(
        fs::read_dir(e.repo.join("snapshots")).unwrap().count(),
        0,
        "a snapshot was saved"
    );
    assert_eq!(lock_files(&e), 0);
    e.ok(&["check"]);
}

/// A second signal to a backup that is stopping ends it at once and still removes its lock:
/// it exited 130 leaving the lock file behind.
#[test]
fn a_second_signal_ends_a_backup_at_once_without_leaving_its_lock() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), random_bytes(6, 3 << 20)).unwrap();
    e.init(&SMALL_CHUNKS);
    let child = with_faults(
        &e,
        &["backup", "--quiet", src.to_str().unwrap()],
        "write:pack:always:delay=20s",
    );
    wait_locks(&e, 1);
    std::thread::sleep(Duration::from_millis(500));
    // A second signal delivered before the first was taken is merged with it (one pending
    // SIGTERM): a second apart, not 200 ms, so that a loaded machine does not merge them.
    for _ in 0..2 {
        signal(&child, Signal::SIGTERM);
        std::thread::sleep(Duration::from_millis(1000));
    }
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(lock_files(&e), 0, "the lock was left behind");
}

/// Ctrl-C stops a backup that waits for a lock with `--retry-lock`: it waited until the lock
/// freed or the whole duration passed (an hour here).
#[test]
fn a_signal_stops_a_backup_waiting_for_a_lock() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"x").unwrap();
    e.init(&[]);
    // A prune holds the exclusive lock while its listing of the snapshots stalls.
    let mut prune = e
        .cmd(&["prune"])
        .env("ARCA_TEST_FAULTS", "list:snapshot:always:delay=30s")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_locks(&e, 1);
    let child = e
        .cmd(&[
            "--retry-lock",
            "1h",
            "backup",
            "--quiet",
            src.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, Signal::SIGINT);
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    prune.kill().unwrap();
    prune.wait().unwrap();
    // The lock stays taken for 30 s: well under that is at once, on a loaded machine too.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted while waiting for the lock"),
        "{}",
        stderr(&out)
    );
}

/// Key changes take locks: `key remove` under a prune's exclusive lock is refused (exit 11),
/// and two removals, each of the other's key, leave one key (they took no lock, and both
/// succeeded, leaving the repository with no key at all).
#[test]
fn key_removals_take_a_lock_and_never_remove_every_key() {
    let e = Env::new();
    e.init(&[]);
    let second = e.path("second");
    fs::write(&second, "other password\n").unwrap();
    e.ok(&[
        "key",
        "add",
        "--new-password-file",
        second.to_str().unwrap(),
    ]);
    let keys: Vec<String> = e.ok(&["list", "keys"]).lines().map(String::from).collect();
    assert_eq!(keys.len(), 2);
    let current = |password: &str| -> String {
        let o = e
            .cmd(&["key", "list", "--json"])
            .env("ARCA_PASSWORD", password)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .find(|k| k["current"] == true)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (first_key, second_key) = (current("test password"), current("other password"));
    let mut prune = e
        .cmd(&["prune"])
        .env("ARCA_TEST_FAULTS", "list:snapshot:always:delay=30s")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_locks(&e, 1);
    let o = e.run(&["key", "remove", &second_key]);
    assert_eq!(o.status.code(), Some(11), "{}", stderr(&o));
    // Both removals wait for the prune, then run one after the other.
    let remove = |password: &str, id: &str| {
        e.cmd(&["--retry-lock", "1m", "key", "remove", id])
            .env("ARCA_PASSWORD", password)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = remove("test password", &second_key);
    let b = remove("other password", &first_key);
    std::thread::sleep(Duration::from_millis(500));
    prune.kill().unwrap();
    prune.wait().unwrap();
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let ok = [&a, &b].iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "{}\n{}", stderr(&a), stderr(&b));
    // Whichever went first, one key is left (counted as files: either password may be gone).
    assert_eq!(fs::read_dir(e.repo.join("keys")).unwrap().count(), 1);
}

/// Two `init`s of one folder at once: one wins, the other fails and leaves no key behind.
/// Both said "created", and the second config replaced the first, so one password opened a
/// key whose repository was gone ("authentication failed").
#[test]
fn racing_inits_leave_one_repository() {
    let e = Env::new();
    let init = |password: &str| {
        e.cmd(&["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"])
            .env("ARCA_PASSWORD", password)
            .env("ARCA_TEST_FAULTS", "write:key:always:delay=1s")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (init("first"), init("second"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let won: Vec<&str> = [("first", &a), ("second", &b)]
        .iter()
        .filter(|(_, o)| o.status.success())
        .map(|(p, _)| *p)
        .collect();
    assert_eq!(won.len(), 1, "{}\n{}", stderr(&a), stderr(&b));
    let lost = if won[0] == "first" { &b } else { &a };
    assert!(
        stderr(lost).contains("meanwhile") || stderr(lost).contains("already"),
        "{}",
        stderr(lost)
    );
    assert_eq!(fs::read_dir(e.repo.join("keys")).unwrap().count(), 1);
    let o = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD", won[0])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `repair index` whose lock could not be refreshed deletes no index file (it went on deleting
/// after its lock might look stale to others).
#[test]
fn repair_index_stops_when_its_lock_could_not_be_refreshed() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), random_bytes(7, 100_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let index = || fs::read_dir(e.repo.join("index")).unwrap().count();
    let before = index();
    let o = with_lock_faults(
        &e,
        &["repair", "index", "--read-all-packs"],
        "write:lock:from=2:denied,read:pack:always:delay=800ms",
    );
    assert_lock_lost(&o);
    assert!(index() >= before);
    e.ok(&["check", "--read-data"]);
}

/// A backup whose lock could not be refreshed writes no index file either: it refused to save
/// its snapshot, but had indexed packs that a prune, taking the lock for stale, could have
/// deleted, and the rerun it advised took them for stored and saved a damaged snapshot.
#[test]
fn a_backup_that_lost_its_lock_writes_no_index() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), random_bytes(8, 2_000_000)).unwrap();
    let index = || fs::read_dir(e.repo.join("index")).unwrap().count();
    let before = index();
    let o = with_lock_faults(
        &e,
        &["backup", src.to_str().unwrap()],
        "write:lock:from=2:denied,write:pack:always:delay=800ms",
    );
    assert_lock_lost(&o);
    assert_eq!(index(), before);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    e.ok(&["check", "--read-data"]);
}

/// `rewrite --dry-run` writes nothing and takes no lock, as tag's and forget's: it ran under
/// no exclusive lock, and failed on a read-only repository.
#[test]
fn rewrite_dry_run_takes_no_lock() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a.key"), b"x").unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let mut prune = e
        .cmd(&["prune"])
        .env("ARCA_TEST_FAULTS", "list:snapshot:always:delay=30s")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_locks(&e, 1);
    let o = e.run(&["rewrite", "--dry-run", "-e", "*.key", "latest"]);
    prune.kill().unwrap();
    prune.wait().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}
