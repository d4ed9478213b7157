//! The fetch stage: ranged reads of packs, several in flight. A transient backend failure is
//! retried with exponential backoff and jitter, bounded in attempts and in time; any other
//! failure fails only the files whose blocks the read carried.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arca_backend::{Backend, BackendError, FileType};
use arca_format::Id;
use arca_repo::PackRef;
use crossbeam_channel::{Receiver, Sender};

use crate::ctx::Shared;
use crate::jobs::{Done, FetchJob, Work};
use crate::profile::{Clock, Post};
use crate::schedule::lost;

/// Attempts of one read, the first included.
const ATTEMPTS: u32 = 6;
/// First backoff; doubled after every failure.
const BACKOFF: Duration = Duration::from_millis(100);
/// Longest single backoff.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// No retry starts after this long.
const RETRY_WINDOW: Duration = Duration::from_secs(60);

/// A pseudo-random factor in [0.5, 1.5) for backoff jitter.
fn jitter(seed: u64) -> f64 {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    0.5 + (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Reads `len` bytes of pack `pack` at `offset` into `buf`, retrying transient failures.
/// Returns where the bytes start in `buf` and the number of retries it took.
pub(crate) fn read_with_retry(
    backend: &dyn Backend,
    pack: &Id,
    offset: u64,
    len: u64,
    buf: &mut Vec<u8>,
    stop: &AtomicBool,
) -> Result<(usize, u32), BackendError> {
    let name = pack.to_hex();
    let started = Instant::now();
    let mut delay = BACKOFF;
    let mut attempt = 0;
    loop {
        let res = backend
            .read_range_bulk(FileType::Pack, &name, offset, len, buf)
            .and_then(|at| {
                if buf.len().saturating_sub(at) as u64 >= len {
                    Ok(at)
                } else {
                    Err(BackendError::new(
                        "read",
                        format!("{}/{}", backend.location(), FileType::Pack.path(&name)),
                        arca_backend::ErrorKind::ShortRead,
                        format!("got {} bytes, wanted {len} at offset {offset}", buf.len()),
                    ))
                }
            });
        match res {
            Ok(at) => return Ok((at, attempt)),
            Err(e) if e.is_transient() && attempt + 1 < ATTEMPTS => {
                if started.elapsed() > RETRY_WINDOW {
                    return Err(e);
                }
                let seed = started.elapsed().as_nanos() as u64 ^ offset ^ u64::from(attempt);
                let wait = delay.mul_f64(jitter(seed));
                let until = Instant::now() + wait;
                while Instant::now() < until {
                    if stop.load(Ordering::Relaxed) {
                        return Err(e);
                    }
                    std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
                }
                delay = (delay * 2).min(BACKOFF_MAX);
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

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
                let mut d = Done {
                    job: job.id,
                    ..Done::default()
                };
                for jb in &job.blobs {
                    let len = u64::from(sh.plan.blobs[jb.blob as usize].raw_len);
                    for &t in &jb.targets {
                        sh.fail_file(t.file, || lost(sh, t, &why));
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
