//! A recording's OOM kills on its page: the kills' table, their marks on
//! the time-series plots, and each kill's lead-up ([`leadup`]). Nothing at
//! all when the recording has no kill.

use std::fmt::Write as _;

use super::{
    charts::Mark,
    html_escape,
    leadup::{self, Cell, LeadUp},
};
use crate::{
    model::{oom::OomKill, recording::Recording},
    units::fmt_value,
};

/// What a field the kernel's record lacks shows: not 0.
pub const NULL: &str = "–";

fn or_null<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| NULL.to_owned(), |v| v.to_string())
}

fn bytes(v: Option<u64>) -> String {
    v.map_or_else(|| NULL.to_owned(), |v| fmt_value(v as f64, "bytes"))
}

fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// A kill's name on plots and headings: `OOM kill: PID COMM`.
fn label(k: &OomKill) -> String {
    format!(
        "OOM kill: {} {}",
        or_null(k.pid),
        k.comm.as_deref().unwrap_or(NULL)
    )
}

/// Each kill as a mark on a time axis in seconds.
pub fn marks(rec: &Recording) -> Vec<Mark> {
    rec.oom_kills
        .iter()
        .map(|k| Mark {
            x: k.elapsed_ns as f64 / 1e9,
            label: label(k),
        })
        .collect()
}

/// Which limit the kill answered: the memcg's path, `none (system-wide)`,
/// or null when it could not be told.
fn limit_hit(k: &OomKill) -> String {
    match (k.constraint.as_deref(), k.limit_cgroup.as_deref()) {
        (Some("memcg"), Some(p)) => p.to_owned(),
        (Some("memcg"), None) => "a memory cgroup's (which one is unknown)".into(),
        (Some("global"), _) => "none (system-wide OOM)".into(),
        (Some("cpuset"), _) => "none (the cpuset's nodes ran out)".into(),
        (Some("mempolicy"), _) => "none (the mempolicy's nodes ran out)".into(),
        _ => NULL.into(),
    }
}

/// Where the limit hit was read, for the cell's tooltip.
fn limit_from(k: &OomKill) -> String {
    let from = match k.limit_source.as_deref() {
        Some("kernel_log") => "from the kernel log's OOM summary",
        Some("limit_counters") => "from the cgroups' limit-hit counters",
        _ => "not told",
    };
    match &k.limit_note {
        Some(n) => format!("{from}: {n}"),
        None => from.to_owned(),
    }
}

/// The OOM section of a recording's page, headings at `level`; empty when
/// there was no kill.
pub fn section(rec: &Recording, level: u8) -> String {
    if rec.oom_kills.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<section id=\"oom-kills\"><h{level}>OOM kills</h{level}>\
         <table><thead><tr><th>time</th><th class=\"l\">timestamp</th><th>pid</th>\
         <th class=\"l\">comm</th><th class=\"l\">cgroup</th><th class=\"l\">trigger cgroup</th>\
         <th class=\"l\">limit hit</th><th>anon RSS</th><th>file RSS</th><th>shmem RSS</th><th>oom_score_adj</th>\
         </tr></thead><tbody>"
    );
    for k in &rec.oom_kills {
        let _ = writeln!(
            s,
            "<tr class=\"oom-kill\"><td>{}</td><td class=\"l\">{}</td><td>{}</td>\
             <td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>\
             <td class=\"l\" title=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            secs(k.elapsed_ns),
            html_escape(&k.timestamp),
            or_null(k.pid),
            html_escape(k.comm.as_deref().unwrap_or(NULL)),
            html_escape(k.cgroup.as_deref().unwrap_or(NULL)),
            html_escape(k.trigger_cgroup.as_deref().unwrap_or(NULL)),
            html_escape(&limit_from(k)),
            html_escape(&limit_hit(k)),
            bytes(k.rss_anon_bytes),
            bytes(k.rss_file_bytes),
            bytes(k.rss_shmem_bytes),
            or_null(k.oom_score_adj),
        );
    }
    let _ = writeln!(
        s,
        "</tbody></table><p>Time since the recording began; each kill is the red line \
         on the plots over time. Limit hit: the memory cgroup whose limit the kill \
         answered, or none when the whole system ran out; its tooltip says where that \
         was read (the kernel log's OOM summary, exact, or the cgroups' limit-hit \
         counters). {NULL}: the kernel's record \
         lacks the field, or it could not be told.</p>"
    );
    let sub = level.saturating_add(1).min(6);
    for (i, k) in rec.oom_kills.iter().enumerate() {
        s.push_str(&lead_up_html(k, &leadup::lead_up(rec, k), i + 1, sub));
    }
    s.push_str("</section>\n");
    s
}

/// A cell as text: a figure in its unit, or why there is none.
fn cell(c: &Cell, unit: &str) -> String {
    match c {
        Cell::Value(v) => match unit {
            "ns" => fmt_value(*v as f64, "ns"),
            "bytes" => fmt_value(*v as f64, "bytes"),
            "pages" => format!("{v} pages"),
            _ => v.to_string(),
        },
        Cell::Since { value, from_ns } => format!(
            "{} (since its first reading at {})",
            cell(&Cell::Value(*value), unit),
            secs(*from_ns)
        ),
        Cell::Stall { us, window_ns } => {
            let stall = fmt_value(*us as f64 * 1e3, "ns");
            if *window_ns == 0 {
                stall
            } else {
                let pct = *us as f64 * 1e3 * 100.0 / *window_ns as f64;
                format!("{stall} ({pct:.1}% of {})", secs(*window_ns))
            }
        }
        Cell::Unavailable(why) => format!("unavailable: {why}"),
        Cell::Note(s) => s.clone(),
        Cell::Blank => String::new(),
    }
}

/// One kill's lead-up: the window and a row per figure, for the system,
/// the victim's cgroup and the victim.
fn lead_up_html(k: &OomKill, l: &LeadUp, n: usize, level: u8) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<div class=\"oom-leadup\" id=\"oom-leadup-{n}\"><h{level}>Lead-up to {} at {}</h{level}>",
        html_escape(&label(k)),
        secs(k.elapsed_ns)
    );
    if l.rows.is_empty() {
        let _ = writeln!(s, "<p>The recording has no samples.</p></div>");
        return s;
    }
    let _ = writeln!(
        s,
        "<p>The last {:.0} s before the kill (or since the recording began): from {} to {}, \
         the reading of the victim's final counters (or, when it was not followed, the first \
         reading after the kill). Growth over that window; stall time as a share of it.</p>",
        leadup::WINDOW_NS as f64 / 1e9,
        secs(l.from_ns),
        secs(l.to_ns),
    );
    let _ = writeln!(
        s,
        "<table><thead><tr><th class=\"l\">figure</th><th class=\"l\">system</th>\
         <th class=\"l\">cgroup {}</th><th class=\"l\">victim {} {}</th></tr></thead><tbody>",
        html_escape(l.cgroup.as_deref().unwrap_or(NULL)),
        or_null(k.pid),
        html_escape(k.comm.as_deref().unwrap_or(NULL)),
    );
    for r in &l.rows {
        let _ = writeln!(
            s,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td><td class=\"l\">{}</td>\
             <td class=\"l\">{}</td></tr>",
            html_escape(r.what),
            html_escape(&cell(&r.system, r.unit)),
            html_escape(&cell(&r.cgroup, r.unit)),
            html_escape(&cell(&r.victim, r.unit)),
        );
    }
    let _ = writeln!(s, "</tbody></table></div>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_cell_says_what_is_known_of_the_limit() {
        let kill = |constraint: Option<&str>, limit: Option<&str>| OomKill {
            constraint: constraint.map(Into::into),
            limit_cgroup: limit.map(Into::into),
            ..OomKill::default()
        };
        assert_eq!(limit_hit(&kill(Some("memcg"), Some("/p"))), "/p");
        assert_eq!(
            limit_hit(&kill(Some("memcg"), None)),
            "a memory cgroup's (which one is unknown)"
        );
        assert_eq!(
            limit_hit(&kill(Some("global"), None)),
            "none (system-wide OOM)"
        );
        assert_eq!(limit_hit(&kill(None, None)), NULL);
        let mut k = kill(Some("memcg"), Some("/p"));
        k.limit_source = Some("limit_counters".into());
        k.limit_note = Some("rate-limited".into());
        assert_eq!(
            limit_from(&k),
            "from the cgroups' limit-hit counters: rate-limited"
        );
    }
}
