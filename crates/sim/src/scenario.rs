//! A simulation scenario: the link, the scheduler and the flow groups, from TOML.
//!
//! ```toml
//! alg = "drr@quantum=9000"   # any registered algorithm, parameters after '@'
//! rate_bps = 10e9
//! txq = 1                    # transmit queue, packets (0: none)
//! delay = "50ms"             # link emulation (dummynet's pipe `delay`, default 0): a delay
//!                            # line after the wire, below 10s
//! plr = 0.01                 # ... and its `plr` (default 0): arrivals lost at random
//! framing = "pppoe-ptm"      # what the wire charges for a packet (pspat's link framing;
//! overhead = 8               # ... default none): CAKE's presets (a string or a list),
//! mpu = 64                   # ... tc's overhead (-64..=256), mpu (0..=256) and
//! linklayer = "ptm"          # ... linklayer (ethernet, atm, ptm), these three replacing the
//!                            # ... preset's parts
//! seed = 1
//! duration_ms = 20.0         # stop generating after this simulated time...
//! packets = 1_000_000        # ...or after this many packets, whichever comes first
//! wfi = true                 # T-WFI / B-WFI / GPS metrics (memory: ~90 bytes a packet)
//!
//! [[flows]]
//! name = "heavy"
//! count = 128
//! weight = 1
//! size = { kind = "fixed", len = 1500 }
//! arrival = { kind = "backlogged", depth = 2 }
//!
//! [[flows]]
//! name = "rr"
//! count = 16
//! size = { kind = "fixed", len = 150 }
//! arrival = { kind = "request-response", burst = { kind = "fixed", n = 8 }, think_us = 50 }
//! ```
//!
//! The link is the top-level `rate_bps`, `txq`, `delay` and `plr`: together they are a
//! dummynet pipe (`pipe 1 config bw 10Mbit/s delay 50ms plr 0.01`) with the scheduler in
//! front of its wire; see [`mod@crate::run`] for what each does to a packet. The framing
//! keys are a pipe's framing in pspat's configurations (`pipe 1 config ... framing
//! pppoe-ptm`), read by the same functions ([`pspat_sched::framing`]): a packet's `len` is
//! its frame (CAKE's presets assume a 14-byte Ethernet header in it), and the wire
//! charges [`Framing::wire_len`] of it.
//!
//! # Trees of classes
//!
//! With `[[classes]]` tables the link is shared by a tree of classes
//! ([`pspat_sched::tree`]) instead of one scheduler over every flow, and each flow group
//! names the leaf class its flows go to. `alg` is then the link's: how it orders the top
//! classes (one of the inner algorithms, [`pspat_sched::tree::spec::INNER_ALGORITHMS`]).
//!
//! ```toml
//! alg = "wf2q+"                  # the link's children
//! rate_bps = 100e6
//! duration_ms = 2000.0
//!
//! [[classes]]
//! name = "A"                     # unique; flows and children name it
//! alg = "qfq"                    # an inner class: how it orders its children
//! rate_bps = 30e6                # guaranteed rate (default 0: none), bit/s or "30Mbit/s"
//! ceil_bps = "60Mbit/s"          # maximum (default: none)
//! burst = 15000                  # bytes beyond the rate at once (default: 1 ms of it,
//! cburst = "15KB"                # ... at least two packets); cburst: the same for the ceil
//! weight = 2                     # share of the parent's excess in its band (default 1)
//! prio = 0                       # band among its siblings, lowest first (default 0)
//!
//! [[classes]]
//! name = "a1"
//! parent = "A"                   # default: under the link
//! alg = "drr"                    # a leaf: the scheduler of its flows, any algorithm
//!
//! [[flows]]
//! name = "bulk"
//! class = "a1"                   # a leaf class; every group names one
//! size = { kind = "fixed", len = 1500 }
//! arrival = { kind = "backlogged" }
//! ```
//!
//! A leaf holds the sum of its flows' `limit_pkts`; the tree's budget (`mtu`) is the
//! largest `max_len` of the flows. The classes' throughput is measured from `warmup_ms`
//! (default: a fifth of the traffic's span) to the end of the traffic
//! ([`crate::classes`]). The classes are checked as the configurations' are
//! ([`pspat_sched::tree::TreeSpec::validate`]: weights, bands, ceils against rates,
//! depth, cycles, inner algorithms), with the class named in the message. A tree does not
//! run on a framed link here (`framing`, `overhead`, `mpu`, `linklayer`: its rates count
//! the packets' bytes, the wire would count more), and `capacity` is the flows' limits.
//!
//! Unknown keys are errors (a misspelt key would otherwise silently take its default).

use std::path::Path;
use std::time::Duration;

use pspat_sched::framing::{self, Framing, LinkLayer};
use pspat_sched::tree::{ClassSpec, TreeSpec};
use pspat_sched::{registry, FlowParams, Params, MAX_PACKET_LEN, MAX_WEIGHT};
use serde::{Deserialize, Deserializer};

use crate::error::SimError;
use crate::traffic::{ArrivalSpec, SizeDist};

/// Default per-flow queue limit, packets.
pub const DEFAULT_LIMIT_PKTS: u32 = 1024;

/// The link's emulated delay must be below this: dummynet refuses a pipe `delay` of 10 s or
/// more, and it bounds what the f32 delay samples lose (under 1 us at 10 s).
pub const MAX_DELAY: Duration = Duration::from_secs(10);

/// A group of identical flows.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowGroup {
    /// Name in the reports.
    pub name: String,
    /// Number of flows.
    #[serde(default = "one")]
    pub count: u32,
    /// Weight of each flow, `1..=2^16`.
    #[serde(default = "one")]
    pub weight: u32,
    /// Packet lengths.
    pub size: SizeDist,
    /// Arrival process.
    pub arrival: ArrivalSpec,
    /// Per-flow queue limit, packets (arrivals beyond it are dropped and reported).
    #[serde(default = "default_limit")]
    pub limit_pkts: u32,
    /// Largest packet the flow declares to the scheduler (default: the size distribution's
    /// largest). QFQ sizes its groups from it.
    #[serde(default)]
    pub max_len: Option<u32>,
    /// The leaf class its flows go to, in a scenario with `[[classes]]`.
    #[serde(default)]
    pub class: Option<String>,
}

/// A class of a tree (a `[[classes]]` table; see the module documentation).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClassDef {
    /// Name: flows and children name it.
    pub name: String,
    /// The parent class's name; absent: under the link.
    #[serde(default)]
    pub parent: Option<String>,
    /// An inner class: how it orders its children; a leaf: the scheduler of its flows,
    /// optionally `@key=value,...`.
    pub alg: String,
    /// Guaranteed rate, bit/s (a number, or a string with a unit: `"30Mbit/s"`); 0: none.
    #[serde(default, deserialize_with = "de_bps")]
    pub rate_bps: u64,
    /// Maximum rate, bit/s, as `rate_bps`; absent: none.
    #[serde(default, deserialize_with = "de_some_bps")]
    pub ceil_bps: Option<u64>,
    /// Bytes it may send at once beyond its rate (a number or `"15KB"`); absent: 1 ms of
    /// the rate, at least two packets.
    #[serde(default, deserialize_with = "de_some_bytes")]
    pub burst: Option<u64>,
    /// The same beyond its ceil.
    #[serde(default, deserialize_with = "de_some_bytes")]
    pub cburst: Option<u64>,
    /// Share of its parent's excess among the siblings of its band.
    #[serde(default = "one")]
    pub weight: u32,
    /// Priority band among its siblings, lowest served first.
    #[serde(default)]
    pub prio: u8,
}

fn one() -> u32 {
    1
}
fn default_limit() -> u32 {
    DEFAULT_LIMIT_PKTS
}
fn default_seed() -> u64 {
    1
}
fn yes() -> bool {
    true
}

/// Reads the `delay` key: a duration with its unit, through `pspat-units` (the one duration
/// parser). A TOML number is refused rather than read: pspat's rule makes a bare number
/// seconds, ipfw's `delay 50` is milliseconds, and either reading would surprise someone.
fn de_delay<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Duration;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a duration string for `delay`, such as \"50ms\"")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
            pspat_units::parse_duration(v).map_err(|e| E::custom(format!("delay: {e}")))
        }
    }
    d.deserialize_str(V)
}

/// A whole number of units read from a TOML number (integer, or a float that is whole) or,
/// through `parse` (one of `pspat-units`' parsers), from a string with its unit.
fn de_units<'de, D: Deserializer<'de>>(
    d: D,
    what: &'static str,
    parse: fn(&str) -> Result<u64, pspat_units::UnitError>,
) -> Result<u64, D::Error> {
    struct V {
        what: &'static str,
        parse: fn(&str) -> Result<u64, pspat_units::UnitError>,
    }
    impl serde::de::Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(
                f,
                "{}: a whole number at least 0, or a string with a unit",
                self.what
            )
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("{} {v} is negative", self.what)))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<u64, E> {
            // 2^64 is where u64 ends; `as` would saturate silently.
            if v >= 0.0 && v.fract() == 0.0 && v < 18_446_744_073_709_551_616.0 {
                Ok(v as u64)
            } else {
                Err(E::custom(format!(
                    "{} {v} is not a whole number at least 0",
                    self.what
                )))
            }
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<u64, E> {
            (self.parse)(v).map_err(|e| E::custom(format!("{}: {e}", self.what)))
        }
    }
    d.deserialize_any(V { what, parse })
}

/// Reads a rate: bit/s, or a string with a unit (`"30Mbit/s"`).
fn de_bps<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    de_units(d, "rate", pspat_units::parse_bandwidth)
}

fn de_some_bps<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_bps(d).map(Some)
}

/// Reads a size: bytes, or a string with a unit (`"15KB"`).
fn de_some_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_units(d, "size", pspat_units::parse_bytes).map(Some)
}

/// Reads the `framing` key: one string of presets separated by commas, or a list of them.
fn de_presets<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Presets {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Presets::deserialize(d)? {
        Presets::One(s) => split_presets(&s),
        Presets::Many(v) => v,
    })
}

/// Framing presets written as one string, separated by commas (`bridged-ptm,ether-vlan`).
pub fn split_presets(text: &str) -> Vec<String> {
    text.split(',').map(|p| p.trim().to_owned()).collect()
}

/// What to plot for one run.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    /// Flows whose cumulative service is drawn against the fluid reference (default: the
    /// first flow of each group, at most 4).
    #[serde(default)]
    pub flows: Vec<u32>,
    /// Time window of the service plot, ms from the start (default: the first 2 ms).
    #[serde(default)]
    pub window_ms: Option<f64>,
}

/// A simulation.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name in the reports.
    #[serde(default)]
    pub name: String,
    /// Algorithm: a registered name or alias, optionally `@key=value,key=value`.
    pub alg: String,
    /// Link rate, bit/s.
    pub rate_bps: f64,
    /// Transmit queue, packets (0: the scheduler is asked when the wire is idle).
    #[serde(default)]
    pub txq: u32,
    /// Emulated delay of the link (dummynet's pipe `delay`), below [`MAX_DELAY`]: each
    /// packet the wire releases is delivered this long after its last bit left (TOML: a
    /// duration string, `"50ms"`).
    #[serde(default, deserialize_with = "de_delay")]
    pub delay: Duration,
    /// Emulated random loss of the link (dummynet's pipe `plr`): the probability, `0..=1`,
    /// that an arriving packet is lost before its queue.
    #[serde(default)]
    pub plr: f64,
    /// The wire's framing: CAKE's presets, in order (TOML: a string, `"pppoe-ptm"` or
    /// `"bridged-ptm,ether-vlan"`, or a list of them); see [`Scenario::link_framing`].
    #[serde(default, deserialize_with = "de_presets")]
    pub framing: Vec<String>,
    /// Bytes the wire adds to every packet (tc's `overhead`, `-64..=256`), replacing the
    /// presets'.
    #[serde(default)]
    pub overhead: Option<i32>,
    /// The smallest charge of a packet (tc's `mpu`, `0..=256` bytes), replacing the
    /// presets'.
    #[serde(default)]
    pub mpu: Option<u32>,
    /// `ethernet`, `atm` or `ptm`, replacing the presets'.
    #[serde(default)]
    pub linklayer: Option<String>,
    /// Seed of every random draw.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Stop generating after this simulated time, ms.
    #[serde(default)]
    pub duration_ms: Option<f64>,
    /// Stop generating after this many packets.
    #[serde(default)]
    pub packets: Option<u64>,
    /// Measure T-WFI, B-WFI and the GPS delay and lag (keeps every packet's record).
    #[serde(default = "yes")]
    pub wfi: bool,
    /// Scheduler capacity, packets (default: the sum of the flows' limits, at most 2^24).
    #[serde(default)]
    pub capacity: Option<u32>,
    /// Flow groups.
    pub flows: Vec<FlowGroup>,
    /// The classes of a tree sharing the link (none: `alg` schedules every flow).
    #[serde(default)]
    pub classes: Vec<ClassDef>,
    /// A tree's throughput is measured from this time to the end of the traffic, ms
    /// (default: a fifth of the traffic's span).
    #[serde(default)]
    pub warmup_ms: Option<f64>,
    /// Plot options.
    #[serde(default)]
    pub plot: PlotSpec,
}

/// Splits `name@k=v,k=v` into the algorithm name and its parameters.
pub fn parse_alg(spec: &str) -> Result<(String, Params), SimError> {
    let (name, params) = spec.split_once('@').unwrap_or((spec, ""));
    let params: Params = params
        .parse()
        .map_err(|e| SimError::Scenario(format!("alg '{spec}': {e}")))?;
    let info = registry::lookup(name.trim())?;
    params.check_known(info)?;
    Ok((info.name.to_owned(), params))
}

impl Scenario {
    /// Parses TOML text (`origin` names it in errors) and validates it.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, SimError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| SimError::File {
            path: origin.to_owned(),
            reason: e.to_string(),
        })?;
        s.validate()?;
        Ok(s)
    }

    /// Reads and validates a scenario file.
    pub fn from_file(path: &Path) -> Result<Self, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::File {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// A scenario from an algorithm, a link rate, when to stop, and one flow group per
    /// inline TOML table body (`name="voip", count=10, size={kind="fixed",len=200}, ...`),
    /// as `pspat sim --flow` gives them. Without `packets` and `duration_ms`, it stops
    /// after 100 000 packets.
    pub fn from_flows(
        alg: &str,
        rate_bps: f64,
        packets: Option<u64>,
        duration_ms: Option<f64>,
        flows: &[String],
    ) -> Result<Self, SimError> {
        let bad = |m: String| SimError::Scenario(m);
        let mut t = toml::Table::new();
        t.insert("alg".into(), toml::Value::String(alg.to_owned()));
        t.insert("rate_bps".into(), toml::Value::Float(rate_bps));
        let packets = match (packets, duration_ms) {
            (None, None) => Some(100_000),
            (p, _) => p,
        };
        if let Some(p) = packets {
            let p = i64::try_from(p).map_err(|_| bad(format!("packets {p} is too large")))?;
            t.insert("packets".into(), toml::Value::Integer(p));
        }
        if let Some(d) = duration_ms {
            t.insert("duration_ms".into(), toml::Value::Float(d));
        }
        let mut groups = Vec::new();
        for body in flows {
            let not_a_table = || bad(format!("flow '{body}' is not an inline TOML table body"));
            let mut x: toml::Table =
                toml::from_str(&format!("x = {{ {body} }}")).map_err(|_| not_a_table())?;
            match x.remove("x") {
                Some(v @ toml::Value::Table(_)) => groups.push(v),
                _ => return Err(not_a_table()),
            }
        }
        t.insert("flows".into(), toml::Value::Array(groups));
        let text = toml::to_string(&t).map_err(|e| bad(format!("flows: {e}")))?;
        Self::from_toml(&text, "--flow")
    }

    /// Checks every field and loads the empirical size files.
    pub fn validate(&mut self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Scenario(m));
        parse_alg(&self.alg)?;
        if !(self.rate_bps.is_finite() && self.rate_bps > 0.0) {
            return bad(format!("rate_bps must be positive, got {}", self.rate_bps));
        }
        if self.txq > 1 << 20 {
            return bad(format!("txq {} above 2^20", self.txq));
        }
        if self.delay >= MAX_DELAY {
            return bad(format!(
                "delay {} is not below 10s (dummynet's limit)",
                pspat_units::format_duration(
                    u64::try_from(self.delay.as_nanos()).unwrap_or(u64::MAX)
                )
            ));
        }
        // `contains` is false for NaN too.
        if !(0.0..=1.0).contains(&self.plr) {
            return bad(format!(
                "plr {} is not a probability in 0..=1 (0.01 loses 1% of the packets)",
                self.plr
            ));
        }
        self.link_framing()?;
        match (self.duration_ms, self.packets) {
            (None, None) => return bad("give duration_ms or packets (or both)".into()),
            (Some(d), _) if !(d.is_finite() && d > 0.0) => {
                return bad(format!("duration_ms must be positive, got {d}"))
            }
            (_, Some(0)) => return bad("packets must be >= 1".into()),
            _ => {}
        }
        if self.flows.is_empty() {
            return bad("no flows: add a [[flows]] group".into());
        }
        let mut total: u64 = 0;
        for g in &mut self.flows {
            if g.count == 0 {
                return bad(format!("group '{}': count must be >= 1", g.name));
            }
            if g.weight == 0 || g.weight > MAX_WEIGHT {
                return bad(format!(
                    "group '{}': weight {} not in 1..={MAX_WEIGHT}",
                    g.name, g.weight
                ));
            }
            if g.limit_pkts == 0 {
                return bad(format!("group '{}': limit_pkts must be >= 1", g.name));
            }
            g.size.load(&g.name)?;
            g.arrival.check(&g.name)?;
            if let ArrivalSpec::Backlogged { depth } = g.arrival {
                if depth > g.limit_pkts {
                    return bad(format!(
                        "group '{}': backlogged depth {depth} above limit_pkts {}",
                        g.name, g.limit_pkts
                    ));
                }
            }
            if let Some(m) = g.max_len {
                if m < g.size.max_len() {
                    return bad(format!(
                        "group '{}': max_len {m} below the largest packet of its size \
                         distribution ({})",
                        g.name,
                        g.size.max_len()
                    ));
                }
            }
            total += u64::from(g.count);
        }
        if total > 1 << 24 {
            return bad(format!("{total} flows: at most 2^24"));
        }
        for &f in &self.plot.flows {
            if u64::from(f) >= total {
                return bad(format!("plot.flows names flow {f} of {total}"));
            }
        }
        if let Some(w) = self.warmup_ms {
            if !(w.is_finite() && w >= 0.0) {
                return bad(format!("warmup_ms must be at least 0, got {w}"));
            }
            if self.classes.is_empty() {
                return bad("warmup_ms is for trees: add [[classes]]".into());
            }
        }
        self.tree()?;
        Ok(())
    }

    /// The tree of the `[[classes]]`, checked, and each flow group's leaf (its index in
    /// the tree's classes); `None` without classes. Errors name the class or the group.
    pub fn tree(&self) -> Result<Option<(TreeSpec, Vec<usize>)>, SimError> {
        let bad = |m: String| Err(SimError::Scenario(m));
        if self.classes.is_empty() {
            if let Some(g) = self.flows.iter().find(|g| g.class.is_some()) {
                return bad(format!(
                    "group '{}' names a class, and there are no [[classes]]",
                    g.name
                ));
            }
            return Ok(None);
        }
        if !self.framing.is_empty()
            || self.overhead.is_some()
            || self.mpu.is_some()
            || self.linklayer.is_some()
        {
            return bad(
                "classes: a tree does not run on a framed link (framing, overhead, mpu, \
                 linklayer) yet: its rates count the packets' bytes, the wire more"
                    .into(),
            );
        }
        if self.capacity.is_some() {
            return bad(
                "capacity: a tree's leaves hold their flows' limits (give limit_pkts)".into(),
            );
        }
        let (link_alg, link_params) = parse_alg(&self.alg)?;
        if !link_params.pairs().is_empty() {
            return bad(format!(
                "alg '{}': the link of a tree takes no parameters",
                self.alg
            ));
        }
        pspat_sched::tree::spec::inner_kind(&link_alg)
            .map_err(|e| SimError::Scenario(format!("alg (the link of a tree): {e}")))?;
        let index = |name: &str| self.classes.iter().position(|c| c.name == name);
        let mut spec = TreeSpec::new(&link_alg);
        // The budget of a class in its parent's schedule: the largest packet (below).
        spec.mtu = 1;
        for (i, c) in self.classes.iter().enumerate() {
            if c.name.is_empty() {
                return bad(format!("class {i} has no name"));
            }
            if index(&c.name) != Some(i) {
                return bad(format!("class '{}' is defined twice", c.name));
            }
            let parent = match &c.parent {
                None => None,
                Some(p) => Some(index(p).ok_or_else(|| {
                    SimError::Scenario(format!("class '{}': parent '{p}' is not a class", c.name))
                })?),
            };
            let (alg, params) = parse_alg(&c.alg)
                .map_err(|e| SimError::Scenario(format!("class '{}': {e}", c.name)))?;
            spec.add(ClassSpec {
                params,
                rate_bps: c.rate_bps,
                ceil_bps: c.ceil_bps,
                burst: c.burst,
                cburst: c.cburst,
                weight: c.weight,
                prio: c.prio,
                ..ClassSpec::new(c.name.clone(), parent, &alg)
            });
        }
        let inner = spec.has_children();
        for (i, c) in spec.classes.iter().enumerate() {
            if inner[i] && !c.params.pairs().is_empty() {
                return bad(format!(
                    "class '{}': an inner class's alg takes no parameters",
                    c.name
                ));
            }
        }
        let mut leaf_of = Vec::with_capacity(self.flows.len());
        let mut limits = vec![0u64; spec.classes.len()];
        for g in &self.flows {
            let Some(name) = &g.class else {
                return bad(format!(
                    "group '{}': give its class (a leaf of the [[classes]])",
                    g.name
                ));
            };
            let Some(c) = index(name) else {
                return bad(format!("group '{}': class '{name}' is not a class", g.name));
            };
            if inner[c] {
                return bad(format!(
                    "group '{}': class '{name}' has classes under it: flows go to leaves",
                    g.name
                ));
            }
            leaf_of.push(c);
            limits[c] += u64::from(g.count) * u64::from(g.limit_pkts);
            let max_len = g.max_len.unwrap_or_else(|| g.size.max_len());
            spec.mtu = spec.mtu.max(max_len);
        }
        // A leaf without flows offers nothing; it still needs room for a packet.
        for (k, l) in spec.classes.iter_mut().zip(limits) {
            k.limit_pkts = l.clamp(1, 1 << 24) as u32;
        }
        spec.mtu = spec.mtu.min(MAX_PACKET_LEN);
        spec.validate()
            .map_err(|e| SimError::Scenario(format!("classes: {e}")))?;
        Ok(Some((spec, leaf_of)))
    }

    /// The wire's framing: the presets' (none: nothing added), with `overhead`, `mpu` and
    /// `linklayer` replacing their parts, as a pipe's in ipfw syntax. A bad name or a value
    /// out of range is an error naming it.
    pub fn link_framing(&self) -> Result<Framing, SimError> {
        let bad = |m: String| SimError::Scenario(m);
        let presets = if self.framing.is_empty() {
            Framing::PLAIN
        } else {
            Framing::from_presets(self.framing.iter().map(String::as_str)).map_err(bad)?
        };
        if let Some(o) = self.overhead {
            framing::check_overhead(i64::from(o)).map_err(bad)?;
        }
        if let Some(m) = self.mpu {
            framing::check_mpu(i64::from(m)).map_err(bad)?;
        }
        let linklayer = match &self.linklayer {
            Some(l) => Some(LinkLayer::from_name(l).map_err(bad)?),
            None => None,
        };
        Ok(presets.with(self.overhead, self.mpu, linklayer))
    }

    /// Number of flows.
    pub fn flow_count(&self) -> usize {
        self.flows.iter().map(|g| g.count as usize).sum()
    }

    /// Flow parameters of a group's flows.
    pub fn flow_params(g: &FlowGroup) -> FlowParams {
        FlowParams::weighted(g.weight)
            .with_max_len(g.max_len.unwrap_or_else(|| g.size.max_len()))
            .with_limit_pkts(g.limit_pkts)
    }

    /// The scheduler capacity.
    pub fn sched_capacity(&self) -> u32 {
        self.capacity.unwrap_or_else(|| {
            let sum: u64 = self
                .flows
                .iter()
                .map(|g| u64::from(g.count) * u64::from(g.limit_pkts))
                .sum();
            sum.clamp(16, 1 << 24) as u32
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
        alg = "drr@quantum=9000"
        rate_bps = 1e9
        duration_ms = 1.0
        [[flows]]
        name = "a"
        size = { kind = "fixed", len = 1500 }
        arrival = { kind = "backlogged" }
    "#;

    #[test]
    fn flags_make_a_scenario() {
        let flow =
            r#"name="a", weight=3, size={kind="fixed",len=1500}, arrival={kind="backlogged"}"#;
        let s = Scenario::from_flows("drr", 1e9, None, None, &[flow.to_owned()]).unwrap();
        assert_eq!(
            (s.alg.as_str(), s.rate_bps, s.packets),
            ("drr", 1e9, Some(100_000))
        );
        assert_eq!((s.flows.len(), s.flows[0].weight), (1, 3));
        let s = Scenario::from_flows("qfq", 1e6, None, Some(2.0), &[flow.to_owned()]).unwrap();
        assert_eq!((s.packets, s.duration_ms), (None, Some(2.0)));
        let e = Scenario::from_flows("qfq", 1e9, None, None, &["x=".to_owned()]).unwrap_err();
        assert!(e.to_string().contains("'x='"), "{e}");
        assert!(Scenario::from_flows("nope", 1e9, None, None, &[flow.to_owned()]).is_err());
    }

    #[test]
    fn a_valid_scenario_parses() {
        let s = Scenario::from_toml(OK, "ok").unwrap();
        assert_eq!(s.flow_count(), 1);
        assert_eq!(s.seed, 1);
        assert!(s.wfi);
        let (name, p) = parse_alg(&s.alg).unwrap();
        assert_eq!(name, "drr");
        assert_eq!(p.pairs(), [("quantum".to_owned(), "9000".to_owned())]);
    }

    /// `OK` with `keys` beside its link rate.
    fn link(keys: &str) -> String {
        OK.replace("rate_bps = 1e9", &format!("rate_bps = 1e9\n{keys}"))
    }

    #[test]
    fn the_link_emulation_keys_parse() {
        let s = Scenario::from_toml(&link("delay = \"50ms\"\nplr = 0.01"), "t").unwrap();
        assert_eq!((s.delay, s.plr), (Duration::from_millis(50), 0.01));
        // absent: no delay, no loss; the bounds themselves are accepted
        let s = Scenario::from_toml(OK, "t").unwrap();
        assert_eq!((s.delay, s.plr), (Duration::ZERO, 0.0));
        let s = Scenario::from_toml(&link("delay = \"9.999s\"\nplr = 1.0"), "t").unwrap();
        assert_eq!((s.delay, s.plr), (Duration::from_millis(9999), 1.0));
    }

    #[test]
    fn the_framing_keys_parse_as_a_pipes() {
        let f = |keys: &str| {
            Scenario::from_toml(&link(keys), "t")
                .unwrap()
                .link_framing()
                .unwrap()
        };
        assert_eq!(f(""), Framing::PLAIN);
        let atm10 = Framing::new(10, 0, LinkLayer::Atm);
        assert_eq!(f("overhead = 10\nlinklayer = \"atm\""), atm10);
        // pppoe-ptm (30 on the IP packet) and a VLAN tag (4): 20 on the frame; the mpu
        // given beside them is added.
        let ptm = Framing::new(20, 64, LinkLayer::Ptm);
        assert_eq!(f("framing = \"pppoe-ptm,ether-vlan\"\nmpu = 64"), ptm);
        assert_eq!(
            f("framing = [\"pppoe-ptm\", \"ether-vlan\"]\nmpu = 64"),
            ptm
        );
    }

    /// A two-level tree: `A` (inner) with leaves `a1`, `a2`, and a leaf `b`; one flow group
    /// per leaf.
    const TREE: &str = r#"
        duration_ms = 1.0
        rate_bps = 1e9
        alg = "wf2q+"
        [[classes]]
        name = "A"
        alg = "qfq"
        rate_bps = "300Mbit/s"
        ceil_bps = 6e8
        cburst = "15KB"
        [[classes]]
        name = "a1"
        parent = "A"
        alg = "drr@quantum=3000"
        weight = 2
        [[classes]]
        name = "a2"
        parent = "A"
        alg = "fifo"
        prio = 1
        [[classes]]
        name = "b"
        alg = "fifo"
        [[flows]]
        name = "x"
        class = "a1"
        count = 3
        limit_pkts = 100
        size = { kind = "fixed", len = 1000 }
        arrival = { kind = "backlogged" }
        [[flows]]
        name = "y"
        class = "b"
        size = { kind = "uniform", min = 64, max = 1400 }
        arrival = { kind = "backlogged" }
    "#;

    #[test]
    fn a_tree_parses_into_its_spec() {
        let sc = Scenario::from_toml(TREE, "t").unwrap();
        let (spec, leaf_of) = sc.tree().unwrap().unwrap();
        assert_eq!(leaf_of, [1, 3]);
        assert_eq!(spec.algorithm, "wf2q+");
        assert_eq!(spec.mtu, 1400, "the largest packet");
        let a = &spec.classes[0];
        assert_eq!(
            (a.rate_bps, a.ceil_bps, a.cburst, a.parent),
            (300_000_000, Some(600_000_000), Some(15 * 1024), None)
        );
        let a1 = &spec.classes[1];
        assert_eq!(
            (a1.parent, a1.weight, a1.algorithm.as_str()),
            (Some(0), 2, "drr")
        );
        assert_eq!(
            a1.params.pairs(),
            [("quantum".to_owned(), "3000".to_owned())]
        );
        assert_eq!(a1.limit_pkts, 300, "its flows' limits");
        assert_eq!(spec.classes[2].limit_pkts, 1, "no flows: room for one");
        assert_eq!(spec.classes[2].prio, 1);
        // no classes, no tree
        assert!(Scenario::from_toml(OK, "t")
            .unwrap()
            .tree()
            .unwrap()
            .is_none());
    }

    #[test]
    fn tree_errors_name_the_class_or_group() {
        let cases = [
            (
                TREE.replace(
                    "parent = \"A\"\n        alg = \"fifo\"",
                    "parent = \"Z\"\n        alg = \"fifo\"",
                ),
                "class 'a2': parent 'Z' is not a class",
            ),
            (
                TREE.replace("name = \"b\"", "name = \"a1\""),
                "class 'a1' is defined twice",
            ),
            (
                TREE.replace("class = \"b\"", "class = \"A\""),
                "group 'y': class 'A' has classes under it",
            ),
            (
                TREE.replace("class = \"b\"", "class = \"c\""),
                "group 'y': class 'c' is not a class",
            ),
            (
                TREE.replace("class = \"b\"\n", ""),
                "group 'y': give its class",
            ),
            (
                TREE.replace("alg = \"qfq\"", "alg = \"qfq@x=1\""),
                "class 'A': ",
            ),
            (
                TREE.replace("alg = \"qfq\"", "alg = \"fifo\""),
                "class A: 'fifo' cannot schedule",
            ),
            (
                TREE.replace("alg = \"wf2q+\"", "alg = \"fifo\""),
                "alg (the link of a tree): 'fifo' cannot",
            ),
            (
                TREE.replace("alg = \"wf2q+\"", "alg = \"drr@quantum=9000\""),
                "the link of a tree takes no parameters",
            ),
            (
                TREE.replace("alg = \"qfq\"", "alg = \"drr@quantum=9000\""),
                "class 'A': an inner class's alg takes no parameters",
            ),
            (
                TREE.replace("ceil_bps = 6e8", "ceil_bps = 2e8"),
                "class A: ceil 200000000 bit/s is below its rate",
            ),
            (
                TREE.replace("prio = 1", "prio = 8"),
                "class a2: prio 8 must be 0..=7",
            ),
            (
                TREE.replace("weight = 2", "weight = 0"),
                "class a1: weight 0",
            ),
            (
                TREE.replace("\"300Mbit/s\"", "\"300 parsecs\""),
                "rate: unknown bandwidth unit",
            ),
            (
                TREE.replace("ceil_bps = 6e8", "ceil_bps = 6.5"),
                "rate 6.5 is not a whole number",
            ),
            (
                TREE.replace("ceil_bps = 6e8", "ceil_bps = -1"),
                "rate -1 is negative",
            ),
            (
                TREE.replace("rate_bps = 1e9", "rate_bps = 1e9\nframing = \"docsis\""),
                "a tree does not run on a framed link",
            ),
            (
                TREE.replace("rate_bps = 1e9", "rate_bps = 1e9\ncapacity = 10"),
                "capacity: a tree's leaves",
            ),
            (
                TREE.replace("rate_bps = 1e9", "rate_bps = 1e9\nwarmup_ms = -1.0"),
                "warmup_ms must be at least 0",
            ),
            (
                TREE.replace("name = \"A\"", "name = \"A\"\ncolour = 1"),
                "colour",
            ),
            (link("warmup_ms = 1.0"), "warmup_ms is for trees"),
            (
                OK.replace("name = \"a\"", "name = \"a\"\nclass = \"x\""),
                "group 'a' names a class, and there are no [[classes]]",
            ),
        ];
        for (text, want) in cases {
            let e = Scenario::from_toml(&text, "t").unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let cases = [
            (OK.replace("drr@quantum=9000", "nosuch"), "'nosuch'"),
            (OK.replace("quantum=9000", "bogus=1"), "'bogus'"),
            (OK.replace("rate_bps = 1e9", "rate_bps = 0.0"), "rate_bps"),
            (
                OK.replace("duration_ms = 1.0", ""),
                "duration_ms or packets",
            ),
            (OK.replace("len = 1500", "len = 0"), "len 0"),
            (
                OK.replace("name = \"a\"", "name = \"a\"\nweight = 0"),
                "weight 0",
            ),
            (
                OK.replace("name = \"a\"", "name = \"a\"\ncolour = 1"),
                "colour",
            ),
            (
                OK.replace(
                    "kind = \"backlogged\"",
                    "kind = \"backlogged\", depth = 5000",
                ),
                "depth 5000",
            ),
            (
                OK.replace("name = \"a\"", "name = \"a\"\nmax_len = 100"),
                "max_len 100",
            ),
            (link("plr = 1.5"), "plr 1.5 is not a probability"),
            (link("plr = -0.01"), "plr -0.01 is not a probability"),
            (link("plr = nan"), "plr NaN is not a probability"),
            (
                link("delay = \"50 parsecs\""),
                "delay: unknown duration unit 'parsecs'",
            ),
            (link("delay = 50"), "expected a duration string for `delay`"),
            (link("delay = \"10s\""), "delay 10s is not below 10s"),
            (
                link("overhead = 300"),
                "overhead 300 is not -64..=256 bytes",
            ),
            (link("mpu = 257"), "mpu 257 is not 0..=256 bytes"),
            (link("linklayer = \"adls\""), "unknown link layer 'adls'"),
            (
                link("framing = \"pppoe-ptn\""),
                "unknown framing preset 'pppoe-ptn'",
            ),
        ];
        for (text, want) in cases {
            let e = Scenario::from_toml(&text, "t").unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }
}
