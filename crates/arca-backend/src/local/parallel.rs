//! Listing several folders at once: a small scoped thread pool that maps a function over
//! items and gives the results in order, the first error winning.

use crate::{BackendError, ErrorKind, Result};

/// Folders listed at once by [`LocalBackend::list`](crate::Backend::list).
pub(super) const LIST_THREADS: usize = 16;

/// `f` over `items` on up to `threads` threads, results in the order of `items`; the first
/// error (in that order) is returned.
pub(super) fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    if items.len() <= 1 {
        return items.iter().map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<R>>> =
        std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.min(items.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut done = vec![];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        for w in workers {
            // A worker only panics if `f` does; its slots stay empty and are reported below.
            for (i, r) in w.join().unwrap_or_default() {
                slots[i] = Some(r);
            }
        }
    });
    slots
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(BackendError::new(
                    "list",
                    String::new(),
                    ErrorKind::Other,
                    "a listing thread failed".into(),
                ))
            })
        })
        .collect()
}
