//! The final account of a run ([`crate::Run::stop`]): every submitted packet sent, dropped
//! with a reason, or still queued, per tenant; the arbiter's counters; the CPU use of the
//! engine's threads; backend errors and configuration reloads. As text ([`RunReport::text`])
//! and as one JSON object ([`RunReport::json`]).

use std::time::Duration;

use hdrhistogram::Histogram;
use pspat_engine::reload::Reload;
use pspat_engine::stall::StallSummary;
use pspat_engine::stats::{ArbiterDrop, Filtered};
use pspat_engine::traffic::SourceStats;
use pspat_engine::{DummynetStats, EngineReport, EngineSnapshot};
use pspat_units::HumanRate;

use crate::scenario::Scenario;
use crate::snapshot::{us, TenantCounts};
use pspat_plot::table;

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The scenario it ran.
    pub scenario: Scenario,
    /// The tenant of each client.
    pub tenant_of: Vec<usize>,
    /// The engine's counters when the run started.
    pub first: EngineSnapshot,
    /// The engine's account when it stopped.
    pub engine: EngineReport,
    /// What each client's source did, in client order.
    pub sources: Vec<SourceStats>,
    /// Per tenant: the latency histogram (victims; `None` without samples).
    pub latencies: Vec<Option<Histogram<u64>>>,
    /// From start to stop (the clients' last packets included).
    pub elapsed: Duration,
    /// Stopped before the scenario's duration.
    pub interrupted: bool,
    /// Fraction of a CPU each engine thread used over the run, by thread name.
    pub cpu: Vec<(String, f64)>,
    /// Reloads of the dummynet-style configuration: when (s into the run) and how it went.
    pub reloads: Vec<(f64, Reload)>,
}

impl RunReport {
    /// Final counters per tenant.
    pub fn tenants(&self) -> Vec<TenantCounts> {
        TenantCounts::per_tenant(
            &self.engine.snapshot,
            &self.tenant_of,
            self.scenario.tenants.len(),
        )
    }

    /// The dummynet-style configuration's statistics when the arbiter stopped.
    pub fn dummynet(&self) -> Option<&DummynetStats> {
        self.engine.sched.as_ref().and_then(|s| s.dummynet.as_ref())
    }

    /// Backend errors: the dispatchers' and the arbiter's sender's.
    pub fn errors(&self) -> Vec<String> {
        let mut e: Vec<String> = self.engine.dispatcher_errors.clone();
        if let Some(err) = self
            .engine
            .sched
            .as_ref()
            .and_then(|s| s.send_error.clone())
        {
            e.push(err);
        }
        e
    }

    /// What lost packets the run was to carry, one line each: the backend's errors and
    /// the packets it refused (`send_failed`). Empty when every packet was sent, dropped
    /// by a scheduler or a rule, or left queued: `pspat run` then exits 0.
    pub fn faults(&self) -> Vec<String> {
        let mut f = self.errors();
        let failed: u64 = self
            .engine
            .snapshot
            .clients
            .iter()
            .map(|c| c.send_failed)
            .sum();
        if failed > 0 {
            f.push(format!(
                "the backend refused {failed} packets (send_failed)"
            ));
        }
        f
    }

    fn secs(&self) -> f64 {
        self.span_ns() as f64 / 1e9
    }

    /// The engine's time between the first and the last snapshot, ns.
    fn span_ns(&self) -> u64 {
        (self.engine.snapshot.at_ns - self.first.at_ns).max(1)
    }

    /// The arbiter's drain gaps over the same span as the rates (`pspat_engine::stall`).
    fn gaps(&self) -> StallSummary {
        self.engine
            .snapshot
            .stalls
            .since(&self.first.stalls)
            .summary(self.span_ns())
    }

    /// Time in those gaps, ns.
    fn stalled_ns(&self) -> u64 {
        self.engine
            .snapshot
            .stalls
            .since(&self.first.stalls)
            .stalled_ns()
    }

    /// The account as one JSON object.
    pub fn json(&self) -> serde_json::Value {
        let sc = &self.scenario;
        let targets = sc.targets_bps();
        let secs = self.elapsed.as_secs_f64();
        let tenants: Vec<_> = self
            .tenants()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let refused: u64 = self
                    .tenant_of
                    .iter()
                    .zip(&self.sources)
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
                    "name": sc.tenants[i].name,
                    "weight": sc.tenants[i].weight,
                    "submitted": t.submitted,
                    "mailbox_full": t.mailbox_full,
                    "refused_by_source": refused,
                    "scheduled": t.scheduled,
                    "scheduled_bytes": t.scheduled_bytes,
                    "sent": t.sent,
                    "send_failed": t.send_failed,
                    "dropped": dropped,
                    "filtered_by_rules": filtered,
                    "left_queued": t.left(),
                    "rate_bps": bps,
                    "target_bps": targets.as_ref().map(|tg| tg[i]),
                    "latency": lat,
                })
            })
            .collect();
        let s = &self.engine.snapshot;
        serde_json::json!({
            "scenario": sc.to_string(),
            "algorithm": sc.algorithm,
            "rate_bps": sc.rate_bps,
            "handoff": sc.handoff.to_string(),
            "backend": sc.backend,
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
            "dummynet": self.dummynet(),
            "reloads": self.reloads.iter().map(|(t, r)| serde_json::json!({
                "at_s": t,
                "ok": r.error.is_none(),
                "error": r.error,
            })).collect::<Vec<_>>(),
        })
    }

    /// The account as text: a table per tenant, the arbiter's line, CPU use, errors.
    pub fn text(&self) -> String {
        let targets = self.scenario.targets_bps();
        let secs = self.elapsed.as_secs_f64();
        let rows: Vec<Vec<String>> = self
            .tenants()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (dropped, filtered) = (t.dropped_total(), t.filtered_total());
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
                    self.scenario.tenants[i].name.clone(),
                    t.submitted.to_string(),
                    t.sent.to_string(),
                    t.send_failed.to_string(),
                    if reasons.is_empty() {
                        (dropped + filtered).to_string()
                    } else {
                        format!("{} ({})", dropped + filtered, reasons.join(","))
                    },
                    t.mailbox_full.to_string(),
                    t.left().to_string(),
                    HumanRate(bps).to_string(),
                    targets
                        .as_ref()
                        .map_or("-".into(), |tg| format!("{:.3}", bps / tg[i].max(1.0))),
                    lat,
                ]
            })
            .collect();
        let s = &self.engine.snapshot;
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
