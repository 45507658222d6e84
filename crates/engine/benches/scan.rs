//! What the arbiter pays to find work, and what a client pays to announce it.
//!
//! - `scan/bitmap/M/k`: one pass of the activity bitmap over M registered clients of which
//!   k are active, checking each active client's mailbox (what `do_scan` does);
//! - `scan/all/M/k`: the same without the bitmap: checking every registered mailbox;
//! - `submit/...`: a client's push with and without the Dekker fence + activity mark +
//!   arbiter wake check that `Client::submit` adds (the consumer drains in the same thread,
//!   so this is the uncontended cost).
//!
//! `cargo bench -p pspat-engine --bench scan`

use std::hint::black_box;
use std::num::NonZeroU64;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pspat_engine::activity::Activity;
use pspat_engine::wake::{publish_fence, Parker};
use pspat_mailbox::{mailbox, Config, Consumer, Producer};

type Halves = (Vec<Producer<NonZeroU64>>, Vec<Consumer<NonZeroU64>>);

fn clients(m: usize) -> Halves {
    (0..m)
        .map(|_| mailbox::<NonZeroU64>(Config::with_entries(64)).unwrap())
        .unzip()
}

fn scan(c: &mut Criterion) {
    let mut g = c.benchmark_group("scan");
    for &m in &[64usize, 1024, 4096, 16384] {
        let (_p, cons) = clients(m);
        for &k in &[1usize, 8, 64] {
            let act = Activity::new(m);
            for i in 0..k {
                act.mark(i * (m / k));
            }
            g.bench_with_input(BenchmarkId::new(format!("bitmap/{m}"), k), &k, |b, _| {
                b.iter(|| {
                    let mut found = 0;
                    act.for_each_active(|c| found += usize::from(cons[c].has_message()));
                    black_box(found)
                })
            });
            g.bench_with_input(BenchmarkId::new(format!("all/{m}"), k), &k, |b, _| {
                b.iter(|| black_box(cons.iter().filter(|c| c.has_message()).count()))
            });
        }
    }
    g.finish();
}

fn submit(c: &mut Criterion) {
    let mut g = c.benchmark_group("submit");
    let (mut p, mut cons) = mailbox::<NonZeroU64>(Config::with_entries(512)).unwrap();
    let one = NonZeroU64::new(1).unwrap();
    g.bench_function("push_only", |b| {
        b.iter(|| {
            p.push(black_box(one)).unwrap();
            cons.pop()
        })
    });
    let act = Activity::new(64);
    let parker = Parker::new();
    g.bench_function("push_fence_mark_wake", |b| {
        b.iter(|| {
            p.push(black_box(one)).unwrap();
            publish_fence();
            act.mark(3);
            parker.wake();
            cons.pop()
        })
    });
    g.finish();
}

criterion_group!(benches, scan, submit);
criterion_main!(benches);
