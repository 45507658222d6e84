//! Every registered algorithm, on random short runs, gives back exactly what it was given:
//! no packet lost, duplicated, misrouted or reordered within its flow, no drop when the
//! capacity is the default, and a finite, non-negative fairness index.

use proptest::prelude::*;
use pspat_harness::{run, BenchSpec, Num, Pattern};
use pspat_sched::registry::{algorithms, ServiceClass};

fn flowsets() -> impl Strategy<Value = String> {
    prop::collection::vec((1u32..=16, 1u32..=1500, 1u32..=12), 1..=4).prop_map(|sets| {
        sets.iter()
            .map(|(w, l, f)| format!("{w}:{l}:{f}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

fn specs() -> impl Strategy<Value = BenchSpec> {
    (
        flowsets(),
        0u64..=3,
        1u64..=12,
        prop::bool::ANY,
        any::<u64>(),
        0u64..=4000,
    )
        .prop_map(|(fs, qmin, qmax, bursty, seed, loops)| BenchSpec {
            flowsets: Some(fs),
            qmin: Num::PerFlow(qmin),
            qmax: Num::PerFlow(qmax),
            pattern: if bursty {
                Pattern::Bursty
            } else {
                Pattern::Smooth
            },
            seed,
            loops,
            ..BenchSpec::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_algorithm_conserves_packets(spec in specs()) {
        let names = algorithms().iter().map(|a| (a.name, Some(a.class)));
        for (name, class) in std::iter::once(("none", None)).chain(names) {
            let spec = BenchSpec { alg: name.into(), ..spec.clone() };
            let r = run::run(&spec).unwrap();
            prop_assert!(r.check().is_ok(), "{name}: {:?}\n{r}", r.check());
            prop_assert_eq!(r.mismatches + r.order_errors + r.lost, 0, "{}", name);
            prop_assert_eq!(r.drops_total, 0, "{}: {:?}", name, r.drops);
            prop_assert_eq!(r.enqueued, r.dequeued + r.sched_backlog_end, "{}", name);
            prop_assert_eq!(r.enqueue_attempts, r.enqueued, "{}", name);
            prop_assert_eq!(r.loops_run, spec.loops, "{}", name);
            prop_assert!(r.pending_end <= r.qmax, "{}: {} > {}", name, r.pending_end, r.qmax);
            if class == Some(ServiceClass::WeightedFair) {
                prop_assert!(r.wfi_bytes.is_finite() && r.wfi_bytes >= 0.0, "{}: {}", name, r.wfi_bytes);
                // a shortfall cannot exceed what was sent
                prop_assert!(r.wfi_bytes <= r.sched_bytes as f64, "{}: {}", name, r.wfi_bytes);
            }
        }
    }
}
