//! `pspat bench arch`: the PSPAT architecture against the lock-based one (issue 6; PSPAT
//! paper sections 6.4-6.6), in one run, on the same scheduler code.
//!
//! Throughput mode: for each client count, greedy client threads (each its own flow,
//! weight 1) submit as fast as they can (on a full mailbox they yield, or in the client
//! hand-off mode wait for their cleared packets), and an optional "victim" client sends
//! one packet every `--victim-gap-us` with a weight 100 times the others, its
//! submit-to-transmit latency recorded. Per point it prints the decisions per second
//! (packets released by the scheduler), the spread of the greedy clients' shares
//! normalised by weight (min/max), the victim's latency percentiles, and drops. Before
//! each client count it measures the limit: the same algorithm's single-thread
//! enqueue+dequeue rate with the same flows and packets, no engine; once with 64
//! packets in the scheduler and once ("backlogged") with every greedy flow holding a
//! mailbox's capacity, as in the engine.
//!
//! Stability mode (section 6.5): two greedy clients, weights 10:1, on links from 0.5x to
//! 2x the rate the PSPAT engine sustains: the share of each architecture at each rate.
//!
//! Floor mode: what the machine alone does to a thread spinning where the arbiter goes
//! (see [`crate::floor`]); throughput mode reports the same figures for the arbiter itself
//! (`stall%`, `stall-p99us`).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use pspat_engine::clock;
use pspat_engine::latency::LatencyBoard;
use pspat_engine::stats::ClientSnapshot;
use pspat_engine::{
    Client, ClientConfig, Engine, EngineConfig, EngineSnapshot, Handoff, LockClient, LockedEngine,
    SubmitError,
};
use pspat_io::{Backend, Pkt};
use pspat_sched::registry::{self, Params, SchedulerVisitor};
use pspat_sched::{FlowParams, Scheduler};
use serde::Serialize;

use crate::{emit, table, Usage};

/// Weight of each greedy client's flow.
const GREEDY_WEIGHT: u32 = 1;
/// The victim's weight, relative to a greedy client's (the paper uses 50).
const VICTIM_WEIGHT: u32 = 100;
/// Stability mode: link rates as multiples of the sustained rate.
const STABILITY_STEPS: [f64; 6] = [0.5, 0.75, 1.0, 1.25, 1.5, 2.0];

#[derive(Args, Debug)]
pub struct ArchArgs {
    /// Client counts to measure (greedy clients; the victim comes on top).
    #[arg(long, value_name = "N,N,...", default_value = "1,2,4,8,16,32,64",
          value_parser = parse_clients)]
    clients: ClientList,
    /// Architectures to compare, in the order run at each point.
    #[arg(
        long,
        value_name = "A,...",
        value_delimiter = ',',
        default_value = "pspat,lock"
    )]
    arch: Vec<Arch>,
    /// Backend the packets leave through: null (count them, send nothing), udp
    /// (`udp:HOST:PORT`; plain `udp` is 127.0.0.1:9000), pcap:FILE, or
    /// afpacket:IF[,...] as in `pspat run`. The same backend serves both architectures.
    #[arg(long, value_name = "SPEC", default_value = "null")]
    backend: String,
    /// Scheduling algorithm: a name or alias from `pspat algorithms`.
    #[arg(long, value_name = "NAME", default_value = "qfq+")]
    alg: String,
    /// Algorithm parameters key=value[,...].
    #[arg(long, value_name = "K=V,...", default_value = "")]
    params: Params,
    /// Emulated link rate in bit/s (suffixes K, M, G; 0 = unlimited: decisions as fast as
    /// the engine makes them).
    #[arg(long, value_name = "BPS", default_value = "0", value_parser = parse_rate)]
    rate: u64,
    /// Packet length in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 60,
          value_parser = clap::value_parser!(u32).range(1..=65_535))]
    len: u32,
    /// Measured time per point, seconds (after a warm-up of a tenth of it, at least 20 ms).
    #[arg(long, value_name = "S", default_value = "1", value_parser = parse_duration)]
    duration: Duration,
    /// PSPAT hand-off mode: arbiter, dispatchers[:N] or clients.
    #[arg(long, value_name = "MODE", default_value = "arbiter")]
    handoff: Handoff,
    /// Run the low-rate, high-weight victim client (true/false).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    victim: bool,
    /// The victim's gap between packets, microseconds.
    #[arg(long, value_name = "US", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    victim_gap_us: u64,
    /// throughput (clients sweep) or stability (link-rate sweep, two clients 10:1).
    #[arg(long, value_enum, default_value_t = Mode::Throughput)]
    mode: Mode,
    /// Stability mode: link rates to use instead of 0.5x..2x the measured sustained rate
    /// (bit/s, suffixes K, M, G).
    #[arg(long, value_name = "BPS,...", value_delimiter = ',', value_parser = parse_rate)]
    rate_list: Vec<u64>,
    /// Slots per client mailbox (a power of two, 16..=65536): what a client may have in
    /// flight in either architecture (the lock-based clients get the same capacity).
    #[arg(long, value_name = "SLOTS", default_value_t = 512, value_parser = parse_mailbox)]
    mailbox: usize,
    /// PSPAT's Delta_A: the arbiter reads each mailbox at most this often (e.g. 1us, 0).
    #[arg(long, value_name = "TIME", default_value = "1us", value_parser = parse_time_ns)]
    delta_a: u64,
    /// PSPAT's decision aggregation (paper section 6.3.1): one scheduler decision covers up
    /// to this much link time of consecutive packets of one client and flow (0: off; on an
    /// unlimited link, up to 64 KiB). The figures then count packets released, several per
    /// decision.
    #[arg(long, value_name = "TIME", default_value = "0", value_parser = parse_time_ns)]
    aggregate: u64,
    /// Most packets the PSPAT arbiter releases in one scan before it looks at the
    /// mailboxes again.
    #[arg(long, value_name = "N", default_value_t = 128,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    scan_batch: u32,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
    /// Write an SVG plot: throughput and victim p99 latency against clients.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
    /// Give the PSPAT arbiter a CPU of its own, as in the paper: the arbiter is pinned to
    /// the last CPU this process may use and PSPAT clients round-robin over the others;
    /// lock-based clients round-robin over all of them (they have no arbiter). On by
    /// default; `--pin false` lets the OS place every thread.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pin: bool,
}

#[derive(Clone, Debug)]
pub struct ClientList(Vec<usize>);

fn parse_clients(s: &str) -> Result<ClientList, String> {
    let mut v = Vec::new();
    for item in s.split(',').map(str::trim) {
        let n: usize = item
            .parse()
            .map_err(|_| format!("client count '{item}' is not a number"))?;
        if !(1..=1024).contains(&n) {
            return Err(format!("client count {n} must be 1..=1024"));
        }
        v.push(n);
    }
    Ok(ClientList(v))
}

fn parse_mailbox(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("mailbox size '{s}' is not a number"))?;
    if !n.is_power_of_two() || !(16..=65_536).contains(&n) {
        return Err(format!(
            "mailbox size {n} must be a power of two in 16..=65536"
        ));
    }
    Ok(n)
}

/// Parses a rate in bit/s: digits with an optional fraction and a K, M or G suffix.
fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, scale) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1e3),
        Some((i, 'M' | 'm')) => (&t[..i], 1e6),
        Some((i, 'G' | 'g')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("rate '{s}' is not a number of bit/s (e.g. 10G, 100M, 0)"))?;
    if !v.is_finite() || v < 0.0 || v * scale > 1e15 {
        return Err(format!("rate '{s}' must be 0..=1000T bit/s"));
    }
    Ok((v * scale).round() as u64)
}

/// A time for an engine setting: `1us`, `500ns`, `0` (see `pspat_units::parse_duration_ns`).
fn parse_time_ns(s: &str) -> Result<u64, String> {
    pspat_units::parse_duration_ns(s).map_err(String::from)
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("duration '{s}' is not a number of seconds"))?;
    if !(0.01..=3600.0).contains(&v) {
        return Err(format!("duration {v} s must be 0.01..=3600"));
    }
    Ok(Duration::from_secs_f64(v))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Arch {
    /// Clients, mailboxes and one arbiter thread.
    Pspat,
    /// One lock around the scheduler (Linux TC's architecture).
    Lock,
}

impl Arch {
    fn name(self) -> &'static str {
        match self {
            Arch::Pspat => "pspat",
            Arch::Lock => "lock",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Decisions per second, shares and victim latency against the number of clients.
    Throughput,
    /// Shares of two clients 10:1 against the link rate.
    Stability,
    /// The machine's own drain gaps: a spinner where the arbiter goes, N yielding threads
    /// where the clients go, no engine (the floor under the victim's p99).
    Floor,
}

/// The engine under test, either architecture.
enum Running {
    Pspat(Engine),
    Lock(LockedEngine),
}

impl Running {
    /// The counters, stamped within 100 us of being read: a snapshot stamps its time
    /// first, so a thread preempted while reading would count packets of the next
    /// milliseconds in this window (up to a few tries on a loaded machine).
    fn snapshot(&self) -> EngineSnapshot {
        let mut tries = 0;
        loop {
            let s = match self {
                Running::Pspat(e) => e.snapshot(),
                Running::Lock(e) => e.snapshot(),
            };
            tries += 1;
            if clock::now_ns() - s.at_ns < 100_000 || tries == 10 {
                return s;
            }
        }
    }
    fn board(&self) -> Arc<LatencyBoard> {
        match self {
            Running::Pspat(e) => e.latency_board(),
            Running::Lock(e) => e.latency_board(),
        }
    }
    fn contended(&self) -> Option<u64> {
        match self {
            Running::Pspat(_) => None,
            Running::Lock(e) => Some(e.lock_stats().contended.iter().sum()),
        }
    }
    fn stop(self) -> pspat_engine::EngineReport {
        match self {
            Running::Pspat(e) => e.stop(false),
            Running::Lock(e) => e.stop(false),
        }
    }
}

/// A client of either architecture.
enum AnyClient {
    Pspat(Client),
    Lock(LockClient),
}

impl AnyClient {
    #[inline]
    fn submit(&mut self, flow: u32, len: u32) -> Result<(), SubmitError> {
        self.submit_at(flow, len, clock::now_ns())
    }
    /// Submits a packet stamped `now_ns`.
    #[inline]
    fn submit_at(&mut self, flow: u32, len: u32, now_ns: u64) -> Result<(), SubmitError> {
        match self {
            AnyClient::Pspat(c) => c.submit_at(flow, len, now_ns).map(drop),
            AnyClient::Lock(c) => c.submit_at(flow, len, now_ns).map(drop),
        }
    }
    /// The mailbox is full: let others run (in the client hand-off mode, wait for and
    /// send the cleared packets).
    fn wait(&mut self, at_most: Duration) {
        match self {
            AnyClient::Pspat(c) if c.transmits_itself() => {
                c.wait_and_drain(at_most);
            }
            _ => std::thread::yield_now(),
        }
    }
    /// Nothing to send for `d`: sleep (in the client hand-off mode, sending what the
    /// arbiter clears meanwhile). A victim that spun here would take a core from the
    /// greedy clients and the arbiter on a small machine.
    fn idle(&mut self, d: Duration) {
        match self {
            AnyClient::Pspat(c) if c.transmits_itself() => {
                c.wait_and_drain(d);
            }
            _ => std::thread::sleep(d),
        }
    }
}

/// One measurement: an architecture, some greedy clients, maybe a victim.
struct PointSpec<'a> {
    arch: Arch,
    alg: &'a str,
    params: &'a Params,
    rate_bps: u64,
    len: u32,
    duration: Duration,
    handoff: Handoff,
    /// Weights of the greedy clients.
    greedy: Vec<u32>,
    /// Victim gap in ns, if any.
    victim_gap_ns: Option<u64>,
    backend: Arc<dyn Backend>,
    pin: bool,
    mailbox: usize,
    knobs: Knobs,
}

/// The PSPAT engine's settings a run may change (the lock baseline has none of them).
#[derive(Clone, Copy, Debug, Serialize)]
struct Knobs {
    delta_a_ns: u64,
    aggregate_ns: u64,
    scan_batch: u32,
}

impl Knobs {
    fn of(a: &ArchArgs) -> Self {
        Self {
            delta_a_ns: a.delta_a,
            aggregate_ns: a.aggregate,
            scan_batch: a.scan_batch,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
struct ClientShare {
    client: usize,
    weight: u32,
    decisions: u64,
    bytes: u64,
    /// Bytes over the weight-proportional target among the greedy clients (1 = exact).
    of_target: f64,
}

#[derive(Clone, Debug, Serialize)]
struct Latency {
    count: u64,
    p50_ns: u64,
    p99_ns: u64,
    max_ns: u64,
}

#[derive(Clone, Debug, Serialize)]
struct Point {
    arch: Arch,
    clients: usize,
    decisions_per_s: f64,
    /// Packets per second the backend took (with `null`, every released packet).
    sent_per_s: f64,
    /// Bits per second released onto the emulated link (the link rate when it binds).
    released_bps: f64,
    /// Single-thread enqueue+dequeue pairs per second of the same algorithm and flows.
    limit_per_s: f64,
    /// decisions_per_s / limit_per_s.
    of_limit: f64,
    /// The same with every greedy flow holding a mailbox's capacity of packets, as it
    /// does in the engine (the plain limit keeps only 64 packets in the scheduler).
    limit_backlogged_per_s: f64,
    /// decisions_per_s / limit_backlogged_per_s.
    of_limit_backlogged: f64,
    /// Smallest over largest greedy share, each normalised by its weight.
    share_min_max: f64,
    shares: Vec<ClientShare>,
    victim: Option<Latency>,
    /// Decisions during the whole point, warm-up and final drain included (divides a
    /// profile of the whole run, e.g. the arbiter's instruction count under callgrind).
    decisions_total: u64,
    /// Packets the scheduler itself dequeued during the whole point: `decisions_total`
    /// without decision aggregation, fewer with it (an aggregate is one).
    sched_dequeues_total: Option<u64>,
    /// Packets dropped by the scheduler (all reasons) during the whole point.
    drops: u64,
    /// Packets the backend refused (counted, not sent) during the whole point.
    send_failed: u64,
    /// Submissions refused with MailboxFull (backpressure) during the whole point.
    mailbox_full: u64,
    /// Lock baseline: submits that found the lock taken.
    lock_contended: Option<u64>,
    /// PSPAT: the arbiter's long intervals between mailbox drains over the measured
    /// interval (`pspat_engine::stall`).
    stalls: Option<StallSummary>,
}

/// How long the PSPAT arbiter went without reading the mailboxes, over the measured
/// interval: its drain gaps (the p99 wait they impose is a floor under any packet's p99
/// latency on this run), and the heavy fences it paid to deactivate idle clients.
#[derive(Clone, Debug, Serialize)]
struct StallSummary {
    #[serde(flatten)]
    gaps: pspat_engine::stall::StallSummary,
    deactivation_fences: u64,
    /// The arbiter's scans per second over the measured interval, and the decisions of
    /// an average scan (near `scan_batch`: the arbiter is the bottleneck; far below it:
    /// it waits for the clients).
    scans_per_s: f64,
    decisions_per_scan: f64,
}

/// One flow per client; the victim's last. A flow's maximum packet length is the packet
/// length: timestamp schedulers size their guarantees (and QFQ its groups) by it.
fn flows_of(greedy: &[u32], victim: bool, len: u32) -> Vec<FlowParams> {
    greedy
        .iter()
        .copied()
        .chain(victim.then_some(VICTIM_WEIGHT * GREEDY_WEIGHT))
        .map(|w| FlowParams::weighted(w).with_max_len(len))
        .collect()
}

fn engine_config(spec: &PointSpec) -> EngineConfig {
    let victim = spec.victim_gap_ns.is_some();
    let mut clients = vec![ClientConfig::default(); spec.greedy.len()];
    if victim {
        clients.push(ClientConfig {
            track_latency: true,
        });
    }
    let mut cfg = EngineConfig::new(spec.alg, flows_of(&spec.greedy, victim, spec.len), clients);
    cfg.mailbox_entries = spec.mailbox;
    // Each flow can hold everything its client can have in flight: no scheduler drops.
    let limit = cfg.mailbox_entries as u32;
    for f in &mut cfg.flows {
        *f = f.with_limit_pkts(limit);
    }
    cfg.params = spec.params.clone();
    cfg.delta_a_ns = spec.knobs.delta_a_ns;
    cfg.aggregate_ns = spec.knobs.aggregate_ns;
    cfg.scan_batch = spec.knobs.scan_batch;
    cfg.rate_bps = spec.rate_bps;
    // PSPAT with decision aggregation schedules an aggregate as one packet of up to the
    // aggregation budget: each flow must admit packets that long, or nothing would merge.
    // (The lock baseline does not aggregate and keeps the flows as they are.)
    if spec.arch == Arch::Pspat {
        cfg.fit_flows_to_aggregates();
    }
    cfg.handoff = spec.handoff;
    if spec.pin && spec.arch == Arch::Pspat {
        cfg.arbiter_cpu = pspat_io::cpu::allowed_cpus().last().copied();
    }
    cfg
}

/// The CPU client thread `i` is pinned to under `--pin` (see `ArchArgs::pin`).
fn client_cpu(spec: &PointSpec, i: usize) -> Option<usize> {
    if !spec.pin {
        return None;
    }
    let cpus = pspat_io::cpu::allowed_cpus();
    let usable = match spec.arch {
        Arch::Pspat if cpus.len() > 1 => &cpus[..cpus.len() - 1],
        _ => &cpus[..],
    };
    (!usable.is_empty()).then(|| usable[i % usable.len()])
}

/// `x / limit`, or 0 when the limit was not measured.
fn ratio(x: f64, limit: f64) -> f64 {
    if limit > 0.0 {
        x / limit
    } else {
        0.0
    }
}

/// The two limits a throughput point is compared with (zero: not measured).
#[derive(Clone, Copy, Debug, Default)]
struct Limits {
    flat: f64,
    backlogged: f64,
}

fn run_point(spec: &PointSpec, limits: Limits) -> Result<Point> {
    let cfg = engine_config(spec);
    let (running, clients): (Running, Vec<AnyClient>) = match spec.arch {
        Arch::Pspat => {
            let (e, c) = Engine::start(&cfg, Arc::clone(&spec.backend))?;
            (
                Running::Pspat(e),
                c.into_iter().map(AnyClient::Pspat).collect(),
            )
        }
        Arch::Lock => {
            let (e, c) = LockedEngine::start(&cfg, Arc::clone(&spec.backend))?;
            (
                Running::Lock(e),
                c.into_iter().map(AnyClient::Lock).collect(),
            )
        }
    };
    let n_greedy = spec.greedy.len();
    let stop = Arc::new(AtomicBool::new(false));
    let len = spec.len;
    let mut threads = Vec::with_capacity(clients.len());
    for (i, mut c) in clients.into_iter().enumerate() {
        let stop = Arc::clone(&stop);
        let flow = i as u32;
        let gap = if i >= n_greedy {
            spec.victim_gap_ns
        } else {
            None
        };
        let name = if gap.is_some() {
            "victim".to_owned()
        } else {
            format!("greedy-{i}")
        };
        let cpu = client_cpu(spec, i);
        let h = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                if let Some(cpu) = cpu {
                    // Best effort: an unpinned client is still correct.
                    let _ = pspat_io::cpu::pin_current_thread(cpu);
                }
                match gap {
                    None => greedy(&mut c, flow, len, &stop),
                    Some(gap) => victim(&mut c, flow, len, gap, &stop),
                }
            })
            .context("spawning a client thread")?;
        threads.push(h);
    }
    let warmup = (spec.duration / 10).max(Duration::from_millis(20));
    std::thread::sleep(warmup);
    let board = running.board();
    let a = running.snapshot();
    // The victim's latency over the measured interval only, like every other figure of
    // the point: what was published by now is subtracted at the end (the board is
    // cumulative and published every 50 ms, so the cut is within 50 ms of `a`).
    let victim_before = board.snapshot(n_greedy);
    std::thread::sleep(spec.duration);
    let b = running.snapshot();
    let victim_after = board.snapshot(n_greedy);
    let contended = running.contended();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let report = running.stop();

    let dt = (b.at_ns - a.at_ns) as f64 / 1e9;
    // A counter's growth over the measured interval, summed over the clients.
    let delta = |f: fn(&ClientSnapshot) -> u64| -> u64 {
        b.clients
            .iter()
            .zip(&a.clients)
            .map(|(b, a)| f(b) - f(a))
            .sum()
    };
    let decisions = delta(|c| c.scheduled);
    let bytes = delta(|c| c.scheduled_bytes);
    let sent = delta(|c| c.sent);
    let greedy_bytes: Vec<u64> = (0..n_greedy)
        .map(|i| b.clients[i].scheduled_bytes - a.clients[i].scheduled_bytes)
        .collect();
    let total_w: u64 = spec.greedy.iter().map(|&w| u64::from(w)).sum();
    let total_b: u64 = greedy_bytes.iter().sum();
    let shares: Vec<ClientShare> = (0..n_greedy)
        .map(|i| {
            let target = total_b as f64 * f64::from(spec.greedy[i]) / total_w as f64;
            ClientShare {
                client: i,
                weight: spec.greedy[i],
                decisions: b.clients[i].scheduled - a.clients[i].scheduled,
                bytes: greedy_bytes[i],
                of_target: if target > 0.0 {
                    greedy_bytes[i] as f64 / target
                } else {
                    0.0
                },
            }
        })
        .collect();
    let (lo, hi) = shares.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), s| {
        (lo.min(s.of_target), hi.max(s.of_target))
    });
    let victim = spec.victim_gap_ns.and(victim_after).map(|mut h| {
        if let Some(before) = &victim_before {
            // Same bounds, and `before` is an earlier state of the same counts.
            let _ = h.subtract(before);
        }
        Latency {
            count: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            max_ns: h.max(),
        }
    });
    let stalls = (spec.arch == Arch::Pspat).then(|| StallSummary {
        gaps: b.stalls.since(&a.stalls).summary(b.at_ns - a.at_ns),
        deactivation_fences: b.deactivation_fences - a.deactivation_fences,
        scans_per_s: (b.scans - a.scans) as f64 / dt,
        decisions_per_scan: decisions as f64 / (b.scans - a.scans).max(1) as f64,
    });
    let s = &report.snapshot.clients;
    let decisions_per_s = decisions as f64 / dt;
    Ok(Point {
        arch: spec.arch,
        clients: n_greedy,
        decisions_per_s,
        sent_per_s: sent as f64 / dt,
        released_bps: bytes as f64 * 8.0 / dt,
        limit_per_s: limits.flat,
        of_limit: ratio(decisions_per_s, limits.flat),
        limit_backlogged_per_s: limits.backlogged,
        of_limit_backlogged: ratio(decisions_per_s, limits.backlogged),
        share_min_max: if hi > 0.0 { lo / hi } else { 0.0 },
        shares,
        victim,
        decisions_total: s.iter().map(|c| c.scheduled).sum(),
        sched_dequeues_total: report.sched.as_ref().map(|x| x.stats.sent_pkts),
        drops: s.iter().map(|c| c.dropped_total()).sum(),
        send_failed: s.iter().map(|c| c.send_failed).sum(),
        mailbox_full: s.iter().map(|c| c.mailbox_full).sum(),
        lock_contended: contended,
        stalls,
    })
}

/// A greedy client stamps its packets with one clock reading per this many submissions
/// (and a fresh one after every refusal), as packet generators stamp a burst: on this
/// machine's VM a reading (vDSO `clock_gettime`) costs as much as the rest of a submit.
/// Both architectures' clients do the same. The stamp is then up to a burst's
/// generation time early; only the victim's latency is measured, and it reads the clock
/// for every packet.
const GREEDY_STAMP_EVERY: u32 = 16;

/// A greedy client: submits as fast as it can.
fn greedy(c: &mut AnyClient, flow: u32, len: u32, stop: &AtomicBool) {
    let mut now = clock::now_ns();
    let mut until_stamp = GREEDY_STAMP_EVERY;
    // ORDERING: Relaxed: the flag only ends the loop; the join orders everything else.
    while !stop.load(Ordering::Relaxed) {
        if until_stamp == 0 {
            now = clock::now_ns();
            until_stamp = GREEDY_STAMP_EVERY;
        }
        until_stamp -= 1;
        match c.submit_at(flow, len, now) {
            Ok(()) => {}
            Err(SubmitError::MailboxFull) => {
                c.wait(Duration::from_micros(50));
                until_stamp = 0;
            }
            Err(_) => break,
        }
    }
}

/// The victim: one packet every `gap_ns`, on a schedule that does not drift.
fn victim(c: &mut AnyClient, flow: u32, len: u32, gap_ns: u64, stop: &AtomicBool) {
    let mut next = clock::now_ns();
    // ORDERING: as in `greedy`.
    while !stop.load(Ordering::Relaxed) {
        let now = clock::now_ns();
        if now >= next {
            match c.submit(flow, len) {
                Ok(()) | Err(SubmitError::MailboxFull) => {}
                Err(_) => break,
            }
            next += gap_ns;
            if next < now {
                // Descheduled for longer than a gap: skip, do not burst to catch up.
                next = now + gap_ns;
            }
        } else {
            c.idle(Duration::from_nanos(next - now));
        }
    }
}

/// The limit: the same algorithm's enqueue+dequeue rate on one thread, no engine.
struct Limit {
    flows: Vec<FlowParams>,
    len: u32,
    duration: Duration,
    /// Packets queued in each of the first `backlogged` flows (the greedy clients', not
    /// the victim's) before the timed loop, and kept there.
    backlog: usize,
    backlogged: usize,
}

/// Packets enqueued before they are dequeued, in the limit loop (round robin over flows).
const LIMIT_BATCH: usize = 64;

impl SchedulerVisitor<Pkt> for Limit {
    type Output = Result<f64>;

    fn visit<S: Scheduler<Pkt> + Send + 'static>(self, mut sched: S) -> Result<f64> {
        let mut ids = Vec::with_capacity(self.flows.len());
        for p in &self.flows {
            ids.push(sched.add_flow(*p)?);
        }
        let n = ids.len();
        let mut pairs = 0u64;
        let mut f = 0usize;
        let mut seq = 0u32;
        let mut sink = 0u64;
        let packet = |f: usize, seq: u32| Pkt {
            len: self.len,
            client: f as u32,
            flow: f as u32,
            seq,
            submit_ns: 0,
            depart_ns: 0,
        };
        for _ in 0..self.backlog {
            for (g, &id) in ids.iter().enumerate().take(self.backlogged) {
                if sched.enqueue(id, packet(g, seq)).is_err() {
                    bail!("the limit loop's scheduler refused its backlog");
                }
                seq = seq.wrapping_add(1);
            }
        }
        // With a backlog, each dequeued packet's flow gets the next packet (a closed loop,
        // as a greedy client refills its mailbox as its packets leave), so that every flow
        // keeps its backlog whatever the weights, and the flows without one (the victim's)
        // stay empty; the first batch goes round robin over the backlogged flows. Without
        // a backlog, round robin over all flows.
        let mut next = [0u32; LIMIT_BATCH];
        if self.backlog > 0 {
            for (i, slot) in next.iter_mut().enumerate() {
                *slot = (i % self.backlogged.max(1)) as u32;
            }
        }
        let t0 = Instant::now();
        loop {
            for _ in 0..16 {
                for slot in next.iter_mut() {
                    if self.backlog > 0 {
                        f = *slot as usize;
                    }
                    if sched.enqueue(ids[f], packet(f, seq)).is_err() {
                        bail!("the limit loop's scheduler refused a packet");
                    }
                    seq = seq.wrapping_add(1);
                    f = if f + 1 == n { 0 } else { f + 1 };
                }
                // Each packet is read, as the arbiter reads it to hand it on; the sink keeps
                // the reads. (`black_box` of the whole `Option` made the compiler copy it
                // through the stack in pieces, and the reloads of those copies stalled on
                // store forwarding: a cost of this loop, not of the scheduler.)
                for slot in next.iter_mut() {
                    let Some((_, p)) = sched.dequeue() else {
                        bail!("the limit loop's scheduler gave back fewer packets than it took");
                    };
                    sink = sink.wrapping_add(u64::from(p.seq)) ^ u64::from(p.client);
                    *slot = p.flow;
                }
                std::hint::black_box(sink);
                pairs += LIMIT_BATCH as u64;
            }
            let el = t0.elapsed();
            if el >= self.duration {
                return Ok(pairs as f64 / el.as_secs_f64());
            }
        }
    }
}

/// The limit with `backlog` packets kept queued in each of the first `backlogged` flows
/// (0: the loop's 64 packets only).
fn measure_limit(
    alg: &str,
    params: &Params,
    flows: Vec<FlowParams>,
    len: u32,
    d: Duration,
    (backlog, backlogged): (usize, usize),
) -> Result<f64> {
    let per_flow = (LIMIT_BATCH * 2 + backlog) as u32;
    let total = LIMIT_BATCH * 2 + backlog * backlogged;
    let flows = flows
        .into_iter()
        .map(|f| f.with_limit_pkts(per_flow))
        .collect();
    registry::visit::<Pkt, _>(
        alg,
        params,
        u32::try_from(total).context("the limit's backlog does not fit in a scheduler")?,
        Limit {
            flows,
            len,
            duration: d,
            backlog,
            backlogged,
        },
    )?
}

#[derive(Serialize)]
struct ThroughputOut<'a> {
    mode: &'static str,
    alg: &'a str,
    backend: &'a str,
    handoff: String,
    rate_bps: u64,
    len: u32,
    duration_s: f64,
    #[serde(flatten)]
    knobs: Knobs,
    victim_gap_us: Option<u64>,
    victim_weight: Option<u32>,
    points: &'a [Point],
    /// pspat decisions/s over lock decisions/s, per client count (when both ran).
    ratios: Vec<Ratio>,
}

#[derive(Serialize)]
struct Ratio {
    clients: usize,
    pspat_over_lock: f64,
}

#[derive(Serialize)]
struct StabilityRow {
    rate_bps: u64,
    /// Rate as a multiple of the sustained rate (when measured).
    times_sustained: Option<f64>,
    results: Vec<StabilityResult>,
}

#[derive(Serialize)]
struct StabilityResult {
    arch: Arch,
    /// Heavy client's bytes over the light one's (the target is 10).
    share: f64,
    /// |share / 10 - 1| in percent.
    error_pct: f64,
    released_bps: f64,
}

#[derive(Serialize)]
struct StabilityOut<'a> {
    mode: &'static str,
    alg: &'a str,
    backend: &'a str,
    handoff: String,
    len: u32,
    duration_s: f64,
    #[serde(flatten)]
    knobs: Knobs,
    /// Decisions/s of the PSPAT engine with the two clients on an unlimited link, in bit/s.
    sustained_bps: Option<f64>,
    rows: Vec<StabilityRow>,
}

pub fn run(a: ArchArgs) -> Result<()> {
    let backend: Arc<dyn Backend> = pspat_io::parse_backend(&a.backend)
        .map_err(|e| Usage(format!("--backend: {e}")))?
        .into();
    if a.arch.is_empty() {
        return Err(Usage("--arch needs at least one of pspat, lock".into()).into());
    }
    // Name and parameters are the user's to fix: check them before any thread starts.
    registry::build::<Pkt>(&a.alg, &a.params, 16).map_err(|e| Usage(e.to_string()))?;
    if a.mode == Mode::Throughput && !a.rate_list.is_empty() {
        return Err(Usage("--rate-list applies to --mode stability only".into()).into());
    }
    match a.mode {
        Mode::Throughput => throughput(&a, backend),
        Mode::Stability => stability(&a, backend),
        Mode::Floor => crate::floor::floor(&a.clients.0, a.duration, a.pin, a.json),
    }
}

fn progress(json: bool, msg: &str) {
    if !json {
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "{msg}");
    }
}

fn throughput(a: &ArchArgs, backend: Arc<dyn Backend>) -> Result<()> {
    let mut points: Vec<Point> = Vec::new();
    let victim_gap_ns = a.victim.then_some(a.victim_gap_us * 1000);
    for &n in &a.clients.0 {
        let greedy = vec![GREEDY_WEIGHT; n];
        let flows = flows_of(&greedy, a.victim, a.len);
        let limit = |backlog| {
            measure_limit(
                &a.alg,
                &a.params,
                flows.clone(),
                a.len,
                a.duration / 2,
                backlog,
            )
        };
        // A greedy client keeps its mailbox's capacity in flight, nearly all of it in the
        // scheduler; the victim's flow is nearly empty.
        let in_flight = pspat_mailbox::Config::with_entries(a.mailbox).capacity::<Pkt>();
        let limits = Limits {
            flat: limit((0, 0))?,
            backlogged: limit((in_flight, n))?,
        };
        for &arch in &a.arch {
            progress(a.json, &format!("{} clients, {}...", n, arch.name()));
            let spec = PointSpec {
                arch,
                alg: &a.alg,
                params: &a.params,
                rate_bps: a.rate,
                len: a.len,
                duration: a.duration,
                handoff: a.handoff,
                greedy: greedy.clone(),
                victim_gap_ns,
                backend: Arc::clone(&backend),
                pin: a.pin,
                mailbox: a.mailbox,
                knobs: Knobs::of(a),
            };
            let p = run_point(&spec, limits)
                .with_context(|| format!("{} with {n} clients", arch.name()))?;
            points.push(p);
        }
    }
    let ratios: Vec<Ratio> = a
        .clients
        .0
        .iter()
        .filter_map(|&n| {
            let get = |arch| {
                points
                    .iter()
                    .find(|p| p.arch == arch && p.clients == n)
                    .map(|p| p.decisions_per_s)
            };
            let (p, l) = (get(Arch::Pspat)?, get(Arch::Lock)?);
            Some(Ratio {
                clients: n,
                pspat_over_lock: if l > 0.0 { p / l } else { f64::INFINITY },
            })
        })
        .collect();
    if let Some(path) = &a.plot {
        plot(path, &points, a).with_context(|| format!("writing the plot {}", path.display()))?;
    }
    if a.json {
        let out = ThroughputOut {
            mode: "throughput",
            alg: &a.alg,
            backend: &a.backend,
            handoff: a.handoff.to_string(),
            rate_bps: a.rate,
            len: a.len,
            duration_s: a.duration.as_secs_f64(),
            knobs: Knobs::of(a),
            victim_gap_us: a.victim.then_some(a.victim_gap_us),
            victim_weight: a.victim.then_some(VICTIM_WEIGHT),
            points: &points,
            ratios,
        };
        return emit(&serde_json::to_string(&out)?);
    }
    emit(&format!(
        "bench arch: alg {} backend {} handoff {} delta-a {} ns aggregate {} ns scan-batch {} \
         rate {} len {} B, {:.2} s per point{}",
        a.alg,
        a.backend,
        a.handoff,
        a.delta_a,
        a.aggregate,
        a.scan_batch,
        if a.rate == 0 {
            "unlimited".to_owned()
        } else {
            format!("{} bit/s", a.rate)
        },
        a.len,
        a.duration.as_secs_f64(),
        if a.victim {
            format!(
                ", victim: 1 pkt / {} us, weight {VICTIM_WEIGHT}x",
                a.victim_gap_us
            )
        } else {
            String::new()
        }
    ))?;
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            let v = p.victim.as_ref();
            vec![
                p.arch.name().to_owned(),
                p.clients.to_string(),
                format!("{:.3}", p.decisions_per_s / 1e6),
                format!("{:.3}", p.sent_per_s / 1e6),
                format!("{:.3}", p.limit_per_s / 1e6),
                format!("{:.2}", p.of_limit),
                format!("{:.3}", p.limit_backlogged_per_s / 1e6),
                format!("{:.2}", p.of_limit_backlogged),
                format!("{:.3}", p.share_min_max),
                v.map_or("-".into(), |v| us(v.p50_ns)),
                v.map_or("-".into(), |v| us(v.p99_ns)),
                v.map_or("-".into(), |v| us(v.max_ns)),
                p.drops.to_string(),
                p.send_failed.to_string(),
                p.mailbox_full.to_string(),
                p.stalls
                    .as_ref()
                    .map_or("-".into(), |s| format!("{:.2}", s.gaps.stalled_pct)),
                p.stalls.as_ref().map_or("-".into(), |s| {
                    format!("{:.1}", s.gaps.wait_p99_ns / 1000.0)
                }),
            ]
        })
        .collect();
    let t = table::render(
        &[
            "arch",
            "clients",
            "Mdec/s",
            "Msent/s",
            "limit",
            "of-limit",
            "limit-bl",
            "of-bl",
            "share-min/max",
            "victim-p50us",
            "p99us",
            "maxus",
            "drops",
            "sendfail",
            "full",
            "stall%",
            "stall-p99us",
        ],
        &rows,
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
    );
    emit(t.trim_end())?;
    for r in &ratios {
        emit(&format!(
            "{} clients: pspat/lock = {:.2}",
            r.clients, r.pspat_over_lock
        ))?;
    }
    Ok(())
}

fn stability(a: &ArchArgs, backend: Arc<dyn Backend>) -> Result<()> {
    let greedy = vec![10 * GREEDY_WEIGHT, GREEDY_WEIGHT];
    let spec = |arch, rate_bps| PointSpec {
        arch,
        alg: &a.alg,
        params: &a.params,
        rate_bps,
        len: a.len,
        duration: a.duration,
        handoff: a.handoff,
        greedy: greedy.clone(),
        victim_gap_ns: None,
        backend: Arc::clone(&backend),
        pin: a.pin,
        mailbox: a.mailbox,
        knobs: Knobs::of(a),
    };
    let (rates, sustained): (Vec<(u64, Option<f64>)>, Option<f64>) = if a.rate_list.is_empty() {
        progress(
            a.json,
            "measuring the sustained rate (pspat, unlimited link)...",
        );
        let p = run_point(&spec(Arch::Pspat, 0), Limits::default())?;
        let bps = p.decisions_per_s * f64::from(a.len) * 8.0;
        let rates = STABILITY_STEPS
            .iter()
            .map(|&x| ((bps * x).round().max(1.0) as u64, Some(x)))
            .collect();
        (rates, Some(bps))
    } else {
        (a.rate_list.iter().map(|&r| (r, None)).collect(), None)
    };
    let mut rows = Vec::new();
    for &(rate, x) in &rates {
        if rate == 0 {
            return Err(
                Usage("--rate-list: a rate of 0 is an unlimited link, not a rate".into()).into(),
            );
        }
        let mut results = Vec::new();
        for &arch in &a.arch {
            progress(a.json, &format!("{} bit/s, {}...", rate, arch.name()));
            let p = run_point(&spec(arch, rate), Limits::default())?;
            let share = p.shares[0].bytes as f64 / p.shares[1].bytes.max(1) as f64;
            results.push(StabilityResult {
                arch,
                share,
                error_pct: (share / 10.0 - 1.0).abs() * 100.0,
                released_bps: p.released_bps,
            });
        }
        rows.push(StabilityRow {
            rate_bps: rate,
            times_sustained: x,
            results,
        });
    }
    if a.json {
        let out = StabilityOut {
            mode: "stability",
            alg: &a.alg,
            backend: &a.backend,
            handoff: a.handoff.to_string(),
            len: a.len,
            duration_s: a.duration.as_secs_f64(),
            knobs: Knobs::of(a),
            sustained_bps: sustained,
            rows,
        };
        return emit(&serde_json::to_string(&out)?);
    }
    emit(&format!(
        "bench arch --mode stability: alg {} two greedy clients weights 10:1, {} B packets{}",
        a.alg,
        a.len,
        sustained.map_or(String::new(), |s| format!(
            ", pspat sustains {:.1} Mbit/s ({:.3} Mpps)",
            s / 1e6,
            s / 8.0 / f64::from(a.len) / 1e6
        ))
    ))?;
    let mut table_rows = Vec::new();
    for r in &rows {
        for s in &r.results {
            table_rows.push(vec![
                format!("{:.1}", r.rate_bps as f64 / 1e6),
                r.times_sustained.map_or("-".into(), |x| format!("{x:.2}")),
                s.arch.name().to_owned(),
                format!("{:.3}", s.share),
                format!("{:.2}", s.error_pct),
                format!("{:.1}", s.released_bps / 1e6),
            ]);
        }
    }
    let t = table::render(
        &[
            "link-Mbit/s",
            "x-sustained",
            "arch",
            "share(10)",
            "error%",
            "released-Mbit/s",
        ],
        &table_rows,
        &[0, 1, 3, 4, 5],
    );
    emit(t.trim_end())
}

/// Two panels: decisions/s against clients, victim p99 latency against clients; one line
/// per architecture. The x axis is a power-of-two axis of the client count, the y axes are
/// logarithmic (the two architectures' latencies differ by orders of magnitude).
fn plot(path: &std::path::Path, points: &[Point], a: &ArchArgs) -> Result<()> {
    use pspat_plot::{Colour, Figure, Legend, LineChart, Scale, Series};
    let series = |f: &dyn Fn(&Point) -> Option<f64>| -> Vec<Series> {
        a.arch
            .iter()
            .map(|&arch| {
                let pts = points
                    .iter()
                    .filter(|p| p.arch == arch)
                    .filter_map(|p| f(p).map(|y| (p.clients as f64, y)))
                    .collect();
                let colour = match arch {
                    Arch::Pspat => Colour::BLUE,
                    Arch::Lock => Colour::RED,
                };
                Series::new(arch.name(), pts).with_colour(colour)
            })
            .collect()
    };
    let rate = series(&|p| Some(p.decisions_per_s / 1e6));
    let p99 = series(&|p| p.victim.as_ref().map(|v| v.p99_ns as f64 / 1000.0));
    let rate_title = format!(
        "{}: scheduler decisions per second ({} B, {} backend)",
        a.alg, a.len, a.backend
    );
    let p99_title = format!(
        "victim p99 latency (1 pkt / {} us, weight {}x)",
        a.victim_gap_us, VICTIM_WEIGHT
    );
    let panel = LineChart {
        x_label: "client threads",
        x_scale: Scale::Log2,
        y_scale: Scale::Log,
        markers: true,
        legend: Legend::MiddleRight,
        ..LineChart::default()
    };
    Figure::new((800, 900))
        .panel(
            LineChart {
                title: &rate_title,
                y_label: "Mdecisions/s",
                ..panel.clone()
            },
            &rate,
        )
        .panel(
            LineChart {
                title: &p99_title,
                y_label: "p99 latency, us",
                ..panel
            },
            &p99,
        )
        .write(path)?;
    Ok(())
}
