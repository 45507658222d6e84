//! Arbitrary bytes as Ethernet frames through a classifier built from a fixed configuration
//! with tables, masks and every action: it must never panic, and its verdicts must be
//! consistent (a scheduled class exists and is the one a second classification of the same
//! key gives; a non-IP frame gets the non-IP verdict).
//!
//! `cd fuzz && cargo +nightly fuzz run classify -- -max_total_time=30`

#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use pspat_config::classify::{parse_frame, Classifier, Parsed, Verdict};
use pspat_config::*;

fn v4(a: u32, len: u8) -> Prefix {
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

fn config() -> Config {
    let mut c = Config::default();
    let mask = FlowMask {
        src_ip: 0xff,
        dst_port: 0xffff,
        src_ip6: 0xffff,
        ..FlowMask::default()
    };
    c.schedulers.insert(
        1,
        SchedSpec {
            id: 1,
            algorithm: "qfq".into(),
            params: vec![],
            bandwidth_bps: 1_000_000,
            mask: FlowMask {
                dst_ip: 0xff00,
                ..FlowMask::default()
            },
            max_instances: 4,
            idle_ns: 1000,
            framing: Default::default(),
            class: None,
        },
    );
    for id in [1, 2, 3] {
        c.flowsets.insert(
            id,
            FlowsetSpec {
                id,
                sched: 1,
                weight: id,
                max_len: 1500,
                limit: QueueLimit::Packets(10),
                qm: QueueManagement::default(),
                mask,
                max_queues: 8,
                idle_ns: 1000,
            },
        );
    }
    c.pipes.insert(
        5,
        PipeSpec {
            id: 5,
            bandwidth_bps: 0,
            limit: QueueLimit::Bytes(10_000),
            mask: FlowMask::ALL,
            max_instances: 2,
            idle_ns: 10,
            ..PipeSpec::new(5)
        },
    );
    c.tables.insert(
        1.into(),
        Table {
            id: 1.into(),
            entries: vec![
                (v4(0, 1), 1),
                (v4(0x0a00_0000, 8), 2),
                (v4(0x0a01_0200, 24), 99),
                (v4(0x0a01_0203, 32), 5),
                (v6(0x2001_0db8 << 96, 32), 3),
            ],
        },
    );
    c.tables.insert(
        2.into(),
        Table {
            id: 2.into(),
            entries: vec![(v4(0xc0a8_0000, 16), 5), (v6(0, 0), 7)],
        },
    );
    let m = |f: &dyn Fn(&mut Match)| {
        let mut m = Match::default();
        f(&mut m);
        m
    };
    c.rules = vec![
        Rule {
            number: 10,
            action: Action::Deny,
            matcher: m(&|m| {
                m.proto = Some(6);
                m.dst_ports = vec![PortRange { lo: 25, hi: 25 }, PortRange { lo: 465, hi: 587 }];
            }),
        },
        Rule {
            number: 20,
            action: Action::Allow,
            matcher: m(&|m| m.src = AddrMatch::Prefixes(vec![v4(0x7f00_0000, 8), v6(1, 128)])),
        },
        Rule {
            number: 30,
            action: Action::Pipe(Target::Tablearg),
            matcher: m(&|m| {
                m.direction = Some(Direction::In);
                m.dst = AddrMatch::Table(2.into());
            }),
        },
        Rule {
            number: 40,
            action: Action::Queue(Target::Id(3)),
            matcher: m(&|m| {
                m.proto = Some(17);
                m.src_ports = vec![PortRange { lo: 53, hi: 53 }];
            }),
        },
        Rule {
            number: 50,
            action: Action::Queue(Target::Tablearg),
            matcher: m(&|m| m.src = AddrMatch::Table(1.into())),
        },
        Rule {
            number: 60,
            action: Action::Pipe(Target::Id(5)),
            matcher: m(&|m| m.direction = Some(Direction::Out)),
        },
    ];
    c.default_action = Action::Queue(Target::Id(1));
    c
}

thread_local! {
    static CLASSIFIER: Classifier = Classifier::new(&config()).expect("fixed config compiles");
    /// The same rules with `one_pass 0`: packets collect every pipe and queue they match.
    static CHAINING: Classifier = Classifier::new(&pspat_config::Config {
        one_pass: false,
        ..config()
    })
    .expect("fixed config compiles");
}

fuzz_target!(|data: &[u8]| {
    CLASSIFIER.with(|k| check(k, data));
    CHAINING.with(|k| check(k, data));
});

fn check(k: &Classifier, data: &[u8]) {
    {
        for dir in [Direction::In, Direction::Out] {
            let v = k.classify_frame(data, dir);
            match (parse_frame(data), v) {
                (Ok(Parsed::Ip(key)), v) => {
                    assert_eq!(k.classify_key(&key, dir), v);
                    if let Verdict::Schedule { class, key: vk } = v {
                        assert!((class as usize) < k.classes().len());
                        assert_eq!(vk, key);
                        let c = &k.classes()[class as usize];
                        assert!((c.sched as usize) < k.scheds().len());
                    }
                    if let Verdict::Chain { chain, key: vk } = v {
                        assert!(!k.one_pass(), "a chain with one_pass 1");
                        assert!(chain.classes().len() >= 2);
                        assert!(chain
                            .classes()
                            .iter()
                            .all(|&c| (c as usize) < k.classes().len()));
                        assert_eq!(vk, key);
                    }
                }
                (Ok(Parsed::NonIp { .. }), v) => assert_eq!(v, k.classify_non_ip(dir)),
                (Err(e), v) => assert_eq!(
                    v,
                    Verdict::Drop(pspat_config::classify::DropCause::Malformed(e))
                ),
            }
        }
    }
}
