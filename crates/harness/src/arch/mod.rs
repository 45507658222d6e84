//! The architecture benchmark (`pspat bench arch`): the PSPAT architecture against the
//! lock-based one (issue 6; PSPAT paper sections 6.4-6.6), in one run, on the same
//! scheduler code.
//!
//! [`throughput()`]: for each client count, greedy client threads (each its own flow,
//! weight 1, or with `ThroughputSpec::flows` each a share of that many flows, sent on in
//! turn) submit as fast as they can (on a full mailbox they yield, or in the client
//! hand-off mode wait for their cleared packets: `pspat_engine::traffic::greedy`), and an
//! optional "victim" client sends one packet every gap (`pspat_engine::traffic::periodic`)
//! with a weight 100 times the others, its submit-to-transmit latency recorded. Per point:
//! the decisions per second (packets released by the scheduler), the spread of the greedy
//! clients' shares normalised by weight (min/max), the victim's latency percentiles, and
//! drops. Before each client count it measures the limit ([`crate::limit`]): the same
//! algorithm's single-thread enqueue+dequeue rate with the same flows and packets, no
//! engine; once with 64 packets in the scheduler and once ("backlogged") with every greedy
//! flow holding its share of a mailbox's capacity (all of it with one flow per client),
//! as in the engine.
//!
//! [`stability()`] (section 6.5): two greedy clients, weights 10:1, on links from 0.5x to 2x
//! the rate the PSPAT engine sustains: the share of each architecture at each rate.
//!
//! [`floor()`]: what the machine alone does to a thread spinning where the arbiter goes;
//! throughput mode reports the same figures for the arbiter itself ([`ArbiterStalls`]).
//!
//! | file | concept |
//! |---|---|
//! | `spec.rs` | what a run is asked to do, and its validation |
//! | `report.rs` | what it measured (serialised as `pspat bench arch --json` prints it) |
//! | `point.rs` | one measurement: an engine of either architecture, its clients, two snapshots |
//! | `throughput.rs`, `stability.rs`, `floor.rs` | the three modes |
//! | `plot.rs` | throughput and victim latency against clients, as SVG |
//! | `error.rs` | what can go wrong, and which of it is the caller's to fix |

mod error;
mod floor;
mod plot;
mod point;
mod report;
mod spec;
mod stability;
mod throughput;

use serde::Serialize;

pub use error::{ArchError, Setting};
pub use floor::floor;
pub use report::{
    ArbiterStalls, ClientShare, FloorPoint, FloorReport, Latency, Point, Ratio, StabilityReport,
    StabilityResult, StabilityRow, ThroughputReport,
};
pub use spec::{FloorSpec, Knobs, Setup, StabilitySpec, ThroughputSpec, MAX_FLOWS};
pub use stability::stability;
pub use throughput::throughput;

/// Weight of each greedy client's flow.
pub const GREEDY_WEIGHT: u32 = 1;
/// The victim's weight, relative to a greedy client's (the paper uses 50).
pub const VICTIM_WEIGHT: u32 = 100;
/// Stability mode: link rates as multiples of the sustained rate.
pub const STABILITY_STEPS: [f64; 6] = [0.5, 0.75, 1.0, 1.25, 1.5, 2.0];

/// The architecture under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Clients, mailboxes and one arbiter thread.
    Pspat,
    /// One lock around the scheduler (Linux TC's architecture).
    Lock,
}

impl Arch {
    /// Its name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Pspat => "pspat",
            Arch::Lock => "lock",
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a run is about to measure (for progress lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// A throughput point: this many greedy clients on this architecture.
    Point {
        /// Greedy clients.
        clients: usize,
        /// Architecture.
        arch: Arch,
    },
    /// Stability mode's first run: the rate the PSPAT engine sustains on an unlimited link.
    Sustained,
    /// A stability point: this link rate on this architecture.
    Rate {
        /// Link rate, bit/s.
        rate_bps: u64,
        /// Architecture.
        arch: Arch,
    },
}
