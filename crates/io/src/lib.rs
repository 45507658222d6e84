//! pspat-io: how scheduled packets leave pspat.
//!
//! - [`Pkt`]: the descriptor every part of the engine passes around;
//! - [`Backend`] / [`Sender`]: a backend opens one sender per transmitting thread (the
//!   arbiter, each dispatcher, or each client, depending on the hand-off mode), and a
//!   sender transmits batches;
//! - backends: [`null`] (counts, sends nothing), [`udp`] (one datagram per packet,
//!   sendmmsg batches), [`pcap`] (a capture file stamped with the departure times),
//!   [`afpacket`] (Ethernet frames on a network interface; also the raw AF_PACKET
//!   [`afpacket::TxSocket`] and [`afpacket::RxRing`] a shaper is built from);
//!   [`parse_backend`] builds one from a command-line specification;
//! - [`link`]: whether an interface exists and is up (a shaper riding through a flap);
//! - [`clock`]: the engine clock (CLOCK_MONOTONIC ns) all packet times use;
//! - [`payload`]: the header synthetic packets carry, so that a receiver can tell client,
//!   flow, sequence number and times.
//!
//! Lengths: [`payload::MIN_WIRE_LEN`] (82) is the shortest `Pkt::len` sent exactly as
//! long as scheduled, [`payload::MAX_WIRE_LEN`] (65549) the longest the udp and pcap
//! backends accept.
//!
//! The libc glue (clock_gettime, sendmmsg, recvmmsg) is in the private `sys` module, and
//! that of AF_PACKET in `afpacket`'s private `sys` submodule: the only places `unsafe` is
//! allowed.

#![warn(missing_docs)]
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod afpacket;
pub mod backend;
pub mod clock;
pub mod cpu;
pub mod link;
pub mod null;
mod parse;
pub mod payload;
pub mod pcap;
mod pkt;
mod sys;
pub mod udp;

pub use backend::{Backend, SendError, Sender};
pub use parse::{parse_backend, BACKEND_SPECS};
pub use pkt::Pkt;
