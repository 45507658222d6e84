//! What each option accepts: the range checks of the generator's and the sink's settings,
//! with messages that name the option and its value. The text is parsed elsewhere (by
//! `pspat-units`, the one parser of durations, rates and sizes); these see only values.

use std::ops::RangeInclusive;
use std::time::Duration;

use pspat_io::payload::{MAX_WIRE_LEN, MIN_WIRE_LEN};

use crate::error::Invalid;

/// The longest run, and the longest warm-up, window or idle time: an hour.
pub const MAX_TIME: Duration = Duration::from_secs(3600);
/// The shortest run (`--duration`): 10 ms.
pub const MIN_RUN: Duration = Duration::from_millis(10);
/// The fastest paced rate, packets per second (0 is "as fast as possible").
pub const MAX_RATE_PPS: f64 = 100e6;
/// Greedy senders, at least and at most.
pub const SENDERS: RangeInclusive<u32> = 1..=1024;

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// A run's length: [`MIN_RUN`] to [`MAX_TIME`].
pub fn run_time(option: &'static str, d: Duration) -> Result<Duration, Invalid> {
    time_from(option, d, MIN_RUN)
}

/// A warm-up, window or idle time: 0 to [`MAX_TIME`].
pub fn time(option: &'static str, d: Duration) -> Result<Duration, Invalid> {
    time_from(option, d, Duration::ZERO)
}

fn time_from(option: &'static str, d: Duration, min: Duration) -> Result<Duration, Invalid> {
    if (min..=MAX_TIME).contains(&d) {
        return Ok(d);
    }
    Err(Invalid {
        option,
        value: secs(d),
        reason: format!(
            "outside {}..={} seconds",
            min.as_secs_f64(),
            MAX_TIME.as_secs()
        ),
    })
}

/// A paced rate: 0 (as fast as possible) to [`MAX_RATE_PPS`] packets per second.
pub fn rate_pps(option: &'static str, pps: f64) -> Result<f64, Invalid> {
    if pps.is_finite() && (0.0..=MAX_RATE_PPS).contains(&pps) {
        return Ok(pps);
    }
    Err(Invalid {
        option,
        value: pps.to_string(),
        reason: "outside 0..=1e8 packets per second".into(),
    })
}

/// A length on the wire, [`MIN_WIRE_LEN`] to [`MAX_WIRE_LEN`] bytes.
pub fn wire_len(option: &'static str, len: u64) -> Result<u32, Invalid> {
    match u32::try_from(len) {
        Ok(v) if (MIN_WIRE_LEN..=MAX_WIRE_LEN).contains(&v) => Ok(v),
        _ => Err(Invalid {
            option,
            value: len.to_string(),
            reason: format!(
                "outside {MIN_WIRE_LEN}..={MAX_WIRE_LEN} bytes (the wire length: 42 bytes of \
                 Ethernet, IPv4 and UDP headers, then at least the 40-byte pspat payload header)"
            ),
        }),
    }
}

/// The number of greedy senders, in [`SENDERS`].
pub fn senders(m: u32) -> Result<u32, Invalid> {
    if SENDERS.contains(&m) {
        return Ok(m);
    }
    Err(Invalid {
        option: "--senders",
        value: m.to_string(),
        reason: format!("outside {}..={}", SENDERS.start(), SENDERS.end()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_name_the_option_and_the_value() {
        assert_eq!(wire_len("--len", 82), Ok(82));
        let e = wire_len("--len", 81).unwrap_err().to_string();
        assert!(e.starts_with("--len 81: outside 82..=65549 bytes"), "{e}");
        assert!(wire_len("--len", 65550).is_err());
        assert!(wire_len("--len", u64::from(u32::MAX) + 82).is_err());
        assert_eq!(rate_pps("--rate", 0.0), Ok(0.0));
        assert!(rate_pps("--rate", -1.0).is_err());
        assert!(rate_pps("--rate", f64::NAN).is_err());
        let e = rate_pps("--rate", 2e8).unwrap_err().to_string();
        assert_eq!(e, "--rate 200000000: outside 0..=1e8 packets per second");
        let e = run_time("--duration", Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--duration 0s: outside 0.01..=3600 seconds");
        assert!(run_time("--duration", Duration::from_millis(1500)).is_ok());
        assert_eq!(time("--warmup", Duration::ZERO), Ok(Duration::ZERO));
        let e = time("--idle", Duration::from_secs(3601))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--idle 3601s: outside 0..=3600 seconds");
        assert!(senders(0).unwrap_err().to_string().contains("--senders 0"));
        assert_eq!(senders(1024), Ok(1024));
    }
}
