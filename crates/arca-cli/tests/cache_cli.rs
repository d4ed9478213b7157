//! The local cache of remote repositories through the binary: a repository behind a
//! simulated link (`--backend-latency`) counts as remote, so it is cached.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::Path;

use common::{Env, stderr};
use serde_json::Value;

/// Makes the local repository count as remote (and so be cached).
const REMOTE: [&str; 2] = ["--backend-latency", "1ms"];

/// A tree of many directories (four levels, 4 + 16 + 64 + 256 of them), a small file in each.
fn many_dirs(root: &Path) {
    fn level(dir: &Path, depth: u32) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("f.txt"), format!("{}", dir.display())).unwrap();
        if depth == 0 {
            return;
        }
        for i in 0..4 {
            level(&dir.join(format!("d{i}")), depth - 1);
        }
    }
    level(root, 4);
}

fn args<'a>(cache: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    let mut a = REMOTE.to_vec();
    a.extend_from_slice(cache);
    a.extend_from_slice(rest);
    a
}

/// Backs up `src` with the cache options `cache`; returns the JSON summary.
fn backup(e: &Env, cache: &[&str], src: &Path) -> Value {
    e.json(&args(cache, &["backup", src.to_str().unwrap(), "--json"]))
}

fn requests(v: &Value) -> u64 {
    v["backend"]["requests"].as_u64().unwrap()
}

fn snapshot_ids(e: &Env, cache: &[&str]) -> Vec<String> {
    let out = e.ok(&args(cache, &["snapshots", "--json"]));
    let v: Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// Whether `snapshots` succeeds when every backend request after the first `n` fails (a
/// permanent failure, not retried): it makes at most `n` requests.
/// Whether `snapshots` (without its shared lock, which costs four requests: a listing,
/// its write, a second listing, its removal) needs at most `n` requests.
fn snapshots_within(e: &Env, cache: &[&str], n: u32) -> bool {
    e.cmd(&args(cache, &["--no-lock", "snapshots", "--json"]))
        .env("ARCA_TEST_FAULTS", format!("any:any:from={}:denied", n + 1))
        .output()
        .unwrap()
        .status
        .success()
}

fn files_below(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |r| {
        r.map(|e| e.unwrap().path())
            .map(|p| if p.is_dir() { files_below(&p) } else { 1 })
            .sum()
    })
}

#[test]
fn a_no_change_backup_and_snapshots_read_almost_nothing_remote() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    many_dirs(&src);
    let cache_dir = e.path("my-cache");
    let cache = cache_dir.to_str().unwrap();
    let cached = ["--cache-dir", cache];

    let first = backup(&e, &cached, &src);
    // The tree's directories and the folders above it.
    let dirs = first["dirs_new"].as_u64().unwrap();
    assert!(dirs > 341, "{dirs}");
    // The cache holds the repository's files under its id, tagged as a cache.
    let tag = fs::read_to_string(cache_dir.join("CACHEDIR.TAG")).unwrap();
    assert!(tag.starts_with("Signature: 8a477f597d28d172789f06886806bc55"));
    let repo_dirs: Vec<_> = fs::read_dir(&cache_dir)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(repo_dirs.len(), 1);
    let repo_cache = &repo_dirs[0];
    for (sub, n) in [("keys", 1), ("snapshots", 1), ("index", 1)] {
        assert_eq!(files_below(&repo_cache.join(sub)), n, "{sub}");
    }
    assert!(files_below(&repo_cache.join("data")) >= 1, "the tree pack");

    // The same no-change backup, with and without the cache.
    let with = backup(&e, &cached, &src);
    let without = backup(&e, &["--no-cache"], &src);
    for v in [&with, &without] {
        // Every folder of the tree; those above it (the temporary folder) may change.
        assert!(v["dirs_unmodified"].as_u64().unwrap() >= 341, "{v}");
        assert_eq!(v["files_new"].as_u64().unwrap(), 0);
    }
    let (with, without) = (requests(&with), requests(&without));
    eprintln!("no-change backup: {with} requests with the cache, {without} without");
    // The config read; the key, index, pack and snapshot listings; the snapshot write; the
    // shared lock (a listing, its write, a second listing, its removal); and, if a folder
    // above the tree changed, a tree pack and an index file. A backup slow to get there (a
    // loaded machine: CI counted 13) looks for its lock once more before each of the index
    // file and the snapshot when it last saw it over 2 s before (`check_held_before_write`).
    assert!(with <= 14, "{with} requests with the cache");
    assert!(without >= with + 8, "{without} without vs {with} with");

    // Listing snapshots: config, key listing, snapshot listing; all else is local (once the
    // snapshot the uncached run made has been read).
    snapshot_ids(&e, &cached);
    assert!(snapshots_within(&e, &cached, 3));
    assert!(!snapshots_within(&e, &cached, 2));
    assert!(!snapshots_within(&e, &["--no-cache"], 5));
    // With its lock, four more (a request refused leaves its lock behind: one try).
    let o = e
        .cmd(&args(&cached, &["snapshots", "--json"]))
        .env("ARCA_TEST_FAULTS", "any:any:from=8:denied")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // ARCA_CACHE_DIR names the folder too.
    let o = e
        .cmd(&args(&[], &["--no-lock", "snapshots", "--json"]))
        .env("ARCA_CACHE_DIR", cache)
        .env("ARCA_TEST_FAULTS", "any:any:from=4:denied")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // A local folder needs no cache: nothing goes to the default folder.
    let o = e
        .cmd(&["snapshots"])
        .env("XDG_CACHE_HOME", e.path("xdg"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!e.path("xdg").exists());
}

#[test]
fn changes_by_other_clients_are_seen() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    many_dirs(&src);
    let a = e.path("cache-a");
    let b = e.path("cache-b");
    let ca = ["--cache-dir", a.to_str().unwrap()];
    let cb = ["--cache-dir", b.to_str().unwrap()];
    backup(&e, &ca, &src);
    assert_eq!(snapshot_ids(&e, &ca).len(), 1);
    // Another client (its own cache) adds a snapshot with new trees.
    fs::write(src.join("d1/d2/new.txt"), b"new").unwrap();
    let second = backup(&e, &cb, &src);
    assert_eq!(second["files_new"].as_u64().unwrap(), 1);
    let ids = snapshot_ids(&e, &ca);
    assert_eq!(ids.len(), 2);
    assert_eq!(snapshot_ids(&e, &["--no-cache"]), ids);
    // The first client's next backup uses the new snapshot (and its index) as parent.
    fs::write(src.join("d3/more.txt"), b"more").unwrap();
    let third = backup(&e, &ca, &src);
    assert_eq!(third["parent"].as_str().unwrap(), ids[1]);
    assert_eq!(third["files_new"].as_u64().unwrap(), 1);
    assert_eq!(third["files_unmodified"].as_u64().unwrap(), 342);
    // Listings read through either cache are the repository's.
    let ls = |cache: &[&str]| e.ok(&args(cache, &["ls", "latest"]));
    assert_eq!(ls(&ca), ls(&["--no-cache"]));
    assert_eq!(ls(&cb), ls(&["--no-cache"]));
    // A snapshot deleted in the repository disappears, with its cached copy.
    let gone = &ids[0];
    fs::remove_file(e.repo.join("snapshots").join(gone)).unwrap();
    let left = snapshot_ids(&e, &ca);
    assert_eq!(left.len(), 2);
    assert!(!left.contains(gone));
    let copies: Vec<_> = fs::read_dir(&a)
        .unwrap()
        .map(|d| d.unwrap().path().join("snapshots").join(gone))
        .collect();
    assert!(copies.iter().all(|p| !p.exists()));
    // The default folder is $XDG_CACHE_HOME/arca, else ~/.cache/arca.
    let default_root = |var: &str, value: &Path| {
        let o = e
            .cmd(&args(&[], &["snapshots"]))
            .env_remove("XDG_CACHE_HOME")
            .env(var, value)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    };
    default_root("XDG_CACHE_HOME", &e.path("xdg"));
    assert!(e.path("xdg/arca/CACHEDIR.TAG").is_file());
    default_root("HOME", &e.path("home"));
    assert!(e.path("home/.cache/arca/CACHEDIR.TAG").is_file());
}

#[test]
fn a_damaged_or_unusable_cache_never_fails_a_command() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    many_dirs(&src);
    let dir = e.path("c");
    let cached = ["--cache-dir", dir.to_str().unwrap()];
    backup(&e, &cached, &src);
    let want = e.ok(&["ls", "latest"]);
    // Damage every cached file: each is detected, dropped and fetched again.
    let mut damaged = 0;
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for p in fs::read_dir(&d).unwrap().map(|x| x.unwrap().path()) {
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().unwrap() != "CACHEDIR.TAG" {
                let mut b = fs::read(&p).unwrap();
                let mid = b.len() / 2;
                b[mid] ^= 1;
                fs::write(&p, b).unwrap();
                damaged += 1;
            }
        }
    }
    assert!(damaged >= 4, "{damaged}");
    assert_eq!(e.ok(&args(&cached, &["ls", "latest"])), want);
    let v = backup(&e, &cached, &src);
    assert!(v["dirs_unmodified"].as_u64().unwrap() >= 341, "{v}");
    // Repaired: the next run reads almost nothing again (a lock file). Counted in bytes
    // read, not in requests: a folder above the source (/tmp, where parallel tests make
    // their folders) may have changed meanwhile, and the new snapshot it then writes is
    // requests too (13 against a bound of 12, under load).
    let v = backup(&e, &cached, &src);
    assert!(v["backend"]["bytes_read"].as_u64().unwrap() <= 1024, "{v}");

    // A cache folder that cannot be created (below a file): one warning, same results.
    let file = e.path("a-file");
    fs::write(&file, b"x").unwrap();
    let bad = file.join("cache");
    let bad_args = ["--cache-dir", bad.to_str().unwrap()];
    let o = e.cmd(&args(&bad_args, &["ls", "latest"])).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), want);
    assert_eq!(stderr(&o).matches("warning").count(), 1, "{}", stderr(&o));
    let o = e
        .cmd(&args(
            &bad_args,
            &["backup", src.to_str().unwrap(), "--json"],
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Check never reads through the cache.
    let v = e.json(&args(&cached, &["check", "--json"]));
    assert_eq!(v["ok"], Value::Bool(true), "{v}");
}

/// `cache` lists each repository's cache folder with its last use and size; a folder unused
/// for longer than --max-age days is old, and `--cleanup` removes it and only it.
#[test]
fn cache_lists_the_caches_and_cleanup_removes_the_old_ones() {
    let e = Env::new();
    e.init(&[]);
    let root = e.path("cache");
    let dir = root.to_str().unwrap();
    let cache = ["--cache-dir", dir];
    let src = e.path("src");
    many_dirs(&src);
    backup(&e, &cache, &src);
    // A second repository's cache, unused for 40 days, and a folder that is not arca's.
    let old = root.join("ab".repeat(32));
    fs::create_dir_all(old.join("keys")).unwrap();
    fs::write(old.join("keys/x"), b"12345").unwrap();
    let forty_days = std::time::SystemTime::now() - std::time::Duration::from_secs(40 * 86400);
    fs::File::open(&old)
        .unwrap()
        .set_modified(forty_days)
        .unwrap();
    fs::create_dir_all(root.join("not-a-cache")).unwrap();
    // Opening the repository marks its cache used (it looked 40 days old too).
    let live_dir = fs::read_dir(&root)
        .unwrap()
        .map(|d| d.unwrap().path())
        .find(|p| p.is_dir() && p != &old && p.file_name().unwrap().len() == 64)
        .unwrap();
    fs::File::open(&live_dir)
        .unwrap()
        .set_modified(forty_days)
        .unwrap();
    snapshot_ids(&e, &cache);

    let list = e.json(&["cache", "--cache-dir", dir, "--json"]);
    let caches = list["caches"].as_array().unwrap();
    assert_eq!(caches.len(), 2, "{list}");
    let (stale, live) = (&caches[0], &caches[1]);
    assert_eq!(stale["repo_id"], "ab".repeat(32));
    assert_eq!(stale["old"], true);
    assert_eq!(stale["size"], 5);
    assert_eq!(live["old"], false);
    assert!(live["size"].as_u64().unwrap() > 0, "{live}");
    let text = e.ok(&["cache", "--cache-dir", dir]);
    assert!(text.contains("abababab") && text.contains("yes"), "{text}");
    assert!(text.contains("--cleanup"), "{text}");
    // A larger --max-age keeps it young.
    let j = e.json(&["cache", "--cache-dir", dir, "--max-age", "60", "--json"]);
    assert_eq!(j["caches"][0]["old"], false);

    let out = e.ok(&["cache", "--cache-dir", dir, "--cleanup"]);
    assert!(out.contains("removed 1 old cache"), "{out}");
    // The table lists what is left (the removed one was listed above that line).
    assert!(!out.contains("abababab"), "{out}");
    assert!(out.contains("1 cache in"), "{out}");
    assert!(!old.exists());
    assert!(
        root.join("not-a-cache").is_dir(),
        "a folder not arca's is left alone"
    );
    assert_eq!(
        e.json(&["cache", "--cache-dir", dir, "--json"])["caches"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // The repository still works through its kept cache.
    assert_eq!(snapshot_ids(&e, &cache).len(), 1);
    let none = e.run(&["cache", "--cache-dir", e.path("nowhere").to_str().unwrap()]);
    assert!(none.status.success(), "{}", stderr(&none));
    // With the cache turned off, that is the reason given (it said no folder was known).
    let off = e.run(&["cache", "--cache-dir", dir, "--no-cache"]);
    assert_eq!(off.status.code(), Some(1));
    assert!(
        stderr(&off).contains("the cache is off (--no-cache)"),
        "{}",
        stderr(&off)
    );
}
