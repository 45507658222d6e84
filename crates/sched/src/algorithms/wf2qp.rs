//! WF2Q+: Worst-case Fair Weighted Fair Queueing, exact, O(log N).
//!
//! J. C. R. Bennett and H. Zhang, "Hierarchical packet fair queueing algorithms",
//! IEEE/ACM ToN 1997; implemented exactly as outlined in the QFQ+ paper
//! (`qfq-plus-reducing-execution-time.md`), appendix A.2.
//!
//! WF2Q+ serves, among the *eligible* flows (those whose head packet has already started in
//! the corresponding fluid system), the one whose head packet would finish first in it.
//!
//! # Virtual times (eq. A.2, A.3)
//!
//! With shares `phi_i = w_i / W`, `W` the sum of the weights of all flows:
//!
//! - when flow `i` becomes backlogged: `S_i = max(V, F_i)`; when its head packet is
//!   dequeued: `S_i = F_i`; in both cases `F_i = S_i + l_i / w_i`, `l_i` the new head length;
//! - the system virtual time advances by `l / W` per dequeued packet of `l` bytes, and
//!   jumps to `min S_i` over the backlogged flows when that is larger (this keeps WF2Q+
//!   work-conserving): `V(t2) = max(V(t1) + W(t1, t2) / W, min_{i in B(t2)} S_i)`;
//! - flow `i` is eligible when `S_i <= V`.
//!
//! Timestamps are in bytes per unit weight ([`crate::vtime`]), so re-weighting a flow or
//! adding one never rescales anybody else's timestamps.
//!
//! # State
//!
//! - `eligible`: backlogged flows with `S <= V`, keyed by `F`;
//! - `ineligible`: backlogged flows with `S > V`, keyed by `S`;
//! - per flow: `S`, `F` (for an idle flow, `F` is the finish time of its last packet) and
//!   the inverse weight.
//!
//! # Invariants
//!
//! - Each backlogged flow is in exactly one heap; idle flows are in none.
//! - After [`Policy::select`], every flow in `ineligible` has `S > V`; the selected flow is
//!   the eligible one with the smallest `F` (ties: lowest flow index).
//! - `V` never decreases, and `S_i <= F_i` for every flow.
//!
//! # Complexity and guarantee
//!
//! O(log N) per packet (each packet moves its flow at most once between heaps).
//!
//! Worst-case fairness, from Theorems 4 and 5 of the QFQ+ paper (A.21, A.24) with WF2Q+'s
//! `Delta S^- = 0`, `Delta S^+ = L_i / phi_i` (appendix A.3), `L_i` the flow's and `L` the
//! largest packet, `R` the link rate:
//!
//! ```text
//! B-WFI_i <= phi_i DW + (2 - phi_i) L_i + L
//! T-WFI_i <= (2 L_i / phi_i + DW + L - L_i) / R
//! ```
//!
//! `DW` is how far the work handed out by the scheduler may run ahead of the link (A.5).
//! The clock here is charged when a packet is *dequeued*, as the paper's model of a real
//! system does (appendix A.4, Figure A.9 B), so even with no transmit queue the packet on
//! the wire counts: `DW = L` plus the size of any transmit queue behind the scheduler
//! (section 4: "Q is equal to the size of the transmit queue, in bits, plus the maximum
//! possible packet size"). The reference tests (`tests/guarantees.rs`) check these bounds
//! on random workloads and show a case where the `DW = 0` bound is exceeded.

use crate::error::ConfigError;
use crate::flow::FlowParams;
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{AlgorithmInfo, Params, ServiceClass};
use crate::util::heap::VHeap;
use crate::vtime::{InvWeight, SystemClock, VTime};

/// Where a flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum Where {
    #[default]
    Idle,
    Eligible,
    Ineligible,
}

/// Per-flow WF2Q+ state.
#[derive(Debug)]
pub struct Wf2qFlow {
    s: VTime,
    f: VTime,
    inv_w: InvWeight,
    at: Where,
}

impl Default for Wf2qFlow {
    fn default() -> Self {
        Self {
            s: VTime::ZERO,
            f: VTime::ZERO,
            inv_w: InvWeight::new(1),
            at: Where::Idle,
        }
    }
}

/// WF2Q+.
#[derive(Debug, Default)]
pub struct Wf2qPlus {
    clock: SystemClock,
    eligible: VHeap,
    ineligible: VHeap,
}

impl Wf2qPlus {
    /// An empty WF2Q+ scheduler.
    pub fn new() -> Self {
        Self::default()
    }

    /// The system virtual time.
    pub fn vtime(&self) -> VTime {
        self.clock.now()
    }

    /// Puts a backlogged flow in the heap its `S` calls for.
    #[inline(always)]
    fn place<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let now = self.clock.now();
        let st = flows.st_mut(f);
        if st.s <= now {
            st.at = Where::Eligible;
            self.eligible.push(st.f, f);
        } else {
            st.at = Where::Ineligible;
            self.ineligible.push(st.s, f);
        }
    }

    fn unplace<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        match flows.st(f).at {
            Where::Idle => {}
            Where::Eligible => {
                self.eligible.remove(f);
            }
            Where::Ineligible => {
                self.ineligible.remove(f);
            }
        }
        flows.st_mut(f).at = Where::Idle;
    }
}

impl Policy for Wf2qPlus {
    type FlowState = Wf2qFlow;
    type Tag = ();

    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "wf2q+",
        aliases: &["wf2qp", "wf2qplus"],
        summary: "exact WF2Q+: eligible flow with the smallest virtual finish time",
        complexity: "O(log N)",
        guarantee: "B-WFI <= phi Q + (2 - phi) L_i + L, Q = tx queue + L (QFQ+ paper Thm 4, 5)",
        source: "Bennett, Zhang, ToN 1997; QFQ+ paper appendix A.2",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::WeightedFair,
        params: &[],
    };

    fn from_params(_params: &Params) -> Result<Self, ConfigError> {
        Ok(Self::new())
    }

    fn flow_added<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let w = flows.weight(f);
        self.clock.add_weight(w);
        let now = self.clock.now();
        let st = flows.st_mut(f);
        st.inv_w = InvWeight::new(w);
        // A new flow starts at the current virtual time, with no credit or debt.
        st.s = now;
        st.f = now;
    }

    fn flow_updated<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, old: FlowParams) {
        let w = flows.weight(f);
        if w == old.weight {
            return;
        }
        self.clock.remove_weight(old.weight);
        self.clock.add_weight(w);
        let head = flows.head_len(f);
        let st = flows.st_mut(f);
        st.inv_w = InvWeight::new(w);
        if let Some(len) = head {
            // The head packet is re-costed at the new weight from its start time.
            st.f = st.s.plus(st.inv_w.cost(len));
            if st.at == Where::Eligible {
                let key = st.f;
                self.eligible.rekey(f, key);
            }
        }
    }

    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        self.unplace(flows, f);
        self.clock.remove_weight(flows.weight(f));
    }

    #[inline(always)]
    fn enqueued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        was_empty: bool,
    ) {
        if !was_empty {
            return;
        }
        let now = self.clock.now();
        let st = flows.st_mut(f);
        st.s = st.f.max(now);
        st.f = st.s.plus(st.inv_w.cost(len));
        self.place(flows, f);
    }

    #[inline(always)]
    fn select<P: Packet>(&mut self, flows: &mut Flows<P, Self>) -> Option<u32> {
        if self.eligible.is_empty() {
            // V = max(V, min S): no flow is eligible, so the smallest S is the min over B.
            let (s, _) = self.ineligible.peek()?;
            self.clock.catch_up(s);
        }
        let now = self.clock.now();
        while let Some((s, g)) = self.ineligible.peek() {
            if s > now {
                break; // S > V: not yet eligible, nor is anything after it
            }
            self.ineligible.pop();
            let st = flows.st_mut(g);
            st.at = Where::Eligible;
            self.eligible.push(st.f, g);
        }
        self.eligible.peek_flow()
    }

    #[inline(always)]
    fn dequeued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        _tag: (),
        more: bool,
    ) {
        debug_assert_eq!(self.eligible.peek_flow(), Some(f));
        self.clock.advance(len);
        let now = self.clock.now();
        let next = if more { flows.head_len(f) } else { None };
        let st = flows.st_mut(f);
        st.s = st.f;
        match next {
            None => {
                st.at = Where::Idle;
                self.eligible.pop();
            }
            Some(next) => {
                st.f = st.s.plus(st.inv_w.cost(next));
                if st.s <= now {
                    self.eligible.rekey_top(st.f);
                } else {
                    st.at = Where::Ineligible;
                    let s = st.s;
                    self.eligible.pop();
                    self.ineligible.push(s, f);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, Sched, Scheduler};

    #[test]
    fn interleaves_by_weight_smoothly() {
        // weights 3:1 (W = 4), 100-byte packets: a's tags advance by 33.3, b's by 100 and V
        // by 25 per packet. b goes second because a's second packet (S = 33.3) is not
        // eligible at V = 25; then a,a,a,b repeats: never two b's while a is backlogged.
        let mut s = Sched::<Wf2qPlus, Desc>::with_defaults(64).unwrap();
        let a = s.add_flow(FlowParams::weighted(3)).unwrap();
        let b = s.add_flow(FlowParams::weighted(1)).unwrap();
        for i in 0..8 {
            s.enqueue(a, Desc::new(i, 100)).unwrap();
        }
        for i in 0..4 {
            s.enqueue(b, Desc::new(100 + i, 100)).unwrap();
        }
        let who: String = crate::testing::drain_names(&mut s, &[(a, 'a'), (b, 'b')]);
        assert_eq!(who, "abaaabaaabab");
    }

    #[test]
    fn newly_backlogged_flow_waits_for_no_credit() {
        // b idles while a sends; when b comes back it starts at V, not at its old F.
        let mut s = Sched::<Wf2qPlus, Desc>::with_defaults(64).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        for i in 0..10 {
            s.enqueue(a, Desc::new(i, 1000)).unwrap();
        }
        for _ in 0..5 {
            s.dequeue().unwrap();
        }
        s.enqueue(b, Desc::new(99, 1000)).unwrap();
        let next: Vec<_> = (0..3).map(|_| s.dequeue().unwrap().0).collect();
        assert!(
            next[..2].contains(&b),
            "b served within two packets: {next:?}"
        );
    }

    #[test]
    fn reweighting_a_backlogged_flow_takes_effect() {
        let mut s = Sched::<Wf2qPlus, Desc>::with_defaults(256).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        for i in 0..100 {
            s.enqueue(a, Desc::new(i, 100)).unwrap();
            s.enqueue(b, Desc::new(i, 100)).unwrap();
        }
        s.update_flow(b, FlowParams::weighted(4)).unwrap();
        let b_sent = (0..50).filter(|_| s.dequeue().unwrap().0 == b).count();
        assert!((39..=41).contains(&b_sent), "b got {b_sent} of 50");
    }
}
