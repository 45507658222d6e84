//! Building stage 1: a [`Config`] compiled into a [`Classifier`], and the plan (classes and
//! schedulers as dense indices) the engine builds its schedulers and maps from.
//!
//! - Classes: every flowset (in id order), then every pipe (in id order). A pipe's class
//!   has weight 1, `max_len` [`PIPE_MAX_LEN`] (a FIFO has no use for a smaller one), the
//!   pipe's queue limit and an empty mask (one queue per instance).
//! - Schedulers: every scheduler (in id order), then one `fifo` scheduler per pipe,
//!   carrying the pipe's bandwidth, mask, instance bound and idle time.
//! - Tables: compiled once each into an [`Lpm`] whose values are dense indices into the
//!   table's distinct values, so a tablearg rule turns a value into a class with one array
//!   load.
//!
//! The configuration is expected to be validated, but a dangling reference (a flowset's
//! scheduler, a rule's target or table) is still an error, never a panic.

use std::collections::BTreeMap;

use super::key::FlowKey;
use super::lpm::Lpm;
use super::packet::{parse_frame, Parsed};
use super::rules::{
    dir_bit, rule_outcome, CAction, CAddr, CRule, DropCause, Outcome, PortCond, RuleSet, TargSlot,
    Verdict, DIR_IN, DIR_OUT, MAX_CANDS,
};
use crate::error::ConfigError;
use crate::model::{
    Action, AddrMatch, Config, Direction, FlowMask, QueueLimit, QueueManagement, Target,
};
use std::net::IpAddr;

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
    /// Bytes an idle link may send at once beyond its rate.
    pub burst_bytes: u64,
    /// The scheduler mask.
    pub mask: FlowMask,
    pub max_instances: u32,
    pub idle_ns: u64,
}

/// Stage 1 of classification: read-only, shared by every client thread (`Send + Sync`).
#[derive(Clone, Debug)]
pub struct Classifier {
    classes: Vec<Class>,
    scheds: Vec<Sched>,
    rules: RuleSet,
    tables: Vec<Lpm>,
    default: Outcome,
    /// The verdict of a non-IP frame, per direction (`[In, Out]`).
    non_ip: [Verdict; 2],
}

fn invalid(msg: String) -> ConfigError {
    ConfigError::Invalid(msg)
}

impl Classifier {
    /// Compile `config`.
    pub fn new(config: &Config) -> Result<Classifier, ConfigError> {
        Self::build(config, MAX_CANDS)
    }

    /// [`Classifier::new`] with the rules' candidate lists collapsed to one protocol class
    /// (the fallback for huge rule sets), for tests.
    #[cfg(test)]
    pub(crate) fn new_one_class(config: &Config) -> Result<Classifier, ConfigError> {
        Self::build(config, 0)
    }

    fn build(config: &Config, max_cands: usize) -> Result<Classifier, ConfigError> {
        let mut scheds = Vec::new();
        let mut sched_index = BTreeMap::new();
        for s in config.schedulers.values() {
            sched_index.insert(s.id, scheds.len() as u32);
            let link = config.link_of(s);
            scheds.push(Sched {
                origin: SchedOrigin::Sched(s.id),
                algorithm: s.algorithm.clone(),
                params: s.params.clone(),
                bandwidth_bps: link.bandwidth_bps,
                delay_ns: link.delay_ns,
                burst_bytes: link.burst_bytes,
                mask: s.mask,
                max_instances: s.max_instances,
                idle_ns: s.idle_ns,
            });
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
                mask: p.mask,
                max_instances: p.max_instances,
                idle_ns: p.idle_ns,
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
            });
        }

        // Tables: the LPM returns dense value indices (into `Lpm::values`).
        let mut tables = Vec::new();
        let mut table_index = BTreeMap::new();
        for t in config.tables.values() {
            table_index.insert(t.id, tables.len() as u32);
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
        for r in &config.rules {
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
                    AddrMatch::Table(t) => CAddr::Table(
                        *table_index
                            .get(t)
                            .ok_or_else(|| invalid(format!("{what}: table {t} is not defined")))?,
                    ),
                })
            };
            let src = addr(&m.src)?;
            let dst = addr(&m.dst)?;
            let action = match r.action {
                Action::Allow => CAction::Allow,
                Action::Deny => CAction::Deny,
                Action::Queue(Target::Tablearg) | Action::Pipe(Target::Tablearg) => {
                    // The table whose value is the tablearg: the destination's if both.
                    let t = match (&dst, &src) {
                        (CAddr::Table(t), _) | (_, CAddr::Table(t)) => *t as usize,
                        _ => {
                            return Err(invalid(format!(
                                "{what}: tablearg without a table(N) condition"
                            )))
                        }
                    };
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
            let src_ports = PortCond::new(&m.src_ports);
            let dst_ports = PortCond::new(&m.dst_ports);
            rules.push(CRule {
                number: r.number,
                dirs: match m.direction {
                    None => DIR_IN | DIR_OUT,
                    Some(d) => dir_bit(d),
                },
                pd_mask: m.proto.map_or(0, |_| 0xff) | m.direction.map_or(0, |_| 0x300),
                pd_want: u32::from(m.proto.unwrap_or(0))
                    | m.direction.map_or(0, |d| u32::from(dir_bit(d)) << 8),
                port_check: !(src_ports.masked().2 && dst_ports.masked().2),
                src_ports,
                dst_ports,
                src,
                dst,
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
        let non_ip = [Direction::In, Direction::Out].map(|d| {
            let bit = dir_bit(d);
            match rules
                .iter()
                .find(|r| r.dirs & bit != 0 && r.matches_non_ip())
            {
                // A non-IP rule has no table, so its action is never tablearg; evaluating
                // it on the zero key gives its verdict.
                Some(r) => rule_outcome(r, &tables, &FlowKey::default()).unwrap_or(default),
                None => default,
            }
            .verdict(&FlowKey::default())
        });
        Ok(Classifier {
            classes,
            scheds,
            rules: RuleSet::with_limit(rules, max_cands),
            tables,
            default,
            non_ip,
        })
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

    /// Classify an Ethernet frame.
    #[inline]
    pub fn classify_frame(&self, frame: &[u8], dir: Direction) -> Verdict {
        match parse_frame(frame) {
            Ok(Parsed::Ip(key)) => self.classify_key(&key, dir),
            Ok(Parsed::NonIp { .. }) => self.classify_non_ip(dir),
            Err(e) => Verdict::Drop(DropCause::Malformed(e)),
        }
    }

    /// Classify an IP packet by its key.
    #[inline]
    pub fn classify_key(&self, key: &FlowKey, dir: Direction) -> Verdict {
        self.rules
            .evaluate(&self.tables, self.default, key, dir)
            .verdict(key)
    }

    /// The verdict of a non-IP frame (see `rules.rs`).
    #[inline]
    pub fn classify_non_ip(&self, dir: Direction) -> Verdict {
        self.non_ip[match dir {
            Direction::In => 0,
            Direction::Out => 1,
        }]
    }
}
