//! `arca stats` end to end on a tree whose answers are known: restic's four modes (text and
//! JSON), compression figures, the dedup ratio, fragmentation and the restore plan of each
//! snapshot, the repository's totals, and the error cases.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use arca_testkit::{random_bytes, text_bytes};
use common::*;

/// Sealing overhead of a blob: nonce, tag, flag byte.
const OVERHEAD: u64 = 41;
const X: u64 = 200_000;
const C: u64 = 250_000;
const D: u64 = 6;

/// a.txt and b.txt share their content, sub/hl is a hard link to c.bin, empty is empty. With
/// the default chunker (256 KiB minimum) every file is one blob.
fn tree(src: &Path) {
    fs::create_dir_all(src.join("sub")).unwrap();
    let x = random_bytes(1, X as usize);
    fs::write(src.join("a.txt"), &x).unwrap();
    fs::write(src.join("b.txt"), &x).unwrap();
    fs::write(src.join("c.bin"), random_bytes(2, C as usize)).unwrap();
    fs::write(src.join("empty"), b"").unwrap();
    fs::write(src.join("sub/d.txt"), b"hello\n").unwrap();
    fs::hard_link(src.join("c.bin"), src.join("sub/hl")).unwrap();
}

/// Folders from the snapshot's root down to `src` (each is an entry and a listing).
fn depth(src: &Path) -> u64 {
    src.components().count() as u64 - 1
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    if dir.exists() {
        arca_testkit::files_under(dir)
    } else {
        vec![]
    }
}

fn stats(e: &Env, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["stats", "--json"];
    a.extend_from_slice(args);
    e.json(&a)
}

fn keys(v: &serde_json::Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort();
    k
}

#[test]
fn the_four_modes_on_a_known_tree() {
    let e = Env::new();
    let src = e.path("src");
    tree(&src);
    e.init(&["--compression", "0"]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let n = depth(&src);
    let restore = 2 * X + C + D;

    // restore-size: every entry counted, the hard link's bytes once.
    let out = e.ok(&["stats"]);
    let head: Vec<&str> = out.lines().take(4).collect();
    assert_eq!(
        head,
        [
            "Stats in restore-size mode:",
            "     Snapshots processed:  1",
            &format!("        Total File Count:  {}", n + 7),
            "              Total Size:  634.771 KiB",
        ],
        "{out}"
    );
    let v = stats(&e, &[]);
    assert_eq!(v["total_size"], restore);
    assert_eq!(v["total_file_count"], n + 7);
    assert_eq!(v["snapshots_count"], 1);
    assert_eq!(v["mode"], "restore-size");
    assert_eq!(
        keys(&v),
        [
            "mode",
            "repository",
            "selection",
            "snapshots",
            "snapshots_count",
            "total_file_count",
            "total_size"
        ]
    );

    // files-by-contents: a.txt and b.txt are one file, c.bin and sub/hl one, and every entry
    // without content one more (the first met is a folder: 0 bytes).
    let v = stats(&e, &["--mode", "files-by-contents"]);
    assert_eq!(v["total_file_count"], 4);
    assert_eq!(v["total_size"], X + C + D);

    // blobs-per-file: the three files with content and a blob each.
    let v = stats(&e, &["--mode", "blobs-per-file"]);
    let got: Vec<u64> = ["total_file_count", "total_blob_count", "total_size"]
        .iter()
        .map(|k| v[*k].as_u64().unwrap())
        .collect();
    assert_eq!(got, [3, 3, X + C + D]);

    // raw-data: three data blobs and one listing per folder, stored uncompressed.
    let v = stats(&e, &["--mode", "raw-data"]);
    let trees = n + 2; // the root, the folders down to src, and sub
    assert_eq!(v["total_blob_count"], 3 + trees);
    assert_eq!(v["selection"]["data_blobs"], 3);
    assert_eq!(v["selection"]["tree_blobs"], trees);
    assert_eq!(v["selection"]["data_plaintext_size"], X + C + D);
    let plain = v["total_plaintext_size"].as_u64().unwrap();
    assert!(plain > X + C + D);
    let blobs = v["total_blob_count"].as_u64().unwrap();
    assert_eq!(v["total_size"], plain + blobs * OVERHEAD);
    assert_eq!(v["total_uncompressed_size"], v["total_size"]);
    assert!(v.get("compression_ratio").is_none(), "{v}");
    let dedup = v["dedup_ratio"].as_f64().unwrap();
    assert!(
        (dedup - restore as f64 / (X + C + D) as f64).abs() < 1e-9,
        "{dedup}"
    );

    // The snapshot's fragmentation and restore plan: one data pack holds everything.
    let s = &v["snapshots"][0];
    assert_eq!(s["restore_size"], restore);
    assert_eq!(s["entries"], n + 7);
    let packs = files_under(&e.repo.join("data"));
    assert_eq!(packs.len(), 2, "one data pack, one tree pack");
    let data_pack = packs
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .max()
        .unwrap();
    let f = &s["fragmentation"];
    assert_eq!(f["packs"], 1);
    assert_eq!(f["pack_bytes"], data_pack);
    assert_eq!(f["blob_bytes"], X + C + D + 3 * OVERHEAD);
    assert_eq!(f["restore_bytes"], restore);
    let mib = restore as f64 / (1 << 20) as f64;
    assert!((f["packs_per_mib"].as_f64().unwrap() - 1.0 / mib).abs() < 1e-9);
    assert!((f["speed_factor"].as_f64().unwrap() - mib).abs() < 1e-9);
    let used = (X + C + D + 3 * OVERHEAD) as f64 / data_pack as f64;
    assert!((f["pack_utilisation"].as_f64().unwrap() - used).abs() < 1e-9);
    let p = &s["restore_plan"];
    let got: Vec<u64> = [
        "dirs",
        "files",
        "hardlinks",
        "others",
        "blocks",
        "blobs",
        "packs",
        "file_bytes",
    ]
    .iter()
    .map(|k| p[*k].as_u64().unwrap())
    .collect();
    assert_eq!(got, [n + 1, 5, 1, 0, 4, 3, 1, restore], "{p}");
    assert!(p["memory_bytes"].as_u64().unwrap() > 500, "{p}");
}

#[test]
fn several_snapshots_selection_and_repository() {
    let e = Env::new();
    let src = e.path("src");
    tree(&src);
    e.init(&["--compression", "0"]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    fs::write(src.join("e.txt"), b"0123456789").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let n = depth(&src);
    let restore = 2 * X + C + D;

    let v = stats(&e, &[]);
    assert_eq!(v["snapshots_count"], 2);
    assert_eq!(v["total_size"], 2 * restore + 10);
    assert_eq!(v["total_file_count"], 2 * (n + 7) + 1);
    assert_eq!(v["snapshots"].as_array().unwrap().len(), 2);
    let sel = &v["selection"];
    assert_eq!(sel["data_blobs"], 4);
    assert_eq!(sel["data_plaintext_size"], X + C + D + 10);
    // The second backup rewrote the listings from the root to src; sub/ is shared.
    assert_eq!(sel["tree_blobs"], 2 * (n + 1) + 1);
    assert_eq!(sel["fragmentation"]["restore_bytes"], 2 * restore + 10);
    assert_eq!(
        sel["fragmentation"]["packs"], 2,
        "e.txt is in the second backup's pack"
    );

    // Repository totals: as the folder holds them.
    let r = &v["repository"];
    let sum = |d: &str| -> (u64, u64) {
        let f = files_under(&e.repo.join(d));
        (
            f.len() as u64,
            f.iter().map(|p| fs::metadata(p).unwrap().len()).sum(),
        )
    };
    let (packs, pack_bytes) = sum("data");
    assert_eq!(
        (r["packs"].as_u64(), r["pack_bytes"].as_u64()),
        (Some(packs), Some(pack_bytes))
    );
    assert_eq!(
        (r["data_packs"].as_u64(), r["tree_packs"].as_u64()),
        (Some(2), Some(2))
    );
    let (index_files, index_bytes) = sum("index");
    assert_eq!(r["index_files"], index_files);
    assert_eq!(r["index_bytes"], index_bytes);
    assert_eq!(r["snapshot_files"], 2);
    let all: u64 = ["data", "index", "snapshots", "keys"]
        .iter()
        .map(|d| sum(d).1)
        .sum::<u64>()
        + fs::metadata(e.repo.join("config")).unwrap().len();
    assert_eq!(r["total_bytes"], all);
    // Four data blobs and the distinct listings, each indexed once.
    assert_eq!(r["index_data_blobs"], 4);
    assert_eq!(r["index_tree_blobs"], 2 * (n + 1) + 1);

    // One snapshot by id prefix, and latest: no repository totals then.
    let snaps = e.json(&["snapshots", "--json"]);
    let first = snaps[0]["id"].as_str().unwrap();
    let v = stats(&e, &[&first[..8]]);
    assert_eq!(v["total_size"], restore);
    assert_eq!(v["snapshots"][0]["id"], first);
    assert!(v.get("repository").is_none());
    // Files by contents across snapshots: e.txt is the only new content.
    let v = stats(&e, &["--mode", "files-by-contents", first, "latest"]);
    assert_eq!(v["total_file_count"], 5);
    assert_eq!(v["total_size"], X + C + D + 10);
    let text = e.ok(&["stats", "--mode", "raw-data"]);
    for want in [
        "Stats in raw-data mode:",
        "        Total Blob Count:  ",
        "             Dedup Ratio:  ",
        "All 2 snapshots together:",
        "Repository:",
        "           Total on disk:  ",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

#[test]
fn compression_figures() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("text"), text_bytes(5, 200_000)).unwrap();
    fs::write(src.join("noise"), random_bytes(6, 200_000)).unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let v = stats(&e, &["--mode", "raw-data"]);
    let size = v["total_size"].as_f64().unwrap();
    let unc = v["total_uncompressed_size"].as_f64().unwrap();
    let plain = v["total_plaintext_size"].as_u64().unwrap();
    let blobs = v["total_blob_count"].as_u64().unwrap();
    assert_eq!(unc as u64, plain + blobs * OVERHEAD);
    // The text shrinks, the noise does not: some but not all data is compressed.
    let ratio = v["compression_ratio"].as_f64().unwrap();
    let progress = v["compression_progress"].as_f64().unwrap();
    let saving = v["compression_space_saving"].as_f64().unwrap();
    assert!(ratio > 1.5, "{v}");
    assert!(progress > 10.0 && progress < 75.0, "{v}");
    assert!((saving - (1.0 - size / unc) * 100.0).abs() < 1e-9, "{v}");
    assert!(saving > 10.0, "{v}");
    let text = e.ok(&["stats", "--mode", "raw-data"]);
    assert!(
        text.contains(&format!("       Compression Ratio:  {ratio:.2}x")),
        "{text}"
    );
}

#[test]
fn bad_input_fails_with_one_line() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    // A bad mode is a usage error, listing the modes.
    let o = e.run(&["stats", "--mode", "bogus"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("[possible values: restore-size"),
        "{}",
        stderr(&o)
    );
    for (args, want) in [
        (&["stats", "deadbeef"][..], "deadbeef"),
        (&["stats", "--host", "nowhere", "latest"][..], "latest"),
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // No snapshot passing the filters: nothing counted, not an error (as restic).
    let v = stats(&e, &["--host", "nowhere"]);
    assert_eq!(v["snapshots_count"], 0);
    assert_eq!(v["total_size"], 0);
}
