//! The parallel backup pipeline from outside: the same folder gives the same tree whatever
//! the thread counts, nothing is quadratic in the number of files, Ctrl-C saves what was
//! queued, the memory budget is checked, and `--profile` names every stage.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use arca_testkit::{random_bytes, text_bytes};
use common::*;

/// A tree that exercises the readers: many small files, one file above the large-file
/// threshold (streamed alone), duplicates, hard links and every entry kind.
fn mixed_tree(src: &Path) {
    arca_testkit::generate::every_kind(&src.join("kinds"), 5).unwrap();
    for d in 0..20u64 {
        let dir = src.join(format!("d{d:02}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..15u64 {
            let seed = d * 100 + f;
            let data = match f % 3 {
                0 => text_bytes(seed, 3000 + f as usize * 700),
                1 => random_bytes(seed, 40_000),
                // The same content in every directory: dedup across readers.
                _ => random_bytes(7, 90_000),
            };
            fs::write(dir.join(format!("f{f:02}")), data).unwrap();
        }
    }
    fs::write(src.join("large.bin"), random_bytes(99, 17 << 20)).unwrap();
    fs::hard_link(src.join("d00/f01"), src.join("d19/link-to-d00-f01")).unwrap();
    fs::hard_link(src.join("large.bin"), src.join("d05/large-link")).unwrap();
}

/// Backs up with `args` (the folder last) and returns the id of the folder's tree in the new
/// snapshot. Not the root tree: that holds the folders above, whose times change whenever
/// something else writes next to the test's folder (/tmp's mtime made this test flaky).
fn tree_id(e: &Env, args: &[&str]) -> String {
    let b = e.json(args);
    assert_eq!(b["errors"], 0, "{b}");
    let id = b["snapshot_id"].as_str().unwrap().to_string();
    let folder = *args.last().unwrap();
    let listing = e.ok(&["ls", "--json", &id]);
    listing
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|n| n["path"] == folder)
        .and_then(|n| n["subtree"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{folder} not in snapshot {id}: {listing}"))
}

#[test]
fn tree_is_the_same_whatever_the_thread_counts() {
    let e = Env::new();
    let src = e.path("src");
    mixed_tree(&src);
    e.init(&["--pack-size", "1MiB"]);
    let s = src.to_str().unwrap();
    let one = tree_id(
        &e,
        &[
            "backup",
            "--json",
            "--read-concurrency",
            "1",
            "--workers",
            "1",
            "--upload-queue",
            "1",
            s,
        ],
    );
    let many = tree_id(
        &e,
        &[
            "backup",
            "--json",
            "--force",
            "--read-concurrency",
            "8",
            "--workers",
            "3",
            "--upload-queue",
            "4",
            s,
        ],
    );
    if one != many {
        // Say which entries differ.
        let snaps = e.json(&["snapshots", "--json"]);
        let ids: Vec<&str> = snaps
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        let a = e.ok(&["ls", "-l", ids[0]]);
        let b = e.ok(&["ls", "-l", ids[1]]);
        for (x, y) in a.lines().zip(b.lines()).filter(|(x, y)| x != y) {
            eprintln!("first:  {x}\nsecond: {y}");
        }
    }
    assert_eq!(one, many, "thread counts changed the folder's tree");
    let again = tree_id(&e, &["backup", "--json", "--force", s]);
    assert_eq!(one, again);
    e.ok(&["check", "--read-data"]);
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let diffs =
        arca_testkit::compare::diff_trees(&src, &target.join(src.strip_prefix("/").unwrap()));
    assert!(diffs.is_empty(), "{diffs:#?}");
}

#[test]
fn fifty_thousand_tiny_files_take_seconds() {
    let e = Env::new();
    let src = e.path("src");
    for d in 0..250 {
        let dir = src.join(format!("dir{d:03}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..200 {
            fs::write(dir.join(format!("{f}")), format!("{d}/{f}")).unwrap();
        }
    }
    e.init(&[]);
    let s = src.to_str().unwrap();
    let t = Instant::now();
    let first = e.json(&["backup", "--json", s]);
    let first_time = t.elapsed();
    assert_eq!(first["files_new"], 50_000, "{first}");
    let t = Instant::now();
    let second = e.json(&["backup", "--json", s]);
    let second_time = t.elapsed();
    assert_eq!(second["files_unmodified"], 50_000, "{second}");
    assert_eq!(second["data_blobs"], 0, "{second}");
    // Generous bounds for a loaded 2-core CI machine; a quadratic pass takes minutes.
    assert!(first_time < Duration::from_secs(60), "{first_time:?}");
    assert!(second_time < Duration::from_secs(30), "{second_time:?}");
}

#[test]
fn ctrl_c_stops_cleanly_and_keeps_what_was_uploaded() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..40u64 {
        fs::write(src.join(format!("f{i:02}")), random_bytes(500 + i, 1 << 20)).unwrap();
    }
    e.init(&["--pack-size", "1MiB", "--compression", "0"]);
    // A slow backend, so that the interrupt lands mid-backup.
    let child = e
        .cmd(&[
            "--backend-bandwidth",
            "8MB",
            "backup",
            "--upload-queue",
            "1",
            src.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while arca_testkit::files_under(&e.repo.join("data")).len() < 3 {
        assert!(t0.elapsed() < Duration::from_secs(120), "no pack appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted") && err.contains(" pack"),
        "says what was saved: {err}"
    );
    assert!(
        arca_testkit::files_under(&e.repo.join("snapshots")).is_empty(),
        "no snapshot after an interrupt"
    );
    e.ok(&["check", "--read-data"]);
    let kept = arca_testkit::files_under(&e.repo.join("data")).len() as u64;
    let b = e.json(&["backup", "--json", src.to_str().unwrap()]);
    assert_eq!(b["complete"], true, "{b}");
    let added = b["data_added"].as_u64().unwrap();
    assert!(
        added + kept * (900 << 10) <= 41 << 20,
        "the rerun uploaded again what was saved: {kept} packs kept, {added} bytes added"
    );
}

#[test]
fn memory_budget_is_checked_and_small_budgets_work() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&["--pack-size", "1MiB"]);
    let s = src.to_str().unwrap();
    let o = e.run(&["backup", "--memory", "1MiB", s]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "--memory 1048576 bytes is too small for this repository (packs of 1048576 bytes"
        ),
        "{}",
        stderr(&o)
    );
    let o = e.run(&["backup", "--memory", "lots", s]);
    assert!(stderr(&o).contains("--memory"), "{}", stderr(&o));
    for opt in ["--read-concurrency", "--upload-queue", "--workers"] {
        let o = e.run(&["backup", opt, "0", s]);
        assert_eq!(o.status.code(), Some(2), "{opt}: {}", stderr(&o));
        assert!(stderr(&o).contains(opt), "{}", stderr(&o));
    }
    let b = e.json(&["backup", "--json", "--memory", "64MiB", s]);
    assert_eq!(b["complete"], true, "{b}");
    e.ok(&["check", "--read-data"]);
    // Without --memory, large packs and chunks raise the default: every backup failed.
    let big = Env::new();
    big.init(&["--pack-size", "64MiB", "--chunk-max", "32MiB"]);
    let b = big.json(&["backup", "--json", s]);
    assert_eq!(b["complete"], true, "{b}");
}

#[test]
fn profile_names_every_stage() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    let s = src.to_str().unwrap();
    let text = e.ok(&["backup", "--profile", s]);
    for stage in [
        "walk", "read", "chunk", "hash", "assemble", "compress", "seal", "pack", "upload",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(stage)),
            "{stage} missing:\n{text}"
        );
    }
    let b = e.json(&["backup", "--json", "--force", s]);
    let stages = b["profile"].as_array().unwrap();
    assert!(stages.iter().any(|st| st["name"] == "read"
        && st["threads"].as_u64().unwrap() >= 1
        && st["busy_seconds"].as_f64().unwrap() >= 0.0));
}

/// Generation `g` of 10 files of 2 MiB: generation 0 writes them, each later one overwrites
/// two 48 KiB stretches in each of 4 files, so a file's blocks spread over the packs of
/// many generations (the fragmentation FAST'13's capping bounds).
fn generation(src: &Path, g: u64) {
    fs::create_dir_all(src).unwrap();
    for f in 0..10u64 {
        let p = src.join(format!("f{f:02}"));
        if g == 0 {
            fs::write(&p, random_bytes(f, 2 << 20)).unwrap();
        } else if (f + g) % 10 < 4 {
            let mut data = fs::read(&p).unwrap();
            for k in 0..2u64 {
                let at = ((g * 7919 + f * 104_729 + k * 1_000_003) % 40) as usize * 49_152;
                data[at..at + 49_152].copy_from_slice(&random_bytes(g * 100 + f * 10 + k, 49_152));
            }
            fs::write(&p, data).unwrap();
        }
    }
}

/// Ten generations backed up into a repository capped at 2 packs per segment and into one
/// uncapped with the same chunker keys; the packs a restore of the newest snapshot reads, in
/// each. Returns the capped repository, the source and the two counts.
fn capped_and_plain() -> (Env, PathBuf, u64, u64) {
    let capped = Env::new();
    let plain = Env::new();
    let src = capped.path("src");
    let opts = [
        &["--pack-size", "1MiB", "--compression", "0"][..],
        &SMALL_CHUNKS,
    ]
    .concat();
    capped.init(&opts);
    // The same chunker keys: each repository cut the data with its own, so the two differed
    // in more than capping, and now and then the uncapped one needed a pack fewer (35 vs 34).
    let kdf = ["--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    run_ok(from_cmd(
        &plain,
        &capped,
        &[
            &["init", "--copy-chunker-params"][..],
            &kdf,
            &["--pack-size", "1MiB", "--compression", "0"],
        ]
        .concat(),
    ));
    let mut copies = 0;
    for g in 0..10 {
        generation(&src, g);
        let s = src.to_str().unwrap();
        // One reader each: the two repositories then lay their packs out the same way, and
        // only capping tells them apart.
        let one = ["backup", "--json", "--read-concurrency", "1", "--cap"];
        let b = capped.json(&[&one[..], &["2", s]].concat());
        copies += b["capped_blobs"].as_u64().unwrap();
        plain.json(&[&one[..], &["0", s]].concat());
    }
    assert!(copies > 0, "capping stored nothing again");
    let packs_read = |e: &Env| {
        let t = e.path("t");
        let r = e.json(&[
            "restore",
            "latest",
            "--json",
            "--target",
            t.to_str().unwrap(),
        ]);
        let diffs =
            arca_testkit::compare::diff_trees(&src, &t.join(src.strip_prefix("/").unwrap()));
        assert!(diffs.is_empty(), "{diffs:#?}");
        r["packs_read"].as_u64().unwrap()
    };
    let (with_cap, without) = (packs_read(&capped), packs_read(&plain));
    (capped, src, with_cap, without)
}

/// Capping stores blocks again (and the capped repository restores byte for byte), and it
/// settles: a block is copied at most once. How many packs it saves the restore is measured
/// in the benchmark harness (`bench/run-capping`), not here: with the admission first-met and
/// each block copied at most once, its effect on about 35 packs ranged from 4 fewer to 2
/// more from one pair of repositories to the next in this scenario, 1.5 fewer on average
/// (this test asserted a saving, and failed now and then).
#[test]
fn capping_copies_each_block_once_and_settles() {
    let (capped, src, with_cap, without) = capped_and_plain();
    eprintln!("packs read by the newest restore: {with_cap} capped, {without} uncapped");
    // The same tree again, read whole: a block is copied at most once, so capping settles
    // (the same blocks were stored again on every run, the repository growing each time).
    let again = |e: &Env| {
        let args = [
            "backup",
            "--json",
            "--read-concurrency",
            "1",
            "--force",
            "--cap",
            "2",
        ];
        e.json(&[&args[..], &[src.to_str().unwrap()]].concat())
    };
    again(&capped);
    let settled = again(&capped);
    assert_eq!(settled["capped_blobs"], 0, "{settled}");
    assert_eq!(settled["data_added"], 0, "{settled}");
    capped.ok(&["check", "--read-data"]);
}
