//! A repository's sealed files (snapshot, index, lock and config files): sealing, writing,
//! reading and verifying them, listing them by id, and loading the index files into an index.

use arca_backend::FileType;
use arca_crypto::Sealer;
use arca_format::envelope::{EnvelopeHeader, EnvelopeKind, FLAG_ZSTD, HEADER_LEN};
use arca_format::{BlobKind, Id, IndexFile};
use std::io::Write as _;

use super::{Repository, file_id};
use crate::index::{Index, IndexBuilder};
use crate::{RepoError, Result};

impl Repository {
    pub(super) fn seal_file(
        &self,
        kind: EnvelopeKind,
        body: &[u8],
        compress: bool,
    ) -> Result<Vec<u8>> {
        let compressed;
        let (flags, payload) = if compress {
            compressed = zstd::bulk::compress(body, 3).map_err(|e| RepoError::Invalid {
                what: "compression",
                detail: e.to_string(),
            })?;
            (FLAG_ZSTD, compressed.as_slice())
        } else {
            (0, body)
        };
        let header = EnvelopeHeader::new(kind, flags).encode();
        let mut out = header.to_vec();
        // The config is sealed with XChaCha20-Poly1305 whatever the repository's cipher: it
        // must open before the cipher is known.
        let config_sealer;
        let sealer = if kind == EnvelopeKind::Config {
            config_sealer = self.key.cipher();
            &config_sealer
        } else {
            &self.sealer
        };
        sealer
            .seal_into(&header, payload, &mut out)
            .map_err(|e| RepoError::crypto(kind.name(), e))?;
        Ok(out)
    }

    /// Seals `body` as a file of type `t`, writes it and returns its id.
    pub fn save_file(&self, t: FileType, body: &[u8]) -> Result<Id> {
        let (kind, compress) = match t {
            FileType::Snapshot => (EnvelopeKind::Snapshot, false),
            FileType::Index => (EnvelopeKind::Index, true),
            FileType::Lock => (EnvelopeKind::Lock, false),
            other => {
                return Err(RepoError::Invalid {
                    what: "file type",
                    detail: format!("{other} files are not saved with save_file"),
                });
            }
        };
        let bytes = self.seal_file(kind, body, compress)?;
        let id = file_id(&bytes);
        self.backend.write(t, &id.to_hex(), &bytes)?;
        Ok(id)
    }

    /// Reads, verifies and opens a sealed file, returning its body.
    pub fn load_file(&self, t: FileType, id: &Id) -> Result<Vec<u8>> {
        let bytes = self.backend.read(t, &id.to_hex())?;
        self.open_file(t, id, &bytes)
    }

    /// [`Self::load_file`] from the repository itself, past the local cache
    /// ([`arca_backend::Backend::read_stored`]): to check a file just written.
    pub(crate) fn load_stored_file(&self, t: FileType, id: &Id) -> Result<Vec<u8>> {
        let bytes = self.backend.read_stored(t, &id.to_hex())?;
        self.open_file(t, id, &bytes)
    }

    /// Verifies and opens the sealed file `bytes`, read as file `id` of type `t`.
    fn open_file(&self, t: FileType, id: &Id, bytes: &[u8]) -> Result<Vec<u8>> {
        let name = id.to_hex();
        let what = format!("{t} {name}");
        if file_id(bytes) != *id {
            return Err(RepoError::IdMismatch { file: what });
        }
        let kind = match t {
            FileType::Snapshot => EnvelopeKind::Snapshot,
            FileType::Index => EnvelopeKind::Index,
            FileType::Config => EnvelopeKind::Config,
            FileType::Key => EnvelopeKind::Key,
            FileType::Pack => EnvelopeKind::Pack,
            FileType::Lock => EnvelopeKind::Lock,
        };
        let header = match EnvelopeHeader::decode(bytes, kind) {
            Ok(h) => h,
            // A newer envelope is only believed when its header authenticates (it is the
            // associated data): else a damaged header byte would read as a newer arca's.
            Err(e) if e.is_newer() => {
                self.sealer
                    .open(&bytes[..HEADER_LEN], &bytes[HEADER_LEN..], &|| what.clone())
                    .map_err(|c| RepoError::crypto(&what, c))?;
                return Err(RepoError::format(&what, e));
            }
            Err(e) => return Err(RepoError::format(&what, e)),
        };
        open_sealed(&self.sealer, &header, bytes, &what)
    }

    /// Writes an index file.
    pub fn save_index(&self, f: &IndexFile) -> Result<Id> {
        // An index file is a commit too: written by a command whose lock was lost, it named
        // packs a prune had deleted meanwhile, and the rerun took them for stored.
        crate::lock::check_held_before_write()?;
        let body = f.encode().map_err(|e| RepoError::format("index", e))?;
        self.save_commit(FileType::Index, &body)
    }

    /// [`Self::save_file`] of a commit (a snapshot, an index file) whose lock was checked
    /// before: checked again once the file is written, as the write may take long on a slow
    /// remote (30 s), and a lock removed meanwhile (`unlock --remove-all`, or taken for stale
    /// by a prune under clocks that differ) went unnoticed. A lock lost by then fails, and
    /// the file just written is removed: it may name packs that prune deleted.
    pub(crate) fn save_commit(&self, t: FileType, body: &[u8]) -> Result<Id> {
        let id = self.save_file(t, body)?;
        if let Err(e) = crate::lock::check_held() {
            // A removal that fails leaves the file, as a command killed then would: the
            // error names it and says what to do.
            return Err(match self.backend.remove(t, &id.to_hex()) {
                Ok(()) => e,
                Err(removal) => RepoError::commit_left(&e, t, &id, removal),
            });
        }
        Ok(id)
    }

    /// Loads one index file.
    pub fn load_index_file(&self, id: &Id) -> Result<IndexFile> {
        let body = self.load_file(FileType::Index, id)?;
        IndexFile::decode(&body).map_err(|e| RepoError::format(format!("index {id}"), e))
    }

    /// Lists the ids of the files of one type, skipping names that are not ids, each id once
    /// (a listing may name a file twice: an S3 server's glitch).
    pub fn list_ids(&self, t: FileType) -> Result<Vec<(Id, u64)>> {
        let mut v: Vec<(Id, u64)> = self
            .backend
            .list(t)?
            .into_iter()
            .filter_map(|f| Id::from_hex(&f.name).ok().map(|id| (id, f.size)))
            .collect();
        v.sort();
        v.dedup_by_key(|(id, _)| *id);
        Ok(v)
    }

    /// Loads every index file, reading several at once, and returns them with their ids.
    /// The first failure is returned as the error.
    pub fn load_index_files(&self) -> Result<Vec<(Id, Result<IndexFile>)>> {
        let ids = self.list_ids(FileType::Index)?;
        let loaded = crate::par::load_ordered(&ids, 4, "index file", |id| self.load_index_file(id));
        Ok(ids.iter().map(|(id, _)| *id).zip(loaded).collect())
    }

    /// Loads all index files into an [`Index`], as [`Repository::load_index_report`] does, and
    /// warns on stderr about each damaged index file (naming it and `arca repair index`): the
    /// command goes on without the blobs that file listed, which then count as missing.
    pub fn load_index(&self) -> Result<Index> {
        self.load_index_listed(&self.list_ids(FileType::Index)?)
    }

    /// [`Repository::load_index`] from the index files `ids` (as [`Repository::list_ids`]
    /// gives them), for a caller that listed them already and keeps the listing (a mount
    /// compares it with the next one).
    pub fn load_index_listed(&self, ids: &[(Id, u64)]) -> Result<Index> {
        let (index, damaged) = self.load_index_report_listed(ids)?;
        for (_, e) in &damaged {
            damaged_index_warning(e);
        }
        Ok(index)
    }

    /// Loads all index files into an [`Index`], leaving out the damaged ones (a file that
    /// does not hash to its name, does not open with the key, or does not decode), which are
    /// returned with the reason. Any other failure (the backend cannot list or read) is an
    /// error: a partial index is only ever the result of damage, never of a bad connection.
    /// Tells the backend which packs hold trees ([`Backend::note_tree_packs`](arca_backend::Backend::note_tree_packs)), so a cache
    /// keeps them.
    pub fn load_index_report(&self) -> Result<(Index, Vec<(Id, RepoError)>)> {
        self.load_index_report_listed(&self.list_ids(FileType::Index)?)
    }

    /// [`Repository::load_index_report`] from the index files `ids`.
    fn load_index_report_listed(&self, ids: &[(Id, u64)]) -> Result<(Index, Vec<(Id, RepoError)>)> {
        let mut b = IndexBuilder::new();
        let mut damaged = vec![];
        let mut failed = None;
        // Each file goes into the builder as soon as it is read, then is dropped: the decoded
        // files never all sit in memory beside the index being built.
        crate::par::for_each_ordered(
            ids,
            4,
            |(id, _)| self.load_index_file(id),
            |i, f| {
                let id = ids[i].0;
                match f {
                    _ if failed.is_some() => {}
                    Some(Ok(f)) => b.add(&f),
                    Some(Err(e)) if e.is_unusable() => damaged.push((id, e)),
                    Some(Err(e)) => failed = Some(e),
                    None => {
                        failed = Some(RepoError::Invalid {
                            what: "index file",
                            detail: format!("{id}: the reader thread failed"),
                        })
                    }
                }
            },
        );
        if let Some(e) = failed {
            return Err(e);
        }
        let index = b.finish();
        let trees: Vec<String> = index
            .packs()
            .iter()
            .filter(|p| p.kind == BlobKind::Tree)
            .map(|p| p.id.to_hex())
            .collect();
        if !trees.is_empty() {
            self.backend.note_tree_packs(&trees);
        }
        Ok((index, damaged))
    }
}

/// Reports on stderr that an index file is damaged and left out of the index.
fn damaged_index_warning(e: &RepoError) {
    #[allow(clippy::print_stderr)]
    {
        if e.is_newer_format() {
            // Not damage: `repair index` would delete a newer arca's index file.
            let _ = writeln!(
                std::io::stderr(),
                "arca: warning: {e}; the blobs it lists are treated as missing"
            );
        } else {
            let _ = writeln!(
                std::io::stderr(),
                "arca: warning: damaged index file ({e}); run `arca repair index` (the blobs \
                 it lists are treated as missing until then)"
            );
        }
    }
}

pub(super) fn open_sealed(
    sealer: &Sealer,
    header: &EnvelopeHeader,
    bytes: &[u8],
    what: &str,
) -> Result<Vec<u8>> {
    let payload = sealer
        .open(&bytes[..HEADER_LEN], &bytes[HEADER_LEN..], &|| {
            what.to_string()
        })
        .map_err(|e| RepoError::crypto(what, e))?;
    if header.compressed() {
        let mut out = Vec::new();
        zstd::stream::copy_decode(payload.as_slice(), &mut out).map_err(|e| {
            RepoError::Decompress {
                file: what.to_string(),
                detail: e.to_string(),
            }
        })?;
        Ok(out)
    } else {
        Ok(payload)
    }
}
