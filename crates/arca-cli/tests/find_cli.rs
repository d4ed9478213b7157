//! End-to-end tests of `arca find` on two snapshots whose answer is known: patterns (text,
//! long listing, JSON), time windows, snapshot selection, object searches (`--blob`, `--tree`,
//! `--pack`) and errors naming the value at fault.

#![allow(clippy::unwrap_used)]

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

use arca_testkit::generate::set_times;
use arca_testkit::{random_bytes, text_bytes};
use common::{Env, SMALL_CHUNKS, stderr};
use serde_json::Value;

/// A name that is not UTF-8.
const CAFE: &[u8] = b"caf\xe9.txt";

struct Snap {
    id: String,
    short: String,
    /// Local time as listings show it (the tests run with TZ=UTC).
    time: String,
}

struct Fx {
    e: Env,
    src: PathBuf,
    /// Oldest first.
    s: Vec<Snap>,
}

fn secs(t: &str) -> i64 {
    chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S")
        .unwrap()
        .and_utc()
        .timestamp()
}

fn write(p: &Path, data: &[u8], mtime: &str) {
    fs::write(p, data).unwrap();
    fs::set_permissions(p, fs::Permissions::from_mode(0o644)).unwrap();
    set_times(p, (secs(mtime), 0), (secs(mtime), 0)).unwrap();
}

fn snapshots(e: &Env) -> Vec<Snap> {
    let v: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let t = chrono::DateTime::parse_from_rfc3339(s["time"].as_str().unwrap()).unwrap();
            Snap {
                id: s["id"].as_str().unwrap().to_string(),
                short: s["short_id"].as_str().unwrap().to_string(),
                time: t.to_utc().format("%Y-%m-%d %H:%M:%S").to_string(),
            }
        })
        .collect()
}

/// Snapshot 1 (host h1): docs/{a.txt, b.md, deep/c.txt}, café.txt, link.txt -> docs/a.txt,
/// top.bin. Snapshot 2 (host h2): b.md removed, docs/new.txt and top-copy.bin (= top.bin)
/// added.
fn fixture() -> Fx {
    let mut e = Env::new();
    e.vars.push(("TZ", "UTC".into()));
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    fs::create_dir_all(src.join("docs/deep")).unwrap();
    write(
        &src.join("docs/a.txt"),
        &text_bytes(1, 5000),
        "2020-01-01 00:00:00",
    );
    write(
        &src.join("docs/b.md"),
        &text_bytes(2, 3000),
        "2021-03-03 00:00:00",
    );
    write(
        &src.join("docs/deep/c.txt"),
        &text_bytes(3, 4000),
        "2022-06-15 12:00:00",
    );
    write(
        &src.join(OsStr::from_bytes(CAFE)),
        &text_bytes(4, 100),
        "2019-05-05 00:00:00",
    );
    // Over twice the largest chunk (256 KiB): three blobs at least (200 KB could stay one
    // chunk, the boundaries being random per repository, and objects_blob_tree_and_pack
    // needs two).
    write(
        &src.join("top.bin"),
        &random_bytes(5, 600_000),
        "2018-01-01 00:00:00",
    );
    symlink("docs/a.txt", src.join("link.txt")).unwrap();
    let t = secs("2021-01-01 00:00:00");
    set_times(&src.join("link.txt"), (t, 0), (t, 0)).unwrap();
    let s = src.to_str().unwrap();
    e.ok(&["backup", "--host", "h1", "--tag", "t1", s]);
    fs::remove_file(src.join("docs/b.md")).unwrap();
    write(
        &src.join("docs/new.txt"),
        &text_bytes(6, 2000),
        "2023-01-01 00:00:00",
    );
    write(
        &src.join("top-copy.bin"),
        &random_bytes(5, 600_000),
        "2018-01-01 00:00:00",
    );
    e.ok(&["backup", "--host", "h2", s]);
    let snaps = snapshots(&e);
    assert_eq!(snaps.len(), 2);
    Fx { e, src, s: snaps }
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
    /// Runs a command that must fail with exit 1 and returns its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let o = self.e.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty());
        stderr(&o)
    }
    fn header(&self, i: usize) -> String {
        format!(
            "Found matching entries in snapshot {} from {}\n",
            self.s[i].short, self.s[i].time
        )
    }
    /// The node at absolute `path` in snapshot `snap`.
    fn node(&self, snap: &str, path: &Path) -> Value {
        node_at(&self.e, snap, path)
    }
}

/// `lines` joined, each ending with a newline, as bytes.
fn text(lines: &[&[u8]]) -> Vec<u8> {
    let mut v = vec![];
    for l in lines {
        v.extend_from_slice(l);
        v.push(b'\n');
    }
    v
}

#[test]
fn patterns_across_snapshots_newest_first() {
    let fx = fixture();
    let cafe = [fx.p("").as_bytes(), CAFE].concat();
    let (a, c, new, link) = (
        fx.p("docs/a.txt"),
        fx.p("docs/deep/c.txt"),
        fx.p("docs/new.txt"),
        fx.p("link.txt"),
    );
    let mut want = fx.header(1).into_bytes();
    want.extend(text(&[
        &cafe,
        a.as_bytes(),
        c.as_bytes(),
        new.as_bytes(),
        link.as_bytes(),
    ]));
    want.push(b'\n');
    want.extend(fx.header(0).into_bytes());
    want.extend(text(&[&cafe, a.as_bytes(), c.as_bytes(), link.as_bytes()]));
    assert_eq!(
        String::from_utf8_lossy(&fx.stdout(&["find", "*.txt"])),
        String::from_utf8_lossy(&want)
    );
    assert_eq!(fx.stdout(&["find", "*.txt"]), want);
    // Oldest first, and --quiet leaves the headers out.
    let r = fx.stdout(&["find", "-R", "-q", "*.txt"]);
    let mut want_r = text(&[&cafe, a.as_bytes(), c.as_bytes(), link.as_bytes()]);
    want_r.extend(text(&[
        &cafe,
        a.as_bytes(),
        c.as_bytes(),
        new.as_bytes(),
        link.as_bytes(),
    ]));
    assert_eq!(r, want_r);
    // Several patterns; a path pattern; an anchored one; a folder matches as an entry.
    let both = fx.stdout(&["find", "-s", "latest", "new.txt", "top*"]);
    let want_both = format!(
        "{}{}\n{}\n{}\n",
        fx.header(1),
        fx.p("docs/new.txt"),
        fx.p("top-copy.bin"),
        fx.p("top.bin")
    );
    assert_eq!(String::from_utf8_lossy(&both), want_both);
    let md = fx.stdout(&["find", "docs/*.md"]);
    assert_eq!(
        String::from_utf8_lossy(&md),
        format!("{}{}\n", fx.header(0), fx.p("docs/b.md"))
    );
    let anchored = fx.p("docs/*");
    let out = fx.stdout(&["find", "-s", &fx.s[0].short, &anchored]);
    assert_eq!(
        String::from_utf8_lossy(&out),
        format!(
            "{}{}\n{}\n{}\n",
            fx.header(0),
            fx.p("docs/a.txt"),
            fx.p("docs/b.md"),
            fx.p("docs/deep")
        )
    );
    // Case, snapshot filters, and no hit at all (exit 0, nothing printed).
    let upper = fx.stdout(&["find", "-i", "--host", "h2", "*.TXT"]);
    assert_eq!(upper.split(|b| *b == b'\n').count(), 7);
    assert!(fx.stdout(&["find", "*.TXT"]).is_empty());
    assert_eq!(
        String::from_utf8_lossy(&fx.stdout(&["find", "--tag", "t1", "b.md"])),
        format!("{}{}\n", fx.header(0), fx.p("docs/b.md"))
    );
    assert!(fx.stdout(&["find", "--host", "h2", "b.md"]).is_empty());
    assert!(fx.stdout(&["find", "nothing-is-called-this"]).is_empty());
    assert_eq!(fx.stdout(&["find", "--json", "nothing"]), b"[]\n");
}

#[test]
fn time_window_long_listing_and_json() {
    let fx = fixture();
    // Bounds are inclusive: a.txt is at --oldest, c.txt at --newest.
    let out = fx.stdout(&[
        "find",
        "-s",
        "latest",
        "--oldest",
        "2020-01-01",
        "--newest",
        "2022-06-15 12:00",
        "*.txt",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out),
        format!(
            "{}{}\n{}\n{}\n",
            fx.header(1),
            fx.p("docs/a.txt"),
            fx.p("docs/deep/c.txt"),
            fx.p("link.txt")
        )
    );
    let out = fx.stdout(&["find", "-s", "latest", "-N", "2019-12-31T23:59:59Z", "*"]);
    let mut want = fx.header(1).into_bytes();
    want.extend(text(&[
        &[fx.p("").as_bytes(), CAFE].concat(),
        fx.p("top-copy.bin").as_bytes(),
        fx.p("top.bin").as_bytes(),
    ]));
    assert_eq!(out, want);
    // ls -l lines.
    let out = fx.stdout(&["find", "-l", "-s", "latest", "a.txt", "link.txt"]);
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[1].starts_with("-rw-r--r-- "), "{}", lines[1]);
    assert!(
        lines[1].ends_with(&format!(" 5000 2020-01-01 00:00:00 {}", fx.p("docs/a.txt"))),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("lrwxrwxrwx "), "{}", lines[2]);
    assert!(
        lines[2].ends_with(&format!(
            " 2021-01-01 00:00:00 {} -> docs/a.txt",
            fx.p("link.txt")
        )),
        "{}",
        lines[2]
    );
    // JSON: one element per snapshot with hits, newest first.
    let out = fx.stdout(&["find", "--json", "*.txt", "b.md"]);
    let v: Value = serde_json::from_slice(&out).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    let paths = |i: usize| -> Vec<String> {
        arr[i]["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap().to_string())
            .collect()
    };
    let cafe_lossy = fx.p("caf\u{fffd}.txt");
    assert_eq!(arr[0]["snapshot"], fx.s[1].id.as_str());
    assert_eq!(arr[0]["hits"], 5);
    assert_eq!(
        paths(0),
        [
            cafe_lossy.clone(),
            fx.p("docs/a.txt"),
            fx.p("docs/deep/c.txt"),
            fx.p("docs/new.txt"),
            fx.p("link.txt")
        ]
    );
    assert_eq!(arr[1]["snapshot"], fx.s[0].id.as_str());
    assert_eq!(arr[1]["hits"], 5);
    assert_eq!(
        paths(1),
        [
            cafe_lossy,
            fx.p("docs/a.txt"),
            fx.p("docs/b.md"),
            fx.p("docs/deep/c.txt"),
            fx.p("link.txt")
        ]
    );
    let a = &arr[1]["matches"][1];
    assert_eq!(a["name"], "a.txt");
    assert_eq!(a["type"], "file");
    assert_eq!(a["size"], 5000);
    assert_eq!(a["permissions"], "-rw-r--r--");
    assert_eq!(a["mtime"], "2020-01-01T00:00:00.000000000+00:00");
    assert!(a.get("content").is_none());
    assert_eq!(arr[1]["matches"][4]["link_target"], "docs/a.txt");
}

#[test]
fn objects_blob_tree_and_pack() {
    let fx = fixture();
    let top = fx.node("latest", &fx.src.join("top.bin"));
    let content = top["content"].as_array().unwrap();
    assert!(content.len() >= 2, "top.bin should span several blobs");
    let blob = content[1]["id"].as_str().unwrap();
    let off = content[0]["length"].as_u64().unwrap();
    let len = content[1]["length"].as_u64().unwrap();
    let hit = |s: &Snap, file: &str| {
        format!(
            "Found blob {blob} in snapshot {} from {}\n ... in file {} at offset {off} ({len} bytes)\n",
            s.short,
            s.time,
            fx.p(file)
        )
    };
    let want = [
        hit(&fx.s[1], "top-copy.bin"),
        hit(&fx.s[1], "top.bin"),
        hit(&fx.s[0], "top.bin"),
    ]
    .concat();
    let out = fx.stdout(&["find", "--blob", &blob[..8]]);
    assert_eq!(String::from_utf8_lossy(&out), want);
    // A full id, upper case, works too; the JSON tells the same.
    let out = fx.stdout(&["find", "--json", "--blob", &blob.to_uppercase()]);
    let v: Value = serde_json::from_slice(&out).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 3);
    assert_eq!(arr[0]["object_type"], "blob");
    assert_eq!(arr[0]["id"], blob);
    assert_eq!(arr[0]["path"], fx.p("top-copy.bin"));
    assert_eq!(arr[0]["snapshot"], fx.s[1].id.as_str());
    assert_eq!(arr[0]["offsets"], serde_json::json!([off]));
    assert_eq!(arr[0]["length"], len);
    let src_node = fx.node("latest", &fx.src);
    assert_eq!(arr[0]["parent_tree"], src_node["subtree"]);
    assert_eq!(arr[2]["snapshot"], fx.s[0].id.as_str());
    // A full id that differs past the 32 digits the index keeps names no blob.
    let last = if blob.ends_with('0') { "1" } else { "0" };
    let wrong = format!("{}{last}", &blob[..63]);
    let e = fx.fails(&["find", "--blob", &wrong]);
    assert!(
        e.contains(&format!("no blob in the index matches \"{wrong}\"")),
        "{e}"
    );

    // The folder docs/deep did not change: the same tree in both snapshots.
    let deep = fx.node("latest", &fx.src.join("docs/deep"));
    let tree = deep["subtree"].as_str().unwrap();
    let out = fx.stdout(&["find", "--tree", &tree[..12]]);
    let folder = |s: &Snap| {
        format!(
            "Found tree {tree} in snapshot {} from {}\n ... folder {}\n",
            s.short,
            s.time,
            fx.p("docs/deep")
        )
    };
    assert_eq!(
        String::from_utf8_lossy(&out),
        [folder(&fx.s[1]), folder(&fx.s[0])].concat()
    );
    let s: Value = serde_json::from_str(&fx.e.ok(&["cat", "snapshot", &fx.s[0].id])).unwrap();
    let root = s["tree"].as_str().unwrap();
    let out = fx.stdout(&["find", "--json", "--tree", root]);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        v,
        serde_json::json!([{
            "object_type": "tree", "id": root, "path": "/",
            "snapshot": fx.s[0].id, "time": s["time"],
        }])
    );

    // The pack holding that blob: every file using one of its blobs, with the pack named.
    let mut pack = None;
    for f in fs::read_dir(fx.e.repo.join("index")).unwrap() {
        let name = f.unwrap().file_name();
        let ix: Value =
            serde_json::from_str(&fx.e.ok(&["cat", "index", name.to_str().unwrap()])).unwrap();
        for p in ix["packs"].as_array().unwrap() {
            if p["blobs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b["id"] == blob)
            {
                pack = Some(p["id"].as_str().unwrap().to_string());
            }
        }
    }
    let pack = pack.unwrap();
    let out = fx.stdout(&["find", "--json", "--pack", &pack[..8]]);
    let v: Value = serde_json::from_slice(&out).unwrap();
    let arr = v.as_array().unwrap();
    assert!(arr.iter().all(|h| h["pack"] == pack.as_str()));
    assert!(
        arr.iter()
            .any(|h| h["id"] == blob && h["path"] == fx.p("top.bin"))
    );
    let text = String::from_utf8_lossy(&fx.stdout(&["find", "--pack", &pack])).into_owned();
    assert!(text.contains(&format!(" ... in pack {pack}\n")), "{text}");
}

#[test]
fn errors_name_the_value() {
    let fx = fixture();
    let e = fx.fails(&["find", "-s", "deadbeef", "*"]);
    assert!(e.contains("\"deadbeef\""), "{e}");
    let e = fx.fails(&["find", "--blob", "0123"]);
    assert!(e.contains("\"0123\"") && e.contains("at least 8"), "{e}");
    let e = fx.fails(&["find", "--blob", "zzzzzzzz"]);
    assert!(e.contains("\"zzzzzzzz\""), "{e}");
    let e = fx.fails(&["find", "--tree", "ffffffffffffffff"]);
    assert!(
        e.contains("no tree in the index matches \"ffffffffffffffff\""),
        "{e}"
    );
    // A bad pattern or time is a usage error.
    for (args, needle) in [
        (&["find", "["][..], "\"[\""),
        (&["find", "--oldest", "yesterday", "x"], "'yesterday'"),
    ] {
        let o = fx.e.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{}", stderr(&o));
    }
    let e = fx.fails(&[
        "find",
        "--oldest",
        "2022-01-01",
        "--newest",
        "2021-01-01",
        "x",
    ]);
    assert!(e.contains("--oldest"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn find_and_diff_on_s3() {
    let e0 = Env::new();
    let s3 = arca_testkit::s3d::S3Server::start(&e0.path("s3"));
    s3.bucket("bucket");
    let e = Env::remote(s3.location("bucket", "repo"), s3.env());
    e.init(&[]);
    let src = e.path("src");
    common::sample(&src);
    let s = src.to_str().unwrap();
    e.ok(&["backup", s]);
    fs::write(src.join("docs/a.txt"), b"changed").unwrap();
    fs::remove_file(src.join("top.bin")).unwrap();
    e.ok(&["backup", s]);
    let p = |rel: &str| format!("{}/{rel}", src.display());
    let (a, b) = (p("docs/a.txt"), p("docs/b.txt"));
    assert_eq!(
        e.ok(&["find", "-q", "*.txt"]),
        format!("{a}\n{b}\n{a}\n{b}\n")
    );
    let v = e.json(&["snapshots", "--json"]);
    let id = |i: usize| v[i]["id"].as_str().unwrap().to_string();
    let deep = node_at(&e, &id(0), &src.join("docs/deep"));
    let out = e.ok(&[
        "find",
        "--json",
        "--tree",
        deep["subtree"].as_str().unwrap(),
    ]);
    let hits: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(hits.as_array().unwrap().len(), 2, "{out}");
    let out = e.ok(&["diff", "--json", &id(0), &id(1)]);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0]["path"], a);
    assert_eq!(lines[0]["modifier"], "M");
    assert_eq!(lines[1]["path"], p("top.bin"));
    assert_eq!(lines[1]["modifier"], "-");
    assert_eq!(lines[2]["removed"]["files"], 1);
    assert_eq!(lines[2]["changed_files"], 1);
}

/// The node at absolute `path` in snapshot `snap`, from `cat snapshot` and `cat tree`.
fn node_at(e: &Env, snap: &str, path: &Path) -> Value {
    let s: Value = serde_json::from_str(&e.ok(&["cat", "snapshot", snap])).unwrap();
    let mut tree = s["tree"].as_str().unwrap().to_string();
    let mut node = Value::Null;
    for c in path.components() {
        let Component::Normal(name) = c else { continue };
        if !node.is_null() {
            tree = node["subtree"].as_str().unwrap().to_string();
        }
        let t: Value = serde_json::from_str(&e.ok(&["cat", "tree", &tree])).unwrap();
        node = t["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name.to_string_lossy().as_ref())
            .unwrap()
            .clone();
    }
    node
}
