//! Hooks attached as BTF tracepoints count what their classic fallbacks
//! count. Each case is recorded twice, once as vmscope attaches by default
//! (tp_btf where the kernel allows it) and once with
//! `VMSCOPE_DISABLE_PROBES=tp_btf`, and both are held to the same ground
//! truth.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{process::Command, time::Duration};

use vmscope_tests::*;

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
