//! The configuration model: what both front ends (TOML and ipfw syntax) produce, what
//! `pspat config check` prints, and what the classifier and the engine are built from.
//!
//! It follows dummynet's user view (see the dummynet scheduling slides, "Packet scheduling
//! in Dummynet - User view"):
//!
//! - a **pipe** ([`PipeSpec`], `pipe N config`) is dummynet's *link* N: a bandwidth and
//!   its emulation (a delay line after the link, a burst). Packets a rule sends to `pipe N`
//!   go through the pipe's own FIFO queue on that link (one instance, one FIFO link, per
//!   value of the pipe's mask), with the pipe's queue limit, loss and RED parameters.
//! - a **scheduler** ([`SchedSpec`], `sched N config`) is an algorithm clocked by link N:
//!   it shares its number with pipe N, whose bandwidth and delay it uses (a scheduler with no
//!   pipe of its number runs on its own `bw`, a pspat extension, or unlimited). As in
//!   dummynet, the pipe's FIFO and scheduler N are two users of link N's parameters, each
//!   with its own budget. Its *scheduler mask* creates one independent instance per masked
//!   value of the packet's 5-tuple (one link per customer, say); instances share nothing.
//!   `pipe N config ... type ALG` configures scheduler N too; a flowset attached to pipe N
//!   with no `sched N` written gets dummynet's default, a `wf2q+` scheduler without a mask.
//! - a **flowset** ([`FlowsetSpec`], `queue N config`) is a template of queues attached to
//!   one scheduler (`sched S`, or `pipe P`, which names the same scheduler): a weight, a
//!   queue limit, loss and RED. Its *flow mask* creates one queue per masked value; every
//!   such queue has the flowset's parameters.
//! - **rules** ([`Rule`]), tried in number order, match a packet and send it to a flowset
//!   or a pipe (or let it pass, or drop it). A rule's target may be `tablearg`: the value a
//!   table lookup returned while matching.
//! - **tables** ([`Table`]) map address prefixes to values, looked up by longest prefix.
//!
//! **Which bytes a link charges.** A link's bandwidth is spent on frames: in `pspat shape`
//! and `pspat run`, the Ethernet frame from the destination MAC address to the end of the
//! payload (a VLAN tag included; no preamble, FCS or inter-frame gap), what Linux's tc
//! charges on an Ethernet device (`skb->len`). A pipe, or a scheduler with its own `bw`, may
//! say what its link adds ([`Framing`]: `overhead`, `mpu`, `linklayer`, or one of CAKE's
//! presets), as tc-stab(8), HTB and CAKE do; the link then charges each frame
//! [`Framing::wire_len`] bytes (see `pspat_sched::framing`). The schedulers still share
//! frame bytes: framing changes how fast the link drains, not who is served.
//!
//! Dynamically created queues and instances are bounded ([`FlowsetSpec::max_queues`],
//! [`SchedSpec::max_instances`]) and expire after being idle ([`FlowsetSpec::idle_ns`],
//! [`SchedSpec::idle_ns`]): hitting a bound is a counted drop with a reason, never
//! unbounded memory.
//!
//! Everything here is plain data, compared with `==` (the property tests check that the two
//! front ends produce equal models) and printed by `Display` in ipfw syntax.

use std::collections::BTreeMap;
use std::net::IpAddr;

pub use pspat_sched::framing::{Framing, LinkLayer};

/// Packet direction as seen by the shaper: `in` = received on the input interface, `out` =
/// about to leave on the output interface. `pspat shape` classifies frames as `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    In,
    Out,
}

/// A mask over the 5-tuple. A field that is 0 is ignored; a mask that is all 0 creates a
/// single queue (or instance). IPv4 and IPv6 addresses have separate masks, as in ipfw
/// (`src-ip`, `src-ip6`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowMask {
    pub src_ip: u32,
    pub dst_ip: u32,
    pub src_ip6: u128,
    pub dst_ip6: u128,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
}

impl FlowMask {
    /// The mask that keeps every bit (`mask all` in ipfw).
    pub const ALL: FlowMask = FlowMask {
        src_ip: u32::MAX,
        dst_ip: u32::MAX,
        src_ip6: u128::MAX,
        dst_ip6: u128::MAX,
        src_port: u16::MAX,
        dst_port: u16::MAX,
        proto: u8::MAX,
    };

    /// Whether this mask creates only one queue (or instance).
    pub fn is_empty(&self) -> bool {
        *self == FlowMask::default()
    }
}

/// How a queue's length is bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueLimit {
    /// At most this many packets (`queue 50` in ipfw).
    Packets(u32),
    /// At most this many bytes (`queue 100KBytes` in ipfw).
    Bytes(u64),
}

impl Default for QueueLimit {
    /// 50 slots, dummynet's default.
    fn default() -> Self {
        QueueLimit::Packets(50)
    }
}

/// Default bound on the queues one flowset creates through its mask. dummynet has no
/// bound; pspat keeps one (a flood of new flows cannot take all memory) high enough not to
/// drop in normal use: a `/16` of customers, or 65 536 flows of one.
pub const DEFAULT_MAX_QUEUES: u32 = 65_536;
/// Default bound on the instances one scheduler creates through its mask (see
/// [`DEFAULT_MAX_QUEUES`]).
pub const DEFAULT_MAX_INSTANCES: u32 = 65_536;
/// Default idle time after which an empty dynamic queue or instance is removed: 10 s.
pub const DEFAULT_IDLE_NS: u64 = 10_000_000_000;
/// dummynet's default scheduler: what `pipe N` gives the queues attached to it when no
/// `sched N config type ...` says otherwise.
pub const DEFAULT_ALGORITHM: &str = "wf2q+";
/// The longest delay a pipe emulates: dummynet refuses `delay` of 10 s or more.
pub const MAX_DELAY_MS: u32 = 9_999;

/// A probability in parts per billion: exact in decimal, so that `plr 0.01` prints back as
/// written and equal configurations compare equal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Probability(pub u32);

impl Probability {
    /// Certainty.
    pub const ONE: Probability = Probability(1_000_000_000);

    /// Whether it is 0 (never).
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// As a fraction in `0.0..=1.0`.
    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / 1e9
    }
}

/// Random early detection of a queue (dummynet's `red` and `gred`, Floyd and Jacobson
/// 1993): the average queue length, an exponentially weighted moving average with weight
/// `w_q`, below `min_th` drops nothing, between `min_th` and `max_th` drops with a
/// probability rising linearly to `max_p`, and above `max_th` drops everything (`red`) or,
/// with `gentle` (`gred`), rises linearly from `max_p` to 1 up to `2 * max_th`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Red {
    /// Weight of the newest sample in the average, `(0, 1]`.
    pub w_q: Probability,
    /// Thresholds in the queue's unit: packets, or bytes when its limit is in bytes.
    pub min_th: u64,
    pub max_th: u64,
    /// Drop probability at `max_th`, `[0, 1]`.
    pub max_p: Probability,
    /// `gred`: above `max_th` the probability keeps rising instead of jumping to 1.
    pub gentle: bool,
}

/// What a queue does to a packet before the scheduler takes it, besides its limit
/// (dummynet's flowset parameters; a pipe's own FIFO has them too): random loss (`plr`),
/// then early drop (`red`/`gred`; `droptail`, the default, is none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueueManagement {
    /// Probability that an arriving packet is lost (dummynet's `plr`).
    pub plr: Probability,
    pub red: Option<Red>,
}

/// A scheduler: an algorithm on link N (`sched N config ...`); see the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedSpec {
    /// Its number, `1..=65535`, shared with pipe N, its link.
    pub id: u32,
    /// Algorithm, by pspat registry name (`qfq+`, `drr`, `wf2q+`, ...). A front end stores
    /// it as written (`QFQ`, `wf2qp`); resolution checks it exists and replaces it with the
    /// registry's canonical name, so that equal setups give equal models.
    pub algorithm: String,
    /// Algorithm parameters (`m=8`, `quantum=1500`); after resolution, in the order the
    /// registry lists the algorithm's parameters, each at most once.
    pub params: Vec<(String, String)>,
    /// Its own link bandwidth in bits per second, when no pipe N gives it one (a pspat
    /// extension: ipfw takes `bw` on pipes only); 0 = unlimited, or pipe N's.
    pub bandwidth_bps: u64,
    /// What its own link charges for a frame, when no pipe N gives the link (a pspat
    /// extension, like `bw`): default, the frame's length.
    pub framing: Framing,
    /// Scheduler mask: one instance per masked value.
    pub mask: FlowMask,
    /// Most instances created through the mask; more is a drop (`InstanceLimit`).
    pub max_instances: u32,
    /// An instance with nothing queued for this long is removed (ns).
    pub idle_ns: u64,
    /// Its place in a tree of classes: `Some` makes it a class of another scheduler (its
    /// parent), with no link of its own.
    pub class: Option<ClassOf>,
}

/// A scheduler's place in a tree of classes (`sched N config parent P rate R ceil C burst B
/// cburst B weight W prio X`, HTB's words): scheduler N is a class of scheduler P. The root
/// of a tree is a scheduler without a parent, on its link (pipe N). A class with child
/// classes orders them with its algorithm; a class without takes flowsets, as any
/// scheduler. The semantics are `pspat_sched::tree`'s: a class gets its `rate` if its
/// ancestors allow, its parent's excess by `prio` band (lowest first) then by `weight`,
/// and never more than its `ceil`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClassOf {
    /// The parent scheduler's number.
    pub parent: u32,
    /// Guaranteed rate, bit/s (0: none).
    pub rate_bps: u64,
    /// Maximum rate, bit/s (`None`: none but the ancestors' and the link's).
    pub ceil_bps: Option<u64>,
    /// Bytes it may send at once beyond its rate (`None`: 1 ms of it, at least two packets).
    pub burst: Option<u64>,
    /// Bytes it may send at once beyond its ceil (`None`: 1 ms of it, at least two packets).
    pub cburst: Option<u64>,
    /// Share of its parent's excess among the siblings of its band.
    pub weight: u32,
    /// Priority band among its siblings, `0..=7`, lowest first.
    pub prio: u8,
}

impl ClassOf {
    /// A class of scheduler `parent` with no rate, no ceil, weight 1, band 0.
    pub fn new(parent: u32) -> Self {
        Self {
            parent,
            rate_bps: 0,
            ceil_bps: None,
            burst: None,
            cburst: None,
            weight: 1,
            prio: 0,
        }
    }
}

impl SchedSpec {
    /// Scheduler `id` running `algorithm` with every other field at its default.
    pub fn new(id: u32, algorithm: &str) -> Self {
        Self {
            id,
            algorithm: algorithm.to_owned(),
            params: Vec::new(),
            bandwidth_bps: 0,
            framing: Framing::PLAIN,
            mask: FlowMask::default(),
            max_instances: DEFAULT_MAX_INSTANCES,
            idle_ns: DEFAULT_IDLE_NS,
            class: None,
        }
    }
}

/// A flowset: the template of the queues attached to a scheduler (`queue N config ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowsetSpec {
    /// Its number, `1..=65535`.
    pub id: u32,
    /// The scheduler its queues attach to.
    pub sched: u32,
    /// Weight of each queue, `1..=65536`.
    pub weight: u32,
    /// Longest packet a queue accepts (the algorithms' L_k), bytes.
    pub max_len: u32,
    /// Each queue's limit.
    pub limit: QueueLimit,
    /// Loss and early drop, per queue.
    pub qm: QueueManagement,
    /// Flow mask: one queue per masked value.
    pub mask: FlowMask,
    /// Most queues created through the mask (per scheduler instance); more is a drop
    /// (`QueueLimit`).
    pub max_queues: u32,
    /// A queue with nothing queued for this long is removed (ns).
    pub idle_ns: u64,
}

impl FlowsetSpec {
    /// Flowset `id` on scheduler `sched` with every other field at dummynet's default.
    pub fn new(id: u32, sched: u32) -> Self {
        Self {
            id,
            sched,
            weight: 1,
            max_len: pspat_sched::flow::DEFAULT_MAX_LEN,
            limit: QueueLimit::default(),
            qm: QueueManagement::default(),
            mask: FlowMask::default(),
            max_queues: DEFAULT_MAX_QUEUES,
            idle_ns: DEFAULT_IDLE_NS,
        }
    }
}

/// A pipe: link N (`pipe N config bw ... delay ...`) and the FIFO queue that rules sending
/// to `pipe N` use on it (its mask creates one instance, one FIFO link, per masked value, as
/// dummynet's pipe mask does). Scheduler N, when there is one, runs on the same link
/// parameters (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipeSpec {
    /// Its number, `1..=65535`, shared with scheduler N.
    pub id: u32,
    /// Bandwidth in bits per second; 0 = unlimited.
    pub bandwidth_bps: u64,
    /// How long every packet leaving the link is held before it is sent on (dummynet's
    /// `delay`, whole milliseconds, at most [`MAX_DELAY_MS`]), ns.
    pub delay_ns: u64,
    /// Bytes an idle link may send at once, beyond its rate (dummynet's `burst`), counted
    /// as the link charges them (after framing).
    pub burst_bytes: u64,
    /// What the link charges for a frame (a pspat extension, tc's `overhead`, `mpu` and
    /// `linklayer`): default, the frame's length.
    pub framing: Framing,
    /// Queue limit of each instance.
    pub limit: QueueLimit,
    /// Loss and early drop of each instance's queue.
    pub qm: QueueManagement,
    /// One instance per masked value.
    pub mask: FlowMask,
    /// Most instances; more is a drop (`InstanceLimit`).
    pub max_instances: u32,
    /// An idle instance is removed after this long (ns).
    pub idle_ns: u64,
}

impl PipeSpec {
    /// Pipe `id` with every field at dummynet's default: unlimited, no delay.
    pub fn new(id: u32) -> Self {
        Self {
            id,
            bandwidth_bps: 0,
            delay_ns: 0,
            burst_bytes: 0,
            framing: Framing::PLAIN,
            limit: QueueLimit::default(),
            qm: QueueManagement::default(),
            mask: FlowMask::default(),
            max_instances: DEFAULT_MAX_INSTANCES,
            idle_ns: DEFAULT_IDLE_NS,
        }
    }

    /// Link N's emulation, as scheduler N uses it too.
    pub fn link(&self) -> LinkParams {
        LinkParams {
            bandwidth_bps: self.bandwidth_bps,
            delay_ns: self.delay_ns,
            burst_bytes: self.burst_bytes,
            framing: self.framing,
        }
    }
}

/// What a scheduler instance's emulated link does: its rate, the delay line after it, its
/// burst, what it charges for a frame. Pipe N's, or a scheduler's own bandwidth and
/// framing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LinkParams {
    pub bandwidth_bps: u64,
    pub delay_ns: u64,
    pub burst_bytes: u64,
    pub framing: Framing,
}

/// An address prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    /// The address, with every bit beyond `len` zero (resolution checks it).
    pub addr: IpAddr,
    /// Prefix length: `0..=32` for IPv4, `0..=128` for IPv6.
    pub len: u8,
}

/// What a rule requires of an address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AddrMatch {
    /// Anything (`any`).
    #[default]
    Any,
    /// Inside one of these prefixes (`1.2.3.0/24`, or `{ a, b }` lists).
    Prefixes(Vec<Prefix>),
    /// Present in this table (`table(1)`, `table(T1)`; `table(T1,3)` only entries of
    /// value 3); the value found is the rule's `tablearg`.
    Table(TableRef),
}

/// A table's name. ipfw names tables by a word (`T1`, `__rule__x__source`: letters,
/// digits, `_`, `-` and `.`, at most [`TableName::MAX_LEN`] characters); a number is a
/// name too (`table 1`), written without leading zeros. Numbers sort first, by value, then
/// other names by text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TableName(String);

impl TableName {
    /// Longest name, as ipfw's (`IPFW_TABLE_NAME_LEN` less its terminating NUL).
    pub const MAX_LEN: usize = 63;

    /// The name `text`, or why it is not one.
    pub fn new(text: &str) -> Result<TableName, String> {
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if text.is_empty() || text.len() > Self::MAX_LEN || !text.chars().all(ok) {
            return Err(format!(
                "'{}' is not a table name (1..={} letters, digits, `_`, `-` or `.`)",
                crate::error::cut(text),
                Self::MAX_LEN
            ));
        }
        if text.bytes().all(|b| b.is_ascii_digit()) {
            return text
                .parse::<u32>()
                .map(TableName::from)
                .map_err(|_| format!("table number {} is too large", crate::error::cut(text)));
        }
        Ok(TableName(text.to_owned()))
    }

    /// The name as written (a number in decimal).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The number, if the name is one.
    pub fn number(&self) -> Option<u32> {
        self.0.parse().ok()
    }
}

impl From<u32> for TableName {
    fn from(n: u32) -> Self {
        TableName(n.to_string())
    }
}

impl Ord for TableName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self.number(), other.number()) {
            (Some(a), Some(b)) => a.cmp(&b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => self.0.cmp(&other.0),
        }
    }
}

impl PartialOrd for TableName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A lookup in a table, as an address condition: `table(T)`, or `table(T,V)` to accept
/// only the entries of value V.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TableRef {
    pub name: TableName,
    pub value: Option<u32>,
}

impl From<u32> for TableRef {
    fn from(n: u32) -> Self {
        TableRef {
            name: n.into(),
            value: None,
        }
    }
}

/// An inclusive port range; a single port is `lo == hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

/// Where a rule's target number comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A fixed number.
    Id(u32),
    /// The value of the rule's table lookup.
    Tablearg,
}

/// What a matching rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send to a flowset (`queue N` / `queue tablearg`).
    Queue(Target),
    /// Send to a pipe (`pipe N` / `pipe tablearg`).
    Pipe(Target),
    /// Let it through unscheduled (`allow`).
    Allow,
    /// Drop it, counted against the rule (`deny`).
    Deny,
    /// Go on with the first rule numbered at least N (`skipto N`), after this one: rules
    /// only jump forward.
    Skipto(Target),
    /// Match and go on with the next rule (`count`).
    Count,
}

/// What a rule matches. Every present condition must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    /// `in` / `out`; `None` = both.
    pub direction: Option<Direction>,
    /// IP protocol number (`udp` = 17, `tcp` = 6, ...); `None` = any.
    pub proto: Option<u8>,
    /// Source address.
    pub src: AddrMatch,
    /// Destination address.
    pub dst: AddrMatch,
    /// Source ports (any of the ranges); empty = any.
    pub src_ports: Vec<PortRange>,
    /// Destination ports; empty = any.
    pub dst_ports: Vec<PortRange>,
    /// Which of the conditions above were written after `not`.
    pub not: Negations,
    /// Match only with this probability (`prob P`, `0 < P <= 1`), drawn per packet
    /// before anything else is looked at; `None` = always.
    pub prob: Option<Probability>,
    /// The other conditions (`tcpflags`, `iplen`, `via`, ...), in the order written.
    pub options: Vec<RuleOption>,
}

impl Match {
    /// Sets the conditions that `not` may precede from `(negated, condition)` pairs, as
    /// both front ends read them (`None`: no condition).
    pub fn set_negatable(
        &mut self,
        src: Option<(bool, AddrMatch)>,
        dst: Option<(bool, AddrMatch)>,
        src_ports: Option<(bool, Vec<PortRange>)>,
        dst_ports: Option<(bool, Vec<PortRange>)>,
    ) {
        (self.not.src, self.src) = src.unwrap_or_default();
        (self.not.dst, self.dst) = dst.unwrap_or_default();
        (self.not.src_ports, self.src_ports) = src_ports.unwrap_or_default();
        (self.not.dst_ports, self.dst_ports) = dst_ports.unwrap_or_default();
    }
}

/// Conditions of a [`Match`] written after `not`: each then holds when it would not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Negations {
    pub src: bool,
    pub dst: bool,
    pub src_ports: bool,
    pub dst_ports: bool,
}

/// One rule option, maybe negated (`not via igb0`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RuleOption {
    pub not: bool,
    pub cond: Cond,
}

/// A condition of a rule option.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    /// IPv4 (`ip4`, also as the protocol: `ip4 from ...`) or IPv6 packets (`ip6`).
    Family(Family),
    /// TCP packets with every flag of `set` and none of `clear` (`tcpflags syn,!ack`,
    /// `setup`); bits as in the TCP header ([`tcp_flag`]).
    TcpFlags { set: u8, clear: u8 },
    /// TCP packets with RST or ACK set (`established`).
    Established,
    /// The IP datagram's length in bytes (IPv4 total length, IPv6 payload length plus
    /// 40) in one of the ranges (`iplen 1-128`).
    IpLen(Vec<PortRange>),
    /// The IPv4 TTL or IPv6 hop limit in one of the ranges (`ipttl 1-2`).
    IpTtl(Vec<PortRange>),
    /// The DSCP code point is one whose bit is set (bit N: code point N) (`dscp ef,af11`).
    Dscp(u64),
    /// The interface the packet was received on, leaves by, or either (`recv`, `xmit`,
    /// `via`).
    Iface(IfaceDir, IfName),
}

/// TCP flag bits, as in the header's 13th byte, with their ipfw names.
pub mod tcp_flag {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
    /// `(name, bit)` in the order ipfw prints them.
    pub const NAMES: &[(&str, u8)] = &[
        ("fin", FIN),
        ("syn", SYN),
        ("rst", RST),
        ("psh", PSH),
        ("ack", ACK),
        ("urg", URG),
        ("ece", ECE),
        ("cwr", CWR),
    ];
}

/// An address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

/// Which interface an interface condition looks at. ipfw's `via` is the transmit
/// interface of a packet that has one (on its way out), else the receive interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IfaceDir {
    Recv,
    Xmit,
    Via,
}

/// An interface in a condition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IfName {
    /// Any interface: the packet has one (`via any`).
    Any,
    /// An interface name, in which `*` stands for any run of characters (`igb*`).
    Name(String),
}

/// A classifier rule (`add [N] ACTION MATCH`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Rule number, `1..=65534` (65535 is ipfw's default rule: see
    /// [`Config::default_action`]); rules are tried in increasing number, equal numbers in the
    /// order they were written.
    pub number: u32,
    pub action: Action,
    pub matcher: Match,
}

/// A lookup table: prefixes to values (`table N add PREFIX VALUE`). The longest matching
/// prefix wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub id: TableName,
    /// Entries, sorted by prefix (resolution sorts and rejects duplicates).
    pub entries: Vec<(Prefix, u32)>,
}

/// The whole configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub schedulers: BTreeMap<u32, SchedSpec>,
    pub flowsets: BTreeMap<u32, FlowsetSpec>,
    pub pipes: BTreeMap<u32, PipeSpec>,
    pub tables: BTreeMap<TableName, Table>,
    /// Sorted by number (stable).
    pub rules: Vec<Rule>,
    /// What happens to a packet no rule matched (`Deny` unless configured).
    pub default_action: Action,
    /// ipfw's `net.inet.ip.fw.one_pass`: true (the default), a pipe or queue rule ends the
    /// rule search; false, a packet leaving the pipe goes on at the next rule, so that it
    /// may cross several pipes in turn.
    pub one_pass: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            schedulers: BTreeMap::new(),
            flowsets: BTreeMap::new(),
            pipes: BTreeMap::new(),
            tables: BTreeMap::new(),
            rules: Vec::new(),
            default_action: Action::Deny,
            one_pass: true,
        }
    }
}

/// How many objects of each kind a configuration has, for one-line reports (`pspat config
/// check`, a live reload): `1 schedulers, 2 flowsets, 0 pipes, 3 rules, 1 tables with 2
/// entries, default deny`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub schedulers: usize,
    pub flowsets: usize,
    pub pipes: usize,
    pub rules: usize,
    pub tables: usize,
    /// Entries of all tables.
    pub entries: usize,
    pub default_action: Action,
}

impl Config {
    /// The link scheduler `s` runs on: pipe N's when there is a pipe of its number, else
    /// its own bandwidth and framing, with no emulation.
    pub fn link_of(&self, s: &SchedSpec) -> LinkParams {
        match self.pipes.get(&s.id) {
            Some(p) => p.link(),
            None => LinkParams {
                bandwidth_bps: s.bandwidth_bps,
                framing: s.framing,
                ..LinkParams::default()
            },
        }
    }

    /// How many objects of each kind it has.
    pub fn summary(&self) -> Summary {
        Summary {
            schedulers: self.schedulers.len(),
            flowsets: self.flowsets.len(),
            pipes: self.pipes.len(),
            rules: self.rules.len(),
            tables: self.tables.len(),
            entries: self.tables.values().map(|t| t.entries.len()).sum(),
            default_action: self.default_action,
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} schedulers, {} flowsets, {} pipes, {} rules, {} tables with {} entries, \
             default {}",
            self.schedulers,
            self.flowsets,
            self.pipes,
            self.rules,
            self.tables,
            self.entries,
            self.default_action
        )
    }
}
