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

/// Follows `child` (a new task's tid) when the current (forking) process
/// is followed, or every process is, and opens its fault books.
#[inline(always)]
fn follow_child<C: EbpfContext>(ctx: &C, child: i32) {
    if maps::filter_enabled() {
        if maps::TRACKED.get_ptr(maps::current_tgid()).is_none() {
            return;
        }
        // A new thread's tid lands here too; it is harmless (faults are
        // keyed by tgid) and keeps the check above to one lookup.
        follow(ctx, child as u32);
    }
    crate::account::on_new_task(child as u32);
}

/// Adds `pid` to the followed set (and moves the set's epoch on), or
/// counts and reports that the set is full.
#[inline(always)]
pub fn follow<C: EbpfContext>(ctx: &C, pid: u32) {
    if maps::TRACKED.insert(pid, 1, 0).is_err() {
        maps::count(counter::TRACKED_FULL);
        warn!(ctx, "tracked-process set full: pid {} not followed", pid);
    } else if let Some(e) = maps::TRACK_EPOCH.get_ptr_mut(0) {
        maps::atomic_inc(e);
    }
}

/// `sched_process_exit`: the current task is exiting (after its mm is gone,
/// so it takes no more faults). A thread's followed-set entry goes at once;
/// when it is the process's last thread, the process's too, and its
/// statistics entry is marked exited for user space to read a last time and
/// delete (`maps::current_proc` still finds it for the task's last context
/// switch). Followed or not, entries are bounded by the processes alive.
#[inline(always)]
pub fn on_exit() {
    let id = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let (tgid, tid) = ((id >> 32) as u32, id as u32);
    crate::account::on_task_exit();
    let filtering = maps::filter_enabled();
    if filtering && tid != tgid && maps::TRACKED.remove(tid).is_ok() {
        maps::count(counter::TRACKED_REMOVED);
    }
    if !group_dead(tid == tgid) {
        return;
    }
    maps::count(counter::PROC_EXITS);
    crate::faults::flush_exiting(tgid);
    if let Some(p) = maps::PROCS.get_ptr_mut(tgid) {
        // SAFETY: a map value.
        unsafe { (*p).exited_ns = maps::now() };
    }
    if filtering && maps::TRACKED.remove(tgid).is_ok() {
        maps::count(counter::TRACKED_REMOVED);
    }
}

/// Whether the exiting task is its process's last: `signal->live`, which
/// `do_exit` has decremented by now, is 0. Without the BTF offsets, the
/// group leader's exit stands for the process's.
#[inline(always)]
fn group_dead(leader: bool) -> bool {
    let (sig_at, live_at) = (
        maps::offset(vmscope_common::off::TASK_SIGNAL),
        maps::offset(vmscope_common::off::SIGNAL_LIVE),
    );
    if sig_at == 0 || live_at == 0 {
        return leader;
    }
    // SAFETY (both): kernel reads through the helper, which checks them.
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() } as usize;
    let Ok(signal) =
        (unsafe { aya_ebpf::helpers::bpf_probe_read_kernel((task + sig_at) as *const u64) })
    else {
        return leader;
    };
    match unsafe {
        aya_ebpf::helpers::bpf_probe_read_kernel((signal as usize + live_at) as *const i32)
    } {
        Ok(live) => live == 0,
        Err(_) => leader,
    }
}
