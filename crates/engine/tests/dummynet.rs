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
    Action, AddrMatch, Config, Direction, FlowMask, FlowsetSpec, Match, Prefix, QueueLimit, Rule,
    SchedSpec, Table, Target, DEFAULT_IDLE_NS,
};
use pspat_engine::stats::{Drop, Filtered};
use pspat_engine::{Change, Client, ClientConfig, Engine, EngineConfig, SubmitError};
use pspat_io::null::Null as NullBackend;

fn sched(id: u32, alg: &str, bw: u64, mask: FlowMask, max_instances: u32) -> SchedSpec {
    SchedSpec {
        id,
        algorithm: alg.into(),
        params: Vec::new(),
        bandwidth_bps: bw,
        mask,
        max_instances,
        idle_ns: DEFAULT_IDLE_NS,
    }
}

fn queue(id: u32, sched: u32, weight: u32, mask: FlowMask, max_queues: u32) -> FlowsetSpec {
    FlowsetSpec {
        id,
        sched,
        weight,
        max_len: 1500,
        limit: QueueLimit::Packets(256),
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

/// Bits per second each client got onto the links over 300 ms, after 100 ms of warm-up.
fn rates(engine: &Engine) -> Vec<f64> {
    rates_after(engine, 100)
}

/// Bits per second each client got onto the links over 300 ms, after `warm_ms`.
fn rates_after(engine: &Engine, warm_ms: u64) -> Vec<f64> {
    std::thread::sleep(Duration::from_millis(warm_ms));
    let (a, t0) = (engine.snapshot(), Instant::now());
    std::thread::sleep(Duration::from_millis(300));
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
        .map(|s| s.dropped_by(Drop::InstanceLimit))
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
        id: 1,
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
    c.tables.insert(1, t);
    c.rules.push(Rule {
        number: 100,
        action: Action::Queue(Target::Tablearg),
        matcher: Match {
            direction: Some(Direction::Out),
            src: AddrMatch::Table(1),
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
    let over: u64 = s[..3].iter().map(|c| c.dropped_by(Drop::QueueLimit)).sum();
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
    let drops_of = |engine: &Engine| engine.snapshot().clients[0].dropped_by(Drop::QueueLimit);
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
