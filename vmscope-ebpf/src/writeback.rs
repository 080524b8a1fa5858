//! Dirty throttling: `writeback:balance_dirty_pages` fires in the writing
//! task just before `balance_dirty_pages` puts it to sleep for `pause` ms
//! (and, with a pause of 0 or less, when it lets the task go without one).
//! Each pause is one histogram sample and is added to the writer's process.

use aya_ebpf::programs::TracePointContext;
use vmscope_common::{hist, off};

use crate::maps;

pub fn on_balance_dirty_pages(ctx: &TracePointContext) {
    let at = maps::offset(off::BDP_PAUSE);
    if at == 0 || !maps::in_scope() {
        return;
    }
    let pause_ms = unsafe { ctx.read_at::<i64>(at) }.unwrap_or(0);
    if pause_ms <= 0 {
        return;
    }
    // A pause is at most 200 ms (`MAX_PAUSE`); the bound keeps the product
    // in range without a 128-bit multiply, which BPF lacks.
    let ns = (pause_ms as u64).min(1 << 30) * 1_000_000;
    maps::observe(hist::DIRTY_PAUSE, ns);
    if let Some(p) = maps::current_proc() {
        maps::atomic_add(unsafe { &raw mut (*p).dirty_pause_ns }, ns);
        maps::atomic_inc(unsafe { &raw mut (*p).dirty_pauses });
    }
}
