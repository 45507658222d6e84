//! Flowsets: groups of flows with one weight and one packet length (dummynet's
//! `-flowsets weight:len:flows[,weight:len:flows...]`).
//!
//! Each element gives a weight, the length of every packet its flows send and the number of
//! flows. Empty fields take defaults (weight 1, the default length, 1 flow), so `1::512` is
//! 512 flows of weight 1 sending default-length packets. `weight` and `len` may be a range
//! `min-max[-steps]`, which expands into `steps` flowsets evenly spaced as dummynet does
//! (`w_i = min + (max - min) * i / (steps - 1)`, integer division; `steps` defaults to 2
//! when `max != min`); a range on both expands into every combination, weights outer.
//! `1-8-4:1500:16` is four flowsets of 16 flows, weights 1, 3, 5 and 8.
//!
//! Flows are numbered from 0 in the order of the expanded flowsets, as in dummynet.
//!
//! Unlike dummynet, which quietly replaces a zero or missing value with a default, a value
//! out of range is an error naming it and its flowset.

use pspat_sched::{MAX_PACKET_LEN, MAX_WEIGHT};

use crate::error::FlowsetError;
use crate::number;

/// Default packet length of a flowset that leaves `len` empty (dummynet's).
pub const DEFAULT_LEN: u32 = 1000;

/// Most flows a run may have (the harness keeps a few words per flow; schedulers more).
pub const MAX_FLOWS: u64 = 1 << 22;

/// Most steps of one range.
pub const MAX_STEPS: u64 = 1 << 16;

/// One expanded flowset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flowset {
    /// Weight of each flow, `1..=MAX_WEIGHT`.
    pub weight: u32,
    /// Length in bytes of every packet of its flows, `1..=MAX_PACKET_LEN`.
    pub len: u32,
    /// Number of flows, at least 1.
    pub flows: u32,
    /// The element of the specification it came from, for messages.
    pub spec: String,
}

/// The flowsets of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flowsets {
    /// Expanded flowsets, in flow order.
    pub sets: Vec<Flowset>,
    /// Total number of flows.
    pub flows: u32,
    /// Sum of the weights of all flows.
    pub wsum: u64,
    /// The specification as given (dummynet prints it as `flow=`).
    pub label: String,
}

impl Flowsets {
    /// Parses and expands `spec`; flowsets that leave `len` empty get `default_len`.
    pub fn parse(spec: &str, default_len: u32) -> Result<Self, FlowsetError> {
        let mut sets = Vec::new();
        for element in spec.split(',') {
            if element.trim().is_empty() {
                return Err(FlowsetError::Empty {
                    spec: spec.to_owned(),
                });
            }
            expand(element, default_len, &mut sets)?;
        }
        let flows: u64 = sets.iter().map(|s| u64::from(s.flows)).sum();
        if flows > MAX_FLOWS {
            return Err(FlowsetError::TooManyFlows {
                spec: spec.to_owned(),
                flows,
                max: MAX_FLOWS,
            });
        }
        let wsum = sets
            .iter()
            .map(|s| u64::from(s.weight) * u64::from(s.flows))
            .sum();
        Ok(Self {
            sets,
            flows: flows as u32,
            wsum,
            label: spec.to_owned(),
        })
    }

    /// `flows` flows of weight 1 and length `len` (dummynet's `-flows N` without
    /// `-flowsets`), labelled `1::N` as dummynet does.
    pub fn uniform(flows: u64, len: u32) -> Result<Self, FlowsetError> {
        Self::parse(&format!("1::{flows}"), len)
    }

    /// The flowset of each flow, by flow index (`flows` entries).
    pub fn flow_map(&self) -> Vec<u32> {
        let mut map = Vec::with_capacity(self.flows as usize);
        for (i, s) in self.sets.iter().enumerate() {
            map.extend(std::iter::repeat(i as u32).take(s.flows as usize));
        }
        map
    }
}

/// A field of an element: its text, name and valid range.
struct Field<'a> {
    text: &'a str,
    name: &'static str,
    element: &'a str,
}

impl Field<'_> {
    fn err(&self, reason: impl Into<String>) -> FlowsetError {
        FlowsetError::Field {
            field: self.name,
            value: self.text.to_owned(),
            flowset: self.element.to_owned(),
            reason: reason.into(),
        }
    }

    fn number(&self, text: &str, max: u32) -> Result<u32, FlowsetError> {
        let v = number::parse_abs(text).map_err(|e| self.err(e.reason))?;
        if v == 0 || v > u64::from(max) {
            return Err(self.err(format!("must be 1..={max}")));
        }
        Ok(v as u32)
    }

    /// `v`, `min-max` or `min-max-steps`, as the list of values it expands to.
    fn range(&self, default: u32, max: u32) -> Result<Vec<u32>, FlowsetError> {
        if self.text.is_empty() {
            return Ok(vec![default]);
        }
        let parts: Vec<&str> = self.text.split('-').collect();
        let (lo, hi, steps) = match parts[..] {
            [v] => {
                let v = self.number(v, max)?;
                (v, v, 1)
            }
            [lo, hi] | [lo, hi, _] => {
                let (lo, hi) = (self.number(lo, max)?, self.number(hi, max)?);
                if hi < lo {
                    return Err(self.err(format!("range max {hi} is below min {lo}")));
                }
                let steps = match parts.get(2) {
                    None => u64::from(lo != hi) + 1,
                    Some(s) => number::parse_abs(s).map_err(|e| self.err(e.reason))?,
                };
                if steps == 0 || steps > MAX_STEPS {
                    return Err(self.err(format!("range steps must be 1..={MAX_STEPS}")));
                }
                (lo, hi, steps)
            }
            _ => return Err(self.err("expected a value or min-max[-steps]")),
        };
        let span = u64::from(hi - lo);
        Ok((0..steps)
            .map(|i| (u64::from(lo) + span * i / (steps - 1).max(1)) as u32)
            .collect())
    }
}

fn expand(element: &str, default_len: u32, out: &mut Vec<Flowset>) -> Result<(), FlowsetError> {
    let fields: Vec<&str> = element.split(':').map(str::trim).collect();
    if fields.len() > 3 {
        return Err(FlowsetError::Fields {
            flowset: element.to_owned(),
        });
    }
    let field = |i: usize, name| Field {
        text: fields.get(i).copied().unwrap_or(""),
        name,
        element,
    };
    let weights = field(0, "weight").range(1, MAX_WEIGHT)?;
    let lens = field(1, "len").range(default_len, MAX_PACKET_LEN)?;
    let flows_field = field(2, "flows");
    let flows = if flows_field.text.is_empty() {
        1
    } else {
        flows_field.number(flows_field.text, MAX_FLOWS as u32)?
    };
    if (weights.len() * lens.len()) as u64 * u64::from(flows) > MAX_FLOWS {
        return Err(FlowsetError::TooManyFlows {
            spec: element.to_owned(),
            flows: (weights.len() * lens.len()) as u64 * u64::from(flows),
            max: MAX_FLOWS,
        });
    }
    for &weight in &weights {
        for &len in &lens {
            out.push(Flowset {
                weight,
                len,
                flows,
                spec: element.to_owned(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wlf(spec: &str) -> Vec<(u32, u32, u32)> {
        Flowsets::parse(spec, DEFAULT_LEN)
            .unwrap()
            .sets
            .iter()
            .map(|s| (s.weight, s.len, s.flows))
            .collect()
    }

    #[test]
    fn defaults_fill_empty_fields() {
        assert_eq!(wlf("1::512"), [(1, 1000, 512)]);
        assert_eq!(wlf("::"), [(1, 1000, 1)]);
        assert_eq!(wlf("3"), [(3, 1000, 1)]);
        assert_eq!(wlf("3:1500"), [(3, 1500, 1)]);
        assert_eq!(wlf("1::512,8::64"), [(1, 1000, 512), (8, 1000, 64)]);
        let f = Flowsets::parse("1::4,2:64:2", 777).unwrap();
        assert_eq!((f.sets[0].len, f.flows, f.wsum), (777, 6, 8));
        assert_eq!(f.label, "1::4,2:64:2");
        assert_eq!(f.sets[1].spec, "2:64:2");
        assert_eq!(f.flow_map(), [0, 0, 0, 0, 1, 1]);
    }

    #[test]
    fn ranges_expand_like_dummynet() {
        assert_eq!(
            wlf("1-8-4:1500:16"),
            [(1, 1500, 16), (3, 1500, 16), (5, 1500, 16), (8, 1500, 16)]
        );
        // two steps by default, one when min == max
        assert_eq!(wlf("2-6::1"), [(2, 1000, 1), (6, 1000, 1)]);
        assert_eq!(wlf("4-4::1"), [(4, 1000, 1)]);
        assert_eq!(wlf("4-4-3::1"), [(4, 1000, 1); 3]);
        // both ranges: every combination, weights outer
        assert_eq!(
            wlf("1-2:100-300-3:2"),
            [
                (1, 100, 2),
                (1, 200, 2),
                (1, 300, 2),
                (2, 100, 2),
                (2, 200, 2),
                (2, 300, 2)
            ]
        );
        assert_eq!(wlf("1:1k:1K"), [(1, 1024, 1000)]);
        let f = Flowsets::parse("1-8-4:1500:16", DEFAULT_LEN).unwrap();
        assert_eq!((f.flows, f.wsum), (64, 16 * (1 + 3 + 5 + 8)));
    }

    #[test]
    fn uniform_is_labelled_like_dummynet() {
        let f = Flowsets::uniform(1024, 1500).unwrap();
        assert_eq!(f.label, "1::1024");
        assert_eq!(
            f.sets,
            [Flowset {
                weight: 1,
                len: 1500,
                flows: 1024,
                spec: "1::1024".into()
            }]
        );
    }

    fn err(spec: &str) -> String {
        Flowsets::parse(spec, DEFAULT_LEN).unwrap_err().to_string()
    }

    #[test]
    fn every_error_names_its_token() {
        assert_eq!(
            err("0:1500:4"),
            "invalid weight '0' in flowset '0:1500:4': must be 1..=65536"
        );
        let cases = [
            ("1::4,65537::1", "weight '65537'", "'65537::1'"),
            ("x::4", "weight 'x'", "'x::4'"),
            ("-1::4", "weight '-1'", "'-1::4'"),
            ("8-1::4", "weight '8-1'", "below min"),
            ("1-8-0::4", "weight '1-8-0'", "steps"),
            ("1-2-3-4::4", "weight '1-2-3-4'", "min-max"),
            ("1:0:4", "len '0'", "'1:0:4'"),
            ("1:2m:4", "len '2m'", "1..=1048576"),
            ("1:1q:4", "len '1q'", "suffix"),
            ("1:1500:0", "flows '0'", "'1:1500:0'"),
            ("1:1500:4n", "flows '4n'", "-qmin"),
            ("1:1500:1-2", "flows '1-2'", "'1:1500:1-2'"),
            ("1:2:3:4", "flowset '1:2:3:4'", "weight:len:flows"),
            ("1::4,", "empty flowset in '1::4,'", ""),
            ("", "empty flowset in ''", ""),
            ("1::5M", "flows '5M'", "1..=4194304"),
            ("1-1000-1000::8k", "too many flows", "'1-1000-1000::8k'"),
        ];
        for (spec, a, b) in cases {
            let e = err(spec);
            assert!(e.contains(a) && e.contains(b), "{spec}: {e}");
            assert!(!e.contains('\n'), "{spec}: {e}");
        }
        // the sum over elements is capped too
        let e = err("1::4m,1::1");
        assert!(e.contains("too many flows in '1::4m,1::1'"), "{e}");
    }
}
