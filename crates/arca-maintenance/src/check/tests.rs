//! `--read-data-subset` parsing and selection, and `check` on the hand-built fixture: the
//! packs read, and the repair proposed for each kind of damage.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::repair::fixture::build;

fn packs(n: u8) -> Vec<(Id, u64)> {
    (0..n)
        .map(|i| {
            let mut id = [i; 32];
            id[0] = i.wrapping_mul(37);
            (Id(id), 1000 + u64::from(i))
        })
        .collect()
}

#[test]
fn subsets_parse_with_restics_limits() {
    assert_eq!(
        DataSubset::parse("2/5").unwrap(),
        DataSubset::Group { n: 2, of: 5 }
    );
    assert_eq!(
        DataSubset::parse("256/256").unwrap(),
        DataSubset::Group { n: 256, of: 256 }
    );
    assert_eq!(
        DataSubset::parse("12.5%").unwrap(),
        DataSubset::Percent(12.5)
    );
    assert_eq!(
        DataSubset::parse("100%").unwrap(),
        DataSubset::Percent(100.0)
    );
    assert_eq!(DataSubset::parse("2G").unwrap(), DataSubset::Bytes(2 << 30));
    assert_eq!(DataSubset::parse("4096").unwrap(), DataSubset::Bytes(4096));
    for bad in [
        "0/3", "4/3", "1/0", "1/257", "a/b", "1/2/3", "0%", "101%", "-5%", "x%", "", "0", "12Q",
        "1.2.3",
    ] {
        assert!(DataSubset::parse(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(DataSubset::Group { n: 1, of: 3 }.to_string(), "1/3");
}

#[test]
fn groups_partition_the_packs_and_shares_are_random() {
    let all = packs(200);
    for of in [1u32, 2, 3, 7, 256] {
        let mut seen = HashSet::new();
        for n in 1..=of {
            let g = DataSubset::Group { n, of }.select(&all);
            for id in &g {
                assert_eq!(u32::from(id.0[0]) % of, n - 1);
                assert!(seen.insert(*id), "{id} in two groups");
            }
        }
        assert_eq!(seen.len(), all.len(), "{of} groups");
    }
    let half = DataSubset::Percent(50.0);
    let a = half.select_seeded(&all, 1);
    let b = half.select_seeded(&all, 2);
    assert_eq!((a.len(), b.len()), (100, 100));
    assert_ne!(a, b);
    assert_eq!(a, half.select_seeded(&all, 1));
    // At least one pack; all of them at 100%; nothing from nothing.
    assert_eq!(DataSubset::Percent(0.1).select(&all).len(), 1);
    assert_eq!(DataSubset::Percent(100.0).select(&all).len(), 200);
    assert!(DataSubset::Percent(50.0).select(&[]).is_empty());
    // A size is the same share of the packs.
    let total: u64 = all.iter().map(|p| p.1).sum();
    assert_eq!(DataSubset::Bytes(total / 4).select(&all).len(), 50);
    assert_eq!(DataSubset::Bytes(total / 4 - 1).select(&all).len(), 49);
    assert_eq!(DataSubset::Bytes(u64::MAX).select(&all).len(), 200);
}

#[test]
fn check_reads_only_the_chosen_packs() {
    let fx = build();
    let mut read = 0;
    for n in 1..=3 {
        let rep = check_with(
            &fx.repo,
            CheckOptions::default(),
            Some(DataSubset::Group { n, of: 3 }),
        )
        .unwrap();
        assert!(rep.is_ok(), "{:?}", rep.errors);
        read += rep.packs_read;
    }
    assert_eq!(read, 4);
    let rep = check_with(
        &fx.repo,
        CheckOptions::default(),
        Some(DataSubset::Percent(50.0)),
    )
    .unwrap();
    assert_eq!((rep.packs, rep.packs_read), (4, 2));
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert_eq!(rep.packs_read, 0);
    assert!(rep.repairs.is_empty(), "{:?}", rep.repairs);
}

#[test]
fn each_kind_of_damage_proposes_its_repair() {
    // A blob damaged inside a pack: move the pack away, then repair.
    let fx = build();
    let e = fx.data1.blobs[1];
    fx.flip(
        FileType::Pack,
        &fx.data1.id,
        (e.offset + e.length / 2) as usize,
    );
    let rep = check(
        &fx.repo,
        CheckOptions {
            read_data: true,
            workers: 1,
        },
    )
    .unwrap();
    let kinds: Vec<Repair> = rep.repairs.iter().map(|p| p.repair).collect();
    assert_eq!(kinds, vec![Repair::Packs, Repair::Snapshots]);
    assert_eq!(
        rep.repairs[0].command_line(),
        format!("arca repair packs {}", fx.data1.id.to_hex())
    );

    // A damaged pack header (its blobs intact): repair packs, which rewrites it; repair index
    // could not fix it.
    let fx = build();
    let size = fx.data1.size as usize;
    fx.flip(FileType::Pack, &fx.data1.id, size - 20);
    let rep = check(
        &fx.repo,
        CheckOptions {
            read_data: true,
            workers: 1,
        },
    )
    .unwrap();
    let kinds: Vec<Repair> = rep.repairs.iter().map(|p| p.repair).collect();
    assert_eq!(kinds, vec![Repair::Packs], "{:?}", rep.repairs);
    assert_eq!(rep.repairs[0].args, vec![fx.data1.id.to_hex()]);

    // A missing pack: repair index drops it; the snapshot then needs repair snapshots.
    let fx = build();
    fx.delete_pack(&fx.data2);
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    let kinds: Vec<Repair> = rep.repairs.iter().map(|p| p.repair).collect();
    assert_eq!(
        kinds,
        vec![Repair::Index, Repair::Snapshots],
        "{:?}",
        rep.repairs
    );
    assert!(rep.repairs[0].args.is_empty());

    // Data no snapshot uses (a snapshot forgotten): prune, not an error.
    let fx = build();
    fx.delete(FileType::Snapshot, &fx.snapshot);
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert!(rep.is_ok());
    assert_eq!(rep.repairs.len(), 1);
    assert_eq!(rep.repairs[0].repair, Repair::Prune);
    assert!(
        rep.repairs[0].reason.starts_with("7 blobs"),
        "{:?}",
        rep.repairs
    );
    assert_eq!(Repair::Prune.command(), "arca prune");
}

#[test]
fn a_damaged_key_file_is_an_error() {
    let fx = build();
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert!(rep.is_ok(), "{:?}", rep.errors);
    let key = fx.repo.key_id();
    fx.flip(FileType::Key, &key, 40);
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert_eq!(rep.errors.len(), 1, "{:?}", rep.errors);
    assert!(
        rep.errors[0].contains(&key.to_hex()) && rep.errors[0].contains("damaged"),
        "{:?}",
        rep.errors
    );
}

/// A key file renamed (intact) that opens the repository is said to be the key in use, with
/// how to replace it; check advised removing it, after which the password opened nothing.
#[test]
fn a_renamed_key_in_use_is_not_advised_away() {
    let fx = build();
    let name = fx.repo.key_id().to_hex();
    let bytes = fx.backend.read(FileType::Key, &name).unwrap();
    fx.backend
        .write(FileType::Key, &"2".repeat(64), &bytes)
        .unwrap();
    fx.backend.delete(FileType::Key, &name).unwrap();
    let repo = Repository::open(fx.backend.clone(), b"pw").unwrap();
    let rep = check(&repo, CheckOptions::default()).unwrap();
    assert_eq!(rep.errors.len(), 1, "{:?}", rep.errors);
    assert!(
        rep.errors[0].contains("it is the key in use"),
        "{:?}",
        rep.errors
    );
}

/// A pack whose size differs from the index's is read when its data is checked, and only the
/// blobs that fail count as damaged: a few bytes appended damage none (no file is hit), a pack
/// cut short loses only what lay past the cut. Without reading it, all its blobs count.
#[test]
fn a_pack_of_the_wrong_size_loses_only_the_blobs_that_fail() {
    let read_data = CheckOptions {
        read_data: true,
        workers: 1,
    };
    let fx = build();
    let name = fx.data1.id.to_hex();
    let whole = fx.backend.read(FileType::Pack, &name).unwrap();
    let mut longer = whole.clone();
    longer.extend_from_slice(b"appended by a sync tool");
    fx.backend.write(FileType::Pack, &name, &longer).unwrap();
    let rep = check(&fx.repo, read_data).unwrap();
    assert!(!rep.is_ok());
    assert!(rep.affected.is_empty(), "{:?}", rep.affected);
    let kinds: Vec<Repair> = rep.repairs.iter().map(|p| p.repair).collect();
    assert_eq!(kinds, vec![Repair::Packs], "{:?}", rep.repairs);
    // Not read: nothing is known of its blobs.
    let rep = check(&fx.repo, CheckOptions::default()).unwrap();
    assert!(!rep.affected.is_empty());

    // Cut in its second blob: the first blob is kept, the others are lost.
    let second = fx.data1.blobs[1];
    let cut = &whole[..(second.offset + second.length / 2) as usize];
    fx.backend.write(FileType::Pack, &name, cut).unwrap();
    let rep = check(&fx.repo, read_data).unwrap();
    let d = rep
        .damaged_packs
        .iter()
        .find(|d| d.id == fx.data1.id)
        .unwrap();
    assert_eq!(
        d.bad_blobs.len(),
        fx.data1.blobs.len() - 1,
        "{:?}",
        d.bad_blobs
    );
    assert!(!d.bad_blobs.contains(&fx.data1.blobs[0].id));
}

/// A check whose cancel flag is set stops with `Cancelled` (the UI's Cancel button did
/// nothing: the check read every pack and ended "done").
#[test]
fn a_cancelled_check_stops() {
    let fx = build();
    let flag = Arc::new(AtomicBool::new(true));
    let opts = CheckOptions {
        read_data: true,
        workers: 0,
    };
    let progress = CheckProgress::with_cancel(flag.clone());
    let e = check_with_progress(&fx.repo, opts, None, &progress).unwrap_err();
    assert!(matches!(e, RepoError::Cancelled(_)), "{e}");
    assert_eq!(progress.packs_read.load(Ordering::Relaxed), 0);
    flag.store(false, Ordering::Relaxed);
    let rep = check_with_progress(&fx.repo, opts, None, &progress).unwrap();
    assert!(rep.is_ok(), "{:?}", rep.errors);
}
