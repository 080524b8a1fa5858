//! Working set: how much of a process's memory it touched within a window,
//! and how long the rest has lain idle. Pure types, the idle-age
//! arithmetic and the run's summary; the reads are `source::wss`'s.
//!
//! Two methods measure:
//! - the referenced-bit scan, per process: at the start of each window the
//!   scanner clears the referenced bits of every page a process maps
//!   (`/proc/PID/clear_refs`), then reads how many are set again
//!   (`Referenced:` in `/proc/PID/smaps_rollup`) at each idle-age edge
//!   inside the window and at its end. What was referenced by the end is
//!   the working set; what was referenced by an edge was touched within
//!   that long of the clear.
//! - the multi-generational LRU, per memory cgroup: the scanner ages each
//!   memory cgroup's generations at the window's inner edge and at its end
//!   (`/sys/kernel/debug/lru_gen`); a generation holds the pages last
//!   found touched after it was made, so the generations younger than the
//!   window hold what was touched within it ([`mglru_by_edge`]).
//!
//! Their known errors are in docs/working-set.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The window the working set is measured over unless told otherwise.
pub const DEFAULT_WINDOW_NS: u64 = 10_000_000_000;

/// The idle-age edges: bytes touched within 1 s, 10 s, 1 min and 10 min.
/// A scan sees only the edges inside its window; older ages are one bucket.
pub const AGE_EDGES_NS: [u64; 4] = [
    1_000_000_000,
    10_000_000_000,
    60_000_000_000,
    600_000_000_000,
];

/// How a working set is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WssMethod {
    /// Referenced bits cleared through `/proc/PID/clear_refs` and counted
    /// in `/proc/PID/smaps_rollup`: every kernel, per process.
    ReferencedScan,
    /// DAMON's access sampling (`/sys/kernel/mm/damon`).
    Damon,
    /// The multi-generational LRU's generations and their ages.
    Mglru,
}

impl WssMethod {
    pub const ALL: [WssMethod; 3] = [Self::ReferencedScan, Self::Damon, Self::Mglru];

    pub fn name(self) -> &'static str {
        match self {
            Self::ReferencedScan => "referenced_scan",
            Self::Damon => "damon",
            Self::Mglru => "mglru",
        }
    }
}

/// One method's standing on this kernel, as `doctor` and the recording
/// state it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MethodStatus {
    pub method: WssMethod,
    /// The kernel offers what the method needs.
    pub offered: bool,
    /// vmscope measures with it (the chosen one).
    pub used: bool,
    /// Why it is not offered or not used, or what it reads.
    pub detail: String,
}

/// How the working set was measured in a run: the recording's header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WssSetup {
    pub method: WssMethod,
    pub window_ns: u64,
    /// The idle-age edges inside the window (the window itself last).
    pub age_edges_ns: Vec<u64>,
    /// Every process (true), or the followed ones and their descendants.
    pub all_processes: bool,
    pub methods: Vec<MethodStatus>,
}

impl WssSetup {
    pub fn scan(window_ns: u64, all_processes: bool, methods: Vec<MethodStatus>) -> Self {
        Self::new(WssMethod::ReferencedScan, window_ns, all_processes, methods)
    }

    /// A setup for `method`: its idle-age edges, and `methods` marked with
    /// the one used.
    pub fn new(
        method: WssMethod,
        window_ns: u64,
        all_processes: bool,
        mut methods: Vec<MethodStatus>,
    ) -> Self {
        for m in &mut methods {
            m.used = m.method == method;
        }
        Self {
            method,
            window_ns,
            age_edges_ns: match method {
                WssMethod::Mglru => mglru_edges(window_ns),
                _ => age_edges(window_ns),
            },
            all_processes,
            methods,
        }
    }
}

/// The idle-age edges a window of `window_ns` can see: those shorter than
/// it, then the window.
pub fn age_edges(window_ns: u64) -> Vec<u64> {
    let mut e: Vec<u64> = AGE_EDGES_NS
        .iter()
        .copied()
        .filter(|&e| e < window_ns)
        .collect();
    e.push(window_ns);
    e
}

/// The edges the multi-generational LRU can tell apart in a window: the
/// longest edge inside it, then the window. Each edge takes a generation
/// and the kernel keeps four: the one made at the window's end (empty),
/// one per edge, and the rest merged into the oldest.
pub fn mglru_edges(window_ns: u64) -> Vec<u64> {
    let mut e: Vec<u64> = AGE_EDGES_NS
        .iter()
        .copied()
        .rfind(|&e| e < window_ns)
        .into_iter()
        .collect();
    e.push(window_ns);
    e
}

/// One generation of a memory cgroup's LRU on one node, as
/// `/sys/kernel/debug/lru_gen` lists it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LruGen {
    pub seq: u64,
    /// Since the generation was made.
    pub age_ms: u64,
    /// Anonymous and file pages in it.
    pub pages: u64,
}

/// A memory cgroup's bytes by idle-age edge (cumulative) and its resident
/// bytes on the LRU, from its generations read right after an aging at the
/// window's end. A generation holds pages last found touched (or faulted
/// in) after it was made, so none of its pages has lain idle longer than
/// its age: it counts at the first edge its age reaches, give or take a
/// quarter of the shortest step between edges (the agings run on a timer,
/// a few milliseconds late). Older generations count as older; so do the
/// generations the kernel made itself, by the same rule.
pub fn mglru_by_edge(gens: &[LruGen], edges_ns: &[u64], page_size: u64) -> (Vec<u64>, u64) {
    let step = edges_ns
        .iter()
        .scan(0u64, |prev, &e| {
            let d = e.saturating_sub(*prev);
            *prev = e;
            Some(d)
        })
        .min()
        .unwrap_or(0);
    let slack = step / 4;
    let mut by_edge = vec![0u64; edges_ns.len()];
    let mut resident = 0u64;
    for g in gens {
        let bytes = g.pages.saturating_mul(page_size);
        resident += bytes;
        let age = g.age_ms.saturating_mul(1_000_000);
        if let Some(i) = edges_ns.iter().position(|&e| age <= e + slack) {
            for b in &mut by_edge[i..] {
                *b += bytes;
            }
        }
    }
    (by_edge, resident)
}

/// Bytes by idle age from cumulative bytes by edge: one per edge (touched
/// within it and not within the one before), then the resident bytes
/// untouched in the window. A count that fell between two reads counts as
/// not grown.
fn idle_split(by_edge: &[u64], resident: u64) -> Vec<u64> {
    let mut out = Vec::with_capacity(by_edge.len() + 1);
    let mut before = 0u64;
    for &r in by_edge {
        let r = r.max(before);
        out.push(r - before);
        before = r;
    }
    out.push(resident.saturating_sub(before));
    out
}

/// One memory cgroup's window, measured as a whole (the multi-generational
/// LRU): its own pages, those of processes in cgroups below it not
/// included.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WssCgroup {
    /// The memory cgroup's path, as the kernel lists it.
    pub cgroup: String,
    /// Bytes touched within the window: the working set.
    pub working_set_bytes: u64,
    /// Its bytes on the LRU at the window's end, anonymous and file.
    pub resident_bytes: u64,
    /// Bytes touched within each edge of `WssSetup::age_edges_ns`,
    /// cumulative (the last is `working_set_bytes`).
    pub referenced_by_edge: Vec<u64>,
}

impl WssCgroup {
    /// Bytes by idle age (see [`WssProc::idle_ages`]).
    pub fn idle_ages(&self) -> Vec<u64> {
        idle_split(&self.referenced_by_edge, self.resident_bytes)
    }
}

/// One process's window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WssProc {
    pub pid: u32,
    pub comm: String,
    /// The memory cgroup's path, as `/proc/PID/cgroup` gives it (absent
    /// when unreadable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// Bytes referenced within the window: the working set.
    pub working_set_bytes: u64,
    /// Resident bytes at the window's end.
    pub rss_bytes: u64,
    /// Of those, in transparent huge pages (`AnonHugePages`) and in shmem
    /// mapped by huge pages (`ShmemPmdMapped`), as the same read gave them.
    #[serde(default)]
    pub anon_huge_bytes: u64,
    #[serde(default)]
    pub shmem_huge_bytes: u64,
    /// Bytes referenced by each edge of `WssSetup::age_edges_ns`,
    /// cumulative (the last is `working_set_bytes`).
    pub referenced_by_edge: Vec<u64>,
}

impl WssProc {
    /// Bytes by idle age: one per edge (touched within it and not within
    /// the one before), then the resident bytes untouched in the window.
    /// A count that fell between two reads (reclaim clears referenced bits
    /// too) counts as not grown.
    pub fn idle_ages(&self) -> Vec<u64> {
        idle_split(&self.referenced_by_edge, self.rss_bytes)
    }
}

/// A process the scan could not read, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WssUnread {
    pub pid: u32,
    pub reason: String,
}

/// One window of the scan: every process it measured, or, with the
/// multi-generational LRU, every memory cgroup.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WssSample {
    /// Since the recording started: the window's start and end.
    pub start_ns: u64,
    pub end_ns: u64,
    pub procs: Vec<WssProc>,
    /// Memory cgroups measured as wholes (the multi-generational LRU),
    /// which has no figure per process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroups: Vec<WssCgroup>,
    /// Processes that ended within the window are left out; these could
    /// not be read at all (e.g. no permission).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<WssUnread>,
    /// CPU time the scanner spent on this window (clearing and reading).
    pub scan_cpu_ns: u64,
}

impl WssSample {
    /// The scope's working set: the sum over its processes (a page two of
    /// them map counts in each), or over its memory cgroups.
    pub fn total_bytes(&self) -> u64 {
        self.procs.iter().map(|p| p.working_set_bytes).sum::<u64>()
            + self
                .cgroups
                .iter()
                .map(|c| c.working_set_bytes)
                .sum::<u64>()
    }

    pub fn rss_bytes(&self) -> u64 {
        self.procs.iter().map(|p| p.rss_bytes).sum::<u64>()
            + self.cgroups.iter().map(|c| c.resident_bytes).sum::<u64>()
    }

    /// The scope's idle-age buckets (see [`WssProc::idle_ages`]).
    pub fn idle_ages(&self) -> Vec<u64> {
        let mut sum: Vec<u64> = Vec::new();
        let each = self
            .procs
            .iter()
            .map(WssProc::idle_ages)
            .chain(self.cgroups.iter().map(WssCgroup::idle_ages));
        for a in each {
            if sum.len() < a.len() {
                sum.resize(a.len(), 0);
            }
            for (s, v) in sum.iter_mut().zip(a) {
                *s += v;
            }
        }
        sum
    }

    /// Working set by memory cgroup path: its processes' sum, or the
    /// cgroup measured as a whole.
    pub fn by_cgroup(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for p in &self.procs {
            if let Some(c) = &p.cgroup {
                *m.entry(c.clone()).or_insert(0) += p.working_set_bytes;
            }
        }
        for c in &self.cgroups {
            *m.entry(c.cgroup.clone()).or_insert(0) += c.working_set_bytes;
        }
        m
    }
}

/// A figure over the run's windows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WssFigure {
    pub last_bytes: u64,
    pub max_bytes: u64,
    pub mean_bytes: f64,
}

impl WssFigure {
    fn push(f: &mut Option<(u64, u64, u64, u64)>, v: u64) {
        let (last, max, sum, n) = f.get_or_insert((0, 0, 0, 0));
        *last = v;
        *max = (*max).max(v);
        *sum += v;
        *n += 1;
    }

    fn of((last, max, sum, n): (u64, u64, u64, u64)) -> Self {
        Self {
            last_bytes: last,
            max_bytes: max,
            mean_bytes: sum as f64 / n.max(1) as f64,
        }
    }
}

/// The run's working set: the recording's `working_set`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WssTotals {
    #[serde(flatten)]
    pub setup: WssSetup,
    /// Windows that completed.
    pub windows: u64,
    /// Of those, windows that listed no process or cgroup (the scope had
    /// ended: e.g. the followed command exited within the window), which
    /// the figures leave out rather than read as 0 bytes.
    #[serde(default)]
    pub empty_windows: u64,
    /// The scope's working set over the windows that listed a process or
    /// cgroup; null when none did (the run was shorter than one window).
    pub scope: Option<WssFigure>,
    /// The last window's idle-age buckets, by `age_edges_ns` then older.
    pub idle_ages_bytes: Vec<u64>,
    /// Per memory cgroup path.
    pub cgroups: BTreeMap<String, WssFigure>,
    /// The scanner's CPU time over the run's time, in one CPU's share.
    pub scan_cpu_share: Option<f64>,
    /// Why there is no figure: no window completed, or none listed a
    /// process or cgroup of the scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl WssTotals {
    /// One line for the terminal: the figure, its window and its method.
    pub fn summary(&self) -> String {
        let mib = |b: f64| b / (1024.0 * 1024.0);
        let window = window_label(self.setup.window_ns);
        match (&self.scope, &self.unavailable) {
            (Some(f), _) => format!(
                "working set ({window} window, {}): last {:.1} MiB, max {:.1} MiB, mean {:.1} MiB over {} windows{}; {} CPU {}",
                self.setup.method.name(),
                mib(f.last_bytes as f64),
                mib(f.max_bytes as f64),
                mib(f.mean_bytes),
                self.windows - self.empty_windows.min(self.windows),
                match self.empty_windows {
                    0 => String::new(),
                    1 => " (1 after the scope ended left out)".into(),
                    n => format!(" ({n} after the scope ended left out)"),
                },
                match self.setup.method {
                    WssMethod::Mglru => "aging",
                    _ => "scan",
                },
                self.scan_cpu_share
                    .map(|c| format!("{:.3}% of one CPU", c * 100.0))
                    .unwrap_or_else(|| "unmeasured".into()),
            ),
            (None, Some(why)) => format!("working set unavailable: {why}"),
            (None, None) => "working set unavailable".into(),
        }
    }
}

/// The windows folded as they come: constant memory per cgroup, whatever
/// the run's length.
#[derive(Clone, Debug, Default)]
pub struct WssFold {
    windows: u64,
    empty: u64,
    scope: Option<(u64, u64, u64, u64)>,
    cgroups: BTreeMap<String, Option<(u64, u64, u64, u64)>>,
    idle_ages: Vec<u64>,
    cpu_ns: u64,
    span: Option<(u64, u64)>,
}

impl WssFold {
    pub fn push(&mut self, w: &WssSample) {
        self.windows += 1;
        self.cpu_ns += w.scan_cpu_ns;
        let (start, _) = self.span.get_or_insert((w.start_ns, w.end_ns));
        self.span = Some((*start, w.end_ns));
        if w.procs.is_empty() && w.cgroups.is_empty() {
            // Nothing of the scope was left to measure: not a 0.
            self.empty += 1;
            return;
        }
        WssFigure::push(&mut self.scope, w.total_bytes());
        for (c, b) in w.by_cgroup() {
            WssFigure::push(self.cgroups.entry(c).or_default(), b);
        }
        self.idle_ages = w.idle_ages();
    }

    /// The run's summary.
    pub fn totals(&self, setup: WssSetup) -> WssTotals {
        let span = self.span.map(|(a, b)| b.saturating_sub(a)).unwrap_or(0);
        let unavailable = if self.windows == 0 {
            Some(format!(
                "no window of {} s completed in the run",
                setup.window_ns as f64 / 1e9
            ))
        } else if self.scope.is_none() {
            Some("no window listed a process or cgroup of the scope".into())
        } else {
            None
        };
        WssTotals {
            windows: self.windows,
            empty_windows: self.empty,
            scope: self.scope.map(WssFigure::of),
            idle_ages_bytes: self.idle_ages.clone(),
            cgroups: self
                .cgroups
                .iter()
                .filter_map(|(c, f)| Some((c.clone(), WssFigure::of((*f)?))))
                .collect(),
            scan_cpu_share: (span > 0).then(|| self.cpu_ns as f64 / span as f64),
            unavailable,
            setup,
        }
    }
}

/// The idle-age buckets' names for a setup's edges (`WssSetup::age_edges_ns`):
/// `PREFIX<edge>` for each (`lt_1s`, `lt_10s`; `<1s`...), then `older`.
pub fn idle_bucket_names(edges_ns: &[u64], prefix: &str) -> Vec<String> {
    edges_ns
        .iter()
        .copied()
        .map(|e| format!("{prefix}{}", window_label(e)))
        .chain(std::iter::once("older".to_string()))
        .collect()
}

/// A duration as the exporter labels it: `10s`, `1m`, `1500ms`.
pub fn window_label(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    if ns.is_multiple_of(60_000_000_000) && s > 0 {
        format!("{}m", s / 60)
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{s}s")
    } else {
        format!("{}ms", ns / 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, cg: &str, by_edge: &[u64], rss: u64) -> WssProc {
        WssProc {
            pid,
            comm: "c".into(),
            cgroup: Some(cg.into()),
            working_set_bytes: by_edge.last().copied().unwrap_or(0),
            rss_bytes: rss,
            anon_huge_bytes: 0,
            shmem_huge_bytes: 0,
            referenced_by_edge: by_edge.to_vec(),
        }
    }

    #[test]
    fn edges_stop_at_the_window() {
        assert_eq!(
            age_edges(DEFAULT_WINDOW_NS),
            vec![1_000_000_000, 10_000_000_000]
        );
        assert_eq!(age_edges(500_000_000), vec![500_000_000]);
        assert_eq!(
            age_edges(600_000_000_000),
            vec![
                1_000_000_000,
                10_000_000_000,
                60_000_000_000,
                600_000_000_000
            ]
        );
    }

    #[test]
    fn idle_ages_split_the_resident_bytes_and_never_go_negative() {
        let p = proc(1, "/a", &[100, 300], 1000);
        assert_eq!(p.idle_ages(), vec![100, 200, 700]);
        // Reclaim cleared bits between the reads: the later count fell.
        let p = proc(1, "/a", &[300, 200], 250);
        assert_eq!(p.idle_ages(), vec![300, 0, 0]);
        assert_eq!(p.idle_ages().iter().sum::<u64>(), 300);
    }

    #[test]
    fn totals_sum_processes_and_cgroups_over_windows() {
        let w1 = WssSample {
            start_ns: 0,
            end_ns: 10,
            procs: vec![proc(1, "/a", &[1, 4], 10), proc(2, "/b", &[2, 6], 10)],
            cgroups: vec![],
            unread: vec![],
            scan_cpu_ns: 1,
        };
        let w2 = WssSample {
            start_ns: 10,
            end_ns: 20,
            procs: vec![proc(1, "/a", &[1, 8], 10), proc(2, "/a", &[0, 2], 10)],
            cgroups: vec![],
            unread: vec![],
            scan_cpu_ns: 1,
        };
        let mut f = WssFold::default();
        f.push(&w1);
        f.push(&w2);
        let t = f.totals(WssSetup::scan(10, false, vec![]));
        assert_eq!(t.windows, 2);
        let s = t.scope.expect("a window");
        assert_eq!((s.last_bytes, s.max_bytes, s.mean_bytes), (10, 10, 10.0));
        assert_eq!(t.cgroups["/a"].last_bytes, 10);
        assert_eq!(t.cgroups["/a"].mean_bytes, 7.0);
        assert_eq!(t.cgroups["/b"].last_bytes, 6);
        assert_eq!(t.idle_ages_bytes, vec![1, 9, 10]);
        assert_eq!(t.scan_cpu_share, Some(0.1));
        assert!(t.unavailable.is_none());
    }

    #[test]
    fn a_window_after_the_scope_ended_is_left_out_not_read_as_zero() {
        let w = |start, procs| WssSample {
            start_ns: start,
            end_ns: start + 10,
            procs,
            cgroups: vec![],
            unread: vec![],
            scan_cpu_ns: 1,
        };
        let mut f = WssFold::default();
        f.push(&w(0, vec![proc(1, "/a", &[1, 4], 10)]));
        f.push(&w(10, vec![proc(1, "/a", &[1, 6], 10)]));
        f.push(&w(20, vec![]));
        let t = f.totals(WssSetup::scan(10, false, vec![]));
        assert_eq!((t.windows, t.empty_windows), (3, 1));
        let s = t.scope.as_ref().expect("two windows listed the process");
        assert_eq!((s.last_bytes, s.max_bytes, s.mean_bytes), (6, 6, 5.0));
        assert_eq!(t.idle_ages_bytes, vec![1, 5, 4]);
        assert_eq!(t.scan_cpu_share, Some(0.1));
        assert!(
            t.summary()
                .contains("over 2 windows (1 after the scope ended left out)"),
            "{}",
            t.summary()
        );
        // Only empty windows: unavailable, with the reason.
        let mut f = WssFold::default();
        f.push(&w(0, vec![]));
        let t = f.totals(WssSetup::scan(10, false, vec![]));
        assert!(t.scope.is_none());
        assert_eq!(
            t.summary(),
            "working set unavailable: no window listed a process or cgroup of the scope"
        );
    }

    #[test]
    fn no_window_is_unavailable_not_zero() {
        let t = WssFold::default().totals(WssSetup::scan(DEFAULT_WINDOW_NS, false, vec![]));
        assert!(t.scope.is_none());
        assert_eq!(
            t.unavailable.as_deref(),
            Some("no window of 10 s completed in the run")
        );
    }

    #[test]
    fn mglru_splits_the_window_once() {
        assert_eq!(
            mglru_edges(DEFAULT_WINDOW_NS),
            vec![1_000_000_000, 10_000_000_000]
        );
        assert_eq!(
            mglru_edges(60_000_000_000),
            vec![10_000_000_000, 60_000_000_000]
        );
        assert_eq!(mglru_edges(500_000_000), vec![500_000_000]);
        let s = WssSetup::new(WssMethod::Mglru, 60_000_000_000, true, vec![]);
        assert_eq!(s.age_edges_ns, mglru_edges(60_000_000_000));
    }

    #[test]
    fn generations_count_at_the_edge_their_age_reaches() {
        let g = |age_ms, pages| LruGen {
            seq: 0,
            age_ms,
            pages,
        };
        let edges = mglru_edges(DEFAULT_WINDOW_NS);
        // Read right after the closing aging: the one it made (5 ms, a
        // page faulted since), the one made at the inner edge (1.004 s),
        // the one made at the window's start (10.02 s), the last window's
        // inner one (11 s) and one the kernel made long ago.
        let gens = [
            g(5, 1),
            g(1004, 10),
            g(10_020, 100),
            g(11_000, 1000),
            g(900_000, 5),
        ];
        let (by_edge, resident) = mglru_by_edge(&gens, &edges, 4096);
        assert_eq!(by_edge, vec![11 * 4096, 111 * 4096]);
        assert_eq!(resident, 1116 * 4096);
        let c = WssCgroup {
            cgroup: "/w".into(),
            working_set_bytes: by_edge[1],
            resident_bytes: resident,
            referenced_by_edge: by_edge,
        };
        assert_eq!(c.idle_ages(), vec![11 * 4096, 100 * 4096, 1005 * 4096]);
        let w = WssSample {
            cgroups: vec![c],
            ..WssSample::default()
        };
        assert_eq!(w.total_bytes(), 111 * 4096);
        assert_eq!(w.by_cgroup()["/w"], 111 * 4096);
        assert_eq!(w.rss_bytes(), 1116 * 4096);
    }

    #[test]
    fn window_labels() {
        assert_eq!(window_label(DEFAULT_WINDOW_NS), "10s");
        assert_eq!(window_label(600_000_000_000), "10m");
        assert_eq!(window_label(1_500_000_000), "1500ms");
    }
}
