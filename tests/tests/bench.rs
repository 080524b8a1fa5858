//! `vmscope bench`: repeated recorded runs against each run's own books,
//! the summary, `--prepare`, and what a failing run does.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{process::Command, time::Duration};

use vmscope_tests::*;

fn bench(args: &[&str]) -> std::process::Output {
    let mut c = Command::new(vmscope_bin());
    c.arg("bench").args(args);
    run_with_timeout(c, Duration::from_secs(300))
}

#[test]
fn every_run_is_recorded_and_agrees_with_its_own_rusage() {
    if !root_or_skip("every_run_is_recorded_and_agrees_with_its_own_rusage") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.json");
    let marks = dir.path().join("prepared");
    let prepare = format!("echo x >> '{}'", marks.display());
    let child = testchild().display().to_string();
    let o = bench(&[
        "-r",
        "3",
        "-w",
        "1",
        "--trim",
        "1",
        "-i",
        "200ms",
        "--name",
        "touch",
        "--prepare",
        &prepare,
        "-o",
        out.to_str().unwrap(),
        "--",
        &child,
        "touch",
        "20000",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("3 runs after 1 warmup, mean with the 1 lowest and 1 highest dropped"),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l.starts_with("faults ")), "{stdout}");
    // --prepare ran before each of the 4 runs.
    assert_eq!(std::fs::read_to_string(&marks).unwrap().lines().count(), 4);
    let b = read_json(&out);
    assert_eq!(b["kind"], "vmscope-bench");
    assert_eq!(b["name"], "touch");
    let runs = b["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let faults = b["metrics"]["faults"]["values"].as_array().unwrap();
    for (run, v) in runs.iter().zip(faults) {
        let own = u64_at(run, "/child/rusage/minflt");
        assert_within_pct(
            "a run's recorded faults vs its own rusage",
            v.as_f64().unwrap() as u64,
            own,
            2.0,
        );
        assert!(own >= 20_000);
    }
    let r = &b["results"][0];
    assert_eq!(r["times"].as_array().unwrap().len(), 3);
    assert_eq!(r["exit_codes"], serde_json::json!([0, 0, 0]));
    let times: Vec<f64> = r["times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    for (t, run) in times.iter().zip(runs) {
        let wall = u64_at(run, "/child/rusage/wall_ns") as f64 / 1e9;
        assert!((t - wall).abs() < 1e-9, "{t} vs {wall}");
    }
}

#[test]
fn a_failing_run_stops_the_bench_with_its_code_unless_ignored() {
    if !root_or_skip("a_failing_run_stops_the_bench_with_its_code_unless_ignored") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fail.json");
    let o = bench(&[
        "-r",
        "2",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("exited with 3") && err.contains("--ignore-failure"),
        "{err}"
    );
    assert!(!out.exists(), "no bench file after a stopped bench");
    let o = bench(&[
        "-r",
        "2",
        "--ignore-failure",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let b = read_json(&out);
    assert_eq!(b["results"][0]["exit_codes"], serde_json::json!([3, 3]));
}

#[test]
fn bad_bench_arguments_exit_2_naming_the_problem() {
    let o = bench(&["-r", "0", "--", "true"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.lines().next().unwrap().contains("--runs"), "{err}");
    let o = bench(&["-r", "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no command to benchmark"), "{err}");
}
