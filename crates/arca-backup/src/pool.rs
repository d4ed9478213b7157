//! Recycled byte buffers for the pipeline's chunks, sealed blobs and packs: a backup moves
//! gigabytes through a few dozen buffers instead of allocating and freeing each chunk, which
//! keeps the allocator from holding freed memory and the kernel from zeroing fresh pages.
//! [`Buffers`] is the other kind: a fixed set of read buffers that also limits how many
//! files of a size class are read at once.

use std::sync::{Condvar, Mutex};

/// A bounded free list of buffers.
#[derive(Debug)]
pub(crate) struct Pool {
    free: Mutex<Vec<Vec<u8>>>,
    keep: usize,
    /// Larger buffers (rare, outsized chunks) go back to the allocator rather than pin
    /// their memory for the rest of the backup.
    max_capacity: usize,
}

impl Pool {
    /// A pool keeping at most `keep` free buffers of at most `max_capacity` bytes.
    pub(crate) fn new(keep: usize, max_capacity: usize) -> Self {
        Self {
            free: Mutex::new(Vec::with_capacity(keep)),
            keep,
            max_capacity,
        }
    }

    /// An empty buffer, recycled when one is free.
    pub(crate) fn take(&self) -> Vec<u8> {
        self.free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default()
    }

    /// Returns a buffer for reuse (dropped when the pool is full).
    pub(crate) fn give(&self, mut buf: Vec<u8>) {
        buf.clear();
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < self.keep && (1..=self.max_capacity).contains(&buf.capacity()) {
            free.push(buf);
        }
    }
}

/// A fixed number of buffers, lent one per file: taking one waits while all are out, so
/// as many files of a size class are read at once as there are buffers.
pub(crate) struct Buffers {
    free: Mutex<Vec<Vec<u8>>>,
    given_back: Condvar,
}

/// A buffer lent by [`Buffers`]; whatever buffer it holds when dropped goes back, so the
/// count stays right even when the reading thread unwinds.
pub(crate) struct Lent<'a> {
    pub buf: Vec<u8>,
    from: &'a Buffers,
}

impl Buffers {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            free: Mutex::new((0..n.max(1)).map(|_| Vec::new()).collect()),
            given_back: Condvar::new(),
        }
    }

    /// A buffer, waiting until one is free.
    pub(crate) fn take(&self) -> Lent<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(buf) = free.pop() {
                return Lent { buf, from: self };
            }
            free = self
                .given_back
                .wait(free)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        self.from
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(buf);
        self.from.given_back.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_up_to_the_limit() {
        let pool = Pool::new(2, 4096);
        let mut a = pool.take();
        a.extend_from_slice(&[1; 1000]);
        let cap = a.capacity();
        pool.give(a);
        let b = pool.take();
        assert!(b.is_empty() && b.capacity() == cap);
        for _ in 0..5 {
            pool.give(vec![0; 10]);
        }
        assert_eq!(pool.free.lock().unwrap().len(), 2);
        let pool = Pool::new(2, 4096);
        pool.give(vec![0; 5000]);
        assert!(
            pool.free.lock().unwrap().is_empty(),
            "outsized buffers are not kept"
        );
    }

    #[test]
    fn buffers_lend_at_most_their_count() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::Duration;

        let pool = Buffers::new(2);
        let a = pool.take();
        let b = pool.take();
        let got_third = AtomicBool::new(false);
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                let c = pool.take();
                got_third.store(true, Ordering::SeqCst);
                drop(c);
            });
            std::thread::sleep(Duration::from_millis(100));
            assert!(
                !got_third.load(Ordering::SeqCst),
                "a third buffer was handed out"
            );
            drop(a);
            assert!(h.join().is_ok() && got_third.load(Ordering::SeqCst));
        });
        drop(b);
        assert_eq!(pool.free.lock().unwrap().len(), 2);
    }
}
