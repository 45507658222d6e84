//! The queue model: what every scheduler must agree with, whatever its policy.
//!
//! Per-flow `VecDeque`s with the same parameters, limits and counters as the flow table,
//! written the obvious way. It does not decide an order between flows; instead the
//! conformance tests ask it whether the packet a scheduler dequeued is the head of its
//! flow (per-flow FIFO, nothing lost or duplicated), whether the scheduler may be empty
//! (work conservation), and whether every counter matches.

use std::collections::{HashMap, VecDeque};

use crate::flow::{FlowId, FlowParams};
use crate::packet::Packet;
use crate::stats::{Backlog, DropCounts, DropReason, FlowStats};

#[derive(Debug, Clone)]
struct ModelFlow<P> {
    params: FlowParams,
    queue: VecDeque<(u64, P)>,
    stats: FlowStats,
}

/// Per-flow FIFO queues with limits and counters, no scheduling policy.
#[derive(Debug, Clone)]
pub struct QueueModel<P> {
    capacity: u64,
    flows: HashMap<FlowId, ModelFlow<P>>,
    arrivals: u64,
    sent_pkts: u64,
    sent_bytes: u64,
    drops: DropCounts,
}

impl<P: Packet + Clone + PartialEq + std::fmt::Debug> QueueModel<P> {
    /// A model of a scheduler with room for `capacity` packets.
    pub fn new(capacity: u32) -> Self {
        Self {
            capacity: u64::from(capacity),
            flows: HashMap::new(),
            arrivals: 0,
            sent_pkts: 0,
            sent_bytes: 0,
            drops: DropCounts::default(),
        }
    }

    /// Registers a flow the scheduler created.
    pub fn add_flow(&mut self, id: FlowId, params: FlowParams) {
        let fresh = ModelFlow {
            params,
            queue: VecDeque::new(),
            stats: FlowStats::default(),
        };
        assert!(self.flows.insert(id, fresh).is_none(), "{id:?} reused");
    }

    /// Whether `id` names a live flow.
    pub fn has_flow(&self, id: FlowId) -> bool {
        self.flows.contains_key(&id)
    }

    /// Parameters of a live flow.
    pub fn params(&self, id: FlowId) -> Option<FlowParams> {
        self.flows.get(&id).map(|f| f.params)
    }

    /// Changes a flow's parameters.
    pub fn update_flow(&mut self, id: FlowId, params: FlowParams) {
        self.flows.get_mut(&id).expect("live flow").params = params;
    }

    /// Removes a flow; returns its packets, oldest first.
    pub fn remove_flow(&mut self, id: FlowId) -> Vec<P> {
        let f = self.flows.remove(&id).expect("live flow");
        let n = f.queue.len() as u64;
        self.drops.add(DropReason::FlowRemoved, n);
        f.queue.into_iter().map(|(_, p)| p).collect()
    }

    /// Offers a packet; returns the drop reason if the rules refuse it.
    pub fn enqueue(&mut self, id: FlowId, pkt: P) -> Result<(), DropReason> {
        let total = self.backlog().pkts;
        let len = pkt.wire_len();
        let Some(f) = self.flows.get_mut(&id) else {
            self.drops.add(DropReason::UnknownFlow, 1);
            return Err(DropReason::UnknownFlow);
        };
        let reason = if len == 0 {
            Some(DropReason::EmptyPacket)
        } else if len > f.params.max_len {
            Some(DropReason::PacketTooLong)
        } else if f.queue.len() as u64 >= u64::from(f.params.limit_pkts) {
            Some(DropReason::FlowPacketLimit)
        } else if f.stats.backlog.bytes + u64::from(len) > f.params.limit_bytes {
            Some(DropReason::FlowByteLimit)
        } else if total >= self.capacity {
            Some(DropReason::SchedulerFull)
        } else {
            None
        };
        if let Some(r) = reason {
            f.stats.drops.add(r, 1);
            self.drops.add(r, 1);
            return Err(r);
        }
        f.queue.push_back((self.arrivals, pkt));
        f.stats.backlog.pkts += 1;
        f.stats.backlog.bytes += u64::from(len);
        self.arrivals += 1;
        Ok(())
    }

    /// Checks that `pkt` is the head of flow `id` and removes it. Panics with a description
    /// otherwise (a packet invented, duplicated, lost or reordered).
    pub fn dequeue_from(&mut self, id: FlowId, pkt: &P) {
        let f = self
            .flows
            .get_mut(&id)
            .unwrap_or_else(|| panic!("dequeued from unknown {id:?}"));
        let (_, head) = f
            .queue
            .pop_front()
            .unwrap_or_else(|| panic!("dequeued {pkt:?} from empty {id:?}"));
        assert_eq!(&head, pkt, "{id:?}: not the head packet");
        let len = u64::from(pkt.wire_len());
        f.stats.backlog.pkts -= 1;
        f.stats.backlog.bytes -= len;
        f.stats.sent_pkts += 1;
        f.stats.sent_bytes += len;
        self.sent_pkts += 1;
        self.sent_bytes += len;
    }

    /// The flow holding the oldest queued packet (what a FIFO must serve).
    pub fn oldest_flow(&self) -> Option<FlowId> {
        self.flows
            .iter()
            .filter_map(|(id, f)| f.queue.front().map(|(seq, _)| (*seq, *id)))
            .min()
            .map(|(_, id)| id)
    }

    /// The smallest priority among backlogged flows (what strict priority must serve).
    pub fn top_priority(&self) -> Option<u8> {
        self.flows
            .values()
            .filter(|f| !f.queue.is_empty())
            .map(|f| f.params.priority)
            .min()
    }

    /// Total backlog.
    pub fn backlog(&self) -> Backlog {
        self.flows
            .values()
            .fold(Backlog::default(), |b, f| Backlog {
                pkts: b.pkts + f.stats.backlog.pkts,
                bytes: b.bytes + f.stats.backlog.bytes,
            })
    }

    /// Counters of a live flow.
    pub fn flow_stats(&self, id: FlowId) -> Option<FlowStats> {
        self.flows.get(&id).map(|f| f.stats)
    }

    /// Sent packets, sent bytes and drops of the whole model.
    pub fn totals(&self) -> (u64, u64, DropCounts) {
        (self.sent_pkts, self.sent_bytes, self.drops)
    }

    /// Live flows, in no particular order.
    pub fn flow_ids(&self) -> Vec<FlowId> {
        self.flows.keys().copied().collect()
    }
}
