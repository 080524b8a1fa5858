//! Direct compaction and page migration against the kernel's own counts:
//! `workload compaction` recorded, its figures set against the
//! `/proc/vmstat` deltas over the same run (the recording's, and the
//! workload's own reading around its work).
//!
//! - direct compactions within 5% of `compact_stall`, those ended in
//!   success within 5% of `compact_success`;
//! - pages migrated within 5% of `pgmigrate_success`;
//! - every direct compaction asked for the huge-page order, and the
//!   workload's process took nearly all of them, with their time;
//! - the stall account names direct compaction, with coverage in 0..=100;
//! - the hugetlb pool is as it was, also after a SIGKILL.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use vmscope_tests::{
    assert_within_pct, child_row, last_json_line, pressure, record_to, root_or_skip, text, u64_at,
};

fn nr_hugepages() -> String {
    std::fs::read_to_string("/proc/sys/vm/nr_hugepages").unwrap()
}

#[test]
fn direct_compaction_and_migration_agree_with_vmstat() {
    const TEST: &str = "direct_compaction_and_migration_agree_with_vmstat";
    if !root_or_skip(TEST) {
        return;
    }
    // The workload takes most free memory into the hugetlb pool for a
    // moment: nothing else may allocate meanwhile.
    let _alone = pressure::exclusive();
    let pool = nr_hugepages();
    let dir = tempfile::tempdir().unwrap();
    let me = vmscope_tests::vmscope_bin().display().to_string();
    let (o, rec) = record_to(
        dir.path(),
        "compaction",
        &[me.as_str(), "workload", "compaction"],
        &[],
        Duration::from_secs(300),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(nr_hugepages(), pool, "the hugetlb pool was not put back");
    let doc = last_json_line(&o.stdout);

    let counters = &rec["totals"]["counters"];
    let vmstat = &rec["totals"]["vmstat"]["counters"];
    let c = |k: &str| u64_at(counters, &format!("/{k}"));
    let v = |k: &str| u64_at(vmstat, &format!("/{k}"));
    let migrated: u64 = counters
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("migrated_"))
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    eprintln!(
        "{TEST}: direct {} vs compact_stall {} (workload's {}); success {} vs {}; migrated {} \
         vs pgmigrate_success {}",
        c("compact_direct"),
        v("compact_stall"),
        u64_at(&doc, "/vmstat/compact_stall"),
        c("compact_direct_success"),
        v("compact_success"),
        migrated,
        v("pgmigrate_success"),
    );
    assert!(
        v("compact_stall") >= 50,
        "too little compaction to judge: {doc}"
    );
    assert_within_pct(
        "direct compactions vs compact_stall",
        c("compact_direct"),
        v("compact_stall"),
        5.0,
    );
    assert_within_pct(
        "direct compactions vs the workload's compact_stall",
        c("compact_direct"),
        u64_at(&doc, "/vmstat/compact_stall"),
        5.0,
    );
    assert_within_pct(
        "successes vs compact_success",
        c("compact_direct_success"),
        v("compact_success"),
        5.0,
    );
    assert_within_pct(
        "pages migrated vs pgmigrate_success",
        migrated,
        v("pgmigrate_success"),
        5.0,
    );

    // Every one asked for a huge page.
    let order = u64_at(&doc, "/config/huge_order");
    assert_eq!(
        c(&format!("compact_order_{order}")),
        c("compact_direct"),
        "{counters:#}"
    );
    // The workload's own, with their time; each run's time in the histogram.
    let row = child_row(&rec);
    assert!(
        u64_at(row, "/direct_compactions") * 100 >= c("compact_direct") * 95,
        "{row}"
    );
    let ns = u64_at(row, "/direct_compaction_ns");
    let hist = &rec["totals"]["histograms"]["compaction_direct"];
    assert_eq!(u64_at(hist, "/count"), c("compact_runs_direct"), "{hist}");
    assert!(ns > 0 && u64_at(hist, "/sum_ns") >= ns, "{ns} {hist}");
    assert!(u64_at(&rec["totals"]["histograms"]["migrate"], "/count") > 0);

    // The stall account names it.
    let stall = &rec["totals"]["stall"];
    let named = stall["causes_ms"]["direct compaction"].as_f64().unwrap();
    assert!(named * 1e6 >= ns as f64 * 0.99, "{stall}");
    if let Some(pct) = stall["coverage_pct"].as_f64() {
        assert!((0.0..=100.0).contains(&pct), "{stall}");
    }
    assert!(
        !stall["not_timed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "direct compaction"),
        "{stall}"
    );
}

/// The OOM killer's SIGKILL runs no destructor: the workload's watcher
/// process puts the pool back when the workload dies holding it raised.
#[test]
fn the_pool_is_put_back_after_a_sigkill() {
    const TEST: &str = "the_pool_is_put_back_after_a_sigkill";
    if !root_or_skip(TEST) {
        return;
    }
    let _alone = pressure::exclusive();
    let pool = nr_hugepages();
    let mut child = std::process::Command::new(vmscope_tests::vmscope_bin())
        .args(["workload", "compaction", "--fill", "4G", "--huge", "1G"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the pool is raised, during the huge-page faults.
    let t = std::time::Instant::now();
    while nr_hugepages() == pool && t.elapsed() < Duration::from_secs(60) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let raised = nr_hugepages();
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert_ne!(raised, pool, "the pool was never raised ({status})");
    assert_eq!(status.code(), None, "not killed: it had ended ({status})");
    let t = std::time::Instant::now();
    while nr_hugepages() != pool && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "{TEST}: pool {} raised to {} and killed; now {}",
        pool.trim(),
        raised.trim(),
        nr_hugepages().trim()
    );
    assert_eq!(nr_hugepages(), pool, "the pool stayed raised after SIGKILL");
}

#[test]
fn bad_sizes_are_refused_before_anything_changes() {
    let o = std::process::Command::new(vmscope_tests::vmscope_bin())
        .args(["workload", "compaction", "--fill", "4K"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("--fill") && err.lines().count() == 1, "{err}");
}

/// khugepaged's collapse, made on demand: the test child faults 16 huge
/// pages' worth of memory in small pages and collapses it with
/// MADV_COLLAPSE (the same `collapse_huge_page`). Exactly 16 succeed, and
/// every try is one huge-page allocation vmstat counts (`thp_collapse_alloc`
/// and `_failed`).
#[test]
fn collapses_are_counted_like_thp_collapse_alloc() {
    const TEST: &str = "collapses_are_counted_like_thp_collapse_alloc";
    if !root_or_skip(TEST) {
        return;
    }
    let _alone = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let child = vmscope_tests::testchild().display().to_string();
    let (o, rec) = record_to(
        dir.path(),
        "collapse",
        &[child.as_str(), "collapse", "16"],
        &[],
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let counters = &rec["totals"]["counters"];
    let (tried, done) = (
        u64_at(counters, "/thp_collapses"),
        u64_at(counters, "/thp_collapses_succeeded"),
    );
    let vmstat = &rec["totals"]["vmstat"]["counters"];
    let (alloc, failed) = (
        u64_at(vmstat, "/thp_collapse_alloc"),
        u64_at(vmstat, "/thp_collapse_alloc_failed"),
    );
    eprintln!(
        "{TEST}: {tried} collapses tried, {done} succeeded; thp_collapse_alloc {alloc}, \
         _failed {failed}"
    );
    // MADV_COLLAPSE returned 0: every one of the 16 collapsed.
    assert_eq!(done, 16, "{counters:#}");
    // Each try allocates its huge page first (a retry allocates again).
    assert_eq!(
        tried,
        alloc + failed,
        "collapses tried vs huge pages allocated for them"
    );
}
