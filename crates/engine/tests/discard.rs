//! Every packet the arbiter refuses reaches `Backend::discard` exactly once, with decision
//! aggregation on and off: a packet for a flow index the engine does not have, and each
//! member of an aggregate the scheduler refused. (A backend that keeps a frame buffer per
//! packet, as the shaper does, leaks it otherwise.)

mod recording;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pspat_engine::{ClientConfig, Engine, EngineConfig, EngineReport, SubmitError};
use pspat_sched::{DropReason, FlowParams};
use recording::{Recorded, RecordingBackend};

/// One client, one flow; `aggregate_ns` 0 is aggregation off.
fn config(flow: FlowParams, rate_bps: u64, aggregate_ns: u64) -> EngineConfig {
    let mut cfg = EngineConfig::new("drr", vec![flow], vec![ClientConfig::default()]);
    cfg.spin_ns = 20_000;
    cfg.rate_bps = rate_bps;
    cfg.aggregate_ns = aggregate_ns;
    cfg.fit_flows_to_aggregates();
    cfg
}

/// Submits `flows[i]` for packet `i` (retrying on a full mailbox), runs `between` after
/// each, stops the engine once everything is out, and checks that each packet (by its
/// sequence number) was sent or discarded exactly once, and discarded exactly when the
/// engine counted it dropped.
fn run(
    cfg: &EngineConfig,
    flows: &[u32],
    len: u32,
    mut between: impl FnMut(usize),
) -> (EngineReport, Vec<u32>) {
    let seen = Arc::new(Recorded::default());
    let (engine, mut clients) =
        Engine::start(cfg, Arc::new(RecordingBackend(Arc::clone(&seen)))).unwrap();
    let c = &mut clients[0];
    for (i, &flow) in flows.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match c.submit(flow, len) {
                Ok(_) => break,
                Err(SubmitError::MailboxFull) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(e) => panic!("packet {i}: {e}"),
            }
        }
        between(i);
    }
    let report = engine.stop(true);
    let s = report.snapshot.clients[0];
    assert_eq!(s.submitted, flows.len() as u64);
    let sent = seen.sent.lock().unwrap().clone();
    let discarded = seen.discarded.lock().unwrap().clone();
    assert_eq!(
        discarded.len() as u64,
        s.dropped_total(),
        "one discard per drop: {s:?}"
    );
    assert_eq!(sent.len() as u64, s.sent, "{s:?}");
    let mut all: Vec<u32> = sent.iter().chain(&discarded).copied().collect();
    all.sort_unstable();
    let want: Vec<u32> = (0..flows.len() as u32).collect();
    assert_eq!(all, want, "each packet sent or discarded exactly once");
    (report, discarded)
}

#[test]
fn a_packet_for_an_unknown_flow_is_discarded_with_and_without_aggregation() {
    // Flow 0 exists; flow 7 does not. Runs of each, so that aggregates of flow 0 form
    // around the strays when aggregation is on.
    let flows: Vec<u32> = (0..600).map(|i| if i % 5 == 4 { 7 } else { 0 }).collect();
    for aggregate_ns in [0, 5_000] {
        let flow = FlowParams::weighted(1).with_limit_pkts(4096);
        let cfg = config(flow, 10_000_000_000, aggregate_ns);
        let (report, discarded) = run(&cfg, &flows, 100, |_| {});
        let s = report.snapshot.clients[0];
        assert_eq!(
            s.dropped_for(DropReason::UnknownFlow),
            120,
            "aggregate_ns {aggregate_ns}: {s:?}"
        );
        assert_eq!(s.dropped_total(), 120, "aggregate_ns {aggregate_ns}: {s:?}");
        let mut discarded = discarded;
        discarded.sort_unstable();
        let strays: Vec<u32> = (0..600).filter(|i| i % 5 == 4).collect();
        assert_eq!(discarded, strays, "aggregate_ns {aggregate_ns}");
        assert_eq!(report.sched.unwrap().members_left, 0);
    }
}

#[test]
fn every_member_of_a_refused_aggregate_is_discarded() {
    // A flow that holds one scheduler packet, on a link slow enough to keep it there
    // (an aggregate of 8 x 100 bytes takes 6.4 ms at 1 Mbit/s), drained every 20 ms: a
    // burst of 8 packets is drained at once into one aggregate of 8 (the budget is 1000
    // bytes), which the full flow refuses whole.
    let flow = FlowParams::weighted(1).with_limit_pkts(1);
    let mut cfg = config(flow, 1_000_000, 8_000_000);
    assert_eq!(cfg.aggregate_bytes(), 1000);
    cfg.delta_a_ns = 20_000_000;
    const BURST: usize = 8;
    let flows = vec![0u32; 20 * BURST];
    let (report, _) = run(&cfg, &flows, 100, |i| {
        if i % BURST == BURST - 1 {
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let s = report.snapshot.clients[0];
    let sched = report.sched.unwrap();
    let refusals = sched.stats.drops.total();
    let members = s.dropped_for(DropReason::FlowPacketLimit);
    assert_eq!(members, s.dropped_total(), "{s:?}");
    // The scheduler counts a refused aggregate once, the engine each of its members.
    assert!(refusals > 0, "the flow never refused an aggregate: {s:?}");
    assert!(
        members > refusals,
        "no refused aggregate had several members: {members} members in {refusals} \
         refusals"
    );
    assert_eq!(sched.members_left, 0);
}
