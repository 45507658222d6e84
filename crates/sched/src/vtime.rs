//! Virtual time for the timestamp schedulers (WF2Q+, STFQ, SCFQ, ...).
//!
//! # Units and bit budget
//!
//! Virtual time counts *bytes per unit of weight*, in fixed point with [`FRAC_BITS`]
//! fractional bits. Serving `len` bytes of a flow of weight `w` advances its timestamps by
//! `len / w`; the system clock of WF2Q+ advances by `len / W` per dequeued packet, where `W`
//! is the sum of the weights of all flows (so the shares `w / W` sum to 1, as the
//! analysis in the QFQ+ paper, appendix A.1, assumes).
//!
//! - `len <= 2^20` ([`crate::flow::MAX_PACKET_LEN`]) and `1 / w <= 1`, so one packet costs at
//!   most `2^20 * 2^32 = 2^52` units: a `u64` holds any single cost exactly.
//! - Timestamps are `u128` and never wrap: their integer part counts bytes per unit weight,
//!   and `2^64` bytes is beyond any link's lifetime, so 96 bits suffice. This keeps a flow
//!   that was idle for days comparable with the clock without any epoch trick, and lets the
//!   heaps pack a timestamp and a flow index into one `u128` ([`crate::util::heap`]).
//! - `1 / w` is stored as `floor(2^32 / w)`; with `w <= 2^16` its relative error is below
//!   `2^-16`, and it is the same rounding for every packet of the flow, so it changes no
//!   ordering between packets of equal flows.

use strength_reduce::StrengthReducedU64;

/// Fractional bits of virtual time.
pub const FRAC_BITS: u32 = 32;

/// A point in virtual time (bytes per unit of weight, fixed point).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VTime(u128);

impl VTime {
    /// The origin.
    pub const ZERO: VTime = VTime(0);

    /// From raw fixed-point units.
    pub const fn from_raw(raw: u128) -> Self {
        Self(raw)
    }

    /// Raw fixed-point units.
    pub const fn raw(self) -> u128 {
        self.0
    }

    /// From a whole number of bytes per unit weight.
    pub const fn from_bytes(bytes: u64) -> Self {
        Self((bytes as u128) << FRAC_BITS)
    }

    /// As bytes per unit weight (for reports only).
    pub fn as_bytes_f64(self) -> f64 {
        self.0 as f64 / (1u64 << FRAC_BITS) as f64
    }

    /// `self + cost`.
    #[inline]
    pub const fn plus(self, cost: u64) -> Self {
        Self(self.0 + cost as u128)
    }
}

/// The virtual cost of one byte for a flow: `floor(2^FRAC_BITS / weight)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvWeight(u64);

impl InvWeight {
    /// Inverse of `weight` (`weight >= 1`, validated by [`crate::FlowParams::validate`]).
    pub const fn new(weight: u32) -> Self {
        Self((1u64 << FRAC_BITS) / weight as u64)
    }

    /// Virtual cost of a packet of `len` bytes; exact in a `u64` for `len <= 2^20`.
    #[inline]
    pub const fn cost(self, len: u32) -> u64 {
        len as u64 * self.0
    }
}

/// The WF2Q+ system clock: advances by exactly `len / W` per dequeued packet, `W` being the
/// sum of the weights of all flows. The division remainder is carried, so no service is
/// lost to rounding however many packets pass. `W` changes only when flows come, go or
/// are re-weighted, so the division is by a precomputed reciprocal (multiplications and
/// shifts, exact for every numerator), not by the CPU's divider on every packet.
#[derive(Clone, Debug)]
pub struct SystemClock {
    now: VTime,
    rem: u64,
    weight_sum: u64,
    divisor: Option<StrengthReducedU64>,
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemClock {
    /// A clock at zero with no flows.
    pub const fn new() -> Self {
        Self {
            now: VTime::ZERO,
            rem: 0,
            weight_sum: 0,
            divisor: None,
        }
    }

    /// Current value.
    #[inline]
    pub const fn now(&self) -> VTime {
        self.now
    }

    /// Sum of the weights the clock divides by.
    pub const fn weight_sum(&self) -> u64 {
        self.weight_sum
    }

    fn set_weight_sum(&mut self, w: u64) {
        self.weight_sum = w;
        self.divisor = (w > 0).then(|| StrengthReducedU64::new(w));
        self.rem = if w == 0 { 0 } else { self.rem % w };
    }

    /// A flow of `weight` joined the system.
    pub fn add_weight(&mut self, weight: u32) {
        self.set_weight_sum(self.weight_sum + u64::from(weight));
    }

    /// A flow of `weight` left the system.
    pub fn remove_weight(&mut self, weight: u32) {
        self.set_weight_sum(self.weight_sum - u64::from(weight));
    }

    /// Account `len` bytes of service: `now += len / W`.
    #[inline]
    pub fn advance(&mut self, len: u32) {
        let Some(d) = self.divisor else {
            return;
        };
        // len <= 2^20 and rem < W <= 2^31 * 2^16, so x < 2^53: no overflow.
        let x = (u64::from(len) << FRAC_BITS) + self.rem;
        let (q, r) = StrengthReducedU64::div_rem(x, d);
        self.now = self.now.plus(q);
        self.rem = r;
    }

    /// Account `bytes` of service at once (several packets; `bytes <= 2^31`): the same
    /// result as one [`Self::advance`] per packet, the remainder being carried either way.
    #[inline]
    pub fn advance_bytes(&mut self, bytes: u64) {
        let Some(d) = self.divisor else {
            return;
        };
        debug_assert!(bytes <= 1 << 31);
        // bytes <= 2^31 and rem < W <= 2^47, so x < 2^64: no overflow.
        let x = (bytes << FRAC_BITS) + self.rem;
        let (q, r) = StrengthReducedU64::div_rem(x, d);
        self.now = self.now.plus(q);
        self.rem = r;
    }

    /// Jump forward to `t` if it is later (the `max` of WF2Q+'s clock update, eq. A.3).
    #[inline]
    pub fn catch_up(&mut self, t: VTime) {
        if t > self.now {
            self.now = t;
            self.rem = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_weight_costs() {
        assert_eq!(InvWeight::new(1).cost(1500), 1500u64 << FRAC_BITS);
        assert_eq!(InvWeight::new(4).cost(1000), 250u64 << FRAC_BITS);
        // the largest cost still fits in u64
        let c = InvWeight::new(1).cost(crate::flow::MAX_PACKET_LEN);
        assert_eq!(c, 1u64 << 52);
    }

    #[test]
    fn system_clock_carries_the_remainder() {
        let mut c = SystemClock::new();
        c.add_weight(3);
        for _ in 0..3 {
            c.advance(1);
        }
        // three bytes over weight 3 is exactly one byte per unit weight
        assert_eq!(c.now(), VTime::from_bytes(1));
        let mut d = SystemClock::new();
        d.add_weight(3);
        d.advance_bytes(3);
        assert_eq!(d.now(), c.now(), "one advance of the sum, the same");
        c.catch_up(VTime::from_bytes(5));
        assert_eq!(c.now(), VTime::from_bytes(5));
        c.catch_up(VTime::from_bytes(2));
        assert_eq!(c.now(), VTime::from_bytes(5), "never goes back");
    }

    #[test]
    fn reciprocal_division_is_exact() {
        let mut fast = SystemClock::new();
        fast.add_weight(7919);
        fast.add_weight(104_729);
        let w = fast.weight_sum();
        let (mut now, mut rem) = (0u128, 0u64);
        for len in (1..200_000u32).step_by(97) {
            fast.advance(len);
            let x = (u64::from(len) << FRAC_BITS) + rem;
            now += u128::from(x / w);
            rem = x % w;
            assert_eq!(fast.now().raw(), now, "len {len}");
        }
    }

    #[test]
    fn clock_without_flows_stays() {
        let mut c = SystemClock::new();
        c.advance(1500);
        assert_eq!(c.now(), VTime::ZERO);
        c.add_weight(2);
        c.remove_weight(2);
        assert_eq!(c.weight_sum(), 0);
    }
}
