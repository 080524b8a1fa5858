//! Dirty throttling against the kernel's own record of it: `workload
//! dirty` writes 512 MiB with vm.dirty_bytes at 1 MiB while an idle child
//! runs beside it. A tracefs instance of the test's own, independent of
//! vmscope's programs, sums every `writeback:balance_dirty_pages` pause per
//! task: the writer's recorded pause time and count are within 10% of
//! them, the idle child has none, their cgroup is charged exactly the
//! writer's, the histogram holds at least the
//! writer's pauses, and the workload put the dirty limits back as they
//! were.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::Value;
use vmscope_tests::{
    assert_within_pct, pressure, record_to, root_or_skip, testchild, u64_at, vmscope_bin,
};

const TRACEFS: &str = "/sys/kernel/tracing";
const EVENT: &str = "events/writeback/balance_dirty_pages/enable";

/// A tracefs instance with only `balance_dirty_pages` enabled, removed
/// when dropped.
struct TraceInstance(PathBuf);

impl TraceInstance {
    fn new() -> TraceInstance {
        let dir = Path::new(TRACEFS)
            .join("instances")
            .join(format!("vmscope-test-dirty-{}", std::process::id()));
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("creating the trace instance {}: {e}", dir.display()));
        let t = TraceInstance(dir);
        std::fs::write(t.0.join("buffer_size_kb"), "16384").unwrap();
        std::fs::write(t.0.join(EVENT), "1").unwrap();
        t
    }

    /// Per task id: the sum of the positive `pause=` fields (ms) and their
    /// number.
    fn pauses(&self) -> BTreeMap<u64, (u64, u64)> {
        let text = std::fs::read_to_string(self.0.join("trace")).unwrap();
        let mut out: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((task, rest)) = line.split_once(" [") else {
                continue;
            };
            let Some(tid) = task
                .trim()
                .rsplit_once('-')
                .and_then(|(_, t)| t.parse().ok())
            else {
                continue;
            };
            let pause: Option<i64> = rest
                .split_whitespace()
                .find_map(|f| f.strip_prefix("pause=")?.parse().ok());
            if let Some(ms) = pause.filter(|p| *p > 0) {
                let e = out.entry(tid).or_default();
                e.0 += ms as u64;
                e.1 += 1;
            }
        }
        out
    }

    /// Events lost to a full buffer, over every CPU.
    fn overruns(&self) -> u64 {
        let Ok(cpus) = std::fs::read_dir(self.0.join("per_cpu")) else {
            return 0;
        };
        cpus.flatten()
            .filter_map(|c| std::fs::read_to_string(c.path().join("stats")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| l.strip_prefix("overrun:")?.trim().parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }
}

impl Drop for TraceInstance {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join(EVENT), "0");
        if let Err(e) = std::fs::remove_dir(&self.0) {
            eprintln!("removing {}: {e}", self.0.display());
        }
    }
}

fn dirty_limits() -> Vec<String> {
    [
        "dirty_bytes",
        "dirty_ratio",
        "dirty_background_bytes",
        "dirty_background_ratio",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(Path::new("/proc/sys/vm").join(f)).unwrap())
    .collect()
}

fn process<'a>(rec: &'a Value, comm: &str) -> Vec<&'a Value> {
    rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["comm"] == comm)
        .collect()
}

#[test]
fn dirty_throttling_pauses_match_the_tracepoints_own_sum() {
    if !root_or_skip("dirty_throttling_pauses_match_the_tracepoints_own_sum") {
        return;
    }
    let limits = dirty_limits();
    let dir = tempfile::tempdir().unwrap();
    let trace = TraceInstance::new();
    // Both in a cgroup of their own: its figure is theirs.
    let cg = pressure::MemCgroup::new(4 << 30);
    let script = format!(
        "echo $$ > {} && {{ {} workload dirty --size 512M --dirty-bytes 1M --dir /var/tmp & {} idle 300 & wait; }}",
        cg.procs_file().display(),
        vmscope_bin().display(),
        testchild().display()
    );
    let (o, rec) = record_to(
        dir.path(),
        "dirty",
        &["sh".to_string(), "-c".into(), script],
        &[],
        Duration::from_secs(300),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (by_task, lost) = (trace.pauses(), trace.overruns());
    drop(trace);
    assert_eq!(
        dirty_limits(),
        limits,
        "the workload left the limits changed"
    );
    assert_eq!(lost, 0, "the test's trace instance lost events");

    // The writer: the `vmscope` process that slept (the recorder does not
    // write).
    let writers: Vec<&Value> = process(&rec, "vmscope")
        .into_iter()
        .filter(|p| p["dirty_pauses"].as_u64().unwrap_or(0) > 0)
        .collect();
    assert_eq!(writers.len(), 1, "one writer: {:#}", rec["processes"]);
    let w = writers[0];
    let pid = w["pid"].as_u64().unwrap();
    let (ms, n) = by_task.get(&pid).copied().unwrap_or_default();
    let (got_ns, got_n) = (
        w["dirty_pause_ns"].as_u64().unwrap(),
        w["dirty_pauses"].as_u64().unwrap(),
    );
    eprintln!(
        "writer {pid}: vmscope {got_n} pauses, {:.0} ms; trace {n} pauses, {ms} ms",
        got_ns as f64 / 1e6
    );
    assert!(n >= 5, "too little throttling to judge: {by_task:?}");
    assert_within_pct("pause time vs the trace's", got_ns, ms * 1_000_000, 10.0);
    assert_within_pct("pauses vs the trace's", got_n, n, 10.0);

    // The idle child slept in none.
    let idle = process(&rec, "vmscope-testchi");
    assert_eq!(idle.len(), 1, "{:#}", rec["processes"]);
    assert!(
        idle[0]["dirty_pause_ns"].as_u64().unwrap_or(0) == 0
            && idle[0]["dirty_pauses"].as_u64().unwrap_or(0) == 0,
        "{}",
        idle[0]
    );

    // The cgroup was charged the writer's pauses.
    let mount = rec["cgroup_scheme"]["mount"].as_str().unwrap();
    let path = format!("/{}", cg.path().strip_prefix(mount).unwrap().display());
    let row = rec["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == path.as_str())
        .unwrap_or_else(|| panic!("no row for {path}: {:#}", rec["cgroups"]));
    assert_eq!(u64_at(row, "/totals/dirty_pause_ns"), got_ns, "{row}");
    assert_eq!(u64_at(row, "/totals/dirty_pauses"), got_n, "{row}");

    // System-wide, the histogram holds at least the writer's pauses.
    let h = &rec["totals"]["histograms"]["dirty_pause"];
    assert!(
        h["count"].as_u64().unwrap_or(0) >= got_n && h["sum_ns"].as_u64().unwrap_or(0) >= got_ns,
        "{h}"
    );
}
