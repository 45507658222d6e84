//! Cross-core transfer rate: pspat-mailbox against `rtrb::RingBuffer` and crossbeam's
//! `ArrayQueue` (issue 6, item 1).
//!
//! A producer thread pinned to one CPU pushes messages as fast as it can, a consumer
//! thread pinned to another pops them; both spin (no sleep, no yield) on full and empty.
//! Timed from a barrier both threads pass to the consumer's last message. Messages of 8
//! bytes (`NonZeroU64`) and 32 bytes (4 words, the engine's `Pkt` size); queues of 512 and
//! 4096 entries (the mailbox on 64-byte lines, so it holds 512 - 8 or 512 - 2 at most).
//!
//! Three modes:
//!
//! - criterion (the default, and `cargo bench -- --test`, which CI runs as a smoke test):
//!   `cargo bench -p pspat-mailbox --bench transfer`, throughput in messages/s;
//! - interleaved rounds for docs/PERFORMANCE.md: `PSPAT_TRANSFER_ROUNDS=7 cargo bench -p
//!   pspat-mailbox --bench transfer` runs every case once per round in the order mailbox,
//!   rtrb, ArrayQueue, and prints the best and the median round of each with ratios;
//! - single-threaded, for instruction counts under callgrind: `PSPAT_TRANSFER_SINGLE=Q:B:N`
//!   (Q = mailbox, rtrb or arrayq; B = 8 or 32 bytes) pushes 64 messages into a queue of
//!   512 and pops them, N times, on one thread: the data-path cost without the coherence
//!   traffic. `valgrind --tool=callgrind` on two values of N gives instructions per
//!   push+pop pair as the difference over 64 (N2 - N1) messages.
//!
//! Pinning uses `sched_setaffinity` on the first two CPUs the process may use; with fewer
//! than two, or if the call fails, the threads run unpinned (said on stderr).

use std::hint::spin_loop;
use std::num::NonZeroU64;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use pspat_mailbox::{mailbox, Config, Message};

mod common;
use common::{cpus_or_warn, pin, Four};

/// Messages transferred per criterion iteration.
const BATCH: u64 = 10_000;

/// A message built from its sequence number; the consumer checks one word of it so the
/// reads cannot be optimised away.
trait Msg: Message + Send + 'static {
    const BYTES: usize;
    fn make(i: u64) -> Self;
    fn seq(&self) -> u64;
}

impl Msg for NonZeroU64 {
    const BYTES: usize = 8;
    #[inline]
    fn make(i: u64) -> Self {
        NonZeroU64::new(i).unwrap()
    }
    #[inline]
    fn seq(&self) -> u64 {
        self.get()
    }
}

impl Msg for Four {
    const BYTES: usize = 32;
    #[inline]
    fn make(i: u64) -> Self {
        Four([i, i ^ 1, i ^ 2, i ^ 3])
    }
    #[inline]
    fn seq(&self) -> u64 {
        if self.0[0] == self.0[3] ^ 3 {
            self.0[0]
        } else {
            0
        }
    }
}

/// One single-producer single-consumer queue under test.
trait Queue<M: Msg> {
    const NAME: &'static str;
    type P: Send + 'static;
    type C: Send + 'static;
    fn new(entries: usize) -> (Self::P, Self::C);
    fn push(p: &mut Self::P, m: M) -> Result<(), M>;
    fn pop(c: &mut Self::C) -> Option<M>;
}

struct Mailbox;
impl<M: Msg> Queue<M> for Mailbox {
    const NAME: &'static str = "pspat-mailbox";
    type P = pspat_mailbox::Producer<M>;
    type C = pspat_mailbox::Consumer<M>;
    fn new(entries: usize) -> (Self::P, Self::C) {
        mailbox::<M>(Config::with_entries(entries)).unwrap()
    }
    #[inline]
    fn push(p: &mut Self::P, m: M) -> Result<(), M> {
        p.push(m)
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<M> {
        c.pop()
    }
}

struct Rtrb;
impl<M: Msg> Queue<M> for Rtrb {
    const NAME: &'static str = "rtrb";
    type P = rtrb::Producer<M>;
    type C = rtrb::Consumer<M>;
    fn new(entries: usize) -> (Self::P, Self::C) {
        rtrb::RingBuffer::new(entries)
    }
    #[inline]
    fn push(p: &mut Self::P, m: M) -> Result<(), M> {
        p.push(m).map_err(|rtrb::PushError::Full(m)| m)
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<M> {
        c.pop().ok()
    }
}

struct CrossbeamArray;
impl<M: Msg> Queue<M> for CrossbeamArray {
    const NAME: &'static str = "crossbeam-ArrayQueue";
    type P = Arc<ArrayQueue<M>>;
    type C = Arc<ArrayQueue<M>>;
    fn new(entries: usize) -> (Self::P, Self::C) {
        let q = Arc::new(ArrayQueue::new(entries));
        (Arc::clone(&q), q)
    }
    #[inline]
    fn push(p: &mut Self::P, m: M) -> Result<(), M> {
        p.push(m)
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<M> {
        c.pop()
    }
}

/// Moves `n` messages from a producer thread to a consumer thread through a fresh queue of
/// `entries`; returns the time from both threads' start to the last message received.
fn transfer<M: Msg, Q: Queue<M>>(entries: usize, n: u64, cpus: Option<(usize, usize)>) -> Duration {
    let (mut p, mut c) = Q::new(entries);
    let start = Arc::new(Barrier::new(2));
    let start_p = Arc::clone(&start);
    let producer = std::thread::Builder::new()
        .name("bench-producer".into())
        .spawn(move || {
            if let Some((cpu, _)) = cpus {
                pin(cpu);
            }
            start_p.wait();
            for i in 1..=n {
                let mut m = M::make(i);
                while let Err(back) = Q::push(&mut p, m) {
                    m = back;
                    spin_loop();
                }
            }
        })
        .unwrap();
    let consumer = std::thread::Builder::new()
        .name("bench-consumer".into())
        .spawn(move || {
            if let Some((_, cpu)) = cpus {
                pin(cpu);
            }
            start.wait();
            let t0 = Instant::now();
            let mut next = 1;
            while next <= n {
                match Q::pop(&mut c) {
                    Some(m) => {
                        assert_eq!(m.seq(), next, "{} lost or reordered a message", Q::NAME);
                        next += 1;
                    }
                    None => spin_loop(),
                }
            }
            t0.elapsed()
        })
        .unwrap();
    producer.join().unwrap();
    consumer.join().unwrap()
}

const SIZES: [usize; 2] = [512, 4096];

fn bench_one<M: Msg>(c: &mut Criterion, cpus: Option<(usize, usize)>) {
    let mut g = c.benchmark_group(format!("transfer-{}B", M::BYTES));
    g.throughput(Throughput::Elements(BATCH));
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    for entries in SIZES {
        // Adjacent per case, so the three queues see the same machine state.
        g.bench_function(
            BenchmarkId::new(<Mailbox as Queue<M>>::NAME, entries),
            |b| b.iter_custom(|iters| transfer::<M, Mailbox>(entries, iters * BATCH, cpus)),
        );
        g.bench_function(BenchmarkId::new(<Rtrb as Queue<M>>::NAME, entries), |b| {
            b.iter_custom(|iters| transfer::<M, Rtrb>(entries, iters * BATCH, cpus))
        });
        g.bench_function(
            BenchmarkId::new(<CrossbeamArray as Queue<M>>::NAME, entries),
            |b| b.iter_custom(|iters| transfer::<M, CrossbeamArray>(entries, iters * BATCH, cpus)),
        );
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    let cpus = cpus_or_warn("transfer");
    bench_one::<NonZeroU64>(c, cpus);
    bench_one::<Four>(c, cpus);
}

criterion_group!(transfer_benches, benches);

/// Interleaved rounds: every case once per round; the best and the median round of each,
/// with ratios of the mailbox's rate to the others'.
fn rounds(rounds: usize, n: u64) {
    let cpus = cpus_or_warn("transfer");
    println!("transfer: {n} messages per run, {rounds} interleaved rounds, CPUs {cpus:?}");
    println!(
        "{:>5} {:>6} {:>14} {:>14} {:>14} {:>10} {:>10}",
        "bytes", "queue", "mailbox Mmsg/s", "rtrb Mmsg/s", "ArrayQ Mmsg/s", "mb/rtrb", "mb/ArrayQ"
    );
    type Case = (
        usize,
        usize,
        [fn(usize, u64, Option<(usize, usize)>) -> Duration; 3],
    );
    let cases: [Case; 4] = [
        (
            8,
            512,
            [
                transfer::<NonZeroU64, Mailbox>,
                transfer::<NonZeroU64, Rtrb>,
                transfer::<NonZeroU64, CrossbeamArray>,
            ],
        ),
        (
            8,
            4096,
            [
                transfer::<NonZeroU64, Mailbox>,
                transfer::<NonZeroU64, Rtrb>,
                transfer::<NonZeroU64, CrossbeamArray>,
            ],
        ),
        (
            32,
            512,
            [
                transfer::<Four, Mailbox>,
                transfer::<Four, Rtrb>,
                transfer::<Four, CrossbeamArray>,
            ],
        ),
        (
            32,
            4096,
            [
                transfer::<Four, Mailbox>,
                transfer::<Four, Rtrb>,
                transfer::<Four, CrossbeamArray>,
            ],
        ),
    ];
    let mut times: Vec<[Vec<Duration>; 3]> = vec![Default::default(); cases.len()];
    for _ in 0..rounds {
        for (k, (_, entries, fs)) in cases.iter().enumerate() {
            for (q, f) in fs.iter().enumerate() {
                times[k][q].push(f(*entries, n, cpus));
            }
        }
    }
    let rate = |d: Duration| n as f64 / d.as_secs_f64() / 1e6;
    for (pick, name) in [(0, "best"), (1, "median")] {
        println!("{name} of {rounds}:");
        for (k, (bytes, entries, _)) in cases.iter().enumerate() {
            let [m, r, a] = times[k].clone().map(|mut v| {
                v.sort();
                rate(if pick == 0 { v[0] } else { v[v.len() / 2] })
            });
            println!(
                "{bytes:>5} {entries:>6} {m:>14.1} {r:>14.1} {a:>14.1} {:>10.2} {:>10.2}",
                m / r,
                m / a
            );
        }
    }
}

/// Pushes 64 messages then pops them, `n` times, on this thread; returns a checksum.
#[inline(never)]
fn single<M: Msg, Q: Queue<M>>(n: u64) -> u64 {
    let (mut p, mut c) = Q::new(512);
    let mut sum = 0;
    for i in 0..n {
        for k in 1..=64 {
            if Q::push(&mut p, M::make(i * 64 + k)).is_err() {
                panic!("{}: full at {k} of 64", Q::NAME);
            }
        }
        while let Some(m) = Q::pop(&mut c) {
            sum += m.seq();
        }
    }
    sum
}

fn single_mode(spec: &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    let [q, bytes, n] = parts[..] else {
        panic!("PSPAT_TRANSFER_SINGLE: expected QUEUE:BYTES:N, got {spec:?}");
    };
    let n: u64 = n
        .parse()
        .expect("PSPAT_TRANSFER_SINGLE: N must be a number");
    let sum = match (q, bytes) {
        ("mailbox", "8") => single::<NonZeroU64, Mailbox>(n),
        ("mailbox", "32") => single::<Four, Mailbox>(n),
        ("rtrb", "8") => single::<NonZeroU64, Rtrb>(n),
        ("rtrb", "32") => single::<Four, Rtrb>(n),
        ("arrayq", "8") => single::<NonZeroU64, CrossbeamArray>(n),
        ("arrayq", "32") => single::<Four, CrossbeamArray>(n),
        _ => panic!("PSPAT_TRANSFER_SINGLE: queue mailbox|rtrb|arrayq, bytes 8|32; got {spec:?}"),
    };
    println!("{q} {bytes}B x {n}: checksum {sum}");
}

fn main() {
    if let Ok(spec) = std::env::var("PSPAT_TRANSFER_SINGLE") {
        single_mode(&spec);
        return;
    }
    if let Ok(r) = std::env::var("PSPAT_TRANSFER_ROUNDS") {
        let r: usize = r
            .parse()
            .expect("PSPAT_TRANSFER_ROUNDS: a number of rounds");
        let n = std::env::var("PSPAT_TRANSFER_MESSAGES")
            .map(|v| v.parse().expect("PSPAT_TRANSFER_MESSAGES: a number"))
            .unwrap_or(2_000_000);
        rounds(r, n);
        return;
    }
    transfer_benches();
    Criterion::default().configure_from_args().final_summary();
}
