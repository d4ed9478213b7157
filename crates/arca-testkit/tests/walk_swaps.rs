//! Folders moved while the backup walks them: a folder above one not yet listed (or a file
//! not yet read) renamed away and replaced, by a symlink to a folder outside the tree or by
//! another folder. The walk and the readers, which reached entries by their paths, went
//! through the replacement and stored what lay there (outside the backed-up tree) under the
//! old name, without a word. A listed folder's entries are now looked at (and its files
//! opened) in the folder held open; folders below it are still reached by path.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::Path;
use std::sync::Arc;

use arca_backup::{BackupOptions, BackupReport, Hooks, Progress, Warning, WarningKind, backup};
use common::*;

/// Moves folder `d` away (to `d-moved`) and puts `outside` in its place: a symlink to it
/// (`how` = "symlink"), or the folder itself renamed there.
fn swap(d: &Path, outside: &Path, how: &str) {
    fs::rename(d, d.with_file_name("d-moved")).unwrap();
    match how {
        "symlink" => std::os::unix::fs::symlink(outside, d).unwrap(),
        _ => fs::rename(outside, d).unwrap(),
    }
}

/// Backs `src` up into `repo` with `hooks`.
fn back_up(repo: &arca_repo::Repository, src: &Path, hooks: Hooks) -> BackupReport {
    let opts = BackupOptions {
        paths: vec![src.to_path_buf()],
        hooks,
        ..BackupOptions::default()
    };
    backup(repo, &opts, &Progress::default(), &|_: &Warning| {}).unwrap()
}

/// The warnings' paths (below `src`) and kinds.
fn warned(r: &BackupReport, src: &Path) -> Vec<(String, WarningKind)> {
    r.warnings
        .iter()
        .map(|w| {
            let p = w.path.strip_prefix(src).unwrap().display().to_string();
            (p, w.kind)
        })
        .collect()
}

#[test]
fn a_folder_reached_through_a_replaced_folder_above_it_is_not_stored_from_elsewhere() {
    for how in ["symlink", "folder"] {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir_all(src.join("d/sub")).unwrap();
        fs::write(src.join("d/sub/mine"), b"in the tree").unwrap();
        // Outside the backed-up tree.
        let outside = tmp.path().join("outside");
        fs::create_dir_all(outside.join("sub")).unwrap();
        fs::write(outside.join("sub/secret"), b"never in the tree").unwrap();
        let repo = init(local(&tmp.path().join("repo")));
        let (sub, d) = (src.join("d/sub"), src.join("d"));
        let hook = Arc::new(move |p: &Path| {
            if p == sub {
                swap(&d, &outside, how);
            }
        });
        let hooks = Hooks {
            before_list: Some(hook),
            ..Hooks::default()
        };
        let r = back_up(&repo, &src, hooks);
        let warned = warned(&r, &src);
        assert!(
            warned.contains(&("d/sub".into(), WarningKind::Vanished)),
            "{how}: {warned:?}"
        );
        assert!(
            r.warnings.iter().any(|w| w
                .message
                .contains("replaced during backup (a folder above it was moved); stored empty")),
            "{how}: {:?}",
            r.warnings
        );
        assert!(!r.snapshot.complete, "{how}");
        let target = tmp.path().join("t");
        do_restore(&repo, "latest", &target).unwrap();
        let out = restored(&target, &src);
        assert!(
            !out.join("d/sub/secret").exists(),
            "{how}: stored from elsewhere"
        );
        assert!(out.join("d/sub").is_dir(), "{how}");
        assert_eq!(fs::read_dir(out.join("d/sub")).unwrap().count(), 0, "{how}");
    }
}

/// The folder itself replaced by another folder of the same parent (renamed over it, as a
/// program swapping in a new version does) is still listed: what it holds was at that path.
#[test]
fn a_folder_renamed_over_by_a_sibling_is_stored_as_the_sibling() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(src.join("d/sub")).unwrap();
    fs::create_dir_all(src.join("d/zz-new")).unwrap();
    fs::write(src.join("d/sub/old"), b"old").unwrap();
    fs::write(src.join("d/zz-new/new"), b"new").unwrap();
    let repo = init(local(&tmp.path().join("repo")));
    let sub = src.join("d/sub");
    let new = src.join("d/zz-new");
    let hook = Arc::new(move |p: &Path| {
        if p == sub {
            fs::remove_dir_all(&sub).unwrap();
            fs::rename(&new, &sub).unwrap();
        }
    });
    let hooks = Hooks {
        before_list: Some(hook),
        ..Hooks::default()
    };
    let r = back_up(&repo, &src, hooks);
    assert!(
        !r.warnings
            .iter()
            .any(|w| w.message.contains("a folder above it was moved")),
        "{:?}",
        r.warnings
    );
    let target = tmp.path().join("t");
    do_restore(&repo, "latest", &target).unwrap();
    let out = restored(&target, &src);
    assert_eq!(fs::read(out.join("d/sub/new")).unwrap(), b"new");
}

/// The same for a file: its folder renamed away and replaced just before the file is read.
/// The file then found by its path, from outside the tree, was stored under its name as if
/// saved there by rename (a new file in the same folder still is). Opened in the folder
/// listed, held open, it is the file listed, stored; opened by its path (past the folders
/// held open at once, here none), it is skipped with a warning.
#[test]
fn a_file_reached_through_a_replaced_folder_is_not_stored_from_elsewhere() {
    for (how, lent) in [
        ("symlink", None),
        ("folder", None),
        ("symlink", Some(0)),
        ("folder", Some(0)),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir_all(src.join("d")).unwrap();
        fs::write(src.join("d/f"), b"in the tree").unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("f"), b"never in the tree").unwrap();
        let repo = init(local(&tmp.path().join("repo")));
        let (f, d) = (src.join("d/f"), src.join("d"));
        let hook = Arc::new(move |p: &Path| {
            if p == f {
                swap(&d, &outside, how);
            }
        });
        let hooks = Hooks {
            before_read: Some(hook),
            lent_folders: lent,
            ..Hooks::default()
        };
        let r = back_up(&repo, &src, hooks);
        let target = tmp.path().join("t");
        do_restore(&repo, "latest", &target).unwrap();
        let out = restored(&target, &src);
        if lent.is_none() {
            assert_eq!(warned(&r, &src), [], "{how}");
            assert!(r.snapshot.complete, "{how}");
            assert_eq!(fs::read(out.join("d/f")).unwrap(), b"in the tree", "{how}");
            continue;
        }
        assert_eq!(
            warned(&r, &src),
            [("d/f".into(), WarningKind::Vanished)],
            "{how}"
        );
        assert!(!r.snapshot.complete, "{how}");
        assert!(!out.join("d/f").exists(), "{how}: stored from elsewhere");
    }
}

/// The folder replaced after it was listed, while its entries are looked at: the entries
/// looked at since were the other folder's (same names), and its files were stored, from
/// outside the tree, under the listed folder's name without a word. The files are now the
/// listed folder's, opened in it; opened by their path (none held open), they are skipped
/// with a warning.
#[test]
fn files_looked_at_after_their_folder_was_replaced_are_not_stored_from_elsewhere() {
    for lent in [None, Some(0)] {
        files_looked_at_after_their_folder_was_replaced(lent);
    }
}

fn files_looked_at_after_their_folder_was_replaced(lent: Option<usize>) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/f"), b"in the tree").unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("f"), b"never in the tree").unwrap();
    let repo = init(local(&tmp.path().join("repo")));
    let d = src.join("d");
    let hook = Arc::new(move |p: &Path| {
        if p == d {
            swap(&d, &outside, "symlink");
        }
    });
    let hooks = Hooks {
        after_list: Some(hook),
        lent_folders: lent,
        ..Hooks::default()
    };
    let r = back_up(&repo, &src, hooks);
    let target = tmp.path().join("t");
    do_restore(&repo, "latest", &target).unwrap();
    let out = restored(&target, &src);
    if lent.is_none() {
        assert_eq!(warned(&r, &src), []);
        assert_eq!(fs::read(out.join("d/f")).unwrap(), b"in the tree");
        return;
    }
    assert_eq!(warned(&r, &src), [("d/f".into(), WarningKind::Vanished)]);
    assert!(!out.join("d/f").exists(), "stored from elsewhere");
}

/// The folder replaced after it was listed, while its entries are looked at: by path, the
/// walk took the other folder's entries of the same names, and stored their metadata (a
/// symlink's target, a file's or folder's mode) under the listed folder's names without a
/// word. Looked at in the folder listed, held open, they are its own.
#[test]
fn entries_looked_at_after_their_folder_was_replaced_keep_their_own_metadata() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let mode = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    for how in ["symlink", "folder"] {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        let d = src.join("d");
        fs::create_dir_all(d.join("sub")).unwrap();
        fs::write(d.join("f"), b"in the tree").unwrap();
        symlink("mine", d.join("l")).unwrap();
        mode(&d.join("f"), 0o640);
        mode(&d.join("sub"), 0o750);
        // Outside the backed-up tree: the same names, other metadata.
        let outside = tmp.path().join("outside");
        fs::create_dir_all(outside.join("sub")).unwrap();
        fs::write(outside.join("sub/secret"), b"never in the tree").unwrap();
        fs::write(outside.join("f"), b"never in the tree").unwrap();
        symlink("theirs", outside.join("l")).unwrap();
        mode(&outside.join("f"), 0o604);
        mode(&outside.join("sub"), 0o705);
        let repo = init(local(&tmp.path().join("repo")));
        let hook = Arc::new(move |p: &Path| {
            if p == d {
                swap(&d, &outside, how);
            }
        });
        let hooks = Hooks {
            after_list: Some(hook),
            ..Hooks::default()
        };
        let r = back_up(&repo, &src, hooks);
        let target = tmp.path().join("t");
        do_restore(&repo, "latest", &target).unwrap();
        let out = restored(&target, &src).join("d");
        assert_eq!(
            fs::read_link(out.join("l")).unwrap(),
            Path::new("mine"),
            "{how}: another folder's symlink stored"
        );
        let perm = |p: &Path| fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(perm(&out.join("sub")), 0o750, "{how}");
        assert_eq!(perm(&out.join("f")), 0o640, "{how}");
        assert_eq!(fs::read(out.join("f")).unwrap(), b"in the tree", "{how}");
        // The folder below is reached by its path, through the replacement: stored empty,
        // warned.
        assert!(!out.join("sub/secret").exists(), "{how}");
        assert_eq!(
            warned(&r, &src),
            [("d/sub".into(), WarningKind::Vanished)],
            "{how}"
        );
    }
}
