//! What the loader says about each probe, as every view reads it. Pure
//! types.

use serde::{Deserialize, Serialize};

/// Probe names, as the loader, `doctor` and `vmscope_probe_available` give
/// them. A metric is available when its probe is attached.
pub mod names {
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
    /// A folio added to the page cache.
    pub const PAGE_CACHE_ADD: &str = "filemap:mm_filemap_add_to_page_cache";
    /// A read's pages asked of the page cache (6.11 on).
    pub const PAGE_CACHE_READ: &str = "filemap:mm_filemap_get_pages";
    /// A folio removed from the page cache (a BTF tracepoint only): its
    /// memory cgroup's evictions and other removals.
    pub const PAGE_CACHE_REMOVE: &str = "filemap:mm_filemap_delete_from_page_cache";
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
    /// Huge-page faults per process (opt-in: `--thp-faults`; 6.16 on).
    pub const THP_FAULTS: &str = "memcg:count_memcg_events";
    /// Keeps processes' cgroup keys fresh after a task moves.
    pub const CGROUP_ATTACH: &str = "cgroup:cgroup_attach_task";
    /// Per-cgroup attribution itself (how keys are read; not a hook).
    pub const CGROUPS: &str = "cgroup attribution";
}

/// What happened to one probe.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ProbeStatus {
    /// The hook, e.g. `exceptions:page_fault_user`, or `perf:page-faults`.
    pub probe: String,
    /// How it is attached: `tracepoint`, `perf_event`.
    pub method: String,
    pub attached: bool,
    /// Why it is not attached, or which fallback replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Not attached because nothing it counts could happen yet (the swap
    /// probe while no swap device is active): its figures are true zeros,
    /// not unavailable. It attaches as soon as that changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

impl ProbeStatus {
    /// Whether the probe's figures can be trusted (attached, or deferred
    /// while they are zero by construction).
    pub fn usable(&self) -> bool {
        self.attached || self.deferred
    }

    /// A classic tracepoint, attached or missing from the kernel (unit
    /// tests' probe lists).
    #[cfg(test)]
    pub fn tracepoint(name: &str, attached: bool) -> ProbeStatus {
        ProbeStatus {
            probe: name.into(),
            method: "tracepoint".into(),
            attached,
            reason: (!attached).then(|| "tracepoint not found in this kernel".into()),
            deferred: false,
        }
    }
}

/// Whether `probe` is usable in `probes` ("always" names figures that need
/// no probe). One answer for the recorder, totals, the exporter and top.
pub fn probe_usable(probes: &[ProbeStatus], probe: &str) -> bool {
    probe == names::ALWAYS || probes.iter().any(|p| p.probe == probe && p.usable())
}

/// Why the mmap_lock probes are not attached unless asked for.
pub const MMAP_LOCK_OFF: &str =
    "off by default (it costs lock-heavy programs; docs/cost.md): --mmap-lock turns it on";

/// Why the munmap and mprotect latency probes are not attached unless asked
/// for.
pub const SYSCALL_LATENCY_OFF: &str = "off by default (two syscall events per call cost \
     allocator-heavy programs; docs/cost.md): --syscall-latency turns it on";

/// Why the huge-page fault probe is not attached unless asked for.
pub const THP_FAULTS_OFF: &str = "off by default (it runs on every page fault; docs/cost.md): \
     --thp-faults turns it on";

/// `syscalls:sys_enter_x, syscalls:sys_exit_x, ...` as one
/// `syscalls (x, ...)` entry, the other probes as they are.
pub fn group_syscalls(probes: &[String]) -> String {
    let mut calls: Vec<&str> = Vec::new();
    let mut rest: Vec<&str> = Vec::new();
    for p in probes {
        match p
            .strip_prefix("syscalls:sys_enter_")
            .or_else(|| p.strip_prefix("syscalls:sys_exit_"))
        {
            Some(call) if !calls.contains(&call) => calls.push(call),
            Some(_) => {}
            None => rest.push(p),
        }
    }
    let mut out = Vec::new();
    if !calls.is_empty() {
        out.push(format!("syscalls ({})", calls.join(", ")));
    }
    out.extend(rest.iter().map(|r| r.to_string()));
    out.join(", ")
}

/// The probes that cannot be used, one entry per distinct reason: the
/// probes' names (the syscall events grouped) and the reason. What
/// `record` warns and `top`'s header shows, so 17 hooks refused for one
/// reason read as one line.
pub fn unusable_by_reason(probes: &[ProbeStatus]) -> Vec<(String, String)> {
    let mut by_reason: Vec<(&str, Vec<String>)> = Vec::new();
    // Opt-in probes left off are not "unavailable".
    let opted_out = |p: &ProbeStatus| {
        p.reason
            .as_deref()
            .is_some_and(|r| [MMAP_LOCK_OFF, SYSCALL_LATENCY_OFF, THP_FAULTS_OFF].contains(&r))
    };
    for p in probes.iter().filter(|p| !p.usable() && !opted_out(p)) {
        let why = p.reason.as_deref().unwrap_or("not attached");
        match by_reason.iter_mut().find(|(r, _)| *r == why) {
            Some((_, names)) => names.push(p.probe.clone()),
            None => by_reason.push((why, vec![p.probe.clone()])),
        }
    }
    by_reason
        .into_iter()
        .map(|(why, names)| (group_syscalls(&names), why.to_string()))
        .collect()
}

/// Where page-fault counts come from on this kernel.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FaultSource {
    /// `exceptions:page_fault_*`: counts with error-code classes.
    Tracepoint,
    /// The perf software page-faults event: counts only.
    PerfSoftware,
    /// Nothing could be attached.
    Unavailable,
}
