//! Longest-prefix match for IPv4 and IPv6 tables.
//!
//! **Representation.** The prefixes of a table cut the address space into disjoint
//! intervals, each with one answer: the value of the longest prefix covering it, or none.
//! Building flattens the prefixes into the sorted starts of those intervals (a sweep over
//! the prefixes in address order with a stack of the enclosing ones; adjacent intervals with
//! the same answer are merged), so a lookup is a search for the last start `<=` the
//! address: no tree walk, no per-prefix-length probing, no allocation.
//!
//! - IPv4 packs each interval as `start << 32 | value index` (one u64: the value comes
//!   with the compare) and adds a two-level index: `dir[k]` is the interval holding address
//!   `k << 16`, so the answer for an address of /16 block `k` is among intervals
//!   `dir[k]..=dir[k + 1]`; a block with more than [`DENSE`] intervals also gets a /24
//!   index of 257 entries narrowing that range to the address's /24, and an entry whose
//!   /24 holds a single interval carries the answer itself (the common case for tables of
//!   /24s and shorter: two loads, no search). Otherwise the answer is found by a binary
//!   search of a fixed number of steps (the table's longest index range), branch-free in
//!   the address (see `find_packed`).
//! - IPv6 searches all the intervals (tables of IPv6 prefixes are small in practice, and
//!   their prefixes share their top bits, which would defeat a top-bits index).
//!
//! **Cost.** n prefixes give at most 2n + 1 intervals. IPv4 lookup: one or two index loads,
//! then, unless the /24 entry answers, `ceil(log2(m))` steps where m is the longest range
//! an index entry leaves (m <= 2n + 1; 3 steps for the benchmark's 10k prefixes). IPv6:
//! `ceil(log2(2n + 1))` steps. Build: O(n log n + 2^16). Memory: 16 B per interval, 512 KiB
//! for the /16 index, 2 KiB per dense /16 block (at most min((2n + 1) / DENSE, 2^16)
//! blocks: about 8 MiB for 10k prefixes in the worst case; 256 blocks = 512 KiB in the
//! benchmark). Measured in docs/PERFORMANCE.md ("Classifier").
//!
//! A prefix whose address has bits set beyond its length is taken as the network it names
//! (the bits are cleared); duplicate prefixes keep the last value (validation rejects both).

use std::net::IpAddr;

use crate::model::Prefix;

/// An address type the interval sweep works on.
trait Addr: Copy + Ord {
    const ZERO: Self;
    /// First and last addresses of the prefix `addr/len`.
    fn range(addr: Self, len: u8) -> (Self, Self);
    /// `self + 1`, if it exists.
    fn succ(self) -> Option<Self>;
}

macro_rules! impl_addr {
    ($t:ty) => {
        impl Addr for $t {
            const ZERO: Self = 0;
            fn range(addr: Self, len: u8) -> (Self, Self) {
                let len = u32::from(len).min(<$t>::BITS);
                // `checked_shr` because a shift by the full width (len 32 / 128) overflows.
                let host = if len == 0 {
                    <$t>::MAX
                } else {
                    <$t>::MAX.checked_shr(len).unwrap_or(0)
                };
                (addr & !host, addr | host)
            }
            fn succ(self) -> Option<Self> {
                self.checked_add(1)
            }
        }
    };
}
impl_addr!(u32);
impl_addr!(u128);

/// Sorted disjoint intervals covering the whole address space: interval `i` is
/// `starts[i]..starts[i + 1]` (the last one runs to the end) and answers `vals[i]`.
/// Invariants: `starts[0] == 0`, `starts` strictly increasing, `vals[i] != vals[i + 1]`.
#[derive(Clone, Debug)]
struct Intervals<A> {
    starts: Vec<A>,
    vals: Vec<Option<u32>>,
}

impl<A: Addr> Intervals<A> {
    fn build(mut prefixes: Vec<(A, u8, u32)>) -> Self {
        // Sort by first address, then shorter (enclosing) prefixes first, so a prefix is
        // always visited after every prefix that contains it. The sort is stable: of
        // duplicates, the last written comes last and wins.
        let mut ranges: Vec<(A, A, u8, u32)> = prefixes
            .drain(..)
            .map(|(a, len, v)| {
                let (lo, hi) = A::range(a, len);
                (lo, hi, len, v)
            })
            .collect();
        ranges.sort_by_key(|&(lo, _, len, _)| (lo, len));
        let mut iv = Intervals {
            starts: vec![A::ZERO],
            vals: vec![None],
        };
        // Enclosing prefixes of the current position: (last address, value), innermost last.
        let mut stack: Vec<(A, u32)> = Vec::new();
        for (lo, hi, _, v) in ranges {
            while let Some(&(end, _)) = stack.last() {
                if end >= lo {
                    break;
                }
                stack.pop();
                // `end < lo` so `end + 1` exists.
                iv.push(end.succ().unwrap_or(A::ZERO), stack.last().map(|s| s.1));
            }
            iv.push(lo, Some(v));
            stack.push((hi, v));
        }
        while let Some((end, _)) = stack.pop() {
            if let Some(next) = end.succ() {
                iv.push(next, stack.last().map(|s| s.1));
            }
        }
        iv
    }

    /// Append the interval starting at `start` (>= the last start): replaces the last one if
    /// it starts at the same address, and merges it if its answer is the same.
    fn push(&mut self, start: A, val: Option<u32>) {
        let n = self.starts.len();
        if self.starts[n - 1] == start {
            self.vals[n - 1] = val;
            // The replaced interval may now repeat its predecessor's answer.
            if n >= 2 && self.vals[n - 2] == val {
                self.starts.pop();
                self.vals.pop();
            }
        } else if self.vals[n - 1] != val {
            self.starts.push(start);
            self.vals.push(val);
        }
    }

    /// The interval in `lo..=hi` holding `addr`; requires `starts[lo] <= addr` and `addr`
    /// below the start of interval `hi + 1`. Branchless: the loop count depends only on the
    /// slice length, and the step is a conditional move.
    #[inline(always)]
    fn find(&self, lo: usize, hi: usize, addr: A) -> usize {
        let starts = &self.starts[lo..=hi];
        let mut base = 0;
        let mut len = starts.len();
        while len > 1 {
            let half = len / 2;
            // `base + half < base + len <= starts.len()`.
            base = if starts[base + half] <= addr {
                base + half
            } else {
                base
            };
            len -= half;
        }
        lo + base
    }
}

/// A /16 block with more intervals than this gets a /24 index.
const DENSE: usize = 4;

/// "No prefix" in the packed IPv4 intervals.
const NONE: u32 = u32::MAX;

/// The last entry `<= key` of `packed[lo..=hi]`, given `packed[lo] <= key`, in exactly
/// `steps` halvings (`hi - lo + 1 <= 2^steps`; once the range is one entry a step compares
/// it with itself and changes nothing). Branch-free in the data: the step is a select on
/// the comparison, and the number of steps is the table's, not the address's.
///
/// The steps are unrolled, each behind a `steps > i` test that goes the same way for every
/// lookup of a table: in a loop, LLVM's x86 cmov-conversion pass turns the select back into
/// a branch, which mispredicts half the time on random addresses (measured with
/// callgrind's branch simulator, docs/PERFORMANCE.md).
#[inline(always)]
#[allow(unused_assignments)] // the last step's `len -= half`
fn find_packed(packed: &[u64], lo: usize, hi: usize, key: u64, steps: u32) -> u64 {
    let s = &packed[lo..=hi];
    let mut base = 0;
    let mut len = s.len();
    macro_rules! step {
        ($($i:literal)*) => {$(
            if steps > $i {
                let half = len / 2;
                base = if s[base + half] <= key { base + half } else { base };
                len -= half;
            }
        )*};
    }
    // 2^34 intervals is beyond any table (n prefixes make at most 2n + 1 intervals).
    step!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33);
    s[base]
}

/// Halvings that reduce `n` entries to one.
fn steps_for(n: usize) -> u32 {
    n.next_power_of_two().trailing_zeros()
}

/// An IPv4 table: the intervals packed as `start << 32 | value index` (so the value comes
/// with the last compare's cache line, and "start <= addr" is "entry <= addr << 32 |
/// 0xffff_ffff"), plus the two-level index.
#[derive(Clone, Debug)]
struct Lpm4 {
    packed: Vec<u64>,
    /// Per /16 block `k` in `0..=65536`: the low 32 bits are the interval holding
    /// `k << 16` (entry 65536: the last interval, so entry `k + 1` bounds block `k`); the
    /// high 32 bits are 0, or 1 + the offset in `l2` of the block's /24 index.
    dir: Vec<u64>,
    /// /24 indices of dense blocks, 257 entries each: the low 32 bits of entry `j` are the
    /// interval holding `k << 16 | j << 8` (entry 256: the one holding `(k + 1) << 16`);
    /// the high 32 bits are 1 + that interval's value index when the /24 holds only that
    /// interval (the answer, with no search), else 0.
    l2: Vec<u64>,
    /// Search steps of every lookup: enough for the longest range an index entry leaves.
    steps: u32,
}

impl Lpm4 {
    fn build(prefixes: Vec<(u32, u8, u32)>) -> Self {
        let iv = Intervals::build(prefixes);
        let n = iv.starts.len();
        // The interval holding `a`, advancing `i` (addresses are visited in order).
        let holding = |i: &mut usize, a: u32| {
            while *i + 1 < n && iv.starts[*i + 1] <= a {
                *i += 1;
            }
            *i
        };
        let mut lo = Vec::with_capacity(65537);
        let mut i = 0usize;
        for k in 0..65536u32 {
            lo.push(holding(&mut i, k << 16));
        }
        lo.push(n - 1);
        let mut dir = Vec::with_capacity(65537);
        let mut l2 = Vec::new();
        let mut longest = 1;
        for k in 0..65536usize {
            let (a, b) = (lo[k], lo[k + 1]);
            if b - a < DENSE {
                dir.push(a as u64);
                longest = longest.max(b - a + 1);
                continue;
            }
            dir.push(a as u64 | (l2.len() as u64 + 1) << 32);
            let mut i = a;
            let los: Vec<usize> = (0..256u32)
                .map(|j| holding(&mut i, (k as u32) << 16 | j << 8))
                .chain([b])
                .collect();
            for w in los.windows(2) {
                let direct = if w[0] == w[1] {
                    u64::from(iv.vals[w[0]].unwrap_or(NONE)) + 1
                } else {
                    longest = longest.max(w[1] - w[0] + 1);
                    0
                };
                l2.push(w[0] as u64 | direct << 32);
            }
            l2.push(b as u64);
        }
        dir.push(lo[65536] as u64);
        let packed = iv
            .starts
            .iter()
            .zip(&iv.vals)
            .map(|(&s, v)| u64::from(s) << 32 | u64::from(v.unwrap_or(NONE)))
            .collect();
        Lpm4 {
            packed,
            dir,
            l2,
            steps: steps_for(longest),
        }
    }

    /// The value index of `addr`, or `NONE`. Not inlined: inlined into the classifier's
    /// rule loop, its setup was hoisted out of the loop and spilled for every packet, for
    /// both addresses (callgrind: 17 instructions a packet more than the call).
    #[inline(never)]
    fn lookup(&self, addr: u32) -> u32 {
        let k = (addr >> 16) as usize;
        let e = self.dir[k];
        let (lo, hi) = if e >> 32 == 0 {
            (e as u32 as usize, self.dir[k + 1] as u32 as usize)
        } else {
            let b = (e >> 32) as usize - 1 + ((addr >> 8) & 0xff) as usize;
            let x = self.l2[b];
            if x >> 32 != 0 {
                return ((x >> 32) - 1) as u32;
            }
            (x as u32 as usize, self.l2[b + 1] as u32 as usize)
        };
        let key = u64::from(addr) << 32 | u64::from(u32::MAX);
        find_packed(&self.packed, lo, hi, key, self.steps) as u32
    }
}

/// A longest-prefix-match table over IPv4 and IPv6 prefixes, each mapped to a `u32`.
///
/// Values are stored as indices into [`Lpm::values`] (its distinct values, sorted), which
/// the `*_index` lookups return: a caller that maps values to something else (the
/// classifier maps them to classes) can then use a dense array.
#[derive(Clone, Debug)]
pub struct Lpm {
    v4: Lpm4,
    v6: Intervals<u128>,
    values: Vec<u32>,
    len: usize,
}

impl Lpm {
    /// Build from `(prefix, value)` entries, in any order.
    pub fn new<'a>(entries: impl IntoIterator<Item = (&'a Prefix, u32)>) -> Self {
        let entries: Vec<(&Prefix, u32)> = entries.into_iter().collect();
        let mut values: Vec<u32> = entries.iter().map(|e| e.1).collect();
        values.sort_unstable();
        values.dedup();
        let index = |v: u32| values.binary_search(&v).unwrap_or(0) as u32;
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for &(p, v) in &entries {
            match p.addr {
                IpAddr::V4(a) => v4.push((u32::from(a), p.len.min(32), index(v))),
                IpAddr::V6(a) => v6.push((u128::from(a), p.len.min(128), index(v))),
            }
        }
        Lpm {
            v4: Lpm4::build(v4),
            v6: Intervals::build(v6),
            len: entries.len(),
            values,
        }
    }

    /// The number of prefixes it was built from.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it was built from no prefix.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The distinct values, sorted; the `*_index` lookups index this.
    pub fn values(&self) -> &[u32] {
        &self.values
    }

    /// The index (into [`Lpm::values`]) of the value of the longest IPv4 prefix holding
    /// `addr`.
    #[inline(always)]
    pub fn lookup_v4_index(&self, addr: u32) -> Option<u32> {
        let i = self.v4.lookup(addr);
        (i != NONE).then_some(i)
    }

    /// The index of the value of the longest IPv6 prefix holding `addr`.
    #[inline]
    pub fn lookup_v6_index(&self, addr: u128) -> Option<u32> {
        let n = self.v6.starts.len();
        self.v6.vals[self.v6.find(0, n - 1, addr)]
    }

    /// The value index for an address of a [`FlowKey`](super::FlowKey) (IPv4 in the low 32
    /// bits when `!v6`).
    #[inline(always)]
    pub fn lookup_index(&self, addr: u128, v6: bool) -> Option<u32> {
        if v6 {
            self.lookup_v6_index(addr)
        } else {
            self.lookup_v4_index(addr as u32)
        }
    }

    /// The value of the longest IPv4 prefix holding `addr`.
    #[inline]
    pub fn lookup_v4(&self, addr: u32) -> Option<u32> {
        self.lookup_v4_index(addr).map(|i| self.values[i as usize])
    }

    /// The value of the longest IPv6 prefix holding `addr`.
    #[inline]
    pub fn lookup_v6(&self, addr: u128) -> Option<u32> {
        self.lookup_v6_index(addr).map(|i| self.values[i as usize])
    }

    /// Search steps of every IPv4 lookup.
    pub fn v4_steps(&self) -> u32 {
        self.v4.steps
    }

    /// Intervals of the IPv4 part.
    pub fn v4_intervals(&self) -> usize {
        self.v4.packed.len()
    }

    /// [`Lpm::lookup_v4`] without the index: a binary search over all the intervals. Only
    /// for the benchmark that justifies the index.
    #[doc(hidden)]
    pub fn lookup_v4_flat(&self, addr: u32) -> Option<u32> {
        let p = &self.v4.packed;
        let key = u64::from(addr) << 32 | u64::from(u32::MAX);
        let i = find_packed(p, 0, p.len() - 1, key, steps_for(p.len())) as u32;
        (i != NONE).then(|| self.values[i as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn p4(a: u32, len: u8) -> Prefix {
        Prefix {
            addr: IpAddr::V4(Ipv4Addr::from(a)),
            len,
        }
    }

    fn p6(a: u128, len: u8) -> Prefix {
        Prefix {
            addr: IpAddr::V6(Ipv6Addr::from(a)),
            len,
        }
    }

    /// The obviously-correct model: scan every entry, keep the longest match (the last one
    /// written among equal prefixes).
    fn naive(entries: &[(Prefix, u32)], addr: IpAddr) -> Option<u32> {
        let mut best: Option<(u8, u32)> = None;
        for &(p, v) in entries {
            let hit = match (p.addr, addr) {
                (IpAddr::V4(n), IpAddr::V4(a)) => {
                    p.len == 0 || (u32::from(n) ^ u32::from(a)) >> (32 - u32::from(p.len)) == 0
                }
                (IpAddr::V6(n), IpAddr::V6(a)) => {
                    p.len == 0 || (u128::from(n) ^ u128::from(a)) >> (128 - u32::from(p.len)) == 0
                }
                _ => false,
            };
            let longer = match best {
                None => true,
                Some((l, _)) => p.len >= l,
            };
            if hit && longer {
                best = Some((p.len, v));
            }
        }
        best.map(|b| b.1)
    }

    fn lookup(t: &Lpm, a: IpAddr) -> Option<u32> {
        match a {
            IpAddr::V4(a) => t.lookup_v4(u32::from(a)),
            IpAddr::V6(a) => t.lookup_v6(u128::from(a)),
        }
    }

    #[test]
    fn slides_table() {
        // ipfw table 1 add 1.2.3.0/24 20; 1.2.3.8 21; 1.2.4.0/20 25 (the slides' example;
        // 1.2.4.0/20 is the network 1.2.0.0/20, which encloses the /24).
        let e = [
            (p4(0x0102_0300, 24), 20),
            (p4(0x0102_0308, 32), 21),
            (p4(0x0102_0400, 20), 25),
        ];
        let t = Lpm::new(e.iter().map(|(p, v)| (p, *v)));
        assert_eq!(t.lookup_v4(0x0102_0301), Some(20));
        assert_eq!(t.lookup_v4(0x0102_0308), Some(21));
        assert_eq!(t.lookup_v4(0x0102_0309), Some(20));
        assert_eq!(t.lookup_v4(0x0102_0400), Some(25));
        assert_eq!(t.lookup_v4(0x0102_0fff), Some(25));
        assert_eq!(t.lookup_v4(0x0102_1000), None);
        assert_eq!(t.lookup_v4(0), None);
        assert_eq!(t.lookup_v6(1), None);
    }

    #[test]
    fn edges_of_the_space() {
        let e = [
            (p4(0, 0), 1),
            (p4(0xffff_ffff, 32), 2),
            (p4(0, 32), 3),
            (p6(0, 0), 4),
            (p6(u128::MAX, 128), 5),
        ];
        let t = Lpm::new(e.iter().map(|(p, v)| (p, *v)));
        assert_eq!(t.lookup_v4(0), Some(3));
        assert_eq!(t.lookup_v4(1), Some(1));
        assert_eq!(t.lookup_v4(u32::MAX), Some(2));
        assert_eq!(t.lookup_v4(u32::MAX - 1), Some(1));
        assert_eq!(t.lookup_v6(u128::MAX), Some(5));
        assert_eq!(t.lookup_v6(7), Some(4));
        let empty = Lpm::new([]);
        assert!(empty.is_empty());
        assert_eq!(empty.lookup_v4(5), None);
        assert_eq!(empty.lookup_v6(5), None);
    }

    #[test]
    fn dense_block_against_a_linear_scan() {
        // 10.1.0.0/16 holds a /20, /24s, /28s and /32s; every address of it and of its
        // neighbours is checked.
        let mut e = vec![(p4(0x0a01_0000, 20), 1)];
        for j in 0..40u32 {
            e.push((p4(0x0a01_0000 | ((j * 613) & 0xff) << 8, 24), 100 + j));
            e.push((p4(0x0a01_0000 | ((j * 1031) & 0xfff) << 4, 28), 200 + j));
            e.push((p4(0x0a01_0000 | ((j * 7919) & 0xffff), 32), 300 + j));
        }
        e.push((p4(0x0a02_0000, 16), 2));
        let t = Lpm::new(e.iter().map(|(p, v)| (p, *v)));
        assert!(!t.v4.l2.is_empty(), "the block should be dense");
        for a in 0x0a00_ff00u32..0x0a02_0100 {
            let ip = IpAddr::V4(Ipv4Addr::from(a));
            assert_eq!(t.lookup_v4(a), naive(&e, ip), "{ip}");
            assert_eq!(t.lookup_v4_flat(a), naive(&e, ip), "{ip}");
        }
    }

    /// Prefixes drawn from a few short "networks" so that they nest and collide often.
    fn entries() -> impl Strategy<Value = Vec<(Prefix, u32)>> {
        // Half of them within four /16 blocks, so that blocks get the /24 index.
        let v4 =
            (0u32..4, any::<u32>(), 0u8..=32, any::<bool>()).prop_map(|(net, low, len, narrow)| {
                let a = (net << 30) | (low & if narrow { 0x0003_ffff } else { 0x00ff_ffff });
                let (lo, _) = <u32 as Addr>::range(a, len);
                p4(lo, len)
            });
        let v6 = (0u128..4, any::<u128>(), 0u8..=128).prop_map(|(net, low, len)| {
            let a = (net << 126) | (low & 0xffff_ffff);
            let (lo, _) = <u128 as Addr>::range(a, len);
            p6(lo, len)
        });
        prop::collection::vec((prop_oneof![v4, v6], 0u32..8), 0..60)
    }

    fn probe(entries: &[(Prefix, u32)], extra: &[u128]) -> Vec<IpAddr> {
        // The first and last address of every prefix and their neighbours, plus randoms.
        let mut out = Vec::new();
        for (p, _) in entries {
            match p.addr {
                IpAddr::V4(a) => {
                    let (lo, hi) = <u32 as Addr>::range(u32::from(a), p.len);
                    for x in [lo.wrapping_sub(1), lo, hi, hi.wrapping_add(1)] {
                        out.push(IpAddr::V4(Ipv4Addr::from(x)));
                    }
                }
                IpAddr::V6(a) => {
                    let (lo, hi) = <u128 as Addr>::range(u128::from(a), p.len);
                    for x in [lo.wrapping_sub(1), lo, hi, hi.wrapping_add(1)] {
                        out.push(IpAddr::V6(Ipv6Addr::from(x)));
                    }
                }
            }
        }
        for &x in extra {
            out.push(IpAddr::V4(Ipv4Addr::from(x as u32)));
            out.push(IpAddr::V4(Ipv4Addr::from((x as u32) & 0xc0ff_ffff)));
            out.push(IpAddr::V6(Ipv6Addr::from(x)));
            out.push(IpAddr::V6(Ipv6Addr::from(x & (3 << 126 | 0xffff_ffff))));
        }
        out
    }

    proptest! {
        #[test]
        fn matches_a_linear_scan(e in entries(), extra in prop::collection::vec(any::<u128>(), 0..20)) {
            let t = Lpm::new(e.iter().map(|(p, v)| (p, *v)));
            prop_assert_eq!(t.len(), e.len());
            for a in probe(&e, &extra) {
                prop_assert_eq!(lookup(&t, a), naive(&e, a), "address {}", a);
                if let IpAddr::V4(x) = a {
                    prop_assert_eq!(t.lookup_v4_flat(u32::from(x)), naive(&e, a), "address {}", a);
                }
            }
        }

        #[test]
        fn intervals_are_canonical(e in entries()) {
            let t = Lpm::new(e.iter().map(|(p, v)| (p, *v)));
            let p = &t.v4.packed;
            prop_assert!(p.windows(2).all(|w| w[0] >> 32 < w[1] >> 32));
            prop_assert!(p.windows(2).all(|w| w[0] as u32 != w[1] as u32));
            prop_assert!(t.v6.starts.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(t.v6.vals.windows(2).all(|w| w[0] != w[1]));
            prop_assert!(p.len() <= 2 * e.len() + 1);
        }
    }
}
