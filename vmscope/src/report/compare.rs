//! The comparison layout, from `compare --format json` or from BASE and
//! NEW compared as `vmscope compare` does: the table (BASE, NEW, change,
//! 95% CI, p, verdict), side-by-side bars of the headline metrics with 95%
//! error bars, and every latency histogram of both sides overlaid.

use crate::units::fmt_value;
use std::{collections::BTreeMap, fmt::Write as _};

use serde::Deserialize;

use super::{Plot, charts, figures, html_escape, meta_table, recording};
use crate::compare::{
    self, COMPARE_KIND, COMPARE_SCHEMA_VERSION, HistogramSides, MetricRow, SideStats, Statistics,
    Verdict,
};

/// Whether a metric is drawn as bars (when both sides have it): the
/// headline times, maxrss and the main VM figures.
fn is_bar(metric: &str) -> bool {
    crate::model::catalogue::headline().any(|m| m == metric)
        || metric == "maxrss"
        || crate::model::metrics::main_vm().any(|m| m == metric)
}

/// One side as the compare output names it.
#[derive(Clone, Debug, Deserialize)]
pub struct Side {
    pub path: String,
    pub name: String,
    pub kind: String,
    pub runs: usize,
}

/// The `compare --format json` object, as read back (its kind and version
/// checked first).
#[derive(Clone, Debug, Deserialize)]
pub struct Doc {
    pub base: Side,
    pub new: Side,
    pub statistics: Statistics,
    pub confidence: f64,
    pub threshold_pct: f64,
    pub rows: Vec<MetricRow>,
    pub regressions: Vec<String>,
    /// Absent from outputs that predate it: then there are no overlays.
    #[serde(default)]
    pub histograms: BTreeMap<String, HistogramSides>,
}

/// Reads compare's JSON, checking its kind and version first.
pub fn from_str(text: &str) -> anyhow::Result<Doc> {
    use anyhow::Context as _;
    let v: serde_json::Value = serde_json::from_str(text).context("invalid JSON")?;
    if v.get("kind").and_then(serde_json::Value::as_str) != Some(COMPARE_KIND) {
        anyhow::bail!("no \"kind\": \"{COMPARE_KIND}\" field");
    }
    match v.get("schema_version").and_then(serde_json::Value::as_u64) {
        Some(n) if n == u64::from(COMPARE_SCHEMA_VERSION) => {}
        Some(n) => anyhow::bail!(
            "schema_version {n} is not supported (this vmscope reads {COMPARE_SCHEMA_VERSION})"
        ),
        None => anyhow::bail!("no schema_version field"),
    }
    let doc: Doc = serde_json::from_value(v).context("fields do not match the compare schema")?;
    // The intervals drawn are Student's t quantiles at this level, which
    // exist only strictly between 0 and 1.
    if !(doc.confidence > 0.0 && doc.confidence < 1.0) {
        anyhow::bail!(
            "confidence {} is not a probability between 0 and 1",
            doc.confidence
        );
    }
    Ok(doc)
}

/// The comparison `vmscope compare` made, in the shape it prints.
pub fn from_report(r: &compare::Report) -> anyhow::Result<Doc> {
    Ok(serde_json::from_value(serde_json::to_value(r)?)?)
}

/// The 95% interval of one side's mean (Student's t on its runs), or None
/// with fewer than two runs.
pub fn mean_interval(s: &SideStats, confidence: f64) -> Option<(f64, f64)> {
    crate::stats::mean_interval(s.mean, s.stddev, s.n, confidence)
}

fn signed_pct(p: f64) -> String {
    let digits = if p.abs() >= 100.0 { 0 } else { 1 };
    format!("{p:+.digits$}%")
}

/// The change as the table shows it.
fn change(r: &MetricRow) -> String {
    r.change_pct.map_or_else(
        || format!("+{} (from 0)", fmt_value(r.diff, &r.unit)),
        signed_pct,
    )
}

/// The 95% CI of the change, in percent of BASE when BASE is not 0.
fn interval(r: &MetricRow) -> String {
    match (&r.test, r.ci_low_pct, r.ci_high_pct) {
        (Some(_), Some(lo), Some(hi)) => format!("[{}, {}]", signed_pct(lo), signed_pct(hi)),
        (Some(t), _, _) => format!(
            "[{}, {}]",
            fmt_value(t.ci_low, &r.unit),
            fmt_value(t.ci_high, &r.unit)
        ),
        (None, _, _) => "-".into(),
    }
}

fn p_value(r: &MetricRow) -> String {
    match &r.test {
        Some(t) if t.p < 0.001 => "<0.001".into(),
        Some(t) => format!("{:.3}", t.p),
        None => "-".into(),
    }
}

pub fn plots(d: &Doc) -> anyhow::Result<Vec<Plot>> {
    let mut out = Vec::new();
    for r in d.rows.iter().filter(|r| is_bar(&r.metric)) {
        if r.base.mean == 0.0 && r.new.mean == 0.0 {
            continue;
        }
        let side = |label, color, s: &SideStats| charts::Bar {
            label,
            color,
            mean: s.mean,
            ci: mean_interval(s, d.confidence),
            values: &[],
        };
        let mut bars = [
            side("BASE", charts::BASE_COLOR, &r.base),
            side("NEW", charts::NEW_COLOR, &r.new),
        ];
        bars[0].values = &r.base.values;
        bars[1].values = &r.new.values;
        let title = match &r.test {
            Some(_) => format!(
                "change {}, 95% CI {}, p {}: {}",
                change(r),
                interval(r),
                p_value(r),
                r.verdict_text
            ),
            None => format!("change {}: {}", change(r), r.verdict_text),
        };
        out.push(Plot {
            id: format!("bars-{}", r.metric),
            title,
            svg: charts::bars_plot(&format!("{} ({})", r.metric, r.unit), &r.unit, &bars)?,
        });
    }
    for (name, h) in &d.histograms {
        out.push(Plot {
            id: format!("overlay-{name}"),
            title: format!(
                "BASE {}; NEW {}",
                recording::quantiles(name, &h.base),
                recording::quantiles(name, &h.new)
            ),
            svg: charts::overlay_plot(&format!("{name} latency, BASE vs NEW"), &h.base, &h.new)?,
        });
    }
    Ok(out)
}

pub fn title(d: &Doc) -> String {
    format!("vmscope compare: {} vs {}", d.base.name, d.new.name)
}

fn method(d: &Doc) -> String {
    let threshold = format!("{:.1}%", d.threshold_pct);
    match d.statistics {
        Statistics::Welch => format!(
            "Welch's t-test on the plain means of the runs, {:.0}% CI of the difference; \
             significant when p < {}; regressions beyond {threshold}. Error bars: the {:.0}% \
             interval of each side's mean; dots: the runs.",
            d.confidence * 100.0,
            compare::ALPHA,
            d.confidence * 100.0
        ),
        Statistics::None => format!(
            "No statistics: single values compared (bench files of 2 or more runs each get \
             Welch's t-test); regressions beyond {threshold}."
        ),
    }
}

fn verdict_class(r: &MetricRow) -> &'static str {
    match (r.regression, r.verdict) {
        (true, _) => "loss regression",
        (_, Verdict::Win) => "win",
        (_, Verdict::Loss) => "loss",
        _ => "",
    }
}

pub fn body(d: &Doc, plots: &[Plot]) -> String {
    let mut s = String::new();
    let side = |x: &Side| {
        format!(
            "{} ({}, {} run{}): {}",
            x.path,
            x.kind,
            x.runs,
            if x.runs == 1 { "" } else { "s" },
            x.name
        )
    };
    s.push_str(&meta_table(&[
        ("BASE", side(&d.base)),
        ("NEW", side(&d.new)),
        ("statistics", method(d)),
        (
            "regressions",
            if d.regressions.is_empty() {
                format!("none beyond {:.1}%", d.threshold_pct)
            } else {
                d.regressions.join(", ")
            },
        ),
    ]));
    let welch = d.statistics == Statistics::Welch;
    let _ = writeln!(
        s,
        "<h2 id=\"table\">Metrics</h2><table><thead><tr><th class=\"l\">metric</th><th>BASE</th>\
         <th>NEW</th><th>change</th>{}<th class=\"l\">verdict</th></tr></thead><tbody>",
        if welch {
            "<th>95% CI</th><th>p</th><th>significant</th>"
        } else {
            ""
        }
    );
    let mean = |x: &SideStats, unit: &str| {
        let m = fmt_value(x.mean, unit);
        if x.n >= 2 {
            format!("{m} ± {}", fmt_value(x.stddev, unit))
        } else {
            m
        }
    };
    for r in &d.rows {
        let stats = if welch {
            format!(
                "<td>{}</td><td>{}</td><td>{}</td>",
                html_escape(&interval(r)),
                html_escape(&p_value(r)),
                if r.significant { "yes" } else { "no" }
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "<tr class=\"{}\"><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>{stats}\
             <td class=\"l verdict\">{}</td></tr>",
            verdict_class(r),
            html_escape(&r.metric),
            html_escape(&mean(&r.base, &r.unit)),
            html_escape(&mean(&r.new, &r.unit)),
            html_escape(&change(r)),
            html_escape(&r.verdict_text)
        );
    }
    let _ = writeln!(s, "</tbody></table>");
    let (bars, overlays): (Vec<&Plot>, Vec<&Plot>) =
        plots.iter().partition(|p| p.id.starts_with("bars-"));
    let _ = writeln!(s, "<h2 id=\"bars\">BASE and NEW</h2>");
    s.push_str(&figures(bars));
    let _ = writeln!(s, "<h2 id=\"overlays\">Latency distributions</h2>");
    if d.histograms.is_empty() {
        let _ = writeln!(
            s,
            "<p>No latency histogram has samples on both sides (or the compare output \
             predates histograms).</p>"
        );
    }
    s.push_str(&figures(overlays));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_interval_is_students_t_on_the_runs() {
        // Values 10, 12, 14: mean 12, s = 2, n = 3; t(0.975, 2 df) = 4.3027;
        // half-width 4.3027 * 2 / sqrt(3) = 4.9683.
        let s = SideStats {
            mean: 12.0,
            stddev: 2.0,
            n: 3,
            values: vec![10.0, 12.0, 14.0],
        };
        let (lo, hi) = mean_interval(&s, 0.95).expect("three runs");
        assert!(
            (lo - 7.0317).abs() < 1e-3 && (hi - 16.9683).abs() < 1e-3,
            "{lo} {hi}"
        );
        let one = SideStats {
            n: 1,
            values: vec![1.0],
            ..s
        };
        assert!(mean_interval(&one, 0.95).is_none());
    }

    #[test]
    fn a_mean_read_back_from_compares_json_is_the_same_number() {
        // 6.035 ms, one ulp below the double nearest 0.006035 s: a parser
        // that is not exact reads the neighbour, and the page showed 6.04 ms
        // from compare's JSON where the page of BASE NEW showed 6.03 ms.
        let mean = f64::from_bits(0x3f78_b827_fa1a_0cf1);
        let text = serde_json::to_string(&mean).expect("a number");
        let back: f64 = serde_json::from_str(&text).expect("parses");
        assert_eq!(back.to_bits(), mean.to_bits(), "{text}");
        let value: serde_json::Value = serde_json::from_str(&text).expect("parses");
        assert_eq!(value.as_f64().map(f64::to_bits), Some(mean.to_bits()));
    }

    #[test]
    fn compare_output_is_read_by_kind_and_version() {
        let e = from_str(r#"{"kind": "vmscope-compare", "schema_version": 99}"#).expect_err("v99");
        assert!(
            format!("{e:#}").contains("schema_version 99 is not supported"),
            "{e:#}"
        );
        let e = from_str(r#"{"kind": "vmscope-compare", "schema_version": 1}"#).expect_err("empty");
        assert!(format!("{e:#}").contains("compare schema"), "{e:#}");
        assert!(from_str(r#"{"schema_version": 1}"#).is_err());
        let e = from_str(r#"{"kind": "vmscope-compare", "#).expect_err("truncated");
        assert!(format!("{e:#}").contains("invalid JSON"), "{e:#}");
        assert_eq!(signed_pct(12.345), "+12.3%");
        assert_eq!(signed_pct(-900.0), "-900%");
    }
}
