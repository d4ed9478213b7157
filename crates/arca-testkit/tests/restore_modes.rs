//! Restore modes, each checked byte for byte and metadata for metadata against the source:
//! full, partial, no-op, metadata-only, the overwrite policies, --delete, --dry-run, subsets,
//! --reuse-from and --verify.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use arca_restore::{Action, Overwrite};
use arca_testkit::compare;
use common::*;

struct Setup {
    _tmp: tempfile::TempDir,
    src: PathBuf,
    target: PathBuf,
    expected: std::collections::BTreeMap<PathBuf, compare::Entry>,
    repo: arca_repo::Repository,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    with_duplicates(&src);
    let repo = init(local(&tmp.path().join("repo")));
    let b = do_backup(&repo, &src).unwrap();
    assert!(b.warnings.is_empty(), "{:?}", b.warnings);
    // Captured after the backup (which moves no atime): capturing reads directories, which
    // can move their atimes (relatime) after they were recorded.
    let expected = compare::snapshot(&src).unwrap();
    let target = tmp.path().join("target");
    Setup {
        src,
        target,
        expected,
        repo,
        _tmp: tmp,
    }
}

impl Setup {
    fn out(&self) -> PathBuf {
        restored(&self.target, &self.src)
    }
    /// The restored tree equals the source, bytes and metadata (atimes included).
    fn assert_exact(&self) {
        let out = self.out();
        let actual = compare::snapshot(&out).unwrap();
        let d = compare::diff(&self.expected, &self.src, &actual, &out);
        assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));
    }
    fn restore(
        &self,
        f: impl FnOnce(&mut arca_restore::RestoreOptions),
    ) -> (arca_restore::RestoreReport, Seen) {
        let (r, seen) = restore_with(&self.repo, "latest", &self.target, f);
        let r = r.expect("restore");
        assert!(r.issues.is_empty(), "{:?}", r.issues);
        (r, seen)
    }
    /// Non-empty restored files with one name each (hard-linked ones left out).
    fn restored_files(&self) -> Vec<PathBuf> {
        files(&self.out())
            .into_iter()
            .filter(|p| {
                fs::metadata(p)
                    .is_ok_and(|m| m.len() > 0 && std::os::unix::fs::MetadataExt::nlink(&m) == 1)
            })
            .collect()
    }
}

fn touch_now(p: &Path) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    arca_testkit::generate::set_times(
        p,
        (now.as_secs() as i64, 0),
        (now.as_secs() as i64, i64::from(now.subsec_nanos())),
    )
    .unwrap();
}

#[test]
fn full_partial_noop_and_metadata_only_restores() {
    let s = setup();
    let (full, _) = s.restore(|_| {});
    s.assert_exact();
    assert!(full.fetched_bytes > 0);
    assert_eq!(full.plan.files_new, full.plan.files);

    // No-op: nothing fetched, nothing hashed, every file trusted by size and mtime.
    let (noop, _) = s.restore(|_| {});
    s.assert_exact();
    assert_eq!((noop.fetched_bytes, noop.requests), (0, 0));
    assert_eq!(noop.files_hashed, 0);
    assert_eq!(noop.plan.files_new + noop.plan.files_updated, 0);
    assert_eq!(noop.plan.files_unchanged, noop.plan.files);
    assert_eq!((noop.plan.dirs_metadata, noop.plan.others_metadata), (0, 0));

    // Metadata-only: every mtime moved and a mode changed; contents right, so everything
    // is hashed and nothing fetched.
    let files = s.restored_files();
    for p in &files {
        touch_now(p);
    }
    fs::set_permissions(&files[0], fs::Permissions::from_mode(0o600)).unwrap();
    // A folder with the wrong mode is counted (and listed) among the metadata to fix.
    let dir = fs::read_dir(s.out())
        .unwrap()
        .map(|d| d.unwrap().path())
        .find(|p| p.symlink_metadata().unwrap().is_dir())
        .unwrap();
    let mode = dir.symlink_metadata().unwrap().mode() & 0o7777;
    fs::set_permissions(&dir, fs::Permissions::from_mode(mode ^ 0o050)).unwrap();
    // A dry run hashes them too (the scan sets wrong metadata through the file it hashed,
    // but not in a dry run): it reports the metadata to set and changes none of it.
    let stamp = |p: &Path| {
        let m = fs::symlink_metadata(p).unwrap();
        (m.mtime(), m.mtime_nsec(), m.mode())
    };
    let before: Vec<_> = files.iter().map(|p| stamp(p)).collect();
    let (dry, seen) = s.restore(|o| o.dry_run = true);
    assert_eq!(dry.files_hashed as usize, files.len());
    assert_eq!(dry.plan.files_metadata as usize, files.len());
    // (Listing the folders above moved their atimes too, which the restore sets back.)
    assert!(dry.plan.dirs_metadata >= 1, "{:?}", dry.plan);
    let planned = seen.planned.lock().unwrap().clone();
    assert!(
        planned.contains(&(dir.clone(), Action::Metadata, 0)),
        "{planned:?}"
    );
    assert_eq!(files.iter().map(|p| stamp(p)).collect::<Vec<_>>(), before);
    let (meta, _) = s.restore(|_| {});
    s.assert_exact();
    assert_eq!(meta.fetched_bytes, 0, "metadata-only restore fetched data");
    assert_eq!(meta.files_hashed as usize, files.len());
    assert_eq!(meta.plan.files_metadata, meta.files_hashed);
    // Hashed while content moved (there was none), and timed as such; the no-op hashed nothing.
    let hashing = |r: &arca_restore::RestoreReport| {
        r.phases
            .iter()
            .any(|(name, _)| *name == "hashing (during content)")
    };
    assert!(hashing(&meta) && !hashing(&noop), "{:?}", meta.phases);

    // Partial: a quarter of the files deleted, a quarter with their first byte flipped.
    let files = s.restored_files();
    let (mut deleted, mut damaged) = (0u64, vec![]);
    for (i, p) in files.iter().enumerate() {
        match i % 4 {
            0 => {
                deleted += fs::metadata(p).unwrap().len();
                fs::remove_file(p).unwrap();
            }
            1 => {
                arca_testkit::flip_byte(p, 0).unwrap();
                damaged.push(p.clone());
            }
            _ => {}
        }
    }
    let (part, _) = s.restore(|_| {});
    s.assert_exact();
    assert!(part.fetched_bytes > 0);
    assert!(
        part.fetched_bytes < full.fetched_bytes * 3 / 4,
        "partial restore fetched {} of {}",
        part.fetched_bytes,
        full.fetched_bytes
    );
    assert_eq!(part.plan.files_updated as usize, damaged.len());
    // A damaged file only needed its first block: far less than the file.
    assert!(part.plan.bytes_to_write < deleted + damaged.len() as u64 * (256 << 10));
    assert!(part.plan.bytes_in_place > 0);
    assert!(part.packs_read > 0);

    // Only one file damaged: its pack is first needed once hashing finds the damage, and is
    // counted as read (it was "from 0 packs").
    arca_testkit::flip_byte(&damaged[0], 0).unwrap();
    let (one, _) = s.restore(|_| {});
    s.assert_exact();
    assert!(one.fetched_bytes > 0 && one.requests > 0);
    assert!(
        one.packs_read > 0,
        "{} bytes from 0 packs",
        one.fetched_bytes
    );
}

#[test]
fn overwrite_policies() {
    let s = setup();
    s.restore(|_| {});
    let files = s.restored_files();
    let (a, b) = (&files[0], &files[1]);

    // always: every file hashed, nothing fetched when all is right.
    let (r, _) = s.restore(|o| o.overwrite = Overwrite::Always);
    assert_eq!(r.files_hashed, r.plan.files);
    assert_eq!(r.fetched_bytes, 0);
    s.assert_exact();

    // A changed file with a newer mtime survives if-newer and never; a missing file comes
    // back with both.
    let a_mode = fs::metadata(a).unwrap().permissions();
    fs::write(a, b"changed by the user").unwrap();
    fs::remove_file(b).unwrap();
    for mode in [Overwrite::IfNewer, Overwrite::Never] {
        s.restore(|o| o.overwrite = mode);
        assert_eq!(fs::read(a).unwrap(), b"changed by the user", "{mode:?}");
        assert!(b.exists(), "{mode:?}");
    }
    // With an mtime older than the snapshot's, if-newer replaces it; never still does not.
    arca_testkit::generate::set_times(a, (1_000_000, 0), (1_000_000, 0)).unwrap();
    s.restore(|o| o.overwrite = Overwrite::Never);
    assert_eq!(fs::read(a).unwrap(), b"changed by the user");
    s.restore(|o| o.overwrite = Overwrite::IfNewer);
    fs::set_permissions(a, a_mode).unwrap();
    s.assert_exact();

    // Same size and mtime but different bytes: if-changed trusts it (that is its contract),
    // --verify catches it, always repairs it.
    let m = fs::metadata(a).unwrap();
    arca_testkit::flip_byte(a, 0).unwrap();
    arca_testkit::generate::set_times(
        a,
        (
            std::os::unix::fs::MetadataExt::atime(&m),
            std::os::unix::fs::MetadataExt::atime_nsec(&m),
        ),
        (
            std::os::unix::fs::MetadataExt::mtime(&m),
            std::os::unix::fs::MetadataExt::mtime_nsec(&m),
        ),
    )
    .unwrap();
    let (r, _) = restore_with(&s.repo, "latest", &s.target, |o| o.verify = true);
    let r = r.unwrap();
    assert_eq!(r.issues.len(), 1, "{:?}", r.issues);
    assert!(
        r.issues[0].message.contains("verification failed"),
        "{:?}",
        r.issues
    );
    assert!(r.files_verified as usize >= files.len());
    let (r, _) = s.restore(|o| {
        o.overwrite = Overwrite::Always;
        o.verify = true;
    });
    assert!(r.fetched_bytes > 0);
    s.assert_exact();
}

#[test]
fn delete_removes_only_what_the_snapshot_lacks_and_dry_run_changes_nothing() {
    let s = setup();
    s.restore(|_| {});
    let out = s.out();
    fs::write(out.join("extra.txt"), b"not in the snapshot").unwrap();
    fs::create_dir_all(out.join("extra dir/deep")).unwrap();
    fs::write(out.join("extra dir/deep/x"), b"x").unwrap();
    fs::write(out.join("dups/keep.tmp"), b"excluded, so kept").unwrap();
    let missing = out.join("dups/f05");
    fs::remove_file(&missing).unwrap();
    // A folder (with a file inside) where the snapshot has a file: deleted, and said so.
    let blocked = s
        .restored_files()
        .into_iter()
        .find(|p| *p != missing)
        .unwrap();
    fs::remove_file(&blocked).unwrap();
    fs::create_dir_all(blocked.join("sub")).unwrap();
    fs::write(blocked.join("sub/y"), b"in the way").unwrap();

    // Dry run: reports the deletions and the restore, changes nothing (not even atimes).
    // The first capture reads directories, which moves atimes older than the mtime (relatime);
    // the second one sees the settled state.
    compare::snapshot(&out).unwrap();
    let before = compare::snapshot(&out).unwrap();
    let (r, seen) = s.restore(|o| {
        o.delete = true;
        o.dry_run = true;
        o.excludes = vec!["*.tmp".into()];
    });
    assert!(r.dry_run);
    // Nothing restored: the plan's counts say what would be.
    assert_eq!((r.files, r.dirs, r.others, r.bytes), (0, 0, 0, 0));
    let after = compare::snapshot(&out).unwrap();
    let strip_link_atimes = |m: &std::collections::BTreeMap<PathBuf, compare::Entry>| {
        // Reading a symlink moves its atime on Linux; nothing else may change.
        m.iter()
            .map(|(p, e)| {
                let mut e = e.clone();
                if e.kind == 'l' {
                    e.atime = (0, 0);
                }
                (p.clone(), e)
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let d = compare::diff(
        &strip_link_atimes(&before),
        &out,
        &strip_link_atimes(&after),
        &out,
    );
    assert!(
        d.is_empty(),
        "dry run changed the target:\n{}",
        d.join("\n")
    );
    let planned = seen.planned.lock().unwrap().clone();
    let deletes: Vec<_> = planned
        .iter()
        .filter(|p| p.1 == Action::Delete)
        .map(|p| p.0.clone())
        .collect();
    assert_eq!(deletes.len(), 3, "{deletes:?}");
    assert!(deletes.contains(&out.join("extra.txt")));
    assert!(deletes.contains(&out.join("extra dir")));
    assert!(deletes.contains(&blocked), "{deletes:?}");
    assert!(
        planned
            .iter()
            .any(|p| p.0 == missing && p.1 == Action::Restore && p.2 > 0)
    );
    assert_eq!(r.plan.deletes, 3);
    assert_eq!(r.plan.files_new, 2);
    assert!(r.plan.bytes_to_fetch > 0 && r.plan.blobs_to_fetch > 0);
    assert_eq!(r.fetched_bytes, 0);

    // The real thing.
    let (r, _) = s.restore(|o| {
        o.delete = true;
        o.excludes = vec!["*.tmp".into()];
    });
    assert!(!out.join("extra.txt").exists() && !out.join("extra dir").exists());
    assert!(fs::symlink_metadata(&blocked).unwrap().is_file());
    assert_eq!(r.plan.deletes, 3);
    assert!(out.join("dups/keep.tmp").exists());
    assert!(r.fetched_bytes > 0);
    // Removing it changes the directory's mtime, which the next restore puts right.
    fs::remove_file(out.join("dups/keep.tmp")).unwrap();
    s.restore(|_| {});
    s.assert_exact();

    // Above the backed-up folder (the target's own root, the folders leading to the source)
    // the target's other entries were never backed up: --delete leaves them alone.
    let beside_root = s.target.join("not-backed-up");
    fs::write(&beside_root, b"mine").unwrap();
    let beside_src = out.with_file_name("sibling-of-src");
    fs::write(&beside_src, b"mine too").unwrap();
    let (r, _) = s.restore(|o| o.delete = true);
    assert_eq!(r.plan.deletes, 0);
    assert!(beside_root.exists() && beside_src.exists());
}

#[test]
fn include_exclude_subsets_and_a_single_file() {
    let s = setup();
    let one = s.src.join("dups/b.bin");
    s.restore(|o| o.includes = vec![one.display().to_string()]);
    let got = files(&s.target);
    assert_eq!(got, vec![restored(&s.target, &one)]);
    assert_eq!(fs::read(&got[0]).unwrap(), fs::read(&one).unwrap());

    let t2 = s.target.with_file_name("target2");
    let (r, _) = restore_with(&s.repo, "latest", &t2, |o| {
        o.excludes = vec!["dups".into(), "*.log".into()];
    });
    assert!(r.unwrap().issues.is_empty());
    let out = restored(&t2, &s.src);
    assert!(!out.join("dups").exists());
    assert!(!out.join("dir/text.log").exists());
    assert!(out.join("dir/nested/random.bin").exists());
    assert!(out.join("small.txt").exists());
}

#[test]
fn reuse_from_takes_verified_blocks_from_another_tree() {
    let s = setup();
    // The original source is the other tree; one of its files was changed since the backup.
    let changed = s.src.join("dups/f03");
    let orig = fs::read(&changed).unwrap();
    let f = fs::OpenOptions::new().write(true).open(&changed).unwrap();
    f.write_all_at(b"CHANGED", 100).unwrap();
    drop(f);
    let (r, _) = s.restore(|o| o.reuse_from = vec![PathBuf::from("/")]);
    assert!(r.bytes_reused > 0 && r.blocks_reused > 0);
    // Only what the source no longer holds is fetched.
    assert!(r.fetched_bytes > 0);
    assert!(
        r.fetched_bytes < r.bytes / 4,
        "fetched {} for {}",
        r.fetched_bytes,
        r.bytes
    );
    let f = fs::OpenOptions::new().write(true).open(&changed).unwrap();
    f.write_all_at(&orig[100..107], 100).unwrap();
    drop(f);
    let m = fs::metadata(&changed).unwrap();
    let e = &s.expected[Path::new("dups/f03")];
    arca_testkit::generate::set_times(
        &changed,
        (std::os::unix::fs::MetadataExt::atime(&m), 0),
        e.mtime,
    )
    .unwrap();
    s.assert_exact();
}

/// Small files that end in zeros: their last writes stop before the end (zero runs become
/// holes), so the file's size must come from the snapshot, in a full restore and over
/// existing files that are longer, shorter or of the right size but wrong.
#[test]
fn small_files_ending_in_zeros_keep_their_size() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let mut tail = arca_testkit::random_bytes(11, 100);
    tail.resize(20_000, 0);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("zero-tail.bin", tail.clone()),
        ("all-zero.bin", vec![0; 12_288]),
        ("one-zero.bin", vec![0; 1]),
        ("longer-before.bin", tail.clone()),
        ("shorter-before.bin", tail.clone()),
        ("same-size-wrong.bin", tail.clone()),
        ("zeros-to-data.bin", arca_testkit::random_bytes(12, 8_000)),
    ];
    for (name, data) in &cases {
        fs::write(src.join(name), data).unwrap();
    }
    let repo = init(local(&tmp.path().join("repo")));
    do_backup(&repo, &src).unwrap();
    let expected = compare::snapshot(&src).unwrap();
    let target = tmp.path().join("target");
    let out = restored(&target, &src);
    // Metadata first: reading the files moves their atimes.
    let check = |what: &str| {
        let actual = compare::snapshot(&out).unwrap();
        let d = compare::diff(&expected, &src, &actual, &out);
        assert!(d.is_empty(), "{what}: restore differs:\n{}", d.join("\n"));
        for (name, data) in &cases {
            let got = fs::read(out.join(name)).unwrap();
            assert_eq!(got.len(), data.len(), "{what}: size of {name}");
            assert!(got == *data, "{what}: bytes of {name}");
        }
    };
    let (full, _) = restore_with(&repo, "latest", &target, |_| {});
    assert!(full.unwrap().issues.is_empty());
    check("full restore");

    // Over existing files: longer (random past the end), shorter, the right size with a
    // wrong tail, and all zeros where the snapshot has data. Every mtime moved, so each one
    // is hashed and patched.
    let mut longer = tail.clone();
    longer.extend(arca_testkit::random_bytes(13, 30_000));
    fs::write(out.join("longer-before.bin"), &longer).unwrap();
    fs::write(out.join("shorter-before.bin"), &tail[..50]).unwrap();
    let mut wrong = tail.clone();
    wrong[19_999] = 7;
    fs::write(out.join("same-size-wrong.bin"), &wrong).unwrap();
    fs::write(out.join("zeros-to-data.bin"), vec![0u8; 8_000]).unwrap();
    fs::write(
        out.join("all-zero.bin"),
        arca_testkit::random_bytes(14, 12_288),
    )
    .unwrap();
    for (name, _) in &cases {
        touch_now(&out.join(name));
    }
    let (partial, _) = restore_with(&repo, "latest", &target, |_| {});
    let partial = partial.unwrap();
    assert!(partial.issues.is_empty(), "{:?}", partial.issues);
    check("partial restore");
    assert!(partial.plan.files_updated >= 5, "{:?}", partial.plan);
}

/// The progress reaches its total, holes included: in a full restore (holes are not written)
/// and when patching (zero runs are written over wrong data).
#[test]
fn progress_reaches_its_total_with_holes() {
    use std::sync::atomic::Ordering;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let mut data = vec![0u8; 6 << 20];
    data.extend(arca_testkit::random_bytes(21, 200_000));
    fs::write(src.join("sparse.bin"), &data).unwrap();
    let repo = init(local(&tmp.path().join("repo")));
    do_backup(&repo, &src).unwrap();
    let (_, snap) = repo.find_snapshot("latest", &Default::default()).unwrap();
    let index = repo.load_index().unwrap();
    let target = tmp.path().join("target");
    let run = |at_least: u64| {
        let progress = arca_restore::Progress::default();
        let opts = arca_restore::RestoreOptions {
            target: target.clone(),
            ..Default::default()
        };
        let r = arca_restore::restore(&repo, &index, &snap, &opts, &progress, &Seen::default())
            .unwrap();
        assert!(r.issues.is_empty(), "{:?}", r.issues);
        let (done, total) = (
            progress.bytes.load(Ordering::Relaxed),
            progress.bytes_total.load(Ordering::Relaxed),
        );
        assert!(total >= at_least, "{total}");
        assert_eq!(done, total);
    };
    run(6 << 20);
    let out = restored(&target, &src).join("sparse.bin");
    assert_eq!(fs::read(&out).unwrap(), data);
    // The zeros overwritten with data (and the mtime moved): they are written back.
    let f = fs::OpenOptions::new().write(true).open(&out).unwrap();
    f.write_all_at(&arca_testkit::random_bytes(22, 1 << 20), 1 << 20)
        .unwrap();
    drop(f);
    touch_now(&out);
    run(1 << 20);
    assert_eq!(fs::read(&out).unwrap(), data);
}
