//! `pspat udpsink`: the receiving end of the shaper experiment kit. Counts pspat payloads
//! per client (packets, bytes, sequence gaps, reordering) and records each client's one-way
//! latency, `receive time - submit_ns`, both on CLOCK_MONOTONIC (one clock per host, so a
//! sender in another network namespace of the same host stamps on the same clock).
//!
//! Receiving: the pspat-io [`Receiver`] (recvmmsg, [`BATCH`] datagrams per call, a 4 MiB
//! receive buffer if `net.core.rmem_max` allows). With `--busy-poll` the socket is
//! non-blocking and the thread spins on it, so a datagram is taken as soon as it is queued
//! rather than after a wake-up (which costs tens of µs on a VM); pin it with `--cpu`. On a
//! CPU it does not have to itself, a thread that always spins is a CPU hog to the Linux
//! scheduler and waits out other threads' whole time slices (milliseconds) while datagrams
//! queue; `--spin-us N` spins only N µs after each datagram and then sleeps in recvmmsg,
//! so that the kernel wakes it (and, as a sleeper, runs it promptly) when the next comes. The
//! receive time is read once per call, after recvmmsg returns, and given to every datagram
//! of the batch.
//!
//! Measurement window: datagrams that arrive before `first datagram + --warmup` only set
//! up each client's sequence tracking; the window then runs for `--measure` seconds (those
//! after it are received and not counted), or to the last datagram with `--measure 0`.
//! Rates are over that window. The sink stops after `--duration` from its start, or
//! earlier once `--idle` seconds pass with no datagram after the first one.
//!
//! Sequence accounting, per client: `next` = the sequence number expected. A datagram with
//! `seq == next` is in order; `seq` ahead of `next` (in wrapping order) counts the skipped
//! numbers as lost; `seq` behind `next` is a late (reordered) datagram and takes back one
//! of the losses counted before. Duplicates are not told apart from reordering.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use pspat_io::udp::{Received, Receiver, BATCH};
use pspat_io::{clock, cpu};
use serde::{Deserialize, Serialize};

use crate::udpgen::{parse_secs, parse_secs_from};
use crate::{emit, table, Usage};

/// Client numbers above this are counted in `other_packets` only (a garbled header must
/// not make the sink allocate per-client state for 4 billion clients).
pub const MAX_CLIENTS: u32 = 4096;
/// Largest latency the histograms resolve: 100 s (larger values are recorded as this).
const MAX_LATENCY_NS: u64 = 100_000_000_000;
/// Wait per blocking receive call without --busy-poll (the loop checks its deadlines
/// between calls).
const BLOCKING_WAIT: Duration = Duration::from_millis(5);

#[derive(Args, Debug)]
pub struct SinkArgs {
    /// Address to receive on, IP:PORT (port 0: the kernel picks one, printed on stderr).
    #[arg(long, value_name = "IP:PORT")]
    bind: SocketAddr,
    /// Longest time to run, seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    duration: Duration,
    /// Seconds after the first datagram before counting starts.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_secs_nonneg)]
    warmup: Duration,
    /// Length of the counting window, seconds from the end of the warm-up; datagrams after
    /// it are received but not counted (so that the drain of queues after the senders stop
    /// does not count). 0: count to the end.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_secs_nonneg)]
    measure: Duration,
    /// Stop once this many seconds pass without a datagram (after the first); 0: never.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_secs_nonneg)]
    idle: Duration,
    /// Spin on a non-blocking socket instead of sleeping in recvmmsg.
    #[arg(long)]
    busy_poll: bool,
    /// With --busy-poll: spin at most this many microseconds after the last datagram,
    /// then sleep in recvmmsg until the next one; 0: spin all the time.
    #[arg(long, value_name = "US", default_value_t = 0)]
    spin_us: u64,
    /// Pin the receiving thread to this CPU.
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Write the report as JSON to FILE (`-`: stdout, instead of the table).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn parse_secs_nonneg(s: &str) -> Result<Duration, String> {
    parse_secs_from(s, 0.0)
}

/// Latency percentiles of one client, ns.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

/// What one client's datagrams looked like in the window.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ClientReport {
    /// The payload's client number.
    pub client: u32,
    /// Datagrams counted.
    pub packets: u64,
    /// Sum of their `wire_len`.
    pub wire_bytes: u64,
    /// `packets` over the window.
    pub pps: f64,
    /// Sequence numbers skipped and never seen later.
    pub lost: u64,
    /// Datagrams that arrived after a later sequence number.
    pub reordered: u64,
    /// One-way latency (receive time - submit_ns).
    pub latency: Latency,
    /// Datagrams stamped later than they were received (clocks not comparable: a time
    /// namespace?); recorded with latency 0.
    pub clock_skew: u64,
}

/// The whole report of `pspat udpsink`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SinkReport {
    /// The address received on.
    pub bind: String,
    /// Whether the receiver spun.
    pub busy_poll: bool,
    /// Warm-up asked for, seconds.
    pub warmup_s: f64,
    /// Counting window asked for, seconds (0: to the end).
    pub measure_s: f64,
    /// From the end of the warm-up to the last datagram counted, seconds.
    pub window_s: f64,
    /// Datagrams received, warm-up included, garbled included.
    pub received_total: u64,
    /// Datagrams received during the warm-up.
    pub warmup_packets: u64,
    /// Datagrams that were not pspat payloads.
    pub garbled: u64,
    /// Datagrams from clients above [`MAX_CLIENTS`].
    pub other_packets: u64,
    /// Receive buffer granted by the kernel, bytes.
    pub recv_buffer: usize,
    /// Per client that sent anything in the window, by client number.
    pub clients: Vec<ClientReport>,
    /// Datagrams counted in the window, all clients.
    pub total_packets: u64,
    /// `total_packets` over the window.
    pub total_pps: f64,
}

struct ClientState {
    next: Option<u32>,
    packets: u64,
    wire_bytes: u64,
    lost: u64,
    reordered: u64,
    clock_skew: u64,
    hist: Histogram<u64>,
}

impl ClientState {
    fn new() -> Self {
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

    /// Takes one datagram; `count`: it falls in the measurement window.
    fn take(&mut self, r: &Received, count: bool) {
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

    fn report(&self, client: u32, window_s: f64) -> ClientReport {
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

fn rate(n: u64, s: f64) -> f64 {
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

pub fn run(a: SinkArgs) -> Result<()> {
    if a.spin_us > 0 && !a.busy_poll {
        return Err(Usage("--spin-us applies to --busy-poll, which is not given".into()).into());
    }
    if let Some(c) = a.cpu {
        cpu::pin_current_thread(c).map_err(|e| {
            Usage(format!(
                "--cpu {c}: cannot pin to it ({e}); this process may use {:?}",
                cpu::allowed_cpus()
            ))
        })?;
    }
    let mut rx = Receiver::bind(a.bind).context("udpsink")?;
    if a.busy_poll {
        rx.set_nonblocking(true).context("udpsink")?;
    }
    // The experiment script waits for this line before it starts the senders.
    eprintln!("pspat udpsink: ready on {}", rx.local_addr());
    let start = clock::now_ns();
    let end = start + a.duration.as_nanos() as u64;
    let warmup_ns = a.warmup.as_nanos() as u64;
    let idle_ns = a.idle.as_nanos() as u64;
    let measure_ns = a.measure.as_nanos() as u64;
    let mut clients: Vec<Option<ClientState>> = Vec::new();
    let mut batch: Vec<Received> = Vec::with_capacity(BATCH);
    let (mut received_total, mut warmup_packets, mut other) = (0u64, 0u64, 0u64);
    let mut first: Option<u64> = None;
    let (mut last, mut last_counted) = (0u64, 0u64);
    let spin_ns = a.spin_us.saturating_mul(1000);
    let mut spinning = a.busy_poll;
    loop {
        batch.clear();
        let n = rx
            .recv_batch(&mut batch, BLOCKING_WAIT)
            .context("udpsink")?;
        let now = clock::now_ns();
        if n == 0 {
            let idle = idle_ns > 0 && first.is_some() && now - last >= idle_ns;
            if now >= end || idle {
                break;
            }
            if spinning {
                if spin_ns > 0 && now - last.max(start) >= spin_ns {
                    rx.set_nonblocking(false).context("udpsink")?;
                    spinning = false;
                }
                std::hint::spin_loop();
            }
            continue;
        }
        if a.busy_poll && !spinning {
            rx.set_nonblocking(true).context("udpsink")?;
            spinning = true;
        }
        received_total += n as u64;
        last = now;
        let t0 = *first.get_or_insert(now);
        let count = now >= t0 + warmup_ns && (measure_ns == 0 || now < t0 + warmup_ns + measure_ns);
        for r in &batch {
            let c = r.header.client;
            if c >= MAX_CLIENTS {
                other += 1;
                continue;
            }
            let i = c as usize;
            if clients.len() <= i {
                clients.resize_with(i + 1, || None);
            }
            clients[i]
                .get_or_insert_with(ClientState::new)
                .take(r, count);
        }
        if count {
            last_counted = now;
        } else if now < t0 + warmup_ns {
            warmup_packets += batch.len() as u64;
        }
        if now >= end {
            break;
        }
    }
    // The window ends at its set length if datagrams kept coming past it, else at the
    // last one counted.
    let window_s = match first {
        Some(t0) if last_counted > t0 + warmup_ns => {
            let from = t0 + warmup_ns;
            let to = if measure_ns > 0 && last >= from + measure_ns {
                from + measure_ns
            } else {
                last_counted
            };
            (to - from) as f64 / 1e9
        }
        _ => 0.0,
    };
    let clients: Vec<ClientReport> = clients
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.as_ref().map(|s| s.report(i as u32, window_s)))
        .filter(|c| c.packets > 0)
        .collect();
    let total_packets = clients.iter().map(|c| c.packets).sum();
    let report = SinkReport {
        bind: rx.local_addr().to_string(),
        busy_poll: a.busy_poll,
        warmup_s: a.warmup.as_secs_f64(),
        measure_s: a.measure.as_secs_f64(),
        window_s,
        received_total,
        warmup_packets,
        garbled: rx.garbled(),
        other_packets: other,
        recv_buffer: rx.recv_buffer(),
        total_pps: rate(total_packets, window_s),
        total_packets,
        clients,
    };
    output(&report, a.json.as_deref())
}

fn output(r: &SinkReport, json: Option<&std::path::Path>) -> Result<()> {
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(r)?;
        if path.as_os_str() == "-" {
            return emit(&text);
        }
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
    let rows: Vec<Vec<String>> = r
        .clients
        .iter()
        .map(|c| {
            vec![
                c.client.to_string(),
                c.packets.to_string(),
                format!("{:.0}", c.pps),
                c.lost.to_string(),
                c.reordered.to_string(),
                us(c.latency.p50_ns),
                us(c.latency.p99_ns),
                us(c.latency.p999_ns),
                us(c.latency.max_ns),
            ]
        })
        .collect();
    let t = table::render(
        &[
            "client", "packets", "pps", "lost", "reord", "p50 us", "p99 us", "p99.9 us", "max us",
        ],
        &rows,
        &[0, 1, 2, 3, 4, 5, 6, 7, 8],
    );
    emit(&format!(
        "{t}total: {} packets in {:.3} s ({:.0} pps); {} received, {} in warm-up, {} garbled",
        r.total_packets, r.window_s, r.total_pps, r.received_total, r.warmup_packets, r.garbled
    ))
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
