//! What `vmscope/dist/` ships for a fleet (the Grafana dashboard, the
//! Prometheus rules and their unit tests) asks only for what `serve`
//! exports, under the names its Prometheus text gives them: a counter with
//! its `_total`, a histogram only as `_bucket`, `_sum` or `_count`, a gauge
//! as it is. A family renamed or dropped here fails these tests rather
//! than leaving a panel empty or an alert silent.

use std::collections::BTreeSet;

use serde_json::Value;

use super::served_families;
use crate::model::catalogue::{FamilyType, docs::families};

const DASHBOARD: &str = include_str!("../../../dist/grafana-fleet.json");
const RULES: &str = include_str!("../../../dist/prometheus-rules.yaml");
const RULE_TESTS: &str = include_str!("../../../dist/prometheus-rules.test.yaml");

/// Every name a sample line of `serve`'s Prometheus text can carry.
fn exposition_names() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in families(&served_families()) {
        match f.kind {
            FamilyType::Histogram => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    out.insert(format!("{}{suffix}", f.name));
                }
            }
            FamilyType::Counter | FamilyType::Gauge => {
                out.insert(f.name.to_owned());
            }
        }
    }
    out
}

/// Every family name, as the metrics reference lists them.
fn family_names() -> BTreeSet<String> {
    families(&served_families())
        .iter()
        .map(|f| f.name.to_owned())
        .collect()
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The whole names in `text` that start with `prefix`: `vmscope_` for
/// exported metrics, `vmscope:` for recording rules.
fn names(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let whole = !rest[..at].chars().next_back().is_some_and(is_name_char);
        let tail = &rest[at..];
        let end = tail.find(|c| !is_name_char(c)).unwrap_or(tail.len());
        // A bare prefix ("vmscope: fleet...", a title) names nothing.
        if whole && end > prefix.len() {
            out.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    out
}

fn dashboard() -> Value {
    serde_json::from_str(DASHBOARD).expect("grafana-fleet.json is JSON")
}

/// Every panel, rows' nested ones too, rows themselves left out.
fn panels(d: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            if p["type"] == "row" {
                walk(&p["panels"], out);
            } else {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    out
}

/// The PromQL of a panel's targets.
fn exprs(panel: &Value) -> Vec<&str> {
    panel["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["expr"].as_str())
        .collect()
}

/// Every string in `v`, keys aside.
fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The recording rules `prometheus-rules.yaml` defines.
fn recorded() -> BTreeSet<String> {
    RULES
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record:"))
        .map(|n| n.trim().to_owned())
        .collect()
}

fn unknown(used: &BTreeSet<String>, known: &BTreeSet<String>) -> Vec<String> {
    used.difference(known).cloned().collect()
}

#[test]
fn dashboard_queries_name_only_exported_series() {
    let d = dashboard();
    let exported = exposition_names();
    let mut used = BTreeSet::new();
    for p in panels(&d) {
        for e in exprs(p) {
            used.extend(names(e, "vmscope_"));
        }
    }
    let variables = d["templating"]["list"].to_string();
    used.extend(names(&variables, "vmscope_"));
    assert!(used.len() >= 10, "too few metrics in the queries: {used:?}");
    let bad = unknown(&used, &exported);
    assert!(
        bad.is_empty(),
        "the dashboard queries names `serve` does not export (a counter needs `_total`, \
         a histogram `_bucket`/`_sum`/`_count`): {bad:?}"
    );

    // Titles and descriptions may name a histogram's family too.
    let mut all = Vec::new();
    strings(&d, &mut all);
    let mentioned: BTreeSet<String> = all.iter().flat_map(|s| names(s, "vmscope_")).collect();
    let known: BTreeSet<String> = exported.union(&family_names()).cloned().collect();
    let bad = unknown(&mentioned, &known);
    assert!(
        bad.is_empty(),
        "the dashboard names unknown metrics: {bad:?}"
    );
}

#[test]
fn rules_and_their_tests_name_only_exported_series() {
    let exported = exposition_names();
    for (file, text) in [
        ("prometheus-rules.yaml", RULES),
        ("prometheus-rules.test.yaml", RULE_TESTS),
    ] {
        let used = names(text, "vmscope_");
        assert!(used.len() >= 5, "{file}: too few metrics: {used:?}");
        let bad = unknown(&used, &exported);
        assert!(
            bad.is_empty(),
            "{file} names series `serve` does not export (a counter needs `_total`, a \
             histogram `_bucket`/`_sum`/`_count`): {bad:?}"
        );
    }
}

#[test]
fn recording_rules_used_anywhere_are_defined() {
    let defined = recorded();
    assert!(
        defined.contains("vmscope:page_faults:rate5m"),
        "no page-fault rate recorded: {defined:?}"
    );
    let mut used = names(DASHBOARD, "vmscope:");
    assert!(!used.is_empty(), "the dashboard uses no recording rule");
    used.extend(names(RULES, "vmscope:"));
    used.extend(names(RULE_TESTS, "vmscope:"));
    let bad = unknown(&used, &defined);
    assert!(
        bad.is_empty(),
        "recording rules used but not defined in prometheus-rules.yaml: {bad:?}"
    );
}

#[test]
fn every_dashboard_panel_queries_the_chosen_data_source() {
    let d = dashboard();
    assert_eq!(d["schemaVersion"], 39, "schemaVersion");
    let vars = d["templating"]["list"]
        .as_array()
        .expect("template variables");
    let var = |name: &str| {
        vars.iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no `{name}` variable"))
    };
    assert_eq!(var("datasource")["query"], "prometheus");
    assert_eq!(
        var("instance")["definition"],
        "label_values(vmscope_build_info, instance)"
    );
    let all = panels(&d);
    assert!(all.len() >= 15, "only {} panels", all.len());
    for p in all {
        let title = p["title"].as_str().unwrap_or("(untitled)");
        let targets = exprs(p);
        assert!(!targets.is_empty(), "panel {title:?} has no query");
        assert!(
            targets.iter().all(|e| !e.trim().is_empty()),
            "panel {title:?} has an empty query"
        );
        for t in p["targets"].as_array().into_iter().flatten() {
            assert_eq!(
                t["datasource"]["uid"], "${datasource}",
                "panel {title:?} queries another data source"
            );
        }
        for e in targets {
            assert!(
                !e.contains("vmscope_") || e.contains("$instance"),
                "panel {title:?} ignores the node selection: {e}"
            );
        }
    }
}

#[test]
fn dashboard_covers_every_topic() {
    let d = dashboard();
    let all: Vec<Vec<&str>> = panels(&d).into_iter().map(exprs).collect();
    let covered = |pred: &dyn Fn(&str) -> bool| all.iter().any(|p| p.iter().any(|e| pred(e)));
    let uses = |names: &'static [&'static str]| move |e: &str| names.iter().any(|n| e.contains(n));
    type Topic = (&'static str, Box<dyn Fn(&str) -> bool>);
    let topics: [Topic; 10] = [
        (
            "page faults",
            Box::new(uses(&["vmscope_page_faults_total"])),
        ),
        (
            "major faults",
            Box::new(uses(&["vmscope_major_faults_total"])),
        ),
        (
            "fault latency quantiles",
            Box::new(|e: &str| {
                e.contains("histogram_quantile(")
                    && e.contains("vmscope_page_fault_duration_seconds_bucket")
            }),
        ),
        (
            "direct-reclaim stall",
            Box::new(uses(&[
                "vmscope_reclaim_duration_seconds_sum",
                "vmscope:direct_reclaim_stall_seconds:rate5m",
            ])),
        ),
        (
            "PSI memory",
            Box::new(uses(&["vmscope_psi_memory_some_ratio"])),
        ),
        (
            "swap by tier",
            Box::new(uses(&["vmscope_swap_tier_pages_total"])),
        ),
        (
            "OOM kills by workload",
            Box::new(|e: &str| {
                e.contains("vmscope_cgroup_oom_kills_total")
                    && e.contains("group_left")
                    && e.contains("vmscope_cgroup_info")
            }),
        ),
        (
            "top cgroups by faults",
            Box::new(|e: &str| {
                e.contains("topk(") && e.contains("vmscope_cgroup_page_faults_total")
            }),
        ),
        (
            "working set",
            Box::new(uses(&[
                "vmscope_working_set_bytes",
                "vmscope_cgroup_working_set_bytes",
            ])),
        ),
        (
            "exporter health",
            Box::new(uses(&["vmscope_exporter_body_age_seconds"])),
        ),
    ];
    for (topic, pred) in &topics {
        assert!(covered(pred.as_ref()), "no panel shows {topic}");
    }
    assert!(
        covered(&uses(&["vmscope_oom_kills_total"])),
        "no panel shows OOM kills in total"
    );
}

/// The lines of alert `name`'s rule, up to the next rule.
fn alert(name: &str) -> Vec<&'static str> {
    let head = format!("- alert: {name}");
    let mut lines = RULES.lines().skip_while(|l| l.trim() != head);
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no alert {name} in prometheus-rules.yaml"));
    std::iter::once(first)
        .chain(lines.take_while(|l| {
            let l = l.trim_start();
            !l.starts_with("- alert:") && !l.starts_with("- record:") && !l.starts_with("- name:")
        }))
        .collect()
}

#[test]
fn the_four_alerts_watch_what_they_are_named_for() {
    let oom = alert("VmscopeOomKill").join("\n");
    for want in [
        "vmscope:oom_kills:increase5m",
        "group_left (container, container_name, pod_uid, unit)",
        "vmscope_cgroup_info",
    ] {
        assert!(oom.contains(want), "VmscopeOomKill lacks {want}:\n{oom}");
    }
    let stall = alert("VmscopeDirectReclaimStall").join("\n");
    assert!(
        stall.contains("vmscope:direct_reclaim_stall_seconds:rate5m >")
            && stall.contains("for: 10m"),
        "VmscopeDirectReclaimStall:\n{stall}"
    );
    let storm = alert("VmscopeSwapInStorm").join("\n");
    assert!(
        storm.contains("vmscope:swap_in_pages:rate5m") && storm.contains("for:"),
        "VmscopeSwapInStorm:\n{storm}"
    );
    let stale = alert("VmscopeExporterStale").join("\n");
    assert!(
        stale.contains("vmscope_exporter_body_age_seconds >") && stale.contains("up"),
        "VmscopeExporterStale:\n{stale}"
    );
    // The recorded series the alerts stand on come from the right families.
    let rules = RULES;
    for (record, family) in [
        (
            "vmscope:direct_reclaim_stall_seconds:rate5m",
            "vmscope_reclaim_duration_seconds_sum{kind=\"direct\"}",
        ),
        (
            "vmscope:swap_in_pages:rate5m",
            "vmscope_swap_tier_pages_total{direction=\"in\"}",
        ),
        ("vmscope:oom_kills:increase5m", "vmscope_oom_kills_total"),
    ] {
        let at = rules
            .find(&format!("- record: {record}"))
            .unwrap_or_else(|| panic!("{record} not recorded"));
        let body = &rules[at..];
        let end = body[1..].find("- record:").map_or(body.len(), |e| e + 1);
        assert!(
            body[..end].contains(family),
            "{record} is not computed from {family}"
        );
    }
}

#[test]
fn names_are_found_whole() {
    let got = names(
        "rate(vmscope_a_total[5m]) + x_vmscope_b + vmscope:c:rate5m{l=\"vmscope_d\"}",
        "vmscope_",
    );
    let want: BTreeSet<String> = ["vmscope_a_total", "vmscope_d"].map(String::from).into();
    assert_eq!(got, want);
    let got = names("vmscope: a title; vmscope:c:rate5m / vmscope_e", "vmscope:");
    assert_eq!(got, ["vmscope:c:rate5m".to_owned()].into());
}
