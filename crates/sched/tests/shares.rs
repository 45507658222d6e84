//! Long-run service shares of every registered algorithm with all flows backlogged.
//!
//! Weighted-fair algorithms must give each flow a byte share proportional to its weight,
//! whatever the packet sizes; strict priority must give everything to the best band; FIFO
//! serves in arrival order, which with equal refill gives every flow the same packet rate.

use proptest::prelude::*;
use pspat_sched::{registry, Desc, FlowId, FlowParams, Params, Scheduler, ServiceClass};

/// Keeps every flow backlogged: each dequeued packet is replaced by one of the same flow.
/// Returns bytes sent per flow after `n` dequeues.
fn backlogged_run(alg: &str, flows: &[(u32, u32, u8)], n: usize) -> Vec<u64> {
    let mut s = registry::build::<Desc>(alg, &Params::new(), 4096).unwrap();
    let ids: Vec<FlowId> = flows
        .iter()
        .map(|&(w, len, prio)| {
            s.add_flow(
                FlowParams::weighted(w)
                    .with_max_len(len)
                    .with_priority(prio),
            )
            .unwrap()
        })
        .collect();
    let mut cookie = 0;
    for (i, &(_, len, _)) in flows.iter().enumerate() {
        for _ in 0..4 {
            cookie += 1;
            s.enqueue(ids[i], Desc::new(cookie, len)).unwrap();
        }
    }
    let mut bytes = vec![0u64; flows.len()];
    for _ in 0..n {
        let (f, d) = s.dequeue().expect("all flows backlogged");
        let i = ids.iter().position(|&x| x == f).unwrap();
        bytes[i] += u64::from(d.len);
        cookie += 1;
        s.enqueue(f, Desc::new(cookie, d.len)).unwrap();
    }
    bytes
}

/// Jain's fairness index of the weight-normalised throughputs (1 = perfectly fair).
fn jain(bytes: &[u64], weights: &[u32]) -> f64 {
    let x: Vec<f64> = bytes
        .iter()
        .zip(weights)
        .map(|(&b, &w)| b as f64 / f64::from(w))
        .collect();
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * sq)
}

fn weighted_fair() -> impl Iterator<Item = &'static str> {
    registry::algorithms()
        .iter()
        .filter(|a| a.class == ServiceClass::WeightedFair)
        .map(|a| a.name)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Shares proportional to weights within 5% of each flow's own share, and Jain's index
    /// of the normalised throughputs at least 0.999, for mixed weights and packet sizes.
    #[test]
    fn weighted_fair_algorithms_share_by_weight(
        flows in prop::collection::vec((1u32..=8, 64u32..=1500), 2..10),
    ) {
        let flows: Vec<(u32, u32, u8)> = flows.into_iter().map(|(w, l)| (w, l, 0)).collect();
        let weights: Vec<u32> = flows.iter().map(|f| f.0).collect();
        let wsum: u32 = weights.iter().sum();
        for alg in weighted_fair() {
            let bytes = backlogged_run(alg, &flows, 30_000);
            let total: u64 = bytes.iter().sum();
            for (i, &b) in bytes.iter().enumerate() {
                let want = total as f64 * f64::from(weights[i]) / f64::from(wsum);
                let err = (b as f64 - want).abs() / want;
                prop_assert!(err <= 0.05, "{}: flow {} (w {}) got {} bytes, fair share {:.0} ({:.1}% off)",
                    alg, i, weights[i], b, want, err * 100.0);
            }
            let j = jain(&bytes, &weights);
            prop_assert!(j >= 0.999, "{}: Jain index {:.5} for {:?}", alg, j, bytes);
        }
    }
}

/// A fixed scenario for every algorithm: throughput per flow and Jain's index, checked
/// against what its service class promises.
#[test]
fn service_class_snapshot() {
    // (weight, packet length, priority band)
    let flows = [(1, 1500, 2), (2, 1000, 1), (4, 200, 1), (1, 64, 0)];
    let weights: Vec<u32> = flows.iter().map(|f| f.0).collect();
    for info in registry::algorithms() {
        let bytes = backlogged_run(info.name, &flows, 20_000);
        let j = jain(&bytes, &weights);
        println!("{:<10} bytes {:?} jain {:.4}", info.name, bytes, j);
        match info.class {
            ServiceClass::WeightedFair => assert!(j >= 0.999, "{}: jain {j}", info.name),
            ServiceClass::StrictPriority => {
                // only band 0 (flow 3) is ever served while it is backlogged
                assert_eq!(bytes[..3], [0, 0, 0], "{}", info.name);
                assert_eq!(bytes[3], 20_000 * 64, "{}", info.name);
            }
            ServiceClass::Fifo => {
                // equal refill: every flow gets the same number of packets (within one)
                let pkts: Vec<u64> = bytes
                    .iter()
                    .zip(&flows)
                    .map(|(b, f)| b / u64::from(f.1))
                    .collect();
                let (lo, hi) = (pkts.iter().min().unwrap(), pkts.iter().max().unwrap());
                assert!(hi - lo <= 1, "{}: packets {pkts:?}", info.name);
                assert!(
                    j < 0.9,
                    "{}: FIFO is not weighted-fair here (jain {j})",
                    info.name
                );
            }
        }
    }
}
