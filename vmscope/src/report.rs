//! `vmscope report`: a recording as one self-contained HTML page (inline
//! SVG, no script, no network): the run's metadata, a plot per rate in the
//! time series, every latency histogram, and the per-process table.

use std::fmt::Write as _;

use anyhow::Context as _;
use plotters::prelude::*;

use crate::{
    cli::ReportArgs,
    exit,
    hist::Summary,
    record::{self, Recording},
    tui::draw::fmt_ns,
};

/// Plot size in pixels.
const W: u32 = 640;
const H: u32 = 260;

/// One plot: its file-friendly id, title and SVG text.
pub struct Plot {
    pub id: String,
    pub title: String,
    pub svg: String,
}

pub fn run(args: &ReportArgs) -> anyhow::Result<u8> {
    // The reader's messages already name the file.
    let rec = record::read(&args.file)
        .map_err(|e| exit::failure(exit::USAGE, crate::exit::message_of(&e)))?;
    let out = match &args.output {
        Some(p) => p.clone(),
        None => args.file.with_extension("html"),
    };
    let output = record::Output::prepare(&out)?;
    if let Some(dir) = &args.svg
        && !dir.is_dir()
    {
        return Err(exit::failure(
            exit::FAILURE,
            format!("--svg {}: not a directory; create it first", dir.display()),
        ));
    }
    let plots = plots(&rec)?;
    let html = page(&rec, &plots);
    match output {
        record::Output::Stdout => print!("{html}"),
        record::Output::File(path) => record::write_atomic(&path, |w| {
            use std::io::Write as _;
            w.write_all(html.as_bytes())?;
            Ok(())
        })?,
    }
    if let Some(dir) = &args.svg {
        for p in &plots {
            let path = dir.join(format!("{}.svg", p.id));
            std::fs::write(&path, &p.svg).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    eprintln!(
        "vmscope report: {} plots written to {}",
        plots.len(),
        out.display()
    );
    Ok(0)
}

/// The series columns worth a plot, with their unit per second.
fn interesting(name: &str) -> Option<(&'static str, f64)> {
    Some(match name {
        "faults" => ("faults/s (system)", 1.0),
        "scope_faults" => ("faults/s (scope)", 1.0),
        "major_faults" => ("major faults/s", 1.0),
        "vmstat_pswpin" => ("swap-in pages/s", 1.0),
        "vmstat_pswpout" => ("swap-out pages/s", 1.0),
        "swap_out_pages" => ("attributed swap-out pages/s", 1.0),
        "swap_in_pages" => ("attributed swap-in pages/s", 1.0),
        "vmstat_pgscan_direct" => ("pages scanned by direct reclaim/s", 1.0),
        "vmstat_pgscan_kswapd" => ("pages scanned by kswapd/s", 1.0),
        "vmstat_pgsteal_direct" => ("pages reclaimed directly/s", 1.0),
        "vmstat_pgsteal_kswapd" => ("pages reclaimed by kswapd/s", 1.0),
        "tlb_remote_send_ipi" => ("TLB shootdown IPIs/s", 1.0),
        "tlb_task_switch" => ("TLB flushes at task switch/s", 1.0),
        "vmstat_pglazyfree" => ("pages lazily freed (MADV_FREE)/s", 1.0),
        "vmstat_pglazyfreed" => ("lazily freed pages reclaimed/s", 1.0),
        "vmstat_workingset_refault_anon" => ("anon refaults/s", 1.0),
        "vmstat_workingset_refault_file" => ("file refaults/s", 1.0),
        "psi_some_stall_us" => ("PSI memory some, % of time", 1e-4),
        "psi_full_stall_us" => ("PSI memory full, % of time", 1e-4),
        _ => return None,
    })
}

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a plot: {e:?}")
}

/// A line plot of (seconds, value) points.
fn line_plot(title: &str, unit: &str, points: &[(f64, f64)]) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let x_max = points.iter().map(|p| p.0).fold(1.0, f64::max);
        let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(unit)
            .y_label_formatter(&|v| {
                if *v >= 100.0 || v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.1}")
                }
            })
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_err)?;
        chart
            .draw_series(LineSeries::new(points.iter().copied(), &BLUE))
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// A bar chart of a log2 latency histogram: one bar per bucket from the
/// first non-empty to the last (gaps shown), counts on a log axis so a tail
/// of a few samples stays visible next to a peak of thousands.
fn histogram_plot(title: &str, s: &Summary) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let first = s.buckets.iter().position(|b| b.count > 0).unwrap_or(0);
        let last = s.buckets.iter().rposition(|b| b.count > 0).unwrap_or(0);
        let bars: Vec<&crate::hist::Bucket> = s.buckets[first..=last.max(first)].iter().collect();
        let n = bars.len().max(1) as u32;
        let y_max = bars.iter().map(|b| b.count).max().unwrap_or(1).max(1) as f64 * 2.0;
        let labels: Vec<String> = bars
            .iter()
            .map(|b| format!("≤{}", fmt_ns(b.le_ns)))
            .collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d((0..n).into_segmented(), (0.5..y_max).log_scale())
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n as usize)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&|v| format!("{v:.0}"))
            .y_desc("count (log)")
            .draw()
            .map_err(plot_err)?;
        chart
            .draw_series(
                bars.iter()
                    .enumerate()
                    .filter(|(_, b)| b.count > 0)
                    .map(|(i, b)| {
                        let i = i as u32;
                        Rectangle::new(
                            [
                                (SegmentValue::Exact(i), 0.5),
                                (SegmentValue::Exact(i + 1), b.count as f64),
                            ],
                            BLUE.filled(),
                        )
                    }),
            )
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// Every plot of the report, in page order.
pub fn plots(rec: &Recording) -> anyhow::Result<Vec<Plot>> {
    let mut out = Vec::new();
    let series = &rec.series;
    for (name, col) in &series.metrics {
        let Some((title, scale)) = interesting(name) else {
            continue;
        };
        let points: Vec<(f64, f64)> = col
            .iter()
            .zip(&series.end_ns)
            .zip(&series.duration_ns)
            .filter_map(|((v, &end), &dur)| {
                let v = (*v)? as f64;
                (dur > 0).then(|| (end as f64 / 1e9, v * scale * 1e9 / dur as f64))
            })
            .collect();
        // One point draws no line; nothing but zeros says nothing.
        if points.len() < 2 || points.iter().all(|p| p.1 == 0.0) {
            continue;
        }
        let unit = if name.starts_with("psi_") {
            "% of time"
        } else {
            "per second"
        };
        out.push(Plot {
            id: format!("rate-{name}"),
            title: String::new(),
            svg: line_plot(title, unit, &points)?,
        });
    }
    for (name, s) in &rec.totals.vm.histograms {
        if s.count == 0 {
            continue;
        }
        let q = |v: Option<u64>| v.map_or("n/a".into(), fmt_ns);
        let title = format!(
            "{name}: n={} p50 {} p90 {} p99 {} max {}",
            s.count,
            q(s.p50_ns),
            q(s.p90_ns),
            q(s.p99_ns),
            q(s.max_ns)
        );
        out.push(Plot {
            id: format!("latency-{name}"),
            title,
            svg: histogram_plot(&format!("{name} latency"), s)?,
        });
    }
    Ok(out)
}

/// A command line as a shell would need it typed.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn opt(v: Option<u64>) -> String {
    v.map_or("n/a".into(), |v| v.to_string())
}

/// The whole page.
pub fn page(rec: &Recording, plots: &[Plot]) -> String {
    let h = &rec.header;
    let mut s = String::new();
    let title = match &h.command {
        Some(c) => format!("vmscope: {}", shell_words(c)),
        None => "vmscope: system-wide recording".into(),
    };
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>\
         body{{font-family:sans-serif;margin:2em;max-width:1400px}}\
         table{{border-collapse:collapse;margin:1em 0}}\
         td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}\
         th{{background:#eee}} td.l,th.l{{text-align:left}}\
         .plots{{display:flex;flex-wrap:wrap;gap:1em}} figure{{margin:0}}\
         </style></head><body data-plots=\"{}\">\n",
        html_escape(&title),
        plots.len()
    );
    let _ = writeln!(s, "<h1>{}</h1>", html_escape(&title));
    let _ = writeln!(s, "<table><tbody>");
    let mut meta = vec![
        ("vmscope", format!("{} {}", h.tool.name, h.tool.version)),
        (
            "kernel",
            format!("{} {}", h.kernel.release, h.kernel.machine),
        ),
        ("host", h.kernel.hostname.clone()),
        ("scope", format!("{:?} {:?}", h.scope.kind, h.scope.pids)),
        ("start", h.start_time.clone()),
        ("end", rec.end_time.clone()),
        ("duration", format!("{:.1} s", rec.duration_ns as f64 / 1e9)),
        ("interval", format!("{} ms", h.interval_ns / 1_000_000)),
    ];
    if let Some(c) = &rec.child {
        let r = &c.rusage;
        meta.push(("exit code", c.exit_code.to_string()));
        meta.push((
            "command time",
            format!(
                "wall {:.2} s, user {:.2} s, sys {:.2} s, minflt {}, majflt {}",
                r.wall_ns as f64 / 1e9,
                r.user_ns as f64 / 1e9,
                r.sys_ns as f64 / 1e9,
                r.minflt,
                r.majflt
            ),
        ));
    }
    if let Some(why) = &rec.interrupted_by {
        meta.push(("interrupted by", why.clone()));
    }
    for (k, v) in meta {
        let _ = writeln!(
            s,
            "<tr><th class=\"l\">{k}</th><td class=\"l\">{}</td></tr>",
            html_escape(&v)
        );
    }
    let _ = writeln!(s, "</tbody></table>");
    let missing: Vec<String> = h
        .probes
        .iter()
        .filter(|p| !p.usable())
        .map(|p| {
            format!(
                "{}: {}",
                p.probe,
                p.reason.as_deref().unwrap_or("not attached")
            )
        })
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(s, "<h2>Unavailable</h2><ul>");
        for m in missing {
            let _ = writeln!(s, "<li>{}</li>", html_escape(&m));
        }
        let _ = writeln!(s, "</ul>");
    }
    let _ = writeln!(s, "<h2>Rates and latency</h2><div class=\"plots\">");
    for p in plots {
        let _ = writeln!(
            s,
            "<figure class=\"plot\" id=\"{}\">{}{}</figure>",
            html_escape(&p.id),
            p.svg,
            if p.title.is_empty() {
                String::new()
            } else {
                format!("<figcaption>{}</figcaption>", html_escape(&p.title))
            }
        );
    }
    let _ = writeln!(s, "</div>");
    let _ = writeln!(
        s,
        "<h2>Processes</h2><table><thead><tr><th>pid</th><th class=\"l\">comm</th>\
         <th>faults</th><th>major</th><th>swap-out pages</th><th>swap-in pages</th>\
         <th>direct reclaim ms</th><th>memcg reclaim ms</th><th>madvise</th>\
         <th>shootdowns sent</th></tr></thead><tbody>"
    );
    for p in &rec.processes {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
            p.pid,
            html_escape(&p.comm),
            opt(p.faults.total),
            opt(p.major_faults),
            opt(p.swap_out_pages),
            opt(p.swap_in_pages),
            p.direct_reclaim_ns as f64 / 1e6,
            p.memcg_reclaim_ns as f64 / 1e6,
            p.madvise_calls,
            p.tlb_shootdowns
        );
    }
    let _ = writeln!(s, "</tbody></table>");
    let _ = writeln!(
        s,
        "<p>{} of at most {} processes, largest fault count first. Latency buckets are \
         log2 nanoseconds; percentiles are bucket upper bounds.</p>",
        rec.processes.len(),
        rec.processes_limit
    );
    let _ = writeln!(s, "</body></html>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_plots_have_svg() {
        assert_eq!(html_escape("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
        let svg = line_plot("t", "per second", &[(0.0, 1.0), (1.0, 3.0)]).expect("plot");
        assert_eq!(
            shell_words(&["sh".into(), "-c".into(), "a && b".into(), "it's".into()]),
            "sh -c 'a && b' 'it'\\''s'"
        );
        assert!(svg.starts_with("<svg"), "{svg}");
        let s = Summary {
            count: 3,
            buckets: vec![crate::hist::Bucket {
                le_ns: 1024,
                count: 3,
            }],
            ..Default::default()
        };
        let svg = histogram_plot("h", &s).expect("plot");
        assert!(svg.contains("<rect"), "{svg}");
    }
}
