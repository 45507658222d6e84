//! `pspat run`: the main job. Starts the engine on a scenario, drives its tenants' client
//! threads, shows a live per-tenant table, and prints the final account on exit (end of
//! the duration or Ctrl-C).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use pspat_engine::stats::{ArbiterDrop, Filtered};

use crate::keys::{KeyGen, Keyed};
use crate::scenario::DummynetFile;
use pspat_engine::reload::{Reload, Reloader};
use pspat_engine::traffic::{drive, SourceStats};
use pspat_engine::{Engine, EngineReport, EngineSnapshot};

use crate::scenario::{fmt_rate, parse_duration_ns, parse_rate, Scenario};
use crate::{emit, table, Usage};

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
}

fn usage(e: anyhow::Error) -> anyhow::Error {
    Usage(format!("{e:#}")).into()
}

/// Builds the scenario from the file and flags.
fn scenario(a: &RunArgs) -> Result<Scenario> {
    let mut s = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading scenario {}", p.display()))?;
            Scenario::from_toml(&text, &p.display().to_string()).map_err(usage)?
        }
        None => Scenario::builtin(),
    };
    if let Some(d) = &a.duration {
        s.duration_ns = parse_duration_ns(d).map_err(usage)?;
    }
    if let Some(alg) = &a.alg {
        s.algorithm = alg.clone();
    }
    if let Some(r) = &a.rate {
        s.rate_bps = parse_rate(r).map_err(usage)?;
    }
    if let Some(h) = &a.handoff {
        s.handoff = h.parse().map_err(|e: String| Usage(e))?;
    }
    if let Some(b) = &a.backend {
        s.backend = b.clone();
    }
    if let Some(d) = &a.dummynet {
        s.dummynet = Some(DummynetFile::load(d).map_err(usage)?);
    }
    Ok(s)
}

/// Per-tenant sums of client counters.
#[derive(Clone, Copy, Default)]
struct TenantSum {
    submitted: u64,
    scheduled: u64,
    scheduled_bytes: u64,
    sent: u64,
    send_failed: u64,
    dropped: [u64; ArbiterDrop::COUNT],
    filtered: [u64; Filtered::COUNT],
    mailbox_full: u64,
}

fn sums(s: &EngineSnapshot, tenant_of: &[usize], n: usize) -> Vec<TenantSum> {
    let mut out = vec![TenantSum::default(); n];
    for (c, snap) in s.clients.iter().enumerate() {
        let t = &mut out[tenant_of[c]];
        t.submitted += snap.submitted;
        t.scheduled += snap.scheduled;
        t.scheduled_bytes += snap.scheduled_bytes;
        t.sent += snap.sent;
        t.send_failed += snap.send_failed;
        t.mailbox_full += snap.mailbox_full;
        for (d, v) in t.dropped.iter_mut().zip(snap.dropped) {
            *d += v;
        }
        for (d, v) in t.filtered.iter_mut().zip(snap.filtered) {
            *d += v;
        }
    }
    out
}

fn latency_of(
    engine: &Engine,
    tenant_of: &[usize],
    t: usize,
) -> Option<hdrhistogram::Histogram<u64>> {
    let mut h: Option<hdrhistogram::Histogram<u64>> = None;
    for (c, &tt) in tenant_of.iter().enumerate() {
        if tt != t {
            continue;
        }
        if let Some(x) = engine.latency(c) {
            match h.as_mut() {
                Some(h) => {
                    let _ = h.add(&x);
                }
                None => h = Some(x),
            }
        }
    }
    h.filter(|h| !h.is_empty())
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// The live table: rates over the last interval.
fn live_table(
    sc: &Scenario,
    engine: &Engine,
    tenant_of: &[usize],
    prev: &EngineSnapshot,
    now: &EngineSnapshot,
    targets: Option<&[f64]>,
) -> String {
    let n = sc.tenants.len();
    let (a, b) = (sums(prev, tenant_of, n), sums(now, tenant_of, n));
    let secs = (now.at_ns - prev.at_ns).max(1) as f64 / 1e9;
    let rows: Vec<Vec<String>> = sc
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let bps = (b[i].scheduled_bytes - a[i].scheduled_bytes) as f64 * 8.0 / secs;
            let pps = (b[i].scheduled - a[i].scheduled) as f64 / secs;
            let drops: u64 = b[i].dropped.iter().sum::<u64>() - a[i].dropped.iter().sum::<u64>()
                + b[i].filtered.iter().sum::<u64>()
                - a[i].filtered.iter().sum::<u64>();
            let (target, share) = match targets {
                Some(tg) => (fmt_rate(tg[i]), format!("{:.3}", bps / tg[i].max(1.0))),
                None => ("-".into(), "-".into()),
            };
            let (p50, p99) = match latency_of(engine, tenant_of, i) {
                Some(h) => (us(h.value_at_quantile(0.5)), us(h.value_at_quantile(0.99))),
                None => ("-".into(), "-".into()),
            };
            vec![
                t.name.clone(),
                t.weight.to_string(),
                target,
                fmt_rate(bps),
                share,
                format!("{:.1}", pps / 1e3),
                drops.to_string(),
                (b[i].mailbox_full - a[i].mailbox_full).to_string(),
                p50,
                p99,
            ]
        })
        .collect();
    table::render(
        &[
            "TENANT",
            "WEIGHT",
            "TARGET",
            "RATE",
            "RATE/TARGET",
            "KPPS",
            "DROPS",
            "FULL",
            "P50(us)",
            "P99(us)",
        ],
        &rows,
        &[1, 3, 4, 5, 6, 7, 8, 9],
    )
}

pub fn main_job(a: &RunArgs) -> Result<()> {
    let sc = scenario(a)?;
    let interval = Duration::from_nanos(
        parse_duration_ns(&a.interval)
            .map_err(usage)?
            .max(1_000_000),
    );
    let stats_every = match &a.stats_every {
        Some(_) if sc.dummynet.is_none() => {
            return Err(Usage(
                "--stats-every needs a dummynet-style configuration (--dummynet FILE or \
                 `dummynet` in the scenario): it prints per-instance and per-queue statistics"
                    .into(),
            )
            .into())
        }
        Some(t) => Some(Duration::from_nanos(
            parse_duration_ns(t).map_err(usage)?.max(1_000_000),
        )),
        None => None,
    };
    let backend = pspat_io::parse_backend(&sc.backend).map_err(|e| usage(e.into()))?;
    let (cfg, specs) = sc.engine().map_err(usage)?;
    let tenant_of: Vec<usize> = specs.iter().map(|(t, _)| *t).collect();
    let (engine, clients) = Engine::start(&cfg, Arc::from(backend)).map_err(|e| {
        let bad_input = !matches!(
            e,
            pspat_engine::EngineError::Spawn { .. } | pspat_engine::EngineError::Backend(_)
        );
        let e = anyhow::Error::from(e).context("starting the engine");
        if bad_input {
            usage(e)
        } else {
            e
        }
    })?;
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = Arc::clone(&interrupted);
        // A second engine in one process (tests) cannot install it twice: not fatal.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let keyed = sc.dummynet.is_some();
    let threads: Vec<_> = clients
        .into_iter()
        .zip(specs)
        .enumerate()
        .map(|(i, (mut c, (t, spec)))| {
            let stop = Arc::clone(&stop);
            // Client k of its tenant: the k-th address of the tenant's source prefix.
            let k = tenant_of[..i].iter().filter(|x| **x == t).count() as u32;
            let addrs = sc.tenants[t].addrs.clone();
            std::thread::Builder::new()
                .name(format!("client{}", c.id()))
                .spawn(move || {
                    if keyed {
                        let keys = KeyGen::new(addrs, k, spec.seed);
                        let mut kc = Keyed { client: c, keys };
                        drive(&mut kc, &spec, &stop)
                    } else {
                        drive(&mut c, &spec, &stop)
                    }
                })
        })
        .collect::<std::io::Result<_>>()
        .context("starting client threads")?;
    let tty = std::io::stdout().is_terminal();
    if !a.json {
        emit(&format!("pspat run: {sc}"))?;
    }
    let targets = sc.targets_bps();
    let start = Instant::now();
    let run_for = Duration::from_nanos(sc.duration_ns);
    let first = engine.snapshot();
    let cpu0 = pspat_io::cpu::threads_cpu_s(&["pspat-"]);
    let mut prev = first.clone();
    let mut next_tick = start + interval;
    let mut watch = sc.dummynet.as_ref().map(|d| Reloader::new(&d.path));
    let mut dn_prev = match stats_every {
        Some(_) => Some(engine.dummynet_stats().context("dummynet statistics")?),
        None => None,
    };
    let mut next_stats = stats_every.map(|e| start + e);
    let mut reloads = Vec::new();
    while start.elapsed() < run_for && !interrupted.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20).min(run_for.saturating_sub(start.elapsed())));
        if let Some(r) = watch.as_mut().and_then(|w| w.poll(&engine)) {
            if !a.json {
                emit(&r.to_string())?;
            }
            reloads.push((start.elapsed().as_secs_f64(), r));
        }
        if Instant::now() >= next_tick && !a.json {
            next_tick += interval;
            let now = engine.snapshot();
            let t = live_table(&sc, &engine, &tenant_of, &prev, &now, targets.as_deref());
            if tty {
                // Redraw in place: cursor up over the previous table.
                print!("\x1b[2J\x1b[H");
                emit(&format!("pspat run: {sc}"))?;
            }
            emit(&format!("t={:.1}s\n{t}", start.elapsed().as_secs_f64()))?;
            prev = now;
            if let (Some(due), Some(every)) = (next_stats, stats_every) {
                if Instant::now() >= due {
                    next_stats = Some(due + every);
                    let ds = engine.dummynet_stats().context("dummynet statistics")?;
                    if let Some(old) = &dn_prev {
                        emit(&format!("{ds}{}", ds.rates(old)))?;
                    }
                    dn_prev = Some(ds);
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut sources = Vec::new();
    for t in threads {
        sources.push(t.join().unwrap_or_default());
    }
    let elapsed = start.elapsed();
    let cpu1 = pspat_io::cpu::threads_cpu_s(&["pspat-"]);
    let cpu: Vec<(String, f64)> = cpu1
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                (v - cpu0.get(k).unwrap_or(&0.0)) / elapsed.as_secs_f64(),
            )
        })
        .collect();
    let latencies: Vec<_> = (0..sc.tenants.len())
        .map(|t| latency_of(&engine, &tenant_of, t))
        .collect();
    let report = engine.stop(false);
    let summary = Summary {
        sc: &sc,
        tenant_of: &tenant_of,
        first: &first,
        report: &report,
        sources: &sources,
        latencies: &latencies,
        elapsed,
        interrupted: interrupted.load(Ordering::Relaxed),
        cpu: &cpu,
        reloads: &reloads,
    };
    if a.json {
        emit(&serde_json::to_string_pretty(&summary.json())?)
    } else {
        emit(&summary.text())?;
        match report.sched.as_ref().and_then(|s| s.dummynet.as_ref()) {
            Some(ds) if stats_every.is_some() => emit(&format!("final statistics\n{ds}")),
            _ => Ok(()),
        }
    }
}

struct Summary<'a> {
    sc: &'a Scenario,
    tenant_of: &'a [usize],
    first: &'a EngineSnapshot,
    report: &'a EngineReport,
    sources: &'a [SourceStats],
    latencies: &'a [Option<hdrhistogram::Histogram<u64>>],
    elapsed: Duration,
    interrupted: bool,
    /// Fraction of a CPU each engine thread used over the run.
    cpu: &'a [(String, f64)],
    /// Reloads of the dummynet-style configuration: when (s) and how it went.
    reloads: &'a [(f64, Reload)],
}

impl Summary<'_> {
    fn tenants(&self) -> Vec<TenantSum> {
        sums(&self.report.snapshot, self.tenant_of, self.sc.tenants.len())
    }

    fn secs(&self) -> f64 {
        self.span_ns() as f64 / 1e9
    }

    fn span_ns(&self) -> u64 {
        (self.report.snapshot.at_ns - self.first.at_ns).max(1)
    }

    /// The arbiter's drain gaps over the same span as the rates (`pspat_engine::stall`).
    fn gaps(&self) -> pspat_engine::stall::StallSummary {
        self.report
            .snapshot
            .stalls
            .since(&self.first.stalls)
            .summary(self.span_ns())
    }

    /// Time in those gaps, ns.
    fn stalled_ns(&self) -> u64 {
        self.report
            .snapshot
            .stalls
            .since(&self.first.stalls)
            .stalled_ns()
    }

    fn json(&self) -> serde_json::Value {
        let targets = self.sc.targets_bps();
        let secs = self.elapsed.as_secs_f64();
        let tenants: Vec<_> = self
            .tenants()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let refused: u64 = self
                    .tenant_of
                    .iter()
                    .zip(self.sources)
                    .filter(|(tt, _)| **tt == i)
                    .map(|(_, s)| s.refused)
                    .sum();
                let dropped: serde_json::Map<_, _> = ArbiterDrop::all()
                    .iter()
                    .zip(t.dropped)
                    .filter(|(_, v)| *v > 0)
                    .map(|(r, v)| (r.name(), v.into()))
                    .collect();
                let filtered: serde_json::Map<_, _> = Filtered::ALL
                    .iter()
                    .zip(t.filtered)
                    .filter(|(_, v)| *v > 0)
                    .map(|(r, v)| (r.name().to_string(), v.into()))
                    .collect();
                let lat = self.latencies[i].as_ref().map(|h| {
                    serde_json::json!({
                        "p50_ns": h.value_at_quantile(0.5),
                        "p90_ns": h.value_at_quantile(0.9),
                        "p99_ns": h.value_at_quantile(0.99),
                        "max_ns": h.max(),
                        "samples": h.len(),
                    })
                });
                let bps = t.scheduled_bytes as f64 * 8.0 / secs;
                serde_json::json!({
                    "name": self.sc.tenants[i].name,
                    "weight": self.sc.tenants[i].weight,
                    "submitted": t.submitted,
                    "mailbox_full": t.mailbox_full,
                    "refused_by_source": refused,
                    "scheduled": t.scheduled,
                    "scheduled_bytes": t.scheduled_bytes,
                    "sent": t.sent,
                    "send_failed": t.send_failed,
                    "dropped": dropped,
                    "filtered_by_rules": filtered,
                    "left_queued": t.submitted - t.scheduled - t.dropped.iter().sum::<u64>(),
                    "rate_bps": bps,
                    "target_bps": targets.as_ref().map(|tg| tg[i]),
                    "latency": lat,
                })
            })
            .collect();
        let s = &self.report.snapshot;
        serde_json::json!({
            "scenario": self.sc.to_string(),
            "algorithm": self.sc.algorithm,
            "rate_bps": self.sc.rate_bps,
            "handoff": self.sc.handoff.to_string(),
            "backend": self.sc.backend,
            "seconds": secs,
            "interrupted": self.interrupted,
            "decisions_per_s": (s.clients.iter().map(|c| c.scheduled).sum::<u64>()) as f64 / self.secs(),
            "arbiter": {
                "scans": s.scans, "idle_sleeps": s.idle_sleeps, "link_sleeps": s.link_sleeps,
                "wakeups": s.arbiter_wakeups, "slept_ns": s.arbiter_slept_ns,
                "tx_stalls": s.tx_stalls,
                "drain_gaps": {
                    "gaps": self.gaps().gaps,
                    "stalled_ns": self.stalled_ns(),
                    "wait_p99_ns": self.gaps().wait_p99_ns,
                },
            },
            "tenants": tenants,
            "cpu": self.cpu.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
            "errors": self.errors(),
            "dummynet": self.report.sched.as_ref().and_then(|s| s.dummynet.as_ref()),
            "reloads": self.reloads.iter().map(|(t, r)| serde_json::json!({
                "at_s": t,
                "ok": r.error.is_none(),
                "error": r.error,
            })).collect::<Vec<_>>(),
        })
    }

    fn errors(&self) -> Vec<String> {
        let mut e: Vec<String> = self.report.dispatcher_errors.clone();
        if let Some(err) = self
            .report
            .sched
            .as_ref()
            .and_then(|s| s.send_error.clone())
        {
            e.push(err);
        }
        e
    }

    fn text(&self) -> String {
        let targets = self.sc.targets_bps();
        let secs = self.elapsed.as_secs_f64();
        let rows: Vec<Vec<String>> = self
            .tenants()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let dropped: u64 = t.dropped.iter().sum();
                let filtered: u64 = t.filtered.iter().sum();
                let reasons: Vec<String> = ArbiterDrop::all()
                    .iter()
                    .zip(t.dropped)
                    .filter(|(_, v)| *v > 0)
                    .map(|(r, v)| format!("{}={v}", r.name()))
                    .chain(
                        Filtered::ALL
                            .iter()
                            .zip(t.filtered)
                            .filter(|(_, v)| *v > 0)
                            .map(|(r, v)| format!("rules:{}={v}", r.name())),
                    )
                    .collect();
                let bps = t.scheduled_bytes as f64 * 8.0 / secs;
                let lat = match &self.latencies[i] {
                    Some(h) => format!(
                        "{}/{}/{}",
                        us(h.value_at_quantile(0.5)),
                        us(h.value_at_quantile(0.99)),
                        us(h.max())
                    ),
                    None => "-".into(),
                };
                vec![
                    self.sc.tenants[i].name.clone(),
                    t.submitted.to_string(),
                    t.sent.to_string(),
                    t.send_failed.to_string(),
                    if reasons.is_empty() {
                        (dropped + filtered).to_string()
                    } else {
                        format!("{} ({})", dropped + filtered, reasons.join(","))
                    },
                    t.mailbox_full.to_string(),
                    (t.submitted - t.scheduled - dropped).to_string(),
                    fmt_rate(bps),
                    targets
                        .as_ref()
                        .map_or("-".into(), |tg| format!("{:.3}", bps / tg[i].max(1.0))),
                    lat,
                ]
            })
            .collect();
        let s = &self.report.snapshot;
        let decisions: u64 = s.clients.iter().map(|c| c.scheduled).sum();
        let mut out = format!(
            "\nfinal account after {:.2} s{}:\n{}",
            secs,
            if self.interrupted {
                " (interrupted)"
            } else {
                ""
            },
            table::render(
                &[
                    "TENANT",
                    "SUBMITTED",
                    "SENT",
                    "SEND-FAIL",
                    "DROPPED",
                    "FULL",
                    "LEFT",
                    "RATE",
                    "RATE/TARGET",
                    "LAT p50/p99/max(us)",
                ],
                &rows,
                &[1, 2, 3, 5, 6, 7, 8],
            )
        );
        out.push_str(&format!(
            "arbiter: {:.3} M decisions/s, {} scans, {} idle sleeps, {} link sleeps, {} wake-ups; \
             {:.2}% of the time in drain gaps of 4 us or more (p99 wait they impose: {:.1} us)\n\
             SUBMITTED = SENT + SEND-FAIL + DROPPED + LEFT (still queued at stop) per tenant; \
             FULL = submissions refused by a full mailbox (not counted in SUBMITTED)",
            decisions as f64 / self.secs() / 1e6,
            s.scans,
            s.idle_sleeps,
            s.link_sleeps,
            s.arbiter_wakeups,
            self.gaps().stalled_pct,
            self.gaps().wait_p99_ns / 1000.0
        ));
        if !self.cpu.is_empty() {
            let parts: Vec<String> = self
                .cpu
                .iter()
                .map(|(k, v)| format!("{k} {:.1}%", v * 100.0))
                .collect();
            out.push_str(&format!(
                "\nCPU use of engine threads: {}",
                parts.join(", ")
            ));
        }
        for e in self.errors() {
            out.push_str(&format!("\nbackend error: {e}"));
        }
        out
    }
}
