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

/// A pack no index names may hold the only intact copy of a used blob: a prune stopped
/// after uploading leaves copies of blobs whose indexed copy can be damaged since. Deleted
/// first, it took that copy with it, and `repair packs` then lost the blobs (hunt 29). The
/// indexed copies of what such packs hold are read first: the prune stops, the pack stays,
/// and the error says to index it.
#[test]
fn an_unreferenced_pack_holding_the_only_intact_copy_is_kept() {
    use super::fixture::Fixture;
    use crate::prune::PruneError;
    use arca_backend::FileType;
    use arca_format::BlobKind;

    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    let a = f.data(1, 3000);
    f.data(2, 3000);
    f.cut();
    let root = f.tree(vec![Fixture::file("f", vec![a])]);
    f.snapshot(root);
    f.index();
    let plain = f.contents[&a.id].clone();
    f.add(BlobKind::Data, &plain);
    // And a blob nothing uses: not what a prune writes, so the pack is not adopted (one
    // holding only `a` would be, and would replace the damaged copy: see
    // `an_adopted_pack_stands_for_a_damaged_indexed_copy`).
    f.data(9, 500);
    f.cut();
    let orphan = f.pending.pop().unwrap().id;
    // A byte flipped in the indexed copy.
    let index = f.repo.load_index().unwrap();
    let loc = index.get(BlobKind::Data, &a.id).unwrap();
    let name = loc.pack.id.to_hex();
    let mut bytes = f.repo.backend().read(FileType::Pack, &name).unwrap();
    bytes[loc.offset as usize + 100] ^= 0x01;
    f.repo
        .backend()
        .write(FileType::Pack, &name, &bytes)
        .unwrap();
    let (packs, index_files) = (f.packs(), f.repo.list_ids(FileType::Index).unwrap());
    let e = f.prune(&thorough()).unwrap_err();
    assert!(
        matches!(e, PruneError::DamagedCopy { pack, blob, other, other_indexed: false, .. }
            if pack == loc.pack.id && other == orphan && blob == a.id),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("arca repair index") && msg.contains("no index names"),
        "{msg}"
    );
    assert_eq!(f.packs(), packs, "nothing deleted");
    assert_eq!(f.repo.list_ids(FileType::Index).unwrap(), index_files);
    // The intact copy is still there to index.
    assert!(f.packs().contains(&orphan));
}

/// A pack no index names that cannot be deleted (immutable, a retention hold) does not
/// stop the prune: the rest is done and the failure is returned at the end, as before such
/// packs went first (hunt 29: every later prune failed before repacking).
#[test]
fn an_unreferenced_pack_that_cannot_be_deleted_does_not_stop_the_rest() {
    use super::fixture::Fixture;
    use arca_backend::{Fault, FaultBackend, FileType, Op, Rule, Trigger};

    let faults = Arc::new(FaultBackend::new(MemoryBackend::new()));
    let mut f = Fixture::new(faults.clone());
    let used = f.data(1, 3000);
    f.data(2, 3000);
    f.cut();
    let root = f.tree(vec![Fixture::file("f", vec![used])]);
    f.snapshot(root);
    f.index();
    f.data(3, 3000);
    f.cut();
    let orphan = f.pending.pop().unwrap().id;
    let index = f.repo.load_index().unwrap();
    let mixed = index
        .get(arca_format::BlobKind::Data, &used.id)
        .unwrap()
        .pack
        .id;
    faults.add(Rule {
        op: Some(Op::Delete),
        file_type: Some(FileType::Pack),
        trigger: Trigger::Nth(1),
        fault: Fault::Fail(std::io::ErrorKind::PermissionDenied),
    });
    let e = f.prune(&thorough()).unwrap_err();
    assert!(
        matches!(e, crate::prune::PruneError::Repo(_)) && e.to_string().contains(&orphan.to_hex()),
        "{e}"
    );
    let after = f.packs();
    assert!(after.contains(&orphan), "the orphan could not go");
    // The pack of used and unused blobs was repacked and deleted all the same.
    assert!(!after.contains(&mixed), "{after:?}");
    f.verify();
    // The next prune deletes the orphan.
    faults.clear();
    let (p, _) = f.prune(&thorough()).unwrap();
    assert_eq!(p.unreferenced.len(), 1);
    assert!(!f.packs().contains(&orphan));
    f.verify();
}
