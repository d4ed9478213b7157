//! Where a pipeline's time goes: every thread of a stage splits its life into working, waiting
//! for input and waiting to hand its output on (backup's and restore's `--profile`).

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
pub struct Clock {
    mark: Instant,
    busy: Duration,
    wait_in: Duration,
    wait_out: Duration,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A stopwatch started now.
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
pub fn stage(name: &'static str, clocks: &[Clock]) -> StageProfile {
    let s = |f: fn(&Clock) -> Duration| clocks.iter().map(f).sum::<Duration>().as_secs_f64();
    StageProfile {
        name,
        threads: clocks.len(),
        busy: s(|c| c.busy),
        wait_in: s(|c| c.wait_in),
        wait_out: s(|c| c.wait_out),
    }
}
