//! The mmap_lock (opt-in: `--mmap-lock`): failed acquisitions, the wait
//! and write-hold histograms, the per-process wait, `top`'s rows and the
//! run's figures.

use super::*;

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[c(
    "mmap_lock_failed",
    counter::MMAP_LOCK_FAILED,
    probe::MMAP_LOCK,
    "acquisitions",
    "mmap_lock acquisitions that failed: trylocks that found it taken, killable waits interrupted.",
    Export::Plain(
        "vmscope_mmap_lock_failed_total",
        "mmap_lock acquisitions that failed: trylocks that found it taken, killable waits interrupted.",
    ),
)];

/// Its latency-histogram families.
pub const HIST_FAMILIES: &[HistFamily] = &[
    HistFamily {
        prefix: "mmap_lock_wait_",
        exact: false,
        metric: "vmscope_mmap_lock_wait_duration_seconds",
        label: "mode",
        help: "mmap_lock acquisitions: the wait from asking for the lock to getting it, by read or write.",
    },
    HistFamily {
        prefix: "mmap_lock_write_hold",
        exact: true,
        metric: "vmscope_mmap_lock_write_hold_duration_seconds",
        label: "",
        help: "How long the mmap_lock was held for writing (to its release or downgrade).",
    },
];

/// Its latency histograms with a fixed slot: (slot, name, probe).
pub const HISTS: &[(u32, &str, &str)] = &[
    (
        hist::MMAP_LOCK_WAIT_READ,
        "mmap_lock_wait_read",
        probe::MMAP_LOCK,
    ),
    (
        hist::MMAP_LOCK_WAIT_WRITE,
        "mmap_lock_wait_write",
        probe::MMAP_LOCK,
    ),
    (
        hist::MMAP_LOCK_WRITE_HOLD,
        "mmap_lock_write_hold",
        probe::MMAP_LOCK,
    ),
];

/// The time a process's threads waited for its mmap_lock.
pub const PROC_WAIT: ProcField = ProcField {
    key: "mmap_lock_wait",
    probe: probe::MMAP_LOCK,
    unit: "ns",
    help: "Time the process's threads waited for its mmap_lock, read and write.",
    metric: Some("vmscope_process_mmap_lock_wait_seconds_total"),
    column: None,
    cgroup: cgroup(
        "vmscope_cgroup_mmap_lock_wait_seconds_total",
        "Time the cgroup's threads waited for their mmap_lock (with --mmap-lock).",
    ),
    get: |p| p.mmap_read_wait_ns + p.mmap_write_wait_ns,
};

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[PROC_WAIT];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[
    rate(
        "mmap_lock read wait",
        "ms/s",
        &[Need::Probe(probe::MMAP_LOCK)],
        RateValue::HistMs("mmap_lock_wait_read"),
        "Time threads waited for an mmap_lock to read (opt-in: --mmap-lock).",
    ),
    rate(
        "mmap_lock write wait",
        "ms/s",
        &[Need::Probe(probe::MMAP_LOCK)],
        RateValue::HistMs("mmap_lock_wait_write"),
        "Time threads waited for an mmap_lock to write (opt-in: --mmap-lock).",
    ),
];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "mmap_lock_wait",
        "ms",
        Lower,
        Before,
        true,
        "Time threads waited for the mmap_lock, read and write (with --mmap-lock).",
        |r| hist_sum_ms(r, &["mmap_lock_wait_read", "mmap_lock_wait_write"]),
    ),
    row(
        "mmap_lock_failed",
        "failures",
        Lower,
        Before,
        false,
        "Failed mmap_lock trylocks and interrupted killable waits (with --mmap-lock).",
        |r| vm_counter(r, "mmap_lock_failed"),
    ),
];
