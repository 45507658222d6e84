//! PRIO: strict priority between bands, round robin between the flows of a band.
//!
//! As Linux `prio` and dummynet's `dn_sched_prio.c`: a packet of band `b` leaves only when
//! bands `0..b` are empty. A flow's band is its [`crate::FlowParams::priority`]. Several
//! flows may share a band; they take turns one packet at a time, so no flow of a band can
//! starve another of the same band.
//!
//! # State
//!
//! One [`FlowList`] of backlogged flows per band and a bitmap of non-empty bands.
//!
//! # Invariants
//!
//! - A flow is on its band's list exactly when it is backlogged.
//! - Bit `b` of `mask` is set exactly when band `b`'s list is non-empty.
//! - The selected flow is the front of the lowest non-empty band, found with one
//!   count-trailing-zeros.
//!
//! # Complexity
//!
//! O(1) per operation, independent of the number of flows and bands. Strict priority
//! gives no guarantee to lower bands: a backlogged band starves every band after it.

use crate::error::{ConfigError, ParamError};
use crate::flow::FlowParams;
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{AlgorithmInfo, ParamInfo, Params, ServiceClass};
use crate::table::NIL;
use crate::util::flowlist::{FlowList, Linked};

/// Most bands (one bit each in a `u64`).
pub const MAX_BANDS: u32 = 64;

/// Per-flow state: the link on the band list.
#[derive(Debug)]
pub struct PrioFlow {
    next: u32,
}

impl Default for PrioFlow {
    fn default() -> Self {
        Self { next: NIL }
    }
}

impl Linked for PrioFlow {
    fn link(&mut self) -> &mut u32 {
        &mut self.next
    }
}

/// Strict priority.
#[derive(Debug)]
pub struct Prio {
    bands: Vec<FlowList>,
    mask: u64,
}

impl Prio {
    /// A scheduler with `bands` bands (`1..=64`).
    pub fn new(bands: u32) -> Self {
        assert!((1..=MAX_BANDS).contains(&bands));
        Self {
            bands: vec![FlowList::new(); bands as usize],
            mask: 0,
        }
    }

    /// Number of bands.
    pub fn bands(&self) -> u32 {
        self.bands.len() as u32
    }

    fn unlink<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, band: u8) {
        let list = &mut self.bands[band as usize];
        list.remove(flows, f);
        if list.is_empty() {
            self.mask &= !(1u64 << band);
        }
    }
}

impl Policy for Prio {
    type FlowState = PrioFlow;
    type Tag = ();

    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "prio",
        aliases: &[],
        summary: "strict priority between bands (0 first), round robin inside a band",
        complexity: "O(1)",
        guarantee: "band b is served only when bands 0..b are empty",
        source: "Linux sch_prio.c; dummynet dn_sched_prio.c",
        file: "src/algorithms/prio.rs",
        class: ServiceClass::StrictPriority,
        params: &[ParamInfo {
            name: "bands",
            default: "16",
            help: "number of priority bands, 1..=64",
        }],
    };

    fn from_params(params: &Params) -> Result<Self, ConfigError> {
        Ok(Self::new(params.get_in(
            &Self::INFO,
            "bands",
            16,
            1..=MAX_BANDS,
        )?))
    }

    fn check_flow(&self, params: &FlowParams) -> Result<(), ParamError> {
        if u32::from(params.priority) >= self.bands() {
            return Err(ParamError::Unsupported(format!(
                "invalid priority {}: this prio scheduler has bands 0..={}",
                params.priority,
                self.bands() - 1
            )));
        }
        Ok(())
    }

    fn flow_updated<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, old: FlowParams) {
        let band = flows.priority(f);
        if band != old.priority && flows.is_backlogged(f) {
            self.unlink(flows, f, old.priority);
            self.bands[band as usize].push_back(flows, f);
            self.mask |= 1u64 << band;
        }
    }

    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        if flows.is_backlogged(f) {
            let band = flows.priority(f);
            self.unlink(flows, f, band);
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
            let band = flows.priority(f);
            self.bands[band as usize].push_back(flows, f);
            self.mask |= 1u64 << band;
        }
    }

    #[inline(always)]
    fn select<P: Packet>(&mut self, _flows: &mut Flows<P, Self>) -> Option<u32> {
        if self.mask == 0 {
            return None;
        }
        self.bands[self.mask.trailing_zeros() as usize].front()
    }

    #[inline(always)]
    fn dequeued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        _len: u32,
        _tag: (),
        next: Option<u32>,
    ) {
        let band = flows.priority(f);
        let list = &mut self.bands[band as usize];
        if next.is_some() {
            list.rotate(flows);
        } else {
            list.pop_front(flows);
            if list.is_empty() {
                self.mask &= !(1u64 << band);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, Sched, Scheduler};

    fn drain(s: &mut Sched<Prio, Desc>) -> Vec<u64> {
        std::iter::from_fn(|| s.dequeue())
            .map(|(_, d)| d.cookie)
            .collect()
    }

    #[test]
    fn lower_band_first_round_robin_inside() {
        let mut s = Sched::<Prio, Desc>::with_defaults(64).unwrap();
        let lo = s.add_flow(FlowParams::default().with_priority(2)).unwrap();
        let hi1 = s.add_flow(FlowParams::default().with_priority(0)).unwrap();
        let hi2 = s.add_flow(FlowParams::default().with_priority(0)).unwrap();
        s.enqueue(lo, Desc::new(100, 10)).unwrap();
        for i in 0..2 {
            s.enqueue(hi1, Desc::new(10 + i, 10)).unwrap();
            s.enqueue(hi2, Desc::new(20 + i, 10)).unwrap();
        }
        assert_eq!(drain(&mut s), [10, 20, 11, 21, 100]);
    }

    #[test]
    fn priority_beyond_the_bands_is_refused() {
        let mut s = Sched::<Prio, Desc>::new(Prio::new(4), 8).unwrap();
        let e = s
            .add_flow(FlowParams::default().with_priority(4))
            .unwrap_err()
            .to_string();
        assert!(e.contains("priority 4") && e.contains("0..=3"), "{e}");
    }

    #[test]
    fn moving_a_backlogged_flow_to_another_band() {
        let mut s = Sched::<Prio, Desc>::with_defaults(64).unwrap();
        let a = s.add_flow(FlowParams::default().with_priority(1)).unwrap();
        let b = s.add_flow(FlowParams::default().with_priority(0)).unwrap();
        s.enqueue(a, Desc::new(1, 10)).unwrap();
        s.enqueue(b, Desc::new(2, 10)).unwrap();
        s.update_flow(a, FlowParams::default().with_priority(0))
            .unwrap();
        s.update_flow(b, FlowParams::default().with_priority(3))
            .unwrap();
        assert_eq!(drain(&mut s), [1, 2]);
    }
}
