//! # pspat-harness
//!
//! pspat's benchmarks: the scheduler loops (`pspat bench sched`, `wfi`, `table`) and the
//! architecture benchmark (`pspat bench arch`, [`arch`]).
//!
//! The scheduler benchmark is compatible with FreeBSD dummynet's userspace `test` program
//! (`sys/netpfil/ipfw/test/main.c`), so that pspat's schedulers and dummynet's C ones can
//! be run side by side on the same flowsets, doing the same work per packet.
//!
//! A run loops `loops` times; each iteration enqueues one generated packet or dequeues one,
//! as a [`controller`] with hysteresis on the number of pending packets decides (fill up to
//! `qmax`, drain down to `qmin`). Packets are generated for the least-backlogged flow, one
//! at a time (*smooth*) or in bursts (*bursty*), see [`pattern`]; they are buffers from a
//! preallocated [`pool`], like dummynet's mbuf freelist. On dequeue the harness checks that
//! the packet came back on its flow and in its flow's order, and accounts the worst-case
//! fairness index ([`wfi`]). The figure of merit is wall-clock time per enqueue+dequeue
//! pair, packet generation included, as dummynet prints it.
//!
//! ```
//! use pspat_harness::{run, BenchSpec, Num};
//!
//! let report = run::run(&BenchSpec {
//!     alg: "wf2q+".into(),
//!     loops: 10_000,
//!     qmin: Num::PerFlow(4),
//!     qmax: Num::PerFlow(30),
//!     flowsets: Some("1::16,4::4".into()),
//!     ..BenchSpec::default()
//! })?;
//! report.check()?; // no packet lost, misrouted or reordered
//! println!("{}", report.summary());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Schedulers are built by name through [`pspat_sched::registry::visit`], so every
//! registered algorithm is available, each with its own monomorphised loop; `none` runs the
//! loop over the harness's own FIFO: the overhead of the harness itself.
//!
//! ## Layout
//!
//! - [`number`]: dummynet's number syntax (`10M`, `4k`, `30n`);
//! - [`flowset`]: `weight:len:flows` specifications and their expansion;
//! - [`scenario`]: the options as given and resolved;
//! - [`controller`]: the fill/drain hysteresis;
//! - [`pattern`]: smooth and bursty flow selection (with [`rng`]);
//! - [`pool`]: packet buffers and the handle the schedulers queue;
//! - [`wfi`]: the worst-case fairness index;
//! - [`target`]: a registered scheduler or the `none` baseline;
//! - [`run`]: the loop; [`report`]: its results;
//! - [`slots`]: tables the loop indexes without bounds checks (and without `unsafe`);
//! - [`every`]: `pspat bench table`, every registered algorithm through the loop on one
//!   flowset;
//! - [`guarantee`]: `pspat bench wfi`, service guarantees (T-WFI, B-WFI) of a flowset on the
//!   exact virtual link against GPS, with timed fill/drain arrivals;
//! - [`limit`]: an algorithm's single-thread enqueue+dequeue rate (the ceiling `bench arch`
//!   compares with);
//! - [`arch`]: `pspat bench arch`, the PSPAT architecture against the lock-based one on the
//!   engine (`pspat-engine`), in throughput, stability and floor modes.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arch;
pub mod controller;
pub mod error;
pub mod every;
pub mod flowset;
pub mod guarantee;
pub mod limit;
pub mod number;
pub mod pattern;
pub mod pool;
pub mod report;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod slots;
pub mod target;
pub mod tree;
pub mod wfi;

pub use error::{Error, FlowsetError, NumError, RunError, SetupError};
pub use flowset::{Flowset, Flowsets};
pub use number::Num;
pub use pattern::Kind as Pattern;
pub use pool::BenchPkt;
pub use report::BenchReport;
pub use run::{prepare, Prepared};
pub use scenario::{BenchSpec, Scenario};
