//! `vmscope compare BASE NEW`: two recordings, or two bench files, metric by
//! metric: BASE, NEW, the change in percent and a verdict in the words of the
//! kernel lists ("12.3% win", "4.0% loss", "within noise").
//!
//! With at least two runs on each side (bench files), every metric is
//! compared by Welch's t-test on its per-run values: the plain means are
//! compared (not the bench's trimmed mean), with the 95% confidence interval
//! of the difference of means and a change called significant when p < 0.05.
//! Single recordings (or one-run bench files) give single values and no
//! statistics.
//!
//! Latency histograms are compared as whole distributions: their
//! p50/p90/p99 rows show how far each quantile moved.
//!
//! Loading and printing are at the top; everything below `run` is pure.

use crate::model::recording::Recording;
use std::{collections::BTreeMap, fmt::Write as _, path::Path};

use serde::{Deserialize, Serialize};

use crate::{
    cli::{CompareArgs, CompareFormat},
    document::{self},
    exit,
    model::{
        bench::{self, BENCH_KIND, BenchFile},
        hist::{self, Summary},
        metrics::{self, Better, MetricSpec, RunMetric},
    },
    stats::{self, WelchTest},
};

/// Bumped on any incompatible change to the `--format json` object.
pub const COMPARE_SCHEMA_VERSION: u32 = 1;

/// The `kind` of the `--format json` object.
pub const COMPARE_KIND: &str = "vmscope-compare";

/// Confidence level of the interval, and 1 - the significance level.
pub const CONFIDENCE: f64 = 0.95;

/// A difference is significant when its p-value is below this.
pub const ALPHA: f64 = 0.05;

// ---------------------------------------------------------------- input --

/// One side of the comparison as read from its file.
pub enum Input {
    Recording(Box<Recording>),
    Bench(Box<BenchFile>),
}

impl Input {
    fn kind(&self) -> &'static str {
        match self {
            Self::Recording(_) => "recording",
            Self::Bench(_) => "bench",
        }
    }

    fn describe(&self) -> &'static str {
        match self {
            Self::Recording(_) => "a recording",
            Self::Bench(_) => "a bench file",
        }
    }

    fn name(&self) -> String {
        match self {
            Self::Recording(r) => r
                .header
                .command
                .as_ref()
                .map_or_else(|| "system-wide recording".into(), |c| c.join(" ")),
            Self::Bench(b) => b.name.clone(),
        }
    }

    fn rmap_method(&self) -> Option<String> {
        let rec = match self {
            Self::Recording(r) => r.as_ref(),
            Self::Bench(b) => b.runs.first()?,
        };
        rec.totals.vm.rmap.as_ref().map(|r| match r.method {
            crate::model::rmap::Method::StackSampling => {
                format!("stack sampling at {} Hz", r.rate_hz)
            }
            crate::model::rmap::Method::DirectTiming => match (&r.sampled, &r.agreement) {
                (Some(s), Some(a)) => format!(
                    "direct timing (fentry/fexit, calibrated), primary; stack sampling at {} Hz \
                     beside it {}",
                    s.rate_hz,
                    if a.agree { "agrees" } else { "disagrees" }
                ),
                _ => "direct timing (fentry/fexit)".to_string(),
            },
        })
    }

    fn recordings(&self) -> Vec<&Recording> {
        match self {
            Self::Recording(r) => vec![r],
            Self::Bench(b) => b.runs.iter().collect(),
        }
    }

    /// Each run's figures, with the `--metric` ones; a run where one
    /// cannot be read fails, naming the run.
    fn runs(&self, specs: &[MetricSpec]) -> Result<Vec<Vec<RunMetric>>, String> {
        let recs = self.recordings();
        let n = recs.len();
        recs.into_iter()
            .enumerate()
            .map(|(i, r)| {
                metrics::run_metrics_with(r, specs)
                    .and_then(comparable)
                    .map_err(|e| {
                        if n > 1 {
                            format!("run {} of {n}: {e}", i + 1)
                        } else {
                            e
                        }
                    })
            })
            .collect()
    }
}

/// The largest magnitude a metric may have to be compared: far beyond any
/// measurement (counters are 64-bit), and small enough that the sums of
/// squares behind a standard deviation stay finite. A value beyond it (or
/// not finite) is damage, so the file is refused rather than compared
/// into infinities and NaNs.
pub const MAX_MAGNITUDE: f64 = 1e100;

/// A run's figures, unless one of them is beyond [`MAX_MAGNITUDE`].
fn comparable(m: Vec<RunMetric>) -> Result<Vec<RunMetric>, String> {
    match m
        .iter()
        .find(|r| !(r.value.is_finite() && r.value.abs() <= MAX_MAGNITUDE))
    {
        Some(r) => Err(format!(
            "{} is {:e}, beyond what can be compared (at most {MAX_MAGNITUDE:e} in size); \
             the file looks damaged",
            r.name, r.value
        )),
        None => Ok(m),
    }
}

/// One line for the user, naming the file.
pub fn bad_input(msg: String) -> anyhow::Error {
    exit::failure(exit::USAGE, msg.replace('\n', " "))
}

/// Whether `text` is a vmscope document of this `kind`, even a broken one
/// (`kind` is its first field, so it shows in the first bytes).
pub fn has_kind(text: &str, kind: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => v.get("kind").and_then(serde_json::Value::as_str) == Some(kind),
        Err(_) => text
            .get(..text.len().min(256))
            .is_some_and(|head| head.contains(&format!("\"{kind}\""))),
    }
}

/// "FILE is not a vmscope WHAT: why", noting a file that ends too soon; one
/// line, exit 2.
pub fn not_a(path: &Path, what: &str, e: &anyhow::Error) -> anyhow::Error {
    let truncated = e
        .chain()
        .filter_map(|c| c.downcast_ref::<serde_json::Error>())
        .any(serde_json::Error::is_eof);
    let hint = if truncated {
        " (the file looks truncated)"
    } else {
        ""
    };
    bad_input(format!(
        "{} is not a vmscope {what}: {e:#}{hint}",
        path.display()
    ))
}

/// The largest input `compare` and `report` read: a day's recording at a
/// 1 s interval is tens of MB, so a bigger file is a mistake, and its
/// text and parsed form would take several times its size in memory.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Reads the text of an input file of at most [`MAX_INPUT_BYTES`], refusing
/// a larger one in one line before reading it (a regular file by its size,
/// anything else, a pipe say, once that much has been read).
pub fn read_input(path: &Path) -> anyhow::Result<String> {
    read_capped(path, MAX_INPUT_BYTES)
}

fn read_capped(path: &Path, limit: u64) -> anyhow::Result<String> {
    use std::io::Read as _;
    let shown = path.display();
    let cannot = |e: std::io::Error| bad_input(format!("cannot read {shown}: {e}"));
    let too_big = || {
        bad_input(format!(
            "{shown} is larger than the {} MiB vmscope reads; give a recording or a bench file",
            limit >> 20
        ))
    };
    let f = std::fs::File::open(path).map_err(cannot)?;
    let meta = f.metadata().map_err(cannot)?;
    if meta.is_file() && meta.len() > limit {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    f.take(limit + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|e| {
        cannot(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text ({e})"),
        ))
    })
}

/// Reads a recording (JSON or jsonl) or a bench file, telling them apart by
/// the bench file's `"kind": "vmscope-bench"`.
pub fn load(path: &Path) -> anyhow::Result<Input> {
    let text = read_input(path)?;
    parse(path, &text)
}

/// [`load`] on the text of the file at `path` (named in messages).
pub fn parse(path: &Path, text: &str) -> anyhow::Result<Input> {
    let shown = path.display();
    if text.trim().is_empty() {
        return Err(bad_input(format!(
            "{shown} is empty; give a recording or a bench file"
        )));
    }
    let is_bench = has_kind(text, BENCH_KIND);
    let why = |what: &str, e: anyhow::Error| not_a(path, what, &e);
    if is_bench {
        let b = bench::from_str(text).map_err(|e| why("bench file", e))?;
        Ok(Input::Bench(Box::new(b)))
    } else {
        let r = document::from_str(text).map_err(|e| why("recording", e))?;
        Ok(Input::Recording(Box::new(r)))
    }
}

/// `vmscope compare`.
pub fn run(args: &CompareArgs) -> anyhow::Result<u8> {
    if !(args.threshold.is_finite() && args.threshold >= 0.0) {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--threshold {} is not a percentage; give 0 or more",
                args.threshold
            ),
        ));
    }
    let base = load(&args.base)?;
    let new = load(&args.new)?;
    let report = build_report(
        (&args.base, &base),
        (&args.new, &new),
        &args.metric,
        args.threshold,
    )?;
    let text = match args.format {
        CompareFormat::Table => table(&report),
        CompareFormat::Markdown => markdown(&report),
        CompareFormat::Json => json(&report)?,
    };
    print!("{text}");
    Ok(exit_code(&report.rows, args.fail_on_regression))
}

/// The comparison of two loaded inputs of the same kind (bad input, exit
/// 2, otherwise).
pub fn build_report(
    (base_path, base): (&Path, &Input),
    (new_path, new): (&Path, &Input),
    specs: &[MetricSpec],
    threshold: f64,
) -> anyhow::Result<Report> {
    if base.kind() != new.kind() {
        return Err(bad_input(format!(
            "cannot compare {} ({}) with {} ({}); give two recordings or two bench files",
            base_path.display(),
            base.describe(),
            new_path.display(),
            new.describe()
        )));
    }
    let runs = |path: &Path, input: &Input| {
        input
            .runs(specs)
            .map_err(|e| bad_input(format!("{}: {e}", path.display())))
    };
    let (base_runs, new_runs) = (runs(base_path, base)?, runs(new_path, new)?);
    let statistics = if base_runs.len() >= 2 && new_runs.len() >= 2 {
        Statistics::Welch
    } else {
        Statistics::None
    };
    let side = |path: &Path, input: &Input, runs: usize| SideInfo {
        path: path.display().to_string(),
        name: input.name(),
        kind: input.kind(),
        runs,
        rmap_method: input.rmap_method(),
    };
    let (bv, nv) = (collect(&base_runs), collect(&new_runs));
    let rows = build_rows(&bv, &nv, statistics, threshold);
    Ok(Report {
        kind: COMPARE_KIND,
        schema_version: COMPARE_SCHEMA_VERSION,
        base: side(base_path, base, base_runs.len()),
        new: side(new_path, new, new_runs.len()),
        statistics,
        confidence: CONFIDENCE,
        alpha: ALPHA,
        comparison: "mean",
        threshold_pct: threshold,
        regressions: regressions(&rows),
        rows,
        one_sided: one_sided(&bv, &nv),
        histograms: histograms(base, new),
    })
}

/// The comparison `run` makes, for `vmscope report BASE NEW`: the same
/// loading, checks, rows and statistics.
pub fn compare_files(base_path: &Path, new_path: &Path, threshold: f64) -> anyhow::Result<Report> {
    let base = load(base_path)?;
    let new = load(new_path)?;
    build_report((base_path, &base), (new_path, &new), &[], threshold)
}

/// The published JSON Schema of the `--format json` object
/// (`vmscope/schema/`). It describes what `compare` writes (the serialize
/// contract): `histograms` is left out when empty, so it is not required.
pub fn compare_schema() -> serde_json::Value {
    schemars::generate::SchemaSettings::default()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<Report>()
        .to_value()
}

/// One latency histogram on both sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistogramSides {
    pub base: Summary,
    pub new: Summary,
}

/// A side's latency histograms with samples, each summed over its runs.
pub fn merged_histograms(input: &Input) -> BTreeMap<String, Summary> {
    let recordings: Vec<&Recording> = match input {
        Input::Recording(r) => vec![r],
        Input::Bench(b) => b.runs.iter().collect(),
    };
    let mut sums: BTreeMap<&str, (Vec<u64>, u64)> = BTreeMap::new();
    for rec in recordings {
        for (name, s) in &rec.totals.vm.histograms {
            let (dense, sum_ns) = sums
                .entry(name)
                .or_insert_with(|| (vec![0; vmscope_common::HIST_BUCKETS as usize], 0));
            *sum_ns = sum_ns.saturating_add(s.sum_ns);
            for b in &s.buckets {
                // Bucket b's upper bound is 2^b - 1.
                let i = b.le_ns.checked_add(1).map_or(64, u64::trailing_zeros) as usize;
                if let Some(slot) = dense.get_mut(i) {
                    *slot = slot.saturating_add(b.count);
                }
            }
        }
    }
    sums.into_iter()
        .map(|(name, (dense, sum_ns))| (name.to_owned(), hist::summary_of(&dense, sum_ns)))
        .filter(|(_, s)| s.count > 0)
        .collect()
}

/// The histograms both sides have, side by side.
pub fn histograms(base: &Input, new: &Input) -> BTreeMap<String, HistogramSides> {
    let mut new = merged_histograms(new);
    merged_histograms(base)
        .into_iter()
        .filter_map(|(name, b)| {
            let n = new.remove(&name)?;
            Some((name, HistogramSides { base: b, new: n }))
        })
        .collect()
}

// ----------------------------------------------------------------- model --

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
    fn of(values: &[f64]) -> Self {
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
fn pct(p: f64) -> String {
    if p.abs() >= 100.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// A signed percentage ("+12.3%", "-4.0%").
fn signed_pct(p: f64) -> String {
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
pub struct Row {
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
fn pct_of(x: f64, base: f64) -> Option<f64> {
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
) -> Vec<Row> {
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

fn row(name: &str, b: &Values, n: &Values, statistics: Statistics, threshold: f64) -> Row {
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
    Row {
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
pub fn regressions(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.regression)
        .map(|r| r.metric.clone())
        .collect()
}

/// 1 when asked to fail on a regression and there is one, else 0.
pub fn exit_code(rows: &[Row], fail_on_regression: bool) -> u8 {
    if fail_on_regression && rows.iter().any(|r| r.regression) {
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
    pub rows: Vec<Row>,
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

// ------------------------------------------------------------ formatting --

use crate::units::fmt_value;

/// The statistics line.
pub fn method_line(r: &Report) -> String {
    match r.statistics {
        Statistics::Welch => format!(
            "statistics: Welch's t-test, 95% CI of the difference of means \
             (plain means of the runs, not the bench's trimmed mean); \
             significant when p < {ALPHA}; regressions beyond {}",
            pct(r.threshold_pct)
        ),
        Statistics::None => format!(
            "no statistics: {} per side, so single values are compared \
             (bench files of 2 or more runs each get Welch's t-test, 95% CI); \
             regressions beyond {}",
            if r.base.runs.min(r.new.runs) <= 1 {
                "one run"
            } else {
                "runs"
            },
            pct(r.threshold_pct)
        ),
    }
}

fn side_line(label: &str, s: &SideInfo) -> String {
    let runs = if s.runs == 1 { "run" } else { "runs" };
    let rmap = s
        .rmap_method
        .as_deref()
        .map_or(String::new(), |m| format!(" [rmap: {m}]"));
    format!(
        "{label}: {} ({}, {} {runs}): {}{rmap}",
        s.path, s.kind, s.runs, s.name
    )
}

/// The closing line: the regressions, or that there are none.
pub fn regressions_line(r: &Report) -> String {
    let regs: Vec<String> = r
        .rows
        .iter()
        .filter(|x| x.regression)
        .map(|x| {
            format!(
                "{} ({})",
                x.metric,
                x.change_pct.map_or_else(|| "from 0".into(), signed_pct)
            )
        })
        .collect();
    let what = if r.statistics == Statistics::Welch {
        "significant regression"
    } else {
        "regression"
    };
    if regs.is_empty() {
        format!("no {what} beyond {}", pct(r.threshold_pct))
    } else {
        format!(
            "{} {what}{} beyond {}: {}",
            regs.len(),
            if regs.len() == 1 { "" } else { "s" },
            pct(r.threshold_pct),
            regs.join(", ")
        )
    }
}

/// The cells of the table: header, then one line per row.
fn cells(r: &Report) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let welch = r.statistics == Statistics::Welch;
    let header = if welch {
        vec!["metric", "BASE", "NEW", "change", "95% CI", "p", "verdict"]
    } else {
        vec!["metric", "BASE", "NEW", "change", "verdict"]
    };
    let side = |s: &SideStats, unit: &str| {
        let v = fmt_value(s.mean, unit);
        match pct_of(s.stddev, s.mean) {
            Some(sd) if welch && s.n >= 2 && sd > 0.0 => format!("{v} ±{}", pct(sd)),
            _ => v,
        }
    };
    let lines = r
        .rows
        .iter()
        .map(|x| {
            let change = x
                .change_pct
                .map_or_else(|| format!("+{}", fmt_value(x.diff, &x.unit)), signed_pct);
            let mut line = vec![
                x.metric.clone(),
                side(&x.base, &x.unit),
                side(&x.new, &x.unit),
                change,
            ];
            if welch {
                let (ci, p) = match &x.test {
                    Some(t) => (
                        match (x.ci_low_pct, x.ci_high_pct) {
                            (Some(lo), Some(hi)) => {
                                format!("[{}, {}]", signed_pct(lo), signed_pct(hi))
                            }
                            _ => format!(
                                "[{}, {}]",
                                fmt_value(t.ci_low, &x.unit),
                                fmt_value(t.ci_high, &x.unit)
                            ),
                        },
                        fmt_p(t.p),
                    ),
                    None => ("-".into(), "-".into()),
                };
                line.push(ci);
                line.push(p);
            }
            line.push(x.verdict_text.clone());
            line
        })
        .collect();
    (header, lines)
}

fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// `--format table`: aligned text.
pub fn table(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", side_line("BASE", &r.base));
    let _ = writeln!(s, "{}", side_line("NEW ", &r.new));
    let _ = writeln!(s, "{}", method_line(r));
    if r.rows.is_empty() {
        let _ = writeln!(s, "no metric is present in both");
        return s;
    }
    let _ = writeln!(s);
    let (header, lines) = cells(r);
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for l in &lines {
        for (w, c) in width.iter_mut().zip(l) {
            *w = (*w).max(c.chars().count());
        }
    }
    let last = header.len() - 1;
    let line = |cols: Vec<&str>| {
        let mut out = String::new();
        for (i, (c, w)) in cols.iter().zip(&width).enumerate() {
            let pad = w - c.chars().count();
            if i == 0 {
                out.push_str(c);
                out.push_str(&" ".repeat(pad));
            } else if i == last {
                out.push_str("  ");
                out.push_str(c);
            } else {
                out.push_str("  ");
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            }
        }
        out.trim_end().to_owned()
    };
    let _ = writeln!(s, "{}", line(header.clone()));
    for l in &lines {
        let _ = writeln!(s, "{}", line(l.iter().map(String::as_str).collect()));
    }
    let _ = writeln!(s);
    if let Some(l) = one_sided_line(r) {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(s, "{}", regressions_line(r));
    s
}

/// `--format markdown`: a GitHub-style table.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}  ", side_line("**BASE**", &r.base));
    let _ = writeln!(s, "{}  ", side_line("**NEW**", &r.new));
    let _ = writeln!(s, "{}", method_line(r));
    let _ = writeln!(s);
    if r.rows.is_empty() {
        let _ = writeln!(s, "no metric is present in both");
        return s;
    }
    let (header, lines) = cells(r);
    let esc = |c: &str| c.replace('|', "\\|");
    let _ = writeln!(s, "| {} |", header.join(" | "));
    let align: Vec<&str> = (0..header.len())
        .map(|i| {
            if i == 0 || i == header.len() - 1 {
                ":---"
            } else {
                "---:"
            }
        })
        .collect();
    let _ = writeln!(s, "|{}|", align.join("|"));
    for l in &lines {
        let cols: Vec<String> = l.iter().map(|c| esc(c)).collect();
        let _ = writeln!(s, "| {} |", cols.join(" | "));
    }
    let _ = writeln!(s);
    if let Some(l) = one_sided_line(r) {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(s, "{}", regressions_line(r));
    s
}

/// `--format json`: the report as one object.
pub fn json(r: &Report) -> anyhow::Result<String> {
    let mut s = serde_json::to_string_pretty(r)?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file past the limit is refused by its size, before it is read (a
    /// sparse file of 1 GiB + 1 byte takes no room); a stream that never
    /// ends by what was read; both in one line naming the file and limit.
    #[test]
    fn inputs_larger_than_the_limit_are_refused_before_they_are_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let huge = dir.path().join("huge.json");
        let f = std::fs::File::create(&huge).expect("create");
        f.set_len(MAX_INPUT_BYTES + 1).expect("sparse file");
        let t = std::time::Instant::now();
        let e = format!("{:#}", read_input(&huge).expect_err("too big"));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(1),
            "it was read"
        );
        assert!(
            e.contains(&huge.display().to_string()) && e.contains("1024 MiB"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        // At the limit: read.
        f.set_len(10).expect("shrink");
        assert_eq!(read_capped(&huge, 10).expect("at the limit").len(), 10);
        assert!(read_capped(&huge, 9).is_err());
        // Not a regular file, no size: refused once past the limit.
        let e = format!(
            "{:#}",
            read_capped(Path::new("/dev/zero"), 4096).expect_err("zero")
        );
        assert!(e.contains("/dev/zero is larger than"), "{e}");
    }

    fn vals(better: Better, values: &[f64]) -> Values {
        Values {
            unit: "s".into(),
            better,
            values: values.to_vec(),
        }
    }

    fn one(name: &str, better: Better, values: &[f64]) -> BTreeMap<String, Values> {
        BTreeMap::from([(name.to_owned(), vals(better, values))])
    }

    fn close(got: f64, want: f64, tol: f64) {
        assert!((got - want).abs() <= tol, "{got} is not {want} ± {tol}");
    }

    #[test]
    fn huge_values_are_refused_and_never_reach_the_test() {
        let rm = |value| RunMetric {
            name: "x/elapsed_s".into(),
            unit: "s".into(),
            better: Better::Lower,
            value,
        };
        assert!(comparable(vec![rm(1e15), rm(-MAX_MAGNITUDE)]).is_ok());
        for v in [1e308, -1e101, f64::INFINITY, f64::NAN] {
            let e = comparable(vec![rm(1.0), rm(v)]).expect_err("refused");
            assert!(e.contains("x/elapsed_s") && !e.contains('\n'), "{e}");
        }
        // Were they let through, stats::welch would make no test of them
        // (values_too_large_for_f64_give_no_test_rather_than_panic).
    }

    #[test]
    fn merged_bucket_counts_saturate() {
        let text = include_str!("../../tests/fuzz-regressions/recording_reader/ok-document.json");
        let mut rec = document::from_str(text).expect("the kept recording reads");
        rec.totals.vm.histograms.insert(
            "munmap".into(),
            Summary {
                count: 7,
                buckets: vec![
                    hist::Bucket {
                        le_ns: 1023,
                        count: u64::MAX,
                    },
                    hist::Bucket {
                        le_ns: 1023,
                        count: 5,
                    },
                    hist::Bucket {
                        le_ns: 4095,
                        count: u64::MAX - 1,
                    },
                ],
                ..Summary::default()
            },
        );
        let m = merged_histograms(&Input::Recording(Box::new(rec)));
        let s = &m["munmap"];
        // Wrapping would have made the 1023 bucket 4 and the total 2.
        assert_eq!(s.count, u64::MAX);
        assert_eq!(s.buckets[0].count, u64::MAX);
        assert_eq!(s.p50_ns, Some(1023));
    }

    #[test]
    fn verdict_follows_the_better_direction() {
        use Better::*;
        assert_eq!(verdict(Lower, -1.0, true), Verdict::Win);
        assert_eq!(verdict(Lower, 1.0, true), Verdict::Loss);
        assert_eq!(verdict(Higher, 1.0, true), Verdict::Win);
        assert_eq!(verdict(Higher, -1.0, true), Verdict::Loss);
        assert_eq!(verdict(Neither, 1.0, true), Verdict::Change);
        assert_eq!(verdict(Lower, 1.0, false), Verdict::Noise);
        assert_eq!(verdict(Lower, 0.0, true), Verdict::Same);
        assert_eq!(verdict_text(Verdict::Win, -1.0, Some(-12.34)), "12.3% win");
        assert_eq!(verdict_text(Verdict::Loss, 1.0, Some(4.0)), "4.0% loss");
        assert_eq!(verdict_text(Verdict::Loss, 1.0, Some(900.0)), "900% loss");
        assert_eq!(verdict_text(Verdict::Change, 1.0, Some(50.0)), "50.0% more");
        assert_eq!(verdict_text(Verdict::Change, -1.0, Some(-5.0)), "5.0% less");
        assert_eq!(verdict_text(Verdict::Noise, 1.0, Some(3.0)), "within noise");
        assert_eq!(verdict_text(Verdict::Same, 0.0, Some(0.0)), "~");
        assert_eq!(verdict_text(Verdict::Loss, 3.0, None), "loss (from 0)");
    }

    #[test]
    fn rows_compare_plain_means_with_wording_and_direction() {
        // sys (lower is better) went from 1.0 to 1.5: a loss of 50%.
        let b = one("sys", Better::Lower, &[0.9, 1.0, 1.1]);
        let n = one("sys", Better::Lower, &[1.4, 1.5, 1.6]);
        let rows = build_rows(&b, &n, Statistics::Welch, 5.0);
        let r = &rows[0];
        close(r.change_pct.expect("base is not 0"), 50.0, 1e-9);
        assert!(r.significant && r.regression);
        assert_eq!(r.verdict_text, "50.0% loss");
        // The CI in percent of BASE brackets the change.
        let (lo, hi) = (r.ci_low_pct.expect("lo"), r.ci_high_pct.expect("hi"));
        assert!(lo < 50.0 && 50.0 < hi && lo > 0.0, "[{lo}, {hi}]");
        // The other way round it is a win, never a regression.
        let rows = build_rows(&n, &b, Statistics::Welch, 5.0);
        assert_eq!(rows[0].verdict, Verdict::Win);
        assert!(!rows[0].regression);
        assert_eq!(rows[0].verdict_text, "33.3% win");
    }

    #[test]
    fn threshold_decides_what_is_a_regression() {
        assert!(!is_regression(Verdict::Loss, Some(4.0), 5.0));
        assert!(!is_regression(Verdict::Loss, Some(5.0), 5.0));
        assert!(is_regression(Verdict::Loss, Some(6.0), 5.0));
        assert!(
            is_regression(Verdict::Loss, Some(-6.0), 5.0),
            "higher-is-better loss"
        );
        assert!(is_regression(Verdict::Loss, None, 5.0), "from 0");
        assert!(!is_regression(Verdict::Win, Some(60.0), 5.0));
        assert!(!is_regression(Verdict::Noise, Some(60.0), 5.0));
        assert!(!is_regression(Verdict::Change, Some(60.0), 5.0));
        // Single values: any loss beyond the threshold counts.
        let b = one("faults", Better::Lower, &[100.0]);
        let n4 = one("faults", Better::Lower, &[104.0]);
        let n6 = one("faults", Better::Lower, &[106.0]);
        let r4 = build_rows(&b, &n4, Statistics::None, 5.0);
        let r6 = build_rows(&b, &n6, Statistics::None, 5.0);
        assert_eq!(r4[0].verdict_text, "4.0% loss");
        assert!(!r4[0].regression && r6[0].regression);
        assert!(r4[0].test.is_none());
        assert_eq!(exit_code(&r4, true), 0);
        assert_eq!(exit_code(&r6, true), exit::FAILURE);
        assert_eq!(exit_code(&r6, false), 0);
        // A big but insignificant loss is not a regression.
        let b = one("sys", Better::Lower, &[1.0, 3.0, 2.0]);
        let n = one("sys", Better::Lower, &[1.5, 3.5, 2.5]);
        let r = build_rows(&b, &n, Statistics::Welch, 5.0);
        assert_eq!(r[0].verdict_text, "within noise");
        assert_eq!(exit_code(&r, true), 0);
    }

    #[test]
    fn rows_start_with_the_headline_and_need_both_sides() {
        let names = [
            "zz_new_metric",
            "madvise_calls",
            "reclaim_direct.p99",
            "reclaim_direct.p50",
            "faults",
            "cpu",
            "real",
            "page_fault.p90",
            "sys",
            "user",
            "psi_some_stall",
        ];
        let side: BTreeMap<String, Values> = names
            .iter()
            .map(|n| (n.to_string(), vals(Better::Lower, &[1.0])))
            .collect();
        let mut other = side.clone();
        other.remove("psi_some_stall");
        let rows = build_rows(&side, &other, Statistics::None, 5.0);
        let got: Vec<&str> = rows.iter().map(|r| r.metric.as_str()).collect();
        assert_eq!(
            got,
            [
                "real",
                "user",
                "sys",
                "cpu",
                "faults",
                "page_fault.p90",
                "reclaim_direct.p50",
                "reclaim_direct.p99",
                "madvise_calls",
                "zz_new_metric",
            ]
        );
    }

    fn report(statistics: Statistics) -> Report {
        let b = BTreeMap::from([
            ("real".to_owned(), vals(Better::Lower, &[1.0, 1.1, 0.9])),
            (
                "madvise_calls".to_owned(),
                Values {
                    unit: "calls".into(),
                    better: Better::Neither,
                    values: vec![600.0; 3],
                },
            ),
        ]);
        let mut n = b.clone();
        n.get_mut("madvise_calls").expect("there").values = vec![6000.0; 3];
        let rows = build_rows(&b, &n, statistics, 5.0);
        let info = |path: &str| SideInfo {
            path: path.into(),
            name: "x".into(),
            kind: "bench",
            runs: 3,
            rmap_method: None,
        };
        Report {
            kind: COMPARE_KIND,
            schema_version: COMPARE_SCHEMA_VERSION,
            base: info("a.json"),
            new: info("b.json"),
            statistics,
            confidence: CONFIDENCE,
            alpha: ALPHA,
            comparison: "mean",
            threshold_pct: 5.0,
            regressions: regressions(&rows),
            rows,
            one_sided: one_sided(&b, &n),
            histograms: BTreeMap::new(),
        }
    }

    #[test]
    fn formats_name_the_test_and_carry_every_row() {
        let r = report(Statistics::Welch);
        let t = table(&r);
        assert!(t.contains("Welch's t-test, 95% CI"), "{t}");
        let madv = t
            .lines()
            .find(|l| l.starts_with("madvise_calls"))
            .expect("row");
        assert!(
            madv.contains("+900%") && madv.ends_with("900% more"),
            "{madv}"
        );
        let real = t.lines().find(|l| l.starts_with("real")).expect("row");
        assert!(real.ends_with("~"), "{real}");
        // Columns line up: every table line has the verdict column at the
        // same place.
        let at: Vec<usize> = t
            .lines()
            .filter(|l| l.starts_with("metric") || l.starts_with("real"))
            .map(|l| {
                let i = l.find("  ~").or_else(|| l.find("  verdict")).expect("col");
                l[..i].chars().count()
            })
            .collect();
        assert_eq!(at[0], at[1], "{t}");
        let m = markdown(&r);
        assert!(m.contains("| metric | BASE | NEW | change | 95% CI | p | verdict |"));
        assert!(m.contains("|:---|---:|---:|---:|---:|---:|:---|"), "{m}");
        let j: serde_json::Value = serde_json::from_str(&json(&r).expect("json")).expect("parses");
        assert_eq!(j["schema_version"], COMPARE_SCHEMA_VERSION);
        assert_eq!(j["statistics"], "welch");
        assert_eq!(j["rows"][0]["metric"], "real");
        assert_eq!(j["rows"][1]["change_pct"], 900.0);
        assert_eq!(j["rows"][1]["test"]["p"], 0.0);
        let single = table(&report(Statistics::None));
        assert!(single.contains("no statistics"), "{single}");
        assert!(!single.contains("95% CI  "), "{single}");
    }

    #[test]
    fn values_are_shown_in_their_units() {
        assert_eq!(fmt_value(0.0245, "s"), "24.50 ms");
        assert_eq!(fmt_value(2.5, "s"), "2.500 s");
        assert_eq!(fmt_value(4095.0, "ns"), "4.1 µs");
        assert_eq!(fmt_value(600.0, "calls"), "600");
        assert_eq!(fmt_value(0.0, "s"), "0");
        assert_eq!(fmt_value(600.5, "calls"), "600.5");
        assert_eq!(fmt_value(3.0 * 1024.0 * 1024.0, "bytes"), "3.0 MiB");
    }
}
