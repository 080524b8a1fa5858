//! Page migration: pages migrated and failed, by reason, the migration
//! histogram, `top`'s row and the run's figure.

use super::*;

/// Every migrated-pages counter.
const MIGRATED: &[&str] = &[
    "migrated_compaction",
    "migrated_memory_failure",
    "migrated_memory_hotplug",
    "migrated_syscall_or_cpuset",
    "migrated_mempolicy_mbind",
    "migrated_numa_misplaced",
    "migrated_contig_range",
    "migrated_longterm_pin",
    "migrated_demotion",
    "migrated_damon",
    "migrated_reason_10",
    "migrated_other",
];

/// Its labelled counter families: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = &[
    (
        "vmscope_migrated_pages_total",
        "reason",
        "Pages migrated, by why they were moved.",
    ),
    (
        "vmscope_migrate_failed_pages_total",
        "reason",
        "Pages that failed to migrate, by why they were to be moved.",
    ),
];

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[
    c(
        "migrated_compaction",
        counter::MIGRATE_SUCCEEDED_BASE,
        probe::MIGRATE,
        "pages",
        "Pages migrated for compaction.",
        Export::In("vmscope_migrated_pages_total", "compaction"),
    ),
    c(
        "migrated_memory_failure",
        counter::MIGRATE_SUCCEEDED_BASE + 1,
        probe::MIGRATE,
        "pages",
        "Pages migrated for memory failure.",
        Export::In("vmscope_migrated_pages_total", "memory_failure"),
    ),
    c(
        "migrated_memory_hotplug",
        counter::MIGRATE_SUCCEEDED_BASE + 2,
        probe::MIGRATE,
        "pages",
        "Pages migrated for memory hotplug.",
        Export::In("vmscope_migrated_pages_total", "memory_hotplug"),
    ),
    c(
        "migrated_syscall_or_cpuset",
        counter::MIGRATE_SUCCEEDED_BASE + 3,
        probe::MIGRATE,
        "pages",
        "Pages migrated for syscall or cpuset.",
        Export::In("vmscope_migrated_pages_total", "syscall_or_cpuset"),
    ),
    c(
        "migrated_mempolicy_mbind",
        counter::MIGRATE_SUCCEEDED_BASE + 4,
        probe::MIGRATE,
        "pages",
        "Pages migrated for mempolicy mbind.",
        Export::In("vmscope_migrated_pages_total", "mempolicy_mbind"),
    ),
    c(
        "migrated_numa_misplaced",
        counter::MIGRATE_SUCCEEDED_BASE + 5,
        probe::MIGRATE,
        "pages",
        "Pages migrated for numa misplaced.",
        Export::In("vmscope_migrated_pages_total", "numa_misplaced"),
    ),
    c(
        "migrated_contig_range",
        counter::MIGRATE_SUCCEEDED_BASE + 6,
        probe::MIGRATE,
        "pages",
        "Pages migrated for contig range.",
        Export::In("vmscope_migrated_pages_total", "contig_range"),
    ),
    c(
        "migrated_longterm_pin",
        counter::MIGRATE_SUCCEEDED_BASE + 7,
        probe::MIGRATE,
        "pages",
        "Pages migrated for longterm pin.",
        Export::In("vmscope_migrated_pages_total", "longterm_pin"),
    ),
    c(
        "migrated_demotion",
        counter::MIGRATE_SUCCEEDED_BASE + 8,
        probe::MIGRATE,
        "pages",
        "Pages migrated for demotion.",
        Export::In("vmscope_migrated_pages_total", "demotion"),
    ),
    c(
        "migrated_damon",
        counter::MIGRATE_SUCCEEDED_BASE + 9,
        probe::MIGRATE,
        "pages",
        "Pages migrated for damon.",
        Export::In("vmscope_migrated_pages_total", "damon"),
    ),
    c(
        "migrated_reason_10",
        counter::MIGRATE_SUCCEEDED_BASE + 10,
        probe::MIGRATE,
        "pages",
        "Pages migrated for a reason numbered 10.",
        Export::In("vmscope_migrated_pages_total", "reason_10"),
    ),
    c(
        "migrated_other",
        counter::MIGRATE_SUCCEEDED_BASE + 11,
        probe::MIGRATE,
        "pages",
        "Pages migrated for a reason numbered 11 or above.",
        Export::In("vmscope_migrated_pages_total", "other"),
    ),
    c(
        "migrate_failed_compaction",
        counter::MIGRATE_FAILED_BASE,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for compaction.",
        Export::In("vmscope_migrate_failed_pages_total", "compaction"),
    ),
    c(
        "migrate_failed_memory_failure",
        counter::MIGRATE_FAILED_BASE + 1,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for memory failure.",
        Export::In("vmscope_migrate_failed_pages_total", "memory_failure"),
    ),
    c(
        "migrate_failed_memory_hotplug",
        counter::MIGRATE_FAILED_BASE + 2,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for memory hotplug.",
        Export::In("vmscope_migrate_failed_pages_total", "memory_hotplug"),
    ),
    c(
        "migrate_failed_syscall_or_cpuset",
        counter::MIGRATE_FAILED_BASE + 3,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for syscall or cpuset.",
        Export::In("vmscope_migrate_failed_pages_total", "syscall_or_cpuset"),
    ),
    c(
        "migrate_failed_mempolicy_mbind",
        counter::MIGRATE_FAILED_BASE + 4,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for mempolicy mbind.",
        Export::In("vmscope_migrate_failed_pages_total", "mempolicy_mbind"),
    ),
    c(
        "migrate_failed_numa_misplaced",
        counter::MIGRATE_FAILED_BASE + 5,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for numa misplaced.",
        Export::In("vmscope_migrate_failed_pages_total", "numa_misplaced"),
    ),
    c(
        "migrate_failed_contig_range",
        counter::MIGRATE_FAILED_BASE + 6,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for contig range.",
        Export::In("vmscope_migrate_failed_pages_total", "contig_range"),
    ),
    c(
        "migrate_failed_longterm_pin",
        counter::MIGRATE_FAILED_BASE + 7,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for longterm pin.",
        Export::In("vmscope_migrate_failed_pages_total", "longterm_pin"),
    ),
    c(
        "migrate_failed_demotion",
        counter::MIGRATE_FAILED_BASE + 8,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for demotion.",
        Export::In("vmscope_migrate_failed_pages_total", "demotion"),
    ),
    c(
        "migrate_failed_damon",
        counter::MIGRATE_FAILED_BASE + 9,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for damon.",
        Export::In("vmscope_migrate_failed_pages_total", "damon"),
    ),
    c(
        "migrate_failed_reason_10",
        counter::MIGRATE_FAILED_BASE + 10,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for a reason numbered 10.",
        Export::In("vmscope_migrate_failed_pages_total", "reason_10"),
    ),
    c(
        "migrate_failed_other",
        counter::MIGRATE_FAILED_BASE + 11,
        probe::MIGRATE,
        "pages",
        "Pages that failed to migrate for a reason numbered 11 or above.",
        Export::In("vmscope_migrate_failed_pages_total", "other"),
    ),
];

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
