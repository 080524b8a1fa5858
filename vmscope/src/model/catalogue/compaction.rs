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
        DIRECT_COMPACTIONS,
        "order",
        "Direct compactions (allocations that compacted memory themselves), by the order asked for.",
    ),
];

/// Its counters before the by-order ones.
const RUNS: &[Counter] = &[
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
];

/// The family of the by-order counters.
const DIRECT_COMPACTIONS: &str = "vmscope_direct_compactions_total";

/// One direct-compaction counter per order asked for (the `order` label):
/// `compact_order_<order>` at slot `COMPACT_ORDER_BASE + order`.
macro_rules! by_order {
    ($($order:literal),*) => {
        &[$(c(
            concat!("compact_order_", $order),
            counter::COMPACT_ORDER_BASE + $order,
            probe::COMPACT_DIRECT,
            "compactions",
            concat!("Direct compactions for an allocation of order ", $order, "."),
            Export::In(DIRECT_COMPACTIONS, stringify!($order)),
        )),*]
    };
}

/// The direct compactions by order: 0 to 9, then 10 and above.
const BY_ORDER: &[Counter] = concat_slices!([Counter]:
    by_order!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
    &[c(
        "compact_order_10_plus",
        counter::COMPACT_ORDER_BASE + 10,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 10+.",
        Export::In(DIRECT_COMPACTIONS, "10+"),
    )],
);

/// Its counters after the by-order ones.
const KCOMPACTD: &[Counter] = &[c(
    "kcompactd_wakes",
    counter::KCOMPACTD_WAKES,
    probe::KCOMPACTD_WAKE,
    "wakes",
    "Times kcompactd woke to compact.",
    Export::Plain(
        "vmscope_kcompactd_wakes_total",
        "Times kcompactd woke to compact.",
    ),
)];

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = concat_slices!([Counter]: RUNS, BY_ORDER, KCOMPACTD);

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

/// The time a process's allocations spent compacting.
pub const PROC_DIRECT: ProcField = ProcField {
    key: "direct_compaction",
    probe: probe::COMPACT_END,
    unit: "ns",
    help: "Time the process's allocations spent compacting memory themselves.",
    metric: Some("vmscope_process_direct_compaction_seconds_total"),
    column: None,
    cgroup: cgroup(
        "vmscope_cgroup_direct_compaction_seconds_total",
        "Time the cgroup's allocations spent compacting memory themselves.",
    ),
    get: |p| p.direct_compaction_ns,
};

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[PROC_DIRECT];

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
