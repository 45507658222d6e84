//! The classifier's cost per packet (issue 8: at most 50 ns with 10k table entries).
//!
//! - `classify/frame`: `Classifier::classify_frame` on a mix of IPv4 UDP and TCP frames
//!   whose random sources hit a 10k-entry table, behind four plain rules that do not match
//!   them (the slides' `add queue tablearg out src-ip table(1)` pattern).
//! - `parse/own` vs `parse/etherparse`: frame to `FlowKey`, same frames.
//! - `lpm/indexed` vs `lpm/flat`: the 10k-entry IPv4 table alone, with and without the /16
//!   index.
//!
//! Each iteration handles one packet (the next of 4096 prebuilt ones), so the time per
//! iteration is the time per packet.
//!
//! `taskset -c 1 cargo bench -p pspat-config --bench classify`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use pspat_config::classify::{parse_frame, Classifier, Lpm, Parsed, Verdict};
use pspat_config::Direction;

mod workload;
use workload::*;

fn bench(c: &mut Criterion) {
    let (config, entries) = setup();
    let classifier = Classifier::new(&config).unwrap();
    let mut rng = Rng(42);
    let srcs = sources(&entries, &mut rng);
    let frames = frames(&srcs, &mut rng);
    // Sanity: every frame reaches the table rule and is scheduled.
    for i in 0..FRAMES {
        let f = frames.get(i);
        assert!(matches!(
            classifier.classify_frame(f, Direction::Out),
            Verdict::Schedule { .. }
        ));
        assert_eq!(
            etherparse_key(f),
            match parse_frame(f) {
                Ok(Parsed::Ip(k)) => Some(k.five_tuple()),
                _ => None,
            }
        );
    }
    let lpm = Lpm::new(entries.iter().map(|(p, v)| (p, *v)));

    let mut i = 0;
    let mut g = c.benchmark_group("baseline");
    // The loop's own cost: pick the next frame and read a byte of it.
    g.bench_function("next_frame", |b| {
        b.iter(|| {
            i = (i + 1) & (FRAMES - 1);
            black_box(black_box(frames.get(i))[26])
        })
    });
    g.finish();

    let mut g = c.benchmark_group("classify");
    g.bench_function("frame", |b| {
        b.iter(|| {
            i = (i + 1) & (FRAMES - 1);
            black_box(classifier.classify_frame(black_box(frames.get(i)), Direction::Out))
        })
    });
    g.finish();

    let mut g = c.benchmark_group("parse");
    g.bench_function("own", |b| {
        b.iter(|| {
            i = (i + 1) & (FRAMES - 1);
            black_box(parse_frame(black_box(frames.get(i))).ok())
        })
    });
    g.bench_function("etherparse", |b| {
        b.iter(|| {
            i = (i + 1) & (FRAMES - 1);
            black_box(etherparse_key(black_box(frames.get(i))))
        })
    });
    g.finish();

    let mut g = c.benchmark_group("lpm");
    g.bench_function("indexed", |b| {
        b.iter(|| {
            i = (i + 1) & (FRAMES - 1);
            black_box(lpm.lookup_v4(black_box(srcs[i])))
        })
    });
    g.bench_function("flat", |b| {
        b.iter(|| {
            i = (i + 1) & (FRAMES - 1);
            black_box(lpm.lookup_v4_flat(black_box(srcs[i])))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
