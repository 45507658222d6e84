//! pspat-mailbox: the lock-free single-producer single-consumer queue of PSPAT.
//!
//! Every client talks to the arbiter through a private mailbox, and the arbiter to each
//! dispatcher; nothing else is shared between threads on the data path. The design starts
//! from section 4.1 of the PSPAT paper (after FastForward, Giacomoni et al. 2008):
//!
//! - an empty slot holds a special value (word 0 = 0), so the consumer finds messages
//!   without reading any index the producer writes; it empties the slots of a cache line
//!   when it has read them all, while the line is in its cache;
//! - the consumer gives slots back by publishing how many it has released, a whole cache
//!   line at a time, and the producer reads that count only when the credit it cached runs
//!   out (as `rtrb` caches the other side's index).
//!
//! The consumer can also take a message without releasing its slot ([`Consumer::extract`])
//! and release later ([`Consumer::release`]): the arbiter keeps a client's slots until the
//! scheduler has sent the packets, which bounds what a client can have queued (Figure 5 of
//! the paper, line 21). The paper's mailbox empties a slot only when it is released, long
//! after it was read, and has no counter: see `mailbox.rs` for why this one differs.
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
