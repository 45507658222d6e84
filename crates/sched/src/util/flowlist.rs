//! An intrusive round-robin list of flows, for the round-robin algorithms.
//!
//! The list is singly linked and circular through a `next` field that each flow keeps in
//! its algorithm state ([`Linked`]), so a flow can be on at most one list at a time and list
//! operations touch only the flows involved. Being circular (the tail links to the head,
//! as in dummynet's `dn_sched_rr.c`), moving the front flow to the back, which a
//! round-robin scheduler does at the end of every visit, writes no link at all: the head
//! and tail indices just advance. Pushing at the back writes two links, popping the front
//! one. Removing a flow from the middle (control path only: a backlogged flow is removed)
//! walks the list to find its predecessor.
//!
//! # Invariants
//!
//! - `head == NIL` exactly when `tail == NIL`, when the list is empty.
//! - Otherwise following `next` from `head` visits every flow on the list once and comes
//!   back to `head` from `tail`.

use crate::packet::Packet;
use crate::table::{FlowTable, NIL};

/// Per-flow state that can be threaded on a [`FlowList`].
pub trait Linked {
    /// The flow's `next` link.
    fn link(&mut self) -> &mut u32;
}

/// A circular FIFO of flow indices.
#[derive(Clone, Copy, Debug)]
pub struct FlowList {
    head: u32,
    tail: u32,
}

impl Default for FlowList {
    fn default() -> Self {
        Self::new()
    }
}

impl FlowList {
    /// An empty list.
    pub const fn new() -> Self {
        Self {
            head: NIL,
            tail: NIL,
        }
    }

    /// Whether the list is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }

    /// The first flow.
    #[inline(always)]
    pub fn front(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// Appends `f`, which must not be on any list.
    #[inline(always)]
    pub fn push_back<P: Packet, S: Default + Linked, G: Copy + Default>(
        &mut self,
        flows: &mut FlowTable<P, S, G>,
        f: u32,
    ) {
        if self.head == NIL {
            *flows.st_mut(f).link() = f;
            self.head = f;
        } else {
            *flows.st_mut(f).link() = self.head;
            *flows.st_mut(self.tail).link() = f;
        }
        self.tail = f;
    }

    /// Removes and returns the first flow.
    #[inline(always)]
    pub fn pop_front<P: Packet, S: Default + Linked, G: Copy + Default>(
        &mut self,
        flows: &mut FlowTable<P, S, G>,
    ) -> Option<u32> {
        let f = self.front()?;
        if f == self.tail {
            self.head = NIL;
            self.tail = NIL;
        } else {
            self.head = *flows.st_mut(f).link();
            *flows.st_mut(self.tail).link() = self.head;
        }
        Some(f)
    }

    /// Moves the first flow to the back: the next flow becomes the first, and no link
    /// changes.
    #[inline(always)]
    pub fn rotate<P: Packet, S: Default + Linked, G: Copy + Default>(
        &mut self,
        flows: &mut FlowTable<P, S, G>,
    ) {
        if self.head != NIL {
            self.tail = self.head;
            self.head = *flows.st_mut(self.head).link();
        }
    }

    /// [`Self::rotate`] for a caller that already read the front flow's link: `next` must be
    /// the `next` link of the first flow, which must exist. Saves looking the flow up again
    /// when its state is at hand.
    #[inline(always)]
    pub fn rotate_to(&mut self, next: u32) {
        debug_assert!(self.head != NIL, "rotate_to on an empty list");
        self.tail = self.head;
        self.head = next;
    }

    /// Removes `f` from anywhere in the list (walks the list). Returns whether it was there.
    pub fn remove<P: Packet, S: Default + Linked, G: Copy + Default>(
        &mut self,
        flows: &mut FlowTable<P, S, G>,
        f: u32,
    ) -> bool {
        if self.head == NIL {
            return false;
        }
        if f == self.head {
            self.pop_front(flows);
            return true;
        }
        let mut prev = self.head;
        loop {
            let cur = *flows.st_mut(prev).link();
            if cur == self.head {
                return false;
            }
            if cur == f {
                *flows.st_mut(prev).link() = *flows.st_mut(f).link();
                if self.tail == f {
                    self.tail = prev;
                }
                return true;
            }
            prev = cur;
        }
    }

    /// The flows in order (walks the list; for tests and reports).
    pub fn to_vec<P: Packet, S: Default + Linked, G: Copy + Default>(
        &self,
        flows: &mut FlowTable<P, S, G>,
    ) -> Vec<u32> {
        let mut out = Vec::new();
        let mut cur = self.head;
        while cur != NIL {
            out.push(cur);
            if cur == self.tail {
                break;
            }
            cur = *flows.st_mut(cur).link();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowParams;
    use crate::packet::Desc;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[derive(Default)]
    struct St {
        next: u32,
    }
    impl Linked for St {
        fn link(&mut self) -> &mut u32 {
            &mut self.next
        }
    }

    fn table(n: u32) -> FlowTable<Desc, St> {
        let mut t = FlowTable::with_capacity(1);
        for _ in 0..n {
            t.add(FlowParams::default()).unwrap();
        }
        t
    }

    #[test]
    fn push_pop_rotate_remove() {
        let mut t = table(4);
        let mut l = FlowList::new();
        for f in 0..4 {
            l.push_back(&mut t, f);
        }
        l.rotate(&mut t);
        assert_eq!(l.to_vec(&mut t), [1, 2, 3, 0]);
        assert!(l.remove(&mut t, 3));
        assert!(!l.remove(&mut t, 3));
        assert!(l.remove(&mut t, 0)); // the tail
        assert_eq!(l.to_vec(&mut t), [1, 2]);
        l.push_back(&mut t, 0);
        assert_eq!(l.pop_front(&mut t), Some(1));
        assert!(l.remove(&mut t, 2)); // the head
        assert_eq!(l.to_vec(&mut t), [0]);
        l.rotate(&mut t); // a single flow rotates onto itself
        assert_eq!(l.to_vec(&mut t), [0]);
        assert_eq!(l.pop_front(&mut t), Some(0));
        assert!(l.is_empty());
        assert_eq!(l.pop_front(&mut t), None);
        l.rotate(&mut t);
        assert!(l.is_empty());
    }

    proptest! {
        /// The list agrees with a `VecDeque` under any sequence of operations.
        #[test]
        fn behaves_like_a_deque(ops in prop::collection::vec((0u8..4, 0u32..12), 1..200)) {
            let mut t = table(12);
            let mut l = FlowList::new();
            let mut model: VecDeque<u32> = VecDeque::new();
            for (op, f) in ops {
                match op {
                    0 if !model.contains(&f) => { l.push_back(&mut t, f); model.push_back(f); }
                    1 => prop_assert_eq!(l.pop_front(&mut t), model.pop_front()),
                    2 => { l.rotate(&mut t); if let Some(x) = model.pop_front() { model.push_back(x); } }
                    3 => {
                        let there = model.contains(&f);
                        prop_assert_eq!(l.remove(&mut t, f), there);
                        model.retain(|&x| x != f);
                    }
                    _ => {}
                }
                prop_assert_eq!(l.to_vec(&mut t), model.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!(l.front(), model.front().copied());
            }
        }
    }
}
