//! Reports for the analysis's unit tests.

use crate::gen_report::{GenReport, SenderReport};
use crate::sink_report::{ClientReport, Latency, SinkReport};

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
    }
}
