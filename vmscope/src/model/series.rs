//! The per-interval time series: what happened in each interval, derived
//! from the raw cumulative samples. Columnar (one array per metric) to stay
//! small and easy to plot. Pure: unit-tested with hand-made samples.

use std::collections::BTreeMap;

use crate::model::{ProcBook, delta, sample::Sample};
use serde::{Deserialize, Serialize};

/// Per-interval deltas. Interval `i` runs from `end_ns[i] - duration_ns[i]`
/// to `end_ns[i]` (nanoseconds since the recording started). A value is
/// null when its counter went backwards (reset or eviction): unknown, not 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Series")]
pub struct IntervalSeries {
    pub end_ns: Vec<u64>,
    pub duration_ns: Vec<u64>,
    /// Metric -> one value per interval. Faults are `faults` (system-wide)
    /// and `scope_faults`; eBPF counters keep their names; vmstat counters
    /// are prefixed `vmstat_`; PSI stall time is `psi_some_stall_us` and
    /// `psi_full_stall_us`. Metrics unavailable on this kernel are absent
    /// (see `totals.unavailable`).
    pub metrics: BTreeMap<String, Vec<Option<u64>>>,
}

/// Builds the series. `available` says whether an eBPF counter's probe is
/// attached (unavailable ones get no column).
pub fn series(samples: &[Sample], available: impl Fn(&str) -> bool) -> IntervalSeries {
    let Some(first) = samples.first() else {
        return IntervalSeries::default();
    };
    let mut b = SeriesBuilder::new(first);
    for s in &samples[1..] {
        b.push(s);
    }
    b.finish(available)
}

/// The series built as samples arrive: one interval per sample after the
/// first, keeping only the previous sample and the processes' faults.
pub struct SeriesBuilder {
    s: IntervalSeries,
    prev: Sample,
    counter_names: Vec<String>,
    vmstat_names: Vec<&'static str>,
    /// The processes replayed (samples hold changes only), to sum their
    /// faults, the ended ones' included.
    procs: ProcBook,
    prev_scope: u64,
}

impl SeriesBuilder {
    pub fn new(first: &Sample) -> Self {
        let counter_names = first.counters.keys().cloned().collect();
        let vmstat_names = crate::procstat::VMSTAT_COLUMNS
            .iter()
            .copied()
            .filter(|k| first.vmstat.get(k).is_some())
            .collect();
        let mut b = Self {
            s: IntervalSeries::default(),
            prev: first.clone(),
            counter_names,
            vmstat_names,
            procs: ProcBook::new(0),
            prev_scope: 0,
        };
        // Per-process counters start at zero when a process is followed
        // (and `totals.scope_faults` counts from there), so the first
        // interval also takes what they held at the first sample: a
        // followed command's faults between fork and that sample. The
        // column then sums to the total.
        b.replay(first);
        b
    }

    /// The faults of every process so far: an ended process's stay in the
    /// total, and a later process under its pid counts from zero.
    fn replay(&mut self, smp: &Sample) -> u64 {
        self.procs.push(smp);
        self.procs.faults().total()
    }

    /// Adds the interval from the previous sample to `b`.
    pub fn push(&mut self, b: &Sample) {
        let a = std::mem::replace(&mut self.prev, b.clone());
        let s = &mut self.s;
        s.end_ns.push(b.elapsed_ns);
        s.duration_ns
            .push(b.elapsed_ns.saturating_sub(a.elapsed_ns));
        let mut cols: Vec<(String, Option<u64>)> = Vec::new();
        cols.push(("faults".into(), delta(a.faults.total(), b.faults.total())));
        for name in &self.counter_names {
            let v = match (a.counters.get(name), b.counters.get(name)) {
                (Some(&x), Some(&y)) => delta(x, y),
                _ => None,
            };
            cols.push((name.clone(), v));
        }
        for k in &self.vmstat_names {
            let v = match (a.vmstat.get(k), b.vmstat.get(k)) {
                (Some(x), Some(y)) => delta(x, y),
                _ => None,
            };
            cols.push((format!("vmstat_{k}"), v));
        }
        if let (Some(pa), Some(pb)) = (&a.psi, &b.psi) {
            cols.push((
                "psi_some_stall_us".into(),
                delta(pa.some.total_us, pb.some.total_us),
            ));
            if let (Some(fa), Some(fb)) = (&pa.full, &pb.full) {
                cols.push(("psi_full_stall_us".into(), delta(fa.total_us, fb.total_us)));
            }
        }
        let scope_now = self.replay(b);
        cols.push(("scope_faults".into(), delta(self.prev_scope, scope_now)));
        self.prev_scope = scope_now;
        let n = self.s.end_ns.len();
        for (name, v) in cols {
            let col = self.s.metrics.entry(name).or_default();
            // A metric missing in earlier intervals (PSI appearing late)
            // is null there, so every column lines up with `end_ns`.
            col.resize(n - 1, None);
            col.push(v);
        }
    }

    /// The series, without the counters whose probe `available` says is
    /// not attached (asked at the end: a probe can attach late).
    pub fn finish(mut self, available: impl Fn(&str) -> bool) -> IntervalSeries {
        for name in &self.counter_names {
            if !available(name) {
                self.s.metrics.remove(name);
            }
        }
        let n = self.s.end_ns.len();
        for col in self.s.metrics.values_mut() {
            col.resize(n, None);
        }
        self.s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::process::ProcSample;
    use crate::{model::sample::FaultCounters, procstat::Vmstat};

    fn sample(t: u64, sys: u64, procs: Vec<(u32, u64)>, pswpout: u64, tlb: u64) -> Sample {
        let f = |n| {
            let mut c = FaultCounters::default();
            c.user[2] = n;
            c
        };
        Sample {
            elapsed_ns: t,
            faults: f(sys),
            procs: procs
                .into_iter()
                .map(|(pid, n)| ProcSample {
                    pid,
                    faults: f(n),
                    ..Default::default()
                })
                .collect(),
            counters: [("tlb_remote_send_ipi".to_string(), tlb)].into(),
            vmstat: Vmstat([("pswpout".to_string(), pswpout)].into()),
            ..Default::default()
        }
    }

    #[test]
    fn intervals_are_deltas_with_changed_only_processes_replayed() {
        let samples = [
            sample(0, 100, vec![(1, 10), (2, 5)], 1000, 7),
            // pid 2 unchanged (absent): it still counts toward the scope.
            sample(1_000, 150, vec![(1, 30)], 1010, 9),
            sample(2_000, 151, vec![(3, 4)], 1010, 9),
        ];
        let s = series(&samples, |_| true);
        assert_eq!(s.end_ns, [1_000, 2_000]);
        assert_eq!(s.duration_ns, [1_000, 1_000]);
        assert_eq!(s.metrics["faults"], [Some(50), Some(1)]);
        // The first interval includes the 15 the processes held at the
        // first sample: their counters started at zero when followed.
        assert_eq!(s.metrics["scope_faults"], [Some(35), Some(4)]);
        assert_eq!(s.metrics["vmstat_pswpout"], [Some(10), Some(0)]);
        assert_eq!(s.metrics["tlb_remote_send_ipi"], [Some(2), Some(0)]);
    }

    #[test]
    fn backwards_is_unknown_and_unavailable_has_no_column() {
        let samples = [sample(0, 100, vec![], 50, 7), sample(1, 90, vec![], 60, 9)];
        let s = series(&samples, |name| name != "tlb_remote_send_ipi");
        assert_eq!(s.metrics["faults"], [None]);
        assert!(!s.metrics.contains_key("tlb_remote_send_ipi"));
        assert!(series(&[], |_| true).end_ns.is_empty());
    }

    #[test]
    fn an_ended_process_stays_in_the_scope_and_its_pid_counts_afresh() {
        let mut reused = sample(2_000, 0, vec![(1, 3)], 0, 0);
        reused.exited = vec![1];
        let samples = [
            sample(0, 0, vec![(1, 10)], 0, 0),
            sample(1_000, 0, vec![(1, 20)], 0, 0),
            reused,
        ];
        let s = series(&samples, |_| true);
        assert_eq!(s.metrics["scope_faults"], [Some(20), Some(3)]);
    }
}
