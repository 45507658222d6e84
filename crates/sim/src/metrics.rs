//! What a run measured, per flow and per group, and the reductions that produce it
//! (percentiles, Jain's index, burst completion by burst length).

use std::collections::BTreeMap;

use serde::Serialize;

/// The drop reason of a packet the link's emulated random loss (dummynet's pipe `plr`)
/// took before its queue, beside the scheduler's reasons ([`pspat_sched::DropReason`]).
pub const PLR: &str = "plr";

/// The `q`-quantile (0..=1) of sorted values by the nearest-rank method (`NaN` when empty).
pub fn quantile(sorted: &[f32], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // nearest rank: the smallest value with at least q of the values at or below it
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    f64::from(sorted[rank.min(sorted.len()) - 1])
}

/// Jain's fairness index of `x`: `(sum x)^2 / (n sum x^2)`, 1 when all are equal, `1/n`
/// when one has everything; 1 for an empty or all-zero set.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if s2 == 0.0 {
        1.0
    } else {
        s * s / (x.len() as f64 * s2)
    }
}

/// Percentiles of a delay-like quantity, ns.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Pcts {
    /// Number of samples.
    pub n: u64,
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Pcts {
    /// Of `v`, sorting it.
    pub fn of(v: &mut [f32]) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        v.sort_unstable_by(f32::total_cmp);
        Self {
            n: v.len() as u64,
            min: f64::from(v[0]),
            mean: v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64,
            p50: quantile(v, 0.5),
            p90: quantile(v, 0.9),
            p99: quantile(v, 0.99),
            max: f64::from(v[v.len() - 1]),
        }
    }
}

/// Burst completion times of bursts of one length.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct BurstRow {
    /// Burst length, packets.
    pub len: u32,
    /// Completion times, ns (first arrival to last departure).
    pub completion: Pcts,
}

/// One flow's results.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FlowReport {
    /// Index of the flow.
    pub flow: u32,
    /// Its group.
    pub group: String,
    /// Weight.
    pub weight: u32,
    /// Weight share `w / sum w` over all flows; in a tree, its leaf's share by weights
    /// times `w` over the weights of its leaf's flows ([`ClassReport::phi`]).
    pub phi: f64,
    /// Packets arrived.
    pub arrived: u64,
    /// Packets transmitted.
    pub packets: u64,
    /// Bytes transmitted.
    pub bytes: u64,
    /// Packets dropped: refused by the scheduler or lost by the link's `plr`.
    pub drops: u64,
    /// Of those, lost by the link's `plr` before the queue.
    pub drops_plr: u64,
    /// Bytes transmitted over the run's span, bit/s.
    pub throughput_bps: f64,
    /// Share of all transmitted bytes.
    pub share: f64,
    /// `share / phi` (1: exactly its weighted share).
    pub share_over_phi: f64,
    /// Delay from arrival to delivery (the last bit's departure from the wire plus the
    /// link's emulated `delay`), ns.
    pub delay: Pcts,
    /// Burst (response, frame) completion times, first arrival to last delivery, ns; empty
    /// for non-bursty flows.
    pub bursts: Pcts,
    /// Measured T-WFI, ns (QFQ+ paper eq. 1), when measured (not in a tree: its classes
    /// are, [`ClassReport`]). It and the other service metrics below are on the wire's
    /// release times, without the emulated delay.
    pub t_wfi_ns: Option<f64>,
    /// T-WFI in the flow's packet service times `L_i / (phi_i R)`.
    pub t_wfi_service_times: Option<f64>,
    /// Measured B-WFI, bytes (eq. A.20).
    pub b_wfi_bytes: Option<f64>,
    /// Largest completion time minus GPS completion time, ns.
    pub gps_delay_ns: Option<f64>,
    /// Largest fluid service minus packet service, bytes.
    pub gps_lag_bytes: Option<f64>,
}

/// One group's results: sums, pooled percentiles and worst cases.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct GroupReport {
    /// Name.
    pub name: String,
    /// Flows in the group.
    pub flows: u32,
    /// Weight of each flow.
    pub weight: u32,
    /// Sum of the group's weight shares.
    pub phi: f64,
    /// Packets arrived.
    pub arrived: u64,
    /// Packets transmitted.
    pub packets: u64,
    /// Packets dropped, every reason.
    pub drops: u64,
    /// Of those, lost by the link's `plr`.
    pub drops_plr: u64,
    /// Bit/s, all flows together.
    pub throughput_bps: f64,
    /// Share of the transmitted bytes.
    pub share: f64,
    /// `share / phi`.
    pub share_over_phi: f64,
    /// Jain's index of the flows' throughput per unit weight within the group.
    pub jain: f64,
    /// Pooled packet delays (arrival to delivery, as [`FlowReport::delay`]), ns.
    pub delay: Pcts,
    /// Pooled burst completion times, ns.
    pub bursts: Pcts,
    /// Burst completion by burst length.
    pub burst_by_len: Vec<BurstRow>,
    /// Largest T-WFI of a flow of the group, ns.
    pub t_wfi_ns: Option<f64>,
    /// The same in that flow's packet service times.
    pub t_wfi_service_times: Option<f64>,
    /// The flow with that T-WFI.
    pub t_wfi_flow: Option<u32>,
    /// Largest B-WFI, bytes.
    pub b_wfi_bytes: Option<f64>,
    /// Largest GPS delay, ns.
    pub gps_delay_ns: Option<f64>,
}

/// One class of a tree: what it sent, against the fluid allocation of the tree, and its
/// service against hierarchical GPS when weights alone share the link (see
/// [`crate::classes`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ClassReport {
    /// Name.
    pub name: String,
    /// Its parent's name (`None`: under the link).
    pub parent: Option<String>,
    /// Its algorithm: how it orders its children, or a leaf's flows.
    pub alg: String,
    /// Whether it is a leaf (it holds flows).
    pub leaf: bool,
    /// Guaranteed rate, bit/s (0: none).
    pub rate_bps: u64,
    /// Ceil, bit/s.
    pub ceil_bps: Option<u64>,
    /// Weight among its siblings of its band.
    pub weight: u32,
    /// Band among its siblings.
    pub prio: u8,
    /// Flows in its subtree.
    pub flows: u32,
    /// Packets sent through it, the whole run.
    pub packets: u64,
    /// Bytes sent through it, the whole run.
    pub bytes: u64,
    /// Of those, bytes its parent served within its rate (its guarantee: HTB's `lended`).
    pub lent_bytes: u64,
    /// Bytes it borrowed from its parent's excess.
    pub borrowed_bytes: u64,
    /// Times it went over its ceil with packets to send.
    pub overlimits: u64,
    /// What its subtree's flows brought over the window, bit/s; `None`: a backlogged flow
    /// (greedy, an infinite offer).
    pub offered_bps: Option<f64>,
    /// What it sent over the window, bit/s.
    pub throughput_bps: f64,
    /// Its fluid allocation ([`pspat_sched::reference::fluid::allocate_tree`]) for those
    /// offers, bit/s.
    pub fluid_bps: f64,
    /// `throughput / fluid - 1` (`None` when the allocation is 0).
    pub fluid_error: Option<f64>,
    /// Its share of the link by weights alone (the product of its and its ancestors'
    /// weights over their siblings').
    pub phi: f64,
    /// Measured T-WFI against its share, ns (weight-only trees).
    pub t_wfi_ns: Option<f64>,
    /// The bound the tree's design claims for that T-WFI, ns (a leaf whose packets leave in
    /// arrival order under WF2Q+ and QFQ nodes).
    pub t_wfi_bound_ns: Option<f64>,
    /// Largest completion time behind hierarchical GPS, ns (weight-only trees).
    pub hgps_delay_ns: Option<f64>,
}

/// A tree's run as a whole (see [`crate::classes`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TreeReport {
    /// Start of the window of the classes' throughput, ns.
    pub window_start_ns: f64,
    /// Its end: when the traffic stopped, ns.
    pub window_end_ns: f64,
    /// Whether weights alone share the link (no rate, no ceil, one band): the T-WFI and
    /// H-GPS columns are measured then.
    pub weight_only: bool,
    /// The class budget the bounds use (the largest packet), bytes.
    pub mtu: u32,
    /// Largest `|fluid_error|` over the classes.
    pub worst_fluid_error: f64,
    /// Largest T-WFI over its bound among the classes with a bound.
    pub worst_t_wfi_over_bound: Option<f64>,
}

/// A point series for the plots (pspat-plot's).
pub use pspat_plot::Series;

/// What the plots of one run draw.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PlotData {
    /// Cumulative service of selected flows, bytes against ms: packet system and GPS (none
    /// for a tree, whose flows GPS does not describe).
    pub service: Vec<Series>,
    /// Delay CDF per group: (delay us, fraction).
    pub delay_cdf: Vec<Series>,
    /// Mean burst completion (us) against burst length, per bursty group.
    pub burst_latency: Vec<Series>,
}

/// The results of one run.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SimReport {
    /// Scenario name.
    pub name: String,
    /// Canonical algorithm name.
    pub alg: String,
    /// Algorithm parameters as given.
    pub params: String,
    /// Link rate, bit/s.
    pub rate_bps: f64,
    /// Transmit queue, packets.
    pub txq: u32,
    /// The link's emulated delay, ns (in the packet delays and burst times, not in the
    /// service metrics).
    pub delay_ns: u64,
    /// The link's emulated loss probability.
    pub plr: f64,
    /// The wire's framing ([`pspat_sched::framing`]): bytes added to every packet...
    pub overhead: i32,
    /// ... the smallest charge of a packet ...
    pub mpu: u32,
    /// ... and the link layer (`ethernet`, `atm`, `ptm`).
    pub linklayer: String,
    /// Seed.
    pub seed: u64,
    /// Flows.
    pub flows: u64,
    /// Packets arrived (the lost ones included).
    pub arrived: u64,
    /// Packets transmitted.
    pub packets: u64,
    /// Bytes transmitted (the packets' lengths).
    pub bytes: u64,
    /// Bytes the wire charged for them: `bytes` framed by the link's framing (equal to
    /// `bytes` without one).
    pub wire_bytes: u64,
    /// Packets dropped, every reason.
    pub drops: u64,
    /// Packets dropped by reason: the scheduler's reasons by their names
    /// (`flow_packet_limit`, ...) and [`PLR`]; reasons without drops are absent.
    pub drops_by_reason: BTreeMap<String, u64>,
    /// Every packet's delay (arrival to delivery, as [`FlowReport::delay`]), ns.
    pub delay: Pcts,
    /// Simulated time until the last departure from the wire (release), ns.
    pub duration_ns: f64,
    /// Fraction of that time the wire was busy.
    pub utilization: f64,
    /// Jain's index of throughput per unit weight over the flows whose arrivals never let
    /// them go idle (backlogged flows); `None` without such flows.
    pub jain_backlogged: Option<f64>,
    /// Jain's index of throughput per unit weight over all flows.
    pub jain_all: f64,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Per group.
    pub groups: Vec<GroupReport>,
    /// Per flow (omitted from the JSON above `--flows-json-max` flows; always in the CSV).
    pub per_flow: Vec<FlowReport>,
    /// A tree's run as a whole (absent for one scheduler over every flow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeReport>,
    /// A tree's classes, in the scenario's order (absent for one scheduler).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassReport>,
    /// Plot data.
    #[serde(skip)]
    pub plot: PlotData,
}

impl SimReport {
    /// The per-flow table as CSV.
    pub fn flows_csv(&self) -> String {
        let mut s = String::from(
            "flow,group,weight,phi,arrived,packets,bytes,drops,drops_plr,throughput_bps,share,share_over_phi,\
             delay_p50_ns,delay_p90_ns,delay_p99_ns,delay_max_ns,bursts,burst_mean_ns,burst_p50_ns,\
             burst_p99_ns,burst_max_ns,t_wfi_ns,t_wfi_service_times,b_wfi_bytes,gps_delay_ns,\
             gps_lag_bytes\n",
        );
        let o = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x}"));
        for f in &self.per_flow {
            s.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                f.flow,
                f.group,
                f.weight,
                f.phi,
                f.arrived,
                f.packets,
                f.bytes,
                f.drops,
                f.drops_plr,
                f.throughput_bps,
                f.share,
                f.share_over_phi,
                f.delay.p50,
                f.delay.p90,
                f.delay.p99,
                f.delay.max,
                f.bursts.n,
                f.bursts.mean,
                f.bursts.p50,
                f.bursts.p99,
                f.bursts.max,
                o(f.t_wfi_ns),
                o(f.t_wfi_service_times),
                o(f.b_wfi_bytes),
                o(f.gps_delay_ns),
                o(f.gps_lag_bytes),
            ));
        }
        s
    }

    /// The per-group table as CSV.
    pub fn groups_csv(&self) -> String {
        let mut s = String::from(
            "group,flows,weight,phi,arrived,packets,drops,drops_plr,throughput_bps,share,share_over_phi,\
             jain,delay_p50_ns,delay_p90_ns,delay_p99_ns,delay_max_ns,bursts,burst_mean_ns,\
             burst_p99_ns,t_wfi_ns,t_wfi_service_times,b_wfi_bytes,gps_delay_ns\n",
        );
        let o = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x}"));
        for g in &self.groups {
            s.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                g.name,
                g.flows,
                g.weight,
                g.phi,
                g.arrived,
                g.packets,
                g.drops,
                g.drops_plr,
                g.throughput_bps,
                g.share,
                g.share_over_phi,
                g.jain,
                g.delay.p50,
                g.delay.p90,
                g.delay.p99,
                g.delay.max,
                g.bursts.n,
                g.bursts.mean,
                g.bursts.p99,
                o(g.t_wfi_ns),
                o(g.t_wfi_service_times),
                o(g.b_wfi_bytes),
                o(g.gps_delay_ns),
            ));
        }
        s
    }
}

impl std::fmt::Display for SimReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The emulation's keys and the drops by reason are printed only when the link
        // emulates something, so that a plain run prints what it always has.
        let framed = self.overhead != 0
            || self.mpu != 0
            || !matches!(self.linklayer.as_str(), "" | "ethernet");
        let emulating = self.delay_ns > 0 || self.plr > 0.0 || framed;
        let mut emulation = if emulating {
            format!(
                " delay={} plr={}",
                pspat_units::format_duration(self.delay_ns),
                self.plr
            )
        } else {
            String::new()
        };
        if framed {
            emulation += &format!(
                " overhead={} mpu={} linklayer={}",
                self.overhead, self.mpu, self.linklayer
            );
        }
        let rate = |bytes: u64| {
            if self.duration_ns > 0.0 {
                bytes as f64 * 8e3 / self.duration_ns
            } else {
                0.0
            }
        };
        writeln!(
            f,
            "{} alg={}{} rate={}bps{emulation} txq={} seed={} flows={}",
            if self.name.is_empty() {
                "sim"
            } else {
                &self.name
            },
            self.alg,
            if self.params.is_empty() {
                String::new()
            } else {
                format!("@{}", self.params)
            },
            self.rate_bps,
            self.txq,
            self.seed,
            self.flows
        )?;
        writeln!(
            f,
            "arrived={} sent={} dropped={}{} simulated={:.3}ms utilization={:.3} jain(all)={:.4}{} wall={:.2}s",
            self.arrived,
            self.packets,
            self.drops,
            if self.plr > 0.0 {
                let reasons: Vec<String> = self
                    .drops_by_reason
                    .iter()
                    .map(|(r, n)| format!("{r}={n}"))
                    .collect();
                format!(" ({})", reasons.join(" "))
            } else {
                String::new()
            },
            self.duration_ns / 1e6,
            self.utilization,
            self.jain_all,
            self.jain_backlogged
                .map_or(String::new(), |j| format!(" jain(backlogged)={j:.4}")),
            self.wall_s
        )?;
        if emulating {
            let lost = self.drops_by_reason.get(PLR).copied().unwrap_or(0);
            let ms = |ns: f64| ns / 1e6;
            writeln!(
                f,
                "link: lost={lost} ({:.3}% of arrivals) delivered={:.3}Mbit/s{} delay min={:.3}ms \
                 p50={:.3}ms p99={:.3}ms max={:.3}ms (arrival to delivery, {} of it the delay line)",
                if self.arrived > 0 {
                    100.0 * lost as f64 / self.arrived as f64
                } else {
                    0.0
                },
                rate(self.bytes),
                if framed {
                    format!(" wire={:.3}Mbit/s", rate(self.wire_bytes))
                } else {
                    String::new()
                },
                ms(self.delay.min),
                ms(self.delay.p50),
                ms(self.delay.p99),
                ms(self.delay.max),
                pspat_units::format_duration(self.delay_ns),
            )?;
        }
        writeln!(
            f,
            "{:<12} {:>6} {:>6} {:>12} {:>8} {:>10} {:>10} {:>10} {:>10} {:>11} {:>10} {:>10}",
            "group",
            "flows",
            "weight",
            "Mbit/s",
            "share/phi",
            "delay p50",
            "p99",
            "max us",
            "burst mean",
            "burst p99 us",
            "T-WFI us",
            "(svc times)"
        )?;
        // A tree with rates, ceils or bands owes its flows no share by weight: the classes
        // say what they are owed.
        let shared_by_weight = self.tree.as_ref().map_or(true, |t| t.weight_only);
        for g in &self.groups {
            let us = |ns: f64| if ns.is_nan() { f64::NAN } else { ns / 1e3 };
            writeln!(
                f,
                "{:<12} {:>6} {:>6} {:>12.3} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>11.2} {:>10} {:>10}",
                g.name,
                g.flows,
                g.weight,
                g.throughput_bps / 1e6,
                if shared_by_weight {
                    format!("{:.3}", g.share_over_phi)
                } else {
                    "-".into()
                },
                us(g.delay.p50),
                us(g.delay.p99),
                us(g.delay.max),
                us(g.bursts.mean),
                us(g.bursts.p99),
                g.t_wfi_ns.map_or("-".into(), |v| format!("{:.2}", v / 1e3)),
                g.t_wfi_service_times
                    .map_or("-".into(), |v| format!("{v:.3}")),
            )?;
        }
        if let Some(t) = &self.tree {
            write_classes(f, t, &self.classes)?;
        }
        Ok(())
    }
}

/// A tree's part of the report: the window and worst figures, then a class a line.
fn write_classes(
    f: &mut std::fmt::Formatter<'_>,
    t: &TreeReport,
    classes: &[ClassReport],
) -> std::fmt::Result {
    writeln!(
        f,
        "classes: throughput over {:.3}..{:.3} ms against the fluid allocation (worst error \
         {:.3}%){}",
        t.window_start_ns / 1e6,
        t.window_end_ns / 1e6,
        100.0 * t.worst_fluid_error,
        if t.weight_only {
            format!(
                "; weights only: T-WFI against H-GPS{}",
                t.worst_t_wfi_over_bound
                    .map_or(String::new(), |w| format!(" (worst {w:.3} of its bound)"))
            )
        } else {
            String::new()
        }
    )?;
    writeln!(
        f,
        "{:<12} {:<10} {:<7} {:>10} {:>10} {:>6} {:>4} {:>5} {:>9} {:>10} {:>10} {:>8} {:>9} {:>9} {:>9}",
        "class",
        "parent",
        "alg",
        "rate",
        "ceil",
        "weight",
        "prio",
        "flows",
        "offered",
        "Mbit/s",
        "fluid",
        "error %",
        "T-WFI us",
        "bound us",
        "H-GPS us"
    )?;
    let bw = |b: Option<u64>| b.map_or("-".into(), pspat_units::format_bandwidth);
    let us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2}", v / 1e3));
    for c in classes {
        writeln!(
            f,
            "{:<12} {:<10} {:<7} {:>10} {:>10} {:>6} {:>4} {:>5} {:>9} {:>10.3} {:>10.3} {:>8} {:>9} {:>9} {:>9}",
            c.name,
            c.parent.as_deref().unwrap_or("-"),
            c.alg,
            bw((c.rate_bps > 0).then_some(c.rate_bps)),
            bw(c.ceil_bps),
            c.weight,
            c.prio,
            c.flows,
            c.offered_bps
                .map_or("greedy".into(), |o| format!("{:.3}", o / 1e6)),
            c.throughput_bps / 1e6,
            c.fluid_bps / 1e6,
            c.fluid_error
                .map_or("-".into(), |e| format!("{:+.3}", 100.0 * e)),
            us(c.t_wfi_ns),
            us(c.t_wfi_bound_ns),
            us(c.hgps_delay_ns),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        // 1..=10: the median by nearest rank is the 5th value, p90 the 9th, p99 the 10th.
        let v: Vec<f32> = (1..=10).map(|x| x as f32).collect();
        assert_eq!(quantile(&v, 0.5), 5.0);
        assert_eq!(quantile(&v, 0.9), 9.0);
        assert_eq!(quantile(&v, 0.99), 10.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert!(quantile(&[], 0.5).is_nan());
        let mut w = vec![3.0, 1.0, 2.0];
        let p = Pcts::of(&mut w);
        assert_eq!((p.n, p.min, p.mean, p.p50, p.max), (3, 1.0, 2.0, 2.0, 3.0));
    }

    #[test]
    fn jain_extremes() {
        assert!((jain(&[2.0, 2.0, 2.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        // (1 + 3)^2 / (2 (1 + 9)) = 0.8
        assert!((jain(&[1.0, 3.0]) - 0.8).abs() < 1e-12);
        assert_eq!(jain(&[]), 1.0);
    }
}
