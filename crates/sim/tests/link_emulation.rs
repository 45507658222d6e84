//! The link's emulation of a dummynet pipe (`plr` and `delay`): the acceptance scenario
//! (examples/sim/dummynet-emulation.toml: 10 Mbit/s, 50 ms, 1% loss, offered 15 Mbit/s),
//! a run without emulation pinned to the simulator's output before it existed, `plr` 1,
//! losses that follow the seed and leave the sources alone, a delay line that moves the
//! delays and nothing the scheduler is measured by, and a closed loop that waits for it.

use std::path::Path;

use pspat_sim::metrics::PLR;
use pspat_sim::{run, Scenario, SimReport};

/// The acceptance scenario, as users run it.
fn example() -> Scenario {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sim/dummynet-emulation.toml");
    Scenario::from_file(&path).unwrap()
}

fn plr_drops(r: &SimReport) -> u64 {
    r.drops_by_reason.get(PLR).copied().unwrap_or(0)
}

#[test]
fn a_dummynet_pipe_loses_one_percent_delivers_ten_mbits_and_delays_fifty_ms() {
    let sc = example();
    assert_eq!((sc.rate_bps, sc.plr), (10e6, 0.01));
    assert_eq!(sc.delay.as_nanos(), 50_000_000);
    let r = run(&sc).unwrap();
    assert!(r.arrived >= 100_000, "{}", r.arrived);
    // Loss over every arrival: plr acts before the queue limit. Applied after it, to the
    // two thirds of the offered 15 Mbit/s the queues accept, it would measure ~0.67%.
    let lost = plr_drops(&r);
    let loss = lost as f64 / r.arrived as f64;
    assert!((loss - 0.01).abs() <= 0.002, "loss {loss}");
    assert_eq!(lost, r.per_flow.iter().map(|f| f.drops_plr).sum::<u64>());
    assert_eq!(lost, r.groups.iter().map(|g| g.drops_plr).sum::<u64>());
    // The offered load is above the link rate: the queues overflow too, under their reason.
    let overflow = r
        .drops_by_reason
        .get("flow_packet_limit")
        .copied()
        .unwrap_or(0);
    assert!(overflow > r.arrived / 5, "{:?}", r.drops_by_reason);
    assert_eq!(r.drops, lost + overflow, "{:?}", r.drops_by_reason);
    assert_eq!(r.arrived, r.packets + r.drops);
    // Throughput: the delay line moves every delivery by the same 50 ms, so the delivered
    // rate is the wire's.
    let thr = r.bytes as f64 * 8e9 / r.duration_ns;
    assert!((thr / 10e6 - 1.0).abs() <= 0.01, "throughput {thr}");
    // Delays, arrival to delivery: none below 50 ms, and the smallest (a packet that found
    // the link idle) within 0.5 ms plus one serialisation (1500 bytes: 1.2 ms) of it.
    let serialisation_ns = 1500.0 * 8.0 / 10e6 * 1e9;
    assert_eq!(r.delay.n, r.packets);
    assert!(r.delay.min >= 50e6, "min {}", r.delay.min);
    assert!(
        r.delay.min <= 50e6 + 0.5e6 + serialisation_ns,
        "min {}",
        r.delay.min
    );
    for f in &r.per_flow {
        assert!(f.delay.min >= 50e6, "flow {}: {}", f.flow, f.delay.min);
    }
    assert!(r.delay.p50 > r.delay.min);
}

/// A mix of every kind of feedback: CBR flows that overflow their queues, a backlogged
/// flow and a closed request-response loop, with size draws and the WFI metrics.
const MIX: &str = r#"
    alg = "qfq"
    rate_bps = 1e8
    txq = 2
    packets = 20000
    [[flows]]
    name = "cbr"
    count = 3
    limit_pkts = 40
    size = { kind = "uniform", min = 64, max = 1500 }
    arrival = { kind = "cbr", rate_bps = 4e7 }
    [[flows]]
    name = "bulk"
    weight = 2
    size = { kind = "fixed", len = 1500 }
    arrival = { kind = "backlogged", depth = 4 }
    [[flows]]
    name = "rr"
    count = 2
    size = { kind = "uniform", min = 100, max = 1000 }
    arrival = { kind = "request-response", burst = { kind = "uniform", min = 1, max = 8 }, think_us = 30 }
"#;

fn mix(keys: &str) -> Scenario {
    Scenario::from_toml(&MIX.replace("txq = 2", &format!("txq = 2\n{keys}")), "mix").unwrap()
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// What the simulator reported before the link emulation existed: totals, and a hash of
/// every flow's counts, delays, bursts and service metrics and of the plots' points.
fn fingerprint(r: &SimReport) -> (String, u64) {
    let head = format!(
        "{} {} {} {} {:?} {:?} {:?}",
        r.arrived, r.packets, r.bytes, r.drops, r.duration_ns, r.utilization, r.jain_all
    );
    let mut flows = String::new();
    for f in &r.per_flow {
        // Pcts without its `min`, which came with the emulation.
        let p = |x: &pspat_sim::metrics::Pcts| {
            format!(
                "Pcts {{ n: {:?}, mean: {:?}, p50: {:?}, p90: {:?}, p99: {:?}, max: {:?} }}",
                x.n, x.mean, x.p50, x.p90, x.p99, x.max
            )
        };
        flows += &format!(
            "{} {} {} {} {} {} {:?} {:?} {:?} {:?} {:?}\n",
            f.arrived,
            f.packets,
            f.bytes,
            f.drops,
            p(&f.delay),
            p(&f.bursts),
            f.t_wfi_ns,
            f.b_wfi_bytes,
            f.gps_delay_ns,
            f.gps_lag_bytes,
            f.throughput_bps
        );
    }
    let plot = &r.plot;
    for s in plot
        .service
        .iter()
        .chain(&plot.delay_cdf)
        .chain(&plot.burst_latency)
    {
        flows += &format!("{} {:?}\n", s.label, s.points);
    }
    (head, fnv(&flows))
}

#[test]
fn without_loss_or_delay_a_run_is_the_one_before_the_emulation() {
    // Captured from the simulator of commit ea3199e, before `plr` and `delay` existed.
    let before = (
        "20000 11335 9076855 8665 726148400.0 1.0 0.9994742450461587".to_owned(),
        11395189834744318360,
    );
    for keys in ["", "plr = 0.0\ndelay = \"0s\"", "delay = \"0ns\""] {
        let r = run(&mix(keys)).unwrap();
        assert_eq!(fingerprint(&r), before, "with '{keys}'");
        assert!(!r.drops_by_reason.contains_key(PLR));
        // and the table prints what it printed: no emulation line, no drop reasons
        let text = r.to_string();
        assert!(!text.contains("link:") && !text.contains("plr"), "{text}");
    }
}

#[test]
fn plr_one_loses_every_packet() {
    // Over a time, not a count: the backlogged flow replaces each loss a nanosecond later
    // and would use up a packet count before the others' first arrivals.
    let mut sc = mix("plr = 1.0");
    (sc.packets, sc.duration_ms) = (None, Some(0.5));
    let r = run(&sc).unwrap();
    assert!(r.arrived > 400_000, "{}", r.arrived);
    assert_eq!((r.packets, r.bytes), (0, 0));
    assert_eq!(r.drops, r.arrived);
    assert_eq!(r.drops_by_reason.len(), 1);
    assert_eq!(plr_drops(&r), r.arrived);
    for f in &r.per_flow {
        assert!(f.arrived > 0, "flow {} never sent", f.flow);
        assert_eq!((f.packets, f.drops, f.drops_plr), (0, f.arrived, f.arrived));
    }
}

#[test]
fn losses_follow_the_seed_and_leave_the_offered_traffic_alone() {
    // Open-loop sources over a fixed time: what they offer cannot depend on the losses.
    let sc = |keys: &str| {
        Scenario::from_toml(
            &format!(
                r#"alg = "drr"
                rate_bps = 1e8
                duration_ms = 1000.0
                {keys}
                [[flows]]
                name = "p"
                count = 4
                size = {{ kind = "uniform", min = 64, max = 1500 }}
                arrival = {{ kind = "poisson", rate_bps = 3e7 }}"#
            ),
            "t",
        )
        .unwrap()
    };
    let arrived = |r: &SimReport| r.per_flow.iter().map(|f| f.arrived).collect::<Vec<_>>();
    let none = run(&sc("")).unwrap();
    let a = run(&sc("plr = 0.3")).unwrap();
    let b = run(&sc("plr = 0.3")).unwrap();
    let c = run(&sc("plr = 0.3\nseed = 2")).unwrap();
    assert_eq!(arrived(&a), arrived(&none));
    let lost = |r: &SimReport| r.per_flow.iter().map(|f| f.drops_plr).collect::<Vec<_>>();
    assert_eq!(lost(&a), lost(&b));
    assert_ne!(lost(&a), lost(&c));
    let share = plr_drops(&a) as f64 / a.arrived as f64;
    // 19k arrivals: a standard deviation of 0.0033
    assert!((share - 0.3).abs() < 0.015, "{share}");
}

#[test]
fn the_delay_line_moves_the_delays_and_not_the_schedulers_metrics() {
    // The mix without its closed loop (whose traffic the delay changes: see below).
    let open = |delay: &str| {
        let mut sc = mix(&format!("plr = 0.01\ndelay = \"{delay}\""));
        sc.flows.pop();
        sc.validate().unwrap();
        run(&sc).unwrap()
    };
    let (a, b) = (open("0s"), open("50ms"));
    assert_eq!((a.delay_ns, b.delay_ns), (0, 50_000_000));
    assert_eq!(
        (a.arrived, a.packets, a.drops, a.duration_ns, a.utilization),
        (b.arrived, b.packets, b.drops, b.duration_ns, b.utilization)
    );
    assert!(plr_drops(&a) > 0);
    for (x, y) in a.per_flow.iter().zip(&b.per_flow) {
        // T-WFI, B-WFI and the GPS metrics are on the wire's release times.
        assert_eq!(
            (x.t_wfi_ns, x.b_wfi_bytes, x.gps_delay_ns, x.gps_lag_bytes),
            (y.t_wfi_ns, y.b_wfi_bytes, y.gps_delay_ns, y.gps_lag_bytes)
        );
        assert_eq!((x.packets, x.drops_plr), (y.packets, y.drops_plr));
        // The delays gain exactly 50 ms (to the f32 samples' 8 ns at 100 ms).
        for (dx, dy) in [
            (x.delay.min, y.delay.min),
            (x.delay.p50, y.delay.p50),
            (x.delay.max, y.delay.max),
        ] {
            assert!(
                (dy - dx - 50e6).abs() <= 16.0,
                "flow {}: {dx} -> {dy}",
                x.flow
            );
        }
    }
    assert_eq!(a.plot.service, b.plot.service);
}

#[test]
fn a_request_response_client_waits_for_the_delayed_response() {
    // One-packet responses of 1000 bytes at 100 Mbit/s (80 us on the wire), 20 us of
    // think time: a cycle is 100 us without delay and 1.1 ms with a 1 ms delay line, so
    // 100 ms holds about 1000 and 91 responses.
    let sc = |delay: &str| {
        let t = format!(
            r#"alg = "qfq"
            rate_bps = 1e8
            duration_ms = 100.0
            delay = "{delay}"
            [[flows]]
            name = "rr"
            size = {{ kind = "fixed", len = 1000 }}
            arrival = {{ kind = "request-response", burst = {{ kind = "fixed", n = 1 }}, think_us = 20 }}"#
        );
        run(&Scenario::from_toml(&t, "t").unwrap()).unwrap()
    };
    let (fast, slow) = (sc("0s"), sc("1ms"));
    assert!((995..=1001).contains(&fast.arrived), "{}", fast.arrived);
    assert!((89..=92).contains(&slow.arrived), "{}", slow.arrived);
    // Completion: arrival to delivery.
    assert!(
        (slow.groups[0].bursts.min - 1.08e6).abs() < 1.0,
        "{:?}",
        slow.groups[0].bursts
    );
}

/// A fifo with one backlogged flow of `len`-byte packets on a 10 Mbit/s wire (800 ns a
/// byte), 1000 packets, with the link keys `keys`: the wire is busy from the first packet
/// to the last, so the run lasts 1000 wire times.
fn framed(keys: &str, len: u32) -> SimReport {
    let text = format!(
        r#"
        alg = "fifo"
        rate_bps = 10e6
        packets = 1000
        {keys}
        [[flows]]
        name = "bulk"
        size = {{ kind = "fixed", len = {len} }}
        arrival = {{ kind = "backlogged", depth = 2 }}
        "#
    );
    run(&Scenario::from_toml(&text, "framed").unwrap()).unwrap()
}

/// A pipe's framing on the simulator's wire, through the engine's framing function:
/// `linklayer atm overhead 10` makes a 1000-byte packet 1010 bytes, 22 cells of 53, 1166
/// bytes on the wire: 932 800 ns at 10 Mbit/s (800 000 without).
#[test]
fn an_atm_wire_charges_whole_cells() {
    let r = framed("linklayer = \"atm\"\noverhead = 10", 1000);
    assert_eq!(r.packets, 1000);
    assert_eq!(r.duration_ns, 1000.0 * 932_800.0);
    assert_eq!((r.bytes, r.wire_bytes), (1_000_000, 1_166_000));
    assert_eq!(r.utilization, 1.0);
    // The wire carries its rate; the packets get 1000/1166 of it: 8.576 Mbit/s.
    let text = r.to_string();
    for want in [
        "overhead=10 mpu=0 linklayer=atm",
        "delivered=8.576Mbit/s wire=10.000Mbit/s",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    // Without a framing: 800 000 ns a packet, and nothing printed about it.
    let r = framed("", 1000);
    assert_eq!(r.duration_ns, 1000.0 * 800_000.0);
    assert_eq!(r.wire_bytes, r.bytes);
    assert!(!r.to_string().contains("wire="), "{r}");
}

/// `linklayer ptm overhead 8`: 1008 bytes and one per 64 or part (16): 1024, 819 200 ns.
/// `mpu 200`: a 64-byte packet is charged 200 bytes, 160 000 ns. CAKE's `pppoe-ptm` and
/// one `ether-vlan` are 30 + 4 on the IP packet, 20 on the frame: 1020 + 16 = 1036 bytes,
/// 828 800 ns, as `overhead 20 linklayer ptm` written out.
#[test]
fn ptm_mpu_and_presets_on_the_wire() {
    let r = framed("linklayer = \"ptm\"\noverhead = 8", 1000);
    assert_eq!(r.duration_ns, 1000.0 * 819_200.0);
    assert_eq!(r.wire_bytes, 1_024_000);
    let r = framed("mpu = 200", 64);
    assert_eq!(r.duration_ns, 1000.0 * 160_000.0);
    assert_eq!((r.bytes, r.wire_bytes), (64_000, 200_000));
    let preset = framed("framing = [\"pppoe-ptm\", \"ether-vlan\"]", 1000);
    assert_eq!(preset.duration_ns, 1000.0 * 828_800.0);
    let written = framed("overhead = 20\nlinklayer = \"ptm\"", 1000);
    assert_eq!(
        (preset.duration_ns, preset.wire_bytes),
        (written.duration_ns, written.wire_bytes)
    );
}

/// With a framing the fluid reference shares the wire's bytes. Two flows of equal weight
/// offer 4.75 Mbit/s each of 1000-byte packets to a 10 Mbit/s ATM wire with overhead 10,
/// which carries 1000/1166 of 10 Mbit/s of packets (8.576 Mbit/s): both the wire and the
/// fluid system, which counts 1166 bytes a packet too, fall behind alike, and each flow
/// stays within two packets (2 * 1166 bytes) of its fluid service. (Counting the packets'
/// own bytes, the fluid system would keep up with the 9.5 Mbit/s offered while the wire
/// does not, and the lag would grow by about 58 KB a second per flow.)
#[test]
fn with_a_framing_the_service_metrics_count_the_wires_bytes() {
    let text = r#"
        alg = "wf2q+"
        rate_bps = 10e6
        packets = 4000
        linklayer = "atm"
        overhead = 10
        [[flows]]
        name = "cbr"
        count = 2
        size = { kind = "fixed", len = 1000 }
        arrival = { kind = "cbr", rate_bps = 4.75e6 }
    "#;
    let r = run(&Scenario::from_toml(text, "two").unwrap()).unwrap();
    // The wire was busy from the first arrival to the last departure.
    assert_eq!(r.duration_ns, 4000.0 * 932_800.0, "{r}");
    for f in &r.per_flow {
        let lag = f.gps_lag_bytes.unwrap();
        assert!(lag <= 2.0 * 1166.0, "flow {}: lag {lag} bytes", f.flow);
        let b_wfi = f.b_wfi_bytes.unwrap();
        assert!(
            b_wfi <= 2.0 * 1166.0,
            "flow {}: B-WFI {b_wfi} bytes",
            f.flow
        );
    }
}
