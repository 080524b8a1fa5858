//! The samples the kernel-facing source produces and every view reads:
//! raw cumulative counters, changed processes only. Pure types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::model::process::FaultCounters;
use crate::model::process::ProcSample;
use crate::{
    model::hist::HistSample,
    procstat::{Psi, Vmstat},
};

/// Counters summed from the per-mm swap map (scope-filtered when scoped),
/// named like the eBPF counters so totals treat them alike.
pub const MM_SWAP_OUT: &str = "swap_out_pages";
pub const MM_SWAP_IN: &str = "swap_in_pages";
pub const MM_SWAP_FREED: &str = "swap_freed_pages";
/// Swap entries copied into children at fork (no I/O, not swap-out).
pub const MM_SWAP_COPIED: &str = "swap_copied_pages";
pub const MM_SWAP_OUT_UNOWNED: &str = "swap_out_unowned_pages";

/// Cumulative madvise counts for one behaviour.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MadviseCounts {
    pub behavior: String,
    pub calls: u64,
    pub bytes: u64,
    pub errors: u64,
}

/// Raw cumulative state at one instant. `procs` holds only the processes
/// whose counters changed since the previous sample (an absent process kept
/// its last value), which keeps long recordings small.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    /// Monotonic time since the recording started.
    pub elapsed_ns: u64,
    pub timestamp: String,
    /// System-wide counters.
    pub faults: FaultCounters,
    pub procs: Vec<ProcSample>,
    /// Live entries in the per-process map.
    pub proc_entries: u64,
    /// Entries ever created in it; `proc_inserts - proc_entries` were evicted.
    pub proc_inserts: u64,
    /// Children not followed because the followed set was full.
    pub tracked_full: u64,
    /// Entries in the followed set (tasks added, less those that exited);
    /// 0 when not following a tree.
    #[serde(default)]
    pub tracked_entries: u64,
    /// Live entries in the per-mm swap map, and entries ever created.
    #[serde(default)]
    pub mm_entries: u64,
    #[serde(default)]
    pub mm_inserts: u64,
    /// Named counters (`catalogue::COUNTERS`), system-wide.
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
    /// madvise per behaviour (scope-filtered), non-zero ones only.
    #[serde(default)]
    pub madvise: Vec<MadviseCounts>,
    /// Histograms that changed since the previous sample.
    #[serde(default)]
    pub hists: Vec<HistSample>,
    #[serde(default)]
    pub vmstat: Vmstat,
    /// Null when PSI is unavailable (the reason is in the recording).
    #[serde(default)]
    pub psi: Option<Psi>,
    /// All CPUs' busy and total time (`/proc/stat`), to weigh stall time
    /// the way PSI does; absent when unreadable (and in older recordings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<crate::procstat::CpuTimes>,
    /// The memory stalls vmscope times (`stall::MEMORY_STALLS`), summed per
    /// CPU they ended on, cumulative ns by CPU number: with `cpu`, they are
    /// weighed per CPU as PSI weighs stall time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stall_ns_by_cpu: Vec<u64>,
    /// Kernel-stack sampling (rmap and other CPU costs); absent when the
    /// sampler is not attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmap: Option<crate::model::rmap::RmapSample>,
    /// Processes that had ended by the previous sample: their values up to
    /// there are final. Readers forget them before applying `procs`, where
    /// one of these pids is a new process under a reused pid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exited: Vec<u32>,
    /// Cgroups removed by this sample, among those earlier samples listed
    /// (`cgroups`, or a process's `cgroup`): a reader may forget one once
    /// none of its processes is alive.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroups_gone: Vec<u64>,
    /// Per-process entries deleted after their process exited, ever
    /// (`proc_inserts - proc_entries - proc_pruned` were evicted).
    #[serde(default)]
    pub proc_pruned: u64,
    /// Per-mm swap entries deleted after their owner exited, ever.
    #[serde(default)]
    pub mm_pruned: u64,
    /// The OOM victims marked since the previous sample, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oom_kills: Vec<crate::model::oom::OomKill>,
    /// The cgroups of the processes in `procs`, with their books (absent
    /// when cgroup attribution is unavailable; see `unavailable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroups: Vec<crate::model::cgroup::CgroupSample>,
    /// The working-set windows that finished since the previous sample
    /// (absent unless `--working-set`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub working_set: Vec<crate::model::wss::WssSample>,
    /// The swap tiers (zswap pool, swap devices, zram books), when they
    /// changed since the previous sample; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_tiers: Option<crate::model::tiers::TierSample>,
    /// THP counts by size (6.9+), when they changed since the previous
    /// sample; absent otherwise and on kernels without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thp_sizes: Option<crate::model::hugepages::ThpSizes>,
    /// OOM victims' records lost so far (their ring buffer was full).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub oom_kill_records_lost: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the rmap totals read of a sample.
impl<'a> From<&'a Sample> for crate::model::rmap::RmapReading<'a> {
    fn from(s: &'a Sample) -> Self {
        Self {
            elapsed_ns: s.elapsed_ns,
            exited: &s.exited,
            rmap: s.rmap.as_ref(),
        }
    }
}
