//! What an instance schedules its queues with: one algorithm of the registry over all of
//! them, or a tree of classes (`pspat_sched::tree`) whose leaves hold them.
//!
//! A tree takes the time at each operation and may hold packets back when every class
//! that has some is over its ceil: its dequeue then says when to ask again
//! ([`Next::Wait`]), and the instance waits in the ready heap until then. It follows its
//! configuration as it changes ([`LiveTree`]): queues name their leaf by its index in the
//! configuration in force, which the tree maps to its own.

use pspat_io::Pkt;
use pspat_sched::registry;
use pspat_sched::tree::{Dequeued, Edit, LiveTree, SpecError, TreeFlow, TreeSpec};
use pspat_sched::{
    Backlog, ConfigError, FlowError, FlowId, FlowParams, FlowStats, Rejected, SchedStats, Scheduler,
};

/// An instance's scheduler.
pub(crate) enum InstSched {
    /// One algorithm over every queue.
    Flat(Box<dyn Scheduler<Pkt>>),
    /// A tree of classes; queues are flows of its leaves.
    Tree(Box<LiveTree<Pkt>>),
}

/// A queue of an instance: a flow of its scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QFlow {
    Flat(FlowId),
    Tree(TreeFlow),
}

/// What a dequeue found.
pub(crate) enum Next {
    Pkt(Pkt),
    /// Packets are held by their classes' ceils until then (ns).
    Wait(u64),
    Idle,
}

impl InstSched {
    /// The scheduler of an instance of `algorithm` (`params`), or of `tree` when there is
    /// one, holding up to `capacity` packets.
    pub(crate) fn build(
        algorithm: &str,
        params: &registry::Params,
        tree: Option<&TreeSpec>,
        capacity: u32,
    ) -> Result<Self, String> {
        match tree {
            Some(t) => LiveTree::new(t)
                .map(|t| InstSched::Tree(Box::new(t)))
                .map_err(|e| e.to_string()),
            None => registry::build::<Pkt>(algorithm, params, capacity)
                .map(InstSched::Flat)
                .map_err(|e: ConfigError| e.to_string()),
        }
    }

    /// Whether it schedules a tree.
    pub(crate) fn is_tree(&self) -> bool {
        matches!(self, InstSched::Tree(_))
    }

    /// A queue: a flow, in leaf class `leaf` for a tree.
    pub(crate) fn add_flow(
        &mut self,
        leaf: Option<u32>,
        params: FlowParams,
    ) -> Result<QFlow, String> {
        match (self, leaf) {
            (InstSched::Flat(s), _) => s
                .add_flow(params)
                .map(QFlow::Flat)
                .map_err(|e| e.to_string()),
            (InstSched::Tree(t), Some(l)) => {
                let class = t.index(l as usize).ok_or("no such leaf class")?;
                t.sched_mut()
                    .add_flow(class, params)
                    .map(QFlow::Tree)
                    .map_err(|e| e.to_string())
            }
            (InstSched::Tree(_), None) => Err("a queue of a tree needs a leaf class".into()),
        }
    }

    #[inline]
    pub(crate) fn enqueue(&mut self, now: u64, f: QFlow, p: Pkt) -> Result<(), Rejected<Pkt>> {
        match (self, f) {
            (InstSched::Flat(s), QFlow::Flat(f)) => s.enqueue(f, p),
            (InstSched::Tree(t), QFlow::Tree(f)) => t.sched_mut().enqueue(now, f, p),
            _ => unreachable!("a queue of another kind of scheduler"),
        }
    }

    #[inline]
    pub(crate) fn dequeue(&mut self, now: u64) -> Next {
        match self {
            InstSched::Flat(s) => s.dequeue().map_or(Next::Idle, |(_, p)| Next::Pkt(p)),
            InstSched::Tree(t) => match t.sched_mut().dequeue(now) {
                Dequeued::Packet { pkt, .. } => Next::Pkt(pkt),
                Dequeued::Wait(at) => Next::Wait(at),
                Dequeued::Idle => Next::Idle,
            },
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            InstSched::Flat(s) => s.is_empty(),
            InstSched::Tree(t) => t.sched().is_empty(),
        }
    }

    pub(crate) fn update_flow(&mut self, f: QFlow, params: FlowParams) -> Result<(), FlowError> {
        match (self, f) {
            (InstSched::Flat(s), QFlow::Flat(f)) => s.update_flow(f, params),
            (InstSched::Tree(t), QFlow::Tree(f)) => t.sched_mut().update_flow(f, params),
            _ => unreachable!("a queue of another kind of scheduler"),
        }
    }

    pub(crate) fn remove_flow(&mut self, f: QFlow) -> Result<Vec<Pkt>, FlowError> {
        match (self, f) {
            (InstSched::Flat(s), QFlow::Flat(f)) => s.remove_flow(f),
            (InstSched::Tree(t), QFlow::Tree(f)) => t.sched_mut().remove_flow(f),
            _ => unreachable!("a queue of another kind of scheduler"),
        }
    }

    pub(crate) fn flow_stats(&self, f: QFlow) -> Option<FlowStats> {
        match (self, f) {
            (InstSched::Flat(s), QFlow::Flat(f)) => s.flow_stats(f),
            (InstSched::Tree(t), QFlow::Tree(f)) => t.sched().flow_stats(f),
            _ => None,
        }
    }

    pub(crate) fn flow_params(&self, f: QFlow) -> Option<FlowParams> {
        match (self, f) {
            (InstSched::Flat(s), QFlow::Flat(f)) => s.flow_params(f),
            (InstSched::Tree(t), QFlow::Tree(f)) => t.sched().flow_params(f),
            _ => None,
        }
    }

    pub(crate) fn stats(&self) -> SchedStats {
        match self {
            InstSched::Flat(s) => s.stats(),
            InstSched::Tree(t) => t.sched().stats(),
        }
    }

    pub(crate) fn backlog(&self) -> Backlog {
        match self {
            InstSched::Flat(s) => s.backlog(),
            InstSched::Tree(t) => t.sched().backlog(),
        }
    }

    /// Its tree follows the configuration from `old` to `new` (`edits`, their
    /// [`pspat_sched::tree::diff`]), at `now`; a flat scheduler has nothing to do.
    pub(crate) fn reshape(
        &mut self,
        now: u64,
        old: &TreeSpec,
        new: &TreeSpec,
        edits: &[Edit],
    ) -> Result<(), SpecError> {
        match self {
            InstSched::Flat(_) => Ok(()),
            InstSched::Tree(t) => t.reshape(now, old, new, edits),
        }
    }

    /// Removes the classes that were removed from the configuration and have drained.
    pub(crate) fn drain_classes(&mut self) {
        if let InstSched::Tree(t) = self {
            t.drain();
        }
    }

    /// The tree, if it schedules one (for its statistics).
    pub(crate) fn tree(&self) -> Option<&LiveTree<Pkt>> {
        match self {
            InstSched::Flat(_) => None,
            InstSched::Tree(t) => Some(t),
        }
    }
}
