//! Service guarantees measured on the exact virtual link: `pspat bench wfi`.
//!
//! Runs a flowset through any registered algorithm on the reference link of
//! [`pspat_sched::reference::link`] (constant rate `R`, a transmit queue of `txq` packets),
//! with arrivals from the harness's own patterns given times by the model below, then
//! measures every flow against the fluid GPS system with
//! [`pspat_sched::reference::wfi::measure`]: T-WFI (QFQ+ paper eq. 1), B-WFI (eq. A.20) and
//! the largest delay behind GPS, and reports them per flowset (flow class).
//!
//! # Timed arrivals: fill and drain
//!
//! The benchmark harness ([`crate::controller`]) has no clock: it enqueues until `qmax`
//! packets are pending, then dequeues down to `qmin`. Here the same hysteresis runs against
//! the link's clock, counting as pending the packets in the scheduler (arrived, not yet
//! handed to the transmit queue):
//!
//! - **fill**: packets arrive back to back at `fill_rate` times the link rate (each packet
//!   `8 len / (fill_rate R)` after the previous one; `fill_rate = inf`: all at the instant
//!   the phase starts), on the flows the pattern picks (smooth: a least-backlogged flow;
//!   bursty: bursts of `1..=16 w` packets, see [`crate::pattern`]), until `qmax` are
//!   pending. As the link drains at `R` meanwhile, the backlog grows at
//!   `(fill_rate - 1) R`.
//! - **drain**: no arrivals while the link sends, until `qmin` are pending; and, as in the
//!   QFQ+ paper's guarantee experiments (section 8.3: "randomly switch to the enqueue
//!   phase, with probability 0.5, every time a flow queue got empty"), each time a packet
//!   handed out empties its flow, the phase switches to fill with probability
//!   `switch_on_empty`.
//!
//! With `-qmin 0 -qmax 30n` and the smooth pattern every flow's backlog oscillates between
//! 0 and about 30 packets. Time is in integer nanoseconds for arrivals (a fill gap is
//! rounded down, so arrivals come at most 1 ns early) and exact `f64` on the link. The run
//! generates `packets` packets, then lets the link drain.
//!
//! # Cost
//!
//! The link and the scheduler are O(1) per packet (plus the algorithm's own cost); the GPS
//! reference is O(log N) per packet event, and the whole run is kept in memory for the
//! measurement: about 200 bytes per packet.

use std::time::{Duration, Instant};

use pspat_sched::reference::link::{tx_time_ns, VirtualLink};
use pspat_sched::reference::wfi::{measure, FlowService};
use pspat_sched::registry;
use pspat_sched::{Desc, Scheduler};
use serde::Serialize;

use crate::error::{Error, SetupError};
use crate::pattern::{FlowSpec, Pattern};
use crate::rng::WyRand;
use crate::scenario::{BenchSpec, Scenario};

/// Default link rate, bit/s.
pub const DEFAULT_RATE_BPS: u64 = 1_000_000_000;

/// Default arrival rate of a fill phase, in multiples of the link rate.
pub const DEFAULT_FILL_RATE: f64 = 2.0;

/// Default probability of switching to fill when a flow empties (QFQ+ paper section 8.3).
pub const DEFAULT_SWITCH_ON_EMPTY: f64 = 0.5;

/// Largest transmit queue, packets.
pub const MAX_TXQ: u64 = 1 << 20;

/// A guarantee measurement as specified.
#[derive(Clone, Debug, PartialEq)]
pub struct WfiSpec {
    /// Algorithm, flowsets, thresholds, pattern, seed, parameters, capacity: as for the
    /// benchmark (`loops` is ignored; `alg` must be a registered algorithm).
    pub bench: BenchSpec,
    /// Packets to generate.
    pub packets: u64,
    /// Transmit queue, packets (0: the scheduler is asked when the wire is idle).
    pub txq: u64,
    /// Link rate, bit/s.
    pub rate_bps: u64,
    /// Arrival rate of a fill phase in multiples of the link rate (`> 1`; infinite: a
    /// whole phase at one instant).
    pub fill_rate: f64,
    /// Probability of switching to fill when a flow empties during a drain.
    pub switch_on_empty: f64,
}

impl Default for WfiSpec {
    fn default() -> Self {
        Self {
            bench: BenchSpec::default(),
            packets: 100_000,
            txq: 0,
            rate_bps: DEFAULT_RATE_BPS,
            fill_rate: DEFAULT_FILL_RATE,
            switch_on_empty: DEFAULT_SWITCH_ON_EMPTY,
        }
    }
}

/// The service of one flowset's flows: the worst over its flows.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ClassReport {
    /// The flowset as expanded: `weight:len:flows`.
    pub flowset: String,
    /// Weight of each flow.
    pub weight: u32,
    /// Packet length, bytes.
    pub len: u32,
    /// Number of flows.
    pub flows: u32,
    /// Share of each flow, `w / sum w`.
    pub phi: f64,
    /// Packet service time `L / (phi R)`, ns (QFQ+ paper, Definition 1).
    pub service_time_ns: f64,
    /// Packets sent by the class.
    pub packets: u64,
    /// Largest T-WFI of a flow of the class, ns.
    pub t_wfi_ns: f64,
    /// The same in packet service times.
    pub t_wfi_service_times: f64,
    /// The flow (global index) with that T-WFI.
    pub t_wfi_flow: u32,
    /// Largest B-WFI, bytes.
    pub b_wfi_bytes: f64,
    /// The same in packets of the class.
    pub b_wfi_packets: f64,
    /// Largest completion time minus GPS completion time, ns.
    pub gps_delay_ns: f64,
}

/// What `pspat bench wfi` reports.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WfiReport {
    /// Canonical algorithm name.
    pub sched: String,
    /// The flowsets as given.
    pub flowsets: String,
    /// Arrival pattern.
    pub pattern: &'static str,
    /// Low threshold, packets.
    pub qmin: u64,
    /// High threshold, packets.
    pub qmax: u64,
    /// Transmit queue, packets.
    pub txq: u64,
    /// Link rate, bit/s.
    pub rate_bps: u64,
    /// Fill-phase arrival rate, multiples of the link rate (`null`: infinite).
    pub fill_rate: Option<f64>,
    /// Probability of switching to fill when a flow empties.
    pub switch_on_empty: f64,
    /// Seed.
    pub seed: u64,
    /// Packets generated.
    pub packets: u64,
    /// Packets the scheduler refused (0 in a sound run).
    pub drops: u64,
    /// Fill phases started.
    pub fill_phases: u64,
    /// Largest number of packets pending in the scheduler.
    pub max_pending: u64,
    /// Simulated time, ns.
    pub duration_ns: f64,
    /// Fraction of the simulated time the wire was busy.
    pub utilization: f64,
    /// Per flowset, in order.
    pub classes: Vec<ClassReport>,
    /// Wall time of the simulation and the measurement, seconds.
    pub wall_s: f64,
}

impl std::fmt::Display for WfiReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fill = self
            .fill_rate
            .map_or_else(|| "inf".to_owned(), |r| format!("{r}"));
        writeln!(
            f,
            "sched={} flow={} pattern={} qmin={} qmax={} txq={} rate={}bps fill={}R \
             switch_on_empty={} seed={}",
            self.sched,
            self.flowsets,
            self.pattern,
            self.qmin,
            self.qmax,
            self.txq,
            self.rate_bps,
            fill,
            self.switch_on_empty,
            self.seed
        )?;
        writeln!(
            f,
            "packets={} drops={} fill_phases={} max_pending={} simulated={:.3}ms \
             utilization={:.3} wall={:.1}s",
            self.packets,
            self.drops,
            self.fill_phases,
            self.max_pending,
            self.duration_ns / 1e6,
            self.utilization,
            self.wall_s
        )?;
        writeln!(
            f,
            "{:<16} {:>8} {:>12} {:>12} {:>10} {:>12} {:>10} {:>12}",
            "flowset",
            "phi",
            "svc_time_ns",
            "T-WFI_ns",
            "T-WFI/svc",
            "B-WFI_bytes",
            "B-WFI/L",
            "GPS_delay_ns"
        )?;
        for c in &self.classes {
            writeln!(
                f,
                "{:<16} {:>8.5} {:>12.1} {:>12.1} {:>10.3} {:>12.1} {:>10.3} {:>12.1}",
                c.flowset,
                c.phi,
                c.service_time_ns,
                c.t_wfi_ns,
                c.t_wfi_service_times,
                c.b_wfi_bytes,
                c.b_wfi_packets,
                c.gps_delay_ns
            )?;
        }
        Ok(())
    }
}

fn bad(option: &'static str, value: impl ToString, reason: &str) -> Error {
    SetupError::Option {
        option,
        value: value.to_string(),
        reason: reason.to_owned(),
    }
    .into()
}

/// Checks the options that are not the benchmark's.
fn validate(spec: &WfiSpec) -> Result<(), Error> {
    if spec.bench.alg.eq_ignore_ascii_case(crate::target::NONE) {
        return Err(bad(
            "--alg",
            &spec.bench.alg,
            "a guarantee needs a registered algorithm",
        ));
    }
    if spec.packets == 0 {
        return Err(bad("-n", 0, "must be at least 1"));
    }
    if spec.txq > MAX_TXQ {
        return Err(bad("--txq", spec.txq, "at most 1048576 packets"));
    }
    if spec.rate_bps == 0 {
        return Err(bad("--rate", 0, "must be positive"));
    }
    if spec.fill_rate.is_nan() || spec.fill_rate <= 1.0 {
        return Err(bad(
            "--fill-rate",
            spec.fill_rate,
            "must be above 1 (times the link rate), or inf",
        ));
    }
    if !(0.0..=1.0).contains(&spec.switch_on_empty) {
        return Err(bad(
            "--switch-on-empty",
            spec.switch_on_empty,
            "must be a probability, 0..=1",
        ));
    }
    Ok(())
}

/// Runs `spec` and measures it.
pub fn run(spec: &WfiSpec) -> Result<WfiReport, Error> {
    validate(spec)?;
    let scenario = Scenario::resolve(&spec.bench)?;
    let info = scenario.info.expect("validated: not none");
    let wall = Instant::now();
    let mut sched = registry::build::<Desc>(info.name, &scenario.params, scenario.capacity)
        .map_err(SetupError::Config)?;
    let flow_map = scenario.flowsets.flow_map();
    let mut ids = Vec::with_capacity(scenario.flow_params.len());
    for (i, p) in scenario.flow_params.iter().enumerate() {
        let id = sched.add_flow(*p).map_err(|source| SetupError::Flow {
            flow: i as u32,
            flowset: scenario.flowsets.sets[flow_map[i] as usize].spec.clone(),
            source,
        })?;
        ids.push(id);
    }
    let specs: Vec<FlowSpec> = scenario
        .flow_params
        .iter()
        .map(|p| FlowSpec {
            weight: p.weight,
            len: p.max_len,
        })
        .collect();
    let sim = simulate(spec, &scenario, &mut *sched, ids, &specs);
    let weights: Vec<u32> = specs.iter().map(|f| f.weight).collect();
    let per_flow = measure(&sim.trace, &sim.arrivals, &weights);
    let classes = classes(&scenario, &flow_map, &per_flow, spec.rate_bps as f64);
    let busy: f64 = sim.trace.tx.iter().map(|r| r.finish_ns - r.start_ns).sum();
    let duration_ns = sim.trace.tx.last().map_or(0.0, |r| r.finish_ns);
    Ok(WfiReport {
        sched: info.name.to_owned(),
        flowsets: scenario.flowsets.label.clone(),
        pattern: spec.bench.pattern.name(),
        qmin: scenario.qmin,
        qmax: scenario.qmax,
        txq: spec.txq,
        rate_bps: spec.rate_bps,
        fill_rate: spec.fill_rate.is_finite().then_some(spec.fill_rate),
        switch_on_empty: spec.switch_on_empty,
        seed: spec.bench.seed,
        packets: sim.arrivals.len() as u64,
        drops: sim.trace.drops.len() as u64,
        fill_phases: sim.fill_phases,
        max_pending: sim.max_pending,
        duration_ns,
        utilization: if duration_ns > 0.0 {
            busy / duration_ns
        } else {
            0.0
        },
        classes,
        wall_s: Duration::as_secs_f64(&wall.elapsed()),
    })
}

/// A simulated run.
struct Sim {
    arrivals: Vec<pspat_sched::reference::trace::Arrival>,
    trace: pspat_sched::reference::trace::Trace,
    fill_phases: u64,
    max_pending: u64,
}

/// The closed loop: pattern and fill/drain controller against the link's clock.
fn simulate(
    spec: &WfiSpec,
    scenario: &Scenario,
    sched: &mut dyn Scheduler<Desc>,
    ids: Vec<pspat_sched::FlowId>,
    flows: &[FlowSpec],
) -> Sim {
    let rate = spec.rate_bps as f64;
    let mut link = VirtualLink::new(ids, rate, spec.txq as usize);
    let mut pattern = Pattern::new(spec.bench.pattern, flows, spec.bench.seed);
    // A generator apart from the pattern's, so that the bursts do not depend on the
    // switching decisions.
    let mut coin = WyRand::new(spec.bench.seed ^ 0x5bd1_e995_9e37_79b9);
    let threshold = (spec.switch_on_empty * (1u64 << 32) as f64) as u64;
    let (qmin, qmax) = (scenario.qmin, scenario.qmax);
    let mut pending = 0u64;
    let mut max_pending = 0u64;
    let mut generated = 0u64;
    let mut filling = true;
    let mut fill_phases = 1u64;
    let mut next_arrival = 0.0_f64; // ns, while filling
    loop {
        let t_arrival = (filling && generated < spec.packets).then_some(next_arrival.floor());
        let Some(t) = link.next_event_with(t_arrival) else {
            break;
        };
        link.advance_to(t);
        // The arrivals of this instant.
        while filling && generated < spec.packets && next_arrival.floor() <= link.now_ns() {
            let g = pattern.generate();
            generated += 1;
            // Arrivals are at whole nanoseconds (`next_arrival` is floored, and a fill phase
            // starts at a whole nanosecond), so `now` is one here.
            let now = link.now_ns() as u64;
            match link.enqueue(sched, now, g.flow as usize, g.len) {
                Ok(_) => {
                    pending += 1;
                    max_pending = max_pending.max(pending);
                }
                Err(_) => pattern.refused(g.flow),
            }
            next_arrival += tx_time_ns(g.len, rate) / spec.fill_rate;
            if pending >= qmax {
                filling = false;
            }
        }
        // The dequeue unit, and the controller's reaction to each packet handed out.
        let now = link.now_ns();
        for h in link.fill(sched) {
            let served = pattern.dequeued(h.flow as u32);
            pending -= 1;
            if !filling
                && generated < spec.packets
                && (pending <= qmin || (served.emptied && coin.next_u64() >> 32 < threshold))
            {
                filling = true;
                fill_phases += 1;
                next_arrival = now.ceil();
            }
        }
    }
    let (arrivals, trace) = link.finish();
    Sim {
        arrivals,
        trace,
        fill_phases,
        max_pending,
    }
}

/// The worst flow of each flowset.
fn classes(
    scenario: &Scenario,
    flow_map: &[u32],
    per_flow: &[FlowService],
    rate_bps: f64,
) -> Vec<ClassReport> {
    let fs = &scenario.flowsets;
    let mut out: Vec<ClassReport> = fs
        .sets
        .iter()
        .map(|s| {
            let phi = f64::from(s.weight) / fs.wsum as f64;
            ClassReport {
                flowset: format!("{}:{}:{}", s.weight, s.len, s.flows),
                weight: s.weight,
                len: s.len,
                flows: s.flows,
                phi,
                service_time_ns: tx_time_ns(s.len, rate_bps) / phi,
                packets: 0,
                t_wfi_ns: f64::NEG_INFINITY,
                t_wfi_service_times: f64::NEG_INFINITY,
                t_wfi_flow: 0,
                b_wfi_bytes: 0.0,
                b_wfi_packets: 0.0,
                gps_delay_ns: f64::NEG_INFINITY,
            }
        })
        .collect();
    for (i, f) in per_flow.iter().enumerate() {
        let c = &mut out[flow_map[i] as usize];
        c.packets += f.packets;
        if f.packets == 0 {
            continue;
        }
        if f.t_wfi_ns > c.t_wfi_ns {
            c.t_wfi_ns = f.t_wfi_ns;
            c.t_wfi_flow = i as u32;
        }
        c.b_wfi_bytes = c.b_wfi_bytes.max(f.b_wfi_bytes);
        c.gps_delay_ns = c.gps_delay_ns.max(f.gps_delay_ns);
    }
    for c in &mut out {
        if c.packets == 0 {
            c.t_wfi_ns = 0.0;
            c.gps_delay_ns = 0.0;
        }
        c.t_wfi_service_times = c.t_wfi_ns / c.service_time_ns;
        c.b_wfi_packets = c.b_wfi_bytes / f64::from(c.len);
    }
    out
}

#[cfg(test)]
mod tests {
    use pspat_sched::reference::wfi::{qfq_t_wfi_bound, BoundInputs};

    use super::*;
    use crate::number::Num;
    use crate::pattern::Kind;

    fn spec(alg: &str, flowsets: &str, packets: u64) -> WfiSpec {
        WfiSpec {
            bench: BenchSpec {
                alg: alg.into(),
                flowsets: Some(flowsets.into()),
                qmin: Num::Abs(0),
                qmax: Num::PerFlow(30),
                ..BenchSpec::default()
            },
            packets,
            ..WfiSpec::default()
        }
    }

    #[test]
    fn instant_fills_to_qmax_and_drains_to_qmin() {
        // fill_rate inf, no switching on empty flows: each fill phase puts qmax = 120
        // packets in at one instant, then the link drains them all (qmin 0) before the
        // next: 1200 packets are exactly 10 phases, and the scheduler never holds more.
        let mut s = spec("drr", "1::4", 1200);
        s.fill_rate = f64::INFINITY;
        s.switch_on_empty = 0.0;
        let r = run(&s).unwrap();
        assert_eq!((r.packets, r.drops), (1200, 0));
        assert_eq!((r.fill_phases, r.max_pending, r.qmax), (10, 120, 120));
        // Each phase arrives when the link has just gone idle: busy all the time.
        assert!((r.utilization - 1.0).abs() < 1e-9, "{}", r.utilization);
        // 1200 packets of 1000 bytes at 1 Gbit/s.
        assert!(
            (r.duration_ns - 1200.0 * 8000.0).abs() < 1e-6,
            "{}",
            r.duration_ns
        );
        assert_eq!(r.fill_rate, None);
    }

    #[test]
    fn finite_fill_rate_accumulates_at_the_excess_rate() {
        // At 2 R the backlog grows by one packet per two arrivals, so a fill from 0 to 120
        // pending takes about 240 arrivals; with qmin 0 and no switching on empty flows,
        // 2400 packets are about 10 fill phases (the first from an idle link, the others
        // from 0 pending with the last packet still on the wire).
        let mut s = spec("drr", "1::4", 2400);
        s.switch_on_empty = 0.0;
        let r = run(&s).unwrap();
        assert_eq!((r.packets, r.drops, r.max_pending), (2400, 0, 120));
        assert!((9..=11).contains(&r.fill_phases), "{}", r.fill_phases);
        assert_eq!(r.fill_rate, Some(2.0));
        // Switching on empty flows (the paper's 0.5) starts fills before qmin when some flow
        // empties early: a flow of weight 8 among 8 of weight 1 gets 1/9 of the smooth
        // arrivals but half the service, and empties early in every drain.
        let mut skewed = spec("drr", "8::1,1::8", 2400);
        skewed.switch_on_empty = 0.0;
        let never = run(&skewed).unwrap().fill_phases;
        skewed.switch_on_empty = 0.5;
        let half = run(&skewed).unwrap().fill_phases;
        assert!(half > never, "{half} vs {never}");
    }

    #[test]
    fn heavy_flow_qfq_within_its_bound_drr_far_beyond() {
        // One flow of weight 50 among 150 of weight 1 (phi = 1/4), 1000-byte packets: one
        // packet service time of the heavy flow is 4 L / R. DRR makes it wait for a round
        // of the light flows it finds backlogged, up to 150 L / R, some 37 service times;
        // QFQ must stay within 6 + Q / (4 L) = 6.25 service times (Q = L, no queue).
        let fs = "50:1000:1,1:1000:150";
        for pattern in [Kind::Smooth, Kind::Bursty] {
            let mut s = spec("qfq", fs, 30_000);
            s.bench.pattern = pattern;
            let q = run(&s).unwrap();
            let heavy = &q.classes[0];
            assert_eq!((heavy.weight, heavy.flows), (50, 1));
            assert!((heavy.phi - 0.25).abs() < 1e-12);
            let b = qfq_t_wfi_bound(&BoundInputs::with_txq(0.25, 1000, 1000, 0, 1e9));
            assert!(heavy.t_wfi_ns <= b, "{pattern:?}: {heavy:?}");
            assert!((b / heavy.service_time_ns - 6.25).abs() < 1e-9);
            s.bench.alg = "drr".into();
            let d = run(&s).unwrap();
            assert!(
                d.classes[0].t_wfi_service_times > 10.0,
                "{pattern:?}: {:?}",
                d.classes[0]
            );
            assert!(d.classes[0].t_wfi_service_times > 3.0 * heavy.t_wfi_service_times);
        }
    }

    #[test]
    fn a_transmit_queue_delays_but_loses_nothing() {
        let mut s = spec("qfq", "4:1500:2,1:200:20", 5_000);
        s.txq = 4;
        let r = run(&s).unwrap();
        assert_eq!((r.packets, r.drops, r.txq), (5_000, 0, 4));
        let sent: u64 = r.classes.iter().map(|c| c.packets).sum();
        assert_eq!(sent, 5_000);
        for c in &r.classes {
            let b = qfq_t_wfi_bound(&BoundInputs::with_txq(c.phi, c.len, 1500, 4, 1e9));
            assert!(c.t_wfi_ns <= b, "{c:?} vs {b}");
        }
    }

    #[test]
    fn same_seed_same_measurement() {
        let mut s = spec("wf2q+", "2::3,1::5", 3_000);
        s.bench.pattern = Kind::Bursty;
        let mut a = run(&s).unwrap();
        let mut b = run(&s).unwrap();
        a.wall_s = 0.0;
        b.wall_s = 0.0;
        assert_eq!(a, b);
        s.bench.seed = 2;
        let mut c = run(&s).unwrap();
        c.wall_s = 0.0;
        assert_ne!(a, c);
    }

    #[test]
    fn bad_options_name_themselves() {
        let cases: [(WfiSpec, &str); 5] = [
            (spec("none", "1::1", 10), "--alg 'none'"),
            (spec("qfq", "1::1", 0), "-n '0'"),
            (
                WfiSpec {
                    fill_rate: 1.0,
                    ..spec("qfq", "1::1", 10)
                },
                "--fill-rate '1'",
            ),
            (
                WfiSpec {
                    switch_on_empty: 1.5,
                    ..spec("qfq", "1::1", 10)
                },
                "--switch-on-empty '1.5'",
            ),
            (spec("nosuch", "1::1", 10), "'nosuch'"),
        ];
        for (s, want) in cases {
            let e = run(&s).unwrap_err();
            assert!(e.is_usage(), "{e}");
            assert!(e.to_string().contains(want), "{e} lacks {want}");
        }
    }
}
