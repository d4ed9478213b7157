//! The prefetcher: tells a local repository which pack ranges the fetchers will read next, a
//! bounded distance ahead of them, so the disk keeps many requests queued however busy the
//! cores are (the kernel's own read-ahead moves only when a fetcher thread gets to run).
//!
//! Hints change nothing but timing: a wrong or late hint costs a read of the disk, never a
//! wrong byte, and a backend that cannot use them ignores them.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use arca_backend::{Backend, FileType};
use arca_repo::PackRef;
use arca_repo::trees::ranges::{Span, coalesce};
use crossbeam_channel::{Receiver, TryRecvError};

use crate::ctx::Shared;

/// One range of a pack expected to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint {
    pub pack: u32,
    pub offset: u64,
    pub len: u64,
}

/// How often the prefetcher looks whether the fetchers have caught up with its hints.
const POLL: Duration = Duration::from_millis(1);

/// The pack ranges the scheduler will read, in the order it reads them when every file is
/// admitted at once: the blobs fetched for the files to write, packs in order of first need
/// (as the scheduler's pack queue), each pack's blobs by offset, merged across gaps up to
/// `gap` and cut at `max` bytes (as the scheduler's reads).
pub(crate) fn hints(sh: &Shared, reuse: &crate::reuse::Reusable, gap: u64, max: u64) -> Vec<Hint> {
    let plan = sh.plan;
    let scan = sh.scan;
    let mut seen = vec![false; plan.blobs.len()];
    let needs = plan
        .files
        .iter()
        .filter(|fp| scan.entries[fp.entry as usize].writes() && !scan.is_deferred(fp.entry))
        .flat_map(|fp| fp.first..fp.end)
        .filter(|&u| !scan.in_place[u as usize])
        .map(|u| plan.uses[u as usize].blob)
        .filter(|&b| {
            let bp = &plan.blobs[b as usize];
            !std::mem::replace(&mut seen[b as usize], true)
                && bp.in_pack()
                && !reuse.contains_key(&b)
        })
        .map(|b| {
            let bp = &plan.blobs[b as usize];
            (bp.pack, u64::from(bp.offset), u64::from(bp.length))
        });
    ranges(needs, gap, max)
}

/// Groups blob ranges `(pack, offset, len)`, given in order of need, into reads: packs in
/// order of their first blob, each pack's ranges merged into reads as the scheduler merges
/// them ([`coalesce`]: by offset, across gaps up to `gap`, within `max` bytes).
fn ranges(needs: impl Iterator<Item = (u32, u64, u64)>, gap: u64, max: u64) -> Vec<Hint> {
    let mut order: Vec<u32> = vec![];
    let mut per_pack: HashMap<u32, Vec<Span<()>>> = HashMap::new();
    for (pack, offset, len) in needs {
        let list = per_pack.entry(pack).or_default();
        if list.is_empty() {
            order.push(pack);
        }
        list.push(Span {
            pack,
            offset,
            len,
            item: (),
        });
    }
    order
        .into_iter()
        .flat_map(|pack| coalesce(per_pack.remove(&pack).unwrap_or_default(), gap, max))
        .map(|r| Hint {
            pack: r.pack,
            offset: r.offset,
            len: r.len,
        })
        .collect()
}

/// Hints `hints` to the backend in order, keeping at most `ahead` bytes hinted beyond what
/// the fetchers have read; returns when every range is hinted, the restore stops, or
/// `finished` is closed (the network is done).
pub(crate) fn run(
    sh: &Shared,
    backend: &dyn Backend,
    packs: &[PackRef],
    hints: Vec<Hint>,
    ahead: u64,
    finished: &Receiver<()>,
) {
    let mut hinted = 0u64;
    for h in hints {
        loop {
            if sh.stopped() || finished.try_recv() == Err(TryRecvError::Disconnected) {
                return;
            }
            if hinted < sh.counters.fetched.load(Ordering::Relaxed) + ahead {
                break;
            }
            // Nothing is ever sent: this waits out the poll, or ends at once when closed.
            let _ = finished.recv_timeout(POLL);
        }
        let Some(p) = packs.get(h.pack as usize) else {
            continue;
        };
        backend.prefetch(FileType::Pack, &p.id.to_hex(), h.offset, h.len);
        hinted += h.len;
        sh.counters.hinted.fetch_add(h.len, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pack: u32, offset: u64, len: u64) -> Hint {
        Hint { pack, offset, len }
    }

    #[test]
    fn packs_come_in_order_of_first_need_and_their_ranges_by_offset() {
        // Pack 7 is needed first, then 3, then 7 again (earlier in the pack).
        let needs = [(7, 5000, 100), (3, 0, 10), (7, 1000, 100), (3, 20, 10)];
        assert_eq!(
            ranges(needs.into_iter(), 0, 1 << 20),
            vec![h(7, 1000, 100), h(7, 5000, 100), h(3, 0, 10), h(3, 20, 10)]
        );
    }

    #[test]
    fn ranges_merge_across_small_gaps_up_to_the_largest_read() {
        let needs = [(1, 0, 100), (1, 150, 100), (1, 1000, 100), (1, 1100, 50)];
        // Gap 50 merges the first two (a gap of 50) and the last two (adjacent).
        assert_eq!(
            ranges(needs.into_iter(), 50, 1 << 20),
            vec![h(1, 0, 250), h(1, 1000, 150)]
        );
        // A large gap merges all, unless the read would exceed the largest read.
        assert_eq!(
            ranges(needs.into_iter(), 1000, 1 << 20),
            vec![h(1, 0, 1150)]
        );
        assert_eq!(
            ranges(needs.into_iter(), 1000, 1000),
            vec![h(1, 0, 250), h(1, 1000, 150)]
        );
        // A blob never split: one larger than the largest read is a hint of its own.
        assert_eq!(
            ranges([(1, 0, 5000)].into_iter(), 0, 10),
            vec![h(1, 0, 5000)]
        );
    }
}
