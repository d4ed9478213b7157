//! `arca prune`: after a snapshot is removed, the data only it used goes, the remaining
//! snapshot restores byte for byte and `check --read-data` is clean; `--dry-run` changes no
//! file; stale temporary files are removed, fresh ones kept; the same on SFTP.

#![allow(clippy::unwrap_used)]

mod common;
#[path = "../../arca-remote/tests/sshd/mod.rs"]
mod sshd;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use arca_testkit::{compare, random_bytes, text_bytes};
use common::*;

/// Every file under `dir` with its bytes.
fn tree_bytes(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    arca_testkit::files_under(dir)
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let b = fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

fn size_of(dir: &Path) -> u64 {
    tree_bytes(dir).values().map(|b| b.len() as u64).sum()
}

/// About 3 MB of incompressible files and some text; `seed` picks the data.
fn fill(dir: &Path, seed: u64) {
    fs::create_dir_all(dir.join("sub")).unwrap();
    for i in 0..6u64 {
        fs::write(
            dir.join(format!("f{i}.bin")),
            random_bytes(seed * 100 + i, 300_000 + i as usize * 50_000),
        )
        .unwrap();
    }
    fs::write(dir.join("sub/notes.txt"), text_bytes(seed, 80_000)).unwrap();
}

/// 1 MiB packs, 64 KiB chunks.
fn init(e: &Env) {
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
}

fn snapshot_ids(e: &Env) -> Vec<String> {
    e.json(&["snapshots", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// The snapshot file of the full id `id`.
fn snapshot_file(repo: &Path, id: &str) -> PathBuf {
    let p = repo.join("snapshots").join(id);
    if p.exists() {
        return p;
    }
    // `snapshots --json` may give a short id: find the file it starts.
    fs::read_dir(repo.join("snapshots"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(id))
        .unwrap()
}

/// What a folder holds, captured before anything reads it (reads move access times).
type Capture = BTreeMap<PathBuf, compare::Entry>;

/// Two backups of different data (a file in common); the first snapshot's file removed.
/// Returns the source of the second and its capture.
fn two_backups_forget_first(e: &Env) -> (PathBuf, Capture) {
    let src = e.path("src");
    fill(&src, 1);
    let s = src.to_str().unwrap();
    e.ok(&["backup", "-q", s]);
    let first = snapshot_ids(e);
    assert_eq!(first.len(), 1);
    // New data, but the text file stays.
    let notes = fs::read(src.join("sub/notes.txt")).unwrap();
    fs::remove_dir_all(&src).unwrap();
    fill(&src, 2);
    fs::write(src.join("sub/notes.txt"), notes).unwrap();
    e.ok(&["backup", "-q", s]);
    let expected = compare::snapshot(&src).unwrap();
    assert_eq!(snapshot_ids(e).len(), 2);
    fs::remove_file(snapshot_file(&e.repo, &first[0])).unwrap();
    (src, expected)
}

/// Restores the latest snapshot and compares it with the capture of `src`, metadata and
/// bytes.
fn restore_matches(e: &Env, src: &Path, expected: &Capture) {
    let target = e.path("target");
    let _ = fs::remove_dir_all(&target);
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let out = target.join(src.strip_prefix("/").unwrap());
    let diffs = compare::diff(expected, src, &compare::snapshot(&out).unwrap(), &out);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

fn check_clean(e: &Env) {
    let c = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(c["ok"], true, "{c}");
    assert_eq!(c["notes"].as_array().map_or(0, Vec::len), 0, "{c}");
}

#[test]
fn prune_removes_the_forgotten_data_and_the_rest_restores() {
    let e = Env::new();
    init(&e);
    let (src, expected) = two_backups_forget_first(&e);
    let before = size_of(&e.repo);
    let v = e.json(&["prune", "--json"]);
    assert_eq!(v["message_type"], "summary", "{v}");
    assert_eq!(v["dry_run"], false);
    assert_eq!(v["snapshots"], 1);
    assert!(v["unused_blobs"].as_u64().unwrap() > 10, "{v}");
    assert!(v["packs_deleted"].as_u64().unwrap() >= 1, "{v}");
    let freed = v["freed_bytes"].as_u64().unwrap();
    assert!(freed > 2_000_000, "{v}");
    let after = size_of(&e.repo);
    assert!(after + 2_000_000 < before, "{before} -> {after}");
    check_clean(&e);
    restore_matches(&e, &src, &expected);
    // Nothing is left to do.
    let again = e.json(&["prune", "--json"]);
    assert_eq!(again["packs_deleted"], 0, "{again}");
    assert_eq!(again["packs_written"], 0, "{again}");
    assert_eq!(again["unused_blobs"], 0, "{again}");
    // The plain output names the numbers.
    let text = e.ok(&["prune"]);
    assert!(text.contains("used:") && text.contains("freed"), "{text}");
}

#[test]
fn dry_run_changes_no_file() {
    let e = Env::new();
    init(&e);
    let (src, expected) = two_backups_forget_first(&e);
    let before = tree_bytes(&e.repo);
    let text = e.ok(&["prune", "--dry-run"]);
    assert!(text.contains("would delete"), "{text}");
    assert!(text.contains("would free about"), "{text}");
    let v = e.json(&["prune", "--dry-run", "--json"]);
    assert_eq!(v["dry_run"], true);
    assert!(!v["delete"].as_array().unwrap().is_empty(), "{v}");
    assert!(v["freed_bytes"].as_u64().unwrap() > 2_000_000, "{v}");
    let after = tree_bytes(&e.repo);
    // Locks come and go; nothing else may change.
    let strip = |m: BTreeMap<PathBuf, Vec<u8>>| -> BTreeMap<PathBuf, Vec<u8>> {
        m.into_iter()
            .filter(|(p, _)| !p.starts_with(e.repo.join("locks")))
            .collect()
    };
    assert!(
        strip(before) == strip(after),
        "dry run changed the repository"
    );
    // The real run frees what the dry run announced, about.
    let real = e.json(&["prune", "--json"]);
    let (planned, freed) = (
        v["freed_bytes"].as_u64().unwrap(),
        real["freed_bytes"].as_u64().unwrap(),
    );
    assert!(
        freed.abs_diff(planned) < planned / 20,
        "{planned} vs {freed}"
    );
    restore_matches(&e, &src, &expected);
}

#[test]
fn a_failed_prune_leaves_a_usable_repository_and_a_rerun_finishes() {
    for fault in [
        "write:pack:nth=1:denied",
        "write:index:nth=1:denied",
        "delete:index:nth=2:denied",
        "delete:pack:nth=2:denied",
    ] {
        let e = Env::new();
        init(&e);
        let (src, expected) = two_backups_forget_first(&e);
        let o = e
            .cmd(&["prune", "--max-unused", "0%"])
            .env("ARCA_TEST_FAULTS", fault)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{fault}: {}", stderr(&o));
        let c = e.json(&["check", "--read-data", "--json"]);
        assert_eq!(c["ok"], true, "{fault}: {c}");
        restore_matches(&e, &src, &expected);
        let v = e.json(&["prune", "--json", "--max-unused", "0%"]);
        assert_eq!(v["snapshots"], 1, "{v}");
        check_clean(&e);
        let again = e.json(&["prune", "--json", "--max-unused", "0%"]);
        assert_eq!(again["unused_blobs"], 0, "{fault}: {again}");
        assert_eq!(again["packs_deleted"], 0, "{fault}: {again}");
        restore_matches(&e, &src, &expected);
    }
}

/// The pack files of `repo`: name and size.
fn pack_files(repo: &Path) -> BTreeMap<String, u64> {
    tree_bytes(&repo.join("data"))
        .into_iter()
        .map(|(p, b)| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                b.len() as u64,
            )
        })
        .filter(|(n, _)| n.len() == 64)
        .collect()
}

/// A prune that failed at its index write (a full disk) left its new packs in no index:
/// the rerun adopts them (they stay, indexed) and copies nothing again, and `--dry-run`, its
/// `--json`, and the real run's `--json` say so. Before, the rerun deleted them and wrote
/// them again.
#[test]
fn a_rerun_adopts_the_packs_a_failed_prune_wrote() {
    let e = Env::new();
    init(&e);
    let (src, expected) = two_backups_forget_first(&e);
    let thorough = ["--max-unused", "0%"];
    let first = e.json(&[&["prune", "--dry-run", "--json"][..], &thorough].concat());
    let to_copy = first["repack_used_bytes"].as_u64().unwrap();
    assert!(to_copy > 0, "{first}");
    let before = pack_files(&e.repo);
    let o = e
        .cmd(&[&["prune"][..], &thorough].concat())
        .env("ARCA_TEST_FAULTS", "write:index:nth=1:nospace")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // Said with what to do: run to free space, it needs some first.
    let err = stderr(&o);
    assert!(
        err.contains("disk is full")
            && err.contains("no pack a snapshot needs was deleted")
            && err.contains("--max-repack-size"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let left: BTreeMap<String, u64> = pack_files(&e.repo)
        .into_iter()
        .filter(|(n, _)| !before.contains_key(n))
        .collect();
    assert!(!left.is_empty(), "the failed prune wrote packs");
    let (n, bytes) = (left.len() as u64, left.values().sum::<u64>());

    let text = e.ok(&[&["prune", "--dry-run"][..], &thorough].concat());
    assert!(
        text.contains(&format!(
            "adopted: {n} pack{} (",
            if n == 1 { "" } else { "s" }
        )) && text.contains("earlier prune"),
        "{text}"
    );
    for id in left.keys() {
        assert!(
            text.contains(&format!("would adopt data pack {id}")),
            "{text}"
        );
    }
    assert!(!text.contains("would delete unreferenced"), "{text}");
    let dry = e.json(&[&["prune", "--dry-run", "--json"][..], &thorough].concat());
    assert_eq!(dry["packs_adopted"], n, "{dry}");
    assert_eq!(dry["packs_adopted_bytes"], bytes, "{dry}");
    assert_eq!(dry["packs_unreferenced"], 0, "{dry}");
    assert_eq!(dry["repack_used_bytes"], 0, "nothing left to copy: {dry}");
    let ids: Vec<&str> = left.keys().map(String::as_str).collect();
    assert_eq!(dry["adopted"], serde_json::json!(ids), "{dry}");

    let v = e.json(&[&["prune", "--json"][..], &thorough].concat());
    assert_eq!(v["packs_adopted"], n, "{v}");
    assert_eq!(v["bytes_adopted"], bytes, "{v}");
    let written = v["bytes_written"].as_u64().unwrap();
    assert!(
        written < to_copy,
        "{written} bytes written again of {to_copy}: {v}"
    );
    let now = pack_files(&e.repo);
    assert!(
        left.keys().all(|id| now.contains_key(id)),
        "the adopted packs stay"
    );
    // No pack left unindexed (check notes one), and everything reads back.
    check_clean(&e);
    restore_matches(&e, &src, &expected);
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Temporary files in several folders of `repo`, two hours old, and a fresh one.
fn plant_temp_files(repo: &Path) -> (Vec<PathBuf>, PathBuf) {
    let old = now_secs() - 7200;
    let mut stale = vec![];
    for dir in ["", "index", "snapshots", "data/00", "data/7f"] {
        let p = repo.join(dir).join(".tmp-x");
        fs::write(&p, b"left by a crash").unwrap();
        arca_testkit::generate::set_times(&p, (old, 0), (old, 0)).unwrap();
        stale.push(p);
    }
    let fresh = repo.join("data/7f/.tmp-y");
    fs::write(&fresh, b"being written").unwrap();
    (stale, fresh)
}

#[test]
fn stale_temporary_files_are_removed_fresh_ones_kept() {
    let e = Env::new();
    init(&e);
    let src = e.path("src");
    fill(&src, 3);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let (stale, fresh) = plant_temp_files(&e.repo);
    // A dry run removes nothing, and counts what the run will remove.
    let out = e.ok(&["prune", "-n"]);
    assert!(
        out.contains(&format!(
            "would remove {} stale temporary files",
            stale.len()
        )),
        "{out}"
    );
    let v = e.json(&["prune", "--dry-run", "--json"]);
    assert_eq!(v["temp_files_stale"], stale.len(), "{v}");
    assert!(stale.iter().all(|p| p.exists()));
    let v = e.json(&["prune", "--json"]);
    assert_eq!(v["temp_files_removed"], stale.len(), "{v}");
    for p in &stale {
        assert!(!p.exists(), "{} is still there", p.display());
    }
    assert!(fresh.exists());
    check_clean(&e);
}

#[test]
fn bad_options_are_refused() {
    let e = Env::new();
    init(&e);
    for bad in [
        &["prune", "--max-unused", "150%"][..],
        &["prune", "--max-unused", "lots"],
        &["prune", "--max-repack-size", "big"],
    ] {
        // A usage error (2) naming the option.
        let o = e.run(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(stderr(&o).contains("invalid"), "{}", stderr(&o));
        assert!(stderr(&o).contains(bad[1]), "{}", stderr(&o));
    }
    // On an empty repository there is nothing to do.
    let v = e.json(&[
        "prune",
        "--json",
        "--max-unused",
        "unlimited",
        "--repack-small",
    ]);
    assert_eq!(v["packs_deleted"], 0, "{v}");
}

#[test]
fn prune_on_sftp() {
    let server = sshd::Sshd::start();
    let repo = server.dir.join("backups/prune");
    let mut e = Env::remote(format!("sftp:{}:{}", sshd::HOST, repo.display()), vec![]);
    e.vars.push((
        "ARCA_TEST_SSH_CONFIG",
        server.ssh_config.display().to_string(),
    ));
    let args = |a: &[&str]| -> Vec<String> {
        let mut v = vec![
            "-o".to_string(),
            format!("sftp.args=-F '{}'", server.ssh_config.display()),
        ];
        v.extend(a.iter().map(|s| s.to_string()));
        v
    };
    let ok = |a: &[&str]| -> String {
        let full = args(a);
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        e.ok(&full)
    };
    ok(&[
        "init",
        "--kdf-memory-kib",
        "256",
        "--kdf-iterations",
        "1",
        "--pack-size",
        "1MiB",
    ]);
    let src = e.path("src");
    fill(&src, 4);
    ok(&["backup", "-q", src.to_str().unwrap()]);
    let first: Vec<PathBuf> = fs::read_dir(repo.join("snapshots"))
        .unwrap()
        .flatten()
        .map(|d| d.path())
        .collect();
    fs::remove_dir_all(&src).unwrap();
    fill(&src, 5);
    ok(&["backup", "-q", src.to_str().unwrap()]);
    let expected = compare::snapshot(&src).unwrap();
    for p in &first {
        fs::remove_file(p).unwrap();
    }
    let (stale, fresh) = plant_temp_files(&repo);
    let before = size_of(&repo);
    let out = ok(&["prune", "--json"]);
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert!(v["packs_deleted"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(v["temp_files_removed"], stale.len(), "{v}");
    assert!(stale.iter().all(|p| !p.exists()) && fresh.exists());
    assert!(size_of(&repo) + 2_000_000 < before);
    let out = ok(&["check", "--read-data", "--json"]);
    let c: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(c["ok"], true, "{c}");
    let target = e.path("target");
    ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let restored = target.join(src.strip_prefix("/").unwrap());
    let diffs = compare::diff(
        &expected,
        &src,
        &compare::snapshot(&restored).unwrap(),
        &restored,
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn a_damaged_index_file_stops_prune_before_it_deletes_anything() {
    let e = Env::new();
    init(&e);
    let (src, expected) = two_backups_forget_first(&e);
    // Damage one index file: the packs it lists would look unreferenced.
    let index: Vec<PathBuf> = fs::read_dir(e.repo.join("index"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    arca_testkit::flip_byte(&index[0], 20).unwrap();
    let before = tree_bytes(&e.repo.join("data"));
    let o = e.run(&["prune"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("arca repair index"), "{}", stderr(&o));
    assert_eq!(
        tree_bytes(&e.repo.join("data")),
        before,
        "prune deleted packs"
    );
    // Repaired, prune goes ahead and the kept snapshot is whole.
    e.ok(&["repair", "index"]);
    e.ok(&["prune"]);
    check_clean(&e);
    restore_matches(&e, &src, &expected);
}

/// `prune --dry-run --no-lock` takes no lock, as restic's: it runs while another command
/// holds one (without `--no-lock` the dry run is refused, exit 11).
#[test]
fn a_dry_run_without_a_lock_runs_beside_a_lock_holder() {
    let e = Env::new();
    init(&e);
    two_backups_forget_first(&e);
    let mut check = e.lock_holder();
    let locked = e.cmd(&["prune", "--dry-run"]).output().unwrap();
    assert_eq!(locked.status.code(), Some(11), "{}", stderr(&locked));
    let v = e.json(&["--no-lock", "prune", "--dry-run", "--json"]);
    assert_eq!(v["dry_run"], true, "{v}");
    assert!(!v["delete"].as_array().unwrap().is_empty(), "{v}");
    check.kill().unwrap();
    check.wait().unwrap();
}

/// A copy of a pack in another folder of `data/` (a stray file, or an S3 listing that names
/// an object twice) was listed as a second pack of its id; only one entry was matched with
/// the index, and prune deleted the real pack as one no index names: exit 0, the snapshot
/// damaged, and `check` without `--read-data` clean, reading the stray copy (hunt 29).
#[test]
fn a_stray_copy_of_a_pack_does_not_make_prune_delete_it() {
    let e = Env::new();
    init(&e);
    let src = e.path("src");
    fill(&src, 7);
    e.ok(&["backup", src.to_str().unwrap()]);
    let expected = compare::snapshot(&src).unwrap();
    let mut stray = None;
    for shard in fs::read_dir(e.repo.join("data")).unwrap() {
        let shard = shard.unwrap().path();
        if let Some(p) = fs::read_dir(&shard).unwrap().next() {
            stray = Some(p.unwrap().path());
            break;
        }
    }
    let pack = stray.unwrap();
    let name = pack.file_name().unwrap().to_str().unwrap().to_string();
    let other = if name.starts_with("ff") { "00" } else { "ff" };
    fs::create_dir_all(e.repo.join("data").join(other)).unwrap();
    fs::copy(&pack, e.repo.join("data").join(other).join(&name)).unwrap();
    let v = e.json(&["prune", "--json"]);
    assert_eq!(v["packs_deleted"], 0, "{v}");
    assert!(pack.exists(), "the real pack was deleted");
    check_clean(&e);
    restore_matches(&e, &src, &expected);
}

/// A repository whose snapshots are all gone while packs hold data: prune refuses to delete
/// everything without `--unsafe-allow-remove-all`. A snapshots folder lost or emptied by a
/// copy tool looked just so: `check` passed and prune deleted every pack, without a word.
#[test]
fn prune_without_any_snapshot_deletes_nothing_unless_told() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), random_bytes(3, 200_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let aside = e.path("snapshots-aside");
    fs::rename(e.repo.join("snapshots"), &aside).unwrap();
    let packs_before = tree_bytes(&e.repo.join("data"));
    assert!(!packs_before.is_empty());
    for extra in [&[][..], &["--dry-run"]] {
        let mut args = vec!["prune"];
        args.extend_from_slice(extra);
        let o = e.run(&args);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("no snapshot") && stderr(&o).contains("--unsafe-allow-remove-all"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(tree_bytes(&e.repo.join("data")), packs_before);
    // Put back, the snapshot restores: nothing was lost.
    fs::rename(&aside, e.repo.join("snapshots")).unwrap();
    e.ok(&["check", "--read-data"]);
    fs::rename(e.repo.join("snapshots"), &aside).unwrap();
    // Told, it deletes it all.
    e.ok(&["prune", "--unsafe-allow-remove-all"]);
    assert!(tree_bytes(&e.repo.join("data")).is_empty());
}
