//! The fetch stage: ranged reads of packs, several in flight. A transient backend failure is
//! retried with exponential backoff and jitter, bounded in attempts and in time; one that
//! outlasts the retries (the server gone, the network down) stops the restore, as a full disk
//! does (a rerun goes on from there); any other failure (a missing or short pack) fails only
//! the files whose blocks the read carried.

use std::sync::atomic::Ordering;

use arca_backend::Backend;
use arca_repo::PackRef;
use arca_repo::trees::ranges::read_with_retry;
use crossbeam_channel::{Receiver, Sender};

use crate::ctx::Shared;
use crate::jobs::lost;
use crate::jobs::{Done, FetchJob, Work};
use crate::profile::{Clock, Post};

/// One fetcher thread: takes reads from the scheduler, hands filled buffers to the workers.
pub(crate) fn fetcher(
    sh: &Shared,
    backend: &dyn Backend,
    packs: &[PackRef],
    jobs: Receiver<FetchJob>,
    work: Sender<Work>,
    done: Sender<Done>,
    post: Post<'_>,
) -> Clock {
    let mut clock = Clock::new();
    post.post("waiting for a read to do");
    while let Ok(mut job) = jobs.recv() {
        clock.waited_in();
        if sh.stopped() {
            // Reported so the scheduler's count stays right; nothing more is done.
            let _ = done.send(Done {
                job: job.id,
                buffer: Some(std::mem::take(&mut job.buf)),
                ..Done::default()
            });
            continue;
        }
        let pack = packs[job.pack as usize].id;
        post.post(format!(
            "reading {} bytes at offset {} of pack {}",
            job.len,
            job.offset,
            pack.short()
        ));
        let res = read_with_retry(
            backend,
            &pack,
            job.offset,
            job.len,
            &mut job.buf,
            sh.stop_flag(),
        );
        sh.counters.requests.fetch_add(1, Ordering::Relaxed);
        clock.busy();
        match res {
            Ok((at, retries)) => {
                job.at = at;
                sh.counters
                    .retries
                    .fetch_add(u64::from(retries), Ordering::Relaxed);
                sh.counters.fetched.fetch_add(job.len, Ordering::Relaxed);
                sh.counters.beats.fetch_add(1, Ordering::Relaxed);
                post.post("handing a read to the workers");
                if work.send(Work::Fetched(job)).is_err() {
                    break;
                }
                clock.waited_out();
            }
            Err(e) => {
                let why = e.to_string();
                // Every later read would wait out the same outage: the restore stops with one
                // message and exit 1, not a "content lost" line per file (nothing is lost).
                let outage = e.is_transient();
                if outage {
                    sh.fail(crate::RestoreError::Repo(arca_repo::RepoError::Backend(e)));
                } else {
                    // The pack is missing or cut short: the workers take each blob from
                    // another copy where the index knows one, or fail its files.
                    job.short = e.kind == arca_backend::ErrorKind::ShortRead && job.blobs.len() > 1;
                    job.failed = Some(why);
                    job.buf.clear();
                    if work.send(Work::Fetched(job)).is_err() {
                        break;
                    }
                    continue;
                }
                let mut d = Done {
                    job: job.id,
                    ..Done::default()
                };
                for jb in &job.blobs {
                    let len = u64::from(sh.plan.blobs[jb.blob as usize].raw_len);
                    for &t in &jb.targets {
                        if outage {
                            // Failed quietly: not finished, not reported as lost.
                            sh.file_flags[t.file as usize]
                                .fetch_or(crate::ctx::FAILED, Ordering::AcqRel);
                        } else {
                            sh.fail_file(t.file, || lost(sh, t, &why));
                        }
                        sh.op_done(t.file, None);
                        d.settled += len;
                    }
                    d.failed.push((jb.blob, why.clone()));
                }
                d.buffer = Some(std::mem::take(&mut job.buf));
                clock.busy();
                if done.send(d).is_err() {
                    break;
                }
            }
        }
        post.post("waiting for a read to do");
    }
    clock.waited_in();
    clock
}
