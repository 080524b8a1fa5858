//! The page cache: pages added to it (reads that missed, readahead, faults
//! on file pages not cached, writes to pages not cached), system-wide, per
//! process and per cgroup; `top`'s row and the run's figure.

use super::*;

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[c(
    "page_cache_added_pages",
    counter::PAGE_CACHE_ADDED,
    probe::PAGE_CACHE_ADD,
    "pages",
    "Pages added to the page cache: reads that missed, readahead, faults on file pages not cached, writes to pages not cached (one per folio on kernels before 6.4, whose tracepoint has no order).",
    Export::Plain(
        "vmscope_page_cache_added_pages_total",
        "Pages added to the page cache (reads that missed, readahead, writes to pages not cached).",
    ),
)];

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[ProcField {
    key: "page_cache_added",
    probe: probe::PAGE_CACHE_ADD,
    unit: "pages",
    help: "Pages the process's reads, readahead, faults and writes added to the page cache.",
    metric: Some("vmscope_process_page_cache_added_pages_total"),
    column: None,
    cgroup: cgroup(
        "vmscope_cgroup_page_cache_added_pages_total",
        "Pages the cgroup's processes added to the page cache.",
    ),
    get: |p| p.page_cache_added_pages,
}];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[rate(
    "page cache adds",
    "pages/s",
    &[Need::Probe(probe::PAGE_CACHE_ADD)],
    RateValue::Counters(&["page_cache_added_pages"]),
    "Pages added to the page cache (cache misses, readahead, writes to pages not cached).",
)];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[row(
    "page_cache_added_pages",
    "pages",
    Lower,
    After,
    false,
    "Pages added to the page cache (cache misses, readahead, writes to pages not cached).",
    |r| vm_counter(r, "page_cache_added_pages"),
)];
