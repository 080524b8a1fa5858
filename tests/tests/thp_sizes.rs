//! Transparent huge pages by size and per process, against the kernel's
//! own books: a child writes a byte in each of 256 huge pages of
//! MADV_HUGEPAGE memory (512 MiB).
//!
//! - the recording's 2 MiB `anon_fault_alloc` over the run equals
//!   `/proc/vmstat`'s `thp_fault_alloc` over the same window: two books of
//!   the kernel, one through the per-size counters vmscope reads (and no
//!   more than vmstat's delta the test reads around the whole run);
//! - faults that got a huge page and those that fell back add up to the
//!   child's 256;
//! - the child's `AnonHugePages` in its last working-set window equals what
//!   its own `smaps_rollup` said just before it exited.
//!
//! With `--thp-faults`, huge-page faults per process: each process's count
//! equals the huge pages its own `smaps_rollup` holds, and their sum equals
//! `/proc/vmstat`'s `thp_fault_alloc` over the recording, for processes
//! that fault from four threads, through MADV_POPULATE_WRITE (which the
//! exception tracepoints never see) and by the hundred, short-lived.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use vmscope_tests::{pressure, *};

const HUGE: u64 = 256;
const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// THP for MADV_HUGEPAGE memory only while it lives (`madvise`: nothing
/// but the test's children fault huge pages), the setting put back when
/// dropped.
struct ThpAllowed(Option<String>);

impl ThpAllowed {
    fn new() -> ThpAllowed {
        let now = std::fs::read_to_string(THP).unwrap();
        for was in ["always", "never"] {
            if now.contains(&format!("[{was}]")) {
                std::fs::write(THP, "madvise").unwrap();
                return ThpAllowed(Some(was.into()));
            }
        }
        ThpAllowed(None)
    }
}

impl Drop for ThpAllowed {
    fn drop(&mut self) {
        if let Some(was) = &self.0 {
            let _ = std::fs::write(THP, was);
        }
    }
}

/// What each test here holds while it runs: the machine's huge pages to
/// itself (no other test's children fault them meanwhile), THP for
/// MADV_HUGEPAGE memory only, a directory and the test child.
struct Alone {
    _alone: std::sync::MutexGuard<'static, ()>,
    _thp: ThpAllowed,
    dir: tempfile::TempDir,
    child: std::path::PathBuf,
}

/// [`Alone`], or `None` (skipped, with the reason) when not root.
fn alone(test: &str) -> Option<Alone> {
    if !root_or_skip(test) {
        return None;
    }
    let _alone = pressure::exclusive();
    Some(Alone {
        _alone,
        _thp: ThpAllowed::new(),
        dir: tempfile::tempdir().unwrap(),
        child: testchild(),
    })
}

#[test]
fn huge_page_faults_by_size_and_per_process_agree_with_the_kernel() {
    const TEST: &str = "huge_page_faults_by_size_and_per_process_agree_with_the_kernel";
    let Some(held) = alone(TEST) else {
        return;
    };
    let (dir, child) = (&held.dir, &held.child);
    let n = HUGE.to_string();
    let before = pressure::vmstat();
    let out = dir.path().join("thp.json");
    let mut cmd = std::process::Command::new(vmscope_bin());
    cmd.args([
        "record",
        "-i",
        "250ms",
        "--working-set",
        "--wss-window",
        "1s",
        "-o",
    ])
    .arg(&out)
    .args(["--", path_str(child), "hugefault", n.as_str()]);
    let o = run_with_timeout(cmd, Duration::from_secs(120));
    let after = pressure::vmstat();
    ok(&o, "record --working-set -- hugefault");
    let rec = read_json(&out);
    let vm = |k: &str| after[k] - before[k];
    let t = &rec["thp_sizes"];
    assert!(t["unavailable"].is_null(), "{t:#}");
    let size = &t["by_size"]["2048kB"];
    let (alloc, fallback) = (
        u64_at(size, "/anon_fault_alloc"),
        u64_at(size, "/anon_fault_fallback"),
    );
    eprintln!(
        "{TEST}: 2048kB faults {alloc} (fallback {fallback}) vs vmstat thp_fault_alloc {} \
         (fallback {})",
        vm("thp_fault_alloc"),
        vm("thp_fault_fallback")
    );
    // The same window's vmstat (first to last sample), and no more than
    // the test saw around the whole run.
    let recorded = |k: &str| u64_at(&rec, &format!("/totals/vmstat/counters/{k}"));
    assert_eq!(alloc, recorded("thp_fault_alloc"), "{t:#}");
    assert_eq!(fallback, recorded("thp_fault_fallback"), "{t:#}");
    assert!(alloc <= vm("thp_fault_alloc"), "{t:#}");
    assert!(
        alloc + fallback >= HUGE,
        "fewer than the child's {HUGE}: {t:#}"
    );
    assert!(alloc >= HUGE / 2, "most should get a huge page: {t:#}");

    let said: u64 = text(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("anon_huge_kb "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("the child said nothing: {}", text(&o.stdout)));
    let pid = rec["child"]["pid"].as_u64().unwrap();
    let last = rec["samples"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["working_set"].as_array().into_iter().flatten())
        .flat_map(|w| w["procs"].as_array().into_iter().flatten())
        .rfind(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("no working-set window of {pid}"));
    eprintln!(
        "{TEST}: AnonHugePages {} kB in the last window vs {said} kB from smaps_rollup",
        u64_at(last, "/anon_huge_bytes") / 1024
    );
    assert!(
        said >= alloc * 2048 / 2,
        "the child held too few: {said} kB"
    );
    assert_eq!(u64_at(last, "/anon_huge_bytes"), said * 1024, "{last}");
}

/// Short-lived processes, each faulting one huge page.
const BRIEF: usize = 150;

#[test]
fn huge_page_faults_per_process_equal_each_processes_huge_pages() {
    const TEST: &str = "huge_page_faults_per_process_equal_each_processes_huge_pages";
    let Some(held) = alone(TEST) else {
        return;
    };
    let (dir, child) = (&held.dir, &held.child);
    let c = path_str(child);
    let script = format!(
        "{c} hugefault 64 threads 4 brief & {c} hugefault 48 populate brief & \
         i=0; while [ $i -lt {BRIEF} ]; do {c} hugefault 1 brief; i=$((i+1)); done; wait"
    );
    let before = pressure::vmstat();
    let out = dir.path().join("thp-faults.json");
    let mut cmd = std::process::Command::new(vmscope_bin());
    cmd.args(["record", "--thp-faults", "--all", "-i", "250ms", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", script.as_str()]);
    let o = run_with_timeout(cmd, Duration::from_secs(180));
    let after = pressure::vmstat();
    ok(&o, "record --thp-faults");
    let rec = read_json(&out);
    let procs = rec["processes"].as_array().unwrap();
    let probe = probe(&rec, "memcg:count_memcg_events");
    if probe["attached"] != true {
        // A kernel before 6.16: unavailable, with the reason, never 0.
        let why = probe["reason"].as_str().unwrap_or("");
        assert!(why.contains("not found in this kernel"), "{probe}");
        assert!(procs.iter().all(|p| p["thp_faults"].is_null()));
        eprintln!("{TEST}: huge-page faults per process unavailable here: {why}");
        return;
    }
    let said: Vec<(u64, u64)> = text(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("huge_pid ")?.split_whitespace();
            Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect();
    assert_eq!(
        said.len(),
        BRIEF + 2,
        "every child reports: {}",
        text(&o.stdout)
    );
    let faults_of = |pid: u64| {
        let p = procs
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("no process {pid} in the recording"));
        p["thp_faults"]
            .as_u64()
            .unwrap_or_else(|| panic!("thp_faults of {pid} is not a count: {p}"))
    };
    for &(pid, kb) in &said {
        assert_eq!(
            faults_of(pid),
            kb / 2048,
            "process {pid}: its smaps_rollup holds {kb} kB of huge pages"
        );
    }
    let total: u64 = procs.iter().filter_map(|p| p["thp_faults"].as_u64()).sum();
    let recorded = u64_at(&rec, "/totals/vmstat/counters/thp_fault_alloc");
    let around = after["thp_fault_alloc"] - before["thp_fault_alloc"];
    eprintln!(
        "{TEST}: {} processes; sum of per-process \
         huge-page faults {total} vs vmstat thp_fault_alloc {recorded} over the recording \
         ({around} around it)",
        said.len()
    );
    assert_eq!(total, recorded, "every huge-page fault is some process's");
    assert!(recorded <= around);
    assert!(
        total >= (64 + 48 + BRIEF as u64) / 2,
        "most should get a huge page: {total}"
    );
}

#[test]
fn without_thp_faults_the_per_process_count_is_unavailable_not_zero() {
    const TEST: &str = "without_thp_faults_the_per_process_count_is_unavailable_not_zero";
    let Some(held) = alone(TEST) else {
        return;
    };
    let (dir, child) = (&held.dir, &held.child);
    let out = dir.path().join("no-thp-faults.json");
    let mut cmd = std::process::Command::new(vmscope_bin());
    cmd.args(["record", "-o"])
        .arg(&out)
        .args(["--", path_str(child), "hugefault", "4", "brief"]);
    let o = run_with_timeout(cmd, Duration::from_secs(120));
    ok(&o, "record -- hugefault");
    let rec = read_json(&out);
    let p = child_row(&rec);
    assert!(p["thp_faults"].is_null(), "{p}");
    let probe = probe(&rec, "memcg:count_memcg_events");
    assert_eq!(probe["attached"], false);
    assert!(
        probe["reason"].as_str().unwrap().contains("--thp-faults"),
        "{probe}"
    );
}
