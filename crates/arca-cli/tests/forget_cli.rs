//! End-to-end tests of `arca forget`: removing by id and by policy (`--keep-last`,
//! `--keep-tag`, `--keep-daily`, `--keep-within`), grouping and filters, `--dry-run`,
//! `--json`, and that kept snapshots still restore. The calendar rules are covered against
//! hand-computed expectations in `arca_maintenance::forget`'s unit tests (backups here are all
//! made "now").

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::Path;

use arca_testkit::compare;
use serde_json::Value;

mod common;
use common::*;

/// The snapshots' ids, oldest first.
fn ids(e: &Env) -> Vec<String> {
    let v: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// Writes `version` into the source and backs it up with `extra` options; the snapshot id.
fn backup(e: &Env, src: &Path, version: &str, extra: &[&str]) -> String {
    fs::write(src.join("version.txt"), version).unwrap();
    let mut a = vec!["backup", "--json"];
    a.extend_from_slice(extra);
    a.push(src.to_str().unwrap());
    e.json(&a)["snapshot_id"].as_str().unwrap().to_string()
}

/// A repository and a source folder.
fn setup() -> (Env, std::path::PathBuf) {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&SMALL_CHUNKS);
    (e, src)
}

fn ids_of(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn keep_last_removes_older_snapshots_and_kept_ones_restore() {
    let (e, src) = setup();
    let s1 = backup(&e, &src, "1", &[]);
    let s2 = backup(&e, &src, "2", &[]);
    let s3 = backup(&e, &src, "3", &[]);
    let out = e.ok(&["forget", "--keep-last", "2"]);
    assert!(
        out.contains("Applying policy: keep 2 latest snapshots"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "snapshots for host [{}], paths [{}]:",
            hostname(&e),
            src.display()
        )),
        "{out}"
    );
    assert!(out.contains("keep 2 snapshots:"), "{out}");
    assert!(out.contains("last snapshot"), "{out}");
    assert!(out.contains("remove 1 snapshot:"), "{out}");
    assert!(out.contains(&s1[..8]), "{out}");
    assert!(out.contains("removed 1 snapshot"), "{out}");
    assert_eq!(ids(&e), [s2.as_str(), s3.as_str()]);
    assert!(!e.repo.join("snapshots").join(&s1).exists());

    // The kept snapshots restore: the newest exactly as the source, the other with its
    // version of the changed file.
    let target = e.path("t3");
    e.ok(&["restore", &s3[..12], "--target", target.to_str().unwrap()]);
    let restored = target.join(src.strip_prefix("/").unwrap());
    let d = compare::diff_trees(&src, &restored);
    assert!(d.is_empty(), "{d:?}");
    let target = e.path("t2");
    e.ok(&["restore", &s2, "--target", target.to_str().unwrap()]);
    let restored = target.join(src.strip_prefix("/").unwrap());
    assert_eq!(fs::read(restored.join("version.txt")).unwrap(), b"2");
    assert_eq!(
        fs::read(restored.join("docs/deep/c.bin")).unwrap(),
        fs::read(src.join("docs/deep/c.bin")).unwrap()
    );
    e.ok(&["check", "--read-data"]);

    // Again: nothing left to remove.
    let out = e.ok(&["forget", "--keep-last", "2"]);
    assert!(out.contains("nothing to remove"), "{out}");
    assert_eq!(ids(&e).len(), 2);
}

/// The host name backups record (the first snapshot's).
fn hostname(e: &Env) -> String {
    let v: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    v[0]["hostname"].as_str().unwrap().to_string()
}

#[test]
fn dry_run_and_no_policy_remove_nothing() {
    let (e, src) = setup();
    for v in ["1", "2", "3"] {
        backup(&e, &src, v, &[]);
    }
    let before = ids(&e);
    let out = e.ok(&["forget", "--keep-last", "1", "--dry-run"]);
    assert!(out.contains("remove 2 snapshots:"), "{out}");
    assert!(out.contains("dry run: would remove 2 snapshots"), "{out}");
    assert_eq!(ids(&e), before);
    // With --prune too: prune only plans.
    let out = e.ok(&["forget", "-l", "1", "-n", "--prune"]);
    assert!(
        out.contains("dry run: would remove 2 snapshots, then prune"),
        "{out}"
    );
    assert_eq!(ids(&e), before);
    // An id with --dry-run.
    e.ok(&["forget", "--dry-run", &before[0]]);
    assert_eq!(ids(&e), before);

    // No policy, no ids: nothing happens, and it says so.
    let o = e.run(&["forget"]);
    assert!(o.status.success());
    assert!(
        stderr(&o).contains("no policy given: nothing removed"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
    let o = e.run(&["forget", "--json", "--host", "x"]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "[]");
    // Zero counts are no policy either.
    let o = e.run(&["forget", "--keep-last", "0", "--keep-daily", "0"]);
    assert!(o.status.success());
    assert!(stderr(&o).contains("no policy given"), "{}", stderr(&o));
    assert_eq!(ids(&e), before);
}

#[test]
fn ids_and_prefixes() {
    let (e, src) = setup();
    let s1 = backup(&e, &src, "1", &[]);
    let s2 = backup(&e, &src, "2", &[]);
    let s3 = backup(&e, &src, "3", &[]);
    let s4 = backup(&e, &src, "4", &[]);

    // Any unknown id: nothing is removed.
    let o = e.run(&["forget", &s1[..10], "0123456789abcdef"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("0123456789abcdef"), "{}", stderr(&o));
    assert_eq!(ids(&e).len(), 4);
    // Ids and a policy together are refused.
    let o = e.run(&["forget", &s1, "--keep-last", "1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not both"), "{}", stderr(&o));
    // Also with the short options (they were dropped, and the id removed).
    for short in [&["-l", "1"][..], &["-d", "5", "-w", "1"], &["-H1"]] {
        let o = e.run(&[&["forget", &s1][..], short].concat());
        assert_eq!(o.status.code(), Some(1), "{short:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("not both"), "{}", stderr(&o));
        assert_eq!(ids(&e).len(), 4);
    }
    // Filters with ids: said to choose only `latest`, as restic says it ignores them.
    let o = e.run(&["forget", "--dry-run", &s2, "--host", "elsewhere"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("only choose which snapshot `latest` is"),
        "{}",
        stderr(&o)
    );

    // A prefix, a full id and a repeated one.
    let out = e.ok(&["forget", &s1[..10], &s3, &s3[..8]]);
    assert!(out.contains("remove 2 snapshots:"), "{out}");
    assert!(out.contains("removed 2 snapshots"), "{out}");
    assert_eq!(ids(&e), [s2.as_str(), s4.as_str()]);
    // "latest", as JSON.
    let v = e.json(&["forget", "--json", "latest"]);
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(ids_of(&v[0]["remove"]), [s4.as_str()]);
    assert_eq!(v[0]["keep"].as_array().unwrap().len(), 0);
    assert_eq!(ids(&e), [s2.as_str()]);
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let restored = target.join(src.strip_prefix("/").unwrap());
    assert_eq!(fs::read(restored.join("version.txt")).unwrap(), b"2");
}

#[test]
fn keep_tag_with_json_output() {
    let (e, src) = setup();
    let a = backup(&e, &src, "a", &["--tag", "keep"]);
    let b = backup(&e, &src, "b", &[]);
    let c = backup(&e, &src, "c", &["--tag", "other"]);
    let d = backup(&e, &src, "d", &[]);
    let v = e.json(&["forget", "--keep-last", "1", "--keep-tag", "keep", "--json"]);
    let groups = v.as_array().unwrap();
    assert_eq!(groups.len(), 1, "{v}");
    let g = &groups[0];
    assert_eq!(g["group_key"]["paths"][0], src.to_str().unwrap());
    assert_eq!(g["group_key"]["tags"], Value::Null);
    // restic's own fields, beside the group key.
    assert_eq!(g["paths"], g["group_key"]["paths"]);
    assert_eq!(g["host"], g["group_key"]["hostname"]);
    assert!(!g["group_key"]["hostname"].as_str().unwrap().is_empty());
    assert_eq!(ids_of(&g["keep"]), [d.as_str(), a.as_str()]);
    assert_eq!(ids_of(&g["remove"]), [c.as_str(), b.as_str()]);
    assert_eq!(g["reasons"][0]["snapshot"]["id"], d.as_str());
    assert_eq!(
        g["reasons"][0]["matches"],
        serde_json::json!(["last snapshot"])
    );
    assert_eq!(g["reasons"][1]["snapshot"]["id"], a.as_str());
    assert_eq!(
        g["reasons"][1]["matches"],
        serde_json::json!(["has tags [keep]"])
    );
    assert_eq!(g["keep"][1]["tags"][0], "keep");
    assert_eq!(ids(&e), [a.as_str(), d.as_str()]);
    e.ok(&["check"]);

    // Text output: the reasons column.
    backup(&e, &src, "e", &[]);
    let out = e.ok(&["forget", "-l", "1", "--keep-tag", "keep", "--dry-run"]);
    assert!(out.contains("has tags [keep]"), "{out}");
    assert!(out.contains("Reasons"), "{out}");
}

#[test]
fn backup_time_sets_the_snapshot_time_that_policies_read() {
    let (e, src) = setup();
    let a = backup(&e, &src, "a", &["--time", "2020-01-01T10:00:00+02:00"]);
    let b = backup(&e, &src, "b", &["--time", "2020-01-01 12:00"]);
    let c = backup(&e, &src, "c", &["--time", "2020-01-03 09:30:15"]);
    let v = e.json(&["snapshots", "--json"]);
    assert_eq!(ids_of(&v), [a.as_str(), b.as_str(), c.as_str()]);
    assert_eq!(v[0]["time"], "2020-01-01T10:00:00+02:00");
    // The run's own start stays the real one, as restic's.
    let start = v[0]["summary"]["backup_start"].as_str().unwrap();
    assert!(!start.starts_with("2020"), "{start}");
    // The newest of each host and paths, as restic's snapshots --latest.
    let other = e.path("other");
    fs::create_dir_all(&other).unwrap();
    let d = e.json(&["backup", "--json", other.to_str().unwrap()])["snapshot_id"]
        .as_str()
        .unwrap()
        .to_string();
    let latest = ids_of(&e.json(&["snapshots", "--json", "--latest", "2"]));
    assert_eq!(latest, [b.as_str(), c.as_str(), d.as_str()]);
    e.ok(&["forget", &d]);
    // One per day: the newest of each day.
    let f = e.json(&["forget", "--keep-daily", "2", "--dry-run", "--json"]);
    assert_eq!(ids_of(&f[0]["remove"]), [a.as_str()], "{f}");
    let o = e.run(&["backup", "--time", "yesterday", src.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--time"), "{}", stderr(&o));
}

#[test]
fn comma_separated_tags_are_tags_and_filters_read_as_restic() {
    let (e, src) = setup();
    let both = backup(&e, &src, "a", &["--tag", "daily, important"]);
    let daily = backup(&e, &src, "b", &["--tag", "daily"]);
    let none = backup(&e, &src, "c", &[]);
    let v = e.json(&["snapshots", "--json"]);
    assert_eq!(v[0]["tags"], serde_json::json!(["daily", "important"]));
    let listed = |args: &[&str]| {
        let mut a = vec!["snapshots", "--json"];
        a.extend_from_slice(args);
        ids_of(&e.json(&a))
    };
    assert_eq!(listed(&["--tag", "important"]), [both.as_str()]);
    assert_eq!(listed(&["--tag", "important,daily"]), [both.as_str()]);
    assert_eq!(
        listed(&["--tag", "important", "--tag", "daily"]),
        [both.as_str(), daily.as_str()]
    );
    assert_eq!(listed(&["--tag", ""]), [none.as_str()]);
    let host = e.json(&["snapshots", "--json"])[0]["hostname"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(listed(&["--host", "elsewhere", "--host", &host]).len(), 3);
    assert!(listed(&["--host", "elsewhere"]).is_empty());
    // The snapshot tagged at backup with "daily,important" is kept by either spelling.
    for keep in ["important", "daily,important"] {
        let v = e.json(&[
            "forget",
            "-l",
            "1",
            "--keep-tag",
            keep,
            "--dry-run",
            "--json",
        ]);
        assert_eq!(ids_of(&v[0]["remove"]), [daily.as_str()], "{keep}: {v}");
    }
}

#[test]
fn groups_and_filters() {
    let (e, src) = setup();
    let a1 = backup(&e, &src, "a1", &["--host", "alpha"]);
    let b1 = backup(&e, &src, "b1", &["--host", "beta", "--tag", "t"]);
    let a2 = backup(&e, &src, "a2", &["--host", "alpha", "--tag", "t"]);
    let b2 = backup(&e, &src, "b2", &["--host", "beta"]);

    // Default host,paths: one group per host, each keeps its newest.
    let v = e.json(&["forget", "--keep-last", "1", "--json", "--dry-run"]);
    let groups = v.as_array().unwrap();
    assert_eq!(groups.len(), 2, "{v}");
    assert_eq!(groups[0]["group_key"]["hostname"], "alpha");
    assert_eq!(ids_of(&groups[0]["keep"]), [a2.as_str()]);
    assert_eq!(ids_of(&groups[0]["remove"]), [a1.as_str()]);
    assert_eq!(groups[1]["group_key"]["hostname"], "beta");
    assert_eq!(ids_of(&groups[1]["keep"]), [b2.as_str()]);
    assert_eq!(ids_of(&groups[1]["remove"]), [b1.as_str()]);

    // By paths only: one group, no host in its key.
    let v = e.json(&["forget", "-l", "1", "--group-by", "paths", "--json", "-n"]);
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["group_key"]["hostname"], "");
    assert_eq!(ids_of(&v[0]["keep"]), [b2.as_str()]);
    assert_eq!(v[0]["remove"].as_array().unwrap().len(), 3);
    // By tags: [] and [t].
    let v = e.json(&["forget", "-l", "1", "--group-by", "tags", "--json", "-n"]);
    assert_eq!(v.as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v[0]["group_key"]["tags"], serde_json::json!([]));
    assert_eq!(v[1]["group_key"]["tags"], serde_json::json!(["t"]));
    assert_eq!(v[0]["group_key"]["paths"], Value::Null);
    assert_eq!(ids_of(&v[1]["keep"]), [a2.as_str()]);
    // Everything in one group.
    let v = e.json(&["forget", "-l", "2", "--group-by", "", "--json", "-n"]);
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(ids_of(&v[0]["keep"]), [b2.as_str(), a2.as_str()]);
    assert_eq!(ids(&e).len(), 4);

    // --tag: only tagged snapshots are considered (one group per host).
    let out = e.ok(&["forget", "--tag", "t", "--keep-last", "1", "--group-by", ""]);
    assert!(out.contains("removed 1 snapshot"), "{out}");
    assert_eq!(ids(&e), [a1.as_str(), a2.as_str(), b2.as_str()]);
    // --host: only that host's snapshots.
    let out = e.ok(&["forget", "--host", "alpha", "--keep-last", "1"]);
    assert!(out.contains("snapshots for host [alpha]"), "{out}");
    assert!(!out.contains("host [beta]"), "{out}");
    assert_eq!(ids(&e), [a2.as_str(), b2.as_str()]);
    // --path that no snapshot has: nothing.
    let out = e.ok(&["forget", "--path", "/nowhere", "--keep-last", "1"]);
    assert!(out.contains("nothing to remove"), "{out}");
    assert_eq!(ids(&e).len(), 2);
}

#[test]
fn time_rules_on_snapshots_made_now() {
    let (e, src) = setup();
    let s1 = backup(&e, &src, "1", &[]);
    let _s2 = backup(&e, &src, "2", &[]);
    let s3 = backup(&e, &src, "3", &[]);
    // All within a day of the newest.
    let out = e.ok(&["forget", "--keep-within", "1d", "--keep-within-daily", "1h"]);
    assert!(out.contains("within 1d"), "{out}");
    assert!(out.contains("nothing to remove"), "{out}");
    assert_eq!(ids(&e).len(), 3);
    // One daily: only the newest (whether or not the backups straddle midnight).
    let v = e.json(&["forget", "--keep-daily", "1", "--json", "-n"]);
    assert_eq!(ids_of(&v[0]["keep"]), [s3.as_str()]);
    // Two daily: the newest and, the counts not used up, the oldest ("oldest daily snapshot"
    // when all three were made on the same day).
    let v = e.json(&["forget", "--keep-daily", "2", "--json", "-n"]);
    let keep = ids_of(&v[0]["keep"]);
    assert_eq!(keep.len(), 2, "{v}");
    assert_eq!(keep[0], s3);
    let snaps: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let day = |i: usize| snaps[i]["time"].as_str().unwrap()[..10].to_string();
    if day(0) == day(2) {
        assert_eq!(keep[1], s1);
        assert_eq!(
            v[0]["reasons"][1]["matches"],
            serde_json::json!(["oldest daily snapshot"])
        );
    }
    // Unlimited yearly keeps the newest and the oldest (within one year).
    let v = e.json(&["forget", "--keep-yearly", "unlimited", "--json", "-n"]);
    if day(0)[..4] == day(2)[..4] {
        assert_eq!(ids_of(&v[0]["keep"]), [s3.as_str(), s1.as_str()], "{v}");
    }
    assert_eq!(ids(&e).len(), 3);

    // Bad values are refused before anything happens.
    for bad in [
        &["forget", "--keep-last", "-2"][..],
        &["forget", "--keep-daily", "many"],
        &["forget", "--keep-within", "3x"],
        &["forget", "--keep-within-weekly", "2w"],
        &["forget", "--group-by", "colour", "-l", "1"],
        &["forget", "--keep-tag", ",", "-l", "1"],
    ] {
        let o = e.run(bad);
        assert!(!o.status.success(), "{bad:?}");
        assert!(!stderr(&o).is_empty(), "{bad:?}");
    }
    assert_eq!(ids(&e).len(), 3);
}

#[test]
fn prune_after_forget_frees_the_data_only_removed_snapshots_used() {
    let (e, src) = setup();
    backup(&e, &src, "1", &[]);
    // Data only the first snapshots have.
    fs::write(src.join("gone.bin"), arca_testkit::random_bytes(9, 600_000)).unwrap();
    backup(&e, &src, "2", &[]);
    fs::remove_file(src.join("gone.bin")).unwrap();
    let s3 = backup(&e, &src, "3", &[]);
    let packs = |e: &Env| arca_testkit::files_under(&e.repo.join("data")).len();
    let size = |e: &Env| {
        arca_testkit::files_under(&e.repo.join("data"))
            .iter()
            .map(|p| fs::metadata(p).unwrap().len())
            .sum::<u64>()
    };
    let before = size(&e);
    assert!(packs(&e) > 0);
    // A dry run shows the prune's plan as if the snapshots were gone (as restic), and
    // changes nothing.
    let all = ids(&e);
    let dry = e.ok(&["forget", "--keep-last", "1", "--prune", "--dry-run"]);
    assert!(
        dry.contains("would remove 2 snapshots, then prune"),
        "{dry}"
    );
    assert!(dry.contains("would free about"), "{dry}");
    assert!(!dry.contains("would free about 0 B"), "{dry}");
    assert_eq!(ids(&e), all);
    assert_eq!(size(&e), before);
    let out = e.ok(&[
        "forget",
        "--keep-last",
        "1",
        "--keep-tag",
        "none",
        "--prune",
    ]);
    assert!(out.contains("removed 2 snapshots"), "{out}");
    assert!(out.contains("running prune"), "{out}");
    assert_eq!(ids(&e), [s3.as_str()]);
    assert!(size(&e) + 500_000 < before, "{} -> {}", before, size(&e));
    e.ok(&["check", "--read-data"]);
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let d = compare::diff_trees(&src, &target.join(src.strip_prefix("/").unwrap()));
    assert!(d.is_empty(), "{d:?}");

    // With --json: one document holding the groups and prune's summary (its plan in a dry
    // run, which frees what the real one then frees).
    fs::write(
        src.join("gone.bin"),
        arca_testkit::random_bytes(10, 600_000),
    )
    .unwrap();
    backup(&e, &src, "4", &[]);
    fs::remove_file(src.join("gone.bin")).unwrap();
    let s5 = backup(&e, &src, "5", &[]);
    let dry = e.ok(&["forget", "-l", "1", "--prune", "--json", "--dry-run"]);
    let v: Value = serde_json::from_str(&dry).unwrap();
    assert_eq!(ids_of(&v["forget"][0]["remove"]).len(), 2, "{dry}");
    assert_eq!(v["prune"]["dry_run"], true, "{dry}");
    assert_eq!(v["prune"]["snapshots"], 1, "{dry}");
    let planned = v["prune"]["freed_bytes"].as_u64().unwrap();
    assert!(planned > 500_000, "{dry}");
    let out = e.ok(&["forget", "-l", "1", "--prune", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(ids(&e), [s5.as_str()]);
    assert!(v["prune"]["dry_run"] == false, "{out}");
    assert_eq!(v["prune"]["freed_bytes"].as_u64(), Some(planned), "{out}");
    e.ok(&["check", "--read-data"]);

    // Bad values are usage errors (exit 2) naming the option.
    for (opt, bad) in [("--max-unused", "abc"), ("--max-repack-size", "xx")] {
        let o = e.run(&["prune", opt, bad]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(opt), "{}", stderr(&o));
    }
    let o = e.run(&["check", "--read-data-subset", "0/3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// One damaged snapshot file does not stop the repository: listings and `latest` leave it out
/// with a warning naming it, backups go on, prune refuses (what it uses is unknown) and says
/// how to remove it, and `forget ID` removes it.
#[test]
fn a_damaged_snapshot_is_left_out_and_can_be_forgotten() {
    let (e, src) = setup();
    let first = backup(&e, &src, "one", &[]);
    let second = backup(&e, &src, "two", &[]);
    let file = e.repo.join("snapshots").join(&first);
    let mut bytes = fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    fs::write(&file, &bytes).unwrap();
    let short = &first[..8];

    let o = e.run(&["snapshots", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let warn = stderr(&o);
    assert!(
        warn.contains("damaged snapshot file")
            && warn.contains(short)
            && warn.contains(&format!("arca forget {short}")),
        "{warn}"
    );
    assert_eq!(
        warn.matches(short).count(),
        2,
        "named once, and in the advice: {warn}"
    );
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(ids_of(&listed), vec![second.clone()]);
    // A command that finds two snapshots (each listing them) names it once too.
    let o = e.run(&["diff", "latest", &second]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches("damaged snapshot file").count(),
        1,
        "{}",
        stderr(&o)
    );
    // Backups and restores of the rest go on.
    let third = backup(&e, &src, "three", &[]);
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        e.path("out").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Prune cannot know what the damaged snapshot uses: it refuses, saying how to go on.
    let o = e.run(&["prune"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!("arca forget {short}")),
        "{}",
        stderr(&o)
    );
    // Forgetting it by id removes the file.
    let o = e.run(&["forget", short]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("remove a damaged snapshot file: "),
        "{}",
        stderr(&o)
    );
    // The file named once.
    assert_eq!(stderr(&o).matches(&first[..8]).count(), 1, "{}", stderr(&o));
    assert!(!file.exists());
    let o = e.run(&["snapshots"]);
    assert!(
        o.status.success() && !stderr(&o).contains("warning"),
        "{}",
        stderr(&o)
    );
    assert_eq!(ids(&e), vec![second, third]);
    e.ok(&["prune"]);
    e.ok(&["check", "--read-data"]);
}

/// `--path` names a path as `backup` stores it: a trailing slash, `.` and `..`, doubled
/// slashes and a path relative to the current folder all match (each matched nothing).
#[test]
fn a_path_filter_is_normalized_as_backup_stores_paths() {
    let (e, src) = setup();
    let id = backup(&e, &src, "1", &[]);
    let s = src.to_str().unwrap();
    let parent = src.parent().unwrap();
    for form in [
        format!("{s}/"),
        format!("{s}/."),
        format!("/{s}"),
        format!("{s}/../src"),
        "src".to_string(),
        "./src/".to_string(),
    ] {
        let o = e
            .cmd(&["snapshots", "--json", "--path", &form])
            .current_dir(parent)
            .output()
            .unwrap();
        assert!(o.status.success(), "{form}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(ids_of(&v), [id.as_str()], "{form}");
    }
    let v: Value =
        serde_json::from_str(&e.ok(&["snapshots", "--json", "--path", "/elsewhere"])).unwrap();
    assert!(ids_of(&v).is_empty());
}

/// The snapshot table as restic prints it: columns as wide as their values, one tag and path
/// per line (a path holding a space reads as one); `-c` puts the tags on one line without
/// paths; `-g` lists groups, in JSON too.
#[test]
fn snapshots_table_compact_and_groups() {
    let (e, src) = setup();
    let spaced = e.path("p 2");
    fs::create_dir_all(&spaced).unwrap();
    let host = "a-very-long-hostname.example.com";
    let (s, p) = (src.to_str().unwrap(), spaced.to_str().unwrap());
    let a = e.json(&[
        "backup",
        "--json",
        "--host",
        host,
        "--tag",
        "alpha,beta",
        s,
        p,
    ]);
    let a = a["snapshot_id"].as_str().unwrap();
    backup(&e, &src, "b", &[]);
    let table = e.ok(&["snapshots"]);
    let lines: Vec<&str> = table.lines().collect();
    let first = lines.iter().position(|l| l.contains(&a[..8])).unwrap();
    let row = lines[first];
    assert!(row.contains(host) && row.contains("alpha"), "{table}");
    let next = lines[first + 1];
    assert!(next.trim_start().starts_with("beta"), "{table}");
    // Each path on its own line, whole.
    let with_path = |p: &str| lines.iter().filter(|l| l.ends_with(p)).count();
    assert_eq!(with_path(p), 1, "{table}");
    // Columns line up: the tags start at the same place on every line of the row.
    assert_eq!(row.find("alpha"), next.find("beta"), "{table}");
    let compact = e.ok(&["snapshots", "-c"]);
    assert!(compact.contains("alpha,beta"), "{compact}");
    assert!(
        !compact.contains("Paths") && !compact.contains(s),
        "{compact}"
    );
    let grouped = e.ok(&["snapshots", "-g", "host"]);
    assert!(
        grouped.contains(&format!("snapshots for host [{host}]:")),
        "{grouped}"
    );
    assert_eq!(grouped.matches("snapshots for").count(), 2, "{grouped}");
    let json = e.json(&["snapshots", "-g", "host", "--json"]);
    let groups = json.as_array().unwrap();
    assert_eq!(groups.len(), 2, "{json}");
    assert_eq!(groups[0]["group_key"]["hostname"], host);
    assert_eq!(groups[0]["snapshots"][0]["id"], a);
    let forget = e.ok(&["forget", "--keep-last", "1", "-n", "-c"]);
    assert!(
        forget.contains("last snapshot") && forget.contains("alpha,beta"),
        "{forget}"
    );
}

/// A snapshot forgotten before a prune comes back with `recover`: a `/recover` snapshot
/// (tag `recovered`) holds its listing, and restores its files byte for byte; a dry run and a
/// repository where every listing is reached write nothing; prune then keeps that data.
#[test]
fn recover_brings_back_what_forget_dropped_before_prune() {
    let (e, src) = setup();
    let first = backup(&e, &src, "the first version", &[]);
    let second = backup(&e, &src, "the second version, longer", &[]);
    let none = e.json(&["recover", "--json"]);
    assert_eq!(none["roots"].as_array().unwrap().len(), 0, "{none}");
    assert!(none["snapshot_id"].is_null());
    e.ok(&["forget", &first]);
    assert_eq!(ids(&e), [second]);

    let dry = e.json(&["recover", "--dry-run", "--json"]);
    assert_eq!(dry["roots"].as_array().unwrap().len(), 1, "{dry}");
    assert!(dry["snapshot_id"].is_null());
    assert_eq!(ids(&e).len(), 1, "a dry run saves nothing");
    let r = e.json(&["recover", "--json"]);
    let roots = r["roots"].as_array().unwrap();
    assert_eq!(roots.len(), 1, "{r}");
    let recovered = r["snapshot_id"].as_str().unwrap().to_string();
    let snaps = e.json(&["snapshots", "--json"]);
    let snap = snaps
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == recovered.as_str())
        .unwrap();
    assert_eq!(snap["paths"][0], "/recover");
    assert_eq!(snap["tags"][0], "recovered");
    // The forgotten snapshot's tree, under /recover/<short id>, restores as it was.
    let short = &roots[0].as_str().unwrap()[..8];
    let target = e.path("t");
    e.ok(&["restore", &recovered, "--target", target.to_str().unwrap()]);
    let old = target
        .join("recover")
        .join(short)
        .join(src.strip_prefix("/").unwrap());
    assert_eq!(
        fs::read_to_string(old.join("version.txt")).unwrap(),
        "the first version"
    );
    let diffs = compare::diff(
        &compare::snapshot(&src).unwrap(),
        &src,
        &compare::snapshot(&old).unwrap(),
        &old,
    );
    assert!(
        diffs.iter().all(|d| d.contains("version.txt")),
        "only the changed file differs: {diffs:?}"
    );
    // Everything is reached now; prune keeps the recovered data.
    assert_eq!(
        e.json(&["recover", "--json"])["roots"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    e.ok(&["prune"]);
    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(0, Vec::len), 0, "{check}");
    let again = e.path("t2");
    e.ok(&["restore", &recovered, "--target", again.to_str().unwrap()]);
    assert_eq!(
        fs::read_to_string(
            again
                .join("recover")
                .join(short)
                .join(src.strip_prefix("/").unwrap())
                .join("version.txt")
        )
        .unwrap(),
        "the first version"
    );
}

/// A policy that keeps none of a group's snapshots (a misspelt `--keep-tag`) is refused, as
/// restic refuses it, and removes nothing, also with --prune; `--unsafe-allow-remove-all`
/// lets it through.
#[test]
fn a_policy_keeping_nothing_of_a_group_is_refused() {
    let (e, src) = setup();
    backup(&e, &src, "one", &["--tag", "keep"]);
    backup(&e, &src, "two", &[]);
    backup(&e, &src, "three", &[]);
    let before = ids(&e);
    for extra in [&[][..], &["--dry-run"], &["--prune"]] {
        let mut args = vec!["forget", "--keep-tag", "kepe"];
        args.extend_from_slice(extra);
        let o = e.run(&args);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("refusing to remove every snapshot")
                && err.contains("3 snapshot(s)")
                && err.contains("--unsafe-allow-remove-all"),
            "{err}"
        );
        assert_eq!(ids(&e), before);
    }
    // The right tag keeps one: allowed.
    e.ok(&["forget", "--keep-tag", "keep", "--dry-run"]);
    let out = e.ok(&["forget", "--keep-tag", "kepe", "--unsafe-allow-remove-all"]);
    assert!(out.contains("removed 3"), "{out}");
    assert!(ids(&e).is_empty());
}

/// `recover` that cannot read some listings (their pack damaged) says so and finishes with
/// exit 3, as every command that leaves something out does. It exited 0.
#[test]
fn recover_with_unreadable_listings_exits_3() {
    let (e, src) = setup();
    let packs = |e: &Env| -> std::collections::BTreeSet<std::path::PathBuf> {
        arca_testkit::files_under(&e.repo.join("data"))
            .into_iter()
            .filter(|p| p.is_file())
            .collect()
    };
    let first = backup(&e, &src, "the first version", &[]);
    let after_first = packs(&e);
    backup(&e, &src, "the second version, longer", &[]);
    e.ok(&["forget", &first]);
    // Every pack the first backup wrote, its listings' among them, damaged in the middle.
    for p in &after_first {
        let len = fs::metadata(p).unwrap().len();
        arca_testkit::flip_byte(p, len / 2).unwrap();
    }
    let o = e.run(&["recover", "--dry-run"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be read"), "{}", stderr(&o));
    let o = e.run(&["recover", "--json", "--dry-run"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}
