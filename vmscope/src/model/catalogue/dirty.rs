//! Dirty throttling: the pause histogram, the per-process pause time,
//! `top`'s row and the run's figure.

use super::*;

/// Its latency-histogram families.
pub const HIST_FAMILIES: &[HistFamily] = &[HistFamily {
    prefix: "dirty_pause",
    exact: true,
    metric: "vmscope_dirty_pause_duration_seconds",
    label: "",
    help: "Dirty-throttling pauses: each sleep balance_dirty_pages put a writer to.",
}];

/// Its latency histograms with a fixed slot: (slot, name, probe).
pub const HISTS: &[(u32, &str, &str)] =
    &[(hist::DIRTY_PAUSE, "dirty_pause", probe::DIRTY_THROTTLE)];

/// The time a process's writers slept in dirty throttling.
pub const PROC_PAUSE: ProcField = ProcField {
    key: "dirty_pause",
    probe: probe::DIRTY_THROTTLE,
    unit: "ns",
    help: "Time the process's writers slept in dirty throttling.",
    metric: Some("vmscope_process_dirty_pause_seconds_total"),
    column: None,
    cgroup: cgroup(
        "vmscope_cgroup_dirty_pause_seconds_total",
        "Time the cgroup's writers slept in dirty throttling (balance_dirty_pages).",
    ),
    get: |p| p.dirty_pause_ns,
};

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[PROC_PAUSE];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[rate(
    "dirty throttling",
    "ms/s",
    &[Need::Probe(probe::DIRTY_THROTTLE)],
    RateValue::HistMs("dirty_pause"),
    "Time writers slept in dirty throttling (balance_dirty_pages).",
)];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[row(
    "dirty_pause",
    "ms",
    Lower,
    Before,
    true,
    "Time writers slept in dirty throttling (balance_dirty_pages).",
    |r| hist_sum_ms(r, &["dirty_pause"]),
)];
