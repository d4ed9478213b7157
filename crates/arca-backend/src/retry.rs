//! Retries transient backend failures (jittered exponential backoff, bounded in count and time);
//! after a burst of them one probe goes alone. Bulk reads get one try: restore retries those.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::{Backend, BackendError, BackendHints, ErrorKind, FileInfo, FileSink, FileType, Result};

/// A transient failure about to be retried, for whoever tells the user (see [`on_retry`]).
#[derive(Debug)]
pub struct RetryNotice<'a> {
    /// The failure.
    pub error: &'a BackendError,
    /// The attempt about to be made (2 for the first retry).
    pub attempt: u32,
    /// Attempts allowed in all.
    pub attempts: u32,
    /// The wait before it.
    pub delay: Duration,
}

type Observer = Box<dyn Fn(&RetryNotice<'_>) + Send + Sync>;

static OBSERVER: OnceLock<Observer> = OnceLock::new();

/// Sets, once per process, what is told of every retry of a transient failure (by a
/// [`RetryBackend`], or by a caller retrying on its own with [`notify_retry`]); a program
/// shows these so that a failing server is not mistaken for a hang. Later calls are ignored.
pub fn on_retry(f: impl Fn(&RetryNotice<'_>) + Send + Sync + 'static) {
    let _ = OBSERVER.set(Box::new(f));
}

/// Tells the observer set with [`on_retry`], if any, of a retry.
pub fn notify_retry(notice: &RetryNotice<'_>) {
    if let Some(f) = OBSERVER.get() {
        f(notice);
    }
}

/// How a [`RetryBackend`] retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts of one operation, the first included (at least one is made).
    pub attempts: u32,
    /// First backoff, doubled after every failure.
    pub base_delay: Duration,
    /// Longest single backoff.
    pub max_delay: Duration,
    /// No retry starts this long after the operation started, and no caller waits longer than
    /// this for a probe to succeed.
    pub window: Duration,
    /// Transient failures in a row, across all callers, after which requests wait for a
    /// probe; 0 never probes.
    pub burst: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 12,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            window: Duration::from_secs(60),
            burst: 3,
        }
    }
}

/// Counters of a [`RetryBackend`], shared with whoever reports them.
#[derive(Debug, Default)]
pub struct RetryStats {
    retries: AtomicU64,
    failures: AtomicU64,
    probes: AtomicU64,
    probing: AtomicBool,
}

impl RetryStats {
    /// Attempts made after a transient failure.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }
    /// Transient failures seen (of first attempts and retries alike).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
    /// Probe requests sent while the backend was failing.
    pub fn probes(&self) -> u64 {
        self.probes.load(Ordering::Relaxed)
    }
    /// Whether a probe is in flight now (and so nothing else is).
    pub fn probing(&self) -> bool {
        self.probing.load(Ordering::SeqCst)
    }
}

/// The shared failure state ("circuit breaker").
#[derive(Debug)]
struct Breaker {
    /// Transient failures in a row, across callers.
    failures: u32,
    /// Only a probe may go to the backend.
    probing: bool,
    /// The probe is in flight.
    probe_out: bool,
    /// Requests admitted and not yet settled.
    in_flight: u32,
    /// Requests admitted so far.
    admitted: u64,
    /// `admitted` when the last transient failure was seen: an answer to a request admitted
    /// before that is stale and proves nothing about the backend now.
    fail_mark: u64,
    /// No probe starts before this.
    next_probe: Instant,
    /// Wait before the probe after the next one, if that fails too.
    probe_delay: Duration,
    /// When the transient failures in a row began (none since the last answer: `None`).
    failing_since: Option<Instant>,
    /// The cause of the last transient failure while they go on: what an operation that is
    /// never admitted reports, instead of a cause it did not see.
    last_cause: Option<String>,
}

/// Admission and settling of requests, independent of the backend type.
#[derive(Debug)]
struct Gate {
    policy: RetryPolicy,
    stats: Arc<RetryStats>,
    breaker: Mutex<Breaker>,
    changed: Condvar,
    rng: AtomicU64,
    /// An operation retried until its attempts or window ran out and still failed: the
    /// backend is down, and until it answers again every operation gets one attempt (so a
    /// command that has lost its server ends in one retry window, not one per operation).
    down: AtomicBool,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, Breaker> {
        // Every update leaves the state consistent, so a poisoned lock is still usable.
        self.breaker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A pseudo-random factor in [0.5, 1.5).
    fn jitter(&self) -> f64 {
        let mut x = self.rng.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        0.5 + (x >> 11) as f64 / (1u64 << 53) as f64
    }

    fn jittered(&self, d: Duration) -> Duration {
        Duration::try_from_secs_f64(d.as_secs_f64() * self.jitter()).unwrap_or(d)
    }

    /// Waits for the right to send a request: at or after `not_before` normally; while probing,
    /// only as the probe (when nothing else is in flight and the probe backoff has passed).
    /// Returns the request's ticket, or `None` when `deadline` passed first.
    fn admit(&self, not_before: Instant, deadline: Instant) -> Option<Ticket> {
        let mut b = self.lock();
        // A caller that waited for a probe goes as soon as the probe succeeds.
        let mut saw_probing = false;
        loop {
            let now = Instant::now();
            let wake = if !b.probing {
                if saw_probing || now >= not_before {
                    return Some(b.ticket(false));
                }
                not_before
            } else {
                saw_probing = true;
                if !b.probe_out && b.in_flight == 0 && now >= b.next_probe {
                    b.probe_out = true;
                    self.stats.probes.fetch_add(1, Ordering::Relaxed);
                    self.stats.probing.store(true, Ordering::SeqCst);
                    return Some(b.ticket(true));
                }
                if now >= deadline {
                    return None;
                }
                let next = if b.probe_out || b.in_flight > 0 {
                    deadline
                } else {
                    b.next_probe
                };
                next.min(deadline)
            };
            b = match self
                .changed
                .wait_timeout(b, wake.saturating_duration_since(now))
            {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// The cause of the last transient failure, and how long every request has failed.
    fn outage(&self) -> (Option<String>, Duration) {
        let b = self.lock();
        let failing = b.failing_since.map_or(Duration::ZERO, |t| t.elapsed());
        (b.last_cause.clone(), failing)
    }

    /// How long every request has failed transiently (zero when the last answered).
    fn failing_for(&self) -> Duration {
        self.lock()
            .failing_since
            .map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Records the outcome of an admitted request: any fresh answer but a transient failure
    /// shows the backend works and ends probing; transient failures count towards a burst.
    /// `cause`: the transient failure's error, when there is one (a panic leaves none).
    fn settle(&self, ticket: Ticket, transient: bool, cause: Option<&BackendError>) {
        let mut b = self.lock();
        b.in_flight = b.in_flight.saturating_sub(1);
        let base = self.policy.base_delay;
        let probe = ticket.probe;
        if probe {
            b.probe_out = false;
            self.stats.probing.store(false, Ordering::SeqCst);
        }
        if let Some(e) = cause.filter(|_| transient) {
            b.last_cause = Some(e.source.to_string());
        }
        if !transient {
            if ticket.seq >= b.fail_mark {
                self.down.store(false, Ordering::SeqCst);
                b.failing_since = None;
                b.last_cause = None;
                b.failures = 0;
                b.probing = false;
                b.probe_delay = base;
            }
        } else {
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            b.fail_mark = b.admitted;
            b.failing_since.get_or_insert_with(Instant::now);
            b.failures = b.failures.saturating_add(1);
            let burst = self.policy.burst > 0 && b.failures >= self.policy.burst;
            if probe || (!b.probing && burst) {
                b.probing = true;
                let wait = if probe { b.probe_delay } else { base };
                b.next_probe = Instant::now() + self.jittered(wait);
                b.probe_delay = wait.saturating_mul(2).min(self.policy.max_delay);
            }
        }
        drop(b);
        self.changed.notify_all();
    }
}

impl Breaker {
    fn ticket(&mut self, probe: bool) -> Ticket {
        self.in_flight += 1;
        self.admitted += 1;
        Ticket {
            probe,
            seq: self.admitted - 1,
        }
    }
}

/// An admission: whether it is the probe, and its order.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    probe: bool,
    seq: u64,
}

/// An admitted request; settled as a transient failure if dropped unsettled (a panic).
struct Slot<'a> {
    gate: &'a Gate,
    ticket: Ticket,
    open: bool,
}

impl Slot<'_> {
    fn close(mut self, failed: Option<&BackendError>) {
        self.open = false;
        let transient = failed.is_some_and(BackendError::is_transient);
        self.gate.settle(self.ticket, transient, failed);
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if self.open {
            self.gate.settle(self.ticket, true, None);
        }
    }
}

/// Retries the inner backend's transient failures; see the module documentation.
///
/// Every operation is retried except `read_range_bulk` (restore's fetch loop retries it with its
/// own backoff and reports its own count, so attempts do not multiply), which gets one attempt,
/// but like all others waits while a probe is out. A retried `create` finds the folders the
/// cut-off attempt made (it writes no file) and makes the rest, as `init` run again does. A
/// retried `write` simply writes again (backends write atomically); a retried `delete` that
/// finds the file gone succeeds.
///
/// After `burst` transient failures in a row (across threads) callers wait, at most the policy's
/// window, while one probe at a time goes alone once nothing else is in flight, with growing
/// backoff, until one gets an answer. Answers to requests sent before the last failure was
/// seen are stale: they neither end a burst nor stop probing.
#[derive(Debug)]
pub struct RetryBackend<B> {
    inner: B,
    gate: Gate,
}

impl<B: Backend> RetryBackend<B> {
    /// Wraps `inner`.
    pub fn new(inner: B, policy: RetryPolicy) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self {
            inner,
            gate: Gate {
                policy,
                stats: Arc::new(RetryStats::default()),
                breaker: Mutex::new(Breaker {
                    failures: 0,
                    probing: false,
                    probe_out: false,
                    in_flight: 0,
                    admitted: 0,
                    fail_mark: 0,
                    next_probe: Instant::now(),
                    probe_delay: policy.base_delay,
                    failing_since: None,
                    last_cause: None,
                }),
                changed: Condvar::new(),
                rng: AtomicU64::new(seed),
                down: AtomicBool::new(false),
            },
        }
    }

    /// The shared counters.
    pub fn stats(&self) -> Arc<RetryStats> {
        Arc::clone(&self.gate.stats)
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// Runs `f` up to `attempts` times while it fails transiently.
    fn run<T>(
        &self,
        op: &'static str,
        t: FileType,
        name: &str,
        attempts: u32,
        mut f: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let p = &self.gate.policy;
        let start = Instant::now();
        let down = self.gate.down.load(Ordering::SeqCst);
        // Given up on before, or a caller that retries by itself (restore's bulk reads): one
        // attempt, waiting for its turn at most the longest a probe may be delayed (1.5
        // backoffs). Such reads waited up to a whole window each for a probe, so a restore
        // that had lost its server took two and a half minutes to fail.
        let short = p.window.min(p.max_delay.saturating_mul(2));
        let (attempts, window) = if down || attempts <= 1 {
            (1, short)
        } else {
            (attempts, p.window)
        };
        let deadline = start
            .checked_add(window)
            .unwrap_or_else(|| start + Duration::from_secs(86_400 * 365));
        // Marks the backend down when this operation, retried, still failed, or when every
        // request has failed for half a window (callers retrying by themselves never retry
        // here: the lock's release after their restore gave up took another minute).
        let gave_up = |e: BackendError| {
            if e.is_transient() && (attempts > 1 || self.gate.failing_for() >= p.window / 2) {
                self.gate.down.store(true, Ordering::SeqCst);
            }
            e
        };
        let mut delay = p.base_delay;
        let mut not_before = start;
        let mut last: Option<BackendError> = None;
        let mut tries = 0;
        loop {
            let Some(ticket) = self.gate.admit(not_before, deadline) else {
                return Err(gave_up(last.unwrap_or_else(|| {
                    // Never admitted: report what the other requests met, over the whole
                    // outage, not this operation's own short wait.
                    let (cause, failing) = self.gate.outage();
                    let failing = failing.max(start.elapsed()).as_secs_f64();
                    BackendError::new(
                        op,
                        match name {
                            "" => format!("{}/{}", self.inner.location(), t.dir()),
                            _ => format!("{}/{}", self.inner.location(), t.path(name)),
                        },
                        ErrorKind::Transient,
                        match cause {
                            Some(c) => format!("{c} (every request failing for {failing:.1} s)"),
                            None => {
                                format!("backend unavailable: still failing after {failing:.1} s")
                            }
                        },
                    )
                })));
            };
            let slot = Slot {
                gate: &self.gate,
                ticket,
                open: true,
            };
            if tries > 0 {
                self.gate.stats.retries.fetch_add(1, Ordering::Relaxed);
            }
            tries += 1;
            let res = f();
            slot.close(res.as_ref().err());
            match res {
                Err(e)
                    if e.is_transient()
                        && tries < attempts
                        && start.elapsed() < window
                        && !self.gate.down.load(Ordering::SeqCst) =>
                {
                    let wait = self.gate.jittered(delay);
                    notify_retry(&RetryNotice {
                        error: &e,
                        attempt: tries + 1,
                        attempts,
                        delay: wait,
                    });
                    not_before = Instant::now() + wait;
                    delay = delay.saturating_mul(2).min(p.max_delay);
                    last = Some(e);
                }
                res => return res.map_err(gave_up),
            }
        }
    }

    fn attempts(&self) -> u32 {
        self.gate.policy.attempts.max(1)
    }
}

impl<B: Backend> Backend for RetryBackend<B> {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> Result<()> {
        self.run("create", FileType::Config, "", self.attempts(), || {
            self.inner.create()
        })
    }
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        self.run("list", t, "", self.attempts(), || self.inner.list(t))
    }
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        self.run("read", t, name, self.attempts(), || {
            self.inner.read(t, name)
        })
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.run("read", t, name, self.attempts(), || {
            self.inner.read_range(t, name, offset, len)
        })
    }
    fn read_range_into(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.run("read", t, name, self.attempts(), || {
            self.inner.read_range_into(t, name, offset, len, buf)
        })
    }
    fn read_range_bulk(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        self.run("read", t, name, 1, || {
            self.inner.read_range_bulk(t, name, offset, len, buf)
        })
    }
    fn hints(&self) -> BackendHints {
        self.inner.hints()
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
        self.inner.root_kind()
    }
    fn prefetch(&self, t: FileType, name: &str, offset: u64, len: u64) {
        self.inner.prefetch(t, name, offset, len)
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        self.run("write", t, name, self.attempts(), || {
            self.inner.write(t, name, data)
        })
    }
    fn sink(&self, t: FileType) -> Result<Option<Box<dyn FileSink>>> {
        // Pieces already written cannot be written again: a failed sink fails its file, and
        // the caller decides (a backup stops; its packs so far are indexed).
        self.inner.sink(t)
    }
    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        let mut again = false;
        self.run("delete", t, name, self.attempts(), || {
            match self.inner.delete(t, name) {
                // The failed attempt may have deleted it after all.
                Err(e) if again && e.is_not_found() => Ok(()),
                r => {
                    again = true;
                    r
                }
            }
        })
    }
    fn remove(&self, t: FileType, name: &str) -> Result<()> {
        self.run("delete", t, name, self.attempts(), || {
            self.inner.remove(t, name)
        })
    }
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        self.run("stat", t, name, self.attempts(), || {
            self.inner.stat(t, name)
        })
    }
    fn remove_stale_temp(&self, older_than: Duration, remove: bool) -> Result<u64> {
        // Idempotent: a retry removes what the failed attempt left.
        self.run(
            "remove temporary files",
            FileType::Config,
            "",
            self.attempts(),
            || self.inner.remove_stale_temp(older_than, remove),
        )
    }
    fn sync_removals(&self) -> Result<()> {
        self.inner.sync_removals()
    }
}

#[cfg(test)]
mod tests;
