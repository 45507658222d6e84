//! The classifier benchmark's workload, shared by `benches/classify.rs` and
//! `examples/classify_count.rs` (instruction counts under callgrind).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use pspat_config::classify::packet::build::{tcp4, udp4};
use pspat_config::classify::FlowKey;
use pspat_config::*;

pub const FRAMES: usize = 4096;
pub const TABLE: usize = 10_000;

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

pub fn prefix(a: u32, len: u8) -> Prefix {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    Prefix {
        addr: IpAddr::V4(Ipv4Addr::from(a & mask)),
        len,
    }
}

/// 10k entries inside 10.0.0.0/8 (lengths 16, 20, 24, 28 and 32, mostly /24 and /32, as a
/// customer table would be), values naming 64 flowsets, plus a /8 catch-all so every source
/// in 10/8 hits. Returns the config and the table's entries.
pub fn setup() -> (Config, Vec<(Prefix, u32)>) {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut entries = BTreeMap::new();
    entries.insert(prefix(0x0a00_0000, 8), 10);
    while entries.len() < TABLE {
        let a = 0x0a00_0000 | (rng.next() as u32 & 0x00ff_ffff);
        let len = [16u8, 20, 24, 24, 24, 28, 32, 32][rng.next() as usize % 8];
        let v = 10 + (rng.next() % 64) as u32;
        entries.insert(prefix(a, len), v);
    }
    let entries: Vec<(Prefix, u32)> = entries.into_iter().collect();
    let mut c = Config::default();
    c.schedulers.insert(
        1,
        SchedSpec {
            id: 1,
            algorithm: "qfq".into(),
            params: vec![],
            bandwidth_bps: 10_000_000_000,
            framing: Framing::PLAIN,
            mask: FlowMask::default(),
            max_instances: DEFAULT_MAX_INSTANCES,
            idle_ns: DEFAULT_IDLE_NS,
            class: None,
        },
    );
    for id in 1..=80 {
        c.flowsets.insert(
            id,
            FlowsetSpec {
                id,
                sched: 1,
                weight: id,
                max_len: 1500,
                limit: QueueLimit::default(),
                qm: QueueManagement::default(),
                mask: FlowMask {
                    src_ip: 0xff,
                    ..FlowMask::default()
                },
                max_queues: DEFAULT_MAX_QUEUES,
                idle_ns: DEFAULT_IDLE_NS,
            },
        );
    }
    c.tables.insert(
        1.into(),
        Table {
            id: 1.into(),
            entries: entries.clone(),
        },
    );
    let m = |f: fn(&mut Match)| {
        let mut m = Match::default();
        f(&mut m);
        m
    };
    c.rules = vec![
        Rule {
            number: 10,
            action: Action::Deny,
            matcher: m(|m| {
                m.proto = Some(6);
                m.dst_ports = vec![PortRange { lo: 25, hi: 25 }];
            }),
        },
        Rule {
            number: 20,
            action: Action::Allow,
            matcher: m(|m| {
                m.direction = Some(Direction::In);
            }),
        },
        Rule {
            number: 30,
            action: Action::Queue(Target::Id(1)),
            matcher: m(|m| {
                m.proto = Some(17);
                m.dst_ports = vec![PortRange { lo: 53, hi: 53 }];
            }),
        },
        Rule {
            number: 40,
            action: Action::Queue(Target::Id(2)),
            matcher: m(|m| {
                m.src = AddrMatch::Prefixes(vec![prefix(0xc0a8_0000, 16), prefix(0xac10_0000, 12)]);
            }),
        },
        Rule {
            number: 100,
            action: Action::Queue(Target::Tablearg),
            matcher: m(|m| {
                m.direction = Some(Direction::Out);
                m.src = AddrMatch::Table(1.into());
            }),
        },
    ];
    (c, entries)
}

/// Sources: half uniformly random in 10/8, half inside a random table entry.
pub fn sources(entries: &[(Prefix, u32)], rng: &mut Rng) -> Vec<u32> {
    (0..FRAMES)
        .map(|i| {
            if i % 2 == 0 {
                0x0a00_0000 | (rng.next() as u32 & 0x00ff_ffff)
            } else {
                let (p, _) = entries[rng.next() as usize % entries.len()];
                let IpAddr::V4(a) = p.addr else {
                    unreachable!()
                };
                let host = u32::MAX.checked_shr(u32::from(p.len)).unwrap_or(0);
                u32::from(a) | (rng.next() as u32 & host)
            }
        })
        .collect()
}

/// Frames in one buffer at a fixed stride, as a packet ring holds them (no pointer to
/// chase per frame).
pub struct Frames {
    buf: Vec<u8>,
    lens: Vec<usize>,
}

pub const STRIDE: usize = 128;

impl Frames {
    pub fn get(&self, i: usize) -> &[u8] {
        &self.buf[i * STRIDE..i * STRIDE + self.lens[i]]
    }
}

/// A UDP or TCP frame (at random) from each source.
pub fn frames(srcs: &[u32], rng: &mut Rng) -> Frames {
    let mut f = Frames {
        buf: vec![0; srcs.len() * STRIDE],
        lens: Vec::new(),
    };
    for (i, &s) in srcs.iter().enumerate() {
        let sp = 1024 + (rng.next() % 60000) as u16;
        let dst = 0xc633_6400 | (rng.next() as u32 & 0xff);
        let frame = if rng.next() % 2 == 0 {
            udp4(s, dst, sp, 443)
        } else {
            tcp4(s, dst, sp, 80)
        };
        f.buf[i * STRIDE..][..frame.len()].copy_from_slice(&frame);
        f.lens.push(frame.len());
    }
    f
}

pub fn etherparse_key(f: &[u8]) -> Option<FlowKey> {
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    let s = SlicedPacket::from_ethernet(f).ok()?;
    let mut k = match s.net? {
        NetSlice::Ipv4(h) => {
            let h = h.header();
            FlowKey::v4(
                u32::from(h.source_addr()),
                u32::from(h.destination_addr()),
                0,
                0,
                h.protocol().0,
            )
        }
        NetSlice::Ipv6(h) => {
            let x = h.header();
            FlowKey::v6(
                u128::from(x.source_addr()),
                u128::from(x.destination_addr()),
                0,
                0,
                h.payload().ip_number.0,
            )
        }
        _ => return None,
    };
    match s.transport {
        Some(TransportSlice::Udp(u)) => {
            k.src_port = u.source_port();
            k.dst_port = u.destination_port();
        }
        Some(TransportSlice::Tcp(t)) => {
            k.src_port = t.source_port();
            k.dst_port = t.destination_port();
        }
        _ => {}
    }
    Some(k)
}
