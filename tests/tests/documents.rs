//! The recording as a document: real output validated against the published
//! JSON Schema, the `--format jsonl` stream, `-p` scoping, `--all`, and
//! metrics the kernel cannot give reported as unavailable, not zero.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use vmscope_tests::*;

fn record(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(vmscope_bin());
    c.arg("record").args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    run_with_timeout(c, Duration::from_secs(120))
}

fn ok(o: &std::process::Output) {
    assert!(
        o.status.success(),
        "{:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

#[test]
fn recordings_of_every_scope_validate_against_the_schema() {
    if !root_or_skip("recordings_of_every_scope_validate_against_the_schema") {
        return;
    }
    let v = schema("recording.schema.json");
    let dir = tempfile::tempdir().unwrap();
    let wrapped = path(dir.path(), "wrapped.json");
    let child = testchild().display().to_string();
    ok(&record(
        &[
            "-i",
            "100ms",
            "-o",
            wrapped.to_str().unwrap(),
            "--",
            &child,
            "touch",
            "5000",
        ],
        &[],
    ));
    let mut doc = read_json(&wrapped);
    assert_valid(&v, &doc, "a wrapped-command recording");
    // The per-interval series adds up to the totals.
    let column = |name: &str| -> u64 {
        doc["series"]["metrics"][name]
            .as_array()
            .unwrap_or_else(|| panic!("no series column {name}"))
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum()
    };
    let intervals = doc["series"]["end_ns"].as_array().unwrap().len();
    assert_eq!(intervals + 1, doc["samples"].as_array().unwrap().len());
    assert_eq!(
        column("faults"),
        u64_at(&doc, "/totals/system_faults/total")
    );
    assert_eq!(
        column("scope_faults"),
        u64_at(&doc, "/totals/scope_faults/total")
    );
    assert_eq!(
        column("vmstat_pgfault"),
        u64_at(&doc, "/totals/vmstat/counters/pgfault")
    );
    // The schema has teeth: a wrong type or a missing field is caught.
    doc["samples"][0]["faults"]["user"][0] = serde_json::json!("many");
    assert!(!v.is_valid(&doc));
    doc.as_object_mut().unwrap().remove("samples");
    assert!(!v.is_valid(&doc));

    let system = path(dir.path(), "system.json");
    ok(&record(
        &[
            "-i",
            "200ms",
            "-d",
            "1s",
            "--all",
            "-o",
            system.to_str().unwrap(),
        ],
        &[],
    ));
    let rec = read_json(&system);
    assert_valid(&v, &rec, "a system-wide recording");
    assert_eq!(rec["scope"]["kind"], "system");
    // --all lifts the bound on the process table.
    let rows = rec["processes"].as_array().unwrap().len() as u64;
    assert!(u64_at(&rec, "/processes_limit") > 50);
    assert!(rows >= 1);
}

#[test]
fn missing_probes_are_unavailable_with_a_reason_not_zero() {
    if !root_or_skip("missing_probes_are_unavailable_with_a_reason_not_zero") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = path(dir.path(), "degraded.json");
    let child = testchild().display().to_string();
    ok(&record(
        &[
            "-i",
            "100ms",
            "-o",
            out.to_str().unwrap(),
            "--",
            &child,
            "touch",
            "3000",
        ],
        &[("VMSCOPE_DISABLE_PROBES", "kmem:rss_stat,perf:major-faults")],
    ));
    let rec = read_json(&out);
    assert_valid(
        &schema("recording.schema.json"),
        &rec,
        "a degraded recording",
    );
    let unavailable = &rec["totals"]["unavailable"];
    for metric in ["swap_out_pages", "swap_in_pages", "major_faults"] {
        assert!(
            unavailable[metric]
                .as_str()
                .is_some_and(|r| r.contains("disabled")),
            "{metric}: {unavailable:#}"
        );
        assert!(rec["totals"]["counters"].get(metric).is_none());
    }
    let row = &rec["processes"][0];
    assert!(row["faults"]["total"].as_u64().unwrap() >= 3000, "{row:#}");
    for field in ["swap_out_pages", "swap_in_pages", "major_faults"] {
        assert!(row[field].is_null(), "{field} should be null: {row:#}");
    }
}

#[test]
fn jsonl_streams_a_header_one_line_per_interval_and_a_summary() {
    if !root_or_skip("jsonl_streams_a_header_one_line_per_interval_and_a_summary") {
        return;
    }
    let line_schema = schema("jsonl-line.schema.json");
    let dir = tempfile::tempdir().unwrap();
    let out = path(dir.path(), "stream.jsonl");
    let rep = path(dir.path(), "rusage.json");
    let child = testchild().display().to_string();
    ok(&record(
        &[
            "-i",
            "50ms",
            "--format",
            "jsonl",
            "-o",
            out.to_str().unwrap(),
            "--",
            &child,
            "--report",
            rep.to_str().unwrap(),
            "touch",
            "20000",
        ],
        &[],
    ));
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for (i, l) in lines.iter().enumerate() {
        assert_valid(&line_schema, l, &format!("line {}", i + 1));
    }
    assert_eq!(lines[0]["type"], "header");
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "recording");
    let samples = &lines[1..lines.len() - 1];
    assert!(samples.len() >= 2, "{} sample lines", samples.len());
    assert!(samples.iter().all(|s| s["type"] == "sample"));
    // The summary line carries the figures; the samples are the lines above.
    assert_eq!(last["samples"].as_array().unwrap().len(), 0);
    let minflt = u64_at(&read_json(&rep), "/minflt");
    let scope = u64_at(last, "/totals/scope_faults/user/total");
    assert_within_pct("streamed scope faults vs rusage", scope, minflt, 1.0);
}

#[test]
fn pid_scope_counts_only_the_given_process_and_its_children() {
    if !root_or_skip("pid_scope_counts_only_the_given_process_and_its_children") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rep = path(dir.path(), "target.json");
    let noise_rep = path(dir.path(), "noise.json");
    let child = testchild().display().to_string();
    // The target waits so that vmscope attaches first, then execs the
    // workload in place (same pid).
    let script = format!(
        "sleep 2; exec '{child}' --report '{}' touch 20000",
        rep.display()
    );
    let mut target = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let mut noise = Command::new("sh")
        .args([
            "-c",
            &format!(
                "sleep 2; exec '{child}' --report '{}' touch 30000",
                noise_rep.display()
            ),
        ])
        .spawn()
        .unwrap();
    let out = path(dir.path(), "pid.json");
    let o = record(
        &[
            "-i",
            "200ms",
            "-d",
            "5s",
            "-p",
            &target.id().to_string(),
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    target.wait().unwrap();
    noise.wait().unwrap();
    ok(&o);
    let rec = read_json(&out);
    assert_valid(&schema("recording.schema.json"), &rec, "a -p recording");
    assert_eq!(rec["scope"]["kind"], "pids");
    let pid = u64::from(target.id());
    let procs = rec["processes"].as_array().unwrap();
    let row = procs
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("no row for {pid}: {procs:#?}"));
    let minflt = u64_at(&read_json(&rep), "/minflt");
    let got = u64_at(row, "/faults/user/total");
    assert!(got >= 20_000, "{got} < the 20000 pages touched");
    assert_within_pct("-p target faults vs its rusage", got, minflt, 2.0);
    let noise_pid = u64::from(noise.id());
    assert!(
        procs.iter().all(|p| p["pid"] != noise_pid),
        "a process outside -p was counted: {procs:#?}"
    );
    // Only the target and its `sleep` child can be in scope.
    assert!(procs.len() <= 2, "{procs:#?}");
}

#[test]
fn jsonl_stream_interrupted_by_sigint_still_ends_with_the_summary() {
    if !root_or_skip("jsonl_stream_interrupted_by_sigint_still_ends_with_the_summary") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = path(dir.path(), "int.jsonl");
    // The test relies on SIGINT's default disposition, which a suite
    // started from a background job would not pass on (it inherits SIGINT
    // ignored; see the next test for that case).
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "100ms", "--format", "jsonl", "-o"])
        .arg(&out)
        .args(["--", "sleep", "30"])
        .stderr(std::process::Stdio::piped());
    with_sigint(&mut c, libc::SIG_DFL);
    let child = c.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // While it runs, the stream already holds the header and samples.
    let partial = std::fs::read_to_string(&out).unwrap();
    assert!(partial.starts_with(r#"{"type":"header""#), "{partial}");
    assert!(partial.lines().count() >= 3, "{partial}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_valid(&schema("jsonl-line.schema.json"), &last, "the summary line");
    assert_eq!(last["type"], "recording");
    assert_eq!(last["interrupted_by"], "SIGINT");
    assert_eq!(last["child"]["signal"], 2);
}

/// Started with SIGINT ignored (a background job of a non-interactive
/// shell), `record` still takes SIGINT itself and forwards it, but the
/// command keeps the disposition it inherited: it ignores the SIGINT and
/// the recording ends when the command does, with its exit code, the
/// summary saying SIGINT came (docs/record.md).
#[test]
fn inherited_ignored_sigint_is_forwarded_but_the_command_keeps_ignoring_it() {
    if !root_or_skip("inherited_ignored_sigint_is_forwarded_but_the_command_keeps_ignoring_it") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = path(dir.path(), "ign.jsonl");
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "100ms", "--format", "jsonl", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", "sleep 3; echo done"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    with_sigint(&mut c, libc::SIG_IGN);
    let child = c.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "done\n", "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["interrupted_by"], "SIGINT");
    assert_eq!(last["child"]["exit_code"], 0, "{:#}", last["child"]);
    assert_eq!(last["child"]["signals_sent"][0]["signal"], "SIGINT");
    assert_eq!(last["child"]["signals_sent"][0]["reason"], "forwarded");
}

/// The swap probe fires on every RSS change, so it waits for a swap device.
/// Without one, nothing can be swapped: the figures are true zeros (and the
/// probe says why it is not attached), not unavailable.
#[test]
fn swap_probe_waits_for_a_swap_device_and_reports_true_zeros() {
    if !root_or_skip("swap_probe_waits_for_a_swap_device_and_reports_true_zeros") {
        return;
    }
    let _lock = vmscope_tests::pressure::exclusive();
    let swap_on = std::fs::read_to_string("/proc/swaps")
        .unwrap()
        .lines()
        .count()
        > 1;
    let dir = tempfile::tempdir().unwrap();
    let out = path(dir.path(), "noswap.json");
    let child = testchild().display().to_string();
    ok(&record(
        &[
            "-i",
            "100ms",
            "-o",
            out.to_str().unwrap(),
            "--",
            &child,
            "touch",
            "3000",
        ],
        &[],
    ));
    let rec = read_json(&out);
    let probe = rec["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == "kmem:rss_stat")
        .unwrap()
        .clone();
    assert!(rec["totals"]["unavailable"].get("swap_out_pages").is_none());
    assert_eq!(u64_at(&rec, "/totals/counters/swap_out_pages"), 0);
    let row = &rec["processes"][0];
    if swap_on {
        assert_eq!(probe["attached"], true, "{probe}");
        assert!(row["swap_out_pages"].is_u64(), "{row:#}");
    } else {
        assert_eq!(probe["attached"], false, "{probe}");
        assert_eq!(probe["deferred"], true, "{probe}");
        assert!(probe["reason"].as_str().unwrap().contains("no swap device"));
        assert_eq!(row["swap_out_pages"], 0, "{row:#}");
        assert_eq!(row["swap_in_pages"], 0, "{row:#}");
    }
}
