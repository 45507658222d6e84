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
//!
//! # Files
//!
//! [`read_file`] is the one place a configuration file is read (by [`parse_file`], and so
//! by `pspat config check`, `pspat run`, `pspat shape` and the engine's live reloads). It
//! refuses, naming the path, what is not a regular file (a FIFO would block the reader
//! until a writer comes, `/dev/zero` would be read until memory runs out, a directory
//! cannot be read) and a file larger than [`MAX_FILE_BYTES`], reading at most one byte more
//! than the limit, so that a file growing while it is read is refused too.
//!
//! A file without rules is refused by [`parse_file`] when what no rule matches is denied
//! ([`check_not_empty`]): every packet would be dropped, which an empty or truncated file
//! (an editor's half-written save, a wrong path to an empty file) says by accident far more
//! often than an operator means it. ipfw itself starts with its default rule 65535 and no
//! other, denying everything, but there the rule set is built command by command and the
//! empty state is the start of it; a pspat file describes the whole state at once. The
//! model's reader ([`parse_str`]) accepts it: an empty model is a model. To drop every
//! packet on purpose, write a rule that says so (`add deny`); to pass what no rule matches,
//! `default allow` (which is then not empty: it passes everything unshaped).

#![forbid(unsafe_code)]

pub mod classify;
pub mod error;
pub mod ipfw;
pub mod model;
pub mod outline;
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
/// (`.toml` => TOML, anything else => ipfw syntax), and refuses it if every packet would be
/// dropped ([`check_not_empty`]). Reads through [`read_file`].
pub fn parse_file(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
    let path = path.as_ref();
    let origin = path.display().to_string();
    let c = parse_str(&read_file(path)?, Format::of_path(path), &origin)?;
    check_not_empty(&c, &origin)?;
    Ok(c)
}

/// Largest configuration file read: 64 MiB. A large real configuration is a few MB (100,000
/// table entries of about 25 bytes a line are 2.5 MB; 65,535 rules of 100 bytes, 6.5 MB), so
/// the bound leaves ten times that while keeping what a mistaken path (a disk image, a log)
/// costs to a bounded read and a parse of a few seconds.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The text of the configuration file `path`: a regular file of at most
/// [`MAX_FILE_BYTES`], in UTF-8. Anything else is refused with an error naming the path
/// and the reason (what the file is, its size).
pub fn read_file(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    let refuse = |why: String| ConfigError::Invalid(format!("{}: {why}", path.display()));
    let not_regular = |t: std::fs::FileType| refuse(format!("is {}, not a regular file", kind(t)));
    // The path's type first, for a clear error; then a non-blocking open, so that a path
    // replaced by a FIFO meanwhile cannot make the open wait for a writer (the opened
    // file's type is checked below; O_NONBLOCK changes nothing for a regular file).
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => return Err(not_regular(m.file_type())),
        Ok(_) => {}
        Err(e) => return Err(refuse(format!("cannot read: {e}"))),
    }
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.custom_flags(libc::O_NONBLOCK);
    }
    let file = open
        .open(path)
        .map_err(|e| refuse(format!("cannot read: {e}")))?;
    // The opened file's own type and size, not the path's: the path may change meanwhile.
    let meta = file
        .metadata()
        .map_err(|e| refuse(format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let too_large = |what: String| {
        refuse(format!(
            "{what} is larger than a configuration file may be ({} MiB)",
            MAX_FILE_BYTES >> 20
        ))
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(format!("{} bytes", meta.len())));
    }
    // The size read may differ from the size seen (the file is being written): at most one
    // byte past the limit is read, to tell a file over it.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large("it grew while it was read and".into()));
    }
    String::from_utf8(bytes).map_err(|e| {
        refuse(format!(
            "is not UTF-8 text (byte {} is not)",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// What a file that is not a regular file is, for an error.
fn kind(t: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "something else"
    }
}

/// Refuses a configuration under which every packet would be dropped by accident: no rule,
/// and what no rule matches is denied (see the crate doc, "Files"). `origin` names it.
pub fn check_not_empty(c: &Config, origin: &str) -> Result<(), ConfigError> {
    if c.rules.is_empty() && c.default_action == Action::Deny {
        return Err(ConfigError::Invalid(format!(
            "{origin}: no rules, and what no rule matches is denied: every packet would be \
             dropped (to drop everything on purpose, write a rule that denies it; `default \
             allow` passes what no rule matches)"
        )));
    }
    Ok(())
}

/// The numbers of the rules that match an interface (`recv`, `xmit`, `via`): only
/// `pspat shape` has interfaces, and a classifier without them refuses these rules
/// (`classify/interfaces.rs`).
pub fn rules_naming_interfaces(c: &Config) -> Vec<u32> {
    c.rules
        .iter()
        .filter(|r| {
            r.matcher
                .options
                .iter()
                .any(|o| matches!(o.cond, Cond::Iface(..)))
        })
        .map(|r| r.number)
        .collect()
}

impl Config {
    /// The configuration as TOML ([`toml::to_toml`]).
    pub fn to_toml(&self) -> String {
        toml::to_toml(self)
    }
}
