//! SVG plots (plotters, SVG backend only): line charts of point series and grouped bars.

use std::path::Path;

use plotters::prelude::*;

use crate::error::SimError;
use crate::metrics::{PlotData, Series};

/// Axis scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Linear.
    Linear,
    /// Logarithmic (non-positive values are left out).
    Log,
}

/// A line chart.
#[derive(Clone, Debug)]
pub struct LineChart<'a> {
    /// Title.
    pub title: &'a str,
    /// X axis label.
    pub x_label: &'a str,
    /// Y axis label.
    pub y_label: &'a str,
    /// X scale.
    pub x_scale: Scale,
    /// Y scale.
    pub y_scale: Scale,
    /// Dashed series (a reference drawn under the measured ones): labels ending in these.
    pub dashed_suffix: Option<&'a str>,
    /// Draw a marker at every point.
    pub markers: bool,
}

const SIZE: (u32, u32) = (900, 560);

fn out_err(path: &Path, e: impl std::fmt::Display) -> SimError {
    SimError::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

fn range(vals: impl Iterator<Item = f64>, scale: Scale) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite() && (scale == Scale::Linear || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (if scale == Scale::Log { 1.0 } else { 0.0 }, 1.0);
    }
    match scale {
        Scale::Linear => {
            let lo = lo.min(0.0);
            let pad = (hi - lo).abs() * 0.05 + f64::EPSILON;
            (lo, hi + pad)
        }
        Scale::Log => {
            if hi <= lo {
                (lo / 2.0, hi * 2.0)
            } else {
                (lo / 1.2, hi * 1.2)
            }
        }
    }
}

/// Draws `series` into an SVG file at `path`.
pub fn line_chart(path: &Path, chart: &LineChart<'_>, series: &[Series]) -> Result<(), SimError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| out_err(path, e))?;
    }
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| out_err(path, e))?;
    let xs = range(
        series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
        chart.x_scale,
    );
    let ys = range(
        series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
        chart.y_scale,
    );
    let keep = |p: &(f64, f64)| {
        p.0.is_finite()
            && p.1.is_finite()
            && (chart.x_scale == Scale::Linear || p.0 > 0.0)
            && (chart.y_scale == Scale::Linear || p.1 > 0.0)
    };
    // Measured series take colours in turn; a reference series (dashed) takes the colour of
    // the measured one it refers to (its label without the suffix starts that one's label).
    let is_ref = |s: &Series| {
        chart
            .dashed_suffix
            .is_some_and(|suf| s.label.ends_with(suf))
    };
    let mut colours = vec![0usize; series.len()];
    let mut next = 0;
    for (i, s) in series.iter().enumerate() {
        if !is_ref(s) {
            colours[i] = next;
            next += 1;
        }
    }
    for (i, s) in series.iter().enumerate() {
        if let Some(base) = chart
            .dashed_suffix
            .and_then(|suf| s.label.strip_suffix(suf))
            .map(str::trim_end)
        {
            if let Some(j) = series.iter().position(|m| {
                !is_ref(m) && (m.label == base || m.label.starts_with(&format!("{base} ")))
            }) {
                colours[i] = colours[j];
            }
        }
    }
    macro_rules! draw {
        ($x:expr, $y:expr) => {{
            let mut ctx = ChartBuilder::on(&root)
                .caption(chart.title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(44)
                .y_label_area_size(70)
                .build_cartesian_2d($x, $y)
                .map_err(|e| out_err(path, e))?;
            ctx.configure_mesh()
                .x_desc(chart.x_label)
                .y_desc(chart.y_label)
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(|e| out_err(path, e))?;
            for (i, s) in series.iter().enumerate() {
                let dashed = is_ref(s);
                let c = color(colours[i]);
                let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(keep).collect();
                let style = if dashed {
                    c.mix(0.6).stroke_width(1)
                } else {
                    c.stroke_width(2)
                };
                ctx.draw_series(LineSeries::new(pts.clone(), style))
                    .map_err(|e| out_err(path, e))?
                    .label(s.label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                    });
                if chart.markers && !dashed {
                    ctx.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                        .map_err(|e| out_err(path, e))?;
                }
            }
            ctx.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| out_err(path, e))?;
        }};
    }
    match (chart.x_scale, chart.y_scale) {
        (Scale::Linear, Scale::Linear) => draw!(xs.0..xs.1, ys.0..ys.1),
        (Scale::Log, Scale::Linear) => draw!((xs.0..xs.1).log_scale(), ys.0..ys.1),
        (Scale::Linear, Scale::Log) => draw!(xs.0..xs.1, (ys.0..ys.1).log_scale()),
        (Scale::Log, Scale::Log) => draw!((xs.0..xs.1).log_scale(), (ys.0..ys.1).log_scale()),
    }
    root.present().map_err(|e| out_err(path, e))?;
    Ok(())
}

/// Grouped bars: one group per category, one bar per series (values by category index;
/// `NaN` leaves a gap). `log_y` draws the value axis logarithmically.
pub fn bar_chart(
    path: &Path,
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
    log_y: bool,
) -> Result<(), SimError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| out_err(path, e))?;
    }
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| out_err(path, e))?;
    let scale = if log_y { Scale::Log } else { Scale::Linear };
    let (mut lo, hi) = range(series.iter().flat_map(|s| s.1.iter().copied()), scale);
    if log_y {
        lo = lo.min(0.1);
    }
    let n = categories.len().max(1) as f64;
    let k = series.len().max(1) as f64;
    let width = 0.8 / k;
    let cats: Vec<String> = categories.to_vec();
    macro_rules! draw {
        ($y:expr, $base:expr) => {{
            let mut ctx = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(44)
                .y_label_area_size(70)
                .build_cartesian_2d(-0.5..n - 0.5, $y)
                .map_err(|e| out_err(path, e))?;
            ctx.configure_mesh()
                .y_desc(y_label)
                .x_labels(categories.len())
                .x_label_formatter(&|x: &f64| {
                    let i = x.round();
                    if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < cats.len() {
                        cats[i as usize].clone()
                    } else {
                        String::new()
                    }
                })
                .disable_x_mesh()
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(|e| out_err(path, e))?;
            for (j, (label, vals)) in series.iter().enumerate() {
                let c = color(j);
                let off = -0.4 + width * j as f64;
                let bars: Vec<_> = vals
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_finite() && (!log_y || **v > 0.0))
                    .map(|(i, &v)| {
                        let x0 = i as f64 + off;
                        Rectangle::new([(x0, $base), (x0 + width * 0.92, v)], c.filled())
                    })
                    .collect();
                ctx.draw_series(bars)
                    .map_err(|e| out_err(path, e))?
                    .label(label.clone())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled())
                    });
            }
            ctx.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| out_err(path, e))?;
        }};
    }
    if log_y {
        draw!((lo..hi).log_scale(), lo)
    } else {
        draw!(lo..hi, 0.0)
    }
    root.present().map_err(|e| out_err(path, e))?;
    Ok(())
}

/// Writes a run's three plots into `dir`: `service.svg` (cumulative service of selected
/// flows against the fluid GPS reference), `delay_cdf.svg` (per group) and, when some
/// group is bursty, `burst_latency.svg` (mean completion against burst length). Returns
/// the files written.
pub fn run_plots(dir: &Path, title: &str, data: &PlotData) -> Result<Vec<String>, SimError> {
    let mut written = Vec::new();
    let p = dir.join("service.svg");
    line_chart(
        &p,
        &LineChart {
            title: &format!("{title}: cumulative service vs fluid GPS"),
            x_label: "time (ms)",
            y_label: "bytes served",
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            dashed_suffix: Some("GPS"),
            markers: false,
        },
        &data.service,
    )?;
    written.push(p.display().to_string());
    let p = dir.join("delay_cdf.svg");
    line_chart(
        &p,
        &LineChart {
            title: &format!("{title}: packet delay CDF"),
            x_label: "delay (us)",
            y_label: "fraction of packets",
            x_scale: Scale::Log,
            y_scale: Scale::Linear,
            dashed_suffix: None,
            markers: false,
        },
        &data.delay_cdf,
    )?;
    written.push(p.display().to_string());
    if !data.burst_latency.is_empty() {
        let p = dir.join("burst_latency.svg");
        line_chart(
            &p,
            &LineChart {
                title: &format!("{title}: burst completion vs burst length"),
                x_label: "burst length (packets)",
                y_label: "mean completion (us)",
                x_scale: Scale::Log,
                y_scale: Scale::Log,
                dashed_suffix: None,
                markers: true,
            },
            &data.burst_latency,
        )?;
        written.push(p.display().to_string());
    }
    Ok(written)
}
