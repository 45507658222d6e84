//! The libc glue of pspat-io: the only module allowed `unsafe` code.
//!
//! Each function or type here wraps one family of system calls behind a safe interface;
//! every `unsafe` block states why it is sound. The rest of the crate is safe Rust.

#![allow(unsafe_code)]

mod affinity;
mod clock;
mod link;
mod membarrier;
mod mmsg;

pub(crate) use affinity::{allowed_cpus, pin_current_thread, set_timer_slack};

pub(crate) use clock::{monotonic_ns, realtime_ns};
pub(crate) use link::{flags_of, index_of};
pub(crate) use membarrier::{private_expedited, register_private_expedited};
pub(crate) use mmsg::{
    getsockopt_int, set_opt, set_rcvbuf, set_timestamps, single_iov, RecvBatch, SendBatch,
};
