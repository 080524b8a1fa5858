//! The per-interval time series: what happened in each interval, derived
//! from the raw cumulative samples. Columnar (one array per metric) to stay
//! small and easy to plot. Pure: unit-tested with hand-made samples.

use std::collections::{BTreeMap, HashMap};

use crate::{collect::Sample, model::delta};
use serde::{Deserialize, Serialize};

/// vmstat counters worth a column (when this kernel has them).
const VMSTAT_COLUMNS: &[&str] = &[
    "pgfault",
    "pgmajfault",
    "pswpin",
    "pswpout",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pglazyfree",
    "pglazyfreed",
    "workingset_refault_anon",
    "workingset_refault_file",
    "thp_fault_alloc",
    "compact_stall",
];

/// Per-interval deltas. Interval `i` runs from `end_ns[i] - duration_ns[i]`
/// to `end_ns[i]` (nanoseconds since the recording started). A value is
/// null when its counter went backwards (reset or eviction): unknown, not 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Series {
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
pub fn series(samples: &[Sample], available: impl Fn(&str) -> bool) -> Series {
    let mut s = Series::default();
    let Some(first) = samples.first() else {
        return s;
    };
    // Running per-process fault totals, replayed (samples hold changes only).
    let mut per_pid: HashMap<u32, u64> = HashMap::new();
    let mut scope_total = 0u64;
    let mut replay = |smp: &Sample| {
        // An ended process's counts stay in the total; a later process
        // under its pid counts from zero.
        for pid in &smp.exited {
            per_pid.remove(pid);
        }
        for p in &smp.procs {
            let now = p.faults.total();
            let before = per_pid.insert(p.pid, now).unwrap_or(0);
            scope_total = scope_total.wrapping_add(now).wrapping_sub(before);
        }
        scope_total
    };
    // Per-process counters start at zero when a process is followed (and
    // `totals.scope_faults` counts from there), so the first interval also
    // takes what they held at the first sample: a followed command's faults
    // between fork and that sample. The column then sums to the total.
    replay(first);
    let mut prev_scope = 0;
    let counter_names: Vec<&String> = first
        .counters
        .keys()
        .filter(|name| available(name))
        .collect();
    let vmstat_names: Vec<&str> = VMSTAT_COLUMNS
        .iter()
        .copied()
        .filter(|k| first.vmstat.get(k).is_some())
        .collect();
    for pair in samples.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        s.end_ns.push(b.elapsed_ns);
        s.duration_ns
            .push(b.elapsed_ns.saturating_sub(a.elapsed_ns));
        let mut push = |name: &str, v: Option<u64>| {
            s.metrics.entry(name.to_string()).or_default().push(v);
        };
        push("faults", delta(a.faults.total(), b.faults.total()));
        let scope_now = replay(b);
        push("scope_faults", delta(prev_scope, scope_now));
        prev_scope = scope_now;
        for name in &counter_names {
            let v = match (a.counters.get(*name), b.counters.get(*name)) {
                (Some(&x), Some(&y)) => delta(x, y),
                _ => None,
            };
            push(name, v);
        }
        for k in &vmstat_names {
            let v = match (a.vmstat.get(k), b.vmstat.get(k)) {
                (Some(x), Some(y)) => delta(x, y),
                _ => None,
            };
            push(&format!("vmstat_{k}"), v);
        }
        if let (Some(pa), Some(pb)) = (&a.psi, &b.psi) {
            push(
                "psi_some_stall_us",
                delta(pa.some.total_us, pb.some.total_us),
            );
            if let (Some(fa), Some(fb)) = (&pa.full, &pb.full) {
                push("psi_full_stall_us", delta(fa.total_us, fb.total_us));
            }
        }
    }
    // A metric that was missing in some interval (PSI appearing late) would
    // have a short column; pad so every column lines up with `end_ns`.
    let n = s.end_ns.len();
    for col in s.metrics.values_mut() {
        if col.len() < n {
            let mut padded = vec![None; n - col.len()];
            padded.append(col);
            *col = padded;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        collect::{FaultCounters, ProcSample},
        procstat::Vmstat,
    };

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
}
