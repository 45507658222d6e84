//! Completing TCP/UDP checksums the sender's kernel left to hardware.
//!
//! A local socket sending through an interface with checksum offload (a veth pair, a tap)
//! hands the frame over with only the pseudo-header's sum in the checksum field, and the
//! kernel marks it `TP_STATUS_CSUMNOTREADY` when an AF_PACKET ring captures it. Linux's
//! forwarding path carries the "partial" state along to the next device; a userspace
//! forwarder gets bytes only, so it must finish the checksum (RFC 1071 over the
//! pseudo-header and the whole segment) before sending the frame on, or the receiver
//! drops it as corrupt. Frames from a real wire are always complete and never pay this.
//! A forwarder needs it only without virtio-net headers (pspat-shaper's `sw_checksum`,
//! `pspat shape --sw-checksum`, kernels before 5.1): with them the partial state is passed
//! on instead (see [`super::vnet`]).

/// The one's-complement sum of `data` (big-endian 16-bit words, an odd last byte padded
/// with zero) added to `acc`, not yet folded.
fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Recomputes the TCP or UDP checksum of the IPv4 or IPv6 packet in an Ethernet frame
/// (optionally 802.1Q/802.1ad tagged) in place. Returns false, changing nothing, when the
/// frame is not TCP/UDP over IPv4/IPv6 (without IPv6 extension headers), is a fragment,
/// or is truncated.
pub fn complete(frame: &mut [u8]) -> bool {
    let mut off = 12;
    let mut ethertype = match frame.get(off..off + 2) {
        Some(b) => u16::from_be_bytes([b[0], b[1]]),
        None => return false,
    };
    while ethertype == 0x8100 || ethertype == 0x88a8 {
        off += 4;
        ethertype = match frame.get(off..off + 2) {
            Some(b) => u16::from_be_bytes([b[0], b[1]]),
            None => return false,
        };
    }
    let ip = off + 2;
    let (proto, l4, l4_len, pseudo) = match ethertype {
        0x0800 => {
            let Some(h) = frame.get(ip..ip + 20) else {
                return false;
            };
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3fff;
            if ihl < 20 || total < ihl || frag != 0 || frame.len() < ip + total {
                return false;
            }
            let proto = h[9];
            let l4_len = total - ihl;
            let pseudo = sum(&h[12..20], u64::from(proto) + l4_len as u64);
            (proto, ip + ihl, l4_len, pseudo)
        }
        0x86dd => {
            let Some(h) = frame.get(ip..ip + 40) else {
                return false;
            };
            let l4_len = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if frame.len() < ip + 40 + l4_len {
                return false;
            }
            let proto = h[6];
            let pseudo = sum(&h[8..40], u64::from(proto) + l4_len as u64);
            (proto, ip + 40, l4_len, pseudo)
        }
        _ => return false,
    };
    let field = match proto {
        6 if l4_len >= 20 => l4 + 16,
        17 if l4_len >= 8 => l4 + 6,
        _ => return false,
    };
    frame[field..field + 2].fill(0);
    let c = !fold(sum(&frame[l4..l4 + l4_len], pseudo));
    // UDP sends a computed 0 as 0xffff (0 means "no checksum").
    let c = if proto == 17 && c == 0 { 0xffff } else { c };
    frame[field..field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + IPv4 + UDP with `payload`, checksum field set to `csum`.
    fn udp4(payload: &[u8], csum: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 77, 0, 1]);
        f[30..34].copy_from_slice(&[10, 77, 0, 2]);
        f[34..36].copy_from_slice(&10001u16.to_be_bytes());
        f[36..38].copy_from_slice(&9000u16.to_be_bytes());
        f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f[40..42].copy_from_slice(&csum.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// The receiver's check (RFC 1071): the sum over pseudo-header and segment, checksum
    /// included, folds to 0xffff. Written independently of `complete`'s layout walk.
    fn verifies_v4(f: &[u8]) -> bool {
        let (ip, l4) = (&f[14..34], &f[34..]);
        let mut acc = 0u64;
        for w in ip[12..20].chunks(2) {
            acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        acc += 17 + l4.len() as u64;
        let mut padded = l4.to_vec();
        if padded.len() % 2 == 1 {
            padded.push(0);
        }
        for w in padded.chunks(2) {
            acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while acc >> 16 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc == 0xffff
    }

    #[test]
    fn completes_udp_over_ipv4_of_any_length() {
        for len in [0usize, 1, 2, 3, 17, 958, 1472] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
            // A partial checksum (any garbage) in the field: it must not matter.
            let mut f = udp4(&payload, 0x1234);
            assert!(!verifies_v4(&f));
            assert!(complete(&mut f));
            assert!(verifies_v4(&f), "length {len}");
            assert_eq!(&f[42..], &payload[..], "payload untouched");
        }
    }

    #[test]
    fn vlan_tagged_and_refusals() {
        let plain = {
            let mut f = udp4(b"hello", 0);
            assert!(complete(&mut f));
            f
        };
        // The same packet behind an 802.1Q tag gets the same checksum.
        let mut tagged = udp4(b"hello", 0);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert!(complete(&mut tagged));
        assert_eq!(tagged[44..46], plain[40..42]);
        // ARP, a fragment, a truncated frame: untouched.
        let mut arp = plain.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = arp.clone();
        assert!(!complete(&mut arp));
        assert_eq!(arp, before);
        let mut frag = udp4(b"hello", 7);
        frag[20] = 0x20; // more fragments
        assert!(!complete(&mut frag));
        assert_eq!(frag[40..42], [0, 7]);
        let mut short = udp4(b"hello", 7);
        short.truncate(44);
        assert!(!complete(&mut short));
    }

    #[test]
    fn completes_tcp_over_ipv6() {
        let payload = b"abcdefghijk";
        let mut f = vec![0u8; 14 + 40 + 20];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
        f[20] = 6;
        f[22..38].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f[38..54].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f[66] = 0x50; // data offset 5
        f.extend_from_slice(payload);
        assert!(complete(&mut f));
        // Verify: pseudo-header (addresses, length, next header) plus segment folds to ffff.
        let mut acc = 0u64;
        for w in f[22..54].chunks(2) {
            acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        let seg = &f[54..];
        acc += 6 + seg.len() as u64;
        let mut padded = seg.to_vec();
        padded.push(0);
        for w in padded.chunks(2) {
            acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while acc >> 16 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        assert_eq!(acc, 0xffff);
    }
}
