//! Service guarantees measured on the exact reference link.
//!
//! WF2Q+ must stay within the B-WFI and T-WFI bounds of the QFQ+ paper (Theorems 4 and 5)
//! on random arrival patterns, and the meter must be able to catch a scheduler that does
//! worse (DRR makes a heavy flow wait a whole round).
//!
//! Which bound: the crate's WF2Q+ charges a packet to its virtual time when it is dequeued,
//! i.e. when the link starts sending it, so a flow that becomes backlogged during a
//! transmission is stamped as if the packet on the wire had already left. In the paper's
//! terms the scheduler's work function runs ahead of the link's by up to one packet:
//! `Delta W = L` (A.5; section 4 likewise takes `Q` = transmit queue + one maximum packet).
//! The tighter `Delta W = 0` bounds ([`wf2qp_bounds`]) hold only for a model whose virtual
//! time follows the bits actually sent, which needs a clock inside the algorithm; the
//! crate's WF2Q+ exceeds them on rare patterns, as `four_packet_case_measured_by_hand`
//! shows on the smallest one (127 ns against 120 ns, within the 200 ns of `Delta W = L`).

use proptest::prelude::*;
use pspat_sched::reference::link::run_on_link;
use pspat_sched::reference::trace::{Arrival, Trace};
use pspat_sched::reference::wfi::{measure, wf2qp_bounds, wf2qp_bounds_with_delta_w, FlowService};
use pspat_sched::{registry, Desc, FlowParams, Params, Scheduler};

const RATE_BPS: f64 = 1e9;

/// A flow of the generated workload.
#[derive(Clone, Copy, Debug)]
struct FlowSpec {
    weight: u32,
    max_len: u32,
}

/// Runs `arrivals` through the algorithm `alg` with one flow per spec.
fn run(alg: &str, flows: &[FlowSpec], arrivals: &[Arrival]) -> (Trace, Vec<FlowService>) {
    let mut s = registry::build::<Desc>(alg, &Params::new(), 1024).unwrap();
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
    let weights: Vec<u32> = flows.iter().map(|f| f.weight).collect();
    let m = measure(&trace, arrivals, &weights);
    (trace, m)
}

/// Flows with their violations of the WF2Q+ bounds for a work-function gap of
/// `delta_w_packets` maximum-size packets: `(flow, what, measured, bound)`. `L_i` and `L`
/// are the largest packets actually sent (the scheduler never looks at the declared
/// maximum, so the theorems hold with the observed one, a tighter test). The only slack is
/// 1e-6 relative, for floating point.
fn violations(m: &[FlowService], delta_w_packets: u64) -> Vec<(usize, &'static str, f64, f64)> {
    let max_all = m.iter().map(|f| f.max_len).max().unwrap_or(0);
    let dw = delta_w_packets * u64::from(max_all);
    let mut out = Vec::new();
    for (i, f) in m.iter().enumerate().filter(|(_, f)| f.packets > 0) {
        let (b_bound, t_bound) = wf2qp_bounds_with_delta_w(f.phi, f.max_len, max_all, dw, RATE_BPS);
        if f.b_wfi_bytes > b_bound + 1e-6 * b_bound {
            out.push((i, "B-WFI bytes", f.b_wfi_bytes, b_bound));
        }
        if f.t_wfi_ns > t_bound + 1e-6 * t_bound {
            out.push((i, "T-WFI ns", f.t_wfi_ns, t_bound));
        }
    }
    out
}

/// 2..12 flows with weights 1..=20 and largest packets 64..=1500 bytes.
fn flows() -> impl Strategy<Value = Vec<FlowSpec>> {
    prop::collection::vec(
        (1u32..=20, 64u32..=1500).prop_map(|(weight, max_len)| FlowSpec { weight, max_len }),
        2..12,
    )
}

/// 50..400 arrivals in bursts (gap 0) and gaps up to ~2.5 maximum-size packet times, on
/// any flow, with lengths 1..=max_len of the flow, often exactly max_len.
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
                    let len = len.map_or(max, |x| 1 + x % max);
                    Arrival {
                        time_ns: t,
                        flow,
                        len,
                    }
                })
                .collect();
            (flows, arrivals)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Theorems 4 and 5 with the packet on the wire counted as served (`Delta W = L`).
    #[test]
    fn wf2qp_meets_its_b_wfi_and_t_wfi_bounds((flows, arrivals) in workload()) {
        let (trace, m) = run("wf2q+", &flows, &arrivals);
        prop_assert!(trace.drops.is_empty());
        prop_assert_eq!(trace.tx.len(), arrivals.len());
        let v = violations(&m, 1);
        prop_assert!(v.is_empty(), "violations (flow, metric, measured, bound): {:?}", v);
    }
}

/// Three flows of weight 1 (phi = 1/3), 8 ns per byte. Flow 2 sends 10 bytes at t = 0,
/// on the wire over [0, 80]; at t = 1 flow 1 gets two 1-byte packets and flow 0 one of
/// 10 bytes.
fn four_packets() -> (Vec<FlowSpec>, Vec<Arrival>) {
    let flows = vec![
        FlowSpec {
            weight: 1,
            max_len: 1500
        };
        3
    ];
    let a = |time_ns, flow, len| Arrival { time_ns, flow, len };
    (
        flows,
        vec![a(0, 2, 10), a(1, 1, 1), a(1, 1, 1), a(1, 0, 10)],
    )
}

#[test]
fn four_packet_case_measured_by_hand() {
    // WF2Q+ charges flow 2's packet at dequeue: V = 10/3 from t = 0. The flows becoming
    // backlogged at t = 1 get S = max(F, V) = 10/3: flow 1 F = 13/3, flow 0 F = 40/3.
    // At 80 flow 1 goes first ([80, 88], V = 11/3); its next packet has S = 13/3 > V, not
    // eligible, so flow 0 goes ([88, 168], V = 7), then flow 1 ([168, 176]).
    // T-WFI of flow 1's second packet: Q = 2 bytes at t_a = 1, ideal 1 + 2 * 8 * 3 = 49,
    // completion 176: 127 ns. Its first: 88 - (1 + 24) = 63.
    // Bounds for flow 1 (L_1 = 1, L = 10): Delta W = 0: (2 * 1 * 3 + 9) * 8 = 120 ns;
    // Delta W = L = 10 bytes: 200 ns. (Had V followed the bits sent, V(1) = 1/24, S = 1/24,
    // flow 1's packets would leave at 88 and 96: T-WFI 63 ns.)
    let (flows, arrivals) = four_packets();
    let (trace, m) = run("wf2q+", &flows, &arrivals);
    let order: Vec<_> = trace.tx.iter().map(|r| (r.seq, r.finish_ns)).collect();
    assert_eq!(order, [(0, 80.0), (1, 88.0), (3, 168.0), (2, 176.0)]);
    assert!((m[1].t_wfi_ns - 127.0).abs() < 1e-9, "{:?}", m[1]);
    let (_, t0) = wf2qp_bounds(m[1].phi, 1, 10, RATE_BPS);
    let (_, t1) = wf2qp_bounds_with_delta_w(m[1].phi, 1, 10, 10, RATE_BPS);
    assert!(
        (t0 - 120.0).abs() < 1e-9 && (t1 - 200.0).abs() < 1e-9,
        "{t0} {t1}"
    );
    assert!(violations(&m, 1).is_empty());
    // Pins the model: V is charged when a packet is dequeued, so the Delta W = 0 bound is
    // exceeded here. A change that makes V follow the bits on the wire would fail this line
    // and must update the documented contract of wf2qp.rs.
    let over = violations(&m, 0);
    assert_eq!(over.len(), 1, "{over:?}");
    assert_eq!((over[0].0, over[0].1), (1, "T-WFI ns"));
}

/// Ten flows, flow 0 of weight 10 and nine of weight 1, all backlogged from t = 0 with
/// 1500-byte packets; the light flows' packets are enqueued first.
fn heavy_and_nine_light() -> (Vec<FlowSpec>, Vec<Arrival>) {
    let mut flows = vec![FlowSpec {
        weight: 10,
        max_len: 1500,
    }];
    flows.extend((0..9).map(|_| FlowSpec {
        weight: 1,
        max_len: 1500,
    }));
    let mut arrivals = Vec::new();
    for _round in 0..4 {
        for flow in 1..10 {
            arrivals.push(Arrival {
                time_ns: 0,
                flow,
                len: 1500,
            });
        }
    }
    for _ in 0..40 {
        arrivals.push(Arrival {
            time_ns: 0,
            flow: 0,
            len: 1500,
        });
    }
    (flows, arrivals)
}

#[test]
fn drr_exceeds_the_wf2qp_t_wfi_bound_and_the_meter_sees_it() {
    // phi_0 = 10/19, L = L_0 = 1500 bytes, 12 us per packet at 1 Gbit/s. WF2Q+'s bound:
    // 2 L / (phi R) = 2 * 12 * 1.9 = 45.6 us.
    //
    // DRR visits the light flows first (they joined first): 9 packets, then flow 0's
    // quantum of 10 packets, round after round. Flow 0's first packet (Q = 1500 bytes at
    // t = 0, ideal 1.9 * 12 = 22.8 us) completes at 10 * 12 = 120 us: T-WFI 97.2 us, more
    // than twice the bound. The following packets of the burst catch up (each 12 us apart
    // against 22.8 us of ideal time), then wait a round again.
    let (flows, arrivals) = heavy_and_nine_light();
    let (_, drr) = run("drr", &flows, &arrivals);
    let heavy = drr[0];
    let (_, t_bound) = wf2qp_bounds(heavy.phi, 1500, 1500, RATE_BPS);
    assert!((t_bound - 45_600.0).abs() < 1e-6, "{t_bound}");
    assert!(
        (heavy.t_wfi_ns - 97_200.0).abs() < 1e-6,
        "DRR heavy flow T-WFI {} ns",
        heavy.t_wfi_ns
    );
    assert!(heavy.t_wfi_ns > 2.0 * t_bound);
    // It exceeds the looser Delta W = L bound too (45.6 + 12 = 57.6 us).
    assert!(violations(&drr, 1)
        .iter()
        .any(|v| v.0 == 0 && v.1 == "T-WFI ns"));

    // WF2Q+ on the same arrivals stays within even the Delta W = 0 bounds.
    let (_, wf2q) = run("wf2q+", &flows, &arrivals);
    assert!(
        violations(&wf2q, 0).is_empty(),
        "{:?}",
        violations(&wf2q, 0)
    );
    assert!(wf2q[0].t_wfi_ns < t_bound);
}
