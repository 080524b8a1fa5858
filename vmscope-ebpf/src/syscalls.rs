//! madvise and process_madvise (calls, bytes, errors and latency), munmap
//! and mprotect (latency, opt-in), from the syscall enter/exit tracepoints.
//! Attributed to the calling task, so under a filter only the followed tree
//! counts.

use aya_ebpf::{helpers::bpf_probe_read_kernel, programs::TracePointContext};
use vmscope_common::{counter, hist, kind, madvise, off, raw_syscall, syscall};

use crate::maps;

#[inline(always)]
fn arg(ctx: &TracePointContext, idx: usize) -> u64 {
    unsafe { ctx.read_at::<u64>(maps::offset(idx)) }.unwrap_or(0)
}

#[inline(always)]
fn ret(ctx: &TracePointContext) -> i64 {
    unsafe { ctx.read_at::<i64>(maps::offset(off::SYS_EXIT_RET)) }.unwrap_or(0)
}

pub fn madvise_enter(ctx: &TracePointContext) {
    madvise_begin(arg(ctx, off::MADVISE_LEN), arg(ctx, off::MADVISE_BEHAVIOR));
}

fn madvise_begin(len: u64, behavior: u64) {
    if !maps::in_scope() {
        return;
    }
    maps::begin(kind::MADVISE, behavior, len);
}

pub fn madvise_exit(ctx: &TracePointContext) {
    madvise_end(ret(ctx));
}

fn madvise_end(ret: i64) {
    let Some((rec, ns)) = maps::end(kind::MADVISE) else {
        return;
    };
    let slot = madvise::slot(rec.arg0);
    maps::count(counter::MADVISE_CALLS_BASE + slot);
    if ret < 0 {
        maps::count(counter::MADVISE_ERRORS_BASE + slot);
    }
    let bytes = if ret < 0 { 0 } else { rec.arg1 };
    maps::add(counter::MADVISE_BYTES_BASE + slot, bytes);
    maps::observe(hist::MADVISE_BASE + slot, ns);
    count_proc(rec.arg0, bytes);
}

pub fn process_madvise_enter(ctx: &TracePointContext) {
    process_madvise_begin(arg(ctx, off::PROCESS_MADVISE_BEHAVIOR));
}

fn process_madvise_begin(behavior: u64) {
    if !maps::in_scope() {
        return;
    }
    maps::begin(kind::PROCESS_MADVISE, behavior, 0);
}

pub fn process_madvise_exit(ctx: &TracePointContext) {
    process_madvise_end(ret(ctx));
}

fn process_madvise_end(ret: i64) {
    let Some((rec, ns)) = maps::end(kind::PROCESS_MADVISE) else {
        return;
    };
    if ret < 0 {
        maps::count(counter::PROCESS_MADVISE_ERRORS);
    }
    maps::observe(hist::PROCESS_MADVISE, ns);
    count_proc(rec.arg0, 0);
}

/// One madvise or process_madvise call of `behavior` by the current
/// process, covering `bytes`: its total, its behaviour group and its bytes.
fn count_proc(behavior: u64, bytes: u64) {
    if let Some(p) = maps::current_proc() {
        maps::atomic_inc(unsafe { &raw mut (*p).madvise_calls });
        maps::atomic_add(unsafe { &raw mut (*p).madvise_bytes }, bytes);
        let g = madvise::group(behavior);
        if g < madvise::GROUPS {
            maps::atomic_inc(unsafe { &raw mut (*p).madvise[g] });
        }
    }
}

pub fn timed_enter(k: u64) {
    if maps::in_scope() {
        maps::begin(k, 0, 0);
    }
}

pub fn timed_exit(k: u64, histogram: u32) {
    if let Some((_, ns)) = maps::end(k) {
        maps::observe(histogram, ns);
    }
}

// The same calls through the raw `sys_enter(struct pt_regs *regs, long id)`
// and `sys_exit(struct pt_regs *regs, long ret)` BTF tracepoints, where the
// syscall events cannot be used (tracefs unreadable). They run on every
// syscall, so anything not followed returns at once. x86-64 only: its
// syscall numbers and its `struct pt_regs` (a user-space ABI) below.

/// Byte offsets in x86-64's `struct pt_regs`.
mod regs {
    pub const R10: usize = 7 * 8;
    pub const DX: usize = 12 * 8;
    pub const SI: usize = 13 * 8;
    pub const ORIG_AX: usize = 15 * 8;
}

#[inline(always)]
fn reg(regs: u64, at: usize) -> u64 {
    unsafe { bpf_probe_read_kernel((regs as usize + at) as *const u64) }.unwrap_or(0)
}

/// The `raw_syscall` bit of syscall `id`, when the loader asked for it.
#[inline(always)]
fn followed(id: u64) -> u32 {
    let bit = match id {
        syscall::MADVISE => raw_syscall::MADVISE,
        syscall::PROCESS_MADVISE => raw_syscall::PROCESS_MADVISE,
        syscall::MUNMAP => raw_syscall::MUNMAP,
        syscall::MPROTECT => raw_syscall::MPROTECT,
        _ => return 0,
    };
    bit & maps::offset(off::RAW_SYSCALLS) as u32
}

pub fn raw_enter(regs: u64, id: i64) {
    match followed(id as u64) {
        0 => {}
        raw_syscall::MADVISE => madvise_begin(reg(regs, regs::SI), reg(regs, regs::DX)),
        raw_syscall::PROCESS_MADVISE => process_madvise_begin(reg(regs, regs::R10)),
        raw_syscall::MUNMAP => timed_enter(kind::MUNMAP),
        raw_syscall::MPROTECT => timed_enter(kind::MPROTECT),
        _ => {}
    }
}

pub fn raw_exit(regs: u64, ret: i64) {
    if maps::offset(off::RAW_SYSCALLS) == 0 {
        return;
    }
    match followed(reg(regs, regs::ORIG_AX)) {
        0 => {}
        raw_syscall::MADVISE => madvise_end(ret),
        raw_syscall::PROCESS_MADVISE => process_madvise_end(ret),
        raw_syscall::MUNMAP => timed_exit(kind::MUNMAP, hist::MUNMAP),
        raw_syscall::MPROTECT => timed_exit(kind::MPROTECT, hist::MPROTECT),
        _ => {}
    }
}
