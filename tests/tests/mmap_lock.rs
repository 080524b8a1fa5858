//! mmap_lock contention against what the workload itself did: `workload
//! mmap-lock` recorded with `--mmap-lock`, once without a storm (the
//! control) and once beside an mprotect storm on the faulting threads'
//! mapping.
//!
//! - The storm's write-lock acquisitions are its own calls, exactly: every
//!   mprotect takes the write lock once, so the process's write acquisitions
//!   less the control's (thread start-up and teardown, the same in both) are
//!   the workload's count of storm calls, within a few.
//! - Every write hold closed (acquired to released), at least one per call.
//! - The faulting threads' read waits: near zero in the control (a fault
//!   takes its mapping's own lock, not the mmap_lock), and many times more,
//!   and longer, beside the storm.
//! - Without `--mmap-lock` the figures are unavailable, not 0, and say how
//!   to turn them on.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{path::Path, process::Command, time::Duration};

use serde_json::Value;
use vmscope_tests::{
    child_row, last_json_line, read_json, root_or_skip, run_with_timeout, text, u64_at, vmscope_bin,
};

const FAULTS: u64 = 200_000;
const THREADS: u64 = 2;

/// `record [--mmap-lock] -- vmscope workload mmap-lock --storm STORM`: the
/// recording, the workload's JSON line and the child's row.
fn run(dir: &Path, storm: &str, probe: bool) -> (Value, Value, Value) {
    let out = dir.join(format!("{storm}-{probe}.json"));
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "250ms", "-o"]).arg(&out);
    if probe {
        c.arg("--mmap-lock");
    }
    c.arg("--")
        .arg(vmscope_bin())
        .args(["workload", "mmap-lock", "--storm", storm])
        .args(["--threads", &THREADS.to_string()])
        .args(["--faults", &FAULTS.to_string()]);
    let o = run_with_timeout(c, Duration::from_secs(120));
    assert!(o.status.success(), "{storm}: {}", text(&o.stderr));
    let doc = last_json_line(&o.stdout);
    let rec = read_json(&out);
    let row = child_row(&rec).clone();
    (rec, doc, row)
}

#[test]
fn storm_write_locks_are_counted_exactly_and_fault_waits_grow_with_them() {
    const TEST: &str = "storm_write_locks_are_counted_exactly_and_fault_waits_grow_with_them";
    if !root_or_skip(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, _, control) = run(dir.path(), "none", true);
    let (rec, doc, storm) = run(dir.path(), "mprotect", true);
    let calls = u64_at(&doc, "/storm_calls");
    let n = |row: &Value, k: &str| u64_at(row, &format!("/{k}"));
    eprintln!(
        "{TEST}: control: read {} waits {} µs, write {}; storm ({calls} calls): read {} waits \
         {} µs, write {}, failed {}",
        n(&control, "mmap_read_waits"),
        n(&control, "mmap_read_wait_ns") / 1000,
        n(&control, "mmap_write_waits"),
        n(&storm, "mmap_read_waits"),
        n(&storm, "mmap_read_wait_ns") / 1000,
        n(&storm, "mmap_write_waits"),
        n(&storm, "mmap_lock_fails"),
    );
    assert!(calls >= 1000, "too small a storm to judge: {doc}");

    let extra = n(&storm, "mmap_write_waits").saturating_sub(n(&control, "mmap_write_waits"));
    assert!(
        extra.abs_diff(calls) <= 20,
        "write acquisitions beyond the control's: {extra}, storm calls: {calls}"
    );
    let hold = &rec["totals"]["histograms"]["mmap_lock_write_hold"];
    assert!(hold["count"].as_u64().unwrap_or(0) >= calls, "{hold}");

    let faults = THREADS * FAULTS;
    let (c_waits, s_waits) = (n(&control, "mmap_read_waits"), n(&storm, "mmap_read_waits"));
    assert!(
        c_waits * 100 < faults,
        "control: {c_waits} read waits for {faults} faults, not near zero"
    );
    assert!(
        s_waits >= 10 * c_waits.max(10),
        "storm: {s_waits} read waits against the control's {c_waits}"
    );
    let (c_ns, s_ns) = (
        n(&control, "mmap_read_wait_ns"),
        n(&storm, "mmap_read_wait_ns"),
    );
    assert!(
        s_ns >= 10 * c_ns.max(10_000),
        "storm: {s_ns} ns of read waits against the control's {c_ns}"
    );
}

#[test]
fn without_the_flag_the_figures_are_unavailable_not_zero() {
    const TEST: &str = "without_the_flag_the_figures_are_unavailable_not_zero";
    if !root_or_skip(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (rec, _, row) = run(dir.path(), "mprotect", false);
    for k in ["mmap_read_waits", "mmap_read_wait_ns", "mmap_write_waits"] {
        assert!(row[k].is_null(), "{k}: {}", row[k]);
    }
    let why = rec["totals"]["unavailable"]["histogram mmap_lock_wait_read"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("--mmap-lock"),
        "{:#}",
        rec["totals"]["unavailable"]
    );
    assert!(rec["totals"]["stall"]["mmap_lock_wait_ms"].is_null());
    assert!(rec["totals"]["histograms"]["mmap_lock_wait_read"].is_null());
}
