//! Hooks attached as BTF tracepoints count what their classic fallbacks
//! count. Each case is recorded twice, once as vmscope attaches by default
//! (tp_btf where the kernel allows it) and once with
//! `VMSCOPE_DISABLE_PROBES=tp_btf`, and both are held to the same ground
//! truth.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{process::Command, time::Duration};

use vmscope_tests::{pressure, *};

/// The two ways, with the method each hook must have been attached by.
const WAYS: [(&str, &str); 2] = [("", "tp_btf"), ("tp_btf", "tracepoint")];

fn record(dir: &std::path::Path, name: &str, disable: &str, argv: &[&str]) -> serde_json::Value {
    let out = dir.join(format!("{name}.json"));
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "250ms", "-o"])
        .arg(&out)
        .arg("--")
        .args(argv);
    if !disable.is_empty() {
        c.env("VMSCOPE_DISABLE_PROBES", disable);
    }
    let o = run_with_timeout(c, Duration::from_secs(120));
    ok(
        &o,
        &format!("vmscope record {argv:?} (disabled: {disable:?})"),
    );
    read_json(&out)
}

fn method(rec: &serde_json::Value, probe: &str) -> (String, String) {
    let p = rec["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == probe)
        .unwrap_or_else(|| panic!("no {probe} in {:#}", rec["probes"]));
    assert_eq!(p["attached"], true, "{p}");
    (
        p["method"].as_str().unwrap_or_default().to_string(),
        p["reason"].as_str().unwrap_or_default().to_string(),
    )
}

fn assert_method(rec: &serde_json::Value, probe: &str, want: &str) {
    let (got, reason) = method(rec, probe);
    assert_eq!(got, want, "{probe}: {reason}");
    if want == "tracepoint" {
        assert!(
            reason.contains("not tp_btf") && reason.contains("VMSCOPE_DISABLE_PROBES"),
            "{probe}: the fallback must say why: {reason:?}"
        );
    }
}

/// The fork and exec hooks: a shell that starts 12 test children one after
/// another; every one is followed (fork), named after its program (exec),
/// and has at least the faults it took by touching its pages.
#[test]
fn fork_and_exec_hooks_follow_the_same_tree_either_way() {
    if !root_or_skip("fork_and_exec_hooks_follow_the_same_tree_either_way") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    const CHILDREN: usize = 12;
    const PAGES: u64 = 500;
    for (disable, want) in WAYS {
        let reports: Vec<_> = (0..CHILDREN)
            .map(|i| dir.path().join(format!("{want}-{i}.ru")))
            .collect();
        let script: Vec<String> = reports
            .iter()
            .map(|r| {
                format!(
                    "{} --report {} touch {PAGES}",
                    testchild().display(),
                    r.display()
                )
            })
            .collect();
        let script = script.join("; ");
        let rec = record(dir.path(), want, disable, &["sh", "-c", &script]);
        assert_method(&rec, "sched:sched_process_fork", want);
        assert_method(&rec, "sched:sched_process_exec", want);
        let procs = rec["processes"].as_array().unwrap();
        for r in &reports {
            let ru = read_json(r);
            let pid = ru["pid"].as_u64().unwrap();
            let row = procs
                .iter()
                .find(|p| p["pid"].as_u64() == Some(pid))
                .unwrap_or_else(|| panic!("{want}: child {pid} not followed: {procs:#?}"));
            assert_eq!(row["comm"], "vmscope-testchi", "{want}: {row}");
            let kernel = u64_at(&ru, "/minflt") + u64_at(&ru, "/majflt");
            assert_within_pct(
                &format!("{want}: child {pid} faults vs rusage"),
                u64_at(row, "/faults/total"),
                kernel,
                2.0,
            );
        }
    }
}

/// The TLB hook against the kernel's own count of shootdown interrupts
/// (the "TLB" row of /proc/interrupts) over the same run: the received
/// flushes (remote shootdown, or wrong CPU) are system-wide in both.
#[test]
fn tlb_hook_counts_the_kernels_shootdown_interrupts_either_way() {
    if !root_or_skip("tlb_hook_counts_the_kernels_shootdown_interrupts_either_way") {
        return;
    }
    // The interrupts are counted system-wide: not while another test here
    // makes reclaim shoot TLBs down.
    let _lock = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let child = testchild();
    for (disable, want) in WAYS {
        let before = tlb_interrupts();
        let rec = record(
            dir.path(),
            want,
            disable,
            &[path_str(&child), "shootdown", "4000"],
        );
        let after = tlb_interrupts();
        assert_method(&rec, "tlb:tlb_flush", want);
        let c = &rec["totals"]["counters"];
        let received = u64_at(c, "/tlb_remote_shootdown") + u64_at(c, "/tlb_remote_wrong_cpu");
        let books = after - before;
        assert!(books > 1000, "{want}: only {books} TLB interrupts");
        // The interrupts also cover the moments before vmscope attached and
        // after it stopped counting; a flush that finds the CPU in the idle
        // task's mm returns before the tracepoint.
        assert_within_pct(
            &format!("{want}: received flushes vs TLB interrupts"),
            received,
            books,
            10.0,
        );
    }
}

/// The sum over CPUs of /proc/interrupts' "TLB" row.
fn tlb_interrupts() -> u64 {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("TLB:"))
        .expect("a TLB row in /proc/interrupts (x86)");
    line.split_whitespace()
        .skip(1)
        .map_while(|f| f.parse::<u64>().ok())
        .sum()
}

/// The reclaim LRU and write-back hooks under memcg reclaim, against the
/// kernel's books. Anonymous memory reclaimed with swap on: every page
/// written back is one of vmstat's pswpout (counted system-wide, whoever
/// reclaims), and what the shrinker reports reclaimed covers it. A file
/// made active (read twice) in a cgroup that may not swap: reclaim must
/// deactivate it, and the deactivations are vmstat's pgdeactivate. (Memcg
/// reclaim leaves vmstat's pgscan/pgsteal alone, so those bound the
/// figures rather than equal them.)
#[test]
fn lru_and_write_back_hooks_agree_with_vmstat_either_way() {
    if !root_or_skip("lru_and_write_back_hooks_agree_with_vmstat_either_way") {
        return;
    }
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let child = testchild();
    let file = dir.path().join("active-file");
    // 48 MiB of file written (synced, so reclaim need not wait for its
    // write-back) and read twice, then 32 MiB of anonymous memory, in 64 MiB.
    let file_script = format!(
        "dd if=/dev/urandom of={f} bs=1M count=48 conv=fsync status=none && \
         cat {f} {f} > /dev/null && exec {c} touch 8192",
        f = file.display(),
        c = child.display()
    );
    let anon = [path_str(&child), "rewrite", "18000"];
    for (disable, want) in WAYS {
        // Anonymous: 70 MiB written twice in 64 MiB.
        let cg = pressure::MemCgroup::new(64 << 20);
        let argv = cg.in_cgroup_argv(&anon);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let rec = record(dir.path(), &format!("{want}-anon"), disable, &argv);
        drop(cg);
        for probe in [
            "vmscan:mm_vmscan_lru_shrink_inactive",
            "vmscan:mm_vmscan_lru_shrink_active",
            "vmscan:mm_vmscan_write_folio",
        ] {
            assert_method(&rec, probe, want);
        }
        let c = &rec["totals"]["counters"];
        let pswpout = u64_at(&rec["totals"]["vmstat"], "/counters/pswpout");
        let (scanned, reclaimed, anon_written) = (
            u64_at(c, "/lru_scanned_pages"),
            u64_at(c, "/lru_reclaimed_pages"),
            u64_at(c, "/reclaim_write_anon_pages"),
        );
        eprintln!(
            "{want}: pswpout {pswpout}, anon written {anon_written}, scanned {scanned}, \
             reclaimed {reclaimed}"
        );
        assert!(pswpout > 10_000, "{want}: only {pswpout} pages swapped out");
        assert_within_pct(
            &format!("{want}: anon write-back vs pswpout"),
            anon_written,
            pswpout,
            5.0,
        );
        assert!(
            reclaimed >= pswpout * 95 / 100 && scanned >= reclaimed,
            "{want}: scanned {scanned} >= reclaimed {reclaimed} >= ~pswpout {pswpout}"
        );

        // File: the active list shrunk.
        let cg = pressure::MemCgroup::new(64 << 20);
        no_swap(&cg);
        let sh = ["sh", "-c", file_script.as_str()];
        let argv = cg.in_cgroup_argv(&sh);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let rec = record(dir.path(), &format!("{want}-file"), disable, &argv);
        drop(cg);
        let c = &rec["totals"]["counters"];
        let pgdeactivate = u64_at(&rec["totals"]["vmstat"], "/counters/pgdeactivate");
        let (taken, deactivated, reclaimed) = (
            u64_at(c, "/lru_active_taken_pages"),
            u64_at(c, "/lru_active_deactivated_pages"),
            u64_at(c, "/lru_reclaimed_pages"),
        );
        eprintln!(
            "{want}: pgdeactivate {pgdeactivate}, active taken {taken}, deactivated \
             {deactivated}, reclaimed {reclaimed}"
        );
        assert!(deactivated > 1000, "{want}: only {deactivated} deactivated");
        assert!(deactivated <= taken, "{want}: {deactivated} of {taken}");
        assert_within_pct(
            &format!("{want}: deactivated vs pgdeactivate"),
            deactivated,
            pgdeactivate,
            5.0,
        );
        assert!(reclaimed > 1000, "{want}: only {reclaimed} reclaimed");
    }
}

/// Keeps the cgroup's anonymous memory out of swap, so its reclaim takes
/// file pages (v1: swappiness 0; v2: no swap allowed).
fn no_swap(cg: &pressure::MemCgroup) {
    let v1 = cg.path().join("memory.swappiness");
    let (path, value) = if v1.exists() {
        (v1, "0")
    } else {
        (cg.path().join("memory.swap.max"), "0")
    };
    std::fs::write(&path, value).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
