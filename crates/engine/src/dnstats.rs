//! Live statistics of a dummynet-style configuration, per scheduler, per scheduler
//! instance and per queue: what `tc -s class show`, `ipfw sched show` and `dnctl queue
//! show` print.
//!
//! [`crate::Engine::dummynet_stats`] asks the arbiter for a [`DummynetStats`] snapshot; the
//! arbiter builds it (`DummynetStats::of`, below, from read-only views of the service's
//! state in `dummynet.rs`) between two scans (it alone owns the instances and queues), so
//! one snapshot is consistent: every packet it counts is either sent, dropped with a reason,
//! or in a backlog, once. Building it allocates and walks every instance and queue; it is a
//! control-path request, and the data path keeps no counter for it beyond what it already
//! had: the per-queue counters are the scheduler's own per-flow statistics
//! ([`pspat_sched::Scheduler::flow_stats`]), the per-instance ones the scheduler's totals;
//! only drops that happen before a packet reaches a queue (`queue_limit`, `instance_limit`,
//! `no_class`) are counted by the service, on the drop path.
//!
//! Counters never go backwards: a queue that expires leaves its counters in its instance's
//! totals (the scheduler's flow table keeps what removed flows sent and dropped), and an
//! instance that retires folds its totals into its scheduler's [`SchedulerStats::retired`].
//! So [`SchedulerStats::totals`] and [`DummynetStats::totals`] only grow, and equal the sums
//! of the engine's per-client counters (`scheduled`, `dropped`, minus the packets still in
//! mailboxes).
//!
//! **Which bytes.** `sent_bytes` and `backlog_bytes` count frames as given to the engine (in
//! `pspat shape` and `pspat run`, Ethernet frames from the destination MAC address to the
//! end of the payload, no FCS), as the schedulers share them. A link with a framing
//! (`overhead`, `mpu`, `linklayer`: [`SchedulerStats::framing`]) charges more or fewer
//! bytes per frame: instances and schedulers also count those, [`InstanceStats::wire_bytes`]
//! and [`SchedulerStats::wire_bytes`], which the data path adds up as it charges each packet
//! (one addition). Eight times the wire bytes over a busy time is the link's rate; eight
//! times the frame bytes, what the frames got of it. Without a framing the two are equal,
//! and the text output shows only the frames.
//!
//! [`DummynetStats::rates`] turns two snapshots into bit/s and packet/s per scheduler,
//! instance and queue. Instances and queues are matched by (scheduler, instance key,
//! creation time) and (class, queue key, creation time): a queue that expired and was
//! created again under the same key between the two snapshots is a new queue, counted from
//! zero, never a negative rate.
//!
//! Everything is `serde::Serialize` (addresses as text) for JSON output; `Display` prints a
//! table in the spirit of `ipfw sched show`: one block per scheduler, one line per instance
//! and one per queue.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use pspat_config::classify::{ClassOrigin, FlowKey, SchedOrigin};
use pspat_config::Framing;
use pspat_io::Pkt;
use pspat_sched::tree::{ClassStats, LiveTree};
use pspat_units::{HumanBandwidth, HumanRate};
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::dummynet::{Dummynet, Instance, NONE};
use crate::stats::ArbiterDrop;

/// Which configured scheduler: a `sched N` of the configuration, or the implicit scheduler
/// (a FIFO) of `pipe N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedRef {
    /// `sched N`.
    Sched(u32),
    /// `pipe N` (its own scheduler).
    Pipe(u32),
}

impl From<SchedOrigin> for SchedRef {
    fn from(o: SchedOrigin) -> Self {
        match o {
            SchedOrigin::Sched(id) => SchedRef::Sched(id),
            SchedOrigin::Pipe(id) => SchedRef::Pipe(id),
        }
    }
}

impl fmt::Display for SchedRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedRef::Sched(id) => write!(f, "sched {id}"),
            SchedRef::Pipe(id) => write!(f, "pipe {id}"),
        }
    }
}

/// Which class a queue belongs to: a flowset (`queue N` in ipfw) or a pipe's implicit
/// flowset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassRef {
    /// Flowset `N` (`queue N`).
    Flowset(u32),
    /// `pipe N`.
    Pipe(u32),
}

impl From<ClassOrigin> for ClassRef {
    fn from(o: ClassOrigin) -> Self {
        match o {
            ClassOrigin::Flowset(id) => ClassRef::Flowset(id),
            ClassOrigin::Pipe(id) => ClassRef::Pipe(id),
        }
    }
}

impl fmt::Display for ClassRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClassRef::Flowset(id) => write!(f, "queue {id}"),
            ClassRef::Pipe(id) => write!(f, "pipe {id}"),
        }
    }
}

/// Drop counters, one per [`ArbiterDrop`] cause (indexed by [`ArbiterDrop::slot`]). Serialised as a map
/// from every cause's name to its count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops(pub [u64; ArbiterDrop::COUNT]);

impl Drops {
    /// Drops counted under `cause`.
    pub fn get(&self, cause: ArbiterDrop) -> u64 {
        self.0[cause.slot()]
    }

    /// Counts `n` drops under `cause`.
    #[inline]
    pub fn add(&mut self, cause: ArbiterDrop, n: u64) {
        self.0[cause.slot()] += n;
    }

    /// Adds every counter of `other`.
    pub fn add_all(&mut self, other: &Drops) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// Drops under every cause.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// `(cause, count)` for every cause with a non-zero count, in slot order.
    pub fn nonzero(&self) -> impl Iterator<Item = (ArbiterDrop, u64)> + '_ {
        ArbiterDrop::all()
            .into_iter()
            .map(|d| (d, self.get(d)))
            .filter(|&(_, n)| n > 0)
    }

    /// The scheduler's drop counters, under [`ArbiterDrop::Sched`].
    pub fn from_sched(d: &pspat_sched::DropCounts) -> Self {
        let mut out = Drops::default();
        for (r, n) in d.nonzero() {
            out.add(ArbiterDrop::Sched(r), n);
        }
        out
    }
}

impl Serialize for Drops {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(ArbiterDrop::COUNT))?;
        for d in ArbiterDrop::all() {
            m.serialize_entry(&d.name(), &self.get(d))?;
        }
        m.end()
    }
}

/// What a queue, an instance or a scheduler has done: packets and bytes sent, drops by
/// cause, and what is queued now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Packets sent (released onto the link).
    pub sent_pkts: u64,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Packets dropped, by cause.
    pub drops: Drops,
    /// Packets queued now.
    pub backlog_pkts: u64,
    /// Bytes queued now.
    pub backlog_bytes: u64,
}

impl Counters {
    /// Adds every counter of `other` (backlogs included).
    pub fn add(&mut self, other: &Counters) {
        self.sent_pkts += other.sent_pkts;
        self.sent_bytes += other.sent_bytes;
        self.drops.add_all(&other.drops);
        self.backlog_pkts += other.backlog_pkts;
        self.backlog_bytes += other.backlog_bytes;
    }

    /// A queue's counters, from its flow's statistics in the scheduler.
    pub fn of_flow(s: &pspat_sched::FlowStats) -> Self {
        Counters {
            sent_pkts: s.sent_pkts,
            sent_bytes: s.sent_bytes,
            drops: Drops::from_sched(&s.drops),
            backlog_pkts: s.backlog.pkts,
            backlog_bytes: s.backlog.bytes,
        }
    }

    /// A scheduler's counters (every flow it had, removed ones included).
    pub fn of_sched(s: &pspat_sched::SchedStats) -> Self {
        Counters {
            sent_pkts: s.sent_pkts,
            sent_bytes: s.sent_bytes,
            drops: Drops::from_sched(&s.drops),
            backlog_pkts: s.backlog.pkts,
            backlog_bytes: s.backlog.bytes,
        }
    }
}

impl fmt::Display for Counters {
    /// `Sent 3000 bytes 2 pkt (dropped 3, flow_packet_limit 3) backlog 1500b 1p`, as
    /// `tc -s` and [`pspat_sched::FlowStats`] print it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Sent {} bytes {} pkt (dropped {}",
            self.sent_bytes,
            self.sent_pkts,
            self.drops.total()
        )?;
        for (cause, n) in self.drops.nonzero() {
            write!(f, ", {} {n}", cause.name())?;
        }
        write!(
            f,
            ") backlog {}b {}p",
            self.backlog_bytes, self.backlog_pkts
        )
    }
}

/// One queue (a flow of its instance's algorithm), created by its class's flow mask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    /// Its class.
    pub class: ClassRef,
    /// The packets' keys under the class's flow mask.
    #[serde(serialize_with = "ser_key")]
    pub key: FlowKey,
    /// Its weight now.
    pub weight: u32,
    /// When it was created (ns, on [`crate::clock::now_ns`]); identifies it across
    /// snapshots.
    pub created_ns: u64,
    /// When a packet last joined it (ns).
    pub last_ns: u64,
    /// Its counters since it was created.
    pub counters: Counters,
}

/// One class of a tree in one instance, as `tc -s class show` prints it: its place, its
/// configuration and its counters (those of the leaves below it for drops and backlog).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TreeClassStats {
    /// Its name (`sched 10`).
    pub name: String,
    /// Its parent's name; `None` under the link.
    pub parent: Option<String>,
    /// Classes above it (0 under the link).
    pub depth: u32,
    /// It holds queues (else classes).
    pub leaf: bool,
    /// Guaranteed rate, bit/s (0: none).
    pub rate_bps: u64,
    /// Ceiling, bit/s (`None`: none).
    pub ceil_bps: Option<u64>,
    /// Share of its parent's excess within its band.
    pub weight: u32,
    /// Its priority band among its siblings.
    pub prio: u8,
    /// Removed from the configuration, its packets still draining (it leaves the tree
    /// once they have).
    pub draining: bool,
    /// Sent through it; drops and backlog of the leaves below it.
    pub counters: Counters,
    /// Bytes sent within its rate (HTB's `lended`).
    pub lent_bytes: u64,
    /// Bytes borrowed from its parent's excess.
    pub borrowed_bytes: u64,
    /// Times it went over its ceil with packets to send.
    pub overlimits: u64,
}

impl TreeClassStats {
    /// Every class of `tree`: those of the configuration in force, in its order, then the
    /// draining ones.
    pub(crate) fn of_tree(tree: &LiveTree<Pkt>) -> Vec<TreeClassStats> {
        let s = tree.sched();
        let row = |c: usize, st: &ClassStats, draining: bool| {
            let spec = s.spec_of(c)?;
            let mut depth = 0;
            let mut up = spec.parent;
            while let Some(p) = up {
                depth += 1;
                up = s.spec_of(p).and_then(|p| p.parent);
            }
            Some(TreeClassStats {
                name: spec.name.clone(),
                parent: spec
                    .parent
                    .and_then(|p| s.spec_of(p))
                    .map(|p| p.name.clone()),
                depth,
                leaf: s.is_leaf(c)?,
                rate_bps: spec.rate_bps,
                ceil_bps: spec.ceil_bps,
                weight: spec.weight,
                prio: spec.prio,
                draining,
                counters: Counters {
                    sent_pkts: st.sent_pkts,
                    sent_bytes: st.sent_bytes,
                    drops: Drops::from_sched(&st.drops),
                    backlog_pkts: st.backlog.pkts,
                    backlog_bytes: st.backlog.bytes,
                },
                lent_bytes: st.lent_bytes,
                borrowed_bytes: st.borrowed_bytes,
                overlimits: st.overlimits,
            })
        };
        let (live, draining) = tree.class_stats();
        live.iter()
            .enumerate()
            .filter_map(|(i, st)| row(tree.index(i)?, st, false))
            .chain(draining.iter().filter_map(|(c, st)| row(*c, st, true)))
            .collect()
    }
}

impl fmt::Display for TreeClassStats {
    /// `class sched 10 parent sched 2 leaf rate 10.000 Mbit/s ceil 300.000 Mbit/s prio 0
    /// weight 4: Sent ... ; lent 1500 borrowed 3000 overlimits 2`, as `tc -s class show`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "class {} parent {} {}rate ",
            self.name,
            self.parent.as_deref().unwrap_or("link"),
            if self.leaf { "leaf " } else { "" },
        )?;
        match self.rate_bps {
            0 => f.write_str("0 bit/s")?,
            r => write!(f, "{}", HumanBandwidth(r as f64))?,
        }
        if let Some(c) = self.ceil_bps {
            write!(f, " ceil {}", HumanBandwidth(c as f64))?;
        }
        write!(
            f,
            " prio {} weight {}{}: {}; lent {} borrowed {} overlimits {}",
            self.prio,
            self.weight,
            if self.draining {
                " (removed, draining)"
            } else {
                ""
            },
            self.counters,
            self.lent_bytes,
            self.borrowed_bytes,
            self.overlimits
        )
    }
}

/// One scheduler instance: an algorithm with its own link, created by the scheduler mask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InstanceStats {
    /// Its id in the engine (ids of retired instances are reused).
    pub id: u32,
    /// The packets' keys under the scheduler mask.
    #[serde(serialize_with = "ser_key")]
    pub key: FlowKey,
    /// When it was created (ns); identifies it across snapshots.
    pub created_ns: u64,
    /// Everything it did since it was created: its live queues, the queues that expired,
    /// and the drops of packets that got no queue (`queue_limit`).
    pub totals: Counters,
    /// Bytes its link charged for what it sent since it was created: the frames of
    /// `totals.sent_bytes` as its scheduler's framing counts them (the same number without
    /// one).
    pub wire_bytes: u64,
    /// Its live queues, by class then key.
    pub queues: Vec<QueueStats>,
    /// Queues removed after their idle time.
    pub expired_queues: u64,
    /// Its tree's classes, if its scheduler is a tree (see [`TreeClassStats::of_tree`]).
    pub classes: Vec<TreeClassStats>,
}

/// One configured scheduler (or pipe) and its instances.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SchedulerStats {
    /// Which one.
    pub sched: SchedRef,
    /// Still in the configuration (a removed one keeps its instances until they drain and
    /// expire).
    pub live: bool,
    /// Its algorithm's name, as configured.
    pub algorithm: String,
    /// The classes of its tree (0: it schedules queues, not a tree).
    pub classes: usize,
    /// Every instance's link rate, bit/s (0 = unlimited).
    pub bandwidth_bps: u64,
    /// What every instance's link charges for a frame (default: its length).
    #[serde(serialize_with = "ser_framing")]
    pub framing: Framing,
    /// How long a packet leaving the link is held before it is sent on (ns).
    pub delay_ns: u64,
    /// Packets in its delay line now (they have left its instances' queues).
    pub delayed_pkts: u64,
    /// Its live instances, by key.
    pub instances: Vec<InstanceStats>,
    /// Instances removed after their idle time.
    pub expired_instances: u64,
    /// The totals of the removed instances.
    pub retired: Counters,
    /// Drops of packets that got no instance (`instance_limit`, or an algorithm that
    /// could not be built).
    pub unplaced: Drops,
    /// Bytes the links of the removed instances charged.
    pub retired_wire_bytes: u64,
}

impl SchedulerStats {
    /// Everything the scheduler did: its instances, retired ones, and unplaced drops.
    pub fn totals(&self) -> Counters {
        let mut t = self.retired;
        for i in &self.instances {
            t.add(&i.totals);
        }
        t.drops.add_all(&self.unplaced);
        t
    }

    /// Bytes its links charged, retired instances included (see the module docs).
    pub fn wire_bytes(&self) -> u64 {
        self.retired_wire_bytes + self.instances.iter().map(|i| i.wire_bytes).sum::<u64>()
    }
}

/// A snapshot of a dummynet-style configuration; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DummynetStats {
    /// When the arbiter took it (ns, on [`crate::clock::now_ns`]).
    pub at_ns: u64,
    /// Every scheduler and pipe the engine has had, in the order they were configured.
    pub schedulers: Vec<SchedulerStats>,
    /// Packets an `allow` rule let through (they skip scheduling).
    pub passed: Counters,
    /// Packets whose class had been removed from the configuration (`no_class` drops).
    pub no_class_drops: u64,
}

impl DummynetStats {
    /// Everything: every scheduler's totals, passed packets and `no_class` drops.
    pub fn totals(&self) -> Counters {
        let mut t = self.passed;
        for s in &self.schedulers {
            t.add(&s.totals());
        }
        t.drops.add(ArbiterDrop::NoClass, self.no_class_drops);
        t
    }

    /// Whether a scheduler schedules a tree of classes.
    pub fn has_trees(&self) -> bool {
        self.schedulers.iter().any(|s| s.classes > 0)
    }

    /// The scheduler `sched`, if the engine has had it.
    pub fn scheduler(&self, sched: SchedRef) -> Option<&SchedulerStats> {
        self.schedulers.iter().find(|s| s.sched == sched)
    }

    /// Rates between `earlier` and this snapshot (see the module docs for the matching).
    pub fn rates(&self, earlier: &DummynetStats) -> DummynetRates {
        let interval_ns = self.at_ns.saturating_sub(earlier.at_ns);
        let rate = |now: &Counters, then: Option<&Counters>| {
            let (p0, b0) = then.map_or((0, 0), |c| (c.sent_pkts, c.sent_bytes));
            Rate::over(
                now.sent_pkts.saturating_sub(p0),
                now.sent_bytes.saturating_sub(b0),
                interval_ns,
            )
        };
        // Wire bit/s where a framing makes them differ from the frames'.
        let wire = |framed: bool, now: u64, then: Option<u64>| {
            framed.then(|| Rate::over(0, now.saturating_sub(then.unwrap_or(0)), interval_ns).bps)
        };
        let mut schedulers = Vec::with_capacity(self.schedulers.len());
        for s in &self.schedulers {
            let old = earlier.scheduler(s.sched);
            let framed = !s.framing.is_plain();
            let instances = s
                .instances
                .iter()
                .map(|i| {
                    let old_i = old.and_then(|o| {
                        o.instances
                            .iter()
                            .find(|x| x.key == i.key && x.created_ns == i.created_ns)
                    });
                    let queues = i
                        .queues
                        .iter()
                        .map(|q| {
                            let old_q = old_i.and_then(|o| {
                                o.queues.iter().find(|x| {
                                    x.class == q.class
                                        && x.key == q.key
                                        && x.created_ns == q.created_ns
                                })
                            });
                            QueueRate {
                                class: q.class,
                                key: q.key,
                                rate: rate(&q.counters, old_q.map(|x| &x.counters)),
                            }
                        })
                        .collect();
                    let classes = i
                        .classes
                        .iter()
                        .map(|c| {
                            let old_c =
                                old_i.and_then(|o| o.classes.iter().find(|x| x.name == c.name));
                            ClassRate {
                                name: c.name.clone(),
                                depth: c.depth,
                                rate: rate(&c.counters, old_c.map(|x| &x.counters)),
                            }
                        })
                        .collect();
                    InstanceRate {
                        key: i.key,
                        rate: rate(&i.totals, old_i.map(|x| &x.totals)),
                        wire_bps: wire(framed, i.wire_bytes, old_i.map(|x| x.wire_bytes)),
                        queues,
                        classes,
                    }
                })
                .collect();
            schedulers.push(SchedRate {
                sched: s.sched,
                rate: rate(&s.totals(), old.map(|o| o.totals()).as_ref()),
                wire_bps: wire(framed, s.wire_bytes(), old.map(|o| o.wire_bytes())),
                instances,
            });
        }
        DummynetRates {
            interval_ns,
            schedulers,
        }
    }

    /// The snapshot of `d`, taken at `now` by the arbiter between two scans: every
    /// scheduler, instance and queue (control path: allocates). Instances are listed by
    /// key, queues by class and key.
    pub(crate) fn of(d: &Dummynet, now: u64) -> DummynetStats {
        let schedulers = d
            .scheds
            .iter()
            .enumerate()
            .map(|(line, st)| {
                let mut instances: Vec<InstanceStats> = st
                    .inst_ids
                    .iter()
                    .enumerate()
                    .filter(|&(_, &id)| id != NONE)
                    .filter_map(|(slot, &id)| {
                        let inst = d.instances[id as usize].as_ref()?;
                        let key = st.instances.key(slot as u32)?;
                        Some(InstanceStats::of(d, id, key, inst))
                    })
                    .collect();
                instances.sort_by_key(|i| i.key.to_words());
                SchedulerStats {
                    sched: st.sched.origin.into(),
                    live: st.live,
                    algorithm: st.sched.algorithm.clone(),
                    classes: st.sched.tree.as_ref().map_or(0, |t| t.classes.len()),
                    bandwidth_bps: st.sched.bandwidth_bps,
                    framing: st.sched.framing,
                    delay_ns: st.sched.delay_ns,
                    delayed_pkts: d.delays.held_on(line),
                    instances,
                    expired_instances: st.expired_instances,
                    retired: st.retired,
                    unplaced: st.unplaced,
                    retired_wire_bytes: st.retired_wire_bytes,
                }
            })
            .collect();
        let mut passed = d.passed;
        passed.backlog_pkts = d.pass.len() as u64;
        passed.backlog_bytes = d.pass.iter().map(|p| u64::from(p.len)).sum();
        DummynetStats {
            at_ns: now,
            schedulers,
            passed,
            no_class_drops: d.no_class,
        }
    }
}

impl InstanceStats {
    /// Instance `id` of `d`, under its masked `key`: its totals and every queue, with the
    /// queue's counters from its flow in the instance's algorithm.
    fn of(d: &Dummynet, id: u32, key: FlowKey, inst: &Instance) -> InstanceStats {
        let mut queues: Vec<QueueStats> = inst
            .flows
            .iter()
            .enumerate()
            .filter_map(|(q, fc)| {
                let (f, c) = (*fc)?;
                let (_, qkey) = inst.queues.key(q as u32)?;
                let mut counters = Counters::of_flow(&inst.sched.flow_stats(f)?);
                let (plr, red) = inst.lost[q];
                counters.drops.add(ArbiterDrop::Plr, plr);
                counters.drops.add(ArbiterDrop::Red, red);
                let class = &d.classes[c];
                Some(QueueStats {
                    class: ClassRef::from(class.class.origin),
                    key: qkey,
                    weight: inst
                        .sched
                        .flow_params(f)
                        .map_or(class.params.weight, |p| p.weight),
                    created_ns: inst.queue_created_ns[q],
                    last_ns: inst.last_ns[q],
                    counters,
                })
            })
            .collect();
        queues.sort_by_key(|q| (q.class, q.key.to_words()));
        InstanceStats {
            id,
            key,
            created_ns: inst.created_ns,
            totals: inst.totals(),
            wire_bytes: inst.wire_bytes,
            queues,
            expired_queues: inst.expired_queues,
            classes: inst
                .sched
                .tree()
                .map(TreeClassStats::of_tree)
                .unwrap_or_default(),
        }
    }
}

/// A rate over an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Rate {
    /// Bits per second sent.
    pub bps: f64,
    /// Packets per second sent.
    pub pps: f64,
}

impl Rate {
    /// `pkts` packets of `bytes` bytes in total over `interval_ns` (0 over an empty
    /// interval).
    pub fn over(pkts: u64, bytes: u64, interval_ns: u64) -> Self {
        if interval_ns == 0 {
            return Rate::default();
        }
        let secs = interval_ns as f64 / 1e9;
        Rate {
            bps: bytes as f64 * 8.0 / secs,
            pps: pkts as f64 / secs,
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:.0} pps", HumanRate(self.bps), self.pps)
    }
}

/// Rates of one queue.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueRate {
    /// Its class.
    pub class: ClassRef,
    /// Its masked key.
    #[serde(serialize_with = "ser_key")]
    pub key: FlowKey,
    /// What it sent per second.
    pub rate: Rate,
}

/// Rates of one instance and its queues.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceRate {
    /// Its masked key.
    #[serde(serialize_with = "ser_key")]
    pub key: FlowKey,
    /// What it sent per second (its link's throughput, in frames).
    pub rate: Rate,
    /// The bits per second its link charged, where a framing makes them differ from the
    /// frames'.
    pub wire_bps: Option<f64>,
    /// Its queues, as in the later snapshot.
    pub queues: Vec<QueueRate>,
    /// Its tree's classes, as in the later snapshot (a class is matched by name, within
    /// the instance).
    pub classes: Vec<ClassRate>,
}

/// Rates of one class of a tree.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassRate {
    /// Its name.
    pub name: String,
    /// Classes above it.
    pub depth: u32,
    /// What it sent per second.
    pub rate: Rate,
}

/// Rates of one scheduler (all its instances, retired ones included) and its instances.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SchedRate {
    /// Which one.
    pub sched: SchedRef,
    /// What all its instances sent per second.
    pub rate: Rate,
    /// The bits per second its links charged, where a framing makes them differ from the
    /// frames'.
    pub wire_bps: Option<f64>,
    /// Its live instances, as in the later snapshot.
    pub instances: Vec<InstanceRate>,
}

/// Rates between two [`DummynetStats`]: see [`DummynetStats::rates`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DummynetRates {
    /// The interval (ns).
    pub interval_ns: u64,
    /// Per scheduler, in the later snapshot's order.
    pub schedulers: Vec<SchedRate>,
}

impl fmt::Display for DummynetRates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "rates over {:.3} s", self.interval_ns as f64 / 1e9)?;
        let wire = |bps: Option<f64>| bps.map(|b| format!(", wire {}", HumanRate(b)));
        for s in &self.schedulers {
            let w = wire(s.wire_bps).unwrap_or_default();
            writeln!(f, "{}: {}{w}", s.sched, s.rate)?;
            for i in &s.instances {
                let w = wire(i.wire_bps).unwrap_or_default();
                writeln!(f, "  instance {}: {}{w}", KeyText(&i.key), i.rate)?;
                for c in &i.classes {
                    let pad = 2 * c.depth as usize;
                    writeln!(f, "    {:pad$}class {}: {}", "", c.name, c.rate)?;
                }
                for q in &i.queues {
                    writeln!(f, "    {} {}: {}", q.class, KeyText(&q.key), q.rate)?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for DummynetStats {
    /// One block per scheduler: a header with its algorithm and bandwidth, one line per
    /// instance (its key and totals) followed by one line per queue (class, weight, key,
    /// counters), then the retired instances' totals. A link with a framing adds it to the
    /// header, with the bytes all its links charged, and each instance its own
    /// (`wire 1166000 bytes`). For example:
    ///
    /// ```text
    /// sched 1 drr 8.000 Mbit/s: 1 instance, 0 expired
    ///   instance 0 ip 0.0.0.0/0 -> 0.0.0.0/0: Sent 30000 bytes 30 pkt (dropped 0) backlog 0b 0p; 3 queues, 0 expired
    ///     queue 1 weight 1 ip 0.0.0.0/0 -> 0.0.0.0/80: Sent 10000 bytes 10 pkt (dropped 0) backlog 0b 0p
    ///   retired: Sent 0 bytes 0 pkt (dropped 0) backlog 0b 0p; unplaced drops 0
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.schedulers {
            write!(
                f,
                "{} {} {}: {} instance{}, {} expired",
                s.sched,
                s.algorithm,
                HumanBandwidth(s.bandwidth_bps as f64),
                s.instances.len(),
                if s.instances.len() == 1 { "" } else { "s" },
                s.expired_instances
            )?;
            let framed = !s.framing.is_plain();
            if framed {
                write!(f, ", {}, wire {} bytes", s.framing, s.wire_bytes())?;
            }
            if s.delay_ns > 0 {
                write!(
                    f,
                    ", delay {} ms, {} in the delay line",
                    s.delay_ns / 1_000_000,
                    s.delayed_pkts
                )?;
            }
            if !s.live {
                f.write_str(" (removed from the configuration)")?;
            }
            writeln!(f)?;
            for i in &s.instances {
                let wire = if framed {
                    format!("; wire {} bytes", i.wire_bytes)
                } else {
                    String::new()
                };
                writeln!(
                    f,
                    "  instance {} {}: {}{wire}; {} queue{}, {} expired",
                    i.id,
                    KeyText(&i.key),
                    i.totals,
                    i.queues.len(),
                    if i.queues.len() == 1 { "" } else { "s" },
                    i.expired_queues
                )?;
                for c in &i.classes {
                    writeln!(f, "    {:w$}{c}", "", w = 2 * c.depth as usize)?;
                }
                for q in &i.queues {
                    writeln!(
                        f,
                        "    {} weight {} {}: {}",
                        q.class,
                        q.weight,
                        KeyText(&q.key),
                        q.counters
                    )?;
                }
            }
            write!(
                f,
                "  retired: {}; unplaced drops {}",
                s.retired,
                s.unplaced.total()
            )?;
            for (cause, n) in s.unplaced.nonzero() {
                write!(f, ", {} {n}", cause.name())?;
            }
            writeln!(f)?;
        }
        writeln!(f, "passed (allow): {}", self.passed)?;
        writeln!(f, "no_class drops: {}", self.no_class_drops)
    }
}

/// A masked key as `ipfw` prints a bucket: `udp 10.0.0.1/5000 -> 10.1.0.1/80`.
struct KeyText<'a>(&'a FlowKey);

impl fmt::Display for KeyText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.0;
        match k.proto {
            0 => f.write_str("ip")?,
            1 => f.write_str("icmp")?,
            6 => f.write_str("tcp")?,
            17 => f.write_str("udp")?,
            58 => f.write_str("ipv6-icmp")?,
            p => write!(f, "proto {p}")?,
        }
        if k.v6 {
            write!(
                f,
                " [{}]/{} -> [{}]/{}",
                Ipv6Addr::from(k.src),
                k.src_port,
                Ipv6Addr::from(k.dst),
                k.dst_port
            )
        } else {
            write!(
                f,
                " {}/{} -> {}/{}",
                Ipv4Addr::from(k.src_v4()),
                k.src_port,
                Ipv4Addr::from(k.dst_v4()),
                k.dst_port
            )
        }
    }
}

/// A framing as `{"overhead": 10, "mpu": 0, "linklayer": "atm"}`.
fn ser_framing<S: Serializer>(f: &Framing, s: S) -> Result<S::Ok, S::Error> {
    let mut st = s.serialize_struct("Framing", 3)?;
    st.serialize_field("overhead", &f.overhead)?;
    st.serialize_field("mpu", &f.mpu)?;
    st.serialize_field("linklayer", f.linklayer.name())?;
    st.end()
}

fn addr_text(a: u128, v6: bool) -> String {
    if v6 {
        Ipv6Addr::from(a).to_string()
    } else {
        Ipv4Addr::from(a as u32).to_string()
    }
}

/// A key as `{"src": "10.0.0.1", "dst": "10.1.0.1", "src_port": 5000, "dst_port": 80,
/// "proto": 17}` (addresses as text: JSON numbers do not hold 128 bits).
fn ser_key<S: Serializer>(k: &FlowKey, s: S) -> Result<S::Ok, S::Error> {
    let mut st = s.serialize_struct("FlowKey", 5)?;
    st.serialize_field("src", &addr_text(k.src, k.v6))?;
    st.serialize_field("dst", &addr_text(k.dst, k.v6))?;
    st.serialize_field("src_port", &k.src_port)?;
    st.serialize_field("dst_port", &k.dst_port)?;
    st.serialize_field("proto", &k.proto)?;
    st.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pspat_sched::DropReason;

    fn counters(sent_pkts: u64, sent_bytes: u64) -> Counters {
        Counters {
            sent_pkts,
            sent_bytes,
            ..Counters::default()
        }
    }

    fn queue(class: u32, port: u16, created_ns: u64, c: Counters) -> QueueStats {
        QueueStats {
            class: ClassRef::Flowset(class),
            key: FlowKey::v4(0, 0, 0, port, 0),
            weight: 1,
            created_ns,
            last_ns: created_ns,
            counters: c,
        }
    }

    fn snapshot(at_ns: u64, queues: Vec<QueueStats>, retired: Counters) -> DummynetStats {
        let mut totals = Counters::default();
        for q in &queues {
            totals.add(&q.counters);
        }
        DummynetStats {
            at_ns,
            schedulers: vec![SchedulerStats {
                sched: SchedRef::Sched(1),
                live: true,
                algorithm: "drr".into(),
                classes: 0,
                bandwidth_bps: 8_000_000,
                framing: Framing::PLAIN,
                delay_ns: 0,
                delayed_pkts: 0,
                instances: vec![InstanceStats {
                    id: 0,
                    key: FlowKey::v4(0x0a00_0001, 0, 0, 0, 0),
                    created_ns: 5,
                    wire_bytes: totals.sent_bytes,
                    totals,
                    queues,
                    expired_queues: 0,
                    classes: Vec::new(),
                }],
                expired_instances: 0,
                retired,
                unplaced: Drops::default(),
                retired_wire_bytes: retired.sent_bytes,
            }],
            passed: Counters::default(),
            no_class_drops: 0,
        }
    }

    #[test]
    fn rates_match_queues_by_class_key_and_creation() {
        // Over half a second: queue 1/80 goes from 100 to 600 packets of 1000 bytes
        // (1000 pkt/s, 8 Mbit/s); queue 2/80 is new (250 packets from zero: 500 pkt/s);
        // queue 1/81 was recreated (other creation time) with 50 packets: counted from
        // zero, not as 50 - 400.
        let a = snapshot(
            1_000_000_000,
            vec![
                queue(1, 80, 10, counters(100, 100_000)),
                queue(1, 81, 10, counters(400, 400_000)),
            ],
            Counters::default(),
        );
        let b = snapshot(
            1_500_000_000,
            vec![
                queue(1, 80, 10, counters(600, 600_000)),
                queue(2, 80, 1_200_000_000, counters(250, 250_000)),
                queue(1, 81, 1_300_000_000, counters(50, 50_000)),
            ],
            Counters::default(),
        );
        let r = b.rates(&a);
        assert_eq!(r.interval_ns, 500_000_000);
        let q = &r.schedulers[0].instances[0].queues;
        assert_eq!(q[0].rate.pps, 1000.0);
        assert_eq!(q[0].rate.bps, 8e6);
        assert_eq!(q[1].class, ClassRef::Flowset(2));
        assert_eq!(q[1].rate.pps, 500.0);
        assert_eq!(q[2].rate.pps, 100.0);
        // The instance (same creation time in both): its totals went from 500 to 900
        // packets, 800 pkt/s; the scheduler's likewise.
        let i = &r.schedulers[0].instances[0];
        assert_eq!(i.rate.pps, (900.0 - 500.0) / 0.5);
        assert_eq!(r.schedulers[0].rate.pps, (900.0 - 500.0) / 0.5);
        // Same instant: no rate rather than a division by zero.
        let z = b.rates(&b);
        assert_eq!(z.schedulers[0].rate, Rate::default());
    }

    #[test]
    fn a_recreated_instance_counts_from_zero_and_scheduler_totals_include_retired() {
        let a = snapshot(
            0,
            vec![queue(1, 80, 10, counters(100, 100_000))],
            Counters::default(),
        );
        let mut b = snapshot(
            1_000_000_000,
            vec![queue(1, 80, 900, counters(30, 30_000))],
            counters(100, 100_000),
        );
        b.schedulers[0].instances[0].created_ns = 900;
        let r = b.rates(&a);
        assert_eq!(r.schedulers[0].instances[0].rate.pps, 30.0);
        assert_eq!(r.schedulers[0].instances[0].queues[0].rate.pps, 30.0);
        // The scheduler's totals are 130 (100 retired + 30), so its rate is 30 pkt/s.
        assert_eq!(b.schedulers[0].totals().sent_pkts, 130);
        assert_eq!(r.schedulers[0].rate.pps, 30.0);
    }

    #[test]
    fn totals_add_retired_unplaced_passed_and_no_class() {
        let mut s = snapshot(
            0,
            vec![
                queue(1, 80, 0, counters(3, 300)),
                queue(2, 81, 0, counters(4, 400)),
            ],
            counters(10, 1000),
        );
        s.schedulers[0].unplaced.add(ArbiterDrop::InstanceLimit, 2);
        s.schedulers[0].instances[0]
            .totals
            .drops
            .add(ArbiterDrop::QueueLimit, 5);
        s.passed = counters(1, 64);
        s.no_class_drops = 6;
        let t = s.totals();
        assert_eq!(t.sent_pkts, 3 + 4 + 10 + 1);
        assert_eq!(t.sent_bytes, 300 + 400 + 1000 + 64);
        assert_eq!(t.drops.get(ArbiterDrop::InstanceLimit), 2);
        assert_eq!(t.drops.get(ArbiterDrop::QueueLimit), 5);
        assert_eq!(t.drops.get(ArbiterDrop::NoClass), 6);
        assert_eq!(t.drops.total(), 13);
    }

    #[test]
    fn display_prints_every_level_and_field() {
        let mut c = counters(7, 7000);
        c.drops
            .add(ArbiterDrop::Sched(DropReason::FlowPacketLimit), 3);
        c.backlog_pkts = 2;
        c.backlog_bytes = 2000;
        let mut q = queue(1, 80, 0, c);
        q.key = FlowKey::v4(0x0a00_0001, 0x0a01_0001, 5000, 80, 17);
        q.weight = 10;
        let mut s = snapshot(0, vec![q], counters(9, 900));
        s.schedulers[0].unplaced.add(ArbiterDrop::InstanceLimit, 4);
        s.schedulers[0].expired_instances = 2;
        s.schedulers[0].instances[0].expired_queues = 5;
        s.no_class_drops = 6;
        let text = s.to_string();
        for want in [
            "sched 1 drr 8.000 Mbit/s: 1 instance, 2 expired",
            "  instance 0 ip 10.0.0.1/0 -> 0.0.0.0/0: Sent 7000 bytes 7 pkt (dropped 3, \
             flow_packet_limit 3) backlog 2000b 2p; 1 queue, 5 expired",
            "    queue 1 weight 10 udp 10.0.0.1/5000 -> 10.1.0.1/80: Sent 7000 bytes 7 pkt \
             (dropped 3, flow_packet_limit 3) backlog 2000b 2p",
            "  retired: Sent 900 bytes 9 pkt (dropped 0) backlog 0b 0p; unplaced drops 4, \
             instance_limit 4",
            "passed (allow): Sent 0 bytes 0 pkt",
            "no_class drops: 6",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        let v6 = KeyText(&FlowKey::v6(1, 2, 3, 4, 6)).to_string();
        assert_eq!(v6, "tcp [::1]/3 -> [::2]/4");
        let r = s.rates(&s).to_string();
        assert!(r.contains("sched 1: 0 bit/s 0 pps"), "{r}");
        assert!(
            r.contains("queue 1 udp 10.0.0.1/5000 -> 10.1.0.1/80"),
            "{r}"
        );
    }

    #[test]
    fn a_framed_link_shows_its_wire_bytes_and_rate() {
        // One second of 1000 frames of 1000 bytes on ATM with overhead 10: each frame is
        // 1010 bytes, 22 cells of 53, 1166 bytes on the wire. Frames: 8 Mbit/s; wire:
        // 1166 * 8 * 1000 = 9.328 Mbit/s.
        let atm = Framing::new(10, 0, pspat_config::LinkLayer::Atm);
        let mut a = snapshot(
            0,
            vec![queue(1, 80, 0, counters(0, 0))],
            Counters::default(),
        );
        let mut b = snapshot(
            1_000_000_000,
            vec![queue(1, 80, 0, counters(1000, 1_000_000))],
            counters(10, 10_000),
        );
        // Before: nothing sent. After: 1000 frames, and 10 of 1000 bytes by an instance
        // that retired (11 660 wire bytes): the scheduler charged 1 177 660 bytes in the
        // second, 9.42128 Mbit/s.
        a.schedulers[0].framing = atm;
        b.schedulers[0].framing = atm;
        b.schedulers[0].instances[0].wire_bytes = 1_166_000;
        b.schedulers[0].retired_wire_bytes = 11_660;
        assert_eq!(b.schedulers[0].wire_bytes(), 1_177_660);
        let r = b.rates(&a);
        assert_eq!(r.schedulers[0].instances[0].rate.bps, 8e6);
        assert_eq!(r.schedulers[0].instances[0].wire_bps, Some(9_328_000.0));
        assert_eq!(r.schedulers[0].wire_bps, Some(9_421_280.0));
        let text = b.to_string();
        for want in [
            "sched 1 drr 8.000 Mbit/s: 1 instance, 0 expired, overhead 10 linklayer atm, wire \
             1177660 bytes",
            "backlog 0b 0p; wire 1166000 bytes; 1 queue, 0 expired",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        let rates = r.to_string();
        assert!(
            rates.contains(
                "  instance ip 10.0.0.1/0 -> 0.0.0.0/0: 8.000 Mbit/s 1000 pps, wire \
                 9.328 Mbit/s"
            ),
            "{rates}"
        );
        let json = serde_json::to_value(&b).unwrap();
        let s0 = &json["schedulers"][0];
        assert_eq!(s0["framing"]["overhead"], 10);
        assert_eq!(s0["framing"]["linklayer"], "atm");
        assert_eq!(s0["retired_wire_bytes"], 11_660);
        assert_eq!(s0["instances"][0]["wire_bytes"], 1_166_000);
        // Without a framing: no wire rate, and the text shows frames only.
        let plain = snapshot(
            1,
            vec![queue(1, 80, 0, counters(5, 5000))],
            Counters::default(),
        );
        assert!(!plain.to_string().contains("wire"), "{plain}");
        let r = plain.rates(&snapshot(0, vec![], Counters::default()));
        assert_eq!(
            (
                r.schedulers[0].wire_bps,
                r.schedulers[0].instances[0].wire_bps
            ),
            (None, None)
        );
        assert!(!r.to_string().contains("wire"), "{r}");
    }
}
