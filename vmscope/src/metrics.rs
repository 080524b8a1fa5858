//! The figures of one recorded run that `bench` summarises and `compare`
//! compares, each with its unit and which direction is better. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::Recording;

/// Which way is better for a metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
    /// Neither (e.g. a count that only describes the run).
    Neither,
}

/// One figure of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunMetric {
    pub name: String,
    pub unit: String,
    pub better: Better,
    pub value: f64,
}

fn m(out: &mut Vec<RunMetric>, name: &str, unit: &str, better: Better, value: Option<f64>) {
    if let Some(value) = value {
        out.push(RunMetric {
            name: name.into(),
            unit: unit.into(),
            better,
            value,
        });
    }
}

/// Every figure of a run that exists in its recording. A figure the run
/// could not measure (no command, probe missing) is absent, not 0.
pub fn run_metrics(rec: &Recording) -> Vec<RunMetric> {
    use Better::*;
    let mut out = Vec::new();
    if let Some(c) = &rec.child {
        let r = &c.rusage;
        m(&mut out, "real", "s", Lower, Some(r.wall_ns as f64 / 1e9));
        m(&mut out, "user", "s", Lower, Some(r.user_ns as f64 / 1e9));
        m(&mut out, "sys", "s", Lower, Some(r.sys_ns as f64 / 1e9));
        m(&mut out, "cpu", "%", Neither, Some(r.cpu_percent));
        m(
            &mut out,
            "maxrss",
            "bytes",
            Lower,
            Some(r.maxrss_bytes as f64),
        );
        m(&mut out, "minflt", "faults", Lower, Some(r.minflt as f64));
        m(&mut out, "majflt", "faults", Lower, Some(r.majflt as f64));
    }
    let t = &rec.totals;
    m(
        &mut out,
        "faults",
        "faults",
        Lower,
        t.scope_faults.total.map(|v| v as f64),
    );
    let counter = |name: &str| t.vm.counters.get(name).copied().flatten().map(|v| v as f64);
    m(
        &mut out,
        "major_faults",
        "faults",
        Lower,
        counter("major_faults"),
    );
    m(
        &mut out,
        "tlb_shootdown_ipis",
        "IPIs",
        Lower,
        counter("tlb_remote_send_ipi"),
    );
    m(
        &mut out,
        "swap_out_attributed",
        "pages",
        Lower,
        counter("swap_out_pages"),
    );
    m(
        &mut out,
        "swap_in_attributed",
        "pages",
        Lower,
        counter("swap_in_pages"),
    );
    let vm = |k: &str| {
        t.vm.vmstat
            .counters
            .get(k)
            .copied()
            .flatten()
            .map(|v| v as f64)
    };
    m(&mut out, "pswpin", "pages", Lower, vm("pswpin"));
    m(&mut out, "pswpout", "pages", Lower, vm("pswpout"));
    m(&mut out, "pglazyfree", "pages", Neither, vm("pglazyfree"));
    m(&mut out, "pglazyfreed", "pages", Neither, vm("pglazyfreed"));
    m(
        &mut out,
        "pgscan_direct",
        "pages",
        Lower,
        vm("pgscan_direct"),
    );
    let stall = ["reclaim_direct", "reclaim_memcg"]
        .iter()
        .filter_map(|h| t.vm.histograms.get(*h))
        .map(|s| s.sum_ns as f64 / 1e6)
        .reduce(|a, b| a + b);
    m(&mut out, "reclaim_stall", "ms", Lower, stall);
    let madvise: u64 = t.vm.madvise.values().map(|m| m.calls).sum();
    if !t.vm.unavailable.contains_key("madvise") {
        m(
            &mut out,
            "madvise_calls",
            "calls",
            Neither,
            Some(madvise as f64),
        );
    }
    if let Some(p) = &t.vm.psi {
        m(
            &mut out,
            "psi_some_stall",
            "ms",
            Lower,
            p.some_stall_us.map(|v| v as f64 / 1e3),
        );
    }
    if let Some(r) = &t.vm.rmap {
        // The same rows whatever the method, so runs compare across
        // kernels; the count rows say which method measured them
        // (`rmap_samples` for sampling, `rmap_*_calls` for direct timing).
        let walk = &r.rmap_walk;
        m(
            &mut out,
            "rmap_walk_cpu",
            "s",
            Lower,
            Some(walk.cpu_seconds),
        );
        m(
            &mut out,
            "rmap_walk_share",
            "%",
            Lower,
            Some(100.0 * walk.share),
        );
        if let Some(maint) = &r.rmap_maintenance {
            m(
                &mut out,
                "rmap_maint_cpu",
                "s",
                Lower,
                Some(maint.cpu_seconds),
            );
            m(
                &mut out,
                "rmap_maint_share",
                "%",
                Lower,
                Some(100.0 * maint.share),
            );
        }
        let calls = |v: Option<u64>| v.map(|v| v as f64);
        m(
            &mut out,
            "rmap_walk_calls",
            "calls",
            Neither,
            calls(r.walk_calls),
        );
        m(
            &mut out,
            "rmap_maint_calls",
            "calls",
            Neither,
            calls(r.maintenance_calls),
        );
        if r.method == crate::rmap::Method::StackSampling {
            m(
                &mut out,
                "rmap_samples",
                "samples",
                Neither,
                Some(r.samples as f64),
            );
        }
    }
    for (name, s) in &t.vm.histograms {
        if s.count == 0 {
            continue;
        }
        for (q, v) in [("p50", s.p50_ns), ("p90", s.p90_ns), ("p99", s.p99_ns)] {
            m(
                &mut out,
                &format!("{name}.{q}"),
                "ns",
                Lower,
                v.map(|v| v as f64),
            );
        }
    }
    out
}

/// Summary of one metric over several runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MetricSummary {
    pub unit: String,
    pub better: Better,
    /// One value per run, in run order.
    pub values: Vec<f64>,
    /// The mean after dropping the `trim` lowest and `trim` highest.
    pub trimmed_mean: f64,
    pub trim: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    /// Sample standard deviation (n - 1); 0 for a single run.
    pub stddev: f64,
}

pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

pub fn stddev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// Summarises each metric over the runs (a metric missing from some run is
/// summarised over the runs that have it). `trim` is lowered when there are
/// too few runs to drop that many from each end.
pub fn summarize(runs: &[Vec<RunMetric>], trim: usize) -> BTreeMap<String, MetricSummary> {
    let mut by_name: BTreeMap<String, (String, Better, Vec<f64>)> = BTreeMap::new();
    for run in runs {
        for rm in run {
            by_name
                .entry(rm.name.clone())
                .or_insert_with(|| (rm.unit.clone(), rm.better, Vec::new()))
                .2
                .push(rm.value);
        }
    }
    by_name
        .into_iter()
        .map(|(name, (unit, better, values))| {
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let k = trim.min(sorted.len().saturating_sub(1) / 2);
            let kept = &sorted[k..sorted.len() - k];
            let s = MetricSummary {
                unit,
                better,
                trimmed_mean: kept.iter().sum::<f64>() / kept.len() as f64,
                trim: k,
                min: sorted[0],
                median: median(&sorted),
                max: sorted[sorted.len() - 1],
                stddev: stddev(&values),
                values,
            };
            (name, s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(real: f64) -> Vec<RunMetric> {
        vec![RunMetric {
            name: "real".into(),
            unit: "s".into(),
            better: Better::Lower,
            value: real,
        }]
    }

    #[test]
    fn trimmed_mean_drops_the_lowest_and_highest_like_the_seven_run_find_test() {
        // 7 runs, lowest and highest dropped.
        let runs: Vec<_> = [9.0, 10.0, 10.0, 11.0, 12.0, 12.0, 30.0]
            .into_iter()
            .map(run)
            .collect();
        let s = &summarize(&runs, 1)["real"];
        assert_eq!(s.trim, 1);
        assert_eq!(s.trimmed_mean, 11.0);
        assert_eq!((s.min, s.median, s.max), (9.0, 11.0, 30.0));
        // mean 94/7; squared deviations sum to 327.714; / 6, square root.
        assert!((s.stddev - 7.3905).abs() < 1e-3, "{}", s.stddev);
    }

    #[test]
    fn trim_is_lowered_for_few_runs() {
        let runs: Vec<_> = [1.0, 3.0].into_iter().map(run).collect();
        let s = &summarize(&runs, 3)["real"];
        assert_eq!(s.trim, 0);
        assert_eq!(s.trimmed_mean, 2.0);
        let one = &summarize(&[run(5.0)], 1)["real"];
        assert_eq!((one.trimmed_mean, one.stddev), (5.0, 0.0));
    }
}
