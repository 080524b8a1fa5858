//! What the sampling thread gives up once its probes are attached (asked
//! for by `serve`). The thread still:
//! - reads the maps through descriptors it holds, which carry the access
//!   (kernels before 6.5 ask CAP_BPF of every bpf(2) call while
//!   `kernel.unprivileged_bpf_disabled` is set: tried here, not assumed);
//! - reads /proc/vmstat, /proc/pressure/memory, /proc/swaps and
//!   /proc/PID/comm, which anyone may;
//! - detaches at exit by closing descriptors (see `teardown`);
//! - attaches the deferred swap probe when a swap device appears, which
//!   needs CAP_BPF+CAP_PERFMON (the BPF tracepoint link; a classic
//!   tracepoint's system-wide perf event): those two stay while it waits.
//!
//! Capabilities belong to a thread: this changes the sampling thread's
//! only. The threads that serve requests give up theirs on their own.

use ::caps::{
    Capability::{self, CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN},
    CapsHashSet,
};

use crate::source::{kernel::privdrop, loader::Loaded};

/// What the sampling thread gave up, and why it kept the rest.
#[derive(Clone, Debug, Default)]
pub struct Shed {
    /// Permitted before and after.
    pub before: CapsHashSet,
    pub after: CapsHashSet,
    /// Kept while the swap probe waits for a swap device.
    pub for_swap: bool,
    /// Kept because this kernel refuses map reads without it.
    pub for_reads: Option<Capability>,
    /// Whether CAP_BPF+CAP_PERFMON are still held for the swap probe, to
    /// be given up once it no longer waits.
    pub held_for_swap: bool,
    /// Nothing was given up, for this reason.
    pub kept: Option<String>,
}

impl Shed {
    pub fn kept(why: String) -> Shed {
        Shed {
            kept: Some(why),
            ..Shed::default()
        }
    }
}

/// Gives up, for good, every capability of the calling thread that reading
/// `probes` and attaching what still waits do not need.
pub fn shed(probes: &Loaded) -> Shed {
    crate::source::rmap::kallsyms::Symbols::prefetched();
    let before = match privdrop::Held::current() {
        Ok(h) => h,
        Err(e) => return Shed::kept(format!("kept as they are: {e}")),
    };
    let pending = swap_pending(probes);
    let mut keep = Vec::new();
    if pending {
        keep.extend([CAP_BPF, CAP_PERFMON]);
    }
    let reads = |keep: &[Capability]| {
        privdrop::trial(keep, || probes.counters.get(&0, 0).is_ok()).unwrap_or(false)
    };
    let mut for_reads = None;
    if !reads(&keep) {
        // CAP_BPF, or CAP_SYS_ADMIN where it stands in (kernels before 5.8).
        let more = [CAP_BPF, CAP_SYS_ADMIN]
            .into_iter()
            .find(|c| before.permitted.contains(c) && reads(&[keep.as_slice(), &[*c]].concat()));
        match more {
            Some(c) => {
                if !keep.contains(&c) {
                    keep.push(c);
                }
                for_reads = Some(c);
            }
            None => {
                return Shed::kept(format!(
                    "kept as they are ({}): reading the maps fails with fewer",
                    privdrop::names(&before.permitted)
                ));
            }
        }
    }
    if let Err(e) = privdrop::keep_only(&keep) {
        return Shed::kept(format!("dropping them failed: {e}"));
    }
    let after = privdrop::Held::current().unwrap_or_default().permitted;
    Shed {
        held_for_swap: pending && after.contains(&CAP_BPF),
        before: before.permitted,
        after,
        for_swap: pending,
        for_reads,
        kept: None,
    }
}

/// Whether a probe waits to attach later (the swap probe, until a swap
/// device is active).
pub fn swap_pending(probes: &Loaded) -> bool {
    probes.probes.iter().any(|p| p.deferred)
}
