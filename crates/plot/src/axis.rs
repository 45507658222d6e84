//! Axes: where a value is placed (linear, log10 or log2), the range an axis spans, where
//! its ticks go and how they are labelled.
//!
//! Every chart is drawn on plain linear coordinates: a value `v` sits at `v`, `log10 v` or
//! `log2 v`, and the ticks are chosen here and labelled with the value they stand for:
//! - linear: round steps (1, 2 or 5 times a power of ten), about ten of them;
//! - log: powers of ten (at most twelve labelled, lighter lines at 2..9 times them); when
//!   fewer than three are in range, also 2 and 5 times them (or every multiple), and on a
//!   range narrower than a factor of about 3, round linear steps of the values;
//! - log2 (a power-of-two axis, for counts such as senders or threads): whole powers of
//!   two only (at most sixteen labelled), so `1 2 4 8 16`, never `3`.

/// How values are placed along an axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scale {
    /// `v`.
    #[default]
    Linear,
    /// `log10 v`, ticks at powers of ten.
    Log,
    /// `log2 v`, ticks at whole powers of two.
    Log2,
}

/// What a log axis does with values at or below zero, which have no logarithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NonPositive {
    /// Points with such a value are not drawn.
    #[default]
    LeftOut,
    /// They are drawn at the axis floor, which is then half the smallest positive value
    /// (a measured 0 stays visible, below every measured value).
    AtFloor,
}

impl Scale {
    /// Where `v` sits on the drawn axis; `None` when it is not finite or, on a log axis,
    /// not positive.
    pub(crate) fn place(self, v: f64) -> Option<f64> {
        let t = match self {
            Scale::Linear => v,
            Scale::Log if v > 0.0 => v.log10(),
            Scale::Log2 if v > 0.0 => v.log2(),
            Scale::Log | Scale::Log2 => return None,
        };
        t.is_finite().then_some(t)
    }

    /// The value at axis position `t`.
    fn value(self, t: f64) -> f64 {
        match self {
            Scale::Linear => t,
            Scale::Log => 10f64.powf(t),
            Scale::Log2 => t.exp2(),
        }
    }
}

/// A drawn axis: its extent in axis coordinates and where values at or below zero go.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Axis {
    scale: Scale,
    /// Lower end, axis coordinates.
    pub lo: f64,
    /// Upper end, axis coordinates.
    pub hi: f64,
    /// Log axes: the position of values at or below zero (`None`: left out).
    floor: Option<f64>,
    /// A category axis of this many slots (see [`Axis::categories`]).
    slots: Option<usize>,
}

/// Bold (labelled) and light tick positions, axis coordinates.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Ticks {
    pub bold: Vec<f64>,
    pub light: Vec<f64>,
}

impl Axis {
    /// The axis over `values` (non-finite ones ignored). A linear axis starts at zero (or
    /// below, for negative values) and ends 5% above the data. A log axis spans 1/1.2 of
    /// the smallest positive value to 1.2 times the largest; with [`NonPositive::AtFloor`]
    /// and values at or below zero to draw, it starts at the floor: half the smallest
    /// positive value. `headroom` is the fraction of the axis (0 to 0.9) left free above
    /// all that, for a legend.
    pub(crate) fn fit(
        scale: Scale,
        values: impl IntoIterator<Item = f64>,
        non_positive: NonPositive,
        headroom: f64,
    ) -> Axis {
        let finite: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        let (lo, hi, floor) = if scale == Scale::Linear {
            let (lo, hi) = min_max(finite.iter().copied()).unwrap_or((0.0, 1.0));
            let lo = lo.min(0.0);
            let hi = if hi > lo { hi } else { lo + 1.0 };
            (lo, hi + (hi - lo) * 0.05, None)
        } else {
            let positive = finite.iter().copied().filter(|v| *v > 0.0);
            let (min, max) = min_max(positive).unwrap_or((1.0, 1.0));
            let spread = max > min;
            let at_floor = non_positive == NonPositive::AtFloor && finite.iter().any(|v| *v <= 0.0);
            let lo = if at_floor || !spread {
                min / 2.0
            } else {
                min / 1.2
            };
            let hi = if spread { max * 1.2 } else { max * 2.0 };
            let place = |v: f64| scale.place(v).unwrap_or(0.0);
            let (mut lo, hi) = (place(lo), place(hi));
            if scale == Scale::Log2 && lo.ceil() > hi.floor() {
                // Between two powers of two: reach down to the lower one so one is labelled.
                lo = lo.floor();
            }
            (lo, hi, at_floor.then_some(lo))
        };
        Axis {
            scale,
            lo,
            hi: lo + (hi - lo) / (1.0 - headroom.clamp(0.0, 0.9)),
            floor,
            slots: None,
        }
    }

    /// A category axis: `n` slots of width 1 centred on 0..n-1, a tick at each centre
    /// (labelled by the caller).
    pub(crate) fn categories(n: usize) -> Axis {
        Axis {
            scale: Scale::Linear,
            lo: -0.5,
            hi: n.max(1) as f64 - 0.5,
            floor: None,
            slots: Some(n),
        }
    }

    /// Lowers the axis to `t` (axis coordinates) if it is above it.
    pub(crate) fn extend_down(&mut self, t: f64) {
        if t < self.lo {
            self.lo = t;
        }
    }

    /// Where `v` is drawn; `None`: left out (not finite, or not positive on a log axis
    /// that leaves such values out).
    pub(crate) fn position(&self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        self.scale.place(v).or(self.floor)
    }

    /// The ticks (see the module's documentation).
    pub(crate) fn ticks(&self) -> Ticks {
        if let Some(n) = self.slots {
            return Ticks {
                bold: (0..n).map(|i| i as f64).collect(),
                light: Vec::new(),
            };
        }
        match self.scale {
            Scale::Linear => linear_ticks(self.lo, self.hi, 10),
            Scale::Log => self.log10_ticks(),
            Scale::Log2 => {
                let whole: Vec<f64> = whole_numbers(self.lo, self.hi);
                thin(whole, 16)
            }
        }
    }

    fn log10_ticks(&self) -> Ticks {
        let (lo, hi) = (self.lo, self.hi);
        let decades = whole_numbers(lo, hi);
        if decades.len() >= 3 {
            let mut t = thin(decades, 12);
            if t.light.is_empty() {
                for d in (lo.floor() as i32)..=(hi.ceil() as i32) {
                    for m in 2..=9 {
                        let p = (f64::from(m) * 10f64.powi(d)).log10();
                        if (lo..=hi).contains(&p) {
                            t.light.push(p);
                        }
                    }
                }
            }
            return t;
        }
        let mantissas = |ms: &[u32]| -> Vec<f64> {
            let mut out = Vec::new();
            for d in (lo.floor() as i32)..=(hi.ceil() as i32) {
                for &m in ms {
                    let p = (f64::from(m) * 10f64.powi(d)).log10();
                    if (lo..=hi).contains(&p) {
                        out.push(p);
                    }
                }
            }
            out
        };
        let all = mantissas(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        for ms in [&[1, 2, 5][..], &[1, 2, 3, 4, 5, 6, 7, 8, 9][..]] {
            let bold = mantissas(ms);
            if bold.len() >= 3 {
                let light = all.iter().copied().filter(|p| !bold.contains(p)).collect();
                return Ticks { bold, light };
            }
        }
        // Narrower than a factor of about 3: round steps of the values themselves.
        let v = linear_ticks(10f64.powf(lo), 10f64.powf(hi), 5);
        Ticks {
            bold: v
                .bold
                .into_iter()
                .filter_map(|x| Scale::Log.place(x))
                .collect(),
            light: Vec::new(),
        }
    }

    /// The label of the tick at axis position `t`: the value it stands for.
    pub(crate) fn label(&self, t: f64) -> String {
        match self.scale {
            Scale::Linear => {
                let step = linear_step(self.hi - self.lo, 10);
                linear_label(t, step)
            }
            Scale::Log | Scale::Log2 => number(self.scale.value(t)),
        }
    }
}

fn min_max(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    vals.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((v.min(lo), v.max(hi))),
    })
}

/// The integers in `lo..=hi`.
fn whole_numbers(lo: f64, hi: f64) -> Vec<f64> {
    ((lo.ceil() as i64)..=(hi.floor() as i64))
        .map(|i| i as f64)
        .collect()
}

/// At most `max` of `whole` (integers) labelled, every k-th (multiples of k); the rest light.
fn thin(whole: Vec<f64>, max: usize) -> Ticks {
    let k = whole.len().div_ceil(max).max(1) as i64;
    let (bold, light) = whole.into_iter().partition(|&w| (w as i64) % k == 0);
    Ticks { bold, light }
}

/// The smallest round step (1, 2 or 5 times a power of ten) giving at most 1.2 `n`
/// ticks over `span`.
fn linear_step(span: f64, n: u32) -> f64 {
    let raw = span / (1.2 * f64::from(n));
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let e = 10f64.powf(raw.log10().floor());
    let f = raw / e;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * e
}

fn linear_ticks(lo: f64, hi: f64, n: u32) -> Ticks {
    let step = linear_step(hi - lo, n);
    let sub = if (step / 10f64.powf(step.log10().floor()) - 2.0).abs() < 1e-9 {
        step / 4.0
    } else {
        step / 5.0
    };
    let at = |s: f64| -> Vec<f64> {
        ((lo / s).ceil() as i64..=(hi / s).floor() as i64)
            .map(|k| k as f64 * s)
            .collect()
    };
    let bold = at(step);
    let light = at(sub)
        .into_iter()
        .filter(|x| bold.iter().all(|b| (b - x).abs() > sub * 1e-6))
        .collect();
    Ticks { bold, light }
}

/// A linear tick's label: as many decimals as the step needs (`0.4`, `140000`), or an
/// exponent from a million up (`1.4e6`).
fn linear_label(v: f64, step: f64) -> String {
    let a = v.abs();
    if a < step * 1e-6 {
        return "0".into();
    }
    let step_exp = step.log10().floor() as i32;
    if a >= 1e6 {
        let digits = (a.log10().floor() as i32 - step_exp).max(0) as usize;
        return exp_label(&format!("{v:.digits$e}"));
    }
    let decimals = (-step_exp).max(0) as usize;
    format!("{v:.decimals$}")
}

/// A value with three significant digits and no trailing zeros (`0.2`, `20000`, `1.5e6`,
/// `1e-4`): the labels of log ticks.
pub(crate) fn number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        return exp_label(&format!("{v:.2e}"));
    }
    let decimals = (2 - a.log10().floor() as i32).max(0) as usize;
    trim_zeros(&format!("{v:.decimals$}")).to_owned()
}

/// `1.50e6` as `1.5e6`.
fn exp_label(s: &str) -> String {
    match s.split_once('e') {
        Some((m, e)) => format!("{}e{e}", trim_zeros(m)),
        None => s.to_owned(),
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(a: &Axis) -> Vec<String> {
        a.ticks().bold.iter().map(|&t| a.label(t)).collect()
    }

    #[test]
    fn log2_axis_places_at_log2_and_labels_whole_powers_only() {
        let a = Axis::fit(Scale::Log2, [1.0, 3.0, 32.0], NonPositive::LeftOut, 0.0);
        assert_eq!(a.position(8.0), Some(3.0));
        assert_eq!(a.position(3.0), Some(3f64.log2()));
        assert_eq!(labels(&a), ["1", "2", "4", "8", "16", "32"]);
        // A range between two powers of two reaches down to the lower one.
        let a = Axis::fit(Scale::Log2, [2.5, 3.0], NonPositive::LeftOut, 0.0);
        assert_eq!(labels(&a), ["2"]);
        // Many powers: at most 16 labelled, the others light.
        let a = Axis::fit(Scale::Log2, [1.0, 2f64.powi(40)], NonPositive::LeftOut, 0.0);
        let t = a.ticks();
        assert!(t.bold.len() <= 16 && t.bold.len() >= 10, "{t:?}");
        assert!(t.bold.iter().all(|b| b.fract() == 0.0));
        assert_eq!(t.bold.len() + t.light.len(), 41);
    }

    #[test]
    fn log_axis_leaves_out_or_floors_non_positive_values() {
        let vals = [0.0, -3.0, 4.0, 100.0];
        let out = Axis::fit(Scale::Log, vals, NonPositive::LeftOut, 0.0);
        assert_eq!(out.position(0.0), None);
        assert_eq!(out.position(-3.0), None);
        assert!((out.lo - (4.0f64 / 1.2).log10()).abs() < 1e-12);
        let floor = Axis::fit(Scale::Log, vals, NonPositive::AtFloor, 0.0);
        // The floor is half the smallest positive value; non-positive values sit on it.
        assert!((floor.lo - 2f64.log10()).abs() < 1e-12);
        assert_eq!(floor.position(0.0), Some(floor.lo));
        assert_eq!(floor.position(-3.0), Some(floor.lo));
        assert_eq!(floor.position(100.0), Some(2.0));
        assert_eq!(floor.position(f64::NAN), None);
        // Without values at or below zero there is nothing to draw at a floor.
        let positive = Axis::fit(Scale::Log, [4.0, 100.0], NonPositive::AtFloor, 0.0);
        assert_eq!(
            positive,
            Axis {
                floor: None,
                ..out.clone()
            }
        );
        // Headroom: the top quarter of the axis is free.
        let room = Axis::fit(Scale::Log, vals, NonPositive::AtFloor, 0.25);
        let data_top = 120f64.log10();
        assert!(((data_top - room.lo) / (room.hi - room.lo) - 0.75).abs() < 1e-12);
    }

    #[test]
    fn log_ticks_are_powers_of_ten_or_round_values() {
        let a = Axis::fit(Scale::Log, [1.0, 1000.0], NonPositive::LeftOut, 0.0);
        assert_eq!(labels(&a), ["1", "10", "100", "1000"]);
        assert!(!a.ticks().light.is_empty());
        // Fewer than three powers of ten: 1, 2, 5 times them.
        let a = Axis::fit(Scale::Log, [0.004, 0.3], NonPositive::LeftOut, 0.0);
        assert_eq!(labels(&a), ["0.005", "0.01", "0.02", "0.05", "0.1", "0.2"]);
        let a = Axis::fit(Scale::Log, [5.5, 18.0], NonPositive::LeftOut, 0.0);
        assert_eq!(labels(&a), ["5", "10", "20"]);
        // Narrower still: round steps.
        let a = Axis::fit(Scale::Log, [18000.0, 20000.0], NonPositive::LeftOut, 0.0);
        let l = labels(&a);
        assert!(l.len() >= 3 && l.contains(&"20000".to_owned()), "{l:?}");
    }

    #[test]
    fn linear_axis_starts_at_zero_with_round_ticks() {
        let a = Axis::fit(Scale::Linear, [3.0, 9.5], NonPositive::LeftOut, 0.0);
        assert_eq!(a.lo, 0.0);
        assert!((a.hi - 9.5 * 1.05).abs() < 1e-12);
        assert_eq!(
            labels(&a),
            ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]
        );
        let a = Axis::fit(Scale::Linear, [0.0, 1.0], NonPositive::LeftOut, 0.3);
        assert!((a.hi - 1.5).abs() < 1e-12);
        assert_eq!(labels(&a)[1..4], ["0.2", "0.4", "0.6"]);
        let a = Axis::fit(Scale::Linear, [0.0, 1.5e7], NonPositive::LeftOut, 0.0);
        assert_eq!(labels(&a)[..3], ["0", "2e6", "4e6"]);
        // No data: 0..1.
        let a = Axis::fit(Scale::Linear, [], NonPositive::LeftOut, 0.0);
        assert_eq!(labels(&a).len(), 11);
        assert_eq!(labels(&a)[..3], ["0", "0.1", "0.2"]);
    }

    #[test]
    fn numbers_have_three_significant_digits() {
        assert_eq!(number(0.19999999999999998), "0.2");
        assert_eq!(number(19999.999999999996), "20000");
        assert_eq!(number(1.0), "1");
        assert_eq!(number(1234.6), "1235");
        assert_eq!(number(12.345), "12.3");
        assert_eq!(number(1.5e6), "1.5e6");
        assert_eq!(number(1e-4), "1e-4");
        assert_eq!(number(0.0), "0");
    }
}
