//! dummynet's link emulation behind the arbiter: a pipe's `delay` holds every packet after
//! the link, `plr` loses packets with its own drop reason, RED drops early, and a queue
//! attached to a pipe runs on the pipe's link, and a link with a framing (`linklayer atm`,
//! `mpu`, ...) sends frames one hand-computed wire time apart. Configurations are written
//! in ipfw syntax, as users write them.

mod recording;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pspat_config::classify::FlowKey;
use pspat_config::{parse_ipfw, Direction};
use pspat_engine::clock;
use pspat_engine::config::{ClientConfig, EngineConfig};
use pspat_engine::engine::Engine;
use pspat_engine::stats::ArbiterDrop;
use pspat_engine::SchedRef;
use pspat_engine::{Client, SubmitError};
use pspat_io::{Backend, Pkt, SendError, Sender};
use recording::{Recorded, RecordingBackend};

/// Records, per packet sent, what `what` reads of it when it reaches the backend (given
/// the clock then): how long after its submission ([`delays`]), when the emulated link
/// released it ([`departures`]).
struct Log<T> {
    entries: Mutex<Vec<T>>,
    what: fn(&Pkt, u64) -> T,
}

/// Each packet's time from submission to the backend (ns, wall clock).
fn delays() -> Arc<Log<u64>> {
    Arc::new(Log {
        entries: Mutex::default(),
        what: |p, now| now - p.submit_ns,
    })
}

/// Each packet's length and departure (`depart_ns`, which the arbiter sets from the
/// emulated link: exact, not a wall-clock reading).
fn departures() -> Arc<Log<(u32, u64)>> {
    Arc::new(Log {
        entries: Mutex::default(),
        what: |p, _| (p.len, p.depart_ns),
    })
}

struct LogBackend<T>(Arc<Log<T>>);
struct LogSender<T>(Arc<Log<T>>);

impl<T: Send + 'static> Backend for LogBackend<T> {
    fn name(&self) -> &'static str {
        "log"
    }
    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        Ok(Box::new(LogSender(Arc::clone(&self.0))))
    }
}

impl<T: Send + 'static> Sender for LogSender<T> {
    fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
        let now = clock::now_ns();
        let what = self.0.what;
        self.0
            .entries
            .lock()
            .unwrap()
            .extend(batch.iter().map(|p| what(p, now)));
        Ok(batch.len())
    }
}

fn start(text: &str, clients: usize, backend: Arc<dyn Backend>) -> (Engine, Vec<Client>) {
    let config = parse_ipfw(text, "t.ipfw").unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = EngineConfig::new("fifo", Vec::new(), vec![ClientConfig::default(); clients]);
    cfg.mailbox_entries = 4096;
    cfg.dummynet = Some(Arc::new(config));
    Engine::start(&cfg, backend).unwrap()
}

fn key(last: u8) -> FlowKey {
    FlowKey::v4(
        u32::from_be_bytes([10, 0, 0, last]),
        0x0a01_0001,
        5000,
        53,
        17,
    )
}

/// Submits `n` packets of `len` bytes, waiting while the mailbox is full.
fn submit_all(c: &mut Client, k: &FlowKey, n: u32, len: u32) {
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while sent < n {
        match c.submit_key(k, len, Direction::Out) {
            Ok(_) => sent += 1,
            Err(SubmitError::MailboxFull) => {
                assert!(Instant::now() < deadline, "stuck after {sent} packets");
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_pipe_delays_every_packet_and_loses_its_share_with_its_own_reason() {
    const N: u32 = 40_000;
    let rec = delays();
    let (engine, mut clients) = start(
        "pipe 1 config delay 20 plr 0.05\nadd 100 pipe 1 ip from any to any\n",
        1,
        Arc::new(LogBackend(Arc::clone(&rec))),
    );
    submit_all(&mut clients[0], &key(1), N, 200);
    let report = engine.stop(true);
    let c = &report.snapshot.clients[0];
    let lost = c.dropped[ArbiterDrop::Plr.slot()];
    assert_eq!(c.sent + lost, u64::from(N), "every packet sent or lost");
    assert_eq!(c.dropped_total(), lost, "no other drop");
    // 5% of 40 000 is 2 000, standard deviation 44.
    assert!((1_800..=2_200).contains(&lost), "{lost} lost");
    let mut d = rec.entries.lock().unwrap().clone();
    assert_eq!(d.len() as u64, c.sent);
    d.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    assert!(d[0] >= 20_000_000, "a packet left after {} ms", ms(d[0]));
    let p50 = d[d.len() / 2];
    assert!(p50 < 25_000_000, "median {} ms for a 20 ms delay", ms(p50));
    let dn = report
        .sched
        .and_then(|s| s.dummynet)
        .expect("a dummynet configuration has statistics");
    assert_eq!(dn.totals().drops.get(ArbiterDrop::Plr), lost);
    // ... and the pipe's queue counts them too, as `dnctl pipe show` shows them per queue.
    let queues: u64 = dn
        .schedulers
        .iter()
        .flat_map(|s| &s.instances)
        .flat_map(|i| &i.queues)
        .map(|q| q.counters.drops.get(ArbiterDrop::Plr))
        .sum();
    assert_eq!(queues, lost);
}

#[test]
fn red_drops_early_on_a_congested_queue_and_counts_it() {
    let (engine, mut clients) = start(
        "pipe 1 config bw 4Mbit/s queue 100 red 0.02/5/30/0.1\nadd 100 pipe 1 ip from any to any\n",
        1,
        Arc::new(pspat_io::null::Null),
    );
    // 4 Mbit/s is 500 packets of 1000 B per second: 2000 packets keep it congested for
    // about 4 s, so stop early without draining.
    let c = &mut clients[0];
    let k = key(1);
    let t0 = Instant::now();
    let mut accepted = 0u64;
    while t0.elapsed() < Duration::from_millis(600) {
        match c.submit_key(&k, 1000, Direction::Out) {
            Ok(_) => accepted += 1,
            Err(SubmitError::MailboxFull) => std::thread::sleep(Duration::from_micros(200)),
            Err(e) => panic!("{e}"),
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let report = engine.stop(false);
    let s = &report.snapshot.clients[0];
    let red = s.dropped[ArbiterDrop::Red.slot()];
    assert!(
        red > 0,
        "no early drop in {accepted} packets: {:?}",
        s.dropped
    );
    // The average stays below the 100-slot limit, so RED, not the tail, drops.
    let tail = s.dropped_total() - red;
    assert!(tail < red, "{tail} tail drops, {red} early");
}

#[test]
fn a_queue_attached_to_a_pipe_runs_on_its_link_and_delay() {
    let rec = delays();
    let (engine, mut clients) = start(
        "pipe 1 config bw 40Mbit/s delay 10\n\
         queue 1 config pipe 1 weight 3 queue 4096\n\
         add 100 queue 1 ip from any to any\n",
        1,
        Arc::new(LogBackend(Arc::clone(&rec))),
    );
    // 5000 packets of 1000 B at 40 Mbit/s: 1 s on the link.
    let t0 = Instant::now();
    submit_all(&mut clients[0], &key(1), 5_000, 1000);
    let report = engine.stop(true);
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(report.snapshot.clients[0].sent, 5_000);
    assert!(secs > 0.95, "5000 packets at 40 Mbit/s took only {secs} s");
    let d = rec.entries.lock().unwrap();
    assert!(
        d.iter().all(|&ns| ns >= 10_000_000),
        "a packet skipped the delay"
    );
    let dn = report
        .sched
        .and_then(|s| s.dummynet)
        .expect("a dummynet configuration has statistics");
    let s = dn
        .scheduler(SchedRef::Sched(1))
        .expect("queue 1 runs on sched 1, pipe 1's default scheduler");
    assert_eq!(s.algorithm, "wf2q+");
    assert_eq!(s.bandwidth_bps, 40_000_000);
}

/// The statistics show a scheduler's delay and how many packets its delay line holds, as
/// `dnctl pipe show` shows a pipe's delay; a draining stop waits for the line to empty.
#[test]
fn statistics_show_the_delay_line() {
    let (engine, mut clients) = start(
        "pipe 1 config delay 500\nadd 100 pipe 1 ip from any to any\n",
        1,
        Arc::new(pspat_io::null::Null),
    );
    submit_all(&mut clients[0], &key(1), 100, 100);
    // Released at once (no bandwidth), held for 500 ms: all 100 are in the line unless this
    // thread was kept from running for half a second.
    let deadline = Instant::now() + Duration::from_secs(2);
    let s = loop {
        let dn = engine.dummynet_stats().unwrap();
        let s = dn.scheduler(SchedRef::Pipe(1)).unwrap().clone();
        if s.delayed_pkts == 100 || Instant::now() > deadline {
            break (s, dn);
        }
    };
    assert_eq!(s.0.delay_ns, 500_000_000);
    assert_eq!(s.0.delayed_pkts, 100, "{}", s.1);
    assert!(
        s.1.to_string()
            .contains("delay 500 ms, 100 in the delay line"),
        "{}",
        s.1
    );
    let report = engine.stop(true);
    assert_eq!(report.snapshot.clients[0].sent, 100);
}

/// An engine with `one_pass 0`, pipes 1 and 2 configured with `pipe1` and `pipe2`, and
/// rules that send every packet through pipe 1, then pipe 2, then allow it; its backend
/// records what it sends and discards.
fn chained(pipe1: &str, pipe2: &str) -> (Engine, Vec<Client>, Arc<Recorded>) {
    let fates = Arc::new(Recorded::default());
    let (engine, clients) = start(
        &format!(
            "sysctl net.inet.ip.fw.one_pass=0\n\
             pipe 1 config {pipe1}\n\
             pipe 2 config {pipe2}\n\
             add 100 pipe 1 ip from any to any\n\
             add 200 pipe 2 ip from any to any\n\
             add 300 allow ip from any to any\n"
        ),
        1,
        Arc::new(RecordingBackend(Arc::clone(&fates))),
    );
    (engine, clients, fates)
}

/// With `one_pass 0` a packet leaving pipe 1 goes on at the next rule and crosses pipe 2:
/// pipe 1's rate and pipe 2's delay both apply, and both pipes count every packet. (As in
/// ipfw, the packet then goes on to rule 300: without an `allow` the default denies it.)
#[test]
fn one_pass_0_sends_a_packet_through_every_pipe_its_rules_name() {
    const N: u32 = 1_000;
    let (engine, mut clients, fates) = chained("bw 20Mbit/s queue 2000", "delay 20");
    submit_all(&mut clients[0], &key(1), N, 1000);
    let report = engine.stop(true);
    let c = &report.snapshot.clients[0];
    assert_eq!((c.sent, c.dropped_total()), (u64::from(N), 0));
    assert_eq!(c.enqueued, u64::from(N));
    let sent: Vec<(u32, u64)> = fates
        .sent_at
        .lock()
        .unwrap()
        .iter()
        .map(|(p, at)| (p.seq, at - p.submit_ns))
        .collect();
    // Each packet is sent with its own tag (its sequence number here), once.
    let mut tags: Vec<u32> = sent.iter().map(|s| s.0).collect();
    tags.sort_unstable();
    assert_eq!(tags, (0..N).collect::<Vec<_>>());
    let ms = |ns: u64| ns as f64 / 1e6;
    let min = sent.iter().map(|s| s.1).min().unwrap();
    let max = sent.iter().map(|s| s.1).max().unwrap();
    assert!(
        min >= 20_000_000,
        "a packet skipped pipe 2's delay: {} ms",
        ms(min)
    );
    // 1000 packets of 1000 B at 20 Mbit/s: the last leaves pipe 1 at least 999 * 0.4 ms
    // after the first was submitted.
    assert!(
        max >= 399_600_000,
        "pipe 1's rate exceeded: last after {} ms",
        ms(max)
    );
    let dn = report.sched.and_then(|s| s.dummynet).unwrap();
    for pipe in [1, 2] {
        let s = dn.scheduler(SchedRef::Pipe(pipe)).unwrap();
        assert_eq!(s.totals().sent_pkts, u64::from(N), "pipe {pipe}\n{dn}");
    }
}

/// A packet dropped at a later pipe of its chain had entered the scheduler: it is counted
/// as a drop with its reason, the backend discards it by its tag, and what is left in the
/// mailboxes stays `submitted - enqueued - dropped`.
#[test]
fn one_pass_0_counts_a_drop_at_a_later_pipe() {
    const N: u32 = 1_000;
    let (engine, mut clients, fates) = chained("bw 40Mbit/s queue 2000", "bw 10Mbit/s queue 20");
    submit_all(&mut clients[0], &key(1), N, 1000);
    let report = engine.stop(true);
    let c = &report.snapshot.clients[0];
    let full = c.dropped_for(pspat_sched::DropReason::FlowPacketLimit);
    // Pipe 1 sends 4 times what pipe 2 carries, into a queue of 20.
    assert!(full > u64::from(N) / 2, "{full} dropped at pipe 2");
    assert_eq!(c.dropped_total(), full, "only pipe 2's queue drops");
    assert_eq!(c.sent + full, u64::from(N));
    assert_eq!(c.submitted - c.enqueued - c.dropped_total(), 0, "{c:?}");
    let dn = report.sched.and_then(|s| s.dummynet).unwrap();
    let at = |p| dn.scheduler(SchedRef::Pipe(p)).unwrap().totals();
    assert_eq!(at(1).drops.total(), 0);
    assert_eq!(at(1).sent_pkts, u64::from(N));
    assert_eq!(at(2).drops.total(), full);
    // Every tag comes back once: sent or discarded.
    let mut tags: Vec<u32> = fates.sent.lock().unwrap().clone();
    tags.extend(fates.discarded.lock().unwrap().iter());
    tags.sort_unstable();
    assert_eq!(tags, (0..N).collect::<Vec<_>>());
}

/// Checks that `departures` (in order) leave one wire time `wire_ns` apart while the link
/// is busy: no two closer (the link is never faster), and most exactly that far apart
/// (a gap is a submission that stalled while the link ran dry, which a loaded machine may
/// cause now and then).
fn assert_spaced(departures: &[u64], wire_ns: u64, what: &str) {
    let gaps: Vec<u64> = departures.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|&g| g >= wire_ns),
        "{what}: packets closer than {wire_ns} ns: {gaps:?}"
    );
    let exact = gaps.iter().filter(|&&g| g == wire_ns).count();
    assert!(
        exact * 4 >= gaps.len() * 3,
        "{what}: only {exact} of {} gaps are {wire_ns} ns: {gaps:?}",
        gaps.len()
    );
}

/// Sends 100 frames of `len` bytes through `pipe 1 config bw 10Mbit/s queue 1000 OPTIONS`
/// (800 ns a byte) and checks that its link charged each `wire` bytes: departures 800 *
/// `wire` ns apart, frames counted as they are and the wire bytes beside them. Returns
/// pipe 1's statistics.
fn charges(options: &str, len: u32, wire: u64) -> pspat_engine::SchedulerStats {
    const N: u32 = 100;
    let rec = departures();
    let (engine, mut clients) = start(
        &format!(
            "pipe 1 config bw 10Mbit/s queue 1000 {options}
add 100 pipe 1 ip from any to any
"
        ),
        1,
        Arc::new(LogBackend(Arc::clone(&rec))),
    );
    submit_all(&mut clients[0], &key(1), N, len);
    let report = engine.stop(true);
    assert_eq!(report.snapshot.clients[0].sent, u64::from(N));
    let sent = rec.entries.lock().unwrap().clone();
    assert!(sent.iter().all(|s| s.0 == len));
    let mut departures: Vec<u64> = sent.iter().map(|s| s.1).collect();
    departures.sort_unstable();
    assert_spaced(&departures, 800 * wire, options);
    let dn = report.sched.and_then(|s| s.dummynet).unwrap();
    let s = dn.scheduler(SchedRef::Pipe(1)).unwrap().clone();
    assert_eq!(s.totals().sent_bytes, u64::from(N * len), "{options}");
    assert_eq!(s.wire_bytes(), u64::from(N) * wire, "{options}");
    s
}

/// `linklayer atm overhead 10`: a 1000-byte frame is 1010 bytes, 22 ATM cells (21 carry
/// only 1008), 22 * 53 = 1166 bytes on the wire: 932 800 ns at 10 Mbit/s, not 800 000.
#[test]
fn an_atm_link_charges_whole_cells() {
    let s = charges("linklayer atm overhead 10", 1000, 1166);
    assert_eq!(s.framing.to_string(), "overhead 10 linklayer atm");
}

/// `linklayer ptm overhead 8`: 1000 + 8 = 1008 bytes, plus one byte per 64 or part of 64
/// (1008 / 64 = 15.75: 16), 1024 bytes on the wire: 819 200 ns at 10 Mbit/s.
#[test]
fn a_ptm_link_adds_a_byte_per_64() {
    charges("linklayer ptm overhead 8", 1000, 1024);
}

/// `mpu 200`: a 64-byte frame is charged 200 bytes, 160 000 ns at 10 Mbit/s (not 51 200);
/// CAKE's `ethernet` preset (overhead 24 on the frame, mpu 84) charges it 88 bytes,
/// 70 400 ns.
#[test]
fn the_mpu_is_the_smallest_charge() {
    charges("mpu 200", 64, 200);
    charges("framing ethernet", 64, 88);
}

/// A reconfiguration that gives the link a framing rebuilds it as a bandwidth change does:
/// frames sent after it are charged the framed length.
#[test]
fn a_reconfigured_framing_applies_to_the_running_link() {
    const N: u32 = 40;
    let rec = departures();
    let rules = "add 100 pipe 1 ip from any to any\n";
    let (engine, mut clients) = start(
        &format!("pipe 1 config bw 10Mbit/s queue 1000\n{rules}"),
        1,
        Arc::new(LogBackend(Arc::clone(&rec))),
    );
    let sent = |engine: &Engine| {
        engine
            .dummynet_stats()
            .unwrap()
            .scheduler(SchedRef::Pipe(1))
            .map_or(0, |s| s.totals().sent_pkts)
    };
    let drain = |engine: &Engine, n: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while sent(engine) < n {
            assert!(Instant::now() < deadline, "{} of {n} sent", sent(engine));
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    submit_all(&mut clients[0], &key(1), N, 1000);
    drain(&engine, u64::from(N));
    let framed = parse_ipfw(
        &format!("pipe 1 config bw 10Mbit/s queue 1000 linklayer atm overhead 10\n{rules}"),
        "t.ipfw",
    )
    .unwrap();
    engine
        .reconfigure(pspat_engine::Change::Config(Arc::new(framed)))
        .unwrap();
    submit_all(&mut clients[0], &key(1), N, 1000);
    drain(&engine, 2 * u64::from(N));
    let dn = engine.dummynet_stats().unwrap();
    let s = dn.scheduler(SchedRef::Pipe(1)).unwrap();
    // 40 frames charged 1000 bytes, then 40 charged 1166.
    assert_eq!(s.wire_bytes(), u64::from(N) * (1000 + 1166));
    engine.stop(true);
    let mut d: Vec<u64> = rec.entries.lock().unwrap().iter().map(|s| s.1).collect();
    d.sort_unstable();
    let (before, after) = d.split_at(N as usize);
    assert_spaced(before, 800_000, "before the change");
    assert_spaced(after, 932_800, "after the change");
}
