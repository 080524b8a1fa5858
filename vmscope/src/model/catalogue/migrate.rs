//! Page migration: pages migrated and failed, by reason, the migration
//! histogram, `top`'s row and the run's figure.

use super::*;

const MIGRATED_FAMILY: &str = "vmscope_migrated_pages_total";
const FAILED_FAMILY: &str = "vmscope_migrate_failed_pages_total";

/// The migration reasons, declared once (the `reason` label, in the
/// kernel's `migrate_reason` order from slot 0): the migrated and failed
/// counters of each, and the list of every migrated-pages counter.
macro_rules! by_reason {
    ($($reason:ident = $i:literal, $why:literal;)*) => {
        /// Pages migrated, one counter per reason.
        const MIGRATED_ROWS: &[Counter] = &[$(c(
            concat!("migrated_", stringify!($reason)),
            counter::MIGRATE_SUCCEEDED_BASE + $i,
            probe::MIGRATE,
            "pages",
            concat!("Pages migrated for ", $why, "."),
            Export::In(MIGRATED_FAMILY, stringify!($reason)),
        )),*];

        /// Pages that failed to migrate, one counter per reason.
        const FAILED_ROWS: &[Counter] = &[$(c(
            concat!("migrate_failed_", stringify!($reason)),
            counter::MIGRATE_FAILED_BASE + $i,
            probe::MIGRATE,
            "pages",
            concat!("Pages that failed to migrate for ", $why, "."),
            Export::In(FAILED_FAMILY, stringify!($reason)),
        )),*];

        /// Every migrated-pages counter.
        const MIGRATED: &[&str] = &[$(concat!("migrated_", stringify!($reason))),*];
    };
}

by_reason! {
    compaction = 0, "compaction";
    memory_failure = 1, "memory failure";
    memory_hotplug = 2, "memory hotplug";
    syscall_or_cpuset = 3, "syscall or cpuset";
    mempolicy_mbind = 4, "mempolicy mbind";
    numa_misplaced = 5, "numa misplaced";
    contig_range = 6, "contig range";
    longterm_pin = 7, "longterm pin";
    demotion = 8, "demotion";
    damon = 9, "damon";
    reason_10 = 10, "a reason numbered 10";
    other = 11, "a reason numbered 11 or above";
}

/// Its labelled counter families: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = &[
    (
        MIGRATED_FAMILY,
        "reason",
        "Pages migrated, by why they were moved.",
    ),
    (
        FAILED_FAMILY,
        "reason",
        "Pages that failed to migrate, by why they were to be moved.",
    ),
];

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = concat_slices!([Counter]: MIGRATED_ROWS, FAILED_ROWS);

/// Its latency-histogram families.
pub const HIST_FAMILIES: &[HistFamily] = &[HistFamily {
    prefix: "migrate",
    exact: true,
    metric: "vmscope_migrate_duration_seconds",
    label: "",
    help: "Page migration calls (a batch of pages each).",
}];

/// Its latency histograms with a fixed slot: (slot, name, probe).
pub const HISTS: &[(u32, &str, &str)] = &[(hist::MIGRATE, "migrate", probe::MIGRATE)];

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[rate(
    "migrated pages",
    "/s",
    &[Need::Probe(probe::MIGRATE)],
    RateValue::Counters(MIGRATED),
    "Pages migrated (compaction, NUMA balancing, demotion, ...).",
)];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[row(
    "pgmigrate_success",
    "pages",
    Lower,
    Before,
    true,
    "/proc/vmstat pgmigrate_success.",
    |r| vmstat(r, "pgmigrate_success"),
)];
