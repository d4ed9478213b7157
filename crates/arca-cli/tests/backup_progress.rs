//! `arca backup` progress: JSON status lines (restic's fields, totals from the estimate scan)
//! before the summary with `--json`, and nothing drawn when stderr is not a terminal.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::Path;

use arca_testkit::{random_bytes, text_bytes};
use common::*;

/// A tree of random files (incompressible, so the throttled uploads take time) and small
/// text files; returns the file count and byte sum.
fn tree(src: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0u64, 0u64);
    for d in 0..6 {
        let dir = src.join(format!("dir{d}/sub"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..10u64 {
            let seed = d * 100 + f;
            let data = if f % 3 == 0 {
                text_bytes(seed, 2_000 + f as usize)
            } else {
                random_bytes(seed, 90_000 + 1_000 * f as usize)
            };
            fs::write(dir.join(format!("f{f}")), &data).unwrap();
            files += 1;
            bytes += data.len() as u64;
        }
    }
    (files, bytes)
}

/// Backs up `src` into a repository with small packs over a throttled backend (about two
/// seconds), with `extra` options.
fn slow_backup(e: &Env, src: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--backend-bandwidth",
        "2500KB",
        "backup",
        src.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = e.run(&args);
    assert!(o.status.success(), "backup failed: {}", stderr(&o));
    o
}

#[test]
fn json_status_lines_precede_the_summary() {
    let e = Env::new();
    e.init(&["--pack-size", "1MiB"]);
    let src = e.path("src");
    let (files, bytes) = tree(&src);
    let o = slow_backup(&e, &src, &["--json"]);
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|err| panic!("{err}: {l:?}")))
        .collect();
    let (summary, statuses) = lines.split_last().unwrap();
    assert_eq!(summary["message_type"], "summary", "{out}");
    assert_eq!(summary["total_files_processed"], files);
    assert!(!statuses.is_empty(), "no status line in {out}");
    let (mut files_done, mut bytes_done, mut secs) = (0, 0, 0.0);
    for s in statuses {
        assert_eq!(s["message_type"], "status", "{s}");
        for k in ["total_files", "total_bytes", "bytes_read", "error_count"] {
            assert!(s[k].is_u64(), "{k} in {s}");
        }
        let (f, b) = (
            s["files_done"].as_u64().unwrap(),
            s["bytes_done"].as_u64().unwrap(),
        );
        assert!(
            f >= files_done && b >= bytes_done,
            "progress went back: {s}"
        );
        (files_done, bytes_done) = (f, b);
        let el = s["seconds_elapsed"].as_f64().unwrap();
        assert!(el > secs, "{s}");
        secs = el;
        let pct = s["percent_done"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&pct), "{s}");
        if let Some(eta) = s.get("seconds_remaining") {
            assert!(eta.is_u64(), "{s}");
        }
    }
    assert!(files_done <= files && bytes_done <= bytes);
    // The scan of 60 files ends long before the first status line (after one second).
    let last = statuses.last().unwrap();
    assert_eq!(last["totals_final"], true, "{last}");
    assert_eq!(last["total_files"], files, "{last}");
    assert_eq!(last["total_bytes"], bytes, "{last}");
}

#[test]
fn quiet_json_prints_only_the_summary() {
    let e = Env::new();
    e.init(&["--pack-size", "1MiB"]);
    let src = e.path("src");
    tree(&src);
    let o = slow_backup(&e, &src, &["--json", "--quiet"]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["message_type"], "summary");
}

#[test]
fn nothing_is_drawn_without_a_terminal_or_json() {
    let e = Env::new();
    e.init(&["--pack-size", "1MiB"]);
    let src = e.path("src");
    tree(&src);
    let o = slow_backup(&e, &src, &[]);
    let err = stderr(&o);
    assert!(
        !err.contains(['\r', '\x1b']) && !err.contains("errors, "),
        "progress drawn on a pipe: {err:?}"
    );
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("snapshot ") && !out.contains('{'), "{out}");
}
