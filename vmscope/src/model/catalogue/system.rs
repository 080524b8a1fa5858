//! The rest: vmscope's own bookkeeping counters, the other syscalls'
//! latency (munmap, mprotect, process_madvise), PSI's rows, and the run's
//! headline times.

use super::*;

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[
    c(
        "inflight_dropped",
        counter::INFLIGHT_FULL,
        probe::ALWAYS,
        "operations",
        "Operations not timed because the in-flight map was full.",
        Export::Plain(
            "vmscope_inflight_dropped_total",
            "Operations not timed because the in-flight map was full.",
        ),
    ),
    c(
        "process_exits",
        counter::PROC_EXITS,
        probe::PROCESS_EXIT,
        "processes",
        "Followed processes whose last thread exited.",
        Export::No,
    ),
    c(
        "process_pid_reuses",
        counter::PROC_REUSED,
        probe::PROCESS_EXIT,
        "processes",
        "Processes that reused the pid of an ended one still in the books.",
        Export::No,
    ),
];

/// Its latency-histogram families.
pub const HIST_FAMILIES: &[HistFamily] = &[HistFamily {
    prefix: "",
    exact: false,
    metric: "vmscope_syscall_duration_seconds",
    label: "syscall",
    help: "munmap, mprotect and process_madvise latency.",
}];

/// Its latency histograms with a fixed slot: (slot, name, probe).
pub const HISTS: &[(u32, &str, &str)] = &[
    (hist::MUNMAP, "munmap", probe::MUNMAP),
    (hist::MPROTECT, "mprotect", probe::MPROTECT),
    (
        hist::PROCESS_MADVISE,
        "process_madvise",
        probe::PROCESS_MADVISE,
    ),
];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[
    rate(
        "PSI memory some",
        "ms/s",
        &[],
        RateValue::PsiSome,
        "Time some task stalled on memory, from /proc/pressure/memory.",
    ),
    rate(
        "stall explained",
        "%",
        &[],
        RateValue::StallCoverage,
        "Share of PSI memory some that direct and memcg reclaim explain.",
    ),
];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "real",
        "s",
        Lower,
        Headline,
        false,
        "Wall time of the command.",
        |r| rusage(r, |u| u.wall_ns as f64 / 1e9),
    ),
    row(
        "user",
        "s",
        Lower,
        Headline,
        false,
        "User CPU time of the command and its children.",
        |r| rusage(r, |u| u.user_ns as f64 / 1e9),
    ),
    row(
        "sys",
        "s",
        Lower,
        Headline,
        false,
        "System CPU time of the command and its children.",
        |r| rusage(r, |u| u.sys_ns as f64 / 1e9),
    ),
    row(
        "cpu",
        "%",
        Neither,
        Headline,
        false,
        "(user + sys) / real.",
        |r| rusage(r, |u| u.cpu_percent),
    ),
];

/// Its PSI figure (listed after the madvise ones).
pub const PSI_RUN_ROWS: &[RunRow] = &[row(
    "psi_some_stall",
    "ms",
    Lower,
    After,
    false,
    "PSI memory some: time some task stalled on memory.",
    |r| r.psi_some_stall_us().map(|v| v as f64 / 1e3),
)];
