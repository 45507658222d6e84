//! End-to-end behaviour of the engine: no loss and no reordering per client in every
//! hand-off mode, backpressure, the link rate, weighted shares, idle sleep and wake-up.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pspat_engine::{
    Change, ClientConfig, Engine, EngineConfig, EngineSnapshot, Handoff, SubmitError,
};
use pspat_io::{Backend, Pkt, SendError, Sender};
use pspat_sched::{DropReason, FlowParams};

use common::{assert_complete_and_ordered, greedy_window};

/// A backend that keeps every packet it is given, per sender.
#[derive(Default)]
struct Collect {
    got: Arc<Mutex<Vec<Vec<Pkt>>>>,
}

struct CollectSender {
    mine: Vec<Pkt>,
    all: Arc<Mutex<Vec<Vec<Pkt>>>>,
}

impl Backend for Collect {
    fn name(&self) -> &'static str {
        "collect"
    }
    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        Ok(Box::new(CollectSender {
            mine: Vec::new(),
            all: Arc::clone(&self.got),
        }))
    }
}

impl Sender for CollectSender {
    fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
        self.mine.extend_from_slice(batch);
        Ok(batch.len())
    }
}

impl Drop for CollectSender {
    fn drop(&mut self) {
        self.all
            .lock()
            .unwrap()
            .push(std::mem::take(&mut self.mine));
    }
}

/// A backend that takes only the first half of every batch (rounded down) and refuses
/// the rest, keeping what it took.
#[derive(Default)]
struct Flaky {
    got: Arc<Mutex<Vec<Pkt>>>,
}

struct FlakySender(Arc<Mutex<Vec<Pkt>>>);

impl Backend for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }
    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        Ok(Box::new(FlakySender(Arc::clone(&self.got))))
    }
}

impl Sender for FlakySender {
    fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
        let n = batch.len() / 2;
        self.0.lock().unwrap().extend_from_slice(&batch[..n]);
        Ok(n)
    }
}

fn config(alg: &str, clients: usize, flows: Vec<FlowParams>) -> EngineConfig {
    let mut cfg = EngineConfig::new(alg, flows, vec![ClientConfig::default(); clients]);
    cfg.spin_ns = 20_000;
    cfg
}

/// Runs `clients` threads each submitting `per_client` packets (retrying on a full
/// mailbox) and returns what the backend received plus the report.
fn run_all(cfg: &EngineConfig, per_client: u32) -> (Vec<Pkt>, pspat_engine::EngineReport) {
    let backend = Collect::default();
    let got = Arc::clone(&backend.got);
    let report = run_on(cfg, Arc::new(backend), per_client);
    let pkts = got.lock().unwrap().concat();
    (pkts, report)
}

/// How long a client of [`run_on`] may find its mailbox full without any packet accepted.
const STUCK: Duration = Duration::from_secs(10);

/// [`run_all`] on any backend: returns the report once everything is out.
fn run_on(
    cfg: &EngineConfig,
    backend: Arc<dyn Backend>,
    per_client: u32,
) -> pspat_engine::EngineReport {
    let (engine, clients) = Engine::start(cfg, backend).unwrap();
    let flows = cfg.flows.len() as u32;
    let threads: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            std::thread::spawn(move || {
                let flow = c.id() % flows;
                let mut sent = 0;
                // A client that cannot submit for this long was left off the arbiter's
                // scan list (or the arbiter stopped): fail instead of hanging.
                let mut progress = Instant::now();
                while sent < per_client {
                    let len = 60 + (sent * 7 + c.id() * 13) % 1400;
                    match c.submit(flow, len) {
                        Ok(_) => {
                            sent += 1;
                            progress = Instant::now();
                        }
                        Err(SubmitError::MailboxFull) => {
                            assert!(
                                progress.elapsed() < STUCK,
                                "client {}: mailbox full for {STUCK:?} after {sent} packets, \
                                 {} in flight",
                                c.id(),
                                c.in_flight()
                            );
                            c.wait_and_drain(Duration::from_micros(50));
                        }
                        Err(e) => panic!("submit: {e}"),
                    }
                }
                // Client mode: keep sending what the arbiter clears until all is out.
                let deadline = Instant::now() + Duration::from_secs(20);
                while c.transmits_itself() && c.in_flight() > 0 && Instant::now() < deadline {
                    c.wait_and_drain(Duration::from_millis(1));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    engine.stop(true)
}

/// Refused sends are counted per client in every hand-off mode, and `sent`/`sent_bytes`
/// are exactly what the backend took (the arbiter hand-off counts them per scan, not per
/// packet, so this checks its tally of refusals).
#[test]
fn refused_sends_are_counted_exactly_in_every_handoff_mode() {
    const N: u32 = 5_000;
    for handoff in [Handoff::Arbiter, Handoff::Dispatchers(2), Handoff::Clients] {
        let flows = (0..3)
            .map(|_| FlowParams::default().with_limit_pkts(4096))
            .collect();
        let mut cfg = config("drr", 3, flows);
        cfg.handoff = handoff;
        cfg.rate_bps = 0;
        cfg.mailbox_entries = 64;
        let backend = Flaky::default();
        let got = Arc::clone(&backend.got);
        let report = run_on(&cfg, Arc::new(backend), N);
        let got = got.lock().unwrap();
        let mut failed_total = 0;
        for (c, s) in report.snapshot.clients.iter().enumerate() {
            let mine: Vec<&Pkt> = got.iter().filter(|p| p.client as usize == c).collect();
            let bytes: u64 = mine.iter().map(|p| u64::from(p.len)).sum();
            assert_eq!(s.sent, mine.len() as u64, "{handoff} client {c}");
            assert_eq!(s.sent_bytes, bytes, "{handoff} client {c}");
            assert_eq!(s.sent + s.send_failed, u64::from(N), "{handoff} client {c}");
            assert_eq!(s.scheduled, u64::from(N), "{handoff} client {c}");
            failed_total += s.send_failed;
        }
        assert!(failed_total > 0, "{handoff}: the backend refused nothing");
    }
}

#[test]
fn no_loss_no_reordering_in_every_handoff_mode() {
    for handoff in [Handoff::Arbiter, Handoff::Dispatchers(3), Handoff::Clients] {
        for alg in ["qfq+", "drr", "fifo"] {
            let flows = (0..4)
                .map(|i| FlowParams::weighted(1 + i).with_limit_pkts(4096))
                .collect();
            let mut cfg = config(alg, 8, flows);
            cfg.handoff = handoff;
            cfg.rate_bps = 0;
            cfg.mailbox_entries = 64;
            let (pkts, report) = run_all(&cfg, 20_000);
            assert_complete_and_ordered(&pkts, 8, 20_000);
            for (c, s) in report.snapshot.clients.iter().enumerate() {
                assert_eq!(s.submitted, 20_000, "{handoff} {alg} client {c}");
                assert_eq!(s.sent, 20_000, "{handoff} {alg} client {c}");
                assert_eq!(s.dropped_total(), 0);
            }
            assert_eq!(report.sched.unwrap().backlog.pkts, 0);
        }
    }
}

/// Client hand-off: a client's mailbox slots come back only when the arbiter sees what the
/// client sent, so a client the arbiter takes off its scan list while the client is sending
/// must be put back (the re-check after deactivation looks at what it sent, not only at its
/// mailbox), or its full mailbox never empties. An arbiter that goes to sleep as soon as
/// it has nothing (no spin), deactivating every idle client before it does, and clients
/// idle after one empty drain make that race frequent.
#[test]
fn client_handoff_never_strands_a_client_with_a_full_mailbox() {
    let flows = (0..2)
        .map(|_| FlowParams::default().with_limit_pkts(4096))
        .collect();
    let mut cfg = config("drr", 4, flows);
    cfg.handoff = Handoff::Clients;
    cfg.rate_bps = 0;
    cfg.mailbox_entries = 64;
    cfg.client_idle_ns = 0;
    cfg.spin_ns = 0;
    for _ in 0..5 {
        let (pkts, report) = run_all(&cfg, 50_000);
        assert_complete_and_ordered(&pkts, 4, 50_000);
        for s in &report.snapshot.clients {
            assert_eq!(s.sent, 50_000);
        }
    }
}

#[test]
fn decision_aggregation_keeps_order_and_counts() {
    for handoff in [Handoff::Arbiter, Handoff::Dispatchers(2)] {
        let flows = (0..2)
            .map(|_| {
                FlowParams::weighted(1)
                    .with_limit_pkts(4096)
                    .with_max_len(16_384)
            })
            .collect();
        let mut cfg = config("qfq", 4, flows);
        cfg.handoff = handoff;
        cfg.rate_bps = 10_000_000_000;
        cfg.aggregate_ns = 5_000; // about 6 KB at 10 Gbit/s
        let (pkts, report) = run_all(&cfg, 10_000);
        assert_complete_and_ordered(&pkts, 4, 10_000);
        let sched = report.sched.unwrap();
        assert_eq!(sched.members_left, 0);
        // Fewer decisions than packets: aggregation did happen.
        assert!(
            sched.stats.sent_pkts < 40_000,
            "{} decisions",
            sched.stats.sent_pkts
        );
    }
}

#[test]
fn full_mailbox_is_reported_at_once() {
    // A slow link keeps packets in the scheduler, and each holds a mailbox slot.
    let mut cfg = config(
        "drr",
        1,
        vec![FlowParams::weighted(1).with_limit_pkts(1000)],
    );
    cfg.rate_bps = 1_000_000; // 1500 B take 12 ms
    cfg.mailbox_entries = 16; // 2 lines of 8: capacity 8... (4-word slots: 2 per line)
    let (engine, mut clients) = Engine::start(&cfg, Arc::new(Collect::default())).unwrap();
    let c = &mut clients[0];
    let mut accepted = 0;
    let mut refused = 0;
    for _ in 0..100 {
        match c.submit(0, 1500) {
            Ok(_) => accepted += 1,
            Err(SubmitError::MailboxFull) => refused += 1,
            Err(e) => panic!("{e}"),
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    assert!(
        accepted <= 16 + 2,
        "accepted {accepted} with 16 slots on a 12 ms link"
    );
    assert!(refused > 0);
    let report = engine.stop(false);
    let s = report.snapshot.clients[0];
    assert_eq!(s.mailbox_full, refused);
    assert_eq!(s.submitted, accepted);
}

#[test]
fn scheduler_drops_come_back_as_backpressure() {
    let mut cfg = config("drr", 1, vec![FlowParams::weighted(1).with_limit_pkts(4)]);
    cfg.rate_bps = 1_000_000;
    let (engine, mut clients) = Engine::start(&cfg, Arc::new(Collect::default())).unwrap();
    let c = &mut clients[0];
    let mut reported = 0;
    for _ in 0..50 {
        reported += c.submit(0, 1500).unwrap().dropped_before;
        std::thread::sleep(Duration::from_micros(200));
    }
    // Unknown flow: dropped by the arbiter with its own reason.
    reported += c.submit(7, 100).unwrap().dropped_before;
    // Wait until the arbiter took that packet (so every earlier one too: the mailbox is
    // FIFO) and the client sees every drop; a fixed sleep fails on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = engine.snapshot().clients[0];
        if s.dropped_for(DropReason::UnknownFlow) == 1 && c.drops() == s.dropped_total() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the arbiter never took the packet: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    reported += c.submit(0, 1500).unwrap().dropped_before;
    let report = engine.stop(false);
    let s = report.snapshot.clients[0];
    assert!(s.dropped_for(DropReason::FlowPacketLimit) > 30, "{s:?}");
    assert_eq!(s.dropped_for(DropReason::UnknownFlow), 1);
    // Everything dropped before the last submit was reported by some submit.
    assert!(reported >= s.dropped_total() - 1 && reported <= s.dropped_total());
    // Every packet is accounted for: sent, dropped, or still queued.
    let sched = report.sched.unwrap();
    assert_eq!(
        s.submitted,
        s.scheduled + s.dropped_total() + sched.backlog.pkts
    );
}

#[test]
fn link_rate_is_never_exceeded_and_shares_follow_weights() {
    // Two greedy clients, weights 10 and 1, on a link far below what the engine sustains.
    let flows = vec![
        FlowParams::weighted(10).with_limit_pkts(512),
        FlowParams::weighted(1).with_limit_pkts(512),
    ];
    let mut cfg = config("qfq+", 2, flows);
    cfg.rate_bps = 100_000_000; // 100 Mbit/s: 12.5 MB/s
    let (engine, clients) = Engine::start(&cfg, Arc::new(Collect::default())).unwrap();
    let start = Instant::now();
    let (a, b, elapsed) = greedy_window(clients, || engine.snapshot(), start);
    let total: u64 = b.clients.iter().map(|c| c.scheduled_bytes).sum();
    let budget = 12_500_000.0 * elapsed.as_secs_f64() + 2.0 * 1000.0;
    assert!(
        (total as f64) <= budget,
        "{total} bytes in {elapsed:?} exceed the link"
    );
    let heavy = b.clients[0].scheduled_bytes - a.clients[0].scheduled_bytes;
    let light = b.clients[1].scheduled_bytes - a.clients[1].scheduled_bytes;
    let ratio = heavy as f64 / light as f64;
    assert!(
        (ratio - 10.0).abs() < 0.5,
        "share ratio {ratio}, expected 10"
    );
    engine.stop(false);
}

#[test]
fn arbiter_sleeps_when_idle_and_wakes_on_traffic() {
    let cfg = config("drr", 1, vec![FlowParams::weighted(1)]);
    let backend = Collect::default();
    let (engine, mut clients) = Engine::start(&cfg, Arc::new(backend)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let before = engine.snapshot();
    assert!(
        before.idle_sleeps >= 1,
        "no idle sleep after 50 ms of nothing"
    );
    std::thread::sleep(Duration::from_millis(300));
    let idle = engine.snapshot();
    // Blocked, not spinning: a spinning arbiter scans millions of times in 300 ms; a
    // blocked one only spins T_w after each 200 ms safety timeout.
    let scans = idle.scans - before.scans;
    assert!(scans < 5_000, "{scans} scans in 300 ms while idle");
    clients[0].submit(0, 100).unwrap();
    let t0 = Instant::now();
    while engine.snapshot().clients[0].sent == 0 {
        assert!(
            t0.elapsed() < Duration::from_millis(150),
            "not woken by the submit"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
    assert!(engine.snapshot().arbiter_wakeups >= 1);
    engine.stop(false);
}

#[test]
fn a_busy_arbiter_deactivates_idle_clients_in_batches() {
    // Client 0 keeps the arbiter busy (a slow link, always backlogged); client 1 sends a
    // packet every 3 ms, so between two packets it is idle longer than client_idle_ns
    // (1 ms). Deactivating it each time would cost a heavy fence (membarrier) every 3 ms;
    // the busy arbiter defers it to at most one per 100 ms.
    let mut cfg = config(
        "drr",
        2,
        vec![FlowParams::weighted(1), FlowParams::weighted(1)],
    );
    cfg.rate_bps = 50_000_000;
    let backend = Collect::default();
    let got = Arc::clone(&backend.got);
    let (engine, clients) = Engine::start(&cfg, Arc::new(backend)).unwrap();
    let mut clients = clients.into_iter();
    let greedy = common::Greedy::start(vec![clients.next().unwrap()]);
    let mut sparse = clients.next().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let a = engine.snapshot();
    let t0 = Instant::now();
    let mut sent = 0;
    while t0.elapsed() < Duration::from_millis(450) {
        sparse.submit(1, 100).unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_millis(3));
    }
    let b = engine.snapshot();
    greedy.finish();
    let report = engine.stop(true);
    let fences = b.deactivation_fences - a.deactivation_fences;
    assert!(
        b.idle_sleeps == a.idle_sleeps,
        "the arbiter slept: not busy"
    );
    assert!(
        b.deactivations > a.deactivations,
        "the sparse client was never deactivated"
    );
    // 450 ms: one fence right away, then at most one per 100 ms.
    assert!(
        fences <= 6,
        "{fences} heavy fences for {sent} sparse packets"
    );
    // Nothing lost on the way: every sparse packet arrived.
    let sparse_got = got
        .lock()
        .unwrap()
        .iter()
        .flatten()
        .filter(|p| p.client == 1)
        .count();
    assert_eq!(sparse_got as u64, sent, "{report:?}");
}

#[test]
fn bad_configurations_are_named() {
    let err = |cfg: &EngineConfig| match Engine::start(cfg, Arc::new(Collect::default())) {
        Ok(_) => panic!("accepted"),
        Err(e) => pspat_engine::error_chain(&e),
    };
    let e = err(&config("no-such-alg", 1, vec![FlowParams::weighted(1)]));
    assert!(e.contains("no-such-alg"), "{e}");
    let e = err(&config("drr", 0, vec![FlowParams::weighted(1)]));
    assert!(e.contains("at least one client"), "{e}");
    let mut cfg = config("drr", 1, vec![FlowParams::weighted(1)]);
    cfg.mailbox_entries = 100;
    assert!(err(&cfg).contains("power of two"));
    let cfg = config("drr", 1, vec![FlowParams::weighted(0)]);
    assert!(err(&cfg).contains("flow 0"), "{}", err(&cfg));
}

#[test]
fn a_client_moving_between_threads_stays_in_order() {
    // The activity bitmap has no per-CPU state: a client handle that migrates (here: is
    // handed from thread to thread) is found and drained like any other.
    let mut cfg = config(
        "drr",
        2,
        vec![FlowParams::weighted(1).with_limit_pkts(4096)],
    );
    cfg.rate_bps = 0;
    let backend = Collect::default();
    let got = Arc::clone(&backend.got);
    let (engine, mut clients) = Engine::start(&cfg, Arc::new(backend)).unwrap();
    let mut c = clients.remove(0);
    let mut other = clients.remove(0);
    for hop in 0..20 {
        c = std::thread::spawn(move || {
            let mut n = 0;
            while n < 500 {
                match c.submit(0, 100) {
                    Ok(_) => n += 1,
                    Err(_) => std::thread::yield_now(),
                }
            }
            c
        })
        .join()
        .unwrap();
        other.submit(0, 60 + hop).unwrap();
    }
    drop((c, other));
    engine.stop(true);
    let pkts = got.lock().unwrap().concat();
    let mine: Vec<u32> = pkts
        .iter()
        .filter(|p| p.client == 0)
        .map(|p| p.seq)
        .collect();
    assert_eq!(mine, (0..10_000).collect::<Vec<_>>());
    assert_eq!(pkts.iter().filter(|p| p.client == 1).count(), 20);
}

/// Bytes each client had released onto the link between two snapshots.
fn bytes_between(a: &EngineSnapshot, b: &EngineSnapshot) -> Vec<u64> {
    a.clients
        .iter()
        .zip(&b.clients)
        .map(|(x, y)| y.scheduled_bytes - x.scheduled_bytes)
        .collect()
}

#[test]
fn weights_and_rate_change_while_running() {
    // Two greedy clients of equal weight on 80 Mbit/s; then, without stopping, flow 0 gets
    // weight 4 and the link drops to 40 Mbit/s. Shares and rate must follow.
    let flows = vec![
        FlowParams::weighted(1).with_limit_pkts(512),
        FlowParams::weighted(1).with_limit_pkts(512),
    ];
    let mut cfg = config("qfq", 2, flows);
    cfg.rate_bps = 80_000_000;
    let (engine, clients) = Engine::start(&cfg, Arc::new(Collect::default())).unwrap();
    let greedy = common::Greedy::start(clients);
    let window = || {
        std::thread::sleep(Duration::from_millis(100));
        let (a, t0) = (engine.snapshot(), Instant::now());
        std::thread::sleep(Duration::from_millis(300));
        let (b, t1) = (engine.snapshot(), Instant::now());
        let bytes = bytes_between(&a, &b);
        let bps = (bytes[0] + bytes[1]) as f64 * 8.0 / (t1 - t0).as_secs_f64();
        (bytes[0] as f64 / bytes[1] as f64, bps)
    };
    let (ratio, bps) = window();
    assert!((ratio - 1.0).abs() < 0.1, "before: share ratio {ratio}");
    assert!((bps / 80e6 - 1.0).abs() < 0.05, "before: {bps} bit/s");

    let heavier = FlowParams::weighted(4).with_limit_pkts(512);
    engine
        .reconfigure(Change::Flow {
            index: 0,
            params: heavier,
        })
        .unwrap();
    engine.reconfigure(Change::Rate(40_000_000)).unwrap();
    let (ratio, bps) = window();
    assert!((ratio - 4.0).abs() < 0.3, "after: share ratio {ratio}");
    assert!((bps / 40e6 - 1.0).abs() < 0.05, "after: {bps} bit/s");

    // Refusals name the problem and leave the engine running.
    let e = engine
        .reconfigure(Change::Flow {
            index: 7,
            params: heavier,
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("flow 7") && e.contains("no such flow"), "{e}");
    let e = engine
        .reconfigure(Change::Flow {
            index: 1,
            params: FlowParams::weighted(0),
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("flow 1"), "{e}");
    let (ratio, _) = window();
    assert!(
        (ratio - 4.0).abs() < 0.3,
        "after refusals: share ratio {ratio}"
    );
    greedy.finish();
    let report = engine.stop(false);
    let sent: u64 = report.snapshot.clients.iter().map(|c| c.scheduled).sum();
    assert!(sent > 0);
}
