//! Per-cgroup series (`serve --per-cgroup N`) and OOM kills by victim
//! cgroup, with their label bounds and ageing.
//!
//! Every counter is cumulative for its cgroup (the snapshot's counts, the
//! kernel's own memory books), so which cgroups are exported may change
//! from one interval to the next without any series going backwards: a
//! cgroup that leaves the top N and comes back continues where it was.
//!
//! - Ranking: by activity, the events its processes took
//!   (`ProcSample::events`: page faults and every per-process counter
//!   tagged `event`, such as swapped pages, madvise calls, TLB shootdowns,
//!   reclaim entries), weighted down with a half-life of
//!   [`HALF_LIFE`]; ties by all-time events, then id. Two cgroups with one
//!   path (one removed, one made since under its name) export one series:
//!   the one that exists.
//! - Ageing: a cgroup not listed in a sample is checked (its directory, at
//!   most every [`RECHECK`]); once its directory is gone (or holds another
//!   cgroup), it stays [`LINGER`] (so that scrapes see its last values) and
//!   is then forgotten: its series end and its state is dropped, so what
//!   the exporter keeps is bounded by the cgroups that exist.
//! - OOM kills by victim cgroup: at most [`OOM_CGROUPS`] labels (plus
//!   `other`); a new one beyond that folds the label whose last kill is
//!   oldest into `other`, so the family's sum stays monotonic.

use std::{
    collections::{BTreeMap, BTreeSet},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    time::Duration,
};

use super::{Series, State, Writer, secs};
use crate::model::{
    catalogue::{self, Family, ProcField, Scope, probe, reclaim},
    cgroup::{CgroupSample, CgroupState},
    oom::OomKill,
    snapshot::Snapshot,
};

/// How fast past activity stops counting for the ranking.
pub const HALF_LIFE: Duration = Duration::from_secs(60);
/// How long a removed cgroup's series stay after it was found gone.
pub const LINGER: Duration = Duration::from_secs(120);
/// How often an idle cgroup's directory is checked.
pub const RECHECK: Duration = Duration::from_secs(10);
/// Labels of `vmscope_cgroup_oom_kills_total` besides `other`.
pub const OOM_CGROUPS: usize = 64;
/// The label of kills whose victim's cgroup is not known.
pub const UNKNOWN: &str = "unknown";
/// The label that older labels fold into beyond [`OOM_CGROUPS`].
pub const OTHER: &str = "other";

const fn counter(
    name: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> Family {
    Family::counter(Scope::Cgroup, name, labels, help)
}

const fn gauge(name: &'static str, help: &'static str) -> Family {
    Family::gauge(Scope::Cgroup, name, &["cgroup"], help)
}

pub const OOM_KILLS: Family = counter(
    "vmscope_cgroup_oom_kills_total",
    &["cgroup"],
    "OOM victims the kernel marked, by the victim's cgroup (\"unknown\" when not \
     known; at most 64 cgroups, the least recently killed in beyond that fold into \
     \"other\").",
);
pub const MADVISE_CALLS: Family = counter(
    "vmscope_cgroup_madvise_calls_total",
    &["cgroup", "behavior"],
    "madvise and process_madvise calls of the cgroup's processes, by behaviour \
     (dontneed, free, cold, pageout, willneed, populate, hugepage: with nohugepage \
     and collapse, other).",
);
pub const RECLAIM_STALL: Family = counter(
    "vmscope_cgroup_reclaim_stall_seconds_total",
    &["cgroup", "kind"],
    "Time the cgroup's processes stalled in reclaim, by kind (direct: the system \
     was short; memcg: a cgroup limit was hit).",
);
pub const PAGE_CACHE_REMOVED: Family = counter(
    "vmscope_cgroup_page_cache_removed_pages_total",
    &["cgroup", "reason"],
    "Pages removed from the cgroup's page cache since vmscope started, counted against the \
     cgroup they were charged to whichever task removed them: by reclaim (reason=\"evicted\": \
     kswapd, direct and cgroup-limit reclaim, MADV_PAGEOUT) or otherwise (\"dropped\": \
     truncation, deletion, invalidation).",
);
pub const PROCESSES: Family = gauge(
    "vmscope_cgroup_processes",
    "The cgroup's processes vmscope has seen that are alive.",
);
/// The workload each exported cgroup is, from its path: join it on
/// `cgroup` (`* on(cgroup) group_left(container, pod_uid)
/// vmscope_cgroup_info`) to name any per-cgroup series by container, pod or
/// unit. One series per exported cgroup whose path names one.
pub const INFO: Family = Family::gauge(
    Scope::Cgroup,
    "vmscope_cgroup_info",
    &[
        "cgroup",
        "unit",
        "runtime",
        "container",
        "pod_uid",
        "qos",
        "container_name",
    ],
    "Always 1: the systemd unit, container runtime and id, and Kubernetes pod UID and QoS \
     class the cgroup's path names, and the container's name from its runtime's state on \
     the host (empty where there is none); only for cgroups whose path follows a known \
     layout.",
);
pub const MEMORY_USAGE: Family = gauge(
    "vmscope_cgroup_memory_usage_bytes",
    "The cgroup's memory usage (v2 memory.current, v1 memory.usage_in_bytes).",
);
pub const MEMORY_LIMIT: Family = gauge(
    "vmscope_cgroup_memory_limit_bytes",
    "The cgroup's hard limit (v2 memory.max, v1 memory.limit_in_bytes); absent when \
     unlimited.",
);
pub const UNDER_OOM: Family = gauge(
    "vmscope_cgroup_under_oom",
    "1 while the cgroup is under OOM (v1 memory.oom_control under_oom).",
);
pub const MEMORY_EVENTS: Family = counter(
    "vmscope_cgroup_memory_events_total",
    &["cgroup", "event"],
    "The cgroup's memory events as the kernel counts them (v2 memory.events: low, \
     high, max, oom, oom_kill...; v1: failcnt, oom_kill).",
);
pub const PSI_SOME: Family = counter(
    "vmscope_cgroup_psi_memory_some_seconds_total",
    &["cgroup"],
    "Time some of the cgroup's tasks stalled on memory (v2 memory.pressure).",
);
pub const PSI_FULL: Family = counter(
    "vmscope_cgroup_psi_memory_full_seconds_total",
    &["cgroup"],
    "Time all of the cgroup's tasks stalled on memory (v2 memory.pressure).",
);

pub const ZSWAP_PAGES: Family = counter(
    "vmscope_cgroup_zswap_pages_total",
    &["cgroup", "direction"],
    "The cgroup's pages stored in zswap (direction=\"out\"), loaded from it (\"in\") \
     and written back from it to the device (\"written_back\"), as the kernel counts \
     them since the cgroup was made (v2 memory.stat zswpout, zswpin, zswpwb); absent on \
     v1 and without zswap.",
);
pub const ZSWAP_BYTES: Family = gauge(
    "vmscope_cgroup_zswap_bytes",
    "The cgroup's share of zswap's compressed pool (v2 memory.stat zswap).",
);
pub const ZSWAPPED_BYTES: Family = gauge(
    "vmscope_cgroup_zswapped_bytes",
    "The cgroup's pages in zswap, uncompressed (v2 memory.stat zswapped).",
);

pub const PAGE_CACHE_REFAULTS: Family = counter(
    "vmscope_cgroup_page_cache_refaults_total",
    &["cgroup"],
    "File pages the cgroup read again soon after they were evicted: its cache did not \
     hold its working set (memory.stat workingset_refault_file, as the kernel counts them).",
);
pub const PAGE_CACHE_BYTES: Family = Family::gauge(
    Scope::Cgroup,
    "vmscope_cgroup_page_cache_bytes",
    &["cgroup", "state"],
    "The cgroup's page cache (state=\"cached\": v2 memory.stat file, v1 cache), and of it \
     dirty (\"dirty\": file_dirty, dirty) and under write-back (\"writeback\": \
     file_writeback, writeback).",
);

pub const THP_BYTES: Family = Family::gauge(
    Scope::Cgroup,
    "vmscope_cgroup_thp_bytes",
    &["cgroup", "kind"],
    "The cgroup's memory in transparent huge pages, by kind (anon: v2 memory.stat \
     anon_thp, v1 rss_huge; file: file_thp; shmem: shmem_thp; v2 only for the last two).",
);
pub const THP_EVENTS: Family = counter(
    "vmscope_cgroup_thp_events_total",
    &["cgroup", "event"],
    "The cgroup's THP events as the kernel counts them (v2 memory.stat thp_*: fault_alloc, \
     collapse_alloc, swpout, swpout_fallback where the kernel has them); absent on v1.",
);

/// The families written here.
pub const FAMILIES: &[Family] = &[
    OOM_KILLS,
    MADVISE_CALLS,
    RECLAIM_STALL,
    PAGE_CACHE_REMOVED,
    PROCESSES,
    INFO,
    MEMORY_USAGE,
    MEMORY_LIMIT,
    UNDER_OOM,
    MEMORY_EVENTS,
    PSI_SOME,
    PSI_FULL,
    ZSWAP_PAGES,
    ZSWAP_BYTES,
    ZSWAPPED_BYTES,
    PAGE_CACHE_REFAULTS,
    PAGE_CACHE_BYTES,
    THP_BYTES,
    THP_EVENTS,
];

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Clone, Debug, Default)]
struct Activity {
    /// Events, weighted by age.
    score: f64,
    /// All its events at the last update.
    events: u64,
    /// When its directory was found gone.
    gone_since: Option<u64>,
    /// When its directory was last checked (or it was listed).
    checked: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct OomCount {
    pub kills: u64,
    last_ns: u64,
}

/// What the exporter keeps about cgroups between intervals.
#[derive(Clone, Debug, Default)]
pub struct CgroupBook {
    /// How many cgroups to export (0: none).
    pub top: usize,
    /// Where the memory hierarchy is mounted; without it nothing ages.
    pub mount: Option<PathBuf>,
    activity: BTreeMap<u64, Activity>,
    /// The cgroups exported now, most active first.
    pub exported: Vec<u64>,
    last_ns: Option<u64>,
    /// OOM kills by victim cgroup path.
    pub oom: BTreeMap<String, OomCount>,
}

/// Whether cgroup `id` still has its directory at `path` below `mount`:
/// `None` when that cannot be told (the mount itself is not visible).
pub fn dir_exists(mount: &Path, id: u64, path: &str) -> Option<bool> {
    if !mount.is_dir() {
        return None;
    }
    match std::fs::metadata(mount.join(path.trim_start_matches('/'))) {
        Ok(m) => Some(m.is_dir() && m.ino() == id),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(false),
        Err(_) => None,
    }
}

impl CgroupBook {
    /// Counts each kill against its victim's cgroup.
    pub fn count_kills(&mut self, kills: &[OomKill], now: u64) {
        for k in kills {
            let label = k.cgroup.clone().unwrap_or_else(|| UNKNOWN.into());
            let labels = self.oom.len() - usize::from(self.oom.contains_key(OTHER));
            if !self.oom.contains_key(&label) && labels >= OOM_CGROUPS {
                let oldest = self
                    .oom
                    .iter()
                    .filter(|(l, _)| l.as_str() != OTHER)
                    .min_by_key(|(_, c)| c.last_ns)
                    .map(|(l, _)| l.clone());
                if let Some(c) = oldest.and_then(|l| self.oom.remove(&l)) {
                    self.oom.entry(OTHER.into()).or_default().kills += c.kills;
                }
            }
            let c = self.oom.entry(label).or_default();
            c.kills += 1;
            c.last_ns = now;
        }
    }

    /// After `snap` took a sample listing `listed`: scores the cgroups,
    /// ages out the removed ones (dropping them from `snap`) and picks the
    /// top N. `exists` tells whether a cgroup's directory is still there.
    pub fn update(
        &mut self,
        snap: &mut Snapshot,
        listed: &[CgroupSample],
        exists: impl Fn(u64, &str) -> Option<bool>,
    ) {
        let now = snap.elapsed_ns;
        let dt = self.last_ns.map_or(0, |l| now.saturating_sub(l));
        self.last_ns = Some(now);
        let decay = 0.5f64.powf(dt as f64 / HALF_LIFE.as_nanos() as f64);
        let seen: BTreeSet<u64> = listed
            .iter()
            .filter(|c| c.books.is_some())
            .map(|c| c.id)
            .collect();
        let mut gone = Vec::new();
        for (&id, c) in &snap.cgroups {
            let a = self.activity.entry(id).or_default();
            let ev = c.counts.events();
            a.score = a.score * decay + ev.saturating_sub(a.events) as f64;
            a.events = ev;
            if seen.contains(&id) {
                a.gone_since = None;
                a.checked = Some(now);
            } else if a.gone_since.is_none()
                && a.checked
                    .is_none_or(|t| now.saturating_sub(t) >= ns(RECHECK))
            {
                a.checked = Some(now);
                let there = match &c.path {
                    Some(p) => exists(id, p),
                    None => Some(c.live > 0),
                };
                if there == Some(false) {
                    a.gone_since = Some(now);
                }
            }
            if a.gone_since
                .is_some_and(|t| now.saturating_sub(t) >= ns(LINGER))
            {
                gone.push(id);
            }
        }
        for id in gone {
            snap.cgroups.remove(&id);
        }
        self.activity.retain(|id, _| snap.cgroups.contains_key(id));
        self.pick(snap);
    }

    /// The top N by activity, one per path.
    fn pick(&mut self, snap: &Snapshot) {
        self.exported.clear();
        if self.top == 0 {
            return;
        }
        let act = |id: &u64| self.activity.get(id).cloned().unwrap_or_default();
        let name = |id: &u64| snap.cgroups[id].name(*id);
        let present: BTreeSet<String> = snap
            .cgroups
            .keys()
            .filter(|id| act(id).gone_since.is_none())
            .map(name)
            .collect();
        let mut ids: Vec<u64> = snap
            .cgroups
            .keys()
            .filter(|id| act(id).gone_since.is_none() || !present.contains(&name(id)))
            .copied()
            .collect();
        ids.sort_by(|a, b| {
            let (x, y) = (act(a), act(b));
            y.score
                .total_cmp(&x.score)
                .then(y.events.cmp(&x.events))
                .then(a.cmp(b))
        });
        let mut names = BTreeSet::new();
        self.exported = ids
            .into_iter()
            .filter(|id| names.insert(name(id)))
            .take(self.top)
            .collect();
    }
}

/// The per-cgroup families: vmscope's counts, then the kernel's books.
pub(super) fn render(w: &mut Writer, state: &State) {
    oom_kills(w, state);
    let rows: Vec<(String, &CgroupState)> = state
        .cgroups
        .exported
        .iter()
        .filter_map(|id| {
            Some((
                state.now.cgroups.get(id)?.name(*id),
                state.now.cgroups.get(id)?,
            ))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    counts(w, state, &rows);
    info(w, &rows);
    books(w, &rows);
}

fn info(w: &mut Writer, rows: &[(String, &CgroupState)]) {
    let series = rows
        .iter()
        .filter_map(|(n, c)| {
            let id = c.identity()?;
            let v = |f: &Option<String>| f.clone().unwrap_or_default();
            Some((
                vec![
                    ("cgroup", n.clone()),
                    ("unit", v(&id.unit)),
                    ("runtime", v(&id.runtime)),
                    ("container", v(&id.container)),
                    ("pod_uid", v(&id.pod_uid)),
                    ("qos", v(&id.qos)),
                    ("container_name", v(&id.name)),
                ],
                "1".to_string(),
            ))
        })
        .collect();
    w.write(&INFO, series);
}

fn oom_kills(w: &mut Writer, state: &State) {
    if !state.usable(probe::OOM_VICTIM) {
        return;
    }
    w.write(
        &OOM_KILLS,
        state
            .cgroups
            .oom
            .iter()
            .map(|(l, c)| (vec![("cgroup", l.clone())], c.kills.to_string()))
            .collect(),
    );
}

/// The per-process figures exported summed by cgroup: every one the
/// catalogue gives a cgroup family, counts first, then (after madvise's
/// calls) the times.
fn cgroup_fields(times: bool) -> Vec<&'static ProcField> {
    catalogue::PROC_FIELDS
        .iter()
        .filter(|f| f.cgroup.is_some() && (f.unit == "ns") == times)
        .collect()
}

/// Writes the per-cgroup family of each of `fields` whose probe is
/// attached: times (ns) in seconds, counts as they are.
fn summed(w: &mut Writer, state: &State, rows: &[(String, &CgroupState)], fields: &[&ProcField]) {
    for f in fields {
        let Some(family) = &f.cgroup else { continue };
        if !state.usable(f.probe) {
            continue;
        }
        let series = rows
            .iter()
            .map(|(n, c)| {
                let v = (f.get)(&c.counts);
                let v = if f.unit == "ns" {
                    secs(v)
                } else {
                    v.to_string()
                };
                (vec![("cgroup", n.clone())], v)
            })
            .collect();
        w.write(family, series);
    }
}

fn counts(w: &mut Writer, state: &State, rows: &[(String, &CgroupState)]) {
    summed(w, state, rows, &cgroup_fields(false));
    if state.usable(probe::MADVISE) {
        let calls = rows
            .iter()
            .flat_map(|(n, c)| {
                c.counts.madvise.named().map(move |(behavior, v)| {
                    (
                        vec![("cgroup", n.clone()), ("behavior", behavior.into())],
                        v.to_string(),
                    )
                })
            })
            .collect();
        w.write(&MADVISE_CALLS, calls);
    }
    summed(w, state, rows, &cgroup_fields(true));
    let mut stall: Series = Vec::new();
    for (n, c) in rows {
        for k in reclaim::STALLS {
            let v = k.ns.get(&c.counts);
            stall.push((
                vec![("cgroup", n.clone()), ("kind", k.kind.into())],
                secs(v),
            ));
        }
    }
    w.write(&RECLAIM_STALL, stall);
    if state.usable(probe::PAGE_CACHE_REMOVE) {
        let removed = rows
            .iter()
            .filter_map(|(n, c)| Some((n, c.page_cache_removed?)))
            .flat_map(|(n, r)| {
                [("evicted", r.evicted_pages), ("dropped", r.dropped_pages)].map(|(why, v)| {
                    (
                        vec![("cgroup", n.clone()), ("reason", why.into())],
                        v.to_string(),
                    )
                })
            })
            .collect();
        w.write(&PAGE_CACHE_REMOVED, removed);
    }
    w.write(
        &PROCESSES,
        rows.iter()
            .map(|(n, c)| (vec![("cgroup", n.clone())], c.live.to_string()))
            .collect(),
    );
}

/// The kernel's own books, as of the last interval in which one of the
/// cgroup's processes changed.
fn books(w: &mut Writer, rows: &[(String, &CgroupState)]) {
    let with = |f: &dyn Fn(&crate::model::cgroup::CgroupBooks) -> Option<String>| -> Series {
        rows.iter()
            .filter_map(|(n, c)| Some((vec![("cgroup", n.clone())], f(c.books.as_ref()?)?)))
            .collect()
    };
    w.write(&MEMORY_USAGE, with(&|b| Some(b.usage_bytes?.to_string())));
    w.write(&MEMORY_LIMIT, with(&|b| Some(b.limit_bytes?.to_string())));
    w.write(
        &UNDER_OOM,
        with(&|b| Some(b.events.get("under_oom")?.to_string())),
    );
    let mut events: Series = Vec::new();
    for (n, c) in rows {
        let Some(b) = &c.books else { continue };
        for (k, v) in b.events.iter().filter(|(k, _)| k.as_str() != "under_oom") {
            events.push((
                vec![("cgroup", n.clone()), ("event", k.clone())],
                v.to_string(),
            ));
        }
    }
    w.write(&MEMORY_EVENTS, events);
    let us = |v: u64| secs(v.saturating_mul(1000));
    w.write(&PSI_SOME, with(&|b| Some(us(b.psi?.some.total_us))));
    w.write(&PSI_FULL, with(&|b| Some(us(b.psi?.full?.total_us))));
    let mut zswap: Series = Vec::new();
    for (n, c) in rows {
        let Some(b) = &c.books else { continue };
        for (direction, key) in [
            ("out", "zswpout"),
            ("in", "zswpin"),
            ("written_back", "zswpwb"),
        ] {
            if let Some(v) = b.stat.get(key) {
                zswap.push((
                    vec![("cgroup", n.clone()), ("direction", direction.into())],
                    v.to_string(),
                ));
            }
        }
    }
    w.write(&ZSWAP_PAGES, zswap);
    w.write(
        &ZSWAP_BYTES,
        with(&|b| Some(b.stat.get("zswap")?.to_string())),
    );
    w.write(
        &ZSWAPPED_BYTES,
        with(&|b| Some(b.stat.get("zswapped")?.to_string())),
    );
    w.write(
        &PAGE_CACHE_REFAULTS,
        with(&|b| Some(b.stat.get("workingset_refault_file")?.to_string())),
    );
    let mut cache: Series = Vec::new();
    for (n, c) in rows {
        let Some(b) = &c.books else { continue };
        for (state, v2, v1) in [
            ("cached", "file", "cache"),
            ("dirty", "file_dirty", "dirty"),
            ("writeback", "file_writeback", "writeback"),
        ] {
            if let Some(v) = b.stat.get(v2).or_else(|| b.stat.get(v1)) {
                cache.push((
                    vec![("cgroup", n.clone()), ("state", state.into())],
                    v.to_string(),
                ));
            }
        }
    }
    w.write(&PAGE_CACHE_BYTES, cache);
    thp(w, rows);
}

/// Huge pages by kind, and the THP events v2 counts per cgroup.
fn thp(w: &mut Writer, rows: &[(String, &CgroupState)]) {
    let (mut bytes, mut events): (Series, Series) = (Vec::new(), Vec::new());
    for (n, c) in rows {
        let Some(b) = &c.books else { continue };
        for (kind, v2, v1) in [
            ("anon", "anon_thp", Some("rss_huge")),
            ("file", "file_thp", None),
            ("shmem", "shmem_thp", None),
        ] {
            let v = b.stat.get(v2).or_else(|| b.stat.get(v1?));
            if let Some(v) = v {
                bytes.push((
                    vec![("cgroup", n.clone()), ("kind", kind.into())],
                    v.to_string(),
                ));
            }
        }
        for (k, v) in &b.stat {
            let Some(event) = k.strip_prefix("thp_") else {
                continue;
            };
            events.push((
                vec![("cgroup", n.clone()), ("event", event.to_string())],
                v.to_string(),
            ));
        }
    }
    w.write(&THP_BYTES, bytes);
    w.write(&THP_EVENTS, events);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        model::{cgroup::CgroupBooks, process::ProcSample, sample::Sample},
        serve::export::{Format, render as render_text},
    };

    fn proc(pid: u32, cgroup: u64, faults: u64) -> ProcSample {
        let mut p = ProcSample {
            pid,
            comm: "w".into(),
            cgroup,
            ..Default::default()
        };
        p.faults.user[0] = faults;
        p
    }

    fn listed(id: u64) -> CgroupSample {
        CgroupSample {
            id,
            path: Some(format!("/g{id}")),
            books: Some(CgroupBooks {
                usage_bytes: Some(4096 * id),
                limit_bytes: (id == 1).then_some(1 << 20),
                events: [("oom_kill".to_string(), id)].into(),
                ..Default::default()
            }),
            container_name: None,
            page_cache_removed: None,
        }
    }

    fn sample(secs: u64, procs: Vec<ProcSample>, exited: Vec<u32>) -> Sample {
        let cgroups = procs
            .iter()
            .map(|p| p.cgroup)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(listed)
            .collect();
        Sample {
            elapsed_ns: secs * 1_000_000_000,
            procs,
            exited,
            cgroups,
            ..Default::default()
        }
    }

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
    }

    /// Three cgroups, N = 2: the busiest now are exported; one that drops
    /// out and comes back continues from its cumulative count; a removed
    /// one lingers, then is forgotten.
    #[test]
    fn the_top_n_change_but_no_series_goes_backwards_and_removed_ones_age_out() {
        let mut state = State {
            fault_source: Some(crate::model::probes::FaultSource::Tracepoint),
            ..Default::default()
        };
        state.cgroups.top = 2;
        let removed = std::cell::RefCell::new(BTreeSet::new());
        let step = |state: &mut State, s: Sample| {
            state.now.apply(&s);
            let gone = removed.borrow().clone();
            state.cgroups.update(&mut state.now, &s.cgroups, |id, _| {
                Some(!gone.contains(&id))
            });
            render_text(state, Format::Prometheus, 0)
        };
        let faults = |t: &str, id: u64| {
            value(
                t,
                &format!("vmscope_cgroup_page_faults_total{{cgroup=\"/g{id}\"}}"),
            )
        };
        // g1 and g2 busy; g3 a little.
        let t = step(
            &mut state,
            sample(
                0,
                vec![proc(1, 1, 500), proc(2, 2, 400), proc(3, 3, 10)],
                vec![],
            ),
        );
        assert_eq!(
            (faults(&t, 1), faults(&t, 2), faults(&t, 3)),
            (Some(500.0), Some(400.0), None)
        );
        assert_eq!(
            value(&t, "vmscope_cgroup_memory_limit_bytes{cgroup=\"/g1\"}"),
            Some(1048576.0)
        );
        assert!(
            !t.contains("vmscope_cgroup_memory_limit_bytes{cgroup=\"/g2\"}"),
            "{t}"
        );
        // Minutes later g3 is the busy one; g2 idle drops out.
        let t = step(
            &mut state,
            sample(300, vec![proc(3, 3, 5000), proc(1, 1, 600)], vec![]),
        );
        assert_eq!((faults(&t, 3), faults(&t, 2)), (Some(5000.0), None));
        // g2 comes back: from its cumulative 400, not from 0.
        let t = step(&mut state, sample(600, vec![proc(2, 2, 100_000)], vec![]));
        assert_eq!(faults(&t, 2), Some(100_000.0));
        // g2's process ends and g2 is removed: it stays for LINGER, then goes.
        removed.borrow_mut().insert(2);
        step(&mut state, sample(601, vec![], vec![2]));
        let t = step(&mut state, sample(612, vec![], vec![]));
        assert_eq!(faults(&t, 2), Some(100_000.0), "lingers");
        let late = 612 + LINGER.as_secs();
        let t = step(&mut state, sample(late, vec![proc(1, 1, 700)], vec![]));
        assert_eq!(faults(&t, 2), None, "aged out:\n{t}");
        assert!(!state.now.cgroups.contains_key(&2));
        assert!(state.now.cgroups.contains_key(&3), "idle but there: kept");
    }

    #[test]
    fn oom_kills_by_cgroup_are_bounded_and_their_sum_never_shrinks() {
        let mut book = CgroupBook::default();
        let kill = |cg: Option<&str>| OomKill {
            cgroup: cg.map(str::to_string),
            ..Default::default()
        };
        book.count_kills(&[kill(Some("/a")), kill(None), kill(Some("/a"))], 1);
        assert_eq!(book.oom["/a"].kills, 2);
        assert_eq!(book.oom[UNKNOWN].kills, 1);
        for i in 0..200u64 {
            book.count_kills(&[kill(Some(&format!("/c{i}")))], 10 + i);
        }
        assert_eq!(book.oom.len(), OOM_CGROUPS + 1);
        let sum: u64 = book.oom.values().map(|c| c.kills).sum();
        assert_eq!(sum, 203);
        assert!(book.oom.contains_key("/c199"));
        assert!(!book.oom.contains_key("/a"), "the oldest folded into other");
    }
}
