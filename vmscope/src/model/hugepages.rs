//! Transparent huge pages by size: the kernel's own per-size counts
//! (`/sys/kernel/mm/transparent_hugepage/hugepages-<size>kB/stats/`, 6.9
//! and later), which tell multi-size THP (mTHP: 16 KiB, 64 KiB, ...)
//! apart from the PMD size that `/proc/vmstat`'s `thp_fault_alloc` counts.
//!
//! Pure: an instant's [`ThpSizes`] is read by `source::kernel::system`; the
//! run's [`ThpSizeTotals`] is the growth between the first and last.
//!
//! Per process the size of a huge-page fault cannot be told here: no
//! tracepoint marks the THP fault path, and the hook that would
//! (`do_huge_pmd_anonymous_page`, by fentry) is not one vmscope attaches.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The per-size counters read: faults that got a huge page of that size,
/// fell back (no page, or the memory cgroup's charge failed), and swap-out
/// whole or split.
pub const STATS: &[&str] = &[
    "anon_fault_alloc",
    "anon_fault_fallback",
    "anon_fault_fallback_charge",
    "swpout",
    "swpout_fallback",
    "split",
];

/// Counts by size (`"2048kB"`) and counter name, at one instant.
pub type ThpSizes = BTreeMap<String, BTreeMap<String, u64>>;

/// Why the per-size counts are missing on a kernel that lacks them.
pub const UNAVAILABLE: &str = "this kernel has no per-size THP counts \
                               (/sys/kernel/mm/transparent_hugepage/hugepages-*kB/stats, 6.9+)";

/// The run's growth of each per-size counter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThpSizeTotals {
    /// By size, then counter: its growth over the run. Sizes that stayed at
    /// 0 throughout are listed too, so a 0 here was counted.
    pub by_size: BTreeMap<String, BTreeMap<String, u64>>,
    /// Set, with the reason, when the kernel lacks the counts (then
    /// `by_size` is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// Growth from `first` to `last`; a counter that went backwards (a
/// counter reset) or is missing from either is left out.
pub fn totals(first: Option<&ThpSizes>, last: Option<&ThpSizes>) -> ThpSizeTotals {
    let (Some(first), Some(last)) = (first, last) else {
        return ThpSizeTotals {
            by_size: BTreeMap::new(),
            unavailable: Some(UNAVAILABLE.to_string()),
        };
    };
    let by_size = last
        .iter()
        .map(|(size, now)| {
            let grown = now
                .iter()
                .filter_map(|(k, v)| {
                    let then = first.get(size)?.get(k)?;
                    Some((k.clone(), v.checked_sub(*then)?))
                })
                .collect();
            (size.clone(), grown)
        })
        .collect();
    ThpSizeTotals {
        by_size,
        unavailable: None,
    }
}

/// The size of a `hugepages-<size>` directory name: `"2048kB"`.
pub fn size_of_dir(name: &str) -> Option<&str> {
    name.strip_prefix("hugepages-")
        .filter(|s| s.ends_with("kB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(pairs: &[(&str, &str, u64)]) -> ThpSizes {
        let mut s = ThpSizes::new();
        for (size, k, v) in pairs {
            s.entry(size.to_string())
                .or_default()
                .insert(k.to_string(), *v);
        }
        s
    }

    #[test]
    fn growth_by_size_and_what_is_left_out() {
        let a = sizes(&[
            ("2048kB", "anon_fault_alloc", 100),
            ("64kB", "anon_fault_alloc", 7),
            ("64kB", "split", 9),
        ]);
        let b = sizes(&[
            ("2048kB", "anon_fault_alloc", 356),
            ("64kB", "anon_fault_alloc", 7),
            ("64kB", "split", 3),
            ("16kB", "anon_fault_alloc", 1),
        ]);
        let t = totals(Some(&a), Some(&b));
        assert_eq!(t.unavailable, None);
        assert_eq!(t.by_size["2048kB"]["anon_fault_alloc"], 256);
        assert_eq!(t.by_size["64kB"]["anon_fault_alloc"], 0);
        assert!(!t.by_size["64kB"].contains_key("split"), "went backwards");
        assert!(t.by_size["16kB"].is_empty(), "not in the first reading");
        let none = totals(None, Some(&b));
        assert!(none.by_size.is_empty());
        assert!(none.unavailable.is_some_and(|u| u.contains("6.9")));
        assert_eq!(size_of_dir("hugepages-2048kB"), Some("2048kB"));
        assert_eq!(size_of_dir("hugepages"), None);
        assert_eq!(size_of_dir("enabled"), None);
    }
}
