//! One tree of the `tree` set, run by several shapers (pspat, HTB): each class's
//! throughput against the reference allocation of what the senders offered in that run,
//! the first run's leaves against each other run's, and each class's one-second windows
//! and bursts against its ceil. The CSV lines, the table and the verdict lines `pspat
//! experiment tree compare` prints, and its figure.

use std::path::{Path, PathBuf};

use pspat_plot::table;
use pspat_plot::{bar_chart, BarChart, Scale};

use crate::error::{AnalysisError, MeterError};
use crate::gen_report::GenReport;
use crate::meter::{self, ClassMeasure};
use crate::sink_report::SinkReport;
use crate::tree::KitTree;

/// How far apart the first run's leaves and the other runs' may be (the 2%).
pub const LEAF_TOLERANCE: f64 = 0.02;
/// How far above its ceil a class may be over a one-second window (the 1%).
pub const CEIL_TOLERANCE: f64 = 0.01;
/// Trees of more classes get no table, only the CSV and the acceptance lines.
const TABLE_CLASSES: usize = 40;

/// Columns of the tree CSV, one line per run and class.
pub const COLUMNS: [&str; 20] = [
    "tree",
    "mode",
    "class",
    "parent",
    "leaf",
    "rate_bps",
    "ceil_bps",
    "cburst",
    "weight",
    "prio",
    "offered_bps",
    "reference_bps",
    "measured_bps",
    "err_reference",
    "min_window_bps",
    "max_window_bps",
    "ceil_excess",
    "burst_bytes",
    "burst_bound_bytes",
    "window_s",
];

/// One shaper's run of the tree.
#[derive(Clone, Debug)]
pub struct TreeRun {
    /// Who shaped (`pspat`, `htb`).
    pub mode: String,
    /// What the senders offered, bit/s per class (0 for inner classes).
    pub offered_bps: Vec<f64>,
    /// The reference allocation of that, per class.
    pub reference_bps: Vec<f64>,
    /// What each class got.
    pub measures: Vec<ClassMeasure>,
    /// The sink's counting window, seconds.
    pub window_s: f64,
    /// Datagrams per second the sink counted, all senders.
    pub delivered_pps: f64,
}

/// The link a run's reference allocation is computed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capacity {
    /// The tree's link (the link is the bottleneck).
    Link,
    /// What the run delivered in all (the shaper is the bottleneck: what the tree owes
    /// each class of what got through).
    Delivered,
}

impl TreeRun {
    /// The run of `mode` from its generator's and sink's reports, its reference computed
    /// on `capacity`.
    pub fn new(
        tree: &KitTree,
        mode: &str,
        gen: &GenReport,
        sink: &SinkReport,
        capacity: Capacity,
    ) -> Result<Self, MeterError> {
        let per_port = meter::offered_bps(tree, gen)?;
        let offered_bps = leaf_offered(tree, &per_port);
        let measures = meter::measure(tree, gen, sink)?;
        let link = match capacity {
            Capacity::Link => tree.link_bps as f64,
            Capacity::Delivered => (0..tree.classes.len())
                .filter(|&k| tree.classes[k].parent.is_none())
                .map(|k| measures[k].bps)
                .sum(),
        };
        Ok(TreeRun {
            mode: mode.to_owned(),
            reference_bps: tree.reference_on(link, &per_port),
            offered_bps,
            measures,
            window_s: sink.window_s,
            delivered_pps: sink.total_pps,
        })
    }

    /// Class `k`'s throughput against its reference: `measured / reference - 1` (NaN
    /// for a reference of 0).
    pub fn err_reference(&self, k: usize) -> f64 {
        rel(self.measures[k].bps, self.reference_bps[k])
    }

    /// Class `k`'s largest one-second window against the ceil that applies to it:
    /// `window / ceil - 1` (NaN without windows).
    pub fn ceil_excess(&self, tree: &KitTree, k: usize) -> f64 {
        let max = self.measures[k]
            .windows_bps
            .iter()
            .copied()
            .reduce(f64::max)
            .unwrap_or(f64::NAN);
        rel(max, tree.classes[k].ceil_bps as f64)
    }

    /// What class `k`'s bursts above its ceil may be: its cburst and a packet.
    pub fn burst_bound(&self, tree: &KitTree, k: usize) -> f64 {
        (tree.classes[k].cburst + u64::from(self.measures[k].max_len)) as f64
    }
}

/// `a / b - 1`, NaN when `b` is 0.
fn rel(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b - 1.0
    } else {
        f64::NAN
    }
}

/// `v` with fixed decimals, or empty for NaN.
fn cell(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        String::new()
    }
}

/// The CSV lines of `run` of tree `name` (no newlines), in the order of [`COLUMNS`].
pub fn csv_lines(name: &str, tree: &KitTree, run: &TreeRun) -> Vec<String> {
    tree.classes
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let m = &run.measures[k];
            let windows = |f: fn(f64, f64) -> f64| {
                m.windows_bps.iter().copied().reduce(f).unwrap_or(f64::NAN)
            };
            [
                name.to_owned(),
                run.mode.clone(),
                c.name.replace(' ', "-"),
                c.parent
                    .map_or(String::new(), |p| tree.classes[p].name.replace(' ', "-")),
                c.leaf.to_string(),
                c.rate_bps.to_string(),
                c.ceil_bps.to_string(),
                c.cburst.to_string(),
                c.weight.to_string(),
                c.prio.to_string(),
                cell(run.offered_bps[k], 0),
                cell(run.reference_bps[k], 0),
                cell(m.bps, 0),
                cell(run.err_reference(k), 5),
                cell(windows(f64::min), 0),
                cell(windows(f64::max), 0),
                cell(run.ceil_excess(tree, k), 5),
                cell(m.burst_bytes, 0),
                cell(run.burst_bound(tree, k), 0),
                format!("{:.3}", run.window_s),
            ]
            .join(",")
        })
        .collect()
}

/// Appends every run's lines to the tree CSV at `path` (created, with its header line, if
/// missing or empty).
pub fn append_csv(
    path: &Path,
    name: &str,
    tree: &KitTree,
    runs: &[TreeRun],
) -> Result<(), AnalysisError> {
    let lines: Vec<String> = runs.iter().flat_map(|r| csv_lines(name, tree, r)).collect();
    crate::csv::append(path, &COLUMNS, &lines)
}

/// Mbit/s with two decimals.
fn mbit(bps: f64) -> String {
    cell(bps / 1e6, 2)
}

/// A signed percentage with two decimals.
fn pct(frac: f64) -> String {
    if frac.is_finite() {
        format!("{:+.2}", frac * 100.0)
    } else {
        "-".into()
    }
}

/// What each class of `tree` was offered (bit/s; the sum of its ports' `per_port`, 0 for
/// an inner class).
fn leaf_offered(tree: &KitTree, per_port: &[f64]) -> Vec<f64> {
    let mut offered = vec![0.0; tree.classes.len()];
    for (&(_, leaf), bps) in tree.ports.iter().zip(per_port) {
        offered[leaf] += bps;
    }
    offered
}

/// The table of `tree`'s settings, what each leaf was offered in the run `gen` reports,
/// and the reference allocation of that on the tree's link.
pub fn reference_table(tree: &KitTree, gen: &GenReport) -> Result<String, MeterError> {
    let per_port = meter::offered_bps(tree, gen)?;
    let got = tree.reference(&per_port);
    let offered = leaf_offered(tree, &per_port);
    let rows: Vec<Vec<String>> = (0..tree.classes.len())
        .map(|k| settings_row(tree, k, offered[k], got[k]))
        .collect();
    Ok(table::render(&SETTINGS, &rows, &[2, 3, 4, 5, 6, 7]))
}

/// The headers of [`settings_row`].
pub const SETTINGS: [&str; 8] = [
    "class",
    "parent",
    "rate",
    "ceil",
    "w",
    "prio",
    "offered",
    "reference",
];

/// Class `k`'s settings (Mbit/s), what it was offered (a leaf) and its reference
/// allocation: the first columns of the tree's tables.
pub fn settings_row(tree: &KitTree, k: usize, offered_bps: f64, reference_bps: f64) -> Vec<String> {
    let c = &tree.classes[k];
    vec![
        c.name.clone(),
        c.parent
            .map_or("link".into(), |p| tree.classes[p].name.clone()),
        mbit(c.rate_bps as f64),
        mbit(c.ceil_bps as f64),
        c.weight.to_string(),
        c.prio.to_string(),
        if c.leaf {
            mbit(offered_bps)
        } else {
            String::new()
        },
        mbit(reference_bps),
    ]
}

/// The table of tree `name`: per class, its settings, what it was offered and owed (the
/// first run's reference), and per run what it got, against the reference, its largest
/// one-second window against its ceil and its largest burst against its bound; then the
/// first run against the second, where there are two.
pub fn table(name: &str, tree: &KitTree, runs: &[TreeRun]) -> String {
    let Some(first) = runs.first() else {
        return format!("tree {name}: no runs\n");
    };
    if tree.classes.len() > TABLE_CLASSES {
        return format!(
            "tree {name} (link {} Mbit/s): {} classes, too many for a table (see the CSV)\n",
            mbit(tree.link_bps as f64),
            tree.classes.len()
        );
    }
    let mut headers: Vec<String> = SETTINGS.map(String::from).to_vec();
    for r in runs {
        let m = &r.mode;
        headers.extend([
            m.clone(),
            format!("{m} vs ref %"),
            format!("{m} 1s max/ceil %"),
            format!("{m} burst/bound"),
        ]);
    }
    if let [a, b, ..] = runs {
        headers.push(format!("{} vs {} %", a.mode, b.mode));
    }
    let rows: Vec<Vec<String>> = tree
        .classes
        .iter()
        .enumerate()
        .map(|(k, _)| {
            let mut row = settings_row(tree, k, first.offered_bps[k], first.reference_bps[k]);
            for r in runs {
                let m = &r.measures[k];
                row.extend([
                    mbit(m.bps),
                    pct(r.err_reference(k)),
                    pct(r.ceil_excess(tree, k)),
                    format!("{:.0}/{:.0}", m.burst_bytes, r.burst_bound(tree, k)),
                ]);
            }
            if let [a, b, ..] = runs {
                row.push(pct(rel(a.measures[k].bps, b.measures[k].bps)));
            }
            row
        })
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let right: Vec<usize> = (2..headers.len()).collect();
    format!(
        "tree {name} (link {} Mbit/s; rates in Mbit/s):\n{}",
        mbit(tree.link_bps as f64),
        table::render(&headers, &rows, &right)
    )
}

/// The largest of `f` over `items` by absolute value, with the item: `(value, index)`;
/// NaN values are left out.
fn largest(items: impl Iterator<Item = (usize, f64)>) -> Option<(f64, usize)> {
    items
        .filter(|(_, v)| v.is_finite())
        .map(|(k, v)| (v, k))
        .reduce(|a, b| if b.0.abs() > a.0.abs() { b } else { a })
}

/// The acceptance lines of tree `name`: the leaves of the first run against the second's
/// (within [`LEAF_TOLERANCE`]); per run, the leaves against the reference, the largest
/// one-second window above a ceil (within [`CEIL_TOLERANCE`]) and the largest burst
/// against its bound. Each line ends in `ok` or `OFF`.
pub fn verdicts(name: &str, tree: &KitTree, runs: &[TreeRun]) -> Vec<String> {
    let leaves = || (0..tree.classes.len()).filter(|&k| tree.classes[k].leaf);
    let class = |k: usize| tree.classes[k].name.clone();
    let ok = |good: bool| if good { "ok" } else { "OFF" };
    let mut out = Vec::new();
    for r in runs {
        out.push(format!(
            "{name}: {} delivered {:.1} kpps ({:.2} Mbit/s in its leaves)",
            r.mode,
            r.delivered_pps / 1e3,
            leaves().map(|k| r.measures[k].bps).sum::<f64>() / 1e6
        ));
    }
    if let [a, b, ..] = runs {
        out.push(format!(
            "{name}: {} against {}, packets per second {:.3}",
            a.mode,
            b.mode,
            a.delivered_pps / b.delivered_pps
        ));
        if let Some((v, k)) =
            largest(leaves().map(|k| (k, rel(a.measures[k].bps, b.measures[k].bps))))
        {
            out.push(format!(
                "{name}: {} against {}, largest leaf difference {}% ({}), within {}%: {}",
                a.mode,
                b.mode,
                pct(v),
                class(k),
                LEAF_TOLERANCE * 100.0,
                ok(v.abs() <= LEAF_TOLERANCE)
            ));
        }
    }
    for r in runs {
        if let Some((v, k)) = largest(leaves().map(|k| (k, r.err_reference(k)))) {
            out.push(format!(
                "{name}: {} against the reference, largest leaf difference {}% ({}), \
                 within {}%: {}",
                r.mode,
                pct(v),
                class(k),
                LEAF_TOLERANCE * 100.0,
                ok(v.abs() <= LEAF_TOLERANCE)
            ));
        }
        let excess = (0..tree.classes.len())
            .map(|k| (k, r.ceil_excess(tree, k)))
            .filter(|(_, v)| v.is_finite())
            .reduce(|a, b| if b.1 > a.1 { b } else { a });
        if let Some((k, v)) = excess {
            out.push(format!(
                "{name}: {} one-second windows, largest against its ceil {}% ({}), at most \
                 +{}%: {}",
                r.mode,
                pct(v),
                class(k),
                CEIL_TOLERANCE * 100.0,
                ok(v <= CEIL_TOLERANCE)
            ));
        }
        let bursts = (0..tree.classes.len())
            .map(|k| (k, r.measures[k].burst_bytes / r.burst_bound(tree, k)))
            .filter(|(_, v)| v.is_finite())
            .reduce(|a, b| if b.1 > a.1 { b } else { a });
        if let Some((k, v)) = bursts {
            out.push(format!(
                "{name}: {} bursts above the ceil, largest against cburst + a packet {:.2} \
                 ({}: {:.0} of {:.0} bytes): {}",
                r.mode,
                v,
                class(k),
                r.measures[k].burst_bytes,
                r.burst_bound(tree, k),
                ok(v <= 1.0)
            ));
        }
    }
    out
}

/// Draws tree `name`'s leaves into an SVG at `path`: per leaf, the first run's reference
/// and each run's throughput, Mbit/s.
pub fn figure(
    path: &Path,
    name: &str,
    tree: &KitTree,
    runs: &[TreeRun],
) -> Result<PathBuf, AnalysisError> {
    let leaves: Vec<usize> = (0..tree.classes.len())
        .filter(|&k| tree.classes[k].leaf)
        .collect();
    let categories: Vec<String> = leaves
        .iter()
        .map(|&k| tree.classes[k].name.clone())
        .collect();
    let mut series = Vec::new();
    if let Some(first) = runs.first() {
        series.push((
            "reference".to_owned(),
            leaves
                .iter()
                .map(|&k| first.reference_bps[k] / 1e6)
                .collect(),
        ));
    }
    for r in runs {
        series.push((
            r.mode.clone(),
            leaves.iter().map(|&k| r.measures[k].bps / 1e6).collect(),
        ));
    }
    let title = format!("tree {name}: throughput per leaf");
    let chart = BarChart {
        title: &title,
        y_label: "Mbit/s",
        y_scale: Scale::Linear,
    };
    bar_chart(path, &chart, &categories, &series)?;
    Ok(path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::two_level;

    /// A run of the two-level tree in which every leaf got `got` (bit/s per class, leaves
    /// at 2..6) with its one-second windows at `windows` times that.
    fn run(tree: &KitTree, mode: &str, got: [f64; 6], window: f64) -> TreeRun {
        let offered = [50e6, 50e6, 50e6, 3e6, 2e6];
        let mut offered_bps = vec![0.0; 6];
        for (&(_, leaf), o) in tree.ports.iter().zip(offered) {
            offered_bps[leaf] += o;
        }
        TreeRun {
            mode: mode.into(),
            offered_bps,
            reference_bps: tree.reference(&offered),
            measures: got
                .iter()
                .map(|&bps| ClassMeasure {
                    bps,
                    windows_bps: vec![bps, bps * window],
                    burst_bytes: 3000.0,
                    max_len: 1000,
                })
                .collect(),
            window_s: 2.0,
            delivered_pps: 6000.0,
        }
    }

    #[test]
    fn runs_are_set_against_the_reference_each_other_and_the_ceils() {
        let t = two_level();
        // reference: [20, 18, 15, 5, 13, 5] Mbit/s
        let p = run(&t, "pspat", [20e6, 18e6, 15e6, 5e6, 13e6, 5e6], 1.0);
        let h = run(&t, "htb", [20e6, 18e6, 15.45e6, 4.55e6, 13e6, 5e6], 1.02);
        let v = verdicts("two", &t, &[p.clone(), h.clone()]);
        assert_eq!(
            v[0],
            "two: pspat delivered 6.0 kpps (38.00 Mbit/s in its leaves)"
        );
        assert_eq!(v[2], "two: pspat against htb, packets per second 1.000");
        assert_eq!(
            v[3],
            "two: pspat against htb, largest leaf difference +9.89% (sched 12), within 2%: OFF"
        );
        assert_eq!(
            v[4],
            "two: pspat against the reference, largest leaf difference +0.00% (sched 11), \
             within 2%: ok"
        );
        assert!(
            v[5].ends_with("+0.00% (sched 10), at most +1%: ok"),
            "{}",
            v[5]
        );
        // 3000 bytes against sched 10's cburst 3000 and a packet.
        assert!(
            v[6].ends_with("0.75 (sched 10: 3000 of 4000 bytes): ok"),
            "{}",
            v[6]
        );
        assert!(
            v[7].contains("-9.00% (sched 12)") && v[7].ends_with("OFF"),
            "{}",
            v[7]
        );
        // A and sched 21 run at their ceils: 2% above over the second window.
        assert!(
            v[8].contains("+2.00% (sched 10)") && v[8].ends_with("OFF"),
            "{}",
            v[8]
        );

        let lines = csv_lines("two", &t, &h);
        assert_eq!(lines.len(), 6);
        assert_eq!(
            lines[3],
            "two,htb,sched-12,sched-10,true,5000000,20000000,3000,3,1,50000000,5000000,\
             4550000,-0.09000,4550000,4641000,-0.76795,3000,4000,2.000"
        );
        let tab = table("two", &t, &[p, h]);
        assert!(tab.starts_with("tree two (link 50.00 Mbit/s; rates in Mbit/s):\n"));
        assert!(tab.contains("pspat vs htb %"), "{tab}");
        assert!(tab.contains("+9.89"), "{tab}");
    }

    #[test]
    fn the_csv_and_the_figure_are_written() {
        let t = two_level();
        let p = run(&t, "pspat", [20e6, 18e6, 15e6, 5e6, 13e6, 5e6], 1.0);
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("trees.csv");
        append_csv(&csv, "two", &t, std::slice::from_ref(&p)).unwrap();
        append_csv(&csv, "two", &t, std::slice::from_ref(&p)).unwrap();
        let text = std::fs::read_to_string(&csv).unwrap();
        assert_eq!(text.lines().count(), 13);
        assert!(text.starts_with(&COLUMNS.join(",")));
        let svg = figure(&dir.path().join("two.svg"), "two", &t, &[p]).unwrap();
        let s = std::fs::read_to_string(svg).unwrap();
        assert!(s.contains("sched 21") && s.contains("reference"), "{s}");
    }
}
