//! Repairs, as restic's `repair index`, `repair packs` and `repair snapshots`.
//!
//! * [`repair_index`] rebuilds the index from the packs themselves: every pack carries a
//!   sealed header listing its blobs, so the index can always be recomputed. Packs that an
//!   intact index file already describes (same size on the backend) keep their entries unless
//!   `read_all_packs` is set; every other pack's header is read. New index files are written
//!   first, then every old one (damaged or not) is deleted, so a crash in between leaves a
//!   repository whose index names each pack at least once. A pack whose header cannot be read
//!   is reported and left on the backend; the entries an intact index file had for it are
//!   kept (for [`repair_packs`]); a pack the backend cannot read for another reason (a
//!   failing connection) stops the repair before anything is written.
//! * [`repair_packs`] salvages damaged packs (damaged header or blobs, truncated or missing,
//!   another pack's content): the blobs that verify, where the index or the pack's own header
//!   places them, are copied into new packs, the others leave the index; the damaged packs
//!   are deleted last.
//! * [`repair_snapshots`] rewrites snapshots that reference lost data: a directory whose
//!   listing is lost becomes an empty directory, a file whose content lost blobs keeps its
//!   size with zeros in their place (one zero blob per length, stored once), so what survives
//!   after a hole is kept. The new blobs are written (packs, then an index file), then a
//!   new snapshot per damaged one, with the same metadata and the tag [`REPAIRED_TAG`]; with
//!   `forget`, the originals are deleted last. A blob counts as lost when no index entry names
//!   it in a pack the backend holds at the indexed size, or (for trees) when it cannot be read
//!   and decoded. It refuses to run while an index file is damaged (`repair index` first:
//!   otherwise intact data would be cut away), and first indexes packs no index names (as a
//!   backup does), so their blobs are not taken for lost.

mod headless;
mod index;
mod packs;
mod snapshots;

#[cfg(test)]
pub(crate) mod fixture;
#[cfg(test)]
mod newer_tests;
#[cfg(test)]
mod tests;

use arca_backend::FileType;
use arca_format::Id;
use arca_repo::recover::{HeaderScan, scan_headers};
use arca_repo::{RepoError, Repository};

pub use index::{RepairIndexOptions, RepairIndexReport, repair_index};
pub use packs::{CarvedPack, LostBlob, RepairPacksOptions, RepairPacksReport, repair_packs};
pub use snapshots::{
    Change, Loss, RepairSnapshotsOptions, RepairSnapshotsReport, RepairedSnapshot, repair_snapshots,
};

/// Most packs one new index file names (a few MB of index per file at most).
pub const PACKS_PER_INDEX_FILE: usize = 2000;

/// The tag every snapshot written by [`repair_snapshots`] carries.
pub const REPAIRED_TAG: &str = "repaired";

/// Reads the headers of `packs` (id and size). A pack the backend cannot read for another
/// reason than damage (a failing connection) stops the repair: nothing was changed yet.
fn scan_or_stop(repo: &Repository, packs: &[(Id, u64)]) -> Result<HeaderScan, RepoError> {
    let scan = scan_headers(repo, packs);
    if let Some(u) = scan.unreadable.iter().find(|u| !u.damaged) {
        // The error names the pack's file when it comes from the backend.
        let what = if u.error.contains(&u.id.to_hex()) {
            u.error.clone()
        } else {
            format!("pack {}: {}", u.id, u.error)
        };
        return Err(RepoError::Refused(format!(
            "{what}: its header cannot be read, which is not damage, so nothing was changed; \
             make the repository readable (the file's permissions, the connection) and run \
             the repair again"
        )));
    }
    Ok(scan)
}

/// Makes the deletions so far durable (the local backend syncs the folders deleted from), so
/// that a power cut cannot bring back a file the next step assumes gone.
fn sync_removals(repo: &Repository) -> Result<(), RepoError> {
    Ok(repo.backend().sync_removals()?)
}

/// Deletes a repository file; `false` when it was already gone.
fn delete_file(repo: &Repository, t: FileType, id: &Id) -> Result<bool, RepoError> {
    // Nothing is deleted under a lock others may take for stale (its refreshes failed).
    arca_repo::lock::check_held()?;
    match repo.backend().delete(t, &id.to_hex()) {
        Ok(()) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e.into()),
    }
}
