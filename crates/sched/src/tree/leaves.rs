//! Where a tree keeps its flows: the schedulers of its leaf classes.
//!
//! - [`DynLeaves`]: one scheduler per leaf, of any algorithm of the registry (leaves of
//!   different algorithms in one tree), each behind a trait object with its own flow
//!   table.
//! - [`SharedLeaves`]: the leaves all run one [`Policy`], monomorphised, each its own
//!   instance (DRR's round, QFQ's groups), over **one** flow table shared by the whole
//!   tree. A policy touches only its own flows (its lists and heaps link flows it was told
//!   about), so the instances share the table without seeing each other. The flows of a
//!   leaf are then neighbours in one array rather than in 10k separate allocations, and a
//!   packet's path reaches its flow without a dynamic call: with 10k subscriber leaves this
//!   is what most of a packet's cache misses were (docs/PERFORMANCE.md, "Trees").
//!
//! [`build`] picks [`SharedLeaves`] when every leaf runs the same policy with the same
//! parameters, [`DynLeaves`] otherwise.

use crate::error::{ConfigError, FlowError, Rejected};
use crate::flow::{FlowId, FlowParams};
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{self, Params, PolicyVisitor};
use crate::scheduler::Scheduler;
use crate::stats::{Backlog, DropReason, FlowStats, SchedStats};
use crate::table::FlowTable;
use crate::tree::spec::{ClassSpec, SpecError};

/// The leaf classes' schedulers, by leaf index.
pub trait Leaves<P> {
    /// Adds a leaf scheduling its flows as `spec` says; returns its index.
    fn add_leaf(&mut self, spec: &ClassSpec) -> Result<u32, SpecError>;
    /// Makes removed leaf `leaf` ([`Leaves::remove_leaf`]) a new one, as `spec` says; what
    /// the old one counted stays in [`Leaves::total_stats`].
    fn replace_leaf(&mut self, leaf: u32, spec: &ClassSpec) -> Result<(), SpecError>;
    /// Creates a flow in leaf `leaf`.
    fn add_flow(&mut self, leaf: u32, params: FlowParams) -> Result<FlowId, FlowError>;
    /// Changes a flow's parameters (as [`Scheduler::update_flow`]).
    fn update_flow(&mut self, leaf: u32, flow: FlowId, params: FlowParams)
        -> Result<(), FlowError>;
    /// Removes a flow, handing back its queued packets, oldest first, counted as drops
    /// with reason [`DropReason::FlowRemoved`] (as [`Scheduler::remove_flow`]).
    fn remove_flow(&mut self, leaf: u32, flow: FlowId) -> Result<Vec<P>, FlowError>;
    /// Counters of a flow.
    fn flow_stats(&self, leaf: u32, flow: FlowId) -> Option<FlowStats>;
    /// Parameters of a flow.
    fn flow_params(&self, leaf: u32, flow: FlowId) -> Option<FlowParams>;
    /// Removes every flow of `leaf`, which is empty (its class was removed).
    fn remove_leaf(&mut self, leaf: u32);
    /// Queues `pkt` on `flow` of `leaf`; `Ok(true)` if the leaf was empty.
    fn enqueue(&mut self, leaf: u32, flow: FlowId, pkt: P) -> Result<bool, Rejected<P>>;
    /// The next packet of `leaf`, which is not empty.
    fn dequeue(&mut self, leaf: u32) -> (FlowId, P);
    /// Whether `leaf` holds no packet.
    fn is_empty(&self, leaf: u32) -> bool;
    /// Counters of `leaf` (shared leaves: its flows' drops are the table's).
    fn stats(&self, leaf: u32) -> SchedStats;
    /// Packets and bytes queued in all leaves.
    fn backlog(&self) -> Backlog;
    /// Counters of all leaves together.
    fn total_stats(&self) -> SchedStats;
}

/// One boxed scheduler per leaf.
pub struct DynLeaves<P> {
    scheds: Vec<Box<dyn Scheduler<P>>>,
    /// What the schedulers of replaced leaves counted.
    retired: SchedStats,
}

impl<P> DynLeaves<P> {
    /// These schedulers, leaf `i` being `scheds[i]`.
    pub fn new(scheds: Vec<Box<dyn Scheduler<P>>>) -> Self {
        Self {
            scheds,
            retired: SchedStats::default(),
        }
    }
}

/// The scheduler of a leaf class as `spec` says.
fn build_leaf<P: Packet + Send + 'static>(
    spec: &ClassSpec,
) -> Result<Box<dyn Scheduler<P>>, SpecError> {
    registry::build::<P>(&spec.algorithm, &spec.params, spec.limit_pkts).map_err(|source| {
        SpecError::Leaf {
            class: spec.name.clone(),
            source,
        }
    })
}

impl<P: Packet + Send + 'static> Leaves<P> for DynLeaves<P> {
    fn add_leaf(&mut self, spec: &ClassSpec) -> Result<u32, SpecError> {
        self.scheds.push(build_leaf(spec)?);
        Ok(self.scheds.len() as u32 - 1)
    }

    fn replace_leaf(&mut self, leaf: u32, spec: &ClassSpec) -> Result<(), SpecError> {
        let new = build_leaf(spec)?;
        let old = std::mem::replace(&mut self.scheds[leaf as usize], new);
        self.retired.add_sched(&old.stats());
        Ok(())
    }

    fn add_flow(&mut self, leaf: u32, params: FlowParams) -> Result<FlowId, FlowError> {
        self.scheds[leaf as usize].add_flow(params)
    }

    fn update_flow(
        &mut self,
        leaf: u32,
        flow: FlowId,
        params: FlowParams,
    ) -> Result<(), FlowError> {
        self.scheds[leaf as usize].update_flow(flow, params)
    }

    fn remove_flow(&mut self, leaf: u32, flow: FlowId) -> Result<Vec<P>, FlowError> {
        self.scheds[leaf as usize].remove_flow(flow)
    }

    fn flow_stats(&self, leaf: u32, flow: FlowId) -> Option<FlowStats> {
        self.scheds[leaf as usize].flow_stats(flow)
    }

    fn flow_params(&self, leaf: u32, flow: FlowId) -> Option<FlowParams> {
        self.scheds[leaf as usize].flow_params(flow)
    }

    fn remove_leaf(&mut self, leaf: u32) {
        let s = &mut self.scheds[leaf as usize];
        for f in s.flows() {
            let left = s.remove_flow(f).unwrap_or_default();
            debug_assert!(left.is_empty(), "a removed leaf is empty");
        }
    }

    #[inline]
    fn enqueue(&mut self, leaf: u32, flow: FlowId, pkt: P) -> Result<bool, Rejected<P>> {
        let s = &mut self.scheds[leaf as usize];
        let was_empty = s.is_empty();
        s.enqueue(flow, pkt)?;
        Ok(was_empty)
    }

    #[inline]
    fn dequeue(&mut self, leaf: u32) -> (FlowId, P) {
        self.scheds[leaf as usize]
            .dequeue()
            .expect("a backlogged leaf has a packet")
    }

    #[inline]
    fn is_empty(&self, leaf: u32) -> bool {
        self.scheds[leaf as usize].is_empty()
    }

    fn stats(&self, leaf: u32) -> SchedStats {
        self.scheds[leaf as usize].stats()
    }

    fn total_stats(&self) -> SchedStats {
        let mut t = self.retired.clone();
        for s in &self.scheds {
            t.add_sched(&s.stats());
        }
        t
    }

    fn backlog(&self) -> Backlog {
        self.scheds.iter().fold(Backlog::default(), |acc, s| {
            let b = s.backlog();
            Backlog {
                pkts: acc.pkts + b.pkts,
                bytes: acc.bytes + b.bytes,
            }
        })
    }
}

/// One policy instance per leaf over one shared flow table.
pub struct SharedLeaves<P, A: Policy> {
    flows: Flows<P, A>,
    algs: Vec<A>,
    /// Packets queued in each leaf, and the most it may hold.
    queued: Vec<u32>,
    limit: Vec<u32>,
    /// The leaf of each flow, by flow index.
    leaf_of: Vec<u32>,
    /// The parameters every leaf's policy was built with.
    params: Params,
}

impl<P: Packet, A: Policy> SharedLeaves<P, A> {
    /// The table index of `flow`, a flow of `leaf`.
    fn flow_of(&self, leaf: u32, flow: FlowId) -> Result<u32, FlowError> {
        let f = self.flows.lookup(flow)?;
        if self.leaf_of.get(f as usize) != Some(&leaf) {
            return Err(FlowError::UnknownFlow(flow));
        }
        Ok(f)
    }

    /// Leaves running `algs[i]`, holding at most `limits[i]` packets each, over a table of
    /// `capacity` packets.
    pub fn new(
        algs: Vec<A>,
        limits: Vec<u32>,
        capacity: u32,
        params: Params,
    ) -> Result<Self, ConfigError> {
        assert_eq!(algs.len(), limits.len());
        if capacity == 0 || capacity > crate::table::MAX_FLOWS {
            return Err(ConfigError::Capacity(capacity as usize));
        }
        let mut algs = algs;
        for (a, &l) in algs.iter_mut().zip(&limits) {
            a.prepare(l);
        }
        Ok(Self {
            flows: FlowTable::with_capacity(capacity),
            queued: vec![0; algs.len()],
            algs,
            limit: limits,
            leaf_of: Vec::new(),
            params,
        })
    }
}

impl<P: Packet, A: Policy> Leaves<P> for SharedLeaves<P, A> {
    fn add_leaf(&mut self, spec: &ClassSpec) -> Result<u32, SpecError> {
        let refuse = || SpecError::SharedLeaf {
            class: spec.name.clone(),
            algorithm: spec.algorithm.clone(),
            shared: A::INFO.name,
        };
        if !A::INFO.answers_to(&spec.algorithm) || spec.params != self.params {
            return Err(refuse());
        }
        let mut alg = A::from_params(&spec.params).map_err(|source| SpecError::Leaf {
            class: spec.name.clone(),
            source,
        })?;
        alg.prepare(spec.limit_pkts);
        self.algs.push(alg);
        self.queued.push(0);
        self.limit.push(spec.limit_pkts);
        Ok(self.algs.len() as u32 - 1)
    }

    fn replace_leaf(&mut self, leaf: u32, spec: &ClassSpec) -> Result<(), SpecError> {
        // Built at the end, then moved into the removed leaf's place.
        let at = self.add_leaf(spec)? as usize;
        let l = leaf as usize;
        self.algs.swap_remove(l);
        self.queued.swap_remove(l);
        self.limit.swap_remove(l);
        debug_assert_eq!(self.algs.len(), at, "the new leaf took the old one's place");
        Ok(())
    }

    fn add_flow(&mut self, leaf: u32, params: FlowParams) -> Result<FlowId, FlowError> {
        params.validate()?;
        let alg = &mut self.algs[leaf as usize];
        alg.check_flow(&params)?;
        let f = self.flows.add(params)?;
        alg.flow_added(&mut self.flows, f);
        if self.leaf_of.len() <= f as usize {
            self.leaf_of.resize(f as usize + 1, u32::MAX);
        }
        self.leaf_of[f as usize] = leaf;
        Ok(self.flows.id(f))
    }

    fn update_flow(
        &mut self,
        leaf: u32,
        flow: FlowId,
        params: FlowParams,
    ) -> Result<(), FlowError> {
        let f = self.flow_of(leaf, flow)?;
        params.validate()?;
        let alg = &mut self.algs[leaf as usize];
        alg.check_flow(&params)?;
        let old = self.flows.params(f);
        self.flows.set_params(f, params);
        alg.flow_updated(&mut self.flows, f, old);
        Ok(())
    }

    fn remove_flow(&mut self, leaf: u32, flow: FlowId) -> Result<Vec<P>, FlowError> {
        let f = self.flow_of(leaf, flow)?;
        self.algs[leaf as usize].flow_removing(&mut self.flows, f);
        let pkts = self.flows.remove(f);
        self.queued[leaf as usize] -= pkts.len() as u32;
        self.leaf_of[f as usize] = u32::MAX;
        Ok(pkts)
    }

    fn remove_leaf(&mut self, leaf: u32) {
        for f in 0..self.leaf_of.len() as u32 {
            if self.leaf_of[f as usize] == leaf {
                let id = self.flows.id(f);
                let left = self.remove_flow(leaf, id).unwrap_or_default();
                debug_assert!(left.is_empty(), "a removed leaf is empty");
            }
        }
    }

    fn flow_params(&self, leaf: u32, flow: FlowId) -> Option<FlowParams> {
        let f = self.flow_of(leaf, flow).ok()?;
        Some(self.flows.params(f))
    }

    fn flow_stats(&self, leaf: u32, flow: FlowId) -> Option<FlowStats> {
        let f = self.flows.lookup(flow).ok()?;
        (self.leaf_of[f as usize] == leaf).then(|| self.flows.stats_of(flow))?
    }

    #[inline(always)]
    fn enqueue(&mut self, leaf: u32, flow: FlowId, pkt: P) -> Result<bool, Rejected<P>> {
        let len = pkt.wire_len();
        let l = leaf as usize;
        match self.flows.admit(flow, len) {
            Ok((f, was_empty)) if self.queued[l] < self.limit[l] => {
                debug_assert_eq!(self.leaf_of[f as usize], leaf, "a flow of another leaf");
                let tag = self.algs[l].enqueued(&mut self.flows, f, len, was_empty);
                self.flows.push(f, pkt, tag);
                self.queued[l] += 1;
                Ok(self.queued[l] == 1)
            }
            Ok((f, _)) => {
                // the leaf's own limit (its scheduler's capacity)
                self.flows.count_drop(Some(f), DropReason::SchedulerFull);
                Err(Rejected {
                    pkt,
                    reason: DropReason::SchedulerFull,
                })
            }
            Err((f, reason)) => {
                self.flows.count_drop(f, reason);
                Err(Rejected { pkt, reason })
            }
        }
    }

    #[inline(always)]
    fn dequeue(&mut self, leaf: u32) -> (FlowId, P) {
        let l = leaf as usize;
        let alg = &mut self.algs[l];
        let f = alg
            .select(&mut self.flows)
            .expect("a backlogged leaf has a packet");
        let d = self.flows.pop(f);
        let len = d.pkt.wire_len();
        alg.dequeued(&mut self.flows, f, len, d.tag, d.more);
        self.queued[l] -= 1;
        (d.id, d.pkt)
    }

    #[inline(always)]
    fn is_empty(&self, leaf: u32) -> bool {
        self.queued[leaf as usize] == 0
    }

    fn stats(&self, leaf: u32) -> SchedStats {
        // the table's counters restricted to the leaf's flows
        let mut s = SchedStats {
            algorithm: self.algs[leaf as usize].counters(),
            ..SchedStats::default()
        };
        for (f, &l) in self.leaf_of.iter().enumerate() {
            if l != leaf {
                continue;
            }
            let id = self.flows.id(f as u32);
            if let Some(fs) = self.flows.stats_of(id) {
                s.add_flow(&fs);
            }
        }
        s
    }

    fn backlog(&self) -> Backlog {
        self.flows.backlog()
    }

    fn total_stats(&self) -> SchedStats {
        self.flows.sched_stats(Vec::new())
    }
}

/// Builds the leaves of a tree whose leaf `i` runs `algs[i] = (name, params)` and holds up
/// to `limits[i]` packets, over `capacity` packets in all: [`SharedLeaves`] when every leaf
/// runs the same policy with the same parameters (handed to `visitor`, monomorphised),
/// else `None`: the caller builds [`DynLeaves`].
pub fn build_shared<V: SharedVisitor<P>, P: Packet + Send + 'static>(
    name: &str,
    params: &Params,
    limits: Vec<u32>,
    capacity: u32,
    visitor: V,
) -> Result<Option<V::Output>, ConfigError> {
    struct Build<V, P> {
        visitor: V,
        limits: Vec<u32>,
        capacity: u32,
        params: Params,
        _p: std::marker::PhantomData<fn() -> P>,
    }
    impl<V: SharedVisitor<P>, P: Packet + Send + 'static> PolicyVisitor for Build<V, P> {
        type Output = Result<V::Output, ConfigError>;
        fn visit<A: Policy + Send>(self, policy: A) -> Self::Output {
            let mut algs = Vec::with_capacity(self.limits.len());
            algs.push(policy);
            for _ in 1..self.limits.len() {
                algs.push(A::from_params(&self.params)?);
            }
            Ok(self.visitor.visit(SharedLeaves::<P, A>::new(
                algs,
                self.limits,
                self.capacity,
                self.params,
            )?))
        }
    }
    let b = Build {
        visitor,
        limits,
        capacity,
        params: params.clone(),
        _p: std::marker::PhantomData,
    };
    registry::visit_policy(name, params, b)?.transpose()
}

/// Code run with the concrete [`SharedLeaves`] type (see [`build_shared`]).
pub trait SharedVisitor<P> {
    /// What the visit returns.
    type Output;
    /// Called with the leaves.
    fn visit<A: Policy + Send>(self, leaves: SharedLeaves<P, A>) -> Self::Output;
}
