//! The flow key: the 5-tuple a frame is classified by, and what masks are applied to.
//!
//! IPv4 addresses live in the low 32 bits of `src`/`dst` (the high bits are zero) and
//! `v6 == false`; IPv6 addresses use all 128 bits and `v6 == true`. Protocols without ports
//! (ICMP, non-first fragments, ...) have ports 0.
//!
//! Beside the 5-tuple, a key carries the header fields rule options read (`tcpflags`,
//! `iplen`, `ipttl`, `dscp`): they fit in the key's padding (it stays 48 bytes), are not
//! part of the flow (masks clear them, [`FlowKey::to_words`] leaves them out) and are 0 in
//! a key not parsed from a frame.
//!
//! The engine ships keys from the client threads to the arbiter through a ring of `u64`
//! words, hence [`FlowKey::to_words`] / [`FlowKey::from_words`], and the arbiter's maps hash
//! them with [`FlowKey::hash64`], a multiply-xorshift mix (a few ns; not DoS-resistant,
//! which the bounded, per-class maps do not need: a collision flood costs probe length,
//! never memory).

use crate::model::FlowMask;

/// A packet's 5-tuple (plus the address family).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source address (IPv4 in the low 32 bits).
    pub src: u128,
    /// Destination address (IPv4 in the low 32 bits).
    pub dst: u128,
    pub src_port: u16,
    pub dst_port: u16,
    /// IP protocol number (the upper-layer protocol, after IPv6 extension headers).
    pub proto: u8,
    /// IPv6 (`true`) or IPv4 (`false`).
    pub v6: bool,
    /// The TCP flags byte (0 for other protocols, non-first fragments, and a TCP header
    /// cut before it).
    pub tcp_flags: u8,
    /// The IPv4 TOS byte or IPv6 traffic class (DSCP in its top 6 bits).
    pub tos: u8,
    /// The IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// The IP datagram's length: IPv4 total length, IPv6 payload length plus 40
    /// (saturating).
    pub ip_len: u16,
}

/// Multipliers of the mix (odd 64-bit constants with well-spread bits, as in splitmix64).
const M1: u64 = 0x9e37_79b9_7f4a_7c15;
const M2: u64 = 0xbf58_476d_1ce4_e5b9;
const M3: u64 = 0x94d0_49bb_1331_11eb;

impl FlowKey {
    /// An IPv4 key.
    pub fn v4(src: u32, dst: u32, src_port: u16, dst_port: u16, proto: u8) -> Self {
        FlowKey {
            src: u128::from(src),
            dst: u128::from(dst),
            src_port,
            dst_port,
            proto,
            v6: false,
            ..FlowKey::default()
        }
    }

    /// An IPv6 key.
    pub fn v6(src: u128, dst: u128, src_port: u16, dst_port: u16, proto: u8) -> Self {
        FlowKey {
            src,
            dst,
            src_port,
            dst_port,
            proto,
            v6: true,
            ..FlowKey::default()
        }
    }

    /// The key without the header fields beside the 5-tuple (what [`FlowKey::v4`] and
    /// [`FlowKey::v6`] build).
    #[inline]
    pub fn five_tuple(&self) -> FlowKey {
        FlowKey {
            tcp_flags: 0,
            tos: 0,
            ttl: 0,
            ip_len: 0,
            ..*self
        }
    }

    /// The IPv4 source address (meaningful when `!v6`).
    #[inline]
    pub fn src_v4(&self) -> u32 {
        self.src as u32
    }

    /// The IPv4 destination address (meaningful when `!v6`).
    #[inline]
    pub fn dst_v4(&self) -> u32 {
        self.dst as u32
    }

    /// The key with `mask` applied: IPv4 keys use the mask's `src_ip`/`dst_ip`, IPv6 keys
    /// `src_ip6`/`dst_ip6`. The family flag survives only if the family's address masks
    /// keep a bit, so that a mask with no address bits (say `mask dst-port 0xffff`, or the
    /// empty mask: one queue) maps IPv4 and IPv6 packets alike.
    #[inline]
    pub fn masked(&self, mask: &FlowMask) -> FlowKey {
        let (ms, md) = if self.v6 {
            (mask.src_ip6, mask.dst_ip6)
        } else {
            (u128::from(mask.src_ip), u128::from(mask.dst_ip))
        };
        FlowKey {
            src: self.src & ms,
            dst: self.dst & md,
            src_port: self.src_port & mask.src_port,
            dst_port: self.dst_port & mask.dst_port,
            proto: self.proto & mask.proto,
            v6: self.v6 && (ms | md) != 0,
            ..FlowKey::default()
        }
    }

    /// The key as five words: source low/high, destination low/high, then
    /// `src_port | dst_port << 16 | proto << 32 | v6 << 40`.
    #[inline]
    pub fn to_words(&self) -> [u64; 5] {
        [
            self.src as u64,
            (self.src >> 64) as u64,
            self.dst as u64,
            (self.dst >> 64) as u64,
            u64::from(self.src_port)
                | u64::from(self.dst_port) << 16
                | u64::from(self.proto) << 32
                | u64::from(self.v6) << 40,
        ]
    }

    /// The inverse of [`FlowKey::to_words`] (bits of the last word above bit 40 are ignored).
    #[inline]
    pub fn from_words(w: [u64; 5]) -> Self {
        FlowKey {
            src: u128::from(w[0]) | u128::from(w[1]) << 64,
            dst: u128::from(w[2]) | u128::from(w[3]) << 64,
            src_port: w[4] as u16,
            dst_port: (w[4] >> 16) as u16,
            proto: (w[4] >> 32) as u8,
            v6: (w[4] >> 40) & 1 == 1,
            ..FlowKey::default()
        }
    }

    /// A 64-bit hash: each word is folded in with a multiply and a xor-shift, then the
    /// splitmix64 finaliser spreads every input bit over the output.
    #[inline]
    pub fn hash64(&self) -> u64 {
        let w = self.to_words();
        let mut h = w[4].wrapping_mul(M1);
        for x in &w[..4] {
            h = (h ^ x).wrapping_mul(M1);
            h ^= h >> 29;
        }
        h = (h ^ (h >> 30)).wrapping_mul(M2);
        h = (h ^ (h >> 27)).wrapping_mul(M3);
        h ^ (h >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn any_key() -> impl Strategy<Value = FlowKey> {
        (
            any::<u128>(),
            any::<u128>(),
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
            any::<bool>(),
        )
            .prop_map(|(s, d, sp, dp, p, v6)| {
                if v6 {
                    FlowKey::v6(s, d, sp, dp, p)
                } else {
                    FlowKey::v4(s as u32, d as u32, sp, dp, p)
                }
            })
    }

    proptest! {
        #[test]
        fn words_round_trip(k in any_key()) {
            prop_assert_eq!(FlowKey::from_words(k.to_words()), k);
        }

        #[test]
        fn masking_is_idempotent_and_all_keeps_everything(k in any_key()) {
            // (`any_key` has no header fields beside the 5-tuple, which masks clear.)
            prop_assert_eq!(k.masked(&FlowMask::ALL), k);
            let m = FlowMask { src_ip: 0xff, dst_port: 0xff00, ..FlowMask::default() };
            prop_assert_eq!(k.masked(&m).masked(&m), k.masked(&m));
        }

        #[test]
        fn hash_of_keys_differing_in_one_field_differs(k in any_key(), bit in 0u32..16) {
            // Not a guarantee of a hash in general, but a 64-bit mix that collides on a
            // one-bit change of a port would be broken.
            let mut k2 = k;
            k2.src_port ^= 1 << bit;
            prop_assert_ne!(k.hash64(), k2.hash64());
        }
    }

    #[test]
    fn header_fields_ride_in_the_padding_and_leave_the_flow() {
        assert_eq!(std::mem::size_of::<FlowKey>(), 48);
        let k = FlowKey {
            tcp_flags: 0x12,
            tos: 0xb8,
            ttl: 64,
            ip_len: 1500,
            ..FlowKey::v4(1, 2, 3, 4, 6)
        };
        assert_eq!(k.masked(&FlowMask::ALL), FlowKey::v4(1, 2, 3, 4, 6));
        assert_eq!(FlowKey::from_words(k.to_words()), k.five_tuple());
        assert_eq!(k.five_tuple(), FlowKey::v4(1, 2, 3, 4, 6));
    }

    #[test]
    fn empty_mask_maps_everything_to_one_key() {
        let a = FlowKey::v4(0x0102_0304, 5, 6, 7, 17);
        let b = FlowKey::v6(1 << 100, 9, 10, 11, 6);
        let m = FlowMask::default();
        assert_eq!(a.masked(&m), FlowKey::default());
        assert_eq!(b.masked(&m), FlowKey::default());
    }

    #[test]
    fn family_masks_are_separate() {
        let m = FlowMask {
            src_ip: 0xffff_ff00,
            ..FlowMask::default()
        };
        let a = FlowKey::v4(0x0a00_0105, 0x0a00_0201, 1000, 53, 17);
        assert_eq!(a.masked(&m), FlowKey::v4(0x0a00_0100, 0, 0, 0, 0));
        // An IPv6 key ignores the IPv4 address mask and loses its family flag.
        let b = FlowKey::v6(u128::MAX, 1, 1, 1, 17);
        assert_eq!(b.masked(&m), FlowKey::default());
        let m6 = FlowMask {
            src_ip6: u128::MAX << 64,
            ..FlowMask::default()
        };
        assert_eq!(b.masked(&m6), FlowKey::v6(u128::MAX << 64, 0, 0, 0, 0));
        assert_eq!(a.masked(&m6), FlowKey::default());
    }

    #[test]
    fn hash_spreads_masked_keys_over_buckets() {
        // 256 keys differing in the last byte of the source (the slides' `mask src-ip 0xff`)
        // must land in many distinct buckets of a 512-slot table.
        let buckets: HashSet<u64> = (0..256u32)
            .map(|i| FlowKey::v4(0x0a00_0000 | i, 0, 0, 0, 0).hash64() & 511)
            .collect();
        assert!(buckets.len() > 128, "only {} buckets", buckets.len());
    }
}
