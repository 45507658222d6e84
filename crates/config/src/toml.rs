//! The TOML front end, and a TOML printer.
//!
//! The same objects as the ipfw syntax, as arrays of tables; every quantity is written as
//! in ipfw (through [`crate::units`] and the ipfw parser's phrase functions), so the two
//! front ends cannot drift apart:
//!
//! ```toml
//! default = "deny"                      # optional; what no rule matched gets
//!
//! [[sched]]                             # sched 4 config type qfq bw 4Mbit/s ...
//! id = 4
//! type = "qfq"
//! bw = "4Mbit/s"                        # or an integer, bit/s
//! mask = { src-ip = "0xff" }            # or "all"; keys as ipfw's mask fields
//! params = { m = 8 }
//! max-instances = 256
//! idle = "10s"
//!
//! [[queue]]                             # queue 1 config sched 4 weight 10 ...
//! id = 1
//! sched = 4
//! weight = 10
//! queue = 50                            # integer: slots; "100KBytes": bytes
//! max-len = 1500                        # or "1500B", "9KB"
//! mask = { dst-ip = "0xff" }
//! max-queues = 1024
//! idle = "10s"
//!
//! [[pipe]]                              # pipe 2 config bw 1Mbit/s queue 20
//! id = 2
//! bw = "1Mbit/s"
//! framing = "pppoe-ptm"                 # or a list ["bridged-ptm", "ether-vlan"]; and
//! overhead = 8                          # ... these replace the preset's parts (also on a
//! mpu = 64                              # [[sched]] with its own bw): the link's framing
//! linklayer = "ptm"                     # (ethernet, atm, ptm), as in ipfw syntax
//!
//! [[rule]]                              # add 100 queue 1 udp from 1.2.3.4 to any 53 out
//! number = 100                          # optional: the highest so far + 100
//! action = "queue 1"                    # "pipe 2", "queue tablearg", "skipto 300", "count",
//!                                       # "allow", "deny"
//! prob = 0.5                            # optional: `prob 0.5`
//! proto = "udp"                         # or a number
//! src = "1.2.3.4"                       # "any", "table(1)", "table(T1,3)", a prefix, a list
//!                                       # of them, or "not ..." any of these
//! dst-port = 53                         # or "1000-2000", "80,443", "http", "not 53", a list
//! dir = "out"
//! options = "tcpflags syn,!ack via igb0" # the other rule options, in ipfw syntax
//!
//! [table.1]                             # table 1 add 1.2.3.0/24 20
//! "1.2.3.0/24" = 20
//! [table.T1]                            # a named table
//! ```
//!
//! Unknown keys are refused everywhere (`deny_unknown_fields`, and by hand in `mask`).
//! Errors carry the line and column of the offending key or value (from toml's byte spans)
//! and the text found there.

use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::ops::Range;

use ::toml::Spanned;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::{cut, unit_error, ConfigError};
use crate::ipfw::{parser, print};
use crate::model::*;
use crate::resolve::{next_rule_number, Draft, Loc, Located, TableCmd, MAX_ID};
use pspat_units as units;

/// Any TOML value this front end accepts where ipfw syntax has a word: a string, a number,
/// a boolean, a list or an inline table. Converted to the model by the `TryFrom`s below,
/// whose messages toml places at the value.
#[derive(Clone, Debug)]
enum Loose {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    List(Vec<Loose>),
    Map(Vec<(String, Loose)>),
}

impl Loose {
    /// The value as a word of ipfw syntax (strings as they are, numbers in decimal).
    fn word(&self) -> Result<String, String> {
        match self {
            Loose::Str(s) => Ok(s.clone()),
            Loose::Int(i) => Ok(i.to_string()),
            Loose::Float(f) => Ok(f.to_string()),
            Loose::Bool(b) => Ok(b.to_string()),
            Loose::List(_) | Loose::Map(_) => Err("expected a string or a number".into()),
        }
    }
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loose;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, a number, a list or a table")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Loose, E> {
                Ok(Loose::Str(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Loose, E> {
                Ok(Loose::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Loose, E> {
                i64::try_from(v)
                    .map(Loose::Int)
                    .map_err(|_| E::custom("number too large"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Loose, E> {
                Ok(Loose::Float(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Loose, E> {
                Ok(Loose::Bool(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Loose, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = s.next_element()? {
                    v.push(x);
                }
                Ok(Loose::List(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Loose, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = m.next_entry::<String, Loose>()? {
                    v.push((k, x));
                }
                Ok(Loose::Map(v))
            }
        }
        d.deserialize_any(V)
    }
}

macro_rules! loose_newtype {
    ($name:ident, $t:ty, |$v:ident| $body:expr) => {
        #[derive(Clone, Debug)]
        struct $name($t);
        impl TryFrom<Loose> for $name {
            type Error = String;
            fn try_from($v: Loose) -> Result<Self, String> {
                $body.map($name)
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Loose::deserialize(d)?.try_into().map_err(de::Error::custom)
            }
        }
    };
}

loose_newtype!(Bw, u64, |v| match v {
    Loose::Int(i) => u64::try_from(i).map_err(|_| format!("bandwidth {i} is negative")),
    other => {
        let w = other.word()?;
        units::parse_bandwidth(&w).map_err(|e| unit_error(&w, "a bandwidth", e))
    }
});
loose_newtype!(Dur, u64, |v| match v {
    Loose::Bool(_) | Loose::List(_) | Loose::Map(_) =>
        Err("expected a duration (\"10s\", \"500ms\", or seconds)".to_owned()),
    other => {
        let w = other.word()?;
        units::parse_duration_ns(&w).map_err(|e| unit_error(&w, "a duration", e))
    }
});
loose_newtype!(Bytes, u32, |v| {
    let n = match v {
        Loose::Int(i) => u64::try_from(i).map_err(|_| format!("{i} bytes is negative"))?,
        other => {
            let w = other.word()?;
            units::parse_bytes(&w).map_err(|e| unit_error(&w, "a number of bytes", e))?
        }
    };
    u32::try_from(n).map_err(|_| format!("{n} bytes is too large"))
});
loose_newtype!(Bytes64, u64, |v| match v {
    Loose::Int(i) => u64::try_from(i).map_err(|_| format!("{i} bytes is negative")),
    other => {
        let w = other.word()?;
        units::parse_bytes(&w).map_err(|e| unit_error(&w, "a number of bytes", e))
    }
});
loose_newtype!(Limit, QueueLimit, |v| match v {
    Loose::Int(i) => u32::try_from(i)
        .map(QueueLimit::Packets)
        .map_err(|_| format!("queue size {i} is not 0..={}", u32::MAX)),
    Loose::Str(s) => parser::queue_limit_str(&s),
    _ => Err("expected a queue size: a number of slots or a string with a byte unit".into()),
});
loose_newtype!(Mask, FlowMask, |v| match v {
    Loose::Str(s) => parser::mask_str(&s),
    Loose::Map(fields) => {
        const KEYS: &[&str] = &[
            "src-ip", "dst-ip", "src-ip6", "dst-ip6", "src-port", "dst-port", "proto",
        ];
        let mut text = String::new();
        for (k, x) in fields {
            if !KEYS.contains(&k.as_str()) {
                return Err(format!(
                    "unknown mask field `{}`, expected one of {}",
                    cut(&k),
                    KEYS.join(", ")
                ));
            }
            let _ = write!(text, "{k} {} ", x.word()?);
        }
        if text.is_empty() {
            Ok(FlowMask::default())
        } else {
            parser::mask_str(text.trim_end())
        }
    }
    _ => Err("expected a mask: \"all\" or a table like { src-ip = \"0xff\" }".into()),
});
loose_newtype!(ParamList, Vec<(String, String)>, |v| match v {
    Loose::Map(kv) => kv
        .into_iter()
        .map(|(k, x)| Ok((k, x.word()?)))
        .collect::<Result<Vec<_>, String>>(),
    _ => Err("expected a table of parameters like { m = 8 }".into()),
});
loose_newtype!(ActionT, Action, |v| parser::action_str(&v.word()?));
loose_newtype!(Proto, Option<u8>, |v| match v {
    Loose::Int(i) => u8::try_from(i)
        .map(Some)
        .map_err(|_| format!("protocol number {i} is not 0..=255")),
    other => parser::protocol_str(&other.word()?),
});
loose_newtype!(Addr, (bool, AddrMatch), |v| match v {
    Loose::List(xs) => {
        let mut ps = Vec::new();
        for x in xs {
            ps.push(parser::parse_prefix(&x.word()?)?);
        }
        Ok((false, AddrMatch::Prefixes(ps)))
    }
    other => parser::neg_addr_str(&other.word()?),
});
loose_newtype!(Ports, (bool, Vec<PortRange>), |v| match v {
    Loose::List(xs) => {
        let mut out = Vec::new();
        for x in xs {
            out.extend(parser::ports_str(&x.word()?)?);
        }
        Ok((false, out))
    }
    other => parser::neg_ports_str(&other.word()?),
});
loose_newtype!(ProbT, Probability, |v| match v {
    Loose::Int(_) | Loose::Float(_) | Loose::Str(_) => parser::prob_str(&v.word()?),
    _ => Err("expected a probability (0 < P <= 1)".into()),
});
loose_newtype!(Options, Vec<RuleOption>, |v| parser::options_str(
    &v.word()?
));
loose_newtype!(Delay, u64, |v| match v {
    Loose::Int(i) => parser::delay_str(&i.to_string()),
    other => parser::delay_str(&other.word()?),
});
loose_newtype!(Plr, Probability, |v| match v {
    Loose::Float(f) => parser::plr_str(&f.to_string()),
    Loose::Int(i) => parser::plr_str(&i.to_string()),
    other => parser::plr_str(&other.word()?),
});
loose_newtype!(OverheadT, i32, |v| parser::overhead_str(&v.word()?));
loose_newtype!(MpuT, u32, |v| parser::mpu_str(&v.word()?));
loose_newtype!(LinkLayerT, LinkLayer, |v| parser::linklayer_str(&v.word()?));
loose_newtype!(FramingT, Framing, |v| match v {
    Loose::List(xs) => {
        let names: Vec<String> = xs.iter().map(Loose::word).collect::<Result<_, _>>()?;
        parser::framing_str(&names.join(","))
    }
    other => parser::framing_str(&other.word()?),
});
loose_newtype!(RedT, Red, |v| parser::red_str(&v.word()?, false));
loose_newtype!(GredT, Red, |v| parser::red_str(&v.word()?, true));
loose_newtype!(Dir, Direction, |v| match v.word()?.as_str() {
    "in" => Ok(Direction::In),
    "out" => Ok(Direction::Out),
    other => Err(format!(
        "direction '{}' is not \"in\" or \"out\"",
        cut(other)
    )),
});

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct SchedT {
    id: u32,
    #[serde(rename = "type")]
    algorithm: Option<String>,
    bw: Option<Bw>,
    overhead: Option<OverheadT>,
    mpu: Option<MpuT>,
    linklayer: Option<LinkLayerT>,
    framing: Option<FramingT>,
    mask: Option<Mask>,
    params: Option<ParamList>,
    max_instances: Option<u32>,
    idle: Option<Dur>,
    parent: Option<u32>,
    rate: Option<Bw>,
    ceil: Option<Bw>,
    burst: Option<Bytes64>,
    cburst: Option<Bytes64>,
    weight: Option<u32>,
    prio: Option<u8>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct QueueT {
    id: u32,
    sched: Option<u32>,
    pipe: Option<u32>,
    weight: Option<u32>,
    queue: Option<Limit>,
    plr: Option<Plr>,
    red: Option<RedT>,
    gred: Option<GredT>,
    max_len: Option<Bytes>,
    mask: Option<Mask>,
    max_queues: Option<u32>,
    idle: Option<Dur>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PipeT {
    id: u32,
    bw: Option<Bw>,
    delay: Option<Delay>,
    burst: Option<Bytes64>,
    overhead: Option<OverheadT>,
    mpu: Option<MpuT>,
    linklayer: Option<LinkLayerT>,
    framing: Option<FramingT>,
    queue: Option<Limit>,
    plr: Option<Plr>,
    red: Option<RedT>,
    gred: Option<GredT>,
    mask: Option<Mask>,
    max_instances: Option<u32>,
    idle: Option<Dur>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RuleT {
    number: Option<u32>,
    action: ActionT,
    dir: Option<Dir>,
    proto: Option<Proto>,
    src: Option<Addr>,
    dst: Option<Addr>,
    src_port: Option<Ports>,
    dst_port: Option<Ports>,
    prob: Option<ProbT>,
    options: Option<Options>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileT {
    default: Option<Spanned<ActionT>>,
    /// ipfw's net.inet.ip.fw.one_pass.
    #[serde(rename = "one-pass")]
    one_pass: Option<bool>,
    #[serde(default)]
    sched: Vec<Spanned<SchedT>>,
    #[serde(default)]
    queue: Vec<Spanned<QueueT>>,
    #[serde(default)]
    pipe: Vec<Spanned<PipeT>>,
    #[serde(default)]
    rule: Vec<Spanned<RuleT>>,
    #[serde(default)]
    table: BTreeMap<Spanned<String>, BTreeMap<Spanned<String>, Spanned<u32>>>,
}

/// A queue's loss and early drop from its `plr`, `red` and `gred` keys (one of the last
/// two at most).
fn queue_management(
    text: &str,
    origin: &str,
    span: &Range<usize>,
    plr: Option<Plr>,
    red: Option<RedT>,
    gred: Option<GredT>,
) -> Result<QueueManagement, ConfigError> {
    let red = match (red, gred) {
        (Some(_), Some(_)) => {
            return Err(syntax(
                text,
                origin,
                span.clone(),
                "`red` and `gred` are two kinds of one thing: give one".into(),
            ))
        }
        (r, g) => r.map(|r| r.0).or(g.map(|g| g.0)),
    };
    Ok(QueueManagement {
        plr: plr.map(|p| p.0).unwrap_or_default(),
        red,
    })
}

/// A link's framing from its `framing`, `overhead`, `mpu` and `linklayer` keys: the
/// presets', with the keys given on their own replacing their parts (as in ipfw syntax).
fn framing(
    presets: Option<FramingT>,
    overhead: Option<OverheadT>,
    mpu: Option<MpuT>,
    linklayer: Option<LinkLayerT>,
) -> Framing {
    presets.map(|p| p.0).unwrap_or_default().with(
        overhead.map(|o| o.0),
        mpu.map(|m| m.0),
        linklayer.map(|l| l.0),
    )
}

/// Byte offset -> 1-based line and character column.
fn loc_of(text: &str, offset: usize) -> Loc {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary_compat(offset)];
    let line = before.matches('\n').count() as u32 + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Loc {
        line,
        column: before[line_start..].chars().count() as u32 + 1,
    }
}

trait FloorBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

fn syntax(text: &str, origin: &str, span: Range<usize>, message: String) -> ConfigError {
    let l = loc_of(text, span.start);
    let end = span.end.min(text.len()).max(span.start.min(text.len()));
    let start = text.floor_char_boundary_compat(span.start.min(text.len()));
    let token = text[start..text.floor_char_boundary_compat(end)]
        .lines()
        .next()
        .unwrap_or("");
    ConfigError::syntax(origin, l.line, l.column, token, &message)
}

/// Parses TOML `text` into a draft (not yet resolved).
pub fn parse(text: &str, origin: &str) -> Result<Draft, ConfigError> {
    let file: FileT = ::toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        syntax(text, origin, span, e.message().trim_end().to_owned())
    })?;
    let at = |span: Range<usize>| Some(loc_of(text, span.start));
    let mut d = Draft::new(origin);
    d.one_pass = file.one_pass;
    if let Some(a) = file.default {
        d.default_action.push(Located {
            at: at(a.span()),
            item: a.into_inner().0,
        });
    }
    for s in file.sched {
        let span = s.span();
        let s = s.into_inner();
        let class = match s.parent {
            Some(parent) => Some(ClassOf {
                parent,
                rate_bps: s.rate.map_or(0, |b| b.0),
                ceil_bps: s.ceil.map(|b| b.0),
                burst: s.burst.map(|b| b.0),
                cburst: s.cburst.map(|b| b.0),
                weight: s.weight.unwrap_or(1),
                prio: s.prio.unwrap_or(0),
            }),
            None => {
                let given = [
                    ("rate", s.rate.is_some()),
                    ("ceil", s.ceil.is_some()),
                    ("burst", s.burst.is_some()),
                    ("cburst", s.cburst.is_some()),
                    ("weight", s.weight.is_some()),
                    ("prio", s.prio.is_some()),
                ];
                if let Some((k, _)) = given.iter().find(|(_, g)| *g) {
                    return Err(syntax(
                        text,
                        origin,
                        span,
                        format!(
                            "sched {}: `{k}` is a class's: give the scheduler a `parent`",
                            s.id
                        ),
                    ));
                }
                None
            }
        };
        d.schedulers.push(Located {
            at: at(span),
            item: SchedSpec {
                id: s.id,
                algorithm: s.algorithm.unwrap_or_else(|| DEFAULT_ALGORITHM.to_owned()),
                params: s.params.map(|p| p.0).unwrap_or_default(),
                bandwidth_bps: s.bw.map_or(0, |b| b.0),
                framing: framing(s.framing, s.overhead, s.mpu, s.linklayer),
                mask: s.mask.map(|m| m.0).unwrap_or_default(),
                max_instances: s.max_instances.unwrap_or(DEFAULT_MAX_INSTANCES),
                idle_ns: s.idle.map_or(DEFAULT_IDLE_NS, |t| t.0),
                class,
            },
        });
    }
    for q in file.queue {
        let span = q.span();
        let q = q.into_inner();
        // `pipe = P` and `sched = P` name the same scheduler, as in ipfw.
        let sched = match (q.sched, q.pipe) {
            (Some(s), None) | (None, Some(s)) => s,
            (None, None) => {
                return Err(syntax(
                    text,
                    origin,
                    span,
                    format!(
                        "queue {}: give `sched` or `pipe` (what it attaches to)",
                        q.id
                    ),
                ))
            }
            (Some(_), Some(_)) => {
                return Err(syntax(
                    text,
                    origin,
                    span,
                    format!(
                        "queue {}: `sched` and `pipe` name the same thing: give one",
                        q.id
                    ),
                ))
            }
        };
        d.flowsets.push(Located {
            at: at(span.clone()),
            item: FlowsetSpec {
                id: q.id,
                sched,
                weight: q.weight.unwrap_or(1),
                max_len: q
                    .max_len
                    .map_or(pspat_sched::flow::DEFAULT_MAX_LEN, |b| b.0),
                limit: q.queue.map(|l| l.0).unwrap_or_default(),
                qm: queue_management(text, origin, &span, q.plr, q.red, q.gred)?,
                mask: q.mask.map(|m| m.0).unwrap_or_default(),
                max_queues: q.max_queues.unwrap_or(DEFAULT_MAX_QUEUES),
                idle_ns: q.idle.map_or(DEFAULT_IDLE_NS, |t| t.0),
            },
        });
    }
    for p in file.pipe {
        let span = p.span();
        let p = p.into_inner();
        d.pipes.push(Located {
            at: at(span.clone()),
            item: PipeSpec {
                id: p.id,
                bandwidth_bps: p.bw.map_or(0, |b| b.0),
                delay_ns: p.delay.map_or(0, |x| x.0),
                burst_bytes: p.burst.map_or(0, |x| x.0),
                framing: framing(p.framing, p.overhead, p.mpu, p.linklayer),
                limit: p.queue.map(|l| l.0).unwrap_or_default(),
                qm: queue_management(text, origin, &span, p.plr, p.red, p.gred)?,
                mask: p.mask.map(|m| m.0).unwrap_or_default(),
                max_instances: p.max_instances.unwrap_or(DEFAULT_MAX_INSTANCES),
                idle_ns: p.idle.map_or(DEFAULT_IDLE_NS, |t| t.0),
            },
        });
    }
    let mut last = 0u32;
    for r in file.rule {
        let span = r.span();
        let r = r.into_inner();
        let number = r.number.unwrap_or_else(|| next_rule_number(last));
        last = last.max(number);
        let mut matcher = Match {
            direction: r.dir.map(|x| x.0),
            proto: r.proto.and_then(|x| x.0),
            prob: r.prob.map(|p| p.0),
            options: r.options.map(|o| o.0).unwrap_or_default(),
            ..Match::default()
        };
        matcher.set_negatable(
            r.src.map(|x| x.0),
            r.dst.map(|x| x.0),
            r.src_port.map(|x| x.0),
            r.dst_port.map(|x| x.0),
        );
        d.rules.push(Located {
            at: at(span),
            item: Rule {
                number,
                action: r.action.0,
                matcher,
            },
        });
    }
    for (id, entries) in file.table {
        let table = TableName::new(id.get_ref())
            .ok()
            .filter(|t| t.number().map_or(true, |n| (1..=MAX_ID).contains(&n)))
            .ok_or_else(|| {
                syntax(
                    text,
                    origin,
                    id.span(),
                    format!(
                        "a table's key is its name or number (1..={MAX_ID}): letters, digits, \
                         `_`, `-` and `.`"
                    ),
                )
            })?;
        d.tables.push(Located {
            at: at(id.span()),
            item: TableCmd {
                table: table.clone(),
                entry: None,
            },
        });
        for (k, v) in entries {
            let p = parser::parse_prefix(k.get_ref())
                .map_err(|m| syntax(text, origin, k.span(), format!("table {table}: {m}")))?;
            d.tables.push(Located {
                at: at(k.span()),
                item: TableCmd {
                    table: table.clone(),
                    entry: Some((p, *v.get_ref())),
                },
            });
        }
    }
    Ok(d)
}

/// A TOML string literal.
fn quote(s: &str) -> String {
    ::toml::Value::String(s.to_owned()).to_string()
}

fn mask_inline(m: &FlowMask) -> String {
    if *m == FlowMask::ALL {
        return quote("all");
    }
    let words = print::mask_words(m);
    let w: Vec<&str> = words.split(' ').collect();
    let fields: Vec<String> = w
        .chunks(2)
        .map(|kv| format!("{} = {}", kv[0], quote(kv[1])))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

fn addr_value(not: bool, a: &AddrMatch) -> String {
    match a {
        AddrMatch::Prefixes(ps) if ps.len() > 1 && !not => {
            let v: Vec<String> = ps.iter().map(|p| quote(&print::prefix(p))).collect();
            format!("[{}]", v.join(", "))
        }
        other => quote(&format!("{}{}", print::not(not), print::addr(other))),
    }
}

/// A TOML key: bare when it can be, quoted otherwise.
fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_owned()
    } else {
        quote(k)
    }
}

/// The configuration in this front end's TOML, every option written out; parsing it gives
/// back an equal model.
pub fn to_toml(c: &Config) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "default = {}", quote(&c.default_action.to_string()));
    if !c.one_pass {
        s.push_str("one-pass = false\n");
    }
    for x in c.schedulers.values() {
        let _ = write!(
            s,
            "\n[[sched]]\nid = {}\ntype = {}\nbw = {}\n",
            x.id,
            quote(&x.algorithm),
            quote(&units::format_bandwidth(x.bandwidth_bps))
        );
        framing_toml(&mut s, &x.framing);
        if !x.mask.is_empty() {
            let _ = writeln!(s, "mask = {}", mask_inline(&x.mask));
        }
        if !x.params.is_empty() {
            let p: Vec<String> = x
                .params
                .iter()
                .map(|(k, v)| format!("{} = {}", quote(k), quote(v)))
                .collect();
            let _ = writeln!(s, "params = {{ {} }}", p.join(", "));
        }
        let _ = write!(
            s,
            "max-instances = {}\nidle = {}\n",
            x.max_instances,
            quote(&units::format_duration(x.idle_ns))
        );
        if let Some(k) = &x.class {
            let _ = writeln!(s, "parent = {}", k.parent);
            if k.rate_bps != 0 {
                let _ = writeln!(s, "rate = {}", quote(&units::format_bandwidth(k.rate_bps)));
            }
            if let Some(c) = k.ceil_bps {
                let _ = writeln!(s, "ceil = {}", quote(&units::format_bandwidth(c)));
            }
            if let Some(b) = k.burst {
                let _ = writeln!(s, "burst = {b}");
            }
            if let Some(b) = k.cburst {
                let _ = writeln!(s, "cburst = {b}");
            }
            let _ = writeln!(s, "weight = {}\nprio = {}", k.weight, k.prio);
        }
    }
    for x in c.pipes.values() {
        let _ = write!(
            s,
            "\n[[pipe]]\nid = {}\nbw = {}\nqueue = {}\n",
            x.id,
            quote(&units::format_bandwidth(x.bandwidth_bps)),
            limit_value(&x.limit)
        );
        if x.delay_ns != 0 {
            let _ = writeln!(s, "delay = {}", x.delay_ns / 1_000_000);
        }
        if x.burst_bytes != 0 {
            let _ = writeln!(s, "burst = {}", x.burst_bytes);
        }
        framing_toml(&mut s, &x.framing);
        queue_management_toml(&mut s, &x.qm);
        if !x.mask.is_empty() {
            let _ = writeln!(s, "mask = {}", mask_inline(&x.mask));
        }
        let _ = write!(
            s,
            "max-instances = {}\nidle = {}\n",
            x.max_instances,
            quote(&units::format_duration(x.idle_ns))
        );
    }
    for x in c.flowsets.values() {
        let _ = write!(
            s,
            "\n[[queue]]\nid = {}\nsched = {}\nweight = {}\nqueue = {}\nmax-len = {}\n",
            x.id,
            x.sched,
            x.weight,
            limit_value(&x.limit),
            x.max_len
        );
        queue_management_toml(&mut s, &x.qm);
        if !x.mask.is_empty() {
            let _ = writeln!(s, "mask = {}", mask_inline(&x.mask));
        }
        let _ = write!(
            s,
            "max-queues = {}\nidle = {}\n",
            x.max_queues,
            quote(&units::format_duration(x.idle_ns))
        );
    }
    for r in &c.rules {
        let m = &r.matcher;
        let _ = write!(
            s,
            "\n[[rule]]\nnumber = {}\naction = {}\n",
            r.number,
            quote(&r.action.to_string())
        );
        if let Some(p) = m.prob {
            let _ = writeln!(s, "prob = {}", quote(&print::probability(p)));
        }
        if let Some(p) = m.proto {
            let _ = writeln!(s, "proto = {}", quote(&print::proto_name(p)));
        }
        let ports = |not: bool, ps: &[PortRange]| {
            quote(&format!("{}{}", print::not(not), print::ports(ps)))
        };
        if m.src != AddrMatch::Any {
            let _ = writeln!(s, "src = {}", addr_value(m.not.src, &m.src));
        }
        if !m.src_ports.is_empty() {
            let _ = writeln!(s, "src-port = {}", ports(m.not.src_ports, &m.src_ports));
        }
        if m.dst != AddrMatch::Any {
            let _ = writeln!(s, "dst = {}", addr_value(m.not.dst, &m.dst));
        }
        if !m.dst_ports.is_empty() {
            let _ = writeln!(s, "dst-port = {}", ports(m.not.dst_ports, &m.dst_ports));
        }
        if !m.options.is_empty() {
            let _ = writeln!(s, "options = {}", quote(&print::options(&m.options)));
        }
        match m.direction {
            Some(Direction::In) => s.push_str("dir = \"in\"\n"),
            Some(Direction::Out) => s.push_str("dir = \"out\"\n"),
            None => {}
        }
    }
    for t in c.tables.values() {
        let _ = writeln!(s, "\n[table.{}]", key(t.id.as_str()));
        for (p, v) in &t.entries {
            let _ = writeln!(s, "{} = {v}", quote(&print::prefix(p)));
        }
    }
    s
}

/// A link's framing as keys, those that add something.
fn framing_toml(s: &mut String, f: &Framing) {
    if f.overhead != 0 {
        let _ = writeln!(s, "overhead = {}", f.overhead);
    }
    if f.mpu != 0 {
        let _ = writeln!(s, "mpu = {}", f.mpu);
    }
    if f.linklayer != LinkLayer::Ethernet {
        let _ = writeln!(s, "linklayer = {}", quote(f.linklayer.name()));
    }
}

fn queue_management_toml(s: &mut String, qm: &QueueManagement) {
    if !qm.plr.is_zero() {
        let _ = writeln!(s, "plr = {}", quote(&print::probability(qm.plr)));
    }
    if let Some(r) = &qm.red {
        let key = if r.gentle { "gred" } else { "red" };
        let _ = writeln!(s, "{key} = {}", quote(&print::red_params(r)));
    }
}

fn limit_value(l: &QueueLimit) -> String {
    match l {
        QueueLimit::Packets(n) => n.to_string(),
        QueueLimit::Bytes(_) => quote(&print::limit(l)),
    }
}
