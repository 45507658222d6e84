//! What a refused scenario or a failed run reports.
//!
//! Each error's `Display` is its own context ("x.toml", "tenant `gold`", "starting the
//! engine"); the cause is its [`source`](std::error::Error::source), so a printer that walks
//! the chain (anyhow's `{:#}`) gives one line: `x.toml: tenant `gold`: rate: ...`.
//! [`ScenarioError::is_usage`] and [`RunError::is_usage`] tell input the user can fix (a
//! bad value, file or flag) from failures of the machine (a file that cannot be read, a
//! thread that cannot start).

use std::path::PathBuf;

use pspat_config::ConfigError;
use pspat_engine::EngineError;

/// Why a scenario was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The scenario file could not be read.
    #[error("reading scenario {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not TOML, or has a key a scenario does not have.
    #[error("{origin}")]
    Toml {
        /// The file's name.
        origin: String,
        /// What the TOML reader said (line, column, key).
        source: Box<toml::de::Error>,
    },
    /// A value is out of range or does not parse; the message names the field.
    #[error("{0}")]
    Invalid(String),
    /// The dummynet-style configuration was refused (the error names the file, and the
    /// line for a syntax error).
    #[error(transparent)]
    Dummynet {
        /// Why.
        source: ConfigError,
    },
    /// Where `source` happened: a file, a tenant.
    #[error("{context}")]
    Context {
        /// `x.toml`, `tenant `gold``.
        context: String,
        /// What was wrong there.
        source: Box<ScenarioError>,
    },
}

impl ScenarioError {
    /// `source` inside `context`.
    pub fn within(self, context: impl Into<String>) -> Self {
        ScenarioError::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// Whether the user can fix it by changing the scenario or the command line (everything
    /// but a file that cannot be read).
    pub fn is_usage(&self) -> bool {
        match self {
            ScenarioError::Read { .. } => false,
            ScenarioError::Context { source, .. } => source.is_usage(),
            _ => true,
        }
    }
}

/// Why a run could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scenario was refused.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The backend specification was refused.
    #[error(transparent)]
    Backend(pspat_io::SendError),
    /// The engine refused its configuration or could not start.
    #[error("starting the engine")]
    Engine(#[source] EngineError),
    /// A client thread could not be started.
    #[error("starting client threads")]
    Threads(#[source] std::io::Error),
    /// The arbiter did not answer a statistics request.
    #[error("dummynet statistics")]
    Stats(#[source] EngineError),
}

impl RunError {
    /// Whether the user can fix it by changing the scenario or the command line: a bad
    /// scenario, backend, algorithm or parameter; not a thread or a backend that fails to
    /// start, nor a run-time failure.
    pub fn is_usage(&self) -> bool {
        match self {
            RunError::Scenario(e) => e.is_usage(),
            RunError::Backend(_) => true,
            RunError::Engine(e) => e.is_usage(),
            RunError::Threads(_) | RunError::Stats(_) => false,
        }
    }
}

#[cfg(test)]
pub(crate) use pspat_engine::error_chain as chain;
