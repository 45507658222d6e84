//! The `afpacket` backend: every scheduled packet becomes an Ethernet/IPv4/UDP frame sent
//! on a network interface through a [`TxSocket`] per sending thread.
//!
//! # The frames
//!
//! | field              | value                                                      |
//! |--------------------|------------------------------------------------------------|
//! | destination MAC    | [`AfPacket::dst_mac`], default broadcast                   |
//! | source MAC         | [`AfPacket::src_mac`], default the interface's             |
//! | EtherType          | 0x0800 (IPv4)                                              |
//! | IPv4               | no options, DF, TTL 64, id = `seq`'s low 16 bits, checksum |
//! | IPv4 addresses     | [`AfPacket::src_ip`] > [`AfPacket::dst_ip`] (10.0.0.1 > 10.0.0.2) |
//! | UDP ports          | [`AfPacket::src_port`] > [`AfPacket::dst_port`] (9000 > 9000) |
//! | UDP checksum       | 0 (none: allowed over IPv4, and it spares a pass over the payload) |
//! | payload            | [`crate::payload`]: the 40-byte header, then zeros         |
//!
//! Lengths follow [`crate::payload`], like the `udp` and `pcap` backends: the frame is
//! 42 + [`payload::payload_len`]`(len)` bytes, which is `Pkt::len` itself from
//! [`payload::MIN_WIRE_LEN`] (82) up, and 82 below. A frame longer than the interface's
//! MTU + 14 cannot be sent: `send` stops before it (a [`SendError::Config`] naming the MTU
//! when it is the first of the batch).
//!
//! # The data path
//!
//! Each sender owns a buffer of [`BATCH`] frame slots of MTU + 14 bytes, zeroed once when
//! it is opened. Per packet only the first 82 bytes of its slot are written (the headers,
//! the IPv4 checksum from a precomputed partial sum, and the payload header); the zeros
//! after them are never rewritten, since nothing else writes a slot. No allocation, one
//! sendmmsg(2) per [`BATCH`] packets.

use std::net::Ipv4Addr;
use std::os::fd::AsFd;

use super::tx::frame_refused;
use super::{resolve, sys, AfPacketError, AfterRefusal, TxOptions, TxSocket, BATCH};
use crate::backend::{Backend, SendError, Sender};
use crate::payload::{self, HEADER_LEN, MAX_WIRE_LEN, WIRE_OVERHEAD};
use crate::Pkt;

/// Default source address: 10.0.0.1.
pub const DEFAULT_SRC_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Default destination address: 10.0.0.2.
pub const DEFAULT_DST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Default source and destination UDP port: 9000 (the `udp` backend's).
pub const DEFAULT_PORT: u16 = crate::udp::DEFAULT_PORT;

/// Bytes written per frame: the headers and the payload header.
const HEAD: usize = WIRE_OVERHEAD as usize + HEADER_LEN;

/// Sends synthetic frames on one interface (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfPacket {
    /// The interface.
    pub ifname: String,
    /// Destination MAC (default ff:ff:ff:ff:ff:ff).
    pub dst_mac: [u8; 6],
    /// Source MAC (default: the interface's address).
    pub src_mac: [u8; 6],
    /// IPv4 source address.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination address.
    pub dst_ip: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// How each sender's socket is opened.
    pub tx: TxOptions,
}

impl AfPacket {
    /// The defaults for interface `ifname`, which must exist and be an Ethernet (or
    /// loopback) interface; its MAC address becomes the source. Needs no privilege: the
    /// sockets are opened by [`Backend::open`].
    pub fn new(ifname: &str) -> Result<Self, AfPacketError> {
        let op = "afpacket backend";
        let (cname, _) = resolve(ifname, op)?;
        let fd = sys::inet_socket()
            .map_err(|e| AfPacketError::os(ifname, "afpacket backend: socket for ioctl", e))?;
        let (hwtype, mac) = sys::if_hwaddr(fd.as_fd(), &cname)
            .map_err(|e| AfPacketError::os(ifname, "ioctl SIOCGIFHWADDR", e))?;
        if hwtype != libc::ARPHRD_ETHER && hwtype != libc::ARPHRD_LOOPBACK {
            return Err(AfPacketError::config(
                ifname,
                op,
                format!(
                    "not an Ethernet interface (hardware type {hwtype}): frames would be garbled"
                ),
            ));
        }
        Ok(Self {
            ifname: ifname.to_owned(),
            dst_mac: [0xff; 6],
            src_mac: mac,
            src_ip: DEFAULT_SRC_IP,
            dst_ip: DEFAULT_DST_IP,
            src_port: DEFAULT_PORT,
            dst_port: DEFAULT_PORT,
            tx: TxOptions::default(),
        })
    }

    /// The 42 header bytes every frame starts with, with the per-packet fields (IPv4
    /// length, id, checksum; UDP length) zero.
    fn template(&self) -> [u8; 42] {
        let mut t = [0u8; 42];
        t[0..6].copy_from_slice(&self.dst_mac);
        t[6..12].copy_from_slice(&self.src_mac);
        t[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut t[14..34];
        ip[0] = 0x45; // version 4, 5 words
        ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF, offset 0
        ip[8] = 64; // TTL
        ip[9] = 17; // UDP
        ip[12..16].copy_from_slice(&self.src_ip.octets());
        ip[16..20].copy_from_slice(&self.dst_ip.octets());
        t[34..36].copy_from_slice(&self.src_port.to_be_bytes());
        t[36..38].copy_from_slice(&self.dst_port.to_be_bytes());
        t
    }
}

impl Backend for AfPacket {
    fn name(&self) -> &'static str {
        "afpacket"
    }

    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        let sock = TxSocket::open(&self.ifname, &self.tx)?;
        let mtu = sock.mtu()?;
        let max_frame = (mtu as usize + 14).min(MAX_WIRE_LEN as usize);
        if max_frame < HEAD {
            return Err(SendError::Config(format!(
                "afpacket backend on {}: MTU {mtu} is too small for a {HEAD}-byte frame",
                self.ifname
            )));
        }
        let template = self.template();
        let ip_sum = sum16(0, &template[14..34]);
        Ok(Box::new(AfPacketSender {
            sock,
            mtu,
            max_frame,
            slots: vec![0u8; BATCH * max_frame].into_boxed_slice(),
            lens: [0; BATCH],
            template,
            ip_sum,
        }))
    }
}

/// Adds the big-endian 16-bit words of `bytes` (even length) to `sum`.
fn sum16(mut sum: u32, bytes: &[u8]) -> u32 {
    for w in bytes.chunks_exact(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    sum
}

/// One's complement of the folded one's-complement sum.
fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

struct AfPacketSender {
    sock: TxSocket,
    mtu: u32,
    /// Longest frame: MTU + 14, at most [`MAX_WIRE_LEN`]; the size of a slot.
    max_frame: usize,
    /// [`BATCH`] slots of `max_frame` bytes; past [`HEAD`] they stay zero.
    slots: Box<[u8]>,
    lens: [usize; BATCH],
    template: [u8; 42],
    /// One's-complement sum of the template's IPv4 header (length, id, checksum zero).
    ip_sum: u32,
}

impl AfPacketSender {
    /// Writes `p`'s headers into slot `i`; the frame is `len` bytes.
    #[inline]
    fn build(&mut self, i: usize, p: &Pkt, len: usize) {
        let payload_len = len - WIRE_OVERHEAD as usize;
        let ip_len = (len - 14) as u16;
        let udp_len = (payload_len + 8) as u16;
        let id = p.seq as u16;
        let f = &mut self.slots[i * self.max_frame..i * self.max_frame + HEAD];
        f[..42].copy_from_slice(&self.template);
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        f[18..20].copy_from_slice(&id.to_be_bytes());
        let sum = fold(self.ip_sum + u32::from(ip_len) + u32::from(id));
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        f[38..40].copy_from_slice(&udp_len.to_be_bytes());
        f[42..HEAD].copy_from_slice(&payload::encode_header(p));
        self.lens[i] = len;
    }
}

impl Sender for AfPacketSender {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, SendError> {
        let mut sent = 0;
        while sent < pkts.len() {
            let chunk = &pkts[sent..pkts.len().min(sent + BATCH)];
            let mut n = 0;
            for p in chunk {
                let len = WIRE_OVERHEAD as usize + payload::payload_len(p.len);
                if len > self.max_frame {
                    break;
                }
                self.build(n, p, len);
                n += 1;
            }
            if n == 0 {
                if sent > 0 {
                    return Ok(sent);
                }
                let p = &chunk[0];
                return Err(SendError::Config(format!(
                    "afpacket backend on {}: packet of {} bytes (client {}, flow {}, seq {}) \
                     longer than the {}-byte frames the interface's MTU {} allows",
                    self.sock.ifname(),
                    p.len,
                    p.client,
                    p.flow,
                    p.seq,
                    self.max_frame,
                    self.mtu
                )));
            }
            let (slots, lens, slot) = (&self.slots, &self.lens, self.max_frame);
            // The packets sent must be the first ones of the batch (`Sender::send`): the
            // batch ends at a refused frame.
            let mut refusal = None;
            let done = self.sock.send_frames(
                n,
                |i| &slots[i * slot..i * slot + lens[i]],
                |i, e| {
                    refusal = Some((i, e));
                    AfterRefusal::Stop
                },
            );
            sent += done.sent;
            if let Some((i, source)) = refusal.filter(|_| sent == 0) {
                return Err(frame_refused(self.sock.ifname(), lens[i], source));
            }
            if done.sent < n {
                return Ok(sent);
            }
        }
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend() -> AfPacket {
        AfPacket {
            ifname: "x".into(),
            dst_mac: [1, 2, 3, 4, 5, 6],
            src_mac: [7, 8, 9, 10, 11, 12],
            src_ip: Ipv4Addr::new(192, 168, 0, 1),
            dst_ip: Ipv4Addr::new(192, 168, 0, 199),
            src_port: 1234,
            dst_port: 80,
            tx: TxOptions::default(),
        }
    }

    /// The checksum of a header whose checksum field is filled verifies to zero, checked
    /// against an independent sum over the whole header (RFC 1071) and against the
    /// worked example of RFC 1071 section 3 style data.
    #[test]
    fn ipv4_checksum_of_the_template_path_verifies() {
        let b = backend();
        let t = b.template();
        let partial = sum16(0, &t[14..34]);
        for (len, seq) in [
            (82usize, 0u32),
            (1514, 0xffff),
            (100, 0x1234_5678),
            (65549, 7),
        ] {
            let ip_len = (len - 14) as u16;
            let mut ip = [0u8; 20];
            ip.copy_from_slice(&t[14..34]);
            ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
            ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
            let c = fold(partial + u32::from(ip_len) + u32::from(seq as u16));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            // Verification: the one's-complement sum of the whole header is 0xffff.
            let mut s: u32 = ip
                .chunks(2)
                .map(|w| u32::from(w[0]) << 8 | u32::from(w[1]))
                .sum();
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            assert_eq!(s, 0xffff, "len {len} seq {seq}");
        }
        // A header from a real capture (Wikipedia's IPv4 checksum example): b861.
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0x00,
            0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(fold(sum16(0, &hdr)), 0xb861);
    }

    #[test]
    fn template_fields() {
        let t = backend().template();
        assert_eq!(&t[0..12], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(&t[12..14], &[0x08, 0x00]);
        assert_eq!(&t[26..30], &[192, 168, 0, 1]);
        assert_eq!(&t[30..34], &[192, 168, 0, 199]);
        assert_eq!(&t[34..38], &[0x04, 0xd2, 0, 80]);
        assert_eq!(&t[40..42], &[0, 0]); // no UDP checksum
    }
}
