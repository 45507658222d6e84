//! `pspat bench arch`: the command line of the architecture benchmark
//! (`pspat_harness::arch`): its options, their conversion to the benchmark's specs,
//! progress lines, and the tables or JSON of its reports.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, ValueEnum};
use pspat_engine::stall::STALL_MIN_NS;
use pspat_engine::Handoff;
use pspat_harness::arch::{
    self, Arch, ArchError, FloorReport, FloorSpec, Knobs, Progress, Setting, Setup,
    StabilityReport, StabilitySpec, ThroughputReport, ThroughputSpec,
};
use pspat_io::Backend;
use pspat_sched::registry::Params;
use pspat_units::{parse_bandwidth, parse_duration};

use crate::{emit, Usage};
use pspat_plot::table;

#[derive(Args, Debug)]
pub struct ArchArgs {
    /// Client counts to measure (greedy clients; the victim comes on top).
    #[arg(
        long,
        value_name = "N,N,...",
        default_value = "1,2,4,8,16,32,64",
        value_delimiter = ','
    )]
    clients: Vec<usize>,
    /// Architectures to compare, in the order run at each point.
    #[arg(
        long,
        value_name = "A,...",
        value_delimiter = ',',
        default_value = "pspat,lock"
    )]
    arch: Vec<ArchName>,
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
    #[arg(long, value_name = "BPS", default_value = "0", value_parser = parse_bandwidth)]
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
    #[arg(long, value_name = "BPS,...", value_delimiter = ',', value_parser = parse_bandwidth)]
    rate_list: Vec<u64>,
    /// Spread the greedy clients' packets over N flows in all (client i sends round robin
    /// over flows i, i+C, ...): the engine's cost with many flows. N is at least the
    /// largest client count and at most 1048576. Default: one flow per client.
    #[arg(long, value_name = "N")]
    flows: Option<u32>,
    /// Slots per client mailbox (a power of two, 16..=65536): what a client may have in
    /// flight in either architecture (the lock-based clients get the same capacity).
    #[arg(long, value_name = "SLOTS", default_value_t = 512)]
    mailbox: usize,
    /// PSPAT's Delta_A: the arbiter reads each mailbox at most this often (e.g. 1us, 0).
    #[arg(long, value_name = "TIME", default_value = "1us", value_parser = parse_duration)]
    delta_a: Duration,
    /// PSPAT's decision aggregation (paper section 6.3.1): one scheduler decision covers up
    /// to this much link time of consecutive packets of one client and flow (0: off; on an
    /// unlimited link, up to 64 KiB). The figures then count packets released, several per
    /// decision.
    #[arg(long, value_name = "TIME", default_value = "0", value_parser = parse_duration)]
    aggregate: Duration,
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

/// `--arch`'s values (the library's [`Arch`], as clap reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ArchName {
    /// Clients, mailboxes and one arbiter thread.
    Pspat,
    /// One lock around the scheduler (Linux TC's architecture).
    Lock,
}

impl From<ArchName> for Arch {
    fn from(a: ArchName) -> Arch {
        match a {
            ArchName::Pspat => Arch::Pspat,
            ArchName::Lock => Arch::Lock,
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

/// A benchmark error: the user's to fix (exit code 2; prefixed with the option at fault)
/// or a failed run.
fn lib_error(e: ArchError) -> anyhow::Error {
    if !e.is_usage() {
        return e.into();
    }
    let msg = match e.setting() {
        Some(s) => format!("{}: {e}", option(s)),
        None => e.to_string(),
    };
    Usage(msg).into()
}

/// The option that sets `s`.
fn option(s: Setting) -> &'static str {
    match s {
        Setting::Duration => "--duration",
        Setting::Clients => "--clients",
        Setting::Archs => "--arch",
        Setting::Mailbox => "--mailbox",
        Setting::Rate => "--rate",
        Setting::StabilityRates => "--rate-list",
        Setting::Len => "--len",
        Setting::ScanBatch => "--scan-batch",
        Setting::VictimGap => "--victim-gap-us",
        Setting::Flows => "--flows",
    }
}

impl ArchArgs {
    fn setup(&self, backend: Arc<dyn Backend>) -> Setup {
        Setup {
            alg: self.alg.clone(),
            params: self.params.clone(),
            backend,
            backend_name: self.backend.clone(),
            rate_bps: self.rate,
            len: self.len,
            duration: self.duration,
            handoff: self.handoff,
            mailbox: self.mailbox,
            pin: self.pin,
            knobs: Knobs {
                delta_a: self.delta_a,
                aggregate: self.aggregate,
                scan_batch: self.scan_batch,
            },
        }
    }

    fn archs(&self) -> Vec<Arch> {
        self.arch.iter().map(|&a| a.into()).collect()
    }
}

pub fn run(a: ArchArgs) -> Result<()> {
    let backend: Arc<dyn Backend> = pspat_io::parse_backend(&a.backend)
        .map_err(|e| Usage(format!("--backend: {e}")))?
        .into();
    if a.mode == Mode::Throughput && !a.rate_list.is_empty() {
        return Err(Usage("--rate-list applies to --mode stability only".into()).into());
    }
    if a.mode != Mode::Throughput && a.flows.is_some() {
        return Err(Usage("--flows applies to --mode throughput only".into()).into());
    }
    // Every option is the user's to fix, whatever the mode: check them before any thread
    // starts.
    let setup = a.setup(backend);
    setup.validate().map_err(lib_error)?;
    let mut progress = |p: Progress| {
        if a.json {
            return;
        }
        let msg = match p {
            Progress::Point { clients, arch } => format!("{clients} clients, {arch}..."),
            Progress::Sustained => "measuring the sustained rate (pspat, unlimited link)...".into(),
            Progress::Rate { rate_bps, arch } => format!("{rate_bps} bit/s, {arch}..."),
        };
        let _ = writeln!(std::io::stderr().lock(), "{msg}");
    };
    match a.mode {
        Mode::Throughput => {
            let spec = ThroughputSpec {
                setup,
                archs: a.archs(),
                clients: a.clients.clone(),
                victim_gap: a.victim.then(|| Duration::from_micros(a.victim_gap_us)),
                flows: a.flows,
            };
            let report = arch::throughput(&spec, &mut progress).map_err(lib_error)?;
            if let Some(path) = &a.plot {
                report.plot(path)?;
            }
            print_throughput(&report, a.json)
        }
        Mode::Stability => {
            let spec = StabilitySpec {
                setup,
                archs: a.archs(),
                rates_bps: a.rate_list.clone(),
            };
            let report = arch::stability(&spec, &mut progress).map_err(lib_error)?;
            print_stability(&report, a.json)
        }
        Mode::Floor => {
            let spec = FloorSpec {
                clients: a.clients.clone(),
                duration: a.duration,
                pin: a.pin,
            };
            print_floor(&arch::floor(&spec).map_err(lib_error)?, a.json)
        }
    }
}

fn print_throughput(r: &ThroughputReport, json: bool) -> Result<()> {
    if json {
        return emit(&serde_json::to_string(r)?);
    }
    emit(&format!(
        "bench arch: alg {} backend {} handoff {} delta-a {} ns aggregate {} ns scan-batch {} \
         rate {} len {} B, {}, {:.2} s per point{}",
        r.alg,
        r.backend,
        r.handoff,
        r.knobs.delta_a.as_nanos(),
        r.knobs.aggregate.as_nanos(),
        r.knobs.scan_batch,
        if r.rate_bps == 0 {
            "unlimited".to_owned()
        } else {
            format!("{} bit/s", r.rate_bps)
        },
        r.len,
        match r.flows {
            Some(n) => format!("{n} greedy flows"),
            None => "a flow per greedy client".to_owned(),
        },
        r.duration.as_secs_f64(),
        match (r.victim_gap, r.victim_weight) {
            (Some(gap), Some(w)) =>
                format!(", victim: 1 pkt / {} us, weight {w}x", gap.as_micros()),
            _ => String::new(),
        }
    ))?;
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
    let rows: Vec<Vec<String>> = r
        .points
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
    for x in &r.ratios {
        emit(&format!(
            "{} clients: pspat/lock = {:.2}",
            x.clients, x.pspat_over_lock
        ))?;
    }
    Ok(())
}

fn print_stability(r: &StabilityReport, json: bool) -> Result<()> {
    if json {
        return emit(&serde_json::to_string(r)?);
    }
    emit(&format!(
        "bench arch --mode stability: alg {} two greedy clients weights 10:1, {} B packets{}",
        r.alg,
        r.len,
        r.sustained_bps.map_or(String::new(), |s| format!(
            ", pspat sustains {:.1} Mbit/s ({:.3} Mpps)",
            s / 1e6,
            s / 8.0 / f64::from(r.len) / 1e6
        ))
    ))?;
    let mut rows = Vec::new();
    for row in &r.rows {
        for s in &row.results {
            rows.push(vec![
                format!("{:.1}", row.rate_bps as f64 / 1e6),
                row.times_sustained
                    .map_or("-".into(), |x| format!("{x:.2}")),
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
        &rows,
        &[0, 1, 3, 4, 5],
    );
    emit(t.trim_end())
}

fn print_floor(r: &FloorReport, json: bool) -> Result<()> {
    if json {
        return emit(&serde_json::to_string(r)?);
    }
    emit(&format!(
        "bench arch --mode floor: a spinner on the arbiter's CPU, N yielding threads on the \
         clients' CPUs, {:.2} s per point; gaps of {:.1} us or more",
        r.duration.as_secs_f64(),
        STALL_MIN_NS as f64 / 1000.0
    ))?;
    let rows: Vec<Vec<String>> = r
        .points
        .iter()
        .map(|p| {
            vec![
                p.clients.to_string(),
                p.gaps.gaps.to_string(),
                format!("{:.2}", p.gaps.stalled_pct),
                format!("{:.1}", p.gaps.wait_p99_ns / 1000.0),
                format!("{:.0}", p.gaps.longest_at_least_ns as f64 / 1000.0),
            ]
        })
        .collect();
    let t = table::render(
        &["clients", "gaps", "stall%", "stall-p99us", "longest>=us"],
        &rows,
        &[0, 1, 2, 3, 4],
    );
    emit(t.trim_end())
}
