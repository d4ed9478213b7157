//! A sparse file through `arca mount`: its holes take no blocks, so `du` counts its data
//! only and `cp -a` out of the mount writes a sparse copy, holding the same bytes. Skipped,
//! saying why, where /dev/fuse or fusermount3 is missing (see common/mount.rs).

#![allow(clippy::unwrap_used)]

mod common;
#[macro_use]
#[path = "common/mount.rs"]
mod mount;

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::process::Command;

use arca_testkit::random_bytes;
use common::*;
use mount::*;
use nix::sys::signal::{Signal, kill};

/// Size of the sparse file: 64 MiB, of which one 4 KiB island is data.
const SIZE: u64 = 64 << 20;

#[test]
fn a_sparse_files_holes_take_no_blocks_in_the_mount() {
    require_fuse!();
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let island = random_bytes(5, 4096);
    {
        let f = fs::File::create(src.join("sparse.img")).unwrap();
        f.set_len(SIZE).unwrap();
        f.write_all_at(&island, 32 << 20).unwrap();
    }
    let dense = random_bytes(6, 300_000);
    fs::write(src.join("dense.bin"), &dense).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);

    let mnt = mountpoint(&e);
    let mut m = Mount::start(&e, &mnt, &[]);
    let shown = mnt
        .join("snapshots/latest")
        .join(src.strip_prefix("/").unwrap());
    let sparse = fs::metadata(shown.join("sparse.img")).unwrap();
    assert_eq!(sparse.len(), SIZE);
    // The island's chunk holds zeros around it; the holes' chunks take nothing. Before,
    // every byte counted (131,072 blocks).
    assert!(
        sparse.blocks() * 512 < SIZE / 4,
        "{} blocks for a file with 4 KiB of data",
        sparse.blocks()
    );
    // A file without holes takes its size.
    let d = fs::metadata(shown.join("dense.bin")).unwrap();
    assert_eq!(d.blocks(), (dense.len() as u64).div_ceil(512));

    // cp -a (--sparse=auto) keeps the copy sparse, and its bytes are the file's.
    let out = e.path("out");
    fs::create_dir_all(&out).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(shown.join("sparse.img"))
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let copy = out.join("sparse.img");
    let c = fs::metadata(&copy).unwrap();
    assert_eq!(c.len(), SIZE);
    assert!(c.blocks() * 512 < SIZE / 4, "copy: {} blocks", c.blocks());
    let bytes = fs::read(&copy).unwrap();
    let at = 32usize << 20;
    assert_eq!(&bytes[at..at + island.len()], &island[..]);
    assert!(bytes[..at].iter().all(|&b| b == 0));
    assert!(bytes[at + island.len()..].iter().all(|&b| b == 0));

    kill(m.pid(), Signal::SIGINT).unwrap();
    assert_eq!(m.wait_exit().code(), Some(0), "{}", m.stderr());
}
