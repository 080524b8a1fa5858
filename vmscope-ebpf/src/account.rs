//! The kernel's own fault books: every fault the kernel accounts to a task
//! (`mm_account_fault`: `min_flt`/`maj_flt`), including those taken through
//! get_user_pages (populate, mlock, remote access), which never pass the
//! exception handler and so never reach the page-fault tracepoints.
//!
//! At each context switch the outgoing task's `min_flt + maj_flt` is
//! compared with its value when that task was switched in on this CPU (a
//! per-CPU slot), and the difference is credited to its process. That
//! needs no lookup for a slice without faults, the common case.
//!
//! A switch-in can go unseen: a task already running when vmscope attached,
//! or a switch the kernel makes without the tracepoint (on some kernels a
//! few threads are switched out untraced, and the task switched in then is
//! never `next`). So a thread that faulted also keeps, per thread, how far
//! it has been credited (`BOOKS`); that cumulative figure, not the slice,
//! decides what is credited, and a slice whose start was not seen is caught
//! up from it. A new thread's books open at 0 when it is forked (its
//! counters start at 0 there), so even its first slice is caught up if its
//! switch-in goes unseen; a thread vmscope did not see born opens them at
//! its first slice that was seen. A dying thread's books close at its exit
//! (`sched_process_exit`, after its mm is gone, so it takes no more
//! faults), because its parent can be woken and read the process a last
//! time before the thread's final switch-out.

use aya_ebpf::{
    helpers::bpf_probe_read_kernel,
    macros::map,
    maps::{LruHashMap, PerCpuArray},
};
use vmscope_common::{MAX_TASK_BOOKS, ProcStats, SwitchSlot, counter, off};

use crate::maps;

#[map]
static SWITCH: PerCpuArray<SwitchSlot> = PerCpuArray::with_max_entries(1, 0);

/// Per thread (tid): the `min_flt + maj_flt` credited so far.
#[map]
static BOOKS: LruHashMap<u32, u64> = LruHashMap::with_max_entries(MAX_TASK_BOOKS, 0);

/// `min_flt + maj_flt` of a task (both `unsigned long`, adjacent).
#[inline(always)]
fn faults_of(task: u64, at: usize) -> Option<u64> {
    // SAFETY: a kernel address from the tracepoint's arguments; the helper
    // checks it.
    let pair = unsafe { bpf_probe_read_kernel((task as usize + at) as *const [u64; 2]) }.ok()?;
    Some(pair[0].wrapping_add(pair[1]))
}

/// Credits `d` faults to process `p`, unless it is no fault count: a
/// thread's counters only grow, so anything else is a reused tid or address
/// seen mid-way.
#[inline(always)]
fn credit(p: *mut ProcStats, d: u64) {
    if d != 0 && d < 1 << 40 {
        maps::atomic_add(
            // SAFETY: a map value.
            unsafe { &raw mut (*p).accounted_faults },
            d,
        );
    }
}

/// A slice of the current thread that this CPU's slot saw from its
/// switch-in (`slice` faults, not 0), ending at `now`: credited from the
/// thread's books, which also catch up any earlier slice that went unseen,
/// or started with it.
#[inline(always)]
fn settle(now: u64, slice: u64) {
    let Some(p) = maps::current_proc() else {
        return;
    };
    let tid = maps::current_tid();
    let d = match BOOKS.get_ptr_mut(tid) {
        // SAFETY: a map value.
        Some(done) => unsafe {
            let d = now.wrapping_sub(*done);
            *done = now;
            d
        },
        None => {
            let _ = BOOKS.insert(tid, now, 0);
            slice
        }
    };
    credit(p, d);
}

/// A slice of the current thread whose switch-in this CPU did not see,
/// ending at `now`: caught up from its books. A thread without books has
/// not faulted in a slice that was seen, and where its count should start
/// is unknown, so nothing is credited (crediting its whole count would
/// count twice a thread whose books closed at its exit or were evicted).
#[inline(always)]
fn catch_up(now: u64) {
    let Some(done) = BOOKS.get_ptr_mut(maps::current_tid()) else {
        return;
    };
    let Some(p) = maps::current_proc() else {
        return;
    };
    maps::count(counter::SWITCH_IN_UNSEEN);
    // SAFETY: a map value.
    let d = unsafe {
        let d = now.wrapping_sub(*done);
        *done = now;
        d
    };
    credit(p, d);
}

/// Closes the slice of `task` (the current one) at `now`, its
/// `min_flt + maj_flt`.
///
/// # Safety
/// `s` is this CPU's slot.
#[inline(always)]
unsafe fn close_slice(s: *mut SwitchSlot, task: u64, now: u64) {
    // SAFETY: the caller's.
    unsafe {
        if (*s).task == task {
            let slice = now.wrapping_sub((*s).base);
            if slice != 0 {
                settle(now, slice);
            }
        } else {
            catch_up(now);
        }
    }
}

/// A task just forked (process or thread), `tid`: its `min_flt + maj_flt`
/// start at 0, so its books open at 0 (over any left by an earlier task
/// with this tid).
#[inline(always)]
pub fn on_new_task(tid: u32) {
    if maps::offset(off::TASK_FLT) != 0 {
        let _ = BOOKS.insert(tid, 0, 0);
    }
}

/// `sched_process_exit`, in the exiting thread's context: close its books
/// (they are dropped) and move this CPU's slot on, so its final switch-out
/// adds nothing twice.
#[inline(always)]
pub fn on_task_exit() {
    let at = maps::offset(off::TASK_FLT);
    if at == 0 {
        return;
    }
    let Some(s) = SWITCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: the helper returns the current task's address.
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
    let Some(now) = faults_of(task, at) else {
        return;
    };
    // SAFETY: this CPU's slot, as in `on_switch`.
    unsafe {
        close_slice(s, task, now);
        if (*s).task == task {
            (*s).base = now;
        }
    }
    let _ = BOOKS.remove(maps::current_tid());
}

/// `sched_switch(preempt, prev, next)`; runs in `prev`'s context.
#[inline(always)]
pub fn on_switch(prev: u64, next: u64) {
    crate::faulttime::on_switch_out(prev);
    crate::timing::on_switch(prev, next);
    let at = maps::offset(off::TASK_FLT);
    if at == 0 {
        return;
    }
    let Some(s) = SWITCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's slot; programs do not migrate and a switch does not
    // nest in another.
    unsafe {
        if prev != 0
            && let Some(now) = faults_of(prev, at)
        {
            close_slice(s, prev, now);
        }
        match faults_of(next, at) {
            Some(base) => {
                (*s).task = next;
                (*s).base = base;
            }
            None => (*s).task = 0,
        }
    }
}
