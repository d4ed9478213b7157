//! The new packs a prune's repacking threads fill together: one pack being filled per kind,
//! uploaded by the thread that completes it once every blob in it has passed its check.
//!
//! With a pack of its own per thread, three threads read three packs' worth of blobs before
//! the first was uploaded, so the disk only read for the first part of a repack and the
//! writes came late; and the partly filled packs had to be merged at the end. Shared, the
//! first pack is uploaded after one pack's worth is read, and at most one per kind is left.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use arca_format::{BlobKind, Id, IndexPack};
use arca_repo::pack::PackWriter;
use arca_repo::{RepoError, Repository};

use super::execute::upload;
use super::{Progress, PruneError};

/// Buffers of uploaded packs kept for the next ones (a new one per pack cost a page fault
/// and the zeroing of every page it filled).
const SPARE_BUFFERS: usize = 2;

/// A blob appended to a pack and not yet checked: which pack holds it. Handing it to
/// [`Packer::checked`] is what lets that pack be uploaded.
#[must_use = "a pack holding an unchecked blob is never uploaded"]
pub(super) struct Ticket(u64);

/// A pack being filled, or full (no longer its kind's open one) and waiting for the checks of
/// its last blobs: uploaded as soon as `unchecked` is 0.
struct Filling {
    w: PackWriter,
    /// Blobs appended whose check has not passed yet.
    unchecked: usize,
}

#[derive(Default)]
struct State {
    /// The pack being filled per kind (a key of `packs`); every other pack is full.
    open: [Option<u64>; 2],
    packs: HashMap<u64, Filling>,
    next_key: u64,
    spare: Vec<Vec<u8>>,
    written: Vec<IndexPack>,
    bytes_written: u64,
    blobs: u64,
}

impl State {
    /// Takes pack `key` out when it is full and none of its blobs awaits a check.
    fn take_ready(&mut self, key: u64) -> Option<PackWriter> {
        let f = self.packs.get(&key)?;
        if f.unchecked > 0 || self.open[f.w.kind().code() as usize] == Some(key) {
            return None;
        }
        self.packs.remove(&key).map(|f| f.w)
    }
}

/// What the repacking threads wrote.
pub(super) struct Packed {
    pub packs: Vec<IndexPack>,
    pub bytes_written: u64,
    pub blobs: u64,
}

/// The packs being filled by all repacking threads.
pub(super) struct Packer<'a> {
    repo: &'a Repository,
    progress: &'a Progress,
    pack_size: usize,
    state: Mutex<State>,
}

impl<'a> Packer<'a> {
    pub fn new(repo: &'a Repository, progress: &'a Progress) -> Self {
        Self {
            repo,
            progress,
            pack_size: repo.config().pack_size as usize,
            state: Mutex::new(State::default()),
        }
    }

    pub fn repo(&self) -> &'a Repository {
        self.repo
    }

    pub fn progress(&self) -> &'a Progress {
        self.progress
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends a blob, still sealed, to the pack of its kind being filled. The blob must be
    /// checked after, and the ticket handed to [`Self::checked`]: until then its pack stays.
    pub fn append(
        &self,
        kind: BlobKind,
        id: Id,
        raw_len: u32,
        sealed: &[u8],
    ) -> Result<Ticket, PruneError> {
        let cap = self.pack_size + self.pack_size / 8;
        let k = kind.code() as usize;
        let mut ready = None;
        let key = {
            let mut guard = self.state();
            let st = &mut *guard;
            // A pack that this blob would push past its buffer is closed first, so buffers
            // never grow.
            if let Some(key) = st.open[k]
                && st
                    .packs
                    .get(&key)
                    .is_some_and(|f| f.w.size() + sealed.len() > cap)
            {
                st.open[k] = None;
                ready = st.take_ready(key);
            }
            let key = match st.open[k] {
                Some(key) => key,
                None => {
                    let w = match st.spare.pop() {
                        Some(buf) => PackWriter::with_buffer(kind, buf),
                        None => PackWriter::new(kind, cap),
                    };
                    let key = st.next_key;
                    st.next_key += 1;
                    st.packs.insert(key, Filling { w, unchecked: 0 });
                    st.open[k] = Some(key);
                    key
                }
            };
            let f = st.packs.get_mut(&key).ok_or_else(|| lost("being filled"))?;
            f.w.add_sealed(id, raw_len, sealed)?;
            f.unchecked += 1;
            st.blobs += 1;
            if f.w.size() >= self.pack_size {
                st.open[k] = None;
            }
            key
        };
        if let Some(w) = ready {
            self.upload(w)?;
        }
        Ok(Ticket(key))
    }

    /// The blob of `t` passed its check: its pack is uploaded now if it is full and that
    /// was the last of its blobs to check.
    pub fn checked(&self, t: Ticket) -> Result<(), PruneError> {
        let ready = {
            let mut guard = self.state();
            let st = &mut *guard;
            let f = st.packs.get_mut(&t.0).ok_or_else(|| lost("checked"))?;
            f.unchecked -= 1;
            st.take_ready(t.0)
        };
        match ready {
            Some(w) => self.upload(w),
            None => Ok(()),
        }
    }

    /// Uploads a pack whose blobs have all passed their checks.
    fn upload(&self, w: PackWriter) -> Result<(), PruneError> {
        let (p, n, buf) = upload(self.repo, w, self.progress)?;
        let mut st = self.state();
        if st.spare.len() < SPARE_BUFFERS {
            st.spare.push(buf);
        }
        st.written.push(p);
        st.bytes_written += n;
        Ok(())
    }

    /// Once every repacking thread succeeded: uploads the packs still being filled (at most
    /// one per kind, side by side) and returns what was written. A blob still unchecked
    /// here is an error, not a pack left out of the new index.
    pub fn finish(self) -> Result<Packed, PruneError> {
        let repo = self.repo;
        let progress = self.progress;
        let mut st = self.state.into_inner().unwrap_or_else(|p| p.into_inner());
        if st.packs.values().any(|f| f.unchecked > 0) {
            return Err(lost("left unchecked"));
        }
        let rest: Vec<PackWriter> = st.packs.drain().map(|(_, f)| f.w).collect();
        let uploaded: Vec<Result<_, PruneError>> = std::thread::scope(|s| {
            let handles: Vec<_> = rest
                .into_iter()
                .map(|w| s.spawn(move || upload(repo, w, progress)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for r in uploaded {
            let (p, n, _) = r?;
            st.written.push(p);
            st.bytes_written += n;
        }
        Ok(Packed {
            packs: st.written,
            bytes_written: st.bytes_written,
            blobs: st.blobs,
        })
    }
}

/// A repacked blob whose pack the packer no longer knows (a bug, never a pack quietly left
/// out of the new index).
fn lost(what: &str) -> PruneError {
    PruneError::Repo(Box::new(RepoError::Invalid {
        what: "repack",
        detail: format!("a blob's new pack was lost ({what})"),
    }))
}
