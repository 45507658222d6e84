//! pspat-shaper: a transparent shaper between two interfaces (a bump in the wire), as a
//! library. `pspat shape` is this crate behind a command line.
//!
//! ```text
//!   input ──AF_PACKET RX ring (fanout)──> RX thread k = PSPAT client k
//!                                            │ frame -> pool slot, classify (rules)
//!                                            v
//!                               mailbox k ──> arbiter (dummynet service: instances,
//!                                            │  queues, one emulated link each)
//!                                            v
//!                                  transmitter (arbiter / dispatchers / the client)
//!                                            │ slot -> frame, sendmmsg (FrameTx)
//!   output <──AF_PACKET TX (qdisc bypass)────┘
//!   output ──RX──> reverse thread ──TX──> input   (unshaped, so replies and ARP pass)
//! ```
//!
//! ```no_run
//! # fn main() -> Result<(), pspat_shaper::ShaperError> {
//! use pspat_shaper::{live_view, Shaper, ShaperConfig};
//!
//! let shaper = Shaper::start(ShaperConfig::new("veth1", "veth2", "shaper.ipfw"))?;
//! let before = shaper.snapshot();
//! std::thread::sleep(std::time::Duration::from_secs(1));
//! println!("{}", live_view(&before, &shaper.snapshot()));
//! let report = shaper.stop();
//! println!("{report}\n{}", report.to_json());
//! # Ok(())
//! # }
//! ```
//!
//! [`Shaper::start`] opens the sockets first (a missing capability or interface is reported
//! before anything runs), then starts the engine (`pspat-engine`, with the configuration
//! file's dummynet-style schedulers, queues and rules) and the threads; [`Shaper::snapshot`]
//! reads the counters, [`live_view`] shows two snapshots' difference,
//! [`Shaper::reconfigure`] and [`Shaper::poll_reload`] change the configuration while it
//! runs, and [`Shaper::stop`] returns the final [`Report`].
//!
//! **Accounting.** Every frame taken from the ring is accounted: transmitted, dropped by
//! the rules (denied, no rule, malformed), dropped by the scheduler (queue or instance
//! limit, with the reason), refused for lack of room (mailbox, frame pool, too long for the
//! output), or still queued at the end (reported). The kernel's own ring overruns are read
//! from PACKET_STATISTICS. [`Report::unaccounted`] is what is none of these: 0.
//!
//! **Offloads.** Both sockets carry a virtio-net header before each frame
//! (`PACKET_VNET_HDR`, `pspat_io::afpacket::vnet`), so a frame crosses the shaper in the
//! offload state it arrived in, as it would cross the kernel's bridge: a checksum a local
//! sender left to a veth's "hardware" stays partial and is finished (or trusted) by whoever
//! is next. Without the header ([`ShaperConfig::sw_checksum`], or a kernel before 5.1) the
//! receiving thread finishes such checksums in software (`pspat_io::afpacket::csum`), and
//! the receiver behind the shaper then verifies each one again.
//!
//! | file | concept |
//! |---|---|
//! | `config.rs` | [`ShaperConfig`]: the options, their defaults and checks |
//! | `error.rs` | [`ShaperError`]: why it did not start |
//! | `shaper.rs` | [`Shaper`]: start, snapshot, reconfigure, stop |
//! | `rx.rs` | the receiving threads (PSPAT clients) |
//! | `image.rs` | a received frame as the output sends it (tag, header, checksum) |
//! | `reverse.rs` | the unshaped reverse path |
//! | `counters.rs` | the shaper's counters and their totals |
//! | `link.rs` | riding through link faults: [`LinkTotals`] |
//! | `live.rs` | [`live_view`] |
//! | `report.rs` | [`Report`]: the final account, as text and JSON |
//!
//! Needs `CAP_NET_RAW` (AF_PACKET). The tests that shape real traffic (`tests/`) build
//! network namespaces and need root.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod counters;
mod error;
mod image;
mod link;
mod live;
mod report;
mod reverse;
mod rx;
mod shaper;

pub use config::ShaperConfig;
pub use counters::{EngineTotals, ReverseTotals, RxTotals};
pub use error::ShaperError;
pub use link::LinkTotals;
pub use live::live_view;
pub use pspat_engine::reload::Reload;
pub use report::Report;
pub use shaper::{ChecksumOffload, MaxLenRaised, Shaper, Snapshot};
