//! The classic experiments as commands: `bench` of `workload lazyfree`
//! with MADV_DONTNEED against MADV_FREE, compared; `lab rmap` showing the
//! reclaim cost growing with the number of sharers; workload figures and
//! `--metric` read from kept output; and every bad input refused with one
//! line and a documented exit code.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Command, Output},
    time::{Duration, Instant},
};

use serde_json::Value;
use vmscope_tests::{
    ok, path_str, pressure, read_json, root_or_skip, run_with_timeout, text, vmscope_bin,
    vmscope_within,
};

fn vmscope(args: &[&str]) -> Output {
    vmscope_within(args, Duration::from_secs(300))
}

fn s(p: &Path) -> &str {
    path_str(p)
}

/// The compare row of `metric` in a `--format json` document.
fn row<'a>(doc: &'a Value, metric: &str) -> &'a Value {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row {metric} in {doc:#}"))
}

fn values(r: &Value, side: &str) -> Vec<f64> {
    r[side]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// One line on stderr, the expected exit code, nothing on stdout.
fn refused(o: &Output, code: i32, what: &str) -> String {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{what}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{what}: not one line: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    err
}

const THREADS: u64 = 2;
const RECORDS: u64 = 2000;
/// 256 KiB chunks: 64 pages each.
const PAGES_PER_CHUNK: f64 = 64.0;

#[test]
fn lazyfree_dontneed_against_free_bench_and_compare() {
    if !root_or_skip("lazyfree_dontneed_against_free_bench_and_compare") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let me = vmscope_bin().display().to_string();
    let bench = |free: &str| {
        let out = dir.path().join(format!("{free}.json"));
        let (threads, records) = (THREADS.to_string(), RECORDS.to_string());
        ok(
            &vmscope(&[
                "bench",
                "-r",
                "3",
                "-i",
                "200ms",
                "--name",
                free,
                "-o",
                s(&out),
                "--",
                &me,
                "workload",
                "lazyfree",
                "--free",
                free,
                "--threads",
                &threads,
                "--records",
                &records,
            ]),
            "vmscope bench",
        );
        out
    };
    let (dontneed, free) = (bench("dontneed"), bench("free"));
    let o = vmscope(&["compare", s(&dontneed), s(&free), "--format", "json"]);
    ok(&o, "compare --format json");
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["statistics"], "welch", "{doc:#}");

    // Ground truth: the workload makes exactly THREADS x RECORDS madvise
    // calls with its advice, and says so in its JSON line.
    let n = (THREADS * RECORDS) as f64;
    assert_eq!(values(row(&doc, "lazyfree/madvise_calls"), "base"), [n; 3]);
    assert_eq!(values(row(&doc, "lazyfree/madvise_calls"), "new"), [n; 3]);
    let free_calls = row(&doc, "madvise_free_calls");
    assert_eq!(values(free_calls, "base"), [0.0; 3], "{free_calls:#}");
    assert_eq!(values(free_calls, "new"), [n; 3], "{free_calls:#}");
    // DONTNEED: the workload's calls plus the few a process start makes
    // (the same on both sides).
    let dn = row(&doc, "madvise_dontneed_calls");
    for (b, f) in values(dn, "base").iter().zip(values(dn, "new")) {
        assert!(f < 32.0, "FREE side made {f} DONTNEED calls: {dn:#}");
        assert!(
            (b - n - f).abs() <= 8.0,
            "DONTNEED side: {b} calls, expected {n} + the start-up ones ({f}): {dn:#}"
        );
    }
    assert_eq!(free_calls["verdict"], "change", "{free_calls:#}");

    // Without pressure, a chunk released with FREE keeps its pages: only
    // the first use of each chunk faults. With DONTNEED every record faults
    // every page of its chunk once.
    let upr = row(&doc, "user_faults_per_record");
    let base = upr["base"]["mean"].as_f64().unwrap();
    let new = upr["new"]["mean"].as_f64().unwrap();
    assert!(
        (PAGES_PER_CHUNK..PAGES_PER_CHUNK * 1.1).contains(&base),
        "DONTNEED: {base} user faults per record, expected about {PAGES_PER_CHUNK}"
    );
    assert!(new < base / 10.0, "FREE: {new} faults per record vs {base}");
    assert_eq!(upr["verdict"], "win", "{upr:#}");
    // The recorded faults agree with the children's own rusage.
    let minflt = row(&doc, "minflt");
    let faults = row(&doc, "faults");
    for side in ["base", "new"] {
        for (f, m) in values(faults, side).iter().zip(values(minflt, side)) {
            assert!(
                (f - m).abs() <= m * 0.05 + 50.0,
                "{side}: recorded {f} faults, rusage minflt {m}"
            );
        }
    }
    // And records/s is reported as the headline throughput, better higher.
    // (Runs this short are noisy, so the check is that every FREE run beat
    // every DONTNEED run, not the t-test's verdict.)
    let rate = row(&doc, "lazyfree/records_per_sec");
    assert_eq!(rate["better"], "higher");
    let slowest_free = values(rate, "new").into_iter().fold(f64::MAX, f64::min);
    let fastest_dontneed = values(rate, "base").into_iter().fold(0.0, f64::max);
    assert!(slowest_free > fastest_dontneed, "{rate:#}");

    // The markdown table parses: a header, an alignment row, one row per
    // metric, the same number of cells on every line.
    let o = vmscope(&["compare", s(&dontneed), s(&free), "--format", "markdown"]);
    ok(&o, "compare --format markdown");
    let md = text(&o.stdout);
    let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    let cells = |l: &str| -> Vec<String> {
        assert!(l.ends_with('|'), "unterminated row {l:?}");
        // Split on the pipes that are not escaped as `\|`.
        l.replace("\\|", "\u{1}")
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().replace('\u{1}', "|"))
            .collect()
    };
    let header = cells(table[0]);
    assert_eq!(header[0], "metric", "{md}");
    assert!(
        cells(table[1])
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|x| x == '-' || x == ':')),
        "alignment row {:?}",
        table[1]
    );
    for l in &table[2..] {
        assert_eq!(cells(l).len(), header.len(), "{l:?} in\n{md}");
    }
    for metric in [
        "madvise_free_calls",
        "madvise_dontneed_calls",
        "user_faults_per_record",
    ] {
        assert!(
            table.iter().any(|l| cells(l)[0] == metric),
            "{metric} missing from\n{md}"
        );
    }
}

#[test]
fn lab_rmap_reclaim_costs_more_per_page_with_64_sharers() {
    if !root_or_skip("lab_rmap_reclaim_costs_more_per_page_with_64_sharers") {
        return;
    }
    let _x = pressure::exclusive();
    let swaps_before = pressure::active_swaps();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lab");
    let t = Instant::now();
    let mut c = Command::new(vmscope_bin());
    c.args([
        "lab",
        "rmap",
        "-r",
        "3",
        "--sharers",
        "64",
        "--size",
        "32M",
        "--setup-zram",
        "256M",
        "--format",
        "json",
        "-o",
        s(&out),
    ]);
    // The issue's bound for this lab in CI.
    let o = run_with_timeout(c, Duration::from_secs(120));
    ok(&o, "lab rmap");
    eprintln!("lab rmap took {:.1} s", t.elapsed().as_secs_f64());
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc, read_json(&out.join("compare.json")));
    for f in ["sharers-1.json", "sharers-64.json"] {
        assert_eq!(read_json(&out.join(f))["kind"], "vmscope-bench", "{f}");
    }
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("<svg"), "report.html has no plot");
    // The zram device it set up is gone again, and so is its cgroup.
    assert_eq!(pressure::active_swaps(), swaps_before);
    let (root, _) = vmscope::experiments::pressure::memory_controller().unwrap();
    let left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("vmscope-rmap"))
        .collect();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");

    let per_page = row(&doc, "rmap/reclaim_per_page_ns");
    let (one, many) = (
        per_page["base"]["mean"].as_f64().unwrap(),
        per_page["new"]["mean"].as_f64().unwrap(),
    );
    assert!(
        many > one && per_page["significant"] == true,
        "reclaim per page: 1 sharer {one} ns, 64 sharers {many} ns: {per_page:#}"
    );
    // The rmap method attributes more walking CPU to 64 sharers.
    let walk = row(&doc, "rmap_walk_cpu");
    assert!(
        walk["new"]["mean"].as_f64().unwrap() > walk["base"]["mean"].as_f64().unwrap(),
        "{walk:#}"
    );
    // The pages it says it reclaimed went to swap: each run's pswpout (the
    // kernel's count, from the recording) matches the workload's count.
    let reclaimed = row(&doc, "rmap/reclaimed_pages");
    let pswpout = row(&doc, "pswpout");
    for side in ["base", "new"] {
        for (r, p) in values(reclaimed, side).iter().zip(values(pswpout, side)) {
            assert!(*r > 1000.0, "{side}: only {r} pages reclaimed");
            assert!(
                (p - r).abs() <= r * 0.2,
                "{side}: reclaimed {r} pages but pswpout grew by {p}"
            );
        }
    }
}

/// `lab mmap-lock`, end to end: both variants recorded with the mmap_lock
/// probes, compared, and every row of the kernel evidence filled on both
/// sides (the exact count of the storm's write acquisitions is
/// `mmap_lock.rs`'s). The control makes no storm calls, the storm makes the
/// faulting threads wait longer in every run, and failed trylocks are a
/// figure on both sides, not "-".
#[test]
fn lab_mmap_lock_records_the_storms_waits_and_fills_every_evidence_row() {
    if !root_or_skip("lab_mmap_lock_records_the_storms_waits_and_fills_every_evidence_row") {
        return;
    }
    let _x = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lab");
    let o = vmscope(&[
        "lab",
        "mmap-lock",
        "-r",
        "2",
        "--threads",
        "2",
        "--faults",
        "100000",
        "-o",
        s(&out),
    ]);
    ok(&o, "lab mmap-lock");
    let table = text(&o.stdout);
    let evidence = table
        .split("kernel evidence")
        .nth(1)
        .unwrap_or_else(|| panic!("no evidence table: {table}"));
    let rows: Vec<&str> = evidence
        .lines()
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(rows.len(), 10, "{evidence}");
    for r in &rows {
        assert!(
            !r.split_whitespace().any(|c| c == "-"),
            "an evidence row without a figure: {r}\n{evidence}"
        );
    }
    let doc = read_json(&out.join("compare.json"));
    let calls = row(&doc, "mmap-lock/storm_calls");
    assert_eq!(values(calls, "base"), [0.0; 2], "{calls:#}");
    let wait = row(&doc, "mmap_lock_wait");
    for (b, n) in values(wait, "base").iter().zip(values(wait, "new")) {
        assert!(n > *b, "the storm's wait {n} ms vs the control's {b} ms");
    }
    let failed = row(&doc, "mmap_lock_failed");
    assert_eq!(values(failed, "new").len(), 2, "{failed:#}");
    eprintln!(
        "lab mmap-lock: storm calls {:?}, wait {:?} ms vs {:?} ms, failed trylocks {:?} vs {:?}",
        values(calls, "new"),
        values(wait, "new"),
        values(wait, "base"),
        values(failed, "new"),
        values(failed, "base")
    );
}

#[test]
fn workload_figures_and_metric_regexes_come_from_kept_output() {
    if !root_or_skip("workload_figures_and_metric_regexes_come_from_kept_output") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bench = |name: &str, mbs: &str| {
        let out = dir.path().join(format!("{name}.json"));
        let script = format!("echo 'Throughput {mbs} MB/sec 4 clients'; echo done");
        ok(
            &vmscope(&[
                "bench",
                "-r",
                "2",
                "-i",
                "200ms",
                "-o",
                s(&out),
                "--",
                "sh",
                "-c",
                &script,
            ]),
            "bench",
        );
        out
    };
    let (a, b) = (bench("a", "100.5"), bench("b", "201"));
    let o = vmscope(&[
        "compare",
        s(&a),
        s(&b),
        "--format",
        "json",
        "--metric",
        "mb_s=Throughput ([0-9.]+) MB/sec",
    ]);
    ok(&o, "compare --metric");
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = row(&doc, "output/mb_s");
    assert_eq!(values(r, "base"), [100.5, 100.5]);
    assert_eq!(values(r, "new"), [201.0, 201.0]);
    assert_eq!(r["verdict"], "win", "{r:#}");
    // A regex that matches nothing names the metric and the file.
    let o = vmscope(&["compare", s(&a), s(&b), "--metric", "x=Latency ([0-9]+)"]);
    let err = refused(&o, 2, "unmatched --metric");
    assert!(
        err.contains("--metric x") && err.contains("a.json"),
        "{err}"
    );

    // record --keep-output -o -: the recording alone on stdout, the
    // command's output passed through on stderr and kept in the recording.
    let o = vmscope(&[
        "record",
        "--keep-output",
        "-o",
        "-",
        "--",
        "sh",
        "-c",
        r#"echo '{"workload":"w","ops_per_sec":7}'"#,
    ]);
    ok(&o, "record --keep-output -o -");
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        rec["child"]["output"]["tail"],
        "{\"workload\":\"w\",\"ops_per_sec\":7}\n"
    );
    assert!(
        text(&o.stderr).contains("ops_per_sec"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn bad_input_gets_one_line_and_a_documented_exit() {
    // Usage errors (exit 2), as any user.
    for (args, what) in [
        (
            &["workload", "lazyfree", "--threads", "0"][..],
            "zero threads",
        ),
        (
            &["workload", "lazyfree", "--chunk-size", "1000"],
            "chunk not pages",
        ),
        (
            &["workload", "lazyfree", "--free", "sometimes"],
            "bad advice",
        ),
        (&["workload", "rmap", "--size", "12x"], "bad size"),
        (&["workload", "rmap", "--size", "4K"], "size too small"),
        (
            &["workload", "rmap", "--size", "16M", "--memory-limit", "32M"],
            "limit above size",
        ),
        (&["compare", "a", "b", "--metric", "x=("], "bad regex"),
        (&["compare", "a", "b", "--metric", "noequals"], "no NAME="),
        (&["record", "--keep-output", "-d", "1"], "keep-output alone"),
        (&["lab", "rmap", "-r", "1"], "one run"),
    ] {
        let o = vmscope(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
    }
    // Clap's usage errors carry a usage block; vmscope's own are one line.
    for args in [
        &["workload", "lazyfree", "--threads", "0"][..],
        &["workload", "lazyfree", "--chunk-size", "1000"],
        &["workload", "rmap", "--size", "4K"],
    ] {
        refused(&vmscope(args), 2, &args.join(" "));
    }
    if !root_or_skip("bad_input_gets_one_line_and_a_documented_exit (root part)") {
        return;
    }
    let o = vmscope(&["lab", "rmap", "--sharers", "1", "-r", "2"]);
    refused(&o, 2, "lab rmap --sharers 1");
    // Not root: the workload says it needs root (77).
    let mut c = Command::new(vmscope_bin());
    c.args(["workload", "rmap"]).uid(65534).gid(65534);
    let o = run_with_timeout(c, Duration::from_secs(60));
    let err = refused(&o, 77, "workload rmap as nobody");
    assert!(err.contains("root"), "{err}");
    // No swap: both the workload and the lab say how to add it (exit 1).
    let _x = pressure::exclusive();
    if pressure::active_swaps().is_empty() {
        let o = vmscope(&["workload", "rmap"]);
        let err = refused(&o, 1, "workload rmap without swap");
        assert!(err.contains("--setup-zram"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let o = vmscope(&["lab", "rmap", "-o", s(dir.path())]);
        let err = refused(&o, 1, "lab rmap without swap");
        assert!(err.contains("--setup-zram"), "{err}");
    } else {
        eprintln!("a swap device is active: the no-swap refusals were not exercised");
    }
}
