//! madvise, process_madvise, munmap and mprotect: calls, bytes, errors and
//! latency, from the syscall enter/exit tracepoints. Attributed to the
//! calling task, so under a filter only the followed tree counts.

use aya_ebpf::programs::TracePointContext;
use vmscope_common::{counter, hist, kind, madvise, off};

use crate::maps;

#[inline(always)]
fn arg(ctx: &TracePointContext, idx: usize) -> u64 {
    unsafe { ctx.read_at::<u64>(maps::offset(idx)) }.unwrap_or(0)
}

#[inline(always)]
fn ret(ctx: &TracePointContext) -> i64 {
    unsafe { ctx.read_at::<i64>(maps::offset(off::SYS_EXIT_RET)) }.unwrap_or(0)
}

pub fn madvise_enter(ctx: &TracePointContext) {
    if !maps::in_scope() {
        return;
    }
    let len = arg(ctx, off::MADVISE_LEN);
    let behavior = arg(ctx, off::MADVISE_BEHAVIOR);
    maps::begin(kind::MADVISE, behavior, len);
}

pub fn madvise_exit(ctx: &TracePointContext) {
    let Some((rec, ns)) = maps::end(kind::MADVISE) else {
        return;
    };
    let slot = madvise::slot(rec.arg0);
    maps::count(counter::MADVISE_CALLS_BASE + slot);
    if ret(ctx) < 0 {
        maps::count(counter::MADVISE_ERRORS_BASE + slot);
    } else {
        maps::add(counter::MADVISE_BYTES_BASE + slot, rec.arg1);
    }
    maps::observe(hist::MADVISE_BASE + slot, ns);
    if let Some(p) = maps::current_proc() {
        maps::atomic_inc(unsafe { &raw mut (*p).madvise_calls });
    }
}

pub fn process_madvise_enter(ctx: &TracePointContext) {
    if !maps::in_scope() {
        return;
    }
    let behavior = arg(ctx, off::PROCESS_MADVISE_BEHAVIOR);
    maps::begin(kind::PROCESS_MADVISE, behavior, 0);
}

pub fn process_madvise_exit(ctx: &TracePointContext) {
    let Some((_, ns)) = maps::end(kind::PROCESS_MADVISE) else {
        return;
    };
    if ret(ctx) < 0 {
        maps::count(counter::PROCESS_MADVISE_ERRORS);
    }
    maps::observe(hist::PROCESS_MADVISE, ns);
    if let Some(p) = maps::current_proc() {
        maps::atomic_inc(unsafe { &raw mut (*p).madvise_calls });
    }
}

pub fn timed_enter(k: u64) {
    if maps::in_scope() {
        maps::begin(k, 0, 0);
    }
}

pub fn timed_exit(k: u64, histogram: u32) {
    if let Some((_, ns)) = maps::end(k) {
        maps::observe(histogram, ns);
    }
}

/// Marks the current task as inside a syscall of kind `k` (no timing).
pub fn mark_enter(k: u64) {
    if maps::in_scope() {
        maps::begin(k, 0, 0);
    }
}

pub fn mark_exit(k: u64) {
    let _ = maps::end(k);
}
