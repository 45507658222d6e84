//! WF2Q++: exact WF2Q+ over aggregates of flows (SCHED+ with SCHED = WF2Q+).
//!
//! The modification scheme of P. Valente, "Reducing the execution time of fair-queueing
//! packet schedulers" (`qfq-plus-reducing-execution-time.md`, section 2), applied to
//! WF2Q+ (Bennett, Zhang 1997) instead of QFQ, to show that the scheme is general: the
//! scheme itself is [`crate::plus`], this file only the outer scheduler. It is the WF2Q+
//! of [`super::wf2qp`] (same virtual times, same two heaps of packed keys, same clock),
//! with aggregates for flows and budgets for head packets. (The name is ours; the paper
//! calls it SCHED+ with SCHED = WF2Q+.)
//!
//! # WF2Q+ over aggregates
//!
//! An aggregate of `m` flows of weight `w` and maximum length `L` has the weight `m w`
//! and stands for a packet of `m L` bytes:
//!
//! - newly backlogged: `S = max(V, F)`, `F = S + m L / (m w)`; into service at once if
//!   nothing is in service (then `V = max(V, S)`), else into the eligible heap (keyed by
//!   `F`) if `S <= V`, the ineligible one (keyed by `S`) otherwise;
//! - end of a service: `F = S + served / (m w)` (the actual service, as QFQ+ does); if
//!   still backlogged `S = F`, `F = S + m L / (m w)`, back into a heap;
//! - pick: `V = max(V, min S)` if no aggregate is eligible, the aggregates with `S <= V`
//!   move to the eligible heap, and its top (smallest `F`, ties to the lowest index) goes
//!   into service, out of the heaps.
//!
//! `V` advances by the bytes served over `W`, the sum of all flows' weights, handed over
//! once per service. Costs are by a 63-bit reciprocal of the aggregate weight
//! ([`crate::util::stamp::Recip`]): `m w` reaches `128 * 2^16`, where the 32-bit inverse
//! of [`crate::vtime::InvWeight`] would lose 10 bits.
//!
//! [`super::wf2qp`] is left as it is rather than turned into a core shared with this file:
//! the shared part is two heap moves, and per-flow WF2Q+ keeps its hot path (served flow
//! re-keyed at the top of the heap) which an aggregate, taken out while in service, does
//! not use.
//!
//! # Complexity and guarantee
//!
//! O(1) per packet plus O(log A) per service, `A` the number of backlogged aggregates
//! (about `N / M`). Theorem 1 of the paper with WF2Q+'s `Delta S^k = L^k / phi^k`:
//! `T-WFI^k <= (6 - 1/m^k) L^k / (phi^k R) + (Q + M L - m^k L^k) / R`.

use crate::plus::{Aggregates, Outer, PlusSched, M_PARAM};
use crate::registry::{AlgorithmInfo, ServiceClass};
use crate::util::heap::VHeap;
use crate::vtime::{SystemClock, VTime};

/// WF2Q++: SCHED+ over [`Wf2qOuter`].
pub type Wf2qPlusPlus = PlusSched<Wf2qOuter>;

/// WF2Q+ state of an aggregate.
#[derive(Clone, Copy, Debug, Default)]
pub struct Wf2qAgg {
    /// Virtual start time.
    pub s: VTime,
    /// Virtual finish time (of the last service while idle or in service).
    pub f: VTime,
    /// Whether the aggregate is in a heap.
    queued: bool,
}

/// WF2Q+ scheduling aggregates.
#[derive(Debug, Default)]
pub struct Wf2qOuter {
    clock: SystemClock,
    eligible: VHeap,
    ineligible: VHeap,
}

impl Wf2qOuter {
    /// The system virtual time.
    pub fn vtime(&self) -> VTime {
        self.clock.now()
    }

    /// Puts aggregate `a` in the heap its `S` calls for.
    fn place(&mut self, aggs: &mut Aggregates<Wf2qAgg>, a: u32) {
        let e = &mut aggs.get_mut(a).ent;
        e.queued = true;
        if e.s <= self.clock.now() {
            self.eligible.push(e.f, a);
        } else {
            self.ineligible.push(e.s, a);
        }
    }
}

impl Outer for Wf2qOuter {
    type Ent = Wf2qAgg;

    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "wf2q++",
        aliases: &["wf2qpp"],
        summary: "WF2Q+ over aggregates of up to m equal flows, DRR inside (SCHED+ scheme)",
        complexity: "O(1) per packet, O(log N/m) per aggregate service",
        guarantee: "T-WFI <= (6 - 1/m_k) L_k/(phi_k R) + (Q + M L - m_k L_k)/R (QFQ+ paper Thm 1)",
        source: "Valente, Computer Communications 2014, sect. 2, applied to WF2Q+",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::WeightedFair,
        params: &[M_PARAM],
    };

    fn add_weight(&mut self, delta: i64) {
        let d = u32::try_from(delta.unsigned_abs()).expect("a weight change fits u32");
        if delta >= 0 {
            self.clock.add_weight(d);
        } else {
            self.clock.remove_weight(d);
        }
    }

    #[inline(always)]
    fn advance(&mut self, bytes: u64) {
        self.clock.advance_bytes(bytes);
    }

    fn configure(&self, ent: &mut Wf2qAgg, _weight: u32, _max_len: u32) {
        let now = self.clock.now();
        *ent = Wf2qAgg {
            s: now,
            f: now,
            queued: false,
        };
    }

    fn activate(
        &mut self,
        aggs: &mut Aggregates<Wf2qAgg>,
        a: u32,
        budget: u64,
        into_service: bool,
    ) {
        let now = self.clock.now();
        let agg = aggs.get_mut(a);
        let s = agg.ent.f.max(now);
        agg.ent.s = s;
        agg.ent.f = s.plus(agg.cost.cost(budget));
        if into_service {
            self.clock.catch_up(s);
        } else {
            self.place(aggs, a);
        }
    }

    fn charge(
        &mut self,
        aggs: &mut Aggregates<Wf2qAgg>,
        a: u32,
        served: u64,
        requeue: Option<u64>,
    ) {
        let agg = aggs.get_mut(a);
        agg.ent.f = agg.ent.s.plus(agg.cost.cost(served));
        if let Some(budget) = requeue {
            agg.ent.s = agg.ent.f;
            agg.ent.f = agg.ent.s.plus(agg.cost.cost(budget));
            self.place(aggs, a);
        }
    }

    fn next(&mut self, aggs: &mut Aggregates<Wf2qAgg>) -> Option<u32> {
        if self.eligible.is_empty() {
            let (s, _) = self.ineligible.peek()?;
            self.clock.catch_up(s);
        }
        let now = self.clock.now();
        while let Some((s, b)) = self.ineligible.peek() {
            if s > now {
                break;
            }
            self.ineligible.pop();
            self.eligible.push(aggs.get(b).ent.f, b);
        }
        let (_, a) = self.eligible.pop()?;
        aggs.get_mut(a).ent.queued = false;
        Some(a)
    }

    fn remove(&mut self, aggs: &mut Aggregates<Wf2qAgg>, a: u32) {
        let e = &mut aggs.get_mut(a).ent;
        if e.queued {
            if !self.eligible.remove(a) {
                self.ineligible.remove(a);
            }
            e.queued = false;
        }
        e.f = e.s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, FlowParams, Policy, Sched, Scheduler};

    #[test]
    fn aggregates_share_by_their_weight() {
        // M = 2, 100-byte packets. A = {a0, a1}, weight 1 each: aggregate weight 2, budget
        // 200 bytes, a service costs 200 / 2 = 100 B/w. B = {b}, weight 2: weight 2,
        // budget 100, a service costs 50 B/w. W = 4: V grows 50 per A service, 25 per B's.
        // A goes into service at once (first backlogged, S = 0): aa, V = 50; A requeued
        // at S = 100. B (S = 0, F = 50): b, V = 75; B (S = 50 <= V, F = 100): b, V = 100;
        // B (S = 100, F = 150) beats A (S = 100, F = 200): b, V = 125; B's S = 150 > V:
        // A: aa, V = 175; then B twice (F 200, 250 < A's 300), A, B twice, A, B: the
        // aggregates get equal bytes, as their equal weights want.
        let mut s = Sched::<Wf2qPlusPlus, Desc>::new(Wf2qPlusPlus::new(2), 64).unwrap();
        let a0 = s
            .add_flow(FlowParams::weighted(1).with_max_len(100))
            .unwrap();
        let a1 = s
            .add_flow(FlowParams::weighted(1).with_max_len(100))
            .unwrap();
        let b = s
            .add_flow(FlowParams::weighted(2).with_max_len(100))
            .unwrap();
        for i in 0..4 {
            s.enqueue(a0, Desc::new(i, 100)).unwrap();
            s.enqueue(a1, Desc::new(10 + i, 100)).unwrap();
        }
        for i in 0..8 {
            s.enqueue(b, Desc::new(20 + i, 100)).unwrap();
        }
        let who: String = std::iter::from_fn(|| s.dequeue())
            .map(|(f, _)| if f == b { 'b' } else { 'a' })
            .collect();
        assert_eq!(who, "aabbbaabbaabbaab");
        assert_eq!(s.policy().aggregates().live(), 2);
    }

    #[test]
    fn m_is_checked() {
        let e = Wf2qPlusPlus::from_params(&"m=200".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("'200'") && e.contains("1..=128"), "{e}");
    }
}
