//! `pspat config check FILE`: reads a configuration (ipfw syntax or TOML), resolves it and
//! prints the resolved model, or the error with its line, column and token.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use pspat_config::Format;

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

/// Reads FILE as the library reads every configuration file (a regular file of bounded
/// size, [`pspat_config::read_file`]), resolves it, and prints it.
///
/// A configuration without rules that would drop every packet is a valid model (the
/// dummynet slides' excerpts in `examples/config/` are such), so it passes here, with a
/// warning on stderr that `pspat run` and `pspat shape` refuse it
/// ([`pspat_config::check_not_empty`]). Rules that match interfaces get a note on stderr:
/// only `pspat shape` has interfaces.
pub fn check(a: &CheckArgs) -> Result<()> {
    let origin = a.file.display().to_string();
    let text = pspat_config::read_file(&a.file)?;
    let format = a
        .format
        .map_or_else(|| Format::of_path(&a.file), Format::from);
    let cfg = pspat_config::parse_str(&text, format, &origin)?;
    if let Err(e) = pspat_config::check_not_empty(&cfg, &origin) {
        eprintln!("warning: {e}; pspat run and pspat shape refuse it");
    }
    let named = pspat_config::rules_naming_interfaces(&cfg);
    if !named.is_empty() {
        let list: Vec<String> = named.iter().map(u32::to_string).collect();
        eprintln!(
            "note: {origin}: rule(s) {} match interfaces (recv, xmit, via): only pspat shape \
             has them (packets received on --in, sent on --out); pspat run refuses this file",
            list.join(", ")
        );
    }
    if !a.quiet {
        let model = match a.print {
            Syntax::Ipfw => cfg.to_string(),
            Syntax::Toml => cfg.to_toml(),
        };
        crate::emit(model.trim_end())?;
        let trees = pspat_config::outline::trees(&cfg);
        if !trees.is_empty() {
            crate::emit(trees.trim_end())?;
        }
    }
    // A comment in both syntaxes, so that the whole output can be read back.
    crate::emit(&format!("# {origin}: ok: {}", cfg.summary()))
}
