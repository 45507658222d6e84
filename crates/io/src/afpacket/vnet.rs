//! The virtio-net header (`struct virtio_net_hdr`, 10 bytes) that AF_PACKET puts in front
//! of each frame when a socket asks for `PACKET_VNET_HDR`.
//!
//! It carries the offload state the kernel keeps beside a packet's bytes: whether the
//! TCP/UDP checksum is still to be finished (`NEEDS_CSUM`, with where the checksummed part
//! starts and where the checksum field is) and whether the packet is a GSO super-frame to
//! be cut into segments. A receive ring with the header tells a forwarder what state each
//! frame is in; a send socket with it restores that state on the way out. So a frame that
//! a local socket sent through a veth pair with its checksum left to "hardware" crosses a
//! userspace forwarder as it crosses the kernel's bridge: still partial, and finished (or
//! trusted) by whoever is next, instead of being summed in software twice (once by the
//! forwarder, once more by the receiving socket, which must verify a checksum it cannot
//! trust).
//!
//! Receive: since Linux 5.1 a TPACKET_V3 ring writes the header in the 10 bytes right
//! before each frame's MAC header (`tpacket_rcv`); [`super::Frame::vnet`] decodes it and
//! [`super::Frame::with_vnet`] is the header and the frame as one slice. Send: each frame
//! given to a socket opened with [`super::TxOptions::vnet_hdr`] starts with the header
//! (`packet_snd` strips it and applies it to the packet it builds).
//!
//! Fields are little-endian (`vio_le()` is true for packet sockets on little-endian hosts,
//! the only ones pspat builds for; big-endian hosts use legacy virtio's native order).

/// Bytes of `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset` holds only
/// the pseudo-header sum; the sum over `csum_start..` is still to be added.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the receiving side already verified the checksum.
pub const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_NONE`: a single frame.
pub const GSO_NONE: u8 = 0;

/// A decoded virtio-net header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_NONE` or a GSO type (TCPv4 1, UDP 3, TCPv6 4, UDP_L4 5; `| 0x80` for ECN).
    pub gso_type: u8,
    /// GSO: the length of the headers copied in front of every segment.
    pub hdr_len: u16,
    /// GSO: the payload bytes per segment.
    pub gso_size: u16,
    /// `F_NEEDS_CSUM`: where the checksummed part starts, from the frame's first byte.
    pub csum_start: u16,
    /// `F_NEEDS_CSUM`: where the checksum field is, from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Decodes the first [`VNET_HDR_LEN`] bytes of `b`; `None` if `b` is shorter.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; VNET_HDR_LEN] = b.get(..VNET_HDR_LEN)?.try_into().ok()?;
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(Self {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// Encodes into the first [`VNET_HDR_LEN`] bytes of `out` (which must hold them).
    pub fn write(&self, out: &mut [u8]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    /// The checksum is still to be finished.
    pub fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }

    /// The same header for the frame with `n` bytes inserted before its network header
    /// (an 802.1Q tag put back after the MAC addresses): the offsets that count from the
    /// frame's first byte move by `n`. `None` if one would overflow.
    pub fn shifted(&self, n: u16) -> Option<Self> {
        let mut h = *self;
        if h.needs_csum() {
            h.csum_start = h.csum_start.checked_add(n)?;
        }
        if h.gso_type != GSO_NONE {
            h.hdr_len = h.hdr_len.checked_add(n)?;
        }
        Some(h)
    }
}

/// Whether this kernel's TPACKET_V3 receive rings fill in the header (Linux 5.1 and later:
/// before that `tpacket_rcv` accepted `PACKET_VNET_HDR` and ignored it, leaving garbage
/// where the header should be). Send sockets have had it since 2.6.29.
pub fn rx_ring_supported() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    kernel_at_least(release.trim(), (5, 1))
}

/// `release` (the kernel's, as in `uname -r`: e.g. "6.8.0-45-generic") is at least `major.minor`; false when it
/// does not start with two dot-separated numbers.
fn kernel_at_least(release: &str, (major, minor): (u32, u32)) -> bool {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
    match (next(), next()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_at_the_kernels_offsets() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: 3,
            hdr_len: 0x0102,
            gso_size: 0x0304,
            csum_start: 34,
            csum_offset: 6,
        };
        let mut b = [0xffu8; 12];
        h.write(&mut b);
        // include/uapi/linux/virtio_net.h: flags, gso_type, then four le16.
        assert_eq!(&b[..10], &[1, 3, 0x02, 0x01, 0x04, 0x03, 34, 0, 6, 0]);
        assert_eq!(b[10..], [0xff, 0xff], "writes exactly 10 bytes");
        assert_eq!(VnetHdr::parse(&b), Some(h));
        assert_eq!(VnetHdr::parse(&b[..9]), None);
    }

    #[test]
    fn a_tag_moves_the_offsets_that_are_in_use() {
        let csum = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 6,
            ..VnetHdr::default()
        };
        let s = csum.shifted(4).unwrap();
        assert_eq!((s.csum_start, s.csum_offset, s.hdr_len), (38, 6, 0));
        let valid = VnetHdr {
            flags: F_DATA_VALID,
            csum_start: 34,
            ..VnetHdr::default()
        };
        assert_eq!(
            valid.shifted(4),
            Some(valid),
            "no offset in use, nothing moves"
        );
        let gso = VnetHdr {
            gso_type: 1,
            hdr_len: 66,
            ..VnetHdr::default()
        };
        assert_eq!(gso.shifted(4).unwrap().hdr_len, 70);
        let edge = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: u16::MAX - 1,
            ..VnetHdr::default()
        };
        assert_eq!(edge.shifted(4), None);
    }

    #[test]
    fn kernel_versions_compare_numerically() {
        assert!(kernel_at_least("6.18.0", (5, 1)));
        assert!(kernel_at_least("5.1.0-rc1", (5, 1)));
        assert!(kernel_at_least("5.10.2", (5, 1)));
        assert!(!kernel_at_least("5.0.21", (5, 1)));
        assert!(!kernel_at_least("4.19.300", (5, 1)));
        assert!(!kernel_at_least("", (5, 1)));
        assert!(!kernel_at_least("linux", (5, 1)));
    }
}
