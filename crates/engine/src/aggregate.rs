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
//! State: per flow, the members of the aggregates in the scheduler in arrival order, and
//! each aggregate's member count, oldest first; the aggregate being released, if a full
//! TX mailbox stopped its release part-way.
//!
//! Invariants, which make the counts line up with the scheduler's decisions without any
//! word of the packet descriptor:
//!
//! - an aggregate's members are stored when it is built, before it is offered to the
//!   scheduler, and are then the newest members of their flow: members of one flow are
//!   only appended, and an aggregate is offered before the next packet of its flow is
//!   stored. So a refused aggregate's members are the last `members` of the flow
//!   ([`Aggregator::refused`]);
//! - its member count is stored when the scheduler accepts it, behind the counts of the
//!   flow's earlier aggregates;
//! - the scheduler keeps each flow FIFO and drops nothing it has accepted (a refusal is
//!   always of the packet offered: `Service::enqueue`), so the aggregate it dequeues for a
//!   flow is that flow's oldest: its count is the flow's first, its members the flow's
//!   first `count` packets ([`Aggregator::dequeued`]).
//!
//! Aggregation is only offered with one algorithm on one link (`service::Single`); a
//! dummynet-style configuration refuses it (`Engine::start`).
//!
//! Cost: O(1) per packet (a deque push and pop) plus O(1) per aggregate; the deques are
//! sized for a mailbox's worth per flow when the engine starts.

use std::collections::VecDeque;

use pspat_io::Pkt;

/// An aggregate: the packet the scheduler sees and how many packets it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Aggregate {
    /// The first member, with `len` the sum of every member's length.
    pub(crate) head: Pkt,
    /// Member packets behind it, at least 1.
    pub(crate) members: u32,
}

/// One flow's share of the aggregator.
struct FlowMembers {
    /// Members of this flow's aggregates in the scheduler (and of the one being built),
    /// in arrival order.
    pkts: VecDeque<Pkt>,
    /// Member count of each of this flow's aggregates in the scheduler, oldest first.
    counts: VecDeque<u32>,
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
    flows: Vec<FlowMembers>,
    /// The aggregate being released, if its members have not all been handed on.
    releasing: Option<Releasing>,
}

impl Aggregator {
    /// Aggregation with a budget of `budget_bytes` per decision (0: off) for `flows` flows,
    /// each with room for `per_flow` members before a deque grows.
    pub(crate) fn new(budget_bytes: u64, flows: usize, per_flow: usize) -> Self {
        let flows = if budget_bytes > 0 {
            (0..flows)
                .map(|_| FlowMembers {
                    pkts: VecDeque::with_capacity(per_flow),
                    counts: VecDeque::with_capacity(per_flow),
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            budget_bytes,
            flows,
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
        self.store(p);
        Aggregate {
            head: p,
            members: 1,
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

    #[inline(always)]
    fn store(&mut self, p: Pkt) {
        if let Some(f) = self.flows.get_mut(p.flow as usize) {
            f.pkts.push_back(p);
        }
    }

    /// The scheduler accepted `agg`: its count joins its flow's.
    #[inline]
    pub(crate) fn accepted(&mut self, agg: &Aggregate) {
        if let Some(f) = self.flows.get_mut(agg.head.flow as usize) {
            f.counts.push_back(agg.members);
        }
    }

    /// The scheduler refused an aggregate of `flow` standing for `members` packets: hands
    /// its members (the newest of the flow) to `discard`, newest first, and returns how
    /// many it handed: `members`, or 0 for a flow index the engine does not have (nothing
    /// is stored for it, and such an aggregate is its one packet: [`Self::join`] merges
    /// nothing into a flow whose largest packet is 0).
    pub(crate) fn refused(&mut self, flow: u32, members: u32, mut discard: impl FnMut(Pkt)) -> u32 {
        let mut handed = 0;
        if let Some(f) = self.flows.get_mut(flow as usize) {
            for _ in 0..members {
                if let Some(member) = f.pkts.pop_back() {
                    discard(member);
                    handed += 1;
                }
            }
        }
        handed
    }

    /// The scheduler chose an aggregate of `flow` (its oldest): its members are released
    /// next, by [`Self::next_member`].
    #[inline]
    pub(crate) fn dequeued(&mut self, flow: u32) {
        let count = self
            .flows
            .get_mut(flow as usize)
            .and_then(|f| f.counts.pop_front());
        debug_assert!(count.is_some(), "flow {flow}: an aggregate with no count");
        self.releasing = count
            .filter(|&left| left > 0)
            .map(|left| Releasing { flow, left });
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
        let member = self.flows.get_mut(flow).and_then(|f| f.pkts.pop_front());
        debug_assert!(member.is_some(), "flow {flow}: fewer members than counted");
        if member.is_none() {
            self.releasing = None;
        }
        member
    }

    /// Whether an aggregate's release is under way (members still to hand on).
    #[inline(always)]
    pub(crate) fn releasing(&self) -> bool {
        self.releasing.is_some()
    }

    /// Members still stored: behind aggregates in the scheduler or being released.
    pub(crate) fn members_left(&self) -> u64 {
        self.flows.iter().map(|f| f.pkts.len() as u64).sum()
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
                let handed = a.refused(agg.head.flow, agg.members, |m| dropped.push(m));
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
        assert_eq!(dropped, [vec![], vec![3, 2], vec![]]);
        assert_eq!(release(&mut a, 0), [0, 1]);
        assert_eq!(release(&mut a, 0), [4, 5]);
        assert_eq!(a.members_left(), 0);
    }

    #[test]
    fn a_flow_the_engine_does_not_have_stores_nothing_and_hands_nothing_back() {
        let mut a = Aggregator::new(10_000, 1, 8);
        // Flow 3 of 1: no largest packet (0), so nothing joins it.
        let mut agg = a.open(pkt(3, 0, 100));
        assert!(!a.join(&mut agg, pkt(3, 1, 100), 0));
        assert_eq!(a.members_left(), 0);
        assert_eq!(a.refused(3, agg.members, |_| panic!("nothing stored")), 0);
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
