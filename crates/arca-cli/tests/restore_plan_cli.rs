//! A dry run's figures are the real run's: for a few states of the target, what
//! `restore --dry-run --json` says it would fetch, write and copy locally is what the real run
//! then reports having done; and what `-v` lists is what the run does.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::Path;

use arca_testkit::random_bytes;
use common::*;

/// Runs the dry run, then the real run, into `t`, and checks that their figures agree.
fn dry_then_real(e: &Env, t: &Path, what: &str) {
    let t = t.to_str().unwrap();
    let dry = e.json(&["restore", "latest", "--target", t, "--dry-run", "--json"]);
    let real = e.json(&["restore", "latest", "--target", t, "--json"]);
    let (p, r) = (&dry["plan"], &real["plan"]);
    // The same plan, and the same breakdown of files.
    assert_eq!(p, r, "{what}: the plans differ\n{dry}\n{real}");
    // What the real run did is what the plan said.
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap();
    assert_eq!(
        n(p, "bytes_to_copy"),
        n(&real, "bytes_copied"),
        "{what}: copied locally\n{dry}\n{real}"
    );
    assert_eq!(
        n(p, "bytes_to_reuse"),
        n(&real, "bytes_reused"),
        "{what}: reused\n{dry}\n{real}"
    );
    assert_eq!(
        n(p, "blobs_to_fetch"),
        n(&real, "blocks_decoded"),
        "{what}: blocks fetched\n{dry}\n{real}"
    );
    assert_eq!(
        n(p, "packs_to_read"),
        n(&real, "packs_read"),
        "{what}: packs\n{dry}\n{real}"
    );
    // Every byte placed is written, copied or a hole; a block's zero pages, left as holes,
    // count with its data (the plan cannot see them), holes are the blocks all of zeros.
    assert_eq!(
        n(p, "bytes_to_write") + n(p, "bytes_to_copy") + n(p, "bytes_to_reuse"),
        n(&real, "bytes_written"),
        "{what}: bytes written\n{dry}\n{real}"
    );
    assert_eq!(
        n(p, "bytes_holes"),
        n(&real, "bytes_holes"),
        "{what}: holes\n{dry}\n{real}"
    );
    assert_eq!(n(&real, "errors"), 0, "{real}");
}

/// The same block in two files: a fresh target, a target with both files gone, a target with
/// one of them, a target where the two are one file (hard-linked) that the snapshot keeps
/// apart. The dry run said "copy 2 MiB locally" where the real run wrote the second use
/// from the fetched block and counted nothing as copied.
#[test]
fn a_dry_run_counts_duplicated_blocks_as_the_real_run_does() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    let big = random_bytes(7, 2 << 20);
    fs::write(src.join("a"), &big).unwrap();
    fs::write(src.join("d/b"), &big).unwrap();
    fs::write(src.join("c"), b"hello").unwrap();
    fs::write(src.join("d/e"), b"hello").unwrap();
    fs::write(src.join("other"), random_bytes(8, 100_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let here = target.join(src.strip_prefix("/").unwrap());

    dry_then_real(&e, &target, "a fresh target");

    // Both files with the block gone (and one other): the block is fetched again once.
    fs::remove_file(here.join("a")).unwrap();
    fs::remove_file(here.join("d/b")).unwrap();
    fs::remove_file(here.join("other")).unwrap();
    dry_then_real(&e, &target, "the duplicated block gone from the target");

    // The block still in one file, the other gone: it is copied from there.
    fs::remove_file(here.join("d/b")).unwrap();
    dry_then_real(
        &e,
        &target,
        "the duplicated block in one file of the target",
    );

    // Two files of the snapshot that the target has as one (a hard link), split, whether
    // their size and mtime are trusted or they are hashed (while content moves, in the real
    // run: one name was replaced before the other was hashed, which was then kept, where the
    // dry run replaced both).
    for touched in [false, true] {
        for (x, y) in [("c", "d/e"), ("a", "d/b")] {
            fs::remove_file(here.join(y)).unwrap();
            fs::hard_link(here.join(x), here.join(y)).unwrap();
            if touched {
                let f = fs::File::options().write(true).open(here.join(x)).unwrap();
                f.set_modified(std::time::SystemTime::now()).unwrap();
            }
        }
        dry_then_real(&e, &target, &format!("a joined pair (touched: {touched})"));
        use std::os::unix::fs::MetadataExt;
        let ino = |p: &str| fs::metadata(here.join(p)).unwrap().ino();
        assert_ne!(ino("c"), ino("d/e"));
        assert_ne!(ino("a"), ino("d/b"));
        assert_eq!(fs::read(here.join("d/b")).unwrap(), big);
    }
}

/// Blocks of data holding zero pages, and blocks all of zeros: the real run counted the zero
/// pages inside blocks as holes and left them out of "bytes written", where the dry run (which
/// cannot see inside a block before it is fetched) counts as holes only the blocks all of
/// zeros. Both count so now; the zero pages stay holes on disk all the same.
#[test]
fn a_dry_run_counts_zero_pages_inside_blocks_as_the_real_run_does() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    // Data, 192 KiB of zeros inside a block, data, 9 MiB of zeros (whole zero blocks), data.
    let mut content = random_bytes(11, 300_000);
    content.resize(content.len() + (192 << 10), 0);
    content.extend(random_bytes(12, 300_000));
    content.resize(content.len() + (9 << 20), 0);
    content.extend(random_bytes(13, 100_000));
    fs::write(src.join("sparse"), &content).unwrap();
    fs::write(src.join("plain"), random_bytes(14, 50_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let here = target.join(src.strip_prefix("/").unwrap());
    let file = here.join("sparse");

    dry_then_real(&e, &target, "zero pages in blocks, a fresh target");
    assert_eq!(fs::read(&file).unwrap(), content);
    // The zero pages inside the data blocks are holes on disk all the same.
    let allocated = fs::metadata(&file).unwrap().blocks() * 512;
    assert!(allocated < 860_000, "{allocated} bytes allocated");

    fs::remove_file(&file).unwrap();
    dry_then_real(&e, &target, "zero pages in blocks, the file gone");
    assert_eq!(fs::read(&file).unwrap(), content);

    // Patched in place: a data block with zero pages and a block of zeros damaged.
    let f = fs::File::options().write(true).open(&file).unwrap();
    f.write_all_at(b"damage", 310_000).unwrap();
    f.write_all_at(b"damage", 5 << 20).unwrap();
    drop(f);
    let ino = fs::metadata(&file).unwrap().ino();
    dry_then_real(&e, &target, "zero pages in blocks, patched in place");
    assert_eq!(fs::read(&file).unwrap(), content);
    assert_eq!(fs::metadata(&file).unwrap().ino(), ino);
}

/// A name already linked to a file that is patched in place stays so: `-v` lists nothing for
/// it, as it lists nothing for a file left as it is (it said "restore hardlink" when the file
/// was hashed while content moved). The summary counts it among the hard links in place, as
/// it counts files found right among the files.
#[test]
fn a_hard_link_to_a_file_patched_in_place_is_listed_as_left() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("x")).unwrap();
    fs::create_dir_all(src.join("y")).unwrap();
    fs::write(src.join("x/h1"), random_bytes(9, 300_000)).unwrap();
    fs::hard_link(src.join("x/h1"), src.join("y/h2")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "--target", t]);
    let here = target.join(src.strip_prefix("/").unwrap());
    let damage = || {
        let f = fs::File::options()
            .write(true)
            .open(here.join("x/h1"))
            .unwrap();
        f.write_all_at(b"XXXX", 1000).unwrap();
    };
    let ino = |p: &str| fs::metadata(here.join(p)).unwrap().ino();
    let before = ino("x/h1");
    damage();
    let dry = e.ok(&["restore", "latest", "--target", t, "--dry-run", "-v"]);
    assert!(dry.contains("would update file"), "{dry}");
    assert!(dry.contains("leave hardlink"), "{dry}");
    let real = e.json(&["restore", "latest", "--target", t, "--json"]);
    assert_eq!(real["hardlinks"], 1, "{real}");
    damage();
    let real = e.ok(&["restore", "latest", "--target", t, "-v"]);
    assert!(real.contains("update file"), "{real}");
    assert!(!real.contains("hardlink"), "{real}");
    assert!(real.contains(" 1 hard link,"), "{real}");
    assert_eq!(ino("x/h1"), before);
    assert_eq!(ino("y/h2"), before);
    assert_eq!(
        fs::read(here.join("y/h2")).unwrap(),
        fs::read(src.join("x/h1")).unwrap()
    );
}

/// A block whose first write fails (its file cannot be made: its folder is immutable) and
/// whose second use lands: that use is the block's first write, not a local copy (it was
/// counted as copied, with nothing it was copied from).
#[test]
fn a_use_after_a_failed_first_write_is_counted_as_written() {
    use std::process::Command;
    if !arca_testkit::is_root() {
        eprintln!("needs root for chattr +i: skipped");
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d1")).unwrap();
    fs::create_dir_all(src.join("d2")).unwrap();
    // Below the smallest chunk: one block, in both files.
    let block = random_bytes(21, 200_000);
    fs::write(src.join("d1/a"), &block).unwrap();
    fs::write(src.join("d2/b"), &block).unwrap();
    let dir_time = fs::metadata(src.join("d1")).unwrap().modified().unwrap();
    fs::File::open(src.join("d2"))
        .unwrap()
        .set_modified(dir_time)
        .unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "--target", t]);
    let here = target.join(src.strip_prefix("/").unwrap());
    fs::remove_file(here.join("d1/a")).unwrap();
    fs::remove_file(here.join("d2/b")).unwrap();
    // The folders as the snapshot has them again, so that only the files are restored.
    for d in ["d1", "d2"] {
        fs::File::open(here.join(d))
            .unwrap()
            .set_modified(dir_time)
            .unwrap();
    }
    let locked = here.join("d1");
    let pinned = Command::new("chattr")
        .arg("+i")
        .arg(&locked)
        .status()
        .is_ok_and(|s| s.success());
    if !pinned {
        eprintln!("chattr +i refused here: skipped");
        return;
    }
    let o = e.run(&["restore", "latest", "--target", t, "--json"]);
    let _ = Command::new("chattr").arg("-i").arg(&locked).status();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&here.join("d1/a").display().to_string()),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let real: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(real["blocks_decoded"], 1, "{real}");
    assert_eq!(real["bytes_copied"], 0, "{real}");
    assert_eq!(real["blocks_copied"], 0, "{real}");
    assert_eq!(real["bytes_written"], block.len() as u64, "{real}");
    assert_eq!(fs::read(here.join("d2/b")).unwrap(), block);
    assert!(!here.join("d1/a").exists());
}

/// A right hard-link group `a`, `b` whose inode has a further name `c` that the snapshot
/// lacks: `restore --delete` deletes `c` and keeps the group's inode as it is, fixing its
/// metadata, fetching nothing (it split the group off and fetched its content again, for a
/// name it was about to delete). Whether the file is trusted by size and mtime or hashed.
#[test]
fn delete_keeps_a_group_whose_extra_name_it_deletes() {
    delete_keeps_the_group(31, |here| {
        fs::hard_link(here.join("a"), here.join("c")).unwrap();
        "c"
    });
}

/// As above, the further name `x/y/c` inside a folder `x` the snapshot lacks: `--delete`
/// removes the folder, so that name does not count either, and the group is kept as it is
/// (it was split off and its content fetched again, for a name inside a folder about to go).
#[test]
fn delete_keeps_a_group_whose_extra_name_is_in_a_folder_it_deletes() {
    delete_keeps_the_group(32, |here| {
        fs::create_dir_all(here.join("x/y")).unwrap();
        fs::write(here.join("x/other"), b"not a link").unwrap();
        fs::hard_link(here.join("a"), here.join("x/y/c")).unwrap();
        "x"
    });
}

/// A snapshot of the group `a`, `b` (mode 0640) restored; then, for each `--overwrite` mode,
/// `extra` gives the restored inode a further name the snapshot lacks (returning the entry
/// `--delete` is to remove for it), the mode is changed, and `restore --delete` must fetch
/// and write nothing, plan as its dry run did, remove that entry and keep `a`, `b` on their
/// inode with the snapshot's metadata.
fn delete_keeps_the_group(seed: u64, extra: impl Fn(&Path) -> &'static str) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let content = random_bytes(seed, 300_000);
    fs::write(src.join("a"), &content).unwrap();
    fs::set_permissions(src.join("a"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::hard_link(src.join("a"), src.join("b")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "--target", t]);
    let here = target.join(src.strip_prefix("/").unwrap());
    let ino = fs::metadata(here.join("a")).unwrap().ino();
    let mtime = fs::metadata(src.join("a")).unwrap().mtime();
    for overwrite in ["if-changed", "always"] {
        let gone = extra(&here);
        fs::set_permissions(here.join("a"), fs::Permissions::from_mode(0o600)).unwrap();
        let args = [
            "restore",
            "latest",
            "--target",
            t,
            "--delete",
            "--overwrite",
            overwrite,
            "--json",
        ];
        let dry = e.json(&[&args[..], &["--dry-run"]].concat());
        assert_eq!(dry["plan"]["blobs_to_fetch"], 0, "{overwrite}: {dry}");
        assert_eq!(dry["plan"]["deletes"], 1, "{overwrite}: {dry}");
        assert_eq!(dry["plan"]["files_metadata"], 1, "{overwrite}: {dry}");
        let real = e.json(&args);
        assert_eq!(real["errors"], 0, "{overwrite}: {real}");
        assert_eq!(real["fetched_bytes"], 0, "{overwrite}: {real}");
        assert_eq!(real["bytes_written"], 0, "{overwrite}: {real}");
        assert_eq!(real["plan"]["deletes"], 1, "{overwrite}: {real}");
        assert_eq!(real["plan"], dry["plan"], "{overwrite}\n{dry}\n{real}");
        assert!(!here.join(gone).exists(), "{overwrite}");
        for name in ["a", "b"] {
            let m = fs::metadata(here.join(name)).unwrap();
            assert_eq!(m.ino(), ino, "{overwrite}: {name} split off");
            assert_eq!(m.nlink(), 2, "{overwrite}: {name}");
            assert_eq!(m.mode() & 0o7777, 0o640, "{overwrite}: {name}");
            assert_eq!(m.mtime(), mtime, "{overwrite}: {name}");
            assert_eq!(fs::read(here.join(name)).unwrap(), content, "{overwrite}");
        }
    }
}

/// A snapshot without file data (an empty folder, a symlink) restored into a new target has
/// nothing to fetch, but the target did not hold it already: the restore made it. It said
/// "the target already holds the snapshot's content"; that is said once it is so.
#[test]
fn a_restore_that_makes_only_folders_and_links_does_not_say_they_were_there() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(src.join("empty")).unwrap();
    std::os::unix::fs::symlink("/nowhere", src.join("link")).unwrap();
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let t = e.path("t");
    let restore = || e.ok(&["restore", "latest", "--target", t.to_str().unwrap()]);
    let out = restore();
    assert!(out.contains("nothing to fetch"), "{out}");
    assert!(!out.contains("already holds"), "{out}");
    let made = t.join(src.strip_prefix("/").unwrap());
    assert!(made.join("empty").is_dir());
    assert!(made.join("link").is_symlink());
    let out = restore();
    assert!(
        out.contains("nothing to fetch: the target already holds"),
        "{out}"
    );
    // Only a symlink missing: made again, not said to be there.
    fs::remove_file(made.join("link")).unwrap();
    let out = restore();
    assert!(!out.contains("already holds"), "{out}");
    assert!(made.join("link").is_symlink());
}
