//! The ipfw/dnctl command parser: one command per line into a [`Draft`].
//!
//! Grammar (keywords are case-insensitive; `[]` optional, `|` alternatives, `...` repeat):
//!
//! ```text
//! line     := [ipfw | dnctl] command | (empty or comment)
//! command  := sched N config SOPT...   | queue N config QOPT... | pipe N config POPT...
//!           | add ... | delete ... | flush | table ...   (the rule stream: `rule.rs`)
//!           | default ACTION
//! SOPT     := type ALG | bw BW | mask MASK... | params K=V[,K=V]... | max-instances N
//!           | idle DURATION
//! QOPT     := sched N | weight W | queue SIZE | mask MASK... | max-len BYTES
//!           | max-queues N | buckets N | idle DURATION
//! POPT     := bw BW | queue SIZE | mask MASK... | max-instances N | idle DURATION
//! MASK     := all | src-ip M | dst-ip M | src-ip6 M6 | dst-ip6 M6 | src-port M
//!           | dst-port M | proto M            (M: 0xhex, decimal, or a dotted IPv4 mask;
//!                                             M6: /LEN or an IPv6 mask)
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
//! - dummynet emulation options (`delay`, `plr`, `red`, ...) are refused with an error
//!   naming them, never ignored; so is the old `queue N config pipe P`;
//! - the rule language's own choices are in `rule.rs`'s header.
//!
//! Every syntax error is a [`ConfigError::Syntax`] with the line, the column and the token,
//! and says what was expected there. Semantic checks (references, duplicates, canonical
//! prefixes) are [`crate::resolve`]'s, shared with the TOML front end.

use std::net::{Ipv4Addr, Ipv6Addr};

use pspat_sched::{MAX_PACKET_LEN, MAX_WEIGHT};

use super::lexer::{lex_line, Kind, Token};
pub use super::rule::{
    action_str, addr_str, neg_addr_str, neg_ports_str, options_str, parse_prefix, port_range,
    ports_str, prob_str, protocol_str, PROTOCOLS,
};
use super::{rule, stream};
use crate::error::{cut, unit_error, ConfigError};
use crate::model::*;
use crate::resolve::{Draft, Loc, Located, MAX_ID};
use pspat_units as units;

/// dummynet options pspat refuses, with why.
const NOT_EMULATED: &[&str] = &[
    "delay", "plr", "pls", "red", "gred", "burst", "profile", "noerror", "link",
];

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
    // scheduler, flowset and pipe options
    "type",
    "bw",
    "bandwidth",
    "mask",
    "params",
    "max-instances",
    "idle",
    "weight",
    "max-len",
    "max-queues",
    "buckets",
    // mask fields (also rule options for addresses, ports and protocol)
    "all",
    "src-ip",
    "dst-ip",
    "src-ip6",
    "dst-ip6",
    "src-port",
    "dst-port",
    "proto",
    // rule-stream commands (rule words are `rule::RULE_KEYWORDS`)
    "flush",
    "delete",
    "destroy",
];

/// Words the parser recognises only to refuse them with a specific message (the rule
/// language's are `rule::RULE_REFUSED`).
pub const REFUSED: &[&str] = &[];

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

/// The tokens of one line and the position in them.
pub(super) struct Cursor<'t, 'a> {
    pub(super) toks: &'t [Token<'a>],
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

    pub(super) fn loc(&self) -> Loc {
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
    const EXPECTED: &str =
        "expected a command: sched, queue, pipe, add, delete, flush, table or default";
    let t = c.word(&EXPECTED["expected ".len()..])?;
    match t.text.to_ascii_lowercase().as_str() {
        "sched" => {
            let id = c.id("a scheduler number")?;
            c.keyword("config")?;
            let item = sched_config(c, id)?;
            d.schedulers.push(Located { item, at: Some(at) });
        }
        "queue" => {
            let id = c.id("a queue (flowset) number")?;
            c.keyword("config")?;
            let item = queue_config(c, id)?;
            d.flowsets.push(Located { item, at: Some(at) });
        }
        "pipe" => {
            let id = c.id("a pipe number")?;
            c.keyword("config")?;
            let item = pipe_config(c, id)?;
            d.pipes.push(Located { item, at: Some(at) });
        }
        "add" => stream::add(c, d, at, last_rule)?,
        "flush" => stream::flush(c, d, last_rule)?,
        "delete" => stream::delete(c, d, last_rule)?,
        "table" => stream::table(c, d, at)?,
        "default" => {
            let a = rule::action(c)?;
            c.end()?;
            d.default_action.push(Located {
                item: a,
                at: Some(at),
            });
        }
        _ => return Err(c.err_at(t, EXPECTED)),
    }
    Ok(())
}

/// Remembers which options a command has seen, to refuse repeats.
#[derive(Default)]
struct Seen(Vec<String>);

impl Seen {
    fn first(&mut self, c: &Cursor<'_, '_>, t: Token<'_>) -> R<()> {
        let k = t.text.to_ascii_lowercase();
        if self.0.contains(&k) {
            return Err(c.err_at(t, format!("`{}` given twice", cut(&k))));
        }
        self.0.push(k);
        Ok(())
    }
}

/// The option word at the cursor, if any; refuses dummynet-only options by name.
fn option<'a>(c: &mut Cursor<'_, 'a>, seen: &mut Seen) -> R<Option<(Token<'a>, String)>> {
    let Some(t) = c.peek() else { return Ok(None) };
    if t.kind != Kind::Word {
        return Err(c.err("expected an option"));
    }
    let k = t.text.to_ascii_lowercase();
    if NOT_EMULATED.contains(&k.as_str()) {
        return Err(c.err_at(
            t,
            format!(
                "`{k}` is a dummynet emulation option pspat does not implement (pspat \
                 schedules and shapes bandwidth; it emulates no delay, loss or queue \
                 management)"
            ),
        ));
    }
    seen.first(c, t)?;
    c.pos += 1;
    Ok(Some((t, k)))
}

fn sched_config(c: &mut Cursor<'_, '_>, id: u32) -> R<SchedSpec> {
    let mut s = SchedSpec {
        id,
        algorithm: String::new(),
        params: Vec::new(),
        bandwidth_bps: 0,
        mask: FlowMask::default(),
        max_instances: DEFAULT_MAX_INSTANCES,
        idle_ns: DEFAULT_IDLE_NS,
    };
    let mut seen = Seen::default();
    while let Some((t, k)) = option(c, &mut seen)? {
        match k.as_str() {
            "type" => {
                s.algorithm = c
                    .word("an algorithm name (fifo, drr, wf2q+, qfq, ...)")?
                    .text
                    .into()
            }
            "bw" | "bandwidth" => {
                s.bandwidth_bps = c.unit("a bandwidth", units::parse_bandwidth)?
            }
            "mask" => s.mask = mask(c)?,
            "params" => s.params = params(c)?,
            "max-instances" => {
                s.max_instances = c.number("a number of instances", 1, u32::MAX.into())? as u32
            }
            "buckets" => buckets(c)?,
            "idle" => s.idle_ns = c.unit("a duration", units::parse_duration_ns)?,
            _ => {
                return Err(c.err_at(
                    t,
                    "expected a sched option: type, bw, mask, params, max-instances, buckets or \
                     idle",
                ))
            }
        }
    }
    if s.algorithm.is_empty() {
        return Err(c.err(format!("sched {id}: expected `type ALGORITHM`")));
    }
    Ok(s)
}

/// `queue SIZE`: slots without a unit, bytes with one.
fn queue_limit(text: &str) -> Result<QueueLimit, String> {
    let (v, unit) = units::parse_size(text).map_err(|e| unit_error(text, "a queue size", e))?;
    if unit {
        Ok(QueueLimit::Bytes(v))
    } else {
        u32::try_from(v)
            .map(QueueLimit::Packets)
            .map_err(|_| format!("{v} slots is too many"))
    }
}

fn queue_config(c: &mut Cursor<'_, '_>, id: u32) -> R<FlowsetSpec> {
    let mut q = FlowsetSpec {
        id,
        sched: 0,
        weight: 1,
        max_len: pspat_sched::flow::DEFAULT_MAX_LEN,
        limit: QueueLimit::default(),
        mask: FlowMask::default(),
        max_queues: DEFAULT_MAX_QUEUES,
        idle_ns: DEFAULT_IDLE_NS,
    };
    let mut seen = Seen::default();
    while let Some((t, k)) = option(c, &mut seen)? {
        match k.as_str() {
            "sched" => q.sched = c.id("a scheduler number")?,
            "pipe" => {
                return Err(c.err_at(
                    t,
                    "`queue N config pipe P` is dummynet's old syntax: attach the queue to a \
                     scheduler with `sched S` (a pipe is a FIFO link of its own)",
                ))
            }
            "weight" => q.weight = c.number("a weight", 1, MAX_WEIGHT.into())? as u32,
            "queue" => {
                q.limit = c.with("a queue size (slots, or bytes with a unit)", queue_limit)?
            }
            "mask" => q.mask = mask(c)?,
            "max-len" => {
                let t = c.word("a packet length in bytes")?;
                let v = units::parse_bytes(t.text)
                    .map_err(|e| c.err_at(t, unit_error(t.text, "a packet length", e)))?;
                if v == 0 || v > u64::from(MAX_PACKET_LEN) {
                    return Err(c.err_at(t, format!("max-len must be 1..={MAX_PACKET_LEN} bytes")));
                }
                q.max_len = v as u32;
            }
            "max-queues" => {
                q.max_queues = c.number("a number of queues", 1, u32::MAX.into())? as u32
            }
            "buckets" => buckets(c)?,
            "idle" => q.idle_ns = c.unit("a duration", units::parse_duration_ns)?,
            _ => {
                return Err(c.err_at(
                    t,
                    "expected a queue option: sched, weight, queue, mask, max-len, max-queues, \
                     buckets or idle",
                ))
            }
        }
    }
    if q.sched == 0 {
        return Err(c.err(format!(
            "queue {id}: expected `sched N` (the scheduler it attaches to)"
        )));
    }
    Ok(q)
}

fn pipe_config(c: &mut Cursor<'_, '_>, id: u32) -> R<PipeSpec> {
    let mut p = PipeSpec {
        id,
        bandwidth_bps: 0,
        limit: QueueLimit::default(),
        mask: FlowMask::default(),
        max_instances: DEFAULT_MAX_INSTANCES,
        idle_ns: DEFAULT_IDLE_NS,
    };
    let mut seen = Seen::default();
    while let Some((t, k)) = option(c, &mut seen)? {
        match k.as_str() {
            "bw" | "bandwidth" => {
                p.bandwidth_bps = c.unit("a bandwidth", units::parse_bandwidth)?
            }
            "queue" => {
                p.limit = c.with("a queue size (slots, or bytes with a unit)", queue_limit)?
            }
            "mask" => p.mask = mask(c)?,
            "max-instances" => {
                p.max_instances = c.number("a number of instances", 1, u32::MAX.into())? as u32
            }
            "buckets" => buckets(c)?,
            "idle" => p.idle_ns = c.unit("a duration", units::parse_duration_ns)?,
            _ => {
                return Err(c.err_at(
                    t,
                    "expected a pipe option: bw, queue, mask, max-instances, buckets or idle",
                ))
            }
        }
    }
    Ok(p)
}

/// `buckets N`: the size of dummynet's hash table of dynamic queues or instances. It bounds
/// nothing (pspat's tables grow as they need, up to `max-queues` / `max-instances`), so the
/// number is checked and otherwise changes nothing.
fn buckets(c: &mut Cursor<'_, '_>) -> R<()> {
    c.number("a number of hash buckets", 1, u32::MAX.into())?;
    Ok(())
}

/// An IPv4 mask: a number, a dotted quad, or `/32` and `/0` (all bits, none). ipfw reads
/// an IPv4 `/N` as the N low bits (`/24` is 0x00ffffff, not a /24 prefix), where a reader
/// expects a prefix: the two agree only on `/0` and `/32`, so any other `/N` is refused
/// with the number to write instead.
fn mask4(text: &str) -> Result<u32, String> {
    if let Some(len) = text.strip_prefix('/') {
        return match len.parse::<u32>() {
            Ok(0) => Ok(0),
            Ok(32) => Ok(u32::MAX),
            Ok(n @ 1..=31) => Err(format!(
                "'{}': ipfw reads an IPv4 mask /{n} as its {n} low bits ({:#010x}), not as a \
                 prefix ({:#010x}); write the mask you mean as a number",
                cut(text),
                (1u32 << n) - 1,
                u32::MAX << (32 - n)
            )),
            _ => Err(format!("'{}' is not /0../32", cut(text))),
        };
    }
    if text.contains('.') {
        return text
            .parse::<Ipv4Addr>()
            .map(u32::from)
            .map_err(|_| format!("'{}' is not an IPv4 mask", cut(text)));
    }
    parse_uint(text, u32::MAX.into()).map(|v| v as u32)
}

/// An IPv6 mask: `/LEN` or an address.
fn mask6(text: &str) -> Result<u128, String> {
    if let Some(len) = text.strip_prefix('/') {
        let len: u32 = len
            .parse()
            .ok()
            .filter(|l| *l <= 128)
            .ok_or_else(|| format!("'{}' is not a prefix length /0../128", cut(text)))?;
        return Ok(u128::MAX.checked_shl(128 - len).unwrap_or(0));
    }
    text.parse::<Ipv6Addr>()
        .map(u128::from)
        .map_err(|_| format!("'{}' is not an IPv6 mask (/LEN or an address)", cut(text)))
}

/// The mask fields after `mask`.
fn mask(c: &mut Cursor<'_, '_>) -> R<FlowMask> {
    let mut m = FlowMask::default();
    let mut seen = Seen::default();
    let mut any = false;
    while let Some(t) = c.peek() {
        let k = t.text.to_ascii_lowercase();
        let field = matches!(
            k.as_str(),
            "all" | "src-ip" | "dst-ip" | "src-ip6" | "dst-ip6" | "src-port" | "dst-port" | "proto"
        );
        if t.kind != Kind::Word || !field {
            break;
        }
        seen.first(c, t)?;
        c.pos += 1;
        any = true;
        match k.as_str() {
            "all" => m = FlowMask::ALL,
            "src-ip" => m.src_ip = c.with("an IPv4 mask (0xff, 255.255.255.0)", mask4)?,
            "dst-ip" => m.dst_ip = c.with("an IPv4 mask (0xff, 255.255.255.0)", mask4)?,
            "src-ip6" => m.src_ip6 = c.with("an IPv6 mask (/64, ffff::)", mask6)?,
            "dst-ip6" => m.dst_ip6 = c.with("an IPv6 mask (/64, ffff::)", mask6)?,
            "src-port" => m.src_port = c.with("a port mask", |s| parse_uint(s, 0xffff))? as u16,
            "dst-port" => m.dst_port = c.with("a port mask", |s| parse_uint(s, 0xffff))? as u16,
            _ => m.proto = c.with("a protocol mask", |s| parse_uint(s, 0xff))? as u8,
        }
    }
    if !any {
        return Err(c.err(
            "expected a mask field: all, src-ip, dst-ip, src-ip6, dst-ip6, src-port, dst-port \
             or proto",
        ));
    }
    Ok(m)
}

/// `K=V[,K=V]...` after `params`.
fn params(c: &mut Cursor<'_, '_>) -> R<Vec<(String, String)>> {
    let mut out = Vec::new();
    loop {
        let t = c.word("a parameter key=value")?;
        match t.text.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => out.push((k.into(), v.into())),
            _ => return Err(c.err_at(t, "expected a parameter key=value (m=8, quantum=1500)")),
        }
        if !c.peek_kind(Kind::Comma) {
            return Ok(out);
        }
        c.pos += 1;
    }
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

/// Runs `f` over the tokens of `text` (one phrase of ipfw syntax, as a TOML value holds),
/// requiring it to consume them all; a syntax error becomes its message, which names the
/// phrase and the token unless the phrase is that one token (the message then stands on
/// its own, and the caller points at the value: saying the text again would only make a
/// long one three times as long).
pub(super) fn phrase<T>(
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

/// A mask as a phrase (`src-ip 0xff dst-port 0xffff`, `all`).
pub fn mask_str(text: &str) -> Result<FlowMask, String> {
    phrase(text, "a mask", mask)
}

/// A queue size (`50` slots, `100KBytes`).
pub fn queue_limit_str(text: &str) -> Result<QueueLimit, String> {
    queue_limit(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string literal a `match` arm of this file tests (`"weight" =>`,
    /// `"allow" | "accept" =>`) is a listed keyword or refused word, so that KEYWORDS (which
    /// the examples must cover) cannot silently miss an option added later.
    #[test]
    fn keywords_list_every_word_the_parser_matches() {
        let src = include_str!("parser.rs");
        let src = &src[..src.find("#[cfg(test)]").unwrap()];
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
        assert_eq!(mask6("/64"), Ok(u128::MAX << 64));
        assert_eq!(mask6("/0"), Ok(0));
        assert_eq!(mask4("255.255.255.0"), Ok(0xffff_ff00));
    }
}
