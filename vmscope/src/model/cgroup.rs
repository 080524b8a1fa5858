//! Per-cgroup figures: the cgroup's own books as its memory files give
//! them ([`CgroupBooks`], read by the source), and vmscope's own counts for
//! it, folded from per-process deltas ([`Snapshot::apply`] charges each
//! interval's growth of a process to the cgroup it was in at the read).
//!
//! [`Snapshot::apply`]: crate::model::snapshot::Snapshot::apply

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{model::process::ProcSample, procstat::Psi};

/// How processes' cgroups were identified.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CgroupScheme {
    /// `v1-memory` (the memory controller's cgroup on a v1 hierarchy) or
    /// `v2` (the cgroup on the unified hierarchy).
    pub hierarchy: String,
    /// Where that hierarchy is mounted; cgroup paths are relative to it.
    pub mount: String,
}

/// A cgroup's memory files at one instant: v2's `memory.current`,
/// `memory.max`, `memory.events`, `memory.events.local`, `memory.stat` and
/// `memory.pressure`; v1's `memory.usage_in_bytes`, `memory.limit_in_bytes`,
/// `memory.failcnt`, `memory.oom_control` and `memory.stat`. A file the
/// kernel lacks leaves its field null (never 0).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CgroupBooks {
    pub usage_bytes: Option<u64>,
    /// Null when unlimited (`max`, or v1's page-counter maximum).
    pub limit_bytes: Option<u64>,
    /// v2: `memory.events` (hierarchical: low, high, max, oom, oom_kill
    /// ...); v1: `failcnt`, and `oom_kill` and `under_oom` from
    /// `memory.oom_control`.
    #[serde(default)]
    pub events: BTreeMap<String, u64>,
    /// v2: `memory.events.local` (this cgroup only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub events_local: BTreeMap<String, u64>,
    /// `memory.stat` (v1's hierarchical `total_*` duplicates left out).
    #[serde(default)]
    pub stat: BTreeMap<String, u64>,
    /// v2 `memory.pressure`; null on v1 and where PSI is off.
    pub psi: Option<Psi>,
}

/// A memory cgroup's page-cache pages removed since vmscope attached
/// (`filemap:mm_filemap_delete_from_page_cache`), counted against the
/// cgroup the pages were charged to, whichever task removed them.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct CacheRemovals {
    /// By reclaim (kswapd, direct and cgroup-limit reclaim, MADV_PAGEOUT,
    /// the inode shrinker): evictions.
    pub evicted_pages: u64,
    /// Otherwise: truncation, deletion, invalidation.
    pub dropped_pages: u64,
}

/// One cgroup as a sample reports it: those whose processes changed in the
/// interval, with their books.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CgroupSample {
    /// The kernel's id for it (its directory's inode number).
    pub id: u64,
    /// Its path below the hierarchy's mount (`/` for the root); a cgroup
    /// removed during the run keeps its last path; null when never found.
    pub path: Option<String>,
    /// Null when its files could not be read (e.g. removed).
    pub books: Option<CgroupBooks>,
    /// The name of the container the cgroup is, from its runtime's state on
    /// the host; absent where the path names no container or the runtime
    /// keeps no name there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
    /// Its page-cache removals so far; absent where the hook is
    /// unavailable (the probe list says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache_removed: Option<CacheRemovals>,
}

/// One cgroup, cumulative, in a [`Snapshot`](crate::model::snapshot::Snapshot).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CgroupState {
    pub path: Option<String>,
    /// The container's name, as the last sample that had one said.
    pub container_name: Option<String>,
    pub books: Option<CgroupBooks>,
    /// Its page-cache removals, as the last sample that had them said.
    pub page_cache_removed: Option<CacheRemovals>,
    /// vmscope's counts for it: the growth of its processes' counters while
    /// they were in it (`pid` 0, `comm` empty).
    pub counts: ProcSample,
    /// Its processes alive now.
    pub live: u32,
    /// When the sample that said it was removed was taken (its
    /// `elapsed_ns`).
    pub gone_ns: Option<u64>,
}

impl CgroupState {
    /// Its name for display: the path, or the id when never resolved.
    pub fn name(&self, id: u64) -> String {
        self.path.clone().unwrap_or_else(|| format!("cgroup#{id}"))
    }

    /// The workload its path names, with the container's name.
    pub fn identity(&self) -> Option<crate::model::identity::Identity> {
        crate::model::identity::Identity::from_path(self.path.as_deref()?)
            .map(|w| w.named(self.container_name.as_deref()))
    }
}

/// The per-cgroup figures of a whole recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CgroupTotal {
    pub id: u64,
    pub path: Option<String>,
    /// vmscope's counts, as a process total (`pid` 0; `comm` the path).
    pub totals: crate::model::process::ProcessTotal,
    /// Its books at the first and last sample that listed it.
    pub books_first: Option<CgroupBooks>,
    pub books_last: Option<CgroupBooks>,
    /// Its page-cache pages removed over the run (vmscope attaches at its
    /// start); absent where the hook is unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache_removed: Option<CacheRemovals>,
    /// The unit, container and pod its path names (absent when it follows
    /// no known layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<crate::model::identity::Identity>,
}
