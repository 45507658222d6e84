//! `Display for Config`: the resolved model in ipfw syntax, one command per line, every
//! option written out (defaults included, so that `pspat config check` shows what each
//! object really is; a link's framing only when it adds something, as `overhead`, `mpu`
//! and `linklayer`, whatever preset gave it). Parsing the output gives back an equal model (property-tested in
//! `tests/roundtrip.rs`).
//!
//! Order: schedulers, pipes, flowsets, tables, rules, default action; each by number.

use std::fmt::{self, Display, Formatter, Write};
use std::net::Ipv6Addr;

use super::rule::{DSCP_NAMES, PROTOCOLS};
use crate::model::*;
use pspat_units as units;

/// A mask in ipfw syntax (without the leading `mask`); empty for the empty mask.
pub fn mask_words(m: &FlowMask) -> String {
    if *m == FlowMask::ALL {
        return "all".into();
    }
    let mut s = String::new();
    let mut put = |k: &str, v: String| {
        if !s.is_empty() {
            s.push(' ');
        }
        let _ = write!(s, "{k} {v}");
    };
    if m.src_ip != 0 {
        put("src-ip", format!("{:#010x}", m.src_ip));
    }
    if m.dst_ip != 0 {
        put("dst-ip", format!("{:#010x}", m.dst_ip));
    }
    if m.src_ip6 != 0 {
        put("src-ip6", mask6(m.src_ip6));
    }
    if m.dst_ip6 != 0 {
        put("dst-ip6", mask6(m.dst_ip6));
    }
    if m.src_port != 0 {
        put("src-port", format!("{:#06x}", m.src_port));
    }
    if m.dst_port != 0 {
        put("dst-port", format!("{:#06x}", m.dst_port));
    }
    if m.proto != 0 {
        put("proto", format!("{:#04x}", m.proto));
    }
    s
}

/// `/LEN` for a contiguous IPv6 mask, the address form otherwise.
pub fn mask6(m: u128) -> String {
    let len = m.leading_ones();
    if m.checked_shl(len).unwrap_or(0) == 0 {
        format!("/{len}")
    } else {
        Ipv6Addr::from(m).to_string()
    }
}

/// A protocol by name when ipfw has one, else by number. Protocol 41 is written `41`: its
/// name `ipv6` in a rule's protocol position means the IPv6 family.
pub fn proto_name(p: u8) -> String {
    PROTOCOLS
        .iter()
        .find(|(name, n)| *n == p && *name != "ipv6")
        .map_or_else(|| p.to_string(), |(name, _)| (*name).to_owned())
}

/// A prefix: the bare address for a host, `addr/len` otherwise.
pub fn prefix(p: &Prefix) -> String {
    let host = if p.addr.is_ipv4() { 32 } else { 128 };
    if p.len == host {
        p.addr.to_string()
    } else {
        format!("{}/{}", p.addr, p.len)
    }
}

/// An address condition in ipfw syntax.
pub fn addr(a: &AddrMatch) -> String {
    match a {
        AddrMatch::Any => "any".into(),
        AddrMatch::Table(TableRef { name, value: None }) => format!("table({name})"),
        AddrMatch::Table(TableRef {
            name,
            value: Some(v),
        }) => format!("table({name},{v})"),
        AddrMatch::Prefixes(ps) if ps.len() == 1 => prefix(&ps[0]),
        AddrMatch::Prefixes(ps) => {
            let list: Vec<String> = ps.iter().map(prefix).collect();
            format!("{{ {} }}", list.join(", "))
        }
    }
}

/// Port ranges as `80,1000-2000`.
pub fn ports(ps: &[PortRange]) -> String {
    let v: Vec<String> = ps
        .iter()
        .map(|p| {
            if p.lo == p.hi {
                p.lo.to_string()
            } else {
                format!("{}-{}", p.lo, p.hi)
            }
        })
        .collect();
    v.join(",")
}

/// A queue limit as `queue SIZE` writes it.
pub fn limit(l: &QueueLimit) -> String {
    match l {
        QueueLimit::Packets(n) => n.to_string(),
        // ipfw knows K and bytes only as queue units.
        QueueLimit::Bytes(b) if b % 1024 == 0 => format!("{}KB", b / 1024),
        QueueLimit::Bytes(b) => format!("{b}B"),
    }
}

/// A probability as a decimal that reads back to the same value (`0.01`, `1`, `0`).
pub fn probability(p: Probability) -> String {
    match p.0 {
        0 => "0".into(),
        n if n >= Probability::ONE.0 => "1".into(),
        n => format!("0.{n:09}").trim_end_matches('0').to_owned(),
    }
}

/// RED parameters as `red`/`gred` take them: `w_q/min_th/max_th/max_p`.
pub fn red_params(r: &Red) -> String {
    format!(
        "{}/{}/{}/{}",
        probability(r.w_q),
        r.min_th,
        r.max_th,
        probability(r.max_p)
    )
}

/// A queue's loss and early drop as options (` plr 0.01 red 0.002/30/80/0.1`), empty
/// when it has neither.
fn queue_management(qm: &QueueManagement) -> String {
    let mut s = String::new();
    if !qm.plr.is_zero() {
        let _ = write!(s, " plr {}", probability(qm.plr));
    }
    if let Some(r) = &qm.red {
        let kind = if r.gentle { "gred" } else { "red" };
        let _ = write!(s, " {kind} {}", red_params(r));
    }
    s
}

impl Display for Action {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let t = |t: &Target| match t {
            Target::Id(n) => n.to_string(),
            Target::Tablearg => "tablearg".into(),
        };
        match self {
            Action::Queue(x) => write!(f, "queue {}", t(x)),
            Action::Pipe(x) => write!(f, "pipe {}", t(x)),
            Action::Allow => f.write_str("allow"),
            Action::Deny => f.write_str("deny"),
            Action::Skipto(x) => write!(f, "skipto {}", t(x)),
            Action::Count => f.write_str("count"),
        }
    }
}

/// `not ` when `not`, else nothing.
pub fn not(not: bool) -> &'static str {
    if not {
        "not "
    } else {
        ""
    }
}

/// A DSCP code point set as ipfw names it (`ef,af11`), numbers where there is no name.
pub fn dscp(set: u64) -> String {
    let names: Vec<String> = (0..64u8)
        .filter(|i| set >> i & 1 == 1)
        .map(|i| {
            DSCP_NAMES
                .iter()
                .find(|(_, v)| *v == i)
                .map_or_else(|| i.to_string(), |(n, _)| (*n).to_owned())
        })
        .collect();
    names.join(",")
}

impl Display for RuleOption {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(not(self.not))?;
        match &self.cond {
            Cond::Family(Family::V4) => f.write_str("ip4"),
            Cond::Family(Family::V6) => f.write_str("ip6"),
            Cond::TcpFlags { set, clear } => {
                let mut names = Vec::new();
                for (n, bit) in tcp_flag::NAMES {
                    if set & bit != 0 {
                        names.push((*n).to_owned());
                    } else if clear & bit != 0 {
                        names.push(format!("!{n}"));
                    }
                }
                write!(f, "tcpflags {}", names.join(","))
            }
            Cond::Established => f.write_str("established"),
            Cond::IpLen(rs) => write!(f, "iplen {}", ports(rs)),
            Cond::IpTtl(rs) => write!(f, "ipttl {}", ports(rs)),
            Cond::Dscp(set) => write!(f, "dscp {}", dscp(*set)),
            Cond::Iface(dir, name) => {
                let d = match dir {
                    IfaceDir::Recv => "recv",
                    IfaceDir::Xmit => "xmit",
                    IfaceDir::Via => "via",
                };
                match name {
                    IfName::Any => write!(f, "{d} any"),
                    IfName::Name(n) => write!(f, "{d} {n}"),
                }
            }
        }
    }
}

/// Rule options in ipfw syntax, space-separated.
pub fn options(os: &[RuleOption]) -> String {
    let v: Vec<String> = os.iter().map(|o| o.to_string()).collect();
    v.join(" ")
}

impl Display for SchedSpec {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "sched {} config type {}", self.id, self.algorithm)?;
        if let Some(k) = &self.class {
            write!(f, " parent {}", k.parent)?;
            if k.rate_bps != 0 {
                write!(f, " rate {}", units::format_bandwidth(k.rate_bps))?;
            }
            if let Some(c) = k.ceil_bps {
                write!(f, " ceil {}", units::format_bandwidth(c))?;
            }
            if let Some(b) = k.burst {
                write!(f, " burst {b}")?;
            }
            if let Some(b) = k.cburst {
                write!(f, " cburst {b}")?;
            }
            write!(f, " weight {} prio {}", k.weight, k.prio)?;
        }
        if self.bandwidth_bps != 0 {
            write!(f, " bw {}", units::format_bandwidth(self.bandwidth_bps))?;
        }
        if !self.framing.is_plain() {
            write!(f, " {}", self.framing)?;
        }
        if !self.mask.is_empty() {
            write!(f, " mask {}", mask_words(&self.mask))?;
        }
        if !self.params.is_empty() {
            let p: Vec<String> = self
                .params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            write!(f, " params {}", p.join(","))?;
        }
        write!(
            f,
            " max-instances {} idle {}",
            self.max_instances,
            units::format_duration(self.idle_ns)
        )
    }
}

impl Display for FlowsetSpec {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "queue {} config sched {} weight {} queue {} max-len {}",
            self.id,
            self.sched,
            self.weight,
            limit(&self.limit),
            self.max_len
        )?;
        f.write_str(&queue_management(&self.qm))?;
        if !self.mask.is_empty() {
            write!(f, " mask {}", mask_words(&self.mask))?;
        }
        write!(
            f,
            " max-queues {} idle {}",
            self.max_queues,
            units::format_duration(self.idle_ns)
        )
    }
}

impl Display for PipeSpec {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pipe {} config bw {} queue {}",
            self.id,
            units::format_bandwidth(self.bandwidth_bps),
            limit(&self.limit)
        )?;
        if self.delay_ns != 0 {
            write!(f, " delay {}", self.delay_ns / 1_000_000)?;
        }
        if self.burst_bytes != 0 {
            write!(f, " burst {}", self.burst_bytes)?;
        }
        if !self.framing.is_plain() {
            write!(f, " {}", self.framing)?;
        }
        f.write_str(&queue_management(&self.qm))?;
        if !self.mask.is_empty() {
            write!(f, " mask {}", mask_words(&self.mask))?;
        }
        write!(
            f,
            " max-instances {} idle {}",
            self.max_instances,
            units::format_duration(self.idle_ns)
        )
    }
}

impl Display for Rule {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let m = &self.matcher;
        let proto = m.proto.map_or_else(|| "ip".to_owned(), proto_name);
        write!(f, "add {} ", self.number)?;
        if let Some(p) = m.prob {
            write!(f, "prob {} ", probability(p))?;
        }
        write!(
            f,
            "{} {proto} from {}{}",
            self.action,
            not(m.not.src),
            addr(&m.src)
        )?;
        if !m.src_ports.is_empty() {
            write!(f, " {}{}", not(m.not.src_ports), ports(&m.src_ports))?;
        }
        write!(f, " to {}{}", not(m.not.dst), addr(&m.dst))?;
        if !m.dst_ports.is_empty() {
            write!(f, " {}{}", not(m.not.dst_ports), ports(&m.dst_ports))?;
        }
        match m.direction {
            Some(Direction::In) => f.write_str(" in")?,
            Some(Direction::Out) => f.write_str(" out")?,
            None => {}
        }
        if !m.options.is_empty() {
            write!(f, " {}", options(&m.options))?;
        }
        Ok(())
    }
}

impl Display for Config {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for s in self.schedulers.values() {
            writeln!(f, "{s}")?;
        }
        for p in self.pipes.values() {
            writeln!(f, "{p}")?;
        }
        for q in self.flowsets.values() {
            writeln!(f, "{q}")?;
        }
        for t in self.tables.values() {
            if t.entries.is_empty() {
                writeln!(f, "table {} create", t.id)?;
            }
            for (p, v) in &t.entries {
                writeln!(f, "table {} add {} {v}", t.id, prefix(p))?;
            }
        }
        for r in &self.rules {
            writeln!(f, "{r}")?;
        }
        if !self.one_pass {
            writeln!(f, "sysctl net.inet.ip.fw.one_pass=0")?;
        }
        writeln!(f, "default {}", self.default_action)
    }
}
