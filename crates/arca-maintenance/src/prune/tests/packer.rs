//! The packs the repacking threads fill together: none is uploaded while a blob in it awaits
//! its check, however full it is, and none is lost.

use std::collections::HashSet;
use std::sync::Arc;

use arca_backend::{FileType, MemoryBackend};
use arca_format::{BlobKind, Id};
use arca_repo::blob::{SealedBlob, seal_blob};

use super::super::Progress;
use super::super::packer::Packer;
use super::fixture::{Fixture, bytes};

fn packs(f: &Fixture) -> HashSet<String> {
    f.backend
        .list(FileType::Pack)
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect()
}

/// A data blob of `len` bytes made from `seed`: its id, length and sealed form.
fn blob(f: &Fixture, seed: u64, len: usize) -> (Id, u32, SealedBlob) {
    let data = bytes(seed, len);
    let id = f.repo.key().blob_id(&data);
    let sealed = seal_blob(f.repo.sealer(), BlobKind::Data, id, &data, 0).unwrap();
    (id, len as u32, sealed)
}

/// Two "threads" fill one pack (1 MiB packs here, blobs of 300 KiB): one checks each of its
/// blobs at once, the other has not checked its first yet. The pack is closed when a blob no
/// longer fits, and not uploaded until that check; then exactly that pack is, and `finish`
/// uploads the pack still being filled and reports both.
#[test]
fn a_full_pack_waits_for_the_check_of_every_blob_in_it() {
    let f = Fixture::new(Arc::new(MemoryBackend::new()));
    let before = packs(&f);
    let progress = Progress::default();
    let packer = Packer::new(&f.repo, &progress);
    let blob = |seed: u64| blob(&f, seed, 300 << 10);
    // "Thread A" appends and has not checked yet.
    let (id, len, sealed) = blob(1);
    let waiting = packer
        .append(BlobKind::Data, id, len, &sealed.bytes)
        .unwrap();
    // "Thread B" appends three, checking each: the third does not fit, which closes the
    // first pack (A's blob and two of B's) and opens a second.
    for seed in 2..5 {
        let (id, len, sealed) = blob(seed);
        let t = packer
            .append(BlobKind::Data, id, len, &sealed.bytes)
            .unwrap();
        packer.checked(t).unwrap();
    }
    assert_eq!(packs(&f), before, "uploaded with a blob unchecked");
    // A further blob goes into the second pack; the first still waits.
    let (id, len, sealed) = blob(5);
    let next = packer
        .append(BlobKind::Data, id, len, &sealed.bytes)
        .unwrap();
    assert_eq!(packs(&f), before);
    packer.checked(waiting).unwrap();
    let after = packs(&f);
    assert_eq!(
        after.difference(&before).count(),
        1,
        "the full pack, once checked"
    );
    packer.checked(next).unwrap();
    let packed = packer.finish().unwrap();
    assert_eq!(packed.blobs, 5);
    assert_eq!(
        packed.packs.len(),
        2,
        "the full pack and the one being filled"
    );
    let listed = packs(&f);
    assert_eq!(listed.difference(&before).count(), 2);
    let blobs: usize = packed.packs.iter().map(|p| p.blobs.len()).sum();
    assert_eq!(blobs, 5);
}

/// A blob left unchecked (its thread failed) keeps its pack out of the repository, and
/// `finish` refuses rather than leave it out of the new index unnoticed.
#[test]
fn a_blob_never_checked_is_never_uploaded() {
    let f = Fixture::new(Arc::new(MemoryBackend::new()));
    let before = packs(&f);
    let progress = Progress::default();
    let packer = Packer::new(&f.repo, &progress);
    let (id, len, sealed) = blob(&f, 9, 1000);
    let _unchecked = packer
        .append(BlobKind::Data, id, len, &sealed.bytes)
        .unwrap();
    assert!(packer.finish().is_err());
    assert_eq!(packs(&f), before);
}
