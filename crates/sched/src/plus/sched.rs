//! [`PlusSched`]: the SCHED+ policy over any [`Outer`] scheduler (paper, section 2).
//!
//! # Service of an aggregate
//!
//! At most one aggregate is *in service* (`in_service`); every other backlogged aggregate
//! is in the outer schedule. [`Policy::select`] serves the in-service aggregate's DRR:
//!
//! - the front flow of its `active` list is served if its deficit covers its head packet;
//!   otherwise it gets another quantum `L` and goes to the back (a weightless DRR with
//!   quantum `L`, the members' maximum length; a flow joining the list gets `L`). The test
//!   is made right after each dequeue, on the flow just served (as Linux does), and again
//!   in `select`, where it matters only for a packet longer than `L`;
//! - the aggregate keeps the service while its budget covers the packet chosen; when it
//!   does not, or when the aggregate has no backlogged flow left, SCHED+ *switches*: the
//!   outer scheduler charges the aggregate and reschedules it if still backlogged, and
//!   picks the next one, which starts with a full budget `m L`.
//!
//! The switch is decided when the next packet is asked for, not when the last one left
//! (Linux's order): an in-service aggregate emptied by a dequeue and refilled before the
//! next one keeps its service and its budget.
//!
//! # Choices the paper leaves open
//!
//! - **Charge of the actual service** (as Linux's `charge_actual_service`): an aggregate is
//!   scheduled with `F = S + budget / weight` (head-packet independence), but when its
//!   service ends it is charged what it actually received, `F = S + served / weight`,
//!   `served <= budget`: an aggregate that empties early does not pay for bytes it did not
//!   send (paper 5.3 bounds the delay this early stamping causes).
//! - **`V` charged per service.** `V` advances by `bytes / W` as in SCHED, but the bytes of
//!   the current service are handed to the outer scheduler ([`Outer::advance`]) only
//!   before it needs `V` (a switch, an activation, a control operation): the same value,
//!   carried exactly, without a division per packet.
//! - **A fresh service sends at least one packet**, even a packet longer than the budget
//!   (possible only when a flow's maximum length is lowered while longer packets are
//!   queued: it then moves to an aggregate with a smaller `L`); the budget goes negative
//!   and the charge is capped at the budget. This keeps `select` idempotent.
//! - **Control path.** A flow whose weight or maximum length changes leaves its aggregate
//!   and joins one of its new key, taking its queued packets along (they keep their order;
//!   its deficit restarts at the new `L`). An aggregate that loses its last backlogged flow
//!   this way is taken out of the outer schedule (`F` back to `S`); one that loses its last
//!   member while in service ends its service uncharged.
//!
//! # Invariants
//!
//! - `in_service == NIL` exactly when no aggregate is in service, and then none is
//!   backlogged (the outer schedule is empty).
//! - An aggregate other than `in_service` is in the outer schedule exactly when its
//!   `active` list is not empty; a flow is on its aggregate's `active` list exactly when
//!   it is backlogged.
//! - `flushed <= served` of the in-service aggregate: the bytes of its current service
//!   already added to `V`.
//!
//! # Complexity
//!
//! Per packet: the DRR step (O(1), one flow entry) and a budget test. Per service (about
//! `m L` bytes under load): one charge, one reschedule and one pick of the outer scheduler,
//! O(1) for QFQ, O(log(N / M)) for WF2Q+.

use std::collections::HashMap;

use super::aggregates::Aggregates;
use super::outer::Outer;
use crate::error::ConfigError;
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{AlgorithmInfo, ParamInfo, Params};
use crate::table::NIL;
use crate::util::flowlist::Linked;

/// The largest `M`: budgets stay below `128 * 2^20 = 2^27` bytes (the bit budget of
/// [`crate::util::stamp`]).
pub const MAX_M: u32 = 128;

/// The aggregate size parameter.
pub const M_PARAM: ParamInfo = ParamInfo {
    name: "m",
    default: "8",
    help: "most flows per aggregate (1..=128); larger is cheaper, with looser delay bounds",
};

/// Per-flow SCHED+ state.
#[derive(Clone, Copy, Debug)]
pub struct PlusFlow {
    /// Next flow on the aggregate's DRR list.
    next: u32,
    /// The flow's aggregate.
    agg: u32,
    /// DRR deficit, bytes (negative only after an over-long packet, see the module doc).
    deficit: i64,
}

impl Default for PlusFlow {
    fn default() -> Self {
        Self {
            next: NIL,
            agg: NIL,
            deficit: 0,
        }
    }
}

impl PlusFlow {
    /// The flow's aggregate.
    pub fn agg(&self) -> u32 {
        self.agg
    }
}

impl Linked for PlusFlow {
    #[inline(always)]
    fn link(&mut self) -> &mut u32 {
        &mut self.next
    }
}

/// SCHED+ over the outer scheduler `O`.
#[derive(Debug)]
pub struct PlusSched<O: Outer> {
    outer: O,
    aggs: Aggregates<O::Ent>,
    in_service: u32,
    /// Bytes of the current service already given to `outer` ([`Outer::advance`]).
    flushed: i64,
    services: u64,
}

impl<O: Outer> PlusSched<O> {
    /// SCHED+ with aggregates of at most `m` flows (`1..=`[`MAX_M`]).
    pub fn new(m: u32) -> Self {
        assert!((1..=MAX_M).contains(&m), "m out of range");
        Self {
            outer: O::default(),
            aggs: Aggregates::new(m),
            in_service: NIL,
            flushed: 0,
            services: 0,
        }
    }

    /// The outer scheduler (tests).
    pub fn outer(&self) -> &O {
        &self.outer
    }

    /// The aggregates (tests).
    pub fn aggregates(&self) -> &Aggregates<O::Ent> {
        &self.aggs
    }

    /// The aggregate in service, if any.
    pub fn in_service(&self) -> Option<u32> {
        (self.in_service != NIL).then_some(self.in_service)
    }

    /// Hands the bytes served so far in the current service to the outer scheduler.
    fn flush(&mut self) {
        if self.in_service != NIL {
            let served = self.aggs.get(self.in_service).served();
            let delta = served - self.flushed;
            if delta > 0 {
                self.outer.advance(delta as u64);
            }
            self.flushed = served;
        }
    }

    /// Aggregate `a`, idle and not in service, got its first backlogged flow.
    fn activate(&mut self, a: u32) {
        self.flush();
        let into_service = self.in_service == NIL;
        let budget = u64::from(self.aggs.get(a).budget_max);
        self.outer.activate(&mut self.aggs, a, budget, into_service);
        if into_service {
            self.aggs.get_mut(a).recharge();
            self.in_service = a;
            self.flushed = 0;
            self.services += 1;
        }
    }

    /// Ends the service of the in-service aggregate and starts the next one.
    #[cold]
    #[inline(never)]
    fn switch(&mut self) {
        let a = self.in_service;
        self.flush();
        let agg = self.aggs.get_mut(a);
        let max = i64::from(agg.budget_max);
        let served = agg.served().clamp(0, max) as u64;
        let requeue = (!agg.active.is_empty()).then_some(max as u64);
        self.outer.charge(&mut self.aggs, a, served, requeue);
        self.start_next();
    }

    /// Puts the outer scheduler's next aggregate in service (none if it is empty).
    fn start_next(&mut self) {
        self.flushed = 0;
        self.in_service = match self.outer.next(&mut self.aggs) {
            Some(b) => {
                self.aggs.get_mut(b).recharge();
                self.services += 1;
                b
            }
            None => NIL,
        };
    }

    /// Flow `f` joins an aggregate of its key; if backlogged, that aggregate's DRR list.
    fn join<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let p = flows.params(f);
        let (a, new) = self.aggs.join(p.weight, p.max_len);
        if new {
            self.outer
                .configure(&mut self.aggs.get_mut(a).ent, p.weight, p.max_len);
        }
        let st = flows.st_mut(f);
        st.agg = a;
        st.next = NIL;
        if flows.is_backlogged(f) {
            self.enlist(flows, f);
        }
    }

    /// Backlogged flow `f` goes to the back of its aggregate's DRR list with a quantum.
    #[inline(always)]
    fn enlist<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let st = flows.st_mut(f);
        let a = st.agg;
        let agg = self.aggs.get_mut(a);
        st.deficit = i64::from(agg.max_len);
        let was_idle = agg.active.is_empty();
        agg.active.push_back(flows, f);
        if was_idle && a != self.in_service {
            self.activate(a);
        }
    }

    /// Flow `f` leaves its aggregate (control path; `V` flushed by the caller).
    fn leave<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let a = flows.st(f).agg;
        if flows.is_backlogged(f) {
            let agg = self.aggs.get_mut(a);
            let found = agg.active.remove(flows, f);
            debug_assert!(found, "a backlogged flow is on its aggregate's list");
            if agg.active.is_empty() && a != self.in_service {
                self.outer.remove(&mut self.aggs, a);
            }
        }
        let st = flows.st_mut(f);
        st.agg = NIL;
        st.next = NIL;
        if self.aggs.leave(a) && a == self.in_service {
            // Gone while in service: nothing left to charge.
            self.start_next();
        }
    }

    /// Membership of every live flow, by aggregate (tests).
    pub fn members<P: Packet>(flows: &Flows<P, Self>) -> HashMap<u32, u32> {
        let mut m = HashMap::new();
        for f in 0..flows.slots() {
            if flows.is_live(f) {
                *m.entry(flows.st(f).agg).or_insert(0) += 1;
            }
        }
        m
    }
}

impl<O: Outer> Policy for PlusSched<O> {
    type FlowState = PlusFlow;
    type Tag = ();

    const INFO: AlgorithmInfo = O::INFO;

    fn from_params(params: &Params) -> Result<Self, ConfigError> {
        let m = params.get_in(&Self::INFO, M_PARAM.name, 8, 1..=MAX_M)?;
        Ok(Self::new(m))
    }

    fn prepare(&mut self, capacity: u32) {
        // A few aggregates per packet of capacity is plenty for most flow sets; more are
        // made on the control path if needed.
        self.aggs.reserve((capacity as usize).min(1 << 16));
    }

    fn flow_added<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        self.flush();
        self.outer.add_weight(i64::from(flows.weight(f)));
        self.join(flows, f);
    }

    fn flow_updated<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        old: crate::flow::FlowParams,
    ) {
        let new = flows.params(f);
        if new.weight == old.weight && new.max_len == old.max_len {
            return; // limits only
        }
        self.flush();
        self.leave(flows, f);
        self.flush();
        self.outer
            .add_weight(i64::from(new.weight) - i64::from(old.weight));
        self.join(flows, f);
    }

    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        self.flush();
        let w = flows.weight(f);
        self.leave(flows, f);
        self.flush();
        self.outer.add_weight(-i64::from(w));
    }

    #[inline(always)]
    fn enqueued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        _len: u32,
        was_empty: bool,
    ) {
        if was_empty {
            self.enlist(flows, f);
        }
    }

    #[inline(always)]
    fn select<P: Packet>(&mut self, flows: &mut Flows<P, Self>) -> Option<u32> {
        loop {
            if self.in_service == NIL {
                return None;
            }
            let agg = self.aggs.get_mut(self.in_service);
            if let Some(f) = agg.active.front() {
                let (len, _, st) = flows.visit(f);
                let len = i64::from(len.expect("listed flows are backlogged"));
                if st.deficit < len {
                    // DRR: the visit ends, another quantum, to the back.
                    st.deficit += i64::from(agg.max_len);
                    agg.active.rotate(flows);
                    continue;
                }
                if len <= agg.budget || agg.budget == agg.budget_start {
                    return Some(f);
                }
            }
            self.switch();
        }
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
        let agg = self.aggs.get_mut(self.in_service);
        agg.budget -= i64::from(len);
        debug_assert_eq!(agg.active.front(), Some(f));
        if !more {
            agg.active.pop_front(flows);
            return;
        }
        // The DRR step now, on the flow entry just touched (Linux's order): if the deficit
        // does not cover the next packet, the visit ends. `select` then usually finds the
        // front flow ready, without a second look at this one.
        let (next, _, st) = flows.visit(f);
        st.deficit -= i64::from(len);
        if st.deficit < i64::from(next.unwrap_or(0)) {
            st.deficit += i64::from(agg.max_len);
            agg.active.rotate(flows);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = vec![
            ("aggregates", self.aggs.live() as u64),
            ("services", self.services),
        ];
        c.extend(self.outer.counters());
        c
    }
}

impl<O: Outer> PlusSched<O> {
    /// Checks the invariants against the flow table (tests): membership and open lists
    /// ([`Aggregates::check`]), every member's key, every aggregate's DRR list holding
    /// exactly its backlogged members, and an aggregate in service whenever a flow is
    /// backlogged.
    pub fn check<P: Packet>(&self, flows: &Flows<P, Self>) {
        self.aggs.check(&Self::members(flows));
        let mut any_backlogged = false;
        for f in (0..flows.slots()).filter(|&f| flows.is_live(f)) {
            let a = flows.st(f).agg;
            let agg = self.aggs.get(a);
            let p = flows.params(f);
            assert_eq!((agg.weight, agg.max_len), (p.weight, p.max_len), "flow {f}");
            let backlogged = flows.is_backlogged(f);
            any_backlogged |= backlogged;
            // walk the circular list from its front
            let mut on_list = 0;
            if let Some(head) = agg.active.front() {
                let mut cur = head;
                loop {
                    if cur == f {
                        on_list += 1;
                    }
                    cur = flows.st(cur).next;
                    if cur == head {
                        break;
                    }
                }
            }
            assert_eq!(on_list, u32::from(backlogged), "flow {f} on its DRR list");
        }
        if any_backlogged {
            assert_ne!(self.in_service, NIL, "backlog but no aggregate in service");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::qfq_plus::QfqOuter;
    use crate::algorithms::wf2qpp::Wf2qOuter;
    use crate::{Desc, FlowId, FlowParams, Sched, Scheduler};
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[derive(Clone, Debug)]
    enum Op {
        Add(u32, u32),
        Enqueue(usize, u8),
        Dequeue(u8),
        Update(usize, u32, u32),
        Remove(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few keys, so that aggregates fill up and flows move between them.
        let key = (1u32..=3, prop_oneof![Just(500u32), Just(1000)]);
        prop_oneof![
            2 => key.clone().prop_map(|(w, l)| Op::Add(w, l)),
            6 => (any::<usize>(), 1u8..5).prop_map(|(f, n)| Op::Enqueue(f, n)),
            5 => (1u8..6).prop_map(Op::Dequeue),
            2 => (any::<usize>(), key).prop_map(|(f, (w, l))| Op::Update(f, w, l)),
            1 => any::<usize>().prop_map(Op::Remove),
        ]
    }

    /// Runs `ops`, checking the invariants after each and the per-flow order of every
    /// dequeued packet against per-flow FIFOs; drains at the end.
    fn run<O: Outer>(m: u32, ops: &[Op]) {
        let mut s = Sched::<PlusSched<O>, Desc>::new(PlusSched::new(m), 512).unwrap();
        let mut live: Vec<(FlowId, VecDeque<u64>)> = Vec::new();
        let mut cookie = 0;
        let dequeue = |s: &mut Sched<PlusSched<O>, Desc>,
                       live: &mut Vec<(FlowId, VecDeque<u64>)>| {
            let Some((id, pkt)) = s.dequeue() else {
                assert!(live.iter().all(|(_, q)| q.is_empty()), "work conserving");
                return;
            };
            let q = &mut live.iter_mut().find(|(f, _)| *f == id).unwrap().1;
            assert_eq!(q.pop_front(), Some(pkt.cookie), "order within flow {id}");
        };
        for op in ops {
            match *op {
                Op::Add(w, l) => {
                    let id = s.add_flow(FlowParams::weighted(w).with_max_len(l)).unwrap();
                    live.push((id, VecDeque::new()));
                }
                Op::Enqueue(f, n) if !live.is_empty() => {
                    let i = f % live.len();
                    let len = s.flow_params(live[i].0).unwrap().max_len;
                    for _ in 0..n {
                        cookie += 1;
                        if s.enqueue(live[i].0, Desc::new(cookie, len)).is_ok() {
                            live[i].1.push_back(cookie);
                        }
                    }
                }
                Op::Dequeue(n) => {
                    for _ in 0..n {
                        dequeue(&mut s, &mut live);
                    }
                }
                Op::Update(f, w, l) if !live.is_empty() => {
                    let i = f % live.len();
                    // a lower max_len with longer packets queued: they stay and leave
                    s.update_flow(live[i].0, FlowParams::weighted(w).with_max_len(l))
                        .unwrap();
                }
                Op::Remove(f) if !live.is_empty() => {
                    let (id, q) = live.swap_remove(f % live.len());
                    let purged: Vec<u64> = s
                        .remove_flow(id)
                        .unwrap()
                        .iter()
                        .map(|p| p.cookie)
                        .collect();
                    assert_eq!(purged, Vec::from(q));
                }
                _ => {}
            }
            s.policy().check(s.flow_table());
        }
        while !s.is_empty() {
            dequeue(&mut s, &mut live);
            s.policy().check(s.flow_table());
        }
        assert!(live.iter().all(|(_, q)| q.is_empty()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Flows come, change key (with backlog) and go: membership, DRR lists and the
        /// in-service aggregate stay consistent, and no packet is lost or reordered.
        #[test]
        fn membership_and_moves(m in 1u32..5, ops in prop::collection::vec(op(), 1..200)) {
            run::<QfqOuter>(m, &ops);
            run::<Wf2qOuter>(m, &ops);
        }
    }

    #[test]
    fn a_backlogged_flow_moves_with_its_packets() {
        // M = 2. a, b in aggregate 0 (weight 1); c alone in aggregate 1 (weight 2).
        let mut s = Sched::<PlusSched<QfqOuter>, Desc>::new(PlusSched::new(2), 64).unwrap();
        let a = s.add_flow(FlowParams::weighted(1)).unwrap();
        let b = s.add_flow(FlowParams::weighted(1)).unwrap();
        let c = s.add_flow(FlowParams::weighted(2)).unwrap();
        let agg =
            |s: &Sched<PlusSched<QfqOuter>, Desc>, f: FlowId| s.flow_table().st(f.index()).agg();
        assert_eq!(agg(&s, a), agg(&s, b));
        assert_ne!(agg(&s, a), agg(&s, c));
        for i in 0..3 {
            s.enqueue(a, Desc::new(i, 100)).unwrap();
            s.enqueue(b, Desc::new(10 + i, 100)).unwrap();
        }
        // b becomes weight 2: it joins c's aggregate (room for one more), packets along
        s.update_flow(b, FlowParams::weighted(2)).unwrap();
        assert_eq!(agg(&s, b), agg(&s, c));
        assert_eq!(s.policy().aggregates().live(), 2);
        s.policy().check(s.flow_table());
        // a third weight-2 flow: c's aggregate is full, a new one is made
        let d = s.add_flow(FlowParams::weighted(2)).unwrap();
        assert_ne!(agg(&s, d), agg(&s, c));
        assert_eq!(s.policy().aggregates().live(), 3);
        // a leaves: its aggregate (in service, backlogged) is freed; b's packets all leave,
        // in order
        assert_eq!(s.remove_flow(a).unwrap().len(), 3);
        assert_eq!(s.policy().aggregates().live(), 2);
        s.policy().check(s.flow_table());
        let out: Vec<u64> = crate::testing::drain_cookies(&mut s);
        assert_eq!(out, [10, 11, 12]);
    }
}
