//! Hard links through restore: groups of symlinks and FIFOs, and groups whose target copy
//! shares an inode with a name outside the restore.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::{Env, stderr};

fn restored(target: &Path, src: &Path) -> PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

/// Linux hard-links symlinks and FIFOs too (`ln sym1 sym2`). Every name is restored as one
/// inode; the later names were refused ("sym1 is a symlink, left as it was"), exit 3, on
/// every rerun, while the dry run said they would be made.
#[test]
fn hard_linked_symlinks_and_fifos_keep_every_name() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    std::os::unix::fs::symlink("somewhere", src.join("sym1")).unwrap();
    fs::hard_link(src.join("sym1"), src.join("sym2")).unwrap();
    nix::unistd::mkfifo(
        &src.join("fifo1"),
        nix::sys::stat::Mode::from_bits_truncate(0o640),
    )
    .unwrap();
    fs::hard_link(src.join("fifo1"), src.join("fifo2")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    for round in ["fresh", "rerun"] {
        let o = e.run(&["restore", "latest", "-t", target.to_str().unwrap()]);
        assert!(o.status.success(), "{round}: {}", stderr(&o));
        let back = restored(&target, &src);
        for (a, b) in [("sym1", "sym2"), ("fifo1", "fifo2")] {
            let (ma, mb) = (
                fs::symlink_metadata(back.join(a)).unwrap(),
                fs::symlink_metadata(back.join(b)).unwrap(),
            );
            assert_eq!(ma.ino(), mb.ino(), "{round}: {a} {b}");
            assert_eq!(ma.nlink(), 2, "{round}: {a}");
        }
        assert_eq!(
            fs::read_link(back.join("sym2")).unwrap(),
            Path::new("somewhere")
        );
        let m = fs::symlink_metadata(back.join("fifo2")).unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()));
        assert_eq!(m.mode() & 0o7777, 0o640);
    }
}

/// A group {a, b} whose `b` the target holds as a separate copy, while `a` has another name
/// outside the restore: `a`'s link count equals the group's size, yet one of its names is not
/// the restore's. Fixing `a`'s metadata in place changed the outside file's mode and linked it
/// into the group (hunt 15). `a` is replaced; the outside file stays as it was.
#[test]
fn a_split_group_does_not_reach_a_name_outside_the_restore() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"data").unwrap();
    fs::set_permissions(src.join("a"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::hard_link(src.join("a"), src.join("b")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    let back = restored(&target, &src);
    // The group split in the target, and `a` linked to a name outside the restored tree.
    fs::remove_file(back.join("b")).unwrap();
    fs::copy(back.join("a"), back.join("b")).unwrap();
    let outside = target.join("other");
    fs::create_dir_all(&outside).unwrap();
    fs::hard_link(back.join("a"), outside.join("z")).unwrap();
    fs::set_permissions(back.join("a"), fs::Permissions::from_mode(0o600)).unwrap();
    let o = e.run(&["restore", "latest", "-t", target.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let z = fs::metadata(outside.join("z")).unwrap();
    assert_eq!(z.mode() & 0o7777, 0o600, "the outside name's mode changed");
    assert_eq!(
        z.nlink(),
        1,
        "the outside name is still linked into the group"
    );
    let (a, b) = (
        fs::metadata(back.join("a")).unwrap(),
        fs::metadata(back.join("b")).unwrap(),
    );
    assert_eq!(a.ino(), b.ino());
    assert_eq!(a.nlink(), 2);
    assert_eq!(a.mode() & 0o7777, 0o644);
    assert_eq!(fs::read(back.join("b")).unwrap(), b"data");
}

/// A damaged file whose every name is its group's in the restore is patched in place, all
/// names with it: only its wrong blocks are fetched. It was written anew (every block
/// fetched), and `--reuse-from` the target itself promised its blocks, then found them gone
/// (hunt 16).
#[test]
fn a_damaged_link_group_is_patched_in_place() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(src.join("a"), &data).unwrap();
    fs::hard_link(src.join("a"), src.join("sub/b")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    let back = restored(&target, &src);
    let ino = fs::metadata(back.join("a")).unwrap().ino();
    let mut damaged = data.clone();
    damaged[1000] ^= 0xff;
    fs::write(back.join("a"), &damaged).unwrap();
    // The further name, already this inode, is left, not listed as a link to make.
    let t = target.to_str().unwrap();
    let listed = e.ok(&["restore", "latest", "-t", t, "--dry-run", "-v"]);
    assert!(listed.contains("would update file"), "{listed}");
    assert!(listed.contains("leave hardlink"), "{listed}");
    assert!(!listed.contains("restore hardlink"), "{listed}");
    let o = e.run(&[
        "restore",
        "--json",
        "latest",
        "-t",
        target.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for n in ["a", "sub/b"] {
        let m = fs::metadata(back.join(n)).unwrap();
        assert_eq!(m.ino(), ino, "{n} was written anew");
        assert_eq!(fs::read(back.join(n)).unwrap(), data, "{n}");
    }
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let fetched = summary["fetched_bytes"].as_u64().unwrap();
    assert!(
        fetched < data.len() as u64 / 2,
        "fetched {fetched}: {summary}"
    );
}

/// A group {d1/f, d2/f} whose target has `d2` as a symlink to `d1`, and `d1/f` also linked
/// from a file outside the restore with a wrong mode: `d2/f`, reached through the symlink
/// the restore replaces, is `d1/f` itself and not a name the restore has there. Counting it
/// let the mode be fixed in place, reaching the outside file, and left `d2/f` out of the
/// replaced folder (exit 0, hunt 18).
#[test]
fn a_name_reached_through_a_replaced_symlink_is_not_the_restores() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d1")).unwrap();
    fs::create_dir_all(src.join("d2")).unwrap();
    fs::write(src.join("d1/f"), b"data").unwrap();
    fs::set_permissions(src.join("d1/f"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::hard_link(src.join("d1/f"), src.join("d2/f")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    let back = restored(&target, &src);
    fs::remove_dir_all(back.join("d2")).unwrap();
    std::os::unix::fs::symlink("d1", back.join("d2")).unwrap();
    let outside = target.join("other");
    fs::create_dir_all(&outside).unwrap();
    fs::hard_link(back.join("d1/f"), outside.join("z")).unwrap();
    fs::set_permissions(back.join("d1/f"), fs::Permissions::from_mode(0o600)).unwrap();
    let o = e.run(&["restore", "latest", "-t", target.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let z = fs::metadata(outside.join("z")).unwrap();
    assert_eq!(z.mode() & 0o7777, 0o600, "the outside file's mode changed");
    assert_eq!(
        z.nlink(),
        1,
        "the outside file is still linked into the group"
    );
    assert!(fs::symlink_metadata(back.join("d2")).unwrap().is_dir());
    let (a, b) = (
        fs::metadata(back.join("d1/f")).unwrap(),
        fs::metadata(back.join("d2/f")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink(), a.mode() & 0o7777), (b.ino(), 2, 0o644));
}

/// Files the snapshot keeps apart that the target holds as one inode (or linked to a file
/// outside the target) are split, even when content and metadata are right: kept, writing
/// one changed the other (hunt 25; exit 0, "nothing to fetch", --verify passed). A group
/// restored in part stays one inode with its names the restore leaves out.
#[test]
fn files_the_snapshot_keeps_apart_are_split_in_the_target() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d1")).unwrap();
    fs::create_dir_all(src.join("d2")).unwrap();
    fs::write(src.join("s1"), "same\n").unwrap();
    fs::write(src.join("s2"), "same\n").unwrap();
    fs::write(src.join("plain"), "plain\n").unwrap();
    fs::write(src.join("d1/a"), "group\n").unwrap();
    fs::hard_link(src.join("d1/a"), src.join("d2/b")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "-t", t]);
    let back = restored(&target, &src);
    let outside = e.path("outside");
    let mtime = |p: &Path| fs::metadata(p).unwrap().modified().unwrap();
    let set_mtime = |p: &Path, t| {
        fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    };
    let (t1, tp) = (mtime(&back.join("s1")), mtime(&back.join("plain")));
    fs::remove_file(back.join("s2")).unwrap();
    fs::hard_link(back.join("s1"), back.join("s2")).unwrap();
    fs::hard_link(back.join("plain"), &outside).unwrap();
    set_mtime(&back.join("s1"), t1);
    set_mtime(&back.join("plain"), tp);
    for overwrite in ["if-changed", "always"] {
        e.ok(&["restore", "-q", "latest", "-t", t, "--overwrite", overwrite]);
        let ino = |n: &str| fs::metadata(back.join(n)).unwrap().ino();
        assert_ne!(ino("s1"), ino("s2"), "{overwrite}");
        assert_eq!(
            fs::metadata(back.join("plain")).unwrap().nlink(),
            1,
            "{overwrite}"
        );
        assert_eq!(fs::read(back.join("s2")).unwrap(), b"same\n");
        assert_eq!(fs::read(back.join("plain")).unwrap(), b"plain\n");
        fs::write(back.join("s1"), "edited\n").unwrap();
        assert_eq!(fs::read(back.join("s2")).unwrap(), b"same\n", "{overwrite}");
        fs::write(&outside, "outside\n").unwrap();
        assert_eq!(
            fs::read(back.join("plain")).unwrap(),
            b"plain\n",
            "{overwrite}"
        );
        // Joined again for the next round.
        fs::remove_file(back.join("s2")).unwrap();
        fs::write(back.join("s1"), "same\n").unwrap();
        set_mtime(&back.join("s1"), t1);
        fs::hard_link(back.join("s1"), back.join("s2")).unwrap();
        fs::remove_file(&outside).unwrap();
        fs::hard_link(back.join("plain"), &outside).unwrap();
    }
    // Restoring one name of the group: its other name, left out, shares the inode rightly.
    let a = back.join("d1/a");
    let before = fs::metadata(&a).unwrap().ino();
    let include = format!("{}/d1", src.display());
    let o = e.ok(&["restore", "latest", "-t", t, "--include", &include]);
    assert!(o.contains("nothing to fetch"), "{o}");
    assert_eq!(fs::metadata(&a).unwrap().ino(), before);
    assert_eq!(fs::metadata(back.join("d2/b")).unwrap().ino(), before);
}

/// Two files the snapshot keeps apart, each with a name the restore leaves out, joined in
/// the target: each could take the other's name for its own left-out one, and both were
/// kept, one file (hunt 27). An inode that two groups' entries reach is split.
#[test]
fn files_with_left_out_names_joined_in_the_target_are_split() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d1")).unwrap();
    fs::create_dir_all(src.join("d2")).unwrap();
    fs::write(src.join("d1/a"), "same\n").unwrap();
    fs::write(src.join("d1/b"), "same\n").unwrap();
    fs::hard_link(src.join("d1/a"), src.join("d2/a2")).unwrap();
    fs::hard_link(src.join("d1/b"), src.join("d2/b2")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let t = target.to_str().unwrap();
    let include = format!("{}/d1", src.display());
    e.ok(&["restore", "-q", "latest", "-t", t, "--include", &include]);
    let back = restored(&target, &src);
    let mtime = fs::metadata(back.join("d1/b")).unwrap().modified().unwrap();
    join(&back.join("d1/a"), &back.join("d1/b"), mtime);
    for overwrite in ["if-changed", "always"] {
        e.ok(&[
            "restore",
            "-q",
            "latest",
            "-t",
            t,
            "--include",
            &include,
            "--overwrite",
            overwrite,
        ]);
        let ino = |n: &str| fs::metadata(back.join(n)).unwrap().ino();
        assert_ne!(ino("d1/a"), ino("d1/b"), "{overwrite}");
        fs::write(back.join("d1/a"), "edited\n").unwrap();
        assert_eq!(
            fs::read(back.join("d1/b")).unwrap(),
            b"same\n",
            "{overwrite}"
        );
        // Joined again for the next round.
        fs::write(back.join("d1/a"), "same\n").unwrap();
        join(&back.join("d1/a"), &back.join("d1/b"), mtime);
    }
}

/// Makes `second` another name of `first`, whose mtime becomes `mtime` (the snapshot's).
fn join(first: &Path, second: &Path, mtime: std::time::SystemTime) {
    fs::remove_file(second).unwrap();
    fs::hard_link(first, second).unwrap();
    fs::File::options()
        .write(true)
        .open(first)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

/// A restore with nothing to do counts the names already linked as the first one counted the
/// names it linked, as it counts files found right: it said "4 files (0 new, 0 updated, 4
/// unchanged), …, 0 hard links" where the first restore had said "6 files …, 2 hard links".
#[test]
fn a_rerun_counts_the_hard_links_already_in_place() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    for i in 1..=4 {
        fs::write(src.join(format!("f{i}")), format!("{i}")).unwrap();
    }
    fs::hard_link(src.join("f1"), src.join("d/l1")).unwrap();
    fs::hard_link(src.join("f2"), src.join("d/l2")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let t = e.path("target");
    let t = t.to_str().unwrap();
    let first = e.ok(&["restore", "latest", "-t", t]);
    assert!(
        first.contains(": 6 files (4 new, 0 updated, 0 unchanged)"),
        "{first}"
    );
    assert!(first.contains(" 2 hard links"), "{first}");
    let again = e.ok(&["restore", "latest", "-t", t]);
    assert!(
        again.contains(": 6 files (0 new, 0 updated, 4 unchanged)"),
        "{again}"
    );
    assert!(again.contains(" 2 hard links"), "{again}");
}

/// A hard-link group the target holds split (the further name a copy of its own) is joined
/// again, and the name linked over is listed as updated, not as new: the dry run and `-v` said
/// "restore hardlink", JSON "restored", for a name the target had. A name the target lacks
/// is still new.
#[test]
fn a_split_hard_link_is_listed_as_updated() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    fs::write(src.join("a"), b"linked data").unwrap();
    fs::hard_link(src.join("a"), src.join("sub/b")).unwrap();
    fs::hard_link(src.join("a"), src.join("sub/c")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    let t = target.to_str().unwrap();
    e.ok(&["restore", "-q", "latest", "-t", t]);
    let back = restored(&target, &src);
    // sub/b split off as a copy, sub/c gone.
    fs::remove_file(back.join("sub/b")).unwrap();
    fs::copy(back.join("a"), back.join("sub/b")).unwrap();
    fs::remove_file(back.join("sub/c")).unwrap();
    let (b, c) = (back.join("sub/b"), back.join("sub/c"));

    let listed = e.ok(&["restore", "latest", "-t", t, "--dry-run", "-v"]);
    let line = |verb: &str, p: &std::path::Path| format!("{verb} hardlink {}", p.display());
    assert!(listed.contains(&line("would update", &b)), "{listed}");
    assert!(listed.contains(&line("would restore", &c)), "{listed}");
    let o = e.run(&["restore", "--json", "-v", "latest", "-t", t]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let action = |p: &std::path::Path| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["item"] == p.to_str().unwrap())
            .map(|v| v["action"].as_str().unwrap().to_string())
    };
    assert_eq!(action(&b).as_deref(), Some("updated"));
    assert_eq!(action(&c).as_deref(), Some("restored"));
    let ino = fs::metadata(back.join("a")).unwrap().ino();
    for p in [&b, &c] {
        assert_eq!(fs::metadata(p).unwrap().ino(), ino, "{}", p.display());
    }
    assert_eq!(fs::metadata(back.join("a")).unwrap().nlink(), 3);
}

/// A group whose first name cannot be restored (a folder in its way): its other names are
/// not linked, and every listing says so, the dry run's and `--json -v` included (they said
/// "restore hardlink" for a name that was never made). A first name left as it is
/// (`--overwrite never`) gets its other names linked, and counted (the summary said "0 hard
/// links").
#[test]
fn the_names_of_a_group_whose_first_is_not_restored_are_listed_as_not_restored() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"data").unwrap();
    fs::hard_link(src.join("a"), src.join("b")).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let back = restored(&target, &src);
    fs::create_dir_all(back.join("a")).unwrap();
    let t = target.to_str().unwrap();
    for dry in [true, false] {
        let mut args = vec!["restore", "latest", "-t", t, "-v", "--json"];
        if dry {
            args.push("--dry-run");
        }
        let o = e.run(&args);
        assert_eq!(o.status.code(), Some(3), "dry {dry}: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let b = back.join("b");
        let line = out
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["item"] == b.to_str().unwrap())
            .unwrap_or_else(|| panic!("b not listed: {out}"));
        assert_eq!(line["action"], "blocked", "dry {dry}: {line}");
        assert!(!b.exists());
    }
    let err = stderr(&e.run(&["restore", "latest", "-t", t]));
    assert!(err.contains("not linked"), "{err}");

    fs::remove_dir(back.join("a")).unwrap();
    fs::write(back.join("a"), b"other").unwrap();
    let out = e.ok(&["restore", "latest", "-t", t, "--overwrite", "never"]);
    assert!(out.contains("1 hard link,"), "{out}");
    let (a, b) = (
        fs::metadata(back.join("a")).unwrap(),
        fs::metadata(back.join("b")).unwrap(),
    );
    assert_eq!(a.ino(), b.ino());
}
