//! Page-fault handling time, measured inside the kernel: fentry/fexit on
//! `handle_mm_fault`, which every fault goes through (the exception path and
//! get_user_pages alike). Only where the kernel allows fentry.
//!
//! The start time sits in a per-CPU slot while the fault runs; a fault
//! that sleeps (a major fault reading its page, a lock wait) is moved to a
//! per-task map when its task leaves the CPU (`on_switch_out`, called by the
//! context-switch program), so it is found wherever it ends.

use aya_ebpf::{
    helpers::{bpf_get_current_task, bpf_probe_read_kernel},
    macros::map,
    maps::{LruHashMap, PerCpuArray},
};
use vmscope_common::{FaultTiming, counter, hist, off};

use crate::maps;

#[map]
static FAULT_SLOT: PerCpuArray<FaultTiming> = PerCpuArray::with_max_entries(1, 0);

/// Faults in progress whose task left its CPU, by tid.
#[map]
static FAULT_SLEEPING: LruHashMap<u32, u64> = LruHashMap::with_max_entries(8192, 0);

/// The first attempt's start of a fault the kernel is retrying (it dropped
/// the mmap lock to wait for the page), by tid: the retry, which has
/// `FAULT_FLAG_TRIED`, is timed from there, so the wait counts.
#[map]
static FAULT_RETRYING: LruHashMap<u32, u64> = LruHashMap::with_max_entries(8192, 0);

/// `vm_fault_t` bits and `fault_flag` bits (stable since 5.x).
const VM_FAULT_MAJOR: u32 = 0x0004;
const VM_FAULT_RETRY: u32 = 0x0400;
const FAULT_FLAG_TRIED: u32 = 1 << 5;

#[inline(always)]
pub fn enter() {
    let Some(s) = FAULT_SLOT.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's slot; fault handling does not nest on one CPU.
    unsafe {
        (*s).task = bpf_get_current_task();
        (*s).start_ns = maps::now();
    }
}

/// `handle_mm_fault(vma, address, flags, regs)` returned `ret`.
#[inline(always)]
pub fn exit(vma: u64, flags: u32, ret: u32) {
    let Some(s) = FAULT_SLOT.get_ptr_mut(0) else {
        return;
    };
    let task = unsafe { bpf_get_current_task() };
    // SAFETY: this CPU's slot.
    let start = unsafe {
        if (*s).task == task {
            (*s).task = 0;
            (*s).start_ns
        } else {
            let tid = maps::current_tid();
            let Some(&start) = FAULT_SLEEPING.get(tid) else {
                maps::count(counter::FAULT_UNTIMED);
                return;
            };
            let _ = FAULT_SLEEPING.remove(tid);
            start
        }
    };
    // A fault to be retried is timed once, when the retry completes, from
    // this first attempt's start; the kernel counts it once, as major.
    if ret & VM_FAULT_RETRY != 0 {
        maps::count(counter::FAULT_RETRIES);
        let tid = maps::current_tid();
        // SAFETY: a lookup whose value is only tested for presence.
        if unsafe { FAULT_RETRYING.get(tid) }.is_none() {
            let _ = FAULT_RETRYING.insert(tid, start, 0);
        }
        return;
    }
    let start = if flags & FAULT_FLAG_TRIED != 0 {
        let tid = maps::current_tid();
        // SAFETY: the value is copied out before the entry is removed.
        match unsafe { FAULT_RETRYING.get(tid) }.copied() {
            Some(first) => {
                let _ = FAULT_RETRYING.remove(tid);
                first
            }
            None => start,
        }
    } else {
        start
    };
    let major = ret & VM_FAULT_MAJOR != 0 || flags & FAULT_FLAG_TRIED != 0;
    let at = maps::offset(off::VMA_FILE) as u64;
    // SAFETY: the vma's file pointer; the helper checks the read.
    let file = unsafe { bpf_probe_read_kernel((vma + at) as *const u64) }.is_ok_and(|f| f != 0);
    let id = hist::FAULT_BASE + 2 * u32::from(major) + u32::from(file);
    maps::count(counter::FAULT_TIMED);
    maps::observe(id, maps::now().saturating_sub(start));
}

/// The task leaving this CPU: if it is mid-fault, keep its start time by
/// tid. Runs in the outgoing task's context.
#[inline(always)]
pub fn on_switch_out(prev: u64) {
    let Some(s) = FAULT_SLOT.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's slot.
    unsafe {
        if (*s).task == 0 || (*s).task != prev {
            return;
        }
        (*s).task = 0;
        let _ = FAULT_SLEEPING.insert(maps::current_tid(), (*s).start_ns, 0);
    }
}
