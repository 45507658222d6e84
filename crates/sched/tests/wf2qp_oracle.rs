//! WF2Q+ (two heaps with packed keys) against WF2Q+ by linear scan: identical departure
//! order.

use proptest::prelude::*;
use pspat_sched::algorithms::wf2qp::Wf2qPlus;
use pspat_sched::reference::wf2qp_linear::Wf2qLinear;
use pspat_sched::{Desc, FlowId, FlowParams, Sched, Scheduler, VTime};

#[derive(Debug, Clone)]
enum Op {
    Enqueue { flow: usize, len: u32, burst: u8 },
    Dequeue { n: u8 },
    Reweight { flow: usize, weight: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<usize>(), 1u32..=9000, 1u8..5).prop_map(|(flow, len, burst)| Op::Enqueue { flow, len, burst }),
        5 => (1u8..10).prop_map(|n| Op::Dequeue { n }),
        1 => (any::<usize>(), 1u32..=1000).prop_map(|(flow, weight)| Op::Reweight { flow, weight }),
    ]
}

/// Runs `ops` on both; returns the fast scheduler's final virtual time.
fn check(weights: &[u32], ops: &[Op]) -> Result<VTime, TestCaseError> {
    let mut fast = Sched::<Wf2qPlus, Desc>::with_defaults(1 << 16).unwrap();
    let mut slow = Wf2qLinear::new();
    let mut ids: Vec<FlowId> = Vec::new();
    for &w in weights {
        ids.push(
            fast.add_flow(FlowParams::weighted(w).with_max_len(9000))
                .unwrap(),
        );
        slow.add_flow(w);
    }
    let mut cookie = 0u64;
    let dequeue = |fast: &mut Sched<Wf2qPlus, Desc>, slow: &mut Wf2qLinear, ids: &[FlowId]| {
        let got = fast
            .dequeue()
            .map(|(f, d)| (ids.iter().position(|&i| i == f).unwrap(), d.cookie));
        let want = slow.dequeue();
        prop_assert_eq!(got, want);
        Ok(())
    };
    for op in ops {
        match *op {
            Op::Enqueue { flow, len, burst } => {
                let i = flow % ids.len();
                for _ in 0..burst {
                    cookie += 1;
                    fast.enqueue(ids[i], Desc::new(cookie, len)).unwrap();
                    slow.enqueue(i, cookie, len);
                }
            }
            Op::Dequeue { n } => {
                for _ in 0..n {
                    dequeue(&mut fast, &mut slow, &ids)?;
                }
            }
            Op::Reweight { flow, weight } => {
                let i = flow % ids.len();
                fast.update_flow(ids[i], FlowParams::weighted(weight).with_max_len(9000))
                    .unwrap();
                slow.set_weight(i, weight);
            }
        }
    }
    while !fast.is_empty() {
        dequeue(&mut fast, &mut slow, &ids)?;
    }
    prop_assert_eq!(slow.dequeue(), None);
    Ok(fast.policy().vtime())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn same_departures_as_the_linear_oracle(
        weights in prop::collection::vec(1u32..=1000, 1..24),
        ops in prop::collection::vec(op(), 1..400),
    ) {
        check(&weights, &ops)?;
    }
}

/// Many flows with mixed weights and long backlogs: the heaps stay in step with the oracle.
#[test]
fn long_run_with_many_flows_matches_the_oracle() {
    let weights: Vec<u32> = (0..300).map(|i| 1 + (i * 37) % 64).collect();
    let mut ops = Vec::new();
    for round in 0..3000usize {
        ops.push(Op::Enqueue {
            flow: round * 7919,
            len: 64 + (round as u32 * 131) % 8936,
            burst: 3,
        });
        ops.push(Op::Dequeue { n: 3 });
    }
    check(&weights, &ops).unwrap();
}

/// Timestamps are 128-bit and the heaps pack them with the flow index: drive the clock past
/// 2^32 bytes per unit weight (beyond 64 bits of fixed point) and check that the order is
/// unchanged.
#[test]
fn clock_beyond_64_bits_keeps_the_order() {
    let mut ops = Vec::new();
    for round in 0..600_000usize {
        ops.push(Op::Enqueue {
            flow: round,
            len: 9000 - (round as u32 % 3) * 1000,
            burst: 2,
        });
        ops.push(Op::Dequeue { n: 2 });
    }
    // 1.2M packets of 8 kB on average over a total weight of 2
    let v = check(&[1, 1], &ops).unwrap();
    assert!(
        v > VTime::from_bytes(1 << 32),
        "clock only at {} bytes",
        v.as_bytes_f64()
    );
}
