//! One run's figures, from the generator's and the sink's reports: delivered packets per
//! second (all clients, over the sink's window), loss, the greedy senders' shares against
//! their targets ([`crate::shares`]), the victim's latency percentiles and loss; and, when
//! the script measured them, the CPU time over the window ([`Row::with_cpu`],
//! [`crate::cpu`]) and the victim's latency added against a baseline run's
//! ([`Row::with_baseline`]). A [`Row`] is one line of the results CSV ([`crate::csv`]).

use crate::cpu::{CpuPerPacket, CpuUse};
use crate::error::AnalysisError;
use crate::gen_report::GenReport;
use crate::shares::{fairness, shares, Fairness, Share};
use crate::sink_report::{Latency, SinkReport};

/// What the reports do not say: the run's names and settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RowSpec {
    /// The experiment set (`shares`, `cpu`): one set of plots each. A plain word.
    pub set: String,
    /// The mode measured (`pspat`, `htb`, `none`). A plain word.
    pub mode: String,
    /// Configured link rate, bit/s (0: none).
    pub link_bps: u64,
    /// Weights of senders 0, 1, ...; a shorter list repeats. None may be 0.
    pub weights: Vec<u32>,
    /// Datagrams the receiving host dropped because the sink's socket buffer was full,
    /// measured by the caller (`None`: unknown).
    pub sink_drops: Option<u64>,
}

/// The victim's figures.
#[derive(Debug, Clone, PartialEq)]
pub enum VictimFigures {
    /// The run had no victim.
    NotInRun,
    /// It sent and nothing got through: all lost.
    NothingReceived,
    /// What the sink counted of it.
    Received {
        /// Packets counted.
        packets: u64,
        /// Its one-way latency.
        latency: Latency,
        /// lost / (lost + packets).
        loss_frac: f64,
    },
}

/// The victim's latency above a baseline run's victim (the bridge alone, same senders),
/// ns; negative when it was faster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddedLatency {
    /// Difference of the medians.
    pub p50_ns: i64,
    /// Difference of the 99th percentiles.
    pub p99_ns: i64,
}

/// One run's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The set, mode, link rate, weights and sink drops given.
    pub spec: RowSpec,
    /// Greedy senders (M).
    pub senders: u32,
    /// Wire length of the greedy senders' packets.
    pub len: u32,
    /// Packets per second the generator sent, all senders.
    pub offered_pps: f64,
    /// Packets per second the sink counted, all clients.
    pub delivered_pps: f64,
    /// Wire Mbit/s the sink counted, all clients.
    pub delivered_mbps: f64,
    /// lost / (lost + counted), all clients (NaN when the sink saw nothing).
    pub loss_frac: f64,
    /// The greedy senders' shares against their weights.
    pub shares: Vec<Share>,
    /// How far they are from their targets.
    pub fairness: Fairness,
    /// The victim's figures.
    pub victim: VictimFigures,
    /// The victim's client number, if the run had one.
    pub victim_client: Option<u32>,
    /// Its latency against a baseline run's ([`Row::with_baseline`]; `None`: no baseline
    /// given, or the victim got nothing through in one of the two).
    pub added_latency: Option<AddedLatency>,
    /// CPU use over the counting window ([`Row::with_cpu`]; `None`: not measured).
    pub cpu: Option<CpuUse>,
    /// The sink's counting window, seconds.
    pub window_s: f64,
}

impl RowSpec {
    /// Checks the weights (at least one, none 0) and the names (plain words: no comma,
    /// quote or newline to break the CSV).
    pub fn validate(&self) -> Result<(), AnalysisError> {
        if self.weights.is_empty() {
            return Err(AnalysisError::NoWeights);
        }
        if self.weights.contains(&0) {
            return Err(AnalysisError::ZeroWeight);
        }
        for s in [&self.set, &self.mode] {
            if s.is_empty() || s.contains([',', '"', '\n']) {
                return Err(AnalysisError::NotAWord(s.clone()));
            }
        }
        Ok(())
    }
}

impl Row {
    /// The figures of one run, after checking `spec` ([`RowSpec::validate`]).
    pub fn new(spec: RowSpec, gen: &GenReport, sink: &SinkReport) -> Result<Row, AnalysisError> {
        spec.validate()?;
        let m = gen.senders;
        let shares = shares(m, &spec.weights, gen, sink);
        let lost: u64 = sink.clients.iter().map(|c| c.lost).sum();
        let wire_bytes: u64 = sink.clients.iter().map(|c| c.wire_bytes).sum();
        let victim = match gen.victim() {
            None => VictimFigures::NotInRun,
            Some(v) => match sink.client(v.client) {
                None => VictimFigures::NothingReceived,
                Some(r) => VictimFigures::Received {
                    packets: r.packets,
                    latency: r.latency.clone(),
                    loss_frac: loss_frac(r.lost, r.packets),
                },
            },
        };
        Ok(Row {
            spec,
            senders: m,
            len: gen.flows.first().map_or(0, |f| f.len),
            offered_pps: gen.total_pps,
            delivered_pps: sink.total_pps,
            delivered_mbps: if sink.window_s > 0.0 {
                wire_bytes as f64 * 8.0 / sink.window_s / 1e6
            } else {
                0.0
            },
            loss_frac: loss_frac(lost, sink.total_packets),
            fairness: fairness(&shares),
            shares,
            victim,
            victim_client: gen.victim().map(|v| v.client),
            added_latency: None,
            cpu: None,
            window_s: sink.window_s,
        })
    }

    /// The row with the CPU use measured over its counting window.
    pub fn with_cpu(mut self, cpu: CpuUse) -> Row {
        self.cpu = Some(cpu);
        self
    }

    /// The row with its victim's latency against the victim of `baseline`, the sink's
    /// report of a run with the same senders (so the victim has the same client number)
    /// through the bridge alone.
    pub fn with_baseline(mut self, baseline: &SinkReport) -> Row {
        let base = self.victim_client.and_then(|c| baseline.client(c));
        self.added_latency = match (&self.victim, base) {
            (VictimFigures::Received { latency, .. }, Some(b)) if b.packets > 0 => {
                let diff = |a: u64, b: u64| a as i64 - b as i64;
                Some(AddedLatency {
                    p50_ns: diff(latency.p50_ns, b.latency.p50_ns),
                    p99_ns: diff(latency.p99_ns, b.latency.p99_ns),
                })
            }
            _ => None,
        };
        self
    }

    /// CPU nanoseconds per delivered packet (all clients), if the CPU use was measured.
    pub fn cpu_per_packet(&self) -> Option<CpuPerPacket> {
        self.cpu.map(|c| c.per_packet(self.delivered_pps))
    }

    /// The victim's p99 latency, µs, if any of its packets got through.
    pub fn victim_p99_us(&self) -> Option<f64> {
        match &self.victim {
            VictimFigures::Received { latency, .. } => Some(latency.p99_ns as f64 / 1000.0),
            _ => None,
        }
    }
}

/// lost / (lost + got); NaN when both are 0.
fn loss_frac(lost: u64, got: u64) -> f64 {
    if lost + got > 0 {
        lost as f64 / (lost + got) as f64
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sink;

    fn gen(senders: u32, victim: bool) -> GenReport {
        crate::fixtures::gen(senders, victim, 100, 1000, 1.0)
    }

    fn spec(weights: &[u32]) -> RowSpec {
        RowSpec {
            set: "s".into(),
            mode: "m".into(),
            link_bps: 0,
            weights: weights.to_vec(),
            sink_drops: None,
        }
    }

    #[test]
    fn figures_come_from_both_reports() {
        let mut s = sink(&[(0, 100), (1, 300), (2, 50)]);
        s.clients[0].lost = 100;
        s.clients[2].latency.p99_ns = 12_500;
        let r = Row::new(spec(&[1, 3]), &gen(2, true), &s).unwrap();
        assert_eq!((r.senders, r.len, r.offered_pps), (2, 100, 3000.0));
        assert!(r.fairness.max_share_err < 1e-12);
        // 450 packets of 100 bytes in 1 s; 100 lost of 550.
        assert!((r.delivered_mbps - 0.36).abs() < 1e-12);
        assert!((r.loss_frac - 100.0 / 550.0).abs() < 1e-12);
        assert_eq!(r.victim_p99_us(), Some(12.5));
        let r = Row::new(spec(&[1]), &gen(2, true), &sink(&[(0, 1)])).unwrap();
        assert_eq!(r.victim, VictimFigures::NothingReceived);
        let r = Row::new(spec(&[1]), &gen(2, false), &sink(&[(0, 1)])).unwrap();
        assert_eq!(
            (&r.victim, r.victim_p99_us()),
            (&VictimFigures::NotInRun, None)
        );
    }

    #[test]
    fn cpu_and_added_latency_join_the_row() {
        let mut s = sink(&[(0, 100), (1, 300), (2, 50)]);
        s.total_pps = 500.0;
        s.clients[2].latency.p50_ns = 30_000;
        s.clients[2].latency.p99_ns = 90_000;
        let r = Row::new(spec(&[1, 3]), &gen(2, true), &s).unwrap();
        assert_eq!((r.cpu_per_packet(), r.added_latency), (None, None));
        // The baseline's victim (client 2, as here) took 10 us at p50 and 100 at p99.
        let mut base = sink(&[(2, 40)]);
        base.clients[0].latency.p50_ns = 10_000;
        base.clients[0].latency.p99_ns = 100_000;
        let cpu = CpuUse {
            window_s: 1.0,
            softirq_cpus: 0.25,
            shaper_cpus: Some(0.5),
        };
        let r = r.with_baseline(&base).with_cpu(cpu);
        assert_eq!(
            r.added_latency,
            Some(AddedLatency {
                p50_ns: 20_000,
                p99_ns: -10_000
            })
        );
        // 0.75 CPU at 500 packets/s: 1.5 ms per packet.
        let p = r.cpu_per_packet().unwrap();
        assert!((p.total_ns - 1.5e6).abs() < 1e-3, "{p:?}");
        // A baseline whose victim got nothing through gives no difference.
        let r = r.with_baseline(&sink(&[(0, 5)]));
        assert_eq!(r.added_latency, None);
    }

    #[test]
    fn bad_specs_are_usage_errors() {
        let (g, s) = (gen(1, false), sink(&[]));
        for (spec, want) in [
            (spec(&[]), "at least one weight"),
            (spec(&[1, 0]), "a weight of 0"),
            (
                RowSpec {
                    mode: "a,b".into(),
                    ..spec(&[1])
                },
                "'a,b': give a plain word",
            ),
        ] {
            let e = Row::new(spec, &g, &s).unwrap_err();
            assert!(e.is_usage() && e.to_string().contains(want), "{e}");
        }
    }
}
