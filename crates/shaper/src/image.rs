//! A received frame as the output socket is to send it (its "image"): the frame as it was
//! on the wire, the VLAN tag the kernel removed put back with its own TPID (802.1Q or
//! 802.1ad), behind its virtio-net header when the sockets carry one; without the header,
//! a checksum the sender left partial is finished here (`pspat_io::afpacket::csum`). The
//! receiving threads and the reverse path both build frames this way. When nothing
//! changes, [`image`] gives the ring's own bytes, so a receiving thread copies each frame
//! once, into its pool slot; the reverse path writes the image straight into its send
//! batch ([`write_image`]).
//!
//! **Length.** A frame is sendable if the kernel's AF_PACKET send takes it
//! (`packet_snd`, net/packet/af_packet.c): at most the MTU plus the 14-byte Ethernet
//! header, or 4 bytes more when the image's EtherType, its outermost tag, is 802.1Q 0x8100
//! (`packet_extra_vlan_len_allowed`), whatever tags follow; one allowance, not one per
//! tag, and none for 802.1ad 0x88a8. The rule looks at the image, so a tag the kernel
//! removed on reception counts as the tag it becomes again. A GSO frame (its virtio-net
//! header says so) is not checked, by the kernel either. `max_frame` is the longest frame,
//! MTU + 18, so the limit is `max_frame - 4` unless the outermost tag is 802.1Q. What
//! fails this is `too_long` on arrival: sent, it would fail in sendmmsg(2).

use pspat_io::afpacket::csum;
use pspat_io::afpacket::vnet::{GSO_NONE, VNET_HDR_LEN};
use pspat_io::afpacket::{Frame, ETH_P_8021Q};

/// Bytes of a VLAN tag (`VLAN_HLEN`): the TPID and the TCI.
const VLAN_HLEN: usize = 4;

/// What the output socket is given for a frame: the bytes, and how many of them are the
/// virtio-net header in front of the frame.
pub(crate) struct Image<'a> {
    /// The header (`hdr` bytes), then the frame.
    pub bytes: &'a [u8],
    /// Length of the virtio-net header: 0 or `VNET_HDR_LEN`.
    pub hdr: usize,
}

impl Image<'_> {
    /// The frame, without the header.
    pub fn frame(&self) -> &[u8] {
        &self.bytes[self.hdr..]
    }
}

/// Why a frame cannot be sent on.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unsendable {
    /// Captured shorter than on the wire.
    Truncated,
    /// Shorter than an Ethernet header.
    Runt,
    /// Longer than the output sends (see the module documentation), or than the room
    /// given, the tag put back included.
    TooLong,
}

/// The EtherType the image of `f` starts with after the MAC addresses: the TPID of the tag
/// put back, or the frame's own (`f` is at least 14 bytes).
fn outer_type(f: &Frame<'_>) -> u16 {
    match f.vlan_tci {
        Some(_) if f.vlan_tpid != 0 => f.vlan_tpid,
        Some(_) => ETH_P_8021Q,
        None => u16::from_be_bytes([f.data[12], f.data[13]]),
    }
}

/// Whether the kernel sends an image of `len` bytes (virtio-net header excluded) starting
/// with EtherType `outer`, on an output whose longest frame is `max_frame` (MTU + 18).
fn fits(len: usize, outer: u16, gso: bool, max_frame: usize) -> bool {
    let limit = if outer == ETH_P_8021Q {
        max_frame
    } else {
        max_frame.saturating_sub(VLAN_HLEN)
    };
    gso || len <= limit
}

/// Checks that `f` can be sent on; returns the lengths of its tag (0 or 4) and header.
fn sendable(
    f: &Frame<'_>,
    vnet: bool,
    max_frame: usize,
    room: usize,
) -> Result<(usize, usize), Unsendable> {
    if (f.data.len() as u64) < u64::from(f.wire_len) {
        return Err(Unsendable::Truncated);
    }
    if f.data.len() < 14 {
        return Err(Unsendable::Runt);
    }
    // A ring without the header cannot feed a socket that expects one (never happens:
    // both are opened with the same setting).
    if vnet && f.with_vnet.is_empty() {
        return Err(Unsendable::Truncated);
    }
    let tag = if f.vlan_tci.is_some() { VLAN_HLEN } else { 0 };
    let hdr = if vnet { VNET_HDR_LEN } else { 0 };
    let gso = vnet && f.vnet().is_some_and(|h| h.gso_type != GSO_NONE);
    let len = f.data.len() + tag;
    if !fits(len, outer_type(f), gso, max_frame) || hdr + len > room {
        return Err(Unsendable::TooLong);
    }
    Ok((tag, hdr))
}

/// Writes into `out` what the output socket sends for `f`: the frame as it was on the
/// wire (a tag the kernel removed is put back, with its TPID), behind its virtio-net header when
/// `vnet`; without one, a checksum the sender left partial is finished here. Returns the
/// length and whether a checksum was finished.
pub(crate) fn write_image(
    f: &Frame<'_>,
    vnet: bool,
    max_frame: usize,
    out: &mut [u8],
) -> Result<(usize, bool), Unsendable> {
    let (tag, hdr) = sendable(f, vnet, max_frame, out.len())?;
    rebuild(f, vnet, tag, hdr, out)
}

/// [`write_image`] once [`sendable`] gave the tag and header lengths (and `out` is known
/// to hold them and the frame).
fn rebuild(
    f: &Frame<'_>,
    vnet: bool,
    tag: usize,
    hdr: usize,
    out: &mut [u8],
) -> Result<(usize, bool), Unsendable> {
    let n = hdr + f.data.len() + tag;
    let out = &mut out[..n];
    if let Some(h) = f.vnet().filter(|_| vnet) {
        // The tag goes in before the network header: offsets from the frame's start move.
        h.shifted(tag as u16).ok_or(Unsendable::TooLong)?.write(out);
    }
    let fr = &mut out[hdr..];
    fr[..12].copy_from_slice(&f.data[..12]);
    if let Some(tci) = f.vlan_tci {
        fr[12..14].copy_from_slice(&outer_type(f).to_be_bytes());
        fr[14..16].copy_from_slice(&tci.to_be_bytes());
    }
    fr[12 + tag..].copy_from_slice(&f.data[12..]);
    let completed = !vnet && f.csum_not_ready && csum::complete(fr);
    Ok((n, completed))
}

/// [`write_image`] without the copy when nothing changes: then the image is the frame's
/// own bytes in the ring (with the header the kernel wrote before them, when `vnet`).
pub(crate) fn image<'a>(
    f: &Frame<'a>,
    vnet: bool,
    max_frame: usize,
    scratch: &'a mut [u8],
) -> Result<(Image<'a>, bool), Unsendable> {
    let (tag, hdr) = sendable(f, vnet, max_frame, scratch.len())?;
    if tag == 0 && vnet {
        let bytes = f.with_vnet;
        return Ok((Image { bytes, hdr }, false));
    }
    if tag == 0 && !f.csum_not_ready {
        return Ok((Image { bytes: f.data, hdr }, false));
    }
    let (n, completed) = rebuild(f, vnet, tag, hdr, scratch)?;
    Ok((
        Image {
            bytes: &scratch[..n],
            hdr,
        },
        completed,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pspat_io::afpacket::vnet::{VnetHdr, F_NEEDS_CSUM};

    /// An Ethernet/IPv4/UDP frame of 60 bytes whose UDP checksum field holds `partial`.
    fn udp_frame(partial: u16) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 77, 0, 1]);
        f[30..34].copy_from_slice(&[10, 77, 0, 2]);
        f[34..36].copy_from_slice(&10000u16.to_be_bytes());
        f[36..38].copy_from_slice(&9000u16.to_be_bytes());
        f[38..40].copy_from_slice(&26u16.to_be_bytes());
        f[40..42].copy_from_slice(&partial.to_be_bytes());
        for (i, b) in f[42..].iter_mut().enumerate() {
            *b = i as u8 * 3 + 1;
        }
        f
    }

    /// The header a ring writes for a UDP frame a local socket left partial.
    fn partial_hdr() -> VnetHdr {
        VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 6,
            ..VnetHdr::default()
        }
    }

    /// `with_vnet` is the header then the frame, as the ring lays them out.
    fn frame<'a>(with_vnet: &'a [u8], vnet: bool, tci: Option<u16>, not_ready: bool) -> Frame<'a> {
        let data = &with_vnet[VNET_HDR_LEN..];
        Frame {
            data,
            wire_len: data.len() as u32,
            ts_ns: 0,
            vlan_tci: tci,
            vlan_tpid: if tci.is_some() { ETH_P_8021Q } else { 0 },
            csum_not_ready: not_ready,
            with_vnet: if vnet { with_vnet } else { &[] },
        }
    }

    fn ring_bytes(h: VnetHdr, f: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; VNET_HDR_LEN];
        h.write(&mut b);
        b.extend_from_slice(f);
        b
    }

    fn tagged(f: &[u8], tci: u16) -> Vec<u8> {
        let mut t = f.to_vec();
        t.splice(12..12, [0x81, 0x00, (tci >> 8) as u8, tci as u8]);
        t
    }

    #[test]
    fn with_a_header_an_untagged_frame_goes_on_from_the_ring_uncopied() {
        let ring = ring_bytes(partial_hdr(), &udp_frame(0x1234));
        let f = frame(&ring, true, None, true);
        let mut scratch = vec![0u8; 1600];
        let (img, completed) = image(&f, true, 1518, &mut scratch).unwrap();
        assert!(!completed, "the checksum stays partial");
        assert_eq!(img.bytes.as_ptr(), ring.as_ptr(), "the ring's own bytes");
        assert_eq!(img.bytes, &ring[..]);
        assert_eq!(img.hdr, VNET_HDR_LEN);
        assert_eq!(img.frame(), &ring[VNET_HDR_LEN..]);
        // The reverse path's copy is the same bytes.
        let mut out = vec![0u8; 1600];
        assert_eq!(write_image(&f, true, 1518, &mut out), Ok((70, false)));
        assert_eq!(&out[..70], &ring[..]);
    }

    #[test]
    fn a_tag_put_back_moves_the_headers_offsets_and_leaves_the_checksum_partial() {
        let plain = udp_frame(0x1234);
        let ring = ring_bytes(partial_hdr(), &plain);
        let f = frame(&ring, true, Some(0x2005), true);
        let mut scratch = vec![0u8; 1600];
        let (img, completed) = image(&f, true, 1518, &mut scratch).unwrap();
        assert!(!completed);
        let h = VnetHdr::parse(img.bytes).unwrap();
        assert_eq!(
            (h.flags, h.csum_start, h.csum_offset),
            (F_NEEDS_CSUM, 38, 6)
        );
        assert_eq!(img.frame(), &tagged(&plain, 0x2005)[..]);
    }

    #[test]
    fn without_a_header_a_partial_checksum_is_finished_here() {
        let plain = udp_frame(0x1234);
        let ring = ring_bytes(VnetHdr::default(), &plain);
        let mut want = tagged(&plain, 7);
        assert!(csum::complete(&mut want));
        assert_ne!(want[44..46], [0x12, 0x34]);
        let f = frame(&ring, false, Some(7), true);
        let mut scratch = vec![0u8; 1600];
        let (img, completed) = image(&f, false, 1518, &mut scratch).unwrap();
        assert!(completed);
        assert_eq!(img.hdr, 0);
        assert_eq!(img.bytes, &want[..]);
        // Untagged and complete: the ring's bytes, uncopied.
        let f = frame(&ring, false, None, false);
        let (img, completed) = image(&f, false, 1518, &mut scratch).unwrap();
        assert!(!completed);
        assert_eq!(img.bytes.as_ptr(), ring[VNET_HDR_LEN..].as_ptr());
    }

    /// A frame of `len` bytes whose EtherType (bytes 12-13) is `ethertype`, with a ring
    /// header in front of it (`len + VNET_HDR_LEN` bytes); `gso` marks it a GSO frame.
    fn sized(len: usize, ethertype: u16, gso: bool) -> Vec<u8> {
        let mut f: Vec<u8> = (0..len).map(|i| i as u8).collect();
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        let h = VnetHdr {
            gso_type: if gso { 1 } else { GSO_NONE },
            ..VnetHdr::default()
        };
        ring_bytes(h, &f)
    }

    #[test]
    fn a_tag_goes_back_with_the_tpid_it_had() {
        let plain = udp_frame(0);
        let ring = ring_bytes(VnetHdr::default(), &plain);
        let mut f = frame(&ring, false, Some(0x0064), false);
        let mut scratch = vec![0u8; 1600];
        let mut out = vec![0u8; 1600];
        for tpid in [0x88a8u16, ETH_P_8021Q] {
            f.vlan_tpid = tpid;
            let mut want = plain[..12].to_vec();
            want.extend_from_slice(&tpid.to_be_bytes());
            want.extend_from_slice(&[0x00, 0x64]);
            want.extend_from_slice(&plain[12..]);
            let (img, _) = image(&f, false, 1518, &mut scratch).unwrap();
            assert_eq!(img.bytes, &want[..], "TPID {tpid:#06x}");
            // The reverse path builds the same bytes.
            let (n, _) = write_image(&f, false, 1518, &mut out).unwrap();
            assert_eq!(&out[..n], &want[..], "TPID {tpid:#06x}, reverse path");
        }
        // A tag whose TPID the kernel did not give (0) is 802.1Q.
        f.vlan_tpid = 0;
        let (img, _) = image(&f, false, 1518, &mut scratch).unwrap();
        assert_eq!(img.bytes[12..16], [0x81, 0x00, 0x00, 0x64]);
    }

    #[test]
    fn the_length_limit_is_the_kernels_for_an_af_packet_send() {
        let (dot1q, qinq, ipv4) = (ETH_P_8021Q, 0x88a8u16, 0x0800u16);
        // (data length, its EtherType, the tag the kernel removed, GSO, sendable) on an
        // output of MTU 1500 (max_frame 1518).
        let cases = [
            // Untagged: MTU + 14.
            (1514, ipv4, None, false, true),
            (1515, ipv4, None, false, false),
            (1518, ipv4, None, false, false),
            // An 802.1Q tag removed on arrival, put back outermost: 4 bytes more.
            (1514, ipv4, Some(dot1q), false, true),
            (1515, ipv4, Some(dot1q), false, false),
            // An 802.1ad tag removed: none more, even with an 802.1Q tag inside it.
            (1510, ipv4, Some(qinq), false, true),
            (1511, ipv4, Some(qinq), false, false),
            (1510, dot1q, Some(qinq), false, true),
            (1511, dot1q, Some(qinq), false, false),
            // Tags left in the frame count by the outermost one too.
            (1518, dot1q, None, false, true),
            (1519, dot1q, None, false, false),
            (1514, qinq, None, false, true),
            (1515, qinq, None, false, false),
            // Two 802.1Q tags: still one allowance.
            (1515, dot1q, Some(dot1q), false, false),
            // GSO frames are not checked (only the room is).
            (1540, ipv4, None, true, true),
        ];
        let mut scratch = vec![0u8; VNET_HDR_LEN + 1600];
        for (len, ethertype, tag, gso, ok) in cases {
            let ring = sized(len, ethertype, gso);
            let mut f = frame(&ring, true, tag.map(|_| 5), false);
            f.vlan_tpid = tag.unwrap_or(0);
            let got = image(&f, true, 1518, &mut scratch).map(|(i, _)| i.bytes.len());
            let want = if ok {
                Ok(VNET_HDR_LEN + len + tag.map_or(0, |_| 4))
            } else {
                Err(Unsendable::TooLong)
            };
            assert_eq!(
                got, want,
                "{len} bytes, {ethertype:#06x}, tag {tag:x?}, gso {gso}"
            );
            // The reverse path's rule is the same.
            let rev = write_image(&f, true, 1518, &mut scratch).map(|(n, _)| n);
            assert_eq!(
                rev, want,
                "reverse: {len} bytes, {ethertype:#06x}, tag {tag:x?}"
            );
            // And the same without the header (GSO frames only come with one).
            if !gso {
                let f = Frame {
                    with_vnet: &[],
                    ..f
                };
                let want = want.map(|n| n - VNET_HDR_LEN);
                let got = image(&f, false, 1518, &mut scratch).map(|(i, _)| i.bytes.len());
                assert_eq!(got, want, "no header: {len} bytes, {ethertype:#06x}");
            }
        }
        // A GSO frame still needs the room.
        let ring = sized(1600, ipv4, true);
        let f = frame(&ring, true, None, false);
        assert_eq!(
            image(&f, true, 1518, &mut scratch[..VNET_HDR_LEN + 1599]).err(),
            Some(Unsendable::TooLong)
        );
    }

    #[test]
    fn unsendable_frames_say_why() {
        let ring = ring_bytes(partial_hdr(), &udp_frame(0));
        let mut scratch = vec![0u8; 1600];
        let mut f = frame(&ring, true, None, true);
        f.wire_len = 61;
        assert_eq!(
            image(&f, true, 1518, &mut scratch).err(),
            Some(Unsendable::Truncated)
        );
        let short = frame(&ring[..VNET_HDR_LEN + 13], true, None, false);
        assert_eq!(
            image(&short, true, 1518, &mut scratch).err(),
            Some(Unsendable::Runt)
        );
        let f = frame(&ring, true, None, true);
        // Longer than the output sends (untagged: `max_frame` less a tag), or than the
        // slot holds (header included).
        assert_eq!(
            image(&f, true, 63, &mut scratch).err(),
            Some(Unsendable::TooLong)
        );
        assert_eq!(
            image(&f, true, 64, &mut scratch).map(|(i, _)| i.bytes.len()),
            Ok(70)
        );
        assert_eq!(
            image(&f, true, 1518, &mut scratch[..69]).err(),
            Some(Unsendable::TooLong)
        );
        // The tag counts against both.
        let f = frame(&ring, true, Some(1), true);
        assert_eq!(
            image(&f, true, 63, &mut scratch).err(),
            Some(Unsendable::TooLong)
        );
        assert_eq!(
            write_image(&f, true, 64, &mut scratch[..73]),
            Err(Unsendable::TooLong)
        );
        assert_eq!(
            write_image(&f, true, 64, &mut scratch[..74]),
            Ok((74, false))
        );
        // A socket expecting a header cannot take a frame that came without one.
        let f = frame(&ring, false, None, false);
        assert!(image(&f, true, 1518, &mut scratch).is_err());
    }
}
