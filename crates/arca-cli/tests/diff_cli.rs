//! End-to-end tests of `arca diff` on two snapshots whose differences are known: a file
//! modified, one added (with a name that is not UTF-8), a folder removed, a file become a
//! folder, a symlink retargeted, a mode changed; text and JSON output, paths and
//! `ID:SUBFOLDER`, metadata, and errors naming the value at fault.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

use arca_testkit::text_bytes;
use common::{Env, stderr};
use serde_json::{Value, json};

const NEW: &[u8] = b"n\xe9w.txt";

struct Fx {
    e: Env,
    src: PathBuf,
    /// Snapshot ids, oldest first.
    s: [String; 2],
    short: [String; 2],
}

fn write(p: &Path, seed: u64, len: usize) {
    fs::write(p, text_bytes(seed, len)).unwrap();
    fs::set_permissions(p, fs::Permissions::from_mode(0o644)).unwrap();
}

fn fixture() -> Fx {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("gone")).unwrap();
    fs::create_dir_all(src.join("same")).unwrap();
    write(&src.join("a.txt"), 1, 3000);
    write(&src.join("b.txt"), 2, 2000);
    write(&src.join("gone/x.txt"), 3, 1000);
    write(&src.join("kind"), 4, 500);
    symlink("target1", src.join("link")).unwrap();
    write(&src.join("mode.sh"), 6, 300);
    write(&src.join("same/s.bin"), 7, 800);
    let s = src.to_str().unwrap();
    e.ok(&["backup", s]);
    write(&src.join("a.txt"), 11, 3100);
    fs::remove_dir_all(src.join("gone")).unwrap();
    fs::remove_file(src.join("kind")).unwrap();
    fs::create_dir(src.join("kind")).unwrap();
    write(&src.join("kind/inner.txt"), 5, 700);
    fs::remove_file(src.join("link")).unwrap();
    symlink("target2", src.join("link")).unwrap();
    fs::set_permissions(src.join("mode.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    write(&src.join(OsStr::from_bytes(NEW)), 8, 900);
    e.ok(&["backup", s]);
    let v: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let id = |i: usize, k: &str| v[i][k].as_str().unwrap().to_string();
    Fx {
        s: [id(0, "id"), id(1, "id")],
        short: [id(0, "short_id"), id(1, "short_id")],
        e,
        src,
    }
}

/// arca's human sizes.
fn human(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut u = 0;
    let units = ["B", "KiB", "MiB"];
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", units[u])
}

impl Fx {
    fn p(&self, rel: &str) -> String {
        format!("{}/{rel}", self.src.display())
    }
    fn stdout(&self, args: &[&str]) -> Vec<u8> {
        let o = self.e.run(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        o.stdout
    }
    fn fails(&self, args: &[&str]) -> String {
        let o = self.e.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        stderr(&o)
    }
    fn tree(&self, id: &str) -> Vec<Value> {
        let t: Value = serde_json::from_str(&self.e.ok(&["cat", "tree", id])).unwrap();
        t["nodes"].as_array().unwrap().clone()
    }
    /// The listings from snapshot `i`'s root down to `src`'s own, and `src`'s entries.
    fn chain(&self, i: usize) -> (Vec<String>, Vec<Value>) {
        let s: Value = serde_json::from_str(&self.e.ok(&["cat", "snapshot", &self.s[i]])).unwrap();
        let mut ids = vec![s["tree"].as_str().unwrap().to_string()];
        for c in self.src.components() {
            let Component::Normal(name) = c else { continue };
            let nodes = self.tree(ids.last().unwrap());
            let n = nodes
                .iter()
                .find(|n| n["name"] == name.to_str().unwrap())
                .unwrap();
            ids.push(n["subtree"].as_str().unwrap().to_string());
        }
        let entries = self.tree(ids.last().unwrap());
        (ids, entries)
    }
    /// Plain lengths of every blob, from the index files.
    fn raw_lengths(&self) -> HashMap<String, u64> {
        let mut m = HashMap::new();
        for f in fs::read_dir(self.e.repo.join("index")).unwrap() {
            let name = f.unwrap().file_name();
            let ix: Value =
                serde_json::from_str(&self.e.ok(&["cat", "index", name.to_str().unwrap()]))
                    .unwrap();
            for p in ix["packs"].as_array().unwrap() {
                for b in p["blobs"].as_array().unwrap() {
                    m.insert(
                        b["id"].as_str().unwrap().to_string(),
                        b["raw_length"].as_u64().unwrap(),
                    );
                }
            }
        }
        m
    }
}

fn subtree(entries: &[Value], name: &str) -> String {
    entries.iter().find(|n| n["name"] == name).unwrap()["subtree"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn text_and_json_between_two_snapshots() {
    let fx = fixture();
    // Tree blobs: every listing from the root to src changed on both sides, plus kind/ (new)
    // and gone/ (removed).
    let raw = fx.raw_lengths();
    let (chain_a, entries_a) = fx.chain(0);
    let (chain_b, entries_b) = fx.chain(1);
    assert!(chain_a.iter().zip(&chain_b).all(|(x, y)| x != y));
    let trees_removed: u64 =
        chain_a.iter().map(|t| raw[t]).sum::<u64>() + raw[&subtree(&entries_a, "gone")];
    let trees_added: u64 =
        chain_b.iter().map(|t| raw[t]).sum::<u64>() + raw[&subtree(&entries_b, "kind")];
    let n_trees = chain_a.len() + 1;
    // Data blobs: one per file (small files): a.txt (new), kind/inner.txt, nèw.txt added;
    // a.txt (old), gone/x.txt, kind (the file) removed.
    let added = 3100 + 700 + 900 + trees_added;
    let removed = 3000 + 1000 + 500 + trees_removed;

    let mut want =
        format!("comparing snapshot {} to {}:\n\n", fx.short[0], fx.short[1]).into_bytes();
    for (m, p) in [
        ("M    ", fx.p("a.txt").into_bytes()),
        ("-    ", fx.p("gone/").into_bytes()),
        ("-    ", fx.p("gone/x.txt").into_bytes()),
        ("T    ", fx.p("kind/").into_bytes()),
        ("+    ", fx.p("kind/inner.txt").into_bytes()),
        ("M    ", fx.p("link").into_bytes()),
        ("+    ", [fx.p("").as_bytes(), NEW].concat()),
    ] {
        want.extend_from_slice(m.as_bytes());
        want.extend_from_slice(&p);
        want.push(b'\n');
    }
    let summary = format!(
        "Files:           2 new,     1 removed,     1 changed\n\
         Dirs:            0 new,     1 removed\n\
         Others:          0 new,     0 removed\n\
         Data Blobs:      3 new,     3 removed\n\
         Tree Blobs:  {n_trees:>5} new, {n_trees:>5} removed\n  \
         Added:   {}\n  \
         Removed: {}\n",
        human(added),
        human(removed)
    );
    want.extend_from_slice(b"\n");
    want.extend_from_slice(summary.as_bytes());
    let out = fx.stdout(&["diff", &fx.short[0], &fx.s[1]]);
    assert_eq!(
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&want)
    );
    assert_eq!(out, want);
    // --quiet: the summary only.
    let out = fx.stdout(&["diff", "-q", &fx.s[0], "latest"]);
    assert_eq!(String::from_utf8_lossy(&out), summary);

    // JSON lines.
    let out = String::from_utf8(fx.stdout(&["diff", "--json", &fx.short[0], "latest"])).unwrap();
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let change = |p: String, m: &str| json!({"message_type": "change", "path": p, "modifier": m});
    assert_eq!(
        lines[..7],
        [
            change(fx.p("a.txt"), "M"),
            change(fx.p("gone/"), "-"),
            change(fx.p("gone/x.txt"), "-"),
            change(fx.p("kind/"), "T"),
            change(fx.p("kind/inner.txt"), "+"),
            change(fx.p("link"), "M"),
            change(fx.p("n\u{fffd}w.txt"), "+"),
        ]
    );
    assert_eq!(
        lines[7],
        json!({
            "message_type": "statistics",
            "source_snapshot": fx.short[0],
            "target_snapshot": "latest",
            "changed_files": 1,
            "added": {"files": 2, "dirs": 0, "others": 0, "data_blobs": 3,
                      "tree_blobs": n_trees, "bytes": added},
            "removed": {"files": 1, "dirs": 1, "others": 0, "data_blobs": 3,
                        "tree_blobs": n_trees, "bytes": removed},
        })
    );
    assert_eq!(lines.len(), 8);

    // The reverse diff swaps everything.
    let out = String::from_utf8(fx.stdout(&["diff", "--json", "latest", &fx.short[0]])).unwrap();
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["added"], lines[7]["removed"]);
    assert_eq!(last["removed"], lines[7]["added"]);
    assert!(
        out.contains(&change(fx.p("kind"), "T").to_string()),
        "{out}"
    );
    assert!(
        out.contains(&change(fx.p("kind/inner.txt"), "-").to_string()),
        "{out}"
    );

    // A snapshot with itself: nothing.
    let out = fx.stdout(&["diff", "latest", "latest"]);
    assert_eq!(
        String::from_utf8_lossy(&out),
        format!(
            "comparing snapshot {0} to {0}:\n\n\nFiles:           0 new,     0 removed,     0 changed\n\
             Dirs:            0 new,     0 removed\nOthers:          0 new,     0 removed\n\
             Data Blobs:      0 new,     0 removed\nTree Blobs:      0 new,     0 removed\n  \
             Added:   0 B\n  Removed: 0 B\n",
            fx.short[1]
        )
    );
}

#[test]
fn paths_subfolders_and_metadata() {
    let fx = fixture();
    let raw = fx.raw_lengths();
    let (_, entries_b) = fx.chain(1);
    // PATH restricts both sides and keeps full paths.
    let kind = fx.p("kind");
    let out = fx.stdout(&["diff", "-q", "--json", &fx.s[0], &fx.s[1], &kind]);
    assert_eq!(
        String::from_utf8_lossy(&out),
        format!(
            "{}\n",
            json!({
                "message_type": "statistics", "source_snapshot": fx.s[0],
                "target_snapshot": fx.s[1], "changed_files": 0,
                "added": {"files": 1, "dirs": 0, "others": 0, "data_blobs": 1, "tree_blobs": 1,
                          "bytes": 700 + raw[&subtree(&entries_b, "kind")]},
                "removed": {"files": 0, "dirs": 0, "others": 0, "data_blobs": 1,
                            "tree_blobs": 0, "bytes": 500},
            })
        )
    );
    let out = fx.stdout(&["diff", &fx.s[0], &fx.s[1], &format!("{kind}/")]);
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(&format!("\nT    {kind}/\n+    {kind}/inner.txt\n\nFiles:")),
        "{text}"
    );
    // ID:SUBFOLDER compares from there, with paths relative to it (as restic).
    let a = format!("{}:{}", fx.short[0], fx.src.display());
    let b = format!("latest:{}", fx.src.display());
    let text = String::from_utf8_lossy(&fx.stdout(&["diff", &a, &b])).into_owned();
    let body: Vec<&str> = text.lines().skip(2).take(7).collect();
    assert_eq!(
        body,
        [
            "M    /a.txt",
            "-    /gone/",
            "-    /gone/x.txt",
            "T    /kind/",
            "+    /kind/inner.txt",
            "M    /link",
            "+    /n\u{fffd}w.txt"
        ]
    );
    assert!(
        text.contains("\nTree Blobs:      2 new,     2 removed\n"),
        "{text}"
    );
    // Metadata: only with --metadata, and only where it changed.
    let mode = fx.p("mode.sh");
    let out = fx.stdout(&["diff", "-q", &fx.s[0], &fx.s[1], &mode]);
    assert!(out.starts_with(b"Files:"));
    let out = fx.stdout(&["diff", "--metadata", &fx.s[0], &fx.s[1], &mode]);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text.lines().nth(2),
        Some(format!("U    {mode}").as_str()),
        "{text}"
    );
    assert_eq!(text.lines().nth(3), Some(""), "{text}");
    let out = fx.stdout(&["diff", "--metadata", &fx.s[0], &fx.s[1], &fx.p("b.txt")]);
    assert!(String::from_utf8(out).unwrap().contains(":\n\n\nFiles:"));
}

#[test]
fn errors_name_the_value() {
    let fx = fixture();
    let e = fx.fails(&["diff", &fx.s[0], "deadbeef"]);
    assert!(e.contains("\"deadbeef\""), "{e}");
    let e = fx.fails(&["diff", &fx.s[0], &fx.s[1], "/no/such/path"]);
    assert!(e.contains("/no/such/path is in neither snapshot"), "{e}");
    let e = fx.fails(&["diff", &format!("{}:/nope", fx.s[0]), &fx.s[1]]);
    assert!(e.contains("/nope is not in snapshot"), "{e}");
    let kind = format!("{}:{}", fx.s[0], fx.p("kind"));
    let e = fx.fails(&["diff", &kind, &fx.s[1]]);
    assert!(e.contains("kind is not a folder"), "{e}");
    let e = fx.fails(&["diff", &fx.s[0], &fx.s[1], "a/../b"]);
    assert!(e.contains("\"a/../b\""), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

/// `ID:SUBFOLDER` whose folder name is not UTF-8 (clap refused the argument).
#[test]
fn a_subfolder_whose_name_is_not_utf8_is_compared() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    let odd = src.join(OsStr::from_bytes(b"dir\xfe"));
    fs::create_dir_all(&odd).unwrap();
    write(&odd.join("f.txt"), 1, 100);
    let first = e.json(&["backup", "--json", src.to_str().unwrap()])["snapshot_id"]
        .as_str()
        .unwrap()
        .to_string();
    write(&odd.join("f.txt"), 2, 200);
    e.ok(&["backup", src.to_str().unwrap()]);
    let spec = |s: &str| {
        let mut v = format!("{s}:").into_bytes();
        v.extend_from_slice(odd.as_os_str().as_bytes());
        std::ffi::OsString::from(OsStr::from_bytes(&v))
    };
    let o = e
        .cmd(&["diff", "--json"])
        .arg(spec(&first))
        .arg(spec("latest"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("f.txt"), "{out}");
}

/// A listing that cannot be read is named with the snapshot it is in, whichever of the two
/// (the message said "cannot read the listing of P (tree T)", for either).
#[test]
fn a_listing_that_cannot_be_read_is_named_with_its_snapshot() {
    let fx = fixture();
    let mut named = [false; 2];
    for n in 0..8 {
        let o =
            fx.e.cmd(&["diff", &fx.s[0], &fx.s[1]])
                .env("ARCA_TEST_FAULTS", format!("read:pack:from={n}:denied"))
                .output()
                .unwrap();
        if o.status.success() {
            break;
        }
        let err = stderr(&o);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        let which: Vec<usize> = (0..2)
            .filter(|&i| err.contains(&format!(" in snapshot {} (tree ", fx.short[i])))
            .collect();
        assert_eq!(which.len(), 1, "{err}");
        assert!(err.contains("cannot read the listing of /"), "{err}");
        named[which[0]] = true;
    }
    assert_eq!(
        named,
        [true, true],
        "both snapshots' listings failed in turn"
    );
}
