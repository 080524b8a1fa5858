//! The page cache: pages added to it (reads that missed, readahead, faults
//! on file pages not cached, writes to pages not cached) and pages reads
//! asked it for, system-wide, per process and per cgroup; the read hit
//! ratio derived from the two; pages removed from it, by reclaim
//! (evictions) and otherwise, system-wide and per memory cgroup; `top`'s
//! rows and the run's figures.

use super::*;

const REMOVED: &str = "vmscope_page_cache_removed_pages_total";

/// Its labelled counter families: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = &[(
    REMOVED,
    "reason",
    "Pages removed from the page cache, system-wide: by reclaim (reason=\"evicted\": kswapd, direct and cgroup-limit reclaim, MADV_PAGEOUT, the inode shrinker) or otherwise (\"dropped\": truncation, deletion, invalidation).",
)];

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[
    c(
        "page_cache_added_pages",
        counter::PAGE_CACHE_ADDED,
        probe::PAGE_CACHE_ADD,
        "pages",
        "Pages added to the page cache: reads that missed, readahead, faults on file pages not cached, writes to pages not cached (one per folio on kernels before 6.4, whose tracepoint has no order).",
        Export::Plain(
            "vmscope_page_cache_added_pages_total",
            "Pages added to the page cache (reads that missed, readahead, writes to pages not cached).",
        ),
    ),
    c(
        "page_cache_read_pages",
        counter::PAGE_CACHE_READ,
        probe::PAGE_CACHE_READ,
        "pages",
        "Pages reads asked the page cache for (read, pread, readv, splice, sendfile on files it serves; not tmpfs, not O_DIRECT), each page once per call; 6.11 on.",
        Export::Plain(
            "vmscope_page_cache_read_pages_total",
            "Pages reads asked the page cache for, each once per read call (the read hit ratio is 1 - added / read).",
        ),
    ),
    c(
        "page_cache_evicted_pages",
        counter::PAGE_CACHE_EVICTED,
        probe::PAGE_CACHE_REMOVE,
        "pages",
        "Pages removed from the page cache by reclaim (the removing task was reclaiming: kswapd, direct and cgroup-limit reclaim, MADV_PAGEOUT, the inode shrinker): evictions, system-wide whatever the recording follows, since the evicting task is seldom the one whose pages go.",
        Export::In(REMOVED, "evicted"),
    ),
    c(
        "page_cache_dropped_pages",
        counter::PAGE_CACHE_DROPPED,
        probe::PAGE_CACHE_REMOVE,
        "pages",
        "Pages removed from the page cache otherwise than by reclaim: truncation, deletion, invalidation (POSIX_FADV_DONTNEED, drop_caches); system-wide.",
        Export::In(REMOVED, "dropped"),
    ),
    c(
        "page_cache_removed_uncharged_pages",
        counter::PAGE_CACHE_REMOVED_UNCHARGED,
        probe::PAGE_CACHE_REMOVE,
        "pages",
        "Of the two above, pages in no memory cgroup's count: their folio was charged to none (memory cgroups off), or the per-cgroup map was full.",
        Export::Plain(
            "vmscope_page_cache_removed_uncharged_pages_total",
            "Pages removed from the page cache that no memory cgroup's count holds (charged to none, or the per-cgroup map full).",
        ),
    ),
];

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[
    ProcField {
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
    },
    ProcField {
        key: "page_cache_read",
        probe: probe::PAGE_CACHE_READ,
        unit: "pages",
        help: "Pages the process's reads asked the page cache for, each once per read call.",
        metric: Some("vmscope_process_page_cache_read_pages_total"),
        column: None,
        cgroup: cgroup(
            "vmscope_cgroup_page_cache_read_pages_total",
            "Pages the cgroup's processes' reads asked the page cache for (the cgroup's read hit ratio is 1 - added / read).",
        ),
        get: |p| p.page_cache_read_pages,
    },
];

/// The share of `read` pages the cache already held: pages read less
/// pages added, over pages read (0 to 1). Pages added by writes, by faults
/// on mapped files and by readahead not yet read count as misses too, so
/// a process that also writes or maps files scores lower than its reads
/// alone. `None` when nothing was read.
pub fn read_hit_ratio(read: f64, added: f64) -> Option<f64> {
    (read > 0.0).then(|| (read - added).max(0.0) / read)
}

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[
    rate(
        "page cache adds",
        "pages/s",
        &[Need::Probe(probe::PAGE_CACHE_ADD)],
        RateValue::Counters(&["page_cache_added_pages"]),
        "Pages added to the page cache (cache misses, readahead, writes to pages not cached).",
    ),
    rate(
        "page cache reads",
        "pages/s",
        &[Need::Probe(probe::PAGE_CACHE_READ)],
        RateValue::Counters(&["page_cache_read_pages"]),
        "Pages reads asked the page cache for (6.11 on).",
    ),
    rate(
        "page cache evictions",
        "pages/s",
        &[Need::Probe(probe::PAGE_CACHE_REMOVE)],
        RateValue::Counters(&["page_cache_evicted_pages"]),
        "Pages reclaim removed from the page cache, system-wide (kswapd, direct and cgroup-limit reclaim).",
    ),
    rate(
        "read hit ratio",
        "%",
        &[
            Need::Probe(probe::PAGE_CACHE_READ),
            Need::Probe(probe::PAGE_CACHE_ADD),
        ],
        RateValue::ReadHitRatio,
        "The share of pages read that the page cache held over the interval: 1 - added / read (additions by writes and mapped files count as misses); blank when nothing was read.",
    ),
];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "page_cache_added_pages",
        "pages",
        Lower,
        After,
        false,
        "Pages added to the page cache (cache misses, readahead, writes to pages not cached).",
        |r| vm_counter(r, "page_cache_added_pages"),
    ),
    row(
        "page_cache_read_pages",
        "pages",
        Neither,
        After,
        false,
        "Pages reads asked the page cache for, each once per read call.",
        |r| vm_counter(r, "page_cache_read_pages"),
    ),
    row(
        "page_cache_evicted_pages",
        "pages",
        Lower,
        After,
        false,
        "Pages reclaim removed from the page cache, system-wide.",
        |r| vm_counter(r, "page_cache_evicted_pages"),
    ),
    row(
        "page_cache_read_hit_ratio",
        "%",
        Better::Higher,
        After,
        false,
        "The share of pages read that the page cache held: 1 - added / read, in % (additions by writes and mapped files count as misses).",
        |r| {
            let [read, added] = ["page_cache_read_pages", "page_cache_added_pages"]
                .map(|n| r.counter(n).map(|v| v as f64));
            Some(100.0 * read_hit_ratio(read?, added?)?)
        },
    ),
];
