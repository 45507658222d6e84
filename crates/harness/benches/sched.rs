//! Criterion benches of the harness loop: every registered algorithm (and the `none`
//! baseline) on 1, 1024 and 32768 flows of weight 1, smooth arrivals, `-qmin 4n -qmax 30n`
//! (the acceptance scenario).
//!
//! One sample iteration is [`LOOPS`] loop iterations on a scheduler built once per
//! benchmark and kept warm across samples: the figure is the steady state, not setup.
//! Throughput is in loop iterations (about half enqueues, half dequeues); divide the time
//! per iteration by 2 for the harness's "ns per enqueue+dequeue pair".
//!
//! Smoke run: `cargo bench -p pspat-harness -- --test` (each benchmark once) or `--quick`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pspat_harness::{prepare, BenchSpec, Num, Scenario};
use pspat_sched::registry::algorithms;

/// Loop iterations per sample iteration.
const LOOPS: u64 = 10_000;

fn sched(c: &mut Criterion) {
    let mut group = c.benchmark_group("bench_sched");
    group
        .throughput(Throughput::Elements(LOOPS))
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    let names = std::iter::once("none").chain(algorithms().iter().map(|a| a.name));
    for name in names {
        for flows in [1u32, 1024, 32768] {
            let spec = BenchSpec {
                alg: name.to_owned(),
                qmin: Num::PerFlow(4),
                qmax: Num::PerFlow(30),
                flowsets: Some(format!("1::{flows}")),
                ..BenchSpec::default()
            };
            let mut bench = prepare(Scenario::resolve(&spec).expect("valid scenario"))
                .expect("scheduler builds");
            // Fill to the working backlog first, so samples see the steady state.
            bench.run(u64::from(flows) * 30);
            group.bench_function(BenchmarkId::new(name, format!("1::{flows}")), |b| {
                b.iter(|| bench.run(LOOPS))
            });
            let o = bench.outcome();
            assert_eq!(
                (
                    o.counters.mismatches,
                    o.counters.order_errors,
                    o.counters.lost
                ),
                (0, 0, 0),
                "{name} 1::{flows}"
            );
        }
    }
    group.finish();
}

criterion_group!(benches, sched);
criterion_main!(benches);
