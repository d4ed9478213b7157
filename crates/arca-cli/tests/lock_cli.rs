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
    // A slow backup (every request takes 30 ms) holds its shared lock for a while.
    let backup = e
        .cmd(&["backup", "--json", "--backend-latency", "30ms", s])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_locks(&e, 1);
    // A second backup shares the repository.
    e.ok(&["backup", "--quiet", s]);
    let prune = e.run(&["prune"]);
    assert_eq!(prune.status.code(), Some(1), "{}", stderr(&prune));
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
fn a_killed_process_leaves_a_stale_lock_that_blocks_nobody() {
    let e = Env::new();
    let src = tree(&e, 30);
    e.init(&SMALL_CHUNKS);
    let s = src.to_str().unwrap();
    let mut child = e
        .cmd(&["backup", "--quiet", "--backend-latency", "50ms", s])
        .spawn()
        .unwrap();
    wait_locks(&e, 1);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(lock_files(&e), 1, "SIGKILL leaves the lock file");
    // Its process is gone: an exclusive command goes ahead.
    e.ok(&["prune", "--dry-run"]);
    let out = e.ok(&["unlock"]);
    assert!(out.contains("removed 1 lock"), "{out}");
    assert_eq!(lock_files(&e), 0);
    e.ok(&["backup", "--quiet", s]);
}
