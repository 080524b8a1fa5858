//! `vmscope export --parquet`, end to end: a recording of a child that
//! touches a known number of pages, exported, then read by DuckDB; and the
//! error path for a recording that is not there.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{process::Command, time::Duration};

use vmscope_tests::*;

const PAGES: u64 = 5_000;

/// Whether DuckDB's Python module can be imported. Without it the test is
/// skipped with one line, unless VMSCOPE_REQUIRE_BPF=1 (CI) makes that a
/// failure.
fn duckdb_or_skip(test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    skip_unless(
        test,
        ok,
        "python3 cannot import duckdb",
        "python3 -m pip install duckdb",
    )
}

/// One value DuckDB gives for `sql`, as text.
fn duckdb(sql: &str) -> String {
    let script = format!("import duckdb; print(duckdb.sql({sql:?}).fetchall()[0][0])");
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "duckdb failed on {sql}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

#[test]
fn duckdb_sums_the_same_per_process_faults_as_the_json_recording() {
    let test = "duckdb_sums_the_same_per_process_faults_as_the_json_recording";
    if !root_or_skip(test) || !duckdb_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("touch.json");
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "200ms", "-o"]).arg(&json).arg("--");
    c.arg(testchild()).args(["touch", &PAGES.to_string()]);
    let o = run_with_timeout(c, Duration::from_secs(120));
    assert!(
        o.status.success(),
        "record: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let out = dir.path().join("tables");
    let mut c = Command::new(vmscope_bin());
    c.arg("export").arg(&json).arg("--parquet").arg(&out);
    let o = run_with_timeout(c, Duration::from_secs(60));
    assert!(
        o.status.success(),
        "export: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let rec = read_json(&json);
    let procs = rec["processes"].as_array().unwrap();
    let want: u64 = procs
        .iter()
        .map(|p| p["faults"]["total"].as_u64().unwrap())
        .sum();
    assert!(
        want >= PAGES,
        "the child's {PAGES} pages are in the recording: {want}"
    );
    let table = |t: &str| out.join(format!("{t}.parquet")).display().to_string();
    let got = duckdb(&format!("SELECT sum(faults) FROM '{}'", table("processes")));
    assert_eq!(got, want.to_string(), "sum(faults) over processes.parquet");

    let len = |v: &serde_json::Value| v.as_array().map_or(0, Vec::len);
    let samples = rec["samples"].as_array().unwrap();
    let changed: usize = samples.iter().map(|s| len(&s["procs"])).sum();
    for (t, rows) in [
        ("processes", procs.len()),
        ("samples", samples.len()),
        ("series", len(&rec["series"]["end_ns"])),
        ("cgroups", len(&rec["cgroups"])),
        ("oom_kills", len(&rec["oom_kills"])),
        ("sample_processes", changed),
        (
            "histograms",
            rec["totals"]["histograms"].as_object().unwrap().len(),
        ),
    ] {
        let got = duckdb(&format!("SELECT count(*) FROM '{}'", table(t)));
        assert_eq!(got, rows.to_string(), "rows of {t}.parquet");
    }
    assert!(out.join("recording.json").is_file());
}

#[test]
fn export_of_a_missing_recording_exits_2_with_one_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tables");
    let o = Command::new(vmscope_bin())
        .arg("export")
        .arg(dir.path().join("no-such.json"))
        .arg("--parquet")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("no-such.json"), "names the file: {err}");
    assert!(!out.exists(), "no directory left behind");

    // A destination with files in it is refused, and left as it was.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("mine"), "x").unwrap();
    let o = Command::new(vmscope_bin())
        .arg("export")
        .arg(dir.path().join("no-such.json"))
        .arg("--parquet")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}
