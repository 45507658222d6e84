//! Rule semantics, the compiled plan, and masks through stage 2.

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::packet::build::{eth, tcp4, udp4, udp6};
use super::*;
use crate::model::*;

pub(crate) fn sched(id: u32, alg: &str, mask: FlowMask) -> SchedSpec {
    SchedSpec {
        id,
        algorithm: alg.to_string(),
        params: Vec::new(),
        bandwidth_bps: 4_000_000,
        framing: Framing::PLAIN,
        mask,
        max_instances: DEFAULT_MAX_INSTANCES,
        idle_ns: DEFAULT_IDLE_NS,
        class: None,
    }
}

pub(crate) fn flowset(id: u32, sched: u32, weight: u32, mask: FlowMask) -> FlowsetSpec {
    FlowsetSpec {
        id,
        sched,
        weight,
        max_len: 1500,
        limit: QueueLimit::default(),
        qm: QueueManagement::default(),
        mask,
        max_queues: DEFAULT_MAX_QUEUES,
        idle_ns: DEFAULT_IDLE_NS,
    }
}

pub(crate) fn v4(a: u32, len: u8) -> Prefix {
    Prefix {
        addr: IpAddr::V4(Ipv4Addr::from(a)),
        len,
    }
}

fn v6(a: u128, len: u8) -> Prefix {
    Prefix {
        addr: IpAddr::V6(Ipv6Addr::from(a)),
        len,
    }
}

pub(crate) fn rule(number: u32, action: Action, matcher: Match) -> Rule {
    Rule {
        number,
        action,
        matcher,
    }
}

fn config(flowsets: &[FlowsetSpec], rules: Vec<Rule>) -> Config {
    let mut c = Config::default();
    c.schedulers.insert(1, sched(1, "qfq", FlowMask::default()));
    for f in flowsets {
        c.flowsets.insert(f.id, f.clone());
    }
    c.rules = rules;
    c
}

fn class_of(c: &Classifier, fs: u32) -> u32 {
    c.class_of(ClassOrigin::Flowset(fs)).unwrap()
}

fn scheduled(v: Verdict) -> u32 {
    match v {
        Verdict::Schedule { class, .. } => class,
        v => panic!("not scheduled: {v:?}"),
    }
}

const OUT: Direction = Direction::Out;
const IN: Direction = Direction::In;

#[test]
fn direction_proto_and_ports() {
    let fs = [
        flowset(1, 1, 1, FlowMask::default()),
        flowset(2, 1, 1, FlowMask::default()),
        flowset(3, 1, 1, FlowMask::default()),
    ];
    let c = config(
        &fs,
        vec![
            rule(
                10,
                Action::Queue(Target::Id(1)),
                Match {
                    direction: Some(Direction::In),
                    ..Match::default()
                },
            ),
            rule(
                20,
                Action::Queue(Target::Id(2)),
                Match {
                    proto: Some(17),
                    dst_ports: vec![
                        PortRange { lo: 53, hi: 53 },
                        PortRange { lo: 5000, hi: 5999 },
                    ],
                    ..Match::default()
                },
            ),
            rule(
                30,
                Action::Queue(Target::Id(3)),
                Match {
                    src_ports: vec![PortRange {
                        lo: 1024,
                        hi: 65535,
                    }],
                    ..Match::default()
                },
            ),
        ],
    );
    let k = Classifier::new(&c).unwrap();
    let (c1, c2, c3) = (class_of(&k, 1), class_of(&k, 2), class_of(&k, 3));
    assert_eq!(scheduled(k.classify_frame(&udp4(1, 2, 80, 53), IN)), c1);
    assert_eq!(scheduled(k.classify_frame(&udp4(1, 2, 80, 53), OUT)), c2);
    assert_eq!(scheduled(k.classify_frame(&udp4(1, 2, 80, 5000), OUT)), c2);
    assert_eq!(scheduled(k.classify_frame(&udp4(1, 2, 80, 5999), OUT)), c2);
    // Port 6000 is outside both ranges; TCP to port 53 fails the protocol condition.
    assert_eq!(
        scheduled(k.classify_frame(&udp4(1, 2, 1024, 6000), OUT)),
        c3
    );
    assert_eq!(scheduled(k.classify_frame(&tcp4(1, 2, 2000, 53), OUT)), c3);
    // Nothing matches: default deny.
    assert_eq!(
        k.classify_frame(&tcp4(1, 2, 1023, 53), OUT),
        Verdict::Drop(DropCause::NoRuleMatched)
    );
}

#[test]
fn prefixes_per_family() {
    let fs = [
        flowset(1, 1, 1, FlowMask::default()),
        flowset(2, 1, 1, FlowMask::default()),
    ];
    let c = config(
        &fs,
        vec![
            rule(
                10,
                Action::Queue(Target::Id(1)),
                Match {
                    src: AddrMatch::Prefixes(vec![v4(0x0a00_0000, 8), v6(0x2001_0db8 << 96, 32)]),
                    ..Match::default()
                },
            ),
            rule(
                20,
                Action::Queue(Target::Id(2)),
                Match {
                    dst: AddrMatch::Prefixes(vec![v4(0xc0a8_0101, 32)]),
                    ..Match::default()
                },
            ),
        ],
    );
    let k = Classifier::new(&c).unwrap();
    let (c1, c2) = (class_of(&k, 1), class_of(&k, 2));
    assert_eq!(
        scheduled(k.classify_frame(&udp4(0x0aff_0001, 9, 1, 1), OUT)),
        c1
    );
    assert_eq!(
        k.classify_frame(&udp4(0x0b00_0001, 9, 1, 1), OUT),
        Verdict::Drop(DropCause::NoRuleMatched)
    );
    assert_eq!(
        scheduled(k.classify_frame(&udp4(0x0b00_0001, 0xc0a8_0101, 1, 1), OUT)),
        c2
    );
    assert_eq!(
        k.classify_frame(&udp4(0x0b00_0001, 0xc0a8_0102, 1, 1), OUT),
        Verdict::Drop(DropCause::NoRuleMatched)
    );
    let a6 = 0x2001_0db8_0000_0000_0000_0000_0000_0005u128;
    assert_eq!(scheduled(k.classify_frame(&udp6(a6, 1, 1, 1), OUT)), c1);
    // An IPv6 address whose low 32 bits are in 10/8 must not match the IPv4 prefix, nor
    // an IPv6 destination whose low bits equal 192.168.1.1.
    assert_eq!(
        k.classify_frame(&udp6(0x0a00_0001, 0xc0a8_0101, 1, 1), OUT),
        Verdict::Drop(DropCause::NoRuleMatched)
    );
}

/// The slides' "Advanced configurations" example.
fn slides_config() -> Config {
    let mut c = Config::default();
    c.schedulers.insert(3, sched(3, "qfq", FlowMask::default()));
    c.schedulers.insert(4, sched(4, "qfq", FlowMask::default()));
    let per_ip = FlowMask {
        src_ip: 0xff,
        ..FlowMask::default()
    };
    let per_net = FlowMask {
        src_ip: 0xf00,
        ..FlowMask::default()
    };
    for f in [
        flowset(20, 3, 5, per_ip),
        flowset(21, 3, 20, FlowMask::default()),
        flowset(25, 4, 1, per_net),
    ] {
        c.flowsets.insert(f.id, f);
    }
    c.tables.insert(
        1.into(),
        Table {
            id: 1.into(),
            entries: vec![
                (v4(0x0102_0000, 20), 25),
                (v4(0x0102_0300, 24), 20),
                (v4(0x0102_0308, 32), 21),
                (v4(0x0105_0000, 16), 99), // names no flowset
            ],
        },
    );
    c.rules = vec![rule(
        100,
        Action::Queue(Target::Tablearg),
        Match {
            direction: Some(Direction::Out),
            src: AddrMatch::Table(1.into()),
            ..Match::default()
        },
    )];
    c
}

#[test]
fn table_and_tablearg() {
    let k = Classifier::new(&slides_config()).unwrap();
    let (c20, c21, c25) = (class_of(&k, 20), class_of(&k, 21), class_of(&k, 25));
    assert_eq!(
        scheduled(k.classify_frame(&udp4(0x0102_0301, 9, 1, 1), OUT)),
        c20
    );
    assert_eq!(
        scheduled(k.classify_frame(&udp4(0x0102_0308, 9, 1, 1), OUT)),
        c21
    );
    assert_eq!(
        scheduled(k.classify_frame(&udp4(0x0102_0400, 9, 1, 1), OUT)),
        c25
    );
    assert_eq!(
        k.classify_frame(&udp4(0x0105_0001, 9, 1, 1), OUT),
        Verdict::Drop(DropCause::TableargUnknown {
            rule: 100,
            value: 99
        })
    );
    assert_eq!(
        k.classify_frame(&udp4(0x0102_1000, 9, 1, 1), OUT),
        Verdict::Drop(DropCause::NoRuleMatched)
    );
    assert_eq!(
        k.classify_frame(&udp4(0x0102_0301, 9, 1, 1), IN),
        Verdict::Drop(DropCause::NoRuleMatched)
    );
    // The plan: flowsets 20 and 21 on scheduler 3, 25 on scheduler 4.
    let s3 = k.sched_of(SchedOrigin::Sched(3)).unwrap();
    let s4 = k.sched_of(SchedOrigin::Sched(4)).unwrap();
    assert_eq!(k.classes()[c20 as usize].sched, s3);
    assert_eq!(k.classes()[c21 as usize].weight, 20);
    assert_eq!(k.classes()[c25 as usize].sched, s4);
    assert_eq!(k.classes_of_sched(s3).collect::<Vec<_>>(), vec![c20, c21]);
}

#[test]
fn tablearg_from_the_destination_table_and_as_pipe() {
    let mut c = Config::default();
    c.pipes.insert(
        7,
        PipeSpec {
            id: 7,
            bandwidth_bps: 1_000_000,
            limit: QueueLimit::Bytes(100_000),
            mask: FlowMask {
                dst_ip: u32::MAX,
                ..FlowMask::default()
            },
            max_instances: 16,
            idle_ns: 5,
            ..PipeSpec::new(7)
        },
    );
    c.tables.insert(
        1.into(),
        Table {
            id: 1.into(),
            entries: vec![(v4(0, 0), 1)],
        },
    );
    c.tables.insert(
        2.into(),
        Table {
            id: 2.into(),
            entries: vec![(v4(0x0a00_0000, 8), 7)],
        },
    );
    c.rules = vec![rule(
        5,
        Action::Pipe(Target::Tablearg),
        Match {
            src: AddrMatch::Table(1.into()),
            dst: AddrMatch::Table(2.into()),
            ..Match::default()
        },
    )];
    let k = Classifier::new(&c).unwrap();
    let p7 = k.class_of(ClassOrigin::Pipe(7)).unwrap();
    assert_eq!(
        scheduled(k.classify_frame(&udp4(1, 0x0a00_0001, 1, 1), OUT)),
        p7
    );
    // Pipe 7 is a fifo scheduler with the pipe's parameters and one class of its own.
    let class = &k.classes()[p7 as usize];
    let s = &k.scheds()[class.sched as usize];
    assert_eq!(s.origin, SchedOrigin::Pipe(7));
    assert_eq!(s.algorithm, "fifo");
    assert_eq!(
        (s.bandwidth_bps, s.max_instances, s.idle_ns),
        (1_000_000, 16, 5)
    );
    assert_eq!(s.mask.dst_ip, u32::MAX);
    assert_eq!(class.limit, QueueLimit::Bytes(100_000));
    assert!(class.mask.is_empty());
}

#[test]
fn allow_deny_default_and_order() {
    let fs = [
        flowset(1, 1, 1, FlowMask::default()),
        flowset(2, 1, 1, FlowMask::default()),
    ];
    let udp = Match {
        proto: Some(17),
        ..Match::default()
    };
    let mut c = config(
        &fs,
        vec![
            rule(
                10,
                Action::Deny,
                Match {
                    dst_ports: vec![PortRange { lo: 25, hi: 25 }],
                    ..Match::default()
                },
            ),
            // Equal numbers: the first written wins.
            rule(20, Action::Queue(Target::Id(2)), udp.clone()),
            rule(20, Action::Queue(Target::Id(1)), udp.clone()),
            rule(
                30,
                Action::Allow,
                Match {
                    proto: Some(6),
                    ..Match::default()
                },
            ),
        ],
    );
    c.default_action = Action::Queue(Target::Id(1));
    let k = Classifier::new(&c).unwrap();
    assert_eq!(
        k.classify_frame(&udp4(1, 2, 3, 25), OUT),
        Verdict::Drop(DropCause::DeniedByRule(10))
    );
    let f = udp4(1, 2, 3, 4);
    assert_eq!(
        k.classify_frame(&f, OUT),
        Verdict::Schedule {
            class: class_of(&k, 2),
            key: FlowKey {
                ttl: 64,
                ip_len: 46,
                ..FlowKey::v4(1, 2, 3, 4, 17)
            }
        }
    );
    assert_eq!(k.classify_frame(&tcp4(1, 2, 3, 4), OUT), Verdict::Allow);
    // ICMP falls to the default action, which carries the packet's key.
    let mut icmp = eth(&[], 0x0800);
    icmp.extend(super::packet::build::ipv4(1, 2, 1, 0, &[], &[8, 0, 0, 0]));
    assert_eq!(
        k.classify_frame(&icmp, IN),
        Verdict::Schedule {
            class: class_of(&k, 1),
            key: FlowKey {
                ttl: 64,
                ip_len: 24,
                ..FlowKey::v4(1, 2, 0, 0, 1)
            }
        }
    );
    c.default_action = Action::Allow;
    let k = Classifier::new(&c).unwrap();
    assert_eq!(k.classify_frame(&icmp, IN), Verdict::Allow);
}

#[test]
fn non_ip_and_malformed_frames() {
    let fs = [
        flowset(1, 1, 1, FlowMask::default()),
        flowset(2, 1, 1, FlowMask::default()),
    ];
    let c = config(
        &fs,
        vec![
            rule(
                10,
                Action::Queue(Target::Id(1)),
                Match {
                    proto: Some(17),
                    ..Match::default()
                },
            ),
            rule(
                20,
                Action::Queue(Target::Id(2)),
                Match {
                    direction: Some(Direction::Out),
                    ..Match::default()
                },
            ),
        ],
    );
    let k = Classifier::new(&c).unwrap();
    let mut arp = eth(&[], 0x0806);
    arp.extend_from_slice(&[0; 28]);
    // Rule 10 has a protocol condition: skipped; rule 20 matches `out` only.
    assert_eq!(
        k.classify_frame(&arp, OUT),
        Verdict::Schedule {
            class: class_of(&k, 2),
            key: FlowKey::default()
        }
    );
    assert_eq!(
        k.classify_frame(&arp, IN),
        Verdict::Drop(DropCause::NoRuleMatched)
    );
    assert_eq!(
        k.classify_frame(&arp[..10], OUT),
        Verdict::Drop(DropCause::Malformed(ParseError::Truncated(Layer::Ethernet)))
    );
}

#[test]
fn dangling_references_are_errors() {
    let fs = [flowset(1, 9, 1, FlowMask::default())];
    let e = Classifier::new(&config(&fs, vec![])).unwrap_err();
    assert!(e.to_string().contains("queue 1: sched 9"), "{e}");
    let fs = [flowset(1, 1, 1, FlowMask::default())];
    let cases = [
        (
            Action::Queue(Target::Id(2)),
            Match::default(),
            "rule 5: queue 2",
        ),
        (
            Action::Pipe(Target::Id(1)),
            Match::default(),
            "rule 5: pipe 1",
        ),
        (
            Action::Queue(Target::Tablearg),
            Match::default(),
            "rule 5: tablearg",
        ),
        (
            Action::Allow,
            Match {
                dst: AddrMatch::Table(3.into()),
                ..Match::default()
            },
            "rule 5: table 3",
        ),
    ];
    for (a, m, want) in cases {
        let e = Classifier::new(&config(&fs, vec![rule(5, a, m)])).unwrap_err();
        assert!(e.to_string().contains(want), "{e} lacks {want}");
    }
    let mut c = config(&fs, vec![]);
    c.default_action = Action::Queue(Target::Id(4));
    let e = Classifier::new(&c).unwrap_err();
    assert!(e.to_string().contains("default action: queue 4"), "{e}");
}

/// Stage 2 as the engine runs it: instance per scheduler-masked key, queue per
/// (instance, flow-masked key).
struct Stage2 {
    instances: Vec<KeyMap<FlowKey>>,
    queues: Vec<KeyMap<(u32, FlowKey)>>,
}

impl Stage2 {
    fn new(k: &Classifier) -> Self {
        Stage2 {
            instances: k
                .scheds()
                .iter()
                .map(|s| KeyMap::growable(64, s.max_instances))
                .collect(),
            queues: k
                .classes()
                .iter()
                .map(|c| {
                    let all = c
                        .max_queues
                        .saturating_mul(k.scheds()[c.sched as usize].max_instances);
                    KeyMap::growable(64, all.min(1 << 30))
                })
                .collect(),
        }
    }

    fn place(&mut self, k: &Classifier, class: u32, key: &FlowKey) -> Result<(u32, u32), Full> {
        let c = &k.classes()[class as usize];
        let s = &k.scheds()[c.sched as usize];
        let ik = key.masked(&s.mask);
        let (inst, _) = self.instances[c.sched as usize].get_or_insert(ik, ik.hash64(), 0)?;
        let qk = (inst, key.masked(&c.mask));
        let h = qk.1.hash64() ^ u64::from(inst).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let (q, _) = self.queues[class as usize].get_or_insert(qk, h, 0)?;
        Ok((inst, q))
    }
}

#[test]
fn flow_mask_dst_ip_0xff_gives_256_queues_per_slash_24() {
    // ipfw queue 2 config weight 1 sched 5 mask dst-ip 0xff
    let fs = [flowset(
        2,
        1,
        1,
        FlowMask {
            dst_ip: 0xff,
            ..FlowMask::default()
        },
    )];
    let c = config(
        &fs,
        vec![rule(1, Action::Queue(Target::Id(2)), Match::default())],
    );
    let k = Classifier::new(&c).unwrap();
    let mut s2 = Stage2::new(&k);
    let mut queues = HashSet::new();
    let mut instances = HashSet::new();
    // Every destination of 10.0.0.0/24, twice, from varying sources and ports.
    for round in 0..2u32 {
        for d in 0..256u32 {
            let f = udp4(round * 7 + d, 0x0a00_0000 | d, d as u16, 9);
            let Verdict::Schedule { class, key } = k.classify_frame(&f, OUT) else {
                panic!()
            };
            let (i, q) = s2.place(&k, class, &key).unwrap();
            instances.insert(i);
            queues.insert(q);
        }
    }
    assert_eq!(instances.len(), 1);
    assert_eq!(queues.len(), 256);
    assert_eq!(s2.queues[0].len(), 256);
}

#[test]
fn sched_mask_src_ip_0xff_gives_independent_instances() {
    // ipfw sched 5 config type QFQ bw 4Mbit/s mask src-ip 0xff; one queue per instance.
    let mut c = Config::default();
    c.schedulers.insert(
        5,
        sched(
            5,
            "qfq",
            FlowMask {
                src_ip: 0xff,
                ..FlowMask::default()
            },
        ),
    );
    c.flowsets.insert(1, flowset(1, 5, 1, FlowMask::default()));
    c.rules = vec![rule(1, Action::Queue(Target::Id(1)), Match::default())];
    let k = Classifier::new(&c).unwrap();
    let mut s2 = Stage2::new(&k);
    let mut by_src = BTreeMap::new();
    for s in [1u32, 2, 3, 0x0100_0001, 0x0200_0002] {
        let Verdict::Schedule { class, key } = k.classify_frame(&udp4(s, 9, 1, 1), OUT) else {
            panic!()
        };
        by_src.insert(s, s2.place(&k, class, &key).unwrap());
    }
    // Sources differing in the last byte get different instances; x.x.x.1 shares with
    // 1.0.0.1 (same masked value). Each instance has its own queue of the flowset.
    assert_ne!(by_src[&1].0, by_src[&2].0);
    assert_ne!(by_src[&2].0, by_src[&3].0);
    assert_eq!(by_src[&1], by_src[&0x0100_0001]);
    assert_eq!(by_src[&2], by_src[&0x0200_0002]);
    assert_eq!(s2.instances[0].len(), 3);
    assert_eq!(s2.queues[0].len(), 3);
}

#[test]
fn queue_and_instance_limits_are_full() {
    let mut c = Config::default();
    let mut s = sched(
        1,
        "drr",
        FlowMask {
            src_ip: 0xff,
            ..FlowMask::default()
        },
    );
    s.max_instances = 2;
    c.schedulers.insert(1, s);
    let mut f = flowset(
        1,
        1,
        1,
        FlowMask {
            dst_port: 0xffff,
            ..FlowMask::default()
        },
    );
    f.max_queues = 3;
    c.flowsets.insert(1, f);
    c.rules = vec![rule(1, Action::Queue(Target::Id(1)), Match::default())];
    let k = Classifier::new(&c).unwrap();
    let mut s2 = Stage2::new(&k);
    let place = |s2: &mut Stage2, src, port| {
        let Verdict::Schedule { class, key } = k.classify_frame(&udp4(src, 9, 1, port), OUT) else {
            panic!()
        };
        s2.place(&k, class, &key)
    };
    for port in 1..=3 {
        place(&mut s2, 1, port).unwrap();
        place(&mut s2, 2, port).unwrap();
    }
    // A third instance is refused, and so is... (this map bounds queues over all instances:
    // max_queues * max_instances = 6, all used).
    assert_eq!(place(&mut s2, 3, 1), Err(Full));
    assert_eq!(place(&mut s2, 1, 4), Err(Full));
    // Known keys still place.
    assert!(place(&mut s2, 2, 3).is_ok());
}

#[test]
fn classifier_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Classifier>();
}

mod reference {
    //! Rules evaluated straight from the model, as an oracle for the compiled classifier.

    use super::*;
    use proptest::prelude::*;

    fn in_prefix(p: &Prefix, key: &FlowKey, addr: u128) -> bool {
        match p.addr {
            IpAddr::V4(n) if !key.v6 => {
                p.len == 0 || (u32::from(n) ^ addr as u32) >> (32 - u32::from(p.len)) == 0
            }
            IpAddr::V6(n) if key.v6 => {
                p.len == 0 || (u128::from(n) ^ addr) >> (128 - u32::from(p.len)) == 0
            }
            _ => false,
        }
    }

    /// Longest-prefix value by scanning the table.
    fn table_value(t: &Table, key: &FlowKey, addr: u128) -> Option<u32> {
        t.entries
            .iter()
            .filter(|(p, _)| in_prefix(p, key, addr))
            .max_by_key(|(p, _)| p.len)
            .map(|e| e.1)
    }

    /// `None`: no match; `Some(tablearg)`.
    fn addr_ok(
        c: &Config,
        m: &AddrMatch,
        key: &FlowKey,
        addr: u128,
        targ: Option<u32>,
    ) -> Option<Option<u32>> {
        match m {
            AddrMatch::Any => Some(targ),
            AddrMatch::Prefixes(ps) => ps.iter().any(|p| in_prefix(p, key, addr)).then_some(targ),
            AddrMatch::Table(t) => table_value(&c.tables[&t.name], key, addr)
                .filter(|v| t.value.is_none_or_eq(*v))
                .map(Some),
        }
    }

    /// [`addr_ok`] after `not` when `not`: holds when the address is not accepted, and
    /// leaves the tablearg as it was.
    fn neg_addr_ok(
        c: &Config,
        not: bool,
        m: &AddrMatch,
        key: &FlowKey,
        addr: u128,
        targ: Option<u32>,
    ) -> Option<Option<u32>> {
        let ok = addr_ok(c, m, key, addr, targ);
        match (not, ok) {
            (false, ok) => ok,
            (true, None) => Some(targ),
            (true, Some(_)) => None,
        }
    }

    trait NoneOrEq {
        fn is_none_or_eq(&self, v: u32) -> bool;
    }

    impl NoneOrEq for Option<u32> {
        fn is_none_or_eq(&self, v: u32) -> bool {
            self.map_or(true, |w| w == v)
        }
    }

    fn in_ranges(rs: &[PortRange], v: u16) -> bool {
        rs.iter().any(|r| r.lo <= v && v <= r.hi)
    }

    fn option_holds(o: &RuleOption, key: &FlowKey) -> bool {
        let tcp = key.proto == 6;
        let holds = match &o.cond {
            Cond::Family(Family::V4) => !key.v6,
            Cond::Family(Family::V6) => key.v6,
            Cond::TcpFlags { set, clear } => {
                tcp && key.tcp_flags & set == *set && key.tcp_flags & clear == 0
            }
            Cond::Established => tcp && key.tcp_flags & (tcp_flag::ACK | tcp_flag::RST) != 0,
            Cond::IpLen(rs) => in_ranges(rs, key.ip_len),
            Cond::IpTtl(rs) => in_ranges(rs, u16::from(key.ttl)),
            Cond::Dscp(set) => set & (1 << (key.tos >> 2)) != 0,
            Cond::Iface(..) => unreachable!("no interfaces here"),
        };
        holds != o.not
    }

    fn ports_ok(not: bool, rs: &[PortRange], p: u16) -> bool {
        rs.is_empty() || in_ranges(rs, p) != not
    }

    fn target(c: &Config, k: &Classifier, a: Action, targ: Option<u32>, rule: u32) -> Verdict {
        let (origin, id) = match a {
            Action::Allow => return Verdict::Allow,
            Action::Deny => return Verdict::Drop(DropCause::DeniedByRule(rule)),
            Action::Queue(Target::Id(id)) => (ClassOrigin::Flowset(id), id),
            Action::Pipe(Target::Id(id)) => (ClassOrigin::Pipe(id), id),
            Action::Queue(Target::Tablearg) => (ClassOrigin::Flowset(targ.unwrap()), targ.unwrap()),
            Action::Pipe(Target::Tablearg) => (ClassOrigin::Pipe(targ.unwrap()), targ.unwrap()),
            Action::Skipto(_) | Action::Count => unreachable!("not a decision"),
        };
        let _ = c;
        match k.class_of(origin) {
            Some(class) => Verdict::Schedule {
                class,
                key: FlowKey::default(),
            },
            None => Verdict::Drop(DropCause::TableargUnknown { rule, value: id }),
        }
    }

    pub fn classify(c: &Config, k: &Classifier, key: &FlowKey, dir: Direction) -> Verdict {
        let mut i = 0;
        let mut hops = Vec::new();
        while let Some(r) = c.rules.get(i) {
            i += 1;
            let m = &r.matcher;
            if m.direction.is_some_and(|d| d != dir)
                || m.proto.is_some_and(|p| p != key.proto)
                || !ports_ok(m.not.src_ports, &m.src_ports, key.src_port)
                || !ports_ok(m.not.dst_ports, &m.dst_ports, key.dst_port)
            {
                continue;
            }
            let Some(targ) = neg_addr_ok(c, m.not.src, &m.src, key, key.src, None) else {
                continue;
            };
            let Some(targ) = neg_addr_ok(c, m.not.dst, &m.dst, key, key.dst, targ) else {
                continue;
            };
            if !m.options.iter().all(|o| option_holds(o, key)) {
                continue;
            }
            // The first rule numbered `n` or more, past this one.
            let skip = |n: u32| i.max(c.rules.iter().take_while(|x| x.number < n).count());
            match r.action {
                Action::Count => {}
                Action::Skipto(Target::Id(n)) => i = skip(n),
                Action::Skipto(Target::Tablearg) => i = skip(targ.unwrap()),
                a => match target(c, k, a, targ, r.number) {
                    // one_pass 0: the packet leaves the pipe and goes on at the next rule.
                    Verdict::Schedule { class, .. } if !c.one_pass => {
                        hops.push(class);
                        if hops.len() > MAX_HOPS {
                            return Verdict::Drop(DropCause::TooManyHops { rule: r.number });
                        }
                    }
                    v => return chained(hops, v, r.number, key),
                },
            }
        }
        match c.default_action {
            Action::Deny => chained(hops, Verdict::Drop(DropCause::NoRuleMatched), 0, key),
            a => chained(hops, target(c, k, a, None, 0), 65535, key),
        }
    }

    /// The verdict of a packet that crossed the classes `hops` before the rule numbered
    /// `rule` decided `last`.
    fn chained(mut hops: Vec<u32>, last: Verdict, rule: u32, key: &FlowKey) -> Verdict {
        match last {
            Verdict::Schedule { class, .. } => hops.push(class),
            Verdict::Allow => {}
            drop => return drop,
        }
        match hops[..] {
            [] => Verdict::Allow,
            [class] => Verdict::Schedule { class, key: *key },
            _ if hops.len() > MAX_HOPS => Verdict::Drop(DropCause::TooManyHops { rule }),
            _ => Verdict::Chain {
                chain: Chain::of(&hops),
                key: *key,
            },
        }
    }

    // Small domains so that conditions hit often.
    const PROTOS: [u8; 4] = [1, 6, 17, 132];
    const NETS: [u32; 3] = [0x0a00_0000, 0x0a01_0000, 0xc0a8_0000];

    fn addr4() -> impl Strategy<Value = u32> {
        (0usize..3, 0u32..0x2_0000).prop_map(|(n, low)| NETS[n] | (low & 0x1_ffff))
    }

    fn prefix() -> impl Strategy<Value = Prefix> {
        prop_oneof![
            (addr4(), 8u8..=32).prop_map(|(a, len)| v4(a & (u32::MAX << (32 - len)), len)),
            (0u128..4, 0u8..=128)
                .prop_map(|(a, len)| v6(a << 126 >> len.min(127) << len.min(127), len)),
        ]
    }

    fn addr_match() -> impl Strategy<Value = AddrMatch> {
        prop_oneof![
            3 => Just(AddrMatch::Any),
            2 => prop::collection::vec(prefix(), 1..3).prop_map(AddrMatch::Prefixes),
            2 => (1u32..3, prop::option::of(prop_oneof![1u32..4, Just(7u32)])).prop_map(|(t, value)| {
                AddrMatch::Table(TableRef { name: t.into(), value })
            }),
        ]
    }

    fn option() -> impl Strategy<Value = RuleOption> {
        let ranges = |max: u16| {
            prop::collection::vec(
                (0..max, 0u16..4).prop_map(|(lo, w)| PortRange { lo, hi: lo + w }),
                1..3,
            )
        };
        let cond = prop_oneof![
            prop_oneof![Just(Family::V4), Just(Family::V6)].prop_map(Cond::Family),
            (0u8..8, 0u8..8).prop_map(|(a, b)| Cond::TcpFlags {
                set: a << 1 & !(b << 3),
                clear: b << 3,
            }),
            Just(Cond::Established),
            ranges(10).prop_map(Cond::IpLen),
            ranges(4).prop_map(Cond::IpTtl),
            (0u64..8).prop_map(|m| Cond::Dscp(m << 10 | 1)),
        ];
        (any::<bool>(), cond).prop_map(|(not, cond)| RuleOption { not, cond })
    }

    fn ports() -> impl Strategy<Value = Vec<PortRange>> {
        prop::collection::vec(
            (0u16..8, 0u16..4).prop_map(|(lo, w)| PortRange { lo, hi: lo + w }),
            0..3,
        )
    }

    fn rule_strategy() -> impl Strategy<Value = Rule> {
        let action = prop_oneof![
            (1u32..4).prop_map(|i| Action::Queue(Target::Id(i))),
            Just(Action::Pipe(Target::Id(7))),
            Just(Action::Queue(Target::Tablearg)),
            Just(Action::Pipe(Target::Tablearg)),
            Just(Action::Allow),
            Just(Action::Deny),
            Just(Action::Count),
            (1u32..120).prop_map(|n| Action::Skipto(Target::Id(n))),
            Just(Action::Skipto(Target::Tablearg)),
        ];
        let dir = prop_oneof![
            Just(None),
            Just(Some(Direction::In)),
            Just(Some(Direction::Out))
        ];
        let proto = prop_oneof![Just(None), (0usize..4).prop_map(|i| Some(PROTOS[i]))];
        (
            1u32..100,
            action,
            dir,
            proto,
            addr_match(),
            addr_match(),
            ports(),
            ports(),
            any::<[bool; 4]>(),
            prop::collection::vec(option(), 0..3),
        )
            .prop_map(
                |(
                    number,
                    action,
                    direction,
                    proto,
                    src,
                    dst,
                    src_ports,
                    dst_ports,
                    not,
                    options,
                )| {
                    let mut m = Match {
                        direction,
                        proto,
                        not: Negations {
                            src: not[0] && src != AddrMatch::Any,
                            dst: not[1] && dst != AddrMatch::Any,
                            src_ports: not[2] && !src_ports.is_empty(),
                            dst_ports: not[3] && !dst_ports.is_empty(),
                        },
                        src,
                        dst,
                        src_ports,
                        dst_ports,
                        prob: None,
                        options,
                    };
                    // tablearg needs a table condition, not negated.
                    let table = |a: &AddrMatch, not: bool| matches!(a, AddrMatch::Table(_)) && !not;
                    if matches!(
                        action,
                        Action::Queue(Target::Tablearg)
                            | Action::Pipe(Target::Tablearg)
                            | Action::Skipto(Target::Tablearg)
                    ) && !table(&m.src, m.not.src)
                        && !table(&m.dst, m.not.dst)
                    {
                        m.src = AddrMatch::Table(1.into());
                        m.not.src = false;
                    }
                    rule(number, action, m)
                },
            )
    }

    fn table(id: u32) -> impl Strategy<Value = Table> {
        // Values 1..=3 name flowsets, 7 a pipe (for `pipe tablearg`), 9 nothing.
        let value = prop_oneof![1u32..4, Just(7u32), Just(9u32)];
        prop::collection::vec((prefix(), value), 0..6).prop_map(move |mut e| {
            e.sort_by_key(|x| x.0);
            e.dedup_by_key(|x| x.0);
            Table {
                id: id.into(),
                entries: e,
            }
        })
    }

    fn key() -> impl Strategy<Value = FlowKey> {
        (
            any::<bool>(),
            addr4(),
            addr4(),
            0u128..4,
            0u16..10,
            0u16..10,
            0usize..5,
            (0u8..64, 0u8..16, 0u8..6, 0u16..14),
        )
            .prop_map(|(v6, s, d, s6, sp, dp, p, (flags, dscp, ttl, len))| {
                let proto = if p == 4 { 50 } else { PROTOS[p] };
                let k = if v6 {
                    FlowKey::v6(s6 << 126 | u128::from(s), u128::from(d), sp, dp, proto)
                } else {
                    FlowKey::v4(s, d, sp, dp, proto)
                };
                FlowKey {
                    // (only TCP has flags; the option must look at the protocol anyway)
                    tcp_flags: flags,
                    tos: (dscp + 8) << 2,
                    ttl,
                    ip_len: len,
                    ..k
                }
            })
    }

    proptest! {
        #[test]
        fn compiled_rules_agree_with_the_model(
            mut rules in prop::collection::vec(rule_strategy(), 0..12),
            t1 in table(1),
            t2 in table(2),
            keys in prop::collection::vec((key(), any::<bool>()), 1..40),
            default in prop_oneof![Just(Action::Deny), Just(Action::Allow), Just(Action::Queue(Target::Id(2)))],
            one_pass in any::<bool>(),
            broad in prop::collection::vec(any::<bool>(), 12),
        ) {
            // Some rules match every packet, so that long one_pass 0 chains are common.
            for (r, b) in rules.iter_mut().zip(broad) {
                let tablearg = matches!(
                    r.action,
                    Action::Queue(Target::Tablearg) | Action::Pipe(Target::Tablearg) | Action::Skipto(Target::Tablearg)
                );
                if b && !tablearg {
                    r.matcher = Match::default();
                }
            }
            rules.sort_by_key(|r| r.number);
            let mut c = config(
                &[
                    flowset(1, 1, 1, FlowMask::default()),
                    flowset(2, 1, 2, FlowMask::default()),
                    flowset(3, 1, 3, FlowMask::default()),
                ],
                rules,
            );
            c.pipes.insert(7, PipeSpec {
                id: 7,
                bandwidth_bps: 0,
                limit: QueueLimit::default(),
                mask: FlowMask::default(),
                max_instances: 1,
                idle_ns: 1,
                ..PipeSpec::new(7)
            });
            c.tables.insert(1.into(), t1);
            c.tables.insert(2.into(), t2);
            c.default_action = default;
            c.one_pass = one_pass;
            let k = Classifier::new(&c).unwrap();
            let one = Classifier::new_one_class(&c).unwrap();
            for (key, out) in keys {
                let dir = if out { Direction::Out } else { Direction::In };
                let want = classify(&c, &k, &key, dir);
                prop_assert_eq!(k.classify_key(&key, dir), want, "key {:?} {:?}", key, dir);
                prop_assert_eq!(one.classify_key(&key, dir), want);
            }
        }
    }
}

/// A classifier of an ipfw-syntax configuration with flowsets 1..=4 on one scheduler.
fn rules_of(rules: &str, interfaces: Option<&Interfaces>) -> Classifier {
    let text = format!(
        "sched 1 config type fifo\n\
         queue 1 config sched 1\nqueue 2 config sched 1\nqueue 3 config sched 1\n\
         queue 4 config sched 1\n{rules}\ndefault allow\n"
    );
    let c = crate::parse_ipfw(&text, "t").unwrap_or_else(|e| panic!("{e}"));
    match interfaces {
        Some(i) => Classifier::with_interfaces(&c, i).unwrap(),
        None => Classifier::new(&c).unwrap(),
    }
}

/// The flowset a frame goes to, 0 for allowed.
fn flowset_of(k: &Classifier, frame: &[u8], dir: Direction) -> u32 {
    match k.classify_frame(frame, dir) {
        Verdict::Schedule { class, .. } => match k.classes()[class as usize].origin {
            ClassOrigin::Flowset(f) => f,
            o => panic!("{o:?}"),
        },
        Verdict::Allow => 0,
        v => panic!("{v:?}"),
    }
}

/// A TCP frame with `flags`, `tos` and `extra` payload bytes.
fn tcp_frame(flags: u8, tos: u8, extra: usize) -> Vec<u8> {
    let mut t = super::packet::build::tcp(1000, 80);
    t[13] = flags;
    t.extend(std::iter::repeat(0).take(extra));
    let mut f = eth(&[], 0x0800);
    f.extend(super::packet::build::ipv4(
        0x0a00_0001,
        0x0a00_0002,
        6,
        0,
        &[],
        &t,
    ));
    f[15] = tos;
    f
}

#[test]
fn tcp_flags_lengths_and_dscp_match_real_frames() {
    let k = rules_of(
        "add 100 queue 1 tcp from any to any setup\n\
         add 200 queue 2 tcp from any to any tcpflags fin,!ack\n\
         add 300 queue 3 ip from any to any dscp ef iplen 1-100\n\
         add 400 queue 4 tcp from any to any established not iplen 1-100",
        None,
    );
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const FIN: u8 = 0x01;
    assert_eq!(flowset_of(&k, &tcp_frame(SYN, 0, 0), OUT), 1);
    assert_eq!(flowset_of(&k, &tcp_frame(SYN | ACK, 0, 0), OUT), 0);
    assert_eq!(flowset_of(&k, &tcp_frame(FIN, 0, 0), OUT), 2);
    // DSCP ef is 46 << 2 = 0xb8; 40 bytes long, inside 1-100.
    assert_eq!(flowset_of(&k, &tcp_frame(ACK, 0xb8, 0), OUT), 3);
    assert_eq!(flowset_of(&k, &tcp_frame(ACK, 0xb8, 100), OUT), 4);
    assert_eq!(flowset_of(&k, &tcp_frame(ACK, 0, 0), OUT), 0);
    // UDP carries no TCP flags: `established` never holds, whatever its bytes.
    let mut u = udp4(1, 2, 3, 4);
    u[14 + 20 + 13] = ACK;
    assert_eq!(flowset_of(&k, &u, OUT), 0);
}

#[test]
fn negation_families_skipto_and_count() {
    let k = rules_of(
        "add 100 count ip from any to any\n\
         add 200 skipto 1000 ip from not 10.0.0.0/8 to any\n\
         add 300 queue 1 ip6 from any to any not 53\n\
         add 400 queue 2 udp from any to any\n\
         add 1000 queue 3 ip4 from any to any\n\
         add 1100 queue 4 ip from any to any",
        None,
    );
    // 10/8 sources are not skipped: IPv4 UDP -> rule 400.
    assert_eq!(flowset_of(&k, &udp4(0x0a00_0001, 2, 3, 4), OUT), 2);
    // others skip to 1000 (IPv4) ...
    assert_eq!(flowset_of(&k, &udp4(0xc0a8_0001, 2, 3, 4), OUT), 3);
    // ... or past it (IPv6 is not `ip4`): rule 1100.
    assert_eq!(flowset_of(&k, &udp6(1, 2, 3, 4), OUT), 4);
    // not skipped? An IPv6 source is never in 10/8: skipped too.
    assert_eq!(flowset_of(&k, &udp6(1, 2, 3, 53), OUT), 4);
    let k = rules_of(
        "add 100 queue 1 ip6 from any to any not 53\nadd 200 queue 2 ip from any to any",
        None,
    );
    assert_eq!(flowset_of(&k, &udp6(1, 2, 3, 4), OUT), 1);
    assert_eq!(flowset_of(&k, &udp6(1, 2, 3, 53), OUT), 2);
    assert_eq!(flowset_of(&k, &udp4(1, 2, 3, 4), OUT), 2);
}

#[test]
fn skipto_tablearg_jumps_by_the_table_value() {
    let k = rules_of(
        "table T add 10.0.0.0/8 300\ntable T add 10.1.0.0/16 50\n\
         add 100 skipto tablearg ip from table(T) to any\n\
         add 200 queue 1 ip from any to any\n\
         add 300 queue 2 ip from any to any",
        None,
    );
    assert_eq!(flowset_of(&k, &udp4(0x0a00_0001, 2, 3, 4), OUT), 2);
    // a value at or below the rule's own number goes on with the next rule
    assert_eq!(flowset_of(&k, &udp4(0x0a01_0001, 2, 3, 4), OUT), 1);
    assert_eq!(flowset_of(&k, &udp4(0x0b00_0001, 2, 3, 4), OUT), 1);
}

#[test]
fn prob_draws_from_the_callers_generator() {
    let k = rules_of(
        "add 100 prob 0.25 queue 1 ip from any to any\nadd 200 queue 2 ip from any to any",
        None,
    );
    let f = udp4(1, 2, 3, 4);
    let run = |seed| {
        let mut rng = Rng::new(seed);
        (0..10_000)
            .map(|_| match k.classify_frame_with(&f, OUT, &mut rng) {
                Verdict::Schedule { class, .. } => class,
                v => panic!("{v:?}"),
            })
            .collect::<Vec<u32>>()
    };
    let a = run(7);
    assert_eq!(a, run(7), "same seed, same decisions");
    let ones = a.iter().filter(|c| **c == class_of(&k, 1)).count();
    assert!((2200..2800).contains(&ones), "{ones} of 10000 at 0.25");
}

#[test]
fn interfaces_are_decided_per_direction_when_built() {
    let rules = "add 100 queue 1 ip from any to any out xmit igb0 recv igb1\n\
                 add 200 queue 2 ip from any to any in via igb1\n\
                 add 300 queue 3 ip from any to any via igb*\n\
                 add 400 queue 4 ip from any to any not via any";
    let f = udp4(1, 2, 3, 4);
    let k = rules_of(rules, Some(&Interfaces::between("igb1", "igb0")));
    assert_eq!(flowset_of(&k, &f, OUT), 1);
    assert_eq!(flowset_of(&k, &f, IN), 2);
    let k = rules_of(rules, Some(&Interfaces::between("em1", "igb7")));
    assert_eq!(flowset_of(&k, &f, OUT), 3);
    assert_eq!(
        flowset_of(&k, &f, IN),
        0,
        "in: via is em1, which `igb*` is not"
    );
    // Non-IP frames see interface conditions too (rule 400 never holds: all have one).
    let mut arp = eth(&[], 0x0806);
    arp.extend_from_slice(&[0; 28]);
    let k = rules_of(rules, Some(&Interfaces::between("igb1", "igb0")));
    assert_eq!(flowset_of(&k, &arp, OUT), 1);
    // Without interfaces a rule naming one is refused, naming it.
    let text = format!("sched 1 config type fifo\nqueue 1 config sched 1\n{rules}\n");
    let c = crate::parse_ipfw(
        &text
            .replace("queue 2", "queue 1")
            .replace("queue 3", "queue 1")
            .replace("queue 4", "queue 1"),
        "t",
    )
    .unwrap();
    let e = Classifier::new(&c).unwrap_err().to_string();
    assert!(
        e.contains("rule 100: `xmit igb0` matches an interface") && e.contains("pspat shape"),
        "{e}"
    );
}

/// `one_pass 0` (ipfw's `net.inet.ip.fw.one_pass=0`): a packet collects every pipe and
/// queue its rules send it to, in rule order, until a rule ends the search; with
/// `one_pass 1` the first one ends it.
#[test]
fn one_pass_0_chains_pipes_and_queues_in_rule_order() {
    let text = |one_pass: u8| {
        format!(
            "sysctl net.inet.ip.fw.one_pass={one_pass}\n\
             pipe 1 config bw 10Mbit/s\npipe 2 config delay 20\n\
             queue 5 config pipe 1\n\
             add 100 pipe 1 ip from any to any\n\
             add 200 queue 5 udp from any to any 53\n\
             add 300 deny tcp from any to any 25\n\
             add 400 pipe 2 udp from any to any\n\
             add 500 allow ip from any to any\n"
        )
    };
    let k = Classifier::new(&crate::parse_ipfw(&text(0), "t").unwrap()).unwrap();
    assert!(!k.one_pass());
    let pipe = |id| k.class_of(ClassOrigin::Pipe(id)).unwrap();
    let q5 = k.class_of(ClassOrigin::Flowset(5)).unwrap();
    let hops = |frame: Vec<u8>| match k.classify_frame(&frame, OUT) {
        Verdict::Chain { chain, key } => {
            assert_eq!(
                key,
                match parse_frame(&frame) {
                    Ok(Parsed::Ip(k)) => k,
                    p => panic!("{p:?}"),
                }
            );
            chain.classes().to_vec()
        }
        Verdict::Schedule { class, .. } => vec![class],
        v => panic!("{v:?}"),
    };
    let a = 0x0a00_0001;
    assert_eq!(hops(udp4(a, 2, 1000, 53)), [pipe(1), q5, pipe(2)]);
    assert_eq!(hops(udp4(a, 2, 1000, 54)), [pipe(1), pipe(2)]);
    assert_eq!(
        hops(tcp4(a, 2, 1000, 80)),
        [pipe(1)],
        "one pipe: scheduled as with one_pass 1"
    );
    assert_eq!(
        k.classify_frame(&tcp4(a, 2, 1000, 25), OUT),
        Verdict::Drop(DropCause::DeniedByRule(300)),
        "a later deny drops it"
    );
    let k1 = Classifier::new(&crate::parse_ipfw(&text(1), "t").unwrap()).unwrap();
    assert!(k1.one_pass());
    assert!(matches!(
        k1.classify_frame(&udp4(a, 2, 1000, 53), OUT),
        Verdict::Schedule { class, .. } if class == pipe(1)
    ));

    // A hop beyond MAX_HOPS is a drop naming the rule.
    let mut many = "sysctl net.inet.ip.fw.one_pass=0\npipe 1 config bw 1Mbit/s\n".to_string();
    for n in 1..=MAX_HOPS + 1 {
        many += &format!("add {} pipe 1 ip from any to any\n", n * 10);
    }
    let k = Classifier::new(&crate::parse_ipfw(&many, "t").unwrap()).unwrap();
    assert_eq!(
        k.classify_frame(&udp4(a, 2, 1, 1), OUT),
        Verdict::Drop(DropCause::TooManyHops {
            rule: 10 * (MAX_HOPS as u32 + 1)
        })
    );
}
