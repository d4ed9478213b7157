//! Checking files on disk against the snapshot block by block, with the snapshot's own chunk
//! boundaries: which blocks an existing file already holds, which blocks another tree can
//! lend, and whether a restored file reads back right. Many files are hashed at once.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arca_crypto::MasterKey;

use crate::plan::{BlockUse, Plan};

/// Runs `f(i)` for every `i < n` on `threads` threads (work is taken in order, one item at
/// a time) and returns the results in order. Stops taking work once `stop` is set.
pub(crate) fn parallel_map<T: Send>(
    n: usize,
    threads: usize,
    stop: &AtomicBool,
    f: impl Fn(usize) -> T + Sync,
) -> Vec<Option<T>> {
    let next = AtomicUsize::new(0);
    let threads = threads.clamp(1, n.max(1));
    let parts: Vec<Vec<(usize, T)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut out = vec![];
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        out.push((i, f(i)));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut res: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for (i, v) in parts.into_iter().flatten() {
        res[i] = Some(v);
    }
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
