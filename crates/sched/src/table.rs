//! The flow table: the part of every scheduler that is not the algorithm.
//!
//! Like dummynet's scheduler framework (`dn_sched.h`), the table owns the flows, their FIFO
//! queues, the limits and the counters, and the algorithm ([`crate::Policy`]) only decides
//! the order of service. It also carries the algorithm's per-flow state `S` (dummynet's
//! `q_datalen`) next to each queue, so that one look-up serves both.
//!
//! # Packet storage
//!
//! Each flow's queue is a ring of packet handles, allocated when the flow is created (or
//! its packet limit raised) with room for `limit_pkts` packets rounded up to a power of
//! two: no allocation per packet, and an enqueue or a dequeue is one store or load in the
//! ring and one increment, as in DPDK's `rte_sched` queues. Memory is therefore the sum of
//! the flows' packet limits; the table's capacity bounds the packets queued at once over
//! all flows (the scheduler-wide limit of `tc`'s qdiscs).
//!
//! A scheduler that keeps the packets itself (FIFO keeps one queue in arrival order) uses
//! the table in *accounting* mode ([`FlowTable::accounting`]): flows, limits and counters
//! work the same, through [`FlowTable::count_in`] and [`FlowTable::count_out`], and no
//! per-flow ring is allocated.
//!
//! # The head packet
//!
//! A flow's oldest packet is not in its ring but in its entry (`front`), and the ring holds
//! the others. Every algorithm reads the head before it decides (its length for a deficit
//! or a finish time, or the packet itself to send it), and with thousands of flows the
//! entry and the ring slot are both cold: from the ring, a dequeue waited for the entry,
//! then for the slot its read position names, then the caller for the packet's buffer,
//! three misses in a row where dummynet's queue points at its first mbuf (two). From the
//! entry, the decision and the packet come with the entry's line, and the next packet's
//! move up from the ring is a load whose address the entry already gave, which overlaps
//! with the caller's use of the packet. (DRR on 32k flows: 21-22 ns a pair against 28-29,
//! docs/PERFORMANCE.md "Per-flow cost".) An enqueue into an empty flow writes `front`
//! only.
//!
//! # Layout
//!
//! A flow is split in two. The hot part ([`FlowEntry`], `repr(C)`) holds what an enqueue
//! and a dequeue touch: in its first 64 bytes the ring, its read position, the backlog,
//! the handle, the packet-size and packet-count limits, the weight, the room left under
//! the byte limit and the bytes sent; then the head packet and its tag (8 bytes for a
//! buffer index and a length, 24 for a [`crate::Desc`], 40 for the engine's descriptor,
//! nothing in accounting mode, whose tables are of the uninhabited [`NoPacket`]);
//! then the algorithm's state `S`. The cold part (byte limit as configured, priority, drop
//! counters: 72 bytes) lives in a parallel array and is read only by control operations,
//! drops and strict-priority policies. So an admission reads only the entry's first cache
//! line: with 32k flows an enqueue+dequeue pair takes about half an L1 miss fewer than with
//! an 80-byte entry whose second line held the byte limit (see docs/PERFORMANCE.md, "Flow
//! table cost"). A dequeue reads the line of the head packet too, which the algorithms'
//! state shares.
//!
//! # Counters
//!
//! `head` counts the packets ever sent by the flow (it is also the ring's read position)
//! and `queued` its backlog, so the write position is `head + queued`. Bytes are counted as
//! the bytes sent and the *room* left under the byte limit (`limit - backlog`, signed: a
//! lowered limit may leave it negative), so that admission is one compare, `len <= room`,
//! and the byte backlog is `limit - room`. The table itself counts only the packets queued
//! over all flows (its capacity check) and what removed flows had sent; the totals of
//! `tc -s` are sums over the flows, computed when asked. An enqueue updates three counters
//! (`queued`, `room`, the table's count) and a dequeue five (the same and `head`,
//! `sent_bytes`), all in the flow's first cache line or the table's.
//!
//! # Handles
//!
//! Each entry stores its own [`FlowId`] (index and generation), so resolving a handle is
//! one equality test against the entry its masked index selects: a handle whose index is
//! out of range selects some other entry, whose stored index differs.
//!
//! # Indexing
//!
//! The flow array and every ring have power-of-two lengths and are indexed through a mask:
//! for the indices the table hands out the mask changes nothing, and it proves to the
//! compiler that the index is in bounds, so the data path carries no bounds checks and no
//! `unsafe`.
//!
//! # Invariants
//!
//! - For every flow, `front` holds its oldest queued packet (`None` when it has none), the
//!   ring entries at positions `head + 1..head + queued` (mod its length) hold the others,
//!   oldest first, and every other ring entry is `None`; `queued` never exceeds
//!   `limit_pkts` at the time of an enqueue, nor the ring length.
//! - `room_bytes == min(limit_bytes, i64::MAX) - backlog bytes` (the backlog is below
//!   2^31 packets of at most 2^20 bytes, so it never overflows).
//! - The table's `queued` is the sum of the flows' backlogs and never exceeds the capacity.
//! - A flow entry is live exactly when its generation is odd, and then its stored handle's
//!   index is its own; entries never handed out have generation 0, so no [`FlowId`]
//!   (always odd) matches them.

/// The [`crate::Scheduler`] queries that every implementation answers from its flow table
/// (`backlog`, `is_empty`, `flow_params`, `flow_stats`, `flows`, `stats`), written once:
/// `table_queries!(field, counters)` inside an `impl Scheduler` block, `field` naming the
/// [`FlowTable`] and `counters` a function of `&Self` giving the algorithm's own counters.
macro_rules! table_queries {
    ($table:ident, $counters:expr) => {
        fn backlog(&self) -> $crate::stats::Backlog {
            self.$table.backlog()
        }

        #[inline(always)]
        fn is_empty(&self) -> bool {
            self.$table.queued() == 0
        }

        fn flow_params(&self, flow: $crate::flow::FlowId) -> Option<$crate::flow::FlowParams> {
            self.$table.params_of(flow)
        }

        fn flow_stats(&self, flow: $crate::flow::FlowId) -> Option<$crate::stats::FlowStats> {
            self.$table.stats_of(flow)
        }

        fn flows(&self) -> Vec<$crate::flow::FlowId> {
            self.$table.ids()
        }

        fn stats(&self) -> $crate::stats::SchedStats {
            let counters: fn(&Self) -> Vec<(&'static str, u64)> = $counters;
            self.$table.sched_stats(counters(self))
        }
    };
}
pub(crate) use table_queries;

use crate::error::FlowError;
use crate::flow::{FlowId, FlowParams};
use crate::packet::Packet;
use crate::stats::{Backlog, DropCounts, DropReason, FlowStats, SchedStats};

/// The packet type of a table in accounting mode ([`FlowTable::accounting`]), which stores
/// no packet: uninhabited, so that the head-packet field of its entries takes no room and
/// an entry is its 64 bytes of counters and limits.
pub(crate) enum NoPacket {}

impl Packet for NoPacket {
    fn wire_len(&self) -> u32 {
        match *self {}
    }
}

/// End-of-list marker for flow indices (used by the algorithms' lists).
pub const NIL: u32 = u32::MAX;

/// Most flows, and most packets, one scheduler holds (indices stay clear of [`NIL`]).
pub const MAX_FLOWS: u32 = 1 << 31;

/// A flow's queue: a power-of-two ring of packets and their tags.
type Ring<P, G> = Box<[Option<(P, G)>]>;

fn new_ring<P, G>(limit_pkts: u32) -> Ring<P, G> {
    (0..limit_pkts.max(1).next_power_of_two())
        .map(|_| None)
        .collect()
}

/// The byte limit as the room counter sees it (`u64::MAX`, no limit, stays far above any
/// backlog).
fn room_limit(limit_bytes: u64) -> i64 {
    i64::try_from(limit_bytes).unwrap_or(i64::MAX)
}

/// The hot part of one flow: 64 bytes of counters and limits, in the order an enqueue reads
/// them, then the head packet, then the algorithm's state (checked by a test).
#[repr(C)]
struct FlowEntry<P, S, G> {
    ring: Ring<P, G>,
    /// Packets ever sent: the ring's read position.
    head: u64,
    /// The flow's handle; its generation is odd while the flow exists, bumped on creation
    /// and on removal.
    id: FlowId,
    /// Packets queued.
    queued: u32,
    max_len: u32,
    limit_pkts: u32,
    weight: u32,
    /// Bytes that may still join: `min(limit_bytes, i64::MAX)` minus the bytes queued.
    room_bytes: i64,
    /// Bytes ever sent.
    sent_bytes: u64,
    /// The head packet and its tag, out of the ring (see "The head packet" in the module
    /// docs); `None` when the flow is empty.
    front: Option<(P, G)>,
    st: S,
}

/// The cold part of one flow.
#[derive(Clone, Copy, Default)]
struct FlowCold {
    limit_bytes: u64,
    priority: u8,
    drops: DropCounts,
}

impl<P, S: Default, G> FlowEntry<P, S, G> {
    /// Whether the head packet is kept in `front` (a handle of at most 24 bytes with its
    /// tag: a buffer index and a length, 8; a [`crate::Desc`], 24) or, like the others, in
    /// the ring (a larger one, as the engine's 40-byte descriptor: moving it in and out of
    /// `front` costs more copying than the miss it saves; see "The head packet").
    const FRONT: bool = std::mem::size_of::<Option<(P, G)>>() <= 24;

    /// Ring position of the oldest packet the ring holds.
    #[inline(always)]
    fn ring_first(&self) -> u64 {
        self.head + u64::from(Self::FRONT)
    }

    /// The head packet and its tag, if one is queued.
    #[inline(always)]
    fn head(&self) -> Option<&(P, G)> {
        if Self::FRONT {
            self.front.as_ref()
        } else {
            slot(&self.ring, self.head).as_ref()
        }
    }

    fn new(id: FlowId, p: &FlowParams, ring: Ring<P, G>) -> Self {
        Self {
            ring,
            head: 0,
            id,
            queued: 0,
            max_len: p.max_len,
            limit_pkts: p.limit_pkts,
            weight: p.weight,
            room_bytes: room_limit(p.limit_bytes),
            sent_bytes: 0,
            front: None,
            st: S::default(),
        }
    }

    /// Length of the head packet, if one is queued.
    #[inline(always)]
    fn head_len(&self) -> Option<u32>
    where
        P: Packet,
    {
        self.head().map(|(p, _)| p.wire_len())
    }

    /// Bytes queued, given the flow's configured byte limit.
    fn backlog_bytes(&self, limit_bytes: u64) -> u64 {
        (room_limit(limit_bytes) - self.room_bytes) as u64
    }
}

/// Slot of position `pos` in a non-empty power-of-two array, masked by the length.
#[inline(always)]
fn at<T>(a: &[T], pos: u64) -> usize {
    pos as usize & a.len().wrapping_sub(1)
}

/// `&a[pos mod len]` for a non-empty power-of-two array `a`. Indexing the prefix `..=mask`
/// with a masked index lets the compiler drop the bounds check (one test that `a` is not
/// empty remains), however it narrows the index arithmetic.
#[inline(always)]
fn slot<T>(a: &[T], pos: u64) -> &T {
    let m = a.len().wrapping_sub(1);
    &a[..=m][pos as usize & m]
}

/// Mutable [`slot`].
#[inline(always)]
fn slot_mut<T>(a: &mut [T], pos: u64) -> &mut T {
    let m = a.len().wrapping_sub(1);
    &mut a[..=m][pos as usize & m]
}

/// What [`FlowTable::pop`] took off a flow.
#[derive(Debug)]
pub struct Popped<P, G> {
    /// The packet.
    pub pkt: P,
    /// Its tag.
    pub tag: G,
    /// The flow's handle.
    pub id: FlowId,
    /// Whether the flow still has packets.
    pub more: bool,
}

/// What the table counts beyond its flows.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    /// Packets queued over all flows.
    queued: u64,
    /// Packets and bytes sent by flows since removed.
    retired_pkts: u64,
    retired_bytes: u64,
}

/// Flows, their queues, limits and counters, with per-flow algorithm state `S` and an
/// optional per-packet tag `G` (for algorithms that stamp packets at enqueue).
pub struct FlowTable<P, S, G = ()> {
    /// Power-of-two length (at least 1); indices `>= used` were never handed out.
    flows: Vec<FlowEntry<P, S, G>>,
    used: u32,
    /// Cold per-flow fields, parallel to `flows` up to `used`.
    cold: Vec<FlowCold>,
    free_flows: Vec<u32>,
    live_flows: u32,
    capacity: u32,
    totals: Totals,
    drops: DropCounts,
    /// Whether flows' packets are kept in their rings (false: accounting only).
    store: bool,
}

/// The handle no live flow has (generation 0).
const NO_FLOW: FlowId = FlowId::new(0, 0);

impl<P: Packet, S: Default, G: Copy + Default> FlowTable<P, S, G> {
    /// A table that holds at most `capacity` queued packets (`1..=2^31`) over all flows.
    pub fn with_capacity(capacity: u32) -> Self {
        Self::new(capacity, true)
    }

    /// A table that counts and limits packets per flow but keeps none: the caller stores
    /// them and reports each one with [`Self::count_in`] and [`Self::count_out`].
    pub fn accounting(capacity: u32) -> Self {
        Self::new(capacity, false)
    }

    fn new(capacity: u32, store: bool) -> Self {
        assert!((1..=MAX_FLOWS).contains(&capacity), "capacity out of range");
        Self {
            store,
            // One never-used entry, so that the array is never empty and masks are valid.
            flows: vec![FlowEntry::new(NO_FLOW, &FlowParams::default(), new_ring(1))],
            used: 0,
            cold: Vec::new(),
            free_flows: Vec::new(),
            live_flows: 0,
            capacity,
            totals: Totals::default(),
            drops: DropCounts::default(),
        }
    }

    /// Packets the table holds at most.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    #[inline(always)]
    fn e(&self, f: u32) -> &FlowEntry<P, S, G> {
        slot(&self.flows, u64::from(f))
    }

    #[inline(always)]
    fn e_mut(&mut self, f: u32) -> &mut FlowEntry<P, S, G> {
        slot_mut(&mut self.flows, u64::from(f))
    }

    /// Creates a flow (parameters already validated) and returns its index.
    pub fn add(&mut self, params: FlowParams) -> Result<u32, FlowError> {
        let f = if let Some(f) = self.free_flows.pop() {
            f
        } else {
            if self.used >= MAX_FLOWS {
                return Err(FlowError::TooManyFlows { max: MAX_FLOWS });
            }
            if self.used as usize == self.flows.len() {
                let len = self.flows.len() * 2;
                self.flows.resize_with(len, || {
                    FlowEntry::new(NO_FLOW, &FlowParams::default(), new_ring(1))
                });
            }
            self.cold.push(FlowCold::default());
            self.used += 1;
            self.used - 1
        };
        let gen = self.e(f).id.generation().wrapping_add(1) | 1;
        let ring = new_ring(if self.store { params.limit_pkts } else { 1 });
        *self.e_mut(f) = FlowEntry::new(FlowId::new(f, gen), &params, ring);
        self.cold[f as usize] = FlowCold {
            limit_bytes: params.limit_bytes,
            priority: params.priority,
            drops: DropCounts::default(),
        };
        self.live_flows += 1;
        Ok(f)
    }

    /// Removes flow `f` and returns its queued packets, oldest first. They are counted as
    /// drops with reason [`DropReason::FlowRemoved`]. (Storing mode.)
    pub fn remove(&mut self, f: u32) -> Vec<P> {
        debug_assert!(self.store);
        let e = self.e_mut(f);
        let mut out = Vec::with_capacity(e.queued as usize);
        // The packets are taken, not sent: the read position and counters stay, so that
        // `retire` purges them.
        out.extend(e.front.take().map(|(pkt, _)| pkt));
        for pos in e.ring_first()..e.head + u64::from(e.queued) {
            if let Some((pkt, _)) = slot_mut(&mut e.ring, pos).take() {
                out.push(pkt);
            }
        }
        self.retire(f);
        out
    }

    /// Removes flow `f`, whose queued packets the caller holds and hands back; they are
    /// counted as drops with reason [`DropReason::FlowRemoved`]. (Accounting mode.)
    pub fn remove_counted(&mut self, f: u32) {
        debug_assert!(!self.store);
        self.retire(f);
    }

    /// Counts flow `f`'s backlog as purged and frees its slot.
    fn retire(&mut self, f: u32) {
        let e = self.e_mut(f);
        let (pkts, sent_pkts, sent_bytes) = (u64::from(e.queued), e.head, e.sent_bytes);
        e.id = FlowId::new(f, e.id.generation().wrapping_add(1) & !1);
        e.st = S::default();
        e.ring = new_ring(1);
        e.front = None;
        e.queued = 0;
        self.totals.queued -= pkts;
        self.totals.retired_pkts += sent_pkts;
        self.totals.retired_bytes += sent_bytes;
        self.drops.add(DropReason::FlowRemoved, pkts);
        self.free_flows.push(f);
        self.live_flows -= 1;
    }

    /// The index of a live flow, or `None` for a stale or foreign handle.
    #[inline(always)]
    pub fn resolve(&self, id: FlowId) -> Option<u32> {
        let f = id.index();
        // The masked entry stores its own index: a foreign index cannot match it.
        (self.e(f).id == id).then_some(f)
    }

    /// The handle of live flow `f`.
    #[inline(always)]
    pub fn id(&self, f: u32) -> FlowId {
        self.e(f).id
    }

    /// Handles of all live flows, by index.
    pub fn ids(&self) -> Vec<FlowId> {
        (0..self.used)
            .filter(|&f| self.is_live(f))
            .map(|f| self.id(f))
            .collect()
    }

    /// Number of live flows.
    pub fn live(&self) -> u32 {
        self.live_flows
    }

    /// Number of flow indices handed out so far (an upper bound on live indices).
    pub fn slots(&self) -> u32 {
        self.used
    }

    /// Whether `f` is a live flow.
    pub fn is_live(&self, f: u32) -> bool {
        f < self.used && self.e(f).id.generation() & 1 == 1
    }

    /// Parameters of flow `f`.
    pub fn params(&self, f: u32) -> FlowParams {
        let (e, c) = (self.e(f), &self.cold[f as usize]);
        FlowParams {
            weight: e.weight,
            max_len: e.max_len,
            limit_pkts: e.limit_pkts,
            limit_bytes: c.limit_bytes,
            priority: c.priority,
        }
    }

    /// Replaces the parameters of flow `f` (already validated). Queued packets stay, even if
    /// they exceed the new limits; new arrivals see the new limits. A larger packet limit
    /// reallocates the flow's ring (the packets keep their order).
    pub fn set_params(&mut self, f: u32, params: FlowParams) {
        let store = self.store;
        let c = &mut self.cold[f as usize];
        let old_limit = std::mem::replace(&mut c.limit_bytes, params.limit_bytes);
        c.priority = params.priority;
        let e = self.e_mut(f);
        if store && params.limit_pkts as usize > e.ring.len() {
            let mut ring = new_ring(params.limit_pkts);
            for pos in e.ring_first()..e.head + u64::from(e.queued) {
                let old = at(&e.ring, pos);
                ring[at(&ring, pos)] = e.ring[old].take();
            }
            e.ring = ring;
        }
        let backlog = e.backlog_bytes(old_limit);
        e.room_bytes = room_limit(params.limit_bytes) - backlog as i64;
        e.max_len = params.max_len;
        e.limit_pkts = params.limit_pkts;
        e.weight = params.weight;
    }

    /// Weight of flow `f`.
    #[inline(always)]
    pub fn weight(&self, f: u32) -> u32 {
        self.e(f).weight
    }

    /// Strict-priority band of flow `f`.
    #[inline(always)]
    pub fn priority(&self, f: u32) -> u8 {
        self.cold[f as usize].priority
    }

    /// Algorithm state of flow `f`.
    #[inline(always)]
    pub fn st(&self, f: u32) -> &S {
        &self.e(f).st
    }

    /// Mutable algorithm state of flow `f`.
    #[inline(always)]
    pub fn st_mut(&mut self, f: u32) -> &mut S {
        &mut self.e_mut(f).st
    }

    /// Head packet length, weight and mutable algorithm state of flow `f`, in one look-up
    /// (what a round-robin visit needs).
    #[inline(always)]
    pub fn visit(&mut self, f: u32) -> (Option<u32>, u32, &mut S) {
        let e = self.e_mut(f);
        (e.head_len(), e.weight, &mut e.st)
    }

    /// Whether flow `f` has queued packets.
    #[inline(always)]
    pub fn is_backlogged(&self, f: u32) -> bool {
        self.e(f).queued != 0
    }

    /// Backlog of flow `f`.
    #[inline(always)]
    pub fn flow_backlog(&self, f: u32) -> Backlog {
        let e = self.e(f);
        Backlog {
            pkts: u64::from(e.queued),
            bytes: e.backlog_bytes(self.cold[f as usize].limit_bytes),
        }
    }

    /// Length of the head packet of flow `f`, if any.
    #[inline(always)]
    pub fn head_len(&self, f: u32) -> Option<u32> {
        self.e(f).head_len()
    }

    /// Tag of the head packet of flow `f`, if any.
    #[inline(always)]
    pub fn head_tag(&self, f: u32) -> Option<G> {
        self.e(f).head().map(|&(_, g)| g)
    }

    /// Resolves `id` and checks whether a packet of `len` bytes may join it, without
    /// counting anything. On success returns the flow index and whether the flow was
    /// empty; on refusal the reason, and the flow index when the flow exists.
    #[inline(always)]
    pub fn admit(&self, id: FlowId, len: u32) -> Result<(u32, bool), (Option<u32>, DropReason)> {
        let f = id.index();
        let e = self.e(f);
        if e.id != id {
            return Err((None, DropReason::UnknownFlow));
        }
        // All tests at once, one branch; the reason is worked out off the fast path.
        let ok = (len.wrapping_sub(1) < e.max_len)
            & (e.queued < e.limit_pkts)
            & (i64::from(len) <= e.room_bytes)
            & (self.totals.queued < u64::from(self.capacity));
        if ok {
            Ok((f, e.queued == 0))
        } else {
            Err((Some(f), self.refusal(f, len)))
        }
    }

    /// Why [`Self::admit`] refused, in the order of the checks.
    #[cold]
    #[inline(never)]
    fn refusal(&self, f: u32, len: u32) -> DropReason {
        let e = self.e(f);
        if len == 0 {
            DropReason::EmptyPacket
        } else if len > e.max_len {
            DropReason::PacketTooLong
        } else if e.queued >= e.limit_pkts {
            DropReason::FlowPacketLimit
        } else if i64::from(len) > e.room_bytes {
            DropReason::FlowByteLimit
        } else {
            DropReason::SchedulerFull
        }
    }

    /// Counts a drop, against flow `f` too when it exists.
    #[cold]
    #[inline(never)]
    pub fn count_drop(&mut self, f: Option<u32>, reason: DropReason) {
        self.drops.add(reason, 1);
        if let Some(f) = f {
            self.cold[f as usize].drops.add(reason, 1);
        }
    }

    /// Appends a packet to flow `f`. The caller has checked [`Self::admit`].
    #[inline(always)]
    pub fn push(&mut self, f: u32, pkt: P, tag: G) {
        let len = i64::from(pkt.wire_len());
        let e = self.e_mut(f);
        debug_assert!((e.queued as usize) <= e.ring.len(), "push without admit");
        if FlowEntry::<P, S, G>::FRONT && e.queued == 0 {
            e.front = Some((pkt, tag));
        } else {
            *slot_mut(&mut e.ring, e.head + u64::from(e.queued)) = Some((pkt, tag));
        }
        e.queued += 1;
        e.room_bytes -= len;
        self.totals.queued += 1;
    }

    /// Counts a packet of `len` bytes into flow `f`, which the caller stores. The caller has
    /// checked [`Self::admit`]. (Accounting mode.)
    #[inline(always)]
    pub fn count_in(&mut self, f: u32, len: u32) {
        debug_assert!(!self.store);
        let e = self.e_mut(f);
        e.queued += 1;
        e.room_bytes -= i64::from(len);
        self.totals.queued += 1;
    }

    /// Counts a packet of `len` bytes out of flow `f` as sent, and returns the flow's
    /// handle. (Accounting mode.)
    #[inline(always)]
    pub fn count_out(&mut self, f: u32, len: u32) -> FlowId {
        debug_assert!(!self.store);
        let e = self.e_mut(f);
        debug_assert!(e.queued != 0, "count_out of an empty flow");
        e.head += 1;
        e.queued -= 1;
        e.room_bytes += i64::from(len);
        e.sent_bytes += u64::from(len);
        let id = e.id;
        self.totals.queued -= 1;
        id
    }

    /// Removes the head packet of flow `f` (which must be backlogged), counting it as sent.
    #[inline(always)]
    pub fn pop(&mut self, f: u32) -> Popped<P, G> {
        let e = self.e_mut(f);
        let front = FlowEntry::<P, S, G>::FRONT;
        // An empty flow's head is `None`.
        let head = if front {
            e.front.take()
        } else {
            slot_mut(&mut e.ring, e.head).take()
        };
        let Some((pkt, tag)) = head else { empty_pop(f) };
        let len = pkt.wire_len();
        e.head += 1;
        e.queued -= 1;
        // The next packet moves up from the ring: a load whose address the entry gives,
        // which the processor overlaps with the caller's use of `pkt` (the packet's own
        // buffer) instead of chaining the two.
        if front && e.queued != 0 {
            e.front = slot_mut(&mut e.ring, e.head).take();
        }
        e.room_bytes += i64::from(len);
        e.sent_bytes += u64::from(len);
        let more = e.queued != 0;
        let id = e.id;
        self.totals.queued -= 1;
        Popped { pkt, tag, id, more }
    }

    /// Packets queued over all flows: O(1).
    #[inline(always)]
    pub fn queued(&self) -> u64 {
        self.totals.queued
    }

    /// Backlog of the whole table. The byte count sums the live flows: O(flows).
    pub fn backlog(&self) -> Backlog {
        Backlog {
            pkts: self.totals.queued,
            bytes: self
                .live_entries()
                .map(|(e, c)| e.backlog_bytes(c.limit_bytes))
                .sum(),
        }
    }

    fn live_entries(&self) -> impl Iterator<Item = (&FlowEntry<P, S, G>, &FlowCold)> {
        self.flows[..self.used as usize]
            .iter()
            .zip(&self.cold)
            .filter(|(e, _)| e.id.generation() & 1 == 1)
    }

    /// Counters of flow `f`.
    pub fn flow_stats(&self, f: u32) -> FlowStats {
        let e = self.e(f);
        FlowStats {
            sent_pkts: e.head,
            sent_bytes: e.sent_bytes,
            drops: self.cold[f as usize].drops,
            backlog: self.flow_backlog(f),
        }
    }

    /// Packets and bytes sent, and drops, of the whole table: sums over the flows, O(flows).
    pub fn totals(&self) -> (u64, u64, DropCounts) {
        let (pkts, bytes) = self.live_entries().fold(
            (self.totals.retired_pkts, self.totals.retired_bytes),
            |(p, b), (e, _)| (p + e.head, b + e.sent_bytes),
        );
        (pkts, bytes, self.drops)
    }

    /// The index of live flow `id`, or the error naming it.
    pub fn lookup(&self, id: FlowId) -> Result<u32, FlowError> {
        self.resolve(id).ok_or(FlowError::UnknownFlow(id))
    }

    /// Parameters of flow `id` ([`crate::Scheduler::flow_params`]).
    pub fn params_of(&self, id: FlowId) -> Option<FlowParams> {
        self.resolve(id).map(|f| self.params(f))
    }

    /// Counters of flow `id` ([`crate::Scheduler::flow_stats`]).
    pub fn stats_of(&self, id: FlowId) -> Option<FlowStats> {
        self.resolve(id).map(|f| self.flow_stats(f))
    }

    /// Counters of the whole table with the algorithm's own ([`crate::Scheduler::stats`]).
    pub fn sched_stats(&self, algorithm: Vec<(&'static str, u64)>) -> SchedStats {
        let (sent_pkts, sent_bytes, drops) = self.totals();
        SchedStats {
            flows: self.live_flows,
            sent_pkts,
            sent_bytes,
            drops,
            backlog: self.backlog(),
            algorithm,
        }
    }
}

#[cold]
#[inline(never)]
fn empty_pop(f: u32) -> ! {
    panic!("pop from empty flow {f}: the policy selected a flow with no packets")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Desc;

    fn table(cap: u32) -> FlowTable<Desc, (), ()> {
        FlowTable::with_capacity(cap)
    }

    #[test]
    fn queues_are_fifo_and_share_the_capacity() {
        let mut t = table(4);
        let a = t.add(FlowParams::default()).unwrap();
        let b = t.add(FlowParams::default()).unwrap();
        for i in 0..2 {
            t.admit(t.id(a), 100).unwrap();
            t.push(a, Desc::new(i, 100), ());
            t.admit(t.id(b), 200).unwrap();
            t.push(b, Desc::new(10 + i, 200), ());
        }
        assert_eq!(
            t.admit(t.id(a), 100),
            Err((Some(a), DropReason::SchedulerFull))
        );
        assert_eq!(
            t.backlog(),
            Backlog {
                pkts: 4,
                bytes: 600
            }
        );
        assert_eq!(
            t.flow_backlog(b),
            Backlog {
                pkts: 2,
                bytes: 400
            }
        );
        assert_eq!(t.head_len(b), Some(200));
        assert_eq!(t.pop(a).pkt.cookie, 0);
        assert_eq!(t.pop(a).pkt.cookie, 1);
        assert!(!t.is_backlogged(a));
        assert_eq!(t.head_len(a), None);
        // the room freed counts for the other flow
        t.admit(t.id(b), 200).unwrap();
        t.push(b, Desc::new(12, 200), ());
        assert_eq!(t.pop(b).pkt.cookie, 10);
        assert_eq!(t.flow_stats(a).sent_bytes, 200);
        assert_eq!(t.totals().0, 3);
    }

    #[test]
    fn capacity_need_not_be_a_power_of_two() {
        let mut t = table(3);
        let a = t.add(FlowParams::default()).unwrap();
        for i in 0..3 {
            t.admit(t.id(a), 1).unwrap();
            t.push(a, Desc::new(i, 1), ());
        }
        assert_eq!(
            t.admit(t.id(a), 1),
            Err((Some(a), DropReason::SchedulerFull))
        );
        assert_eq!(t.capacity(), 3);
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
        assert_eq!(t.admit(t.id(f), 0), Err((Some(f), DropReason::EmptyPacket)));
        assert_eq!(
            t.admit(t.id(f), 1001),
            Err((Some(f), DropReason::PacketTooLong))
        );
        t.push(f, Desc::new(0, 1000), ());
        assert_eq!(
            t.admit(t.id(f), 600),
            Err((Some(f), DropReason::FlowByteLimit))
        );
        t.push(f, Desc::new(1, 500), ());
        assert_eq!(
            t.admit(t.id(f), 1),
            Err((Some(f), DropReason::FlowPacketLimit))
        );
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
        assert_eq!(
            t.flow_stats(g),
            FlowStats::default(),
            "counters start afresh"
        );
    }

    #[test]
    fn raising_the_packet_limit_keeps_the_queue_in_order() {
        let mut t = table(64);
        let f = t.add(FlowParams::default().with_limit_pkts(2)).unwrap();
        // wrap the ring first
        for i in 0..3 {
            t.push(f, Desc::new(i, 1), ());
            assert_eq!(t.pop(f).pkt.cookie, i);
        }
        t.push(f, Desc::new(3, 1), ());
        t.push(f, Desc::new(4, 1), ());
        assert_eq!(
            t.admit(t.id(f), 1),
            Err((Some(f), DropReason::FlowPacketLimit))
        );
        t.set_params(f, FlowParams::default().with_limit_pkts(5));
        for i in 5..8 {
            t.admit(t.id(f), 1).unwrap();
            t.push(f, Desc::new(i, 1), ());
        }
        let out: Vec<_> = (0..5).map(|_| t.pop(f).pkt.cookie).collect();
        assert_eq!(out, [3, 4, 5, 6, 7]);
        assert_eq!(t.flow_stats(f).sent_pkts, 8);
    }

    #[test]
    fn foreign_handles_do_not_alias_through_the_mask() {
        let mut t = table(8);
        let a = t.add(FlowParams::default()).unwrap();
        let _b = t.add(FlowParams::default()).unwrap();
        // index 2 masks to 0 in a table of 2 entries, with flow 0's generation
        let forged = FlowId::new(a + 2, t.id(a).generation());
        assert_eq!(t.resolve(forged), None);
        assert_eq!(t.resolve(FlowId::new(NIL, 1)), None);
        assert_eq!(t.admit(forged, 1), Err((None, DropReason::UnknownFlow)));
    }

    #[test]
    fn the_counters_and_limits_of_a_flow_are_one_cache_line() {
        // what an admission reads, then the head packet, then the algorithm's state
        type E<P, S> = FlowEntry<P, S, ()>;
        assert_eq!(std::mem::offset_of!(E<Desc, u64>, front), 64);
        // A small handle (a buffer index and a length, as the benchmarks' packets) adds 8
        // bytes; the descriptor 24.
        #[allow(dead_code)]
        struct Small(std::num::NonZeroU32, u32);
        impl Packet for Small {
            fn wire_len(&self) -> u32 {
                self.1
            }
        }
        assert_eq!(std::mem::size_of::<Option<(Small, ())>>(), 8);
        assert_eq!(std::mem::offset_of!(E<Small, u64>, st), 72);
        assert_eq!(std::mem::offset_of!(E<Desc, u64>, st), 88);
        // A table in accounting mode stores no packet: its entries are the 64 bytes alone.
        assert_eq!(std::mem::size_of::<E<NoPacket, ()>>(), 64);
    }

    #[test]
    fn changing_the_byte_limit_keeps_the_byte_backlog() {
        let mut t = table(16);
        let f = t
            .add(
                FlowParams::default()
                    .with_max_len(1000)
                    .with_limit_bytes(3000),
            )
            .unwrap();
        for i in 0..3 {
            t.admit(t.id(f), 1000).unwrap();
            t.push(f, Desc::new(i, 1000), ());
        }
        // lowered below the backlog: the queued bytes stay, nothing more fits
        t.set_params(
            f,
            FlowParams::default()
                .with_max_len(1000)
                .with_limit_bytes(1000),
        );
        assert_eq!(t.flow_backlog(f).bytes, 3000);
        assert_eq!(
            t.admit(t.id(f), 1),
            Err((Some(f), DropReason::FlowByteLimit))
        );
        t.pop(f);
        t.pop(f);
        assert_eq!(
            t.admit(t.id(f), 1),
            Err((Some(f), DropReason::FlowByteLimit))
        );
        t.pop(f);
        assert_eq!(t.flow_backlog(f).bytes, 0);
        t.admit(t.id(f), 1000).unwrap();
        assert_eq!(
            t.admit(t.id(f), 1001),
            Err((Some(f), DropReason::PacketTooLong))
        );
        // no byte limit: u64::MAX reads back unchanged and never refuses
        t.push(f, Desc::new(9, 700), ());
        t.set_params(f, FlowParams::default().with_max_len(1000));
        assert_eq!(t.params(f).limit_bytes, u64::MAX);
        assert_eq!(t.flow_backlog(f).bytes, 700);
        t.admit(t.id(f), 1000).unwrap();
        assert_eq!(t.backlog().bytes, 700);
        assert_eq!(t.flow_stats(f).sent_bytes, 3000);
    }

    #[test]
    #[should_panic(expected = "pop from empty flow")]
    fn popping_an_empty_flow_is_a_loud_bug() {
        let mut t = table(8);
        let a = t.add(FlowParams::default()).unwrap();
        t.pop(a);
    }
}
