//! The figures of one recorded run that `bench` summarises and `compare`
//! compares, each with its unit and which direction is better. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    child::CapturedOutput,
    model::{catalogue, recording::Recording},
    stats,
};

/// A run's main VM figures: what the report draws run by run and as bars.
/// The report's main VM rows, in order (the catalogue's `main` rows).
pub fn main_vm() -> impl Iterator<Item = &'static str> {
    catalogue::RUN_ROWS
        .iter()
        .filter(|r| r.main)
        .map(|r| r.name)
}

/// madvise behaviours that free or reclaim memory: each run has their call
/// counts, 0 included, whenever the madvise probe is attached.
pub const FREEING_ADVICE: [&str; 4] = ["cold", "dontneed", "free", "pageout"];

pub use crate::model::catalogue::Better;

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

/// The unit and better direction a figure's name says by its suffix:
/// `_per_sec` and `_mb_s` are rates (higher is better); `_ns`, `_us`, `_ms`
/// and `_s` are times (lower is better); anything else is a plain count.
pub fn by_suffix(name: &str) -> (&'static str, Better) {
    // Throughputs come before the plain `_s` rule, and a rule also matches
    // a name that is its suffix alone (`mb_s` is MB/s, never seconds).
    const RULES: &[(&str, &str, Better)] = &[
        ("_per_sec", "/s", Better::Higher),
        ("_per_s", "/s", Better::Higher),
        ("_mb_s", "MB/s", Better::Higher),
        ("_mib_s", "MiB/s", Better::Higher),
        ("_kb_s", "kB/s", Better::Higher),
        ("_gb_s", "GB/s", Better::Higher),
        ("_ops_s", "/s", Better::Higher),
        ("_ns", "ns", Better::Lower),
        ("_us", "µs", Better::Lower),
        ("_ms", "ms", Better::Lower),
        ("_s", "s", Better::Lower),
    ];
    RULES
        .iter()
        .find(|(suffix, _, _)| name.ends_with(suffix) || Some(name) == suffix.strip_prefix('_'))
        .map_or(("", Better::Neither), |&(_, unit, better)| (unit, better))
}

/// The workload's own figures: the top-level numbers of the last line of its
/// kept output that is a JSON object, named `<workload>/<key>` (`workload`
/// is the object's `"workload"` field, else `reported`), unit and direction
/// from [`by_suffix`]. Nested objects (a workload's settings) are not
/// figures.
pub fn reported(output: &CapturedOutput) -> Vec<RunMetric> {
    let Some(obj) = output.tail.lines().rev().find_map(|l| {
        let l = l.trim();
        l.starts_with('{')
            .then(|| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(l).ok())
            .flatten()
    }) else {
        return Vec::new();
    };
    let source = obj
        .get("workload")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("reported");
    obj.iter()
        .filter_map(|(k, v)| {
            let value = v.as_f64().filter(|x| x.is_finite())?;
            let (unit, better) = by_suffix(k);
            Some(RunMetric {
                name: format!("{source}/{k}"),
                unit: unit.into(),
                better,
                value,
            })
        })
        .collect()
}

/// `--metric NAME=REGEX`: a figure read from the command's kept output, the
/// last match of REGEX, its first capture group (or the whole match) as a
/// number. NAME may end in `:higher` or `:lower` (the default is higher,
/// for throughput such as "Throughput 412.3 MB/sec").
#[derive(Clone, Debug)]
pub struct MetricSpec {
    pub name: String,
    pub better: Better,
    pub regex: regex::Regex,
}

impl std::str::FromStr for MetricSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (name, re) = s.split_once('=').ok_or_else(|| {
            format!("'{s}' is not NAME=REGEX (e.g. 'mb_s=Throughput ([0-9.]+) MB/sec')")
        })?;
        let (name, better) = match name.rsplit_once(':') {
            Some((n, "higher")) => (n, Better::Higher),
            Some((n, "lower")) => (n, Better::Lower),
            Some((_, other)) => {
                return Err(format!(
                    "'{other}' in --metric {name} is not a direction; use :higher or :lower"
                ));
            }
            None => (name, Better::Higher),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "metric name '{name}' must be letters, digits and underscores"
            ));
        }
        let regex =
            regex::Regex::new(re).map_err(|e| format!("--metric {name}: bad regex: {e}"))?;
        Ok(Self {
            name: name.to_owned(),
            better,
            regex,
        })
    }
}

impl MetricSpec {
    /// The figure in `text`: the last match's first group (or the match).
    pub fn extract(&self, text: &str) -> Option<f64> {
        let c = self.regex.captures_iter(text).last()?;
        let m = c.get(1).or_else(|| c.get(0))?;
        m.as_str()
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite())
    }

    fn metric(&self, value: f64) -> RunMetric {
        RunMetric {
            name: format!("output/{}", self.name),
            unit: by_suffix(&self.name).0.into(),
            better: self.better,
            value,
        }
    }
}

/// [`run_metrics`] plus the `--metric` figures. Fails, naming the metric,
/// when the recording kept no output or the regex does not match it.
pub fn run_metrics_with(rec: &Recording, specs: &[MetricSpec]) -> Result<Vec<RunMetric>, String> {
    let mut out = run_metrics(rec);
    if specs.is_empty() {
        return Ok(out);
    }
    let Some(o) = rec.child.as_ref().and_then(|c| c.output.as_ref()) else {
        return Err("it kept no command output (record with --keep-output, or use bench)".into());
    };
    for spec in specs {
        let v = spec.extract(&o.tail).ok_or_else(|| {
            format!(
                "--metric {}: /{}/ does not match the command's output",
                spec.name,
                spec.regex.as_str()
            )
        })?;
        out.push(spec.metric(v));
    }
    Ok(out)
}

/// Every figure of a run that exists in its recording: the workload's own,
/// then the catalogue's run rows, any other madvise behaviour used, and
/// the latency histograms' quantiles. A figure the run could not measure
/// (no command, probe missing) is absent, not 0.
pub fn run_metrics(rec: &Recording) -> Vec<RunMetric> {
    let mut out = rec
        .child
        .as_ref()
        .and_then(|c| c.output.as_ref())
        .map(reported)
        .unwrap_or_default();
    for row in catalogue::RUN_ROWS {
        m(&mut out, row.name, row.unit, row.better, (row.value)(rec));
    }
    let vm = &rec.totals.vm;
    if !vm.unavailable.contains_key("madvise") {
        // The freeing advice always has a row (a measured 0 on one side is
        // the point); any other behaviour when it was used.
        for (b, x) in &vm.madvise {
            if !FREEING_ADVICE.contains(&b.as_str()) {
                let name = format!("madvise_{b}_calls");
                m(
                    &mut out,
                    &name,
                    "calls",
                    Better::Neither,
                    Some(x.calls as f64),
                );
            }
        }
    }
    for (name, s) in &vm.histograms {
        if s.count == 0 {
            continue;
        }
        for (q, v) in [("p50", s.p50_ns), ("p90", s.p90_ns), ("p99", s.p99_ns)] {
            m(
                &mut out,
                &format!("{name}.{q}"),
                "ns",
                Better::Lower,
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
            let (trimmed_mean, k) = stats::trimmed_mean(&sorted, trim);
            let s = MetricSummary {
                unit,
                better,
                trimmed_mean,
                trim: k,
                min: sorted[0],
                median: stats::median_of_sorted(&sorted),
                max: sorted[sorted.len() - 1],
                stddev: stats::stddev(&values),
                values,
            };
            (name, s)
        })
        .collect()
}

/// A recording answers the catalogue's run rows.
impl catalogue::Run for Recording {
    fn rusage(&self) -> Option<&crate::child::Rusage> {
        self.child.as_ref().map(|c| &c.rusage)
    }

    fn counter(&self, name: &str) -> Option<u64> {
        self.totals.vm.counters.get(name).copied().flatten()
    }

    fn vmstat(&self, key: &str) -> Option<u64> {
        self.totals.vm.vmstat.counters.get(key).copied().flatten()
    }

    fn probe_usable(&self, probe: &str) -> bool {
        self.header
            .probes
            .iter()
            .any(|p| p.probe == probe && p.usable())
    }

    fn unavailable(&self, what: &str) -> bool {
        self.totals.vm.unavailable.contains_key(what)
    }

    fn histogram_sum_ns(&self, name: &str) -> Option<u64> {
        self.totals.vm.histograms.get(name).map(|h| h.sum_ns)
    }

    fn madvise_calls(&self, behaviour: &str) -> Option<u64> {
        self.totals.vm.madvise.get(behaviour).map(|m| m.calls)
    }

    fn rmap(&self) -> Option<&crate::model::rmap::RmapTotals> {
        self.totals.vm.rmap.as_ref()
    }

    fn records(&self) -> Option<f64> {
        let o = self.child.as_ref()?.output.as_ref()?;
        reported(o)
            .iter()
            .find(|r| r.name.ends_with("/records"))
            .map(|r| r.value)
            .filter(|&r| r > 0.0)
    }

    fn scope_faults(&self) -> &crate::model::FaultTotals {
        &self.totals.scope_faults
    }

    fn madvise_total_calls(&self) -> u64 {
        self.totals.vm.madvise.values().map(|m| m.calls).sum()
    }

    fn psi_some_stall_us(&self) -> Option<u64> {
        self.totals.vm.psi.as_ref()?.some_stall_us
    }
    fn working_set(&self) -> Option<&crate::model::wss::WssTotals> {
        self.working_set.as_ref()
    }
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
    fn suffixes_give_unit_and_direction() {
        assert_eq!(by_suffix("records_per_sec"), ("/s", Better::Higher));
        assert_eq!(by_suffix("reclaim_per_page_ns"), ("ns", Better::Lower));
        assert_eq!(by_suffix("elapsed_s"), ("s", Better::Lower));
        assert_eq!(by_suffix("page_fault_us"), ("µs", Better::Lower));
        assert_eq!(by_suffix("records"), ("", Better::Neither));
        // A throughput named by its suffix alone is still a throughput.
        assert_eq!(by_suffix("mb_s"), ("MB/s", Better::Higher));
        assert_eq!(by_suffix("write_mib_s"), ("MiB/s", Better::Higher));
    }

    #[test]
    fn the_last_json_line_is_the_workloads_figures() {
        let out = CapturedOutput {
            tail: "warming up\n{\"workload\":\"old\",\"x\":1}\nlazyfree: 5 records/s\n\
                   {\"workload\":\"lazyfree\",\"records_per_sec\":5.5,\"records\":10,\
                   \"label\":\"a\",\"config\":{\"threads\":2}}\ntrailing text\n"
                .into(),
            truncated: false,
        };
        let r = reported(&out);
        let names: Vec<&str> = r.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["lazyfree/records", "lazyfree/records_per_sec"]);
        assert_eq!(r[1].value, 5.5);
        assert_eq!(r[1].better, Better::Higher);
        let none = CapturedOutput {
            tail: "no json here\n{broken\n".into(),
            truncated: true,
        };
        assert!(reported(&none).is_empty());
    }

    #[test]
    fn metric_specs_parse_and_take_the_last_match() {
        let s: MetricSpec = "mb_s=Throughput ([0-9.]+) MB/sec".parse().expect("parses");
        assert_eq!((s.name.as_str(), s.better), ("mb_s", Better::Higher));
        let text = "Throughput 10.5 MB/sec warmup\nThroughput 412.25 MB/sec 48 clients\n";
        assert_eq!(s.extract(text), Some(412.25));
        assert_eq!(s.extract("nothing"), None);
        let l: MetricSpec = "lat_ms:lower=max latency ([0-9.]+) ms"
            .parse()
            .expect("parses");
        assert_eq!(l.better, Better::Lower);
        let whole: MetricSpec = r"n=\d+".parse().expect("parses");
        assert_eq!(whole.extract("a 12 b 34"), Some(34.0));
        for bad in ["noequals", "=x", "a b=x", "x:sideways=y", "x=(unclosed"] {
            assert!(bad.parse::<MetricSpec>().is_err(), "{bad}");
        }
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
