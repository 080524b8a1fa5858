//! TLB flushes: one counter per flush reason (the `reason` label), the
//! flushed pages and full flushes, the per-process shootdowns, `top`'s
//! TLB rows and the run's shootdown figure.

use super::*;

/// The family of the by-reason counters.
const TLB: &str = "vmscope_tlb_flushes_total";

/// The first reason's counter slot.
const R: u32 = counter::TLB_REASON_BASE;

/// The named flush reasons, declared once (the `reason` label, in the
/// kernel's `tlb_flush_reason` order from slot `TLB_REASON_BASE`): their
/// counters `tlb_<reason>`, and `top`'s short names for its breakdown.
macro_rules! by_reason {
    ($($reason:ident = $i:literal, $unit:literal, $short:literal, $help:literal;)*) => {
        /// A counter per named reason.
        const NAMED: &[Counter] = &[$(c(
            concat!("tlb_", stringify!($reason)),
            R + $i,
            probe::TLB_FLUSH,
            $unit,
            $help,
            Export::In(TLB, stringify!($reason)),
        )),*];

        /// `top`'s breakdown of the flushes: (short name, counter).
        const BREAKDOWN: &[(&str, &str)] = &[$(($short, concat!("tlb_", stringify!($reason)))),*];

        /// The named reasons' counters.
        const NAMED_KEYS: &[&str] = &[$(concat!("tlb_", stringify!($reason))),*];
    };
}

by_reason! {
    task_switch = 0, "flushes", "switch",
        "Flushes at a context switch (TLB_FLUSH_ON_TASK_SWITCH).";
    remote_shootdown = 1, "flushes", "shootdown",
        "Flushes done on receiving a shootdown IPI (TLB_REMOTE_SHOOTDOWN).";
    local_shootdown = 2, "flushes", "local",
        "Local flushes (TLB_LOCAL_SHOOTDOWN).";
    local_mm_shootdown = 3, "flushes", "local mm",
        "Local flushes for an address space (TLB_LOCAL_MM_SHOOTDOWN).";
    remote_send_ipi = 4, "IPIs", "IPI",
        "Shootdown IPIs sent to other CPUs (TLB_REMOTE_SEND_IPI).";
    remote_wrong_cpu = 5, "flushes", "wrong cpu",
        "Shootdowns that found another address space loaded (TLB_REMOTE_WRONG_CPU).";
}

/// The flushes of a reason this version does not name.
const OTHER: Counter = c(
    "tlb_other_reason",
    R + 6,
    probe::TLB_FLUSH,
    "flushes",
    "Flushes with a reason this version does not name.",
    Export::In(TLB, "other"),
);

/// Every reason's counter.
const TLB_REASONS: &[&str] = concat_slices!([&str]: NAMED_KEYS, &[OTHER.key]);

/// Its labelled counter families: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = &[(TLB, "reason", "TLB flushes by reason.")];

/// Its counters after the reasons.
const PAGES: &[Counter] = &[
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

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = concat_slices!([Counter]: NAMED, &[OTHER], PAGES);

/// The TLB shootdown IPIs a process sent.
pub const PROC_SHOOTDOWNS: ProcField = ProcField {
    key: "tlb_shootdowns",
    probe: probe::TLB_FLUSH,
    unit: "IPIs",
    help: "TLB shootdown IPIs sent per process.",
    metric: Some("vmscope_process_tlb_shootdowns_total"),
    column: Some(Column {
        order: 6,
        title: "SHOOT/s",
        key: "shootdowns",
        divide_by: 1.0,
        always: true,
        width: 8,
        rank: 7,
        cgroup_width: 7,
        cgroup_rank: 11,
    }),
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
        detail: Detail::Breakdown(BREAKDOWN),
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
