//! End-to-end tests of `arca rewrite`: backup's patterns (`--exclude`, `--iexclude`, pattern
//! files, non-UTF-8 names) drop paths from snapshots; the exact text and JSON reports; the
//! rewritten snapshot restores without exactly the dropped paths and the rest equal in bytes
//! and metadata; untouched subtrees keep their ids; `--forget` then `prune` leaves a clean
//! `check`; `--dry-run` writes nothing; bad patterns and unknown snapshots fail naming them.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use arca_testkit::{compare, random_bytes, text_bytes};
use serde_json::{Value, json};

mod common;
use common::*;

/// The snapshots as `snapshots --json` prints them, by id.
fn snapshots(e: &Env) -> BTreeMap<String, Value> {
    let v: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// The id in `after` and not in `before`.
fn new_id(before: &BTreeMap<String, Value>, after: &BTreeMap<String, Value>) -> String {
    let new: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    assert_eq!(new.len(), 1, "{new:?}");
    new[0].clone()
}

/// Every repository file but the locks, with its bytes.
fn repo_files(e: &Env) -> BTreeMap<PathBuf, Vec<u8>> {
    arca_testkit::files_under(&e.repo)
        .into_iter()
        .filter(|p| !p.starts_with(e.repo.join("locks")))
        .map(|p| {
            let b = fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

/// The source: every entry kind under `all/`, and files whose sizes the reports show.
fn source(e: &Env) -> PathBuf {
    let src = e.path("src");
    arca_testkit::generate::every_kind(&src.join("all"), 7).unwrap();
    fs::create_dir_all(src.join("cache/sub")).unwrap();
    fs::create_dir_all(src.join("docs/deep")).unwrap();
    fs::write(src.join("keep.txt"), text_bytes(1, 10_000)).unwrap();
    fs::write(src.join("secret.key"), random_bytes(2, 5_000)).unwrap();
    fs::write(src.join("cache/a.bin"), random_bytes(3, 20_000)).unwrap();
    fs::write(src.join("cache/b.bin"), random_bytes(4, 30_000)).unwrap();
    fs::write(src.join("cache/sub/c.bin"), random_bytes(5, 1_000)).unwrap();
    fs::write(src.join("docs/x.txt"), text_bytes(6, 2_000)).unwrap();
    fs::write(src.join("docs/notes.TMP"), random_bytes(7, 3_000)).unwrap();
    fs::write(src.join("docs/deep/y.tmp"), random_bytes(8, 4_100)).unwrap();
    src
}

/// A repository with one backup of [`source`] tagged "daily"; its id.
fn setup() -> (Env, PathBuf, String) {
    let e = Env::new();
    let src = source(&e);
    e.init(&SMALL_CHUNKS);
    let v = e.json(&["backup", "--json", "--tag", "daily", src.to_str().unwrap()]);
    let id = v["snapshot_id"].as_str().unwrap().to_string();
    (e, src, id)
}

/// `ls --json` of a snapshot: subtree ids by path.
fn subtrees(e: &Env, id: &str) -> BTreeMap<String, String> {
    e.ok(&["ls", "--json", id])
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            Some((
                v["path"].as_str()?.to_string(),
                v["subtree"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Restores `id` and compares it with `expected` (a capture of `src`), bytes and metadata.
fn restore_matches(e: &Env, id: &str, src: &Path, expected: &BTreeMap<PathBuf, compare::Entry>) {
    let target = e.path("target");
    let _ = fs::remove_dir_all(&target);
    e.ok(&["restore", id, "--target", target.to_str().unwrap()]);
    let out = target.join(src.strip_prefix("/").unwrap());
    let diffs = compare::diff(expected, src, &compare::snapshot(&out).unwrap(), &out);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn rewrite_drops_exactly_the_matching_paths() {
    let (e, src, id) = setup();
    let s = src.to_str().unwrap();
    let expected_all = compare::snapshot(&src).unwrap();
    let before = snapshots(&e);
    let old_trees = subtrees(&e, &id);
    let list = e.path("exclude.txt");
    fs::write(&list, "# secrets\n\n*.key\n").unwrap();
    let ilist = e.path("iexclude.txt");
    fs::write(&ilist, "*.tmp\n").unwrap();
    let o = e.run(&[
        "rewrite",
        "-e",
        &format!("{s}/cache"),
        "--exclude",
        &format!("{s}/all/latin1-*"),
        "--exclude-file",
        list.to_str().unwrap(),
        "--iexclude-file",
        ilist.to_str().unwrap(),
        &id[..10],
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let after = snapshots(&e);
    let n = new_id(&before, &after);
    let mut want = format!(
        "snapshot {}: removing 5 entries (7 files, 61.63 KiB)\n  {s}/all/",
        &id[..8]
    )
    .into_bytes();
    want.extend_from_slice(b"latin1-\xe9t\xe9 (file, 14 B)\n");
    want.extend_from_slice(
        format!(
            "  {s}/cache (dir: 3 files, 49.80 KiB)\n\
             \x20 {s}/docs/deep/y.tmp (file, 4.00 KiB)\n\
             \x20 {s}/docs/notes.TMP (file, 2.93 KiB)\n\
             \x20 {s}/secret.key (file, 4.88 KiB)\n\
             saved new snapshot {}\n\
             modified 1 snapshot\n",
            &n[..8]
        )
        .as_bytes(),
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&want)
    );
    assert_eq!(o.stdout, want);

    // The original stays; the copy has the same time, host and paths, the "rewrite" tag, and
    // its totals less what was dropped.
    assert_eq!(after.len(), 2);
    assert_eq!(after[&id], before[&id]);
    let (old, new) = (&before[&id], &after[&n]);
    assert_eq!(new["tags"], json!(["daily", "rewrite"]));
    for k in [
        "time", "hostname", "paths", "username", "parent", "complete",
    ] {
        assert_eq!(new[k], old[k], "{k}");
    }
    let total = |v: &Value, k: &str| v["summary"][k].as_u64().unwrap();
    assert_eq!(
        total(new, "total_files_processed"),
        total(old, "total_files_processed") - 7
    );
    assert_eq!(
        total(new, "total_bytes_processed"),
        total(old, "total_bytes_processed") - 63_114
    );
    assert_eq!(total(new, "files_new"), total(old, "files_new"));

    // Untouched directories keep their listings; those above a dropped path change.
    let new_trees = subtrees(&e, &n);
    let all = format!("{s}/all");
    for same in [
        format!("{all}/dir"),
        format!("{all}/dir/nested"),
        format!("{all}/sticky"),
    ] {
        assert_eq!(new_trees[&same], old_trees[&same], "{same}");
    }
    for changed in [
        s.to_string(),
        all.clone(),
        format!("{s}/docs"),
        format!("{s}/docs/deep"),
    ] {
        assert_ne!(new_trees[&changed], old_trees[&changed], "{changed}");
    }
    assert!(!new_trees.contains_key(&format!("{s}/cache")));

    // The copy restores without exactly the dropped paths; the rest is equal.
    let mut expected = expected_all.clone();
    let dropped = |p: &Path| {
        p.starts_with("cache")
            || p == Path::new("secret.key")
            || p == Path::new("docs/notes.TMP")
            || p == Path::new("docs/deep/y.tmp")
            || p == Path::new(OsStr::from_bytes(b"all/latin1-\xe9t\xe9"))
    };
    expected.retain(|p, _| !dropped(p));
    assert_eq!(
        expected_all.len() - expected.len(),
        9,
        "5 entries, 4 below cache"
    );
    restore_matches(&e, &n, &src, &expected);
    // The original still restores in full.
    restore_matches(&e, &id, &src, &expected_all);
}

#[test]
fn dry_run_writes_nothing_and_json_reports_the_rewrite() {
    let (e, src, id) = setup();
    let s = src.to_str().unwrap();
    let files = repo_files(&e);
    let out = e.ok(&["rewrite", "--dry-run", "--forget", "-e", "*.key", "latest"]);
    assert_eq!(
        out,
        format!(
            "snapshot {}: would remove 1 entry (1 file, 4.88 KiB)\n  {s}/secret.key (file, \
             4.88 KiB)\nwould save a new snapshot\nwould remove old snapshot {}\nwould modify 1 \
             snapshot\n",
            &id[..8],
            &id[..8]
        )
    );
    let v = e.json(&["rewrite", "-n", "--json", "-e", "/nowhere", "-e", "*.key"]);
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["snapshots"][0]["new_snapshot_id"], Value::Null);
    assert_eq!(v["snapshots"][0]["bytes_removed"], 5_000);
    // Every listing from the root down to `src`.
    let depth = src.components().count();
    assert_eq!(v["trees_written"], depth);
    assert_eq!(v["packs_written"], 0);
    assert_eq!(repo_files(&e), files, "a dry run changes no file");

    let before = snapshots(&e);
    let v = e.json(&["rewrite", "--json", "--forget", "-e", "*.key", &id]);
    let after = snapshots(&e);
    let n = new_id(&before, &after);
    let index = v["index_file"].as_str().unwrap().to_string();
    assert!(e.repo.join("index").join(&index).exists());
    assert_eq!(
        v,
        json!({
            "message_type": "summary",
            "dry_run": false,
            "forget": true,
            "snapshots": [{
                "snapshot_id": id,
                "modified": true,
                "emptied": false,
                "new_snapshot_id": n,
                "adopted": false,
                "forgotten": true,
                "tags": ["daily"],
                "files_removed": 1,
                "bytes_removed": 5_000,
                "removed": [{"path": format!("{s}/secret.key"), "type": "file", "files": 1, "bytes": 5_000}],
            }],
            "modified_snapshots": 1,
            "trees_written": depth,
            "packs_written": 1,
            "index_file": index,
        })
    );
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        vec![&n],
        "the original is gone"
    );
    assert_eq!(after[&n]["tags"], json!(["daily"]), "--forget adds no tag");
}

#[test]
fn forget_then_prune_leaves_a_clean_repository() {
    let (e, src, id) = setup();
    let s = src.to_str().unwrap();
    // A second snapshot of another folder, which the pattern does not touch.
    let other = e.path("other");
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("f"), random_bytes(9, 3_000)).unwrap();
    let v = e.json(&["backup", "--json", other.to_str().unwrap()]);
    let second = v["snapshot_id"].as_str().unwrap().to_string();
    let expected_all = compare::snapshot(&src).unwrap();
    let before = snapshots(&e);

    let out = e.ok(&[
        "rewrite",
        "--forget",
        "-e",
        &format!("{s}/cache"),
        "-e",
        &format!("{s}/all/dir"),
    ]);
    let after = snapshots(&e);
    let n = new_id(&before, &after);
    assert_eq!(
        out,
        format!(
            "snapshot {}: removing 2 entries (8 files, 1.00 MiB)\n  {s}/all/dir (dir: 5 files, \
             976.60 KiB)\n  {s}/cache (dir: 3 files, 49.80 KiB)\nsaved new snapshot {}\nremoved \
             old snapshot {}\nsnapshot {}: nothing to rewrite\nmodified 1 snapshot\n",
            &id[..8],
            &n[..8],
            &id[..8],
            &second[..8]
        )
    );
    assert!(!after.contains_key(&id));
    assert!(after.contains_key(&second));

    e.ok(&["prune"]);
    let c = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(c["ok"], true, "{c}");
    assert_eq!(c["notes"].as_array().map_or(0, Vec::len), 0, "{c}");

    let mut expected = expected_all.clone();
    expected.retain(|p, _| !p.starts_with("cache") && !p.starts_with("all/dir"));
    restore_matches(&e, &n, &src, &expected);
}

#[test]
fn bad_input_fails_naming_it_and_changes_nothing() {
    let (e, _src, id) = setup();
    let files = repo_files(&e);
    let missing = e.path("no-such-list");
    // A bad pattern is a usage error (2); the others fail when used (1).
    for (args, needle, code) in [
        (vec!["rewrite", "-e", "[", &id], "\"[\"", 2),
        (vec!["rewrite", "--iexclude", "a[", &id], "a[", 2),
        (
            vec!["rewrite", "-e", "*.key", "cafebabe00"],
            "cafebabe00",
            1,
        ),
        (
            vec!["rewrite", "-e", "*.key", "latest", "nosuch"],
            "nosuch",
            1,
        ),
        // Given nothing to do: a usage error, as clap's are.
        (vec!["rewrite", &id], "nothing to do", 2),
        (
            vec!["rewrite", "--exclude-file", missing.to_str().unwrap(), &id],
            "no-such-list",
            1,
        ),
    ] {
        let o = e.run(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // A pattern matching nothing leaves the snapshot alone.
    let out = e.ok(&["rewrite", "-e", "/nowhere", &id]);
    assert_eq!(
        out,
        format!(
            "snapshot {}: nothing to rewrite\nno snapshots were modified\n",
            &id[..8]
        )
    );
    assert_eq!(repo_files(&e), files);
}

#[test]
fn tag_and_rewrite_work_on_s3_through_the_cache() {
    let e0 = Env::new();
    let s3 = arca_testkit::s3d::S3Server::start(&e0.path("s3"));
    s3.bucket("bucket");
    let e = Env::remote(s3.location("bucket", "repo"), s3.env());
    let src = e.path("src");
    sample(&src);
    e.init(&SMALL_CHUNKS);
    let v = e.json(&["backup", "--json", src.to_str().unwrap()]);
    let id = v["snapshot_id"].as_str().unwrap().to_string();
    let expected_all = compare::snapshot(&src).unwrap();

    let before = snapshots(&e);
    e.ok(&["tag", "--add", "t", "latest"]);
    let after = snapshots(&e);
    let tagged = new_id(&before, &after);
    assert_eq!(after.len(), 1, "the cache does not keep the old snapshot");
    assert_eq!(after[&tagged]["tags"], json!(["t"]));

    let out = e.ok(&["rewrite", "--forget", "-e", "*.bin", "latest"]);
    let before = after;
    let after = snapshots(&e);
    let n = new_id(&before, &after);
    assert_eq!(after.len(), 1);
    assert!(
        out.contains(&format!("removed old snapshot {}", &tagged[..8])),
        "{out}"
    );
    assert!(!after.contains_key(&id));

    e.ok(&["prune"]);
    let c = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(c["ok"], true, "{c}");
    let mut expected = expected_all.clone();
    expected.retain(|p, _| p.extension() != Some(OsStr::new("bin")));
    assert_eq!(expected_all.len() - expected.len(), 2);
    restore_matches(&e, &n, &src, &expected);
}

#[test]
fn a_rewrite_that_would_empty_a_snapshot_leaves_it_alone() {
    let (e, src, id) = setup();
    let before = snapshots(&e);
    let o = e.run(&[
        "rewrite",
        "--exclude",
        src.to_str().unwrap(),
        "--forget",
        &id,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("exclude every path it backed up"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshots(&e), before, "nothing was saved or forgotten");
    let v = e.json(&["rewrite", "--exclude", src.to_str().unwrap(), "--json", &id]);
    assert_eq!(v["snapshots"][0]["emptied"], true, "{v}");
    assert_eq!(v["snapshots"][0]["modified"], false, "{v}");
    // Nothing was written for it either (no unused trees for prune to find).
    assert_eq!(v["packs_written"], 0, "{v}");
    let check = e.run(&["check"]);
    assert!(
        !stderr(&check).contains("used by no snapshot"),
        "{}",
        stderr(&check)
    );
}

#[test]
fn a_negation_takes_back_what_it_takes_back_in_backup() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("x")).unwrap();
    fs::write(src.join("x/keep"), b"keep").unwrap();
    fs::write(src.join("x/junk"), b"junk").unwrap();
    fs::write(src.join("top"), b"top").unwrap();
    let s = src.display().to_string();
    let (x, back) = (format!("{s}/x"), format!("!{s}/x/keep"));
    let listed = |e: &Env| {
        let mut v: Vec<String> = e
            .ok(&["ls", "latest", "--recursive", &s])
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{s}/")).map(str::to_string))
            .collect();
        v.sort();
        v
    };
    e.ok(&["backup", &s, "-e", &x, "-e", &back]);
    let by_backup = listed(&e);
    assert_eq!(by_backup, ["top", "x", "x/keep"]);
    // The same patterns given to rewrite drop the same entries, no more: `x/keep` went too.
    e.ok(&["backup", &s, "--tag", "full"]);
    e.ok(&[
        "rewrite", "--tag", "full", "-e", &x, "-e", &back, "--forget",
    ]);
    assert_eq!(listed(&e), by_backup);
}

/// restic's `rewrite --new-host` and `--new-time` change only those fields: the tree stays
/// (no pack or index file is written), the copy gets the "rewrite" tag unless `--forget`
/// removes the original, and a snapshot that has the values already is left alone. The
/// options did not exist (exit 2: "unexpected argument").
#[test]
fn new_host_and_new_time_change_only_the_metadata() {
    let (e, _src, id) = setup();
    let before = snapshots(&e);
    let old = &before[&id];
    let packs = fs::read_dir(e.repo.join("index")).unwrap().count();
    let out = e.ok(&[
        "rewrite",
        "--new-host",
        "elsewhere",
        "--new-time",
        "2020-02-03T04:05:06Z",
        &id[..8],
    ]);
    let after = snapshots(&e);
    let n = new_id(&before, &after);
    let old_time = chrono::DateTime::parse_from_rfc3339(old["time"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Local)
        .format("%Y-%m-%d %H:%M:%S");
    let new_time = chrono::DateTime::parse_from_rfc3339("2020-02-03T04:05:06Z")
        .unwrap()
        .with_timezone(&chrono::Local)
        .format("%Y-%m-%d %H:%M:%S");
    let short = &id[..8];
    assert_eq!(
        out,
        format!(
            "snapshot {short}: setting host to elsewhere (was {})\nsnapshot {short}: setting \
             time to {new_time} (was {old_time})\nsaved new snapshot {}\nmodified 1 snapshot\n",
            old["hostname"].as_str().unwrap(),
            &n[..8]
        )
    );
    let new = &after[&n];
    assert_eq!(new["hostname"], "elsewhere");
    assert_eq!(new["time"], "2020-02-03T04:05:06Z");
    assert_eq!(new["tree"], old["tree"], "the tree is kept");
    assert_eq!(new["tags"], json!(["daily", "rewrite"]));
    assert_eq!(new["original"], id.as_str());
    assert_eq!(new["paths"], old["paths"]);
    assert!(after.contains_key(&id), "the original is kept");
    assert_eq!(
        fs::read_dir(e.repo.join("index")).unwrap().count(),
        packs,
        "no index file: nothing but the snapshot is written"
    );

    // The copy has these values already.
    let again = e.ok(&["rewrite", "--new-host", "elsewhere", &n[..8]]);
    assert_eq!(
        again,
        format!(
            "snapshot {}: nothing to rewrite\nno snapshots were modified\n",
            &n[..8]
        )
    );

    // --forget: the original goes, no tag is added.
    let v = e.json(&[
        "rewrite",
        "--json",
        "--forget",
        "--new-host",
        "third",
        &id[..8],
    ]);
    assert_eq!(v["snapshots"][0]["old_hostname"], old["hostname"]);
    assert_eq!(v["snapshots"][0]["hostname"], "third");
    assert_eq!(v["snapshots"][0]["time"], Value::Null, "the time stays");
    let last = snapshots(&e);
    assert!(!last.contains_key(&id));
    let third = v["snapshots"][0]["new_snapshot_id"].as_str().unwrap();
    assert_eq!(last[third]["tags"], json!(["daily"]));
    assert_eq!(last[third]["time"], old["time"]);

    let o = e.run(&["rewrite", &n[..8]]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(
        stderr(&o).contains("--new-host or --new-time"),
        "{}",
        stderr(&o)
    );
}

/// A copy an earlier run saved is taken, not saved again, and the output says so: a rerun
/// without `--forget`, and a `--forget` run stopped before it removed the original (its file
/// put back here), printed "saved new snapshot X" for a snapshot they did not save, and
/// their JSON could not tell it from one saved. Now the line is "found new snapshot X, saved
/// by an earlier run" and JSON has `adopted`.
#[test]
fn a_copy_saved_by_an_earlier_run_is_reported_as_found() {
    let (e, _src, id) = setup();
    let short = &id[..8];
    let json = |args: &[&str]| -> Value {
        let v = e.json(&[&["rewrite", "--json"], args].concat());
        v["snapshots"][0].clone()
    };
    let first = json(&["--new-host", "h2", short]);
    assert_eq!(first["adopted"], false, "{first}");
    let new = first["new_snapshot_id"].as_str().unwrap().to_string();
    let files = repo_files(&e);
    let out = e.ok(&["rewrite", "--new-host", "h2", short]);
    assert!(
        out.contains(&format!(
            "found new snapshot {}, saved by an earlier run",
            &new[..8]
        )) && !out.contains("saved new snapshot"),
        "{out}"
    );
    // Not counted as modified: nothing was written.
    assert!(
        out.ends_with("no snapshots were modified; 1 snapshot was rewritten by an earlier run\n"),
        "{out}"
    );
    let again = json(&["--new-host", "h2", short]);
    assert_eq!(again["adopted"], true, "{again}");
    assert_eq!(again["new_snapshot_id"], new.as_str(), "{again}");
    assert_eq!(repo_files(&e), files, "nothing written");

    // A --forget run stopped after saving its copy: the original is back beside it.
    let original = e.repo.join("snapshots").join(&id);
    let bytes = fs::read(&original).unwrap();
    let v = json(&["--forget", "--new-host", "h3", short]);
    let forgot = v["new_snapshot_id"].as_str().unwrap().to_string();
    assert_eq!(v["adopted"], false, "{v}");
    fs::write(&original, &bytes).unwrap();
    let out = e.ok(&["rewrite", "--forget", "--new-host", "h3", short]);
    assert!(
        out.contains(&format!(
            "found new snapshot {}, saved by an earlier run",
            &forgot[..8]
        )) && out.contains(&format!("removed old snapshot {short}")),
        "{out}"
    );
    assert!(!original.exists());

    // The same for tag.
    let tagged = e.repo.join("snapshots").join(&forgot);
    let bytes = fs::read(&tagged).unwrap();
    let out = e.ok(&["tag", "--json", "--add", "x", &forgot[..8]]);
    let line: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(line["adopted"], false, "{line}");
    let retagged = line["new_snapshot_id"].as_str().unwrap().to_string();
    fs::write(&tagged, &bytes).unwrap();
    let out = e.ok(&["tag", "--add", "x", &forgot[..8]]);
    assert_eq!(
        out,
        format!(
            "modified snapshot {} → {} (found, saved by an earlier run)\nmodified 1 snapshot\n",
            &forgot[..8],
            &retagged[..8]
        )
    );
    assert!(!tagged.exists());
    assert_eq!(
        snapshots(&e).len(),
        2,
        "the first rewrite's copy, and the retagged one"
    );
}
