//! pspat's configuration model, in the style of FreeBSD's ipfw/dummynet.
//!
//! - [`model`]: schedulers, flowsets, pipes, rules and tables as plain data.
//! - [`error`]: what a refused configuration reports.
//! - [`classify`]: the packet classifier built from a model.

#![forbid(unsafe_code)]

pub mod classify;
pub mod error;
pub mod model;

pub use error::ConfigError;
pub use model::*;
