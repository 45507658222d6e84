//! [`TxSocket`]: whole Ethernet frames out of one interface, [`BATCH`] per sendmmsg(2).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use super::{resolve, sys, AfPacketError};

/// Frames per sendmmsg(2); longer batches take several calls.
pub const BATCH: usize = 64;

/// Retries of a batch the device refused (ENOBUFS / EAGAIN) before giving up on it: the
/// first [`SPINS`] after a spin-loop hint, the rest after a `yield_now`.
const RETRIES: u32 = 8;
const SPINS: u32 = 4;

/// How a [`TxSocket`] is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxOptions {
    /// PACKET_QDISC_BYPASS: hand frames straight to the driver (default `true`; see the
    /// module documentation for what changes).
    pub qdisc_bypass: bool,
    /// SO_SNDBUF in bytes (the kernel caps it at `net.core.wmem_max` and doubles it);
    /// `None` keeps the system default.
    pub sndbuf: Option<usize>,
    /// PACKET_VNET_HDR: every frame given to [`TxSocket::send_batch`] starts with a
    /// virtio-net header giving its offload state (see [`super::vnet`]); default `false`.
    pub vnet_hdr: bool,
}

impl Default for TxOptions {
    fn default() -> Self {
        Self {
            qdisc_bypass: true,
            sndbuf: None,
            vnet_hdr: false,
        }
    }
}

/// An AF_PACKET socket that sends whole Ethernet frames on one interface.
///
/// Frames are sent as given: the caller writes the Ethernet header (and a VLAN tag if it
/// wants one). Frames longer than the interface's MTU plus the 14-byte Ethernet header
/// are refused by the kernel (EMSGSIZE); check against [`TxSocket::mtu`] first.
pub struct TxSocket {
    fd: OwnedFd,
    ifname: String,
    cname: CString,
    ifindex: u32,
    batch: sys::MsgBatch,
}

impl std::fmt::Debug for TxSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxSocket")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("fd", &self.fd.as_raw_fd())
            .finish()
    }
}

fn transient(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN))
}

impl TxSocket {
    /// Opens a sending socket on `ifname`.
    pub fn open(ifname: &str, opts: &TxOptions) -> Result<Self, AfPacketError> {
        let op = "open AF_PACKET send socket";
        let (cname, ifindex) = resolve(ifname, op)?;
        let fd = sys::packet_socket().map_err(|e| AfPacketError::os(ifname, op, e))?;
        let set = |level: libc::c_int, name: libc::c_int, what: &str, v: libc::c_int| {
            sys::set_int(fd.as_fd(), level, name, v)
                .map_err(|e| AfPacketError::os(ifname, format!("setsockopt {what}"), e))
        };
        if opts.qdisc_bypass {
            let name = libc::PACKET_QDISC_BYPASS;
            set(libc::SOL_PACKET, name, "PACKET_QDISC_BYPASS", 1)?;
        }
        if opts.vnet_hdr {
            set(
                libc::SOL_PACKET,
                libc::PACKET_VNET_HDR,
                "PACKET_VNET_HDR",
                1,
            )?;
        }
        if let Some(bytes) = opts.sndbuf {
            let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
            set(libc::SOL_SOCKET, libc::SO_SNDBUF, "SO_SNDBUF", v)?;
        }
        // Protocol 0: the socket is bound to the interface for sending but receives nothing.
        sys::bind(fd.as_fd(), ifindex, 0)
            .map_err(|e| AfPacketError::os(ifname, "bind the send socket", e))?;
        Ok(Self {
            fd,
            ifname: ifname.to_owned(),
            cname,
            ifindex,
            batch: sys::MsgBatch::new(BATCH),
        })
    }

    /// Sends frames `frame(0)`, ..., `frame(n - 1)` in this order, [`BATCH`] per
    /// sendmmsg(2), and returns how many the kernel took. Allocates nothing.
    ///
    /// - All sent: `Ok(n)`.
    /// - The device refused a frame (ENOBUFS / EAGAIN: its queue is full, with or without
    ///   a qdisc): the call is retried a few times after a short spin or yield, starting with
    ///   that frame; if it is still refused, `Ok(k)` with the `k < n` frames sent before it
    ///   (possibly 0). Frames `k..` were not sent.
    /// - Any other error: `Ok(k)` if `k > 0` frames went out before it (calling again with
    ///   the rest reports it), `Err` if none did.
    ///
    /// Each frame must be at least 14 bytes (an Ethernet header) and at most the MTU + 14,
    /// after the 10-byte virtio-net header that starts it on a socket opened with
    /// [`TxOptions::vnet_hdr`].
    pub fn send_batch<'a>(
        &mut self,
        n: usize,
        frame: impl Fn(usize) -> &'a [u8],
    ) -> Result<usize, AfPacketError> {
        let mut sent = 0;
        let mut retries = 0;
        while sent < n {
            let k = (n - sent).min(BATCH);
            match self.batch.send(self.fd.as_fd(), sent, k, &frame) {
                Ok(m) => {
                    sent += m;
                    retries = 0;
                }
                Err(e) if transient(&e) => {
                    if retries == RETRIES {
                        return Ok(sent);
                    }
                    retries += 1;
                    if retries <= SPINS {
                        for _ in 0..64 {
                            std::hint::spin_loop();
                        }
                    } else {
                        std::thread::yield_now();
                    }
                }
                Err(_) if sent > 0 => return Ok(sent),
                Err(e) => {
                    let len = frame(sent).len();
                    return Err(AfPacketError::os(
                        &self.ifname,
                        format!("sendmmsg (first frame {len} bytes)"),
                        e,
                    ));
                }
            }
        }
        Ok(sent)
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface's current MTU (SIOCGIFMTU): the longest frame is this plus 14.
    pub fn mtu(&self) -> Result<u32, AfPacketError> {
        sys::if_mtu(self.fd.as_fd(), &self.cname)
            .map_err(|e| AfPacketError::os(&self.ifname, "ioctl SIOCGIFMTU", e))
    }
}

impl AsFd for TxSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for TxSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
