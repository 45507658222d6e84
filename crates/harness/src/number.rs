//! Numbers in dummynet's "human form" (`getnum()` of dummynet's `test/main.c`).
//!
//! An unsigned integer, decimal or `0x` hexadecimal, with at most one suffix:
//!
//! | suffix | meaning          |
//! |--------|------------------|
//! | `K`    | x 1000           |
//! | `M`    | x 1000^2         |
//! | `k`    | x 1024           |
//! | `m`    | x 1024^2         |
//! | `n`    | per flow (x the number of flows, known later): only `-qmin`/`-qmax` |
//!
//! Stricter than dummynet where dummynet silently guesses: an empty string, a sign, an
//! unknown suffix or an overflow is an error naming the token, and a leading `0` is
//! decimal (C's `strtol(.., 0)` would read `010` as octal 8).

use std::fmt;
use std::str::FromStr;

use crate::error::NumError;

/// A number as written on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Num {
    /// An absolute value.
    Abs(u64),
    /// `k` per flow (written `kn`): multiplied by the number of flows once it is known.
    PerFlow(u64),
}

impl Num {
    /// The value for a run with `flows` flows (saturating).
    pub fn resolve(self, flows: u64) -> u64 {
        match self {
            Num::Abs(v) => v,
            Num::PerFlow(k) => k.saturating_mul(flows),
        }
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::Abs(v) => write!(f, "{v}"),
            Num::PerFlow(k) => write!(f, "{k}n"),
        }
    }
}

impl FromStr for Num {
    type Err = NumError;

    fn from_str(s: &str) -> Result<Self, NumError> {
        parse(s)
    }
}

/// Parses a number that may be per flow (`-qmin`, `-qmax`).
pub fn parse(token: &str) -> Result<Num, NumError> {
    let err = |reason: &'static str| NumError {
        token: token.to_owned(),
        reason,
    };
    if token.is_empty() {
        return Err(err("empty number"));
    }
    let (digits, radix) = match token
        .strip_prefix("0x")
        .or_else(|| token.strip_prefix("0X"))
    {
        Some(hex) => (hex, 16),
        None => (token, 10),
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    let (num, suffix) = digits.split_at(end);
    if num.is_empty() {
        return Err(err(if token.starts_with('-') || token.starts_with('+') {
            "must be a non-negative integer"
        } else {
            "not a number"
        }));
    }
    let v = u64::from_str_radix(num, radix).map_err(|_| err("too large"))?;
    let scale: u64 = match suffix {
        "" | "n" => 1,
        "K" => 1000,
        "M" => 1000 * 1000,
        "k" => 1024,
        "m" => 1024 * 1024,
        _ => return Err(err("unknown suffix (use K, M, k, m, or n for per flow)")),
    };
    let v = v.checked_mul(scale).ok_or_else(|| err("too large"))?;
    Ok(if suffix == "n" {
        Num::PerFlow(v)
    } else {
        Num::Abs(v)
    })
}

/// Parses an absolute number (no `n` suffix).
pub fn parse_abs(token: &str) -> Result<u64, NumError> {
    match parse(token)? {
        Num::Abs(v) => Ok(v),
        Num::PerFlow(_) => Err(NumError {
            token: token.to_owned(),
            reason: "the per-flow suffix 'n' is only for -qmin and -qmax",
        }),
    }
}

/// Parses an absolute number that fits in a `u32`.
pub fn parse_u32(token: &str) -> Result<u32, NumError> {
    u32::try_from(parse_abs(token)?).map_err(|_| NumError {
        token: token.to_owned(),
        reason: "too large (at most 4294967295)",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_hex_and_suffixes() {
        assert_eq!(parse("0"), Ok(Num::Abs(0)));
        assert_eq!(parse("1500"), Ok(Num::Abs(1500)));
        assert_eq!(parse("010"), Ok(Num::Abs(10)));
        assert_eq!(parse("0x10"), Ok(Num::Abs(16)));
        assert_eq!(parse("2K"), Ok(Num::Abs(2000)));
        assert_eq!(parse("10M"), Ok(Num::Abs(10_000_000)));
        assert_eq!(parse("2k"), Ok(Num::Abs(2048)));
        assert_eq!(parse("3m"), Ok(Num::Abs(3 << 20)));
        assert_eq!(parse("30n"), Ok(Num::PerFlow(30)));
        assert_eq!("4n".parse::<Num>(), Ok(Num::PerFlow(4)));
    }

    #[test]
    fn per_flow_resolves_with_the_flow_count() {
        assert_eq!(Num::PerFlow(30).resolve(1024), 30 * 1024);
        assert_eq!(Num::Abs(7).resolve(1024), 7);
        assert_eq!(Num::PerFlow(u64::MAX).resolve(2), u64::MAX);
        assert_eq!(Num::PerFlow(4).to_string(), "4n");
        assert_eq!(Num::Abs(4).to_string(), "4");
    }

    #[test]
    fn errors_name_the_token() {
        for (bad, why) in [
            ("", "empty"),
            ("-1", "non-negative"),
            ("x", "not a number"),
            ("12q", "unknown suffix"),
            ("1KK", "unknown suffix"),
            ("0x", "not a number"),
            ("99999999999999999999", "too large"),
            ("18446744073709551615K", "too large"),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains(why),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn absolute_numbers_refuse_per_flow() {
        assert_eq!(parse_abs("10M"), Ok(10_000_000));
        let e = parse_abs("3n").unwrap_err().to_string();
        assert!(e.contains("'3n'") && e.contains("-qmin"), "{e}");
        assert_eq!(parse_u32("4k"), Ok(4096));
        let e = parse_u32("5000M").unwrap_err().to_string();
        assert!(e.contains("'5000M'"), "{e}");
    }
}
