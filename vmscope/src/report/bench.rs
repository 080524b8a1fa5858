//! The bench layout: the bench's metadata, per-run plots (times and the
//! main VM figures run by run), each metric's distribution over the runs
//! with its trimmed mean and median, the summary table, and every run's own
//! recording report, collapsed, with an anchor per run.

use std::{collections::BTreeMap, fmt::Write as _};

use plotters::style::RGBColor;

use super::{Plot, charts, figures, html_escape, meta_table, recording, shell_words};
use crate::{
    model::{
        bench::BenchFile,
        metrics::{RunMetric, main_vm},
    },
    units::fmt_value,
};

/// The times drawn together, run by run.
const TIMES: &[(&str, RGBColor)] = &[
    ("real", RGBColor(31, 119, 180)),
    ("user", RGBColor(44, 160, 44)),
    ("sys", RGBColor(214, 39, 40)),
];

/// The plots of a bench page: the bench's own, then each run's.
pub struct BenchPlots {
    pub bench: Vec<Plot>,
    pub runs: Vec<Vec<Plot>>,
}

/// Each metric's value in each run (None where a run lacks it).
fn per_run(runs: &[Vec<RunMetric>], name: &str) -> Vec<Option<f64>> {
    runs.iter()
        .map(|r| r.iter().find(|m| m.name == name).map(|m| m.value))
        .collect()
}

/// Metric names in page order: times first, then by name.
fn ordered(b: &BenchFile) -> Vec<&String> {
    let mut names: Vec<&String> = b.metrics.keys().collect();
    names.sort_by_key(|n| {
        (
            crate::model::catalogue::headline()
                .position(|f| f == n.as_str())
                .unwrap_or(usize::MAX),
            n.as_str(),
        )
    });
    names
}

pub fn plots(b: &BenchFile) -> anyhow::Result<BenchPlots> {
    let runs = b.run_metrics();
    let mut out = Vec::new();
    let times: Vec<charts::RunSeries> = TIMES
        .iter()
        .map(|&(name, color)| charts::RunSeries {
            label: name,
            color,
            values: per_run(&runs, name),
        })
        .filter(|s| s.values.iter().any(Option::is_some))
        .collect();
    if !times.is_empty() {
        out.push(Plot {
            id: "per-run-times".into(),
            title: "Wall (real), user and system time of each run.".into(),
            svg: charts::per_run_plot("times per run", "seconds", &times)?,
        });
    }
    // The main VM figures run by run (when any run has a non-zero value).
    for name in main_vm() {
        let values = per_run(&runs, name);
        if !values.iter().flatten().any(|v| *v != 0.0) {
            continue;
        }
        let unit = b.metrics.get(name).map_or("", |m| m.unit.as_str());
        out.push(Plot {
            id: format!("per-run-{name}"),
            title: String::new(),
            svg: charts::per_run_plot(
                &format!("{name} per run"),
                unit,
                &[charts::RunSeries {
                    label: name,
                    color: RGBColor(31, 119, 180),
                    values,
                }],
            )?,
        });
    }
    for name in ordered(b) {
        let m = &b.metrics[name];
        if m.values.iter().all(|v| *v == 0.0) {
            continue;
        }
        out.push(Plot {
            id: format!("dist-{name}"),
            title: format!(
                "{name}: trimmed mean {} (red), median {} (green), {} runs",
                fmt_value(m.trimmed_mean, &m.unit),
                fmt_value(m.median, &m.unit),
                m.values.len()
            ),
            svg: charts::strip_plot(name, &m.unit, &m.values, m.trimmed_mean, m.median)?,
        });
    }
    let runs = b
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| recording::plots(r, &format!("run{}-", i + 1)))
        .collect::<anyhow::Result<_>>()?;
    Ok(BenchPlots { bench: out, runs })
}

pub fn title(b: &BenchFile) -> String {
    format!("vmscope bench: {}", b.name)
}

/// The page body below the title.
pub fn body(b: &BenchFile, plots: &BenchPlots) -> String {
    let mut s = meta_table(&meta(b));
    let (per_run, dist): (Vec<&Plot>, Vec<&Plot>) = plots
        .bench
        .iter()
        .partition(|p| p.id.starts_with("per-run-"));
    let _ = writeln!(s, "<h2 id=\"per-run\">Run by run</h2>");
    s.push_str(&figures(per_run));
    let _ = writeln!(
        s,
        "<h2 id=\"distributions\">Distributions</h2>\
         <p>Each dot is one run; the red line is the trimmed mean, the green line the median.</p>"
    );
    s.push_str(&figures(dist));
    summary_table(&mut s, b);
    runs_table(&mut s, b);
    for (i, (rec, run_plots)) in b.runs.iter().zip(&plots.runs).enumerate() {
        let n = i + 1;
        let wall = rec.child.as_ref().map_or(String::new(), |c| {
            format!(
                ": wall {}, exit code {}",
                fmt_value(c.rusage.wall_ns as f64 / 1e9, "s"),
                c.exit_code
            )
        });
        let _ = writeln!(
            s,
            "<details id=\"run-{n}\" class=\"run\"><summary>Run {n}{}</summary>",
            html_escape(&wall)
        );
        s.push_str(&recording::body(rec, run_plots, 3));
        let _ = writeln!(s, "</details>");
    }
    s
}

/// What was run, how, and where (from the first run's header).
fn meta(b: &BenchFile) -> Vec<(&'static str, String)> {
    let codes: Vec<String> = b
        .results
        .iter()
        .flat_map(|r| r.exit_codes.iter().map(i32::to_string))
        .collect();
    let mut meta = vec![
        ("name", b.name.clone()),
        ("command", shell_words(&b.command)),
        ("vmscope", format!("{} {}", b.tool.name, b.tool.version)),
        (
            "runs",
            format!("{} summarised of {} asked", b.runs.len(), b.runs_requested),
        ),
        ("warmup", format!("{} unrecorded runs first", b.warmup)),
        (
            "trim",
            format!(
                "trimmed mean without the {} lowest and {} highest of each metric",
                b.trim, b.trim
            ),
        ),
        ("exit codes", codes.join(" ")),
    ];
    if let Some(r) = b.runs.first() {
        meta.push((
            "kernel",
            format!("{} {}", r.header.kernel.release, r.header.kernel.machine),
        ));
        meta.push(("host", r.header.kernel.hostname.clone()));
        meta.push(("first run started", r.header.start_time.clone()));
    }
    meta
}

/// One row per metric: its trimmed mean and spread over the runs.
fn summary_table(s: &mut String, b: &BenchFile) {
    let _ = writeln!(
        s,
        "<h2 id=\"summary\">Summary</h2><table><thead><tr><th class=\"l\">metric</th>\
         <th class=\"l\">unit</th><th>runs</th><th>trimmed mean</th><th>min</th><th>median</th>\
         <th>max</th><th>stddev</th></tr></thead><tbody>"
    );
    for name in ordered(b) {
        let m = &b.metrics[name];
        let v = |x: f64| html_escape(&fmt_value(x, &m.unit));
        let _ = writeln!(
            s,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            html_escape(name),
            html_escape(&m.unit),
            m.values.len(),
            v(m.trimmed_mean),
            v(m.min),
            v(m.median),
            v(m.max),
            v(m.stddev)
        );
    }
    let _ = writeln!(s, "</tbody></table>");
}

/// One row per run, each linking to that run's section.
fn runs_table(s: &mut String, b: &BenchFile) {
    let _ = writeln!(
        s,
        "<h2 id=\"runs\">Runs</h2><table><thead><tr><th>run</th><th>exit code</th><th>real</th>\
         <th>user</th><th>sys</th><th>faults</th><th>major faults</th></tr></thead><tbody>"
    );
    let runs = b.run_metrics();
    for (i, rm) in runs.iter().enumerate() {
        let get: BTreeMap<&str, &RunMetric> = rm.iter().map(|m| (m.name.as_str(), m)).collect();
        let cell = |n: &str| {
            get.get(n)
                .map_or("n/a".into(), |m| html_escape(&fmt_value(m.value, &m.unit)))
        };
        let code = b.runs[i]
            .child
            .as_ref()
            .map_or("n/a".into(), |c| c.exit_code.to_string());
        let _ = writeln!(
            s,
            "<tr><td><a href=\"#run-{n}\">run {n}</a></td><td>{code}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            cell("real"),
            cell("user"),
            cell("sys"),
            cell("faults"),
            cell("major_faults"),
            n = i + 1
        );
    }
    let _ = writeln!(s, "</tbody></table>");
}
