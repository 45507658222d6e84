//! From what a front end read to a [`Config`]: the checks both front ends share.
//!
//! A front end (ipfw syntax, TOML) produces a [`Draft`]: the objects in the order they were
//! written, each with where it was written. [`resolve`] turns it into a [`Config`] or
//! refuses it with a [`ConfigError::Invalid`] that names the object and, when known, its
//! place (`isp.ipfw:12: queue 3: sched 9 is not defined`).
//!
//! What is checked:
//! - ids (schedulers, flowsets, pipes, tables, rule numbers) are `1..=65535`, and no
//!   scheduler, flowset, pipe or default action is defined twice (a TOML file describes a
//!   state; the ipfw front end has already applied its command stream, so each object
//!   reaches the draft once);
//! - dummynet's object model: a flowset attached to `pipe P` (or `sched P`) with no
//!   scheduler P written gets dummynet's default, a `wf2q+` scheduler P without a mask; a
//!   scheduler with a pipe of its number takes its link from the pipe and may not give a
//!   bandwidth or a framing of its own; RED's `min_th` is below its queue's limit;
//! - a link's framing is in range (`overhead` `-64..=256`, `mpu` `0..=256` bytes);
//! - every algorithm exists and accepts its parameters (the scheduler is built once, off
//!   the data path, so that a bad value is caught here and not when the engine starts);
//!   names become the registry's canonical name and parameters are sorted in the order the
//!   registry lists them, so that `QFQ` and `qfq` give equal models; a parameter given
//!   twice is refused;
//! - weights are `1..=MAX_WEIGHT`, maximum packet lengths `1..=MAX_PACKET_LEN`, queue limits,
//!   `max-queues`, `max-instances` and idle times are not zero;
//! - every reference exists: flowset -> scheduler, rule -> flowset or pipe, `table(N)` ->
//!   table, and for a `queue tablearg` (`pipe tablearg`) rule every value of the table it
//!   looks up names a flowset (pipe);
//! - a `tablearg` rule looks up exactly one table, not negated (with two, which value
//!   would be the argument is a question better refused than answered silently);
//! - rule numbers are 1..=65534 (65535 is ipfw's default rule), a fixed `skipto` jumps
//!   forward, `not any` (which matches nothing) is refused, and rule options are in range
//!   (`prob`, TCP flags both required and refused, empty lists);
//! - prefixes are canonical (no bit set past the prefix length: `1.2.4.0/20` is refused,
//!   naming `1.2.0.0/20`), and a prefix length fits its family;
//! - table entries are sorted by prefix and a prefix entered twice in one table is refused;
//! - port ranges have `lo <= hi`;
//! - rules are sorted by number, keeping the written order among equal numbers.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use pspat_sched::registry::{self, Params};
use pspat_sched::tree;
use pspat_sched::{Desc, MAX_PACKET_LEN, MAX_WEIGHT};

use crate::error::ConfigError;
use crate::model::*;
use pspat_units as units;

/// Largest id of any object.
pub const MAX_ID: u32 = 65535;

/// Largest rule number: 65535 is ipfw's default rule, which a file does not add
/// ([`Config::default_action`] is what it does).
pub const MAX_RULE: u32 = 65534;

/// ipfw's step between automatically numbered rules (`net.inet.ip.fw.autoinc_step`).
pub const AUTOINC_STEP: u32 = 100;

/// The number ipfw gives a rule written without one: the highest number so far plus
/// [`AUTOINC_STEP`], or the highest itself when that would pass [`MAX_RULE`] (rules may
/// share a number; they keep their order). As FreeBSD's `ip_fw_sockopt.c` does when it
/// adds a rule numbered 0.
pub fn next_rule_number(highest: u32) -> u32 {
    if highest + AUTOINC_STEP <= MAX_RULE {
        highest + AUTOINC_STEP
    } else {
        highest
    }
}

/// Where an object was written: 1-based line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loc {
    pub line: u32,
    pub column: u32,
}

/// An object and where it was written (`None` when made by code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located<T> {
    pub item: T,
    pub at: Option<Loc>,
}

/// A table command: `table T create` (no entry) or `table T add PREFIX VALUE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableCmd {
    pub table: TableName,
    pub entry: Option<(Prefix, u32)>,
}

/// What a front end read, in the order written, not yet checked.
#[derive(Clone, Debug, Default)]
pub struct Draft {
    /// File name (or `<string>`), for messages.
    pub origin: String,
    pub schedulers: Vec<Located<SchedSpec>>,
    pub flowsets: Vec<Located<FlowsetSpec>>,
    pub pipes: Vec<Located<PipeSpec>>,
    pub tables: Vec<Located<TableCmd>>,
    pub rules: Vec<Located<Rule>>,
    pub default_action: Vec<Located<Action>>,
    /// `net.inet.ip.fw.one_pass`, as the file last set it.
    pub one_pass: Option<bool>,
}

impl Draft {
    /// An empty draft for `origin`.
    pub fn new(origin: &str) -> Self {
        Self {
            origin: origin.to_owned(),
            ..Self::default()
        }
    }

    fn err(&self, at: Option<Loc>, msg: String) -> ConfigError {
        match at {
            Some(l) => {
                ConfigError::invalid(&format!("{}:{}:{}", self.origin, l.line, l.column), &msg)
            }
            None => ConfigError::invalid(&self.origin, &msg),
        }
    }
}

fn check_id(what: &str, id: u32) -> Result<(), String> {
    if (1..=MAX_ID).contains(&id) {
        Ok(())
    } else {
        Err(format!("{what} {id}: numbers are 1..={MAX_ID}"))
    }
}

/// Checks that `p` is canonical.
pub fn check_prefix(p: &Prefix) -> Result<(), String> {
    let canon = canonical(p).ok_or_else(|| {
        format!(
            "prefix length /{} is too long for {} (at most {})",
            p.len,
            p.addr,
            if p.addr.is_ipv4() { 32 } else { 128 }
        )
    })?;
    if canon != *p {
        return Err(format!(
            "{}/{} has bits set past the prefix length (did you mean {}/{}?)",
            p.addr, p.len, canon.addr, canon.len
        ));
    }
    Ok(())
}

/// The prefix with every bit past its length cleared, or `None` if the length does not fit
/// the family.
pub fn canonical(p: &Prefix) -> Option<Prefix> {
    let addr = match p.addr {
        IpAddr::V4(a) if p.len <= 32 => {
            let m = u32::MAX.checked_shl(32 - u32::from(p.len)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) if p.len <= 128 => {
            let m = u128::MAX.checked_shl(128 - u32::from(p.len)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
        _ => return None,
    };
    Some(Prefix { addr, len: p.len })
}

fn check_limit(what: &str, limit: &QueueLimit) -> Result<(), String> {
    match *limit {
        QueueLimit::Packets(0) | QueueLimit::Bytes(0) => {
            Err(format!("{what}: a queue limit of 0 would drop everything"))
        }
        QueueLimit::Packets(n) if n > pspat_sched::flow::MAX_LIMIT_PKTS => Err(format!(
            "{what}: queue limit {n} slots is more than {}",
            pspat_sched::flow::MAX_LIMIT_PKTS
        )),
        _ => Ok(()),
    }
}

/// RED's thresholds must leave room below the queue's limit (in its unit), or early drop
/// would never happen before the tail drop.
fn check_red(what: &str, qm: &QueueManagement, limit: &QueueLimit) -> Result<(), String> {
    let Some(r) = &qm.red else { return Ok(()) };
    if r.min_th >= r.max_th {
        return Err(format!("{what}: RED needs min_th < max_th"));
    }
    let (size, unit) = match *limit {
        QueueLimit::Packets(n) => (u64::from(n), "slots"),
        QueueLimit::Bytes(b) => (b, "bytes"),
    };
    if r.min_th >= size {
        return Err(format!(
            "{what}: RED's min_th {} is not below the queue's limit of {size} {unit}",
            r.min_th
        ));
    }
    Ok(())
}

fn check_nonzero(what: &str, option: &str, v: u64) -> Result<(), String> {
    if v == 0 {
        Err(format!("{what}: {option} must not be 0"))
    } else {
        Ok(())
    }
}

/// Checks the algorithm and its parameters; returns the canonical name and the parameters
/// in registry order.
fn resolve_algorithm(s: &SchedSpec) -> Result<(String, Vec<(String, String)>), String> {
    let what = format!("sched {}", s.id);
    let info = registry::lookup(&s.algorithm).map_err(|e| format!("{what}: {e}"))?;
    let mut params = s.params.clone();
    for (i, (k, _)) in params.iter().enumerate() {
        if params[..i].iter().any(|(k2, _)| k2 == k) {
            return Err(format!(
                "{what}: parameter '{}' given twice",
                crate::error::cut(k)
            ));
        }
    }
    let p = params.iter().fold(Params::new(), |p, (k, v)| p.set(k, v));
    p.check_known(info).map_err(|e| format!("{what}: {e}"))?;
    registry::build::<Desc>(info.name, &p, 16).map_err(|e| format!("{what}: {e}"))?;
    params.sort_by_key(|(k, _)| info.params.iter().position(|pi| pi.name == k));
    Ok((info.name.to_owned(), params))
}

/// Checks scheduler `s`'s place in a tree of classes against the other schedulers: a class
/// has an existing parent, no link of its own, a ceil at least its rate, a band and
/// weight in range, and is at most `MAX_DEPTH` levels deep with no cycle; a scheduler
/// with classes under it (`has_classes`) runs an algorithm that can order classes.
fn check_class(cfg: &Config, s: &SchedSpec, has_classes: bool) -> Result<(), String> {
    let what = format!("sched {}", s.id);
    let parent_of = |id: u32| {
        cfg.schedulers
            .get(&id)
            .and_then(|x| x.class)
            .map(|k| k.parent)
    };
    if has_classes {
        tree::spec::inner_kind(&s.algorithm).map_err(|err| format!("{what}: {err}"))?;
    }
    let Some(k) = s.class else { return Ok(()) };
    if k.parent == s.id || !cfg.schedulers.contains_key(&k.parent) {
        return Err(format!(
            "{what}: parent {} is not another scheduler",
            k.parent
        ));
    }
    if cfg.pipes.contains_key(&s.id) || s.bandwidth_bps != 0 || !s.framing.is_plain() {
        return Err(format!(
            "{what} is a class of sched {}: it has no link of its own (no pipe {0}, no bw \
             or framing); the link is its tree's root's",
            k.parent
        ));
    }
    if !s.mask.is_empty() {
        return Err(format!(
            "{what}: a mask on a class (one class per masked key) is not supported yet; \
             give the class's flowsets the mask"
        ));
    }
    if let Some(ceil) = k.ceil_bps {
        if ceil == 0 || ceil < k.rate_bps {
            return Err(format!(
                "{what}: ceil {} is below its rate {}",
                units::format_bandwidth(ceil),
                units::format_bandwidth(k.rate_bps)
            ));
        }
    }
    if !(1..=MAX_WEIGHT).contains(&k.weight) {
        return Err(format!(
            "{what}: weight {} is not 1..={MAX_WEIGHT}",
            k.weight
        ));
    }
    if usize::from(k.prio) >= tree::spec::BANDS {
        return Err(format!(
            "{what}: prio {} is not 0..={}",
            k.prio,
            tree::spec::BANDS - 1
        ));
    }
    let mut depth = 1;
    let mut up = Some(k.parent);
    while let Some(p) = up {
        if p == s.id {
            return Err(format!("{what} is its own ancestor"));
        }
        up = parent_of(p);
        if up.is_some() {
            depth += 1;
        }
        if depth > tree::spec::MAX_DEPTH {
            return Err(format!(
                "{what} is more than {} levels below its tree's root",
                tree::spec::MAX_DEPTH
            ));
        }
    }
    Ok(())
}

/// Checks a draft and builds the configuration.
pub fn resolve(draft: Draft) -> Result<Config, ConfigError> {
    let mut cfg = Config::default();
    let e = |at: Option<Loc>, m: String| draft.err(at, m);

    for Located { item, at } in &draft.schedulers {
        let what = format!("sched {}", item.id);
        check_id("sched", item.id).map_err(|m| e(*at, m))?;
        let (algorithm, params) = resolve_algorithm(item).map_err(|m| e(*at, m))?;
        check_nonzero(&what, "max-instances", item.max_instances.into()).map_err(|m| e(*at, m))?;
        check_nonzero(&what, "idle", item.idle_ns).map_err(|m| e(*at, m))?;
        item.framing
            .check()
            .map_err(|m| e(*at, format!("{what}: {m}")))?;
        let s = SchedSpec {
            algorithm,
            params,
            ..item.clone()
        };
        if cfg.schedulers.insert(item.id, s).is_some() {
            return Err(e(*at, format!("{what} is defined twice")));
        }
    }
    for Located { item, at } in &draft.pipes {
        let what = format!("pipe {}", item.id);
        check_id("pipe", item.id).map_err(|m| e(*at, m))?;
        check_limit(&what, &item.limit).map_err(|m| e(*at, m))?;
        check_red(&what, &item.qm, &item.limit).map_err(|m| e(*at, m))?;
        if item.delay_ns > u64::from(MAX_DELAY_MS) * 1_000_000 {
            return Err(e(*at, format!("{what}: delay must be below 10000 ms")));
        }
        item.framing
            .check()
            .map_err(|m| e(*at, format!("{what}: {m}")))?;
        check_nonzero(&what, "max-instances", item.max_instances.into()).map_err(|m| e(*at, m))?;
        check_nonzero(&what, "idle", item.idle_ns).map_err(|m| e(*at, m))?;
        if cfg.pipes.insert(item.id, item.clone()).is_some() {
            return Err(e(*at, format!("{what} is defined twice")));
        }
    }

    // A scheduler runs on link N: pipe N's parameters when there is a pipe N.
    for Located { item, at } in &draft.schedulers {
        let own = match (item.bandwidth_bps != 0, !item.framing.is_plain()) {
            (true, _) => "bandwidth",
            (false, true) => "framing",
            (false, false) => continue,
        };
        if cfg.pipes.contains_key(&item.id) {
            return Err(e(
                *at,
                format!(
                    "sched {0}: its link is pipe {0}'s; give the {own} on `pipe {0} config` \
                     only",
                    item.id
                ),
            ));
        }
    }
    let has_classes: BTreeSet<u32> = cfg
        .schedulers
        .values()
        .filter_map(|s| s.class.map(|k| k.parent))
        .collect();
    for Located { item, at } in &draft.schedulers {
        check_class(&cfg, item, has_classes.contains(&item.id)).map_err(|m| e(*at, m))?;
    }
    for Located { item, at } in &draft.flowsets {
        let what = format!("queue {}", item.id);
        check_id("queue", item.id).map_err(|m| e(*at, m))?;
        if has_classes.contains(&item.sched) {
            return Err(e(
                *at,
                format!(
                    "{what}: sched {} has classes under it; flowsets attach to the classes \
                     without children (the leaves)",
                    item.sched
                ),
            ));
        }
        if !cfg.schedulers.contains_key(&item.sched) {
            // `pipe P` alone gives queues attached to P dummynet's default scheduler.
            if !cfg.pipes.contains_key(&item.sched) {
                return Err(e(
                    *at,
                    format!(
                        "{what}: sched {0} is not defined (nor pipe {0}, whose scheduler it \
                         would be)",
                        item.sched
                    ),
                ));
            }
            cfg.schedulers
                .insert(item.sched, SchedSpec::new(item.sched, DEFAULT_ALGORITHM));
        }
        if !(1..=MAX_WEIGHT).contains(&item.weight) {
            return Err(e(
                *at,
                format!("{what}: weight {} is not 1..={MAX_WEIGHT}", item.weight),
            ));
        }
        if !(1..=MAX_PACKET_LEN).contains(&item.max_len) {
            return Err(e(
                *at,
                format!(
                    "{what}: max-len {} is not 1..={MAX_PACKET_LEN}",
                    item.max_len
                ),
            ));
        }
        check_limit(&what, &item.limit).map_err(|m| e(*at, m))?;
        check_red(&what, &item.qm, &item.limit).map_err(|m| e(*at, m))?;
        check_nonzero(&what, "max-queues", item.max_queues.into()).map_err(|m| e(*at, m))?;
        check_nonzero(&what, "idle", item.idle_ns).map_err(|m| e(*at, m))?;
        if cfg.flowsets.insert(item.id, item.clone()).is_some() {
            return Err(e(*at, format!("{what} is defined twice")));
        }
    }
    // Tables: collect, then sort and find duplicates.
    let mut entries: BTreeMap<TableName, Vec<(Prefix, u32, Option<Loc>)>> = BTreeMap::new();
    for Located { item, at } in &draft.tables {
        if let Some(n) = item.table.number() {
            check_id("table", n).map_err(|m| e(*at, m))?;
        }
        let list = entries.entry(item.table.clone()).or_default();
        if let Some((p, v)) = item.entry {
            check_prefix(&p).map_err(|m| e(*at, format!("table {}: {m}", item.table)))?;
            list.push((p, v, *at));
        }
    }
    for (id, mut list) in entries {
        list.sort_by_key(|&(p, _, _)| p);
        for w in list.windows(2) {
            if w[0].0 == w[1].0 {
                let p = w[1].0;
                return Err(e(
                    w[1].2,
                    format!("table {id}: {}/{} is entered twice", p.addr, p.len),
                ));
            }
        }
        let entries = list.into_iter().map(|(p, v, _)| (p, v)).collect();
        cfg.tables.insert(id.clone(), Table { id, entries });
    }

    // Rules.
    for Located { item, at } in &draft.rules {
        check_rule(&cfg, item).map_err(|m| e(*at, format!("rule {}: {m}", item.number)))?;
    }
    let mut rules: Vec<Rule> = draft.rules.iter().map(|r| r.item.clone()).collect();
    rules.sort_by_key(|r| r.number); // stable
    cfg.rules = rules;

    cfg.one_pass = draft.one_pass.unwrap_or(true);
    match draft.default_action.as_slice() {
        [] => {}
        [d] => {
            check_action(&cfg, &d.item, None).map_err(|m| e(d.at, format!("default: {m}")))?;
            cfg.default_action = d.item;
        }
        [_, d, ..] => return Err(e(d.at, "the default action is given twice".into())),
    }
    Ok(cfg)
}

fn check_addr(cfg: &Config, a: &AddrMatch) -> Result<(), String> {
    match a {
        AddrMatch::Any => Ok(()),
        AddrMatch::Prefixes(ps) => {
            if ps.is_empty() {
                return Err("an empty address list matches nothing".into());
            }
            ps.iter().try_for_each(check_prefix)
        }
        AddrMatch::Table(t) => {
            if cfg.tables.contains_key(&t.name) {
                Ok(())
            } else {
                Err(format!("table({}) is not defined", t.name))
            }
        }
    }
}

fn check_ports(ps: &[PortRange]) -> Result<(), String> {
    check_ranges("port", ps)
}

fn check_ranges(what: &str, ps: &[PortRange]) -> Result<(), String> {
    for p in ps {
        if p.lo > p.hi {
            return Err(format!("{what} range {}-{} is empty", p.lo, p.hi));
        }
    }
    Ok(())
}

/// Checks what a front end cannot write wrong but a model made by code can.
fn check_options(m: &Match) -> Result<(), String> {
    if let Some(p) = m.prob {
        if p.is_zero() || p > Probability::ONE {
            return Err(format!("prob {} billionths is not in (0, 1]", p.0));
        }
    }
    for o in &m.options {
        match &o.cond {
            Cond::TcpFlags { set, clear } if set & clear != 0 => {
                return Err("a TCP flag both required and refused matches nothing".into())
            }
            Cond::IpLen(rs) if rs.is_empty() => return Err("iplen without a value".into()),
            Cond::IpTtl(rs) if rs.is_empty() || rs.iter().any(|r| r.hi > 255) => {
                return Err("ipttl values are 0..=255".into())
            }
            Cond::IpLen(rs) => check_ranges("iplen", rs)?,
            Cond::IpTtl(rs) => check_ranges("ipttl", rs)?,
            Cond::Dscp(0) => return Err("dscp without a code point".into()),
            Cond::Iface(_, IfName::Name(n)) if n.is_empty() => {
                return Err("an empty interface name".into())
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks an action's target; `table` is the table a tablearg comes from.
fn check_action(cfg: &Config, a: &Action, table: Option<&TableName>) -> Result<(), String> {
    let (kind, target, exists): (&str, Target, &dyn Fn(u32) -> bool) = match a {
        Action::Allow | Action::Deny | Action::Count => return Ok(()),
        // Any number is a place in the rules (past the last: what no rule matched).
        Action::Skipto(t) => ("skipto", *t, &|_| true),
        Action::Queue(t) => ("queue", *t, &|n| cfg.flowsets.contains_key(&n)),
        Action::Pipe(t) => ("pipe", *t, &|n| cfg.pipes.contains_key(&n)),
    };
    match target {
        Target::Id(n) => {
            if exists(n) {
                Ok(())
            } else {
                Err(format!("{kind} {n} is not defined"))
            }
        }
        Target::Tablearg => {
            let Some(t) = table else {
                return Err(format!(
                    "{kind} tablearg needs exactly one table(N) lookup in the rule"
                ));
            };
            for (p, v) in &cfg.tables[t].entries {
                if !exists(*v) {
                    return Err(format!(
                        "{kind} tablearg: table {t} sends {}/{} to {kind} {v}, which is not \
                         defined",
                        p.addr, p.len
                    ));
                }
            }
            Ok(())
        }
    }
}

fn check_rule(cfg: &Config, r: &Rule) -> Result<(), String> {
    if !(1..=MAX_RULE).contains(&r.number) {
        return Err(format!(
            "rule numbers are 1..={MAX_RULE} (65535 is ipfw's default rule: write `default \
             ACTION`)"
        ));
    }
    if let Action::Skipto(Target::Id(n)) = r.action {
        if n <= r.number {
            return Err(format!(
                "skipto {n} does not jump forward (rules only skip to a higher number; ipfw \
                 would go on with the next rule)"
            ));
        }
    }
    let m = &r.matcher;
    check_addr(cfg, &m.src).map_err(|e| format!("source: {e}"))?;
    check_addr(cfg, &m.dst).map_err(|e| format!("destination: {e}"))?;
    check_ports(&m.src_ports)?;
    check_ports(&m.dst_ports)?;
    check_options(m)?;
    let not_any = |neg: bool, a: &AddrMatch| neg && *a == AddrMatch::Any;
    if not_any(m.not.src, &m.src) || not_any(m.not.dst, &m.dst) {
        return Err("`not any` matches nothing".into());
    }
    if (m.not.src_ports && m.src_ports.is_empty()) || (m.not.dst_ports && m.dst_ports.is_empty()) {
        return Err("`not` before no port condition matches nothing".into());
    }
    // A negated lookup holds when the address is not in the table: it has no value.
    let tables: Vec<&TableName> = [(m.not.src, &m.src), (m.not.dst, &m.dst)]
        .into_iter()
        .filter_map(|(not, a)| match a {
            AddrMatch::Table(t) if !not => Some(&t.name),
            _ => None,
        })
        .collect();
    let table = match tables.as_slice() {
        [t] => Some(*t),
        _ => None,
    };
    check_action(cfg, &r.action, table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn p4(a: [u8; 4], len: u8) -> Prefix {
        Prefix {
            addr: IpAddr::V4(Ipv4Addr::from(a)),
            len,
        }
    }

    #[test]
    fn canonical_prefixes() {
        assert_eq!(canonical(&p4([1, 2, 4, 0], 20)), Some(p4([1, 2, 0, 0], 20)));
        assert_eq!(canonical(&p4([1, 2, 3, 4], 0)), Some(p4([0, 0, 0, 0], 0)));
        assert_eq!(canonical(&p4([1, 2, 3, 4], 32)), Some(p4([1, 2, 3, 4], 32)));
        assert_eq!(canonical(&p4([1, 2, 3, 4], 33)), None);
        let v6 = Prefix {
            addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 3, 4, 5, 6)),
            len: 32,
        };
        let c = canonical(&v6).unwrap();
        assert_eq!(
            c.addr,
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0))
        );
        let e = check_prefix(&p4([1, 2, 4, 0], 20)).unwrap_err();
        assert!(e.contains("1.2.4.0/20") && e.contains("1.2.0.0/20"), "{e}");
    }

    fn sched(id: u32, alg: &str) -> Located<SchedSpec> {
        Located {
            item: SchedSpec {
                id,
                algorithm: alg.into(),
                params: vec![],
                bandwidth_bps: 0,
                framing: Framing::PLAIN,
                mask: FlowMask::default(),
                max_instances: DEFAULT_MAX_INSTANCES,
                idle_ns: DEFAULT_IDLE_NS,
                class: None,
            },
            at: Some(Loc { line: 3, column: 1 }),
        }
    }

    #[test]
    fn algorithm_names_become_canonical_and_params_registry_ordered() {
        let mut d = Draft::new("t");
        let mut s = sched(1, "QFQ+");
        s.item.params = vec![];
        d.schedulers.push(s);
        let c = resolve(d).unwrap();
        assert_eq!(c.schedulers[&1].algorithm, "qfq+");

        let mut d = Draft::new("t");
        d.schedulers.push(sched(1, "nosuch"));
        let e = resolve(d).unwrap_err().to_string();
        assert!(
            e.starts_with("t:3:1: sched 1:") && e.contains("nosuch"),
            "{e}"
        );
    }

    #[test]
    fn duplicates_and_dangling_references_are_named() {
        let mut d = Draft::new("t");
        d.schedulers.push(sched(1, "drr"));
        d.schedulers.push(sched(1, "drr"));
        let e = resolve(d).unwrap_err().to_string();
        assert!(e.contains("sched 1 is defined twice"), "{e}");

        let mut d = Draft::new("t");
        d.rules.push(Located {
            item: Rule {
                number: 100,
                action: Action::Queue(Target::Id(7)),
                matcher: Match::default(),
            },
            at: None,
        });
        let e = resolve(d).unwrap_err().to_string();
        assert!(e.contains("rule 100: queue 7 is not defined"), "{e}");
    }
}
