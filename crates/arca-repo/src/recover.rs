//! Recovery after an interrupted backup: adopting packs that were uploaded but never named
//! by an index file.
//!
//! A backup writes packs first and index files naming them at checkpoints, so a backup killed
//! between a pack upload and the next checkpoint leaves complete packs no index names. They
//! are invisible, not harmful, but their blobs would be uploaded again. Every pack carries
//! its own sealed header listing its blobs, so such a pack can be indexed after the fact:
//! [`adopt_unindexed_packs`] reads the header of each unindexed pack and writes one index
//! file naming every pack whose header opens with this repository's key.
//!
//! Adopting is safe while other clients write: a pack is only listed once it is complete
//! (backends write atomically), so a running backup's pack that is adopted here and indexed
//! again by its own checkpoint is merely listed twice, which readers tolerate (the first
//! listing is used; both describe the same header). A pack whose header cannot be read is
//! left alone and reported; nothing is ever deleted here.

use std::collections::HashSet;

use arca_backend::FileType;
use arca_format::{Id, IndexFile, IndexPack};

use crate::index::IndexBuilder;
use crate::pack::read_pack_header;
use crate::{Index, Repository, Result};

/// Threads reading pack headers at once (each read is one or two small range requests).
const HEADER_READERS: usize = 4;

/// A pack that no index names and whose header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadablePack {
    /// Pack id (its file name).
    pub id: Id,
    /// File size in bytes.
    pub size: u64,
    /// Why its header could not be used.
    pub error: String,
    /// Whether the pack itself is at fault (truncated, damaged, foreign, vanished), as
    /// opposed to the backend failing to read it (which may pass: the pack may be fine).
    pub damaged: bool,
}

/// What [`adopt_unindexed_packs`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adopted {
    /// Packs adopted (now named by the new index file).
    pub packs: usize,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Blobs they hold.
    pub blobs: u64,
    /// The index file written, if any pack was adopted.
    pub index_file: Option<Id>,
    /// Unindexed packs left alone because their header is unreadable (truncated, damaged or
    /// sealed with another repository's key).
    pub unreadable: Vec<UnreadablePack>,
}

/// Packs in the backend that `index` does not name, with their sizes, sorted by id.
pub fn unindexed_packs(repo: &Repository, index: &Index) -> Result<Vec<(Id, u64)>> {
    Ok(not_indexed(index, repo.list_ids(FileType::Pack)?))
}

/// The packs of a listing that `index` does not name, in listing order.
fn not_indexed(index: &Index, listed: Vec<(Id, u64)>) -> Vec<(Id, u64)> {
    let known: HashSet<Id> = index.packs().iter().map(|p| p.id).collect();
    listed
        .into_iter()
        .filter(|(id, _)| !known.contains(id))
        .collect()
}

/// Reads the header of every pack the backend holds but `index` does not name; writes one
/// index file naming those whose header opens, and reloads `index` from the repository so
/// their blobs are found. Packs whose header cannot be read are reported in
/// [`Adopted::unreadable`] and left in place.
///
/// Costs one listing of the packs; when packs are adopted (only after an interrupted run),
/// a read of each such pack (its header, then all of it: only a pack whose bytes hash to
/// its name is adopted) and a reload of the index.
pub fn adopt_unindexed_packs(repo: &Repository, index: &mut Index) -> Result<Adopted> {
    adopt_listed(repo, index, repo.list_ids(FileType::Pack)?)
}

/// [`adopt_unindexed_packs`] with the listing of the packs (ids and sizes) already made, for
/// a caller that listed them while it loaded `index`. Packs uploaded since the listing are
/// not adopted now (the next run does it).
pub fn adopt_listed(
    repo: &Repository,
    index: &mut Index,
    listed: Vec<(Id, u64)>,
) -> Result<Adopted> {
    adopt(repo, index, listed, true)
}

/// [`adopt_unindexed_packs`] for a dry run: the headers of the packs `index` does not name
/// are read the same way and `index` gains those that open, in memory only; nothing is
/// written ([`Adopted::index_file`] stays `None`). What a real run would find in the target.
pub fn preview_unindexed_packs(repo: &Repository, index: &mut Index) -> Result<Adopted> {
    adopt(repo, index, repo.list_ids(FileType::Pack)?, false)
}

fn adopt(
    repo: &Repository,
    index: &mut Index,
    listed: Vec<(Id, u64)>,
    write: bool,
) -> Result<Adopted> {
    let orphans = not_indexed(index, listed);
    let mut out = Adopted::default();
    if orphans.is_empty() {
        return Ok(out);
    }
    let mut scan = scan_headers(repo, &orphans);
    // A header that opens says nothing of the blobs before it: one byte flipped in a blob
    // of a leftover pack, adopted, was what the next backup's copy of that data referred
    // to, and the new snapshot could not be restored (hunt H16). Only a pack whose bytes
    // hash to its name is as its writer left it.
    let checked = crate::par::map_ordered(
        &scan.packs,
        HEADER_READERS,
        || (),
        |_, p| match repo.backend().read(FileType::Pack, &p.id.to_hex()) {
            Ok(bytes) if Id(*blake3::hash(&bytes).as_bytes()) == p.id => Ok(()),
            Ok(_) => Err(("content does not match its id (damaged)".to_string(), true)),
            Err(e) => {
                let damaged = e.is_not_found();
                Err((crate::RepoError::from(e).cause(), damaged))
            }
        },
    );
    let mut intact = Vec::with_capacity(scan.packs.len());
    for (p, r) in std::mem::take(&mut scan.packs).into_iter().zip(checked) {
        match r.unwrap_or_else(|| Err(("pack reader failed".to_string(), false))) {
            Ok(()) => intact.push(p),
            Err((error, damaged)) => scan.unreadable.push(UnreadablePack {
                id: p.id,
                size: p.size,
                error,
                damaged,
            }),
        }
    }
    scan.packs = intact;
    out.packs = scan.packs.len();
    out.bytes = scan.packs.iter().map(|p| p.size).sum();
    out.blobs = scan.packs.iter().map(|p| p.blobs.len() as u64).sum();
    out.unreadable = scan.unreadable;
    if scan.packs.is_empty() {
        return Ok(out);
    }
    let file = IndexFile {
        supersedes: vec![],
        packs: scan.packs,
    };
    if write {
        out.index_file = Some(repo.save_index(&file)?);
        // The index has no in-place insertion (it is one sorted vector); loading it again also
        // picks up anything other clients indexed meanwhile.
        // Damaged index files were reported by the first load.
        *index = repo.load_index_report()?.0;
    } else {
        // The index files as the first load took them (the damaged ones left out), and the
        // adopted packs.
        let mut b = IndexBuilder::new();
        for (_, f) in repo.load_index_files()? {
            match f {
                Ok(f) => b.add(&f),
                Err(e) if e.is_unusable() => {}
                Err(e) => return Err(e),
            }
        }
        b.add(&file);
        *index = b.finish();
    }
    Ok(out)
}

/// What reading the sealed headers of some packs gave (see [`scan_headers`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderScan {
    /// The index entries of the packs whose header opened, in the order asked.
    pub packs: Vec<IndexPack>,
    /// The packs whose header could not be used, and why.
    pub unreadable: Vec<UnreadablePack>,
}

/// Reads the sealed header of each of `packs` (id and file size), a few at once, and
/// returns the index entry of every pack whose header opens with this repository's key;
/// the others are reported, never touched. Transient backend failures are retried by the
/// backend itself; a read that still fails makes the pack unreadable here.
///
/// This is how interrupted backups are adopted and how `repair index` rebuilds the index.
pub fn scan_headers(repo: &Repository, packs: &[(Id, u64)]) -> HeaderScan {
    let mut out = HeaderScan::default();
    for (&(id, size), r) in packs.iter().zip(read_headers(repo, packs)) {
        match r {
            Ok(p) => out.packs.push(p),
            Err((error, damaged)) => out.unreadable.push(UnreadablePack {
                id,
                size,
                error,
                damaged,
            }),
        }
    }
    out
}

/// The index entries of `packs` from their headers, in order; an error is the reason a
/// header could not be used and whether the pack is at fault.
fn read_headers(
    repo: &Repository,
    packs: &[(Id, u64)],
) -> Vec<std::result::Result<IndexPack, (String, bool)>> {
    crate::par::map_ordered(
        packs,
        HEADER_READERS,
        || (),
        |_, &(id, size)| {
            read_pack_header(repo.backend().as_ref(), repo.sealer(), &id, size)
                .map(|h| IndexPack {
                    id,
                    kind: h.kind,
                    size,
                    blobs: h.entries,
                })
                .map_err(|e| {
                    let damaged = e.is_corruption()
                        || matches!(&e, crate::RepoError::Backend(b) if b.is_not_found());
                    (e.cause(), damaged)
                })
        },
    )
    .into_iter()
    // A reader thread that panicked leaves its packs unread: they count as unreadable.
    .map(|r| r.unwrap_or_else(|| Err(("header reader failed".to_string(), false))))
    .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use arca_backend::{Backend, LocalBackend, MemoryBackend};
    use arca_format::BlobKind;

    use super::*;
    use crate::Repository;
    use crate::blob::seal_blob;
    use crate::pack::{FinishedPack, PackWriter};

    use crate::testing::repo;

    /// A pack of `n` data blobs derived from `seed`, uploaded without an index; returns the
    /// pack and its blobs.
    fn upload_pack(r: &Repository, seed: u32, n: u32) -> (FinishedPack, Vec<(Id, Vec<u8>)>) {
        let mut w = PackWriter::new(BlobKind::Data, 1 << 16);
        let mut blobs = vec![];
        for i in 0..n {
            let data = format!("pack {seed} blob {i} ")
                .repeat(i as usize % 5 + 1)
                .into_bytes();
            let id = r.key().blob_id(&data);
            w.add(&seal_blob(r.sealer(), BlobKind::Data, id, &data, 3).unwrap())
                .unwrap();
            blobs.push((id, data));
        }
        let p = w.finish(r.sealer()).unwrap();
        r.backend()
            .write(FileType::Pack, &p.id.to_hex(), &p.bytes)
            .unwrap();
        (p, blobs)
    }

    fn index_files(r: &Repository) -> usize {
        r.list_ids(FileType::Index).unwrap().len()
    }

    /// A leftover pack with a byte flipped in a blob (its header intact) is not adopted: a
    /// backup would refer to the damaged blob instead of storing the data again.
    #[test]
    fn a_pack_damaged_before_its_header_is_not_adopted() {
        let r = repo(Arc::new(MemoryBackend::new()));
        let (good, _) = upload_pack(&r, 1, 10);
        let (bad, blobs) = upload_pack(&r, 2, 10);
        let mut bytes = bad.bytes.clone();
        bytes[20] ^= 1;
        r.backend()
            .write(FileType::Pack, &bad.id.to_hex(), &bytes)
            .unwrap();
        let mut index = r.load_index().unwrap();
        let a = adopt_unindexed_packs(&r, &mut index).unwrap();
        assert_eq!(a.packs, 1, "{a:?}");
        assert!(index.packs().iter().any(|p| p.id == good.id));
        assert!(!index.contains(BlobKind::Data, &blobs[0].0));
        assert_eq!(a.unreadable.len(), 1, "{a:?}");
        assert_eq!(a.unreadable[0].id, bad.id);
        assert!(a.unreadable[0].damaged);
        assert!(a.unreadable[0].error.contains("does not match"), "{a:?}");
    }

    #[test]
    fn unindexed_packs_are_adopted_and_their_blobs_found() {
        let r = repo(Arc::new(MemoryBackend::new()));
        // One pack indexed as a backup would, three left unindexed by a "kill".
        let (indexed, _) = upload_pack(&r, 0, 10);
        r.save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![indexed.index.clone()],
        })
        .unwrap();
        let orphans: Vec<_> = (1..4).map(|s| upload_pack(&r, s, 20 + s)).collect();
        let mut index = r.load_index().unwrap();
        assert_eq!(index.packs().len(), 1);
        for (_, blobs) in &orphans {
            assert!(!index.contains(BlobKind::Data, &blobs[0].0));
        }

        let a = adopt_unindexed_packs(&r, &mut index).unwrap();
        assert_eq!(a.packs, 3, "{a:?}");
        assert_eq!(
            a.bytes,
            orphans
                .iter()
                .map(|(p, _)| p.bytes.len() as u64)
                .sum::<u64>()
        );
        assert_eq!(a.blobs, 21 + 22 + 23);
        assert!(a.unreadable.is_empty(), "{a:?}");
        assert_eq!(index_files(&r), 2);
        // The new index file describes each pack exactly as its writer would have.
        let f = r.load_index_file(&a.index_file.unwrap()).unwrap();
        let mut want: Vec<_> = orphans.iter().map(|(p, _)| p.index.clone()).collect();
        want.sort_by_key(|p| p.id);
        assert_eq!(f.packs, want);
        // The caller's index now finds every blob, and the blobs read back.
        assert_eq!(index.packs().len(), 4);
        for (_, blobs) in &orphans {
            for (id, data) in blobs {
                assert_eq!(&r.read_blob(&index, BlobKind::Data, id).unwrap(), data);
            }
        }
        // So does a fresh load.
        let fresh = r.load_index().unwrap();
        assert_eq!(fresh.len(), index.len());

        // Nothing is left to adopt, and no index file is written.
        let again = adopt_unindexed_packs(&r, &mut index).unwrap();
        assert_eq!(again, Adopted::default());
        assert_eq!(index_files(&r), 2);
    }

    #[test]
    fn corrupt_and_foreign_packs_are_skipped_and_reported() {
        let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let r = repo(b.clone());
        let (good, good_blobs) = upload_pack(&r, 1, 8);
        // Truncated: the trailer is gone.
        let (cut, _) = upload_pack(&r, 2, 8);
        b.write(
            FileType::Pack,
            &cut.id.to_hex(),
            &cut.bytes[..cut.bytes.len() - 50],
        )
        .unwrap();
        // A flipped byte in the sealed header.
        let (flipped, _) = upload_pack(&r, 3, 8);
        let mut bytes = flipped.bytes.clone();
        let n = bytes.len();
        bytes[n - 20] ^= 0x40;
        b.write(FileType::Pack, &flipped.id.to_hex(), &bytes)
            .unwrap();
        // Sealed with another repository's key.
        let other = repo(Arc::new(MemoryBackend::new()));
        let (foreign, _) = upload_pack(&other, 4, 8);
        b.write(FileType::Pack, &foreign.id.to_hex(), &foreign.bytes)
            .unwrap();
        // Garbage, and a file that is too small to be a pack.
        let junk = Id([7; 32]);
        b.write(FileType::Pack, &junk.to_hex(), &[1u8; 5000])
            .unwrap();
        let tiny = Id([8; 32]);
        b.write(FileType::Pack, &tiny.to_hex(), b"APTR").unwrap();

        let mut index = r.load_index().unwrap();
        let a = adopt_unindexed_packs(&r, &mut index).unwrap();
        assert_eq!(a.packs, 1, "{a:?}");
        assert_eq!(a.blobs, 8);
        let mut bad: Vec<Id> = a.unreadable.iter().map(|u| u.id).collect();
        bad.sort();
        let mut want = vec![cut.id, flipped.id, foreign.id, junk, tiny];
        want.sort();
        assert_eq!(bad, want, "{a:?}");
        for u in &a.unreadable {
            assert!(!u.error.is_empty());
            assert!(u.damaged, "{u:?}");
            if u.id == cut.id {
                assert_eq!(u.size, cut.bytes.len() as u64 - 50);
            }
        }
        for (id, data) in &good_blobs {
            assert_eq!(&r.read_blob(&index, BlobKind::Data, id).unwrap(), data);
        }
        assert_eq!(index.packs().len(), 1);
        assert_eq!(index.packs()[0].id, good.id);
        // Nothing was deleted; a second call reports the same packs and writes nothing.
        assert_eq!(r.list_ids(FileType::Pack).unwrap().len(), 6);
        let files = index_files(&r);
        let again = adopt_unindexed_packs(&r, &mut index).unwrap();
        assert_eq!(again.packs, 0);
        assert_eq!(again.index_file, None);
        assert_eq!(again.unreadable, a.unreadable);
        assert_eq!(index_files(&r), files);
    }

    #[test]
    fn a_failing_backend_is_not_taken_for_a_damaged_pack() {
        use arca_backend::{Fault, FaultBackend, Op, Rule, Trigger};
        let fault = Arc::new(FaultBackend::new(MemoryBackend::new()));
        let r = repo(fault.clone());
        let (p, _) = upload_pack(&r, 1, 5);
        fault.add(Rule {
            op: Some(Op::Read),
            file_type: Some(FileType::Pack),
            trigger: Trigger::Always,
            fault: Fault::Fail(std::io::ErrorKind::PermissionDenied),
        });
        let scan = scan_headers(&r, &[(p.id, p.bytes.len() as u64)]);
        assert!(scan.packs.is_empty());
        assert_eq!(scan.unreadable.len(), 1);
        assert!(!scan.unreadable[0].damaged, "{scan:?}");
        fault.clear();
        let scan = scan_headers(&r, &[(p.id, p.bytes.len() as u64)]);
        assert_eq!(scan.packs, vec![p.index]);
    }

    #[test]
    fn a_pack_indexed_twice_by_concurrent_writers_loads_once() {
        // Backup B uploaded a pack and has not reached its checkpoint; backup A starts and
        // adopts it; then B's checkpoint indexes it again.
        let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let r = repo(b.clone());
        let (p, blobs) = upload_pack(&r, 1, 30);
        let (q, _) = upload_pack(&r, 2, 5);
        let mut index = r.load_index().unwrap();
        let a = adopt_unindexed_packs(&r, &mut index).unwrap();
        assert_eq!(a.packs, 2);
        r.save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![p.index.clone()],
        })
        .unwrap();
        // A stale in-memory index (loaded before A's adoption) adopts them a second time.
        let mut stale = Index::default();
        let a2 = adopt_unindexed_packs(&r, &mut stale).unwrap();
        assert_eq!(a2.packs, 2);
        assert_eq!(index_files(&r), 3);
        let index = r.load_index().unwrap();
        assert_eq!(index.packs().len(), 2);
        assert_eq!(index.len(), 35);
        assert_eq!(stale.len(), 35);
        for (id, data) in &blobs {
            assert_eq!(&r.read_blob(&index, BlobKind::Data, id).unwrap(), data);
        }
        let _ = q;
    }

    #[test]
    fn local_temporary_files_are_not_packs() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("repo");
        let r = repo(Arc::new(LocalBackend::new(&root)));
        let (p, _) = upload_pack(&r, 1, 12);
        // What a kill during the write of a pack leaves: a partial temporary file.
        let shard = root.join("data").join(&p.id.to_hex()[..2]);
        std::fs::write(shard.join(".tmp-0123456789abcdef"), &p.bytes[..100]).unwrap();
        // And a pack truncated under its final name (a backend without atomic writes).
        let (cut, _) = upload_pack(&r, 2, 12);
        let cut_path = root
            .join("data")
            .join(&cut.id.to_hex()[..2])
            .join(cut.id.to_hex());
        std::fs::write(&cut_path, &cut.bytes[..cut.bytes.len() / 2]).unwrap();
        let mut index = r.load_index().unwrap();
        let a = adopt_unindexed_packs(&r, &mut index).unwrap();
        assert_eq!(a.packs, 1, "{a:?}");
        assert_eq!(a.unreadable.len(), 1, "{a:?}");
        assert_eq!(a.unreadable[0].id, cut.id);
        assert!(shard.join(".tmp-0123456789abcdef").exists());
        assert!(cut_path.exists());
    }
}
