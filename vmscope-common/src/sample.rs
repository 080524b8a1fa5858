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
    /// The last slot is the calibration's: loaded on a function of known,
    /// tiny cost (`getppid`'s syscall function) to learn what timing one
    /// call adds.
    pub const CALIBRATION_SLOT: u32 = SLOTS - 1;
    /// Fields of `RMAP_STATS`, each `SLOTS` wide: `field * SLOTS + slot`.
    /// Every call, nested ones included.
    pub const CALLS: u32 = 0;
    /// Outermost calls that returned: the timed ones.
    pub const OUTER: u32 = 1;
    /// Nanoseconds in this slot's outermost calls.
    pub const NS: u32 = 2;
    /// Calls of any timed function made inside this slot's outermost calls
    /// (their time is in `NS`, with their instrumentation's).
    pub const NESTED: u32 = 3;
    /// Nanoseconds this slot's outermost calls spent off CPU (switched out
    /// mid-walk: a lock wait, preemption), already taken out of `NS`.
    pub const OFF_CPU: u32 = 4;
    pub const FIELDS: u32 = 5;
    /// `INFLIGHT` kind (low byte of the key) of a thread's outermost timed
    /// call: its start, the nesting depth (`arg0`) and its slot (`arg1`).
    pub const KIND_OUTER: u64 = 63;
    /// An outermost call older than this when another begins on the same
    /// thread was left open (its fexit missed, at attach or detach): it is
    /// replaced, not nested into.
    pub const STALE_NS: u64 = 10_000_000_000;
}
