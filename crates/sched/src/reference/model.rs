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

/// A queued packet.
#[derive(Debug, Clone)]
struct Queued<P> {
    /// Arrival order.
    arrival: u64,
    /// Order within its band: the arrival order, renewed when the flow changes band (the
    /// packets are re-filed then, as if they arrived).
    band_seq: u64,
    /// The flow's band when it arrived or was re-filed.
    band: u8,
    pkt: P,
}

#[derive(Debug, Clone)]
struct ModelFlow<P> {
    params: FlowParams,
    queue: VecDeque<Queued<P>>,
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

    /// Changes a flow's parameters. A new priority re-files the flow's queued packets in
    /// the new band as if they arrived now, in their order.
    pub fn update_flow(&mut self, id: FlowId, params: FlowParams) {
        let f = self.flows.get_mut(&id).expect("live flow");
        if params.priority != f.params.priority {
            for q in f.queue.iter_mut() {
                q.band_seq = self.arrivals;
                q.band = params.priority;
                self.arrivals += 1;
            }
        }
        f.params = params;
    }

    /// Removes a flow; returns its packets, oldest first.
    pub fn remove_flow(&mut self, id: FlowId) -> Vec<P> {
        let f = self.flows.remove(&id).expect("live flow");
        let n = f.queue.len() as u64;
        self.drops.add(DropReason::FlowRemoved, n);
        f.queue.into_iter().map(|q| q.pkt).collect()
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
        f.queue.push_back(Queued {
            arrival: self.arrivals,
            band_seq: self.arrivals,
            band: f.params.priority,
            pkt,
        });
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
        let head = f
            .queue
            .pop_front()
            .unwrap_or_else(|| panic!("dequeued {pkt:?} from empty {id:?}"))
            .pkt;
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
            .filter_map(|(id, f)| f.queue.front().map(|q| (q.arrival, *id)))
            .min()
            .map(|(_, id)| id)
    }

    /// The flow holding the oldest of the queued packets of the best band, bands taken as
    /// they were when each packet arrived (what strict priority with arrival order inside
    /// a band must serve). Per-flow order holds, so a flow's head is its oldest packet.
    pub fn oldest_of_top_band(&self) -> Option<FlowId> {
        let top = self
            .flows
            .values()
            .flat_map(|f| f.queue.iter().map(|q| q.band))
            .min()?;
        self.flows
            .iter()
            .flat_map(|(id, f)| {
                f.queue
                    .iter()
                    .filter(move |q| q.band == top)
                    .map(move |q| (q.band_seq, *id))
            })
            .min()
            .map(|(_, id)| id)
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
