//! pspat-expkit: the shaper experiment kit's traffic tools (`experiments/shaper/run.sh`) as
//! a library: a UDP generator of M senders and a victim, a UDP sink that measures what
//! arrives, and the analysis of their reports (shares against their fair targets, CPU per
//! packet, the results CSV, the figures; for the `tree` set, trees of classes against HTB
//! and the reference allocation). `pspat udpgen`, `pspat udpsink` and
//! `pspat experiment row|plot|summary|tree` are this crate behind a command line.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use pspat_expkit::{GenConfig, Generator, Sink, SinkConfig};
//!
//! let mut sc = SinkConfig::new("127.0.0.1:0".parse()?, Duration::from_secs(5));
//! sc.idle = Duration::from_millis(300);
//! let sink = Sink::bind(sc)?;
//! let mut gc = GenConfig::new(sink.local_addr(), Duration::from_millis(200));
//! gc.senders = 2;
//! gc.rate_pps = 1000.0;
//! let gen = std::thread::spawn(move || Generator::open(gc)?.run());
//! let got = sink.run()?;
//! let sent = gen.join().unwrap()?;
//! assert_eq!(got.total_packets, sent.total_packets);
//! # Ok(())
//! # }
//! ```
//!
//! The datagrams are pspat payloads ([`pspat_io::payload`]): client, flow, sequence
//! number, length on the wire and the send time on CLOCK_MONOTONIC, so the sink computes
//! per-client loss, reordering and one-way latency. The reports serialise as the JSON the
//! kit's script keeps and [`Row::new`] reads back.
//!
//! | file | concept |
//! |---|---|
//! | `gen.rs` | [`GenConfig`], its checks and plan ([`SenderPlan`]); [`Generator`]: open, run |
//! | `sender.rs` | one sender thread: pacing, sendmmsg batches, counting |
//! | `gen_report.rs` | [`GenReport`], [`SenderReport`] |
//! | `sink.rs` | [`SinkConfig`]; [`Sink`]: bind, the receive loop, the window |
//! | `client.rs` | the sink's per-client account: sequence gaps, reordering, latency histogram |
//! | `sink_report.rs` | [`SinkReport`], [`ClientReport`], [`Latency`] |
//! | `limits.rs` | what each option accepts (durations, rates, lengths, senders) |
//! | `shares.rs` | [`Share`]s against max-min fair targets, [`Fairness`] (error, Jain's index) |
//! | `cpu.rs` | [`CpuSample`]s (/proc/stat, the shaper's /proc/PID/stat), [`CpuUse`] per packet |
//! | `row.rs` | [`Row`]: one run's figures from the two reports (and the CPU samples, a baseline) |
//! | `csv.rs` | the results and shares CSVs: line format, appending, the parser |
//! | `figures.rs` | the four figures per set, drawn by `pspat-plot` |
//! | `tree.rs` | [`KitTree`]: the `tree` set's tree from a pspat configuration, as HTB, and its reference allocation |
//! | `meter.rs` | each class's throughput, one-second windows and bursts from a sink's trace |
//! | `tree_compare.rs` | [`TreeRun`]s of one tree side by side: CSV, table, verdicts, figure |
//! | `json.rs` | reading a report back |
//! | `error.rs` | [`GenError`], [`SinkError`], [`AnalysisError`] and their parts |
//!
//! Durations, rates and sizes arrive as values (`Duration`, packets/s, bytes): the text is
//! `pspat-units`' to parse. The range checks are here ([`limits`]), with messages that name
//! the option as the command line spells it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
pub mod cpu;
pub mod csv;
pub mod error;
pub mod figures;
#[cfg(test)]
mod fixtures;
pub mod gen;
mod gen_report;
mod json;
pub mod limits;
pub mod meter;
pub mod row;
mod sender;
pub mod shares;
pub mod sink;
mod sink_report;
pub mod tree;
pub mod tree_compare;

pub use cpu::{CpuPerPacket, CpuSample, CpuUse};
pub use error::{
    AnalysisError, CpuSampleError, CsvError, GenError, Invalid, MeterError, SinkError, TreeSetError,
};
pub use gen::{GenConfig, Generator, SenderPlan};
pub use gen_report::{GenReport, SenderReport};
pub use row::{AddedLatency, Row, RowSpec, VictimFigures};
pub use shares::{Fairness, Share};
pub use sink::{Sink, SinkConfig};
pub use sink_report::{Arrival, ClientReport, Latency, SinkReport};
pub use tree::{KitClass, KitTree};
pub use tree_compare::TreeRun;
