//! The packet classifier, in two stages.
//!
//! - **Stage 1** ([`Classifier`], on every client thread, read-only and `Send + Sync`):
//!   parse the frame into a [`FlowKey`] ([`packet`]), run the rules with their table
//!   lookups ([`rules`], [`lpm`]) and name the target class (a flowset, or a pipe's implicit
//!   flowset) as a dense index: a [`Verdict`]. Changing the rules means building a new
//!   `Classifier` and swapping it in.
//! - **Stage 2** ([`KeyMap`], on the arbiter thread only): the class's and its scheduler's
//!   masks applied to the key, masked keys mapped to dense scheduler-instance and queue ids
//!   in bounded maps with idle expiry (allocated at once, or growing by doubling up to
//!   their bound: `KeyMap::growable`).

pub mod compile;
pub mod interfaces;
pub mod key;
pub mod keymap;
pub mod lpm;
pub mod packet;
pub mod rules;

pub use compile::{Class, ClassOrigin, Classifier, Sched, SchedOrigin};
pub use interfaces::Interfaces;
pub use key::FlowKey;
pub use keymap::{Full, KeyMap};
pub use lpm::Lpm;
pub use packet::{parse_frame, Layer, ParseError, Parsed};
pub use rules::{Chain, Draw, DropCause, Rng, Verdict, MAX_HOPS};

#[cfg(test)]
mod tests;
