//! The fault-injecting backend drives failures through backup, restore and check: every
//! failure is an error value (never a panic), and a failed backup never leaves a snapshot
//! pointing at missing data.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;

use arca_backend::{Backend, Fault, FaultBackend, FileType, LocalBackend, Op, Rule, Trigger};
use arca_maintenance::{CheckOptions, check};
use arca_repo::Repository;
use arca_testkit::{random_bytes, text_bytes};
use common::*;

fn source(dir: &Path) {
    fs::create_dir_all(dir.join("sub")).unwrap();
    for i in 0..8u64 {
        let d = if i % 2 == 0 {
            dir.to_path_buf()
        } else {
            dir.join("sub")
        };
        let data = if i % 3 == 0 {
            text_bytes(i, 200_000)
        } else {
            random_bytes(i, 350_000)
        };
        fs::write(d.join(format!("f{i}")), data).unwrap();
    }
}

fn faulty(dir: &Path) -> (Arc<FaultBackend<LocalBackend>>, Repository) {
    let fb = Arc::new(FaultBackend::new(LocalBackend::new(dir)));
    let b: Arc<dyn Backend> = fb.clone();
    let repo = init(b);
    (fb, repo)
}

#[test]
fn failing_the_nth_write_never_leaves_a_dangling_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let mut failed = 0;
    for n in 1..200 {
        let dir = tmp.path().join(format!("repo{n}"));
        let (fb, repo) = faulty(&dir);
        fb.add(Rule {
            op: Some(Op::Write),
            file_type: None,
            trigger: Trigger::Nth(n),
            fault: Fault::Fail(io::ErrorKind::Other),
        });
        let res = do_backup(&repo, &src);
        fb.clear();
        let rep = check(
            &repo,
            CheckOptions {
                read_data: true,
                workers: 1,
            },
        )
        .unwrap();
        assert!(
            rep.is_ok(),
            "write {n} failed -> repository inconsistent: {:?}",
            rep.errors
        );
        match res {
            Err(e) => {
                failed += 1;
                assert!(
                    repo.list_ids(FileType::Snapshot).unwrap().is_empty(),
                    "snapshot written after failure at write {n}"
                );
                assert!(e.to_string().contains("injected"), "{e}");
                // A rerun completes.
                let r = do_backup(&repo, &src).unwrap();
                assert!(r.snapshot.complete);
            }
            Ok(_) => {
                // The fault lay beyond the last write: every write position was covered.
                assert!(failed >= 3, "only {failed} writes before success");
                fs::remove_dir_all(&dir).unwrap();
                return;
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }
    panic!("backup never succeeded");
}

#[test]
fn rerun_after_failed_backup_reuses_indexed_packs() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let (fb, repo) = faulty(&tmp.path().join("repo"));
    // Let some packs and a checkpoint index through, then fail the snapshot write.
    fb.add(Rule {
        op: Some(Op::Write),
        file_type: Some(FileType::Snapshot),
        trigger: Trigger::Always,
        fault: Fault::NoSpace,
    });
    let e = do_backup(&repo, &src).unwrap_err();
    assert!(e.to_string().contains("No space"), "{e}");
    fb.clear();
    let r = do_backup(&repo, &src).unwrap();
    assert_eq!(
        r.snapshot.summary.data_blobs, 0,
        "packs were uploaded twice"
    );
}

#[test]
fn disk_full_on_pack_upload_is_a_clean_error() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let (fb, repo) = faulty(&tmp.path().join("repo"));
    fb.add(Rule {
        op: Some(Op::Write),
        file_type: Some(FileType::Pack),
        trigger: Trigger::From(2),
        fault: Fault::NoSpace,
    });
    let e = do_backup(&repo, &src).unwrap_err();
    match e {
        arca_backup::BackupError::Repo(r) => assert!(r.is_no_space(), "{r}"),
        other => panic!("{other}"),
    }
}

#[test]
fn corrupted_pack_writes_are_caught_by_read_data() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let (fb, repo) = faulty(&tmp.path().join("repo"));
    fb.add(Rule {
        op: Some(Op::Write),
        file_type: Some(FileType::Pack),
        trigger: Trigger::Nth(1),
        fault: Fault::Corrupt,
    });
    do_backup(&repo, &src).unwrap();
    fb.clear();
    let rep = check(
        &repo,
        CheckOptions {
            read_data: true,
            workers: 2,
        },
    )
    .unwrap();
    assert!(!rep.is_ok());
    assert_eq!(rep.damaged_packs.len(), 1);
    assert!(!rep.affected.is_empty());
}

#[test]
fn read_faults_during_restore_and_check_are_reported_not_panicked() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let (fb, repo) = faulty(&tmp.path().join("repo"));
    do_backup(&repo, &src).unwrap();
    let index = repo.load_index().unwrap();
    let (_, snap) = repo.find_snapshot("latest", &Default::default()).unwrap();
    for (seed, fault) in [
        (1, Fault::Fail(io::ErrorKind::TimedOut)),
        (2, Fault::Corrupt),
        (3, Fault::Truncate),
    ] {
        fb.clear();
        fb.add(Rule {
            op: Some(Op::Read),
            file_type: Some(FileType::Pack),
            trigger: Trigger::Percent {
                percent: 30.0,
                seed,
            },
            fault,
        });
        let target = tmp.path().join(format!("t{seed}"));
        let opts = arca_restore::RestoreOptions {
            target: target.clone(),
            ..Default::default()
        };
        let res = arca_restore::restore(
            &repo,
            &index,
            &snap,
            &opts,
            &Default::default(),
            &|_: &arca_restore::RestoreIssue| {},
        );
        match (fault, res) {
            // Timeouts are transient: retried with backoff until the read succeeds, so the
            // restore is complete and exact.
            (Fault::Fail(io::ErrorKind::TimedOut), Ok(r)) => {
                assert!(r.issues.is_empty(), "{:?}", r.issues);
                assert!(fb.fired() > 0);
                let diffs = arca_testkit::compare::diff_trees(&src, &restored(&target, &src));
                assert!(diffs.is_empty(), "{diffs:?}");
            }
            (Fault::Fail(_), Err(e)) => panic!("transient faults must be retried: {e}"),
            // A read that comes back damaged is read once more: a fault that strikes 30% of
            // the reads at random leaves the restore either exact or with its losses listed.
            (_, Ok(r)) => {
                if r.issues.is_empty() {
                    let diffs = arca_testkit::compare::diff_trees(&src, &restored(&target, &src));
                    assert!(diffs.is_empty(), "{diffs:?}");
                }
            }
            (_, Err(e)) => assert!(!e.to_string().is_empty()),
        }
        let rep = check(
            &repo,
            CheckOptions {
                read_data: true,
                workers: 2,
            },
        );
        match rep {
            Ok(r) => assert!(!r.is_ok()),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    // Listing failures surface as errors too.
    fb.clear();
    fb.add(Rule {
        op: Some(Op::List),
        file_type: None,
        trigger: Trigger::Always,
        fault: Fault::Fail(io::ErrorKind::PermissionDenied),
    });
    assert!(check(&repo, CheckOptions::default()).is_err());
    assert!(do_backup(&repo, &src).is_err());
    fb.clear();
    let rep = check(
        &repo,
        CheckOptions {
            read_data: true,
            workers: 2,
        },
    )
    .unwrap();
    assert!(rep.is_ok(), "{:?}", rep.errors);
}

/// A pack that cannot be read for a reason that says nothing of its bytes (access denied
/// here; a server down or a network failure that outlasts the retries alike) is reported as
/// not verified: no damage, no snapshot hit, no repair proposed. Before, check declared the
/// snapshots damaged and sent the user to `repair packs` and `repair snapshots --forget`.
#[test]
fn a_pack_check_cannot_read_is_not_called_damaged() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let (fb, repo) = faulty(&tmp.path().join("repo"));
    do_backup(&repo, &src).unwrap();
    fb.add(Rule {
        op: Some(Op::Read),
        file_type: Some(FileType::Pack),
        trigger: Trigger::Always,
        fault: Fault::Fail(io::ErrorKind::PermissionDenied),
    });
    let rep = check(
        &repo,
        CheckOptions {
            read_data: true,
            workers: 2,
        },
    )
    .unwrap();
    assert!(!rep.is_ok(), "unverified packs are errors");
    assert!(
        rep.errors.iter().any(|e| e.contains("not verified")),
        "{:?}",
        rep.errors
    );
    assert!(rep.damaged_packs.is_empty());
    assert!(rep.affected.is_empty());
    assert!(rep.repairs.is_empty(), "{:?}", rep.repairs);
    // Readable again: clean.
    fb.clear();
    let rep = check(
        &repo,
        CheckOptions {
            read_data: true,
            workers: 2,
        },
    )
    .unwrap();
    assert!(rep.is_ok(), "{:?}", rep.errors);
}

/// An outage (reads failing transiently past their retries) stops the reading of packs: the
/// packs not read are named as not verified at once, instead of each waiting out its retries.
#[test]
fn an_outage_stops_check_from_reading_the_other_packs() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let (fb, repo) = faulty(&tmp.path().join("repo"));
    do_backup(&repo, &src).unwrap();
    let packs = repo.list_ids(FileType::Pack).unwrap().len();
    assert!(packs > 2, "{packs}");
    fb.add(Rule {
        op: Some(Op::Read),
        file_type: Some(FileType::Pack),
        trigger: Trigger::Always,
        fault: Fault::Fail(io::ErrorKind::TimedOut),
    });
    let rep = check(
        &repo,
        CheckOptions {
            read_data: true,
            workers: 1,
        },
    )
    .unwrap();
    assert!(!rep.is_ok());
    assert!(rep.packs_read < packs, "{} of {packs}", rep.packs_read);
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains("more packs not verified")),
        "{:?}",
        rep.errors
    );
    assert!(rep.repairs.is_empty(), "{:?}", rep.repairs);
}
