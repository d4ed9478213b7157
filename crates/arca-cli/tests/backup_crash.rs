//! A backup killed with SIGKILL at several points leaves a consistent repository, and the
//! rerun adopts the packs the killed run uploaded but never indexed instead of uploading
//! their blobs again: `check --read-data` is clean, no blob is stored twice, the snapshot is
//! complete and restores byte for byte.
//!
//! Kill points are counted in pack files present in the repository (polled), not in time,
//! so they land at the same place on a fast or a loaded machine.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arca_backend::LocalBackend;
use arca_format::{BlobKind, Id};
use arca_repo::{Repository, SnapshotFilter};
use arca_testkit::{compare, random_bytes};
use common::*;

/// How long a kill point may take to be reached, and a full run to finish.
const LIMIT: Duration = Duration::from_secs(600);

/// About 40 MB of incompressible data in 200 files under 10 directories, a few of them
/// large enough to span several packs.
fn source(src: &Path) -> u64 {
    let mut total = 0;
    for i in 0..200u64 {
        let dir = src.join(format!("d{}", i % 10));
        fs::create_dir_all(&dir).unwrap();
        let len = if i % 67 == 0 {
            3_000_000
        } else {
            20_000 + (i * 7919 % 200) as usize * 1_400
        };
        fs::write(dir.join(format!("f{i:03}")), random_bytes(1000 + i, len)).unwrap();
        total += len as u64;
    }
    total
}

/// 1 MiB packs and 64 KiB chunks: 40 MB make about 40 packs of about 16 blobs.
fn init(e: &Env) {
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
}

/// Pack files under `data/`, by name (temporary files excluded).
fn pack_files(repo: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Ok(shards) = fs::read_dir(repo.join("data")) else {
        return out;
    };
    for shard in shards.flatten() {
        let Ok(files) = fs::read_dir(shard.path()) else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                out.insert(name);
            }
        }
    }
    out
}

fn open(e: &Env) -> Repository {
    Repository::open(Arc::new(LocalBackend::new(&e.repo)), b"test password").unwrap()
}

/// Pack ids named by at least one index file.
fn indexed_packs(repo: &Repository) -> HashSet<Id> {
    repo.load_index_files()
        .unwrap()
        .into_iter()
        .flat_map(|(_, f)| f.unwrap().packs)
        .map(|p| p.id)
        .collect()
}

/// A command whose output goes to files (no pipe can fill up and block it).
fn spawn(e: &Env, args: &[&str], log: &str) -> Child {
    let mut c: Command = e.cmd(args);
    c.stdout(File::create(e.path(&format!("{log}.out"))).unwrap())
        .stderr(File::create(e.path(&format!("{log}.err"))).unwrap());
    c.spawn().unwrap()
}

fn log(e: &Env, name: &str) -> String {
    let out = fs::read_to_string(e.path(&format!("{name}.out"))).unwrap_or_default();
    let err = fs::read_to_string(e.path(&format!("{name}.err"))).unwrap_or_default();
    format!("stdout:\n{out}\nstderr:\n{err}")
}

/// Waits for `child`, killing it and failing after `LIMIT`.
fn wait(mut child: Child, e: &Env, name: &str) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} did not finish within {LIMIT:?}\n{}", log(e, name));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `arca ARGS` to completion (bounded) and returns its stdout.
fn finish(e: &Env, args: &[&str], name: &str) -> String {
    let s = wait(spawn(e, args, name), e, name);
    assert!(s.success(), "arca {args:?}: {s}\n{}", log(e, name));
    fs::read_to_string(e.path(&format!("{name}.out"))).unwrap()
}

fn last_json(out: &str) -> serde_json::Value {
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

/// Starts a backup and SIGKILLs it once the repository holds `packs` pack files. Returns
/// whether the kill landed (false: the backup finished first).
fn backup_killed_at(e: &Env, src: &Path, packs: usize, name: &str) -> bool {
    let mut child = spawn(e, &["backup", src.to_str().unwrap()], name);
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if pack_files(&e.repo).len() >= packs {
            // A zombie not yet reaped still takes the signal without error.
            child.kill().unwrap();
            break;
        }
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "backup did not reach {packs} packs within {LIMIT:?}\n{}",
                log(e, name)
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let status = child.wait().unwrap();
    match status.signal() {
        Some(9) => true,
        _ => {
            assert!(
                status.success(),
                "backup failed before the kill: {status}\n{}",
                log(e, name)
            );
            false
        }
    }
}

/// Every blob reachable from the snapshots, with its kind.
fn referenced(repo: &Repository) -> HashSet<(BlobKind, Id)> {
    let index = repo.load_index().unwrap();
    let mut out = HashSet::new();
    let mut stack: Vec<Id> = repo
        .list_snapshots(&SnapshotFilter::default())
        .unwrap()
        .into_iter()
        .map(|(_, s)| s.tree)
        .collect();
    while let Some(t) = stack.pop() {
        if !out.insert((BlobKind::Tree, t)) {
            continue;
        }
        for n in repo.load_tree(&index, &t).unwrap().nodes {
            stack.extend(n.subtree);
            out.extend(n.content.iter().map(|c| (BlobKind::Data, c.id)));
        }
    }
    out
}

/// What one kill scenario measured.
#[derive(Debug)]
struct Outcome {
    /// Kills that landed (the others found the backup finished).
    landed: usize,
    /// Packs no index named after each kill (all adopted by the next run).
    orphans: Vec<usize>,
    /// Packs present after the kills.
    packs_before: usize,
    /// Of those, packs no index named (adopted by the rerun).
    adopted: usize,
    /// Packs the rerun added.
    packs_added: usize,
    /// Bytes the rerun added (plain), against the source's total.
    data_added: u64,
}

/// Fresh repository; one backup per kill point, each SIGKILLed when the repository holds
/// that many packs; then the checks of a repository after a crash, a complete rerun and the
/// checks that nothing was stored twice.
fn scenario(src: &Path, total: u64, kills: &[usize]) -> Outcome {
    let e = Env::new();
    init(&e);
    let mut landed = 0;
    let mut orphans_after = vec![];
    for (i, &n) in kills.iter().enumerate() {
        if backup_killed_at(&e, src, n, &format!("killed{i}")) {
            landed += 1;
        }
        // The repository is consistent after every kill: check passes (unindexed packs are
        // notes, not errors) and names exactly the packs no index file names.
        let v = last_json(&finish(&e, &["check", "--json"], &format!("check{i}")));
        assert_eq!(v["ok"], true, "after kill at {n} packs: {v}");
        let on_disk = pack_files(&e.repo);
        let indexed = indexed_packs(&open(&e));
        let orphans = on_disk
            .iter()
            .filter(|p| !indexed.contains(&Id::from_hex(p).unwrap()))
            .count();
        let notes = v["notes"].as_array().unwrap();
        assert_eq!(
            notes
                .iter()
                .filter(|n| n.as_str().unwrap().contains("not in any index"))
                .count(),
            orphans,
            "{v}"
        );
        orphans_after.push(orphans);
    }

    let before = pack_files(&e.repo);
    let repo = open(&e);
    let indexed_before = indexed_packs(&repo);
    let before_ids: HashSet<Id> = before.iter().map(|p| Id::from_hex(p).unwrap()).collect();
    let adopted = before_ids.difference(&indexed_before).count();
    let snapshots_before = repo
        .list_snapshots(&SnapshotFilter::default())
        .unwrap()
        .len();

    // The rerun completes with a complete snapshot.
    let s = last_json(&finish(
        &e,
        &["backup", src.to_str().unwrap(), "--json"],
        "rerun",
    ));
    assert_eq!(s["complete"], true, "{s}");
    assert_eq!(s["errors"], 0, "{s}");
    assert_eq!(s["total_bytes_processed"], total, "{s}");
    let repo = open(&e);
    assert_eq!(
        repo.list_snapshots(&SnapshotFilter::default())
            .unwrap()
            .len(),
        snapshots_before + 1
    );

    // Every pack is indexed now, including every pack of the killed runs.
    let after = pack_files(&e.repo);
    let after_ids: HashSet<Id> = after.iter().map(|p| Id::from_hex(p).unwrap()).collect();
    assert!(after_ids.is_superset(&before_ids));
    let indexed = indexed_packs(&repo);
    let unindexed: Vec<_> = after_ids.difference(&indexed).collect();
    assert!(unindexed.is_empty(), "packs left unindexed: {unindexed:?}");

    // No blob is stored twice: each is in exactly one pack (a pack named by several index
    // files counts once), so the rerun's packs hold nothing the killed runs' packs hold.
    let mut holders: HashMap<(BlobKind, Id), BTreeSet<Id>> = HashMap::new();
    let mut seen_packs = HashSet::new();
    let (mut data_raw, mut new_raw) = (0u64, 0u64);
    for (_, f) in repo.load_index_files().unwrap() {
        for p in f.unwrap().packs {
            let first = seen_packs.insert(p.id);
            for b in &p.blobs {
                holders.entry((p.kind, b.id)).or_default().insert(p.id);
                if first && p.kind == BlobKind::Data {
                    data_raw += u64::from(b.raw_length);
                }
                if first && !before_ids.contains(&p.id) {
                    new_raw += u64::from(b.raw_length);
                }
            }
        }
    }
    // The same in bytes: the source (random, no repeated chunk) is stored once, and the
    // rerun's packs hold exactly what it reports as added.
    assert_eq!(data_raw, total, "data stored in all packs vs the source");
    assert_eq!(
        new_raw,
        s["data_added"].as_u64().unwrap(),
        "bytes in the rerun's packs vs its data_added: {s}"
    );
    let twice: Vec<_> = holders.iter().filter(|(_, p)| p.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "{} blobs stored in several packs (kills at {kills:?}), e.g. {:?}",
        twice.len(),
        twice.first()
    );
    // Every pack of the killed runs is still used: all its blobs are in the new snapshot.
    let used = referenced(&repo);
    for (blob, packs) in &holders {
        let p = packs.first().unwrap();
        if before_ids.contains(p) {
            assert!(
                used.contains(blob),
                "{blob:?} in pack {p} is not referenced"
            );
        }
    }

    // All data reads back, and the restore is identical.
    let v = last_json(&finish(
        &e,
        &["check", "--read-data", "--json"],
        "check-read-data",
    ));
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["notes"].as_array().unwrap().len(), 0, "{v}");
    let target = e.path("restored");
    finish(
        &e,
        &["restore", "latest", "--target", target.to_str().unwrap()],
        "restore",
    );
    let restored: PathBuf = target.join(src.strip_prefix("/").unwrap());
    let d = compare::diff_trees(src, &restored);
    assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));

    Outcome {
        landed,
        orphans: orphans_after,
        packs_before: before.len(),
        adopted,
        packs_added: after.len() - before.len(),
        data_added: s["data_added"].as_u64().unwrap(),
    }
}

#[test]
fn backups_killed_at_several_points_rerun_without_uploading_again() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let total = source(&src);
    // Before the first checkpoint (8 packs), just after it, and two kills in a row, the
    // second during a run that itself began by adopting the first one's packs.
    let points: [&[usize]; 4] = [&[1], &[5], &[12], &[4, 20]];
    let mut landed = 0;
    let mut adopted = 0;
    for kills in points {
        let o = scenario(&src, total, kills);
        eprintln!(
            "kills at {kills:?} packs: {} landed; unindexed packs after each kill {:?}; \
             {} packs before the rerun, {} adopted by it; the rerun added {} packs, \
             {} of {total} bytes",
            o.landed, o.orphans, o.packs_before, o.adopted, o.packs_added, o.data_added
        );
        landed += o.landed;
        adopted += o.adopted;
        // The rerun only stored what the killed runs had not.
        assert!(o.data_added <= total, "{o:?}");
    }
    assert!(
        landed > 0,
        "every backup finished before its kill point: nothing was tested"
    );
    assert!(adopted > 0, "no kill left unindexed packs to adopt");
}
