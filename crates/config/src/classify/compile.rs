//! Building stage 1: a [`Config`] compiled into a [`Classifier`], and the plan (classes and
//! schedulers as dense indices) the engine builds its schedulers and maps from.
//!
//! - Classes: every flowset (in id order), then every pipe (in id order). A pipe's class
//!   has weight 1, `max_len` [`PIPE_MAX_LEN`] (a FIFO has no use for a smaller one), the
//!   pipe's queue limit and an empty mask (one queue per instance).
//! - Schedulers: every scheduler (in id order), then one `fifo` scheduler per pipe,
//!   carrying the pipe's link (bandwidth, delay, burst, framing), mask, instance bound and
//!   idle time.
//! - Tables: compiled once each into an [`Lpm`] whose values are dense indices into the
//!   table's distinct values, so a tablearg rule turns a value into a class with one array
//!   load.
//!
//! The configuration is expected to be validated, but a dangling reference (a flowset's
//! scheduler, a rule's target or table) is still an error, never a panic.

use std::collections::BTreeMap;

use super::interfaces::Interfaces;
use super::key::FlowKey;
use super::lpm::Lpm;
use super::packet::{parse_frame, Parsed};
use super::rules::{
    dir_bit, CAction, CAddr, COpt, CRule, Draw, DropCause, Outcome, PortCond, RuleSet, TargSlot,
    ThreadRng, Verdict, ALWAYS, ANY_VALUE, DIR_IN, DIR_OUT, FAM_V4, FAM_V6, MAX_CANDS,
};
use crate::error::ConfigError;
use crate::model::{
    Action, AddrMatch, Cond, Config, Direction, Family, FlowMask, Framing, Match, Probability,
    QueueLimit, QueueManagement, Target,
};
use std::net::IpAddr;
use std::sync::Arc;

use pspat_sched::registry::Params;
use pspat_sched::tree::{ClassSpec, TreeSpec};

/// The longest packet a pipe's queue takes: any IPv4 datagram or Ethernet frame.
pub const PIPE_MAX_LEN: u32 = 65_535;

/// Where a class comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClassOrigin {
    Flowset(u32),
    Pipe(u32),
}

/// Where a scheduler comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SchedOrigin {
    Sched(u32),
    Pipe(u32),
}

/// A class: a flowset, or a pipe's implicit flowset. Queues of a class are created per
/// masked key, in every instance of its scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Class {
    pub origin: ClassOrigin,
    /// Index into [`Classifier::scheds`].
    pub sched: u32,
    pub weight: u32,
    pub max_len: u32,
    pub limit: QueueLimit,
    /// Loss and early drop of each of its queues.
    pub qm: QueueManagement,
    /// The flow mask.
    pub mask: FlowMask,
    /// Most queues per scheduler instance.
    pub max_queues: u32,
    pub idle_ns: u64,
    /// When its scheduler is a tree of classes: the leaf class its queues join (an index
    /// into the tree's [`TreeSpec::classes`]).
    pub leaf: Option<u32>,
}

/// A scheduler: a configured one, or a pipe's `fifo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sched {
    pub origin: SchedOrigin,
    pub algorithm: String,
    pub params: Vec<(String, String)>,
    /// Its link: pipe N's for scheduler N and for pipe N's FIFO (see [`crate::model`]).
    pub bandwidth_bps: u64,
    /// How long a packet leaving the link is held before it is sent on (ns).
    pub delay_ns: u64,
    /// Bytes an idle link may send at once beyond its rate (as the link charges them).
    pub burst_bytes: u64,
    /// What the link charges for a frame ([`Framing::wire_len`]).
    pub framing: Framing,
    /// The scheduler mask.
    pub mask: FlowMask,
    pub max_instances: u32,
    pub idle_ns: u64,
    /// The classes under it, when it is the root of a tree (`sched N config parent P`):
    /// each instance schedules them with `pspat_sched::tree`, and `algorithm` orders its
    /// top classes.
    pub tree: Option<Arc<TreeSpec>>,
}

/// Stage 1 of classification: read-only, shared by every client thread (`Send + Sync`).
#[derive(Clone, Debug)]
pub struct Classifier {
    classes: Vec<Class>,
    scheds: Vec<Sched>,
    rules: RuleSet,
    tables: Vec<Lpm>,
    default: Outcome,
}

fn invalid(msg: String) -> ConfigError {
    ConfigError::Invalid(msg)
}

/// What a leaf class may hold: no bound of its own, beyond its flowsets' queue limits and
/// the engine's packet capacity (as a scheduler instance without classes).
const LEAF_PACKETS: u32 = 1 << 30;

/// The tree of classes under scheduler `root`, if it has any: every class below it, parents
/// before children, each named `sched N`; `leaf_of` gets the class index of each class
/// (so of each leaf, the flowsets' schedulers).
fn tree_of(
    config: &Config,
    root: u32,
    children_of: &BTreeMap<u32, Vec<u32>>,
    leaf_of: &mut BTreeMap<u32, u32>,
) -> Option<Arc<TreeSpec>> {
    let children = |id: u32| children_of.get(&id).into_iter().flatten().copied();
    children(root).next()?;
    let root_spec = &config.schedulers[&root];
    let mut spec = TreeSpec::new(&root_spec.algorithm);
    let mut todo: Vec<(u32, Option<usize>)> = children(root).map(|id| (id, None)).collect();
    let mut i = 0;
    while i < todo.len() {
        let (id, parent) = todo[i];
        let s = &config.schedulers[&id];
        let k = s.class.expect("a class");
        let mut c = ClassSpec::new(format!("sched {id}"), parent, &s.algorithm);
        c.params = s
            .params
            .iter()
            .fold(Params::new(), |p, (key, v)| p.set(key, v));
        c.rate_bps = k.rate_bps;
        c.ceil_bps = k.ceil_bps;
        c.burst = k.burst;
        c.cburst = k.cburst;
        c.weight = k.weight;
        c.prio = k.prio;
        c.limit_pkts = LEAF_PACKETS;
        let index = spec.add(c);
        leaf_of.insert(id, index as u32);
        todo.extend(children(id).map(|c| (c, Some(index))));
        i += 1;
    }
    Some(Arc::new(spec))
}

impl Classifier {
    /// Compile `config` for packets that pass no interface (`pspat run`): a rule naming an
    /// interface is refused (see `interfaces.rs`).
    pub fn new(config: &Config) -> Result<Classifier, ConfigError> {
        Self::build(config, &Interfaces::default(), MAX_CANDS)
    }

    /// Compile `config` for packets passing between `interfaces` (`pspat shape`).
    pub fn with_interfaces(
        config: &Config,
        interfaces: &Interfaces,
    ) -> Result<Classifier, ConfigError> {
        Self::build(config, interfaces, MAX_CANDS)
    }

    /// [`Classifier::new`] with the rules' candidate lists collapsed to one protocol class
    /// (the fallback for huge rule sets), for tests.
    #[cfg(test)]
    pub(crate) fn new_one_class(config: &Config) -> Result<Classifier, ConfigError> {
        Self::build(config, &Interfaces::default(), 0)
    }

    fn build(
        config: &Config,
        interfaces: &Interfaces,
        max_cands: usize,
    ) -> Result<Classifier, ConfigError> {
        let mut scheds = Vec::new();
        let mut sched_index = BTreeMap::new();
        // Where each configured scheduler's flowsets go: its own instance (a link
        // scheduler), or a leaf of the tree of its root (a class).
        let mut leaf_of: BTreeMap<u32, u32> = BTreeMap::new();
        let mut children_of: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for s in config.schedulers.values() {
            if let Some(k) = s.class {
                children_of.entry(k.parent).or_default().push(s.id);
            }
        }
        for s in config.schedulers.values() {
            if s.class.is_some() {
                continue;
            }
            let tree = tree_of(config, s.id, &children_of, &mut leaf_of);
            sched_index.insert(s.id, scheds.len() as u32);
            let link = config.link_of(s);
            scheds.push(Sched {
                origin: SchedOrigin::Sched(s.id),
                algorithm: s.algorithm.clone(),
                params: s.params.clone(),
                bandwidth_bps: link.bandwidth_bps,
                delay_ns: link.delay_ns,
                burst_bytes: link.burst_bytes,
                framing: link.framing,
                mask: s.mask,
                max_instances: s.max_instances,
                idle_ns: s.idle_ns,
                tree,
            });
        }
        for s in config.schedulers.values() {
            if s.class.is_some() {
                let mut root = s.id;
                while let Some(k) = config.schedulers.get(&root).and_then(|x| x.class) {
                    root = k.parent;
                }
                let i = *sched_index
                    .get(&root)
                    .ok_or_else(|| invalid(format!("sched {}: its tree has no root", s.id)))?;
                sched_index.insert(s.id, i);
            }
        }
        let mut classes = Vec::new();
        let mut flowset_class = BTreeMap::new();
        for f in config.flowsets.values() {
            let sched = *sched_index.get(&f.sched).ok_or_else(|| {
                invalid(format!("queue {}: sched {} is not defined", f.id, f.sched))
            })?;
            flowset_class.insert(f.id, classes.len() as u32);
            classes.push(Class {
                origin: ClassOrigin::Flowset(f.id),
                sched,
                weight: f.weight,
                max_len: f.max_len,
                limit: f.limit,
                qm: f.qm,
                mask: f.mask,
                max_queues: f.max_queues,
                idle_ns: f.idle_ns,
                leaf: leaf_of.get(&f.sched).copied(),
            });
        }
        let mut pipe_class = BTreeMap::new();
        for p in config.pipes.values() {
            let sched = scheds.len() as u32;
            scheds.push(Sched {
                origin: SchedOrigin::Pipe(p.id),
                algorithm: "fifo".to_string(),
                params: Vec::new(),
                bandwidth_bps: p.bandwidth_bps,
                delay_ns: p.delay_ns,
                burst_bytes: p.burst_bytes,
                framing: p.framing,
                mask: p.mask,
                max_instances: p.max_instances,
                idle_ns: p.idle_ns,
                tree: None,
            });
            pipe_class.insert(p.id, classes.len() as u32);
            classes.push(Class {
                origin: ClassOrigin::Pipe(p.id),
                sched,
                weight: 1,
                // A pipe is a FIFO: any length is fine (dummynet's pipes have no max-len),
                // and `pspat shape` schedules whole frames, longer than a 1500-byte MTU.
                max_len: PIPE_MAX_LEN,
                limit: p.limit,
                qm: p.qm,
                mask: FlowMask::default(),
                max_queues: 1,
                idle_ns: p.idle_ns,
                leaf: None,
            });
        }

        // Tables: the LPM returns dense value indices (into `Lpm::values`).
        let mut tables = Vec::new();
        let mut table_index = BTreeMap::new();
        for t in config.tables.values() {
            table_index.insert(&t.id, tables.len() as u32);
            tables.push(Lpm::new(t.entries.iter().map(|(p, v)| (p, *v))));
        }

        let target = |what: &str, action: &Action| -> Result<Option<u32>, String> {
            let (map, kind, id) = match *action {
                Action::Queue(Target::Id(id)) => (&flowset_class, "queue", id),
                Action::Pipe(Target::Id(id)) => (&pipe_class, "pipe", id),
                _ => return Ok(None),
            };
            map.get(&id)
                .copied()
                .map(Some)
                .ok_or_else(|| format!("{what}: {kind} {id} is not defined"))
        };

        let mut rules = Vec::with_capacity(config.rules.len());
        for (i, r) in config.rules.iter().enumerate() {
            let what = format!("rule {}", r.number);
            let m = &r.matcher;
            let addr = |a: &AddrMatch| -> Result<CAddr, ConfigError> {
                Ok(match a {
                    AddrMatch::Any => CAddr::Any,
                    AddrMatch::Prefixes(ps) => {
                        let mut v4 = Vec::new();
                        let mut v6 = Vec::new();
                        for p in ps {
                            match p.addr {
                                IpAddr::V4(a) => {
                                    let len = u32::from(p.len.min(32));
                                    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
                                    v4.push((u32::from(a) & mask, mask));
                                }
                                IpAddr::V6(a) => {
                                    let len = u32::from(p.len.min(128));
                                    let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
                                    v6.push((u128::from(a) & mask, mask));
                                }
                            }
                        }
                        match (&v4[..], &v6[..]) {
                            (&[(n, m)], []) => CAddr::One4(n, m),
                            _ => CAddr::Prefixes {
                                v4: v4.into(),
                                v6: v6.into(),
                            },
                        }
                    }
                    AddrMatch::Table(t) => {
                        let i = *table_index.get(&t.name).ok_or_else(|| {
                            invalid(format!("{what}: table {} is not defined", t.name))
                        })?;
                        // A value no entry has: an index no lookup returns.
                        let want = t.value.map_or(ANY_VALUE, |v| {
                            tables[i as usize]
                                .values()
                                .iter()
                                .position(|x| *x == v)
                                .map_or(ANY_VALUE - 1, |p| p as u32)
                        });
                        CAddr::Table(i, want)
                    }
                })
            };
            let src = addr(&m.src)?;
            let dst = addr(&m.dst)?;
            // The table whose value is the tablearg: the destination's if both; a negated
            // lookup has no value.
            let targ_table = match (&dst, m.not.dst, &src, m.not.src) {
                (CAddr::Table(t, _), false, _, _) | (_, _, CAddr::Table(t, _), false) => {
                    Some(*t as usize)
                }
                _ => None,
            };
            let need_table = || {
                targ_table.ok_or_else(|| {
                    invalid(format!("{what}: tablearg without a table(N) condition"))
                })
            };
            // Rule index of the first rule numbered `n` or more, past rule `i`.
            let skip_to = |n: u32| {
                let at = config.rules.partition_point(|x| x.number < n);
                at.max(i + 1) as u32
            };
            let action = match r.action {
                Action::Allow => CAction::Allow,
                Action::Deny => CAction::Deny,
                Action::Count => CAction::Count,
                Action::Skipto(Target::Id(n)) => CAction::Skipto(skip_to(n)),
                Action::Skipto(Target::Tablearg) => {
                    let t = need_table()?;
                    CAction::SkiptoTablearg(
                        tables[t].values().iter().map(|v| skip_to(*v)).collect(),
                    )
                }
                Action::Queue(Target::Tablearg) | Action::Pipe(Target::Tablearg) => {
                    let t = need_table()?;
                    let map = if matches!(r.action, Action::Queue(_)) {
                        &flowset_class
                    } else {
                        &pipe_class
                    };
                    let slots = tables[t]
                        .values()
                        .iter()
                        .map(|v| match map.get(v) {
                            Some(&c) => TargSlot::Class(c),
                            None => TargSlot::Unknown(*v),
                        })
                        .collect();
                    CAction::Tablearg(slots)
                }
                _ => CAction::Class(target(&what, &r.action).map_err(invalid)?.unwrap_or(0)),
            };
            let src_ports = PortCond::new(&m.src_ports).negated(m.not.src_ports);
            let dst_ports = PortCond::new(&m.dst_ports).negated(m.not.dst_ports);
            let (families, opts, dirs) = options(&what, m, interfaces)?;
            rules.push(CRule {
                number: r.number,
                dirs,
                pd_mask: m.proto.map_or(0, |_| 0xff) | m.direction.map_or(0, |_| 0x300),
                pd_want: u32::from(m.proto.unwrap_or(0))
                    | m.direction.map_or(0, |d| u32::from(dir_bit(d)) << 8),
                port_check: !(src_ports.masked().2 && dst_ports.masked().2),
                src_ports,
                dst_ports,
                src,
                dst,
                src_not: m.not.src,
                dst_not: m.not.dst,
                families,
                prob: m.prob.map_or(ALWAYS, |p| {
                    (u64::from(p.0) << 32) / u64::from(Probability::ONE.0)
                }),
                opts,
                action,
            });
        }

        let default = match config.default_action {
            Action::Allow => Outcome::Allow,
            Action::Deny => Outcome::Drop(DropCause::NoRuleMatched),
            Action::Queue(Target::Tablearg) | Action::Pipe(Target::Tablearg) => {
                return Err(invalid(
                    "default action: tablearg needs a table(N) condition".to_string(),
                ))
            }
            a => Outcome::Class(target("default action", &a).map_err(invalid)?.unwrap_or(0)),
        };
        Ok(Classifier {
            classes,
            scheds,
            rules: RuleSet::with_limit(rules, max_cands).one_pass(config.one_pass),
            tables,
            default,
        })
    }

    /// ipfw's `one_pass`: false when a packet may cross several classes
    /// ([`Verdict::Chain`]).
    pub fn one_pass(&self) -> bool {
        self.rules.is_one_pass()
    }

    /// The classes, indexed by `Verdict::Schedule::class`.
    pub fn classes(&self) -> &[Class] {
        &self.classes
    }

    /// The schedulers, indexed by `Class::sched`.
    pub fn scheds(&self) -> &[Sched] {
        &self.scheds
    }

    /// The class of a flowset or pipe.
    pub fn class_of(&self, origin: ClassOrigin) -> Option<u32> {
        self.classes
            .iter()
            .position(|c| c.origin == origin)
            .map(|i| i as u32)
    }

    /// The scheduler index of a scheduler or pipe.
    pub fn sched_of(&self, origin: SchedOrigin) -> Option<u32> {
        self.scheds
            .iter()
            .position(|s| s.origin == origin)
            .map(|i| i as u32)
    }

    /// The classes attached to scheduler `sched` (an index into [`Classifier::scheds`]).
    pub fn classes_of_sched(&self, sched: u32) -> impl Iterator<Item = u32> + '_ {
        self.classes
            .iter()
            .enumerate()
            .filter(move |(_, c)| c.sched == sched)
            .map(|(i, _)| i as u32)
    }

    /// Classify an Ethernet frame; `prob` rules draw from the calling thread's generator.
    #[inline]
    pub fn classify_frame(&self, frame: &[u8], dir: Direction) -> Verdict {
        self.classify_frame_with(frame, dir, &mut ThreadRng)
    }

    /// Classify an Ethernet frame; `prob` rules draw from `rng` (a client's own).
    #[inline]
    pub fn classify_frame_with(
        &self,
        frame: &[u8],
        dir: Direction,
        rng: &mut impl Draw,
    ) -> Verdict {
        // `one_pass 0` decided first, before anything is live: a test further in would
        // cost the common case its register allocation (about 8 ns a packet).
        if !self.rules.is_one_pass() {
            return self.classify_frame_chaining(frame, dir, rng);
        }
        match parse_frame(frame) {
            Ok(Parsed::Ip(key)) => self.one_pass_key(&key, dir, rng),
            Ok(Parsed::NonIp { .. }) => self.one_pass_non_ip(dir, rng),
            Err(e) => Verdict::Drop(DropCause::Malformed(e)),
        }
    }

    /// [`Classifier::classify_frame_with`] with `one_pass 0`.
    #[inline(never)]
    fn classify_frame_chaining(
        &self,
        frame: &[u8],
        dir: Direction,
        rng: &mut impl Draw,
    ) -> Verdict {
        let key = match parse_frame(frame) {
            Ok(Parsed::Ip(key)) => Some(key),
            Ok(Parsed::NonIp { .. }) => None,
            Err(e) => return Verdict::Drop(DropCause::Malformed(e)),
        };
        self.rules
            .evaluate_chaining(&self.tables, self.default, key.as_ref(), dir, rng)
    }

    /// Classify an IP packet by its key (see [`FlowKey`] for the header fields a key made
    /// by hand lacks); `prob` rules draw from the calling thread's generator.
    #[inline]
    pub fn classify_key(&self, key: &FlowKey, dir: Direction) -> Verdict {
        self.classify_key_with(key, dir, &mut ThreadRng)
    }

    /// [`Classifier::classify_key`] drawing from `rng`.
    #[inline]
    pub fn classify_key_with(&self, key: &FlowKey, dir: Direction, rng: &mut impl Draw) -> Verdict {
        if !self.rules.is_one_pass() {
            return self
                .rules
                .evaluate_chaining(&self.tables, self.default, Some(key), dir, rng);
        }
        self.one_pass_key(key, dir, rng)
    }

    #[inline(always)]
    fn one_pass_key(&self, key: &FlowKey, dir: Direction, rng: &mut impl Draw) -> Verdict {
        self.rules
            .evaluate(&self.tables, self.default, key, dir, rng)
            .verdict(key)
    }

    /// The verdict of a non-IP frame (see `rules.rs`).
    #[inline]
    pub fn classify_non_ip(&self, dir: Direction) -> Verdict {
        self.classify_non_ip_with(dir, &mut ThreadRng)
    }

    /// [`Classifier::classify_non_ip`] drawing from `rng`.
    #[inline]
    pub fn classify_non_ip_with(&self, dir: Direction, rng: &mut impl Draw) -> Verdict {
        if !self.rules.is_one_pass() {
            return self
                .rules
                .evaluate_chaining(&self.tables, self.default, None, dir, rng);
        }
        self.one_pass_non_ip(dir, rng)
    }

    fn one_pass_non_ip(&self, dir: Direction, rng: &mut impl Draw) -> Verdict {
        self.rules
            .evaluate_non_ip(&self.tables, self.default, dir, rng)
            .verdict(&FlowKey::default())
    }
}

/// A rule's options compiled to read the key, each with whether it is negated.
type COpts = Box<[(bool, COpt)]>;

/// A rule's families (`FAM_*` bits), options compiled to read the key, and directions
/// (`DIR_*` bits): its direction condition with the directions its interface conditions
/// fail in taken out.
fn options(what: &str, m: &Match, interfaces: &Interfaces) -> Result<(u8, COpts, u8), ConfigError> {
    let mut families = FAM_V4 | FAM_V6;
    let mut dirs = match m.direction {
        None => DIR_IN | DIR_OUT,
        Some(d) => dir_bit(d),
    };
    let mut opts = Vec::new();
    for o in &m.options {
        let opt = match &o.cond {
            Cond::Family(f) => {
                let bit = match f {
                    Family::V4 => FAM_V4,
                    Family::V6 => FAM_V6,
                };
                families &= if o.not { !bit } else { bit };
                continue;
            }
            Cond::Iface(which, name) => {
                if interfaces.is_none() {
                    return Err(invalid(format!(
                        "{what}: `{o}` matches an interface, and packets here pass none: \
                         interfaces exist only under `pspat shape` (its --in and --out)"
                    )));
                }
                for d in [Direction::In, Direction::Out] {
                    if interfaces.holds(d, *which, name) == o.not {
                        dirs &= !dir_bit(d);
                    }
                }
                continue;
            }
            Cond::TcpFlags { set, clear } => COpt::TcpFlags {
                set: *set,
                clear: *clear,
            },
            Cond::Established => COpt::Established,
            Cond::IpLen(rs) => COpt::IpLen(PortCond::new(rs)),
            Cond::IpTtl(rs) => COpt::IpTtl(PortCond::new(rs)),
            Cond::Dscp(set) => COpt::Dscp(*set),
        };
        opts.push((o.not, opt));
    }
    Ok((families, opts.into(), dirs))
}
