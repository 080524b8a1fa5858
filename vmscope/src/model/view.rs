//! What `top` draws, computed from two snapshots: the per-interval rates
//! (system-wide and per process), the latency histograms since a baseline
//! and PSI. [`Model::new`] is pure, so it is tested with hand-made
//! snapshots; the sparkline history is kept by `live::Live`.

use std::collections::BTreeMap;

use crate::{
    model::{
        catalogue::{self, Detail, RateValue},
        hist::{self, Summary},
        rmap::IntervalCounts,
        snapshot::Snapshot,
    },
    procstat::Psi,
};

/// One system-wide rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Rate {
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

/// One process over the last interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcRow {
    pub pid: u32,
    pub comm: String,
    pub faults: f64,
    pub major: Option<f64>,
    /// Direct plus memcg reclaim stall, milliseconds per second.
    pub reclaim_ms: f64,
    pub swap_in: Option<f64>,
    pub swap_out: Option<f64>,
    pub madvise: f64,
    pub shootdowns: f64,
}

impl ProcRow {
    /// Whether the process did anything this interval.
    fn active(&self) -> bool {
        [
            Some(self.faults),
            self.major,
            Some(self.reclaim_ms),
            self.swap_in,
            self.swap_out,
            Some(self.madvise),
            Some(self.shootdowns),
        ]
        .into_iter()
        .any(|v| v.unwrap_or(0.0) > 0.0)
    }
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
    pub rates: Vec<Rate>,
    pub procs: Vec<ProcRow>,
    pub latencies: Vec<Latency>,
    pub psi: Option<Psi>,
    /// Seconds since the start (or the last reset).
    pub elapsed_s: f64,
}

/// Which optional metrics this kernel provides: metric name -> reason it
/// does not. Names are those of `Rate::name`, or the catalogue's
/// per-process columns (`major`, `swap`, ...).
pub type Unavailable = BTreeMap<String, String>;

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
            ..Default::default()
        };
        if let Some(last) = last {
            let span = Interval::new(last, now);
            m.interval_s = span.dt;
            m.rates = span.rates(unavailable);
            m.procs = span.proc_rows(unavailable);
        }
        m
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

    /// Every process's rates, the idle ones left out (an activity view).
    fn proc_rows(&self, unavailable: &Unavailable) -> Vec<ProcRow> {
        self.b
            .procs
            .values()
            .filter_map(|p| {
                let then = self.b.before(self.a, p.pid);
                // Through the catalogue's getters; `None` when the field's
                // `top` column is unavailable on this kernel.
                let rate = |key: &str| -> Option<f64> {
                    let f = catalogue::proc_field(key)?;
                    if f.column.is_some_and(|c| unavailable.contains_key(c)) {
                        return None;
                    }
                    Some(per_s(then.map_or(0, f.get), (f.get)(p), self.dt).unwrap_or(0.0))
                };
                let row = ProcRow {
                    pid: p.pid,
                    comm: p.comm.clone(),
                    faults: rate("faults").unwrap_or(0.0),
                    major: rate("major_faults"),
                    reclaim_ms: rate("reclaim_stall").unwrap_or(0.0) / 1e6,
                    swap_in: rate("swap_in_pages"),
                    swap_out: rate("swap_out_pages"),
                    madvise: rate("madvise_calls").unwrap_or(0.0),
                    shootdowns: rate("tlb_shootdowns").unwrap_or(0.0),
                };
                row.active().then_some(row)
            })
            .collect()
    }

    /// The catalogue's rate rows, in order.
    fn rates(&self, unavailable: &Unavailable) -> Vec<Rate> {
        catalogue::RATES
            .iter()
            .map(|row| {
                let unavailable = unavailable.get(row.label).cloned();
                Rate {
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
            RateValue::MadviseCalls => {
                self.per_s(|s| Some(s.madvise.iter().map(|m| m.calls).sum()))
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
    use crate::model::process::ProcSample;
    use crate::model::sample::Sample;

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
        assert_eq!((m.procs[0].comm.as_str(), m.procs[0].madvise), ("new", 5.0));
    }

    #[test]
    fn an_unavailable_process_column_is_none_not_zero() {
        let last = snap(0, &[(1, 0)]);
        let now = snap(1, &[(1, 4)]);
        let why: Unavailable = [("swap".to_string(), "no kmem:rss_stat".to_string())].into();
        let m = Model::new(&now, Some(&last), None, &why);
        let row = &m.procs[0];
        assert_eq!((row.madvise, row.swap_in, row.swap_out), (4.0, None, None));
        assert_eq!(row.major, Some(0.0));
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
        let r = &m.procs[0];
        let all = [
            Some(r.faults),
            r.major,
            Some(r.reclaim_ms),
            r.swap_in,
            r.swap_out,
            Some(r.madvise),
            Some(r.shootdowns),
        ];
        assert_eq!(all, [Some(2.0); 7]);
    }
}
