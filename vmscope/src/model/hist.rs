//! Log2 latency histograms: names, cumulative state and summaries.

use serde::{Deserialize, Serialize};
use vmscope_common::{HIST_BUCKETS, madvise};

/// The kind of a page-fault histogram: `minor_anon`, `minor_file`,
/// `major_anon`, `major_file`.
pub fn fault_kind(k: u32) -> &'static str {
    match k {
        0 => "minor_anon",
        1 => "minor_file",
        2 => "major_anon",
        _ => "major_file",
    }
}

/// snake_case name of a madvise behaviour slot (`dontneed`, `free`, `other`,
/// or the number for values without a name).
pub fn behavior_name(slot: u32) -> String {
    match madvise::slot_value(slot) {
        Some(v) => madvise::name(v).map_or_else(|| v.to_string(), str::to_lowercase),
        None => "other".into(),
    }
}

/// Cumulative state of one histogram in a sample: non-zero buckets only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistSample {
    pub name: String,
    pub sum_ns: u64,
    /// `[bucket, count]` pairs; bucket `b` holds `[2^(b-1), 2^b)` ns.
    pub buckets: Vec<[u64; 2]>,
}

/// A histogram over a span, with percentiles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub count: u64,
    pub sum_ns: u64,
    /// Percentiles and max are the upper bounds of log2 buckets (so at most
    /// 2x the true value), or null when the histogram is empty.
    pub p50_ns: Option<u64>,
    pub p90_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Non-empty buckets: upper bound (inclusive) in ns, and count.
    pub buckets: Vec<Bucket>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bucket {
    pub le_ns: u64,
    pub count: u64,
}

/// Inclusive upper bound of bucket `b` in nanoseconds.
pub fn upper_bound_ns(b: u64) -> u64 {
    if b == 0 {
        0
    } else if b >= 64 {
        u64::MAX
    } else {
        (1u64 << b) - 1
    }
}

/// Dense counts from a sample's sparse buckets.
pub fn dense(s: &HistSample) -> [u64; HIST_BUCKETS as usize] {
    let mut d = [0u64; HIST_BUCKETS as usize];
    for &[b, c] in &s.buckets {
        if let Some(slot) = d.get_mut(b as usize) {
            *slot = c;
        }
    }
    d
}

/// Summary of `last - first`; `None` when a bucket went backwards.
pub fn summarize(first: Option<&HistSample>, last: &HistSample) -> Option<Summary> {
    let a = first.map(dense).unwrap_or([0; HIST_BUCKETS as usize]);
    let b = dense(last);
    let mut d = [0u64; HIST_BUCKETS as usize];
    for i in 0..d.len() {
        d[i] = b[i].checked_sub(a[i])?;
    }
    let sum_ns = last.sum_ns.checked_sub(first.map_or(0, |f| f.sum_ns))?;
    Some(summary_of(&d, sum_ns))
}

/// The summary of dense bucket counts. Counts are summed saturating: read
/// from a file they may be anything, and a wrapped total would put the
/// percentiles in the wrong buckets.
pub fn summary_of(d: &[u64], sum_ns: u64) -> Summary {
    let count = saturating_sum(d.iter().copied());
    let pct = |q: f64| -> Option<u64> {
        if count == 0 {
            return None;
        }
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        let mut seen = 0u64;
        for (b, &c) in d.iter().enumerate() {
            seen = seen.saturating_add(c);
            if seen >= rank {
                return Some(upper_bound_ns(b as u64));
            }
        }
        None
    };
    Summary {
        count,
        sum_ns,
        p50_ns: pct(0.50),
        p90_ns: pct(0.90),
        p99_ns: pct(0.99),
        max_ns: d
            .iter()
            .rposition(|&c| c > 0)
            .map(|b| upper_bound_ns(b as u64)),
        buckets: d
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(b, &c)| Bucket {
                le_ns: upper_bound_ns(b as u64),
                count: c,
            })
            .collect(),
    }
}

/// The sum of `values`, stopping at `u64::MAX` instead of wrapping.
pub fn saturating_sum(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmscope_common::hist;

    fn hs(buckets: &[[u64; 2]], sum: u64) -> HistSample {
        HistSample {
            name: "x".into(),
            sum_ns: sum,
            buckets: buckets.to_vec(),
        }
    }

    #[test]
    fn names_are_stable() {
        assert_eq!(
            crate::model::catalogue::hist_name(hist::RECLAIM_DIRECT),
            "reclaim_direct"
        );
        assert_eq!(
            crate::model::catalogue::hist_name(hist::MADVISE_BASE + 8),
            "madvise_free"
        );
        assert_eq!(
            crate::model::catalogue::hist_name(hist::MADVISE_BASE + 4),
            "madvise_dontneed"
        );
        assert_eq!(
            crate::model::catalogue::hist_name(hist::MADVISE_BASE + 5),
            "madvise_5"
        );
        assert_eq!(
            crate::model::catalogue::hist_name(hist::MADVISE_BASE + madvise::OTHER),
            "madvise_other"
        );
    }

    #[test]
    fn percentiles_are_bucket_upper_bounds() {
        // 90 samples in [512, 1024) ns, 10 in [1 Mi, 2 Mi) ns.
        let s = summarize(None, &hs(&[[10, 90], [21, 10]], 12345)).expect("forward");
        assert_eq!(s.count, 100);
        assert_eq!(s.p50_ns, Some(1023));
        assert_eq!(s.p90_ns, Some(1023));
        assert_eq!(s.p99_ns, Some((1 << 21) - 1));
        assert_eq!(s.max_ns, Some((1 << 21) - 1));
        assert_eq!(s.buckets.len(), 2);
    }

    #[test]
    fn empty_histogram_has_no_percentiles_not_zero() {
        let s = summarize(None, &hs(&[], 0)).expect("forward");
        assert_eq!((s.count, s.p50_ns, s.max_ns), (0, None, None));
    }

    #[test]
    fn huge_counts_saturate_instead_of_wrapping() {
        assert_eq!(saturating_sum([u64::MAX, 1, 5]), u64::MAX);
        assert_eq!(saturating_sum([2, 3]), 5);
        assert_eq!(saturating_sum([]), 0);
        // Wrapping, these would sum to 1 and put every percentile in the
        // first bucket.
        let mut d = [0u64; HIST_BUCKETS as usize];
        d[3] = 2;
        d[10] = u64::MAX;
        let s = summary_of(&d, 0);
        assert_eq!(s.count, u64::MAX);
        assert_eq!(s.p50_ns, Some(upper_bound_ns(10)));
        assert_eq!(s.p99_ns, Some(upper_bound_ns(10)));
        assert_eq!(s.max_ns, Some(upper_bound_ns(10)));
        // Every bucket full: still a total and percentiles, no overflow.
        let s = summary_of(&[u64::MAX; HIST_BUCKETS as usize], u64::MAX);
        assert_eq!(s.count, u64::MAX);
        assert_eq!(s.p50_ns, Some(upper_bound_ns(0)));
    }

    #[test]
    fn deltas_subtract_and_detect_backwards() {
        let s = summarize(Some(&hs(&[[3, 5]], 10)), &hs(&[[3, 7], [4, 1]], 30)).expect("forward");
        assert_eq!(s.count, 3);
        assert_eq!(s.sum_ns, 20);
        assert!(summarize(Some(&hs(&[[3, 5]], 10)), &hs(&[[3, 4]], 30)).is_none());
    }
}
