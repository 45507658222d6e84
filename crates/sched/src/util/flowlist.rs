//! An intrusive FIFO list of flows, for the round-robin algorithms.
//!
//! The list is singly linked through a `next` field that each flow keeps in its algorithm
//! state ([`Linked`]), so a flow can be on at most one list at a time and list operations
//! touch only the flows involved: push at the back, pop or rotate at the front, all O(1).
//! Removing a flow from the middle (control path only: a backlogged flow is removed) walks
//! the list to find its predecessor.

use crate::packet::Packet;
use crate::table::{FlowTable, NIL};

/// Per-flow state that can be threaded on a [`FlowList`].
pub trait Linked {
    /// The flow's `next` link.
    fn link(&mut self) -> &mut u32;
}

/// A FIFO of flow indices.
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
        *flows.st_mut(f).link() = NIL;
        if self.tail == NIL {
            self.head = f;
        } else {
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
        self.head = *flows.st_mut(f).link();
        if self.head == NIL {
            self.tail = NIL;
        }
        Some(f)
    }

    /// Moves the first flow to the back.
    #[inline(always)]
    pub fn rotate<P: Packet, S: Default + Linked, G: Copy + Default>(
        &mut self,
        flows: &mut FlowTable<P, S, G>,
    ) {
        if self.head != self.tail {
            if let Some(f) = self.pop_front(flows) {
                self.push_back(flows, f);
            }
        }
    }

    /// Removes `f` from anywhere in the list (walks the list). Returns whether it was there.
    pub fn remove<P: Packet, S: Default + Linked, G: Copy + Default>(
        &mut self,
        flows: &mut FlowTable<P, S, G>,
        f: u32,
    ) -> bool {
        let mut prev = NIL;
        let mut cur = self.head;
        while cur != NIL && cur != f {
            prev = cur;
            cur = *flows.st_mut(cur).link();
        }
        if cur == NIL {
            return false;
        }
        let next = *flows.st_mut(f).link();
        if prev == NIL {
            self.head = next;
        } else {
            *flows.st_mut(prev).link() = next;
        }
        if self.tail == f {
            self.tail = prev;
        }
        true
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

    #[derive(Default)]
    struct St {
        next: u32,
    }
    impl Linked for St {
        fn link(&mut self) -> &mut u32 {
            &mut self.next
        }
    }

    #[test]
    fn push_pop_rotate_remove() {
        let mut t: FlowTable<Desc, St> = FlowTable::with_capacity(1);
        for _ in 0..4 {
            t.add(FlowParams::default()).unwrap();
        }
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
        assert_eq!(l.pop_front(&mut t), Some(0));
        assert!(l.is_empty());
        assert_eq!(l.pop_front(&mut t), None);
    }
}
