//! The payload of pspat's synthetic packets: a fixed header, then zeros.
//!
//! Every UDP datagram the `udp` backend sends, and every frame the `pcap` backend writes,
//! carries this payload, so a receiver (in another process or namespace) can tell which
//! client and flow a packet came from, detect loss and reordering from `seq`, and compute
//! one-way latency from `submit_ns` / `depart_ns` (both on the engine clock,
//! [`crate::clock`], which is CLOCK_MONOTONIC and so comparable across processes on the
//! same host).
//!
//! # Layout (version 1, [`HEADER_LEN`] = 40 bytes, all fields little-endian)
//!
//! | offset | size | field        | meaning                                              |
//! |-------:|-----:|--------------|------------------------------------------------------|
//! |      0 |    4 | magic        | the bytes `P S P T` ([`MAGIC`])                      |
//! |      4 |    2 | version      | [`VERSION`] (1)                                      |
//! |      6 |    2 | header_len   | [`HEADER_LEN`] (40); padding starts here             |
//! |      8 |    4 | client       | [`Pkt::client`]                                      |
//! |     12 |    4 | flow         | [`Pkt::flow`]                                        |
//! |     16 |    4 | seq          | [`Pkt::seq`]                                         |
//! |     20 |    4 | wire_len     | [`Pkt::len`]: the length the scheduler charged       |
//! |     24 |    8 | submit_ns    | [`Pkt::submit_ns`]                                   |
//! |     32 |    8 | depart_ns    | [`Pkt::depart_ns`]                                   |
//! |     40 |  ... | padding      | zeros, up to [`payload_len`]`(wire_len)` bytes        |
//!
//! `wire_len` is an addition to the fields the issue lists: it is what lets a receiver
//! tell the scheduled length from the sent one when the two differ (see below), and check
//! that a datagram arrived whole.
//!
//! # Lengths
//!
//! [`Pkt::len`] is the length on the wire: Ethernet (14) + IPv4 (20) + UDP (8) + payload,
//! without preamble or FCS. The payload is therefore `len - 42` bytes ([`WIRE_OVERHEAD`]),
//! **raised to [`HEADER_LEN`] when smaller**: a packet scheduled shorter than
//! [`MIN_WIRE_LEN`] (82) bytes is sent 82 bytes long, longer than the scheduler charged for
//! it. An engine that wants the wire to match the schedule exactly refuses such lengths
//! when it is built (check `len >= MIN_WIRE_LEN`). Lengths above [`MAX_WIRE_LEN`] (65549:
//! the largest IPv4 datagram, 65535 bytes, plus the Ethernet header) cannot be sent in one
//! UDP datagram nor written as one IPv4 frame; the backends refuse them (see
//! [`crate::udp`] and [`crate::pcap`]).
//!
//! The payload length is computed with the IPv4 overhead whatever the address family, so
//! a datagram sent over IPv6 carries the same payload (and is 20 bytes longer on the wire).
//!
//! Decoding checks the magic, the version, the header length and (in [`decode`]) that the
//! buffer is exactly as long as `wire_len` says; it does not read the padding.

use crate::Pkt;

/// The first four payload bytes: `P S P T`, read as a little-endian `u32`.
pub const MAGIC: u32 = u32::from_le_bytes(*b"PSPT");
/// Version of the header layout described in this module.
pub const VERSION: u16 = 1;
/// Size of the header in bytes; the smallest payload pspat sends.
pub const HEADER_LEN: usize = 40;
/// Bytes of the frame before the payload: Ethernet 14 + IPv4 20 + UDP 8.
pub const WIRE_OVERHEAD: u32 = 14 + 20 + 8;
/// The shortest [`Pkt::len`] that is sent exactly as long as scheduled (82): below it the
/// payload is raised to [`HEADER_LEN`] bytes.
pub const MIN_WIRE_LEN: u32 = WIRE_OVERHEAD + HEADER_LEN as u32;
/// The longest [`Pkt::len`] the backends can send (65549): an IPv4 datagram of 65535 bytes
/// (its maximum) in an Ethernet frame.
pub const MAX_WIRE_LEN: u32 = 14 + 65535;
/// The largest payload: [`payload_len`]`(`[`MAX_WIRE_LEN`]`)` = 65507 bytes, the UDP maximum
/// over IPv4.
pub const MAX_PAYLOAD_LEN: usize = (MAX_WIRE_LEN - WIRE_OVERHEAD) as usize;

/// The decoded header of a pspat payload (the fields of the [`Pkt`] it was built from).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// [`Pkt::client`].
    pub client: u32,
    /// [`Pkt::flow`].
    pub flow: u32,
    /// [`Pkt::seq`].
    pub seq: u32,
    /// [`Pkt::len`]: the scheduled length on the wire, which may be shorter than the sent
    /// one (see the module documentation).
    pub wire_len: u32,
    /// [`Pkt::submit_ns`], engine clock.
    pub submit_ns: u64,
    /// [`Pkt::depart_ns`], engine clock.
    pub depart_ns: u64,
}

impl Header {
    /// The header of `pkt`'s payload.
    pub fn of(pkt: &Pkt) -> Self {
        Self {
            client: pkt.client,
            flow: pkt.flow,
            seq: pkt.seq,
            wire_len: pkt.len,
            submit_ns: pkt.submit_ns,
            depart_ns: pkt.depart_ns,
        }
    }

    /// How long the payload carrying this header is: [`payload_len`]`(self.wire_len)`.
    pub fn payload_len(&self) -> usize {
        payload_len(self.wire_len)
    }
}

/// Why a buffer is not a pspat payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// Fewer bytes than the header needs.
    #[error("pspat payload too short: {got} bytes, the header alone is {HEADER_LEN}")]
    Short {
        /// Bytes available.
        got: usize,
    },
    /// The first four bytes are not [`MAGIC`]: not a pspat packet.
    #[error("not a pspat payload: magic {got:#010x}, expected {MAGIC:#010x} (\"PSPT\")")]
    BadMagic {
        /// The four bytes read as a little-endian `u32`.
        got: u32,
    },
    /// A header version this code does not know.
    #[error("pspat payload version {got}, this build reads version {VERSION}")]
    BadVersion {
        /// The version found.
        got: u16,
    },
    /// The header length field disagrees with the version's layout.
    #[error("pspat payload header length {got}, version {VERSION} has {HEADER_LEN}")]
    BadHeaderLen {
        /// The header length found.
        got: u16,
    },
    /// The buffer is not as long as the header's `wire_len` implies (truncated or padded
    /// datagram).
    #[error("pspat payload of {got} bytes, its header (wire_len {wire_len}) implies {expected}")]
    LengthMismatch {
        /// `wire_len` from the header.
        wire_len: u32,
        /// [`payload_len`]`(wire_len)`.
        expected: usize,
        /// Bytes in the buffer.
        got: usize,
    },
    /// The buffer given to [`encode`] cannot hold the payload.
    #[error("buffer of {got} bytes for a pspat payload of {need}")]
    BufferTooSmall {
        /// Bytes the payload needs.
        need: usize,
        /// Bytes in the buffer.
        got: usize,
    },
}

/// Payload bytes of a packet `wire_len` bytes long on the wire: `wire_len - 42`, but at
/// least [`HEADER_LEN`]. Not capped: lengths above [`MAX_WIRE_LEN`] give payloads longer
/// than UDP can carry, which the backends refuse.
#[inline]
pub fn payload_len(wire_len: u32) -> usize {
    (wire_len.saturating_sub(WIRE_OVERHEAD) as usize).max(HEADER_LEN)
}

/// The [`HEADER_LEN`] header bytes of `pkt`'s payload.
#[inline]
pub fn encode_header(pkt: &Pkt) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[6..8].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
    h[8..12].copy_from_slice(&pkt.client.to_le_bytes());
    h[12..16].copy_from_slice(&pkt.flow.to_le_bytes());
    h[16..20].copy_from_slice(&pkt.seq.to_le_bytes());
    h[20..24].copy_from_slice(&pkt.len.to_le_bytes());
    h[24..32].copy_from_slice(&pkt.submit_ns.to_le_bytes());
    h[32..40].copy_from_slice(&pkt.depart_ns.to_le_bytes());
    h
}

/// Writes `pkt`'s whole payload (header, then zeros) at the start of `buf` and returns
/// its length, [`payload_len`]`(pkt.len)`. Bytes of `buf` after it are left alone.
pub fn encode(pkt: &Pkt, buf: &mut [u8]) -> Result<usize, PayloadError> {
    let need = payload_len(pkt.len);
    let got = buf.len();
    let out = buf
        .get_mut(..need)
        .ok_or(PayloadError::BufferTooSmall { need, got })?;
    out[..HEADER_LEN].copy_from_slice(&encode_header(pkt));
    out[HEADER_LEN..].fill(0);
    Ok(need)
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

/// Reads the header at the start of `buf`, whatever follows it: for captures truncated
/// after the header, or receivers that read only the header (the datagram's length then
/// has to be checked against [`Header::payload_len`] separately).
pub fn decode_header(buf: &[u8]) -> Result<Header, PayloadError> {
    if buf.len() < HEADER_LEN {
        return Err(PayloadError::Short { got: buf.len() });
    }
    let magic = u32_at(buf, 0);
    if magic != MAGIC {
        return Err(PayloadError::BadMagic { got: magic });
    }
    let version = u16::from_le_bytes([buf[4], buf[5]]);
    if version != VERSION {
        return Err(PayloadError::BadVersion { got: version });
    }
    let header_len = u16::from_le_bytes([buf[6], buf[7]]);
    if usize::from(header_len) != HEADER_LEN {
        return Err(PayloadError::BadHeaderLen { got: header_len });
    }
    Ok(Header {
        client: u32_at(buf, 8),
        flow: u32_at(buf, 12),
        seq: u32_at(buf, 16),
        wire_len: u32_at(buf, 20),
        submit_ns: u64_at(buf, 24),
        depart_ns: u64_at(buf, 32),
    })
}

/// Decodes a whole payload: [`decode_header`], then checks that `buf` is exactly
/// [`payload_len`]`(wire_len)` bytes long.
pub fn decode(buf: &[u8]) -> Result<Header, PayloadError> {
    let h = decode_header(buf)?;
    check_len(&h, buf.len())?;
    Ok(h)
}

/// Checks that a payload of `got` bytes is as long as header `h` says.
pub fn check_len(h: &Header, got: usize) -> Result<(), PayloadError> {
    let expected = h.payload_len();
    if got != expected {
        return Err(PayloadError::LengthMismatch {
            wire_len: h.wire_len,
            expected,
            got,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pkt(len: u32) -> Pkt {
        Pkt {
            len,
            client: 0x0102_0304,
            flow: 0x0a0b_0c0d,
            seq: 7,
            submit_ns: 0x1122_3344_5566_7788,
            depart_ns: 0x99aa_bbcc_ddee_ff00,
        }
    }

    #[test]
    fn constants_follow_from_the_headers() {
        assert_eq!(WIRE_OVERHEAD, 42);
        assert_eq!(MIN_WIRE_LEN, 82);
        assert_eq!(MAX_PAYLOAD_LEN, 65507); // 65535 - 20 (IPv4) - 8 (UDP)
        assert_eq!(&MAGIC.to_le_bytes(), b"PSPT");
    }

    #[test]
    fn lengths_below_the_header_are_raised() {
        assert_eq!(payload_len(1), HEADER_LEN);
        assert_eq!(payload_len(42), HEADER_LEN);
        assert_eq!(payload_len(64), HEADER_LEN);
        assert_eq!(payload_len(81), HEADER_LEN);
        assert_eq!(payload_len(82), 40);
        assert_eq!(payload_len(83), 41);
        assert_eq!(payload_len(1514), 1472);
        assert_eq!(payload_len(MAX_WIRE_LEN), MAX_PAYLOAD_LEN);
    }

    #[test]
    fn header_bytes_at_documented_offsets() {
        let h = encode_header(&pkt(1500));
        assert_eq!(&h[0..4], b"PSPT");
        assert_eq!(&h[4..8], &[1, 0, 40, 0]);
        assert_eq!(&h[8..12], &[4, 3, 2, 1]);
        assert_eq!(&h[12..16], &[0x0d, 0x0c, 0x0b, 0x0a]);
        assert_eq!(&h[16..20], &[7, 0, 0, 0]);
        assert_eq!(&h[20..24], &[0xdc, 0x05, 0, 0]); // 1500
        assert_eq!(
            &h[24..32],
            &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
        );
        assert_eq!(
            &h[32..40],
            &[0x00, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99]
        );
    }

    #[test]
    fn encode_pads_with_zeros_and_leaves_the_rest() {
        let mut buf = [0xffu8; 200];
        let n = encode(&pkt(150), &mut buf).unwrap();
        assert_eq!(n, 108);
        assert!(buf[HEADER_LEN..108].iter().all(|&b| b == 0));
        assert!(buf[108..].iter().all(|&b| b == 0xff));
        assert_eq!(decode(&buf[..n]).unwrap(), Header::of(&pkt(150)));
    }

    #[test]
    fn encode_refuses_a_short_buffer() {
        let mut buf = [0u8; 107];
        assert_eq!(
            encode(&pkt(150), &mut buf),
            Err(PayloadError::BufferTooSmall {
                need: 108,
                got: 107
            })
        );
    }

    #[test]
    fn decode_names_what_is_wrong() {
        let p = pkt(100);
        let mut buf = vec![0u8; 58];
        encode(&p, &mut buf).unwrap();
        assert_eq!(decode(&buf[..39]), Err(PayloadError::Short { got: 39 }));
        assert_eq!(
            decode(&buf[..57]),
            Err(PayloadError::LengthMismatch {
                wire_len: 100,
                expected: 58,
                got: 57
            })
        );
        assert_eq!(decode_header(&buf[..40]), Ok(Header::of(&p)));
        let mut bad = buf.clone();
        bad[0] = b'Q';
        assert!(matches!(decode(&bad), Err(PayloadError::BadMagic { .. })));
        let mut bad = buf.clone();
        bad[4] = 2;
        assert_eq!(decode(&bad), Err(PayloadError::BadVersion { got: 2 }));
        let mut bad = buf.clone();
        bad[6] = 41;
        assert_eq!(decode(&bad), Err(PayloadError::BadHeaderLen { got: 41 }));
        let msg = PayloadError::Short { got: 3 }.to_string();
        assert!(msg.contains("too short") && msg.contains('3'), "{msg}");
    }

    proptest! {
        #[test]
        fn round_trip(len in 1u32..4000, client: u32, flow: u32, seq: u32,
                      submit_ns: u64, depart_ns: u64) {
            let p = Pkt { len, client, flow, seq, submit_ns, depart_ns };
            let mut buf = vec![0xa5u8; 4000];
            let n = encode(&p, &mut buf).unwrap();
            prop_assert_eq!(n, ((len as usize).saturating_sub(42)).max(40));
            prop_assert!(buf[HEADER_LEN..n].iter().all(|&b| b == 0));
            prop_assert_eq!(decode(&buf[..n]), Ok(Header::of(&p)));
        }

        /// Arbitrary bytes never make decode panic, and whatever it accepts re-encodes to
        /// the same header bytes.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120),
                               keep_header: bool) {
            let mut bytes = bytes;
            if keep_header && bytes.len() >= 8 {
                bytes[..8].copy_from_slice(&[b'P', b'S', b'P', b'T', 1, 0, 40, 0]);
            }
            if let Ok(h) = decode_header(&bytes) {
                let p = Pkt { len: h.wire_len, client: h.client, flow: h.flow, seq: h.seq,
                              submit_ns: h.submit_ns, depart_ns: h.depart_ns };
                prop_assert_eq!(&encode_header(&p)[..], &bytes[..HEADER_LEN]);
            }
            let _ = decode(&bytes);
        }

        /// Flipping any bit of the fixed part (magic, version, header length) is caught.
        #[test]
        fn corrupt_fixed_part_is_rejected(bit in 0usize..64, len in 82u32..300) {
            let mut buf = vec![0u8; payload_len(len)];
            encode(&pkt(len), &mut buf).unwrap();
            buf[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(decode(&buf).is_err());
        }
    }
}
