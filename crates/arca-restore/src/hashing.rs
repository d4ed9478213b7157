//! Checking files on disk against the snapshot block by block, with the snapshot's own chunk
//! boundaries: which blocks an existing file already holds, which blocks another tree can
//! lend, and whether a restored file reads back right. Many files are hashed at once.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arca_crypto::MasterKey;
use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};

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
    parallel_map_with(n, threads, stop, || (), |(), i| f(i))
}

/// Runs `f(state, i, &mut items[i])` for every item on `threads` threads (work is taken in
/// order, a few items at a time; each thread keeps a `state` of its own, made by `init`) and
/// gathers, in no particular order, what the calls return besides. Stops taking work once
/// `stop` is set (the other items are left as they are).
pub(crate) fn parallel_update_with<T: Send, R: Send, S>(
    items: &mut [T],
    threads: usize,
    stop: &AtomicBool,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize, &mut T) -> Option<R> + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, items.len().div_ceil(CHUNK).max(1));
    // Room for one per item, reserved (not touched) at once: growing it by copying, with
    // every thread's own list besides, cost several MiB of peak memory for 100,000 files.
    let gathered = std::sync::Mutex::new(Vec::with_capacity(items.len()));
    let chunks = std::sync::Mutex::new(items.chunks_mut(CHUNK).enumerate());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut state = init();
                let mut mine = Vec::with_capacity(CHUNK);
                while !stop.load(Ordering::Relaxed) {
                    let next = chunks.lock().unwrap_or_else(|p| p.into_inner()).next();
                    let Some((c, slots)) = next else { break };
                    for (k, slot) in slots.iter_mut().enumerate() {
                        mine.extend(f(&mut state, c * CHUNK + k, slot));
                    }
                    if !mine.is_empty() {
                        gathered
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .append(&mut mine);
                    }
                }
            });
        }
    });
    gathered.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// [`parallel_map`] where each thread keeps state of its own, made by `init`.
pub(crate) fn parallel_map_with<T: Send, S>(
    n: usize,
    threads: usize,
    stop: &AtomicBool,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> T + Sync,
) -> Vec<Option<T>> {
    let mut res: Vec<Option<T>> = (0..n).map(|_| None).collect();
    parallel_update_with(&mut res, threads, stop, init, |s, i, slot| {
        *slot = Some(f(s, i));
        None::<()>
    });
    res
}

/// At most `n` holders at once (large files hashed at a time, each holding a window of data).
pub(crate) struct Slots {
    free: std::sync::Mutex<usize>,
    cv: std::sync::Condvar,
}

impl Slots {
    pub fn new(n: usize) -> Self {
        Self {
            free: std::sync::Mutex::new(n.max(1)),
            cv: std::sync::Condvar::new(),
        }
    }
    /// Runs `f` holding a slot.
    pub fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.cv.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        drop(free);
        let r = f();
        *self.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.cv.notify_one();
        r
    }
}

/// Files at least this large are hashed a few at a time (see [`BlockChecker::large`]).
pub(crate) const LARGE: u64 = 1 << 20;

/// Bytes of a block read and hashed at a time by [`BlockChecker::holds`]: small enough to
/// stay in the processor's cache between the copy and the hash, large enough that the
/// system calls cost little.
const WINDOW: u64 = 256 << 10;

/// Compares file contents with the snapshot's blocks.
pub(crate) struct BlockChecker<'a> {
    pub key: &'a MasterKey,
    pub plan: &'a Plan,
    /// Bytes read so far.
    pub bytes_read: AtomicU64,
    /// Many small files are hashed at once (reading them waits for the disk; a deep queue
    /// hides it), large ones only a few at a time: they stream well alone and each holds a
    /// window of data.
    pub large: Slots,
    /// Ids of all-zero blocks by length (only the largest is known to the plan).
    pub zero_ids: std::sync::Mutex<std::collections::HashMap<u32, arca_format::Id>>,
}

impl BlockChecker<'_> {
    /// Which of `uses` (blocks of one file of the plan) the file at `path`, of `size` bytes,
    /// already holds at their offsets. A block beyond the end of the file is not held.
    pub fn held(&self, path: &Path, size: u64, uses: &[BlockUse]) -> io::Result<Vec<bool>> {
        self.held_open(path, size, uses).map(|(h, _)| h)
    }

    /// As [`Self::held`], and the file, still open (read-only), for settling its metadata
    /// without another path lookup.
    pub fn held_open(
        &self,
        path: &Path,
        size: u64,
        uses: &[BlockUse],
    ) -> io::Result<(Vec<bool>, File)> {
        if size >= LARGE {
            return self.large.with(|| self.held_now(path, size, uses));
        }
        self.held_now(path, size, uses)
    }

    fn held_now(&self, path: &Path, size: u64, uses: &[BlockUse]) -> io::Result<(Vec<bool>, File)> {
        let f = arca_fs::open_noatime(path)?;
        // Through the page cache with the kernel's readahead, asked to read far ahead: it
        // keeps several large requests queued at the disk, where synchronous direct reads of
        // one window at a time left it idle between them (1.2-1.4 s against 1.6-1.8 s for a
        // cold GiB). Dropping the pages afterwards (FADV_DONTNEED) cost more than it saved.
        let large = size >= arca_backend::uncached::WORTH_IT;
        if large {
            let _ = posix_fadvise(&f, 0, 0, PosixFadviseAdvice::POSIX_FADV_SEQUENTIAL);
        }
        let mut buf = vec![];
        let h = uses
            .iter()
            .map(|u| self.holds(&f, size, u, &mut buf))
            .collect::<io::Result<Vec<bool>>>()?;
        Ok((h, f))
    }

    /// As [`Self::held`] for a file already read whole: `data` are its first bytes (fewer than
    /// `size` when it shrank since it was looked at).
    pub fn held_in(&self, data: &[u8], size: u64, uses: &[BlockUse]) -> Vec<bool> {
        self.bytes_read
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        uses.iter()
            .map(|u| {
                let end = u.offset + u64::from(self.plan.blobs[u.blob as usize].raw_len);
                end <= size
                    && end <= data.len() as u64
                    && self.is_block(u, &data[u.offset as usize..end as usize])
            })
            .collect()
    }

    /// Whether `f`, of `size` bytes, holds the block of `u` at its offset. The block is read
    /// [`WINDOW`] bytes at a time into `buf` and hashed as it comes: the copy out of the page
    /// cache lands in a buffer the processor's cache holds, and nothing as large as a block
    /// (up to several MiB) is allocated, faulted in and zeroed per file.
    pub fn holds(&self, f: &File, size: u64, u: &BlockUse, buf: &mut Vec<u8>) -> io::Result<bool> {
        let blob = &self.plan.blobs[u.blob as usize];
        let len = u64::from(blob.raw_len);
        if u.offset + len > size {
            return Ok(false);
        }
        // A block lying in a hole of a sparse file is zeros: held when the snapshot's block is
        // zeros, else not, and the disk is not read (a 50 GiB disk image with a few MiB of
        // data was read whole, 30-50 s, to find what SEEK_DATA tells in microseconds).
        if len >= WINDOW {
            use nix::unistd::{Whence, lseek};
            let at = i64::try_from(u.offset).unwrap_or(i64::MAX);
            match lseek(f, at, Whence::SeekData) {
                Ok(d) if d as u64 >= u.offset + len => return Ok(self.is_zero_block(u)),
                Err(nix::errno::Errno::ENXIO) => return Ok(self.is_zero_block(u)),
                _ => {}
            }
        }
        buf.resize(WINDOW.min(len) as usize, 0);
        let mut hasher = (!blob.zero).then(|| self.key.blob_id_hasher());
        let mut zero = true;
        let mut at = 0u64;
        while at < len {
            let piece = &mut buf[..WINDOW.min(len - at) as usize];
            f.read_exact_at(piece, u.offset + at)?;
            match &mut hasher {
                Some(h) => {
                    h.update(piece);
                }
                None => zero = zero && arca_fs::is_zero(piece),
            }
            at += piece.len() as u64;
        }
        self.bytes_read.fetch_add(len, Ordering::Relaxed);
        Ok(hasher.map_or(zero, |h| h.finish() == blob.id))
    }

    /// Whether the block of `u` is all zeros: the plan flags the zero block of the largest
    /// chunk size; one of another length (the end of a run of zeros) is recognised by its id,
    /// computed once per length.
    fn is_zero_block(&self, u: &BlockUse) -> bool {
        let blob = &self.plan.blobs[u.blob as usize];
        if blob.zero {
            return true;
        }
        let mut ids = self.zero_ids.lock().unwrap_or_else(|p| p.into_inner());
        let id = ids
            .entry(blob.raw_len)
            .or_insert_with(|| self.key.blob_id(&vec![0; blob.raw_len as usize]));
        *id == blob.id
    }

    /// Whether `data` (as long as the block) is the block of `u`.
    fn is_block(&self, u: &BlockUse, data: &[u8]) -> bool {
        let blob = &self.plan.blobs[u.blob as usize];
        if blob.zero {
            arca_fs::is_zero(data)
        } else {
            self.key.blob_id(data) == blob.id
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::BlobPlan;
    use arca_crypto::MasterKey;
    use arca_format::Id;

    fn blob(key: &MasterKey, data: &[u8], zero: bool) -> BlobPlan {
        BlobPlan {
            id: if zero { Id([0; 32]) } else { key.blob_id(data) },
            pack: 0,
            offset: 0,
            length: 0,
            raw_len: data.len() as u32,
            zero,
            missing: false,
            indexed_len: None,
        }
    }

    /// Blocks longer than a window are read and hashed in pieces: a block is held only when
    /// every piece is right, a byte wrong in its last window included; a hole is held only
    /// when every window is zero; a block past the end of the file is not held.
    #[test]
    fn blocks_are_checked_a_window_at_a_time() {
        let key = MasterKey::from_secret([9; 32]);
        let n = (WINDOW * 2 + 12_345) as usize;
        let data: Vec<u8> = (0..n).map(|i| (i % 253) as u8 + 1).collect();
        let zeros = vec![0u8; n];
        // Blob 2: zeros of another length, which the plan does not flag.
        let short_zeros = vec![0u8; n / 2 + 1];
        let plan = Plan {
            blobs: vec![
                blob(&key, &data, false),
                blob(&key, &zeros, true),
                blob(&key, &short_zeros, false),
            ],
            ..Plan::default()
        };
        let checker = BlockChecker {
            key: &key,
            plan: &plan,
            bytes_read: AtomicU64::new(0),
            large: Slots::new(1),
            zero_ids: Default::default(),
        };
        let d = tempfile::tempdir().unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let p = d.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            (File::open(&p).unwrap(), bytes.len() as u64)
        };
        let at = |blob: u32, offset: u64| BlockUse {
            blob,
            file: 0,
            offset,
        };
        let mut buf = vec![];
        let mut holds =
            |(f, size): &(File, u64), u: BlockUse| checker.holds(f, *size, &u, &mut buf).unwrap();

        let mut both = data.clone();
        both.extend_from_slice(&zeros);
        let whole = file("whole", &both);
        assert!(holds(&whole, at(0, 0)));
        assert!(holds(&whole, at(1, n as u64)));
        assert!(!holds(&whole, at(0, 1)), "the block at another offset");
        assert!(!holds(&whole, at(1, 0)), "data where a hole belongs");
        assert!(!holds(&whole, at(0, n as u64)), "a hole where data belongs");
        assert!(!holds(&whole, at(1, n as u64 + 1)), "past the end");

        let mut late = both.clone();
        late[n - 1] ^= 1; // in the data block's last window
        late[2 * n - 1] = 1; // in the hole's last window
        let late = file("late", &late);
        assert!(!holds(&late, at(0, 0)));
        assert!(!holds(&late, at(1, n as u64)));
        assert!(
            checker.bytes_read.load(Ordering::Relaxed) >= 7 * n as u64,
            "every block checked was read whole"
        );
        // A sparse file: the data, then a hole of 64 blocks. The blocks in the hole are
        // settled without reading them.
        let p = d.path().join("sparse");
        std::fs::write(&p, &data).unwrap();
        let len = n as u64 * 65;
        File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(len)
            .unwrap();
        let sparse = (File::open(&p).unwrap(), len);
        let before = checker.bytes_read.load(Ordering::Relaxed);
        assert!(holds(&sparse, at(0, 0)));
        for k in 1..65 {
            assert!(holds(&sparse, at(1, n as u64 * k)), "hole block {k}");
        }
        assert!(
            !holds(&sparse, at(0, n as u64 * 3)),
            "data where there is a hole"
        );
        assert!(
            holds(&sparse, at(2, n as u64 * 5)),
            "zeros of another length"
        );
        let read = checker.bytes_read.load(Ordering::Relaxed) - before;
        // Where the file system tells holes apart, only the data block was read.
        let hole = nix::unistd::lseek(&sparse.0, 0, nix::unistd::Whence::SeekHole).unwrap();
        if (hole as u64) < len {
            // The data block, and the first hole block, which starts in the data's last
            // file system block.
            assert!(read <= 2 * n as u64, "the holes were read: {read}");
        }
        assert!(
            buf.len() <= WINDOW as usize,
            "no buffer as large as a block"
        );
    }
}
