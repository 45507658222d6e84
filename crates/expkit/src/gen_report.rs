//! What the generator reports: per sender, and in all. The serde format is what
//! `pspat udpgen --json` writes and the kit's script and `pspat experiment row` read.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::AnalysisError;

/// What one sender did.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SenderReport {
    /// The payload's client (and flow) number: the sender's index, M for the victim.
    pub client: u32,
    /// `true` for the victim.
    pub victim: bool,
    /// Source port its socket was bound to.
    pub src_port: u16,
    /// Wire length of its packets.
    pub len: u32,
    /// Paced rate asked for, packets/s (0: as fast as possible).
    pub rate_pps: f64,
    /// Datagrams the kernel accepted.
    pub packets: u64,
    /// `packets * len`.
    pub wire_bytes: u64,
    /// `packets` per second of its sending time.
    pub pps: f64,
    /// Send calls that failed (their packets are not counted as sent).
    pub send_errors: u64,
    /// The last error, if any.
    pub last_error: Option<String>,
    /// Seconds it sent for.
    pub elapsed_s: f64,
}

/// The whole report of a generator run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GenReport {
    /// Destination.
    pub dest: String,
    /// Greedy senders (M).
    pub senders: u32,
    /// One entry per greedy sender, in order, then the victim's if any.
    pub flows: Vec<SenderReport>,
    /// Datagrams sent by all of them.
    pub total_packets: u64,
    /// `total_packets` over the longest sender's time.
    pub total_pps: f64,
}

impl GenReport {
    /// The report of `flows` sent to `dest` by `senders` greedy senders (and the victim).
    pub(crate) fn new(dest: String, senders: u32, flows: Vec<SenderReport>) -> Self {
        let total_packets = flows.iter().map(|f| f.packets).sum();
        let longest = flows.iter().map(|f| f.elapsed_s).fold(0.0, f64::max);
        GenReport {
            dest,
            senders,
            total_pps: if longest > 0.0 {
                total_packets as f64 / longest
            } else {
                0.0
            },
            total_packets,
            flows,
        }
    }

    /// Reads a report written as JSON.
    pub fn read(path: &Path) -> Result<Self, AnalysisError> {
        crate::json::read(path)
    }

    /// The victim's entry, if there was one.
    pub fn victim(&self) -> Option<&SenderReport> {
        self.flows.iter().find(|f| f.victim)
    }
}
