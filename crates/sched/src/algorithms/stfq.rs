//! STFQ: Start-time Fair Queueing.
//!
//! P. Goyal, H. M. Vin and H. Cheng, "Start-time fair queueing: a scheduling algorithm for
//! integrated services packet switching networks", IEEE/ACM ToN 1997; the SCRR paper
//! (NSDI 2025), section 6.
//!
//! Packets are served in increasing virtual *start* tag, and the system virtual time is the
//! start tag of the packet in service. A newly backlogged flow starts at the current
//! virtual time, so it is served within one packet per other backlogged flow; compared with
//! SCFQ, short flows wait less (Goyal et al. report 53% lower average delay).
//!
//! Tags, state, invariants and the O(log N) cost are those of [`super::self_clocked`];
//! this file only chooses the start tag.

use super::self_clocked::{SelfClocked, TagRule};
use crate::registry::{AlgorithmInfo, ServiceClass};

/// Serve by start tag.
#[derive(Debug)]
pub enum StartTag {}

impl TagRule for StartTag {
    const BY_FINISH: bool = false;
    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "stfq",
        aliases: &["sfq-start"],
        summary: "start-time fair queueing: smallest virtual start tag first",
        complexity: "O(log N)",
        guarantee: "weighted shares; fairness within one maximum packet per flow",
        source: "Goyal, Vin, Cheng, ToN 1997; SCRR paper section 6",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::WeightedFair,
        params: &[],
    };
}

/// Start-time Fair Queueing.
pub type Stfq = SelfClocked<StartTag>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, FlowParams, Sched, Scheduler};

    #[test]
    fn serves_by_start_tag() {
        // a: weight 1, 1000-byte packets; b: weight 1, 250-byte packets. Start tags:
        // a 0,1000,2000; b 0,250,500,750,1000. Ties go to the lower flow index.
        let mut s = Sched::<Stfq, Desc>::with_defaults(64).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        for i in 0..3 {
            s.enqueue(a, Desc::new(i, 1000)).unwrap();
        }
        for i in 0..5 {
            s.enqueue(b, Desc::new(10 + i, 250)).unwrap();
        }
        let out: Vec<_> = crate::testing::drain_cookies(&mut s);
        assert_eq!(out, [0, 10, 11, 12, 13, 1, 14, 2]);
    }

    #[test]
    fn clock_follows_the_packet_in_service_and_ends_at_the_largest_finish() {
        let mut s = Sched::<Stfq, Desc>::with_defaults(64).unwrap();
        let a = s.add_flow(FlowParams::default()).unwrap();
        s.enqueue(a, Desc::new(0, 1000)).unwrap();
        s.enqueue(a, Desc::new(1, 1000)).unwrap();
        s.dequeue().unwrap();
        assert_eq!(s.policy().vtime(), crate::VTime::ZERO);
        s.dequeue().unwrap();
        // idle: v jumps to the largest finish tag served, 2000 bytes
        assert_eq!(s.policy().vtime(), crate::VTime::from_bytes(2000));
    }
}
