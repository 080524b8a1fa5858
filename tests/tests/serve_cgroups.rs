//! `serve --per-cgroup N` scraped by a real Prometheus while memory
//! cgroups come and go: three cgroups, made one after another (two at a
//! time at most), each running a child that faults steadily for a few
//! seconds and reports its own rusage, each removed once its child has
//! ended. Against the children's books (`ru_minflt + ru_majflt`): each
//! cgroup's last exported page-fault count within 2 % (vmscope counts
//! what the kernel counts, charged to the cgroup the process is in), and
//! Prometheus's `increase()` over the run within 20 %: it cannot count what
//! came before a series' first scrape (a cgroup appears once one of its
//! processes has changed, so it starts with up to an interval or two of
//! the child's faults; and with 7 cgroups contending for 5 places here, a
//! new one may take a few seconds to rank in), and it extrapolates at both
//! ends (measured: -1 % to -12 % of a 20 s run). No per-cgroup counter
//! goes backwards (`resets()` = 0 over every series of every family), and
//! no scrape has more than N cgroups in a family.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    collections::BTreeSet,
    net::TcpStream,
    process::Child,
    time::{Duration, Instant},
};

use vmscope_tests::{
    pressure::{self, MemCgroup},
    root_or_skip,
    serve_fixture::{self, Prometheus, Serve},
    testchild,
};

const N: usize = 5;
const CGROUPS: usize = 3;
const CHURN_MS: u64 = 20_000;
const STAGGER: Duration = Duration::from_secs(8);

fn scrape(serve: &Serve) -> String {
    let s = TcpStream::connect(serve.addr).unwrap();
    let a = serve_fixture::get_over(s, "/metrics", Duration::from_secs(15)).unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    a.body
}

/// The distinct `cgroup` labels of `family` in a body.
fn labels(body: &str, family: &str) -> BTreeSet<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix(family)?.strip_prefix("{cgroup=\""))
        .filter_map(|r| r.split('"').next().map(str::to_string))
        .collect()
}

struct Running {
    cg: MemCgroup,
    child: Child,
    report: std::path::PathBuf,
    label: String,
}

/// The child's own books: minor + major faults.
fn rusage_faults(report: &std::path::Path) -> u64 {
    let text =
        std::fs::read_to_string(report).unwrap_or_else(|e| panic!("{}: {e}", report.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["minflt"].as_u64().unwrap() + v["majflt"].as_u64().unwrap()
}

#[test]
fn per_cgroup_counters_agree_with_the_childrens_books_and_never_go_backwards() {
    const TEST: &str = "per_cgroup_counters_agree_with_the_childrens_books_and_never_go_backwards";
    if !root_or_skip(TEST) || !serve_fixture::tool_or_skip(TEST, "prometheus") {
        return;
    }
    let _lock = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "--per-cgroup", &N.to_string()]);
    let prom = Prometheus::start(serve.addr);
    let t0 = Instant::now();
    // Give Prometheus a few scrapes first.
    std::thread::sleep(Duration::from_secs(3));

    let mut running: Vec<Running> = Vec::new();
    let mut done: Vec<(String, u64)> = Vec::new();
    let mut most = 0;
    let mut next_start = Instant::now();
    while done.len() < CGROUPS {
        if running.len() + done.len() < CGROUPS && Instant::now() >= next_start {
            let cg = MemCgroup::new(1 << 30);
            let report = dir
                .path()
                .join(format!("child{}.json", running.len() + done.len()));
            let mut c = cg.command(testchild());
            c.arg("--report")
                .arg(&report)
                .args(["churn", &CHURN_MS.to_string()]);
            let child = c.spawn().unwrap();
            let label = format!("/{}", cg.path().file_name().unwrap().to_str().unwrap());
            running.push(Running {
                cg,
                child,
                report,
                label,
            });
            next_start = Instant::now() + STAGGER;
        }
        let body = scrape(&serve);
        for family in [
            "vmscope_cgroup_page_faults_total",
            "vmscope_cgroup_memory_usage_bytes",
        ] {
            let n = labels(&body, family).len();
            most = most.max(n);
            assert!(n <= N, "{n} cgroups in {family}:\n{body}");
        }
        let mut i = 0;
        while i < running.len() {
            if running[i].child.try_wait().unwrap().is_some() {
                let r = running.remove(i);
                let faults = rusage_faults(&r.report);
                let path = r.cg.path().to_owned();
                drop(r.cg);
                assert!(!path.exists(), "{} left behind", path.display());
                done.push((r.label, faults));
            } else {
                i += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the children did not end"
        );
    }
    // The last values scraped, and a little more.
    std::thread::sleep(Duration::from_secs(4));
    let range = format!("{}s", t0.elapsed().as_secs() + 5);

    for (label, books) in &done {
        let sel = format!("vmscope_cgroup_page_faults_total{{cgroup=\"{label}\"}}");
        let last = prom
            .value(&format!("max_over_time({sel}[{range}])"))
            .unwrap_or_else(|| panic!("no series {sel}; log:\n{}", prom.log()));
        let inc = prom.value(&format!("increase({sel}[{range}])")).unwrap();
        eprintln!(
            "{label}: rusage {books} faults; last exported {last}; increase() {inc:.0} \
             ({:+.1} %, {:+.1} %)",
            (last - *books as f64) / *books as f64 * 100.0,
            (inc - *books as f64) / *books as f64 * 100.0
        );
        assert!(
            (last - *books as f64).abs() <= *books as f64 * 0.02 + 50.0,
            "{label}: last exported {last} vs the child's {books}"
        );
        assert!(
            (inc - *books as f64).abs() <= *books as f64 * 0.20,
            "{label}: increase() {inc} vs the child's {books}"
        );
    }
    // Every per-cgroup counter family scraped, one query each (the
    // functions drop the metric name).
    let families: BTreeSet<String> = scrape(&serve)
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .filter(|n| n.starts_with("vmscope_cgroup_"))
        .map(str::to_string)
        .collect();
    assert!(
        families.contains("vmscope_cgroup_page_faults_total"),
        "{families:?}"
    );
    let mut series = 0.0;
    for f in &families {
        let resets = prom.query(&format!("resets({f}[{range}]) > 0")).unwrap();
        assert!(resets.is_empty(), "{f} went backwards: {resets:?}");
        series += prom
            .value(&format!("count(count_over_time({f}[{range}]))"))
            .unwrap_or(0.0);
    }
    eprintln!(
        "per-cgroup: at most {most} cgroups per scrape (N = {N}); {series} series of {} \
         counter families over the run, none reset",
        families.len()
    );
}
