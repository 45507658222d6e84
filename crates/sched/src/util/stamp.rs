//! Wrapping fixed-point virtual time for the rounded-timestamp schedulers (QFQ, QFQ+, KPS).
//!
//! # Units and bit budget
//!
//! The unit is the one of [`crate::vtime`]: bytes per unit of weight with
//! [`FRAC_BITS`]` = 32` fractional bits, so costs computed here and there agree. What
//! differs is the width: a timestamp here is a `u64` that *wraps*, not a `u128` that never
//! does. The rounded-timestamp schedulers keep every live timestamp within a few slot
//! sizes of the system virtual time `V`, and their largest slot is `2^52` units (a
//! 1 MiB packet at weight 1: `2^20 * 2^32`), so any two live timestamps are far closer
//! than `2^63` and [`after`] (the sign of the wrapped difference) orders them correctly
//! across a wrap. `u64` arithmetic keeps the per-packet work to single instructions.
//!
//! - `len <= 2^20` bytes ([`crate::MAX_PACKET_LEN`]) and every divisor `d >= 1`, so one
//!   packet costs at most `2^52` units; an aggregate's budget (QFQ+) at most
//!   `M * 2^20 <= 2^27` bytes, `2^59` units.
//! - `V` wraps every `2^32` bytes per unit weight (4 GiB at total weight 1). Slot sizes
//!   are powers of two, so slot boundaries are aligned modulo `2^64` and a wrap of `V` is
//!   a crossing of *every* slot boundary, which is what it is (see the eligibility update
//!   of QFQ): wrapping changes no decision.
//! - Division by a weight is a multiplication by a reciprocal ([`Recip`]) with 63
//!   fractional bits: `floor(2^63 / d)`, exact for powers of two and with a relative error
//!   below `d / 2^63` otherwise (below `2^-40` for any weight sum a scheduler can reach,
//!   `2^31` flows of weight `2^16`).

use crate::flow::MAX_PACKET_LEN;

/// Fractional bits of a timestamp (the same unit as [`crate::vtime::FRAC_BITS`]).
pub const FRAC_BITS: u32 = crate::vtime::FRAC_BITS;

/// `a > b` in wrapping virtual time: the one comparison of the rounded-timestamp
/// schedulers (valid while `|a - b| < 2^63`, see the module documentation).
#[inline(always)]
pub fn after(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) > 0
}

/// `t` rounded down to a multiple of `2^shift`.
#[inline(always)]
pub fn round_down(t: u64, shift: u32) -> u64 {
    t & !((1u64 << shift) - 1)
}

/// `t` rounded up to a multiple of `2^shift` (wrapping).
#[inline(always)]
pub fn round_up(t: u64, shift: u32) -> u64 {
    round_down(t.wrapping_add((1u64 << shift) - 1), shift)
}

/// The virtual cost of a byte at divisor `d` (a weight, an aggregate weight or a weight
/// sum): `cost(len) = len * 2^32 / d`, by a multiplication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recip {
    /// `floor(2^63 / d)`.
    inv: u64,
}

impl Default for Recip {
    fn default() -> Self {
        Self::new(1)
    }
}

impl Recip {
    /// The reciprocal of `d >= 1`.
    pub const fn new(d: u64) -> Self {
        assert!(d > 0, "reciprocal of zero");
        Self {
            inv: (1u64 << 63) / d,
        }
    }

    /// `floor(bytes * 2^32 / d)` up to the rounding of the reciprocal. `bytes < 2^32`.
    #[inline(always)]
    pub fn cost(self, bytes: u64) -> u64 {
        debug_assert!(bytes < 1 << 32);
        ((u128::from(bytes) * u128::from(self.inv)) >> (63 - FRAC_BITS)) as u64
    }

    /// Like [`Recip::cost`], also returning the fraction of a unit dropped (in units of
    /// `2^-31`), for callers that carry it ([`Clock`]).
    #[inline(always)]
    fn cost_frac(self, bytes: u64, carry: u64) -> (u64, u64) {
        const SHIFT: u32 = 63 - FRAC_BITS;
        let x = u128::from(bytes) * u128::from(self.inv) + u128::from(carry);
        ((x >> SHIFT) as u64, (x as u64) & ((1u64 << SHIFT) - 1))
    }
}

/// The system virtual time `V` of a rounded-timestamp scheduler: advances by `len / W` per
/// dequeued packet (`W` the sum of all flows' weights, as in [`crate::vtime`]), carrying
/// the fraction of a unit the multiplication drops, and jumps forward when the scheduler
/// says so.
#[derive(Clone, Debug)]
pub struct Clock {
    v: u64,
    carry: u64,
    wsum: u64,
    iw: Recip,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// `V = 0`, no weight.
    pub const fn new() -> Self {
        Self {
            v: 0,
            carry: 0,
            wsum: 0,
            iw: Recip::new(1),
        }
    }

    /// Current `V`.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        self.v
    }

    /// Sum of the weights `V` divides by.
    pub fn weight_sum(&self) -> u64 {
        self.wsum
    }

    /// Changes the weight sum by `delta` (flows added, removed, re-weighted).
    pub fn add_weight(&mut self, delta: i64) {
        self.wsum = self
            .wsum
            .checked_add_signed(delta)
            .expect("weight sum out of range");
        self.iw = Recip::new(self.wsum.max(1));
    }

    /// `V += len / W` (no-op while no flow exists).
    #[inline(always)]
    pub fn advance(&mut self, len: u32) {
        debug_assert!(len <= MAX_PACKET_LEN);
        if self.wsum == 0 {
            return;
        }
        let (q, c) = self.iw.cost_frac(u64::from(len), self.carry);
        self.v = self.v.wrapping_add(q);
        self.carry = c;
    }

    /// `V += bytes / W` for the service of several packets at once (QFQ+ charges `V`
    /// once per aggregate service): the same result as advancing packet by packet, the
    /// dropped fractions being carried either way. `bytes < 2^32`.
    #[inline(always)]
    pub fn advance_bytes(&mut self, bytes: u64) {
        debug_assert!(bytes < 1 << 32);
        if self.wsum == 0 {
            return;
        }
        let (q, c) = self.iw.cost_frac(bytes, self.carry);
        self.v = self.v.wrapping_add(q);
        self.carry = c;
    }

    /// `V = t`: the jumps of `V = max(V, min S)` (callers compare first).
    #[inline(always)]
    pub fn set(&mut self, t: u64) {
        self.v = t;
        self.carry = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_survive_a_wrap() {
        assert!(after(5, 3) && !after(3, 5) && !after(4, 4));
        let near_end = u64::MAX - 10;
        assert!(
            after(near_end.wrapping_add(20), near_end),
            "9 after wrap is later"
        );
        assert!(!after(near_end, 9));
    }

    #[test]
    fn rounding() {
        assert_eq!(round_down(0x1234, 8), 0x1200);
        assert_eq!(round_up(0x1234, 8), 0x1300);
        assert_eq!(round_up(0x1200, 8), 0x1200, "a multiple stays");
        assert_eq!(round_up(u64::MAX - 3, 4), 0, "wraps to the next multiple");
    }

    #[test]
    fn reciprocal_costs() {
        // powers of two are exact
        assert_eq!(Recip::new(1).cost(1500), 1500u64 << 32);
        assert_eq!(Recip::new(4).cost(1000), 250u64 << 32);
        assert_eq!(Recip::new(1).cost(1 << 20), 1u64 << 52);
        // 1000 / 3 bytes per unit weight, within one unit
        let c = Recip::new(3).cost(1000);
        let exact = (1000u128 << 32) / 3;
        assert!(u128::from(c) <= exact && exact - u128::from(c) <= 1, "{c}");
    }

    #[test]
    fn clock_carries_what_the_reciprocal_drops() {
        let mut c = Clock::new();
        c.add_weight(3);
        for _ in 0..3_000 {
            c.advance(1);
        }
        // 3000 bytes over weight 3: exactly 1000 bytes per unit weight, up to the
        // reciprocal's own rounding (relative 3 / 2^63)
        let want = 1000u64 << 32;
        assert!(want - c.now() <= 1, "{} vs {want}", c.now());
        // one advance of the sum is the same as one per packet
        let mut d = Clock::new();
        d.add_weight(3);
        d.advance_bytes(3_000);
        assert_eq!(d.now(), c.now());
        c.set(7);
        assert_eq!(c.now(), 7);
        c.add_weight(-3);
        c.advance(100);
        assert_eq!(c.now(), 7, "no weight, no advance");
    }
}
