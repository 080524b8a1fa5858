//! `vmscope report`: the HTML pages made from a real recording, a real bench
//! file and a comparison (BASE and NEW, or compare's JSON), checked as text
//! and then rendered by headless Chromium (a screenshot and the DOM it
//! builds, with no script errors); `--svg` and `--png` files; and bad input
//! refused with one line.
//!
//! The screenshots are kept as CI artifacts in `target/ci-artifacts/` in
//! the workspace: `report.png`, `report-bench.png`, `report-compare.png`.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    collections::BTreeSet,
    fs::File,
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Output},
    sync::OnceLock,
    time::{Duration, Instant},
};

use vmscope_tests::{
    on_path, read_json, root_or_skip, run_with_timeout, skip_unless, testchild, vmscope_bin,
};

const LIMIT: Duration = Duration::from_secs(120);

/// The first line of a PNG file.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Chromium's window, and so the screenshot, in pixels.
const WINDOW: (u32, u32) = (1400, 4000);

fn vmscope(args: &[&str]) -> Output {
    let mut c = Command::new(vmscope_bin());
    c.args(args);
    run_with_timeout(c, LIMIT)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output, what: &str) {
    assert!(o.status.success(), "{what}: {:?}: {}", o.status, stderr(o));
}

/// `vmscope record -i INTERVAL -o OUT -- CMD...`, which must succeed.
fn record(out: &Path, interval: &str, cmd: &[&str]) {
    let mut args = vec!["record", "-i", interval, "-o", out.to_str().unwrap(), "--"];
    args.extend_from_slice(cmd);
    ok(&vmscope(&args), "vmscope record");
    assert!(out.exists(), "vmscope record wrote no {}", out.display());
}

/// How often `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// The N of `data-plots="N"`.
fn data_plots(html: &str) -> usize {
    let rest = html
        .split_once("data-plots=\"")
        .unwrap_or_else(|| panic!("no data-plots attribute in {:.300}", html))
        .1;
    let n = &rest[..rest.find('"').unwrap()];
    n.parse()
        .unwrap_or_else(|e| panic!("data-plots=\"{n}\" is not a number: {e}"))
}

/// Runs `cmd` with stdout and stderr going to files, killing it after
/// `limit`. (`run_with_timeout` collects pipes only once the child has
/// exited, so a child that writes more than a pipe holds, like Chromium's
/// `--dump-dom` of a report, would block until the timeout.)
fn run_to_files(mut cmd: Command, out: &Path, err: &Path, limit: Duration) -> ExitStatus {
    cmd.stdin(std::process::Stdio::null())
        .stdout(File::create(out).unwrap())
        .stderr(File::create(err).unwrap());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} timed out after {limit:?}; stderr: {}",
                std::fs::read_to_string(err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Headless Chromium with a throwaway profile (and HOME) in `scratch`,
/// logging the page's console to stderr so script errors can be seen.
fn chromium(bin: &Path, scratch: &Path) -> Command {
    let profile = scratch.join("profile");
    let mut c = Command::new(bin);
    c.env("HOME", scratch).args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--log-level=0",
        &format!("--user-data-dir={}", profile.display()),
    ]);
    c
}

/// Asserts Chromium ran cleanly: status 0, and no console message (an
/// uncaught exception or a script error) on stderr. The page has no script,
/// so any console line is a fault.
fn assert_clean_run(what: &str, status: ExitStatus, stderr: &str) {
    assert!(status.success(), "{what}: {status:?}; stderr: {stderr}");
    let bad: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.contains("Uncaught")
                || l.contains(":CONSOLE")
                || l.contains("SyntaxError")
                || l.contains("ReferenceError")
        })
        .collect();
    assert!(bad.is_empty(), "{what}: script errors: {bad:#?}");
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.len() > 24 && &png[12..16] == b"IHDR", "no IHDR chunk");
    let be = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

/// Headless Chromium renders the page at `html_path` without errors: a
/// screenshot of the window's size (kept as the CI artifact `artifact`), and
/// a DOM with `plots` figures. Without Chromium on PATH the check is
/// skipped, unless VMSCOPE_REQUIRE_BPF=1.
fn renders_in_chromium(test: &str, html_path: &Path, artifact: &str, plots: usize) {
    let Some(bin) = on_path(&["chromium", "chromium-browser"]) else {
        skip_unless(
            &format!("{test} (Chromium part)"),
            false,
            "no chromium or chromium-browser on PATH",
            "apt-get install chromium",
        );
        return;
    };
    let url = format!("file://{}", html_path.display());
    let scratch = tempfile::tempdir().unwrap();

    let png_path = scratch.path().join("screenshot.png");
    let mut shot = chromium(&bin, scratch.path());
    shot.arg(format!("--screenshot={}", png_path.display()))
        .arg(format!("--window-size={},{}", WINDOW.0, WINDOW.1))
        .arg(&url);
    let o = run_with_timeout(shot, LIMIT);
    // Kept before any check, so a failing run leaves it to look at.
    if png_path.exists() {
        let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        std::fs::copy(&png_path, artifacts.join(artifact)).unwrap();
    }
    assert_clean_run("chromium --screenshot", o.status, &stderr(&o));
    let png = std::fs::read(&png_path)
        .unwrap_or_else(|e| panic!("no screenshot at {}: {e}", png_path.display()));
    assert!(
        png.starts_with(PNG_SIGNATURE),
        "the screenshot is not a PNG"
    );
    assert!(
        png.len() > 10 * 1024,
        "the screenshot is only {} bytes",
        png.len()
    );
    assert_eq!(png_size(&png), WINDOW, "screenshot size");

    let dom_path = scratch.path().join("dom.html");
    let err_path = scratch.path().join("dom.err");
    let mut dump = chromium(&bin, scratch.path());
    dump.arg("--dump-dom").arg(&url);
    let status = run_to_files(dump, &dom_path, &err_path, LIMIT);
    let dom_err = std::fs::read_to_string(&err_path).unwrap();
    assert_clean_run("chromium --dump-dom", status, &dom_err);
    let dom = std::fs::read_to_string(&dom_path).unwrap();
    assert_eq!(data_plots(&dom), plots, "data-plots in the DOM");
    assert_eq!(
        count(&dom, "<figure class=\"plot\""),
        plots,
        "figures in the DOM Chromium built"
    );
}

/// A recording of madvise calls, 50,000 page faults and a second of steady
/// faulting (so the rates span several intervals and draw lines) becomes a
/// page whose plot count is consistent and covers every latency histogram;
/// headless Chromium renders it (screenshot, DOM) without errors. The
/// screenshot is copied to `<workspace>/target/ci-artifacts/report.png` as a
/// CI artifact.
#[test]
fn report_of_a_real_recording_renders_in_headless_chromium() {
    const TEST: &str = "report_of_a_real_recording_renders_in_headless_chromium";
    if !root_or_skip(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let html_path = dir.path().join("run.html");
    let child = testchild().display().to_string();
    record(
        &json,
        "200ms",
        &[
            "sh",
            "-c",
            r#""$0" madvise 2000 && "$0" touch 50000 && "$0" churn 1000"#,
            &child,
        ],
    );
    let rec = read_json(&json);

    let o = vmscope(&[
        "report",
        json.to_str().unwrap(),
        "-o",
        html_path.to_str().unwrap(),
    ]);
    ok(&o, "vmscope report");
    let html = std::fs::read_to_string(&html_path).unwrap();
    let plots = data_plots(&html);
    assert_eq!(
        stderr(&o).trim_end(),
        format!(
            "vmscope report: {plots} plots written to {}",
            html_path.display()
        )
    );
    assert_eq!(count(&html, "<figure class=\"plot\""), plots, "figures");
    assert_eq!(count(&html, "<svg"), plots, "inline SVGs");
    assert!(plots >= 3, "only {plots} plots");
    assert!(!html.contains("<script"), "the page has a script");
    assert!(
        html.contains("id=\"rate-faults\""),
        "no plot of the fault rate"
    );
    let histograms = rec["totals"]["histograms"]
        .as_object()
        .unwrap_or_else(|| panic!("no totals.histograms in the recording"));
    let used: Vec<&String> = histograms
        .iter()
        .filter(|(_, h)| h["count"].as_u64().unwrap() > 0)
        .map(|(name, _)| name)
        .collect();
    assert!(
        used.iter().any(|n| n.starts_with("madvise_")),
        "no madvise histogram in {used:?}"
    );
    for name in &used {
        assert!(
            html.contains(&format!("<figure class=\"plot\" id=\"latency-{name}\"")),
            "histogram {name} has no latency-{name} figure"
        );
    }
    // The process table lists the workload (comm is cut to 15 characters).
    assert!(
        html.contains("<h2>Processes</h2>") && html.contains(">vmscope-testchi<"),
        "no process table with the workload"
    );

    renders_in_chromium(TEST, &html_path, "report.png", plots);
}

/// Asserts `o` failed (with `code`, when given) and said so in exactly one
/// stderr line that names `path`.
fn refused(o: &Output, code: Option<i32>, path: &Path, what: &str) {
    let err = stderr(o);
    match code {
        Some(c) => assert_eq!(o.status.code(), Some(c), "{what}: stderr: {err}"),
        None => assert!(!o.status.success(), "{what} succeeded: {err}"),
    }
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: not one stderr line: {err:?}");
    let p = path.display().to_string();
    assert!(
        lines[0].contains(&p),
        "{what}: {:?} does not name {p}",
        lines[0]
    );
}

/// A missing file, a non-JSON file, JSON without `schema_version` and a
/// truncated real recording each end with exit 2 and one stderr line naming
/// the file, writing no page; `-o` into a missing directory fails with one
/// line.
#[test]
fn report_refuses_bad_input_with_one_line() {
    const TEST: &str = "report_refuses_bad_input_with_one_line";
    let dir = tempfile::tempdir().unwrap();
    let bad = |name: &str, text: Option<&[u8]>| {
        let path = dir.path().join(name);
        if let Some(t) = text {
            std::fs::write(&path, t).unwrap();
        }
        let o = vmscope(&["report", path.to_str().unwrap()]);
        refused(&o, Some(2), &path, name);
        assert!(
            !path.with_extension("html").exists(),
            "{name}: a page was written"
        );
    };
    bad("missing.json", None);
    bad("not-json.json", Some(b"this is not JSON\n"));
    bad(
        "no-version.json",
        Some(br#"{"tool":{"name":"vmscope","version":"0.1.0"},"samples":[]}"#),
    );

    // The rest needs a real recording.
    if !root_or_skip(&format!("{TEST} (its cases with a real recording)")) {
        return;
    }
    let real = dir.path().join("real.json");
    let child = testchild().display().to_string();
    record(&real, "100ms", &[&child, "touch", "2000"]);
    let bytes = std::fs::read(&real).unwrap();
    bad("truncated.json", Some(&bytes[..bytes.len() / 2]));

    let nowhere = dir.path().join("no-such-dir").join("out.html");
    let o = vmscope(&[
        "report",
        real.to_str().unwrap(),
        "-o",
        nowhere.to_str().unwrap(),
    ]);
    refused(&o, None, &nowhere, "-o into a missing directory");
    assert!(!nowhere.parent().unwrap().exists());
    // The good recording itself is accepted.
    ok(
        &vmscope(&["report", real.to_str().unwrap()]),
        "vmscope report",
    );
    assert!(real.with_extension("html").exists());
}

// ------------------------------------------------ bench and compare pages --

/// Two bench files of three runs each, `madvise 200` (BASE) and
/// `madvise 2000` (NEW), made once for the tests that need them (in one
/// directory under cargo's test scratch space, replaced by each run).
fn benches() -> &'static (PathBuf, PathBuf) {
    static BENCHES: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BENCHES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-benches");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let child = testchild().display().to_string();
        let bench = |name: &str, calls: &str| {
            let out = dir.join(name);
            ok(
                &vmscope(&[
                    "bench",
                    "-r",
                    "3",
                    "--trim",
                    "1",
                    "-i",
                    "200ms",
                    "-o",
                    out.to_str().unwrap(),
                    "--",
                    &child,
                    "madvise",
                    calls,
                ]),
                "vmscope bench",
            );
            out
        };
        (bench("base.json", "200"), bench("new.json", "2000"))
    })
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The names of the histograms with samples in any of `runs`.
fn used_histograms<'a>(runs: impl IntoIterator<Item = &'a serde_json::Value>) -> BTreeSet<String> {
    runs.into_iter()
        .flat_map(|r| r["totals"]["histograms"].as_object().unwrap().iter())
        .filter(|(_, h)| h["count"].as_u64().unwrap() > 0)
        .map(|(name, _)| name.clone())
        .collect()
}

/// A bench file of three runs becomes a page with its metadata, per-run
/// plots, one distribution per measured metric, the summary table, and
/// each run's own report collapsed under an anchor the runs table links
/// to; headless Chromium renders it without errors (screenshot kept as
/// `target/ci-artifacts/report-bench.png`).
#[test]
fn bench_report_renders_in_headless_chromium() {
    const TEST: &str = "bench_report_renders_in_headless_chromium";
    if !root_or_skip(TEST) {
        return;
    }
    let (base, _) = benches();
    let dir = tempfile::tempdir().unwrap();
    let html_path = dir.path().join("bench.html");
    let o = vmscope(&["report", s(base), "-o", s(&html_path)]);
    ok(&o, "vmscope report BENCH");
    let html = std::fs::read_to_string(&html_path).unwrap();
    let plots = data_plots(&html);
    assert_eq!(
        stderr(&o).trim_end(),
        format!(
            "vmscope report: {plots} plots written to {}",
            html_path.display()
        )
    );
    assert_eq!(count(&html, "<figure class=\"plot\""), plots, "figures");
    assert_eq!(count(&html, "<svg"), plots, "inline SVGs");
    assert!(!html.contains("<script"), "the page has a script");
    let doc = read_json(base);
    for want in [
        "<h1>vmscope bench: ",
        "<th class=\"l\">warmup</th>",
        "<th class=\"l\">trim</th>",
        "id=\"per-run-times\"",
        "id=\"per-run-madvise_calls\"",
        "<h2 id=\"summary\">Summary</h2>",
        "<th>trimmed mean</th>",
    ] {
        assert!(html.contains(want), "no {want:?} in the bench page");
    }
    // A distribution for each metric with a non-zero value in some run.
    let metrics = doc["metrics"].as_object().unwrap();
    let measured: Vec<&String> = metrics
        .iter()
        .filter(|(_, m)| m["values"].as_array().unwrap().iter().any(|v| v != 0.0))
        .map(|(name, _)| name)
        .collect();
    assert!(measured.len() >= 5, "only {measured:?}");
    for name in &measured {
        assert!(
            html.contains(&format!("<figure class=\"plot\" id=\"dist-{name}\"")),
            "no distribution of {name}"
        );
    }
    assert_eq!(
        count(&html, "<figure class=\"plot\" id=\"dist-"),
        measured.len()
    );
    // Every run: a row linking to its collapsed report, with its histograms.
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for (i, run) in runs.iter().enumerate() {
        let n = i + 1;
        assert!(html.contains(&format!("<a href=\"#run-{n}\">run {n}</a>")));
        assert!(html.contains(&format!("<details id=\"run-{n}\" class=\"run\">")));
        let hists = used_histograms([run]);
        assert!(!hists.is_empty(), "run {n} has no histogram");
        for h in hists {
            assert!(
                html.contains(&format!("id=\"run{n}-latency-{h}\"")),
                "run {n}: no latency-{h} figure"
            );
        }
    }
    renders_in_chromium(TEST, &html_path, "report-bench.png", plots);
}

/// `report BASE NEW` on two bench files compares them as `compare` does:
/// the table with Welch's CI and verdicts, bars with error bars for the
/// headline metrics, and an overlay of every histogram both sides have;
/// the page made from `compare --format json` is the same page. Headless
/// Chromium renders it (screenshot kept as
/// `target/ci-artifacts/report-compare.png`).
#[test]
fn compare_report_of_two_bench_files_renders_in_headless_chromium() {
    const TEST: &str = "compare_report_of_two_bench_files_renders_in_headless_chromium";
    if !root_or_skip(TEST) {
        return;
    }
    let (base, new) = benches();
    let dir = tempfile::tempdir().unwrap();
    let pair = dir.path().join("pair.html");
    let o = vmscope(&["report", s(base), s(new), "-o", s(&pair)]);
    ok(&o, "vmscope report BASE NEW");
    let html = std::fs::read_to_string(&pair).unwrap();
    let plots = data_plots(&html);
    assert_eq!(count(&html, "<figure class=\"plot\""), plots, "figures");
    assert_eq!(count(&html, "<svg"), plots, "inline SVGs");
    assert!(html.contains("<h1>vmscope compare: "), "no title");
    assert!(html.contains("Welch's t-test"), "no statistics named");
    // Bars for each headline metric that either side measured above 0 (a
    // run of a few ms may take no tick of user or system time: then both
    // means are 0 and there is nothing to draw), as compare's rows say.
    let c = vmscope(&["compare", s(base), s(new), "--format", "json"]);
    ok(&c, "vmscope compare --format json");
    let rows: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    for metric in ["real", "user", "sys", "faults", "madvise_calls"] {
        let row = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metric"] == metric)
            .unwrap_or_else(|| panic!("no {metric} row in compare's JSON"));
        let measured = ["base", "new"]
            .iter()
            .any(|side| row[side]["mean"].as_f64().unwrap() != 0.0);
        let drawn = html.contains(&format!("<figure class=\"plot\" id=\"bars-{metric}\""));
        assert_eq!(drawn, measured, "bars of {metric} drawn: {drawn}; {row}");
        if ["real", "faults", "madvise_calls"].contains(&metric) {
            assert!(drawn, "no bars of {metric}");
        }
    }
    // madvise_calls: 600 -> 6000, exactly, in the table.
    let row = html
        .lines()
        .find(|l| l.contains("<td class=\"l\">madvise_calls</td>"))
        .unwrap_or_else(|| panic!("no madvise_calls row"));
    assert!(row.contains("<td>600 ± 0</td><td>6000 ± 0</td>"), "{row}");
    assert!(row.contains("+900%") && row.contains("900% more"), "{row}");
    // Overlays: exactly the histograms both sides have.
    let (b, n) = (read_json(base), read_json(new));
    let both: Vec<String> = used_histograms(b["runs"].as_array().unwrap())
        .intersection(&used_histograms(n["runs"].as_array().unwrap()))
        .cloned()
        .collect();
    assert!(
        both.iter().any(|h| h.starts_with("madvise_")),
        "no madvise histogram on both sides: {both:?}"
    );
    assert_eq!(count(&html, "id=\"overlay-"), both.len(), "{both:?}");
    for h in &both {
        assert!(html.contains(&format!("<figure class=\"plot\" id=\"overlay-{h}\"")));
    }

    // compare's JSON carries each side's buckets summed over its runs...
    let c = vmscope(&["compare", s(base), s(new), "--format", "json"]);
    ok(&c, "vmscope compare --format json");
    let doc: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    assert_eq!(doc["kind"], "vmscope-compare");
    let h = &both[0];
    let summed: u64 = b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["totals"]["histograms"][h]["count"].as_u64())
        .sum();
    let carried: u64 = doc["histograms"][h]["base"]["buckets"]
        .as_array()
        .unwrap_or_else(|| panic!("no histograms.{h}.base.buckets in {doc:#}"))
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(carried, summed, "{h}: BASE buckets vs the runs' counts");
    assert_eq!(doc["histograms"][h]["base"]["count"], summed);
    // ...and the page made from it is the page of BASE NEW.
    let json = dir.path().join("compare.json");
    std::fs::write(&json, &c.stdout).unwrap();
    let from_json = dir.path().join("from-json.html");
    ok(
        &vmscope(&["report", s(&json), "-o", s(&from_json)]),
        "vmscope report COMPARE.json",
    );
    assert!(
        std::fs::read_to_string(&from_json).unwrap() == html,
        "the page from compare's JSON differs from the page of BASE NEW"
    );
    // Without -o, BASE-vs-NEW.html beside BASE.
    let (copy_a, copy_b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    std::fs::copy(base, &copy_a).unwrap();
    std::fs::copy(new, &copy_b).unwrap();
    ok(
        &vmscope(&["report", s(&copy_a), s(&copy_b)]),
        "vmscope report a b",
    );
    assert!(dir.path().join("a-vs-b.html").exists(), "no a-vs-b.html");

    renders_in_chromium(TEST, &pair, "report-compare.png", plots);
}

/// The `width` and `height` attributes of an SVG's root element.
fn svg_size(svg: &str) -> (u32, u32) {
    let attr = |name: &str| -> u32 {
        let at = svg
            .find(&format!(" {name}=\""))
            .unwrap_or_else(|| panic!("no {name} in {:.200}", svg));
        let rest = &svg[at + name.len() + 3..];
        rest[..rest.find('"').unwrap()].parse().unwrap()
    };
    (attr("width"), attr("height"))
}

/// The file stems in `dir` with extension `ext`.
fn stems(dir: &Path, ext: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .inspect(|p| assert_eq!(p.extension().unwrap(), ext, "{}", p.display()))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// `--svg DIR --png DIR` write one file per plot of the page, named by the
/// plot's id; each PNG decodes at its SVG's size and is not one colour.
#[test]
fn svg_and_png_write_one_file_per_plot() {
    const TEST: &str = "svg_and_png_write_one_file_per_plot";
    if !root_or_skip(TEST) {
        return;
    }
    let (base, new) = benches();
    for (what, inputs) in [("bench", vec![base]), ("compare", vec![base, new])] {
        let dir = tempfile::tempdir().unwrap();
        let (svg_dir, png_dir) = (dir.path().join("svg"), dir.path().join("png"));
        std::fs::create_dir(&svg_dir).unwrap();
        std::fs::create_dir(&png_dir).unwrap();
        let html_path = dir.path().join("page.html");
        let mut args = vec!["report"];
        args.extend(inputs.iter().map(|p| s(p)));
        args.extend([
            "-o",
            s(&html_path),
            "--svg",
            s(&svg_dir),
            "--png",
            s(&png_dir),
        ]);
        let o = vmscope(&args);
        ok(&o, what);
        let html = std::fs::read_to_string(&html_path).unwrap();
        let plots = data_plots(&html);
        let err = stderr(&o);
        assert!(
            err.contains(&format!("{plots} SVG files written to"))
                && err.contains(&format!("{plots} PNG files written to")),
            "{what}: {err}"
        );
        let svgs = stems(&svg_dir, "svg");
        assert_eq!(svgs.len(), plots, "{what}: SVG files");
        assert_eq!(stems(&png_dir, "png"), svgs, "{what}: PNG files");
        for id in &svgs {
            assert!(
                html.contains(&format!("id=\"{id}\"")),
                "{what}: {id} not in the page"
            );
            let svg = std::fs::read_to_string(svg_dir.join(format!("{id}.svg"))).unwrap();
            let decoder = png::Decoder::new(std::io::BufReader::new(
                File::open(png_dir.join(format!("{id}.png"))).unwrap(),
            ));
            let mut reader = decoder
                .read_info()
                .unwrap_or_else(|e| panic!("{what}: {id}.png does not decode: {e}"));
            let mut buf = vec![0; reader.output_buffer_size().unwrap()];
            let info = reader.next_frame(&mut buf).unwrap();
            assert_eq!(
                (info.width, info.height),
                svg_size(&svg),
                "{what}: {id}.png size"
            );
            let pixel = info.color_type.samples() * usize::from(info.bit_depth as u8).div_ceil(8);
            let pixels = &buf[..info.buffer_size()];
            let first = &pixels[..pixel];
            let other = pixels.chunks(pixel).filter(|p| *p != first).count();
            assert!(
                other > pixels.len() / pixel / 100,
                "{what}: {id}.png is (nearly) one colour: {other} other pixels"
            );
        }
    }
}

/// Bad input to the new layouts is refused as `compare` refuses it: exit 2
/// and one stderr line naming the file, and nothing written (no page, no
/// SVG or PNG file). Cases without a real bench file first.
#[test]
fn bench_and_compare_input_is_refused_with_one_line() {
    const TEST: &str = "bench_and_compare_input_is_refused_with_one_line";
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (out, svg_dir, png_dir) = (p("out.html"), p("svg"), p("png"));
    std::fs::create_dir(&svg_dir).unwrap();
    std::fs::create_dir(&png_dir).unwrap();
    let refuse = |files: &[&Path], culprit: &Path, what: &str| -> String {
        let mut args = vec!["report"];
        args.extend(files.iter().map(|f| s(f)));
        args.extend(["-o", s(&out), "--svg", s(&svg_dir), "--png", s(&png_dir)]);
        let o = vmscope(&args);
        refused(&o, Some(2), culprit, what);
        assert!(!out.exists(), "{what}: a page was written");
        for d in [&svg_dir, &png_dir] {
            assert_eq!(
                std::fs::read_dir(d).unwrap().count(),
                0,
                "{what}: files in {}",
                d.display()
            );
        }
        let hidden: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with('.'))
            .collect();
        assert!(
            hidden.is_empty(),
            "{what}: temporary files left: {hidden:?}"
        );
        stderr(&o)
    };
    let write = |name: &str, text: &str| {
        std::fs::write(p(name), text).unwrap();
        p(name)
    };
    let garbage = write("garbage.txt", "this is not JSON\n");
    let newer = write(
        "compare-v99.json",
        r#"{"kind": "vmscope-compare", "schema_version": 99, "rows": []}"#,
    );
    let err = refuse(&[&newer], &newer, "newer compare output");
    assert!(err.contains("schema_version 99"), "{err}");
    let wrong = write(
        "compare-wrong.json",
        r#"{"kind": "vmscope-compare", "schema_version": 1, "rows": "none"}"#,
    );
    let err = refuse(&[&wrong], &wrong, "compare output of the wrong shape");
    assert!(err.contains("compare schema"), "{err}");
    let cut = write(
        "compare-cut.json",
        "{\n  \"kind\": \"vmscope-compare\",\n  \"schema_version\": 1,\n  \"rows\": [\n    {",
    );
    let err = refuse(&[&cut], &cut, "truncated compare output");
    assert!(err.contains("truncated"), "{err}");
    let bench_wrong = write(
        "bench-wrong.json",
        r#"{"kind": "vmscope-bench", "schema_version": 1, "runs": 3}"#,
    );
    let err = refuse(
        &[&bench_wrong],
        &bench_wrong,
        "bench file of the wrong shape",
    );
    assert!(err.contains("bench"), "{err}");
    refuse(&[&garbage], &garbage, "non-JSON");
    refuse(&[&garbage, &bench_wrong], &garbage, "non-JSON BASE");

    if !root_or_skip(&format!("{TEST} (its cases with real bench files)")) {
        return;
    }
    let (base, new) = benches();
    let base_text = std::fs::read_to_string(base).unwrap();
    let cut_bench = write("bench-cut.json", &base_text[..base_text.len() / 2]);
    let err = refuse(&[&cut_bench], &cut_bench, "truncated bench file");
    assert!(err.contains("truncated"), "{err}");
    refuse(&[base, &cut_bench], &cut_bench, "truncated NEW");
    let mut doc = read_json(base);
    doc["schema_version"] = 99.into();
    let newer_bench = write("bench-v99.json", &serde_json::to_string(&doc).unwrap());
    let err = refuse(&[&newer_bench], &newer_bench, "newer bench file");
    assert!(err.contains("schema_version 99"), "{err}");
    refuse(&[base, &newer_bench], &newer_bench, "newer NEW");
    let c = vmscope(&["compare", s(base), s(new), "--format", "json"]);
    ok(&c, "vmscope compare --format json");
    let compare_text = String::from_utf8(c.stdout).unwrap();
    let cut_compare = write(
        "real-compare-cut.json",
        &compare_text[..compare_text.len() / 2],
    );
    let err = refuse(
        &[&cut_compare],
        &cut_compare,
        "truncated real compare output",
    );
    assert!(err.contains("truncated"), "{err}");
    let real_compare = write("real-compare.json", &compare_text);
    let err = refuse(
        &[base, &real_compare],
        &real_compare,
        "compare output as NEW",
    );
    assert!(err.contains("give it alone"), "{err}");
    // A recording against a bench file: compare's own words.
    let run = p("run.json");
    doc = read_json(base);
    std::fs::write(&run, serde_json::to_string(&doc["runs"][0]).unwrap()).unwrap();
    let err = refuse(&[&run, new], &run, "recording vs bench file");
    assert!(
        err.contains("two recordings or two bench files") && err.contains(s(new)),
        "{err}"
    );
    // Both real bench files are accepted, and write the page.
    ok(
        &vmscope(&["report", s(base), s(new), "-o", s(&out)]),
        "vmscope report BASE NEW",
    );
    assert!(out.exists());
}
