//! Edge cases of `forget` and `snapshots` found by comparing their decisions with restic's on
//! the same timelines.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;

use common::{Env, stderr};
use serde_json::Value;

/// A repository with snapshots of one folder, one per (host, tags, time) given.
fn timeline(snaps: &[(&str, &str, &str)]) -> Env {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    for (host, tags, time) in snaps {
        let mut a = vec!["backup", "-q", "--host", host, "--time", time];
        if !tags.is_empty() {
            a.extend(["--tag", tags]);
        }
        a.push(src.to_str().unwrap());
        e.ok(&a);
    }
    e
}

fn hosts(e: &Env) -> Vec<String> {
    let v: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let mut h: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["hostname"].as_str().unwrap().to_owned())
        .collect();
    h.sort();
    h
}

/// As restic: `--unsafe-allow-remove-all` without a policy removes every snapshot the filter
/// selects (a retired host's), and is refused without a filter. It did nothing and exited 0.
#[test]
fn unsafe_allow_remove_all_without_a_policy_removes_what_the_filter_selects() {
    let e = timeline(&[
        ("old", "", "2026-01-01 10:00:00"),
        ("old", "", "2026-01-02 10:00:00"),
        ("new", "", "2026-01-03 10:00:00"),
    ]);
    let o = e.run(&["forget", "--unsafe-allow-remove-all"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--host"), "{}", stderr(&o));
    assert_eq!(hosts(&e), ["new", "old", "old"]);
    let dry = e.ok(&[
        "forget",
        "--unsafe-allow-remove-all",
        "--host",
        "old",
        "--dry-run",
    ]);
    assert!(dry.contains("remove 2 snapshots"), "{dry}");
    assert_eq!(hosts(&e), ["new", "old", "old"]);
    e.ok(&["forget", "--unsafe-allow-remove-all", "--host", "old"]);
    assert_eq!(hosts(&e), ["new"]);
}

/// As restic: `snapshots --latest N --group-by tags` keeps the newest N of each host and paths
/// within each group; it applied --latest first, so tag groups whose snapshots were not the
/// newest overall vanished. `--latest 0` is no limit.
#[test]
fn snapshots_latest_applies_within_each_group() {
    let e = timeline(&[
        ("h", "a", "2026-01-01 10:00:00"),
        ("h", "a", "2026-01-02 10:00:00"),
        ("h", "b", "2026-01-03 10:00:00"),
        ("h", "", "2026-01-04 10:00:00"),
    ]);
    let v: Value =
        serde_json::from_str(&e.ok(&["snapshots", "--latest", "1", "-g", "tags", "--json"]))
            .unwrap();
    let mut groups: Vec<(String, usize, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let snaps = g["snapshots"].as_array().unwrap();
            (
                g["group_key"]["tags"].to_string(),
                snaps.len(),
                snaps[0]["time"].as_str().unwrap()[..10].to_owned(),
            )
        })
        .collect();
    groups.sort();
    assert_eq!(
        groups,
        [
            (r#"["a"]"#.to_owned(), 1, "2026-01-02".to_owned()),
            (r#"["b"]"#.to_owned(), 1, "2026-01-03".to_owned()),
            ("[]".to_owned(), 1, "2026-01-04".to_owned()),
        ]
    );
    let plain: Value =
        serde_json::from_str(&e.ok(&["snapshots", "--latest", "1", "--json"])).unwrap();
    assert_eq!(plain.as_array().unwrap().len(), 1);
    let all: Value =
        serde_json::from_str(&e.ok(&["snapshots", "--latest", "0", "--json"])).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 4);
}
