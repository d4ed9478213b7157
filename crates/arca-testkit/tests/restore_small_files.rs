//! Many small files a restore cannot trust are hashed in disk order, a batch of reads at a
//! time: every outcome (whole, one block wrong, shorter, longer, other names) must come out
//! as when files were hashed one by one, also with a low limit on open files.
//!
//! One test in its own binary: it lowers the process's open-file limit for a while, which
//! would hit tests running beside it.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use arca_testkit::compare;
use common::*;
use nix::sys::resource::{Resource, getrlimit, setrlimit};

fn touch_all(files: &[PathBuf]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    for p in files {
        arca_testkit::generate::set_times(
            p,
            (now.as_secs() as i64, 0),
            (now.as_secs() as i64, i64::from(now.subsec_nanos())),
        )
        .unwrap();
    }
}

fn assert_same(
    expected: &std::collections::BTreeMap<PathBuf, compare::Entry>,
    src: &Path,
    out: &Path,
) {
    let actual = compare::snapshot(out).unwrap();
    let d = compare::diff(expected, src, &actual, out);
    assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));
}

/// Restores `latest` into `target` with the open-file limit at `limit` for the restore's
/// duration; it must report no issue and leave `out` equal to the source.
fn restore_limited(
    repo: &arca_repo::Repository,
    target: &Path,
    limit: u64,
    (expected, src, out): (
        &std::collections::BTreeMap<PathBuf, compare::Entry>,
        &Path,
        &Path,
    ),
) -> arca_restore::RestoreReport {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, limit, hard).unwrap();
    let (r, seen) = restore_with(repo, "latest", target, |_| {});
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).unwrap();
    let r = r.unwrap();
    let issues = seen.issues.lock().unwrap();
    assert!(issues.is_empty(), "limit {limit}: {issues:?}");
    assert_same(expected, src, out);
    r
}

#[test]
fn small_files_hashed_in_batches_keep_patch_and_replace() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    // 600 files of 1-40 KB in 6 directories (some with several blocks), a few empty.
    let mut n = 0u64;
    for d in 0..6 {
        let dir = src.join(format!("d{d}"));
        fs::create_dir_all(&dir).unwrap();
        for i in 0..100 {
            let len = if i % 50 == 7 {
                0
            } else {
                1_000 + (n as usize * 397) % 40_000
            };
            let data = if i % 3 == 0 {
                arca_testkit::text_bytes(1_000 + n, len)
            } else {
                arca_testkit::random_bytes(1_000 + n, len)
            };
            fs::write(dir.join(format!("f{i:03}")), data).unwrap();
            n += 1;
        }
    }
    let repo = init(local(&tmp.path().join("repo")));
    do_backup(&repo, &src).unwrap();
    let expected = compare::snapshot(&src).unwrap();
    let target = tmp.path().join("target");
    let out = restored(&target, &src);
    let (full, _) = restore_with(&repo, "latest", &target, |_| {});
    let full = full.unwrap();
    assert_same(&expected, &src, &out);

    // With at most 64 files open (a batch then holds one file, a writer keeps 8 open): same
    // outcomes.
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let tree = (&expected, src.as_path(), out.as_path());
    for limit in [soft, 64] {
        let files: Vec<PathBuf> = files(&out)
            .into_iter()
            .filter(|p| fs::metadata(p).unwrap().len() > 0)
            .collect();
        // Metadata-only: every file hashed, found whole, its mtime set; nothing fetched.
        touch_all(&files);
        let meta = restore_limited(&repo, &target, limit, tree);
        assert_eq!(meta.fetched_bytes, 0);
        assert_eq!(meta.files_hashed as usize, files.len());
        assert_eq!(meta.plan.files_metadata as usize, files.len());

        // Damage of every kind, spread over the directories.
        let mut damaged = 0;
        for (i, p) in files.iter().enumerate() {
            match i % 10 {
                // One byte wrong: patched in place.
                1 => arca_testkit::flip_byte(p, 0).unwrap(),
                // Shorter.
                3 => {
                    let len = fs::metadata(p).unwrap().len();
                    fs::OpenOptions::new()
                        .write(true)
                        .open(p)
                        .unwrap()
                        .set_len(len - 1)
                        .unwrap();
                }
                // Longer.
                5 => {
                    let len = fs::metadata(p).unwrap().len();
                    fs::OpenOptions::new()
                        .write(true)
                        .open(p)
                        .unwrap()
                        .set_len(len + 4_097)
                        .unwrap();
                }
                // Whole, but another name points at it: replaced, the other name untouched.
                7 => {
                    let other = tmp.path().join(format!("other{i}"));
                    let _ = fs::remove_file(&other);
                    fs::hard_link(p, &other).unwrap();
                    arca_testkit::flip_byte(p, 1).unwrap();
                }
                _ => continue,
            }
            damaged += 1;
        }
        touch_all(&files);
        let part = restore_limited(&repo, &target, limit, tree);
        assert_eq!(part.files_hashed as usize, files.len());
        // Patched in place, or written anew (the files with other names).
        assert_eq!(
            (part.plan.files_updated + part.plan.files_new) as usize,
            damaged
        );
        assert!(part.plan.files_new > 0 && part.plan.files_updated > part.plan.files_new);
        assert!(
            part.fetched_bytes > 0 && part.fetched_bytes < full.fetched_bytes,
            "partial fetched {} in {} reads ({} re-reads), full {} in {}",
            part.fetched_bytes,
            part.requests,
            part.rereads,
            full.fetched_bytes,
            full.requests
        );
        // The other names kept the damaged content: the file behind them was not written.
        for i in (7..files.len()).step_by(10) {
            let other = tmp.path().join(format!("other{i}"));
            assert_eq!(fs::metadata(&other).unwrap().nlink(), 1);
            assert_ne!(fs::read(&other).unwrap(), fs::read(&files[i]).unwrap());
        }
    }
}
