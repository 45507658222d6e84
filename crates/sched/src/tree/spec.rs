//! A tree as its user describes it, before it is built: what the configuration layers
//! (ipfw and TOML syntax, `pspat sim`) produce and [`super::TreeSched::new`] checks.

use thiserror::Error;

use crate::error::ConfigError;
use crate::flow::{DEFAULT_MAX_LEN, MAX_PACKET_LEN, MAX_WEIGHT};
use crate::registry::Params;

/// Deepest tree: classes at most this many levels below the link (HTB's `TC_HTB_MAXDEPTH`).
pub const MAX_DEPTH: usize = 8;

/// Priority bands among siblings: `prio` is `0..BANDS`, lowest first (HTB's 8).
pub const BANDS: usize = 8;

/// How long a class may be late at its rate or ceil without losing credit, when its burst
/// is not given: a burst is the bytes of this many ns at the rate, at least two packets
/// (so that no quantum or burst needs tuning from 64 kbit/s to 100 Gbit/s).
pub const DEFAULT_BURST_NS: u64 = 1_000_000;

/// The inner-node algorithms: the names of the registry a node can use to order its
/// children, and the discipline each gets (see [`super::discipline`]).
pub const INNER_ALGORITHMS: &[(&str, InnerKind)] = &[
    ("wf2q+", InnerKind::Wf2q),
    ("wf2q++", InnerKind::Wf2q),
    ("qfq", InnerKind::Qfq),
    ("qfq+", InnerKind::Qfq),
    ("drr", InnerKind::Drr),
    ("drr-sfo", InnerKind::Drr),
    ("scrr", InnerKind::Drr),
];

/// The discipline an inner node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InnerKind {
    /// WF2Q+ over the children.
    Wf2q,
    /// QFQ over the children.
    Qfq,
    /// Deficit round robin over the children.
    Drr,
}

/// The inner discipline for an algorithm name of the registry (names and aliases).
pub fn inner_kind(name: &str) -> Result<InnerKind, SpecError> {
    let info = crate::registry::lookup(name).map_err(SpecError::Algorithm)?;
    INNER_ALGORITHMS
        .iter()
        .find(|(n, _)| info.answers_to(n))
        .map(|&(_, k)| k)
        .ok_or_else(|| SpecError::InnerAlgorithm {
            name: name.to_owned(),
            known: INNER_ALGORITHMS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// One class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassSpec {
    /// The name the user knows it by (`sched 10`, `1:10`), for messages and statistics.
    pub name: String,
    /// Index of the parent class in [`TreeSpec::classes`]; `None` under the link.
    pub parent: Option<usize>,
    /// An inner class: how it orders its children ([`INNER_ALGORITHMS`]). A leaf: the
    /// scheduler of its flows (any algorithm of the registry).
    pub algorithm: String,
    /// The algorithm's parameters.
    pub params: Params,
    /// Guaranteed rate, bit/s; 0 for none.
    pub rate_bps: u64,
    /// Maximum rate, bit/s; `None` for none.
    pub ceil_bps: Option<u64>,
    /// Bytes it may send at once beyond its rate; `None` for [`DEFAULT_BURST_NS`] of it.
    pub burst: Option<u64>,
    /// Bytes it may send at once beyond its ceil; `None` for [`DEFAULT_BURST_NS`] of it.
    pub cburst: Option<u64>,
    /// Share of its parent's excess among the siblings of its band, `1..=MAX_WEIGHT`.
    pub weight: u32,
    /// Priority band among its siblings, `0..BANDS`, lowest served first.
    pub prio: u8,
    /// A leaf: packets it may hold (its scheduler's capacity).
    pub limit_pkts: u32,
}

impl ClassSpec {
    /// A class under `parent` scheduled (or scheduling its children) by `algorithm`:
    /// no rate, no ceil, weight 1, band 0, room for 1000 packets.
    pub fn new(name: impl Into<String>, parent: Option<usize>, algorithm: &str) -> Self {
        Self {
            name: name.into(),
            parent,
            algorithm: algorithm.to_owned(),
            params: Params::new(),
            rate_bps: 0,
            ceil_bps: None,
            burst: None,
            cburst: None,
            weight: 1,
            prio: 0,
            limit_pkts: 1000,
        }
    }

    /// With guaranteed rate `bps`.
    pub fn rate(self, bps: u64) -> Self {
        Self {
            rate_bps: bps,
            ..self
        }
    }

    /// With ceil `bps`.
    pub fn ceil(self, bps: u64) -> Self {
        Self {
            ceil_bps: Some(bps),
            ..self
        }
    }

    /// With weight `w`.
    pub fn weight(self, w: u32) -> Self {
        Self { weight: w, ..self }
    }

    /// In band `prio`.
    pub fn prio(self, prio: u8) -> Self {
        Self { prio, ..self }
    }

    /// Checks its own values (weight, band, ceil against rate), naming the class.
    pub fn check_values(&self) -> Result<(), SpecError> {
        let class = || self.name.clone();
        if self.weight == 0 || self.weight > MAX_WEIGHT {
            return Err(SpecError::Weight {
                class: class(),
                weight: self.weight,
            });
        }
        if usize::from(self.prio) >= BANDS {
            return Err(SpecError::Prio {
                class: class(),
                prio: self.prio,
            });
        }
        if let Some(ceil) = self.ceil_bps {
            if ceil == 0 || ceil < self.rate_bps {
                return Err(SpecError::Ceil {
                    class: class(),
                    ceil,
                    rate: self.rate_bps,
                });
            }
        }
        Ok(())
    }

    /// The burst of a rate of `bps` given `burst` (or not), packets of up to `mtu` bytes.
    pub fn burst_bytes(bps: u64, burst: Option<u64>, mtu: u32) -> u64 {
        burst.unwrap_or_else(|| {
            let at_rate = u128::from(bps) * u128::from(DEFAULT_BURST_NS) / 8_000_000_000;
            u64::try_from(at_rate)
                .unwrap_or(u64::MAX)
                .max(2 * u64::from(mtu))
        })
    }
}

/// A tree: the link's scheduler over the top classes, and the classes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeSpec {
    /// How the link orders the top classes ([`INNER_ALGORITHMS`]).
    pub algorithm: String,
    /// Largest packet, bytes: a class's budget in its parent's schedule.
    pub mtu: u32,
    /// The classes; a class no other names as parent is a leaf.
    pub classes: Vec<ClassSpec>,
}

impl TreeSpec {
    /// An empty tree under a link scheduled by `algorithm`, packets of up to 1500 bytes.
    pub fn new(algorithm: &str) -> Self {
        Self {
            algorithm: algorithm.to_owned(),
            mtu: DEFAULT_MAX_LEN,
            classes: Vec::new(),
        }
    }

    /// Adds a class; returns its index.
    pub fn add(&mut self, class: ClassSpec) -> usize {
        self.classes.push(class);
        self.classes.len() - 1
    }

    /// Whether each class has children (is inner).
    pub fn has_children(&self) -> Vec<bool> {
        let mut inner = vec![false; self.classes.len()];
        for c in &self.classes {
            if let Some(p) = c.parent.filter(|&p| p < inner.len()) {
                inner[p] = true;
            }
        }
        inner
    }

    /// Checks everything but the leaves' algorithms (which building them checks): the
    /// first problem, naming the class.
    pub fn validate(&self) -> Result<(), SpecError> {
        inner_kind(&self.algorithm)?;
        if self.mtu == 0 || self.mtu > MAX_PACKET_LEN {
            return Err(SpecError::Mtu { mtu: self.mtu });
        }
        let n = self.classes.len();
        for c in &self.classes {
            if let Some(p) = c.parent {
                if p >= n {
                    return Err(SpecError::NoParent {
                        class: c.name.clone(),
                        parent: p,
                    });
                }
            }
        }
        // Cycles first: a class below a cycle would otherwise look too deep.
        for (i, c) in self.classes.iter().enumerate() {
            let mut up = c.parent;
            for _ in 0..n {
                match up {
                    Some(p) if p == i => {
                        return Err(SpecError::Cycle {
                            class: c.name.clone(),
                        })
                    }
                    Some(p) => up = self.classes[p].parent,
                    None => break,
                }
            }
        }
        let mut names = std::collections::HashSet::with_capacity(n);
        if let Some(c) = self.classes.iter().find(|c| !names.insert(c.name.as_str())) {
            return Err(SpecError::Duplicate {
                class: c.name.clone(),
            });
        }
        let has_children = self.has_children();
        for (i, c) in self.classes.iter().enumerate() {
            let class = || c.name.clone();
            let mut depth = 1;
            let mut up = c.parent;
            while let Some(p) = up {
                depth += 1;
                up = self.classes[p].parent;
            }
            if depth > MAX_DEPTH {
                return Err(SpecError::Depth {
                    class: class(),
                    depth,
                });
            }
            c.check_values()?;
            if has_children[i] {
                inner_kind(&c.algorithm).map_err(|e| SpecError::Class {
                    class: class(),
                    source: Box::new(e),
                })?;
            } else if c.limit_pkts == 0 {
                return Err(SpecError::Limit { class: class() });
            }
        }
        Ok(())
    }
}

/// A tree that cannot be built, naming the class and the value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[allow(missing_docs)] // variant fields are the values the message names
pub enum SpecError {
    #[error(transparent)]
    Algorithm(ConfigError),
    #[error(
        "'{name}' cannot schedule the children of a class (inner classes use one of: {known})"
    )]
    InnerAlgorithm { name: String, known: String },
    #[error("class {class}: {source}")]
    Class {
        class: String,
        source: Box<SpecError>,
    },
    #[error("class {class}: {source}")]
    Leaf { class: String, source: ConfigError },
    #[error("mtu {mtu} must be 1..={MAX_PACKET_LEN} bytes")]
    Mtu { mtu: u32 },
    #[error("class {class}: parent {parent} is not a class")]
    NoParent { class: String, parent: usize },
    #[error("two classes are named {class}")]
    Duplicate { class: String },
    #[error("class {class} is its own ancestor")]
    Cycle { class: String },
    #[error("class {class} is {depth} levels deep (at most {MAX_DEPTH})")]
    Depth { class: String, depth: usize },
    #[error("class {class}: weight {weight} must be 1..={MAX_WEIGHT}")]
    Weight { class: String, weight: u32 },
    #[error("class {class}: prio {prio} must be 0..={}", BANDS - 1)]
    Prio { class: String, prio: u8 },
    #[error("class {class}: ceil {ceil} bit/s is below its rate {rate} bit/s (or zero)")]
    Ceil { class: String, ceil: u64, rate: u64 },
    #[error("class {class}: a leaf needs room for at least one packet")]
    Limit { class: String },
    #[error("class {class} is not a leaf: flows attach to leaves")]
    NotALeaf { class: String },
    #[error("class index {index} out of range ({classes} classes)")]
    NoClass { index: usize, classes: usize },
    #[error("class {class} has {children} classes under it and {packets} packets queued: a class is removed empty")]
    Busy {
        class: String,
        children: usize,
        packets: u64,
    },
    #[error("class {class}: its {field} cannot change while the tree runs")]
    Change { class: String, field: &'static str },
    #[error("class {class} cannot go under {parent}, a leaf")]
    NotInner { class: String, parent: String },
    #[error(
        "class {class}: the leaves of this tree share one flow table of '{shared}', so a new \
         leaf runs '{shared}' with the same parameters, not '{algorithm}'"
    )]
    SharedLeaf {
        class: String,
        algorithm: String,
        shared: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_level() -> TreeSpec {
        let mut t = TreeSpec::new("qfq");
        let site = t.add(ClassSpec::new("site", None, "drr").ceil(10_000_000));
        t.add(ClassSpec::new("a", Some(site), "fifo").rate(1_000_000));
        t.add(ClassSpec::new("b", Some(site), "qfq").weight(3));
        t
    }

    #[test]
    fn a_good_tree_passes() {
        two_level().validate().unwrap();
    }

    #[test]
    fn errors_name_the_class_and_value() {
        let mut t = two_level();
        t.classes[1].ceil_bps = Some(500_000);
        let e = t.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "class a: ceil 500000 bit/s is below its rate 1000000 bit/s (or zero)"
        );
        let mut t = two_level();
        t.classes[0].algorithm = "fifo".into();
        let e = t.validate().unwrap_err().to_string();
        assert!(e.starts_with("class site: 'fifo' cannot schedule"), "{e}");
        let mut t = two_level();
        t.classes[0].parent = Some(2);
        assert_eq!(
            t.validate().unwrap_err(),
            SpecError::Cycle {
                class: "site".into()
            }
        );
        let mut t = two_level();
        t.classes[2].prio = 8;
        assert!(t.validate().unwrap_err().to_string().contains("prio 8"));
        let mut t = two_level();
        t.classes[2].weight = 0;
        assert!(t.validate().unwrap_err().to_string().contains("weight 0"));
        let mut t = TreeSpec::new("qfq");
        let mut parent = None;
        for i in 0..=MAX_DEPTH {
            parent = Some(t.add(ClassSpec::new(format!("c{i}"), parent, "drr")));
        }
        assert_eq!(
            t.validate().unwrap_err(),
            SpecError::Depth {
                class: format!("c{MAX_DEPTH}"),
                depth: MAX_DEPTH + 1
            }
        );
    }

    #[test]
    fn default_bursts_scale_with_the_rate() {
        assert_eq!(
            ClassSpec::burst_bytes(64_000, None, 1500),
            3000,
            "two packets"
        );
        assert_eq!(
            ClassSpec::burst_bytes(100_000_000_000, None, 1500),
            12_500_000,
            "1 ms at 100 Gbit/s"
        );
        assert_eq!(ClassSpec::burst_bytes(1_000_000, Some(10), 1500), 10);
    }
}
