//! `pspat config check FILE`: reads a configuration (ipfw syntax or TOML), resolves it and
//! prints the resolved model, or the error with its line, column and token.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use pspat_config::{Config, Format};

/// A syntax.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Syntax {
    Ipfw,
    Toml,
}

impl From<Syntax> for Format {
    fn from(s: Syntax) -> Format {
        match s {
            Syntax::Ipfw => Format::Ipfw,
            Syntax::Toml => Format::Toml,
        }
    }
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The configuration file (`.toml` is read as TOML, anything else as ipfw syntax).
    pub file: PathBuf,
    /// Read FILE in this syntax whatever its extension.
    #[arg(long, value_enum)]
    pub format: Option<Syntax>,
    /// Print the resolved model in this syntax.
    #[arg(long, value_enum, default_value = "ipfw")]
    pub print: Syntax,
    /// Print only the summary line.
    #[arg(long, short)]
    pub quiet: bool,
}

/// One line: how many objects of each kind.
pub fn summary(c: &Config) -> String {
    let entries: usize = c.tables.values().map(|t| t.entries.len()).sum();
    format!(
        "{} schedulers, {} flowsets, {} pipes, {} rules, {} tables with {} entries, default {}",
        c.schedulers.len(),
        c.flowsets.len(),
        c.pipes.len(),
        c.rules.len(),
        c.tables.len(),
        entries,
        c.default_action
    )
}

pub fn check(a: &CheckArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("cannot read {}", a.file.display()))?;
    let format = a
        .format
        .map_or_else(|| Format::of_path(&a.file), Format::from);
    let cfg = pspat_config::parse_str(&text, format, &a.file.display().to_string())?;
    if !a.quiet {
        let model = match a.print {
            Syntax::Ipfw => cfg.to_string(),
            Syntax::Toml => cfg.to_toml(),
        };
        crate::emit(model.trim_end())?;
    }
    // A comment in both syntaxes, so that the whole output can be read back.
    crate::emit(&format!("# {}: ok: {}", a.file.display(), summary(&cfg)))
}
