//! Stage 2: a bounded map from keys to dense ids, for the arbiter's dynamic scheduler
//! instances and queues.
//!
//! A `KeyMap` with a limit of `L` keys hands out ids in `0..L`. [`KeyMap::new`] allocates
//! all of it at once; [`KeyMap::growable`] starts small and doubles when a new key finds
//! every id live, up to `L` (an allocation per doubling, on the first packet of a new flow
//! or customer, never per packet: dummynet itself allocates each new queue). When all `L`
//! ids are live, inserting a new key is [`Full`]: the caller counts a drop with a reason
//! (queue or instance limit). Removed ids are reused, most recently freed first; ids never
//! move, so callers index their own per-id arrays with them (and extend those when
//! [`KeyMap::capacity`] grows).
//!
//! **Layout.** Open addressing with linear probing over a power-of-two array of `u32` slots
//! (at least `2C` of them, so the load factor stays <= 1/2) that hold ids; per id, the key,
//! its hash (callers hash once, e.g. with [`FlowKey::hash64`](super::FlowKey::hash64), and
//! probing compares hashes before keys), the last-used time and the slot back-pointer.
//! Deletion shifts the following entries of the probe run back instead of leaving
//! tombstones, so probe lengths depend only on the live keys.
//!
//! **Invariant.** Every live id `i` sits at `slot_of[i]`, and every slot between its home
//! (`hash & mask`) and `slot_of[i]` is occupied (the linear-probing invariant that makes an
//! empty slot end a search; backward-shift deletion preserves it).
//!
//! **Cost.** Lookup/insert/remove: expected O(1) at load <= 1/2 with a good hash, worst
//! case O(C). [`KeyMap::expire`] looks at `budget` ids per call, round-robin over `0..C`,
//! so it is O(budget) whatever the size, and an idle entry is found within `ceil(C /
//! budget)` calls after it has been idle `idle_ns`.

/// Returned when the map already holds its capacity of keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("key map full")]
pub struct Full;

const EMPTY: u32 = u32::MAX;

/// A bounded map key -> dense id in `0..capacity`.
#[derive(Clone, Debug)]
pub struct KeyMap<K> {
    slots: Box<[u32]>,
    mask: usize,
    keys: Box<[K]>,
    hashes: Box<[u64]>,
    last_ns: Box<[u64]>,
    /// The slot of a live id, `EMPTY` for a free one.
    slot_of: Box<[u32]>,
    /// Free ids; the next one handed out is the last.
    free: Vec<u32>,
    cursor: usize,
    /// Most ids it may grow to.
    limit: u32,
}

impl<K: Copy + Eq + Default> KeyMap<K> {
    /// A map for at most `capacity` keys (`capacity < 2^31`).
    pub fn new(capacity: u32) -> Self {
        assert!(capacity < 1 << 31, "KeyMap capacity {capacity} too large");
        let cap = capacity as usize;
        let nslots = (2 * cap).next_power_of_two().max(2);
        KeyMap {
            slots: vec![EMPTY; nslots].into(),
            mask: nslots - 1,
            keys: vec![K::default(); cap].into(),
            hashes: vec![0; cap].into(),
            last_ns: vec![0; cap].into(),
            slot_of: vec![EMPTY; cap].into(),
            free: (0..capacity).rev().collect(),
            cursor: 0,
            limit: capacity,
        }
    }

    /// A map for `initial` keys (at most `limit`) that grows by doubling up to `limit` keys
    /// (`limit < 2^31`).
    pub fn growable(initial: u32, limit: u32) -> Self {
        assert!(limit < 1 << 31, "KeyMap limit {limit} too large");
        let mut m = Self::new(initial.min(limit));
        m.limit = limit;
        m
    }

    /// Keys it holds room for now (ids are below this).
    pub fn capacity(&self) -> u32 {
        self.keys.len() as u32
    }

    /// Most keys it may hold.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Doubles its room (at least 16, at most `limit`); false when at `limit` already.
    /// Live ids keep their number; the slot array is rebuilt for the new size.
    #[cold]
    fn grow(&mut self) -> bool {
        let cap = self.keys.len();
        let new_cap = (2 * cap).max(16).min(self.limit as usize);
        if new_cap <= cap {
            return false;
        }
        let extend = |b: &mut Box<[u64]>, v: u64| {
            let mut x = std::mem::take(b).into_vec();
            x.resize(new_cap, v);
            *b = x.into();
        };
        extend(&mut self.hashes, 0);
        extend(&mut self.last_ns, 0);
        let mut keys = std::mem::take(&mut self.keys).into_vec();
        keys.resize(new_cap, K::default());
        self.keys = keys.into();
        let mut slot_of = std::mem::take(&mut self.slot_of).into_vec();
        slot_of.resize(new_cap, EMPTY);
        let nslots = (2 * new_cap).next_power_of_two();
        self.slots = vec![EMPTY; nslots].into();
        self.mask = nslots - 1;
        for (id, s) in slot_of.iter_mut().enumerate() {
            if *s == EMPTY {
                continue;
            }
            let mut at = self.hashes[id] as usize & self.mask;
            while self.slots[at] != EMPTY {
                at = (at + 1) & self.mask;
            }
            self.slots[at] = id as u32;
            *s = at as u32;
        }
        self.slot_of = slot_of.into();
        self.free.extend((cap as u32..new_cap as u32).rev());
        true
    }

    /// Keys it holds.
    pub fn len(&self) -> usize {
        self.keys.len() - self.free.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `id` is live.
    pub fn contains_id(&self, id: u32) -> bool {
        self.slot_of.get(id as usize).is_some_and(|&s| s != EMPTY)
    }

    /// The key of a live id.
    pub fn key(&self, id: u32) -> Option<K> {
        self.contains_id(id).then(|| self.keys[id as usize])
    }

    /// When a live id was last inserted or touched.
    pub fn last_used(&self, id: u32) -> Option<u64> {
        self.contains_id(id).then(|| self.last_ns[id as usize])
    }

    /// The slot holding `key`, or the empty slot ending its probe run.
    #[inline]
    fn probe(&self, key: &K, hash: u64) -> (usize, Option<u32>) {
        let mut s = hash as usize & self.mask;
        loop {
            let id = self.slots[s];
            if id == EMPTY {
                return (s, None);
            }
            let i = id as usize;
            if self.hashes[i] == hash && self.keys[i] == *key {
                return (s, Some(id));
            }
            s = (s + 1) & self.mask;
        }
    }

    /// The id of `key` (`hash` must be the hash it was inserted with).
    #[inline]
    pub fn get(&self, key: &K, hash: u64) -> Option<u32> {
        self.probe(key, hash).1
    }

    /// The id of `key`, inserting it if absent: `(id, true)` if it was new. Either way the
    /// id's last-used time becomes `now_ns`. `Err(Full)` if absent and the map is full.
    #[inline]
    pub fn get_or_insert(&mut self, key: K, hash: u64, now_ns: u64) -> Result<(u32, bool), Full> {
        let (mut s, found) = self.probe(&key, hash);
        if let Some(id) = found {
            self.last_ns[id as usize] = now_ns;
            return Ok((id, false));
        }
        if self.free.is_empty() {
            if !self.grow() {
                return Err(Full);
            }
            s = self.probe(&key, hash).0;
        }
        let id = self.free.pop().ok_or(Full)?;
        let i = id as usize;
        self.slots[s] = id;
        self.slot_of[i] = s as u32;
        self.keys[i] = key;
        self.hashes[i] = hash;
        self.last_ns[i] = now_ns;
        Ok((id, true))
    }

    /// Mark a live id used at `now_ns` (no-op for a free id).
    #[inline]
    pub fn touch(&mut self, id: u32, now_ns: u64) {
        if self.contains_id(id) {
            self.last_ns[id as usize] = now_ns;
        }
    }

    /// Remove a live id; returns whether it was live.
    pub fn remove(&mut self, id: u32) -> bool {
        if !self.contains_id(id) {
            return false;
        }
        let mut hole = self.slot_of[id as usize] as usize;
        self.slots[hole] = EMPTY;
        self.slot_of[id as usize] = EMPTY;
        self.free.push(id);
        // Backward shift: move each later entry of the run into the hole if its home is not
        // cyclically inside (hole, j], which would let a search for it stop at the hole.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let e = self.slots[j];
            if e == EMPTY {
                return true;
            }
            let home = self.hashes[e as usize] as usize & self.mask;
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.slots[hole] = e;
                self.slot_of[e as usize] = hole as u32;
                self.slots[j] = EMPTY;
                hole = j;
            }
        }
    }

    /// Look at the next `budget` ids (round-robin) and remove each live one idle for at
    /// least `idle_ns` at `now_ns` for which `can_remove(id)` (e.g. "its queue is empty"),
    /// calling `removed(id)` after each removal. Returns how many were removed.
    pub fn expire(
        &mut self,
        now_ns: u64,
        idle_ns: u64,
        budget: usize,
        mut can_remove: impl FnMut(u32) -> bool,
        mut removed: impl FnMut(u32),
    ) -> usize {
        let cap = self.keys.len();
        if cap == 0 {
            return 0;
        }
        let mut n = 0;
        for _ in 0..budget.min(cap) {
            let id = self.cursor as u32;
            self.cursor = if self.cursor + 1 == cap {
                0
            } else {
                self.cursor + 1
            };
            if self.contains_id(id)
                && now_ns.saturating_sub(self.last_ns[id as usize]) >= idle_ns
                && can_remove(id)
            {
                self.remove(id);
                removed(id);
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u64),
        Remove(u8),
        Expire(u64, usize),
        Touch(u8, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<u8>(), 0u64..100).prop_map(|(k, t)| Op::Insert(k, t)),
            2 => any::<u8>().prop_map(Op::Remove),
            1 => (0u64..100, 0usize..20).prop_map(|(t, b)| Op::Expire(t, b)),
            1 => (any::<u8>(), 0u64..100).prop_map(|(k, t)| Op::Touch(k, t)),
        ]
    }

    /// A deliberately poor hash (few distinct values) so that probe runs are long and
    /// wrap around the slot array, exercising backward-shift deletion.
    fn hash(k: u8) -> u64 {
        (u64::from(k % 5) * 0x9e37_79b9_7f4a_7c15) | u64::from(k % 3)
    }

    proptest! {
        #[test]
        fn agrees_with_a_hashmap(cap in 0u32..24, ops in prop::collection::vec(op(), 0..200)) {
            let mut m: KeyMap<u8> = KeyMap::new(cap);
            // Model: key -> (id, last used).
            let mut model: HashMap<u8, (u32, u64)> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, t) => {
                        let r = m.get_or_insert(k, hash(k), t);
                        let full = model.len() == cap as usize;
                        match model.get_mut(&k) {
                            Some(e) => {
                                prop_assert_eq!(r, Ok((e.0, false)));
                                e.1 = t;
                            }
                            None if full => prop_assert_eq!(r, Err(Full)),
                            None => {
                                let (id, new) = r.unwrap();
                                prop_assert!(new && id < cap);
                                prop_assert!(model.values().all(|e| e.0 != id), "id {} reused while live", id);
                                model.insert(k, (id, t));
                            }
                        }
                    }
                    Op::Remove(k) => {
                        let id = model.remove(&k).map(|e| e.0);
                        match id {
                            Some(id) => prop_assert!(m.remove(id)),
                            None => prop_assert_eq!(m.get(&k, hash(k)), None),
                        }
                    }
                    Op::Touch(k, t) => {
                        if let Some(e) = model.get_mut(&k) {
                            m.touch(e.0, t);
                            e.1 = t;
                        }
                    }
                    Op::Expire(now, budget) => {
                        // Only even keys may be removed; check what was removed was due.
                        let mut gone = Vec::new();
                        let keys: Vec<Option<u8>> = (0..cap).map(|i| m.key(i)).collect();
                        let n = m.expire(now, 10, budget, |id| keys[id as usize].unwrap() % 2 == 0, |id| gone.push(id));
                        prop_assert_eq!(n, gone.len());
                        prop_assert!(n <= budget);
                        for id in gone {
                            let k = keys[id as usize].unwrap();
                            let (mid, last) = model.remove(&k).unwrap();
                            prop_assert_eq!(mid, id);
                            prop_assert!(k % 2 == 0 && now.saturating_sub(last) >= 10);
                        }
                    }
                }
                prop_assert_eq!(m.len(), model.len());
                prop_assert!(m.len() <= cap as usize);
                for (&k, &(id, last)) in &model {
                    prop_assert_eq!(m.get(&k, hash(k)), Some(id));
                    prop_assert_eq!(m.key(id), Some(k));
                    prop_assert_eq!(m.last_used(id), Some(last));
                }
            }
        }
    }

    proptest! {
        /// A growable map behaves as a fixed one of its limit, ids stay put when it grows,
        /// and it allocates no more than it needs (doubling).
        #[test]
        fn a_growable_map_is_a_fixed_one_of_its_limit(
            limit in 0u32..80,
            keys in prop::collection::vec(any::<u8>(), 0..200),
            removals in prop::collection::vec(any::<u8>(), 0..50),
        ) {
            let mut g: KeyMap<u8> = KeyMap::growable(1, limit);
            let mut model: HashMap<u8, u32> = HashMap::new();
            let mut peak = 0;
            for (i, &k) in keys.iter().enumerate() {
                let r = g.get_or_insert(k, hash(k), i as u64);
                match model.get(&k) {
                    Some(&id) => prop_assert_eq!(r, Ok((id, false))),
                    None if model.len() == limit as usize => prop_assert_eq!(r, Err(Full)),
                    None => {
                        let (id, new) = r.unwrap();
                        prop_assert!(new && id < limit);
                        model.insert(k, id);
                        peak = peak.max(model.len());
                    }
                }
                if let Some(&k) = removals.get(i) {
                    if let Some(id) = model.remove(&k) {
                        prop_assert!(g.remove(id));
                    }
                }
                for (&k, &id) in &model {
                    prop_assert_eq!(g.get(&k, hash(k)), Some(id));
                }
                prop_assert!(g.capacity() <= limit);
                prop_assert!(g.capacity() as usize <= (2 * peak).max(16));
            }
        }
    }

    #[test]
    fn full_then_reuse() {
        let mut m: KeyMap<u32> = KeyMap::new(3);
        for k in 0..3 {
            assert_eq!(m.get_or_insert(k, u64::from(k), 0), Ok((k, true)));
        }
        assert_eq!(m.get_or_insert(7, 7, 0), Err(Full));
        // Existing keys still resolve when full.
        assert_eq!(m.get_or_insert(1, 1, 5), Ok((1, false)));
        assert!(m.remove(1));
        assert!(!m.remove(1));
        assert_eq!(m.get_or_insert(7, 7, 0), Ok((1, true)));
        assert_eq!(m.key(1), Some(7));
        let mut empty: KeyMap<u32> = KeyMap::new(0);
        assert_eq!(empty.get_or_insert(1, 1, 0), Err(Full));
        assert_eq!(empty.expire(100, 0, 10, |_| true, |_| {}), 0);
    }

    #[test]
    fn expire_is_bounded_and_round_robin() {
        let mut m: KeyMap<u32> = KeyMap::new(10);
        for k in 0..10 {
            m.get_or_insert(k, u64::from(k).wrapping_mul(0x9e37_79b9), 0)
                .unwrap();
        }
        m.touch(5, 50);
        let mut removed = Vec::new();
        // 4 ids per call: ids 0..4, then 4..8 (5 is not idle: last used 50, now 55),
        // then 8, 9, 0, 1 (0 and 1 are gone already).
        assert_eq!(m.expire(55, 10, 4, |_| true, |id| removed.push(id)), 4);
        assert_eq!(m.expire(55, 10, 4, |_| true, |id| removed.push(id)), 3);
        assert_eq!(m.expire(55, 10, 4, |_| true, |id| removed.push(id)), 2);
        assert_eq!(removed, vec![0, 1, 2, 3, 4, 6, 7, 8, 9]);
        assert_eq!(m.len(), 1);
        assert_eq!(m.key(5), Some(5));
        // can_remove = false keeps it.
        assert_eq!(m.expire(1000, 10, 10, |_| false, |_| {}), 0);
        assert_eq!(m.len(), 1);
    }
}
