//! The order in which forget and prune delete, as a power cut would see it: each kind's
//! deletions made durable before the next kind's begin.

use std::sync::Arc;

use arca_backend::MemoryBackend;

use crate::recorder::Recorder;

use super::fixture::two;
use super::thorough;

/// A power cut must never leave a forgotten snapshot, or an index file naming deleted packs,
/// while the packs are gone: on btrfs the snapshots came back after the packs were gone
/// (hunt 22). Each kind's deletions are synced before the next kind's.
#[test]
fn forget_and_prune_make_each_kind_of_deletion_durable_before_the_next() {
    let rec = Arc::new(Recorder::new(Arc::new(MemoryBackend::new())));
    let t = two(rec.clone());
    let f = &t.f;
    let failed = crate::forget::remove_snapshots(&f.repo, &[t.old]).unwrap();
    assert!(failed.is_empty());
    let (_, r) = f.prune(&thorough()).unwrap();
    assert!(r.packs_deleted > 0 && r.index_files_deleted > 0, "{r:?}");
    let log = rec.log();
    assert_eq!(
        log,
        [
            "delete Snapshot",
            "sync",
            "delete Index",
            "sync",
            "delete Pack",
            "sync"
        ],
    );
}

/// The packs no index names go before prune writes anything: their space may be what
/// repacking needs. A prune stopped by a full disk after uploading its new packs left them
/// unreferenced, and every later prune failed again repacking before it came to delete them
/// (hunt 28).
#[test]
fn unreferenced_packs_are_deleted_before_repacking() {
    use super::fixture::Fixture;

    let rec = Arc::new(Recorder::with_writes(Arc::new(MemoryBackend::new())));
    let mut f = Fixture::new(rec.clone());
    let used = f.data(1, 3000);
    f.data(2, 3000);
    f.cut();
    let root = f.tree(vec![Fixture::file("f", vec![used])]);
    f.snapshot(root);
    f.index();
    // An orphan pack, as a stopped prune or a killed backup leaves.
    f.data(3, 3000);
    f.cut();
    let orphan = f.pending.pop().unwrap().id;
    let before = rec.log().len();
    let (p, r) = f.prune(&thorough()).unwrap();
    assert_eq!(p.unreferenced.len(), 1);
    assert!(r.packs_deleted >= 2, "{r:?}");
    assert!(!f.packs().contains(&orphan));
    let log = rec.log()[before..].to_vec();
    let first_delete = log.iter().position(|l| l == "delete Pack");
    let first_write = log.iter().position(|l| l == "write Pack");
    assert!(
        first_delete.is_some() && first_write.is_some() && first_delete < first_write,
        "{log:?}"
    );
    f.verify();
}
