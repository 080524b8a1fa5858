//! Checked-in documents from real runs, read back without privileges: each
//! validates against its published schema, and `compare` and `report` work
//! on them as any user. None of these tests needs root, and none skips.
//!
//! The fixtures, made as root from the workspace root with the testchild on
//! PATH (`PATH=$PWD/target/release:$PATH`):
//!
//! ```text
//! vmscope bench --runs 3 --name touch-2000 -o tests/fixtures/bench/touch-2000.bench.json -- vmscope-testchild touch 2000
//! vmscope bench --runs 3 --name touch-8000 -o tests/fixtures/bench/touch-8000.bench.json -- vmscope-testchild touch 8000
//! vmscope record -i 100ms -o tests/fixtures/bench/touch.recording.json -- vmscope-testchild touch 4000
//! (cd tests/fixtures/bench && vmscope compare --format json touch-2000.bench.json touch-8000.bench.json > touch.compare.json)
//! ```
//!
//! `churn.recording.json` is described in `vmscope/src/fold.rs`, the
//! `lab-lazyfree/` files in `hostile.rs`.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

use serde_json::Value;
use vmscope_tests::{
    assert_valid, ok, path_str, read_json, run_with_timeout, schema, text, vmscope_bin,
};

const BASE: &str = "touch-2000.bench.json";
const NEW: &str = "touch-8000.bench.json";
const COMPARE: &str = "touch.compare.json";
const RECORDING: &str = "touch.recording.json";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn bench_dir() -> PathBuf {
    fixtures().join("bench")
}

fn churn() -> PathBuf {
    fixtures().join("churn.recording.json")
}

/// `vmscope ARGS` run in `dir` (so relative paths name the fixtures as
/// they were named when the compare fixture was made).
fn vmscope_in(dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(vmscope_bin());
    c.current_dir(dir).args(args);
    run_with_timeout(c, Duration::from_secs(60))
}

fn compare(format: &str) -> Output {
    let o = vmscope_in(&bench_dir(), &["compare", "--format", format, BASE, NEW]);
    ok(
        &o,
        &format!("compare --format {format} of the bench fixtures"),
    );
    o
}

/// The rows of the checked-in comparison.
fn compare_fixture() -> Value {
    read_json(&bench_dir().join(COMPARE))
}

fn row<'a>(doc: &'a Value, metric: &str) -> &'a Value {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no {metric} row in {doc:#}"))
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("{v} is not an array"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The pages a `vmscope-testchild touch PAGES` bench touched.
fn touched_pages(bench: &Value) -> f64 {
    let cmd: Vec<&str> = bench["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    match cmd.as_slice() {
        ["vmscope-testchild", "touch", n] => n.parse().unwrap(),
        other => panic!("not a touch bench: {other:?}"),
    }
}

#[test]
fn every_fixture_validates_against_its_published_schema() {
    let recording = schema("recording.schema.json");
    let bench = schema("bench.schema.json");
    let compare = schema("compare.schema.json");
    let lab = fixtures().join("lab-lazyfree");
    let cases = [
        (&recording, churn()),
        (&recording, bench_dir().join(RECORDING)),
        (&bench, bench_dir().join(BASE)),
        (&bench, bench_dir().join(NEW)),
        (&bench, lab.join("dontneed.json")),
        (&bench, lab.join("free.json")),
        (&compare, bench_dir().join(COMPARE)),
        (&compare, lab.join("compare.json")),
    ];
    for (v, path) in cases {
        assert_valid(v, &read_json(&path), &path.display().to_string());
    }
    // Each schema takes only its own document: the kinds tell them apart.
    let rec = read_json(&churn());
    let b = read_json(&bench_dir().join(BASE));
    let c = compare_fixture();
    assert!(!bench.is_valid(&rec), "a recording passes as a bench file");
    assert!(!bench.is_valid(&c), "a comparison passes as a bench file");
    assert!(!compare.is_valid(&b), "a bench file passes as a comparison");
    assert!(
        !recording.is_valid(&c),
        "a comparison passes as a recording"
    );
    let mut wrong_kind = b.clone();
    wrong_kind["kind"] = "vmscope-compare".into();
    assert!(!bench.is_valid(&wrong_kind), "the bench kind is not pinned");
}

#[test]
fn compare_json_of_the_bench_fixtures_is_the_checked_in_comparison() {
    let got: Value = serde_json::from_slice(&compare("json").stdout).unwrap();
    assert_valid(
        &schema("compare.schema.json"),
        &got,
        "compare --format json",
    );
    // The comparison is a pure function of the two files: all of it, not
    // only its stable part, comes out the same.
    assert!(
        got == compare_fixture(),
        "compare --format json differs from tests/fixtures/bench/{COMPARE}; if the change \
         is meant, regenerate it as the header of tests/tests/fixtures.rs says"
    );
}

#[test]
fn compare_rows_of_the_bench_fixtures_are_the_runs_own_values() {
    let doc: Value = serde_json::from_slice(&compare("json").stdout).unwrap();
    let (b, n) = (
        read_json(&bench_dir().join(BASE)),
        read_json(&bench_dir().join(NEW)),
    );
    assert_eq!(doc["statistics"], "welch");
    assert_eq!(doc["base"]["runs"], b["runs"].as_array().unwrap().len());
    assert_eq!(doc["new"]["runs"], n["runs"].as_array().unwrap().len());
    assert_eq!(doc["base"]["name"], b["name"]);
    assert_eq!(doc["new"]["name"], n["name"]);
    let metrics: Vec<&str> = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metric"].as_str().unwrap())
        .collect();
    assert_eq!(
        metrics[..4],
        ["real", "user", "sys", "cpu"],
        "headline rows"
    );
    // Every row's values are that metric's per-run values in the bench file.
    for r in doc["rows"].as_array().unwrap() {
        let m = r["metric"].as_str().unwrap();
        if let Some(values) = b["metrics"].get(m).map(|s| f64s(&s["values"])) {
            assert_eq!(f64s(&r["base"]["values"]), values, "{m}: BASE values");
        }
        if let Some(values) = n["metrics"].get(m).map(|s| f64s(&s["values"])) {
            assert_eq!(f64s(&r["new"]["values"]), values, "{m}: NEW values");
        }
    }
    // The wall times are the results' times.
    assert_eq!(
        f64s(&row(&doc, "real")["base"]["values"]),
        f64s(&b["results"][0]["times"])
    );
    // The workloads differ by the pages touched, one fault each: the
    // difference of the fault means is that, within 1%.
    let faults = row(&doc, "faults");
    let extra_pages = touched_pages(&n) - touched_pages(&b);
    let diff = faults["diff"].as_f64().unwrap();
    assert!(
        (diff - extra_pages).abs() <= extra_pages * 0.01,
        "faults: {diff} more, for {extra_pages} more pages touched"
    );
    assert_eq!(faults["verdict"], "loss");
    assert_eq!(faults["significant"], true);
    assert!(
        doc["regressions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "faults")
    );
}

#[test]
fn compare_table_and_markdown_show_the_json_rows() {
    let doc: Value = serde_json::from_slice(&compare("json").stdout).unwrap();
    let table = text(&compare("table").stdout);
    let markdown = text(&compare("markdown").stdout);
    assert!(
        table.starts_with(&format!("BASE: {BASE} (bench, 3 runs): touch-2000")),
        "{table}"
    );
    assert!(
        table.contains(&format!("\nNEW : {NEW} (bench, 3 runs): touch-8000")),
        "{table}"
    );
    assert!(table.contains("Welch's t-test"), "{table}");
    assert!(
        markdown.starts_with(&format!("**BASE**: {BASE} (bench, 3 runs)")),
        "{markdown}"
    );
    assert!(markdown.contains("| metric | BASE | NEW | change | 95% CI | p | verdict |"));
    for r in doc["rows"].as_array().unwrap() {
        let (m, verdict) = (
            r["metric"].as_str().unwrap(),
            r["verdict_text"].as_str().unwrap(),
        );
        assert!(
            table.lines().any(|l| {
                l.split_whitespace().next() == Some(m) && l.trim_end().ends_with(verdict)
            }),
            "no table row {m} … {verdict} in\n{table}"
        );
        assert!(
            markdown
                .lines()
                .any(|l| l.starts_with(&format!("| {m} |"))
                    && l.ends_with(&format!("| {verdict} |"))),
            "no markdown row {m} … {verdict} in\n{markdown}"
        );
    }
}

#[test]
fn compare_of_two_recordings_runs_unprivileged() {
    let (base, new) = (churn(), bench_dir().join(RECORDING));
    let o = vmscope_in(
        &fixtures(),
        &[
            "compare",
            "--format",
            "json",
            path_str(&base),
            path_str(&new),
        ],
    );
    ok(&o, "compare --format json of two recordings");
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_valid(
        &schema("compare.schema.json"),
        &doc,
        "compare of two recordings",
    );
    assert_eq!(doc["statistics"], "none");
    assert_eq!(doc["base"]["kind"], "recording");
    assert_eq!(doc["new"]["kind"], "recording");
    let (b, n) = (read_json(&base), read_json(&new));
    for (side, rec) in [("base", &b), ("new", &n)] {
        let faults = row(&doc, "faults")[side]["values"].clone();
        assert_eq!(
            f64s(&faults),
            [rec["totals"]["scope_faults"]["total"].as_f64().unwrap()],
            "{side}: faults are the recording's scope faults"
        );
        let minflt = row(&doc, "minflt")[side]["values"].clone();
        assert_eq!(
            f64s(&minflt),
            [rec["child"]["rusage"]["minflt"].as_f64().unwrap()],
            "{side}: minflt is the child's rusage"
        );
    }
    let table = vmscope_in(&fixtures(), &["compare", path_str(&base), path_str(&new)]);
    ok(&table, "compare of two recordings");
    assert!(text(&table.stdout).contains("no statistics: one run per side"));
}

/// `vmscope report ARGS -o DIR/NAME`; the page.
fn report(inputs: &[&Path], name: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join(name);
    let mut args = vec!["report"];
    args.extend(inputs.iter().map(|p| path_str(p)));
    args.extend(["-o", path_str(&page)]);
    let o = vmscope_in(&bench_dir(), &args);
    ok(&o, &format!("report of {inputs:?}"));
    assert!(page.is_file(), "report wrote no {}", page.display());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        text(&o.stderr).contains(&format!("plots written to {}", page.display())),
        "{}",
        text(&o.stderr)
    );
    assert!(!html.contains("<script"), "the page has a script");
    html
}

fn has(html: &str, want: &str, what: &str) {
    assert!(html.contains(want), "{what}: no {want:?} in the page");
}

#[test]
fn report_renders_the_recording_fixture_unprivileged() {
    let html = report(&[&churn()], "churn.html");
    has(&html, "id=\"rate-faults\"", "recording");
    has(&html, "<h2>Processes</h2>", "recording");
    has(&html, ">vmscope-testchi<", "recording");
    let rec = read_json(&churn());
    for (name, h) in rec["totals"]["histograms"].as_object().unwrap() {
        if h["count"].as_u64().unwrap() > 0 {
            has(
                &html,
                &format!("<figure class=\"plot\" id=\"latency-{name}\""),
                "recording",
            );
        }
    }
}

#[test]
fn report_renders_the_bench_fixture_unprivileged() {
    let path = bench_dir().join(BASE);
    let html = report(&[&path], "bench.html");
    for want in [
        "<h1>vmscope bench: ",
        "<h2 id=\"per-run\">Run by run</h2>",
        "<h2 id=\"distributions\">Distributions</h2>",
        "<h2 id=\"summary\">Summary</h2>",
        "<h2 id=\"runs\">Runs</h2>",
        "id=\"per-run-times\"",
    ] {
        has(&html, want, "bench");
    }
    let runs = read_json(&path)["runs"].as_array().unwrap().len();
    for n in 1..=runs {
        has(
            &html,
            &format!("<details id=\"run-{n}\" class=\"run\">"),
            "bench",
        );
    }
}

#[test]
fn report_renders_the_comparison_fixtures_unprivileged() {
    let pair = report(&[Path::new(BASE), Path::new(NEW)], "pair.html");
    for want in [
        "<h1>vmscope compare: ",
        "Welch's t-test",
        "<h2 id=\"table\">Metrics</h2>",
        "<h2 id=\"bars\">BASE and NEW</h2>",
        "<figure class=\"plot\" id=\"bars-faults\"",
        "<td class=\"l\">faults</td>",
    ] {
        has(&pair, want, "compare");
    }
    // The page of the checked-in comparison is the page of its two sides.
    let from_json = report(&[Path::new(COMPARE)], "from-json.html");
    assert!(
        from_json == pair,
        "the page of {COMPARE} differs from that of {BASE} {NEW}"
    );
    // Two recordings too.
    let recs = report(&[&churn(), &bench_dir().join(RECORDING)], "recordings.html");
    has(&recs, "<h1>vmscope compare: ", "two recordings");
}
