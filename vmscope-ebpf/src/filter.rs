//! Process-tree filtering: children of followed processes are followed too.

use aya_ebpf::programs::TracePointContext;
use aya_log_ebpf::warn;
use vmscope_common::counter;

use crate::maps;

#[inline(always)]
pub fn on_fork(ctx: &TracePointContext) {
    if !maps::filter_enabled() {
        return;
    }
    let parent = maps::current_tgid();
    if maps::TRACKED.get_ptr(parent).is_none() {
        return;
    }
    let Ok(child) =
        (unsafe { ctx.read_at::<i32>(maps::offset(vmscope_common::off::FORK_CHILD_PID)) })
    else {
        return;
    };
    // A new thread's tid lands here too; it is harmless (faults are keyed by
    // tgid) and keeps the check above to one lookup.
    if maps::TRACKED.insert(child as u32, 1, 0).is_err() {
        maps::count(counter::TRACKED_FULL);
        warn!(ctx, "tracked-process set full: pid {} not followed", child);
    }
}
