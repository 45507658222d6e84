//! A line: a legend label, its points and, optionally, its colour.

use serde::Serialize;

use crate::colour::Colour;

/// A point series, drawn as one line (and its markers).
///
/// Serialises as `{"label": ..., "points": [[x, y], ...]}`, with `"colour": [r, g, b]`
/// only when a colour is set, so reports that carry plot data keep their shape.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Series {
    /// Legend.
    pub label: String,
    /// Points, (x, y), drawn joined in this order.
    pub points: Vec<(f64, f64)>,
    /// Colour; `None` takes the chart's next palette colour (see [`Colour::PALETTE`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub colour: Option<Colour>,
}

impl Series {
    /// A series without a fixed colour.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            label: label.into(),
            points,
            colour: None,
        }
    }

    /// The same series in colour `c`.
    #[must_use]
    pub fn with_colour(self, c: Colour) -> Self {
        Self {
            colour: Some(c),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_colour_only_when_set() {
        let s = Series::new("a", vec![(1.0, 2.5)]);
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"label":"a","points":[[1.0,2.5]]}"#
        );
        let s = s.with_colour(Colour::RED);
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"label":"a","points":[[1.0,2.5]],"colour":[255,0,0]}"#
        );
    }
}
