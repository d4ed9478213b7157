//! A progress line on the terminal, redrawn from counters by a background thread.

use std::sync::Mutex;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// What a progress display shows at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BarState {
    /// The status line.
    pub text: String,
    /// How far along, as (done, total), when a total is known.
    pub bar: Option<(u64, u64)>,
    /// Shown after the bar (e.g. rate and ETA); after the text, behind a comma, without one.
    pub detail: String,
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

/// The status line (cut to the terminal's width), then a bar filling the terminal's width
/// but for the detail (`{prefix}`) after it.
fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{wide_msg}\n[{wide_bar}] {prefix:<24}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// Waits `every` (or until `stop` is dropped, which ends the wait at once): whether to go on.
/// A background thread paced this way never holds up the command that ends it.
fn wait(stop: &mpsc::Receiver<()>, every: Duration) -> bool {
    matches!(stop.recv_timeout(every), Err(RecvTimeoutError::Timeout))
}

/// A background thread that paces itself with [`wait`] on the receiver it is given; stopped
/// (its sender dropped) and joined when this is dropped.
struct Paced {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Paced {
    fn spawn(run: impl FnOnce(mpsc::Receiver<()>) + Send + 'static) -> Self {
        let (stop, rx) = mpsc::channel();
        Self {
            stop: Some(stop),
            handle: Some(std::thread::spawn(move || run(rx))),
        }
    }
}

impl Drop for Paced {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The progress display on screen now, if any: [`warn`] prints above it.
static SHOWN: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Prints a warning on standard error, above the progress display when one is shown (so
/// that the two do not garble each other).
pub fn warn(line: &str) {
    let shown = SHOWN.lock().unwrap_or_else(|p| p.into_inner()).clone();
    match shown {
        Some(b) => b.suspend(|| eprintln!("{line}")),
        None => eprintln!("{line}"),
    }
}

/// Draws `render(elapsed)` every 200 ms until dropped.
pub struct ProgressLine {
    drawing: Option<Paced>,
    bar: Option<ProgressBar>,
}

impl ProgressLine {
    /// Starts drawing when `enabled`; otherwise does nothing.
    pub fn start(enabled: bool, render: impl Fn(Duration) -> String + Send + 'static) -> Self {
        Self::start_bar(enabled, move |el| BarState {
            text: render(el),
            ..BarState::default()
        })
    }

    /// Starts drawing `render(elapsed)` when `enabled`: its text on one line and, while it
    /// gives a `(done, total)`, a progress bar on the next (a spinner before the text when it
    /// does not).
    pub fn start_bar(
        enabled: bool,
        render: impl Fn(Duration) -> BarState + Send + 'static,
    ) -> Self {
        if !enabled {
            return Self {
                drawing: None,
                bar: None,
            };
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(spinner_style());
        *SHOWN.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar.clone());
        let b = bar.clone();
        let t0 = Instant::now();
        let drawing = Paced::spawn(move |s| {
            let mut with_bar = false;
            loop {
                let state = render(t0.elapsed());
                // Each setter redraws: the message goes last so that what stays on screen is
                // the whole new state.
                match state.bar {
                    Some((done, total)) => {
                        if !with_bar {
                            b.set_style(bar_style());
                            with_bar = true;
                        }
                        b.update(|p| {
                            p.set_len(total);
                            p.set_pos(done.min(total));
                        });
                        b.set_prefix(state.detail);
                        b.set_message(state.text);
                    }
                    None => {
                        if with_bar {
                            b.set_style(spinner_style());
                            b.unset_length();
                            with_bar = false;
                        }
                        b.tick();
                        if state.detail.is_empty() {
                            b.set_message(state.text);
                        } else {
                            b.set_message(format!("{}, {}", state.text, state.detail));
                        }
                    }
                }
                if !wait(&s, Duration::from_millis(200)) {
                    break;
                }
            }
        });
        Self {
            drawing: Some(drawing),
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
    _ticking: Paced,
}

impl Ticker {
    /// Starts ticking.
    pub fn start(every: Duration, tick: impl Fn(Duration) + Send + 'static) -> Self {
        let t0 = Instant::now();
        Self {
            _ticking: Paced::spawn(move |s| {
                let mut next = every;
                while wait(&s, next.saturating_sub(t0.elapsed())) {
                    tick(t0.elapsed());
                    next += every;
                }
            }),
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        // The drawing stops before the line is cleared.
        drop(self.drawing.take());
        if let Some(b) = self.bar.take() {
            SHOWN.lock().unwrap_or_else(|p| p.into_inner()).take();
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn a_dropped_sender_ends_the_wait_at_once() {
        let (tx, rx) = mpsc::channel::<()>();
        assert!(
            wait(&rx, Duration::from_millis(1)),
            "a live sender: the wait times out"
        );
        drop(tx);
        // With the sender gone an hour's wait returns at once (else this test hangs).
        assert!(!wait(&rx, Duration::from_secs(3600)));
    }

    #[test]
    fn a_ticker_ticks_until_dropped_and_its_drop_does_not_wait_a_period() {
        let n = Arc::new(AtomicU32::new(0));
        let m = Arc::clone(&n);
        let t = Ticker::start(Duration::from_millis(5), move |_| {
            m.fetch_add(1, Ordering::SeqCst);
        });
        while n.load(Ordering::SeqCst) < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(t);
        let after = n.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            n.load(Ordering::SeqCst),
            after,
            "ticked after being dropped"
        );
        // A ticker with a period of an hour is dropped without waiting for it.
        drop(Ticker::start(Duration::from_secs(3600), |_| {}));
    }
}
