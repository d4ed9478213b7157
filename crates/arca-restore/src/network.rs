//! Wiring the restore network: the scheduler on the calling thread, fetchers and workers on
//! their own, bounded channels between them in one direction, the watchdog beside them. The
//! scheduler's return is the single shutdown point: dropping its channel ends closes every
//! stage in turn, whether the restore finished or stopped.
//!
//! ```text
//!   scheduler ──FetchJob──▶ fetchers ×F ──Work::Fetched──▶ workers ×W ──DirectJob──▶ direct
//!       │                                                     ▲   │  ◀──(its own reply)── writers ×D
//!       └──────────────────Work::Place───────────────────────┘   │
//!       ▲                                                         │
//!       └──────────── Done (room for every job in flight) ────────┘
//! ```

use arca_repo::{Index, Repository};
use crossbeam_channel::{Receiver, bounded};

use crate::Observer;
use crate::ctx::Shared;
use crate::jobs::Late;
use crate::options::Resolved;
use crate::place::Worker;
use crate::profile::{Board, Clock, StageProfile, stage};
use crate::schedule::{Links, SchedStats, Scheduler};

/// What the network did.
#[derive(Debug, Default)]
pub(crate) struct NetworkReport {
    pub sched: SchedStats,
    pub stages: Vec<StageProfile>,
    pub stalls: u64,
}

/// Runs the content phase of a restore to its end.
pub(crate) fn run(
    sh: &Shared,
    repo: &Repository,
    index: &Index,
    t: Resolved,
    reuse: crate::reuse::Reusable,
    late: Receiver<Late>,
    observer: &dyn Observer,
) -> NetworkReport {
    let board = Board::default();
    let (finished_tx, finished_rx) = crossbeam_channel::bounded::<()>(0);
    let backend = repo.backend().as_ref();
    let packs = index.packs();
    let (fetch_tx, fetch_rx) = bounded(t.queue);
    let (work_tx, work_rx) = bounded(t.queue);
    let (done_tx, done_rx) = bounded(Scheduler::done_capacity(&t));
    let (direct_tx, direct_rx) = bounded(t.queue);
    let direct_tx = (t.direct_writes > 0).then_some(direct_tx);
    std::thread::scope(|s| {
        let fetchers: Vec<_> = (0..t.fetchers)
            .map(|i| {
                let post = board.join(format!("fetcher {}", i + 1));
                let (rx, tx, done) = (fetch_rx.clone(), work_tx.clone(), done_tx.clone());
                s.spawn(move || {
                    guarded(sh, "fetcher", || {
                        crate::fetch::fetcher(sh, backend, packs, rx, tx, done, post)
                    })
                })
            })
            .collect();
        let workers: Vec<_> = (0..t.workers)
            .map(|i| {
                let post = board.join(format!("worker {}", i + 1));
                let (rx, done) = (work_rx.clone(), done_tx.clone());
                let direct = direct_tx.clone();
                s.spawn(move || {
                    guarded(sh, "worker", || {
                        Worker::new(sh, repo, index, direct).run(rx, done, post)
                    })
                })
            })
            .collect();
        let writers: Vec<_> = (0..t.direct_writes)
            .map(|i| {
                let post = board.join(format!("direct writer {}", i + 1));
                let rx = direct_rx.clone();
                s.spawn(move || guarded(sh, "direct writer", || crate::direct::writer(rx, post)))
            })
            .collect();
        drop((fetch_rx, work_rx, done_tx, direct_tx, direct_rx));
        // Hints only to a local repository, which turns them into disk reads queued ahead.
        if t.prefetch > 0 && backend.hints().local {
            let (reuse, finished) = (reuse.clone(), finished_rx.clone());
            s.spawn(move || {
                let hints = crate::prefetch::hints(sh, &reuse, t.read_gap, t.max_read);
                crate::prefetch::run(sh, backend, packs, hints, t.prefetch, &finished);
            });
        }
        let board = &board;
        let watchdog = s
            .spawn(move || crate::watchdog::watch(sh, board, t.stall_after, finished_rx, observer));
        let post = board.join("scheduler".into());
        let (sched, sched_clock) = Scheduler::new(sh, t, reuse).run(
            Links {
                fetch: fetch_tx,
                work: work_tx,
                done: done_rx,
                late,
            },
            post,
        );
        let join = |hs: Vec<std::thread::ScopedJoinHandle<'_, Clock>>| -> Vec<Clock> {
            hs.into_iter().filter_map(|h| h.join().ok()).collect()
        };
        let fetch_clocks = join(fetchers);
        let work_clocks = join(workers);
        let write_clocks = join(writers);
        drop(finished_tx);
        let stalls = watchdog.join().unwrap_or(0);
        NetworkReport {
            sched,
            stages: vec![
                stage("scheduler", &[sched_clock]),
                stage("fetch", &fetch_clocks),
                stage("decode+write", &work_clocks),
            ]
            .into_iter()
            .chain((!write_clocks.is_empty()).then(|| stage("direct write", &write_clocks)))
            .collect(),
            stalls,
        }
    })
}

/// Runs a stage; a panic (a bug) stops the whole restore with an error instead of leaving the
/// scheduler waiting for a report that never comes.
fn guarded(sh: &Shared, name: &str, f: impl FnOnce() -> Clock) -> Clock {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(c) => c,
        Err(_) => {
            sh.fail(crate::RestoreError::Internal(format!(
                "a {name} thread panicked"
            )));
            Clock::new()
        }
    }
}
