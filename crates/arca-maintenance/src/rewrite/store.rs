//! Storing rewritten directory listings: each new tree blob sealed once, packed with the
//! repository's pack writer and uploaded as packs fill (shared by `rewrite` and `repair`,
//! which stores the zero blocks that stand in for lost ones here too).

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
    /// The data pack being filled (repair's zero blocks).
    data: Option<PackWriter>,
    /// The packs uploaded so far.
    pub(crate) packs: Vec<IndexPack>,
    /// New tree blobs stored (or that would be, in a dry run).
    pub(crate) written: usize,
    /// New data blobs stored (or that would be, in a dry run).
    pub(crate) data_written: usize,
}

impl<'a> TreeWriter<'a> {
    /// A writer into `repo`; with `dry_run` it only computes ids and counts.
    pub(crate) fn new(repo: &'a Repository, dry_run: bool) -> Self {
        Self {
            repo,
            dry_run,
            stored: HashSet::new(),
            pack: None,
            data: None,
            packs: vec![],
            written: 0,
            data_written: 0,
        }
    }

    /// Stores data blob `bytes` (whose id is `id`) unless `have` says the repository holds a
    /// usable copy or this run stored it already.
    pub(crate) fn store_data(
        &mut self,
        id: Id,
        bytes: &[u8],
        have: impl Fn(&Id) -> bool,
    ) -> Result<(), RepoError> {
        if have(&id) || !self.stored.insert(id) {
            return Ok(());
        }
        self.data_written += 1;
        self.seal_into(BlobKind::Data, id, bytes)
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
        self.seal_into(BlobKind::Tree, id, &bytes)?;
        Ok(id)
    }

    /// Seals blob `id` into the open pack of its kind, uploaded once full (in a dry run,
    /// nothing).
    fn seal_into(&mut self, kind: BlobKind, id: Id, bytes: &[u8]) -> Result<(), RepoError> {
        if self.dry_run {
            return Ok(());
        }
        let sealed = seal_blob(
            self.repo.sealer(),
            kind,
            id,
            bytes,
            self.repo.config().compression,
        )?;
        let open = match kind {
            BlobKind::Tree => &mut self.pack,
            BlobKind::Data => &mut self.data,
        };
        let pack = open.get_or_insert_with(|| PackWriter::new(kind, 1 << 20));
        pack.add(&sealed)?;
        if pack.size() as u64 >= u64::from(self.repo.config().pack_size) {
            let full = open.take();
            self.upload(full)?;
        }
        Ok(())
    }

    /// Uploads the open packs, if any.
    pub(crate) fn flush(&mut self) -> Result<(), RepoError> {
        let (trees, data) = (self.pack.take(), self.data.take());
        self.upload(trees)?;
        self.upload(data)
    }

    fn upload(&mut self, pack: Option<PackWriter>) -> Result<(), RepoError> {
        let Some(pack) = pack else {
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
