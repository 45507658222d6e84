//! Why a shaper did not start, or refused a new configuration.
//!
//! Each message is what `pspat shape` prints, its cause following as the error's source
//! (the binary prints the chain on one line: `opening --out: <cause>`). The options are
//! named as on the command line, which is where users meet them.

use std::io;
use std::path::PathBuf;

use pspat_engine::EngineError;
use pspat_io::afpacket::AfPacketError;
use pspat_io::cpu::NotAllowed;

/// Why [`crate::Shaper::start`] or [`crate::Shaper::reconfigure`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ShaperError {
    /// Input and output are one interface.
    #[error("--in and --out are the same interface ({0})")]
    SameInterface(String),
    /// Input and output are one interface under two names (an altname, say): a shaper
    /// between them would send every frame back to where it came from.
    #[error("--in {input} and --out {output} are the same interface (index {index})")]
    SameIndex {
        /// `--in`.
        input: String,
        /// `--out`.
        output: String,
        /// The interface index both name.
        index: u32,
    },
    /// An option's value outside its range (`--rx-threads 0: expected 1..=64`).
    #[error("{option} {value}: expected {expected}")]
    OutOfRange {
        /// The option, as on the command line.
        option: &'static str,
        /// The value given.
        value: String,
        /// What it may be.
        expected: String,
    },
    /// A receiving thread's CPU outside this process's affinity mask.
    #[error("--rx-cpus: {0}")]
    RxCpu(NotAllowed),
    /// The configuration file does not read or parse.
    #[error("reading {}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: pspat_config::ConfigError,
    },
    /// An AF_PACKET socket did not open (`what`: `opening --out`, `opening --in`, `opening
    /// --out for the reverse path`, ...), or the output's MTU did not read.
    #[error("{what}")]
    Socket {
        /// What was being opened or read.
        what: String,
        /// Why it failed (a missing capability or interface, named).
        #[source]
        source: AfPacketError,
    },
    /// The engine refused to start.
    #[error("starting the engine")]
    Engine(#[source] EngineError),
    /// The engine refused a new configuration (the running one stays).
    #[error("applying the configuration")]
    Reconfigure(#[source] EngineError),
    /// A thread did not start (`what`: `starting a receiving thread`, `starting the
    /// reverse thread`).
    #[error("{what}")]
    Spawn {
        /// Which thread.
        what: &'static str,
        /// The system's reason.
        #[source]
        source: io::Error,
    },
}

impl ShaperError {
    /// Whether the user can fix it by changing the options or the configuration file (a
    /// bad option, a file that does not read or parse, a configuration the engine refuses):
    /// `pspat shape` exits with 2. Not a socket that does not open (an interface missing,
    /// no CAP_NET_RAW), nor a thread that does not start (exit 1).
    pub fn is_usage(&self) -> bool {
        match self {
            ShaperError::SameInterface(_)
            | ShaperError::SameIndex { .. }
            | ShaperError::OutOfRange { .. }
            | ShaperError::RxCpu(_)
            | ShaperError::Config { .. } => true,
            ShaperError::Engine(e) | ShaperError::Reconfigure(e) => e.is_usage(),
            ShaperError::Socket { .. } | ShaperError::Spawn { .. } => false,
        }
    }

    pub(crate) fn socket(what: impl Into<String>) -> impl FnOnce(AfPacketError) -> Self {
        let what = what.into();
        move |source| ShaperError::Socket { what, source }
    }
}
