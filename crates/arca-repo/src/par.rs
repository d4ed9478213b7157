//! One function over a list on a few scoped threads that take the next item as they free up;
//! results come back in list order.

use std::sync::atomic::{AtomicUsize, Ordering};

use arca_format::Id;

use crate::{RepoError, Result};

/// Loads `what` for every listed id (id, size) with up to `threads` threads; one result per
/// id, in order, an id whose thread panicked being an error that names it.
pub(crate) fn load_ordered<T: Send>(
    ids: &[(Id, u64)],
    threads: usize,
    what: &'static str,
    load: impl Fn(&Id) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    map_ordered(ids, threads, || (), |_, (id, _)| load(id))
        .into_iter()
        .zip(ids)
        .map(|(r, (id, _))| {
            r.unwrap_or_else(|| {
                Err(RepoError::Invalid {
                    what,
                    detail: format!("{id}: the reader thread failed"),
                })
            })
        })
        .collect()
}

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

/// Runs `f` on every item with up to `threads` threads and hands each result to `consume`
/// on the calling thread, in list order, as soon as it and those before it are done: the
/// results are consumed (and can be dropped) while later items are still being computed, so
/// at most a few of them are alive at once when they come back in order. `consume` gets
/// `None` for an item whose thread panicked.
pub(crate) fn for_each_ordered<T, R>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
    mut consume: impl FnMut(usize, Option<R>),
) where
    T: Sync,
    R: Send,
{
    let next = AtomicUsize::new(0);
    let threads = threads.clamp(1, items.len().max(1));
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, R)>(threads * 2);
    std::thread::scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, f) = (&next, &f);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    if tx.send((i, f(item))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut early = std::collections::BTreeMap::new();
        let mut want = 0usize;
        for (i, r) in rx {
            early.insert(i, r);
            while let Some(r) = early.remove(&want) {
                consume(want, Some(r));
                want += 1;
            }
        }
        // What never came back belongs to a thread that panicked.
        for i in want..items.len() {
            consume(i, early.remove(&i));
        }
    });
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

    #[test]
    fn streamed_results_come_in_list_order() {
        let items: Vec<u64> = (0..500).collect();
        let mut got = vec![];
        for_each_ordered(
            &items,
            4,
            |x| {
                // Uneven work, so that threads finish out of order.
                std::thread::sleep(std::time::Duration::from_micros(x % 7 * 50));
                x * 3
            },
            |i, r| got.push((i, r)),
        );
        assert_eq!(got.len(), 500);
        assert!(
            got.iter()
                .enumerate()
                .all(|(k, (i, r))| *i == k && *r == Some(k as u64 * 3))
        );
        let mut none = 0;
        for_each_ordered(&[] as &[u8], 4, |x| *x, |_, _| none += 1);
        assert_eq!(none, 0);
    }
}
