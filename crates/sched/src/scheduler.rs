//! The interface every scheduler offers to its users (the arbiter, the simulator, the
//! harness).

use crate::error::{FlowError, Rejected};
use crate::flow::{FlowId, FlowParams};
use crate::registry::AlgorithmInfo;
use crate::stats::{Backlog, FlowStats, SchedStats};

/// A packet scheduler: per-flow FIFO queues and a policy that picks which flow's head
/// packet leaves next.
///
/// `P` is the packet handle ([`crate::Packet`] for the schedulers of this crate). No method
/// allocates per packet; flow operations may allocate.
pub trait Scheduler<P> {
    /// Which algorithm this is.
    fn info(&self) -> &'static AlgorithmInfo;

    /// Creates a flow.
    fn add_flow(&mut self, params: FlowParams) -> Result<FlowId, FlowError>;

    /// Changes a flow's parameters. Queued packets stay queued; a new weight applies from
    /// the flow's next scheduling decision, new limits to new arrivals.
    fn update_flow(&mut self, flow: FlowId, params: FlowParams) -> Result<(), FlowError>;

    /// Removes a flow and hands back its queued packets, oldest first; they are counted as
    /// drops with reason [`crate::DropReason::FlowRemoved`].
    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<P>, FlowError>;

    /// Queues `pkt` on `flow`, or hands it back with the reason it was dropped.
    fn enqueue(&mut self, flow: FlowId, pkt: P) -> Result<(), Rejected<P>>;

    /// The next packet to transmit and its flow, or `None` when nothing is queued.
    fn dequeue(&mut self) -> Option<(FlowId, P)>;

    /// Length of the packet the next [`Scheduler::dequeue`] will return, without removing
    /// it. Calling it any number of times does not change what is dequeued next.
    fn peek_len(&mut self) -> Option<u32>;

    /// Packets and bytes queued. May cost O(flows) (the schedulers of this crate sum the
    /// flows' byte backlogs); [`Scheduler::is_empty`] is O(1).
    fn backlog(&self) -> Backlog;

    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.backlog().pkts == 0
    }

    /// Parameters of a flow.
    fn flow_params(&self, flow: FlowId) -> Option<FlowParams>;

    /// Counters of a flow.
    fn flow_stats(&self, flow: FlowId) -> Option<FlowStats>;

    /// All flows, by index.
    fn flows(&self) -> Vec<FlowId>;

    /// Counters of the scheduler.
    fn stats(&self) -> SchedStats;
}

impl<P, S: Scheduler<P> + ?Sized> Scheduler<P> for Box<S> {
    fn info(&self) -> &'static AlgorithmInfo {
        (**self).info()
    }
    fn add_flow(&mut self, params: FlowParams) -> Result<FlowId, FlowError> {
        (**self).add_flow(params)
    }
    fn update_flow(&mut self, flow: FlowId, params: FlowParams) -> Result<(), FlowError> {
        (**self).update_flow(flow, params)
    }
    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<P>, FlowError> {
        (**self).remove_flow(flow)
    }
    fn enqueue(&mut self, flow: FlowId, pkt: P) -> Result<(), Rejected<P>> {
        (**self).enqueue(flow, pkt)
    }
    fn dequeue(&mut self) -> Option<(FlowId, P)> {
        (**self).dequeue()
    }
    fn peek_len(&mut self) -> Option<u32> {
        (**self).peek_len()
    }
    fn backlog(&self) -> Backlog {
        (**self).backlog()
    }
    fn is_empty(&self) -> bool {
        (**self).is_empty()
    }
    fn flow_params(&self, flow: FlowId) -> Option<FlowParams> {
        (**self).flow_params(flow)
    }
    fn flow_stats(&self, flow: FlowId) -> Option<FlowStats> {
        (**self).flow_stats(flow)
    }
    fn flows(&self) -> Vec<FlowId> {
        (**self).flows()
    }
    fn stats(&self) -> SchedStats {
        (**self).stats()
    }
}
