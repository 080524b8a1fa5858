//! A recording's summaries folded as its samples arrive, so that a long
//! `record --format jsonl` keeps memory flat: the first and latest sample,
//! the snapshot the samples add up to with the ended processes (bounded,
//! see `ProcBook`) and the series built interval by interval.

use std::collections::{BTreeMap, HashMap};

use crate::model::{
    ProcAvailability, ProcBook,
    cgroup::{CgroupBooks, CgroupTotal},
    oom::OomKill,
    probes::FaultSource,
    rmap::RmapProc,
    sample::Sample,
    series::{IntervalSeries, SeriesBuilder},
};

/// Processes' rmap figures kept beyond this are trimmed to the largest.
const RMAP_PROCS: usize = 1024;

pub struct Fold {
    first: Option<Sample>,
    last: Option<Sample>,
    rmap_procs: HashMap<u32, RmapProc>,
    pub procs: ProcBook,
    series: Option<SeriesBuilder>,
    /// Whether any sample had /proc/vmstat's pgfault.
    pub pgfault: bool,
    /// Every OOM kill the samples carried, oldest first (a rare event:
    /// each one kills a process).
    oom_kills: Vec<OomKill>,
    /// Each cgroup's books when first listed.
    books_first: BTreeMap<u64, CgroupBooks>,
    keep_cgroups: usize,
    /// The working-set windows.
    pub wss: crate::model::wss::WssFold,
    /// The swap tiers as last reported.
    pub tiers: Option<crate::model::tiers::TierSample>,
    /// The THP counts by size, first and last reported.
    pub thp_sizes: (
        Option<crate::model::hugepages::ThpSizes>,
        Option<crate::model::hugepages::ThpSizes>,
    ),
}

impl Fold {
    /// `keep`: how many ended processes to keep as rows (the recording's
    /// process limit).
    pub fn new(keep: usize) -> Self {
        Self {
            first: None,
            last: None,
            rmap_procs: HashMap::new(),
            procs: ProcBook::new(keep),
            series: None,
            pgfault: false,
            oom_kills: Vec::new(),
            books_first: BTreeMap::new(),
            keep_cgroups: keep,
            wss: Default::default(),
            tiers: None,
            thp_sizes: (None, None),
        }
    }

    pub fn push(&mut self, s: &Sample) {
        match &mut self.series {
            Some(b) => b.push(s),
            None => self.series = Some(SeriesBuilder::new(s)),
        }
        self.pgfault |= s.vmstat.get("pgfault").is_some();
        self.oom_kills.extend(s.oom_kills.iter().cloned());
        if let Some(t) = &s.swap_tiers {
            self.tiers = Some(t.clone());
        }
        if let Some(t) = &s.thp_sizes {
            if self.thp_sizes.0.is_none() {
                self.thp_sizes.0 = Some(t.clone());
            }
            self.thp_sizes.1 = Some(t.clone());
        }
        for w in &s.working_set {
            self.wss.push(w);
        }
        for c in &s.cgroups {
            if let Some(b) = &c.books {
                self.books_first.entry(c.id).or_insert_with(|| b.clone());
            }
        }
        if let Some(r) = &s.rmap {
            for p in &r.procs {
                self.rmap_procs.insert(p.pid, p.clone());
            }
            if self.rmap_procs.len() > 2 * RMAP_PROCS {
                let mut v: Vec<RmapProc> = self.rmap_procs.drain().map(|(_, p)| p).collect();
                v.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.pid.cmp(&b.pid)));
                v.truncate(RMAP_PROCS);
                self.rmap_procs = v.into_iter().map(|p| (p.pid, p)).collect();
            }
        }
        self.procs.push(s);
        // A removed cgroup's first books go with it once it is no longer
        // among those kept.
        if self.books_first.len() > self.keep_cgroups.saturating_mul(2).saturating_add(64) {
            let kept: std::collections::HashSet<u64> =
                self.procs.cgroups().map(|(id, _)| id).collect();
            self.books_first.retain(|id, _| kept.contains(id));
        }
        if self.first.is_none() {
            self.first = Some(s.clone());
        }
        self.last = Some(s.clone());
    }

    pub fn first(&self) -> Option<&Sample> {
        self.first.as_ref()
    }

    pub fn last(&self) -> Option<&Sample> {
        self.last.as_ref()
    }

    /// The OOM kills of every sample pushed, oldest first.
    pub fn oom_kills(&self) -> &[OomKill] {
        &self.oom_kills
    }

    /// Every cgroup seen, most faults first, at most `limit`.
    pub fn cgroups(
        &self,
        source: FaultSource,
        avail: &ProcAvailability,
        limit: usize,
    ) -> Vec<CgroupTotal> {
        let mut rows: Vec<CgroupTotal> = self
            .procs
            .cgroups()
            .map(|(id, c)| {
                let mut totals = c.counts.total(source, avail);
                totals.comm = c.name(id);
                totals.cgroup = id;
                CgroupTotal {
                    id,
                    path: c.path.clone(),
                    totals,
                    books_first: self.books_first.get(&id).cloned(),
                    books_last: c.books.clone(),
                    page_cache_removed: c.page_cache_removed,
                    workload: c.identity(),
                }
            })
            .collect();
        let faults = |c: &CgroupTotal| c.totals.faults.total.unwrap_or(0);
        rows.sort_by(|a, b| faults(b).cmp(&faults(a)).then(a.id.cmp(&b.id)));
        rows.truncate(limit);
        rows
    }

    /// Two samples equivalent, for the totals, to every sample pushed: the
    /// first, and the latest carrying every histogram's and process's rmap
    /// figures as they last were.
    pub fn summary_samples(&self) -> Vec<Sample> {
        let (Some(first), Some(last)) = (&self.first, &self.last) else {
            return Vec::new();
        };
        let mut end = last.clone();
        end.hists = self.procs.snapshot().hists.values().cloned().collect();
        if let Some(r) = &mut end.rmap {
            r.procs = self.rmap_procs.values().cloned().collect();
            r.procs.sort_by_key(|p| p.pid);
        }
        end.procs = Vec::new();
        vec![first.clone(), end]
    }

    pub fn series(self, available: impl Fn(&str) -> bool) -> IntervalSeries {
        self.series.map(|b| b.finish(available)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{self, ProcAvailability};

    /// A real recording (`record -- sh -c` running 40 two-thread populate
    /// children, 40 toucher children, madvise calls): folded sample by
    /// sample, it gives the totals, rows and series the batch functions
    /// give over all its samples.
    #[test]
    fn folding_gives_what_the_whole_recording_gives() {
        let text = include_str!("../../../tests/fixtures/churn.recording.json");
        let rec = crate::document::from_str(text).expect("the fixture is a recording");
        assert!(rec.samples.iter().any(|s| !s.exited.is_empty()));
        let source = rec.header.fault_source;
        let avail = ProcAvailability::only(&[
            crate::model::probes::names::MAJOR_FAULTS,
            crate::model::probes::names::ACCOUNT,
        ]);
        let available = |name: &str| !name.starts_with("swap_");
        for limit in [5, 50, usize::MAX] {
            let mut fold = Fold::new(limit);
            for s in &rec.samples {
                fold.push(s);
            }
            let json = |v: &dyn erased::Ser| v.json();
            assert_eq!(
                json(&fold.procs.totals(source, &avail, limit)),
                json(&model::process_totals(source, &avail, &rec.samples, limit)),
                "rows at limit {limit}"
            );
            assert_eq!(
                json(&model::fault_totals(
                    source,
                    true,
                    Some(&fold.procs.faults())
                )),
                json(&model::tree_faults(source, true, &rec.samples)),
            );
            assert_eq!(
                json(&crate::model::totals::vm_totals(
                    &fold.summary_samples(),
                    &rec.header.probes,
                    None
                )),
                json(&crate::model::totals::vm_totals(
                    &rec.samples,
                    &rec.header.probes,
                    None
                )),
            );
            assert_eq!(
                json(&fold.series(available)),
                json(&crate::model::series::series(&rec.samples, available)),
            );
        }
    }

    mod erased {
        pub trait Ser {
            fn json(&self) -> serde_json::Value;
        }
        impl<T: serde::Serialize> Ser for T {
            fn json(&self) -> serde_json::Value {
                serde_json::to_value(self).expect("serializable")
            }
        }
    }
}
