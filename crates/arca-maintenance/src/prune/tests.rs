#![allow(clippy::unwrap_used)]

mod adopt;
mod fixture;
mod order;
mod packer;
mod space;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use arca_backend::{Fault, FaultBackend, FileType, MemoryBackend, Op, Rule, Trigger};
use arca_format::{BlobKind, ContentRef, Id, IndexFile, IndexPack, PackEntry};
use arca_repo::Index;

use super::decide::{PackState, decide};
use super::walk::Marks;
use super::*;
use fixture::{Fixture, bytes, two};

/// Every pack with an unused blob repacked (`--max-unused 0%`).
pub(super) fn thorough() -> PruneOptions {
    PruneOptions {
        max_unused: MaxUnused::Percent(0.0),
        ..PruneOptions::default()
    }
}

#[test]
fn prune_removes_exactly_the_unreachable_data() {
    let t = two(Arc::new(MemoryBackend::new()));
    let f = &t.f;
    let before = f.verify();
    let packs_before = f.packs();
    // Nothing to remove yet: nothing but the index files (two, one per snapshot) changes.
    let (p, r) = f.prune(&PruneOptions::default()).unwrap();
    assert_eq!(p.stats.unused_blobs, 0, "{:?}", p.stats);
    assert_eq!(p.stats.snapshots, 2);
    assert_eq!((p.stats.delete.packs, p.stats.repack.packs), (0, 0));
    assert!(p.rewrite_index, "two index files become one");
    assert_eq!(r.index_files_written.len(), 1);
    assert_eq!(r.packs_deleted, 0);
    assert_eq!(f.packs(), packs_before);
    assert_eq!(f.verify(), before);

    f.forget(t.old);
    let (p, r) = f.prune(&thorough()).unwrap();
    let s = &p.stats;
    assert_eq!(s.snapshots, 1);
    // Old-only: 4 data blobs, the two mixed ones, and the old root tree.
    assert_eq!(s.unused_blobs, 4 + 2 + 1, "{s:?}");
    assert_eq!(s.delete.packs, 1, "the old-only data pack: {s:?}");
    // The mixed pack (2/3 unused) and the tree pack holding the old root (and `docs`).
    assert_eq!(s.repack.packs, 2, "{s:?}");
    assert_eq!(s.repack_blobs, 2, "y1 and docs: {s:?}");
    assert_eq!(r.blobs_repacked, 2);
    assert_eq!(r.packs_written, 2, "one data pack, one tree pack");
    assert_eq!(r.packs_deleted, 3);
    assert!(r.freed_bytes() > 4 * 4000 + 2 * 5000, "{r:?}");
    let used = f.verify();
    assert_eq!(f.indexed(), used, "the index names exactly the used blobs");
    assert!(
        !used
            .iter()
            .any(|(_, id)| f.contents.get(id).is_some_and(|c| c.len() == 4000))
    );
    assert_eq!(f.repo.list_ids(FileType::Index).unwrap().len(), 1);
    // Every pack left is indexed and fully used.
    let index = f.repo.load_index().unwrap();
    assert_eq!(
        f.packs(),
        index.packs().iter().map(|p| p.id).collect::<HashSet<_>>()
    );
    let report = crate::check(
        &f.repo,
        crate::CheckOptions {
            read_data: true,
            workers: 2,
        },
    )
    .unwrap();
    assert!(report.is_ok(), "{:?}", report.errors);
    assert!(report.notes.is_empty(), "{:?}", report.notes);

    // A second prune finds nothing to do.
    let (p, r) = f.prune(&thorough()).unwrap();
    assert!(p.is_empty(), "{:?}", p.stats);
    assert_eq!((r.packs_deleted, r.packs_written), (0, 0));
    let _ = t.new;
}

#[test]
fn planning_changes_nothing() {
    let t = two(Arc::new(MemoryBackend::new()));
    t.f.forget(t.old);
    let before = t.f.files();
    let index = t.f.repo.load_index().unwrap();
    let p = plan(&t.f.repo, &index, &PruneOptions::default()).unwrap();
    assert!(!p.is_empty());
    assert!(p.stats.freed_bytes > 0);
    assert_eq!(t.f.files(), before);
}

/// A plan that counts a snapshot as gone (`forget --prune --dry-run`) frees what the real
/// prune after the forget frees, and is never executed.
#[test]
fn a_preview_ignoring_a_snapshot_plans_as_its_removal_and_cannot_run() {
    let t = two(Arc::new(MemoryBackend::new()));
    let before = t.f.files();
    let index = t.f.repo.load_index().unwrap();
    let preview = PruneOptions {
        ignore_snapshots: vec![t.old],
        ..PruneOptions::default()
    };
    let p = plan(&t.f.repo, &index, &preview).unwrap();
    assert!(p.preview);
    assert_eq!(p.stats.snapshots, 1);
    assert!(matches!(
        execute(&t.f.repo, &p, &Progress::default()),
        Err(PruneError::Changed(_))
    ));
    assert_eq!(t.f.files(), before, "the preview changed the repository");
    t.f.forget(t.old);
    let real = plan(&t.f.repo, &index, &PruneOptions::default()).unwrap();
    assert!(!real.preview);
    assert_eq!(p.stats.freed_bytes, real.stats.freed_bytes);
    assert!(real.stats.freed_bytes > 0);
    assert_eq!(
        (p.stats.delete.packs, p.stats.repack.packs),
        (real.stats.delete.packs, real.stats.repack.packs)
    );
}

#[test]
fn max_unused_and_repack_size_limit_repacking() {
    let t = two(Arc::new(MemoryBackend::new()));
    t.f.forget(t.old);
    let index = t.f.repo.load_index().unwrap();
    let count = |opts: PruneOptions| {
        let p = plan(&t.f.repo, &index, &opts).unwrap();
        (p.stats.delete.packs, p.stats.repack.packs)
    };
    // Unlimited: the unused pack is deleted, nothing repacked.
    let unlimited = PruneOptions {
        max_unused: MaxUnused::Unlimited,
        ..PruneOptions::default()
    };
    assert_eq!(count(unlimited), (1, 0));
    // The mixed data pack is 5/6 unused: 99 % of a pack may be unused. The mixed listing
    // pack is repacked all the same, as restic's (listings are read by every walk).
    let tolerant = PruneOptions {
        max_unused: MaxUnused::Percent(99.0),
        ..PruneOptions::default()
    };
    let p = plan(&t.f.repo, &index, &tolerant).unwrap();
    assert_eq!((p.stats.delete.packs, p.stats.repack.packs), (1, 1));
    let tree = p
        .packs
        .iter()
        .find(|p| p.kind == BlobKind::Tree && p.action == PackAction::Repack)
        .unwrap()
        .clone();
    assert_eq!(p.stats.repack.bytes, tree.size);
    // A size: enough unused bytes are repacked away to get under it, emptiest pack first.
    let p = plan(&t.f.repo, &index, &thorough()).unwrap();
    let mixed = p
        .packs
        .iter()
        .find(|p| p.kind == BlobKind::Data && p.action == PackAction::Repack)
        .unwrap();
    assert!(tree.unused_bytes < mixed.unused_bytes);
    // With the listing pack repacked, what is left unused is the mixed data pack's: a limit
    // of that keeps it.
    let bytes = |b: u64| PruneOptions {
        max_unused: MaxUnused::Bytes(b),
        ..PruneOptions::default()
    };
    let p = plan(&t.f.repo, &index, &bytes(mixed.unused_bytes)).unwrap();
    assert_eq!((p.stats.delete.packs, p.stats.repack.packs), (1, 1));
    assert_eq!(p.stats.repack.bytes, tree.size);
    let p = plan(&t.f.repo, &index, &bytes(mixed.unused_bytes - 1)).unwrap();
    assert_eq!((p.stats.delete.packs, p.stats.repack.packs), (1, 2));
    // A percentage is of the repository after prune, as restic reads it: P % tolerates
    // P / (100 - P) of the used bytes unused.
    let used = p.stats.used_bytes as f64;
    let percent = |unused: f64| PruneOptions {
        max_unused: MaxUnused::Percent(100.0 * unused / (used + unused)),
        ..PruneOptions::default()
    };
    let m_unused = mixed.unused_bytes as f64;
    let p = plan(&t.f.repo, &index, &percent(m_unused + 0.5)).unwrap();
    assert_eq!((p.stats.delete.packs, p.stats.repack.packs), (1, 1));
    assert_eq!(p.stats.repack.bytes, tree.size);
    let p = plan(&t.f.repo, &index, &percent(m_unused - 1.0)).unwrap();
    assert_eq!((p.stats.delete.packs, p.stats.repack.packs), (1, 2));
    // The repack limit: only packs that fit.
    let capped = PruneOptions {
        max_repack_bytes: Some(mixed.size),
        ..PruneOptions::default()
    };
    let p = plan(&t.f.repo, &index, &capped).unwrap();
    assert!(p.stats.repack.bytes <= mixed.size);
    assert_eq!(p.stats.repack.packs, 1);
    // Executing a capped plan leaves a consistent repository too.
    let before = t.f.verify();
    execute(&t.f.repo, &p, &Progress::default()).unwrap();
    assert_eq!(t.f.verify(), before);
}

/// A used blob of a pack to repack with one flipped byte: its tag does not match, the prune
/// fails naming the pack, and nothing is written to the index or deleted.
#[test]
fn a_damaged_blob_stops_the_repack_before_anything_is_deleted() {
    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    let blobs: Vec<ContentRef> = (0..10).map(|i| f.data(i, 1000 + i as usize * 10)).collect();
    let even: Vec<ContentRef> = blobs.iter().step_by(2).copied().collect();
    let r1 = f.tree(vec![Fixture::file("even", even)]);
    f.snapshot(r1);
    let r2 = f.tree(vec![Fixture::file("all", blobs.clone())]);
    let s2 = f.snapshot(r2);
    f.forget(s2);
    let loc = f
        .repo
        .load_index()
        .unwrap()
        .get(BlobKind::Data, &blobs[2].id)
        .unwrap();
    let name = loc.pack.id.to_hex();
    let mut bytes = f.repo.backend().read(FileType::Pack, &name).unwrap();
    bytes[(loc.offset + loc.length / 2) as usize] ^= 0x01;
    f.repo
        .backend()
        .write(FileType::Pack, &name, &bytes)
        .unwrap();
    let (packs, index_files) = (f.packs(), f.repo.list_ids(FileType::Index).unwrap());
    let e = f.prune(&thorough()).unwrap_err();
    assert!(
        matches!(e, PruneError::BadPack { id, .. } if id == loc.pack.id),
        "{e}"
    );
    // The pack is named once, with the repair that helps (not `repair index`, which leaves
    // a damaged blob where it is).
    let msg = e.to_string();
    assert_eq!(msg.matches(&name).count(), 1, "{msg}");
    assert!(
        msg.contains(&format!("`arca repair packs {}`", loc.pack.id.short())),
        "{msg}"
    );
    // Nor written: the new pack held the damaged blob's copy when it was found out.
    assert_eq!(f.packs(), packs, "no pack deleted or written");
    assert_eq!(f.repo.list_ids(FileType::Index).unwrap(), index_files);
}

#[test]
fn repacking_a_mixed_pack_keeps_its_used_blobs() {
    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    // One data pack of ten blobs; snapshot 1 uses the even ones, snapshot 2 all of them.
    let blobs: Vec<ContentRef> = (0..10).map(|i| f.data(i, 1000 + i as usize * 10)).collect();
    let even: Vec<ContentRef> = blobs.iter().step_by(2).copied().collect();
    let r1 = f.tree(vec![Fixture::file("even", even.clone())]);
    let s1 = f.snapshot(r1);
    let r2 = f.tree(vec![Fixture::file("all", blobs.clone())]);
    let s2 = f.snapshot(r2);
    let data_pack = f
        .repo
        .load_index()
        .unwrap()
        .get(BlobKind::Data, &blobs[0].id)
        .unwrap()
        .pack
        .id;
    f.forget(s2);
    let (p, r) = f.prune(&thorough()).unwrap();
    let planned = p.packs.iter().find(|p| p.id == data_pack).unwrap();
    assert_eq!(planned.action, PackAction::Repack);
    assert_eq!((planned.used_blobs, planned.unused_blobs), (5, 5));
    assert_eq!(r.blobs_repacked, 5, "the even blobs");
    assert!(!f.packs().contains(&data_pack));
    let index = f.repo.load_index().unwrap();
    for (i, b) in blobs.iter().enumerate() {
        let loc = index.get(BlobKind::Data, &b.id);
        assert_eq!(loc.is_some(), i % 2 == 0, "blob {i}");
        if let Some(loc) = loc {
            assert_eq!(loc.pack.kind, BlobKind::Data);
            assert_eq!(loc.raw_length, b.len);
        }
    }
    // Data and tree blobs went to separate packs.
    assert!(index.packs().iter().any(|p| p.kind == BlobKind::Tree));
    assert_eq!(f.verify().len(), 5 + 1);
    let _ = s1;
}

#[test]
fn a_blob_stored_twice_keeps_one_copy() {
    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    let a = f.data(1, 3000);
    let b = f.data(2, 3000);
    f.cut();
    // A second copy of `a` alone in its own pack (as a rerun after a crash may store).
    let plain = f.contents[&a.id].clone();
    f.add(BlobKind::Data, &plain);
    f.cut();
    let root = f.tree(vec![Fixture::file("f", vec![a, b])]);
    f.snapshot(root);
    let index = f.repo.load_index().unwrap();
    assert!(index.has_copies());
    let (p, r) = f.prune(&thorough()).unwrap();
    assert_eq!(p.stats.duplicate_blobs, 1);
    assert_eq!(p.stats.delete.packs, 1, "the pack holding only the copy");
    assert_eq!(r.packs_deleted, 1);
    let index = f.repo.load_index().unwrap();
    assert!(!index.has_copies());
    assert_eq!(index.locations(BlobKind::Data, &a.id).count(), 1);
    f.verify();
}

/// The copy prune keeps of a blob stored twice is chosen from the index alone; with a
/// flipped byte in it, prune deleted the pack of the only intact copy (exit 0), and the data
/// was lost. The kept copy is now read first: the prune fails naming both packs, and
/// nothing is written or deleted.
#[test]
fn a_damaged_kept_copy_stops_the_prune_before_the_other_goes() {
    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    let a = f.data(1, 3000);
    let b = f.data(2, 3000);
    f.cut();
    let plain = f.contents[&a.id].clone();
    f.add(BlobKind::Data, &plain);
    f.cut();
    let root = f.tree(vec![Fixture::file("f", vec![a, b])]);
    f.snapshot(root);
    let index = f.repo.load_index().unwrap();
    let p = plan(&f.repo, &index, &thorough()).unwrap();
    let [kept] = p.sole_copies[..] else {
        panic!("{:?}", p.sole_copies)
    };
    let (pack, other) = (
        p.packs[kept.pack as usize].id,
        p.packs[kept.other as usize].id,
    );
    let name = pack.to_hex();
    let mut bytes = f.repo.backend().read(FileType::Pack, &name).unwrap();
    bytes[kept.offset as usize + 100] ^= 0x01;
    f.repo
        .backend()
        .write(FileType::Pack, &name, &bytes)
        .unwrap();
    let (packs, index_files) = (f.packs(), f.repo.list_ids(FileType::Index).unwrap());
    let e = f.prune(&thorough()).unwrap_err();
    assert!(
        matches!(e, PruneError::DamagedCopy { pack: p, blob, other: o, .. }
            if p == pack && o == other && blob == a.id),
        "{e}"
    );
    assert!(e.to_string().contains("repair packs"), "{e}");
    assert_eq!(f.packs(), packs);
    assert_eq!(f.repo.list_ids(FileType::Index).unwrap(), index_files);
    // The intact copy still reads.
    assert_eq!(
        f.repo.read_blob(&index, BlobKind::Data, &a.id).unwrap(),
        plain
    );
}

#[test]
fn unreferenced_and_missing_packs() {
    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    let a = f.data(1, 3000);
    f.cut();
    let root = f.tree(vec![Fixture::file("f", vec![a])]);
    f.snapshot(root);
    // An orphan pack (a backup killed before its index) and an indexed pack that is gone.
    f.data(2, 3000);
    f.cut();
    let orphan = f.pending.pop().unwrap().id;
    f.data(3, 3000);
    f.index();
    let index = f.repo.load_index().unwrap();
    let gone = index.get(BlobKind::Data, &f.repo.key().blob_id(&bytes(3, 3000)));
    let gone = gone.unwrap().pack.id;
    f.backend.delete(FileType::Pack, &gone.to_hex()).unwrap();
    let (p, r) = f.prune(&thorough()).unwrap();
    assert_eq!(p.unreferenced.len(), 1);
    assert_eq!(p.unreferenced[0].0, orphan);
    assert_eq!(p.stats.missing.packs, 1);
    assert_eq!(r.packs_deleted, 1);
    assert!(!f.packs().contains(&orphan));
    let index = f.repo.load_index().unwrap();
    assert!(index.packs().iter().all(|p| p.id != gone));
    f.verify();
}

#[test]
fn blobs_missing_from_the_index_stop_prune_before_any_change() {
    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    let a = f.data(1, 3000);
    f.cut();
    let unused = f.data(9, 3000);
    f.cut();
    let _ = unused;
    // A blob the snapshot uses that was never stored.
    let lost = ContentRef {
        id: f.repo.key().blob_id(b"never stored"),
        len: 12,
    };
    let root = f.tree(vec![Fixture::file("f", vec![a, lost])]);
    f.snapshot(root);
    // Another snapshot uses it too: it is still one missing blob.
    let other = f.tree(vec![Fixture::file("g", vec![lost])]);
    f.snapshot(other);
    let before = f.files();
    let e = f.prune(&PruneOptions::default()).unwrap_err();
    assert!(
        matches!(e, PruneError::MissingBlobs { trees: 0, data: 1, ref examples } if examples[0].1 == lost.id),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("arca repair index") && msg.contains("arca check"),
        "{msg}"
    );
    assert!(msg.contains("nothing was deleted"), "{msg}");
    assert_eq!(f.files(), before);
    // A pack whose size differs from the index is no source for a blob either.
    let idx = f.repo.load_index().unwrap();
    let pack = idx.get(BlobKind::Data, &a.id).unwrap().pack.id;
    let mut b = f.backend.read(FileType::Pack, &pack.to_hex()).unwrap();
    b.pop();
    f.backend.write(FileType::Pack, &pack.to_hex(), &b).unwrap();
    let e = f.prune(&PruneOptions::default()).unwrap_err();
    assert!(
        matches!(e, PruneError::MissingBlobs { data: 2, .. }),
        "{e:?}"
    );
}

#[test]
fn repack_small_packs_merges_them() {
    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    let mut content = vec![];
    for i in 0..5 {
        content.push(f.data(i, 2000));
        f.cut();
    }
    let root = f.tree(vec![Fixture::file("f", content)]);
    f.snapshot(root);
    let (p, _) = f.prune(&PruneOptions::default()).unwrap();
    assert_eq!(p.stats.repack.packs, 0);
    let small = PruneOptions {
        repack_small: true,
        ..PruneOptions::default()
    };
    let (p, r) = f.prune(&small).unwrap();
    // Five data packs become one; the one tree pack is left alone.
    assert_eq!(p.stats.repack.packs, 5, "{:?}", p.stats);
    assert_eq!(r.packs_written, 1);
    assert_eq!(f.packs().len(), 2);
    f.verify();
}

/// A fault at every write, then at every delete, of a prune: the repository stays readable
/// after each, and a second prune ends where an undisturbed one does.
#[test]
fn a_crash_at_any_write_or_delete_leaves_every_snapshot_readable() {
    for op in [Op::Write, Op::Delete] {
        let mut n = 1;
        loop {
            let fault = Arc::new(FaultBackend::new(MemoryBackend::new()));
            let t = two(fault.clone());
            t.f.forget(t.old);
            // Blob ids are keyed: each repository has its own.
            let clean = t.f.verify();
            fault.add(Rule {
                op: Some(op),
                file_type: None,
                trigger: Trigger::Nth(n),
                fault: Fault::Fail(std::io::ErrorKind::PermissionDenied),
            });
            let res = t.f.prune(&thorough());
            let fired = fault.fired();
            fault.clear();
            if fired == 0 {
                res.unwrap();
                assert!(n > 2, "{op:?}: at least a few points were tried");
                eprintln!("{op:?}: a fault at each of {} points", n - 1);
                break;
            }
            assert!(res.is_err(), "{op:?} #{n}: the failure is reported");
            assert_eq!(t.f.verify(), clean, "{op:?} #{n}: readable after the crash");
            t.f.prune(&thorough()).unwrap();
            assert_eq!(t.f.verify(), clean, "{op:?} #{n}: after the second prune");
            assert_eq!(t.f.indexed(), clean, "{op:?} #{n}: nothing unused is left");
            let index = t.f.repo.load_index().unwrap();
            assert_eq!(
                t.f.packs(),
                index.packs().iter().map(|p| p.id).collect::<HashSet<_>>(),
                "{op:?} #{n}: every pack indexed"
            );
            n += 1;
        }
    }
}

/// Deletions run several at once, but every old index file is gone before the first pack
/// is deleted: when an index file cannot be deleted, no pack is.
#[test]
fn no_pack_is_deleted_while_an_old_index_file_remains() {
    let fault = Arc::new(FaultBackend::new(MemoryBackend::new()));
    let t = two(fault.clone());
    t.f.forget(t.old);
    let clean = t.f.verify();
    let packs_before = t.f.packs();
    fault.add(Rule {
        op: Some(Op::Delete),
        file_type: Some(FileType::Index),
        trigger: Trigger::Nth(2),
        fault: Fault::Fail(std::io::ErrorKind::PermissionDenied),
    });
    let e = t.f.prune(&PruneOptions::default()).unwrap_err();
    assert_eq!(fault.fired(), 1, "{e}");
    fault.clear();
    // The new packs are there, and every old one still is.
    assert!(t.f.packs().is_superset(&packs_before));
    assert_eq!(t.f.verify(), clean);
    t.f.prune(&PruneOptions::default()).unwrap();
    assert!(
        !t.f.packs().is_superset(&packs_before),
        "the second prune deletes"
    );
    assert_eq!(t.f.verify(), clean);
}

/// A synthetic index of `n` blobs in packs of 16, half of them marked used.
fn synthetic(n: usize) -> (Index, Vec<(Id, u64)>, Vec<Id>) {
    let id = |i: u64| Id(*blake3::hash(&i.to_le_bytes()).as_bytes());
    let mut file = IndexFile::default();
    let mut ids = Vec::with_capacity(n);
    for p in 0..n.div_ceil(16) {
        let blobs: Vec<PackEntry> = (0..16.min(n - p * 16))
            .map(|j| {
                let b = id((p * 16 + j) as u64);
                ids.push(b);
                PackEntry {
                    id: b,
                    offset: 8 + j as u32 * 1000,
                    length: 1000,
                    raw_length: 959,
                }
            })
            .collect();
        file.packs.push(IndexPack {
            id: id(u64::MAX - p as u64),
            kind: BlobKind::Data,
            size: 8 + 16_000 + 800,
            blobs,
        });
    }
    let mut listed: Vec<(Id, u64)> = file.packs.iter().map(|p| (p.id, p.size)).collect();
    listed.sort();
    (Index::from_files([&file]), listed, ids)
}

/// Planning over a synthetic index: marking (as the walk does, one lookup per blob) and
/// deciding are linear. `ARCA_PRUNE_SCALE=10000000 cargo test --release ... -- --ignored`
/// measures larger ones.
fn scale(n: usize) -> (f64, f64) {
    let (index, listed, ids) = synthetic(n);
    let t = Instant::now();
    let state = PackState::of(&index, &listed);
    let marks = Marks::new(index.len());
    // Every pack a different mix: pack p keeps its first p % 17 blobs.
    for (i, id) in ids.iter().enumerate() {
        if i % 16 < (i / 16) % 17 {
            for (pos, _) in index.positions(BlobKind::Data, id) {
                marks.set(pos);
            }
        }
    }
    let marking = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let p = decide(&index, &marks, &state, &PruneOptions::default(), 16 << 20);
    let deciding = t.elapsed().as_secs_f64();
    assert_eq!(p.packs.len(), n.div_ceil(16));
    assert!(p.stats.delete.packs > 0 && p.stats.repack.packs > 0 && p.stats.keep.packs > 0);
    assert_eq!(
        p.stats.used_blobs + p.stats.unused_blobs,
        n as u64,
        "{:?}",
        p.stats
    );
    (marking, deciding)
}

#[test]
fn planning_is_linear_in_the_index() {
    let (m, d) = scale(200_000);
    eprintln!("200k blobs: marking {m:.3} s, deciding {d:.3} s");
    assert!(m + d < 20.0);
}

#[test]
#[ignore = "measures planning over a large synthetic index (ARCA_PRUNE_SCALE blobs)"]
fn planning_at_scale() {
    let n = std::env::var("ARCA_PRUNE_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let (m, d) = scale(n);
    eprintln!("{n} blobs: marking {m:.2} s, deciding {d:.2} s");
}

/// A prune whose cancel flag is set stops while planning, or before its deletions, with
/// nothing lost; the next prune finishes (the UI's Cancel button did nothing: the prune
/// deleted its packs and ended "done").
#[test]
fn a_cancelled_prune_deletes_nothing_and_the_next_one_finishes() {
    let t = two(Arc::new(MemoryBackend::new()));
    let f = &t.f;
    f.forget(t.old);
    let clean = f.verify();
    let packs_before = f.packs();
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let index = f.repo.load_index().unwrap();
    let progress = Progress::with_cancel(flag.clone());
    let e = plan_with_progress(&f.repo, &index, &thorough(), &progress).unwrap_err();
    assert!(matches!(e, PruneError::Cancelled), "{e}");
    let planned = plan(&f.repo, &index, &thorough()).unwrap();
    assert!(planned.stats.delete.packs + planned.stats.repack.packs > 0);
    let e = execute(&f.repo, &planned, &progress).unwrap_err();
    assert!(matches!(e, PruneError::Cancelled), "{e}");
    assert_eq!(f.packs(), packs_before, "nothing deleted");
    assert_eq!(f.verify(), clean);
    let (_, r) = f.prune(&thorough()).unwrap();
    assert!(r.packs_deleted > 0);
    assert_eq!(f.verify(), clean);
}

/// A listing that names a pack twice marks both entries as indexed: the second one was
/// taken for a pack no index names, and prune deleted the pack (hunt 29).
#[test]
fn a_pack_listed_twice_is_indexed_both_times() {
    let mut f = Fixture::new(Arc::new(MemoryBackend::new()));
    let a = f.data(1, 3000);
    f.cut();
    let root = f.tree(vec![Fixture::file("f", vec![a])]);
    f.snapshot(root);
    f.index();
    let index = f.repo.load_index().unwrap();
    let mut listed = f.repo.list_ids(FileType::Pack).unwrap();
    let n = listed.len();
    listed.extend(listed.clone());
    listed.sort();
    let state = PackState::of(&index, &listed);
    assert_eq!(state.listed_indexed, vec![true; 2 * n]);
    assert!(state.usable.iter().all(|u| *u));
}
