//! Colours, and which colour each line of a chart gets.
//!
//! A series that sets its colour keeps it. A dashed reference series without one takes the
//! colour of the measured series it refers to (see [`assign`]). Every other series takes
//! the palette's colours in turn, skipping those within [`NEAR`] of a colour some series
//! of the chart sets, so a fixed blue line and a palette blue one are not confused.

use serde::Serialize;

/// An RGB colour (0-255 per channel); serialises as `[r, g, b]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Colour(pub u8, pub u8, pub u8);

/// Palette colours closer than this (Euclidean, RGB) to a fixed colour are skipped.
pub(crate) const NEAR: f64 = 150.0;

impl Colour {
    /// Pure blue.
    pub const BLUE: Colour = Colour(0, 0, 255);
    /// Pure red.
    pub const RED: Colour = Colour(255, 0, 0);
    /// Pure green.
    pub const GREEN: Colour = Colour(0, 255, 0);
    /// Black.
    pub const BLACK: Colour = Colour(0, 0, 0);
    /// The colours series without their own take, in turn (matplotlib's tab10).
    pub const PALETTE: [Colour; 10] = [
        Colour(31, 119, 180),
        Colour(255, 127, 14),
        Colour(44, 160, 44),
        Colour(214, 39, 40),
        Colour(148, 103, 189),
        Colour(140, 86, 75),
        Colour(227, 119, 194),
        Colour(127, 127, 127),
        Colour(188, 189, 34),
        Colour(23, 190, 207),
    ];

    fn distance(self, o: Colour) -> f64 {
        let d = |a: u8, b: u8| (f64::from(a) - f64::from(b)).powi(2);
        (d(self.0, o.0) + d(self.1, o.1) + d(self.2, o.2)).sqrt()
    }

    pub(crate) fn rgb(self) -> plotters::style::RGBColor {
        plotters::style::RGBColor(self.0, self.1, self.2)
    }
}

/// What each of `n` lines is: its fixed colour, and for a reference line the index of the
/// measured line it refers to.
pub(crate) struct Line {
    pub colour: Option<Colour>,
    /// `Some(None)`: a reference line whose measured line is not in the chart.
    pub refers_to: Option<Option<usize>>,
}

/// The colour of each line: fixed ones kept, reference lines in their measured line's
/// colour, the rest from the palette in turn (skipping colours near fixed ones).
pub(crate) fn assign(lines: &[Line]) -> Vec<Colour> {
    let fixed: Vec<Colour> = lines.iter().filter_map(|l| l.colour).collect();
    let mut palette: Vec<Colour> = Colour::PALETTE
        .into_iter()
        .filter(|p| fixed.iter().all(|f| f.distance(*p) >= NEAR))
        .collect();
    if palette.is_empty() {
        palette = Colour::PALETTE.to_vec();
    }
    let mut next = 0;
    let mut take = || {
        let c = palette[next % palette.len()];
        next += 1;
        c
    };
    let mut out: Vec<Option<Colour>> = lines.iter().map(|l| l.colour).collect();
    for (i, l) in lines.iter().enumerate() {
        if l.refers_to.is_none() && out[i].is_none() {
            out[i] = Some(take());
        }
    }
    for (i, l) in lines.iter().enumerate() {
        if let (None, Some(to)) = (out[i], l.refers_to) {
            out[i] = Some(to.and_then(|j| out[j]).unwrap_or_else(&mut take));
        }
    }
    out.into_iter()
        .map(|c| c.unwrap_or(Colour::BLACK))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(colour: Option<Colour>, refers_to: Option<Option<usize>>) -> Line {
        Line { colour, refers_to }
    }

    #[test]
    fn fixed_colours_stay_and_the_palette_skips_near_ones() {
        let c = assign(&[
            line(Some(Colour::BLUE), None),
            line(None, None),
            line(Some(Colour::RED), None),
            line(None, None),
        ]);
        assert_eq!(c[0], Colour::BLUE);
        assert_eq!(c[2], Colour::RED);
        // tab10's blue is near pure blue, its orange near pure red: both skipped.
        assert_eq!(c[1], Colour::PALETTE[2]);
        assert_eq!(c[3], Colour::PALETTE[4]);
    }

    #[test]
    fn reference_lines_take_their_measured_line_s_colour() {
        let c = assign(&[
            line(None, None),
            line(None, Some(Some(2))),
            line(None, None),
            line(None, Some(None)),
        ]);
        assert_eq!(c[0], Colour::PALETTE[0]);
        assert_eq!(c[2], Colour::PALETTE[1]);
        assert_eq!(c[1], c[2]);
        // Without a measured line, the next palette colour.
        assert_eq!(c[3], Colour::PALETTE[2]);
    }
}
