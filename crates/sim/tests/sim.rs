//! Tests that fail if the simulator is wrong: the fluid reference against hand-computed
//! cases, zero lag for a lone flow, conservation, configured arrival rates, weighted shares.

use proptest::prelude::*;
use pspat_sched::reference::gps::FluidGps;
use pspat_sched::registry::{algorithms, ServiceClass};
use pspat_sim::{run, Scenario};

fn scenario(alg: &str, rate: f64, extra: &str, flows: &[&str]) -> Scenario {
    let mut t = format!("alg = \"{alg}\"\nrate_bps = {rate:e}\n{extra}\n");
    for f in flows {
        t.push_str(&format!("[[flows]]\n{f}\n"));
    }
    Scenario::from_toml(&t, "test").unwrap()
}

#[test]
fn gps_reference_matches_a_hand_computed_case() {
    // 1 byte/ns. Flows of weights 1, 1, 2. Flows 0 and 1 bring 300 bytes at t = 0, flow 2
    // brings 400 at t = 100.
    // [0, 100]: flows 0, 1 at 1/2 B/ns each -> 50 bytes each.
    // From 100: rates 1/4, 1/4, 1/2. Flow 2 needs 400 / (1/2) = 800 ns -> done at 900;
    // flows 0, 1 have 50 + 200 = 250 then, and finish their last 50 at 1/2 B/ns: 1000.
    let mut g = FluidGps::new(&[1, 1, 2], 8e9);
    let a = g.arrive(0.0, 0, 300);
    let b = g.arrive(0.0, 1, 300);
    let c = g.arrive(100.0, 2, 400);
    g.advance_to(500.0);
    // at 500: flow 0 has 50 + 400 / 4 = 150, flow 2 has 400 / 2 = 200
    assert!((g.service_bytes(0) - 150.0).abs() < 1e-9);
    assert!((g.service_bytes(2) - 200.0).abs() < 1e-9);
    g.drain();
    assert!((g.finish_ns(c).unwrap() - 900.0).abs() < 1e-9);
    assert!((g.finish_ns(a).unwrap() - 1000.0).abs() < 1e-9);
    assert!((g.finish_ns(b).unwrap() - 1000.0).abs() < 1e-9);
}

#[test]
fn the_simulated_fluid_service_is_the_hand_computed_one() {
    // Two backlogged flows of weights 3 and 1 with 1000-byte packets on 8 Gbit/s: GPS gives
    // them 3/4 and 1/4 byte per ns from t = 0, exactly; the plot's GPS series must say so.
    let sc = scenario(
        "wf2q+",
        8e9,
        "packets = 4000\nplot = { flows = [0, 1], window_ms = 0.01 }",
        &[
            "name = \"a\"\nweight = 3\nsize = { kind = \"fixed\", len = 1000 }\narrival = { kind = \"backlogged\", depth = 4 }",
            "name = \"b\"\nsize = { kind = \"fixed\", len = 1000 }\narrival = { kind = \"backlogged\", depth = 4 }",
        ],
    );
    let r = run(&sc).unwrap();
    let gps_a = &r.plot.service[1];
    let gps_b = &r.plot.service[3];
    assert!(gps_a.label.ends_with("GPS") && gps_b.label.ends_with("GPS"));
    for (&(t_ms, sa), &(_, sb)) in gps_a.points.iter().zip(&gps_b.points) {
        let t_ns = t_ms * 1e6;
        assert!((sa - 0.75 * t_ns).abs() < 1e-6, "{t_ns}: {sa}");
        assert!((sb - 0.25 * t_ns).abs() < 1e-6, "{t_ns}: {sb}");
    }
    // and the packet system stays within a packet or two of it
    for (p, g) in r.plot.service[0].points.iter().zip(&gps_a.points) {
        assert!((p.1 - g.1).abs() <= 2000.0, "{p:?} {g:?}");
    }
}

#[test]
fn a_single_flow_on_an_idle_link_has_zero_lag_under_every_algorithm() {
    // CBR at half the link rate: every packet finds the link idle and leaves one
    // transmission time after it arrived, exactly as in the fluid system.
    for info in algorithms() {
        let sc = scenario(
            info.name,
            1e9,
            "packets = 500",
            &["name = \"solo\"\nsize = { kind = \"uniform\", min = 64, max = 1500 }\narrival = { kind = \"cbr\", rate_bps = 5e8 }"],
        );
        let r = run(&sc).unwrap();
        let f = &r.per_flow[0];
        assert_eq!((f.packets, f.drops), (500, 0), "{}", info.name);
        assert!(
            f.gps_lag_bytes.unwrap().abs() < 1e-6,
            "{}: {f:?}",
            info.name
        );
        assert!(f.gps_delay_ns.unwrap().abs() < 1e-6, "{}: {f:?}", info.name);
        assert!(f.b_wfi_bytes.unwrap().abs() < 1e-6, "{}: {f:?}", info.name);
        // T-WFI: each packet leaves at its ideal time: arrival + its own transmission time
        assert!(f.t_wfi_ns.unwrap().abs() < 1e-6, "{}: {f:?}", info.name);
        // delays are transmission times: 64..1500 bytes at 1 ns/bit
        assert!(
            f.delay.max <= 12_000.0 + 1e-3 && f.delay.p50 >= 512.0,
            "{f:?}"
        );
    }
}

#[test]
fn configured_arrival_rates_are_produced() {
    // Open-loop processes on an otherwise idle 10 Gbit/s link, 200 ms: what leaves is what
    // arrived, so the measured throughput over the run is the offered rate.
    let flows = [
        "name = \"cbr\"\nsize = { kind = \"fixed\", len = 1000 }\narrival = { kind = \"cbr\", rate_bps = 100e6 }",
        "name = \"poisson\"\nsize = { kind = \"trimodal\" }\narrival = { kind = \"poisson\", rate_bps = 200e6 }",
        "name = \"onoff\"\nsize = { kind = \"fixed\", len = 500 }\narrival = { kind = \"on-off\", burst = { kind = \"geometric\", mean = 10.0 }, off_us = 100.0 }",
        "name = \"vbr\"\nsize = { kind = \"fixed\", len = 1200 }\narrival = { kind = \"vbr\", fps = 30.0, rate_bps = 1.5e6, variation = 0.3, peak_bps = 1e9 }",
    ];
    let sc = scenario("qfq", 10e9, "duration_ms = 200.0\nwfi = false", &flows);
    let r = run(&sc).unwrap();
    let thr = |name: &str| {
        r.groups
            .iter()
            .find(|g| g.name == name)
            .unwrap()
            .throughput_bps
    };
    let within = |name: &str, want: f64, tol: f64| {
        let got = thr(name);
        assert!((got / want - 1.0).abs() < tol, "{name}: {got} vs {want}");
    };
    within("cbr", 100e6, 0.005);
    within("poisson", 200e6, 0.03);
    // on-off: bursts of mean 10 packets of 500 bytes, all at once, every 100 us on average
    // (the burst itself takes no time): 10 * 4000 bits / 100 us = 400 Mbit/s.
    within("onoff", 400e6, 0.05);
    // vbr: 6 frames of mean 6250 bytes per 200 ms, uniform +-30%: a 6-frame sample.
    within("vbr", 1.5e6, 0.15);
    assert_eq!(r.drops, 0);
}

#[test]
fn request_response_is_closed_loop() {
    // 1 Gbit/s, responses of 4 packets of 1000 bytes at once: 32 us to send on an idle link,
    // then 68 us of thinking: one response every 100 us, each completing in exactly 32 us.
    let sc = scenario(
        "drr",
        1e9,
        "duration_ms = 10.0",
        &["name = \"rr\"\nsize = { kind = \"fixed\", len = 1000 }\narrival = { kind = \"request-response\", burst = { kind = \"fixed\", n = 4 }, think_us = 68.0 }"],
    );
    let r = run(&sc).unwrap();
    let g = &r.groups[0];
    assert!((98..=100).contains(&g.bursts.n), "{}", g.bursts.n);
    assert!((g.bursts.max - 32_000.0).abs() < 1e-3 && (g.bursts.p50 - 32_000.0).abs() < 1e-3);
    assert_eq!(g.burst_by_len.len(), 1);
    assert_eq!(g.burst_by_len[0].len, 4);
}

#[test]
fn backlogged_flows_get_their_weighted_shares() {
    for info in algorithms()
        .iter()
        .filter(|a| a.class == ServiceClass::WeightedFair)
    {
        let sc = scenario(
            info.name,
            1e9,
            "packets = 20000\nwfi = false",
            &[
                "name = \"w3\"\nweight = 3\nsize = { kind = \"fixed\", len = 1000 }\narrival = { kind = \"backlogged\", depth = 4 }",
                "name = \"w1\"\ncount = 3\nsize = { kind = \"fixed\", len = 1000 }\narrival = { kind = \"backlogged\", depth = 4 }",
            ],
        );
        let r = run(&sc).unwrap();
        // weight 3 of 6: half the link; each weight-1 flow a sixth
        assert!(
            (r.groups[0].share - 0.5).abs() < 0.01,
            "{}: {:?}",
            info.name,
            r.groups[0]
        );
        assert!(r.jain_backlogged.unwrap() > 0.999, "{}", info.name);
        assert!(r.groups[1].jain > 0.999, "{}", info.name);
    }
    // FIFO does not weigh: the weight-3 flow gets what it brings, a quarter
    let sc = scenario(
        "fifo",
        1e9,
        "packets = 20000\nwfi = false",
        &[
            "name = \"w3\"\nweight = 3\nsize = { kind = \"fixed\", len = 1000 }\narrival = { kind = \"backlogged\", depth = 4 }",
            "name = \"w1\"\ncount = 3\nsize = { kind = \"fixed\", len = 1000 }\narrival = { kind = \"backlogged\", depth = 4 }",
        ],
    );
    let r = run(&sc).unwrap();
    assert!((r.groups[0].share - 0.25).abs() < 0.01, "{:?}", r.groups[0]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the traffic, scheduler and queue: every packet is sent or dropped once,
    /// the bytes sent are the link's busy time at its rate, shares add up to 1.
    #[test]
    fn bytes_and_packets_are_conserved(
        alg in 0usize..6,
        txq in 0u32..4,
        seed in 0u64..1000,
        limit in 2u32..40,
        rate in 1e8f64..2e9,
    ) {
        let alg = ["drr", "qfq", "wf2q+", "scrr", "fifo", "qfq+"][alg];
        let flows = [
            format!("name = \"bk\"\ncount = 2\nweight = 2\nlimit_pkts = {limit}\nsize = {{ kind = \"uniform\", min = 64, max = 1500 }}\narrival = {{ kind = \"backlogged\" }}"),
            format!("name = \"po\"\ncount = 3\nlimit_pkts = {limit}\nsize = {{ kind = \"trimodal\" }}\narrival = {{ kind = \"poisson\", rate_bps = 3e8 }}"),
            format!("name = \"oo\"\nlimit_pkts = {limit}\nsize = {{ kind = \"fixed\", len = 300 }}\narrival = {{ kind = \"on-off\", burst = {{ kind = \"uniform\", min = 1, max = 80 }}, off_us = 30.0 }}"),
            format!("name = \"rr\"\ncount = 2\nlimit_pkts = {limit}\nsize = {{ kind = \"fixed\", len = 150 }}\narrival = {{ kind = \"request-response\", burst = {{ kind = \"uniform\", min = 1, max = 60 }}, think_us = 5.0, think_exp = true }}"),
        ];
        let refs: Vec<&str> = flows.iter().map(String::as_str).collect();
        let sc = scenario(alg, rate, &format!("duration_ms = 3.0\ntxq = {txq}\nseed = {seed}"), &refs);
        let r = run(&sc).unwrap();
        let arrived: u64 = r.per_flow.iter().map(|f| f.arrived).sum();
        prop_assert_eq!(arrived, r.arrived);
        prop_assert_eq!(r.arrived, r.packets + r.drops);
        for f in &r.per_flow {
            prop_assert_eq!(f.arrived, f.packets + f.drops, "flow {}", f.flow);
        }
        let bytes: u64 = r.per_flow.iter().map(|f| f.bytes).sum();
        prop_assert_eq!(bytes, r.bytes);
        let busy_bytes = r.utilization * r.duration_ns * r.rate_bps / 8e9;
        prop_assert!((busy_bytes - r.bytes as f64).abs() < 1e-6 * r.bytes as f64 + 1e-6);
        prop_assert!(r.utilization <= 1.0 + 1e-9);
        let shares: f64 = r.groups.iter().map(|g| g.share).sum();
        prop_assert!((shares - 1.0).abs() < 1e-9);
        // every flow's delay percentiles are ordered
        for f in r.per_flow.iter().filter(|f| f.packets > 0) {
            prop_assert!(f.delay.p50 <= f.delay.p90 && f.delay.p90 <= f.delay.p99 && f.delay.p99 <= f.delay.max);
        }
    }
}
