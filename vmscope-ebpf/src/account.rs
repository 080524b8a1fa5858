//! The kernel's own fault books: every fault the kernel accounts to a task
//! (`mm_account_fault`: `min_flt`/`maj_flt`), including those taken through
//! get_user_pages (populate, mlock, remote access), which never pass the
//! exception handler and so never reach the page-fault tracepoints.
//!
//! At each context switch the outgoing task's `min_flt + maj_flt` is
//! compared with its value when that task was switched in on this CPU (a
//! per-CPU slot), and the difference is credited to its process. A task
//! runs on one CPU between its switch-in and switch-out there, so the slot
//! sees its whole slice; a dying task's last switch-out closes its books.

use aya_ebpf::{helpers::bpf_probe_read_kernel, macros::map, maps::PerCpuArray};
use vmscope_common::{SwitchSlot, off};

use crate::maps;

#[map]
static SWITCH: PerCpuArray<SwitchSlot> = PerCpuArray::with_max_entries(1, 0);

/// `min_flt + maj_flt` of a task (both `unsigned long`, adjacent).
#[inline(always)]
fn faults_of(task: u64, at: usize) -> Option<u64> {
    // SAFETY: a kernel address from the tracepoint's arguments; the helper
    // checks it.
    let pair = unsafe { bpf_probe_read_kernel((task as usize + at) as *const [u64; 2]) }.ok()?;
    Some(pair[0].wrapping_add(pair[1]))
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
            && (*s).task == prev
            && let Some(now) = faults_of(prev, at)
        {
            let d = now.wrapping_sub((*s).base);
            // A task's counters only grow; anything else is a reused
            // address seen mid-way, not a fault count.
            if d != 0
                && d < 1 << 40
                && let Some(p) = maps::current_proc()
            {
                maps::atomic_add(&raw mut (*p).accounted_faults, d);
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
