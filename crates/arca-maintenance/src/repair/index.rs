//! `repair index`: a new index from the intact index files and the pack headers, written
//! before the old index files are deleted.

use std::collections::{HashMap, HashSet};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexFile, IndexPack};
use arca_repo::recover::UnreadablePack;
use arca_repo::{RepoError, Repository};

use super::{PACKS_PER_INDEX_FILE, delete_file, scan_or_stop, sync_removals};

/// Options of [`repair_index`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RepairIndexOptions {
    /// Read the header of every pack, even of those an intact index file describes.
    pub read_all_packs: bool,
    /// Compute and report, write and delete nothing.
    pub dry_run: bool,
}

/// What [`repair_index`] did (or would do, in a dry run).
#[derive(Debug, Default)]
pub struct RepairIndexReport {
    /// Index files found.
    pub old_index_files: usize,
    /// Index files that could not be used (damaged or unreadable), and why.
    pub damaged_index_files: Vec<(Id, String)>,
    /// Index files made by a newer arca, and why: kept as they are (not damage), neither
    /// deleted nor superseded by the new index.
    pub newer_index_files: Vec<(Id, String)>,
    /// Packs on the backend.
    pub packs_found: usize,
    /// Packs whose entries were taken from an intact index file.
    pub packs_from_index: usize,
    /// Packs whose header was read (those that could not be are in `unreadable`).
    pub headers_read: usize,
    /// Packs named by the new index.
    pub packs_indexed: usize,
    /// Blobs named by the new index.
    pub blobs_indexed: u64,
    /// Packs whose header cannot be read (left on the backend): left out of the index
    /// unless an intact index file described them (see `kept_unreadable`).
    pub unreadable: Vec<UnreadablePack>,
    /// Packs whose header cannot be read but that an intact index file described: their
    /// entries are kept from it (each blob is verified when read), for `arca repair packs`
    /// to salvage.
    pub kept_unreadable: Vec<Id>,
    /// Packs an old index file named that the backend no longer holds.
    pub missing_packs: Vec<Id>,
    /// Blobs the old index placed only in missing packs: named by no pack of the new index
    /// (a pack renamed or copied elsewhere leaves none lost).
    pub blobs_lost: u64,
    /// Index files written.
    pub written: Vec<Id>,
    /// Old index files deleted.
    pub deleted: Vec<Id>,
}

/// Rebuilds the index from the pack headers (see [`crate::repair`]). Call it with the
/// repository locked exclusively.
pub fn repair_index(
    repo: &Repository,
    opts: RepairIndexOptions,
) -> Result<RepairIndexReport, RepoError> {
    repair_index_in(repo, opts, PACKS_PER_INDEX_FILE)
}

/// [`repair_index`], naming at most `packs_per_file` packs in each new index file.
pub(super) fn repair_index_in(
    repo: &Repository,
    opts: RepairIndexOptions,
    packs_per_file: usize,
) -> Result<RepairIndexReport, RepoError> {
    let mut rep = RepairIndexReport::default();
    let old = repo.load_index_files()?;
    rep.old_index_files = old.len();
    // An index file that cannot be read now (access denied, an outage beyond the retries)
    // may be the only record of a pack whose header is damaged: rebuilding without it would
    // delete it, and with it what it knew. Such a file is not damaged; stop before changing
    // anything. A file gone since the listing holds nothing to keep.
    if let Some((id, e)) = old.iter().find_map(|(id, f)| {
        f.as_ref()
            .err()
            .filter(|e| !e.is_unusable() && !is_gone(e))
            .map(|e| (id, e))
    }) {
        return Err(RepoError::Refused(format!(
            "{} cannot be read, which is not damage: it is kept, and nothing was changed; \
             make it readable and run again",
            unreadable_index(id, e)
        )));
    }
    let on_disk = repo.list_ids(FileType::Pack)?;
    rep.packs_found = on_disk.len();
    let sizes: HashMap<Id, u64> = on_disk.iter().copied().collect();

    // Entries of intact index files whose pack is on the backend at the indexed size, and
    // of those on the backend at any size.
    let mut known: HashMap<Id, IndexPack> = HashMap::new();
    let mut described: HashMap<Id, IndexPack> = HashMap::new();
    let mut missing: HashMap<Id, IndexPack> = HashMap::new();
    for (id, f) in &old {
        let f = match f {
            Ok(f) => f,
            // The error names the file.
            Err(e) if e.is_newer_format() => {
                rep.newer_index_files.push((*id, e.to_string()));
                continue;
            }
            Err(e) => {
                rep.damaged_index_files.push((*id, e.cause()));
                continue;
            }
        };
        for p in &f.packs {
            if sizes.contains_key(&p.id) {
                described.entry(p.id).or_insert_with(|| p.clone());
            }
            match sizes.get(&p.id) {
                None => {
                    missing.entry(p.id).or_insert_with(|| p.clone());
                }
                Some(&size) if size == p.size && !opts.read_all_packs => {
                    known.entry(p.id).or_insert_with(|| p.clone());
                }
                Some(_) => {}
            }
        }
    }
    rep.missing_packs = missing.keys().copied().collect();
    rep.missing_packs.sort();
    rep.packs_from_index = known.len();

    let to_read: Vec<(Id, u64)> = on_disk
        .iter()
        .filter(|(id, _)| !known.contains_key(id))
        .copied()
        .collect();
    let scan = scan_or_stop(repo, &to_read)?;
    rep.unreadable = scan.unreadable;
    rep.headers_read = to_read.len() - rep.unreadable.len();
    // A pack whose header is damaged or cut off still holds the blobs an intact index file
    // placed in it: those entries stay, so nothing the index knew is lost here.
    let kept: Vec<IndexPack> = rep
        .unreadable
        .iter()
        .filter_map(|u| described.get(&u.id).cloned())
        .collect();
    rep.kept_unreadable = kept.iter().map(|p| p.id).collect();

    let mut packs: Vec<IndexPack> = known.into_values().chain(scan.packs).chain(kept).collect();
    packs.sort_by_key(|p| p.id);
    rep.packs_indexed = packs.len();
    rep.blobs_indexed = packs.iter().map(|p| p.blobs.len() as u64).sum();
    if !missing.is_empty() {
        let kept: HashSet<(BlobKind, Id)> = packs
            .iter()
            .flat_map(|p| p.blobs.iter().map(|b| (p.kind, b.id)))
            .collect();
        let lost: HashSet<(BlobKind, Id)> = missing
            .values()
            .flat_map(|p| p.blobs.iter().map(|b| (p.kind, b.id)))
            .filter(|k| !kept.contains(k))
            .collect();
        rep.blobs_lost = lost.len() as u64;
    }
    if opts.dry_run {
        return Ok(rep);
    }

    // New files first, then the old ones go: at no moment is a readable pack unindexed.
    // A newer arca's index files stay as they are: not superseded, not deleted.
    let old_ids: Vec<Id> = old
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !rep.newer_index_files.iter().any(|(n, _)| n == id))
        .collect();
    let chunks: Vec<&[IndexPack]> = packs.chunks(packs_per_file.max(1)).collect();
    let last = chunks.len().saturating_sub(1);
    for (i, chunk) in chunks.iter().enumerate() {
        let file = IndexFile {
            // The last file replaces the old ones: with it written, the new files cover
            // every pack. On an earlier one, a crash before the rest were written would
            // leave a reader that honours `supersedes` (recover, list blobs) without the
            // old files while the new set is incomplete.
            supersedes: if i == last { old_ids.clone() } else { vec![] },
            packs: chunk.to_vec(),
        };
        rep.written.push(repo.save_index(&file)?);
    }
    let written: HashSet<Id> = rep.written.iter().copied().collect();
    for id in old_ids.iter().filter(|id| !written.contains(id)) {
        if delete_file(repo, FileType::Index, id)? {
            rep.deleted.push(*id);
        }
    }
    sync_removals(repo)?;
    Ok(rep)
}

/// Whether the error says the file is no longer there.
fn is_gone(e: &RepoError) -> bool {
    matches!(e, RepoError::Backend(b) if b.kind == arca_backend::ErrorKind::NotFound)
}

/// `index file LOCATION (CAUSE)` for an index file that could not be read, naming it once.
pub(super) fn unreadable_index(id: &Id, e: &RepoError) -> String {
    match e {
        RepoError::Backend(b) => format!("index file {} ({})", b.location, b.source),
        e => format!("index file {id} ({})", e.cause()),
    }
}
