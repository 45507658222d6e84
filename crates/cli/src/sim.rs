//! `pspat sim`: the virtual-link simulator (crate `pspat-sim`), from a scenario file, a
//! sweep file (the papers' reproductions under `scenarios/`) or flags.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use pspat_sim::sweep::{bounds, is_sweep, plot_sweep, run_sweep, SweepSpec};
use pspat_sim::{plot, Scenario};

#[derive(Args, Debug)]
#[command(
    long_about = "Simulates flows feeding a scheduler that drains into a virtual link of a given \
rate, through a FIFO transmit queue of --txq packets, and reports per flow and per group: \
throughput and share against the weight share, delay percentiles, burst completion times, \
T-WFI and B-WFI against the exact fluid GPS system, Jain's index. The link can emulate a \
dummynet pipe's --delay and --plr (`pipe 1 config bw 10Mbit/s delay 50ms plr 0.01`): the \
delays then run from arrival to delivery; T-WFI, B-WFI and the GPS metrics stay on the \
wire's release times. --framing, --overhead, --mpu and --linklayer give the wire a pipe's \
framing (what it charges for a packet: `pipe 1 config ... linklayer atm overhead 10`); the \
service metrics then count the wire's bytes.\n\n\
With [[classes]] tables the flows go to the leaves of a tree of classes (rate, ceil, weight, \
band; HTB's model) and every class is measured: its throughput against the fluid \
allocation of the tree and, when weights alone share the link, its T-WFI against \
hierarchical GPS beside the bound of the tree's design (examples/sim/tree-rates.toml, \
examples/sim/tree-weights.toml).\n\n\
FILE is a scenario (see crates/sim/src/scenario.rs) or a sweep (a file with `algs = [...]`, \
see crates/sim/src/sweep.rs: the reproductions of the papers under scenarios/). Without FILE, \
the scenario comes from the flags: --alg, --rate, --txq and one --flow per group, an inline \
TOML table.",
    after_help = "Examples:\n  pspat sim scenarios/scrr-fig2.toml\n  pspat sim scenarios/mix.toml --alg drr --plots out/\n  \
pspat sim examples/sim/tree-rates.toml\n  \
pspat sim examples/sim/dummynet-emulation.toml --plr 0.05 --delay 20ms\n  \
pspat sim --alg qfq --rate 1e9 --packets 100000 \\\n    --flow 'name=\"heavy\", weight=3, size={kind=\"fixed\",len=1500}, arrival={kind=\"backlogged\"}' \\\n    \
--flow 'name=\"voip\", count=10, size={kind=\"fixed\",len=200}, arrival={kind=\"cbr\",rate_bps=64e3}'"
)]
pub struct SimArgs {
    /// Scenario or sweep file (TOML).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// Algorithm (overrides the file's; a tree's: how the link orders its top classes),
    /// `name@key=value,...`.
    #[arg(long, value_name = "NAME")]
    alg: Option<String>,
    /// Link rate (10G, 1e9, 100Mbit/s; a bare number is bit/s; flags-only scenarios
    /// default to 1G).
    #[arg(long, value_name = "BPS", value_parser = pspat_units::parse_bandwidth)]
    rate: Option<u64>,
    /// Emulated link delay (dummynet's pipe `delay`, below 10s): each packet is delivered
    /// this long after the wire releases it (50ms, 1.5s; a bare number is seconds).
    #[arg(long, value_name = "DURATION", value_parser = pspat_units::parse_duration)]
    delay: Option<Duration>,
    /// Emulated random loss (dummynet's pipe `plr`): the probability, 0..=1, that an
    /// arriving packet is lost before its queue.
    // Negative numbers are read, so that `--plr -0.1` is refused as a probability rather
    // than taken for a flag `-0`.
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    plr: Option<f64>,
    /// The wire's framing as CAKE's presets (pppoe-ptm, docsis, ethernet,ether-vlan, ...),
    /// as a pipe's `framing`: what the wire charges for a packet.
    #[arg(long, value_name = "PRESETS")]
    framing: Option<String>,
    /// Bytes the wire adds to every packet (-64..=256), as a pipe's `overhead`.
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    overhead: Option<i32>,
    /// The smallest charge of a packet (0..=256 bytes), as a pipe's `mpu`.
    #[arg(long, value_name = "BYTES")]
    mpu: Option<u32>,
    /// The wire's link layer (ethernet, atm or ptm), as a pipe's `linklayer`.
    #[arg(long, value_name = "LAYER")]
    linklayer: Option<String>,
    /// Transmit queue, packets.
    #[arg(long, value_name = "PKTS")]
    txq: Option<u32>,
    /// Seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Stop generating after N packets.
    #[arg(short = 'n', long, value_name = "N")]
    packets: Option<u64>,
    /// Stop generating after this simulated time, ms.
    #[arg(long, value_name = "MS")]
    duration_ms: Option<f64>,
    /// A flow group as an inline TOML table (repeatable; flags-only scenarios).
    #[arg(long = "flow", value_name = "TABLE")]
    flows: Vec<String>,
    /// Skip T-WFI, B-WFI and the GPS metrics (less memory, faster).
    #[arg(long)]
    no_wfi: bool,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Per-flow entries in the JSON at most (the CSV always has them all).
    #[arg(long, value_name = "N", default_value = "1000")]
    flows_json_max: usize,
    /// Write flows.csv, groups.csv and report.json into DIR.
    #[arg(long, value_name = "DIR")]
    csv: Option<PathBuf>,
    /// Write the SVG plots into DIR (service vs fluid, delay CDF, burst latency); for a
    /// sweep, the plot goes where the file says unless this is given.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
}

/// Runs `pspat sim`.
pub fn main(a: SimArgs) -> Result<()> {
    if let Some(path) = &a.file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading '{}'", path.display()))?;
        if is_sweep(&text) {
            return sweep(&a, path, &text);
        }
    }
    let sc = scenario(&a)?;
    let mut report = pspat_sim::run(&sc)?;
    if let Some(dir) = &a.csv {
        std::fs::create_dir_all(dir).with_context(|| format!("creating '{}'", dir.display()))?;
        write(&dir.join("flows.csv"), &report.flows_csv())?;
        write(&dir.join("groups.csv"), &report.groups_csv())?;
        write(
            &dir.join("report.json"),
            &serde_json::to_string_pretty(&report)?,
        )?;
    }
    if let Some(dir) = &a.plots {
        let title = if sc.name.is_empty() {
            report.alg.clone()
        } else {
            format!("{} ({})", sc.name, report.alg)
        };
        for f in plot::run_plots(dir, &title, &report.plot)? {
            eprintln!("wrote {f}");
        }
    }
    if a.json {
        if report.per_flow.len() > a.flows_json_max {
            report.per_flow.clear();
        }
        crate::emit(&serde_json::to_string(&report)?)
    } else {
        crate::emit(report.to_string().trim_end())
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing '{}'", path.display()))
}

/// The scenario of the file or of the flags, with the flags' overrides, validated.
fn scenario(a: &SimArgs) -> Result<Scenario> {
    let mut sc = base_scenario(a)?;
    if let Some(t) = a.txq {
        sc.txq = t;
    }
    if let Some(d) = a.delay {
        sc.delay = d;
    }
    if let Some(p) = a.plr {
        sc.plr = p;
    }
    if let Some(f) = &a.framing {
        sc.framing = pspat_sim::scenario::split_presets(f);
    }
    if a.overhead.is_some() {
        sc.overhead = a.overhead;
    }
    if a.mpu.is_some() {
        sc.mpu = a.mpu;
    }
    if a.linklayer.is_some() {
        sc.linklayer.clone_from(&a.linklayer);
    }
    if let Some(s) = a.seed {
        sc.seed = s;
    }
    if a.no_wfi {
        sc.wfi = false;
    }
    sc.validate()?;
    Ok(sc)
}

/// The scenario of the file or of the flags.
fn base_scenario(a: &SimArgs) -> Result<Scenario> {
    if let Some(path) = &a.file {
        if !a.flows.is_empty() {
            bail!(crate::Usage("--flow is for scenarios without FILE".into()));
        }
        // The flags override the file's algorithm, rate and end (a flags-only scenario
        // is built from them below).
        let mut sc = Scenario::from_file(path)?;
        if let Some(alg) = &a.alg {
            sc.alg = alg.clone();
        }
        if let Some(r) = a.rate {
            sc.rate_bps = r as f64;
        }
        if let Some(n) = a.packets {
            sc.packets = Some(n);
        }
        if let Some(d) = a.duration_ms {
            sc.duration_ms = Some(d);
        }
        return Ok(sc);
    }
    if a.flows.is_empty() {
        bail!(crate::Usage(
            "give a scenario FILE or at least one --flow (see --help)".into()
        ));
    }
    Ok(Scenario::from_flows(
        a.alg.as_deref().unwrap_or("qfq"),
        a.rate.map_or(1e9, |r| r as f64),
        a.packets,
        a.duration_ms,
        &a.flows,
    )?)
}

fn sweep(a: &SimArgs, path: &Path, text: &str) -> Result<()> {
    let spec: SweepSpec =
        toml::from_str(text).with_context(|| format!("sweep '{}'", path.display()))?;
    let report = run_sweep(&spec, |c| {
        eprintln!("  {:<24} {:<16} {:.3}", c.alg, c.label, c.y);
    })?;
    let bounds = bounds(&report);
    let out = match (&a.plots, &spec.plot) {
        (Some(dir), _) => Some(
            dir.join(
                path.file_stem()
                    .map(|s| format!("{}.svg", s.to_string_lossy()))
                    .unwrap_or_else(|| "sweep.svg".into()),
            ),
        ),
        (None, Some(p)) => Some(PathBuf::from(p)),
        (None, None) => None,
    };
    if let Some(p) = &out {
        plot_sweep(&spec, &report, p, &bounds)?;
        write(&p.with_extension("csv"), &report.csv())?;
        eprintln!(
            "wrote {} and {}",
            p.display(),
            p.with_extension("csv").display()
        );
    }
    if a.json {
        crate::emit(&serde_json::to_string(&report)?)
    } else {
        let mut s = format!("{}\n{}\n{}", report.title, report.metric, report.markdown());
        if !bounds.is_empty() {
            s.push_str("\nbounds (same unit):\n");
            for b in &bounds {
                let pts: Vec<String> = b
                    .points
                    .iter()
                    .map(|p| format!("{}: {:.2}", p.0, p.1))
                    .collect();
                s.push_str(&format!("{}: {}\n", b.label, pts.join(", ")));
            }
        }
        s.push_str(&format!("wall {:.1}s", report.wall_s));
        crate::emit(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    const FLOW: &str = r#"name="a", size={kind="fixed",len=1500}, arrival={kind="backlogged"}"#;

    fn from_flags(flags: &[&str]) -> Result<Scenario> {
        let cli = Cli::try_parse_from(["sim", "--flow", FLOW].iter().chain(flags))?;
        scenario(&cli.sim)
    }

    #[test]
    fn sim_link_emulation_flags_reach_the_scenario() {
        let sc = from_flags(&["--rate", "10Mbit/s", "--delay", "50ms", "--plr", "0.01"]).unwrap();
        assert_eq!(
            (sc.rate_bps, sc.delay, sc.plr),
            (10e6, Duration::from_millis(50), 0.01)
        );
        let sc = from_flags(&[]).unwrap();
        assert_eq!((sc.delay, sc.plr), (Duration::ZERO, 0.0));
        // over a file's keys too
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/sim/dummynet-emulation.toml"
        );
        let cli = Cli::try_parse_from(["sim", file, "--delay", "20ms", "--plr", "0"]).unwrap();
        let sc = scenario(&cli.sim).unwrap();
        assert_eq!((sc.delay, sc.plr), (Duration::from_millis(20), 0.0));
    }

    #[test]
    fn sim_link_emulation_flags_refuse_bad_values_by_name() {
        for (flags, want) in [
            (["--plr", "1.5"], "plr 1.5 is not a probability"),
            (["--plr", "-0.1"], "plr -0.1 is not a probability"),
            (["--delay", "10s"], "delay 10s is not below 10s"),
            (["--delay", "5 parsecs"], "--delay"),
        ] {
            let e = format!("{:#}", from_flags(&flags).unwrap_err());
            assert!(e.contains(want), "{flags:?}: {e}");
        }
    }
}
