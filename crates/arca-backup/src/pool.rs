//! Recycled byte buffers for the pipeline's chunks, sealed blobs and packs: a backup moves
//! gigabytes through a few dozen buffers instead of allocating and freeing each chunk, which
//! keeps the allocator from holding freed memory and the kernel from zeroing fresh pages.

use std::sync::Mutex;

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
}
