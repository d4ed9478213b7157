//! Where the time goes: every thread of every stage splits its life into working, waiting for
//! input and waiting to hand its output on, and posts what it is doing on a board that the
//! watchdog reads when nothing moves.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How one stage spent its time, summed over its threads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageProfile {
    /// Stage name.
    pub name: &'static str,
    /// Threads of the stage.
    pub threads: usize,
    /// Seconds spent working.
    pub busy: f64,
    /// Seconds spent waiting for input.
    pub wait_in: f64,
    /// Seconds spent waiting to hand output on (a full queue downstream).
    pub wait_out: f64,
}

/// A thread's stopwatch: each call charges the time since the previous one to a category.
#[derive(Debug)]
pub(crate) struct Clock {
    mark: Instant,
    busy: Duration,
    wait_in: Duration,
    wait_out: Duration,
}

impl Clock {
    pub fn new() -> Self {
        Self {
            mark: Instant::now(),
            busy: Duration::ZERO,
            wait_in: Duration::ZERO,
            wait_out: Duration::ZERO,
        }
    }
    fn lap(&mut self) -> Duration {
        let now = Instant::now();
        let d = now - self.mark;
        self.mark = now;
        d
    }
    /// The time since the last call was spent working.
    pub fn busy(&mut self) {
        let d = self.lap();
        self.busy += d;
    }
    /// ... waiting for input.
    pub fn waited_in(&mut self) {
        let d = self.lap();
        self.wait_in += d;
    }
    /// ... waiting to hand output on.
    pub fn waited_out(&mut self) {
        let d = self.lap();
        self.wait_out += d;
    }
}

/// Sums the clocks of one stage's threads.
pub(crate) fn stage(name: &'static str, clocks: &[Clock]) -> StageProfile {
    let s = |f: fn(&Clock) -> Duration| clocks.iter().map(f).sum::<Duration>().as_secs_f64();
    StageProfile {
        name,
        threads: clocks.len(),
        busy: s(|c| c.busy),
        wait_in: s(|c| c.wait_in),
        wait_out: s(|c| c.wait_out),
    }
}

/// What each thread is doing right now, and since when.
#[derive(Debug, Default)]
pub(crate) struct Board {
    slots: Mutex<Vec<(String, String, Instant)>>,
}

impl Board {
    /// Adds a slot for a thread named `who`.
    pub fn join(&self, who: String) -> Post<'_> {
        let mut s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        s.push((who, "starting".into(), Instant::now()));
        Post {
            board: self,
            slot: s.len() - 1,
        }
    }
    /// One line per thread: who, what, for how long.
    pub fn render(&self) -> Vec<String> {
        let s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        s.iter()
            .map(|(who, what, since)| {
                format!("{who}: {what} (for {:.1} s)", since.elapsed().as_secs_f64())
            })
            .collect()
    }
}

/// One thread's place on the board.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Post<'b> {
    board: &'b Board,
    slot: usize,
}

impl Post<'_> {
    /// Posts what the thread does now.
    pub fn post(&self, what: impl Into<String>) {
        let mut s = self.board.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = s.get_mut(self.slot) {
            e.1 = what.into();
            e.2 = Instant::now();
        }
    }
}
