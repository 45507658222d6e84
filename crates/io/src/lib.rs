//! pspat-io: how scheduled packets leave pspat.
//!
//! - [`Pkt`]: the descriptor every part of the engine passes around;
//! - [`Backend`] / [`Sender`]: a backend opens one sender per transmitting thread (the
//!   arbiter, each dispatcher, or each client, depending on the hand-off mode), and a
//!   sender transmits batches;
//! - backends: [`null`] (counts, sends nothing).

#![warn(missing_docs)]

pub mod backend;
pub mod null;
mod pkt;

pub use backend::{Backend, SendError, Sender};
pub use pkt::Pkt;
