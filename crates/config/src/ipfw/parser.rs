//! The ipfw/dnctl command parser: one command per line into a [`Draft`].
//!
//! Grammar (keywords are case-insensitive; `[]` optional, `|` alternatives, `...` repeat):
//!
//! ```text
//! line     := [ipfw | dnctl] [-q | -f]... command | (empty or comment)
//! command  := sched N config SOPT...   | queue N config QOPT... | pipe N config POPT...
//!           | (sched | queue | pipe) (N delete | delete N... | flush)
//!           | add [NUM] ACTION BODY   | table N add PREFIX [VALUE] | table N create
//!           | default ACTION
//! SOPT     := type ALG | pipe P | mask MASK... | params K=V[,K=V]... | max-instances N
//!           | buckets N | idle DURATION | bw BW (pspat: a sched with no pipe N)
//! QOPT     := (pipe | sched) P | weight W | queue SIZE | mask MASK... | lmax BYTES
//!           | plr P | red|gred W/MIN/MAX/P | droptail | noerror
//!           | max-queues N | buckets N | idle DURATION
//! POPT     := bw BW | delay MS | burst BYTES | queue SIZE | plr P | red|gred W/MIN/MAX/P
//!           | droptail | noerror | mask MASK... | type ALG | max-instances N | buckets N
//!           | idle DURATION
//! MASK     := all | src-ip M | dst-ip M | src-ip6 M6 | dst-ip6 M6 | src-port M
//!           | dst-port M | proto M            (M: 0xhex, decimal, or a dotted IPv4 mask;
//!                                             M6: /LEN or an IPv6 mask)
//! ACTION   := queue (N | tablearg) | pipe (N | tablearg)
//!           | allow | accept | pass | permit | deny | drop | reject
//! BODY     := [PROTO] [from ADDR [PORTS] to ADDR [PORTS]] ROPT...
//! ROPT     := in | out | src-ip ADDR | dst-ip ADDR | src-port PORTS | dst-port PORTS
//!           | proto PROTO
//! ADDR     := any | table(N) | { A [, A]... } | A [, A]...   (A: host or prefix, v4 or v6)
//! PORTS    := P [, P]...                                    (P: port or lo-hi)
//! ```
//!
//! Choices the brief or ipfw(8) left open:
//! - a rule without a number gets the highest number so far plus 100 (the first one 100),
//!   or that highest number itself near the top: ipfw's autoincrement with its default
//!   step;
//! - `buckets` (the size of dummynet's hash table of dynamic queues) is accepted on
//!   schedulers, flowsets and pipes and changes nothing: it never bounds or drops;
//! - a leading `-q` or `-f` (ipfw's quiet and force flags) is skipped;
//! - `default ACTION` is our extension: what happens to a packet no rule matched
//!   (`deny` when absent, as ipfw's default rule 65535);
//! - `reject` is an alias of `deny` (ipfw's `reject` also sends an ICMP error, which a
//!   shaper has no business doing);
//! - the object commands (`pipe`, `queue`, `sched`) and what each option means where are
//!   `objects.rs`'s, which follows dummynet's object model; AQM words (`codel`, `pie`,
//!   `fq_codel`, ...) and the rare spellings pspat does not read (`profile`, `plr A,B,C,D`,
//!   `bw DEVICE`) are refused naming the feature; `me` addresses are refused;
//! - `ip` and `all` as the protocol mean any protocol; a condition given twice (two
//!   protocols, `from 1.2.3.4` and `src-ip 5.6.7.8`) is refused rather than intersected.
//!
//! Every syntax error is a [`ConfigError::Syntax`] with the line, the column and the token,
//! and says what was expected there. Semantic checks (references, duplicates, canonical
//! prefixes) are [`crate::resolve`]'s, shared with the TOML front end.

use std::net::IpAddr;

use super::lexer::{lex_line, Kind, Token};
use super::objects;
use crate::error::{cut, unit_error, ConfigError};
use crate::model::*;
use crate::resolve::{next_rule_number, Draft, Loc, Located, TableCmd, MAX_ID};

/// Every keyword the parser accepts (commands, options, mask fields, actions and their
/// aliases, rule options). The examples in `examples/config/` must use each of them (a
/// test of the `pspat` crate checks it), and a unit test below checks that every word the
/// parser matches on is listed here or in [`REFUSED`].
pub const KEYWORDS: &[&str] = &[
    // commands
    "ipfw",
    "dnctl",
    "sched",
    "queue",
    "pipe",
    "add",
    "table",
    "default",
    "config",
    "create",
    "delete",
    "flush",
    // scheduler, flowset and pipe options
    "type",
    "bw",
    "bandwidth",
    "mask",
    "sched_mask",
    "flow_mask",
    "params",
    "max-instances",
    "idle",
    "weight",
    "max-len",
    "lmax",
    "maxlen",
    "max-queues",
    "buckets",
    "delay",
    "burst",
    "plr",
    "red",
    "gred",
    "droptail",
    "noerror",
    // mask fields (also rule options for addresses, ports and protocol)
    "all",
    "src-ip",
    "dst-ip",
    "src-ip6",
    "dst-ip6",
    "src-ipv6",
    "dst-ipv6",
    "src-port",
    "dst-port",
    "proto",
    // actions
    "tablearg",
    "allow",
    "accept",
    "pass",
    "permit",
    "deny",
    "drop",
    "reject",
    // rule body
    "ip",
    "from",
    "to",
    "any",
    "in",
    "out",
];

/// Words the parser recognises only to refuse them with a specific message.
pub const REFUSED: &[&str] = &[
    "via", "recv", "xmit", "me", "me6", "not", "flow-id", "profile", "pri", "priority",
];

/// Protocol names ipfw knows that pspat understands, with their numbers.
pub const PROTOCOLS: &[(&str, u8)] = &[
    ("icmp", 1),
    ("igmp", 2),
    ("tcp", 6),
    ("udp", 17),
    ("ipv6", 41),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmp6", 58),
    ("ospf", 89),
    ("sctp", 132),
];

/// Parses ipfw-syntax `text` into a draft (not yet resolved).
pub fn parse(text: &str, origin: &str) -> Result<Draft, ConfigError> {
    let mut draft = Draft::new(origin);
    let mut last_rule = 0u32;
    for (i, line) in text.lines().enumerate() {
        let line_no = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let (toks, eol) = lex_line(line);
        let mut c = Cursor {
            toks: &toks,
            pos: 0,
            eol,
            line: line_no,
            origin,
        };
        if c.peek().is_none() {
            continue;
        }
        if c.peek_is("ipfw") || c.peek_is("dnctl") {
            c.pos += 1;
        }
        // ipfw's global flags that change nothing here: -q (quiet), -f (no confirmation).
        while c.peek_is("-q") || c.peek_is("-f") {
            c.pos += 1;
        }
        command(&mut c, &mut draft, &mut last_rule)?;
    }
    Ok(draft)
}

pub(super) struct Cursor<'t, 'a> {
    toks: &'t [Token<'a>],
    pub(super) pos: usize,
    eol: u32,
    line: u32,
    origin: &'t str,
}

pub(super) type R<T> = Result<T, ConfigError>;

impl<'a> Cursor<'_, 'a> {
    pub(super) fn peek(&self) -> Option<Token<'a>> {
        self.toks.get(self.pos).copied()
    }

    pub(super) fn peek_is(&self, word: &str) -> bool {
        self.peek()
            .is_some_and(|t| t.kind == Kind::Word && t.text.eq_ignore_ascii_case(word))
    }

    pub(super) fn peek_kind(&self, kind: Kind) -> bool {
        self.peek().is_some_and(|t| t.kind == kind)
    }

    fn loc(&self) -> Loc {
        Loc {
            line: self.line,
            column: self.peek().map_or(self.eol, |t| t.column),
        }
    }

    /// An error at the current token (or at the end of the line).
    pub(super) fn err(&self, message: impl Into<String>) -> ConfigError {
        match self.peek() {
            Some(t) => self.err_at(t, message),
            None => ConfigError::syntax(
                self.origin,
                self.line,
                self.eol,
                "",
                &format!("{} (found the end of the line)", message.into()),
            ),
        }
    }

    pub(super) fn err_at(&self, t: Token<'_>, message: impl Into<String>) -> ConfigError {
        ConfigError::syntax(self.origin, self.line, t.column, t.text, &message.into())
    }

    /// The next token, which must be a word; `what` says what was expected.
    pub(super) fn word(&mut self, what: &str) -> R<Token<'a>> {
        match self.peek() {
            Some(t) if t.kind == Kind::Word => {
                self.pos += 1;
                Ok(t)
            }
            _ => Err(self.err(format!("expected {what}"))),
        }
    }

    pub(super) fn keyword(&mut self, kw: &str) -> R<()> {
        if self.peek_is(kw) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(format!("expected `{kw}`")))
        }
    }

    /// A number in `range`, `what` naming it.
    pub(super) fn number(&mut self, what: &str, lo: u64, hi: u64) -> R<u64> {
        let t = self.word(what)?;
        let v = parse_uint(t.text, u128::from(u64::MAX))
            .ok()
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| self.err_at(t, format!("expected {what}, a number")))?;
        if v < lo || v > hi {
            return Err(self.err_at(t, format!("{what} must be {lo}..={hi}")));
        }
        Ok(v)
    }

    pub(super) fn id(&mut self, what: &str) -> R<u32> {
        Ok(self.number(what, 1, MAX_ID.into())? as u32)
    }

    /// A word converted by `f`, whose error becomes a syntax error at the word.
    pub(super) fn with<T, E: ToString>(
        &mut self,
        what: &str,
        f: impl FnOnce(&str) -> Result<T, E>,
    ) -> R<T> {
        let t = self.word(what)?;
        f(t.text).map_err(|m| self.err_at(t, m.to_string()))
    }

    /// A quantity read by pspat-units (`what`: `a bandwidth`), whose error becomes a syntax
    /// error at the word.
    pub(super) fn unit<T, E: std::fmt::Display>(
        &mut self,
        what: &str,
        f: fn(&str) -> Result<T, E>,
    ) -> R<T> {
        self.with(what, |s| f(s).map_err(|e| unit_error(s, what, e)))
    }

    pub(super) fn end(&self) -> R<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.err("expected the end of the command")),
        }
    }
}

fn command(c: &mut Cursor<'_, '_>, d: &mut Draft, last_rule: &mut u32) -> R<()> {
    let at = c.loc();
    let t = c.word("a command: sched, queue, pipe, add, table or default")?;
    match t.text.to_ascii_lowercase().as_str() {
        kind @ ("sched" | "queue" | "pipe") => objects::command(c, d, kind, at)?,
        "add" => {
            let item = rule(c, *last_rule)?;
            *last_rule = (*last_rule).max(item.number);
            d.rules.push(Located { item, at: Some(at) });
        }
        "table" => {
            let table = c.id("a table number")?;
            let op = c.word("`add` or `create`")?;
            let entry = if op.text.eq_ignore_ascii_case("create") {
                None
            } else if op.text.eq_ignore_ascii_case("add") {
                let p = c.with("a prefix (1.2.3.0/24, 2001:db8::/32) or host", parse_prefix)?;
                let v = if c.peek().is_some() {
                    c.number("a table value", 0, u32::MAX.into())? as u32
                } else {
                    0
                };
                Some((p, v))
            } else {
                return Err(c.err_at(op, "expected `add` or `create`"));
            };
            c.end()?;
            d.tables.push(Located {
                item: TableCmd { table, entry },
                at: Some(at),
            });
        }
        "default" => {
            let a = action(c)?;
            c.end()?;
            d.default_action.push(Located {
                item: a,
                at: Some(at),
            });
        }
        _ => {
            return Err(c.err_at(
                t,
                "expected a command: sched, queue, pipe, add, table or default",
            ))
        }
    }
    Ok(())
}

/// Remembers which options a command has seen, to refuse repeats.
#[derive(Default)]
pub(super) struct Seen(pub(super) Vec<String>);

impl Seen {
    pub(super) fn first(&mut self, c: &Cursor<'_, '_>, t: Token<'_>) -> R<()> {
        let k = t.text.to_ascii_lowercase();
        if self.0.contains(&k) {
            return Err(c.err_at(t, format!("`{}` given twice", cut(&k))));
        }
        self.0.push(k);
        Ok(())
    }
}

fn action(c: &mut Cursor<'_, '_>) -> R<Action> {
    const EXPECTED: &str = "expected an action: queue N, pipe N, allow or deny";
    let t = c.word(EXPECTED)?;
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
        "allow" | "accept" | "pass" | "permit" => Action::Allow,
        "deny" | "drop" | "reject" => Action::Deny,
        _ => return Err(c.err_at(t, EXPECTED)),
    })
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
        "unknown protocol '{}' (expected ip, all, a number, or one of: {})",
        cut(text),
        PROTOCOLS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
    ))
}

/// A mask or other unsigned number in hex (`0xff`) or decimal, up to `max`.
pub(super) fn parse_uint(s: &str, max: u128) -> Result<u128, String> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u128::from_str_radix(h, 16)
    } else {
        s.parse::<u128>()
    }
    .map_err(|_| format!("'{}' is not a number (decimal or 0x hex)", cut(s)))?;
    if v > max {
        return Err(format!("{} is larger than {max:#x}", cut(s)));
    }
    Ok(v)
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

/// `table(N)` -> N.
fn table_ref(text: &str) -> Option<Result<u32, String>> {
    let inner = text
        .strip_prefix("table(")
        .or_else(|| text.strip_prefix("TABLE("))?
        .strip_suffix(')')?;
    Some(
        inner
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_ID).contains(n))
            .ok_or_else(|| {
                format!(
                    "'{}': expected table(N) with N 1..={MAX_ID} (table values are not matched)",
                    cut(text)
                )
            }),
    )
}

fn addr(c: &mut Cursor<'_, '_>) -> R<AddrMatch> {
    const EXPECTED: &str = "an address: any, a host, a prefix, a { list } or table(N)";
    if c.peek_kind(Kind::LBrace) {
        c.pos += 1;
        let mut ps = Vec::new();
        loop {
            ps.push(c.with(EXPECTED, parse_prefix)?);
            if c.peek_kind(Kind::Comma) {
                c.pos += 1;
            } else if c.peek_kind(Kind::RBrace) {
                c.pos += 1;
                return Ok(AddrMatch::Prefixes(ps));
            } else {
                return Err(c.err("expected `,` or `}` in the address list"));
            }
        }
    }
    let t = c.word(EXPECTED)?;
    let l = t.text.to_ascii_lowercase();
    if l == "any" {
        return Ok(AddrMatch::Any);
    }
    if l == "me" || l == "me6" {
        return Err(c.err_at(
            t,
            "`me` (the host's own addresses) is not supported: a shaper matches explicit \
             addresses",
        ));
    }
    if l == "not" {
        return Err(c.err_at(t, "`not` is not supported in addresses"));
    }
    if let Some(r) = table_ref(&l) {
        return r.map(AddrMatch::Table).map_err(|m| c.err_at(t, m));
    }
    let mut ps =
        vec![parse_prefix(t.text).map_err(|m| c.err_at(t, format!("expected {EXPECTED}: {m}")))?];
    while c.peek_kind(Kind::Comma) {
        c.pos += 1;
        ps.push(c.with(EXPECTED, parse_prefix)?);
    }
    Ok(AddrMatch::Prefixes(ps))
}

/// One port or inclusive range (`80`, `1000-2000`); an empty range (`lo > hi`) is refused.
/// A rule's port list ([`ports_str`]) is a comma-separated list of these.
pub fn port_range(text: &str) -> Result<PortRange, String> {
    let p = |s: &str| {
        s.parse::<u16>()
            .map_err(|_| format!("'{}' is not a port (0..=65535) or range lo-hi", cut(text)))
    };
    let (lo, hi) = match text.split_once('-') {
        Some((a, b)) => (p(a)?, p(b)?),
        None => {
            let v = p(text)?;
            (v, v)
        }
    };
    if lo > hi {
        return Err(format!("port range '{}' is empty (lo > hi)", cut(text)));
    }
    Ok(PortRange { lo, hi })
}

fn looks_like_ports(t: Option<Token<'_>>) -> bool {
    t.is_some_and(|t| {
        t.kind == Kind::Word
            && t.text.starts_with(|ch: char| ch.is_ascii_digit())
            && !t.text.contains(['.', ':', '/'])
    })
}

fn ports(c: &mut Cursor<'_, '_>) -> R<Vec<PortRange>> {
    let mut out = vec![c.with("a port or range (80, 1000-2000)", port_range)?];
    while c.peek_kind(Kind::Comma) {
        c.pos += 1;
        out.push(c.with("a port or range (80, 1000-2000)", port_range)?);
    }
    Ok(out)
}

/// Sets a rule condition once; a second setting is an error at `t`.
fn set_once<T>(c: &Cursor<'_, '_>, t: Token<'_>, slot: &mut Option<T>, v: T, what: &str) -> R<()> {
    if slot.is_some() {
        return Err(c.err_at(t, format!("the {what} is given twice in this rule")));
    }
    *slot = Some(v);
    Ok(())
}

fn rule(c: &mut Cursor<'_, '_>, highest: u32) -> R<Rule> {
    let number = if c
        .peek()
        .is_some_and(|t| t.text.starts_with(|ch: char| ch.is_ascii_digit()))
    {
        c.id("a rule number")?
    } else {
        next_rule_number(highest)
    };
    let action = action(c)?;

    let mut proto: Option<Option<u8>> = None;
    let (mut src, mut dst) = (None, None);
    let (mut sp, mut dp) = (None, None);
    let mut dir = None;

    // Classic body: [PROTO] from ADDR [PORTS] to ADDR [PORTS]
    if let Some(t) = c.peek() {
        let next_is_from = c
            .toks
            .get(c.pos + 1)
            .is_some_and(|n| n.text.eq_ignore_ascii_case("from"));
        if t.kind == Kind::Word && next_is_from && !c.peek_is("from") {
            c.pos += 1;
            // `ip` / `all` (any protocol) leaves the condition unset
            if let Some(p) = protocol(t.text).map_err(|m| c.err_at(t, m))? {
                proto = Some(Some(p));
            }
        }
    }
    if c.peek_is("from") {
        c.pos += 1;
        let a = addr(c)?;
        if a != AddrMatch::Any {
            src = Some(a);
        }
        if looks_like_ports(c.peek()) {
            sp = Some(ports(c)?);
        }
        c.keyword("to")?;
        let a = addr(c)?;
        if a != AddrMatch::Any {
            dst = Some(a);
        }
        if looks_like_ports(c.peek()) {
            dp = Some(ports(c)?);
        }
    }
    // Options.
    while let Some(t) = c.peek() {
        if t.kind != Kind::Word {
            return Err(c.err("expected a rule option"));
        }
        c.pos += 1;
        match t.text.to_ascii_lowercase().as_str() {
            "in" => set_once(c, t, &mut dir, Direction::In, "direction")?,
            "out" => set_once(c, t, &mut dir, Direction::Out, "direction")?,
            "src-ip" => {
                let a = addr(c)?;
                set_once(c, t, &mut src, a, "source address")?
            }
            "dst-ip" => {
                let a = addr(c)?;
                set_once(c, t, &mut dst, a, "destination address")?
            }
            "src-port" => {
                let p = ports(c)?;
                set_once(c, t, &mut sp, p, "source port")?
            }
            "dst-port" => {
                let p = ports(c)?;
                set_once(c, t, &mut dp, p, "destination port")?
            }
            "proto" => {
                let p = c.with("a protocol", protocol)?;
                set_once(c, t, &mut proto, p, "protocol")?
            }
            "via" | "recv" | "xmit" => {
                return Err(c.err_at(t, "interfaces are not matched: pspat shapes one link"))
            }
            "from" => return Err(c.err_at(t, "`from ... to ...` must come before the options")),
            _ => {
                return Err(c.err_at(
                    t,
                    "expected a rule option: in, out, src-ip, dst-ip, src-port, dst-port or \
                     proto (or `from ADDR to ADDR`)",
                ))
            }
        }
    }
    Ok(Rule {
        number,
        action,
        matcher: Match {
            direction: dir,
            proto: proto.flatten(),
            src: src.unwrap_or_default(),
            dst: dst.unwrap_or_default(),
            src_ports: sp.unwrap_or_default(),
            dst_ports: dp.unwrap_or_default(),
        },
    })
}

/// Runs `f` over the tokens of `text` (one phrase of ipfw syntax, as a TOML value holds),
/// requiring it to consume them all; a syntax error becomes its message, which names the
/// phrase and the token unless the phrase is that one token (the message then stands on
/// its own, and the caller points at the value: saying the text again would only make a
/// long one three times as long).
fn phrase<T>(
    text: &str,
    what: &str,
    f: impl FnOnce(&mut Cursor<'_, '_>) -> R<T>,
) -> Result<T, String> {
    let (toks, eol) = lex_line(text);
    let mut c = Cursor {
        toks: &toks,
        pos: 0,
        eol,
        line: 1,
        origin: "",
    };
    let v = f(&mut c).and_then(|v| c.end().map(|()| v));
    v.map_err(|e| match e {
        ConfigError::Syntax { token, message, .. } if token.is_empty() => {
            format!("'{}' is not {what}: {message}", cut(text))
        }
        ConfigError::Syntax { message, .. } if lex_line(text).0.len() == 1 => message,
        ConfigError::Syntax { token, message, .. } => {
            format!("'{}' is not {what}: {message} (at `{token}`)", cut(text))
        }
        other => other.to_string(),
    })
}

/// An action as a phrase (`queue 1`, `pipe tablearg`, `deny`).
pub fn action_str(text: &str) -> Result<Action, String> {
    phrase(
        text,
        "an action (queue N, pipe N, queue tablearg, allow, deny)",
        action,
    )
}

/// An address condition as a phrase (`any`, `1.2.3.0/24`, `table(1)`, `{ a, b }`).
pub fn addr_str(text: &str) -> Result<AddrMatch, String> {
    phrase(text, "an address", addr)
}

/// Ports as a phrase (`80`, `1000-2000`, `80,443`).
pub fn ports_str(text: &str) -> Result<Vec<PortRange>, String> {
    phrase(text, "a port list", ports)
}

/// A mask as a phrase (`src-ip 0xff dst-port 0xffff`, `all`).
pub fn mask_str(text: &str) -> Result<FlowMask, String> {
    phrase(text, "a mask", objects::mask)
}

/// A protocol (`udp`, `17`; `ip`/`all` = any).
pub fn protocol_str(text: &str) -> Result<Option<u8>, String> {
    protocol(text)
}

/// A queue size (`50` slots, `100KBytes`).
pub fn queue_limit_str(text: &str) -> Result<QueueLimit, String> {
    phrase(text, "a queue size", objects::queue_size)
}

/// A pipe's delay (`50`, `50ms`: whole milliseconds), in ns.
pub fn delay_str(text: &str) -> Result<u64, String> {
    phrase(text, "a delay", objects::delay)
}

/// A loss probability (`0.01`).
pub fn plr_str(text: &str) -> Result<Probability, String> {
    phrase(text, "a loss probability", objects::plr)
}

/// RED or GRED parameters (`0.002/30/80/0.1`).
pub fn red_str(text: &str, gentle: bool) -> Result<Red, String> {
    phrase(text, "RED parameters", |c| objects::red(c, gentle))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string literal a `match` arm of this file tests (`"weight" =>`,
    /// `"allow" | "accept" =>`) is a listed keyword or refused word, so that KEYWORDS (which
    /// the examples must cover) cannot silently miss an option added later.
    #[test]
    fn keywords_list_every_word_the_parser_matches() {
        let parser = include_str!("parser.rs");
        let src = [
            &parser[..parser.find("#[cfg(test)]").unwrap()],
            include_str!("objects.rs"),
        ]
        .concat();
        let src = src.as_str();
        let mut found = Vec::new();
        for line in src.lines() {
            let Some((arm, _)) = line.split_once("=>") else {
                continue;
            };
            let arm = arm.trim();
            if !arm.starts_with('"') {
                continue;
            }
            for lit in arm.split('|') {
                let w = lit.trim().trim_matches('"');
                found.push(w.to_owned());
            }
        }
        assert!(found.len() > 30, "scan found only {found:?}");
        for w in &found {
            assert!(
                KEYWORDS.contains(&w.as_str()) || REFUSED.contains(&w.as_str()),
                "the parser matches `{w}`, which KEYWORDS does not list"
            );
        }
        // and the other way round: each keyword is read somewhere in the parser
        for k in KEYWORDS.iter().chain(REFUSED) {
            assert!(
                src.contains(&format!("\"{k}\"")),
                "`{k}` is listed but never read"
            );
        }
    }

    #[test]
    fn prefixes_and_ports() {
        let p = parse_prefix("1.2.3.0/24").unwrap();
        assert_eq!((p.addr.to_string(), p.len), ("1.2.3.0".into(), 24));
        assert_eq!(parse_prefix("::1").unwrap().len, 128);
        assert!(parse_prefix("1.2.3.0/33").unwrap_err().contains("0..=32"));
        assert!(parse_prefix("1.2.3").is_err());
        assert_eq!(
            port_range("1000-2000"),
            Ok(PortRange { lo: 1000, hi: 2000 })
        );
        assert!(port_range("2000-1000").unwrap_err().contains("empty"));
        assert!(port_range("70000").is_err());
        assert_eq!(mask_str("src-ip6 /64").unwrap().src_ip6, u128::MAX << 64);
        assert_eq!(mask_str("dst-ip6 /0").unwrap().dst_ip6, 0);
        assert_eq!(
            mask_str("src-ip 255.255.255.0").unwrap().src_ip,
            0xffff_ff00
        );
    }
}
