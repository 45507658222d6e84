//! Grouped bar charts: one group per category, one bar per series in each.

use std::path::Path;

use plotters::prelude::*;

use crate::axis::{Axis, NonPositive, Scale};
use crate::colour::{self, Line};
use crate::error::PlotError;
use crate::svg::{self, Frame, SIZE};

/// How a bar chart looks; the bars are given with it.
#[derive(Clone, Debug, Default)]
pub struct BarChart<'a> {
    /// Caption.
    pub title: &'a str,
    /// Value axis description.
    pub y_label: &'a str,
    /// Value axis scale. On a log axis, values at or below zero are left out, and bars
    /// grow from a decade below the smallest one.
    pub y_scale: Scale,
}

/// Draws grouped bars into an SVG file at `path` ([`SIZE`] pixels): `series` are
/// (legend, value per category in the order of `categories`); a `NaN` leaves a gap.
pub fn bar_chart(
    path: &Path,
    chart: &BarChart<'_>,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<(), PlotError> {
    let values = || series.iter().flat_map(|s| s.1.iter().copied());
    let mut y = Axis::fit(chart.y_scale, values(), NonPositive::LeftOut, 0.0);
    let base = if chart.y_scale == Scale::Linear {
        0.0
    } else {
        let min = values().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        if let Some(t) = chart.y_scale.place(min / 10.0) {
            y.extend_down(t);
        }
        y.lo
    };
    let x = Axis::categories(categories.len());
    let category = |t: f64| {
        let i = t.round();
        if (t - i).abs() < 1e-6 && i >= 0.0 {
            categories.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let colours = colour::assign(
        &series
            .iter()
            .map(|_| Line {
                colour: None,
                refers_to: None,
            })
            .collect::<Vec<_>>(),
    );
    let width = 0.8 / series.len().max(1) as f64;
    svg::write(path, SIZE, |root| {
        let mut ctx = svg::frame(
            root,
            &Frame {
                title: chart.title,
                x_desc: "",
                y_desc: chart.y_label,
                x: &x,
                y: &y,
                x_labels: Some(&category),
                x_mesh: false,
            },
        )?;
        for (j, ((label, vals), colour)) in series.iter().zip(colours).enumerate() {
            let c = colour.rgb();
            let off = -0.4 + width * j as f64;
            let bars: Vec<_> = vals
                .iter()
                .enumerate()
                .filter_map(|(i, &v)| {
                    let top = y.position(v)?;
                    let x0 = i as f64 + off;
                    Some(Rectangle::new(
                        [(x0, base), (x0 + width * 0.92, top)],
                        c.filled(),
                    ))
                })
                .collect();
            ctx.draw_series(bars)?
                .label(label.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        svg::legend(&mut ctx, SeriesLabelPosition::UpperLeft)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svg(chart: &BarChart<'_>, categories: &[String], series: &[(String, Vec<f64>)]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bars.svg");
        bar_chart(&path, chart, categories, series).unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn groups_are_labelled_by_category_and_gaps_are_left_out() {
        let cats = vec!["25 clients".to_owned(), "100 clients".to_owned()];
        let chart = BarChart {
            title: "T-WFI",
            y_label: "us",
            y_scale: Scale::Linear,
        };
        let full = [
            ("qfq".to_owned(), vec![2.4, 1.2]),
            ("drr".to_owned(), vec![117.0, 118.0]),
        ];
        let gap = [
            ("qfq".to_owned(), vec![2.4, f64::NAN]),
            ("drr".to_owned(), vec![117.0, 118.0]),
        ];
        let s = svg(&chart, &cats, &full);
        for want in ["T-WFI", "us", "25 clients", "100 clients", "qfq", "drr"] {
            assert!(s.contains(&format!(">\n{want}\n</text>")), "{want}");
        }
        let rects = |s: &str| s.matches("<rect").count();
        assert_eq!(rects(&s), rects(&svg(&chart, &cats, &gap)) + 1);
        // On a log axis a zero is left out too; on a linear one it is a bar of height 0.
        let zero = [("qfq".to_owned(), vec![2.4, 0.0])];
        let one = [("qfq".to_owned(), vec![2.4])];
        let log = BarChart {
            y_scale: Scale::Log,
            ..chart.clone()
        };
        assert_eq!(
            rects(&svg(&log, &cats, &zero)),
            rects(&svg(&log, &cats, &one))
        );
        assert_eq!(
            rects(&svg(&chart, &cats, &zero)),
            rects(&svg(&chart, &cats, &one)) + 1
        );
    }
}
