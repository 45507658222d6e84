//! What can go wrong writing a plot: each error names the file.

use std::path::PathBuf;

/// A plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// plotters refused to draw (an empty drawing area, a coordinate it cannot map).
    #[error("drawing the plot '{}': {reason}", .path.display())]
    Draw {
        /// The file the plot was for.
        path: PathBuf,
        /// plotters' message.
        reason: String,
    },
    /// The SVG could not be written (or its directory created).
    #[error("writing the plot '{}'", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
