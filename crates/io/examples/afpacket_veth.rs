//! AF_PACKET on a veth pair: how fast [`TxSocket::send_batch`] sends and [`RxRing`]
//! receives, with 64- and 1514-byte frames, with PACKET_QDISC_BYPASS and without it
//! (through veth's default noqueue, and through a pfifo_fast root qdisc).
//!
//! ```text
//! sudo taskset -c 1 target/release/examples/afpacket_veth [ROUNDS]
//! ```
//!
//! Needs root. The process moves itself into a new, anonymous network namespace
//! (unshare(CLONE_NEWNET), before any other thread exists) holding the veth pair `a` <-> `b`;
//! the namespace disappears with the process. Everything runs on the calling thread, so
//! `taskset -c 1` pins it all. For each configuration, interleaved over ROUNDS rounds
//! (default 7):
//!
//! - `tx`: N frames sent on `a` in `send_batch` calls of [`BATCH`], no socket on `b` (the
//!   kernel of `b` drops them: unknown EtherType); the sender's time includes veth's
//!   delivery to `b`, which runs in the sender's context;
//! - `tx+ring`: the same with an [`RxRing`] on `b` that is not read during the send (the
//!   ring holds all N frames): the kernel's copy into the ring is added to the sender;
//! - `rx`: the time to walk those N frames with `for_each_frame` (reading each frame's
//!   sequence number), the user-space side of receiving.
//!
//! Frame lengths are as given to sendmmsg (no FCS). Rates are the best of the rounds
//! (shortest time); the median is printed too. Twice: by wall clock, and by the thread's
//! CPU time (CLOCK_THREAD_CPUTIME_ID), which other processes on a shared machine do not
//! inflate (softirq work done in the sender's context counts as its system time).

use std::process::Command;
use std::time::{Duration, Instant};

use pspat_io::afpacket::{RxOptions, RxRing, TxOptions, TxSocket, BATCH};

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip(8)");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn tc(args: &[&str]) {
    let out = Command::new("tc").args(args).output().expect("run tc(8)");
    assert!(
        out.status.success(),
        "tc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn frames(len: usize) -> Vec<Vec<u8>> {
    (0..BATCH)
        .map(|i| {
            let mut f = vec![0u8; len];
            f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x0b]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x0a]);
            f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
            f[14..18].copy_from_slice(&(i as u32).to_be_bytes());
            f
        })
        .collect()
}

/// CPU time of the calling thread, in seconds (CLOCK_THREAD_CPUTIME_ID): unlike wall
/// time, it does not count the time other processes of a shared machine take the CPU.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is supported by Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Sends `n` frames, [`BATCH`] per call; returns the wall and CPU seconds taken.
fn send(tx: &mut TxSocket, fs: &[Vec<u8>], n: usize) -> (f64, f64) {
    let (t, c) = (Instant::now(), thread_cpu());
    let mut left = n;
    while left > 0 {
        let b = left.min(BATCH);
        let k = tx.send_batch(b, |i| &fs[i]).expect("send_batch");
        assert_eq!(k, b, "device refused frames");
        left -= k;
    }
    (t.elapsed().as_secs_f64(), thread_cpu() - c)
}

/// Seconds per frame, wall clock and thread CPU time, one entry per round.
#[derive(Default)]
struct Times {
    tx: Vec<f64>,
    tx_ring: Vec<f64>,
    rx: Vec<f64>,
    tx_cpu: Vec<f64>,
    tx_ring_cpu: Vec<f64>,
    rx_cpu: Vec<f64>,
    drops: u64,
}

fn best(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::INFINITY, f64::min)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("ROUNDS: a number"))
        .unwrap_or(7);
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("afpacket_veth: needs root (a network namespace and CAP_NET_RAW)");
        std::process::exit(2);
    }
    // SAFETY: no pointers; the process is single-threaded here, so the whole process
    // (this thread) moves to the new namespace.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
    ip(&[
        "link", "add", "name", "a", "type", "veth", "peer", "name", "b",
    ]);
    for i in ["a", "b"] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{i}/disable_ipv6"), "1");
    }
    ip(&["link", "set", "dev", "a", "up"]);
    ip(&["link", "set", "dev", "b", "up"]);

    // (frame length, qdisc bypass, root qdisc of `a`, frames per measurement: the ring
    // must hold them all). veth has no qdisc by default (noqueue): without the bypass,
    // frames then go from dev_queue_xmit straight to the driver; with pfifo_fast (Linux's
    // default on real interfaces) they are queued and dequeued under the qdisc lock.
    let configs = [
        (64usize, true, "noqueue", 100_000usize),
        (64, false, "noqueue", 100_000),
        (64, false, "pfifo_fast", 100_000),
        (1514, true, "noqueue", 25_600),
        (1514, false, "noqueue", 25_600),
        (1514, false, "pfifo_fast", 25_600),
    ];
    let ring_opts = RxOptions {
        // Blocks are handed over when full, not after 1 ms of a long send.
        block_timeout_ms: 1000,
        ..RxOptions::default()
    };
    let mut times: Vec<Times> = configs.iter().map(|_| Times::default()).collect();
    for _ in 0..rounds {
        for (c, &(len, bypass, qdisc, n)) in configs.iter().enumerate() {
            if qdisc == "noqueue" {
                // Deleting the root qdisc of veth gives noqueue back; none is no error.
                let _ = Command::new("tc")
                    .args(["qdisc", "del", "dev", "a", "root"])
                    .output();
            } else {
                tc(&["qdisc", "replace", "dev", "a", "root", qdisc]);
            }
            let fs = frames(len);
            let opts = TxOptions {
                qdisc_bypass: bypass,
                ..TxOptions::default()
            };
            let mut tx = TxSocket::open("a", &opts).expect("open TxSocket");
            send(&mut tx, &fs, BATCH * 16); // warm-up
            let (t, cpu) = send(&mut tx, &fs, n);
            times[c].tx.push(t / n as f64);
            times[c].tx_cpu.push(cpu / n as f64);

            let mut rx = RxRing::open("b", &ring_opts).expect("open RxRing");
            let (t, cpu) = send(&mut tx, &fs, n);
            times[c].tx_ring.push(t / n as f64);
            times[c].tx_ring_cpu.push(cpu / n as f64);
            // Wait for the last, partly filled block, then time only the walk.
            let deadline = Instant::now() + Duration::from_secs(3);
            while !rx.wait(Duration::from_millis(10)).unwrap() && Instant::now() < deadline {}
            std::thread::sleep(Duration::from_millis(1100));
            let (t, cpu) = (Instant::now(), thread_cpu());
            let mut got = 0usize;
            let mut sum = 0u64;
            loop {
                let k = rx.for_each_frame(|f| {
                    sum += u64::from(f.data[17]);
                });
                got += k;
                if k == 0 {
                    break;
                }
            }
            let (walk, walk_cpu) = (t.elapsed().as_secs_f64(), thread_cpu() - cpu);
            std::hint::black_box(sum);
            let st = rx.stats().unwrap();
            times[c].drops += st.drops;
            assert!(got <= n, "{got} frames for {n} sent");
            times[c].rx.push(walk / got.max(1) as f64);
            times[c].rx_cpu.push(walk_cpu / got.max(1) as f64);
            if got < n {
                eprintln!("{len} B bypass={bypass} {qdisc}: received {got} of {n} ({st:?})");
            }
        }
    }
    let rate = |s: f64| 1e-6 / s;
    for (title, cpu) in [("wall clock", false), ("thread CPU time", true)] {
        println!("{title}: Mframes/s, best (median) of {rounds} interleaved rounds");
        println!(
            "{:>6} {:>7} {:>9} {:>15} {:>15} {:>15} {:>7}",
            "bytes", "bypass", "qdisc", "tx", "tx+ring", "rx walk", "drops"
        );
        for (c, &(len, bypass, qdisc, _)) in configs.iter().enumerate() {
            let t = &times[c];
            let (a, b, d) = if cpu {
                (&t.tx_cpu, &t.tx_ring_cpu, &t.rx_cpu)
            } else {
                (&t.tx, &t.tx_ring, &t.rx)
            };
            println!(
                "{len:>6} {:>7} {:>9} {:>6.3} ({:>6.3}) {:>6.3} ({:>6.3}) {:>6.2} ({:>6.2}) {:>7}",
                if bypass { "yes" } else { "no" },
                if bypass { "-" } else { qdisc },
                rate(best(a)),
                rate(median(a)),
                rate(best(b)),
                rate(median(b)),
                rate(best(d)),
                rate(median(d)),
                t.drops
            );
        }
        let pick = |c: usize, k: usize| -> &Vec<f64> {
            let t = &times[c];
            match (k, cpu) {
                (0, false) => &t.tx,
                (1, false) => &t.tx_ring,
                (2, false) => &t.rx,
                (0, true) => &t.tx_cpu,
                (1, true) => &t.tx_ring_cpu,
                _ => &t.rx_cpu,
            }
        };
        // Ratio of rates, x over y, from the best times.
        let r = |x: usize, y: usize, k: usize| best(pick(y, k)) / best(pick(x, k));
        println!("  ratios of best rates:");
        for (x, what) in [(0, "64 B"), (3, "1514 B")] {
            println!(
                "    {what}: bypass / noqueue: tx {:.2}, tx+ring {:.2}; \
                 bypass / pfifo_fast: tx {:.2}, tx+ring {:.2}",
                r(x, x + 1, 0),
                r(x, x + 1, 1),
                r(x, x + 2, 0),
                r(x, x + 2, 1)
            );
        }
        println!(
            "    bypass, 64 B / 1514 B: tx {:.2}, tx+ring {:.2}, rx walk {:.2}",
            r(0, 3, 0),
            r(0, 3, 1),
            r(0, 3, 2)
        );
        println!(
            "    bypass, tx / tx+ring (the ring's cost): 64 B {:.2}, 1514 B {:.2}",
            best(pick(0, 1)) / best(pick(0, 0)),
            best(pick(3, 1)) / best(pick(3, 0))
        );
        println!(
            "    bypass, 1514 B: tx {:.2} Gbit/s, tx+ring {:.2} Gbit/s",
            1514.0 * 8.0 / best(pick(3, 0)) * 1e-9,
            1514.0 * 8.0 / best(pick(3, 1)) * 1e-9
        );
    }
}
