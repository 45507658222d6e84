//! The ipfw/dnctl command parser: one command per line into a [`Draft`].
//!
//! Grammar (keywords are case-insensitive; `[]` optional, `|` alternatives, `...` repeat):
//!
//! ```text
//! line     := [ipfw | dnctl] [-q | -f]... command | (empty or comment)
//! command  := sched N config SOPT...   | queue N config QOPT... | pipe N config POPT...
//!           | (sched | queue | pipe) (N delete | delete N... | flush)
//!           | add ... | delete ... | flush | table ...   (the rule stream: `stream.rs`)
//!           | default ACTION
//! SOPT     := type ALG | pipe P | mask MASK... | params K=V[,K=V]... | max-instances N
//!           | buckets N | idle DURATION | bw BW | FRAMING (pspat: a sched with no pipe N)
//! QOPT     := (pipe | sched) P | weight W | queue SIZE | mask MASK... | lmax BYTES
//!           | plr P | red|gred W/MIN/MAX/P | droptail | noerror
//!           | max-queues N | buckets N | idle DURATION
//! POPT     := bw BW | delay MS | burst BYTES | queue SIZE | plr P | red|gred W/MIN/MAX/P
//!           | droptail | noerror | mask MASK... | type ALG | max-instances N | buckets N
//!           | idle DURATION | FRAMING
//! FRAMING  := overhead N | mpu N | linklayer (ethernet | atm | ptm)
//!           | framing PRESET[,PRESET]...    (pspat's: what the link charges for a frame,
//!                                            tc's and CAKE's words; N: -64..=256 bytes
//!                                            for overhead, 0..=256 for mpu)
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
//! - the object commands (`pipe`, `queue`, `sched`) and what each option means where are
//!   `objects.rs`'s, which follows dummynet's object model; AQM words (`codel`, `pie`,
//!   `fq_codel`, ...) and the rare spellings pspat does not read (`profile`, `plr A,B,C,D`,
//!   `bw DEVICE`) are refused naming the feature;
//! - the rule language (`add`, `delete`, `flush`, `table`) and its choices are `rule.rs`'s
//!   and `stream.rs`'s.
//!
//! Every syntax error is a [`ConfigError::Syntax`] with the line, the column and the token,
//! and says what was expected there. Semantic checks (references, duplicates, canonical
//! prefixes) are [`crate::resolve`]'s, shared with the TOML front end.

use super::lexer::{lex_line, Kind, Token};
use super::objects;
pub use super::rule::{
    action_str, addr_str, neg_addr_str, neg_ports_str, options_str, parse_prefix, port_range,
    ports_str, prob_str, protocol_str, PROTOCOLS,
};
use super::sysctl;
use super::{rule, stream};
use crate::error::{cut, unit_error, ConfigError};
use crate::model::*;
use crate::resolve::{Draft, Loc, Located, MAX_ID};

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
    "sysctl",
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
    "overhead",
    "mpu",
    "linklayer",
    "framing",
    "plr",
    "red",
    "gred",
    "droptail",
    "noerror",
    // a class of a tree of schedulers
    "parent",
    "rate",
    "ceil",
    "cburst",
    "prio",
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
    // the rule stream (the rule language's words are `rule::RULE_KEYWORDS`)
    "flush",
    "delete",
];

/// Words the parser recognises only to refuse them with a specific message (the rule
/// language's are `rule::RULE_REFUSED`).
pub const REFUSED: &[&str] = &["flow-id", "profile", "pri", "priority"];

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
        "expected a command: sched, queue, pipe, add, delete, flush, table, default or sysctl";
    let t = c.word(&EXPECTED["expected ".len()..])?;
    match t.text.to_ascii_lowercase().as_str() {
        kind @ ("sched" | "queue" | "pipe") => objects::command(c, d, kind, at)?,
        "add" => stream::add(c, d, at, last_rule)?,
        "flush" => stream::flush(c, d, last_rule)?,
        "delete" => stream::delete(c, d, last_rule)?,
        "table" => stream::table(c, d, at)?,
        "sysctl" => sysctl::sysctl(c, d)?,
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
    phrase(text, "a mask", objects::mask)
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

/// A link's overhead (`-4`, `32`: bytes, `-64..=256`).
pub fn overhead_str(text: &str) -> Result<i32, String> {
    phrase(text, "an overhead", objects::overhead)
}

/// A link's mpu (`64`: bytes, `0..=256`).
pub fn mpu_str(text: &str) -> Result<u32, String> {
    phrase(text, "an mpu", objects::mpu)
}

/// A link layer (`ethernet`, `atm`, `ptm`).
pub fn linklayer_str(text: &str) -> Result<LinkLayer, String> {
    phrase(text, "a link layer", objects::linklayer)
}

/// CAKE's framing presets, in order (`pppoe-ptm,ether-vlan`).
pub fn framing_str(text: &str) -> Result<Framing, String> {
    phrase(text, "a framing", objects::framing)
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
