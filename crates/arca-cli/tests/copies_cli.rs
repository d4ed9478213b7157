//! Blobs stored in more than one pack (`backup --cap`, two backups of the same new data at
//! once): a damaged copy gives way to an intact one, in restore and in check.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

use arca_testkit::random_bytes;
use common::*;

/// A repository whose file `x` has blocks in two packs each; returns the source folder and,
/// for one such block, where each copy lies: (pack file, offset, length).
fn twice_stored(e: &Env) -> (PathBuf, Vec<(PathBuf, u64, u64)>) {
    e.init(&["--pack-size", "1MiB", "--compression", "0"]);
    let (one, two) = (e.path("one"), e.path("two"));
    fs::create_dir_all(&one).unwrap();
    fs::create_dir_all(&two).unwrap();
    // 12 MB: whatever the repository's chunk boundaries, the blocks before the last (at most
    // 4 MiB) fill a 1 MiB pack, so the file lies in two packs at least and `--cap 1` stores
    // some again. With 3 MB, chunks of 0.7 and 2.3 MB could share one pack: nothing capped.
    let data = random_bytes(7, 12_000_000);
    fs::write(one.join("x"), &data).unwrap();
    fs::write(two.join("x"), &data).unwrap();
    e.ok(&["backup", "-q", one.to_str().unwrap()]);
    // Capped to one old pack per segment, the second backup stores the blocks of the others
    // again.
    let b = e.json(&["backup", "--json", "--cap", "1", two.to_str().unwrap()]);
    assert!(b["capped_blobs"].as_u64().unwrap() > 0, "{b}");
    let mut copies: HashMap<String, Vec<(PathBuf, u64, u64)>> = HashMap::new();
    for idx in e.ok(&["list", "index"]).lines() {
        let f: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "index", idx])).unwrap();
        for p in f["packs"].as_array().unwrap() {
            let id = p["id"].as_str().unwrap();
            let file = e.repo.join("data").join(&id[..2]).join(id);
            for b in p["blobs"].as_array().unwrap() {
                copies
                    .entry(b["id"].as_str().unwrap().to_string())
                    .or_default()
                    .push((
                        file.clone(),
                        b["offset"].as_u64().unwrap(),
                        b["length"].as_u64().unwrap(),
                    ));
            }
        }
    }
    let twice = copies.into_values().find(|c| c.len() == 2).unwrap();
    (one, twice)
}

fn flip(file: &PathBuf, at: u64) {
    let mut b = fs::read(file).unwrap();
    b[at as usize] ^= 0x55;
    fs::write(file, b).unwrap();
}

/// Whichever copy is damaged, restore takes the other one (with a warning naming `check`)
/// and the file comes back whole; `check --read-data` names the damaged pack but no damaged
/// snapshot, and `repair packs` leaves a clean repository. Restore failed the file (exit 3)
/// when the copy it chose was the damaged one, and check called both snapshots damaged.
#[test]
fn a_damaged_copy_of_a_blob_gives_way_to_the_intact_one() {
    let e = Env::new();
    let (one, twice) = twice_stored(&e);
    let data = fs::read(one.join("x")).unwrap();
    // Restores the first snapshot into folder `name`; its outcome and where `x` lands.
    let restore = |name: &str| {
        let t = e.path(name);
        let o = e.run(&[
            "restore",
            "latest",
            "--path",
            one.to_str().unwrap(),
            "--target",
            t.to_str().unwrap(),
        ]);
        (o, t.join(one.strip_prefix("/").unwrap()).join("x"))
    };
    let mut warned = false;
    for (k, (pack, offset, len)) in twice.iter().enumerate() {
        flip(pack, offset + len / 2);
        let (o, back) = restore(&format!("t{k}"));
        assert!(o.status.success(), "copy {k}: {}", stderr(&o));
        warned |= stderr(&o).contains("read from another copy");
        assert!(fs::read(back).unwrap() == data, "copy {k}: restored wrong");
        let o = e.run(&["check", "--read-data"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "copy {k}: {err}");
        assert!(!err.contains("snapshot"), "copy {k}: {err}");
        assert!(!err.contains("repair snapshots"), "copy {k}: {err}");
        flip(pack, offset + len / 2);
    }
    assert!(
        warned,
        "the copy the restore chose was damaged once: it says so"
    );
    // Gone instead of damaged: the same.
    let (pack, _, _) = &twice[0];
    let kept = fs::read(pack).unwrap();
    fs::remove_file(pack).unwrap();
    let (o, back) = restore("gone");
    fs::write(pack, kept).unwrap();
    if o.status.success() {
        assert!(fs::read(back).unwrap() == data);
    } else {
        // The pack held blocks stored nowhere else: only those are missing.
        assert!(stderr(&o).contains("not restored"), "{}", stderr(&o));
    }
    e.ok(&["check", "--read-data"]);
}
