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
//! Here: `run` and the report's assembly; reading the inputs is in `input`,
//! the rows, statistics and verdicts (pure) in `rows`, the text, markdown
//! and JSON in `render`.

mod input;
mod render;
mod rows;

pub use input::{
    Input, MAX_INPUT_BYTES, MAX_MAGNITUDE, bad_input, has_kind, load, not_a, parse, read_input,
};
pub use render::{json, markdown, method_line, regressions_line, table};
pub use rows::{
    MetricRow, OneSided, Report, SideInfo, SideStats, Statistics, Values, Verdict, build_rows,
    collect, exit_code, is_regression, one_sided, one_sided_line, regressions, verdict,
    verdict_text,
};

use crate::model::recording::Recording;
use std::{collections::BTreeMap, path::Path};

use serde::{Deserialize, Serialize};

use crate::{
    cli::{CompareArgs, CompareFormat},
    exit,
    model::{
        hist::{self, Summary},
        metrics::MetricSpec,
    },
};

/// Bumped on any incompatible change to the `--format json` object.
pub const COMPARE_SCHEMA_VERSION: u32 = 1;

/// The `kind` of the `--format json` object.
pub const COMPARE_KIND: &str = "vmscope-compare";

/// Confidence level of the interval, and 1 - the significance level.
pub const CONFIDENCE: f64 = 0.95;

/// A difference is significant when its p-value is below this.
pub const ALPHA: f64 = 0.05;

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
    let gate = gate(&report, args)?;
    print!("{text}");
    Ok(exit_code(&report.rows, gate.as_ref()))
}

/// What can fail the run: `None` nothing, `Some([])` every row, otherwise
/// the rows named by `--fail-on` (a name neither side has is a usage error,
/// before anything is printed).
fn gate(report: &Report, args: &CompareArgs) -> anyhow::Result<Option<Vec<String>>> {
    if args.fail_on.is_empty() {
        return Ok(args.fail_on_regression.then(Vec::new));
    }
    let known = |m: &str| {
        report.rows.iter().any(|r| r.metric == m) || report.one_sided.iter().any(|o| o.metric == m)
    };
    if let Some(unknown) = args.fail_on.iter().find(|m| !known(m)) {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--fail-on {unknown}: no such metric in {} and {}; give a name from the metric column of `vmscope compare`",
                args.base.display(),
                args.new.display()
            ),
        ));
    }
    Ok(Some(args.fail_on.clone()))
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

#[cfg(test)]
mod tests {
    use super::input::{comparable, read_capped};
    use super::*;
    use crate::{
        document,
        model::metrics::{Better, RunMetric},
        units::fmt_value,
    };

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
        use crate::model::metrics::Better::*;
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
        let all = Vec::new();
        assert_eq!(exit_code(&r4, Some(&all)), 0);
        assert_eq!(exit_code(&r6, Some(&all)), exit::FAILURE);
        assert_eq!(exit_code(&r6, None), 0);
        // --fail-on: only the named rows can fail the run.
        assert_eq!(exit_code(&r6, Some(&vec!["sys".into()])), 0);
        assert_eq!(exit_code(&r6, Some(&vec!["faults".into()])), exit::FAILURE);
        // A big but insignificant loss is not a regression.
        let b = one("sys", Better::Lower, &[1.0, 3.0, 2.0]);
        let n = one("sys", Better::Lower, &[1.5, 3.5, 2.5]);
        let r = build_rows(&b, &n, Statistics::Welch, 5.0);
        assert_eq!(r[0].verdict_text, "within noise");
        assert_eq!(exit_code(&r, Some(&all)), 0);
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
