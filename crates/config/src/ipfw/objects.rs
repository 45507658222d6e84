//! The dummynet object commands: `pipe N config`, `queue N config`, `sched N config`, their
//! `delete` and `flush`, read as ipfw reads them (FreeBSD's `sbin/ipfw/dummynet.c` and the
//! kernel's `ip_dummynet.c` decide what each option means and where it may appear).
//!
//! Object model (see [`crate::model`]): `pipe N` is link N (bandwidth, delay, burst) plus
//! the FIFO queue that rules sending to `pipe N` use; `sched N` is an algorithm on link N;
//! `queue N config pipe P` and `queue N config sched P` both attach flowset N to scheduler P.
//! `pipe N config ... type ALG` configures scheduler N too, as ipfw does, with the pipe's
//! mask.
//!
//! A file is a command stream, as ipfw applies it: a second `pipe N config` reconfigures
//! pipe N. Like ipfw, it replaces every option but those ipfw keeps from the object in
//! force when not written again: a pipe's bandwidth, a flowset's scheduler, weight and
//! maximum length, a scheduler's type. (ipfw keeps the mask neither.)
//!
//! Framing (`overhead N`, `mpu N`, `linklayer ethernet|atm|ptm`, `framing PRESET[,PRESET]`:
//! what the link charges for a frame, see `pspat_sched::framing`) is pspat's extension to
//! dummynet, on pipes and on schedulers with their own `bw`, in tc's and CAKE's words.
//! `framing` takes CAKE's presets (`pppoe-ptm`, `docsis`, `ethernet,ether-vlan`, ...);
//! `overhead`, `mpu` and `linklayer` on the same line replace the preset's part, wherever
//! they are written. Framing describes the link as its bandwidth does, and is kept with it:
//! a later `pipe N config` that writes none of the four keeps the pipe's framing whole, one
//! that writes any sets all of it from what it writes (the rest at the default). A later
//! `sched N config` replaces a scheduler's framing as it replaces its `bw`.
//!
//! Where ipfw reads a spelling one way and a reader would expect another, the spelling is
//! refused with both readings rather than accepted with either: `queue 2M` (ipfw: 2 slots),
//! `queue 50b` (50 slots), `delay 1s` (ipfw ignores the unit: 1 ms), an IPv4 mask `/24`
//! (its 24 low bits).

use std::net::{Ipv4Addr, Ipv6Addr};

use pspat_sched::{MAX_PACKET_LEN, MAX_WEIGHT};

use super::lexer::Kind;
use super::parser::{parse_uint, Cursor, Seen, R};
use crate::error::{cut, unit_error};
use crate::model::*;
use crate::resolve::{Draft, Loc, Located};
use pspat_units as units;

/// Queue management words that are the AQM issue's (dummynet's CoDel, PIE, fq_codel,
/// fq_pie and ECN marking): refused by name until pspat has them.
const AQM: &[&str] = &[
    "codel",
    "pie",
    "fq_codel",
    "fq_pie",
    "ecn",
    "noecn",
    "target",
    "interval",
    "tupdate",
    "alpha",
    "beta",
    "max_burst",
    "max_ecnth",
    "dre",
    "ts",
    "capdrop",
    "nocapdrop",
    "onoff",
    "derand",
    "quantum",
    "limit",
    "flows",
];

/// Link-only options: ipfw refuses them on `sched` and `queue` lines ("is only for
/// links"). pspat's framing options are a link's too (a scheduler with its own `bw` takes
/// them, as it takes `bw`).
const LINK_ONLY: &[&str] = &[
    "bw",
    "bandwidth",
    "delay",
    "burst",
    "profile",
    "overhead",
    "mpu",
    "linklayer",
    "framing",
];

/// The option word at the cursor, if any (lower-cased), refusing what pspat does not do
/// by name and a repeated option.
fn option<'a>(
    c: &mut Cursor<'_, 'a>,
    seen: &mut Seen,
) -> R<Option<(super::lexer::Token<'a>, String)>> {
    let Some(t) = c.peek() else { return Ok(None) };
    if t.kind != Kind::Word {
        return Err(c.err("expected an option"));
    }
    let k = t.text.to_ascii_lowercase();
    if AQM.contains(&k.as_str()) {
        return Err(c.err_at(
            t,
            format!(
                "`{k}` is dummynet's active queue management (CoDel, PIE, fq_codel, fq_pie, \
                 ECN), which pspat does not have yet; use `droptail` (the default) or `red`"
            ),
        ));
    }
    if k == "profile" {
        return Err(c.err_at(
            t,
            "`profile` (an extra-delay distribution read from a file) is not emulated; \
             `delay` and `plr` are",
        ));
    }
    if k == "pri" || k == "priority" {
        return Err(c.err_at(
            t,
            "`pri` (dummynet's prio scheduler's band) is not supported: give the flowset a \
             `weight`, or use separate schedulers",
        ));
    }
    seen.first(c, t)?;
    c.pos += 1;
    Ok(Some((t, k)))
}

/// Which options of a command were written, for a reconfiguration that keeps the others.
#[derive(Default)]
struct Given {
    bandwidth: bool,
    framing: bool,
    sched: bool,
    weight: bool,
    max_len: bool,
    algorithm: bool,
}

/// A `pipe`, `queue` or `sched` command (`kind`, already read): `KIND N config ...`,
/// `KIND N delete`, `KIND delete N...`, `KIND flush`.
pub(super) fn command(c: &mut Cursor<'_, '_>, d: &mut Draft, kind: &str, at: Loc) -> R<()> {
    let what = match kind {
        "sched" => "a scheduler number",
        "queue" => "a queue (flowset) number",
        _ => "a pipe number",
    };
    if c.peek_is("flush") {
        c.pos += 1;
        c.end()?;
        flush(d);
        return Ok(());
    }
    if c.peek_is("delete") {
        c.pos += 1;
        loop {
            let id = c.id(what)?;
            delete(d, kind, id);
            if c.peek().is_none() {
                return Ok(());
            }
        }
    }
    if c.peek_is("show") || c.peek_is("list") {
        return Err(c.err(format!(
            "`{kind} show` lists objects; a configuration file configures them"
        )));
    }
    let id = c.id(what)?;
    let t = c.word("`config` or `delete`")?;
    match t.text.to_ascii_lowercase().as_str() {
        "config" => config(c, d, kind, id, at),
        "delete" => {
            c.end()?;
            delete(d, kind, id);
            Ok(())
        }
        _ => Err(c.err_at(t, "expected `config` or `delete`")),
    }
}

/// `sched N config ...`, `queue N config ...`, `pipe N config ...` (after `config`).
fn config(c: &mut Cursor<'_, '_>, d: &mut Draft, kind: &str, id: u32, at: Loc) -> R<()> {
    match kind {
        "sched" => {
            let (item, given) = sched_config(c, id)?;
            replace(
                &mut d.schedulers,
                id,
                |s| s.id,
                Located { item, at: Some(at) },
                |new, old| {
                    if !given.algorithm {
                        new.algorithm.clone_from(&old.algorithm);
                        new.params.clone_from(&old.params);
                    }
                },
            );
        }
        "queue" => {
            let (item, given) = queue_config(c, id)?;
            if !given.sched && !d.flowsets.iter().any(|q| q.item.id == id) {
                return Err(c.err(format!(
                    "queue {id}: expected `pipe P` or `sched S` (what it attaches to)"
                )));
            }
            replace(
                &mut d.flowsets,
                id,
                |q| q.id,
                Located { item, at: Some(at) },
                |new, old| {
                    if !given.sched {
                        new.sched = old.sched;
                    }
                    if !given.weight {
                        new.weight = old.weight;
                    }
                    if !given.max_len {
                        new.max_len = old.max_len;
                    }
                },
            );
        }
        _ => {
            let (item, sched, given) = pipe_config(c, id)?;
            replace(
                &mut d.pipes,
                id,
                |p| p.id,
                Located { item, at: Some(at) },
                |new, old| {
                    if !given.bandwidth {
                        new.bandwidth_bps = old.bandwidth_bps;
                    }
                    if !given.framing {
                        new.framing = old.framing;
                    }
                },
            );
            if let Some(item) = sched {
                replace(
                    &mut d.schedulers,
                    id,
                    |s| s.id,
                    Located { item, at: Some(at) },
                    |_, _| {},
                );
            }
        }
    }
    Ok(())
}

/// Puts `new` in `list` in place of the object with the same id, after `keep` copied what
/// a reconfiguration keeps from it; appends it when there is none.
fn replace<T>(
    list: &mut Vec<Located<T>>,
    id: u32,
    id_of: impl Fn(&T) -> u32,
    mut new: Located<T>,
    keep: impl FnOnce(&mut T, &T),
) {
    match list.iter_mut().find(|o| id_of(&o.item) == id) {
        Some(old) => {
            keep(&mut new.item, &old.item);
            *old = new;
        }
        None => list.push(new),
    }
}

/// `pipe N delete`, `queue N delete`, `sched N delete`: as ipfw, deleting pipe N deletes
/// scheduler N (its link's other user) too.
fn delete(d: &mut Draft, kind: &str, id: u32) {
    match kind {
        "queue" => d.flowsets.retain(|q| q.item.id != id),
        "sched" => d.schedulers.retain(|s| s.item.id != id),
        _ => {
            d.pipes.retain(|p| p.item.id != id);
            d.schedulers.retain(|s| s.item.id != id);
        }
    }
}

/// `pipe flush`, `queue flush`, `sched flush`: each deletes every pipe, flowset and
/// scheduler (ipfw sends one dummynet flush for all three).
fn flush(d: &mut Draft) {
    d.pipes.clear();
    d.flowsets.clear();
    d.schedulers.clear();
}

/// Refuses `opt` (written on a `what` line) when it belongs to pipes only.
fn link_only(
    c: &Cursor<'_, '_>,
    t: super::lexer::Token<'_>,
    k: &str,
    what: &str,
    id: u32,
) -> R<()> {
    if LINK_ONLY.contains(&k) {
        // A queue line names its pipe with `pipe P` (0: not given before this option).
        let pipe = if id == 0 {
            "P".to_owned()
        } else {
            id.to_string()
        };
        return Err(c.err_at(
            t,
            format!(
                "`{k}` is a parameter of a link: write it on `pipe {pipe} config` (ipfw \
                 refuses it on a {what} line)"
            ),
        ));
    }
    Ok(())
}

fn sched_config(c: &mut Cursor<'_, '_>, id: u32) -> R<(SchedSpec, Given)> {
    let mut s = SchedSpec::new(id, DEFAULT_ALGORITHM);
    let mut given = Given::default();
    let mut seen = Seen::default();
    let mut framing = FramingWords::default();
    // a class's options, and the first of them written (for the error without `parent`)
    let mut class = ClassOf::new(0);
    let mut parent = None;
    let mut class_word = None;
    while let Some((t, k)) = option(c, &mut seen)? {
        if ["rate", "ceil", "burst", "cburst", "weight", "prio"].contains(&k.as_str()) {
            class_word.get_or_insert(t);
        }
        // pspat's extension, as `bw`: the framing of the scheduler's own link.
        if framing.option(c, &k)? {
            continue;
        }
        match k.as_str() {
            "type" => {
                s.algorithm = algorithm(c)?;
                given.algorithm = true;
            }
            // pspat's extension: a scheduler with no pipe of its number clocked at `bw`.
            "bw" | "bandwidth" => s.bandwidth_bps = bandwidth(c)?,
            // ipfw attaches the scheduler's internal FIFO flowset (used only by single-queue
            // types) to scheduler P; the scheduler's link stays link N whatever P is, so
            // nothing changes (pfSense writes `sched N config pipe N`).
            "pipe" | "sched" => {
                c.id("a pipe number")?;
            }
            "mask" | "sched_mask" | "flow_mask" => s.mask = mask(c)?,
            "params" => {
                s.params = params(c)?;
                given.algorithm = true;
            }
            "max-instances" => {
                s.max_instances = c.number("a number of instances", 1, u32::MAX.into())? as u32
            }
            "buckets" => buckets(c)?,
            "idle" => s.idle_ns = c.unit("a duration", units::parse_duration_ns)?,
            // a class of a tree (HTB's words)
            "parent" => parent = Some(c.id("a scheduler number")?),
            "rate" => class.rate_bps = bandwidth(c)?,
            "ceil" => class.ceil_bps = Some(bandwidth(c)?),
            "burst" | "cburst" => {
                let t = c.word("a burst size in bytes")?;
                let b = units::parse_bytes(t.text)
                    .map_err(|e| c.err_at(t, unit_error(t.text, "a burst size", e)))?;
                if k == "burst" {
                    class.burst = Some(b);
                } else {
                    class.cburst = Some(b);
                }
            }
            "weight" => class.weight = c.number("a weight", 1, MAX_WEIGHT.into())? as u32,
            "prio" => class.prio = c.number("a priority band", 0, 7)? as u8,
            _ => {
                link_only(c, t, &k, "sched", id)?;
                return Err(c.err_at(
                    t,
                    "expected a sched option: type, pipe, mask, params, max-instances, buckets, \
                     idle, bw and framing (overhead, mpu, linklayer, framing), or a class's \
                     parent, rate, ceil, burst, cburst, weight, prio",
                ));
            }
        }
    }
    match (parent, class_word) {
        (Some(p), _) => {
            class.parent = p;
            s.class = Some(class);
        }
        (None, Some(t)) => {
            return Err(c.err_at(
                t,
                format!(
                    "`{}` is a class's: give sched {id} a `parent` (a link's burst goes on \
                     `pipe {id} config`)",
                    t.text
                ),
            ))
        }
        (None, None) => {}
    }
    s.framing = framing.framing();
    given.framing = framing.given();
    Ok((s, given))
}

fn queue_config(c: &mut Cursor<'_, '_>, id: u32) -> R<(FlowsetSpec, Given)> {
    let mut q = FlowsetSpec::new(id, 0);
    let mut given = Given::default();
    let mut seen = Seen::default();
    while let Some((t, k)) = option(c, &mut seen)? {
        match k.as_str() {
            // Both name scheduler P: pipe P's link clocks it (dummynet's TOK_PIPE and
            // TOK_SCHED are one case).
            "sched" | "pipe" => {
                if seen
                    .0
                    .iter()
                    .filter(|w| *w == "sched" || *w == "pipe")
                    .count()
                    > 1
                {
                    return Err(c.err_at(t, "`pipe` and `sched` name the same thing: give one"));
                }
                q.sched = c.id("a pipe or scheduler number")?;
                given.sched = true;
            }
            "weight" => {
                q.weight = c.number("a weight", 1, MAX_WEIGHT.into())? as u32;
                given.weight = true;
            }
            "queue" => q.limit = queue_size(c)?,
            "mask" | "sched_mask" | "flow_mask" => q.mask = mask(c)?,
            "max-len" | "lmax" | "maxlen" => {
                let t = c.word("a packet length in bytes")?;
                let v = units::parse_bytes(t.text)
                    .map_err(|e| c.err_at(t, unit_error(t.text, "a packet length", e)))?;
                if v == 0 || v > u64::from(MAX_PACKET_LEN) {
                    return Err(c.err_at(t, format!("{k} must be 1..={MAX_PACKET_LEN} bytes")));
                }
                q.max_len = v as u32;
                given.max_len = true;
            }
            "plr" => q.qm.plr = plr(c)?,
            "red" | "gred" => q.qm.red = Some(red(c, k == "gred")?),
            "droptail" => q.qm.red = None,
            "noerror" => {}
            "max-queues" => {
                q.max_queues = c.number("a number of queues", 1, u32::MAX.into())? as u32
            }
            "buckets" => buckets(c)?,
            "idle" => q.idle_ns = c.unit("a duration", units::parse_duration_ns)?,
            _ => {
                link_only(c, t, &k, "queue", q.sched)?;
                return Err(c.err_at(
                    t,
                    "expected a queue option: pipe, sched, weight, queue, mask, lmax, plr, red, \
                     gred, droptail, noerror, max-queues, buckets or idle",
                ));
            }
        }
    }
    Ok((q, given))
}

/// A pipe, and scheduler N when the line gives it a `type`.
fn pipe_config(c: &mut Cursor<'_, '_>, id: u32) -> R<(PipeSpec, Option<SchedSpec>, Given)> {
    let mut p = PipeSpec::new(id);
    let mut given = Given::default();
    let mut sched: Option<SchedSpec> = None;
    let mut seen = Seen::default();
    let mut framing = FramingWords::default();
    while let Some((t, k)) = option(c, &mut seen)? {
        if framing.option(c, &k)? {
            continue;
        }
        match k.as_str() {
            "bw" | "bandwidth" => {
                p.bandwidth_bps = bandwidth(c)?;
                given.bandwidth = true;
            }
            "delay" => p.delay_ns = delay(c)?,
            "burst" => {
                let t = c.word("a burst size in bytes")?;
                p.burst_bytes = units::parse_bytes(t.text)
                    .map_err(|e| c.err_at(t, unit_error(t.text, "a burst size", e)))?;
            }
            "queue" => p.limit = queue_size(c)?,
            "plr" => p.qm.plr = plr(c)?,
            "red" | "gred" => p.qm.red = Some(red(c, k == "gred")?),
            "droptail" => p.qm.red = None,
            // Not reporting a drop to the sender: a shaper reports drops to nobody.
            "noerror" => {}
            "mask" | "sched_mask" | "flow_mask" => p.mask = mask(c)?,
            "type" => {
                sched = Some(SchedSpec::new(id, &algorithm(c)?));
            }
            "weight" => {
                // Accepted by ipfw on a pipe (its FIFO flowset has one) and meaningless there.
                c.number("a weight", 1, MAX_WEIGHT.into())?;
            }
            "max-instances" => {
                p.max_instances = c.number("a number of instances", 1, u32::MAX.into())? as u32
            }
            "buckets" => buckets(c)?,
            "idle" => p.idle_ns = c.unit("a duration", units::parse_duration_ns)?,
            "sched" => {
                return Err(c.err_at(
                    t,
                    "`pipe N config sched S` (the pipe's FIFO queue moved to another \
                     scheduler) is not supported: attach a `queue` to scheduler S instead",
                ))
            }
            _ => {
                return Err(c.err_at(
                    t,
                    "expected a pipe option: bw, delay, burst, overhead, mpu, linklayer, \
                     framing, queue, plr, red, gred, droptail, noerror, mask, type, \
                     max-instances, buckets or idle",
                ))
            }
        }
    }
    p.framing = framing.framing();
    given.framing = framing.given();
    // ipfw gives scheduler N the pipe's mask when the pipe names its type.
    if let Some(s) = sched.as_mut() {
        s.mask = p.mask;
    }
    Ok((p, sched, given))
}

/// `type NAME` (fifo, wf2q+, rr, qfq, prio, or any pspat algorithm).
fn algorithm(c: &mut Cursor<'_, '_>) -> R<String> {
    let t = c.word("an algorithm name (fifo, wf2q+, rr, qfq, drr, ...)")?;
    if AQM.contains(&t.text.to_ascii_lowercase().as_str()) {
        return Err(c.err_at(
            t,
            format!(
                "`{}` is dummynet's active queue management (CoDel, PIE, fq_codel, fq_pie, \
                 ECN), which pspat does not have yet; choose another type (wf2q+, qfq, drr)",
                t.text
            ),
        ));
    }
    Ok(t.text.into())
}

/// `bw BW`; a device name (`bw tun0`: a rate taken from an interface's transmissions) is
/// refused by name.
fn bandwidth(c: &mut Cursor<'_, '_>) -> R<u64> {
    if let Some(t) = c.peek() {
        if t.text.starts_with(|ch: char| ch.is_ascii_lowercase()) && t.text != "unlimited" {
            return Err(c.err_at(
                t,
                format!(
                    "`bw {}` clocks the pipe by a device's transmissions, which pspat does not \
                     do: give a rate (10Mbit/s)",
                    cut(t.text)
                ),
            ));
        }
    }
    c.unit("a bandwidth", units::parse_bandwidth)
}

/// The framing options of a link's line, as written (see the module docs).
#[derive(Default)]
struct FramingWords {
    overhead: Option<i32>,
    mpu: Option<u32>,
    linklayer: Option<LinkLayer>,
    presets: Option<Framing>,
}

impl FramingWords {
    /// Reads option `k`'s value if it is a framing option; whether it was.
    fn option(&mut self, c: &mut Cursor<'_, '_>, k: &str) -> R<bool> {
        match k {
            "overhead" => self.overhead = Some(overhead(c)?),
            "mpu" => self.mpu = Some(mpu(c)?),
            "linklayer" => self.linklayer = Some(linklayer(c)?),
            "framing" => self.presets = Some(framing(c)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether the line wrote any.
    fn given(&self) -> bool {
        self.overhead.is_some()
            || self.mpu.is_some()
            || self.linklayer.is_some()
            || self.presets.is_some()
    }

    /// The framing they give: the presets', with the parts written on their own replacing
    /// theirs.
    fn framing(&self) -> Framing {
        self.presets
            .unwrap_or_default()
            .with(self.overhead, self.mpu, self.linklayer)
    }
}

/// `overhead N`: bytes the link adds to every frame, `-64..=256` (may be negative).
pub(super) fn overhead(c: &mut Cursor<'_, '_>) -> R<i32> {
    framing_bytes(
        c,
        "overhead",
        "-64..=256",
        pspat_sched::framing::check_overhead,
    )
    .map(|v| v as i32)
}

/// `mpu N`: the smallest charge of a frame, `0..=256` bytes.
pub(super) fn mpu(c: &mut Cursor<'_, '_>) -> R<u32> {
    framing_bytes(c, "mpu", "0..=256", pspat_sched::framing::check_mpu).map(|v| v as u32)
}

/// A whole number of bytes for the framing option `key`, which `check` keeps in `range`.
fn framing_bytes(
    c: &mut Cursor<'_, '_>,
    key: &str,
    range: &str,
    check: fn(i64) -> Result<(), String>,
) -> R<i64> {
    let what = format!("an {key} in bytes ({range})");
    c.with(&what, |s| {
        let v: i64 = s
            .parse()
            .map_err(|_| format!("'{}' is not {what}", cut(s)))?;
        check(v)?;
        Ok::<_, String>(v)
    })
}

/// `linklayer ethernet|atm|ptm` (tc-stab's `adsl` is `atm`).
pub(super) fn linklayer(c: &mut Cursor<'_, '_>) -> R<LinkLayer> {
    c.with("a link layer (ethernet, atm or ptm)", LinkLayer::from_name)
}

/// `framing PRESET[,PRESET]...`: CAKE's keywords, in order (`pppoe-ptm,ether-vlan`).
pub(super) fn framing(c: &mut Cursor<'_, '_>) -> R<Framing> {
    const WHAT: &str = "a framing preset (pppoe-ptm, bridged-ptm, docsis, ethernet, ...)";
    let first = c.word(WHAT)?;
    let mut names = vec![first];
    while c.peek_kind(Kind::Comma) {
        c.pos += 1;
        names.push(c.word(WHAT)?);
    }
    for t in &names {
        pspat_sched::framing::Preset::named(t.text).map_err(|e| c.err_at(*t, e))?;
    }
    Framing::from_presets(names.iter().map(|t| t.text)).map_err(|e| c.err_at(first, e))
}

/// `delay MS`: whole milliseconds as ipfw reads them, `ms` optional; below 10 s.
pub(super) fn delay(c: &mut Cursor<'_, '_>) -> R<u64> {
    let t = c.word("a delay in milliseconds")?;
    let lower = t.text.to_ascii_lowercase();
    let digits = lower.strip_suffix("ms").unwrap_or(&lower);
    let ms: u32 = match digits.parse() {
        Ok(v) => v,
        Err(_) if digits.bytes().next().is_some_and(|b| b.is_ascii_digit()) => {
            return Err(c.err_at(
                t,
                format!(
                    "ipfw reads `delay {}` as whole milliseconds and ignores any other unit; \
                     write the delay in ms (250, 250ms)",
                    cut(t.text)
                ),
            ))
        }
        Err(_) => return Err(c.err_at(t, "expected a delay in milliseconds (250, 250ms)")),
    };
    if ms > MAX_DELAY_MS {
        return Err(c.err_at(t, "delay must be below 10000 ms, as in dummynet"));
    }
    Ok(u64::from(ms) * 1_000_000)
}

/// A probability `0..=1` written as a decimal.
fn probability(text: &str, what: &str) -> Result<Probability, String> {
    let v: f64 = text
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("expected {what}, a number 0..1"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{what} {} is not 0..1", cut(text)));
    }
    Ok(Probability((v * 1e9).round() as u32))
}

/// `plr P`. Newer FreeBSD's four-value form (a Gilbert-Elliott loss model) is refused by
/// name.
pub(super) fn plr(c: &mut Cursor<'_, '_>) -> R<Probability> {
    let p = c.with("a loss probability (0.01)", |s| {
        probability(s, "a loss probability")
    })?;
    if c.peek_kind(Kind::Comma) {
        return Err(c.err(
            "`plr A,B,C,D` (the Gilbert-Elliott loss model) is not emulated; give one \
             probability",
        ));
    }
    Ok(p)
}

/// `red W_Q/MIN_TH/MAX_TH/MAX_P` (thresholds in slots, or bytes with `K`/`B` units when
/// the queue is in bytes; resolution checks they fit the queue's unit).
pub(super) fn red(c: &mut Cursor<'_, '_>, gentle: bool) -> R<Red> {
    let t = c.word("RED parameters w_q/min_th/max_th/max_p")?;
    let parts: Vec<&str> = t.text.split('/').collect();
    let err = |m: String| c.err_at(t, m);
    let [w_q, min_th, max_th, max_p] = parts[..] else {
        return Err(err(
            "expected RED parameters w_q/min_th/max_th/max_p (0.002/30/80/0.1)".into(),
        ));
    };
    let w_q = probability(w_q, "w_q").map_err(err)?;
    if w_q.is_zero() {
        return Err(err("w_q must be above 0 (it weighs each new sample)".into()));
    }
    let th = |s: &str, what: &str| -> Result<u64, String> {
        units::parse_bytes(s).map_err(|e| unit_error(s, what, e).to_string())
    };
    let min_th = th(min_th, "min_th").map_err(err)?;
    let max_th = th(max_th, "max_th").map_err(err)?;
    let max_p = probability(max_p, "max_p").map_err(err)?;
    if min_th >= max_th {
        return Err(err(format!(
            "RED needs min_th < max_th ({min_th} >= {max_th})"
        )));
    }
    Ok(Red {
        w_q,
        min_th,
        max_th,
        max_p,
        gentle,
    })
}

/// `queue SIZE`: slots without a unit, bytes with `K`/`KB`/`Kbytes` (x1024) or
/// `B`/`bytes`. ipfw reads any other suffix as slots (`2M` is 2 slots, `50b` 50 slots);
/// those are refused naming both readings.
pub(super) fn queue_size(c: &mut Cursor<'_, '_>) -> R<QueueLimit> {
    let t = c.word("a queue size (slots, or bytes with a unit)")?;
    let text = t.text;
    let unit = text.trim_start_matches(|ch: char| ch.is_ascii_digit());
    let ipfw_bytes = unit.is_empty()
        || unit.starts_with(['K', 'k', 'B'])
        || unit.to_ascii_lowercase().starts_with("by");
    if !ipfw_bytes {
        return Err(c.err_at(
            t,
            format!(
                "ipfw reads `queue {}` as {} slots (it knows only K and bytes as queue units); \
                 write the slots as a bare number, or bytes as KB or B",
                cut(text),
                &text[..text.len() - unit.len()]
            ),
        ));
    }
    let (v, has_unit) =
        units::parse_size(text).map_err(|e| c.err_at(t, unit_error(text, "a queue size", e)))?;
    if has_unit {
        Ok(QueueLimit::Bytes(v))
    } else {
        u32::try_from(v)
            .map(QueueLimit::Packets)
            .map_err(|_| c.err_at(t, format!("{v} slots is too many")))
    }
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

/// An IPv6 mask: `/LEN`, a bare prefix length (as ipfw reads `src-ip6 64`), or an address.
fn mask6(text: &str) -> Result<u128, String> {
    let len = text.strip_prefix('/').unwrap_or(text);
    if len.bytes().all(|b| b.is_ascii_digit()) {
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

/// The mask fields after `mask` (also `sched_mask` / `flow_mask` in dummynet.txt's
/// spelling, read by the caller as `mask`).
pub(super) fn mask(c: &mut Cursor<'_, '_>) -> R<FlowMask> {
    let mut m = FlowMask::default();
    let mut seen = Seen::default();
    let mut any = false;
    while let Some(t) = c.peek() {
        let k = t.text.to_ascii_lowercase();
        let field = matches!(
            k.as_str(),
            "all"
                | "src-ip"
                | "dst-ip"
                | "src-ip6"
                | "dst-ip6"
                | "src-ipv6"
                | "dst-ipv6"
                | "src-port"
                | "dst-port"
                | "proto"
                | "flow-id"
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
            "src-ip6" | "src-ipv6" => m.src_ip6 = c.with("an IPv6 mask (/64, ffff::)", mask6)?,
            "dst-ip6" | "dst-ipv6" => m.dst_ip6 = c.with("an IPv6 mask (/64, ffff::)", mask6)?,
            "src-port" => m.src_port = c.with("a port mask", |s| parse_uint(s, 0xffff))? as u16,
            "dst-port" => m.dst_port = c.with("a port mask", |s| parse_uint(s, 0xffff))? as u16,
            "flow-id" => {
                return Err(c.err_at(
                    t,
                    "`flow-id` (the IPv6 flow label) is not a mask field pspat keys on",
                ))
            }
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
