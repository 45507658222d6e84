//! pspat-mailbox: the lock-free single-producer single-consumer queue of PSPAT.
//!
//! Every client talks to the arbiter through a private mailbox, and the arbiter to each
//! dispatcher; nothing else is shared between threads on the data path. The design is the
//! one of section 4.1 of the PSPAT paper (after FastForward, Giacomoni et al. 2008):
//!
//! - an empty slot holds a special value (word 0 = 0), so head and tail are private to the
//!   consumer and the producer: there is no shared index to bounce between caches;
//! - the producer enters a new cache line only after seeing the slot one line ahead empty,
//!   so it never writes a line the consumer is still reading;
//! - the consumer releases slots a whole cache line at a time, so it never writes a line
//!   the producer is filling.
//!
//! The consumer can also take a message without releasing its slot ([`Consumer::extract`])
//! and release later ([`Consumer::release`]): the arbiter keeps a client's slots until the
//! scheduler has sent the packets, which bounds what a client can have queued (Figure 5 of
//! the paper, line 21).
//!
//! [`frames`] holds what the descriptors stand for when they are real frames: a pool of
//! fixed-size slots each receiving thread fills and the transmitting side empties.
//!
//! The crate is written in safe Rust: slots are atomics, and with `--cfg loom` the same
//! code runs under the loom model checker (`tests/loom.rs`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod frames;
mod mailbox;
mod message;
mod sync;

pub use frames::{FrameError, FramePool, FrameWriter};
pub use mailbox::{mailbox, Config, ConfigError, Consumer, Producer};
pub use message::Message;
