//! The arbiter's side of a transfer: what draining mailboxes costs per message (issue 6).
//!
//! The PSPAT arbiter visits every active client's mailbox once per drain, takes what is
//! there (`Consumer::extract_batch`, 32 at a time) and gives the slots back later
//! (`Consumer::release`). With K clients and a scan of S decisions, each visit finds about
//! S / K messages. This bench times that work alone, on the consumer's CPU, for a grid of K
//! mailboxes holding PER messages each:
//!
//! - **cross**: a producer thread pinned to one CPU fills the K mailboxes, then the
//!   consumer thread, pinned to the other CPU, drains them; only the drain is timed, and
//!   the producer waits for it to end before filling again. Every line the consumer reads
//!   was last written by the other CPU, as in the engine.
//! - **local**: the consumer fills the mailboxes itself just before draining them, so the
//!   lines are in its own cache: the same instructions, without the coherence traffic.
//!
//! The difference of the two is what moving the lines between the CPUs costs the consumer.
//! Each message is read (a checksum of one word, checked against the producer's), as the
//! arbiter reads each packet to schedule it.
//!
//! ```sh
//! PSPAT_DRAIN_ROUNDS=5 cargo bench -p pspat-mailbox --bench drain   # interleaved rounds
//! cargo bench -p pspat-mailbox --bench drain -- --test              # one small case (CI)
//! ```
//!
//! Each (K, PER) cell runs cross then local once per round; the table gives the best and
//! the median round of each, in ns per message.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pspat_mailbox::{mailbox, Config, Consumer, Producer};

mod common;
use common::{cpus_or_warn, pin, Four};

/// Messages moved per timed run of a cell (spread over repetitions of fill + drain).
const MESSAGES: u64 = 1 << 20;
/// Slots per mailbox: the engine's default.
const ENTRIES: usize = 512;
/// The arbiter's drain batch (`DRAIN_BATCH` in `pspat_engine::arbiter`).
const BATCH: usize = 32;

/// The consumer's half of a cell: K mailboxes and the drain loop.
struct Drainer {
    mailboxes: Vec<Consumer<Four>>,
    buf: Vec<Four>,
}

impl Drainer {
    /// Drains every mailbox as the arbiter does; returns (messages, checksum of word 1).
    #[inline(never)]
    fn drain(&mut self) -> (u64, u64) {
        let (mut n, mut sum) = (0u64, 0u64);
        for c in &mut self.mailboxes {
            let mut got = 0;
            loop {
                let k = c.extract_batch(&mut self.buf);
                for m in &self.buf[..k] {
                    sum = sum.wrapping_add(m.0[1]);
                }
                got += k;
                if k < self.buf.len() {
                    break;
                }
            }
            c.release(got);
            n += got as u64;
        }
        (n, sum)
    }
}

/// The producer's half: fills each mailbox with `per` messages; returns their checksum.
fn fill(producers: &mut [Producer<Four>], per: usize, seq: &mut u64) -> u64 {
    let mut sum = 0u64;
    for p in producers {
        for _ in 0..per {
            *seq += 1;
            let s = *seq;
            if p.push(Four([s, s, 0, 0])).is_err() {
                panic!("drain bench: a mailbox of {ENTRIES} refused message {s} of {per}");
            }
            sum = sum.wrapping_add(s);
        }
    }
    sum
}

fn mailboxes(k: usize) -> (Vec<Producer<Four>>, Drainer) {
    let (ps, cs) = (0..k)
        .map(|_| mailbox::<Four>(Config::with_entries(ENTRIES)).expect("valid mailbox"))
        .unzip();
    let buf = vec![Four([0; 4]); BATCH];
    (ps, Drainer { mailboxes: cs, buf })
}

/// What one `Instant::now` + `elapsed` pair costs here, ns: subtracted from every timed
/// drain, which matters when a drain moves only a few messages.
fn clock_cost() -> f64 {
    const N: u32 = 100_000;
    let mut t = Duration::ZERO;
    for _ in 0..N {
        let t0 = Instant::now();
        t += t0.elapsed();
    }
    t.as_nanos() as f64 / f64::from(N)
}

/// ns per message from the summed drain time of `reps` drains of `n` messages in all.
fn per_message(t: Duration, reps: u64, n: u64, clock: f64) -> f64 {
    ((t.as_nanos() as f64 - clock * reps as f64) / n as f64).max(0.0)
}

/// Repetitions of fill + drain so that a run moves about `messages`.
fn reps(k: usize, per: usize, messages: u64) -> u64 {
    (messages / (k * per) as u64).max(1)
}

/// Cross: producer and consumer on the two CPUs. Returns the consumer's drain time per
/// message, ns.
fn cross(k: usize, per: usize, messages: u64, cpus: Option<(usize, usize)>, clock: f64) -> f64 {
    let (mut ps, mut d) = mailboxes(k);
    let reps = reps(k, per, messages);
    // `filled` = the repetition whose messages are in the mailboxes; `drained` = the last
    // one drained. ORDERING: Release/Acquire pairs, so each side sees the other's work
    // (the mailbox orders the messages themselves; these only pace the two threads).
    let filled = Arc::new(AtomicU64::new(0));
    let drained = Arc::new(AtomicU64::new(0));
    let (f2, d2) = (Arc::clone(&filled), Arc::clone(&drained));
    let producer = std::thread::Builder::new()
        .name("drain-producer".into())
        .spawn(move || {
            if let Some((cpu, _)) = cpus {
                pin(cpu);
            }
            let (mut seq, mut sum) = (0u64, 0u64);
            for r in 1..=reps {
                sum = sum.wrapping_add(fill(&mut ps, per, &mut seq));
                f2.store(r, Ordering::Release);
                while d2.load(Ordering::Acquire) != r {
                    spin_loop();
                }
            }
            sum
        })
        .expect("spawning the producer");
    let consumer = std::thread::Builder::new()
        .name("drain-consumer".into())
        .spawn(move || {
            if let Some((_, cpu)) = cpus {
                pin(cpu);
            }
            let (mut t, mut n, mut sum) = (Duration::ZERO, 0u64, 0u64);
            for r in 1..=reps {
                while filled.load(Ordering::Acquire) != r {
                    spin_loop();
                }
                let t0 = Instant::now();
                let (m, s) = d.drain();
                t += t0.elapsed();
                n += m;
                sum = sum.wrapping_add(s);
                drained.store(r, Ordering::Release);
            }
            (t, n, sum)
        })
        .expect("spawning the consumer");
    let sent = producer.join().expect("producer");
    let (t, n, got) = consumer.join().expect("consumer");
    check(k, per, reps, n, sent, got);
    per_message(t, reps, n, clock)
}

/// Local: one thread, pinned to the consumer's CPU, fills then drains.
fn local(k: usize, per: usize, messages: u64, cpus: Option<(usize, usize)>, clock: f64) -> f64 {
    let (mut ps, mut d) = mailboxes(k);
    let reps = reps(k, per, messages);
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some((_, cpu)) = cpus {
                pin(cpu);
            }
            let (mut t, mut n, mut seq, mut sent, mut got) = (Duration::ZERO, 0, 0, 0u64, 0u64);
            for _ in 0..reps {
                sent = sent.wrapping_add(fill(&mut ps, per, &mut seq));
                let t0 = Instant::now();
                let (m, s) = d.drain();
                t += t0.elapsed();
                n += m;
                got = got.wrapping_add(s);
            }
            check(k, per, reps, n, sent, got);
            per_message(t, reps, n, clock)
        })
        .join()
        .expect("local drain")
    })
}

/// Every message sent was drained, once.
fn check(k: usize, per: usize, reps: u64, n: u64, sent: u64, got: u64) {
    assert_eq!(
        n,
        reps * (k * per) as u64,
        "drain bench: messages lost (K {k}, PER {per})"
    );
    assert_eq!(
        got, sent,
        "drain bench: checksum differs (K {k}, PER {per})"
    );
}

const KS: [usize; 3] = [1, 16, 64];
/// Messages per visit: a few (64 clients, a scan of 128), a scan of 128 over 16 clients,
/// one drain batch, a full mailbox (510 of 512 slots with 32-byte messages).
const PERS: [usize; 4] = [2, 8, 32, 510];

fn rounds(rounds: usize, cpus: Option<(usize, usize)>) {
    let clock = clock_cost();
    println!(
        "drain: 32-byte messages, mailboxes of {ENTRIES}, {MESSAGES} messages per run, \
         {rounds} interleaved rounds, CPUs {cpus:?}; ns per message drained, less the \
         timer's {clock:.1} ns per drain"
    );
    let cells: Vec<(usize, usize)> = KS
        .iter()
        .flat_map(|&k| PERS.iter().map(move |&p| (k, p)))
        .collect();
    let mut times = vec![(Vec::new(), Vec::new()); cells.len()];
    for _ in 0..rounds {
        for (i, &(k, per)) in cells.iter().enumerate() {
            times[i].0.push(cross(k, per, MESSAGES, cpus, clock));
            times[i].1.push(local(k, per, MESSAGES, cpus, clock));
        }
    }
    println!(
        "{:>3} {:>4} {:>11} {:>12} {:>11} {:>12} {:>16}",
        "K", "PER", "cross best", "cross median", "local best", "local median", "cross-local (med)"
    );
    for (i, &(k, per)) in cells.iter().enumerate() {
        let (mut c, mut l) = times[i].clone();
        c.sort_by(f64::total_cmp);
        l.sort_by(f64::total_cmp);
        let (cm, lm) = (c[c.len() / 2], l[l.len() / 2]);
        println!(
            "{k:>3} {per:>4} {:>11.2} {cm:>12.2} {:>11.2} {lm:>12.2} {:>16.2}",
            c[0],
            l[0],
            cm - lm
        );
    }
}

fn main() {
    let cpus = cpus_or_warn("drain");
    if std::env::args().any(|a| a == "--test") {
        // Smoke (CI): one small cell each way, checked; the times mean nothing here.
        let clock = clock_cost();
        let (c, l) = (
            cross(4, 8, 4096, cpus, clock),
            local(4, 8, 4096, cpus, clock),
        );
        println!("drain smoke: K 4, PER 8: cross {c:.1}, local {l:.1} ns per message");
        return;
    }
    let r = std::env::var("PSPAT_DRAIN_ROUNDS")
        .map(|v| v.parse().expect("PSPAT_DRAIN_ROUNDS: a number of rounds"))
        .unwrap_or(5);
    rounds(r, cpus);
}
