//! Every fault and every swapped page counted once, the way other people's
//! programs behave: faults taken through get_user_pages (MADV_POPULATE_WRITE,
//! MAP_POPULATE from a second thread, mlock) against the child's rusage, and
//! a process that swaps out and then forks children that exit, munmap,
//! mremap, MADV_DONTNEED or mmap(MAP_FIXED) over the swapped range, then
//! swaps it back in by writing it, MADV_POPULATE_WRITE or mlock, against
//! /proc/vmstat's pswpout and pswpin.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use vmscope_tests::{pressure, *};

/// `vmscope record` of `argv` into `DIR/NAME.json`, with `env`; it must
/// succeed.
fn record(
    dir: &std::path::Path,
    name: &str,
    argv: &[&str],
    env: &[(&str, &str)],
) -> serde_json::Value {
    let (o, rec) = record_to(dir, name, argv, env, Duration::from_secs(300));
    assert!(
        o.status.success(),
        "vmscope record {argv:?}: {:?} {}",
        o.status,
        text(&o.stderr)
    );
    rec
}

fn child_row(rec: &serde_json::Value, pid: u64) -> &serde_json::Value {
    rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not among {:#}", rec["processes"]))
}

const PAGES: u64 = 20_000;

#[test]
fn get_user_pages_faults_count_like_the_kernels_books() {
    if !root_or_skip("get_user_pages_faults_count_like_the_kernels_books") {
        return;
    }
    populate_counts_like_the_kernels_books("populate");
}

/// The same with every CPU kept busy, three times: the child is preempted
/// and migrated between slices, and a slice whose switch-in the kernel did
/// not trace must still be counted (it was lost in about one run in six).
#[test]
fn get_user_pages_faults_count_with_the_cpus_busy() {
    if !root_or_skip("get_user_pages_faults_count_with_the_cpus_busy") {
        return;
    }
    // Saturating the CPUs changes what the swap tests of this file measure
    // (children linger while their parent reclaims pages they share), so
    // not alongside them.
    let _lock = pressure::exclusive();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners: Vec<_> = (0..cpus * 3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let outcome = std::panic::catch_unwind(|| {
        for round in 0..3 {
            populate_counts_like_the_kernels_books(&format!("busy{round}"));
        }
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
}

/// Records the test child's `populate` and checks its faults, whole and in
/// parts, against its rusage and the exact number of pages it populated.
fn populate_counts_like_the_kernels_books(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ru = dir.path().join("populate.ru");
    let child = testchild();
    let n = PAGES.to_string();
    let argv = [
        path_str(&child),
        "--report",
        path_str(&ru),
        "populate",
        n.as_str(),
    ];
    let rec = record(dir.path(), name, &argv, &[]);
    let books = read_json(&ru);
    let kernel = books["minflt"].as_u64().unwrap() + books["majflt"].as_u64().unwrap();
    let row = child_row(&rec, books["pid"].as_u64().unwrap());
    let faults = &row["faults"];
    let (total, exception, gup) = (
        u64_at(faults, "/total"),
        u64_at(faults, "/exception"),
        u64_at(faults, "/gup"),
    );
    // The whole: the kernel's own count for the child (it takes a few faults
    // before vmscope follows it, hence not exact).
    assert_within_pct("child faults vs rusage", total, kernel, 2.0);
    // The parts: three ways of 20,000 get_user_pages faults, and the 20,000
    // touched pages plus start-up on the exception path.
    assert_within_pct("gup part", gup, 3 * PAGES, 2.0);
    assert_eq!(total, exception + gup, "{faults}");
    assert!(
        (PAGES..PAGES + PAGES / 50).contains(&exception),
        "exception part {exception}: {faults}"
    );
    // The recording's scope total and the system-wide figure (vmstat's
    // pgfault) see the same get_user_pages faults.
    let scope = &rec["totals"]["scope_faults"];
    assert_within_pct("scope gup", u64_at(scope, "/gup"), 3 * PAGES, 2.0);
    let system = u64_at(&rec["totals"]["system_faults"], "/gup");
    assert!(system >= 3 * PAGES * 98 / 100, "system gup {system}");
    assert_eq!(rec["totals"]["unavailable"].get("gup_faults"), None);
    // How many slices the books caught up is a figure, not a silence.
    assert!(
        rec["totals"]["counters"]["switch_in_unseen"].is_u64(),
        "{:#}",
        rec["totals"]["counters"]
    );
}

#[test]
fn without_the_context_switch_probe_gup_faults_are_unavailable_not_zero() {
    if !root_or_skip("without_the_context_switch_probe_gup_faults_are_unavailable_not_zero") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let child = testchild();
    let argv = [path_str(&child), "populate", "2000"];
    let rec = record(
        dir.path(),
        "nogup",
        &argv,
        &[("VMSCOPE_DISABLE_PROBES", "sched:sched_switch")],
    );
    let probe = rec["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == "sched:sched_switch")
        .unwrap();
    assert_eq!(probe["attached"], false, "{probe}");
    let why = rec["totals"]["unavailable"]["gup_faults"]
        .as_str()
        .unwrap_or("");
    assert!(
        why.contains("sched:sched_switch"),
        "{:#}",
        rec["totals"]["unavailable"]
    );
    let row = rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["comm"] == "vmscope-testchi")
        .unwrap();
    assert!(row["faults"]["gup"].is_null(), "{row}");
    assert!(rec["totals"]["scope_faults"]["gup"].is_null());
}

/// A parent swaps out under a memcg limit, forks children that exit (or
/// munmap, mremap, MADV_DONTNEED or mmap(MAP_FIXED) over half the swapped
/// range) without touching it, then writes everything again (or, after
/// children that just exit, populates it with MADV_POPULATE_WRITE or
/// mlock). Fork copies swap entries and the children drop them, all without
/// I/O (some of it inside madvise and mmap, as the parent's populate and
/// mlock swap-ins are inside syscalls): per-process swap-out and swap-in
/// must still add up to pswpout and pswpin.
#[test]
fn fork_after_swap_counts_only_swap_traffic() {
    if !root_or_skip("fork_after_swap_counts_only_swap_traffic") {
        return;
    }
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let child = testchild();
    // The swap probe as a BTF tracepoint (the default here), then forced
    // back to the classic event: both must count the same.
    for (method, env) in [("tp_btf", None), ("tracepoint", Some("tp_btf"))] {
        for mode in [
            "exit", "munmap", "mremap", "dontneed", "mapfixed", "populate", "mlock",
        ] {
            let env: Vec<(&str, &str)> = env
                .map(|v| ("VMSCOPE_DISABLE_PROBES", v))
                .into_iter()
                .collect();
            fork_after_swap(dir.path(), &child, mode, method, &env);
        }
    }
}

fn fork_after_swap(
    dir: &std::path::Path,
    child: &std::path::Path,
    mode: &str,
    method: &str,
    env: &[(&str, &str)],
) {
    {
        let cg = pressure::MemCgroup::new(64 << 20);
        // 40,000 pages (156 MiB) written in 64 MiB.
        let argv = [path_str(child), "forkswap", "40000", "3", mode];
        let before = pressure::vmstat();
        let wrapped = cg.in_cgroup_argv(&argv);
        let wrapped: Vec<&str> = wrapped.iter().map(String::as_str).collect();
        let rec = record(dir, &format!("{mode}-{method}"), &wrapped, env);
        let probe = probe(&rec, "kmem:rss_stat");
        assert_eq!(probe["method"], method, "{probe}");
        let mode = format!("{mode} ({method})");
        let mode = mode.as_str();
        let after = pressure::vmstat();
        let books = |k: &str| after[k] - before[k];
        let procs = rec["processes"].as_array().unwrap();
        let sum = |k: &str| {
            procs
                .iter()
                .map(|p| p[k].as_u64().unwrap_or(0))
                .sum::<u64>()
        };
        assert_swap_books(
            &format!("{mode}, summed over processes"),
            [sum("swap_out_pages"), sum("swap_in_pages")],
            [books("pswpout"), books("pswpin")],
            10.0,
        );
        // The parent did the I/O; the children only copied and dropped
        // entries. What a child may still be charged is a shared page
        // reclaimed while it mapped it (each mapper's swap-entry count
        // grows) and its own stack pages: a sliver, not the 24k it inherited.
        // How big a sliver depends on how much reclaim the forks cause
        // while the children live: all processes together about 470 pages
        // over pswpout here when idle, and one child 1,689 once in a CI run
        // with the file's other tests busy beside it.
        let parent = procs
            .iter()
            .max_by_key(|p| p["swap_out_pages"].as_u64().unwrap_or(0))
            .unwrap();
        let children: Vec<_> = procs
            .iter()
            .filter(|p| p["comm"] == "vmscope-testchi" && p["pid"] != parent["pid"])
            .collect();
        assert_eq!(children.len(), 3, "{mode}: {procs:#?}");
        for c in children {
            let out = c["swap_out_pages"].as_u64().unwrap_or(0);
            let inn = c["swap_in_pages"].as_u64().unwrap_or(0);
            assert!(
                out < books("pswpout") / 20 && inn < books("pswpin") / 100,
                "{mode}: a child that never touched the memory was charged {out} out, {inn} in: {c}"
            );
        }
        let copied = rec["totals"]["counters"]["swap_copied_pages"]
            .as_u64()
            .unwrap_or(0);
        assert!(
            copied > 3 * 20_000,
            "{mode}: fork copies not seen: {copied}"
        );
    }
}

/// vmscope's swap-out and swap-in (`got`) against pswpout and pswpin
/// (`books`), each over 20,000 pages and within `pct` percent.
fn assert_swap_books(what: &str, got: [u64; 2], books: [u64; 2], pct: f64) {
    eprintln!(
        "{what}: swap-out vmscope {} vmstat {}; swap-in vmscope {} vmstat {}",
        got[0], books[0], got[1], books[1]
    );
    assert!(books[0] > 20_000, "{what}: too little swapped out");
    assert!(books[1] > 20_000, "{what}: too little swapped in");
    assert_within_pct(
        &format!("{what}: swap-out vs pswpout"),
        got[0],
        books[0],
        pct,
    );
    assert_within_pct(&format!("{what}: swap-in vs pswpin"), got[1], books[1], pct);
}

/// Hundreds of short-lived processes, each populating memory from a
/// thread of its own and from its main thread: the tree's faults against
/// the wrapped shell's rusage, which includes every child it waited for,
/// and each process's get_user_pages faults against the 3 x 64 it took.
/// A thread whose whole life fits in one slice, its switch-in unseen, and
/// the wrapped command's faults between its fork and its exec are where
/// such counts have gone missing before.
#[test]
fn short_lived_processes_by_the_hundred_keep_their_books() {
    if !root_or_skip("short_lived_processes_by_the_hundred_keep_their_books") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "i=0; while [ $i -lt 400 ]; do {} populate 64 || exit 1; i=$((i+1)); done",
        testchild().display()
    );
    let rec = record(dir.path(), "churn", &["sh", "-c", &script], &[]);
    let ru = &rec["child"]["rusage"];
    let kernel = u64_at(ru, "/minflt") + u64_at(ru, "/majflt");
    let scope = &rec["totals"]["scope_faults"];
    // Each process's last cumulative figures, from the samples (the
    // `processes` list holds only the top 50).
    let mut last = std::collections::BTreeMap::new();
    for s in rec["samples"].as_array().unwrap() {
        for p in s["procs"].as_array().unwrap() {
            last.insert(p["pid"].as_u64().unwrap(), p.clone());
        }
    }
    let children: Vec<_> = last
        .values()
        .filter(|p| p["comm"] == "vmscope-testchi")
        .collect();
    assert_eq!(children.len(), 400, "processes seen: {}", last.len());
    let short: Vec<String> = children
        .iter()
        .filter(|p| p["faults"]["gup"].as_u64().unwrap_or(0) < 3 * 64)
        .map(|p| format!("pid {} gup {}", p["pid"], p["faults"]["gup"]))
        .collect();
    assert!(
        short.is_empty(),
        "{} of 400 processes have fewer than 3 x 64 get_user_pages faults: {short:?}",
        short.len()
    );
    assert_eq!(
        u64_at(scope, "/total"),
        kernel,
        "tree faults vs the shell's rusage (minflt + majflt): {scope}"
    );
    assert_eq!(rec["lost"]["untracked_children"], 0);
}

/// The swap probe as a BTF tracepoint sizes a swap-entry change from the
/// current CPU's part of the mm's per-CPU counter, and sums every CPU's
/// part only on a CPU's first look or after the counter's shared count
/// moved. Two conditions where that could go wrong, against pswpout and
/// pswpin: one process whose two threads, on two CPUs, swap their halves
/// of one mapping out and in at once (both CPUs' parts move, and fold);
/// and 150 short-lived processes that swap one after another (each a new
/// mm, often at a dead one's address, whose parts start again at 0).
#[test]
fn swap_sized_from_one_cpus_part_keeps_the_books_across_threads_and_short_lives() {
    if !root_or_skip("swap_sized_from_one_cpus_part_keeps_the_books_across_threads_and_short_lives")
    {
        return;
    }
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let child = testchild();
    let threads = [path_str(&child), "rewrite-threads", "40000"];
    let loop_ = format!(
        "i=0; while [ $i -lt 150 ]; do {} rewrite 6000 || exit 1; i=$((i+1)); done",
        child.display()
    );
    let short = ["sh", "-c", loop_.as_str()];
    // 40,000 pages in 64 MiB, written three times; 6,000 pages (23 MiB)
    // in 16 MiB, written twice, 150 times.
    for (name, argv, limit) in [
        ("threads", &threads[..], 64u64 << 20),
        ("short-lived", &short[..], 16 << 20),
    ] {
        let cg = pressure::MemCgroup::new(limit);
        let before = pressure::vmstat();
        let wrapped = cg.in_cgroup_argv(argv);
        let wrapped: Vec<&str> = wrapped.iter().map(String::as_str).collect();
        let rec = record(dir.path(), name, &wrapped, &[]);
        let after = pressure::vmstat();
        let books = |k: &str| after[k] - before[k];
        let probe = probe(&rec, "kmem:rss_stat");
        assert_eq!(probe["method"], "tp_btf", "{name}: {probe}");
        let counters = &rec["totals"]["counters"];
        let c = |k: &str| {
            counters[k]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: no {k} in {counters:#}"))
        };
        let (out, inn, summed) = (
            c("swap_out_pages"),
            c("swap_in_pages"),
            c("swap_summed_changes"),
        );
        eprintln!(
            "{name}: {summed} changes summed, {} unsized",
            c("swap_unsized_changes")
        );
        assert_swap_books(name, [out, inn], [books("pswpout"), books("pswpin")], 1.0);
        // One swap-entry change per page each way here: were every change
        // summed, this would be about out + in.
        assert!(
            summed > 0 && summed < (out + inn) / 5,
            "{name}: {summed} of about {} changes were sized by a sum of every CPU's part",
            out + inn
        );
    }
}
