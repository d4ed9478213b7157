//! A prune that failed while repacking left new packs no index names: the next prune adopts
//! those that are whole and hold only blobs its repack needs, and repacks only the rest.

use std::collections::HashSet;
use std::sync::Arc;

use arca_backend::{
    Backend, Fault, FaultBackend, FileType, MemoryBackend, MeteredBackend, Op, Rule, Throttle,
    Trigger,
};
use arca_format::{ContentRef, Id};

use super::fixture::{Fixture, Quota};
use super::thorough;
use crate::prune::PackAction;

/// Data packs laid out so that a thorough prune repacks all of them.
const PACKS: u64 = 8;
/// Blobs per pack: half of them used.
const BLOBS: u64 = 4;
/// Bytes per blob: a pack holds half a pack size (1 MiB), so its used blobs fill a quarter.
const BLOB: usize = 128 << 10;

/// [`PACKS`] data packs of [`BLOBS`] blobs each, of which one snapshot uses the first half of
/// every pack: a thorough prune repacks them all into about `PACKS / 4` new packs.
fn half_used(backend: Arc<dyn Backend>) -> Fixture {
    let mut f = Fixture::new(backend);
    let mut used: Vec<ContentRef> = vec![];
    for p in 0..PACKS {
        for b in 0..BLOBS {
            let c = f.data(p * 100 + b, BLOB);
            if b < BLOBS / 2 {
                used.push(c);
            }
        }
        f.cut();
    }
    let root = f.tree(vec![Fixture::file("f", used)]);
    f.snapshot(root);
    f
}

/// The packs no index names.
fn unindexed(f: &Fixture) -> HashSet<Id> {
    let index = f.repo.load_index().unwrap();
    let indexed: HashSet<Id> = index.packs().iter().map(|p| p.id).collect();
    f.packs().difference(&indexed).copied().collect()
}

/// Every snapshot reads back byte for byte, `check --read-data` is clean, every pack is
/// indexed and the index names exactly the used blobs.
fn all_well(f: &Fixture) {
    let used = f.verify();
    assert_eq!(f.indexed(), used, "the index names exactly the used blobs");
    assert!(unindexed(f).is_empty(), "no pack left unindexed");
    let report = crate::check(
        &f.repo,
        crate::CheckOptions {
            read_data: true,
            workers: 2,
        },
    )
    .unwrap();
    assert!(report.is_ok(), "{:?}", report.errors);
}

/// A prune whose second pack write fails for a full disk, then a rerun: the packs the first
/// run wrote are adopted (kept, indexed, not written again), and the rerun writes less than
/// an undisturbed prune of the same repository does.
#[test]
fn a_rerun_adopts_the_packs_a_failed_prune_wrote() {
    // What an undisturbed prune writes.
    let metered = Arc::new(MeteredBackend::new(
        MemoryBackend::new(),
        Throttle::default(),
    ));
    let control = half_used(metered.clone());
    let before = metered.stats().snapshot().bytes_written;
    let (_, r) = control.prune(&thorough()).unwrap();
    let undisturbed = metered.stats().snapshot().bytes_written - before;
    assert!(r.packs_written >= 2, "{r:?}");

    let fault = Arc::new(FaultBackend::new(MeteredBackend::new(
        MemoryBackend::new(),
        Throttle::default(),
    )));
    let stats = fault.inner().stats();
    let f = half_used(fault.clone());
    let clean = f.verify();
    let packs_before = f.packs();
    fault.add(Rule {
        op: Some(Op::Write),
        file_type: Some(FileType::Pack),
        trigger: Trigger::Nth(2),
        fault: Fault::NoSpace,
    });
    let e = f.prune(&thorough()).unwrap_err();
    assert_eq!(fault.fired(), 1, "{e}");
    fault.clear();
    let left = unindexed(&f);
    assert!(!left.is_empty(), "the first run wrote a pack: {e}");
    assert!(packs_before.iter().all(|p| f.packs().contains(p)));

    let before = stats.snapshot().bytes_written;
    let index_before = f.repo.list_ids(FileType::Index).unwrap().len();
    let (plan, report) = f.prune(&thorough()).unwrap();
    let rerun = stats.snapshot().bytes_written - before;
    // The index written first (naming the adopted packs) and replaced at the end counts
    // among the files written, as among those deleted.
    assert!(report.blobs_repacked > 0, "{report:?}");
    assert_eq!(
        index_before + report.index_files_written.len() - report.index_files_deleted as usize,
        f.repo.list_ids(FileType::Index).unwrap().len(),
        "{report:?}"
    );
    let adopted: HashSet<Id> = plan.adopted.iter().map(|p| p.id).collect();
    assert_eq!(adopted, left, "every pack of the first run is adopted");
    assert!(plan.unreferenced.is_empty(), "{:?}", plan.unreferenced);
    assert_eq!(plan.stats.adopted.packs, left.len() as u64);
    assert_eq!(report.packs_adopted, left.len() as u64);
    let adopted_bytes: u64 = plan.adopted.iter().map(|p| p.size).sum();
    assert_eq!(report.bytes_adopted, adopted_bytes);
    assert!(
        rerun < undisturbed && rerun + adopted_bytes <= undisturbed + (64 << 10),
        "the rerun wrote {rerun} bytes, an undisturbed prune {undisturbed}, adopted \
         {adopted_bytes}"
    );
    assert!(
        report.blobs_repacked < r.blobs_repacked,
        "{report:?} vs {r:?}"
    );
    // Kept and indexed.
    let index = f.repo.load_index().unwrap();
    let indexed: HashSet<Id> = index.packs().iter().map(|p| p.id).collect();
    assert!(left.is_subset(&indexed), "adopted packs are indexed");
    for p in plan.packs.iter().filter(|p| p.action == PackAction::Repack) {
        assert!(!f.packs().contains(&p.id), "repacked pack {} deleted", p.id);
    }
    assert_eq!(f.verify(), clean);
    all_well(&f);
}

/// A byte flipped in a pack the failed prune wrote (in a blob, or in its header): it is not
/// adopted but deleted, as before, and its blobs are repacked from the original packs.
#[test]
fn a_damaged_unindexed_pack_is_not_adopted() {
    for at_end in [false, true] {
        let fault = Arc::new(FaultBackend::new(MemoryBackend::new()));
        let f = half_used(fault.clone());
        let clean = f.verify();
        fault.add(Rule {
            op: Some(Op::Write),
            file_type: Some(FileType::Pack),
            trigger: Trigger::Nth(2),
            fault: Fault::NoSpace,
        });
        f.prune(&thorough()).unwrap_err();
        fault.clear();
        let left = unindexed(&f);
        assert_eq!(left.len(), 1, "one pack written before the fault");
        let victim = *left.iter().next().unwrap();
        let name = victim.to_hex();
        let mut bytes = f.backend.read(FileType::Pack, &name).unwrap();
        // In a blob, or in the sealed header just before the 8-byte trailer.
        let i = if at_end { bytes.len() - 20 } else { 1000 };
        bytes[i] ^= 0x40;
        f.backend.write(FileType::Pack, &name, &bytes).unwrap();

        let (plan, report) = f.prune(&thorough()).unwrap();
        assert!(
            plan.adopted.is_empty(),
            "at_end {at_end}: {:?}",
            plan.adopted
        );
        assert_eq!(plan.unreferenced.len(), 1);
        assert_eq!(report.packs_adopted, 0);
        // Every used blob of the packs repacked is copied from them.
        assert_eq!(report.blobs_repacked, PACKS * BLOBS / 2, "{report:?}");
        assert!(!f.packs().contains(&victim), "the damaged pack is deleted");
        assert_eq!(f.verify(), clean);
        all_well(&f);
    }
}

/// A pack no index names whose blobs are not all ones the repack needs (here: a blob no
/// snapshot uses beside a needed one) is deleted, as before. Its header is read once: the
/// search for copies of used blobs takes it from the adoption's reading.
#[test]
fn an_unindexed_pack_with_an_unneeded_blob_is_not_adopted() {
    let quota = Arc::new(Quota::new(FileType::Pack, u64::MAX));
    let mut f = half_used(quota.clone());
    let clean = f.verify();
    // A copy of a used blob of the first pack, and an unused blob.
    let used = *f
        .contents
        .iter()
        .find(|(_, c)| *c == &super::fixture::bytes(0, BLOB))
        .unwrap()
        .0;
    let plain = f.contents[&used].clone();
    f.add(arca_format::BlobKind::Data, &plain);
    f.data(9999, 1000);
    f.cut();
    let orphan = f.pending.pop().unwrap().id;
    let size = quota.stat(FileType::Pack, &orphan.to_hex()).unwrap().size;
    arca_repo::pack::read_pack_header(quota.as_ref(), f.repo.sealer(), &orphan, size).unwrap();
    let header_reads = quota.reads_of(&orphan);
    assert!(header_reads > 0);
    quota.reads.lock().unwrap().clear();
    let (plan, _) = f.prune(&thorough()).unwrap();
    assert!(plan.adopted.is_empty());
    assert_eq!(plan.unreferenced, vec![(orphan, plan.unreferenced[0].1)]);
    assert_eq!(
        quota.reads_of(&orphan),
        header_reads,
        "its header read once"
    );
    assert!(!f.packs().contains(&orphan));
    assert_eq!(f.verify(), clean);
    all_well(&f);
}

/// On a disk too full for the whole repack, each rerun adopts what the run before wrote and
/// deletes the packs that made redundant before it writes: a few reruns finish. Before, each
/// rerun deleted the packs the last one wrote and failed at the same point again.
#[test]
fn reruns_on_a_nearly_full_disk_finish() {
    let quota = Arc::new(Quota::new(FileType::Pack, u64::MAX));
    let f = half_used(quota.clone());
    let clean = f.verify();
    // Room for about half the new packs (they take half the packs' bytes in all).
    let used = quota.used();
    *quota.cap.lock().unwrap() = used + used * 3 / 10;
    let mut runs = vec![];
    for _ in 0..6 {
        let r = f.prune(&thorough());
        let done = r.is_ok();
        runs.push(
            r.map(|(p, _)| p.stats.adopted.packs)
                .map_err(|e| e.to_string()),
        );
        if done {
            break;
        }
        assert_eq!(f.verify(), clean, "readable after a failed run");
    }
    eprintln!("runs: {runs:?}");
    assert!(runs.len() > 1, "the first run fails: {runs:?}");
    assert!(runs.last().unwrap().is_ok(), "a rerun finishes: {runs:?}");
    assert!(
        matches!(runs.last(), Some(Ok(n)) if *n > 0),
        "the last run adopts what the one before wrote: {runs:?}"
    );
    assert!(quota.used() < used, "space was freed");
    assert_eq!(f.verify(), clean);
    all_well(&f);
}

/// A pack no index names holding just the intact copy of a used blob whose indexed copy is
/// damaged, in a pack to repack: it is adopted (its copy authenticates), the damaged pack
/// goes without being copied from, and the snapshot reads back. Before, the prune stopped
/// (the kept copy damaged, the other in a pack it would delete).
#[test]
fn an_adopted_pack_stands_for_a_damaged_indexed_copy() {
    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    let a = f.data(1, 3000);
    f.data(2, 3000);
    f.cut();
    let root = f.tree(vec![Fixture::file("f", vec![a])]);
    f.snapshot(root);
    f.index();
    let plain = f.contents[&a.id].clone();
    f.add(arca_format::BlobKind::Data, &plain);
    f.cut();
    let orphan = f.pending.pop().unwrap().id;
    let index = f.repo.load_index().unwrap();
    let loc = index.get(arca_format::BlobKind::Data, &a.id).unwrap();
    let name = loc.pack.id.to_hex();
    let mut bytes = f.backend.read(FileType::Pack, &name).unwrap();
    bytes[loc.offset as usize + 100] ^= 0x01;
    f.backend.write(FileType::Pack, &name, &bytes).unwrap();
    let (plan, report) = f.prune(&thorough()).unwrap();
    assert_eq!(plan.adopted.len(), 1);
    assert_eq!(plan.adopted[0].id, orphan);
    assert_eq!((report.blobs_repacked, report.packs_adopted), (0, 1));
    assert!(f.packs().contains(&orphan));
    assert!(
        !f.packs().contains(&loc.pack.id),
        "the damaged pack is gone"
    );
    all_well(&f);
}
