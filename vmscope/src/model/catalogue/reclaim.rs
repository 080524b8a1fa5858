//! Reclaim: the LRU and write-back page counters, the reclaim, kswapd
//! and shrink_slab latency histograms, the per-process reclaim stall,
//! `top`'s reclaim rows and the run's reclaim figures.

use super::*;

/// A reclaim a process can stall in: how the per-cgroup stall series (its
/// `kind` label), the report's process table and the OOM lead-up break the
/// reclaim stall down.
#[derive(Clone, Copy, Debug)]
pub struct Stall {
    /// Its `kind` label.
    pub kind: &'static str,
    /// Its latency histogram.
    pub hist: &'static str,
    /// Its row in the OOM lead-up.
    pub what: &'static str,
    /// The process's time in it (ns).
    pub ns: ProcCounter,
}

/// Direct reclaim: an allocation reclaiming memory itself.
pub const DIRECT: Stall = Stall {
    kind: "direct",
    hist: "reclaim_direct",
    what: "direct reclaim stall",
    ns: ProcCounter::direct_reclaim_ns,
};

/// Memcg reclaim: a charge reclaiming from its memory cgroup.
pub const MEMCG: Stall = Stall {
    kind: "memcg",
    hist: "reclaim_memcg",
    what: "memcg reclaim stall",
    ns: ProcCounter::memcg_reclaim_ns,
};

/// Every reclaim stall, in the order the views list them.
pub const STALLS: [Stall; 2] = [DIRECT, MEMCG];

/// A process's time stalled in reclaim, every kind.
fn stall_ns(p: &ProcSample) -> u64 {
    STALLS.iter().map(|k| k.ns.get(p)).sum()
}

const LRU: &str = "vmscope_lru_pages_total";

const WB: &str = "vmscope_reclaim_writeback_pages_total";

/// Its labelled counter families: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = &[
    (
        "vmscope_lru_pages_total",
        "event",
        "LRU pages by reclaim event.",
    ),
    (
        "vmscope_reclaim_writeback_pages_total",
        "type",
        "Pages written back by reclaim.",
    ),
];

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[
    c(
        "lru_scanned_pages",
        counter::LRU_SCANNED,
        probe::LRU_INACTIVE,
        "pages",
        "Inactive-list pages scanned by reclaim.",
        Export::In(LRU, "scanned"),
    ),
    c(
        "lru_reclaimed_pages",
        counter::LRU_RECLAIMED,
        probe::LRU_INACTIVE,
        "pages",
        "Inactive-list pages reclaimed.",
        Export::In(LRU, "reclaimed"),
    ),
    c(
        "lru_dirty_pages",
        counter::LRU_DIRTY,
        probe::LRU_INACTIVE,
        "pages",
        "Scanned pages found dirty.",
        Export::In(LRU, "dirty"),
    ),
    c(
        "lru_writeback_pages",
        counter::LRU_WRITEBACK,
        probe::LRU_INACTIVE,
        "pages",
        "Scanned pages found under write-back.",
        Export::In(LRU, "writeback"),
    ),
    c(
        "lru_immediate_pages",
        counter::LRU_IMMEDIATE,
        probe::LRU_INACTIVE,
        "pages",
        "Scanned pages under write-back marked for immediate reclaim.",
        Export::In(LRU, "immediate"),
    ),
    c(
        "lru_unmap_fail_pages",
        counter::LRU_UNMAP_FAIL,
        probe::LRU_INACTIVE,
        "pages",
        "Scanned pages reclaim failed to unmap.",
        Export::In(LRU, "unmap_fail"),
    ),
    c(
        "lru_active_taken_pages",
        counter::LRU_ACTIVE_TAKEN,
        probe::LRU_ACTIVE,
        "pages",
        "Active-list pages taken for aging.",
        Export::In(LRU, "active_taken"),
    ),
    c(
        "lru_active_deactivated_pages",
        counter::LRU_ACTIVE_DEACTIVATED,
        probe::LRU_ACTIVE,
        "pages",
        "Active-list pages moved to the inactive list.",
        Export::In(LRU, "active_deactivated"),
    ),
    c(
        "reclaim_write_anon_pages",
        counter::WRITE_ANON,
        probe::WRITE_FOLIO,
        "pages",
        "Anonymous pages reclaim wrote out (to swap).",
        Export::In(WB, "anon"),
    ),
    c(
        "reclaim_write_file_pages",
        counter::WRITE_FILE,
        probe::WRITE_FOLIO,
        "pages",
        "File pages reclaim wrote back.",
        Export::In(WB, "file"),
    ),
];

/// Its latency-histogram families.
pub const HIST_FAMILIES: &[HistFamily] = &[HistFamily {
    prefix: "reclaim_",
    exact: false,
    metric: "vmscope_reclaim_duration_seconds",
    label: "kind",
    help: "Time in reclaim, from its begin/end tracepoints, by kind.",
}];

/// Its kswapd and shrink_slab histogram families (listed after madvise's).
pub const KSWAPD_HIST_FAMILIES: &[HistFamily] = &[
    HistFamily {
        prefix: "kswapd_active",
        exact: true,
        metric: "vmscope_kswapd_active_duration_seconds",
        label: "",
        help: "kswapd active periods, wake to sleep.",
    },
    HistFamily {
        prefix: "shrink_slab",
        exact: true,
        metric: "vmscope_shrink_slab_duration_seconds",
        label: "",
        help: "shrink_slab calls.",
    },
];

/// Its latency histograms with a fixed slot: (slot, name, probe).
pub const HISTS: &[(u32, &str, &str)] = &[
    (
        hist::RECLAIM_DIRECT,
        "reclaim_direct",
        probe::DIRECT_RECLAIM,
    ),
    (hist::RECLAIM_MEMCG, "reclaim_memcg", probe::MEMCG_RECLAIM),
    (
        hist::RECLAIM_MEMCG_SOFTLIMIT,
        "reclaim_memcg_softlimit",
        probe::MEMCG_SOFTLIMIT_RECLAIM,
    ),
    (hist::RECLAIM_NODE, "reclaim_node", probe::NODE_RECLAIM),
    (hist::KSWAPD_ACTIVE, "kswapd_active", probe::KSWAPD_SLEEP),
    (hist::SHRINK_SLAB, "shrink_slab", probe::SHRINK_SLAB),
];

/// The time a process stalled in reclaim, every kind.
pub const PROC_STALL: ProcField = ProcField {
    key: "reclaim_stall",
    probe: probe::ALWAYS,
    unit: "ns",
    help: "Time the process stalled in direct and memcg reclaim.",
    metric: Some("vmscope_process_reclaim_stall_seconds_total"),
    column: Some(Column {
        order: 2,
        title: "RCLM_ms/s",
        key: "reclaim",
        divide_by: 1e6,
        always: true,
        width: 10,
        rank: 2,
        cgroup_width: 9,
        cgroup_rank: 7,
    }),
    cgroup: None,
    get: stall_ns,
};

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[PROC_STALL];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[
    rate(
        "direct reclaim",
        "ms/s",
        &[Need::Probe(probe::DIRECT_RECLAIM)],
        RateValue::HistMs("reclaim_direct"),
        "Time tasks spent in direct reclaim.",
    ),
    rate(
        "memcg reclaim",
        "ms/s",
        &[Need::Probe(probe::MEMCG_RECLAIM)],
        RateValue::HistMs("reclaim_memcg"),
        "Time tasks spent reclaiming for their memory cgroup.",
    ),
];

/// Its kswapd row (listed after the PSI rows).
pub const KSWAPD_RATES: &[Rate] = &[rate(
    "kswapd active",
    "ms/s",
    &[Need::Probe(probe::KSWAPD_SLEEP)],
    RateValue::HistMs("kswapd_active"),
    "Time kswapd was awake.",
)];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[row(
    "reclaim_stall",
    "ms",
    Lower,
    Before,
    true,
    "Time in direct and memcg reclaim.",
    |r| hist_sum_ms(r, &[DIRECT.hist, MEMCG.hist]),
)];

/// Its scan figure (listed after the mmap_lock ones).
pub const SCAN_RUN_ROWS: &[RunRow] = &[row(
    "pgscan_direct",
    "pages",
    Lower,
    Before,
    true,
    "/proc/vmstat pgscan_direct.",
    |r| vmstat(r, "pgscan_direct"),
)];
