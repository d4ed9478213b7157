//! The scheduler's repository reads: which pack is read next, which blobs ride along as
//! read-ahead under the memory budget (evicting farther-needed ones), and how a read is sent.

use arca_repo::trees::ranges::{Read, Span, coalesce};

use super::{Links, NEVER, Scheduler, State};
use crate::jobs::{FetchJob, JobBlob};
use crate::profile::Clock;

impl Scheduler<'_, '_> {
    /// Issues reads, pack by pack in order of first need, while the budget allows.
    pub(super) fn issue_fetches(&mut self, links: &Links, clock: &mut Clock) {
        let plan = self.sh.plan;
        while self.fetch_inflight < self.max_fetch() {
            let Some(&pack) = self.pack_queue.front() else {
                break;
            };
            if self.unsettled.get(pack as usize).is_some_and(|&n| n > 0) {
                self.pack_queue.pop_front();
                self.is_held_back[pack as usize] = true;
                self.held_back.push(pack);
                continue;
            }
            let need = self.pending.remove(&pack).unwrap_or_default();
            if need.is_empty() {
                self.pack_queue.pop_front();
                continue;
            }
            let need_cost: u64 = need
                .iter()
                .map(|&b| u64::from(plan.blobs[b as usize].length) + self.raw(b))
                .sum();
            let room = self.t.memory.saturating_sub(self.memory() + need_cost);
            let ahead = self.read_ahead(pack, room);
            let spans: Vec<Span<(u32, bool)>> = need
                .iter()
                .map(|&b| (b, false))
                .chain(ahead.iter().map(|&b| (b, true)))
                .map(|(b, keep)| {
                    let bp = &plan.blobs[b as usize];
                    Span {
                        pack,
                        offset: u64::from(bp.offset),
                        len: u64::from(bp.length),
                        item: (b, keep),
                    }
                })
                .collect();
            let mut left: Vec<u32> = vec![];
            let mut stopped = false;
            for read in coalesce(spans, self.t.read_gap, self.t.max_read) {
                if stopped || self.fetch_inflight >= self.max_fetch() {
                    stopped = true;
                    for s in read.items {
                        let (b, keep) = s.item;
                        if keep {
                            self.unreserve(b);
                        } else {
                            left.push(b);
                        }
                    }
                    continue;
                }
                if let Some(rest) = self.issue_read(read, links, clock) {
                    left.extend(rest);
                    stopped = true;
                }
            }
            if left.is_empty() {
                self.pack_queue.pop_front();
            } else {
                self.pending.insert(pack, left);
                break;
            }
        }
    }

    /// Picks blobs of `pack` needed later (not yet admitted) to read along, nearest next
    /// use first, within `room` bytes; evicts cached blocks needed later than a candidate.
    fn read_ahead(&mut self, pack: u32, mut room: u64) -> Vec<u32> {
        let Some(list) = self.pack_blobs.get(&pack) else {
            return vec![];
        };
        let mut cands: Vec<u32> = list
            .iter()
            .copied()
            .filter(|&b| {
                matches!(self.state[b as usize], State::Idle)
                    && self.first_need[b as usize] != NEVER
                    && !self.reuse.contains_key(&b)
            })
            .collect();
        cands.sort_by_key(|&b| self.first_need[b as usize]);
        let mut chosen = vec![];
        for c in cands {
            let size = self.raw(c) + u64::from(self.sh.plan.blobs[c as usize].length);
            while size > room {
                match self.cache.farthest() {
                    Some((next, victim)) if next > self.first_need[c as usize] => {
                        let freed = self.raw(victim);
                        self.cache.evict(victim);
                        self.state[victim as usize] = State::Idle;
                        room += freed;
                    }
                    _ => break,
                }
            }
            if size > room {
                break;
            }
            room -= size;
            self.state[c as usize] = State::InFlight;
            self.cache.reserved += self.raw(c);
            chosen.push(c);
        }
        chosen
    }

    fn unreserve(&mut self, b: u32) {
        self.cache.reserved -= self.raw(b);
        self.state[b as usize] = State::Idle;
    }

    /// Issues one read if the budget allows; otherwise returns the needed blobs it carried.
    /// With nothing in flight a read always goes out (shrunk to one blob if need be), so the
    /// restore progresses under any budget.
    fn issue_read(
        &mut self,
        mut read: Read<(u32, bool)>,
        links: &Links,
        clock: &mut Clock,
    ) -> Option<Vec<u32>> {
        let plan = self.sh.plan;
        let cost = |r: &Read<(u32, bool)>| {
            r.len
                + r.items
                    .iter()
                    .map(|s| u64::from(plan.blobs[s.item.0 as usize].raw_len))
                    .max()
                    .unwrap_or(0)
        };
        if self.memory() + cost(&read) > self.t.memory {
            if self.fetch_inflight + self.place_inflight > 0 {
                return Some(self.give_back(read));
            }
            // Nothing in flight: make room from the cache, farthest first...
            while self.memory() + cost(&read) > self.t.memory {
                let Some((_, victim)) = self.cache.farthest() else {
                    break;
                };
                self.cache.evict(victim);
                self.state[victim as usize] = State::Idle;
            }
            // ...then, if it still does not fit, read the first needed blob alone.
            if self.memory() + cost(&read) > self.t.memory && read.items.len() > 1 {
                let Some(first) = read.items.iter().position(|s| !s.item.1) else {
                    // Only read-ahead in it: not worth the memory now.
                    return Some(self.give_back(read));
                };
                let one = read.items.swap_remove(first);
                let rest = self.give_back(read);
                read = Read {
                    pack: one.pack,
                    offset: one.offset,
                    len: one.len,
                    items: vec![one],
                };
                if !rest.is_empty() {
                    let c = cost(&read);
                    self.send_read(read, c, links, clock);
                    return Some(rest);
                }
            }
        }
        let c = cost(&read);
        self.send_read(read, c, links, clock);
        None
    }

    /// Returns a read's blobs to waiting: needed ones come back to the caller, read-ahead
    /// ones are dropped.
    fn give_back(&mut self, read: Read<(u32, bool)>) -> Vec<u32> {
        let mut need = vec![];
        for s in read.items {
            let (b, keep) = s.item;
            if keep {
                self.unreserve(b);
            } else {
                need.push(b);
            }
        }
        need
    }

    fn send_read(&mut self, read: Read<(u32, bool)>, cost: u64, links: &Links, clock: &mut Clock) {
        let mut blobs = Vec::with_capacity(read.items.len());
        let mut kept = 0;
        for s in read.items {
            let (b, keep) = s.item;
            if std::mem::replace(&mut self.fetched_once[b as usize], true) {
                self.stats.rereads += 1;
            }
            self.state[b as usize] = State::InFlight;
            let targets = if keep {
                kept += self.raw(b);
                vec![]
            } else {
                self.waiting.remove(&b).unwrap_or_default()
            };
            blobs.push(JobBlob {
                blob: b,
                rel: s.offset - read.offset,
                targets,
                keep,
            });
        }
        self.stats.blocks_fetched += blobs.len() as u64;
        // A pack first needed by a file found damaged while content moved was not known
        // when the list was sized.
        let p = read.pack as usize;
        if p >= self.packs_seen.len() {
            self.packs_seen.resize(p + 1, false);
        }
        if !std::mem::replace(&mut self.packs_seen[p], true) {
            self.stats.packs_read += 1;
        }
        let id = self.job_id(cost, kept);
        self.fetch_inflight += 1;
        self.stats.fetch_jobs += 1;
        let buf = self.pool.pop().unwrap_or_default();
        let job = FetchJob {
            id,
            pack: read.pack,
            offset: read.offset,
            len: read.len,
            blobs,
            buf,
            at: 0,
            failed: None,
            short: false,
        };
        clock.busy();
        if links.fetch.send(job).is_err() {
            self.sh
                .fail(crate::RestoreError::Internal("fetchers stopped".into()));
        }
        clock.waited_out();
    }
}
