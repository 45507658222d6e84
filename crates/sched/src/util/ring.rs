//! A fixed-capacity FIFO of flow indices, for the FIFO discipline's arrival order.
//!
//! Allocated once with a power-of-two capacity; positions are free-running `u32` counters
//! and the slot is `position & mask`, so pushing and popping are a store or a load and an
//! increment, with no wrap test and no bounds check.

/// FIFO of `u32` with a capacity fixed at construction.
#[derive(Clone, Debug)]
pub struct Ring {
    buf: Box<[u32]>,
    head: u32,
    tail: u32,
}

impl Default for Ring {
    fn default() -> Self {
        Self::with_capacity(1)
    }
}

impl Ring {
    /// A ring holding at least `capacity` entries (`capacity <= 2^31`).
    pub fn with_capacity(capacity: u32) -> Self {
        let buf = vec![0u32; capacity.max(1).next_power_of_two() as usize].into_boxed_slice();
        Self {
            buf,
            head: 0,
            tail: 0,
        }
    }

    /// Index of position `pos` (masked by the length).
    #[inline(always)]
    fn at(&self, pos: u32) -> usize {
        pos as usize & self.buf.len().wrapping_sub(1)
    }

    /// The entry at position `pos`: indexing the prefix `..=mask` with a masked index lets
    /// the compiler drop the bounds check.
    #[inline(always)]
    fn get(&self, pos: u32) -> u32 {
        let m = self.buf.len().wrapping_sub(1);
        self.buf[..=m][pos as usize & m]
    }

    /// Entries held.
    #[inline(always)]
    pub fn len(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }

    /// Whether the ring is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// Appends `x`. The caller guarantees room (at most the capacity given at construction
    /// is ever held); overflowing would overwrite the oldest entry, which a debug build
    /// catches.
    #[inline(always)]
    pub fn push_back(&mut self, x: u32) {
        debug_assert!((self.len() as usize) < self.buf.len(), "ring overflow");
        let m = self.buf.len().wrapping_sub(1);
        self.buf[..=m][self.tail as usize & m] = x;
        self.tail = self.tail.wrapping_add(1);
    }

    /// The oldest entry.
    #[inline(always)]
    pub fn front(&self) -> Option<u32> {
        (!self.is_empty()).then(|| self.get(self.head))
    }

    /// Removes the oldest entry.
    #[inline(always)]
    pub fn pop_front(&mut self) -> Option<u32> {
        let x = self.front()?;
        self.head = self.head.wrapping_add(1);
        Some(x)
    }

    /// Drops the oldest entry, which the caller knows exists (it just read it with
    /// [`Ring::front`]).
    #[inline(always)]
    pub fn advance(&mut self) {
        debug_assert!(!self.is_empty());
        self.head = self.head.wrapping_add(1);
    }

    /// Keeps only the entries for which `keep` is true, in order (O(len)).
    pub fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        let mut w = self.head;
        for r in 0..self.len() {
            let x = self.get(self.head.wrapping_add(r));
            if keep(x) {
                let i = self.at(w);
                self.buf[i] = x;
                w = w.wrapping_add(1);
            }
        }
        self.tail = w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_across_the_wrap_and_retain() {
        let mut r = Ring::with_capacity(3); // 4 slots
        for round in 0..10u32 {
            r.push_back(round);
            r.push_back(round + 100);
            assert_eq!(r.pop_front(), Some(round));
            assert_eq!(r.pop_front(), Some(round + 100));
        }
        assert_eq!(r.pop_front(), None);
        for x in [1, 2, 1, 3] {
            r.push_back(x);
        }
        r.retain(|x| x != 1);
        assert_eq!(r.len(), 2);
        assert_eq!(r.pop_front(), Some(2));
        assert_eq!(r.pop_front(), Some(3));
        assert!(r.is_empty());
    }
}
