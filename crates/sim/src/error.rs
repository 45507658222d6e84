//! Errors of the simulator, each naming what was wrong.

use pspat_sched::{ConfigError, FlowError};

/// What can go wrong setting up or running a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario is invalid (the message names the field and the value).
    #[error("scenario: {0}")]
    Scenario(String),
    /// The scenario file could not be read or parsed.
    #[error("scenario file '{path}': {reason}")]
    File {
        /// Path of the file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The scheduler refused its configuration.
    #[error("scheduler: {0}")]
    Sched(#[from] ConfigError),
    /// The scheduler refused a flow.
    #[error("flow: {0}")]
    Flow(#[from] FlowError),
    /// Drawing or writing a plot failed (the error names the file).
    #[error(transparent)]
    Plot(#[from] pspat_plot::PlotError),
}
