//! DRR: Deficit Round Robin.
//!
//! M. Shreedhar and G. Varghese, "Efficient fair queueing using deficit round robin",
//! SIGCOMM 1995 (dummynet's `dn_sched_rr.c`, Linux `sch_drr.c`).
//!
//! Backlogged flows take turns in a round-robin list. Each visit gives a flow a quantum of
//! credit, `weight * quantum` bytes (the base `quantum` defaults to the Ethernet MTU); the
//! flow sends head packets while its credit (the *deficit counter*) covers them, and keeps
//! the remainder for its next visit. A flow that empties loses its deficit.
//!
//! # State
//!
//! `active`: the [`FlowList`] of backlogged flows, the one being visited at the front.
//! Per flow: the deficit and whether the current visit has sent anything.
//!
//! # Invariants
//!
//! - A flow is on `active` exactly when it is backlogged (an emptied flow leaves at once).
//! - The front flow's deficit is the credit left in its current visit; a flow behind the
//!   front holds the credit for its next visit (the quantum is added when a visit ends,
//!   and when a flow joins).
//! - `0 <= deficit < weight * quantum + max_len`: a flow only keeps credit that did not
//!   cover its head packet.
//!
//! # Complexity and guarantee
//!
//! O(1) per packet when the quantum covers every packet length; a flow whose packets are
//! larger than its quantum needs several visits per packet ("missed visits", counted as
//! `missed_visits`). Long-run shares are proportional to weights, but a flow may wait a
//! whole round of the other flows' quanta: the worst-case delay grows with the number of
//! flows (T-WFI O(N), QFQ+ paper section 5.4).
//!
//! # Counters
//!
//! The round-robin schedulers (`drr`, `drr-sfo`, the `scrr` family) report the same three,
//! in the terms of the SCRR paper (NSDI 2025):
//!
//! - `visits`: visits that ended, i.e. a flow at the front of the round was rotated to the
//!   back or left the schedule;
//! - `missed_visits` (section 2.4): visits that ended without sending, because the flow's
//!   deficit did not cover its head packet (with a quantum `q`, a packet of `l` bytes
//!   costs up to `ceil(l / q) - 1` of them);
//! - `empty_visits` (section 3.3.3): visits to a scheduled flow found without packets. DRR
//!   takes a flow off the round as soon as it empties, so it has none (always 0).
//!
//! Each is a plain increment on a branch the visit takes anyway.

use crate::error::ConfigError;
use crate::flow::MAX_PACKET_LEN;
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{AlgorithmInfo, ParamInfo, Params, ServiceClass};
use crate::table::NIL;
use crate::util::flowlist::{FlowList, Linked};

/// Per-flow DRR state.
#[derive(Debug)]
pub struct DrrFlow {
    next: u32,
    deficit: u64,
    served: bool,
}

impl Default for DrrFlow {
    fn default() -> Self {
        Self {
            next: NIL,
            deficit: 0,
            served: false,
        }
    }
}

impl Linked for DrrFlow {
    fn link(&mut self) -> &mut u32 {
        &mut self.next
    }
}

/// The DRR quantum parameter, shared with [`super::drr_sfo`].
pub(crate) const QUANTUM_PARAM: ParamInfo = ParamInfo {
    name: "quantum",
    default: "1500",
    help: "base quantum in bytes; a flow's quantum is weight * quantum",
};

/// Reads and range-checks the base quantum.
pub(crate) fn quantum_from(info: &AlgorithmInfo, params: &Params) -> Result<u32, ConfigError> {
    params.get_in(info, "quantum", 1500, 1..=MAX_PACKET_LEN)
}

/// Deficit Round Robin.
#[derive(Debug)]
pub struct Drr {
    active: FlowList,
    quantum: u32,
    visits: u64,
    missed_visits: u64,
}

impl Drr {
    /// DRR with a base quantum of `quantum` bytes.
    pub fn new(quantum: u32) -> Self {
        assert!(quantum > 0);
        Self {
            active: FlowList::new(),
            quantum,
            visits: 0,
            missed_visits: 0,
        }
    }

    #[inline(always)]
    fn quantum_of(&self, weight: u32) -> u64 {
        u64::from(weight) * u64::from(self.quantum)
    }
}

impl Policy for Drr {
    type FlowState = DrrFlow;
    type Tag = ();

    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "drr",
        aliases: &["rr"],
        summary: "deficit round robin, quantum = weight * base quantum",
        complexity: "O(1) (per visit; packets above the quantum need several visits)",
        guarantee: "weighted shares; delay grows with the number of flows",
        source: "Shreedhar, Varghese, SIGCOMM 1995",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::WeightedFair,
        params: &[QUANTUM_PARAM],
    };

    fn from_params(params: &Params) -> Result<Self, ConfigError> {
        Ok(Self::new(quantum_from(&Self::INFO, params)?))
    }

    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        if flows.is_backlogged(f) {
            self.active.remove(flows, f);
        }
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
            let q = self.quantum_of(flows.weight(f));
            let st = flows.st_mut(f);
            st.deficit = q;
            st.served = false;
            self.active.push_back(flows, f);
        }
    }

    #[inline(always)]
    fn select<P: Packet>(&mut self, flows: &mut Flows<P, Self>) -> Option<u32> {
        loop {
            let f = self.active.front()?;
            let (len, weight, st) = flows.visit(f);
            let len = u64::from(len.expect("active flows are backlogged"));
            if len <= st.deficit {
                return Some(f);
            }
            // The visit ends: credit for the next one, and to the back of the round.
            st.deficit += self.quantum_of(weight);
            self.visits += 1;
            if !st.served {
                self.missed_visits += 1;
            }
            st.served = false;
            self.active.rotate(flows);
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
        let st = flows.st_mut(f);
        st.deficit -= u64::from(len);
        st.served = true;
        if !more {
            st.deficit = 0;
            self.visits += 1;
            self.active.pop_front(flows);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("visits", self.visits),
            ("missed_visits", self.missed_visits),
            ("empty_visits", 0),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, FlowParams, Sched, Scheduler};

    #[test]
    fn round_robin_by_quantum() {
        let mut s = Sched::<Drr, Desc>::new(Drr::new(1000), 64).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::weighted(2)).unwrap();
        for i in 0..6 {
            s.enqueue(a, Desc::new(i, 500)).unwrap();
            s.enqueue(b, Desc::new(100 + i, 500)).unwrap();
        }
        let out: Vec<_> = crate::testing::drain_cookies(&mut s);
        // a sends 2 x 500 per visit, b (weight 2) 4 x 500
        assert_eq!(out, [0, 1, 100, 101, 102, 103, 2, 3, 104, 105, 4, 5]);
    }

    #[test]
    fn small_quantum_counts_missed_visits() {
        let mut s = Sched::<Drr, Desc>::new(Drr::new(100), 64).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        s.enqueue(a, Desc::new(0, 300)).unwrap();
        s.enqueue(b, Desc::new(1, 100)).unwrap();
        assert_eq!(s.dequeue().unwrap().1.cookie, 1);
        assert_eq!(s.dequeue().unwrap().1.cookie, 0);
        let stats = s.stats();
        let missed = stats
            .algorithm
            .iter()
            .find(|c| c.0 == "missed_visits")
            .unwrap()
            .1;
        assert_eq!(missed, 2, "a needed three visits for its 300-byte packet");
    }
}
