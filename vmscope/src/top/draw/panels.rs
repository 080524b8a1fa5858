//! The rates panel (a table with sparklines) and the latency panel.

use ratatui::{
    layout::Constraint,
    style::{Color, Style},
    text::Line,
    widgets::{Block, Borders, Cell, Row, Table},
};

use crate::model::view::{Latency, RateLine};
use crate::units::fmt_ns;

use super::cells::{fmt_rate, sparkline};

pub(super) fn rates_table(rates: &[RateLine], spark_width: usize) -> Table<'static> {
    let rows = rates.iter().map(|r| {
        let value = match (&r.unavailable, r.value) {
            // No figure, no unit (the stall share with no stall to share).
            (Some(_), _) | (None, None) => "n/a".to_string(),
            (None, v) => format!("{} {}", fmt_rate(v), r.unit),
        };
        let style = if r.name == "TLB shootdown IPIs" && r.value.unwrap_or(0.0) > 0.0 {
            Style::default().fg(Color::Red)
        } else {
            Style::default()
        };
        Row::new(vec![
            Cell::from(r.name),
            Cell::from(value),
            Cell::from(match &r.detail {
                // The breakdown after a shorter sparkline, where there is room.
                Some(d) if spark_width >= 28 => format!("{} {d}", sparkline(&r.history, 12)),
                _ => sparkline(&r.history, spark_width),
            }),
        ])
        .style(style)
    });
    Table::new(
        rows,
        [
            // The longest name, "rmap maintenance CPU".
            Constraint::Length(20),
            Constraint::Length(16),
            Constraint::Min(10),
        ],
    )
    .block(Block::default().borders(Borders::ALL).title(" rates "))
}

pub(super) fn latency_lines(
    l: Option<&Latency>,
    count: usize,
    height: usize,
) -> (String, Vec<Line<'static>>) {
    let Some(l) = l else {
        return (
            " latency: nothing measured yet ".into(),
            vec![Line::raw("no reclaim, madvise, munmap or mprotect seen")],
        );
    };
    let s = &l.summary;
    let q = |v: Option<u64>| v.map_or("n/a".into(), fmt_ns);
    let title = format!(
        " latency {} ({}/{})  n={} p50 {} p90 {} p99 {} max {} ",
        l.name,
        0,
        count,
        s.count,
        q(s.p50_ns),
        q(s.p90_ns),
        q(s.p99_ns),
        q(s.max_ns)
    );
    let max = s.buckets.iter().map(|b| b.count).max().unwrap_or(1).max(1);
    let lines = s
        .buckets
        .iter()
        .filter(|b| b.count > 0)
        .take(height)
        .map(|b| {
            let bar = "█".repeat(((b.count as f64 / max as f64) * 30.0).ceil() as usize);
            Line::raw(format!("<={:>8} {bar} {}", fmt_ns(b.le_ns), b.count))
        })
        .collect();
    (title, lines)
}
