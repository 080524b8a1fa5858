//! Direct timing of rmap functions: fentry counts a call (and notes its
//! start), fexit records its latency; maintenance functions get a
//! count-only fentry. The loader loads slot N for the Nth planned function.
//! Walks nested in walks (try_to_unmap -> rmap_walk -> page_vma_mapped_walk)
//! each get their own histogram; `OUTER_NS` adds up only the outermost.

use aya_ebpf::{macros::map, maps::PerCpuArray};
use vmscope_common::{
    HIST_BUCKETS, hist_bucket,
    sample::timing::{KIND_BASE, KIND_OUTER, OUTER_NS, SLOTS},
};

use crate::maps::{INFLIGHT, begin_keyed, current_tid, end_keyed};

/// Calls per slot.
#[map]
pub static RMAP_CALLS: PerCpuArray<u64> = PerCpuArray::with_max_entries(SLOTS, 0);

/// Nanoseconds per slot, then the outermost walks' total at `OUTER_NS`.
#[map]
pub static RMAP_NS: PerCpuArray<u64> = PerCpuArray::with_max_entries(SLOTS + 1, 0);

/// Log2-ns latency histogram per slot.
#[map]
pub static RMAP_HIST: PerCpuArray<u64> = PerCpuArray::with_max_entries(SLOTS * HIST_BUCKETS, 0);

#[inline(always)]
fn add(arr: &PerCpuArray<u64>, idx: u32, n: u64) {
    if let Some(p) = arr.get_ptr_mut(idx) {
        // Per-CPU slot: a plain add is safe.
        unsafe { *p += n };
    }
}

#[inline(always)]
fn key(kind: u64) -> u64 {
    (u64::from(current_tid()) << 8) | kind
}

/// A call of a counted-only function.
#[inline(always)]
pub fn count(slot: u32) {
    add(&RMAP_CALLS, slot, 1);
}

/// A call of a timed function (its fexit is attached too).
#[inline(always)]
pub fn enter(slot: u32) {
    add(&RMAP_CALLS, slot, 1);
    begin_keyed(key(KIND_BASE + u64::from(slot)), 0, 0);
    let outer = key(KIND_OUTER);
    match INFLIGHT.get_ptr_mut(outer) {
        // Already inside a walk: one level deeper.
        Some(p) => unsafe { (*p).arg0 += 1 },
        None => begin_keyed(outer, 1, 0),
    }
}

#[inline(always)]
pub fn exit(slot: u32) {
    if let Some((_, ns)) = end_keyed(key(KIND_BASE + u64::from(slot))) {
        add(&RMAP_HIST, slot * HIST_BUCKETS + hist_bucket(ns), 1);
        add(&RMAP_NS, slot, ns);
    }
    let outer = key(KIND_OUTER);
    let depth = match INFLIGHT.get_ptr_mut(outer) {
        Some(p) => unsafe {
            (*p).arg0 = (*p).arg0.saturating_sub(1);
            (*p).arg0
        },
        None => return,
    };
    if depth == 0
        && let Some((_, ns)) = end_keyed(outer)
    {
        add(&RMAP_NS, OUTER_NS, ns);
    }
}
