//! SCHED+: the modification scheme that makes an accurate fair-queueing scheduler cost
//! about as little as DRR, applied here to QFQ (QFQ+, [`crate::algorithms::qfq_plus`]) and
//! to WF2Q+ (WF2Q++, [`crate::algorithms::wf2qpp`]).
//!
//! P. Valente, "Reducing the execution time of fair-queueing packet schedulers", Computer
//! Communications 2014 (`qfq-plus-reducing-execution-time.md`), section 2; QFQ+ is the
//! variant Linux ships (`sch_qfq.c` since 3.8).
//!
//! # The scheme (paper, section 2)
//!
//! Flows are grouped into *aggregates* of at most `M` flows ([`aggregates`]), all with the
//! same weight `w^k` and the same maximum packet length `L^k`. The original scheduler,
//! *SCHED*, schedules aggregates instead of flows ([`Outer`]): an aggregate of `m^k` flows
//! has the weight `m^k w^k` (the sum of its flows' weights) and, in place of a head
//! packet, a *budget* of `m^k L^k` bytes. Once SCHED picks an aggregate, only that
//! aggregate is served until its budget or its backlog runs out; inside it, the flows are
//! served by a weightless DRR with quantum `L^k` ([`PlusSched`]). Then SCHED charges the
//! aggregate, reschedules it if it is still backlogged, and picks the next one.
//!
//! **Head-packet independence.** The aggregate's timestamps depend on its budget, never on
//! its flows' head packets: SCHED's costly operations run only when an aggregate enters or
//! leaves service, about once every `M L` bytes under load, and an enqueue to a backlogged
//! aggregate touches nothing but the flow's DRR state.
//!
//! # Guarantee (paper, Theorem 1)
//!
//! `T-WFI^k <= (5 - 1/m^k) L^k / (phi^k R) + (Delta S^k + Q + M L - m^k L^k) / R`, SCHED's
//! own T-WFI plus at most `(4 - 1/m^k) L^k / (phi^k R) + ((M - 1) L - (m^k - 1) L^k) / R`.
//! Each algorithm file instantiates it (QFQ+: eq. 22).
//!
//! # Files
//!
//! - [`outer`]: the [`Outer`] trait, what SCHED must provide to schedule aggregates;
//! - [`aggregates`]: the aggregate table (membership, budgets, costs);
//! - [`sched`]: [`PlusSched`], the [`crate::Policy`] that runs the scheme over any
//!   [`Outer`].

pub mod aggregates;
pub mod outer;
pub mod sched;

pub use aggregates::{Agg, Aggregates};
pub use outer::Outer;
pub use sched::{PlusFlow, PlusSched, MAX_M, M_PARAM};
