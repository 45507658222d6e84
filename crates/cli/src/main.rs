//! `pspat`: the command-line front end. Glue only: parsing, printing, exit codes.
//!
//! Exit codes: 0 success, 2 usage error (bad option, flowset, algorithm, parameter),
//! 1 run-time failure (a benchmark run that exposed a scheduler bug). Errors print as one
//! line, `error: <cause chain>`.

#![forbid(unsafe_code)]

mod arch;
mod compat;
mod config;
mod expkit;
mod run;
mod shape;
mod signals;
mod sim;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};
use pspat_harness::guarantee::{self, WfiSpec};
use pspat_harness::{number, run as harness, BenchSpec, Num, Pattern};
use pspat_plot::table;
use pspat_sched::registry::{algorithms, Params};

#[derive(Parser, Debug)]
#[command(
    name = "pspat",
    version,
    about = "pspat: a fast, trustworthy software packet scheduler (PSPAT architecture)",
    after_help = "dummynet's single-dash long options (-alg, -qmin, -flowsets, ...) are \
                  accepted everywhere: they are rewritten to --alg, --qmin, ... before parsing."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The main job: runs the PSPAT engine on a scenario (built in, or --config FILE) with
    /// a live per-tenant table, then prints the final account.
    #[command(
        long_about = "The main job: runs the PSPAT engine on a scenario with a live per-tenant \
table (rate, rate vs its weighted fair target, drops, victim latency), then prints the final \
account: every submitted packet is sent, dropped with a reason, or reported as still queued.\n\n\
Without --config, the built-in scenario runs: tenants gold, silver and bronze (weights 4, 2, \
1) send TSO-like packets (3 in 4 of 64 KB) as fast as they can, and a victim of weight 8 sends 200-byte packets \
at 8 Mbit/s, under QFQ+ on an emulated 10 Gbit/s link, as UDP datagrams to 127.0.0.1:9000, \
for 5 seconds. Ctrl-C stops early and still prints the account.",
        after_help = "Examples:\n  pspat run\n  pspat run --config examples/run-tenants.toml --duration 10s\n  \
pspat run --alg drr --backend null --rate unlimited --json"
    )]
    Run(run::RunArgs),
    /// A transparent shaper between two interfaces: frames received on --in are
    /// classified and scheduled by a dummynet-style configuration and sent on --out.
    #[command(
        long_about = "A transparent shaper between two interfaces (AF_PACKET; needs CAP_NET_RAW). Frames received on --in are classified by the rules of --config (ipfw/dnctl or TOML syntax), queued and scheduled by its schedulers at their bandwidths, and transmitted on --out; frames arriving on --out pass back to --in unshaped. Live statistics per scheduler instance and per queue every --stats seconds; SIGINT/SIGTERM or --duration stop it, and the final account reports every frame as sent, dropped with a reason, or still queued. The configuration file is re-applied when it changes.",
        after_help = "Examples:\n  pspat shape --in veth1 --out veth2 --config examples/config/shaper.ipfw\n  \
pspat shape --in eth0 --out eth1 --config isp.toml --rx-threads 2 --duration 60s --json out.json"
    )]
    Shape(shape::ShapeArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: Bench,
    },
    /// Simulates flows through a scheduler on a virtual link: shares, delays, T-WFI, plots.
    Sim(sim::SimArgs),
    /// Configurations in ipfw/dnctl syntax or TOML (schedulers, flowsets, pipes, rules,
    /// tables).
    Config {
        #[command(subcommand)]
        what: ConfigCmd,
    },
    /// UDP traffic generator: M sender threads, each from its own source port, and an
    /// optional low-rate victim; pspat payloads stamped with their send time.
    #[command(
        long_about = "UDP traffic generator for the shaper experiment kit \
(experiments/shaper/run.sh). M sender threads each bind their own socket to source port \
BASE + i and send pspat payloads (client = flow = i, a sequence number, the send time on \
CLOCK_MONOTONIC) padded to --len bytes on the wire, in sendmmsg batches, as fast as possible \
or paced at --rate packets/s each. With --victim-rate, one more thread (client M) sends at \
that low paced rate from its own port. Prints (or writes as JSON) the packets each sent.",
        after_help = "Example:\n  pspat udpgen --dest 10.77.0.2:9000 --senders 8 --len 1000 \
--duration 5 --victim-rate 1000 --json gen.json"
    )]
    Udpgen(expkit::GenArgs),
    /// UDP receiver: per-client packets, loss, reordering and one-way latency of pspat
    /// payloads.
    #[command(
        long_about = "UDP receiver for the shaper experiment kit. Receives pspat payloads \
(recvmmsg; with --busy-poll it spins on a non-blocking socket) and reports per payload \
client: packets, bytes, rate, sequence gaps (loss), reordering, and the one-way latency \
(receive time - the sender's stamp, both CLOCK_MONOTONIC) as p50/p99/p99.9/max. Counting \
starts --warmup seconds after the first datagram. Prints 'pspat udpsink: ready on ADDR' on \
stderr once the socket is bound.",
        after_help = "Example:\n  pspat udpsink --bind 10.77.0.2:9000 --duration 10 --warmup 1 \
--idle 1 --busy-poll --json sink.json"
    )]
    Udpsink(expkit::SinkArgs),
    /// The shaper experiment kit's analysis: results CSV rows, plots and the summary;
    /// the `tree` set's HTB twin, reference allocation and comparison.
    Experiment {
        #[command(subcommand)]
        what: expkit::ExperimentCmd,
    },
    /// Lists the registered scheduling algorithms.
    Algorithms {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ConfigCmd {
    /// Validates a configuration file and prints the resolved model.
    #[command(
        long_about = "Validates a configuration file and prints the resolved model: every \
object with every option (defaults written out), in ipfw syntax (or TOML with --print toml), \
then a one-line summary as a comment. The output parses back to the same model.\n\n\
A file ending in .toml is read as TOML, anything else as ipfw/dnctl commands, one per line \
(`sched 4 config type qfq bw 4Mbit/s`, `queue 1 config weight 10 sched 4 mask dst-ip 0xff`, \
`add 100 queue 1 out src-ip 1.2.3.4`, `table 1 add 1.2.3.0/24 20`). On an error, prints it \
with the file, line, column and offending token, and exits with status 1.",
        after_help = "Examples:\n  pspat config check examples/config/isp.ipfw\n  \
pspat config check examples/config/isp.toml --print toml\n  \
pspat config check rules.conf --format ipfw --quiet"
    )]
    Check(config::CheckArgs),
}

#[derive(Subcommand, Debug)]
enum Bench {
    /// Scheduler benchmark, compatible with dummynet's userspace `test` program.
    #[command(
        long_about = "Scheduler benchmark, compatible with FreeBSD dummynet's userspace `test` \
program (sys/netpfil/ipfw/test): same options, same loop, same output line, so both run \
side by side on the same flowsets.\n\n\
Each of -n iterations enqueues one generated packet or dequeues one: the harness fills until \
qmax packets are pending, then drains down to qmin, and so on. Packets go to the flow with \
the lowest backlog (smooth), or in bursts of 1..16w packets (bursty). Prints the time per \
enqueue+dequeue pair (packet generation included) and the worst-case fairness index in \
bytes, then a line of counts and checks.\n\n\
Numbers take dummynet's suffixes: K (x1000), M (x10^6), k (x1024), m (x1024^2); for -qmin \
and -qmax, n means 'per flow' (4n = 4 x the number of flows).",
        after_help = "Examples:\n  pspat bench sched -alg wf2qp -n 10M -qmin 4n -qmax 30n -flowsets 1::1024\n  \
pspat bench sched --alg drr --flowsets 1-8-4:1500:16 --pattern bursty --json\n\n\
dummynet's single-dash long options (-alg, -qmin, -qmax, -flowsets, -flows, -len, -burst) \
are rewritten to --alg, ... before parsing; -n and -d are short options."
    )]
    Sched(SchedArgs),
    /// Service guarantees (T-WFI, B-WFI) of a flowset on the exact virtual link.
    #[command(
        long_about = "Service guarantees of a scheduler, measured exactly: runs a flowset \
through a registered algorithm on a virtual constant-rate link with a transmit queue of \
--txq packets, then measures every flow against the fluid GPS system: T-WFI (QFQ+ paper \
eq. 1), in ns and in the flow's packet service times L/(phi R), B-WFI, and the largest delay \
behind GPS. Prints the worst flow of each flowset.\n\n\
Arrivals: the patterns of `bench sched` (smooth, bursty) with times. Fill phases bring \
packets back to back at --fill-rate times the link rate until qmax are pending in the \
scheduler; drain phases bring none until qmin are pending, or, with probability \
--switch-on-empty, until a flow empties (QFQ+ paper section 8.3). -n packets are generated, \
then the link drains.",
        after_help = "Example (the QFQ+ paper's 1k-highw, one flow of weight 333 among 999 of weight 1):\n  \
pspat bench wfi -alg qfq -n 1M -qmin 0 -qmax 30n -flowsets 333:1700:1,1:1700:999 --txq 1"
    )]
    Wfi(WfiArgs),
    /// Every registered algorithm through the `bench sched` harness on one flowset, as a
    /// table of cost per packet and fairness.
    Table(TableArgs),
    /// The PSPAT architecture against the lock-based one (throughput, shares, victim
    /// latency; or rate stability).
    #[command(
        long_about = "The PSPAT architecture (client mailboxes, one arbiter) against the \
conventional one (every client runs the scheduler under one lock, Linux TC's), same scheduler \
code, in one run.\n\n\
--mode throughput: for each --clients count, greedy client threads (one flow each, weight 1) \
submit --len byte packets as fast as they can, and a victim sends one packet every \
--victim-gap-us with 100x the weight; prints scheduler decisions per second, the limit (the \
same algorithm's single-thread enqueue+dequeue rate, no engine) and the fraction of it \
reached, the same for the limit with every greedy flow holding a mailbox's capacity \
(limit-bl, of-bl), the greedy clients' smallest/largest weight-normalised share, the victim's \
submit-to-transmit latency percentiles, drops and full-mailbox refusals, and pspat/lock \
ratios.\n\n\
--mode stability: two greedy clients with weights 10:1 on links from 0.5x to 2x the rate \
the PSPAT engine sustains (measured first, or --rate-list): the share each architecture \
gives (PSPAT paper section 6.5).",
        after_help = "Examples:\n  pspat bench arch --clients 1,4,16 --duration 0.5 --plot arch.svg\n  \
pspat bench arch --mode stability --arch pspat,lock --duration 0.5"
    )]
    Arch(arch::ArchArgs),
}

#[derive(Args, Debug)]
struct WfiArgs {
    /// Algorithm: a name or alias from `pspat algorithms`.
    #[arg(long, value_name = "NAME", default_value = "qfq")]
    alg: String,
    /// Packets to generate.
    #[arg(short = 'n', long = "packets", value_name = "N", default_value = "100K",
          value_parser = number::parse_abs)]
    packets: u64,
    /// Drain down to this many pending packets (n: per flow).
    #[arg(long, value_name = "X", default_value = "0", value_parser = number::parse)]
    qmin: Num,
    /// Fill up to this many pending packets (n: per flow).
    #[arg(long, value_name = "X", default_value = "30n", value_parser = number::parse)]
    qmax: Num,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Transmit queue in front of the wire, packets (0: the scheduler is asked when the
    /// wire is idle; the papers' Q is (txq + 1) maximum-size packets).
    #[arg(long, value_name = "PKTS", default_value = "0", value_parser = number::parse_abs)]
    txq: u64,
    /// Link rate (e.g. 1G, 10G, 1000M; a bare number is bit/s).
    #[arg(long, value_name = "BPS", default_value = "1G", value_parser = pspat_units::parse_bandwidth)]
    rate: u64,
    /// Arrival rate of a fill phase, times the link rate (above 1; inf: all at once).
    #[arg(long, value_name = "X", default_value = "2")]
    fill_rate: f64,
    /// Probability of starting a fill phase when a flow empties during a drain.
    #[arg(long, value_name = "P", default_value = "0.5")]
    switch_on_empty: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct SchedArgs {
    /// Algorithm: a name or alias from `pspat algorithms` (dummynet's fifo, prio, rr,
    /// wf2qp...), or `none`: no scheduler, the harness's own FIFO (the overhead baseline;
    /// dummynet's default).
    #[arg(long, value_name = "NAME", default_value = "none")]
    alg: String,
    /// Loop iterations; each enqueues or dequeues one packet.
    #[arg(short = 'n', long = "loops", value_name = "N", default_value = "10M",
          value_parser = number::parse_abs)]
    loops: u64,
    /// Drain down to this many pending packets (n: per flow).
    #[arg(long, value_name = "X", default_value = "1n", value_parser = number::parse)]
    qmin: Num,
    /// Fill up to this many pending packets (n: per flow); raised to qmin+1 if not above.
    #[arg(long, value_name = "X", default_value = "20n", value_parser = number::parse)]
    qmax: Num,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Classes above the flows, from the link down: FANOUT:ALG[/FANOUT:ALG...]; the
    /// algorithm (-alg) runs in the leaf classes, each given a block of the flows. E.g.
    /// 10:wf2q+/1000:wf2q+ -alg drr -flowsets 1::100000: 10 sites of 1000 subscribers of
    /// 10 flows.
    #[arg(long, value_name = "N:ALG/...")]
    tree: Option<String>,
    /// Print one JSON object with every field instead of the two lines.
    #[arg(long)]
    json: bool,
    /// Accepted and ignored (dummynet parses -burst but does not use it).
    #[arg(long, value_name = "N")]
    burst: Option<String>,
    /// Debug level: accepted and ignored (dummynet's -d).
    #[arg(short = 'd', value_name = "LEVEL")]
    debug: Option<String>,
}

/// What both benchmarks generate: the flows, their packets and the arrival pattern, and the
/// scheduler's parameters.
#[derive(Args, Debug)]
struct WorkloadArgs {
    /// Flowsets weight:len:flows[,...]; weight and len may be ranges min-max[-steps];
    /// empty fields take defaults (weight 1, -len, 1 flow). E.g. 1::512,8::64.
    #[arg(long, value_name = "W:LEN:FLOWS,...")]
    flowsets: Option<String>,
    /// Number of flows of weight 1 when no -flowsets is given (ignored otherwise).
    #[arg(long, value_name = "N", default_value = "1", value_parser = number::parse_abs)]
    flows: u64,
    /// Packet length for flowsets that leave len empty (dummynet parses -len but ignores
    /// it; both default to 1000).
    #[arg(long, value_name = "BYTES", default_value = "1000", value_parser = number::parse_u32)]
    len: u32,
    /// Arrival pattern (QFQ+ paper, section 8).
    #[arg(long, value_enum, default_value_t = PatternArg::Smooth)]
    pattern: PatternArg,
    /// Seed of the pattern's random generator (and of `bench wfi`'s phase switch).
    #[arg(long, value_name = "S", default_value = "1", value_parser = number::parse_abs)]
    seed: u64,
    /// Algorithm parameters key=value[,...] (see `pspat algorithms`). For strict-priority
    /// algorithms the flowset weight is the priority (1 first) and bands defaults to 64.
    #[arg(long, value_name = "K=V,...", default_value = "")]
    params: Params,
    /// Scheduler capacity in packets [default: qmax plus the largest burst].
    #[arg(long, value_name = "PKTS", value_parser = number::parse_abs)]
    capacity: Option<u64>,
}

impl WorkloadArgs {
    /// The harness's specification of this workload for `alg`.
    fn spec(self, alg: String, loops: u64, qmin: Num, qmax: Num) -> BenchSpec {
        BenchSpec {
            alg,
            loops,
            qmin,
            qmax,
            flowsets: self.flowsets,
            flows: self.flows,
            len: self.len,
            pattern: match self.pattern {
                PatternArg::Smooth => Pattern::Smooth,
                PatternArg::Bursty => Pattern::Bursty,
            },
            seed: self.seed,
            params: self.params,
            capacity: self.capacity,
            tree: None,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PatternArg {
    /// One packet at a time to a least-backlogged flow (dummynet's).
    Smooth,
    /// Bursts of uniform 1..=16w packets to a least-backlogged flow.
    Bursty,
}

#[derive(Args, Debug)]
struct TableArgs {
    /// Loop iterations per algorithm.
    #[arg(short = 'n', long = "loops", value_name = "N", default_value = "2M",
          value_parser = number::parse_abs)]
    loops: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// An error of the binary's own that the user can fix by changing the command line (exit
/// code 2). The libraries' errors say it themselves (`is_usage`, see [`is_usage`]).
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A command ran to the end it was told (its duration, a signal) but errors lost packets
/// it was to carry on the way (the backend refused some, a write failed, frames went
/// unaccounted); its report, printed already, has the details. Exit code 3.
#[derive(Debug)]
struct Faulted(Vec<String>);

impl std::fmt::Display for Faulted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "packets were lost to errors: {}", self.0.join("; "))
    }
}

impl std::error::Error for Faulted {}

impl Faulted {
    /// `Ok` when there are no faults.
    fn check(faults: Vec<String>) -> Result<()> {
        if faults.is_empty() {
            Ok(())
        } else {
            Err(Faulted(faults).into())
        }
    }
}

/// The exit status: 0 done as told; 1 could not start, or stopped by itself (a fault it
/// could not ride through); 2 a usage error (options, configuration); 3 ran as told but
/// errors lost packets ([`Faulted`]). The README's "Exit status" section says the same.
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}`: the whole cause chain on one line.
            eprintln!("error: {e:#}");
            let code = if e.downcast_ref::<Faulted>().is_some() {
                3
            } else if is_usage(&e) {
                2
            } else {
                1
            };
            ExitCode::from(code)
        }
    }
}

/// Whether the user can fix `e` by changing the command line (exit code 2, else 1): the
/// outermost error of its chain that can tell says (a [`Usage`], or a library error with
/// `is_usage`); a chain where none can is a run-time failure.
fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().find_map(usage_of).unwrap_or(false)
}

/// Whether `e` is a usage error, if its type can tell.
fn usage_of(e: &(dyn std::error::Error + 'static)) -> Option<bool> {
    use pspat_expkit::{AnalysisError, GenError, SinkError};
    use pspat_run::{RunError, ScenarioError};
    use pspat_shaper::ShaperError;
    e.downcast_ref::<Usage>()
        .map(|_| true)
        .or_else(|| e.downcast_ref().map(pspat_harness::Error::is_usage))
        .or_else(|| e.downcast_ref().map(RunError::is_usage))
        .or_else(|| e.downcast_ref().map(ScenarioError::is_usage))
        .or_else(|| e.downcast_ref().map(ShaperError::is_usage))
        .or_else(|| e.downcast_ref().map(GenError::is_usage))
        .or_else(|| e.downcast_ref().map(SinkError::is_usage))
        .or_else(|| e.downcast_ref().map(AnalysisError::is_usage))
}

/// Writes `text` and a newline to stdout. A closed pipe (`pspat ... | head -1`) is not an
/// error: the reader has what it wanted.
fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn run() -> Result<()> {
    let args = compat::gnu_args(std::env::args());
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind::*;
            if matches!(
                e.kind(),
                DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                e.exit();
            }
            // clap's message is several lines (usage, tips): keep the first.
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or("invalid command line");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            return Err(Usage(format!("{first} (see --help)")).into());
        }
    };
    match cli.command {
        Command::Run(args) => run::main_job(&args),
        Command::Shape(args) => shape::main(&args),
        Command::Bench {
            what: Bench::Table(args),
        } => bench_table(&args),
        Command::Bench {
            what: Bench::Sched(args),
        } => bench_sched(args),
        Command::Bench {
            what: Bench::Wfi(args),
        } => bench_wfi(args),
        Command::Bench {
            what: Bench::Arch(args),
        } => arch::run(args),
        Command::Sim(args) => sim::main(args),
        Command::Config {
            what: ConfigCmd::Check(args),
        } => config::check(&args),
        Command::Udpgen(args) => expkit::udpgen(args),
        Command::Udpsink(args) => expkit::udpsink(args),
        Command::Experiment { what } => expkit::experiment(what),
        Command::Algorithms { json } => list_algorithms(json),
    }
}

fn bench_sched(a: SchedArgs) -> Result<()> {
    let _ignored = (a.burst, a.debug);
    let spec = BenchSpec {
        tree: a.tree,
        ..a.workload.spec(a.alg, a.loops, a.qmin, a.qmax)
    };
    let report = harness::run(&spec)?;
    if a.json {
        emit(&serde_json::to_string(&report)?)?;
    } else {
        emit(&report.to_string())?;
    }
    report.check()?;
    Ok(())
}

fn bench_wfi(a: WfiArgs) -> Result<()> {
    let spec = WfiSpec {
        bench: a.workload.spec(a.alg, 0, a.qmin, a.qmax),
        packets: a.packets,
        txq: a.txq,
        rate_bps: a.rate,
        fill_rate: a.fill_rate,
        switch_on_empty: a.switch_on_empty,
    };
    let report = guarantee::run(&spec)?;
    if a.json {
        emit(&serde_json::to_string(&report)?)
    } else {
        emit(report.to_string().trim_end())
    }
}

fn list_algorithms(json: bool) -> Result<()> {
    let params = |a: &pspat_sched::AlgorithmInfo| {
        a.params
            .iter()
            .map(|p| format!("{}={}", p.name, p.default))
            .collect::<Vec<_>>()
    };
    if json {
        let list: Vec<_> = algorithms()
            .iter()
            .map(|a| {
                serde_json::json!({
                    "name": a.name,
                    "aliases": a.aliases,
                    "summary": a.summary,
                    "complexity": a.complexity,
                    "guarantee": a.guarantee,
                    "source": a.source,
                    "file": a.file,
                    "class": format!("{:?}", a.class),
                    "params": a.params.iter().map(|p| serde_json::json!({
                        "name": p.name, "default": p.default, "help": p.help,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        emit(&serde_json::to_string_pretty(&list)?)?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = algorithms()
        .iter()
        .map(|a| {
            let p = params(a);
            vec![
                a.name.to_owned(),
                dash_if_empty(a.aliases.join(",")),
                a.complexity.to_owned(),
                a.guarantee.to_owned(),
                a.source.to_owned(),
                a.file.to_owned(),
                dash_if_empty(p.join(",")),
            ]
        })
        .collect();
    let table = table::render(
        &[
            "NAME",
            "ALIASES",
            "COMPLEXITY",
            "GUARANTEE",
            "SOURCE",
            "FILE",
            "PARAMETERS",
        ],
        &rows,
        &[],
    );
    emit(&format!(
        "{table}also: none (no scheduler: the benchmark harness's own FIFO, its overhead \
         baseline)"
    ))?;
    Ok(())
}

fn dash_if_empty(s: String) -> String {
    if s.is_empty() {
        "-".to_owned()
    } else {
        s
    }
}

fn bench_table(a: &TableArgs) -> Result<()> {
    use pspat_harness::every::{every, FLOWSETS, QMAX, QMIN};
    if !a.json {
        emit(&format!(
            "scenario: -flowsets {FLOWSETS} -qmin {QMIN} -qmax {QMAX} -n {}, smooth \
             arrivals; ns/pair = wall time per enqueue+dequeue, packet generation included",
            a.loops
        ))?;
    }
    let report = every(a.loops)?;
    if a.json {
        return emit(&serde_json::to_string(&report)?);
    }
    let rows: Vec<Vec<String>> = report
        .results
        .iter()
        .map(|r| {
            vec![
                r.sched.clone(),
                format!("{:.1}", r.ns_per_pair),
                format!("{:.2}", r.wfi_bytes),
                r.drops_total.to_string(),
                r.enqueued.to_string(),
                r.dequeued.to_string(),
            ]
        })
        .collect();
    let table = table::render(
        &[
            "alg",
            "ns/pair",
            "wfi(bytes)",
            "drops",
            "enqueued",
            "dequeued",
        ],
        &rows,
        &[1, 2, 3, 4, 5],
    );
    emit(&format!(
        "{table}(none: no scheduler, the harness overhead; wfi means nothing for fifo and prio)"
    ))
}
