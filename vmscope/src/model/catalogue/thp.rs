//! Transparent huge pages: khugepaged's collapses and scans, and (opt-in)
//! the faults that got each process a huge page.

use super::*;

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[
    c(
        "thp_collapses",
        counter::THP_COLLAPSES,
        probe::THP_COLLAPSE,
        "collapses",
        "khugepaged collapses tried (small pages into a huge page).",
        Export::Plain(
            "vmscope_thp_collapses_total",
            "khugepaged collapses tried (small pages into a huge page).",
        ),
    ),
    c(
        "thp_collapses_succeeded",
        counter::THP_COLLAPSE_SUCCEEDED,
        probe::THP_COLLAPSE,
        "collapses",
        "khugepaged collapses that succeeded.",
        Export::Plain(
            "vmscope_thp_collapses_succeeded_total",
            "khugepaged collapses that succeeded.",
        ),
    ),
    c(
        "khugepaged_scans",
        counter::KHUGEPAGED_SCANS,
        probe::KHUGEPAGED_SCAN,
        "page tables",
        "Page tables scanned for a collapse into a huge page (khugepaged, MADV_COLLAPSE).",
        Export::Plain(
            "vmscope_khugepaged_scans_total",
            "Page tables scanned for a collapse into a huge page (khugepaged, MADV_COLLAPSE).",
        ),
    ),
];

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[ProcField {
    key: "thp_faults",
    probe: probe::THP_FAULTS,
    unit: "faults",
    help: "Faults that got the process a huge page (PMD size), as its memory cgroup counts thp_fault_alloc; with --thp-faults, on kernels with memcg:count_memcg_events (6.16 on).",
    metric: Some("vmscope_process_thp_faults_total"),
    column: None,
    cgroup: cgroup(
        "vmscope_cgroup_thp_faults_total",
        "Faults that got the cgroup's processes a huge page (with --thp-faults).",
    ),
    get: |p| p.thp_faults,
}];

/// Its rows of `top`'s rates panel: faults that got a huge page (of the
/// PMD size) and those that fell back to small pages.
pub const RATES: &[Rate] = &[
    rate(
        "THP fault",
        "pages/s",
        &[],
        RateValue::Vmstat("thp_fault_alloc"),
        "/proc/vmstat thp_fault_alloc: faults that got a huge page.",
    ),
    rate(
        "THP fallback",
        "pages/s",
        &[],
        RateValue::Vmstat("thp_fault_fallback"),
        "/proc/vmstat thp_fault_fallback: faults that wanted a huge page and got small ones.",
    ),
];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "thp_fault_alloc",
        "faults",
        Neither,
        Before,
        true,
        "/proc/vmstat thp_fault_alloc: faults that got a huge page.",
        |r| vmstat(r, "thp_fault_alloc"),
    ),
    row(
        "thp_fault_fallback",
        "faults",
        Lower,
        Before,
        true,
        "/proc/vmstat thp_fault_fallback: faults that wanted a huge page and got small ones.",
        |r| vmstat(r, "thp_fault_fallback"),
    ),
];
