//! The restore network under pressure: blocks decoded once and copied locally, memory within
//! the budget when every file shares a pack, Belady eviction and re-reads, no deadlock with
//! channels of capacity 1 and a budget of one block, the watchdog, and Ctrl-C.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arca_backend::{Backend, Fault, FaultBackend, FileType, LocalBackend, Op, Rule, Trigger};
use arca_restore::{RestoreError, Tuning};
use arca_testkit::{compare, random_bytes};
use common::*;

/// Runs `f` on a thread and fails the test if it does not finish within `limit` (a hang).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("did not finish within {limit:?}: deadlock or hang"))
}

fn exact(src: &Path, target: &Path) {
    let d = compare::diff_trees(src, &restored(target, src));
    assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));
}

#[test]
fn duplicate_blocks_are_decoded_once_and_later_uses_copied_locally() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    with_duplicates(&src);
    let repo = init(local(&tmp.path().join("repo")));
    do_backup(&repo, &src).unwrap();
    compare::snapshot(&src).unwrap();

    // Everything admitted at once: all uses of a block are written from the one decoded copy.
    let t1 = tmp.path().join("t1");
    let (r, _) = restore_with(&repo, "latest", &t1, |_| {});
    let r = r.unwrap();
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert_eq!(r.blocks_decoded, r.plan.blobs_to_fetch);
    assert!(r.plan.bytes_to_copy > 0, "the tree has duplicates");
    // Counted as the plan counts them: copies, however they were made.
    assert_eq!(r.bytes_copied, r.plan.bytes_to_copy, "{r:?}");
    exact(&src, &t1);

    // One file at a time: a block already on disk is copied from there (copy_file_range), not
    // fetched or decoded again.
    let t2 = tmp.path().join("t2");
    let (r, _) = restore_with(&repo, "latest", &t2, |o| {
        o.tuning = Tuning {
            window: 1,
            ..Tuning::default()
        }
    });
    let r = r.unwrap();
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert!(r.blocks_copied > 0 && r.bytes_copied > 0, "{r:?}");
    assert_eq!(r.bytes_copied, r.plan.bytes_to_copy, "{r:?}");
    assert!(r.blocks_decoded <= r.plan.blobs_to_fetch + r.rereads);
    exact(&src, &t2);
}

/// Two packs whose blocks the restored files need alternately: files `a/NN` hold the
/// content of `p/NN` (first pack) for even NN and of `q/NN` (second pack) for odd NN.
fn interleaved(
    root: &Path,
) -> (
    Arc<FaultBackend<LocalBackend>>,
    arca_repo::Repository,
    PathBuf,
) {
    let src = root.join("src");
    let fb = Arc::new(FaultBackend::new(LocalBackend::new(root.join("repo"))));
    let b: Arc<dyn Backend> = fb.clone();
    let repo = init(b);
    // Files below the minimum chunk size are one blob each.
    let content = |set: u64, i: u64| random_bytes(set * 1000 + i, 12_000);
    fs::create_dir_all(src.join("p")).unwrap();
    for i in 0..30 {
        fs::write(src.join(format!("p/{i:02}")), content(1, i)).unwrap();
    }
    do_backup_ordered(&repo, &src).unwrap();
    fs::create_dir_all(src.join("q")).unwrap();
    for i in 0..30 {
        fs::write(src.join(format!("q/{i:02}")), content(2, i)).unwrap();
    }
    do_backup_ordered(&repo, &src).unwrap();
    fs::create_dir_all(src.join("a")).unwrap();
    for i in 0..30 {
        fs::write(
            src.join(format!("a/{i:02}")),
            content(if i % 2 == 0 { 1 } else { 2 }, i),
        )
        .unwrap();
    }
    do_backup_ordered(&repo, &src).unwrap();
    (fb, repo, src)
}

#[test]
fn memory_stays_within_the_budget_when_files_share_packs_and_belady_evicts() {
    let tmp = tempfile::tempdir().unwrap();
    let (_fb, repo, src) = interleaved(tmp.path());
    let only_a = vec![src.join("a").display().to_string()];
    let sealed = 12_000 + 64;

    // A budget for a few blocks, one file admitted at a time: read-ahead from one pack fills
    // the cache, the next file needs the other pack, and the block needed farthest ahead
    // makes room.
    let budget = 5 * sealed as u64;
    let t = tmp.path().join("small-budget");
    let (r, _) = restore_with(&repo, "latest", &t, |o| {
        o.includes = only_a.clone();
        o.tuning = Tuning {
            window: 1,
            memory: budget,
            read_gap: Some(1 << 20),
            ..Tuning::default()
        };
    });
    let r = r.unwrap();
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert!(
        r.peak_memory <= budget,
        "peak {} > budget {budget}",
        r.peak_memory
    );
    assert!(r.evictions > 0, "no eviction: {r:?}");
    assert!(r.cache_hits > 0, "read-ahead never served a block: {r:?}");
    assert_eq!(r.packs_read, 2);
    for i in 0..30 {
        let p = src.join(format!("a/{i:02}"));
        assert_eq!(fs::read(restored(&t, &p)).unwrap(), fs::read(&p).unwrap());
    }

    // With room for everything, each pack is read once, in one request.
    let t = tmp.path().join("big-budget");
    let (r, _) = restore_with(&repo, "latest", &t, |o| {
        o.includes = only_a.clone();
        o.tuning = Tuning {
            window: 1,
            memory: 64 << 20,
            read_gap: Some(1 << 20),
            ..Tuning::default()
        };
    });
    let r = r.unwrap();
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert_eq!((r.packs_read, r.requests, r.rereads), (2, 2, 0), "{r:?}");
}

#[test]
fn every_file_sharing_one_pack_under_a_one_block_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(&src).unwrap();
    // 40 small files: their blobs all land in one pack.
    for i in 0..40u64 {
        fs::write(src.join(format!("f{i:02}")), random_bytes(i, 12_000)).unwrap();
    }
    let repo = init(local(&tmp.path().join("repo")));
    do_backup(&repo, &src).unwrap();
    let budget = 12_000 + 12_100;
    let t = tmp.path().join("t");
    let (r, _) = restore_with(&repo, "latest", &t, |o| {
        o.tuning = Tuning {
            memory: budget,
            read_gap: Some(1 << 20),
            ..Tuning::default()
        };
    });
    let r = r.unwrap();
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert!(
        r.peak_memory <= budget,
        "peak {} > budget {budget}",
        r.peak_memory
    );
    // The pack is read by ranges, a block at a time, instead of all at once.
    assert_eq!(r.packs_read, 1);
    assert!(r.requests >= 20, "{r:?}");
    exact(&src, &t);
}

#[test]
fn no_deadlock_with_channels_of_capacity_one_and_a_one_byte_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    with_duplicates(&src);
    let repo = init(local(&tmp.path().join("repo")));
    do_backup(&repo, &src).unwrap();
    compare::snapshot(&src).unwrap();
    for (fetchers, workers) in [(1, 1), (3, 2)] {
        let t = tmp.path().join(format!("t{fetchers}{workers}"));
        let restore = || {
            let (repo_dir, t2) = (tmp.path().join("repo"), t.clone());
            within(Duration::from_secs(120), move || {
                let repo = arca_repo::Repository::open(local(&repo_dir), b"password").unwrap();
                let (r, _) = restore_with(&repo, "latest", &t2, |o| {
                    o.tuning = Tuning {
                        fetchers,
                        workers,
                        queue: 1,
                        memory: 1,
                        window: 1,
                        max_read: 1,
                        read_gap: Some(0),
                        ..Tuning::default()
                    };
                });
                r.unwrap()
            })
        };
        let full = restore();
        assert!(full.issues.is_empty(), "{:?}", full.issues);
        exact(&src, &t);
        // Into the damaged tree: files deleted (written while the others are hashed, waiting
        // for blocks those may hold), files with a byte flipped and files touched (hashed).
        let mut found: Vec<PathBuf> = files(&restored(&t, &src))
            .into_iter()
            .filter(|p| fs::metadata(p).is_ok_and(|m| m.len() > 0))
            .collect();
        found.sort();
        for (i, p) in found.iter().enumerate() {
            match i % 3 {
                0 => fs::remove_file(p).unwrap(),
                1 => arca_testkit::flip_byte(p, 0).unwrap(),
                _ => arca_testkit::generate::set_times(p, (1, 0), (2, 0)).unwrap(),
            }
        }
        let part = restore();
        assert!(part.issues.is_empty(), "{:?}", part.issues);
        assert!(part.files_hashed > 0, "{part:?}");
        assert!(part.fetched_bytes < full.fetched_bytes, "{part:?}");
        exact(&src, &t);
    }
    drop(repo);
}

#[test]
fn a_stalled_read_is_reported_naming_what_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let (fb, repo, src) = interleaved(tmp.path());
    fb.add(Rule {
        op: Some(Op::Read),
        file_type: Some(FileType::Pack),
        // The tree reads come first; then data reads.
        trigger: Trigger::From(6),
        fault: Fault::Delay(Duration::from_millis(700)),
    });
    let t = tmp.path().join("t");
    let (r, seen) = restore_with(&repo, "latest", &t, |o| {
        o.includes = vec![src.join("a").display().to_string()];
        o.tuning = Tuning {
            stall_after: Some(Duration::from_millis(150)),
            ..Tuning::default()
        };
    });
    let r = r.unwrap();
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert!(r.stalls > 0, "{r:?}");
    let stalls = seen.stalls.lock().unwrap().clone();
    assert!(
        stalls
            .iter()
            .any(|s| s.contains("restore stalled: nothing completed for")
                && s.contains(": reading")
                && s.contains("of pack")
                && s.contains("scheduler: waiting for")),
        "{stalls:?}"
    );
    for i in 0..30 {
        let p = src.join(format!("a/{i:02}"));
        assert_eq!(fs::read(restored(&t, &p)).unwrap(), fs::read(&p).unwrap());
    }
}

#[test]
fn a_target_removed_midway_stops_the_restore_promptly() {
    let tmp = tempfile::tempdir().unwrap();
    let (fb, repo, src) = interleaved(tmp.path());
    // 30 files, one slow read each: the restore cannot finish before the target goes.
    fb.add(Rule {
        op: Some(Op::Read),
        file_type: Some(FileType::Pack),
        trigger: Trigger::From(6),
        fault: Fault::Delay(Duration::from_millis(300)),
    });
    let t = tmp.path().join("t");
    let t2 = t.clone();
    std::thread::spawn(move || {
        // Once the first files are in, the whole target goes away.
        for _ in 0..200 {
            if arca_testkit::files_under(&t2).len() >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Files may appear while it is being removed: try until it is gone.
        for _ in 0..500 {
            if fs::remove_dir_all(&t2).is_ok() || !t2.exists() {
                return;
            }
        }
        panic!("could not remove {}", t2.display());
    });
    let started = Instant::now();
    let (r, seen) = restore_with(&repo, "latest", &t, |o| {
        o.includes = vec![src.join("a").display().to_string()];
        o.tuning = Tuning {
            window: 1,
            fetchers: 1,
            read_gap: Some(0),
            ..Tuning::default()
        };
    });
    match r {
        Err(RestoreError::Target { path, source }) => {
            assert_eq!(path, t);
            assert!(source.to_string().contains("disappeared"), "{source}");
        }
        other => panic!("expected a fatal target error, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // One fatal error, not one issue per remaining file.
    assert!(seen.issues.lock().unwrap().len() <= 2);
}

#[test]
fn ctrl_c_stops_every_stage_promptly() {
    let tmp = tempfile::tempdir().unwrap();
    let (fb, repo, src) = interleaved(tmp.path());
    // Every data read is slow: without the stop this restore would take over a minute.
    fb.add(Rule {
        op: Some(Op::Read),
        file_type: Some(FileType::Pack),
        trigger: Trigger::From(6),
        fault: Fault::Delay(Duration::from_millis(300)),
    });
    let cancel = Arc::new(AtomicBool::new(false));
    let c = Arc::clone(&cancel);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        c.store(true, Ordering::SeqCst);
    });
    let t = tmp.path().join("t");
    let started = Instant::now();
    let (r, _) = restore_with(&repo, "latest", &t, |o| {
        o.includes = vec![src.join("a").display().to_string()];
        o.cancel = Some(cancel);
        o.tuning = Tuning {
            window: 1,
            fetchers: 2,
            read_gap: Some(0),
            ..Tuning::default()
        };
    });
    assert!(matches!(r, Err(RestoreError::Interrupted)), "{r:?}");
    // Stopped within about one read of the request, not at the end.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let restored_files: Vec<PathBuf> = arca_testkit::files_under(&t);
    assert!(restored_files.len() < 30, "{}", restored_files.len());
}

/// Deleted files and damaged ones (hashed while content moves) share every pack: each pack
/// is read once, after the files that may hold its blocks are hashed, not once for the
/// deleted files and again for the damaged ones.
#[test]
fn packs_shared_by_deleted_and_damaged_files_are_read_once() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let n = 2_000u64;
    for i in 0..n {
        // Below the smallest chunk: one blob per file, neighbours in the same packs.
        let len = 2_000 + (i as usize * 37) % 6_000;
        fs::write(src.join(format!("f{i:04}")), random_bytes(7_000 + i, len)).unwrap();
    }
    let repo = init(local(&tmp.path().join("repo")));
    do_backup_ordered(&repo, &src).unwrap();
    let target = tmp.path().join("t");
    let (full, _) = restore_with(&repo, "latest", &target, |_| {});
    let full = full.unwrap();
    exact(&src, &target);

    // A quarter deleted, a quarter with a byte flipped; every file left gets a new mtime, so
    // all of them are hashed.
    let out = restored(&target, &src);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for i in 0..n {
        let p = out.join(format!("f{i:04}"));
        match i % 4 {
            0 => {
                fs::remove_file(&p).unwrap();
                continue;
            }
            1 => arca_testkit::flip_byte(&p, 0).unwrap(),
            _ => {}
        }
        arca_testkit::generate::set_times(&p, (now, 0), (now, 0)).unwrap();
    }
    let (part, _) = restore_with(&repo, "latest", &target, |_| {});
    let part = part.unwrap();
    assert!(part.issues.is_empty(), "{:?}", part.issues);
    exact(&src, &target);
    assert_eq!(part.files_hashed, n / 4 * 3);
    assert!(
        part.fetched_bytes <= full.fetched_bytes && part.requests <= full.requests,
        "partial fetched {} in {} reads, full {} in {}",
        part.fetched_bytes,
        part.requests,
        full.fetched_bytes,
        full.requests
    );
}
