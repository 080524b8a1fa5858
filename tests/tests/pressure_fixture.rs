//! The memory-pressure fixture itself, for real: a zram swap device comes
//! and goes, a workload larger than its cgroup's limit is swapped out, and
//! dropping the fixture leaves swap and the cgroup tree as they were.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use vmscope_tests::{
    pressure::{MemCgroup, ZramSwap, active_swaps, exclusive, vmstat},
    root_or_skip, run_with_timeout, testchild,
};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;

/// `/proc/swaps` without its Used column, which moves with unrelated
/// activity on any swap device that was already there.
fn swaps_table() -> Vec<String> {
    std::fs::read_to_string("/proc/swaps")
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.iter()
                .enumerate()
                .filter(|&(i, _)| i != 3)
                .map(|(_, s)| *s)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Whether `/proc/PID/cgroup` text places the process in `cg`, whose
/// directory sits at the root of its hierarchy.
fn lists_cgroup(text: &str, cg: &MemCgroup) -> bool {
    let name = cg.path().file_name().unwrap().to_string_lossy();
    let want = format!(":/{name}");
    text.lines().any(|l| l.ends_with(&want))
}

#[test]
fn zram_swap_is_active_while_alive_and_gone_after_drop() {
    if !root_or_skip("zram_swap_is_active_while_alive_and_gone_after_drop") {
        return;
    }
    let _guard = exclusive();
    let start = Instant::now();
    let swap = ZramSwap::new(256 * MIB);
    let dev = swap.device().to_path_buf();
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(
        active_swaps().contains(&dev),
        "{} not in /proc/swaps:\n{swaps}",
        dev.display()
    );
    let row = swaps
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&*dev.to_string_lossy()))
        .unwrap();
    let f: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(f[4], "32767", "not at the highest priority: {row}");
    // Size is in KiB; mkswap keeps one page for its header.
    let kib: u64 = f[2].parse().unwrap();
    assert!(
        (256 * 1024 - 8..=256 * 1024).contains(&kib),
        "size {kib} KiB in {row}"
    );

    // A second device, while zram0 (or another) is taken, is hot-added and
    // removed again on drop.
    let second = ZramSwap::new(64 * MIB);
    let dev2 = second.device().to_path_buf();
    let sysfs2 = std::path::PathBuf::from(format!("/sys/block/zram{}", second.index()));
    assert_ne!(dev2, dev);
    assert_ne!(
        second.index(),
        0,
        "zram0 is in use, so this one is hot-added"
    );
    assert!(active_swaps().contains(&dev2), "{}", dev2.display());
    drop(second);
    assert!(!active_swaps().contains(&dev2), "{}", dev2.display());
    assert!(!sysfs2.exists(), "{} not hot-removed", sysfs2.display());

    drop(swap);
    assert!(
        !active_swaps().contains(&dev),
        "{} still in /proc/swaps after drop",
        dev.display()
    );
    eprintln!(
        "zram_swap_is_active_while_alive_and_gone_after_drop: {} {:?}",
        dev.display(),
        start.elapsed()
    );
}

#[test]
fn workload_over_cgroup_limit_is_swapped_out() {
    if !root_or_skip("workload_over_cgroup_limit_is_swapped_out") {
        return;
    }
    let _guard = exclusive();
    let start = Instant::now();
    const LIMIT: u64 = 128 * MIB;
    const TOUCH: u64 = 512 * MIB;
    let swap = ZramSwap::new(2048 * MIB);
    let cg = MemCgroup::new(LIMIT);

    let child = testchild();
    let pages = (TOUCH / PAGE).to_string();
    let argv = cg.in_cgroup_argv(&[&child.to_string_lossy(), "touch", &pages]);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);

    let before = vmstat()["pswpout"];
    let out = run_with_timeout(cmd, Duration::from_secs(120));
    let after = vmstat()["pswpout"];
    assert!(
        out.status.success(),
        "workload failed: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    let delta = after - before;
    let want = (TOUCH - LIMIT) / PAGE * 8 / 10;
    assert!(
        delta >= want,
        "pswpout grew by {delta} pages, want at least {want}"
    );

    // The workload was charged to this cgroup, and its limit held.
    let peak_file = if cg.version() == 1 {
        "memory.max_usage_in_bytes"
    } else {
        "memory.peak"
    };
    let peak: u64 = std::fs::read_to_string(cg.path().join(peak_file))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        peak > LIMIT / 2 && peak <= LIMIT,
        "{peak_file} = {peak}, limit {LIMIT}"
    );
    let version = cg.version();
    drop(cg);
    drop(swap);
    eprintln!(
        "workload_over_cgroup_limit_is_swapped_out: cgroup v{}, pswpout +{delta} pages \
         (want >= {want}), peak {} MiB, {:?}",
        version,
        peak / MIB,
        start.elapsed()
    );
}

#[test]
fn drop_restores_swaps_and_removes_cgroup() {
    if !root_or_skip("drop_restores_swaps_and_removes_cgroup") {
        return;
    }
    let _guard = exclusive();
    let start = Instant::now();
    let swaps_before = swaps_table();
    let swap = ZramSwap::new(512 * MIB);
    let cg = MemCgroup::new(64 * MIB);
    let dir = cg.path().to_path_buf();
    assert!(dir.is_dir());

    // A task still inside the cgroup when it is dropped is moved out.
    let mut idle = cg
        .command(testchild())
        .args(["idle", "60000"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = idle.id();
    assert_eq!(cg.pids(), vec![pid]);
    assert_ne!(swaps_table(), swaps_before);

    drop(cg);
    let moved = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let _ = idle.kill();
    let _ = idle.wait();
    assert!(!dir.exists(), "{} still exists after drop", dir.display());
    assert!(
        !moved.contains(&*dir.file_name().unwrap().to_string_lossy()),
        "the lingering task was not moved out: {moved}"
    );

    drop(swap);
    assert_eq!(swaps_table(), swaps_before, "/proc/swaps not restored");
    eprintln!(
        "drop_restores_swaps_and_removes_cgroup: {:?}",
        start.elapsed()
    );
}

#[test]
fn command_and_wrapped_argv_start_inside_the_cgroup() {
    if !root_or_skip("command_and_wrapped_argv_start_inside_the_cgroup") {
        return;
    }
    let start = Instant::now();
    let cg = MemCgroup::new(64 * MIB);

    let out = cg.command("cat").arg("/proc/self/cgroup").output().unwrap();
    assert!(out.status.success(), "{:?}", out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        lists_cgroup(&text, &cg),
        "command(): not in {}:\n{text}",
        cg.path().display()
    );

    let argv = cg.in_cgroup_argv(&["cat", "/proc/self/cgroup"]);
    let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    assert!(out.status.success(), "{:?}", out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        lists_cgroup(&text, &cg),
        "in_cgroup_argv(): not in {}:\n{text}",
        cg.path().display()
    );

    // Arguments with blanks and quotes reach the program unchanged.
    let argv = cg.in_cgroup_argv(&["printf", "%s|", "a b", "it's", "$HOME"]);
    let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a b|it's|$HOME|");

    let dir = cg.path().to_path_buf();
    drop(cg);
    assert!(!dir.exists(), "{} still exists after drop", dir.display());
    eprintln!(
        "command_and_wrapped_argv_start_inside_the_cgroup: {:?}",
        start.elapsed()
    );
}
