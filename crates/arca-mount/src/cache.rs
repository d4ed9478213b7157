//! Bounded caches for the mount: decrypted data blobs (the block cache) and decoded trees,
//! each a least-recently-used map weighed in bytes so memory stays under its limit.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Mutex;

/// A least-recently-used map whose entries have weights; the sum of the weights stays at or
/// below the capacity, except that an entry heavier than the capacity is kept alone (so a
/// file read sequentially in small pieces does not fetch its largest blobs again and again).
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    map: HashMap<K, Slot<V>>,
    /// Use tick → key, oldest first.
    order: BTreeMap<u64, K>,
    tick: u64,
    used: u64,
    capacity: u64,
}

#[derive(Debug)]
struct Slot<V> {
    value: V,
    tick: u64,
    weight: u64,
}

impl<K: Hash + Eq + Clone, V: Clone> Lru<K, V> {
    /// An empty map holding at most `capacity` weight.
    pub(crate) fn new(capacity: u64) -> Self {
        Self {
            map: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
            used: 0,
            capacity,
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The value of `k`, marked as the most recently used.
    pub(crate) fn get(&mut self, k: &K) -> Option<V> {
        let tick = self.next_tick();
        let slot = self.map.get_mut(k)?;
        self.order.remove(&slot.tick);
        slot.tick = tick;
        self.order.insert(tick, k.clone());
        Some(slot.value.clone())
    }

    /// Stores `v` under `k`, evicting the least recently used entries to make room.
    pub(crate) fn insert(&mut self, k: K, v: V, weight: u64) {
        self.remove(&k);
        while self.used > 0 && self.used + weight > self.capacity {
            let Some((_, old)) = self.order.pop_first() else {
                break;
            };
            if let Some(s) = self.map.remove(&old) {
                self.used -= s.weight;
            }
        }
        let tick = self.next_tick();
        self.order.insert(tick, k.clone());
        self.map.insert(
            k,
            Slot {
                value: v,
                tick,
                weight,
            },
        );
        self.used += weight;
    }

    fn remove(&mut self, k: &K) {
        if let Some(s) = self.map.remove(k) {
            self.order.remove(&s.tick);
            self.used -= s.weight;
        }
    }

    /// The summed weight of the entries kept.
    #[cfg(test)]
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// How many entries are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// An [`Lru`] shared between the file system's threads. Loads happen outside the lock, so
/// one slow read does not hold up hits on other entries.
#[derive(Debug)]
pub(crate) struct Cache<K, V> {
    inner: Mutex<Lru<K, V>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Cache<K, V> {
    /// An empty cache of `capacity` weight.
    pub(crate) fn new(capacity: u64) -> Self {
        Self {
            inner: Mutex::new(Lru::new(capacity)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru<K, V>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached value of `k`, or the one `load` returns (with its weight), then kept.
    pub(crate) fn get_or_load<E>(
        &self,
        k: &K,
        load: impl FnOnce() -> Result<(V, u64), E>,
    ) -> Result<V, E> {
        if let Some(v) = self.lock().get(k) {
            return Ok(v);
        }
        let (v, weight) = load()?;
        self.lock().insert(k.clone(), v.clone(), weight);
        Ok(v)
    }

    /// The summed weight of the entries kept.
    #[cfg(test)]
    pub(crate) fn used(&self) -> u64 {
        self.lock().used()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn evicts_least_recently_used_by_weight() {
        let mut l = Lru::new(10);
        l.insert("a", 1, 4);
        l.insert("b", 2, 4);
        assert_eq!(l.get(&"a"), Some(1)); // a is now newer than b
        l.insert("c", 3, 4); // 12 > 10: b goes
        assert_eq!(l.get(&"b"), None);
        assert_eq!(l.get(&"a"), Some(1));
        assert_eq!(l.get(&"c"), Some(3));
        assert_eq!(l.used(), 8);
        l.insert("a", 5, 2); // replacing frees the old weight
        assert_eq!(l.used(), 6);
        assert_eq!(l.get(&"a"), Some(5));
        l.insert("d", 4, 10); // takes everything
        assert_eq!((l.len(), l.used()), (1, 10));
        l.insert("big", 9, 11); // heavier than the whole cache: kept alone
        assert_eq!((l.len(), l.used()), (1, 11));
        assert_eq!(l.get(&"big"), Some(9));
        l.insert("e", 1, 1); // and the first to go
        assert_eq!((l.len(), l.used()), (1, 1));
    }

    #[test]
    fn loads_once_then_hits() {
        let c: Cache<u32, u32> = Cache::new(100);
        let mut loads = 0;
        for _ in 0..3 {
            let v = c
                .get_or_load(&7, || {
                    loads += 1;
                    Ok::<_, ()>((49, 10))
                })
                .unwrap();
            assert_eq!(v, 49);
        }
        assert_eq!(loads, 1);
        assert_eq!(c.used(), 10);
        assert_eq!(
            c.get_or_load(&8, || Err::<(u32, u64), _>("boom")),
            Err("boom")
        );
    }
}
