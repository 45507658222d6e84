//! A dummynet-style configuration behind the arbiter: scheduler instances, each with its
//! own emulated link, and queues created on the fly by masks.
//!
//! Classification is split (see `pspat_config::classify`): each client runs stage 1 (parse,
//! rules, tables) on its own thread and submits the packet with its class's stable
//! [`code`](class_code) in `Pkt::flow` and its 5-tuple in the client's key ring
//! ([`crate::keyring`]). Stage 2 runs here, on the arbiter, which alone owns the dynamic
//! state:
//!
//! 1. the class's scheduler mask applied to the key picks the scheduler instance (created
//!    on first use, at most `max_instances`, else a drop with reason `instance_limit`);
//! 2. the class's flow mask picks the queue inside the instance (created on first use as a
//!    flow of the instance's algorithm, at most `max_queues` per class and instance, else
//!    `queue_limit`);
//! 3. the packet joins that flow.
//!
//! Every instance has its own leaky-bucket link at its scheduler's bandwidth, charging each
//! packet what its framing says (the frame's length by default; `crate::link`), and counts
//! the bytes it charged for the statistics (`wire_bytes`). Instances with packets wait in
//! a min-heap keyed by when their link is free; `dequeue` serves the earliest one that is
//! free at `now`, so the arbiter's cost per packet is O(log instances) on top of the
//! algorithm's. Packets an `allow` rule let through skip scheduling: they leave in arrival
//! order, at once.
//!
//! Idle queues and instances are removed after their `idle` time (checked a few per scan,
//! round-robin, so expiry never stalls the arbiter), giving their memory back; nothing
//! here allocates per packet once a queue exists.
//!
//! Run-time changes ([`Change::Config`]): bandwidths, framings, weights, queue limits,
//! maximum lengths, rules and tables change live (a link whose bandwidth, burst or framing
//! changed is rebuilt, busy until it would have been); schedulers, flowsets and pipes can
//! be added or removed (a removed class's queues drain, and packets classified for it
//! before the change, still in mailboxes, join them; others that still arrive for it are
//! dropped as `no_class`). A tree's classes are changed, added and removed in every
//! instance (`pspat_sched::tree::LiveTree`): a removed class drains, then leaves the tree;
//! a class cannot move to another parent, change its algorithm or turn from a leaf into an
//! inner class (refused, naming it). A scheduler's algorithm, parameters or mask, a flowset's scheduler or mask,
//! and the `max_*` bounds are fixed for the life of the engine (their state is built around
//! them): a change to them is refused, naming the object, and nothing is applied. An
//! instance's queue map is bounded, when the instance is created, by the `max_queues` of the
//! classes its scheduler had then: a class added later to that scheduler shares what is left
//! (a full map is a `queue_limit` drop), until idle instances expire and are rebuilt.
//!
//! Maps of instances and of queues start with room for a few and double as new customers
//! and flows appear, up to their bound (`KeyMap::growable`): memory follows what is in use,
//! as dummynet's (which has no bound at all), and the defaults are high enough (65 536) not
//! to drop in normal use. Growing allocates, once per doubling, on a new key's packet.
//!
//! Chained pipes (`one_pass 0`, see `hops.rs`): a packet whose rules named several pipes
//! and queues is enqueued at the next one each time it leaves a link (and its delay line),
//! arriving there when it left; the link of each hop charges it from that arrival. A drop
//! at a later hop is reported to the arbiter through [`Service::late_drop`], as it has
//! already entered the scheduler.
//!
//! Statistics ([`crate::dnstats`], built on request between two scans): per queue, its
//! flow's counters in the instance's algorithm; per instance, the algorithm's totals (which
//! keep what expired queues did) plus the drops of packets that got no queue; per
//! scheduler, the totals of its retired instances and the drops of packets that got no
//! instance. The data path counts nothing new but those drops, each where it is decided.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use pspat_config::classify::{Class, ClassOrigin, Classifier, FlowKey, KeyMap, Sched};
use pspat_config::QueueLimit;
use pspat_io::Pkt;
use pspat_sched::registry::Params;
use pspat_sched::tree::diff;
use pspat_sched::{Backlog, DropReason, FlowParams, SchedStats};

use crate::control::Change;
use crate::delay::DelayLines;
use crate::dice::Dice;
use crate::dnstats::{Counters, Drops, DummynetStats};
use crate::hops::{Hops, Leaving, CHAINED};
use crate::instsched::{InstSched, Next, QFlow};
use crate::keyring::KeyRings;
use crate::link::Link;
use crate::red::RedQueue;
use crate::service::{Service, ServiceSummary};
use crate::stats::ArbiterDrop;

/// `Pkt::flow` of a packet an `allow` rule let through.
pub const PASS_CODE: u32 = 0;
/// Codes of pipes start here (flowsets use their own number, `1..=65535`).
const PIPE_BASE: u32 = 1 << 16;
/// Size of the code space.
const CODES: usize = 2 << 16;
/// No slot, no instance.
pub(crate) const NONE: u32 = u32::MAX;
/// `Dummynet::last` of a packet already charged to its link: one that comes out of a delay
/// line (charged when it entered) or leaves the last hop of a chain.
const CHARGED: u32 = u32::MAX - 1;
/// Instances per scheduler and queues per instance a map has room for at first; it
/// doubles as needed up to `max-instances` / `max-queues` (see `KeyMap::growable`).
const INITIAL_IDS: u32 = 64;
/// Seed of the loss and RED decisions: a run repeats exactly under the same arrivals.
const DICE_SEED: u64 = 0x5eed_d1ce;
/// Idle queues and instances looked at per expiry round...
const EXPIRE_BUDGET: usize = 8;
/// ... and how often a round runs (ns): an idle queue is found within
/// `max_queues / EXPIRE_BUDGET` rounds of its idle time.
const EXPIRE_EVERY_NS: u64 = 100_000;

/// The stable code of a class, carried in `Pkt::flow`: it does not change when a
/// reconfiguration renumbers the classifier's dense class indices.
pub fn class_code(origin: ClassOrigin) -> u32 {
    match origin {
        ClassOrigin::Flowset(id) => id,
        ClassOrigin::Pipe(id) => PIPE_BASE + id,
    }
}

// The `pub(crate)` fields below are what the statistics snapshot reads
// (`DummynetStats::of`, dnstats.rs).

/// What the arbiter keeps of a class.
pub(crate) struct ClassState {
    pub(crate) class: Class,
    /// Slot of its scheduler in `Dummynet::scheds`.
    sched: usize,
    pub(crate) params: FlowParams,
    /// Still in the configuration.
    live: bool,
}

/// What the arbiter keeps of a scheduler.
pub(crate) struct SchedState {
    pub(crate) sched: Sched,
    /// Masked key -> slot in `inst_ids`.
    pub(crate) instances: KeyMap<FlowKey>,
    /// Per slot of `instances`: the global instance id.
    pub(crate) inst_ids: Vec<u32>,
    pub(crate) live: bool,
    /// When a full reclaim of idle instances last ran (as `Instance::reclaimed_ns`).
    reclaimed_ns: u64,
    /// Totals of its retired instances (statistics).
    pub(crate) retired: Counters,
    /// Instances retired.
    pub(crate) expired_instances: u64,
    /// Drops of packets that got no instance.
    pub(crate) unplaced: Drops,
    /// Bytes the links of its retired instances charged (statistics).
    pub(crate) retired_wire_bytes: u64,
}

/// One scheduler instance: an algorithm, its link and its queues.
pub(crate) struct Instance {
    pub(crate) sched: InstSched,
    link: Link,
    /// Bytes its link charged for what it sent: the frames' lengths, framed.
    pub(crate) wire_bytes: u64,
    /// Slot in `Dummynet::scheds`, and slot in that scheduler's instance map.
    owner: (usize, u32),
    /// (class code, masked key) -> queue slot.
    pub(crate) queues: KeyMap<(u32, FlowKey)>,
    /// Per queue slot: its flow in `sched`, and its class slot.
    pub(crate) flows: Vec<Option<(QFlow, usize)>>,
    /// Per queue slot: when a packet last joined it (ns).
    pub(crate) last_ns: Vec<u64>,
    /// Queues per class slot (for `max_queues`).
    per_class: Vec<u32>,
    /// In the ready heap.
    ready: bool,
    /// Its scheduler kept packets when the last one was charged: its link has been busy
    /// since then (`Link::transmit_wire_backlogged`).
    backlogged: bool,
    /// When a full reclaim of idle queues last ran (at most one per EXPIRE_EVERY_NS, so a
    /// flood of new flows at the limit costs O(1) per drop).
    reclaimed_ns: u64,
    /// When it was created (ns).
    pub(crate) created_ns: u64,
    /// Per queue slot: when its current queue was created (ns).
    pub(crate) queue_created_ns: Vec<u64>,
    /// Drops of packets that got no queue (`queue_limit`, a flow the algorithm refused),
    /// and of those their queue lost or dropped early (`plr`, `red`).
    drops: Drops,
    /// Per queue slot: its RED state; empty until a class of this instance has RED.
    red: Vec<RedQueue>,
    /// Per queue slot: packets its queue lost (`plr`) and dropped early (`red`), which
    /// the algorithm never saw (its statistics; `drops` has them too).
    pub(crate) lost: Vec<(u64, u64)>,
    /// Queues removed after their idle time.
    pub(crate) expired_queues: u64,
}

/// The dummynet service; see the module docs.
pub(crate) struct Dummynet {
    /// Code -> class slot.
    class_of_code: Vec<u32>,
    pub(crate) classes: Vec<ClassState>,
    pub(crate) scheds: Vec<SchedState>,
    pub(crate) instances: Vec<Option<Instance>>,
    free_instances: Vec<u32>,
    /// Instances with packets, by when their link is free.
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    /// The instance of the packet just dequeued (`NONE` for a passed one).
    last: u32,
    /// Packets an `allow` rule let through, in arrival order.
    pub(crate) pass: VecDeque<Pkt>,
    /// Packets that left a link with a delay, one line per scheduler slot.
    pub(crate) delays: DelayLines,
    /// Loss and RED decisions.
    dice: Dice,
    keys: Arc<KeyRings>,
    /// Packets crossing several pipes (`one_pass 0`).
    hops: Hops,
    /// Packets dropped at a later hop of their chain, for the arbiter.
    late: Vec<(Pkt, ArbiterDrop)>,
    /// Per-instance packet capacity (every packet holds a client mailbox slot).
    capacity: u32,
    now: u64,
    /// See [`Service::set_clock`].
    floor_ns: u64,
    /// Scheduler counters of the removed instances (for the final summary).
    retired: SchedStats,
    /// Packets an `allow` rule let through, sent so far.
    pub(crate) passed: Counters,
    /// `no_class` drops.
    pub(crate) no_class: u64,
    expire_cursor: usize,
    next_expire_ns: u64,
}

impl Dummynet {
    /// A service for `plan`; `capacity` bounds the packets queued at once.
    pub(crate) fn new(
        plan: Arc<Classifier>,
        keys: Arc<KeyRings>,
        capacity: u32,
    ) -> Result<Self, String> {
        let mut d = Dummynet {
            class_of_code: vec![NONE; CODES],
            classes: Vec::new(),
            scheds: Vec::new(),
            instances: Vec::new(),
            free_instances: Vec::new(),
            heap: BinaryHeap::new(),
            last: NONE,
            pass: VecDeque::with_capacity(capacity as usize),
            delays: DelayLines::new(),
            dice: Dice::new(DICE_SEED),
            keys,
            hops: Hops::new(),
            late: Vec::new(),
            capacity,
            now: 0,
            floor_ns: 0,
            retired: SchedStats::default(),
            passed: Counters::default(),
            no_class: 0,
            expire_cursor: 0,
            next_expire_ns: 0,
        };
        d.check(&plan)?;
        d.install(plan);
        Ok(d)
    }

    /// Refuses a plan that changes what cannot change live (see the module docs).
    fn check(&self, plan: &Classifier) -> Result<(), String> {
        for s in plan.scheds() {
            if let Some(old) = self.scheds.iter().find(|o| o.sched.origin == s.origin) {
                let o = &old.sched;
                let name = sched_name(s);
                if o.algorithm != s.algorithm || o.params != s.params {
                    return Err(format!(
                        "{name}: the algorithm and its parameters cannot change while running \
                         ({} -> {})",
                        o.algorithm, s.algorithm
                    ));
                }
                match (o.tree.as_deref(), s.tree.as_deref()) {
                    (None, None) => {}
                    // (Every class's algorithm and parameters were built once when the
                    // configuration was resolved: what `diff` leaves is the tree's shape.)
                    (Some(old), Some(new)) => {
                        diff(old, new).map_err(|e| format!("{name}: {e}"))?;
                    }
                    _ => {
                        return Err(format!(
                            "{name}: a scheduler cannot gain or lose its classes while \
                             running (restart with the new tree)"
                        ))
                    }
                }
                if o.mask != s.mask || o.max_instances != s.max_instances {
                    return Err(format!(
                        "{name}: the scheduler mask and max-instances cannot change while \
                         running"
                    ));
                }
            } else {
                // Built now, so that a bad name or parameter is refused before any change.
                InstSched::build(&s.algorithm, &params_of(s), s.tree.as_deref(), 1)
                    .map_err(|e| format!("{}: {e}", sched_name(s)))?;
            }
        }
        for c in plan.classes() {
            let code = class_code(c.origin) as usize;
            let Some(&slot) = self.class_of_code.get(code) else {
                continue;
            };
            if slot == NONE {
                continue;
            }
            let old = &self.classes[slot as usize].class;
            let name = class_name(c.origin);
            if plan.scheds()[c.sched as usize].origin
                != self.scheds[self.classes[slot as usize].sched].sched.origin
            {
                return Err(format!("{name}: its scheduler cannot change while running"));
            }
            if old.mask != c.mask || old.max_queues != c.max_queues {
                return Err(format!(
                    "{name}: the flow mask and max-queues cannot change while running"
                ));
            }
            flow_params(c, self.capacity)
                .validate()
                .map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(())
    }

    /// Makes `plan` current (after [`Dummynet::check`]).
    fn install(&mut self, plan: Arc<Classifier>) {
        for s in self.scheds.iter_mut() {
            s.live = false;
        }
        let mut sched_slot = Vec::with_capacity(plan.scheds().len());
        for s in plan.scheds() {
            match self.scheds.iter().position(|o| o.sched.origin == s.origin) {
                Some(i) => {
                    let st = &mut self.scheds[i];
                    st.live = true;
                    if st.sched.bandwidth_bps != s.bandwidth_bps
                        || st.sched.burst_bytes != s.burst_bytes
                        || st.sched.framing != s.framing
                    {
                        for &id in st.inst_ids.iter().filter(|&&id| id != NONE) {
                            if let Some(inst) = self.instances[id as usize].as_mut() {
                                let busy_until = inst.link.idle_at_ns().max(self.now);
                                inst.link = link_of(s);
                                inst.link.reset(busy_until);
                            }
                        }
                    }
                    if let (Some(old), Some(new)) = (&st.sched.tree, &s.tree) {
                        // Every instance's tree follows: classes kept keep their packets
                        // and their place, removed ones drain (checked with the plan: a
                        // refusal here cannot happen, and would leave the change half
                        // made in that instance only).
                        if old != new {
                            let edits = diff(old, new).unwrap_or_default();
                            for &id in st.inst_ids.iter().filter(|&&id| id != NONE) {
                                if let Some(inst) = self.instances[id as usize].as_mut() {
                                    let _ = inst.sched.reshape(self.now, old, new, &edits);
                                }
                            }
                        }
                    }
                    st.sched = s.clone();
                    sched_slot.push(i);
                }
                None => {
                    let n = s.max_instances.max(1);
                    sched_slot.push(self.scheds.len());
                    self.scheds.push(SchedState {
                        sched: s.clone(),
                        instances: KeyMap::growable(INITIAL_IDS, n),
                        inst_ids: vec![NONE; INITIAL_IDS.min(n) as usize],
                        live: true,
                        reclaimed_ns: 0,
                        retired: Counters::default(),
                        expired_instances: 0,
                        unplaced: Drops::default(),
                        retired_wire_bytes: 0,
                    });
                }
            }
        }
        // Delay lines, one per scheduler slot, allocated once a link has a delay or no
        // rate (its packets leave through its line at once).
        if self
            .scheds
            .iter()
            .any(|s| s.sched.delay_ns > 0 || s.sched.bandwidth_bps == 0)
        {
            self.delays.reserve(self.capacity, self.scheds.len());
        }
        if !plan.one_pass() {
            self.hops.reserve(self.capacity);
        }
        for c in self.classes.iter_mut() {
            c.live = false;
        }
        for c in plan.classes() {
            let code = class_code(c.origin) as usize;
            let params = flow_params(c, self.capacity);
            let slot = self.class_of_code[code];
            if slot == NONE {
                self.class_of_code[code] = self.classes.len() as u32;
                self.classes.push(ClassState {
                    class: c.clone(),
                    sched: sched_slot[c.sched as usize],
                    params,
                    live: true,
                });
                for inst in self.instances.iter_mut().flatten() {
                    inst.per_class.push(0);
                }
                continue;
            }
            let slot = slot as usize;
            let changed = self.classes[slot].params != params;
            let st = &mut self.classes[slot];
            st.class = c.clone();
            st.params = params;
            st.live = true;
            if changed {
                for inst in self.instances.iter_mut().flatten() {
                    for (f, cs) in inst.flows.iter().flatten() {
                        if *cs == slot {
                            // Validated by `check`; a refusal would leave the old weight.
                            let _ = inst.sched.update_flow(*f, params);
                        }
                    }
                }
            }
        }
    }

    /// The instance for `key` of scheduler slot `s`, created if needed.
    fn instance(&mut self, s: usize, key: &FlowKey) -> Result<u32, ArbiterDrop> {
        let st = &mut self.scheds[s];
        let masked = key.masked(&st.sched.mask);
        let hash = masked.hash64();
        let (slot, new) = match st.instances.get_or_insert(masked, hash, self.now) {
            Ok(r) => r,
            Err(_) if self.now.saturating_sub(st.reclaimed_ns) < EXPIRE_EVERY_NS => {
                return Err(ArbiterDrop::InstanceLimit)
            }
            Err(_) => {
                // At the limit: reclaim idle instances first (the periodic expiry may
                // not have run while the arbiter slept), then try once more.
                st.reclaimed_ns = self.now;
                let budget = st.instances.capacity() as usize;
                self.expire_instances(s, self.now, budget);
                let st = &mut self.scheds[s];
                st.instances
                    .get_or_insert(masked, hash, self.now)
                    .map_err(|_| ArbiterDrop::InstanceLimit)?
            }
        };
        let st = &mut self.scheds[s];
        if slot as usize >= st.inst_ids.len() {
            // The map grew (a new instance found it full).
            st.inst_ids.resize(st.instances.capacity() as usize, NONE);
        }
        if !new {
            return Ok(st.inst_ids[slot as usize]);
        }
        let sched = match InstSched::build(
            &st.sched.algorithm,
            &params_of(&st.sched),
            st.sched.tree.as_deref(),
            self.capacity,
        ) {
            Ok(s) => s,
            Err(_) => {
                // Checked when the plan was installed; keep the accounting whole anyway.
                st.instances.remove(slot);
                return Err(ArbiterDrop::Sched(DropReason::UnknownFlow));
            }
        };
        let queues: u32 = self
            .classes
            .iter()
            .filter(|c| c.sched == s)
            .map(|c| c.class.max_queues.max(1))
            .sum::<u32>()
            .max(1);
        // Idle since the engine's clock floor: its first packet starts when it arrived (a
        // late arbiter creates the instance after that), not when the arbiter got to it.
        let mut link = link_of(&st.sched);
        link.reset(self.floor_ns.min(self.now));
        let inst = Instance {
            sched,
            link,
            wire_bytes: 0,
            owner: (s, slot),
            queues: KeyMap::growable(INITIAL_IDS, queues),
            flows: vec![None; INITIAL_IDS.min(queues) as usize],
            last_ns: vec![0; INITIAL_IDS.min(queues) as usize],
            per_class: vec![0; self.classes.len()],
            ready: false,
            backlogged: false,
            reclaimed_ns: 0,
            created_ns: self.now,
            queue_created_ns: vec![0; INITIAL_IDS.min(queues) as usize],
            drops: Drops::default(),
            red: Vec::new(),
            lost: vec![(0, 0); INITIAL_IDS.min(queues) as usize],
            expired_queues: 0,
        };
        let id = match self.free_instances.pop() {
            Some(id) => {
                self.instances[id as usize] = Some(inst);
                id
            }
            None => {
                self.instances.push(Some(inst));
                self.heap.reserve(1);
                (self.instances.len() - 1) as u32
            }
        };
        self.scheds[s].inst_ids[slot as usize] = id;
        Ok(id)
    }

    /// The instance and queue slot of removed class slot `slot` (code `code`) for `key`,
    /// in scheduler slot `s`, if both are still there.
    fn draining_queue(
        &self,
        s: usize,
        slot: usize,
        code: u32,
        key: &FlowKey,
    ) -> Option<(u32, usize)> {
        let st = &self.scheds[s];
        let masked = key.masked(&st.sched.mask);
        let id = *st
            .inst_ids
            .get(st.instances.get(&masked, masked.hash64())? as usize)?;
        let inst = self.instances.get(id as usize)?.as_ref()?;
        let (qkey, hash) = queue_key(&self.classes[slot].class, code, key);
        let q = inst.queues.get(&qkey, hash)? as usize;
        // (a queue whose tree class drained and left has no flow any more)
        let (f, _) = (*inst.flows.get(q)?)?;
        inst.sched.flow_stats(f).map(|_| (id, q))
    }

    /// Removes an instance that is empty.
    fn retire_instance(&mut self, id: u32) {
        if let Some(inst) = self.instances[id as usize].take() {
            add_stats(&mut self.retired, &inst.sched.stats());
            let (s, slot) = inst.owner;
            let st = &mut self.scheds[s];
            st.retired.add(&inst.totals());
            st.retired_wire_bytes += inst.wire_bytes;
            st.expired_instances += 1;
            st.inst_ids[slot as usize] = NONE;
            self.free_instances.push(id);
        }
    }

    /// Looks at a few queues and instances for idle ones to remove.
    fn expire(&mut self, now: u64) {
        if self.instances.is_empty() {
            return;
        }
        let id = self.expire_cursor % self.instances.len();
        self.expire_cursor = id + 1;
        if let Some(inst) = self.instances[id].as_mut() {
            expire_queues(inst, &self.classes, now, EXPIRE_BUDGET);
            inst.sched.drain_classes();
        }
        // Instances: one scheduler's map per round, round-robin.
        let s = id % self.scheds.len().max(1);
        if s < self.scheds.len() {
            self.expire_instances(s, now, EXPIRE_BUDGET);
        }
    }

    /// Removes up to `budget` looked-at instances of scheduler slot `s` that are empty and
    /// idle.
    fn expire_instances(&mut self, s: usize, now: u64, budget: usize) {
        let st = &mut self.scheds[s];
        let (insts, idle) = (&self.instances, st.sched.idle_ns);
        let mut gone = Vec::new();
        st.instances.expire(
            now,
            idle,
            budget,
            |slot| {
                let id = st.inst_ids[slot as usize];
                id == NONE
                    || insts[id as usize]
                        .as_ref()
                        .is_some_and(|i| i.sched.is_empty() && i.queues.is_empty())
            },
            |slot| gone.push(slot),
        );
        for slot in gone {
            let id = self.scheds[s].inst_ids[slot as usize];
            if id != NONE {
                self.retire_instance(id);
            }
        }
    }
}

/// Removes the queues of `inst`, among `budget` looked at, that are empty and idle for
/// their class's idle time.
fn expire_queues(inst: &mut Instance, classes: &[ClassState], now: u64, budget: usize) {
    let Instance {
        sched,
        queues,
        flows,
        last_ns,
        per_class,
        expired_queues,
        ..
    } = inst;
    let mut gone = Vec::new();
    queues.expire(
        now,
        0,
        budget,
        |q| match flows[q as usize] {
            Some((f, c)) => {
                // (a flow without statistics went with its removed tree class)
                now.saturating_sub(last_ns[q as usize]) >= classes[c].class.idle_ns
                    && sched.flow_stats(f).map_or(true, |s| s.backlog.pkts == 0)
            }
            None => true,
        },
        |q| gone.push(q),
    );
    for q in gone {
        if let Some((f, c)) = flows[q as usize].take() {
            // The flow's counters stay in the algorithm's totals (its flow table keeps
            // what removed flows sent and dropped).
            let _ = sched.remove_flow(f);
            per_class[c] -= 1;
            *expired_queues += 1;
        }
    }
}

/// What a queue of `class` (code `code`) for `key` is filed under in its instance's map.
#[inline]
fn queue_key(class: &Class, code: u32, key: &FlowKey) -> ((u32, FlowKey), u64) {
    let masked = key.masked(&class.mask);
    let hash = masked.hash64() ^ u64::from(code).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((code, masked), hash)
}

/// The queue slot of class slot `slot` (code `code`) for `key` in `inst`, created if
/// needed, or why the packet gets none.
#[inline]
fn queue_of(
    inst: &mut Instance,
    classes: &[ClassState],
    slot: usize,
    code: u32,
    key: &FlowKey,
    now: u64,
) -> Result<usize, ArbiterDrop> {
    let class = &classes[slot];
    let (qkey, hash) = queue_key(&class.class, code, key);
    let mut got = inst.queues.get_or_insert(qkey, hash, now);
    let at_limit = |inst: &Instance, got: &Result<(u32, bool), _>| match got {
        Ok((_, true)) => inst.per_class[slot] >= class.class.max_queues,
        Ok((_, false)) => false,
        Err(_) => true,
    };
    if at_limit(inst, &got) {
        // At the limit: reclaim idle queues first (the periodic expiry may not have run
        // while the arbiter slept), then try once more.
        if let Ok((q, true)) = got {
            inst.queues.remove(q);
        }
        if now.saturating_sub(inst.reclaimed_ns) < EXPIRE_EVERY_NS {
            return Err(ArbiterDrop::QueueLimit);
        }
        inst.reclaimed_ns = now;
        let budget = inst.queues.capacity() as usize;
        expire_queues(inst, classes, now, budget);
        got = inst.queues.get_or_insert(qkey, hash, now);
        if at_limit(inst, &got) {
            if let Ok((q, true)) = got {
                inst.queues.remove(q);
            }
            return Err(ArbiterDrop::QueueLimit);
        }
    }
    let (q, new) = got.map_err(|_| ArbiterDrop::QueueLimit)?;
    let q = q as usize;
    if q >= inst.flows.len() {
        // The map grew (a new queue found it full): its per-queue arrays follow.
        let n = inst.queues.capacity() as usize;
        inst.flows.resize(n, None);
        inst.last_ns.resize(n, 0);
        inst.queue_created_ns.resize(n, 0);
        inst.lost.resize(n, (0, 0));
        if !inst.red.is_empty() {
            inst.red.resize(n, RedQueue::default());
        }
    }
    if new {
        match inst.sched.add_flow(class.class.leaf, class.params) {
            Ok(f) => {
                inst.flows[q] = Some((f, slot));
                inst.per_class[slot] += 1;
                inst.queue_created_ns[q] = now;
                inst.lost[q] = (0, 0);
                if let Some(r) = inst.red.get_mut(q) {
                    *r = RedQueue::default();
                }
            }
            Err(_) => {
                inst.queues.remove(q as u32);
                return Err(ArbiterDrop::Sched(DropReason::UnknownFlow));
            }
        }
    }
    Ok(q)
}

impl Dummynet {
    /// The class slot of class code `code`.
    #[inline]
    fn class_slot(&mut self, code: u32) -> Result<usize, ArbiterDrop> {
        match self.class_of_code.get(code as usize) {
            // A class removed from the configuration still takes packets classified before
            // the change, into its queues that are still there (`enqueue_class`).
            Some(&s) if s != NONE => Ok(s as usize),
            _ => {
                self.no_class += 1;
                Err(ArbiterDrop::NoClass)
            }
        }
    }

    /// When `p` arrived at the hop it is in, for its link: its submission, or for a
    /// chained packet when it left the hop before; not before the floor
    /// ([`Service::set_clock`]).
    #[inline]
    fn arrived_ns(&self, p: &Pkt) -> u64 {
        let at = if p.flow & CHAINED == 0 {
            p.submit_ns
        } else {
            self.hops.arrived_ns(p.seq)
        };
        at.max(self.floor_ns)
    }

    /// A chained packet left a hop at `at_ns`: enqueued at its next one, or returned
    /// (with its tag back in `seq`) when that was its last. A drop at the next hop goes to
    /// `late`.
    fn leave_hop(&mut self, mut p: Pkt, at_ns: u64) -> Option<Pkt> {
        let entry = p.seq;
        match self.hops.leave(entry, at_ns) {
            Leaving::Out { tag } => {
                p.seq = tag;
                p.flow &= !CHAINED;
                Some(p)
            }
            Leaving::Next { code, key } => {
                p.flow = code | CHAINED;
                let r = self
                    .class_slot(code)
                    .and_then(|slot| self.enqueue_class(p, slot, code, &key, at_ns));
                if let Err(d) = r {
                    p.seq = self.hops.drop_out(entry);
                    p.flow = code;
                    self.late.push((p, d));
                }
                None
            }
        }
    }

    /// Enqueues `p` in class slot `slot` (code `code`) for `key`, having arrived at
    /// `arrived_ns`.
    fn enqueue_class(
        &mut self,
        p: Pkt,
        slot: usize,
        code: u32,
        key: &FlowKey,
        arrived_ns: u64,
    ) -> Result<(), ArbiterDrop> {
        let now = self.now;
        let key = *key;
        let s = self.classes[slot].sched;
        let q = if self.classes[slot].live {
            let id = match self.instance(s, &key) {
                Ok(id) => id,
                Err(d) => {
                    self.scheds[s].unplaced.add(d, 1);
                    return Err(d);
                }
            };
            let inst = self.instances[id as usize]
                .as_mut()
                .expect("instance ids in the maps are live");
            match queue_of(inst, &self.classes, slot, code, &key, now) {
                Ok(q) => (id, q),
                Err(d) => {
                    inst.drops.add(d, 1);
                    return Err(d);
                }
            }
        } else {
            // Classified before its class was removed (it was in a mailbox then): it
            // joins the class's queue if that is still there, draining, never a new one.
            match self.draining_queue(s, slot, code, &key) {
                Some(q) => q,
                None => {
                    self.no_class += 1;
                    return Err(ArbiterDrop::NoClass);
                }
            }
        };
        let (id, q) = q;
        let inst = self.instances[id as usize]
            .as_mut()
            .expect("instance ids in the maps are live");
        let (f, _) = inst.flows[q].expect("a queue in the map has a flow");
        // Loss, then early drop, then the queue's limit (in the algorithm), as dummynet.
        let qm = &self.classes[slot].class.qm;
        if !qm.plr.is_zero() && self.dice.chance(qm.plr) {
            inst.drops.add(ArbiterDrop::Plr, 1);
            inst.lost[q].0 += 1;
            inst.last_ns[q] = now;
            return Err(ArbiterDrop::Plr);
        }
        if let Some(red) = &qm.red {
            if inst.red.is_empty() {
                // Once per instance, the first time one of its classes has RED.
                inst.red = vec![RedQueue::default(); inst.flows.len()];
            }
            let b = inst
                .sched
                .flow_stats(f)
                .map(|s| s.backlog)
                .unwrap_or_default();
            let size = match self.classes[slot].class.limit {
                QueueLimit::Packets(_) => b.pkts,
                QueueLimit::Bytes(_) => b.bytes,
            };
            let idle = (b.pkts == 0).then(|| now.saturating_sub(inst.last_ns[q]));
            let rate = inst.link.rate_bps();
            let byte_ns = if rate == 0 { 0.0 } else { 8e9 / rate as f64 };
            if inst.red[q].drops(red, size, idle, byte_ns, &mut self.dice) {
                inst.drops.add(ArbiterDrop::Red, 1);
                inst.lost[q].1 += 1;
                inst.last_ns[q] = now;
                return Err(ArbiterDrop::Red);
            }
        }
        inst.last_ns[q] = now;
        // A refusal is counted by the algorithm, against the flow (the queue's counters).
        inst.sched
            .enqueue(now, f, p)
            .map_err(|r| ArbiterDrop::Sched(r.reason))?;
        if inst.link.rate_bps() == 0 && !inst.sched.is_tree() {
            // An unlimited link never holds a packet back: it leaves the queue now (as
            // dummynet serves an idle link from its enqueue), so that a burst drained from
            // a mailbox is not dropped at the queue's limit. The algorithm still sees it
            // go, for the queue's counters. Sent on from the scheduler's delay line, due
            // now or `delay` later.
            let Next::Pkt(mut p) = inst.sched.dequeue(now) else {
                unreachable!("the packet just queued")
            };
            inst.wire_bytes += inst.link.wire_len(p.len);
            p.depart_ns = now.max(arrived_ns);
            let line = inst.owner.0;
            let due = p.depart_ns + self.scheds[line].sched.delay_ns;
            if let Err(p) = self.delays.push(line as u32, due, p) {
                // Cannot happen: the lines hold as many packets as the engine can.
                self.pass.push_back(p);
            }
            return Ok(());
        }
        if !inst.ready {
            inst.ready = true;
            self.heap.push(Reverse((inst.link.idle_at_ns(), id)));
        }
        Ok(())
    }
}

impl Service for Dummynet {
    fn enqueue(&mut self, mut p: Pkt, now: u64) -> Result<(), ArbiterDrop> {
        self.now = now;
        // Read the key (below) before the tag replaces the sequence number it is filed by.
        let key_seq = p.seq;
        let tag = self.keys.tag(p.client, key_seq);
        if p.flow == PASS_CODE {
            p.seq = tag;
            self.pass.push_back(p);
            return Ok(());
        }
        let code = p.flow;
        let slot = self.class_slot(code)?;
        let key = FlowKey::from_words(self.keys.get(p.client, key_seq));
        let hops = self.keys.hops(p.client, key_seq);
        let arrived = p.submit_ns.max(self.floor_ns);
        if hops == 0 {
            p.seq = tag;
            return self.enqueue_class(p, slot, code, &key, arrived);
        }
        // The first hop of a chain: the packet keeps its entry in `seq` until it leaves
        // the last one.
        let entry = self.hops.start(key, tag, hops, arrived);
        p.seq = entry;
        p.flow = code | CHAINED;
        let r = self.enqueue_class(p, slot, code, &key, arrived);
        if r.is_err() {
            self.hops.drop_out(entry);
        }
        r
    }

    fn dequeue(&mut self, now: u64) -> Option<Pkt> {
        self.now = now;
        while let Some(p) = self.delays.pop_due(now) {
            if p.flow & CHAINED == 0 {
                self.last = CHARGED;
                return Some(p);
            }
            // Left its hop when due (`depart_ns`).
            if let Some(p) = self.leave_hop(p, p.depart_ns) {
                self.last = CHARGED;
                return Some(p);
            }
        }
        if let Some(p) = self.pass.pop_front() {
            self.last = NONE;
            return Some(p);
        }
        while let Some(&Reverse((at, id))) = self.heap.peek() {
            if at > now {
                return None;
            }
            self.heap.pop();
            let Some(inst) = self.instances[id as usize].as_mut() else {
                continue;
            };
            match inst.sched.dequeue(now) {
                Next::Wait(at) => {
                    // Held by the ceils of its classes: asked again then.
                    self.heap.push(Reverse((at.max(now + 1), id)));
                }
                Next::Pkt(mut p) => {
                    self.last = id;
                    let line = inst.owner.0;
                    let delay = self.scheds[line].sched.delay_ns;
                    if delay == 0 && p.flow & CHAINED == 0 {
                        return Some(p);
                    }
                    // Released onto the link now (or at its arrival, when this scan's
                    // clock reading is older than the packet); sent on `delay` later.
                    let arrived = self.arrived_ns(&p);
                    self.charge(&mut p);
                    let due = now.max(arrived) + delay;
                    if delay == 0 {
                        // A chained packet with no delay goes on to its next hop now.
                        if let Some(p) = self.leave_hop(p, due) {
                            self.last = CHARGED;
                            return Some(p);
                        }
                        continue;
                    }
                    if let Err(p) = self.delays.push(line as u32, due, p) {
                        // Cannot happen: the lines hold as many packets as the engine can.
                        self.last = CHARGED;
                        return Some(p);
                    }
                }
                Next::Idle => {
                    inst.ready = false;
                    inst.backlogged = false;
                }
            }
        }
        None
    }

    fn charge(&mut self, p: &mut Pkt) {
        if self.last == CHARGED {
            // Charged to its link when it entered the delay line (`depart_ns` is when it
            // left the line), or when it left its last hop.
            return;
        }
        if self.last == NONE {
            p.depart_ns = self.now.max(p.submit_ns);
            self.passed.sent_pkts += 1;
            self.passed.sent_bytes += u64::from(p.len);
            return;
        }
        let id = self.last;
        let arrived = self.arrived_ns(p);
        let inst = self.instances[id as usize]
            .as_mut()
            .expect("the instance just served is live");
        let wire = inst.link.wire_len(p.len);
        inst.wire_bytes += wire;
        p.depart_ns = inst
            .link
            .charge_wire(wire, arrived, self.floor_ns, inst.backlogged);
        inst.backlogged = !inst.sched.is_empty();
        if !inst.backlogged {
            inst.ready = false;
        } else {
            self.heap.push(Reverse((inst.link.idle_at_ns(), id)));
        }
    }

    fn wake_at_ns(&self) -> u64 {
        if !self.pass.is_empty() {
            return self.now;
        }
        let link = self.heap.peek().map(|Reverse((at, _))| *at);
        match (link, self.delays.next_due()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => self.now,
        }
    }

    fn is_empty(&self) -> bool {
        self.pass.is_empty() && self.heap.is_empty() && self.delays.is_empty()
    }

    fn arrivals_may_leave_sooner(&self) -> bool {
        // Many instances, each with its own link, and delay lines.
        true
    }

    fn max_len(&self, _flow: u32) -> u32 {
        // Aggregation is refused with a dummynet configuration (engine validation).
        0
    }

    fn start(&mut self, now: u64) {
        self.now = now;
    }

    fn set_clock(&mut self, floor_ns: u64, _drained_ns: u64) {
        // Links are not restarted when their instance runs dry (`transmit_arrived` starts
        // each packet no earlier than its arrival).
        self.floor_ns = floor_ns;
    }

    fn tick(&mut self, now: u64) {
        self.now = now;
        if now >= self.next_expire_ns {
            self.next_expire_ns = now + EXPIRE_EVERY_NS;
            self.expire(now);
        }
    }

    fn apply(&mut self, change: Change, now: u64) -> Result<(), String> {
        self.now = now;
        match change {
            Change::Plan(plan) => {
                self.check(&plan)?;
                self.install(plan);
                Ok(())
            }
            // `Engine::reconfigure` compiles a configuration on the caller's thread and
            // hands over a `Plan`: the arbiter never spends time compiling tables.
            Change::Config(_) => Err(
                "a configuration reaches the arbiter compiled (Engine::reconfigure does it)".into(),
            ),
            Change::Rate(_) | Change::Flow { .. } => Err(
                "this engine runs a dummynet-style configuration: change the bandwidth of a \
                 scheduler or the weight of a flowset in the configuration instead"
                    .into(),
            ),
        }
    }

    fn refused(&self, mut p: Pkt) -> Pkt {
        p.seq = self.keys.tag(p.client, p.seq);
        p
    }

    fn late_drop(&mut self) -> Option<(Pkt, ArbiterDrop)> {
        self.late.pop()
    }

    fn summary(&self) -> ServiceSummary {
        let mut stats = self.retired.clone();
        stats.sent_pkts += self.passed.sent_pkts;
        stats.sent_bytes += self.passed.sent_bytes;
        let mut backlog = Backlog::default();
        for inst in self.instances.iter().flatten() {
            add_stats(&mut stats, &inst.sched.stats());
            let b = inst.sched.backlog();
            backlog.pkts += b.pkts;
            backlog.bytes += b.bytes;
        }
        backlog.pkts += self.pass.len() as u64;
        let (pkts, bytes) = self.delays.held();
        backlog.pkts += pkts;
        backlog.bytes += bytes;
        backlog.bytes += self.pass.iter().map(|p| u64::from(p.len)).sum::<u64>();
        ServiceSummary {
            algorithm: "dummynet",
            stats,
            backlog,
            dummynet: Some(DummynetStats::of(self, self.now)),
        }
    }

    fn dummynet_stats(&self, now: u64) -> Result<DummynetStats, String> {
        Ok(DummynetStats::of(self, now))
    }
}

impl Instance {
    /// Everything it did: its algorithm's totals (expired queues included) and the drops
    /// of packets that got no queue.
    pub(crate) fn totals(&self) -> Counters {
        let mut c = Counters::of_sched(&self.sched.stats());
        c.drops.add_all(&self.drops);
        c
    }
}

fn add_stats(into: &mut SchedStats, s: &SchedStats) {
    into.sent_pkts += s.sent_pkts;
    into.sent_bytes += s.sent_bytes;
    for (r, n) in s.drops.nonzero() {
        into.drops.add(r, n);
    }
}

/// A new instance's link: the scheduler's rate, burst and framing.
fn link_of(s: &Sched) -> Link {
    Link::new(s.bandwidth_bps)
        .with_framing(s.framing)
        .with_burst(s.burst_bytes)
}

fn params_of(s: &Sched) -> Params {
    s.params.iter().fold(Params::new(), |p, (k, v)| p.set(k, v))
}

/// A queue's flow parameters, from its class. A byte limit also bounds the queue's ring at
/// the engine's packet capacity.
fn flow_params(c: &Class, capacity: u32) -> FlowParams {
    let p = FlowParams::weighted(c.weight).with_max_len(c.max_len);
    match c.limit {
        QueueLimit::Packets(n) => p.with_limit_pkts(n.min(capacity.max(1))),
        QueueLimit::Bytes(b) => p
            .with_limit_bytes(b)
            .with_limit_pkts((b / 64).clamp(1, u64::from(capacity.max(1))) as u32),
    }
}

fn sched_name(s: &Sched) -> String {
    match s.origin {
        pspat_config::classify::SchedOrigin::Sched(id) => format!("sched {id}"),
        pspat_config::classify::SchedOrigin::Pipe(id) => format!("pipe {id}"),
    }
}

fn class_name(o: ClassOrigin) -> String {
    match o {
        ClassOrigin::Flowset(id) => format!("queue {id}"),
        ClassOrigin::Pipe(id) => format!("pipe {id}"),
    }
}
