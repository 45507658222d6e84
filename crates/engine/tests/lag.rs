//! A late arbiter and the emulated link (`EngineConfig::max_lag_ns`): a backlog that
//! piled up in a mailbox while the arbiter did not look is replayed in order of arrival,
//! so that queue limits see the queues as they would have been; a backlog older than the
//! lag window does not make the link burst to catch up.

mod recording;

use std::sync::Arc;
use std::time::Duration;

use pspat_config::{parse_ipfw, Direction};
use pspat_engine::{clock, Client, ClientConfig, Engine, EngineConfig};
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

/// Flow 0 has `OLD` packets waiting from t0; flow 1 (weight 100) gets a packet 40 us into
/// every fifth of flow 0's. Submitted at once when all of them are in the past.
const OLD: u64 = 200;
const NEW: u64 = 40;
/// 1000 bytes at 100 Mbit/s.
const TX: u64 = 80_000;

/// Submits the late-pick workload through `submit(client, flow, arrival)` and checks the
/// link's departures (see the tests below).
fn late_pick(engine: Engine, mut c: Client, times: &Recorded, submit: fn(&mut Client, u32, u64)) {
    std::thread::sleep(Duration::from_millis(10));
    let t0 = clock::now_ns();
    std::thread::sleep(Duration::from_nanos((OLD + NEW) * TX + 1_000_000));
    let mut arrivals: Vec<(u64, u32)> = (0..OLD).map(|_| (t0, 0)).collect();
    arrivals.extend((0..NEW).map(|k| (t0 + 40_000 + k * 5 * TX, 1)));
    arrivals.sort_by_key(|&(at, _)| at);
    for &(at, flow) in &arrivals {
        submit(&mut c, flow, at);
    }
    assert!(clock::now_ns() - t0 < 90_000_000, "submitted too late");
    let report = engine.stop(true);
    assert_eq!(report.snapshot.clients[0].sent, OLD + NEW);
    let t = times.sent_at.lock().unwrap();
    assert!(
        t.windows(2).all(|w| w[0].0.depart_ns <= w[1].0.depart_ns),
        "departures go back"
    );
    let last = t.iter().map(|(p, _)| p.depart_ns).max().unwrap();
    let busy = last - t0;
    // Flow 1's packets are a byte (80 ns) longer.
    let want = OLD * TX + NEW * (TX + 80);
    assert!(
        busy.abs_diff(want) <= 1_000,
        "the link took {busy} ns for {} packets: {want} ns at its rate",
        OLD + NEW
    );
    // Each of flow 1's packets left as soon as it could behind the packet in flight.
    let mut new: Vec<u64> = t
        .iter()
        .filter(|(p, _)| p.len == LEN + 1)
        .map(|(p, _)| p.depart_ns)
        .collect();
    assert_eq!(new.len() as u64, NEW);
    new.sort_unstable();
    for (k, d) in new.iter().enumerate() {
        let arrived = t0 + 40_000 + k as u64 * 5 * TX;
        assert!(
            *d >= arrived + TX + 80 && *d <= arrived + 2 * TX + 1_000,
            "flow 1 packet {k}: arrived at +{} ns, left at +{} ns",
            arrived - t0,
            d - t0
        );
    }
}

/// A late arbiter on a backlogged link. A real link sends the packets of `late_pick`
/// back to back, flow 1's first as each arrives. The arbiter sees them all at once, and
/// WF2Q+ picks each of flow 1's packets when its turn comes, though it arrived after the
/// link went idle: the link does not restart at that arrival (that lost the time from
/// `idle_at` to it, 12 ms of 19 ms here, and half a percent of a 200 Mbit/s shaper's
/// rate), it stays busy with no gap from the first packet's start to the last one's end.
#[test]
fn a_late_pick_of_a_newer_packet_leaves_no_gap_on_a_backlogged_link() {
    let times = Arc::new(Recorded::default());
    let flows = vec![
        FlowParams::weighted(1).with_limit_pkts(1000),
        FlowParams::weighted(100).with_limit_pkts(1000),
    ];
    let mut cfg = EngineConfig::new("wf2q+", flows, vec![ClientConfig::default()]);
    cfg.rate_bps = RATE;
    cfg.mailbox_entries = 1024;
    cfg.delta_a_ns = 100_000_000;
    cfg.spin_ns = 10_000_000_000;
    cfg.max_lag_ns = 100_000_000;
    let (engine, mut clients) =
        Engine::start(&cfg, Arc::new(RecordingBackend(Arc::clone(&times)))).unwrap();
    // Flow 1's packets are a byte longer, to tell them apart when they leave.
    late_pick(engine, clients.pop().unwrap(), &times, |c, flow, at| {
        c.submit_at(flow, LEN + flow, at).unwrap();
    });
}

/// The same with a dummynet configuration (a `sched` and two weighted queues, as
/// `pspat shape` runs it), frames classified by their UDP port.
#[test]
fn a_late_pick_leaves_no_gap_on_a_backlogged_dummynet_link() {
    let times = Arc::new(Recorded::default());
    let text = "sched 1 config type wf2q+ bw 100Mbit/s\n\
        queue 1 config sched 1 weight 1 queue 1000\n\
        queue 2 config sched 1 weight 100 queue 1000\n\
        add 100 queue 1 udp from any to any 1000\n\
        add 200 queue 2 udp from any to any 1001\n";
    let config = parse_ipfw(text, "t.ipfw").unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = EngineConfig::new("fifo", Vec::new(), vec![ClientConfig::default()]);
    cfg.mailbox_entries = 1024;
    cfg.delta_a_ns = 100_000_000;
    cfg.spin_ns = 10_000_000_000;
    cfg.max_lag_ns = 100_000_000;
    cfg.dummynet = Some(Arc::new(config));
    let (engine, mut clients) =
        Engine::start(&cfg, Arc::new(RecordingBackend(Arc::clone(&times)))).unwrap();
    late_pick(engine, clients.pop().unwrap(), &times, |c, flow, at| {
        let frame = udp_frame(1000 + flow as u16);
        c.submit_frame_tagged_at(&frame, LEN + flow, Direction::Out, 0, at)
            .unwrap();
    });
}

/// An Ethernet, IPv4 and UDP header from 10.0.0.1 to 10.0.0.2, port 5000 to `dport`.
fn udp_frame(dport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&5000u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 8, 0, 0]);
    f
}
