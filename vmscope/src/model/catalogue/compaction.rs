//! Compaction: direct compactions (by order), compaction runs and their
//! outcome, deferrals, kcompactd, the direct-compaction and kcompactd
//! histograms, the per-process compaction time, `top`'s row and the run's
//! figures.

use super::*;

const COMPACT_RUNS: &str = "vmscope_compaction_runs_total";

/// Its labelled counter families: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = &[
    (
        "vmscope_compaction_runs_total",
        "context",
        "Compaction runs (one zone each): inside direct compaction, or in the background.",
    ),
    (
        "vmscope_direct_compactions_total",
        "order",
        "Direct compactions (allocations that compacted memory themselves), by the order asked for.",
    ),
];

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[
    c(
        "compact_direct",
        counter::COMPACT_DIRECT,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions: allocations that compacted memory themselves (vmstat compact_stall).",
        Export::Plain(
            "vmscope_direct_compaction_stalls_total",
            "Direct compactions: allocations that compacted memory themselves (vmstat compact_stall).",
        ),
    ),
    c(
        "compact_direct_success",
        counter::COMPACT_DIRECT_SUCCESS,
        probe::COMPACT_DEFER_RESET,
        "compactions",
        "Direct compactions after which the allocation got its page (vmstat compact_success).",
        Export::Plain(
            "vmscope_direct_compaction_successes_total",
            "Direct compactions after which the allocation got its page (vmstat compact_success).",
        ),
    ),
    c(
        "compact_runs_direct_success",
        counter::COMPACT_RUNS_DIRECT_SUCCESS,
        probe::COMPACT_END,
        "runs",
        "Compaction runs inside direct compaction that ended in success (a suitable free block made).",
        Export::Plain(
            "vmscope_compaction_runs_direct_succeeded_total",
            "Compaction runs inside direct compaction that ended in success (a suitable free block made).",
        ),
    ),
    c(
        "compact_runs_direct",
        counter::COMPACT_RUNS_DIRECT,
        probe::COMPACT_END,
        "runs",
        "Compaction runs (one zone each) inside direct compaction.",
        Export::In(COMPACT_RUNS, "direct"),
    ),
    c(
        "compact_runs_background",
        counter::COMPACT_RUNS_BACKGROUND,
        probe::COMPACT_END,
        "runs",
        "Compaction runs outside direct compaction: kcompactd, proactive, compact_memory.",
        Export::In(COMPACT_RUNS, "background"),
    ),
    c(
        "compact_deferred",
        counter::COMPACT_DEFERRED,
        probe::COMPACT_DEFERRED,
        "zones",
        "Zones skipped because compaction there had failed recently (deferred).",
        Export::Plain(
            "vmscope_compaction_deferred_total",
            "Zones skipped because compaction there had failed recently (deferred).",
        ),
    ),
    c(
        "compact_order_0",
        counter::COMPACT_ORDER_BASE,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 0.",
        Export::In("vmscope_direct_compactions_total", "0"),
    ),
    c(
        "compact_order_1",
        counter::COMPACT_ORDER_BASE + 1,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 1.",
        Export::In("vmscope_direct_compactions_total", "1"),
    ),
    c(
        "compact_order_2",
        counter::COMPACT_ORDER_BASE + 2,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 2.",
        Export::In("vmscope_direct_compactions_total", "2"),
    ),
    c(
        "compact_order_3",
        counter::COMPACT_ORDER_BASE + 3,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 3.",
        Export::In("vmscope_direct_compactions_total", "3"),
    ),
    c(
        "compact_order_4",
        counter::COMPACT_ORDER_BASE + 4,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 4.",
        Export::In("vmscope_direct_compactions_total", "4"),
    ),
    c(
        "compact_order_5",
        counter::COMPACT_ORDER_BASE + 5,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 5.",
        Export::In("vmscope_direct_compactions_total", "5"),
    ),
    c(
        "compact_order_6",
        counter::COMPACT_ORDER_BASE + 6,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 6.",
        Export::In("vmscope_direct_compactions_total", "6"),
    ),
    c(
        "compact_order_7",
        counter::COMPACT_ORDER_BASE + 7,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 7.",
        Export::In("vmscope_direct_compactions_total", "7"),
    ),
    c(
        "compact_order_8",
        counter::COMPACT_ORDER_BASE + 8,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 8.",
        Export::In("vmscope_direct_compactions_total", "8"),
    ),
    c(
        "compact_order_9",
        counter::COMPACT_ORDER_BASE + 9,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 9.",
        Export::In("vmscope_direct_compactions_total", "9"),
    ),
    c(
        "compact_order_10_plus",
        counter::COMPACT_ORDER_BASE + 10,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 10+.",
        Export::In("vmscope_direct_compactions_total", "10+"),
    ),
    c(
        "kcompactd_wakes",
        counter::KCOMPACTD_WAKES,
        probe::KCOMPACTD_WAKE,
        "wakes",
        "Times kcompactd woke to compact.",
        Export::Plain(
            "vmscope_kcompactd_wakes_total",
            "Times kcompactd woke to compact.",
        ),
    ),
];

/// Its latency-histogram families.
pub const HIST_FAMILIES: &[HistFamily] = &[
    HistFamily {
        prefix: "compaction_direct",
        exact: true,
        metric: "vmscope_direct_compaction_duration_seconds",
        label: "",
        help: "Compaction runs inside direct compaction (the allocating task's stall).",
    },
    HistFamily {
        prefix: "kcompactd_active",
        exact: true,
        metric: "vmscope_kcompactd_active_duration_seconds",
        label: "",
        help: "kcompactd active periods, wake to sleep.",
    },
];

/// Its latency histograms with a fixed slot: (slot, name, probe).
pub const HISTS: &[(u32, &str, &str)] = &[
    (
        hist::COMPACTION_DIRECT,
        "compaction_direct",
        probe::COMPACT_END,
    ),
    (
        hist::KCOMPACTD_ACTIVE,
        "kcompactd_active",
        probe::KCOMPACTD_SLEEP,
    ),
];

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[ProcField {
    key: "direct_compaction",
    probe: probe::COMPACT_END,
    unit: "ns",
    help: "Time the process's allocations spent compacting memory themselves.",
    metric: Some("vmscope_process_direct_compaction_seconds_total"),
    column: None,
    get: |p| p.direct_compaction_ns,
}];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[rate(
    "direct compaction",
    "ms/s",
    &[Need::Probe(probe::COMPACT_END)],
    RateValue::HistMs("compaction_direct"),
    "Time allocations spent compacting memory themselves.",
)];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "direct_compaction",
        "ms",
        Lower,
        Before,
        true,
        "Time allocations spent compacting memory themselves.",
        |r| hist_sum_ms(r, &["compaction_direct"]),
    ),
    row(
        "compact_stall",
        "compactions",
        Lower,
        Before,
        true,
        "/proc/vmstat compact_stall.",
        |r| vmstat(r, "compact_stall"),
    ),
];
