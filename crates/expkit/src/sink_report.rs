//! What the sink reports: per client, and in all. The serde format is what
//! `pspat udpsink --json` writes and the kit's script and `pspat experiment row` read.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::AnalysisError;

/// Latency percentiles of one client, ns.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
    /// Mean.
    pub mean_ns: f64,
}

/// What one client's datagrams looked like in the window.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ClientReport {
    /// The payload's client number.
    pub client: u32,
    /// Datagrams counted.
    pub packets: u64,
    /// Sum of their `wire_len`.
    pub wire_bytes: u64,
    /// `packets` over the window.
    pub pps: f64,
    /// Sequence numbers skipped and never seen later.
    pub lost: u64,
    /// Datagrams that arrived after a later sequence number.
    pub reordered: u64,
    /// One-way latency (receive time - submit_ns).
    pub latency: Latency,
    /// Datagrams stamped later than they were received (clocks not comparable: a time
    /// namespace?); recorded with latency 0.
    pub clock_skew: u64,
}

/// The whole report of a sink run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SinkReport {
    /// The address received on.
    pub bind: String,
    /// Whether the receiver spun.
    pub busy_poll: bool,
    /// Warm-up asked for, seconds.
    pub warmup_s: f64,
    /// Counting window asked for, seconds (0: to the end).
    pub measure_s: f64,
    /// From the end of the warm-up to the last datagram counted, seconds.
    pub window_s: f64,
    /// Datagrams received, warm-up included, garbled included.
    pub received_total: u64,
    /// Datagrams received during the warm-up.
    pub warmup_packets: u64,
    /// Datagrams that were not pspat payloads.
    pub garbled: u64,
    /// Datagrams from clients above [`crate::sink::MAX_CLIENTS`].
    pub other_packets: u64,
    /// Receive buffer granted by the kernel, bytes.
    pub recv_buffer: usize,
    /// Per client that sent anything in the window, by client number.
    pub clients: Vec<ClientReport>,
    /// Datagrams counted in the window, all clients.
    pub total_packets: u64,
    /// `total_packets` over the window.
    pub total_pps: f64,
    /// Every datagram counted, in order of receipt, when the sink was asked for a trace
    /// (`--trace`); empty otherwise (and absent from the JSON).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<Arrival>,
}

/// One datagram counted, in a sink's trace.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Arrival {
    /// When it arrived, ns from the start of the counting window: the kernel's receive
    /// stamp (or, without one, when its receive call returned; a batch shares that);
    /// 0 for one stamped before the window started.
    pub t_ns: u64,
    /// Its client.
    pub client: u32,
    /// Its length on the wire, bytes.
    pub len: u32,
}

impl SinkReport {
    /// Reads a report written as JSON.
    pub fn read(path: &Path) -> Result<Self, AnalysisError> {
        crate::json::read(path)
    }

    /// The report of client `client`, if it sent anything in the window.
    pub fn client(&self, client: u32) -> Option<&ClientReport> {
        self.clients.iter().find(|c| c.client == client)
    }
}

/// `n` per `s` seconds; 0 for no time.
pub(crate) fn rate(n: u64, s: f64) -> f64 {
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}
