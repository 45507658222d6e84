//! A received frame, the walk over the frames of one TPACKET_V3 block, and the frame of
//! one TPACKET_V2 slot.
//!
//! The block and frame headers are read at the offsets of the kernel's C structures
//! (`tpacket_block_desc`, `tpacket3_hdr`, from libc), in native byte order, with bounds
//! checks: a header pointing outside the block ends the walk instead of panicking.

use std::mem::offset_of;

use libc::{
    tpacket2_hdr as H2, tpacket3_hdr as H3, tpacket_block_desc as BD, tpacket_hdr_v1 as BH1,
};

use super::vnet::{VnetHdr, VNET_HDR_LEN};

/// One frame from an [`super::RxRing`], borrowed from the ring until the callback returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The captured bytes, from the destination MAC on (no FCS). As long as the frame unless
    /// it was larger than a block could hold (`data.len() < wire_len` then). Without the
    /// 802.1Q tag when the kernel stripped it (see [`Frame::vlan_tci`]).
    pub data: &'a [u8],
    /// The frame's length on the wire as the kernel saw it (`tp_len`), stripped VLAN tag
    /// excluded.
    pub wire_len: u32,
    /// Receive timestamp, CLOCK_REALTIME in ns (the kernel's software timestamp).
    pub ts_ns: u64,
    /// The TCI (priority, DEI, VLAN id) of the VLAN tag the kernel removed from the frame
    /// (its outermost one), `None` when it removed none. Re-insert [`Frame::vlan_tpid`] and
    /// the TCI (both big-endian) after the two MAC addresses to get the frame as it was on
    /// the wire.
    pub vlan_tci: Option<u16>,
    /// The TPID of that tag: 0x8100 (802.1Q) or 0x88a8 (802.1ad, the outer tag of QinQ),
    /// from `tp_vlan_tpid` when the kernel marks it valid (`TP_STATUS_VLAN_TPID_VALID`),
    /// [`ETH_P_8021Q`] when it does not say. 0 when `vlan_tci` is `None`.
    pub vlan_tpid: u16,
    /// The kernel says the frame's TCP/UDP checksum is not complete yet
    /// (`TP_STATUS_CSUMNOTREADY`): a frame sent by a local socket through an interface
    /// with checksum offload (veth, tap) carries only the pseudo-header sum, to be finished
    /// by hardware that a veth pair does not have. Forward it as is and the receiver
    /// drops it; a forwarder completes the checksum first.
    pub csum_not_ready: bool,
    /// With [`super::RxOptions::vnet_hdr`]: the header's 10 bytes and then `data`, one
    /// slice of the ring, as a send socket with [`super::TxOptions::vnet_hdr`] takes it.
    /// Empty otherwise. [`Frame::vnet`] decodes the header.
    pub with_vnet: &'a [u8],
}

impl Frame<'_> {
    /// The frame's offload state, from a ring opened with [`super::RxOptions::vnet_hdr`]
    /// (`None` otherwise): see [`super::vnet`].
    pub fn vnet(&self) -> Option<VnetHdr> {
        VnetHdr::parse(self.with_vnet)
    }
}

/// The 802.1Q TPID (`ETH_P_8021Q`): what a stripped tag had when the kernel does not say.
pub const ETH_P_8021Q: u16 = 0x8100;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

const BH: usize = offset_of!(BD, hdr);
const NUM_PKTS: usize = BH + offset_of!(BH1, num_pkts);
const FIRST_PKT: usize = BH + offset_of!(BH1, offset_to_first_pkt);
const NEXT: usize = offset_of!(H3, tp_next_offset);
const SEC: usize = offset_of!(H3, tp_sec);
const NSEC: usize = offset_of!(H3, tp_nsec);
const SNAPLEN: usize = offset_of!(H3, tp_snaplen);
const LEN: usize = offset_of!(H3, tp_len);
const STATUS: usize = offset_of!(H3, tp_status);
const MAC: usize = offset_of!(H3, tp_mac);
const VLAN_TCI: usize = offset_of!(H3, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci);
const VLAN_TPID: usize = offset_of!(H3, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid);

/// Where a frame header's fields are: `tpacket3_hdr` or `tpacket2_hdr` (whose TCI is 16
/// bits where the V3 one is 32).
struct Layout {
    hdr_len: usize,
    status: usize,
    len: usize,
    snaplen: usize,
    mac: usize,
    sec: usize,
    nsec: usize,
    vlan_tci: usize,
    vlan_tpid: usize,
    tci_u32: bool,
}

const V3: Layout = Layout {
    hdr_len: size_of::<H3>(),
    status: STATUS,
    len: LEN,
    snaplen: SNAPLEN,
    mac: MAC,
    sec: SEC,
    nsec: NSEC,
    vlan_tci: VLAN_TCI,
    vlan_tpid: VLAN_TPID,
    tci_u32: true,
};

const V2: Layout = Layout {
    hdr_len: size_of::<H2>(),
    status: offset_of!(H2, tp_status),
    len: offset_of!(H2, tp_len),
    snaplen: offset_of!(H2, tp_snaplen),
    mac: offset_of!(H2, tp_mac),
    sec: offset_of!(H2, tp_sec),
    nsec: offset_of!(H2, tp_nsec),
    vlan_tci: offset_of!(H2, tp_vlan_tci),
    vlan_tpid: offset_of!(H2, tp_vlan_tpid),
    tci_u32: false,
};

/// The frame of a user-owned TPACKET_V2 slot (header at its start); None if the header
/// points outside the slot, which a well-behaved kernel never writes.
pub(super) fn frame_in_slot(slot: &[u8], vnet: bool) -> Option<Frame<'_>> {
    frame_with(slot, 0, &V2, vnet)
}

/// Reads frame header at `at` in `block`; None if it or its data are out of bounds. With
/// `vnet`, the ring puts a virtio-net header right before the frame, after the TPACKET3
/// header.
fn frame_at(block: &[u8], at: usize, vnet: bool) -> Option<(Frame<'_>, u32)> {
    let frame = frame_with(block, at, &V3, vnet)?;
    Some((frame, u32_at(block, at + NEXT)?))
}

/// The frame whose header (laid out as `l`) is at `at` in `b`.
fn frame_with<'a>(block: &'a [u8], at: usize, l: &Layout, vnet: bool) -> Option<Frame<'a>> {
    let snaplen = u32_at(block, at + l.snaplen)? as usize;
    let mac = usize::from(u16_at(block, at + l.mac)?);
    let start = at.checked_add(mac)?;
    let end = start.checked_add(snaplen)?;
    let data = block.get(start..end)?;
    let with_vnet = if vnet {
        let from = start.checked_sub(VNET_HDR_LEN)?;
        if from < at + l.hdr_len {
            return None;
        }
        block.get(from..end)?
    } else {
        &[][..]
    };
    let status = u32_at(block, at + l.status)?;
    let tci = |at| match l.tci_u32 {
        true => u32_at(block, at).map(|t| t as u16),
        false => u16_at(block, at),
    };
    let vlan_tci = (status & libc::TP_STATUS_VLAN_VALID != 0)
        .then(|| tci(at + l.vlan_tci))
        .flatten();
    let vlan_tpid = match vlan_tci {
        None => 0,
        Some(_) if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 => {
            u16_at(block, at + l.vlan_tpid)?
        }
        Some(_) => ETH_P_8021Q,
    };
    let ts_ns = u64::from(u32_at(block, at + l.sec)?) * 1_000_000_000
        + u64::from(u32_at(block, at + l.nsec)?);
    let frame = Frame {
        data,
        wire_len: u32_at(block, at + l.len)?,
        ts_ns,
        vlan_tci,
        vlan_tpid,
        csum_not_ready: status & libc::TP_STATUS_CSUMNOTREADY != 0,
        with_vnet,
    };
    Some(frame)
}

/// Calls `f` for each frame of a user-owned block, in order; returns how many. Stops early
/// (without panicking) at a header that points outside the block, which a well-behaved
/// kernel never writes. `vnet`: the ring was opened with a virtio-net header per frame.
pub(super) fn for_each_in_block(block: &[u8], vnet: bool, f: &mut impl FnMut(Frame<'_>)) -> usize {
    let (Some(n), Some(first)) = (u32_at(block, NUM_PKTS), u32_at(block, FIRST_PKT)) else {
        return 0;
    };
    let mut at = first as usize;
    for i in 0..n as usize {
        let Some((frame, next)) = frame_at(block, at, vnet) else {
            return i;
        };
        f(frame);
        at = match at.checked_add(next as usize) {
            Some(a) => a,
            None => return i + 1,
        };
    }
    n as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a block by hand at the C offsets: `frames` = (data, tp_len, vlan) each; a
    /// tag's TPID is left to the kernel's default (not marked valid).
    fn block(frames: &[(&[u8], u32, Option<u16>)]) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        let put32 = |b: &mut Vec<u8>, at: usize, v: u32| {
            b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        };
        put32(&mut b, NUM_PKTS, frames.len() as u32);
        let first = 48;
        put32(&mut b, FIRST_PKT, first as u32);
        let mut at = first;
        for (k, (data, len, vlan)) in frames.iter().enumerate() {
            let mac = 68; // header (48) + sockaddr_ll room, 4-aligned: any value works
            let next = (mac + data.len()).next_multiple_of(16);
            let last = k + 1 == frames.len();
            put32(&mut b, at + NEXT, if last { 0 } else { next as u32 });
            put32(&mut b, at + SEC, 3);
            put32(&mut b, at + NSEC, 7 + k as u32);
            put32(&mut b, at + SNAPLEN, data.len() as u32);
            put32(&mut b, at + LEN, *len);
            let status = if vlan.is_some() {
                libc::TP_STATUS_VLAN_VALID
            } else {
                0
            };
            put32(&mut b, at + STATUS, libc::TP_STATUS_USER | status);
            b[at + MAC..at + MAC + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
            put32(&mut b, at + VLAN_TCI, u32::from(vlan.unwrap_or(0xffff)));
            // A TPID the walk must not take while the status does not mark it valid.
            b[at + VLAN_TPID..at + VLAN_TPID + 2].copy_from_slice(&0x9999u16.to_ne_bytes());
            b[at + mac..at + mac + data.len()].copy_from_slice(data);
            at += next;
        }
        b
    }

    #[test]
    fn offsets_are_the_kernels() {
        // include/uapi/linux/if_packet.h: tpacket3_hdr is 48 bytes, the VLAN TCI at 32;
        // the block's header after version and offset_to_priv (8 bytes).
        assert_eq!(size_of::<H3>(), 48);
        assert_eq!(
            (NEXT, SEC, NSEC, SNAPLEN, LEN, STATUS, MAC),
            (0, 4, 8, 12, 16, 20, 24)
        );
        assert_eq!((VLAN_TCI, VLAN_TPID), (32, 36));
        assert_eq!((NUM_PKTS, FIRST_PKT), (12, 16));
    }

    #[test]
    fn v2_offsets_are_the_kernels() {
        // include/uapi/linux/if_packet.h: tpacket2_hdr is 32 bytes.
        assert_eq!(size_of::<H2>(), 32);
        assert_eq!(
            (V2.status, V2.len, V2.snaplen, V2.mac, V2.sec, V2.nsec),
            (0, 4, 8, 12, 16, 20)
        );
        assert_eq!((V2.vlan_tci, V2.vlan_tpid), (24, 26));
    }

    /// A TPACKET_V2 slot written by hand: the frame at `mac`, a VNET header before it.
    fn slot(data: &[u8], len: u32, status: u32, tci: u16, tpid: u16) -> Vec<u8> {
        let mut b = vec![0u8; 2048];
        let mac = 96usize;
        b[V2.status..V2.status + 4].copy_from_slice(&(libc::TP_STATUS_USER | status).to_ne_bytes());
        b[V2.len..V2.len + 4].copy_from_slice(&len.to_ne_bytes());
        b[V2.snaplen..V2.snaplen + 4].copy_from_slice(&(data.len() as u32).to_ne_bytes());
        b[V2.mac..V2.mac + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
        b[V2.sec..V2.sec + 4].copy_from_slice(&5u32.to_ne_bytes());
        b[V2.nsec..V2.nsec + 4].copy_from_slice(&9u32.to_ne_bytes());
        b[V2.vlan_tci..V2.vlan_tci + 2].copy_from_slice(&tci.to_ne_bytes());
        b[V2.vlan_tpid..V2.vlan_tpid + 2].copy_from_slice(&tpid.to_ne_bytes());
        b[mac - VNET_HDR_LEN..mac].copy_from_slice(&[7; VNET_HDR_LEN]);
        b[mac..mac + data.len()].copy_from_slice(data);
        b
    }

    #[test]
    fn a_v2_slot_gives_its_frame_tag_and_vnet_header() {
        let d: Vec<u8> = (0..200).map(|i| i as u8).collect();
        let s = slot(&d, 204, 0, 0xffff, 0x9999);
        let f = frame_in_slot(&s, false).unwrap();
        assert_eq!((f.data, f.wire_len, f.ts_ns), (&d[..], 204, 5_000_000_009));
        assert_eq!(
            (f.vlan_tci, f.vlan_tpid, f.csum_not_ready),
            (None, 0, false)
        );
        assert!(f.with_vnet.is_empty());
        let valid = libc::TP_STATUS_VLAN_VALID | libc::TP_STATUS_VLAN_TPID_VALID;
        let s = slot(
            &d,
            200,
            valid | libc::TP_STATUS_CSUMNOTREADY,
            0x2005,
            0x88a8,
        );
        let f = frame_in_slot(&s, true).unwrap();
        assert_eq!(
            (f.vlan_tci, f.vlan_tpid, f.csum_not_ready),
            (Some(0x2005), 0x88a8, true)
        );
        assert_eq!(&f.with_vnet[..VNET_HDR_LEN], &[7; VNET_HDR_LEN]);
        assert_eq!(&f.with_vnet[VNET_HDR_LEN..], &d[..]);
        // A snaplen past the slot's end is no frame.
        let mut s = slot(&d, 200, 0, 0, 0);
        s[V2.snaplen..V2.snaplen + 4].copy_from_slice(&5000u32.to_ne_bytes());
        assert_eq!(frame_in_slot(&s, false), None);
    }

    #[test]
    fn walks_every_frame_in_order() {
        let a = [1u8; 60];
        let b: Vec<u8> = (0..=255).collect();
        let blk = block(&[
            (&a, 60, None),
            (&b, 300, Some(0x2005)),
            (&a[..14], 14, Some(0)),
        ]);
        let mut seen = Vec::new();
        let n = for_each_in_block(&blk, false, &mut |f: Frame<'_>| {
            seen.push((f.data.to_vec(), f.wire_len, f.ts_ns, f.vlan_tci))
        });
        assert_eq!(n, 3);
        assert_eq!(seen[0], (a.to_vec(), 60, 3_000_000_007, None));
        assert_eq!(seen[1], (b.clone(), 300, 3_000_000_008, Some(0x2005)));
        assert_eq!(seen[2], (a[..14].to_vec(), 14, 3_000_000_009, Some(0)));
    }

    #[test]
    fn a_tags_tpid_is_the_kernels_when_valid_and_802_1q_otherwise() {
        let a = [3u8; 64];
        let mut blk = block(&[(&a, 64, Some(0x0064)), (&a, 64, Some(5)), (&a, 64, None)]);
        // The first frame's tag was 802.1ad, and the kernel says so.
        let status = libc::TP_STATUS_USER | libc::TP_STATUS_VLAN_VALID;
        let valid = status | libc::TP_STATUS_VLAN_TPID_VALID;
        blk[48 + STATUS..48 + STATUS + 4].copy_from_slice(&valid.to_ne_bytes());
        blk[48 + VLAN_TPID..48 + VLAN_TPID + 2].copy_from_slice(&0x88a8u16.to_ne_bytes());
        let mut seen = Vec::new();
        for_each_in_block(&blk, false, &mut |f: Frame<'_>| {
            seen.push((f.vlan_tci, f.vlan_tpid))
        });
        assert_eq!(
            seen,
            [(Some(0x0064), 0x88a8), (Some(5), ETH_P_8021Q), (None, 0)]
        );
    }

    #[test]
    fn a_header_pointing_outside_stops_the_walk() {
        let a = [9u8; 100];
        let mut blk = block(&[(&a, 100, None), (&a, 100, None)]);
        // Second frame claims a snaplen past the end of the block.
        let second = 48 + (68 + 100usize).next_multiple_of(16);
        blk[second + SNAPLEN..second + SNAPLEN + 4].copy_from_slice(&5000u32.to_ne_bytes());
        let mut count = 0;
        assert_eq!(for_each_in_block(&blk, false, &mut |_| count += 1), 1);
        assert_eq!(count, 1);
        // A count larger than the frames present stops at the first bad header too.
        let mut blk = block(&[(&a, 100, None)]);
        blk[NUM_PKTS..NUM_PKTS + 4].copy_from_slice(&1000u32.to_ne_bytes());
        blk[48 + NEXT..48 + NEXT + 4].copy_from_slice(&100_000u32.to_ne_bytes());
        assert_eq!(for_each_in_block(&blk, false, &mut |_| {}), 1);
    }

    #[test]
    fn a_vnet_ring_gives_the_header_before_each_frame() {
        let a = [5u8; 80];
        let b = [6u8; 40];
        let mut blk = block(&[(&a, 80, None), (&b, 40, None)]);
        // The kernel writes the header in the 10 bytes before the MAC header (mac = 68).
        let second = 48 + (68 + 80usize).next_multiple_of(16);
        let h = VnetHdr {
            flags: super::super::vnet::F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 6,
            ..VnetHdr::default()
        };
        h.write(&mut blk[48 + 58..]);
        VnetHdr::default().write(&mut blk[second + 58..]);
        let mut seen = Vec::new();
        let n = for_each_in_block(&blk, true, &mut |f: Frame<'_>| {
            seen.push((f.vnet(), f.with_vnet.to_vec(), f.data.to_vec()))
        });
        assert_eq!(n, 2);
        assert_eq!(seen[0].0, Some(h));
        assert_eq!(seen[0].1.len(), 90);
        assert_eq!(VnetHdr::parse(&seen[0].1), Some(h));
        assert_eq!(
            &seen[0].1[10..],
            &a[..],
            "the header and the frame are one slice"
        );
        assert_eq!(seen[0].2, a.to_vec());
        assert_eq!(seen[1].0, Some(VnetHdr::default()));
        assert_eq!(&seen[1].1[10..], &b[..]);
        // Without vnet the same block gives no header.
        let mut none = 0;
        for_each_in_block(&blk, false, &mut |f: Frame<'_>| {
            assert!(f.vnet().is_none() && f.with_vnet.is_empty());
            none += 1;
        });
        assert_eq!(none, 2);
        // A MAC offset leaving no room for the header after the TPACKET3 header ends the
        // walk instead of reading the header out of the frame header.
        blk[48 + MAC..48 + MAC + 2].copy_from_slice(&50u16.to_ne_bytes());
        assert_eq!(for_each_in_block(&blk, true, &mut |_| {}), 0);
    }
}
