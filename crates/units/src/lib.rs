//! pspat-units: the one place where pspat reads and writes quantities: bandwidths, packet
//! rates, byte sizes and durations.
//!
//! Every command-line option, scenario file and configuration file goes through these
//! functions, so `4Mbit/s`, `500ms` or `100KBytes` mean the same thing everywhere, and the
//! exact printers write what the parsers read back (`format_*` then `parse_*` is the
//! identity: tested below).
//!
//! **One rule for a bare number:** a number without a unit is in the base unit of its
//! quantity: bits per second for a bandwidth, packets per second for a packet rate, bytes
//! for a size, seconds for a duration (as `sleep 5`, `iperf3 -t 5` and `tc`'s `rate 64000`
//! read them). Callers that give a bare number another meaning (ipfw's `queue 50`, which
//! counts slots) ask [`parse_size`] whether a unit was written.
//!
//! The rest follows ipfw(8) and dummynet where they say something:
//! - bandwidth and packet-rate prefixes `K`, `M`, `G`, `T` are powers of 1000 (ipfw:
//!   `Kbit/s` = 1000 bit/s); a bandwidth's unit is bits (`bit/s`, `bits/s`, `bit`, `bits`,
//!   `b/s`, `bps`, `b`) or bytes (`Byte/s`, `Bytes/s`, `Byte`, `Bytes`, `B/s`, `Bps`, `B`),
//!   the spellings ipfw reads and real configurations write (pfSense's `100Mb`), so `4M`,
//!   `4Mb`, `4Mbit/s` and `500KByte/s` are all 4 000 000 bit/s; `unlimited` is 0;
//! - byte-size prefixes `K`, `M`, `G` are powers of 1024, as dummynet's `queue 100KBytes`;
//!   the unit is `B`, `Byte(s)` or none;
//! - duration units are `ns`, `us`, `ms`, `s`, `min` and `h` (a service runs for hours);
//! - spaces around the text and between the number and its unit are allowed (`10 G`,
//!   ` 5 s`);
//! - a number may have a decimal fraction and an exponent (`1.5Mbit/s`, `0.5`, `10e9`) when
//!   the result is a whole number of the base unit (bit/s, byte, ns); anything else, a
//!   sign, and any overflow of `u64` are refused. Packet rates are the exception: they are `f64` and may be
//!   fractional (`0.5` packets per second).
//!
//! Range checks belong to the caller (a link rate of 0 may mean "unlimited" to one option
//! and be an error to another); errors here say what was wrong with the text.
//!
//! The approximate printers ([`HumanRate`], [`HumanBandwidth`]) are for tables and live
//! views (`100.000 Mbit/s`); they are not meant to be parsed back.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::time::Duration;

/// A quantity that does not parse: what was wrong, naming the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(String);

impl UnitError {
    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl From<UnitError> for String {
    fn from(e: UnitError) -> String {
        e.0
    }
}

type Result<T> = std::result::Result<T, UnitError>;

fn err<T>(msg: String) -> Result<T> {
    Err(UnitError(msg))
}

/// Splits `s` into its leading number (digits with an optional `.fraction` and an optional
/// exponent `e3`, `E-6`) as a mantissa and a decimal scale (`1.5` -> (15, 1), `2e3` ->
/// (2, -3)), and the rest.
fn split_number(s: &str) -> std::result::Result<(u128, i32, &str), String> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, mut rest) = s.split_at(end);
    if num.is_empty() || !num.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("expected a number".into());
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if frac.contains('.') || int.len() + frac.len() > 30 {
        return Err(format!("'{num}' is not a number"));
    }
    let mut mantissa: u128 = 0;
    for c in int.chars().chain(frac.chars()) {
        mantissa = mantissa * 10 + u128::from(c as u8 - b'0');
    }
    let mut scale = frac.len() as i32;
    // An exponent: `e`/`E`, an optional sign, digits (`1e9`, `2.5E-3`). A unit never starts
    // with a digit after an `e`, so this cannot take a unit's first letter.
    if let Some(exp) = rest.strip_prefix(['e', 'E']) {
        let (neg, digits) = match exp.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, exp.strip_prefix('+').unwrap_or(exp)),
        };
        let n = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        if n > 0 {
            let e: i32 = match digits[..n].parse() {
                Ok(e) if e <= 30 => e,
                _ => return Err(format!("exponent of '{s}' is too large")),
            };
            scale += if neg { e } else { -e };
            rest = &digits[n..];
        }
    }
    Ok((mantissa, scale, rest.trim_start()))
}

/// `mantissa / 10^scale * mult`, when it is a whole number that fits a `u64`.
fn scale(mantissa: u128, scale: i32, mult: u128, what: &str) -> Result<u64> {
    let too_large = || UnitError(format!("{what} too large"));
    let mut v = mantissa.checked_mul(mult).ok_or_else(too_large)?;
    if scale < 0 {
        v = v
            .checked_mul(10u128.pow(scale.unsigned_abs()))
            .ok_or_else(too_large)?;
    } else {
        let div = 10u128
            .checked_pow(scale.unsigned_abs())
            .ok_or_else(|| UnitError(format!("{what} is not a whole number of its base unit")))?;
        if v % div != 0 {
            return err(format!("{what} is not a whole number of its base unit"));
        }
        v /= div;
    }
    u64::try_from(v).map_err(|_| too_large())
}

/// A decimal (power of 1000) prefix at the start of `rest`, and what follows it.
fn decimal_prefix(rest: &str) -> (u128, &str) {
    match rest.chars().next() {
        Some('K' | 'k') => (1_000, &rest[1..]),
        Some('M' | 'm') => (1_000_000, &rest[1..]),
        Some('G' | 'g') => (1_000_000_000, &rest[1..]),
        Some('T' | 't') => (1_000_000_000_000, &rest[1..]),
        _ => (1, rest),
    }
}

/// Parses a bandwidth into bits per second (`4Mbit/s`, `100Kbit/s`, `1Gbit/s`, `64000`,
/// `10M`, `2MByte/s`, `unlimited` = 0).
pub fn parse_bandwidth(s: &str) -> Result<u64> {
    if s.trim().eq_ignore_ascii_case("unlimited") {
        return Ok(0);
    }
    let (m, sc, rest) =
        split_number(s).map_err(|e| UnitError(format!("{e} in bandwidth '{s}'")))?;
    let (mult, unit) = decimal_prefix(rest);
    let per_unit = match unit {
        // Bits: ipfw reads anything but a capital B or "by..." after the prefix as bits;
        // these are the spellings real configurations use (`100Mb`, `10Mbps`, `1Mbit/s`).
        "" | "b" | "bps" | "b/s" => 1,
        // Bytes: a capital B (`10MB`, `500KBps`), or any case of "byte(s)".
        "B" | "Bps" | "B/s" => 8,
        u if ["bit", "bits", "bit/s", "bits/s"]
            .iter()
            .any(|w| u.eq_ignore_ascii_case(w)) =>
        {
            1
        }
        u if ["byte", "bytes", "byte/s", "bytes/s"]
            .iter()
            .any(|w| u.eq_ignore_ascii_case(w)) =>
        {
            8
        }
        _ => {
            return err(format!(
                "unknown bandwidth unit '{rest}' in '{s}' (expected e.g. 4Mbit/s, 100Kbit/s, \
                 1Gbit/s, 500KByte/s, 10M or unlimited)"
            ))
        }
    };
    scale(m, sc, mult * per_unit, &format!("bandwidth '{s}'"))
}

/// Prints bits per second the way [`parse_bandwidth`] reads it back, with the largest
/// exact prefix (`4Mbit/s`, `1500bit/s`, `unlimited` for 0).
pub fn format_bandwidth(bps: u64) -> String {
    if bps == 0 {
        return "unlimited".into();
    }
    for (mult, p) in [
        (1_000_000_000_000, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1_000, "K"),
    ] {
        if bps % mult == 0 {
            return format!("{}{p}bit/s", bps / mult);
        }
    }
    format!("{bps}bit/s")
}

/// Parses a packet rate in packets per second (`1000`, `2.5K`, `1Mpps`, `10pkt/s`,
/// `0.5`); prefixes are powers of 1000.
pub fn parse_packet_rate(s: &str) -> Result<f64> {
    let (m, sc, rest) =
        split_number(s).map_err(|e| UnitError(format!("{e} in packet rate '{s}'")))?;
    let (mult, unit) = decimal_prefix(rest);
    if !matches!(unit, "" | "pps" | "pkt/s") {
        return err(format!(
            "unknown packet-rate unit '{rest}' in '{s}' (expected e.g. 1000, 4K, 1Mpps or \
             10pkt/s)"
        ));
    }
    Ok(m as f64 / 10f64.powi(sc) * mult as f64)
}

/// A byte size's prefix multiplier and whether a unit was written at all.
fn size_unit(rest: &str, s: &str) -> Result<(u128, bool)> {
    let (mult, unit) = match rest.chars().next() {
        Some('K' | 'k') => (1u128 << 10, &rest[1..]),
        Some('M' | 'm') => (1 << 20, &rest[1..]),
        Some('G' | 'g') => (1 << 30, &rest[1..]),
        _ => (1, rest),
    };
    let unit_ok = matches!(unit, "B" | "b")
        || unit.eq_ignore_ascii_case("byte")
        || unit.eq_ignore_ascii_case("bytes");
    if unit_ok {
        Ok((mult, true))
    } else if unit.is_empty() {
        Ok((mult, mult != 1))
    } else {
        err(format!(
            "unknown size unit '{rest}' in '{s}' (expected e.g. 1500, 1500B, 64KB, 100KBytes, 2MB)"
        ))
    }
}

/// Parses a byte size (`1500`, `1500B`, `64KB`, `100KBytes`, `2MB`; K = 1024).
pub fn parse_bytes(s: &str) -> Result<u64> {
    parse_size(s).map(|(v, _)| v)
}

/// Parses a size and says whether it carried a unit (`100KBytes`: true; `50`: false), which
/// is how ipfw's `queue SIZE` tells bytes from slots.
pub fn parse_size(s: &str) -> Result<(u64, bool)> {
    let (m, sc, rest) = split_number(s).map_err(|e| UnitError(format!("{e} in size '{s}'")))?;
    let (mult, unit) = size_unit(rest, s)?;
    Ok((scale(m, sc, mult, &format!("size '{s}'"))?, unit))
}

/// Prints a byte count as [`parse_size`] reads it back as bytes (always with a unit:
/// `100KBytes`, `1500Bytes`).
pub fn format_bytes(n: u64) -> String {
    for (shift, p) in [(30, "G"), (20, "M"), (10, "K")] {
        if n != 0 && n % (1u64 << shift) == 0 {
            return format!("{}{p}Bytes", n >> shift);
        }
    }
    format!("{n}Bytes")
}

/// Parses a duration into nanoseconds (`10s`, `500ms`, `1us`, `100ns`, `1.5s`; a bare
/// number is seconds: `5`, `0.1`).
pub fn parse_duration_ns(s: &str) -> Result<u64> {
    let (m, sc, rest) = split_number(s).map_err(|e| UnitError(format!("{e} in duration '{s}'")))?;
    let mult = match rest {
        "ns" => 1u128,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" | "" => 1_000_000_000,
        "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => {
            return err(format!(
                "unknown duration unit '{rest}' in '{s}' (expected ns, us, ms, s, min or h, \
                 e.g. 10s, 500ms; a bare number is seconds)"
            ))
        }
    };
    scale(m, sc, mult, &format!("duration '{s}'"))
}

/// [`parse_duration_ns`] as a [`Duration`].
pub fn parse_duration(s: &str) -> Result<Duration> {
    parse_duration_ns(s).map(Duration::from_nanos)
}

/// Prints nanoseconds with the largest exact unit (`10s`, `500ms`, `7ns`).
pub fn format_duration(ns: u64) -> String {
    for (mult, u) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns != 0 && ns % mult == 0 {
            return format!("{}{u}", ns / mult);
        }
    }
    format!("{ns}ns")
}

/// A measured rate in bit/s, printed with three decimals and the largest prefix not above
/// it: `100.000 Mbit/s`, `1.500 Gbit/s`, `64 bit/s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HumanRate(pub f64);

impl fmt::Display for HumanRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1e9 {
            write!(f, "{:.3} Gbit/s", b / 1e9)
        } else if b >= 1e6 {
            write!(f, "{:.3} Mbit/s", b / 1e6)
        } else if b >= 1e3 {
            write!(f, "{:.3} Kbit/s", b / 1e3)
        } else {
            write!(f, "{b:.0} bit/s")
        }
    }
}

/// A configured bandwidth in bit/s, printed as [`HumanRate`] does, except that 0 (no
/// limit) is `unlimited`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HumanBandwidth(pub f64);

impl fmt::Display for HumanBandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0.0 {
            f.write_str("unlimited")
        } else {
            HumanRate(self.0).fmt(f)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn msg<T: std::fmt::Debug>(r: Result<T>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn bandwidths_as_ipfw_writes_them() {
        // ipfw(8): "bw ... Kbit/s, Mbit/s ... KByte/s, MByte/s"; K = 1000.
        assert_eq!(parse_bandwidth("4Mbit/s"), Ok(4_000_000));
        assert_eq!(parse_bandwidth("100Kbit/s"), Ok(100_000));
        assert_eq!(parse_bandwidth("1Gbit/s"), Ok(1_000_000_000));
        assert_eq!(parse_bandwidth("300bit/s"), Ok(300));
        assert_eq!(parse_bandwidth("2KByte/s"), Ok(16_000));
        assert_eq!(parse_bandwidth("1MByte/s"), Ok(8_000_000));
        assert_eq!(parse_bandwidth("4M"), Ok(4_000_000));
        assert_eq!(parse_bandwidth("10G"), Ok(10_000_000_000));
        assert_eq!(parse_bandwidth("1.5Mbit/s"), Ok(1_500_000));
        assert_eq!(parse_bandwidth("1.5G"), Ok(1_500_000_000));
        assert_eq!(parse_bandwidth("10e9"), Ok(10_000_000_000));
        assert_eq!(parse_bandwidth("2.5E6bit/s"), Ok(2_500_000));
        assert_eq!(parse_duration_ns("1.5e-3s"), Ok(1_500_000));
        assert_eq!(parse_packet_rate("1e3"), Ok(1000.0));
        assert_eq!(parse_bandwidth("64000"), Ok(64_000));
        assert_eq!(parse_bandwidth("100Mbps"), Ok(100_000_000));
        assert_eq!(parse_bandwidth(" 10 Gbit/s "), Ok(10_000_000_000));
        assert_eq!(parse_duration_ns("5 s"), Ok(5_000_000_000));
        assert_eq!(parse_duration_ns("2min"), Ok(120_000_000_000));
        assert_eq!(parse_duration_ns("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_size("64 KB"), Ok((65_536, true)));
        assert_eq!(parse_bandwidth("unlimited"), Ok(0));
        // ipfw's other spellings, as pfSense and tutorials write them.
        for (text, bps) in [
            ("100Mb", 100_000_000),
            ("1Kb", 1_000),
            ("4Mbits", 4_000_000),
            ("2Mbit", 2_000_000),
            ("10MB", 80_000_000),
            ("500KBps", 4_000_000),
            ("1KBytes", 8_000),
            ("3kbytes/s", 24_000),
            ("1Gbits/s", 1_000_000_000),
        ] {
            assert_eq!(parse_bandwidth(text), Ok(bps), "{text}");
        }
        assert_eq!(parse_bandwidth("0"), Ok(0));
    }

    #[test]
    fn bad_quantities_say_what_is_wrong() {
        let e = msg(parse_bandwidth("4Mbit/z"));
        assert!(e.contains("unit") && e.contains("4Mbit/z"), "{e}");
        let e = msg(parse_bandwidth("fast"));
        assert!(e.contains("number") && e.contains("fast"), "{e}");
        let e = msg(parse_bandwidth("-5M"));
        assert!(e.contains("number") && e.contains("-5M"), "{e}");
        let e = msg(parse_bandwidth("1.0000005Kbit/s"));
        assert!(e.contains("whole"), "{e}");
        assert!(msg(parse_bandwidth("99999999999T")).contains("too large"));
        assert!(parse_bandwidth("1.2.3M").is_err());
        let e = msg(parse_duration_ns("10d"));
        assert!(e.contains("unit") && e.contains("10d"), "{e}");
        // The value, not its form, is the problem: said so.
        assert_eq!(
            msg(parse_duration_ns("99999999999h")),
            "duration '99999999999h' too large"
        );
        assert_eq!(
            msg(parse_duration_ns("1e30s")),
            "duration '1e30s' too large"
        );
        assert!(parse_duration_ns("-1s").is_err());
        assert!(parse_duration_ns("0.1ns").is_err());
        assert!(parse_duration_ns("1e-10s")
            .unwrap_err()
            .to_string()
            .contains("whole"));
        assert!(parse_bandwidth("1e99")
            .unwrap_err()
            .to_string()
            .contains("exponent"));
        assert!(parse_bandwidth("1e30T")
            .unwrap_err()
            .to_string()
            .contains("too large"));
        let e = msg(parse_bytes("10KiB"));
        assert!(e.contains("unit") && e.contains("10KiB"), "{e}");
        let e = msg(parse_packet_rate("10ppm"));
        assert!(e.contains("unit") && e.contains("10ppm"), "{e}");
        assert!(parse_packet_rate("many").is_err());
    }

    #[test]
    fn a_bare_number_is_in_the_base_unit() {
        assert_eq!(parse_bandwidth("64000"), Ok(64_000));
        assert_eq!(parse_size("1500"), Ok((1500, false)));
        assert_eq!(parse_duration_ns("10"), Ok(10_000_000_000));
        assert_eq!(parse_duration_ns("0.1"), Ok(100_000_000));
        assert_eq!(parse_duration_ns("0"), Ok(0));
        assert_eq!(parse_packet_rate("1000"), Ok(1000.0));
    }

    #[test]
    fn sizes_durations_and_packet_rates() {
        // dummynet's queue sizes count K as 1024.
        assert_eq!(parse_size("100KBytes"), Ok((102_400, true)));
        assert_eq!(parse_size("64KB"), Ok((65_536, true)));
        assert_eq!(parse_size("1500B"), Ok((1500, true)));
        assert_eq!(parse_size("2MB"), Ok((2 << 20, true)));
        assert_eq!(parse_size("1K"), Ok((1024, true)));
        assert_eq!(parse_duration_ns("10s"), Ok(10_000_000_000));
        assert_eq!(parse_duration_ns("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration_ns("1us"), Ok(1_000));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration("20us"), Ok(Duration::from_micros(20)));
        assert_eq!(parse_packet_rate("2.5K"), Ok(2500.0));
        assert_eq!(parse_packet_rate("1Mpps"), Ok(1e6));
        assert_eq!(parse_packet_rate("10pkt/s"), Ok(10.0));
        assert_eq!(parse_packet_rate("0.5"), Ok(0.5));
    }

    #[test]
    fn printing_picks_the_largest_exact_unit() {
        assert_eq!(format_bandwidth(4_000_000), "4Mbit/s");
        assert_eq!(format_bandwidth(1_500_000), "1500Kbit/s");
        assert_eq!(format_bandwidth(7), "7bit/s");
        assert_eq!(format_bandwidth(0), "unlimited");
        assert_eq!(format_bytes(102_400), "100KBytes");
        assert_eq!(format_bytes(1500), "1500Bytes");
        assert_eq!(format_duration(500_000_000), "500ms");
        assert_eq!(format_duration(0), "0ns");
    }

    #[test]
    fn human_rates() {
        assert_eq!(HumanRate(1.5e9).to_string(), "1.500 Gbit/s");
        assert_eq!(HumanRate(1e8).to_string(), "100.000 Mbit/s");
        assert_eq!(HumanRate(2500.0).to_string(), "2.500 Kbit/s");
        assert_eq!(HumanRate(64.0).to_string(), "64 bit/s");
        assert_eq!(HumanRate(0.0).to_string(), "0 bit/s");
        assert_eq!(HumanBandwidth(0.0).to_string(), "unlimited");
        assert_eq!(HumanBandwidth(1.5e9).to_string(), "1.500 Gbit/s");
    }

    proptest! {
        #[test]
        fn printed_quantities_parse_back(n in any::<u64>()) {
            prop_assert_eq!(parse_bandwidth(&format_bandwidth(n)), Ok(n));
            prop_assert_eq!(parse_size(&format_bytes(n)), Ok((n, true)));
            prop_assert_eq!(parse_duration_ns(&format_duration(n)), Ok(n));
        }
    }
}
