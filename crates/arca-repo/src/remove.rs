//! Deleting many repository files at once (snapshots that `forget` drops, the index files and
//! packs that `prune` retires): several requests in flight, as many as the backend serves.

use arca_backend::{BackendError, FileType};
use arca_format::Id;

use crate::Repository;
use crate::par::map_ordered;

/// Requests in flight on a local folder for many small files (a remote backend uses its
/// connection count).
const LOCAL_REQUESTS: usize = 8;

impl Repository {
    /// How many small-file requests (reads of snapshots, deletions) to keep in flight.
    pub(crate) fn small_file_requests(&self) -> usize {
        let hints = self.backend().hints();
        if hints.local {
            LOCAL_REQUESTS
        } else {
            hints.connections.unwrap_or(LOCAL_REQUESTS)
        }
    }

    /// Removes the files `ids` of type `t`, several at once; a file that is already gone
    /// counts as removed ([`arca_backend::Backend::remove`]). Every file is tried; one result
    /// per id, in order. `done` is called after each removal (for progress). The removals
    /// are made durable before it returns ([`arca_backend::Backend::sync_removals`]): what
    /// the caller deletes next may only be deleted once these are gone for good (a power cut
    /// brought forgotten snapshots back after the packs they used were gone, on btrfs;
    /// hunt 22). When that fails, every removal reports its error.
    pub fn remove_files(
        &self,
        t: FileType,
        ids: &[Id],
        done: &(dyn Fn() + Sync),
    ) -> Vec<Result<(), BackendError>> {
        let results = self.remove_files_unsynced(t, ids, done);
        if results.iter().all(Result::is_err) {
            return results;
        }
        match self.backend().sync_removals() {
            Ok(()) => results,
            Err(e) => results
                .into_iter()
                .map(|r| {
                    r.and_then(|()| {
                        Err(BackendError::new(
                            e.op,
                            e.location.clone(),
                            e.kind,
                            e.source.to_string(),
                        ))
                    })
                })
                .collect(),
        }
    }

    fn remove_files_unsynced(
        &self,
        t: FileType,
        ids: &[Id],
        done: &(dyn Fn() + Sync),
    ) -> Vec<Result<(), BackendError>> {
        map_ordered(
            ids,
            self.small_file_requests(),
            || (),
            |(), id| {
                let r = self.backend().remove(t, &id.to_hex());
                done();
                r
            },
        )
        .into_iter()
        .zip(ids)
        .map(|(r, id)| {
            r.unwrap_or_else(|| {
                Err(BackendError::new(
                    "delete",
                    format!("{}/{}", self.backend().location(), t.path(&id.to_hex())),
                    arca_backend::ErrorKind::Other,
                    "the deleting thread panicked".to_string(),
                ))
            })
        })
        .collect()
    }
}
