//! The report as text: the method and regressions lines, the table,
//! markdown and JSON.

use std::fmt::Write as _;

use crate::units::fmt_value;

use super::ALPHA;
use super::rows::{Report, SideInfo, SideStats, Statistics, one_sided_line};
use super::rows::{pct, pct_of, signed_pct};

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

pub(super) fn side_line(label: &str, s: &SideInfo) -> String {
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
pub(super) fn cells(r: &Report) -> (Vec<&'static str>, Vec<Vec<String>>) {
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

pub(super) fn fmt_p(p: f64) -> String {
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
