//! Edge cases of `forget` and `snapshots` found by comparing their decisions with restic's on
//! the same timelines.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;

use common::{Env, run_limited, stderr};
use nix::sys::resource::Resource;
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

/// `--keep-within` takes its days off on the local clock, as restic does, when snapshots are
/// in the local zone: across a daylight-saving change the window's edge was an hour off (a
/// snapshot restic keeps was removed).
#[test]
fn keep_within_crosses_a_daylight_saving_change_as_restic() {
    if !std::path::Path::new("/usr/share/zoneinfo/America/New_York").exists() {
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    let run = |args: &[&str]| {
        let o = e.cmd(args).env("TZ", "America/New_York").output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // 20:00 EDT on 2 November, 22:00 EST on 4 November 2024: 2 days less on the clock is
    // 22:00 EDT on 2 November, 3 hours before that 19:00 EDT, so both are within 2d3h.
    for t in ["2024-11-02 20:00:00", "2024-11-04 22:00:00"] {
        run(&["backup", "-q", "--time", t, src.to_str().unwrap()]);
    }
    let v: Value = serde_json::from_str(&run(&[
        "forget",
        "--dry-run",
        "--json",
        "--keep-within",
        "2d3h",
    ]))
    .unwrap();
    let g = &v.as_array().unwrap()[0];
    assert_eq!(g["keep"].as_array().unwrap().len(), 2, "{v}");
    assert!(g["remove"].as_array().is_none_or(|r| r.is_empty()), "{v}");
}

/// `backup --time` reads a local time as restic (Go) does around daylight-saving changes: a
/// time the clock skips was refused as if badly written, and a time it shows twice was read
/// as the second.
#[test]
fn backup_time_around_daylight_saving_changes_reads_as_restic() {
    if !std::path::Path::new("/usr/share/zoneinfo/America/New_York").exists() {
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for t in ["2024-03-10 02:30:00", "2024-11-03 01:30:00"] {
        let o = e
            .cmd(&["backup", "-q", "--time", t, src.to_str().unwrap()])
            .env("TZ", "America/New_York")
            .output()
            .unwrap();
        assert!(o.status.success(), "{t}: {}", stderr(&o));
    }
    let v: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let times: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["time"].as_str().unwrap())
        .collect();
    assert_eq!(
        times,
        ["2024-03-10T01:30:00-05:00", "2024-11-03T01:30:00-04:00"]
    );
}

/// A profile whose `[forget]` section sets a policy does not stop `forget ID`: the ids were
/// refused with the profile's policy ("not both"), and its --keep-tag cannot be cleared from
/// the command line. Typed together, ids and a policy are still refused.
#[test]
fn a_profile_policy_yields_to_snapshot_ids() {
    let e = timeline(&[
        ("h", "", "2026-01-01 10:00:00"),
        ("h", "", "2026-01-02 10:00:00"),
    ]);
    let profile = e.path("p.toml");
    fs::write(
        &profile,
        "[forget]\nkeep-tag = [\"a,b\", \"c\"]\nkeep-last = 1\n",
    )
    .unwrap();
    let p = profile.to_str().unwrap();
    let first = e
        .ok(&["list", "snapshots"])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let o = e.run(&["-P", p, "forget", &first, "--keep-last", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not both"), "{}", stderr(&o));
    let o = e.run(&["-P", p, "forget", &first]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("not applied"), "{}", stderr(&o));
    let left = e.ok(&["list", "snapshots"]);
    assert_eq!(left.lines().count(), 1);
    assert!(!left.contains(&first));
}

/// `forget --prune` takes prune's options, as restic's does (they were usage errors).
#[test]
fn forget_prune_takes_the_prune_options() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    std::fs::create_dir_all(&src).unwrap();
    for k in 0..3 {
        std::fs::write(src.join("f"), arca_testkit::random_bytes(k, 200_000)).unwrap();
        e.ok(&["backup", "-q", src.to_str().unwrap()]);
    }
    let v = e.json(&[
        "forget",
        "--keep-last",
        "1",
        "--prune",
        "--max-unused",
        "0",
        "--max-repack-size",
        "1GiB",
        "--repack-small",
        "--json",
    ]);
    assert!(v.to_string().contains("freed"), "{v}");
    e.ok(&["check", "--read-data"]);
    let o = e.run(&["forget", "--keep-last", "1", "--max-unused", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// `arca ARGS` whose files may not grow past `blocks` (`ulimit -f`, SIGXFSZ ignored, so that
/// a write past it fails as a full disk does, without mounting one).
fn small_files(e: &Env, blocks: u64, args: &[&str]) -> std::process::Output {
    run_limited(e.cmd(args), Resource::RLIMIT_FSIZE, blocks * 512)
}

/// `forget --prune --json` whose prune fails (its repack cannot write a pack, as on a full
/// disk) has removed snapshots all the same: stdout said nothing of them (the one document
/// was to be printed after the prune). It now names them, with `"prune": null`, and the
/// prune's error is one `exit_error` line; a prune run after finishes, and check is clean.
#[test]
fn a_forget_whose_prune_fails_still_says_what_it_removed() {
    let e = Env::new();
    e.init(&["--pack-size", "1MiB"]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..24 {
        let data = arca_testkit::random_bytes(i, 60_000);
        fs::write(src.join(format!("f{i:02}")), data).unwrap();
    }
    let s = src.to_str().unwrap();
    e.ok(&["backup", "-q", s]);
    for i in (0..24).step_by(2) {
        fs::remove_file(src.join(format!("f{i:02}"))).unwrap();
    }
    e.ok(&["backup", "-q", s]);
    let o = small_files(
        &e,
        200,
        &["forget", "--keep-last", "1", "--prune", "--json"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|err| panic!("{err}: {out:?}\n{}", stderr(&o)));
    assert_eq!(v["forget"][0]["remove"].as_array().unwrap().len(), 1, "{v}");
    assert!(v["prune"].is_null(), "{v}");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("exit_error") && err.contains("File too large"),
        "{err}"
    );
    assert_eq!(
        e.json(&["snapshots", "--json"]).as_array().unwrap().len(),
        1
    );
    e.ok(&["prune"]);
    e.ok(&["check", "--read-data"]);
}

/// As restic: a lone `--host ''` is no host filter. It selected the snapshots whose host name
/// is empty, which none is, so `forget --host '' --keep-last 1` removed nothing and said only
/// "nothing to remove"; and it counted as the filter `--unsafe-allow-remove-all` wants.
#[test]
fn an_empty_host_filter_selects_every_host() {
    let e = timeline(&[
        ("a", "", "2026-01-01 10:00:00"),
        ("a", "", "2026-01-02 10:00:00"),
        ("b", "", "2026-01-03 10:00:00"),
        ("b", "", "2026-01-04 10:00:00"),
    ]);
    let v: Value = serde_json::from_str(&e.ok(&[
        "forget",
        "--host",
        "",
        "--keep-last",
        "1",
        "--dry-run",
        "--json",
    ]))
    .unwrap();
    let groups = v.as_array().unwrap();
    let host_and_counts: Vec<(&str, usize, usize)> = groups
        .iter()
        .map(|g| {
            (
                g["host"].as_str().unwrap(),
                g["keep"].as_array().unwrap().len(),
                g["remove"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(host_and_counts, [("a", 1, 1), ("b", 1, 1)], "{v}");
    let listed: Value =
        serde_json::from_str(&e.ok(&["snapshots", "--json", "--host", ""])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 4);
    let o = e.run(&["forget", "--unsafe-allow-remove-all", "--host", ""]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--host"), "{}", stderr(&o));
    assert_eq!(hosts(&e), ["a", "a", "b", "b"]);
    // With another name, the empty one still matches no snapshot (as restic).
    let o = e.ok(&["snapshots", "--json", "--host", "", "--host", "b"]);
    assert_eq!(
        serde_json::from_str::<Value>(&o)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// `--host ''` on the command line clears a profile's hosts, as a lone `--host ''` is no host
/// filter: it was added to the profile's (repeatable options take both), which left the
/// profile's filter in place, so no command line could see past it. A later profile's
/// `host = ""` clears an earlier one's alike; another host typed still adds to the profile's.
#[test]
fn an_empty_host_clears_the_profiles_hosts() {
    let e = timeline(&[
        ("a", "", "2026-01-01 10:00:00"),
        ("a", "", "2026-01-02 10:00:00"),
        ("b", "", "2026-01-03 10:00:00"),
        ("b", "", "2026-01-04 10:00:00"),
    ]);
    let profile = e.path("p.toml");
    fs::write(
        &profile,
        "[snapshots]\nhost = [\"a\"]\n[forget]\nhost = \"a\"\n",
    )
    .unwrap();
    let clear = e.path("clear.toml");
    fs::write(&clear, "[snapshots]\nhost = \"\"\n").unwrap();
    let (p, c) = (profile.to_str().unwrap(), clear.to_str().unwrap());
    let count = |args: &[&str]| -> usize {
        let v: Value = serde_json::from_str(&e.ok(args)).unwrap();
        v.as_array().unwrap().len()
    };
    assert_eq!(count(&["-P", p, "snapshots", "--json"]), 2);
    assert_eq!(count(&["-P", p, "snapshots", "--json", "--host", ""]), 4);
    assert_eq!(count(&["-P", p, "snapshots", "--host=", "--json"]), 4);
    assert_eq!(count(&["-P", p, "-P", c, "snapshots", "--json"]), 4);
    assert_eq!(count(&["-P", p, "snapshots", "--json", "--host", "b"]), 4);
    let v: Value = serde_json::from_str(&e.ok(&[
        "-P",
        p,
        "forget",
        "--host",
        "",
        "--keep-last",
        "1",
        "--dry-run",
        "--json",
    ]))
    .unwrap();
    let hosts: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["a", "b"], "{v}");
}

/// Snapshots of one time (`rewrite` without `--forget` leaves the original and the cleaned
/// copy so): `forget --keep-last 1` keeps the one `latest` names. It took the other as the
/// newest, and could remove the cleaned copy while keeping the original.
#[test]
fn keep_last_keeps_the_snapshot_latest_names_among_equal_times() {
    let e = timeline(&[
        ("h", "", "2024-05-01 10:00:00"),
        ("h", "", "2024-05-01 10:00:00"),
        ("h", "", "2024-05-01 10:00:00"),
    ]);
    let latest: Value =
        serde_json::from_str(&e.ok(&["snapshots", "--json", "--latest", "1"])).unwrap();
    let latest = latest[0]["id"].as_str().unwrap().to_owned();
    let shown = e.ok(&["ls", "latest", "--json"]);
    assert!(shown.contains(&latest), "ls latest is another: {shown}");
    e.ok(&["forget", "--keep-last", "1"]);
    let left: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let left: Vec<&str> = left
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(left, [latest.as_str()]);
}
