//! TLB flushes: one counter per flush reason (the `reason` label), the
//! flushed pages and full flushes, the per-process shootdowns, `top`'s
//! TLB rows and the run's shootdown figure.

use super::*;

const TLB: &str = "vmscope_tlb_flushes_total";

const R: u32 = counter::TLB_REASON_BASE;

const TLB_REASONS: &[&str] = &[
    "tlb_task_switch",
    "tlb_remote_shootdown",
    "tlb_local_shootdown",
    "tlb_local_mm_shootdown",
    "tlb_remote_send_ipi",
    "tlb_remote_wrong_cpu",
    "tlb_other_reason",
];

/// Its labelled counter families: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = &[(
    "vmscope_tlb_flushes_total",
    "reason",
    "TLB flushes by reason.",
)];

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[
    c(
        "tlb_task_switch",
        R,
        probe::TLB_FLUSH,
        "flushes",
        "Flushes at a context switch (TLB_FLUSH_ON_TASK_SWITCH).",
        Export::In(TLB, "task_switch"),
    ),
    c(
        "tlb_remote_shootdown",
        R + 1,
        probe::TLB_FLUSH,
        "flushes",
        "Flushes done on receiving a shootdown IPI (TLB_REMOTE_SHOOTDOWN).",
        Export::In(TLB, "remote_shootdown"),
    ),
    c(
        "tlb_local_shootdown",
        R + 2,
        probe::TLB_FLUSH,
        "flushes",
        "Local flushes (TLB_LOCAL_SHOOTDOWN).",
        Export::In(TLB, "local_shootdown"),
    ),
    c(
        "tlb_local_mm_shootdown",
        R + 3,
        probe::TLB_FLUSH,
        "flushes",
        "Local flushes for an address space (TLB_LOCAL_MM_SHOOTDOWN).",
        Export::In(TLB, "local_mm_shootdown"),
    ),
    c(
        "tlb_remote_send_ipi",
        R + 4,
        probe::TLB_FLUSH,
        "IPIs",
        "Shootdown IPIs sent to other CPUs (TLB_REMOTE_SEND_IPI).",
        Export::In(TLB, "remote_send_ipi"),
    ),
    c(
        "tlb_remote_wrong_cpu",
        R + 5,
        probe::TLB_FLUSH,
        "flushes",
        "Shootdowns that found another address space loaded (TLB_REMOTE_WRONG_CPU).",
        Export::In(TLB, "remote_wrong_cpu"),
    ),
    c(
        "tlb_other_reason",
        R + 6,
        probe::TLB_FLUSH,
        "flushes",
        "Flushes with a reason this version does not name.",
        Export::In(TLB, "other"),
    ),
    c(
        "tlb_pages",
        counter::TLB_PAGES,
        probe::TLB_FLUSH,
        "pages",
        "Pages flushed by ranged TLB flushes.",
        Export::Plain(
            "vmscope_tlb_flushed_pages_total",
            "Pages flushed by ranged TLB flushes.",
        ),
    ),
    c(
        "tlb_full_flushes",
        counter::TLB_FULL,
        probe::TLB_FLUSH,
        "flushes",
        "Full TLB flushes.",
        Export::Plain("vmscope_tlb_full_flushes_total", "Full TLB flushes."),
    ),
];

/// The TLB shootdown IPIs a process sent.
pub const PROC_SHOOTDOWNS: ProcField = ProcField {
    key: "tlb_shootdowns",
    probe: probe::TLB_FLUSH,
    unit: "IPIs",
    help: "TLB shootdown IPIs sent per process.",
    metric: Some("vmscope_process_tlb_shootdowns_total"),
    column: Some("shootdowns"),
    cgroup: cgroup(
        "vmscope_cgroup_tlb_shootdowns_total",
        "TLB shootdown IPIs the cgroup's processes sent.",
    ),
    get: |p| p.tlb_shootdowns,
};

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[PROC_SHOOTDOWNS];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[
    Rate {
        label: "TLB flushes",
        unit: "/s",
        needs: &[Need::Probe(probe::TLB_FLUSH)],
        value: RateValue::Counters(TLB_REASONS),
        detail: Detail::Breakdown(&[
            ("switch", "tlb_task_switch"),
            ("shootdown", "tlb_remote_shootdown"),
            ("local", "tlb_local_shootdown"),
            ("local mm", "tlb_local_mm_shootdown"),
            ("IPI", "tlb_remote_send_ipi"),
            ("wrong cpu", "tlb_remote_wrong_cpu"),
        ]),
        help: "TLB flushes of every reason.",
    },
    rate(
        "TLB shootdown IPIs",
        "/s",
        &[Need::Probe(probe::TLB_FLUSH)],
        RateValue::Counters(&["tlb_remote_send_ipi"]),
        "TLB shootdown IPIs sent.",
    ),
];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[row(
    "tlb_shootdown_ipis",
    "IPIs",
    Lower,
    After,
    true,
    "TLB shootdown IPIs sent.",
    |r| vm_counter(r, "tlb_remote_send_ipi"),
)];
