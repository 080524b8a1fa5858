//! Compaction, page migration and khugepaged collapses: rare events (one
//! per compaction run, migration batch or collapse), so classic
//! tracepoints, their fields found by name on every kernel.
//!
//! - `try_to_compact_pages` starts an allocation's direct compaction and
//!   marks the task as compacting directly until its next one. It is
//!   counted (by order, and charged to the task's process) at its first
//!   zone not skipped: a deferral, a run, or a watermark found met, as
//!   vmstat's `compact_stall` leaves out a compaction every zone skipped. The compaction runs
//!   (`mm_compaction_begin` → `_end`) of a marked task are direct
//!   compaction time; the others are background (kcompactd, proactive,
//!   `compact_memory`).
//! - A direct compaction succeeded when the allocation got its page after
//!   it (what vmstat counts as `compact_success`), whatever its runs ended
//!   in: the allocator then resets the zone's deferral
//!   (`mm_compaction_defer_reset`). `try_to_compact_pages` itself resets it
//!   once when a run ends in success, before returning; that one is
//!   skipped.
//! - kcompactd's active periods, wake to sleep, per node.
//! - Migration: pages succeeded and failed by reason, and each call's time.

use aya_ebpf::programs::TracePointContext;
use vmscope_common::{counter, hist, kind, off};

use crate::maps;

#[inline(always)]
fn int(ctx: &TracePointContext, idx: usize) -> Option<i32> {
    let at = maps::offset(idx);
    if at == 0 {
        return None;
    }
    unsafe { ctx.read_at::<i32>(at) }.ok()
}

#[inline(always)]
fn long(ctx: &TracePointContext, idx: usize) -> u64 {
    let at = maps::offset(idx);
    if at == 0 {
        return 0;
    }
    unsafe { ctx.read_at::<u64>(at) }.unwrap_or(0)
}

pub fn on_try_to_compact_pages(ctx: &TracePointContext) {
    let order = int(ctx, off::COMPACT_TRY_ORDER).unwrap_or(0).max(0) as u32;
    maps::begin(
        kind::COMPACT_DIRECT,
        u64::from(order) | (COMPACTING << PHASE_SHIFT),
        0,
    );
}

/// Set in a marker's `arg0` once its direct compaction is counted.
const COUNTED: u64 = 1 << 40;

/// The marked direct compaction did something in a zone: it was deferred
/// there, ran there, or found the zone's watermark already met (the
/// in-loop deferral reset). The first such event counts it, as the
/// allocator counts `compact_stall` only when not every zone was skipped
/// (too few free pages to migrate into): counting at the start would count
/// those too.
#[inline(always)]
fn note_stall(m: *mut vmscope_common::Inflight) {
    // SAFETY: a map value.
    let arg0 = unsafe { (*m).arg0 };
    if arg0 & COUNTED != 0 {
        return;
    }
    unsafe { (*m).arg0 = arg0 | COUNTED };
    let order = (arg0 & 0xff) as u32;
    maps::count(counter::COMPACT_DIRECT);
    maps::count(counter::COMPACT_ORDER_BASE + order.min(counter::COMPACT_ORDERS - 1));
    if maps::in_scope()
        && let Some(p) = maps::current_proc()
    {
        maps::atomic_inc(unsafe { &raw mut (*p).direct_compactions });
    }
}

/// Where a direct compaction is, in its marker's `arg0` above the order.
const PHASE_SHIFT: u32 = 32;
/// Compacting (or returned without a run ending in success).
const COMPACTING: u64 = 0;
/// A run ended in success: `try_to_compact_pages` resets the deferral next.
const RESET_DUE: u64 = 1;
/// That reset seen: the next one is the allocator's, after getting a page.
const RETURNED: u64 = 2;

#[inline(always)]
fn marker() -> u64 {
    (u64::from(maps::current_tid()) << 8) | kind::COMPACT_DIRECT
}

pub fn on_compaction_begin() {
    if let Some(m) = maps::INFLIGHT.get_ptr_mut(marker()) {
        note_stall(m);
        unsafe { (*m).arg1 = maps::now() };
    }
}

pub fn on_compaction_end(ctx: &TracePointContext) {
    let status = int(ctx, off::COMPACT_END_STATUS);
    let success = maps::offset(off::COMPACT_SUCCESS_VALUE);
    let Some(m) = maps::INFLIGHT.get_ptr_mut(marker()) else {
        maps::count(counter::COMPACT_RUNS_BACKGROUND);
        return;
    };
    maps::count(counter::COMPACT_RUNS_DIRECT);
    let start = unsafe { (*m).arg1 };
    unsafe { (*m).arg1 = 0 };
    if start != 0 {
        let ns = maps::now().saturating_sub(start);
        maps::observe(hist::COMPACTION_DIRECT, ns);
        if maps::in_scope()
            && let Some(p) = maps::current_proc()
        {
            maps::atomic_add(unsafe { &raw mut (*p).direct_compaction_ns }, ns);
        }
    }
    if success != 0 && status.map(|s| s as i64 + 1) == Some(success as i64) {
        maps::count(counter::COMPACT_RUNS_DIRECT_SUCCESS);
        unsafe { (*m).arg0 = ((*m).arg0 & (0xffff_ffff | COUNTED)) | (RESET_DUE << PHASE_SHIFT) };
    }
}

pub fn on_defer_reset() {
    let Some(m) = maps::INFLIGHT.get_ptr_mut(marker()) else {
        return;
    };
    note_stall(m);
    let phase = (unsafe { (*m).arg0 } >> PHASE_SHIFT) & 0xff;
    if phase == RESET_DUE {
        unsafe { (*m).arg0 = ((*m).arg0 & (0xffff_ffff | COUNTED)) | (RETURNED << PHASE_SHIFT) };
        return;
    }
    // COMPACTING or RETURNED: the allocator's reset, after its page.
    maps::count(counter::COMPACT_DIRECT_SUCCESS);
    let _ = maps::INFLIGHT.remove(marker());
}

pub fn on_compaction_deferred() {
    maps::count(counter::COMPACT_DEFERRED);
    if let Some(m) = maps::INFLIGHT.get_ptr_mut(marker()) {
        note_stall(m);
    }
}

#[inline(always)]
fn kcompactd_key(nid: i32) -> u64 {
    ((nid as u32 as u64) << 8) | kind::KCOMPACTD | (1 << 63)
}

/// A wake while kcompactd is already awake keeps the first wake time.
pub fn on_kcompactd_wake(ctx: &TracePointContext) {
    maps::count(counter::KCOMPACTD_WAKES);
    let key = kcompactd_key(int(ctx, off::KCOMPACTD_WAKE_NID).unwrap_or(0));
    if maps::INFLIGHT.get_ptr(key).is_none() {
        maps::begin_keyed(key, 0, 0);
    }
}

pub fn on_kcompactd_sleep(ctx: &TracePointContext) {
    let key = kcompactd_key(int(ctx, off::KCOMPACTD_SLEEP_NID).unwrap_or(0));
    if let Some((_, ns)) = maps::end_keyed(key) {
        maps::observe(hist::KCOMPACTD_ACTIVE, ns);
    }
}

pub fn on_migrate_start() {
    maps::begin(kind::MIGRATE, 0, 0);
}

pub fn on_migrate_pages(ctx: &TracePointContext) {
    if let Some((_, ns)) = maps::end(kind::MIGRATE) {
        maps::observe(hist::MIGRATE, ns);
    }
    let reason = int(ctx, off::MIGRATE_REASON).unwrap_or(0).max(0) as u32;
    let slot = reason.min(counter::MIGRATE_REASONS - 1);
    maps::add(
        counter::MIGRATE_SUCCEEDED_BASE + slot,
        long(ctx, off::MIGRATE_SUCCEEDED),
    );
    maps::add(
        counter::MIGRATE_FAILED_BASE + slot,
        long(ctx, off::MIGRATE_FAILED),
    );
}

pub fn on_khugepaged_scan_pmd() {
    maps::count(counter::KHUGEPAGED_SCANS);
}

pub fn on_collapse_huge_page(ctx: &TracePointContext) {
    maps::count(counter::THP_COLLAPSES);
    let success = maps::offset(off::COLLAPSE_SUCCESS_VALUE);
    let status = int(ctx, off::COLLAPSE_STATUS);
    if success != 0 && status.map(|s| s as i64 + 1) == Some(success as i64) {
        maps::count(counter::THP_COLLAPSE_SUCCEEDED);
    }
}
