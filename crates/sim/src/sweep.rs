//! Sweeps: one metric over algorithms x values of one scenario field, as a table, a CSV
//! and a plot. The papers' reproductions (`scenarios/*.toml`) are sweeps.
//!
//! ```toml
//! title = "Request-response latency against burst length"
//! kind = "sim"                        # or "bench-wfi": the harness's fill/drain runs
//! algs = ["drr@quantum=1500", "scrr"]
//! set = "flows.1.arrival.burst.n"     # dotted path in [scenario] (or [bench]); numbers index arrays
//! values = [1, 2, 4, 8]
//! labels = ["1", "2", "4", "8"]       # optional: category names (default: the values)
//! metric = "group:rr:bursts.mean"     # sim: group:NAME:field.field, or a top-level field
//!                                     # bench-wfi: class:INDEX:field
//! scale = 1e-3                        # multiply the metric (ns -> us)
//! x_label = "burst length (packets)"
//! y_label = "mean response time (us)"
//! chart = "line"                      # or "bars"
//! log_x = true
//! log_y = true
//! plot = "docs/img/scrr-fig2.svg"
//!
//! [scenario]                          # a sim scenario (kind = "sim"), alg set per run
//! ...
//! [bench]                             # kind = "bench-wfi": the fields of `pspat bench wfi`
//! flowsets = "333:1700:1,1:1700:999"
//! packets = 200000
//! ```
//!
//! `kind = "bench-wfi"` runs [`pspat_harness::guarantee::run`]: the flowsets, the clock-less
//! controller's fill/drain phases and the QFQ+ paper's "switch to enqueue with probability
//! 0.5 when a flow empties", on the same virtual link and GPS reference as the simulator.

use std::path::Path;

use pspat_harness::guarantee::{self, WfiSpec};
use pspat_harness::{BenchSpec, Num, Pattern};
use pspat_sched::reference::wfi::{
    drr_t_wfi_bound, qfq_plus_t_wfi_bound, qfq_t_wfi_bound, BoundInputs,
};
use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::metrics::Series;
use crate::scenario::{parse_alg, Scenario};
use pspat_plot::{bar_chart, line_chart, BarChart, LineChart, Scale};

/// A sweep as written in its TOML file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Title of the plot.
    pub title: String,
    /// `sim` or `bench-wfi`.
    #[serde(default = "default_kind")]
    pub kind: String,
    /// Algorithms, `name@k=v,...`.
    pub algs: Vec<String>,
    /// Field to vary (dotted path in the base table); none: one run per algorithm.
    #[serde(default)]
    pub set: Option<String>,
    /// Values of the field.
    #[serde(default)]
    pub values: Vec<toml::Value>,
    /// Category names of the values.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Metric to collect.
    pub metric: String,
    /// Factor applied to the metric.
    #[serde(default = "one")]
    pub scale: f64,
    /// X axis label.
    #[serde(default)]
    pub x_label: String,
    /// Y axis label.
    #[serde(default)]
    pub y_label: String,
    /// `line` or `bars`.
    #[serde(default = "default_chart")]
    pub chart: String,
    /// Logarithmic x axis (line charts).
    #[serde(default)]
    pub log_x: bool,
    /// Logarithmic y axis.
    #[serde(default)]
    pub log_y: bool,
    /// Where to write the plot (relative to the current directory).
    #[serde(default)]
    pub plot: Option<String>,
    /// Base sim scenario (`kind = "sim"`).
    #[serde(default)]
    pub scenario: Option<toml::Table>,
    /// Base `bench wfi` run (`kind = "bench-wfi"`).
    #[serde(default)]
    pub bench: Option<toml::Table>,
}

fn default_kind() -> String {
    "sim".into()
}
fn default_chart() -> String {
    "line".into()
}
fn one() -> f64 {
    1.0
}

/// One cell of a sweep.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Cell {
    /// Algorithm as given.
    pub alg: String,
    /// Category (value label).
    pub label: String,
    /// The value, as a number when it is one.
    pub x: f64,
    /// The metric, scaled.
    pub y: f64,
}

/// The result of a sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    /// Title.
    pub title: String,
    /// Metric.
    pub metric: String,
    /// Cells, by algorithm then value.
    pub cells: Vec<Cell>,
    /// Full report of every run (JSON values).
    pub runs: Vec<serde_json::Value>,
    /// Wall time, seconds.
    pub wall_s: f64,
}

impl SweepReport {
    /// A markdown table: one row per value, one column per algorithm.
    pub fn markdown(&self) -> String {
        let mut algs: Vec<&str> = Vec::new();
        let mut labels: Vec<&str> = Vec::new();
        for c in &self.cells {
            if !algs.contains(&c.alg.as_str()) {
                algs.push(&c.alg);
            }
            if !labels.contains(&c.label.as_str()) {
                labels.push(&c.label);
            }
        }
        let mut s = format!("| {} | {} |\n", "value", algs.join(" | "));
        s.push_str(&format!("|---|{}\n", "---|".repeat(algs.len())));
        for l in &labels {
            s.push_str(&format!("| {l} |"));
            for a in &algs {
                let v = self
                    .cells
                    .iter()
                    .find(|c| c.alg == *a && c.label == *l)
                    .map_or("-".to_owned(), |c| format!("{:.3}", c.y));
                s.push_str(&format!(" {v} |"));
            }
            s.push('\n');
        }
        s
    }

    /// The cells as CSV.
    pub fn csv(&self) -> String {
        let mut s = String::from("alg,label,x,y\n");
        for c in &self.cells {
            s.push_str(&format!("{},{},{},{}\n", c.alg, c.label, c.x, c.y));
        }
        s
    }
}

fn bad(m: String) -> SimError {
    SimError::Scenario(m)
}

/// Sets `path` (dotted; numeric parts index arrays) in `table` to `value`.
pub fn set_path(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), SimError> {
    fn set_in(
        cur: &mut toml::Value,
        parts: &[&str],
        path: &str,
        value: toml::Value,
    ) -> Result<(), SimError> {
        let Some((p, rest)) = parts.split_first() else {
            *cur = value;
            return Ok(());
        };
        let next = match cur {
            toml::Value::Table(t) => {
                if rest.is_empty() {
                    t.insert((*p).to_owned(), value);
                    return Ok(());
                }
                t.get_mut(*p)
                    .ok_or_else(|| bad(format!("set '{path}': no key '{p}'")))?
            }
            toml::Value::Array(a) => {
                let k: usize = p
                    .parse()
                    .map_err(|_| bad(format!("set '{path}': '{p}' is not an index")))?;
                let n = a.len();
                a.get_mut(k)
                    .ok_or_else(|| bad(format!("set '{path}': index {k} of {n}")))?
            }
            _ => return Err(bad(format!("set '{path}': '{p}' is inside a plain value"))),
        };
        set_in(next, rest, path, value)
    }
    let parts: Vec<&str> = path.split('.').collect();
    let mut root = toml::Value::Table(std::mem::take(table));
    let r = set_in(&mut root, &parts, path, value);
    if let toml::Value::Table(t) = root {
        *table = t;
    }
    r
}

/// The index of the class of largest weight of a `bench wfi` report (the first of equals).
pub fn max_weight_class(report: &serde_json::Value) -> Option<usize> {
    let classes = report["classes"].as_array()?;
    let mut best: Option<(usize, u64)> = None;
    for (i, c) in classes.iter().enumerate() {
        let w = c["weight"].as_u64()?;
        if best.map_or(true, |(_, bw)| w > bw) {
            best = Some((i, w));
        }
    }
    best.map(|b| b.0)
}

/// Reads a metric from a run's JSON report: `field.field` at the top level,
/// `group:NAME:field` (sim), `class:INDEX:field` or `maxw:field` (bench-wfi: the class of
/// largest weight).
pub fn metric(report: &serde_json::Value, spec: &str) -> Result<f64, SimError> {
    let (node, field) = match spec.split(':').collect::<Vec<_>>()[..] {
        ["group", name, field] => {
            let g = report["groups"]
                .as_array()
                .and_then(|gs| gs.iter().find(|g| g["name"] == name))
                .ok_or_else(|| bad(format!("metric '{spec}': no group '{name}'")))?;
            (g, field)
        }
        ["class", idx, field] => {
            let i: usize = idx
                .parse()
                .map_err(|_| bad(format!("metric '{spec}': '{idx}' is not an index")))?;
            let c = report["classes"]
                .get(i)
                .ok_or_else(|| bad(format!("metric '{spec}': no class {i}")))?;
            (c, field)
        }
        ["maxw", field] => {
            let i = max_weight_class(report)
                .ok_or_else(|| bad(format!("metric '{spec}': no classes")))?;
            (&report["classes"][i], field)
        }
        [field] => (report, field),
        _ => {
            return Err(bad(format!(
                "metric '{spec}': use group:NAME:field, class:I:field, maxw:field or field"
            )))
        }
    };
    let mut v = node;
    for p in field.split('.') {
        v = v
            .get(p)
            .ok_or_else(|| bad(format!("metric '{spec}': no field '{p}'")))?;
    }
    v.as_f64()
        .ok_or_else(|| bad(format!("metric '{spec}': {v} is not a number")))
}

fn value_x(v: &toml::Value, i: usize) -> f64 {
    v.as_float()
        .or_else(|| v.as_integer().map(|x| x as f64))
        .unwrap_or(i as f64)
}

fn value_label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The `bench wfi` spec of a `[bench]` table.
fn bench_spec(t: &toml::Table, alg: &str) -> Result<WfiSpec, SimError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct B {
        flowsets: String,
        #[serde(default = "smooth")]
        pattern: String,
        #[serde(default = "zero")]
        qmin: String,
        #[serde(default = "thirty")]
        qmax: String,
        #[serde(default)]
        txq: u64,
        packets: u64,
        #[serde(default = "two")]
        fill_rate: f64,
        #[serde(default = "half")]
        switch_on_empty: f64,
        #[serde(default = "one_u")]
        seed: u64,
        #[serde(default = "gig")]
        rate_bps: u64,
    }
    fn smooth() -> String {
        "smooth".into()
    }
    fn zero() -> String {
        "0".into()
    }
    fn thirty() -> String {
        "30n".into()
    }
    fn two() -> f64 {
        2.0
    }
    fn half() -> f64 {
        0.5
    }
    fn one_u() -> u64 {
        1
    }
    fn gig() -> u64 {
        guarantee::DEFAULT_RATE_BPS
    }
    let b: B = toml::Value::Table(t.clone())
        .try_into()
        .map_err(|e: toml::de::Error| bad(format!("[bench]: {e}")))?;
    let (name, params) = parse_alg(alg)?;
    let num = |s: &str, what: &str| -> Result<Num, SimError> {
        s.parse()
            .map_err(|e| bad(format!("[bench] {what} '{s}': {e}")))
    };
    let pattern = match b.pattern.as_str() {
        "smooth" => Pattern::Smooth,
        "bursty" => Pattern::Bursty,
        p => return Err(bad(format!("[bench] pattern '{p}': smooth or bursty"))),
    };
    Ok(WfiSpec {
        bench: BenchSpec {
            alg: name,
            loops: 0,
            qmin: num(&b.qmin, "qmin")?,
            qmax: num(&b.qmax, "qmax")?,
            flowsets: Some(b.flowsets),
            pattern,
            seed: b.seed,
            params,
            ..BenchSpec::default()
        },
        packets: b.packets,
        txq: b.txq,
        rate_bps: b.rate_bps,
        fill_rate: b.fill_rate,
        switch_on_empty: b.switch_on_empty,
    })
}

/// Runs one cell: returns the run's report as JSON.
fn run_one(
    spec: &SweepSpec,
    alg: &str,
    value: Option<&toml::Value>,
) -> Result<serde_json::Value, SimError> {
    match spec.kind.as_str() {
        "sim" => {
            let mut base = spec
                .scenario
                .clone()
                .ok_or_else(|| bad("kind = \"sim\" needs a [scenario] table".into()))?;
            base.insert("alg".into(), toml::Value::String(alg.to_owned()));
            if let (Some(path), Some(v)) = (&spec.set, value) {
                set_path(&mut base, path, v.clone())?;
            }
            let text = toml::to_string(&base).map_err(|e| bad(e.to_string()))?;
            let sc = Scenario::from_toml(&text, "[scenario]")?;
            let r = crate::run(&sc)?;
            serde_json::to_value(&r).map_err(|e| bad(e.to_string()))
        }
        "bench-wfi" => {
            let mut base = spec
                .bench
                .clone()
                .ok_or_else(|| bad("kind = \"bench-wfi\" needs a [bench] table".into()))?;
            if let (Some(path), Some(v)) = (&spec.set, value) {
                set_path(&mut base, path, v.clone())?;
            }
            let ws = bench_spec(&base, alg)?;
            let r = guarantee::run(&ws).map_err(|e| bad(format!("bench wfi ({alg}): {e}")))?;
            serde_json::to_value(&r).map_err(|e| bad(e.to_string()))
        }
        k => Err(bad(format!("kind '{k}': sim or bench-wfi"))),
    }
}

/// Runs a sweep; `on_cell` sees each cell as it completes (progress).
pub fn run_sweep(
    spec: &SweepSpec,
    mut on_cell: impl FnMut(&Cell),
) -> Result<SweepReport, SimError> {
    let t0 = std::time::Instant::now();
    if spec.algs.is_empty() {
        return Err(bad("algs is empty".into()));
    }
    if !spec.labels.is_empty() && spec.labels.len() != spec.values.len() {
        return Err(bad(format!(
            "{} labels for {} values",
            spec.labels.len(),
            spec.values.len()
        )));
    }
    if spec.set.is_some() == spec.values.is_empty() {
        return Err(bad("give both set and values, or neither".into()));
    }
    let values: Vec<Option<&toml::Value>> = if spec.values.is_empty() {
        vec![None]
    } else {
        spec.values.iter().map(Some).collect()
    };
    let mut cells = Vec::new();
    let mut runs = Vec::new();
    for alg in &spec.algs {
        for (i, v) in values.iter().enumerate() {
            let r = run_one(spec, alg, *v)?;
            let y = metric(&r, &spec.metric)? * spec.scale;
            let label = match (spec.labels.get(i), v) {
                (Some(l), _) => l.clone(),
                (None, Some(v)) => value_label(v),
                (None, None) => String::new(),
            };
            let cell = Cell {
                alg: alg.clone(),
                label,
                x: v.map_or(i as f64, |v| value_x(v, i)),
                y,
            };
            on_cell(&cell);
            cells.push(cell);
            runs.push(r);
        }
    }
    Ok(SweepReport {
        title: spec.title.clone(),
        metric: spec.metric.clone(),
        cells,
        runs,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// Draws a sweep's plot at `path` (line: one series per algorithm against the values;
/// bars: categories are the values, one bar per algorithm). `extra` series (bounds) are
/// drawn dashed on line charts.
pub fn plot_sweep(
    spec: &SweepSpec,
    report: &SweepReport,
    path: &Path,
    extra: &[Series],
) -> Result<(), SimError> {
    let mut algs: Vec<&str> = Vec::new();
    for c in &report.cells {
        if !algs.contains(&c.alg.as_str()) {
            algs.push(&c.alg);
        }
    }
    let scale = |log: bool| if log { Scale::Log } else { Scale::Linear };
    if spec.chart == "bars" {
        let mut labels: Vec<String> = Vec::new();
        for c in &report.cells {
            if !labels.contains(&c.label) {
                labels.push(c.label.clone());
            }
        }
        let series: Vec<(String, Vec<f64>)> = algs
            .iter()
            .map(|a| {
                let vals = labels
                    .iter()
                    .map(|l| {
                        report
                            .cells
                            .iter()
                            .find(|c| c.alg == *a && c.label == *l)
                            .map_or(f64::NAN, |c| c.y)
                    })
                    .collect();
                ((*a).to_owned(), vals)
            })
            .collect();
        let chart = BarChart {
            title: &spec.title,
            y_label: &spec.y_label,
            y_scale: scale(spec.log_y),
        };
        return Ok(bar_chart(path, &chart, &labels, &series)?);
    }
    let mut series: Vec<Series> = algs
        .iter()
        .map(|a| {
            let points = report
                .cells
                .iter()
                .filter(|c| c.alg == *a)
                .map(|c| (c.x, c.y))
                .collect();
            Series::new(*a, points)
        })
        .collect();
    series.extend(extra.iter().cloned());
    let chart = LineChart {
        title: &spec.title,
        x_label: &spec.x_label,
        y_label: &spec.y_label,
        x_scale: scale(spec.log_x),
        y_scale: scale(spec.log_y),
        dashed_suffix: Some("bound"),
        markers: true,
        ..LineChart::default()
    };
    Ok(line_chart(path, &chart, &series)?)
}

/// The analytic T-WFI bound, in the class's packet service times, of the algorithm `alg`
/// for class `idx` (`None`: the class of largest weight) of a `bench wfi` report (JSON), when the algorithm has one here: QFQ
/// ([`qfq_t_wfi_bound`]), QFQ+ ([`qfq_plus_t_wfi_bound`] with the flow alone in its
/// aggregate, `M = min(8, txq + 1)` as in the paper's eq. 22) and DRR
/// ([`drr_t_wfi_bound`]); `Q = (txq + 1) L`.
pub fn bench_bound(run: &serde_json::Value, idx: Option<usize>, alg: &str) -> Option<f64> {
    let classes = run["classes"].as_array()?;
    let idx = idx.or_else(|| max_weight_class(run))?;
    let c = classes.get(idx)?;
    let phi = c["phi"].as_f64()?;
    let len = c["len"].as_u64()? as u32;
    let max_len = classes.iter().filter_map(|c| c["len"].as_u64()).max()? as u32;
    let phi_min = classes
        .iter()
        .filter_map(|c| c["phi"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let n: u64 = classes.iter().filter_map(|c| c["flows"].as_u64()).sum();
    let txq = run["txq"].as_u64()?;
    let rate = run["rate_bps"].as_f64()?;
    let b = BoundInputs::with_txq(phi, len, max_len, txq, rate);
    let ns = match parse_alg(alg).ok()?.0.as_str() {
        "qfq" => qfq_t_wfi_bound(&b),
        "qfq+" => qfq_plus_t_wfi_bound(&b, 1, (txq + 1).min(8) as u32),
        "drr" => drr_t_wfi_bound(&b, phi_min, n),
        _ => return None,
    };
    Some(ns / b.service_time_ns())
}

/// Whether a TOML file is a sweep (it lists `algs`) rather than one scenario.
pub fn is_sweep(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("algs"))
}

/// For `bench-wfi` sweeps whose metric is a class's T-WFI in service times: the analytic
/// T-WFI bound ([`bench_bound`]) of each algorithm that has one, per cell, in the same
/// unit, one series per algorithm (labelled `ALG bound`, drawn dashed beside it).
pub fn bounds(report: &SweepReport) -> Vec<Series> {
    let idx = if report.metric == "maxw:t_wfi_service_times" {
        None
    } else {
        match report
            .metric
            .strip_prefix("class:")
            .and_then(|m| m.strip_suffix(":t_wfi_service_times"))
            .and_then(|i| i.parse::<usize>().ok())
        {
            Some(i) => Some(i),
            None => return Vec::new(),
        }
    };
    let mut out: Vec<Series> = Vec::new();
    for (cell, run) in report.cells.iter().zip(&report.runs) {
        let Some(b) = bench_bound(run, idx, &cell.alg) else {
            continue;
        };
        let label = format!("{} bound", cell.alg);
        match out.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((cell.x, b)),
            None => out.push(Series::new(label, vec![(cell.x, b)])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_are_told_from_scenarios() {
        assert!(is_sweep("algs = [\"qfq\"]\n"));
        assert!(!is_sweep("alg = \"qfq\"\n"));
        assert!(!is_sweep("not toml ["));
    }

    #[test]
    fn bounds_follow_the_metric_and_the_algorithms_that_have_one() {
        let run = serde_json::json!({
            "txq": 0, "rate_bps": 1e9,
            "classes": [
                {"phi": 0.25, "weight": 1, "len": 1500, "flows": 1},
                {"phi": 0.75, "weight": 3, "len": 1500, "flows": 1},
            ],
        });
        let report = |metric: &str, algs: &[&str]| SweepReport {
            metric: metric.into(),
            cells: algs
                .iter()
                .enumerate()
                .map(|(i, a)| Cell {
                    alg: (*a).into(),
                    label: String::new(),
                    x: i as f64,
                    y: 0.0,
                })
                .collect(),
            runs: algs.iter().map(|_| run.clone()).collect(),
            title: String::new(),
            wall_s: 0.0,
        };
        let b = bounds(&report(
            "class:0:t_wfi_service_times",
            &["qfq", "drr", "fifo", "qfq"],
        ));
        let labels: Vec<_> = b.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["qfq bound", "drr bound"], "fifo has no bound");
        assert_eq!(b[0].points.len(), 2);
        assert!(b[0].points.iter().all(|p| p.1 > 0.0 && p.1.is_finite()));
        assert_eq!(
            bounds(&report("maxw:t_wfi_service_times", &["qfq"])).len(),
            1
        );
        assert!(bounds(&report("class:0:delay_p99", &["qfq"])).is_empty());
    }

    #[test]
    fn set_path_walks_tables_and_arrays() {
        let mut t: toml::Table =
            toml::from_str("a = 1\n[[flows]]\nname = 'x'\n[[flows]]\nname = 'y'\nb = { n = 1 }")
                .unwrap();
        set_path(&mut t, "flows.1.b.n", toml::Value::Integer(7)).unwrap();
        assert_eq!(t["flows"][1]["b"]["n"].as_integer(), Some(7));
        set_path(&mut t, "a", toml::Value::Integer(2)).unwrap();
        assert_eq!(t["a"].as_integer(), Some(2));
        let e = set_path(&mut t, "flows.5.name", toml::Value::Integer(0)).unwrap_err();
        assert!(e.to_string().contains("index 5 of 2"), "{e}");
        let e = set_path(&mut t, "nope.x", toml::Value::Integer(0)).unwrap_err();
        assert!(e.to_string().contains("no key 'nope'"), "{e}");
    }

    #[test]
    fn metrics_are_found_by_group_and_class() {
        let r = serde_json::json!({
            "packets": 5,
            "groups": [{"name": "a", "bursts": {"mean": 2.5}}],
            "classes": [{"t_wfi_service_times": 1.25}]
        });
        assert_eq!(metric(&r, "packets").unwrap(), 5.0);
        assert_eq!(metric(&r, "group:a:bursts.mean").unwrap(), 2.5);
        assert_eq!(metric(&r, "class:0:t_wfi_service_times").unwrap(), 1.25);
        assert!(metric(&r, "group:b:x")
            .unwrap_err()
            .to_string()
            .contains("no group 'b'"));
    }
}
