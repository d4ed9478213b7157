//! A decorator that counts requests and bytes, and optionally throttles them (per-request
//! latency and a shared bandwidth cap) to make a local repository behave like a remote one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{Backend, BackendHints, FileInfo, FileSink, FileType, Result};

/// Request and byte counters.
#[derive(Debug, Default)]
pub struct BackendStats {
    requests: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// A copy of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Requests of any kind.
    pub requests: u64,
    /// Bytes returned by reads.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
}

impl BackendStats {
    /// Current values.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
        }
    }
}

/// Simulated network conditions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throttle {
    /// Added to every request.
    pub latency: Duration,
    /// Shared transfer cap in bytes per second (0 = unlimited).
    pub bandwidth: u64,
}

/// Counts (and optionally throttles) the requests made to the inner backend.
#[derive(Debug)]
pub struct MeteredBackend<B> {
    inner: B,
    stats: Arc<BackendStats>,
    throttle: Throttle,
    /// When the shared link is next free.
    link_free_at: Mutex<Instant>,
}

impl<B: Backend> MeteredBackend<B> {
    /// Wraps `inner`.
    pub fn new(inner: B, throttle: Throttle) -> Self {
        Self {
            inner,
            stats: Arc::new(BackendStats::default()),
            throttle,
            link_free_at: Mutex::new(Instant::now()),
        }
    }

    /// The shared counters.
    pub fn stats(&self) -> Arc<BackendStats> {
        Arc::clone(&self.stats)
    }

    fn request(&self) {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        if !self.throttle.latency.is_zero() {
            std::thread::sleep(self.throttle.latency);
        }
    }

    fn transfer(&self, bytes: u64) {
        if self.throttle.bandwidth == 0 || bytes == 0 {
            return;
        }
        let dur = Duration::from_secs_f64(bytes as f64 / self.throttle.bandwidth as f64);
        let done = {
            let mut free = self.link_free_at.lock().unwrap_or_else(|p| p.into_inner());
            let start = (*free).max(Instant::now());
            *free = start + dur;
            *free
        };
        let now = Instant::now();
        if done > now {
            std::thread::sleep(done - now);
        }
    }

    fn read_done(&self, data: &[u8]) {
        self.stats
            .bytes_read
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        self.transfer(data.len() as u64);
    }
}

impl<B: Backend> Backend for MeteredBackend<B> {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> Result<()> {
        self.request();
        self.inner.create()
    }
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        self.request();
        self.inner.list(t)
    }
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        self.request();
        let d = self.inner.read(t, name)?;
        self.read_done(&d);
        Ok(d)
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.request();
        let d = self.inner.read_range(t, name, offset, len)?;
        self.read_done(&d);
        Ok(d)
    }
    fn read_range_into(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.request();
        self.inner.read_range_into(t, name, offset, len, buf)?;
        self.read_done(buf);
        Ok(())
    }
    fn read_range_bulk(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        self.request();
        let at = self.inner.read_range_bulk(t, name, offset, len, buf)?;
        self.stats.bytes_read.fetch_add(len, Ordering::Relaxed);
        self.transfer(len);
        Ok(at)
    }
    fn hints(&self) -> BackendHints {
        let inner = self.inner.hints();
        if self.throttle == Throttle::default() {
            return inner;
        }
        BackendHints {
            local: false,
            latency: Some(self.throttle.latency),
            bandwidth: (self.throttle.bandwidth > 0)
                .then_some(self.throttle.bandwidth)
                .or(inner.bandwidth),
            connections: inner.connections,
        }
    }
    fn note_tree_packs(&self, names: &[String]) {
        self.inner.note_tree_packs(names)
    }
    fn warm(&self, types: &[FileType]) {
        self.inner.warm(types)
    }
    fn local_folder(&self) -> Option<std::path::PathBuf> {
        self.inner.local_folder()
    }
    fn root_kind(&self) -> crate::RootKind {
        self.request();
        self.inner.root_kind()
    }
    fn prefetch(&self, t: FileType, name: &str, offset: u64, len: u64) {
        self.inner.prefetch(t, name, offset, len)
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        self.request();
        self.transfer(data.len() as u64);
        self.inner.write(t, name, data)?;
        self.stats
            .bytes_written
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }
    fn sink(&self, t: FileType) -> Result<Option<Box<dyn FileSink>>> {
        // A simulated link sees whole writes (the default); otherwise count at the commit.
        if self.throttle != Throttle::default() {
            return Ok(None);
        }
        Ok(self.inner.sink(t)?.map(|inner| {
            Box::new(MeteredSink {
                inner,
                stats: Arc::clone(&self.stats),
            }) as Box<dyn FileSink>
        }))
    }
    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        self.request();
        self.inner.delete(t, name)
    }
    fn remove(&self, t: FileType, name: &str) -> Result<()> {
        self.request();
        self.inner.remove(t, name)
    }
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        self.request();
        self.inner.stat(t, name)
    }
    fn remove_stale_temp(&self, older_than: std::time::Duration, remove: bool) -> Result<u64> {
        self.request();
        self.inner.remove_stale_temp(older_than, remove)
    }
    fn sync_removals(&self) -> Result<()> {
        self.inner.sync_removals()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryBackend;

    #[test]
    fn counts_and_throttles() {
        let b = MeteredBackend::new(
            MemoryBackend::new(),
            Throttle {
                latency: Duration::from_millis(5),
                bandwidth: 1_000_000,
            },
        );
        let id = "ab".repeat(32);
        let t0 = Instant::now();
        b.write(FileType::Pack, &id, &[0u8; 50_000]).unwrap();
        let _ = b.read_range(FileType::Pack, &id, 0, 50_000).unwrap();
        // Two requests of 5 ms plus 100 kB at 1 MB/s.
        assert!(
            t0.elapsed() >= Duration::from_millis(100),
            "{:?}",
            t0.elapsed()
        );
        let s = b.stats().snapshot();
        assert_eq!(
            s,
            StatsSnapshot {
                requests: 2,
                bytes_read: 50_000,
                bytes_written: 50_000
            }
        );
    }
}

/// A sink of a [`MeteredBackend`]: counts the file as one write request at its commit.
#[derive(Debug)]
struct MeteredSink {
    inner: Box<dyn FileSink>,
    stats: Arc<BackendStats>,
}

impl FileSink for MeteredSink {
    fn write(&mut self, data: &[u8]) -> Result<()> {
        self.inner.write(data)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn commit(self: Box<Self>, name: &str) -> Result<()> {
        let Self { inner, stats } = *self;
        let len = inner.len();
        stats.requests.fetch_add(1, Ordering::Relaxed);
        inner.commit(name)?;
        stats.bytes_written.fetch_add(len, Ordering::Relaxed);
        Ok(())
    }
}
