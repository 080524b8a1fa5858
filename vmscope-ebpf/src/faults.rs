//! Page faults: `exceptions:page_fault_{user,kernel}` (x86) or the perf
//! software page-faults event elsewhere.

use aya_ebpf::{macros::map, maps::PerCpuArray, programs::TracePointContext};
use vmscope_common::{FAULT_CLASSES, FaultCache, cache_flags, counter, fault_class};

use crate::maps;

#[derive(Clone, Copy)]
pub enum Mode {
    User,
    Kernel,
}

#[inline(always)]
pub fn on_tracepoint(ctx: &TracePointContext, mode: Mode) {
    let err: u64 =
        unsafe { ctx.read_at(maps::offset(vmscope_common::off::PF_ERROR_CODE)) }.unwrap_or(0);
    on_fault(err, mode);
}

/// One fault with its x86 error code.
#[inline(always)]
pub fn on_fault(err: u64, mode: Mode) {
    let class = fault_class(err);
    if class >= FAULT_CLASSES {
        return;
    }
    let (base, slot) = match mode {
        Mode::User => (counter::USER_FAULT_BASE, class),
        Mode::Kernel => (counter::KERNEL_FAULT_BASE, FAULT_CLASSES + class),
    };
    maps::count(base + class as u32);
    count_for_process(slot);
}

/// Slot of the perf fallback's faults in `FaultCache::counts`.
const UNCLASSIFIED: usize = 2 * FAULT_CLASSES;

/// Per-CPU cache of the current process's fault counts (see `FaultCache`).
#[map]
pub static FAULT_CACHE: PerCpuArray<FaultCache> = PerCpuArray::with_max_entries(1, 0);

/// Counts one fault of `slot` for the current process: a per-CPU add while
/// the same process keeps faulting on this CPU, which is the common case.
#[inline(always)]
fn count_for_process(slot: usize) {
    let Some(c) = FAULT_CACHE.get_ptr_mut(0) else {
        return;
    };
    let tgid = maps::current_tgid();
    // SAFETY: this CPU's slot; eBPF programs do not migrate, and the fault
    // programs do not nest on one CPU.
    unsafe {
        if (*c).tgid != tgid || (*c).flags & cache_flags::VALID == 0 {
            switch(c, tgid);
        } else if (*c).flags & cache_flags::IN_SCOPE == 0 && maps::filter_enabled() {
            // Out of scope when cached. Only a change of the followed set
            // can change that (e.g. `-p`, or the wrapped command released
            // from its gate, or a pid reused by a followed child): look
            // again only then, and count from then on if it is followed.
            // The entry is created here: odd generation meanwhile, as in
            // `switch`, so that a read of the entries that missed it and a
            // read of the caches that counts it are not taken together.
            let epoch = maps::track_epoch();
            if (*c).epoch != epoch {
                (*c).epoch = epoch;
                (*c).generation += 1;
                if maps::current_proc().is_some() {
                    (*c).flags |= cache_flags::IN_SCOPE;
                }
                (*c).generation += 1;
            }
        }
        // Re-read and masked so the index is bounded in a way older
        // verifiers (6.1) can follow: they lose the bounds the compiler's
        // own comparison established.
        let slot = core::ptr::read_volatile(&raw const slot) & 31;
        if (*c).flags & cache_flags::IN_SCOPE != 0 && slot < (*c).counts.len() {
            (*c).counts[slot] += 1;
        }
    }
}

/// Moves the cached counts into the previous process's entry and starts
/// caching for `tgid`.
#[inline(always)]
unsafe fn switch(c: *mut FaultCache, tgid: u32) {
    // SAFETY (all): `c` is this CPU's cache slot.
    unsafe {
        (*c).generation += 1;
        move_counts(c);
        (*c).tgid = tgid;
        // Read before the lookup below, so an addition racing it changes
        // the epoch after this read and is looked at on the next fault.
        (*c).epoch = maps::track_epoch();
        // Creating the entry here, in the process's own context, gives it
        // the right `comm`.
        (*c).flags = if maps::current_proc().is_some() {
            cache_flags::VALID | cache_flags::IN_SCOPE
        } else {
            cache_flags::VALID
        };
        (*c).generation += 1;
    }
}

/// Adds the cached counts to their process's entry and zeroes them. Nothing
/// is looked up when there is nothing to move, so a cache left holding an
/// exited process's pid never recreates its entry.
#[inline(always)]
unsafe fn move_counts(c: *mut FaultCache) {
    // SAFETY (all): `c` is this CPU's cache slot.
    unsafe {
        if (*c).flags & cache_flags::IN_SCOPE == 0 {
            return;
        }
        let mut any = 0;
        for v in (*c).counts {
            any |= v;
        }
        if any == 0 {
            return;
        }
        if let Some(p) = maps::proc_entry((*c).tgid) {
            let n = FAULT_CLASSES;
            for k in 0..n {
                add_nonzero(&raw mut (*p).user_faults[k], (*c).counts[k]);
                add_nonzero(&raw mut (*p).kernel_faults[k], (*c).counts[n + k]);
            }
            add_nonzero(&raw mut (*p).unclassified_faults, (*c).counts[UNCLASSIFIED]);
        }
        (*c).counts = [0; 2 * FAULT_CLASSES + 1];
    }
}

/// The process `tgid` has exited: if this CPU's cache holds its counts,
/// they go to its entry now and the cache is emptied, so user space can
/// prune the entry at its next read.
#[inline(always)]
pub fn flush_exiting(tgid: u32) {
    let Some(c) = FAULT_CACHE.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's slot (see `count_for_process`).
    unsafe {
        if (*c).tgid != tgid || (*c).flags & cache_flags::VALID == 0 {
            return;
        }
        (*c).generation += 1;
        move_counts(c);
        (*c).flags = 0;
        (*c).generation += 1;
    }
}

#[inline(always)]
fn add_nonzero(p: *mut u64, n: u64) {
    if n != 0 {
        maps::atomic_add(p, n);
    }
}

#[inline(always)]
pub fn on_perf_fault() {
    maps::count(counter::FAULT_UNCLASSIFIED);
    count_for_process(UNCLASSIFIED);
}

/// A major fault (perf software event, period 1): the page had to be read.
#[inline(always)]
pub fn on_major_fault() {
    maps::count(counter::MAJOR_FAULTS);
    if let Some(p) = maps::current_proc() {
        maps::atomic_inc(unsafe { &raw mut (*p).major_faults });
    }
}

/// After exec the task name changes; keep the entry's `comm` current.
#[inline(always)]
pub fn on_exec() {
    let tgid = maps::current_tgid();
    if let Some(p) = maps::PROCS.get_ptr_mut(tgid)
        && let Ok(comm) = aya_ebpf::helpers::bpf_get_current_comm()
    {
        unsafe { (*p).comm = comm };
    }
}
