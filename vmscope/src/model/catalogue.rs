//! Every metric vmscope has, one row each: where it comes from (counter
//! slot, histogram, vmstat key, per-process field) and which probe feeds
//! it, its unit and which direction is better, and how each view shows it
//! (JSON key, Prometheus family and labels, `top` row or column, bench and
//! compare row). The collector's names, the exporter, `top`'s rows and
//! "unavailable" lists, bench/compare's figures and `docs/metrics.md` are
//! all read from these tables. Pure: no eBPF, no I/O.
//!
//! Adding a metric: a probe (in `vmscope-ebpf`, attached by the loader)
//! and a row here. The row's availability follows its probe everywhere.

use vmscope_common::{counter, hist};

use crate::{
    model::{metrics::Better, process::ProcSample, recording::Recording},
    procstat,
};

/// Probe names, as the loader, `doctor` and `vmscope_probe_available` give
/// them. A metric is available when its probe is attached.
pub mod probe {
    /// Needs no probe (system files, or figures every fault source gives).
    pub const ALWAYS: &str = "always";
    pub const TLB_FLUSH: &str = "tlb:tlb_flush";
    pub const LRU_INACTIVE: &str = "vmscan:mm_vmscan_lru_shrink_inactive";
    pub const LRU_ACTIVE: &str = "vmscan:mm_vmscan_lru_shrink_active";
    pub const WRITE_FOLIO: &str = "vmscan:mm_vmscan_write_folio";
    pub const DIRECT_RECLAIM: &str = "vmscan:mm_vmscan_direct_reclaim_end";
    pub const MEMCG_RECLAIM: &str = "vmscan:mm_vmscan_memcg_reclaim_end";
    pub const MEMCG_SOFTLIMIT_RECLAIM: &str = "vmscan:mm_vmscan_memcg_softlimit_reclaim_end";
    pub const NODE_RECLAIM: &str = "vmscan:mm_vmscan_node_reclaim_end";
    pub const KSWAPD_SLEEP: &str = "vmscan:mm_vmscan_kswapd_sleep";
    pub const SHRINK_SLAB: &str = "vmscan:mm_shrink_slab_end";
    pub const MADVISE: &str = "syscalls:sys_exit_madvise";
    pub const PROCESS_MADVISE: &str = "syscalls:sys_exit_process_madvise";
    pub const MUNMAP: &str = "syscalls:sys_exit_munmap";
    pub const MPROTECT: &str = "syscalls:sys_exit_mprotect";
    /// Per-mm swap entries (`MM_SWAPENTS`), for swap attribution.
    pub const SWAP: &str = "kmem:rss_stat";
    pub const MAJOR_FAULTS: &str = "perf:major-faults";
    pub const PROCESS_EXIT: &str = "sched:sched_process_exit";
    /// Reads each task's own fault books (`min_flt + maj_flt`).
    pub const ACCOUNT: &str = "sched:sched_switch";
    pub const FAULT_TIMING: &str = "fentry:handle_mm_fault";
    /// The rmap stack sampler.
    pub const RMAP_SAMPLER: &str = "perf:cpu-clock";
    /// rmap direct timing (fentry/fexit on the rmap functions).
    pub const RMAP_DIRECT: &str = "fentry:rmap";
    pub const OOM_VICTIM: &str = "oom:mark_victim";
    /// Dirty throttling's pauses.
    pub const DIRTY_THROTTLE: &str = "writeback:balance_dirty_pages";
    /// Direct compaction (counted at `try_to_compact_pages`).
    pub const COMPACT_DIRECT: &str = "compaction:mm_compaction_try_to_compact_pages";
    /// Compaction runs and their outcome.
    pub const COMPACT_END: &str = "compaction:mm_compaction_end";
    pub const COMPACT_DEFERRED: &str = "compaction:mm_compaction_deferred";
    /// A zone's deferral reset: after an allocation got its page.
    pub const COMPACT_DEFER_RESET: &str = "compaction:mm_compaction_defer_reset";
    pub const KCOMPACTD_SLEEP: &str = "compaction:mm_compaction_kcompactd_sleep";
    pub const KCOMPACTD_WAKE: &str = "compaction:mm_compaction_kcompactd_wake";
    pub const MIGRATE: &str = "migrate:mm_migrate_pages";
    pub const MIGRATE_START: &str = "migrate:mm_migrate_pages_start";
    pub const THP_COLLAPSE: &str = "huge_memory:mm_collapse_huge_page";
    pub const KHUGEPAGED_SCAN: &str = "huge_memory:mm_khugepaged_scan_pmd";
    /// mmap_lock waits, failures and write holds (opt-in: `--mmap-lock`).
    pub const MMAP_LOCK: &str = "mmap_lock:mmap_lock_acquire_returned";
    /// Keeps processes' cgroup keys fresh after a task moves.
    pub const CGROUP_ATTACH: &str = "cgroup:cgroup_attach_task";
    /// Per-cgroup attribution itself (how keys are read; not a hook).
    pub const CGROUPS: &str = "cgroup attribution";
}

/// How a system-wide counter is exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Export {
    /// Not exported (bookkeeping only).
    No,
    /// Its own family: (metric, help).
    Plain(&'static str, &'static str),
    /// One series of a labelled family: (family metric, label value).
    In(&'static str, &'static str),
}

/// A named system-wide counter.
#[derive(Clone, Copy, Debug)]
pub struct Counter {
    /// Its name in samples, recordings (`totals.vm.counters`) and JSON.
    pub key: &'static str,
    /// The eBPF counter slot; `None` for the sums the collector derives
    /// (the per-mm swap map).
    pub slot: Option<u32>,
    pub probe: &'static str,
    pub unit: &'static str,
    pub help: &'static str,
    pub export: Export,
}

/// A labelled counter family: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = &[
    (
        "vmscope_lru_pages_total",
        "event",
        "LRU pages by reclaim event.",
    ),
    (
        "vmscope_reclaim_writeback_pages_total",
        "type",
        "Pages written back by reclaim.",
    ),
    (
        "vmscope_swap_attributed_pages_total",
        "direction",
        "Swap pages per address space, summed: out, in, freed, copied at fork (no I/O), \
         and out with no known owner.",
    ),
    (
        "vmscope_tlb_flushes_total",
        "reason",
        "TLB flushes by reason.",
    ),
    (
        "vmscope_compaction_runs_total",
        "context",
        "Compaction runs (one zone each): inside direct compaction, or in the background.",
    ),
    (
        "vmscope_direct_compactions_total",
        "order",
        "Direct compactions (allocations that compacted memory themselves), by the order asked for.",
    ),
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

const fn c(
    key: &'static str,
    slot: u32,
    probe: &'static str,
    unit: &'static str,
    help: &'static str,
    export: Export,
) -> Counter {
    Counter {
        key,
        slot: Some(slot),
        probe,
        unit,
        help,
        export,
    }
}

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

const TLB: &str = "vmscope_tlb_flushes_total";
const COMPACT_RUNS: &str = "vmscope_compaction_runs_total";
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
const LRU: &str = "vmscope_lru_pages_total";
const WB: &str = "vmscope_reclaim_writeback_pages_total";
const R: u32 = counter::TLB_REASON_BASE;

/// The system-wide counters (scope-filtered when a recording is scoped).
pub const COUNTERS: &[Counter] = &[
    c(
        "major_faults",
        counter::MAJOR_FAULTS,
        probe::MAJOR_FAULTS,
        "faults",
        "Major page faults.",
        Export::Plain("vmscope_major_faults_total", "Major page faults."),
    ),
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
    c(
        "lru_scanned_pages",
        counter::LRU_SCANNED,
        probe::LRU_INACTIVE,
        "pages",
        "Inactive-list pages scanned by reclaim.",
        Export::In(LRU, "scanned"),
    ),
    c(
        "lru_reclaimed_pages",
        counter::LRU_RECLAIMED,
        probe::LRU_INACTIVE,
        "pages",
        "Inactive-list pages reclaimed.",
        Export::In(LRU, "reclaimed"),
    ),
    c(
        "lru_dirty_pages",
        counter::LRU_DIRTY,
        probe::LRU_INACTIVE,
        "pages",
        "Scanned pages found dirty.",
        Export::In(LRU, "dirty"),
    ),
    c(
        "lru_writeback_pages",
        counter::LRU_WRITEBACK,
        probe::LRU_INACTIVE,
        "pages",
        "Scanned pages found under write-back.",
        Export::In(LRU, "writeback"),
    ),
    c(
        "lru_immediate_pages",
        counter::LRU_IMMEDIATE,
        probe::LRU_INACTIVE,
        "pages",
        "Scanned pages under write-back marked for immediate reclaim.",
        Export::In(LRU, "immediate"),
    ),
    c(
        "lru_unmap_fail_pages",
        counter::LRU_UNMAP_FAIL,
        probe::LRU_INACTIVE,
        "pages",
        "Scanned pages reclaim failed to unmap.",
        Export::In(LRU, "unmap_fail"),
    ),
    c(
        "lru_active_taken_pages",
        counter::LRU_ACTIVE_TAKEN,
        probe::LRU_ACTIVE,
        "pages",
        "Active-list pages taken for aging.",
        Export::In(LRU, "active_taken"),
    ),
    c(
        "lru_active_deactivated_pages",
        counter::LRU_ACTIVE_DEACTIVATED,
        probe::LRU_ACTIVE,
        "pages",
        "Active-list pages moved to the inactive list.",
        Export::In(LRU, "active_deactivated"),
    ),
    c(
        "reclaim_write_anon_pages",
        counter::WRITE_ANON,
        probe::WRITE_FOLIO,
        "pages",
        "Anonymous pages reclaim wrote out (to swap).",
        Export::In(WB, "anon"),
    ),
    c(
        "reclaim_write_file_pages",
        counter::WRITE_FILE,
        probe::WRITE_FOLIO,
        "pages",
        "File pages reclaim wrote back.",
        Export::In(WB, "file"),
    ),
    c(
        "oom_kills",
        counter::OOM_KILLS,
        probe::OOM_VICTIM,
        "victims",
        "OOM victims the kernel marked, system-wide (memory-cgroup OOMs included).",
        Export::Plain("vmscope_oom_kills_total", "OOM victims the kernel marked."),
    ),
    c(
        "process_madvise_errors",
        counter::PROCESS_MADVISE_ERRORS,
        probe::PROCESS_MADVISE,
        "calls",
        "process_madvise calls that failed.",
        Export::Plain(
            "vmscope_process_madvise_errors_total",
            "process_madvise calls that failed.",
        ),
    ),
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
        "switch_in_unseen",
        counter::SWITCH_IN_UNSEEN,
        probe::ACCOUNT,
        "switches",
        "Slices whose switch-in was not seen (untraced, or before attach), caught up from the thread's fault books.",
        Export::Plain(
            "vmscope_switch_in_unseen_total",
            "Slices whose switch-in was not seen (untraced, or before attach), caught up from the thread's fault books.",
        ),
    ),
    c(
        "compact_direct",
        counter::COMPACT_DIRECT,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions: allocations that compacted memory themselves (vmstat compact_stall).",
        Export::Plain(
            "vmscope_direct_compaction_stalls_total",
            "Direct compactions: allocations that compacted memory themselves (vmstat compact_stall).",
        ),
    ),
    c(
        "compact_direct_success",
        counter::COMPACT_DIRECT_SUCCESS,
        probe::COMPACT_DEFER_RESET,
        "compactions",
        "Direct compactions after which the allocation got its page (vmstat compact_success).",
        Export::Plain(
            "vmscope_direct_compaction_successes_total",
            "Direct compactions after which the allocation got its page (vmstat compact_success).",
        ),
    ),
    c(
        "compact_runs_direct_success",
        counter::COMPACT_RUNS_DIRECT_SUCCESS,
        probe::COMPACT_END,
        "runs",
        "Compaction runs inside direct compaction that ended in success (a suitable free block made).",
        Export::Plain(
            "vmscope_compaction_runs_direct_succeeded_total",
            "Compaction runs inside direct compaction that ended in success (a suitable free block made).",
        ),
    ),
    c(
        "compact_runs_direct",
        counter::COMPACT_RUNS_DIRECT,
        probe::COMPACT_END,
        "runs",
        "Compaction runs (one zone each) inside direct compaction.",
        Export::In(COMPACT_RUNS, "direct"),
    ),
    c(
        "compact_runs_background",
        counter::COMPACT_RUNS_BACKGROUND,
        probe::COMPACT_END,
        "runs",
        "Compaction runs outside direct compaction: kcompactd, proactive, compact_memory.",
        Export::In(COMPACT_RUNS, "background"),
    ),
    c(
        "compact_deferred",
        counter::COMPACT_DEFERRED,
        probe::COMPACT_DEFERRED,
        "zones",
        "Zones skipped because compaction there had failed recently (deferred).",
        Export::Plain(
            "vmscope_compaction_deferred_total",
            "Zones skipped because compaction there had failed recently (deferred).",
        ),
    ),
    c(
        "compact_order_0",
        counter::COMPACT_ORDER_BASE,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 0.",
        Export::In("vmscope_direct_compactions_total", "0"),
    ),
    c(
        "compact_order_1",
        counter::COMPACT_ORDER_BASE + 1,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 1.",
        Export::In("vmscope_direct_compactions_total", "1"),
    ),
    c(
        "compact_order_2",
        counter::COMPACT_ORDER_BASE + 2,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 2.",
        Export::In("vmscope_direct_compactions_total", "2"),
    ),
    c(
        "compact_order_3",
        counter::COMPACT_ORDER_BASE + 3,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 3.",
        Export::In("vmscope_direct_compactions_total", "3"),
    ),
    c(
        "compact_order_4",
        counter::COMPACT_ORDER_BASE + 4,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 4.",
        Export::In("vmscope_direct_compactions_total", "4"),
    ),
    c(
        "compact_order_5",
        counter::COMPACT_ORDER_BASE + 5,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 5.",
        Export::In("vmscope_direct_compactions_total", "5"),
    ),
    c(
        "compact_order_6",
        counter::COMPACT_ORDER_BASE + 6,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 6.",
        Export::In("vmscope_direct_compactions_total", "6"),
    ),
    c(
        "compact_order_7",
        counter::COMPACT_ORDER_BASE + 7,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 7.",
        Export::In("vmscope_direct_compactions_total", "7"),
    ),
    c(
        "compact_order_8",
        counter::COMPACT_ORDER_BASE + 8,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 8.",
        Export::In("vmscope_direct_compactions_total", "8"),
    ),
    c(
        "compact_order_9",
        counter::COMPACT_ORDER_BASE + 9,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 9.",
        Export::In("vmscope_direct_compactions_total", "9"),
    ),
    c(
        "compact_order_10_plus",
        counter::COMPACT_ORDER_BASE + 10,
        probe::COMPACT_DIRECT,
        "compactions",
        "Direct compactions for an allocation of order 10+.",
        Export::In("vmscope_direct_compactions_total", "10+"),
    ),
    c(
        "kcompactd_wakes",
        counter::KCOMPACTD_WAKES,
        probe::KCOMPACTD_WAKE,
        "wakes",
        "Times kcompactd woke to compact.",
        Export::Plain(
            "vmscope_kcompactd_wakes_total",
            "Times kcompactd woke to compact.",
        ),
    ),
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
    c(
        "thp_collapses",
        counter::THP_COLLAPSES,
        probe::THP_COLLAPSE,
        "collapses",
        "khugepaged collapses tried (small pages into a huge page).",
        Export::Plain(
            "vmscope_thp_collapses_total",
            "khugepaged collapses tried (small pages into a huge page).",
        ),
    ),
    c(
        "thp_collapses_succeeded",
        counter::THP_COLLAPSE_SUCCEEDED,
        probe::THP_COLLAPSE,
        "collapses",
        "khugepaged collapses that succeeded.",
        Export::Plain(
            "vmscope_thp_collapses_succeeded_total",
            "khugepaged collapses that succeeded.",
        ),
    ),
    c(
        "khugepaged_scans",
        counter::KHUGEPAGED_SCANS,
        probe::KHUGEPAGED_SCAN,
        "page tables",
        "Page tables scanned for a collapse into a huge page (khugepaged, MADV_COLLAPSE).",
        Export::Plain(
            "vmscope_khugepaged_scans_total",
            "Page tables scanned for a collapse into a huge page (khugepaged, MADV_COLLAPSE).",
        ),
    ),
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
    c(
        "mmap_lock_failed",
        counter::MMAP_LOCK_FAILED,
        probe::MMAP_LOCK,
        "acquisitions",
        "mmap_lock acquisitions that failed: trylocks that found it taken, killable waits interrupted.",
        Export::Plain(
            "vmscope_mmap_lock_failed_total",
            "mmap_lock acquisitions that failed: trylocks that found it taken, killable waits interrupted.",
        ),
    ),
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

/// The counter named `key`.
pub fn counter(key: &str) -> Option<&'static Counter> {
    COUNTERS.iter().find(|c| c.key == key)
}

/// The probe that feeds a counter (for availability); an unknown name
/// needs none.
pub fn counter_probe(key: &str) -> &'static str {
    counter(key).map_or(probe::ALWAYS, |c| c.probe)
}

/// A latency-histogram family, and the histograms that belong to it.
#[derive(Clone, Copy, Debug)]
pub struct HistFamily {
    /// Which histogram names: a prefix (the rest is the label value), an
    /// exact name (no label), or `""` for every other name (the name is
    /// the label value).
    pub prefix: &'static str,
    pub exact: bool,
    pub metric: &'static str,
    pub label: &'static str,
    pub help: &'static str,
}

pub const HIST_FAMILIES: &[HistFamily] = &[
    HistFamily {
        prefix: "fault_",
        exact: false,
        metric: "vmscope_page_fault_duration_seconds",
        label: "kind",
        help: "Page-fault handling time (handle_mm_fault), by minor/major and anon/file.",
    },
    HistFamily {
        prefix: "reclaim_",
        exact: false,
        metric: "vmscope_reclaim_duration_seconds",
        label: "kind",
        help: "Time in reclaim, from its begin/end tracepoints, by kind.",
    },
    HistFamily {
        prefix: "madvise_",
        exact: false,
        metric: "vmscope_madvise_duration_seconds",
        label: "behavior",
        help: "madvise latency by behaviour.",
    },
    HistFamily {
        prefix: "kswapd_active",
        exact: true,
        metric: "vmscope_kswapd_active_duration_seconds",
        label: "",
        help: "kswapd active periods, wake to sleep.",
    },
    HistFamily {
        prefix: "shrink_slab",
        exact: true,
        metric: "vmscope_shrink_slab_duration_seconds",
        label: "",
        help: "shrink_slab calls.",
    },
    HistFamily {
        prefix: "dirty_pause",
        exact: true,
        metric: "vmscope_dirty_pause_duration_seconds",
        label: "",
        help: "Dirty-throttling pauses: each sleep balance_dirty_pages put a writer to.",
    },
    HistFamily {
        prefix: "compaction_direct",
        exact: true,
        metric: "vmscope_direct_compaction_duration_seconds",
        label: "",
        help: "Compaction runs inside direct compaction (the allocating task's stall).",
    },
    HistFamily {
        prefix: "kcompactd_active",
        exact: true,
        metric: "vmscope_kcompactd_active_duration_seconds",
        label: "",
        help: "kcompactd active periods, wake to sleep.",
    },
    HistFamily {
        prefix: "migrate",
        exact: true,
        metric: "vmscope_migrate_duration_seconds",
        label: "",
        help: "Page migration calls (a batch of pages each).",
    },
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
    HistFamily {
        prefix: "",
        exact: false,
        metric: "vmscope_syscall_duration_seconds",
        label: "syscall",
        help: "munmap, mprotect and process_madvise latency.",
    },
];

/// The family of histogram `name`, and its label value (`""` without one).
pub fn hist_family(name: &str) -> (&'static HistFamily, &str) {
    for f in HIST_FAMILIES {
        if f.exact {
            if name == f.prefix {
                return (f, "");
            }
        } else if let Some(rest) = name.strip_prefix(f.prefix) {
            return (f, rest);
        }
    }
    unreachable!("the last family takes every name")
}

/// A latency histogram with a fixed slot (the page-fault and madvise ones
/// are ranges: see [`hist_name`]).
pub const HISTS: &[(u32, &str, &str)] = &[
    (
        hist::RECLAIM_DIRECT,
        "reclaim_direct",
        probe::DIRECT_RECLAIM,
    ),
    (hist::RECLAIM_MEMCG, "reclaim_memcg", probe::MEMCG_RECLAIM),
    (
        hist::RECLAIM_MEMCG_SOFTLIMIT,
        "reclaim_memcg_softlimit",
        probe::MEMCG_SOFTLIMIT_RECLAIM,
    ),
    (hist::RECLAIM_NODE, "reclaim_node", probe::NODE_RECLAIM),
    (hist::KSWAPD_ACTIVE, "kswapd_active", probe::KSWAPD_SLEEP),
    (hist::SHRINK_SLAB, "shrink_slab", probe::SHRINK_SLAB),
    (hist::MUNMAP, "munmap", probe::MUNMAP),
    (hist::MPROTECT, "mprotect", probe::MPROTECT),
    (
        hist::PROCESS_MADVISE,
        "process_madvise",
        probe::PROCESS_MADVISE,
    ),
    (hist::DIRTY_PAUSE, "dirty_pause", probe::DIRTY_THROTTLE),
    (
        hist::COMPACTION_DIRECT,
        "compaction_direct",
        probe::COMPACT_END,
    ),
    (
        hist::KCOMPACTD_ACTIVE,
        "kcompactd_active",
        probe::KCOMPACTD_SLEEP,
    ),
    (hist::MIGRATE, "migrate", probe::MIGRATE),
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

/// The name of histogram slot `id`.
pub fn hist_name(id: u32) -> String {
    if let Some((_, name, _)) = HISTS.iter().find(|h| h.0 == id) {
        return (*name).to_string();
    }
    if id >= hist::FAULT_BASE {
        return format!(
            "fault_{}",
            crate::model::hist::fault_kind(id - hist::FAULT_BASE)
        );
    }
    format!(
        "madvise_{}",
        crate::model::hist::behavior_name(id - hist::MADVISE_BASE)
    )
}

/// The probe histogram slot `id` depends on.
pub fn hist_probe(id: u32) -> &'static str {
    match HISTS.iter().find(|h| h.0 == id) {
        Some((_, _, p)) => p,
        None if id >= hist::FAULT_BASE => probe::FAULT_TIMING,
        None => probe::MADVISE,
    }
}

/// A per-process figure: its field in [`ProcSample`], its probe, and its
/// Prometheus family (`serve --per-process`).
#[derive(Clone, Copy, Debug)]
pub struct ProcField {
    pub key: &'static str,
    pub probe: &'static str,
    /// `"ns"` fields are exported in seconds.
    pub unit: &'static str,
    pub help: &'static str,
    pub metric: Option<&'static str>,
    /// The `top` process-table column it fills, if any.
    pub column: Option<&'static str>,
    pub get: fn(&ProcSample) -> u64,
}

pub const PROC_FIELDS: &[ProcField] = &[
    ProcField {
        key: "faults",
        probe: probe::ALWAYS,
        unit: "faults",
        help: "Page faults per process (top N by faults).",
        metric: Some("vmscope_process_page_faults_total"),
        column: Some("faults"),
        get: |p| p.faults.total(),
    },
    ProcField {
        key: "tlb_shootdowns",
        probe: probe::TLB_FLUSH,
        unit: "IPIs",
        help: "TLB shootdown IPIs sent per process.",
        metric: Some("vmscope_process_tlb_shootdowns_total"),
        column: Some("shootdowns"),
        get: |p| p.tlb_shootdowns,
    },
    ProcField {
        key: "major_faults",
        probe: probe::MAJOR_FAULTS,
        unit: "faults",
        help: "Major faults per process.",
        metric: Some("vmscope_process_major_faults_total"),
        column: Some("major"),
        get: |p| p.major_faults,
    },
    ProcField {
        key: "swap_out_pages",
        probe: probe::SWAP,
        unit: "pages",
        help: "Pages of the process swapped out, whoever reclaimed them.",
        metric: Some("vmscope_process_swap_out_pages_total"),
        column: Some("swap"),
        get: |p| p.swap_out_pages,
    },
    ProcField {
        key: "swap_in_pages",
        probe: probe::SWAP,
        unit: "pages",
        help: "Pages the process faulted back in from swap.",
        metric: Some("vmscope_process_swap_in_pages_total"),
        column: Some("swap"),
        get: |p| p.swap_in_pages,
    },
    ProcField {
        key: "reclaim_stall",
        probe: probe::ALWAYS,
        unit: "ns",
        help: "Time the process stalled in direct and memcg reclaim.",
        metric: Some("vmscope_process_reclaim_stall_seconds_total"),
        column: Some("reclaim"),
        get: |p| p.direct_reclaim_ns + p.memcg_reclaim_ns,
    },
    ProcField {
        key: "dirty_pause",
        probe: probe::DIRTY_THROTTLE,
        unit: "ns",
        help: "Time the process's writers slept in dirty throttling.",
        metric: Some("vmscope_process_dirty_pause_seconds_total"),
        column: None,
        get: |p| p.dirty_pause_ns,
    },
    ProcField {
        key: "direct_compaction",
        probe: probe::COMPACT_END,
        unit: "ns",
        help: "Time the process's allocations spent compacting memory themselves.",
        metric: Some("vmscope_process_direct_compaction_seconds_total"),
        column: None,
        get: |p| p.direct_compaction_ns,
    },
    ProcField {
        key: "mmap_lock_wait",
        probe: probe::MMAP_LOCK,
        unit: "ns",
        help: "Time the process's threads waited for its mmap_lock, read and write.",
        metric: Some("vmscope_process_mmap_lock_wait_seconds_total"),
        column: None,
        get: |p| p.mmap_read_wait_ns + p.mmap_write_wait_ns,
    },
    ProcField {
        key: "madvise_calls",
        probe: probe::MADVISE,
        unit: "calls",
        help: "madvise and process_madvise calls the process made.",
        metric: None,
        column: Some("madvise"),
        get: |p| p.madvise_calls,
    },
];

/// The per-process figure `key`, if there is one.
pub fn proc_field(key: &str) -> Option<&'static ProcField> {
    PROC_FIELDS.iter().find(|f| f.key == key)
}

/// What a `top` rate row needs to be available.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Probe(&'static str),
    /// The page-fault tracepoints (the perf fallback has no user/kernel
    /// split).
    FaultTracepoints,
}

/// Where a `top` rate row's value comes from; `live` evaluates it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateValue {
    /// User faults (with the perf fallback, every fault).
    FaultsUser,
    FaultsKernel,
    FaultsGup,
    /// Counters summed.
    Counters(&'static [&'static str]),
    Vmstat(&'static str),
    /// A histogram's time, in ms per second.
    HistMs(&'static str),
    /// PSI memory `some` stall time, in ms per second.
    PsiSome,
    /// The share of PSI memory `some` the timed causes explain (%).
    StallCoverage,
    MadviseCalls,
    RmapWalk,
    RmapMaintenance,
}

/// What a rate row's detail line shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    None,
    /// Its counters one by one, with `top`'s short names.
    Breakdown(&'static [(&'static str, &'static str)]),
    MadviseBehaviours,
    RmapSamples,
}

/// A row of `top`'s rates panel.
#[derive(Clone, Copy, Debug)]
pub struct Rate {
    pub label: &'static str,
    pub unit: &'static str,
    pub needs: &'static [Need],
    pub value: RateValue,
    pub detail: Detail,
    pub help: &'static str,
}

const TLB_REASONS: &[&str] = &[
    "tlb_task_switch",
    "tlb_remote_shootdown",
    "tlb_local_shootdown",
    "tlb_local_mm_shootdown",
    "tlb_remote_send_ipi",
    "tlb_remote_wrong_cpu",
    "tlb_other_reason",
];

const fn rate(
    label: &'static str,
    unit: &'static str,
    needs: &'static [Need],
    value: RateValue,
    help: &'static str,
) -> Rate {
    Rate {
        label,
        unit,
        needs,
        value,
        detail: Detail::None,
        help,
    }
}

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
        "direct reclaim",
        "ms/s",
        &[Need::Probe(probe::DIRECT_RECLAIM)],
        RateValue::HistMs("reclaim_direct"),
        "Time tasks spent in direct reclaim.",
    ),
    rate(
        "memcg reclaim",
        "ms/s",
        &[Need::Probe(probe::MEMCG_RECLAIM)],
        RateValue::HistMs("reclaim_memcg"),
        "Time tasks spent reclaiming for their memory cgroup.",
    ),
    rate(
        "dirty throttling",
        "ms/s",
        &[Need::Probe(probe::DIRTY_THROTTLE)],
        RateValue::HistMs("dirty_pause"),
        "Time writers slept in dirty throttling (balance_dirty_pages).",
    ),
    rate(
        "direct compaction",
        "ms/s",
        &[Need::Probe(probe::COMPACT_END)],
        RateValue::HistMs("compaction_direct"),
        "Time allocations spent compacting memory themselves.",
    ),
    rate(
        "migrated pages",
        "/s",
        &[Need::Probe(probe::MIGRATE)],
        RateValue::Counters(MIGRATED),
        "Pages migrated (compaction, NUMA balancing, demotion, ...).",
    ),
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
    rate(
        "kswapd active",
        "ms/s",
        &[Need::Probe(probe::KSWAPD_SLEEP)],
        RateValue::HistMs("kswapd_active"),
        "Time kswapd was awake.",
    ),
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
    Rate {
        label: "rmap walk CPU",
        unit: "%",
        needs: &[Need::Probe(probe::RMAP_SAMPLER)],
        value: RateValue::RmapWalk,
        detail: Detail::RmapSamples,
        help: "Share of CPU time in reverse-mapping walks (sampled).",
    },
    Rate {
        label: "rmap maintenance CPU",
        unit: "%",
        needs: &[Need::Probe(probe::RMAP_SAMPLER)],
        value: RateValue::RmapMaintenance,
        detail: Detail::RmapSamples,
        help: "Share of CPU time maintaining reverse mappings (sampled).",
    },
];

/// Where a bench/compare row goes in compare's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    /// The times, first.
    Headline,
    /// Faults, swap and reclaim, before the latency quantiles.
    Before,
    /// After the latency quantiles.
    After,
    /// With any figure the catalogue does not name, by name.
    Rest,
}

/// A figure of one recorded run (bench summarises it, compare compares
/// it, the report's tables show it). Rows are listed in compare's order.
#[derive(Clone, Copy, Debug)]
pub struct RunRow {
    pub name: &'static str,
    pub unit: &'static str,
    pub better: Better,
    pub place: Place,
    /// One of the report's main VM rows.
    pub main: bool,
    pub help: &'static str,
    /// The figure, or None when the run could not measure it.
    pub value: fn(&Recording) -> Option<f64>,
}

const fn row(
    name: &'static str,
    unit: &'static str,
    better: Better,
    place: Place,
    main: bool,
    help: &'static str,
    value: fn(&Recording) -> Option<f64>,
) -> RunRow {
    RunRow {
        name,
        unit,
        better,
        place,
        main,
        help,
        value,
    }
}

fn rusage(rec: &Recording, f: fn(&crate::child::Rusage) -> f64) -> Option<f64> {
    rec.child.as_ref().map(|c| f(&c.rusage))
}

fn vm_counter(rec: &Recording, name: &str) -> Option<f64> {
    rec.totals
        .vm
        .counters
        .get(name)
        .copied()
        .flatten()
        .map(|v| v as f64)
}

/// The summed time (ms) of histograms `names`: 0 when their probes were
/// attached and nothing happened (an empty histogram is not recorded), and
/// `None` when any was unavailable or the recording predates its probe.
fn hist_sum_ms(rec: &Recording, names: &[&str]) -> Option<f64> {
    let mut ms = 0.0;
    for name in names {
        let (_, _, probe) = HISTS.iter().find(|h| h.1 == *name)?;
        let attached = rec
            .header
            .probes
            .iter()
            .any(|p| p.probe == *probe && p.usable());
        if !attached
            || rec
                .totals
                .vm
                .unavailable
                .contains_key(&format!("histogram {name}"))
        {
            return None;
        }
        ms += rec
            .totals
            .vm
            .histograms
            .get(*name)
            .map_or(0.0, |h| h.sum_ns as f64 / 1e6);
    }
    Some(ms)
}

fn vmstat(rec: &Recording, key: &str) -> Option<f64> {
    rec.totals
        .vm
        .vmstat
        .counters
        .get(key)
        .copied()
        .flatten()
        .map(|v| v as f64)
}

/// The workload's own record count (its `.../records` figure), if any.
fn records(rec: &Recording) -> Option<f64> {
    let o = rec.child.as_ref()?.output.as_ref()?;
    crate::model::metrics::reported(o)
        .iter()
        .find(|r| r.name.ends_with("/records"))
        .map(|r| r.value)
        .filter(|&r| r > 0.0)
}

fn madvise_calls(rec: &Recording, behaviour: &str) -> Option<f64> {
    let vm = &rec.totals.vm;
    (!vm.unavailable.contains_key("madvise"))
        .then(|| vm.madvise.get(behaviour).map_or(0, |x| x.calls) as f64)
}

fn rmap(rec: &Recording) -> Option<&crate::model::rmap::RmapTotals> {
    rec.totals.vm.rmap.as_ref()
}

use Better::{Lower, Neither};
use Place::{After, Before, Headline, Rest};

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
    row(
        "faults",
        "faults",
        Lower,
        Before,
        true,
        "Page faults of the recorded scope, every path.",
        |r| r.totals.scope_faults.total.map(|v| v as f64),
    ),
    row(
        "faults_per_record",
        "faults",
        Lower,
        Before,
        false,
        "Faults per record the workload reports.",
        |r| Some(r.totals.scope_faults.total? as f64 / records(r)?),
    ),
    row(
        "user_faults_per_record",
        "faults",
        Lower,
        Before,
        false,
        "User-mode faults per record the workload reports.",
        |r| {
            let n = records(r)?;
            r.totals
                .scope_faults
                .user
                .as_ref()
                .map(|u| u.total as f64 / n)
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
        "reclaim_stall",
        "ms",
        Lower,
        Before,
        true,
        "Time in direct and memcg reclaim.",
        |r| hist_sum_ms(r, &["reclaim_direct", "reclaim_memcg"]),
    ),
    row(
        "dirty_pause",
        "ms",
        Lower,
        Before,
        true,
        "Time writers slept in dirty throttling (balance_dirty_pages).",
        |r| hist_sum_ms(r, &["dirty_pause"]),
    ),
    row(
        "direct_compaction",
        "ms",
        Lower,
        Before,
        true,
        "Time allocations spent compacting memory themselves.",
        |r| hist_sum_ms(r, &["compaction_direct"]),
    ),
    row(
        "compact_stall",
        "compactions",
        Lower,
        Before,
        true,
        "/proc/vmstat compact_stall.",
        |r| vmstat(r, "compact_stall"),
    ),
    row(
        "pgmigrate_success",
        "pages",
        Lower,
        Before,
        true,
        "/proc/vmstat pgmigrate_success.",
        |r| vmstat(r, "pgmigrate_success"),
    ),
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
    row(
        "pgscan_direct",
        "pages",
        Lower,
        Before,
        true,
        "/proc/vmstat pgscan_direct.",
        |r| vmstat(r, "pgscan_direct"),
    ),
    row(
        "oom_kills",
        "victims",
        Lower,
        Before,
        false,
        "OOM victims the kernel marked (system-wide).",
        |r| vm_counter(r, "oom_kills"),
    ),
    row(
        "tlb_shootdown_ipis",
        "IPIs",
        Lower,
        After,
        true,
        "TLB shootdown IPIs sent.",
        |r| vm_counter(r, "tlb_remote_send_ipi"),
    ),
    row(
        "madvise_calls",
        "calls",
        Neither,
        After,
        true,
        "madvise calls of every behaviour.",
        |r| {
            let vm = &r.totals.vm;
            (!vm.unavailable.contains_key("madvise"))
                .then(|| vm.madvise.values().map(|m| m.calls).sum::<u64>() as f64)
        },
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
    row(
        "psi_some_stall",
        "ms",
        Lower,
        After,
        false,
        "PSI memory some: time some task stalled on memory.",
        |r| {
            r.totals
                .vm
                .psi
                .as_ref()?
                .some_stall_us
                .map(|v| v as f64 / 1e3)
        },
    ),
    row(
        "gup_faults",
        "faults",
        Lower,
        Rest,
        false,
        "Faults taken through get_user_pages.",
        |r| r.totals.scope_faults.gup.map(|v| v as f64),
    ),
    row(
        "rmap_walk_cpu",
        "s",
        Lower,
        Rest,
        false,
        "CPU time in reverse-mapping walks.",
        |r| rmap(r).map(|x| x.rmap_walk.cpu_seconds),
    ),
    row(
        "rmap_walk_share",
        "%",
        Lower,
        Rest,
        false,
        "Share of CPU time in reverse-mapping walks.",
        |r| rmap(r).map(|x| 100.0 * x.rmap_walk.share),
    ),
    row(
        "rmap_walk_share_sampled",
        "%",
        Lower,
        Rest,
        false,
        "Share of CPU time inside reverse-mapping walks by the stack sampler running beside direct timing (a walk anywhere on the stack), to set beside rmap_walk_share.",
        |r| {
            rmap(r)?
                .sampled
                .as_ref()
                .map(|s| 100.0 * s.inside_walk.share)
        },
    ),
    row(
        "rmap_maint_cpu",
        "s",
        Lower,
        Rest,
        false,
        "CPU time maintaining reverse mappings.",
        |r| rmap(r)?.rmap_maintenance.as_ref().map(|m| m.cpu_seconds),
    ),
    row(
        "rmap_maint_share",
        "%",
        Lower,
        Rest,
        false,
        "Share of CPU time maintaining reverse mappings.",
        |r| rmap(r)?.rmap_maintenance.as_ref().map(|m| 100.0 * m.share),
    ),
    row(
        "rmap_walk_calls",
        "calls",
        Neither,
        Rest,
        false,
        "rmap walks timed (direct timing only).",
        |r| rmap(r)?.walk_calls.map(|v| v as f64),
    ),
    row(
        "rmap_maint_calls",
        "calls",
        Neither,
        Rest,
        false,
        "rmap maintenance calls timed (direct timing only).",
        |r| rmap(r)?.maintenance_calls.map(|v| v as f64),
    ),
    row(
        "rmap_samples",
        "samples",
        Neither,
        Rest,
        false,
        "Stack samples behind the rmap shares (sampling only).",
        |r| {
            let x = rmap(r)?;
            (x.method == crate::model::rmap::Method::StackSampling).then_some(x.samples as f64)
        },
    ),
];

/// The headline rows (the catalogue's), first and in this order.
pub fn headline() -> impl Iterator<Item = &'static str> {
    RUN_ROWS
        .iter()
        .filter(|r| r.place == Place::Headline)
        .map(|r| r.name)
}

/// Where a metric's row goes: headline, then faults, swap and reclaim, the
/// latency histograms' quantiles, the rest of the catalogue's rows, anything
/// else by name. The catalogue lists its rows in this order.
fn rank(name: &str) -> (usize, &str, usize) {
    let rows = RUN_ROWS;
    let row = rows.iter().position(|r| r.name == name);
    let place = row.map(|i| rows[i].place);
    let headline = headline().count();
    let hist = rows.iter().filter(|r| r.place <= Place::Before).count() + 1;
    match (row, place) {
        (Some(i), Some(Place::Headline)) => return (i, "", 0),
        // The workload's own figures come right after the headline.
        _ if name.contains('/') => return (headline, name, 0),
        (Some(i), Some(Place::Before)) => return (i + 1, "", 0),
        _ => {}
    }
    if let Some((h, q)) = name.rsplit_once('.')
        && let Some(qi) = QUANTILES.iter().position(|x| *x == q)
    {
        return (hist, h, qi);
    }
    match (row, place) {
        (Some(i), Some(Place::After)) => (i + 2, "", 0),
        _ => (rows.len() + 2, name, 0),
    }
}

pub fn by_rank(a: &str, b: &str) -> std::cmp::Ordering {
    rank(a).cmp(&rank(b))
}

/// The run row named `name`.
pub fn run_row(name: &str) -> Option<&'static RunRow> {
    RUN_ROWS.iter().find(|r| r.name == name)
}

/// The latency quantiles bench and compare show for each histogram.
pub const QUANTILES: &[&str] = &["p50", "p90", "p99"];

/// The type of a Prometheus family, as its `# TYPE` line gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// What a family's series are about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The whole system (or the scope a recording follows).
    System,
    /// One series per process (`serve --per-process N`).
    Process,
    /// One series per cgroup (`serve --per-cgroup N`), or by cgroup.
    Cgroup,
    /// The exporter itself.
    Exporter,
}

impl Scope {
    pub const fn name(self) -> &'static str {
        match self {
            Scope::System => "system",
            Scope::Process => "process",
            Scope::Cgroup => "cgroup",
            Scope::Exporter => "exporter",
        }
    }
}

/// A Prometheus family the exporter writes beside the tables above (its
/// own figures, PSI, madvise, the per-cgroup series...): declared once,
/// next to the code that writes it, which takes its HELP and TYPE lines
/// from here, as `docs/metrics.md` takes its row.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub scope: Scope,
    /// Its series' label names, in order (a histogram's `le` aside).
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

impl Family {
    pub const fn counter(
        scope: Scope,
        name: &'static str,
        labels: &'static [&'static str],
        help: &'static str,
    ) -> Family {
        Family {
            name,
            kind: Kind::Counter,
            scope,
            labels,
            help,
        }
    }

    pub const fn gauge(
        scope: Scope,
        name: &'static str,
        labels: &'static [&'static str],
        help: &'static str,
    ) -> Family {
        Family {
            kind: Kind::Gauge,
            ..Family::counter(scope, name, labels, help)
        }
    }
}

/// `docs/metrics.md`: the reference, written from these tables and the
/// exporter's `served` families (a test keeps the checked-in page current).
pub fn reference(served: &[Family]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Metrics reference\n\nGenerated from `vmscope/src/model/catalogue.rs` and the exporter's \
         family tables in `vmscope/src/serve/` (a test fails when this page is stale; `VMSCOPE_BLESS=1 cargo test -p vmscope --lib catalogue` rewrites it). A metric \
         whose probe is not attached is unavailable, with the reason, in every view: never 0. \
         `doctor` lists the probes and their fallbacks.\n"
    );
    counters_md(&mut o);
    histograms_md(&mut o);
    processes_md(&mut o);
    rates_md(&mut o);
    runs_md(&mut o);
    vmstat_md(&mut o);
    families_md(&mut o, served);
    o
}

/// A name as code in the reference (`none` for figures that need no probe).
fn code(s: &str) -> String {
    match s {
        "" => String::new(),
        probe::ALWAYS => "none".to_string(),
        s => format!("`{s}`"),
    }
}

fn counters_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "## Counters\n\nSystem-wide (scope-filtered when a recording follows a process tree). \
         JSON: `samples[].counters` and `totals.vm.counters`, by key.\n\n\
         | key | probe | unit | Prometheus | meaning |\n|---|---|---|---|---|"
    );
    for c in COUNTERS {
        let prom = match c.export {
            Export::No => String::new(),
            Export::Plain(m, _) => code(m),
            Export::In(f, v) => {
                let label = COUNTER_FAMILIES
                    .iter()
                    .find(|x| x.0 == f)
                    .map_or("", |x| x.1);
                format!("`{f}{{{label}=\"{v}\"}}`")
            }
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {prom} | {} |",
            c.key,
            code(c.probe),
            c.unit,
            c.help
        );
    }
}

fn histograms_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## Latency histograms\n\nlog2 buckets in ns; exported in seconds with the bucket \
         bounds as `le`. JSON: `samples[].hists` and `totals.vm.histograms`, by name.\n\n\
         | histogram | probe |\n|---|---|"
    );
    for (_, name, p) in HISTS {
        let _ = writeln!(o, "| `{name}` | `{p}` |");
    }
    let _ = writeln!(
        o,
        "| `fault_minor_anon`, `fault_minor_file`, `fault_major_anon`, `fault_major_file` | `{}` |\n\
         | `madvise_<behaviour>` | `{}` |\n\n| Prometheus family | label | histograms | meaning |\n|---|---|---|---|",
        probe::FAULT_TIMING,
        probe::MADVISE
    );
    for f in HIST_FAMILIES {
        let which = match (f.exact, f.prefix) {
            (true, p) => format!("`{p}`"),
            (false, "") => "the others".to_string(),
            (false, p) => format!("`{p}*`"),
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {which} | {} |",
            f.metric,
            code(f.label),
            f.help
        );
    }
}

fn processes_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## Per process\n\nJSON: `samples[].procs[]` and `processes[]`; `serve --per-process N` \
         exports the N processes with the most faults, labelled `pid` and `comm`.\n\n\
         | figure | probe | unit | Prometheus | `top` column | meaning |\n|---|---|---|---|---|---|"
    );
    for f in PROC_FIELDS {
        let unit = if f.unit == "ns" {
            "ns (seconds in Prometheus)"
        } else {
            f.unit
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {unit} | {} | {} | {} |",
            f.key,
            code(f.probe),
            code(f.metric.unwrap_or("")),
            f.column.unwrap_or(""),
            f.help
        );
    }
}

fn rates_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## `top` rates\n\n| row | unit | needs | meaning |\n|---|---|---|---|"
    );
    for r in RATES {
        let needs: Vec<String> = r
            .needs
            .iter()
            .map(|n| match n {
                Need::Probe(p) => format!("`{p}`"),
                Need::FaultTracepoints => "the page-fault tracepoints".to_string(),
            })
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            r.label,
            r.unit,
            needs.join(", "),
            r.help
        );
    }
}

fn runs_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## Run figures (`bench`, `compare`, `report`)\n\nIn compare's order. The workload's own \
         figures (`<workload>/<name>`) follow the headline; each latency histogram's p50, p90 and \
         p99 (`<histogram>.p50`, ns, lower is better) come after the \"before\" rows; \
         `madvise_<behaviour>_calls` rows appear for any other behaviour used.\n\n\
         | figure | unit | better | place | meaning |\n|---|---|---|---|---|"
    );
    for r in RUN_ROWS {
        let better = match r.better {
            Better::Lower => "lower",
            Better::Higher => "higher",
            Better::Neither => "",
        };
        let place = match r.place {
            Place::Headline => "headline",
            Place::Before => "before quantiles",
            Place::After => "after quantiles",
            Place::Rest => "last",
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {better} | {place} | {} |",
            r.name, r.unit, r.help
        );
    }
}

fn vmstat_md(o: &mut String) {
    use std::fmt::Write as _;
    let list = |keys: &[&str]| {
        keys.iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        o,
        "\n## /proc/vmstat\n\nRecorded when the running kernel has them (absent keys are listed \
         as unavailable); counters are exported as `vmscope_vmstat_events_total{{counter}}`, \
         growth since vmscope started.\n\n- Recorded: {}\n- Gauges (last value, not a delta): {}\n\
         - A column in a recording's series: {}",
        list(procstat::VMSTAT_KEYS),
        list(procstat::VMSTAT_GAUGES),
        list(procstat::VMSTAT_COLUMNS)
    );
}

/// Every family `serve` exports: the catalogue's, then the `served` ones,
/// by scope, then name.
pub fn families(served: &[Family]) -> Vec<Family> {
    let mut all: Vec<Family> = Vec::new();
    for c in COUNTERS {
        if let Export::Plain(name, help) = c.export {
            all.push(Family::counter(Scope::System, name, &[], help));
        }
    }
    for (name, label, help) in COUNTER_FAMILIES {
        let labels = std::slice::from_ref(label);
        all.push(Family::counter(Scope::System, name, labels, help));
    }
    for f in HIST_FAMILIES {
        all.push(Family {
            name: f.metric,
            kind: Kind::Histogram,
            scope: Scope::System,
            labels: if f.label.is_empty() {
                &[]
            } else {
                std::slice::from_ref(&f.label)
            },
            help: f.help,
        });
    }
    for f in PROC_FIELDS {
        if let Some(name) = f.metric {
            all.push(Family::counter(
                Scope::Process,
                name,
                &["pid", "comm"],
                f.help,
            ));
        }
    }
    all.extend_from_slice(served);
    all.sort_by(|a, b| a.scope.cmp(&b.scope).then(a.name.cmp(b.name)));
    all.dedup_by(|a, b| a.name == b.name);
    all
}

fn families_md(o: &mut String, served: &[Family]) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## Prometheus families\n\nEvery family `vmscope serve` exports, by scope. A family whose \
         probe is not attached is left out (`vmscope_probe_available` says 0 for the probe); \
         per-process families only with `--per-process N`, per-cgroup ones (OOM kills by \
         cgroup aside) only with `--per-cgroup N`, `vmscope_flight_*` only with `--on-oom`. In OpenMetrics a counter's `# TYPE` and \
         `# HELP` lines name it without `_total`.\n\n\
         | family | type | labels | scope | meaning |\n|---|---|---|---|---|"
    );
    for f in families(served) {
        let labels: Vec<String> = f.labels.iter().map(|l| format!("`{l}`")).collect();
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {} | {} |",
            f.name,
            f.kind.name(),
            labels.join(", "),
            f.scope.name(),
            f.help
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_metrics_are_unique() {
        let mut keys: Vec<&str> = COUNTERS.iter().map(|c| c.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), COUNTERS.len());
        let mut slots: Vec<u32> = COUNTERS.iter().filter_map(|c| c.slot).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(
            slots.len(),
            COUNTERS.iter().filter(|c| c.slot.is_some()).count()
        );
        let mut rows: Vec<&str> = RUN_ROWS.iter().map(|r| r.name).collect();
        rows.sort_unstable();
        rows.dedup();
        assert_eq!(rows.len(), RUN_ROWS.len());
        // Listed in compare's order.
        assert!(RUN_ROWS.windows(2).all(|w| w[0].place <= w[1].place));
    }

    #[test]
    fn every_labelled_counter_has_its_family() {
        for c in COUNTERS {
            if let Export::In(f, _) = c.export {
                assert!(COUNTER_FAMILIES.iter().any(|x| x.0 == f), "{}: {f}", c.key);
            }
        }
    }

    #[test]
    fn docs_metrics_page_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
        let want = reference(&crate::serve::export::served_families());
        if std::env::var_os("VMSCOPE_BLESS").is_some() {
            std::fs::write(path, &want).expect("writing docs/metrics.md");
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/metrics.md is stale: VMSCOPE_BLESS=1 cargo test -p vmscope --lib catalogue"
        );
    }

    #[test]
    fn no_family_is_declared_twice() {
        let served = crate::serve::export::served_families();
        let mut names: Vec<&str> = served.iter().map(|f| f.name).collect();
        names.extend(families(&[]).iter().map(|f| f.name));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn histograms_fall_in_their_families() {
        assert_eq!(hist_family("reclaim_memcg").1, "memcg");
        assert_eq!(hist_family("kswapd_active").0.label, "");
        assert_eq!(
            hist_family("munmap").0.metric,
            "vmscope_syscall_duration_seconds"
        );
        assert_eq!(hist_name(hist::RECLAIM_MEMCG), "reclaim_memcg");
        assert_eq!(hist_probe(hist::RECLAIM_MEMCG), probe::MEMCG_RECLAIM);
        assert_eq!(hist_probe(hist::FAULT_BASE), probe::FAULT_TIMING);
        assert_eq!(hist_probe(hist::MADVISE_BASE), probe::MADVISE);
    }
}
