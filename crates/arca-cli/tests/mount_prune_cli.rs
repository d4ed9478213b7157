//! A prune run while `arca mount --no-lock` is up, through FUSE: forget and prune repack the
//! pack holding a mounted file's data and delete it, and the file still reads, byte for byte
//! (the mount finds the pack gone, loads the index again and reads from the new pack).
//! Skipped, saying why, where /dev/fuse or fusermount3 is missing (see common/mount.rs).

#![allow(clippy::unwrap_used)]

mod common;
#[macro_use]
#[path = "common/mount.rs"]
mod mount;

use std::fs;
use std::path::PathBuf;

use arca_testkit::random_bytes;
use common::*;
use mount::*;
use nix::sys::signal::{Signal, kill};

/// The repository's pack files.
fn packs(e: &Env) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(e.repo.join("data"))
        .unwrap()
        .flat_map(|d| fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn a_file_whose_pack_a_prune_repacked_reads_through_the_mount() {
    require_fuse!();
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let kept = random_bytes(11, 700_000);
    fs::write(src.join("kept.bin"), &kept).unwrap();
    fs::write(src.join("dropped.bin"), random_bytes(12, 700_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let first = e.json(&["snapshots", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The second snapshot keeps one file of the two: its data stays in the first backup's
    // data pack, beside the other file's, which nothing will use once the first is forgotten.
    fs::remove_file(src.join("dropped.bin")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let mut by_size = packs(&e);
    by_size.sort_by_key(|p| fs::metadata(p).unwrap().len());
    let mixed = by_size.last().unwrap().clone();
    assert!(fs::metadata(&mixed).unwrap().len() > 1_400_000, "{mixed:?}");

    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &["--no-lock"]);
    let file = mnt
        .join("snapshots/latest")
        .join(src.strip_prefix("/").unwrap())
        .join("kept.bin");
    // Looked up (the listings loaded), not read.
    assert_eq!(fs::metadata(&file).unwrap().len(), kept.len() as u64);

    e.ok(&["forget", &first]);
    e.ok(&["prune", "--max-unused", "0%"]);
    let after = packs(&e);
    assert!(!after.contains(&mixed), "{mixed:?} still in {after:?}");

    let read = fs::read(&file).unwrap();
    assert_eq!(read.len(), kept.len());
    assert!(read == kept, "the file read through the mount differs");
    let err = m.stderr();
    assert!(!err.contains("reading data blob"), "{err}");
    kill(m.pid(), Signal::SIGINT).unwrap();
    assert_eq!(m.wait_exit().code(), Some(0), "{}", m.stderr());
}
