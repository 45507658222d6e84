//! The engine with a dummynet-style configuration: rules and tables choose the flowset,
//! masks create queues and scheduler instances (each its own link), limits are counted
//! drops, and everything can change while the engine runs.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pspat_config::classify::FlowKey;
use pspat_config::{
    Action, AddrMatch, Config, Direction, FlowMask, FlowsetSpec, Framing, Match, Prefix,
    QueueLimit, QueueManagement, Rule, SchedSpec, Table, Target, DEFAULT_IDLE_NS,
};
use pspat_engine::stats::{ArbiterDrop, Filtered};
use pspat_engine::{Change, Client, ClientConfig, Engine, EngineConfig, SubmitError};
use pspat_io::null::Null as NullBackend;

fn sched(id: u32, alg: &str, bw: u64, mask: FlowMask, max_instances: u32) -> SchedSpec {
    SchedSpec {
        id,
        algorithm: alg.into(),
        params: Vec::new(),
        bandwidth_bps: bw,
        framing: Framing::PLAIN,
        mask,
        max_instances,
        idle_ns: DEFAULT_IDLE_NS,
        class: None,
    }
}

fn queue(id: u32, sched: u32, weight: u32, mask: FlowMask, max_queues: u32) -> FlowsetSpec {
    FlowsetSpec {
        id,
        sched,
        weight,
        max_len: 1500,
        limit: QueueLimit::Packets(256),
        qm: QueueManagement::default(),
        mask,
        max_queues,
        idle_ns: DEFAULT_IDLE_NS,
    }
}

fn host(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

fn from_host(number: u32, action: Action, last: u8) -> Rule {
    Rule {
        number,
        action,
        matcher: Match {
            direction: Some(Direction::Out),
            src: AddrMatch::Prefixes(vec![Prefix {
                addr: host(last),
                len: 32,
            }]),
            ..Match::default()
        },
    }
}

fn key(last: u8, dst_port: u16) -> FlowKey {
    FlowKey::v4(
        u32::from_be_bytes([10, 0, 0, last]),
        0x0a01_0001,
        5000,
        dst_port,
        17,
    )
}

fn start(config: Config, clients: usize) -> (Engine, Vec<Client>) {
    let mut cfg = EngineConfig::new("fifo", Vec::new(), vec![ClientConfig::default(); clients]);
    cfg.spin_ns = 20_000;
    cfg.dummynet = Some(Arc::new(config));
    Engine::start(&cfg, Arc::new(NullBackend)).unwrap()
}

/// Client threads sending 1000-byte packets with a fixed key each, as fast as they can.
struct Senders {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<u64>>,
}

impl Senders {
    fn start(clients: Vec<Client>, keys: Vec<FlowKey>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = clients
            .into_iter()
            .zip(keys)
            .map(|(mut c, k)| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut refused = 0;
                    while !stop.load(Ordering::Relaxed) {
                        match c.submit_key(&k, 1000, Direction::Out) {
                            Ok(_) => {}
                            Err(SubmitError::MailboxFull) => {
                                std::thread::sleep(Duration::from_micros(50))
                            }
                            Err(SubmitError::Filtered(_)) => {
                                refused += 1;
                                std::thread::sleep(Duration::from_micros(50))
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    refused
                })
            })
            .collect();
        Self { stop, threads }
    }

    fn finish(self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect()
    }
}

/// Bits per second each client got onto the links over the window, after 100 ms of
/// warm-up.
fn rates(engine: &Engine) -> Vec<f64> {
    rates_after(engine, 100)
}

/// How long rates are measured (ms). A link whose arbiter ran late makes up for up to
/// `max_lag` (20 ms) of lost time: over 300 ms on a loaded machine that read 6% above the
/// link's rate; over 800 ms, at most 2.5%.
const WINDOW_MS: u64 = 800;

/// Bits per second each client got onto the links over the window, after `warm_ms`.
fn rates_after(engine: &Engine, warm_ms: u64) -> Vec<f64> {
    std::thread::sleep(Duration::from_millis(warm_ms));
    let (a, t0) = (engine.snapshot(), Instant::now());
    std::thread::sleep(Duration::from_millis(WINDOW_MS));
    let (b, t1) = (engine.snapshot(), Instant::now());
    let secs = (t1 - t0).as_secs_f64();
    a.clients
        .iter()
        .zip(&b.clients)
        .map(|(x, y)| (y.scheduled_bytes - x.scheduled_bytes) as f64 * 8.0 / secs)
        .collect()
}

fn near(x: f64, want: f64, tol: f64) -> bool {
    (x / want - 1.0).abs() < tol
}

#[test]
fn rules_pick_flowsets_and_weights_and_rates_change_live() {
    // The slides' first example: sched 4 (QFQ, 40 Mbit/s), queues 1 and 2 of weights 10
    // and 3, rules by source address.
    let mut c = Config::default();
    c.schedulers
        .insert(4, sched(4, "qfq", 40_000_000, FlowMask::default(), 1));
    c.flowsets
        .insert(1, queue(1, 4, 10, FlowMask::default(), 1));
    c.flowsets.insert(2, queue(2, 4, 3, FlowMask::default(), 1));
    c.rules
        .push(from_host(100, Action::Queue(Target::Id(1)), 1));
    c.rules
        .push(from_host(100, Action::Queue(Target::Id(2)), 2));
    let (engine, clients) = start(c.clone(), 2);
    let senders = Senders::start(clients, vec![key(1, 80), key(2, 80)]);
    let r = rates(&engine);
    assert!(near(r[0] / r[1], 10.0 / 3.0, 0.1), "shares {r:?}");
    assert!(near(r[0] + r[1], 40e6, 0.05), "rate {r:?}");

    // Live: queue 2 becomes weight 10, the link 20 Mbit/s.
    c.flowsets.get_mut(&2).unwrap().weight = 10;
    c.schedulers.get_mut(&4).unwrap().bandwidth_bps = 20_000_000;
    engine
        .reconfigure(Change::Config(Arc::new(c.clone())))
        .unwrap();
    let r = rates(&engine);
    assert!(near(r[0] / r[1], 1.0, 0.1), "shares after {r:?}");
    assert!(near(r[0] + r[1], 20e6, 0.05), "rate after {r:?}");

    // Live rule change: host 2 now goes to queue 1 as well (one queue: FIFO between them),
    // and what cannot change live is refused, naming the object.
    let mut bad = c.clone();
    bad.schedulers.get_mut(&4).unwrap().algorithm = "drr".into();
    let e = engine
        .reconfigure(Change::Config(Arc::new(bad)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("sched 4") && e.contains("algorithm"), "{e}");
    c.rules[1].action = Action::Deny;
    engine.reconfigure(Change::Config(Arc::new(c))).unwrap();
    // What host 2 had queued (256 packets, 0.2 s of its share) drains first.
    let r = rates_after(&engine, 400);
    assert!(r[1] < 1e5, "host 2 is denied now: {r:?}");
    assert!(near(r[0], 20e6, 0.05), "host 1 has the link: {r:?}");
    let refused = senders.finish();
    let report = engine.stop(false);
    let s = &report.snapshot.clients[1];
    assert!(refused[1] > 0);
    assert_eq!(s.filtered[Filtered::Denied.slot()], refused[1]);
}

#[test]
fn a_scheduler_mask_gives_each_customer_its_own_link_up_to_a_limit() {
    // `sched 1 config type drr bw 8Mbit/s mask src-ip 0xff` with at most 3 instances;
    // four customers: three get 8 Mbit/s each, the fourth is dropped (instance limit).
    let by_host = FlowMask {
        src_ip: 0xff,
        ..FlowMask::default()
    };
    let mut c = Config::default();
    c.schedulers
        .insert(1, sched(1, "drr", 8_000_000, by_host, 3));
    c.flowsets.insert(1, queue(1, 1, 1, FlowMask::default(), 4));
    c.rules.push(Rule {
        number: 100,
        action: Action::Queue(Target::Id(1)),
        matcher: Match::default(),
    });
    let (engine, clients) = start(c, 4);
    let senders = Senders::start(clients, (1..=4).map(|h| key(h, 80)).collect());
    let r = rates(&engine);
    let served: Vec<&f64> = r.iter().filter(|x| **x > 1e6).collect();
    assert_eq!(served.len(), 3, "three instances: {r:?}");
    for x in served {
        assert!(
            near(*x, 8e6, 0.05),
            "each instance is its own 8 Mbit/s link: {r:?}"
        );
    }
    senders.finish();
    // Drain: what is still in the mailboxes (not yet in a scheduler) is sent or dropped
    // too, so the account below is exact.
    let report = engine.stop(true);
    let dropped: u64 = report
        .snapshot
        .clients
        .iter()
        .map(|s| s.dropped_by(ArbiterDrop::InstanceLimit))
        .sum();
    assert!(
        dropped > 0,
        "the fourth customer's packets are counted drops"
    );
    let sum = |f: fn(&pspat_engine::stats::ClientSnapshot) -> u64| -> u64 {
        report.snapshot.clients.iter().map(f).sum()
    };
    assert_eq!(report.sched.as_ref().unwrap().backlog.pkts, 0, "drained");
    assert_eq!(
        sum(|s| s.submitted),
        sum(|s| s.scheduled) + sum(|s| s.dropped_total()),
        "every packet is sent or dropped with a reason"
    );
}

#[test]
fn a_flow_mask_makes_one_queue_per_flow_up_to_a_limit_and_tables_dispatch() {
    // `add queue tablearg out src-ip table(1)`: host 1 -> queue 20 (one queue per
    // destination port, at most 2), host 2 -> queue 21; host 3 is in no table entry and
    // no rule matches it: the default denies it.
    let per_port = FlowMask {
        dst_port: 0xffff,
        ..FlowMask::default()
    };
    let mut c = Config::default();
    c.schedulers
        .insert(3, sched(3, "qfq+", 30_000_000, FlowMask::default(), 1));
    c.flowsets.insert(20, queue(20, 3, 1, per_port, 2));
    c.flowsets
        .insert(21, queue(21, 3, 2, FlowMask::default(), 1));
    let mut t = Table {
        id: 1.into(),
        entries: Vec::new(),
    };
    t.entries.push((
        Prefix {
            addr: host(1),
            len: 32,
        },
        20,
    ));
    t.entries.push((
        Prefix {
            addr: host(2),
            len: 32,
        },
        21,
    ));
    c.tables.insert(1.into(), t);
    c.rules.push(Rule {
        number: 100,
        action: Action::Queue(Target::Tablearg),
        matcher: Match {
            direction: Some(Direction::Out),
            src: AddrMatch::Table(1.into()),
            ..Match::default()
        },
    });
    let (engine, clients) = start(c, 5);
    // Host 1 on ports 80, 443 and 8080 (the third queue is over the limit), host 2, host 3.
    let keys = vec![
        key(1, 80),
        key(1, 443),
        key(1, 8080),
        key(2, 80),
        key(3, 80),
    ];
    let senders = Senders::start(clients, keys);
    let r = rates(&engine);
    // Queues: two of host 1's ports (whichever arrived first; w1 each) and 21 (w2): 7.5,
    // 7.5 and 15 Mbit/s; host 1's third port is over max-queues.
    let mut host1 = [r[0], r[1], r[2]];
    host1.sort_by(f64::total_cmp);
    assert!(host1[0] < 1e5, "third port over max-queues: {r:?}");
    assert!(near(host1[1], 7.5e6, 0.08), "{r:?}");
    assert!(near(host1[2], 7.5e6, 0.08), "{r:?}");
    assert!(near(r[3], 15e6, 0.08), "{r:?}");
    assert!(r[4] < 1e5, "no rule for host 3: {r:?}");
    let refused = senders.finish();
    let report = engine.stop(false);
    let s = &report.snapshot.clients;
    let over: u64 = s[..3]
        .iter()
        .map(|c| c.dropped_by(ArbiterDrop::QueueLimit))
        .sum();
    assert!(over > 0);
    assert_eq!(s[4].filtered[Filtered::NoRule.slot()], refused[4]);
    assert!(refused[4] > 0);
}

#[test]
fn allowed_packets_skip_scheduling_and_engines_without_a_configuration_refuse_keys() {
    let mut c = Config::default();
    c.schedulers
        .insert(1, sched(1, "fifo", 1_000_000, FlowMask::default(), 1));
    c.flowsets.insert(1, queue(1, 1, 1, FlowMask::default(), 1));
    c.default_action = Action::Allow;
    let (engine, mut clients) = start(c, 1);
    let mut cl = clients.pop().unwrap();
    for _ in 0..100 {
        cl.submit_key(&key(9, 80), 1000, Direction::Out).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while engine.snapshot().clients[0].scheduled < 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // 100 kB at 1 Mbit/s would take 0.8 s: allowed packets are not on that link.
    assert_eq!(engine.snapshot().clients[0].scheduled, 100);
    drop(cl);
    engine.stop(false);

    let cfg = EngineConfig::new(
        "fifo",
        vec![pspat_sched::FlowParams::weighted(1)],
        vec![ClientConfig::default()],
    );
    let (engine, mut clients) = Engine::start(&cfg, Arc::new(NullBackend)).unwrap();
    let e = clients[0]
        .submit_key(&key(1, 80), 100, Direction::Out)
        .unwrap_err();
    assert_eq!(e, SubmitError::NoClassifier);
    engine.stop(false);
}

#[test]
fn a_configuration_the_engine_cannot_build_is_named() {
    let mut c = Config::default();
    c.schedulers.insert(
        1,
        sched(1, "no-such-algorithm", 1_000_000, FlowMask::default(), 1),
    );
    c.flowsets.insert(1, queue(1, 1, 1, FlowMask::default(), 1));
    let mut cfg = EngineConfig::new("fifo", Vec::new(), vec![ClientConfig::default()]);
    cfg.dummynet = Some(Arc::new(c));
    let e = Engine::start(&cfg, Arc::new(NullBackend))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("sched 1") && e.contains("no-such-algorithm"),
        "{e}"
    );
}

#[test]
fn idle_queues_expire_and_free_their_place() {
    // One queue per destination port, at most one at a time, idle after 1 ms: a second
    // port is refused while the first is in use, accepted once the first expired.
    let per_port = FlowMask {
        dst_port: 0xffff,
        ..FlowMask::default()
    };
    let mut c = Config::default();
    c.schedulers
        .insert(1, sched(1, "drr", 0, FlowMask::default(), 1));
    let mut q = queue(1, 1, 1, per_port, 1);
    q.idle_ns = 1_000_000;
    c.flowsets.insert(1, q);
    c.default_action = Action::Queue(Target::Id(1));
    let (engine, mut clients) = start(c, 1);
    let mut cl = clients.pop().unwrap();
    let drops_of =
        |engine: &Engine| engine.snapshot().clients[0].dropped_by(ArbiterDrop::QueueLimit);
    cl.submit_key(&key(1, 80), 100, Direction::Out).unwrap();
    cl.submit_key(&key(1, 443), 100, Direction::Out).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while engine.snapshot().clients[0].scheduled + drops_of(&engine) < 2
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(drops_of(&engine), 1, "port 443 while port 80's queue lives");
    // Idle expiry looks at a few queues every 100 us: 50 ms is plenty.
    std::thread::sleep(Duration::from_millis(50));
    cl.submit_key(&key(1, 443), 100, Direction::Out).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let s = engine.snapshot().clients[0];
    assert_eq!(
        s.scheduled, 2,
        "port 443 got a queue after port 80's expired"
    );
    assert_eq!(drops_of(&engine), 1);
    drop(cl);
    engine.stop(false);
}

// ---- Statistics per scheduler, instance and queue (dnstats.rs) ----

/// `10.0.0.last:sport -> 10.1.0.1:dport`, UDP.
fn key_ports(last: u8, src_port: u16, dst_port: u16) -> FlowKey {
    FlowKey::v4(
        u32::from_be_bytes([10, 0, 0, last]),
        0x0a01_0001,
        src_port,
        dst_port,
        17,
    )
}

/// A key with only the given source address (the masked key of `mask src-ip 0xffffffff`).
fn only_src(last: u8) -> FlowKey {
    FlowKey::v4(u32::from_be_bytes([10, 0, 0, last]), 0, 0, 0, 0)
}

/// Waits until every packet submitted is sent or dropped (5 s at most).
fn wait_accounted(engine: &Engine) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let s = engine.snapshot();
        let (sub, done): (u64, u64) = s.clients.iter().fold((0, 0), |(a, b), c| {
            (a + c.submitted, b + c.scheduled + c.dropped_total())
        });
        if sub == done || Instant::now() > deadline {
            assert_eq!(sub, done, "packets still queued after 5 s");
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn statistics_per_queue_add_up_to_the_engine_totals_and_name_masked_keys_and_drops() {
    use pspat_engine::stats::ClientSnapshot;
    use pspat_engine::{ClassRef, DummynetStats, SchedRef};
    use pspat_sched::DropReason;

    // sched 1: QFQ at 1 Mbit/s (8 ms per packet), one instance per source host, at most 2.
    // queue 1 (weight 1, 4 packets): destination ports 80-89, one queue per port, at most 2
    // per instance. queue 2 (weight 3): everything else, one queue per source port.
    let per_host = FlowMask {
        src_ip: 0xffff_ffff,
        ..FlowMask::default()
    };
    let per_dport = FlowMask {
        dst_port: 0xffff,
        ..FlowMask::default()
    };
    let per_sport = FlowMask {
        src_port: 0xffff,
        ..FlowMask::default()
    };
    let mut c = Config::default();
    c.schedulers
        .insert(1, sched(1, "qfq", 1_000_000, per_host, 2));
    let mut q1 = queue(1, 1, 1, per_dport, 2);
    q1.limit = QueueLimit::Packets(4);
    c.flowsets.insert(1, q1);
    c.flowsets.insert(2, queue(2, 1, 3, per_sport, 8));
    c.rules.push(Rule {
        number: 100,
        action: Action::Queue(Target::Id(1)),
        matcher: Match {
            dst_ports: vec![pspat_config::PortRange { lo: 80, hi: 89 }],
            ..Match::default()
        },
    });
    c.default_action = Action::Queue(Target::Id(2));
    let (engine, mut clients) = start(c, 1);
    let mut cl = clients.pop().unwrap();
    // (key, packets): host 1 to ports 80 and 81 (queue 1, 20 packets each against a limit
    // of 4: limit drops), to port 82 (a third queue of queue 1: all 20 are queue_limit
    // drops, ports 80 and 81 arrived first), and from source ports 5000 and 5001 to port
    // 5353 (queue 2); host 2 to port 80; host 3 is a third instance: instance_limit.
    let traffic = [
        (key_ports(1, 7000, 80), 20u64),
        (key_ports(1, 7000, 81), 20),
        (key_ports(1, 7000, 82), 20),
        (key_ports(1, 5000, 5353), 6),
        (key_ports(1, 5001, 5353), 7),
        (key_ports(2, 7000, 80), 3),
        (key_ports(3, 7000, 80), 4),
    ];
    for (k, n) in &traffic {
        for _ in 0..*n {
            cl.submit_key(k, 1000, Direction::Out).unwrap();
        }
    }
    wait_accounted(&engine);
    let ds: DummynetStats = engine.dummynet_stats().unwrap();
    let snap = engine.snapshot();
    let sum = |f: fn(&ClientSnapshot) -> u64| -> u64 { snap.clients.iter().map(f).sum() };

    let s = ds.scheduler(SchedRef::Sched(1)).expect("sched 1");
    assert_eq!(ds.schedulers.len(), 1);
    assert_eq!((s.algorithm.as_str(), s.bandwidth_bps), ("qfq", 1_000_000));
    // Instances: keyed by the masked source address only, hosts 1 and 2.
    let keys: Vec<FlowKey> = s.instances.iter().map(|i| i.key).collect();
    assert_eq!(keys, vec![only_src(1), only_src(2)]);
    assert_eq!(
        s.unplaced.get(ArbiterDrop::InstanceLimit),
        4,
        "host 3's packets"
    );
    let (h1, h2) = (&s.instances[0], &s.instances[1]);
    // Queues: (class, masked key, weight) and what each was sent.
    let dport = |p: u16| FlowKey {
        dst_port: p,
        ..FlowKey::default()
    };
    let sport = |p: u16| FlowKey {
        src_port: p,
        ..FlowKey::default()
    };
    let got: Vec<(ClassRef, FlowKey, u32)> = h1
        .queues
        .iter()
        .map(|q| (q.class, q.key, q.weight))
        .collect();
    assert_eq!(
        got,
        vec![
            (ClassRef::Flowset(1), dport(80), 1),
            (ClassRef::Flowset(1), dport(81), 1),
            (ClassRef::Flowset(2), sport(5000), 3),
            (ClassRef::Flowset(2), sport(5001), 3),
        ]
    );
    assert_eq!(h2.queues.len(), 1);
    assert_eq!(
        (h2.queues[0].class, h2.queues[0].key),
        (ClassRef::Flowset(1), dport(80))
    );
    // Every packet that reached a queue is sent or dropped there: per queue, sent + drops
    // is what was submitted to it, and drops are the queue's limit, nothing else.
    for (q, want) in h1
        .queues
        .iter()
        .zip([20, 20, 6, 7])
        .chain([(&h2.queues[0], 3)])
    {
        let c = &q.counters;
        assert_eq!(c.sent_pkts + c.drops.total(), want, "{:?}", q.key);
        assert_eq!(
            c.drops.total(),
            c.drops.get(ArbiterDrop::Sched(DropReason::FlowPacketLimit))
        );
        assert_eq!(c.sent_bytes, 1000 * c.sent_pkts);
        assert_eq!((c.backlog_pkts, c.backlog_bytes), (0, 0), "all sent");
    }
    // 20 packets against a limit of 4 on a link that sends one per 8 ms: most are dropped
    // (a burst takes microseconds; only a 48 ms stall of this thread would let fewer than
    // 10 drop); the roomy queues drop nothing.
    for q in &h1.queues[..2] {
        assert!(q.counters.drops.total() >= 10, "{:?}", q.counters);
    }
    for q in h1.queues[2..].iter().chain(&h2.queues) {
        assert_eq!(q.counters.drops.total(), 0, "{:?}", q.counters);
    }
    // Port 82 got no queue: its drops are the instance's.
    assert_eq!(h1.totals.drops.get(ArbiterDrop::QueueLimit), 20);
    // An instance's totals are its queues plus its queue_limit drops.
    for i in &s.instances {
        let mut sum_q = pspat_engine::Counters::default();
        for q in &i.queues {
            sum_q.add(&q.counters);
        }
        sum_q.drops.add(
            ArbiterDrop::QueueLimit,
            i.totals.drops.get(ArbiterDrop::QueueLimit),
        );
        assert_eq!(i.totals, sum_q);
        assert_eq!(i.expired_queues, 0);
    }
    // The totals are the engine's, counted independently per client.
    let t = ds.totals();
    assert_eq!(t.sent_pkts, sum(|c| c.scheduled));
    assert_eq!(t.sent_bytes, sum(|c| c.scheduled_bytes));
    for d in ArbiterDrop::all() {
        assert_eq!(
            t.drops.get(d),
            snap.clients.iter().map(|c| c.dropped_by(d)).sum::<u64>(),
            "{}",
            d.name()
        );
    }
    assert_eq!(t.sent_pkts + t.drops.total(), 80);

    // The table names every level and counter; JSON carries the same.
    let text = ds.to_string();
    for want in [
        "sched 1 qfq 1.000 Mbit/s: 2 instances, 0 expired",
        "instance ",
        "ip 10.0.0.1/0 -> 0.0.0.0/0",
        "queue 1 weight 1 ip 0.0.0.0/0 -> 0.0.0.0/80: Sent ",
        "queue 2 weight 3 ip 0.0.0.0/5001 -> 0.0.0.0/0: Sent 7000 bytes 7 pkt (dropped 0) \
         backlog 0b 0p",
        "flow_packet_limit ",
        "queue_limit 20",
        "unplaced drops 4, instance_limit 4",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let json = serde_json::to_value(&ds).unwrap();
    let q = &json["schedulers"][0]["instances"][0]["queues"][0];
    assert_eq!(q["class"]["flowset"], 1);
    assert_eq!(q["key"]["dst_port"], 80);
    assert_eq!(
        json["schedulers"][0]["instances"][0]["key"]["src"],
        "10.0.0.1"
    );
    assert_eq!(
        json["schedulers"][0]["unplaced"]["instance_limit"], 4,
        "{json}"
    );

    // The final report carries the same figures.
    drop(cl);
    let report = engine.stop(true);
    let last = report.sched.unwrap().dummynet.expect("dummynet statistics");
    assert_eq!(last.totals(), t);
}

#[test]
fn expired_queues_and_retired_instances_keep_their_counters() {
    use pspat_engine::SchedRef;

    // One instance per source host; one queue per destination port, idle after 1 ms.
    let per_host = FlowMask {
        src_ip: 0xffff_ffff,
        ..FlowMask::default()
    };
    let per_dport = FlowMask {
        dst_port: 0xffff,
        ..FlowMask::default()
    };
    let mut c = Config::default();
    c.schedulers.insert(1, sched(1, "drr", 0, per_host, 4));
    let mut q = queue(1, 1, 1, per_dport, 4);
    q.idle_ns = 1_000_000;
    c.flowsets.insert(1, q);
    c.default_action = Action::Queue(Target::Id(1));
    let (engine, mut clients) = start(c.clone(), 1);
    let mut cl = clients.pop().unwrap();
    for (k, n) in [(key(1, 80), 5), (key(1, 81), 6), (key(2, 80), 7)] {
        for _ in 0..n {
            cl.submit_key(&k, 100, Direction::Out).unwrap();
        }
    }
    wait_accounted(&engine);
    let before = engine.dummynet_stats().unwrap();
    let s = before.scheduler(SchedRef::Sched(1)).unwrap();
    // (Some queues may have expired already: the arbiter wakes every 200 ms anyway.)
    let queues: u64 = s
        .instances
        .iter()
        .map(|i| i.queues.len() as u64 + i.expired_queues)
        .sum();
    assert_eq!((s.instances.len(), queues), (2, 3), "{before}");
    assert_eq!(before.totals().sent_pkts, 18);

    // Poll until the queues expired (each request wakes the arbiter, whose scans run the
    // expiry); the instances (idle after 10 s) stay.
    let poll = |done: &dyn Fn(&pspat_engine::DummynetStats) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let d = engine.dummynet_stats().unwrap();
            if done(&d) || Instant::now() > deadline {
                return d;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let mid = poll(&|d| {
        d.schedulers[0]
            .instances
            .iter()
            .all(|i| i.queues.is_empty())
    });
    let s = &mid.schedulers[0];
    assert_eq!(s.instances.len(), 2, "{mid}");
    assert!(s.instances.iter().all(|i| i.queues.is_empty()), "{mid}");
    let expired: Vec<(u64, u64)> = s
        .instances
        .iter()
        .map(|i| (i.expired_queues, i.totals.sent_pkts))
        .collect();
    assert_eq!(expired, vec![(2, 11), (1, 7)], "{mid}");
    assert_eq!(mid.totals(), before.totals(), "nothing goes backwards");

    // The scheduler's idle time becomes 1 ms (a live change): the instances retire and
    // their totals move to the scheduler's retired counters.
    c.schedulers.get_mut(&1).unwrap().idle_ns = 1_000_000;
    engine.reconfigure(Change::Config(Arc::new(c))).unwrap();
    let after = poll(&|d| d.schedulers[0].instances.is_empty());
    let s = &after.schedulers[0];
    assert!(s.instances.is_empty(), "{after}");
    assert_eq!(s.expired_instances, 2);
    assert_eq!((s.retired.sent_pkts, s.retired.sent_bytes), (18, 1800));
    assert_eq!(after.totals(), before.totals(), "nothing goes backwards");
    // And a new packet makes a new instance whose counters start from zero.
    cl.submit_key(&key(1, 80), 100, Direction::Out).unwrap();
    wait_accounted(&engine);
    let again = engine.dummynet_stats().unwrap();
    let s = &again.schedulers[0];
    assert_eq!(s.instances.len(), 1);
    assert_eq!(s.instances[0].totals.sent_pkts, 1);
    assert!(s.instances[0].created_ns > before.at_ns);
    assert_eq!(again.totals().sent_pkts, 19);
    drop(cl);
    engine.stop(false);
}

#[test]
fn rates_between_two_snapshots_follow_the_weights() {
    // QFQ at 16 Mbit/s; queue 1 (weight 1) makes one queue per destination port, queue 2
    // has weight 3: 1:1:3 of the link, 3.2, 3.2 and 9.6 Mbit/s.
    let per_dport = FlowMask {
        dst_port: 0xffff,
        ..FlowMask::default()
    };
    let mut c = Config::default();
    c.schedulers
        .insert(1, sched(1, "qfq", 16_000_000, FlowMask::default(), 1));
    c.flowsets.insert(1, queue(1, 1, 1, per_dport, 4));
    c.flowsets.insert(2, queue(2, 1, 3, FlowMask::default(), 1));
    c.rules
        .push(from_host(100, Action::Queue(Target::Id(1)), 1));
    c.rules
        .push(from_host(100, Action::Queue(Target::Id(2)), 2));
    let (engine, clients) = start(c, 3);
    let senders = Senders::start(clients, vec![key(1, 80), key(1, 81), key(2, 80)]);
    std::thread::sleep(Duration::from_millis(100));
    let a = engine.dummynet_stats().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let b = engine.dummynet_stats().unwrap();
    senders.finish();
    engine.stop(false);
    let r = b.rates(&a);
    assert!(near(r.interval_ns as f64, 3e8, 0.5), "{r}");
    assert!(near(r.schedulers[0].rate.bps, 16e6, 0.05), "{r}");
    let i = &r.schedulers[0].instances[0];
    assert!(near(i.rate.bps, 16e6, 0.05), "{r}");
    let q: Vec<f64> = i.queues.iter().map(|q| q.rate.bps).collect();
    assert_eq!(q.len(), 3, "{r}");
    for (got, want) in q.iter().zip([3.2e6, 3.2e6, 9.6e6]) {
        assert!(near(*got, want, 0.1), "{r}");
    }
    // 1000-byte packets: 8000 bits each.
    for q in &i.queues {
        assert!(near(q.rate.pps * 8000.0, q.rate.bps, 1e-9), "{r}");
    }
}

#[test]
fn an_engine_without_a_configuration_has_no_dummynet_statistics() {
    let cfg = EngineConfig::new(
        "fifo",
        vec![pspat_sched::FlowParams::weighted(1)],
        vec![ClientConfig::default()],
    );
    let (engine, _clients) = Engine::start(&cfg, Arc::new(NullBackend)).unwrap();
    let e = engine.dummynet_stats().unwrap_err().to_string();
    assert!(e.contains("not a dummynet-style configuration"), "{e}");
    let report = engine.stop(false);
    assert!(report.sched.unwrap().dummynet.is_none());
}

#[test]
fn a_tree_of_classes_shares_its_link_by_rate_ceil_and_weight() {
    // An 8 Mbit/s link (sched 1, qfq) with three classes: sched 2 capped at 2 Mbit/s,
    // sched 3 guaranteed 3 Mbit/s, sched 4 (weight 2, band 1) with nothing guaranteed.
    // The fluid allocation: 3 guaranteed to sched 3; the excess of 5 goes first to band 0
    // (schedulers 2 and 3 by weight 1:1, sched 2 capped at 2), so sched 3 takes 6 and
    // sched 4, in band 1, nothing.
    let text = "pipe 1 config bw 8Mbit/s\n\
                sched 1 config type qfq\n\
                sched 2 config type drr parent 1 ceil 2Mbit/s\n\
                sched 3 config type drr parent 1 rate 3Mbit/s\n\
                sched 4 config type drr parent 1 weight 2 prio 1\n\
                queue 2 config sched 2\n\
                queue 3 config sched 3\n\
                queue 4 config sched 4\n\
                add 100 queue 2 src-ip 10.0.0.1\n\
                add 200 queue 3 src-ip 10.0.0.2\n\
                add 300 queue 4 src-ip 10.0.0.3\n";
    let c = pspat_config::parse_ipfw(text, "tree").unwrap();
    let (engine, clients) = start(c.clone(), 3);
    let senders = Senders::start(clients, vec![key(1, 80), key(2, 80), key(3, 80)]);
    let r = rates_after(&engine, 300);
    assert!(near(r[0], 2e6, 0.05), "sched 2 at its ceil: {r:?}");
    assert!(
        near(r[1], 6e6, 0.05),
        "sched 3: its rate and half the excess: {r:?}"
    );
    assert!(
        r[2] < 0.1e6,
        "band 1 gets what band 0 leaves, nothing: {r:?}"
    );

    // Live: sched 2's ceil goes to 4 Mbit/s, above its half of the excess: the
    // allocation becomes 2.5 (half the excess of 5), 5.5 (3 and the other half), 0.
    let mut changed = c.clone();
    let class = |c: &pspat_config::Config, id: u32| c.schedulers[&id].class.unwrap();
    let mut k = class(&changed, 2);
    k.ceil_bps = Some(4_000_000);
    changed.schedulers.get_mut(&2).unwrap().class = Some(k);
    engine
        .reconfigure(Change::Config(Arc::new(changed.clone())))
        .unwrap();
    let r = rates_after(&engine, 300);
    assert!(near(r[0], 2.5e6, 0.05), "sched 2 under its new ceil: {r:?}");
    assert!(near(r[1], 5.5e6, 0.05), "sched 3: {r:?}");
    // Moving a class is refused, naming the tree's root, and changes nothing.
    let mut moved = changed.clone();
    let mut k = class(&moved, 4);
    k.parent = 3;
    moved.schedulers.get_mut(&4).unwrap().class = Some(k);
    moved.flowsets.remove(&3);
    moved.rules.retain(|r| r.number != 200);
    let e = engine
        .reconfigure(Change::Config(Arc::new(moved)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sched 1: class sched ") && e.contains("cannot change while the tree runs"),
        "{e}"
    );
    senders.finish();
    engine.stop(false);
}

#[test]
fn a_tree_gains_and_loses_classes_under_load_and_every_packet_is_counted() {
    use pspat_engine::SchedRef;
    // An 8 Mbit/s link: sched 2 (rate 3, ceil 4 Mbit/s) and sched 3 (nothing guaranteed)
    // share it 4:4. Then, live: sched 3 goes (with its flowset) while its queue is full,
    // sched 5 comes, capped at 1 Mbit/s, and takes sched 3's traffic; sched 2's ceil
    // rises to 8 Mbit/s: 7:1.
    let before = "pipe 1 config bw 8Mbit/s\n\
                  sched 1 config type qfq\n\
                  sched 2 config type drr parent 1 rate 3Mbit/s ceil 4Mbit/s\n\
                  sched 3 config type drr parent 1\n\
                  queue 2 config sched 2\n\
                  queue 3 config sched 3\n\
                  add 100 queue 2 src-ip 10.0.0.1\n\
                  add 200 queue 3 src-ip 10.0.0.2\n";
    let after = "pipe 1 config bw 8Mbit/s\n\
                 sched 1 config type qfq\n\
                 sched 2 config type drr parent 1 rate 3Mbit/s ceil 8Mbit/s\n\
                 sched 5 config type drr parent 1 ceil 1Mbit/s\n\
                 queue 2 config sched 2\n\
                 queue 5 config sched 5\n\
                 add 100 queue 2 src-ip 10.0.0.1\n\
                 add 200 queue 5 src-ip 10.0.0.2\n";
    let (engine, clients) = start(pspat_config::parse_ipfw(before, "tree").unwrap(), 2);
    let senders = Senders::start(clients, vec![key(1, 80), key(2, 80)]);
    let r = rates_after(&engine, 300);
    assert!(near(r[0], 4e6, 0.05) && near(r[1], 4e6, 0.05), "4:4 {r:?}");
    let classes = |engine: &Engine| {
        let ds = engine.dummynet_stats().unwrap();
        let s = ds.scheduler(SchedRef::Sched(1)).unwrap();
        assert_eq!(s.instances.len(), 1);
        s.instances[0].classes.clone()
    };
    let c = classes(&engine);
    let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["sched 2", "sched 3"]);
    assert!(
        c[1].counters.backlog_pkts > 0,
        "sched 3 has a queue: {:?}",
        c[1]
    );
    assert_eq!(
        (c[0].rate_bps, c[0].ceil_bps, c[0].parent.as_deref()),
        (3_000_000, Some(4_000_000), None)
    );
    engine
        .reconfigure(Change::Config(Arc::new(
            pspat_config::parse_ipfw(after, "tree").unwrap(),
        )))
        .unwrap();
    let c = classes(&engine);
    let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
    // sched 3 drains (its packets go at its share), then leaves
    assert_eq!(&names[..2], ["sched 2", "sched 5"]);
    assert!(
        names.len() == 2 || (names[2] == "sched 3" && c[2].draining),
        "{c:?}"
    );
    let r = rates_after(&engine, 500);
    assert!(near(r[0], 7e6, 0.05) && near(r[1], 1e6, 0.05), "7:1 {r:?}");
    let c = classes(&engine);
    assert_eq!(c.len(), 2, "sched 3 drained and left: {c:?}");
    assert_eq!(c[0].ceil_bps, Some(8_000_000));
    senders.finish();
    wait_accounted(&engine);
    // Every packet was sent or dropped at a queue's limit, none for the change
    let snap = engine.snapshot();
    let ds = engine.dummynet_stats().unwrap();
    let t = ds.totals();
    assert_eq!(
        t.sent_pkts,
        snap.clients.iter().map(|c| c.scheduled).sum::<u64>()
    );
    assert_eq!(t.drops.get(ArbiterDrop::NoClass), 0, "{:?}", t.drops);
    assert_eq!(
        t.drops.total(),
        t.drops
            .get(ArbiterDrop::Sched(pspat_sched::DropReason::FlowPacketLimit)),
        "only queue limits drop: {:?}",
        t.drops
    );
    // The text shows the classes as tc -s class show does; the JSON carries them
    let text = ds.to_string();
    for want in [
        "class sched 2 parent link leaf rate 3.000 Mbit/s ceil 8.000 Mbit/s prio 0 weight 1: \
         Sent ",
        "class sched 5 parent link leaf rate 0 bit/s ceil 1.000 Mbit/s",
        "; lent ",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let json = serde_json::to_value(&ds).unwrap();
    let c = &json["schedulers"][0]["instances"][0]["classes"][1];
    assert_eq!(c["name"], "sched 5");
    assert!(c["counters"]["sent_bytes"].as_u64().unwrap() > 0, "{c}");
    engine.stop(false);
}
