//! `vmscope compare`: bench files of real runs compared with Welch's t-test,
//! `--fail-on-regression` in both directions, single recordings compared
//! without statistics, and bad input refused with one line and exit 2.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    path::{Path, PathBuf},
    process::Output,
    time::Duration,
};

use vmscope_tests::{ok, path_str, read_json, root_or_skip, testchild, text, vmscope_within};

fn vmscope(args: &[&str]) -> Output {
    vmscope_within(args, Duration::from_secs(300))
}

fn s(p: &Path) -> &str {
    path_str(p)
}

/// `vmscope bench -r RUNS -i 200ms -o OUT -- vmscope-testchild ARGS`.
fn bench(out: &Path, runs: &str, args: &[&str]) {
    let child = testchild().display().to_string();
    let mut a = vec![
        "bench",
        "-r",
        runs,
        "-i",
        "200ms",
        "-o",
        s(out),
        "--",
        &child,
    ];
    a.extend_from_slice(args);
    ok(&vmscope(&a), "vmscope bench");
}

/// `vmscope record -i 200ms -o OUT -- vmscope-testchild ARGS`.
fn record(out: &Path, args: &[&str]) {
    let child = testchild().display().to_string();
    let mut a = vec!["record", "-i", "200ms", "-o", s(out), "--", &child];
    a.extend_from_slice(args);
    ok(&vmscope(&a), "vmscope record");
}

fn compare(base: &Path, new: &Path, extra: &[&str]) -> Output {
    let mut a = vec!["compare", s(base), s(new)];
    a.extend_from_slice(extra);
    vmscope(&a)
}

/// The table line of `metric`.
fn row<'a>(table: &'a str, metric: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(metric))
        .unwrap_or_else(|| panic!("no {metric} row in\n{table}"))
}

/// The JSON row of `metric`.
fn json_row<'a>(doc: &'a serde_json::Value, metric: &str) -> &'a serde_json::Value {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no {metric} row in {doc:#}"))
}

#[test]
fn bench_files_are_compared_with_welch_and_regressions_fail_only_one_way() {
    if !root_or_skip("bench_files_are_compared_with_welch_and_regressions_fail_only_one_way") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (m200, m2000) = (p("madvise-200.json"), p("madvise-2000.json"));
    bench(&m200, "3", &["madvise", "200"]);
    bench(&m2000, "3", &["madvise", "2000"]);

    // The table: Welch named, madvise_calls 600 -> 6000 (+900%), significant.
    let o = compare(&m200, &m2000, &[]);
    ok(&o, "compare madvise");
    let table = text(&o.stdout);
    assert!(table.contains("Welch's t-test, 95% CI"), "{table}");
    let headline: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("metric"))
        .skip(1)
        .take(4)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(headline, ["real", "user", "sys", "cpu"], "{table}");
    let madv = row(&table, "madvise_calls");
    assert!(madv.contains("+900%"), "{madv}");
    assert!(madv.ends_with("900% more"), "{madv}");

    // JSON: the same numbers, and the statistics used.
    let o = compare(&m200, &m2000, &["--format", "json"]);
    ok(&o, "compare --format json");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&o.stdout)));
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["statistics"], "welch");
    assert_eq!(doc["base"]["runs"], 3);
    let r = json_row(&doc, "madvise_calls");
    assert_eq!(r["base"]["mean"], 600.0);
    assert_eq!(r["new"]["mean"], 6000.0);
    assert!(r["change_pct"].as_f64().unwrap() > 800.0, "{r:#}");
    assert!(r["test"]["p"].as_f64().unwrap() < 0.05, "{r:#}");
    assert_eq!(r["significant"], true);

    // Markdown: a GitHub table.
    let o = compare(&m200, &m2000, &["--format", "markdown"]);
    ok(&o, "compare --format markdown");
    let md = text(&o.stdout);
    assert!(md.contains("| metric | BASE | NEW |"), "{md}");
    assert!(md.contains("| madvise_calls |"), "{md}");

    // --fail-on-regression: 25 times the pages faulted in is a clear loss
    // in faults and sys; the other way round it is a win.
    let (light, heavy) = (p("touch-2000.json"), p("touch-50000.json"));
    bench(&light, "3", &["touch", "2000"]);
    bench(&heavy, "3", &["touch", "50000"]);
    let worse = compare(
        &light,
        &heavy,
        &["--fail-on-regression", "--threshold", "5"],
    );
    let table = text(&worse.stdout);
    assert_eq!(
        worse.status.code(),
        Some(1),
        "{table}{}",
        text(&worse.stderr)
    );
    assert!(row(&table, "faults").ends_with("loss"), "{table}");
    assert!(
        table.contains("significant regressions beyond 5.0%:") && table.contains("faults ("),
        "{table}"
    );
    // The other way round faults are a win, so gating on them passes. Not
    // gated on every row: some forty rows at p < 0.05 make a chance
    // "regression" in an unrelated row (TLB shootdowns, say) a matter of
    // time.
    let better = compare(
        &heavy,
        &light,
        &["--fail-on", "faults,sys", "--threshold", "5"],
    );
    let table = text(&better.stdout);
    assert_eq!(
        better.status.code(),
        Some(0),
        "{table}{}",
        text(&better.stderr)
    );
    assert!(row(&table, "faults").ends_with("win"), "{table}");
    // --fail-on alone gates, on the rows it names only.
    let o = compare(&light, &heavy, &["--fail-on", "faults"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let o = compare(&light, &heavy, &["--fail-on", "no_such_metric"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.lines().count() == 1 && err.contains("--fail-on no_such_metric"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "nothing printed: {}", text(&o.stdout));
    // Without the flag a regression is reported, not failed.
    let o = compare(&light, &heavy, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn single_recordings_are_compared_without_statistics() {
    if !root_or_skip("single_recordings_are_compared_without_statistics") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    record(&a, &["touch", "2000"]);
    record(&b, &["touch", "50000"]);
    let o = compare(&a, &b, &[]);
    ok(&o, "compare two recordings");
    let table = text(&o.stdout);
    let no_stats: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("no statistics"))
        .collect();
    assert_eq!(no_stats.len(), 1, "{table}");
    assert!(!table.contains("95% CI  "), "no CI column: {table}");
    assert!(row(&table, "faults").ends_with("loss"), "{table}");
    let o = compare(&a, &b, &["--format", "json"]);
    ok(&o, "compare --format json");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["statistics"], "none");
    assert!(json_row(&doc, "faults")["test"].is_null());
    // Any loss beyond the threshold fails when asked to.
    let o = compare(&a, &b, &["--fail-on-regression"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
}

/// Runs compare on `base` and `new` and checks: exit 2, one stderr line
/// naming `culprit`, nothing on stdout.
fn refused(base: &Path, new: &Path, culprit: &Path, what: &str) -> String {
    let o = compare(base, new, &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: not one line: {err}");
    assert!(err.starts_with("vmscope: "), "{what}: {err}");
    assert!(
        err.contains(s(culprit)),
        "{what}: does not name the file: {err}"
    );
    assert!(o.stdout.is_empty(), "{what}: {}", text(&o.stdout));
    err
}

#[test]
fn bad_input_is_refused_with_one_line_and_exit_2() {
    if !root_or_skip("bad_input_is_refused_with_one_line_and_exit_2") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| -> PathBuf { dir.path().join(n) };
    let (rec, bench_file) = (p("rec.json"), p("bench.json"));
    record(&rec, &["touch", "100"]);
    bench(&bench_file, "1", &["touch", "100"]);
    let rec_text = std::fs::read_to_string(&rec).unwrap();
    let bench_text = std::fs::read_to_string(&bench_file).unwrap();

    let truncated = p("truncated.json");
    std::fs::write(&truncated, &rec_text[..rec_text.len() / 2]).unwrap();
    let err = refused(&truncated, &rec, &truncated, "truncated recording");
    assert!(err.contains("truncated"), "{err}");

    let truncated_bench = p("truncated-bench.json");
    std::fs::write(&truncated_bench, &bench_text[..bench_text.len() / 2]).unwrap();
    let err = refused(
        &bench_file,
        &truncated_bench,
        &truncated_bench,
        "truncated bench",
    );
    assert!(err.contains("bench file"), "{err}");

    let garbage = p("garbage.txt");
    std::fs::write(&garbage, "this is not JSON\n").unwrap();
    refused(&rec, &garbage, &garbage, "non-JSON");

    let err = refused(&rec, &bench_file, &bench_file, "recording vs bench");
    assert!(err.contains(s(&rec)) && err.contains("two recordings or two bench files"));
    refused(&bench_file, &rec, &bench_file, "bench vs recording");

    for (name, original) in [("v99.json", &rec), ("bench-v99.json", &bench_file)] {
        let mut doc = read_json(original);
        doc["schema_version"] = 99.into();
        let newer = p(name);
        std::fs::write(&newer, serde_json::to_string(&doc).unwrap()).unwrap();
        let err = refused(&rec, &newer, &newer, name);
        assert!(err.contains("schema_version 99"), "{err}");
    }

    let wrong = p("wrong-schema.json");
    std::fs::write(&wrong, r#"{"schema_version": 1, "hello": "world"}"#).unwrap();
    refused(&wrong, &rec, &wrong, "wrong schema");

    let missing = p("missing.json");
    refused(&rec, &missing, &missing, "missing file");
}

/// An input past 1 GiB is refused by its size, before it is read, in one
/// line naming the file and the limit, by `compare` and by `report` (the
/// file is sparse: it takes no room).
#[test]
fn oversized_inputs_are_refused_before_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len((1 << 30) + 1).unwrap();
    for args in [
        vec!["compare", s(&big), s(&big)],
        vec!["report", s(&big)],
        vec!["report", s(&big), s(&big)],
    ] {
        let started = std::time::Instant::now();
        let o = vmscope_within(&args, Duration::from_secs(60));
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(
            err.contains(s(&big)) && err.contains("larger than the 1024 MiB"),
            "{args:?}: {err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{args:?}: took {:?}",
            started.elapsed()
        );
    }
}
