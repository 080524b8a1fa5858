//! Swap: the per-mm attributed swap counters (summed by the collector),
//! the per-process swap figures, `top`'s swap rows and the run's swap
//! figures.

use super::*;

/// One direction of the attributed swap family: a sum the collector
/// derives from the per-mm swap map (no counter slot).
const fn mm(key: &'static str, help: &'static str, direction: &'static str) -> Counter {
    Counter {
        key,
        slot: None,
        probe: probe::SWAP,
        unit: "pages",
        help,
        export: Export::In("vmscope_swap_attributed_pages_total", direction),
    }
}

/// Its labelled counter families: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = &[(
    "vmscope_swap_attributed_pages_total",
    "direction",
    "Swap pages per address space, summed: out, in, freed, copied at fork (no I/O), \
         and out with no known owner.",
)];

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[
    c(
        "swap_unsized_changes",
        counter::SWAP_UNSIZED,
        probe::SWAP,
        "changes",
        "Swap-entry changes of an address space seen first, which cannot be sized.",
        Export::Plain(
            "vmscope_swap_unsized_changes_total",
            "Swap-entry changes of an address space seen first, which cannot be sized.",
        ),
    ),
    c(
        "swap_summed_changes",
        counter::SWAP_SUMMED,
        probe::SWAP,
        "changes",
        SUMMED_HELP,
        Export::Plain("vmscope_swap_summed_changes_total", SUMMED_HELP),
    ),
];

const SUMMED_HELP: &str = "Swap-entry changes the BTF swap probe sized by summing every CPU's part \
     of the counter (the first on a CPU, or after the shared count moved); the others read one \
     part.";

/// Its per-mm attributed swap counters, summed by the collector (listed last).
pub const ATTRIBUTED_COUNTERS: &[Counter] = &[
    mm(
        "swap_out_pages",
        "Pages swapped out, charged to the address space they belonged to.",
        "out",
    ),
    mm(
        "swap_in_pages",
        "Pages an address space faulted back in from swap.",
        "in",
    ),
    mm(
        "swap_freed_pages",
        "Swap entries dropped without a swap-in: unmap, a freeing madvise, exit, swapoff.",
        "freed",
    ),
    mm(
        "swap_copied_pages",
        "Swap entries copied into children at fork (no I/O, not swap-out).",
        "copied",
    ),
    mm(
        "swap_out_unowned_pages",
        "Pages swapped out whose address space is not known.",
        "out_unowned",
    ),
];

/// The pages of a process swapped out.
pub const PROC_OUT: ProcField = ProcField {
    key: "swap_out_pages",
    probe: probe::SWAP,
    unit: "pages",
    help: "Pages of the process swapped out, whoever reclaimed them.",
    metric: Some("vmscope_process_swap_out_pages_total"),
    column: Some(Column {
        order: 4,
        title: "SWOUT/s",
        key: "swap",
        divide_by: 1.0,
        always: false,
        width: 8,
        rank: 5,
        cgroup_width: 7,
        cgroup_rank: 3,
    }),
    cgroup: cgroup(
        "vmscope_cgroup_swap_out_pages_total",
        "Pages of the cgroup's processes swapped out, whoever reclaimed them.",
    ),
    get: |p| p.swap_out_pages,
};

/// The pages a process swapped in.
pub const PROC_IN: ProcField = ProcField {
    key: "swap_in_pages",
    probe: probe::SWAP,
    unit: "pages",
    help: "Pages the process faulted back in from swap.",
    metric: Some("vmscope_process_swap_in_pages_total"),
    column: Some(Column {
        order: 3,
        title: "SWIN/s",
        key: "swap",
        divide_by: 1.0,
        always: false,
        width: 8,
        rank: 4,
        cgroup_width: 7,
        cgroup_rank: 8,
    }),
    cgroup: cgroup(
        "vmscope_cgroup_swap_in_pages_total",
        "Pages the cgroup's processes faulted back in from swap.",
    ),
    get: |p| p.swap_in_pages,
};

/// Its per-process figures.
pub const PROC_FIELDS: &[ProcField] = &[PROC_OUT, PROC_IN];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[
    rate(
        "swap-in",
        "pages/s",
        &[],
        RateValue::Vmstat("pswpin"),
        "/proc/vmstat pswpin.",
    ),
    rate(
        "swap-out",
        "pages/s",
        &[],
        RateValue::Vmstat("pswpout"),
        "/proc/vmstat pswpout.",
    ),
    rate(
        "zswap store",
        "pages/s",
        &[],
        RateValue::Vmstat("zswpout"),
        "/proc/vmstat zswpout: swapped out into the compressed pool in RAM, not to the device.",
    ),
    rate(
        "zswap load",
        "pages/s",
        &[],
        RateValue::Vmstat("zswpin"),
        "/proc/vmstat zswpin: swapped in from the compressed pool.",
    ),
];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "swap_out_attributed",
        "pages",
        Lower,
        Before,
        true,
        "Pages of the scope swapped out.",
        |r| vm_counter(r, "swap_out_pages"),
    ),
    row(
        "swap_in_attributed",
        "pages",
        Lower,
        Before,
        true,
        "Pages of the scope swapped in.",
        |r| vm_counter(r, "swap_in_pages"),
    ),
    row(
        "pswpout",
        "pages",
        Lower,
        Before,
        true,
        "/proc/vmstat pswpout.",
        |r| vmstat(r, "pswpout"),
    ),
    row(
        "pswpin",
        "pages",
        Lower,
        Before,
        true,
        "/proc/vmstat pswpin.",
        |r| vmstat(r, "pswpin"),
    ),
    row(
        "zswpout",
        "pages",
        Lower,
        Before,
        true,
        "/proc/vmstat zswpout: swapped out into zswap's compressed pool.",
        |r| vmstat(r, "zswpout"),
    ),
    row(
        "zswpin",
        "pages",
        Lower,
        Before,
        true,
        "/proc/vmstat zswpin: swapped in from zswap's pool.",
        |r| vmstat(r, "zswpin"),
    ),
    row(
        "zswpwb",
        "pages",
        Lower,
        Before,
        true,
        "/proc/vmstat zswpwb: written back from zswap's pool to the device.",
        |r| vmstat(r, "zswpwb"),
    ),
];
