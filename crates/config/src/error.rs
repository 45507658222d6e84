//! Configuration errors. A syntax error names the place (file, line, column) and the
//! offending token; a semantic error names the object (`queue 3: ...`).

/// Why a configuration was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The text could not be read as the front end's syntax.
    #[error("{origin}:{line}:{column}: {message} (at `{token}`)")]
    Syntax {
        /// File name (or `<string>`).
        origin: String,
        /// 1-based line.
        line: u32,
        /// 1-based column, in characters.
        column: u32,
        /// The offending token, as written (empty at end of input).
        token: String,
        /// What was wrong, and what was expected.
        message: String,
    },
    /// The text parsed, but the configuration it describes is inconsistent; the message
    /// names the object (`queue 3: sched 9 is not defined`).
    #[error("{0}")]
    Invalid(String),
}
