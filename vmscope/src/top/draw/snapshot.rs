//! The plain-text snapshot of `--batch`.

use std::fmt::Write as _;

use crate::{
    model::catalogue,
    top::app::{App, CGROUP_COLUMNS, COLUMNS, FIRST_RATE},
};

use super::cells::fmt_rate;
use super::cells::{cgroup_cells, proc_cells};
use super::header_lines;
use super::tables::WSS_WIDTH;

/// The cgroup table as `--batch` prints it, or why there is none.
pub(super) fn cgroups_text(app: &App, out: &mut String) {
    if let Some(why) = app
        .view
        .as_ref()
        .and_then(|v| v.cgroups_unavailable.as_deref())
    {
        let _ = writeln!(out, "cgroups: unavailable ({why})");
        return;
    }
    let shown = app.table_columns(true).len();
    let line = |c: &[String]| {
        let (rates, books) = c[FIRST_RATE..shown].split_at(catalogue::COLUMN_COUNT);
        let mut l = format!("{:<24} {:>5}", c[0], c[1]);
        rates_text(&mut l, rates);
        for (b, w) in books.iter().zip([7, 7, 6, usize::from(WSS_WIDTH)]) {
            let _ = write!(l, " {b:>w$}");
        }
        l
    };
    let titles: Vec<String> = CGROUP_COLUMNS.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(out, "{}", line(&titles));
    for r in app.cgroup_rows() {
        let mut c = cgroup_cells(&r);
        c[0] = c[0].split_whitespace().collect::<Vec<_>>().join("_");
        let _ = writeln!(out, "{}", line(&c));
    }
}

/// The rate cells of a `--batch` line, each right-aligned at its column's
/// width.
fn rates_text(line: &mut String, rates: &[String]) {
    for (r, (_, c)) in rates.iter().zip(catalogue::columns()) {
        let _ = write!(line, " {r:>w$}", w = usize::from(c.width));
    }
}

/// One `--batch` snapshot: the header, the rates and the whole table, and
/// with `cgroups` the whole cgroup table after it.
pub fn snapshot_text(app: &App, cgroups: bool) -> String {
    let mut out = String::new();
    for l in header_lines(&app.header, app) {
        let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
        let _ = writeln!(out, "{text}");
    }
    if let Some(v) = &app.view {
        for r in &v.rates {
            let value = match (&r.unavailable, r.value) {
                (Some(why), _) => format!("n/a ({why})"),
                (None, None) => "n/a".to_string(),
                (None, v) => format!("{} {}", fmt_rate(v), r.unit),
            };
            let detail = r
                .detail
                .as_deref()
                .map_or(String::new(), |d| format!("  ({d})"));
            let _ = writeln!(out, "{:<20} {value}{detail}", r.name);
        }
    }
    let _ = writeln!(out, "{}", app.sort_label());
    // WSS after the rates, when the working set is measured.
    let wss = app.working_set();
    let line = |pid: &str, comm: &str, rates: &[String]| {
        let mut l = format!("{pid:>8} {comm:<16}");
        rates_text(&mut l, rates);
        if wss {
            let w = &rates[catalogue::COLUMN_COUNT];
            let _ = write!(l, " {w:>n$}", n = usize::from(WSS_WIDTH));
        }
        l
    };
    let titles: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(
        out,
        "{}",
        line(&titles[0], &titles[1], &titles[FIRST_RATE..])
    );
    for r in app.rows() {
        let c = proc_cells(&r);
        let comm = if c[1].is_empty() { "?" } else { c[1].as_str() };
        let comm: String = comm.split_whitespace().collect::<Vec<_>>().join("_");
        let _ = writeln!(out, "{}", line(&c[0], &comm, &c[FIRST_RATE..]));
    }
    if cgroups {
        cgroups_text(app, &mut out);
    }
    out
}
