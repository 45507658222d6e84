//! The flow table: the part of every scheduler that is not the algorithm.
//!
//! Like dummynet's scheduler framework (`dn_sched.h`), the table owns the flows, their FIFO
//! queues, the limits and the counters, and the algorithm ([`crate::Policy`]) only decides
//! the order of service. It also carries the algorithm's per-flow state `S` (dummynet's
//! `q_datalen`) next to each queue, so one cache line serves both.
//!
//! # Packet storage
//!
//! Packets live in one pool of slots allocated when the scheduler is built: no allocation
//! per packet, and memory bounded by the scheduler's capacity whatever the number of flows.
//! Each flow's queue is a singly linked list through the pool (`head`, `tail`, `next`), and
//! free slots form a stack. Enqueue and dequeue are O(1) and touch the flow's entry and one
//! slot.
//!
//! # Invariants
//!
//! - A flow's `pkts`/`bytes` equal the number and total length of the packets on its list;
//!   the table's backlog is their sum over all flows.
//! - `head == NIL` exactly when `pkts == 0`.
//! - A slot is either on exactly one flow's list (its `pkt` is `Some`) or on the free stack.
//! - A flow slot is live exactly when its generation is odd.

use crate::error::FlowError;
use crate::flow::{FlowId, FlowParams};
use crate::packet::Packet;
use crate::stats::{Backlog, DropCounts, DropReason, FlowStats};

/// End-of-list marker for slot and flow indices.
pub const NIL: u32 = u32::MAX;

/// Most flows one scheduler holds (indices stay clear of [`NIL`]).
pub const MAX_FLOWS: u32 = 1 << 31;

struct Slot<P, G> {
    pkt: Option<P>,
    tag: G,
    next: u32,
}

/// Hot per-flow queue state.
#[derive(Clone, Copy, Debug)]
struct QueueState {
    head: u32,
    tail: u32,
    pkts: u32,
    /// Odd while the flow exists; bumped on creation and on removal.
    gen: u32,
    bytes: u64,
    sent_pkts: u64,
    sent_bytes: u64,
}

struct FlowEntry<S> {
    q: QueueState,
    params: FlowParams,
    st: S,
}

/// Flows, their queues, limits and counters, with per-flow algorithm state `S` and an
/// optional per-packet tag `G` (for algorithms that stamp packets at enqueue).
pub struct FlowTable<P, S, G = ()> {
    flows: Vec<FlowEntry<S>>,
    /// Cold per-flow drop counters, parallel to `flows`.
    flow_drops: Vec<DropCounts>,
    free_flows: Vec<u32>,
    live_flows: u32,
    slots: Vec<Slot<P, G>>,
    free_slot: u32,
    backlog: Backlog,
    sent_pkts: u64,
    sent_bytes: u64,
    drops: DropCounts,
}

impl<P: Packet, S: Default, G: Copy + Default> FlowTable<P, S, G> {
    /// A table with room for `capacity` queued packets (`1..=2^31`), allocated now.
    pub fn with_capacity(capacity: u32) -> Self {
        assert!((1..=MAX_FLOWS).contains(&capacity), "capacity out of range");
        let slots = (0..capacity)
            .map(|i| Slot {
                pkt: None,
                tag: G::default(),
                next: if i + 1 < capacity { i + 1 } else { NIL },
            })
            .collect();
        Self {
            flows: Vec::new(),
            flow_drops: Vec::new(),
            free_flows: Vec::new(),
            live_flows: 0,
            slots,
            free_slot: 0,
            backlog: Backlog::default(),
            sent_pkts: 0,
            sent_bytes: 0,
            drops: DropCounts::default(),
        }
    }

    /// Packets the pool holds at most.
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Creates a flow (parameters already validated) and returns its index.
    pub fn add(&mut self, params: FlowParams) -> Result<u32, FlowError> {
        let fresh = QueueState {
            head: NIL,
            tail: NIL,
            pkts: 0,
            gen: 1,
            bytes: 0,
            sent_pkts: 0,
            sent_bytes: 0,
        };
        let f = if let Some(f) = self.free_flows.pop() {
            let e = &mut self.flows[f as usize];
            let gen = e.q.gen.wrapping_add(1) | 1;
            *e = FlowEntry {
                q: QueueState { gen, ..fresh },
                params,
                st: S::default(),
            };
            self.flow_drops[f as usize] = DropCounts::default();
            f
        } else {
            if self.flows.len() as u64 >= u64::from(MAX_FLOWS) {
                return Err(FlowError::TooManyFlows { max: MAX_FLOWS });
            }
            self.flows.push(FlowEntry {
                q: fresh,
                params,
                st: S::default(),
            });
            self.flow_drops.push(DropCounts::default());
            (self.flows.len() - 1) as u32
        };
        self.live_flows += 1;
        Ok(f)
    }

    /// Removes flow `f` and returns its queued packets, oldest first. They are counted as
    /// drops with reason [`DropReason::FlowRemoved`].
    pub fn remove(&mut self, f: u32) -> Vec<P> {
        let mut out = Vec::with_capacity(self.flows[f as usize].q.pkts as usize);
        while self.flows[f as usize].q.pkts > 0 {
            let (pkt, _) = self.unlink_head(f);
            self.drops.add(DropReason::FlowRemoved, 1);
            out.push(pkt);
        }
        let e = &mut self.flows[f as usize];
        e.q.gen = e.q.gen.wrapping_add(1) & !1;
        e.st = S::default();
        self.free_flows.push(f);
        self.live_flows -= 1;
        out
    }

    /// The index of a live flow, or `None` for a stale or foreign handle.
    #[inline]
    pub fn resolve(&self, id: FlowId) -> Option<u32> {
        let e = self.flows.get(id.index() as usize)?;
        (e.q.gen == id.generation() && id.generation() & 1 == 1).then_some(id.index())
    }

    /// The handle of live flow `f`.
    #[inline]
    pub fn id(&self, f: u32) -> FlowId {
        FlowId::new(f, self.flows[f as usize].q.gen)
    }

    /// Handles of all live flows, by index.
    pub fn ids(&self) -> Vec<FlowId> {
        self.flows
            .iter()
            .enumerate()
            .filter(|(_, e)| e.q.gen & 1 == 1)
            .map(|(i, e)| FlowId::new(i as u32, e.q.gen))
            .collect()
    }

    /// Number of live flows.
    pub fn live(&self) -> u32 {
        self.live_flows
    }

    /// Number of flow slots, live or free (an upper bound on indices).
    pub fn slots(&self) -> u32 {
        self.flows.len() as u32
    }

    /// Whether flow slot `f` holds a live flow.
    pub fn is_live(&self, f: u32) -> bool {
        self.flows.get(f as usize).is_some_and(|e| e.q.gen & 1 == 1)
    }

    /// Parameters of flow `f`.
    #[inline]
    pub fn params(&self, f: u32) -> &FlowParams {
        &self.flows[f as usize].params
    }

    /// Replaces the parameters of flow `f` (already validated). Queued packets stay, even if
    /// they exceed the new limits; new arrivals see the new limits.
    pub fn set_params(&mut self, f: u32, params: FlowParams) {
        self.flows[f as usize].params = params;
    }

    /// Weight of flow `f`.
    #[inline]
    pub fn weight(&self, f: u32) -> u32 {
        self.flows[f as usize].params.weight
    }

    /// Algorithm state of flow `f`.
    #[inline]
    pub fn st(&self, f: u32) -> &S {
        &self.flows[f as usize].st
    }

    /// Mutable algorithm state of flow `f`.
    #[inline]
    pub fn st_mut(&mut self, f: u32) -> &mut S {
        &mut self.flows[f as usize].st
    }

    /// Whether flow `f` has queued packets.
    #[inline]
    pub fn is_backlogged(&self, f: u32) -> bool {
        self.flows[f as usize].q.pkts != 0
    }

    /// Backlog of flow `f`.
    #[inline]
    pub fn flow_backlog(&self, f: u32) -> Backlog {
        let q = &self.flows[f as usize].q;
        Backlog {
            pkts: u64::from(q.pkts),
            bytes: q.bytes,
        }
    }

    /// Length of the head packet of flow `f`, if any.
    #[inline]
    pub fn head_len(&self, f: u32) -> Option<u32> {
        let head = self.flows[f as usize].q.head;
        if head == NIL {
            return None;
        }
        self.slots[head as usize].pkt.as_ref().map(Packet::wire_len)
    }

    /// Tag of the head packet of flow `f`, if any.
    #[inline]
    pub fn head_tag(&self, f: u32) -> Option<G> {
        let head = self.flows[f as usize].q.head;
        (head != NIL).then(|| self.slots[head as usize].tag)
    }

    /// Checks whether a packet of `len` bytes may join flow `f`, without counting anything.
    #[inline]
    pub fn admit(&self, f: u32, len: u32) -> Result<(), DropReason> {
        let e = &self.flows[f as usize];
        if len == 0 {
            Err(DropReason::EmptyPacket)
        } else if len > e.params.max_len {
            Err(DropReason::PacketTooLong)
        } else if e.q.pkts >= e.params.limit_pkts {
            Err(DropReason::FlowPacketLimit)
        } else if e.q.bytes + u64::from(len) > e.params.limit_bytes {
            Err(DropReason::FlowByteLimit)
        } else if self.free_slot == NIL {
            Err(DropReason::SchedulerFull)
        } else {
            Ok(())
        }
    }

    /// Counts a drop, against flow `f` too when it exists.
    pub fn count_drop(&mut self, f: Option<u32>, reason: DropReason) {
        self.drops.add(reason, 1);
        if let Some(f) = f {
            self.flow_drops[f as usize].add(reason, 1);
        }
    }

    /// Appends a packet to flow `f`. The caller has checked [`Self::admit`].
    #[inline]
    pub fn push(&mut self, f: u32, pkt: P, tag: G) {
        let len = pkt.wire_len();
        let s = self.free_slot;
        debug_assert_ne!(s, NIL, "push without admit");
        let slot = &mut self.slots[s as usize];
        self.free_slot = slot.next;
        slot.pkt = Some(pkt);
        slot.tag = tag;
        slot.next = NIL;
        let q = &mut self.flows[f as usize].q;
        if q.tail == NIL {
            q.head = s;
        } else {
            self.slots[q.tail as usize].next = s;
        }
        q.tail = s;
        q.pkts += 1;
        q.bytes += u64::from(len);
        self.backlog.pkts += 1;
        self.backlog.bytes += u64::from(len);
    }

    /// Removes and returns the head packet of flow `f` (which must be backlogged) and its
    /// tag, counting it as sent.
    #[inline]
    pub fn pop(&mut self, f: u32) -> (P, G) {
        let (pkt, tag) = self.unlink_head(f);
        let len = u64::from(pkt.wire_len());
        let q = &mut self.flows[f as usize].q;
        q.sent_pkts += 1;
        q.sent_bytes += len;
        self.sent_pkts += 1;
        self.sent_bytes += len;
        (pkt, tag)
    }

    fn unlink_head(&mut self, f: u32) -> (P, G) {
        let q = &mut self.flows[f as usize].q;
        let s = q.head;
        assert_ne!(s, NIL, "pop from an empty flow");
        let slot = &mut self.slots[s as usize];
        let pkt = slot.pkt.take().expect("queued slot holds a packet");
        let tag = slot.tag;
        q.head = slot.next;
        if q.head == NIL {
            q.tail = NIL;
        }
        slot.next = self.free_slot;
        self.free_slot = s;
        let len = u64::from(pkt.wire_len());
        q.pkts -= 1;
        q.bytes -= len;
        self.backlog.pkts -= 1;
        self.backlog.bytes -= len;
        (pkt, tag)
    }

    /// Backlog of the whole table.
    #[inline]
    pub fn backlog(&self) -> Backlog {
        self.backlog
    }

    /// Counters of flow `f`.
    pub fn flow_stats(&self, f: u32) -> FlowStats {
        let q = &self.flows[f as usize].q;
        FlowStats {
            sent_pkts: q.sent_pkts,
            sent_bytes: q.sent_bytes,
            drops: self.flow_drops[f as usize],
            backlog: self.flow_backlog(f),
        }
    }

    /// Packets and bytes sent, and drops, of the whole table.
    pub fn totals(&self) -> (u64, u64, DropCounts) {
        (self.sent_pkts, self.sent_bytes, self.drops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Desc;

    fn table(cap: u32) -> FlowTable<Desc, (), ()> {
        FlowTable::with_capacity(cap)
    }

    #[test]
    fn queues_are_fifo_and_share_the_pool() {
        let mut t = table(4);
        let a = t.add(FlowParams::default()).unwrap();
        let b = t.add(FlowParams::default()).unwrap();
        for i in 0..2 {
            t.admit(a, 100).unwrap();
            t.push(a, Desc::new(i, 100), ());
            t.admit(b, 200).unwrap();
            t.push(b, Desc::new(10 + i, 200), ());
        }
        assert_eq!(t.admit(a, 100), Err(DropReason::SchedulerFull));
        assert_eq!(
            t.backlog(),
            Backlog {
                pkts: 4,
                bytes: 600
            }
        );
        assert_eq!(t.head_len(b), Some(200));
        assert_eq!(t.pop(a).0.cookie, 0);
        assert_eq!(t.pop(a).0.cookie, 1);
        assert!(!t.is_backlogged(a));
        assert_eq!(t.head_len(a), None);
        // the freed slots are reusable by the other flow
        t.push(b, Desc::new(12, 200), ());
        assert_eq!(t.pop(b).0.cookie, 10);
        assert_eq!(t.flow_stats(a).sent_bytes, 200);
        assert_eq!(t.totals().0, 3);
    }

    #[test]
    fn limits_are_checked_in_order() {
        let mut t = table(16);
        let f = t
            .add(
                FlowParams::default()
                    .with_max_len(1000)
                    .with_limit_pkts(2)
                    .with_limit_bytes(1500),
            )
            .unwrap();
        assert_eq!(t.admit(f, 0), Err(DropReason::EmptyPacket));
        assert_eq!(t.admit(f, 1001), Err(DropReason::PacketTooLong));
        t.push(f, Desc::new(0, 1000), ());
        assert_eq!(t.admit(f, 600), Err(DropReason::FlowByteLimit));
        t.push(f, Desc::new(1, 500), ());
        assert_eq!(t.admit(f, 1), Err(DropReason::FlowPacketLimit));
    }

    #[test]
    fn removed_flows_are_stale_and_slots_reused() {
        let mut t = table(8);
        let f = t.add(FlowParams::default()).unwrap();
        let id = t.id(f);
        t.push(f, Desc::new(1, 10), ());
        t.push(f, Desc::new(2, 10), ());
        let left = t.remove(f);
        assert_eq!(left.iter().map(|d| d.cookie).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(t.resolve(id), None);
        assert_eq!(t.totals().2.get(DropReason::FlowRemoved), 2);
        assert_eq!(t.backlog(), Backlog::default());
        let g = t.add(FlowParams::default()).unwrap();
        assert_eq!(g, f, "slot reused");
        assert_ne!(t.id(g), id, "with a new generation");
        assert_eq!(t.resolve(t.id(g)), Some(g));
        assert_eq!(t.live(), 1);
        assert_eq!(t.ids(), vec![t.id(g)]);
    }
}
