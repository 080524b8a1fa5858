//! Every VM hook against ground truth: exact madvise and munmap call counts
//! (munmap timed with `--syscall-latency`)
//! made by a known workload, TLB shootdowns from a two-thread unmapper, and
//! reclaim, swap and lazy-free figures against /proc/vmstat under a memcg
//! limit with zram swap.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{process::Command, time::Duration};

use vmscope_tests::{pressure, *};

fn record(dir: &std::path::Path, name: &str, argv: &[String]) -> serde_json::Value {
    record_with(dir, name, &[], argv)
}

/// `record` with `options` before the command.
fn record_with(
    dir: &std::path::Path,
    name: &str,
    options: &[&str],
    argv: &[String],
) -> serde_json::Value {
    let out = dir.join(format!("{name}.json"));
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "250ms", "-o"])
        .arg(&out)
        .args(options)
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
    // Per process: the child's bytes grow by exactly its 7 x (1 + 2 + 3)
    // pages (the runtime's own madvise calls cancel between the runs).
    let child_bytes = |r: &serde_json::Value| {
        let rows = r["processes"].as_array().unwrap();
        let child = rows
            .iter()
            .find(|p| p["comm"] == "vmscope-testchi")
            .unwrap_or_else(|| panic!("no child in {rows:#?}"));
        child["madvise_bytes"].as_u64().unwrap_or(0)
    };
    assert_eq!(
        child_bytes(&rec) - child_bytes(&base),
        7 * 6 * ps,
        "the child's madvise_bytes: {procs:#?}"
    );
}

/// With `--syscall-latency`, the munmap histogram counts the child's calls
/// exactly; without it (the default) munmap is not timed, and the
/// recording says so: no histogram, and the probe off with its reason.
#[test]
fn munmap_histogram_counts_exactly_the_childs_calls() {
    if !root_or_skip("munmap_histogram_counts_exactly_the_childs_calls") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let timed = ["--syscall-latency"];
    let base = record_with(dir.path(), "u0", &timed, &child(&["munmap", "0"]));
    let rec = record_with(dir.path(), "u50", &timed, &child(&["munmap", "50"]));
    assert_eq!(hist_count(&rec, "munmap") - hist_count(&base, "munmap"), 50);

    let untimed = record(dir.path(), "d50", &child(&["munmap", "50"]));
    let hist = &untimed["totals"]["histograms"]["munmap"];
    assert!(hist.is_null(), "munmap timed by default: {hist}");
    for name in ["syscalls:sys_enter_munmap", "syscalls:sys_exit_munmap"] {
        let p = probe(&untimed, name);
        assert_eq!(p["attached"], false, "{p:#}");
        let why = p["reason"].as_str().unwrap_or("");
        assert!(why.contains("--syscall-latency"), "{p:#}");
    }
}

#[test]
fn two_thread_unmapper_sends_tlb_shootdowns() {
    if !root_or_skip("two_thread_unmapper_sends_tlb_shootdowns") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = record_with(
        dir.path(),
        "tlb",
        &["--syscall-latency"],
        &child(&["shootdown", "2000"]),
    );
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
    // 512 MiB written twice in 128 MiB: out to swap, then back in.
    let pages = (512u64 << 20) / 4096;
    let argv = child(&["rewrite", &pages.to_string()]);
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
    // Per process, both directions, against the kernel's books.
    assert!(books("pswpin") > 0, "the second pass swapped nothing in");
    let row = |k: &str| u64_at(child_row, &format!("/{k}"));
    assert_within_pct(
        "child swap-out",
        row("swap_out_pages"),
        books("pswpout"),
        10.0,
    );
    assert_within_pct("child swap-in", row("swap_in_pages"), books("pswpin"), 10.0);
    assert_within_pct("pswpin", recorded("pswpin"), books("pswpin"), 10.0);

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

/// Reclaim done by another task (here: this test lowering the limit) is
/// still charged to the process whose pages went out; the swap-ins are paid
/// by that process's own faults. The swap device is created mid-recording,
/// while the owner sleeps, so this also covers the deferred swap probe and
/// an owner learned only after its pages went out.
#[test]
fn swap_out_is_charged_to_the_owner_not_the_reclaimer() {
    if !root_or_skip("swap_out_is_charged_to_the_owner_not_the_reclaimer") {
        return;
    }
    let _lock = pressure::exclusive();
    let cg = pressure::MemCgroup::new(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("hold");
    let pages = (256u64 << 20) / 4096;
    let argv = child(&[
        "--report",
        report.to_str().unwrap(),
        "hold",
        &pages.to_string(),
    ]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = dir.path().join("owner.json");
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "250ms", "-o"])
        .arg(&out)
        .arg("--")
        .args(cg.in_cgroup_argv(&argv));
    let recorder = std::thread::spawn(move || run_with_timeout(c, Duration::from_secs(600)));
    let held = report.with_extension("held");
    let t0 = std::time::Instant::now();
    while !held.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the child never wrote its pages"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The swap device appears only now, while vmscope records: its swap
    // probe, deferred until then, attaches at the next interval.
    let _swap = pressure::ZramSwap::new(1 << 30);
    std::thread::sleep(Duration::from_millis(600));
    let before = pressure::vmstat();
    // This thread does the reclaim: the child is asleep.
    let t = std::time::Instant::now();
    cg.set_limit(32 << 20);
    cg.set_limit(1 << 30);
    eprintln!("reclaiming the child's memory took {:?}", t.elapsed());
    let mid = pressure::vmstat();
    std::fs::write(report.with_extension("go"), b"").unwrap();
    let o = recorder.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = pressure::vmstat();
    let pushed = mid["pswpout"] - before["pswpout"];
    assert!(
        pushed > pages / 2,
        "lowering the limit swapped out only {pushed} pages"
    );
    let rec = read_json(&out);
    let probe = probe(&rec, "kmem:rss_stat");
    assert_eq!(probe["attached"], true, "{probe}");
    let procs = rec["processes"].as_array().unwrap();
    let row = procs
        .iter()
        .find(|p| p["comm"] == "vmscope-testchi")
        .unwrap_or_else(|| panic!("{procs:#?}"));
    assert_within_pct(
        "swap-out charged to the owner",
        u64_at(row, "/swap_out_pages"),
        after["pswpout"] - before["pswpout"],
        10.0,
    );
    assert_within_pct(
        "swap-in paid by the owner",
        u64_at(row, "/swap_in_pages"),
        after["pswpin"] - before["pswpin"],
        10.0,
    );
    // Nobody else in the recording was charged for them.
    let others: u64 = procs
        .iter()
        .filter(|p| p["pid"] != row["pid"])
        .map(|p| p["swap_out_pages"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        others * 100 < pushed,
        "swap-out charged elsewhere: {procs:#?}"
    );
}

/// Major faults per process against the child's own rusage.
#[test]
fn major_faults_match_the_childs_rusage() {
    if !root_or_skip("major_faults_match_the_childs_rusage") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("majflt.json");
    let argv = child(&["--report", report.to_str().unwrap(), "majfault", "4000"]);
    let rec = record(dir.path(), "majfault", &argv);
    let ru = read_json(&report);
    let majflt = u64_at(&ru, "/majflt");
    assert!(
        majflt > 1000,
        "the workload took only {majflt} major faults"
    );
    let procs = rec["processes"].as_array().unwrap();
    let row = procs
        .iter()
        .find(|p| p["pid"] == ru["pid"])
        .unwrap_or_else(|| panic!("{procs:#?}"));
    assert_eq!(u64_at(row, "/major_faults"), majflt, "{row:#}");
    assert!(u64_at(&rec, "/totals/counters/major_faults") >= majflt);
}
