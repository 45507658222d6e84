//! SCFQ: Self-Clocked Fair Queueing.
//!
//! S. J. Golestani, "A self-clocked fair queueing scheme for broadband applications",
//! INFOCOM 1994; the SCRR paper (NSDI 2025), section 6.
//!
//! Packets are served in increasing virtual *finish* tag, and the system virtual time is the
//! finish tag of the packet in service: the scheduler clocks itself from the packets it
//! serves instead of simulating the fluid system as WFQ does.
//!
//! Tags, state, invariants and the O(log N) cost are those of [`super::self_clocked`];
//! this file only chooses the finish tag.

use super::self_clocked::{SelfClocked, TagRule};
use crate::registry::{AlgorithmInfo, ServiceClass};

/// Serve by finish tag.
#[derive(Debug)]
pub enum FinishTag {}

impl TagRule for FinishTag {
    const BY_FINISH: bool = true;
    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "scfq",
        aliases: &["sfq-finish"],
        summary: "self-clocked fair queueing: smallest virtual finish tag first",
        complexity: "O(log N)",
        guarantee: "weighted shares; fairness within one maximum packet per flow",
        source: "Golestani, INFOCOM 1994; SCRR paper section 6",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::WeightedFair,
        params: &[],
    };
}

/// Self-Clocked Fair Queueing.
pub type Scfq = SelfClocked<FinishTag>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, FlowParams, Sched, Scheduler};

    #[test]
    fn serves_by_finish_tag() {
        // finish tags: a 1000,2000,3000; b 250,500,750,1000,1250 (ties: lower index)
        let mut s = Sched::<Scfq, Desc>::with_defaults(64).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        for i in 0..3 {
            s.enqueue(a, Desc::new(i, 1000)).unwrap();
        }
        for i in 0..5 {
            s.enqueue(b, Desc::new(10 + i, 250)).unwrap();
        }
        let out: Vec<_> = crate::testing::drain_cookies(&mut s);
        assert_eq!(out, [10, 11, 12, 0, 13, 14, 1, 2]);
    }

    #[test]
    fn late_flow_starts_from_the_clock() {
        // b arrives after a's first packet (finish 1000) was served: v = 1000, so b's first
        // finish tag is 1000 + 500 = 1500, before a's second (2000).
        let mut s = Sched::<Scfq, Desc>::with_defaults(64).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        s.enqueue(a, Desc::new(0, 1000)).unwrap();
        s.enqueue(a, Desc::new(1, 1000)).unwrap();
        assert_eq!(s.dequeue().unwrap().1.cookie, 0);
        s.enqueue(b, Desc::new(10, 500)).unwrap();
        assert_eq!(s.dequeue().unwrap().1.cookie, 10);
        assert_eq!(s.dequeue().unwrap().1.cookie, 1);
    }
}
