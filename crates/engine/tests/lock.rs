//! The lock-based baseline (Figure 1b): no loss and no reordering per client, weighted
//! shares at a bottleneck, the link rate, backpressure and drop reasons, the watchdog, and
//! every registered algorithm running under the lock.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pspat_engine::clock;
use pspat_engine::{ClientConfig, EngineConfig, LockClient, LockedEngine, SubmitError};
use pspat_io::{Backend, Pkt, SendError, Sender};
use pspat_sched::registry::algorithms;
use pspat_sched::{DropReason, FlowParams};

use common::{assert_complete_and_ordered, greedy_window};

/// A backend that appends every packet, with the time it was handed over, to one list in
/// the order of the `send` calls (the lock design serializes them, so this is the order
/// packets reached the "wire").
#[derive(Default, Clone)]
struct Wire {
    got: Arc<Mutex<Vec<(Pkt, u64)>>>,
    /// Busy time per `send`, up to this many ns, varying from call to call: a second
    /// thread sending while the first still sends would then often overtake it (and
    /// reorder a client's packets).
    send_ns: u64,
}

impl Backend for Wire {
    fn name(&self) -> &'static str {
        "wire"
    }
    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        Ok(Box::new(self.clone()))
    }
}

impl Sender for Wire {
    fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
        let start = clock::now_ns();
        // 0, 1/3, 2/3 or all of send_ns, by a hash of the first packet.
        let k = batch.first().map_or(0, |p| {
            (u64::from(p.seq) ^ u64::from(p.client) << 20).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 62
        });
        let busy = self.send_ns * k / 3;
        while clock::now_ns() - start < busy {
            std::hint::spin_loop();
        }
        let now = clock::now_ns();
        self.got
            .lock()
            .unwrap()
            .extend(batch.iter().map(|p| (*p, now)));
        Ok(batch.len())
    }
}

/// The tests that load the CPUs (greedy client threads) or time the link run one at a
/// time: on a 2-core machine a greedy test beside a timed one starves the latter's client
/// threads for longer than their queues last, and the shares it measures are the OS's.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn config(alg: &str, clients: usize, flows: Vec<FlowParams>) -> EngineConfig {
    EngineConfig::new(alg, flows, vec![ClientConfig::default(); clients])
}

/// Every client thread submits `per_client` packets, retrying on a full "mailbox".
fn run_all(
    cfg: &EngineConfig,
    per_client: u32,
    send_ns: u64,
) -> (Vec<(Pkt, u64)>, pspat_engine::EngineReport) {
    let wire = Wire {
        send_ns,
        ..Wire::default()
    };
    let (engine, clients) = LockedEngine::start(cfg, Arc::new(wire.clone())).unwrap();
    let flows = cfg.flows.len() as u32;
    let threads: Vec<_> = clients
        .into_iter()
        .map(|mut c: LockClient| {
            std::thread::spawn(move || {
                let flow = c.id() % flows;
                let mut sent = 0;
                while sent < per_client {
                    let len = 60 + (sent * 7 + c.id() * 13) % 1400;
                    match c.submit(flow, len) {
                        Ok(_) => sent += 1,
                        Err(SubmitError::MailboxFull) => std::thread::yield_now(),
                        Err(e) => panic!("submit: {e}"),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let report = engine.stop(true);
    let got = std::mem::take(&mut *wire.got.lock().unwrap());
    (got, report)
}

#[test]
fn no_loss_no_reordering_per_client() {
    let _alone = serial();
    // Unlimited link: every submit can drain the scheduler itself. 8 Gbit/s (about 0.8 us
    // per packet here): packets queue for the link and owners release other clients'
    // packets, so a second sender running while the first still sends (2 us per batch)
    // would reorder them.
    for (alg, rate_bps) in [
        ("qfq+", 0),
        ("drr", 0),
        ("fifo", 0),
        ("qfq+", 8_000_000_000),
    ] {
        let flows = (0..4)
            .map(|i| FlowParams::weighted(1 + i).with_limit_pkts(4096))
            .collect();
        let mut cfg = config(alg, 8, flows);
        cfg.rate_bps = rate_bps;
        cfg.mailbox_entries = 64;
        let (pkts, report) = run_all(&cfg, 20_000, 2_000);
        assert_complete_and_ordered(pkts.iter().map(|(p, _)| p), 8, 20_000);
        for (c, s) in report.snapshot.clients.iter().enumerate() {
            assert_eq!(s.submitted, 20_000, "{alg} client {c}");
            assert_eq!(s.scheduled, 20_000, "{alg} client {c}");
            assert_eq!(s.sent, 20_000, "{alg} {rate_bps} client {c}");
            assert_eq!(s.dropped_total(), 0);
        }
        let sched = report.sched.unwrap();
        assert_eq!(sched.backlog.pkts, 0);
        assert_eq!(sched.stats.sent_pkts, 160_000);
    }
}

#[test]
fn every_registered_algorithm_runs_under_the_lock() {
    let _alone = serial();
    // The registry hands `visit` only `Send` schedulers (checked at compile time for each
    // entry); here each one also runs, shared by three threads.
    for info in algorithms() {
        let flows = (0..3)
            .map(|i| FlowParams::weighted(1 + i).with_limit_pkts(1024))
            .collect();
        let mut cfg = config(info.name, 3, flows);
        cfg.rate_bps = 0;
        cfg.mailbox_entries = 64;
        let (pkts, report) = run_all(&cfg, 3_000, 0);
        assert_complete_and_ordered(pkts.iter().map(|(p, _)| p), 3, 3_000);
        assert_eq!(report.sched.unwrap().algorithm, info.name);
    }
}

/// Two greedy clients, weights 10:1, on a link well below what the lock sustains.
#[test]
fn shares_follow_weights_and_the_link_rate_is_never_exceeded() {
    let _alone = serial();
    let flows = vec![
        FlowParams::weighted(10).with_limit_pkts(512),
        FlowParams::weighted(1).with_limit_pkts(512),
    ];
    let mut cfg = config("qfq+", 2, flows);
    let rate = 100_000_000u64; // 12.5 MB/s: a 1000-byte packet every 80 us
    cfg.rate_bps = rate;
    let wire = Wire::default();
    // The link starts when the engine is built: count its time from before that.
    let start = Instant::now();
    let (engine, clients) = LockedEngine::start(&cfg, Arc::new(wire.clone())).unwrap();
    let (a, b, elapsed) = greedy_window(clients, || engine.snapshot(), start);
    engine.stop(false);

    let total: u64 = b.clients.iter().map(|c| c.scheduled_bytes).sum();
    let budget = rate as f64 / 8.0 * elapsed.as_secs_f64() + 2.0 * 1000.0;
    assert!(
        (total as f64) <= budget,
        "{total} bytes in {elapsed:?} exceed the link"
    );
    // Busy, not idle: at least 80% of the link was used (the backlog never ran out).
    assert!(
        total as f64 >= 0.8 * budget - 4000.0,
        "{total} bytes: link not kept busy"
    );
    let heavy = b.clients[0].scheduled_bytes - a.clients[0].scheduled_bytes;
    let light = b.clients[1].scheduled_bytes - a.clients[1].scheduled_bytes;
    let ratio = heavy as f64 / light as f64;
    assert!(
        (ratio - 10.0).abs() < 0.5,
        "share ratio {ratio}, expected 10"
    );

    // Packet by packet: each departure is at least one transmission time after the
    // previous one (1000 bytes at 100 Mbit/s: 80 us; the link rounds up by under 1 ns),
    // and no packet was handed over before its transmission could start.
    let got = wire.got.lock().unwrap();
    assert!(got.len() > 100, "{} packets", got.len());
    let tx_ns = 80_000u64;
    for w in got.windows(2) {
        let (prev, cur) = (w[0].0, w[1].0);
        assert!(
            cur.depart_ns >= prev.depart_ns + tx_ns,
            "departures {} then {}: closer than {tx_ns} ns",
            prev.depart_ns,
            cur.depart_ns
        );
    }
    for (p, handed_ns) in got.iter() {
        assert!(
            *handed_ns + 1 >= p.depart_ns - tx_ns,
            "handed over at {handed_ns}, before its start {}",
            p.depart_ns - tx_ns
        );
    }
}

#[test]
fn full_mailbox_is_reported_at_once_and_drops_come_back_as_backpressure() {
    // 1 Mbit/s: a 1500-byte packet takes 12 ms, so nothing leaves during the loop but the
    // first packet. 16 entries of 4-word descriptors on 64-byte lines: capacity 14.
    let mut cfg = config("drr", 1, vec![FlowParams::weighted(1).with_limit_pkts(4)]);
    cfg.rate_bps = 1_000_000;
    cfg.mailbox_entries = 16;
    let (engine, mut clients) = LockedEngine::start(&cfg, Arc::new(Wire::default())).unwrap();
    let c = &mut clients[0];
    let (mut accepted, mut refused, mut reported) = (0u64, 0u64, 0u64);
    for _ in 0..40 {
        match c.submit(0, 1500) {
            Ok(a) => {
                accepted += 1;
                reported += a.dropped_before;
            }
            Err(SubmitError::MailboxFull) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    // The flow holds 4, one is on the link: the rest were dropped by the scheduler, at once.
    assert_eq!(accepted, 40);
    assert_eq!(refused, 0);
    assert!(reported >= 34, "{reported} drops reported");
    assert_eq!(c.drops(), reported);
    assert_eq!(c.submit(0, 0), Err(SubmitError::ZeroLength));
    // Unknown flow: dropped with its own reason, reported by the same submit.
    assert_eq!(c.submit(9, 100).unwrap().dropped_before, 1);
    let report = engine.stop(false);
    let s = report.snapshot.clients[0];
    assert_eq!(s.dropped_for(DropReason::FlowPacketLimit), reported);
    assert_eq!(s.dropped_for(DropReason::UnknownFlow), 1);
    let sched = report.sched.unwrap();
    assert_eq!(
        s.submitted,
        s.scheduled + s.dropped_total() + sched.backlog.pkts
    );

    // With a roomy flow, the per-client limit (the mailbox capacity) refuses at once.
    let mut cfg = config("drr", 1, vec![FlowParams::weighted(1).with_limit_pkts(100)]);
    cfg.rate_bps = 1_000_000;
    cfg.mailbox_entries = 16;
    let (engine, mut clients) = LockedEngine::start(&cfg, Arc::new(Wire::default())).unwrap();
    let c = &mut clients[0];
    let mut accepted = 0;
    let mut refused = 0;
    for _ in 0..40 {
        match c.submit(0, 1500) {
            Ok(_) => accepted += 1,
            Err(SubmitError::MailboxFull) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    // 14 in the scheduler, plus the one released onto the link at once.
    assert_eq!(accepted, 15, "refused {refused}");
    assert!(c.is_full());
    let report = engine.stop(false);
    assert_eq!(report.snapshot.clients[0].mailbox_full, refused);
    assert_eq!(report.snapshot.clients[0].dropped_total(), 0);
}

#[test]
fn the_watchdog_releases_packets_nobody_submits_after() {
    let _alone = serial();
    // 10 packets of 1250 bytes at 10 Mbit/s: 1 ms each. The client submits them at once
    // and goes away; only the watchdog can release packets 2..10.
    let mut cfg = config("qfq", 1, vec![FlowParams::weighted(1)]);
    cfg.rate_bps = 10_000_000;
    let wire = Wire::default();
    let (engine, mut clients) = LockedEngine::start(&cfg, Arc::new(wire.clone())).unwrap();
    let t0 = Instant::now();
    for _ in 0..10 {
        clients[0].submit(0, 1250).unwrap();
    }
    drop(clients);
    while wire.got.lock().unwrap().len() < 10 {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "the watchdog released {} of 10",
            wire.got.lock().unwrap().len()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = t0.elapsed();
    // Nine transmission times must pass before the tenth is released.
    assert!(
        took >= Duration::from_millis(9),
        "{took:?}: faster than the link"
    );
    let stats = engine.lock_stats();
    assert!(stats.watchdog_runs >= 1, "{stats:?}");
    let report = engine.stop(false);
    assert_eq!(report.snapshot.clients[0].sent, 10);
}

#[test]
fn stop_with_drain_sends_everything_queued() {
    let _alone = serial();
    let mut cfg = config(
        "drr",
        2,
        vec![FlowParams::weighted(1), FlowParams::weighted(2)],
    );
    cfg.rate_bps = 100_000_000; // 100 B per 8 us
    let wire = Wire::default();
    let (engine, mut clients) = LockedEngine::start(&cfg, Arc::new(wire.clone())).unwrap();
    for c in clients.iter_mut() {
        for _ in 0..100 {
            let flow = c.id();
            c.submit(flow, 100).unwrap();
        }
    }
    let queued = engine.snapshot().sched_backlog;
    assert!(
        queued > 0,
        "a 100 Mbit/s link cannot have sent 200 packets yet"
    );
    let report = engine.stop(true);
    assert_eq!(report.sched.unwrap().backlog.pkts, 0);
    assert_eq!(wire.got.lock().unwrap().len(), 200);
    // After a stop, submits are refused.
    assert_eq!(clients[0].submit(0, 100), Err(SubmitError::Stopped));
}

#[test]
fn victim_latency_is_recorded_for_tracked_clients_only() {
    let mut cfg = config(
        "qfq+",
        2,
        vec![FlowParams::weighted(1), FlowParams::weighted(1)],
    );
    cfg.clients[1].track_latency = true;
    cfg.rate_bps = 0;
    let (engine, mut clients) = LockedEngine::start(&cfg, Arc::new(Wire::default())).unwrap();
    for _ in 0..50 {
        clients[0].submit(0, 100).unwrap();
        clients[1].submit(1, 100).unwrap();
    }
    let board = engine.latency_board();
    drop(clients); // publishes what each client recorded as the lock owner
    engine.stop(true);
    assert!(board.snapshot(0).is_none());
    assert_eq!(board.snapshot(1).unwrap().len(), 50);
}

#[test]
fn bad_configurations_are_named() {
    let err = |cfg: &EngineConfig| match LockedEngine::start(cfg, Arc::new(Wire::default())) {
        Ok(_) => panic!("accepted"),
        Err(e) => pspat_engine::error_chain(&e),
    };
    let e = err(&config("no-such-alg", 1, vec![FlowParams::weighted(1)]));
    assert!(e.contains("no-such-alg"), "{e}");
    let e = err(&config("drr", 0, vec![FlowParams::weighted(1)]));
    assert!(e.contains("at least one client"), "{e}");
    let e = err(&config("drr", 1, vec![]));
    assert!(e.contains("at least one flow"), "{e}");
    let mut cfg = config("drr", 1, vec![FlowParams::weighted(1)]);
    cfg.mailbox_entries = 100;
    let e = err(&cfg);
    assert!(e.contains("mailbox"), "{e}");
}
