//! Entry points for the faults and process-tree hooks.

use aya_ebpf::{
    macros::{btf_tracepoint, fentry, fexit, perf_event, tracepoint},
    programs::{
        BtfTracePointContext, FEntryContext, FExitContext, PerfEventContext, TracePointContext,
    },
};

// Page faults through BTF-typed raw tracepoints when the kernel allows: the
// error code is an argument, and no trace record is built for the event,
// which makes them several times cheaper than the classic tracepoints below.
// Arguments: (unsigned long address, struct pt_regs *regs, unsigned long error_code).

#[btf_tracepoint(function = "page_fault_user")]
pub fn page_fault_user_btf(ctx: BtfTracePointContext) -> i32 {
    crate::faults::on_fault(ctx.arg::<u64>(2), crate::faults::Mode::User);
    0
}

#[btf_tracepoint(function = "page_fault_kernel")]
pub fn page_fault_kernel_btf(ctx: BtfTracePointContext) -> i32 {
    crate::faults::on_fault(ctx.arg::<u64>(2), crate::faults::Mode::Kernel);
    0
}

/// The kernel's fault books, read at each context switch (see `account.rs`).
/// Arguments: (bool preempt, struct task_struct *prev, struct task_struct *next, ...).
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_btf(ctx: BtfTracePointContext) -> i32 {
    crate::account::on_switch(ctx.arg::<u64>(1), ctx.arg::<u64>(2));
    0
}

/// Page-fault handling time (see `faulttime.rs`), where fentry is allowed.
/// `vm_fault_t handle_mm_fault(struct vm_area_struct *vma, unsigned long
/// address, unsigned int flags, struct pt_regs *regs)`.
#[fentry(function = "handle_mm_fault")]
pub fn fault_enter(_ctx: FEntryContext) -> i32 {
    crate::faulttime::enter();
    0
}

#[fexit(function = "handle_mm_fault")]
pub fn fault_exit(ctx: FExitContext) -> i32 {
    crate::faulttime::exit(ctx.arg::<u64>(0), ctx.arg::<u32>(2), ctx.arg::<u32>(4));
    0
}

#[tracepoint]
pub fn page_fault_user(ctx: TracePointContext) -> u32 {
    crate::faults::on_tracepoint(&ctx, crate::faults::Mode::User);
    0
}

#[tracepoint]
pub fn page_fault_kernel(ctx: TracePointContext) -> u32 {
    crate::faults::on_tracepoint(&ctx, crate::faults::Mode::Kernel);
    0
}

/// Fallback for kernels without `exceptions:page_fault_*`: the software
/// page-faults perf event, sampled with period 1 (counts, no error code).
#[perf_event]
pub fn page_fault_perf(_ctx: PerfEventContext) -> u32 {
    crate::faults::on_perf_fault();
    0
}

/// Major faults: the software major-faults perf event, period 1. Cheap:
/// major faults are rare next to minor ones and each costs a read.
#[perf_event]
pub fn major_fault_perf(_ctx: PerfEventContext) -> u32 {
    crate::faults::on_major_fault();
    0
}

/// Kernel-stack sampling on cpu-clock (see `sample.rs`), for the rmap and
/// other CPU-cost categories.
#[perf_event]
pub fn cpu_clock_sample(ctx: PerfEventContext) -> u32 {
    crate::sample::on_sample(&ctx);
    0
}

// Direct timing of rmap functions (see `timing.rs`): slot N is loaded for
// the Nth function the loader plans, where the kernel allows fentry; the
// last slot is the calibration's.
macro_rules! rmap_slots {
    ($($slot:literal $entry:ident $exit:ident),* $(,)?) => {
        $(
            #[fentry]
            pub fn $entry(_ctx: FEntryContext) -> u32 {
                crate::timing::enter($slot);
                0
            }

            #[fexit]
            pub fn $exit(_ctx: FExitContext) -> u32 {
                crate::timing::exit();
                0
            }
        )*
    };
}

rmap_slots!(
    0 rmap_fentry_0 rmap_fexit_0,
    1 rmap_fentry_1 rmap_fexit_1,
    2 rmap_fentry_2 rmap_fexit_2,
    3 rmap_fentry_3 rmap_fexit_3,
    4 rmap_fentry_4 rmap_fexit_4,
    5 rmap_fentry_5 rmap_fexit_5,
    6 rmap_fentry_6 rmap_fexit_6,
    7 rmap_fentry_7 rmap_fexit_7,
    8 rmap_fentry_8 rmap_fexit_8,
    9 rmap_fentry_9 rmap_fexit_9,
    10 rmap_fentry_10 rmap_fexit_10,
    11 rmap_fentry_11 rmap_fexit_11,
    12 rmap_fentry_12 rmap_fexit_12,
    13 rmap_fentry_13 rmap_fexit_13,
    14 rmap_fentry_14 rmap_fexit_14,
    15 rmap_fentry_15 rmap_fexit_15,
    16 rmap_fentry_16 rmap_fexit_16,
    17 rmap_fentry_17 rmap_fexit_17,
    18 rmap_fentry_18 rmap_fexit_18,
    19 rmap_fentry_19 rmap_fexit_19,
    20 rmap_fentry_20 rmap_fexit_20,
    21 rmap_fentry_21 rmap_fexit_21,
    22 rmap_fentry_22 rmap_fexit_22,
    23 rmap_fentry_23 rmap_fexit_23,
);

/// Swap attribution (see `swap.rs`).
#[tracepoint]
pub fn rss_stat(ctx: TracePointContext) -> u32 {
    crate::swap::on_rss_stat(&ctx);
    0
}

/// The same as a BTF tracepoint (kernels with per-CPU RSS counters, 6.2+):
/// `rss_stat(struct mm_struct *mm, int member)`.
#[btf_tracepoint(function = "rss_stat")]
pub fn rss_stat_btf(ctx: BtfTracePointContext) -> i32 {
    crate::swap::on_rss_stat_btf(ctx.arg::<u64>(0), ctx.arg::<i32>(1));
    0
}

/// The same for the usual field layout, with plain context loads.
#[tracepoint]
pub fn rss_stat_std(ctx: TracePointContext) -> u32 {
    crate::swap::on_rss_stat_std(&ctx);
    0
}

#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    crate::filter::on_fork(&ctx);
    0
}

#[tracepoint]
pub fn sched_process_exit(_ctx: TracePointContext) -> u32 {
    crate::filter::on_exit();
    0
}

#[btf_tracepoint(function = "sched_process_exit")]
pub fn sched_process_exit_btf(_ctx: BtfTracePointContext) -> i32 {
    crate::filter::on_exit();
    0
}

#[tracepoint]
pub fn sched_process_exec(_ctx: TracePointContext) -> u32 {
    crate::faults::on_exec();
    0
}

// madvise family and the syscalls that drive TLB shootdowns.

#[tracepoint]
pub fn sys_enter_madvise(ctx: TracePointContext) -> u32 {
    crate::syscalls::madvise_enter(&ctx);
    0
}

#[tracepoint]
pub fn sys_exit_madvise(ctx: TracePointContext) -> u32 {
    crate::syscalls::madvise_exit(&ctx);
    0
}

#[tracepoint]
pub fn sys_enter_process_madvise(ctx: TracePointContext) -> u32 {
    crate::syscalls::process_madvise_enter(&ctx);
    0
}

#[tracepoint]
pub fn sys_exit_process_madvise(ctx: TracePointContext) -> u32 {
    crate::syscalls::process_madvise_exit(&ctx);
    0
}

#[tracepoint]
pub fn sys_enter_munmap(_ctx: TracePointContext) -> u32 {
    crate::syscalls::timed_enter(vmscope_common::kind::MUNMAP);
    0
}

#[tracepoint]
pub fn sys_exit_munmap(_ctx: TracePointContext) -> u32 {
    crate::syscalls::timed_exit(vmscope_common::kind::MUNMAP, vmscope_common::hist::MUNMAP);
    0
}

// All of the above through the raw syscall hooks (see `syscalls.rs`).

#[btf_tracepoint(function = "sys_enter")]
pub fn sys_enter_raw_btf(ctx: BtfTracePointContext) -> i32 {
    crate::syscalls::raw_enter(ctx.arg::<u64>(0), ctx.arg::<i64>(1));
    0
}

#[btf_tracepoint(function = "sys_exit")]
pub fn sys_exit_raw_btf(ctx: BtfTracePointContext) -> i32 {
    crate::syscalls::raw_exit(ctx.arg::<u64>(0), ctx.arg::<i64>(1));
    0
}

#[tracepoint]
pub fn sys_enter_mprotect(_ctx: TracePointContext) -> u32 {
    crate::syscalls::timed_enter(vmscope_common::kind::MPROTECT);
    0
}

#[tracepoint]
pub fn sys_exit_mprotect(_ctx: TracePointContext) -> u32 {
    crate::syscalls::timed_exit(
        vmscope_common::kind::MPROTECT,
        vmscope_common::hist::MPROTECT,
    );
    0
}

// Reclaim.

macro_rules! reclaim_pair {
    ($begin:ident, $end:ident, $kind:ident, $hist:ident) => {
        #[tracepoint]
        pub fn $begin(_ctx: TracePointContext) -> u32 {
            crate::reclaim::task_begin(vmscope_common::kind::$kind);
            0
        }

        #[tracepoint]
        pub fn $end(_ctx: TracePointContext) -> u32 {
            crate::reclaim::task_end(vmscope_common::kind::$kind, vmscope_common::hist::$hist);
            0
        }
    };
}

reclaim_pair!(
    mm_vmscan_direct_reclaim_begin,
    mm_vmscan_direct_reclaim_end,
    RECLAIM_DIRECT,
    RECLAIM_DIRECT
);
reclaim_pair!(
    mm_vmscan_memcg_reclaim_begin,
    mm_vmscan_memcg_reclaim_end,
    RECLAIM_MEMCG,
    RECLAIM_MEMCG
);
reclaim_pair!(
    mm_vmscan_memcg_softlimit_reclaim_begin,
    mm_vmscan_memcg_softlimit_reclaim_end,
    RECLAIM_MEMCG_SOFTLIMIT,
    RECLAIM_MEMCG_SOFTLIMIT
);
reclaim_pair!(
    mm_vmscan_node_reclaim_begin,
    mm_vmscan_node_reclaim_end,
    RECLAIM_NODE,
    RECLAIM_NODE
);

#[tracepoint]
pub fn mm_shrink_slab_start(_ctx: TracePointContext) -> u32 {
    crate::reclaim::slab_begin();
    0
}

#[tracepoint]
pub fn mm_shrink_slab_end(_ctx: TracePointContext) -> u32 {
    crate::reclaim::slab_end();
    0
}

#[tracepoint]
pub fn mm_vmscan_kswapd_wake(ctx: TracePointContext) -> u32 {
    crate::reclaim::kswapd_wake(&ctx);
    0
}

#[tracepoint]
pub fn mm_vmscan_kswapd_sleep(ctx: TracePointContext) -> u32 {
    crate::reclaim::kswapd_sleep(&ctx);
    0
}

#[tracepoint]
pub fn mm_vmscan_lru_shrink_inactive(ctx: TracePointContext) -> u32 {
    crate::reclaim::shrink_inactive(&ctx);
    0
}

#[tracepoint]
pub fn mm_vmscan_lru_shrink_active(ctx: TracePointContext) -> u32 {
    crate::reclaim::shrink_active(&ctx);
    0
}

#[btf_tracepoint(function = "mm_vmscan_lru_shrink_inactive")]
pub fn mm_vmscan_lru_shrink_inactive_btf(ctx: BtfTracePointContext) -> i32 {
    crate::reclaim::shrink_inactive_btf(ctx.arg::<u64>(1), ctx.arg::<u64>(2), ctx.arg::<u64>(3));
    0
}

#[btf_tracepoint(function = "mm_vmscan_lru_shrink_active")]
pub fn mm_vmscan_lru_shrink_active_btf(ctx: BtfTracePointContext) -> i32 {
    crate::reclaim::shrink_active_of(ctx.arg::<u64>(1), ctx.arg::<u64>(3));
    0
}

/// `(struct folio *folio)`; also attached as `mm_vmscan_writepage(struct
/// page *page)` on kernels before the rename (`flags` first in both).
#[btf_tracepoint(function = "mm_vmscan_write_folio")]
pub fn mm_vmscan_write_folio_btf(ctx: BtfTracePointContext) -> i32 {
    crate::reclaim::write_folio_btf(ctx.arg::<u64>(0));
    0
}

/// Also attached as `mm_vmscan_writepage` on kernels before the rename.
#[tracepoint]
pub fn mm_vmscan_write_folio(ctx: TracePointContext) -> u32 {
    crate::reclaim::write_folio(&ctx);
    0
}

#[tracepoint]
pub fn tlb_flush(ctx: TracePointContext) -> u32 {
    crate::tlb::on_flush(&ctx);
    0
}

/// A memory cgroup's event counted: huge-page faults per process (see
/// `thp.rs`; opt-in).
#[tracepoint]
pub fn count_memcg_events(ctx: TracePointContext) -> u32 {
    crate::thp::on_memcg_event_record(&ctx);
    0
}

/// OOM victims, counted and recorded (see `oom.rs`).
#[tracepoint]
pub fn mark_victim(ctx: TracePointContext) -> u32 {
    crate::oom::on_mark_victim_record(&ctx);
    0
}

/// A writer put to sleep by dirty throttling (see `writeback.rs`).
#[tracepoint]
pub fn balance_dirty_pages(ctx: TracePointContext) -> u32 {
    crate::writeback::on_balance_dirty_pages(&ctx);
    0
}

/// A folio added to the page cache (see `pagecache.rs`).
#[tracepoint]
pub fn mm_filemap_add_to_page_cache(ctx: TracePointContext) -> u32 {
    crate::pagecache::on_add_to_page_cache(&ctx);
    0
}

/// A read's batch of folios from the page cache (see `pagecache.rs`).
#[tracepoint]
pub fn mm_filemap_get_pages(ctx: TracePointContext) -> u32 {
    crate::pagecache::on_get_pages(&ctx);
    0
}

/// Compaction, migration and khugepaged collapses (see `compaction.rs`).
#[tracepoint]
pub fn mm_compaction_try_to_compact_pages(ctx: TracePointContext) -> u32 {
    crate::compaction::on_try_to_compact_pages(&ctx);
    0
}

#[tracepoint]
pub fn mm_compaction_begin(_ctx: TracePointContext) -> u32 {
    crate::compaction::on_compaction_begin();
    0
}

#[tracepoint]
pub fn mm_compaction_end(ctx: TracePointContext) -> u32 {
    crate::compaction::on_compaction_end(&ctx);
    0
}

#[tracepoint]
pub fn mm_compaction_defer_reset(_ctx: TracePointContext) -> u32 {
    crate::compaction::on_defer_reset();
    0
}

#[tracepoint]
pub fn mm_compaction_deferred(_ctx: TracePointContext) -> u32 {
    crate::compaction::on_compaction_deferred();
    0
}

#[tracepoint]
pub fn mm_compaction_kcompactd_wake(ctx: TracePointContext) -> u32 {
    crate::compaction::on_kcompactd_wake(&ctx);
    0
}

#[tracepoint]
pub fn mm_compaction_kcompactd_sleep(ctx: TracePointContext) -> u32 {
    crate::compaction::on_kcompactd_sleep(&ctx);
    0
}

#[tracepoint]
pub fn mm_migrate_pages_start(_ctx: TracePointContext) -> u32 {
    crate::compaction::on_migrate_start();
    0
}

#[tracepoint]
pub fn mm_migrate_pages(ctx: TracePointContext) -> u32 {
    crate::compaction::on_migrate_pages(&ctx);
    0
}

#[tracepoint]
pub fn mm_khugepaged_scan_pmd(_ctx: TracePointContext) -> u32 {
    crate::compaction::on_khugepaged_scan_pmd();
    0
}

#[tracepoint]
pub fn mm_collapse_huge_page(ctx: TracePointContext) -> u32 {
    crate::compaction::on_collapse_huge_page(&ctx);
    0
}

/// mmap_lock acquisitions and releases (see `mmaplock.rs`).
#[tracepoint]
pub fn mmap_lock_start_locking(ctx: TracePointContext) -> u32 {
    crate::mmaplock::on_start_locking(&ctx);
    0
}

#[tracepoint]
pub fn mmap_lock_acquire_returned(ctx: TracePointContext) -> u32 {
    crate::mmaplock::on_acquire_returned(&ctx);
    0
}

#[tracepoint]
pub fn mmap_lock_released(ctx: TracePointContext) -> u32 {
    crate::mmaplock::on_released(&ctx);
    0
}

/// A task moved between cgroups (see `cgroup.rs`).
#[tracepoint]
pub fn cgroup_attach_task(ctx: TracePointContext) -> u32 {
    crate::cgroup::on_attach_record(&ctx);
    0
}

/// A cgroup created (see `cgroup.rs`).
#[tracepoint]
pub fn cgroup_mkdir(ctx: TracePointContext) -> u32 {
    crate::cgroup::on_dir(&ctx, vmscope_common::cgroup_event::CREATED);
    0
}

/// A cgroup removed.
#[tracepoint]
pub fn cgroup_rmdir(ctx: TracePointContext) -> u32 {
    crate::cgroup::on_dir(&ctx, vmscope_common::cgroup_event::REMOVED);
    0
}

// The same hooks as BTF tracepoints where the kernel allows: no trace
// record is built per event, and detaching them waits for nothing. The
// loader tries these first and falls back to the classic ones above.

/// `tlb_flush(int reason, unsigned long pages)`.
#[btf_tracepoint(function = "tlb_flush")]
pub fn tlb_flush_btf(ctx: BtfTracePointContext) -> i32 {
    crate::tlb::on_flush_of(ctx.arg::<i32>(0), ctx.arg::<u64>(1));
    0
}

/// `count_memcg_events(struct mem_cgroup *memcg, int item, unsigned long
/// val)`.
#[btf_tracepoint(function = "count_memcg_events")]
pub fn count_memcg_events_btf(ctx: BtfTracePointContext) -> i32 {
    crate::thp::on_memcg_event(ctx.arg::<i32>(1), ctx.arg::<u64>(2));
    0
}

/// `mm_filemap_delete_from_page_cache(struct folio *folio)`: page-cache
/// removals, evictions apart, per memory cgroup (see `pagecache.rs`).
#[btf_tracepoint(function = "mm_filemap_delete_from_page_cache")]
pub fn mm_filemap_delete_from_page_cache_btf(ctx: BtfTracePointContext) -> i32 {
    crate::pagecache::on_delete_from_page_cache(ctx.arg::<u64>(0) as usize);
    0
}

/// `mark_victim(struct task_struct *task, uid_t uid)` (`(int pid)` on older
/// kernels; no argument is read).
#[btf_tracepoint(function = "mark_victim")]
pub fn mark_victim_btf(_ctx: BtfTracePointContext) -> i32 {
    crate::oom::on_mark_victim();
    0
}

#[btf_tracepoint(function = "cgroup_attach_task")]
pub fn cgroup_attach_task_btf(_ctx: BtfTracePointContext) -> i32 {
    crate::cgroup::on_attach();
    0
}

/// `sched_process_fork(struct task_struct *parent, struct task_struct *child)`.
#[btf_tracepoint(function = "sched_process_fork")]
pub fn sched_process_fork_btf(ctx: BtfTracePointContext) -> i32 {
    crate::filter::on_fork_btf(&ctx, ctx.arg::<u64>(1));
    0
}

#[btf_tracepoint(function = "sched_process_exec")]
pub fn sched_process_exec_btf(_ctx: BtfTracePointContext) -> i32 {
    crate::faults::on_exec();
    0
}

/// `mm_vmscan_kswapd_wake(int nid, int zid, int order)`.
#[btf_tracepoint(function = "mm_vmscan_kswapd_wake")]
pub fn mm_vmscan_kswapd_wake_btf(ctx: BtfTracePointContext) -> i32 {
    crate::reclaim::kswapd_wake_on(ctx.arg::<i32>(0));
    0
}

/// `mm_vmscan_kswapd_sleep(int nid)`.
#[btf_tracepoint(function = "mm_vmscan_kswapd_sleep")]
pub fn mm_vmscan_kswapd_sleep_btf(ctx: BtfTracePointContext) -> i32 {
    crate::reclaim::kswapd_sleep_on(ctx.arg::<i32>(0));
    0
}

#[btf_tracepoint(function = "mm_shrink_slab_start")]
pub fn mm_shrink_slab_start_btf(_ctx: BtfTracePointContext) -> i32 {
    crate::reclaim::slab_begin();
    0
}

#[btf_tracepoint(function = "mm_shrink_slab_end")]
pub fn mm_shrink_slab_end_btf(_ctx: BtfTracePointContext) -> i32 {
    crate::reclaim::slab_end();
    0
}

// Reclaim begin/end pairs need only the time and the task.
macro_rules! reclaim_pair_btf {
    ($begin:ident, $begin_event:literal, $end:ident, $end_event:literal, $kind:ident) => {
        #[btf_tracepoint(function = $begin_event)]
        pub fn $begin(_ctx: BtfTracePointContext) -> i32 {
            crate::reclaim::task_begin(vmscope_common::kind::$kind);
            0
        }

        #[btf_tracepoint(function = $end_event)]
        pub fn $end(_ctx: BtfTracePointContext) -> i32 {
            crate::reclaim::task_end(vmscope_common::kind::$kind, vmscope_common::hist::$kind);
            0
        }
    };
}

reclaim_pair_btf!(
    mm_vmscan_direct_reclaim_begin_btf,
    "mm_vmscan_direct_reclaim_begin",
    mm_vmscan_direct_reclaim_end_btf,
    "mm_vmscan_direct_reclaim_end",
    RECLAIM_DIRECT
);
reclaim_pair_btf!(
    mm_vmscan_memcg_reclaim_begin_btf,
    "mm_vmscan_memcg_reclaim_begin",
    mm_vmscan_memcg_reclaim_end_btf,
    "mm_vmscan_memcg_reclaim_end",
    RECLAIM_MEMCG
);
reclaim_pair_btf!(
    mm_vmscan_memcg_softlimit_reclaim_begin_btf,
    "mm_vmscan_memcg_softlimit_reclaim_begin",
    mm_vmscan_memcg_softlimit_reclaim_end_btf,
    "mm_vmscan_memcg_softlimit_reclaim_end",
    RECLAIM_MEMCG_SOFTLIMIT
);
reclaim_pair_btf!(
    mm_vmscan_node_reclaim_begin_btf,
    "mm_vmscan_node_reclaim_begin",
    mm_vmscan_node_reclaim_end_btf,
    "mm_vmscan_node_reclaim_end",
    RECLAIM_NODE
);
