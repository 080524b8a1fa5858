//! Where memory stall time went: the stalls vmscope times by cause, next to
//! PSI's memory `some` and `full` over the same span, and the share of PSI
//! `some` the named causes explain. Pure.
//!
//! PSI counts a task as stalled on memory in direct reclaim, in memcg
//! reclaim (a charge over a cgroup's limit), in direct compaction, while it
//! waits for a refaulting (thrashing) page and while `memory.high` throttles
//! it. vmscope times the first three today; the others are listed as not
//! timed, so their time lands in "other". Dirty throttling is shown beside:
//! PSI counts it as I/O, not memory, so it is not part of the coverage; and
//! so are mmap_lock waits, which PSI does not count at all.
//!
//! The named causes are task time, summed over tasks; PSI's system `total`
//! is each CPU's stall time weighted by its non-idle time over all CPUs'
//! non-idle time, so with two busy CPUs one task's stall counts about half.
//! A task that moves between CPUs stalls a little on each, and each of
//! those CPUs is busy only part of the time, so PSI counts well under its
//! stall. So the share is taken of the causes weighed the same way
//! (`named_weighted_ms`): per interval, each CPU's stall (the time of the
//! stalls that ended on it) times that CPU's busy time (`/proc/stat`), over
//! all CPUs' busy time; where the per-CPU figures are missing, of the plain
//! sum. It is capped at 100%. Under `record
//! --pid`/a wrapped command, the causes are the followed processes' and PSI
//! is the whole system's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    model::hist::Summary,
    procstat::{CpuTimes, PsiSummary},
};

/// The histograms of memory stalls PSI counts, by cause.
pub const MEMORY_STALLS: [(&str, &str); 3] = [
    ("direct reclaim", "reclaim_direct"),
    ("memcg reclaim", "reclaim_memcg"),
    ("direct compaction", "compaction_direct"),
];

/// Memory stalls PSI counts that vmscope does not time (yet).
pub const NOT_TIMED: [&str; 2] = ["refault (thrashing) waits", "memory.high throttling"];

/// Stall time by cause over a span, in ms, with PSI beside.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StallAccount {
    /// Memory stalls by cause (`direct reclaim`, `memcg reclaim`); a cause
    /// whose probe is missing is left out and named in `not_timed`.
    pub causes_ms: BTreeMap<String, f64>,
    /// Their sum.
    pub named_ms: f64,
    /// Their sum weighed per interval and CPU as PSI weighs stall time
    /// ([`weigh_interval`]); null without the per-CPU figures (older
    /// recordings).
    #[serde(default)]
    pub named_weighted_ms: Option<f64>,
    /// The average number of busy CPUs over the span; null likewise.
    #[serde(default)]
    pub busy_cpus: Option<f64>,
    /// Dirty throttling (not a memory stall to PSI); null when unavailable.
    pub dirty_pause_ms: Option<f64>,
    /// mmap_lock waits, read and write (not a memory stall to PSI either);
    /// null without `--mmap-lock`.
    #[serde(default)]
    pub mmap_lock_wait_ms: Option<f64>,
    /// Time in major faults, anonymous and file (PSI counts only their
    /// waits on refaulting pages, as "other"); null without fault timing.
    #[serde(default)]
    pub major_fault_ms: Option<f64>,
    /// PSI memory `some` and `full` stall time over the span; null without
    /// PSI.
    pub psi_some_ms: Option<f64>,
    pub psi_full_ms: Option<f64>,
    /// PSI `some` that the named causes (weighted, where they can be) do
    /// not explain.
    pub other_ms: Option<f64>,
    /// The share of PSI `some` the named causes explain (weighted, where
    /// they can be), 0..=100; null without PSI or when PSI saw no stall.
    pub coverage_pct: Option<f64>,
    /// Memory stalls PSI counts that are not timed here.
    pub not_timed: Vec<String>,
}

/// The share of `psi_some_ns` that `named_ns` explains, in percent, capped
/// at 100; `None` when PSI saw no stall.
pub fn coverage(named_ns: f64, psi_some_ns: f64) -> Option<f64> {
    (psi_some_ns > 0.0).then(|| (named_ns / psi_some_ns * 100.0).clamp(0.0, 100.0))
}

/// One interval's memory stall weighed as PSI weighs a CPU's stall time:
/// each CPU's stall (`stall`, ns ended on it) times that CPU's non-idle
/// time, over all CPUs' non-idle time; unweighed when no CPU was busy.
/// A CPU's non-idle time is its busy time, and at least its stall (PSI
/// counts a CPU non-idle while a task stalls on it, asleep or not). `None`
/// when a side lacks the per-CPU figures or the tick length.
pub fn weigh_interval(
    cpu: (Option<&CpuTimes>, Option<&CpuTimes>),
    stall: (&[u64], &[u64]),
) -> Option<f64> {
    let (Some(a), Some(b)) = cpu else {
        return None;
    };
    if stall.1.is_empty()
        || a.per_cpu_busy.is_empty()
        || b.per_cpu_busy.is_empty()
        || b.tick_ns == 0
    {
        return None;
    }
    let tick = b.tick_ns as f64;
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    let (mut weighted, mut busy_total, mut plain) = (0.0, 0.0, 0.0);
    for i in 0..stall.1.len().max(b.per_cpu_busy.len()) {
        let s = at(stall.1, i).saturating_sub(at(stall.0, i)) as f64;
        let busy = at(&b.per_cpu_busy, i).saturating_sub(at(&a.per_cpu_busy, i)) as f64 * tick;
        let n = busy.max(s);
        weighted += s * n;
        busy_total += n;
        plain += s;
    }
    Some(if busy_total > 0.0 {
        weighted / busy_total
    } else {
        plain
    })
}

/// The memory stall over `samples` weighed interval by interval
/// ([`weigh_interval`]), in ms, and the average number of busy CPUs over
/// the span; `None` when a sample lacks the per-CPU figures (older
/// recordings) or there is no interval.
pub fn weighted(samples: &[crate::model::sample::Sample]) -> Option<(f64, f64)> {
    let (first, last) = (samples.first()?, samples.last()?);
    let mut ns = 0.0;
    for w in samples.windows(2) {
        ns += weigh_interval(
            (w[0].cpu.as_ref(), w[1].cpu.as_ref()),
            (&w[0].stall_ns_by_cpu, &w[1].stall_ns_by_cpu),
        )?;
    }
    let busy = first.cpu.as_ref()?.busy_cpus(last.cpu.as_ref()?)?;
    Some((ns / 1e6, busy))
}

/// The account of a span from its histograms (absent: none happened),
/// what is unavailable (`histogram NAME` keys), PSI, and the named causes
/// weighed as PSI weighs them ([`weighted`]).
pub fn account(
    hists: &BTreeMap<String, Summary>,
    unavailable: &BTreeMap<String, String>,
    psi: Option<&PsiSummary>,
    weighted: Option<(f64, f64)>,
) -> StallAccount {
    let ms = |name: &str| hists.get(name).map_or(0.0, |h| h.sum_ns as f64 / 1e6);
    let timed = |name: &str| !unavailable.contains_key(&format!("histogram {name}"));
    let mut a = StallAccount {
        not_timed: NOT_TIMED.iter().map(|s| (*s).to_string()).collect(),
        ..StallAccount::default()
    };
    for (cause, hist) in MEMORY_STALLS {
        if timed(hist) {
            a.causes_ms.insert(cause.into(), ms(hist));
        } else {
            a.not_timed.push(cause.into());
        }
    }
    a.named_ms = a.causes_ms.values().sum();
    a.named_weighted_ms = weighted.map(|w| w.0);
    a.busy_cpus = weighted.map(|w| w.1);
    let explained = a.named_weighted_ms.unwrap_or(a.named_ms);
    a.dirty_pause_ms = timed("dirty_pause").then(|| ms("dirty_pause"));
    a.mmap_lock_wait_ms = (timed("mmap_lock_wait_read") && timed("mmap_lock_wait_write"))
        .then(|| ms("mmap_lock_wait_read") + ms("mmap_lock_wait_write"));
    a.major_fault_ms = (timed("fault_major_anon") && timed("fault_major_file"))
        .then(|| ms("fault_major_anon") + ms("fault_major_file"));
    a.psi_some_ms = psi.and_then(|p| p.some_stall_us).map(|us| us as f64 / 1e3);
    a.psi_full_ms = psi.and_then(|p| p.full_stall_us).map(|us| us as f64 / 1e3);
    a.other_ms = a.psi_some_ms.map(|p| (p - explained).max(0.0));
    a.coverage_pct = a.psi_some_ms.and_then(|p| coverage(explained, p));
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(sum_ns: u64) -> Summary {
        Summary {
            count: 1,
            sum_ns,
            ..Summary::default()
        }
    }

    fn psi(some_us: u64) -> PsiSummary {
        PsiSummary {
            some_avg10: 0.0,
            full_avg10: None,
            some_stall_us: Some(some_us),
            full_stall_us: None,
        }
    }

    #[test]
    fn coverage_is_the_named_share_of_psi_capped_at_100() {
        let hists = BTreeMap::from([
            ("reclaim_memcg".to_string(), hist(30_000_000)),
            ("dirty_pause".to_string(), hist(500_000_000)),
        ]);
        let a = account(&hists, &BTreeMap::new(), Some(&psi(40_000)), None);
        assert_eq!(a.causes_ms["memcg reclaim"], 30.0);
        assert_eq!(a.causes_ms["direct reclaim"], 0.0);
        assert_eq!((a.named_ms, a.other_ms), (30.0, Some(10.0)));
        assert_eq!(a.coverage_pct, Some(75.0));
        assert_eq!(a.dirty_pause_ms, Some(500.0), "beside, not in the share");
        // Overlapping stalls sum past PSI's wall time: capped.
        let a = account(&hists, &BTreeMap::new(), Some(&psi(10_000)), None);
        assert_eq!((a.coverage_pct, a.other_ms), (Some(100.0), Some(0.0)));
    }

    fn times(per_cpu_busy: &[u64]) -> CpuTimes {
        CpuTimes {
            busy_ticks: per_cpu_busy.iter().sum(),
            total_ticks: 0,
            cpus: per_cpu_busy.len() as u32,
            per_cpu_busy: per_cpu_busy.to_vec(),
            tick_ns: 1,
        }
    }

    #[test]
    fn stall_is_weighed_per_cpu_as_psi_weighs_it() {
        // One task stalls 50 ms on each CPU, each busy 100 ticks of the
        // interval: PSI counts (50×100 + 50×100)/200 = 50 ms, not 100.
        let w = weigh_interval(
            (Some(&times(&[0, 0])), Some(&times(&[100, 100]))),
            (&[0, 0], &[50, 50]),
        );
        assert_eq!(w, Some(50.0));
        // Pinned to CPU 1, which was busy 100 while CPU 0 was busy 25:
        // 80 × 100 / 125.
        let w = weigh_interval(
            (Some(&times(&[10, 0])), Some(&times(&[35, 100]))),
            (&[7, 0], &[7, 80]),
        );
        assert_eq!(w, Some(64.0));
        // A CPU stalled longer than /proc/stat saw it busy (the task
        // slept): non-idle for its stall. 30 × 30 / (30 + 10).
        let w = weigh_interval(
            (Some(&times(&[0, 0])), Some(&times(&[10, 10]))),
            (&[0, 0], &[30, 0]),
        );
        assert_eq!(w, Some(22.5));
        // Nothing busy: the plain sum; no per-CPU figures: none.
        let w = weigh_interval((Some(&times(&[5, 5])), Some(&times(&[5, 5]))), (&[0], &[0]));
        assert_eq!(w, Some(0.0));
        assert_eq!(
            weigh_interval((None, Some(&times(&[1]))), (&[0], &[1])),
            None
        );
        assert_eq!(
            weigh_interval((Some(&times(&[])), Some(&times(&[1]))), (&[0], &[1])),
            None
        );
        let hists = BTreeMap::from([("reclaim_memcg".to_string(), hist(100_000_000))]);
        let a = account(
            &hists,
            &BTreeMap::new(),
            Some(&psi(40_000)),
            Some((30.0, 1.0)),
        );
        assert_eq!(a.named_ms, 100.0);
        assert_eq!(a.named_weighted_ms, Some(30.0));
        assert_eq!((a.coverage_pct, a.other_ms), (Some(75.0), Some(10.0)));
    }

    #[test]
    fn without_psi_or_a_probe_the_figures_say_so_rather_than_zero() {
        let unavailable = BTreeMap::from([(
            "histogram reclaim_direct".to_string(),
            "not attached".to_string(),
        )]);
        let a = account(&BTreeMap::new(), &unavailable, None, None);
        assert_eq!(
            (a.psi_some_ms, a.coverage_pct, a.other_ms),
            (None, None, None)
        );
        assert!(!a.causes_ms.contains_key("direct reclaim"));
        assert!(a.not_timed.contains(&"direct reclaim".to_string()));
        assert_eq!(
            account(&BTreeMap::new(), &BTreeMap::new(), Some(&psi(0)), None).coverage_pct,
            None
        );
    }
}
