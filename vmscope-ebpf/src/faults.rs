//! Page faults: `exceptions:page_fault_{user,kernel}` (x86) or the perf
//! software page-faults event elsewhere.

use aya_ebpf::programs::TracePointContext;
use vmscope_common::{FAULT_CLASSES, counter, fault_class};

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
    let base = match mode {
        Mode::User => counter::USER_FAULT_BASE,
        Mode::Kernel => counter::KERNEL_FAULT_BASE,
    };
    maps::count(base + class as u32);
    if let Some(p) = maps::current_proc() {
        let slot = unsafe {
            match mode {
                Mode::User => &raw mut (*p).user_faults[class],
                Mode::Kernel => &raw mut (*p).kernel_faults[class],
            }
        };
        maps::atomic_inc(slot);
    }
}

#[inline(always)]
pub fn on_perf_fault() {
    maps::count(counter::FAULT_UNCLASSIFIED);
    if let Some(p) = maps::current_proc() {
        maps::atomic_inc(unsafe { &raw mut (*p).unclassified_faults });
    }
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
