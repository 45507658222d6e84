//! The discrete-event loop: sources feed the scheduler, the virtual link drains it.
//!
//! # Model
//!
//! The link is [`VirtualLink`] (QFQ+ paper, appendix A.4): a wire of `rate_bps` behind a
//! FIFO transmit queue of `txq` packets that the dequeue unit keeps full from the
//! scheduler. Events are the sources' arrivals (integer nanoseconds, from a min-heap over
//! the flows) and the wire's completions (exact `f64`). At equal times the completion goes
//! first, then the arrivals, then the dequeue unit (the link's own order).
//!
//! Feedback from the link to the sources:
//!
//! - a *backlogged* flow gets a new packet, at the next whole nanosecond, each time one of
//!   its packets is handed to the transmit queue (so it keeps `depth` packets queued, give
//!   or take the one in transit; `depth >= 2` keeps it backlogged without a gap);
//! - a *request-response* flow's next response starts `think_us` after the last packet
//!   of the previous one was delivered (left the wire, plus the link's `delay`) or dropped.
//!
//! Generation stops at `duration_ms` or after `packets` arrivals (lost ones included); the
//! link then sends what is queued. The run keeps every packet's record (about 90 bytes
//! each) for the service metrics of [`pspat_sched::reference::wfi::measure`], which
//! compares the run with the exact fluid GPS system; the delay and burst metrics are
//! collected as packets start on the wire (their finish time is known then).
//!
//! The scheduler is built through [`registry::visit`], so this loop is compiled once per
//! algorithm with the scheduler's concrete type.
//!
//! # Trees of classes
//!
//! A scenario with `[[classes]]` runs a [`TreeSched`] instead, built through
//! [`pspat_sched::tree::visit`] (so the loop is compiled once per kind of leaves as well),
//! each flow in the leaf its group names. The tree is told the time of each arrival and of
//! each decision (the link's time rounded down to whole nanoseconds), and when every class
//! that has packets is over its ceil it says until when to wait: the dequeue unit asks
//! again then ([`VirtualLink::next_wake`]), a third kind of event beside the arrivals and
//! the completions. [`crate::classes`] measures each class.
//!
//! # Link emulation (dummynet's pipe `plr` and `delay`)
//!
//! As in FreeBSD's `ip_dn_io.c`, around the scheduler and its wire:
//!
//! - `plr`: each arrival is lost with that probability before it reaches its queue (before
//!   the queue-limit check). A lost packet never enters the scheduler or the link's trace,
//!   so the fluid reference never sees it either; it counts as an arrival and as a drop of
//!   reason `plr`. The draws come from the link's own generator, one per arrival and none
//!   when `plr` is 0, so the sources' traffic is the same with or without loss and a run
//!   without loss is the run of a scenario without the key. A backlogged flow replaces a
//!   lost packet one nanosecond later (it keeps `depth` packets queued; with `plr` 1 it
//!   offers a packet a nanosecond, so bound such a run by `packets` or a short time).
//! - `delay`: a FIFO delay line after the wire. A packet released at `finish_ns` (its last
//!   bit left) is delivered at `finish_ns + delay`. Every packet is delayed by the same
//!   amount, so the line is an offset on delivery times, not a queue: nothing is stored
//!   for it.
//!
//! Which time each metric uses:
//!
//! - delivery times (release + `delay`): the packet delays and their CDF plot, burst
//!   completion times, and a request-response flow's think timer (the client sees the
//!   response when it is delivered); these are what a user of the emulated link sees, and
//!   subtracting `delay` gives the scheduler's and wire's part alone;
//! - release times (the wire's, the link's trace): T-WFI, B-WFI, the GPS delay and lag and
//!   the service plot, which compare the scheduler with the exact fluid system and are
//!   about it, not the delay line; throughput, utilization and the simulated span (a
//!   constant offset moves every delivery alike, so the delivered rate is the released
//!   one).
//!
//! # Framing (a pipe's `overhead`, `mpu`, `linklayer`)
//!
//! With a framing ([`Scenario::link_framing`]) the wire takes `8 wire_len(len) / rate_bps`
//! for a packet of `len` bytes, through [`pspat_sched::framing::Framing::wire_len`], the
//! function the engine's links use. The scheduler still shares `len` bytes, and the
//! throughputs, shares and byte counts are of `len` bytes; the report adds the bytes the
//! wire charged (`wire_bytes`). The service metrics (T-WFI, B-WFI, the GPS delay and lag,
//! the service plot) compare the wire with a fluid system sharing the wire's rate, so they
//! count the wire's bytes: each packet counts `wire_len(len)` there, in the fluid system as
//! on the wire.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use pspat_harness::rng::WyRand;
use pspat_sched::framing::Framing;
use pspat_sched::reference::gps::FluidGps;
use pspat_sched::reference::link::{LinkScheduler, VirtualLink};
use pspat_sched::reference::trace::{Arrival, Trace};
use pspat_sched::reference::wfi::{measure, FlowService};
use pspat_sched::registry::{self, SchedulerVisitor};
use pspat_sched::tree::leaves::Leaves;
use pspat_sched::tree::{ClassStats, TreeSched, TreeVisitor};
use pspat_sched::{Desc, Scheduler};

use crate::classes;
use crate::error::SimError;
use crate::metrics::{
    jain, BurstRow, FlowReport, GroupReport, Pcts, PlotData, Series, SimReport, PLR,
};
use crate::scenario::{parse_alg, Scenario};
use crate::traffic::{unit, ArrivalSpec, Next, Source};

/// A burst whose packets have not all left.
#[derive(Clone, Copy, Debug)]
struct OpenBurst {
    start_ns: f64,
    len: u32,
    /// Packets not yet transmitted or dropped (including those not yet arrived).
    left: u32,
    /// Latest delivery of its packets so far.
    last_ns: f64,
}

/// The link's emulation of dummynet's pipe `plr` and `delay` (see the module doc).
struct Emulation {
    /// Probability that an arrival is lost before its queue, `0..=1`.
    plr: f64,
    /// The loss draws' own generator, apart from the sources' (see [`Emulation::new`]).
    rng: WyRand,
    /// The delay line after the wire, ns.
    delay_ns: f64,
}

impl Emulation {
    fn new(sc: &Scenario) -> Self {
        Self {
            plr: sc.plr,
            // Seeded with the first number of a generator seeded with the scenario's seed,
            // not with the seed itself: wyrand streams whose seeds differ in a few low bits
            // are correlated over tens of thousands of draws (seeds 1 to 7 all lost 29.7%
            // of 38k packets at plr 0.3), and users compare runs of seeds 1, 2, 3...
            rng: WyRand::new(WyRand::new(sc.seed).next_u64()),
            delay_ns: sc.delay.as_nanos() as f64,
        }
    }

    /// Whether the next arrival is lost. `unit` is in `[0, 1)`: `plr` 1 loses every packet,
    /// and `plr` 0 draws nothing.
    fn lost(&mut self) -> bool {
        self.plr > 0.0 && unit(&mut self.rng) < self.plr
    }
}

/// Per-flow accumulators.
#[derive(Clone, Debug, Default)]
struct Acc {
    arrived: u64,
    packets: u64,
    bytes: u64,
    /// Every drop, `plr` losses included.
    drops: u64,
    /// The `plr` losses alone.
    drops_plr: u64,
    /// Arrival to delivery, ns.
    delays: Vec<f32>,
    /// (burst length, completion ns)
    bursts: Vec<(u32, f32)>,
    open: VecDeque<OpenBurst>,
}

/// Everything a run keeps besides the scheduler.
struct State {
    sources: Vec<Source>,
    backlogged: Vec<bool>,
    acc: Vec<Acc>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    /// Exact next arrival time of each flow's source (the heap holds it rounded up).
    next_ns: Vec<f64>,
    generating: bool,
    /// When the traffic stopped: the end of `duration_ms`, or the arrival `packets` did
    /// not let in (`NaN` while it goes on).
    stop_ns: f64,
    arrivals: u64,
    max_packets: u64,
    end_ns: f64,
}

/// Rounds a time up to whole nanoseconds for the heap (arrivals are integer times).
fn ceil_ns(t: f64) -> u64 {
    t.ceil().max(0.0) as u64
}

impl State {
    fn schedule(&mut self, flow: u32, t: f64) {
        self.next_ns[flow as usize] = t;
        self.heap.push(Reverse((ceil_ns(t), flow)));
    }

    /// Completes the front bursts of `flow` that have nothing left, at `now`.
    fn close_bursts(&mut self, flow: usize, now: f64) {
        while let Some(b) = self.acc[flow].open.front().copied() {
            if b.left > 0 {
                break;
            }
            self.acc[flow].open.pop_front();
            let done = b.last_ns.max(now);
            self.acc[flow]
                .bursts
                .push((b.len, (done - b.start_ns) as f32));
            if self.generating {
                if let Some(t) = self.sources[flow].think(done) {
                    self.schedule(flow as u32, t);
                }
            }
        }
    }
}

/// The raw outcome of a run, before reduction.
pub(crate) struct Outcome {
    acc: Vec<Acc>,
    pub(crate) arrivals: Vec<Arrival>,
    pub(crate) trace: Trace,
    /// When the traffic stopped (see [`State::stop_ns`]); the last arrival if it ran out.
    pub(crate) stop_ns: f64,
    /// A tree's counters of each class at the end (none for a flat scheduler).
    pub(crate) classes: Vec<ClassStats>,
}

/// Runs a flat scheduler: every flow of the scenario is one of its flows.
struct Flat<'a> {
    sc: &'a Scenario,
}

impl SchedulerVisitor<Desc> for Flat<'_> {
    type Output = Result<Outcome, SimError>;

    fn visit<S: Scheduler<Desc> + 'static>(self, mut sched: S) -> Self::Output {
        let mut ids = Vec::with_capacity(self.sc.flow_count());
        for g in &self.sc.flows {
            let params = Scenario::flow_params(g);
            for _ in 0..g.count {
                ids.push(sched.add_flow(params)?);
            }
        }
        drive(self.sc, &mut sched, ids)
    }
}

/// Runs a tree: the flows of a group are flows of its leaf, `leaf_of[group]`.
struct Tree<'a> {
    sc: &'a Scenario,
    leaf_of: &'a [usize],
}

impl TreeVisitor<Desc> for Tree<'_> {
    type Output = Result<Outcome, SimError>;

    fn visit<L: Leaves<Desc> + 'static>(self, mut tree: TreeSched<Desc, L>) -> Self::Output {
        let mut ids = Vec::with_capacity(self.sc.flow_count());
        for (g, &leaf) in self.sc.flows.iter().zip(self.leaf_of) {
            let params = Scenario::flow_params(g);
            for _ in 0..g.count {
                let f = tree
                    .add_flow(leaf, params)
                    .map_err(|e| SimError::Scenario(format!("group '{}': {e}", g.name)))?;
                ids.push(f);
            }
        }
        let mut out = drive(self.sc, &mut tree, ids)?;
        out.classes = (0..self.sc.classes.len())
            .map(|c| tree.class_stats(c).expect("a class of the tree"))
            .collect();
        Ok(out)
    }
}

/// The event loop over `sched`, whose flow `ids[k]` is the scenario's flow `k`.
fn drive<S: LinkScheduler + ?Sized>(
    sc: &Scenario,
    sched: &mut S,
    ids: Vec<S::Flow>,
) -> Result<Outcome, SimError> {
    let n = sc.flow_count();
    let mut sources = Vec::with_capacity(n);
    for g in &sc.flows {
        for _ in 0..g.count {
            let flow = sources.len() as u64;
            // A seed per flow, so that a flow's traffic does not depend on the others.
            let seed = sc.seed ^ (flow + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            sources.push(Source::new(g.arrival, g.size.clone(), seed));
        }
    }
    let mut link =
        VirtualLink::new(ids, sc.rate_bps, sc.txq as usize).with_framing(sc.link_framing()?);
    let mut emu = Emulation::new(sc);
    let mut st = State {
        backlogged: sources
            .iter()
            .map(|s| matches!(s.spec(), ArrivalSpec::Backlogged { .. }))
            .collect(),
        sources,
        acc: vec![Acc::default(); n],
        heap: BinaryHeap::with_capacity(n),
        next_ns: vec![0.0; n],
        generating: true,
        stop_ns: f64::NAN,
        arrivals: 0,
        max_packets: sc.packets.unwrap_or(u64::MAX),
        end_ns: sc.duration_ms.map_or(f64::INFINITY, |d| d * 1e6),
    };
    for f in 0..n {
        if let Some(t) = st.sources[f].first_ns() {
            st.schedule(f as u32, t);
        }
        for _ in 0..st.sources[f].initial_depth() {
            st.heap.push(Reverse((0, f as u32)));
        }
    }
    let mut cursor = 0usize; // first transmission not yet accounted
    loop {
        let now = link.now_ns();
        // Arrivals due now.
        while let Some(&Reverse((t, f))) = st.heap.peek() {
            if t as f64 > now {
                break;
            }
            st.heap.pop();
            let fi = f as usize;
            if !st.generating {
                continue;
            }
            let exact = if st.backlogged[fi] {
                t as f64
            } else {
                st.next_ns[fi]
            };
            if exact >= st.end_ns || st.arrivals >= st.max_packets {
                st.generating = false;
                st.stop_ns = exact.min(st.end_ns);
                continue;
            }
            let (emit, next) = st.sources[fi].emit(exact);
            st.arrivals += 1;
            let acc = &mut st.acc[fi];
            acc.arrived += 1;
            if let Some(len) = emit.opens_burst {
                acc.open.push_back(OpenBurst {
                    start_ns: t as f64,
                    len,
                    left: len,
                    last_ns: t as f64,
                });
            }
            // plr first: a lost packet never reaches the queue or its limit.
            let lost = emu.lost();
            if lost || link.enqueue(sched, t, fi, emit.len).is_err() {
                acc.drops += 1;
                acc.drops_plr += u64::from(lost);
                if let Some(b) = acc.open.back_mut() {
                    b.left = b.left.saturating_sub(1);
                }
                st.close_bursts(fi, link.now_ns());
                if st.backlogged[fi] {
                    if lost {
                        // The source replaces it at once (the next nanosecond, so that
                        // time moves even when everything is lost).
                        st.heap.push(Reverse((t + 1, f)));
                    }
                    // A refused refill: try again when the link next takes a packet.
                    continue;
                }
            }
            if let Next::At(t_next) = next {
                st.schedule(f, t_next.max(exact));
            }
        }
        // The dequeue unit; backlogged flows replace what was taken.
        for h in link.fill(sched) {
            if st.backlogged[h.flow] && st.generating {
                st.heap.push(Reverse((ceil_ns(now), h.flow as u32)));
            }
        }
        // Transmissions started since the last pass: their release (finish) times, and
        // so their delivery times, are known.
        let tx = &link.trace().tx;
        while cursor < tx.len() {
            let r = tx[cursor];
            cursor += 1;
            let delivered = r.finish_ns + emu.delay_ns;
            let acc = &mut st.acc[r.flow];
            acc.packets += 1;
            acc.bytes += u64::from(r.len);
            acc.delays.push((delivered - r.arrival_ns) as f32);
            if let Some(b) = acc.open.front_mut() {
                b.left -= 1;
                b.last_ns = b.last_ns.max(delivered);
                if b.left == 0 {
                    st.close_bursts(r.flow, delivered);
                }
            }
        }
        // The next event: an arrival, a completion, or the time a tree said to wait for.
        let t_arrival = st.heap.peek().map(|&Reverse((t, _))| t as f64);
        let Some(t) = link.next_event_with(t_arrival) else {
            break;
        };
        link.advance_to(t);
    }
    assert!(
        sched.is_empty_now(),
        "the scheduler kept packets on an idle link"
    );
    let (arrivals, trace) = link.finish();
    let stop_ns = if st.stop_ns.is_nan() {
        arrivals.last().map_or(0.0, |a| a.time_ns as f64)
    } else {
        st.stop_ns
    };
    Ok(Outcome {
        acc: st.acc,
        arrivals,
        trace,
        stop_ns,
        classes: Vec::new(),
    })
}

/// Runs a scenario and measures it.
pub fn run(sc: &Scenario) -> Result<SimReport, SimError> {
    let wall = Instant::now();
    let (alg, params) = parse_alg(&sc.alg)?;
    let tree = sc.tree()?;
    let out = match &tree {
        Some((spec, leaf_of)) => pspat_sched::tree::visit(spec, Tree { sc, leaf_of })
            .map_err(|e| SimError::Scenario(format!("classes: {e}")))??,
        None => registry::visit::<Desc, _>(&alg, &params, sc.sched_capacity(), Flat { sc })??,
    };
    let weights: Vec<u32> = sc
        .flows
        .iter()
        .flat_map(|g| std::iter::repeat(g.weight).take(g.count as usize))
        .collect();
    let framing = sc.link_framing()?;
    // The service metrics count the wire's bytes (see the module docs).
    let wired = (!framing.is_plain()).then(|| in_wire_bytes(&framing, &out.arrivals, &out.trace));
    let (arrivals, trace) = match &wired {
        Some((a, t)) => (a.as_slice(), t),
        None => (out.arrivals.as_slice(), &out.trace),
    };
    // A tree's flows are not measured against flat GPS: its classes are, against their
    // own references (`crate::classes`).
    let service = if sc.wfi && tree.is_none() {
        Some(measure(trace, arrivals, &weights))
    } else {
        None
    };
    let series = match &tree {
        None => service_series(sc, arrivals, trace, &weights),
        Some(_) => Vec::new(),
    };
    let plot = plot_data(sc, &out, series);
    let wire_bytes = out.trace.tx.iter().map(|r| framing.wire_len(r.len)).sum();
    drop(wired);
    let measured = match &tree {
        Some((spec, leaf_of)) => Some((
            classes::flow_shares(sc, spec, leaf_of),
            classes::measure(sc, spec, leaf_of, &out)?,
        )),
        None => None,
    };
    let shares = measured.as_ref().map(|m| m.0.as_slice());
    let mut report = reduce(sc, out, service.as_deref(), &weights, shares);
    if let Some((_, (summary, classes))) = measured {
        report.tree = Some(summary);
        report.classes = classes;
    }
    report.overhead = framing.overhead;
    report.mpu = framing.mpu;
    report.linklayer = framing.linklayer.name().to_owned();
    report.wire_bytes = wire_bytes;
    report.alg = alg;
    report.params = params
        .pairs()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    report.plot = plot;
    report.wall_s = wall.elapsed().as_secs_f64();
    Ok(report)
}

/// The report of a run: `service` is the flows' against GPS (flat runs), `shares` a
/// tree's flows' shares of the link (see [`classes::flow_shares`]; `None`: flat, the
/// flows' weights over their sum).
fn reduce(
    sc: &Scenario,
    mut out: Outcome,
    service: Option<&[FlowService]>,
    weights: &[u32],
    shares: Option<&[f64]>,
) -> SimReport {
    let total_w: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    let span = out.trace.tx.last().map_or(0.0, |r| r.finish_ns);
    let busy: f64 = out.trace.tx.iter().map(|r| r.finish_ns - r.start_ns).sum();
    let total_bytes: u64 = out.acc.iter().map(|a| a.bytes).sum();
    // The link's trace has the packets that reached the scheduler; the lost ones only the
    // sources' accumulators.
    let lost: u64 = out.acc.iter().map(|a| a.drops_plr).sum();
    let mut drops_by_reason = std::collections::BTreeMap::new();
    for d in &out.trace.drops {
        *drops_by_reason
            .entry(d.reason.name().to_owned())
            .or_insert(0) += 1;
    }
    if lost > 0 {
        drops_by_reason.insert(PLR.to_owned(), lost);
    }
    let thr = |bytes: u64| {
        if span > 0.0 {
            bytes as f64 * 8e9 / span
        } else {
            0.0
        }
    };
    let share = |bytes: u64| {
        if total_bytes > 0 {
            bytes as f64 / total_bytes as f64
        } else {
            0.0
        }
    };
    let mut per_flow = Vec::with_capacity(weights.len());
    let mut groups = Vec::with_capacity(sc.flows.len());
    let mut flow = 0usize;
    let mut per_weight_all = Vec::with_capacity(weights.len());
    let mut per_weight_backlogged = Vec::new();
    let mut all_delays: Vec<f32> = Vec::new();
    for g in &sc.flows {
        let flat_phi = f64::from(g.weight) / total_w;
        let mut gr = GroupReport {
            name: g.name.clone(),
            flows: g.count,
            weight: g.weight,
            ..GroupReport::default()
        };
        let mut pooled_delay: Vec<f32> = Vec::new();
        let mut pooled_burst: Vec<f32> = Vec::new();
        let mut by_len: std::collections::BTreeMap<u32, Vec<f32>> = Default::default();
        let mut per_weight = Vec::with_capacity(g.count as usize);
        let mut gbytes = 0u64;
        let mut tree_phi = 0.0;
        for _ in 0..g.count {
            let phi_each = shares.map_or(flat_phi, |s| s[flow]);
            tree_phi += phi_each;
            let a = &mut out.acc[flow];
            let mut fr = FlowReport {
                flow: flow as u32,
                group: g.name.clone(),
                weight: g.weight,
                phi: phi_each,
                arrived: a.arrived,
                packets: a.packets,
                bytes: a.bytes,
                drops: a.drops,
                drops_plr: a.drops_plr,
                throughput_bps: thr(a.bytes),
                share: share(a.bytes),
                share_over_phi: share(a.bytes) / phi_each,
                delay: Pcts::of(&mut a.delays),
                ..FlowReport::default()
            };
            let mut b: Vec<f32> = a.bursts.iter().map(|x| x.1).collect();
            fr.bursts = Pcts::of(&mut b);
            for &(len, c) in &a.bursts {
                by_len.entry(len).or_default().push(c);
            }
            pooled_burst.extend(b);
            pooled_delay.append(&mut a.delays);
            a.bursts = Vec::new();
            if let Some(s) = service {
                let s = &s[flow];
                fr.t_wfi_ns = Some(s.t_wfi_ns);
                fr.t_wfi_service_times = Some(s.t_wfi_in_service_times());
                fr.b_wfi_bytes = Some(s.b_wfi_bytes);
                fr.gps_delay_ns = Some(s.gps_delay_ns);
                fr.gps_lag_bytes = Some(s.gps_lag_bytes);
                if s.packets > 0 && gr.t_wfi_ns.map_or(true, |w| s.t_wfi_ns > w) {
                    gr.t_wfi_ns = Some(s.t_wfi_ns);
                    gr.t_wfi_service_times = Some(s.t_wfi_in_service_times());
                    gr.t_wfi_flow = Some(flow as u32);
                }
                gr.b_wfi_bytes = Some(gr.b_wfi_bytes.unwrap_or(0.0).max(s.b_wfi_bytes));
                if s.packets > 0 {
                    gr.gps_delay_ns = Some(
                        gr.gps_delay_ns
                            .map_or(s.gps_delay_ns, |d| d.max(s.gps_delay_ns)),
                    );
                }
            }
            gr.arrived += fr.arrived;
            gr.packets += fr.packets;
            gr.drops += fr.drops;
            gr.drops_plr += fr.drops_plr;
            gbytes += fr.bytes;
            // Throughput per unit of share: of weight in a flat run (the same up to a
            // factor), of the tree's share in a tree.
            let x = fr.bytes as f64 / shares.map_or(f64::from(g.weight), |_| phi_each);
            per_weight.push(x);
            per_weight_all.push(x);
            if matches!(g.arrival, ArrivalSpec::Backlogged { .. }) {
                per_weight_backlogged.push(x);
            }
            per_flow.push(fr);
            flow += 1;
        }
        gr.phi = match shares {
            None => flat_phi * f64::from(g.count),
            Some(_) => tree_phi,
        };
        gr.throughput_bps = thr(gbytes);
        gr.share = share(gbytes);
        gr.share_over_phi = gr.share / gr.phi;
        gr.jain = jain(&per_weight);
        gr.delay = Pcts::of(&mut pooled_delay);
        all_delays.append(&mut pooled_delay);
        gr.bursts = Pcts::of(&mut pooled_burst);
        gr.burst_by_len = by_len
            .into_iter()
            .map(|(len, mut v)| BurstRow {
                len,
                completion: Pcts::of(&mut v),
            })
            .collect();
        groups.push(gr);
    }
    SimReport {
        name: sc.name.clone(),
        rate_bps: sc.rate_bps,
        txq: sc.txq,
        seed: sc.seed,
        flows: weights.len() as u64,
        delay_ns: u64::try_from(sc.delay.as_nanos()).unwrap_or(u64::MAX),
        plr: sc.plr,
        arrived: out.arrivals.len() as u64 + lost,
        packets: out.trace.tx.len() as u64,
        bytes: total_bytes,
        drops: out.trace.drops.len() as u64 + lost,
        drops_by_reason,
        delay: Pcts::of(&mut all_delays),
        duration_ns: span,
        utilization: if span > 0.0 { busy / span } else { 0.0 },
        jain_backlogged: if per_weight_backlogged.is_empty() {
            None
        } else {
            Some(jain(&per_weight_backlogged))
        },
        jain_all: jain(&per_weight_all),
        groups,
        per_flow,
        ..SimReport::default()
    }
}

/// `arrivals` and `trace` with every length replaced by what the wire charged for it
/// (`framing`), for the service metrics (see the module docs).
fn in_wire_bytes(framing: &Framing, arrivals: &[Arrival], trace: &Trace) -> (Vec<Arrival>, Trace) {
    let wire = |len: u32| u32::try_from(framing.wire_len(len)).unwrap_or(u32::MAX);
    let arrivals = arrivals
        .iter()
        .map(|a| Arrival {
            len: wire(a.len),
            ..*a
        })
        .collect();
    let mut trace = trace.clone();
    for r in &mut trace.tx {
        r.len = wire(r.len);
    }
    (arrivals, trace)
}

/// Cumulative service of the plotted flows against GPS, over the plot window, from the
/// run's `arrivals` and `trace`.
fn service_series(
    sc: &Scenario,
    arrivals: &[Arrival],
    trace: &Trace,
    weights: &[u32],
) -> Vec<Series> {
    let mut flows: Vec<usize> = sc.plot.flows.iter().map(|&f| f as usize).collect();
    if flows.is_empty() {
        let mut first = 0usize;
        for g in sc.flows.iter().take(4) {
            flows.push(first);
            first += g.count as usize;
        }
    }
    let window = sc.plot.window_ms.unwrap_or(2.0) * 1e6;
    let points = 400;
    let step = window / points as f64;
    let mut gps = FluidGps::new(weights, trace.rate_bps);
    let mut fed = 0usize;
    let dropped: std::collections::HashSet<usize> = trace.drops.iter().map(|d| d.seq).collect();
    let mut pkt: Vec<Series> = flows
        .iter()
        .map(|&f| Series::new(format!("flow {f} ({}) packet", group_of(sc, f)), Vec::new()))
        .collect();
    let mut fluid: Vec<Series> = flows
        .iter()
        .map(|&f| Series::new(format!("flow {f} GPS"), Vec::new()))
        .collect();
    let rate_bytes_ns = trace.rate_bps / 8e9;
    let mut k = 0usize; // first transmission not finished by t
    let mut done = vec![0u64; flows.len()];
    for i in 0..=points {
        let t = i as f64 * step;
        while let Some(a) = arrivals.get(fed) {
            if a.time_ns as f64 > t {
                break;
            }
            if !dropped.contains(&fed) {
                gps.arrive(a.time_ns as f64, a.flow, a.len);
            }
            fed += 1;
        }
        gps.advance_to(t);
        while let Some(r) = trace.tx.get(k) {
            if r.finish_ns > t {
                break;
            }
            if let Some(j) = flows.iter().position(|&f| f == r.flow) {
                done[j] += u64::from(r.len);
            }
            k += 1;
        }
        let in_flight = trace.tx.get(k).filter(|r| r.start_ns < t);
        for (j, &f) in flows.iter().enumerate() {
            let partial = in_flight
                .filter(|r| r.flow == f)
                .map_or(0.0, |r| (t - r.start_ns) * rate_bytes_ns);
            pkt[j].points.push((t / 1e6, done[j] as f64 + partial));
            fluid[j].points.push((t / 1e6, gps.service_bytes(f)));
        }
    }
    pkt.into_iter()
        .zip(fluid)
        .flat_map(|(a, b)| [a, b])
        .collect()
}

fn group_of(sc: &Scenario, flow: usize) -> &str {
    let mut first = 0usize;
    for g in &sc.flows {
        if flow < first + g.count as usize {
            return &g.name;
        }
        first += g.count as usize;
    }
    "?"
}

/// The plots' data: `service` (see [`service_series`]), and the delay and burst plots.
fn plot_data(sc: &Scenario, out: &Outcome, service: Vec<Series>) -> PlotData {
    let mut data = PlotData {
        service,
        ..PlotData::default()
    };
    let mut flow = 0usize;
    for g in &sc.flows {
        let range = flow..flow + g.count as usize;
        flow = range.end;
        let mut d: Vec<f32> = range
            .clone()
            .flat_map(|f| out.acc[f].delays.iter().copied())
            .collect();
        if !d.is_empty() {
            d.sort_unstable_by(f32::total_cmp);
            let pts = 200.min(d.len());
            let points = (1..=pts)
                .map(|i| {
                    let q = i as f64 / pts as f64;
                    (crate::metrics::quantile(&d, q) / 1e3, q)
                })
                .collect();
            data.delay_cdf.push(Series::new(g.name.clone(), points));
        }
        if g.arrival.is_bursty() {
            let mut by_len: std::collections::BTreeMap<u32, (f64, u64)> = Default::default();
            for f in range {
                for &(len, c) in &out.acc[f].bursts {
                    let e = by_len.entry(len).or_default();
                    e.0 += f64::from(c);
                    e.1 += 1;
                }
            }
            if !by_len.is_empty() {
                data.burst_latency.push(Series::new(
                    g.name.clone(),
                    by_len
                        .into_iter()
                        .map(|(l, (s, n))| (f64::from(l), s / n as f64 / 1e3))
                        .collect(),
                ));
            }
        }
    }
    data
}
