//! A min-heap of flows keyed by virtual time, for the O(log N) timestamp schedulers.
//!
//! Entries are `(key, flow)` pairs of 16 bytes, ordered by the wrap-safe key order of
//! [`crate::vtime::key_before`] and then by flow index, so ties break the same way in every
//! run and in the reference models. The heap is 4-ary: half the depth of a binary heap, and
//! the four children of a node are 64 contiguous bytes.
//!
//! The data path only touches the top (push, pop, re-key the top), so the heap keeps no
//! back-pointers into the flow table and moving an entry writes nothing else. Removing or
//! re-keying an arbitrary flow (a backlogged flow removed or re-weighted: control path only)
//! finds it with a linear scan.

use crate::vtime::key_cmp;
use std::cmp::Ordering;

const ARITY: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    key: u64,
    flow: u32,
}

#[inline(always)]
fn before(a: Entry, b: Entry) -> bool {
    match key_cmp(a.key, b.key) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => a.flow < b.flow,
    }
}

/// Min-heap of `(virtual-time key, flow index)`.
#[derive(Clone, Debug, Default)]
pub struct VHeap {
    v: Vec<Entry>,
}

impl VHeap {
    /// An empty heap.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of flows in the heap.
    #[inline]
    pub fn len(&self) -> usize {
        self.v.len()
    }

    /// Whether the heap is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// The smallest `(key, flow)`.
    #[inline]
    pub fn peek(&self) -> Option<(u64, u32)> {
        self.v.first().map(|e| (e.key, e.flow))
    }

    /// Adds `flow` with `key`.
    #[inline]
    pub fn push(&mut self, key: u64, flow: u32) {
        self.v.push(Entry { key, flow });
        self.sift_up(self.v.len() - 1);
    }

    /// Removes and returns the smallest `(key, flow)`.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, u32)> {
        let last = self.v.pop()?;
        if self.v.is_empty() {
            return Some((last.key, last.flow));
        }
        let top = std::mem::replace(&mut self.v[0], last);
        self.sift_down(0);
        Some((top.key, top.flow))
    }

    /// Gives the top flow a new, not smaller key (the flow was served and advanced).
    #[inline]
    pub fn rekey_top(&mut self, key: u64) {
        debug_assert!(!self.v.is_empty());
        self.v[0].key = key;
        self.sift_down(0);
    }

    /// Removes `flow` wherever it is (linear search). Returns whether it was present.
    pub fn remove(&mut self, flow: u32) -> bool {
        let Some(i) = self.v.iter().position(|e| e.flow == flow) else {
            return false;
        };
        let last = self.v.pop().expect("non-empty");
        if i < self.v.len() {
            self.v[i] = last;
            self.fix(i);
        }
        true
    }

    /// Changes the key of `flow` wherever it is (linear search). Returns whether it was
    /// present.
    pub fn rekey(&mut self, flow: u32, key: u64) -> bool {
        let Some(i) = self.v.iter().position(|e| e.flow == flow) else {
            return false;
        };
        self.v[i].key = key;
        self.fix(i);
        true
    }

    /// Whether `flow` is in the heap (linear search; for tests and assertions).
    pub fn contains(&self, flow: u32) -> bool {
        self.v.iter().any(|e| e.flow == flow)
    }

    fn fix(&mut self, i: usize) {
        if i > 0 && before(self.v[i], self.v[(i - 1) / ARITY]) {
            self.sift_up(i);
        } else {
            self.sift_down(i);
        }
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        let e = self.v[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if !before(e, self.v[parent]) {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = e;
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let n = self.v.len();
        let e = self.v[i];
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let end = (first + ARITY).min(n);
            let mut best = first;
            for c in first + 1..end {
                if before(self.v[c], self.v[best]) {
                    best = c;
                }
            }
            if !before(self.v[best], e) {
                break;
            }
            self.v[i] = self.v[best];
            i = best;
        }
        self.v[i] = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ties_break_by_flow_index() {
        let mut h = VHeap::new();
        h.push(5, 3);
        h.push(5, 1);
        h.push(5, 2);
        assert_eq!(h.pop(), Some((5, 1)));
        assert_eq!(h.pop(), Some((5, 2)));
        assert_eq!(h.pop(), Some((5, 3)));
        assert_eq!(h.pop(), None);
    }

    #[test]
    fn keys_order_across_the_wrap() {
        let mut h = VHeap::new();
        h.push(3, 0); // 2^64 + 3: after the wrap
        h.push(u64::MAX - 1, 1);
        assert_eq!(h.peek(), Some((u64::MAX - 1, 1)));
    }

    proptest! {
        /// The heap agrees with a sorted reference under any mix of operations.
        #[test]
        fn behaves_like_a_sorted_set(ops in prop::collection::vec((0u8..5, 0u64..50, 0u32..40), 1..300)) {
            let mut h = VHeap::new();
            let mut model: Vec<(u64, u32)> = Vec::new();
            for (op, key, flow) in ops {
                let present = model.iter().any(|&(_, f)| f == flow);
                match op {
                    0 | 1 if !present => { h.push(key, flow); model.push((key, flow)); }
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
                        prop_assert_eq!(h.rekey(flow, key), present);
                        for e in model.iter_mut().filter(|e| e.1 == flow) { e.0 = key; }
                    }
                    _ => {
                        model.sort();
                        if let Some(&(k, f)) = model.first() {
                            let nk = k + key;
                            h.rekey_top(nk);
                            model[0] = (nk, f);
                        }
                    }
                }
                model.sort();
                prop_assert_eq!(h.len(), model.len());
                prop_assert_eq!(h.peek(), model.first().copied());
            }
        }
    }
}
