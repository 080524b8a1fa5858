//! Pure functions from raw samples to the figures users read. Nothing here
//! touches the kernel, so everything is unit-tested with hand-made samples.

pub mod bench;
pub mod cachestat;
pub mod catalogue;
pub mod cgroup;
pub mod damon;
pub mod fold;
pub mod hist;
pub mod hugepages;
pub mod identity;
pub mod live;
pub mod metrics;
pub mod oom;
pub mod pagecache;
pub mod probes;
pub mod process;
pub mod recording;
pub mod rmap;
pub mod sample;
pub mod series;
pub mod snapshot;
pub mod stall;
pub mod tiers;
pub mod totals;
pub mod view;
pub mod wss;

use crate::model::process::ProcSample;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use vmscope_common::{FAULT_CLASSES, fault_class_name};

use crate::model::process::ProcessTotal;
use crate::model::{
    probes::FaultSource,
    sample::{FaultCounters, Sample},
    snapshot::Snapshot,
};

/// `now - then`, or `None` when the counter went backwards (reset or wrap):
/// an unknown delta, never a huge one.
pub fn delta(then: u64, now: u64) -> Option<u64> {
    now.checked_sub(then)
}

/// Fault counts split by class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClassCounts {
    pub total: u64,
    pub by_class: BTreeMap<String, u64>,
}

impl ClassCounts {
    fn from_array(a: &[u64; FAULT_CLASSES]) -> Self {
        Self {
            total: a.iter().sum(),
            by_class: (0..FAULT_CLASSES)
                .map(|k| (fault_class_name(k).to_string(), a[k]))
                .collect(),
        }
    }
}

/// Page-fault totals over a span. With the perf fallback, classes (and the
/// user/kernel split) are unavailable and say so instead of showing zeros.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FaultTotals {
    pub source: FaultSource,
    /// All faults the kernel accounted: the exception path's plus those
    /// taken through get_user_pages (when `gup` is available; otherwise the
    /// exception path's alone).
    pub total: Option<u64>,
    /// Faults seen on the exception path (the part with a user/kernel split
    /// and error-code classes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception: Option<u64>,
    /// Faults taken through get_user_pages (MAP_POPULATE, mlock,
    /// MADV_POPULATE_*, process_vm_*, ptrace, pinning): the kernel's books
    /// (`min_flt + maj_flt`) minus the exception path. Null when the
    /// `sched:sched_switch` probe is unavailable (see `unavailable`).
    #[serde(default)]
    pub gup: Option<u64>,
    pub user: Option<ClassCounts>,
    pub kernel: Option<ClassCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_reason: Option<String>,
}

/// Element-wise difference; `None` if any counter went backwards.
pub fn fault_delta(then: &FaultCounters, now: &FaultCounters) -> Option<FaultCounters> {
    let mut d = FaultCounters {
        unclassified: delta(then.unclassified, now.unclassified)?,
        gup: delta(then.gup, now.gup)?,
        ..Default::default()
    };
    for k in 0..FAULT_CLASSES {
        d.user[k] = delta(then.user[k], now.user[k])?;
        d.kernel[k] = delta(then.kernel[k], now.kernel[k])?;
    }
    Some(d)
}

/// Totals for counters that accumulated from zero (or a delta). `gup`
/// says whether the get_user_pages part is available.
pub fn fault_totals(source: FaultSource, gup: bool, d: Option<&FaultCounters>) -> FaultTotals {
    let gup_part = d.filter(|_| gup).map(|d| d.gup);
    let with_gup = |exception: u64| FaultTotals {
        source,
        total: Some(exception + gup_part.unwrap_or(0)),
        exception: Some(exception),
        gup: gup_part,
        user: None,
        kernel: None,
        unavailable_reason: None,
    };
    match (source, d) {
        (_, None) => FaultTotals {
            source,
            total: None,
            exception: None,
            gup: None,
            user: None,
            kernel: None,
            unavailable_reason: Some("a counter went backwards; delta unknown".into()),
        },
        (FaultSource::Tracepoint, Some(d)) => {
            let user = ClassCounts::from_array(&d.user);
            let kernel = ClassCounts::from_array(&d.kernel);
            FaultTotals {
                user: Some(user.clone()),
                kernel: Some(kernel.clone()),
                ..with_gup(user.total + kernel.total)
            }
        }
        (FaultSource::PerfSoftware, Some(d)) => FaultTotals {
            unavailable_reason: Some(
                "exceptions:page_fault_user is absent; the perf software event gives \
                 counts without user/kernel split or error-code classes"
                    .into(),
            ),
            ..with_gup(d.unclassified)
        },
        (FaultSource::Unavailable, Some(_)) => FaultTotals {
            source,
            total: None,
            exception: None,
            gup: gup_part,
            user: None,
            kernel: None,
            unavailable_reason: Some("no page-fault probe could be attached".into()),
        },
    }
}

/// Which probes a recording's per-process figures can count on: the
/// usable ones of its probe list. A figure whose probe is missing is null,
/// never 0; each figure names its probes where it is declared (the list in
/// `process.rs`), so a new one adds nothing here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcAvailability {
    usable: std::collections::BTreeSet<String>,
}

impl ProcAvailability {
    /// The usable probes of `probes`.
    pub fn of(probes: &[probes::ProbeStatus]) -> Self {
        ProcAvailability {
            usable: probes
                .iter()
                .filter(|p| p.usable())
                .map(|p| p.probe.clone())
                .collect(),
        }
    }

    /// Exactly these probes.
    pub fn only(names: &[&str]) -> Self {
        ProcAvailability {
            usable: names.iter().map(|n| (*n).to_string()).collect(),
        }
    }

    /// Whether every one of `names` is usable.
    pub fn has_all(&self, names: &[&str]) -> bool {
        names
            .iter()
            .all(|n| *n == probes::names::ALWAYS || self.usable.contains(*n))
    }

    /// Whether the get_user_pages part of faults is known
    /// (`sched:sched_switch`).
    pub fn gup_faults(&self) -> bool {
        self.has_all(&[probes::names::ACCOUNT])
    }
}

/// Each process's last values, folded as samples arrive: the live ones
/// (in the snapshot the samples add up to), and of those that ended
/// (`Sample::exited`) the `keep` with the most faults plus the sum of all
/// their faults. A reused pid's processes are told apart. Memory is bounded
/// by the processes alive plus `keep`.
#[derive(Default)]
pub struct ProcBook {
    now: Snapshot,
    ended: Vec<ProcSample>,
    ended_faults: FaultCounters,
    /// Cgroups removed with all their processes ended: the `keep` with the
    /// most faults (their figures are final, so no other can overtake one
    /// trimmed away).
    retired: Vec<(u64, crate::model::cgroup::CgroupState)>,
    keep: usize,
}

fn add_faults(sum: &mut FaultCounters, f: &FaultCounters) {
    sum.unclassified += f.unclassified;
    sum.gup += f.gup;
    for k in 0..FAULT_CLASSES {
        sum.user[k] += f.user[k];
        sum.kernel[k] += f.kernel[k];
    }
}

impl ProcBook {
    pub fn new(keep: usize) -> Self {
        Self {
            keep,
            ..Self::default()
        }
    }

    pub fn push(&mut self, s: &Sample) {
        for p in self.now.apply(s) {
            add_faults(&mut self.ended_faults, &p.faults);
            if self.keep > 0 {
                self.ended.push(p);
            }
        }
        // Trimmed now and then, not at every exit: to the `keep` largest.
        if self.ended.len() > self.keep.saturating_mul(2).saturating_add(64) {
            self.trim();
        }
        self.retired.extend(self.now.retire_gone_cgroups());
        if self.retired.len() > self.keep.saturating_mul(2).saturating_add(64) {
            self.trim_retired();
        }
    }

    fn trim_retired(&mut self) {
        self.retired.sort_by(|(a_id, a), (b_id, b)| {
            b.counts
                .faults
                .total()
                .cmp(&a.counts.faults.total())
                .then(a_id.cmp(b_id))
        });
        self.retired.truncate(self.keep);
    }

    /// Every cgroup: those of the snapshot, then the removed ones kept.
    pub fn cgroups(&self) -> impl Iterator<Item = (u64, &crate::model::cgroup::CgroupState)> {
        self.now
            .cgroups
            .iter()
            .map(|(&id, c)| (id, c))
            .chain(self.retired.iter().map(|(id, c)| (*id, c)))
    }

    /// The full state the samples pushed add up to.
    pub fn snapshot(&self) -> &Snapshot {
        &self.now
    }

    fn trim(&mut self) {
        self.ended.sort_by(|a, b| {
            b.faults
                .total()
                .cmp(&a.faults.total())
                .then(a.pid.cmp(&b.pid))
        });
        self.ended.truncate(self.keep);
    }

    /// The tree's faults: every process's, ended or alive.
    pub fn faults(&self) -> FaultCounters {
        let mut sum = self.ended_faults;
        for p in self.now.procs.values() {
            add_faults(&mut sum, &p.faults);
        }
        sum
    }

    /// Per-process totals, largest fault count first, at most `limit`
    /// (no more than `keep` of the ended ones).
    pub fn totals(
        &self,
        source: FaultSource,
        avail: &ProcAvailability,
        limit: usize,
    ) -> Vec<ProcessTotal> {
        let mut rows: Vec<ProcessTotal> = self
            .ended
            .iter()
            .chain(self.now.procs.values())
            .map(|p| p.total(source, avail))
            .collect();
        // Stable: a pid's ended processes ahead of its live one on ties.
        rows.sort_by(|a, b| b.faults.total.cmp(&a.faults.total).then(a.pid.cmp(&b.pid)));
        rows.truncate(limit);
        rows
    }
}

/// Replays samples into per-process totals, largest fault count first, at
/// most `limit` rows. Per-process counters start at zero when the probes
/// attach, so each process's last cumulative value is its total.
pub fn process_totals(
    source: FaultSource,
    avail: &ProcAvailability,
    samples: &[Sample],
    limit: usize,
) -> Vec<ProcessTotal> {
    let mut b = ProcBook::new(limit);
    for s in samples {
        b.push(s);
    }
    b.totals(source, avail, limit)
}

/// Sum of per-process totals for a set of pids (e.g. a wrapped command's tree).
pub fn tree_faults(source: FaultSource, gup: bool, samples: &[Sample]) -> FaultTotals {
    let mut b = ProcBook::new(0);
    for s in samples {
        b.push(s);
    }
    fault_totals(source, gup, Some(&b.faults()))
}

/// What was lost to bounded maps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Lost {
    /// Per-process entries evicted from the LRU map (their counts are gone).
    pub proc_evictions: u64,
    /// Children that could not be followed.
    pub untracked_children: u64,
    /// Per-mm swap entries evicted from the LRU map (their counts are gone).
    #[serde(default)]
    pub mm_evictions: u64,
    /// OOM kills whose details were lost (their ring buffer was full): in
    /// `oom_kills` counted, missing from the list.
    #[serde(default)]
    pub oom_kill_records: u64,
}

pub fn lost(last: Option<&Sample>) -> Lost {
    last.map_or_else(Lost::default, |s| Lost {
        proc_evictions: s
            .proc_inserts
            .saturating_sub(s.proc_entries)
            .saturating_sub(s.proc_pruned),
        untracked_children: s.tracked_full,
        mm_evictions: s
            .mm_inserts
            .saturating_sub(s.mm_entries)
            .saturating_sub(s.mm_pruned),
        oom_kill_records: s.oom_kill_records_lost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(user_write_np: u64, kernel_read_np: u64) -> FaultCounters {
        let mut f = FaultCounters::default();
        f.user[2] = user_write_np;
        f.kernel[0] = kernel_read_np;
        f
    }

    fn sample(procs: Vec<(u32, &str, FaultCounters)>) -> Sample {
        Sample {
            procs: procs
                .into_iter()
                .map(|(pid, comm, faults)| ProcSample {
                    pid,
                    comm: comm.into(),
                    faults,
                    swap_out_pages: u64::from(pid),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn backwards_counter_is_unknown_not_huge() {
        assert_eq!(delta(10, 15), Some(5));
        assert_eq!(delta(15, 10), None);
        let t = fault_totals(
            FaultSource::Tracepoint,
            true,
            fault_delta(&counters(5, 0), &counters(3, 0)).as_ref(),
        );
        assert_eq!(t.total, None);
        assert!(t.unavailable_reason.is_some());
    }

    #[test]
    fn tracepoint_totals_split_user_kernel_and_class() {
        let d = fault_delta(&counters(10, 1), &counters(110, 4)).expect("forward");
        let t = fault_totals(FaultSource::Tracepoint, false, Some(&d));
        assert_eq!(t.total, Some(103));
        assert_eq!((t.exception, t.gup), (Some(103), None));
        let user = t.user.expect("user");
        assert_eq!(user.total, 100);
        assert_eq!(user.by_class["write_not_present"], 100);
        assert_eq!(t.kernel.expect("kernel").by_class["read_not_present"], 3);
    }

    #[test]
    fn perf_fallback_reports_classes_unavailable_not_zero() {
        let d = FaultCounters {
            unclassified: 42,
            ..Default::default()
        };
        let t = fault_totals(FaultSource::PerfSoftware, false, Some(&d));
        assert_eq!(t.total, Some(42));
        assert!(t.user.is_none() && t.kernel.is_none());
        assert!(t.unavailable_reason.is_some());
    }

    #[test]
    fn process_totals_use_latest_value_and_sort_by_faults() {
        let s1 = sample(vec![(10, "a", counters(5, 0)), (20, "b", counters(1, 0))]);
        // pid 10 unchanged (absent); pid 20 grew; pid 30 appeared
        let s2 = sample(vec![(20, "b", counters(50, 0)), (30, "c", counters(7, 0))]);
        let rows = process_totals(
            FaultSource::Tracepoint,
            &ProcAvailability::default(),
            &[s1, s2],
            10,
        );
        let got: Vec<(u32, Option<u64>)> = rows.iter().map(|r| (r.pid, r.faults.total)).collect();
        assert_eq!(got, [(20, Some(50)), (30, Some(7)), (10, Some(5))]);
        let top1 = process_totals(
            FaultSource::Tracepoint,
            &ProcAvailability::default(),
            &[sample(vec![(1, "x", counters(1, 0))])],
            0,
        );
        assert!(top1.is_empty());
    }

    #[test]
    fn unavailable_per_process_figures_are_null_not_zero() {
        let s = [sample(vec![(7, "a", counters(1, 0))])];
        let none = process_totals(
            FaultSource::Tracepoint,
            &ProcAvailability::default(),
            &s,
            10,
        );
        assert_eq!((none[0].swap_out_pages, none[0].major_faults), (None, None));
        use probes::names;
        let avail = ProcAvailability::only(&[
            names::MAJOR_FAULTS,
            names::SWAP,
            names::ACCOUNT,
            names::DIRTY_THROTTLE,
            names::MMAP_LOCK,
            names::COMPACT_DIRECT,
            names::COMPACT_END,
            names::PAGE_CACHE_ADD,
        ]);
        let some = process_totals(FaultSource::Tracepoint, &avail, &s, 10);
        assert_eq!(some[0].swap_out_pages, Some(7));
        assert_eq!(some[0].major_faults, Some(0));
    }

    #[test]
    fn gup_faults_add_to_the_total_and_are_null_when_unavailable() {
        let mut then = counters(10, 0);
        then.gup = 5;
        let mut now = counters(40, 2);
        now.gup = 305;
        let d = fault_delta(&then, &now).expect("forward");
        let t = fault_totals(FaultSource::Tracepoint, true, Some(&d));
        assert_eq!(
            (t.total, t.exception, t.gup),
            (Some(332), Some(32), Some(300))
        );
        let perf = fault_totals(FaultSource::PerfSoftware, true, Some(&d));
        assert_eq!((perf.total, perf.gup), (Some(300), Some(300)));
        let without = fault_totals(FaultSource::Tracepoint, false, Some(&d));
        assert_eq!((without.total, without.gup), (Some(32), None));
        let mut back = now;
        back.gup = 1;
        assert!(
            fault_delta(&now, &back).is_none(),
            "gup going backwards is unknown"
        );
    }

    #[test]
    fn tree_faults_sum_every_process() {
        let s1 = sample(vec![(10, "a", counters(5, 1)), (20, "b", counters(1, 0))]);
        let s2 = sample(vec![(20, "b", counters(4, 0))]);
        let t = tree_faults(FaultSource::Tracepoint, false, &[s1, s2]);
        assert_eq!(t.user.expect("user").total, 9);
        assert_eq!(t.total, Some(10));
    }

    #[test]
    fn evictions_are_inserts_minus_live_entries() {
        let s = Sample {
            proc_inserts: 12,
            proc_entries: 10,
            tracked_full: 1,
            mm_inserts: 7,
            mm_entries: 4,
            ..Default::default()
        };
        assert_eq!(
            lost(Some(&s)),
            Lost {
                proc_evictions: 2,
                untracked_children: 1,
                mm_evictions: 3,
                oom_kill_records: 0,
            }
        );
        assert_eq!(lost(None), Lost::default());
    }
    #[test]
    fn the_book_lists_each_process_under_a_reused_pid_and_sums_all() {
        let p = |pid: u32, comm: &str, n: u64| crate::model::process::ProcSample {
            pid,
            comm: comm.into(),
            madvise_calls: n,
            ..Default::default()
        };
        let samples = vec![
            Sample {
                procs: vec![p(5, "alpha", 1), p(6, "other", 9)],
                ..Default::default()
            },
            Sample {
                procs: vec![p(5, "alpha", 3)],
                ..Default::default()
            },
            Sample {
                exited: vec![5],
                procs: vec![p(5, "beta", 2)],
                ..Default::default()
            },
        ];
        let mut b = ProcBook::new(10);
        for s in &samples {
            b.push(s);
        }
        let avail = ProcAvailability::default();
        let mut rows: Vec<(u32, String, u64)> = b
            .totals(FaultSource::Tracepoint, &avail, 10)
            .into_iter()
            .map(|p| (p.pid, p.comm, p.madvise_calls))
            .collect();
        rows.sort();
        let want = [(5, "alpha", 3), (5, "beta", 2), (6, "other", 9)];
        assert_eq!(rows, want.map(|(p, c, n)| (p, c.to_string(), n)));
        // Only the 1 largest ended process kept as a row, all summed.
        let mut one = ProcBook::new(1);
        let f = |n: u64| {
            let mut f = FaultCounters::default();
            f.user[0] = n;
            f
        };
        for (i, n) in [(1u32, 5u64), (2, 50), (3, 7)] {
            one.push(&Sample {
                procs: vec![ProcSample {
                    pid: i,
                    faults: f(n),
                    ..Default::default()
                }],
                ..Default::default()
            });
            one.push(&Sample {
                exited: vec![i],
                ..Default::default()
            });
        }
        one.trim();
        assert_eq!(one.faults().total(), 62);
        let rows = one.totals(FaultSource::Tracepoint, &avail, 10);
        assert_eq!(rows.iter().map(|r| r.pid).collect::<Vec<_>>(), vec![2]);
    }

    /// A thousand cgroups that each live for one process: the book keeps
    /// the `keep` with the most faults (exactly those a whole-run ranking
    /// gives) and nothing more grows.
    #[test]
    fn removed_cgroups_are_kept_only_as_many_as_the_rows() {
        let mut b = ProcBook::new(5);
        let f = |n: u64| {
            let mut f = FaultCounters::default();
            f.user[0] = n;
            f
        };
        let mut t = 0;
        let mut at = |s: Sample| {
            t += 1;
            Sample { elapsed_ns: t, ..s }
        };
        for i in 1..=1000u64 {
            let pid = i as u32;
            // Faults peak at cgroup 500: the largest are 498..=502.
            let n = 1000 - i.abs_diff(500);
            b.push(&at(Sample {
                procs: vec![ProcSample {
                    pid,
                    cgroup: i,
                    faults: f(n),
                    ..Default::default()
                }],
                ..Default::default()
            }));
            b.push(&at(Sample {
                exited: vec![pid],
                cgroups_gone: vec![i],
                ..Default::default()
            }));
            assert!(
                b.now.cgroups.len() <= 2,
                "{} in the snapshot",
                b.now.cgroups.len()
            );
            assert!(b.retired.len() <= 2 * 5 + 64, "{} kept", b.retired.len());
        }
        b.push(&at(Sample::default()));
        b.trim_retired();
        let mut ids: Vec<u64> = b.cgroups().map(|(id, _)| id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [498, 499, 500, 501, 502]);
    }
}
