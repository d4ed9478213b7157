//! The watchdog: when no block, file or read has completed for a while, it reports a stall
//! naming what every stage is waiting for, and reports again while the stall lasts. It only
//! reports; a restore that is merely slow is never stopped by it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::Observer;
use crate::ctx::Shared;
use crate::profile::Board;

/// Watches until `finished` is closed (it wakes the watchdog at once); returns the number
/// of stall reports made.
pub(crate) fn watch(
    sh: &Shared,
    board: &Board,
    stall_after: Duration,
    finished: Receiver<()>,
    observer: &dyn Observer,
) -> u64 {
    let tick = (stall_after / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut last_beat = sh.counters.beats.load(Ordering::Relaxed);
    let mut since = Instant::now();
    let mut reports = 0;
    while let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(tick) {
        let beat = sh.counters.beats.load(Ordering::Relaxed);
        if beat != last_beat {
            last_beat = beat;
            since = Instant::now();
            continue;
        }
        if since.elapsed() >= stall_after {
            let mut msg = format!(
                "restore stalled: nothing completed for {:.1} s",
                since.elapsed().as_secs_f64()
            );
            for line in board.render() {
                msg.push_str("\n  ");
                msg.push_str(&line);
            }
            observer.stall(&msg);
            reports += 1;
            since = Instant::now();
        }
    }
    reports
}
