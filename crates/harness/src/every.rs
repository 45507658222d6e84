//! `pspat bench table`: every registered algorithm, and the `none` baseline, through the
//! scheduler loop ([`crate::run`]) on one flowset, for a side-by-side table of cost per
//! packet and fairness. Each run is checked ([`BenchReport::check`]): a table never shows
//! the figures of a scheduler that lost, misrouted or reordered a packet.

use pspat_sched::registry::algorithms;
use serde::Serialize;

use crate::{BenchReport, BenchSpec, Error, Num, Pattern};

/// The flowset every algorithm runs: 512 flows of weight 1 and 64 of weight 8.
pub const FLOWSETS: &str = "1::512,8::64";
/// Drain down to 4 packets per flow.
pub const QMIN: Num = Num::PerFlow(4);
/// Fill up to 30 packets per flow.
pub const QMAX: Num = Num::PerFlow(30);

/// Every algorithm's report, with the workload they ran.
#[derive(Clone, Debug, Serialize)]
pub struct EveryReport {
    /// [`FLOWSETS`].
    pub flowsets: &'static str,
    /// [`QMIN`], as written (`4n`).
    pub qmin: String,
    /// [`QMAX`], as written (`30n`).
    pub qmax: String,
    /// The arrival pattern (smooth).
    pub pattern: &'static str,
    /// Loop iterations per algorithm.
    pub loops: u64,
    /// `none` first, then the registry's algorithms in its order.
    pub results: Vec<BenchReport>,
}

/// A run of [`every`] that failed, and on which algorithm.
#[derive(Debug, thiserror::Error)]
#[error("benchmarking '{alg}'")]
pub struct EveryError {
    /// The algorithm.
    pub alg: String,
    /// What went wrong.
    #[source]
    pub source: Error,
}

/// Runs `none` and every registered algorithm for `loops` iterations each.
pub fn every(loops: u64) -> Result<EveryReport, EveryError> {
    let names = std::iter::once("none").chain(algorithms().iter().map(|i| i.name));
    let mut results = Vec::new();
    for name in names {
        let spec = BenchSpec {
            alg: name.to_owned(),
            loops,
            qmin: QMIN,
            qmax: QMAX,
            flowsets: Some(FLOWSETS.to_owned()),
            ..BenchSpec::default()
        };
        let fail = |source: Error| EveryError {
            alg: name.to_owned(),
            source,
        };
        let r = crate::run::run(&spec).map_err(fail)?;
        r.check().map_err(|e| fail(e.into()))?;
        results.push(r);
    }
    Ok(EveryReport {
        flowsets: FLOWSETS,
        qmin: QMIN.to_string(),
        qmax: QMAX.to_string(),
        pattern: Pattern::Smooth.name(),
        loops,
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_runs_once_and_none_first() {
        let r = every(40_000).unwrap();
        assert_eq!(r.results.len(), algorithms().len() + 1);
        assert_eq!(r.results[0].sched, "none");
        for (rep, info) in r.results[1..].iter().zip(algorithms()) {
            assert_eq!(rep.sched, info.name);
            assert!(rep.dequeued > 0, "{}", info.name);
        }
        let j = serde_json::to_string(&r).unwrap();
        let head = r#"{"flowsets":"1::512,8::64","qmin":"4n","qmax":"30n","pattern":"smooth","loops":40000,"results":[{"#;
        assert!(j.starts_with(head), "{j}");
    }
}
