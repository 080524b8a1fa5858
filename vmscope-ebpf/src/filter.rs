//! Process-tree filtering: children of followed processes are followed too.

use aya_ebpf::{
    EbpfContext,
    programs::{BtfTracePointContext, TracePointContext},
};
use aya_log_ebpf::warn;
use vmscope_common::counter;

use crate::maps;

#[inline(always)]
pub fn on_fork(ctx: &TracePointContext) {
    if !maps::filter_enabled() {
        return;
    }
    if let Ok(child) =
        unsafe { ctx.read_at::<i32>(maps::offset(vmscope_common::off::FORK_CHILD_PID)) }
    {
        follow_child(ctx, child);
    }
}

/// `sched_process_fork(struct task_struct *parent, struct task_struct
/// *child)` as a BTF tracepoint: the child's pid read through BTF.
#[inline(always)]
pub fn on_fork_btf(ctx: &BtfTracePointContext, child_task: u64) {
    if !maps::filter_enabled() {
        return;
    }
    let at = maps::offset(vmscope_common::off::TASK_PID);
    if at == 0 {
        return;
    }
    // SAFETY: a task pointer from the tracepoint's arguments; the helper
    // checks the read.
    if let Ok(child) = unsafe {
        aya_ebpf::helpers::bpf_probe_read_kernel((child_task as usize + at) as *const i32)
    } {
        follow_child(ctx, child);
    }
}

/// Follows `child` when the current (forking) process is followed.
#[inline(always)]
fn follow_child<C: EbpfContext>(ctx: &C, child: i32) {
    let parent = maps::current_tgid();
    if maps::TRACKED.get_ptr(parent).is_none() {
        return;
    }
    // A new thread's tid lands here too; it is harmless (faults are keyed by
    // tgid) and keeps the check above to one lookup.
    if maps::TRACKED.insert(child as u32, 1, 0).is_err() {
        maps::count(counter::TRACKED_FULL);
        warn!(ctx, "tracked-process set full: pid {} not followed", child);
    } else if let Some(e) = maps::TRACK_EPOCH.get_ptr_mut(0) {
        maps::atomic_inc(e);
    }
}
