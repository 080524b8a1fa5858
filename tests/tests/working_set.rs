//! The working set (`--working-set`, the referenced-bit scan) against a
//! workload whose hot set is known exactly: `vmscope workload hotset` maps
//! 1 GiB, writes all of it, then touches every page of a random hot set at
//! least once every 200 ms and nothing else. The figure must find the hot
//! set, not the resident size, follow it when it grows, and split it by
//! cgroup.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::Path,
    process::{Child, ChildStdin, Command, Stdio},
    time::{Duration, Instant},
};

use vmscope_tests::{pressure, *};

const MIB: u64 = 1 << 20;

/// A running hotset workload, killed when dropped.
struct Hotset {
    child: Child,
    stdin: ChildStdin,
    pid: u32,
}

impl Hotset {
    fn start(mut cmd: Command, size: &str, hot: &str) -> Hotset {
        cmd.args(["workload", "hotset", "--size", size, "--hot", hot])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready: serde_json::Value = loop {
            let line = lines
                .next()
                .expect("hotset ended before it was ready")
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["event"] == "ready" {
                break v;
            }
        };
        // The rest of its output is not needed, but must not block it.
        std::thread::spawn(move || lines.for_each(drop));
        let pid = u32::try_from(ready["pid"].as_u64().unwrap()).unwrap();
        Hotset { child, stdin, pid }
    }

    fn set_hot(&mut self, hot: &str) {
        writeln!(self.stdin, "hot {hot}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn rss(&self) -> u64 {
        let t = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", self.pid)).unwrap();
        let kb: u64 = t
            .lines()
            .find_map(|l| l.strip_prefix("Rss:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        kb * 1024
    }
}

impl Drop for Hotset {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The windows streamed so far: (end in s since the recording's start,
/// the scope's working set in bytes).
fn windows(path: &Path) -> Vec<(f64, u64, serde_json::Value)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue; // a line being written
        };
        if v["type"] != "sample" {
            continue;
        }
        for w in v["working_set"].as_array().into_iter().flatten() {
            let total = w["procs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["working_set_bytes"].as_u64().unwrap())
                .sum();
            out.push((w["end_ns"].as_u64().unwrap() as f64 / 1e9, total, w.clone()));
        }
    }
    out
}

fn samples_seen(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(r#""type":"sample""#))
        .count()
}

fn within(got: u64, want: u64, pct: f64) -> bool {
    (got as f64 - want as f64).abs() <= want as f64 * pct / 100.0
}

#[test]
fn working_set_finds_the_hot_set_within_a_window_and_follows_it_as_it_grows() {
    if !root_or_skip("working_set_finds_the_hot_set_within_a_window_and_follows_it_as_it_grows") {
        return;
    }
    let _x = pressure::exclusive();
    let mut hot = Hotset::start(Command::new(vmscope_bin()), "1G", "256M");
    assert!(hot.rss() >= 1024 * MIB, "the whole GiB is resident");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("wss.jsonl");
    let pid = hot.pid.to_string();
    let mut record = Command::new(vmscope_bin());
    record
        .args([
            "record",
            "--working-set",
            "--format",
            "jsonl",
            "-d",
            "40s",
            "-p",
            &pid,
            "-o",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let record = record.spawn().unwrap();
    // The recording's clock starts at its first sample.
    let deadline = Instant::now() + Duration::from_secs(30);
    while samples_seen(&out) == 0 {
        assert!(Instant::now() < deadline, "no sample streamed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let t0 = Instant::now();
    // The first window ends 10 s after the start (and a little reading).
    while windows(&out).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(13),
            "no window within 13 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (end, first, w) = windows(&out).remove(0);
    assert!(end <= 11.0, "the first window ended at {end} s");
    assert!(
        within(first, 256 * MIB, 10.0),
        "the first window's working set is {} MiB, not 256 MiB ± 10% (resident: 1 GiB): {w:#}",
        first / MIB
    );
    let p = &w["procs"][0];
    assert_eq!(p["pid"].as_u64(), Some(u64::from(hot.pid)), "{w:#}");
    assert!(p["rss_bytes"].as_u64().unwrap() >= 1024 * MIB, "{w:#}");
    // Idle ages: the bytes untouched in the window are the cold 768 MiB.
    let refs = p["referenced_by_edge"].as_array().unwrap();
    assert_eq!(refs.len(), 2, "edges 1 s and 10 s: {w:#}");
    let cold = p["rss_bytes"].as_u64().unwrap() - p["working_set_bytes"].as_u64().unwrap();
    assert!(
        within(cold, 768 * MIB, 5.0),
        "cold {} MiB: {w:#}",
        cold / MIB
    );

    hot.set_hot("512M");
    let changed = t0.elapsed().as_secs_f64();
    let shown = loop {
        let late: Vec<_> = windows(&out)
            .into_iter()
            .filter(|(end, _, _)| *end > changed + 1.0)
            .collect();
        if let Some((end, bytes, _)) = late.iter().find(|(_, b, _)| within(*b, 512 * MIB, 10.0)) {
            break (*end, *bytes);
        }
        assert!(
            t0.elapsed().as_secs_f64() < changed + 16.0,
            "the hot set grew to 512 MiB at {changed:.1} s; windows since: {:?}",
            late.iter()
                .map(|(e, b, _)| (*e, b / MIB))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        shown.0 <= changed + 15.0,
        "512 MiB shown at {:.1} s, {:.1} s after the change",
        shown.0,
        shown.0 - changed
    );
    // Ctrl-C ends the recording with its totals.
    // SAFETY: signals the recorder this test started.
    unsafe { libc::kill(i32::try_from(record.id()).unwrap(), libc::SIGINT) };
    let o = record.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "record: {:?} {}",
        o.status,
        text(&o.stderr)
    );
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("working set (10s window, referenced_scan)"),
        "record says the figure and its method: {stderr}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let rec: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let ws = &rec["working_set"];
    assert_eq!(ws["method"], "referenced_scan", "{ws:#}");
    assert!(ws["windows"].as_u64().unwrap() >= 2, "{ws:#}");
    assert!(
        within(ws["scope"]["last_bytes"].as_u64().unwrap(), 512 * MIB, 10.0),
        "{ws:#}"
    );
    assert!(
        within(ws["scope"]["max_bytes"].as_u64().unwrap(), 512 * MIB, 10.0),
        "{ws:#}"
    );
    // The header says how, and which methods the kernel offers.
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let methods = header["working_set"]["methods"].as_array().unwrap();
    assert_eq!(methods.len(), 3, "{methods:#?}");
    assert!(
        methods
            .iter()
            .any(|m| m["method"] == "referenced_scan" && m["used"] == true),
        "{methods:#?}"
    );
}

#[test]
fn working_set_per_cgroup_splits_two_hot_sets() {
    if !root_or_skip("working_set_per_cgroup_splits_two_hot_sets") {
        return;
    }
    let _x = pressure::exclusive();
    let (cg_a, cg_b) = (
        pressure::MemCgroup::new(1 << 30),
        pressure::MemCgroup::new(1 << 30),
    );
    let a = Hotset::start(cg_a.command(vmscope_bin()), "512M", "128M");
    let b = Hotset::start(cg_b.command(vmscope_bin()), "512M", "384M");
    let dir = tempfile::tempdir().unwrap();
    let pids = format!("{},{}", a.pid, b.pid);
    let o = vmscope_within(
        &[
            "record",
            "--working-set",
            "-d",
            "12s",
            "-p",
            &pids,
            "-o",
            path_str(&dir.path().join("wss.json")),
        ],
        Duration::from_secs(60),
    );
    ok(&o, "record");
    let rec = read_json(&dir.path().join("wss.json"));
    let cgroups = &rec["working_set"]["cgroups"];
    let figure = |cg: &pressure::MemCgroup| {
        let name = cg.path().file_name().unwrap().to_str().unwrap().to_string();
        let (_, f) = cgroups
            .as_object()
            .unwrap()
            .iter()
            .find(|(path, _)| path.ends_with(&format!("/{name}")))
            .unwrap_or_else(|| panic!("no cgroup {name} in {cgroups:#}"));
        f["last_bytes"].as_u64().unwrap()
    };
    let (fa, fb) = (figure(&cg_a), figure(&cg_b));
    assert!(
        within(fa, 128 * MIB, 10.0),
        "cgroup with 128 MiB hot: {} MiB",
        fa / MIB
    );
    assert!(
        within(fb, 384 * MIB, 10.0),
        "cgroup with 384 MiB hot: {} MiB",
        fb / MIB
    );
    drop((a, b));
}

/// `lab wss` checks the scan against its own hot set, and says which
/// methods it could not check and why. Needs no privilege: the workload is
/// its own child.
#[test]
fn lab_wss_checks_the_scan_against_a_hot_set_that_grows() {
    // A system-wide scan in another test would clear its bits too.
    let _x = pressure::exclusive();
    let o = vmscope_within(
        &[
            "lab", "wss", "--size", "256M", "--hot", "64M", "--grow", "128M", "--window", "2s",
            "--json",
        ],
        Duration::from_secs(120),
    );
    ok(&o, "lab wss");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let phases = v["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "{v:#}");
    for (p, hot) in phases.iter().zip([64 * MIB, 128 * MIB]) {
        assert_eq!(p["hot_bytes"].as_u64(), Some(hot), "{v:#}");
        assert_eq!(p["method"], "referenced_scan", "{v:#}");
        assert!(
            within(p["measured_bytes"].as_u64().unwrap(), hot, 10.0),
            "{v:#}"
        );
        assert_eq!(p["ok"], true, "{v:#}");
        assert!(p["resident_bytes"].as_u64().unwrap() >= 256 * MIB, "{v:#}");
    }
    let methods = v["methods"].as_array().unwrap();
    assert!(
        methods
            .iter()
            .all(|m| m["used"] == true || !m["detail"].as_str().unwrap().is_empty()),
        "every method not used says why: {v:#}"
    );
    assert!(v["scan_cpu_share"].as_f64().unwrap() > 0.0, "{v:#}");
}

/// `top --working-set` shows the followed process's working set as a row
/// of its rates, with the idle ages beside it.
#[test]
fn top_shows_the_working_set_of_the_followed_process() {
    if !root_or_skip("top_shows_the_working_set_of_the_followed_process") {
        return;
    }
    // Another scan of the same process clears its bits too.
    let _x = pressure::exclusive();
    let hot = Hotset::start(Command::new(vmscope_bin()), "256M", "64M");
    let pid = hot.pid.to_string();
    let o = vmscope_within(
        &[
            "top",
            "--batch",
            "-n",
            "4",
            "-i",
            "1s",
            "--working-set",
            "--wss-window",
            "1s",
            "-p",
            &pid,
        ],
        Duration::from_secs(60),
    );
    ok(&o, "top --batch --working-set");
    let out = text(&o.stdout);
    let last = out
        .lines()
        .rfind(|l| l.starts_with("working set "))
        .unwrap_or_else(|| panic!("no working set row: {out}"));
    let mib: f64 = last["working set".len()..]
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no figure in {last:?}"));
    assert!((mib - 64.0).abs() <= 6.4, "64 MiB hot, shown {mib}: {last}");
    assert!(
        last.contains("1s window; <1s ") && last.contains("older 19"),
        "{last}"
    );
}

/// A size as `top` prints it (`64M`, `1.5G`, `512K`), in bytes.
fn size_cell(cell: &str) -> Option<u64> {
    let (n, unit) = cell.split_at(cell.len().checked_sub(1)?);
    let scale = match unit {
        "K" => 1 << 10,
        "M" => MIB,
        "G" => 1 << 30,
        _ => return None,
    };
    Some((n.parse::<f64>().ok()? * scale as f64) as u64)
}

/// `top --working-set` ends both tables in a WSS column. Two hot sets of
/// 64 and 128 MiB start in two memory cgroups while a system-wide `top`
/// runs: each process's WSS and each cgroup's are its hot set within 10%,
/// in the last snapshot, although neither process faults once its hot set
/// is resident (an idle process with a working set is still listed).
#[test]
fn top_has_a_wss_column_per_process_and_per_cgroup() {
    if !root_or_skip("top_has_a_wss_column_per_process_and_per_cgroup") {
        return;
    }
    let _x = pressure::exclusive();
    let (cg_a, cg_b) = (
        pressure::MemCgroup::new(1 << 30),
        pressure::MemCgroup::new(1 << 30),
    );
    let mut top = Command::new(vmscope_bin());
    top.args([
        "top",
        "--batch",
        "--cgroups",
        "-n",
        "10",
        "-i",
        "1s",
        "--working-set",
        "--wss-window",
        "1s",
    ]);
    let top = std::thread::spawn(move || run_with_timeout(top, Duration::from_secs(90)));
    // Started after `top`, so the probes see their first faults and their
    // cgroups are listed.
    std::thread::sleep(Duration::from_secs(2));
    let a = Hotset::start(cg_a.command(vmscope_bin()), "256M", "64M");
    let b = Hotset::start(cg_b.command(vmscope_bin()), "256M", "128M");
    let o = top.join().unwrap();
    ok(&o, "top --batch --cgroups --working-set");
    let out = text(&o.stdout);
    let last = &out[out.rfind("vmscope top").unwrap_or(0)..];
    let wss_of = |first: &str| -> u64 {
        let line = last
            .lines()
            .find(|l| l.split_whitespace().next() == Some(first))
            .unwrap_or_else(|| panic!("no row {first} in the last snapshot:\n{last}"));
        let cell = line.split_whitespace().last().unwrap();
        size_cell(cell).unwrap_or_else(|| panic!("WSS {cell:?} in {line:?}"))
    };
    let cgroup_row = |cg: &pressure::MemCgroup| {
        let name = cg.path().file_name().unwrap().to_str().unwrap().to_string();
        last.lines()
            .find_map(|l| {
                let first = l.split_whitespace().next()?;
                first
                    .ends_with(&format!("/{name}"))
                    .then(|| first.to_string())
            })
            .unwrap_or_else(|| panic!("no cgroup {name} in the last snapshot:\n{last}"))
    };
    for (who, got, want) in [
        ("process, 64 MiB hot", wss_of(&a.pid.to_string()), 64 * MIB),
        (
            "process, 128 MiB hot",
            wss_of(&b.pid.to_string()),
            128 * MIB,
        ),
        ("cgroup, 64 MiB hot", wss_of(&cgroup_row(&cg_a)), 64 * MIB),
        ("cgroup, 128 MiB hot", wss_of(&cgroup_row(&cg_b)), 128 * MIB),
    ] {
        assert!(
            within(got, want, 10.0),
            "{who}: WSS {} MiB\n{last}",
            got / MIB
        );
    }
    let header = last.lines().find(|l| l.contains("COMM")).unwrap();
    assert_eq!(header.split_whitespace().last(), Some("WSS"), "{header}");
    drop((a, b));
}

/// Two recordings of hot sets of 64 and 128 MiB: compare's rows are their
/// working sets (the mean over each run's windows), and the report plots
/// each run's working set over time.
#[test]
fn compare_and_report_carry_the_working_set() {
    if !root_or_skip("compare_and_report_carry_the_working_set") {
        return;
    }
    // Another scan of the same process clears its bits too.
    let _x = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, hot: &str| {
        let path = dir.path().join(name);
        let me = vmscope_bin().display().to_string();
        let o = vmscope_within(
            &[
                "record",
                "--working-set",
                "--wss-window",
                "1s",
                "-o",
                path_str(&path),
                "--",
                &me,
                "workload",
                "hotset",
                "--size",
                "256M",
                "--hot",
                hot,
                "--seconds",
                "5",
            ],
            Duration::from_secs(120),
        );
        ok(&o, "record");
        path
    };
    let (small, large) = (run("small.json", "64M"), run("large.json", "128M"));
    let o = vmscope(&[
        "compare",
        path_str(&small),
        path_str(&large),
        "--format",
        "json",
    ]);
    ok(&o, "compare");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = doc["rows"].as_array().unwrap();
    let row = |m: &str| {
        rows.iter()
            .find(|r| r["metric"] == m)
            .unwrap_or_else(|| panic!("no {m} row in {doc:#}"))
    };
    // The first windows saw the fill too: the max is not the hot set, the
    // mean is above it. The last window is the hot set alone.
    let last = |p: &Path| {
        read_json(p)["working_set"]["scope"]["last_bytes"]
            .as_u64()
            .unwrap()
    };
    assert!(
        within(last(&small), 64 * MIB, 10.0),
        "{}",
        last(&small) / MIB
    );
    assert!(
        within(last(&large), 128 * MIB, 10.0),
        "{}",
        last(&large) / MIB
    );
    let mean = |side: &str| row("working_set_bytes")[side]["mean"].as_f64().unwrap();
    assert!(mean("base") >= 64.0 * MIB as f64 * 0.9, "{doc:#}");
    assert!(mean("new") > mean("base"), "{doc:#}");
    assert!(
        row("working_set_max_bytes")["new"]["mean"]
            .as_f64()
            .unwrap()
            >= mean("new")
    );
    let html = dir.path().join("small.html");
    ok(
        &vmscope(&["report", path_str(&small), "-o", path_str(&html)]),
        "report",
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("id=\"working-set\""), "no working-set plot");
}

/// A method named but not offered by this kernel is refused before
/// anything loads: exit 2, one line that names the method and why, and no
/// recording left behind. Where the kernel offers the multi-generational
/// LRU (the kernel matrix checks it there), asking for it is not an error.
#[test]
fn a_method_this_kernel_lacks_is_one_usage_error() {
    let offered = std::fs::read_to_string("/sys/kernel/mm/lru_gen/enabled")
        .is_ok_and(|v| v.trim() != "0x0000")
        && Path::new("/sys/kernel/debug/lru_gen").exists();
    if offered {
        eprintln!("skipped: this kernel offers the multi-generational LRU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = vmscope(&[
        "record",
        "--working-set",
        "--wss-method",
        "mglru",
        "-o",
        path_str(&out),
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("vmscope: --wss-method mglru: "), "{err}");
    assert!(!out.exists(), "no recording is left behind");
}

/// `--wss-method damon` where the kernel does not offer it (no DAMON sysfs,
/// or no vaddr operations, as on the development VM's kernel), and for the
/// whole system on any kernel: exit 2, one line, nothing recorded.
#[test]
fn damon_where_it_cannot_watch_is_one_usage_error() {
    let syms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    let offered = Path::new("/sys/kernel/mm/damon/admin").exists()
        && syms.contains("damon_va_check_accesses")
        && std::fs::read_to_string("/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds")
            .is_ok_and(|n| n.trim() == "0");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let base = ["record", "--working-set", "--wss-method", "damon", "-o"];
    let mut runs: Vec<Vec<&str>> = vec![[&base[..], &[path_str(&out), "-d", "1s"]].concat()];
    if offered {
        eprintln!("this kernel offers DAMON with vaddr: only the system-wide refusal is checked");
    } else {
        runs.push([&base[..], &[path_str(&out), "--", "true"]].concat());
    }
    for args in runs {
        let o = vmscope(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("vmscope: --wss-method damon: "), "{err}");
        assert!(!out.exists(), "no recording is left behind");
    }
}
