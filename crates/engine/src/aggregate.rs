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
//! one FIFO list per flow in arrival order, the first member of each aggregate carrying
//! the aggregate's member count once the scheduler accepted it; the aggregate being
//! released, if a full TX mailbox stopped its release part-way.
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
//! any moment, over all flows, are at most the total capacity of the client mailboxes.
//! The lists share one pool of that many entries, allocated when the engine starts; the
//! data path never allocates. (One deque per flow would need that capacity per flow to
//! never grow: a flow's members are bounded by neither its `limit_pkts`, which counts
//! aggregates, nor one mailbox, since every client can send to it. With 64 clients of
//! 512-slot mailboxes that is 32,640 entries of 40 bytes: 1.3 MB shared, 1.3 MB per flow
//! otherwise.)
//!
//! Cost: O(1) per packet (a list append and a pop) plus O(1) per aggregate.

use pspat_io::Pkt;

/// No entry: the end of a list, or a packet stored nowhere.
const NIL: u32 = u32::MAX;

/// An aggregate: the packet the scheduler sees and how many packets it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Aggregate {
    /// The first member, with `len` the sum of every member's length.
    pub(crate) head: Pkt,
    /// Member packets behind it, at least 1.
    pub(crate) members: u32,
    /// Pool entry of its first member (`NIL`: not stored, aggregation off or a flow the
    /// engine does not have).
    first: u32,
    /// Its flow's last entry before it was opened (`NIL`: none), where a refusal cuts
    /// the list.
    before: u32,
}

/// One member in the pool, linked to the next member of its flow (or, free, to the next
/// free entry).
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    pkt: Pkt,
    next: u32,
    /// In the first member of an accepted aggregate: its member count (0 elsewhere).
    count: u32,
}

/// One flow's members, oldest first: pool entries `head` to `tail` (`NIL` when none).
#[derive(Clone, Copy, Debug)]
struct FlowList {
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
    flows: Vec<FlowList>,
    /// Every flow's members, and the free entries (empty when off).
    pool: Vec<Entry>,
    /// First free entry of `pool` (`NIL`: none).
    free: u32,
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
        // Entries are numbered in 32 bits, NIL excluded.
        let capacity = if on { capacity.min(NIL as usize) } else { 0 };
        // Every entry free, each linked to the next.
        let pool = (1..=capacity)
            .map(|next| Entry {
                next: if next < capacity { next as u32 } else { NIL },
                ..Entry::default()
            })
            .collect();
        let empty = FlowList {
            head: NIL,
            tail: NIL,
        };
        Self {
            budget_bytes,
            flows: if on { vec![empty; flows] } else { Vec::new() },
            pool,
            free: if capacity > 0 { 0 } else { NIL },
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
    #[inline]
    pub(crate) fn open(&mut self, p: Pkt) -> Aggregate {
        let before = self.flows.get(p.flow as usize).map_or(NIL, |f| f.tail);
        let first = self.store(p);
        Aggregate {
            head: p,
            members: 1,
            first,
            before,
        }
    }

    /// Adds `p`, drained right after `agg`'s members from the same mailbox, to `agg` if it
    /// is of the same flow and fits both the budget and `flow_max` (the flow's largest
    /// packet); returns whether it did. If not, the caller offers `agg` to the scheduler
    /// before it [`Self::open`]s the next aggregate with `p` (the order the invariants
    /// need).
    #[inline]
    pub(crate) fn join(&mut self, agg: &mut Aggregate, p: Pkt, flow_max: u32) -> bool {
        let len = u64::from(agg.head.len) + u64::from(p.len);
        if agg.head.flow == p.flow && len <= self.budget_bytes && len <= u64::from(flow_max) {
            agg.head.len += p.len;
            agg.members += 1;
            self.store(p);
            true
        } else {
            false
        }
    }

    /// Appends `p` to its flow's list; returns its entry (`NIL` for a flow the engine
    /// does not have, or with aggregation off).
    #[inline(always)]
    fn store(&mut self, p: Pkt) -> u32 {
        let Some(&FlowList { tail, .. }) = self.flows.get(p.flow as usize) else {
            return NIL;
        };
        let e = self.alloc(Entry {
            pkt: p,
            next: NIL,
            count: 0,
        });
        match tail {
            NIL => self.flows[p.flow as usize].head = e,
            t => self.pool[t as usize].next = e,
        }
        self.flows[p.flow as usize].tail = e;
        self.stored += 1;
        e
    }

    /// A free entry holding `entry`.
    #[inline(always)]
    fn alloc(&mut self, entry: Entry) -> u32 {
        if self.free == NIL {
            return self.grow(entry);
        }
        let e = self.free;
        self.free = self.pool[e as usize].next;
        self.pool[e as usize] = entry;
        e
    }

    /// The pool is full: more members than the client mailboxes can hold, which the
    /// module docs argue cannot happen. Grows rather than lose a packet.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, entry: Entry) -> u32 {
        debug_assert!(false, "more members than mailbox slots: {}", self.stored);
        self.pool.push(entry);
        (self.pool.len() - 1) as u32
    }

    /// Gives entry `e` back to the pool.
    #[inline(always)]
    fn release(&mut self, e: u32) {
        self.pool[e as usize].next = self.free;
        self.free = e;
        self.stored -= 1;
    }

    /// The scheduler accepted `agg`: its first member records its count.
    #[inline]
    pub(crate) fn accepted(&mut self, agg: &Aggregate) {
        if agg.first != NIL {
            self.pool[agg.first as usize].count = agg.members;
        }
    }

    /// The scheduler refused `agg`: hands its members (the tail of its flow's list, from
    /// its first member on) to `discard`, oldest first, and returns how many it handed:
    /// `agg.members`, or 0 for a flow index the engine does not have (nothing is stored
    /// for it, and such an aggregate is its one packet: [`Self::join`] merges nothing into
    /// a flow whose largest packet is 0).
    pub(crate) fn refused(&mut self, agg: &Aggregate, mut discard: impl FnMut(Pkt)) -> u32 {
        if agg.first == NIL {
            return 0;
        }
        let mut handed = 0;
        let mut e = agg.first;
        while e != NIL {
            let entry = self.pool[e as usize];
            discard(entry.pkt);
            self.release(e);
            handed += 1;
            e = entry.next;
        }
        let f = &mut self.flows[agg.head.flow as usize];
        f.tail = agg.before;
        match agg.before {
            NIL => f.head = NIL,
            b => self.pool[b as usize].next = NIL,
        }
        debug_assert_eq!(
            handed, agg.members,
            "a refused aggregate is its flow's tail"
        );
        handed
    }

    /// The scheduler chose an aggregate of `flow` (its oldest): its members are released
    /// next, by [`Self::next_member`].
    #[inline]
    pub(crate) fn dequeued(&mut self, flow: u32) {
        let first = self.flows.get(flow as usize).map_or(NIL, |f| f.head);
        let count = if first == NIL {
            0
        } else {
            self.pool[first as usize].count
        };
        debug_assert!(count > 0, "flow {flow}: an aggregate with no count");
        self.releasing = (count > 0).then_some(Releasing { flow, left: count });
    }

    /// The next member of the aggregate being released, if any is left. Taking the last
    /// one ends the release.
    #[inline]
    pub(crate) fn next_member(&mut self) -> Option<Pkt> {
        let r = self.releasing.as_mut()?;
        r.left -= 1;
        let flow = r.flow as usize;
        if r.left == 0 {
            self.releasing = None;
        }
        let f = &mut self.flows[flow];
        let e = f.head;
        debug_assert!(e != NIL, "flow {flow}: fewer members than counted");
        if e == NIL {
            self.releasing = None;
            return None;
        }
        let entry = self.pool[e as usize];
        f.head = entry.next;
        if entry.next == NIL {
            f.tail = NIL;
        }
        self.release(e);
        Some(entry.pkt)
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
        assert_eq!(a.pool.len(), 6, "the pool grew");
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
