//! Exact reference models, slow and obviously correct, to check the algorithms against.
//!
//! - [`trace`]: arrival sequences and transmission traces;
//! - [`link`]: drives any scheduler with an arrival sequence on a constant-rate link, with
//!   or without a transmit queue;
//! - [`gps`]: the fluid GPS system, exact and event-driven;
//! - [`class_service`]: per-class T-WFI of a trace, and its delay against H-GPS;
//! - [`hgps`]: hierarchical GPS, the fluid system of a tree of weighted classes;
//! - [`fluid`]: steady-state fluid allocations, weighted max-min among flows and the
//!   allocation of a tree of classes with rates, ceils, priorities and weights;
//! - [`wfi`]: measured T-WFI and B-WFI of a trace, and its lag and delay against GPS;
//! - [`model`]: per-flow FIFO queues with limits and counters, no policy: what every
//!   scheduler must agree with except for the order between flows;
//! - [`wf2qp_linear`]: WF2Q+ by linear scan, the oracle for the heap-based one.

pub mod class_service;
pub mod fluid;
pub mod gps;
pub mod hgps;
pub mod link;
pub mod model;
pub mod trace;
pub mod wf2qp_linear;
pub mod wfi;
