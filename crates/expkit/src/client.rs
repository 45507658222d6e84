//! The sink's account of one client: packets, bytes, sequence gaps, reordering and a
//! latency histogram.
//!
//! Sequence accounting: `next` = the sequence number expected. A datagram with
//! `seq == next` is in order; `seq` ahead of `next` (in wrapping order) counts the skipped
//! numbers as lost; `seq` behind `next` is a late (reordered) datagram and takes back one
//! of the losses counted before. Duplicates are not told apart from reordering.

use hdrhistogram::Histogram;
use pspat_io::udp::Received;

use crate::sink_report::{rate, ClientReport, Latency};

/// Largest latency the histograms resolve: 100 s (larger values are recorded as this).
const MAX_LATENCY_NS: u64 = 100_000_000_000;

pub(crate) struct ClientState {
    next: Option<u32>,
    packets: u64,
    wire_bytes: u64,
    lost: u64,
    reordered: u64,
    clock_skew: u64,
    hist: Histogram<u64>,
}

impl ClientState {
    pub(crate) fn new() -> Self {
        Self {
            next: None,
            packets: 0,
            wire_bytes: 0,
            lost: 0,
            reordered: 0,
            clock_skew: 0,
            hist: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("valid histogram bounds"),
        }
    }

    /// Takes one datagram; `count`: it falls in the measurement window (outside it, it
    /// only moves the sequence tracking on).
    pub(crate) fn take(&mut self, r: &Received, count: bool) {
        let seq = r.header.seq;
        let in_order = match self.next {
            None => true,
            Some(next) => {
                let ahead = seq.wrapping_sub(next) as i32;
                if ahead >= 0 {
                    if count {
                        self.lost += ahead as u64;
                    }
                    true
                } else {
                    if count {
                        self.reordered += 1;
                        self.lost = self.lost.saturating_sub(1);
                    }
                    false
                }
            }
        };
        if in_order {
            self.next = Some(seq.wrapping_add(1));
        }
        if !count {
            return;
        }
        self.packets += 1;
        self.wire_bytes += u64::from(r.header.wire_len);
        let lat = r.since_submit_ns();
        if lat < 0 {
            self.clock_skew += 1;
        }
        self.hist.saturating_record((lat.max(0) as u64).max(1));
    }

    /// Datagrams counted.
    pub(crate) fn packets(&self) -> u64 {
        self.packets
    }

    /// The report of client `client`, its rate over `window_s` seconds.
    pub(crate) fn report(&self, client: u32, window_s: f64) -> ClientReport {
        let h = &self.hist;
        let latency = if h.is_empty() {
            Latency::default()
        } else {
            Latency {
                p50_ns: h.value_at_quantile(0.5),
                p99_ns: h.value_at_quantile(0.99),
                p999_ns: h.value_at_quantile(0.999),
                max_ns: h.max(),
                mean_ns: h.mean(),
            }
        };
        ClientReport {
            client,
            packets: self.packets,
            wire_bytes: self.wire_bytes,
            pps: rate(self.packets, window_s),
            lost: self.lost,
            reordered: self.reordered,
            latency,
            clock_skew: self.clock_skew,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pspat_io::payload::Header;

    fn rx(seq: u32, submit_ns: u64, recv_ns: u64) -> Received {
        Received {
            header: Header {
                client: 0,
                flow: 0,
                seq,
                wire_len: 100,
                submit_ns,
                depart_ns: 0,
            },
            payload_len: 58,
            recv_ns,
            kernel_ns: None,
        }
    }

    #[test]
    fn gaps_are_losses_until_the_late_packet_comes() {
        let mut s = ClientState::new();
        for seq in [5, 6, 9, 7, 10] {
            s.take(&rx(seq, 1_000, 3_000), true);
        }
        // 7 and 8 skipped at 9; 7 came late: one lost (8), one reordered.
        assert_eq!((s.packets, s.lost, s.reordered), (5, 1, 1));
        assert_eq!(s.wire_bytes, 500);
        let r = s.report(0, 2.0);
        assert_eq!(r.pps, 2.5);
        // Latency 2000 ns, within the histogram's 3 significant digits.
        assert!((1998..=2002).contains(&r.latency.p50_ns), "{r:?}");
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut s = ClientState::new();
        for seq in [u32::MAX - 1, u32::MAX, 0, 2] {
            s.take(&rx(seq, 0, 10), true);
        }
        assert_eq!((s.lost, s.reordered), (1, 0));
    }

    #[test]
    fn warmup_sets_up_tracking_without_counting() {
        let mut s = ClientState::new();
        s.take(&rx(0, 0, 10), false);
        s.take(&rx(3, 0, 10), false);
        s.take(&rx(4, 0, 10), true);
        assert_eq!((s.packets, s.lost), (1, 0));
        // A stamp after the receive time is clock skew, recorded as 0 (the floor, 1 ns).
        s.take(&rx(5, 50, 10), true);
        assert_eq!(s.clock_skew, 1);
        assert_eq!(s.hist.min(), 1);
    }
}
