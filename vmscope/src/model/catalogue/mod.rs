//! Every metric vmscope has, one row each: where it comes from (counter
//! slot, histogram, vmstat key, per-process field) and which probe feeds
//! it, its unit and which direction is better, and how each view shows it
//! (JSON key, Prometheus family and labels, `top` row or column, bench and
//! compare row). The collector's names, the exporter, `top`'s rows and
//! "unavailable" lists, bench/compare's figures and `docs/metrics.md` are
//! all read from these tables. Pure: no eBPF, no I/O.
//!
//! Each family of metrics has its own file beside this one, declaring its
//! rows side by side (counters, histograms, per-process figures, `top`
//! rates, run figures); the tables here are their concatenation, in the
//! order every view lists them. `docs` writes `docs/metrics.md` from them.
//!
//! Adding a metric: a probe (in `vmscope-ebpf`, attached by the loader)
//! and a row in its family's file. The row's availability follows its
//! probe everywhere.

use constcat::concat_slices;
use vmscope_common::{counter, hist};

use serde::{Deserialize, Serialize};

use crate::{
    model::process::{ProcCounter, ProcSample},
    procstat,
};

pub mod compaction;
pub mod dirty;
pub mod docs;
pub mod faults;
pub mod madvise;
pub mod migrate;
pub mod mmap_lock;
pub mod oom;
pub mod pagecache;
pub mod reclaim;
pub mod rmap;
pub mod swap;
pub mod system;
pub mod thp;
pub mod tlb;
pub mod wss;

/// Probe names (declared with the probe statuses, below every metric).
pub use crate::model::probes::names as probe;

/// How a system-wide counter is exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Export {
    /// Not exported (bookkeeping only).
    No,
    /// Its own family: (metric, help).
    Plain(&'static str, &'static str),
    /// One series of a labelled family: (family metric, label value).
    In(&'static str, &'static str),
}

/// A named system-wide counter.
#[derive(Clone, Copy, Debug)]
pub struct Counter {
    /// Its name in samples, recordings (`totals.vm.counters`) and JSON.
    pub key: &'static str,
    /// The eBPF counter slot; `None` for the sums the collector derives
    /// (the per-mm swap map).
    pub slot: Option<u32>,
    pub probe: &'static str,
    pub unit: &'static str,
    pub help: &'static str,
    pub export: Export,
}

/// A labelled counter family: (metric, label name, help).
pub const COUNTER_FAMILIES: &[(&str, &str, &str)] = concat_slices!([(&str, &str, &str)]:
    reclaim::COUNTER_FAMILIES,
    swap::COUNTER_FAMILIES,
    tlb::COUNTER_FAMILIES,
    compaction::COUNTER_FAMILIES,
    pagecache::COUNTER_FAMILIES,
    migrate::COUNTER_FAMILIES,
);

/// A counter with its eBPF slot (the family files' rows).
const fn c(
    key: &'static str,
    slot: u32,
    probe: &'static str,
    unit: &'static str,
    help: &'static str,
    export: Export,
) -> Counter {
    Counter {
        key,
        slot: Some(slot),
        probe,
        unit,
        help,
        export,
    }
}

/// The system-wide counters (scope-filtered when a recording is scoped).
pub const COUNTERS: &[Counter] = concat_slices!([Counter]:
    faults::COUNTERS,
    tlb::COUNTERS,
    reclaim::COUNTERS,
    oom::COUNTERS,
    madvise::COUNTERS,
    swap::COUNTERS,
    faults::ACCOUNT_COUNTERS,
    compaction::COUNTERS,
    migrate::COUNTERS,
    thp::COUNTERS,
    faults::TIMING_COUNTERS,
    mmap_lock::COUNTERS,
    system::COUNTERS,
    swap::ATTRIBUTED_COUNTERS,
    pagecache::COUNTERS,
);

/// The counter named `key`.
pub fn counter(key: &str) -> Option<&'static Counter> {
    COUNTERS.iter().find(|c| c.key == key)
}

/// The probe that feeds a counter (for availability); an unknown name
/// needs none.
pub fn counter_probe(key: &str) -> &'static str {
    counter(key).map_or(probe::ALWAYS, |c| c.probe)
}

/// A latency-histogram family, and the histograms that belong to it.
#[derive(Clone, Copy, Debug)]
pub struct HistFamily {
    /// Which histogram names: a prefix (the rest is the label value), an
    /// exact name (no label), or `""` for every other name (the name is
    /// the label value).
    pub prefix: &'static str,
    pub exact: bool,
    pub metric: &'static str,
    pub label: &'static str,
    pub help: &'static str,
}

pub const HIST_FAMILIES: &[HistFamily] = concat_slices!([HistFamily]:
    faults::HIST_FAMILIES,
    reclaim::HIST_FAMILIES,
    madvise::HIST_FAMILIES,
    reclaim::KSWAPD_HIST_FAMILIES,
    dirty::HIST_FAMILIES,
    compaction::HIST_FAMILIES,
    migrate::HIST_FAMILIES,
    mmap_lock::HIST_FAMILIES,
    system::HIST_FAMILIES,
);

/// The family of histogram `name`, and its label value (`""` without one).
pub fn hist_family(name: &str) -> (&'static HistFamily, &str) {
    for f in HIST_FAMILIES {
        if f.exact {
            if name == f.prefix {
                return (f, "");
            }
        } else if let Some(rest) = name.strip_prefix(f.prefix) {
            return (f, rest);
        }
    }
    unreachable!("the last family takes every name")
}

/// A latency histogram with a fixed slot (the page-fault and madvise ones
/// are ranges: see [`hist_name`]).
pub const HISTS: &[(u32, &str, &str)] = concat_slices!([(u32, &str, &str)]:
    reclaim::HISTS,
    system::HISTS,
    dirty::HISTS,
    compaction::HISTS,
    migrate::HISTS,
    mmap_lock::HISTS,
);

/// The name of histogram slot `id`.
pub fn hist_name(id: u32) -> String {
    if let Some((_, name, _)) = HISTS.iter().find(|h| h.0 == id) {
        return (*name).to_string();
    }
    if id >= hist::FAULT_BASE {
        return format!(
            "fault_{}",
            crate::model::hist::fault_kind(id - hist::FAULT_BASE)
        );
    }
    format!(
        "madvise_{}",
        crate::model::hist::behavior_name(id - hist::MADVISE_BASE)
    )
}

/// The probe histogram slot `id` depends on.
pub fn hist_probe(id: u32) -> &'static str {
    match HISTS.iter().find(|h| h.0 == id) {
        Some((_, _, p)) => p,
        None if id >= hist::FAULT_BASE => probe::FAULT_TIMING,
        None => probe::MADVISE,
    }
}

/// A per-process figure: its field in [`ProcSample`], its probe, and its
/// Prometheus family (`serve --per-process`).
#[derive(Clone, Copy, Debug)]
pub struct ProcField {
    pub key: &'static str,
    pub probe: &'static str,
    /// `"ns"` fields are exported in seconds.
    pub unit: &'static str,
    pub help: &'static str,
    pub metric: Option<&'static str>,
    /// The column it fills in `top`'s process and cgroup tables, if any.
    pub column: Option<Column>,
    /// Its per-cgroup family (`serve --per-cgroup`: the figure summed over
    /// the cgroup's processes), if any.
    pub cgroup: Option<Family>,
    pub get: fn(&ProcSample) -> u64,
}

/// A rate column of `top`'s process and cgroup tables: a per-process
/// figure per second over the last interval. Setting one on a
/// [`ProcField`] row is all the code a new column takes: `RowRates`, the
/// tables, their sort keys and `--batch`'s text are generated from
/// [`COLUMN_FIELDS`] (`docs/metrics.md` lists its `key`).
#[derive(Clone, Copy, Debug)]
pub struct Column {
    /// Its place among the rate columns, left to right (ascending; no two
    /// alike).
    pub order: u8,
    /// Its title, e.g. `FLT/s`.
    pub title: &'static str,
    /// The name it is unavailable under in `top` (its probe's columns
    /// share one, e.g. `swap`); `docs/metrics.md` lists it.
    pub key: &'static str,
    /// The rate per second is divided by this (1e6: ns to ms per second).
    pub divide_by: f64,
    /// Shown even where its probe is unavailable (as 0), never `n/a`.
    pub always: bool,
    /// Its width in the process table and in `--batch`'s text.
    pub width: u16,
    /// When the process table is narrow its rate columns are given up,
    /// the highest rank first (never the one sorted on); PID and COMM
    /// stay.
    pub rank: u8,
    /// Its width in the cgroup table.
    pub cgroup_width: u16,
    /// When the cgroup table is narrow its columns are given up, the
    /// highest rank first; `top`'s own are PROCS 1, WSS 2, USAGE 4,
    /// LIMIT 5 and PSI% 6.
    pub cgroup_rank: u8,
}

/// A per-cgroup family of a per-process figure: labelled `cgroup`.
const fn cgroup(name: &'static str, help: &'static str) -> Option<Family> {
    Some(Family::counter(Scope::Cgroup, name, &["cgroup"], help))
}

pub const PROC_FIELDS: &[ProcField] = concat_slices!([ProcField]:
    faults::PROC_FIELDS,
    tlb::PROC_FIELDS,
    faults::MAJOR_PROC_FIELDS,
    swap::PROC_FIELDS,
    reclaim::PROC_FIELDS,
    dirty::PROC_FIELDS,
    compaction::PROC_FIELDS,
    mmap_lock::PROC_FIELDS,
    madvise::PROC_FIELDS,
    pagecache::PROC_FIELDS,
    thp::PROC_FIELDS,
);

/// How many of [`PROC_FIELDS`] have a `top` column.
pub const COLUMN_COUNT: usize = column_count(PROC_FIELDS);

/// The per-process figures with a `top` column, in column order.
pub static COLUMN_FIELDS: [ProcField; COLUMN_COUNT] = in_column_order(PROC_FIELDS);

/// The `top` rate columns, in order, with their figures.
pub fn columns() -> impl Iterator<Item = (&'static ProcField, Column)> {
    COLUMN_FIELDS.iter().filter_map(|f| Some((f, f.column?)))
}

const fn column_count(fields: &[ProcField]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < fields.len() {
        if fields[i].column.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// `fields`' rows with a column, by [`Column::order`]; two columns in the
/// same place fail the build.
const fn in_column_order<const N: usize>(fields: &[ProcField]) -> [ProcField; N] {
    let mut out = [fields[0]; N];
    let mut i = 0;
    while i < fields.len() {
        if let Some(c) = fields[i].column {
            let (mut at, mut j) = (0, 0);
            while j < fields.len() {
                if let Some(d) = fields[j].column {
                    assert!(
                        j == i || d.order != c.order,
                        "two top columns share an order"
                    );
                    if d.order < c.order {
                        at += 1;
                    }
                }
                j += 1;
            }
            out[at] = fields[i];
        }
        i += 1;
    }
    out
}

/// What a `top` rate row needs to be available.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Probe(&'static str),
    /// The page-fault tracepoints (the perf fallback has no user/kernel
    /// split).
    FaultTracepoints,
}

/// Where a `top` rate row's value comes from; `live` evaluates it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateValue {
    /// User faults (with the perf fallback, every fault).
    FaultsUser,
    FaultsKernel,
    FaultsGup,
    /// Counters summed.
    Counters(&'static [&'static str]),
    Vmstat(&'static str),
    /// A histogram's time, in ms per second.
    HistMs(&'static str),
    /// PSI memory `some` stall time, in ms per second.
    PsiSome,
    /// The share of PSI memory `some` the timed causes explain (%).
    StallCoverage,
    MadviseCalls,
    RmapWalk,
    RmapMaintenance,
    /// The page cache's read hit ratio over the interval (%).
    ReadHitRatio,
}

/// What a rate row's detail line shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    None,
    /// Its counters one by one, with `top`'s short names.
    Breakdown(&'static [(&'static str, &'static str)]),
    MadviseBehaviours,
    RmapSamples,
}

/// A row of `top`'s rates panel.
#[derive(Clone, Copy, Debug)]
pub struct Rate {
    pub label: &'static str,
    pub unit: &'static str,
    pub needs: &'static [Need],
    pub value: RateValue,
    pub detail: Detail,
    pub help: &'static str,
}

/// A `top` rate row without a detail line.
const fn rate(
    label: &'static str,
    unit: &'static str,
    needs: &'static [Need],
    value: RateValue,
    help: &'static str,
) -> Rate {
    Rate {
        label,
        unit,
        needs,
        value,
        detail: Detail::None,
        help,
    }
}

pub const RATES: &[Rate] = concat_slices!([Rate]:
    faults::RATES,
    swap::RATES,
    reclaim::RATES,
    dirty::RATES,
    compaction::RATES,
    thp::RATES,
    migrate::RATES,
    mmap_lock::RATES,
    system::RATES,
    reclaim::KSWAPD_RATES,
    tlb::RATES,
    madvise::RATES,
    pagecache::RATES,
    rmap::RATES,
);

/// Where a bench/compare row goes in compare's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    /// The times, first.
    Headline,
    /// Faults, swap and reclaim, before the latency quantiles.
    Before,
    /// After the latency quantiles.
    After,
    /// With any figure the catalogue does not name, by name.
    Rest,
}

/// Which way is better for a metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
    /// Neither (e.g. a count that only describes the run).
    Neither,
}

/// A figure of one recorded run (bench summarises it, compare compares
/// it, the report's tables show it). Rows are listed in compare's order.
#[derive(Clone, Copy, Debug)]
pub struct RunRow {
    pub name: &'static str,
    pub unit: &'static str,
    pub better: Better,
    pub place: Place,
    /// One of the report's main VM rows.
    pub main: bool,
    pub help: &'static str,
    /// The figure, or None when the run could not measure it.
    pub value: fn(&dyn Run) -> Option<f64>,
}

/// A run figure.
const fn row(
    name: &'static str,
    unit: &'static str,
    better: Better,
    place: Place,
    main: bool,
    help: &'static str,
    value: fn(&dyn Run) -> Option<f64>,
) -> RunRow {
    RunRow {
        name,
        unit,
        better,
        place,
        main,
        help,
        value,
    }
}

/// What a run's figures are read from: a recording, seen through the
/// questions the rows ask (implemented where the recording is, so that
/// the catalogue stays below the document it describes).
pub trait Run {
    /// The command's rusage, if a command was run.
    fn rusage(&self) -> Option<&crate::child::Rusage>;
    /// The recorded total of counter `name`, if known.
    fn counter(&self, name: &str) -> Option<u64>;
    /// The recorded growth of /proc/vmstat `key`, if the kernel has it.
    fn vmstat(&self, key: &str) -> Option<u64>;
    /// Whether `probe` was attached (or deferred) in the run.
    fn probe_usable(&self, probe: &str) -> bool;
    /// Whether the recording says `what` was unavailable.
    fn unavailable(&self, what: &str) -> bool;
    /// The summed time of histogram `name`, if it recorded any event.
    fn histogram_sum_ns(&self, name: &str) -> Option<u64>;
    /// The calls of madvise `behaviour` (absent: none).
    fn madvise_calls(&self, behaviour: &str) -> Option<u64>;
    /// The run's rmap figures, if it measured them.
    fn rmap(&self) -> Option<&crate::model::rmap::RmapTotals>;
    /// The workload's own record count (its `.../records` figure), if any.
    fn records(&self) -> Option<f64>;
    /// The page faults of the recorded scope.
    fn scope_faults(&self) -> &crate::model::FaultTotals;
    /// madvise calls of every behaviour.
    fn madvise_total_calls(&self) -> u64;
    /// PSI memory `some` stall time (µs), if the kernel has PSI.
    fn psi_some_stall_us(&self) -> Option<u64>;
    /// The run's working set, if it was measured (`--working-set`).
    fn working_set(&self) -> Option<&crate::model::wss::WssTotals>;
}

/// A figure of the command's rusage, if a command was run.
fn rusage(rec: &dyn Run, f: fn(&crate::child::Rusage) -> f64) -> Option<f64> {
    rec.rusage().map(f)
}

/// The recorded total of counter `name`, if known.
fn vm_counter(rec: &dyn Run, name: &str) -> Option<f64> {
    rec.counter(name).map(|v| v as f64)
}

/// The summed time (ms) of histograms `names`: 0 when their probes were
/// attached and nothing happened (an empty histogram is not recorded), and
/// `None` when any was unavailable or the recording predates its probe.
fn hist_sum_ms(rec: &dyn Run, names: &[&str]) -> Option<f64> {
    let mut ms = 0.0;
    for name in names {
        let (_, _, probe) = HISTS.iter().find(|h| h.1 == *name)?;
        if !rec.probe_usable(probe) || rec.unavailable(&format!("histogram {name}")) {
            return None;
        }
        ms += rec.histogram_sum_ns(name).map_or(0.0, |ns| ns as f64 / 1e6);
    }
    Some(ms)
}

/// The recorded growth of /proc/vmstat `key`, if the kernel has it.
fn vmstat(rec: &dyn Run, key: &str) -> Option<f64> {
    rec.vmstat(key).map(|v| v as f64)
}

use Better::{Lower, Neither};
use Place::{After, Before, Headline, Rest};

pub const RUN_ROWS: &[RunRow] = concat_slices!([RunRow]:
    system::RUN_ROWS,
    faults::RUN_ROWS,
    swap::RUN_ROWS,
    reclaim::RUN_ROWS,
    dirty::RUN_ROWS,
    compaction::RUN_ROWS,
    thp::RUN_ROWS,
    migrate::RUN_ROWS,
    mmap_lock::RUN_ROWS,
    reclaim::SCAN_RUN_ROWS,
    oom::RUN_ROWS,
    tlb::RUN_ROWS,
    pagecache::RUN_ROWS,
    wss::RUN_ROWS,
    madvise::RUN_ROWS,
    system::PSI_RUN_ROWS,
    faults::GUP_RUN_ROWS,
    rmap::RUN_ROWS,
);

/// The headline rows (the catalogue's), first and in this order.
pub fn headline() -> impl Iterator<Item = &'static str> {
    RUN_ROWS
        .iter()
        .filter(|r| r.place == Place::Headline)
        .map(|r| r.name)
}

/// Where a metric's row goes: headline, then faults, swap and reclaim, the
/// latency histograms' quantiles, the rest of the catalogue's rows, anything
/// else by name. The catalogue lists its rows in this order.
fn rank(name: &str) -> (usize, &str, usize) {
    let rows = RUN_ROWS;
    let row = rows.iter().position(|r| r.name == name);
    let place = row.map(|i| rows[i].place);
    let headline = headline().count();
    let hist = rows.iter().filter(|r| r.place <= Place::Before).count() + 1;
    match (row, place) {
        (Some(i), Some(Place::Headline)) => return (i, "", 0),
        // The workload's own figures come right after the headline.
        _ if name.contains('/') => return (headline, name, 0),
        (Some(i), Some(Place::Before)) => return (i + 1, "", 0),
        _ => {}
    }
    if let Some((h, q)) = name.rsplit_once('.')
        && let Some(qi) = QUANTILES.iter().position(|x| *x == q)
    {
        return (hist, h, qi);
    }
    match (row, place) {
        (Some(i), Some(Place::After)) => (i + 2, "", 0),
        _ => (rows.len() + 2, name, 0),
    }
}

/// Orders two figures' names as bench and compare list them.
pub fn by_rank(a: &str, b: &str) -> std::cmp::Ordering {
    rank(a).cmp(&rank(b))
}

/// The run row named `name`.
pub fn run_row(name: &str) -> Option<&'static RunRow> {
    RUN_ROWS.iter().find(|r| r.name == name)
}

/// The latency quantiles bench and compare show for each histogram.
pub const QUANTILES: &[&str] = &["p50", "p90", "p99"];

/// The type of a Prometheus family, as its `# TYPE` line gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FamilyType {
    Counter,
    Gauge,
    Histogram,
}

impl FamilyType {
    pub const fn name(self) -> &'static str {
        match self {
            FamilyType::Counter => "counter",
            FamilyType::Gauge => "gauge",
            FamilyType::Histogram => "histogram",
        }
    }
}

/// What a family's series are about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The whole system (or the scope a recording follows).
    System,
    /// One series per process (`serve --per-process N`).
    Process,
    /// One series per cgroup (`serve --per-cgroup N`), or by cgroup.
    Cgroup,
    /// The exporter itself.
    Exporter,
}

impl Scope {
    pub const fn name(self) -> &'static str {
        match self {
            Scope::System => "system",
            Scope::Process => "process",
            Scope::Cgroup => "cgroup",
            Scope::Exporter => "exporter",
        }
    }
}

/// A Prometheus family the exporter writes beside the tables above (its
/// own figures, PSI, madvise, the per-cgroup series...): declared once,
/// next to the code that writes it, which takes its HELP and TYPE lines
/// from here, as `docs/metrics.md` takes its row.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    pub name: &'static str,
    pub kind: FamilyType,
    pub scope: Scope,
    /// Its series' label names, in order (a histogram's `le` aside).
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

impl Family {
    pub const fn counter(
        scope: Scope,
        name: &'static str,
        labels: &'static [&'static str],
        help: &'static str,
    ) -> Family {
        Family {
            name,
            kind: FamilyType::Counter,
            scope,
            labels,
            help,
        }
    }

    pub const fn gauge(
        scope: Scope,
        name: &'static str,
        labels: &'static [&'static str],
        help: &'static str,
    ) -> Family {
        Family {
            kind: FamilyType::Gauge,
            ..Family::counter(scope, name, labels, help)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_metrics_are_unique() {
        let mut keys: Vec<&str> = COUNTERS.iter().map(|c| c.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), COUNTERS.len());
        let mut slots: Vec<u32> = COUNTERS.iter().filter_map(|c| c.slot).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(
            slots.len(),
            COUNTERS.iter().filter(|c| c.slot.is_some()).count()
        );
        let mut rows: Vec<&str> = RUN_ROWS.iter().map(|r| r.name).collect();
        rows.sort_unstable();
        rows.dedup();
        assert_eq!(rows.len(), RUN_ROWS.len());
        // Listed in compare's order.
        assert!(RUN_ROWS.windows(2).all(|w| w[0].place <= w[1].place));
    }

    #[test]
    fn top_columns_are_in_their_order() {
        let titles: Vec<&str> = columns().map(|(_, c)| c.title).collect();
        assert_eq!(
            titles,
            [
                "FLT/s",
                "MAJ/s",
                "RCLM_ms/s",
                "SWIN/s",
                "SWOUT/s",
                "MADV/s",
                "SHOOT/s"
            ]
        );
        assert_eq!(COLUMN_FIELDS[2].key, reclaim::PROC_STALL.key);
    }

    #[test]
    fn every_labelled_counter_has_its_family() {
        for c in COUNTERS {
            if let Export::In(f, _) = c.export {
                assert!(COUNTER_FAMILIES.iter().any(|x| x.0 == f), "{}: {f}", c.key);
            }
        }
    }

    #[test]
    fn histograms_fall_in_their_families() {
        assert_eq!(hist_family("reclaim_memcg").1, "memcg");
        assert_eq!(hist_family("kswapd_active").0.label, "");
        assert_eq!(
            hist_family("munmap").0.metric,
            "vmscope_syscall_duration_seconds"
        );
        assert_eq!(hist_name(hist::RECLAIM_MEMCG), "reclaim_memcg");
        assert_eq!(hist_probe(hist::RECLAIM_MEMCG), probe::MEMCG_RECLAIM);
        assert_eq!(hist_probe(hist::FAULT_BASE), probe::FAULT_TIMING);
        assert_eq!(hist_probe(hist::MADVISE_BASE), probe::MADVISE);
    }
}
