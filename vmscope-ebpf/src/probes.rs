//! Empty programs of each attach kind. `vmscope doctor` loads and attaches
//! them to learn what this kernel really permits, rather than trusting config.

use aya_ebpf::{
    macros::{btf_tracepoint, fentry, fexit, kprobe, perf_event, tracepoint},
    programs::{
        BtfTracePointContext, FEntryContext, FExitContext, PerfEventContext, ProbeContext,
        TracePointContext,
    },
};

#[tracepoint]
pub fn probe_tracepoint(_ctx: TracePointContext) -> u32 {
    0
}

#[btf_tracepoint(function = "sched_process_exit")]
pub fn probe_tp_btf(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[fentry(function = "vfs_read")]
pub fn probe_fentry(_ctx: FEntryContext) -> u32 {
    0
}

#[fexit(function = "vfs_read")]
pub fn probe_fexit(_ctx: FExitContext) -> u32 {
    0
}

#[kprobe]
pub fn probe_kprobe(_ctx: ProbeContext) -> u32 {
    0
}

#[perf_event]
pub fn probe_perf_event(_ctx: PerfEventContext) -> u32 {
    0
}
