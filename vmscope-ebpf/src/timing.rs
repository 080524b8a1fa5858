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

use aya_ebpf::{
    helpers::bpf_get_current_task,
    macros::map,
    maps::{Array, LruHashMap, PerCpuArray},
};
use vmscope_common::{
    HIST_BUCKETS, MAX_INFLIGHT, hist_bucket,
    sample::timing::{CALLS, FIELDS, KIND_OUTER, NESTED, NS, OFF_CPU, OUTER, SLOTS, STALE_NS},
};

use crate::maps::{INFLIGHT, begin_keyed, current_tid, now};

/// Per slot, `timing::FIELDS` counters: `field * SLOTS + slot`.
#[map]
pub static RMAP_STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(SLOTS * FIELDS, 0);

/// 1 once user space has attached direct timing: until then the context
/// switch hook does nothing here.
#[map]
pub static RMAP_ON: Array<u32> = Array::with_max_entries(1, 0);

/// Threads switched out inside an open timed span, by task: when they left
/// (0 while on CPU) and how long they have been off CPU in the span.
#[map]
static RMAP_OFF_CPU: LruHashMap<u64, [u64; 2]> = LruHashMap::with_max_entries(MAX_INFLIGHT, 0);

/// Log2-ns latency histogram (wall time) of each slot's outermost calls.
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
    // The span's CPU time is its wall time less the time the thread was
    // switched out in it (what a CPU sampler cannot see either).
    let task = unsafe { bpf_get_current_task() };
    let off = match unsafe { RMAP_OFF_CPU.get(task) } {
        Some(v) => {
            let off = v[1];
            let _ = RMAP_OFF_CPU.remove(task);
            off.min(ns)
        }
        None => 0,
    };
    add(OUTER, slot, 1);
    add(NS, slot, ns - off);
    add(OFF_CPU, slot, off);
    if let Some(h) = RMAP_HIST.get_ptr_mut(slot * HIST_BUCKETS + hist_bucket(ns)) {
        unsafe { *h += 1 };
    }
}

/// A context switch (from `prev`, the current task, to `next`): a thread
/// leaving the CPU inside a timed span notes when; one coming back adds
/// the time it was away to its span's off-CPU time.
#[inline(always)]
pub fn on_switch(prev: u64, next: u64) {
    if RMAP_ON.get(0).copied() != Some(1) {
        return;
    }
    let t = now();
    if INFLIGHT.get_ptr(key()).is_some() {
        match RMAP_OFF_CPU.get_ptr_mut(prev) {
            // SAFETY: plain integers.
            Some(p) => unsafe { (*p)[0] = t },
            None => {
                let _ = RMAP_OFF_CPU.insert(prev, [t, 0], 0);
            }
        }
    }
    if let Some(p) = RMAP_OFF_CPU.get_ptr_mut(next) {
        // SAFETY: plain integers.
        unsafe {
            if (*p)[0] != 0 {
                (*p)[1] += t.saturating_sub((*p)[0]);
                (*p)[0] = 0;
            }
        }
    }
}
