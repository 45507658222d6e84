//! The classes' wake-up times: a 4-ary min-heap of `(time, class)` with a position per
//! class, so that a class has at most one timer and setting, moving or cancelling it is
//! O(log n) without a search. Preallocated for every class: it never allocates.
//!
//! A class waits for one thing at a time: to fall back under its ceil (it is red and
//! backlogged), or to be under its rate again (it is backlogged, under its ceil, and
//! borrowing). Ties are broken by class index, so runs are reproducible.

const ARITY: usize = 4;
const NONE: u32 = u32::MAX;

/// Wake-up times of up to `n` classes.
#[derive(Clone, Debug, Default)]
pub struct Timers {
    /// `(time << 32) | class`, heap-ordered.
    heap: Vec<u128>,
    /// Where each class is in `heap`, or `NONE`.
    pos: Vec<u32>,
}

#[inline]
fn key(t: u64, c: u32) -> u128 {
    (u128::from(t) << 32) | u128::from(c)
}

impl Timers {
    /// Room for classes `0..n`.
    pub fn new(n: usize) -> Self {
        Self {
            heap: Vec::with_capacity(n),
            pos: vec![NONE; n],
        }
    }

    /// Room for one more class (control path).
    pub fn grow(&mut self) {
        self.pos.push(NONE);
        self.heap.reserve(1);
    }

    /// The earliest `(time, class)`.
    #[inline]
    pub fn peek(&self) -> Option<(u64, u32)> {
        self.heap.first().map(|&k| ((k >> 32) as u64, k as u32))
    }

    /// When class `c` wakes, if it has a timer.
    pub fn get(&self, c: u32) -> Option<u64> {
        let p = self.pos[c as usize];
        (p != NONE).then(|| (self.heap[p as usize] >> 32) as u64)
    }

    /// Number of timers set.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no timer is set.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Class `c` wakes at `t` (replacing its timer if it had one).
    pub fn set(&mut self, c: u32, t: u64) {
        let p = self.pos[c as usize];
        if p == NONE {
            let i = self.heap.len();
            self.heap.push(key(t, c));
            self.pos[c as usize] = i as u32;
            self.up(i);
        } else {
            self.heap[p as usize] = key(t, c);
            self.fix(p as usize);
        }
    }

    /// Cancels class `c`'s timer, if any.
    pub fn cancel(&mut self, c: u32) {
        let p = self.pos[c as usize];
        if p == NONE {
            return;
        }
        self.pos[c as usize] = NONE;
        let last = self.heap.pop().expect("a timer is set");
        let p = p as usize;
        if p < self.heap.len() {
            self.heap[p] = last;
            self.pos[last as u32 as usize] = p as u32;
            self.fix(p);
        }
    }

    /// Removes and returns the earliest timer if it is due at `now`.
    #[inline]
    pub fn pop_due(&mut self, now: u64) -> Option<u32> {
        let (t, c) = self.peek()?;
        if t > now {
            return None;
        }
        self.cancel(c);
        Some(c)
    }

    fn fix(&mut self, i: usize) {
        if i > 0 && self.heap[i] < self.heap[(i - 1) / ARITY] {
            self.up(i);
        } else {
            self.down(i);
        }
    }

    fn place(&mut self, i: usize, k: u128) {
        self.heap[i] = k;
        self.pos[k as u32 as usize] = i as u32;
    }

    fn up(&mut self, mut i: usize) {
        let k = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.heap[parent] <= k {
                break;
            }
            self.place(i, self.heap[parent]);
            i = parent;
        }
        self.place(i, k);
    }

    fn down(&mut self, mut i: usize) {
        let k = self.heap[i];
        let n = self.heap.len();
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let mut c = first;
            for j in first + 1..(first + ARITY).min(n) {
                if self.heap[j] < self.heap[c] {
                    c = j;
                }
            }
            if self.heap[c] >= k {
                break;
            }
            self.place(i, self.heap[c]);
            i = c;
        }
        self.place(i, k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a sorted list: any sequence of sets and cancels pops in time order, ties
        /// by class, one timer per class.
        #[test]
        fn pops_in_order(ops in prop::collection::vec((0u32..16, 0u64..50, any::<bool>()), 0..200)) {
            let mut t = Timers::new(16);
            let mut model: Vec<Option<u64>> = vec![None; 16];
            for (c, at, cancel) in ops {
                if cancel {
                    t.cancel(c);
                    model[c as usize] = None;
                } else {
                    t.set(c, at);
                    model[c as usize] = Some(at);
                }
                prop_assert_eq!(t.len(), model.iter().flatten().count());
                prop_assert_eq!(t.get(c), model[c as usize]);
            }
            let mut want: Vec<(u64, u32)> = model
                .iter()
                .enumerate()
                .filter_map(|(c, at)| at.map(|at| (at, c as u32)))
                .collect();
            want.sort();
            let mut got = Vec::new();
            while let Some((at, c)) = t.peek() {
                prop_assert_eq!(t.pop_due(at), Some(c));
                got.push((at, c));
            }
            prop_assert_eq!(got, want);
            prop_assert!(t.is_empty());
        }
    }

    #[test]
    fn only_due_timers_pop() {
        let mut t = Timers::new(3);
        t.set(2, 10);
        t.set(1, 5);
        assert_eq!(t.pop_due(4), None);
        assert_eq!(t.pop_due(5), Some(1));
        assert_eq!(t.pop_due(9), None);
        t.set(2, 3);
        assert_eq!(t.pop_due(9), Some(2), "moved earlier");
    }
}
