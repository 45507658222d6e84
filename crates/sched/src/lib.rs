//! # pspat-sched
//!
//! Packet scheduling algorithms behind one trait, and exact reference models to check them.
//!
//! A scheduler keeps one FIFO queue per flow and decides which flow's head packet leaves
//! next. The [`Scheduler`] trait is what users (the PSPAT arbiter, the simulator, the
//! benchmark harness) call; an algorithm is a [`Policy`] plugged into the generic
//! [`Sched`], which owns the flows, queues, limits and counters (the shape of dummynet's
//! `struct dn_alg`). The [`registry`] lists every algorithm once; everything else iterates
//! it.
//!
//! ```
//! use pspat_sched::{registry, Desc, FlowParams, Params, Scheduler};
//!
//! let mut s = registry::build::<Desc>("wf2q+", &Params::new(), 1024)?;
//! let video = s.add_flow(FlowParams::weighted(3))?;
//! let bulk = s.add_flow(FlowParams::weighted(1))?;
//! for i in 0..4 {
//!     s.enqueue(video, Desc::new(i, 1200)).unwrap();
//!     s.enqueue(bulk, Desc::new(100 + i, 1200)).unwrap();
//! }
//! let (flow, pkt) = s.dequeue().unwrap();
//! assert_eq!((flow, pkt.cookie), (video, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Algorithms know nothing of threads, clocks or I/O: time, when a model needs it, is a
//! parameter.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod algorithms;
pub mod error;
pub mod flow;
pub mod framing;
pub mod packet;
pub mod plus;
pub mod policy;
pub mod reference;
pub mod registry;
pub mod scheduler;
pub mod stats;
pub mod table;
#[cfg(test)]
mod testing;
pub mod tree;
pub mod util;
pub mod vtime;

pub use error::{ConfigError, FlowError, ParamError, Rejected};
pub use flow::{FlowId, FlowParams, MAX_PACKET_LEN, MAX_WEIGHT};
pub use framing::{Framing, LinkLayer};
pub use packet::{Desc, Packet};
pub use policy::{Flows, Policy, Sched};
pub use registry::{AlgorithmInfo, Params, ServiceClass};
pub use scheduler::Scheduler;
pub use stats::{Backlog, DropCounts, DropReason, FlowStats, SchedStats};
pub use vtime::VTime;

/// The workspace README's Rust example ("Using the library"), compiled and run as one of
/// this crate's doctests so that it keeps working as written. Every code block of README.md
/// labelled `rust`, or not labelled, is a doctest: the others are labelled `sh`, `text`.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
