//! `pspat run`: the main job's command line. The job itself is `pspat_run`; here are its
//! flags (overrides of the scenario), Ctrl-C, the loop that redraws the live table, and
//! the printing of the final account.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use pspat_engine::ClassTable;
use pspat_run::{live, Run, Scenario, ScenarioError};

use crate::signals::Signals;
use crate::{emit, Faulted, Usage};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML; see examples/). Without it, the built-in scenario runs.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// How long to run (5s, 500ms, ...); overrides the scenario.
    #[arg(long, value_name = "TIME")]
    duration: Option<String>,
    /// Scheduling algorithm; overrides the scenario.
    #[arg(long, value_name = "NAME")]
    alg: Option<String>,
    /// Emulated link rate (10G, 100M, unlimited); overrides the scenario.
    #[arg(long, value_name = "BPS")]
    rate: Option<String>,
    /// Who transmits: arbiter, dispatchers[:N], clients; overrides the scenario.
    #[arg(long, value_name = "MODE")]
    handoff: Option<String>,
    /// Backend: null, udp, udp:HOST:PORT, pcap:FILE,
    /// afpacket:IF[,dst=MAC][,src=MAC][,ip=SRC>DST][,port=SPORT>DPORT]; overrides the scenario.
    #[arg(long, value_name = "SPEC")]
    backend: Option<String>,
    /// Seconds between live table updates.
    #[arg(long, value_name = "TIME", default_value = "1s")]
    interval: String,
    /// Print only the final account, as one JSON object.
    #[arg(long)]
    json: bool,
    /// A dummynet-style configuration (ipfw syntax, or TOML for `.toml`) whose schedulers,
    /// flowsets, rules and tables decide instead of the scenario's algorithm, rate and
    /// weights; overrides the scenario's `dummynet`.
    #[arg(long, value_name = "FILE")]
    dummynet: Option<std::path::PathBuf>,
    /// With a dummynet-style configuration: print its statistics per scheduler instance
    /// and per queue (like `ipfw sched show`), with the rates since the previous print,
    /// below the live table every TIME (rounded up to the live table's interval), and once
    /// more at the end.
    #[arg(long, value_name = "TIME")]
    stats_every: Option<String>,
    /// With a dummynet-style configuration: apply a changed file even when it lost all its
    /// rules, or all its schedulers and pipes (refused as an accident otherwise).
    #[arg(long)]
    allow_empty_reload: bool,
}

/// The scenario: the file's or the built-in one, with the flags' overrides.
fn scenario(a: &RunArgs) -> Result<Scenario, ScenarioError> {
    let mut s = match &a.config {
        Some(p) => Scenario::load(p)?,
        None => Scenario::builtin(),
    };
    if let Some(d) = &a.duration {
        s.set_duration(d)?;
    }
    if let Some(alg) = &a.alg {
        s.algorithm = alg.clone();
    }
    if let Some(r) = &a.rate {
        s.set_rate(r)?;
    }
    if let Some(h) = &a.handoff {
        s.set_handoff(h)?;
    }
    if let Some(b) = &a.backend {
        s.backend = b.clone();
    }
    if let Some(d) = &a.dummynet {
        s.set_dummynet(d)?;
    }
    Ok(s)
}

/// A period flag (`--interval 0.5s`), at least 1 ms.
fn period(flag: &str, text: &str) -> Result<Duration> {
    let d = pspat_units::parse_duration(text).map_err(|e| Usage(format!("{flag}: {e}")))?;
    Ok(d.max(Duration::from_millis(1)))
}

pub fn main_job(a: &RunArgs) -> Result<()> {
    let sc = scenario(a)?;
    let interval = period("--interval", &a.interval)?;
    let stats_every = match &a.stats_every {
        Some(_) if sc.dummynet.is_none() => {
            return Err(Usage(
                "--stats-every needs a dummynet-style configuration (--dummynet FILE or \
                 `dummynet` in the scenario): it prints per-instance and per-queue statistics"
                    .into(),
            )
            .into())
        }
        Some(t) => Some(period("--stats-every", t)?),
        None => None,
    };
    let mut run = Run::start(&sc)?;
    run.allow_empty_reload(a.allow_empty_reload);
    let signals = Signals::install()?;
    let tty = std::io::stdout().is_terminal();
    if !a.json {
        emit(&format!("pspat run: {sc}"))?;
    }
    let start = Instant::now();
    let mut prev = run.snapshot();
    let mut next_tick = start + interval;
    let mut dn_prev = match stats_every {
        Some(_) => Some(run.dummynet_stats()?),
        None => None,
    };
    let mut next_stats = stats_every.map(|e| start + e);
    // Trees of classes get a live table per inner class and per plan beside the tenants'.
    let mut trees_prev = match &sc.dummynet {
        Some(_) if !a.json => Some(run.dummynet_stats()?).filter(|d| d.has_trees()),
        _ => None,
    };
    while !run.is_over() && !signals.stop_requested() {
        std::thread::sleep(Duration::from_millis(20).min(run.remaining()));
        if let Some(r) = run.poll_reload() {
            if !a.json {
                emit(&r.to_string())?;
            }
        }
        if signals.take_hup() {
            if let Some(r) = run.reload_now() {
                if !a.json {
                    emit(&r.to_string())?;
                }
            }
        }
        if Instant::now() < next_tick || a.json {
            continue;
        }
        next_tick += interval;
        let now = run.snapshot();
        let t = live::table(&sc, &prev, &now);
        if tty {
            // Redraw in place: clear the screen, home the cursor.
            print!("\x1b[2J\x1b[H");
            emit(&format!("pspat run: {sc}"))?;
        }
        emit(&format!("t={:.1}s\n{t}", run.elapsed().as_secs_f64()))?;
        prev = now;
        if let Some(old) = &trees_prev {
            let ds = run.dummynet_stats()?;
            emit(&ClassTable::between(old, &ds).to_string())?;
            trees_prev = Some(ds);
        }
        if let (Some(due), Some(every)) = (next_stats, stats_every) {
            if Instant::now() >= due {
                next_stats = Some(due + every);
                let ds = run.dummynet_stats()?;
                if let Some(old) = &dn_prev {
                    emit(&format!("{ds}{}", ds.rates(old)))?;
                }
                dn_prev = Some(ds);
            }
        }
    }
    let report = run.stop(signals.stop_requested());
    if a.json {
        emit(&serde_json::to_string_pretty(&report.json())?)?;
    } else {
        emit(&report.text())?;
        if let Some(ds) = report.dummynet().filter(|_| stats_every.is_some()) {
            emit(&format!("final statistics\n{ds}"))?;
        }
    }
    Faulted::check(report.faults())
}
