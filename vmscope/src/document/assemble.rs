//! The finished recording, assembled from a run's parts: the header with
//! the probes' final status, and the totals folded from every sample.
//! `record` and the flight recorder build theirs the same way.

use std::time::{Duration, SystemTime};

use crate::{
    child, model,
    model::{
        probes::ProbeStatus,
        recording::{Header, Recording, Totals},
        sample::Sample,
    },
    source::loader,
    timefmt,
};

/// Everything the finished document is made of (the flight recorder
/// builds its recordings the same way).
pub(crate) struct Parts {
    pub(crate) fold: crate::model::fold::Fold,
    pub(crate) samples: Vec<Sample>,
    pub(crate) probes: Vec<ProbeStatus>,
    pub(crate) limit: usize,
    pub(crate) header: Header,
    pub(crate) end_wall: SystemTime,
    pub(crate) duration: Duration,
    pub(crate) interrupted_by: Option<&'static str>,
    pub(crate) incomplete: Option<String>,
    pub(crate) child: Option<child::ChildReport>,
}

/// The recording: the header as it was at the start but with the probes'
/// final status, and the totals folded from every sample.
pub(crate) fn assemble(d: Parts) -> Recording {
    let fold = d.fold;
    let source = d.header.fault_source;
    let first = fold.first().map(|s| s.faults).unwrap_or_default();
    let last = fold.last().map(|s| s.faults).unwrap_or_default();
    let attached = |name: &str| crate::model::probes::probe_usable(&d.probes, name);
    let gup = attached(loader::ACCOUNT_PROBE);
    // The system's get_user_pages part comes from /proc/vmstat (pgfault).
    let system_faults = model::fault_totals(
        source,
        fold.pgfault,
        model::fault_delta(&first, &last).as_ref(),
    );
    let scope_faults = model::fault_totals(source, gup, Some(&fold.procs.faults()));
    let avail = model::ProcAvailability::of(&d.probes);
    let summary = fold.summary_samples();
    let vm = crate::model::totals::vm_totals(
        &summary,
        &d.probes,
        crate::source::procfs::read_psi().err().as_deref(),
    );
    let swap_tiers = fold
        .tiers
        .clone()
        .map(|end| crate::model::tiers::swap_tiers(&vm.vmstat, end));
    let thp_sizes = Some(crate::model::hugepages::totals(
        fold.thp_sizes.0.as_ref(),
        fold.thp_sizes.1.as_ref(),
    ));
    let processes = fold.procs.totals(source, &avail, d.limit);
    let cgroups = fold.cgroups(source, &avail, d.limit);
    let page_cache = Some(crate::model::pagecache::page_cache(
        |n| vm.counters.get(n).copied().flatten(),
        &d.probes,
        &processes,
        &cgroups,
    ));
    Recording {
        page_cache,
        swap_tiers,
        thp_sizes,
        cachestat: Vec::new(),
        end_time: timefmt::rfc3339(d.end_wall),
        duration_ns: nanos(d.duration),
        interrupted_by: d.interrupted_by.map(str::to_string),
        incomplete: d.incomplete,
        child: d.child,
        totals: Totals {
            system_faults,
            scope_faults,
            vm,
        },
        processes,
        processes_limit: d.limit.min(u32::MAX as usize),
        lost: model::lost(fold.last()),
        oom_kills: fold.oom_kills().to_vec(),
        cgroups,
        working_set: d
            .header
            .working_set
            .clone()
            .map(|setup| fold.wss.totals(setup)),
        series: fold.series(|name| attached(crate::model::catalogue::counter_probe(name))),
        samples: d.samples,
        header: Header {
            probes: d.probes.clone(),
            ..d.header
        },
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
