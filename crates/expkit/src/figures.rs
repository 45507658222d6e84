//! The kit's figures: one set of four SVGs per experiment set (the `set` column) —
//! delivered pps, max share error, victim p99 latency and CPU time per forwarded packet,
//! each against the number of senders, one line per mode — drawn by `pspat-plot`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pspat_plot::{Colour, Figure, Legend, LineChart, NonPositive, Scale, Series};

use crate::csv::{read_results, Point};
use crate::error::AnalysisError;

/// Per mode (in order of first appearance), the mean of a value over the points of each
/// sender count, in order of senders.
pub type ModeSeries = Vec<(String, Vec<(u32, f64)>)>;

/// Per mode (in order of first appearance), the mean of `f` over the points of each
/// sender count; NaN values are left out.
pub fn series(points: &[&Point], f: impl Fn(&Point) -> f64) -> ModeSeries {
    let mut modes: Vec<String> = Vec::new();
    let mut acc: BTreeMap<(usize, u32), (f64, u32)> = BTreeMap::new();
    for p in points {
        let i = match modes.iter().position(|m| *m == p.mode) {
            Some(i) => i,
            None => {
                modes.push(p.mode.clone());
                modes.len() - 1
            }
        };
        let v = f(p);
        if v.is_finite() {
            let e = acc.entry((i, p.senders)).or_insert((0.0, 0));
            e.0 += v;
            e.1 += 1;
        }
    }
    modes
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let pts = acc
                .range((i, 0)..=(i, u32::MAX))
                .map(|(&(_, s), &(sum, n))| (s, sum / f64::from(n)))
                .collect();
            (m, pts)
        })
        .collect()
}

/// Reads the results CSV at `csv` and draws its figures into `outdir` (created if
/// missing); returns the files written.
pub fn plot_results(csv: &Path, outdir: &Path) -> Result<Vec<PathBuf>, AnalysisError> {
    let points = read_results(csv)?;
    if points.is_empty() {
        return Err(AnalysisError::NoResults(csv.to_owned()));
    }
    plot(&points, outdir)
}

/// Draws the figures of every set in `points` into `outdir` (created if missing): for set
/// `S`, `S-pps.svg`, `S-share-error.svg`, `S-victim-p99.svg` and `S-cpu-per-pkt.svg`.
/// Returns the files written.
pub fn plot(points: &[Point], outdir: &Path) -> Result<Vec<PathBuf>, AnalysisError> {
    std::fs::create_dir_all(outdir).map_err(|source| AnalysisError::CreateDir {
        path: outdir.to_owned(),
        source,
    })?;
    let mut written = Vec::new();
    for set in crate::csv::sets(points) {
        let pts: Vec<&Point> = points.iter().filter(|p| p.set == set).collect();
        let figures: [(&str, String, &str, ModeSeries, bool); 4] = [
            (
                "pps",
                format!("{set}: delivered packets per second"),
                "kpps",
                series(&pts, |p| p.delivered_pps / 1e3),
                false,
            ),
            (
                "share-error",
                format!("{set}: largest sender share error against its weight"),
                "max |share/target - 1|, %",
                series(&pts, |p| p.max_share_err * 100.0),
                true,
            ),
            (
                "victim-p99",
                format!("{set}: victim one-way latency, p99"),
                "p99 latency, us",
                series(&pts, |p| p.victim_p99_us),
                true,
            ),
            (
                "cpu-per-pkt",
                format!("{set}: CPU time per forwarded packet (shaper threads + softirq)"),
                "ns per packet",
                series(&pts, |p| p.cpu_ns_per_pkt),
                false,
            ),
        ];
        for (name, caption, ylabel, data, log) in figures {
            let path = outdir.join(format!("{set}-{name}.svg"));
            draw(&path, &caption, ylabel, &data, log)?;
            written.push(path);
        }
    }
    Ok(written)
}

/// One SVG: x = senders (a power-of-two axis), one line per mode in the kit's colours;
/// `log`: logarithmic y axis (values at or below 0 are drawn at its floor).
fn draw(
    path: &Path,
    caption: &str,
    ylabel: &str,
    data: &ModeSeries,
    log: bool,
) -> Result<(), pspat_plot::PlotError> {
    let lines: Vec<Series> = data
        .iter()
        .map(|(mode, pts)| {
            let xy = pts.iter().map(|&(s, y)| (f64::from(s), y)).collect();
            let line = Series::new(mode.as_str(), xy);
            // The kit's modes keep their colours whichever ran.
            match mode.as_str() {
                "pspat" => line.with_colour(Colour::BLUE),
                "htb" => line.with_colour(Colour::RED),
                "none" => line.with_colour(Colour::GREEN),
                _ => line,
            }
        })
        .collect();
    let chart = LineChart {
        title: caption,
        x_label: "greedy senders (M)",
        y_label: ylabel,
        x_scale: Scale::Log2,
        y_scale: if log { Scale::Log } else { Scale::Linear },
        non_positive: NonPositive::AtFloor,
        markers: true,
        legend: Legend::AboveData,
        ..LineChart::default()
    };
    Figure::new((760, 460)).panel(chart, &lines).write(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk(set: &str, mode: &str, senders: u32, v: f64) -> Point {
        Point {
            set: set.into(),
            mode: mode.into(),
            senders,
            offered_pps: v,
            delivered_pps: v,
            max_share_err: f64::NAN,
            victim_p50_us: 0.0,
            victim_p99_us: 0.0,
            victim_added_p50_us: f64::NAN,
            victim_added_p99_us: f64::NAN,
            cpu_ns_per_pkt: 1e9 / v,
            shaper_ns_per_pkt: f64::NAN,
            softirq_ns_per_pkt: 1e9 / v,
            sink_drops: 0.0,
        }
    }

    #[test]
    fn series_average_repeats_and_keep_mode_order() {
        let pts = [
            mk("s", "b", 8, 1.0),
            mk("s", "a", 2, 5.0),
            mk("s", "b", 8, 3.0),
            mk("s", "b", 2, 4.0),
        ];
        let refs: Vec<&Point> = pts.iter().collect();
        let s = series(&refs, |p| p.delivered_pps);
        assert_eq!(
            s,
            vec![
                ("b".to_owned(), vec![(2, 4.0), (8, 2.0)]),
                ("a".to_owned(), vec![(2, 5.0)])
            ]
        );
        // NaN values are not plotted.
        assert!(series(&refs, |p| p.max_share_err)
            .iter()
            .all(|(_, v)| v.is_empty()));
    }

    #[test]
    fn four_figures_per_set() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("plots");
        let pts = [
            mk("x", "pspat", 2, 1e5),
            mk("x", "htb", 8, 2e5),
            mk("y", "none", 4, 3e5),
        ];
        let files = plot(&pts, &out).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "x-pps.svg",
                "x-share-error.svg",
                "x-victim-p99.svg",
                "x-cpu-per-pkt.svg",
                "y-pps.svg",
                "y-share-error.svg",
                "y-victim-p99.svg",
                "y-cpu-per-pkt.svg"
            ]
        );
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("pspat") && svg.contains("htb"));
        let csv = dir.path().join("empty.csv");
        std::fs::write(&csv, crate::csv::COLUMNS.join(",") + "\n").unwrap();
        let e = plot_results(&csv, &out).unwrap_err().to_string();
        assert!(e.ends_with("empty.csv: no result lines to plot"), "{e}");
    }
}
