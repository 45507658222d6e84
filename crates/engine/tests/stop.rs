//! Stopping an engine: it ends promptly whatever the link rate (a packet of 64 KB takes
//! 52 s at 10 kbit/s and six days at 1 bit/s), its clients' sources end promptly whatever
//! their rate, and the final account balances exactly: every submitted packet is sent,
//! refused by the backend, dropped with a reason, or left queued (in a mailbox, in the
//! scheduler, or stashed before a full dispatcher mailbox).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use pspat_engine::traffic::{drive, periodic, SizeDist, TrafficSpec};
use pspat_engine::{ClientConfig, Engine, EngineConfig, EngineReport, Handoff, LockedEngine};
use pspat_io::{Backend, Pkt, SendError, Sender};
use pspat_sched::FlowParams;

use common::Greedy;

/// Longest a stop may take here. The bugs these tests catch take 5 s to forever.
const STOP_LIMIT: Duration = Duration::from_secs(2);

/// A backend that counts the packets it took, over all its senders.
#[derive(Default)]
struct Count(Arc<AtomicU64>);

struct CountSender(Arc<AtomicU64>);

impl Backend for Count {
    fn name(&self) -> &'static str {
        "count"
    }
    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        Ok(Box::new(CountSender(Arc::clone(&self.0))))
    }
}

impl Sender for CountSender {
    fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
        // ORDERING: Relaxed: read after every sender's thread was joined.
        self.0.fetch_add(batch.len() as u64, Ordering::Relaxed);
        Ok(batch.len())
    }
}

/// An engine of `clients` clients, each on a flow of its own that takes packets up to
/// 64 KB, on a `rate_bps` link.
fn config(rate_bps: u64, handoff: Handoff, clients: usize) -> EngineConfig {
    let flows = (0..clients)
        .map(|_| FlowParams::weighted(1).with_max_len(65_535))
        .collect();
    let mut cfg = EngineConfig::new("drr", flows, vec![ClientConfig::default(); clients]);
    cfg.rate_bps = rate_bps;
    cfg.handoff = handoff;
    cfg.spin_ns = 20_000;
    cfg
}

/// Runs `stop` on another thread and returns its result and how long it took; fails the
/// test if it takes longer than [`STOP_LIMIT`] (the thread is left behind then).
fn stop_within<T: Send + 'static>(what: &str, stop: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(stop());
    });
    match rx.recv_timeout(STOP_LIMIT) {
        Ok(r) => r,
        Err(_) => panic!(
            "{what}: stopping took over {STOP_LIMIT:?} (still waiting after {:?})",
            t0.elapsed()
        ),
    }
}

/// The account of a stopped engine: (submitted, sent, send_failed, dropped, left), left
/// being what stayed in the mailboxes, in the scheduler and in the arbiter's stash.
fn account(r: &EngineReport) -> (u64, u64, u64, u64, u64) {
    let clients = &r.snapshot.clients;
    let sum = |f: fn(&pspat_engine::stats::ClientSnapshot) -> u64| clients.iter().map(f).sum();
    let sched = r.sched.as_ref().expect("the arbiter reported");
    let in_mailboxes: u64 = sum(|c| c.submitted - c.enqueued - c.dropped_total());
    let left = in_mailboxes + sched.backlog.pkts + sched.members_left + u64::from(sched.stashed);
    (
        sum(|c| c.submitted),
        sum(|c| c.sent),
        sum(|c| c.send_failed),
        sum(|c| c.dropped_total()),
        left,
    )
}

/// Every submitted packet is sent, refused, dropped or left, and the backend took exactly
/// what was counted as sent.
fn assert_balanced(what: &str, r: &EngineReport, backend_took: u64) {
    let (submitted, sent, failed, dropped, left) = account(r);
    assert!(submitted > 0, "{what}: nothing submitted");
    assert_eq!(
        submitted,
        sent + failed + dropped + left,
        "{what}: submitted {submitted} != sent {sent} + send_failed {failed} + dropped \
         {dropped} + left {left}"
    );
    assert_eq!(
        sent, backend_took,
        "{what}: counted as sent, taken by the backend"
    );
}

/// Client hand-off: the arbiter goes on clearing packets to clients that have already
/// stopped (the shaper joins its receiving threads, `pspat run` its client threads, before
/// stopping the engine). The engine's stop transmits them on those clients' senders: the
/// account balances and the backend took every packet the link released.
#[test]
fn client_handoff_stop_transmits_what_was_cleared_to_departed_clients() {
    // 1000-byte packets at 10 Mbit/s: 1250 a second, so the mailboxes' worth queued by
    // greedy clients lasts longer than the test.
    let cfg = config(10_000_000, Handoff::Clients, 4);
    let backend = Count::default();
    let took = Arc::clone(&backend.0);
    let (engine, clients) = Engine::start(&cfg, Arc::new(backend)).unwrap();
    let greedy = Greedy::start(clients);
    std::thread::sleep(Duration::from_millis(200));
    greedy.finish();
    // The arbiter goes on releasing meanwhile (~125 packets), as during the shaper's
    // statistics request before its stop.
    std::thread::sleep(Duration::from_millis(100));
    let r = stop_within("client hand-off", move || engine.stop(false));
    let scheduled: u64 = r.snapshot.clients.iter().map(|c| c.scheduled).sum();
    let (_, sent, failed, _, left) = account(&r);
    assert!(
        left > 0,
        "nothing was left queued: the link was not the bottleneck"
    );
    assert_eq!(
        scheduled,
        sent + failed,
        "released onto the link but never transmitted"
    );
    assert_balanced("client hand-off", &r, took.load(Ordering::Relaxed));
}

/// A stop ends within a fraction of a second on a link so slow that the next packet is
/// due in 52 s (10 kbit/s) or six days (1 bit/s), in every hand-off mode; what was queued
/// is counted as left.
#[test]
fn stop_is_prompt_on_a_slow_link_in_every_handoff_mode() {
    for rate_bps in [1, 10_000] {
        for handoff in [Handoff::Arbiter, Handoff::Dispatchers(1), Handoff::Clients] {
            let what = format!("{rate_bps} bit/s, hand-off {handoff}");
            let backend = Count::default();
            let took = Arc::clone(&backend.0);
            let cfg = config(rate_bps, handoff, 2);
            let (engine, clients) = Engine::start(&cfg, Arc::new(backend)).unwrap();
            let greedy = Greedy::start_with_len(clients, 65_535);
            std::thread::sleep(Duration::from_millis(100));
            let r = stop_within(&what, move || {
                greedy.finish();
                engine.stop(false)
            });
            let (_, _, _, _, left) = account(&r);
            assert!(left > 0, "{what}: nothing left queued");
            assert_balanced(&what, &r, took.load(Ordering::Relaxed));
        }
    }
}

/// The lock-based baseline's watchdog waits for the link too: its stop is as prompt.
#[test]
fn the_lock_baseline_stops_promptly_on_a_slow_link() {
    let backend = Count::default();
    let cfg = config(1, Handoff::Arbiter, 2);
    let (engine, clients) = LockedEngine::start(&cfg, Arc::new(backend)).unwrap();
    let greedy = Greedy::start_with_len(clients, 65_535);
    std::thread::sleep(Duration::from_millis(100));
    let r = stop_within("lock baseline", move || {
        greedy.finish();
        engine.stop(false)
    });
    let sched = r.sched.expect("a summary");
    assert!(sched.backlog.pkts > 0, "nothing left queued");
}

/// A source of one packet every half hour (a paced tenant of 1 bit/s, or the benchmark's
/// victim with a long gap) ends soon after it is told to stop, in any hand-off mode.
#[test]
fn slow_sources_end_promptly_when_told_to_stop() {
    for handoff in [Handoff::Arbiter, Handoff::Clients] {
        let cfg = config(1_000_000_000, handoff, 2);
        let (engine, clients) = Engine::start(&cfg, Arc::new(Count::default())).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    if i == 0 {
                        // 200 bytes at 1 bit/s: one packet every 1600 s.
                        let spec = TrafficSpec::paced(0, 1, SizeDist::Fixed(200), 1);
                        drive(&mut c, &spec, &stop).accepted
                    } else {
                        let gap = Duration::from_secs(1800);
                        periodic(&mut c, 1, 200, gap, &stop).accepted
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let accepted = stop_within(&format!("sources, hand-off {handoff}"), move || {
            // ORDERING: Relaxed: the sources only poll it.
            stop.store(true, Ordering::Relaxed);
            threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        });
        // Each sent its first packet at once, and no other.
        assert_eq!(accepted, [1, 1], "hand-off {handoff}");
        engine.stop(false);
    }
}
