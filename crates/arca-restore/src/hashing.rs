//! Checking files on disk against the snapshot block by block, with the snapshot's own chunk
//! boundaries: which blocks an existing file already holds, which blocks another tree can
//! lend, and whether a restored file reads back right. Many files are hashed at once.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arca_crypto::MasterKey;

use crate::plan::{BlockUse, Plan};

/// Items a thread takes at a time in [`parallel_map`].
const CHUNK: usize = 64;

/// Runs `f(i)` for every `i < n` on `threads` threads (work is taken in order, a few items at
/// a time) and returns the results in order, each written straight into its slot. Stops
/// taking work once `stop` is set (the rest stay `None`).
pub(crate) fn parallel_map<T: Send>(
    n: usize,
    threads: usize,
    stop: &AtomicBool,
    f: impl Fn(usize) -> T + Sync,
) -> Vec<Option<T>> {
    let mut res: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let chunks = std::sync::Mutex::new(res.chunks_mut(CHUNK).enumerate());
    let threads = threads.clamp(1, n.div_ceil(CHUNK).max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let next = chunks.lock().unwrap_or_else(|p| p.into_inner()).next();
                    let Some((c, slots)) = next else { break };
                    for (k, slot) in slots.iter_mut().enumerate() {
                        *slot = Some(f(c * CHUNK + k));
                    }
                }
            });
        }
    });
    res
}

/// Compares file contents with the snapshot's blocks.
pub(crate) struct BlockChecker<'a> {
    pub key: &'a MasterKey,
    pub plan: &'a Plan,
    /// Bytes read so far.
    pub bytes_read: AtomicU64,
}

impl BlockChecker<'_> {
    /// Which of `uses` (blocks of one file of the plan) the file at `path`, of `size` bytes,
    /// already holds at their offsets. A block beyond the end of the file is not held.
    pub fn held(&self, path: &Path, size: u64, uses: &[BlockUse]) -> io::Result<Vec<bool>> {
        let f = arca_fs::open_noatime(path)?;
        let mut buf = vec![];
        uses.iter()
            .map(|u| self.holds(&f, size, u, &mut buf))
            .collect()
    }

    /// Whether `f`, of `size` bytes, holds the block of `u` at its offset.
    pub fn holds(&self, f: &File, size: u64, u: &BlockUse, buf: &mut Vec<u8>) -> io::Result<bool> {
        let blob = &self.plan.blobs[u.blob as usize];
        let len = u64::from(blob.raw_len);
        if u.offset + len > size {
            return Ok(false);
        }
        buf.resize(len as usize, 0);
        f.read_exact_at(buf, u.offset)?;
        self.bytes_read.fetch_add(len, Ordering::Relaxed);
        Ok(if blob.zero {
            arca_fs::is_zero(buf)
        } else {
            self.key.blob_id(buf) == blob.id
        })
    }
}
