//! The process and cgroup tables: their header rows, borders, column
//! widths, and the rows shown.

use std::sync::LazyLock;

use ratatui::{
    Frame,
    layout::{Constraint, Rect},
    style::{Color, Modifier, Style},
    widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap},
};

use crate::{
    model::catalogue,
    top::app::{App, CGROUP_COLUMNS, COLUMNS, FIRST_RATE, Panel, Table as Shown},
};

use super::cells::{cgroup_cells, proc_cells};

pub(super) fn table_border(app: &App) -> Style {
    if app.panel == Panel::Table {
        Style::default().fg(Color::Cyan)
    } else {
        Style::default()
    }
}

pub(super) fn header_row(columns: &[&'static str], sorted: usize) -> Row<'static> {
    Row::new(columns.iter().enumerate().map(|(i, c)| {
        let style = if i == sorted {
            Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        };
        Cell::from(*c).style(style)
    }))
}

pub(super) fn draw_table(f: &mut Frame, app: &App, area: Rect) {
    if app.on_cgroups() {
        draw_cgroups(f, app, area);
        return;
    }
    let rows = app.rows();
    let visible = usize::from(area.height.saturating_sub(3));
    let start = app
        .procs
        .scroll
        .min(rows.len().saturating_sub(visible.max(1)));
    let shown = proc_layout(
        area.width.saturating_sub(2),
        app.procs.sort,
        app.columns().len(),
    );
    let body = rows.iter().skip(start).take(visible).map(|r| {
        let cells = proc_cells(r);
        Row::new(shown.iter().map(|&i| Cell::from(cells[i].clone())))
    });
    // PID, COMM, then each rate column kept at its catalogue width.
    let widths = shown.iter().map(|&i| Constraint::Length(PROC_WIDTHS[i].0));
    let hidden = match app.columns().len() - shown.len() {
        0 => String::new(),
        1 => "1 column needs a wider terminal".to_string(),
        n => format!("{n} columns need a wider terminal"),
    };
    let title = match (&app.table, hidden.is_empty()) {
        // The way back comes first: the note is the part a narrow
        // border cuts.
        (Shown::CgroupProcesses(_, path), true) => {
            format!(" processes in {path} ({})  c/Esc: back ", rows.len())
        }
        (Shown::CgroupProcesses(_, path), false) => {
            format!(
                " processes in {path} ({})  c/Esc: back  ({hidden}) ",
                rows.len()
            )
        }
        (_, true) => format!(" processes ({}) ", rows.len()),
        (_, false) => format!(" processes ({}; {hidden}) ", rows.len()),
    };
    let header = header_row(
        &shown.iter().map(|&i| COLUMNS[i]).collect::<Vec<_>>(),
        shown
            .iter()
            .position(|&i| i == app.procs.sort)
            .unwrap_or(usize::MAX),
    );
    f.render_widget(
        Table::new(body, widths).header(header).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(table_border(app))
                .title(title),
        ),
        area,
    );
}

/// The process table's column widths and the order its rate columns are
/// given up in when the terminal is narrow: the highest goes first. PID
/// and COMM (rank 0) stay; the rate columns' come from the catalogue; WSS,
/// there only when asked for, is given up last (rank 0).
pub(super) static PROC_WIDTHS: LazyLock<Vec<(u16, u8)>> = LazyLock::new(|| {
    [(8, 0), (COMM_MIN, 0)]
        .into_iter()
        .chain(catalogue::columns().map(|(_, c)| (c.width, c.rank)))
        .chain([(WSS_WIDTH, 0)])
        .collect()
});

/// The WSS column's width in both tables (`1.5G`, `512M`).
pub(super) const WSS_WIDTH: u16 = 6;

/// COMM's width, which it keeps as columns are given up: a comm is at
/// most 15 characters.
pub(super) const COMM_MIN: u16 = 16;

/// Which of the first `columns` process columns fit in `width` (in table
/// order): rate columns are given up, the highest rank first, until the
/// rest fit with COMM at [`COMM_MIN`]; the one at `sorted` is never given
/// up.
pub(super) fn proc_layout(width: u16, sorted: usize, columns: usize) -> Vec<usize> {
    // Each column's width and the one blank between it and the next.
    let need = |shown: &[usize]| -> u16 {
        let all: u16 = shown.iter().map(|&i| PROC_WIDTHS[i].0 + 1).sum();
        all.saturating_sub(1)
    };
    let columns = columns.min(PROC_WIDTHS.len());
    let mut shown: Vec<usize> = (0..columns).collect();
    let mut by_rank: Vec<usize> = (FIRST_RATE..columns).filter(|&i| i != sorted).collect();
    by_rank.sort_by_key(|&i| std::cmp::Reverse(PROC_WIDTHS[i].1));
    for i in by_rank {
        if need(&shown) <= width {
            break;
        }
        shown.retain(|&j| j != i);
    }
    shown
}

/// The cgroup table, with the cursor's row highlighted; or why there is
/// none.
pub(super) fn draw_cgroups(f: &mut Frame, app: &App, area: Rect) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(table_border(app));
    let view = app.view.as_ref();
    if let Some(why) = view.and_then(|v| v.cgroups_unavailable.as_deref()) {
        f.render_widget(
            Paragraph::new(format!("cgroup attribution is unavailable: {why}"))
                .wrap(Wrap { trim: true })
                .block(block.title(" cgroups ")),
            area,
        );
        return;
    }
    let rows = app.cgroup_rows();
    let selected = app
        .selected
        .and_then(|id| rows.iter().position(|r| r.id == id))
        .or((!rows.is_empty()).then_some(0));
    let (shown, room) = cgroup_layout(area.width.saturating_sub(2), app.columns().len());
    // No wider than the longest path, so the figures stay next to it.
    let longest = rows.iter().map(|r| r.path.chars().count()).max();
    let path_width = room.min(
        u16::try_from(longest.unwrap_or(0))
            .unwrap_or(u16::MAX)
            .max(PATH_MIN),
    );
    let pick = |cells: Vec<String>| -> Vec<Cell<'static>> {
        shown
            .iter()
            .map(|&i| match i {
                0 => Cell::from(left_cut(&cells[0], path_width)),
                _ => Cell::from(cells[i].clone()),
            })
            .collect()
    };
    let body = rows.iter().map(|r| Row::new(pick(cgroup_cells(r))));
    let widths: Vec<Constraint> = shown
        .iter()
        .map(|&i| Constraint::Length(CGROUP_WIDTHS[i].0.max(path_width * u16::from(i == 0))))
        .collect();
    let titles = CGROUP_COLUMNS.as_slice();
    let header = header_row(
        &shown.iter().map(|&i| titles[i]).collect::<Vec<_>>(),
        shown
            .iter()
            .position(|&i| i == app.cgroups.sort)
            .unwrap_or(usize::MAX),
    );
    let psi_note = view
        .and_then(|v| v.cgroup_psi_unavailable.as_deref())
        .map_or(String::new(), |why| format!("; PSI% n/a: {why}"));
    let hidden = app.columns().len() - shown.len();
    let hidden = if hidden > 0 {
        format!("; {hidden} columns need a wider terminal")
    } else {
        String::new()
    };
    let title = format!(
        " cgroups ({}{psi_note}{hidden})  Enter: its processes ",
        rows.len()
    );
    let table = Table::new(body, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .block(block.title(title));
    let mut state = ratatui::widgets::TableState::default().with_selected(selected);
    f.render_stateful_widget(table, area, &mut state);
}

/// The cgroup table's column widths (the path's, 0 here, is what the
/// others leave) and the order columns are given up in when the terminal
/// is narrow: the highest goes first. The rate columns' come from the
/// catalogue.
pub(super) static CGROUP_WIDTHS: LazyLock<Vec<(u16, u8)>> = LazyLock::new(|| {
    [(0, 0), (5, 1)]
        .into_iter()
        .chain(catalogue::columns().map(|(_, c)| (c.cgroup_width, c.cgroup_rank)))
        .chain([(6, 4), (6, 5), (6, 6), (WSS_WIDTH, 2)])
        .collect()
});

/// The narrowest the path column gets before figures are left out.
pub(super) const PATH_MIN: u16 = 16;

/// Which of the first `columns` cgroup columns fit in `width` (in table
/// order) and the path column's width: columns are given up, least
/// telling first, until the path keeps [`PATH_MIN`].
pub(super) fn cgroup_layout(width: u16, columns: usize) -> (Vec<usize>, u16) {
    let mut by_rank: Vec<usize> = (1..columns.min(CGROUP_WIDTHS.len())).collect();
    by_rank.sort_by_key(|&i| CGROUP_WIDTHS[i].1);
    let mut left = width.saturating_sub(PATH_MIN);
    let mut shown = vec![0];
    for i in by_rank {
        let need = CGROUP_WIDTHS[i].0 + 1;
        if left >= need {
            left -= need;
            shown.push(i);
        }
    }
    shown.sort_unstable();
    (shown, PATH_MIN + left)
}

/// `s` in at most `width` characters, cut at the left (a path's last parts
/// tell the most) with `…`.
pub(super) fn left_cut(s: &str, width: u16) -> String {
    let n = s.chars().count();
    let width = usize::from(width);
    if n <= width || width == 0 {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n - width + 1).collect();
    format!("…{tail}")
}
