//! Progress of a running backup for a display: the estimate scan on its own thread
//! ([`Estimator`]) and readings of [`Progress`] with the fraction done and the time left.
//!
//! The command line's progress line and the web interface's jobs read a backup through this,
//! so both show the same percentage and ETA.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{BackupOptions, Progress};

/// The estimate scan ([`crate::scan::estimate`]) on its own thread beside a backup; stopped and
/// joined when dropped.
pub struct Estimator {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Estimator {
    /// Starts counting what a backup with `opts` will process into `progress`'s totals.
    pub fn start(opts: &BackupOptions, progress: &Arc<Progress>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (paths, excludes) = (opts.paths.clone(), opts.excludes.clone());
        let one_fs = opts.one_file_system;
        let (p, s) = (Arc::clone(progress), Arc::clone(&stop));
        // Without the thread there are no totals: the display then shows none.
        let handle = std::thread::Builder::new()
            .name("estimate".into())
            .spawn(move || crate::scan::estimate(&paths, &excludes, one_fs, &p, &s))
            .ok();
        Self { stop, handle }
    }
}

impl Drop for Estimator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// One reading of a backup's [`Progress`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// Seconds since the backup started.
    pub secs: f64,
    /// Files processed.
    pub files: u64,
    /// File bytes processed.
    pub bytes: u64,
    /// Bytes actually read.
    pub bytes_read: u64,
    /// Files found by the estimate scan.
    pub total_files: u64,
    /// Bytes found by the estimate scan.
    pub total_bytes: u64,
    /// The scan has finished: the totals are complete.
    pub totals_final: bool,
}

impl Reading {
    /// Reads `p`, `elapsed` after the start.
    pub fn read(p: &Progress, elapsed: Duration) -> Self {
        // Final first: once seen, the totals read after it are complete.
        let totals_final = p.totals_final.load(Ordering::Acquire);
        Self {
            secs: elapsed.as_secs_f64(),
            files: p.files.load(Ordering::Relaxed),
            bytes: p.bytes.load(Ordering::Relaxed),
            bytes_read: p.bytes_read.load(Ordering::Relaxed),
            total_files: p.total_files.load(Ordering::Relaxed),
            total_bytes: p.total_bytes.load(Ordering::Relaxed),
            totals_final,
        }
    }

    /// (done, total) in bytes, or in files when all files are empty; `None` without totals.
    /// Done never exceeds total (files may grow after the scan saw them).
    pub fn done_of_total(&self) -> Option<(u64, u64)> {
        if self.total_bytes > 0 {
            Some((self.bytes.min(self.total_bytes), self.total_bytes))
        } else if self.total_files > 0 {
            Some((self.files.min(self.total_files), self.total_files))
        } else {
            None
        }
    }

    /// Fraction done, in [0, 1].
    pub fn fraction(&self) -> f64 {
        self.done_of_total()
            .map_or(0.0, |(d, t)| (d as f64 / t as f64).clamp(0.0, 1.0))
    }

    /// Bytes processed per second so far.
    pub fn rate(&self) -> f64 {
        if self.secs > 0.0 {
            self.bytes as f64 / self.secs
        } else {
            0.0
        }
    }

    /// Seconds left at the rate so far: only once the totals are complete or the scan is
    /// ahead of the backup, and while bytes remain.
    pub fn eta(&self) -> Option<f64> {
        let ahead = self.total_files > self.files && self.total_bytes > self.bytes;
        let rate = self.rate();
        if !(self.totals_final || ahead) || self.total_bytes <= self.bytes || rate <= 0.0 {
            return None;
        }
        let eta = (self.total_bytes - self.bytes) as f64 / rate;
        eta.is_finite().then_some(eta.max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(files: u64, bytes: u64, total_files: u64, total_bytes: u64, fin: bool) -> Reading {
        Reading {
            secs: 10.0,
            files,
            bytes,
            bytes_read: bytes,
            total_files,
            total_bytes,
            totals_final: fin,
        }
    }

    #[test]
    fn fraction_and_eta() {
        let s = r(5, 100_000_000, 10, 200_000_000, true);
        assert_eq!(s.fraction(), 0.5);
        assert_eq!(s.eta(), Some(10.0));
        assert_eq!(r(10, 300, 10, 200, true).fraction(), 1.0);
        assert_eq!(r(10, 300, 10, 200, true).eta(), None);
        assert_eq!(r(5, 100, 3, 50, false).eta(), None);
        assert!(r(5, 100, 30, 500, false).eta().is_some());
        assert_eq!(r(1, 0, 4, 0, true).fraction(), 0.25);
        assert_eq!(r(0, 0, 0, 0, false).done_of_total(), None);
    }

    #[test]
    fn the_scan_counts_a_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a"), b"12345").expect("write");
        std::fs::write(dir.path().join("b"), b"678").expect("write");
        let progress = Arc::new(Progress::default());
        let opts = BackupOptions {
            paths: vec![dir.path().to_path_buf()],
            ..BackupOptions::default()
        };
        let e = Estimator::start(&opts, &progress);
        // Dropping the estimator stops a scan not yet over: wait for it (a minute at most,
        // for a loaded machine; 2.5 s was the bound).
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while !progress.totals_final.load(Ordering::Acquire) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(e);
        let r = Reading::read(&progress, Duration::from_secs(1));
        assert!(r.totals_final);
        assert_eq!((r.total_files, r.total_bytes), (2, 8));
    }
}
