//! Storing rewritten directory listings: each new tree blob sealed once, packed with the
//! repository's pack writer and uploaded as packs fill (shared by `rewrite` and `repair`).

use std::collections::HashSet;

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexPack, Tree};
use arca_repo::blob::seal_blob;
use arca_repo::pack::PackWriter;
use arca_repo::{RepoError, Repository};

/// Writes new tree blobs into tree packs. The caller writes an index file naming
/// [`TreeWriter::packs`] (after [`TreeWriter::flush`]) before any snapshot that uses them.
pub(crate) struct TreeWriter<'a> {
    repo: &'a Repository,
    /// Counts and ids only: nothing is written.
    dry_run: bool,
    /// Trees stored (or that would be) in this run.
    stored: HashSet<Id>,
    pack: Option<PackWriter>,
    /// The packs uploaded so far.
    pub(crate) packs: Vec<IndexPack>,
    /// New tree blobs stored (or that would be, in a dry run).
    pub(crate) written: usize,
}

impl<'a> TreeWriter<'a> {
    /// A writer into `repo`; with `dry_run` it only computes ids and counts.
    pub(crate) fn new(repo: &'a Repository, dry_run: bool) -> Self {
        Self {
            repo,
            dry_run,
            stored: HashSet::new(),
            pack: None,
            packs: vec![],
            written: 0,
        }
    }

    /// Stores `tree` unless `have` says the repository already holds a usable copy or this
    /// run stored it already; returns its id. `what` names the tree in errors.
    pub(crate) fn store(
        &mut self,
        tree: &Tree,
        what: &str,
        have: impl Fn(&Id) -> bool,
    ) -> Result<Id, RepoError> {
        let bytes = tree.encode().map_err(|e| RepoError::format(what, e))?;
        let id = self.repo.key().blob_id(&bytes);
        if have(&id) || !self.stored.insert(id) {
            return Ok(id);
        }
        self.written += 1;
        if self.dry_run {
            return Ok(id);
        }
        let sealed = seal_blob(
            self.repo.sealer(),
            BlobKind::Tree,
            id,
            &bytes,
            self.repo.config().compression,
        )?;
        let pack = self
            .pack
            .get_or_insert_with(|| PackWriter::new(BlobKind::Tree, 1 << 20));
        pack.add(&sealed)?;
        if pack.size() as u64 >= u64::from(self.repo.config().pack_size) {
            self.flush()?;
        }
        Ok(id)
    }

    /// Uploads the open pack, if any.
    pub(crate) fn flush(&mut self) -> Result<(), RepoError> {
        let Some(pack) = self.pack.take() else {
            return Ok(());
        };
        if pack.is_empty() {
            return Ok(());
        }
        let p = pack.finish(self.repo.sealer())?;
        self.repo
            .backend()
            .write(FileType::Pack, &p.id.to_hex(), &p.bytes)?;
        self.packs.push(p.index);
        Ok(())
    }
}
