//! Page faults: the major-fault counter, the fault books read at a context
//! switch, the fault timing's own counters, the fault latency histograms,
//! the per-process fault figures, `top`'s fault rates and the run's fault
//! figures (rusage's among them).

use super::*;

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[c(
    "major_faults",
    counter::MAJOR_FAULTS,
    probe::MAJOR_FAULTS,
    "faults",
    "Major page faults.",
    Export::Plain("vmscope_major_faults_total", "Major page faults."),
)];

/// Its counter of the fault books read at a context switch (listed after the swap one).
pub const ACCOUNT_COUNTERS: &[Counter] = &[c(
    "switch_in_unseen",
    counter::SWITCH_IN_UNSEEN,
    probe::ACCOUNT,
    "switches",
    "Slices whose switch-in was not seen (untraced, or before attach), caught up from the thread's fault books.",
    Export::Plain(
        "vmscope_switch_in_unseen_total",
        "Slices whose switch-in was not seen (untraced, or before attach), caught up from the thread's fault books.",
    ),
)];

/// Its counters of the fault timing (listed after the THP ones).
pub const TIMING_COUNTERS: &[Counter] = &[
    c(
        "fault_retries",
        counter::FAULT_RETRIES,
        probe::FAULT_TIMING,
        "attempts",
        "Fault attempts handle_mm_fault returned for a retry (VM_FAULT_RETRY, per-VMA-lock fallbacks): not timed, never in the task's faults; in pgfault on older kernels (6.1), not on newer ones (6.12).",
        Export::Plain(
            "vmscope_fault_retries_total",
            "Fault attempts handle_mm_fault returned for a retry: not timed, never in the task's faults.",
        ),
    ),
    c(
        "fault_timed",
        counter::FAULT_TIMED,
        probe::FAULT_TIMING,
        "faults",
        "handle_mm_fault calls timed into the fault latency histograms; with fault_retries and fault_untimed, every call pgfault counts.",
        Export::Plain(
            "vmscope_fault_timed_total",
            "handle_mm_fault calls timed into the fault latency histograms.",
        ),
    ),
    c(
        "fault_untimed",
        counter::FAULT_UNTIMED,
        probe::FAULT_TIMING,
        "faults",
        "Faults whose handling ended without a recorded start (begun before attach, or the record evicted): not timed.",
        Export::Plain(
            "vmscope_fault_untimed_total",
            "Faults whose handling ended without a recorded start: not timed.",
        ),
    ),
];

/// Its latency-histogram families.
pub const HIST_FAMILIES: &[HistFamily] = &[HistFamily {
    prefix: "fault_",
    exact: false,
    metric: "vmscope_page_fault_duration_seconds",
    label: "kind",
    help: "Page-fault handling time (handle_mm_fault), by minor/major and anon/file.",
}];

/// The page faults of a process.
pub const PROC_FAULTS: ProcField = ProcField {
    key: "faults",
    probe: probe::ALWAYS,
    unit: "faults",
    help: "Page faults per process (top N by faults).",
    metric: Some("vmscope_process_page_faults_total"),
    column: Some(Column {
        order: 0,
        title: "FLT/s",
        key: "faults",
        divide_by: 1.0,
        always: true,
        width: 9,
        rank: 1,
        cgroup_width: 7,
        cgroup_rank: 2,
    }),
    cgroup: cgroup(
        "vmscope_cgroup_page_faults_total",
        "Page faults of the cgroup's processes while in it (top N cgroups by activity).",
    ),
    get: |p| p.faults.total(),
};

/// The major faults of a process.
pub const PROC_MAJOR: ProcField = ProcField {
    key: "major_faults",
    probe: probe::MAJOR_FAULTS,
    unit: "faults",
    help: "Major faults per process.",
    metric: Some("vmscope_process_major_faults_total"),
    column: Some(Column {
        order: 1,
        title: "MAJ/s",
        key: "major",
        divide_by: 1.0,
        always: false,
        width: 7,
        rank: 3,
        cgroup_width: 6,
        cgroup_rank: 9,
    }),
    cgroup: cgroup(
        "vmscope_cgroup_major_faults_total",
        "Major faults of the cgroup's processes while in it.",
    ),
    get: |p| p.major_faults,
};

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[PROC_FAULTS];

/// Its major-fault per-process figure (listed after the TLB one).
pub const MAJOR_PROC_FIELDS: &[ProcField] = &[PROC_MAJOR];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[
    rate(
        "faults user",
        "/s",
        &[],
        RateValue::FaultsUser,
        "Page faults from user mode (every fault with the perf fallback).",
    ),
    rate(
        "faults kernel",
        "/s",
        &[Need::FaultTracepoints],
        RateValue::FaultsKernel,
        "Page faults from kernel mode (copy_to_user and the like).",
    ),
    rate(
        "faults gup",
        "/s",
        &[],
        RateValue::FaultsGup,
        "Faults taken through get_user_pages (populate, mlock, remote access).",
    ),
    rate(
        "major faults",
        "/s",
        &[Need::Probe(probe::MAJOR_FAULTS)],
        RateValue::Counters(&["major_faults"]),
        "Major page faults.",
    ),
];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "faults",
        "faults",
        Lower,
        Before,
        true,
        "Page faults of the recorded scope, every path.",
        |r| r.scope_faults().total.map(|v| v as f64),
    ),
    row(
        "faults_per_record",
        "faults",
        Lower,
        Before,
        false,
        "Faults per record the workload reports.",
        |r| Some(r.scope_faults().total? as f64 / r.records()?),
    ),
    row(
        "user_faults_per_record",
        "faults",
        Lower,
        Before,
        false,
        "User-mode faults per record the workload reports.",
        |r| {
            let n = r.records()?;
            r.scope_faults().user.as_ref().map(|u| u.total as f64 / n)
        },
    ),
    row(
        "major_faults",
        "faults",
        Lower,
        Before,
        true,
        "Major page faults.",
        |r| vm_counter(r, "major_faults"),
    ),
    row(
        "minflt",
        "faults",
        Lower,
        Before,
        false,
        "The command's minor faults (rusage).",
        |r| rusage(r, |u| u.minflt as f64),
    ),
    row(
        "majflt",
        "faults",
        Lower,
        Before,
        false,
        "The command's major faults (rusage).",
        |r| rusage(r, |u| u.majflt as f64),
    ),
    row(
        "maxrss",
        "bytes",
        Lower,
        Before,
        false,
        "The command's peak resident set (rusage).",
        |r| rusage(r, |u| u.maxrss_bytes as f64),
    ),
];

/// Its get_user_pages figure (listed last but the rmap ones).
pub const GUP_RUN_ROWS: &[RunRow] = &[row(
    "gup_faults",
    "faults",
    Lower,
    Rest,
    false,
    "Faults taken through get_user_pages.",
    |r| r.scope_faults().gup.map(|v| v as f64),
)];
