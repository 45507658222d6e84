//! What the architecture benchmark measured. Each report serialises to the JSON object
//! `pspat bench arch --json` prints (scripts/bench-arch and docs/PERFORMANCE.md read its
//! keys), and carries what the text tables print.

use std::time::Duration;

use pspat_engine::stall::StallSummary;
use pspat_engine::Handoff;
use serde::{Serialize, Serializer};

use super::{Arch, Knobs};

/// A greedy client's share of a point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClientShare {
    /// Its index (and its flow, unless the run spread the clients over more flows: then
    /// the sum over its flows).
    pub client: usize,
    /// Its flow's weight.
    pub weight: u32,
    /// Packets the scheduler released for it over the measured interval.
    pub decisions: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Bytes over the weight-proportional target among the greedy clients (1 = exact).
    pub of_target: f64,
}

/// The victim's submit-to-transmit latency over the measured interval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Latency {
    /// Packets measured.
    pub count: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
}

/// How long the PSPAT arbiter went without reading the mailboxes, over the measured
/// interval: its drain gaps (the p99 wait they impose is a floor under any packet's p99
/// latency on this run), and the heavy fences it paid to deactivate idle clients.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArbiterStalls {
    /// The drain gaps (`pspat_engine::stall`).
    #[serde(flatten)]
    pub gaps: StallSummary,
    /// Heavy fences paid for deactivations.
    pub deactivation_fences: u64,
    /// The arbiter's scans per second over the measured interval, and the decisions of
    /// an average scan (near `scan_batch`: the arbiter is the bottleneck; far below it:
    /// it waits for the clients).
    pub scans_per_s: f64,
    /// Decisions per scan.
    pub decisions_per_scan: f64,
}

/// One measurement: an architecture and a number of greedy clients.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// The architecture.
    pub arch: Arch,
    /// Greedy clients (the victim is not counted).
    pub clients: usize,
    /// Packets released by the scheduler per second.
    pub decisions_per_s: f64,
    /// Packets per second the backend took (with `null`, every released packet).
    pub sent_per_s: f64,
    /// Bits per second released onto the emulated link (the link rate when it binds).
    pub released_bps: f64,
    /// Single-thread enqueue+dequeue pairs per second of the same algorithm and flows.
    pub limit_per_s: f64,
    /// decisions_per_s / limit_per_s.
    pub of_limit: f64,
    /// The same with every greedy flow holding a mailbox's capacity of packets (with the
    /// clients spread over more flows, its share of its client's), as it does in the
    /// engine (the plain limit keeps only 64 packets in the scheduler).
    pub limit_backlogged_per_s: f64,
    /// decisions_per_s / limit_backlogged_per_s.
    pub of_limit_backlogged: f64,
    /// Smallest over largest greedy share, each normalised by its weight.
    pub share_min_max: f64,
    /// Each greedy client's share.
    pub shares: Vec<ClientShare>,
    /// The victim's latency, if it ran.
    pub victim: Option<Latency>,
    /// Decisions during the whole point, warm-up and final drain included (divides a
    /// profile of the whole run, e.g. the arbiter's instruction count under callgrind).
    pub decisions_total: u64,
    /// Packets the scheduler itself dequeued during the whole point: `decisions_total`
    /// without decision aggregation, fewer with it (an aggregate is one).
    pub sched_dequeues_total: Option<u64>,
    /// Packets dropped by the scheduler (all reasons) during the whole point.
    pub drops: u64,
    /// Packets the backend refused (counted, not sent) during the whole point.
    pub send_failed: u64,
    /// Submissions refused with MailboxFull (backpressure) during the whole point.
    pub mailbox_full: u64,
    /// Lock baseline: submits that found the lock taken.
    pub lock_contended: Option<u64>,
    /// PSPAT: the arbiter's long intervals between mailbox drains over the measured
    /// interval.
    pub stalls: Option<ArbiterStalls>,
}

/// pspat decisions/s over lock decisions/s at one client count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ratio {
    /// Greedy clients.
    pub clients: usize,
    /// The ratio (infinite when the lock released nothing).
    pub pspat_over_lock: f64,
}

/// Throughput mode's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "mode", rename = "throughput")]
pub struct ThroughputReport {
    /// Scheduling algorithm, as given.
    pub alg: String,
    /// Backend, as given.
    pub backend: String,
    /// PSPAT hand-off mode.
    #[serde(serialize_with = "as_text")]
    pub handoff: Handoff,
    /// Link rate, bit/s (0: unlimited).
    pub rate_bps: u64,
    /// Packet length, bytes.
    pub len: u32,
    /// Greedy flows in all, spread over each point's greedy clients; `None` (null): one
    /// per greedy client.
    pub flows: Option<u32>,
    /// Measured time per point.
    #[serde(rename = "duration_s", serialize_with = "as_secs")]
    pub duration: Duration,
    /// The PSPAT engine's settings.
    #[serde(flatten)]
    pub knobs: Knobs,
    /// The victim's gap, if it ran.
    #[serde(rename = "victim_gap_us", serialize_with = "as_opt_us")]
    pub victim_gap: Option<Duration>,
    /// The victim's weight relative to a greedy client's, if it ran.
    pub victim_weight: Option<u32>,
    /// Every point, per client count in the order of the architectures.
    pub points: Vec<Point>,
    /// pspat decisions/s over lock decisions/s, per client count (when both ran).
    pub ratios: Vec<Ratio>,
}

/// One architecture at one stability rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StabilityResult {
    /// The architecture.
    pub arch: Arch,
    /// Heavy client's bytes over the light one's (the target is 10).
    pub share: f64,
    /// |share / 10 - 1| in percent.
    pub error_pct: f64,
    /// Bits per second released onto the link.
    pub released_bps: f64,
}

impl StabilityResult {
    /// The result of a point of two greedy clients, the heavy one first.
    pub(crate) fn of(p: &Point) -> Self {
        let share = p.shares[0].bytes as f64 / p.shares[1].bytes.max(1) as f64;
        StabilityResult {
            arch: p.arch,
            share,
            error_pct: (share / 10.0 - 1.0).abs() * 100.0,
            released_bps: p.released_bps,
        }
    }
}

/// One link rate of stability mode.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StabilityRow {
    /// Link rate, bit/s.
    pub rate_bps: u64,
    /// Rate as a multiple of the sustained rate (when measured).
    pub times_sustained: Option<f64>,
    /// Each architecture's result, in the order run.
    pub results: Vec<StabilityResult>,
}

/// Stability mode's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "mode", rename = "stability")]
pub struct StabilityReport {
    /// Scheduling algorithm, as given.
    pub alg: String,
    /// Backend, as given.
    pub backend: String,
    /// PSPAT hand-off mode.
    #[serde(serialize_with = "as_text")]
    pub handoff: Handoff,
    /// Packet length, bytes.
    pub len: u32,
    /// Measured time per point.
    #[serde(rename = "duration_s", serialize_with = "as_secs")]
    pub duration: Duration,
    /// The PSPAT engine's settings.
    #[serde(flatten)]
    pub knobs: Knobs,
    /// Decisions/s of the PSPAT engine with the two clients on an unlimited link, in bit/s
    /// (when the rates were not given).
    pub sustained_bps: Option<f64>,
    /// One row per rate.
    pub rows: Vec<StabilityRow>,
}

/// One client count of floor mode.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FloorPoint {
    /// Yielding threads on the clients' CPUs.
    pub clients: usize,
    /// The span the gaps are counted over and divided by, ns: the snapshots' distance, or
    /// longer when a gap in progress at the first one is counted from its start.
    pub span_ns: u64,
    /// The gaps between two clock readings of the spinner.
    #[serde(flatten)]
    pub gaps: StallSummary,
}

/// Floor mode's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "mode", rename = "floor")]
pub struct FloorReport {
    /// Shortest gap counted, ns.
    pub stall_min_ns: u64,
    /// Measured time per point.
    #[serde(rename = "duration_s", serialize_with = "as_secs")]
    pub duration: Duration,
    /// One point per client count.
    pub points: Vec<FloorPoint>,
}

fn as_text<S: Serializer>(h: &Handoff, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(h)
}

fn as_secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn as_opt_us<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

/// `x / limit`, or 0 when the limit was not measured.
pub(crate) fn ratio(x: f64, limit: f64) -> f64 {
    if limit > 0.0 {
        x / limit
    } else {
        0.0
    }
}

/// The greedy clients' shares from their weights and what each got over the interval,
/// and the smallest over the largest normalised share (0 when none got anything).
pub(crate) fn shares(weights: &[u32], decisions: &[u64], bytes: &[u64]) -> (Vec<ClientShare>, f64) {
    let total_w: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let total_b: u64 = bytes.iter().sum();
    let shares: Vec<ClientShare> = weights
        .iter()
        .enumerate()
        .map(|(i, &weight)| {
            let target = total_b as f64 * f64::from(weight) / total_w as f64;
            ClientShare {
                client: i,
                weight,
                decisions: decisions[i],
                bytes: bytes[i],
                of_target: if target > 0.0 {
                    bytes[i] as f64 / target
                } else {
                    0.0
                },
            }
        })
        .collect();
    let (lo, hi) = shares.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), s| {
        (lo.min(s.of_target), hi.max(s.of_target))
    });
    (shares, if hi > 0.0 { lo / hi } else { 0.0 })
}

/// pspat over lock at each client count where both ran.
pub(crate) fn ratios(points: &[Point], clients: &[usize]) -> Vec<Ratio> {
    clients
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
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::Value;

    /// A point of `arch` with `clients` greedy clients releasing `rate` decisions/s.
    pub(crate) fn point(arch: Arch, clients: usize, rate: f64) -> Point {
        let (shares, share_min_max) =
            shares(&vec![1; clients], &vec![10; clients], &vec![600; clients]);
        Point {
            arch,
            clients,
            decisions_per_s: rate,
            sent_per_s: rate,
            released_bps: rate * 480.0,
            limit_per_s: 2.0 * rate,
            of_limit: 0.5,
            limit_backlogged_per_s: 4.0 * rate,
            of_limit_backlogged: 0.25,
            share_min_max,
            shares,
            victim: Some(Latency {
                count: 10,
                p50_ns: 1_000,
                p99_ns: 5_000,
                max_ns: 9_000,
            }),
            decisions_total: 100,
            sched_dequeues_total: (arch == Arch::Pspat).then_some(100),
            drops: 0,
            send_failed: 0,
            mailbox_full: 3,
            lock_contended: (arch == Arch::Lock).then_some(7),
            stalls: None,
        }
    }

    /// The keys of the JSON object `x` serialises to, in the order written (a `Value`'s map
    /// sorts them).
    fn keys(x: &impl Serialize) -> Vec<String> {
        let text = serde_json::to_string(x).unwrap();
        let (mut depth, mut keys, mut chars) = (0, Vec::new(), text.chars().peekable());
        while let Some(c) = chars.next() {
            match c {
                '{' | '[' => depth += 1,
                '}' | ']' => depth -= 1,
                '"' => {
                    let mut s = String::new();
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => s.extend(chars.next()),
                            '"' => break,
                            c => s.push(c),
                        }
                    }
                    if depth == 1 && chars.peek() == Some(&':') {
                        keys.push(s);
                    }
                }
                _ => {}
            }
        }
        keys
    }

    #[test]
    fn shares_are_normalised_by_weight() {
        // Weights 1 and 3; bytes 100 and 300: both exactly on target.
        let (s, mm) = shares(&[1, 3], &[2, 6], &[100, 300]);
        assert_eq!(s[1].client, 1);
        assert_eq!(s[1].weight, 3);
        assert_eq!(s[1].decisions, 6);
        assert!((s[0].of_target - 1.0).abs() < 1e-12 && (s[1].of_target - 1.0).abs() < 1e-12);
        assert!((mm - 1.0).abs() < 1e-12);
        // Equal weights, bytes 100 and 300: 0.5 and 1.5 of the target, min/max 1/3.
        let (s, mm) = shares(&[1, 1], &[1, 3], &[100, 300]);
        assert!((s[0].of_target - 0.5).abs() < 1e-12, "{s:?}");
        assert!((mm - 1.0 / 3.0).abs() < 1e-12);
        // Nothing released: no target, min/max 0.
        let (s, mm) = shares(&[1, 1], &[0, 0], &[0, 0]);
        assert_eq!((s[0].of_target, mm), (0.0, 0.0));
    }

    #[test]
    fn ratios_pair_the_architectures_per_client_count() {
        let points = [
            point(Arch::Pspat, 1, 6.0),
            point(Arch::Lock, 1, 2.0),
            point(Arch::Pspat, 4, 5.0),
            point(Arch::Lock, 4, 0.0),
            point(Arch::Pspat, 8, 5.0),
        ];
        let r = ratios(&points, &[1, 4, 8]);
        assert_eq!(r.len(), 2, "8 clients ran on pspat only");
        assert_eq!((r[0].clients, r[0].pspat_over_lock), (1, 3.0));
        assert_eq!((r[1].clients, r[1].pspat_over_lock), (4, f64::INFINITY));
        assert_eq!(ratio(3.0, 0.0), 0.0);
        assert_eq!(ratio(3.0, 6.0), 0.5);
    }

    #[test]
    fn a_stability_result_sets_the_heavy_share_against_ten() {
        let mut p = point(Arch::Lock, 2, 1.0);
        p.shares[0].bytes = 1100;
        p.shares[1].bytes = 100;
        let r = StabilityResult::of(&p);
        assert_eq!(r.arch, Arch::Lock);
        assert!((r.share - 11.0).abs() < 1e-12);
        assert!((r.error_pct - 10.0).abs() < 1e-9);
        assert_eq!(r.released_bps, p.released_bps);
    }

    #[test]
    fn the_throughput_report_keeps_the_json_of_the_command() {
        let r = ThroughputReport {
            alg: "qfq+".into(),
            backend: "null".into(),
            handoff: Handoff::Arbiter,
            rate_bps: 0,
            len: 60,
            flows: Some(4096),
            duration: Duration::from_millis(500),
            knobs: crate::arch::spec::tests::setup().knobs,
            victim_gap: Some(Duration::from_micros(50)),
            victim_weight: Some(100),
            points: vec![point(Arch::Pspat, 1, 2.0), point(Arch::Lock, 1, 1.0)],
            ratios: vec![Ratio {
                clients: 1,
                pspat_over_lock: 2.0,
            }],
        };
        let v: Value = serde_json::to_value(&r).unwrap();
        assert_eq!(
            keys(&r),
            [
                "mode",
                "alg",
                "backend",
                "handoff",
                "rate_bps",
                "len",
                "flows",
                "duration_s",
                "delta_a_ns",
                "aggregate_ns",
                "scan_batch",
                "victim_gap_us",
                "victim_weight",
                "points",
                "ratios"
            ]
        );
        assert_eq!(v["mode"], "throughput");
        assert_eq!(v["handoff"], "arbiter");
        assert_eq!(v["duration_s"], 0.5);
        assert_eq!(v["victim_gap_us"], 50);
        assert_eq!(v["flows"], 4096);
        let p = &v["points"][0];
        assert_eq!(
            keys(&r.points[0]),
            [
                "arch",
                "clients",
                "decisions_per_s",
                "sent_per_s",
                "released_bps",
                "limit_per_s",
                "of_limit",
                "limit_backlogged_per_s",
                "of_limit_backlogged",
                "share_min_max",
                "shares",
                "victim",
                "decisions_total",
                "sched_dequeues_total",
                "drops",
                "send_failed",
                "mailbox_full",
                "lock_contended",
                "stalls"
            ]
        );
        assert_eq!(p["arch"], "pspat");
        assert_eq!(
            keys(&r.points[0].shares[0]),
            ["client", "weight", "decisions", "bytes", "of_target"]
        );
        assert_eq!(
            keys(&r.points[0].victim),
            ["count", "p50_ns", "p99_ns", "max_ns"]
        );
        // Without a victim, its settings are null; one flow per client is a null count.
        let r = ThroughputReport {
            victim_gap: None,
            victim_weight: None,
            flows: None,
            ..r
        };
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["victim_gap_us"].is_null() && v["victim_weight"].is_null());
        assert!(v["flows"].is_null(), "{v}");
    }

    #[test]
    fn the_stability_report_keeps_the_json_of_the_command() {
        let r = StabilityReport {
            alg: "drr".into(),
            backend: "null".into(),
            handoff: Handoff::Dispatchers(2),
            len: 60,
            duration: Duration::from_millis(250),
            knobs: crate::arch::spec::tests::setup().knobs,
            sustained_bps: Some(1e9),
            rows: vec![StabilityRow {
                rate_bps: 500_000_000,
                times_sustained: Some(0.5),
                results: vec![StabilityResult::of(&point(Arch::Pspat, 2, 1.0))],
            }],
        };
        assert_eq!(
            keys(&r),
            [
                "mode",
                "alg",
                "backend",
                "handoff",
                "len",
                "duration_s",
                "delta_a_ns",
                "aggregate_ns",
                "scan_batch",
                "sustained_bps",
                "rows"
            ]
        );
        assert_eq!(keys(&r.rows[0]), ["rate_bps", "times_sustained", "results"]);
        assert_eq!(
            keys(&r.rows[0].results[0]),
            ["arch", "share", "error_pct", "released_bps"]
        );
        let v: Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["mode"], "stability");
        assert_eq!(v["handoff"], "dispatchers:2");
        assert_eq!(v["duration_s"], 0.25);
        assert_eq!(v["rows"][0]["results"][0]["arch"], "pspat");
    }

    #[test]
    fn the_floor_report_keeps_the_json_of_the_command() {
        let r = FloorReport {
            stall_min_ns: 4096,
            duration: Duration::from_secs(2),
            points: vec![FloorPoint {
                clients: 3,
                span_ns: 2_000_000_000,
                gaps: StallSummary {
                    gaps: 4,
                    stalled_pct: 0.5,
                    wait_p99_ns: 0.0,
                    longest_at_least_ns: 16_384,
                },
            }],
        };
        assert_eq!(keys(&r), ["mode", "stall_min_ns", "duration_s", "points"]);
        assert_eq!(
            keys(&r.points[0]),
            [
                "clients",
                "span_ns",
                "gaps",
                "stalled_pct",
                "wait_p99_ns",
                "longest_at_least_ns"
            ]
        );
        let v: Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["mode"], "floor");
        assert_eq!(v["duration_s"], 2.0);
    }

    #[test]
    fn arbiter_stalls_flatten_the_gap_summary() {
        let s = ArbiterStalls {
            gaps: StallSummary {
                gaps: 2,
                stalled_pct: 1.5,
                wait_p99_ns: 0.0,
                longest_at_least_ns: 8192,
            },
            deactivation_fences: 1,
            scans_per_s: 10.0,
            decisions_per_scan: 64.0,
        };
        assert_eq!(
            keys(&s),
            [
                "gaps",
                "stalled_pct",
                "wait_p99_ns",
                "longest_at_least_ns",
                "deactivation_fences",
                "scans_per_s",
                "decisions_per_scan"
            ]
        );
    }
}
