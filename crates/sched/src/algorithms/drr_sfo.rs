//! DRR+SFO: Deficit Round Robin with Sparse Flow Optimization.
//!
//! The new/old list scheme of Linux `fq_codel` (RFC 8290, section 4.2), as described in the
//! SCRR paper (NSDI 2025), section 3.3.1: a flow that was not scheduled joins the *new*
//! list, which is always served before the *old* list, so sparse flows (a few packets at a
//! time) overtake backlogged ones. To keep sparse flows from starving the others, a flow
//! that exhausts its quantum moves to the back of the old list, and a flow that empties
//! stays scheduled until its next visit: a new-list flow found empty moves to the old list
//! (if there is one), an old-list flow found empty leaves the schedule. Those *empty
//! visits* are counted (`empty_visits`); SCRR's "No Empty" enhancement removes them.
//!
//! Deficits follow DRR (a packet leaves only if the deficit covers it), with
//! quantum = weight * base quantum. The counters (`visits`, `missed_visits`,
//! `empty_visits`) are defined in [`super::drr`]; an empty visit counts as a visit.
//!
//! # State
//!
//! `new` and `old` [`FlowList`]s; per flow its deficit and which list it is on.
//!
//! # Invariants
//!
//! - Every backlogged flow is on exactly one list; an empty flow may be on a list (until
//!   its next visit) or on none.
//! - Only the front of `new` (or of `old` when `new` is empty) is being served.
//!
//! # Complexity
//!
//! O(1) per visit, as DRR; each empty visit costs one more step.

use crate::error::ConfigError;
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{AlgorithmInfo, Params, ServiceClass};
use crate::table::NIL;
use crate::util::flowlist::{FlowList, Linked};

use super::drr::{quantum_from, QUANTUM_PARAM};

/// Which list a flow is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum On {
    #[default]
    None,
    New,
    Old,
}

/// Per-flow DRR+SFO state.
#[derive(Debug)]
pub struct SfoFlow {
    next: u32,
    deficit: u64,
    on: On,
    served: bool,
}

impl Default for SfoFlow {
    fn default() -> Self {
        Self {
            next: NIL,
            deficit: 0,
            on: On::None,
            served: false,
        }
    }
}

impl Linked for SfoFlow {
    fn link(&mut self) -> &mut u32 {
        &mut self.next
    }
}

/// Deficit Round Robin with Sparse Flow Optimization.
#[derive(Debug)]
pub struct DrrSfo {
    new: FlowList,
    old: FlowList,
    quantum: u32,
    visits: u64,
    missed_visits: u64,
    empty_visits: u64,
}

impl DrrSfo {
    /// DRR+SFO with a base quantum of `quantum` bytes.
    pub fn new(quantum: u32) -> Self {
        assert!(quantum > 0);
        Self {
            new: FlowList::new(),
            old: FlowList::new(),
            quantum,
            visits: 0,
            missed_visits: 0,
            empty_visits: 0,
        }
    }

    fn list(&mut self, on: On) -> &mut FlowList {
        match on {
            On::New => &mut self.new,
            On::Old | On::None => &mut self.old,
        }
    }
}

impl Policy for DrrSfo {
    type FlowState = SfoFlow;
    type Tag = ();

    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "drr-sfo",
        aliases: &["drr+sfo", "sfo"],
        summary: "DRR with sparse flow optimization (new/old flow lists, as fq_codel)",
        complexity: "O(1) (plus one step per empty visit)",
        guarantee: "weighted shares; low latency for sparse flows",
        source: "RFC 8290 section 4.2; SCRR paper (NSDI 2025) section 3.3.1",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::WeightedFair,
        params: &[QUANTUM_PARAM],
    };

    fn from_params(params: &Params) -> Result<Self, ConfigError> {
        Ok(Self::new(quantum_from(&Self::INFO, params)?))
    }

    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let on = flows.st(f).on;
        if on != On::None {
            self.list(on).remove(flows, f);
        }
    }

    #[inline(always)]
    fn enqueued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        _len: u32,
        _was_empty: bool,
    ) {
        if flows.st(f).on == On::None {
            let q = u64::from(flows.weight(f)) * u64::from(self.quantum);
            let st = flows.st_mut(f);
            st.deficit = q;
            st.on = On::New;
            st.served = false;
            self.new.push_back(flows, f);
        }
    }

    #[inline(always)]
    fn select<P: Packet>(&mut self, flows: &mut Flows<P, Self>) -> Option<u32> {
        loop {
            let (on, f) = match self.new.front() {
                Some(f) => (On::New, f),
                None => (On::Old, self.old.front()?),
            };
            let (len, weight, st) = flows.visit(f);
            let Some(len) = len else {
                // Empty visit: a new flow gets one more round on the old list (if any);
                // an old flow leaves the schedule.
                self.empty_visits += 1;
                self.visits += 1;
                let to_old = on == On::New && !self.old.is_empty();
                st.on = if to_old { On::Old } else { On::None };
                self.list(on).pop_front(flows);
                if to_old {
                    self.old.push_back(flows, f);
                }
                continue;
            };
            let q = u64::from(weight) * u64::from(self.quantum);
            if u64::from(len) <= st.deficit {
                return Some(f);
            }
            st.deficit += q;
            self.visits += 1;
            if !st.served {
                self.missed_visits += 1;
            }
            st.served = false;
            st.on = On::Old;
            self.list(on).pop_front(flows);
            self.old.push_back(flows, f);
        }
    }

    #[inline(always)]
    fn dequeued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        _tag: (),
        _more: bool,
    ) {
        let st = flows.st_mut(f);
        st.deficit -= u64::from(len);
        st.served = true;
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("visits", self.visits),
            ("missed_visits", self.missed_visits),
            ("empty_visits", self.empty_visits),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, FlowParams, Sched, Scheduler};

    #[test]
    fn sparse_flow_overtakes_backlogged_ones() {
        let mut s = Sched::<DrrSfo, Desc>::new(DrrSfo::new(1500), 64).unwrap();
        let heavy = s.add_flow(FlowParams::default()).unwrap();
        let sparse = s.add_flow(FlowParams::default()).unwrap();
        for i in 0..10 {
            s.enqueue(heavy, Desc::new(i, 1500)).unwrap();
        }
        assert_eq!(s.dequeue().unwrap().1.cookie, 0);
        assert_eq!(
            s.dequeue().unwrap().1.cookie,
            1,
            "heavy now on the old list"
        );
        s.enqueue(sparse, Desc::new(100, 100)).unwrap();
        assert_eq!(s.dequeue().unwrap().0, sparse, "the new list goes first");
        assert_eq!(s.dequeue().unwrap().1.cookie, 2);
    }

    #[test]
    fn emptied_flow_stays_for_one_round_and_is_counted() {
        let mut s = Sched::<DrrSfo, Desc>::new(DrrSfo::new(1500), 64).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        for i in 0..3 {
            s.enqueue(a, Desc::new(i, 1500)).unwrap();
        }
        s.enqueue(b, Desc::new(10, 100)).unwrap();
        let out: Vec<_> = crate::testing::drain_cookies(&mut s);
        assert_eq!(out, [0, 10, 1, 2]);
        let empty = s
            .stats()
            .algorithm
            .iter()
            .find(|c| c.0 == "empty_visits")
            .unwrap()
            .1;
        // b: new -> old -> gone; a: gone after its last packet
        assert_eq!(empty, 3);
        // both left the schedule: they rejoin the new list in arrival order
        s.enqueue(b, Desc::new(11, 100)).unwrap();
        s.enqueue(a, Desc::new(3, 1500)).unwrap();
        assert_eq!(s.dequeue().unwrap().0, b);
        assert_eq!(s.dequeue().unwrap().0, a);
    }
}
