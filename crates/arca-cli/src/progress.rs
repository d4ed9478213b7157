//! A progress line on the terminal, redrawn from counters by a background thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Draws `render(elapsed)` every 200 ms until dropped.
pub struct ProgressLine {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    bar: Option<ProgressBar>,
}

impl ProgressLine {
    /// Starts drawing when `enabled`; otherwise does nothing.
    pub fn start(enabled: bool, render: impl Fn(Duration) -> String + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        if !enabled {
            return Self {
                stop,
                handle: None,
                bar: None,
            };
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let (b, s) = (bar.clone(), Arc::clone(&stop));
        let t0 = Instant::now();
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                b.set_message(render(t0.elapsed()));
                b.tick();
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Self {
            stop,
            handle: Some(handle),
            bar: Some(bar),
        }
    }

    /// Prints a line above the progress display.
    pub fn println(&self, line: &str) {
        self.suspend(|| eprintln!("{line}"));
    }

    /// Runs `f` with the progress display cleared (to print something else).
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }
}

/// Calls `tick(elapsed)` every `every` on a background thread until dropped (JSON status
/// lines).
pub struct Ticker {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts ticking.
    pub fn start(every: Duration, tick: impl Fn(Duration) + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let t0 = Instant::now();
        let handle = std::thread::spawn(move || {
            let mut next = every;
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if t0.elapsed() >= next {
                    tick(t0.elapsed());
                    next += every;
                }
            }
        });
        Self {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
