//! What `vmscope/dist/` ships for a fleet, checked by the tools that will
//! load it: `promtool check rules` and `promtool test rules` on the
//! Prometheus rules, the dashboard's queries parsed by promtool as PromQL,
//! and a live `vmscope serve` scraped for every family the alerts stand on
//! that serve always exports.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    collections::BTreeSet,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::Duration,
};

use vmscope_tests::{
    root_or_skip, run_with_timeout,
    serve_fixture::{Serve, get_from},
};

const RULES: &str = "prometheus-rules.yaml";
const RULE_TESTS: &str = "prometheus-rules.test.yaml";
const DASHBOARD: &str = "grafana-fleet.json";

/// Families the alerts use that a live scrape may lack, and why: these are
/// not required in it.
const NOT_ALWAYS_EXPORTED: &[(&str, &str)] = &[
    (
        "vmscope_cgroup_oom_kills_total",
        "absent until the first OOM kill",
    ),
    (
        "vmscope_cgroup_info",
        "only with --per-cgroup N, and only for cgroups whose path follows a known layout",
    ),
];

/// Families the alerts use that serve exports whenever their probe is
/// attached (none: always), from the first scrape.
const ALWAYS_EXPORTED: &[(&str, Option<&str>)] = &[
    ("vmscope_build_info", None),
    ("vmscope_exporter_body_age_seconds", None),
    // From /proc/vmstat: the device tier is there on every kernel.
    ("vmscope_swap_tier_pages_total", None),
    ("vmscope_oom_kills_total", Some("oom:mark_victim")),
    (
        "vmscope_reclaim_duration_seconds_sum",
        Some("vmscan:mm_vmscan_direct_reclaim_begin"),
    ),
];

fn dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../vmscope/dist")
}

fn promtool_or_skip(test: &str) -> bool {
    let found = Command::new("promtool")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    vmscope_tests::skip_unless(
        test,
        found,
        "promtool is not installed",
        "apt-get install prometheus",
    )
}

fn read(name: &str) -> String {
    let p = dist().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn promtool(args: &[&str], dir: &Path) -> Output {
    let mut c = Command::new("promtool");
    c.args(args).current_dir(dir);
    run_with_timeout(c, Duration::from_secs(60))
}

#[test]
fn promtool_checks_the_shipped_rules() {
    if !promtool_or_skip("promtool_checks_the_shipped_rules") {
        return;
    }
    let o = promtool(&["check", "rules", RULES], &dist());
    vmscope_tests::ok(&o, "promtool check rules");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn the_shipped_rules_pass_their_unit_tests() {
    if !promtool_or_skip("the_shipped_rules_pass_their_unit_tests") {
        return;
    }
    // From another directory: the test file names the rules beside it.
    let o = promtool(
        &["test", "rules", dist().join(RULE_TESTS).to_str().unwrap()],
        &std::env::temp_dir(),
    );
    vmscope_tests::ok(&o, "promtool test rules");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn the_dashboard_queries_are_promql_prometheus_accepts() {
    if !promtool_or_skip("the_dashboard_queries_are_promql_prometheus_accepts") {
        return;
    }
    let d: serde_json::Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    let exprs = vmscope_tests::dashboard_exprs(&d);
    assert!(exprs.len() >= 15, "only {} queries", exprs.len());
    // Each query, Grafana's variables filled in, as a recording rule:
    // promtool parses every expression of a rules file.
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let q = e
            .replace("$__rate_interval", "1m")
            .replace("$__range", "1h")
            .replace("$instance", ".+");
        assert!(!q.contains('$'), "an unknown Grafana variable in {e:?}");
        rules.push_str(&format!(
            "      - record: dashboard:query{i}\n        expr: |\n"
        ));
        for l in q.lines() {
            rules.push_str(&format!("          {l}\n"));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dashboard.yaml"), rules).unwrap();
    let o = promtool(&["check", "rules", "dashboard.yaml"], dir.path());
    vmscope_tests::ok(&o, "promtool check rules on the dashboard's queries");
}

/// The rules of `text`, each (`record` or `alert` name, its expression).
fn rules(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut in_expr = false;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(name) = t
            .strip_prefix("- record:")
            .or_else(|| t.strip_prefix("- alert:"))
        {
            out.push((name.trim().to_owned(), String::new()));
            in_expr = false;
        } else if let Some(e) = t.strip_prefix("expr:") {
            in_expr = true;
            out.last_mut().unwrap().1.push_str(e);
        } else if ["for:", "labels:", "annotations:", "- name:", "#"]
            .iter()
            .any(|k| t.starts_with(k))
        {
            in_expr = false;
        } else if in_expr {
            let rule = out.last_mut().unwrap();
            rule.1.push('\n');
            rule.1.push_str(t);
        }
    }
    out
}

/// The metric names in `expr` that start with `prefix`.
fn names(expr: &str, prefix: &str) -> BTreeSet<String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find(prefix) {
        let whole = !rest[..at].chars().next_back().is_some_and(is_name);
        let tail = &rest[at..];
        let end = tail.find(|c| !is_name(c)).unwrap_or(tail.len());
        // A bare prefix ("vmscope: fleet...", a title) names nothing.
        if whole && end > prefix.len() {
            out.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    out
}

/// The exported series the alerts read, through the recording rules they
/// use.
fn alert_families() -> BTreeSet<String> {
    let text = read(RULES);
    let all = rules(&text);
    let expr_of = |name: &str| {
        all.iter()
            .find(|(n, _)| n == name)
            .map(|(_, e)| e.clone())
            .unwrap_or_else(|| panic!("{name} is used but not defined in {RULES}"))
    };
    let mut todo: Vec<String> = all
        .iter()
        .filter(|(n, _)| n.starts_with("Vmscope"))
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(todo.len(), 4, "the alerts: {todo:?}");
    let (mut seen, mut out) = (BTreeSet::new(), BTreeSet::new());
    while let Some(rule) = todo.pop() {
        if !seen.insert(rule.clone()) {
            continue;
        }
        let e = expr_of(&rule);
        out.extend(names(&e, "vmscope_"));
        todo.extend(names(&e, "vmscope:"));
    }
    out
}

#[test]
fn a_live_scrape_has_every_always_exported_family_the_alerts_use() {
    const TEST: &str = "a_live_scrape_has_every_always_exported_family_the_alerts_use";
    // Every family the alerts use is either required here or excluded
    // with its reason, so a new one cannot slip past this test.
    let used = alert_families();
    let classified: BTreeSet<String> = ALWAYS_EXPORTED
        .iter()
        .map(|(n, _)| *n)
        .chain(NOT_ALWAYS_EXPORTED.iter().map(|(n, _)| *n))
        .map(String::from)
        .collect();
    assert_eq!(
        used, classified,
        "the families the alerts use, against those this test knows"
    );
    if !root_or_skip(TEST) {
        return;
    }

    // As the DaemonSet runs it, on a loopback port.
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "--per-cgroup", "20"]);
    let a = get_from(Ipv4Addr::LOCALHOST, serve.addr, "/metrics")
        .unwrap_or_else(|e| panic!("GET /metrics: {e}\n{}", serve.stderr()));
    assert_eq!(a.status, 200, "{}", a.body);
    let sampled: BTreeSet<&str> = a
        .body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let attached = |probe: &str| {
        a.body
            .lines()
            .any(|l| l == format!("vmscope_probe_available{{probe=\"{probe}\"}} 1"))
    };
    let mut missing = Vec::new();
    for (family, probe) in ALWAYS_EXPORTED {
        if let Some(p) = probe
            && !attached(p)
        {
            eprintln!("{TEST}: {family} not required: probe {p} is not attached here");
            continue;
        }
        if !sampled.contains(family) {
            missing.push(*family);
        }
    }
    assert!(
        missing.is_empty(),
        "the alerts use families a live scrape lacks: {missing:?}\n{}",
        a.body
    );
    for (family, why) in NOT_ALWAYS_EXPORTED {
        eprintln!("{TEST}: {family} not required ({why})");
    }
}

#[test]
fn rule_blocks_are_read_whole() {
    let text = "groups:\n  - name: g\n    rules:\n      - record: vmscope:a:rate5m\n        \
                expr: rate(vmscope_a_total[5m])\n      - alert: VmscopeX\n        expr: |\n          \
                vmscope:a:rate5m > 1\n          or vmscope_b\n        for: 5m\n        labels:\n          \
                severity: warning\n";
    let r = rules(text);
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[0].0, "vmscope:a:rate5m");
    assert_eq!(
        names(&r[0].1, "vmscope_"),
        ["vmscope_a_total".to_owned()].into()
    );
    assert_eq!(names(&r[1].1, "vmscope_"), ["vmscope_b".to_owned()].into());
    assert_eq!(
        names(&r[1].1, "vmscope:"),
        ["vmscope:a:rate5m".to_owned()].into()
    );
}
