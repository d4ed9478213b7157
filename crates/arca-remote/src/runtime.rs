//! The async runtime the remote backends run their requests on, behind the synchronous
//! `Backend` trait, and the gate that bounds how many requests are in flight.

use std::future::Future;
use std::sync::{Condvar, Mutex, OnceLock};

use arca_backend::{BackendError, ErrorKind};

static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();

/// The process's one runtime for network I/O (two worker threads: the work is waiting).
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("arca-net")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Runs `f` to completion on the network runtime, from a thread that is not one of its
/// workers (every caller of the `Backend` trait).
pub(crate) fn block_on<F: Future>(location: &str, f: F) -> Result<F::Output, BackendError> {
    let rt = runtime().map_err(|e| {
        BackendError::new(
            "start network runtime",
            location,
            ErrorKind::Other,
            e.clone(),
        )
    })?;
    Ok(rt.block_on(f))
}

/// Enters the runtime's context (building clients that spawn tasks needs it).
pub(crate) fn enter(location: &str) -> Result<tokio::runtime::EnterGuard<'static>, BackendError> {
    let rt = runtime()
        .map_err(|e| BackendError::new("start network runtime", location, ErrorKind::Other, e))?;
    Ok(rt.enter())
}

/// At most `limit` holders at once (`--connections`); callers block on a condition variable,
/// outside the runtime.
#[derive(Debug)]
pub(crate) struct Gate {
    limit: usize,
    held: Mutex<usize>,
    freed: Condvar,
}

/// One admitted request; dropping it lets the next one in.
pub(crate) struct Pass<'a>(&'a Gate);

impl Gate {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            held: Mutex::new(0),
            freed: Condvar::new(),
        }
    }
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }
    pub(crate) fn enter(&self) -> Pass<'_> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while *held >= self.limit {
            held = self.freed.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        *held += 1;
        Pass(self)
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let mut held = self.0.held.lock().unwrap_or_else(|p| p.into_inner());
        *held -= 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn gate_bounds_concurrency() {
        let gate = Arc::new(Gate::new(3));
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..12)
            .map(|_| {
                let (gate, now, peak) = (gate.clone(), now.clone(), peak.clone());
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        let _p = gate.enter();
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        now.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn block_on_from_many_threads() {
        let threads: Vec<_> = (0..4u64)
            .map(|i| std::thread::spawn(move || block_on("test", async move { i * 2 }).unwrap()))
            .collect();
        let sum: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(sum, 12);
    }
}
