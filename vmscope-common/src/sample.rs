//! Kernel-stack sampling on the cpu-clock perf event: what the eBPF program
//! and the collector share. Each sample is counted in the kernel under its
//! (tgid, kernel stack id); nothing is sent to user space per sample.

/// Capacity of the stack-trace map. Each entry holds up to 127 frames
/// (1 KiB), so this costs about 16 MiB of kernel memory while sampling.
/// A stack whose hash bucket is taken by another stack is not stored; its
/// sample is counted in `stat::LOST_STACK`, never dropped silently.
pub const MAX_STACKS: u32 = 16384;

/// Capacity of the count map, keyed by (tgid, stack id).
pub const MAX_KEYS: u32 = 32768;

/// `SampleKey::stack_id` of a sample taken while the CPU ran user code
/// (there are no kernel frames to record).
pub const USER_STACK: i32 = -1;

/// Key of the per-(process, kernel stack) sample count.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SampleKey {
    pub tgid: u32,
    /// An id in the stack-trace map, or `USER_STACK`.
    pub stack_id: i32,
}

const _: () = assert!(core::mem::size_of::<SampleKey>() == 8);

/// Slots of the per-CPU sampling statistics array.
pub mod stat {
    /// Every time the program ran (one per sample).
    pub const SAMPLES: u32 = 0;
    /// Samples whose kernel stack could not be stored (stack map full, hash
    /// collision with another stack, or another `bpf_get_stackid` error).
    pub const LOST_STACK: u32 = 1;
    /// Samples whose (tgid, stack) key did not fit in the count map.
    pub const LOST_KEY: u32 = 2;
    pub const COUNT: u32 = 3;
}

/// Direct timing of rmap functions (fentry/fexit), where the kernel allows
/// it: one program slot per function.
pub mod timing {
    /// Program slots (`rmap_fentry_N`/`rmap_fexit_N`).
    pub const SLOTS: u32 = 24;
    /// Slot of `RMAP_NS` holding the time in outermost rmap walks (a walk
    /// called inside another is not counted twice).
    pub const OUTER_NS: u32 = SLOTS;
    /// `INFLIGHT` kinds (low byte of the key): 64 + slot for a call's start,
    /// 63 for the outermost walk's start and the nesting depth.
    pub const KIND_BASE: u64 = 64;
    pub const KIND_OUTER: u64 = 63;
}
