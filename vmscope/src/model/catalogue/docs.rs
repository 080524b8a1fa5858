//! `docs/metrics.md`, written from the catalogue's tables and the
//! exporter's own families; and the list of every family `serve` exports.

use super::*;

/// `docs/metrics.md`: the reference, written from these tables and the
/// exporter's `served` families (a test keeps the checked-in page current).
pub fn reference(served: &[Family]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Metrics reference\n\nGenerated from `vmscope/src/model/catalogue/` (one file per metric family) and the exporter's \
         family tables in `vmscope/src/serve/` (a test fails when this page is stale; `VMSCOPE_BLESS=1 cargo test -p vmscope --lib catalogue` rewrites it). A metric \
         whose probe is not attached is unavailable, with the reason, in every view: never 0. \
         `doctor` lists the probes and their fallbacks.\n"
    );
    counters_md(&mut o);
    histograms_md(&mut o);
    processes_md(&mut o);
    rates_md(&mut o);
    runs_md(&mut o);
    vmstat_md(&mut o);
    families_md(&mut o, served);
    o
}

/// A name as code in the reference (`none` for figures that need no probe).
fn code(s: &str) -> String {
    match s {
        "" => String::new(),
        probe::ALWAYS => "none".to_string(),
        s => format!("`{s}`"),
    }
}

fn counters_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "## Counters\n\nSystem-wide (scope-filtered when a recording follows a process tree). \
         JSON: `samples[].counters` and `totals.vm.counters`, by key.\n\n\
         | key | probe | unit | Prometheus | meaning |\n|---|---|---|---|---|"
    );
    for c in COUNTERS {
        let prom = match c.export {
            Export::No => String::new(),
            Export::Plain(m, _) => code(m),
            Export::In(f, v) => {
                let label = COUNTER_FAMILIES
                    .iter()
                    .find(|x| x.0 == f)
                    .map_or("", |x| x.1);
                format!("`{f}{{{label}=\"{v}\"}}`")
            }
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {prom} | {} |",
            c.key,
            code(c.probe),
            c.unit,
            c.help
        );
    }
}

fn histograms_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## Latency histograms\n\nlog2 buckets in ns; exported in seconds with the bucket \
         bounds as `le`. JSON: `samples[].hists` and `totals.vm.histograms`, by name.\n\n\
         | histogram | probe |\n|---|---|"
    );
    for (_, name, p) in HISTS {
        let _ = writeln!(o, "| `{name}` | `{p}` |");
    }
    let _ = writeln!(
        o,
        "| `fault_minor_anon`, `fault_minor_file`, `fault_major_anon`, `fault_major_file` | `{}` |\n\
         | `madvise_<behaviour>` | `{}` |\n\n| Prometheus family | label | histograms | meaning |\n|---|---|---|---|",
        probe::FAULT_TIMING,
        probe::MADVISE
    );
    for f in HIST_FAMILIES {
        let which = match (f.exact, f.prefix) {
            (true, p) => format!("`{p}`"),
            (false, "") => "the others".to_string(),
            (false, p) => format!("`{p}*`"),
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {which} | {} |",
            f.metric,
            code(f.label),
            f.help
        );
    }
}

fn processes_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## Per process\n\nJSON: `samples[].procs[]` and `processes[]`; `serve --per-process N` \
         exports the N processes with the most faults, labelled `pid` and `comm`.\n\n\
         | figure | probe | unit | Prometheus | `top` column | meaning |\n|---|---|---|---|---|---|"
    );
    for f in PROC_FIELDS {
        let unit = if f.unit == "ns" {
            "ns (seconds in Prometheus)"
        } else {
            f.unit
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {unit} | {} | {} | {} |",
            f.key,
            code(f.probe),
            code(f.metric.unwrap_or("")),
            f.column.map_or("", |c| c.key),
            f.help
        );
    }
}

fn rates_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## `top` rates\n\n| row | unit | needs | meaning |\n|---|---|---|---|"
    );
    for r in RATES {
        let needs: Vec<String> = r
            .needs
            .iter()
            .map(|n| match n {
                Need::Probe(p) => format!("`{p}`"),
                Need::FaultTracepoints => "the page-fault tracepoints".to_string(),
            })
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            r.label,
            r.unit,
            needs.join(", "),
            r.help
        );
    }
}

fn runs_md(o: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## Run figures (`bench`, `compare`, `report`)\n\nIn compare's order. The workload's own \
         figures (`<workload>/<name>`) follow the headline; each latency histogram's p50, p90 and \
         p99 (`<histogram>.p50`, ns, lower is better) come after the \"before\" rows; \
         `madvise_<behaviour>_calls` rows appear for any other behaviour used.\n\n\
         | figure | unit | better | place | meaning |\n|---|---|---|---|---|"
    );
    for r in RUN_ROWS {
        let better = match r.better {
            Better::Lower => "lower",
            Better::Higher => "higher",
            Better::Neither => "",
        };
        let place = match r.place {
            Place::Headline => "headline",
            Place::Before => "before quantiles",
            Place::After => "after quantiles",
            Place::Rest => "last",
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {better} | {place} | {} |",
            r.name, r.unit, r.help
        );
    }
}

fn vmstat_md(o: &mut String) {
    use std::fmt::Write as _;
    let list = |keys: &[&str]| {
        keys.iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        o,
        "\n## /proc/vmstat\n\nRecorded when the running kernel has them (absent keys are listed \
         as unavailable); counters are exported as `vmscope_vmstat_events_total{{counter}}`, \
         growth since vmscope started.\n\n- Recorded: {}\n- Gauges (last value, not a delta): {}\n\
         - A column in a recording's series: {}",
        list(procstat::VMSTAT_KEYS),
        list(procstat::VMSTAT_GAUGES),
        list(procstat::VMSTAT_COLUMNS)
    );
}

/// Every family `serve` exports: the catalogue's, then the `served` ones,
/// by scope, then name.
pub fn families(served: &[Family]) -> Vec<Family> {
    let mut all: Vec<Family> = Vec::new();
    for c in COUNTERS {
        if let Export::Plain(name, help) = c.export {
            all.push(Family::counter(Scope::System, name, &[], help));
        }
    }
    for (name, label, help) in COUNTER_FAMILIES {
        let labels = std::slice::from_ref(label);
        all.push(Family::counter(Scope::System, name, labels, help));
    }
    for f in HIST_FAMILIES {
        all.push(Family {
            name: f.metric,
            kind: FamilyType::Histogram,
            scope: Scope::System,
            labels: if f.label.is_empty() {
                &[]
            } else {
                std::slice::from_ref(&f.label)
            },
            help: f.help,
        });
    }
    for f in PROC_FIELDS {
        if let Some(name) = f.metric {
            all.push(Family::counter(
                Scope::Process,
                name,
                &["pid", "comm"],
                f.help,
            ));
        }
        all.extend(f.cgroup);
    }
    all.extend_from_slice(served);
    all.sort_by(|a, b| a.scope.cmp(&b.scope).then(a.name.cmp(b.name)));
    all.dedup_by(|a, b| a.name == b.name);
    all
}

fn families_md(o: &mut String, served: &[Family]) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "\n## Prometheus families\n\nEvery family `vmscope serve` exports, by scope. A family whose \
         probe is not attached is left out (`vmscope_probe_available` says 0 for the probe); \
         per-process families only with `--per-process N`, per-cgroup ones (OOM kills by \
         cgroup aside) only with `--per-cgroup N`, `vmscope_flight_*` only with `--on-oom`. In OpenMetrics a counter's `# TYPE` and \
         `# HELP` lines name it without `_total`.\n\n\
         | family | type | labels | scope | meaning |\n|---|---|---|---|---|"
    );
    for f in families(served) {
        let labels: Vec<String> = f.labels.iter().map(|l| format!("`{l}`")).collect();
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {} | {} |",
            f.name,
            f.kind.name(),
            labels.join(", "),
            f.scope.name(),
            f.help
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_metrics_page_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
        let want = reference(&crate::serve::export::served_families());
        if std::env::var_os("VMSCOPE_BLESS").is_some() {
            std::fs::write(path, &want).expect("writing docs/metrics.md");
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/metrics.md is stale: VMSCOPE_BLESS=1 cargo test -p vmscope --lib catalogue"
        );
    }

    #[test]
    fn no_family_is_declared_twice() {
        let served = crate::serve::export::served_families();
        let mut names: Vec<&str> = served.iter().map(|f| f.name).collect();
        names.extend(families(&[]).iter().map(|f| f.name));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
