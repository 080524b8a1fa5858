//! Prometheus / OpenMetrics text for `vmscope serve`. Pure: cumulative
//! state in, text out, so names, labels and bucket bounds are pinned by
//! unit tests.
//!
//! Conventions: a `vmscope_` prefix, base units (seconds, bytes, pages),
//! `_total` on counters, latency histograms in seconds with the log2 bucket
//! bounds as `le`, PSI as `_ratio` and `_seconds_total`. A metric whose
//! probe is not attached is left out and `vmscope_probe_available` says 0
//! for it: absent, never a silent zero.

use crate::model::process::ProcSample;
use std::{collections::BTreeMap, fmt::Write as _};

use vmscope_common::{FAULT_CLASSES, fault_class_name};

use crate::{
    model::{
        catalogue::{self, Export, Family, Scope},
        hist::{self, HistSample},
        probes::{FaultSource, ProbeStatus},
        sample::{MadviseCounts, Sample},
        snapshot::Snapshot,
    },
    procstat::{self, Psi, Vmstat},
};

/// Text format to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0 text.
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// OpenMetrics when the `Accept` header asks for it.
    pub fn from_accept(accept: Option<&str>) -> Self {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }
}

/// Latency buckets exported: `le` = 2^b ns for b in this range; smaller
/// durations fall in the first, larger ones only in `+Inf`.
pub const FIRST_BUCKET: u32 = 8; // 256 ns
pub const LAST_BUCKET: u32 = 36; // ~68.7 s

const fn system(name: &'static str, labels: &'static [&'static str], help: &'static str) -> Family {
    Family::counter(Scope::System, name, labels, help)
}

const fn system_gauge(
    name: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> Family {
    Family::gauge(Scope::System, name, labels, help)
}

pub const BUILD_INFO: Family =
    system_gauge("vmscope_build_info", &["version"], "vmscope's version.");
pub const PROBE_AVAILABLE: Family = system_gauge(
    "vmscope_probe_available",
    &["probe"],
    "1 if the probe is attached (or waiting with nothing to count), 0 if not.",
);
pub const PAGE_FAULTS: Family = system(
    "vmscope_page_faults_total",
    &["mode", "class"],
    "Page faults by mode and x86 error-code class; mode=\"gup\" counts those taken \
     through get_user_pages (populate, mlock, remote access), which have no class.",
);
pub const MADVISE_CALLS: Family = system(
    "vmscope_madvise_calls_total",
    &["behavior"],
    "madvise calls by behaviour.",
);
pub const MADVISE_BYTES: Family = system(
    "vmscope_madvise_bytes_total",
    &["behavior"],
    "Bytes advised by successful madvise calls.",
);
pub const MADVISE_ERRORS: Family = system(
    "vmscope_madvise_errors_total",
    &["behavior"],
    "madvise calls that failed.",
);
pub const SWAP_IN: Family = system(
    "vmscope_swap_in_pages_total",
    &[],
    "Pages read from a swap device (system-wide, /proc/vmstat pswpin); loads from zswap \
     are in vmscope_swap_tier_pages_total.",
);
pub const SWAP_OUT: Family = system(
    "vmscope_swap_out_pages_total",
    &[],
    "Pages written to a swap device (system-wide, /proc/vmstat pswpout); pages zswap \
     keeps compressed in RAM are not, see vmscope_swap_tier_pages_total.",
);
pub const VMSTAT_EVENTS: Family = system(
    "vmscope_vmstat_events_total",
    &["counter"],
    "Counters from /proc/vmstat, by name.",
);
pub const PSI_SOME_RATIO: Family = system_gauge(
    "vmscope_psi_memory_some_ratio",
    &[],
    "Share of the last 10 s some task stalled on memory.",
);
pub const PSI_SOME_SECONDS: Family = system(
    "vmscope_psi_memory_some_seconds_total",
    &[],
    "Time some task stalled on memory.",
);
pub const PSI_FULL_RATIO: Family = system_gauge(
    "vmscope_psi_memory_full_ratio",
    &[],
    "Share of the last 10 s all tasks stalled on memory.",
);
pub const PSI_FULL_SECONDS: Family = system(
    "vmscope_psi_memory_full_seconds_total",
    &[],
    "Time all tasks stalled on memory.",
);

pub const WORKING_SET: Family = system_gauge(
    "vmscope_working_set_bytes",
    &["window"],
    "Bytes the measured processes touched within the window (--working-set; \
     summed over processes, so shared pages count in each). Absent until the first \
     window ends.",
);
pub const IDLE_BYTES: Family = system_gauge(
    "vmscope_idle_bytes",
    &["idle"],
    "The measured processes' resident bytes by how long ago they were last touched, \
     in the last window (--working-set): idle=\"lt_1s\", \"lt_10s\"... up to the \
     window, then \"older\".",
);
pub const PROCESS_WORKING_SET: Family = Family::gauge(
    Scope::Process,
    "vmscope_process_working_set_bytes",
    &["pid", "comm", "window"],
    "Bytes the process touched within the window (--working-set), for the --per-process \
     processes with the largest working sets.",
);
pub const WORKING_SET_SCAN: Family = system(
    "vmscope_working_set_scan_cpu_seconds_total",
    &[],
    "CPU time the working-set scan has taken (clearing and reading referenced bits; \
     --working-set): its cost, which grows with the memory the measured processes map.",
);
pub const CGROUP_WORKING_SET: Family = Family::gauge(
    Scope::Cgroup,
    "vmscope_cgroup_working_set_bytes",
    &["cgroup", "window"],
    "Bytes the cgroup's measured processes touched within the window \
     (--working-set), by memory cgroup path.",
);

/// The system-wide families written here beside the catalogue's.
pub const FAMILIES: &[Family] = &[
    BUILD_INFO,
    PROBE_AVAILABLE,
    PAGE_FAULTS,
    MADVISE_CALLS,
    MADVISE_BYTES,
    MADVISE_ERRORS,
    SWAP_IN,
    SWAP_OUT,
    VMSTAT_EVENTS,
    PSI_SOME_RATIO,
    PSI_SOME_SECONDS,
    PSI_FULL_RATIO,
    PSI_FULL_SECONDS,
    WORKING_SET,
    IDLE_BYTES,
    CGROUP_WORKING_SET,
    PROCESS_WORKING_SET,
    WORKING_SET_SCAN,
];

const fn exporter(
    name: &'static str,
    kind: catalogue::FamilyType,
    labels: &'static [&'static str],
    help: &'static str,
) -> Family {
    Family {
        name,
        kind,
        scope: Scope::Exporter,
        labels,
        help,
    }
}

/// The exporter's own figures, written by `serve` after the sample's
/// families (they change between refreshes).
pub const BODY_AGE: Family = exporter(
    "vmscope_exporter_body_age_seconds",
    catalogue::FamilyType::Gauge,
    &[],
    "Seconds since the served metrics were sampled (grows while refreshes fail).",
);
pub const REFRESH_FAILURES: Family = exporter(
    "vmscope_exporter_refresh_failures_total",
    catalogue::FamilyType::Counter,
    &[],
    "Refreshes of the metrics that failed (the last good ones were served meanwhile).",
);
pub const CONNECTIONS_DROPPED: Family = exporter(
    "vmscope_exporter_connections_dropped_total",
    catalogue::FamilyType::Counter,
    &["reason"],
    "Connections the exporter closed itself, by reason.",
);
/// The flight recorder's (`--on-oom`).
pub const FLIGHT_WRITTEN: Family = exporter(
    "vmscope_flight_recordings_written_total",
    catalogue::FamilyType::Counter,
    &[],
    "OOM recordings written to the --on-oom directory (an episode's final rewrite counts again).",
);
pub const FLIGHT_FAILED: Family = exporter(
    "vmscope_flight_recordings_failed_total",
    catalogue::FamilyType::Counter,
    &[],
    "OOM recordings that could not be written (each logged).",
);
pub const FLIGHT_REMOVED: Family = exporter(
    "vmscope_flight_recordings_removed_total",
    catalogue::FamilyType::Counter,
    &[],
    "Old OOM recordings removed to keep within --on-oom-keep and --on-oom-max-bytes.",
);
pub const FLIGHT_SAMPLES_DROPPED: Family = exporter(
    "vmscope_flight_samples_dropped_total",
    catalogue::FamilyType::Counter,
    &[],
    "Samples the flight recorder dropped because its writer was behind.",
);

pub const EXPORTER_FAMILIES: &[Family] = &[
    BODY_AGE,
    REFRESH_FAILURES,
    CONNECTIONS_DROPPED,
    FLIGHT_WRITTEN,
    FLIGHT_FAILED,
    FLIGHT_REMOVED,
    FLIGHT_SAMPLES_DROPPED,
];

/// Every family declared outside the catalogue: here, in [`cgroups`], and
/// the exporter's own.
pub fn served_families() -> Vec<Family> {
    [
        FAMILIES,
        tiers::FAMILIES,
        cgroups::FAMILIES,
        EXPORTER_FAMILIES,
    ]
    .concat()
}

/// Everything vmscope knows, cumulative since it started: the samples
/// replayed into a snapshot, and the first /proc/vmstat and PSI readings.
#[derive(Clone, Debug, Default)]
pub struct State {
    pub probes: Vec<ProbeStatus>,
    pub fault_source: Option<FaultSource>,
    /// Ended processes' series go (Prometheus marks them stale); a later
    /// process under the pid starts its own from zero.
    pub now: Snapshot,
    /// The first /proc/vmstat and PSI readings: those counters are exported
    /// as growth since vmscope started, like the eBPF ones.
    pub vmstat_base: Option<Vmstat>,
    pub psi_base: Option<Psi>,
    /// The per-cgroup series' ranking and ageing, and OOM kills by cgroup.
    pub cgroups: cgroups::CgroupBook,
    /// The working-set window (`--working-set`); the last window that
    /// finished is `now.wss`.
    pub wss_edges_ns: Option<Vec<u64>>,
    /// The scan's CPU time over every window so far.
    pub wss_scan_cpu_ns: u64,
}

impl State {
    pub fn apply(&mut self, s: Sample) {
        if self.vmstat_base.is_none() {
            self.vmstat_base = Some(s.vmstat.clone());
            self.psi_base = s.psi;
        }
        self.wss_scan_cpu_ns += s.working_set.iter().map(|w| w.scan_cpu_ns).sum::<u64>();
        self.now.apply(&s);
        self.cgroups.count_kills(&s.oom_kills, s.elapsed_ns);
        let mount = self.cgroups.mount.clone();
        self.cgroups.update(&mut self.now, &s.cgroups, |id, path| {
            cgroups::dir_exists(mount.as_deref()?, id, path)
        });
    }

    /// A /proc/vmstat counter's growth since the first reading.
    fn vmstat_growth(&self, key: &str) -> Option<u64> {
        let now = self.now.vmstat.get(key)?;
        let base = self
            .vmstat_base
            .as_ref()
            .and_then(|b| b.get(key))
            .unwrap_or(0);
        Some(now.saturating_sub(base))
    }

    fn usable(&self, probe: &str) -> bool {
        crate::model::probes::probe_usable(&self.probes, probe)
    }
}

/// Escapes a label value.
fn esc(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// Escapes HELP text. Both formats escape backslash and line feed; in
/// OpenMetrics HELP is an escaped string like a label value, where a bare
/// double quote is not allowed, while Prometheus 0.0.4 knows no `\"` in
/// HELP (a reader would keep the backslash), so quotes stay as they are.
fn help_text(format: Format, help: &str) -> String {
    let s = help.replace('\\', r"\\").replace('\n', r"\n");
    match format {
        Format::OpenMetrics => s.replace('"', "\\\""),
        Format::Prometheus => s,
    }
}

/// A family's `# HELP` and `# TYPE` lines, named as `format` names it (an
/// OpenMetrics counter without its `_total`).
pub fn write_head(out: &mut String, format: Format, f: &Family) {
    let name = match (format, f.kind) {
        (Format::OpenMetrics, catalogue::FamilyType::Counter) => {
            f.name.strip_suffix("_total").unwrap_or(f.name)
        }
        _ => f.name,
    };
    let help = help_text(format, f.help);
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {}", f.kind.name());
}

fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Seconds, as the shortest exact-enough text.
fn secs(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    format!("{s}")
}

struct Writer {
    out: String,
    format: Format,
}

type Series<'a> = Vec<(Vec<(&'a str, String)>, String)>;

/// Histograms of one family: (labels, histogram) each.
type HistSeries<'a> = Vec<(Vec<(&'a str, String)>, &'a HistSample)>;

impl Writer {
    /// A family's lines, none when it has no series.
    fn write(&mut self, f: &Family, series: Series<'_>) {
        if series.is_empty() {
            return;
        }
        write_head(&mut self.out, self.format, f);
        for (ls, value) in series {
            let pairs: Vec<(&str, &str)> = ls.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let _ = writeln!(self.out, "{}{} {value}", f.name, labels(&pairs));
        }
    }

    /// A counter of the catalogue.
    fn counter(&mut self, name: &'static str, help: &'static str, series: Series<'_>) {
        self.write(&Family::counter(Scope::System, name, &[], help), series);
    }

    /// One histogram family; each entry is (labels, sample).
    fn histogram(
        &mut self,
        name: &'static str,
        help: &'static str,
        hists: Vec<(Vec<(&str, String)>, &HistSample)>,
    ) {
        if hists.is_empty() {
            return;
        }
        let head = Family {
            kind: catalogue::FamilyType::Histogram,
            ..Family::counter(Scope::System, name, &[], help)
        };
        write_head(&mut self.out, self.format, &head);
        for (ls, h) in hists {
            let dense = hist::dense(h);
            let total: u64 = dense.iter().sum();
            let base: Vec<(&str, &str)> = ls.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let mut cumulative = 0u64;
            for (b, n) in dense.iter().enumerate() {
                cumulative += n;
                let b = b as u32;
                if !(FIRST_BUCKET..=LAST_BUCKET).contains(&b) {
                    continue;
                }
                let le = secs(1u64 << b);
                let mut with_le = base.clone();
                with_le.push(("le", le.as_str()));
                let _ = writeln!(self.out, "{name}_bucket{} {cumulative}", labels(&with_le));
            }
            let mut inf = base.clone();
            inf.push(("le", "+Inf"));
            let _ = writeln!(self.out, "{name}_bucket{} {total}", labels(&inf));
            let _ = writeln!(self.out, "{name}_sum{} {}", labels(&base), secs(h.sum_ns));
            let _ = writeln!(self.out, "{name}_count{} {total}", labels(&base));
        }
    }
}

/// Renders the state. `per_process` bounds the per-process series to the
/// processes with the most faults (0: none).
pub fn render(state: &State, format: Format, per_process: usize) -> String {
    let mut w = Writer {
        out: String::new(),
        format,
    };
    w.write(
        &BUILD_INFO,
        vec![(
            vec![("version", env!("CARGO_PKG_VERSION").to_string())],
            "1".into(),
        )],
    );
    w.write(
        &PROBE_AVAILABLE,
        state
            .probes
            .iter()
            .map(|p| {
                (
                    vec![("probe", p.probe.clone())],
                    u8::from(p.usable()).to_string(),
                )
            })
            .collect(),
    );
    page_faults(&mut w, state);
    counters(&mut w, state);
    madvise(&mut w, state);
    vmstat(&mut w, state);
    psi(&mut w, state);
    tiers::render(&mut w, state);
    working_set(&mut w, state, per_process);
    histograms(&mut w, state);
    if per_process > 0 {
        per_process_series(&mut w, state, per_process);
    }
    cgroups::render(&mut w, state);
    if format == Format::OpenMetrics {
        w.out.push_str("# EOF\n");
    }
    w.out
}

/// Page faults by mode and class.
fn page_faults(w: &mut Writer, state: &State) {
    let mut faults: Series = Vec::new();
    match state.fault_source {
        Some(FaultSource::Tracepoint) => {
            for k in 0..FAULT_CLASSES {
                for (mode, v) in [
                    ("user", state.now.faults.user[k]),
                    ("kernel", state.now.faults.kernel[k]),
                ] {
                    faults.push((
                        vec![
                            ("mode", mode.to_string()),
                            ("class", fault_class_name(k).to_string()),
                        ],
                        v.to_string(),
                    ));
                }
            }
        }
        Some(FaultSource::PerfSoftware) => faults.push((
            vec![("mode", "all".into()), ("class", "unclassified".into())],
            state.now.faults.unclassified.to_string(),
        )),
        _ => {}
    }
    if state.fault_source.is_some() {
        // System-wide, from /proc/vmstat pgfault: no probe needed.
        faults.push((
            vec![("mode", "gup".into()), ("class", "unclassified".into())],
            state.now.faults.gup.to_string(),
        ));
    }
    w.write(&PAGE_FAULTS, faults);
}

/// The catalogue's counters: plain ones first, then the labelled families.
fn counters(w: &mut Writer, state: &State) {
    let mut labelled: BTreeMap<&str, Series> = BTreeMap::new();
    for c in catalogue::COUNTERS {
        let Some(&v) = state.now.counters.get(c.key) else {
            continue;
        };
        if !state.usable(c.probe) {
            continue;
        }
        match c.export {
            Export::Plain(metric, help) => w.counter(metric, help, vec![(vec![], v.to_string())]),
            Export::In(family, value) => {
                let label = catalogue::COUNTER_FAMILIES
                    .iter()
                    .find(|f| f.0 == family)
                    .map_or("kind", |f| f.1);
                labelled
                    .entry(family)
                    .or_default()
                    .push((vec![(label, value.to_string())], v.to_string()));
            }
            Export::No => {}
        }
    }
    for (metric, _, help) in catalogue::COUNTER_FAMILIES {
        if let Some(series) = labelled.remove(metric) {
            w.counter(metric, help, series);
        }
    }
}

/// madvise per behaviour.
fn madvise(w: &mut Writer, state: &State) {
    if state.usable(catalogue::probe::MADVISE) {
        type Getter = fn(&MadviseCounts) -> u64;
        let parts: [(&Family, Getter); 3] = [
            (&MADVISE_CALLS, |m| m.calls),
            (&MADVISE_BYTES, |m| m.bytes),
            (&MADVISE_ERRORS, |m| m.errors),
        ];
        for (family, get) in parts {
            w.write(
                family,
                state
                    .now
                    .madvise
                    .iter()
                    .map(|m| (vec![("behavior", m.behavior.clone())], get(m).to_string()))
                    .collect(),
            );
        }
    }
}

/// /proc/vmstat: pswpin/pswpout, then every recorded counter.
fn vmstat(w: &mut Writer, state: &State) {
    for (key, family) in [("pswpin", &SWAP_IN), ("pswpout", &SWAP_OUT)] {
        if let Some(v) = state.vmstat_growth(key) {
            w.write(family, vec![(vec![], v.to_string())]);
        }
    }
    w.write(
        &VMSTAT_EVENTS,
        state
            .now
            .vmstat
            .0
            .iter()
            .filter(|(k, _)| !procstat::is_gauge(k))
            .filter_map(|(k, _)| {
                Some((
                    vec![("counter", k.clone())],
                    state.vmstat_growth(k)?.to_string(),
                ))
            })
            .collect(),
    );
}

/// PSI memory: ratios and stall time.
fn psi(w: &mut Writer, state: &State) {
    if let Some(p) = &state.now.psi {
        let ratio = |v: f64| format!("{}", v / 100.0);
        let base = state.psi_base.unwrap_or_default();
        let grown = |now: u64, then: u64| secs(now.saturating_sub(then) * 1000);
        w.write(&PSI_SOME_RATIO, vec![(vec![], ratio(p.some.avg10))]);
        w.write(
            &PSI_SOME_SECONDS,
            vec![(vec![], grown(p.some.total_us, base.some.total_us))],
        );
        if let Some(f) = &p.full {
            w.write(&PSI_FULL_RATIO, vec![(vec![], ratio(f.avg10))]);
            w.write(
                &PSI_FULL_SECONDS,
                vec![(
                    vec![],
                    grown(f.total_us, base.full.map_or(0, |b| b.total_us)),
                )],
            );
        }
    }
}

/// The last finished working-set window: nothing before the first (a
/// figure not yet measured is absent, not 0).
fn working_set(w: &mut Writer, state: &State, per_process: usize) {
    let (Some(edges), Some(ws)) = (&state.wss_edges_ns, &state.now.wss) else {
        return;
    };
    let window = edges.last().copied().unwrap_or_default();
    let label = crate::model::wss::window_label(window);
    w.write(
        &WORKING_SET_SCAN,
        vec![(vec![], secs(state.wss_scan_cpu_ns))],
    );
    let mut top: Vec<&crate::model::wss::WssProc> = ws.procs.iter().collect();
    top.sort_by(|a, b| {
        b.working_set_bytes
            .cmp(&a.working_set_bytes)
            .then(a.pid.cmp(&b.pid))
    });
    top.truncate(per_process);
    w.write(
        &PROCESS_WORKING_SET,
        top.iter()
            .map(|p| {
                (
                    vec![
                        ("pid", p.pid.to_string()),
                        ("comm", p.comm.clone()),
                        ("window", label.clone()),
                    ],
                    p.working_set_bytes.to_string(),
                )
            })
            .collect(),
    );
    w.write(
        &WORKING_SET,
        vec![(
            vec![("window", label.clone())],
            ws.total_bytes().to_string(),
        )],
    );
    w.write(
        &IDLE_BYTES,
        crate::model::wss::idle_bucket_names(edges, "lt_")
            .into_iter()
            .zip(ws.idle_ages())
            .map(|(n, b)| (vec![("idle", n)], b.to_string()))
            .collect(),
    );
    w.write(
        &CGROUP_WORKING_SET,
        ws.by_cgroup()
            .into_iter()
            .map(|(c, b)| {
                (
                    vec![("cgroup", c), ("window", label.clone())],
                    b.to_string(),
                )
            })
            .collect(),
    );
}

/// The latency histograms, by family: every one whose probe is attached,
/// empty until its first event (so that `rate()` and dashboards work from
/// the first scrape), but for madvise behaviours outside the groups
/// vmscope measures, which appear at their first call.
fn histograms(w: &mut Writer, state: &State) {
    let mut ids: Vec<(String, u32)> = (0..vmscope_common::hist::COUNT)
        .filter(|&id| state.usable(catalogue::hist_probe(id)))
        .map(|id| (catalogue::hist_name(id), id))
        .filter(|(name, id)| state.now.hists.contains_key(name) || expected(*id))
        .collect();
    ids.sort();
    let blanks: Vec<HistSample> = ids
        .iter()
        .filter(|(name, _)| !state.now.hists.contains_key(name))
        .map(|(name, _)| HistSample {
            name: name.clone(),
            ..HistSample::default()
        })
        .collect();
    let mut families: BTreeMap<&str, (&str, HistSeries)> = BTreeMap::new();
    for (name, _) in &ids {
        let h = state
            .now
            .hists
            .get(name)
            .or_else(|| blanks.iter().find(|b| b.name == *name));
        let Some(h) = h else { continue };
        let (family, value) = catalogue::hist_family(name);
        let ls = if family.label.is_empty() {
            vec![]
        } else {
            vec![(family.label, value.to_string())]
        };
        families
            .entry(family.metric)
            .or_insert((family.help, Vec::new()))
            .1
            .push((ls, h));
    }
    for (metric, (help, hs)) in families {
        w.histogram(metric, help, hs);
    }
}

/// Whether histogram `id` is exported before its first event: all but the
/// madvise behaviours outside the measured groups.
fn expected(id: u32) -> bool {
    use vmscope_common::{hist as slot, madvise};
    if !(slot::MADVISE_BASE..slot::FAULT_BASE).contains(&id) {
        return true;
    }
    madvise::slot_value(id - slot::MADVISE_BASE)
        .is_some_and(|b| madvise::group(u64::from(b)) != madvise::GROUPS - 1)
}

fn per_process_series(w: &mut Writer, state: &State, n: usize) {
    let mut top: Vec<&ProcSample> = state.now.procs.values().collect();
    top.sort_by(|a, b| {
        b.faults
            .total()
            .cmp(&a.faults.total())
            .then(a.pid.cmp(&b.pid))
    });
    top.truncate(n);
    let id = |p: &ProcSample| vec![("pid", p.pid.to_string()), ("comm", p.comm.clone())];
    for f in catalogue::PROC_FIELDS {
        let Some(metric) = f.metric else { continue };
        if !state.usable(f.probe) {
            continue;
        }
        let value = |p: &ProcSample| {
            let v = (f.get)(p);
            if f.unit == "ns" {
                secs(v)
            } else {
                v.to_string()
            }
        };
        w.counter(
            metric,
            f.help,
            top.iter().map(|p| (id(p), value(p))).collect(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(name: &str, attached: bool) -> ProbeStatus {
        ProbeStatus::tracepoint(name, attached)
    }

    fn state() -> State {
        let mut s = State {
            probes: vec![
                probe("exceptions:page_fault_user", true),
                probe("tlb:tlb_flush", true),
                probe("vmscan:mm_vmscan_memcg_reclaim_end", true),
                probe(crate::source::loader::MAJOR_FAULTS_PROBE, false),
            ],
            fault_source: Some(FaultSource::Tracepoint),
            ..Default::default()
        };
        s.now.faults.user[2] = 500;
        s.now.counters.insert("tlb_remote_send_ipi".into(), 7);
        s.now.counters.insert("major_faults".into(), 0);
        s.now.vmstat = Vmstat(
            [
                ("pswpout".to_string(), 42),
                ("nr_free_pages".to_string(), 9),
            ]
            .into(),
        );
        s.now.hists.insert(
            "reclaim_memcg".into(),
            HistSample {
                name: "reclaim_memcg".into(),
                sum_ns: 3_000,
                // bucket 5 (<32 ns, below the first exported bound) x1,
                // bucket 10 (512..1024 ns) x2, bucket 40 (beyond the last) x1
                buckets: vec![[5, 1], [10, 2], [40, 1]],
            },
        );
        s.now.procs.insert(
            9,
            ProcSample {
                pid: 9,
                comm: "we\"ird".into(),
                ..Default::default()
            },
        );
        s
    }

    #[test]
    fn names_labels_and_types_are_pinned() {
        let t = render(&state(), Format::Prometheus, 5);
        for line in [
            "# TYPE vmscope_build_info gauge",
            "vmscope_probe_available{probe=\"exceptions:page_fault_user\"} 1",
            "vmscope_probe_available{probe=\"perf:major-faults\"} 0",
            "# TYPE vmscope_page_faults_total counter",
            "vmscope_page_faults_total{mode=\"user\",class=\"write_not_present\"} 500",
            "vmscope_page_faults_total{mode=\"kernel\",class=\"read_not_present\"} 0",
            "vmscope_tlb_flushes_total{reason=\"remote_send_ipi\"} 7",
            "vmscope_swap_out_pages_total 42",
            "vmscope_vmstat_events_total{counter=\"pswpout\"} 42",
            "# TYPE vmscope_reclaim_duration_seconds histogram",
            "vmscope_process_page_faults_total{pid=\"9\",comm=\"we\\\"ird\"} 0",
        ] {
            assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
        }
        // Unavailable: left out (the availability gauge says 0), never 0.
        assert!(!t.contains("vmscope_major_faults_total"), "{t}");
        assert!(!t.contains("vmscope_process_major_faults_total"), "{t}");
        // Gauges from vmstat are not counters.
        assert!(!t.contains("nr_free_pages"), "{t}");
        assert!(!t.contains("# EOF"));
    }

    /// Before any event: every histogram whose probe is attached is there,
    /// at zero, with its buckets; one whose probe is not, is not.
    #[test]
    fn attached_histograms_are_exported_empty_before_their_first_event() {
        let mut st = state();
        st.now.hists.clear();
        st.probes.push(probe(catalogue::probe::MADVISE, true));
        let t = render(&st, Format::Prometheus, 0);
        for line in [
            "# TYPE vmscope_reclaim_duration_seconds histogram",
            "vmscope_reclaim_duration_seconds_bucket{kind=\"memcg\",le=\"+Inf\"} 0",
            "vmscope_reclaim_duration_seconds_count{kind=\"memcg\"} 0",
            "vmscope_reclaim_duration_seconds_sum{kind=\"memcg\"} 0",
            "vmscope_madvise_duration_seconds_bucket{behavior=\"free\",le=\"+Inf\"} 0",
            "vmscope_madvise_duration_seconds_count{behavior=\"dontneed\"} 0",
        ] {
            assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
        }
        let buckets = t
            .lines()
            .filter(|l| l.starts_with("vmscope_reclaim_duration_seconds_bucket{kind=\"memcg\""))
            .count();
        assert_eq!(buckets as u32, LAST_BUCKET - FIRST_BUCKET + 2, "{t}");
        // Not attached: absent. A behaviour outside the measured groups
        // waits for its first call.
        assert!(!t.contains("kind=\"direct\""), "{t}");
        assert!(!t.contains("vmscope_page_fault_duration_seconds"), "{t}");
        assert!(!t.contains("behavior=\"random\""), "{t}");
    }

    #[test]
    fn histogram_buckets_are_cumulative_log2_bounds_in_seconds() {
        let t = render(&state(), Format::Prometheus, 0);
        let bucket = |le: &str| {
            let prefix =
                format!("vmscope_reclaim_duration_seconds_bucket{{kind=\"memcg\",le=\"{le}\"}} ");
            t.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .unwrap_or_else(|| panic!("no bucket le={le} in\n{t}"))
                .to_string()
        };
        // 2^8 ns = 256 ns holds the 1 sample of bucket 5.
        assert_eq!(bucket("0.000000256"), "1");
        // 2^9 ns: still 1; 2^10 ns = 1.024 us: + the 2 of bucket 10.
        assert_eq!(bucket("0.000000512"), "1");
        assert_eq!(bucket("0.000001024"), "3");
        // 2^36 ns, the last bound: 3; the beyond-range sample only in +Inf.
        assert_eq!(bucket("68.719476736"), "3");
        assert_eq!(bucket("+Inf"), "4");
        assert!(t.contains("vmscope_reclaim_duration_seconds_sum{kind=\"memcg\"} 0.000003"));
        assert!(t.contains("vmscope_reclaim_duration_seconds_count{kind=\"memcg\"} 4"));
        let n = t
            .matches("vmscope_reclaim_duration_seconds_bucket{")
            .count() as u32;
        assert_eq!(n, LAST_BUCKET - FIRST_BUCKET + 2);
    }

    #[test]
    fn openmetrics_names_counter_families_without_total_and_ends_with_eof() {
        let t = render(&state(), Format::OpenMetrics, 0);
        assert!(t.contains("# TYPE vmscope_page_faults counter\n"), "{t}");
        assert!(t.contains("\nvmscope_page_faults_total{"), "{t}");
        assert!(t.ends_with("# EOF\n"));
        assert_eq!(
            Format::from_accept(Some("application/openmetrics-text;version=1.0.0")),
            Format::OpenMetrics
        );
        assert_eq!(Format::from_accept(Some("text/plain")), Format::Prometheus);
        assert_eq!(Format::from_accept(None), Format::Prometheus);
    }

    #[test]
    fn per_process_series_are_bounded_to_the_top_n() {
        let mut s = state();
        for pid in 100..200 {
            let mut p = ProcSample {
                pid,
                comm: "w".into(),
                ..Default::default()
            };
            p.faults.user[2] = u64::from(pid);
            s.now.procs.insert(pid, p);
        }
        let t = render(&s, Format::Prometheus, 3);
        let rows: Vec<&str> = t
            .lines()
            .filter(|l| l.starts_with("vmscope_process_page_faults_total{"))
            .collect();
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert!(rows[0].contains("pid=\"199\""), "{rows:?}");
        assert!(!render(&s, Format::Prometheus, 0).contains("vmscope_process_"));
    }
}

pub mod cgroups;
pub mod tiers;

#[cfg(test)]
mod dist_tests;
#[cfg(test)]
mod fixture_tests;
