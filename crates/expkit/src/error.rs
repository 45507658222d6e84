//! What the kit's tools refuse or fail at.
//!
//! The options are named as on the command line (`--len`, `--victim-port`), which is where
//! users meet them; each message is what `pspat udpgen`, `udpsink` and `experiment` print,
//! the cause following as the error's source. `is_usage` tells a setting the user can fix
//! (the binary exits with 2) from a failure of the machine or of a file (1).

use std::io;
use std::path::PathBuf;

use pspat_io::cpu::NotAllowed;
use pspat_io::SendError;
use pspat_plot::PlotError;

/// A setting outside what its option accepts: `--len 60: outside 82..=65549 bytes (...)`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{option} {value}: {reason}")]
pub struct Invalid {
    /// The option, as on the command line (`--duration`).
    pub option: &'static str,
    /// Its value as read (`0s`, `60`).
    pub value: String,
    /// What it should be (`outside 0.01..=3600 seconds`).
    pub reason: String,
}

/// A configuration the kit's `tree` set cannot use ([`crate::tree::KitTree::from_config`]).
#[derive(Debug, thiserror::Error)]
pub enum TreeSetError {
    /// The configuration is refused by pspat itself.
    #[error(transparent)]
    Config(#[from] pspat_config::ConfigError),
    /// Not exactly one tree of classes.
    #[error("the configuration has {0} trees of classes: the tree set takes one")]
    NotOneTree(usize),
    /// Something the generated HTB tree would not mean the same by.
    #[error("the tree set's HTB twin: {0}")]
    Unsupported(String),
    /// A sender's port that the rules send to no leaf of the tree.
    #[error("port {0} goes to no leaf of the tree")]
    PortNotInTree(u16),
}

/// A run's reports that do not fit its tree ([`crate::meter`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MeterError {
    /// A sender's port that no leaf of the tree takes.
    #[error("sender port {0} goes to no leaf of the tree")]
    PortNotInTree(u16),
    /// A client the sink counted that the generator did not report.
    #[error("the sink counted client {0}, which no sender was")]
    UnknownClient(u32),
    /// A port of the tree that no sender sent from.
    #[error("no sender sent from port {0}")]
    NoSender(u16),
}

/// Why [`crate::Generator::open`] or [`crate::Generator::run`] failed.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// An option out of its range.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The senders' source ports run past 65535.
    #[error("--src-port-base {base} with {senders} senders goes past port 65535")]
    PortsPastEnd {
        /// `--src-port-base`.
        base: u16,
        /// `--senders`.
        senders: u32,
    },
    /// `--rates` does not give one rate per sender.
    #[error("--rates: {rates} rates for {senders} senders")]
    RatesCount {
        /// Rates given.
        rates: usize,
        /// `--senders`.
        senders: u32,
    },
    /// The victim's default port, base + M, is past 65535.
    #[error(
        "the victim's default port (base + {senders} = {port}) is past 65535: give --victim-port"
    )]
    VictimPortPastEnd {
        /// `--senders`.
        senders: u32,
        /// base + M.
        port: u32,
    },
    /// The victim's port is a greedy sender's.
    #[error("--victim-port {port} is one of the senders' ports ({first}..={last})")]
    VictimPortTaken {
        /// `--victim-port`.
        port: u16,
        /// Sender 0's port.
        first: u16,
        /// Sender M-1's port.
        last: u32,
    },
    /// A victim's port or length without a victim.
    #[error("--victim-port and --victim-len need a victim: give --victim-rate PPS")]
    NoVictim,
    /// A CPU to pin to that this process may not use.
    #[error("--cpus: {0}")]
    CpuNotAllowed(NotAllowed),
    /// A sender's socket did not open (`what`: `sender 3`, `the victim`).
    #[error("{what}: opening its socket on port {port}")]
    Open {
        /// Which sender.
        what: String,
        /// The port it was to bind.
        port: u16,
        /// Why.
        #[source]
        source: SendError,
    },
    /// A sender thread did not start.
    #[error("spawning a sender thread")]
    Spawn(#[source] io::Error),
    /// A sender could not pin itself to its CPU.
    #[error("sender {client}: pinning to CPU {cpu}: {reason}")]
    Pin {
        /// The sender's client number.
        client: u32,
        /// Its CPU.
        cpu: usize,
        /// The system's reason.
        reason: io::Error,
    },
    /// A sender's first send failed: nothing ever went out, a configuration problem (no
    /// route, ...) rather than congestion.
    #[error("sender {client} (port {port}): {reason}")]
    FirstSend {
        /// The sender's client number.
        client: u32,
        /// Its source port.
        port: u16,
        /// The backend's reason.
        reason: SendError,
    },
    /// A sender thread panicked.
    #[error("a sender thread panicked")]
    Panicked,
}

impl GenError {
    /// Whether the user can fix it by changing the settings.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            GenError::Invalid(_)
                | GenError::PortsPastEnd { .. }
                | GenError::RatesCount { .. }
                | GenError::VictimPortPastEnd { .. }
                | GenError::VictimPortTaken { .. }
                | GenError::NoVictim
                | GenError::CpuNotAllowed(_)
        )
    }
}

/// Why [`crate::Sink::bind`] or [`crate::Sink::run`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// An option out of its range.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// A spin time without busy polling.
    #[error("--spin-us applies to --busy-poll, which is not given")]
    SpinWithoutBusyPoll,
    /// The receiving thread could not be pinned.
    #[error("--cpu {cpu}: cannot pin to it ({reason}); this process may use {allowed:?}")]
    Pin {
        /// The CPU asked for.
        cpu: usize,
        /// The system's reason.
        reason: io::Error,
        /// The CPUs this process may use.
        allowed: Vec<usize>,
    },
    /// The socket did not bind, or a receive call failed (the message names the address).
    #[error(transparent)]
    Socket(#[from] SendError),
}

impl SinkError {
    /// Whether the user can fix it by changing the settings.
    pub fn is_usage(&self) -> bool {
        !matches!(self, SinkError::Socket(_))
    }
}

/// A results CSV that does not parse (see [`crate::csv::parse_results`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CsvError {
    /// No header line.
    #[error("empty results file")]
    Empty,
    /// The header lacks a column the plots use.
    #[error("no '{column}' column in the header line '{header}'")]
    NoColumn {
        /// The column.
        column: &'static str,
        /// The header line.
        header: String,
    },
    /// A line with another number of fields than the header.
    #[error("line {line}: {fields} fields, the header has {columns}")]
    Fields {
        /// Line number, from 1.
        line: usize,
        /// Its fields.
        fields: usize,
        /// The header's.
        columns: usize,
    },
    /// A cell that should be a number.
    #[error("line {line}: {column} '{value}' is not a number")]
    NotANumber {
        /// Line number, from 1.
        line: usize,
        /// The column's name.
        column: String,
        /// The cell.
        value: String,
    },
}

/// A CPU sample that does not parse, or two that make no window (see [`crate::cpu`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CpuSampleError {
    /// A line the sample must have.
    #[error("no {0} line")]
    Missing(&'static str),
    /// Counters in ticks of 0 per second.
    #[error("clk_tck is 0")]
    ZeroClkTck,
    /// A line that does not read.
    #[error("line {line}: {what}")]
    Line {
        /// Line number, from 1.
        line: usize,
        /// What is wrong with it.
        what: String,
    },
    /// Two samples with counters in different units.
    #[error("the samples' clk_tck differ")]
    ClkTck,
    /// A shaper's time in one sample only.
    #[error("one sample has a shaper line and the other not")]
    ShaperInOne,
    /// The second sample is not after the first.
    #[error("the second sample is not later than the first")]
    NoWindow,
    /// A counter that fell (another process under the same PID, the samples swapped).
    #[error("{0} went backwards between the samples")]
    Backwards(&'static str),
}

/// Why an analysis step (a results row, the plots) failed.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// No weights.
    #[error("--weights: give at least one weight")]
    NoWeights,
    /// A weight of 0.
    #[error("--weights: a weight of 0 has no share")]
    ZeroWeight,
    /// A set or mode name that is not a plain word (it would break the CSV).
    #[error("--set/--mode '{0}': give a plain word")]
    NotAWord(String),
    /// A file could not be read.
    #[error("reading {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A report is not the JSON its tool writes.
    #[error("parsing {}", .path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A CPU sample does not parse.
    #[error("in the CPU sample {}", .path.display())]
    CpuSample {
        /// The file.
        path: PathBuf,
        /// What is wrong, where.
        source: CpuSampleError,
    },
    /// Two CPU samples make no window.
    #[error("between the CPU samples {} and {}", .before.display(), .after.display())]
    CpuWindow {
        /// The first sample.
        before: PathBuf,
        /// The second.
        after: PathBuf,
        /// What is wrong.
        source: CpuSampleError,
    },
    /// A CSV could not be opened for appending.
    #[error("opening {}", .path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A CSV line could not be written.
    #[error("writing {}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The results CSV does not parse.
    #[error("in {}", .path.display())]
    Csv {
        /// The file.
        path: PathBuf,
        /// What is wrong, where.
        source: CsvError,
    },
    /// The results CSV has a header and nothing else.
    #[error("{}: no result lines to plot", .0.display())]
    NoResults(PathBuf),
    /// The plots' directory could not be created.
    #[error("creating {}", .path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A plot could not be drawn or written (the error names the file).
    #[error(transparent)]
    Plot(#[from] PlotError),
}

impl AnalysisError {
    /// Whether the user can fix it by changing the options.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            AnalysisError::NoWeights | AnalysisError::ZeroWeight | AnalysisError::NotAWord(_)
        )
    }
}
