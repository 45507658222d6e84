//! # pspat-sim
//!
//! A discrete-event simulator of flows feeding any registered scheduler that drains into a
//! constant-rate virtual link, optionally through a FIFO transmit queue (the NIC ring of the
//! QFQ+ paper, appendix A.4), and the measurements users choose a scheduler by: per-flow
//! throughput and share against the weight share, delay percentiles, burst completion
//! times, T-WFI and B-WFI against the exact fluid GPS reference, Jain's index; JSON, CSV
//! and SVG plots. A scenario with `[[classes]]` runs a tree of classes
//! ([`pspat_sched::tree`]) instead of one scheduler, and [`classes`] measures each class
//! against the tree's references: the fluid allocation, and hierarchical GPS.
//!
//! It is built on the reference models of `pspat-sched` ([`pspat_sched::reference`]): the
//! link is [`pspat_sched::reference::link::VirtualLink`], the fluid reference
//! [`pspat_sched::reference::gps::FluidGps`], the service metrics
//! [`pspat_sched::reference::wfi::measure`]. This crate adds the traffic
//! ([`traffic`]), the scenario format ([`scenario`]), the event loop ([`mod@run`]), the
//! reductions ([`metrics`]), the plots ([`plot`], drawn by `pspat-plot`) and parameter
//! sweeps ([`sweep`]), which also drive `pspat bench wfi`'s fill/drain experiments of the
//! harness for the QFQ+ paper's reproductions.
//!
//! ```
//! use pspat_sim::{run, Scenario};
//!
//! let sc = Scenario::from_toml(r#"
//!     alg = "qfq"
//!     rate_bps = 1e9
//!     packets = 2000
//!     [[flows]]
//!     name = "heavy"
//!     weight = 3
//!     size = { kind = "fixed", len = 1500 }
//!     arrival = { kind = "backlogged" }
//!     [[flows]]
//!     name = "light"
//!     size = { kind = "fixed", len = 1500 }
//!     arrival = { kind = "backlogged" }
//! "#, "example")?;
//! let r = run(&sc)?;
//! assert_eq!(r.packets, 2000);
//! assert!((r.groups[0].share - 0.75).abs() < 0.01);
//! # Ok::<(), pspat_sim::SimError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod classes;
pub mod error;
pub mod metrics;
pub mod plot;
pub mod run;
pub mod scenario;
pub mod sweep;
pub mod traffic;

pub use error::SimError;
pub use metrics::SimReport;
pub use run::run;
pub use scenario::Scenario;
