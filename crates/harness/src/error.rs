//! Errors of the harness. Each names the offending token, so that a command line error
//! reads as one line pointing at what to fix.

use pspat_sched::{ConfigError, FlowError};
use thiserror::Error;

/// A number that does not parse (see [`crate::number`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid number '{token}': {reason}")]
pub struct NumError {
    /// The text as given.
    pub token: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// A flowset specification that does not parse or is out of range (see [`crate::flowset`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[allow(missing_docs)] // fields are the values the message names
pub enum FlowsetError {
    /// A field (`weight`, `len`, `flows`) is invalid.
    #[error("invalid {field} '{value}' in flowset '{flowset}': {reason}")]
    Field {
        field: &'static str,
        value: String,
        flowset: String,
        reason: String,
    },
    /// More than three `:`-separated fields.
    #[error("invalid flowset '{flowset}': expected weight:len:flows")]
    Fields { flowset: String },
    /// An empty element (`1::4,,2::4`, a trailing comma, or nothing at all).
    #[error("empty flowset in '{spec}'")]
    Empty { spec: String },
    /// The flowsets add up to more flows than the harness runs.
    #[error("too many flows in '{spec}': {flows} (at most {max})")]
    TooManyFlows { spec: String, flows: u64, max: u64 },
}

/// A run that cannot be set up: unknown algorithm, parameters the algorithm refuses,
/// thresholds out of range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[allow(missing_docs)] // fields are the values the message names
pub enum SetupError {
    /// No algorithm has this name (nor is it `none`).
    #[error("unknown algorithm '{name}' (known: none, {known})")]
    UnknownAlgorithm { name: String, known: String },
    /// An option's value is out of range.
    #[error("invalid {option} '{value}': {reason}")]
    Option {
        option: &'static str,
        value: String,
        reason: String,
    },
    /// The algorithm refused its parameters or capacity.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A strict-priority algorithm cannot map a flowset's weight to a band.
    #[error(
        "invalid weight '{weight}' in flowset '{flowset}': '{alg}' uses the weight as the \
         priority, 1..={bands}"
    )]
    Priority {
        weight: u32,
        bands: u32,
        alg: &'static str,
        flowset: String,
    },
    /// The scheduler refused a flow.
    #[error("cannot add flow {flow} of flowset '{flowset}': {source}")]
    Flow {
        flow: u32,
        flowset: String,
        source: FlowError,
    },
    /// The scheduler did not number its flows densely from 0.
    #[error("scheduler '{alg}' gave flow {flow} the index {index}: expected dense indices")]
    FlowIndex {
        alg: &'static str,
        flow: u32,
        index: u32,
    },
    /// The capacity (given, or `qmax` plus the largest burst) is out of range.
    #[error("invalid capacity {capacity} ({why}): must be 1..={max} packets")]
    Capacity {
        capacity: u64,
        why: &'static str,
        max: u64,
    },
}

/// A run that completed but showed a scheduler bug: the packets did not come back as
/// they went in.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "scheduler '{alg}' failed the run: {mismatches} flow mismatches, {order_errors} per-flow \
     order errors, {lost} packets lost, {unaccounted} unaccounted (enqueued must equal \
     dequeued + still queued)"
)]
#[allow(missing_docs)] // fields are the values the message names
pub struct RunError {
    pub alg: String,
    pub mismatches: u64,
    pub order_errors: u64,
    pub lost: u64,
    pub unaccounted: u64,
}

/// Any error of the harness.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A bad number on the command line.
    #[error(transparent)]
    Num(#[from] NumError),
    /// A bad flowset specification.
    #[error(transparent)]
    Flowset(#[from] FlowsetError),
    /// A run that cannot be set up.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A run that exposed a scheduler bug.
    #[error(transparent)]
    Run(#[from] RunError),
}

impl Error {
    /// Whether the user asked for something impossible (as opposed to a run that failed).
    pub fn is_usage(&self) -> bool {
        match self {
            Error::Num(_) | Error::Flowset(_) => true,
            Error::Setup(SetupError::FlowIndex { .. }) | Error::Run(_) => false,
            Error::Setup(_) => true,
        }
    }
}
