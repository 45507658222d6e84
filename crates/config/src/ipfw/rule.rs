//! The rule language of ipfw(8): `add` rules, and the commands of the rule stream
//! (`delete`, `flush`, `table ...`), applied to the [`Draft`] in the order written, as
//! ipfw applies a file of commands.
//!
//! Grammar (keywords are case-insensitive; `[]` optional, `|` alternatives, `...` repeat):
//!
//! ```text
//! add      := add [NUM] [prob P] ACTION BODY [// comment]
//! delete   := delete NUM|LO-HI...           (the rules so far with these numbers)
//! flush    := flush                         (every rule so far)
//! table    := table T create [type addr] | table T add PREFIX [VALUE]
//!           | table T delete PREFIX | table T flush | table T destroy
//! ACTION   := queue TARG | pipe TARG | skipto TARG | count
//!           | allow | accept | pass | permit | deny | drop | reject
//! TARG     := N | tablearg
//! BODY     := [PROTO] [from [not] ADDR [[not] PORTS] to [not] ADDR [[not] PORTS]] OPT...
//! PROTO    := ip | all | ip4 | ipv4 | ip6 | ipv6 | NAME | NUMBER
//! OPT      := [not] ( in | out | src-ip ADDR | dst-ip ADDR | src-port PORTS
//!           | dst-port PORTS | proto PROTO | ip4 | ipv4 | ip6 | ipv6
//!           | tcpflags [!]FLAG[,[!]FLAG]... | setup | established
//!           | iplen LIST | ipttl LIST | dscp CODE[,CODE]...
//!           | recv IF | xmit IF | via IF )
//! ADDR     := any | table(T) | table(T,V) | { A [,|or A]... } | A [, A]...
//!                                           (A: host or prefix, v4 or v6; T: a name)
//! PORTS    := P [, P]...   (P: port, service name (`http`) or lo-hi; `any` alone: any)
//! LIST     := V [, V]...   (V: number or lo-hi)
//! FLAG     := fin | syn | rst | psh | ack | urg | ece | cwr
//! CODE     := af11..af43 | cs0..cs7 | ef | be | 0..63
//! IF       := any | NAME   (NAME may hold `*`: `igb*`)
//! ```
//!
//! Meanings, from ipfw(8) and FreeBSD's `ipfw2.c` / `ip_fw2.c`:
//! - `ip4`/`ipv4` and `ip6`/`ipv6` in the protocol position are the address family (as
//!   ipfw's `add_proto_compat`), the option of the same name too; only `proto ipv6` is
//!   protocol 41 (IPv6 in IPv4);
//! - `setup` is `tcpflags syn,!ack`; `established` is TCP with RST or ACK;
//! - `prob P` (0 < P <= 1) is drawn before the rest of the rule is looked at;
//! - `skipto N` goes on with the first rule numbered N or more that comes after this one
//!   (a fixed N at or below the rule's own number is refused: ipfw would take the next
//!   rule instead, which is never what was meant); `skipto tablearg` does the same with
//!   the table's value, and a value at or below the rule's number means the next rule;
//! - `count` matches and goes on with the next rule;
//! - `via IF` is the transmit interface of a packet that has one, else the receive one
//!   (`recv`, `xmit` look at only one); `any` matches a packet that has that interface;
//! - `not` before a condition negates it; several `not`s toggle;
//! - `{ a or b }` is an address list; or-blocks of other options are refused;
//! - `//` and `#` start a comment (the lexer drops it);
//! - rule numbers are 1..=65534: 65535 is ipfw's default rule (`default ACTION` here);
//! - `reject` is an alias of `deny` (ipfw's `reject` also sends an ICMP error, which a
//!   shaper has no business doing); `ip` and `all` as the protocol mean any protocol;
//! - a condition given twice (two protocols, `from 1.2.3.4` and `src-ip 5.6.7.8`) is
//!   refused rather than intersected.
//!
//! What pspat cannot do is refused with the feature's name and why ([`RULE_REFUSED`]):
//! stateful rules, layer-2 rules, packet rewriting and redirection, rule sets, logging,
//! `me`.

use super::lexer::{Kind, Token};
use super::names::refused;
pub use super::names::{DSCP_NAMES, PROTOCOLS, RULE_REFUSED, SERVICES};
use super::parser::{phrase, Cursor, R};
use crate::error::cut;
use crate::model::*;
use crate::resolve::{next_rule_number, MAX_RULE};
use std::net::IpAddr;

/// Every keyword of the rule language (the `pspat` crate checks that `examples/config/`
/// uses each; a unit test below that every word this file matches on is listed here or in
/// [`RULE_REFUSED`]).
pub const RULE_KEYWORDS: &[&str] = &[
    // actions
    "queue",
    "pipe",
    "skipto",
    "count",
    "tablearg",
    "allow",
    "accept",
    "pass",
    "permit",
    "deny",
    "drop",
    "reject",
    "prob",
    // body
    "ip",
    "all",
    "from",
    "to",
    "any",
    "not",
    "or",
    // options
    "in",
    "out",
    "src-ip",
    "dst-ip",
    "src-port",
    "dst-port",
    "proto",
    "ip4",
    "ipv4",
    "ip6",
    "ipv6",
    "tcpflags",
    "tcpflag",
    "setup",
    "established",
    "iplen",
    "ipttl",
    "dscp",
    "recv",
    "xmit",
    "via",
    // table commands
    "create",
    "type",
    "addr",
    "add",
    "delete",
    "flush",
    "destroy",
];

/// An action.
pub(super) fn action(c: &mut Cursor<'_, '_>) -> R<Action> {
    const EXPECTED: &str = "expected an action: queue N, pipe N, skipto N, count, allow or deny";
    let t = c.word(&EXPECTED["expected ".len()..])?;
    let target = |c: &mut Cursor<'_, '_>, what: &str| -> R<Target> {
        if c.peek_is("tablearg") {
            c.pos += 1;
            Ok(Target::Tablearg)
        } else {
            Ok(Target::Id(c.id(&format!("a {what} number or `tablearg`"))?))
        }
    };
    Ok(match t.text.to_ascii_lowercase().as_str() {
        "queue" => Action::Queue(target(c, "queue")?),
        "pipe" => Action::Pipe(target(c, "pipe")?),
        "skipto" => {
            if c.peek_is("tablearg") {
                c.pos += 1;
                Action::Skipto(Target::Tablearg)
            } else {
                let n = c.number("a rule number or `tablearg`", 1, MAX_RULE.into())?;
                Action::Skipto(Target::Id(n as u32))
            }
        }
        "count" => Action::Count,
        "allow" | "accept" | "pass" | "permit" => Action::Allow,
        "deny" | "drop" | "reject" => Action::Deny,
        w => match refused(w) {
            Some(why) => return Err(c.err_at(t, why)),
            None => return Err(c.err_at(t, EXPECTED)),
        },
    })
}

/// What the protocol position of a rule body holds.
enum Proto {
    Any,
    Number(u8),
    Family(Family),
}

/// A protocol name or number; `None` for `ip`/`all` (any protocol).
fn protocol(text: &str) -> Result<Option<u8>, String> {
    let l = text.to_ascii_lowercase();
    if l == "ip" || l == "all" {
        return Ok(None);
    }
    if let Some(&(_, n)) = PROTOCOLS.iter().find(|(name, _)| *name == l) {
        return Ok(Some(n));
    }
    if l.bytes().all(|b| b.is_ascii_digit()) {
        return l
            .parse::<u8>()
            .map(Some)
            .map_err(|_| format!("protocol number {} is not 0..=255", cut(text)));
    }
    Err(format!(
        "unknown protocol '{}' (expected ip, all, ip4, ip6, a number 0..=255, or a name of \
         /etc/protocols: tcp, udp, icmp, icmp6, gre, esp, sctp, ...)",
        cut(text)
    ))
}

/// The address family a word names (`ip4`, `ipv4`, `ip6`, `ipv6`), if it names one.
fn family(text: &str) -> Option<Family> {
    match text.to_ascii_lowercase().as_str() {
        "ip4" | "ipv4" => Some(Family::V4),
        "ip6" | "ipv6" => Some(Family::V6),
        _ => None,
    }
}

/// The protocol position: families first (as ipfw's `add_proto_compat`), then protocols.
fn proto_position(text: &str) -> Result<Proto, String> {
    if let Some(f) = family(text) {
        return Ok(Proto::Family(f));
    }
    Ok(protocol(text)?.map_or(Proto::Any, Proto::Number))
}

/// A host or prefix (`1.2.3.4`, `1.2.3.0/24`, `2001:db8::/32`).
pub fn parse_prefix(text: &str) -> Result<Prefix, String> {
    let (a, len) = match text.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (text, None),
    };
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("'{}' is not an address or prefix", cut(text)))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|l| *l <= max)
            .ok_or_else(|| format!("'{}': prefix length must be 0..={max}", cut(text)))?,
    };
    Ok(Prefix { addr, len })
}

/// `table(T)`, `table(T,V)` and their shell-quoted forms (`'table(T1)'`): the lexer cuts
/// `table(T,V)` at its comma, so the value and `)` are the next tokens. `None` if the
/// word at the cursor is not a table lookup.
fn table_ref(c: &mut Cursor<'_, '_>) -> Option<R<TableRef>> {
    let t = c.peek()?;
    let unquote = |s: &str| s.trim_matches(|ch| ch == '\'' || ch == '"').to_owned();
    let text = unquote(t.text);
    let inner = text
        .strip_prefix("table(")
        .or_else(|| text.strip_prefix("TABLE("))?
        .to_owned();
    c.pos += 1;
    let bad = |c: &Cursor<'_, '_>, t: Token<'_>, m: String| Err(c.err_at(t, m));
    if let Some(name) = inner.strip_suffix(')') {
        return Some(match TableName::new(name) {
            Ok(name) => Ok(TableRef { name, value: None }),
            Err(m) => bad(c, t, m),
        });
    }
    let name = match TableName::new(&inner) {
        Ok(n) => n,
        Err(m) => return Some(bad(c, t, m)),
    };
    if !c.peek_kind(Kind::Comma) {
        return Some(Err(c.err("expected `)` or `,VALUE)` closing table(...")));
    }
    c.pos += 1;
    let Some(v) = c.peek() else {
        return Some(Err(c.err("expected the value of table(T,VALUE)")));
    };
    c.pos += 1;
    let value = unquote(v.text);
    Some(
        match value.strip_suffix(')').and_then(|x| x.parse::<u32>().ok()) {
            Some(value) => Ok(TableRef {
                name,
                value: Some(value),
            }),
            None => bad(
                c,
                v,
                "expected the value of table(T,VALUE): a number and `)`".into(),
            ),
        },
    )
}

/// `not`s at the cursor (each toggles); whether the next condition is negated.
fn nots(c: &mut Cursor<'_, '_>) -> bool {
    let mut not = false;
    while c.peek_is("not") {
        c.pos += 1;
        not = !not;
    }
    not
}

/// An address condition.
fn addr(c: &mut Cursor<'_, '_>) -> R<AddrMatch> {
    const EXPECTED: &str = "an address: any, a host, a prefix, a { list } or table(T)";
    if c.peek_kind(Kind::LBrace) {
        c.pos += 1;
        let mut ps = Vec::new();
        loop {
            ps.push(c.with(EXPECTED, parse_prefix)?);
            if c.peek_kind(Kind::Comma) || c.peek_is("or") {
                c.pos += 1;
            } else if c.peek_kind(Kind::RBrace) {
                c.pos += 1;
                return Ok(AddrMatch::Prefixes(ps));
            } else {
                return Err(c.err("expected `,`, `or` or `}` in the address list"));
            }
        }
    }
    if let Some(r) = table_ref(c) {
        return r.map(AddrMatch::Table);
    }
    let t = c.word(EXPECTED)?;
    let l = t.text.to_ascii_lowercase();
    if l == "any" {
        return Ok(AddrMatch::Any);
    }
    if let Some(why) = refused(&l) {
        return Err(c.err_at(t, why));
    }
    if l == "all" {
        return Err(c.err_at(
            t,
            "'all' is not an address: it is a protocol (any protocol); the address that \
             matches everything is `any`",
        ));
    }
    let mut ps =
        vec![parse_prefix(t.text).map_err(|m| c.err_at(t, format!("expected {EXPECTED}: {m}")))?];
    while c.peek_kind(Kind::Comma) {
        c.pos += 1;
        ps.push(c.with(EXPECTED, parse_prefix)?);
    }
    Ok(AddrMatch::Prefixes(ps))
}

/// An inclusive range of numbers up to `max` (`80`, `1000-2000`); `what` names a value.
pub(super) fn value_range(text: &str, max: u16, what: &str) -> Result<PortRange, String> {
    range_of(text, "range", |s| {
        s.parse::<u16>()
            .ok()
            .filter(|v| *v <= max)
            .ok_or_else(|| format!("'{}' is not {what} (0..={max}) or range lo-hi", cut(text)))
    })
}

/// `lo-hi` or a single value, each end read by `one`; `what` names an empty range.
fn range_of(
    text: &str,
    what: &str,
    one: impl Fn(&str) -> Result<u16, String>,
) -> Result<PortRange, String> {
    let (lo, hi) = match text.split_once('-') {
        Some((a, b)) => (one(a)?, one(b)?),
        None => {
            let v = one(text)?;
            (v, v)
        }
    };
    if lo > hi {
        return Err(format!("{what} '{}' is empty (lo > hi)", cut(text)));
    }
    Ok(PortRange { lo, hi })
}

/// A service name's port (`http` = 80), case-insensitive.
fn service(text: &str) -> Option<u16> {
    SERVICES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(text))
        .map(|(_, p)| *p)
}

/// One port, service name or inclusive range (`80`, `http`, `1000-2000`, `ftp-data`,
/// `ftp-ssh`); an empty range (`lo > hi`) is refused. A rule's port list ([`ports_str`])
/// is a comma-separated list of these.
pub fn port_range(text: &str) -> Result<PortRange, String> {
    if let Some(p) = service(text) {
        return Ok(PortRange { lo: p, hi: p });
    }
    range_of(text, "port range", |s| {
        service(s).or_else(|| s.parse::<u16>().ok()).ok_or_else(|| {
            format!(
                "'{}' is not a port (0..=65535, or a service name: http, ssh, ...) or range \
                 lo-hi",
                cut(text)
            )
        })
    })
}

/// Whether the token starts a port list: a number (not an address) or a service name.
fn looks_like_ports(t: Option<Token<'_>>) -> bool {
    t.is_some_and(|t| {
        t.kind == Kind::Word
            && ((t.text.starts_with(|ch: char| ch.is_ascii_digit())
                && !t.text.contains(['.', ':', '/']))
                || port_range(t.text).is_ok())
    })
}

/// A port list; `any` alone is no condition (an empty list).
fn ports(c: &mut Cursor<'_, '_>) -> R<Vec<PortRange>> {
    if c.peek_is("any") {
        c.pos += 1;
        return Ok(Vec::new());
    }
    list(
        c,
        "a port, service name or range (80, http, 1000-2000)",
        port_range,
    )
}

/// A comma-separated list of what `f` reads.
fn list<T>(c: &mut Cursor<'_, '_>, what: &str, f: impl Fn(&str) -> Result<T, String>) -> R<Vec<T>> {
    let mut out = vec![c.with(what, &f)?];
    while c.peek_kind(Kind::Comma) {
        c.pos += 1;
        out.push(c.with(what, &f)?);
    }
    Ok(out)
}

/// `tcpflags` flags: `syn,!ack` -> (set, clear).
fn tcpflags(c: &mut Cursor<'_, '_>) -> R<(u8, u8)> {
    let flags = list(c, "TCP flags (syn,!ack)", |s| {
        let (neg, name) = match s.strip_prefix('!') {
            Some(n) => (true, n),
            None => (false, s),
        };
        let bit = tcp_flag::NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, b)| *b)
            .ok_or_else(|| {
                format!(
                    "unknown TCP flag '{}' (expected {}, each maybe after `!`)",
                    cut(s),
                    tcp_flag::NAMES
                        .iter()
                        .map(|f| f.0)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        Ok((neg, bit))
    })?;
    let (mut set, mut clear) = (0u8, 0u8);
    for (neg, bit) in flags {
        if neg {
            clear |= bit;
        } else {
            set |= bit;
        }
    }
    if set & clear != 0 {
        return Err(c.err("a TCP flag both required and refused matches nothing"));
    }
    Ok((set, clear))
}

/// One DSCP code point: a name or 0..=63.
fn dscp_code(text: &str) -> Result<u8, String> {
    if let Some(&(_, v)) = DSCP_NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(text))
    {
        return Ok(v);
    }
    text.parse::<u8>().ok().filter(|v| *v < 64).ok_or_else(|| {
        format!(
            "'{}' is not a DSCP code point (0..=63, or af11..af43, cs0..cs7, ef, be)",
            cut(text)
        )
    })
}

/// The interface of `recv`, `xmit` or `via`.
fn iface(text: &str) -> Result<IfName, String> {
    if text.eq_ignore_ascii_case("any") {
        return Ok(IfName::Any);
    }
    if text.starts_with("table(") || text.parse::<IpAddr>().is_ok() || text.contains('/') {
        return Err(format!(
            "'{}': interfaces are matched by name (igb0, igb*, any), not by table or address",
            cut(text)
        ));
    }
    let ok = |ch: char| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-' | '*' | ':');
    if text.len() > IFNAME_MAX || !text.chars().all(ok) {
        return Err(format!(
            "'{}' is not an interface name (at most {IFNAME_MAX} letters, digits, `.`, `_`, \
             `-`, `:`, and `*` for any run of them)",
            cut(text)
        ));
    }
    Ok(IfName::Name(text.to_owned()))
}

/// Longest interface name (Linux's IFNAMSIZ less its NUL).
const IFNAME_MAX: usize = 15;

/// Sets a rule condition once; a second setting is an error at `t`.
fn set_once<T>(c: &Cursor<'_, '_>, t: Token<'_>, slot: &mut Option<T>, v: T, what: &str) -> R<()> {
    if slot.is_some() {
        return Err(c.err_at(t, format!("the {what} is given twice in this rule")));
    }
    *slot = Some(v);
    Ok(())
}

/// `prob P`: 0 < P <= 1, in billionths.
fn prob(text: &str) -> Result<Probability, String> {
    let p: f64 = text
        .parse()
        .map_err(|_| format!("'{}' is not a probability (0 < P <= 1)", cut(text)))?;
    let ppb = (p * f64::from(Probability::ONE.0)).round();
    if !(p > 0.0 && p <= 1.0) || ppb < 1.0 {
        return Err(format!(
            "probability {} is not in (0, 1] (at least 0.000000001)",
            cut(text)
        ));
    }
    Ok(Probability(ppb as u32))
}

/// The conditions of a rule as they are read, each settable once.
#[derive(Default)]
struct Conds {
    proto: Option<Option<u8>>,
    src: Option<(bool, AddrMatch)>,
    dst: Option<(bool, AddrMatch)>,
    sp: Option<(bool, Vec<PortRange>)>,
    dp: Option<(bool, Vec<PortRange>)>,
    dir: Option<Direction>,
    options: Vec<RuleOption>,
}

pub(super) fn rule(c: &mut Cursor<'_, '_>, highest: u32) -> R<Rule> {
    let number = if c
        .peek()
        .is_some_and(|t| t.text.starts_with(|ch: char| ch.is_ascii_digit()))
    {
        let t = c.peek().expect("peeked");
        let n = c.number("a rule number", 1, (MAX_RULE + 1).into())? as u32;
        if n > MAX_RULE {
            return Err(c.err_at(
                t,
                format!(
                    "rule {n} is ipfw's default rule, which no file may add: write `default \
                     ACTION` for what no rule matches"
                ),
            ));
        }
        n
    } else {
        next_rule_number(highest)
    };
    if let Some(t) = c.peek().filter(|_| c.peek_is("set")) {
        return Err(c.err_at(t, refused("set").unwrap_or_default()));
    }
    let mut prob_ = None;
    if c.peek_is("prob") {
        c.pos += 1;
        prob_ = Some(c.with("a probability (0 < P <= 1)", prob)?);
    }
    let action = action(c)?;
    let mut k = Conds::default();
    body(c, &mut k)?;
    options(c, &mut k)?;
    let mut matcher = Match {
        direction: k.dir,
        proto: k.proto.flatten(),
        prob: prob_,
        options: k.options,
        ..Match::default()
    };
    matcher.set_negatable(k.src, k.dst, k.sp, k.dp);
    Ok(Rule {
        number,
        action,
        matcher,
    })
}

/// An address after `from`/`to`/`src-ip`/`dst-ip`, maybe negated; `any` (not negated) is
/// no condition.
fn neg_addr(c: &mut Cursor<'_, '_>) -> R<Option<(bool, AddrMatch)>> {
    let not = nots(c);
    let a = addr(c)?;
    if a == AddrMatch::Any {
        if not {
            return Err(c.err("`not any` matches nothing"));
        }
        return Ok(None);
    }
    Ok(Some((not, a)))
}

/// Ports, maybe negated; `any` (not negated) is no condition.
fn neg_ports(c: &mut Cursor<'_, '_>) -> R<Option<(bool, Vec<PortRange>)>> {
    let not = nots(c);
    let p = ports(c)?;
    if p.is_empty() {
        if not {
            return Err(c.err("`not any` matches nothing"));
        }
        return Ok(None);
    }
    Ok(Some((not, p)))
}

/// The classic body: `[PROTO] from ADDR [PORTS] to ADDR [PORTS]`.
fn body(c: &mut Cursor<'_, '_>, k: &mut Conds) -> R<()> {
    if c.peek_kind(Kind::LBrace) {
        return Err(c.err(
            "or-blocks of protocols ({ tcp or udp }) are not supported: write one rule per \
             protocol",
        ));
    }
    if let Some(t) = c.peek() {
        let next_is_from = c
            .toks
            .get(c.pos + 1)
            .is_some_and(|n| n.text.eq_ignore_ascii_case("from"));
        if t.kind == Kind::Word && next_is_from && !c.peek_is("from") {
            c.pos += 1;
            if t.text.eq_ignore_ascii_case("not") {
                return Err(c.err_at(t, "`not` before the protocol is not supported"));
            }
            match proto_position(t.text).map_err(|m| c.err_at(t, m))? {
                Proto::Any => {}
                Proto::Number(p) => k.proto = Some(Some(p)),
                Proto::Family(f) => k.options.push(RuleOption {
                    not: false,
                    cond: Cond::Family(f),
                }),
            }
        }
    }
    if !c.peek_is("from") {
        return Ok(());
    }
    c.pos += 1;
    k.src = neg_addr(c)?;
    if !c.peek_is("to") {
        let t = c.peek();
        if c.peek_is("not") || looks_like_ports(t) {
            k.sp = neg_ports(c)?;
        }
    }
    c.keyword("to")?;
    k.dst = neg_addr(c)?;
    let next = c.toks.get(c.pos + 1).copied();
    if looks_like_ports(c.peek()) || (c.peek_is("not") && looks_like_ports(next)) {
        k.dp = neg_ports(c)?;
    }
    Ok(())
}

/// The options after the body.
fn options(c: &mut Cursor<'_, '_>, k: &mut Conds) -> R<()> {
    while let Some(t) = c.peek() {
        if t.kind == Kind::LBrace {
            return Err(c.err(
                "or-blocks of options ({ via a or via b }) are not supported: write one rule \
                 per alternative",
            ));
        }
        if t.kind != Kind::Word {
            return Err(c.err("expected a rule option"));
        }
        let not = nots(c);
        let t = c.word("a rule option after `not`")?;
        let mut push = |cond| {
            k.options.push(RuleOption { not, cond });
        };
        match t.text.to_ascii_lowercase().as_str() {
            w @ ("in" | "out") => {
                let d = if w == "in" {
                    Direction::In
                } else {
                    Direction::Out
                };
                let d = if not {
                    match d {
                        Direction::In => Direction::Out,
                        Direction::Out => Direction::In,
                    }
                } else {
                    d
                };
                set_once(c, t, &mut k.dir, d, "direction")?
            }
            "src-ip" => {
                let a = neg_addr(c)?.map(|(n, a)| (n != not, a));
                let a = a.unwrap_or((false, AddrMatch::Any));
                set_once(c, t, &mut k.src, a, "source address")?
            }
            "dst-ip" => {
                let a = neg_addr(c)?.map(|(n, a)| (n != not, a));
                let a = a.unwrap_or((false, AddrMatch::Any));
                set_once(c, t, &mut k.dst, a, "destination address")?
            }
            "src-port" => {
                let p = neg_ports(c)?.map(|(n, p)| (n != not, p));
                let p = p.unwrap_or((false, Vec::new()));
                set_once(c, t, &mut k.sp, p, "source port")?
            }
            "dst-port" => {
                let p = neg_ports(c)?.map(|(n, p)| (n != not, p));
                let p = p.unwrap_or((false, Vec::new()));
                set_once(c, t, &mut k.dp, p, "destination port")?
            }
            "proto" => {
                if not {
                    return Err(c.err_at(t, "`not proto` is not supported"));
                }
                let p = c.with("a protocol", protocol)?;
                set_once(c, t, &mut k.proto, p, "protocol")?
            }
            w @ ("ip4" | "ipv4" | "ip6" | "ipv6") => {
                push(Cond::Family(family(w).expect("a family word")))
            }
            "tcpflags" | "tcpflag" => {
                let (set, clear) = tcpflags(c)?;
                push(Cond::TcpFlags { set, clear })
            }
            "setup" => push(Cond::TcpFlags {
                set: tcp_flag::SYN,
                clear: tcp_flag::ACK,
            }),
            "established" => push(Cond::Established),
            "iplen" => {
                let l = list(c, "IP lengths (64, 1-128)", |s| {
                    value_range(s, u16::MAX, "a length")
                })?;
                push(Cond::IpLen(l))
            }
            "ipttl" => {
                let l = list(c, "TTLs (1, 2-64)", |s| value_range(s, 255, "a TTL"))?;
                push(Cond::IpTtl(l))
            }
            "dscp" => {
                let codes = list(c, "DSCP code points (ef, af11, 46)", dscp_code)?;
                push(Cond::Dscp(codes.iter().fold(0u64, |m, v| m | 1 << v)))
            }
            w @ ("recv" | "xmit" | "via") => {
                let dir = match w {
                    "recv" => IfaceDir::Recv,
                    "xmit" => IfaceDir::Xmit,
                    _ => IfaceDir::Via,
                };
                let name = c.with("an interface (igb0, igb*, any)", iface)?;
                push(Cond::Iface(dir, name))
            }
            "from" => return Err(c.err_at(t, "`from ... to ...` must come before the options")),
            w => {
                if let Some(why) = refused(w) {
                    return Err(c.err_at(t, why));
                }
                return Err(c.err_at(
                    t,
                    "expected a rule option: in, out, src-ip, dst-ip, src-port, dst-port, \
                     proto, ip4, ip6, tcpflags, setup, established, iplen, ipttl, dscp, recv, \
                     xmit or via (or `from ADDR to ADDR`)",
                ));
            }
        }
    }
    Ok(())
}

/// An action as a phrase (`queue 1`, `pipe tablearg`, `skipto 100`, `deny`).
pub fn action_str(text: &str) -> Result<Action, String> {
    phrase(
        text,
        "an action (queue N, pipe N, skipto N, count, allow, deny)",
        action,
    )
}

/// An address condition as a phrase (`any`, `1.2.3.0/24`, `table(1)`, `{ a, b }`).
pub fn addr_str(text: &str) -> Result<AddrMatch, String> {
    phrase(text, "an address", addr)
}

/// An address condition maybe after `not` (`not 10.0.0.0/8`): whether negated, and the
/// condition (`any` for none).
pub fn neg_addr_str(text: &str) -> Result<(bool, AddrMatch), String> {
    phrase(text, "an address", |c| {
        Ok(neg_addr(c)?.unwrap_or((false, AddrMatch::Any)))
    })
}

/// Ports as a phrase (`80`, `1000-2000`, `80,443`, `http`, `any`).
pub fn ports_str(text: &str) -> Result<Vec<PortRange>, String> {
    phrase(text, "a port list", ports)
}

/// Ports maybe after `not` (`not 80,443`).
pub fn neg_ports_str(text: &str) -> Result<(bool, Vec<PortRange>), String> {
    phrase(text, "a port list", |c| {
        Ok(neg_ports(c)?.unwrap_or((false, Vec::new())))
    })
}

/// A protocol (`udp`, `17`; `ip`/`all` = any).
pub fn protocol_str(text: &str) -> Result<Option<u8>, String> {
    protocol(text)
}

/// A probability (`0.25`).
pub fn prob_str(text: &str) -> Result<Probability, String> {
    prob(text)
}

/// Rule options as a phrase (`tcpflags syn,!ack not via igb0`); direction, address, port
/// and protocol options belong to their own keys and are refused here.
pub fn options_str(text: &str) -> Result<Vec<RuleOption>, String> {
    phrase(text, "rule options", |c| {
        let mut k = Conds::default();
        let start = c.pos;
        options(c, &mut k)?;
        if k.dir.is_some() || k.src.is_some() || k.dst.is_some() || k.sp.is_some() {
            c.pos = start;
            return Err(c.err("direction, addresses and ports have keys of their own"));
        }
        if k.dp.is_some() || k.proto.is_some() {
            c.pos = start;
            return Err(c.err("ports and the protocol have keys of their own"));
        }
        Ok(k.options)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ConfigError;
    use crate::ipfw::parser::parse;

    /// Every string literal a `match` arm of this file and `stream.rs` tests is a listed
    /// keyword or refused word, and every keyword is read there.
    #[test]
    fn keywords_list_every_word_the_rule_parser_matches() {
        let files = [include_str!("rule.rs"), include_str!("stream.rs")];
        let src: String = files
            .iter()
            .map(|f| &f[..f.find("#[cfg(test)]").unwrap()])
            .collect();
        let mut found = Vec::new();
        for line in src.lines() {
            let Some((arm, _)) = line.split_once("=>") else {
                continue;
            };
            let arm = arm.trim().trim_start_matches("w @ (").trim_end_matches(')');
            if !arm.starts_with('"') {
                continue;
            }
            for lit in arm.split('|') {
                found.push(lit.trim().trim_matches('"').to_owned());
            }
        }
        assert!(found.len() > 30, "scan found only {found:?}");
        for w in &found {
            assert!(
                RULE_KEYWORDS.contains(&w.as_str()) || refused(w).is_some(),
                "the rule parser matches `{w}`, which RULE_KEYWORDS does not list"
            );
        }
        for k in RULE_KEYWORDS {
            assert!(
                src.contains(&format!("\"{k}\"")),
                "`{k}` is listed but never read"
            );
        }
    }

    fn one(line: &str) -> Rule {
        let d = parse(line, "t").unwrap_or_else(|e| panic!("{line}: {e}"));
        d.rules.last().expect("a rule").item.clone()
    }

    fn err(text: &str) -> String {
        parse(text, "t").unwrap_err().to_string()
    }

    #[test]
    fn services_ports_and_any() {
        let r = one("add 1 allow tcp from any http,ssh-smtp to any dst-port 443");
        assert_eq!(
            r.matcher.src_ports,
            vec![PortRange { lo: 80, hi: 80 }, PortRange { lo: 22, hi: 25 }]
        );
        assert_eq!(r.matcher.dst_ports, vec![PortRange { lo: 443, hi: 443 }]);
        assert_eq!(port_range("ftp-data"), Ok(PortRange { lo: 20, hi: 20 }));
        let r = one("add 1 allow ip from any to any src-port any dst-port any");
        assert!(r.matcher.src_ports.is_empty() && r.matcher.dst_ports.is_empty());
        assert_eq!(port_range("HTTPS"), Ok(PortRange { lo: 443, hi: 443 }));
        assert!(port_range("gopherz").unwrap_err().contains("service name"));
    }

    #[test]
    fn families_and_protocol_names() {
        let r = one("add 1 allow ipv6 from ::1 to any");
        assert_eq!(r.matcher.proto, None);
        assert_eq!(
            r.matcher.options,
            vec![RuleOption {
                not: false,
                cond: Cond::Family(Family::V6)
            }]
        );
        assert_eq!(
            one("add 1 allow ip from any to any proto ipv6")
                .matcher
                .proto,
            Some(41)
        );
        assert_eq!(
            one("add 1 allow ipv6-icmp from any to any").matcher.proto,
            Some(58)
        );
        assert_eq!(
            one("add 1 allow carp from any to any").matcher.proto,
            Some(112)
        );
        assert_eq!(
            one("add 1 allow ip4 from any to any").matcher.options[0].cond,
            Cond::Family(Family::V4)
        );
    }

    #[test]
    fn negation_or_blocks_and_tables() {
        let r = one("add 1 allow ip from not { 1.2.3.4 or 5.6.7.0/24 } to not table(T1,3) not 80");
        assert!(r.matcher.not.src && r.matcher.not.dst && r.matcher.not.dst_ports);
        assert!(!r.matcher.not.src_ports);
        assert!(matches!(&r.matcher.src, AddrMatch::Prefixes(p) if p.len() == 2));
        assert_eq!(
            r.matcher.dst,
            AddrMatch::Table(TableRef {
                name: TableName::new("T1").unwrap(),
                value: Some(3)
            })
        );
        let r = one("add 1 pipe tablearg ip from 'table(T1)' to any");
        assert_eq!(
            r.matcher.src,
            AddrMatch::Table(TableRef {
                name: TableName::new("T1").unwrap(),
                value: None
            })
        );
        let r = one("add 1 allow ip from any to any not via igb0 not not in");
        assert_eq!(r.matcher.direction, Some(Direction::In));
        assert!(r.matcher.options[0].not);
        // `not src-ip not X` is X
        let r = one("add 1 allow not src-ip not 1.2.3.4");
        assert!(!r.matcher.not.src);
    }

    #[test]
    fn tcp_options_lengths_and_dscp() {
        let r = one("add 1 allow tcp from any to any tcpflags syn,!ack,fin setup established iplen 1-128,1500 ipttl 1 dscp ef,af11,8");
        let o: Vec<Cond> = r.matcher.options.into_iter().map(|o| o.cond).collect();
        assert_eq!(
            o,
            vec![
                Cond::TcpFlags {
                    set: 0x03,
                    clear: 0x10
                },
                Cond::TcpFlags {
                    set: 0x02,
                    clear: 0x10
                },
                Cond::Established,
                Cond::IpLen(vec![
                    PortRange { lo: 1, hi: 128 },
                    PortRange { lo: 1500, hi: 1500 }
                ]),
                Cond::IpTtl(vec![PortRange { lo: 1, hi: 1 }]),
                Cond::Dscp(1 << 46 | 1 << 10 | 1 << 8),
            ]
        );
        assert!(err("add 1 allow tcp from any to any tcpflags syn,!syn")
            .contains("both required and refused"));
        assert!(
            err("add 1 allow tcp from any to any tcpflags sin").contains("unknown TCP flag 'sin'")
        );
        assert!(err("add 1 allow ip from any to any dscp af99").contains("not a DSCP code point"));
        assert!(err("add 1 allow ip from any to any ipttl 256").contains("not a TTL (0..=255)"));
    }

    #[test]
    fn actions_prob_and_numbers() {
        let r = one("add 100 prob 0.25 skipto 200 ip from any to any");
        assert_eq!(r.action, Action::Skipto(Target::Id(200)));
        assert_eq!(r.matcher.prob, Some(Probability(250_000_000)));
        assert_eq!(
            one("add 1 skipto tablearg ip from table(1) to any").action,
            Action::Skipto(Target::Tablearg)
        );
        assert_eq!(one("add 1 count ip from any to any").action, Action::Count);
        assert_eq!(
            err("add 65535 allow ip from any to any"),
            "t:1:5: rule 65535 is ipfw's default rule, which no file may add: write `default ACTION` for what no rule matches (at `65535`)"
        );
        assert!(err("add 1 prob 0 allow").contains("not in (0, 1]"));
        assert!(err("add 1 prob 1.5 allow").contains("not in (0, 1]"));
    }

    #[test]
    fn refusals_name_the_feature() {
        for (line, col, word) in [
            ("add 1 allow ip from me to any", 21, "me"),
            ("add 1 set 3 allow ip from any to any", 7, "set"),
            ("add 1 allow log ip from any to any", 13, "log"),
            ("add 1 fwd 1.2.3.4 ip from any to any", 7, "fwd"),
            ("add 1 nat 1 ip from any to any", 7, "nat"),
            ("add 1 divert 8668 ip from any to any", 7, "divert"),
            ("add 1 call 100 ip from any to any", 7, "call"),
            (
                "add 1 allow tcp from any to any keep-state",
                33,
                "keep-state",
            ),
            ("add 1 allow ip from any to any layer2", 32, "layer2"),
            (
                "add 1 allow ip from any to any mac-type arp",
                32,
                "mac-type",
            ),
            ("add 1 allow ip from any to any me6", 32, "me6"),
        ] {
            let e = parse(line, "t").unwrap_err();
            let ConfigError::Syntax {
                column,
                token,
                message,
                ..
            } = e
            else {
                panic!("{line}: not a syntax error")
            };
            assert_eq!((column, token.as_str()), (col, word), "{line}: {message}");
            assert_eq!(Some(message.as_str()), refused(word), "{line}");
        }
        assert!(err("add 1 allow ip from any to any { via a or via b }")
            .contains("or-blocks of options"));
        assert!(
            err("add 1 allow { tcp or udp } from any to any").contains("or-blocks of protocols")
        );
        assert!(err("add 1 allow ip from any to all").contains("'all' is not an address"));
        assert!(err("add 1 allow ip from any to any via table(1)").contains("matched by name"));
    }
}
