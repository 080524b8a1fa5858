//! A recording as tables, one per level: the rows `export --parquet`
//! writes. Pure: from a [`Recording`] to [`FlatTable`]s.

use serde_json::{Map, Value};
use vmscope_common::madvise::{GROUP_NAMES, GROUPS};

use crate::{
    export::flat::{FlatTable, Scalar, cells, flatten},
    model::{
        ProcAvailability,
        cgroup::{CgroupBooks, CgroupTotal},
        hist::upper_bound_ns,
        oom::OomKill,
        probes::{FaultSource, names},
        process::{MadviseByBehavior, ProcSample},
        recording::Recording,
        sample::Sample,
    },
};

/// The tables of one recording, in the order they are written, and what
/// is left of the document (its header and summaries) once they are out.
pub struct RecordingTables {
    pub tables: Vec<(&'static str, FlatTable)>,
    pub meta: Value,
}

/// The keys of the document that become tables (the rest is `meta`).
const TABLE_KEYS: [&str; 5] = ["processes", "cgroups", "oom_kills", "series", "samples"];

/// Lists every per-process counter's name, and reads them from a sample.
macro_rules! counter_cells {
    ($(
        $(#[$sample_doc:meta])*
        $name:ident: $avail:tt $(, $tag:ident)* { $(#[$total_doc:meta])* }
    ),* $(,)?) => {
        /// The per-process counters' names, in their declared order.
        const COUNTERS: &[&str] = &[$(stringify!($name)),*];

        /// A sample's per-process counters as cells.
        fn counter_values(p: &ProcSample) -> Vec<(String, Scalar)> {
            vec![$((stringify!($name).to_string(), Scalar::UInt(p.$name))),*]
        }
    };
}

vmscope_common::proc_counters!(counter_cells);

pub fn tables(rec: &Recording) -> anyhow::Result<RecordingTables> {
    let (hists, buckets) = histograms(rec);
    let samples = samples(rec)?;
    let mut tables = vec![
        ("samples", samples.rows),
        ("series", series(rec)),
        ("processes", processes(rec)?),
        ("cgroups", cgroups(rec)?),
        ("oom_kills", oom_kills(rec)?),
        ("histograms", hists),
        ("histogram_buckets", buckets),
    ];
    tables.extend([
        ("sample_processes", samples.procs),
        ("sample_cgroups", samples.cgroups),
        ("sample_histograms", samples.hists),
    ]);
    let mut meta = serde_json::to_value(rec)?;
    if let Some(m) = meta.as_object_mut() {
        for k in TABLE_KEYS {
            m.remove(k);
        }
    }
    Ok(RecordingTables { tables, meta })
}

/// `NAME_GROUP` for each madvise behaviour group.
fn madvise_names(prefix: &str) -> Vec<String> {
    GROUP_NAMES
        .iter()
        .map(|g| format!("{prefix}_{g}"))
        .collect()
}

/// A process row with every field set, for the columns' kinds.
fn process_template(rec: &Recording) -> anyhow::Result<Vec<(String, Scalar)>> {
    let p = ProcSample {
        pid: 1,
        comm: "-".into(),
        cgroup: 1,
        madvise: MadviseByBehavior::from_groups([1; GROUPS]),
        ..Default::default()
    };
    let t = p.total(
        FaultSource::Tracepoint,
        &ProcAvailability::only(&[names::ACCOUNT]),
    );
    let mut c = cells(&serde_json::to_value(t)?);
    c.extend(COUNTERS.iter().map(|n| (n.to_string(), Scalar::UInt(0))));
    // The classes a perf-sourced recording lacks are still columns.
    for side in ["user", "kernel"] {
        for class in &rec.header.fault_classes {
            c.push((format!("faults_{side}_{class}"), Scalar::UInt(0)));
        }
    }
    Ok(c)
}

fn processes(rec: &Recording) -> anyhow::Result<FlatTable> {
    let mut t = FlatTable::new();
    t.declare(&process_template(rec)?);
    for p in &rec.processes {
        t.push(cells(&serde_json::to_value(p)?));
    }
    let madvise = madvise_names("madvise");
    t.zero_fill(&madvise, |n| madvise.iter().any(|m| m == n));
    Ok(t)
}

/// A cgroup's row: its id and path, its counts as a process row has them
/// (less `pid`, `comm` and `cgroup`, which are 0, its path and its id),
/// its books at the first and last sample, and its workload.
fn cgroup_row(c: &CgroupTotal) -> anyhow::Result<Value> {
    let Value::Object(mut all) = serde_json::to_value(c)? else {
        anyhow::bail!("a cgroup is not an object");
    };
    let mut row = Map::new();
    for k in ["id", "path"] {
        row.insert(k.into(), all.remove(k).unwrap_or(Value::Null));
    }
    if let Some(Value::Object(totals)) = all.remove("totals") {
        row.extend(
            totals
                .into_iter()
                .filter(|(k, _)| !matches!(k.as_str(), "pid" | "comm" | "cgroup")),
        );
    }
    row.extend(all);
    Ok(Value::Object(row))
}

fn cgroups(rec: &Recording) -> anyhow::Result<FlatTable> {
    let books = CgroupBooks {
        usage_bytes: Some(1),
        limit_bytes: Some(1),
        ..Default::default()
    };
    let template = CgroupTotal {
        id: 1,
        path: Some("/".into()),
        totals: ProcSample::default().total(FaultSource::Tracepoint, &ProcAvailability::default()),
        books_first: Some(books.clone()),
        books_last: Some(books),
        page_cache_removed: Some(Default::default()),
        workload: None,
    };
    let mut t = FlatTable::new();
    t.declare(&cells(&cgroup_row(&template)?));
    let counts: Vec<_> = process_template(rec)?
        .into_iter()
        .filter(|(n, _)| !matches!(n.as_str(), "pid" | "comm" | "cgroup"))
        .collect();
    t.declare(&counts);
    for c in &rec.cgroups {
        t.push(cells(&cgroup_row(c)?));
    }
    let madvise = madvise_names("madvise");
    t.zero_fill(&madvise, |n| madvise.iter().any(|m| m == n));
    Ok(t)
}

/// Adds `elapsed_s` after `elapsed_ns` and `time` (a UTC timestamp) after
/// the RFC 3339 `timestamp`.
fn timed(cells: Vec<(String, Scalar)>) -> Vec<(String, Scalar)> {
    let mut out = Vec::with_capacity(cells.len() + 2);
    for (name, cell) in cells {
        let extra = match (name.as_str(), &cell) {
            ("elapsed_ns", Scalar::UInt(ns)) => {
                Some(("elapsed_s", Scalar::Float(*ns as f64 / 1e9)))
            }
            ("timestamp", Scalar::Text(s)) => Some(("time", time_of(s))),
            ("elapsed_ns", _) => Some(("elapsed_s", Scalar::Null)),
            ("timestamp", _) => Some(("time", Scalar::Null)),
            _ => None,
        };
        out.push((name, cell));
        if let Some((n, c)) = extra {
            out.push((n.to_string(), c));
        }
    }
    out
}

/// An RFC 3339 time as nanoseconds since the epoch; null when unreadable
/// (the text stays in `timestamp`).
fn time_of(s: &str) -> Scalar {
    humantime::parse_rfc3339(s)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .map_or(Scalar::Null, Scalar::Time)
}

fn oom_kills(rec: &Recording) -> anyhow::Result<FlatTable> {
    let template = OomKill {
        timestamp: "1970-01-01T00:00:00Z".into(),
        pid: Some(1),
        comm: Some("-".into()),
        uid: Some(1),
        total_vm_bytes: Some(1),
        rss_anon_bytes: Some(1),
        rss_file_bytes: Some(1),
        rss_shmem_bytes: Some(1),
        pgtables_bytes: Some(1),
        oom_score_adj: Some(-1),
        cgroup: Some("/".into()),
        trigger_cgroup: Some("/".into()),
        constraint: Some("-".into()),
        limit_cgroup: Some("/".into()),
        limit_source: Some("-".into()),
        limit_note: Some("-".into()),
        ..Default::default()
    };
    let mut t = FlatTable::new();
    t.declare(&timed(cells(&serde_json::to_value(template)?)));
    for k in &rec.oom_kills {
        t.push(timed(cells(&serde_json::to_value(k)?)));
    }
    Ok(t)
}

/// The run's latency histograms: one row each (count, sum, percentiles),
/// and one row per non-empty bucket.
fn histograms(rec: &Recording) -> (FlatTable, FlatTable) {
    let (mut rows, mut buckets) = (FlatTable::new(), FlatTable::new());
    let text = |s: &str| Scalar::Text(s.to_string());
    let opt = |v: Option<u64>| v.map_or(Scalar::Null, Scalar::UInt);
    rows.declare(&[
        ("name".into(), text("")),
        ("count".into(), Scalar::UInt(0)),
        ("sum_ns".into(), Scalar::UInt(0)),
        ("p50_ns".into(), Scalar::UInt(0)),
        ("p90_ns".into(), Scalar::UInt(0)),
        ("p99_ns".into(), Scalar::UInt(0)),
        ("max_ns".into(), Scalar::UInt(0)),
    ]);
    buckets.declare(&[
        ("name".into(), text("")),
        ("le_ns".into(), Scalar::UInt(0)),
        ("count".into(), Scalar::UInt(0)),
    ]);
    for (name, s) in &rec.totals.vm.histograms {
        rows.push(vec![
            ("name".into(), text(name)),
            ("count".into(), Scalar::UInt(s.count)),
            ("sum_ns".into(), Scalar::UInt(s.sum_ns)),
            ("p50_ns".into(), opt(s.p50_ns)),
            ("p90_ns".into(), opt(s.p90_ns)),
            ("p99_ns".into(), opt(s.p99_ns)),
            ("max_ns".into(), opt(s.max_ns)),
        ]);
        for b in &s.buckets {
            buckets.push(vec![
                ("name".into(), text(name)),
                ("le_ns".into(), Scalar::UInt(b.le_ns)),
                ("count".into(), Scalar::UInt(b.count)),
            ]);
        }
    }
    (rows, buckets)
}

/// What happened in each interval: one row per interval, one column per
/// metric of `series` (null when unknown).
fn series(rec: &Recording) -> FlatTable {
    let s = &rec.series;
    let mut t = FlatTable::new();
    let mut template = vec![
        ("interval".to_string(), Scalar::UInt(0)),
        ("end_ns".to_string(), Scalar::UInt(0)),
        ("end_s".to_string(), Scalar::Float(0.0)),
        ("duration_ns".to_string(), Scalar::UInt(0)),
    ];
    template.extend(s.metrics.keys().map(|k| (k.clone(), Scalar::UInt(0))));
    t.declare(&template);
    for (i, (&end, &duration)) in s.end_ns.iter().zip(&s.duration_ns).enumerate() {
        let mut row = vec![
            ("interval".to_string(), Scalar::UInt(i as u64)),
            ("end_ns".to_string(), Scalar::UInt(end)),
            ("end_s".to_string(), Scalar::Float(end as f64 / 1e9)),
            ("duration_ns".to_string(), Scalar::UInt(duration)),
        ];
        for (k, col) in &s.metrics {
            let v = col.get(i).copied().flatten();
            row.push((k.clone(), v.map_or(Scalar::Null, Scalar::UInt)));
        }
        t.push(row);
    }
    t
}

/// The tables made of the raw samples.
struct SampleTables {
    rows: FlatTable,
    procs: FlatTable,
    cgroups: FlatTable,
    hists: FlatTable,
}

/// A sample as a row: its fault counters named by class, its madvise
/// counts by behaviour, without the lists that have tables of their own.
fn sample_row(s: &Sample, classes: &[String]) -> anyhow::Result<Value> {
    let mut v = serde_json::to_value(s)?;
    let Some(m) = v.as_object_mut() else {
        anyhow::bail!("a sample is not an object");
    };
    for k in ["procs", "hists", "cgroups"] {
        m.remove(k);
    }
    let mut faults = Map::new();
    for (side, counts) in [("user", &s.faults.user), ("kernel", &s.faults.kernel)] {
        let by: Map<String, Value> = classes
            .iter()
            .cloned()
            .zip(counts.iter().map(|n| Value::from(*n)))
            .collect();
        faults.insert(side.into(), Value::Object(by));
    }
    faults.insert("unclassified".into(), s.faults.unclassified.into());
    faults.insert("gup".into(), s.faults.gup.into());
    m.insert("faults".into(), Value::Object(faults));
    let madvise: Map<String, Value> = s
        .madvise
        .iter()
        .map(|c| {
            let counts =
                serde_json::json!({"calls": c.calls, "bytes": c.bytes, "errors": c.errors});
            (c.behavior.clone(), counts)
        })
        .collect();
    m.insert("madvise".into(), Value::Object(madvise));
    Ok(v)
}

/// One changed process of a sample, every counter a value (the JSON
/// leaves out those at 0); `faults` is the sum of its fault counters.
fn sample_process(
    lead: &[(String, Scalar)],
    p: &ProcSample,
    classes: &[String],
) -> Vec<(String, Scalar)> {
    let mut row = lead.to_vec();
    row.push(("pid".into(), Scalar::UInt(p.pid.into())));
    row.push(("comm".into(), Scalar::Text(p.comm.clone())));
    let cgroup = if p.cgroup == 0 {
        Scalar::Null
    } else {
        Scalar::UInt(p.cgroup)
    };
    row.push(("cgroup".into(), cgroup));
    row.push(("faults".into(), Scalar::UInt(p.faults.total())));
    for (side, counts) in [("user", &p.faults.user), ("kernel", &p.faults.kernel)] {
        for (class, n) in classes.iter().zip(counts) {
            row.push((format!("faults_{side}_{class}"), Scalar::UInt(*n)));
        }
    }
    row.push((
        "faults_unclassified".into(),
        Scalar::UInt(p.faults.unclassified),
    ));
    row.push(("faults_gup".into(), Scalar::UInt(p.faults.gup)));
    for (g, n) in p.madvise.named() {
        row.push((format!("madvise_{g}"), Scalar::UInt(n)));
    }
    row.extend(counter_values(p));
    row
}

fn samples(rec: &Recording) -> anyhow::Result<SampleTables> {
    let classes = &rec.header.fault_classes;
    let mut out = SampleTables {
        rows: FlatTable::new(),
        procs: FlatTable::new(),
        cgroups: FlatTable::new(),
        hists: FlatTable::new(),
    };
    let lead = |i: usize, s: &Sample| {
        vec![
            ("sample".to_string(), Scalar::UInt(i as u64)),
            ("elapsed_ns".to_string(), Scalar::UInt(s.elapsed_ns)),
        ]
    };
    let template = Sample {
        timestamp: "1970-01-01T00:00:00Z".into(),
        ..Default::default()
    };
    let mut first = lead(0, &template);
    first.extend(cells(&sample_row(&template, classes)?));
    out.rows.declare(&timed(first));
    out.procs.declare(&sample_process(
        &lead(0, &template),
        &ProcSample::default(),
        classes,
    ));
    out.procs.declare(&[("cgroup".into(), Scalar::UInt(0))]);
    out.cgroups.declare(&[
        ("sample".into(), Scalar::UInt(0)),
        ("elapsed_ns".into(), Scalar::UInt(0)),
        ("id".into(), Scalar::UInt(0)),
        ("path".into(), Scalar::Text(String::new())),
    ]);
    out.hists.declare(&[
        ("sample".into(), Scalar::UInt(0)),
        ("elapsed_ns".into(), Scalar::UInt(0)),
        ("name".into(), Scalar::Text(String::new())),
        ("sum_ns".into(), Scalar::UInt(0)),
        ("bucket".into(), Scalar::UInt(0)),
        ("le_ns".into(), Scalar::UInt(0)),
        ("count".into(), Scalar::UInt(0)),
    ]);
    for (i, s) in rec.samples.iter().enumerate() {
        let mut row = lead(i, s);
        row.extend(cells(&sample_row(s, classes)?));
        out.rows.push(timed(row));
        for p in &s.procs {
            out.procs.push(sample_process(&lead(i, s), p, classes));
        }
        for c in &s.cgroups {
            let mut row = lead(i, s);
            row.push(("id".into(), Scalar::UInt(c.id)));
            row.push((
                "path".into(),
                c.path.clone().map_or(Scalar::Null, Scalar::Text),
            ));
            if let Some(b) = &c.books {
                flatten("books", &serde_json::to_value(b)?, &mut row);
            }
            out.cgroups.push(row);
        }
        for h in &s.hists {
            push_hist(&mut out.hists, lead(i, s), h);
        }
    }
    out.rows.zero_fill(&["oom_kill_records_lost".into()], |n| {
        n == "oom_kill_records_lost" || n.starts_with("madvise_")
    });
    Ok(out)
}

/// One row per bucket of a sample's histogram (one with null buckets
/// when it has none).
fn push_hist(t: &mut FlatTable, lead: Vec<(String, Scalar)>, h: &crate::model::hist::HistSample) {
    let mut head = lead;
    head.push(("name".into(), Scalar::Text(h.name.clone())));
    head.push(("sum_ns".into(), Scalar::UInt(h.sum_ns)));
    if h.buckets.is_empty() {
        t.push(head);
        return;
    }
    for &[b, n] in &h.buckets {
        let mut row = head.clone();
        row.push(("bucket".into(), Scalar::UInt(b)));
        row.push(("le_ns".into(), Scalar::UInt(upper_bound_ns(b))));
        row.push(("count".into(), Scalar::UInt(n)));
        t.push(row);
    }
}
