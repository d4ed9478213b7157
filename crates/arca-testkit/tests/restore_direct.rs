//! Direct writes: the page-aligned middles of large blocks go around the page cache while
//! their edges, zero runs and local copies go through it; the result is the same file, byte
//! for byte, with the same holes, whichever way it was written.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use arca_format::ChunkerParams;
use arca_repo::Repository;
use arca_restore::{DirectIo, Tuning};
use arca_testkit::{compare, random_bytes};
use common::*;

/// A repository whose blocks are large enough to be written direct.
fn big_block_repo(dir: &Path) -> Repository {
    let mut o = init_opts();
    o.chunker = ChunkerParams {
        min: 256 << 10,
        avg: 512 << 10,
        max: 2 << 20,
    };
    o.pack_size = 4 << 20;
    Repository::init(local(dir), b"password", &o).unwrap()
}

#[test]
fn direct_writes_land_exactly_with_holes_and_copies() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    let big = random_bytes(1, 9 << 20);
    fs::write(src.join("big"), &big).unwrap();
    // The same content again (copied locally from the first), and with a prefix that shifts
    // every block boundary by an odd amount.
    fs::write(src.join("d/same"), &big).unwrap();
    fs::write(src.join("d/shifted"), [&b"xyz"[..], &big].concat()).unwrap();
    // A long zero run between random data: it stays a hole.
    let mut sparse = random_bytes(2, 12 << 20);
    sparse[3 << 20..9 << 20].fill(0);
    fs::write(src.join("sparse"), &sparse).unwrap();
    fs::write(src.join("tiny"), b"tiny").unwrap();
    let repo = big_block_repo(&tmp.path().join("repo"));
    do_backup(&repo, &src).unwrap();
    compare::snapshot(&src).unwrap();

    let mut direct_bytes = vec![];
    // (name, window, queue and workers, direct I/O). A restore this small fits in the dirty
    // page allowance: `auto` writes it through the page cache.
    for (name, window, narrow, direct_io) in [
        ("all-at-once", 0, 0, DirectIo::Always),
        ("one-file-at-a-time", 1, 0, DirectIo::Always),
        ("buffered", 0, 0, DirectIo::Never),
        // One worker, every channel of capacity 1: reports held for their direct writes,
        // blocks the full writers' queue turns back to the page cache, nothing stuck.
        ("narrow", 0, 1, DirectIo::Always),
        ("auto", 0, 0, DirectIo::Auto),
    ] {
        let t = tmp.path().join(name);
        let (r, _) = restore_with(&repo, "latest", &t, |o| {
            o.tuning = Tuning {
                window,
                queue: narrow,
                workers: narrow,
                fetchers: narrow,
                direct_io,
                ..Tuning::default()
            };
        });
        let r = r.unwrap();
        assert!(r.issues.is_empty(), "{name}: {:?}", r.issues);
        let d = compare::diff_trees(&src, &restored(&t, &src));
        assert!(d.is_empty(), "{name}: restore differs:\n{}", d.join("\n"));
        let m = fs::metadata(restored(&t, &src.join("sparse"))).unwrap();
        assert!(
            m.blocks() * 512 <= (7 << 20),
            "{name}: {} bytes allocated for 6 MiB of data",
            m.blocks() * 512
        );
        direct_bytes.push(r.bytes_direct);
    }
    // Much of the data went direct where allowed (every file system under test supports it),
    // none when turned off. The first of several uses of a block in one job goes through the
    // page cache (so that the copies made from it are of data known to have landed): how much
    // of `big`, used three times, goes direct depends on how its uses fall into jobs; the
    // random 6 MiB of `sparse` always do.
    assert!(direct_bytes[0] > 6 << 20, "{direct_bytes:?}");
    assert!(direct_bytes[1] > 6 << 20, "{direct_bytes:?}");
    assert_eq!(direct_bytes[2], 0);
    assert!(direct_bytes[3] > 0, "{direct_bytes:?}");
    assert_eq!(direct_bytes[4], 0);
}
