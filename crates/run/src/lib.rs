//! pspat-run: `pspat run`, the main job, as a library. A [`Scenario`] (built in, or read
//! from a TOML file) names an algorithm, an emulated link and tenants that send traffic; a
//! [`Run`] starts the PSPAT engine on it with one thread per client, gives
//! [`Snapshot`]s for a live table ([`live::table`]), applies changes of a dummynet-style
//! configuration file ([`Run::poll_reload`]), and stops with the account of every packet
//! ([`RunReport`], as text or JSON).
//!
//! ```no_run
//! use std::time::Duration;
//! let mut sc = pspat_run::Scenario::builtin();
//! sc.set_duration("1s").unwrap();
//! let mut run = pspat_run::Run::start(&sc).unwrap();
//! let mut prev = run.snapshot();
//! while !run.is_over() {
//!     std::thread::sleep(Duration::from_millis(250).min(run.remaining()));
//!     let now = run.snapshot();
//!     println!("{}", pspat_run::live::table(run.scenario(), &prev, &now));
//!     prev = now;
//! }
//! println!("{}", run.stop(false).text());
//! ```
//!
//! - [`scenario`]: the scenario, its fields' setters and validation;
//! - [`file`]: the scenario file;
//! - [`keys`]: tenants' addresses, ports and protocols, and the keys their packets carry;
//! - [`run`](mod@run): the run;
//! - [`snapshot`], [`live`], [`report`]: what it shows while running and at the end;
//! - [`error`]: what is refused, and whether the user can fix it.

#![forbid(unsafe_code)]

pub mod error;
pub mod file;
pub mod keys;
pub mod live;
pub mod report;
pub mod run;
pub mod scenario;
pub mod snapshot;

pub use error::{RunError, ScenarioError};
pub use keys::TenantAddrs;
pub use report::RunReport;
pub use run::Run;
pub use scenario::{DummynetFile, Scenario, Tenant};
pub use snapshot::{Snapshot, TenantCounts};
