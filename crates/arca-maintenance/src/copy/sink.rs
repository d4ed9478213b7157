//! Where copied blobs go: one open pack per kind at the target's pack size, uploaded when
//! full, and index files naming the uploaded packs (every few packs, and at each flush).

use arca_backend::FileType;
use arca_format::{BlobKind, IndexFile, IndexPack};
use arca_repo::Repository;
use arca_repo::blob::SealedBlob;
use arca_repo::pack::PackWriter;

use super::CopyError;
use crate::prune::INDEX_BLOBS;

/// An index file is written after this many packs without one (as backup's checkpoints).
const CHECKPOINT_PACKS: usize = 8;

/// Packs blobs for the target and uploads them.
pub(super) struct Sink<'a> {
    repo: &'a Repository,
    pack_size: usize,
    /// Data and tree packs being filled.
    writers: [PackWriter; 2],
    /// Uploaded packs no index file names yet.
    unindexed: Vec<IndexPack>,
    /// Packs uploaded.
    pub packs_written: u64,
    /// Their bytes.
    pub bytes_written: u64,
    /// Index files written.
    pub index_files_written: u64,
}

impl<'a> Sink<'a> {
    /// A sink for `repo`, packing at its configured pack size.
    pub fn new(repo: &'a Repository) -> Self {
        Self {
            repo,
            pack_size: repo.config().pack_size as usize,
            writers: [
                PackWriter::with_buffer(BlobKind::Data, vec![]),
                PackWriter::with_buffer(BlobKind::Tree, vec![]),
            ],
            unindexed: vec![],
            packs_written: 0,
            bytes_written: 0,
            index_files_written: 0,
        }
    }

    /// Adds a sealed blob to the pack of its kind, uploading the pack when full.
    pub fn add(&mut self, b: &SealedBlob) -> Result<(), CopyError> {
        let w = &mut self.writers[b.kind.code() as usize];
        w.add(b)?;
        if w.size() >= self.pack_size {
            self.close(b.kind)?;
            if self.unindexed.len() >= CHECKPOINT_PACKS {
                self.index_uploaded()?;
            }
        }
        Ok(())
    }

    /// Uploads the packs being filled and writes the index files naming every uploaded pack:
    /// afterwards every blob added is indexed in the target.
    pub fn flush(&mut self) -> Result<(), CopyError> {
        for kind in [BlobKind::Data, BlobKind::Tree] {
            if !self.writers[kind.code() as usize].is_empty() {
                self.close(kind)?;
            }
        }
        self.index_uploaded()
    }

    /// Seals and uploads the pack of `kind` being filled and starts a new one.
    fn close(&mut self, kind: BlobKind) -> Result<(), CopyError> {
        let w = std::mem::replace(
            &mut self.writers[kind.code() as usize],
            PackWriter::with_buffer(kind, vec![]),
        );
        let p = w.finish(self.repo.sealer())?;
        let name = p.id.to_hex();
        let backend = self.repo.backend();
        if kind == BlobKind::Tree {
            backend.note_tree_packs(std::slice::from_ref(&name));
        }
        backend.write(FileType::Pack, &name, &p.bytes)?;
        self.packs_written += 1;
        self.bytes_written += p.bytes.len() as u64;
        self.unindexed.push(p.index);
        Ok(())
    }

    /// Writes index files (up to [`INDEX_BLOBS`] blobs each) naming the uploaded packs no
    /// index file names yet.
    pub fn index_uploaded(&mut self) -> Result<(), CopyError> {
        while !self.unindexed.is_empty() {
            let mut blobs = 0;
            let mut n = 0;
            while n < self.unindexed.len() && (n == 0 || blobs < INDEX_BLOBS) {
                blobs += self.unindexed[n].blobs.len();
                n += 1;
            }
            let packs: Vec<IndexPack> = self.unindexed[..n].to_vec();
            self.repo.save_index(&IndexFile {
                supersedes: vec![],
                packs,
            })?;
            self.unindexed.drain(..n);
            self.index_files_written += 1;
        }
        Ok(())
    }
}
