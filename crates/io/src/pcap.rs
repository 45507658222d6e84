//! The `pcap` backend: writes every scheduled packet to a pcap file as an
//! Ethernet/IPv4/UDP frame stamped with its departure time, for tshark and Wireshark.
//!
//! This is a debugging output, not the fast path: all sending threads share one file
//! through a mutex, taken once per batch of up to [`BATCH`] packets (the records are built
//! before the lock, so the critical section is one buffered write).
//!
//! # The file
//!
//! - Classic pcap (not pcapng), little-endian, **nanosecond** timestamps (magic
//!   `0xa1b23c4d`; the global header is pcap-file's [`PcapHeader`]), link type Ethernet.
//! - Record timestamp = [`Pkt::depart_ns`] (the departure time on the engine clock,
//!   [`crate::clock`], CLOCK_MONOTONIC) plus [`Pcap::epoch_offset_ns`], the wall clock's
//!   lead over that clock when the file was created: the dates tools show are when the
//!   packets left, and the gaps between them are the engine's own (a wall-clock step
//!   during the run does not move them).
//! - **Truncated capture**: each record holds the first [`CAPLEN`] (128) bytes of the
//!   frame — headers and the whole 40-byte payload header — and `orig_len` is the frame's
//!   full length, so multi-gigabyte runs write 144 bytes per packet. Wireshark marks such
//!   frames "packet size limited during capture", which is the truth.
//! - `snaplen` is [`SNAPLEN`] = 262144, not 65535: frames can be up to [`MAX_WIRE_LEN`]
//!   (65549) long, and pcap-file's reader rejects records whose `orig_len` exceeds the
//!   snaplen. (libpcap and tcpdump use 262144 as their default too.)
//!
//! # The frames
//!
//! The frame of a packet is what the `udp` backend would put on the wire for it: length
//! 42 + [`payload::payload_len`]`(len)`, which is `len` itself when
//! `len >= `[`payload::MIN_WIRE_LEN`] (82) and 82 below that (the payload header does not fit
//! in less; the header's `wire_len` keeps the scheduled length). Longer than
//! [`MAX_WIRE_LEN`] cannot be one IPv4 datagram: `send` stops before such a packet, with a
//! [`SendError::Config`] when it is the first of the batch.
//!
//! | field            | value                                                         |
//! |------------------|---------------------------------------------------------------|
//! | IPv4 source      | [`src_addr`]: `10.a.b.c` = the client's low 24 bits           |
//! | IPv4 destination | [`DST_ADDR`] `10.255.255.254`                                 |
//! | MAC addresses    | `02:00` followed by the IPv4 address (locally administered)   |
//! | IPv4             | no options, DF, TTL 64, id = `seq`'s low 16 bits, checksum    |
//! | UDP source port  | [`src_port`]: `10000 + flow % 55536` (10000..=65535)           |
//! | UDP dest. port   | [`DST_PORT`] 9000                                             |
//! | UDP checksum     | computed (over the zero padding too)                          |
//! | payload          | [`crate::payload`]: header then zeros                         |
//!
//! Clients beyond 2^24 share source addresses and flows beyond 55536 share ports: the
//! payload header always has the full numbers (Wireshark does not decode it; its first
//! bytes read `PSPT`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use pcap_file::pcap::PcapHeader;
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::backend::{Backend, SendError, Sender};
use crate::payload::{self, HEADER_LEN, MAX_WIRE_LEN, WIRE_OVERHEAD};
use crate::Pkt;

/// Bytes of each frame written to the file (the rest is counted in `orig_len` only).
pub const CAPLEN: usize = 128;
/// The file's snaplen (see the module documentation for why not 65535).
pub const SNAPLEN: u32 = 262_144;
/// Packets whose records are built before taking the file's lock once.
pub const BATCH: usize = 64;
/// Destination address of every frame.
pub const DST_ADDR: Ipv4Addr = Ipv4Addr::new(10, 255, 255, 254);
/// Destination UDP port of every frame (the `udp` backend's default port).
pub const DST_PORT: u16 = crate::udp::DEFAULT_PORT;
/// Source ports are `SRC_PORT_BASE + flow % (65536 - SRC_PORT_BASE)`.
pub const SRC_PORT_BASE: u16 = 10_000;

/// Bytes of a record header in the file: ts_sec, ts_nsec, incl_len, orig_len (u32 each).
const RECORD_HEADER: usize = 16;

/// Source address of `client`'s frames: `10.a.b.c` with `a.b.c` its low 24 bits.
pub fn src_addr(client: u32) -> Ipv4Addr {
    let [_, a, b, c] = client.to_be_bytes();
    Ipv4Addr::new(10, a, b, c)
}

/// Source UDP port of `flow`'s frames: `10000 + flow % 55536`.
pub fn src_port(flow: u32) -> u16 {
    let span = 65536 - u32::from(SRC_PORT_BASE);
    SRC_PORT_BASE + (flow % span) as u16
}

fn mac(ip: Ipv4Addr) -> [u8; 6] {
    let [a, b, c, d] = ip.octets();
    [0x02, 0x00, a, b, c, d]
}

/// Adds big-endian 16-bit words of `bytes` (an odd last byte padded with zero) to `sum`.
fn sum16(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

/// One's complement of the one's-complement sum accumulated in `sum`.
fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Builds the first [`CAPLEN`] bytes (or fewer, for a shorter frame) of `pkt`'s frame in
/// `out`; returns the captured length and the full frame length. `pkt.len` must be at
/// most [`MAX_WIRE_LEN`].
fn frame_head(pkt: &Pkt, out: &mut [u8; CAPLEN]) -> (usize, u32) {
    debug_assert!(pkt.len <= MAX_WIRE_LEN);
    let payload_len = payload::payload_len(pkt.len);
    let udp_len = (8 + payload_len) as u16;
    let ip_len = 20 + udp_len;
    let frame_len = WIRE_OVERHEAD + payload_len as u32;
    let (src, dst) = (src_addr(pkt.client), DST_ADDR);

    out.fill(0);
    // Ethernet II.
    out[0..6].copy_from_slice(&mac(dst));
    out[6..12].copy_from_slice(&mac(src));
    out[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    // IPv4, 20 bytes, checksum at 24..26.
    let ip = &mut out[14..34];
    ip[0] = 0x45; // version 4, 5 words
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&(pkt.seq as u16).to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF, offset 0
    ip[8] = 64; // TTL
    ip[9] = 17; // UDP
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let ip_sum = fold(sum16(0, ip));
    ip[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    // UDP, checksum at 40..42.
    out[34..36].copy_from_slice(&src_port(pkt.flow).to_be_bytes());
    out[36..38].copy_from_slice(&DST_PORT.to_be_bytes());
    out[38..40].copy_from_slice(&udp_len.to_be_bytes());
    // Payload header; the padding after it is zeros (already, and outside the capture).
    let header = payload::encode_header(pkt);
    out[42..42 + HEADER_LEN].copy_from_slice(&header);
    // Pseudo-header, UDP header, payload: the zero padding adds nothing to the sum.
    let mut sum = sum16(0, &src.octets());
    sum = sum16(sum, &dst.octets());
    sum += 17 + u32::from(udp_len);
    sum = sum16(sum, &out[34..42]);
    sum = sum16(sum, &header);
    let udp_sum = match fold(sum) {
        0 => 0xffff, // 0 means "no checksum" in UDP over IPv4
        s => s,
    };
    out[40..42].copy_from_slice(&udp_sum.to_be_bytes());
    ((frame_len as usize).min(CAPLEN), frame_len)
}

/// The file all senders write to.
struct Shared {
    out: BufWriter<File>,
}

/// Writes every packet to one pcap file (see the module documentation).
pub struct Pcap {
    path: PathBuf,
    file: Arc<Mutex<Shared>>,
    epoch_offset_ns: u64,
}

impl std::fmt::Debug for Pcap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pcap").field("path", &self.path).finish()
    }
}

fn io_err(what: impl FnOnce() -> String) -> impl FnOnce(std::io::Error) -> SendError {
    move |source| SendError::Io {
        what: what(),
        source,
    }
}

impl Pcap {
    /// Creates (or truncates) the file at `path` and writes the pcap global header.
    pub fn create(path: impl Into<PathBuf>) -> Result<Self, SendError> {
        let path = path.into();
        let file = File::create(&path)
            .map_err(io_err(|| format!("create pcap file {}", path.display())))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
        };
        header.write_to(&mut out).map_err(|e| SendError::Io {
            what: format!("write pcap header to {}", path.display()),
            source: match e {
                pcap_file::PcapError::IoError(e) => e,
                other => std::io::Error::other(other),
            },
        })?;
        // The wall clock (nanoseconds since 1970) less the engine clock, read together.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let epoch_offset_ns = wall.saturating_sub(crate::clock::now_ns());
        Ok(Self {
            path,
            file: Arc::new(Mutex::new(Shared { out })),
            epoch_offset_ns,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What is added to a packet's departure time (CLOCK_MONOTONIC) for its record's
    /// timestamp (since 1970): the wall clock's lead when the file was created.
    pub fn epoch_offset_ns(&self) -> u64 {
        self.epoch_offset_ns
    }
}

impl Backend for Pcap {
    fn name(&self) -> &'static str {
        "pcap"
    }

    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        Ok(Box::new(PcapSender {
            path: self.path.clone(),
            file: Arc::clone(&self.file),
            records: Vec::with_capacity(BATCH * (RECORD_HEADER + CAPLEN)),
            frame: [0; CAPLEN],
            epoch_offset_ns: self.epoch_offset_ns,
        }))
    }
}

struct PcapSender {
    path: PathBuf,
    file: Arc<Mutex<Shared>>,
    /// The records of one batch, built before taking the lock (capacity preallocated).
    records: Vec<u8>,
    frame: [u8; CAPLEN],
    /// [`Pcap::epoch_offset_ns`].
    epoch_offset_ns: u64,
}

impl PcapSender {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A thread that panicked while holding the lock was inside BufWriter::write_all,
        // which leaves the buffer consistent; keep writing.
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write_records(&mut self) -> Result<(), SendError> {
        let mut file = self.lock();
        let res = file.out.write_all(&self.records);
        drop(file);
        res.map_err(io_err(|| {
            format!("write pcap file {}", self.path.display())
        }))
    }
}

impl Sender for PcapSender {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, SendError> {
        let mut done = 0;
        while done < pkts.len() {
            let chunk = &pkts[done..pkts.len().min(done + BATCH)];
            self.records.clear();
            let mut n = 0;
            for p in chunk {
                if p.len > MAX_WIRE_LEN {
                    break;
                }
                let (incl, orig) = frame_head(p, &mut self.frame);
                let ts = p.depart_ns.saturating_add(self.epoch_offset_ns);
                let secs = u32::try_from(ts / 1_000_000_000).unwrap_or(u32::MAX);
                let nsecs = (ts % 1_000_000_000) as u32;
                self.records.extend_from_slice(&secs.to_le_bytes());
                self.records.extend_from_slice(&nsecs.to_le_bytes());
                self.records.extend_from_slice(&(incl as u32).to_le_bytes());
                self.records.extend_from_slice(&orig.to_le_bytes());
                self.records.extend_from_slice(&self.frame[..incl]);
                n += 1;
            }
            if n == 0 {
                if done > 0 {
                    return Ok(done);
                }
                return Err(SendError::Config(format!(
                    "pcap backend: packet of {} bytes (client {}, flow {}, seq {}) longer \
                     than the {MAX_WIRE_LEN}-byte frame of the largest IPv4 datagram",
                    chunk[0].len, chunk[0].client, chunk[0].flow, chunk[0].seq
                )));
            }
            self.write_records()?;
            done += n;
        }
        Ok(done)
    }

    fn flush(&mut self) -> Result<(), SendError> {
        let mut file = self.lock();
        let res = file.out.flush();
        drop(file);
        res.map_err(io_err(|| {
            format!("flush pcap file {}", self.path.display())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_ports() {
        assert_eq!(src_addr(0), Ipv4Addr::new(10, 0, 0, 0));
        assert_eq!(src_addr(5), Ipv4Addr::new(10, 0, 0, 5));
        assert_eq!(src_addr(0x0102_0304), Ipv4Addr::new(10, 2, 3, 4));
        assert_eq!(src_port(0), 10_000);
        assert_eq!(src_port(55_535), 65_535);
        assert_eq!(src_port(55_536), 10_000);
    }

    #[test]
    fn checksums_are_one_complement_sums() {
        // RFC 1071's worked example: words 0001 f203 f4f5 f6f7 sum (folded) to ddf2.
        let sum = sum16(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]);
        assert_eq!(fold(sum), !0xddf2);
        // An odd trailing byte counts as the high byte of a word.
        assert_eq!(sum16(0, &[0x12]), 0x1200);
    }
}
