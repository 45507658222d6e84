//! `pspat udpgen`, `pspat udpsink` and `pspat experiment row|plot|summary`: the shaper
//! experiment kit's tools (`pspat-expkit`) behind a command line. Here are only the options,
//! their conversion to the library's settings, and the printing.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use pspat_expkit::csv::Point;
use pspat_expkit::tree_compare::Capacity;
use pspat_expkit::{
    csv, figures, tree_compare, CpuUse, GenConfig, GenReport, Generator, KitTree, Row, RowSpec,
    Sink, SinkConfig, SinkError, SinkReport, TreeRun, VictimFigures,
};
use pspat_io::cpu::CpuList;
use pspat_units::{parse_bandwidth, parse_bytes, parse_duration, parse_packet_rate};
use serde::Serialize;

use crate::emit;
use pspat_plot::table;

#[derive(Args, Debug)]
pub struct GenArgs {
    /// Destination address, IP:PORT.
    #[arg(long, value_name = "IP:PORT")]
    dest: SocketAddr,
    /// Greedy sender threads (each its own socket and source port).
    #[arg(long, value_name = "M", default_value_t = 1)]
    senders: u32,
    /// Length of each packet on the wire, bytes (Ethernet + IPv4 + UDP headers + payload):
    /// 82 (the 40-byte pspat header) to 65549.
    #[arg(long, value_name = "BYTES", default_value_t = 1000, value_parser = parse_bytes)]
    len: u64,
    /// How long to send, seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    duration: Duration,
    /// Source port of sender 0; sender i uses base + i. 0: ports chosen by the kernel.
    #[arg(long, value_name = "P", default_value_t = 10000)]
    src_port_base: u16,
    /// Packets per second per greedy sender; 0: as fast as possible.
    #[arg(long, value_name = "PPS", default_value = "0", value_parser = parse_packet_rate)]
    rate: f64,
    /// Packets per second of each greedy sender in turn, one per sender (0: as fast as
    /// possible), instead of --rate.
    #[arg(long, value_name = "PPS,...", value_delimiter = ',', value_parser = parse_packet_rate,
          conflicts_with = "rate")]
    rates: Vec<f64>,
    /// Threads the greedy senders share (sender i in thread i mod T, each thread taking
    /// its senders in turn); 0: a thread per sender. The victim has its own.
    #[arg(long, value_name = "T", default_value_t = 0)]
    threads: u32,
    /// Packets per second of the victim sender (client M); 0: no victim.
    #[arg(long, value_name = "PPS", default_value = "0", value_parser = parse_packet_rate)]
    victim_rate: f64,
    /// Source port of the victim [default: base + M, or kernel-chosen with base 0].
    #[arg(long, value_name = "P")]
    victim_port: Option<u16>,
    /// Length of the victim's packets on the wire [default: --len].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    victim_len: Option<u64>,
    /// CPUs to pin the senders to, round-robin: sender i on the (i mod n)-th, the victim
    /// next (e.g. 0,1 or 0-3). Unpinned by default.
    #[arg(long, value_name = "LIST")]
    cpus: Option<CpuList>,
    /// Write the report as JSON to FILE (`-`: stdout, instead of the table).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SinkArgs {
    /// Address to receive on, IP:PORT (port 0: the kernel picks one, printed on stderr).
    #[arg(long, value_name = "IP:PORT")]
    bind: SocketAddr,
    /// Longest time to run, seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    duration: Duration,
    /// Seconds after the first datagram before counting starts.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_duration)]
    warmup: Duration,
    /// Length of the counting window, seconds from the end of the warm-up; datagrams after
    /// it are received but not counted (so that the drain of queues after the senders stop
    /// does not count). 0: count to the end.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_duration)]
    measure: Duration,
    /// Stop once this many seconds pass without a datagram (after the first); 0: never.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_duration)]
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
    /// List every datagram counted (receive time, client, length) in the JSON report.
    #[arg(long)]
    trace: bool,
    /// Write the report as JSON to FILE (`-`: stdout, instead of the table).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum ExperimentCmd {
    /// Appends one run's figures (from udpgen's and udpsink's JSON) to a results CSV.
    // (Boxed: its many paths make it five times the size of the other variants.)
    Row(Box<RowArgs>),
    /// Plots a results CSV: delivered pps, max share error, victim p99 and CPU per packet
    /// against senders.
    Plot(PlotArgs),
    /// Prints a results CSV as one table per set: rates, share error, victim latency (and
    /// what it adds to the bridge alone's), CPU per forwarded packet.
    Summary(SummaryArgs),
    /// The `tree` set: a pspat configuration's tree of classes as Linux TC HTB, its
    /// reference allocation, and runs of it compared.
    #[command(subcommand)]
    Tree(TreeCmd),
}

#[derive(Subcommand, Debug)]
pub enum TreeCmd {
    /// Prints the configuration's tree as HTB on a device, a `tc -batch` file: the same
    /// rates, ceils, bursts and prios, quanta in proportion to the weights, a pfifo of the
    /// queue's limit under each leaf, a u32 filter from each sender's UDP source port to
    /// the leaf pspat's rules send it to.
    Htb(TreeHtbArgs),
    /// Prints each class's reference allocation (HTB's model as a fluid allocation) of
    /// what a run's senders offered.
    Reference(TreeReferenceArgs),
    /// Sets runs of one tree side by side (the first against the second, each against the
    /// reference allocation of what its senders offered, every class's one-second windows
    /// and bursts against its ceil), prints a table and the acceptance lines.
    Compare(TreeCompareArgs),
}

#[derive(Args, Debug)]
pub struct TreeHtbArgs {
    /// The pspat configuration (one tree of classes).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The senders' UDP source ports.
    #[arg(long, value_name = "PORT,...", value_delimiter = ',', required = true)]
    ports: Vec<u16>,
    /// The device HTB goes on.
    #[arg(long, value_name = "DEV", default_value = "r1")]
    dev: String,
}

#[derive(Args, Debug)]
pub struct TreeReferenceArgs {
    /// The pspat configuration (one tree of classes).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// udpgen's JSON report: what each sender offered, from which port.
    #[arg(long, value_name = "FILE")]
    gen: PathBuf,
}

#[derive(Args, Debug)]
pub struct TreeCompareArgs {
    /// The tree's name (the CSV's `tree` column, the figure's title).
    #[arg(long, value_name = "NAME")]
    tree: String,
    /// The pspat configuration (one tree of classes).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// A run: its mode and the directory of its udpgen and udpsink reports (gen.json and
    /// sink.json, the sink's with --trace for the windows and bursts). The first run is
    /// set against the second.
    #[arg(long, value_name = "MODE=DIR", required = true, value_parser = parse_run)]
    run: Vec<(String, PathBuf)>,
    /// Append one line per run and class to this CSV (created with its header line).
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Draw the leaves' throughput (reference and each run) into this SVG.
    #[arg(long, value_name = "FILE")]
    figure: Option<PathBuf>,
    /// Compute each run's reference on a link of what it delivered in all, not on the
    /// tree's link: for a shaper that is itself the bottleneck (the CPU, not the link).
    #[arg(long)]
    at_delivered: bool,
}

fn parse_run(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((mode, dir)) if !mode.is_empty() && !dir.is_empty() => {
            Ok((mode.to_owned(), PathBuf::from(dir)))
        }
        _ => Err(format!("'{s}': expected MODE=DIR")),
    }
}

#[derive(Args, Debug)]
pub struct RowArgs {
    /// Name of the experiment set (e.g. `shares`, `cpu`): one set of plots each.
    #[arg(long, value_name = "NAME")]
    set: String,
    /// The mode measured (e.g. pspat, htb, none).
    #[arg(long, value_name = "NAME")]
    mode: String,
    /// Configured link rate, bit/s (0: none).
    #[arg(long, value_name = "BPS", default_value = "0", value_parser = parse_bandwidth)]
    link_bps: u64,
    /// Weights of senders 0, 1, ...; a shorter list repeats (1,2,3,4: sender i has
    /// weight 1 + i mod 4).
    #[arg(long, value_name = "W,...", value_delimiter = ',', required = true)]
    weights: Vec<u32>,
    /// udpgen's JSON report.
    #[arg(long, value_name = "FILE")]
    gen: PathBuf,
    /// udpsink's JSON report.
    #[arg(long, value_name = "FILE")]
    sink: PathBuf,
    /// The results CSV to append to (created with its header line).
    #[arg(long, value_name = "FILE")]
    csv: PathBuf,
    /// Datagrams the receiving host dropped because the sink's socket buffer was full
    /// (RcvbufErrors), measured by the caller; written as is (empty: unknown).
    #[arg(long, value_name = "N")]
    sink_drops: Option<u64>,
    /// Also append each greedy sender's share against its target to this CSV.
    #[arg(long, value_name = "FILE")]
    shares_csv: Option<PathBuf>,
    /// CPU sample taken at the start of the sink's counting window (the kit's format:
    /// time_us, clk_tck, /proc/stat's cpu lines, `shaper` + /proc/PID/stat); with
    /// --cpu-after, the row gets the CPU nanoseconds per delivered packet.
    #[arg(long, value_name = "FILE", requires = "cpu_after")]
    cpu_before: Option<PathBuf>,
    /// CPU sample taken at the end of the window.
    #[arg(long, value_name = "FILE", requires = "cpu_before")]
    cpu_after: Option<PathBuf>,
    /// udpsink's JSON report of the baseline run (the bridge alone, same senders): the
    /// row gets the victim's p50 and p99 latency above the baseline's.
    #[arg(long, value_name = "FILE")]
    baseline_sink: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// The results CSV written by `pspat experiment row`.
    csv: PathBuf,
}

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// The results CSV written by `pspat experiment row`.
    csv: PathBuf,
    /// Directory for the SVG files (created if missing).
    outdir: PathBuf,
}

/// Writes `r` as JSON to `json` (`-`: to stdout); returns whether the table is still to be
/// printed (not after JSON on stdout).
fn write_json<T: Serialize>(r: &T, json: Option<&Path>) -> Result<bool> {
    let Some(path) = json else {
        return Ok(true);
    };
    let text = serde_json::to_string_pretty(r)?;
    if path.as_os_str() == "-" {
        emit(&text)?;
        return Ok(false);
    }
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    Ok(true)
}

pub fn udpgen(a: GenArgs) -> Result<()> {
    let config = GenConfig {
        dest: a.dest,
        senders: a.senders,
        len: a.len,
        duration: a.duration,
        src_port_base: a.src_port_base,
        rate_pps: a.rate,
        rates_pps: a.rates,
        threads: a.threads,
        victim_rate_pps: a.victim_rate,
        victim_port: a.victim_port,
        victim_len: a.victim_len,
        cpus: a.cpus,
    };
    let r = Generator::open(config).and_then(Generator::run)?;
    if write_json(&r, a.json.as_deref())? {
        print_gen(&r)?;
    }
    Ok(())
}

fn print_gen(r: &GenReport) -> Result<()> {
    let rows: Vec<Vec<String>> = r
        .flows
        .iter()
        .map(|f| {
            vec![
                if f.victim {
                    format!("victim ({})", f.client)
                } else {
                    f.client.to_string()
                },
                f.src_port.to_string(),
                if f.rate_pps > 0.0 {
                    format!("{:.0}", f.rate_pps)
                } else {
                    "max".into()
                },
                f.packets.to_string(),
                format!("{:.0}", f.pps),
                format!("{:.1}", f.pps * f64::from(f.len) * 8.0 / 1e6),
                f.send_errors.to_string(),
            ]
        })
        .collect();
    let t = table::render(
        &[
            "sender", "port", "rate", "packets", "pps", "Mbit/s", "errors",
        ],
        &rows,
        &[1, 2, 3, 4, 5, 6],
    );
    emit(&format!(
        "{t}total: {} packets, {:.0} pps to {}",
        r.total_packets, r.total_pps, r.dest
    ))
}

pub fn udpsink(a: SinkArgs) -> Result<()> {
    let config = SinkConfig {
        bind: a.bind,
        duration: a.duration,
        warmup: a.warmup,
        measure: a.measure,
        idle: a.idle,
        busy_poll: a.busy_poll,
        spin: Duration::from_micros(a.spin_us),
        cpu: a.cpu,
        trace: a.trace,
    };
    // A socket's error names the address, not the tool: say which.
    let err = |e| match e {
        SinkError::Socket(_) => anyhow::Error::from(e).context("udpsink"),
        e => e.into(),
    };
    let sink = Sink::bind(config).map_err(err)?;
    // The experiment script waits for this line before it starts the senders.
    eprintln!("pspat udpsink: ready on {}", sink.local_addr());
    let r = sink.run().map_err(err)?;
    if write_json(&r, a.json.as_deref())? {
        print_sink(&r)?;
    }
    Ok(())
}

fn print_sink(r: &SinkReport) -> Result<()> {
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

pub fn experiment(cmd: ExperimentCmd) -> Result<()> {
    match cmd {
        ExperimentCmd::Row(a) => {
            let a = *a;
            let spec = RowSpec {
                set: a.set,
                mode: a.mode,
                link_bps: a.link_bps,
                weights: a.weights,
                sink_drops: a.sink_drops,
            };
            // The options are checked before the reports are read.
            spec.validate()?;
            let gen = GenReport::read(&a.gen)?;
            let sink = SinkReport::read(&a.sink)?;
            let mut row = Row::new(spec, &gen, &sink)?;
            if let (Some(before), Some(after)) = (&a.cpu_before, &a.cpu_after) {
                row = row.with_cpu(CpuUse::read(before, after)?);
            }
            if let Some(path) = &a.baseline_sink {
                row = row.with_baseline(&SinkReport::read(path)?);
            }
            csv::append_row(&a.csv, &row)?;
            if let Some(path) = &a.shares_csv {
                csv::append_shares(path, &row)?;
            }
            emit(&row_line(&row))
        }
        ExperimentCmd::Plot(a) => {
            for path in figures::plot_results(&a.csv, &a.outdir)? {
                emit(&path.display().to_string())?;
            }
            Ok(())
        }
        ExperimentCmd::Summary(a) => emit(&summary(&csv::read_results(&a.csv)?)),
        ExperimentCmd::Tree(cmd) => tree(cmd),
    }
}

/// The configuration at `path`'s tree, its senders from `ports`.
fn kit_tree(path: &Path, ports: &[u16]) -> Result<KitTree> {
    let config = pspat_config::parse_file(path)?;
    KitTree::from_config(&config, ports).with_context(|| path.display().to_string())
}

/// The source ports of `gen`'s senders, in order.
fn ports_of(gen: &GenReport) -> Vec<u16> {
    gen.flows.iter().map(|f| f.src_port).collect()
}

fn tree(cmd: TreeCmd) -> Result<()> {
    match cmd {
        TreeCmd::Htb(a) => {
            let t = kit_tree(&a.config, &a.ports)?;
            emit(t.htb(&a.dev).trim_end())
        }
        TreeCmd::Reference(a) => {
            let gen = GenReport::read(&a.gen)?;
            let t = kit_tree(&a.config, &ports_of(&gen))?;
            emit(&tree_compare::reference_table(&t, &gen)?)
        }
        TreeCmd::Compare(a) => {
            let mut runs = Vec::new();
            let mut tree: Option<KitTree> = None;
            for (mode, dir) in &a.run {
                let gen = GenReport::read(&dir.join("gen.json"))?;
                let sink = SinkReport::read(&dir.join("sink.json"))?;
                let t = match &tree {
                    Some(t) => t,
                    None => tree.insert(kit_tree(&a.config, &ports_of(&gen))?),
                };
                let capacity = if a.at_delivered {
                    Capacity::Delivered
                } else {
                    Capacity::Link
                };
                let run = TreeRun::new(t, mode, &gen, &sink, capacity)
                    .with_context(|| format!("the {mode} run in {}", dir.display()))?;
                runs.push(run);
            }
            let t = tree.expect("at least one run");
            if let Some(path) = &a.csv {
                tree_compare::append_csv(path, &a.tree, &t, &runs)?;
            }
            if let Some(path) = &a.figure {
                tree_compare::figure(path, &a.tree, &t, &runs)?;
            }
            let mut out = tree_compare::table(&a.tree, &t, &runs);
            for line in tree_compare::verdicts(&a.tree, &t, &runs) {
                out += &line;
                out.push('\n');
            }
            emit(out.trim_end())
        }
    }
}

/// One run's line, as the kit prints it after each run.
fn row_line(row: &Row) -> String {
    let mut line = format!(
        "{} {} M={}: delivered {:.0} pps ({:.1} Mbit/s), max share error {:.2}% \
         (against weights alone {:.2}%), victim p50/p99 {}",
        row.spec.set,
        row.spec.mode,
        row.senders,
        row.delivered_pps,
        row.delivered_mbps,
        row.fairness.max_share_err * 100.0,
        row.fairness.max_share_err_weight * 100.0,
        match &row.victim {
            VictimFigures::Received { latency: l, .. } => format!(
                "{:.1}/{:.1} us",
                l.p50_ns as f64 / 1e3,
                l.p99_ns as f64 / 1e3
            ),
            _ => "-".into(),
        }
    );
    if let Some(a) = row.added_latency {
        line += &format!(
            " ({:+.1}/{:+.1} us against the bridge alone)",
            a.p50_ns as f64 / 1e3,
            a.p99_ns as f64 / 1e3
        );
    }
    if let (Some(p), Some(u)) = (row.cpu_per_packet(), row.cpu) {
        line += &format!("; CPU {:.0} ns/pkt", p.total_ns);
        line += &match (p.shaper_ns, u.shaper_cpus) {
            (Some(ns), Some(cpus)) => format!(
                " (shaper {ns:.0} = {cpus:.2} CPU, softirq {:.0} = {:.2} CPU)",
                p.softirq_ns, u.softirq_cpus
            ),
            _ => format!(" (softirq, {:.2} CPU)", u.softirq_cpus),
        };
    }
    line
}

/// The results as one table per set, in the file's order.
fn summary(points: &[Point]) -> String {
    // A value there is none of prints as "-".
    let f = |v: f64, decimals: usize| {
        if v.is_finite() {
            format!("{v:.decimals$}")
        } else {
            "-".into()
        }
    };
    let mut out = String::new();
    for set in csv::sets(points) {
        let rows: Vec<Vec<String>> = points
            .iter()
            .filter(|p| p.set == set)
            .map(|p| {
                vec![
                    p.senders.to_string(),
                    p.mode.clone(),
                    f(p.offered_pps / 1e3, 1),
                    f(p.delivered_pps / 1e3, 1),
                    f(p.max_share_err * 100.0, 2),
                    f(p.victim_p50_us, 0),
                    f(p.victim_p99_us, 0),
                    f(p.victim_added_p50_us, 0),
                    f(p.victim_added_p99_us, 0),
                    f(p.cpu_ns_per_pkt, 0),
                    f(p.shaper_ns_per_pkt, 0),
                    f(p.softirq_ns_per_pkt, 0),
                    f(p.sink_drops, 0),
                ]
            })
            .collect();
        let t = table::render(
            &[
                "M",
                "mode",
                "offered kpps",
                "delivered kpps",
                "share err %",
                "victim p50 us",
                "p99 us",
                "added p50 us",
                "added p99 us",
                "CPU ns/pkt",
                "shaper",
                "softirq",
                "sink drops",
            ],
            &rows,
            &[0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
        );
        out += &format!("set {set}:\n{t}");
    }
    out.trim_end().to_owned()
}
