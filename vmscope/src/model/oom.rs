//! OOM kills one by one: each victim the kernel marked (`oom:mark_victim`),
//! with what its record said. Pure types.

use serde::{Deserialize, Serialize};

/// One OOM victim, as the kernel's `oom:mark_victim` record described it
/// when the OOM killer picked it. A field this kernel's record lacks
/// (older kernels, 6.1 for one, report only the pid) is null, never 0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OomKill {
    /// When the victim was marked, since the recording started.
    pub elapsed_ns: u64,
    /// The same instant, RFC 3339.
    pub timestamp: String,
    /// The victim task's pid (the kernel's `task->pid`).
    pub pid: Option<u32>,
    /// The victim's task name (at most 15 bytes).
    pub comm: Option<String>,
    /// The uid it ran as.
    pub uid: Option<u32>,
    /// Its address space's size (the kernel reports kB).
    pub total_vm_bytes: Option<u64>,
    /// Its resident anonymous memory.
    pub rss_anon_bytes: Option<u64>,
    /// Its resident file-backed pages.
    pub rss_file_bytes: Option<u64>,
    /// Its resident shared memory (shmem, tmpfs).
    pub rss_shmem_bytes: Option<u64>,
    /// Its page tables.
    pub pgtables_bytes: Option<u64>,
    /// Its `oom_score_adj` (-1000..1000).
    pub oom_score_adj: Option<i32>,
    /// The victim's cgroup (v1: its memory cgroup; v2: its cgroup), as
    /// the kernel side keyed its process (kept 10 s after its entry is
    /// deleted); failing that, from `/proc/PID/cgroup` if the victim
    /// still lingered, not yet exiting on v1 (an exiting task reads `/`
    /// there), when the record was read; failing that, the kernel log's
    /// `task_memcg` (the memory cgroup). Null when none knew it.
    pub cgroup: Option<String>,
    /// The unit, container and pod `cgroup`'s path names (absent when it
    /// follows no known layout, or is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<crate::model::identity::Identity>,
    /// The cgroup of the task whose allocation invoked the OOM killer: in
    /// a memcg OOM, one inside the memcg that hit its limit. Null when
    /// unknown.
    #[serde(default)]
    pub trigger_cgroup: Option<String>,
    /// `memcg` when a memory cgroup's limit was hit, `global` when the
    /// system ran out, `cpuset` or `mempolicy` when the allowed nodes did
    /// (those two from the kernel log only); null when it could not be
    /// told. See `limit_source`.
    #[serde(default)]
    pub constraint: Option<String>,
    /// For a memcg OOM, the cgroup whose limit was hit: `trigger_cgroup`
    /// or one of its ancestors.
    #[serde(default)]
    pub limit_cgroup: Option<String>,
    /// Where `constraint` and `limit_cgroup` come from:
    /// - `kernel_log`: the OOM killer's own summary line in the kernel log
    ///   (`oom-kill:constraint=...,oom_memcg=PATH`), exact;
    /// - `limit_counters`: the cgroups' limit-hit counters on the path from
    ///   `trigger_cgroup` to the root, the nearest that grew (v2:
    ///   `memory.events.local` `oom`, exact; v1: `memory.failcnt`, which
    ///   also grows when reclaim made room, so a memcg that was at its own
    ///   limit just before an ancestor's limit was hit is named instead).
    ///   The constraint is still the kernel log's when its kill line was
    ///   read. `limit_note` says why the summary was not used.
    ///
    /// Null when neither told.
    #[serde(default)]
    pub limit_source: Option<String>,
    /// Why the limit was not taken from the kernel log's summary line: the
    /// log unreadable (and why), or no summary printed for this kill (the
    /// kernel rate-limits it to 10 per 5 s). When it was, null, unless its
    /// path lies outside vmscope's view of the hierarchy (the root of a
    /// cgroup namespace vmscope runs in, or above it), which it says.
    #[serde(default)]
    pub limit_note: Option<String>,
}

impl OomKill {
    /// Resident memory: anonymous + file + shared memory, where known.
    pub fn rss_bytes(&self) -> Option<u64> {
        let parts = [
            self.rss_anon_bytes,
            self.rss_file_bytes,
            self.rss_shmem_bytes,
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    }
}

/// The memory cgroup in the text of a `/proc/PID/cgroup` file: the v1
/// line whose controllers include `memory`, else the v2 `0::` line.
pub fn memory_cgroup(text: &str) -> Option<String> {
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == "memory") {
            return Some(path.to_string());
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_string());
        }
    }
    v2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_controllers_line_wins_over_the_unified_one() {
        let v1 = "12:pids:/a\n5:cpu,memory:/vmscope-test\n0::/user.slice\n";
        assert_eq!(memory_cgroup(v1).as_deref(), Some("/vmscope-test"));
        assert_eq!(memory_cgroup("0::/sys/app\n").as_deref(), Some("/sys/app"));
        assert_eq!(memory_cgroup("3:cpu:/x\n"), None);
        assert_eq!(memory_cgroup(""), None);
    }

    #[test]
    fn rss_sums_what_is_known_and_is_null_when_nothing_is() {
        let k = OomKill {
            rss_anon_bytes: Some(3),
            rss_file_bytes: Some(4),
            ..Default::default()
        };
        assert_eq!(k.rss_bytes(), Some(7));
        assert_eq!(OomKill::default().rss_bytes(), None);
    }
}
