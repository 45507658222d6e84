//! Decision aggregation (PSPAT paper section 6.3.1): one scheduler decision for several
//! consecutive packets of one client and flow.
//!
//! When a packet's transmission time is very short (below 500 ns, say) there is no
//! measurable gain in scheduling each packet on its own, and the arbiter's cost is per
//! decision, not per byte. So a drain merges consecutive packets that one client sent to
//! one flow into an *aggregate*: the scheduler sees one packet whose length is the sum of
//! its members' (at most [`crate::EngineConfig::aggregate_bytes`], the bytes
//! `aggregate_ns` of link time carry, and at most the flow's `max_len`), and when it
//! chooses that packet, every member leaves at once, back to back, each charged to the
//! link on its own. Throughput is then counted in decisions per second and packets per
//! second apart; with aggregation off (the default) they are the same.
//!
//! State: the members of the aggregates in the scheduler (and of the one being built),
//! one FIFO per flow in arrival order, with each aggregate's member count beside its first
//! member once the scheduler accepted it; the aggregate being released, if a full TX
//! mailbox stopped its release part-way.
//!
//! Invariants, which make the counts line up with the scheduler's decisions without any
//! word of the packet descriptor:
//!
//! - an aggregate's members are stored when it is built, before it is offered to the
//!   scheduler, and are then the newest members of their flow: members of one flow are
//!   only appended, and an aggregate is offered before the next packet of its flow is
//!   stored. So a refused aggregate's members are the tail of its flow's list, from its
//!   first member on ([`Aggregator::refused`]);
//! - its member count is stored (in its first member) when the scheduler accepts it;
//! - the scheduler keeps each flow FIFO and drops nothing it has accepted (a refusal is
//!   always of the packet offered: `Service::enqueue`), so the aggregate it dequeues for a
//!   flow is that flow's oldest: its members are the flow's first `count` packets, the
//!   first of which holds `count` ([`Aggregator::dequeued`]).
//!
//! Aggregation is only offered with one algorithm on one link (`service::Single`); a
//! dummynet-style configuration refuses it (`Engine::start`).
//!
//! Memory: every member is a packet drained from a client mailbox whose slot stays
//! occupied until the packet is sent or dropped (`arbiter.rs`), so the members stored at
//! any moment, over all flows, are at most `T`, the total capacity of the client
//! mailboxes. One deque per flow would need `T` entries per flow never to grow (a flow's
//! members are bounded by neither its `limit_pkts`, which counts aggregates, nor one
//! mailbox, since every client can send to it): 1 MB a flow with 64 clients of 512-slot
//! mailboxes. So the flows' FIFOs are chains of [`CHUNK`]-member chunks from one pool
//! allocated when the engine starts, and the data path never allocates. A flow holding
//! `n` members spans fewer than `n / CHUNK + 2` chunks (a part-used chunk at each end;
//! an emptied chunk goes back at once), and no chunk is allocated without a member in it,
//! so the pool has `min(T, T / CHUNK + 2 * flows)` chunks of 580 bytes: 1.3 MB with those
//! 64 clients and 65 flows, 13 MB with 10,000 flows, 19 MB at most (a chunk per slot).
//!
//! Cost: O(1) per packet (a store into, or a read from, the next slot of a chunk; a chunk
//! taken or given back every [`CHUNK`] members, out of line) plus O(1) per aggregate.
//! Chunks rather than a linked list of members: following a link per member cost
//! `pspat bench arch --clients 1 --victim false --aggregate 1us` a fifth of its decisions
//! per second (median of 8 interleaved 1 s runs on the project's 2-vCPU VM: 47 against 60
//! million with per-flow deques); chunks are within a few percent of the deques (52
//! against 54 million, 12 runs), which is within that machine's run-to-run spread.

use pspat_io::Pkt;

/// Members per chunk of the pool.
const CHUNK: u32 = 16;
/// No slot or chunk: an empty flow, or a packet stored nowhere.
const NIL: u32 = u32::MAX;

/// An aggregate: the packet the scheduler sees and how many packets it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Aggregate {
    /// The first member, with `len` the sum of every member's length.
    pub(crate) head: Pkt,
    /// Member packets behind it, at least 1.
    pub(crate) members: u32,
    /// Slots of its first and last members (`NIL`: not stored, for a flow the engine
    /// does not have).
    first: u32,
    last: u32,
    /// Its flow's newest slot before it was opened (`NIL`: the flow was empty), where a
    /// refusal cuts the flow's FIFO.
    before: u32,
}

/// One flow's FIFO: the slots of its oldest and newest members (`NIL` when empty). Slot
/// `s` is entry `s % CHUNK` of chunk `s / CHUNK`; the slot after the last of a chunk is
/// the first of the chunk `Aggregator::link` names.
#[derive(Clone, Copy, Debug)]
struct FlowFifo {
    head: u32,
    tail: u32,
}

/// The aggregate being released: its flow and how many of its members are still to go.
#[derive(Clone, Copy, Debug)]
struct Releasing {
    flow: u32,
    left: u32,
}

/// Decision aggregation's state (see the module docs). Owned by the arbiter thread.
pub(crate) struct Aggregator {
    /// Byte budget of one decision; 0 = aggregation off (then nothing else is used).
    budget_bytes: u64,
    /// Per flow index (empty when off).
    flows: Vec<FlowFifo>,
    /// Per slot: the member stored there.
    pkts: Vec<Pkt>,
    /// Per slot: if it holds the first member of an accepted aggregate, its member count
    /// (stale in other slots, never read there).
    count: Vec<u32>,
    /// Per chunk: the next chunk of its flow's FIFO.
    link: Vec<u32>,
    /// Free chunks.
    free: Vec<u32>,
    /// Members stored.
    stored: u64,
    /// The aggregate being released, if its members have not all been handed on.
    releasing: Option<Releasing>,
}

impl Aggregator {
    /// Aggregation with a budget of `budget_bytes` per decision (0: off) for `flows` flows,
    /// with room for `capacity` members in all: the total capacity of the client
    /// mailboxes (see the module docs).
    pub(crate) fn new(budget_bytes: u64, flows: usize, capacity: usize) -> Self {
        let on = budget_bytes > 0;
        let chunks = if on {
            // Slots are numbered in 32 bits, NIL excluded.
            let most = (NIL / CHUNK) as usize;
            capacity
                .min(capacity.div_ceil(CHUNK as usize) + 2 * flows)
                .min(most)
        } else {
            0
        };
        let slots = chunks * CHUNK as usize;
        let empty = FlowFifo {
            head: NIL,
            tail: NIL,
        };
        Self {
            budget_bytes,
            flows: if on { vec![empty; flows] } else { Vec::new() },
            pkts: vec![Pkt::default(); slots],
            count: vec![0; slots],
            link: vec![NIL; chunks],
            // Taken from the end: chunk 0 first.
            free: (0..chunks as u32).rev().collect(),
            stored: 0,
            releasing: None,
        }
    }

    /// Whether aggregation is on.
    #[inline(always)]
    pub(crate) fn enabled(&self) -> bool {
        self.budget_bytes > 0
    }

    /// Starts an aggregate with `p`, just drained, and stores `p` as its first member.
    #[inline(always)]
    pub(crate) fn open(&mut self, p: Pkt) -> Aggregate {
        let Some(&FlowFifo { tail, .. }) = self.flows.get(p.flow as usize) else {
            return Aggregate {
                head: p,
                members: 1,
                first: NIL,
                last: NIL,
                before: NIL,
            };
        };
        let first = self.append(tail, p);
        if tail == NIL {
            self.flows[p.flow as usize].head = first;
        }
        // The flow's `tail` moves when the aggregate is accepted (a refusal cuts back to
        // `before`); nothing reads it meanwhile.
        Aggregate {
            head: p,
            members: 1,
            first,
            last: first,
            before: tail,
        }
    }

    /// Adds `p`, drained right after `agg`'s members from the same mailbox, to `agg` if it
    /// is of the same flow and fits both the budget and `flow_max` (the flow's largest
    /// packet); returns whether it did. If not, the caller offers `agg` to the scheduler
    /// before it [`Self::open`]s the next aggregate with `p` (the order the invariants
    /// need).
    #[inline(always)]
    pub(crate) fn join(&mut self, agg: &mut Aggregate, p: Pkt, flow_max: u32) -> bool {
        let len = u64::from(agg.head.len) + u64::from(p.len);
        if agg.head.flow == p.flow && len <= self.budget_bytes && len <= u64::from(flow_max) {
            agg.head.len += p.len;
            agg.members += 1;
            // (A flow the engine does not have admits no packet, so joins nothing.)
            if agg.first != NIL {
                agg.last = self.append(agg.last, p);
            }
            true
        } else {
            false
        }
    }

    /// Stores `p` in the slot after `last` (`NIL`: in a new FIFO); returns the slot.
    #[inline(always)]
    fn append(&mut self, last: u32, p: Pkt) -> u32 {
        if last == NIL || (last + 1) % CHUNK == 0 {
            return self.append_in_new_chunk(last, p);
        }
        let slot = last + 1;
        self.pkts[slot as usize] = p;
        self.stored += 1;
        slot
    }

    /// [`Self::append`] at a chunk's end or into an empty FIFO: `p` goes first in a chunk
    /// taken from the pool. Out of line: once per [`CHUNK`] members, and it may grow the
    /// pool, which the hot path must not inline.
    #[inline(never)]
    fn append_in_new_chunk(&mut self, last: u32, p: Pkt) -> u32 {
        let c = match self.free.pop() {
            Some(c) => c,
            None => self.grow(),
        };
        if last != NIL {
            self.link[(last / CHUNK) as usize] = c;
        }
        let slot = c * CHUNK;
        self.pkts[slot as usize] = p;
        self.stored += 1;
        slot
    }

    /// The pool is out of chunks: more members than the client mailboxes can hold, which
    /// the module docs argue cannot happen. Grows rather than lose a packet.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) -> u32 {
        debug_assert!(false, "more members than mailbox slots: {}", self.stored);
        let c = self.link.len();
        self.link.push(NIL);
        self.pkts.resize((c + 1) * CHUNK as usize, Pkt::default());
        self.count.resize((c + 1) * CHUNK as usize, 0);
        c as u32
    }

    /// The scheduler accepted `agg`: its count goes beside its first member, and it ends
    /// its flow's FIFO.
    #[inline]
    pub(crate) fn accepted(&mut self, agg: &Aggregate) {
        if agg.first != NIL {
            self.count[agg.first as usize] = agg.members;
            self.flows[agg.head.flow as usize].tail = agg.last;
        }
    }

    /// The scheduler refused `agg`: hands its members (the end of its flow's FIFO, from
    /// its first member on) to `discard`, oldest first, gives their chunks back (but the
    /// one it shares with the member before it), and returns how many it handed:
    /// `agg.members`, or 0 for a flow index the engine does not have (nothing is stored
    /// for it, and such an aggregate is its one packet: [`Self::join`] merges nothing into
    /// a flow whose largest packet is 0).
    pub(crate) fn refused(&mut self, agg: &Aggregate, mut discard: impl FnMut(Pkt)) -> u32 {
        if agg.first == NIL {
            return 0;
        }
        let shared = if agg.before == NIL {
            NIL
        } else {
            agg.before / CHUNK
        };
        let mut slot = agg.first;
        for i in 1..=agg.members {
            discard(self.pkts[slot as usize]);
            self.stored -= 1;
            if (slot + 1) % CHUNK == 0 || i == agg.members {
                // The chunk's last member of this aggregate.
                let c = slot / CHUNK;
                if c != shared {
                    self.free.push(c);
                }
                slot = self.link[c as usize].wrapping_mul(CHUNK);
            } else {
                slot += 1;
            }
        }
        let f = &mut self.flows[agg.head.flow as usize];
        f.tail = agg.before;
        if agg.before == NIL {
            f.head = NIL;
        }
        agg.members
    }

    /// The scheduler chose an aggregate of `flow` (its oldest): its members are released
    /// next, by [`Self::next_member`].
    #[inline]
    pub(crate) fn dequeued(&mut self, flow: u32) {
        let first = self.flows.get(flow as usize).map_or(NIL, |f| f.head);
        let count = if first == NIL {
            0
        } else {
            self.count[first as usize]
        };
        debug_assert!(count > 0, "flow {flow}: an aggregate with no count");
        self.releasing = (count > 0).then_some(Releasing { flow, left: count });
    }

    /// The next member of the aggregate being released, if any is left. Taking the last
    /// one ends the release.
    #[inline(always)]
    pub(crate) fn next_member(&mut self) -> Option<Pkt> {
        let r = self.releasing.as_mut()?;
        r.left -= 1;
        let flow = r.flow as usize;
        if r.left == 0 {
            self.releasing = None;
        }
        let f = &mut self.flows[flow];
        let slot = f.head;
        debug_assert!(slot != NIL, "flow {flow}: fewer members than counted");
        if slot == NIL {
            self.releasing = None;
            return None;
        }
        if slot == f.tail || (slot + 1) % CHUNK == 0 {
            self.leave_chunk(flow);
        } else {
            f.head = slot + 1;
        }
        self.stored -= 1;
        Some(self.pkts[slot as usize])
    }

    /// [`Self::next_member`] takes the last member of its chunk or of its flow: the flow's
    /// FIFO moves on to its next chunk (or empties), and the chunk goes back to the pool.
    /// Out of line, as [`Self::append_in_new_chunk`] (the member is read by the caller).
    #[inline(never)]
    fn leave_chunk(&mut self, flow: usize) {
        let f = &mut self.flows[flow];
        let c = f.head / CHUNK;
        if f.head == f.tail {
            f.head = NIL;
            f.tail = NIL;
        } else {
            f.head = self.link[c as usize] * CHUNK;
        }
        self.free.push(c);
    }

    /// Whether an aggregate's release is under way (members still to hand on).
    #[inline(always)]
    pub(crate) fn releasing(&self) -> bool {
        self.releasing.is_some()
    }

    /// Members still stored: behind aggregates in the scheduler or being released.
    pub(crate) fn members_left(&self) -> u64 {
        self.stored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(flow: u32, seq: u32, len: u32) -> Pkt {
        Pkt {
            len,
            client: 0,
            flow,
            seq,
            submit_ns: 0,
            depart_ns: 0,
        }
    }

    /// Builds aggregates from `pkts` as a drain does; `offer` says whether the scheduler
    /// takes each one.
    fn build(
        a: &mut Aggregator,
        pkts: &[Pkt],
        flow_max: u32,
        mut offer: impl FnMut(&Aggregate) -> bool,
    ) -> Vec<(Aggregate, Vec<Pkt>)> {
        let mut out = Vec::new();
        let mut finish = |a: &mut Aggregator, agg: Aggregate| {
            let mut dropped = Vec::new();
            if offer(&agg) {
                a.accepted(&agg);
            } else {
                let handed = a.refused(&agg, |m| dropped.push(m));
                assert_eq!(handed as usize, dropped.len());
            }
            out.push((agg, dropped));
        };
        let mut open: Option<Aggregate> = None;
        for &p in pkts {
            if let Some(agg) = open.as_mut() {
                if a.join(agg, p, flow_max) {
                    continue;
                }
                let done = *agg;
                finish(a, done);
            }
            open = Some(a.open(p));
        }
        if let Some(done) = open {
            finish(a, done);
        }
        out
    }

    fn release(a: &mut Aggregator, flow: u32) -> Vec<u32> {
        a.dequeued(flow);
        let mut seqs = Vec::new();
        while let Some(m) = a.next_member() {
            seqs.push(m.seq);
        }
        assert!(!a.releasing());
        seqs
    }

    #[test]
    fn off_stores_nothing() {
        let mut a = Aggregator::new(0, 4, 8);
        assert!(!a.enabled());
        let agg = a.open(pkt(1, 0, 100));
        assert_eq!(agg.members, 1);
        assert_eq!(a.members_left(), 0);
    }

    #[test]
    fn merges_one_flow_up_to_the_budget_and_the_flow_max() {
        let mut a = Aggregator::new(1000, 2, 8);
        let pkts: Vec<Pkt> = (0..7).map(|i| pkt(0, i, 300)).collect();
        let built = build(&mut a, &pkts, 1500, |_| true);
        let sizes: Vec<(u32, u32)> = built.iter().map(|(g, _)| (g.head.len, g.members)).collect();
        assert_eq!(sizes, [(900, 3), (900, 3), (300, 1)]);
        // The flow's max_len binds before the budget.
        let mut a = Aggregator::new(1000, 2, 8);
        let built = build(&mut a, &pkts[..4], 600, |_| true);
        assert!(built.iter().all(|(g, _)| g.members == 2));
    }

    #[test]
    fn another_flow_closes_the_aggregate() {
        let mut a = Aggregator::new(10_000, 2, 8);
        let pkts = [
            pkt(0, 0, 100),
            pkt(0, 1, 100),
            pkt(1, 2, 100),
            pkt(0, 3, 100),
        ];
        let built = build(&mut a, &pkts, 1500, |_| true);
        let shape: Vec<(u32, u32)> = built
            .iter()
            .map(|(g, _)| (g.head.flow, g.members))
            .collect();
        assert_eq!(shape, [(0, 2), (1, 1), (0, 1)]);
        assert_eq!(a.members_left(), 4);
        // The scheduler serves each flow FIFO, flows in any order.
        assert_eq!(release(&mut a, 1), [2]);
        assert_eq!(release(&mut a, 0), [0, 1]);
        assert_eq!(release(&mut a, 0), [3]);
        assert_eq!(a.members_left(), 0);
    }

    #[test]
    fn a_refused_aggregate_gives_back_its_own_members() {
        let mut a = Aggregator::new(250, 1, 8);
        let pkts: Vec<Pkt> = (0..6).map(|i| pkt(0, i, 100)).collect();
        // Aggregates of 2: the second one is refused.
        let mut n = 0;
        let built = build(&mut a, &pkts, 1500, |_| {
            n += 1;
            n != 2
        });
        let dropped: Vec<Vec<u32>> = built
            .iter()
            .map(|(_, d)| d.iter().map(|m| m.seq).collect())
            .collect();
        assert_eq!(dropped, [vec![], vec![2, 3], vec![]]);
        assert_eq!(release(&mut a, 0), [0, 1]);
        assert_eq!(release(&mut a, 0), [4, 5]);
        assert_eq!(a.members_left(), 0);
    }

    #[test]
    fn a_refused_first_aggregate_leaves_its_flow_empty() {
        let mut a = Aggregator::new(250, 2, 8);
        let pkts: Vec<Pkt> = (0..4).map(|i| pkt(1, i, 100)).collect();
        let mut n = 0;
        let built = build(&mut a, &pkts, 1500, |_| {
            n += 1;
            n != 1
        });
        assert_eq!(built[0].1.iter().map(|m| m.seq).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(a.members_left(), 2);
        assert_eq!(release(&mut a, 1), [2, 3]);
        assert_eq!(a.members_left(), 0);
        // The emptied list takes new members.
        build(&mut a, &[pkt(1, 4, 100)], 1500, |_| true);
        assert_eq!(release(&mut a, 1), [4]);
    }

    #[test]
    fn the_flows_share_one_pool_that_never_grows() {
        // Room for 6 members in all, used by three flows in turn, with refusals between:
        // each round fills the pool and empties it.
        let mut a = Aggregator::new(250, 3, 6);
        for round in 0..50u32 {
            let pkts: Vec<Pkt> = (0..6).map(|i| pkt(i % 3, round * 6 + i, 100)).collect();
            let mut n = 0;
            let built = build(&mut a, &pkts, 1500, |_| {
                n += 1;
                (n + round) % 4 != 0
            });
            let dropped: usize = built.iter().map(|(_, d)| d.len()).sum();
            assert_eq!(a.members_left() as usize, 6 - dropped);
            for (g, d) in &built {
                if d.is_empty() {
                    assert_eq!(release(&mut a, g.head.flow), [g.head.seq]);
                }
            }
            assert_eq!(a.members_left(), 0);
        }
        assert_eq!(a.link.len(), 6, "the pool grew");
    }

    /// Against an obviously correct model (a deque of members and one of counts per
    /// flow): aggregates of up to 7 members on 3 flows, a fifth of them refused, released
    /// flow by flow in a pseudo-random order, with at most as many members stored as the
    /// pool was sized for. Members cross chunk boundaries in every position, refusals cut
    /// inside chunks and at their ends, FIFOs empty and fill again.
    #[test]
    fn chunked_fifos_release_and_refuse_what_per_flow_deques_would() {
        use std::collections::VecDeque;
        const CAPACITY: usize = 60;
        let mut a = Aggregator::new(700, 3, CAPACITY);
        let chunks = a.link.len();
        let mut model: Vec<(VecDeque<u32>, VecDeque<u32>)> = vec![Default::default(); 3];
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut seq = 0;
        for _ in 0..5_000 {
            let stored: usize = model.iter().map(|m| m.0.len()).sum();
            assert_eq!(a.members_left() as usize, stored);
            if stored + 7 <= CAPACITY && next() % 3 != 0 {
                // A drain of one aggregate's worth, offered.
                let flow = (next() % 3) as u32;
                let n = 1 + next() % 7;
                let mut agg = a.open(pkt(flow, seq, 100));
                for k in 1..n as u32 {
                    assert!(a.join(&mut agg, pkt(flow, seq + k, 100), 1500));
                }
                let members: Vec<u32> = (seq..seq + n as u32).collect();
                seq += n as u32;
                if next() % 5 == 0 {
                    let mut dropped = Vec::new();
                    assert_eq!(a.refused(&agg, |m| dropped.push(m.seq)), n as u32);
                    assert_eq!(dropped, members);
                } else {
                    a.accepted(&agg);
                    model[flow as usize].0.extend(members);
                    model[flow as usize].1.push_back(n as u32);
                }
            } else if let Some(flow) = (0..3)
                .map(|k| (k + next() as usize) % 3)
                .find(|&f| !model[f].1.is_empty())
            {
                let (pkts, counts) = &mut model[flow];
                let want: Vec<u32> = pkts.drain(..counts.pop_front().unwrap() as usize).collect();
                assert_eq!(release(&mut a, flow as u32), want);
            }
        }
        assert_eq!(a.link.len(), chunks, "the pool grew");
    }

    #[test]
    fn a_flow_the_engine_does_not_have_stores_nothing_and_hands_nothing_back() {
        let mut a = Aggregator::new(10_000, 1, 8);
        // Flow 3 of 1: no largest packet (0), so nothing joins it.
        let mut agg = a.open(pkt(3, 0, 100));
        assert!(!a.join(&mut agg, pkt(3, 1, 100), 0));
        assert_eq!(a.members_left(), 0);
        assert_eq!(a.refused(&agg, |_| panic!("nothing stored")), 0);
    }

    #[test]
    fn a_release_resumes_where_it_stopped() {
        let mut a = Aggregator::new(10_000, 1, 8);
        let pkts: Vec<Pkt> = (0..3).map(|i| pkt(0, i, 100)).collect();
        build(&mut a, &pkts, 1500, |_| true);
        a.dequeued(0);
        assert_eq!(a.next_member().map(|m| m.seq), Some(0));
        // A full TX mailbox stops the release here; it is still under way.
        assert!(a.releasing());
        assert_eq!(a.next_member().map(|m| m.seq), Some(1));
        assert!(a.releasing());
        // The last member ends the release: no work is left for another spin.
        assert_eq!(a.next_member().map(|m| m.seq), Some(2));
        assert!(!a.releasing());
        assert_eq!(a.next_member(), None);
    }
}
