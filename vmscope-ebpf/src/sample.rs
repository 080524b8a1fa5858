//! Kernel-stack sampling on the cpu-clock perf event: each sample is counted
//! under (tgid, kernel stack id), in the kernel. User space reads the counts
//! and symbolizes each stack once; no per-sample traffic.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    macros::map,
    maps::{HashMap, PerCpuArray, StackTrace},
    programs::{PerfEventContext, tracing::StackIdContext as _},
};
use vmscope_common::sample::{SampleKey, USER_STACK, stat};

use crate::maps::{atomic_inc, current_tgid};

/// One entry here; the loader sizes it (`MAX_STACKS`) only when sampling,
/// so the other loads of this object (doctor, benchmarks) stay small.
#[map]
pub static SAMPLE_STACKS: StackTrace = StackTrace::with_max_entries(1, 0);

/// Sized by the loader like `SAMPLE_STACKS` (`MAX_KEYS`).
#[map]
pub static SAMPLE_COUNTS: HashMap<SampleKey, u64> = HashMap::with_max_entries(1, 0);

#[map]
pub static SAMPLE_STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(stat::COUNT, 0);

/// `bpf_get_stackid` returns -EFAULT when the interrupted context has no
/// kernel frames, i.e. the CPU was running user code.
const EFAULT: i32 = 14;

#[inline(always)]
fn stat(idx: u32) {
    if let Some(p) = SAMPLE_STATS.get_ptr_mut(idx) {
        // Per-CPU slot: a plain add is safe.
        unsafe { *p += 1 };
    }
}

#[inline(always)]
pub fn on_sample(ctx: &PerfEventContext) {
    stat(stat::SAMPLES);
    let stack_id = match ctx.get_stackid(&SAMPLE_STACKS, 0) {
        Ok(id) => id as i32,
        Err(e) if e == -EFAULT => USER_STACK,
        Err(_) => {
            stat(stat::LOST_STACK);
            return;
        }
    };
    let key = SampleKey {
        tgid: current_tgid(),
        stack_id,
    };
    if let Some(p) = SAMPLE_COUNTS.get_ptr_mut(key) {
        atomic_inc(p);
        return;
    }
    // BPF_NOEXIST: another CPU may have inserted the key meanwhile.
    if SAMPLE_COUNTS.insert(key, 1, u64::from(BPF_NOEXIST)).is_ok() {
        return;
    }
    match SAMPLE_COUNTS.get_ptr_mut(key) {
        Some(p) => atomic_inc(p),
        None => stat(stat::LOST_KEY),
    }
}
