//! mmap_lock contention, from the `mmap_lock` tracepoints (opt-in: they
//! fire on every acquisition, and a lock-heavy program pays for each).
//!
//! - `start_locking` → `acquire_returned` in the same task: the wait, for a
//!   read or a write lock, into a histogram and the task's process.
//!   Uncontended acquisitions are counted too (a wait of well under a µs).
//! - `acquire_returned` with `success` false: a trylock that found the lock
//!   taken, or a killable wait interrupted.
//! - A write lock's hold, per `mm`: from its acquisition to its
//!   release, or to a downgrade (a read acquisition on an `mm` whose write
//!   hold is open: readers cannot get in while it is held).

use aya_ebpf::{macros::map, maps::HashMap, programs::TracePointContext};
use vmscope_common::{counter, hist, off};

use crate::maps;

/// Waits begun: task id → start time. A plain preallocated
/// hash, cheaper to insert into and delete from than the shared LRU
/// in-flight map; a full map drops the wait (counted).
#[map]
static LOCK_WAITS: HashMap<u32, u64> = HashMap::with_max_entries(MAX_WAITERS, 0);

/// Write holds open: `mm` → acquisition time.
#[map]
static WRITE_HOLDS: HashMap<u64, u64> = HashMap::with_max_entries(MAX_WAITERS, 0);

/// Tasks waiting for, and address spaces held by, the mmap_lock at once.
const MAX_WAITERS: u32 = 16384;

#[inline(always)]
fn flag(ctx: &TracePointContext, idx: usize) -> Option<bool> {
    let at = maps::offset(idx);
    if at == 0 {
        return None;
    }
    unsafe { ctx.read_at::<u8>(at) }.ok().map(|b| b != 0)
}

#[inline(always)]
fn hold_key(ctx: &TracePointContext, idx: usize) -> Option<u64> {
    let at = maps::offset(idx);
    if at == 0 {
        return None;
    }
    unsafe { ctx.read_at::<u64>(at) }.ok()
}

pub fn on_start_locking(ctx: &TracePointContext) {
    if flag(ctx, off::MMAP_START_WRITE).is_none() {
        return;
    }
    if maps::in_scope()
        && LOCK_WAITS
            .insert(maps::current_tid(), maps::now(), 0)
            .is_err()
    {
        maps::count(counter::INFLIGHT_FULL);
    }
}

/// The current task's wait begun, ended: its duration.
#[inline(always)]
fn end_wait() -> Option<u64> {
    let tid = maps::current_tid();
    let start = unsafe { *LOCK_WAITS.get(tid)? };
    let _ = LOCK_WAITS.remove(tid);
    Some(maps::now().saturating_sub(start))
}

pub fn on_acquire_returned(ctx: &TracePointContext) {
    let (Some(write), Some(success)) = (
        flag(ctx, off::MMAP_ACQ_WRITE),
        flag(ctx, off::MMAP_ACQ_SUCCESS),
    ) else {
        return;
    };
    // A wait begun in scope ends here; a trylock has no begin.
    let waited = end_wait();
    if let Some(ns) = waited {
        maps::observe(
            if write {
                hist::MMAP_LOCK_WAIT_WRITE
            } else {
                hist::MMAP_LOCK_WAIT_READ
            },
            ns,
        );
        if let Some(p) = maps::current_proc() {
            unsafe {
                if write {
                    maps::atomic_add(&raw mut (*p).mmap_write_wait_ns, ns);
                    maps::atomic_inc(&raw mut (*p).mmap_write_waits);
                } else {
                    maps::atomic_add(&raw mut (*p).mmap_read_wait_ns, ns);
                    maps::atomic_inc(&raw mut (*p).mmap_read_waits);
                }
            }
        }
    }
    if !success {
        if waited.is_some() || maps::in_scope() {
            maps::count(counter::MMAP_LOCK_FAILED);
            if let Some(p) = maps::current_proc() {
                maps::atomic_inc(unsafe { &raw mut (*p).mmap_lock_fails });
            }
        }
        return;
    }
    let Some(key) = hold_key(ctx, off::MMAP_ACQ_MM) else {
        return;
    };
    if write {
        if (waited.is_some() || maps::in_scope())
            && WRITE_HOLDS.insert(key, maps::now(), 0).is_err()
        {
            maps::count(counter::INFLIGHT_FULL);
        }
    } else if waited.is_none() {
        // No wait begun: a trylock, or a downgrade of a held write lock.
        end_hold(key);
    }
}

pub fn on_released(ctx: &TracePointContext) {
    if flag(ctx, off::MMAP_REL_WRITE) != Some(true) {
        return;
    }
    if let Some(key) = hold_key(ctx, off::MMAP_REL_MM) {
        end_hold(key);
    }
}

#[inline(always)]
fn end_hold(mm: u64) {
    let Some(start) = (unsafe { WRITE_HOLDS.get(mm) }).copied() else {
        return;
    };
    let _ = WRITE_HOLDS.remove(mm);
    maps::observe(
        hist::MMAP_LOCK_WRITE_HOLD,
        maps::now().saturating_sub(start),
    );
}
