//! Unit tests of the retrying decorator, over the fault-injecting memory backend.

use std::io;
use std::sync::atomic::AtomicU32;
use std::sync::{Barrier, OnceLock};

use super::*;
use crate::{Fault, FaultBackend, MemoryBackend, Op, Rule, Trigger};

fn quick() -> RetryPolicy {
    RetryPolicy {
        attempts: 6,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(4),
        window: Duration::from_secs(10),
        burst: 3,
    }
}

fn rule(op: Op, trigger: Trigger, fault: Fault) -> Rule {
    Rule {
        op: Some(op),
        file_type: None,
        trigger,
        fault,
    }
}

fn faulty() -> (
    Arc<FaultBackend<MemoryBackend>>,
    RetryBackend<Arc<FaultBackend<MemoryBackend>>>,
) {
    let f = Arc::new(FaultBackend::new(MemoryBackend::new()));
    let r = RetryBackend::new(Arc::clone(&f), quick());
    (f, r)
}

const RESET: Fault = Fault::Fail(io::ErrorKind::ConnectionReset);

#[test]
fn transient_failures_are_retried() {
    let (f, r) = faulty();
    f.add(rule(Op::Write, Trigger::Nth(1), RESET));
    f.add(rule(
        Op::Write,
        Trigger::Nth(2),
        Fault::Fail(io::ErrorKind::TimedOut),
    ));
    let id = "ab".repeat(32);
    r.write(FileType::Pack, &id, b"data").unwrap();
    assert_eq!(f.fired(), 2);
    assert_eq!(r.stats().retries(), 2);
    assert_eq!(r.stats().failures(), 2);
    assert_eq!(r.stats().probes(), 0, "two failures are no burst");
    assert_eq!(r.read(FileType::Pack, &id).unwrap(), b"data");
    crate::conformance(&RetryBackend::new(MemoryBackend::new(), quick()));
}

#[test]
fn other_failures_return_at_once() {
    let (f, r) = faulty();
    f.add(rule(Op::Write, Trigger::Always, Fault::NoSpace));
    let e = r.write(FileType::Pack, &"ab".repeat(32), b"x").unwrap_err();
    assert_eq!(e.kind, ErrorKind::NoSpace);
    assert_eq!(f.fired(), 1);
    f.clear();
    f.add(rule(
        Op::Stat,
        Trigger::Always,
        Fault::Fail(io::ErrorKind::PermissionDenied),
    ));
    let e = r.stat(FileType::Pack, "x").unwrap_err();
    assert_eq!(e.kind, ErrorKind::PermissionDenied);
    assert_eq!(f.fired(), 2);
    f.clear();
    f.add(rule(
        Op::Read,
        Trigger::Always,
        Fault::Fail(io::ErrorKind::NotFound),
    ));
    assert!(r.read(FileType::Index, "x").unwrap_err().is_not_found());
    assert_eq!(f.fired(), 3);
    // Really missing: one request.
    f.clear();
    f.add(rule(Op::Read, Trigger::Nth(1000), RESET));
    assert!(r.read(FileType::Index, "y").unwrap_err().is_not_found());
    assert_eq!(r.stats().retries(), 0);
}

#[test]
fn attempts_and_time_are_bounded() {
    let (f, r) = faulty();
    f.add(rule(Op::Stat, Trigger::Always, RESET));
    let e = r.stat(FileType::Pack, "x").unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert_eq!(f.fired(), 6);
    assert_eq!(r.stats().retries(), 5);
    assert!(r.stats().probes() >= 1, "a burst of failures probes");
    // Bulk reads get one attempt: restore retries them itself.
    f.clear();
    f.add(rule(Op::Read, Trigger::Always, RESET));
    assert!(
        r.read_range_bulk(FileType::Pack, "x", 0, 1, &mut vec![])
            .is_err()
    );
    assert_eq!(f.fired(), 7);
    // A short window stops retries long before the attempts run out.
    let f = Arc::new(FaultBackend::new(MemoryBackend::new()));
    f.add(rule(Op::List, Trigger::Always, RESET));
    let r = RetryBackend::new(
        Arc::clone(&f),
        RetryPolicy {
            attempts: 1_000_000,
            window: Duration::from_millis(50),
            ..quick()
        },
    );
    let t0 = Instant::now();
    assert!(r.list(FileType::Pack).is_err());
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!((2..1000).contains(&f.fired()), "{}", f.fired());
}

#[test]
fn deleting_twice_after_a_lost_answer_succeeds() {
    let (f, r) = faulty();
    let id = "ab".repeat(32);
    r.write(FileType::Pack, &id, b"x").unwrap();
    // The first delete goes through, but its answer is lost.
    f.inner().delete(FileType::Pack, &id).unwrap();
    f.add(rule(Op::Delete, Trigger::Nth(1), RESET));
    r.delete(FileType::Pack, &id).unwrap();
    assert!(r.delete(FileType::Pack, &id).unwrap_err().is_not_found());
}

/// A create cut off halfway (a dropped SFTP session: "the next request starts a new one") is
/// tried again, and the retry finishes the folders the first attempt made.
#[test]
fn creating_after_a_lost_answer_is_retried_and_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    // What the first attempt made before its answer was lost.
    for d in ["keys", "data/00", "data/ab"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let f = Arc::new(FaultBackend::new(crate::LocalBackend::new(&root)));
    f.add(rule(Op::Create, Trigger::Nth(1), RESET));
    let r = RetryBackend::new(Arc::clone(&f), quick());
    r.create().expect("create retried");
    assert_eq!(f.fired(), 1);
    assert_eq!(r.stats().retries(), 1);
    for d in ["keys", "snapshots", "index", "locks", "data/00", "data/ff"] {
        assert!(root.join(d).is_dir(), "{d}");
    }
    // A repository already there is no transient failure: one attempt.
    r.write(FileType::Config, "", b"config").unwrap();
    let e = r.create().unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlreadyExists, "{e}");
    assert_eq!(r.stats().retries(), 1);
}

/// Counts the calls in flight. Writes that started before five failures were seen and succeed
/// are held until then (so the failures come as one burst) and a while longer (stragglers).
#[derive(Debug)]
struct Counting<B> {
    inner: B,
    now: AtomicU32,
    max: AtomicU32,
    max_probing: AtomicU32,
    stats: OnceLock<Arc<RetryStats>>,
}

impl<B: Backend> Counting<B> {
    fn enter(&self) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        self.seen();
    }
    fn seen(&self) {
        if self.stats.get().is_some_and(|s| s.probing()) {
            let n = self.now.load(Ordering::SeqCst);
            self.max_probing.fetch_max(n, Ordering::SeqCst);
        }
    }
    fn leave(&self) {
        self.seen();
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<B: Backend> Backend for Counting<B> {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> Result<()> {
        self.inner.create()
    }
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        self.inner.list(t)
    }
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        self.inner.read(t, name)
    }
    fn read_range(&self, t: FileType, n: &str, o: u64, l: u64) -> Result<Vec<u8>> {
        self.inner.read_range(t, n, o, l)
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        let stats = self.stats.get().expect("stats");
        let early = stats.failures() < 5;
        self.enter();
        std::thread::sleep(Duration::from_millis(2));
        let r = self.inner.write(t, name, data);
        if r.is_ok() && early {
            let t0 = Instant::now();
            while stats.failures() < 5 && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Still in flight well after the probe could go.
            std::thread::sleep(Duration::from_millis(20));
        }
        self.leave();
        r
    }
    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        self.inner.delete(t, name)
    }
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        self.inner.stat(t, name)
    }
}

#[test]
fn a_burst_of_failures_sends_one_probe_alone() {
    let f = Arc::new(FaultBackend::new(MemoryBackend::new()));
    for n in 1..=5 {
        f.add(rule(Op::Write, Trigger::Nth(n), RESET));
    }
    let c = Arc::new(Counting {
        inner: Arc::clone(&f),
        now: AtomicU32::new(0),
        max: AtomicU32::new(0),
        max_probing: AtomicU32::new(0),
        stats: OnceLock::new(),
    });
    let r = RetryBackend::new(Arc::clone(&c), quick());
    c.stats.set(r.stats()).expect("set once");
    let start = Barrier::new(8);
    std::thread::scope(|s| {
        for i in 0..8u8 {
            let (r, start) = (&r, &start);
            s.spawn(move || {
                start.wait();
                for j in 0..4u8 {
                    let name = format!("{i:02x}{j:02x}").repeat(16);
                    r.write(FileType::Pack, &name, &[i, j]).expect("write");
                }
            });
        }
    });
    for i in 0..8u8 {
        for j in 0..4u8 {
            let name = format!("{i:02x}{j:02x}").repeat(16);
            assert_eq!(f.inner().read(FileType::Pack, &name).unwrap(), [i, j]);
        }
    }
    let st = r.stats();
    assert_eq!(f.fired(), 5);
    assert_eq!(st.failures(), 5);
    assert!(st.retries() >= 5, "{}", st.retries());
    assert!(st.probes() >= 1, "no probe");
    assert!(
        c.max.load(Ordering::SeqCst) > 1,
        "no concurrency to speak of"
    );
    assert!(
        c.max_probing.load(Ordering::SeqCst) <= 1,
        "requests went beside the probe"
    );
    assert!(!st.probing());
}

/// Once an operation has been retried to the end and still failed, the backend is down: the
/// next operations get one attempt each (a command that lost its server ends in one retry
/// window, not one per operation, lock removal included), until one is answered.
#[test]
fn after_giving_up_the_next_operations_try_once_until_the_backend_answers() {
    let (f, r) = faulty();
    f.add(rule(Op::List, Trigger::Always, RESET));
    f.add(rule(Op::Stat, Trigger::Always, RESET));
    assert!(r.list(FileType::Pack).is_err());
    assert_eq!(f.fired(), 6, "retried to the end");
    assert!(r.stat(FileType::Pack, "x").is_err());
    assert_eq!(f.fired(), 7, "one attempt once given up");
    assert!(r.list(FileType::Index).is_err());
    assert_eq!(f.fired(), 8);
    // The server is back: the first answer ends the outage, and a later failure is retried
    // in full again.
    f.clear();
    assert!(r.list(FileType::Pack).unwrap().is_empty());
    f.add(rule(Op::List, Trigger::Always, RESET));
    assert!(r.list(FileType::Pack).is_err());
    assert_eq!(f.fired(), 8 + 6);
}

/// Reads their caller retries (restore's bulk reads) get one attempt here; once every
/// request has failed for half a window the backend counts as given up on, so what follows
/// (the lock's release) tries once instead of retrying for another window.
#[test]
fn failing_for_a_window_of_single_attempts_gives_up_too() {
    let f = Arc::new(FaultBackend::new(MemoryBackend::new()));
    let policy = RetryPolicy {
        window: Duration::from_millis(200),
        ..quick()
    };
    let r = RetryBackend::new(Arc::clone(&f), policy);
    let id = "cd".repeat(32);
    r.write(FileType::Pack, &id, b"data").unwrap();
    r.write(FileType::Lock, &id, b"lock").unwrap();
    f.add(rule(Op::Read, Trigger::Always, RESET));
    f.add(rule(Op::Delete, Trigger::Always, RESET));
    let started = Instant::now();
    let mut buf = vec![];
    while started.elapsed() < Duration::from_millis(300) {
        let before = f.fired();
        assert!(
            r.read_range_bulk(FileType::Pack, &id, 0, 2, &mut buf)
                .is_err()
        );
        assert_eq!(f.fired(), before + 1, "one attempt per bulk read");
    }
    let before = f.fired();
    assert!(r.delete(FileType::Lock, &id).is_err());
    assert_eq!(f.fired(), before + 1, "given up on: one attempt");
}

/// An operation that never gets its turn (a probe is out for longer than it may wait) reports
/// the cause the other requests met, and how long they have been failing, not a cause of its
/// own making.
#[test]
fn an_operation_never_admitted_reports_the_outages_cause() {
    let (f, r) = faulty();
    let id = "ef".repeat(32);
    f.add(rule(Op::List, Trigger::Always, RESET));
    f.add(rule(
        Op::Read,
        Trigger::Always,
        Fault::Delay(Duration::from_millis(400)),
    ));
    assert!(r.list(FileType::Pack).is_err(), "given up on");
    std::thread::scope(|s| {
        // The probe: one read, held for 400 ms.
        let probe = s.spawn(|| r.read(FileType::Pack, &id));
        std::thread::sleep(Duration::from_millis(100));
        assert!(r.stats().probing(), "the read went as the probe");
        let e = r.stat(FileType::Pack, &id).expect_err("never admitted");
        let msg = e.to_string();
        assert_eq!(e.kind, ErrorKind::Transient);
        assert!(msg.contains(": injected fault ("), "{msg}");
        assert!(msg.contains("every request failing for"), "{msg}");
        assert!(!msg.contains("unavailable"), "{msg}");
        let _ = probe.join();
    });
}
