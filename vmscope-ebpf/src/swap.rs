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
    macros::map,
    maps::{LruHashMap, PerCpuArray},
    programs::TracePointContext,
};
use vmscope_common::{MAX_MMS, MM_SWAPENTS, MmSwap, PF_MEMALLOC, counter, kind, madvise, off};

use crate::maps;

/// Swap traffic per address space, keyed by `mm_id`.
#[map]
pub static MMS: LruHashMap<u32, MmSwap> = LruHashMap::with_max_entries(MAX_MMS, 0);

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
    let (mm_id, curr, size) = (ev.mm_id, ev.curr, ev.size);
    if curr != 0 {
        learn(mm_id);
    }
    if ev.member != MM_SWAPENTS {
        return;
    }
    let Some(e) = MMS.get_ptr_mut(mm_id) else {
        // An mm none of whose tasks has been seen since the probe attached
        // (e.g. asleep while its pages go out). Its traffic is kept under
        // owner 0 until an event of its own names the owner, which is then
        // credited with everything so far.
        let fresh = MmSwap {
            sized: 1,
            last_bytes: size,
            ..Default::default()
        };
        if MMS.insert(mm_id, fresh, 1).is_ok() {
            maps::count(counter::MM_INSERTS);
        }
        maps::count(counter::SWAP_UNSIZED);
        return;
    };
    // SAFETY: `e` points into a live map value.
    unsafe {
        if (*e).sized == 0 {
            (*e).sized = 1;
            (*e).last_bytes = size;
            maps::count(counter::SWAP_UNSIZED);
            return;
        }
        let delta = size - (*e).last_bytes;
        (*e).last_bytes = size;
        if delta > 0 {
            if in_reclaim() {
                maps::atomic_add(&raw mut (*e).out_bytes, delta as u64);
            } else {
                maps::atomic_add(&raw mut (*e).copied_bytes, delta as u64);
            }
        } else if delta < 0 {
            let freed = delta.unsigned_abs();
            if curr != 0 && !unmapping() {
                maps::atomic_add(&raw mut (*e).in_bytes, freed);
            } else {
                maps::atomic_add(&raw mut (*e).freed_bytes, freed);
            }
        }
    }
}

/// Whether the current task is inside a syscall that zaps its own
/// mappings and so drops swap entries without reading them: munmap,
/// mremap, brk, mmap (MAP_FIXED over a mapping), or a freeing madvise. A
/// populating madvise (POPULATE_READ/WRITE) faults swapped pages back in,
/// which is swap-in.
#[inline(always)]
fn unmapping() -> bool {
    let tid = u64::from(maps::current_tid()) << 8;
    if [kind::MUNMAP, kind::MREMAP, kind::BRK, kind::MMAP]
        .iter()
        .any(|&k| maps::INFLIGHT.get_ptr(tid | k).is_some())
    {
        return true;
    }
    match maps::INFLIGHT.get_ptr(tid | kind::MADVISE) {
        // SAFETY: a live map value.
        Some(rec) => !madvise::populates(unsafe { (*rec).arg0 }),
        None => false,
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
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() } as usize;
    // SAFETY: the current task's address; the helper checks the read.
    match unsafe { aya_ebpf::helpers::bpf_probe_read_kernel((task + at) as *const u32) } {
        Ok(flags) => flags & PF_MEMALLOC != 0,
        Err(_) => true,
    }
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
    if let Some(e) = MMS.get_ptr_mut(mm_id) {
        unsafe { (*e).tgid = tgid };
        return;
    }
    let fresh = MmSwap {
        tgid,
        ..Default::default()
    };
    if MMS.insert(mm_id, fresh, 1).is_ok() {
        maps::count(counter::MM_INSERTS);
    }
}
