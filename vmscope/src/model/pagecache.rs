//! The page cache over a recording: pages reads asked it for, pages added
//! to it and the read hit ratio derived from them, for the recorded scope,
//! per memory cgroup (with the pages evicted from it and otherwise
//! removed, and the kernel's own refaults, dirty and write-back pages from
//! `memory.stat`) and for the processes that read most. Pure: built from
//! the recording's totals.

use serde::{Deserialize, Serialize};

use crate::model::{
    catalogue::pagecache::read_hit_ratio, cgroup::CgroupTotal, probes::ProbeStatus, probes::names,
    process::ProcessTotal,
};

/// Processes listed by reads, at most.
const TOP_READERS: usize = 20;

/// Reads, additions and the hit ratio of one scope.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CacheReads {
    /// Pages reads asked the page cache for, each once per read call.
    pub read_pages: u64,
    /// Pages added to the page cache (misses, readahead, writes, faults).
    pub added_pages: u64,
    /// `1 - added / read` (0 to 1); null when nothing was read.
    pub read_hit_ratio: Option<f64>,
}

impl CacheReads {
    fn new(read: u64, added: u64) -> CacheReads {
        CacheReads {
            read_pages: read,
            added_pages: added,
            read_hit_ratio: read_hit_ratio(read as f64, added as f64),
        }
    }

    fn of(t: &ProcessTotal) -> Option<CacheReads> {
        Some(CacheReads::new(
            t.page_cache_read_pages?,
            t.page_cache_added_pages?,
        ))
    }
}

/// One memory cgroup's page cache over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CgroupCache {
    pub id: u64,
    pub path: Option<String>,
    /// vmscope's counts of the cgroup's processes; absent where reads
    /// cannot be counted (the `unavailable` reason).
    #[serde(flatten)]
    pub reads: Option<CacheReads>,
    /// Its pages reclaim removed from the page cache (kswapd, direct and
    /// cgroup-limit reclaim, MADV_PAGEOUT): counted against the cgroup the
    /// pages were charged to, whichever task evicted them; null where
    /// `filemap:mm_filemap_delete_from_page_cache` is unavailable.
    pub evicted_pages: Option<u64>,
    /// Its pages removed otherwise (truncation, deletion, invalidation);
    /// null likewise.
    pub dropped_pages: Option<u64>,
    /// File pages the cgroup read again after they were evicted, by the
    /// kernel's count (`memory.stat` `workingset_refault_file`) between the
    /// first and last books vmscope read; null when the kernel has none.
    pub refaults: Option<u64>,
    /// Its page cache, dirty and under write-back at the end, in bytes (v1
    /// `cache`, `dirty`, `writeback`; v2 `file`, `file_dirty`,
    /// `file_writeback`); null where `memory.stat` lacks them.
    pub cache_bytes: Option<u64>,
    pub dirty_bytes: Option<u64>,
    pub writeback_bytes: Option<u64>,
}

/// One process's page cache over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessCache {
    pub pid: u32,
    pub comm: String,
    #[serde(flatten)]
    pub reads: CacheReads,
}

/// The run's page cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PageCache {
    /// The recorded scope's; null when a probe was missing (`unavailable`).
    pub scope: Option<CacheReads>,
    /// Each cgroup vmscope saw a process of, by pages read.
    pub cgroups: Vec<CgroupCache>,
    /// The processes that read most, by pages read (at most 20).
    pub processes: Vec<ProcessCache>,
    /// Why reads cannot be counted on this kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl PageCache {
    /// One line for people, when anything was read.
    pub fn summary(&self) -> Option<String> {
        let s = self.scope.as_ref().filter(|s| s.read_pages > 0)?;
        let mut line = format!(
            "page cache: {} pages read, {} added, read hit ratio {}",
            s.read_pages,
            s.added_pages,
            percent(s.read_hit_ratio)
        );
        for c in self.cgroups.iter().take(3) {
            let Some(r) = c.reads.as_ref().filter(|r| r.read_pages > 0) else {
                continue;
            };
            line.push_str(&format!(
                "; {} {}",
                c.path.as_deref().unwrap_or("cgroup"),
                percent(r.read_hit_ratio)
            ));
            if let Some(e) = c.evicted_pages.filter(|e| *e > 0) {
                line.push_str(&format!(" ({e} evicted)"));
            }
        }
        Some(line)
    }
}

fn percent(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{:.1}%", 100.0 * r))
}

/// The run's page cache from its totals: `counters` are the scope's
/// (`totals.vm.counters`).
pub fn page_cache(
    counter: impl Fn(&str) -> Option<u64>,
    probes: &[ProbeStatus],
    processes: &[ProcessTotal],
    cgroups: &[CgroupTotal],
) -> PageCache {
    let unavailable = [names::PAGE_CACHE_READ, names::PAGE_CACHE_ADD]
        .into_iter()
        .find_map(|p| crate::model::totals::missing_probe(probes, p));
    let scope = unavailable.is_none().then(|| {
        let [read, added] =
            ["page_cache_read_pages", "page_cache_added_pages"].map(|n| counter(n).unwrap_or(0));
        CacheReads::new(read, added)
    });
    let mut by_cgroup: Vec<CgroupCache> = cgroups
        .iter()
        .filter_map(|c| {
            let reads = CacheReads::of(&c.totals);
            let removed = c.page_cache_removed;
            if reads.is_none() && removed.is_none() {
                return None;
            }
            let stat = |k: &str| Some(*c.books_last.as_ref()?.stat.get(k)?);
            let first = |k: &str| Some(*c.books_first.as_ref()?.stat.get(k)?);
            let either = |a: &str, b: &str| stat(a).or_else(|| stat(b));
            Some(CgroupCache {
                id: c.id,
                path: c.path.clone(),
                reads,
                evicted_pages: removed.map(|r| r.evicted_pages),
                dropped_pages: removed.map(|r| r.dropped_pages),
                refaults: stat("workingset_refault_file")
                    .zip(first("workingset_refault_file"))
                    .map(|(l, f)| l.saturating_sub(f)),
                cache_bytes: either("file", "cache"),
                dirty_bytes: either("file_dirty", "dirty"),
                writeback_bytes: either("file_writeback", "writeback"),
            })
        })
        .collect();
    by_cgroup.sort_by_key(|c| {
        std::cmp::Reverse((
            c.reads.as_ref().map_or(0, |r| r.read_pages),
            c.evicted_pages.unwrap_or(0),
        ))
    });
    let mut readers: Vec<ProcessCache> = processes
        .iter()
        .filter_map(|p| {
            let reads = CacheReads::of(p).filter(|r| r.read_pages > 0)?;
            Some(ProcessCache {
                pid: p.pid,
                comm: p.comm.clone(),
                reads,
            })
        })
        .collect();
    readers.sort_by_key(|p| std::cmp::Reverse(p.reads.read_pages));
    readers.truncate(TOP_READERS);
    PageCache {
        scope,
        cgroups: by_cgroup,
        processes: readers,
        unavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_reads_less_additions_over_reads_and_null_without_reads() {
        assert_eq!(CacheReads::new(1000, 50).read_hit_ratio, Some(0.95));
        // More added than read (readahead, writes): no hits, not negative.
        assert_eq!(CacheReads::new(100, 400).read_hit_ratio, Some(0.0));
        assert_eq!(CacheReads::new(0, 400).read_hit_ratio, None);
    }

    #[test]
    fn without_the_read_probe_the_scope_is_null_with_the_reason() {
        let mut missing = ProbeStatus::tracepoint(names::PAGE_CACHE_READ, false);
        missing.reason = Some("this kernel has no filemap:mm_filemap_get_pages".into());
        let probes = vec![
            missing,
            ProbeStatus::tracepoint(names::PAGE_CACHE_ADD, true),
        ];
        let pc = page_cache(|_| Some(7), &probes, &[], &[]);
        assert_eq!(pc.scope, None);
        assert_eq!(pc.summary(), None);
        let why = pc.unavailable.expect("a reason");
        assert!(why.contains("no filemap:mm_filemap_get_pages"), "{why}");
    }

    /// Before 6.11 (no read hook) a cgroup's evictions still make it a row,
    /// its reads absent; a cgroup without the removal hook's counts has
    /// them null, not 0; one with neither is not a row.
    #[test]
    fn a_cgroups_removals_make_a_row_without_reads_and_are_null_without_the_hook() {
        use crate::model::{ProcAvailability, cgroup::CacheRemovals, process::ProcSample};
        let total = ProcSample::default().total(
            crate::model::probes::FaultSource::Tracepoint,
            &ProcAvailability::only(&[]),
        );
        let cgroup = |id, removed| CgroupTotal {
            id,
            path: Some(format!("/c{id}")),
            totals: total.clone(),
            books_first: None,
            books_last: None,
            page_cache_removed: removed,
            workload: None,
        };
        let removed = CacheRemovals {
            evicted_pages: 300,
            dropped_pages: 4,
        };
        let pc = page_cache(
            |_| Some(0),
            &[],
            &[],
            &[cgroup(1, Some(removed)), cgroup(2, None)],
        );
        assert_eq!(pc.cgroups.len(), 1, "{:?}", pc.cgroups);
        let row = &pc.cgroups[0];
        assert_eq!((row.id, row.reads.as_ref()), (1, None));
        assert_eq!((row.evicted_pages, row.dropped_pages), (Some(300), Some(4)));
        let json = serde_json::to_value(row).expect("a row serializes");
        assert!(json.get("read_pages").is_none(), "{json}");
        assert_eq!(json["evicted_pages"], 300);
    }
}
