//! What can go wrong in the architecture benchmark. Settings out of range name the
//! setting and the value, so that a command line error reads as one line pointing at what
//! to fix; [`ArchError::is_usage`] tells those from failures of a run.

use std::borrow::Cow;

use pspat_engine::EngineError;
use pspat_plot::PlotError;
use pspat_sched::ConfigError;
use thiserror::Error;

use super::Arch;
use crate::limit::LimitError;

/// A setting of a spec, as errors name it (a front end maps it to its option's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// `Setup::duration`, `FloorSpec::duration`.
    Duration,
    /// `ThroughputSpec::clients`, `FloorSpec::clients`.
    Clients,
    /// `ThroughputSpec::archs`, `StabilitySpec::archs`.
    Archs,
    /// `Setup::mailbox`.
    Mailbox,
    /// `Setup::rate_bps`.
    Rate,
    /// `StabilitySpec::rates_bps`.
    StabilityRates,
    /// `Setup::len`.
    Len,
    /// `Knobs::scan_batch`.
    ScanBatch,
    /// `ThroughputSpec::victim_gap`.
    VictimGap,
    /// `ThroughputSpec::flows`.
    Flows,
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Setting::Duration => "duration",
            Setting::Clients => "client count",
            Setting::Archs => "architecture",
            Setting::Mailbox => "mailbox size",
            Setting::Rate => "rate",
            Setting::StabilityRates => "stability rate",
            Setting::Len => "packet length",
            Setting::ScanBatch => "scan batch",
            Setting::VictimGap => "victim gap",
            Setting::Flows => "flow count",
        })
    }
}

/// Any error of the architecture benchmark.
#[derive(Debug, Error)]
pub enum ArchError {
    /// A setting is out of range.
    #[error("{setting} {value} must be {range}")]
    OutOfRange {
        /// The setting.
        setting: Setting,
        /// Its value.
        value: String,
        /// What it may be (most ranges are fixed; the flows' depends on the client counts).
        range: Cow<'static, str>,
    },
    /// A list the run iterates over is empty.
    #[error("no {setting} to measure")]
    Empty {
        /// The list.
        setting: Setting,
    },
    /// The algorithm's name or parameters were refused.
    #[error(transparent)]
    Scheduler(#[from] ConfigError),
    /// An engine did not start.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A thread of the benchmark did not start.
    #[error("spawning {what}")]
    Spawn {
        /// Which thread.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The limit loop failed.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// A point failed (the cause within).
    #[error("{arch} with {clients} clients")]
    Point {
        /// Its architecture.
        arch: Arch,
        /// Its greedy clients.
        clients: usize,
        /// What went wrong.
        #[source]
        source: Box<ArchError>,
    },
    /// The plot could not be drawn or written (the error names the file).
    #[error(transparent)]
    Plot(#[from] PlotError),
}

impl ArchError {
    /// Whether the caller asked for something impossible (as opposed to a run that failed).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ArchError::OutOfRange { .. } | ArchError::Empty { .. } | ArchError::Scheduler(_)
        )
    }

    /// The setting at fault, if the error is about one.
    pub fn setting(&self) -> Option<Setting> {
        match self {
            ArchError::OutOfRange { setting, .. } | ArchError::Empty { setting } => Some(*setting),
            _ => None,
        }
    }

    /// A setting out of range.
    pub(crate) fn range(
        setting: Setting,
        value: impl ToString,
        range: impl Into<Cow<'static, str>>,
    ) -> Self {
        ArchError::OutOfRange {
            setting,
            value: value.to_string(),
            range: range.into(),
        }
    }
}
