//! The recording layout: the run's metadata, its OOM kills with each
//! one's lead-up, a plot per rate in the time series (each kill marked),
//! every latency histogram, and the per-process and per-cgroup tables. A
//! bench page reuses it for each run.

use std::fmt::Write as _;

use super::{Plot, cgroups, charts, figures, html_escape, meta_table, oom, shell_words};
use crate::{
    model::{catalogue::reclaim, hist::Summary, recording::Recording},
    units::fmt_ns,
};

/// The series columns worth a plot, with their unit per second.
fn interesting(name: &str) -> Option<(&'static str, f64)> {
    Some(match name {
        "faults" => ("faults/s (system)", 1.0),
        "scope_faults" => ("faults/s (scope)", 1.0),
        "major_faults" => ("major faults/s", 1.0),
        "vmstat_pswpin" => ("swap-in pages/s from the device", 1.0),
        "vmstat_pswpout" => ("swap-out pages/s to the device", 1.0),
        "vmstat_zswpin" => ("swap-in pages/s from zswap", 1.0),
        "vmstat_zswpout" => ("swap-out pages/s to zswap (compressed in RAM)", 1.0),
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
        "vmstat_thp_fault_alloc" => ("THP faults that got a huge page/s", 1.0),
        "vmstat_thp_fault_fallback" => ("THP faults that fell back to small pages/s", 1.0),
        "page_cache_read_pages" => ("pages reads asked the page cache for/s", 1.0),
        "page_cache_added_pages" => ("pages added to the page cache/s", 1.0),
        "page_cache_evicted_pages" => ("pages evicted from the page cache/s", 1.0),
        "psi_some_stall_us" => ("PSI memory some, % of time", 1e-4),
        "psi_full_stall_us" => ("PSI memory full, % of time", 1e-4),
        _ => return None,
    })
}

/// A histogram's caption: count and quantiles.
pub fn quantiles(name: &str, s: &Summary) -> String {
    let q = |v: Option<u64>| v.map_or("n/a".into(), fmt_ns);
    format!(
        "{name}: n={} p50 {} p90 {} p99 {} max {}",
        s.count,
        q(s.p50_ns),
        q(s.p90_ns),
        q(s.p99_ns),
        q(s.max_ns)
    )
}

/// Every plot of a recording, in page order; ids start with `prefix`.
pub fn plots(rec: &Recording, prefix: &str) -> anyhow::Result<Vec<Plot>> {
    let mut out = Vec::new();
    let series = &rec.series;
    let marks = oom::marks(rec);
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
            id: format!("{prefix}rate-{name}"),
            title: String::new(),
            svg: charts::line_plot(title, unit, &points, &marks)?,
        });
    }
    if let Some(ws) = &rec.working_set {
        // Each window's figure at its end; one point draws no line.
        let points: Vec<(f64, f64)> = rec
            .samples
            .iter()
            .flat_map(|s| &s.working_set)
            .map(|w| {
                (
                    w.end_ns as f64 / 1e9,
                    w.total_bytes() as f64 / (1024.0 * 1024.0),
                )
            })
            .collect();
        if points.len() >= 2 {
            out.push(Plot {
                id: format!("{prefix}working-set"),
                title: ws.summary(),
                svg: charts::line_plot(
                    &format!(
                        "working set ({} window, {})",
                        crate::model::wss::window_label(ws.setup.window_ns),
                        ws.setup.method.name()
                    ),
                    "MiB",
                    &points,
                    &marks,
                )?,
            });
        }
    }
    for (name, s) in &rec.totals.vm.histograms {
        if s.count == 0 {
            continue;
        }
        out.push(Plot {
            id: format!("{prefix}latency-{name}"),
            title: quantiles(name, s),
            svg: charts::histogram_plot(&format!("{name} latency"), s)?,
        });
    }
    Ok(out)
}

/// The page title of a recording.
pub fn title(rec: &Recording) -> String {
    match &rec.header.command {
        Some(c) => format!("vmscope: {}", shell_words(c)),
        None => "vmscope: system-wide recording".into(),
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or("n/a".into(), |v| v.to_string())
}

/// Everything of a recording below its title, with headings at `level`
/// (2 on its own page, lower inside a bench page).
pub fn body(rec: &Recording, plots: &[Plot], level: u8) -> String {
    let h = &rec.header;
    let mut s = String::new();
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
    s.push_str(&meta_table(&meta));
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
        let _ = writeln!(s, "<h{level}>Unavailable</h{level}><ul>");
        for m in missing {
            let _ = writeln!(s, "<li>{}</li>", html_escape(&m));
        }
        let _ = writeln!(s, "</ul>");
    }
    s.push_str(&oom::section(rec, level));
    let _ = writeln!(s, "<h{level}>Rates and latency</h{level}>");
    s.push_str(&figures(plots));
    let _ = writeln!(
        s,
        "<h{level}>Processes</h{level}><table><thead><tr><th>pid</th><th class=\"l\">comm</th>\
         <th>faults</th><th>major</th><th>swap-out pages</th><th>swap-in pages</th>\
         <th>direct reclaim ms</th><th>memcg reclaim ms</th><th>madvise</th>\
         <th>shootdowns sent</th></tr></thead><tbody>"
    );
    for p in &rec.processes {
        let stalls: String = reclaim::STALLS
            .iter()
            .map(|k| format!("<td>{:.1}</td>", k.ns.total(p).unwrap_or(0) as f64 / 1e6))
            .collect();
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             {stalls}<td>{}</td><td>{}</td></tr>",
            p.pid,
            html_escape(&p.comm),
            opt(p.faults.total),
            opt(p.major_faults),
            opt(p.swap_out_pages),
            opt(p.swap_in_pages),
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
    s.push_str(&cgroups::section(rec, level));
    s
}
