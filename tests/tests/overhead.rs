//! `vmscope overhead --workloads` measures every workload under every mode
//! (nothing, record and serve as their own processes, empty programs on
//! the same hooks, the peer where installed) and leaves the system as it
//! found it: the zram swap device and the memory cgroup it made are gone
//! afterwards, also when Ctrl-C stops it half-way. The figures themselves are a benchmark's, not a
//! test's: only their presence and sign are checked here.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use vmscope_tests::{pressure, *};

/// The memory cgroups the bench names `vmscope-overhead-*`.
fn bench_cgroups() -> Vec<PathBuf> {
    let (root, _) = vmscope::experiments::pressure::memory_controller().unwrap();
    std::fs::read_dir(&root)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmscope-overhead-"))
        })
        .collect()
}

#[test]
fn workloads_bench_fills_every_cell_and_restores_the_system() {
    if !root_or_skip("workloads_bench_fills_every_cell_and_restores_the_system") {
        return;
    }
    let _lock = pressure::exclusive();
    let swaps = pressure::active_swaps();
    let o = vmscope_within(
        &["overhead", "--workloads", "-r", "1", "--pages", "16384"],
        Duration::from_secs(600),
    );
    ok(&o, "overhead --workloads");
    let out = text(&o.stdout);
    let header = out.lines().nth(1).unwrap();
    for mode in ["nothing", "record", "serve", "floor"] {
        assert!(header.contains(mode), "no {mode} column: {out}");
    }
    let columns = header.split_whitespace().count() - 2; // "workload unit"
    for row in [
        "fault loop",
        "mmap+touch+munmap 64K",
        "mprotect loop",
        "swap loop (zram)",
    ] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(row))
            .unwrap_or_else(|| panic!("no {row} row: {out}"));
        let cells: Vec<f64> = line[row.len() + 2..]
            .split_whitespace()
            .skip(1) // the unit
            .map(|c| c.parse().unwrap_or_else(|_| panic!("{row}: {line}")))
            .collect();
        assert_eq!(cells.len(), columns, "{row}: {line}");
        assert!(cells.iter().all(|&c| c > 0.0), "{row}: {line}");
    }
    let redis = out
        .lines()
        .find(|l| l.trim_start().starts_with("redis set+get"))
        .unwrap_or_else(|| panic!("no redis row: {out}"));
    let installed = ["redis-server", "redis-benchmark"].iter().all(|b| {
        Command::new("sh")
            .args(["-c", &format!("command -v {b}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    assert_eq!(
        redis.contains("unavailable: redis-server or redis-benchmark missing"),
        !installed,
        "{redis}"
    );
    assert!(out.contains("against nothing attached"), "{out}");
    assert_eq!(pressure::active_swaps(), swaps, "a swap device was left on");
    assert!(bench_cgroups().is_empty(), "{:?} left", bench_cgroups());
}

#[test]
fn ctrl_c_stops_the_workloads_bench_and_removes_its_swap_and_cgroup() {
    if !root_or_skip("ctrl_c_stops_the_workloads_bench_and_removes_its_swap_and_cgroup") {
        return;
    }
    let _lock = pressure::exclusive();
    let swaps = pressure::active_swaps();
    let mut cmd = Command::new(vmscope_bin());
    // Ctrl-C at a terminal: SIGINT at its default action, whatever this
    // test inherited (a harness started in the background ignores it).
    // SAFETY: only an async-signal-safe call between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt as _;
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd
        .args(["overhead", "--workloads", "-r", "3", "--pages", "16384"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once its cgroup exists the swap device is on too (made first).
    let t = Instant::now();
    while bench_cgroups().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(60), "no cgroup made");
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before its cgroup"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_ne!(pressure::active_swaps(), swaps, "no swap device made");
    // SAFETY: signalling our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "still running 120 s after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status}");
    assert_eq!(pressure::active_swaps(), swaps, "a swap device was left on");
    assert!(bench_cgroups().is_empty(), "{:?} left", bench_cgroups());
}
