//! # pspat-plot
//!
//! pspat's one plot module: SVG line charts and grouped bar charts (and the aligned text
//! tables the same results print as on a terminal), drawn with `plotters`
//! (SVG backend only). The simulator's figures (`pspat sim --plots`, the sweeps of
//! `scenarios/`), the shaper experiment kit's (`pspat experiment plot`) and `pspat bench
//! arch --plot` are all drawn here, so they share one look, one rule for axes and ticks
//! ([`Scale`], [`NonPositive`]) and one colour rule ([`Colour`]).
//!
//! - [`line_chart`]: one panel of [`Series`], as a [`LineChart`] describes it: linear,
//!   log10 or power-of-two axes ([`Scale::Log2`]: counts placed at log2, ticks labelled
//!   `1 2 4 8`), non-positive values on log axes left out or drawn at the floor, dashed
//!   reference series, markers, the legend's place;
//! - [`Figure`]: several such panels stacked in one SVG;
//! - [`bar_chart`]: grouped bars, one group per category;
//! - [`table`]: the same results as aligned plain-text tables, for terminals.
//!
//! Errors ([`PlotError`]) name the file.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod axis;
mod bar;
mod colour;
mod error;
mod line;
mod series;
mod svg;
pub mod table;

pub use axis::{NonPositive, Scale};
pub use bar::{bar_chart, BarChart};
pub use colour::Colour;
pub use error::PlotError;
pub use line::{line_chart, Figure, Legend, LineChart};
pub use series::Series;
pub use svg::SIZE;
