//! The `udp` backend: every packet becomes one UDP datagram, a batch goes out in one
//! sendmmsg(2); and [`Receiver`], the other end, for tests and latency checks.
//!
//! # Sending
//!
//! Each [`Backend::open`] creates the calling thread's own socket and preallocated
//! message headers ([`BATCH`] of them); [`Sender::send`] fills them with each packet's
//! payload header ([`payload::encode_header`]) and sends up to [`BATCH`] datagrams per
//! system call, allocating nothing. A datagram's payload is [`payload::payload_len`]`(len)`
//! bytes: the 40-byte header, then zeros that are never copied (every message's second
//! iovec points at one static run of zeros).
//!
//! **Unconnected socket.** The destination is given in every message (`msg_name`) rather
//! than by connect(2). On a connected UDP socket Linux turns an ICMP port-unreachable
//! into an ECONNREFUSED returned by a later, unrelated send, so sending to loopback with
//! no receiver would fail every other batch. An unconnected socket gets no such reports:
//! datagrams nobody receives are dropped silently by the kernel (as they would be by a
//! real network), and the engine is never stopped by the absence of a listener. The price
//! is a route look-up per datagram instead of one per socket.
//!
//! **Blocking socket.** A UDP send blocks only while the socket's send buffer is full of
//! datagrams the device has not taken yet; on loopback, delivery is synchronous and this
//! practically never happens, and on a real interface it is back-pressure from a full
//! queue — the same thing a NIC ring full means. A non-blocking socket would turn it into
//! EAGAIN and drops that depend on kernel timing; blocking lets the sending thread slow
//! down instead, which the engine's statistics then show as late departures.
//!
//! **Lengths.** Packets longer than [`MAX_WIRE_LEN`] do not fit in a UDP datagram: `send`
//! stops before the first such packet (returning how many were sent before it, or a
//! [`SendError::Config`] when it is the first). Engines should refuse them up front.
//! Shorter than [`payload::MIN_WIRE_LEN`] is sent 82 bytes long (see [`crate::payload`]).
//!
//! **Errors.** sendmmsg reports an error only when the first datagram of the call fails;
//! after a partial send, `send` returns the count and the error comes back at the next call
//! (which starts with the datagram that failed).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::Duration;

use crate::backend::{Backend, SendError, Sender};
use crate::payload::{self, Header, PayloadError, MAX_WIRE_LEN};
use crate::sys::{self, RecvBatch, SendBatch};
use crate::{clock, Pkt};

/// The destination port when none is given: 9000.
pub const DEFAULT_PORT: u16 = 9000;
/// The default destination, `127.0.0.1:9000`.
pub const DEFAULT_DEST: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), DEFAULT_PORT);
/// Datagrams per sendmmsg(2) (and per recvmmsg(2) in [`Receiver`]). Longer batches are
/// sent in several calls.
pub const BATCH: usize = 64;

/// Receive buffer [`Receiver::bind`] asks for: 4 MiB.
pub const RECV_BUFFER: usize = 4 << 20;

/// Sends every packet as a UDP datagram to `dest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Udp {
    /// Where datagrams go. Default [`DEFAULT_DEST`] (loopback, port 9000).
    pub dest: SocketAddr,
    /// Local address each sender's socket binds to; `None`: the unspecified address of
    /// `dest`'s family, port 0 (the kernel picks a port per sender). A non-zero port here
    /// allows only one sending thread (a second bind fails with "address in use").
    pub bind: Option<SocketAddr>,
}

impl Default for Udp {
    fn default() -> Self {
        Self::new(DEFAULT_DEST)
    }
}

impl Udp {
    /// Sends to `dest`, from a kernel-chosen port.
    pub fn new(dest: SocketAddr) -> Self {
        Self { dest, bind: None }
    }
}

impl Backend for Udp {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn open(&self, thread: usize) -> Result<Box<dyn Sender>, SendError> {
        let bind = match self.bind {
            Some(b) if b.is_ipv4() != self.dest.is_ipv4() => {
                return Err(SendError::Config(format!(
                    "udp backend: bind address {b} and destination {} are of different \
                     address families",
                    self.dest
                )))
            }
            Some(b) => b,
            None if self.dest.is_ipv4() => (Ipv4Addr::UNSPECIFIED, 0).into(),
            None => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(bind).map_err(|source| SendError::Io {
            what: format!("udp backend, sending thread {thread}: bind to {bind}"),
            source,
        })?;
        Ok(Box::new(UdpSender {
            sock,
            dest: self.dest,
            batch: SendBatch::new(BATCH, self.dest),
        }))
    }
}

struct UdpSender {
    sock: UdpSocket,
    dest: SocketAddr,
    batch: SendBatch,
}

impl Sender for UdpSender {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, SendError> {
        let mut sent = 0;
        while sent < pkts.len() {
            let chunk = &pkts[sent..pkts.len().min(sent + BATCH)];
            let mut n = 0;
            for p in chunk {
                if p.len > MAX_WIRE_LEN {
                    break;
                }
                self.batch
                    .set(n, payload::encode_header(p), payload::payload_len(p.len));
                n += 1;
            }
            if n == 0 {
                if sent > 0 {
                    return Ok(sent);
                }
                return Err(SendError::Config(format!(
                    "udp backend: packet of {} bytes (client {}, flow {}, seq {}) longer \
                     than the {MAX_WIRE_LEN} bytes one UDP/IPv4 datagram can carry",
                    chunk[0].len, chunk[0].client, chunk[0].flow, chunk[0].seq
                )));
            }
            match self.batch.send(self.sock.as_fd(), n) {
                Ok(k) => {
                    sent += k;
                    if k < n {
                        return Ok(sent);
                    }
                }
                Err(_) if sent > 0 => return Ok(sent),
                Err(source) => {
                    return Err(SendError::Io {
                        what: format!("sendmmsg to {}", self.dest),
                        source,
                    })
                }
            }
        }
        Ok(sent)
    }
}

/// A datagram [`Receiver`] took: its header, its length, and when it was received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// The payload header.
    pub header: Header,
    /// UDP payload bytes (equal to `header.payload_len()`, or the datagram would have been
    /// counted as garbled).
    pub payload_len: usize,
    /// When the receive call returned, engine clock ([`clock::now_ns`]); the same for all
    /// the datagrams one call returned. It includes the time the datagram waited in the
    /// socket's receive queue.
    pub recv_ns: u64,
    /// When the kernel received it, engine clock, if the receiver asked for its stamps
    /// ([`Receiver::kernel_timestamps`]): before it waited in any queue of the receiving
    /// host (on a veth pair, when the sending side handed it over).
    pub kernel_ns: Option<u64>,
}

impl Received {
    /// `recv_ns - depart_ns`: how long after its scheduled departure the packet was
    /// received. Negative when a sender transmits ahead of the emulated link.
    pub fn since_depart_ns(&self) -> i64 {
        self.recv_ns.wrapping_sub(self.header.depart_ns) as i64
    }

    /// `recv_ns - submit_ns`: the packet's one-way latency from its submission.
    pub fn since_submit_ns(&self) -> i64 {
        self.recv_ns.wrapping_sub(self.header.submit_ns) as i64
    }
}

/// The receiving end: a UDP socket that decodes pspat payloads, [`BATCH`] datagrams per
/// recvmmsg(2), keeping only each datagram's first 64 bytes (its real length is still
/// known). Datagrams that are not well-formed pspat payloads, or whose length disagrees
/// with their header, are counted ([`Receiver::garbled`]) and not returned.
///
/// [`Receiver::bind`] asks for a [`RECV_BUFFER`] receive buffer, which the kernel caps at
/// `net.core.rmem_max` (often 208 KiB): a receiver that falls behind a fast sender loses
/// datagrams there ([`Receiver::recv_buffer`] tells the size granted).
pub struct Receiver {
    sock: UdpSocket,
    recv_buffer: usize,
    batch: RecvBatch,
    timeout: Option<Duration>,
    garbled: u64,
    last_garbled: Option<PayloadError>,
}

impl Receiver {
    /// Binds a receiving socket to `addr` (port 0: the kernel picks one, see
    /// [`Receiver::local_addr`]).
    pub fn bind(addr: SocketAddr) -> Result<Self, SendError> {
        let sock = UdpSocket::bind(addr).map_err(|source| SendError::Io {
            what: format!("udp receiver: bind to {addr}"),
            source,
        })?;
        let recv_buffer =
            sys::set_rcvbuf(sock.as_fd(), RECV_BUFFER).map_err(|source| SendError::Io {
                what: format!("udp receiver on {addr}: set SO_RCVBUF"),
                source,
            })?;
        Ok(Self {
            sock,
            recv_buffer,
            batch: RecvBatch::new(BATCH),
            timeout: None,
            garbled: 0,
            last_garbled: None,
        })
    }

    /// The receive buffer the kernel granted, in bytes (its own accounting: about twice
    /// the datagram bytes it can hold, less per-datagram overhead).
    pub fn recv_buffer(&self) -> usize {
        self.recv_buffer
    }

    /// Asks the kernel to stamp every datagram when it receives it
    /// ([`Received::kernel_ns`]; SO_TIMESTAMPNS), so that arrival times do not include
    /// the waits in the receiving host's queues and in the receiver's wake-up. The kernel
    /// turns its receive stamps on for the host a moment after the first socket asks (a
    /// deferred switch): a datagram that arrives before then is stamped when it is read.
    pub fn kernel_timestamps(&mut self) -> Result<(), SendError> {
        sys::set_timestamps(self.sock.as_fd()).map_err(|source| SendError::Io {
            what: "udp receiver: set SO_TIMESTAMPNS".into(),
            source,
        })?;
        self.batch.want_stamps();
        Ok(())
    }

    /// Makes [`Receiver::recv_batch`] return at once (with 0 when nothing is queued)
    /// instead of waiting up to its timeout: for busy-polling receivers, which spin on it
    /// so that a datagram is taken as soon as it is queued, without a wake-up's latency.
    pub fn set_nonblocking(&mut self, on: bool) -> Result<(), SendError> {
        self.sock
            .set_nonblocking(on)
            .map_err(|source| SendError::Io {
                what: "udp receiver: set O_NONBLOCK".into(),
                source,
            })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.sock
            .local_addr()
            .expect("a bound UDP socket has a local address")
    }

    /// Waits up to `timeout` (at least 1 µs; not at all after
    /// [`Receiver::set_nonblocking`]) for a datagram, then takes every datagram already
    /// queued, up to [`BATCH`], and appends the well-formed ones to `out`. Returns how many
    /// datagrams were received (garbled ones included); 0 after a timeout.
    pub fn recv_batch(
        &mut self,
        out: &mut Vec<Received>,
        timeout: Duration,
    ) -> Result<usize, SendError> {
        let timeout = timeout.max(Duration::from_micros(1));
        if self.timeout != Some(timeout) {
            self.sock
                .set_read_timeout(Some(timeout))
                .map_err(|source| SendError::Io {
                    what: "udp receiver: set the receive timeout".into(),
                    source,
                })?;
            self.timeout = Some(timeout);
        }
        let n = self
            .batch
            .recv(self.sock.as_fd())
            .map_err(|source| SendError::Io {
                what: format!("recvmmsg on {}", self.local_addr()),
                source,
            })?;
        // the kernel's stamps are on CLOCK_REALTIME: the offset takes them onto the engine
        // clock (read for each batch: it moves when the wall clock is set or slewed)
        let (recv_ns, offset) = clock::now_and_realtime_offset();
        for i in 0..n {
            let kernel_ns = self.batch.stamp(i).map(|real| real.wrapping_sub(offset));
            let (head, len) = self.batch.datagram(i);
            match payload::decode_header(head).and_then(|h| payload::check_len(&h, len).map(|()| h))
            {
                Ok(header) => out.push(Received {
                    header,
                    payload_len: len,
                    recv_ns,
                    kernel_ns,
                }),
                Err(e) => {
                    self.garbled += 1;
                    self.last_garbled = Some(e);
                }
            }
        }
        Ok(n)
    }

    /// Datagrams received so far that were not well-formed pspat payloads.
    pub fn garbled(&self) -> u64 {
        self.garbled
    }

    /// Why the last garbled datagram was rejected.
    pub fn last_garbled(&self) -> Option<PayloadError> {
        self.last_garbled
    }
}
