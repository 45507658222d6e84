//! Quantities as ipfw writes them: bandwidths, byte sizes and durations, parsed and printed.
//!
//! Both front ends use these functions, so `bw 4Mbit/s` in ipfw syntax and
//! `bw = "4Mbit/s"` in TOML mean the same thing, and the printers write what the parsers
//! read back (`format_*` then `parse_*` is the identity: tested below).
//!
//! Choices, following ipfw(8) and dummynet where they say something:
//! - bandwidth prefixes `K`, `M`, `G`, `T` are powers of 1000 (ipfw: `Kbit/s` = 1000 bit/s);
//!   the unit is bits (`bit/s`, `b/s`, `bps`, or none) or bytes (`Byte/s`, `B/s`, `Bps`),
//!   so `4M`, `4Mbit/s` and `500KByte/s` are all 4 000 000 bit/s; `unlimited` is 0;
//! - byte-size prefixes `K`, `M`, `G` are powers of 1024, as dummynet's `queue 100KBytes`;
//!   the unit is `B`, `Byte(s)` or none;
//! - durations need a unit (`ns`, `us`, `ms`, `s`): a bare number is refused, since no
//!   default unit would be obvious;
//! - a number may have a decimal fraction (`1.5Mbit/s`) when the result is a whole number
//!   of the base unit; anything else, and any overflow of `u64`, is refused.
//!
//! Errors are plain strings saying what was wrong; the front ends add the position.

/// Splits `s` into its leading number (digits with an optional `.fraction`) and the rest.
fn split_number(s: &str) -> Result<(u128, u32, &str), String> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, rest) = s.split_at(end);
    if num.is_empty() || !num.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("expected a number".into());
    }
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if frac.contains('.') || int.len() + frac.len() > 30 {
        return Err(format!("'{num}' is not a number"));
    }
    let mut mantissa: u128 = 0;
    for c in int.chars().chain(frac.chars()) {
        mantissa = mantissa * 10 + u128::from(c as u8 - b'0');
    }
    Ok((mantissa, frac.len() as u32, rest))
}

/// `mantissa / 10^scale * mult`, when it is a whole number that fits a `u64`.
fn scale(mantissa: u128, scale: u32, mult: u128, what: &str) -> Result<u64, String> {
    let div = 10u128.pow(scale);
    let v = mantissa
        .checked_mul(mult)
        .ok_or_else(|| format!("{what} too large"))?;
    if v % div != 0 {
        return Err(format!("{what} is not a whole number of its base unit"));
    }
    u64::try_from(v / div).map_err(|_| format!("{what} too large"))
}

/// Parses a bandwidth into bits per second (`4Mbit/s`, `100Kbit/s`, `1Gbit/s`, `64000`,
/// `10M`, `2MByte/s`, `unlimited` = 0).
pub fn parse_bandwidth(s: &str) -> Result<u64, String> {
    if s.eq_ignore_ascii_case("unlimited") {
        return Ok(0);
    }
    let (m, sc, rest) = split_number(s).map_err(|e| format!("{e} in bandwidth '{s}'"))?;
    let (mult, unit) = match rest.chars().next() {
        Some('K' | 'k') => (1_000u128, &rest[1..]),
        Some('M' | 'm') => (1_000_000, &rest[1..]),
        Some('G' | 'g') => (1_000_000_000, &rest[1..]),
        Some('T' | 't') => (1_000_000_000_000, &rest[1..]),
        _ => (1, rest),
    };
    let per_unit = match unit {
        "" | "bps" | "b/s" => 1,
        "Bps" | "B/s" => 8,
        u if u.eq_ignore_ascii_case("bit/s") || u.eq_ignore_ascii_case("bits/s") => 1,
        u if u.eq_ignore_ascii_case("byte/s") || u.eq_ignore_ascii_case("bytes/s") => 8,
        _ => {
            return Err(format!(
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
    ]
    .into_iter()
    .chain([(1_000, "K")])
    {
        if bps % mult == 0 {
            return format!("{}{p}bit/s", bps / mult);
        }
    }
    format!("{bps}bit/s")
}

/// A byte size's prefix multiplier and whether a unit was written at all.
fn size_unit(rest: &str, s: &str) -> Result<(u128, bool), String> {
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
        Err(format!(
            "unknown size unit '{rest}' in '{s}' (expected e.g. 1500, 1500B, 64KB, 100KBytes, 2MB)"
        ))
    }
}

/// Parses a byte size (`1500`, `1500B`, `64KB`, `100KBytes`, `2MB`; K = 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_size(s).map(|(v, _)| v)
}

/// Parses a size and says whether it carried a unit (`100KBytes`: true; `50`: false), which
/// is how ipfw's `queue SIZE` tells bytes from slots.
pub fn parse_size(s: &str) -> Result<(u64, bool), String> {
    let (m, sc, rest) = split_number(s).map_err(|e| format!("{e} in size '{s}'"))?;
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

/// Parses a duration into nanoseconds (`10s`, `500ms`, `1us`, `100ns`).
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let (m, sc, rest) = split_number(s).map_err(|e| format!("{e} in duration '{s}'"))?;
    let mult = match rest {
        "ns" => 1u128,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => {
            return Err(format!(
                "duration '{s}' needs a unit: ns, us, ms or s (e.g. 10s, 500ms)"
            ))
        }
    };
    scale(m, sc, mult, &format!("duration '{s}'"))
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

/// Parses a mask or other unsigned number in hex (`0xff`) or decimal, up to `max`.
pub fn parse_uint(s: &str, max: u128) -> Result<u128, String> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u128::from_str_radix(h, 16)
    } else {
        s.parse::<u128>()
    }
    .map_err(|_| format!("'{s}' is not a number (decimal or 0x hex)"))?;
    if v > max {
        return Err(format!("{s} is larger than {max:#x}"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        assert_eq!(parse_bandwidth("64000"), Ok(64_000));
        assert_eq!(parse_bandwidth("unlimited"), Ok(0));
        assert_eq!(parse_bandwidth("0"), Ok(0));
    }

    #[test]
    fn bad_quantities_say_what_is_wrong() {
        let e = parse_bandwidth("4Mbits").unwrap_err();
        assert!(e.contains("unit") && e.contains("4Mbits"), "{e}");
        let e = parse_bandwidth("fast").unwrap_err();
        assert!(e.contains("number") && e.contains("fast"), "{e}");
        let e = parse_bandwidth("1.0000005Kbit/s").unwrap_err();
        assert!(e.contains("whole"), "{e}");
        assert!(parse_bandwidth("99999999999T")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_bandwidth("1.2.3M").is_err());
        let e = parse_duration("10").unwrap_err();
        assert!(e.contains("unit"), "{e}");
        assert!(parse_duration("10h").is_err());
        let e = parse_bytes("10KiB").unwrap_err();
        assert!(e.contains("unit") && e.contains("10KiB"), "{e}");
        assert!(parse_uint("0xfg", 255).is_err());
        assert!(parse_uint("256", 255).unwrap_err().contains("larger"));
    }

    #[test]
    fn sizes_and_durations() {
        // dummynet's queue sizes count K as 1024.
        assert_eq!(parse_size("100KBytes"), Ok((102_400, true)));
        assert_eq!(parse_size("64KB"), Ok((65_536, true)));
        assert_eq!(parse_size("1500"), Ok((1500, false)));
        assert_eq!(parse_size("1500B"), Ok((1500, true)));
        assert_eq!(parse_size("2MB"), Ok((2 << 20, true)));
        assert_eq!(parse_size("1K"), Ok((1024, true)));
        assert_eq!(parse_duration("10s"), Ok(10_000_000_000));
        assert_eq!(parse_duration("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration("1us"), Ok(1_000));
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_uint("0xff", 255), Ok(255));
        assert_eq!(parse_uint("65535", 65535), Ok(65535));
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

    proptest! {
        #[test]
        fn printed_quantities_parse_back(n in any::<u64>()) {
            prop_assert_eq!(parse_bandwidth(&format_bandwidth(n)), Ok(n));
            prop_assert_eq!(parse_size(&format_bytes(n)), Ok((n, true)));
            prop_assert_eq!(parse_duration(&format_duration(n)), Ok(n));
        }
    }
}
