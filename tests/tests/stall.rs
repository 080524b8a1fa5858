//! Where memory stall time went, against PSI: a child reads a 256 MiB file
//! through a 64 MiB memory cgroup without swap, so the only memory stall it
//! meets is memcg reclaim of the cgroup's page cache (the reads are I/O
//! waits, which PSI does not count as memory). The recording's stall
//! account has PSI `some`, its memcg reclaim time (also weighed by the busy
//! CPUs, as PSI weighs stall), and a coverage between 0 and 100%; the
//! memcg reclaim timed is at least half of PSI `some`, and the parts add
//! up.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use serde_json::Value;
use vmscope_tests::{pages, path_str, pressure, record_to, root_or_skip, testchild, text};

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key} in the stall account: {v:#}"))
}

#[test]
fn memcg_reclaim_explains_most_of_psi_memory_stall() {
    if !root_or_skip("memcg_reclaim_explains_most_of_psi_memory_stall") {
        return;
    }
    if !std::path::Path::new("/proc/pressure/memory").exists() {
        // PSI off: the account says so (checked by the unit tests); nothing to
        // reconcile here.
        assert!(
            std::env::var("VMSCOPE_REQUIRE_BPF").is_err(),
            "PSI is off on this kernel"
        );
        return;
    }
    let _lock = pressure::exclusive();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let cg = pressure::MemCgroup::no_swap(64 << 20);
    let report = dir.path().join("child.ru");
    let n = pages(256 << 20);
    let argv = cg.in_cgroup_argv(&[
        path_str(&testchild()),
        "--report",
        path_str(&report),
        "readfile",
        n.as_str(),
    ]);
    let (o, rec) = record_to(dir.path(), "stall", &argv, &[], Duration::from_secs(300));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let a = &rec["totals"]["stall"];
    let (psi, memcg, named, other, cover) = (
        f(a, "psi_some_ms"),
        f(&a["causes_ms"], "memcg reclaim"),
        f(a, "named_ms"),
        f(a, "other_ms"),
        f(a, "coverage_pct"),
    );
    // Weighed as PSI weighs stall time: by each interval's busy CPUs.
    let weighted = f(a, "named_weighted_ms");
    eprintln!(
        "stall: PSI some {psi:.1} ms, memcg reclaim {memcg:.1} ms ({weighted:.1} ms weighed by \
         {:.2} busy CPUs on average), other {other:.1} ms: {cover:.0}% explained",
        f(a, "busy_cpus")
    );
    assert!(memcg > 0.0, "no memcg reclaim: {a:#}");
    assert!(psi > 0.0, "PSI saw no memory stall: {a:#}");
    assert!((0.0..=100.0).contains(&cover), "{a:#}");
    // Most of PSI's stall is memcg reclaim vmscope timed: the plain sum is
    // held to it. The weighed share (`coverage_pct`) is an estimate from
    // 10 ms CPU ticks and the CPU each stall ended on; on this 2-CPU VM it
    // ranged from 19% to 99% over runs of this same child, with the plain
    // sum 1.3-2.2 times PSI every time, so it is shown, not held to a bound.
    assert!(
        named >= 0.5 * psi,
        "memcg reclaim ({named:.1} ms) explains under half of PSI's {psi:.1} ms: {a:#}"
    );
    assert!(named >= memcg, "{a:#}");
    assert!(weighted <= named + 1e-6 && weighted > 0.0, "{a:#}");
    assert!((other - (psi - weighted).max(0.0)).abs() < 1e-6, "{a:#}");
    let not_timed: Vec<&str> = a["not_timed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!not_timed.contains(&"direct compaction"), "{a:#}");
    assert!(a["causes_ms"]["direct compaction"].is_f64(), "{a:#}");
}
