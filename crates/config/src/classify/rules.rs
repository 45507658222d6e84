//! Stage 1 at run time: the compiled rules and their evaluation.
//!
//! Rules are tried in order; the first whose every condition holds decides. A packet scans
//! only the candidate list of its direction, protocol class and address family, and each
//! candidate is first checked as two masked 64-bit words (protocol, direction, the ports'
//! leading bits, the addresses' hulls: see `Cand`), so a rule that does not apply costs
//! two ANDs, two XORs and a branch; the rule itself (port lists, prefix lists, table
//! lookups, the action) is read only when that passes. Cost of a packet: O(candidates)
//! word checks plus one [`Lpm`] lookup per table condition reached; no allocation. Large rule sets should be
//! tables (one `queue tablearg ... table(N)` rule), as the dummynet slides advise.
//!
//! **tablearg.** A `table(N)` condition that holds sets the rule's tablearg to the value
//! found (the destination table's, if a rule has both). Table values are compiled to dense
//! indices, and each `queue tablearg` / `pipe tablearg` rule holds the class of every value
//! index, or the raw value when it names no flowset (pipe): a packet hitting it is dropped
//! with [`DropCause::TableargUnknown`], the configuration is not refused, as in ipfw.
//!
//! **skipto, count.** A candidate list is in rule order, so `skipto` (to rule index `to`,
//! always past the current one) moves forward in the list by a binary search; `count`
//! matches and goes on. ipfw keeps a counter per rule, which `count` exists for; pspat's
//! counters are per class and per drop reason, so `count` only goes on.
//!
//! **Options** (`tcpflags`, `iplen`, `ipttl`, `dscp`, each maybe negated) read the header
//! fields [`FlowKey`] carries beside the 5-tuple, after the addresses; a rule without
//! options pays one length check. Interface conditions and address families are decided
//! when the classifier is built (they select the lists a rule is in); `not` before an
//! address or port list makes its candidate entry accept every value there, and the rule
//! checks it in full.
//!
//! **one_pass 0.** With ipfw's `net.inet.ip.fw.one_pass=0`, a packet leaving a pipe or
//! queue goes on at the rule after the one that sent it there, so it may cross several in
//! turn. Stage 1 decides the whole path at once: a `pipe`/`queue` rule adds its class to
//! the packet's [`Chain`] and the search goes on; the rule (or default) that ends the
//! search ends the chain: `allow`, or another class, sends it along the chain; `deny`
//! drops it here, before the pipes (ipfw drops it after them, once they have spent their
//! time and bandwidth on it: what leaves the shaper is the same). A packet that would
//! enter more than [`MAX_HOPS`] pipes and queues is dropped
//! ([`DropCause::TooManyHops`]). The engine carries the packet from one hop to the next
//! (its `dummynet.rs`).
//!
//! **prob.** A rule with `prob P` draws from the caller's [`Draw`] first (a `u32` below
//! P * 2^32 matches); other rules never draw.
//!
//! **Non-IP frames** match only rules with no protocol, address, port, family or option
//! condition (direction and interface conditions are fine), through a list per direction
//! built with the classifier. They are scheduled with the all-zero key.

use super::key::FlowKey;
use super::lpm::Lpm;
use super::packet::ParseError;
use crate::model::{tcp_flag, Direction, PortRange};

/// What stage 1 decided for a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Queue it in class `class` (an index into `Classifier::classes`); `key` is the whole,
    /// unmasked key (stage 2 applies the class's and its scheduler's masks).
    Schedule { class: u32, key: FlowKey },
    /// Queue it in each class of `chain` in turn (`one_pass 0`, at least two classes).
    Chain { chain: Chain, key: FlowKey },
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
    /// `one_pass 0`: rule `rule` would send it into a pipe or queue after [`MAX_HOPS`]
    /// others.
    #[error("rule {rule}: a packet may cross at most {MAX_HOPS} pipes and queues (one_pass 0)")]
    TooManyHops { rule: u32 },
}

/// Most pipes and queues one packet crosses with `one_pass 0`: three, so that a
/// [`Verdict`] stays 64 bytes (a key and 16 bytes: a chain of four would make it 80 and
/// every classification pays for the copies).
pub const MAX_HOPS: usize = 3;

/// The classes a packet crosses in turn (`one_pass 0`), in rule order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The classes, then [`NO_HOP`]s.
    classes: [u32; MAX_HOPS],
}

/// An unused place in a [`Chain`] (class indices are far below it).
const NO_HOP: u32 = u32::MAX;

impl Chain {
    pub(crate) const EMPTY: Chain = Chain {
        classes: [NO_HOP; MAX_HOPS],
    };

    fn len(&self) -> usize {
        self.classes.iter().take_while(|&&c| c != NO_HOP).count()
    }

    /// The chain of `classes` (2 to [`MAX_HOPS`] of them), for tests.
    #[cfg(test)]
    pub(crate) fn of(classes: &[u32]) -> Chain {
        assert!((2..=MAX_HOPS).contains(&classes.len()));
        let mut c = Chain::EMPTY;
        for &class in classes {
            c.push(class);
        }
        c
    }

    /// The classes (indices into `Classifier::classes`), first hop first.
    pub fn classes(&self) -> &[u32] {
        &self.classes[..self.len()]
    }

    /// Adds a hop; false when the chain is full.
    fn push(&mut self, class: u32) -> bool {
        let Some(slot) = self.classes.iter_mut().find(|c| **c == NO_HOP) else {
            return false;
        };
        *slot = class;
        true
    }

    /// The verdict for `key` of a search that collected this chain and ended with `last`
    /// (a rule's `allow` or `deny`, or the default, ipfw's rule 65535).
    fn finish(mut self, last: Outcome, key: &FlowKey) -> Verdict {
        match last {
            Outcome::Class(c) if self.len() > 0 => {
                if !self.push(c) {
                    return Verdict::Drop(DropCause::TooManyHops { rule: 65535 });
                }
            }
            Outcome::Allow => {}
            o => return o.verdict(key),
        }
        match self.len() {
            0 => Verdict::Allow,
            1 => Verdict::Schedule {
                class: self.classes[0],
                key: *key,
            },
            _ => Verdict::Chain {
                chain: self,
                key: *key,
            },
        }
    }
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

/// A compiled port (or other 16-bit value) condition: the hull `lo..=lo + span` of its
/// ranges, checked without a branch, and the ranges themselves when there are several
/// (checked after the hull); negated after `not`.
#[derive(Clone, Debug)]
pub(crate) struct PortCond {
    lo: u16,
    span: u16,
    /// Empty for no condition or a single range (the hull is then exact).
    list: Box<[PortRange]>,
    /// No condition at all.
    pub(crate) any: bool,
    /// Holds when the value is in none of the ranges (`not 80`).
    not: bool,
}

impl PortCond {
    pub fn new(ranges: &[PortRange]) -> Self {
        match ranges {
            [] => PortCond {
                lo: 0,
                span: u16::MAX,
                list: Box::new([]),
                any: true,
                not: false,
            },
            [r] if r.lo <= r.hi => PortCond {
                lo: r.lo,
                span: r.hi - r.lo,
                list: Box::new([]),
                any: false,
                not: false,
            },
            _ => {
                let lo = ranges.iter().map(|r| r.lo).min().unwrap_or(0);
                let hi = ranges.iter().map(|r| r.hi).max().unwrap_or(0).max(lo);
                PortCond {
                    lo,
                    span: hi - lo,
                    list: ranges.into(),
                    any: false,
                    not: false,
                }
            }
        }
    }

    /// The condition negated when `not` (and it is one: no condition stays none).
    pub fn negated(mut self, not: bool) -> Self {
        self.not = not && !self.any;
        self
    }

    /// The hull as `(want, mask)`: the leading bits its two ends share, so that every port
    /// of the hull has `port & mask == want`; and whether that is exact (the hull is an
    /// aligned block of ports, such as one port or all of them, and there is no list). A
    /// negated condition's hull is every port, not exact.
    pub(crate) fn masked(&self) -> (u16, u16, bool) {
        if self.not {
            return (0, 0, false);
        }
        let hi = self.lo.saturating_add(self.span);
        let mask = u16::MAX
            .checked_shl(16 - (self.lo ^ hi).leading_zeros())
            .unwrap_or(0);
        let exact = self.list.is_empty() && self.lo & !mask == 0 && hi | mask == u16::MAX;
        (self.lo & mask, mask, exact)
    }

    /// Whether `port` is in one of the ranges (in none, when negated).
    #[inline]
    fn contains(&self, port: u16) -> bool {
        (port.wrapping_sub(self.lo) <= self.span
            && (self.list.is_empty() || self.list.iter().any(|r| r.lo <= port && port <= r.hi)))
            != self.not
    }
}

/// A compiled rule option, read from the key's header fields.
#[derive(Clone, Debug)]
pub(crate) enum COpt {
    /// TCP with every flag of `set` and none of `clear`.
    TcpFlags {
        set: u8,
        clear: u8,
    },
    /// TCP with RST or ACK.
    Established,
    IpLen(PortCond),
    IpTtl(PortCond),
    /// Bit N: DSCP code point N.
    Dscp(u64),
}

impl COpt {
    #[inline]
    fn holds(&self, key: &FlowKey) -> bool {
        let tcp = key.proto == super::packet::proto::TCP;
        match self {
            COpt::TcpFlags { set, clear } => {
                tcp && key.tcp_flags & set == *set && key.tcp_flags & clear == 0
            }
            COpt::Established => tcp && key.tcp_flags & (tcp_flag::RST | tcp_flag::ACK) != 0,
            COpt::IpLen(c) => c.contains(key.ip_len),
            COpt::IpTtl(c) => c.contains(u16::from(key.ttl)),
            COpt::Dscp(set) => set >> (key.tos >> 2) & 1 == 1,
        }
    }
}

/// A source of random numbers for `prob` rules: one per classifying thread, so no lock and
/// no shared state.
pub trait Draw {
    /// A uniformly distributed `u32`.
    fn draw(&mut self) -> u32;
}

/// A small deterministic generator (splitmix64): the same seed gives the same draws, so a
/// client seeded with its index decides the same way in every run.
#[derive(Clone, Copy, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
}

impl Draw for Rng {
    #[inline]
    fn draw(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 32) as u32
    }
}

/// The calling thread's own [`Rng`], for the classification calls that take none: touched
/// only when a `prob` rule draws.
pub(crate) struct ThreadRng;

impl Draw for ThreadRng {
    #[inline]
    fn draw(&mut self) -> u32 {
        thread_local! {
            static RNG: std::cell::Cell<Rng> = const { std::cell::Cell::new(Rng(0x5eed)) };
        }
        RNG.with(|c| {
            let mut r = c.get();
            let v = r.draw();
            c.set(r);
            v
        })
    }
}

/// `prob` threshold of a rule that always matches: above every `u32`.
pub(crate) const ALWAYS: u64 = 1 << 32;

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
    /// Index into `Classifier::tables`, and the value index an entry must have
    /// ([`ANY_VALUE`]: any; `table(T,V)`).
    Table(u32, u32),
}

/// [`CAddr::Table`]'s "any value".
pub(crate) const ANY_VALUE: u32 = u32::MAX;

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
    /// Go on at this rule index (past the rule itself; the rule count for past the end).
    Skipto(u32),
    /// The rule index of each table value index.
    SkiptoTablearg(Box<[u32]>),
    Count,
}

/// What a matching rule does to the evaluation.
pub(crate) enum Step {
    Done(Outcome),
    /// Go on at this rule index.
    Jump(u32),
    /// Go on with the next rule.
    Next,
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
    /// Whether the port conditions must be checked in full: the candidate entry checks
    /// only the leading bits of each port hull (see [`PortCond::masked`]).
    pub port_check: bool,
    pub src_ports: PortCond,
    pub dst_ports: PortCond,
    pub src: CAddr,
    pub dst: CAddr,
    /// `not` before the source, the destination.
    pub src_not: bool,
    pub dst_not: bool,
    /// [`FAM_V4`] | [`FAM_V6`] bits of the families it applies to.
    pub families: u8,
    /// Matches when a draw is below this ([`ALWAYS`]: without drawing).
    pub prob: u64,
    pub opts: Box<[(bool, COpt)]>,
    pub action: CAction,
}

/// Bits of [`CRule::families`].
pub(crate) const FAM_V4: u8 = 1;
pub(crate) const FAM_V6: u8 = 2;

impl CRule {
    /// Whether a non-IP frame can match it.
    pub fn matches_non_ip(&self) -> bool {
        self.pd_mask & 0xff == 0
            && self.src_ports.any
            && self.dst_ports.any
            && matches!(self.src, CAddr::Any)
            && matches!(self.dst, CAddr::Any)
            && self.families == FAM_V4 | FAM_V6
            && self.opts.is_empty()
    }

    /// Whether its protocol condition accepts protocol `p`.
    fn accepts_proto(&self, p: u8) -> bool {
        (u32::from(p) & self.pd_mask & 0xff) == self.pd_want & 0xff
    }
}

/// A rule as a candidate in one (direction, protocol class, family) list: what is checked
/// for every packet, 40 bytes, then the rule itself if that passes.
///
/// The packet is two words ([`packet_words`]): protocol, direction and both ports, then
/// the low 32 bits of both addresses. The candidate is a mask and a wanted value for each,
/// so it is checked by two ANDs, two XORs and one branch, taken the same way for most
/// packets (no per-field branches, which a UDP/TCP mix would mispredict). The fields:
/// - the protocol and direction conditions;
/// - each port condition's leading bits (exact for one port, all ports or an aligned
///   block; other ranges and lists are checked in full once the candidate passes);
/// - in the IPv4 lists, the *hull* of each address condition: the longest prefix every
///   address it accepts shares (the prefix itself for one prefix, the common leading bits
///   of a prefix list, all of IPv4 for a table or no condition). In the IPv6 lists the
///   address masks are 0 and accept every address.
#[derive(Clone, Copy, Debug)]
struct Cand {
    mask: [u64; 2],
    want: [u64; 2],
    rule: u32,
}

/// A packet as the two words [`Cand`] checks: `proto | dir_bit << 8 | src_port << 32 |
/// dst_port << 48` and `src | dst << 32` (low 32 bits of the addresses).
#[inline(always)]
fn packet_words(key: &FlowKey, bit: u8) -> [u64; 2] {
    [
        u64::from(key.proto)
            | u64::from(bit) << 8
            | u64::from(key.src_port) << 32
            | u64::from(key.dst_port) << 48,
        u64::from(key.src as u32) | u64::from(key.dst as u32) << 32,
    ]
}

impl Cand {
    /// The entry of rule `r` (index `i` in the rule list) with IPv4 hulls `src` and `dst`,
    /// each `(net, mask)`.
    pub(crate) fn new(r: &CRule, i: usize, src: (u32, u32), dst: (u32, u32)) -> Self {
        let (sp_want, sp_mask, _) = r.src_ports.masked();
        let (dp_want, dp_mask, _) = r.dst_ports.masked();
        let word =
            |pd: u32, sp: u16, dp: u16| u64::from(pd) | u64::from(sp) << 32 | u64::from(dp) << 48;
        Cand {
            mask: [
                word(r.pd_mask, sp_mask, dp_mask),
                u64::from(src.1) | u64::from(dst.1) << 32,
            ],
            want: [
                word(r.pd_want, sp_want, dp_want),
                u64::from(src.0) | u64::from(dst.0) << 32,
            ],
            rule: i as u32,
        }
    }

    /// Whether the packet's words `p` rule it out.
    #[inline(always)]
    fn miss(&self, p: &[u64; 2]) -> bool {
        ((p[0] & self.mask[0]) ^ self.want[0]) | ((p[1] & self.mask[1]) ^ self.want[1]) != 0
    }
}

/// The hull `(net, mask)` of the IPv4 addresses condition `c` accepts (see [`Cand`]), or
/// `None` if it accepts no IPv4 address.
fn v4_hull(c: &CAddr) -> Option<(u32, u32)> {
    match c {
        CAddr::Any | CAddr::Table(..) => Some((0, 0)),
        CAddr::One4(net, mask) => Some((*net, *mask)),
        CAddr::Prefixes { v4, .. } => {
            let (&(first, _), _) = v4.split_first()?;
            let (mut mask, mut differ) = (u32::MAX, 0);
            for &(net, m) in v4.iter() {
                mask &= m;
                differ |= net ^ first;
            }
            // Keep only the bits above the highest one where two networks differ.
            mask &= u32::MAX
                .checked_shl(32 - differ.leading_zeros())
                .unwrap_or(0);
            Some((first & mask, mask))
        }
    }
}

/// [`v4_hull`] of a condition maybe negated: a negated one's hull is every address.
fn v4_hull_of(c: &CAddr, not: bool) -> Option<(u32, u32)> {
    if not {
        Some((0, 0))
    } else {
        v4_hull(c)
    }
}

/// Whether condition `c` can accept an IPv6 address.
fn accepts_v6(c: &CAddr) -> bool {
    match c {
        CAddr::Any | CAddr::Table(..) => true,
        CAddr::One4(..) => false,
        CAddr::Prefixes { v6, .. } => !v6.is_empty(),
    }
}

/// Most candidate entries the per-class lists may hold before they fall back to one
/// class (where the protocol test of each candidate does the filtering).
pub(crate) const MAX_CANDS: usize = 1 << 20;

/// The compiled rules, with per (direction, protocol class, address family) candidate
/// lists: protocols that no rule tells apart share a class, and a class's list holds, in
/// rule order, only the rules whose direction, protocol and address conditions can accept
/// it. A packet scans its list.
#[derive(Clone, Debug)]
pub(crate) struct RuleSet {
    rules: Vec<CRule>,
    /// List `l = 4c + 2d + f` is the one of protocol class c, direction d (In 0, Out 1)
    /// and family f (IPv4 0, IPv6 1). One allocation each, so that finding a list is one
    /// bounds check and two loads.
    lists: Vec<Box<[Cand]>>,
    proto_class: [u16; 256],
    /// The rules a non-IP frame can match, per direction (In 0, Out 1), entries that
    /// always pass.
    non_ip: [Box<[Cand]>; 2],
    /// ipfw's `one_pass`: false, a class does not end the search (see the module docs).
    one_pass: bool,
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
        if reps.len() * 4 * rules.len() > max_cands {
            proto_class = [0; 256];
            reps = vec![None];
        }
        let mut lists = Vec::new();
        for rep in &reps {
            for dir in [DIR_IN, DIR_OUT] {
                for v6 in [false, true] {
                    let mut cands = Vec::new();
                    for (i, r) in rules.iter().enumerate() {
                        // `None`: one class for all protocols (or every protocol is named).
                        let fam = if v6 { FAM_V6 } else { FAM_V4 };
                        if r.dirs & dir == 0 || r.families & fam == 0 || !rep.is_none_or_accepted(r)
                        {
                            continue;
                        }
                        let hulls = if v6 {
                            ((r.src_not || accepts_v6(&r.src)) && (r.dst_not || accepts_v6(&r.dst)))
                                .then_some(((0, 0), (0, 0)))
                        } else {
                            v4_hull_of(&r.src, r.src_not).zip(v4_hull_of(&r.dst, r.dst_not))
                        };
                        if let Some((src, dst)) = hulls {
                            cands.push(Cand::new(r, i, src, dst));
                        }
                    }
                    lists.push(cands.into_boxed_slice());
                }
            }
        }
        let non_ip = [DIR_IN, DIR_OUT].map(|dir| {
            let pass = Cand {
                mask: [0; 2],
                want: [0; 2],
                rule: 0,
            };
            rules
                .iter()
                .enumerate()
                .filter(|(_, r)| r.dirs & dir != 0 && r.matches_non_ip())
                .map(|(i, _)| Cand {
                    rule: i as u32,
                    ..pass
                })
                .collect()
        });
        RuleSet {
            rules,
            lists,
            proto_class,
            non_ip,
            one_pass: true,
        }
    }

    /// With `one_pass` false, packets collect the classes of every pipe and queue rule
    /// they match (see the module docs).
    pub fn one_pass(mut self, one_pass: bool) -> Self {
        self.one_pass = one_pass;
        self
    }

    pub fn is_one_pass(&self) -> bool {
        self.one_pass
    }

    /// The candidate list and packet words of an IP key.
    #[inline(always)]
    fn list_of(&self, key: &FlowKey, dir: Direction) -> (&[Cand], [u64; 2]) {
        let bit = dir_bit(dir);
        let list = 4 * usize::from(self.proto_class[usize::from(key.proto)])
            + 2 * usize::from(bit >> 1)
            + usize::from(key.v6);
        (&self.lists[list], packet_words(key, bit))
    }

    /// Evaluate on an IP key (`one_pass 1`). `default` is the outcome when no rule matches.
    #[inline(always)]
    pub fn evaluate(
        &self,
        tables: &[Lpm],
        default: Outcome,
        key: &FlowKey,
        dir: Direction,
        rng: &mut impl Draw,
    ) -> Outcome {
        let (cands, words) = self.list_of(key, dir);
        let mut unused = Chain::EMPTY;
        self.run::<false>(cands, &words, tables, default, key, rng, &mut unused)
    }

    /// Evaluate for a non-IP frame (the all-zero key, through its own lists;
    /// `one_pass 1`).
    pub fn evaluate_non_ip(
        &self,
        tables: &[Lpm],
        default: Outcome,
        dir: Direction,
        rng: &mut impl Draw,
    ) -> Outcome {
        let list = &self.non_ip[usize::from(dir_bit(dir) >> 1)];
        let key = FlowKey::default();
        let mut unused = Chain::EMPTY;
        self.run::<false>(list, &[0; 2], tables, default, &key, rng, &mut unused)
    }

    /// [`RuleSet::evaluate`] and [`RuleSet::evaluate_non_ip`] for `one_pass 0` (`key`
    /// `None` for a non-IP frame): the verdict, chain and all. Out of line, so that the
    /// common case's inlined code is the same as without chains.
    #[inline(never)]
    pub fn evaluate_chaining(
        &self,
        tables: &[Lpm],
        default: Outcome,
        key: Option<&FlowKey>,
        dir: Direction,
        rng: &mut impl Draw,
    ) -> Verdict {
        let mut chain = Chain::EMPTY;
        let non_ip = FlowKey::default();
        let (last, key) = match key {
            Some(key) => {
                let (cands, words) = self.list_of(key, dir);
                let o = self.run::<true>(cands, &words, tables, default, key, rng, &mut chain);
                (o, key)
            }
            None => {
                let list = &self.non_ip[usize::from(dir_bit(dir) >> 1)];
                let o = self.run::<true>(list, &[0; 2], tables, default, &non_ip, rng, &mut chain);
                (o, &non_ip)
            }
        };
        chain.finish(last, key)
    }

    /// The first decision of the rules in `cands`, following `skipto` and `count`; with
    /// `CHAIN` (`one_pass 0`), classes do not decide: they are collected in `chain`, and
    /// the decision is the `allow`, `deny` or default that ends the search.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn run<const CHAIN: bool>(
        &self,
        cands: &[Cand],
        words: &[u64; 2],
        tables: &[Lpm],
        default: Outcome,
        key: &FlowKey,
        rng: &mut impl Draw,
        chain: &mut Chain,
    ) -> Outcome {
        let mut i = 0;
        while let Some(c) = cands.get(i) {
            i += 1;
            if c.miss(words) {
                continue;
            }
            let rule = &self.rules[c.rule as usize];
            match rule_outcome(rule, tables, key, rng) {
                None | Some(Step::Next) => {}
                Some(Step::Done(Outcome::Class(class))) if CHAIN => {
                    if !chain.push(class) {
                        return Outcome::Drop(DropCause::TooManyHops { rule: rule.number });
                    }
                }
                Some(Step::Done(o)) => return o,
                Some(Step::Jump(to)) => i += cands[i..].partition_point(|c| c.rule < to),
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
        CAddr::Table(t, want) => tables[*t as usize]
            .lookup_index(addr, v6)
            .filter(|i| *want == ANY_VALUE || i == want),
    }
}

/// [`addr_match`] maybe negated: a negated condition holds when the address is not
/// accepted, and leaves the tablearg as it was.
#[inline(always)]
fn addr_holds(
    c: &CAddr,
    not: bool,
    tables: &[Lpm],
    addr: u128,
    v6: bool,
    targ: u32,
) -> Option<u32> {
    let m = addr_match(c, tables, addr, v6, targ);
    if !not {
        m
    } else if m.is_none() {
        Some(targ)
    } else {
        None
    }
}

/// The rest of a rule, once its candidate entry passed: its draw, port lists, addresses,
/// options and the action. `None` if it does not match.
#[inline(always)]
pub(crate) fn rule_outcome(
    r: &CRule,
    tables: &[Lpm],
    key: &FlowKey,
    rng: &mut impl Draw,
) -> Option<Step> {
    if r.prob != ALWAYS && u64::from(rng.draw()) >= r.prob {
        return None;
    }
    if r.port_check && !(r.src_ports.contains(key.src_port) && r.dst_ports.contains(key.dst_port)) {
        return None;
    }
    let targ = addr_holds(&r.src, r.src_not, tables, key.src, key.v6, u32::MAX)?;
    let targ = addr_holds(&r.dst, r.dst_not, tables, key.dst, key.v6, targ)?;
    if !r.opts.is_empty() && !r.opts.iter().all(|(not, o)| o.holds(key) != *not) {
        return None;
    }
    Some(Step::Done(match &r.action {
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
        CAction::Skipto(to) => return Some(Step::Jump(*to)),
        // Compilation guarantees a table condition, so `targ` is a value index.
        CAction::SkiptoTablearg(to) => return to.get(targ as usize).map(|t| Step::Jump(*t)),
        CAction::Count => return Some(Step::Next),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn range(lo: u16, hi: u16) -> PortRange {
        PortRange { lo, hi }
    }

    /// Every port a condition accepts passes its masked hull; when the hull is exact, no
    /// other port does.
    fn check_ports(ranges: &[PortRange]) -> (u16, u16, bool) {
        let c = PortCond::new(ranges);
        let (want, mask, exact) = c.masked();
        for p in 0..=u16::MAX {
            let in_ranges = ranges.is_empty() || ranges.iter().any(|r| r.lo <= p && p <= r.hi);
            assert_eq!(c.contains(p), in_ranges, "{ranges:?} port {p}");
            if in_ranges {
                assert_eq!(p & mask, want, "{ranges:?} port {p} fails its hull");
            } else if exact {
                assert_ne!(p & mask, want, "{ranges:?} exact hull passes port {p}");
            }
        }
        (want, mask, exact)
    }

    #[test]
    fn port_hulls_are_exact_for_aligned_blocks_only() {
        assert_eq!(check_ports(&[]), (0, 0, true));
        assert_eq!(check_ports(&[range(53, 53)]), (53, 0xffff, true));
        assert_eq!(check_ports(&[range(1024, 2047)]), (1024, 0xfc00, true));
        assert_eq!(check_ports(&[range(0, 65535)]), (0, 0, true));
        assert!(!check_ports(&[range(1000, 2000)]).2);
        assert!(!check_ports(&[range(53, 53), range(80, 80)]).2);
        assert!(!check_ports(&[range(65535, 65535), range(0, 0)]).2);
    }

    fn addr_cond() -> impl Strategy<Value = CAddr> {
        let p4 = (any::<u32>(), 0u32..=32).prop_map(|(a, len)| {
            let m = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            (a & m, m)
        });
        prop_oneof![
            Just(CAddr::Any),
            p4.clone().prop_map(|(n, m)| CAddr::One4(n, m)),
            (prop::collection::vec(p4, 0..4), any::<bool>()).prop_map(|(v4, with6)| {
                CAddr::Prefixes {
                    v4: v4.into(),
                    v6: if with6 {
                        vec![(0, 0)].into()
                    } else {
                        Vec::new().into()
                    },
                }
            }),
        ]
    }

    proptest! {
        /// An IPv4 address a condition accepts always passes its hull, and a condition
        /// without a hull accepts no IPv4 address.
        #[test]
        fn address_hulls_hold_every_accepted_address(c in addr_cond(), addrs in prop::collection::vec(any::<u32>(), 16)) {
            let hull = v4_hull(&c);
            let accepts = |a: u32| match &c {
                CAddr::Any | CAddr::Table(..) => true,
                CAddr::One4(n, m) => a & m == *n,
                CAddr::Prefixes { v4, .. } => v4.iter().any(|&(n, m)| a & m == n),
            };
            // Addresses inside the condition's prefixes, and random ones.
            let inside: Vec<u32> = match &c {
                CAddr::One4(n, m) => addrs.iter().map(|a| n | (a & !m)).collect(),
                CAddr::Prefixes { v4, .. } if !v4.is_empty() => addrs
                    .iter()
                    .enumerate()
                    .map(|(i, a)| { let (n, m) = v4[i % v4.len()]; n | (a & !m) })
                    .collect(),
                _ => Vec::new(),
            };
            for a in inside.into_iter().chain(addrs.iter().copied()) {
                if accepts(a) {
                    let (net, mask) = hull.expect("a condition that accepts an address has a hull");
                    prop_assert_eq!(a & mask, net, "{:?} accepts {:#x} outside its hull", c, a);
                }
            }
            if let CAddr::Prefixes { v4, v6 } = &c {
                prop_assert_eq!(hull.is_none(), v4.is_empty());
                prop_assert_eq!(accepts_v6(&c), !v6.is_empty());
            }
        }
    }
}
