//! One function over a list on a few scoped threads that take the next item as they free up;
//! results come back in list order.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `f` on every item with up to `threads` threads, each with its own `state()` (buffers
/// to reuse). Returns one result per item in order; `None` for the items of a thread that
/// panicked.
pub(crate) fn map_ordered<T, S, R>(
    items: &[T],
    threads: usize,
    state: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<Option<R>>
where
    T: Sync,
    R: Send,
{
    let next = AtomicUsize::new(0);
    let threads = threads.clamp(1, items.len().max(1));
    let done: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut st = state();
                    let mut out = vec![];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        out.push((i, f(&mut st, item)));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut results: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for (i, r) in done {
        results[i] = Some(r);
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_list_order() {
        let items: Vec<u64> = (0..1000).collect();
        let got = map_ordered(
            &items,
            4,
            || 0u64,
            |calls, x| {
                *calls += 1;
                x * 2
            },
        );
        assert_eq!(got.len(), 1000);
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, r)| *r == Some(i as u64 * 2))
        );
        assert!(map_ordered(&[] as &[u8], 4, || (), |_, x| *x).is_empty());
    }
}
