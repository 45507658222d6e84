//! The frame parser: Ethernet (with up to two 802.1Q / 802.1ad tags), IPv4, IPv6 (with its
//! common extension headers) and the ports of UDP, TCP, SCTP and UDP-Lite, into a
//! [`FlowKey`].
//!
//! It reads only what classification needs and checks only what it reads: each header must
//! be present in full, IPv4's version and IHL must be sane, IPv6's version must be 6. It
//! does not verify checksums or that the frame holds the whole IP payload (a frame
//! truncated after the transport ports still classifies).
//!
//! - **Fragments.** A non-first fragment (IPv4 offset != 0, or an IPv6 fragment header with
//!   offset != 0) carries no transport header: its key has the protocol and ports 0. A
//!   first fragment is parsed like a whole packet. (So the fragments of one datagram may
//!   land in different queues when a mask keeps port bits: ipfw behaves the same.)
//! - **IPv6 extension headers.** Hop-by-hop (0), routing (43), fragment (44) and
//!   destination options (60) are skipped, at most [`MAX_EXT_HEADERS`] of them (a longer
//!   chain is [`ParseError::TooManyExtHeaders`]); any other next-header value is taken as
//!   the upper-layer protocol (ESP, AH, ICMPv6, No Next Header... have no ports).
//! - **Non-IP frames** (ARP, LLDP, ...) are not errors: they parse as [`Parsed::NonIp`], and
//!   the classifier sends them where the first rule *without* address, port or protocol
//!   conditions sends them (see `rules.rs`).
//!
//! Cost: a fixed number of bounds-checked loads per header, no allocation.
//!
//! Chosen over `etherparse` by measurement (docs/PERFORMANCE.md, "Classifier"): both are
//! allocation-free, but this parser stops at the ports and skips the validation and slicing
//! etherparse does for every layer.

use super::key::FlowKey;

/// Most IPv6 extension headers skipped before giving up.
pub const MAX_EXT_HEADERS: usize = 8;
/// Most VLAN tags (802.1Q 0x8100, 802.1ad 0x88a8, and the old QinQ 0x9100) skipped.
pub const MAX_VLAN_TAGS: usize = 2;

const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETHERTYPE_QINQ_OLD: u16 = 0x9100;

/// IP protocol numbers the parser knows.
pub mod proto {
    pub const HOPOPT: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const IPV6_ROUTE: u8 = 43;
    pub const IPV6_FRAG: u8 = 44;
    pub const ICMPV6: u8 = 58;
    pub const IPV6_NONXT: u8 = 59;
    pub const IPV6_OPTS: u8 = 60;
    pub const SCTP: u8 = 132;
    pub const UDPLITE: u8 = 136;
}

/// Which header a truncated frame ended in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    Ethernet,
    Vlan,
    Ipv4,
    Ipv6,
    Ipv6Ext,
    Transport,
}

/// Why a frame could not be classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ParseError {
    #[error("frame truncated in the {0:?} header")]
    Truncated(Layer),
    #[error("more than {MAX_VLAN_TAGS} VLAN tags")]
    TooManyVlanTags,
    #[error("IP version {0} in an {1} frame")]
    BadIpVersion(u8, &'static str),
    #[error("IPv4 header length {0} words (must be 5..=15)")]
    BadIhl(u8),
    #[error("more than {MAX_EXT_HEADERS} IPv6 extension headers")]
    TooManyExtHeaders,
}

/// A parsed frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// An IPv4 or IPv6 packet.
    Ip(FlowKey),
    /// Anything else, by its (innermost) EtherType.
    NonIp { ethertype: u16 },
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
fn be128(b: &[u8], at: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    u128::from_be_bytes(a)
}

/// Parse an Ethernet frame.
#[inline(always)]
pub fn parse_frame(frame: &[u8]) -> Result<Parsed, ParseError> {
    if frame.len() < ETH_HLEN {
        return Err(ParseError::Truncated(Layer::Ethernet));
    }
    let mut ethertype = be16(frame, 12);
    let mut off = ETH_HLEN;
    let mut tags = 0;
    while matches!(
        ethertype,
        ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD
    ) {
        if tags == MAX_VLAN_TAGS {
            return Err(ParseError::TooManyVlanTags);
        }
        if frame.len() < off + 4 {
            return Err(ParseError::Truncated(Layer::Vlan));
        }
        ethertype = be16(frame, off + 2);
        off += 4;
        tags += 1;
    }
    match ethertype {
        ETHERTYPE_IPV4 => parse_ipv4(&frame[off..]).map(Parsed::Ip),
        ETHERTYPE_IPV6 => parse_ipv6(&frame[off..]).map(Parsed::Ip),
        _ => Ok(Parsed::NonIp { ethertype }),
    }
}

/// Parse an IPv4 packet (from its first header byte).
#[inline(always)]
pub fn parse_ipv4(p: &[u8]) -> Result<FlowKey, ParseError> {
    if p.len() < 20 {
        return Err(ParseError::Truncated(Layer::Ipv4));
    }
    let version = p[0] >> 4;
    if version != 4 {
        return Err(ParseError::BadIpVersion(version, "IPv4"));
    }
    let ihl = p[0] & 0x0f;
    if ihl < 5 {
        return Err(ParseError::BadIhl(ihl));
    }
    let hlen = usize::from(ihl) * 4;
    if p.len() < hlen {
        return Err(ParseError::Truncated(Layer::Ipv4));
    }
    let proto = p[9];
    let mut key = FlowKey::v4(be32(p, 12), be32(p, 16), 0, 0, proto);
    key.tos = p[1];
    key.ip_len = be16(p, 2);
    key.ttl = p[8];
    let frag_offset = be16(p, 6) & 0x1fff;
    if frag_offset == 0 {
        ports(&p[hlen..], &mut key)?;
    }
    Ok(key)
}

/// Parse an IPv6 packet (from its first header byte).
#[inline]
pub fn parse_ipv6(p: &[u8]) -> Result<FlowKey, ParseError> {
    if p.len() < 40 {
        return Err(ParseError::Truncated(Layer::Ipv6));
    }
    let version = p[0] >> 4;
    if version != 6 {
        return Err(ParseError::BadIpVersion(version, "IPv6"));
    }
    let mut next = p[6];
    let mut off = 40;
    let mut first_fragment = true;
    let mut skipped = 0;
    while matches!(
        next,
        proto::HOPOPT | proto::IPV6_ROUTE | proto::IPV6_FRAG | proto::IPV6_OPTS
    ) {
        if skipped == MAX_EXT_HEADERS {
            return Err(ParseError::TooManyExtHeaders);
        }
        if p.len() < off + 8 {
            return Err(ParseError::Truncated(Layer::Ipv6Ext));
        }
        let len = if next == proto::IPV6_FRAG {
            // Fragment header: fixed 8 bytes; offset in the top 13 bits of bytes 2..4.
            if be16(p, off + 2) >> 3 != 0 {
                first_fragment = false;
            }
            8
        } else {
            (usize::from(p[off + 1]) + 1) * 8
        };
        next = p[off];
        off += len;
        skipped += 1;
    }
    let mut key = FlowKey::v6(be128(p, 8), be128(p, 24), 0, 0, next);
    key.tos = (be16(p, 0) >> 4) as u8;
    key.ip_len = be16(p, 4).saturating_add(40);
    key.ttl = p[7];
    if first_fragment {
        if p.len() < off {
            return Err(ParseError::Truncated(Layer::Ipv6Ext));
        }
        ports(&p[off..], &mut key)?;
    }
    Ok(key)
}

/// Bit `p` set: protocol `p` carries 16-bit source and destination ports in the first 4
/// bytes of its header (TCP, UDP, SCTP, UDP-Lite).
const PORT_PROTOS: [u64; 4] = {
    let mut t = [0u64; 4];
    let ps = [proto::TCP, proto::UDP, proto::SCTP, proto::UDPLITE];
    let mut i = 0;
    while i < ps.len() {
        t[(ps[i] / 64) as usize] |= 1 << (ps[i] % 64);
        i += 1;
    }
    t
};

/// Fill in the ports of port-carrying protocols, and TCP's flags. Branch-free in the
/// protocol (a UDP/TCP mix would otherwise mispredict): the ports are read whenever 4
/// bytes are there, the flags byte whenever 14 are, and masked to 0 for other protocols.
#[inline(always)]
fn ports(l4: &[u8], key: &mut FlowKey) -> Result<(), ParseError> {
    let has = (PORT_PROTOS[usize::from(key.proto >> 6)] >> (key.proto & 63)) & 1;
    if l4.len() >= 4 {
        let m = (has as u16).wrapping_neg();
        key.src_port = be16(l4, 0) & m;
        key.dst_port = be16(l4, 2) & m;
    } else if has != 0 {
        return Err(ParseError::Truncated(Layer::Transport));
    }
    if let Some(&flags) = l4.get(13) {
        key.tcp_flags = flags & u8::from(key.proto == proto::TCP).wrapping_neg();
    }
    Ok(())
}

/// Frame builders for tests, benchmarks and fuzzing seeds.
pub mod build {
    /// An Ethernet header with the given VLAN tags (TPID, TCI) and EtherType.
    pub fn eth(tags: &[(u16, u16)], ethertype: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        for &(tpid, tci) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    /// An IPv4 header (checksum left 0) with `options` (a multiple of 4 bytes), followed by
    /// `payload`.
    pub fn ipv4(
        src: u32,
        dst: u32,
        proto: u8,
        frag: u16,
        options: &[u8],
        payload: &[u8],
    ) -> Vec<u8> {
        assert!(options.len() % 4 == 0 && options.len() <= 40);
        let hlen = 20 + options.len();
        let total = (hlen + payload.len()) as u16;
        let mut p = vec![0x40 | (hlen / 4) as u8, 0];
        p.extend_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(&frag.to_be_bytes());
        p.extend_from_slice(&[64, proto, 0, 0]);
        p.extend_from_slice(&src.to_be_bytes());
        p.extend_from_slice(&dst.to_be_bytes());
        p.extend_from_slice(options);
        p.extend_from_slice(payload);
        p
    }

    /// An IPv6 header followed by `rest` (extension headers and payload, already chained
    /// from `next`).
    pub fn ipv6(src: u128, dst: u128, next: u8, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&(rest.len() as u16).to_be_bytes());
        p.extend_from_slice(&[next, 64]);
        p.extend_from_slice(&src.to_be_bytes());
        p.extend_from_slice(&dst.to_be_bytes());
        p.extend_from_slice(rest);
        p
    }

    /// A UDP header (8 bytes) followed by `payload`.
    pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(payload);
        p
    }

    /// A minimal TCP header (20 bytes, SYN).
    pub fn tcp(sport: u16, dport: u16) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        p
    }

    /// An Ethernet + IPv4 + UDP frame.
    pub fn udp4(src: u32, dst: u32, sport: u16, dport: u16) -> Vec<u8> {
        let mut f = eth(&[], 0x0800);
        f.extend(ipv4(src, dst, 17, 0, &[], &udp(sport, dport, &[0; 18])));
        f
    }

    /// An Ethernet + IPv4 + TCP frame.
    pub fn tcp4(src: u32, dst: u32, sport: u16, dport: u16) -> Vec<u8> {
        let mut f = eth(&[], 0x0800);
        f.extend(ipv4(src, dst, 6, 0, &[], &tcp(sport, dport)));
        f
    }

    /// An Ethernet + IPv6 + UDP frame.
    pub fn udp6(src: u128, dst: u128, sport: u16, dport: u16) -> Vec<u8> {
        let mut f = eth(&[], 0x86dd);
        f.extend(ipv6(src, dst, 17, &udp(sport, dport, &[0; 8])));
        f
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    const A: u32 = 0x0a01_0203; // 10.1.2.3
    const B: u32 = 0xc0a8_0001; // 192.168.0.1
    const A6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
    const B6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;

    /// The 5-tuple of an IP frame (the header fields beside it are
    /// `header_fields_for_rule_options`').
    fn ip(frame: &[u8]) -> FlowKey {
        match parse_frame(frame) {
            Ok(Parsed::Ip(k)) => k.five_tuple(),
            other => panic!("not an IP key: {other:?}"),
        }
    }

    /// Every strict prefix of a valid frame must be an error (or, for frames cut after the
    /// headers the parser reads, the same 5-tuple), never a panic.
    fn check_truncations(frame: &[u8], needed: usize) {
        let full = ip(frame);
        for n in 0..frame.len() {
            let r = parse_frame(&frame[..n]);
            if n < needed {
                assert!(r.is_err(), "length {n}: {r:?}");
            } else {
                assert_eq!(ip(&frame[..n]), full, "length {n}");
            }
        }
    }

    #[test]
    fn header_fields_for_rule_options() {
        let key = |f: &[u8]| match parse_frame(f) {
            Ok(Parsed::Ip(k)) => k,
            other => panic!("not an IP key: {other:?}"),
        };
        // IPv4: TOS 0xb8 (DSCP ef), TTL 64, total length, TCP SYN.
        let mut f = tcp4(A, B, 1, 2);
        f[15] = 0xb8;
        let k = key(&f);
        assert_eq!((k.tos, k.ttl, k.ip_len, k.tcp_flags), (0xb8, 64, 40, 0x02));
        // UDP has no flags, whatever its 14th byte holds.
        let k = key(&udp4(A, B, 1, 2));
        assert_eq!((k.tcp_flags, k.ip_len), (0, 46));
        // IPv6: traffic class 0x28 (af11 << 2), hop limit 64, payload + 40.
        let mut f = udp6(A6, B6, 1, 2);
        f[14] = 0x62;
        f[15] = 0x80;
        let k = key(&f);
        assert_eq!((k.tos, k.ttl, k.ip_len), (0x28, 64, 56));
        // A TCP header cut after its ports: flags 0.
        let f = tcp4(A, B, 1, 2);
        assert_eq!(key(&f[..14 + 20 + 4]).tcp_flags, 0);
    }

    #[test]
    fn ipv4_udp_and_tcp() {
        assert_eq!(ip(&udp4(A, B, 1234, 53)), FlowKey::v4(A, B, 1234, 53, 17));
        assert_eq!(ip(&tcp4(B, A, 80, 40000)), FlowKey::v4(B, A, 80, 40000, 6));
        check_truncations(&udp4(A, B, 1234, 53), 14 + 20 + 4);
    }

    #[test]
    fn vlan_tags_are_skipped() {
        let payload = ipv4(A, B, 17, 0, &[], &udp(1, 2, &[]));
        for tags in [
            vec![(0x8100, 5)],
            vec![(0x88a8, 100), (0x8100, 5)],
            vec![(0x9100, 1), (0x8100, 2)],
        ] {
            let mut f = eth(&tags, 0x0800);
            f.extend_from_slice(&payload);
            assert_eq!(ip(&f), FlowKey::v4(A, B, 1, 2, 17));
            check_truncations(&f, 14 + 4 * tags.len() + 20 + 4);
        }
        let mut f = eth(&[(0x88a8, 1), (0x8100, 2), (0x8100, 3)], 0x0800);
        f.extend_from_slice(&payload);
        assert_eq!(parse_frame(&f), Err(ParseError::TooManyVlanTags));
    }

    #[test]
    fn ipv4_options_move_the_ports() {
        let opts = [1u8, 1, 1, 0, 0x44, 8, 5, 0]; // NOPs + a timestamp option, 8 bytes
        let mut f = eth(&[], 0x0800);
        f.extend(ipv4(A, B, 17, 0, &opts, &udp(7, 9, &[])));
        assert_eq!(ip(&f), FlowKey::v4(A, B, 7, 9, 17));
        check_truncations(&f, 14 + 28 + 4);
    }

    #[test]
    fn ipv4_bad_version_and_ihl() {
        let mut f = udp4(A, B, 1, 2);
        f[14] = 0x65;
        assert_eq!(parse_frame(&f), Err(ParseError::BadIpVersion(6, "IPv4")));
        for ihl in 0..5 {
            f[14] = 0x40 | ihl;
            assert_eq!(parse_frame(&f), Err(ParseError::BadIhl(ihl)));
        }
        // IHL 15 = 60 bytes of header, beyond this 14+20+8+18 byte frame's IP header + UDP:
        // the frame is 60 bytes long, so 46 IP bytes < 60.
        f[14] = 0x4f;
        assert_eq!(parse_frame(&f), Err(ParseError::Truncated(Layer::Ipv4)));
    }

    #[test]
    fn ipv4_fragments() {
        // First fragment (MF set, offset 0): ports present.
        let mut f = eth(&[], 0x0800);
        f.extend(ipv4(A, B, 17, 0x2000, &[], &udp(5, 6, &[])));
        assert_eq!(ip(&f), FlowKey::v4(A, B, 5, 6, 17));
        // Non-first fragments (offset 185 * 8, with or without MF): no ports, even if the
        // payload happens to start with bytes that look like ports, or is empty.
        for frag in [185u16, 0x2000 | 185] {
            let mut f = eth(&[], 0x0800);
            f.extend(ipv4(A, B, 17, frag, &[], &[9, 9, 9, 9]));
            assert_eq!(ip(&f), FlowKey::v4(A, B, 0, 0, 17));
            let mut f = eth(&[], 0x0800);
            f.extend(ipv4(A, B, 6, frag, &[], &[]));
            assert_eq!(ip(&f), FlowKey::v4(A, B, 0, 0, 6));
        }
    }

    #[test]
    fn protocols_without_ports() {
        let mut f = eth(&[], 0x0800);
        f.extend(ipv4(A, B, 1, 0, &[], &[8, 0, 0, 0, 0, 1, 0, 1]));
        assert_eq!(ip(&f), FlowKey::v4(A, B, 0, 0, 1));
        // ICMP with no payload at all is fine: nothing is read past the IP header.
        let mut f = eth(&[], 0x0800);
        f.extend(ipv4(A, B, 1, 0, &[], &[]));
        assert_eq!(ip(&f), FlowKey::v4(A, B, 0, 0, 1));
        // SCTP and UDP-Lite carry ports like UDP.
        for p in [132u8, 136] {
            let mut f = eth(&[], 0x0800);
            f.extend(ipv4(A, B, p, 0, &[], &udp(11, 12, &[])));
            assert_eq!(ip(&f), FlowKey::v4(A, B, 11, 12, p));
        }
    }

    #[test]
    fn ipv6_plain() {
        assert_eq!(
            ip(&udp6(A6, B6, 4000, 443)),
            FlowKey::v6(A6, B6, 4000, 443, 17)
        );
        check_truncations(&udp6(A6, B6, 4000, 443), 14 + 40 + 4);
        let mut f = udp6(A6, B6, 1, 2);
        f[14] = 0x40;
        assert_eq!(parse_frame(&f), Err(ParseError::BadIpVersion(4, "IPv6")));
    }

    #[test]
    fn ipv6_extension_headers_are_skipped() {
        // hop-by-hop (8 bytes) -> routing (24 bytes) -> destination options (16) -> TCP.
        let mut rest = vec![43, 0, 0, 0, 0, 0, 0, 0];
        rest.extend_from_slice(&[60, 2, 0, 0, 0, 0, 0, 0]);
        rest.extend_from_slice(&[0; 16]);
        rest.extend_from_slice(&[6, 1, 0, 0, 0, 0, 0, 0]);
        rest.extend_from_slice(&[0; 8]);
        rest.extend(tcp(22, 50000));
        let mut f = eth(&[(0x8100, 3)], 0x86dd);
        f.extend(ipv6(A6, B6, 0, &rest));
        assert_eq!(ip(&f), FlowKey::v6(A6, B6, 22, 50000, 6));
        check_truncations(&f, 18 + 40 + 48 + 4);
    }

    #[test]
    fn ipv6_fragments() {
        // First fragment: offset 0, M set -> ports.
        let mut rest = vec![17, 0, 0x00, 0x01, 0, 0, 0, 42];
        rest.extend(udp(9, 10, &[]));
        let mut f = eth(&[], 0x86dd);
        f.extend(ipv6(A6, B6, 44, &rest));
        assert_eq!(ip(&f), FlowKey::v6(A6, B6, 9, 10, 17));
        // Later fragment: offset 1 (8 bytes) -> no ports, protocol from the fragment header.
        let mut rest = vec![17, 0, 0x00, 0x08, 0, 0, 0, 42];
        rest.extend_from_slice(&[1, 2, 3, 4]);
        let mut f = eth(&[], 0x86dd);
        f.extend(ipv6(A6, B6, 44, &rest));
        assert_eq!(ip(&f), FlowKey::v6(A6, B6, 0, 0, 17));
    }

    #[test]
    fn ipv6_extension_chain_is_bounded() {
        // MAX_EXT_HEADERS destination-options headers then UDP parse; one more does not.
        let chain = |n: usize| {
            let mut rest = Vec::new();
            for i in 0..n {
                let next = if i + 1 == n { 17 } else { 60 };
                rest.extend_from_slice(&[next, 0, 0, 0, 0, 0, 0, 0]);
            }
            rest.extend(udp(1, 2, &[]));
            let mut f = eth(&[], 0x86dd);
            f.extend(ipv6(A6, B6, 60, &rest));
            f
        };
        assert_eq!(ip(&chain(MAX_EXT_HEADERS)), FlowKey::v6(A6, B6, 1, 2, 17));
        assert_eq!(
            parse_frame(&chain(MAX_EXT_HEADERS + 1)),
            Err(ParseError::TooManyExtHeaders)
        );
        // An extension header whose length points past the end of the frame.
        let mut f = eth(&[], 0x86dd);
        f.extend(ipv6(A6, B6, 60, &[17, 200, 0, 0, 0, 0, 0, 0]));
        assert_eq!(parse_frame(&f), Err(ParseError::Truncated(Layer::Ipv6Ext)));
    }

    #[test]
    fn non_ip_frames() {
        let mut arp = eth(&[], 0x0806);
        arp.extend_from_slice(&[0; 28]);
        assert_eq!(parse_frame(&arp), Ok(Parsed::NonIp { ethertype: 0x0806 }));
        let tagged = eth(&[(0x8100, 1)], 0x88cc);
        assert_eq!(
            parse_frame(&tagged),
            Ok(Parsed::NonIp { ethertype: 0x88cc })
        );
        assert_eq!(
            parse_frame(&arp[..13]),
            Err(ParseError::Truncated(Layer::Ethernet))
        );
    }

    #[test]
    fn agrees_with_etherparse_on_valid_frames() {
        // An independent parser as the oracle for addresses, protocol and ports.
        use etherparse::{NetSlice, SlicedPacket, TransportSlice};
        let frames = [
            udp4(A, B, 1234, 53),
            tcp4(B, A, 80, 8080),
            udp6(A6, B6, 5353, 5353),
        ];
        for f in &frames {
            let s = SlicedPacket::from_ethernet(f).unwrap();
            let (src, dst, v6) = match s.net.unwrap() {
                NetSlice::Ipv4(h) => (
                    u128::from(u32::from(h.header().source_addr())),
                    u128::from(u32::from(h.header().destination_addr())),
                    false,
                ),
                NetSlice::Ipv6(h) => (
                    u128::from(h.header().source_addr()),
                    u128::from(h.header().destination_addr()),
                    true,
                ),
                _ => unreachable!(),
            };
            let (sp, dp) = match s.transport.unwrap() {
                TransportSlice::Udp(u) => (u.source_port(), u.destination_port()),
                TransportSlice::Tcp(t) => (t.source_port(), t.destination_port()),
                _ => unreachable!(),
            };
            let k = ip(f);
            assert_eq!(
                (k.src, k.dst, k.v6, k.src_port, k.dst_port),
                (src, dst, v6, sp, dp)
            );
        }
    }
}
