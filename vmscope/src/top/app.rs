//! The state of `vmscope top` and what each key does. Pure: no terminal
//! here, so key handling is unit-tested.

use std::{sync::LazyLock, time::Duration};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::model::{
    catalogue::{self, COLUMN_COUNT},
    oom::OomKill,
    sample::Sample,
    view::{CgroupRow, Limit, Model, ProcRow, RowRates},
};

/// The rate columns' titles, in order: the catalogue's per-process
/// figures with a column (`catalogue::columns`).
fn rate_titles() -> impl Iterator<Item = &'static str> {
    catalogue::columns().map(|(_, c)| c.title)
}

/// The process table's columns, in order: the process, its rates, then
/// its working set (shown only when measured: [`WSS`] is last).
pub static COLUMNS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    ["PID", "COMM"]
        .into_iter()
        .chain(rate_titles())
        .chain([WSS])
        .collect()
});

/// The cgroup table's columns, in order: the process table's rate columns
/// at the same places, then the cgroup's books, then its working set
/// (shown only when measured).
pub static CGROUP_COLUMNS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    ["CGROUP", "PROCS"]
        .into_iter()
        .chain(rate_titles())
        .chain(["USAGE", "LIMIT", "PSI%", WSS])
        .collect()
});

/// The working-set column's title: the last column of both tables, there
/// only with `--working-set`.
pub const WSS: &str = "WSS";

/// Where the rate columns start in both tables (`RowRates::values` order).
pub const FIRST_RATE: usize = 2;

/// Where the cgroup table's books (USAGE, LIMIT, PSI%) start.
const FIRST_BOOK: usize = FIRST_RATE + COLUMN_COUNT;

/// The column sorted on by default (faults per second, the first rate),
/// in both tables.
pub const DEFAULT_SORT: usize = FIRST_RATE;

/// Which panel the movement keys act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Panel {
    /// The table below the rates (processes or cgroups).
    Table,
    Latency,
}

/// Which table is shown below the rates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Table {
    Processes,
    Cgroups,
    /// The processes of one cgroup (Enter on its row): its id and path.
    CgroupProcesses(u64, String),
}

/// One table's sort, filter and scroll; the process table and the cgroup
/// table keep their own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableState {
    pub sort: usize,
    /// Ascending instead of the default descending (ascending for the
    /// first two columns).
    pub inverted: bool,
    pub filter: String,
    pub scroll: usize,
}

impl Default for TableState {
    fn default() -> Self {
        Self {
            sort: DEFAULT_SORT,
            inverted: false,
            filter: String::new(),
            scroll: 0,
        }
    }
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
pub struct HeaderFacts {
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
    /// The flight recorder's latest report (`--on-oom`: the file written,
    /// or why not).
    pub written: Option<String>,
}

pub struct App {
    pub header: HeaderFacts,
    /// Shown in the header once there has been one.
    pub oom: OomSeen,
    /// What is drawn (frozen while paused).
    pub view: Option<Model>,
    pub paused: bool,
    pub help: bool,
    pub table: Table,
    /// The process table's state (also of one cgroup's processes).
    pub procs: TableState,
    pub cgroups: TableState,
    /// The cgroup under the cursor in the cgroup table, by id (so it stays
    /// under the cursor as rows are sorted afresh).
    pub selected: Option<u64>,
    pub editing_filter: bool,
    pub panel: Panel,
    pub latency: usize,
    pub interval: Duration,
}

impl App {
    pub fn new(header: HeaderFacts, interval: Duration) -> Self {
        Self {
            header,
            oom: OomSeen::default(),
            view: None,
            paused: false,
            help: false,
            table: Table::Processes,
            procs: TableState::default(),
            cgroups: TableState::default(),
            selected: None,
            editing_filter: false,
            panel: Panel::Table,
            latency: 0,
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

    /// Whether the cgroup table is shown.
    pub fn on_cgroups(&self) -> bool {
        self.table == Table::Cgroups
    }

    /// The state of the table shown.
    pub fn state(&self) -> &TableState {
        if self.on_cgroups() {
            &self.cgroups
        } else {
            &self.procs
        }
    }

    fn state_mut(&mut self) -> &mut TableState {
        if self.on_cgroups() {
            &mut self.cgroups
        } else {
            &mut self.procs
        }
    }

    /// The column titles of the table shown (without WSS when the working
    /// set is not measured).
    pub fn columns(&self) -> &'static [&'static str] {
        self.table_columns(self.on_cgroups())
    }

    /// The column titles of the cgroup table or of the process table
    /// (without WSS when the working set is not measured).
    pub fn table_columns(&self, cgroups: bool) -> &'static [&'static str] {
        let all = if cgroups {
            CGROUP_COLUMNS.as_slice()
        } else {
            COLUMNS.as_slice()
        };
        &all[..all.len() - usize::from(!self.working_set())]
    }

    /// Whether the working set is measured: the tables have a WSS column.
    pub fn working_set(&self) -> bool {
        self.view.as_ref().is_some_and(|v| v.working_set)
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
                    self.state_mut().filter.clear();
                }
                KeyCode::Backspace => {
                    self.state_mut().filter.pop();
                }
                KeyCode::Char(c) => self.state_mut().filter.push(c),
                _ => {}
            }
            self.state_mut().scroll = 0;
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
        let columns = self.columns().len();
        match key.code {
            // Esc leaves one cgroup's processes; elsewhere it quits.
            KeyCode::Esc if matches!(self.table, Table::CgroupProcesses(..)) => self.leave_cgroup(),
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Char('?') | KeyCode::Char('h') => self.help = true,
            KeyCode::Char(' ') | KeyCode::Char('p') => self.paused = !self.paused,
            KeyCode::Char('s') | KeyCode::Char('>') => {
                let s = self.state_mut();
                s.sort = (s.sort + 1) % columns;
            }
            KeyCode::Char('<') => {
                let s = self.state_mut();
                s.sort = (s.sort + columns - 1) % columns;
            }
            KeyCode::Char('I') => self.state_mut().inverted ^= true,
            KeyCode::Char('/') => {
                self.editing_filter = true;
                self.state_mut().filter.clear();
            }
            KeyCode::Char('c') => self.toggle_cgroups(),
            KeyCode::Enter if self.on_cgroups() => self.enter_cgroup(),
            KeyCode::Tab => {
                self.panel = match self.panel {
                    Panel::Table => Panel::Latency,
                    Panel::Latency => Panel::Table,
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

    /// `c`: processes to cgroups and back; from one cgroup's processes,
    /// back to the cgroups.
    fn toggle_cgroups(&mut self) {
        self.table = match self.table {
            Table::Processes => Table::Cgroups,
            Table::Cgroups => Table::Processes,
            Table::CgroupProcesses(..) => Table::Cgroups,
        };
        self.panel = Panel::Table;
    }

    /// Enter on the cgroup table: the processes of the cgroup under the
    /// cursor (the first row when none is).
    fn enter_cgroup(&mut self) {
        let rows = self.cgroup_rows();
        let row = self
            .selected
            .and_then(|id| rows.iter().find(|r| r.id == id))
            .or(rows.first());
        if let Some(r) = row {
            self.selected = Some(r.id);
            self.table = Table::CgroupProcesses(r.id, r.path.clone());
            self.procs.scroll = 0;
        }
    }

    fn leave_cgroup(&mut self) {
        self.table = Table::Cgroups;
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
            Panel::Table if self.on_cgroups() => {
                let rows = self.cgroup_rows();
                let at = self
                    .selected
                    .and_then(|id| rows.iter().position(|r| r.id == id));
                let to = match at {
                    Some(i) => i.saturating_add_signed(n).min(rows.len().saturating_sub(1)),
                    None => 0,
                };
                self.selected = rows.get(to).map(|r| r.id);
            }
            Panel::Table => self.procs.scroll = self.procs.scroll.saturating_add_signed(n),
            Panel::Latency => {
                let count = self.view.as_ref().map_or(0, |v| v.latencies.len());
                if count > 0 {
                    let i = self.latency as isize + n.signum();
                    self.latency = i.rem_euclid(count as isize) as usize;
                }
            }
        }
    }

    /// The process rows to show: those of the cgroup entered, if any,
    /// filtered by comm or pid, sorted.
    pub fn rows(&self) -> Vec<ProcRow> {
        let Some(v) = &self.view else {
            return Vec::new();
        };
        let only = match &self.table {
            Table::CgroupProcesses(id, _) => Some(*id),
            _ => None,
        };
        let f = self.procs.filter.to_lowercase();
        let mut rows: Vec<ProcRow> = v
            .procs
            .iter()
            .filter(|r| only.is_none_or(|id| r.cgroup == id))
            .filter(|r| {
                f.is_empty() || r.comm.to_lowercase().contains(&f) || r.pid.to_string() == f
            })
            .cloned()
            .collect();
        let sort = self.procs.sort;
        let key = |r: &ProcRow| -> f64 {
            match sort.checked_sub(FIRST_RATE + COLUMN_COUNT) {
                None => rate_key(&r.rates, sort),
                Some(_) => r.wss_bytes.map_or(-1.0, |b| b as f64),
            }
        };
        match sort {
            0 => rows.sort_by_key(|r| r.pid),
            1 => rows.sort_by(|a, b| a.comm.cmp(&b.comm).then(a.pid.cmp(&b.pid))),
            _ => rows.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.pid.cmp(&b.pid))),
        }
        if self.procs.inverted {
            rows.reverse();
        }
        rows
    }

    /// The cgroup rows to show: filtered by path or workload, sorted.
    pub fn cgroup_rows(&self) -> Vec<CgroupRow> {
        let Some(v) = &self.view else {
            return Vec::new();
        };
        let f = self.cgroups.filter.to_lowercase();
        let mut rows: Vec<CgroupRow> = v
            .cgroups
            .iter()
            .filter(|r| {
                f.is_empty()
                    || r.path.to_lowercase().contains(&f)
                    || r.workload
                        .as_ref()
                        .is_some_and(|w| w.to_lowercase().contains(&f))
            })
            .cloned()
            .collect();
        let sort = self.cgroups.sort;
        let key = |r: &CgroupRow| -> f64 {
            let known = |v: Option<f64>| v.unwrap_or(-1.0);
            match (sort, sort.checked_sub(FIRST_BOOK)) {
                (1, _) => f64::from(r.live),
                (_, None) => rate_key(&r.rates, sort),
                (_, Some(0)) => known(r.usage_bytes.map(|b| b as f64)),
                (_, Some(1)) => match r.limit {
                    Limit::Unknown => -1.0,
                    Limit::Bytes(b) => b as f64,
                    Limit::Unlimited => f64::INFINITY,
                },
                (_, Some(2)) => known(r.psi_some),
                _ => known(r.wss_bytes.map(|b| b as f64)),
            }
        };
        match sort {
            0 => rows.sort_by(|a, b| a.path.cmp(&b.path).then(a.id.cmp(&b.id))),
            _ => rows.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.path.cmp(&b.path))),
        }
        if self.cgroups.inverted {
            rows.reverse();
        }
        rows
    }

    /// The status line's sort label, e.g. `sort: FLT/s`.
    pub fn sort_label(&self) -> String {
        let s = self.state();
        let dir = if s.inverted { " (inverted)" } else { "" };
        format!("sort: {}{dir}", self.columns()[s.sort])
    }
}

/// The sort key of rate column `column`; an unavailable value sorts below
/// any other.
fn rate_key(a: &RowRates, column: usize) -> f64 {
    a.values()
        .get(column.saturating_sub(FIRST_RATE))
        .copied()
        .flatten()
        .unwrap_or(-1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::catalogue::{faults, swap};

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn app_with(rows: Vec<ProcRow>) -> App {
        let mut app = App::new(HeaderFacts::default(), Duration::from_secs(1));
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
            cgroup: u64::from(pid % 2),
            rates: RowRates::default()
                .with(&faults::PROC_FAULTS, Some(faults))
                .with(&faults::PROC_MAJOR, major),
            wss_bytes: None,
        }
    }

    #[test]
    fn the_tables_have_the_catalogues_rate_columns() {
        let rates: Vec<&str> = rate_titles().collect();
        let (process, its_rates) = COLUMNS.split_at(FIRST_RATE);
        assert_eq!(
            (process, &its_rates[..rates.len()]),
            (&["PID", "COMM"][..], &rates[..])
        );
        let (cgroup, rest) = CGROUP_COLUMNS.split_at(FIRST_RATE);
        let (its_rates, books) = rest.split_at(FIRST_BOOK - FIRST_RATE);
        assert_eq!(cgroup, ["CGROUP", "PROCS"]);
        assert_eq!(
            (its_rates, books),
            (&rates[..], &["USAGE", "LIMIT", "PSI%", WSS][..])
        );
        assert_eq!(COLUMNS.last(), Some(&WSS));
        assert_eq!(COLUMNS.get(DEFAULT_SORT), Some(&"FLT/s"));
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

    fn cgroup(id: u64, path: &str, swap_out: f64, live: u32) -> CgroupRow {
        CgroupRow {
            id,
            path: path.into(),
            live,
            rates: RowRates::default()
                .with(&swap::PROC_OUT, Some(swap_out))
                .with(&faults::PROC_FAULTS, Some(swap_out * 2.0)),
            ..Default::default()
        }
    }

    /// Processes 1..=4, odd pids in cgroup 1, even ones in cgroup 0; and
    /// three cgroups.
    fn app_with_cgroups() -> App {
        let mut app = app_with(Vec::new());
        app.update(Model {
            procs: (1..=4).map(|p| row(p, "w", f64::from(p), None)).collect(),
            cgroups: vec![
                cgroup(1, "/jobs/a", 10.0, 2),
                cgroup(2, "/jobs/b", 300.0, 1),
                cgroup(3, "/system.slice", 0.0, 7),
            ],
            ..Default::default()
        });
        app
    }

    #[test]
    fn c_toggles_the_cgroup_table_which_sorts_and_filters_on_its_own() {
        let mut app = app_with_cgroups();
        app.on_key(key(KeyCode::Char('s')));
        assert_eq!(app.sort_label(), "sort: MAJ/s");
        app.on_key(key(KeyCode::Char('c')));
        assert!(app.on_cgroups());
        assert_eq!(app.sort_label(), "sort: FLT/s", "its own sort");
        let paths = |app: &App| {
            app.cgroup_rows()
                .into_iter()
                .map(|r| r.path)
                .collect::<Vec<_>>()
        };
        assert_eq!(paths(&app), ["/jobs/b", "/jobs/a", "/system.slice"]);
        app.on_key(key(KeyCode::Char('<')));
        assert_eq!(app.sort_label(), "sort: PROCS");
        assert_eq!(paths(&app), ["/system.slice", "/jobs/a", "/jobs/b"]);
        app.on_key(key(KeyCode::Char('<')));
        app.on_key(key(KeyCode::Char('<')));
        assert_eq!(app.sort_label(), "sort: PSI%");
        app.on_key(key(KeyCode::Char('/')));
        for c in "JOBS".chars() {
            app.on_key(key(KeyCode::Char(c)));
        }
        app.on_key(key(KeyCode::Enter));
        assert_eq!(paths(&app).len(), 2);
        assert!(app.procs.filter.is_empty(), "the process filter is its own");
        app.on_key(key(KeyCode::Char('c')));
        assert!(!app.on_cgroups());
        assert_eq!(app.sort_label(), "sort: MAJ/s");
        assert_eq!(app.rows().len(), 4);
    }

    #[test]
    fn enter_shows_the_selected_cgroups_processes_and_esc_goes_back() {
        let mut app = app_with_cgroups();
        app.on_key(key(KeyCode::Char('c')));
        // The cursor starts on the first row (/jobs/b) and moves to /jobs/a.
        app.on_key(key(KeyCode::Down));
        assert_eq!(app.selected, Some(2));
        app.on_key(key(KeyCode::Char('j')));
        assert_eq!(app.selected, Some(1));
        app.on_key(key(KeyCode::Enter));
        assert_eq!(app.table, Table::CgroupProcesses(1, "/jobs/a".into()));
        let pids: Vec<u32> = app.rows().iter().map(|r| r.pid).collect();
        assert_eq!(pids, [3, 1], "the odd pids, by faults");
        // Esc goes back (and does not quit); so does c.
        assert_eq!(app.on_key(key(KeyCode::Esc)), Action::None);
        assert!(app.on_cgroups());
        assert_eq!(app.selected, Some(1), "the cursor stays on the cgroup");
        app.on_key(key(KeyCode::Enter));
        app.on_key(key(KeyCode::Char('c')));
        assert!(app.on_cgroups());
        // At the top level Esc still quits.
        assert_eq!(app.on_key(key(KeyCode::Esc)), Action::Quit);
    }

    #[test]
    fn enter_without_cgroups_stays_on_the_cgroup_table() {
        let mut app = app_with(Vec::new());
        app.on_key(key(KeyCode::Char('c')));
        app.on_key(key(KeyCode::Enter));
        assert!(app.on_cgroups());
        app.on_key(key(KeyCode::Down));
        assert_eq!(app.selected, None);
    }
}
