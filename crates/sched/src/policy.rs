//! The plug-in interface of a scheduling algorithm, and the glue that makes any plug-in a
//! full [`Scheduler`].
//!
//! This is dummynet's `struct dn_alg`, typed: the framework ([`FlowTable`]) keeps flows,
//! queues, limits and counters; a [`Policy`] keeps only what orders the service (lists,
//! heaps, virtual times) and per-flow state of its own type. An algorithm is one file with
//! one `impl Policy` and one line in [`crate::registry`].
//!
//! # Call protocol
//!
//! - [`Policy::enqueued`] runs for every accepted packet, *before* the packet is appended;
//!   it is told whether the flow was empty.
//! - [`Policy::select`] names the flow whose head packet leaves next. It may reorganise the
//!   policy's structures but must be idempotent: called again before a dequeue, it returns
//!   the same flow (this is what makes `peek_len` non-destructive).
//! - [`Policy::dequeued`] runs after the head packet of the selected flow was removed; it
//!   is told whether the flow still has packets (`flows.head_len(f)` is then the next
//!   packet's length).
//!
//! The hooks receive what the table already knows (was the flow empty, is it now) so that
//! a policy touches a flow's entry as few times as possible.
//! - [`Policy::flow_removing`] runs before a flow's packets are purged; the policy must
//!   forget the flow (unlink it from lists, heaps).

use crate::error::{ConfigError, FlowError, ParamError, Rejected};
use crate::flow::{FlowId, FlowParams};
use crate::packet::Packet;
use crate::registry::{AlgorithmInfo, Params};
use crate::scheduler::Scheduler;
use crate::table::FlowTable;

/// The flow table as a policy sees it.
pub type Flows<P, A> = FlowTable<P, <A as Policy>::FlowState, <A as Policy>::Tag>;

/// A scheduling algorithm: the order in which backlogged flows are served.
pub trait Policy: Sized + 'static {
    /// Per-flow state of the algorithm, kept next to the flow's queue.
    type FlowState: Default;
    /// Per-packet metadata stored with each queued packet (`()` for most algorithms).
    type Tag: Copy + Default;

    /// Name, complexity, source and parameters of the algorithm.
    const INFO: AlgorithmInfo;

    /// Builds the policy from named parameters (validated against [`AlgorithmInfo::params`]
    /// by the registry before this is called).
    fn from_params(params: &Params) -> Result<Self, ConfigError>;

    /// Called once when the scheduler is built, with its packet capacity: allocate here
    /// whatever the data path needs, so that it never allocates.
    fn prepare(&mut self, _capacity: u32) {}

    /// Rejects flow parameters the algorithm cannot honour (beyond the generic ranges).
    fn check_flow(&self, _params: &FlowParams) -> Result<(), ParamError> {
        Ok(())
    }

    /// A flow was created.
    fn flow_added<P: Packet>(&mut self, _flows: &mut Flows<P, Self>, _f: u32) {}

    /// A flow's parameters changed (`flows.params(f)` holds the new ones).
    fn flow_updated<P: Packet>(&mut self, _flows: &mut Flows<P, Self>, _f: u32, _old: FlowParams) {}

    /// A flow is about to be removed, possibly with queued packets.
    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32);

    /// A packet of `len` bytes was accepted for flow `f` (empty until now if `was_empty`)
    /// and is about to be appended. Returns the tag stored with it.
    fn enqueued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        was_empty: bool,
    ) -> Self::Tag;

    /// The flow whose head packet leaves next, or `None` if no flow is backlogged.
    fn select<P: Packet>(&mut self, flows: &mut Flows<P, Self>) -> Option<u32>;

    /// The head packet of `f` (`len` bytes, tagged `tag`) was removed; `more` tells whether
    /// the flow still has packets.
    fn dequeued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        tag: Self::Tag,
        more: bool,
    );

    /// Algorithm-specific counters for [`SchedStats::algorithm`].
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// A complete scheduler: a policy `A` over a flow table of packets `P`.
pub struct Sched<A: Policy, P> {
    flows: Flows<P, A>,
    alg: A,
}

impl<A: Policy, P: Packet> Sched<A, P> {
    /// A scheduler with room for `capacity` queued packets (`1..=2^31`), allocated now.
    pub fn new(alg: A, capacity: u32) -> Result<Self, ConfigError> {
        if capacity == 0 || capacity > crate::table::MAX_FLOWS {
            return Err(ConfigError::Capacity(capacity as usize));
        }
        let mut alg = alg;
        alg.prepare(capacity);
        Ok(Self {
            flows: FlowTable::with_capacity(capacity),
            alg,
        })
    }

    /// A scheduler with the policy's default parameters.
    pub fn with_defaults(capacity: u32) -> Result<Self, ConfigError> {
        Self::new(A::from_params(&Params::default())?, capacity)
    }

    /// The policy.
    pub fn policy(&self) -> &A {
        &self.alg
    }

    /// The flow table and the policy, for the policies' unit tests.
    #[cfg(test)]
    pub(crate) fn parts_mut(&mut self) -> (&mut Flows<P, A>, &mut A) {
        (&mut self.flows, &mut self.alg)
    }

    /// The flow table (tests and diagnostics: the per-flow state of the policy).
    pub fn flow_table(&self) -> &Flows<P, A> {
        &self.flows
    }

    /// Packets the scheduler holds at most.
    pub fn capacity(&self) -> u32 {
        self.flows.capacity()
    }

    fn check(&self, params: &FlowParams) -> Result<(), FlowError> {
        params.validate()?;
        self.alg.check_flow(params)?;
        Ok(())
    }
}

impl<A: Policy, P: Packet> Scheduler<P> for Sched<A, P> {
    fn info(&self) -> &'static AlgorithmInfo {
        &A::INFO
    }

    fn add_flow(&mut self, params: FlowParams) -> Result<FlowId, FlowError> {
        self.check(&params)?;
        let f = self.flows.add(params)?;
        self.alg.flow_added(&mut self.flows, f);
        Ok(self.flows.id(f))
    }

    fn update_flow(&mut self, flow: FlowId, params: FlowParams) -> Result<(), FlowError> {
        let f = self.flows.lookup(flow)?;
        self.check(&params)?;
        let old = self.flows.params(f);
        self.flows.set_params(f, params);
        self.alg.flow_updated(&mut self.flows, f, old);
        Ok(())
    }

    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<P>, FlowError> {
        let f = self.flows.lookup(flow)?;
        self.alg.flow_removing(&mut self.flows, f);
        Ok(self.flows.remove(f))
    }

    #[inline(always)]
    fn enqueue(&mut self, flow: FlowId, pkt: P) -> Result<(), Rejected<P>> {
        let len = pkt.wire_len();
        match self.flows.admit(flow, len) {
            Ok((f, was_empty)) => {
                let tag = self.alg.enqueued(&mut self.flows, f, len, was_empty);
                self.flows.push(f, pkt, tag);
                Ok(())
            }
            Err((f, reason)) => {
                // `count_drop` is cold: the fast path is the admitted packet.
                self.flows.count_drop(f, reason);
                Err(Rejected { pkt, reason })
            }
        }
    }

    #[inline(always)]
    fn dequeue(&mut self) -> Option<(FlowId, P)> {
        let f = self.alg.select(&mut self.flows)?;
        let d = self.flows.pop(f);
        let len = d.pkt.wire_len();
        self.alg.dequeued(&mut self.flows, f, len, d.tag, d.more);
        Some((d.id, d.pkt))
    }

    #[inline(always)]
    fn peek_len(&mut self) -> Option<u32> {
        let f = self.alg.select(&mut self.flows)?;
        self.flows.head_len(f)
    }

    crate::table::table_queries!(flows, |s| s.alg.counters());
}
