//! Maps and load-time globals shared by every hook family.

use aya_ebpf::{
    macros::map,
    maps::{HashMap, LruHashMap, PerCpuArray},
};
use vmscope_common::{MAX_PROCS, MAX_TRACKED, ProcStats, counter};

/// System-wide counters, indexed by `vmscope_common::counter`.
#[map]
pub static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Per-process statistics keyed by tgid.
#[map]
pub static PROCS: LruHashMap<u32, ProcStats> = LruHashMap::with_max_entries(MAX_PROCS, 0);

/// The followed tgids (value unused). Only consulted when `FILTER_ENABLED`.
#[map]
pub static TRACKED: HashMap<u32, u32> = HashMap::with_max_entries(MAX_TRACKED, 0);

/// Set by the loader: 1 restricts per-process statistics to `TRACKED`.
#[unsafe(no_mangle)]
static FILTER_ENABLED: u32 = 0;

/// Tracepoint field offsets, read by the loader from tracefs `format` files.
#[unsafe(no_mangle)]
static PF_ERROR_CODE_OFF: u32 = 0;
#[unsafe(no_mangle)]
static FORK_CHILD_PID_OFF: u32 = 0;

#[inline(always)]
fn global(v: &u32) -> u32 {
    // Volatile so the compiler keeps the load: the loader rewrites .rodata.
    unsafe { core::ptr::read_volatile(v) }
}

#[inline(always)]
pub fn filter_enabled() -> bool {
    global(&FILTER_ENABLED) != 0
}

#[inline(always)]
pub fn pf_error_code_off() -> usize {
    global(&PF_ERROR_CODE_OFF) as usize
}

#[inline(always)]
pub fn fork_child_pid_off() -> usize {
    global(&FORK_CHILD_PID_OFF) as usize
}

#[inline(always)]
pub fn count(idx: u32) {
    if let Some(p) = COUNTERS.get_ptr_mut(idx) {
        // Per-CPU slot, and eBPF programs do not migrate: a plain add is safe.
        unsafe { *p += 1 };
    }
}

#[inline(always)]
pub fn current_tgid() -> u32 {
    (aya_ebpf::helpers::bpf_get_current_pid_tgid() >> 32) as u32
}

/// The statistics entry of the current process, created on first use, or
/// `None` when the filter excludes this process.
#[inline(always)]
pub fn current_proc() -> Option<*mut ProcStats> {
    let tgid = current_tgid();
    if filter_enabled() && TRACKED.get_ptr(tgid).is_none() {
        return None;
    }
    if let Some(p) = PROCS.get_ptr_mut(tgid) {
        return Some(p);
    }
    let mut fresh = ProcStats::default();
    if let Ok(comm) = aya_ebpf::helpers::bpf_get_current_comm() {
        fresh.comm = comm;
    }
    // BPF_NOEXIST: another CPU may have created it meanwhile; then use theirs.
    if PROCS.insert(tgid, fresh, 1).is_ok() {
        count(counter::PROC_INSERTS);
    }
    PROCS.get_ptr_mut(tgid)
}

/// Adds one to a shared (not per-CPU) counter.
#[inline(always)]
pub fn atomic_inc(p: *mut u64) {
    // SAFETY: `p` points into a map value, which is 8-byte aligned and lives
    // as long as the program runs.
    // The bpf target has no `AtomicU64::fetch_add`; the intrinsic lowers to
    // the BPF atomic add instruction.
    unsafe {
        core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
            p, 1,
        )
    };
}
