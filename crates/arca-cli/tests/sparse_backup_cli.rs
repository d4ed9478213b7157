//! Backing up sparse files: long holes are passed over without making their zeros, and the
//! chunks come out as reading every byte gives them, so a sparse file and a dense copy of it
//! share all their data blobs, and the sparse file restores byte for byte.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};

use arca_testkit::random_bytes;
use common::*;

/// 96 MiB with data islands between holes longer than several maximum chunks (4 MiB), at
/// offsets aligned to nothing in particular.
const SIZE: u64 = 96 << 20;
const ISLANDS: [(u64, usize); 4] = [
    (0, 70_001),
    ((17 << 20) + 4_096 * 3, 300_000),
    ((40 << 20) + 123_456, 9_999),
    (SIZE - 50_000, 50_000),
];

#[test]
fn a_sparse_file_and_its_dense_copy_share_every_data_blob() {
    let e = Env::new();
    let sparse_dir = e.path("sparse");
    let dense_dir = e.path("dense");
    fs::create_dir_all(&sparse_dir).unwrap();
    fs::create_dir_all(&dense_dir).unwrap();
    let sparse = sparse_dir.join("disk.img");
    let mut whole = vec![0u8; SIZE as usize];
    {
        let f = fs::File::create(&sparse).unwrap();
        f.set_len(SIZE).unwrap();
        for (k, &(off, len)) in ISLANDS.iter().enumerate() {
            let data = random_bytes(k as u64 + 7, len);
            f.write_all_at(&data, off).unwrap();
            whole[off as usize..off as usize + len].copy_from_slice(&data);
        }
    }
    let m = fs::metadata(&sparse).unwrap();
    if m.blocks() * 512 >= SIZE / 2 {
        eprintln!("skipped: this file system keeps no holes");
        return;
    }
    // The dense copy: every byte written, no hole.
    fs::File::create(dense_dir.join("disk.img"))
        .unwrap()
        .write_all(&whole)
        .unwrap();
    assert!(fs::metadata(dense_dir.join("disk.img")).unwrap().blocks() * 512 >= SIZE);

    e.init(&[]);
    let a = e.json(&["backup", "--json", sparse_dir.to_str().unwrap()]);
    assert_eq!(a["total_bytes_processed"], SIZE, "{a}");
    let b = e.json(&["backup", "--json", dense_dir.to_str().unwrap()]);
    assert_eq!(b["total_bytes_processed"], SIZE, "{b}");
    // Any chunk cut differently in the holes would be a new data blob here (`data_added`
    // counts the new folders' listings too).
    assert_eq!(b["data_blobs"], 0, "the dense copy stored new data: {b}");

    // And the other way round, into a new repository: dense first, then sparse.
    let e2 = Env::new();
    e2.init(&[]);
    e2.json(&["backup", "--json", dense_dir.to_str().unwrap()]);
    let c = e2.json(&["backup", "--json", sparse_dir.to_str().unwrap()]);
    assert_eq!(c["data_blobs"], 0, "the sparse file stored new data: {c}");

    let id = a["snapshot_id"].as_str().unwrap();
    let target = e.path("t");
    e.ok(&[
        "restore",
        &format!("{id}:{}", sparse_dir.display()),
        "--target",
        target.to_str().unwrap(),
    ]);
    let got = fs::read(target.join("disk.img")).unwrap();
    assert!(got == whole, "the restored file differs from the source");
}
