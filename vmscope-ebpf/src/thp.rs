//! Huge-page faults per process: `memcg:count_memcg_events` (6.16 on)
//! fires each time a memory cgroup counts an event, in the task the event
//! happened in. A fault that got a huge page (PMD size) counts
//! `THP_FAULT_ALLOC` in the faulting task, so that task's process gets it.
//! The hook fires on every page fault too (`PGFAULT`), which is why it is
//! opt-in (`--thp-faults`): the common path is one compare.

use aya_ebpf::programs::TracePointContext;
use vmscope_common::off;

use crate::maps;

/// The classic record's `item` and `val`.
pub fn on_memcg_event_record(ctx: &TracePointContext) {
    let (item_at, val_at) = (
        maps::offset(off::MEMCG_EVENT_ITEM),
        maps::offset(off::MEMCG_EVENT_VAL),
    );
    if item_at == 0 || val_at == 0 {
        return;
    }
    // SAFETY (both): reads within the record at its format's offsets.
    let (Ok(item), Ok(val)) = (unsafe { ctx.read_at::<i32>(item_at) }, unsafe {
        ctx.read_at::<u64>(val_at)
    }) else {
        return;
    };
    on_memcg_event(item, val);
}

/// One event: `item` of `enum vm_event_item`, counted `val` times.
#[inline(always)]
pub fn on_memcg_event(item: i32, val: u64) {
    let alloc = maps::offset(off::THP_FAULT_ALLOC_ITEM);
    if alloc == 0 || item as i64 + 1 != alloc as i64 {
        return;
    }
    if let Some(p) = maps::current_proc() {
        // SAFETY: a map value.
        maps::atomic_add(unsafe { &raw mut (*p).thp_faults }, val);
    }
}
