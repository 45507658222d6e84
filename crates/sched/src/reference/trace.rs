//! Arrival sequences and transmission traces: the data the reference models consume.
//!
//! Times are nanoseconds. Arrivals use integers (they are inputs); computed times are `f64`
//! (a packet of `l` bytes at `R` bit/s takes `8 l / R` seconds, rarely a whole number of
//! nanoseconds).

/// A packet arriving at a scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Arrival time, ns.
    pub time_ns: u64,
    /// Index of the flow in the run's list of flows.
    pub flow: usize,
    /// Length, bytes.
    pub len: u32,
}

/// One packet transmitted on the link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TxRecord {
    /// Index of the packet in the arrival sequence.
    pub seq: usize,
    /// Index of its flow.
    pub flow: usize,
    /// Length, bytes.
    pub len: u32,
    /// Arrival time, ns.
    pub arrival_ns: f64,
    /// Time the scheduler handed it out (to the transmit queue, or to the wire when there
    /// is none), ns.
    pub dequeue_ns: f64,
    /// Time the link started transmitting it, ns.
    pub start_ns: f64,
    /// Time its last bit left, ns.
    pub finish_ns: f64,
}

/// A packet the scheduler refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropRecord {
    /// Index of the packet in the arrival sequence.
    pub seq: usize,
    /// Index of its flow.
    pub flow: usize,
    /// Why.
    pub reason: crate::stats::DropReason,
}

/// What happened to every packet of a run on a constant-rate link.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Link rate, bit/s.
    pub rate_bps: f64,
    /// Transmitted packets, in transmission order (start times increase).
    pub tx: Vec<TxRecord>,
    /// Refused packets, in arrival order.
    pub drops: Vec<DropRecord>,
}
