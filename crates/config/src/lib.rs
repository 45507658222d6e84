//! pspat's configuration model, in the style of FreeBSD's ipfw/dummynet, and its two front
//! ends.
//!
//! - [`model`]: schedulers, flowsets, pipes, rules and tables as plain data.
//! - [`error`]: what a refused configuration reports.
//! - [`classify`]: the packet classifier built from a model.
//! - [`ipfw`]: the ipfw/dnctl command syntax (`sched 4 config type qfq bw 4Mbit/s`), read
//!   and printed (the `Display` of [`Config`]).
//! - [`toml`](mod@toml): the same model as TOML, read and printed.
//! - [`resolve`]: the checks both front ends share (references, ranges, duplicates,
//!   canonical prefixes).
//!
//! ```
//! let c = pspat_config::parse_ipfw(
//!     "sched 4 config type qfq bw 4Mbit/s\n\
//!      queue 1 config weight 10 sched 4\n\
//!      add 100 queue 1 out src-ip 1.2.3.4\n",
//!     "<example>",
//! )
//! .unwrap();
//! assert_eq!(c.flowsets[&1].weight, 10);
//! // printing gives ipfw syntax that parses back to the same model
//! assert_eq!(pspat_config::parse_ipfw(&c.to_string(), "<printed>").unwrap(), c);
//! ```

#![forbid(unsafe_code)]

pub mod classify;
pub mod error;
pub mod ipfw;
pub mod model;
pub mod resolve;
pub mod toml;

use std::path::Path;

pub use error::ConfigError;
pub use model::*;

/// Parses and resolves a configuration in ipfw syntax; `origin` names it in errors.
pub fn parse_ipfw(text: &str, origin: &str) -> Result<Config, ConfigError> {
    resolve::resolve(ipfw::parser::parse(text, origin)?)
}

/// Parses and resolves a configuration in TOML; `origin` names it in errors.
pub fn parse_toml(text: &str, origin: &str) -> Result<Config, ConfigError> {
    resolve::resolve(toml::parse(text, origin)?)
}

/// The two syntaxes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Ipfw,
    Toml,
}

impl Format {
    /// The format a file name implies: `.toml` is TOML, anything else ipfw syntax.
    pub fn of_path(path: &Path) -> Format {
        match path.extension() {
            Some(e) if e.eq_ignore_ascii_case("toml") => Format::Toml,
            _ => Format::Ipfw,
        }
    }
}

/// Parses and resolves `text` in `format`.
pub fn parse_str(text: &str, format: Format, origin: &str) -> Result<Config, ConfigError> {
    match format {
        Format::Ipfw => parse_ipfw(text, origin),
        Format::Toml => parse_toml(text, origin),
    }
}

/// Reads, parses and resolves a configuration file, choosing the front end by extension
/// (`.toml` => TOML, anything else => ipfw syntax).
pub fn parse_file(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::Invalid(format!("{}: cannot read: {e}", path.display())))?;
    parse_str(&text, Format::of_path(path), &path.display().to_string())
}

impl Config {
    /// The configuration as TOML ([`toml::to_toml`]).
    pub fn to_toml(&self) -> String {
        toml::to_toml(self)
    }
}
