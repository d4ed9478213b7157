//! `repair index` and `repair snapshots` on the hand-built fixture: what they rebuild or cut,
//! dry runs, damaged and missing files, and a clean `check` afterwards.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexFile, Tree};

use super::fixture::{self, Fx, build, chunk, snapshot};
use super::*;
use crate::check::{Repair, check};
use crate::{CheckOptions, CheckReport};

fn read_data() -> CheckOptions {
    CheckOptions {
        read_data: true,
        workers: 2,
    }
}

/// `repair index --read-all-packs`.
fn read_all_packs() -> RepairIndexOptions {
    RepairIndexOptions {
        read_all_packs: true,
        ..Default::default()
    }
}

/// `repair snapshots --forget`.
fn forget() -> RepairSnapshotsOptions {
    RepairSnapshotsOptions {
        forget: true,
        ..Default::default()
    }
}

fn sorted(mut ids: Vec<Id>) -> Vec<Id> {
    ids.sort();
    ids
}

fn clean(rep: &CheckReport) {
    assert!(rep.is_ok(), "{:?}", rep.errors);
    assert!(
        rep.repairs.iter().all(|p| p.repair == Repair::Prune),
        "{:?}",
        rep.repairs
    );
}

/// Every blob of the fixture reads back through a fresh index.
fn all_blobs_read(fx: &Fx) {
    let index = fx.repo.load_index().unwrap();
    for p in fx.packs() {
        for b in &p.blobs {
            fx.repo.read_blob(&index, p.kind, &b.id).unwrap();
        }
    }
}

#[test]
fn index_is_rebuilt_from_pack_headers_when_every_index_file_is_gone() {
    let fx = build();
    fx.delete(FileType::Index, &fx.index_file);
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert!(!rep.is_ok());
    assert_eq!(rep.repairs[0].repair, Repair::Index);
    // No pack is called harmless: without the trees, what data the snapshots use is unknown.
    assert!(
        rep.notes.iter().all(|n| !n.contains("harmless")),
        "{:?}",
        rep.notes
    );
    for p in [&fx.data1, &fx.data2] {
        let id = p.id.to_string();
        assert!(
            rep.notes
                .iter()
                .any(|n| n.contains(&id) && n.contains("may hold data the snapshots use")),
            "{:?}",
            rep.notes
        );
    }

    // A dry run reports and changes nothing.
    let dry = repair_index(
        &fx.repo,
        RepairIndexOptions {
            dry_run: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((dry.packs_indexed, dry.blobs_indexed), (4, 7));
    assert!(fx.ids(FileType::Index).is_empty());

    let r = repair_index(&fx.repo, RepairIndexOptions::default()).unwrap();
    assert_eq!(r.packs_found, 4);
    assert_eq!(r.headers_read, 4);
    assert_eq!(r.packs_from_index, 0);
    assert_eq!((r.packs_indexed, r.blobs_indexed), (4, 7));
    assert_eq!(r.written.len(), 1);
    assert!(r.unreadable.is_empty() && r.missing_packs.is_empty());
    // The new index file names each pack exactly as its writer did.
    let f = fx.repo.load_index_file(&r.written[0]).unwrap();
    let mut want = fx.packs();
    want.sort_by_key(|p| p.id);
    assert_eq!(f.packs, want);
    all_blobs_read(&fx);
    clean(&check(&fx.repo, read_data()).unwrap());
}

#[test]
fn a_damaged_index_file_is_left_out_then_replaced() {
    let fx = build();
    // A second, intact index file naming the data packs again.
    let second = fx
        .repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![fx.data1.clone()],
        })
        .unwrap();
    fx.flip(FileType::Index, &fx.index_file, 30);
    // Loading goes on without the damaged file, which is named.
    let (index, damaged) = fx.repo.load_index_report().unwrap();
    assert_eq!(damaged.len(), 1);
    assert_eq!(damaged[0].0, fx.index_file);
    assert!(index.contains(BlobKind::Data, &fx.data1.blobs[0].id));
    assert!(!index.contains(BlobKind::Tree, &fx.root));
    assert_eq!(fx.repo.load_index().unwrap().len(), index.len());
    // Check reports it and proposes `repair index`; repair snapshots refuses to run.
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains(&fx.index_file.to_hex()))
    );
    assert_eq!(rep.repairs[0].repair, Repair::Index);
    let e = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap_err();
    assert!(e.to_string().contains("arca repair index"), "{e}");

    // Packs the intact file describes keep their entries; the others' headers are read.
    let r = repair_index(&fx.repo, RepairIndexOptions::default()).unwrap();
    assert_eq!(r.damaged_index_files.len(), 1);
    assert_eq!(r.packs_from_index, 1);
    assert_eq!(r.headers_read, 3);
    assert_eq!(r.packs_indexed, 4);
    assert_eq!(
        sorted(r.deleted.clone()),
        sorted(vec![fx.index_file, second])
    );
    assert_eq!(fx.ids(FileType::Index), r.written);
    let f = fx.repo.load_index_file(&r.written[0]).unwrap();
    assert_eq!(f.supersedes.len(), 2);
    all_blobs_read(&fx);
    clean(&check(&fx.repo, read_data()).unwrap());

    // With read_all_packs every header is read again; the result is the same.
    let r2 = repair_index(&fx.repo, read_all_packs()).unwrap();
    assert_eq!((r2.headers_read, r2.packs_indexed), (4, 4));
    assert_eq!(
        fx.repo.load_index_file(&r2.written[0]).unwrap().packs,
        f.packs
    );
}

#[test]
fn unreadable_and_missing_packs_are_left_out_and_reported() {
    let fx = build();
    // A pack whose header is damaged, one that is garbage, and an indexed one deleted.
    let n = fx
        .backend
        .read(FileType::Pack, &fx.data2.id.to_hex())
        .unwrap()
        .len();
    fx.flip(FileType::Pack, &fx.data2.id, n - 20);
    let junk = Id([7; 32]);
    fx.backend
        .write(FileType::Pack, &junk.to_hex(), &[1u8; 3000])
        .unwrap();
    fx.delete_pack(&fx.sub_pack);
    let r = repair_index(&fx.repo, read_all_packs()).unwrap();
    let bad: Vec<Id> = r.unreadable.iter().map(|u| u.id).collect();
    assert_eq!(sorted(bad), sorted(vec![fx.data2.id, junk]), "{r:?}");
    assert!(r.unreadable.iter().all(|u| u.damaged));
    assert_eq!(r.missing_packs, vec![fx.sub_pack.id]);
    // Its blobs are in no other pack; of the 4 headers tried, 2 were read.
    assert_eq!(r.blobs_lost, fx.sub_pack.blobs.len() as u64);
    assert_eq!((r.packs_found, r.headers_read), (4, 2));
    // The pack with the damaged header keeps the entries the old index had for it (its blobs
    // are intact); the garbage one, which no index described, is left out.
    assert_eq!(r.kept_unreadable, vec![fx.data2.id]);
    assert_eq!(r.packs_indexed, 3);
    // Nothing was deleted but the old index file.
    assert_eq!(fx.ids(FileType::Pack).len(), 4);
    let index = fx.repo.load_index().unwrap();
    assert_eq!(index.packs().len(), 3);
    for b in &fx.data2.blobs {
        fx.repo.read_blob(&index, BlobKind::Data, &b.id).unwrap();
    }
}

#[test]
fn a_damaged_pack_header_is_rewritten_by_repair_packs_and_nothing_is_lost() {
    let fx = build();
    let size = fx.data1.size as usize;
    fx.flip(FileType::Pack, &fx.data1.id, size - 20);
    let rep = check(&fx.repo, read_data()).unwrap();
    assert_eq!(rep.repairs[0].repair, Repair::Packs, "{:?}", rep.repairs);
    // A dry run reads and verifies, and changes nothing.
    let dry = repair_packs(
        &fx.repo,
        &[fx.data1.id],
        RepairPacksOptions { dry_run: true },
    )
    .unwrap();
    assert_eq!(dry.salvaged_blobs, fx.data1.blobs.len() as u64);
    assert!(dry.lost.is_empty() && dry.new_packs.is_empty());
    assert!(fx.ids(FileType::Pack).contains(&fx.data1.id));
    let r = repair_packs(&fx.repo, &[fx.data1.id], RepairPacksOptions::default()).unwrap();
    assert_eq!(r.salvaged_blobs, fx.data1.blobs.len() as u64);
    assert!(r.lost.is_empty(), "{:?}", r.lost);
    assert_eq!(r.new_packs.len(), 1);
    assert_eq!(r.packs_deleted, vec![fx.data1.id]);
    assert_eq!(r.index_files_deleted, vec![fx.index_file]);
    clean(&check(&fx.repo, read_data()).unwrap());
    all_blobs_read(&fx);
}

#[test]
fn a_truncated_pack_keeps_the_blobs_before_the_cut() {
    let fx = build();
    // Cut data1 in its second blob: the first survives, the second and /b's are lost.
    let second = fx.data1.blobs[1];
    let bytes = fx
        .backend
        .read(FileType::Pack, &fx.data1.id.to_hex())
        .unwrap();
    let cut = (second.offset + second.length / 2) as usize;
    fx.backend
        .write(FileType::Pack, &fx.data1.id.to_hex(), &bytes[..cut])
        .unwrap();
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    let kinds: Vec<Repair> = rep.repairs.iter().map(|p| p.repair).collect();
    assert_eq!(
        kinds,
        vec![Repair::Packs, Repair::Snapshots],
        "{:?}",
        rep.repairs
    );
    // repair index leaves the cut pack's entries alone (it cannot read its header).
    let ri = repair_index(&fx.repo, read_all_packs()).unwrap();
    assert_eq!(ri.kept_unreadable, vec![fx.data1.id]);
    let r = repair_packs(&fx.repo, &[fx.data1.id], RepairPacksOptions::default()).unwrap();
    assert_eq!(r.salvaged_blobs, 1);
    let lost: Vec<Id> = r.lost.iter().map(|l| l.id).collect();
    assert_eq!(
        sorted(lost),
        sorted(fx.data1.blobs[1..].iter().map(|b| b.id).collect())
    );
    let index = fx.repo.load_index().unwrap();
    fx.repo
        .read_blob(&index, BlobKind::Data, &fx.data1.blobs[0].id)
        .unwrap();
    // What is lost is cut out of the snapshot; then all is clean.
    let rep = check(&fx.repo, read_data()).unwrap();
    let kinds: Vec<Repair> = rep.repairs.iter().map(|p| p.repair).collect();
    assert_eq!(kinds, vec![Repair::Snapshots], "{:?}", rep.repairs);
    repair_snapshots(&fx.repo, &forget()).unwrap();
    clean(&check(&fx.repo, read_data()).unwrap());
}

#[test]
fn repair_snapshots_keeps_what_a_pack_of_the_wrong_size_still_holds() {
    // A few bytes appended: every blob is intact, so nothing is cut, even when repair
    // snapshots runs before the repair packs that check proposes first.
    let fx = build();
    let name = fx.data1.id.to_hex();
    let bytes = fx.backend.read(FileType::Pack, &name).unwrap();
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"xx\n");
    fx.backend.write(FileType::Pack, &name, &longer).unwrap();
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    let snap = rep.repairs.iter().find(|p| p.repair == Repair::Snapshots);
    assert!(
        snap.is_some_and(|p| p.reason.contains("`repair packs` above first")),
        "{:?}",
        rep.repairs
    );
    let r = repair_snapshots(&fx.repo, &forget()).unwrap();
    assert!(r.damaged.is_empty(), "{:?}", r.damaged);
    assert_eq!(fx.ids(FileType::Snapshot), vec![fx.snapshot]);

    // Cut short in its second blob: only what lies past the cut is lost (a1, and b0 after
    // it), not the first blob.
    let second = fx.data1.blobs[1];
    let cut = (second.offset + second.length / 2) as usize;
    fx.backend
        .write(FileType::Pack, &name, &bytes[..cut])
        .unwrap();
    let r = repair_snapshots(
        &fx.repo,
        &RepairSnapshotsOptions {
            dry_run: true,
            ..forget()
        },
    )
    .unwrap();
    let a_len = chunk("a0").len() as u64;
    let changes = &r.damaged[0].changes;
    assert_eq!(
        changes[0],
        Change {
            path: "/a".into(),
            loss: Loss::FileZeroed {
                size: 3 * a_len,
                zeroed: a_len,
                lost_blobs: vec![second.id],
            },
        },
        "{changes:?}"
    );
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(changes[1].path, std::path::PathBuf::from("/b"));
}

/// A pack file no index names is listed by its own header (not carved) and its blobs
/// indexed; a damaged index file is refused.
#[test]
fn repair_packs_takes_an_unindexed_packs_header_and_refuses_a_damaged_index() {
    let fx = build();
    let extra = fixture::pack(&fx.repo, BlobKind::Data, &[chunk("x0")]);
    let rep = repair_packs(&fx.repo, &[extra.id], RepairPacksOptions::default()).unwrap();
    assert_eq!(rep.salvaged_blobs, 1);
    assert!(rep.carved.is_empty() && rep.lost.is_empty(), "{rep:?}");
    assert_eq!(rep.packs_deleted, vec![extra.id]);
    let index = fx.repo.load_index().unwrap();
    assert!(index.contains(BlobKind::Data, &fx.repo.key().blob_id(&chunk("x0"))));
    let packs = fx.ids(FileType::Pack);
    fx.flip(FileType::Index, &fx.ids(FileType::Index)[0], 40);
    let e = repair_packs(&fx.repo, &[fx.data1.id], RepairPacksOptions::default()).unwrap_err();
    assert!(e.to_string().contains("repair index"), "{e}");
    assert_eq!(fx.ids(FileType::Pack), packs);
}

#[test]
fn lost_data_blobs_become_zeros_and_the_copy_is_tagged() {
    let fx = build();
    fx.delete_pack(&fx.data2);
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    let kinds: Vec<_> = rep.repairs.iter().map(|p| p.repair).collect();
    assert_eq!(kinds, vec![Repair::Index, Repair::Snapshots]);

    // Dry run: the same report, nothing written.
    let packs_before = fx.ids(FileType::Pack).len();
    let dry = repair_snapshots(
        &fx.repo,
        &RepairSnapshotsOptions {
            dry_run: true,
            ..forget()
        },
    )
    .unwrap();
    assert_eq!(dry.damaged.len(), 1);
    assert_eq!(dry.damaged[0].repaired, None);
    // Every chunk of the fixture is as long: one zero blob stands in for both.
    assert_eq!((dry.trees_written, dry.zero_blobs_written), (2, 1));
    assert_eq!(fx.ids(FileType::Pack).len(), packs_before);
    assert_eq!(fx.ids(FileType::Snapshot), vec![fx.snapshot]);

    let r = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap();
    assert_eq!(r.snapshots, 1);
    let d = &r.damaged[0];
    assert_eq!(d.original, fx.snapshot);
    assert!(!d.forgotten);
    let a_len = chunk("a0").len() as u64;
    assert_eq!(
        d.changes,
        vec![
            Change {
                path: "/a".into(),
                loss: Loss::FileZeroed {
                    size: 3 * a_len,
                    zeroed: a_len,
                    lost_blobs: vec![fx.data2.blobs[0].id],
                },
            },
            Change {
                path: "/sub/c".into(),
                loss: Loss::FileZeroed {
                    size: chunk("c0").len() as u64,
                    zeroed: chunk("c0").len() as u64,
                    lost_blobs: vec![fx.data2.blobs[1].id],
                },
            },
        ]
    );
    // Two new trees (root and /sub) in a tree pack, the zero blob in a data pack, named by
    // one index file.
    assert_eq!(
        (r.trees_written, r.zero_blobs_written, r.packs_written),
        (2, 1, 2)
    );
    assert!(r.index_file.is_some());
    let new = d.repaired.unwrap();
    let s = fx.repo.load_snapshot(&new).unwrap();
    assert_eq!(s.tags, vec!["daily".to_string(), REPAIRED_TAG.to_string()]);
    let orig = fx.repo.load_snapshot(&fx.snapshot).unwrap();
    assert_eq!(
        (s.time, &s.paths, &s.hostname),
        (orig.time, &orig.paths, &orig.hostname)
    );
    let root = fx.tree(&s.tree);
    // The file keeps its size and its intact blocks; the lost one reads as zeros.
    let a = root.find(b"a").unwrap();
    let was = fx.tree(&fx.root).find(b"a").unwrap().content.clone();
    assert_eq!((a.size, &a.content[..2]), (3 * a_len, &was[..2]));
    let index = fx.repo.load_index().unwrap();
    let zeros = fx
        .repo
        .read_blob(&index, BlobKind::Data, &a.content[2].id)
        .unwrap();
    assert_eq!(zeros, vec![0u8; a_len as usize]);
    assert_eq!(root.find(b"b"), fx.tree(&fx.root).find(b"b"));
    // The original is kept without `forget`; once the index is repaired too, check is
    // clean but for the original's lost data.
    assert_eq!(fx.ids(FileType::Snapshot).len(), 2);
    repair_index(&fx.repo, RepairIndexOptions::default()).unwrap();
    let rep = check(&fx.repo, read_data()).unwrap();
    assert_eq!(rep.affected.len(), 1);
    assert_eq!(rep.affected[0].snapshot, fx.snapshot);

    // Again with forget: the original goes; the repaired copy is not repaired twice.
    let r = repair_snapshots(&fx.repo, &forget()).unwrap();
    assert_eq!(r.snapshots, 2);
    assert_eq!(r.damaged.len(), 1);
    assert!(r.damaged[0].forgotten);
    // The same trees: nothing new is written, and the copy the first run saved is taken
    // (a second, equal copy was saved: hunt 22).
    assert_eq!((r.trees_written, r.zero_blobs_written), (0, 0));
    assert_eq!(r.damaged[0].repaired, Some(new));
    assert!(r.damaged[0].adopted);
    assert_eq!(fx.ids(FileType::Snapshot), vec![new]);
    clean(&check(&fx.repo, read_data()).unwrap());
}

#[test]
fn a_lost_listing_becomes_an_empty_directory_and_a_lost_root_cannot_be_saved() {
    let fx = build();
    let orig = fx.tree(&fx.root);
    // A second snapshot sharing the root: each distinct tree is rewritten once.
    let other = fx.repo.save_snapshot(&snapshot(fx.root, &[])).unwrap();
    fx.delete_pack(&fx.sub_pack);
    let r = repair_snapshots(&fx.repo, &forget()).unwrap();
    assert_eq!(r.damaged.len(), 2);
    let trees: Vec<Id> = r
        .damaged
        .iter()
        .map(|d| fx.repo.load_snapshot(&d.repaired.unwrap()).unwrap().tree)
        .collect();
    assert_eq!(trees[0], trees[1]);
    for d in &r.damaged {
        assert_eq!(d.changes.len(), 1);
        assert_eq!(d.changes[0].path, PathBuf::from("/sub"));
        assert!(matches!(d.changes[0].loss, Loss::DirectoryEmptied { .. }));
    }
    // Root and empty directory.
    assert_eq!(r.trees_written, 2);
    let root = fx.tree(&trees[0]);
    let sub = root.find(b"sub").unwrap();
    assert!(fx.tree(&sub.subtree.unwrap()).nodes.is_empty());
    assert_eq!(root.find(b"a"), orig.find(b"a"));
    let snaps = fx.ids(FileType::Snapshot);
    assert!(!snaps.contains(&fx.snapshot) && !snaps.contains(&other));

    // Now the root listing is lost too: nothing to salvage; forget removes the snapshot.
    let fx = build();
    fx.delete_pack(&fx.root_pack);
    let r = repair_snapshots(&fx.repo, &forget()).unwrap();
    assert_eq!(r.damaged.len(), 1);
    assert!(r.damaged[0].root_lost.is_some());
    assert!(r.damaged[0].forgotten);
    assert_eq!(r.damaged[0].repaired, None);
    assert!(fx.ids(FileType::Snapshot).is_empty());
}

#[test]
fn unindexed_packs_are_not_taken_for_lost_data() {
    let fx = build();
    fx.delete(FileType::Index, &fx.index_file);
    let r = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap();
    assert_eq!(r.adopted_packs, 4);
    assert!(r.damaged.is_empty(), "{r:?}");
    assert_eq!(fx.ids(FileType::Index).len(), 1);
    all_blobs_read(&fx);
}

#[test]
fn damaged_snapshot_files_are_removed_with_forget() {
    let fx = build();
    fx.flip(FileType::Snapshot, &fx.snapshot, 40);
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert!(rep.repairs.iter().any(|p| p.repair == Repair::Snapshots));
    let r = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap();
    assert_eq!(r.damaged_files.len(), 1);
    assert_eq!(r.damaged_files_deleted, 0);
    assert_eq!(fx.ids(FileType::Snapshot).len(), 1);
    let r = repair_snapshots(&fx.repo, &forget()).unwrap();
    assert_eq!(r.damaged_files_deleted, 1);
    assert!(fx.ids(FileType::Snapshot).is_empty());
}

#[test]
fn a_listing_giving_a_blob_another_length_is_damage_check_names_and_repair_cuts() {
    let fx = build();
    // /x lists a0 with 10 more bytes than it holds, then b0: a restore would place a0's
    // bytes and 10 zeros, and b0 shifted.
    let mut x = super::fixture::file(&fx.repo, "x", &["a0", "b0"]);
    x.content[0].len += 10;
    x.size += 10;
    let crafted = fx.add_snapshot(&arca_format::Tree {
        nodes: vec![x, super::fixture::file(&fx.repo, "y", &["a0"])],
    });
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    let err = rep.errors.join("\n");
    assert!(err.contains("the listing gives data blob"), "{err}");
    assert!(err.contains("damaged listing"), "{err}");
    let hit: Vec<_> = rep
        .affected
        .iter()
        .map(|a| (a.snapshot, a.paths.clone()))
        .collect();
    assert_eq!(hit, vec![(crafted, vec![std::path::PathBuf::from("/x")])]);
    assert!(rep.repairs.iter().any(|p| p.repair == Repair::Snapshots));
    let r = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap();
    let d = r.damaged.iter().find(|d| d.original == crafted).unwrap();
    assert_eq!(d.changes.len(), 1);
    assert_eq!(d.changes[0].path, std::path::PathBuf::from("/x"));
    // The blob listed at the wrong length is as lost: zeros of the listed length; b0 stays.
    let a_len = chunk("a0").len() as u64;
    assert!(
        matches!(&d.changes[0].loss, Loss::FileZeroed { zeroed, .. } if *zeroed == a_len + 10),
        "{:?}",
        d.changes
    );
    // The original snapshot of the fixture is untouched.
    assert!(r.damaged.iter().all(|d| d.original != fx.snapshot));
}

/// An index file that cannot be read (access denied) is not damage: `repair index` stops
/// before changing anything. It deleted the file, the only record of a pack whose header is
/// damaged, whose blobs were then lost; `repair packs` sent the user there.
#[test]
fn an_index_file_that_cannot_be_read_stops_repair_index_and_is_kept() {
    use arca_backend::{Fault, FaultBackend, Op, Rule, Trigger};
    use arca_repo::Repository;
    use std::sync::Arc;
    let fx = build();
    let size = fx.data1.size as usize;
    fx.flip(FileType::Pack, &fx.data1.id, size - 20);
    let before = fx.ids(FileType::Index);
    let fault = Arc::new(FaultBackend::new(fx.backend.clone()));
    fault.add(Rule {
        op: Some(Op::Read),
        file_type: Some(FileType::Index),
        trigger: Trigger::Always,
        fault: Fault::Fail(std::io::ErrorKind::PermissionDenied),
    });
    let denied = Repository::open(fault.clone(), b"pw").unwrap();
    let e = repair_index(&denied, RepairIndexOptions::default()).unwrap_err();
    assert!(e.to_string().contains("cannot be read"), "{e}");
    assert!(e.to_string().contains("nothing was changed"), "{e}");
    let e = repair_packs(&denied, &[fx.data1.id], RepairPacksOptions::default()).unwrap_err();
    assert!(!e.to_string().contains("repair index"), "{e}");
    assert!(e.to_string().contains("cannot be read"), "{e}");
    assert_eq!(fx.ids(FileType::Index), before, "no index file deleted");
    assert_eq!(fx.ids(FileType::Pack).len(), 4);
    // Readable again, the repair the damage calls for saves every blob.
    let r = repair_packs(&fx.repo, &[fx.data1.id], RepairPacksOptions::default()).unwrap();
    assert!(r.lost.is_empty(), "{:?}", r.lost);
    clean(&check(&fx.repo, read_data()).unwrap());
    all_blobs_read(&fx);
}

#[test]
fn swapped_pack_contents_are_salvaged_from_their_own_headers() {
    let fx = build();
    let (one, two) = (fx.data1.id.to_hex(), fx.data2.id.to_hex());
    let b1 = fx.backend.read(FileType::Pack, &one).unwrap();
    let b2 = fx.backend.read(FileType::Pack, &two).unwrap();
    fx.backend.write(FileType::Pack, &one, &b2).unwrap();
    fx.backend.write(FileType::Pack, &two, &b1).unwrap();
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert_eq!(rep.repairs[0].repair, Repair::Packs, "{:?}", rep.repairs);
    // Following check's advice loses nothing: each pack's blobs are found through the
    // other file's sealed header.
    let dry = repair_packs(
        &fx.repo,
        &[fx.data1.id, fx.data2.id],
        RepairPacksOptions { dry_run: true },
    )
    .unwrap();
    assert!(dry.lost.is_empty(), "{:?}", dry.lost);
    let r = repair_packs(
        &fx.repo,
        &[fx.data1.id, fx.data2.id],
        RepairPacksOptions::default(),
    )
    .unwrap();
    assert!(r.lost.is_empty(), "{:?}", r.lost);
    assert_eq!(r.salvaged_blobs, 5);
    assert_eq!(
        sorted(r.packs_deleted),
        sorted(vec![fx.data1.id, fx.data2.id])
    );
    clean(&check(&fx.repo, read_data()).unwrap());
    all_blobs_read(&fx);
    let r = repair_snapshots(&fx.repo, &forget()).unwrap();
    assert!(r.damaged.is_empty(), "{:?}", r.damaged);
}

#[test]
fn repair_packs_run_again_says_the_pack_does_not_exist() {
    let fx = build();
    let b = fx.data1.blobs[0];
    fx.flip(FileType::Pack, &fx.data1.id, b.offset as usize + 30);
    repair_packs(&fx.repo, &[fx.data1.id], RepairPacksOptions::default()).unwrap();
    let index_files = sorted(fx.ids(FileType::Index));
    let e = repair_packs(&fx.repo, &[fx.data1.id], RepairPacksOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("does not exist") && msg.contains(&fx.data1.id.to_hex()),
        "{msg}"
    );
    assert!(!msg.contains("repair index"), "{msg}");
    assert_eq!(sorted(fx.ids(FileType::Index)), index_files);
}

#[test]
fn a_damaged_blob_with_an_intact_copy_elsewhere_is_not_lost() {
    let fx = build();
    // b0 stored twice: in data1 and in a pack of its own.
    let copy = fixture::pack(&fx.repo, BlobKind::Data, &[chunk("b0")]);
    fx.repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![copy.clone()],
        })
        .unwrap();
    let b = fx.data1.blobs[2];
    fx.flip(FileType::Pack, &fx.data1.id, b.offset as usize + 30);
    let rep = check(&fx.repo, read_data()).unwrap();
    assert!(rep.affected.is_empty(), "{:?}", rep.affected);
    let r = repair_packs(&fx.repo, &[fx.data1.id], RepairPacksOptions::default()).unwrap();
    assert!(r.lost.is_empty(), "{:?}", r.lost);
    assert_eq!(r.damaged_copies.len(), 1, "{:?}", r.damaged_copies);
    assert_eq!(r.damaged_copies[0].id, b.id);
    assert_eq!(r.damaged_copies[0].copy, Some(copy.id));
    assert_eq!(r.salvaged_blobs, 2);
    clean(&check(&fx.repo, read_data()).unwrap());
    all_blobs_read(&fx);
}

#[test]
fn recover_saves_the_listings_below_a_lost_root_and_each_resolves() {
    use crate::recover::{RecoverOptions, recover};
    let fx = build();
    // A second snapshot whose root names /sub (intact) and /gone, a listing never stored.
    let gone = fx.repo.key().blob_id(b"a listing that was lost");
    let sub = fx.tree(&fx.root).find(b"sub").unwrap().clone();
    let mut gone_dir = sub.clone();
    gone_dir.name = b"gone".to_vec();
    gone_dir.subtree = Some(gone);
    let mid = Tree {
        nodes: vec![gone_dir, sub],
    };
    let mid_bytes = mid.encode().unwrap();
    let mid_id = fx.repo.key().blob_id(&mid_bytes);
    let mid_pack = fixture::pack(&fx.repo, BlobKind::Tree, &[mid_bytes]);
    fx.repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![mid_pack],
        })
        .unwrap();
    let mut d = fx.tree(&fx.root).find(b"sub").unwrap().clone();
    d.name = b"mid".to_vec();
    d.subtree = Some(mid_id);
    let second = fx.add_snapshot(&Tree { nodes: vec![d] });
    // Its root listing is lost: repair snapshots removes it, and says recover may help.
    let root2 = fx.repo.load_snapshot(&second).unwrap().tree;
    let index = fx.repo.load_index().unwrap();
    let root_pack = index.get(BlobKind::Tree, &root2).unwrap().pack.id;
    fx.delete(FileType::Pack, &root_pack);
    repair_index(&fx.repo, RepairIndexOptions::default()).unwrap();
    let r = repair_snapshots(&fx.repo, &forget()).unwrap();
    assert!(
        r.damaged
            .iter()
            .any(|d| d.root_lost.is_some() && d.forgotten)
    );
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    clean(&rep);
    // recover saves /mid's listing; its lost /gone becomes an empty folder, and check
    // stays clean.
    let rec = recover(&fx.repo, &RecoverOptions::default()).unwrap();
    assert_eq!(rec.roots, vec![mid_id], "{rec:?}");
    let want = PathBuf::from("/recover").join(mid_id.short()).join("gone");
    assert_eq!(rec.emptied, vec![(want, gone)]);
    let rep = check(&fx.repo, read_data()).unwrap();
    assert!(rep.is_ok(), "{:?}", rep.errors);
    // Run again, it finds nothing new: the original of the rewritten listing, left
    // unreached, was recovered already (each run saved one more snapshot, hunt 17).
    let again = recover(&fx.repo, &RecoverOptions::default()).unwrap();
    assert!(
        again.roots.is_empty() && again.snapshot.is_none(),
        "{again:?}"
    );
}

/// With several new index files, only the last one written names the old files it
/// supersedes: a crash before it leaves the old files in force for readers that honour
/// `supersedes` (recover, list blobs), so they never see an incomplete new set alone.
#[test]
fn repair_index_supersedes_the_old_files_in_the_last_new_one() {
    let fx = build();
    let second = fx
        .repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![fx.data1.clone()],
        })
        .unwrap();
    let old = sorted(vec![fx.index_file, second]);
    let r = index::repair_index_in(&fx.repo, read_all_packs(), 1).unwrap();
    assert_eq!(r.written.len(), 4, "one pack per new index file");
    let (last, earlier) = r.written.split_last().unwrap();
    for id in earlier {
        let f = fx.repo.load_index_file(id).unwrap();
        assert!(f.supersedes.is_empty(), "{id}: {:?}", f.supersedes);
    }
    let f = fx.repo.load_index_file(last).unwrap();
    assert_eq!(sorted(f.supersedes), old);
    assert_eq!(sorted(r.deleted.clone()), old);
    all_blobs_read(&fx);
    clean(&check(&fx.repo, read_data()).unwrap());
}

/// `repair snapshots ID`, then `repair snapshots --forget ID`: the second run takes the copy
/// the first saved, though that copy is not among the snapshots named (a second, equal copy
/// was saved: hunt 23).
#[test]
fn a_repair_of_named_snapshots_takes_the_copy_an_earlier_run_saved() {
    let fx = build();
    fx.delete_pack(&fx.data2);
    let named = RepairSnapshotsOptions {
        snapshots: vec![fx.snapshot],
        ..Default::default()
    };
    let first = repair_snapshots(&fx.repo, &named).unwrap();
    let copy = first.damaged[0].repaired.unwrap();
    let again = repair_snapshots(
        &fx.repo,
        &RepairSnapshotsOptions {
            forget: true,
            ..named
        },
    )
    .unwrap();
    assert_eq!(again.damaged[0].repaired, Some(copy));
    assert!(again.damaged[0].forgotten);
    assert_eq!(fx.ids(FileType::Snapshot), vec![copy]);
}

/// After a power cut, an old index file that came back must not place blobs in a pack that
/// `repair packs` deleted: the index deletions are made durable before the packs go.
#[test]
fn repair_makes_index_deletions_durable_before_it_deletes_packs() {
    use std::sync::Arc;

    use crate::recorder::Recorder;

    let fx = build();
    let size = fx.data1.size as usize;
    fx.flip(FileType::Pack, &fx.data1.id, size - 20);
    let rec = Arc::new(Recorder::new(fx.backend.clone()));
    let repo = arca_repo::Repository::open(rec.clone(), b"pw").unwrap();
    let r = repair_packs(&repo, &[fx.data1.id], RepairPacksOptions::default()).unwrap();
    assert_eq!(r.packs_deleted, vec![fx.data1.id]);
    assert_eq!(rec.log(), ["delete Index", "sync", "delete Pack"]);

    let rec = Arc::new(Recorder::new(fx.backend.clone()));
    let repo = arca_repo::Repository::open(rec.clone(), b"pw").unwrap();
    let r = repair_index(&repo, read_all_packs()).unwrap();
    assert!(!r.deleted.is_empty(), "{r:?}");
    assert_eq!(rec.log(), ["delete Index", "sync"]);

    fx.flip(FileType::Snapshot, &fx.snapshot, 40);
    let rec = Arc::new(Recorder::new(fx.backend.clone()));
    let repo = arca_repo::Repository::open(rec.clone(), b"pw").unwrap();
    assert_eq!(
        repair_snapshots(&repo, &forget())
            .unwrap()
            .damaged_files_deleted,
        1
    );
    assert_eq!(rec.log(), ["delete Snapshot", "sync"]);
}

/// A lost block that was all zeros (a hole) is not lost: the zero blob that stands in for
/// lost blocks of its length is that very blob, stored again, and the snapshot is whole.
#[test]
fn a_lost_block_of_zeros_is_whole_again() {
    let fx = build();
    let zeros = vec![0u8; 4096];
    let id = fx.repo.key().blob_id(&zeros);
    let p = fixture::pack(&fx.repo, BlobKind::Data, std::slice::from_ref(&zeros));
    fx.repo
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![p.clone()],
        })
        .unwrap();
    let mut hole = fixture::file(&fx.repo, "hole", &[]);
    hole.content = vec![arca_format::ContentRef { id, len: 4096 }];
    hole.size = 4096;
    let crafted = fx.add_snapshot(&Tree { nodes: vec![hole] });
    fx.delete_pack(&p);
    repair_index(&fx.repo, RepairIndexOptions::default()).unwrap();
    let r = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap();
    assert!(
        r.damaged.iter().all(|d| d.original != crafted),
        "{:?}",
        r.damaged
    );
    assert_eq!(r.zero_blobs_written, 1);
    let index = fx.repo.load_index().unwrap();
    assert_eq!(
        fx.repo.read_blob(&index, BlobKind::Data, &id).unwrap(),
        zeros
    );
    clean(&check(&fx.repo, read_data()).unwrap());
}
