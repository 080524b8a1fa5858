//! `vmscope bench`: runs a command several times, each run recorded as
//! `record` does, and summarises every figure over the runs (trimmed mean,
//! min, median, max, stddev). The bench file embeds every run's recording
//! and a `results[]` block in the usual benchmark-tool shape.

use crate::model::recording::Recording;
use crate::model::recording::Tool;
use std::{
    collections::BTreeMap,
    io::IsTerminal as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use crate::{
    cli::BenchArgs,
    document::{self, Output},
    exit,
    model::{
        bench::{BENCH_KIND, BENCH_SCHEMA_VERSION, BenchFile, BenchResult, from_str},
        metrics::{self, MetricSummary, RunMetric},
    },
    source::kernel::caps::Privileges,
    stats,
};

/// Reads a bench file, with the same one-line errors as recordings.
pub fn read(path: &Path) -> anyhow::Result<BenchFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    from_str(&text).with_context(|| format!("{} is not a vmscope bench file", path.display()))
}

/// Runs `sh -c CMD` (the `--prepare` step); its failure stops the bench.
fn prepare(cmd: &str) -> anyhow::Result<()> {
    let st = Command::new("sh")
        .args(["-c", cmd])
        .status()
        .with_context(|| format!("running --prepare {cmd:?}"))?;
    if !st.success() {
        return Err(exit::failure(
            exit::FAILURE,
            format!("--prepare {cmd:?} failed ({st}); fix it or drop --prepare"),
        ));
    }
    Ok(())
}

/// One recorded run: `vmscope record` of the command, into `path`; its
/// exit code and recording.
pub fn record_run(args: &BenchArgs, path: &Path) -> anyhow::Result<(i32, Recording)> {
    let me = std::env::current_exe().context("finding vmscope's own binary")?;
    let mut c = Command::new(me);
    c.arg("record")
        .arg("-i")
        .arg(humantime::format_duration(args.interval).to_string());
    if args.as_root {
        c.arg("--as-root");
    }
    if args.mmap_lock {
        c.arg("--mmap-lock");
    }
    if args.syscall_latency {
        c.arg("--syscall-latency");
    }
    // The command's output is kept in the recording (workload figures,
    // --metric) and shown only when asked.
    c.arg("--keep-output");
    if args.show_output {
        c.stdout(std::io::stderr());
    } else {
        c.stdout(std::process::Stdio::null());
    }
    c.arg("-o").arg(path).arg("--").args(&args.command);
    let st = c.status().context("starting a recorded run")?;
    let rec = document::read(path)
        .with_context(|| format!("the run's recording (vmscope record exited with {st})"))?;
    let code = rec
        .child
        .as_ref()
        .map_or(exit::WRAPPER_FAILED.into(), |c| c.exit_code);
    Ok((code, rec))
}

/// How a bench ended.
pub enum BenchEnd {
    Done(Box<BenchFile>),
    /// A run failed without `--ignore-failure`: its exit code.
    Failed(u8),
}

pub fn run(args: BenchArgs) -> anyhow::Result<u8> {
    let output = Output::prepare(&args.output)?;
    let file = match execute(&args)? {
        BenchEnd::Done(f) => f,
        BenchEnd::Failed(code) => return Ok(code),
    };
    // The summary goes to stdout, unless the bench file does.
    match output {
        Output::Stdout => eprint!("{}", summary_text(&file)),
        Output::File(_) => print!("{}", summary_text(&file)),
    }
    match output {
        Output::Stdout => {
            serde_json::to_writer(std::io::stdout().lock(), &file).context("writing to stdout")?;
            println!();
        }
        Output::File(path) => document::write_atomic(&path, |w| {
            serde_json::to_writer(&mut *w, &file)?;
            Ok(())
        })?,
    }
    Ok(0)
}

/// Runs the bench: warmup, recorded runs, summary. Prints progress only.
pub fn execute(args: &BenchArgs) -> anyhow::Result<BenchEnd> {
    if args.command.is_empty() {
        return Err(exit::failure(
            exit::USAGE,
            "no command to benchmark; give it after `--`",
        ));
    }
    crate::child::resolve(&args.command[0])?;
    Privileges::current().require_bpf()?;
    let dir = tempfile::tempdir().context("creating a temporary directory for the runs")?;
    let total = args.warmup + args.runs;
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(u64::from(total));
        b.set_style(
            indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut runs = Vec::new();
    let mut codes = Vec::new();
    for i in 0..total {
        let warm = i < args.warmup;
        if let Some(b) = &bar {
            b.set_prefix(if warm { "warmup" } else { "run" });
        }
        if let Some(p) = &args.prepare {
            prepare(p)?;
        }
        let path: PathBuf = dir.path().join(format!("run-{i}.json"));
        let (code, rec) = record_run(args, &path)?;
        if let Some(b) = &bar {
            b.inc(1);
        }
        if code != 0 {
            let msg = format!(
                "{} {} of `{}` exited with {code}",
                if warm { "warmup run" } else { "run" },
                if warm { i + 1 } else { i - args.warmup + 1 },
                args.command.join(" ")
            );
            if !args.ignore_failure {
                if let Some(b) = &bar {
                    b.abandon();
                }
                eprintln!("vmscope: {msg}; stopping (use --ignore-failure to go on)");
                return Ok(BenchEnd::Failed(
                    u8::try_from(code).unwrap_or(exit::WRAPPER_FAILED),
                ));
            }
            eprintln!("vmscope: {msg}; going on (--ignore-failure)");
        }
        if !warm {
            codes.push(code);
            runs.push(rec);
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    Ok(BenchEnd::Done(Box::new(assemble(args, runs, codes))))
}

/// The bench file of recorded runs (in run order) and their exit codes.
pub fn assemble(args: &BenchArgs, runs: Vec<Recording>, codes: Vec<i32>) -> BenchFile {
    let per_run: Vec<Vec<RunMetric>> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            metrics::run_metrics_with(r, &args.metric).unwrap_or_else(|e| {
                eprintln!("vmscope: run {}: {e}; left out of its summary", i + 1);
                metrics::run_metrics(r)
            })
        })
        .collect();
    let summary = metrics::summarize(&per_run, args.trim);
    let get = |name: &str| summary.get(name);
    let results = get("real").map(|real| BenchResult {
        command: args.command.join(" "),
        mean: stats::mean(&real.values),
        stddev: real.stddev,
        median: real.median,
        min: real.min,
        max: real.max,
        user: get("user").map_or(0.0, |u| stats::mean(&u.values)),
        system: get("sys").map_or(0.0, |s| stats::mean(&s.values)),
        times: real.values.clone(),
        exit_codes: codes,
    });
    BenchFile {
        kind: BENCH_KIND.into(),
        schema_version: BENCH_SCHEMA_VERSION,
        tool: Tool::this(),
        name: args.name.clone().unwrap_or_else(|| args.command.join(" ")),
        command: args.command.clone(),
        warmup: args.warmup,
        runs_requested: args.runs,
        trim: args.trim,
        results: results.into_iter().collect(),
        metrics: summary,
        runs,
    }
}

/// The printed summary: per metric, in compare's row order (times first,
/// then the workload's own figures, faults, swap, reclaim, ...), the trimmed
/// mean ± stddev with min, median and max, in human units.
pub fn summary_text(f: &BenchFile) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let runs = f.runs.len();
    let _ = writeln!(
        s,
        "{}: {runs} runs after {} warmup, mean with the {} lowest and {} highest dropped",
        f.name, f.warmup, f.trim, f.trim
    );
    s.push_str(&summary_table(&f.metrics));
    s
}

/// The summary's table: a header, then a row per metric.
fn summary_table(metrics: &BTreeMap<String, MetricSummary>) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<28} {:>24} {:>12} {:>12} {:>12}  unit",
        "metric", "trimmed mean ± stddev", "min", "median", "max"
    );
    let mut names: Vec<&String> = metrics.keys().collect();
    names.sort_by(|a, b| crate::model::catalogue::by_rank(a, b));
    for name in names {
        let m = &metrics[name];
        let v = |x: f64| summary_value(x, &m.unit);
        let _ = writeln!(
            s,
            "{name:<28} {:>24} {:>12} {:>12} {:>12}  {}",
            format!("{} ± {}", v(m.trimmed_mean), v(m.stddev)),
            v(m.min),
            v(m.median),
            v(m.max),
            unit_column(&m.unit)
        );
    }
    s
}

/// Units a value carries in its text (`1.236 s`, `40.2 MiB`); others are
/// named in the unit column.
const SPOKEN_UNITS: &[&str] = &["s", "ms", "µs", "ns", "bytes", "%"];

/// Plain counts (pages, calls, faults) have no fraction worth showing.
fn is_count(unit: &str) -> bool {
    matches!(unit, "" | "pages" | "calls" | "samples" | "count")
}

fn summary_value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    if is_count(unit) {
        crate::units::fmt_value(v.round(), unit)
    } else {
        crate::units::fmt_value(v, unit)
    }
}

fn unit_column(unit: &str) -> &str {
    if SPOKEN_UNITS.contains(&unit) {
        ""
    } else {
        unit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(unit: &str, values: &[f64]) -> MetricSummary {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        MetricSummary {
            unit: unit.into(),
            better: metrics::Better::Lower,
            values: values.to_vec(),
            trimmed_mean: stats::mean(values),
            trim: 0,
            min: sorted[0],
            median: stats::median_of_sorted(&sorted),
            max: sorted[sorted.len() - 1],
            stddev: 1.608,
        }
    }

    fn table(rows: &[(&str, &str, &[f64])]) -> Vec<String> {
        let metrics = rows
            .iter()
            .map(|(n, u, v)| (n.to_string(), summary(u, v)))
            .collect();
        summary_table(&metrics)
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_summary_puts_times_first_then_the_workloads_figures() {
        let rows = table(&[
            ("pgscan_direct", "pages", &[1.0]),
            ("pswpin", "pages", &[2.0]),
            ("real", "s", &[1.0, 1.5]),
            ("sys", "s", &[0.5]),
            ("lazyfree/records_per_sec", "/s", &[10.0]),
            ("faults", "", &[3.0]),
        ]);
        let order: Vec<&str> = rows[1..]
            .iter()
            .map(|r| r.split_whitespace().next().unwrap_or_default())
            .collect();
        assert_eq!(
            order,
            [
                "real",
                "sys",
                "lazyfree/records_per_sec",
                "faults",
                "pswpin",
                "pgscan_direct"
            ]
        );
    }

    #[test]
    fn the_summary_speaks_human_units() {
        let rows = table(&[
            ("real", "s", &[1.236, 1.236]),
            ("maxrss", "bytes", &[42172416.0]),
            ("pswpout", "pages", &[39001.0, 39002.0]),
            ("mb_s/throughput_mb_s", "MB/s", &[730.719]),
        ]);
        let row = |name: &str| {
            rows.iter()
                .find(|r| r.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} row in {rows:#?}"))
                .clone()
        };
        assert!(row("real").contains("1.236 s ± 1.608 s"), "{}", row("real"));
        assert!(row("maxrss").contains("40.2 MiB"), "{}", row("maxrss"));
        // Counts: no decimals, the unit in its column.
        let p = row("pswpout");
        assert!(
            p.contains("39002 ± 2") && p.trim_end().ends_with("pages"),
            "{p}"
        );
        assert!(!p.contains('.'), "{p}");
        // A throughput is never shown in seconds.
        let t = row("mb_s/throughput_mb_s");
        assert!(
            t.contains("730.7 ±") && t.trim_end().ends_with("MB/s"),
            "{t}"
        );
        assert!(!t.contains(" s "), "{t}");
    }
}
