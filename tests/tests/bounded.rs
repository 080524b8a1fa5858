//! State stays bounded by the processes alive, not the processes seen: the
//! kernel's per-process and followed-set entries go when a process exits,
//! its last counts are still recorded, one whose exited entry was evicted
//! unread is still reported ended, and a reused pid starts from zero with
//! its own name.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{process::Command, time::Duration};

use vmscope_tests::*;

/// The reuse test steers pid allocation (`ns_last_pid`), which would hand
/// the churn test's processes reused pids: one at a time.
static PIDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn record(dir: &std::path::Path, name: &str, script: &str) -> serde_json::Value {
    let out = dir.join(format!("{name}.json"));
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "200ms", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", script]);
    let o = run_with_timeout(c, Duration::from_secs(300));
    assert!(
        o.status.success(),
        "record: {:?} {}",
        o.status,
        text(&o.stderr)
    );
    read_json(&out)
}

fn last_sample(rec: &serde_json::Value) -> &serde_json::Value {
    rec["samples"].as_array().unwrap().last().unwrap()
}

/// Thousands of short-lived processes, some with threads: every entry is
/// pruned once its process has gone, none is evicted, and the tree's
/// faults still match the kernel's books for it.
#[test]
fn process_churn_leaves_no_entries_behind_and_loses_no_counts() {
    if !root_or_skip("process_churn_leaves_no_entries_behind_and_loses_no_counts") {
        return;
    }
    let _one = PIDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let child = testchild();
    // `populate` maps memory from a second thread (a thread per process).
    let script = format!(
        "i=0; while [ $i -lt 1500 ]; do /bin/true; {c} populate 16 || exit 1; i=$((i+1)); done; sleep 1",
        c = child.display()
    );
    let rec = record(dir.path(), "churn", &script);
    let last = last_sample(&rec);
    // Exits are pruned a read after they are seen: the closing second
    // gives the last ones time.
    let (pruned, entries) = (u64_at(last, "/proc_pruned"), u64_at(last, "/proc_entries"));
    assert!(entries <= 3, "{entries} entries left after the tree exited");
    assert!(
        pruned >= 2970,
        "pruned {pruned} of 3000+ processes, {entries} left: {last:#}"
    );
    let tracked = u64_at(last, "/tracked_entries");
    // Bounded by what is alive (and not yet pruned), not by the 4500 tasks
    // (threads included) the tree ran.
    assert!(tracked <= 100, "{tracked} followed-set entries left");
    assert_eq!(
        rec["lost"]["proc_evictions"], 0,
        "{:#} {:#}",
        rec["lost"], last["counters"]
    );
    assert_eq!(rec["lost"]["untracked_children"], 0);
    let ru = &rec["child"]["rusage"];
    let kernel = u64_at(ru, "/minflt") + u64_at(ru, "/majflt");
    let scope = u64_at(&rec["totals"]["scope_faults"], "/total");
    assert_within_pct("tree faults vs rusage under churn", scope, kernel, 2.0);
}

/// A hundred processes read alive, whose exited entries are then evicted
/// unread by 12,000 newer ones (more than the per-process map holds)
/// within one interval: each is still reported ended (so no view keeps it
/// for good), and the evictions are counted.
#[test]
fn an_exited_process_evicted_before_its_last_read_is_still_ended() {
    const TEST: &str = "an_exited_process_evicted_before_its_last_read_is_still_ended";
    if !root_or_skip(TEST) {
        return;
    }
    let _one = PIDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let c = testchild();
    let pids = dir.path().join("pids");
    // Read alive at 10 s, gone by 12 s, evicted by the forks before the
    // read at 20 s or the one after.
    let script = format!(
        "for i in $(seq 100); do {c} idle 11000 & echo $! >> {p}; done; sleep 12; {c} forks 12000; wait",
        c = c.display(),
        p = pids.display()
    );
    let out = dir.path().join("evicted.json");
    let mut cmd = Command::new(vmscope_bin());
    cmd.args(["record", "-i", "10s", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script]);
    let o = run_with_timeout(cmd, Duration::from_secs(300));
    assert!(
        o.status.success(),
        "record: {:?} {}",
        o.status,
        text(&o.stderr)
    );
    let rec = read_json(&out);
    assert!(
        u64_at(&rec["lost"], "/proc_evictions") >= 100,
        "the forks did not evict enough entries: {:#}",
        rec["lost"]
    );
    let exited: std::collections::HashSet<u64> = rec["samples"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["exited"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_u64())
        .collect();
    let idle: Vec<u64> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(idle.len(), 100);
    let never: Vec<&u64> = idle.iter().filter(|p| !exited.contains(p)).collect();
    assert!(
        never.is_empty(),
        "{} of the 100 idle processes never reported ended: {never:?}",
        never.len()
    );
}

/// Two processes under one pid, one after the other (the pid forced with
/// `ns_last_pid`): each is its own row, with its own name and counts.
#[test]
fn a_reused_pid_starts_from_zero_with_its_own_name() {
    if !root_or_skip("a_reused_pid_starts_from_zero_with_its_own_name") {
        return;
    }
    let _one = PIDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    for name in ["alpha", "beta"] {
        std::os::unix::fs::symlink(testchild(), dir.path().join(name)).unwrap();
    }
    let pids = dir.path().join("pids");
    let d = dir.path().display();
    // Between the two: a pause longer than the interval (alpha's entry is
    // read a last time and pruned first) or none (beta finds it unpruned).
    for pause in ["0.5", "0"] {
        let mut same = None;
        for _attempt in 0..5 {
            let script = format!(
                "{d}/alpha touch 3000 & a=$!; wait $a; sleep {pause}; \
                 echo $((a-1)) > /proc/sys/kernel/ns_last_pid; \
                 {d}/beta touch 500 & b=$!; wait $b; echo $a $b > {p}",
                p = pids.display()
            );
            let rec = record(dir.path(), "reuse", &script);
            let t = std::fs::read_to_string(&pids).unwrap();
            let v: Vec<u64> = t.split_whitespace().map(|x| x.parse().unwrap()).collect();
            if v[0] == v[1] {
                same = Some((rec, v[0]));
                break;
            }
            // Another process took the pid first: try again.
        }
        let (rec, pid) = same.expect("pid not reused in 5 attempts");
        let rows: Vec<&serde_json::Value> = rec["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["pid"] == pid)
            .collect();
        let beta = rows
            .iter()
            .find(|p| p["comm"] == "beta")
            .unwrap_or_else(|| panic!("pause {pause}: no beta row under pid {pid}: {rows:#?}"));
        let beta_faults = u64_at(&beta["faults"], "/total");
        assert!(
            (500..1500).contains(&beta_faults),
            "pause {pause}: beta's faults {beta_faults} (alpha's 3000 inherited?)"
        );
        if pause != "0" {
            let alpha = rows
                .iter()
                .find(|p| p["comm"] == "alpha")
                .unwrap_or_else(|| panic!("no alpha row under pid {pid}: {rows:#?}"));
            let alpha_faults = u64_at(&alpha["faults"], "/total");
            assert!(
                (3000..4000).contains(&alpha_faults),
                "alpha's faults {alpha_faults}"
            );
        }
    }
}
