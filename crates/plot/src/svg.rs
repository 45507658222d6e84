//! The SVG file, and the frame every chart shares: caption, label areas, mesh with the
//! axes' ticks and labels, and the legend box.
//!
//! A plot is drawn into a string and written at the end, so a failed write is a plain I/O
//! error naming the file and a failed drawing leaves no half-written file behind.

use std::path::Path;

use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::axis::{Axis, Ticks};
use crate::error::PlotError;

/// A drawing area of an SVG being written.
pub(crate) type Area<'s> = DrawingArea<SVGBackend<'s>, Shift>;
/// The coordinates of every chart: axis positions (see [`crate::axis`]) with our ticks.
pub(crate) type Coords = Cartesian2d<Ticked, Ticked>;
/// A chart being drawn.
pub(crate) type Chart<'a, 's> = ChartContext<'a, SVGBackend<'s>, Coords>;
/// What plotters reports when drawing fails.
pub(crate) type DrawError = DrawingAreaErrorKind<std::io::Error>;

/// Width and height of a single chart, pixels.
pub const SIZE: (u32, u32) = (900, 560);

const CAPTION_PX: u32 = 20;
const LIGHT_GREY: RGBColor = RGBColor(235, 235, 235);

/// Draws with `draw` on a white `size` SVG and writes it at `path` (creating its
/// directory).
pub(crate) fn write(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> Result<(), DrawError>,
) -> Result<(), PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|()| draw(&root))
            .and_then(|()| root.present())
            .map_err(|e| PlotError::Draw {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
    }
    let write_err = |source| PlotError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(write_err)?;
    }
    std::fs::write(path, svg).map_err(write_err)
}

/// An axis as plotters sees it: linear over axis positions, its ticks where
/// [`Axis::ticks`] puts them (plotters' own key points would be at round *positions*, so
/// at 10^0.5 on a log axis). Labels come from [`Axis::label`] through the mesh's formatter.
pub(crate) struct Ticked {
    linear: RangedCoordf64,
    ticks: Ticks,
}

impl Ticked {
    fn new(a: &Axis) -> Self {
        Self {
            linear: (a.lo..a.hi).into(),
            ticks: a.ticks(),
        }
    }
}

impl Ranged for Ticked {
    // The labels are always given by a formatter; this only satisfies the mesh's bound.
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.ticks.light.clone()
        } else {
            self.ticks.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.linear.range()
    }
}

/// What a chart's frame shows.
pub(crate) struct Frame<'f> {
    pub title: &'f str,
    pub x_desc: &'f str,
    pub y_desc: &'f str,
    pub x: &'f Axis,
    pub y: &'f Axis,
    /// Labels of the x ticks; `None`: the values (see [`Axis::label`]).
    pub x_labels: Option<&'f dyn Fn(f64) -> String>,
    /// Vertical grid lines at the x ticks.
    pub x_mesh: bool,
}

/// The chart on `area` with `f`'s caption, axes and grid drawn.
pub(crate) fn frame<'a, 's>(area: &'a Area<'s>, f: &Frame<'_>) -> Result<Chart<'a, 's>, DrawError> {
    let mut chart = ChartBuilder::on(area)
        .caption(f.title, ("sans-serif", CAPTION_PX))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(Ticked::new(f.x), Ticked::new(f.y))?;
    let x_label = |t: &f64| match f.x_labels {
        Some(l) => l(*t),
        None => f.x.label(*t),
    };
    let y_label = |t: &f64| f.y.label(*t);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(f.x_desc)
        .y_desc(f.y_desc)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .light_line_style(LIGHT_GREY);
    if !f.x_mesh {
        mesh.disable_x_mesh();
    }
    mesh.draw()?;
    Ok(chart)
}

/// Draws the legend box of the series labelled so far at `position`.
pub(crate) fn legend<'a, 's: 'a>(
    chart: &mut Chart<'a, 's>,
    position: SeriesLabelPosition,
) -> Result<(), DrawError> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(position)
        .draw()
}
