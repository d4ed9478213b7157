//! Folders moved while the backup walks them: a folder above one not yet listed (or a file
//! not yet read) renamed away and replaced, by a symlink to a folder outside the tree or by
//! another folder. The walk and the readers, which reach entries by their paths, went through
//! the replacement and stored what lay there (outside the backed-up tree) under the old
//! name, without a word.

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
/// saved there by rename (a new file in the same folder still is).
#[test]
fn a_file_reached_through_a_replaced_folder_is_not_stored_from_elsewhere() {
    for how in ["symlink", "folder"] {
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
            ..Hooks::default()
        };
        let r = back_up(&repo, &src, hooks);
        assert_eq!(
            warned(&r, &src),
            [("d/f".into(), WarningKind::Vanished)],
            "{how}"
        );
        assert!(!r.snapshot.complete, "{how}");
        let target = tmp.path().join("t");
        do_restore(&repo, "latest", &target).unwrap();
        let out = restored(&target, &src);
        assert!(!out.join("d/f").exists(), "{how}: stored from elsewhere");
    }
}

/// The folder replaced after it was listed, while its entries are looked at: the entries
/// looked at since are the other folder's (same names), and its files were stored, from
/// outside the tree, under the listed folder's name without a word.
#[test]
fn files_looked_at_after_their_folder_was_replaced_are_not_stored_from_elsewhere() {
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
        ..Hooks::default()
    };
    let r = back_up(&repo, &src, hooks);
    assert_eq!(warned(&r, &src), [("d/f".into(), WarningKind::Vanished)]);
    let target = tmp.path().join("t");
    do_restore(&repo, "latest", &target).unwrap();
    let out = restored(&target, &src);
    assert!(!out.join("d/f").exists(), "stored from elsewhere");
}
