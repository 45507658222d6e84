//! The synchronisation facade: `--cfg loom` swaps in loom's model-checked atomics and
//! threads, so the activity handshake and the sleep/wake protocol that ship are the ones
//! `tests/loom.rs` explores.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::thread::{current, park, Thread};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::thread::{current, park, Thread};
