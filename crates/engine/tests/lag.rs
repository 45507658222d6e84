//! A late arbiter and the emulated link (`EngineConfig::max_lag_ns`): a backlog that
//! piled up in a mailbox while the arbiter did not look is replayed in order of arrival,
//! so that queue limits see the queues as they would have been; a backlog older than the
//! lag window does not make the link burst to catch up.

mod recording;

use std::sync::Arc;
use std::time::Duration;

use pspat_engine::{clock, ClientConfig, Engine, EngineConfig};
use pspat_sched::FlowParams;
use recording::{Recorded, RecordingBackend};

const FLOWS: u32 = 4;
const N: u64 = 400;
const LEN: u32 = 1000;
/// 1000-byte packets at 100 Mbit/s: 80 us each.
const RATE: u64 = 100_000_000;

/// An engine with `FLOWS` DRR flows of `limit` packets on a 100 Mbit/s link, draining its
/// mailbox only every 100 ms (once when it starts, then 100 ms later), so that what one
/// client submits meanwhile is found at once (as when the arbiter was descheduled).
fn start(limit: u32, max_lag_ns: u64, times: &Arc<Recorded>) -> (Engine, pspat_engine::Client) {
    let flows = vec![FlowParams::weighted(1).with_limit_pkts(limit); FLOWS as usize];
    let mut cfg = EngineConfig::new("drr", flows, vec![ClientConfig::default()]);
    cfg.rate_bps = RATE;
    cfg.mailbox_entries = 1024;
    cfg.delta_a_ns = 100_000_000;
    // Never blocks, so that no wake-up drains early.
    cfg.spin_ns = 10_000_000_000;
    cfg.max_lag_ns = max_lag_ns;
    let (engine, mut clients) =
        Engine::start(&cfg, Arc::new(RecordingBackend(Arc::clone(times)))).unwrap();
    (engine, clients.pop().unwrap())
}

/// Submits `N` packets round robin over the flows, stamped one every 100 us (80% of the
/// link) from just after the engine started (and drained once): it waits until they are all in
/// the past and submits them at once, before the arbiter's next drain, 100 ms after the
/// first.
fn submit_backlog(c: &mut pspat_engine::Client) {
    // After the first drain: the link of a scheduler found empty restarts from then.
    std::thread::sleep(Duration::from_millis(10));
    let t0 = clock::now_ns();
    std::thread::sleep(Duration::from_nanos(N * 100_000));
    for i in 0..N {
        c.submit_at((i % u64::from(FLOWS)) as u32, LEN, t0 + i * 100_000)
            .unwrap_or_else(|e| panic!("packet {i}: {e}"));
    }
    let late = Duration::from_nanos(clock::now_ns() - t0);
    assert!(
        late < Duration::from_millis(90),
        "submitted {late:?} after the start"
    );
}

/// Arriving at 80% of the link, round robin, no queue ever holds more than a packet or
/// two: replayed in order of arrival, a backlog of 400 loses none to queues of 10. (The
/// drain before replay entered all 400 at once: 360 were dropped.)
#[test]
fn a_backlog_is_replayed_in_order_of_arrival() {
    let times = Arc::new(Recorded::default());
    let (engine, mut c) = start(10, 100_000_000, &times);
    submit_backlog(&mut c);
    let report = engine.stop(true);
    let s = report.snapshot.clients[0];
    assert_eq!(s.dropped_total(), 0, "{s:?}");
    assert_eq!(s.sent, N);
}

/// The same backlog, 32 ms of link time that arrived between 100 and 60 ms before the
/// drain (about), with a lag window of 1 ms: the link does not make up for the time
/// before the window by sending the backlog at once; it sends it at its rate from the
/// window's start.
#[test]
fn a_backlog_older_than_the_lag_window_is_sent_at_the_link_rate() {
    let times = Arc::new(Recorded::default());
    let (engine, mut c) = start(N as u32, 1_000_000, &times);
    submit_backlog(&mut c);
    let report = engine.stop(true);
    assert_eq!(report.snapshot.clients[0].sent, N);
    let t = times.sent_at.lock().unwrap();
    let span = Duration::from_nanos(t[t.len() - 1].1 - t[0].1);
    // 400 packets of 80 us, less the window's 1 ms and a few scans of slack.
    assert!(
        span >= Duration::from_millis(25),
        "the backlog left within {span:?}: the link burst to catch up"
    );
}
