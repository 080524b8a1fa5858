//! Maps and load-time globals shared by every hook family.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
};
use vmscope_common::{
    COUNTER_SLOTS, CounterSlots, HIST_BUCKETS, HIST_SUM, HistSlot, Inflight, MAX_INFLIGHT,
    MAX_PROCS, MAX_TRACKED, OOM_RING_BYTES, ProcStats, counter, hist, hist_bucket, off,
};

/// System-wide counters, indexed by `vmscope_common::counter`, in one
/// per-CPU entry.
#[map]
pub static COUNTERS: PerCpuArray<CounterSlots> = PerCpuArray::with_max_entries(1, 0);

/// Per-process statistics keyed by tgid.
#[map]
pub static PROCS: LruHashMap<u32, ProcStats> = LruHashMap::with_max_entries(MAX_PROCS, 0);

/// The followed tgids (value unused). Only consulted when `FILTER_ENABLED`.
#[map]
pub static TRACKED: HashMap<u32, u32> = HashMap::with_max_entries(MAX_TRACKED, 0);

/// OOM victims' records (`vmscope_common::OomVictim`), drained by user
/// space at each read.
#[map]
pub static OOM_VICTIMS: RingBuf = RingBuf::with_byte_size(OOM_RING_BYTES, 0);

/// Set by the loader: 1 restricts per-process statistics to `TRACKED`.
#[unsafe(no_mangle)]
static FILTER_ENABLED: u32 = 0;

/// Tracepoint field offsets (indexed by `vmscope_common::off`), read by the
/// loader from tracefs `format` files.
#[unsafe(no_mangle)]
static OFFSETS: [u32; off::COUNT] = [0; off::COUNT];

/// Latency histograms, an entry per `hist` id: buckets, then the sum.
#[map]
pub static HISTS: PerCpuArray<HistSlot> = PerCpuArray::with_max_entries(hist::COUNT, 0);

/// Operations whose begin was seen, keyed by `tid << 8 | kind` (LRU, so a
/// task that dies mid-operation cannot leak an entry).
#[map]
pub static INFLIGHT: LruHashMap<u64, Inflight> = LruHashMap::with_max_entries(MAX_INFLIGHT, 0);

#[inline(always)]
fn global(v: &u32) -> u32 {
    // Volatile so the compiler keeps the load: the loader rewrites .rodata.
    unsafe { core::ptr::read_volatile(v) }
}

#[inline(always)]
pub fn filter_enabled() -> bool {
    global(&FILTER_ENABLED) != 0
}

/// The offset of a tracepoint field, by `vmscope_common::off` index.
#[inline(always)]
pub fn offset(idx: usize) -> usize {
    if idx < off::COUNT {
        global(&OFFSETS[idx]) as usize
    } else {
        0
    }
}

#[inline(always)]
pub fn count(idx: u32) {
    add(idx, 1);
}

#[inline(always)]
pub fn add(idx: u32, n: u64) {
    if let Some(p) = COUNTERS.get_ptr_mut(0) {
        // Re-read and masked so that older verifiers (6.1) can bound the
        // index; the compiler would otherwise drop the mask after its own
        // range checks.
        let i = unsafe { core::ptr::read_volatile(&raw const idx) } & (COUNTER_SLOTS - 1);
        // Per-CPU slot, and eBPF programs do not migrate: a plain add is safe.
        unsafe { (*p)[i as usize] += n };
    }
}

#[inline(always)]
pub fn observe(id: u32, ns: u64) {
    if let Some(h) = HISTS.get_ptr_mut(id) {
        let b = hist_bucket(ns);
        let b = unsafe { core::ptr::read_volatile(&raw const b) } & (HIST_BUCKETS - 1);
        // SAFETY: this CPU's entry.
        unsafe {
            (*h)[b as usize] += 1;
            (*h)[HIST_SUM] += ns;
        }
    }
}

#[inline(always)]
pub fn now() -> u64 {
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
pub fn current_tid() -> u32 {
    aya_ebpf::helpers::bpf_get_current_pid_tgid() as u32
}

/// Grows whenever the followed set does: slot 0 counts the fork hook's
/// additions, slot 1 user space's (`Loaded::track`). Each side writes only
/// its own slot, so their sum changes on every addition.
#[map]
pub static TRACK_EPOCH: Array<u64> = Array::with_max_entries(2, 0);

#[inline(always)]
pub fn track_epoch() -> u64 {
    let slot = |i| TRACK_EPOCH.get(i).copied().unwrap_or(0);
    slot(0).wrapping_add(slot(1) << 32)
}

/// Whether the current task's process is in scope (always, unless filtering).
#[inline(always)]
pub fn in_scope() -> bool {
    !filter_enabled() || TRACKED.get_ptr(current_tgid()).is_some()
}

/// Notes the start of an operation of `kind` for the current task.
#[inline(always)]
pub fn begin(kind: u64, arg0: u64, arg1: u64) {
    begin_keyed((u64::from(current_tid()) << 8) | kind, arg0, arg1);
}

#[inline(always)]
pub fn begin_keyed(key: u64, arg0: u64, arg1: u64) {
    let v = Inflight {
        start_ns: now(),
        arg0,
        arg1,
    };
    if INFLIGHT.insert(key, v, 0).is_err() {
        count(counter::INFLIGHT_FULL);
    }
}

/// Ends the current task's operation of `kind`: its record and duration.
#[inline(always)]
pub fn end(kind: u64) -> Option<(Inflight, u64)> {
    end_keyed((u64::from(current_tid()) << 8) | kind)
}

#[inline(always)]
pub fn end_keyed(key: u64) -> Option<(Inflight, u64)> {
    let rec = unsafe { *INFLIGHT.get_ptr(key)? };
    let _ = INFLIGHT.remove(key);
    Some((rec, now().saturating_sub(rec.start_ns)))
}

#[inline(always)]
pub fn current_tgid() -> u32 {
    (aya_ebpf::helpers::bpf_get_current_pid_tgid() >> 32) as u32
}

/// The statistics entry of the current process, created on first use, or
/// `None` when the filter excludes this process.
#[inline(always)]
#[allow(
    clippy::needless_borrows_for_generic_args,
    reason = "the entry is passed by reference to its template in a map: by value it would be copied to the BPF stack"
)]
pub fn current_proc() -> Option<*mut ProcStats> {
    let tgid = current_tgid();
    if filter_enabled() && TRACKED.get_ptr(tgid).is_none() {
        // A followed process leaves the followed set at its exit (so that
        // an unrelated process taking its pid is not followed), but its
        // last context switch still brings its books up to date.
        return match PROCS.get_ptr_mut(tgid) {
            // SAFETY: a map value.
            Some(p)
                if unsafe { (*p).exited_ns } != 0 && !started_after(unsafe { (*p).born_ns }) =>
            {
                Some(p)
            }
            _ => None,
        };
    }
    let mut flags = 1; // BPF_NOEXIST
    if let Some(p) = PROCS.get_ptr_mut(tgid) {
        // SAFETY: a map value.
        if unsafe { (*p).exited_ns } == 0 || !started_after(unsafe { (*p).born_ns }) {
            // Alive, or exiting still (its last context switch comes
            // after the exit hook).
            crate::cgroup::refresh(p);
            return Some(p);
        }
        // An exited process's entry, not yet pruned, under a reused pid:
        // this process starts from zero, with its own name.
        count(counter::PROC_REUSED);
        flags = 0; // BPF_ANY
    }
    let fresh = fresh_entry(aya_ebpf::helpers::bpf_get_current_comm().unwrap_or([0; 16]))?;
    // BPF_NOEXIST: another CPU may have created it meanwhile; then use theirs.
    // SAFETY: a map value, this CPU's own.
    if PROCS.insert(tgid, unsafe { &*fresh }, flags).is_ok() {
        count(counter::PROC_INSERTS);
    }
    let p = PROCS.get_ptr_mut(tgid)?;
    crate::cgroup::refresh(p);
    Some(p)
}

/// Whether the current process started after `t` (`bpf_ktime_get_ns`
/// time): its group leader's `start_time`, the same clock. False when the
/// BTF offsets are unknown.
#[inline(always)]
fn started_after(t: u64) -> bool {
    let (leader_at, start_at) = (offset(off::TASK_GROUP_LEADER), offset(off::TASK_START_TIME));
    if leader_at == 0 || start_at == 0 {
        return false;
    }
    // SAFETY (both): kernel reads through the helper, which checks them.
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() } as usize;
    let Ok(leader) =
        (unsafe { aya_ebpf::helpers::bpf_probe_read_kernel((task + leader_at) as *const u64) })
    else {
        return false;
    };
    match unsafe {
        aya_ebpf::helpers::bpf_probe_read_kernel((leader as usize + start_at) as *const u64)
    } {
        Ok(start) => start > t,
        Err(_) => false,
    }
}

/// The statistics entry of `tgid`, created (without a name) if it was
/// evicted. For moving counts gathered earlier; no scope check.
#[inline(always)]
#[allow(
    clippy::needless_borrows_for_generic_args,
    reason = "the entry is passed by reference to its template in a map: by value it would be copied to the BPF stack"
)]
pub fn proc_entry(tgid: u32) -> Option<*mut ProcStats> {
    if let Some(p) = PROCS.get_ptr_mut(tgid) {
        return Some(p);
    }
    let fresh = fresh_entry([0; 16])?;
    // SAFETY: a map value, this CPU's own.
    if PROCS.insert(tgid, unsafe { &*fresh }, 1).is_ok() {
        count(counter::PROC_INSERTS);
    }
    PROCS.get_ptr_mut(tgid)
}

/// This CPU's template of a new entry: zero but for its birth time and
/// name, which are set here. The template lives in a map, not on the BPF
/// stack (512 bytes for a whole call chain), which a `ProcStats` of 400
/// bytes and growing with each counter would exhaust.
#[map]
static FRESH: PerCpuArray<ProcStats> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn fresh_entry(comm: [u8; 16]) -> Option<*mut ProcStats> {
    let fresh = FRESH.get_ptr_mut(0)?;
    // SAFETY: a map value, this CPU's own; nothing else writes it.
    unsafe {
        (*fresh).born_ns = now();
        (*fresh).comm = comm;
    }
    Some(fresh)
}

/// Adds one to a shared (not per-CPU) counter.
#[inline(always)]
pub fn atomic_inc(p: *mut u64) {
    atomic_add(p, 1);
}

/// Adds `n` to a shared (not per-CPU) counter.
#[inline(always)]
pub fn atomic_add(p: *mut u64, n: u64) {
    // SAFETY: `p` points into a map value, which is 8-byte aligned and lives
    // as long as the program runs.
    // The bpf target has no `AtomicU64::fetch_add`; the intrinsic lowers to
    // the BPF atomic add instruction.
    unsafe {
        core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
            p, n,
        )
    };
}
