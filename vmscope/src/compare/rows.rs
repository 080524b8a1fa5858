//! The comparison itself: each metric's values per side, the statistics
//! (Welch's t-test) and verdicts, the rows and the report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    exit,
    model::metrics::{Better, RunMetric},
    stats::{self, WelchTest},
    units::fmt_value,
};

use super::{ALPHA, COMPARE_KIND, CONFIDENCE, HistogramSides};

/// Whether a statistical test is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Statistics {
    /// Welch's t-test on the per-run values, 95% CI of the difference.
    Welch,
    /// Single values compared.
    None,
}

/// The values of one metric over one side's runs, in run order.
#[derive(Clone, Debug, PartialEq)]
pub struct Values {
    pub unit: String,
    pub better: Better,
    pub values: Vec<f64>,
}

/// Each metric's values over the runs (a metric missing from a run is taken
/// over the runs that have it).
pub fn collect(runs: &[Vec<RunMetric>]) -> BTreeMap<String, Values> {
    let mut out: BTreeMap<String, Values> = BTreeMap::new();
    for rm in runs.iter().flatten() {
        out.entry(rm.name.clone())
            .or_insert_with(|| Values {
                unit: rm.unit.clone(),
                better: rm.better,
                values: Vec::new(),
            })
            .values
            .push(rm.value);
    }
    out
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SideInfo {
    pub path: String,
    pub name: String,
    /// "recording" or "bench".
    pub kind: &'static str,
    pub runs: usize,
    /// How the rmap rows were measured (first run), e.g. "stack sampling".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rmap_method: Option<String>,
}

/// One side of one row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SideStats {
    /// The plain mean of `values` (for one value, that value).
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for one value.
    pub stddev: f64,
    pub n: usize,
    pub values: Vec<f64>,
}

impl SideStats {
    pub(super) fn of(values: &[f64]) -> Self {
        Self {
            mean: stats::mean(values),
            stddev: stats::stddev(values),
            n: values.len(),
            values: values.to_vec(),
        }
    }
}

/// What a change means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Better, significantly (or single values that differ).
    Win,
    /// Worse, significantly (or single values that differ).
    Loss,
    /// Changed significantly, for a metric with no better direction.
    Change,
    /// Changed, but not significantly.
    Noise,
    /// Exactly the same.
    Same,
}

/// The verdict on a difference NEW - BASE.
pub fn verdict(better: Better, diff: f64, significant: bool) -> Verdict {
    if diff == 0.0 {
        return Verdict::Same;
    }
    if !significant {
        return Verdict::Noise;
    }
    match (better, diff > 0.0) {
        (Better::Lower, false) | (Better::Higher, true) => Verdict::Win,
        (Better::Lower, true) | (Better::Higher, false) => Verdict::Loss,
        (Better::Neither, _) => Verdict::Change,
    }
}

/// A percentage for people: no decimals from 100 on.
pub(super) fn pct(p: f64) -> String {
    if p.abs() >= 100.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// A signed percentage ("+12.3%", "-4.0%").
pub(super) fn signed_pct(p: f64) -> String {
    if p >= 0.0 {
        format!("+{}", pct(p))
    } else {
        pct(p)
    }
}

/// "12.3% win", "4.0% loss", "12.3% more" (no better direction), "within
/// noise", "~" (no difference at all). `change_pct` is None when BASE is 0.
pub fn verdict_text(v: Verdict, diff: f64, change_pct: Option<f64>) -> String {
    let word = match v {
        Verdict::Win => "win",
        Verdict::Loss => "loss",
        Verdict::Change if diff > 0.0 => "more",
        Verdict::Change => "less",
        Verdict::Noise => return "within noise".into(),
        Verdict::Same => return "~".into(),
    };
    match change_pct {
        Some(c) => format!("{} {word}", pct(c.abs())),
        None => format!("{word} (from 0)"),
    }
}

/// Whether a row fails `--fail-on-regression`: a significant loss larger
/// than `threshold` percent (a loss from a BASE of 0 is always larger).
pub fn is_regression(v: Verdict, change_pct: Option<f64>, threshold: f64) -> bool {
    v == Verdict::Loss && change_pct.is_none_or(|c| c.abs() > threshold)
}

/// One metric compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Row")]
pub struct MetricRow {
    pub metric: String,
    pub unit: String,
    pub better: Better,
    pub base: SideStats,
    pub new: SideStats,
    /// mean(NEW) - mean(BASE).
    pub diff: f64,
    /// `diff` in percent of |mean(BASE)|; None when BASE is 0 and NEW is not.
    pub change_pct: Option<f64>,
    /// None without statistics (or with fewer than two values on a side).
    pub test: Option<WelchTest>,
    /// The confidence interval in percent of |mean(BASE)|.
    pub ci_low_pct: Option<f64>,
    pub ci_high_pct: Option<f64>,
    /// p < 0.05; without a test, whether the values differ at all.
    pub significant: bool,
    pub verdict: Verdict,
    pub verdict_text: String,
    /// A significant loss beyond the threshold.
    pub regression: bool,
}

/// Percent of `base`, or None when `base` is 0 (and `x` is not).
pub(super) fn pct_of(x: f64, base: f64) -> Option<f64> {
    if base != 0.0 {
        Some(x / base.abs() * 100.0)
    } else if x == 0.0 {
        Some(0.0)
    } else {
        None
    }
}

use crate::model::catalogue::by_rank;

/// The rows: every metric present on both sides, in display order.
pub fn build_rows(
    base: &BTreeMap<String, Values>,
    new: &BTreeMap<String, Values>,
    statistics: Statistics,
    threshold: f64,
) -> Vec<MetricRow> {
    let mut names: Vec<&String> = base.keys().filter(|k| new.contains_key(*k)).collect();
    names.sort_by(|a, b| by_rank(a, b));
    names
        .into_iter()
        .filter_map(|name| {
            let (b, n) = (base.get(name)?, new.get(name)?);
            if b.values.is_empty() || n.values.is_empty() {
                return None;
            }
            Some(row(name, b, n, statistics, threshold))
        })
        .collect()
}

pub(super) fn row(
    name: &str,
    b: &Values,
    n: &Values,
    statistics: Statistics,
    threshold: f64,
) -> MetricRow {
    let (bs, ns) = (SideStats::of(&b.values), SideStats::of(&n.values));
    let diff = ns.mean - bs.mean;
    let change_pct = pct_of(diff, bs.mean);
    let test = match statistics {
        Statistics::Welch => stats::welch(&b.values, &n.values, CONFIDENCE),
        Statistics::None => None,
    };
    // Without a test (single values) any difference counts.
    let significant = test.as_ref().map_or(diff != 0.0, |t| t.p < ALPHA);
    let v = verdict(b.better, diff, significant);
    MetricRow {
        metric: name.to_owned(),
        unit: b.unit.clone(),
        better: b.better,
        ci_low_pct: test.as_ref().and_then(|t| pct_of(t.ci_low, bs.mean)),
        ci_high_pct: test.as_ref().and_then(|t| pct_of(t.ci_high, bs.mean)),
        base: bs,
        new: ns,
        diff,
        change_pct,
        test,
        significant,
        verdict: v,
        verdict_text: verdict_text(v, diff, change_pct),
        regression: is_regression(v, change_pct, threshold),
    }
}

/// The metrics of the rows that are regressions.
pub fn regressions(rows: &[MetricRow]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.regression)
        .map(|r| r.metric.clone())
        .collect()
}

/// 1 when asked to fail on a regression and there is one, else 0. `gate`:
/// `None` when not asked; `Some` of the metrics that can fail the run, all
/// of them when empty.
pub fn exit_code(rows: &[MetricRow], gate: Option<&Vec<String>>) -> u8 {
    let gated = |r: &MetricRow| gate.is_some_and(|g| g.is_empty() || g.contains(&r.metric));
    if rows.iter().any(|r| r.regression && gated(r)) {
        exit::FAILURE
    } else {
        0
    }
}

/// The whole comparison; also the `--format json` object.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Report {
    #[schemars(extend("const" = COMPARE_KIND))]
    pub kind: &'static str,
    pub schema_version: u32,
    pub base: SideInfo,
    pub new: SideInfo,
    /// "welch" or "none".
    pub statistics: Statistics,
    pub confidence: f64,
    pub alpha: f64,
    /// What is compared: the plain mean of each side's runs.
    pub comparison: &'static str,
    pub threshold_pct: f64,
    pub rows: Vec<MetricRow>,
    /// The metrics of the rows that are regressions.
    pub regressions: Vec<String>,
    /// Each latency histogram with samples on both sides, its buckets summed
    /// over each side's runs (what `report` overlays). Absent when there is
    /// none; older readers ignore it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<String, HistogramSides>,
    /// Metrics only one side has (a madvise behaviour used on one side
    /// only, a probe attached on one side only): not compared, listed.
    pub one_sided: Vec<OneSided>,
}

/// A metric that only one side has.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct OneSided {
    pub metric: String,
    pub unit: String,
    /// Which side has it: true for NEW.
    pub new: bool,
    /// Its mean over that side's runs.
    pub mean: f64,
}

/// The metrics present on one side only, in row order.
pub fn one_sided(base: &BTreeMap<String, Values>, new: &BTreeMap<String, Values>) -> Vec<OneSided> {
    let only = |a: &BTreeMap<String, Values>, b: &BTreeMap<String, Values>, is_new: bool| {
        a.iter()
            .filter(|(k, v)| !b.contains_key(*k) && !v.values.is_empty())
            .map(|(k, v)| OneSided {
                metric: k.clone(),
                unit: v.unit.clone(),
                new: is_new,
                mean: stats::mean(&v.values),
            })
            .collect::<Vec<_>>()
    };
    let mut out = only(base, new, false);
    out.extend(only(new, base, true));
    out.sort_by(|a, b| by_rank(&a.metric, &b.metric).then(a.new.cmp(&b.new)));
    out
}

/// "only in BASE: x (1.0 ms); only in NEW: y (2)", or nothing.
pub fn one_sided_line(r: &Report) -> Option<String> {
    let list = |new: bool| {
        r.one_sided
            .iter()
            .filter(|o| o.new == new)
            .map(|o| format!("{} ({})", o.metric, fmt_value(o.mean, &o.unit)))
            .collect::<Vec<_>>()
    };
    let parts: Vec<String> = [("BASE", list(false)), ("NEW", list(true))]
        .into_iter()
        .filter(|(_, l)| !l.is_empty())
        .map(|(side, l)| format!("only in {side}: {}", l.join(", ")))
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}
