//! Line charts: one panel, or several stacked top to bottom in one SVG.

use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::axis::{Axis, NonPositive, Scale};
use crate::colour::{self, Line};
use crate::error::PlotError;
use crate::series::Series;
use crate::svg::{self, Area, DrawError, Frame, SIZE};

/// Where the legend goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Legend {
    /// Upper left, over the data (for lines that start low on the left).
    #[default]
    UpperLeft,
    /// Middle of the right edge, over the data.
    MiddleRight,
    /// Upper right, clear of the lines: the y axis reaches above the data by the legend
    /// box's height.
    AboveData,
}

/// How one line-chart panel looks; the lines are a `&[Series]` given with it.
#[derive(Clone, Debug, Default)]
pub struct LineChart<'a> {
    /// Caption.
    pub title: &'a str,
    /// X axis description.
    pub x_label: &'a str,
    /// Y axis description.
    pub y_label: &'a str,
    /// X scale.
    pub x_scale: Scale,
    /// Y scale.
    pub y_scale: Scale,
    /// On log axes, what values at or below zero do.
    pub non_positive: NonPositive,
    /// Series whose label ends in this are references (a bound, a fluid model): drawn
    /// dashed and thin, without markers, in the colour of the measured series they refer
    /// to (whose label is, or starts with, theirs without the suffix: `flow 0 GPS`
    /// refers to `flow 0 packet`, `qfq bound` to `qfq`).
    pub dashed_suffix: Option<&'a str>,
    /// A marker at each point of the measured series.
    pub markers: bool,
    /// Legend position.
    pub legend: Legend,
}

/// One SVG of line-chart panels stacked top to bottom, each an equal share of the height.
///
/// ```
/// use pspat_plot::{Colour, Figure, LineChart, Scale, Series};
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("fig.svg");
/// let rate = [Series::new("pspat", vec![(1.0, 5.0), (4.0, 9.0)]).with_colour(Colour::BLUE)];
/// let p99 = [Series::new("pspat", vec![(1.0, 20.0), (4.0, 31.0)]).with_colour(Colour::BLUE)];
/// let x = LineChart { x_label: "clients", x_scale: Scale::Log2, markers: true, ..LineChart::default() };
/// Figure::new((800, 900))
///     .panel(LineChart { title: "rate", y_label: "Mpps", ..x.clone() }, &rate)
///     .panel(LineChart { title: "p99", y_label: "us", y_scale: Scale::Log, ..x }, &p99)
///     .write(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Figure<'a> {
    size: (u32, u32),
    panels: Vec<(LineChart<'a>, &'a [Series])>,
}

impl<'a> Figure<'a> {
    /// An empty figure of `size` (width, height) pixels.
    pub fn new(size: (u32, u32)) -> Self {
        Self {
            size,
            panels: Vec::new(),
        }
    }

    /// Adds a panel below the others.
    #[must_use]
    pub fn panel(mut self, chart: LineChart<'a>, series: &'a [Series]) -> Self {
        self.panels.push((chart, series));
        self
    }

    /// Draws the figure into an SVG file at `path`, creating its directory.
    pub fn write(&self, path: &Path) -> Result<(), PlotError> {
        svg::write(path, self.size, |root| {
            if self.panels.is_empty() {
                return Ok(());
            }
            let areas = root.split_evenly((self.panels.len(), 1));
            for (area, (chart, series)) in areas.iter().zip(&self.panels) {
                panel(area, chart, series)?;
            }
            Ok(())
        })
    }
}

/// Draws one line chart of `series` into an SVG file at `path` ([`SIZE`] pixels).
pub fn line_chart(path: &Path, chart: &LineChart<'_>, series: &[Series]) -> Result<(), PlotError> {
    Figure::new(SIZE).panel(chart.clone(), series).write(path)
}

/// A reference series' label without the suffix; `None` for a measured series.
fn reference_base<'s>(suffix: Option<&str>, s: &'s Series) -> Option<&'s str> {
    suffix
        .and_then(|suf| s.label.strip_suffix(suf))
        .map(str::trim_end)
}

/// Each series' colour and, for a reference, the measured series it refers to.
fn lines(c: &LineChart<'_>, series: &[Series]) -> Vec<Line> {
    let base = |s| reference_base(c.dashed_suffix, s);
    series
        .iter()
        .map(|s| Line {
            colour: s.colour,
            refers_to: base(s).map(|b| {
                series.iter().position(|m| {
                    base(m).is_none()
                        && (m.label == b
                            || m.label.strip_prefix(b).is_some_and(|r| r.starts_with(' ')))
                })
            }),
        })
        .collect()
}

fn panel(area: &Area<'_>, c: &LineChart<'_>, series: &[Series]) -> Result<(), DrawError> {
    let lines = lines(c, series);
    let colours = colour::assign(&lines);
    let all = || series.iter().flat_map(|s| s.points.iter());
    let x = Axis::fit(c.x_scale, all().map(|p| p.0), c.non_positive, 0.0);
    let headroom = if c.legend == Legend::AboveData {
        // The legend box's height (about 18 px an entry and its padding) of the plot
        // area's (the panel's less the caption and the x labels).
        let entries = series.iter().filter(|s| !s.points.is_empty()).count();
        let plot_px = (f64::from(area.dim_in_pixel().1) - 110.0).max(50.0);
        (18.0 * entries as f64 + 30.0) / plot_px
    } else {
        0.0
    };
    let y = Axis::fit(c.y_scale, all().map(|p| p.1), c.non_positive, headroom);
    let mut chart = svg::frame(
        area,
        &Frame {
            title: c.title,
            x_desc: c.x_label,
            y_desc: c.y_label,
            x: &x,
            y: &y,
            x_labels: None,
            x_mesh: true,
        },
    )?;
    for ((s, line), colour) in series.iter().zip(&lines).zip(colours) {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|&(px, py)| Some((x.position(px)?, y.position(py)?)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let rgb = colour.rgb();
        if line.refers_to.is_some() {
            let style = rgb.mix(0.8).stroke_width(1);
            chart
                .draw_series(DashedLineSeries::new(pts, 6, 4, style))?
                .label(s.label.clone())
                .legend(move |(x, y)| {
                    DashedPathElement::new(vec![(x, y), (x + 18, y)], 6, 4, style)
                });
        } else {
            let style = rgb.stroke_width(2);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), style))?
                .label(s.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            if c.markers {
                chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, rgb.filled())))?;
            }
        }
    }
    let position = match c.legend {
        Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
        Legend::MiddleRight => SeriesLabelPosition::MiddleRight,
        Legend::AboveData => SeriesLabelPosition::UpperRight,
    };
    svg::legend(&mut chart, position)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::colour::Colour;

    fn svg(figure: &Figure<'_>) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/plot.svg");
        figure.write(&path).unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    /// The texts of the SVG's `<text>` elements.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("</text>")
            .filter_map(|t| t.rsplit_once('>').map(|(_, s)| s.trim()))
            .collect()
    }

    /// The y of each marker (`<circle ... cy="...">`).
    fn marker_ys(svg: &str) -> Vec<f64> {
        svg.split("<circle")
            .skip(1)
            .map(|c| {
                let v = c.split("cy=\"").nth(1).unwrap();
                v[..v.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    }

    #[test]
    fn writes_title_legend_and_power_of_two_ticks() {
        let series = [
            Series::new("pspat", vec![(1.0, 5e3), (2.0, 6e3), (8.0, 9e3)])
                .with_colour(Colour::BLUE),
            Series::new("htb", vec![(1.0, 4e3), (8.0, 3e3)]),
            Series::new("idle", vec![]),
        ];
        let chart = LineChart {
            title: "shares: delivered packets",
            x_label: "greedy senders (M)",
            y_label: "kpps",
            x_scale: Scale::Log2,
            markers: true,
            legend: Legend::AboveData,
            ..LineChart::default()
        };
        let s = svg(&Figure::new((760, 460)).panel(chart, &series));
        assert!(
            s.starts_with("<svg") && s.contains(r#"width="760""#),
            "{}",
            &s[..80]
        );
        let t = texts(&s);
        for want in [
            "shares: delivered packets",
            "greedy senders (M)",
            "kpps",
            "pspat",
            "htb",
        ] {
            assert!(t.contains(&want), "{want} not in {t:?}");
        }
        // An empty series has no legend entry.
        assert!(!t.contains(&"idle"), "{t:?}");
        // x ticks at whole powers of two only (the y ticks are 0 and thousands).
        let small: Vec<&str> = t
            .iter()
            .copied()
            .filter(|x| x.parse::<f64>().is_ok_and(|v| v > 0.0 && v < 1000.0))
            .collect();
        assert_eq!(small, ["1", "2", "4", "8"], "{t:?}");
        for want in ["0", "1000", "9000"] {
            assert!(t.contains(&want), "tick {want} not in {t:?}");
        }
        assert_eq!(marker_ys(&s).len(), 5);
        assert!(s.contains(r##"fill="#0000FF""##), "pspat's blue");
    }

    #[test]
    fn log_axis_leaves_out_or_floors_non_positive_values() {
        let series = [Series::new(
            "v",
            vec![(1.0, 0.0), (2.0, 5.0), (4.0, 50.0), (8.0, -1.0)],
        )];
        let chart = |non_positive| LineChart {
            title: "t",
            y_scale: Scale::Log,
            non_positive,
            markers: true,
            ..LineChart::default()
        };
        let out = svg(&Figure::new(SIZE).panel(chart(NonPositive::LeftOut), &series));
        assert_eq!(marker_ys(&out).len(), 2);
        let floor = svg(&Figure::new(SIZE).panel(chart(NonPositive::AtFloor), &series));
        let ys = marker_ys(&floor);
        assert_eq!(ys.len(), 4);
        // 0 and -1 both on the floor, below (larger y than) the positive values.
        assert_eq!(ys[0], ys[3]);
        assert!(ys[0] > ys[1] && ys[1] > ys[2], "{ys:?}");
    }

    #[test]
    fn stacked_panels_share_one_svg() {
        let a = [Series::new("pspat", vec![(1.0, 1.0), (4.0, 2.0)])];
        let b = [Series::new("lock", vec![(1.0, 100.0), (4.0, 3000.0)])];
        let s = svg(&Figure::new((800, 900))
            .panel(
                LineChart {
                    title: "upper",
                    ..LineChart::default()
                },
                &a,
            )
            .panel(
                LineChart {
                    title: "lower",
                    y_scale: Scale::Log,
                    ..LineChart::default()
                },
                &b,
            ));
        let t = texts(&s);
        let (upper, lower) = (
            t.iter().position(|x| *x == "upper").unwrap(),
            t.iter().position(|x| *x == "lower").unwrap(),
        );
        assert!(upper < lower);
        assert!(t.contains(&"1000"), "{t:?}");
        assert!(s.contains(r#"height="900""#));
    }

    #[test]
    fn references_are_dashed_in_their_measured_series_colour() {
        let s = |l: &str| Series::new(l, vec![(1.0, 1.0), (2.0, 2.0)]);
        let series = [
            s("qfq"),
            s("qfq+"),
            s("qfq+ bound"),
            s("qfq bound"),
            s("drr bound"),
        ];
        let chart = LineChart {
            title: "t",
            dashed_suffix: Some("bound"),
            ..LineChart::default()
        };
        let refs: Vec<_> = lines(&chart, &series).iter().map(|l| l.refers_to).collect();
        assert_eq!(refs, [None, None, Some(Some(1)), Some(Some(0)), Some(None)]);
        let flows = [s("flow 0 (heavy) packet"), s("flow 0 GPS")];
        let chart = LineChart {
            dashed_suffix: Some("GPS"),
            ..chart
        };
        let refs: Vec<_> = lines(&chart, &flows).iter().map(|l| l.refers_to).collect();
        assert_eq!(refs, [None, Some(Some(0))]);
        // Drawn as many short segments: more paths than the solid line's one.
        let dashed = svg(&Figure::new(SIZE).panel(chart.clone(), &flows));
        let solid = svg(&Figure::new(SIZE).panel(
            LineChart {
                dashed_suffix: None,
                ..chart
            },
            &flows,
        ));
        assert!(dashed.matches("<polyline").count() > solid.matches("<polyline").count() + 2);
    }

    #[test]
    fn errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").unwrap();
        let series = [Series::new("v", vec![(1.0, 1.0)])];
        let chart = LineChart::default();
        // Under a regular file, and a directory in the file's place.
        for path in [file.join("plot.svg"), dir.path().to_owned()] {
            let e = line_chart(&path, &chart, &series).unwrap_err();
            assert!(matches!(e, PlotError::Write { .. }), "{e:?}");
            assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        }
    }
}
