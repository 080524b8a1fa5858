//! The views' tests: rendered screens and `--batch` text.

use std::time::Duration;

use ratatui::{Terminal, backend::TestBackend};

use super::*;
use super::{
    cells::fmt_limit,
    tables::{COMM_MIN, PATH_MIN, PROC_WIDTHS, cgroup_layout, draw_table, left_cut, proc_layout},
};
use crate::{
    model::catalogue::{faults, swap},
    model::view::{CgroupRow, Limit, RowRates},
    top::app::{CGROUP_COLUMNS, COLUMNS, DEFAULT_SORT, FIRST_RATE},
    units::fmt_ns,
};
use crate::{
    model::hist::{Bucket, Summary},
    model::view::{Latency, Model, ProcRow, RateLine},
};

fn press(a: &mut App, c: crossterm::event::KeyCode) {
    a.on_key(crossterm::event::KeyEvent::from(c));
}

fn rate(name: &'static str, value: Option<f64>, unavailable: Option<&str>) -> RateLine {
    RateLine {
        name,
        unit: "/s",
        value,
        history: vec![1.0, 5.0, 3.0],
        unavailable: unavailable.map(str::to_string),
        detail: None,
    }
}

fn row(pid: u32, comm: &str, faults: f64, swap_out: Option<f64>) -> ProcRow {
    ProcRow {
        pid,
        comm: comm.into(),
        cgroup: if pid == 300 { 7 } else { 1 },
        rates: RowRates::default()
            .with(&faults::PROC_FAULTS, Some(faults))
            .with(&faults::PROC_MAJOR, Some(1.0))
            .with(&swap::PROC_IN, Some(0.0))
            .with(&swap::PROC_OUT, swap_out),
        wss_bytes: None,
    }
}

fn app() -> App {
    let header = HeaderFacts {
        kernel: "6.18.0 x86_64".into(),
        uptime_s: 3720,
        probes_attached: 28,
        probes_total: 29,
        unavailable: vec!["perf:major-faults: disabled".into()],
        mem_free_bytes: Some(8 << 30),
        swap_total_bytes: Some(1 << 30),
        swap_used_bytes: Some(256 << 20),
        scope: None,
    };
    let mut app = App::new(header, Duration::from_secs(1));
    app.update(Model {
        interval_s: 1.0,
        rates: vec![
            rate("faults user", Some(120_000.0), None),
            rate("major faults", None, Some("perf:major-faults: disabled")),
            rate("swap-out", Some(2500.0), None),
        ],
        procs: vec![
            row(100, "postgres", 50_000.0, Some(2000.0)),
            row(200, "bash", 10.0, Some(0.0)),
            row(300, "stress-worker", 70_000.0, None),
        ],
        latencies: vec![Latency {
            name: "reclaim_memcg".into(),
            summary: Summary {
                count: 30,
                sum_ns: 3_000_000,
                p50_ns: Some(131_072),
                p90_ns: Some(262_144),
                p99_ns: Some(524_288),
                max_ns: Some(524_288),
                buckets: vec![
                    Bucket {
                        le_ns: 131_072,
                        count: 20,
                    },
                    Bucket {
                        le_ns: 262_144,
                        count: 9,
                    },
                    Bucket {
                        le_ns: 524_288,
                        count: 1,
                    },
                ],
            },
        }],
        psi: None,
        elapsed_s: 10.0,
        cgroups: vec![
            CgroupRow {
                id: 7,
                path: "/vmscope-test-1-0".into(),
                workload: None,
                live: 1,
                rates: RowRates::default()
                    .with(&faults::PROC_FAULTS, Some(70_000.0))
                    .with(&swap::PROC_OUT, Some(2500.0))
                    .with(&swap::PROC_IN, Some(0.0))
                    .with(&faults::PROC_MAJOR, Some(3.0)),
                usage_bytes: Some(63 << 20),
                limit: Limit::Bytes(64 << 20),
                psi_some: Some(12.5),
                wss_bytes: None,
            },
            CgroupRow {
                id: 1,
                path: "/".into(),
                workload: None,
                live: 2,
                rates: RowRates::default().with(&faults::PROC_FAULTS, Some(50_010.0)),
                usage_bytes: None,
                limit: Limit::Unlimited,
                psi_some: None,
                wss_bytes: None,
            },
        ],
        ..Default::default()
    });
    app
}

fn render(app: &App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    term.draw(|f| draw(f, app)).expect("draws");
    let buf = term.backend().buffer().clone();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn line_of<'a>(screen: &'a str, needle: &str) -> Option<(usize, &'a str)> {
    screen.lines().enumerate().find(|(_, l)| l.contains(needle))
}

#[test]
fn normal_load_shows_rates_latency_and_busiest_process_first() {
    let s = render(&app(), 120, 40);
    assert!(s.contains("probes 28/29 attached"), "{s}");
    assert!(s.contains("faults user          120000 /s"), "{s}");
    assert!(
        s.contains("latency reclaim_memcg (1/1)  n=30 p50 131.1us"),
        "{s}"
    );
    assert!(s.contains("swap 256 MiB of 1.0 GiB"), "{s}");
    let (a, _) = line_of(&s, "stress-worker").expect("row");
    let (b, _) = line_of(&s, "postgres").expect("row");
    assert!(a < b, "sorted by faults/s, descending:\n{s}");
    assert!(
        s.lines()
            .last()
            .expect("status line")
            .starts_with("sort: FLT/s"),
        "{s}"
    );
    assert!(!s.contains("[PAUSED]"));
}

#[test]
fn all_fifteen_rates_show_when_there_is_room_and_the_table_keeps_its_lines() {
    let names = [
        "faults user",
        "faults kernel",
        "major faults",
        "swap-in",
        "swap-out",
        "direct reclaim",
        "memcg reclaim",
        "kswapd active",
        "TLB flushes",
        "TLB shootdown IPIs",
        "madvise",
        "lazyfree",
        "lazyfreed",
        "rmap walk CPU",
        "rmap maintenance CPU",
    ];
    let mut a = app();
    let mut view = a.view.clone().expect("view");
    view.rates = names.iter().map(|n| rate(n, Some(1.0), None)).collect();
    a.update(view);
    let tall = render(&a, 100, 26);
    assert!(tall.contains("rmap maintenance CPU"), "{tall}");
    // At the minimum size the process table keeps its rows.
    let small = render(&a, 80, 24);
    assert!(small.contains("postgres"), "{small}");
}

#[test]
fn the_header_shows_oom_kills_and_the_last_victim_only_once_there_was_one() {
    let mut a = app();
    let s = render(&a, 120, 40);
    assert!(!s.contains("OOM"), "{s}");
    a.oom = OomSeen {
        written: None,
        count: 3,
        last: Some(crate::model::oom::OomKill {
            elapsed_ns: 2_000_000_000,
            pid: Some(4242),
            comm: Some("vmscope-testchi".into()),
            rss_anon_bytes: Some(63 << 20),
            rss_file_bytes: Some(1 << 20),
            ..Default::default()
        }),
        now_ns: 9_500_000_000,
    };
    let s = render(&a, 120, 40);
    let (_, l) = line_of(&s, "OOM kills 3").expect("the OOM line");
    assert!(
        l.contains("OOM kills 3, last: pid 4242 vmscope-testchi rss 64 MiB 7s ago"),
        "{l}"
    );
    if let Some(k) = a.oom.last.as_mut() {
        k.cgroup = Some("/a/b".into());
        k.constraint = Some("memcg".into());
        k.limit_cgroup = Some("/a".into());
    }
    let s = render(&a, 160, 40);
    let (_, l) = line_of(&s, "OOM kills 3").expect("the OOM line");
    assert!(
        l.contains("vmscope-testchi in /a/b (limit of /a) rss 64 MiB"),
        "{l}"
    );
    assert!(l.contains("unavailable: perf:major-faults"), "{l}");
    // Counted without details (BTF variant only): the count alone.
    a.oom.last = None;
    let s = render(&a, 120, 40);
    let (_, l) = line_of(&s, "OOM kills 3").expect("the OOM line");
    assert!(!l.contains("last"), "{l}");
}

#[test]
fn unavailable_metric_is_na_never_zero() {
    let s = render(&app(), 120, 40);
    let (_, l) = line_of(&s, "major faults").expect("rate row");
    assert!(l.contains("n/a"), "{l}");
    assert!(
        s.contains("unavailable: perf:major-faults: disabled"),
        "{s}"
    );
    // stress-worker's swap-out is unknown: n/a in its row.
    let (_, l) = line_of(&s, "stress-worker").expect("row");
    assert!(l.contains("n/a"), "{l}");
}

#[test]
fn paused_screen_is_marked_and_frozen() {
    let mut a = app();
    a.on_key(crossterm::event::KeyEvent::from(
        crossterm::event::KeyCode::Char(' '),
    ));
    a.update(Model::default());
    let s = render(&a, 120, 40);
    assert!(s.contains("[PAUSED]"), "{s}");
    assert!(s.contains("postgres"), "paused view keeps its data:\n{s}");
}

#[test]
fn help_overlay_lists_the_keys() {
    let mut a = app();
    a.on_key(crossterm::event::KeyEvent::from(
        crossterm::event::KeyCode::Char('?'),
    ));
    let s = render(&a, 120, 40);
    for k in ["q, Esc, Ctrl-C", "space or p", "s or > / <", "+ / -", "Tab"] {
        assert!(s.contains(k), "{k} missing:\n{s}");
    }
}

#[test]
fn filtered_and_sorted_table() {
    let mut a = app();
    use crossterm::event::{KeyCode, KeyEvent};
    for k in ['/', 'g', 'r', 'e', 's'] {
        a.on_key(KeyEvent::from(KeyCode::Char(k)));
    }
    a.on_key(KeyEvent::from(KeyCode::Enter));
    for _ in 0..4 {
        a.on_key(KeyEvent::from(KeyCode::Char('s')));
    }
    let s = render(&a, 120, 40);
    assert!(s.contains("processes (1)"), "{s}");
    assert!(s.contains("postgres") && !s.contains("bash"), "{s}");
    assert!(s.contains("sort: SWOUT/s  filter: gres"), "{s}");
}

#[test]
fn fits_80x24_and_refuses_smaller() {
    let s = render(&app(), 80, 24);
    assert!(s.contains("vmscope top"), "{s}");
    assert!(s.contains("postgres"), "{s}");
    assert!(
        s.lines()
            .last()
            .expect("status line")
            .starts_with("sort: FLT/s"),
        "{s}"
    );
    let small = render(&app(), 79, 24);
    assert!(small.contains("needs at least 80x24"), "{small}");
    assert!(!small.contains("postgres"));
}

#[test]
fn batch_snapshot_has_header_rates_and_table() {
    let t = snapshot_text(&app(), false);
    assert!(t.starts_with("vmscope top"), "{t}");
    let header = t
        .lines()
        .find(|l| l.contains("COMM"))
        .expect("table header");
    let cols: Vec<&str> = header.split_whitespace().collect();
    // No WSS column: the working set is not measured.
    assert_eq!(cols, COLUMNS[..COLUMNS.len() - 1]);
    assert!(
        t.contains("major faults         n/a (perf:major-faults: disabled)"),
        "{t}"
    );
    let row: Vec<&str> = t
        .lines()
        .find(|l| l.contains("stress-worker"))
        .expect("row")
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["300", "stress-worker", "70000"]);
    assert_eq!(row[6], "n/a");
}

#[test]
fn formatting() {
    assert_eq!(fmt_rate(None), "n/a");
    assert_eq!(fmt_rate(Some(0.0)), "0");
    assert_eq!(fmt_rate(Some(2.5)), "2.5");
    assert_eq!(fmt_rate(Some(12345.6)), "12346");
    assert_eq!(sparkline(&[0.0, 1.0, 2.0], 10), " ▅█");
    assert_eq!(sparkline(&[1.0; 100], 5).chars().count(), 5);
    assert_eq!(fmt_ns(1_500), "1.5us");
}

#[test]
fn c_shows_the_cgroup_table_with_rates_books_and_psi() {
    use crossterm::event::KeyCode;
    let mut a = app();
    press(&mut a, KeyCode::Char('c'));
    let s = render(&a, 120, 40);
    assert!(s.contains("cgroups (2)"), "{s}");
    let (_, l) = line_of(&s, "/vmscope-test-1-0").expect("the test cgroup's row");
    let w: Vec<&str> = l
        .split(|c: char| c.is_whitespace() || c == '│')
        .filter(|w| !w.is_empty())
        .collect();
    assert_eq!(
        w,
        [
            "/vmscope-test-1-0",
            "1",
            "70000",
            "3",
            "0",
            "0",
            "2500",
            "0",
            "0",
            "63M",
            "64M",
            "12.50"
        ],
        "{l}"
    );
    // Unlimited, unknown usage, no PSI: max, –, n/a (never 0).
    let (_, root) = line_of(&s, "│/ ").expect("the root cgroup's row");
    assert!(
        root.contains("max") && root.contains('–') && root.contains("n/a"),
        "{root}"
    );
    assert!(s.contains("panel: cgroups"), "{s}");
    // Sorted by faults: the test cgroup first.
    let (test, _) = line_of(&s, "/vmscope-test").expect("the test cgroup");
    let (root, _) = line_of(&s, "│/ ").expect("the root cgroup");
    assert!(test < root, "{s}");
    // At the smallest size the path and the telling figures stay.
    let small = render(&a, 80, 24);
    assert!(small.contains("/vmscope-test-1-0"), "{small}");
    for c in ["PROCS", "FLT/s", "SWOUT/s", "USAGE", "LIMIT", "PSI%"] {
        assert!(small.contains(c), "{c}:\n{small}");
    }
    assert!(small.contains("3 columns need a wider terminal"), "{small}");
}

#[test]
fn a_containers_row_is_named_by_its_workload_and_found_by_it() {
    use crossterm::event::KeyCode;
    let mut a = app();
    let id = "c73584913b701cdb7875faed41649b9bdd0c1297795308f51b771636935f12ce";
    if let Some(v) = a.view.as_mut() {
        v.cgroups[0].path = format!("/machine.slice/libpod-{id}.scope");
        v.cgroups[0].workload = Some("podman:web".into());
    }
    press(&mut a, KeyCode::Char('c'));
    let s = render(&a, 120, 40);
    let (_, l) = line_of(&s, "podman:web").expect("the container's row, by name");
    assert!(l.contains("70000"), "{l}");
    // Found by its name and by its path's id alike.
    for needle in ["web", "c7358491"] {
        press(&mut a, KeyCode::Char('/'));
        for c in needle.chars() {
            press(&mut a, KeyCode::Char(c));
        }
        press(&mut a, KeyCode::Enter);
        let rows = a.cgroup_rows();
        assert_eq!(rows.len(), 1, "{needle}: {rows:?}");
        assert_eq!(rows[0].workload.as_deref(), Some("podman:web"));
    }
    // The batch table keeps one word per cell.
    let t = snapshot_text(&a, true);
    assert!(
        t.lines()
            .any(|l| l.split_whitespace().next() == Some("podman:web")),
        "{t}"
    );
}

#[test]
fn narrow_cgroup_tables_give_up_the_least_telling_columns_first() {
    let names = |w| {
        let (shown, path) = cgroup_layout(w, CGROUP_COLUMNS.len() - 1);
        let titles = CGROUP_COLUMNS.as_slice();
        let cols: Vec<&str> = shown.iter().map(|&i| titles[i]).collect();
        (cols, path)
    };
    let (all, path) = names(118);
    assert_eq!((all.len(), path), (12, 118 - 83));
    let (cols, path) = names(78);
    assert_eq!(
        cols,
        [
            "CGROUP",
            "PROCS",
            "FLT/s",
            "RCLM_ms/s",
            "SWIN/s",
            "SWOUT/s",
            "USAGE",
            "LIMIT",
            "PSI%"
        ]
    );
    assert!(path >= PATH_MIN);
    assert_eq!(names(10).0, ["CGROUP"]);
    assert_eq!(left_cut("/a/b/c/leaf", 6), "…/leaf");
    assert_eq!(left_cut("/leaf", 6), "/leaf");
}

/// The process table alone, drawn into `w` columns (the whole screen
/// needs 80).
fn render_table(app: &App, w: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, 8)).expect("test terminal");
    term.draw(|f| draw_table(f, app, f.area())).expect("draws");
    let buf = term.backend().buffer().clone();
    (0..8)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The titles in `screen`'s header row, and where each starts.
fn header_of(screen: &str) -> Vec<(usize, String)> {
    let (_, l) = line_of(screen, "│PID ").expect("the header row");
    words(l)
}

/// `line`'s words (the border aside) and the column each starts at.
fn words(line: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    for (at, &c) in chars.iter().enumerate() {
        let starts = at == 0 || chars[at - 1] == ' ' || chars[at - 1] == '│';
        if c != ' ' && c != '│' && starts {
            let word: String = chars[at..]
                .iter()
                .take_while(|&&c| c != ' ' && c != '│')
                .collect();
            out.push((at, word));
        }
    }
    out
}

/// Each of the header's titles starts where the row's cell does.
fn assert_aligned(screen: &str, row: &str) {
    let header = header_of(screen);
    let (_, l) = line_of(screen, row).unwrap_or_else(|| panic!("no {row} row:\n{screen}"));
    let cells = words(l);
    let at = |w: &[(usize, String)]| w.iter().map(|(at, _)| *at).collect::<Vec<_>>();
    assert_eq!(at(&header), at(&cells), "{screen}");
}

fn titles(screen: &str) -> Vec<String> {
    header_of(screen).into_iter().map(|(_, t)| t).collect()
}

#[test]
fn narrow_process_tables_give_up_the_least_telling_columns_first() {
    // Without the working set: every column but WSS.
    let plain = &COLUMNS[..COLUMNS.len() - 1];
    let names = |w, sorted| -> Vec<&str> {
        proc_layout(w, sorted, plain.len())
            .iter()
            .map(|&i| COLUMNS[i])
            .collect()
    };
    let sort = |title| COLUMNS.iter().position(|&c| c == title).expect("a column");
    // Everything fits from 91 columns (89 inside the border) up.
    assert_eq!(names(89, DEFAULT_SORT), plain);
    assert_eq!(names(200, DEFAULT_SORT), plain);
    assert_eq!(
        names(88, DEFAULT_SORT),
        [
            "PID",
            "COMM",
            "FLT/s",
            "MAJ/s",
            "RCLM_ms/s",
            "SWIN/s",
            "SWOUT/s",
            "MADV/s"
        ]
    );
    assert_eq!(
        names(78, DEFAULT_SORT),
        [
            "PID",
            "COMM",
            "FLT/s",
            "MAJ/s",
            "RCLM_ms/s",
            "SWIN/s",
            "SWOUT/s"
        ]
    );
    assert_eq!(
        names(58, DEFAULT_SORT),
        ["PID", "COMM", "FLT/s", "MAJ/s", "RCLM_ms/s"]
    );
    // The column sorted on stays; the next in rank goes instead.
    assert_eq!(
        names(78, sort("SHOOT/s")),
        [
            "PID",
            "COMM",
            "FLT/s",
            "MAJ/s",
            "RCLM_ms/s",
            "SWIN/s",
            "SHOOT/s"
        ]
    );
    assert_eq!(
        names(58, sort("SHOOT/s")),
        ["PID", "COMM", "FLT/s", "RCLM_ms/s", "SHOOT/s"]
    );
    // PID, COMM and the sorted column stay however narrow.
    assert_eq!(names(10, sort("MADV/s")), ["PID", "COMM", "MADV/s"]);
    assert_eq!(names(10, 1), ["PID", "COMM"]);
    // What is kept fits, COMM at its width.
    for w in 0..120 {
        let shown = proc_layout(w, DEFAULT_SORT, COLUMNS.len());
        let need: u16 = shown.iter().map(|&i| PROC_WIDTHS[i].0 + 1).sum();
        assert!(shown.len() == 3 || need - 1 <= w, "{w}: {shown:?}");
        assert_eq!(PROC_WIDTHS[1].0, COMM_MIN);
    }
    // No two rate columns share a rank.
    let mut ranks: Vec<u8> = PROC_WIDTHS[FIRST_RATE..].iter().map(|w| w.1).collect();
    ranks.sort_unstable();
    ranks.dedup();
    assert_eq!(ranks.len(), PROC_WIDTHS.len() - FIRST_RATE);
}

#[test]
fn at_80_columns_the_process_table_gives_up_columns_and_comm_keeps_its_width() {
    use crossterm::event::KeyCode;
    let mut a = app();
    let s = render(&a, 80, 24);
    assert_eq!(
        titles(&s),
        [
            "PID",
            "COMM",
            "FLT/s",
            "MAJ/s",
            "RCLM_ms/s",
            "SWIN/s",
            "SWOUT/s"
        ],
        "{s}"
    );
    assert!(
        s.contains("processes (3; 2 columns need a wider terminal)"),
        "{s}"
    );
    // The whole comm, and the figures start where COMM's 16 end.
    let (_, l) = line_of(&s, "stress-worker").expect("row");
    assert!(l.contains("│300      stress-worker    70000 "), "{l}");
    for row in ["stress-worker", "postgres"] {
        assert_aligned(&s, row);
    }
    // Sorted on a column that would go: it stays, another goes.
    for _ in 0..6 {
        press(&mut a, KeyCode::Char('s'));
    }
    assert_eq!(a.sort_label(), "sort: SHOOT/s");
    let s = render(&a, 80, 24);
    assert_eq!(
        titles(&s),
        [
            "PID",
            "COMM",
            "FLT/s",
            "MAJ/s",
            "RCLM_ms/s",
            "SWIN/s",
            "SHOOT/s"
        ],
        "{s}"
    );
    assert_aligned(&s, "postgres");
    // A cgroup's processes: the way back stays in the title.
    press(&mut a, KeyCode::Char('c'));
    press(&mut a, KeyCode::Enter);
    let s = render(&a, 80, 24);
    assert!(
        s.contains("processes in /vmscope-test-1-0 (1)  c/Esc: back  (2 columns"),
        "{s}"
    );
    assert_aligned(&s, "stress-worker");
}

#[test]
fn at_60_columns_the_process_table_keeps_pid_comm_and_the_most_telling_rates() {
    use crossterm::event::KeyCode;
    let mut a = app();
    let s = render_table(&a, 60);
    assert_eq!(
        titles(&s),
        ["PID", "COMM", "FLT/s", "MAJ/s", "RCLM_ms/s"],
        "{s}"
    );
    assert!(s.contains("processes (3; 4 columns need"), "{s}");
    let (_, l) = line_of(&s, "stress-worker").expect("row");
    assert!(l.contains("│300      stress-worker    70000 "), "{l}");
    for row in ["stress-worker", "postgres", "bash"] {
        assert_aligned(&s, row);
    }
    // Sorted on MADV/s: it stays, MAJ/s goes in its place.
    for _ in 0..5 {
        press(&mut a, KeyCode::Char('s'));
    }
    assert_eq!(a.sort_label(), "sort: MADV/s");
    let s = render_table(&a, 60);
    assert_eq!(
        titles(&s),
        ["PID", "COMM", "FLT/s", "RCLM_ms/s", "MADV/s"],
        "{s}"
    );
    assert_aligned(&s, "postgres");
}

#[test]
fn enter_on_a_cgroup_shows_its_processes_and_esc_returns() {
    use crossterm::event::KeyCode;
    let mut a = app();
    press(&mut a, KeyCode::Char('c'));
    press(&mut a, KeyCode::Enter);
    let s = render(&a, 120, 40);
    assert!(s.contains("processes in /vmscope-test-1-0 (1)"), "{s}");
    assert!(
        s.contains("stress-worker") && !s.contains("postgres"),
        "{s}"
    );
    press(&mut a, KeyCode::Esc);
    let s = render(&a, 120, 40);
    assert!(s.contains("cgroups (2)"), "{s}");
}

#[test]
fn a_rate_without_a_figure_shows_no_unit() {
    let mut a = app();
    let mut view = a.view.clone().expect("view");
    let r = view.rates.first_mut().expect("a rate");
    (r.value, r.unavailable) = (None, None);
    let (name, unit) = (r.name, r.unit);
    a.update(view);
    let screen = render(&a, 120, 40);
    let text = snapshot_text(&a, false);
    for out in [&screen, &text] {
        let line = out
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no {name} row: {out}"));
        assert!(line.contains("n/a"), "{line}");
        assert!(!line.contains(&format!("n/a {unit}")), "{line}");
    }
}

#[test]
fn without_attribution_the_cgroup_view_says_why() {
    use crossterm::event::KeyCode;
    let mut a = app();
    let mut view = a.view.clone().expect("view");
    view.cgroups.clear();
    view.cgroups_unavailable = Some("cgroup attribution: disabled".into());
    a.update(view);
    press(&mut a, KeyCode::Char('c'));
    let s = render(&a, 120, 40);
    assert!(
        s.contains("cgroup attribution is unavailable: cgroup attribution: disabled"),
        "{s}"
    );
    let t = snapshot_text(&a, true);
    assert!(
        t.contains("cgroups: unavailable (cgroup attribution: disabled)"),
        "{t}"
    );
}

#[test]
fn v1_psi_is_named_in_the_title() {
    use crossterm::event::KeyCode;
    let mut a = app();
    let mut view = a.view.clone().expect("view");
    view.cgroup_psi_unavailable = Some("cgroup v1 keeps no per-cgroup PSI".into());
    a.update(view);
    press(&mut a, KeyCode::Char('c'));
    let s = render(&a, 120, 40);
    assert!(
        s.contains("cgroups (2; PSI% n/a: cgroup v1 keeps no per-cgroup PSI)"),
        "{s}"
    );
}

#[test]
fn batch_prints_the_cgroup_table_after_the_processes_when_asked() {
    let t = snapshot_text(&app(), true);
    let lines: Vec<&str> = t.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("CGROUP"))
        .expect("cgroup header");
    let cols: Vec<&str> = lines[at].split_whitespace().collect();
    assert_eq!(cols, CGROUP_COLUMNS[..CGROUP_COLUMNS.len() - 1]);
    let row: Vec<&str> = lines[at + 1].split_whitespace().collect();
    assert_eq!(row[0], "/vmscope-test-1-0");
    assert_eq!(row[6], "2500");
    assert_eq!(row[9..], ["63M", "64M", "12.50"]);
    let root: Vec<&str> = lines[at + 2].split_whitespace().collect();
    assert_eq!(root[9..], ["–", "max", "n/a"]);
    assert!(!snapshot_text(&app(), false).contains("CGROUP"));
}

#[test]
fn sizes_are_short_and_unknown_is_a_dash() {
    assert_eq!(fmt_size(None), "–");
    assert_eq!(fmt_size(Some(512 << 10)), "512K");
    assert_eq!(fmt_size(Some(64 << 20)), "64M");
    assert_eq!(fmt_size(Some(3 << 29)), "1.5G");
    assert_eq!(fmt_limit(Limit::Unlimited), "max");
}

/// With the working set measured both tables end in WSS: a figure where
/// one was measured, `–` where none was (never 0).
#[test]
fn the_working_set_is_the_last_column_of_both_tables_when_measured() {
    let mut a = app();
    let v = a.view.as_mut().expect("a view");
    v.working_set = true;
    v.procs[0].wss_bytes = Some(256 << 20);
    let (hot, cold) = (v.procs[0].pid.to_string(), v.procs[1].pid.to_string());
    v.cgroups[0].wss_bytes = Some(3 << 29);
    let t = snapshot_text(&a, true);
    let lines: Vec<&str> = t.lines().collect();
    let header = lines.iter().find(|l| l.contains("COMM")).expect("header");
    assert_eq!(header.split_whitespace().last(), Some("WSS"), "{t}");
    let last = |pid: &str| {
        let l = lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(pid))
            .expect("the process's row");
        l.split_whitespace().last().map(str::to_string)
    };
    assert_eq!(last(&hot).as_deref(), Some("256M"), "{t}");
    assert_eq!(last(&cold).as_deref(), Some("–"), "{t}");
    let at = lines
        .iter()
        .position(|l| l.starts_with("CGROUP"))
        .expect("cgroup header");
    let row = |i: usize| lines[at + i].split_whitespace().collect::<Vec<_>>();
    assert_eq!(row(0)[9..], ["USAGE", "LIMIT", "PSI%", "WSS"]);
    assert_eq!(row(1)[9..], ["63M", "64M", "12.50", "1.5G"]);
    assert_eq!(row(2)[9..], ["–", "max", "n/a", "–"]);
    // On screen, and it can be sorted on.
    let screen = render(&a, 120, 30);
    assert!(titles(&screen).contains(&"WSS".to_string()), "{screen}");
    a.procs.sort = COLUMNS.len() - 1;
    assert_eq!(a.sort_label(), "sort: WSS");
    assert_eq!(a.rows()[0].wss_bytes, Some(256 << 20));
    a.procs.inverted = true;
    assert_eq!(a.rows().last().and_then(|r| r.wss_bytes), Some(256 << 20));
}
