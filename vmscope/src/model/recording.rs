//! The recording document: what `record` writes and `report`, `bench` and
//! `compare` read. Pure types.

use serde::{Deserialize, Serialize};

use crate::{
    child::ChildReport,
    model::{
        FaultTotals, Lost, ProcessTotal,
        probes::{FaultSource, ProbeStatus},
        sample::Sample,
    },
};

/// Bumped on any incompatible change to [`Recording`].
pub const SCHEMA_VERSION: u32 = 1;

/// How many processes `processes` lists (largest fault count first).
pub const TOP_PROCESSES: usize = 50;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

impl Tool {
    pub fn this() -> Self {
        Self {
            name: "vmscope".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// Every process.
    System,
    /// The given pids and their descendants.
    Pids,
    /// The wrapped command's process tree.
    Command,
    /// The processes in a cgroup subtree (`cgroup`), and their children.
    Cgroup,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Scope")]
pub struct RecordingScope {
    pub kind: ScopeKind,
    /// The pids followed at the start (their children are followed too).
    pub pids: Vec<u32>,
    /// For a `cgroup` scope: the cgroup's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Totals {
    /// System-wide, whatever the scope.
    pub system_faults: FaultTotals,
    /// The scope's processes (all of them for a system-wide recording).
    pub scope_faults: FaultTotals,
    /// Everything else: eBPF counters, madvise, histograms, vmstat, PSI.
    #[serde(flatten)]
    pub vm: crate::model::totals::VmTotals,
}

/// One recording. Raw cumulative `samples` are kept next to the summaries so
/// later tools can recompute with current code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Recording {
    /// What was known at the start (also the first line of a jsonl stream).
    /// Its `probes` are as they stood at the end.
    #[serde(flatten)]
    pub header: Header,
    pub end_time: String,
    pub duration_ns: u64,
    /// Set when the recording ended on a signal (e.g. "SIGINT").
    pub interrupted_by: Option<String>,
    /// Set when vmscope itself failed mid-run (a write error such as ENOSPC,
    /// a failed read of the maps): the reason. The command was stopped
    /// (SIGTERM, then SIGKILL after a grace period) and the recording ends
    /// there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    pub child: Option<ChildReport>,
    pub totals: Totals,
    /// At most `processes_limit` rows.
    pub processes: Vec<ProcessTotal>,
    pub processes_limit: usize,
    pub lost: Lost,
    /// Each OOM kill while recording, system-wide, oldest first: the
    /// victim as the kernel's `oom:mark_victim` record described it.
    /// Empty when there was none, and when the probe could not report
    /// details (the probe's `reason` says why; `totals.counters.oom_kills`
    /// still counts them).
    #[serde(default)]
    pub oom_kills: Vec<crate::model::oom::OomKill>,
    /// Each cgroup the scope's processes were in, most faults first (at
    /// most `processes_limit`): vmscope's counts for it, folded from its
    /// processes' growth while they were in it, and its own books.
    #[serde(default)]
    pub cgroups: Vec<crate::model::cgroup::CgroupTotal>,
    /// What happened in each interval, derived from `samples`.
    #[serde(default)]
    pub series: crate::model::series::IntervalSeries,
    /// The working set over the run (absent unless `--working-set`); each
    /// window is in the samples' `working_set`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set: Option<crate::model::wss::WssTotals>,
    /// Swap by tier over the run, system-wide: zswap stores and loads,
    /// device writes and reads, zswap's write-back, and the pool and
    /// devices at the end. Absent in older recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_tiers: Option<crate::model::tiers::SwapTiers>,
    /// THP faults, fallbacks, swap-outs and splits by huge-page size over
    /// the run, system-wide (6.9+; `unavailable` says why not). Absent in
    /// older recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thp_sizes: Option<crate::model::hugepages::ThpSizeTotals>,
    /// Page-cache residency of each `--cachestat` file at the start and the
    /// end (absent without the option).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cachestat: Vec<crate::model::cachestat::CachestatFile>,
    /// The page cache over the run: pages read, pages added and the read
    /// hit ratio for the scope, per memory cgroup (with its refaults, dirty
    /// and write-back pages) and for the processes that read most. Absent
    /// in older recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache: Option<crate::model::pagecache::PageCache>,
    pub samples: Vec<Sample>,
}

/// The fields of a recording known when it starts: the first line of a
/// `--format jsonl` stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Header {
    pub schema_version: u32,
    pub tool: Tool,
    pub kernel: KernelInfo,
    /// vmscope's own command line.
    pub command_line: Vec<String>,
    /// The wrapped command, if any.
    pub command: Option<Vec<String>>,
    pub scope: RecordingScope,
    pub interval_ns: u64,
    pub start_time: String,
    pub probes: Vec<ProbeStatus>,
    pub fault_source: FaultSource,
    /// Names of the per-class slots in `samples[].faults.user/kernel`.
    pub fault_classes: Vec<String>,
    /// How processes were keyed by cgroup (`samples[].procs[].cgroup`,
    /// `samples[].cgroups`); null without cgroup attribution (the
    /// `cgroup attribution` probe says why).
    #[serde(default)]
    pub cgroup_scheme: Option<crate::model::cgroup::CgroupScheme>,
    /// How the working set was measured (absent unless `--working-set`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set: Option<crate::model::wss::WssSetup>,
}

/// One line of a `--format jsonl` stream: a header, then one sample per
/// interval, then the whole recording without its samples (they are the
/// lines above it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Header(Box<Header>),
    Sample(Box<Sample>),
    Recording(Box<Recording>),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KernelInfo {
    pub release: String,
    pub version: String,
    pub machine: String,
    pub hostname: String,
}
