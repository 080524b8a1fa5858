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
//! up from it. A dying thread's books close at its exit
//! (`sched_process_exit`, after its mm is gone, so it takes no more
//! faults), because its parent can be woken and read the process a last
//! time before the thread's final switch-out.

use aya_ebpf::{
    helpers::bpf_probe_read_kernel,
    macros::map,
    maps::{LruHashMap, PerCpuArray},
};
use vmscope_common::{MAX_TASK_BOOKS, SwitchSlot, counter, off};

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

/// Brings the current thread's books up to `now` (its `min_flt + maj_flt`)
/// and credits the difference to its process. `slice` is what this CPU's
/// slot saw since the thread's switch-in, or `None` when that switch-in was
/// not seen; it is used only when the thread has no books yet.
#[inline(always)]
fn settle(now: u64, slice: Option<u64>) {
    let Some(p) = maps::current_proc() else {
        return;
    };
    if slice.is_none() {
        maps::count(counter::SWITCH_IN_UNSEEN);
    }
    let tid = maps::current_tid();
    let d = match BOOKS.get_ptr_mut(tid) {
        // SAFETY: a map value.
        Some(done) => unsafe {
            let d = now.wrapping_sub(*done);
            *done = now;
            d
        },
        None => {
            // Without books and without a seen switch-in, where the books
            // should start is unknown: start them now. (Crediting a young
            // thread's whole count here would count twice a thread whose
            // books were closed at its exit or evicted.)
            let _ = BOOKS.insert(tid, now, 0);
            slice.unwrap_or(0)
        }
    };
    // A thread's counters only grow; anything else is a reused tid or
    // address seen mid-way, not a fault count.
    if d != 0 && d < 1 << 40 {
        maps::atomic_add(
            // SAFETY: a map value.
            unsafe { &raw mut (*p).accounted_faults },
            d,
        );
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
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
    let Some(now) = faults_of(task, at) else {
        return;
    };
    // SAFETY: this CPU's slot, as in `on_switch`.
    unsafe {
        if (*s).task == task {
            settle(now, Some(now.wrapping_sub((*s).base)));
            (*s).base = now;
        } else {
            settle(now, None);
        }
    }
    let _ = BOOKS.remove(maps::current_tid());
}

/// `sched_switch(preempt, prev, next)`; runs in `prev`'s context.
#[inline(always)]
pub fn on_switch(prev: u64, next: u64) {
    crate::faulttime::on_switch_out(prev);
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
            if (*s).task == prev {
                let slice = now.wrapping_sub((*s).base);
                if slice != 0 {
                    settle(now, Some(slice));
                }
            } else {
                settle(now, None);
            }
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
