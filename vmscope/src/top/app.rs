//! The state of `vmscope top` and what each key does. Pure: no terminal
//! here, so key handling is unit-tested.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::model::{
    oom::OomKill,
    sample::Sample,
    view::{Model, ProcRow},
};

/// The process table's columns, in order.
pub const COLUMNS: [&str; 9] = [
    "PID",
    "COMM",
    "FLT/s",
    "MAJ/s",
    "RCLM_ms/s",
    "SWIN/s",
    "SWOUT/s",
    "MADV/s",
    "SHOOT/s",
];

/// The column sorted on by default (faults per second).
pub const DEFAULT_SORT: usize = 2;

/// Which panel the movement keys act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Panel {
    Processes,
    Latency,
}

/// What the event loop must do after a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    /// Start the totals (latency histograms) afresh.
    Reset,
    /// Sample at this interval from now on.
    Interval(Duration),
}

/// Facts for the header, refreshed every interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Header {
    pub kernel: String,
    pub uptime_s: u64,
    pub probes_attached: usize,
    pub probes_total: usize,
    /// "probe: reason" for every probe that is not attached.
    pub unavailable: Vec<String>,
    pub mem_free_bytes: Option<u64>,
    pub swap_total_bytes: Option<u64>,
    pub swap_used_bytes: Option<u64>,
    /// Per-process scope (`-p`), if any.
    pub scope: Option<String>,
}

/// The OOM kills since `top` started: how many, and the latest one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OomSeen {
    /// The kernel's OOM victims counted since the probes were loaded.
    pub count: u64,
    /// The latest victim's details, when the probe reports them.
    pub last: Option<OomKill>,
    /// The latest sample's time since the start: "… s ago" counts to it.
    pub now_ns: u64,
}

pub struct App {
    pub header: Header,
    /// Shown in the header once there has been one.
    pub oom: OomSeen,
    /// What is drawn (frozen while paused).
    pub view: Option<Model>,
    pub paused: bool,
    pub help: bool,
    pub sort: usize,
    /// Ascending instead of the default descending (ascending for PID/COMM).
    pub inverted: bool,
    pub filter: String,
    pub editing_filter: bool,
    pub panel: Panel,
    pub latency: usize,
    pub scroll: usize,
    pub interval: Duration,
}

impl App {
    pub fn new(header: Header, interval: Duration) -> Self {
        Self {
            header,
            oom: OomSeen::default(),
            view: None,
            paused: false,
            help: false,
            sort: DEFAULT_SORT,
            inverted: false,
            filter: String::new(),
            editing_filter: false,
            panel: Panel::Processes,
            latency: 0,
            scroll: 0,
            interval,
        }
    }

    /// Notes a sample's OOM kills, before it goes to the model: the count
    /// (the counter, cumulative since the probes were loaded with `top`)
    /// and the latest victim.
    pub fn note_oom(&mut self, s: &Sample) {
        self.oom.now_ns = s.elapsed_ns;
        self.oom.count = s.counters.get("oom_kills").copied().unwrap_or(0);
        if let Some(k) = s.oom_kills.last() {
            self.oom.last = Some(k.clone());
        }
    }

    /// A new interval's view; ignored for drawing while paused.
    pub fn update(&mut self, view: Model) {
        if !self.paused {
            self.view = Some(view);
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        if self.editing_filter {
            match key.code {
                KeyCode::Enter => self.editing_filter = false,
                KeyCode::Esc => {
                    self.editing_filter = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) => self.filter.push(c),
                _ => {}
            }
            self.scroll = 0;
            return Action::None;
        }
        if self.help {
            // Any key closes help; q still quits.
            self.help = false;
            return if matches!(key.code, KeyCode::Char('q')) {
                Action::Quit
            } else {
                Action::None
            };
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Char('?') | KeyCode::Char('h') => self.help = true,
            KeyCode::Char(' ') | KeyCode::Char('p') => self.paused = !self.paused,
            KeyCode::Char('s') | KeyCode::Char('>') => self.sort = (self.sort + 1) % COLUMNS.len(),
            KeyCode::Char('<') => self.sort = (self.sort + COLUMNS.len() - 1) % COLUMNS.len(),
            KeyCode::Char('I') => self.inverted = !self.inverted,
            KeyCode::Char('/') => {
                self.editing_filter = true;
                self.filter.clear();
            }
            KeyCode::Tab => {
                self.panel = match self.panel {
                    Panel::Processes => Panel::Latency,
                    Panel::Latency => Panel::Processes,
                }
            }
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::PageDown => self.move_by(10),
            KeyCode::PageUp => self.move_by(-10),
            KeyCode::Char('+') => return self.set_interval(self.interval * 2),
            KeyCode::Char('-') => return self.set_interval(self.interval / 2),
            KeyCode::Char('r') => return Action::Reset,
            _ => {}
        }
        Action::None
    }

    fn set_interval(&mut self, d: Duration) -> Action {
        let d = d.clamp(Duration::from_millis(100), Duration::from_secs(60));
        if d == self.interval {
            return Action::None;
        }
        self.interval = d;
        Action::Interval(d)
    }

    fn move_by(&mut self, n: isize) {
        match self.panel {
            Panel::Processes => self.scroll = self.scroll.saturating_add_signed(n),
            Panel::Latency => {
                let count = self.view.as_ref().map_or(0, |v| v.latencies.len());
                if count > 0 {
                    let i = self.latency as isize + n.signum();
                    self.latency = i.rem_euclid(count as isize) as usize;
                }
            }
        }
    }

    /// The process rows to show: filtered by comm or pid, sorted.
    pub fn rows(&self) -> Vec<ProcRow> {
        let Some(v) = &self.view else {
            return Vec::new();
        };
        let f = self.filter.to_lowercase();
        let mut rows: Vec<ProcRow> = v
            .procs
            .iter()
            .filter(|r| {
                f.is_empty() || r.comm.to_lowercase().contains(&f) || r.pid.to_string() == f
            })
            .cloned()
            .collect();
        let key = |r: &ProcRow| -> f64 {
            match self.sort {
                2 => r.faults,
                3 => r.major.unwrap_or(-1.0),
                4 => r.reclaim_ms,
                5 => r.swap_in.unwrap_or(-1.0),
                6 => r.swap_out.unwrap_or(-1.0),
                7 => r.madvise,
                _ => r.shootdowns,
            }
        };
        match self.sort {
            0 => rows.sort_by_key(|r| r.pid),
            1 => rows.sort_by(|a, b| a.comm.cmp(&b.comm).then(a.pid.cmp(&b.pid))),
            _ => rows.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.pid.cmp(&b.pid))),
        }
        if self.inverted {
            rows.reverse();
        }
        rows
    }

    /// The status line's sort label, e.g. `sort: FLT/s`.
    pub fn sort_label(&self) -> String {
        let dir = if self.inverted { " (inverted)" } else { "" };
        format!("sort: {}{dir}", COLUMNS[self.sort])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn app_with(rows: Vec<ProcRow>) -> App {
        let mut app = App::new(Header::default(), Duration::from_secs(1));
        app.update(Model {
            procs: rows,
            ..Default::default()
        });
        app
    }

    fn row(pid: u32, comm: &str, faults: f64, major: Option<f64>) -> ProcRow {
        ProcRow {
            pid,
            comm: comm.into(),
            faults,
            major,
            ..Default::default()
        }
    }

    #[test]
    fn oom_kills_are_counted_and_the_latest_is_kept_across_quiet_samples() {
        let mut app = app_with(Vec::new());
        let at = |t_s: u64, count: u64, kills: Vec<OomKill>| Sample {
            elapsed_ns: t_s * 1_000_000_000,
            counters: [("oom_kills".to_string(), count)].into(),
            oom_kills: kills,
            ..Default::default()
        };
        app.note_oom(&at(1, 0, Vec::new()));
        assert_eq!((app.oom.count, app.oom.last.is_none()), (0, true));
        let kill = |pid| OomKill {
            pid: Some(pid),
            ..Default::default()
        };
        app.note_oom(&at(2, 2, vec![kill(7), kill(8)]));
        app.note_oom(&at(5, 2, Vec::new()));
        assert_eq!(app.oom.count, 2);
        assert_eq!(app.oom.last.as_ref().and_then(|k| k.pid), Some(8));
        assert_eq!(app.oom.now_ns, 5_000_000_000);
    }

    #[test]
    fn sort_cycles_through_columns_and_inverts() {
        let mut app = app_with(vec![
            row(1, "a", 5.0, Some(1.0)),
            row(2, "b", 50.0, Some(0.0)),
            row(3, "c", 9.0, None),
        ]);
        assert_eq!(app.sort_label(), "sort: FLT/s");
        let pids = |app: &App| app.rows().iter().map(|r| r.pid).collect::<Vec<_>>();
        assert_eq!(pids(&app), [2, 3, 1]);
        app.on_key(key(KeyCode::Char('s')));
        assert_eq!(app.sort_label(), "sort: MAJ/s");
        // Unavailable (None) sorts below any value.
        assert_eq!(pids(&app), [1, 2, 3]);
        app.on_key(key(KeyCode::Char('I')));
        assert_eq!(pids(&app), [3, 2, 1]);
        app.on_key(key(KeyCode::Char('<')));
        app.on_key(key(KeyCode::Char('<')));
        assert_eq!(app.sort_label(), "sort: COMM (inverted)");
    }

    #[test]
    fn filter_by_comm_or_pid() {
        let mut app = app_with(vec![
            row(10, "postgres", 1.0, None),
            row(22, "bash", 2.0, None),
        ]);
        app.on_key(key(KeyCode::Char('/')));
        for c in "POST".chars() {
            app.on_key(key(KeyCode::Char(c)));
        }
        app.on_key(key(KeyCode::Enter));
        assert_eq!(app.rows().len(), 1);
        assert_eq!(app.rows()[0].pid, 10);
        app.on_key(key(KeyCode::Char('/')));
        app.on_key(key(KeyCode::Char('2')));
        app.on_key(key(KeyCode::Char('2')));
        assert_eq!(app.rows()[0].comm, "bash");
        // Typing q while filtering does not quit.
        assert_eq!(app.on_key(key(KeyCode::Char('q'))), Action::None);
    }

    #[test]
    fn pause_freezes_the_view_and_keys_map_to_actions() {
        let mut app = app_with(vec![row(1, "a", 1.0, None)]);
        app.on_key(key(KeyCode::Char(' ')));
        assert!(app.paused);
        app.update(Model::default());
        assert_eq!(app.rows().len(), 1, "paused view must not change");
        assert_eq!(app.on_key(key(KeyCode::Char('r'))), Action::Reset);
        assert_eq!(
            app.on_key(key(KeyCode::Char('+'))),
            Action::Interval(Duration::from_secs(2))
        );
        assert_eq!(app.on_key(key(KeyCode::Char('?'))), Action::None);
        assert!(app.help);
        assert_eq!(app.on_key(key(KeyCode::Char('x'))), Action::None);
        assert!(!app.help);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(app.on_key(ctrl_c), Action::Quit);
        assert_eq!(app.on_key(key(KeyCode::Esc)), Action::Quit);
    }
}
