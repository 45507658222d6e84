//! A run's SVG plots, drawn by pspat-plot.

use std::path::Path;

use pspat_plot::{line_chart, LineChart, Scale};

use crate::error::SimError;
use crate::metrics::PlotData;

/// Writes a run's three plots into `dir`: `service.svg` (cumulative service of selected
/// flows against the fluid GPS reference, dashed; not for a tree, whose flows GPS does not
/// describe), `delay_cdf.svg` (per group) and, when some group is bursty,
/// `burst_latency.svg` (mean completion against burst length). Returns the files written.
pub fn run_plots(dir: &Path, title: &str, data: &PlotData) -> Result<Vec<String>, SimError> {
    let mut written = Vec::new();
    if !data.service.is_empty() {
        let p = dir.join("service.svg");
        line_chart(
            &p,
            &LineChart {
                title: &format!("{title}: cumulative service vs fluid GPS"),
                x_label: "time (ms)",
                y_label: "bytes served",
                dashed_suffix: Some("GPS"),
                ..LineChart::default()
            },
            &data.service,
        )?;
        written.push(p.display().to_string());
    }
    let p = dir.join("delay_cdf.svg");
    line_chart(
        &p,
        &LineChart {
            title: &format!("{title}: packet delay CDF"),
            x_label: "delay (us)",
            y_label: "fraction of packets",
            x_scale: Scale::Log,
            ..LineChart::default()
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
                markers: true,
                ..LineChart::default()
            },
            &data.burst_latency,
        )?;
        written.push(p.display().to_string());
    }
    Ok(written)
}
