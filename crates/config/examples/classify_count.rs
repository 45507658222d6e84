//! The classifier benchmark's operations in a plain loop, for instruction counts:
//!
//! `valgrind --tool=callgrind target/release/examples/classify_count OP N`
//!
//! with OP one of `none` (the loop alone), `frame`, `table-only` (`frame` without the
//! plain rules), `key` (`frame` on parsed keys), `lpm-dep` (dependent lookups), `own`, `etherparse`, `lpm`, `lpm-flat`.
//! Subtract `none` and divide by N for the cost per packet. `frame` and `key` call the
//! classifier through the non-inlined `cf` and `ck`, so that callgrind's per-instruction
//! counts (`--dump-instr=yes`) can be read against `objdump -d` of one function.

use std::hint::black_box;

use pspat_config::classify::{parse_frame, Classifier, Lpm};
use pspat_config::Direction;

#[allow(dead_code)]
#[path = "../benches/workload/mod.rs"]
mod workload;
use workload::*;

fn main() {
    let mut args = std::env::args().skip(1);
    let op = args.next().unwrap_or_else(|| "frame".into());
    let n: usize = args.next().map_or(1_000_000, |s| s.parse().expect("N"));
    let (mut config, entries) = setup();
    if op == "table-only" {
        // The table rule alone: what the plain rules before it cost.
        config.rules.retain(|r| r.number == 100);
    }
    let classifier = Classifier::new(&config).unwrap();
    let mut rng = Rng(42);
    let srcs = sources(&entries, &mut rng);
    let frames = frames(&srcs, &mut rng);
    let lpm = Lpm::new(entries.iter().map(|(p, v)| (p, *v)));
    eprintln!(
        "table: {} entries, {} intervals, {} search steps",
        lpm.len(),
        lpm.v4_intervals(),
        lpm.v4_steps()
    );
    let keys: Vec<pspat_config::classify::FlowKey> = (0..FRAMES)
        .map(|i| match parse_frame(frames.get(i)) {
            Ok(pspat_config::classify::Parsed::Ip(k)) => k,
            _ => unreachable!(),
        })
        .collect();
    let mut acc = 0u64;
    // Timed in chunks of one pass over the frames; the fastest chunk is reported (the
    // machine is shared: a chunk that was not interrupted is the cost).
    let mut best = f64::MAX;
    let mut k = 0;
    while k < n {
        let t0 = std::time::Instant::now();
        for _ in 0..FRAMES {
            let i = k & (FRAMES - 1);
            k += 1;
            let f = black_box(frames.get(i));
            acc += match op.as_str() {
                "none" => u64::from(f[26]),
                // The whole result goes through `black_box`, as in the criterion bench, so
                // that nothing the caller would use is optimised away.
                "frame" | "table-only" => u64::from(matches!(
                    black_box(cf(&classifier, f)),
                    pspat_config::classify::Verdict::Schedule { .. }
                )),
                "key" => u64::from(matches!(
                    black_box(ck(&classifier, black_box(&keys[i]))),
                    pspat_config::classify::Verdict::Schedule { .. }
                )),
                "lpm-dep" => {
                    // Each address depends on the previous answer: latency, not throughput.
                    let a = srcs[i] ^ (acc as u32 & 1);
                    u64::from(lpm.lookup_v4(a).unwrap_or(0))
                }
                "own" => u64::from(black_box(parse_frame(f).ok()).is_some()),
                "etherparse" => u64::from(black_box(etherparse_key(f)).is_some()),
                "lpm" => u64::from(lpm.lookup_v4(black_box(srcs[i])).unwrap_or(0)),
                "lpm-flat" => u64::from(lpm.lookup_v4_flat(black_box(srcs[i])).unwrap_or(0)),
                _ => panic!("unknown op {op}"),
            };
        }
        best = best.min(t0.elapsed().as_nanos() as f64 / FRAMES as f64);
    }
    println!("{op} {n} {acc} {best:.2} ns/iteration (fastest pass over the {FRAMES} frames)");
}

#[inline(never)]
fn ck(c: &Classifier, k: &pspat_config::classify::FlowKey) -> pspat_config::classify::Verdict {
    c.classify_key(k, Direction::Out)
}

#[inline(never)]
fn cf(c: &Classifier, f: &[u8]) -> pspat_config::classify::Verdict {
    c.classify_frame(f, Direction::Out)
}
