//! Reports for the analysis's unit tests.

use crate::gen_report::{GenReport, SenderReport};
use crate::sink_report::{ClientReport, Latency, SinkReport};
use crate::tree::KitTree;

/// A generator report: `senders` greedy senders (and a victim, client M) that each sent
/// `packets` of `len` bytes in `elapsed_s` seconds.
pub(crate) fn gen(senders: u32, victim: bool, len: u32, packets: u64, elapsed_s: f64) -> GenReport {
    let flow = |client, victim| SenderReport {
        client,
        victim,
        src_port: 0,
        len,
        rate_pps: 0.0,
        packets,
        wire_bytes: packets * u64::from(len),
        pps: packets as f64 / elapsed_s,
        send_errors: 0,
        last_error: None,
        elapsed_s,
    };
    let mut flows: Vec<SenderReport> = (0..senders).map(|i| flow(i, false)).collect();
    if victim {
        flows.push(flow(senders, true));
    }
    GenReport::new("x".into(), senders, flows)
}

/// A sink report with `(client, packets)` of 100 bytes counted in a one-second window.
pub(crate) fn sink(counts: &[(u32, u64)]) -> SinkReport {
    SinkReport {
        bind: "x".into(),
        busy_poll: true,
        warmup_s: 0.0,
        measure_s: 0.0,
        window_s: 1.0,
        received_total: 0,
        warmup_packets: 0,
        garbled: 0,
        other_packets: 0,
        recv_buffer: 0,
        clients: counts
            .iter()
            .map(|&(client, packets)| ClientReport {
                client,
                packets,
                wire_bytes: packets * 100,
                pps: packets as f64,
                lost: 0,
                reordered: 0,
                latency: Latency::default(),
                clock_skew: 0,
            })
            .collect(),
        total_packets: counts.iter().map(|c| c.1).sum(),
        total_pps: 0.0,
        trace: Vec::new(),
    }
}

/// A two-level tree on a 50 Mbit/s link: A (held at 20 by its ceil) over two greedy
/// leaves of weights 1 and 3, B over a leaf held by its ceil and a paced one.
pub(crate) const TWO_LEVEL: &str = "\
    pipe 1 config bw 50Mbit/s\n\
    sched 1 config type wf2q+\n\
    sched 10 config type wf2q+ parent 1 rate 20Mbit/s ceil 20Mbit/s\n\
    sched 11 config type fifo parent 10 rate 5Mbit/s weight 1\n\
    sched 12 config type fifo parent 10 rate 5Mbit/s weight 3 prio 1\n\
    sched 20 config type wf2q+ parent 1 rate 30Mbit/s\n\
    sched 21 config type fifo parent 20 rate 10Mbit/s ceil 13Mbit/s cburst 5000\n\
    sched 22 config type fifo parent 20 rate 10Mbit/s\n\
    queue 11 config sched 11 queue 100\n\
    queue 12 config sched 12 queue 100\n\
    queue 21 config sched 21 queue 50\n\
    queue 22 config sched 22 queue 100\n\
    add 100 queue 11 udp from any 10000 to any\n\
    add 200 queue 12 udp from any 10001 to any\n\
    add 300 queue 21 udp from any 10002 to any\n\
    add 400 queue 22 udp from any 10003 to any\n\
    add 500 queue 22 udp from any 10004 to any\n";

/// [`TWO_LEVEL`] with senders from ports 10000..=10004 (the last two to sched 22).
pub(crate) fn two_level() -> KitTree {
    let c = pspat_config::parse_ipfw(TWO_LEVEL, "two-level").unwrap();
    KitTree::from_config(&c, &[10000, 10001, 10002, 10003, 10004]).unwrap()
}
