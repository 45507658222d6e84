//! The result of a benchmark: dummynet's one-line summary, a line of our own, and every
//! field for `--json`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::error::RunError;
use crate::run::Outcome;
use crate::scenario::Scenario;

/// One expanded flowset, as reported.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FlowsetReport {
    /// Weight (the priority plus one for strict-priority algorithms).
    pub weight: u32,
    /// Packet length in bytes.
    pub len: u32,
    /// Number of flows.
    pub flows: u32,
    /// The element of the specification it came from.
    pub spec: String,
}

/// Everything a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Canonical algorithm name (`none` for the baseline).
    pub sched: String,
    /// The algorithm as given.
    pub alg: String,
    /// Algorithm parameters passed (the user's, plus `bands` for priority algorithms).
    pub params: String,
    /// The flowsets as given (dummynet's `flow=`).
    pub flowsets: String,
    /// The flowsets expanded.
    pub flowset_list: Vec<FlowsetReport>,
    /// Number of flows.
    pub flows: u32,
    /// Sum of the flows' weights.
    pub wsum: u64,
    /// Arrival pattern.
    pub pattern: &'static str,
    /// Seed of the bursty pattern.
    pub seed: u64,
    /// Low threshold, packets.
    pub qmin: u64,
    /// High threshold, packets.
    pub qmax: u64,
    /// Scheduler capacity, packets.
    pub capacity: u32,
    /// Loop iterations asked for.
    pub loops: u64,
    /// Loop iterations run (fewer if the scheduler lost packets).
    pub loops_run: u64,
    /// Wall-clock time of the loop, ns.
    pub elapsed_ns: u64,
    /// `elapsed_ns / enqueue_attempts`: the time of one enqueue and its dequeue, packet
    /// generation included (dummynet's figure).
    pub ns_per_pair: f64,
    /// Packets offered to the scheduler.
    pub enqueue_attempts: u64,
    /// Packets accepted.
    pub enqueued: u64,
    /// Packets dequeued.
    pub dequeued: u64,
    /// Refused packets by reason (only reasons that occurred).
    pub drops: BTreeMap<&'static str, u64>,
    /// Refused packets.
    pub drops_total: u64,
    /// Bytes dequeued.
    pub sched_bytes: u64,
    /// Worst-case fairness index, bytes (dummynet's `wfi=`).
    pub wfi_bytes: f64,
    /// The flow with that index.
    pub wfi_flow: Option<u32>,
    /// The flowset of that flow.
    pub wfi_flowset: Option<String>,
    /// Packets pending at the end, by the harness's count.
    pub pending_end: u64,
    /// Packets queued at the end, by the scheduler's count.
    pub sched_backlog_end: u64,
    /// Packets dequeued with another flow (or length) than they were generated with.
    pub mismatches: u64,
    /// Packets dequeued out of their flow's order.
    pub order_errors: u64,
    /// Packets the scheduler failed to give back.
    pub lost: u64,
    /// The algorithm's own counters.
    pub sched_counters: BTreeMap<&'static str, u64>,
}

impl BenchReport {
    /// The report of a run of `scenario` that ended in `o` after `elapsed`.
    pub fn new(scenario: &Scenario, o: &Outcome, elapsed: Duration) -> Self {
        let c = &o.counters;
        let elapsed_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let (wfi_bytes, wfi_flow) = o.wfi;
        let wfi_flowset = wfi_flow.map(|f| {
            let map = scenario.flowsets.flow_map();
            scenario.flowsets.sets[map[f as usize] as usize]
                .spec
                .clone()
        });
        Self {
            sched: scenario.alg_name().to_owned(),
            alg: scenario.spec.alg.clone(),
            params: scenario
                .params
                .pairs()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
            flowsets: scenario.flowsets.label.clone(),
            flowset_list: scenario
                .flowsets
                .sets
                .iter()
                .map(|s| FlowsetReport {
                    weight: s.weight,
                    len: s.len,
                    flows: s.flows,
                    spec: s.spec.clone(),
                })
                .collect(),
            flows: scenario.flows(),
            wsum: scenario.flowsets.wsum,
            pattern: scenario.spec.pattern.name(),
            seed: scenario.spec.seed,
            qmin: scenario.qmin,
            qmax: scenario.qmax,
            capacity: scenario.capacity,
            loops: scenario.spec.loops,
            loops_run: c.loops,
            elapsed_ns,
            ns_per_pair: if c.enqueue_attempts == 0 {
                0.0
            } else {
                elapsed_ns as f64 / c.enqueue_attempts as f64
            },
            enqueue_attempts: c.enqueue_attempts,
            enqueued: c.enqueued,
            dequeued: c.dequeued,
            drops: c.drops.nonzero().map(|(r, n)| (r.name(), n)).collect(),
            drops_total: c.drops.total(),
            sched_bytes: o.sched_bytes,
            wfi_bytes,
            wfi_flow,
            wfi_flowset,
            pending_end: o.pending,
            sched_backlog_end: o.target_backlog,
            mismatches: c.mismatches,
            order_errors: c.order_errors,
            lost: c.lost,
            sched_counters: o
                .stats
                .as_ref()
                .map(|s| s.algorithm.iter().copied().collect())
                .unwrap_or_default(),
        }
    }

    /// Fails if the run exposed a scheduler bug: a packet dequeued with the wrong flow or
    /// out of its flow's order, lost, or unaccounted for (`enqueued` must equal `dequeued`
    /// plus what the scheduler still holds, and the harness's count must agree).
    pub fn check(&self) -> Result<(), RunError> {
        let unaccounted = self
            .enqueued
            .abs_diff(self.dequeued + self.sched_backlog_end)
            .max(self.pending_end.abs_diff(self.sched_backlog_end));
        if self.mismatches == 0 && self.order_errors == 0 && self.lost == 0 && unaccounted == 0 {
            return Ok(());
        }
        Err(RunError {
            alg: self.sched.clone(),
            mismatches: self.mismatches,
            order_errors: self.order_errors,
            lost: self.lost,
            unaccounted,
        })
    }

    /// dummynet's summary line: `sched=NAME time=S.MMM sec (NS nsec)  wfi=B  flow=SPEC`.
    pub fn summary(&self) -> String {
        let secs = self.elapsed_ns / 1_000_000_000;
        let millis = self.elapsed_ns / 1_000_000 % 1000;
        format!(
            "sched={:<12} time={secs}.{millis:03} sec ({:.0} nsec)  wfi={:.2}  flow={}",
            self.sched, self.ns_per_pair, self.wfi_bytes, self.flowsets
        )
    }

    /// The second line: counts, drops by reason, setup, checks.
    pub fn details(&self) -> String {
        let mut drops = self.drops_total.to_string();
        if !self.drops.is_empty() {
            let reasons: Vec<String> = self.drops.iter().map(|(r, n)| format!("{r}:{n}")).collect();
            drops = format!("{drops}({})", reasons.join(","));
        }
        let wfi_flow = match (self.wfi_flow, &self.wfi_flowset) {
            (Some(f), Some(fs)) => format!("{f}({fs})"),
            _ => "-".to_owned(),
        };
        let params = if self.params.is_empty() {
            "-"
        } else {
            &self.params
        };
        format!(
            "enq={} deq={} drops={drops} flows={} flowsets={} pattern={} seed={} qmin={} \
             qmax={} capacity={} params={params} loops={} wfi_flow={wfi_flow} mismatches={} \
             order_errors={} lost={}",
            self.enqueue_attempts,
            self.dequeued,
            self.flows,
            self.flowset_list.len(),
            self.pattern,
            self.seed,
            self.qmin,
            self.qmax,
            self.capacity,
            self.loops_run,
            self.mismatches,
            self.order_errors,
            self.lost,
        )
    }

    /// A third line with the algorithm's own counters (`counters: name=value ...`), for
    /// algorithms that keep some.
    pub fn counters(&self) -> Option<String> {
        if self.sched_counters.is_empty() {
            return None;
        }
        let pairs: Vec<String> = self
            .sched_counters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        Some(format!("counters: {}", pairs.join(" ")))
    }
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.summary())?;
        write!(f, "{}", self.details())?;
        if let Some(line) = self.counters() {
            write!(f, "\n{line}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Counters;
    use crate::scenario::BenchSpec;

    fn report() -> BenchReport {
        let sc = Scenario::resolve(&BenchSpec {
            alg: "wf2qp".into(),
            flowsets: Some("1::1024".into()),
            ..BenchSpec::default()
        })
        .unwrap();
        let o = Outcome {
            counters: Counters {
                loops: 10,
                enqueue_attempts: 8,
                enqueued: 8,
                dequeued: 2,
                ..Counters::default()
            },
            pending: 6,
            target_backlog: 6,
            wfi: (1500.0, Some(17)),
            sched_bytes: 2000,
            stats: None,
        };
        BenchReport::new(&sc, &o, Duration::from_nanos(1_234_567_890))
    }

    #[test]
    fn summary_reads_like_dummynet() {
        let r = report();
        assert_eq!(
            r.summary(),
            "sched=wf2q+        time=1.234 sec (154320986 nsec)  wfi=1500.00  flow=1::1024"
        );
        let d = r.details();
        assert!(
            d.starts_with("enq=8 deq=2 drops=0 flows=1024 flowsets=1 pattern=smooth"),
            "{d}"
        );
        assert!(
            d.contains("wfi_flow=17(1::1024)") && d.contains("params=-"),
            "{d}"
        );
        assert_eq!(r.to_string().lines().count(), 2);
        r.check().unwrap();
    }

    #[test]
    fn algorithm_counters_make_a_third_line() {
        let mut r = report();
        assert_eq!(r.counters(), None);
        r.sched_counters.insert("visits", 7);
        r.sched_counters.insert("missed_visits", 2);
        let text = r.to_string();
        assert_eq!(text.lines().count(), 3);
        assert_eq!(
            text.lines().last().unwrap(),
            "counters: missed_visits=2 visits=7"
        );
    }

    #[test]
    fn check_catches_unaccounted_packets() {
        let mut r = report();
        r.sched_backlog_end = 5;
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("1 unaccounted"), "{e}");
        let mut r = report();
        r.order_errors = 2;
        assert!(r
            .check()
            .unwrap_err()
            .to_string()
            .contains("2 per-flow order errors"));
    }
}
