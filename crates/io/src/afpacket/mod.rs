//! AF_PACKET: whole Ethernet frames in and out of one Linux interface.
//!
//! The pieces:
//!
//! - [`TxSocket`]: sends frames given as byte slices, up to [`BATCH`] per sendmmsg(2);
//! - [`RxRing`]: receives frames through a ring shared with the kernel, of TPACKET_V3
//!   blocks or TPACKET_V2 frame slots ([`RxMode`]; no system call per frame, one `poll(2)`
//!   per block or frame at most, none while frames keep coming);
//! - [`AfPacket`]: the `afpacket` [`crate::Backend`], which turns scheduled [`crate::Pkt`]s
//!   into Ethernet/IPv4/UDP frames carrying the [`crate::payload`] header and sends them
//!   with a [`TxSocket`] per sending thread;
//! - [`FrameTx`]: the `afpacket-frames` [`crate::Backend`], which sends whole received
//!   frames held in a `pspat_mailbox::FramePool` (the scheduled descriptor names the slot);
//! - [`csum`]: finishing a TCP/UDP checksum a sender left to offload, for frames forwarded
//!   without their virtio-net header ([`vnet`]).
//!
//! [`TxSocket`], [`RxRing`] and [`FrameTx`] are what a transparent shaper (pspat-shaper) is
//! made of: an [`RxRing`] on the input interface, a [`FrameTx`] on the output one.
//!
//! Everything needs `CAP_NET_RAW` (root, or `setcap cap_net_raw+ep <binary>`): without it
//! socket(2) fails and the error says so ([`AfPacketError::Permission`]).
//!
//! # Sending ([`TxSocket`])
//!
//! A `SOCK_RAW` packet socket with protocol 0, bound to the interface: the frame given is
//! sent as is (destination MAC first, no FCS), and the socket receives nothing. Options:
//!
//! - `PACKET_QDISC_BYPASS` ([`TxOptions::qdisc_bypass`], default on): frames go straight to
//!   the driver's transmit function, like pktgen, instead of through the interface's queueing
//!   discipline. pspat *is* the scheduler, so a second one behind it only adds a queue, a
//!   lock and latency. Side effects: a full device queue drops the frame at once (the
//!   send fails with ENOBUFS) instead of queueing it in the qdisc, and frames sent this way
//!   are not seen by packet sockets listening on the interface (tcpdump on the output
//!   interface shows nothing; [`RxOptions::ignore_outgoing`] is then moot).
//! - `SO_SNDBUF` ([`TxOptions::sndbuf`]): how many bytes of frames not yet freed by the
//!   driver the socket may have; a blocking send waits when they are full.
//!
//! - `PACKET_VNET_HDR` ([`TxOptions::vnet_hdr`], default off): each frame starts with a
//!   virtio-net header ([`vnet`]) that gives the packet built from it its offload state, so
//!   a frame received with its checksum still partial leaves partial, as the kernel's own
//!   forwarding would pass it on.
//!
//! The socket is blocking: when the socket's send buffer is full the call waits, which is
//! back-pressure, not loss. ENOBUFS and EAGAIN (the device or its qdisc refused the frame)
//! are retried a few times after a short spin, then [`TxSocket::send_batch`] ends the
//! batch there and the caller decides (the backend counts the rest as drops). A frame the
//! kernel refuses for itself (longer than the interface sends: see [`TxSocket`] for the
//! kernel's rule) is left out and the rest of the batch sent; [`TxSocket::send_frames`]
//! says which, and lets a caller stop there instead.
//!
//! # Receiving ([`RxRing`])
//!
//! A `SOCK_RAW` packet socket in TPACKET_V3 mode, bound to the interface with protocol
//! `ETH_P_ALL` (every frame, whatever its EtherType). The ring is `block_count` blocks of
//! `block_size` bytes, mapped into our memory:
//!
//! ```text
//!  block 0                block 1                      block n-1
//! +----------------------+----------------------+ ... +----------------------+
//! | desc | f0 | f1 | ... | desc | f0 | ...      |     | desc | ...           |
//! +----------------------+----------------------+ ... +----------------------+
//!   desc = tpacket_block_desc: status (KERNEL / USER), number of frames, offset of the
//!          first frame;  fN = tpacket3_hdr (lengths, timestamp, VLAN) + the frame bytes,
//!          each header giving the offset of the next (frames are packed, not slotted)
//! ```
//!
//! The kernel fills the current block with as many frames as fit, then hands it to us
//! (status USER) when it is full or when `block_timeout_ms` passed since it was opened,
//! whichever comes first (so a trickle of frames waits at most about that long, rounded
//! up to the kernel's timer tick). [`RxRing::wait`] polls until the next block is ours,
//! [`RxRing::for_each_frame`] walks every block that is ours in ring order and gives each
//! back (status KERNEL) once its frames were seen. `frame_size` does not slot anything in
//! V3; the kernel only checks it (a multiple of 16, at least the header size, dividing
//! into blocks), and frames up to almost a whole block are captured whole.
//!
//! **Frames** ([`RxMode::Frames`], TPACKET_V2): the same memory cut into slots of
//! `frame_size` bytes (which must divide `block_size`), one frame each, each with its own
//! `tpacket2_hdr` status word. The kernel hands every frame over (and wakes a reader in
//! `poll`) as soon as it is written, so nothing waits for a block to fill or time out: the
//! mode for a low-latency forwarder. A frame longer than its slot is truncated (as a block
//! truncates one longer than itself).
//!
//! **Overrun.** When the kernel needs the next block and it is still ours, it does not
//! overwrite it: it freezes the queue and drops every frame until we release that block.
//! Each freeze is counted in [`RxStats::freezes`], each dropped frame in
//! [`RxStats::drops`]. Nothing already in the ring is lost or corrupted; new frames are.
//! (A ring of frames drops a frame whose slot is still ours; it does not freeze.)
//!
//! Options:
//!
//! - `PACKET_ADD_MEMBERSHIP` / `PACKET_MR_PROMISC` ([`RxOptions::promiscuous`], default on):
//!   a transparent shaper must see frames addressed to any MAC. The membership is the
//!   socket's: the interface leaves promiscuous mode when the last socket asking for it
//!   closes.
//! - `PACKET_IGNORE_OUTGOING` ([`RxOptions::ignore_outgoing`], default on): frames sent
//!   on the same interface (by anyone on this host) are not captured back; without it,
//!   a shaper whose input and output share an interface would loop. With a fanout group
//!   the group's flag `PACKET_FANOUT_FLAG_IGNORE_OUTGOING` is what counts; [`RxRing::open`]
//!   sets both.
//! - `PACKET_FANOUT` ([`RxOptions::fanout`]): several rings (one per receiving thread)
//!   share the interface's frames; [`FanoutMode::Hash`] sends each flow (the kernel's
//!   flow hash: addresses and ports) always to the same ring, which keeps a flow's frames
//!   in order. Every member of a group must ask for the same mode and flags. Not used:
//!   `PACKET_FANOUT_FLAG_DEFRAG`, which would reassemble IP fragments and hand the socket
//!   the reassembled datagram instead of the frames that were on the wire.
//!
//! - `PACKET_VNET_HDR` ([`RxOptions::vnet_hdr`], default off): the kernel writes each
//!   frame's offload state (checksum partial or verified, GSO) in a virtio-net header right
//!   before it ([`Frame::with_vnet`], [`Frame::vnet`]). Linux 5.1 or later.
//!
//! **VLAN tags.** Linux removes the outer VLAN tag of a received frame (802.1Q 0x8100 or
//! 802.1ad 0x88a8) before any packet socket sees it: the driver's VLAN offload does, or
//! else the receive path does it in software (`skb_vlan_untag`), on every kind of
//! interface, veth included; an inner tag stays in the frame. The ring then reports the
//! tag aside in `tp_vlan_tci` and `tp_vlan_tpid`; [`Frame::vlan_tci`] and
//! [`Frame::vlan_tpid`] expose them (the TCI is `Some` exactly when the kernel says it
//! removed a tag), and [`Frame::data`] is the frame without it. A shaper forwarding the
//! frame unchanged must re-insert the 4 bytes `TPID TCI` after the two MAC addresses.
//! Frames handed to a [`TxSocket`] are sent as they are, tags included.
//!
//! **Timestamps.** [`Frame::ts_ns`] is the kernel's software receive timestamp,
//! CLOCK_REALTIME in ns — not the engine clock ([`crate::clock`], CLOCK_MONOTONIC).
//!
//! # The syscalls
//!
//! They live in the private `sys` submodule, the only place of this module with `unsafe`
//! code, each block with its `// SAFETY:` argument.

mod backend;
pub mod csum;
mod frame;
mod frame_tx;
mod rx;
mod sys;
mod tx;
pub mod vnet;

use std::ffi::CString;
use std::io;

pub use backend::{AfPacket, DEFAULT_DST_IP, DEFAULT_PORT, DEFAULT_SRC_IP};
pub use frame::{Frame, ETH_P_8021Q};
pub use frame_tx::FrameTx;
pub use rx::{Fanout, FanoutMode, RxMode, RxOptions, RxRing, RxStats};
pub use tx::{AfterRefusal, BatchSent, TxOptions, TxSocket, BATCH};

/// Why an AF_PACKET operation failed. Every variant names the interface and the
/// operation.
#[derive(Debug, thiserror::Error)]
pub enum AfPacketError {
    /// socket(2) (or another call) was refused: the process lacks `CAP_NET_RAW`.
    #[error(
        "{op} on {ifname}: {source}: AF_PACKET needs CAP_NET_RAW \
         (run as root or `setcap cap_net_raw+ep <binary>`)"
    )]
    Permission {
        /// The interface.
        ifname: String,
        /// What was being done (`open AF_PACKET socket`).
        op: String,
        /// EPERM or EACCES.
        #[source]
        source: io::Error,
    },
    /// No interface has this name (in this network namespace).
    #[error("{op}: no network interface named '{ifname}'")]
    NoSuchInterface {
        /// The name asked for.
        ifname: String,
        /// What was being done.
        op: String,
    },
    /// Options or arguments the kernel would refuse, explained.
    #[error("{op} on {ifname}: {why}")]
    Config {
        /// The interface.
        ifname: String,
        /// What was being done.
        op: String,
        /// What is wrong.
        why: String,
    },
    /// Any other system-call failure.
    #[error("{op} on {ifname}: {source}")]
    Io {
        /// The interface.
        ifname: String,
        /// What was being done (`setsockopt PACKET_RX_RING`, `sendmmsg`).
        op: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl AfPacketError {
    /// Classifies an OS error from `op` on `ifname`.
    pub(crate) fn os(ifname: &str, op: impl Into<String>, source: io::Error) -> Self {
        let (ifname, op) = (ifname.to_owned(), op.into());
        match source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => Self::Permission { ifname, op, source },
            Some(libc::ENODEV | libc::ENXIO) => Self::NoSuchInterface { ifname, op },
            _ => Self::Io { ifname, op, source },
        }
    }

    /// Whether the interface went down or away under the socket (ENETDOWN; ENXIO and
    /// ENODEV, reported as [`AfPacketError::NoSuchInterface`]): a fault of the link that
    /// a shaper waits out, not of the socket (see [`crate::link`]).
    pub fn is_link_fault(&self) -> bool {
        match self {
            Self::NoSuchInterface { .. } => true,
            Self::Io { source, .. } => crate::link::is_link_error(source),
            _ => false,
        }
    }

    pub(crate) fn config(ifname: &str, op: &str, why: impl Into<String>) -> Self {
        Self::Config {
            ifname: ifname.to_owned(),
            op: op.to_owned(),
            why: why.into(),
        }
    }
}

impl From<AfPacketError> for crate::SendError {
    fn from(e: AfPacketError) -> Self {
        match e {
            AfPacketError::Io { ifname, op, source } => crate::SendError::Io {
                what: format!("{op} on {ifname}"),
                source,
            },
            other => crate::SendError::Config(other.to_string()),
        }
    }
}

/// Checks an interface name and resolves it: its C form and its index.
fn resolve(ifname: &str, op: &str) -> Result<(CString, u32), AfPacketError> {
    if ifname.is_empty() {
        return Err(AfPacketError::config(ifname, op, "empty interface name"));
    }
    if ifname.len() >= libc::IFNAMSIZ {
        return Err(AfPacketError::config(
            ifname,
            op,
            format!(
                "interface name of {} bytes; Linux allows at most {}",
                ifname.len(),
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    let cname = CString::new(ifname)
        .map_err(|_| AfPacketError::config(ifname, op, "NUL byte in the interface name"))?;
    let index = sys::if_index(&cname).map_err(|e| match e.raw_os_error() {
        // if_nametoindex reports an unknown name as ENODEV.
        Some(libc::ENODEV) | Some(libc::ENXIO) => AfPacketError::NoSuchInterface {
            ifname: ifname.to_owned(),
            op: op.to_owned(),
        },
        _ => AfPacketError::os(ifname, format!("{op}: look up the interface"), e),
    })?;
    Ok((cname, index))
}
