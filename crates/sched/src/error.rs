//! Errors of the scheduler library. Each names the offending value.

use thiserror::Error;

use crate::flow::FlowId;
use crate::stats::DropReason;

/// A flow parameter out of range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[allow(missing_docs)] // variant fields are the values the message names
pub enum ParamError {
    /// Weight zero or above the maximum.
    #[error("invalid weight {weight}: must be 1..={max}")]
    Weight { weight: u32, max: u32 },
    /// Maximum packet length zero or above the maximum.
    #[error("invalid max_len {max_len}: must be 1..={max} bytes")]
    MaxLen { max_len: u32, max: u32 },
    /// Packet limit of zero, or too large.
    #[error("invalid limit_pkts {limit_pkts}: must be 1..={max}")]
    LimitPkts { limit_pkts: u32, max: u32 },
    /// Byte limit below the maximum packet length.
    #[error("invalid limit_bytes {limit_bytes}: must be at least max_len ({max_len})")]
    LimitBytes { limit_bytes: u64, max_len: u32 },
    /// A value this algorithm cannot honour (e.g. a priority band it does not have).
    #[error("{0}")]
    Unsupported(String),
}

/// Failure of a flow operation (`add_flow`, `update_flow`, `remove_flow`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[allow(missing_docs)] // variant fields are the values the message names
pub enum FlowError {
    /// The handle names a flow that does not exist (never created, or already removed).
    #[error("unknown flow {0:?}")]
    UnknownFlow(FlowId),
    /// The parameters are out of range.
    #[error(transparent)]
    Params(#[from] ParamError),
    /// The flow table is full.
    #[error("too many flows: the scheduler holds at most {max}")]
    TooManyFlows { max: u32 },
}

/// A packet the scheduler did not accept, handed back with the reason.
///
/// Nothing is lost silently: the caller gets the packet back and the drop is counted under
/// `reason` in the scheduler's statistics (and the flow's, when the flow exists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected<P> {
    /// The packet, returned to the caller.
    pub pkt: P,
    /// Why it was not queued.
    pub reason: DropReason,
}

/// Failure to build a scheduler from a name and parameters.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[allow(missing_docs)] // variant fields are the values the message names
pub enum ConfigError {
    /// No algorithm has this name or alias.
    #[error("unknown algorithm '{name}' (known: {known})")]
    UnknownAlgorithm { name: String, known: String },
    /// The algorithm has no parameter of this name.
    #[error("algorithm '{alg}' has no parameter '{key}' (known: {known})")]
    UnknownParam {
        alg: &'static str,
        key: String,
        known: String,
    },
    /// A parameter value does not parse or is out of range.
    #[error("invalid value '{value}' for parameter '{key}' of '{alg}': {reason}")]
    BadParam {
        alg: &'static str,
        key: String,
        value: String,
        reason: String,
    },
    /// Packet capacity of zero, or too large to index.
    #[error("invalid capacity {0}: must be 1..=2^31 packets")]
    Capacity(usize),
}
