//! Reclaim: stall latency by kind from begin/end pairs, kswapd active time,
//! LRU scan/reclaim counters and reclaim write-back.

use aya_ebpf::{helpers::bpf_probe_read_kernel, programs::TracePointContext};
use vmscope_common::{counter, hist, kind, off};

use crate::maps;

/// Direct and memcg reclaim run in the allocating task: scope-filtered and
/// charged to it per process.
pub fn task_begin(k: u64) {
    if maps::in_scope() {
        maps::begin(k, 0, 0);
    }
}

pub fn task_end(k: u64, histogram: u32) {
    let Some((_, ns)) = maps::end(k) else {
        return;
    };
    maps::observe(histogram, ns);
    if k != kind::RECLAIM_DIRECT && k != kind::RECLAIM_MEMCG {
        return;
    }
    if let Some(p) = maps::current_proc() {
        unsafe {
            if k == kind::RECLAIM_DIRECT {
                maps::atomic_add(&raw mut (*p).direct_reclaim_ns, ns);
                maps::atomic_inc(&raw mut (*p).direct_reclaims);
            } else {
                maps::atomic_add(&raw mut (*p).memcg_reclaim_ns, ns);
                maps::atomic_inc(&raw mut (*p).memcg_reclaims);
            }
        }
    }
}

/// shrink_slab runs inside whichever reclaim called it; system-wide.
pub fn slab_begin() {
    maps::begin(kind::SHRINK_SLAB, 0, 0);
}

pub fn slab_end() {
    if let Some((_, ns)) = maps::end(kind::SHRINK_SLAB) {
        maps::observe(hist::SHRINK_SLAB, ns);
    }
}

#[inline(always)]
fn kswapd_key(nid: i32) -> u64 {
    (nid as u32 as u64) << 8 | kind::KSWAPD | (1 << 63)
}

#[inline(always)]
fn nid(ctx: &TracePointContext, idx: usize) -> i32 {
    unsafe { ctx.read_at::<i32>(maps::offset(idx)) }.unwrap_or(0)
}

pub fn kswapd_wake(ctx: &TracePointContext) {
    kswapd_wake_on(nid(ctx, off::KSWAPD_WAKE_NID));
}

pub fn kswapd_sleep(ctx: &TracePointContext) {
    kswapd_sleep_on(nid(ctx, off::KSWAPD_SLEEP_NID));
}

/// A wake while kswapd is already awake keeps the first wake time.
#[inline(always)]
pub fn kswapd_wake_on(nid: i32) {
    let key = kswapd_key(nid);
    if maps::INFLIGHT.get_ptr(key).is_none() {
        maps::begin_keyed(key, 0, 0);
    }
}

#[inline(always)]
pub fn kswapd_sleep_on(nid: i32) {
    if let Some((_, ns)) = maps::end_keyed(kswapd_key(nid)) {
        maps::observe(hist::KSWAPD_ACTIVE, ns);
    }
}

#[inline(always)]
fn field(ctx: &TracePointContext, idx: usize) -> u64 {
    unsafe { ctx.read_at::<u64>(maps::offset(idx)) }.unwrap_or(0)
}

pub fn shrink_inactive(ctx: &TracePointContext) {
    shrink_inactive_of([
        field(ctx, off::LRU_INACTIVE_SCANNED),
        field(ctx, off::LRU_INACTIVE_RECLAIMED),
        field(ctx, off::LRU_INACTIVE_DIRTY),
        field(ctx, off::LRU_INACTIVE_WRITEBACK),
        field(ctx, off::LRU_INACTIVE_IMMEDIATE),
        field(ctx, off::LRU_INACTIVE_UNMAP_FAIL),
    ]);
}

/// The BTF variant: `(int nid, unsigned long nr_scanned, unsigned long
/// nr_reclaimed, struct reclaim_stat *stat, ...)`, the per-cause counts read
/// from `stat` (a struct of 4-byte counters) at its BTF offsets.
pub fn shrink_inactive_btf(scanned: u64, reclaimed: u64, stat: u64) {
    const WORDS: usize = 32;
    let Ok(words) = (unsafe { bpf_probe_read_kernel(stat as *const [u32; WORDS]) }) else {
        return;
    };
    let at = |idx: usize| u64::from(words[(maps::offset(idx) / 4) & (WORDS - 1)]);
    shrink_inactive_of([
        scanned,
        reclaimed,
        at(off::RSTAT_DIRTY),
        at(off::RSTAT_WRITEBACK),
        at(off::RSTAT_IMMEDIATE),
        at(off::RSTAT_UNMAP_FAIL),
    ]);
}

/// Scanned, reclaimed, dirty, writeback, immediate, unmap-failed.
#[inline(always)]
fn shrink_inactive_of(v: [u64; 6]) {
    maps::add(counter::LRU_SCANNED, v[0]);
    maps::add(counter::LRU_RECLAIMED, v[1]);
    maps::add(counter::LRU_DIRTY, v[2]);
    maps::add(counter::LRU_WRITEBACK, v[3]);
    maps::add(counter::LRU_IMMEDIATE, v[4]);
    maps::add(counter::LRU_UNMAP_FAIL, v[5]);
}

pub fn shrink_active(ctx: &TracePointContext) {
    shrink_active_of(
        field(ctx, off::LRU_ACTIVE_TAKEN),
        field(ctx, off::LRU_ACTIVE_DEACTIVATED),
    );
}

/// Also the BTF variant's: `(int nid, unsigned long nr_taken, unsigned long
/// nr_active, unsigned long nr_deactivated, ...)`.
pub fn shrink_active_of(taken: u64, deactivated: u64) {
    maps::add(counter::LRU_ACTIVE_TAKEN, taken);
    maps::add(counter::LRU_ACTIVE_DEACTIVATED, deactivated);
}

/// `reclaim_flags`: RECLAIM_WB_ANON 0x1, RECLAIM_WB_FILE 0x2.
pub fn write_folio(ctx: &TracePointContext) {
    let flags = unsafe { ctx.read_at::<i32>(maps::offset(off::WRITE_FOLIO_FLAGS)) }.unwrap_or(0);
    if flags & 0x1 != 0 {
        maps::count(counter::WRITE_ANON);
    }
    if flags & 0x2 != 0 {
        maps::count(counter::WRITE_FILE);
    }
}

/// The BTF variant, `(struct folio *folio)`: anon when the folio is
/// swap-backed, as the classic event's `reclaim_flags` say.
pub fn write_folio_btf(folio: u64) {
    let at = maps::offset(off::FOLIO_FLAGS);
    let Ok(flags) = (unsafe { bpf_probe_read_kernel((folio as usize + at) as *const u64) }) else {
        return;
    };
    let bit = maps::offset(off::PG_SWAPBACKED) & 63;
    if flags & (1 << bit) != 0 {
        maps::count(counter::WRITE_ANON);
    } else {
        maps::count(counter::WRITE_FILE);
    }
}
