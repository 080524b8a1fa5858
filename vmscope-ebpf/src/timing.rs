//! Direct timing of rmap functions: fentry counts a call and, when no other
//! timed call is open on the thread, notes its start; fexit of that
//! outermost call records its latency. Calls nested inside it (rmap_walk
//! under folio_referenced, a maintenance call under a walk) are counted
//! against the outermost one's slot and not timed on their own: their time
//! is already in it, and user space subtracts what their instrumentation
//! added (the calibration slot measures that on the running kernel).
//!
//! One `INFLIGHT` entry per thread (the outermost call), so a timed call
//! costs one hash insert and one delete however deep the nesting.

use aya_ebpf::{macros::map, maps::PerCpuArray};
use vmscope_common::{
    HIST_BUCKETS, hist_bucket,
    sample::timing::{CALLS, FIELDS, KIND_OUTER, NESTED, NS, OUTER, SLOTS, STALE_NS},
};

use crate::maps::{INFLIGHT, begin_keyed, current_tid, now};

/// Per slot, `timing::FIELDS` counters: `field * SLOTS + slot`.
#[map]
pub static RMAP_STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(SLOTS * FIELDS, 0);

/// Log2-ns latency histogram of each slot's outermost calls.
#[map]
pub static RMAP_HIST: PerCpuArray<u64> = PerCpuArray::with_max_entries(SLOTS * HIST_BUCKETS, 0);

#[inline(always)]
fn add(field: u32, slot: u32, n: u64) {
    if let Some(p) = RMAP_STATS.get_ptr_mut(field * SLOTS + slot) {
        // Per-CPU slot: a plain add is safe.
        unsafe { *p += n };
    }
}

#[inline(always)]
fn key() -> u64 {
    (u64::from(current_tid()) << 8) | KIND_OUTER
}

/// A call of a timed function (its fexit is attached too).
#[inline(always)]
pub fn enter(slot: u32) {
    add(CALLS, slot, 1);
    let k = key();
    if let Some(p) = INFLIGHT.get_ptr_mut(k) {
        // SAFETY: the entry's fields are plain integers.
        unsafe {
            if now().saturating_sub((*p).start_ns) < STALE_NS {
                (*p).arg0 += 1;
                add(NESTED, ((*p).arg1 as u32) % SLOTS, 1);
                return;
            }
        }
    }
    // The start is read last, so that as little of this program as
    // possible falls inside the measured span.
    begin_keyed(k, 1, u64::from(slot));
}

#[inline(always)]
pub fn exit() {
    // Read first, for the same reason as the start in `enter`.
    let t = now();
    let k = key();
    let Some(p) = INFLIGHT.get_ptr_mut(k) else {
        return;
    };
    // SAFETY: as above; the values are copied before the entry goes.
    let (start, slot) = unsafe {
        let rec = *p;
        if rec.arg0 > 1 {
            (*p).arg0 = rec.arg0 - 1;
            return;
        }
        (rec.start_ns, (rec.arg1 as u32) % SLOTS)
    };
    let ns = t.saturating_sub(start);
    let _ = INFLIGHT.remove(k);
    add(OUTER, slot, 1);
    add(NS, slot, ns);
    if let Some(h) = RMAP_HIST.get_ptr_mut(slot * HIST_BUCKETS + hist_bucket(ns)) {
        unsafe { *h += 1 };
    }
}
