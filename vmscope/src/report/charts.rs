//! The plot shapes of every report layout, each drawn as SVG text: lines
//! over time, log2 histograms, run values per run, a metric's run values
//! with its trimmed mean and median, BASE/NEW bars with error bars, and two
//! histograms overlaid.
//!
//! Input files may hold any finite number, and plotters 0.3 computes its
//! axis ticks in a loop that never ends on an axis whose width is not
//! finite (a value near 1e308, padded by 15%, is infinite). So only values
//! within ±[`MAX_DRAWN`] are drawn; any other is left out and the plot's
//! caption says how many were, and every axis range goes through [`axis`].

use plotters::{
    coord::types::RangedCoordf64,
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use crate::{
    model::hist::Summary,
    units::{fmt_ns, fmt_value},
};

/// Plot size in pixels.
pub const W: u32 = 640;
pub const H: u32 = 260;

/// The size of a distribution (strip) plot.
pub const STRIP: (u32, u32) = (420, 120);

/// The size of a BASE/NEW bar plot.
pub const BARS: (u32, u32) = (320, 260);

/// BASE and NEW in every comparison plot.
pub const BASE_COLOR: RGBColor = RGBColor(31, 119, 180);
pub const NEW_COLOR: RGBColor = RGBColor(255, 127, 14);

/// The trimmed mean and the median in a distribution plot.
pub const MEAN_COLOR: RGBColor = RGBColor(200, 0, 0);
pub const MEDIAN_COLOR: RGBColor = RGBColor(0, 140, 0);

/// The largest magnitude drawn. Far beyond any measurement (counters are
/// 64-bit), and small enough that sums, differences and padding of such
/// values stay finite.
pub const MAX_DRAWN: f64 = 1e100;

/// Whether `v` is drawn.
pub fn drawable(v: f64) -> bool {
    v.is_finite() && v.abs() <= MAX_DRAWN
}

/// `title`, noting the values that were left out.
fn noted(title: &str, dropped: usize) -> String {
    match dropped {
        0 => title.to_owned(),
        1 => format!("{title} (1 value out of range, not drawn)"),
        n => format!("{title} ({n} values out of range, not drawn)"),
    }
}

/// An axis range plotters can draw: finite ends, `lo < hi`, a finite
/// width; anything else becomes a unit range around what is usable.
fn axis(lo: f64, hi: f64) -> std::ops::Range<f64> {
    if drawable(lo) && drawable(hi) && lo < hi {
        lo..hi
    } else if drawable(lo) {
        lo..lo + lo.abs().max(1.0)
    } else {
        0.0..1.0
    }
}

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a plot: {e:?}")
}

/// A compact tick label.
fn tick(v: f64) -> String {
    if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Events marked on a time axis (OOM kills).
pub const MARK_COLOR: RGBColor = RGBColor(200, 0, 0);

/// An event on a time axis: a vertical line at `x` seconds, labelled.
pub struct Mark {
    pub x: f64,
    pub label: String,
}

/// A line plot of (seconds, value) points, with `marks` as vertical lines.
pub fn line_plot(
    title: &str,
    unit: &str,
    points: &[(f64, f64)],
    marks: &[Mark],
) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let kept: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|&(x, y)| drawable(x) && drawable(y))
            .collect();
        let marks: Vec<&Mark> = marks.iter().filter(|m| drawable(m.x)).collect();
        let x_max = kept
            .iter()
            .map(|p| p.0)
            .chain(marks.iter().map(|m| m.x))
            .fold(1.0, f64::max);
        let y_max = kept.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(noted(title, points.len() - kept.len()), ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d(axis(0.0, x_max), axis(0.0, y_max))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(unit)
            .y_label_formatter(&|v| tick(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_err)?;
        chart
            .draw_series(LineSeries::new(kept, &BLUE))
            .map_err(plot_err)?;
        for m in marks {
            draw_mark(&mut chart, m, x_max, y_max)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// One [`Mark`]: its line over the whole height, its label at the top,
/// left of the line in the right part of the plot so it stays inside.
fn draw_mark<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    m: &Mark,
    x_max: f64,
    y_max: f64,
) -> anyhow::Result<()> {
    chart
        .draw_series(std::iter::once(PathElement::new(
            [(m.x, 0.0), (m.x, y_max)],
            MARK_COLOR.stroke_width(2),
        )))
        .map_err(plot_err)?;
    let h = if m.x > x_max * 0.6 {
        HPos::Right
    } else {
        HPos::Left
    };
    let style = TextStyle::from(("sans-serif", 12).into_font())
        .color(&MARK_COLOR)
        .pos(Pos::new(h, VPos::Top));
    chart
        .draw_series(std::iter::once(Text::new(
            format!(" {} ", m.label),
            (m.x, y_max),
            style,
        )))
        .map_err(plot_err)?;
    Ok(())
}

/// The buckets from the first non-empty to the last of any of `sides`.
fn bucket_span(sides: &[&Summary]) -> Vec<u64> {
    let mut les: Vec<u64> = sides
        .iter()
        .flat_map(|s| s.buckets.iter().filter(|b| b.count > 0).map(|b| b.le_ns))
        .collect();
    les.sort_unstable();
    les.dedup();
    let (Some(&lo), Some(&hi)) = (les.first(), les.last()) else {
        return Vec::new();
    };
    // Every log2 bound in between, so gaps show.
    let mut out = vec![lo];
    let mut le = lo;
    while le < hi {
        le = le.saturating_mul(2).saturating_add(1);
        out.push(le);
    }
    out
}

fn count_at(s: &Summary, le: u64) -> u64 {
    s.buckets
        .iter()
        .find(|b| b.le_ns == le)
        .map_or(0, |b| b.count)
}

/// A bar chart of a log2 latency histogram: one bar per bucket from the
/// first non-empty to the last (gaps shown), counts on a log axis so a tail
/// of a few samples stays visible next to a peak of thousands.
pub fn histogram_plot(title: &str, s: &Summary) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let span = bucket_span(&[s]);
        let n = span.len().max(1);
        let y_max = s.buckets.iter().map(|b| b.count).max().unwrap_or(1).max(1) as f64 * 2.0;
        let labels: Vec<String> = span.iter().map(|&le| format!("≤{}", fmt_ns(le))).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, (0.5..y_max).log_scale())
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n.min(12))
            .x_label_formatter(&|v| slot_label(&labels, *v))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .y_desc("count (log)")
            .draw()
            .map_err(plot_err)?;
        chart
            .draw_series(span.iter().enumerate().filter_map(|(i, &le)| {
                let c = count_at(s, le);
                let x = i as f64;
                (c > 0)
                    .then(|| Rectangle::new([(x - 0.45, 0.5), (x + 0.45, c as f64)], BLUE.filled()))
            }))
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// The label of slot `v` (0, 1, ...) on an axis of slots; nothing between.
fn slot_label<S: AsRef<str>>(labels: &[S], v: f64) -> String {
    let i = v.round();
    if (v - i).abs() < 1e-6 && i >= 0.0 {
        labels
            .get(i as usize)
            .map(|l| l.as_ref().to_owned())
            .unwrap_or_default()
    } else {
        String::new()
    }
}

/// One named series of per-run values (None: the run lacks the figure).
pub struct RunSeries<'a> {
    pub label: &'a str,
    pub color: RGBColor,
    pub values: Vec<Option<f64>>,
}

/// Values per run (run 1, 2, ...) as lines with points, one line per series.
pub fn per_run_plot(title: &str, unit: &str, series: &[RunSeries]) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let runs = series
            .iter()
            .map(|s| s.values.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let all = || {
            series
                .iter()
                .flat_map(|s| s.values.iter().flatten().copied())
        };
        let dropped = all().filter(|v| !drawable(*v)).count();
        let y_max = all().filter(|v| drawable(*v)).fold(0.0, f64::max);
        let y_max = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
        let mut chart = ChartBuilder::on(&root)
            .caption(noted(title, dropped), ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d(axis(0.5, runs as f64 + 0.5), axis(0.0, y_max))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("run")
            .y_desc(unit)
            .x_labels(runs.min(20))
            .x_label_formatter(&|v| {
                if v.fract() == 0.0 && *v >= 1.0 {
                    format!("{v:.0}")
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| tick(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_err)?;
        for s in series {
            let points: Vec<(f64, f64)> = s
                .values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| Some((i as f64 + 1.0, (*v).filter(|v| drawable(*v))?)))
                .collect();
            let color = s.color;
            chart
                .draw_series(LineSeries::new(points.iter().copied(), color))
                .map_err(plot_err)?
                .label(s.label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(plot_err)?;
        }
        if series.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK.mix(0.3))
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// A metric's run values as dots along its axis, with the trimmed mean
/// (red line) and the median (green line) marked.
pub fn strip_plot(
    title: &str,
    unit: &str,
    values: &[f64],
    trimmed_mean: f64,
    median: f64,
) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, STRIP).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let all = values.len() + 2;
        let values: Vec<f64> = values.iter().copied().filter(|v| drawable(*v)).collect();
        let marks: Vec<(f64, RGBColor)> = [(trimmed_mean, MEAN_COLOR), (median, MEDIAN_COLOR)]
            .into_iter()
            .filter(|m| drawable(m.0))
            .collect();
        let dropped = all - values.len() - marks.len();
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if !(lo.is_finite() && hi.is_finite()) {
            (0.0, 1.0)
        } else if hi > lo {
            let pad = (hi - lo) * 0.1;
            (lo - pad, hi + pad)
        } else {
            let pad = (lo.abs() * 0.1).max(1.0);
            (lo - pad, hi + pad)
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(noted(title, dropped), ("sans-serif", 13))
            .margin(6)
            .x_label_area_size(22)
            .y_label_area_size(6)
            .build_cartesian_2d(axis(lo, hi), 0.0..1.0)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .x_labels(4)
            .x_label_formatter(&|v| fmt_value(*v, unit))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_err)?;
        for (x, color) in marks {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    [(x, 0.05), (x, 0.95)],
                    color.stroke_width(2),
                )))
                .map_err(plot_err)?;
        }
        let n = values.len().max(1) as f64;
        chart
            .draw_series(values.iter().enumerate().map(|(i, &v)| {
                // Spread the runs vertically so equal values stay apart.
                let y = 0.15 + 0.7 * (i as f64 + 0.5) / n;
                Circle::new((v, y), 4, BLUE.mix(0.7).filled())
            }))
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// One side of a bar plot: the mean, its 95% interval (None: no interval)
/// and the run values.
pub struct Bar<'a> {
    pub label: &'a str,
    pub color: RGBColor,
    pub mean: f64,
    pub ci: Option<(f64, f64)>,
    pub values: &'a [f64],
}

/// BASE and NEW side by side: bars of the means, error bars of their 95%
/// intervals, and the run values as dots.
pub fn bars_plot(title: &str, unit: &str, bars: &[Bar]) -> anyhow::Result<String> {
    // What is drawn of each side: its mean, its interval and its runs, each
    // only when drawable.
    let mut dropped = 0;
    let sides: Vec<_> = bars
        .iter()
        .map(|b| {
            let mean = Some(b.mean).filter(|v| drawable(*v));
            let ci = b.ci.filter(|c| drawable(c.0) && drawable(c.1));
            let values: Vec<f64> = b.values.iter().copied().filter(|v| drawable(*v)).collect();
            dropped += usize::from(mean.is_none())
                + usize::from(b.ci.is_some() && ci.is_none())
                + (b.values.len() - values.len());
            (b, mean, ci, values)
        })
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, BARS).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let ends = |pick: fn((f64, f64)) -> f64| {
            sides.iter().flat_map(move |(_, mean, ci, values)| {
                mean.iter()
                    .copied()
                    .chain(ci.map(pick))
                    .chain(values.iter().copied())
            })
        };
        let top = ends(|c| c.1).fold(0.0, f64::max);
        let bottom = ends(|c| c.0).fold(0.0, f64::min);
        let top = if top > 0.0 { top * 1.15 } else { 1.0 };
        let bottom = bottom * 1.15;
        let n = bars.len().max(1);
        let labels: Vec<&str> = bars.iter().map(|b| b.label).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(noted(title, dropped), ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(64)
            .build_cartesian_2d(axis(-0.5, n as f64 - 0.5), axis(bottom, top))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|v| slot_label(&labels, *v))
            .y_label_formatter(&|v| fmt_value(*v, unit))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_err)?;
        for (i, (b, mean, ci, values)) in sides.iter().enumerate() {
            let x = i as f64;
            if let Some(mean) = *mean {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x - 0.35, 0.0), (x + 0.35, mean)],
                        b.color.mix(0.75).filled(),
                    )))
                    .map_err(plot_err)?;
                if let Some((lo, hi)) = *ci {
                    chart
                        .draw_series(std::iter::once(ErrorBar::new_vertical(
                            x,
                            lo,
                            mean,
                            hi,
                            BLACK.stroke_width(2),
                            12,
                        )))
                        .map_err(plot_err)?;
                }
            }
            chart
                .draw_series(
                    values
                        .iter()
                        .map(|&v| Circle::new((x, v), 3, BLACK.filled())),
                )
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// Two log2 histograms overlaid: per bucket, each side's share of its own
/// samples (so sides with different run counts compare), on a log axis.
pub fn overlay_plot(title: &str, base: &Summary, new: &Summary) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let span = bucket_span(&[base, new]);
        let n = span.len().max(1);
        let share = |s: &Summary, le: u64| {
            if s.count == 0 {
                0.0
            } else {
                count_at(s, le) as f64 * 100.0 / s.count as f64
            }
        };
        let smallest = span
            .iter()
            .flat_map(|&le| [share(base, le), share(new, le)])
            .filter(|&v| v > 0.0)
            .fold(100.0, f64::min);
        // Never 0 on the log axis, however small a share a hostile count gives.
        let floor = (smallest / 2.0).clamp(1e-30, 1.0);
        let labels: Vec<String> = span.iter().map(|&le| format!("≤{}", fmt_ns(le))).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, (floor..200.0).log_scale())
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n.min(12))
            .x_label_formatter(&|v| slot_label(&labels, *v))
            .y_label_formatter(&|v| format!("{v}%"))
            .y_desc("share of samples (log)")
            .draw()
            .map_err(plot_err)?;
        for (side, label, color, offset) in [
            (base, "BASE", BASE_COLOR, -0.4),
            (new, "NEW", NEW_COLOR, 0.0),
        ] {
            chart
                .draw_series(span.iter().enumerate().filter_map(|(i, &le)| {
                    let v = share(side, le);
                    let x = i as f64 + offset;
                    (v > 0.0).then(|| Rectangle::new([(x, floor), (x + 0.4, v)], color.filled()))
                }))
                .map_err(plot_err)?
                .label(format!("{label} (n={})", side.count))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::hist::Bucket;

    fn summary(buckets: &[(u64, u64)]) -> Summary {
        Summary {
            count: crate::model::hist::saturating_sum(buckets.iter().map(|b| b.1)),
            buckets: buckets
                .iter()
                .map(|&(le_ns, count)| Bucket { le_ns, count })
                .collect(),
            ..Default::default()
        }
    }

    /// Runs `f` on a thread; fails if it takes longer than 10 s (plotters
    /// looping on an infinite axis never returns).
    fn within_time<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{what}: still drawing after 10 s"))
    }

    #[test]
    fn huge_values_are_left_out_and_said_so_never_hang() {
        let big = 1.7e308;
        let svg = within_time("line", move || {
            line_plot(
                "l",
                "per second",
                &[(0.0, 1.0), (1.0, big), (2.0, 3.0)],
                &[],
            )
        })
        .expect("plot");
        assert!(svg.contains("1 value out of range"), "{svg}");
        let svg = within_time("strip", move || {
            strip_plot("s", "s", &[1.0, big, -big, 2.0], big, 1.5)
        })
        .expect("plot");
        assert!(svg.contains("3 values out of range"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        let svg = within_time("per run", move || {
            per_run_plot(
                "p",
                "s",
                &[RunSeries {
                    label: "real",
                    color: BLUE,
                    values: vec![Some(big), Some(1.0), None],
                }],
            )
        })
        .expect("plot");
        assert!(svg.contains("1 value out of range"), "{svg}");
        let svg = within_time("bars", move || {
            let values = [big, 1.0];
            bars_plot(
                "b",
                "s",
                &[
                    Bar {
                        label: "BASE",
                        color: BASE_COLOR,
                        mean: big,
                        ci: Some((-big, big)),
                        values: &values,
                    },
                    Bar {
                        label: "NEW",
                        color: NEW_COLOR,
                        mean: 1.0,
                        ci: Some((0.5, 1.5)),
                        values: &[1.0],
                    },
                ],
            )
        })
        .expect("plot");
        assert!(svg.contains("3 values out of range"), "{svg}");
        // Huge bucket counts and a total that disagrees with them.
        let h = Summary {
            count: 1,
            ..summary(&[(1023, u64::MAX), (4095, u64::MAX - 1)])
        };
        let h2 = h.clone();
        within_time("histogram", move || histogram_plot("h", &h2)).expect("plot");
        within_time("overlay", move || {
            overlay_plot("o", &h, &summary(&[(1023, 1)]))
        })
        .expect("plot");
        // Every axis range is one plotters can draw.
        for (lo, hi) in [
            (0.0, f64::INFINITY),
            (-big, big),
            (f64::NAN, 1.0),
            (2.0, 2.0),
            (3.0, 1.0),
        ] {
            let r = axis(lo, hi);
            assert!(
                r.start < r.end && (r.end - r.start).is_finite(),
                "{lo}..{hi}: {r:?}"
            );
        }
    }

    #[test]
    fn a_mark_is_drawn_labelled_even_past_the_last_point() {
        let mark = Mark {
            x: 5.0,
            label: "OOM kill: 7 <x>".into(),
        };
        let svg = line_plot("t", "per second", &[(0.0, 1.0), (1.0, 3.0)], &[mark]).expect("plot");
        assert!(svg.contains("OOM kill: 7 &lt;x&gt;"), "{svg}");
        // Its line, in its colour; the axis reaches it.
        assert!(svg.contains("stroke=\"#C80000\""), "{svg}");
        assert!(svg.contains("\n5.0\n"), "{svg}");
        let plain = line_plot("t", "per second", &[(0.0, 1.0), (1.0, 3.0)], &[]).expect("plot");
        assert!(!plain.contains("#C80000"), "{plain}");
    }

    #[test]
    fn bucket_span_fills_the_gaps_between_both_sides() {
        let a = summary(&[(1023, 5)]);
        let b = summary(&[(8191, 1)]);
        assert_eq!(bucket_span(&[&a, &b]), [1023, 2047, 4095, 8191]);
        assert!(bucket_span(&[&summary(&[])]).is_empty());
    }

    #[test]
    fn every_shape_draws_an_svg_with_its_marks() {
        let svg = line_plot("t", "per second", &[(0.0, 1.0), (1.0, 3.0)], &[]).expect("plot");
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{svg}"
        );
        let svg = histogram_plot("h", &summary(&[(1023, 3), (4095, 1)])).expect("plot");
        // Background, plot area, two bars (the empty bucket between has none).
        assert!(svg.matches("<rect").count() >= 3, "{svg}");
        let svg = strip_plot("s", "s", &[1.0, 1.2, 0.9], 1.0, 1.0).expect("plot");
        assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
        let svg = strip_plot("flat", "calls", &[600.0; 3], 600.0, 600.0).expect("plot");
        assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
        let values = [1.0, 1.1];
        let bars = [
            Bar {
                label: "BASE",
                color: BASE_COLOR,
                mean: 1.05,
                ci: Some((0.4, 1.7)),
                values: &values,
            },
            Bar {
                label: "NEW",
                color: NEW_COLOR,
                mean: 2.0,
                ci: None,
                values: &[2.0],
            },
        ];
        let svg = bars_plot("b", "s", &bars).expect("plot");
        // Three run dots, and the error bar's mark of the mean on BASE only.
        assert_eq!(svg.matches("<circle").count(), 4, "{svg}");
        assert_eq!(svg.matches(r#"r="3""#).count(), 3, "{svg}");
        assert!(svg.contains("\nBASE\n") && svg.contains("\nNEW\n"), "{svg}");
        let svg = overlay_plot("o", &summary(&[(1023, 3)]), &summary(&[(2047, 9)])).expect("plot");
        assert!(
            svg.contains("BASE (n=3)") && svg.contains("NEW (n=9)"),
            "{svg}"
        );
        let svg = per_run_plot(
            "p",
            "s",
            &[RunSeries {
                label: "real",
                color: BLUE,
                values: vec![Some(1.0), None, Some(2.0)],
            }],
        )
        .expect("plot");
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
    }
}
