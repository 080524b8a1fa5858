//! Transparent huge pages: khugepaged's collapses and scans.

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
