//! FIFO: one queue in arrival order, tail drop.
//!
//! The simplest discipline and the baseline every other one is measured against (dummynet's
//! `dn_sched_fifo.c`, Linux `pfifo`). Packets leave in the order they were accepted,
//! whatever their flow.
//!
//! # State
//!
//! FIFO has one queue, so it keeps the packets itself, in one ring in arrival order, each
//! with the index of its flow; the flow table works in accounting mode
//! ([`FlowTable::accounting`]): per-flow limits, counters and handles as for every other
//! algorithm, but no per-flow queues. The ring is allocated with the scheduler's capacity.
//! Keeping every packet in one ring also keeps the memory a FIFO touches sequential, which
//! is what lets it stay cheap with tens of thousands of flows.
//!
//! # Invariants
//!
//! - The ring holds every queued packet, oldest first, and its length never exceeds the
//!   capacity (the table refuses a packet beyond it).
//! - For each flow, the table's count of queued packets equals the number of the ring's
//!   entries carrying its index.
//!
//! # Complexity
//!
//! O(1) enqueue and dequeue. Removing a backlogged flow filters the ring: O(backlog).
//!
//! # Drops
//!
//! Tail drop: a packet beyond its flow's limits or the scheduler's capacity is refused.

use crate::error::{ConfigError, FlowError, Rejected};
use crate::flow::{FlowId, FlowParams};
use crate::packet::Packet;
use crate::registry::{Algorithm, AlgorithmInfo, Params, ServiceClass};
use crate::scheduler::Scheduler;
use crate::table::{FlowTable, NoPacket, MAX_FLOWS};

/// The registry entry of FIFO (see [`Fifo`] for the scheduler).
#[derive(Debug)]
pub enum FifoAlgorithm {}

impl Algorithm for FifoAlgorithm {
    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "fifo",
        aliases: &["pfifo"],
        summary: "one queue in arrival order, tail drop",
        complexity: "O(1)",
        guarantee: "none between flows: arrival order",
        source: "dummynet dn_sched_fifo.c; Linux pfifo",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::Fifo,
        params: &[],
    };
    type Sched<P: Packet + 'static> = Fifo<P>;

    fn build<P: Packet + 'static>(_params: &Params, capacity: u32) -> Result<Fifo<P>, ConfigError> {
        Fifo::new(capacity)
    }
}

/// First in, first out.
pub struct Fifo<P> {
    flows: FlowTable<NoPacket, ()>,
    /// Power-of-two length; positions `head..tail` hold the queued packets.
    ring: Box<[Option<(u32, P)>]>,
    head: u64,
    tail: u64,
}

impl<P: Packet> Fifo<P> {
    /// A FIFO holding at most `capacity` packets (`1..=2^31`), allocated now.
    pub fn new(capacity: u32) -> Result<Self, ConfigError> {
        if capacity == 0 || capacity > MAX_FLOWS {
            return Err(ConfigError::Capacity(capacity as usize));
        }
        Ok(Self {
            flows: FlowTable::accounting(capacity),
            ring: (0..capacity.next_power_of_two()).map(|_| None).collect(),
            head: 0,
            tail: 0,
        })
    }

    /// The ring entry at position `pos`: the prefix `..=mask` indexed with a masked
    /// position needs no bounds check.
    #[inline(always)]
    fn slot(&mut self, pos: u64) -> &mut Option<(u32, P)> {
        let m = self.ring.len().wrapping_sub(1);
        &mut self.ring[..=m][pos as usize & m]
    }
}

impl<P: Packet> Scheduler<P> for Fifo<P> {
    fn info(&self) -> &'static AlgorithmInfo {
        &FifoAlgorithm::INFO
    }

    fn add_flow(&mut self, params: FlowParams) -> Result<FlowId, FlowError> {
        params.validate()?;
        let f = self.flows.add(params)?;
        Ok(self.flows.id(f))
    }

    fn update_flow(&mut self, flow: FlowId, params: FlowParams) -> Result<(), FlowError> {
        let f = self.flows.lookup(flow)?;
        params.validate()?;
        self.flows.set_params(f, params);
        Ok(())
    }

    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<P>, FlowError> {
        let f = self.flows.lookup(flow)?;
        // Filter the flow's packets out of the ring, keeping everybody else's order.
        let mut out = Vec::with_capacity(self.flows.flow_backlog(f).pkts as usize);
        let mut w = self.head;
        for r in self.head..self.tail {
            let entry = self.slot(r).take().expect("queued position holds a packet");
            if entry.0 == f {
                out.push(entry.1);
            } else {
                *self.slot(w) = Some(entry);
                w += 1;
            }
        }
        self.tail = w;
        self.flows.remove_counted(f);
        Ok(out)
    }

    #[inline(always)]
    fn enqueue(&mut self, flow: FlowId, pkt: P) -> Result<(), Rejected<P>> {
        let len = pkt.wire_len();
        match self.flows.admit(flow, len) {
            Ok((f, _)) => {
                self.flows.count_in(f, len);
                let pos = self.tail;
                *self.slot(pos) = Some((f, pkt));
                self.tail = pos + 1;
                Ok(())
            }
            Err((f, reason)) => {
                self.flows.count_drop(f, reason);
                Err(Rejected { pkt, reason })
            }
        }
    }

    #[inline(always)]
    fn dequeue(&mut self) -> Option<(FlowId, P)> {
        if self.head == self.tail {
            return None;
        }
        let pos = self.head;
        let (f, pkt) = self.slot(pos).take()?;
        self.head = pos + 1;
        let id = self.flows.count_out(f, pkt.wire_len());
        Some((id, pkt))
    }

    #[inline(always)]
    fn peek_len(&mut self) -> Option<u32> {
        if self.head == self.tail {
            return None;
        }
        let pos = self.head;
        self.slot(pos).as_ref().map(|(_, p)| p.wire_len())
    }

    crate::table::table_queries!(flows, |_| Vec::new());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, DropReason};

    #[test]
    fn serves_in_arrival_order_across_flows() {
        let mut s = Fifo::<Desc>::new(16).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        for (i, f) in [a, b, b, a, b].into_iter().enumerate() {
            s.enqueue(f, Desc::new(i as u64, 100)).unwrap();
        }
        assert_eq!(s.peek_len(), Some(100));
        let out: Vec<_> = crate::testing::drain_pairs(&mut s);
        assert_eq!(out, [(a, 0), (b, 1), (b, 2), (a, 3), (b, 4)]);
        assert_eq!(s.flow_stats(b).unwrap().sent_pkts, 3);
        assert_eq!(s.peek_len(), None);
    }

    #[test]
    fn removing_a_flow_keeps_the_others_in_order() {
        let mut s = Fifo::<Desc>::new(16).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        for (i, f) in [a, b, a, b].into_iter().enumerate() {
            s.enqueue(f, Desc::new(i as u64, 100)).unwrap();
        }
        let purged = s.remove_flow(a).unwrap();
        assert_eq!(purged.iter().map(|d| d.cookie).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(s.stats().drops.get(DropReason::FlowRemoved), 2);
        assert_eq!(s.backlog().pkts, 2);
        assert_eq!(s.dequeue().map(|(f, d)| (f, d.cookie)), Some((b, 1)));
        assert_eq!(s.dequeue().map(|(f, d)| (f, d.cookie)), Some((b, 3)));
        assert!(s.dequeue().is_none());
    }

    #[test]
    fn capacity_bounds_the_ring() {
        let mut s = Fifo::<Desc>::new(3).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        for round in 0..5u64 {
            for i in 0..3 {
                s.enqueue(a, Desc::new(round * 10 + i, 1)).unwrap();
            }
            let e = s.enqueue(a, Desc::new(99, 1)).unwrap_err();
            assert_eq!(e.reason, DropReason::SchedulerFull);
            for i in 0..3 {
                assert_eq!(s.dequeue().unwrap().1.cookie, round * 10 + i);
            }
        }
        assert!(Fifo::<Desc>::new(0).is_err());
    }
}
