//! The list of algorithms: the one place a new algorithm is registered.
//!
//! An entry is a type implementing [`Algorithm`]: how to build its scheduler for any packet
//! type. Every [`Policy`] is one (through [`Sched`]); an algorithm that keeps its packets
//! its own way (FIFO's single queue) implements [`Algorithm`] and [`Scheduler`] directly.
//!
//! The CLI, the benchmarks and the conformance tests iterate [`algorithms`], and build
//! schedulers by name through [`visit`] (monomorphised: the caller's hot loop is compiled
//! once per algorithm, as ripgrep does with its matchers) or [`build`] (boxed, for code off
//! the data path).

use std::fmt;
use std::str::FromStr;

use crate::algorithms::prio::PrioAlgorithm;
use crate::algorithms::scrr::{Scrr, ScrrBasic, ScrrNeia, ScrrNmia, ScrrNmne, ScrrNpm};
use crate::algorithms::{drr::Drr, drr_sfo::DrrSfo, fifo::FifoAlgorithm, scfq::Scfq};
use crate::algorithms::{kps::Kps, qfq::Qfq, qfq_plus::QfqPlus, stfq::Stfq};
use crate::algorithms::{wf2qp::Wf2qPlus, wf2qpp::Wf2qPlusPlus};
use crate::error::ConfigError;
use crate::packet::Packet;
use crate::policy::{Policy, Sched};
use crate::scheduler::Scheduler;

/// What kind of service an algorithm gives, which decides the properties it is tested for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceClass {
    /// One queue in arrival order.
    Fifo,
    /// Strict priority between bands.
    StrictPriority,
    /// Shares proportional to weights.
    WeightedFair,
}

/// A named parameter of an algorithm.
#[derive(Clone, Copy, Debug)]
pub struct ParamInfo {
    /// Name as written on the command line (`quantum=1500`).
    pub name: &'static str,
    /// Default value, as text.
    pub default: &'static str,
    /// One-line description.
    pub help: &'static str,
}

/// Description of an algorithm.
#[derive(Clone, Copy, Debug)]
pub struct AlgorithmInfo {
    /// Canonical name.
    pub name: &'static str,
    /// Other accepted names (dummynet's names among them).
    pub aliases: &'static [&'static str],
    /// One-line description.
    pub summary: &'static str,
    /// Cost per enqueue/dequeue, in the number of flows N.
    pub complexity: &'static str,
    /// The service guarantee, in words.
    pub guarantee: &'static str,
    /// Paper or reference the implementation follows.
    pub source: &'static str,
    /// Source file, relative to the crate (`src/algorithms/drr.rs`): the algorithm's own
    /// `file!()`, through [`source_file`].
    pub file: &'static str,
    /// Kind of service.
    pub class: ServiceClass,
    /// Parameters and defaults.
    pub params: &'static [ParamInfo],
}

impl AlgorithmInfo {
    /// Whether `name` is this algorithm's name or one of its aliases.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    }
}

/// `path`, a `file!()` of this crate, relative to the crate's directory, as
/// [`AlgorithmInfo::file`] shows it: `src/algorithms/drr.rs`. `file!()` is relative to the
/// workspace in a workspace build (`crates/sched/src/algorithms/drr.rs`) and longer in a
/// build as a dependency; the part from the last `src` directory on is the same in all.
/// A path without one is returned as it is.
pub const fn source_file(path: &'static str) -> &'static str {
    let b = path.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i + 4 <= b.len() {
        let sep = b[i + 3] == b'/' || b[i + 3] == b'\\';
        let at_dir = i == 0 || b[i - 1] == b'/' || b[i - 1] == b'\\';
        if at_dir && sep && b[i] == b's' && b[i + 1] == b'r' && b[i + 2] == b'c' {
            start = i;
        }
        i += 1;
    }
    match std::str::from_utf8(b.split_at(start).1) {
        Ok(rest) => rest,
        // Unreachable: `start` is at an ASCII byte, so the rest is UTF-8 if `path` is.
        Err(_) => path,
    }
}

/// Algorithm parameters as `key=value` pairs, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(Vec<(String, String)>);

impl Params {
    /// No parameters: every algorithm's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `key=value`.
    pub fn set(mut self, key: &str, value: impl fmt::Display) -> Self {
        self.0.push((key.to_owned(), value.to_string()));
        self
    }

    /// The pairs.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// The last value given for `key`, parsed, or `None` when absent. Errors name the
    /// algorithm, the key and the value.
    pub fn get<T>(&self, info: &AlgorithmInfo, key: &str) -> Result<Option<T>, ConfigError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        match self.0.iter().rev().find(|(k, _)| k == key) {
            None => Ok(None),
            Some((_, v)) => v
                .parse()
                .map(Some)
                .map_err(|e: T::Err| ConfigError::BadParam {
                    alg: info.name,
                    key: key.to_owned(),
                    value: v.clone(),
                    reason: e.to_string(),
                }),
        }
    }

    /// Checks that every key is a parameter of `info`.
    pub fn check_known(&self, info: &AlgorithmInfo) -> Result<(), ConfigError> {
        for (k, _) in &self.0 {
            if !info.params.iter().any(|p| p.name == k) {
                let known = info.params.iter().map(|p| p.name).collect::<Vec<_>>();
                return Err(ConfigError::UnknownParam {
                    alg: info.name,
                    key: k.clone(),
                    known: if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    },
                });
            }
        }
        Ok(())
    }

    /// A range-checked value with a default, for [`Policy::from_params`].
    pub fn get_in<T>(
        &self,
        info: &AlgorithmInfo,
        key: &str,
        default: T,
        range: std::ops::RangeInclusive<T>,
    ) -> Result<T, ConfigError>
    where
        T: FromStr + PartialOrd + fmt::Display + Copy,
        T::Err: fmt::Display,
    {
        let v = self.get(info, key)?.unwrap_or(default);
        if range.contains(&v) {
            Ok(v)
        } else {
            Err(ConfigError::BadParam {
                alg: info.name,
                key: key.to_owned(),
                value: v.to_string(),
                reason: format!("must be {}..={}", range.start(), range.end()),
            })
        }
    }
}

impl FromStr for Params {
    type Err = String;

    /// Parses `key=value[,key=value...]`; the empty string is no parameters.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut p = Params::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("'{item}' is not key=value"))?;
            if k.trim().is_empty() {
                return Err(format!("'{item}' has an empty key"));
            }
            p = p.set(k.trim(), v.trim());
        }
        Ok(p)
    }
}

/// A registered algorithm: its description and how to build its scheduler.
pub trait Algorithm {
    /// Name, complexity, source and parameters.
    const INFO: AlgorithmInfo;
    /// The scheduler, for packets `P`.
    type Sched<P: Packet + 'static>: Scheduler<P> + 'static;
    /// Builds the scheduler from named parameters (already checked against
    /// [`AlgorithmInfo::params`]) with room for `capacity` packets.
    fn build<P: Packet + 'static>(
        params: &Params,
        capacity: u32,
    ) -> Result<Self::Sched<P>, ConfigError>;

    /// Hands the algorithm's [`Policy`] (built from `params`) to `visitor`, if it is a
    /// policy over the crate's flow table (FIFO and priority keep their own queues).
    fn visit_policy<V: PolicyVisitor>(
        _params: &Params,
        _visitor: V,
    ) -> Result<Option<V::Output>, ConfigError> {
        Ok(None)
    }
}

/// Code run once per algorithm with the concrete [`Policy`] type: what builds the leaves
/// of a tree that share one flow table ([`crate::tree::leaves`]).
pub trait PolicyVisitor {
    /// What the visit returns.
    type Output;
    /// Called with a policy built from the parameters.
    fn visit<A: Policy + Send>(self, policy: A) -> Self::Output;
}

impl<A: Policy + Send> Algorithm for A {
    const INFO: AlgorithmInfo = A::INFO;
    type Sched<P: Packet + 'static> = Sched<A, P>;

    fn build<P: Packet + 'static>(
        params: &Params,
        capacity: u32,
    ) -> Result<Sched<A, P>, ConfigError> {
        Sched::new(A::from_params(params)?, capacity)
    }

    fn visit_policy<V: PolicyVisitor>(
        params: &Params,
        visitor: V,
    ) -> Result<Option<V::Output>, ConfigError> {
        Ok(Some(visitor.visit(A::from_params(params)?)))
    }
}

/// Code run once per algorithm with the concrete scheduler type, so that its loops are
/// monomorphised.
///
/// The scheduler is `Send`: a caller may build it on one thread and run it on another, or
/// keep it in a `Mutex` shared by several threads (the engine's lock-based baseline). The
/// bound is checked for every registered algorithm where [`visit`] hands its concrete type
/// over, so an algorithm whose state is not `Send` (an `Rc`, a `Cell`) fails to register.
pub trait SchedulerVisitor<P: Packet + 'static> {
    /// What the visit returns.
    type Output;
    /// Called with the scheduler built by [`visit`].
    fn visit<S: Scheduler<P> + Send + 'static>(self, sched: S) -> Self::Output;
}

macro_rules! registry {
    ($($alg:ty),* $(,)?) => {
        /// Every registered algorithm, in the order of the list.
        pub fn algorithms() -> &'static [AlgorithmInfo] {
            const ALL: &[AlgorithmInfo] = &[$(<$alg as Algorithm>::INFO),*];
            ALL
        }

        /// Builds the scheduler named `name` with `params` and room for `capacity` packets,
        /// and hands it to `visitor`.
        pub fn visit<P: Packet + Send + 'static, V: SchedulerVisitor<P>>(
            name: &str,
            params: &Params,
            capacity: u32,
            visitor: V,
        ) -> Result<V::Output, ConfigError> {
            let info = lookup(name)?;
            params.check_known(info)?;
            $(
                if info.name == <$alg as Algorithm>::INFO.name {
                    let sched = <$alg as Algorithm>::build::<P>(params, capacity)?;
                    return Ok(visitor.visit(sched));
                }
            )*
            unreachable!("lookup returned a registered algorithm")
        }

        /// Builds the policy of the algorithm named `name` with `params` and hands it to
        /// `visitor`; `None` if the algorithm is not a [`Policy`].
        pub fn visit_policy<V: PolicyVisitor>(
            name: &str,
            params: &Params,
            visitor: V,
        ) -> Result<Option<V::Output>, ConfigError> {
            let info = lookup(name)?;
            params.check_known(info)?;
            $(
                if info.name == <$alg as Algorithm>::INFO.name {
                    return <$alg as Algorithm>::visit_policy(params, visitor);
                }
            )*
            unreachable!("lookup returned a registered algorithm")
        }
    };
}

// The list. A new algorithm is one file in `algorithms/` and one entry here.
registry!(
    FifoAlgorithm,
    PrioAlgorithm,
    Drr,
    DrrSfo,
    Wf2qPlus,
    Stfq,
    Scfq,
    Qfq,
    Kps,
    QfqPlus,
    Wf2qPlusPlus,
    Scrr,
    ScrrBasic,
    ScrrNpm,
    ScrrNmia,
    ScrrNmne,
    ScrrNeia,
);

/// The algorithm called `name` (canonical name or alias, any case).
pub fn lookup(name: &str) -> Result<&'static AlgorithmInfo, ConfigError> {
    algorithms()
        .iter()
        .find(|a| a.answers_to(name))
        .ok_or_else(|| ConfigError::UnknownAlgorithm {
            name: name.to_owned(),
            known: algorithms()
                .iter()
                .map(|a| a.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

struct Boxer;

impl<P: Packet + 'static> SchedulerVisitor<P> for Boxer {
    type Output = Box<dyn Scheduler<P>>;
    fn visit<S: Scheduler<P> + Send + 'static>(self, sched: S) -> Self::Output {
        Box::new(sched)
    }
}

/// Builds the scheduler named `name` behind a trait object.
pub fn build<P: Packet + Send + 'static>(
    name: &str,
    params: &Params,
    capacity: u32,
) -> Result<Box<dyn Scheduler<P>>, ConfigError> {
    visit(name, params, capacity, Boxer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Desc;

    #[test]
    fn names_and_aliases_are_unique() {
        let mut names: Vec<String> = Vec::new();
        for a in algorithms() {
            names.push(a.name.to_ascii_lowercase());
            names.extend(a.aliases.iter().map(|s| s.to_ascii_lowercase()));
        }
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "a name or alias is registered twice");
    }

    #[test]
    fn source_files_are_the_algorithms_own() {
        assert_eq!(
            source_file("crates/sched/src/algorithms/drr.rs"),
            "src/algorithms/drr.rs"
        );
        assert_eq!(
            source_file(
                "/home/u/.cargo/registry/src/index/pspat-sched-0.1.0/src/algorithms/qfq.rs"
            ),
            "src/algorithms/qfq.rs"
        );
        assert_eq!(source_file("src/lib.rs"), "src/lib.rs");
        assert_eq!(source_file("lib.rs"), "lib.rs");
        assert_eq!(source_file("a/mysrc/b.rs"), "a/mysrc/b.rs");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for a in algorithms() {
            assert!(
                a.file.starts_with("src/algorithms/"),
                "{}: {}",
                a.name,
                a.file
            );
            assert!(dir.join(a.file).is_file(), "{}: {}", a.name, a.file);
        }
    }

    #[test]
    fn lookup_accepts_aliases_and_names_unknowns() {
        assert_eq!(lookup("WF2QP").unwrap().name, "wf2q+");
        assert_eq!(lookup("rr").unwrap().name, "drr");
        let e = lookup("nosuch").unwrap_err().to_string();
        assert!(e.contains("'nosuch'") && e.contains("fifo"), "{e}");
    }

    #[test]
    fn every_algorithm_builds_with_defaults() {
        for a in algorithms() {
            let s = build::<Desc>(a.name, &Params::new(), 16).unwrap();
            assert_eq!(s.info().name, a.name);
            for p in a.params {
                // every documented default parses
                let params = Params::new().set(p.name, p.default);
                build::<Desc>(a.name, &params, 16).unwrap();
            }
        }
    }

    #[test]
    fn bad_parameters_name_key_and_value() {
        let e = build::<Desc>("drr", &"quantum=abc".parse().unwrap(), 16)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("'abc'") && e.contains("quantum"), "{e}");
        let e = build::<Desc>("drr", &"bogus=1".parse().unwrap(), 16)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("'bogus'") && e.contains("quantum"), "{e}");
        let e = build::<Desc>("fifo", &Params::new(), 0)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("capacity 0"), "{e}");
        assert!("quantum".parse::<Params>().is_err());
    }
}
