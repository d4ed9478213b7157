//! `repair packs`: salvages what damaged packs still hold (a damaged header or trailer,
//! damaged blobs, a truncated or missing file). Every blob the index places in them is read
//! and verified (decrypted and hashed to its id); those that verify are copied, still sealed,
//! into new packs, the others leave the index (a later backup stores them again if their
//! files still exist; `repair snapshots` cuts them out of the snapshots). The new packs are
//! written first, then the new index (every other pack as the old index files list it, and
//! the new packs; the last file supersedes the old ones), then the old index files and the
//! damaged packs are deleted: a crash at any point leaves every salvaged blob indexed.

use std::collections::{HashMap, HashSet};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexFile, IndexPack};
use arca_repo::pack::PackWriter;
use arca_repo::{RepoError, Repository};

use super::{PACKS_PER_INDEX_FILE, delete_file};

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
}

/// What [`repair_packs`] did (or would do, in a dry run).
#[derive(Debug, Default)]
pub struct RepairPacksReport {
    /// The packs repaired.
    pub packs: Vec<Id>,
    /// Blobs that verified and were copied (or would be), and their sealed bytes.
    pub salvaged_blobs: u64,
    /// Sealed bytes of the salvaged blobs.
    pub salvaged_bytes: u64,
    /// Blobs that did not verify or were not there: they leave the index.
    pub lost: Vec<LostBlob>,
    /// New packs written.
    pub new_packs: Vec<Id>,
    /// Index files written.
    pub index_files_written: Vec<Id>,
    /// Old index files deleted.
    pub index_files_deleted: Vec<Id>,
    /// Damaged packs deleted.
    pub packs_deleted: Vec<Id>,
}

/// The error for a repair that cannot start; nothing was changed.
fn refuse(detail: String) -> RepoError {
    RepoError::Invalid {
        what: "repair packs",
        detail: format!("{detail}; nothing was changed"),
    }
}

/// Salvages the blobs of `packs` (see the module documentation). Call it with the
/// repository locked exclusively. Refuses, before changing anything, while an index file is
/// damaged or when a pack is in no index file (`repair index` first), and when the backend
/// fails to read for another reason than damage.
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
            Err(e) if e.is_corruption() => {
                return Err(refuse(format!(
                    "index file {id} is damaged ({e}): run `arca repair index` first"
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
    let wanted: HashSet<Id> = packs.iter().copied().collect();
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
    for id in packs {
        if !described.contains_key(id) {
            return Err(refuse(format!(
                "pack {id} is in no index file, so which blobs it holds is unknown: run `arca \
                 repair index` first (it reads the headers of packs no index names)"
            )));
        }
        if !rep.packs.contains(id) {
            rep.packs.push(*id);
        }
    }

    let pack_size = repo.config().pack_size as usize;
    let mut writers: [Option<PackWriter>; 2] = [None, None];
    let mut full: Vec<PackWriter> = vec![];
    for id in &rep.packs.clone() {
        let p = &described[id];
        let bytes = match repo.backend().read(FileType::Pack, &id.to_hex()) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => vec![],
            Err(e) => {
                return Err(refuse(format!("cannot read pack {id} ({e}); try again")));
            }
        };
        for b in &p.blobs {
            let (start, len) = (b.offset as usize, b.length as usize);
            let Some(sealed) = bytes.get(start..start + len) else {
                rep.lost.push(LostBlob {
                    kind: p.kind,
                    id: b.id,
                    pack: *id,
                    why: if bytes.is_empty() {
                        "the pack is missing".into()
                    } else {
                        format!("the pack ends at {} bytes, before it", bytes.len())
                    },
                });
                continue;
            };
            if let Err(e) = repo.open_blob(p.kind, &b.id, id, sealed, b.raw_length) {
                rep.lost.push(LostBlob {
                    kind: p.kind,
                    id: b.id,
                    pack: *id,
                    why: e.blob_cause(),
                });
                continue;
            }
            rep.salvaged_blobs += 1;
            rep.salvaged_bytes += len as u64;
            if opts.dry_run {
                continue;
            }
            let slot = &mut writers[p.kind.code() as usize & 1];
            let w = slot.get_or_insert_with(|| PackWriter::new(p.kind, pack_size + len));
            w.add_sealed(b.id, b.raw_length, sealed)?;
            if w.size() >= pack_size
                && let Some(w) = slot.take()
            {
                full.push(w);
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
    for id in &rep.packs {
        if delete_file(repo, FileType::Pack, id)? {
            rep.packs_deleted.push(*id);
        }
    }
    Ok(rep)
}
