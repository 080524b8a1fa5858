//! Types shared by vmscope's eBPF programs and its user-space collector.
//!
//! Everything here is `#[repr(C)]`, padding-free and `Copy`, so the two sides
//! agree on layout byte for byte; the size assertions below pin that down.
#![no_std]

pub mod fault;
pub mod madvise;
pub mod sample;

pub use fault::{FAULT_CLASSES, fault_class, fault_class_name};

/// Capacity of the per-process statistics map (LRU: the least recently
/// updated process is evicted when full; evictions are counted by user space
/// as `inserts - live entries`).
pub const MAX_PROCS: u32 = 10240;

/// Capacity of the per-thread fault books (LRU: a thread's entry goes at
/// its exit; an evicted one restarts from its next slice).
pub const MAX_TASK_BOOKS: u32 = 16384;

/// Capacity of the set of followed tgids (the wrapped command's tree, or `-p`).
pub const MAX_TRACKED: u32 = 65536;

/// Capacity of the map of operations in flight (begin seen, end pending).
pub const MAX_INFLIGHT: u32 = 16384;

/// Buckets per latency histogram: bucket `b` holds durations in
/// `[2^(b-1), 2^b)` nanoseconds (bucket 0 holds 0 ns).
pub const HIST_BUCKETS: u32 = 64;

/// Log2 bucket of a duration in nanoseconds.
#[inline(always)]
pub fn hist_bucket(ns: u64) -> u32 {
    let b = 64 - ns.leading_zeros();
    if b >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        b
    }
}

/// One latency histogram in `HISTS` (entry `id`): `HIST_BUCKETS` log2-ns
/// buckets, then the sum of nanoseconds at `HIST_SUM`. One entry holds a
/// whole histogram, so user space reads each with one lookup.
pub type HistSlot = [u64; HIST_BUCKETS as usize + 1];
pub const HIST_SUM: usize = HIST_BUCKETS as usize;

/// `COUNTERS` is one per-CPU entry of this many slots (a power of two, so
/// an index is bounded by a mask the verifier can follow), read in one
/// lookup.
pub const COUNTER_SLOTS: u32 = 256;
pub type CounterSlots = [u64; COUNTER_SLOTS as usize];
const _: () = assert!(counter::COUNT <= COUNTER_SLOTS && COUNTER_SLOTS.is_power_of_two());

/// Latency histograms, by id (entries of `HISTS`, see `HistSlot`).
pub mod hist {
    pub const RECLAIM_DIRECT: u32 = 0;
    pub const RECLAIM_MEMCG: u32 = 1;
    pub const RECLAIM_MEMCG_SOFTLIMIT: u32 = 2;
    pub const RECLAIM_NODE: u32 = 3;
    pub const KSWAPD_ACTIVE: u32 = 4;
    pub const SHRINK_SLAB: u32 = 5;
    pub const MUNMAP: u32 = 6;
    pub const MPROTECT: u32 = 7;
    pub const PROCESS_MADVISE: u32 = 8;
    /// One histogram per madvise behaviour slot (see `madvise::slot`).
    pub const MADVISE_BASE: u32 = 9;
    /// Page-fault handling time (`handle_mm_fault`, fentry/fexit): minor
    /// anon, minor file, major anon, major file (`FAULT_BASE + 2 * major +
    /// file`).
    pub const FAULT_BASE: u32 = MADVISE_BASE + crate::madvise::SLOTS;
    pub const FAULT_KINDS: u32 = 4;
    /// Dirty throttling: each pause `balance_dirty_pages` put a writer to
    /// sleep for (`writeback:balance_dirty_pages`).
    pub const DIRTY_PAUSE: u32 = FAULT_BASE + FAULT_KINDS;
    /// mmap_lock: the wait from `mmap_lock_start_locking` to
    /// `mmap_lock_acquire_returned`, for a read and for a write lock, and
    /// how long a write lock was held (acquired to released or downgraded).
    pub const MMAP_LOCK_WAIT_READ: u32 = DIRTY_PAUSE + 1;
    pub const MMAP_LOCK_WAIT_WRITE: u32 = MMAP_LOCK_WAIT_READ + 1;
    pub const MMAP_LOCK_WRITE_HOLD: u32 = MMAP_LOCK_WAIT_WRITE + 1;
    /// Direct compaction: each compaction run (`mm_compaction_begin` to
    /// `_end`) inside an allocation's `try_to_compact_pages`.
    pub const COMPACTION_DIRECT: u32 = MMAP_LOCK_WRITE_HOLD + 1;
    /// kcompactd active periods, wake to sleep (per node).
    pub const KCOMPACTD_ACTIVE: u32 = COMPACTION_DIRECT + 1;
    /// Page migration calls (`mm_migrate_pages_start` to `mm_migrate_pages`).
    pub const MIGRATE: u32 = KCOMPACTD_ACTIVE + 1;
    pub const COUNT: u32 = MIGRATE + 1;
}

/// Kinds of in-flight operation, the low byte of an `INFLIGHT` key.
pub mod kind {
    pub const MADVISE: u64 = 1;
    pub const PROCESS_MADVISE: u64 = 2;
    pub const MUNMAP: u64 = 3;
    pub const MPROTECT: u64 = 4;
    pub const RECLAIM_DIRECT: u64 = 5;
    pub const RECLAIM_MEMCG: u64 = 6;
    pub const RECLAIM_MEMCG_SOFTLIMIT: u64 = 7;
    pub const RECLAIM_NODE: u64 = 8;
    pub const SHRINK_SLAB: u64 = 9;
    /// Keyed by node id, not task: kswapd is woken by one task and sleeps in another.
    pub const KSWAPD: u64 = 10;
    // 11 to 13 marked the syscalls that zap a task's own mappings, which
    // the swap probe now reads from the task's registers.
    /// Inside an allocation's direct compaction (`try_to_compact_pages`):
    /// `arg0` the order, `arg1` the start of the compaction run under way.
    pub const COMPACT_DIRECT: u64 = 14;
    /// Keyed by node id, like `KSWAPD`.
    pub const KCOMPACTD: u64 = 15;
    pub const MIGRATE: u64 = 16;
}

/// An operation whose begin was seen: start time and up to two arguments.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inflight {
    pub start_ns: u64,
    pub arg0: u64,
    pub arg1: u64,
}

const _: () = assert!(core::mem::size_of::<Inflight>() == 24);
// Counter ranges must not overlap.
const _: () = assert!(counter::MM_INSERTS < counter::MADVISE_CALLS_BASE);
const _: () = assert!(counter::TLB_REASON_BASE + counter::TLB_REASONS <= counter::TLB_PAGES);

/// Indices into the `OFFSETS` global: tracepoint field offsets read from
/// tracefs at load time.
pub mod off {
    pub const PF_ERROR_CODE: usize = 0;
    pub const FORK_CHILD_PID: usize = 1;
    pub const MADVISE_LEN: usize = 2;
    pub const MADVISE_BEHAVIOR: usize = 3;
    pub const SYS_EXIT_RET: usize = 4;
    pub const PROCESS_MADVISE_BEHAVIOR: usize = 5;
    pub const TLB_REASON: usize = 6;
    pub const TLB_PAGES: usize = 7;
    pub const LRU_INACTIVE_SCANNED: usize = 8;
    pub const LRU_INACTIVE_RECLAIMED: usize = 9;
    pub const LRU_INACTIVE_DIRTY: usize = 10;
    pub const LRU_INACTIVE_WRITEBACK: usize = 11;
    pub const LRU_INACTIVE_IMMEDIATE: usize = 12;
    pub const LRU_INACTIVE_UNMAP_FAIL: usize = 13;
    pub const LRU_ACTIVE_TAKEN: usize = 14;
    pub const LRU_ACTIVE_DEACTIVATED: usize = 15;
    pub const WRITE_FOLIO_FLAGS: usize = 16;
    pub const KSWAPD_WAKE_NID: usize = 17;
    pub const KSWAPD_SLEEP_NID: usize = 18;
    pub const RSS_MM_ID: usize = 19;
    pub const RSS_CURR: usize = 20;
    pub const RSS_MEMBER: usize = 21;
    pub const RSS_SIZE: usize = 22;
    /// `task_struct.min_flt` (BTF); `maj_flt` follows it (the loader checks).
    pub const TASK_FLT: usize = 23;
    /// `task_struct.flags` (BTF).
    pub const TASK_FLAGS: usize = 24;
    /// For the BTF `rss_stat` program (kernels with per-CPU RSS counters):
    /// `mm_struct.rss_stat[MM_SWAPENTS]` (a `struct percpu_counter`).
    pub const MM_SWAPENTS_COUNTER: usize = 25;
    /// `percpu_counter.count` and `.counters` (the `s32 __percpu *`).
    pub const PCPU_COUNT: usize = 26;
    pub const PCPU_COUNTERS: usize = 27;
    /// `mm_struct.owner`, `task_struct.tgid`, `task_struct.mm`.
    pub const MM_OWNER: usize = 28;
    pub const TASK_TGID: usize = 29;
    pub const TASK_MM: usize = 30;
    /// `bpf_array.pptrs`: where a per-CPU array keeps its per-CPU pointers.
    pub const ARRAY_PPTRS: usize = 31;
    /// Possible CPUs (at most `MAX_CPUS`).
    pub const NR_CPUS: usize = 32;
    /// log2 of the page size.
    pub const PAGE_SHIFT: usize = 33;
    /// `vm_area_struct.vm_file` (BTF): null for anonymous memory.
    pub const VMA_FILE: usize = 34;
    /// `task_struct.pid` (BTF), for the BTF `sched_process_fork` program.
    pub const TASK_PID: usize = 35;
    /// Which syscalls the raw `sys_enter`/`sys_exit` programs follow: a
    /// `raw_syscall` bit set (0: none; the syscall events are used).
    pub const RAW_SYSCALLS: usize = 36;
    /// `struct reclaim_stat` fields (BTF, 4 bytes each), for the BTF
    /// `mm_vmscan_lru_shrink_inactive` program.
    pub const RSTAT_DIRTY: usize = 37;
    pub const RSTAT_WRITEBACK: usize = 38;
    pub const RSTAT_IMMEDIATE: usize = 39;
    pub const RSTAT_UNMAP_FAIL: usize = 40;
    /// `folio.flags` (or `page.flags`) and the `PG_swapbacked` bit (BTF),
    /// for the BTF write-back program: a folio without it is file-backed.
    pub const FOLIO_FLAGS: usize = 41;
    pub const PG_SWAPBACKED: usize = 42;
    /// BTF: `task_struct.signal` and `signal_struct.live` (the exit hook
    /// tells a process's last thread from the others by `live == 0`).
    pub const TASK_SIGNAL: usize = 43;
    pub const SIGNAL_LIVE: usize = 44;
    /// BTF: `task_struct.group_leader` and `task_struct.start_time`: an
    /// exited process's entry older than the current process's start
    /// belongs to an earlier process under the same pid.
    pub const TASK_GROUP_LEADER: usize = 45;
    pub const TASK_START_TIME: usize = 46;
    /// `oom:mark_victim` record fields (classic tracepoint); 0 where this
    /// kernel's record lacks the field (offset 0 is `common_type`, never
    /// one of these).
    pub const OOM_PID: usize = 47;
    pub const OOM_TOTAL_VM: usize = 48;
    pub const OOM_ANON_RSS: usize = 49;
    pub const OOM_FILE_RSS: usize = 50;
    pub const OOM_SHMEM_RSS: usize = 51;
    pub const OOM_UID: usize = 52;
    pub const OOM_PGTABLES: usize = 53;
    pub const OOM_SCORE_ADJ: usize = 54;
    /// `comm`: the offset of a `char comm[16]` array, or of a `__data_loc`
    /// word (`OOM_COMM_DATA_LOC` 1).
    pub const OOM_COMM: usize = 55;
    pub const OOM_COMM_DATA_LOC: usize = 56;
    /// How a process's cgroup key is read (`cgroup_mode`).
    pub const CGROUP_MODE: usize = 57;
    /// BTF, for `cgroup_mode::V1_MEMCG`: `task_struct.cgroups`, the memory
    /// controller's slot in `css_set.subsys[]` (its offset: the array's
    /// plus 8 × `memory_cgrp_id`), `cgroup_subsys_state.cgroup`,
    /// `cgroup.kn` and `kernfs_node.id`. Any may be 0 (a first field).
    pub const TASK_CGROUPS: usize = 58;
    pub const CSS_SET_MEMORY: usize = 59;
    pub const CSS_CGROUP: usize = 60;
    pub const CGROUP_KN: usize = 61;
    pub const KN_ID: usize = 62;
    /// `cgroup:cgroup_attach_task` record fields (classic tracepoint):
    /// the destination's hierarchy id and its path's `__data_loc` word,
    /// and the moved task.
    pub const ATTACH_DST_ROOT: usize = 63;
    pub const ATTACH_DST_PATH: usize = 64;
    pub const ATTACH_PID: usize = 65;
    /// The hierarchy id cgroup keys belong to (v1: the memory
    /// controller's, from /proc/cgroups; v2: 0), plus one (0: unset).
    pub const CGROUP_HIERARCHY: usize = 66;
    /// `writeback:balance_dirty_pages` record: `pause` (ms, signed).
    pub const BDP_PAUSE: usize = 67;
    /// `mmap_lock:*` records: `write` of start_locking, acquire_returned
    /// and released, and `success` of acquire_returned (bools).
    pub const MMAP_START_WRITE: usize = 68;
    pub const MMAP_ACQ_WRITE: usize = 69;
    pub const MMAP_ACQ_SUCCESS: usize = 70;
    pub const MMAP_REL_WRITE: usize = 71;
    /// Their `mm` (the address space), of acquire_returned and released.
    pub const MMAP_ACQ_MM: usize = 72;
    pub const MMAP_REL_MM: usize = 73;
    /// `compaction:mm_compaction_try_to_compact_pages` `order`;
    /// `mm_compaction_end` `status`, and the value that means success plus
    /// one (from the record's print format; 0: unknown).
    pub const COMPACT_TRY_ORDER: usize = 74;
    pub const COMPACT_END_STATUS: usize = 75;
    pub const COMPACT_SUCCESS_VALUE: usize = 76;
    /// `mm_compaction_kcompactd_wake` and `_sleep` `nid`.
    pub const KCOMPACTD_WAKE_NID: usize = 77;
    pub const KCOMPACTD_SLEEP_NID: usize = 78;
    /// `migrate:mm_migrate_pages` `succeeded`, `failed` and `reason`.
    pub const MIGRATE_SUCCEEDED: usize = 79;
    pub const MIGRATE_FAILED: usize = 80;
    pub const MIGRATE_REASON: usize = 81;
    /// `huge_memory:mm_collapse_huge_page` `status`, and the value that
    /// means success plus one.
    pub const COLLAPSE_STATUS: usize = 82;
    pub const COLLAPSE_SUCCESS_VALUE: usize = 83;
    /// `cgroup:cgroup_mkdir` and `cgroup_rmdir` record fields (one format):
    /// the hierarchy id, the cgroup id, and the `__data_loc` word of its
    /// path.
    pub const CGROUP_DIR_ROOT: usize = 84;
    pub const CGROUP_DIR_ID: usize = 85;
    pub const CGROUP_DIR_PATH: usize = 86;
    /// `filemap:mm_filemap_add_to_page_cache` `order` (kernels before 6.4
    /// have none: each event is then one folio, counted as one page).
    pub const FILEMAP_ADD_ORDER: usize = 87;
    /// `filemap:mm_filemap_get_pages` (6.11 on): the file (`i_ino`,
    /// `s_dev`) and the page range a read asked the cache for (`index`,
    /// `last_index`, both included).
    pub const FILEMAP_READ_INO: usize = 88;
    pub const FILEMAP_READ_DEV: usize = 89;
    pub const FILEMAP_READ_INDEX: usize = 90;
    pub const FILEMAP_READ_LAST: usize = 91;
    /// `cgroup:cgroup_attach_task` `dst_id`: the destination's id, which
    /// is the moved process's new cgroup key.
    pub const ATTACH_DST_ID: usize = 92;
    /// Byte offsets in the saved user registers (`struct pt_regs`) of the
    /// syscall number (x86-64's `orig_ax`) and of the third argument
    /// (`dx`): set on x86-64 only, where the swap probe reads them.
    pub const PT_REGS_SYSCALL_NR: usize = 93;
    pub const PT_REGS_ARG3: usize = 94;
    /// `memcg:count_memcg_events` (6.16 on) `item` and `val` (the classic
    /// record's; the BTF program reads its arguments).
    pub const MEMCG_EVENT_ITEM: usize = 95;
    pub const MEMCG_EVENT_VAL: usize = 96;
    /// `enum vm_event_item`'s `THP_FAULT_ALLOC` plus one, from the kernel's
    /// BTF (0: unknown, and nothing is counted).
    pub const THP_FAULT_ALLOC_ITEM: usize = 97;
    /// Where a page-cache folio names its memory cgroup and its size, from
    /// the kernel's BTF: `folio.memcg_data` (0: unknown, and the removal
    /// hook is not attached), the `PG_head` bit of `folio.flags`, the
    /// large folio's page count (`_nr_pages`, `_folio_nr_pages` before
    /// 6.16; a 4-byte field), and `mem_cgroup.css`, from which the cgroup
    /// id is read as v1 attribution reads it (`CSS_CGROUP`, `CGROUP_KN`,
    /// `KN_ID`).
    pub const FOLIO_MEMCG_DATA: usize = 98;
    pub const PG_HEAD: usize = 99;
    pub const FOLIO_NR_PAGES: usize = 100;
    pub const MEMCG_CSS: usize = 101;
    /// `mm_struct.context.ctx_id`, an id no other mm since boot has had
    /// (x86-64; 0: not here): the BTF swap program keys its per-mm map by
    /// it, so that a new mm at a dead one's address gets an entry of its
    /// own.
    pub const MM_CTX_ID: usize = 102;
    pub const COUNT: usize = 103;
}

/// x86-64 syscall numbers (a user-space ABI) of the calls vmscope follows.
pub mod syscall {
    pub const MMAP: u64 = 9;
    pub const MPROTECT: u64 = 10;
    pub const MUNMAP: u64 = 11;
    pub const BRK: u64 = 12;
    pub const MREMAP: u64 = 25;
    pub const MADVISE: u64 = 28;
    pub const PROCESS_MADVISE: u64 = 440;
}

/// The syscalls followed through the raw `sys_enter`/`sys_exit` BTF
/// tracepoints when their own events cannot be used (tracefs unreadable):
/// one bit each in `OFFSETS[off::RAW_SYSCALLS]`.
pub mod raw_syscall {
    pub const MADVISE: u32 = 1 << 0;
    pub const PROCESS_MADVISE: u32 = 1 << 1;
    pub const MUNMAP: u32 = 1 << 2;
    pub const MPROTECT: u32 = 1 << 3;

    /// The bit of the call a syscall event is named for (`sys_enter_NAME`
    /// or `sys_exit_NAME`), if it is one of these.
    pub fn of(call: &str) -> Option<u32> {
        Some(match call {
            "madvise" => MADVISE,
            "process_madvise" => PROCESS_MADVISE,
            "munmap" => MUNMAP,
            "mprotect" => MPROTECT,
            _ => return None,
        })
    }
}

/// Indices into the per-CPU `COUNTERS` array: system-wide counters (and
/// scope-filtered ones for syscall-driven metrics, see docs/counting.md).
pub mod counter {
    /// User-mode page faults, by class: `USER_FAULT_BASE + fault_class(err)`.
    pub const USER_FAULT_BASE: u32 = 0;
    /// Kernel-mode page faults (on any address), by class.
    pub const KERNEL_FAULT_BASE: u32 = 6;
    /// Faults counted by the perf software-event fallback (no error code).
    pub const FAULT_UNCLASSIFIED: u32 = 12;
    /// New entries created in the per-process map (for eviction accounting).
    pub const PROC_INSERTS: u32 = 13;
    /// Children that could not be followed because the tracked set was full.
    pub const TRACKED_FULL: u32 = 14;
    /// Begin events dropped because the in-flight map was full.
    pub const INFLIGHT_FULL: u32 = 15;
    /// `tlb_flush` by reason 0..=5; `TLB_REASON_BASE + 6` counts other values.
    pub const TLB_REASON_BASE: u32 = 16;
    pub const TLB_REASONS: u32 = 7;
    /// Pages flushed by ranged flushes.
    pub const TLB_PAGES: u32 = 23;
    /// Full flushes (pages == -1).
    pub const TLB_FULL: u32 = 24;
    pub const LRU_SCANNED: u32 = 25;
    pub const LRU_RECLAIMED: u32 = 26;
    pub const LRU_DIRTY: u32 = 27;
    pub const LRU_WRITEBACK: u32 = 28;
    pub const LRU_IMMEDIATE: u32 = 29;
    pub const LRU_UNMAP_FAIL: u32 = 30;
    pub const LRU_ACTIVE_TAKEN: u32 = 31;
    pub const LRU_ACTIVE_DEACTIVATED: u32 = 32;
    pub const WRITE_ANON: u32 = 33;
    pub const WRITE_FILE: u32 = 34;
    pub const PROCESS_MADVISE_ERRORS: u32 = 35;
    /// Major faults (perf software event), system-wide.
    pub const MAJOR_FAULTS: u32 = 36;
    /// `rss_stat` MM_SWAPENTS events whose mm was new to the per-mm map
    /// (its first change cannot be sized, so it is not counted).
    pub const SWAP_UNSIZED: u32 = 37;
    /// New entries created in the per-mm map (for eviction accounting).
    pub const MM_INSERTS: u32 = 38;
    /// Processes whose last thread exited (`sched_process_exit` with the
    /// thread group dead); user space then prunes their entries.
    pub const PROC_EXITS: u32 = 39;

    /// madvise per behaviour slot: calls, bytes, errors.
    pub const MADVISE_CALLS_BASE: u32 = 40;
    pub const MADVISE_BYTES_BASE: u32 = MADVISE_CALLS_BASE + crate::madvise::SLOTS;
    pub const MADVISE_ERRORS_BASE: u32 = MADVISE_BYTES_BASE + crate::madvise::SLOTS;
    /// A process found an exited process's entry under its reused pid
    /// before user space pruned it: the entry was started afresh, and the
    /// exited process's counts since the previous read were dropped.
    pub const PROC_REUSED: u32 = MADVISE_ERRORS_BASE + crate::madvise::SLOTS;
    /// Entries taken out of the followed set as their task exited.
    pub const TRACKED_REMOVED: u32 = PROC_REUSED + 1;
    /// OOM victims the kernel marked (`oom:mark_victim`), system-wide.
    pub const OOM_KILLS: u32 = TRACKED_REMOVED + 1;
    /// OOM-victim records lost: the ring buffer was full.
    pub const OOM_RECORDS_LOST: u32 = OOM_KILLS + 1;
    /// Tasks moved between cgroups (`cgroup:cgroup_attach_task`): each
    /// move makes every process re-read its cgroup key at its next event.
    pub const CGROUP_MOVES: u32 = OOM_RECORDS_LOST + 1;
    /// Slices of a followed thread whose switch-in on that CPU was not seen
    /// (the kernel switched to it without the tracepoint, or it was running
    /// at attach), caught up from the thread's fault books.
    pub const SWITCH_IN_UNSEEN: u32 = CGROUP_MOVES + 1;
    /// mmap_lock acquisitions that failed: a trylock that found the lock
    /// taken, or a killable wait interrupted.
    pub const MMAP_LOCK_FAILED: u32 = SWITCH_IN_UNSEEN + 1;
    /// Direct compactions (`try_to_compact_pages` calls), those after
    /// which the allocation got its page, and compaction runs in them (and
    /// those of them that ended in success) and elsewhere (kcompactd,
    /// proactive, `compact_memory`).
    pub const COMPACT_DIRECT: u32 = MMAP_LOCK_FAILED + 1;
    pub const COMPACT_DIRECT_SUCCESS: u32 = COMPACT_DIRECT + 1;
    pub const COMPACT_RUNS_DIRECT_SUCCESS: u32 = COMPACT_DIRECT_SUCCESS + 1;
    pub const COMPACT_RUNS_DIRECT: u32 = COMPACT_RUNS_DIRECT_SUCCESS + 1;
    pub const COMPACT_RUNS_BACKGROUND: u32 = COMPACT_RUNS_DIRECT + 1;
    /// Zones skipped because compaction there was deferred.
    pub const COMPACT_DEFERRED: u32 = COMPACT_RUNS_BACKGROUND + 1;
    /// Direct compactions by the order asked for, the last slot for
    /// `COMPACT_ORDERS - 1` and above.
    pub const COMPACT_ORDER_BASE: u32 = COMPACT_DEFERRED + 1;
    pub const COMPACT_ORDERS: u32 = 11;
    pub const KCOMPACTD_WAKES: u32 = COMPACT_ORDER_BASE + COMPACT_ORDERS;
    /// Pages migrated and pages that failed to, by `enum migrate_reason`
    /// (the last slot for `MIGRATE_REASONS - 1` and above).
    pub const MIGRATE_SUCCEEDED_BASE: u32 = KCOMPACTD_WAKES + 1;
    pub const MIGRATE_REASONS: u32 = 12;
    pub const MIGRATE_FAILED_BASE: u32 = MIGRATE_SUCCEEDED_BASE + MIGRATE_REASONS;
    /// khugepaged collapse attempts, and those that succeeded.
    pub const THP_COLLAPSES: u32 = MIGRATE_FAILED_BASE + MIGRATE_REASONS;
    pub const THP_COLLAPSE_SUCCEEDED: u32 = THP_COLLAPSES + 1;
    /// Page tables khugepaged (or MADV_COLLAPSE) scanned for a collapse.
    pub const KHUGEPAGED_SCANS: u32 = THP_COLLAPSE_SUCCEEDED + 1;
    /// `handle_mm_fault` calls that returned VM_FAULT_RETRY (a first
    /// attempt that dropped the mmap lock to wait, or a per-VMA-lock
    /// attempt falling back to mmap_lock): never in the task's faults; in
    /// pgfault on kernels that count every attempt (6.1), not on those that
    /// count completed ones (6.12).
    pub const FAULT_RETRIES: u32 = KHUGEPAGED_SCANS + 1;
    /// `handle_mm_fault` returns whose start was not found (the fault began
    /// before attach, or its sleeping record was evicted): not timed.
    pub const FAULT_UNTIMED: u32 = FAULT_RETRIES + 1;
    /// `handle_mm_fault` calls timed into the fault latency histograms:
    /// with the two above, every call, each counted where pgfault is.
    pub const FAULT_TIMED: u32 = FAULT_UNTIMED + 1;
    /// Cgroup creations and removals not reported: the ring buffer was
    /// full (user space then walks the hierarchy for names).
    pub const CGROUP_EVENTS_LOST: u32 = FAULT_TIMED + 1;
    /// Pages added to the page cache (`filemap:mm_filemap_add_to_page_cache`:
    /// reads that missed, readahead, writes to pages not cached).
    pub const PAGE_CACHE_ADDED: u32 = CGROUP_EVENTS_LOST + 1;
    /// Pages reads asked the page cache for (`filemap:mm_filemap_get_pages`:
    /// read, pread, readv, splice and sendfile on files the page cache
    /// serves), each page once per call.
    pub const PAGE_CACHE_READ: u32 = PAGE_CACHE_ADDED + 1;
    /// Pages removed from the page cache by reclaim (the removing task
    /// has `PF_MEMALLOC`: kswapd, direct and cgroup-limit reclaim,
    /// MADV_PAGEOUT, the inode shrinker): evictions, system-wide.
    pub const PAGE_CACHE_EVICTED: u32 = PAGE_CACHE_READ + 1;
    /// Pages removed from the page cache otherwise (truncation, deletion,
    /// invalidation such as POSIX_FADV_DONTNEED or drop_caches).
    pub const PAGE_CACHE_DROPPED: u32 = PAGE_CACHE_EVICTED + 1;
    /// Removals whose folio named no memory cgroup, or whose cgroup's
    /// entry could not be made (the map full): in the two above, in no
    /// cgroup's.
    pub const PAGE_CACHE_REMOVED_UNCHARGED: u32 = PAGE_CACHE_DROPPED + 1;
    /// Swap-entry changes the BTF swap probe sized by summing every
    /// possible CPU's part of the mm's counter (its slow path: the first
    /// change seen on a CPU, or after the counter's shared count moved),
    /// where the others read only the current CPU's part.
    pub const SWAP_SUMMED: u32 = PAGE_CACHE_REMOVED_UNCHARGED + 1;
    /// Number of slots in the array.
    pub const COUNT: u32 = SWAP_SUMMED + 1;
}

/// Fault counts of the process last seen faulting on one CPU, not yet added
/// to its `ProcStats` entry: the page-fault path then touches only this
/// per-CPU slot until another process faults on the CPU. User space adds
/// the slots of every CPU to `PROCS` when it reads; `generation` is odd while a
/// slot is being moved into `PROCS` and changes with every move, so a reader
/// can tell whether it saw a consistent state.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCache {
    pub tgid: u32,
    /// `cache_flags::*`.
    pub flags: u32,
    pub generation: u64,
    /// User faults by class, then kernel faults by class, then unclassified.
    pub counts: [u64; 2 * FAULT_CLASSES + 1],
    /// The followed set's epoch (`TRACK_EPOCH`) when `tgid` was last found
    /// out of scope: until it changes, that answer stands, and the faults
    /// of processes outside the tree skip the followed-set lookup.
    pub epoch: u64,
}

pub mod cache_flags {
    /// `tgid` is meaningful.
    pub const VALID: u32 = 1;
    /// `tgid` is in scope: its faults are counted.
    pub const IN_SCOPE: u32 = 2;
}

const _: () = assert!(core::mem::size_of::<FaultCache>() == 24 + 8 * (2 * FAULT_CLASSES + 1));

/// The most CPUs the BTF `rss_stat` program sums per-CPU counters over;
/// machines with more use the classic event.
pub const MAX_CPUS: u32 = 256;

/// Room for the cgroup path a `--cgroup` recording follows (with its
/// NUL): a task moved into it or below it joins the followed set.
pub const SCOPE_PATH_BYTES: usize = 512;

/// The followed cgroup's path, below the hierarchy's root; `len` (bytes
/// before the NUL) 0 when no cgroup is followed.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScopePath {
    pub len: u64,
    pub path: [u8; SCOPE_PATH_BYTES],
    /// Per 8-byte word of `path`, the bits of its bytes before `len`
    /// ([`ScopePath::new`]): the kernel side compares a path word by word
    /// with no branch on `len`, which older verifiers (6.1) cannot bound.
    pub mask: [u64; SCOPE_PATH_BYTES / 8],
}

impl ScopePath {
    /// `path` (shorter than [`SCOPE_PATH_BYTES`]) with its masks.
    pub fn new(path: &[u8]) -> Self {
        let n = path.len().min(SCOPE_PATH_BYTES - 1);
        let mut v = ScopePath {
            len: n as u64,
            path: [0; SCOPE_PATH_BYTES],
            mask: [0; SCOPE_PATH_BYTES / 8],
        };
        v.path[..n].copy_from_slice(&path[..n]);
        for (w, m) in v.mask.iter_mut().enumerate() {
            let bytes = n.saturating_sub(w * 8).min(8);
            *m = if bytes == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * bytes)) - 1
            };
        }
        v
    }
}

/// Capacity of the per-mm swap map (LRU).
pub const MAX_MMS: u32 = 16384;

/// `member` of `kmem:rss_stat` for swap entries.
pub const MM_SWAPENTS: i32 = 2;

/// Swap traffic of one address space, keyed by the `mm_id` hash that
/// `kmem:rss_stat` reports (the classic event) or the mm's address (the BTF
/// program). Its owner's tgid is learned from events the mm's
/// own tasks cause (`curr == 1`); 0 while unknown.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmSwap {
    pub tgid: u32,
    /// 1 once `last_bytes` holds an observed value.
    pub sized: u32,
    /// The last MM_SWAPENTS value seen, in bytes.
    pub last_bytes: i64,
    /// Growth of the swap-entry count: pages unmapped to swap (swap-out).
    pub out_bytes: u64,
    /// Decreases caused by the owner's own page faults (swap-in).
    pub in_bytes: u64,
    /// Other decreases: unmapping, exit, swapoff.
    pub freed_bytes: u64,
    /// Growth outside reclaim: swap entries copied into a child at fork,
    /// with no I/O (not swap-out).
    pub copied_bytes: u64,
    /// The BTF program's generation of `last_bytes`: per-CPU views of the
    /// mm's counter taken under another generation are not used. It
    /// changes when the count falls to 0, as it does when the mm dies, so
    /// that a new mm at the same address starts with a full sum.
    pub generation: u64,
}

const _: () = assert!(core::mem::size_of::<MmSwap>() == 56);

/// `task_struct.flags` bit of a task in memory reclaim (kswapd, direct and
/// memcg reclaim, MADV_PAGEOUT): swap entries made then are swap-out.
pub const PF_MEMALLOC: u32 = 0x0000_0800;

/// Per CPU, the task whose `handle_mm_fault` is running there and when it
/// began; moved to a per-task map if the task leaves the CPU mid-fault.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultTiming {
    /// The `task_struct` address (0: no fault in progress).
    pub task: u64,
    pub start_ns: u64,
}

/// Per CPU, the task running there and its `min_flt + maj_flt` when it was
/// switched in, so the faults it is accounted by the kernel during its time
/// slice are known when it is switched out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchSlot {
    /// The `task_struct` address (0: unknown).
    pub task: u64,
    pub base: u64,
}

/// Every per-process counter, declared once: each is `name: availability`
/// (`always`, or in brackets the probes it needs, named in user space's
/// `model::probes::names`), its tags (`, derived` when user space computes
/// it rather than the kernel side counting it in [`ProcStats`]; `, event`
/// when it counts events, which rank processes and cgroups by activity), its
/// doc comment for the per-process sample, and in braces its doc comment
/// for the recording's total. `proc_counters!(m)` hands the list to macro
/// `m`: here it declares [`ProcStats`]'s counter fields, in user space the
/// sample and total structs, the copy from the map value and their typed ids.
/// A new per-process counter is a line here, its increment on the eBPF side
/// and a row in its catalogue family.
#[macro_export]
macro_rules! proc_counters {
    ($cb:ident) => {
        $cb! {
            // Time this process stalled in direct reclaim, and how often.
            direct_reclaim_ns: always {},
            direct_reclaims: always, event {},
            // Time in memcg reclaim entered by this process, and how often.
            memcg_reclaim_ns: always {},
            memcg_reclaims: always, event {},
            // madvise + process_madvise calls made (by behaviour in `madvise`).
            madvise_calls: always, event {},
            /// Bytes its successful madvise calls covered (process_madvise
            /// calls, whose ranges are in an iovec, add none).
            madvise_bytes: [MADVISE] {
                /// Bytes its successful madvise calls covered; null when the
                /// madvise tracepoints are unavailable (and in recordings made
                /// before vmscope counted it).
            },
            // TLB shootdown IPIs this process sent (`tlb_flush` reason 4).
            tlb_shootdowns: always, event {
                /// TLB shootdown IPIs this process sent.
            },
            // Major faults taken (perf software event).
            major_faults: [MAJOR_FAULTS] {
                /// Null when the major-fault probe is unavailable (see `unavailable`).
            },
            // Derived: user space sums the per-mm swap map (`kmem:rss_stat`).
            /// Pages of this process's memory swapped out, whoever ran reclaim.
            swap_out_pages: [SWAP], derived, event {
                /// Pages of this process swapped out, whoever ran reclaim; null when
                /// `kmem:rss_stat` is unavailable.
            },
            /// Pages this process faulted back in from swap.
            swap_in_pages: [SWAP], derived, event {
                /// Pages this process faulted back in from swap; null likewise.
            },
            /// Time its writers slept in dirty throttling (`balance_dirty_pages`).
            dirty_pause_ns: [DIRTY_THROTTLE] {
                /// Time its writers slept in dirty throttling; null when
                /// `writeback:balance_dirty_pages` is unavailable.
            },
            /// How many such pauses.
            dirty_pauses: [DIRTY_THROTTLE], event {
                /// How many dirty-throttling pauses; null likewise.
            },
            /// Direct compactions its allocations entered, and the time their
            /// compaction runs took.
            direct_compactions: [COMPACT_DIRECT, COMPACT_END], event {
                /// Direct compactions its allocations entered; null when the
                /// compaction tracepoints are unavailable.
            },
            direct_compaction_ns: [COMPACT_DIRECT, COMPACT_END] {
                /// Time its direct compactions' runs took; null likewise.
            },
            /// Time its threads waited for its mmap_lock to read, and how many
            /// acquisitions (uncontended ones too).
            mmap_read_wait_ns: [MMAP_LOCK] {
                /// Time its threads waited for its mmap_lock to read; null without
                /// `--mmap-lock`.
            },
            mmap_read_waits: [MMAP_LOCK], event {
                /// Read acquisitions of its mmap_lock; null likewise.
            },
            /// The same for writing.
            mmap_write_wait_ns: [MMAP_LOCK] {
                /// Time its threads waited for its mmap_lock to write; null likewise.
            },
            mmap_write_waits: [MMAP_LOCK], event {
                /// Write acquisitions of its mmap_lock; null likewise.
            },
            /// Failed acquisitions: trylocks that found it taken, interrupted waits.
            mmap_lock_fails: [MMAP_LOCK] {
                /// Failed mmap_lock acquisitions; null likewise.
            },
            /// Pages its reads, readahead, faults and writes added to the page cache.
            page_cache_added_pages: [PAGE_CACHE_ADD], event {
                /// Pages it added to the page cache; null when
                /// `filemap:mm_filemap_add_to_page_cache` is unavailable.
            },
            /// Pages its reads asked the page cache for, each once per read call.
            page_cache_read_pages: [PAGE_CACHE_READ], event {
                /// Pages its reads asked the page cache for; null when
                /// `filemap:mm_filemap_get_pages` (6.11 on) is unavailable.
            },
            /// Faults that got it a huge page (PMD size), as its memory
            /// cgroup counts `thp_fault_alloc`.
            thp_faults: [THP_FAULTS], event {
                /// Faults that got it a huge page; null without `--thp-faults`
                /// or where `memcg:count_memcg_events` (6.16 on) is unavailable.
            },
        }
    };
}

/// Declares [`ProcStats`] with a `u64` field for each counter of the list
/// not tagged `derived`, in the list's order.
macro_rules! proc_stats {
    (@fields [$($done:tt)*] [$($names:ident)*]) => {
        /// The counter fields of [`ProcStats`] (the list's entries not
        /// tagged `derived`).
        pub const PROC_STATS_COUNTERS: usize = [$(stringify!($names)),*].len();

        /// Per-process cumulative statistics, keyed by tgid in an LRU hash
        /// map. Updated with atomic adds on the eBPF side.
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct ProcStats {
            /// User-mode faults by class.
            pub user_faults: [u64; FAULT_CLASSES],
            /// Kernel-mode faults by class.
            pub kernel_faults: [u64; FAULT_CLASSES],
            /// Faults seen through the perf fallback (class unknown).
            pub unclassified_faults: u64,
            /// madvise + process_madvise calls by behaviour group
            /// (`madvise::group`).
            pub madvise: [u64; madvise::GROUPS],
            $($done)*
            /// Faults the kernel accounted to the process's tasks (`min_flt +
            /// maj_flt`), every path included: exception and get_user_pages.
            pub accounted_faults: u64,
            /// When the entry was created (`bpf_ktime_get_ns`): tells one process
            /// from a later one under the same (reused) pid.
            pub born_ns: u64,
            /// When the process's last thread exited, 0 while it lives. User space
            /// reads such an entry a last time and deletes it.
            pub exited_ns: u64,
            /// The task name (`comm`), refreshed on exec.
            pub comm: [u8; 16],
            /// The process's cgroup (`cgroup_mode`): its memory controller's
            /// cgroup on v1, its cgroup on v2, as the `kernfs` id (the inode number
            /// of its directory). 0 while unknown.
            pub cgroup: u64,
            /// `CGROUP_EPOCH + 1` when `cgroup` was read: a task moved since makes
            /// it stale, and the next event re-reads it.
            pub cgroup_epoch: u64,
        }
    };
    (@fields [$($done:tt)*] [$($names:ident)*]
        $(#[$doc:meta])* $name:ident: $avail:tt, derived $(, $tag:ident)* { $($t:tt)* },
        $($rest:tt)*
    ) => {
        proc_stats!(@fields [$($done)*] [$($names)*] $($rest)*);
    };
    (@fields [$($done:tt)*] [$($names:ident)*]
        $(#[$doc:meta])* $name:ident: $avail:tt $(, $tag:ident)* { $($t:tt)* },
        $($rest:tt)*
    ) => {
        proc_stats!(@fields [$($done)* $(#[$doc])* pub $name: u64,] [$($names)* $name] $($rest)*);
    };
    ($($list:tt)*) => {
        proc_stats!(@fields [] [] $($list)*);
    };
}

proc_counters!(proc_stats);

const _: () = assert!(
    // The arrays, the counters, 6 more u64 fields and `comm`: no padding.
    core::mem::size_of::<ProcStats>()
        == 8 * (2 * FAULT_CLASSES + madvise::GROUPS + PROC_STATS_COUNTERS + 6) + 16
);

/// Values of `OFFSETS[off::CGROUP_MODE]`.
pub mod cgroup_mode {
    /// No cgroup attribution.
    pub const NONE: u32 = 0;
    /// The memory controller is on a v1 hierarchy: the memcg read through
    /// the BTF offsets.
    pub const V1_MEMCG: u32 = 1;
    /// cgroup v2: `bpf_get_current_cgroup_id`.
    pub const V2: u32 = 2;
}

/// Bytes of the ring buffer that carries [`OomVictim`] records (a rare
/// event: room for hundreds between two reads).
pub const OOM_RING_BYTES: u32 = 64 * 1024;

/// One OOM victim as `oom:mark_victim` reported it (the classic
/// tracepoint's record), sent through the `OOM_VICTIMS` ring buffer.
/// Memory figures are in kB, as the event reports them; a field whose bit
/// is clear in `present` was absent from this kernel's record (older
/// kernels have only `pid`) and reads 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OomVictim {
    /// `bpf_ktime_get_ns` (CLOCK_MONOTONIC) when the victim was marked.
    pub time_ns: u64,
    pub total_vm_kb: u64,
    pub anon_rss_kb: u64,
    pub file_rss_kb: u64,
    pub shmem_rss_kb: u64,
    pub pgtables_kb: u64,
    pub pid: u32,
    pub uid: u32,
    pub oom_score_adj: i32,
    /// `oom_field` bits.
    pub present: u32,
    pub comm: [u8; 16],
    /// The cgroup key (as `ProcStats::cgroup`) of the task whose
    /// allocation invoked the OOM killer: under a memcg OOM, inside the
    /// memcg that hit its limit. 0 when unknown.
    pub trigger_cgroup: u64,
    /// The victim's cgroup key as its statistics entry had it when it was
    /// marked (set at each move, see `cgroup:cgroup_attach_task`). 0 when
    /// it had no entry (not followed, or not seen yet) or no key.
    pub victim_cgroup: u64,
}

const _: () = assert!(core::mem::size_of::<OomVictim>() == 96);

/// Bits of [`OomVictim::present`].
pub mod oom_field {
    pub const PID: u32 = 1 << 0;
    pub const COMM: u32 = 1 << 1;
    pub const TOTAL_VM: u32 = 1 << 2;
    pub const ANON_RSS: u32 = 1 << 3;
    pub const FILE_RSS: u32 = 1 << 4;
    pub const SHMEM_RSS: u32 = 1 << 5;
    pub const UID: u32 = 1 << 6;
    pub const PGTABLES: u32 = 1 << 7;
    pub const OOM_SCORE_ADJ: u32 = 1 << 8;
}

/// Bytes of the ring buffer that carries [`CgroupEvent`]s: room for 512
/// creations and removals between two reads.
pub const CGROUP_RING_BYTES: u32 = 256 * 1024;
/// The longest cgroup path reported (with its NUL); a longer one is
/// reported without it (`len` 0) and named by a walk.
pub const CGROUP_PATH_BYTES: usize = 496;

/// A cgroup created or removed in the hierarchy processes are keyed by
/// (`cgroup:cgroup_mkdir`/`cgroup_rmdir`), sent through `CGROUP_EVENTS`:
/// names for cgroups that live shorter than a read, and removals without
/// polling.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupEvent {
    /// The cgroup's id (its directory's inode number, as processes' keys).
    pub id: u64,
    /// `cgroup_event::*`.
    pub kind: u32,
    /// Bytes of `path` before its NUL; 0 when it did not fit.
    pub len: u32,
    /// Below the hierarchy's root, starting with `/`.
    pub path: [u8; CGROUP_PATH_BYTES],
}

const _: () = assert!(core::mem::size_of::<CgroupEvent>() == 512);

pub mod cgroup_event {
    pub const CREATED: u32 = 1;
    pub const REMOVED: u32 = 2;
}

/// Memory cgroups whose page-cache removals are counted at once (the
/// `CACHE_REMOVALS` map's entries); user space deletes a removed cgroup's.
pub const CACHE_CGROUPS: u32 = 16384;

/// One memory cgroup's page-cache pages removed since vmscope attached, in
/// `CACHE_REMOVALS` by the cgroup's id (as processes' keys): by reclaim
/// (evicted) and otherwise (dropped: truncation, deletion, invalidation).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheRemovals {
    pub evicted: u64,
    pub dropped: u64,
}

const _: () = assert!(core::mem::size_of::<CacheRemovals>() == 16);

#[cfg(feature = "user")]
mod pod {
    unsafe impl aya::Pod for super::OomVictim {}
    unsafe impl aya::Pod for super::CgroupEvent {}
    unsafe impl aya::Pod for super::ScopePath {}
    // SAFETY (both): `repr(C)`, `Copy`, only integers, no padding (asserted
    // above), so any bit pattern is valid.
    unsafe impl aya::Pod for super::ProcStats {}
    unsafe impl aya::Pod for super::Inflight {}
    unsafe impl aya::Pod for super::MmSwap {}
    unsafe impl aya::Pod for super::FaultCache {}
    unsafe impl aya::Pod for super::SwitchSlot {}
    unsafe impl aya::Pod for super::sample::SampleKey {}
    unsafe impl aya::Pod for super::CacheRemovals {}
}

#[cfg(test)]
mod tests {

    /// The masks cover exactly the path's bytes, whole words then a part.
    #[test]
    fn scope_path_masks_cover_its_bytes() {
        let v = ScopePath::new(b"/s/c10");
        assert_eq!((v.len, &v.path[..7]), (6, &b"/s/c10\0"[..]));
        assert_eq!(v.mask[0], 0xffff_ffff_ffff);
        assert!(v.mask[1..].iter().all(|&m| m == 0));
        let long = ScopePath::new(&[b'a'; 17]);
        assert_eq!(&long.mask[..4], &[u64::MAX, u64::MAX, 0xff, 0]);
    }

    use super::*;

    #[test]
    fn log2_buckets() {
        assert_eq!(hist_bucket(0), 0);
        assert_eq!(hist_bucket(1), 1);
        assert_eq!(hist_bucket(2), 2);
        assert_eq!(hist_bucket(3), 2);
        assert_eq!(hist_bucket(1024), 11);
        assert_eq!(hist_bucket(u64::MAX), HIST_BUCKETS - 1);
    }
}
