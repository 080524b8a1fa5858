//! The catalogue of kernel hooks vmscope uses, what each one feeds, and what
//! happens on a kernel without it. `doctor` reports from this table and the
//! loader attaches from it, so the two cannot disagree.

#[derive(Clone, Copy, Debug)]
pub struct Hook {
    pub category: &'static str,
    pub name: &'static str,
    /// Older names of the same event, tried in order when `name` is absent.
    pub older_names: &'static [&'static str],
    pub used_for: &'static str,
    /// What vmscope does without it.
    pub fallback: &'static str,
}

impl Hook {
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.category, self.name)
    }
}

const fn hook(
    category: &'static str,
    name: &'static str,
    used_for: &'static str,
    fallback: &'static str,
) -> Hook {
    Hook {
        category,
        name,
        older_names: &[],
        used_for,
        fallback,
    }
}

pub const PAGE_FAULT_USER: Hook = hook(
    "exceptions",
    "page_fault_user",
    "user page faults per process, by error-code class",
    "perf software page-faults event: counts without error-code classes (x86 only tracepoint)",
);
pub const PAGE_FAULT_KERNEL: Hook = hook(
    "exceptions",
    "page_fault_kernel",
    "kernel-mode page faults, by error-code class",
    "counted together with user faults by the perf software event",
);
pub const SCHED_PROCESS_FORK: Hook = hook(
    "sched",
    "sched_process_fork",
    "following a wrapped command's or -p process tree",
    "none: without it only the named pids are followed, not their children",
);
pub const SCHED_PROCESS_EXEC: Hook = hook(
    "sched",
    "sched_process_exec",
    "keeping process names current after exec",
    "process names from /proc, or the name at first fault",
);
pub const SCHED_SWITCH: Hook = hook(
    "sched",
    "sched_switch",
    "the faults the kernel accounts to each task (min_flt + maj_flt, read at each context \
     switch as a BTF tracepoint), get_user_pages faults included",
    "faults are the exception path's only; get_user_pages faults (populate, mlock, remote \
     access) unavailable",
);
pub const SCHED_PROCESS_EXIT: Hook = hook(
    "sched",
    "sched_process_exit",
    "process lifetime",
    "none needed: exited processes keep their totals",
);

/// Every hook vmscope uses or will use, in report order.
pub const ALL: &[Hook] = &[
    PAGE_FAULT_USER,
    PAGE_FAULT_KERNEL,
    hook(
        "vmscan",
        "mm_vmscan_direct_reclaim_begin",
        "direct reclaim stall latency per process",
        "direct reclaim stalls unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_direct_reclaim_end",
        "direct reclaim stall latency per process",
        "direct reclaim stalls unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_memcg_reclaim_begin",
        "memcg reclaim latency",
        "memcg reclaim latency unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_memcg_reclaim_end",
        "memcg reclaim latency",
        "memcg reclaim latency unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_memcg_softlimit_reclaim_begin",
        "memcg soft-limit reclaim latency",
        "soft-limit reclaim latency unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_memcg_softlimit_reclaim_end",
        "memcg soft-limit reclaim latency",
        "soft-limit reclaim latency unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_node_reclaim_begin",
        "node reclaim latency",
        "node reclaim latency unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_node_reclaim_end",
        "node reclaim latency",
        "node reclaim latency unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_kswapd_wake",
        "kswapd active time",
        "kswapd time unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_kswapd_sleep",
        "kswapd active time",
        "kswapd time unavailable",
    ),
    hook(
        "vmscan",
        "mm_vmscan_lru_shrink_inactive",
        "pages scanned and reclaimed",
        "scan/steal from /proc/vmstat only",
    ),
    hook(
        "vmscan",
        "mm_vmscan_lru_shrink_active",
        "active list deactivation",
        "from /proc/vmstat only",
    ),
    Hook {
        category: "vmscan",
        name: "mm_vmscan_write_folio",
        older_names: &["mm_vmscan_writepage"],
        used_for: "write-back from reclaim, anon and file",
        fallback: "reclaim write-back counts unavailable",
    },
    hook(
        "vmscan",
        "mm_shrink_slab_start",
        "shrink_slab latency",
        "slab shrink latency unavailable",
    ),
    hook(
        "vmscan",
        "mm_shrink_slab_end",
        "shrink_slab latency",
        "slab shrink latency unavailable",
    ),
    hook(
        "tlb",
        "tlb_flush",
        "TLB flushes by reason, pages flushed",
        "TLB figures unavailable (x86 only tracepoint)",
    ),
    hook(
        "syscalls",
        "sys_enter_madvise",
        "madvise calls, bytes and latency per behaviour",
        "madvise figures unavailable (needs CONFIG_FTRACE_SYSCALLS)",
    ),
    hook(
        "syscalls",
        "sys_exit_madvise",
        "madvise errors and latency",
        "madvise latency unavailable",
    ),
    hook(
        "syscalls",
        "sys_enter_process_madvise",
        "process_madvise calls",
        "process_madvise figures unavailable",
    ),
    hook(
        "syscalls",
        "sys_exit_process_madvise",
        "process_madvise latency",
        "process_madvise latency unavailable",
    ),
    hook(
        "syscalls",
        "sys_enter_munmap",
        "munmap latency, with --syscall-latency (off by default: costs every call, docs/cost.md)",
        "munmap latency unavailable",
    ),
    hook(
        "syscalls",
        "sys_exit_munmap",
        "munmap latency, with --syscall-latency (off by default: costs every call, docs/cost.md)",
        "munmap latency unavailable",
    ),
    hook(
        "syscalls",
        "sys_enter_mprotect",
        "mprotect latency, with --syscall-latency (off by default: costs every call, docs/cost.md)",
        "mprotect latency unavailable",
    ),
    hook(
        "syscalls",
        "sys_exit_mprotect",
        "mprotect latency, with --syscall-latency (off by default: costs every call, docs/cost.md)",
        "mprotect latency unavailable",
    ),
    hook(
        "kmem",
        "rss_stat",
        "per-process swap-out attribution (MM_SWAPENTS)",
        "swap-out per process unavailable; system-wide from /proc/vmstat",
    ),
    hook(
        "writeback",
        "balance_dirty_pages",
        "dirty-throttling pauses per process, and their histogram",
        "dirty throttling unavailable",
    ),
    hook(
        "filemap",
        "mm_filemap_add_to_page_cache",
        "pages added to the page cache (misses, readahead, writes) per process and cgroup",
        "page-cache additions and the read hit ratio unavailable",
    ),
    hook(
        "filemap",
        "mm_filemap_get_pages",
        "pages reads ask the page cache for, and so the read hit ratio, per process and cgroup",
        "page-cache reads and the read hit ratio unavailable (the tracepoint is 6.11 on)",
    ),
    hook(
        "filemap",
        "mm_filemap_delete_from_page_cache",
        "page-cache evictions (by reclaim) and other removals, system-wide and per memory \
         cgroup (as tp_btf only: the record does not name the cgroup)",
        "page-cache evictions unavailable; the cgroup's refaults and cache size come from \
         memory.stat",
    ),
    hook(
        "memcg",
        "count_memcg_events",
        "huge-page faults per process and cgroup, with --thp-faults (off by default: it runs on \
         every page fault, docs/cost.md)",
        "huge-page faults system-wide only, from /proc/vmstat (the tracepoint is 6.16 on)",
    ),
    SCHED_SWITCH,
    SCHED_PROCESS_FORK,
    SCHED_PROCESS_EXEC,
    SCHED_PROCESS_EXIT,
];
