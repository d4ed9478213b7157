//! End-to-end tests of `arca tag`: `--add`, `--remove`, `--set` (comma lists, `--set ""`) on
//! named snapshots and on every snapshot passing the filters, the exact text and JSON output,
//! the old snapshot file replaced by one with the new tags and nothing else changed,
//! `--dry-run`, and bad input (a folder in a snapshot, `latest:/x`, where a snapshot is asked for).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::Value;

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

fn tags(s: &Value) -> Vec<String> {
    s["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

/// A snapshot's fields other than its id and tags.
/// A snapshot's JSON without what `tag` changes: its id, its tags, and the original it names.
fn rest(s: &Value) -> Value {
    let mut s = s.clone();
    let m = s.as_object_mut().unwrap();
    for k in ["id", "short_id", "tags", "original"] {
        m.remove(k);
    }
    s
}

/// The snapshot files' names and bytes.
fn snapshot_files(e: &Env) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(e.repo.join("snapshots"))
        .unwrap()
        .map(|f| {
            let f = f.unwrap();
            (
                f.file_name().to_string_lossy().into_owned(),
                fs::read(f.path()).unwrap(),
            )
        })
        .collect()
}

/// Backs `src` up with `extra` options; the snapshot id.
fn backup(e: &Env, src: &Path, extra: &[&str]) -> String {
    let mut a = vec!["backup", "--json"];
    a.extend_from_slice(extra);
    a.push(src.to_str().unwrap());
    e.json(&a)["snapshot_id"].as_str().unwrap().to_string()
}

/// Two snapshots: `a` tagged "daily" on host h1, `b` tagged "daily,keep" on host h2.
fn setup() -> (Env, String, String) {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&SMALL_CHUNKS);
    let a = backup(&e, &src, &["--tag", "daily", "--host", "h1"]);
    let b = backup(
        &e,
        &src,
        &["--tag", "daily", "--tag", "keep", "--host", "h2"],
    );
    (e, a, b)
}

/// The id that is in `after` and not in `before`.
fn new_id(before: &BTreeMap<String, Value>, after: &BTreeMap<String, Value>) -> String {
    let new: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    assert_eq!(new.len(), 1, "{new:?}");
    new[0].clone()
}

#[test]
fn add_replaces_the_snapshot_with_a_retagged_copy() {
    let (e, a, b) = setup();
    let before = snapshots(&e);
    let out = e.ok(&["tag", "--add", "x,y", "--add", "daily", &a[..8]]);
    let after = snapshots(&e);
    let n = new_id(&before, &after);
    assert_eq!(
        out,
        format!(
            "modified snapshot {} → {}\nmodified 1 snapshot\n",
            &a[..8],
            &n[..8]
        )
    );
    assert!(!after.contains_key(&a), "the old snapshot is gone");
    assert!(!e.repo.join("snapshots").join(&a).exists());
    assert_eq!(after.len(), 2);
    assert_eq!(tags(&after[&n]), vec!["daily", "x", "y"]);
    assert_eq!(rest(&after[&n]), rest(&before[&a]), "only the tags change");
    assert_eq!(
        after[&n]["original"],
        a.as_str(),
        "and it names its original"
    );
    assert_eq!(after[&b], before[&b], "the other snapshot is untouched");
    // The copy restores like the original did.
    let t = e.path("restore");
    e.ok(&["restore", &n, "--target", t.to_str().unwrap()]);
    let src = e.path("src");
    assert!(
        arca_testkit::compare::diff_trees(&src, &t.join(src.strip_prefix("/").unwrap())).is_empty()
    );
}

#[test]
fn without_ids_every_snapshot_passing_the_filters_is_changed() {
    let (e, a, b) = setup();
    // Only `b` has "keep": `a` is left alone.
    let before = snapshots(&e);
    let out = e.ok(&["tag", "--remove", "keep"]);
    let after = snapshots(&e);
    let nb = new_id(&before, &after);
    assert_eq!(
        out,
        format!(
            "modified snapshot {} → {}\nmodified 1 snapshot\n",
            &b[..8],
            &nb[..8]
        )
    );
    assert_eq!(after[&a], before[&a]);
    assert_eq!(tags(&after[&nb]), vec!["daily"]);

    // --host selects; --set "" removes every tag.
    let before = snapshots(&e);
    let out = e.ok(&["tag", "--set", "", "--host", "h1"]);
    let after = snapshots(&e);
    let na = new_id(&before, &after);
    assert_eq!(
        out,
        format!(
            "modified snapshot {} → {}\nmodified 1 snapshot\n",
            &a[..8],
            &na[..8]
        )
    );
    assert_eq!(tags(&after[&na]), Vec::<String>::new());
    assert_eq!(after[&nb], before[&nb]);

    // --tag selects; --set replaces in the order given, once each.
    let before = snapshots(&e);
    e.ok(&["tag", "--set", "z,y", "--set", "z", "--tag", "daily"]);
    let after = snapshots(&e);
    let nb2 = new_id(&before, &after);
    assert_eq!(tags(&after[&nb2]), vec!["z", "y"]);

    // Nothing to change anywhere: no file is touched.
    let files = snapshot_files(&e);
    let out = e.ok(&["tag", "--add", "z", "latest", &nb2]);
    assert_eq!(out, "no snapshots were modified\n");
    assert_eq!(snapshot_files(&e), files);
}

#[test]
fn json_lines_name_old_and_new_ids() {
    let (e, a, b) = setup();
    let before = snapshots(&e);
    let out = e.ok(&["tag", "--json", "--add", "j", "--remove", "daily"]);
    let after = snapshots(&e);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    // Oldest first: a, then b.
    for (line, (old, old_tags, new_tags)) in lines.iter().zip([
        (&a, vec!["daily"], vec!["j"]),
        (&b, vec!["daily", "keep"], vec!["keep", "j"]),
    ]) {
        let new = line["new_snapshot_id"].as_str().unwrap();
        assert!(after.contains_key(new) && !before.contains_key(new));
        assert_eq!(
            *line,
            serde_json::json!({
                "message_type": "changed",
                "old_snapshot_id": old,
                "new_snapshot_id": new,
                "adopted": false,
                "old_tags": old_tags,
                "tags": new_tags,
            })
        );
        assert_eq!(tags(&after[new]), new_tags);
    }
    assert_eq!(
        lines[2],
        serde_json::json!({"message_type": "summary", "dry_run": false, "changed_snapshots": 2})
    );
    assert_eq!(after.len(), 2);
}

#[test]
fn dry_run_changes_nothing() {
    let (e, a, _b) = setup();
    let files = snapshot_files(&e);
    let out = e.ok(&["tag", "--dry-run", "--add", "new", &a]);
    assert_eq!(
        out,
        format!(
            "would modify snapshot {}: tags [daily] → [daily,new]\nwould modify 1 snapshot\n",
            &a[..8]
        )
    );
    let out = e.ok(&["tag", "-n", "--json", "--set", "s", "latest"]);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["new_snapshot_id"], Value::Null);
    assert_eq!(lines[0]["tags"], serde_json::json!(["s"]));
    assert_eq!(
        lines[1],
        serde_json::json!({"message_type": "summary", "dry_run": true, "changed_snapshots": 1})
    );
    assert_eq!(snapshot_files(&e), files, "snapshot files are identical");
}

#[test]
fn bad_input_fails_naming_it() {
    let (e, _a, _b) = setup();
    let files = snapshot_files(&e);
    // Options that exclude each other, or give nothing to do, are usage errors (exit 2, as
    // clap's; they exited 1); a snapshot that is not there is a failure (1).
    for (args, needle, code) in [
        (&["tag", "--add", "x", "deadbeef99"][..], "deadbeef99", 1),
        (&["tag", "--add", "x", "latest", "nosuch"][..], "nosuch", 1),
        (&["tag", "--set", "a", "--add", "b"][..], "--set", 2),
        (&["tag", "--set", "a", "--remove", "b"][..], "--set", 2),
        (&["tag", "latest"][..], "nothing to do", 2),
        // An empty tag names none, said so (hunt 30: "give --add", which was given).
        (&["tag", "--add", ",", "latest"][..], "need a tag", 2),
        (&["tag", "--remove", "", "latest"][..], "need a tag", 2),
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(snapshot_files(&e), files, "nothing changed");
}

/// `latest:/x` (a folder in a snapshot, as `ls`, `dump` and `restore` take it) given to
/// commands that take snapshots only is named as such, not as a snapshot that is missing.
#[test]
fn a_folder_in_a_snapshot_is_refused_as_such() {
    let (e, a, _b) = setup();
    let files = snapshot_files(&e);
    let with_id = format!("{}:/x", &a[..8]);
    for args in [
        &["tag", "--add", "x", "latest:/x"][..],
        &["forget", "latest:/x"][..],
        &["stats", "latest:/x"][..],
        &["cat", "snapshot", "latest:/x"][..],
        &["tag", "--add", "x", with_id.as_str()][..],
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        let spec = args.last().unwrap();
        assert!(
            err.contains(&format!(
                "\"{spec}\" names a folder in a snapshot (ID:FOLDER)"
            )) && !err.contains("no snapshot matches"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(snapshot_files(&e), files, "nothing changed");
}

/// `tag`, `rewrite`, `forget`, `find` and `stats` over every snapshot leave a damaged
/// snapshot file out, name it once, handle the others, and exit 3 as `copy` does (they exited
/// 0 with a warning, so a script could not tell that a snapshot was not handled). Named snapshots
/// exit 0; `snapshots` (a listing) still exits 0.
#[test]
fn commands_over_every_snapshot_exit_3_when_a_damaged_file_is_left_out() {
    let (e, a, b) = setup();
    let file = e.repo.join("snapshots").join(&a);
    let mut bytes = fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    fs::write(&file, &bytes).unwrap();
    let short = &a[..8];
    let left_out = |args: &[&str]| {
        let o = e.run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        assert_eq!(
            err.matches("damaged snapshot file").count(),
            1,
            "{args:?}: named once: {err}"
        );
        assert!(err.contains(short), "{args:?}: {err}");
        assert!(
            err.contains("1 snapshot file could not be read and was left out"),
            "{args:?}: {err}"
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    left_out(&["tag", "--add", "x", "--dry-run"]);
    let out = left_out(&["tag", "--add", "x"]);
    assert!(out.contains("modified 1 snapshot"), "{out}");
    left_out(&["rewrite", "--new-host", "h3", "--dry-run"]);
    let out = left_out(&["rewrite", "--new-host", "h3", "--forget"]);
    assert!(out.contains("modified 1 snapshot"), "{out}");
    left_out(&["forget", "--keep-last", "1", "--dry-run"]);
    left_out(&["forget", "--keep-last", "1"]);
    assert!(file.exists(), "the damaged file stays");
    // find and stats over every snapshot give results without it, and say so.
    let out = left_out(&["find", "*"]);
    assert!(!out.contains(short), "{out}");
    left_out(&["stats"]);
    left_out(&["stats", "--json"]);
    // The other snapshot was handled: tagged and moved to h3, once.
    let after = snapshots(&e);
    assert_eq!(after.len(), 1, "{after:?}");
    let s = after.values().next().unwrap();
    assert_eq!(tags(s), vec!["daily", "keep", "x"]);
    assert_eq!(s["hostname"], "h3");
    assert!(!after.contains_key(&b));
    // Named, the other snapshot is handled without a look at the damaged one.
    let id = after.keys().next().unwrap().clone();
    let o = e.run(&["tag", "--add", "y", &id[..8]]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // (tag saved it anew, under a new id)
    let id = snapshots(&e).keys().next().unwrap().clone();
    for args in [&["stats", &id[..8]][..], &["find", "*", "-s", &id[..8]]] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    }
    let o = e.run(&["snapshots"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
