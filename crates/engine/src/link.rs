//! The emulated link: a leaky bucket that releases packets at the configured rate.
//!
//! `link_idle` is when the emulated link finishes sending what was released so far. The
//! arbiter releases a packet only while `link_idle <= now`, then advances `link_idle` by the
//! packet's transmission time (Figure 5 of the PSPAT paper, lines 11-17). When the scheduler
//! runs dry, `link_idle` is pulled up to `now` so that an idle link accumulates no credit: a
//! burst after a pause is still released at the link rate. While the scheduler stays
//! backlogged the link never idles, whichever packet it picks: an arbiter that looks late
//! may pick one that arrived after `link_idle` (it sees it beside older ones), and the link
//! goes on from `link_idle` rather than from that arrival, so that lateness costs no rate
//! (`Link::transmit_wire_backlogged`).
//!
//! Time is kept in 2^-31 ns units in a `u128`, so the per-byte cost is exact to 2^-31 ns and
//! rounding never drifts the rate (10 Gbit/s is 0.8 ns per byte, not representable in
//! whole ns). Like smoltcp, the link never reads the clock: `now` is a parameter.
//!
//! A packet costs the bytes its link charges for it: its length, or with a framing (tc's
//! `overhead`, `mpu`, `linklayer`; see `pspat_sched::framing`) the framed length. Whether
//! the framing adds anything is decided once, when the link is built: the default costs a
//! predictable branch per packet and no arithmetic. Rates, bursts and the byte counts
//! callers keep are all in charged bytes, so that charged bytes * 8 / time is the rate.

use pspat_config::Framing;

/// Fractional bits of the internal time unit: the largest for which the cost of a byte
/// at the slowest rate (1 bit/s: 8e9 ns, i.e. 8e9 * 2^31 < 2^64) fits in a `u64`, so that
/// charging a packet is one 64 x 64 -> 128-bit multiplication.
const FRAC: u32 = 31;

/// A leaky-bucket link of a given rate.
#[derive(Clone, Debug)]
pub struct Link {
    /// Cost of one byte in 2^-31 ns; 0 means an infinitely fast link.
    byte_cost: u64,
    /// When the link is idle again, in 2^-31 ns.
    idle_at: u128,
    /// `idle_at` rounded up to whole ns (the link is idle at `now` iff this is at most
    /// `now`): the per-packet tests compare one word instead of two.
    idle_ceil_ns: u64,
    rate_bps: u64,
    /// How far behind a packet's arrival an idle link's clock may stay, in 2^-31 ns: the
    /// transmission time of the burst (dummynet's `burst`), 0 without one.
    burst: u128,
    /// The latest departure it reported, ns: departures never go back, also when a packet
    /// left later than the link's clock says (`transmit_wire_backlogged`).
    out_ns: u64,
    /// What it charges for a packet.
    framing: Framing,
    /// `framing` adds nothing: a packet is charged its length as it is.
    plain: bool,
}

impl Link {
    /// A link of `rate_bps` bits per second; 0 means unlimited (every packet is released
    /// at once, as with a null backend measuring raw decision rate).
    pub fn new(rate_bps: u64) -> Self {
        let byte_cost = if rate_bps == 0 {
            0
        } else {
            // 8 bits * 1e9 ns/s / rate, in 2^-31 ns, rounded up: the emulated link is never
            // faster than the rate (slower by under 1 ns per 2 GB). At most 8e9 * 2^31 (at
            // 1 bit/s), which fits (FRAC).
            let cost = ((8_000_000_000u128) << FRAC).div_ceil(u128::from(rate_bps));
            u64::try_from(cost).expect("FRAC keeps a byte's cost within 64 bits")
        };
        Self {
            byte_cost,
            idle_at: 0,
            idle_ceil_ns: 0,
            rate_bps,
            burst: 0,
            out_ns: 0,
            framing: Framing::PLAIN,
            plain: true,
        }
    }

    /// This link, charging each packet its framed length (see the module docs).
    pub fn with_framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self.plain = framing.is_plain();
        self
    }

    /// What it charges for a packet.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Bytes charged for a packet of `len` bytes.
    #[inline]
    pub fn wire_len(&self, len: u32) -> u64 {
        if self.plain {
            u64::from(len)
        } else {
            self.framing.wire_len(len)
        }
    }

    /// This link, letting an idle link send up to `bytes` (charged bytes) at once beyond
    /// its rate (dummynet's `burst`): a packet arriving after the link was idle for `t` may
    /// start as if the link had been free since `min(t, the burst's transmission time)` ago.
    pub fn with_burst(mut self, bytes: u64) -> Self {
        self.burst = u128::from(self.byte_cost) * u128::from(bytes);
        self
    }

    /// The configured rate in bits per second (0 = unlimited).
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Whether a packet may be released at `now_ns`.
    #[inline]
    pub fn is_idle(&self, now_ns: u64) -> bool {
        self.idle_ceil_ns <= now_ns
    }

    /// Charges a packet of `len` bytes released at or after the link went idle; returns the
    /// time its last bit leaves the emulated link, in ns.
    #[inline]
    pub fn transmit(&mut self, len: u32) -> u64 {
        self.transmit_wire(self.wire_len(len))
    }

    /// [`Link::transmit`] of a packet whose charge, `wire` bytes, the caller already has
    /// ([`Link::wire_len`]).
    #[inline]
    pub fn transmit_wire(&mut self, wire: u64) -> u64 {
        self.idle_at += u128::from(self.byte_cost) * u128::from(wire);
        self.idle_ceil_ns = ceil_ns(self.idle_at);
        self.out_ns = self.out_ns.max((self.idle_at >> FRAC) as u64);
        self.out_ns
    }

    /// Charges a packet of `len` bytes that arrived at `arrival_ns`: its transmission starts
    /// when the link is idle or when it arrived, whichever is later. When the arbiter runs
    /// late (the link fell idle before it looked), a packet that arrived in between does
    /// not start before it existed; returns the time its last bit leaves, in ns.
    #[inline]
    pub fn transmit_arrived(&mut self, len: u32, arrival_ns: u64) -> u64 {
        self.transmit_wire_arrived(self.wire_len(len), arrival_ns)
    }

    /// [`Link::transmit_arrived`] of a packet whose charge, `wire` bytes, the caller
    /// already has ([`Link::wire_len`]).
    #[inline]
    pub fn transmit_wire_arrived(&mut self, wire: u64, arrival_ns: u64) -> u64 {
        // `idle_at < arrival_ns << FRAC` unless the rounded-up value is larger; when it is
        // equal, `idle_at` is at most `arrival_ns << FRAC`, so the max is that either way.
        if self.idle_ceil_ns <= arrival_ns {
            // Idle since `idle_at`: the burst's credit, at most what the pause earned.
            let floor = (u128::from(arrival_ns) << FRAC).saturating_sub(self.burst);
            self.idle_at = self.idle_at.max(floor);
            self.idle_ceil_ns = ceil_ns(self.idle_at);
        }
        if self.byte_cost == 0 {
            // An unlimited link: nothing to add, and `idle_at` stays a whole number of ns.
            return self.idle_ceil_ns;
        }
        self.transmit_wire(wire)
    }

    /// Charges a packet taken from a scheduler that was never empty since the previous
    /// packet was charged: at `idle_at` other packets were waiting, so the link was busy
    /// from then on, whichever one the scheduler picked. A packet that arrived after the
    /// link went idle (a late arbiter sees it beside an older backlog, and an algorithm
    /// may pick it first) does not restart the link at its arrival: that would throw away
    /// the time from `idle_at` to it, which a real link spent on the older packets, and the
    /// link would fall short of its rate by the arbiter's lateness. The link's clock stays
    /// at least `floor_ns` (the engine's bound on how far behind now it may run). Returns
    /// when the packet's last bit leaves: the link's new `idle_at`, or the packet's own
    /// arrival plus its transmission time when that is later (a packet does not leave
    /// before it arrived; the next packet starts at `idle_at` all the same, and leaves no
    /// earlier than this one, so that departures never go back).
    #[inline]
    pub fn transmit_wire_backlogged(&mut self, wire: u64, arrival_ns: u64, floor_ns: u64) -> u64 {
        if self.idle_ceil_ns <= floor_ns {
            self.idle_at = u128::from(floor_ns) << FRAC;
            self.idle_ceil_ns = floor_ns;
        }
        let start = self.idle_at;
        let out = self.transmit_wire(wire);
        if (start >> FRAC) as u64 >= arrival_ns {
            return out;
        }
        self.out_ns = out.max(arrival_ns + (((self.idle_at - start) >> FRAC) as u64));
        self.out_ns
    }

    /// Charges `wire` bytes of a packet that arrived at `arrival_ns` (at least `floor_ns`):
    /// [`Link::transmit_wire_backlogged`] when the scheduler kept packets since the last
    /// charge (`backlogged`), else [`Link::transmit_wire_arrived`]. What the services call.
    #[inline]
    pub fn charge_wire(
        &mut self,
        wire: u64,
        arrival_ns: u64,
        floor_ns: u64,
        backlogged: bool,
    ) -> u64 {
        if backlogged {
            self.transmit_wire_backlogged(wire, arrival_ns, floor_ns)
        } else {
            self.transmit_wire_arrived(wire, arrival_ns)
        }
    }

    /// The scheduler ran dry at `now_ns`: restart from now, with no credit saved.
    #[inline]
    pub fn reset(&mut self, now_ns: u64) {
        // As in `transmit_arrived`.
        if self.idle_ceil_ns <= now_ns {
            self.idle_at = u128::from(now_ns) << FRAC;
            self.idle_ceil_ns = now_ns;
        }
    }

    /// When the link is idle again, in ns (rounded down).
    pub fn idle_at_ns(&self) -> u64 {
        (self.idle_at >> FRAC) as u64
    }

    /// Transmission time of a packet of `len` bytes in ns (rounded down), framing included.
    pub fn tx_time_ns(&self, len: u32) -> u64 {
        ((u128::from(self.byte_cost) * u128::from(self.wire_len(len))) >> FRAC) as u64
    }
}

/// `t` (in 2^-31 ns) rounded up to whole ns.
#[inline(always)]
fn ceil_ns(t: u128) -> u64 {
    ((t + ((1u128 << FRAC) - 1)) >> FRAC) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_gigabit_costs_point_eight_ns_per_byte_without_drift() {
        let mut l = Link::new(10_000_000_000);
        l.reset(1_000);
        // 1e6 packets of 1500 bytes: exactly 1.2 ms.
        for _ in 0..1_000_000 {
            l.transmit(1500);
        }
        // 0.8 ns is not a whole number of 2^-31 ns: rounded up, the error is below 1 ns
        // per 2 GB.
        assert_eq!(l.idle_at_ns(), 1_000 + 1_200_000_000);
        assert_eq!(l.tx_time_ns(1500), 1200);
    }

    #[test]
    fn the_slowest_rate_fits() {
        // 1 bit/s: a byte takes 8 s, the largest per-byte cost there is.
        let mut l = Link::new(1);
        assert_eq!(l.tx_time_ns(1), 8_000_000_000);
        assert_eq!(l.transmit(65_535), 65_535 * 8_000_000_000);
    }

    #[test]
    fn odd_rates_stay_exact_over_long_runs() {
        // 3 Mbit/s: 8000/3 ns per byte, not an integer.
        let mut l = Link::new(3_000_000);
        for _ in 0..3_000 {
            l.transmit(1);
        }
        assert_eq!(l.idle_at_ns(), 8_000_000, "3000 bytes take 8 ms");
    }

    #[test]
    fn idle_link_keeps_no_credit() {
        let mut l = Link::new(8_000_000_000); // 1 ns per byte
        l.reset(0);
        assert_eq!(l.transmit(100), 100);
        assert!(!l.is_idle(99));
        assert!(l.is_idle(100));
        l.reset(10_000);
        assert!(l.is_idle(10_000));
        assert_eq!(l.transmit(100), 10_100, "the pause earned no credit");
        // reset never moves time backwards
        l.reset(5);
        assert_eq!(l.idle_at_ns(), 10_100);
    }

    #[test]
    fn a_burst_is_earned_by_idle_time_and_capped() {
        let mut l = Link::new(8_000_000_000).with_burst(300); // 1 ns per byte
        l.reset(0);
        assert_eq!(l.transmit_arrived(100, 0), 100, "a new link has no credit");
        // Idle from 100 to 1000: 300 bytes of credit (not 900), so the link may start at
        // 700 and three 100-byte packets leave back to back by 1000.
        assert_eq!(l.transmit_arrived(100, 1_000), 800);
        assert_eq!(l.transmit_arrived(100, 1_000), 900);
        assert_eq!(l.transmit_arrived(100, 1_000), 1_000);
        assert_eq!(l.transmit_arrived(100, 1_000), 1_100, "then at the rate");
        // Idle for 50 ns only: 50 bytes of credit.
        assert_eq!(l.transmit_arrived(100, 1_150), 1_200);
    }

    #[test]
    fn a_packet_never_starts_before_it_arrived() {
        let mut l = Link::new(8_000_000_000); // 1 ns per byte
        l.reset(0);
        assert_eq!(l.transmit_arrived(100, 0), 100);
        // The link was free from 100; a packet that arrived at 500 leaves at 600.
        assert_eq!(l.transmit_arrived(100, 500), 600);
        // One that arrived earlier queues behind.
        assert_eq!(l.transmit_arrived(100, 550), 700);
    }

    #[test]
    fn a_backlogged_link_loses_no_time_to_a_late_arrival() {
        let mut l = Link::new(8_000_000_000); // 1 ns per byte
        l.reset(0);
        assert_eq!(l.transmit_arrived(100, 0), 100);
        // Busy since 100 with older packets waiting; the scheduler picks one that arrived
        // at 130: the link goes on from 100 (its rate kept), the packet leaves no earlier
        // than it could have (130 + 100), and the next one from 200.
        assert_eq!(l.transmit_wire_backlogged(100, 130, 0), 230);
        assert_eq!(l.idle_at_ns(), 200);
        assert_eq!(
            l.transmit_wire_backlogged(20, 0, 0),
            230,
            "departures never go back"
        );
        assert_eq!(l.idle_at_ns(), 220);
        assert_eq!(l.transmit_wire_backlogged(80, 0, 0), 300);
        // A clock floor past the link (an arbiter later than the engine allows) moves it.
        assert_eq!(l.transmit_wire_backlogged(100, 0, 1_000), 1_100);
        // Against `transmit_arrived`, which would restart at 1_300 and lose 200 ns.
        let mut restart = l.clone();
        assert_eq!(restart.transmit_arrived(100, 1_300), 1_400);
        assert_eq!(l.transmit_wire_backlogged(100, 1_300, 0), 1_400);
        assert_eq!(l.idle_at_ns(), 1_200);
    }

    /// The link against the definition, in exact 2^-31 ns arithmetic with no cached
    /// rounding: `idle_at = max(idle_at, t)` on arrivals and resets.
    mod model {
        use super::*;
        use proptest::prelude::*;

        /// An operation at a time given relative to the link's idle time rounded up to
        /// whole ns (the boundary the cached rounding must get right), or absolute.
        #[derive(Clone, Debug)]
        enum Op {
            Reset(When),
            Send { len: u32, arrival: When },
            Probe(When),
        }

        #[derive(Clone, Copy, Debug)]
        enum When {
            Near(i64),
            At(u64),
        }

        fn when() -> impl Strategy<Value = When> {
            prop_oneof![
                (-2i64..=2).prop_map(When::Near),
                (0u64..20_000).prop_map(When::At)
            ]
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                when().prop_map(Op::Reset),
                (1u32..200, when()).prop_map(|(len, arrival)| Op::Send { len, arrival }),
                when().prop_map(Op::Probe),
            ]
        }

        proptest! {
            #[test]
            fn matches_the_exact_leaky_bucket(
                rate in prop_oneof![Just(0u64), 1_000_000_000u64..100_000_000_000],
                ops in proptest::collection::vec(op(), 1..200),
            ) {
                let mut l = Link::new(rate);
                let mut idle: u128 = 0;
                let cost = u128::from(l.byte_cost);
                let at = |w: When, idle: u128| match w {
                    When::At(t) => t,
                    When::Near(d) => {
                        let ceil = (idle + (1u128 << FRAC) - 1) >> FRAC;
                        (ceil as i64 + d).max(0) as u64
                    }
                };
                for op in ops {
                    match op {
                        Op::Reset(w) => {
                            let now = at(w, idle);
                            l.reset(now);
                            idle = idle.max(u128::from(now) << FRAC);
                        }
                        Op::Send { len, arrival } => {
                            let arrival = at(arrival, idle);
                            let got = l.transmit_arrived(len, arrival);
                            idle = idle.max(u128::from(arrival) << FRAC) + cost * u128::from(len);
                            prop_assert_eq!(got, (idle >> FRAC) as u64);
                        }
                        Op::Probe(w) => {
                            let now = at(w, idle);
                            prop_assert_eq!(l.is_idle(now), idle <= u128::from(now) << FRAC, "at {}", now);
                        }
                    }
                    prop_assert_eq!(l.idle_at_ns(), (idle >> FRAC) as u64);
                }
            }
        }
    }

    #[test]
    fn a_framed_link_charges_the_framed_length() {
        use pspat_config::LinkLayer;
        // 10 Mbit/s: 800 ns per charged byte, exactly.
        let atm = Framing::new(10, 0, LinkLayer::Atm);
        let mut l = Link::new(10_000_000).with_framing(atm);
        l.reset(0);
        // 1000 + 10 = 1010 bytes: 22 cells of 53 = 1166 charged, 932 800 ns each.
        assert_eq!(l.wire_len(1000), 1166);
        assert_eq!(l.tx_time_ns(1000), 932_800);
        assert_eq!(l.transmit_arrived(1000, 0), 932_800);
        assert_eq!(l.transmit(1000), 2 * 932_800);
        assert_eq!(l.transmit_wire(1166), 3 * 932_800);
        // The default charges the length.
        let l = Link::new(10_000_000).with_framing(Framing::PLAIN);
        assert_eq!((l.wire_len(1000), l.tx_time_ns(1000)), (1000, 800_000));
        // A burst is in charged bytes: at 1 ns per byte, 106 bytes (two cells) of credit.
        let mut l = Link::new(8_000_000_000)
            .with_framing(Framing::new(0, 0, LinkLayer::Atm))
            .with_burst(106);
        l.reset(0);
        assert_eq!(l.transmit_arrived(40, 0), 53);
        // Idle from 53 to 1000: 106 bytes of credit, so it starts at 894 and ends at 947.
        assert_eq!(l.transmit_arrived(40, 1_000), 947);
    }

    #[test]
    fn unlimited_link_is_always_idle() {
        let mut l = Link::new(0);
        l.reset(7);
        for _ in 0..10 {
            l.transmit(65_535);
        }
        assert!(l.is_idle(7));
    }
}
