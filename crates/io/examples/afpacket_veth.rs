//! AF_PACKET on a veth pair: how fast [`TxSocket::send_batch`] sends and [`RxRing`]
//! receives, with 64- and 1514-byte frames, with and without PACKET_QDISC_BYPASS.
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
//! (shortest time); the median is printed too.

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

/// Sends `n` frames, [`BATCH`] per call; returns the time taken.
fn send(tx: &mut TxSocket, fs: &[Vec<u8>], n: usize) -> Duration {
    let t = Instant::now();
    let mut left = n;
    while left > 0 {
        let b = left.min(BATCH);
        let k = tx.send_batch(b, |i| &fs[i]).expect("send_batch");
        assert_eq!(k, b, "device refused frames");
        left -= k;
    }
    t.elapsed()
}

#[derive(Default)]
struct Times {
    tx: Vec<f64>,
    tx_ring: Vec<f64>,
    rx: Vec<f64>,
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

    // (frame length, qdisc bypass, frames per measurement: the ring must hold them all).
    let configs = [
        (64usize, true, 100_000usize),
        (64, false, 100_000),
        (1514, true, 25_600),
        (1514, false, 25_600),
    ];
    let ring_opts = RxOptions {
        // Blocks are handed over when full, not after 1 ms of a long send.
        block_timeout_ms: 1000,
        ..RxOptions::default()
    };
    let mut times: Vec<Times> = configs.iter().map(|_| Times::default()).collect();
    for _ in 0..rounds {
        for (c, &(len, bypass, n)) in configs.iter().enumerate() {
            let fs = frames(len);
            let opts = TxOptions {
                qdisc_bypass: bypass,
                sndbuf: None,
            };
            let mut tx = TxSocket::open("a", &opts).expect("open TxSocket");
            send(&mut tx, &fs, BATCH * 16); // warm-up
            let t = send(&mut tx, &fs, n);
            times[c].tx.push(t.as_secs_f64() / n as f64);

            let mut rx = RxRing::open("b", &ring_opts).expect("open RxRing");
            let t = send(&mut tx, &fs, n);
            times[c].tx_ring.push(t.as_secs_f64() / n as f64);
            // Wait for the last, partly filled block, then time only the walk.
            let deadline = Instant::now() + Duration::from_secs(3);
            while !rx.wait(Duration::from_millis(10)).unwrap() && Instant::now() < deadline {}
            std::thread::sleep(Duration::from_millis(1100));
            let t = Instant::now();
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
            let walk = t.elapsed();
            std::hint::black_box(sum);
            let st = rx.stats().unwrap();
            times[c].drops += st.drops;
            assert!(got <= n, "{got} frames for {n} sent");
            times[c].rx.push(walk.as_secs_f64() / got.max(1) as f64);
            if got < n {
                eprintln!("{len} B bypass={bypass}: received {got} of {n} ({st:?})");
            }
        }
    }
    println!(
        "{:>6} {:>7} {:>14} {:>14} {:>14} {:>7}",
        "bytes", "bypass", "tx Mfr/s", "tx+ring Mfr/s", "rx walk Mfr/s", "drops"
    );
    let rate = |s: f64| 1e-6 / s;
    for (c, &(len, bypass, _)) in configs.iter().enumerate() {
        let t = &times[c];
        println!(
            "{len:>6} {:>7} {:>6.3} ({:.3}) {:>6.3} ({:.3}) {:>6.2} ({:.2}) {:>7}",
            if bypass { "yes" } else { "no" },
            rate(best(&t.tx)),
            rate(median(&t.tx)),
            rate(best(&t.tx_ring)),
            rate(median(&t.tx_ring)),
            rate(best(&t.rx)),
            rate(median(&t.rx)),
            t.drops
        );
    }
    println!("best (median) of {rounds} interleaved rounds; ratios of best rates:");
    let r = |a: &[f64], b: &[f64]| best(b) / best(a);
    for (x, y, what) in [(0, 1, "64 B"), (2, 3, "1514 B")] {
        println!(
            "  {what}: bypass / qdisc  tx {:.2}  tx+ring {:.2}",
            r(&times[x].tx, &times[y].tx),
            r(&times[x].tx_ring, &times[y].tx_ring)
        );
    }
    println!(
        "  bypass, 64 B / 1514 B frames per second: tx {:.2}  tx+ring {:.2}  rx walk {:.2}",
        r(&times[0].tx, &times[2].tx),
        r(&times[0].tx_ring, &times[2].tx_ring),
        r(&times[0].rx, &times[2].rx)
    );
    println!(
        "  bypass, 1514 B: tx {:.2} Gbit/s, tx+ring {:.2} Gbit/s",
        1514.0 * 8.0 / best(&times[2].tx) * 1e-9,
        1514.0 * 8.0 / best(&times[2].tx_ring) * 1e-9
    );
}
