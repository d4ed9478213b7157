//! `repair packs`: salvages what damaged packs still hold (a damaged header or trailer,
//! damaged blobs, a truncated or missing file, another pack's content under its name). Every
//! blob the index places in them is read and verified (decrypted and hashed to its id), and
//! so is every blob the pack's own sealed header lists when it opens (a pack whose content is
//! not what the index says); those that verify are copied, still sealed, into new packs, one
//! copy each. The others leave the index (a later backup stores them again if their files
//! still exist; `repair snapshots` cuts them out of the snapshots), unless another pack holds
//! an intact copy: then nothing is lost. A damaged pack is deleted only once every blob of it
//! that verified is saved. The new packs are
//! written first, then the new index (every other pack as the old index files list it, and
//! the new packs; the last file supersedes the old ones), then the old index files and the
//! damaged packs are deleted: a crash at any point leaves every salvaged blob indexed.
//! A pack that no index file describes and whose header does not open is carved
//! ([`arca_repo::carve`]); it is deleted only when every byte of it was accounted for.

use std::collections::{HashMap, HashSet};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexFile, IndexPack, PackEntry};
use arca_repo::pack::{PackWriter, pack_header_from_bytes};
use arca_repo::{Index, RepoError, Repository};

pub use super::headless::CarvedPack;
use super::headless::describe_all;
use super::{PACKS_PER_INDEX_FILE, delete_file, sync_removals};

/// Options of [`repair_packs`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RepairPacksOptions {
    /// Read and verify, report what would be done; write and delete nothing.
    pub dry_run: bool,
}

/// A blob that could not be salvaged.
#[derive(Debug, Clone)]
pub struct LostBlob {
    /// Its kind.
    pub kind: BlobKind,
    /// Its id.
    pub id: Id,
    /// The damaged pack it was in.
    pub pack: Id,
    /// Why it could not be had.
    pub why: String,
    /// Another pack holding an intact copy of it (then only this damaged copy leaves the
    /// index, and nothing is lost).
    pub copy: Option<Id>,
}

/// What [`repair_packs`] did (or would do, in a dry run).
#[derive(Debug, Default)]
pub struct RepairPacksReport {
    /// The packs repaired.
    pub packs: Vec<Id>,
    /// Packs asked for whose header or a blob was made by a newer arca, and what: left as
    /// they are (not damage; upgrade arca).
    pub newer_packs: Vec<(Id, String)>,
    /// Blobs that verified and were copied (or would be), and their sealed bytes.
    pub salvaged_blobs: u64,
    /// Sealed bytes of the salvaged blobs.
    pub salvaged_bytes: u64,
    /// Blobs that did not verify or were not there, and have no intact copy elsewhere: they
    /// leave the index.
    pub lost: Vec<LostBlob>,
    /// Blobs that did not verify or were not there but have an intact copy in another pack
    /// (see [`LostBlob::copy`]): only the damaged copy leaves the index.
    pub damaged_copies: Vec<LostBlob>,
    /// New packs written.
    pub new_packs: Vec<Id>,
    /// Index files written.
    pub index_files_written: Vec<Id>,
    /// Old index files deleted.
    pub index_files_deleted: Vec<Id>,
    /// Damaged packs deleted.
    pub packs_deleted: Vec<Id>,
    /// Packs that no index file described and whose header did not open, carved: their
    /// blobs found by decrypting from each blob's start (see [`arca_repo::carve`]).
    pub carved: Vec<CarvedPack>,
    /// Carved packs left on the backend because some of their bytes held no blob that
    /// verified (see [`CarvedPack::unresolved`]); out of the index.
    pub packs_kept: Vec<Id>,
}

/// The error for a repair that cannot start; nothing was changed.
fn refuse(detail: String) -> RepoError {
    RepoError::Refused(format!("{detail}; nothing was changed"))
}

/// Salvages the blobs of `packs` (see the module documentation). Call it with the
/// repository locked exclusively. A pack in no index file is listed by its own header, or,
/// when that does not open, carved. Refuses, before changing anything, while an index file
/// is damaged, when a pack does not exist (already repaired), and when the backend fails
/// to read for another reason than damage.
pub fn repair_packs(
    repo: &Repository,
    packs: &[Id],
    opts: RepairPacksOptions,
) -> Result<RepairPacksReport, RepoError> {
    let old = repo.load_index_files()?;
    let mut files = Vec::with_capacity(old.len());
    for (id, f) in old {
        match f {
            Ok(f) => files.push((id, f)),
            // The error names the file and says to upgrade arca.
            Err(e) if e.is_newer_format() => {
                return Err(refuse(format!("{e}: run the repair with a newer arca")));
            }
            Err(e) if e.is_corruption() => {
                // The cause alone: the error names the file too.
                return Err(refuse(format!(
                    "index file {id} is damaged ({}): run `arca repair index` first",
                    e.cause()
                )));
            }
            // Not damage (access denied, an outage): `repair index` would not help.
            Err(e) => {
                return Err(refuse(format!(
                    "{} cannot be read: make it readable and run again",
                    super::index::unreadable_index(&id, &e)
                )));
            }
        }
    }
    let mut wanted: HashSet<Id> = packs.iter().copied().collect();
    // What the index says each damaged pack holds (several index files may list a pack).
    let mut described: HashMap<Id, IndexPack> = HashMap::new();
    for (_, f) in &files {
        for p in f.packs.iter().filter(|p| wanted.contains(&p.id)) {
            let d = described.entry(p.id).or_insert_with(|| IndexPack {
                blobs: vec![],
                ..p.clone()
            });
            for b in &p.blobs {
                if !d.blobs.iter().any(|x| x.offset == b.offset) {
                    d.blobs.push(*b);
                }
            }
        }
    }
    let mut rep = RepairPacksReport::default();
    // Packs no index file describes are listed by their own header, or carved.
    let mut headless: Vec<Id> = vec![];
    let mut on_disk: Option<HashSet<Id>> = None;
    for id in packs {
        if rep.packs.contains(id) {
            continue;
        }
        if !described.contains_key(id) {
            let on_disk = match &mut on_disk {
                Some(l) => l,
                // Listed once, however many packs are headless.
                None => on_disk.insert(
                    repo.list_ids(FileType::Pack)?
                        .into_iter()
                        .map(|(p, _)| p)
                        .collect(),
                ),
            };
            if !on_disk.contains(id) {
                return Err(refuse(format!(
                    "pack {id} does not exist (no pack file and no index entry: already \
                     repaired, or deleted)"
                )));
            }
            headless.push(*id);
        }
        rep.packs.push(*id);
    }
    // What the packs no index file describes hold: their headers, or carved (looking for
    // what the snapshots reference and no index places).
    let mut headless_found = if headless.is_empty() {
        HashMap::new()
    } else {
        let index = Index::from_files(files.iter().map(|(_, f)| f));
        describe_all(repo, &index, &headless)?
    };

    let pack_size = repo.config().pack_size as usize;
    let mut writers: [Option<PackWriter>; 2] = [None, None];
    let mut full: Vec<PackWriter> = vec![];
    // Blobs saved (one copy each), and why each indexed blob of a damaged pack failed there.
    let mut saved: HashSet<(BlobKind, Id)> = HashSet::new();
    let mut failed: HashMap<(Id, BlobKind, Id), String> = HashMap::new();
    for id in &rep.packs.clone() {
        let bytes = match repo.backend().read(FileType::Pack, &id.to_hex()) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => vec![],
            // Not damage: the pack may be whole, and is kept. The error names its file.
            Err(e) => {
                let advice = if e.kind == arca_backend::ErrorKind::PermissionDenied {
                    "make it readable (its permissions) and run the repair again"
                } else {
                    "run the repair again once the repository can be read"
                };
                return Err(refuse(format!("{e} (not damage): {advice}")));
            }
        };
        if let Some((found, carved)) = headless_found.remove(id) {
            described.insert(*id, found);
            rep.carved.extend(carved);
        }
        let p = &described[id];
        let cands = candidates(repo, id, p, &bytes);
        // A newer arca's pack is not damaged: rewriting it would lose what that arca reads.
        if let Some(why) = newer_part(repo, id, &cands, &bytes) {
            rep.newer_packs.push((*id, why));
            continue;
        }
        for (kind, b) in cands {
            if saved.contains(&(kind, b.id)) {
                continue;
            }
            let (start, len) = (b.offset as usize, b.length as usize);
            let Some(sealed) = bytes.get(start..start + len) else {
                failed.entry((*id, kind, b.id)).or_insert_with(|| {
                    if bytes.is_empty() {
                        "the pack is missing".into()
                    } else {
                        format!("the pack ends at {} bytes, before it", bytes.len())
                    }
                });
                continue;
            };
            if let Err(e) = repo.open_blob(kind, &b.id, id, sealed, b.raw_length) {
                failed
                    .entry((*id, kind, b.id))
                    .or_insert_with(|| e.blob_cause());
                continue;
            }
            saved.insert((kind, b.id));
            rep.salvaged_blobs += 1;
            rep.salvaged_bytes += len as u64;
            if opts.dry_run {
                continue;
            }
            let slot = &mut writers[kind.code() as usize & 1];
            let w = slot.get_or_insert_with(|| PackWriter::new(kind, pack_size + len));
            w.add_sealed(b.id, b.raw_length, sealed)?;
            if w.size() >= pack_size
                && let Some(w) = slot.take()
            {
                full.push(w);
            }
        }
    }
    for (id, _) in &rep.newer_packs {
        wanted.remove(id);
    }
    rep.packs.retain(|id| wanted.contains(id));
    // Every pack asked for is left as it is: nothing to write (the index stays as it is).
    if rep.packs.is_empty() {
        return Ok(rep);
    }
    // An indexed blob is lost when no copy of it verified in any of the damaged packs (in
    // packs whose contents were swapped, each one's blobs are found in the other's file).
    let unsaved: HashSet<(BlobKind, Id)> = rep
        .packs
        .iter()
        .flat_map(|id| {
            let p = &described[id];
            p.blobs.iter().map(|b| (p.kind, b.id))
        })
        .filter(|k| !saved.contains(k))
        .collect();
    let copies = other_places(&files, &wanted, &unsaved);
    for id in &rep.packs {
        let p = &described[id];
        for b in p.blobs.iter().filter(|b| !saved.contains(&(p.kind, b.id))) {
            let why = failed
                .get(&(*id, p.kind, b.id))
                .cloned()
                .unwrap_or_else(|| "it did not verify".into());
            let mut l = LostBlob {
                kind: p.kind,
                id: b.id,
                pack: *id,
                why,
                copy: None,
            };
            let places = copies.get(&(p.kind, b.id)).map_or(&[][..], Vec::as_slice);
            l.copy = intact_copy(repo, places, p.kind, &b.id);
            if l.copy.is_some() {
                rep.damaged_copies.push(l);
            } else {
                rep.lost.push(l);
            }
        }
    }
    if opts.dry_run {
        return Ok(rep);
    }
    full.extend(writers.into_iter().flatten());

    // New packs first.
    let mut new_packs = vec![];
    for w in full {
        let mut fin = w.finish(repo.sealer())?;
        let name = fin.id.to_hex();
        if fin.index.kind == BlobKind::Tree {
            repo.backend().note_tree_packs(std::slice::from_ref(&name));
        }
        fin.store(repo.backend().as_ref())?;
        rep.new_packs.push(fin.id);
        new_packs.push(fin.index);
    }
    // Then the new index: every other pack once, as the old files list it, and the new ones.
    let mut seen: HashSet<Id> = wanted.clone();
    let mut all: Vec<IndexPack> = files
        .iter()
        .flat_map(|(_, f)| &f.packs)
        .filter(|p| seen.insert(p.id))
        .cloned()
        .collect();
    all.extend(new_packs);
    let old_ids: Vec<Id> = files.iter().map(|(id, _)| *id).collect();
    let chunks: Vec<&[IndexPack]> = all.chunks(PACKS_PER_INDEX_FILE).collect();
    let last = chunks.len().saturating_sub(1);
    for (i, chunk) in chunks.iter().enumerate() {
        let file = IndexFile {
            // The last file replaces the old ones: with it written, the new files cover
            // every pack that stays.
            supersedes: if i == last { old_ids.clone() } else { vec![] },
            packs: chunk.to_vec(),
        };
        rep.index_files_written.push(repo.save_index(&file)?);
    }
    if chunks.is_empty() {
        rep.index_files_written.push(repo.save_index(&IndexFile {
            supersedes: old_ids.clone(),
            packs: vec![],
        })?);
    }
    // Then the old index files, all of them, and only then the damaged packs.
    let written: HashSet<Id> = rep.index_files_written.iter().copied().collect();
    for id in old_ids.iter().filter(|id| !written.contains(id)) {
        if delete_file(repo, FileType::Index, id)? {
            rep.index_files_deleted.push(*id);
        }
    }
    // The old index files must be gone for good before the packs they name are: after a
    // power cut an old index file that came back would place blobs in a deleted pack.
    sync_removals(repo)?;
    for id in &rep.packs {
        // A carved pack with bytes no blob was found in stays: they may hold blobs.
        if rep
            .carved
            .iter()
            .any(|c| c.pack == *id && !c.unresolved.is_empty())
        {
            rep.packs_kept.push(*id);
            continue;
        }
        if delete_file(repo, FileType::Pack, id)? {
            rep.packs_deleted.push(*id);
        }
    }
    Ok(rep)
}

/// Where blobs may lie in damaged pack `id`: where the index places them (`p`), then where
/// the pack's own header does, when it opens with this repository's key (a pack holding
/// another pack's content, as after two pack files were swapped).
/// What in pack `id` was made by a newer arca (its header or a blob), if anything.
fn newer_part(
    repo: &Repository,
    id: &Id,
    cands: &[(BlobKind, PackEntry)],
    bytes: &[u8],
) -> Option<String> {
    // Only an intact pack (its bytes hash to its name) is taken for a newer arca's: a
    // damaged byte of its envelope would read as a newer version.
    if bytes.is_empty() || Id(*blake3::hash(bytes).as_bytes()) != *id {
        return None;
    }
    if let Err(e) = pack_header_from_bytes(repo.sealer(), id, bytes)
        && e.is_newer_format()
    {
        return Some(e.to_string());
    }
    cands.iter().find_map(|(kind, b)| {
        let sealed = bytes.get(b.offset as usize..(b.offset as usize + b.length as usize))?;
        match repo.open_blob(*kind, &b.id, id, sealed, b.raw_length) {
            Err(e) if e.is_newer_format() => Some(e.to_string()),
            _ => None,
        }
    })
}

fn candidates(
    repo: &Repository,
    id: &Id,
    p: &IndexPack,
    bytes: &[u8],
) -> Vec<(BlobKind, PackEntry)> {
    let mut out: Vec<(BlobKind, PackEntry)> = p.blobs.iter().map(|b| (p.kind, *b)).collect();
    if bytes.is_empty() {
        return out;
    }
    if let Ok(h) = pack_header_from_bytes(repo.sealer(), id, bytes) {
        for e in h.entries {
            if !out.iter().any(|(k, b)| *k == h.kind && *b == e) {
                out.push((h.kind, e));
            }
        }
    }
    out
}

/// Where the index files place each of `blobs` in packs other than the `damaged` ones: one
/// pass over the index for all of them (a pass per lost blob read the whole index again).
fn other_places(
    files: &[(Id, IndexFile)],
    damaged: &HashSet<Id>,
    blobs: &HashSet<(BlobKind, Id)>,
) -> HashMap<(BlobKind, Id), Vec<(Id, PackEntry)>> {
    let mut out: HashMap<(BlobKind, Id), Vec<(Id, PackEntry)>> = HashMap::new();
    if blobs.is_empty() {
        return out;
    }
    for p in files
        .iter()
        .flat_map(|(_, f)| &f.packs)
        .filter(|p| !damaged.contains(&p.id))
    {
        for b in &p.blobs {
            if blobs.contains(&(p.kind, b.id)) {
                out.entry((p.kind, b.id)).or_default().push((p.id, *b));
            }
        }
    }
    out
}

/// Of `places` (other packs the index names for blob `id`), one that holds it intact: read
/// and verified. A pack that cannot be read counts as no copy.
fn intact_copy(
    repo: &Repository,
    places: &[(Id, PackEntry)],
    kind: BlobKind,
    id: &Id,
) -> Option<Id> {
    for (pack, b) in places {
        let Ok(sealed) = repo.backend().read_range(
            FileType::Pack,
            &pack.to_hex(),
            u64::from(b.offset),
            u64::from(b.length),
        ) else {
            continue;
        };
        if repo
            .open_blob(kind, id, pack, &sealed, b.raw_length)
            .is_ok()
        {
            return Some(*pack);
        }
    }
    None
}
