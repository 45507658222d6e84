//! QFQ+: Quick Fair Queueing Plus, QFQ over aggregates of flows (SCHED+ with SCHED = QFQ).
//!
//! P. Valente, "Reducing the execution time of fair-queueing packet schedulers", Computer
//! Communications 2014 (`qfq-plus-reducing-execution-time.md`), sections 2, 3 and 6; the
//! variant Linux ships (`sch_qfq.c` since 3.8). The scheme (aggregates of at most `M`
//! flows of equal weight and maximum length, budgets `m L`, DRR inside) is
//! [`crate::plus`]; this file is the outer scheduler: the group machinery of QFQ
//! ([`QfqCore`], shared with per-flow [`super::qfq`]) over aggregates.
//!
//! # QFQ over aggregates
//!
//! An aggregate of `m` flows of weight `w` and maximum length `L` has the weight `m w` and
//! stands for a packet of `m L` bytes, so its finish time advances by at most
//! `m L / (m w) = L / w` per service: its group is the one of a single flow `(w, L)`,
//! whatever `m` (Linux computes it the same way), and the bit budget of [`super::qfq`]
//! holds unchanged.
//!
//! - **Newly backlogged** (activation): `S` by QFQ's rule for a newly backlogged entity
//!   ([`QfqCore::start_of`]), `F = S + m L / (m w)`. If nothing is in service the aggregate
//!   goes straight into service and `V = max(V, S)` (Linux: `V = S`); otherwise it is
//!   put in its slot without moving `V`.
//! - **End of a service**: `F = S + served / (m w)` (the actual service, as Linux's
//!   `charge_actual_service`); if still backlogged, `S = F`, `F = S + m L / (m w)` and back
//!   into its slot.
//! - **Pick**: the eligibility update of QFQ (`V = max(V, min S)` when no group is
//!   eligible; groups whose start `V` passed become eligible), then the head of the first
//!   ER group leaves its slot and goes into service ([`QfqCore::take_first`]).
//!
//! `V` advances by the bytes served over `W` (all flows' weights), handed over once per
//! service; the eligibility sets are brought up to date (from the `V` of the previous
//! update) before any aggregate is inserted, so that an aggregate stamped after `V`
//! crossed a slot boundary is never made eligible by that earlier crossing. (Linux updates
//! them only when it picks; its insertions compare with sets that may be stale.)
//!
//! # Complexity
//!
//! O(1) per packet; QFQ's bitmap operations run once per service of an aggregate, about
//! every `m L` bytes when flows are backlogged.
//!
//! # Guarantee (paper eq. 22)
//!
//! With QFQ's `Delta S^k = (2 + 4) L^k / phi^k`, Theorem 1 gives, for any flow of an
//! aggregate `k` of `m^k` flows of share `phi^k` and maximum length `L^k`:
//!
//! ```text
//! T-WFI^k <= (11 - 1/m^k) L^k / (phi^k R) + (Q + M L - m^k L^k) / R
//! ```
//!
//! `Q` being the transmit queue plus one maximum packet (eq. 22 writes `min(8 L, Q)` for
//! `M L`, Linux's `M = min(8, Q_pkts)`; here `M` is the parameter `m`). The crate's
//! scheduler charges `V` at dequeue, so on a link with no transmit queue `Q = L`
//! (`tests/plus.rs` checks this bound).

use super::qfq::{group_of, Entities, QfqCore, QfqEnt};
use crate::plus::{Aggregates, Outer, PlusSched, M_PARAM};
use crate::registry::{AlgorithmInfo, ServiceClass};

/// QFQ+: SCHED+ over [`QfqOuter`].
pub type QfqPlus = PlusSched<QfqOuter>;

impl Entities for Aggregates<QfqEnt> {
    #[inline(always)]
    fn ent(&mut self, e: u32) -> &mut QfqEnt {
        &mut self.get_mut(e).ent
    }
}

/// QFQ's groups, slots and bitmaps scheduling aggregates.
#[derive(Debug, Default)]
pub struct QfqOuter {
    core: QfqCore,
    /// `V` at the last update of the eligibility sets.
    old_v: u64,
}

impl QfqOuter {
    /// The group machinery (tests).
    pub fn core(&self) -> &QfqCore {
        &self.core
    }

    /// Brings the eligibility sets up to the current `V` (no jump of `V`).
    #[inline(always)]
    fn refresh(&mut self) {
        self.core.make_eligible(self.old_v);
        self.old_v = self.core.vtime();
    }
}

impl Outer for QfqOuter {
    type Ent = QfqEnt;

    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "qfq+",
        aliases: &["qfqp", "qfq-plus"],
        summary: "QFQ+: QFQ over aggregates of up to m equal flows, DRR inside (Linux's qfq)",
        complexity: "O(1)",
        guarantee:
            "T-WFI <= (11 - 1/m_k) L_k/(phi_k R) + (Q + M L - m_k L_k)/R (QFQ+ paper eq. 22)",
        source: "Valente, Computer Communications 2014; Linux sch_qfq.c",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::WeightedFair,
        params: &[M_PARAM],
    };

    fn add_weight(&mut self, delta: i64) {
        self.core.add_weight(delta);
    }

    #[inline(always)]
    fn advance(&mut self, bytes: u64) {
        self.core.advance_bytes(bytes);
    }

    fn configure(&self, ent: &mut QfqEnt, weight: u32, max_len: u32) {
        // F = V: not after V, so the first activation starts at V, with no credit.
        let v = self.core.vtime();
        *ent = QfqEnt {
            grp: group_of(max_len, u64::from(weight)),
            s: v, // as the last finish time
            ..QfqEnt::default()
        };
    }

    fn activate(
        &mut self,
        aggs: &mut Aggregates<QfqEnt>,
        a: u32,
        _budget: u64,
        into_service: bool,
    ) {
        self.refresh();
        let agg = aggs.get_mut(a);
        let s = self.core.start_of(&agg.ent);
        agg.ent.s = s; // F = S + budget / (m w) is implicit until the service ends
        if into_service {
            self.core.catch_up(s);
            self.old_v = self.core.vtime();
        } else {
            self.core.schedule(aggs, a, false);
        }
    }

    fn charge(&mut self, aggs: &mut Aggregates<QfqEnt>, a: u32, served: u64, requeue: Option<u64>) {
        // F = S + served / (m w); requeued, S = F (and F = S + budget / (m w), implicit);
        // idle, `s` reads as the last finish time.
        let agg = aggs.get_mut(a);
        agg.ent.s = agg.ent.s.wrapping_add(agg.cost.cost(served));
        if requeue.is_some() {
            self.refresh();
            self.core.schedule(aggs, a, false);
        }
    }

    fn next(&mut self, aggs: &mut Aggregates<QfqEnt>) -> Option<u32> {
        self.core.update_eligible(self.old_v);
        self.core.ensure_ready(true);
        self.old_v = self.core.vtime();
        let a = self.core.first()?;
        self.core.take_first(aggs, a);
        Some(a)
    }

    fn remove(&mut self, aggs: &mut Aggregates<QfqEnt>, a: u32) {
        self.core.remove(aggs, a, false);
        self.old_v = self.core.vtime();
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.core.counters().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, FlowParams, Policy, Sched, Scheduler};

    fn sched(m: u32) -> Sched<QfqPlus, Desc> {
        Sched::new(QfqPlus::new(m), 1024).unwrap()
    }

    #[test]
    fn flows_fill_aggregates_of_m_by_key() {
        let mut s = sched(3);
        for _ in 0..7 {
            s.add_flow(FlowParams::weighted(1).with_max_len(1000))
                .unwrap();
        }
        // 7 flows of one key, M = 3: aggregates of 3, 3 and 1
        assert_eq!(s.policy().aggregates().live(), 3);
        s.add_flow(FlowParams::weighted(2).with_max_len(1000))
            .unwrap();
        s.add_flow(FlowParams::weighted(1).with_max_len(500))
            .unwrap();
        assert_eq!(
            s.policy().aggregates().live(),
            5,
            "other keys, other aggregates"
        );
    }

    #[test]
    fn m_is_checked() {
        let e = QfqPlus::from_params(&"m=0".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'0'") && e.contains('m') && e.contains("1..=128"),
            "{e}"
        );
        assert!(QfqPlus::from_params(&"m=129".parse().unwrap()).is_err());
        assert!(QfqPlus::from_params(&"m=128".parse().unwrap()).is_ok());
    }

    #[test]
    fn one_aggregate_is_served_round_robin_for_its_budget() {
        // Two aggregates of two weight-1 flows each (M = 2), 1024-byte packets: L / w =
        // 1024 B/w, exactly one slot of the group, and each service costs 2 x 1024 / 2 =
        // 1024 B/w. A = {f0, f1} becomes backlogged first and goes into service; it
        // sends its budget, one packet per flow (DRR, quantum 1024), before QFQ picks.
        // A is requeued with S = 1024 (slot 1), behind B (S = 0, slot 0): B goes next and
        // is requeued with S = 1024 too, in slot 1 behind A (slots are FIFO). Slot 1 is
        // the front now: A, then B, each requeued one slot further in the same order: A,
        // B, A, B, A, B.
        let mut s = sched(2);
        let f: Vec<_> = (0..4)
            .map(|_| {
                s.add_flow(FlowParams::default().with_max_len(1024))
                    .unwrap()
            })
            .collect();
        for i in 0..3 {
            for (k, &id) in f.iter().enumerate() {
                s.enqueue(id, Desc::new(10 * k as u64 + i, 1024)).unwrap();
            }
        }
        let out: Vec<u64> = crate::testing::drain_cookies(&mut s);
        assert_eq!(out, [0, 10, 20, 30, 1, 11, 21, 31, 2, 12, 22, 32]);
        let c = s.stats().algorithm;
        assert!(c.contains(&("services", 6)), "{c:?}");
    }
}
