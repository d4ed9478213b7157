//! `arca repair index|packs|snapshots` and check's repair proposals end to end: index files
//! deleted or damaged, a data pack lost, damaged or cut short, and `check --read-data-subset`.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use arca_testkit::{compare, random_bytes};
use common::*;
use serde_json::{Value, json};

/// 24 files of 150 KB in two folders: several data packs of 1 MiB.
fn source(dir: &Path, from: u64, to: u64) {
    for i in from..to {
        let sub = dir.join(if i % 2 == 0 { "even" } else { "odd" });
        fs::create_dir_all(&sub).unwrap();
        fs::write(sub.join(format!("f{i:02}")), random_bytes(i, 150_000)).unwrap();
    }
}

fn init(e: &Env) {
    let mut a = vec!["--pack-size", "1MiB"];
    a.extend_from_slice(&SMALL_CHUNKS);
    e.init(&a);
}

fn restored(target: &Path, src: &Path) -> PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v = arca_testkit::files_under(dir);
    v.sort();
    v
}

fn index_files(e: &Env) -> Vec<PathBuf> {
    files(&e.repo.join("index"))
}

fn pack_files(e: &Env) -> Vec<PathBuf> {
    files(&e.repo.join("data"))
}

/// The repair commands a check proposes.
/// The repository's data pack files (as `cat pack` says of each).
fn data_packs(e: &Env) -> Vec<PathBuf> {
    pack_files(e)
        .into_iter()
        .filter(|p| {
            let id = p.file_name().unwrap().to_str().unwrap();
            let h: Value = serde_json::from_str(&e.ok(&["cat", "pack", id])).unwrap();
            h["type"] == "data"
        })
        .collect()
}

fn repairs(v: &Value) -> Vec<String> {
    v["repair"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["command"].as_str().unwrap().to_string())
        .collect()
}

/// `check` with `args`, whatever its exit code, as JSON.
fn check_json(e: &Env, args: &[&str]) -> Value {
    let mut a = vec!["check", "--json"];
    a.extend_from_slice(args);
    let o = e.run(&a);
    let out = String::from_utf8(o.stdout).unwrap();
    let v: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(o.status.success(), v["ok"] == true, "{v}");
    v
}

fn assert_clean(e: &Env) {
    let v = check_json(e, &["--read-data"]);
    assert_eq!(v["ok"], true, "{v}");
    assert!(
        repairs(&v).iter().all(|r| r == "arca prune"),
        "{:?}",
        repairs(&v)
    );
}

fn restore_same(e: &Env, snapshot: &str, src: &Path, target: &str) {
    let t = e.path(target);
    e.ok(&["restore", snapshot, "--target", t.to_str().unwrap()]);
    let d = compare::diff_trees(src, &restored(&t, src));
    assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));
}

#[test]
fn deleted_index_files_are_rebuilt_from_the_packs() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 24);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    for f in index_files(&e) {
        fs::remove_file(f).unwrap();
    }
    let v = check_json(&e, &[]);
    assert_eq!(v["ok"], false);
    assert_eq!(repairs(&v)[0], "arca repair index", "{v}");
    // restic's summary fields too.
    assert_eq!(v["suggest_repair_index"], true, "{v}");
    assert_eq!(
        v["num_errors"],
        v["errors"].as_array().unwrap().len(),
        "{v}"
    );
    assert!(v["num_errors"].as_u64().unwrap() > 0, "{v}");
    assert!(v["broken_packs"].is_array(), "{v}");
    let o = e.run(&["check"]);
    assert!(
        stderr(&o).contains("to repair: run `arca repair index`"),
        "{}",
        stderr(&o)
    );

    // A dry run changes nothing.
    let dry = e.json(&["repair", "index", "--dry-run", "--json"]);
    assert_eq!(dry["packs_indexed"], pack_files(&e).len(), "{dry}");
    assert!(index_files(&e).is_empty());

    let r = e.json(&["repair", "index", "--json"]);
    assert_eq!(r["packs_found"], pack_files(&e).len(), "{r}");
    assert_eq!(r["headers_read"], r["packs_found"]);
    assert_eq!(r["packs_indexed"], r["packs_found"]);
    assert_eq!(r["unreadable_packs"].as_array().unwrap().len(), 0);
    assert_eq!(index_files(&e).len(), 1);
    assert_clean(&e);
    restore_same(&e, "latest", &src, "t");
    // Text output names what was done.
    let out = e.ok(&["repair", "index"]);
    assert!(out.contains("described by intact index files"), "{out}");
}

#[test]
fn a_damaged_index_file_is_skipped_with_a_warning_then_repaired() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 12);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let first: HashSet<PathBuf> = index_files(&e).into_iter().collect();
    let snaps = e.json(&["snapshots", "--json"]);
    let first_snapshot = snaps[0]["id"].as_str().unwrap().to_string();
    let src2 = e.path("src2");
    source(&src2, 12, 24);
    e.ok(&["backup", src2.to_str().unwrap()]);
    let second: Vec<PathBuf> = index_files(&e)
        .into_iter()
        .filter(|f| !first.contains(f))
        .collect();
    assert_eq!(second.len(), 1);
    let damaged = &second[0];
    let name = damaged.file_name().unwrap().to_str().unwrap().to_string();
    arca_testkit::flip_byte(damaged, 40).unwrap();

    // Commands go on with a warning naming the file and the repair.
    let o = e.run(&["snapshots"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = e.path("t1");
    let o = e.run(&["restore", &first_snapshot, "--target", t.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let warn = stderr(&o);
    assert!(
        warn.contains("damaged index file (index ")
            && warn.contains(&name)
            && warn.contains("run `arca repair index`"),
        "{warn}"
    );
    // Named once.
    assert_eq!(warn.matches(name.as_str()).count(), 1, "{warn}");
    assert!(compare::diff_trees(&src, &restored(&t, &src)).is_empty());
    let o = e.run(&["ls", &first_snapshot]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning"), "{}", stderr(&o));

    // Check reports it and proposes `repair index` first.
    let v = check_json(&e, &[]);
    assert_eq!(v["ok"], false);
    assert!(
        v["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().contains(&name)),
        "{v}"
    );
    assert_eq!(repairs(&v)[0], "arca repair index", "{v}");
    // `repair snapshots` refuses to cut data the damaged index file may still name.
    let o = e.run(&["repair", "snapshots", "--forget"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("arca repair index"), "{}", stderr(&o));

    let r = e.json(&["repair", "index", "--json"]);
    assert_eq!(r["damaged_index_files"][0]["id"], name.as_str(), "{r}");
    assert!(!damaged.exists());
    let o = e.run(&["snapshots"]);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    assert_clean(&e);
    restore_same(&e, "latest", &src2, "t2");
}

#[test]
fn a_lost_data_pack_is_zeroed_in_the_snapshots() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 24);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap(), "--tag", "daily"]);
    let before = e.json(&["snapshots", "--json"]);
    let original = before[0]["id"].as_str().unwrap().to_string();
    // Lose a data pack (the middle one, so some files keep their first blocks).
    let data = data_packs(&e);
    assert!(data.len() >= 3, "{} data packs", data.len());
    fs::remove_file(&data[data.len() / 2]).unwrap();

    let v = check_json(&e, &[]);
    assert_eq!(v["ok"], false);
    assert_eq!(
        repairs(&v),
        vec!["arca repair index", "arca repair snapshots --forget"],
        "{v}"
    );
    let lost: HashSet<PathBuf> = v["affected"][0]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect();
    assert!(!lost.is_empty() && lost.len() < 24, "{lost:?}");
    let o = e.run(&["check"]);
    assert!(
        stderr(&o).contains("to repair: run `arca repair snapshots --forget`"),
        "{}",
        stderr(&o)
    );

    // A dry run names the paths and writes nothing.
    let packs = pack_files(&e).len();
    let dry = e.json(&["repair", "snapshots", "--dry-run", "--forget", "--json"]);
    assert_eq!(
        dry["damaged"][0]["changes"].as_array().unwrap().len(),
        lost.len(),
        "{dry}"
    );
    assert_eq!(pack_files(&e).len(), packs);
    assert_eq!(e.json(&["snapshots", "--json"]), before);

    // As check proposes: the index first, then the snapshots.
    // Without --forget first, then with it: the second run takes the copy the first saved,
    // and says so.
    let out = e.ok(&["repair", "index"]);
    assert!(out.contains(" blobs of missing packs are lost"), "{out}");
    let first = e.ok(&["repair", "snapshots"]);
    assert!(
        first.contains(" repaired as ") && !first.contains("earlier run"),
        "{first}"
    );
    let r = e.json(&["repair", "snapshots", "--forget", "--json"]);
    let d = &r["damaged"][0];
    assert_eq!(d["original"], original.as_str(), "{r}");
    assert_eq!(
        (&d["forgotten"], &d["adopted"]),
        (&json!(true), &json!(true))
    );
    let changed: HashSet<PathBuf> = d["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["action"], "zeroed", "{c}");
            let zeroed = c["zeroed"].as_u64().unwrap();
            assert!(zeroed > 0 && zeroed <= c["size"].as_u64().unwrap(), "{c}");
            assert!(!c["lost_blobs"].as_array().unwrap().is_empty(), "{c}");
            PathBuf::from(c["path"].as_str().unwrap())
        })
        .collect();
    assert_eq!(changed, lost);
    let after = e.json(&["snapshots", "--json"]);
    assert_eq!(after.as_array().unwrap().len(), 1, "{after}");
    assert_eq!(after[0]["id"], d["repaired"]);
    assert_eq!(after[0]["tags"], serde_json::json!(["daily", "repaired"]));
    assert_eq!(after[0]["paths"], before[0]["paths"]);
    assert_eq!(after[0]["time"], before[0]["time"]);
    assert_clean(&e);

    // The damaged files come back at their size, every byte the original's or a zero (what
    // lay after a lost block was cut away before); the others intact. (Whether a file here
    // keeps blocks after its lost one depends on where the chunker cut; the unit test
    // `repair_snapshots_keeps_what_a_pack_of_the_wrong_size_still_holds` keeps one for sure.)
    let t = e.path("t");
    e.ok(&["restore", "latest", "--target", t.to_str().unwrap()]);
    let mut intact = 0;
    for f in files(&src) {
        let back = restored(&t, &f);
        let want = fs::read(&f).unwrap();
        let got = fs::read(&back).unwrap();
        if lost.contains(&f) {
            assert_eq!(got.len(), want.len(), "{f:?}");
            assert!(
                got.iter().zip(&want).all(|(g, w)| g == w || *g == 0),
                "{f:?}"
            );
        } else {
            assert_eq!(got, want, "{f:?}");
            intact += 1;
        }
    }
    assert_eq!(intact, 24 - lost.len());
    // Nothing is left to repair.
    let again = e.json(&["repair", "snapshots", "--json"]);
    assert_eq!(again["damaged"].as_array().unwrap().len(), 0, "{again}");
}

#[test]
fn read_data_subset_reads_groups_and_shares_of_the_packs() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 40);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let ids: Vec<String> = pack_files(&e)
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    let total = ids.len() as u64;
    assert!(total >= 5, "{total} packs");
    let mut read = 0;
    let mut blobs = 0;
    for n in 1..=3u64 {
        let arg = format!("{n}/3");
        let v = check_json(&e, &["--read-data-subset", &arg]);
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["packs"], total);
        // The group is the packs whose id's first byte is n-1 modulo 3.
        let want = ids
            .iter()
            .filter(|id| u64::from(u8::from_str_radix(&id[..2], 16).unwrap()) % 3 == n - 1)
            .count() as u64;
        assert_eq!(v["packs_read"], want, "{arg}: {v}");
        read += v["packs_read"].as_u64().unwrap();
        blobs += v["blobs_read"].as_u64().unwrap();
    }
    assert_eq!(read, total);
    let all = check_json(&e, &["--read-data"]);
    assert_eq!(all["packs_read"], total);
    assert_eq!(all["blobs_read"], blobs);

    let v = check_json(&e, &["--read-data-subset", "50%"]);
    assert_eq!(v["packs_read"], total / 2, "{v}");
    let v = check_json(&e, &["--read-data-subset", "1%"]);
    assert_eq!(v["packs_read"], 1, "{v}");
    let v = check_json(&e, &["--read-data-subset", "100G"]);
    assert_eq!(v["packs_read"], total, "{v}");
    let out = e.ok(&["check", "--read-data-subset", "2/3"]);
    assert!(out.contains("read group 2 of 3"), "{out}");

    for bad in ["0/3", "4/3", "1/300", "0%", "150%", "lots"] {
        let o = e.run(&["check", "--read-data-subset", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&o).contains("read-data-subset"),
            "{bad}: {}",
            stderr(&o)
        );
    }
    let o = e.run(&["check", "--read-data", "--read-data-subset", "1/2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// The largest data pack's file.
fn largest_pack(e: &Env) -> PathBuf {
    pack_files(e)
        .into_iter()
        .max_by_key(|p| fs::metadata(p).unwrap().len())
        .unwrap()
}

/// A data pack whose header is damaged (its blobs intact): check names `repair packs` for
/// it, which rewrites it; nothing is lost, and `repair index` never drops what it held.
#[test]
fn a_damaged_pack_header_is_repaired_by_repair_packs_without_loss() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 24);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let pack = largest_pack(&e);
    let id = pack.file_name().unwrap().to_str().unwrap().to_string();
    let size = fs::metadata(&pack).unwrap().len();
    arca_testkit::flip_byte(&pack, size - 30).unwrap();
    let v = check_json(&e, &["--read-data"]);
    assert_eq!(repairs(&v), vec![format!("arca repair packs {id}")], "{v}");
    // repair index, even reading every header, keeps what the index knew of the pack, and
    // says so (not "left out").
    let o = e.run(&["repair", "index", "--read-all-packs"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("kept as an intact index file described it"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("left out"), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("are lost"));
    restore_same(&e, "latest", &src, "t0");
    let v = check_json(&e, &["--read-data"]);
    assert_eq!(repairs(&v), vec![format!("arca repair packs {id}")], "{v}");
    // A dry run changes nothing.
    let out = e.ok(&["repair", "packs", &id[..12], "--dry-run"]);
    assert!(out.contains("dry run"), "{out}");
    assert!(pack.exists());
    let r = e.json(&["repair", "packs", &id[..12], "--json"]);
    assert!(r["lost_blobs"].as_array().unwrap().is_empty(), "{r}");
    assert!(r["salvaged_blobs"].as_u64().unwrap() > 0);
    assert!(!pack.exists());
    assert_clean(&e);
    restore_same(&e, "latest", &src, "t1");
    // An intact pack named is rewritten too; it is not called damaged.
    let intact = largest_pack(&e);
    let out = e.ok(&[
        "repair",
        "packs",
        intact.file_name().unwrap().to_str().unwrap(),
    ]);
    assert!(
        out.contains("1 old pack") && !out.contains("damaged"),
        "{out}"
    );
    assert_clean(&e);
}

/// A data pack cut short: `repair packs` keeps the blobs before the cut, `repair snapshots`
/// puts zeros in place of the lost ones, and every file whose blobs survived restores whole.
#[test]
fn a_truncated_pack_keeps_what_lies_before_the_cut() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 24);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let pack = largest_pack(&e);
    let id = pack.file_name().unwrap().to_str().unwrap().to_string();
    let size = fs::metadata(&pack).unwrap().len();
    arca_testkit::truncate_by(&pack, size / 2).unwrap();
    let v = check_json(&e, &[]);
    assert_eq!(
        repairs(&v),
        vec![
            format!("arca repair packs {id}"),
            "arca repair snapshots --forget".to_string()
        ],
        "{v}"
    );
    let r = e.json(&["repair", "packs", &id, "--json"]);
    let salvaged = r["salvaged_blobs"].as_u64().unwrap();
    let lost = r["lost_blobs"].as_array().unwrap().len();
    assert!(salvaged > 0 && lost > 0, "{r}");
    e.ok(&["repair", "snapshots", "--forget"]);
    assert_clean(&e);
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    // Every file keeps its size: whole, or with zeros where its lost blocks were (and the
    // original bytes everywhere else); at least one is whole, at least one is not.
    let (mut whole, mut zeroed) = (0, 0);
    for f in files(&src) {
        let back = restored(&target, &f);
        let (a, b) = (fs::read(&f).unwrap(), fs::read(&back).unwrap());
        assert_eq!(a.len(), b.len(), "{}", back.display());
        if a == b {
            whole += 1;
        } else {
            let ok = a.iter().zip(&b).all(|(x, y)| x == y || *y == 0);
            assert!(
                ok,
                "{}: a byte neither the original's nor zero",
                back.display()
            );
            zeroed += 1;
        }
    }
    assert!(whole > 0 && zeroed > 0, "{whole} whole, {zeroed} zeroed");
}

/// No line names the same object (an id, by its first 8 hex digits) twice.
fn each_id_once(out: &str) {
    for line in out.lines() {
        let mut seen = HashSet::new();
        for w in line.split(|c: char| !c.is_ascii_hexdigit()) {
            if w.len() >= 8 && !seen.insert(&w[..8]) {
                panic!("{} named twice in: {line}", &w[..8]);
            }
        }
    }
}

/// A repository of `source` whose largest pack has its header damaged (and, with
/// `Some(n)`, a byte at its size / n too), with every index file deleted: the repository,
/// the source, the pack file and its id.
fn headerless_pack(blob_hit: Option<u64>) -> (Env, PathBuf, PathBuf, String) {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 24);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let pack = largest_pack(&e);
    let id = pack.file_name().unwrap().to_str().unwrap().to_string();
    let size = fs::metadata(&pack).unwrap().len();
    arca_testkit::flip_byte(&pack, size - 20).unwrap();
    if let Some(n) = blob_hit {
        arca_testkit::flip_byte(&pack, size / n).unwrap();
    }
    for f in index_files(&e) {
        fs::remove_file(f).unwrap();
    }
    (e, src, pack, id)
}

/// A pack whose header is damaged, with the index gone: `repair index` leaves it out, and
/// from then on no command sends the user back to `repair index` for it (each did, in a
/// circle): check proposes `repair packs` for it, which finds every blob without the header
/// (carving: stored chunks end at the chunker's cut or at the length the snapshot gives
/// them), and the repository is whole again. Every message names each object once.
#[test]
fn an_unindexable_pack_is_carved_by_repair_packs() {
    let (e, src, pack, id) = headerless_pack(None);
    let o = e.run(&["repair", "index"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("pack {id}")), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("run `arca repair packs` with it"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    each_id_once(&stderr(&o));

    let v = check_json(&e, &["--read-data"]);
    assert_eq!(
        repairs(&v),
        vec![
            format!("arca repair packs {id}"),
            "arca repair snapshots --forget".to_string()
        ],
        "{v}"
    );
    let notes = v["notes"].to_string();
    assert!(
        notes.contains(&id) && notes.contains("header cannot be read"),
        "{notes}"
    );
    for err in v["errors"].as_array().unwrap() {
        each_id_once(err.as_str().unwrap());
    }
    let o = e.run(&["prune"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("whose header is damaged"),
        "{}",
        stderr(&o)
    );

    let dry = e.ok(&["repair", "packs", &id, "--dry-run"]);
    assert!(dry.contains("dry run") && pack.exists(), "{dry}");
    let r = e.json(&["repair", "packs", &id, "--json"]);
    let carved = &r["carved"][0];
    assert_eq!(carved["pack"], id.as_str(), "{r}");
    assert_eq!(carved["kind"], "data", "{r}");
    assert_eq!(carved["unresolved_bytes"], 0, "{r}");
    assert!(carved["referenced_blobs"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(carved["blobs"], r["salvaged_blobs"], "{r}");
    assert!(r["lost_blobs"].as_array().unwrap().is_empty(), "{r}");
    assert!(
        !pack.exists(),
        "every byte accounted for: the pack is deleted"
    );
    assert_clean(&e);
    restore_same(&e, "latest", &src, "t");
}

/// Carving a pack with a damaged blob besides its damaged header: every other blob is
/// found, the pack stays on the backend (some of its bytes held no blob that verified),
/// and `repair snapshots` then zeroes only the blocks of the damaged blob.
#[test]
fn a_carved_pack_with_a_damaged_blob_is_kept_and_loses_only_that_blob() {
    let (e, src, pack, id) = headerless_pack(Some(3));
    e.ok(&["repair", "index"]);
    let o = e.run(&["repair", "packs", &id]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("held no blob that verified"),
        "{}",
        stderr(&o)
    );
    each_id_once(&stderr(&o));
    assert!(pack.exists(), "kept: its unresolved bytes may hold blobs");
    e.ok(&["repair", "snapshots", "--forget"]);
    e.ok(&["prune"]);
    assert_clean(&e);
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let (mut whole, mut zeroed) = (0, 0);
    for f in files(&src) {
        let (a, b) = (
            fs::read(&f).unwrap(),
            fs::read(restored(&target, &f)).unwrap(),
        );
        assert_eq!(a.len(), b.len());
        if a == b {
            whole += 1;
        } else {
            assert!(a.iter().zip(&b).all(|(x, y)| x == y || *y == 0));
            zeroed += 1;
        }
    }
    assert_eq!(
        zeroed, 1,
        "only the file of the damaged blob ({whole} whole)"
    );
}

/// `repair packs` names each lost blob and its pack once.
#[test]
fn repair_packs_names_a_lost_blob_once() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 24);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let pack = largest_pack(&e);
    let id = pack.file_name().unwrap().to_str().unwrap().to_string();
    arca_testkit::flip_byte(&pack, 1000).unwrap();
    let o = e.run(&["repair", "packs", &id]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("is lost: damaged"), "{err}");
    each_id_once(&err);
}

/// Two data packs whose contents were swapped (a sync tool's error): every blob is intact
/// and each file's sealed header opens. Following check's advice keeps every blob, and a
/// second `repair packs` of the same ids says they no longer exist.
#[test]
fn swapped_packs_lose_nothing_when_check_is_followed() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 24);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    let mut packs = pack_files(&e);
    packs.sort_by_key(|p| std::cmp::Reverse(fs::metadata(p).unwrap().len()));
    let (a, b) = (packs[0].clone(), packs[1].clone());
    assert_ne!(
        fs::metadata(&a).unwrap().len(),
        fs::metadata(&b).unwrap().len()
    );
    let x = e.path("x");
    fs::rename(&a, &x).unwrap();
    fs::rename(&b, &a).unwrap();
    fs::rename(&x, &b).unwrap();
    let v = check_json(&e, &[]);
    let advice = repairs(&v);
    assert!(advice[0].starts_with("arca repair packs "), "{v}");
    let mut args: Vec<&str> = advice[0].split(' ').skip(1).collect();
    args.push("--json");
    let r = e.json(&args);
    assert!(r["lost_blobs"].as_array().unwrap().is_empty(), "{r}");
    assert_clean(&e);
    restore_same(&e, "latest", &src, "t");
    // Run again: the packs are gone, and it says so (not "run repair index first").
    let id = a.file_name().unwrap().to_str().unwrap();
    let o = e.run(&["repair", "packs", id]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("does not exist") && err.contains(id), "{err}");
    assert!(!err.contains("repair index"), "{err}");
}

/// A snapshot whose root listing is lost is removed by `repair snapshots --forget`, which
/// points to `arca recover` (its listings below may still be there) rather than saying that
/// nothing can be salvaged.
#[test]
fn a_lost_root_listing_points_to_recover() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 4);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    // The tree packs are the small ones: the data packs hold files of 150 KB.
    for p in pack_files(&e) {
        if fs::metadata(&p).unwrap().len() < 100_000 {
            fs::remove_file(p).unwrap();
        }
    }
    e.ok(&["repair", "index"]);
    // Left as it is, the snapshot stays damaged: exit 3, as when forget or tag cannot
    // handle a snapshot (it exited 0, and `check` still failed); removed, or to be removed
    // in a dry run with --forget, it does not.
    for (args, code) in [
        (&["repair", "snapshots"][..], 3),
        (&["repair", "snapshots", "--json"], 3),
        (&["repair", "snapshots", "--dry-run"], 3),
        (&["repair", "snapshots", "--dry-run", "--forget"], 0),
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        if code == 3 && !args.contains(&"--json") {
            assert!(
                String::from_utf8_lossy(&o.stdout).contains("cannot be repaired"),
                "{args:?}"
            );
        }
    }
    assert_ne!(check_json(&e, &[])["ok"], true, "still damaged");
    let o = e.run(&["repair", "snapshots", "--forget"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(all.contains("root listing is lost"), "{all}");
    assert!(all.contains("arca recover"), "{all}");
    assert!(!all.contains("nothing to salvage"), "{all}");
}

/// A damaged config file, with a key the password opens, is called damaged, not a wrong key.
#[test]
fn a_damaged_config_file_is_named_as_such() {
    let e = Env::new();
    init(&e);
    let config = e.repo.join("config");
    let size = fs::metadata(&config).unwrap().len();
    arca_testkit::flip_byte(&config, size - 5).unwrap();
    let o = e.run(&["snapshots"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("config is damaged"), "{err}");
    assert!(!err.contains("wrong key"), "{err}");
}

/// Every index file of the repository, by name, with its bytes.
fn index_bytes(e: &Env) -> Vec<(PathBuf, Vec<u8>)> {
    index_files(e)
        .into_iter()
        .map(|f| {
            let b = fs::read(&f).unwrap();
            (f, b)
        })
        .collect()
}

/// Replaces the largest data pack by one holding the same blobs under a header a newer arca
/// wrote (body version 2, sealed with the repository's key), and the index by one naming it;
/// returns the new pack's id.
fn newer_header_pack(e: &Env) -> String {
    use arca_format::{BlobKind, Id, IndexFile, IndexPack};
    let backend = std::sync::Arc::new(arca_backend::LocalBackend::new(&e.repo));
    let repo = arca_repo::Repository::open(backend, b"test password").unwrap();
    let loaded: Vec<(Id, IndexFile)> = repo
        .load_index_files()
        .unwrap()
        .into_iter()
        .map(|(id, f)| (id, f.unwrap()))
        .collect();
    let mut packs: Vec<IndexPack> = loaded.iter().flat_map(|(_, f)| f.packs.clone()).collect();
    let at = (0..packs.len())
        .filter(|&i| packs[i].kind == BlobKind::Data)
        .max_by_key(|&i| packs[i].size)
        .unwrap();
    let old_pack = e.repo.join(format!("data/{}", &packs[at].id.to_hex()[..2]));
    let old_pack = old_pack.join(packs[at].id.to_hex());
    let old = fs::read(&old_pack).unwrap();
    let (id, bytes) = arca_testkit::packs::with_newer_header(
        &old,
        BlobKind::Data,
        &packs[at].blobs,
        |aad, plain, out| repo.sealer().seal_into(aad, plain, out).unwrap(),
    );
    let new_pack = e.repo.join(format!("data/{}", &id.to_hex()[..2]));
    fs::write(new_pack.join(id.to_hex()), &bytes).unwrap();
    fs::remove_file(&old_pack).unwrap();
    packs[at] = IndexPack {
        id,
        size: bytes.len() as u64,
        ..packs[at].clone()
    };
    repo.save_index(&IndexFile {
        supersedes: vec![],
        packs,
    })
    .unwrap();
    for (old, _) in &loaded {
        fs::remove_file(e.repo.join("index").join(old.to_hex())).unwrap();
    }
    id.to_hex()
}

/// `repair packs` on a pack it leaves as it is (a newer arca wrote its header) says so and
/// that nothing was changed, and writes nothing: the index files stay, names and bytes (it
/// wrote the whole index again, superseding them).
#[test]
fn repair_packs_says_when_it_leaves_every_pack_as_it_is() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 8);
    init(&e);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let id = newer_header_pack(&e);
    let index = index_bytes(&e);
    let packs = pack_files(&e);
    let o = e.run(&["repair", "packs", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        out.lines().last(),
        Some("no pack to repair: nothing was changed"),
        "{out}"
    );
    assert!(!out.contains("salvage"), "{out}");
    let err = stderr(&o);
    assert!(
        err.contains(&format!("pack {}", &id[..8])) && err.contains("left as it is (not damage)"),
        "{err}"
    );
    assert_eq!(index_bytes(&e), index);
    assert_eq!(pack_files(&e), packs);
}

/// A pack renamed (a sync tool's doing) is found again by its header, blobs and all: `repair
/// index` said "blobs of packs left out are lost" and sent the user to `repair snapshots
/// --forget` while nothing was (hunt H6).
#[test]
fn a_renamed_pack_is_not_said_to_lose_blobs() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 4);
    init(&e);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let p = largest_pack(&e);
    let name = p.file_name().unwrap().to_str().unwrap().to_string();
    let other = format!(
        "{}{}",
        &name[..63],
        if name.ends_with('0') { '1' } else { '0' }
    );
    fs::rename(&p, p.with_file_name(other)).unwrap();
    let r = e.json(&["repair", "index", "--dry-run", "--json"]);
    assert_eq!(r["blobs_lost"], 0, "{r}");
    assert_eq!(r["missing_packs"].as_array().unwrap().len(), 1, "{r}");
    let out = e.ok(&["repair", "index"]);
    assert!(!out.contains("are lost"), "{out}");
    assert!(out.contains("no blob is lost"), "{out}");
    restore_same(&e, "latest", &src, "t");
}

/// `repair snapshots --host/--tag/--path` (restic's filters): only the snapshots passing
/// them are repaired; the option was refused. None passing is an error, not "nothing to do".
#[test]
fn repair_snapshots_takes_the_snapshot_filters() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 24);
    init(&e);
    for host in ["a", "b"] {
        e.ok(&["backup", "-q", "--host", host, src.to_str().unwrap()]);
    }
    let data = data_packs(&e);
    fs::remove_file(&data[data.len() / 2]).unwrap();
    e.ok(&["repair", "index", "-q"]);
    let snaps = e.json(&["snapshots", "--json"]);
    let of = |host: &str| {
        snaps
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["hostname"] == host)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let o = e.run(&["repair", "snapshots", "--host", "a", "--dry-run", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let r: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let damaged: Vec<&str> = r["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["original"].as_str().unwrap())
        .collect();
    assert_eq!(damaged, [of("a").as_str()], "{r}");
    let o = e.run(&["repair", "snapshots", "--host", "nobody"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no snapshot passes"), "{}", stderr(&o));
}

/// Every pack's header damaged and the index gone, in a repository that stores listings and
/// data as they are (compression off), plus an empty pack file: one `repair packs` of them
/// all finds every listing, then, from what those reference, every data blob; the empty
/// file is deleted, and the snapshot restores byte for byte.
#[test]
fn every_pack_headerless_is_carved_in_one_run() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 24);
    fs::create_dir_all(src.join("even/deeper/still")).unwrap();
    fs::write(src.join("even/deeper/still/tail"), random_bytes(99, 3_000)).unwrap();
    let mut a = vec!["--pack-size", "1MiB", "--compression", "0"];
    a.extend_from_slice(&SMALL_CHUNKS);
    e.init(&a);
    e.ok(&["backup", src.to_str().unwrap()]);
    let packs = pack_files(&e);
    for p in &packs {
        let size = fs::metadata(p).unwrap().len();
        arca_testkit::flip_byte(p, size - 20).unwrap();
    }
    let empty = e.repo.join("data/00").join("00".repeat(32));
    fs::create_dir_all(empty.parent().unwrap()).unwrap();
    fs::write(&empty, b"").unwrap();
    for f in index_files(&e) {
        fs::remove_file(f).unwrap();
    }
    e.ok(&["repair", "index"]);
    let mut args = vec!["repair".to_string(), "packs".into(), "--json".into()];
    args.extend(
        pack_files(&e)
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = e.json(&args);
    let carved = r["carved"].as_array().unwrap();
    assert_eq!(carved.len(), packs.len() + 1, "{r}");
    assert!(carved.iter().all(|c| c["unresolved_bytes"] == 0), "{r}");
    assert!(carved.iter().any(|c| c["kind"] == "tree"), "{r}");
    assert!(!empty.exists());
    assert!(packs.iter().all(|p| !p.exists()));
    assert_clean(&e);
    restore_same(&e, "latest", &src, "t");
}

/// A tree blob whose bytes are damaged, found by a check that reads no data: its pack is
/// proposed for `repair packs` before `repair snapshots` (only the latter was, which left the
/// damaged blob indexed: the next backup of the same folder referred to it again and was
/// damaged too, while check said clean). `repair snapshots` alone says the same. Following
/// the advice, a new backup restores byte for byte.
#[test]
fn a_damaged_listing_found_without_reading_data_gets_repair_packs() {
    let e = Env::new();
    let src = e.path("src");
    source(&src, 0, 4);
    init(&e);
    e.ok(&["backup", src.to_str().unwrap()]);
    // Every listing pack damaged in its first blob (the root's pack among them).
    let tree_packs: Vec<PathBuf> = pack_files(&e)
        .into_iter()
        .filter(|p| !data_packs(&e).contains(p))
        .collect();
    assert!(!tree_packs.is_empty());
    for p in &tree_packs {
        let mut b = fs::read(p).unwrap();
        b[20] ^= 1;
        fs::write(p, b).unwrap();
    }
    let v = check_json(&e, &[]);
    let proposed = repairs(&v);
    assert!(
        proposed
            .first()
            .is_some_and(|r| r.starts_with("arca repair packs ")),
        "{proposed:?}"
    );
    let o = e.run(&["repair", "snapshots", "--dry-run"]);
    assert!(
        stderr(&o).contains("stay in the index") && stderr(&o).contains("arca repair packs "),
        "{}",
        stderr(&o)
    );
    // Following the advice in order.
    for r in proposed {
        if r == "arca prune" {
            continue;
        }
        let args: Vec<&str> = r.split(' ').skip(1).collect();
        let o = e.run(&args);
        assert!(
            matches!(o.status.code(), Some(0 | 3)),
            "{r}: {}",
            stderr(&o)
        );
    }
    e.ok(&["backup", src.to_str().unwrap()]);
    restore_same(&e, "latest", &src, "after");
    let v = check_json(&e, &["--read-data"]);
    assert_eq!(v["ok"], true, "{v}");
}
