//! What the target already holds is not fetched, also where the restore cannot keep it as it
//! is: a file right in content that is replaced for a hard link it has outside the restore,
//! and a file whose content the target holds only under another name of its hard-link group.
//! Their blocks are copied from the old inode, checked by hash; the dry run counts them so.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::*;

fn restored(target: &Path, src: &Path) -> PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

/// Several blocks of content no other file has (that does not compress).
fn content(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..3_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The dry run planned the bytes to fetch, copy and reuse that the restore planned.
fn plans_agree(dry: &serde_json::Value, real: &serde_json::Value) {
    for k in [
        "bytes_to_fetch",
        "bytes_to_copy",
        "bytes_to_reuse",
        "blobs_to_fetch",
    ] {
        assert_eq!(dry["plan"][k], real["plan"][k], "{k}: {dry} {real}");
    }
}

/// A dry run, then the restore: both plan the same bytes to fetch and to copy, the restore
/// fetches none of them and copies what was planned. Returns the restore's summary.
fn restore_fetching_nothing(e: &Env, t: &str) -> serde_json::Value {
    let args = ["restore", "latest", "-t", t, "--json"];
    let dry = e.json(&[&args[..], &["--dry-run"]].concat());
    let real = e.json(&args);
    plans_agree(&dry, &real);
    assert_eq!(real["plan"]["bytes_to_fetch"].as_u64(), Some(0), "{real}");
    assert_eq!(real["fetched_bytes"].as_u64(), Some(0), "{real}");
    assert_eq!(real["bytes_reused"].as_u64(), Some(0), "{real}");
    assert_eq!(
        real["bytes_copied"], real["plan"]["bytes_to_copy"],
        "{real}"
    );
    assert_eq!(real["errors"].as_u64(), Some(0), "{real}");
    real
}

/// A restored file given a name outside the target is replaced on the next restore (kept, it
/// would stay one file with that name), from its own old inode: nothing fetched, and the name
/// outside keeps the old inode as it was.
#[test]
fn a_file_replaced_for_a_name_outside_is_copied_from_its_old_inode() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    let data = content(1);
    fs::write(src.join("d/f"), &data).unwrap();
    fs::set_permissions(src.join("d/f"), fs::Permissions::from_mode(0o640)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "-t", t]);
    let f = restored(&target, &src).join("d/f");
    let outside = e.path("outside");
    fs::hard_link(&f, &outside).unwrap();
    let old = fs::metadata(&outside).unwrap();
    let real = restore_fetching_nothing(&e, t);
    assert!(
        real["bytes_copied"].as_u64().unwrap() >= data.len() as u64,
        "{real}"
    );
    let (new, src_meta) = (
        fs::metadata(&f).unwrap(),
        fs::metadata(src.join("d/f")).unwrap(),
    );
    assert_eq!(fs::read(&f).unwrap(), data);
    assert_ne!(new.ino(), old.ino());
    assert_eq!((new.nlink(), new.mode() & 0o7777), (1, 0o640));
    assert_eq!(new.mtime(), src_meta.mtime());
    assert_eq!(new.mtime_nsec(), src_meta.mtime_nsec());
    // The name outside is the old inode, its content and mtime untouched (not its ctime:
    // losing the name `f` changes the inode's link count, which moves its ctime; compared
    // in seconds, the test failed whenever the restore crossed a second).
    let after = fs::metadata(&outside).unwrap();
    assert_eq!((after.ino(), after.nlink()), (old.ino(), 1));
    assert_eq!(
        (after.mtime(), after.mtime_nsec()),
        (old.mtime(), old.mtime_nsec())
    );
    assert_eq!(fs::read(&outside).unwrap(), data);
}

/// A repository whose snapshot holds a hard-link group (`d1/a`, `d2/b`) of `content(seed)`,
/// restored into `target`: the environment, the source, the target and the content.
fn restored_group(seed: u64) -> (Env, PathBuf, PathBuf, Vec<u8>) {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d1")).unwrap();
    fs::create_dir_all(src.join("d2")).unwrap();
    let data = content(seed);
    fs::write(src.join("d1/a"), &data).unwrap();
    fs::hard_link(src.join("d1/a"), src.join("d2/b")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    (e, src, target, data)
}

/// A hard-link group whose first name is gone from the target, its other name still holding
/// the content: the first is written from that name, which is then linked to it.
#[test]
fn a_file_is_copied_from_another_name_of_its_group() {
    let (e, src, target, data) = restored_group(2);
    let t = target.to_str().unwrap();
    let back = restored(&target, &src);
    fs::remove_file(back.join("d1/a")).unwrap();
    let real = restore_fetching_nothing(&e, t);
    assert!(
        real["bytes_copied"].as_u64().unwrap() >= data.len() as u64,
        "{real}"
    );
    let (a, b) = (
        fs::metadata(back.join("d1/a")).unwrap(),
        fs::metadata(back.join("d2/b")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    assert_eq!(fs::read(back.join("d1/a")).unwrap(), data);
    assert_eq!(a.mtime(), fs::metadata(src.join("d1/a")).unwrap().mtime());
}

/// The same for a file whose mtime is wrong, so that it is hashed (while content moves, in
/// the restore; before, in the dry run): found whole, it is replaced for its name outside
/// and lends its blocks, the restore and the dry run counting them alike.
#[test]
fn a_file_hashed_and_replaced_for_a_name_outside_is_copied_from_its_old_inode() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    let data = content(3);
    fs::write(src.join("d/f"), &data).unwrap();
    fs::write(src.join("d/other"), content(4)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "-t", t]);
    let f = restored(&target, &src).join("d/f");
    let outside = e.path("outside");
    fs::hard_link(&f, &outside).unwrap();
    let touched = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    fs::File::options()
        .write(true)
        .open(&outside)
        .unwrap()
        .set_modified(touched)
        .unwrap();
    // The other file is gone: it is fetched, the only bytes that are.
    fs::remove_file(restored(&target, &src).join("d/other")).unwrap();
    let old = fs::metadata(&outside).unwrap();
    let args = ["restore", "latest", "-t", t, "--json"];
    let dry = e.json(&[&args[..], &["--dry-run"]].concat());
    let real = e.json(&args);
    plans_agree(&dry, &real);
    assert_eq!(real["files_hashed"].as_u64(), Some(1), "{real}");
    assert!(
        real["plan"]["bytes_to_copy"].as_u64().unwrap() >= data.len() as u64,
        "{real}"
    );
    assert_eq!(
        real["bytes_copied"], real["plan"]["bytes_to_copy"],
        "{real}"
    );
    let fetched = real["fetched_bytes"].as_u64().unwrap();
    assert!(fetched > 0 && fetched < data.len() as u64 * 3 / 2, "{real}");
    assert_eq!(real["errors"].as_u64(), Some(0), "{real}");
    let (new, src_meta) = (
        fs::metadata(&f).unwrap(),
        fs::metadata(src.join("d/f")).unwrap(),
    );
    assert_eq!(fs::read(&f).unwrap(), data);
    assert_ne!(new.ino(), old.ino());
    assert_eq!(new.nlink(), 1);
    assert_eq!(new.mtime(), src_meta.mtime());
    let after = fs::metadata(&outside).unwrap();
    assert_eq!((after.ino(), after.nlink()), (old.ino(), 1));
    assert_eq!(after.modified().unwrap(), touched);
    assert_eq!(fs::read(&outside).unwrap(), data);
    assert_eq!(
        fs::read(restored(&target, &src).join("d/other")).unwrap(),
        content(4)
    );
}

/// A group whose first name holds other bytes (so it is hashed) and has a name outside (so it
/// is replaced), its other name still holding the content: the restore hashes the first name
/// while content moves, after the sources are chosen, and fetches; the dry run, which hashes
/// it first, plans the same (it counted copies from the other name that the restore fetched).
#[test]
fn a_dry_run_plans_no_copies_from_a_group_whose_first_name_is_hashed() {
    let (e, src, target, data) = restored_group(5);
    let t = target.to_str().unwrap();
    let back = restored(&target, &src);
    // The first name: a new file of the same size with other bytes, linked outside too.
    fs::remove_file(back.join("d1/a")).unwrap();
    fs::write(back.join("d1/a"), content(6)).unwrap();
    let outside = e.path("outside");
    fs::hard_link(back.join("d1/a"), &outside).unwrap();
    let args = ["restore", "latest", "-t", t, "--json"];
    let dry = e.json(&[&args[..], &["--dry-run"]].concat());
    let real = e.json(&args);
    plans_agree(&dry, &real);
    assert_eq!(real["errors"].as_u64(), Some(0), "{real}");
    let (a, b) = (
        fs::metadata(back.join("d1/a")).unwrap(),
        fs::metadata(back.join("d2/b")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    assert_eq!(fs::read(back.join("d1/a")).unwrap(), data);
    assert_eq!(fs::read(&outside).unwrap(), content(6));
}
