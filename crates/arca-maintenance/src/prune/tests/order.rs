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
