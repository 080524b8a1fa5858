//! TLB flushes by reason. This fires on every context switch, so the common
//! path is two per-CPU increments; only shootdown IPIs (reason 4, sent by the
//! task changing the mapping) touch the per-process map.

use aya_ebpf::programs::TracePointContext;
use vmscope_common::{counter, off};

use crate::maps;

const TLB_REMOTE_SEND_IPI: i32 = 4;

pub fn on_flush(ctx: &TracePointContext) {
    let reason = unsafe { ctx.read_at::<i32>(maps::offset(off::TLB_REASON)) }.unwrap_or(-1);
    let pages = unsafe { ctx.read_at::<u64>(maps::offset(off::TLB_PAGES)) }.unwrap_or(0);
    on_flush_of(reason, pages);
}

/// One flush: `tlb_flush(int reason, unsigned long pages)`, `pages` -1 for
/// a full flush.
#[inline(always)]
pub fn on_flush_of(reason: i32, pages: u64) {
    let slot = if (0..6).contains(&reason) {
        reason as u32
    } else {
        counter::TLB_REASONS - 1
    };
    maps::count(counter::TLB_REASON_BASE + slot);
    if pages == u64::MAX {
        maps::count(counter::TLB_FULL);
    } else {
        maps::add(counter::TLB_PAGES, pages);
    }
    if reason == TLB_REMOTE_SEND_IPI
        && let Some(p) = maps::current_proc()
    {
        maps::atomic_inc(unsafe { &raw mut (*p).tlb_shootdowns });
    }
}
