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
//! non-idle time, so with two busy CPUs one task's stall counts about half:
//! the share is capped at 100%. Under `record
//! --pid`/a wrapped command, the causes are the followed processes' and PSI
//! is the whole system's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{model::hist::Summary, procstat::PsiSummary};

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
    /// Dirty throttling (not a memory stall to PSI); null when unavailable.
    pub dirty_pause_ms: Option<f64>,
    /// mmap_lock waits, read and write (not a memory stall to PSI either);
    /// null without `--mmap-lock`.
    #[serde(default)]
    pub mmap_lock_wait_ms: Option<f64>,
    /// PSI memory `some` and `full` stall time over the span; null without
    /// PSI.
    pub psi_some_ms: Option<f64>,
    pub psi_full_ms: Option<f64>,
    /// PSI `some` that the named causes do not explain.
    pub other_ms: Option<f64>,
    /// The share of PSI `some` the named causes explain, 0..=100; null
    /// without PSI or when PSI saw no stall.
    pub coverage_pct: Option<f64>,
    /// Memory stalls PSI counts that are not timed here.
    pub not_timed: Vec<String>,
}

/// The share of `psi_some_ns` that `named_ns` explains, in percent, capped
/// at 100; `None` when PSI saw no stall.
pub fn coverage(named_ns: f64, psi_some_ns: f64) -> Option<f64> {
    (psi_some_ns > 0.0).then(|| (named_ns / psi_some_ns * 100.0).clamp(0.0, 100.0))
}

/// The account of a span from its histograms (absent: none happened),
/// what is unavailable (`histogram NAME` keys), and PSI.
pub fn account(
    hists: &BTreeMap<String, Summary>,
    unavailable: &BTreeMap<String, String>,
    psi: Option<&PsiSummary>,
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
    a.dirty_pause_ms = timed("dirty_pause").then(|| ms("dirty_pause"));
    a.mmap_lock_wait_ms = (timed("mmap_lock_wait_read") && timed("mmap_lock_wait_write"))
        .then(|| ms("mmap_lock_wait_read") + ms("mmap_lock_wait_write"));
    a.psi_some_ms = psi.and_then(|p| p.some_stall_us).map(|us| us as f64 / 1e3);
    a.psi_full_ms = psi.and_then(|p| p.full_stall_us).map(|us| us as f64 / 1e3);
    a.other_ms = a.psi_some_ms.map(|p| (p - a.named_ms).max(0.0));
    a.coverage_pct = a.psi_some_ms.and_then(|p| coverage(a.named_ms, p));
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
        let a = account(&hists, &BTreeMap::new(), Some(&psi(40_000)));
        assert_eq!(a.causes_ms["memcg reclaim"], 30.0);
        assert_eq!(a.causes_ms["direct reclaim"], 0.0);
        assert_eq!((a.named_ms, a.other_ms), (30.0, Some(10.0)));
        assert_eq!(a.coverage_pct, Some(75.0));
        assert_eq!(a.dirty_pause_ms, Some(500.0), "beside, not in the share");
        // Overlapping stalls sum past PSI's wall time: capped.
        let a = account(&hists, &BTreeMap::new(), Some(&psi(10_000)));
        assert_eq!((a.coverage_pct, a.other_ms), (Some(100.0), Some(0.0)));
    }

    #[test]
    fn without_psi_or_a_probe_the_figures_say_so_rather_than_zero() {
        let unavailable = BTreeMap::from([(
            "histogram reclaim_direct".to_string(),
            "not attached".to_string(),
        )]);
        let a = account(&BTreeMap::new(), &unavailable, None);
        assert_eq!(
            (a.psi_some_ms, a.coverage_pct, a.other_ms),
            (None, None, None)
        );
        assert!(!a.causes_ms.contains_key("direct reclaim"));
        assert!(a.not_timed.contains(&"direct reclaim".to_string()));
        assert_eq!(
            account(&BTreeMap::new(), &BTreeMap::new(), Some(&psi(0))).coverage_pct,
            None
        );
    }
}
