//! Files that vanish or change while the backup reads them: warned about, the vanished one
//! skipped and the snapshot marked incomplete; the changed one stored as read; one replaced
//! by another file (saved by rename) stored as the new file, without a warning; a
//! hard-linked file whose first name goes away stored under its other names.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arca_backup::{BackupOptions, Hooks, Progress, Warning, WarningKind, backup};
use common::*;

#[test]
fn vanished_and_changed_files_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("stays"), b"stable content").unwrap();
    fs::write(src.join("vanishes"), b"about to be deleted").unwrap();
    // A second name, which waits for the first's content: read by this name when the first
    // one vanishes (all names were lost with the first: hunt 20).
    fs::hard_link(src.join("vanishes"), src.join("vanishes-link")).unwrap();
    fs::write(src.join("grows"), b"short").unwrap();
    fs::write(src.join("replaced"), b"the old version").unwrap();
    fs::write(src.join("rewritten"), b"0123456789").unwrap();
    fs::write(src.join("linked"), b"content that stays").unwrap();
    fs::write(src.join("chmodded"), b"content that stays too").unwrap();
    let repo = init(local(&tmp.path().join("repo")));
    let hook = Arc::new(|p: &Path| match p.file_name().and_then(|n| n.to_str()) {
        Some("vanishes") => fs::remove_file(p).unwrap(),
        Some("grows") => fs::write(p, b"much longer than it was when listed").unwrap(),
        // Same size, old mtime put back (`touch -r`, `rsync -t`): only ctime tells (hunt 13:
        // a mix of two versions was stored without a word).
        Some("rewritten") => {
            let mtime = fs::metadata(p).unwrap().modified().unwrap();
            fs::write(p, b"abcdefghij").unwrap();
            fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
        // Only its ctime moves, with its link count or mode: a name renamed over it (an
        // editor's save, a log rotated) or a link made; its content is as read (it was
        // warned of as changed, exit 3: hunt H17).
        Some("linked") => fs::hard_link(p, p.with_file_name("linked.too")).unwrap(),
        Some("chmodded") => fs::set_permissions(p, fs::Permissions::from_mode(0o600)).unwrap(),
        Some("replaced") => {
            // What an editor's save does: a new file renamed over the old one.
            let new = p.with_file_name("replaced.new");
            fs::write(&new, b"the new version, saved by rename").unwrap();
            fs::set_permissions(&new, fs::Permissions::from_mode(0o604)).unwrap();
            fs::rename(&new, p).unwrap();
        }
        _ => {}
    });
    let opts = BackupOptions {
        paths: vec![src.clone()],
        hooks: Hooks {
            before_read: Some(hook),
            ..Hooks::default()
        },
        ..BackupOptions::default()
    };
    let seen = Mutex::new(vec![]);
    let r = backup(&repo, &opts, &Progress::default(), &|w: &Warning| {
        seen.lock().unwrap().push(w.clone())
    })
    .unwrap();
    let kinds: Vec<(String, WarningKind)> = r
        .warnings
        .iter()
        .map(|w| {
            (
                w.path.file_name().unwrap().to_string_lossy().into_owned(),
                w.kind,
            )
        })
        .collect();
    assert!(
        kinds.contains(&("vanishes".into(), WarningKind::Vanished)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("grows".into(), WarningKind::ChangedWhileRead)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("rewritten".into(), WarningKind::ChangedWhileRead)),
        "{kinds:?}"
    );
    // It was skipped, with a warning, though a whole file stood there all along.
    assert!(!kinds.iter().any(|(n, _)| n == "replaced"), "{kinds:?}");
    for n in ["linked", "linked.too", "chmodded"] {
        assert!(!kinds.iter().any(|(k, _)| k == n), "{n}: {kinds:?}");
    }
    assert_eq!(
        seen.lock().unwrap().len(),
        r.warnings.len(),
        "observer saw every warning"
    );
    assert!(!r.snapshot.complete);
    assert_eq!(r.snapshot.summary.errors, 1, "the vanished name alone");
    assert!(
        !kinds.iter().any(|(n, _)| n == "vanishes-link"),
        "{kinds:?}"
    );
    // The vanished name is not among those processed (it was: 8 processed, 6 stored); the
    // link made during the backup is not either (its folder was listed before).
    let s = &r.snapshot.summary;
    assert_eq!(
        (
            s.total_files_processed,
            s.files_new + s.files_changed + s.files_unmodified
        ),
        (7, 7)
    );
    let target = tmp.path().join("t");
    do_restore(&repo, "latest", &target).unwrap();
    let out = restored(&target, &src);
    assert_eq!(fs::read(out.join("stays")).unwrap(), b"stable content");
    assert!(!out.join("vanishes").exists());
    assert_eq!(
        fs::read(out.join("vanishes-link")).unwrap(),
        b"about to be deleted"
    );
    assert_eq!(
        fs::read(out.join("grows")).unwrap(),
        b"much longer than it was when listed"
    );
    assert_eq!(
        fs::read(out.join("replaced")).unwrap(),
        b"the new version, saved by rename"
    );
    // Bytes processed are the bytes read, not the sizes listed before `grows` grew and
    // `replaced` was replaced (hunt 30).
    let stored: u64 = [
        "stays",
        "vanishes-link",
        "grows",
        "rewritten",
        "replaced",
        "linked",
        "chmodded",
    ]
    .iter()
    .map(|n| fs::metadata(out.join(n)).unwrap().len())
    .sum();
    assert_eq!(s.total_bytes_processed, stored);
    let mode = fs::metadata(out.join("replaced"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o604, "the new file's metadata");
}

/// The first name of a hard-linked file goes away just before it is read, in each way a
/// user's programs do it: deleted, renamed over by a new file, or its folder renamed. Its
/// other names, in another folder walked before or after the read, keep the file (they were
/// all skipped with it: hunt 20). A folder renamed is still the folder the walk listed,
/// held open, and the file is read in it; opened by path (no folder held open), it is gone.
#[test]
fn a_hard_linked_file_whose_first_name_goes_away_is_stored_under_the_others() {
    for how in [
        "delete",
        "rename-over",
        "move-folder",
        "move-folder-by-path",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir_all(src.join("a")).unwrap();
        fs::create_dir_all(src.join("b")).unwrap();
        fs::create_dir_all(src.join("c")).unwrap();
        let content: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        fs::write(src.join("a/f"), &content).unwrap();
        fs::hard_link(src.join("a/f"), src.join("a/g")).unwrap();
        fs::hard_link(src.join("a/f"), src.join("c/h")).unwrap();
        // Many files in b, so that c is walked while or after a/f is read.
        for i in 0..200 {
            fs::write(src.join(format!("b/{i}")), format!("{i}")).unwrap();
        }
        let repo = init(local(&tmp.path().join("repo")));
        let first = src.join("a/f");
        let hook = Arc::new(move |p: &Path| {
            if p != first {
                return;
            }
            match how {
                "delete" => fs::remove_file(p).unwrap(),
                "rename-over" => {
                    let new = p.with_file_name("f.new");
                    fs::write(&new, b"another file").unwrap();
                    fs::hard_link(&new, p.with_file_name("f.new2")).unwrap();
                    fs::rename(&new, p).unwrap();
                }
                _ => {
                    let dir = p.parent().unwrap();
                    fs::rename(dir, dir.with_file_name("a-moved")).unwrap();
                }
            }
        });
        let opts = BackupOptions {
            paths: vec![src.clone()],
            hooks: Hooks {
                before_read: Some(hook),
                lent_folders: (how == "move-folder-by-path").then_some(0),
                ..Hooks::default()
            },
            ..BackupOptions::default()
        };
        let r = backup(&repo, &opts, &Progress::default(), &|_: &Warning| {}).unwrap();
        let warned: Vec<String> = r
            .warnings
            .iter()
            .map(|w| w.path.strip_prefix(&src).unwrap().display().to_string())
            .collect();
        let target = tmp.path().join("t");
        do_restore(&repo, "latest", &target).unwrap();
        let out = restored(&target, &src);
        assert_eq!(fs::read(out.join("c/h")).unwrap(), content, "{how}");
        if how == "move-folder" {
            assert_eq!(warned, Vec::<String>::new());
            for name in ["a/f", "a/g"] {
                assert_eq!(fs::read(out.join(name)).unwrap(), content, "{name}");
            }
            assert!(r.snapshot.complete);
            continue;
        }
        assert!(!out.join("a/f").exists(), "{how}");
        if how == "move-folder-by-path" {
            // Gone with its folder, as the first name: warned once each.
            assert_eq!(warned, ["a/f", "a/g"], "{how}");
            assert!(!out.join("a/g").exists(), "{how}");
        } else {
            assert_eq!(warned, ["a/f"], "{how}");
            assert_eq!(fs::read(out.join("a/g")).unwrap(), content, "{how}");
            // Still one file with two names in the snapshot.
            let m = fs::metadata(out.join("a/g")).unwrap();
            use std::os::unix::fs::MetadataExt;
            assert_eq!(
                m.ino(),
                fs::metadata(out.join("c/h")).unwrap().ino(),
                "{how}"
            );
        }
        assert_eq!(r.snapshot.summary.errors, warned.len() as u64, "{how}");
        assert!(!r.snapshot.complete, "{how}");
    }
}

/// A name met after another name was removed (its ctime changed) starts a read of its own;
/// the names waiting on the first read keep waiting on it, and are read when its first name
/// is gone (one was dropped: hunt 23). One reader, kept busy while the first name goes, so
/// the walk meets `d2/c` after the removal.
#[test]
fn names_waiting_on_a_read_survive_a_second_read_of_their_file() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(src.join("d1")).unwrap();
    fs::create_dir_all(src.join("d2")).unwrap();
    // More files ahead of the link than the readers' queue holds: the walk waits on them.
    for i in 0..6 {
        fs::write(src.join(format!("d1/0{i}")), vec![i as u8; 100_000]).unwrap();
    }
    fs::write(src.join("d1/x_a"), b"hello").unwrap();
    fs::hard_link(src.join("d1/x_a"), src.join("d1/y_b")).unwrap();
    fs::hard_link(src.join("d1/x_a"), src.join("d2/c")).unwrap();
    let repo = init(local(&tmp.path().join("repo")));
    let first = src.join("d1/00");
    let gone = src.join("d1/x_a");
    let hook = Arc::new(move |p: &Path| {
        if p == first {
            fs::remove_file(&gone).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    });
    let opts = BackupOptions {
        paths: vec![src.clone()],
        read_concurrency: 1,
        hooks: Hooks {
            before_read: Some(hook),
            ..Hooks::default()
        },
        ..BackupOptions::default()
    };
    let r = backup(&repo, &opts, &Progress::default(), &|_: &Warning| {}).unwrap();
    let warned: Vec<String> = r
        .warnings
        .iter()
        .map(|w| w.path.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    assert_eq!(warned, ["d1/x_a"]);
    let target = tmp.path().join("t");
    do_restore(&repo, "latest", &target).unwrap();
    let out = restored(&target, &src);
    assert_eq!(fs::read(out.join("d1/y_b")).unwrap(), b"hello");
    assert_eq!(fs::read(out.join("d2/c")).unwrap(), b"hello");
}
