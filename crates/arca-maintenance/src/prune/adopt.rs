//! Adopting the packs an earlier, stopped prune wrote: a prune that failed while repacking
//! (a full disk, a kill) left new packs that no index names, holding copies of blobs the
//! repack needs. Deleting them and copying the same blobs again needs the same free space
//! again, so on a nearly full disk every rerun failed the same way. Instead, a pack no index
//! names is taken as already repacked when it is safe to rely on:
//!
//! * its sealed header opens with this repository's key (so it is authenticated, and every
//!   blob it lists lies inside the file: the header's decoding checks that), read the way
//!   `repair index` reads headers ([`arca_repo::recover::scan_headers`]);
//! * every blob it lists is one the repack needs (a used blob whose kept copy is in a pack
//!   being repacked) that no other adopted pack already provides: such a pack holds what
//!   prune would write, nothing unused and no extra copy;
//! * its bytes hash to its name, and every blob's tag authenticates (the whole pack is read
//!   once, as the repack would read the originals).
//!
//! Relying on such a pack is safe whoever wrote it: prune holds the exclusive lock, so no
//! backup writes meanwhile, and a backup that lost its lock and later indexes the same pack
//! only lists it twice, which the index allows; adopting deletes nothing. Every other pack no
//! index names is deleted first, as before. Executing, prune writes an index naming the
//! adopted packs first and deletes the packs they make redundant (the packs to repack whose
//! used blobs they all hold), then repacks the rest: the rerun frees space before it needs
//! any.

use std::collections::HashSet;

use arca_backend::{ErrorKind, FileType};
use arca_format::{Id, IndexPack};
use arca_repo::blob::authenticate_blob;
use arca_repo::recover::{HeaderScan, scan_headers};
use arca_repo::{Index, RepoError, Repository};

use super::decide::new_pack_bytes;
use super::walk::Marks;
use super::{KeepBlob, PackAction, PruneError, PrunePlan};

/// Moves the packs of `plan.unreferenced` that can stand for part of the repack into
/// `plan.adopted` (see the module documentation): their blobs leave `plan.keep`, and the
/// statistics count them as adopted rather than unreferenced or to copy. Reads each
/// candidate's header, and the whole of each pack that qualifies by its header. Returns the
/// headers read, when any were: [`super::decide::orphan_copies`] needs those of the packs not
/// adopted, and reads only the ones missing.
pub(super) fn adopt(
    repo: &Repository,
    index: &Index,
    marks: &Marks,
    plan: &mut PrunePlan,
    pack_size: u64,
) -> Result<Option<HeaderScan>, PruneError> {
    if plan.keep.is_empty() || plan.unreferenced.is_empty() {
        return Ok(None);
    }
    let scan = scan_headers(repo, &plan.unreferenced);
    // By position in `plan.keep`: the sealed length of a blob an adopted pack provides.
    let mut covered: Vec<Option<u32>> = vec![None; plan.keep.len()];
    let mut adopted: Vec<IndexPack> = vec![];
    for p in &scan.packs {
        let Some(slots) = needed(index, marks, plan, &covered, p) else {
            continue;
        };
        if !intact(repo, p)? {
            continue;
        }
        for (s, len) in slots {
            covered[s] = Some(len);
        }
        adopted.push(p.clone());
    }
    if adopted.is_empty() {
        return Ok(Some(scan));
    }
    let before = new_pack_bytes(
        plan.stats.repack_used_bytes,
        plan.stats.repack_blobs,
        pack_size,
    );
    let mut keep = Vec::with_capacity(plan.keep.len());
    for (k, c) in plan.keep.iter().zip(&covered) {
        match c {
            Some(len) => {
                plan.stats.repack_used_bytes =
                    plan.stats.repack_used_bytes.saturating_sub(u64::from(*len));
                plan.stats.repack_blobs = plan.stats.repack_blobs.saturating_sub(1);
            }
            None => keep.push(*k),
        }
    }
    plan.keep = keep;
    let after = new_pack_bytes(
        plan.stats.repack_used_bytes,
        plan.stats.repack_blobs,
        pack_size,
    );
    plan.stats.freed_bytes = plan.stats.freed_bytes + before - after.min(before);
    for p in &adopted {
        plan.stats.adopted.add(p.size);
        plan.stats.adopted_blobs += p.blobs.len() as u64;
    }
    let ids: HashSet<Id> = adopted.iter().map(|p| p.id).collect();
    plan.unreferenced.retain(|(id, _)| !ids.contains(id));
    plan.adopted = adopted;
    Ok(Some(scan))
}

/// The positions in `plan.keep` that pack `p` provides, with the blobs' sealed lengths, when
/// every blob it lists is one the repack needs and no adopted pack provides yet (`covered`);
/// `None` otherwise.
fn needed(
    index: &Index,
    marks: &Marks,
    plan: &PrunePlan,
    covered: &[Option<u32>],
    p: &IndexPack,
) -> Option<Vec<(usize, u32)>> {
    if p.blobs.is_empty() {
        return None;
    }
    let mut slots = Vec::with_capacity(p.blobs.len());
    for b in &p.blobs {
        let (_, loc) = index.positions(p.kind, &b.id).find(|(pos, loc)| {
            marks.get(*pos) && plan.packs[loc.pack_index as usize].action == PackAction::Repack
        })?;
        // The same blob as the index knows it (a header that says otherwise is not prune's).
        if b.raw_length != loc.raw_length {
            return None;
        }
        let k = KeepBlob {
            pack: loc.pack_index,
            offset: loc.offset,
            key: b.id.prefix16(),
        };
        let slot = plan.keep.binary_search(&k).ok()?;
        if covered[slot].is_some() {
            return None;
        }
        slots.push((slot, loc.length));
    }
    // A blob listed twice in the pack would be an extra copy.
    slots.sort_unstable();
    if slots.windows(2).any(|w| w[0].0 == w[1].0) {
        return None;
    }
    Some(slots)
}

/// Whether pack `p` is whole: its bytes hash to its name and every blob its header lists
/// authenticates. A pack that is damaged, cut short or gone is not; a read that fails for
/// another reason (an outage, access denied) stops the prune, before anything is deleted.
fn intact(repo: &Repository, p: &IndexPack) -> Result<bool, PruneError> {
    let name = p.id.to_hex();
    let buf = match repo.backend().read(FileType::Pack, &name) {
        Ok(b) => b,
        Err(e) if matches!(e.kind, ErrorKind::NotFound | ErrorKind::ShortRead) => {
            return Ok(false);
        }
        Err(e) => return Err(RepoError::from(e).into()),
    };
    if buf.len() as u64 != p.size || Id(*blake3::hash(&buf).as_bytes()) != p.id {
        return Ok(false);
    }
    Ok(p.blobs.iter().all(|b| {
        buf.get(b.offset as usize..b.offset as usize + b.length as usize)
            .is_some_and(|sealed| {
                authenticate_blob(repo.sealer(), p.kind, b.id, p.id, sealed).is_ok()
            })
    }))
}
