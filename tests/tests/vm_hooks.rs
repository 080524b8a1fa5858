//! Every VM hook against ground truth: exact madvise and munmap call counts
//! made by a known workload, TLB shootdowns from a two-thread unmapper, and
//! reclaim, swap and lazy-free figures against /proc/vmstat under a memcg
//! limit with zram swap.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{process::Command, time::Duration};

use vmscope_tests::{pressure, *};

fn record(dir: &std::path::Path, name: &str, argv: &[String]) -> serde_json::Value {
    let out = dir.join(format!("{name}.json"));
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "250ms", "-o"])
        .arg(&out)
        .arg("--")
        .args(argv);
    let o = run_with_timeout(c, Duration::from_secs(300));
    assert!(
        o.status.success(),
        "vmscope record {argv:?}: {:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    read_json(&out)
}

fn child(args: &[&str]) -> Vec<String> {
    std::iter::once(testchild().display().to_string())
        .chain(args.iter().map(|s| s.to_string()))
        .collect()
}

fn madvise(rec: &serde_json::Value, behavior: &str, field: &str) -> u64 {
    rec["totals"]["madvise"][behavior][field]
        .as_u64()
        .unwrap_or(0)
}

fn hist_count(rec: &serde_json::Value, name: &str) -> u64 {
    rec["totals"]["histograms"][name]["count"]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn madvise_calls_bytes_and_histograms_are_exact() {
    if !root_or_skip("madvise_calls_bytes_and_histograms_are_exact") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The difference between N and 0 calls cancels whatever the runtime does.
    let base = record(dir.path(), "m0", &child(&["madvise", "0"]));
    let rec = record(dir.path(), "m7", &child(&["madvise", "7"]));
    let ps = 4096;
    for (behavior, pages) in [("free", 1), ("dontneed", 2), ("cold", 3)] {
        let calls = madvise(&rec, behavior, "calls") - madvise(&base, behavior, "calls");
        let bytes = madvise(&rec, behavior, "bytes") - madvise(&base, behavior, "bytes");
        assert_eq!(calls, 7, "{behavior} calls: {:#}", rec["totals"]["madvise"]);
        assert_eq!(bytes, 7 * pages * ps, "{behavior} bytes");
        assert_eq!(madvise(&rec, behavior, "errors"), 0);
        let hist = format!("madvise_{behavior}");
        assert_eq!(
            hist_count(&rec, &hist) - hist_count(&base, &hist),
            7,
            "{hist} histogram"
        );
        let lat = &rec["totals"]["madvise"][behavior]["latency"];
        assert!(lat["p50_ns"].as_u64().unwrap() > 0, "{lat}");
    }
    let procs = rec["processes"].as_array().unwrap();
    assert!(
        procs
            .iter()
            .any(|p| p["madvise_calls"].as_u64().unwrap() >= 21)
    );
}

#[test]
fn munmap_histogram_counts_exactly_the_childs_calls() {
    if !root_or_skip("munmap_histogram_counts_exactly_the_childs_calls") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = record(dir.path(), "u0", &child(&["munmap", "0"]));
    let rec = record(dir.path(), "u50", &child(&["munmap", "50"]));
    assert_eq!(hist_count(&rec, "munmap") - hist_count(&base, "munmap"), 50);
}

#[test]
fn two_thread_unmapper_sends_tlb_shootdowns() {
    if !root_or_skip("two_thread_unmapper_sends_tlb_shootdowns") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = record(dir.path(), "tlb", &child(&["shootdown", "2000"]));
    let c = &rec["totals"]["counters"];
    let sent = c["tlb_remote_send_ipi"].as_u64().unwrap();
    let received = c["tlb_remote_shootdown"].as_u64().unwrap();
    assert!(sent + received > 0, "no remote shootdowns: {c:#}");
    let procs = rec["processes"].as_array().unwrap();
    let mine = procs
        .iter()
        .map(|p| p["tlb_shootdowns"].as_u64().unwrap())
        .sum::<u64>();
    assert!(mine > 0, "the child sent no shootdown IPIs: {procs:#?}");
    assert!(hist_count(&rec, "munmap") >= 2000);
}

#[test]
fn memcg_reclaim_swap_and_lazy_free_agree_with_vmstat() {
    if !root_or_skip("memcg_reclaim_swap_and_lazy_free_agree_with_vmstat") {
        return;
    }
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(2 << 30);
    let cg = pressure::MemCgroup::new(128 << 20);
    let dir = tempfile::tempdir().unwrap();
    let pages = (512u64 << 20) / 4096;
    let argv = child(&["touch", &pages.to_string()]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let before = pressure::vmstat();
    let rec = record(dir.path(), "swap", &cg.in_cgroup_argv(&argv));
    let after = pressure::vmstat();
    let recorded = |k: &str| rec["totals"]["vmstat"]["counters"][k].as_u64().unwrap();
    let books = |k: &str| after[k] - before[k];
    assert!(
        hist_count(&rec, "reclaim_memcg") > 0,
        "{:#}",
        rec["totals"]["histograms"]
    );
    assert!(recorded("pswpout") > 0);
    assert_within_pct("pswpout", recorded("pswpout"), books("pswpout"), 10.0);
    let procs = rec["processes"].as_array().unwrap();
    let child_row = procs
        .iter()
        .find(|p| p["comm"] == "vmscope-testchi")
        .unwrap_or_else(|| panic!("{procs:#?}"));
    assert!(
        child_row["memcg_reclaims"].as_u64().unwrap() > 0,
        "{child_row}"
    );

    // Lazy free: MADV_FREE'd pages are freed by reclaim instead of swapped.
    let argv = child(&["lazyfree", &(16384).to_string()]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let cg2 = pressure::MemCgroup::new(64 << 20);
    let before = pressure::vmstat();
    let rec = record(dir.path(), "lazy", &cg2.in_cgroup_argv(&argv));
    let after = pressure::vmstat();
    let recorded = |k: &str| rec["totals"]["vmstat"]["counters"][k].as_u64().unwrap();
    let books = |k: &str| after[k] - before[k];
    assert!(recorded("pglazyfree") > 0 && recorded("pglazyfreed") > 0);
    assert_within_pct(
        "pglazyfree",
        recorded("pglazyfree"),
        books("pglazyfree"),
        10.0,
    );
    assert_within_pct(
        "pglazyfreed",
        recorded("pglazyfreed"),
        books("pglazyfreed"),
        10.0,
    );
}
