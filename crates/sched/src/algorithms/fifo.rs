//! FIFO: one queue in arrival order, tail drop.
//!
//! The simplest discipline and the baseline every other one is measured against (dummynet's
//! `dn_sched_fifo.c`, Linux `pfifo`). Packets leave in the order they were accepted,
//! whatever their flow.
//!
//! # State
//!
//! Packets stay on their flows' queues (so per-flow limits and counters work as everywhere
//! else); `order` records the flow of every queued packet in arrival order. It is allocated
//! with the scheduler's capacity and never holds more entries than there are queued
//! packets, so it never grows.
//!
//! # Invariants
//!
//! - `order` holds exactly one entry per queued packet, and the entries of one flow appear
//!   in the order of that flow's queue. Popping the front entry's flow therefore yields the
//!   oldest packet of the scheduler.
//!
//! # Complexity
//!
//! O(1) enqueue and dequeue. Removing a backlogged flow filters `order`: O(backlog).
//!
//! # Drops
//!
//! Tail drop: a packet beyond its flow's limit or the scheduler's capacity is refused.

use crate::error::ConfigError;
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{AlgorithmInfo, Params, ServiceClass};
use crate::util::ring::Ring;

/// First in, first out.
#[derive(Debug, Default)]
pub struct Fifo {
    order: Ring,
}

impl Policy for Fifo {
    type FlowState = ();
    type Tag = ();

    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "fifo",
        aliases: &["pfifo"],
        summary: "one queue in arrival order, tail drop",
        complexity: "O(1)",
        guarantee: "none between flows: arrival order",
        source: "dummynet dn_sched_fifo.c; Linux pfifo",
        file: "src/algorithms/fifo.rs",
        class: ServiceClass::Fifo,
        params: &[],
    };

    fn from_params(_params: &Params) -> Result<Self, ConfigError> {
        Ok(Self::default())
    }

    fn prepare(&mut self, capacity: u32) {
        self.order = Ring::with_capacity(capacity);
    }

    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        if flows.is_backlogged(f) {
            self.order.retain(|g| g != f);
        }
    }

    #[inline(always)]
    fn enqueued<P: Packet>(
        &mut self,
        _flows: &mut Flows<P, Self>,
        f: u32,
        _len: u32,
        _was_empty: bool,
    ) {
        // Never grows: at most one entry per queued packet, capacity reserved in `prepare`.
        self.order.push_back(f);
    }

    #[inline(always)]
    fn select<P: Packet>(&mut self, _flows: &mut Flows<P, Self>) -> Option<u32> {
        self.order.front()
    }

    #[inline(always)]
    fn dequeued<P: Packet>(
        &mut self,
        _flows: &mut Flows<P, Self>,
        _f: u32,
        _len: u32,
        _tag: (),
        _next: Option<u32>,
    ) {
        // `select` returned the front entry: it exists.
        self.order.advance();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, FlowParams, Sched, Scheduler};

    #[test]
    fn serves_in_arrival_order_across_flows() {
        let mut s = Sched::<Fifo, Desc>::with_defaults(16).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        for (i, f) in [a, b, b, a, b].into_iter().enumerate() {
            s.enqueue(f, Desc::new(i as u64, 100)).unwrap();
        }
        let out: Vec<_> = std::iter::from_fn(|| s.dequeue())
            .map(|(_, d)| d.cookie)
            .collect();
        assert_eq!(out, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn removing_a_flow_keeps_the_others_in_order() {
        let mut s = Sched::<Fifo, Desc>::with_defaults(16).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        for (i, f) in [a, b, a, b].into_iter().enumerate() {
            s.enqueue(f, Desc::new(i as u64, 100)).unwrap();
        }
        let purged = s.remove_flow(a).unwrap();
        assert_eq!(purged.iter().map(|d| d.cookie).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(s.dequeue().map(|(f, d)| (f, d.cookie)), Some((b, 1)));
        assert_eq!(s.dequeue().map(|(f, d)| (f, d.cookie)), Some((b, 3)));
        assert!(s.dequeue().is_none());
    }
}
