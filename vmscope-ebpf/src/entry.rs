//! Entry points for the faults and process-tree hooks.

use aya_ebpf::{
    macros::{perf_event, tracepoint},
    programs::{PerfEventContext, TracePointContext},
};

#[tracepoint]
pub fn page_fault_user(ctx: TracePointContext) -> u32 {
    crate::faults::on_tracepoint(&ctx, crate::faults::Mode::User);
    0
}

#[tracepoint]
pub fn page_fault_kernel(ctx: TracePointContext) -> u32 {
    crate::faults::on_tracepoint(&ctx, crate::faults::Mode::Kernel);
    0
}

/// Fallback for kernels without `exceptions:page_fault_*`: the software
/// page-faults perf event, sampled with period 1 (counts, no error code).
#[perf_event]
pub fn page_fault_perf(_ctx: PerfEventContext) -> u32 {
    crate::faults::on_perf_fault();
    0
}

#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    crate::filter::on_fork(&ctx);
    0
}

#[tracepoint]
pub fn sched_process_exec(_ctx: TracePointContext) -> u32 {
    crate::faults::on_exec();
    0
}
