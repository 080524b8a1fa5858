//! Drawing `vmscope top`, and the plain-text snapshot of `--batch`. Only
//! formatting: everything shown comes from [`App`] and its [`Model`].
//!
//! Here: the frame (header, status line, help) and its layout; the panels
//! are in `panels` (rates, latency) and `tables` (processes, cgroups), the
//! cell text in `cells`, the `--batch` text in `snapshot`.

mod cells;
mod panels;
mod snapshot;
mod tables;

use cells::fmt_bytes;
pub use cells::{fmt_rate, fmt_size, sparkline};
use panels::{latency_lines, rates_table};
pub use snapshot::snapshot_text;
use tables::draw_table;

use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Borders, Clear, Paragraph, Wrap},
};

use super::app::{App, HeaderFacts, OomSeen, Panel, Table as Shown};
use crate::model::view::Model;

/// The smallest terminal the layout is drawn in.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

fn header_lines(h: &HeaderFacts, app: &App) -> Vec<Line<'static>> {
    let mut first = vec![Span::styled(
        format!(
            "vmscope top  {}  up {}h{:02}m  every {}  probes {}/{} attached",
            h.kernel,
            h.uptime_s / 3600,
            h.uptime_s / 60 % 60,
            humantime::format_duration(app.interval),
            h.probes_attached,
            h.probes_total
        ),
        Style::default().add_modifier(Modifier::BOLD),
    )];
    if app.paused {
        first.push(Span::styled(
            "  [PAUSED]",
            Style::default().fg(Color::Black).bg(Color::Yellow),
        ));
    }
    if let Some(s) = &h.scope {
        first.push(Span::raw(format!("  scope: {s}")));
    }
    let psi = app.view.as_ref().and_then(|v| v.psi);
    let psi_text = match psi {
        Some(p) => format!(
            "PSI memory some {:.2}% full {}",
            p.some.avg10,
            p.full.map_or("n/a".into(), |f| format!("{:.2}%", f.avg10))
        ),
        None => "PSI n/a".into(),
    };
    let used = match (h.swap_total_bytes, h.swap_used_bytes) {
        (Some(0), _) => "swap: none".to_string(),
        (t, u) => format!("swap {} of {}", fmt_bytes(u), fmt_bytes(t)),
    };
    let second = Line::raw(format!(
        "free {}  {used}  {psi_text}",
        fmt_bytes(h.mem_free_bytes)
    ));
    let mut third: Vec<Span<'static>> = oom_text(&app.oom)
        .map(|t| {
            Span::styled(
                format!("{t}  "),
                Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            )
        })
        .into_iter()
        .collect();
    third.push(if h.unavailable.is_empty() {
        Span::raw("all probes attached")
    } else {
        Span::styled(
            format!("unavailable: {}", h.unavailable.join("; ")),
            Style::default().fg(Color::Yellow),
        )
    });
    vec![Line::from(first), second, Line::from(third)]
}

/// `OOM kills N` and the latest victim (`pid comm rss … ago`), once there
/// has been one since `top` started; nothing before.
fn oom_text(o: &OomSeen) -> Option<String> {
    if o.count == 0 && o.last.is_none() {
        return None;
    }
    let mut t = format!("OOM kills {}", o.count);
    if let Some(k) = &o.last {
        let or_unknown = |v: Option<String>| v.unwrap_or_else(|| "?".into());
        t.push_str(&format!(
            ", last: pid {} {}{}{} rss {} {}s ago",
            or_unknown(k.pid.map(|p| p.to_string())),
            or_unknown(k.comm.clone()),
            k.cgroup
                .as_deref()
                .map(|c| format!(" in {c}"))
                .unwrap_or_default(),
            match (k.constraint.as_deref(), k.limit_cgroup.as_deref()) {
                (Some("memcg"), Some(l)) => format!(" (limit of {l})"),
                (Some("memcg"), None) => " (a memcg limit)".into(),
                (Some("global"), _) => " (system-wide)".into(),
                (Some("cpuset"), _) => " (its cpuset's nodes)".into(),
                (Some("mempolicy"), _) => " (its mempolicy's nodes)".into(),
                _ => String::new(),
            },
            fmt_bytes(k.rss_bytes()),
            o.now_ns.saturating_sub(k.elapsed_ns) / 1_000_000_000
        ));
    }
    if let Some(w) = &o.written {
        t.push_str(&format!(" ({w})"));
    }
    Some(t)
}

fn status_line(app: &App) -> Line<'static> {
    let filter = &app.state().filter;
    let filter = if app.editing_filter {
        format!("  filter: {filter}_")
    } else if !filter.is_empty() {
        format!("  filter: {filter}")
    } else {
        String::new()
    };
    let panel = match (app.panel, &app.table) {
        (Panel::Latency, _) => "latency",
        (Panel::Table, Shown::Processes) => "processes",
        (Panel::Table, Shown::Cgroups) => "cgroups",
        (Panel::Table, Shown::CgroupProcesses(..)) => "cgroup's processes",
    };
    Line::from(vec![
        Span::styled(
            app.sort_label(),
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            "{filter}  panel: {panel}  ?:help  q:quit  c:cgroups  space:pause  s/</>:sort  I:invert  /:filter  +/-:interval  r:reset"
        )),
    ])
}

const HELP: &str = "\
q, Esc, Ctrl-C   quit
? or h           this help (any key closes it)
space or p       pause the view (data keeps being collected)
s or > / <       sort by the next / previous column
I                invert the sort
/                filter: comm or pid, or cgroup path (Enter keeps, Esc clears)
c                switch table: processes / cgroups (or back from a cgroup)
Enter            on the cgroup table: that cgroup's processes (Esc: back)
Tab              switch panel: table / latency
Up/Down, j/k     scroll the table, move the cgroup cursor, or change the
                 latency metric
PgUp/PgDn        by 10
+ / -            double / halve the interval
r                reset the latency totals

Columns: FLT/s faults, MAJ/s major faults, RCLM_ms/s direct+memcg reclaim
stall, SWIN/s and SWOUT/s swapped pages (out: the pages' owner, whoever
reclaimed them), MADV/s madvise calls, SHOOT/s TLB shootdown IPIs sent.
Cgroups: PROCS live processes, USAGE and LIMIT its memory (max: none,
–: unknown), PSI% its memory pressure, some avg10. WSS (--working-set):
bytes touched in the last window, in both tables (–: not measured).
n/a means this kernel cannot provide the metric; the header says why.";

/// Draws the whole screen.
pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = format!(
            "vmscope top needs at least {MIN_WIDTH}x{MIN_HEIGHT}; this terminal is {}x{}",
            area.width, area.height
        );
        f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }
    let empty = Model::default();
    let view = app.view.as_ref().unwrap_or(&empty);
    // Every rate row when the terminal has room (26 lines with the rmap
    // rows), else 13 rows and the process table keeps its 5 lines.
    let rates_height = u16::try_from(view.rates.len() + 2)
        .unwrap_or(u16::MAX)
        .min(area.height.saturating_sub(3 + 5 + 1))
        .max(15);
    let [head, middle, table, status] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(rates_height),
        Constraint::Min(5),
        Constraint::Length(1),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(header_lines(&app.header, app)), head);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(middle);
    let spark = usize::from(left.width.saturating_sub(20 + 16 + 4));
    f.render_widget(rates_table(&view.rates, spark), left);
    let count = view.latencies.len();
    let sel = if count == 0 {
        None
    } else {
        view.latencies.get(app.latency % count)
    };
    let (title, lines) = latency_lines(sel, count, usize::from(right.height.saturating_sub(2)));
    let title = title.replacen(" (0/", &format!(" ({}/", app.latency % count.max(1) + 1), 1);
    let border = if app.panel == Panel::Latency {
        Style::default().fg(Color::Cyan)
    } else {
        Style::default()
    };
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(border)
                .title(title),
        ),
        right,
    );
    draw_table(f, app, table);
    f.render_widget(Paragraph::new(status_line(app)), status);
    if app.help {
        let w = 80.min(area.width);
        let h = 24.min(area.height);
        let r = Rect::new(
            area.x + (area.width - w) / 2,
            area.y + (area.height - h) / 2,
            w,
            h,
        );
        f.render_widget(Clear, r);
        f.render_widget(
            Paragraph::new(HELP).block(Block::default().borders(Borders::ALL).title(" help ")),
            r,
        );
    }
}

#[cfg(test)]
mod tests;
