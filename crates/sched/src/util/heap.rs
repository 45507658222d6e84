//! A min-heap of flows keyed by virtual time, for the O(log N) timestamp schedulers.
//!
//! # Keys
//!
//! An entry is one `u128`: the virtual time in the high 96 bits and the flow index in the
//! low 32 ([`VTime`] never needs more than 96 bits: its integer part counts bytes per unit
//! weight, and 2^64 bytes is beyond any link's lifetime). Plain integer order on the packed
//! key is therefore "earlier time first, then lower flow index": one comparison, no
//! wrap-around window, and ties break the same way in every run and in the reference
//! models.
//!
//! # Shape
//!
//! 4-ary: half the depth of a binary heap, and the four children of a node are 64
//! contiguous bytes. `pop` uses Floyd's method: the hole left at the root walks down to a
//! leaf along the smallest children (three comparisons per level), then the last entry
//! is sifted up from there, which is usually one step, instead of comparing the moving
//! entry at every level on the way down.
//!
//! The data path only touches the top (push, pop, re-key the top), so the heap keeps no
//! back-pointers into the flow table and moving an entry writes nothing else. Removing or
//! re-keying an arbitrary flow (a backlogged flow removed or re-weighted: control path only)
//! finds it with a linear scan.

use crate::vtime::VTime;

const ARITY: usize = 4;

/// Packs a time and a flow index into one ordered key.
#[inline(always)]
fn pack(t: VTime, flow: u32) -> u128 {
    debug_assert!(t.raw() >> 96 == 0, "virtual time beyond 96 bits");
    (t.raw() << 32) | u128::from(flow)
}

#[inline(always)]
fn flow_of(k: u128) -> u32 {
    k as u32
}

#[inline(always)]
fn time_of(k: u128) -> VTime {
    VTime::from_raw(k >> 32)
}

/// Min-heap of `(virtual time, flow index)`.
#[derive(Clone, Debug, Default)]
pub struct VHeap {
    v: Vec<u128>,
}

impl VHeap {
    /// An empty heap.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty heap with room for `n` flows: pushing up to `n` never allocates.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            v: Vec::with_capacity(n),
        }
    }

    /// Room for `n` more flows (control path).
    pub fn reserve(&mut self, n: usize) {
        self.v.reserve(n);
    }

    /// Number of flows in the heap.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.v.len()
    }

    /// Whether the heap is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// The smallest `(time, flow)`.
    #[inline(always)]
    pub fn peek(&self) -> Option<(VTime, u32)> {
        self.v.first().map(|&k| (time_of(k), flow_of(k)))
    }

    /// The flow with the smallest time.
    #[inline(always)]
    pub fn peek_flow(&self) -> Option<u32> {
        self.v.first().map(|&k| flow_of(k))
    }

    /// Adds `flow` at time `t`.
    #[inline]
    pub fn push(&mut self, t: VTime, flow: u32) {
        self.v.push(pack(t, flow));
        let last = self.v.len() - 1;
        sift_up(&mut self.v, last);
    }

    /// Removes and returns the smallest `(time, flow)`.
    #[inline]
    pub fn pop(&mut self) -> Option<(VTime, u32)> {
        let last = self.v.pop()?;
        let v = &mut self.v[..];
        if v.is_empty() {
            return Some((time_of(last), flow_of(last)));
        }
        let top = v[0];
        // Floyd: walk the hole at the root down to a leaf along the smallest children...
        let mut hole = 0;
        loop {
            let first = ARITY * hole + 1;
            if first >= v.len() {
                break;
            }
            let c = min_child(v, first);
            v[hole] = v[c];
            hole = c;
        }
        // ...then put the last entry there and let it rise to its place.
        v[hole] = last;
        sift_up(v, hole);
        Some((time_of(top), flow_of(top)))
    }

    /// Moves the top flow to time `t` (not earlier: the flow was served and advanced).
    #[inline]
    pub fn rekey_top(&mut self, t: VTime) {
        debug_assert!(!self.v.is_empty());
        if let Some(top) = self.v.first_mut() {
            debug_assert!(t >= time_of(*top));
            *top = pack(t, flow_of(*top));
            sift_down(&mut self.v, 0);
        }
    }

    /// Removes `flow` wherever it is (linear search). Returns whether it was present.
    pub fn remove(&mut self, flow: u32) -> bool {
        let Some(i) = self.v.iter().position(|&k| flow_of(k) == flow) else {
            return false;
        };
        let last = self.v.pop().expect("non-empty");
        if i < self.v.len() {
            self.v[i] = last;
            self.fix(i);
        }
        true
    }

    /// Changes the time of `flow` wherever it is (linear search). Returns whether it was
    /// present.
    pub fn rekey(&mut self, flow: u32, t: VTime) -> bool {
        let Some(i) = self.v.iter().position(|&k| flow_of(k) == flow) else {
            return false;
        };
        self.v[i] = pack(t, flow);
        self.fix(i);
        true
    }

    /// Whether `flow` is in the heap (linear search; for tests and assertions).
    pub fn contains(&self, flow: u32) -> bool {
        self.v.iter().any(|&k| flow_of(k) == flow)
    }

    fn fix(&mut self, i: usize) {
        if i > 0 && self.v[i] < self.v[(i - 1) / ARITY] {
            sift_up(&mut self.v, i);
        } else {
            sift_down(&mut self.v, i);
        }
    }
}

/// The smallest of the children `first..first + ARITY` (those that exist). Keys are
/// distinct (each packs a different flow index), so the result does not depend on the order
/// of comparison.
#[inline(always)]
fn min_child(v: &[u128], first: usize) -> usize {
    if let Some(k) = v.get(first..first + ARITY) {
        // A full node: a two-round tournament, three comparisons.
        let a = usize::from(k[1] < k[0]);
        let b = 2 + usize::from(k[3] < k[2]);
        first + if k[b] < k[a] { b } else { a }
    } else {
        // The last, partial node.
        let mut best = first;
        for c in first + 1..v.len() {
            if v[c] < v[best] {
                best = c;
            }
        }
        best
    }
}

#[inline(always)]
fn sift_up(v: &mut [u128], mut i: usize) {
    let e = v[i];
    while i > 0 {
        let parent = (i - 1) / ARITY;
        if e >= v[parent] {
            break;
        }
        v[i] = v[parent];
        i = parent;
    }
    v[i] = e;
}

#[inline(always)]
fn sift_down(v: &mut [u128], mut i: usize) {
    let e = v[i];
    loop {
        let first = ARITY * i + 1;
        if first >= v.len() {
            break;
        }
        let c = min_child(v, first);
        if v[c] >= e {
            break;
        }
        v[i] = v[c];
        i = c;
    }
    v[i] = e;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(x: u64) -> VTime {
        VTime::from_raw(u128::from(x))
    }

    #[test]
    fn ties_break_by_flow_index() {
        let mut h = VHeap::new();
        h.push(t(5), 3);
        h.push(t(5), 1);
        h.push(t(5), 2);
        assert_eq!(h.pop(), Some((t(5), 1)));
        assert_eq!(h.pop(), Some((t(5), 2)));
        assert_eq!(h.pop(), Some((t(5), 3)));
        assert_eq!(h.pop(), None);
    }

    #[test]
    fn times_beyond_64_bits_order_correctly() {
        let mut h = VHeap::new();
        h.push(VTime::from_raw(1 << 70), 0);
        h.push(VTime::from_raw((1 << 70) - 1), 9);
        h.push(VTime::from_raw(u128::from(u64::MAX)), 5);
        assert_eq!(h.pop().map(|e| e.1), Some(5));
        assert_eq!(h.pop().map(|e| e.1), Some(9));
        assert_eq!(h.pop().map(|e| e.1), Some(0));
    }

    proptest! {
        /// The heap agrees with a sorted reference under any mix of operations.
        #[test]
        fn behaves_like_a_sorted_set(ops in prop::collection::vec((0u8..6, 0u64..50, 0u32..40), 1..300)) {
            let mut h = VHeap::new();
            let mut model: Vec<(VTime, u32)> = Vec::new();
            for (op, key, flow) in ops {
                let present = model.iter().any(|&(_, f)| f == flow);
                match op {
                    0 | 1 if !present => { h.push(t(key), flow); model.push((t(key), flow)); }
                    2 => {
                        model.sort();
                        let want = if model.is_empty() { None } else { Some(model.remove(0)) };
                        prop_assert_eq!(h.pop(), want);
                    }
                    3 => {
                        prop_assert_eq!(h.remove(flow), present);
                        model.retain(|&(_, f)| f != flow);
                    }
                    4 => {
                        prop_assert_eq!(h.rekey(flow, t(key)), present);
                        for e in model.iter_mut().filter(|e| e.1 == flow) { e.0 = t(key); }
                    }
                    _ => {
                        model.sort();
                        if let Some(&(k, f)) = model.first() {
                            let nk = t(k.raw() as u64 + key);
                            h.rekey_top(nk);
                            model[0] = (nk, f);
                        }
                    }
                }
                model.sort();
                prop_assert_eq!(h.len(), model.len());
                prop_assert_eq!(h.peek(), model.first().copied());
                prop_assert_eq!(h.contains(flow), model.iter().any(|e| e.1 == flow));
            }
        }
    }
}
