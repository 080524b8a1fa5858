//! What `top` draws, computed from two snapshots: the per-interval rates
//! (system-wide and per process), the latency histograms since a baseline
//! and PSI. [`Model::new`] is pure, so it is tested with hand-made
//! snapshots; the sparkline history is kept by `live::Live`.

use std::collections::BTreeMap;

use crate::{
    model::{
        catalogue::{self, COLUMN_COUNT, COLUMN_FIELDS, Detail, ProcField, RateValue},
        hist::{self, Summary},
        process::ProcSample,
        rmap::IntervalCounts,
        snapshot::Snapshot,
    },
    procstat::Psi,
};

/// One system-wide rate.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLine {
    pub name: &'static str,
    pub unit: &'static str,
    /// This interval's value; `None` when unknown for this interval.
    pub value: Option<f64>,
    /// Oldest first, at most `live::HISTORY` values.
    pub history: Vec<f64>,
    /// Why the metric is not available on this kernel at all.
    pub unavailable: Option<String>,
    /// The largest parts this interval (TLB flushes by reason, madvise by
    /// behaviour), e.g. `dontneed 300, free 120`.
    pub detail: Option<String>,
}

/// The rates the process and cgroup tables share, over the last interval:
/// one per catalogue column ([`COLUMN_FIELDS`]), in their order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowRates([Option<f64>; COLUMN_COUNT]);

impl Default for RowRates {
    /// Nothing happened: 0 in the columns always shown, unknown elsewhere.
    fn default() -> Self {
        Self(
            COLUMN_FIELDS
                .each_ref()
                .map(|f| f.column.filter(|c| c.always).map(|_| 0.0)),
        )
    }
}

impl RowRates {
    /// Whether anything happened this interval.
    pub fn active(&self) -> bool {
        self.0.iter().any(|v| v.unwrap_or(0.0) > 0.0)
    }

    /// In the tables' column order (`None` where unavailable).
    pub fn values(&self) -> [Option<f64>; COLUMN_COUNT] {
        self.0
    }

    /// The rate in `field`'s column (`None` where unavailable, or when it
    /// has no column).
    pub fn of(&self, field: &ProcField) -> Option<f64> {
        self.0[column_of(field)?]
    }

    /// With `field`'s column set to `value` (a hand-made row); a field
    /// without a column changes nothing.
    pub fn with(mut self, field: &ProcField, value: Option<f64>) -> Self {
        if let Some(i) = column_of(field) {
            self.0[i] = value;
        }
        self
    }
}

/// Where `field`'s column is in [`RowRates`].
fn column_of(field: &ProcField) -> Option<usize> {
    COLUMN_FIELDS.iter().position(|f| f.key == field.key)
}

/// One process over the last interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcRow {
    pub pid: u32,
    pub comm: String,
    /// Its cgroup's id (0: unknown).
    pub cgroup: u64,
    pub rates: RowRates,
    /// Its working set in the last window that finished (`--working-set`);
    /// `None` when not measured for it (not scanned, or no window yet).
    pub wss_bytes: Option<u64>,
}

/// A cgroup's memory limit as its books give it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Limit {
    /// Its files could not be read.
    #[default]
    Unknown,
    Bytes(u64),
    Unlimited,
}

/// One cgroup over the last interval: its processes' rates (the growth of
/// their counters while in it), its books as last read, and its live
/// processes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CgroupRow {
    pub id: u64,
    /// Below the hierarchy's mount (`/` the root); `cgroup#ID` when never
    /// resolved.
    pub path: String,
    /// The workload its path names, short (`podman:web`,
    /// `pod:1f0e2d3c/containerd:9a3b5c7d9e1f`, `nginx.service`); `None`
    /// for a layout no runtime or unit made.
    pub workload: Option<String>,
    /// Its processes alive now (those vmscope has seen).
    pub live: u32,
    pub rates: RowRates,
    /// `None` when unknown.
    pub usage_bytes: Option<u64>,
    pub limit: Limit,
    /// PSI memory `some` avg10 (%); `None` where the kernel has none for
    /// the cgroup (v1, PSI off) or its files could not be read.
    pub psi_some: Option<f64>,
    /// Its working set in the last window that finished: the memory
    /// cgroup's own figure (multi-generational LRU), or the sum over its
    /// processes scanned; `None` when neither was measured.
    pub wss_bytes: Option<u64>,
}

/// A latency histogram since the start or the last reset.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    pub name: String,
    pub summary: Summary,
}

/// What the views draw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Model {
    pub interval_s: f64,
    pub rates: Vec<RateLine>,
    pub procs: Vec<ProcRow>,
    /// Every cgroup with live processes or activity this interval.
    pub cgroups: Vec<CgroupRow>,
    /// Why there are no cgroup figures (the `cgroup attribution` probe's
    /// reason), when there are none.
    pub cgroups_unavailable: Option<String>,
    /// Why no cgroup has PSI figures (cgroup v1), when none has.
    pub cgroup_psi_unavailable: Option<String>,
    pub latencies: Vec<Latency>,
    pub psi: Option<Psi>,
    /// Seconds since the start (or the last reset).
    pub elapsed_s: f64,
    /// Whether the working set is measured (`--working-set`): the tables
    /// then have a WSS column.
    pub working_set: bool,
}

/// Which optional metrics this kernel provides: metric name -> reason it
/// does not. Names are those of `RateLine::name`, the catalogue's
/// per-process columns (`major`, `swap`, ...), [`CGROUPS`] and
/// [`CGROUP_PSI`].
pub type Unavailable = BTreeMap<String, String>;

/// Per-cgroup figures as a whole (the probe list's name for attribution).
pub const CGROUPS: &str = catalogue::probe::CGROUPS;
/// Per-cgroup PSI (none on cgroup v1).
pub const CGROUP_PSI: &str = "cgroup PSI";

impl Model {
    /// The model at `now`. `last` is the snapshot before it (without one
    /// there are no rates); the latencies and elapsed time count from
    /// `since` (from zero when `None`). Rates come without history.
    pub fn new(
        now: &Snapshot,
        last: Option<&Snapshot>,
        since: Option<&Snapshot>,
        unavailable: &Unavailable,
    ) -> Self {
        let mut m = Model {
            latencies: latencies(now, since),
            psi: now.psi,
            elapsed_s: secs_between(since.map_or(0, |b| b.elapsed_ns), now.elapsed_ns),
            cgroups_unavailable: unavailable.get(CGROUPS).cloned(),
            cgroup_psi_unavailable: unavailable.get(CGROUP_PSI).cloned(),
            ..Default::default()
        };
        if let Some(last) = last {
            let span = Interval::new(last, now);
            m.interval_s = span.dt;
            m.rates = span.rates(unavailable);
            m.procs = span.proc_rows(unavailable);
            if m.cgroups_unavailable.is_none() {
                m.cgroups = span.cgroup_rows(unavailable);
            }
            if let Some(w) = &now.wss {
                m.working_set = true;
                let idle = ProcSample::default();
                working_set_rows(&mut m, w, now, |pid| {
                    let p = now.procs.get(&pid).unwrap_or(&idle);
                    span.activity(now.before(last, pid), p, unavailable)
                });
            }
        }
        m
    }
}

/// Puts the last working-set window into the tables: each process scanned
/// gets its figure, and one idle this interval is listed anyway (a hot set
/// that stays resident takes no faults); each cgroup gets its memory
/// cgroup's own figure where one was measured, or else the sum over its
/// processes scanned. A process that ended within the window was left out
/// of it, so none is listed after its end for longer than one window.
/// `rates` gives a process's rates this interval.
fn working_set_rows(
    m: &mut Model,
    w: &crate::model::wss::WssSample,
    now: &Snapshot,
    rates: impl Fn(u32) -> RowRates,
) {
    let by_path: BTreeMap<&str, u64> = now
        .cgroups
        .iter()
        .filter_map(|(&id, c)| Some((c.path.as_deref()?, id)))
        .collect();
    let mut rows: BTreeMap<u32, usize> = m
        .procs
        .iter()
        .enumerate()
        .map(|(i, r)| (r.pid, i))
        .collect();
    let mut by_cgroup: BTreeMap<u64, u64> = BTreeMap::new();
    for p in &w.procs {
        let cgroup = match now.procs.get(&p.pid) {
            Some(seen) => seen.cgroup,
            None => p
                .cgroup
                .as_deref()
                .and_then(|c| by_path.get(c).copied())
                .unwrap_or(0),
        };
        if cgroup != 0 {
            *by_cgroup.entry(cgroup).or_default() += p.working_set_bytes;
        }
        match rows.get(&p.pid) {
            Some(&i) => m.procs[i].wss_bytes = Some(p.working_set_bytes),
            None if p.working_set_bytes > 0 => {
                rows.insert(p.pid, m.procs.len());
                m.procs.push(ProcRow {
                    pid: p.pid,
                    comm: now.procs.get(&p.pid).map_or(&p.comm, |s| &s.comm).clone(),
                    cgroup,
                    rates: rates(p.pid),
                    wss_bytes: Some(p.working_set_bytes),
                });
            }
            None => {}
        }
    }
    let own: BTreeMap<&str, u64> = w
        .cgroups
        .iter()
        .map(|c| (c.cgroup.as_str(), c.working_set_bytes))
        .collect();
    for row in &mut m.cgroups {
        row.wss_bytes = own
            .get(row.path.as_str())
            .or(by_cgroup.get(&row.id))
            .copied();
    }
}

fn secs_between(then_ns: u64, now_ns: u64) -> f64 {
    now_ns.saturating_sub(then_ns) as f64 / 1e9
}

fn per_s(then: u64, now: u64, dt: f64) -> Option<f64> {
    let d = now.checked_sub(then)?;
    (dt > 0.0).then(|| d as f64 / dt)
}

fn latencies(now: &Snapshot, since: Option<&Snapshot>) -> Vec<Latency> {
    now.hists
        .iter()
        .filter_map(|(name, h)| {
            let summary = hist::summarize(since.and_then(|b| b.hists.get(name)), h)?;
            (summary.count > 0).then(|| Latency {
                name: name.clone(),
                summary,
            })
        })
        .collect()
}

/// The non-zero parts, largest first, at most three.
fn breakdown(mut parts: Vec<(String, f64)>) -> Option<String> {
    parts.retain(|(_, v)| *v > 0.0);
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    let text: Vec<String> = parts
        .iter()
        .take(3)
        .map(|(k, v)| {
            if *v < 10.0 {
                format!("{k} {v:.1}")
            } else {
                format!("{k} {v:.0}")
            }
        })
        .collect();
    (!text.is_empty()).then(|| text.join(", "))
}

/// Two consecutive snapshots and the seconds between them.
struct Interval<'a> {
    a: &'a Snapshot,
    b: &'a Snapshot,
    dt: f64,
    rmap: Option<IntervalCounts>,
}

impl<'a> Interval<'a> {
    fn new(a: &'a Snapshot, b: &'a Snapshot) -> Self {
        let rmap = match (&a.rmap, &b.rmap) {
            (Some(x), Some(y)) => crate::model::rmap::interval(x, y),
            _ => None,
        };
        Self {
            a,
            b,
            dt: secs_between(a.elapsed_ns, b.elapsed_ns),
            rmap,
        }
    }

    fn per_s(&self, f: impl Fn(&Snapshot) -> Option<u64>) -> Option<f64> {
        per_s(f(self.a)?, f(self.b)?, self.dt)
    }

    fn counter(&self, name: &str) -> Option<f64> {
        self.per_s(|s| s.counters.get(name).copied())
    }

    /// The rates of the growth from `then` (nothing: all of `now` is new)
    /// to `now`, through the catalogue's getters; a column unavailable on
    /// this kernel is `None`.
    fn activity(
        &self,
        then: Option<&ProcSample>,
        now: &ProcSample,
        unavailable: &Unavailable,
    ) -> RowRates {
        RowRates(COLUMN_FIELDS.each_ref().map(|f| {
            let c = f.column?;
            if unavailable.contains_key(c.key) {
                return c.always.then_some(0.0);
            }
            let rate = per_s(then.map_or(0, f.get), (f.get)(now), self.dt).unwrap_or(0.0);
            Some(rate / c.divide_by)
        }))
    }

    /// Every process's rates, the idle ones left out (an activity view).
    fn proc_rows(&self, unavailable: &Unavailable) -> Vec<ProcRow> {
        self.b
            .procs
            .values()
            .filter_map(|p| {
                let then = self.b.before(self.a, p.pid);
                let row = ProcRow {
                    pid: p.pid,
                    comm: p.comm.clone(),
                    cgroup: p.cgroup,
                    rates: self.activity(then, p, unavailable),
                    wss_bytes: None,
                };
                row.rates.active().then_some(row)
            })
            .collect()
    }

    /// Every cgroup with live processes or activity this interval; its
    /// rates are the growth of its counts (those of a cgroup first seen
    /// now, all of them).
    fn cgroup_rows(&self, unavailable: &Unavailable) -> Vec<CgroupRow> {
        let psi_known = !unavailable.contains_key(CGROUP_PSI);
        self.b
            .cgroups
            .iter()
            .filter_map(|(&id, c)| {
                let then = self.a.cgroups.get(&id).map(|x| &x.counts);
                let rates = self.activity(then, &c.counts, unavailable);
                if c.live == 0 && !rates.active() {
                    return None;
                }
                let books = c.books.as_ref();
                Some(CgroupRow {
                    id,
                    path: c.name(id),
                    workload: c.identity().map(|w| w.label()),
                    live: c.live,
                    rates,
                    usage_bytes: books.and_then(|b| b.usage_bytes),
                    limit: match books {
                        None => Limit::Unknown,
                        Some(b) => b.limit_bytes.map_or(Limit::Unlimited, Limit::Bytes),
                    },
                    psi_some: books
                        .and_then(|b| b.psi)
                        .filter(|_| psi_known)
                        .map(|p| p.some.avg10),
                    wss_bytes: None,
                })
            })
            .collect()
    }

    /// The catalogue's rate rows, in order.
    fn rates(&self, unavailable: &Unavailable) -> Vec<RateLine> {
        catalogue::RATES
            .iter()
            .map(|row| {
                // A vmstat counter this kernel lacks (zswpout without
                // zswap) is said to be missing, not shown blank.
                let unavailable = unavailable
                    .get(row.label)
                    .cloned()
                    .or_else(|| match row.value {
                        RateValue::Vmstat(k) if self.b.vmstat.get(k).is_none() => {
                            Some(format!("this kernel's /proc/vmstat has no {k}"))
                        }
                        _ => None,
                    });
                RateLine {
                    name: row.label,
                    unit: row.unit,
                    value: self.value(row.value).filter(|_| unavailable.is_none()),
                    history: Vec::new(),
                    unavailable,
                    detail: self.detail(row),
                }
            })
            .collect()
    }

    fn value(&self, v: RateValue) -> Option<f64> {
        let sum = |a: &[u64]| a.iter().sum::<u64>();
        match v {
            // With the perf fallback every fault is unclassified: shown as
            // user.
            RateValue::FaultsUser => {
                self.per_s(|s| Some(sum(&s.faults.user) + s.faults.unclassified))
            }
            RateValue::FaultsKernel => self.per_s(|s| Some(sum(&s.faults.kernel))),
            RateValue::FaultsGup => self.per_s(|s| Some(s.faults.gup)),
            RateValue::Counters(names) => names.iter().map(|n| self.counter(n)).sum(),
            RateValue::Vmstat(key) => self.per_s(|s| s.vmstat.get(key)),
            RateValue::HistMs(name) => self
                .per_s(|s| Some(s.hists.get(name).map_or(0, |h| h.sum_ns)))
                .map(|v| v / 1e6),
            RateValue::PsiSome => self.per_s(|s| Some(s.psi?.some.total_us)).map(|v| v / 1e3),
            RateValue::StallCoverage => {
                let named: f64 = crate::model::stall::MEMORY_STALLS
                    .iter()
                    .filter_map(|(_, h)| {
                        self.per_s(|s| Some(s.hists.get(*h).map_or(0, |x| x.sum_ns)))
                    })
                    .sum();
                let psi = self.per_s(|s| Some(s.psi?.some.total_us))? * 1e3;
                // Weighed per CPU as PSI weighs it, where it can be.
                let weighted = crate::model::stall::weigh_interval(
                    (self.a.cpu.as_ref(), self.b.cpu.as_ref()),
                    (&self.a.stall_ns_by_cpu, &self.b.stall_ns_by_cpu),
                )
                .map(|ns| ns / self.dt);
                crate::model::stall::coverage(weighted.unwrap_or(named), psi)
            }
            RateValue::MadviseCalls => {
                self.per_s(|s| Some(s.madvise.iter().map(|m| m.calls).sum()))
            }
            RateValue::ReadHitRatio => {
                let [read, added] =
                    ["page_cache_read_pages", "page_cache_added_pages"].map(|n| self.counter(n));
                catalogue::pagecache::read_hit_ratio(read?, added?).map(|r| 100.0 * r)
            }
            RateValue::RmapWalk | RateValue::RmapMaintenance => self
                .rmap
                .and_then(|r| r.percent(self.rmap_part(v)?))
                .map(|(p, _)| p),
        }
    }

    fn rmap_part(&self, v: RateValue) -> Option<u64> {
        let r = self.rmap?;
        match v {
            RateValue::RmapWalk => Some(r.walk),
            RateValue::RmapMaintenance => Some(r.maintenance),
            _ => None,
        }
    }

    fn detail(&self, row: &catalogue::Rate) -> Option<String> {
        match row.detail {
            Detail::None => None,
            Detail::Breakdown(parts) => breakdown(
                parts
                    .iter()
                    .filter_map(|(k, n)| Some((k.to_string(), self.counter(n)?)))
                    .collect(),
            ),
            Detail::MadviseBehaviours => self.madvise_detail(),
            Detail::RmapSamples => {
                let (r, part) = (self.rmap?, self.rmap_part(row.value)?);
                let (_, err) = r.percent(part)?;
                Some(format!(
                    "sampled: {part} of {} samples, ±{err:.2}%",
                    r.total
                ))
            }
        }
    }

    fn madvise_detail(&self) -> Option<String> {
        breakdown(
            self.b
                .madvise
                .iter()
                .filter_map(|m| {
                    let then = self
                        .a
                        .madvise
                        .iter()
                        .find(|x| x.behavior == m.behavior)
                        .map_or(0, |x| x.calls);
                    Some((m.behavior.clone(), per_s(then, m.calls, self.dt)?))
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::catalogue::{faults, madvise, swap};
    use crate::model::cgroup::{CgroupBooks, CgroupSample};
    use crate::model::sample::Sample;
    use crate::procstat::PsiLine;

    fn snap(t_s: u64, procs: &[(u32, u64)]) -> Snapshot {
        let mut s = Snapshot::default();
        s.apply(&Sample {
            elapsed_ns: t_s * 1_000_000_000,
            procs: procs
                .iter()
                .map(|&(pid, calls)| ProcSample {
                    pid,
                    comm: format!("p{pid}"),
                    madvise_calls: calls,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        s
    }

    /// A vmstat row whose counter the kernel lacks says so; one it has
    /// gives its rate, 0 included.
    #[test]
    fn a_vmstat_row_the_kernel_lacks_is_unavailable_not_blank() {
        let mut last = snap(1, &[]);
        let mut now = snap(2, &[]);
        for (s, v) in [(&mut last, 10), (&mut now, 10)] {
            s.vmstat.0.insert("pswpout".into(), v);
        }
        let m = Model::new(&now, Some(&last), None, &Unavailable::new());
        let row = |name: &str| m.rates.iter().find(|r| r.name == name).cloned();
        let zswap = row("zswap store").expect("the zswap row");
        assert_eq!(zswap.value, None);
        assert!(
            zswap
                .unavailable
                .as_deref()
                .is_some_and(|u| u.contains("no zswpout")),
            "{zswap:?}"
        );
        let out = row("swap-out").expect("the swap-out row");
        assert_eq!((out.value, out.unavailable), (Some(0.0), None));
    }

    #[test]
    fn breakdown_lists_the_largest_non_zero_parts() {
        let parts = vec![
            ("free".to_string(), 120.0),
            ("cold".to_string(), 0.0),
            ("dontneed".to_string(), 300.0),
            ("willneed".to_string(), 2.5),
            ("pageout".to_string(), 1.0),
        ];
        assert_eq!(
            breakdown(parts).as_deref(),
            Some("dontneed 300, free 120, willneed 2.5")
        );
        assert_eq!(breakdown(vec![("x".into(), 0.0)]), None);
    }

    #[test]
    fn without_a_last_snapshot_there_are_latencies_but_no_rates() {
        let mut now = snap(3, &[(1, 5)]);
        now.hists.insert(
            "reclaim_direct".into(),
            crate::model::hist::HistSample {
                name: "reclaim_direct".into(),
                sum_ns: 100,
                buckets: vec![[7, 2]],
            },
        );
        let m = Model::new(&now, None, None, &Unavailable::new());
        assert!(m.rates.is_empty() && m.procs.is_empty());
        assert_eq!(m.elapsed_s, 3.0);
        assert_eq!(m.latencies.len(), 1);
        assert_eq!(m.latencies[0].summary.count, 2);
        // Since a baseline at the same state: nothing new, nothing listed.
        let m = Model::new(&now, None, Some(&now), &Unavailable::new());
        assert!(m.latencies.is_empty());
        assert_eq!(m.elapsed_s, 0.0);
    }

    #[test]
    fn a_process_under_a_reused_pid_counts_from_zero() {
        let last = snap(0, &[(7, 100)]);
        let mut now = last.clone();
        now.apply(&Sample {
            elapsed_ns: 2_000_000_000,
            exited: vec![7],
            procs: vec![ProcSample {
                pid: 7,
                comm: "new".into(),
                madvise_calls: 10,
                ..Default::default()
            }],
            ..Default::default()
        });
        let m = Model::new(&now, Some(&last), None, &Unavailable::new());
        assert_eq!(m.procs.len(), 1);
        assert_eq!(
            (
                m.procs[0].comm.as_str(),
                m.procs[0].rates.of(&madvise::PROC_CALLS)
            ),
            ("new", Some(5.0))
        );
    }

    #[test]
    fn an_unavailable_process_column_is_none_not_zero() {
        let last = snap(0, &[(1, 0)]);
        let now = snap(1, &[(1, 4)]);
        let why: Unavailable = [("swap".to_string(), "no kmem:rss_stat".to_string())].into();
        let m = Model::new(&now, Some(&last), None, &why);
        let row = &m.procs[0].rates;
        assert_eq!(
            (
                row.of(&madvise::PROC_CALLS),
                row.of(&swap::PROC_IN),
                row.of(&swap::PROC_OUT)
            ),
            (Some(4.0), None, None)
        );
        assert_eq!(row.of(&faults::PROC_MAJOR), Some(0.0));
    }

    #[test]
    fn every_process_column_reads_its_catalogue_field() {
        let p = |n: u64| ProcSample {
            pid: 1,
            faults: crate::model::sample::FaultCounters {
                gup: n,
                ..Default::default()
            },
            direct_reclaim_ns: n * 1_000_000,
            madvise_calls: n,
            tlb_shootdowns: n,
            major_faults: n,
            swap_out_pages: n,
            swap_in_pages: n,
            ..Default::default()
        };
        let at = |t_s: u64, n: u64| {
            let mut s = Snapshot::default();
            s.apply(&Sample {
                elapsed_ns: t_s * 1_000_000_000,
                procs: vec![p(n)],
                ..Default::default()
            });
            s
        };
        let m = Model::new(&at(1, 3), Some(&at(0, 1)), None, &Unavailable::new());
        assert_eq!(m.procs[0].rates.values(), [Some(2.0); COLUMN_COUNT]);
    }

    fn books(usage: u64, limit: Option<u64>, psi: Option<f64>) -> CgroupBooks {
        CgroupBooks {
            usage_bytes: Some(usage),
            limit_bytes: limit,
            psi: psi.map(|avg10| Psi {
                some: PsiLine {
                    avg10,
                    ..Default::default()
                },
                full: None,
            }),
            ..Default::default()
        }
    }

    /// A sample at `t_s` with processes `(pid, cgroup, swap_out_pages)` and
    /// the books of the cgroups given.
    fn cg_sample(t_s: u64, procs: &[(u32, u64, u64)], cgroups: Vec<CgroupSample>) -> Sample {
        Sample {
            elapsed_ns: t_s * 1_000_000_000,
            procs: procs
                .iter()
                .map(|&(pid, cgroup, out)| ProcSample {
                    pid,
                    comm: format!("p{pid}"),
                    cgroup,
                    swap_out_pages: out,
                    faults: crate::model::sample::FaultCounters {
                        unclassified: out * 2,
                        ..Default::default()
                    },
                    ..Default::default()
                })
                .collect(),
            cgroups,
            ..Default::default()
        }
    }

    fn cg(id: u64, path: &str, books: Option<CgroupBooks>) -> CgroupSample {
        CgroupSample {
            id,
            path: Some(path.into()),
            books,
            container_name: None,
            page_cache_removed: None,
        }
    }

    fn cgroup_model(unavailable: &Unavailable) -> Model {
        let mut last = Snapshot::default();
        last.apply(&cg_sample(
            0,
            &[(1, 10, 100), (2, 10, 50), (3, 20, 0), (4, 30, 0)],
            vec![
                cg(
                    10,
                    "/jobs/a",
                    Some(books(1 << 20, Some(64 << 20), Some(1.5))),
                ),
                cg(20, "/idle", Some(books(4096, None, None))),
                cg(30, "/gone", None),
            ],
        ));
        let mut now = last.clone();
        // Two seconds later: pid 1 swapped out 400 pages more, pid 2 moved
        // to cgroup 40 (new) and swapped out 20 there, pid 4 ended.
        now.apply(&Sample {
            exited: vec![4],
            ..cg_sample(
                2,
                &[(1, 10, 500), (2, 40, 70)],
                vec![
                    cg(
                        10,
                        "/jobs/a",
                        Some(books(32 << 20, Some(64 << 20), Some(12.25))),
                    ),
                    cg(40, "/jobs/b", None),
                ],
            )
        });
        Model::new(&now, Some(&last), None, unavailable)
    }

    /// The last working-set window goes into both tables: every process
    /// scanned with a figure (one idle this interval, or never seen by the
    /// probes, listed anyway with its rates), none for one not scanned;
    /// a cgroup's own figure before the sum over its processes.
    #[test]
    fn the_working_set_window_fills_the_wss_of_processes_and_cgroups() {
        use crate::model::wss::{WssCgroup, WssProc, WssSample};
        const MIB: u64 = 1 << 20;
        let groups = || vec![cg(10, "/jobs/a", None), cg(20, "/idle", None)];
        let mut last = Snapshot::default();
        last.apply(&cg_sample(
            0,
            &[(1, 10, 100), (3, 20, 0), (6, 20, 0)],
            groups(),
        ));
        let proc = |pid, comm: &str, cgroup: &str, mib| WssProc {
            pid,
            comm: comm.into(),
            cgroup: Some(cgroup.into()),
            working_set_bytes: mib * MIB,
            ..Default::default()
        };
        let mut now = last.clone();
        now.apply(&Sample {
            working_set: vec![WssSample {
                procs: vec![
                    proc(1, "p1", "/jobs/a", 64),
                    proc(3, "p3", "/idle", 32),
                    proc(9, "hot", "/idle", 16),
                    proc(5, "none", "/idle", 0),
                ],
                cgroups: vec![WssCgroup {
                    cgroup: "/jobs/a".into(),
                    working_set_bytes: 100 * MIB,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..cg_sample(2, &[(1, 10, 500)], groups())
        });
        let m = Model::new(&now, Some(&last), None, &Unavailable::new());
        assert!(m.working_set);
        let row = |pid| m.procs.iter().find(|r| r.pid == pid);
        let wss = |pid| row(pid).map(|r| r.wss_bytes);
        assert_eq!(wss(1), Some(Some(64 * MIB)));
        assert_eq!(wss(3), Some(Some(32 * MIB)), "idle but scanned: listed");
        let p3 = row(3).expect("pid 3");
        assert_eq!(p3.rates.of(&faults::PROC_FAULTS), Some(0.0));
        let unseen = row(9).expect("pid 9, never seen by the probes");
        assert_eq!((unseen.comm.as_str(), unseen.cgroup), ("hot", 20));
        assert_eq!(unseen.wss_bytes, Some(16 * MIB));
        assert_eq!(unseen.rates.of(&faults::PROC_FAULTS), Some(0.0));
        assert!(row(5).is_none(), "nothing touched and idle: not listed");
        assert!(row(6).is_none(), "not scanned and idle: not listed");
        let cgroup = |id| m.cgroups.iter().find(|r| r.id == id).map(|r| r.wss_bytes);
        assert_eq!(cgroup(10), Some(Some(100 * MIB)), "its own figure first");
        assert_eq!(cgroup(20), Some(Some(48 * MIB)), "the sum of its processes");
        // Without a window: no column, no figure.
        let plain = Model::new(&last, Some(&last), None, &Unavailable::new());
        assert!(!plain.working_set);
        assert!(plain.procs.iter().all(|r| r.wss_bytes.is_none()));
    }

    /// A cgroup's rates are the growth of its processes' counters while in
    /// it, per second; idle cgroups with live processes stay listed, empty
    /// idle ones do not; limit, usage and PSI come from its books.
    #[test]
    fn cgroup_rows_have_the_interval_rates_of_their_processes_and_their_books() {
        let m = cgroup_model(&Unavailable::new());
        let row = |id| m.cgroups.iter().find(|r| r.id == id);
        let a = row(10).expect("cgroup 10");
        assert_eq!(a.path, "/jobs/a");
        assert_eq!(
            (
                a.rates.of(&swap::PROC_OUT),
                a.rates.of(&faults::PROC_FAULTS)
            ),
            (Some(200.0), Some(400.0))
        );
        assert_eq!(a.live, 1, "pid 2 moved out");
        assert_eq!(
            (a.usage_bytes, a.limit, a.psi_some),
            (Some(32 << 20), Limit::Bytes(64 << 20), Some(12.25))
        );
        // New this interval: its growth is from pid 2's last value.
        let b = row(40).expect("cgroup 40");
        assert_eq!((b.rates.of(&swap::PROC_OUT), b.live), (Some(10.0), 1));
        assert_eq!(
            (b.limit, b.usage_bytes, b.psi_some),
            (Limit::Unknown, None, None)
        );
        let idle = row(20).expect("an idle cgroup with a live process");
        assert_eq!((idle.limit, idle.psi_some), (Limit::Unlimited, None));
        assert!(!idle.rates.active());
        assert!(row(30).is_none(), "no live process, no activity: {m:?}");
        assert_eq!(m.cgroups_unavailable, None);
        // The process rows carry their cgroup.
        let p2 = m.procs.iter().find(|p| p.pid == 2).expect("pid 2");
        assert_eq!(p2.cgroup, 40);
    }

    #[test]
    fn without_cgroup_attribution_there_are_no_rows_but_a_reason() {
        let why: Unavailable = [
            (CGROUPS.to_string(), "disabled".to_string()),
            ("swap".to_string(), "no kmem:rss_stat".to_string()),
        ]
        .into();
        let m = cgroup_model(&why);
        assert!(m.cgroups.is_empty());
        assert_eq!(m.cgroups_unavailable.as_deref(), Some("disabled"));
        // Without the swap probe a cgroup's swap columns are unknown too.
        let why: Unavailable = [("swap".to_string(), "no kmem:rss_stat".to_string())].into();
        let m = cgroup_model(&why);
        assert_eq!(m.cgroups[0].rates.of(&swap::PROC_OUT), None);
    }

    #[test]
    fn cgroup_psi_is_none_not_zero_where_the_hierarchy_has_none() {
        let why: Unavailable = [(CGROUP_PSI.to_string(), "cgroup v1".to_string())].into();
        let m = cgroup_model(&why);
        assert!(m.cgroups.iter().all(|r| r.psi_some.is_none()), "{m:?}");
        assert_eq!(m.cgroup_psi_unavailable.as_deref(), Some("cgroup v1"));
    }
}
