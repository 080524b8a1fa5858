//! madvise: process_madvise's failures, the per-behaviour latency
//! histograms, the per-process calls, `top`'s madvise and lazy-free rows
//! and the run's madvise figures.

use super::*;

/// The calls of madvise `behaviour`, if madvise was traced.
fn madvise_calls(rec: &dyn Run, behaviour: &str) -> Option<f64> {
    (!rec.unavailable("madvise")).then(|| rec.madvise_calls(behaviour).unwrap_or(0) as f64)
}

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[c(
    "process_madvise_errors",
    counter::PROCESS_MADVISE_ERRORS,
    probe::PROCESS_MADVISE,
    "calls",
    "process_madvise calls that failed.",
    Export::Plain(
        "vmscope_process_madvise_errors_total",
        "process_madvise calls that failed.",
    ),
)];

/// Its latency-histogram families.
pub const HIST_FAMILIES: &[HistFamily] = &[HistFamily {
    prefix: "madvise_",
    exact: false,
    metric: "vmscope_madvise_duration_seconds",
    label: "behavior",
    help: "madvise latency by behaviour.",
}];

/// The madvise calls a process made.
pub const PROC_CALLS: ProcField = ProcField {
    key: "madvise_calls",
    probe: probe::MADVISE,
    unit: "calls",
    help: "madvise and process_madvise calls the process made.",
    metric: None,
    column: Some(Column {
        order: 5,
        title: "MADV/s",
        key: "madvise",
        divide_by: 1.0,
        always: true,
        width: 7,
        rank: 6,
        cgroup_width: 6,
        cgroup_rank: 10,
    }),
    cgroup: None,
    get: |p| p.madvise_calls,
};

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[
    PROC_CALLS,
    ProcField {
        key: "madvise_bytes",
        probe: probe::MADVISE,
        unit: "bytes",
        help: "Bytes the process's successful madvise calls covered (MADV_FREE, DONTNEED, COLD, PAGEOUT...: how much memory it handed back or hinted).",
        metric: Some("vmscope_process_madvise_bytes_total"),
        column: None,
        cgroup: cgroup(
            "vmscope_cgroup_madvise_bytes_total",
            "Bytes the cgroup's processes' successful madvise calls covered.",
        ),
        get: |p| p.madvise_bytes,
    },
];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[
    Rate {
        label: "madvise",
        unit: "calls/s",
        needs: &[Need::Probe(probe::MADVISE)],
        value: RateValue::MadviseCalls,
        detail: Detail::MadviseBehaviours,
        help: "madvise calls, by behaviour in the detail.",
    },
    rate(
        "lazyfree",
        "pages/s",
        &[],
        RateValue::Vmstat("pglazyfree"),
        "/proc/vmstat pglazyfree: pages MADV_FREE marked.",
    ),
    rate(
        "lazyfreed",
        "pages/s",
        &[],
        RateValue::Vmstat("pglazyfreed"),
        "/proc/vmstat pglazyfreed: lazy pages reclaim freed.",
    ),
];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "madvise_calls",
        "calls",
        Neither,
        After,
        true,
        "madvise calls of every behaviour.",
        |r| (!r.unavailable("madvise")).then(|| r.madvise_total_calls() as f64),
    ),
    row(
        "madvise_dontneed_calls",
        "calls",
        Neither,
        After,
        false,
        "MADV_DONTNEED calls.",
        |r| madvise_calls(r, "dontneed"),
    ),
    row(
        "madvise_free_calls",
        "calls",
        Neither,
        After,
        false,
        "MADV_FREE calls.",
        |r| madvise_calls(r, "free"),
    ),
    row(
        "madvise_cold_calls",
        "calls",
        Neither,
        After,
        false,
        "MADV_COLD calls.",
        |r| madvise_calls(r, "cold"),
    ),
    row(
        "madvise_pageout_calls",
        "calls",
        Neither,
        After,
        false,
        "MADV_PAGEOUT calls.",
        |r| madvise_calls(r, "pageout"),
    ),
    row(
        "pglazyfree",
        "pages",
        Neither,
        After,
        true,
        "/proc/vmstat pglazyfree.",
        |r| vmstat(r, "pglazyfree"),
    ),
    row(
        "pglazyfreed",
        "pages",
        Neither,
        After,
        false,
        "/proc/vmstat pglazyfreed.",
        |r| vmstat(r, "pglazyfreed"),
    ),
];
