//! KPS's service guarantees measured on the exact reference link.
//!
//! The bound is the one derived in the header of `algorithms/kps.rs`: KPS is an instance of
//! the approximate WF2Q+ family of the QFQ+ paper (appendix A.3) with timestamp errors
//! `dS- < sigma_k`, `dS+ <= 2 sigma_k` (`sigma_k` the flow's stratum granularity, in bytes
//! per unit weight), so Theorems 4 and 5 (A.21, A.24) give, with `W` the sum of the weights
//! and `DW` the work-function gap (one maximum packet: the packet on the wire is charged at
//! dequeue, as in `tests/guarantees.rs` for WF2Q+):
//!
//! ```text
//! B-WFI_i <= phi_i DW + 3 phi_i sigma_k W + (1 - phi_i) L_i + L
//! T-WFI_i <= L_i / (phi_i R) + (3 sigma_k W + DW + L - L_i) / R
//! ```
//!
//! `L_i` and `L` are the largest packets actually sent (the proofs only use the lengths
//! of the packets served), `sigma_k` comes from the flow's declared maximum (that is what
//! the scheduler rounds with).

use proptest::prelude::*;
use pspat_sched::algorithms::kps::{granularity, stratum_of};
use pspat_sched::reference::link::run_on_link;
use pspat_sched::reference::trace::Arrival;
use pspat_sched::reference::wfi::{measure, FlowService};
use pspat_sched::util::stamp::FRAC_BITS;
use pspat_sched::{registry, Desc, FlowParams, Params, Scheduler};

const RATE_BPS: f64 = 1e9;

#[derive(Clone, Copy, Debug)]
struct FlowSpec {
    weight: u32,
    max_len: u32,
}

/// Runs `arrivals` through `alg`, one flow per spec, and measures every flow.
fn run(alg: &str, flows: &[FlowSpec], arrivals: &[Arrival]) -> Vec<FlowService> {
    let mut s = registry::build::<Desc>(alg, &Params::new(), 4096).unwrap();
    let ids: Vec<_> = flows
        .iter()
        .map(|f| {
            s.add_flow(
                FlowParams::weighted(f.weight)
                    .with_max_len(f.max_len)
                    .with_limit_pkts(1024),
            )
            .unwrap()
        })
        .collect();
    let trace = run_on_link(&mut s, &ids, arrivals, RATE_BPS);
    assert!(s.is_empty());
    assert!(trace.drops.is_empty(), "{:?}", trace.drops);
    assert_eq!(trace.tx.len(), arrivals.len());
    let weights: Vec<u32> = flows.iter().map(|f| f.weight).collect();
    measure(&trace, arrivals, &weights)
}

/// KPS's `(B-WFI bytes, T-WFI ns)` bounds for flow `f` of `flows` (module documentation).
fn kps_bounds(flows: &[FlowSpec], f: usize, m: &FlowService, max_all: u32) -> (f64, f64) {
    let w_sum: f64 = flows.iter().map(|x| f64::from(x.weight)).sum();
    let spec = flows[f];
    let sigma =
        granularity(stratum_of(spec.max_len, spec.weight)) as f64 / (1u64 << FRAC_BITS) as f64; // bytes per unit weight
    let ds = 3.0 * sigma * w_sum; // dS- + dS+, bytes (paper units)
    let (phi, li, l) = (m.phi, f64::from(m.max_len), f64::from(max_all));
    let dw = l;
    let b = phi * dw + phi * ds + (1.0 - phi) * li + l;
    let t = (li / phi + ds + dw + l - li) * 8e9 / RATE_BPS;
    (b, t)
}

/// `(flow, metric, measured, bound)` for every bound exceeded (1e-6 relative slack for
/// floating point only).
fn violations(flows: &[FlowSpec], m: &[FlowService]) -> Vec<(usize, &'static str, f64, f64)> {
    let max_all = m.iter().map(|f| f.max_len).max().unwrap_or(0);
    let mut out = Vec::new();
    for (i, f) in m.iter().enumerate().filter(|(_, f)| f.packets > 0) {
        let (b, t) = kps_bounds(flows, i, f, max_all);
        if f.b_wfi_bytes > b * (1.0 + 1e-6) {
            out.push((i, "B-WFI bytes", f.b_wfi_bytes, b));
        }
        if f.t_wfi_ns > t * (1.0 + 1e-6) {
            out.push((i, "T-WFI ns", f.t_wfi_ns, t));
        }
    }
    out
}

/// 2..12 flows, weights 1..=64 (several strata apart), largest packets 64..=1500.
fn flows() -> impl Strategy<Value = Vec<FlowSpec>> {
    prop::collection::vec(
        (
            prop_oneof![3 => 1u32..=8, 1 => 9u32..=64],
            prop_oneof![1 => Just(1500u32), 2 => 64u32..=1500],
        )
            .prop_map(|(weight, max_len)| FlowSpec { weight, max_len }),
        2..12,
    )
}

/// 50..400 arrivals, in bursts and with gaps up to ~2.5 maximum packets, on any flow,
/// lengths up to the flow's maximum (often exactly it).
fn workload() -> impl Strategy<Value = (Vec<FlowSpec>, Vec<Arrival>)> {
    flows().prop_flat_map(|flows| {
        let step = (
            prop_oneof![3 => Just(0u64), 1 => 1u64..30_000],
            any::<prop::sample::Index>(),
            prop_oneof![1 => Just(None), 2 => any::<u32>().prop_map(Some)],
        );
        (Just(flows), prop::collection::vec(step, 50..400)).prop_map(|(flows, steps)| {
            let mut t = 0;
            let arrivals = steps
                .into_iter()
                .map(|(gap, who, len)| {
                    t += gap;
                    let flow = who.index(flows.len());
                    let max = flows[flow].max_len;
                    Arrival {
                        time_ns: t,
                        flow,
                        len: len.map_or(max, |x| 1 + x % max),
                    }
                })
                .collect();
            (flows, arrivals)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn kps_meets_its_b_wfi_and_t_wfi_bounds((flows, arrivals) in workload()) {
        let m = run("kps", &flows, &arrivals);
        let v = violations(&flows, &m);
        prop_assert!(v.is_empty(), "violations (flow, metric, measured, bound): {:?}", v);
    }
}

/// Flow 0 of weight 100 and 99 flows of weight 1, 1500-byte packets, all at t = 0; the
/// light flows' packets are enqueued first.
fn heavy_and_many_light() -> (Vec<FlowSpec>, Vec<Arrival>) {
    let spec = |weight| FlowSpec {
        weight,
        max_len: 1500,
    };
    let mut flows = vec![spec(100)];
    flows.extend((0..99).map(|_| spec(1)));
    let a = |flow| Arrival {
        time_ns: 0,
        flow,
        len: 1500,
    };
    let mut arrivals: Vec<_> = (1..100).map(a).collect();
    arrivals.extend((0..50).map(|_| a(0)));
    (flows, arrivals)
}

#[test]
fn the_bound_check_catches_a_scheduler_that_exceeds_it() {
    // phi_0 = 100/199; 1500 bytes take 12 us. KPS's bound for flow 0: 1500 / 100 = 15 B/w
    // rounds up to sigma = 16, so 3 sigma W = 48 * 199 = 9552 bytes, plus L / phi = 2985
    // bytes, plus DW + L - L_i = 1500 bytes: 14 037 bytes, 112.296 us at 1 Gbit/s.
    let (flows, arrivals) = heavy_and_many_light();
    let max_all = 1500;
    let probe = FlowService {
        phi: 100.0 / 199.0,
        max_len: 1500,
        ..FlowService::default()
    };
    let (_, t_bound) = kps_bounds(&flows, 0, &probe, max_all);
    assert!((t_bound - 112_296.0).abs() < 1e-6, "{t_bound}");

    // DRR serves the 99 light packets (enqueued first) before the heavy flow's first one,
    // which completes at 100 * 12 us = 1200 us against an ideal 23.88 us: more than ten
    // times the bound. The check must say so.
    let drr = run("drr", &flows, &arrivals);
    assert!(
        drr[0].t_wfi_ns >= 1_200_000.0 - 23_880.0 - 1e-6,
        "{:?}",
        drr[0]
    );
    let v = violations(&flows, &drr);
    assert!(v.iter().any(|x| x.0 == 0 && x.1 == "T-WFI ns"), "{v:?}");

    // KPS on the same arrivals stays within it, for every flow.
    let kps = run("kps", &flows, &arrivals);
    assert!(
        violations(&flows, &kps).is_empty(),
        "{:?}",
        violations(&flows, &kps)
    );
    assert!(kps[0].t_wfi_ns < t_bound);
}

#[test]
fn kps_serves_heavy_flows_early_unlike_round_robin() {
    // Same arrivals: the heavy flow's packets leave interleaved with the light ones from
    // the start (weight 100 of 199: about every other packet), not after a round of 99.
    let (flows, arrivals) = heavy_and_many_light();
    let mut s = registry::build::<Desc>("kps", &Params::new(), 4096).unwrap();
    let ids: Vec<_> = flows
        .iter()
        .map(|f| {
            s.add_flow(FlowParams::weighted(f.weight).with_limit_pkts(1024))
                .unwrap()
        })
        .collect();
    let trace = run_on_link(&mut s, &ids, &arrivals, RATE_BPS);
    let heavy_in_first_20 = trace.tx[..20].iter().filter(|r| r.flow == 0).count();
    assert!(
        (8..=12).contains(&heavy_in_first_20),
        "heavy flow sent {heavy_in_first_20} of the first 20"
    );
}
