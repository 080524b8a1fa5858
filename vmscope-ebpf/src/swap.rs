//! Swap attribution from `kmem:rss_stat`, which fires on every change of an
//! mm's RSS counters with the counter's new value.
//!
//! - Every event whose mm is the current task's own (`curr == 1`) teaches the
//!   mm -> tgid mapping. That is every page fault that maps a page, so this
//!   path is a per-CPU cache hit in the common case.
//! - MM_SWAPENTS changes are sized against the previous value of the same mm.
//!   Only real swap traffic is swap-out or swap-in:
//!   - growth made in reclaim (the task has PF_MEMALLOC: kswapd, direct and
//!     memcg reclaim, MADV_PAGEOUT) is swap-out, charged to the mm's owner
//!     whoever ran reclaim; other growth is entries copied into a child at
//!     fork, with no I/O;
//!   - shrinkage in the owner's own context outside the syscalls that zap
//!     mappings (munmap, mremap, brk, mmap, freeing madvise) is swap-in (a
//!     fault, or a populate/mlock fault); any other shrinkage (exit,
//!     munmap, swapoff, a child dropping its copies) is entries freed.

use aya_ebpf::{
    EbpfContext as _,
    cty::c_void,
    helpers::{bpf_probe_read_kernel, generated as raw},
    macros::map,
    maps::{Array, LruHashMap, PerCpuArray},
    programs::TracePointContext,
};
use vmscope_common::{
    MAX_CPUS, MAX_MMS, MM_SWAPENTS, MmSwap, PF_MEMALLOC, counter, madvise, off, syscall,
};

use crate::maps;

/// Swap traffic per address space, keyed by `mm_id`.
#[map]
pub static MMS: LruHashMap<u64, MmSwap> = LruHashMap::with_max_entries(MAX_MMS, 0);

/// Per CPU, the last `mm_id << 32 | tgid` pair already recorded in `MMS`.
#[map]
static LEARNED: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// The event's fields, which every kernel with the event lays out like this
/// (the loader checks the format file and refuses the probe otherwise).
/// Read with one helper call: this runs on every page fault.
#[repr(C)]
#[derive(Clone, Copy)]
struct RssStat {
    mm_id: u32,
    curr: u32,
    member: i32,
    _pad: u32,
    size: i64,
}

pub fn on_rss_stat(ctx: &TracePointContext) {
    let Ok(ev) = (unsafe { ctx.read_at::<RssStat>(maps::offset(off::RSS_MM_ID)) }) else {
        return;
    };
    on_event(ev);
}

/// The same, for the usual layout (`mm_id` right after the 8-byte common
/// header, which the loader checks in the format file): plain loads from
/// the context at constant offsets instead of a copy helper, which is most
/// of this program's cost on the fault path.
pub fn on_rss_stat_std(ctx: &TracePointContext) {
    let p = ctx.as_ptr().cast::<u8>();
    // SAFETY: offsets inside the event record, checked by the loader against
    // the format file; the verifier checks them again.
    let ev = unsafe {
        RssStat {
            mm_id: core::ptr::read(p.add(8).cast::<u32>()),
            curr: core::ptr::read(p.add(12).cast::<u32>()),
            member: core::ptr::read(p.add(16).cast::<i32>()),
            _pad: 0,
            size: core::ptr::read(p.add(24).cast::<i64>()),
        }
    };
    on_event(ev);
}

#[inline(always)]
fn on_event(ev: RssStat) {
    let (mm_id, curr) = (u64::from(ev.mm_id), ev.curr != 0);
    if curr {
        learn(ev.mm_id);
    }
    if ev.member != MM_SWAPENTS {
        return;
    }
    on_swapents(mm_id, curr, ev.size, None);
}

/// One change of an mm's swap-entry count, `size` its new value in bytes
/// (the classic event's record).
#[inline(always)]
fn on_swapents(key: u64, curr: bool, size: i64, owner: Option<u32>) {
    account(MMS.get_ptr_mut(key), key, curr, size, owner, 0);
}

/// Accounts one change of an mm's swap-entry count: `e` is the mm's entry
/// (None: not in the map), `size` the count's new value in bytes, `owner`
/// the mm's owner when known from the mm itself (BTF program), and
/// `generation` the one `size` was computed under (BTF program; see
/// `MmSwap::generation`).
#[inline(always)]
fn account(
    e: Option<*mut MmSwap>,
    key: u64,
    curr: bool,
    size: i64,
    owner: Option<u32>,
    generation: u64,
) {
    let Some(e) = e else {
        // An mm none of whose tasks has been seen since the probe attached
        // (e.g. asleep while its pages go out). Its traffic is kept under
        // owner 0 until an event of its own names the owner, which is then
        // credited with everything so far.
        let fresh = MmSwap {
            tgid: owner.unwrap_or(0),
            sized: 1,
            last_bytes: size,
            generation,
            ..Default::default()
        };
        if MMS.insert(key, fresh, 1).is_ok() {
            maps::count(counter::MM_INSERTS);
        }
        maps::count(counter::SWAP_UNSIZED);
        return;
    };
    // SAFETY: `e` points into a live map value.
    unsafe {
        if let Some(tgid) = owner {
            (*e).tgid = tgid;
        }
        if (*e).sized == 0 {
            (*e).sized = 1;
            (*e).last_bytes = size;
            (*e).generation = generation;
            maps::count(counter::SWAP_UNSIZED);
            return;
        }
        let delta = size - (*e).last_bytes;
        (*e).last_bytes = size;
        if size == 0 && generation != 0 {
            // Every per-CPU view of this count is dropped: the mm may be
            // dying, and a new one may take its address.
            (*e).generation = maps::now() | 1;
        }
        if delta > 0 {
            if in_reclaim() {
                maps::atomic_add(&raw mut (*e).out_bytes, delta as u64);
            } else {
                maps::atomic_add(&raw mut (*e).copied_bytes, delta as u64);
            }
        } else if delta < 0 {
            let freed = delta.unsigned_abs();
            if curr && !unmapping() {
                maps::atomic_add(&raw mut (*e).in_bytes, freed);
            } else {
                maps::atomic_add(&raw mut (*e).freed_bytes, freed);
            }
        }
    }
}

/// Per-CPU offsets (`__per_cpu_offset[cpu]`), learned once: what
/// `bpf_map_lookup_percpu_elem` returns for our own per-CPU array, minus the
/// per-CPU pointer the array keeps (`bpf_array.pptrs[0]`). Slot `MAX_CPUS`
/// is 1 once they are known.
#[map]
static PCPU_OFF: Array<u64> = Array::with_max_entries(MAX_CPUS + 1, 0);

/// The per-CPU array whose addresses reveal the per-CPU offsets.
#[map]
static PCPU_PROBE: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Scratch space to copy the head of `PCPU_PROBE`'s `struct bpf_array` into.
#[map]
static SCRATCH: PerCpuArray<[u64; 129]> = PerCpuArray::with_max_entries(1, 0);

/// Learns the per-CPU offsets; false if it cannot.
#[inline(never)]
fn learn_pcpu_offsets() -> bool {
    let at = maps::offset(off::ARRAY_PPTRS);
    let nr = maps::offset(off::NR_CPUS) as u32;
    if at == 0 || at >= 1016 || nr == 0 || nr > MAX_CPUS {
        return false;
    }
    let map = (&raw const PCPU_PROBE).cast::<c_void>().cast_mut();
    let Some(buf) = SCRATCH.get_ptr_mut(0) else {
        return false;
    };
    // SAFETY: reads the array's head (the map itself) into scratch space.
    let n = ((at + 8) & 1023) as u32;
    if unsafe { raw::bpf_probe_read_kernel(buf.cast(), n, map.cast_const()) } != 0 {
        return false;
    }
    // SAFETY: within the scratch value (1032 bytes; `at & 1023` + 8 fits).
    let pptr = unsafe { core::ptr::read_unaligned(buf.cast::<u8>().add(at & 1023).cast::<u64>()) };
    let key = 0u32;
    for cpu in 0..MAX_CPUS {
        if cpu >= nr {
            break;
        }
        // SAFETY: our own map and key.
        let addr = unsafe { raw::bpf_map_lookup_percpu_elem(map, (&raw const key).cast(), cpu) };
        let off = if addr.is_null() {
            0
        } else {
            // Through memory, so the verifier sees a number, not a pointer.
            // SAFETY: this CPU's scratch value.
            unsafe {
                core::ptr::write_volatile(buf.cast::<*mut c_void>(), addr);
                core::ptr::read_volatile(buf.cast::<u64>()).wrapping_sub(pptr)
            }
        };
        if let Some(slot) = PCPU_OFF.get_ptr_mut(cpu) {
            // SAFETY: a live array slot.
            unsafe { *slot = off };
        }
    }
    if let Some(ready) = PCPU_OFF.get_ptr_mut(MAX_CPUS) {
        unsafe { *ready = 1 };
    }
    true
}

/// A load through a BTF-typed kernel pointer (a BTF tracepoint's argument,
/// the task `bpf_get_current_task_btf` returns, its saved registers, or a
/// pointer field loaded from one of them) at a field offset the loader took
/// from the kernel's BTF. The offset is a read-only global, so the verifier
/// knows it, checks the field against the kernel's BTF, and makes the load
/// one that cannot fault (a bad address reads 0): one instruction, where
/// `bpf_probe_read_kernel` is a helper call.
///
/// # Safety
/// `base` must be such a pointer and `at` the offset of a field of type `T`.
#[inline(always)]
unsafe fn field<T: Copy>(base: u64, at: usize) -> T {
    // SAFETY: as the caller promises; the verifier checks it at load time.
    unsafe { core::ptr::read_volatile((base as usize + at) as *const T) }
}

/// The BTF program's `MMS` key of an mm: its `context.ctx_id`, which no
/// other mm since boot has had, where the kernel has one; else its address,
/// which a new mm may take over from a dead one.
#[inline(always)]
fn mm_key(mm: u64) -> u64 {
    let at = maps::offset(off::MM_CTX_ID);
    if at == 0 {
        return mm;
    }
    // SAFETY: a u64 field of the BTF-typed mm, at its offset from the BTF.
    unsafe { field::<u64>(mm, at) }
}

/// What one CPU last saw of an mm's swap-entry counter.
#[repr(C)]
#[derive(Clone, Copy)]
struct PartSeen {
    /// The counter's per-CPU parts (`counters`), which name it among the
    /// live mms (0: nothing seen in this slot).
    counters: u64,
    /// The mm's entry's generation then.
    generation: u64,
    /// The counter's shared `count` then.
    count: i64,
    /// This CPU's part of the counter then.
    part: i64,
}

/// Slots per CPU of `PARTS`.
const PART_SLOTS: u32 = 256;

/// Per CPU, a direct-mapped cache of `PartSeen` by counter. Two counters
/// that share a slot cost each other a full sum, never a wrong size.
#[map]
static PARTS: PerCpuArray<PartSeen> = PerCpuArray::with_max_entries(PART_SLOTS, 0);

/// The `PARTS` slot of a counter, by the address of its per-CPU parts (an
/// mm's counters are one small per-CPU allocation).
#[inline(always)]
fn part_slot(counters: u64) -> u32 {
    ((counters >> 4) ^ (counters >> 12)) as u32 & (PART_SLOTS - 1)
}

/// Per CPU, where a pointer is stored and read back as a number.
#[map]
static AS_NUMBER: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// A kernel pointer as a number, which the verifier lets a program hash
/// (it refuses arithmetic other than adding to a pointer). Through memory
/// it does not type, a map value; None if the slot cannot be had.
#[inline(always)]
fn as_number(ptr: u64) -> Option<u64> {
    let slot = AS_NUMBER.get_ptr_mut(0)?;
    // SAFETY: this CPU's slot.
    unsafe {
        core::ptr::write_volatile(slot, ptr);
        Some(core::ptr::read_volatile(slot))
    }
}

/// One CPU's part of the `struct percpu_counter` whose per-CPU parts are
/// at `counters`: read with the helper, at that CPU's per-CPU offset.
#[inline(always)]
fn part_of(counters: u64, cpu: u32) -> Option<i64> {
    let &o = PCPU_OFF.get(cpu)?;
    if o == 0 {
        return None;
    }
    // SAFETY: that CPU's part of the counter; the helper checks the read.
    unsafe { bpf_probe_read_kernel(counters.wrapping_add(o) as *const i32) }
        .ok()
        .map(i64::from)
}

/// `count` plus every possible CPU's part, as `percpu_counter_sum`
/// computes it (without the lock).
#[inline(always)]
fn sum_parts(count: i64, counters: u64) -> i64 {
    let mut sum = count;
    let nr = maps::offset(off::NR_CPUS) as u32;
    for cpu in 0..MAX_CPUS {
        if cpu >= nr {
            break;
        }
        if let Some(part) = part_of(counters, cpu) {
            sum += part;
        }
    }
    sum
}

/// `rss_stat(mm, member)` as a BTF tracepoint: no trace record is built, so
/// the kernel does not sum the counter on every RSS change; only swap-entry
/// changes are looked at. `mm` is BTF-typed, so its fields (and the current
/// task's) are plain loads.
///
/// The change is sized without summing every CPU's part each time. A
/// `percpu_counter` change on a CPU moves that CPU's part, or, at the batch
/// size, folds the part into the shared `count`. So while `count` is what
/// this CPU saw at its last look, the change is what this CPU's part moved
/// since; otherwise (about once per batch, or the first look) the parts are
/// summed. One helper read per change instead of one per possible CPU.
#[inline(always)]
pub fn on_rss_stat_btf(mm: u64, member: i32) {
    if member != MM_SWAPENTS {
        return;
    }
    let ready = PCPU_OFF.get(MAX_CPUS).copied().unwrap_or(0) == 1;
    if !ready && !learn_pcpu_offsets() {
        maps::count(counter::SWAP_UNSIZED);
        return;
    }
    let pc = mm + maps::offset(off::MM_SWAPENTS_COUNTER) as u64;
    // SAFETY: `pc` is inside the mm the tracepoint passed; the offsets are
    // `struct percpu_counter`'s `count` (s64) and `counters` (a pointer).
    let count: i64 = unsafe { field(pc, maps::offset(off::PCPU_COUNT)) };
    let counters: u64 = unsafe { field(pc, maps::offset(off::PCPU_COUNTERS)) };
    let cpu = unsafe { raw::bpf_get_smp_processor_id() };
    let Some(part) = part_of(counters, cpu) else {
        maps::count(counter::SWAP_UNSIZED);
        return;
    };
    let shift = maps::offset(off::PAGE_SHIFT) as u32 & 31;
    let key = mm_key(mm);
    let entry = MMS.get_ptr_mut(key);
    let Some(id) = as_number(counters) else {
        maps::count(counter::SWAP_UNSIZED);
        return;
    };
    let slot = PARTS.get_ptr_mut(part_slot(id));
    // SAFETY: live map values.
    let seen = unsafe {
        match (entry, slot) {
            (Some(e), Some(s))
                if (*e).sized == 1
                    && (*s).counters == id
                    && (*s).generation == (*e).generation
                    && (*s).count == count =>
            {
                Some(((*e).last_bytes >> shift) + part - (*s).part)
            }
            _ => None,
        }
    };
    let pages = seen.unwrap_or_else(|| {
        maps::count(counter::SWAP_SUMMED);
        sum_parts(count, counters)
    });
    // A sized entry keeps its generation (a sum is the truth under any);
    // one sized now starts a new one.
    let generation = match entry {
        // SAFETY: a live map value.
        Some(e) if unsafe { (*e).sized == 1 } => unsafe { (*e).generation },
        _ => maps::now() | 1,
    };
    let task = unsafe { raw::bpf_get_current_task_btf() } as u64;
    // SAFETY: `task_struct.mm` and `mm_struct.owner` (pointers) and
    // `task_struct.tgid` (pid_t), through BTF-typed pointers.
    let curr = unsafe { field::<u64>(task, maps::offset(off::TASK_MM)) } == mm;
    let owner_task: u64 = unsafe { field(mm, maps::offset(off::MM_OWNER)) };
    let owner = (owner_task != 0)
        .then(|| unsafe { field::<u32>(owner_task, maps::offset(off::TASK_TGID)) })
        .filter(|&tgid| !maps::filter_enabled() || maps::TRACKED.get_ptr(tgid).is_some());
    account(entry, key, curr, pages << shift, owner, generation);
    if pages != 0
        && let Some(s) = slot
    {
        // SAFETY: this CPU's slot.
        unsafe {
            *s = PartSeen {
                counters: id,
                generation,
                count,
                part,
            }
        };
    }
}

/// Whether the current task is inside a syscall that zaps its own
/// mappings and so drops swap entries without reading them: munmap,
/// mremap, brk, mmap (MAP_FIXED over a mapping), or a freeing madvise. A
/// populating madvise (POPULATE_READ/WRITE) faults swapped pages back in,
/// which is swap-in.
///
/// Read from the task's saved user registers (`bpf_task_pt_regs`), where
/// the entry code keeps the syscall's number and arguments for as long as
/// it runs, so no syscall hook has to mark it. A fault from user space
/// saves its error code in the same slot; those codes always have the
/// user bit (4), which the numbers of munmap, mremap and mmap lack; brk's
/// (12) and madvise's (28) would be a user fault on a reserved bit, which
/// the kernel never sets in a user mapping. Without the slot's offset (a
/// machine other than x86-64) no drop is taken for a zap.
#[inline(always)]
fn unmapping() -> bool {
    let at = maps::offset(off::PT_REGS_SYSCALL_NR);
    if at == 0 {
        return false;
    }
    // SAFETY: the current task, as the helper's BTF-typed argument.
    let regs = unsafe { raw::bpf_task_pt_regs(raw::bpf_get_current_task_btf()) } as u64;
    // SAFETY: a saved register (`unsigned long`) of the BTF-typed pt_regs.
    let read = |at: usize| unsafe { field::<u64>(regs, at) };
    match read(at) {
        syscall::MUNMAP | syscall::MREMAP | syscall::BRK | syscall::MMAP => true,
        syscall::MADVISE => !madvise::populates(read(maps::offset(off::PT_REGS_ARG3))),
        _ => false,
    }
}

/// Whether the current task is reclaiming memory (PF_MEMALLOC), the only
/// context in which swap entries are made by writing pages out. Without
/// the flags' offset (no BTF), every growth counts as swap-out, as before.
#[inline(always)]
fn in_reclaim() -> bool {
    let at = maps::offset(off::TASK_FLAGS);
    if at == 0 {
        return true;
    }
    let task = unsafe { raw::bpf_get_current_task_btf() } as u64;
    // SAFETY: `task_struct.flags` (unsigned int) of the BTF-typed task.
    let flags = unsafe { field::<u32>(task, at) };
    flags & PF_MEMALLOC != 0
}

/// Records that `mm_id` belongs to the current process.
#[inline(always)]
fn learn(mm_id: u32) {
    let tgid = maps::current_tgid();
    let pair = (u64::from(mm_id) << 32) | u64::from(tgid);
    let Some(cache) = LEARNED.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: per-CPU slot; programs do not migrate.
    if unsafe { *cache } == pair {
        return;
    }
    unsafe { *cache = pair };
    if !maps::in_scope() {
        return;
    }
    let key = u64::from(mm_id);
    if let Some(e) = MMS.get_ptr_mut(key) {
        unsafe { (*e).tgid = tgid };
        return;
    }
    let fresh = MmSwap {
        tgid,
        ..Default::default()
    };
    if MMS.insert(key, fresh, 1).is_ok() {
        maps::count(counter::MM_INSERTS);
    }
}
