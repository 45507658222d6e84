//! Property: a random valid configuration, printed in ipfw syntax and in TOML, parses back
//! from both to a model equal to the original. So the two front ends read the same setup
//! to equal models, and `pspat config check`'s output is itself a valid configuration.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use pspat_config::resolve::canonical;
use pspat_config::*;
use pspat_sched::registry::algorithms;

/// xorshift64*: the configuration is a function of one seed (proptest shrinks the seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
    /// Mostly small, sometimes huge: values near the edges of the units matter.
    fn quantity(&mut self) -> u64 {
        match self.below(4) {
            0 => self.next(),
            1 => self.below(10_000),
            2 => self.below(1000) * 1000u64.pow(self.below(4) as u32),
            _ => self.below(1000) << (10 * self.below(4)),
        }
    }
    fn mask(&mut self) -> FlowMask {
        match self.below(4) {
            0 => FlowMask::default(),
            1 => FlowMask::ALL,
            _ => FlowMask {
                src_ip: if self.coin() { self.next() as u32 } else { 0 },
                dst_ip: if self.coin() {
                    u32::MAX << self.below(32)
                } else {
                    0
                },
                src_ip6: if self.coin() {
                    u128::from(self.next()) << 64 | u128::from(self.next())
                } else {
                    0
                },
                dst_ip6: if self.coin() {
                    u128::MAX << self.below(128)
                } else {
                    0
                },
                src_port: if self.coin() { self.next() as u16 } else { 0 },
                dst_port: if self.coin() { self.next() as u16 } else { 0 },
                proto: if self.coin() { self.next() as u8 } else { 0 },
            },
        }
    }
    /// A link's framing: plain half the time, else any part at an edge or inside its
    /// range.
    fn framing(&mut self) -> Framing {
        if self.coin() {
            return Framing::PLAIN;
        }
        let overhead = match self.below(4) {
            0 => 0,
            1 => -64,
            2 => 256,
            _ => self.range(0, 320) as i32 - 64,
        };
        let mpu = match self.below(3) {
            0 => 0,
            1 => 256,
            _ => self.below(257) as u32,
        };
        let linklayer = LinkLayer::NAMES[self.below(3) as usize].1;
        Framing::new(overhead, mpu, linklayer)
    }
    fn limit(&mut self) -> QueueLimit {
        if self.coin() {
            QueueLimit::Packets(self.range(1, 1 << 31) as u32)
        } else {
            QueueLimit::Bytes(self.quantity().max(1))
        }
    }
    fn idle(&mut self) -> u64 {
        self.quantity().max(1)
    }
    fn prefix(&mut self) -> Prefix {
        let p = if self.coin() {
            Prefix {
                addr: IpAddr::V4(Ipv4Addr::from(self.next() as u32)),
                len: self.range(0, 32) as u8,
            }
        } else {
            let a = u128::from(self.next()) << 64 | u128::from(self.next());
            Prefix {
                addr: IpAddr::V6(Ipv6Addr::from(a)),
                len: self.range(0, 128) as u8,
            }
        };
        canonical(&p).unwrap()
    }
    fn ports(&mut self) -> Vec<PortRange> {
        (0..self.below(3))
            .map(|_| {
                let a = self.next() as u16;
                let b = if self.coin() { a } else { self.next() as u16 };
                PortRange {
                    lo: a.min(b),
                    hi: a.max(b),
                }
            })
            .collect()
    }
    fn option(&mut self) -> RuleOption {
        let ranges = |r: &mut Rng, max: u64| {
            let mut v = Vec::new();
            for _ in 0..r.range(1, 3) {
                let a = r.below(max + 1) as u16;
                let b = r.below(max + 1) as u16;
                v.push(PortRange {
                    lo: a.min(b),
                    hi: a.max(b),
                });
            }
            v
        };
        let cond = match self.below(8) {
            0 => Cond::Family(if self.coin() { Family::V4 } else { Family::V6 }),
            1 => {
                let set = self.next() as u8;
                let clear = self.next() as u8 & !set;
                if set | clear == 0 {
                    Cond::Established
                } else {
                    Cond::TcpFlags { set, clear }
                }
            }
            2 => Cond::Established,
            3 => Cond::IpLen(ranges(self, 65535)),
            4 => Cond::IpTtl(ranges(self, 255)),
            5 => Cond::Dscp(self.next() | 1 << self.below(64)),
            _ => {
                let dir = [IfaceDir::Recv, IfaceDir::Xmit, IfaceDir::Via][self.below(3) as usize];
                let name = match self.below(3) {
                    0 => IfName::Any,
                    1 => IfName::Name(format!("igb{}", self.below(8))),
                    _ => IfName::Name(format!("vlan{}*", self.below(100))),
                };
                Cond::Iface(dir, name)
            }
        };
        RuleOption {
            not: self.coin(),
            cond,
        }
    }
    fn pick(&mut self, ids: &[u32]) -> u32 {
        ids[self.below(ids.len() as u64) as usize]
    }
}

/// Random loss and RED for a queue of `limit` (RED's thresholds below it).
fn qm(r: &mut Rng, limit: &QueueLimit) -> QueueManagement {
    let size = match *limit {
        QueueLimit::Packets(n) => u64::from(n),
        QueueLimit::Bytes(b) => b,
    };
    let plr = if r.coin() {
        Probability(r.below(1_000_000_001) as u32)
    } else {
        Probability::default()
    };
    let red = (size >= 2 && r.coin()).then(|| {
        let min_th = r.below(size - 1);
        Red {
            w_q: Probability(1 + r.below(1_000_000_000) as u32),
            min_th,
            max_th: min_th + 1 + r.below(size - min_th),
            max_p: Probability(r.below(1_000_000_001) as u32),
            gentle: r.coin(),
        }
    });
    QueueManagement { plr, red }
}

fn ids(rng: &mut Rng, max: u64) -> Vec<u32> {
    let n = rng.range(0, max);
    let mut v: Vec<u32> = (0..n).map(|_| rng.range(1, 65535) as u32).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn random_config(seed: u64) -> Config {
    let mut r = Rng(seed | 1);
    let mut c = Config::default();
    let algs = algorithms();
    for id in ids(&mut r, 4) {
        let info = &algs[r.below(algs.len() as u64) as usize];
        let params = info
            .params
            .iter()
            .filter(|_| r.coin())
            .map(|p| (p.name.to_owned(), p.default.to_owned()))
            .collect();
        c.schedulers.insert(
            id,
            SchedSpec {
                id,
                algorithm: info.name.to_owned(),
                params,
                bandwidth_bps: r.quantity(),
                framing: r.framing(),
                mask: r.mask(),
                max_instances: r.range(1, u32::MAX.into()) as u32,
                idle_ns: r.idle(),
                class: None,
            },
        );
    }
    let scheds: Vec<u32> = c.schedulers.keys().copied().collect();
    if !scheds.is_empty() {
        for id in ids(&mut r, 5) {
            let limit = r.limit();
            c.flowsets.insert(
                id,
                FlowsetSpec {
                    id,
                    sched: r.pick(&scheds),
                    weight: r.range(1, 1 << 16) as u32,
                    max_len: r.range(1, 1 << 20) as u32,
                    limit,
                    qm: qm(&mut r, &limit),
                    mask: r.mask(),
                    max_queues: r.range(1, u32::MAX.into()) as u32,
                    idle_ns: r.idle(),
                },
            );
        }
    }
    for id in ids(&mut r, 3) {
        let limit = r.limit();
        // A scheduler of a pipe's number runs on the pipe's link.
        if let Some(s) = c.schedulers.get_mut(&id) {
            s.bandwidth_bps = 0;
            s.framing = Framing::PLAIN;
        }
        c.pipes.insert(
            id,
            PipeSpec {
                id,
                bandwidth_bps: r.quantity(),
                delay_ns: r.below(10_000) * 1_000_000 * u64::from(r.coin()),
                burst_bytes: r.below(1 << 20) * u64::from(r.coin()),
                framing: r.framing(),
                limit,
                qm: qm(&mut r, &limit),
                mask: r.mask(),
                max_instances: r.range(1, u32::MAX.into()) as u32,
                idle_ns: r.idle(),
            },
        );
    }
    let flowsets: Vec<u32> = c.flowsets.keys().copied().collect();
    let pipes: Vec<u32> = c.pipes.keys().copied().collect();
    // Tables: values name flowsets, pipes, or anything (then no tablearg rule uses them).
    let mut table_kind: BTreeMap<TableName, u8> = BTreeMap::new();
    for n in ids(&mut r, 3) {
        // A number, or a name as ipfw(8) and OPNsense write them.
        let id = match r.below(3) {
            0 => TableName::new(&format!("T{n}")).unwrap(),
            1 => TableName::new(&format!("__rule__{n:x}-a.b_src")).unwrap(),
            _ => TableName::from(n),
        };
        let kind = r.below(3) as u8;
        let mut entries: Vec<(Prefix, u32)> = (0..r.below(6))
            .filter_map(|_| {
                let v = match kind {
                    0 if !flowsets.is_empty() => r.pick(&flowsets),
                    1 if !pipes.is_empty() => r.pick(&pipes),
                    0 | 1 => return None,
                    _ => r.next() as u32,
                };
                Some((r.prefix(), v))
            })
            .collect();
        entries.sort_by_key(|e| e.0);
        entries.dedup_by_key(|e| e.0);
        c.tables.insert(
            id.clone(),
            Table {
                id: id.clone(),
                entries,
            },
        );
        table_kind.insert(id, kind);
    }
    let tables: Vec<TableName> = c.tables.keys().cloned().collect();
    let mut number = 0u32;
    for _ in 0..r.below(8) {
        number = (number + r.range(0, 300) as u32).clamp(1, 65534);
        let addr = |r: &mut Rng| match r.below(3) {
            0 => AddrMatch::Any,
            1 if !tables.is_empty() => AddrMatch::Table(TableRef {
                name: tables[r.below(tables.len() as u64) as usize].clone(),
                value: if r.coin() {
                    Some(r.next() as u32)
                } else {
                    None
                },
            }),
            _ => AddrMatch::Prefixes((0..r.range(1, 3)).map(|_| r.prefix()).collect()),
        };
        let mut m = Match {
            direction: [None, Some(Direction::In), Some(Direction::Out)][r.below(3) as usize],
            proto: if r.coin() { Some(r.next() as u8) } else { None },
            src: addr(&mut r),
            dst: addr(&mut r),
            src_ports: r.ports(),
            dst_ports: r.ports(),
            prob: if r.below(4) == 0 {
                Some(Probability(r.range(1, Probability::ONE.0.into()) as u32))
            } else {
                None
            },
            options: (0..r.below(3)).map(|_| r.option()).collect(),
            ..Match::default()
        };
        m.not = Negations {
            src: r.coin() && m.src != AddrMatch::Any,
            dst: r.coin() && m.dst != AddrMatch::Any,
            src_ports: r.coin() && !m.src_ports.is_empty(),
            dst_ports: r.coin() && !m.dst_ports.is_empty(),
        };
        let action = match r.below(7) {
            0 if !flowsets.is_empty() => Action::Queue(Target::Id(r.pick(&flowsets))),
            1 if !pipes.is_empty() => Action::Pipe(Target::Id(r.pick(&pipes))),
            2 | 3 if !tables.is_empty() => {
                // tablearg: exactly one lookup, in a table whose values fit the action
                let t = tables[r.below(tables.len() as u64) as usize].clone();
                let ok_queue = table_kind[&t] == 0 || c.tables[&t].entries.is_empty();
                let ok_pipe = table_kind[&t] == 1 || c.tables[&t].entries.is_empty();
                let t = AddrMatch::Table(TableRef {
                    name: t,
                    value: None,
                });
                if r.coin() {
                    (m.src, m.not.src) = (t, false);
                    if matches!(m.dst, AddrMatch::Table(_)) {
                        (m.dst, m.not.dst) = (AddrMatch::Any, false);
                    }
                } else {
                    (m.dst, m.not.dst) = (t, false);
                    if matches!(m.src, AddrMatch::Table(_)) {
                        (m.src, m.not.src) = (AddrMatch::Any, false);
                    }
                }
                if r.below(4) == 0 {
                    Action::Skipto(Target::Tablearg)
                } else if ok_queue {
                    Action::Queue(Target::Tablearg)
                } else if ok_pipe {
                    Action::Pipe(Target::Tablearg)
                } else {
                    Action::Allow
                }
            }
            4 => Action::Deny,
            5 if number < 65534 => {
                Action::Skipto(Target::Id(r.range(u64::from(number) + 1, 65534) as u32))
            }
            6 => Action::Count,
            _ => Action::Allow,
        };
        c.rules.push(Rule {
            number,
            action,
            matcher: m,
        });
    }
    c.default_action = match r.below(4) {
        0 if !flowsets.is_empty() => Action::Queue(Target::Id(r.pick(&flowsets))),
        1 if !pipes.is_empty() => Action::Pipe(Target::Id(r.pick(&pipes))),
        2 => Action::Allow,
        _ => Action::Deny,
    };
    c.one_pass = r.coin();
    c
}

#[test]
fn the_generator_makes_varied_valid_configurations() {
    // Guards the property below against a generator that only makes trivial or invalid
    // configurations (it would then test nothing, or fail for the generator's fault).
    let (mut rules, mut tablearg, mut entries) = (0, 0, 0);
    for seed in 0..200u64 {
        let c = random_config(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        rules += c.rules.len();
        entries += c.tables.values().map(|t| t.entries.len()).sum::<usize>();
        tablearg += c
            .rules
            .iter()
            .filter(|r| {
                matches!(
                    r.action,
                    Action::Queue(Target::Tablearg) | Action::Pipe(Target::Tablearg)
                )
            })
            .count();
    }
    assert!(
        rules > 300 && tablearg > 20 && entries > 100,
        "{rules} {tablearg} {entries}"
    );
    // and the rule language beyond the 5-tuple
    let all: Vec<Rule> = (0..200u64)
        .flat_map(|seed| random_config(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).rules)
        .collect();
    let count = |f: &dyn Fn(&Rule) -> bool| all.iter().filter(|r| f(r)).count();
    let named = (0..200u64)
        .flat_map(|seed| random_config(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).tables)
        .filter(|(t, _)| t.number().is_none())
        .count();
    let (skipto, counts, prob, negated, options) = (
        count(&|r| matches!(r.action, Action::Skipto(_))),
        count(&|r| r.action == Action::Count),
        count(&|r| r.matcher.prob.is_some()),
        count(&|r| r.matcher.not != Negations::default()),
        count(&|r| !r.matcher.options.is_empty()),
    );
    assert!(
        skipto > 20 && counts > 20 && prob > 20 && negated > 50 && options > 100 && named > 20,
        "{skipto} {counts} {prob} {negated} {options} {named}"
    );
    // and links with a framing, on pipes and on schedulers with their own link, with each
    // link layer and a negative overhead among them
    let framings: Vec<Framing> = (0..200u64)
        .flat_map(|seed| {
            let c = random_config(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let s: Vec<Framing> = c.schedulers.values().map(|s| s.framing).collect();
            s.into_iter()
                .chain(c.pipes.values().map(|p| p.framing))
                .collect::<Vec<_>>()
        })
        .filter(|f| !f.is_plain())
        .collect();
    let with = |l: LinkLayer| framings.iter().filter(|f| f.linklayer == l).count();
    let negative = framings.iter().filter(|f| f.overhead < 0).count();
    assert!(
        with(LinkLayer::Ethernet) > 20
            && with(LinkLayer::Atm) > 20
            && with(LinkLayer::Ptm) > 20
            && negative > 20,
        "{} {} {} {negative}",
        with(LinkLayer::Ethernet),
        with(LinkLayer::Atm),
        with(LinkLayer::Ptm)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn printed_in_either_syntax_it_parses_back_equal(seed in any::<u64>()) {
        let c = random_config(seed);
        let ipfw = c.to_string();
        let back = parse_ipfw(&ipfw, "printed.ipfw");
        prop_assert!(back.is_ok(), "{}\n{}", back.unwrap_err(), ipfw);
        prop_assert_eq!(back.unwrap(), c.clone(), "ipfw:\n{}", ipfw);
        let toml = c.to_toml();
        let back = parse_toml(&toml, "printed.toml");
        prop_assert!(back.is_ok(), "{}\n{}", back.unwrap_err(), toml);
        prop_assert_eq!(back.unwrap(), c, "toml:\n{}", toml);
    }
}
