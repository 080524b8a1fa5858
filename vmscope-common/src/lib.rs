//! Types shared by vmscope's eBPF programs and its user-space collector.
//!
//! Everything here is `#[repr(C)]`, padding-free and `Copy`, so the two sides
//! agree on layout byte for byte; the size assertions below pin that down.
#![no_std]

pub mod fault;

pub use fault::{FAULT_CLASSES, fault_class, fault_class_name};

/// Capacity of the per-process statistics map (LRU: the least recently
/// updated process is evicted when full; evictions are counted by user space
/// as `inserts - live entries`).
pub const MAX_PROCS: u32 = 10240;

/// Capacity of the set of followed tgids (the wrapped command's tree, or `-p`).
pub const MAX_TRACKED: u32 = 65536;

/// Indices into the per-CPU `COUNTERS` array: system-wide counters.
pub mod counter {
    /// User-mode page faults, by class: `USER_FAULT_BASE + fault_class(err)`.
    pub const USER_FAULT_BASE: u32 = 0;
    /// Kernel-mode page faults (on any address), by class.
    pub const KERNEL_FAULT_BASE: u32 = 6;
    /// Faults counted by the perf software-event fallback (no error code).
    pub const FAULT_UNCLASSIFIED: u32 = 12;
    /// New entries created in the per-process map (for eviction accounting).
    pub const PROC_INSERTS: u32 = 13;
    /// Children that could not be followed because the tracked set was full.
    pub const TRACKED_FULL: u32 = 14;
    /// Number of slots in the array.
    pub const COUNT: u32 = 64;
}

/// Per-process cumulative statistics, keyed by tgid in an LRU hash map.
/// Updated with atomic adds on the eBPF side.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStats {
    /// User-mode faults by class.
    pub user_faults: [u64; FAULT_CLASSES],
    /// Kernel-mode faults by class.
    pub kernel_faults: [u64; FAULT_CLASSES],
    /// Faults seen through the perf fallback (class unknown).
    pub unclassified_faults: u64,
    /// The task name (`comm`) of the thread that last created this entry.
    pub comm: [u8; 16],
}

const _: () = assert!(core::mem::size_of::<ProcStats>() == 8 * (2 * FAULT_CLASSES + 1) + 16);

#[cfg(feature = "user")]
// SAFETY: `ProcStats` is `repr(C)`, `Copy`, made only of integers and has no
// padding (asserted above), so any bit pattern is valid.
unsafe impl aya::Pod for ProcStats {}
