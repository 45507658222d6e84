//! Shared code of the guarantee tests (`guarantees.rs`, `kps.rs`, `plus.rs`, `qfq.rs`):
//! the flows of a run, running a registered algorithm on the exact reference link and
//! measuring every flow, the random workload, a fixed heavy-behind-light scenario and the
//! collection of bound violations.
//!
//! Each test binary compiles this module on its own, so an item that only some of them
//! use carries `#[allow(dead_code)]` (not a module-wide allow: an item no test uses any
//! more still warns in every binary).

use proptest::prelude::*;
use pspat_sched::reference::link::run_on_link_with_queue;
use pspat_sched::reference::trace::{Arrival, Trace};
use pspat_sched::reference::wfi::{measure, FlowService};
use pspat_sched::{registry, Desc, FlowParams, Params, Scheduler};
use std::fmt;

/// Rate of the reference link, bit/s (8 ns per byte).
pub const RATE_BPS: f64 = 1e9;

/// Room of the schedulers built by [`run_measured`], packets queued at once over all flows,
/// and the packet limit of each of their flows. No workload here queues that many, so
/// neither limit drops anything: [`run_measured`] checks that every packet is sent.
const ROOM_PKTS: u32 = 4096;

/// One flow of a run: its weight and its declared maximum packet length, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    pub weight: u32,
    pub max_len: u32,
}

impl FlowSpec {
    pub const fn new(weight: u32, max_len: u32) -> Self {
        Self { weight, max_len }
    }
}

/// The packet of `len` bytes arriving on flow `flow` at `time_ns`.
pub const fn arrival(time_ns: u64, flow: usize, len: u32) -> Arrival {
    Arrival { time_ns, flow, len }
}

/// Runs `arrivals` through the registered algorithm `alg` built with `params`, one flow per
/// spec (in order: arrival `flow` indexes `flows`), on the reference link at [`RATE_BPS`]
/// with a transmit queue of `txq` packets (0: the scheduler is asked exactly when the wire
/// is idle), and measures every flow's service.
///
/// # Panics
///
/// If the algorithm or a flow cannot be built, or if a packet is dropped or left queued:
/// every check here is about packets that were all sent.
pub fn run_measured(
    alg: &str,
    params: &Params,
    flows: &[FlowSpec],
    arrivals: &[Arrival],
    txq: usize,
) -> (Trace, Vec<FlowService>) {
    let mut s = registry::build::<Desc>(alg, params, ROOM_PKTS).unwrap();
    let ids: Vec<_> = flows
        .iter()
        .map(|f| {
            s.add_flow(
                FlowParams::weighted(f.weight)
                    .with_max_len(f.max_len)
                    .with_limit_pkts(ROOM_PKTS),
            )
            .unwrap()
        })
        .collect();
    let trace = run_on_link_with_queue(&mut s, &ids, arrivals, RATE_BPS, txq);
    assert!(s.is_empty(), "{alg}: packets left queued");
    assert!(trace.drops.is_empty(), "{alg}: drops {:?}", trace.drops);
    assert_eq!(trace.tx.len(), arrivals.len(), "{alg}: packets not sent");
    let weights: Vec<u32> = flows.iter().map(|f| f.weight).collect();
    let m = measure(&trace, arrivals, &weights);
    (trace, m)
}

/// A flow of weight drawn from `weight` and maximum length drawn from `max_len`.
#[allow(dead_code)] // plus.rs draws aggregate keys instead
pub fn flow_spec(
    weight: impl Strategy<Value = u32>,
    max_len: impl Strategy<Value = u32>,
) -> impl Strategy<Value = FlowSpec> {
    (weight, max_len).prop_map(|(weight, max_len)| FlowSpec { weight, max_len })
}

/// Flows drawn from `flows` and 50..400 steps of arrivals: each step waits 0 (a burst,
/// 3 times in 4) or 1..30_000 ns (up to ~2.5 maximum-size packet times at [`RATE_BPS`]),
/// picks any flow, and sends `burst` packets (drawn for the step) of one length: the flow's
/// maximum (1 time in 3) or 1..=maximum.
///
/// Use `Just(1)` as `burst` for one packet a step.
pub fn workload<B>(
    flows: impl Strategy<Value = Vec<FlowSpec>>,
    burst: B,
) -> impl Strategy<Value = (Vec<FlowSpec>, Vec<Arrival>)>
where
    B: Strategy<Value = usize> + Clone,
{
    flows.prop_flat_map(move |flows| {
        let step = (
            prop_oneof![3 => Just(0u64), 1 => 1u64..30_000],
            any::<prop::sample::Index>(),
            prop_oneof![1 => Just(None), 2 => any::<u32>().prop_map(Some)],
            burst.clone(),
        );
        (Just(flows), prop::collection::vec(step, 50..400)).prop_map(|(flows, steps)| {
            let mut t = 0;
            let mut arrivals = Vec::with_capacity(steps.len());
            for (gap, who, len, burst) in steps {
                t += gap;
                let flow = who.index(flows.len());
                let max = flows[flow].max_len;
                let len = len.map_or(max, |x| 1 + x % max);
                arrivals.extend((0..burst).map(|_| arrival(t, flow, len)));
            }
            (flows, arrivals)
        })
    })
}

/// Flow 0 of weight `heavy_weight` and `light` flows 1..=`light` of weight 1, every flow
/// with 1500-byte packets, all arriving at t = 0: first `rounds` rounds of one packet on
/// each light flow (flow 1 to `light`, round after round), then `heavy_packets` on flow 0.
/// A round robin serves the light flows' round before the heavy flow's first packet.
#[allow(dead_code)] // not plus.rs
pub fn heavy_behind_light(
    heavy_weight: u32,
    light: usize,
    rounds: usize,
    heavy_packets: usize,
) -> (Vec<FlowSpec>, Vec<Arrival>) {
    let mut flows = vec![FlowSpec::new(heavy_weight, 1500)];
    flows.extend((0..light).map(|_| FlowSpec::new(1, 1500)));
    let mut arrivals: Vec<Arrival> = (0..rounds)
        .flat_map(|_| (1..=light).map(|flow| arrival(0, flow, 1500)))
        .collect();
    arrivals.extend((0..heavy_packets).map(|_| arrival(0, 0, 1500)));
    (flows, arrivals)
}

/// The largest packet sent by any flow, bytes (0 if none was).
#[allow(dead_code)] // guarantees.rs and kps.rs
pub fn largest_packet_sent(m: &[FlowService]) -> u32 {
    m.iter().map(|f| f.max_len).max().unwrap_or(0)
}

/// The service metric a bound is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Bit-worst-case fair index, bytes.
    BWfiBytes,
    /// Time-worst-case fair index, ns.
    TWfiNs,
}

/// The bounds one flow is held to; `None` leaves a metric unchecked.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub b_wfi_bytes: Option<f64>,
    pub t_wfi_ns: Option<f64>,
}

impl Bounds {
    /// Both bounds.
    #[allow(dead_code)] // guarantees.rs and kps.rs
    pub fn both(b_wfi_bytes: f64, t_wfi_ns: f64) -> Self {
        Self {
            b_wfi_bytes: Some(b_wfi_bytes),
            t_wfi_ns: Some(t_wfi_ns),
        }
    }

    /// A T-WFI bound only.
    #[allow(dead_code)] // plus.rs and qfq.rs
    pub fn t_wfi(t_wfi_ns: f64) -> Self {
        Self {
            b_wfi_bytes: None,
            t_wfi_ns: Some(t_wfi_ns),
        }
    }
}

/// A flow over one of its bounds.
#[derive(Clone, Copy)]
pub struct Violation {
    pub flow: usize,
    pub metric: Metric,
    pub measured: f64,
    pub bound: f64,
}

impl fmt::Debug for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "flow {} {:?} {} > bound {}",
            self.flow, self.metric, self.measured, self.bound
        )
    }
}

/// Every bound exceeded by a flow that sent packets, flow by flow (B-WFI before T-WFI):
/// `bounds(i, m[i])` gives flow `i`'s bounds, and a measure exceeds its bound `b` when it
/// is more than `b + rel_slack * b` (the slack is for floating point only).
pub fn violations(
    m: &[FlowService],
    rel_slack: f64,
    mut bounds: impl FnMut(usize, &FlowService) -> Bounds,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for (flow, f) in m.iter().enumerate().filter(|(_, f)| f.packets > 0) {
        let b = bounds(flow, f);
        let checks = [
            (Metric::BWfiBytes, f.b_wfi_bytes, b.b_wfi_bytes),
            (Metric::TWfiNs, f.t_wfi_ns, b.t_wfi_ns),
        ];
        for (metric, measured, bound) in checks {
            if let Some(bound) = bound.filter(|&b| measured > b + rel_slack * b) {
                out.push(Violation {
                    flow,
                    metric,
                    measured,
                    bound,
                });
            }
        }
    }
    out
}
