//! Stage 1 at run time: the compiled rules and their evaluation.
//!
//! Rules are tried in order; the first whose every condition holds decides. A rule is a
//! flat record checked cheapest condition first (direction, protocol, ports, then
//! addresses: prefix lists, then table lookups), so a rule that does not apply usually
//! costs a couple of compares. Cost of a packet: O(rules tried) compares plus one
//! [`Lpm`] lookup per table condition reached; no allocation. Large rule sets should be
//! tables (one `queue tablearg ... table(N)` rule), as the dummynet slides advise.
//!
//! **tablearg.** A `table(N)` condition that holds sets the rule's tablearg to the value
//! found (the destination table's, if a rule has both). Table values are compiled to dense
//! indices, and each `queue tablearg` / `pipe tablearg` rule holds the class of every value
//! index, or the raw value when it names no flowset (pipe): a packet hitting it is dropped
//! with [`DropCause::TableargUnknown`], the configuration is not refused, as in ipfw.
//!
//! **Non-IP frames** match only rules with no protocol, address or port condition (a
//! direction condition is fine); the first such rule for each direction is found when the
//! classifier is built, so they cost nothing here. They are scheduled with the all-zero
//! key.

use super::key::FlowKey;
use super::lpm::Lpm;
use super::packet::ParseError;
use crate::model::{Direction, PortRange};

/// What stage 1 decided for a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Queue it in class `class` (an index into `Classifier::classes`); `key` is the whole,
    /// unmasked key (stage 2 applies the class's and its scheduler's masks).
    Schedule { class: u32, key: FlowKey },
    /// Let it through unscheduled.
    Allow,
    /// Drop it.
    Drop(DropCause),
}

/// Why stage 1 dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DropCause {
    /// The frame did not parse.
    #[error("malformed frame: {0}")]
    Malformed(ParseError),
    /// A `deny` rule matched.
    #[error("denied by rule {0}")]
    DeniedByRule(u32),
    /// No rule matched and the default action is `deny`.
    #[error("no rule matched")]
    NoRuleMatched,
    /// A `queue tablearg` / `pipe tablearg` rule matched, but the table value names no
    /// flowset (pipe).
    #[error("rule {rule}: tablearg {value} names no flowset or pipe")]
    TableargUnknown { rule: u32, value: u32 },
}

/// What the rules decided, without the key (small, so that the rule loop does not move
/// 48-byte keys around).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Class(u32),
    Allow,
    Drop(DropCause),
}

impl Outcome {
    #[inline(always)]
    pub fn verdict(self, key: &FlowKey) -> Verdict {
        match self {
            Outcome::Class(class) => Verdict::Schedule { class, key: *key },
            Outcome::Allow => Verdict::Allow,
            Outcome::Drop(c) => Verdict::Drop(c),
        }
    }
}

/// Bits of [`CRule::dirs`].
pub(crate) const DIR_IN: u8 = 1;
pub(crate) const DIR_OUT: u8 = 2;

#[inline(always)]
pub(crate) fn dir_bit(dir: Direction) -> u8 {
    match dir {
        Direction::In => DIR_IN,
        Direction::Out => DIR_OUT,
    }
}

/// A compiled port condition: the hull `lo..=lo + span` of its ranges, checked without a
/// branch, and the ranges themselves when there are several (checked after the hull).
#[derive(Clone, Debug)]
pub(crate) struct PortCond {
    lo: u16,
    span: u16,
    /// Empty for no condition or a single range (the hull is then exact).
    list: Box<[PortRange]>,
    /// No condition at all.
    any: bool,
}

impl PortCond {
    pub fn new(ranges: &[PortRange]) -> Self {
        match ranges {
            [] => PortCond {
                lo: 0,
                span: u16::MAX,
                list: Box::new([]),
                any: true,
            },
            [r] if r.lo <= r.hi => PortCond {
                lo: r.lo,
                span: r.hi - r.lo,
                list: Box::new([]),
                any: false,
            },
            _ => {
                let lo = ranges.iter().map(|r| r.lo).min().unwrap_or(0);
                let hi = ranges.iter().map(|r| r.hi).max().unwrap_or(0).max(lo);
                PortCond {
                    lo,
                    span: hi - lo,
                    list: ranges.into(),
                    any: false,
                }
            }
        }
    }

    /// Whether [`PortCond::exact`] must be checked after the hull.
    pub fn has_list(&self) -> bool {
        !self.list.is_empty()
    }

    /// Whether `port` is in one of the ranges, given it is in the hull.
    #[inline]
    fn exact(&self, port: u16) -> bool {
        self.list.is_empty() || self.list.iter().any(|r| r.lo <= port && port <= r.hi)
    }
}

/// A compiled address condition.
#[derive(Clone, Debug)]
pub(crate) enum CAddr {
    Any,
    /// A single IPv4 prefix `(network, netmask)` (the common case, inline).
    One4(u32, u32),
    /// `(network, netmask)` pairs per family.
    Prefixes {
        v4: Box<[(u32, u32)]>,
        v6: Box<[(u128, u128)]>,
    },
    /// Index into `Classifier::tables`.
    Table(u32),
}

/// Where a tablearg value index leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TargSlot {
    Class(u32),
    Unknown(u32),
}

/// A compiled action.
#[derive(Clone, Debug)]
pub(crate) enum CAction {
    Class(u32),
    /// Indexed by the table's value index.
    Tablearg(Box<[TargSlot]>),
    Allow,
    Deny,
}

/// A compiled rule.
#[derive(Clone, Debug)]
pub(crate) struct CRule {
    pub number: u32,
    /// `DIR_IN | DIR_OUT` bits it applies to.
    pub dirs: u8,
    /// The protocol and direction conditions over `proto | dir_bit << 8`:
    /// `pd & pd_mask == pd_want` (a mask of 0 for no condition).
    pub pd_mask: u32,
    pub pd_want: u32,
    /// Whether either port condition has a list to check after its hull.
    pub port_lists: bool,
    pub src_ports: PortCond,
    pub dst_ports: PortCond,
    pub src: CAddr,
    pub dst: CAddr,
    pub action: CAction,
}

impl CRule {
    /// Whether a non-IP frame can match it.
    pub fn matches_non_ip(&self) -> bool {
        self.pd_mask & 0xff == 0
            && self.src_ports.any
            && self.dst_ports.any
            && matches!(self.src, CAddr::Any)
            && matches!(self.dst, CAddr::Any)
    }

    /// Whether its protocol condition accepts protocol `p`.
    fn accepts_proto(&self, p: u8) -> bool {
        (u32::from(p) & self.pd_mask & 0xff) == self.pd_want & 0xff
    }
}

/// A rule as a candidate in one (direction, protocol class) list: what is checked for every
/// packet, 20 bytes, then the rule itself if that passes.
#[derive(Clone, Copy, Debug)]
struct Cand {
    pd_mask: u32,
    pd_want: u32,
    sp_lo: u16,
    sp_span: u16,
    dp_lo: u16,
    dp_span: u16,
    rule: u32,
}

impl Cand {
    /// Whether direction, protocol or the port hulls rule it out, for `pd = proto |
    /// dir_bit << 8`. Arithmetic, not `&&` or `&` on booleans (which LLVM turns back into
    /// branches): one branch per candidate, taken the same way for most packets, where a
    /// UDP/TCP mix would mispredict a protocol test. `port - lo` minus `span + 1` goes
    /// negative (bit 31) exactly when `port - lo <= span`.
    #[inline(always)]
    fn miss(&self, pd: u32, sport: u16, dport: u16) -> bool {
        let s = u32::from(sport.wrapping_sub(self.sp_lo)).wrapping_sub(u32::from(self.sp_span) + 1);
        let d = u32::from(dport.wrapping_sub(self.dp_lo)).wrapping_sub(u32::from(self.dp_span) + 1);
        ((pd & self.pd_mask) ^ self.pd_want) | (!(s & d) >> 31) != 0
    }
}

/// Most candidate entries the per-class lists may hold before they fall back to one
/// class (where the protocol test of each candidate does the filtering).
pub(crate) const MAX_CANDS: usize = 1 << 20;

/// The compiled rules, with per (direction, protocol class) candidate lists: protocols
/// that no rule tells apart share a class, and a class's list holds, in rule order, only
/// the rules whose direction and protocol conditions accept it. A packet scans its list.
#[derive(Clone, Debug)]
pub(crate) struct RuleSet {
    rules: Vec<CRule>,
    cands: Vec<Cand>,
    /// List of (dir d, class c) is `cands[offs[2c + d]..offs[2c + d + 1]]` (d: In 0, Out 1).
    offs: Vec<u32>,
    proto_class: [u16; 256],
}

impl RuleSet {
    /// Build the lists, unless they would exceed `max_cands` entries: then one class (the
    /// candidates' protocol tests do the filtering).
    pub fn with_limit(rules: Vec<CRule>, max_cands: usize) -> Self {
        let mut named: Vec<u8> = rules
            .iter()
            .filter(|r| r.pd_mask & 0xff != 0)
            .map(|r| r.pd_want as u8)
            .collect();
        named.sort_unstable();
        named.dedup();
        let mut proto_class = [0u16; 256];
        // Class 0: every protocol no rule names; class i + 1: named[i].
        let mut reps = vec![(0..=255u8).find(|p| named.binary_search(p).is_err())];
        for (i, &p) in named.iter().enumerate() {
            proto_class[usize::from(p)] = i as u16 + 1;
            reps.push(Some(p));
        }
        if reps.len() * 2 * rules.len() > max_cands {
            proto_class = [0; 256];
            reps = vec![None];
        }
        let mut cands = Vec::new();
        let mut offs = vec![0u32];
        for rep in &reps {
            for dir in [DIR_IN, DIR_OUT] {
                for (i, r) in rules.iter().enumerate() {
                    // `None`: one class for all protocols (or every protocol is named).
                    let proto_ok = rep.is_none_or_accepted(r);
                    if r.dirs & dir != 0 && proto_ok {
                        cands.push(Cand {
                            pd_mask: r.pd_mask,
                            pd_want: r.pd_want,
                            sp_lo: r.src_ports.lo,
                            sp_span: r.src_ports.span,
                            dp_lo: r.dst_ports.lo,
                            dp_span: r.dst_ports.span,
                            rule: i as u32,
                        });
                    }
                }
                offs.push(cands.len() as u32);
            }
        }
        RuleSet {
            rules,
            cands,
            offs,
            proto_class,
        }
    }

    /// Evaluate on an IP key. `default` is the outcome when no rule matches.
    #[inline(always)]
    pub fn evaluate(
        &self,
        tables: &[Lpm],
        default: Outcome,
        key: &FlowKey,
        dir: Direction,
    ) -> Outcome {
        let bit = dir_bit(dir);
        let list =
            2 * usize::from(self.proto_class[usize::from(key.proto)]) + usize::from(bit >> 1);
        let cands = &self.cands[self.offs[list] as usize..self.offs[list + 1] as usize];
        let pd = u32::from(key.proto) | u32::from(bit) << 8;
        for c in cands {
            if c.miss(pd, key.src_port, key.dst_port) {
                continue;
            }
            if let Some(o) = rule_outcome(&self.rules[c.rule as usize], tables, key) {
                return o;
            }
        }
        default
    }
}

/// `Option::is_none_or` for the class representative, spelled out for the MSRV.
trait RepAccepts {
    fn is_none_or_accepted(&self, r: &CRule) -> bool;
}

impl RepAccepts for Option<u8> {
    fn is_none_or_accepted(&self, r: &CRule) -> bool {
        match self {
            None => true,
            Some(p) => r.accepts_proto(*p),
        }
    }
}

/// `None` = no match; `Some(targ)` = match, with the table value index found (or the
/// previous one when this condition is not a table).
#[inline(always)]
fn addr_match(c: &CAddr, tables: &[Lpm], addr: u128, v6: bool, targ: u32) -> Option<u32> {
    match c {
        CAddr::Any => Some(targ),
        CAddr::One4(n, m) => (!v6 && addr as u32 & m == *n).then_some(targ),
        CAddr::Prefixes { v4, v6: p6 } => {
            let hit = if v6 {
                p6.iter().any(|&(n, m)| addr & m == n)
            } else {
                let a = addr as u32;
                v4.iter().any(|&(n, m)| a & m == n)
            };
            hit.then_some(targ)
        }
        CAddr::Table(t) => tables[*t as usize].lookup_index(addr, v6),
    }
}

/// The rest of a rule, once its candidate entry passed: port lists, addresses and the
/// action. `None` if it does not match.
#[inline(always)]
pub(crate) fn rule_outcome(r: &CRule, tables: &[Lpm], key: &FlowKey) -> Option<Outcome> {
    if r.port_lists && !(r.src_ports.exact(key.src_port) && r.dst_ports.exact(key.dst_port)) {
        return None;
    }
    let targ = addr_match(&r.src, tables, key.src, key.v6, u32::MAX)?;
    let targ = addr_match(&r.dst, tables, key.dst, key.v6, targ)?;
    Some(match &r.action {
        CAction::Class(c) => Outcome::Class(*c),
        // Compilation guarantees a table condition, so `targ` is a value index.
        CAction::Tablearg(slots) => match slots.get(targ as usize) {
            Some(TargSlot::Class(c)) => Outcome::Class(*c),
            Some(TargSlot::Unknown(value)) => Outcome::Drop(DropCause::TableargUnknown {
                rule: r.number,
                value: *value,
            }),
            None => Outcome::Drop(DropCause::TableargUnknown {
                rule: r.number,
                value: targ,
            }),
        },
        CAction::Allow => Outcome::Allow,
        CAction::Deny => Outcome::Drop(DropCause::DeniedByRule(r.number)),
    })
}
