//! `vmscope report`: the HTML page made from a real recording, checked as
//! text and then rendered by headless Chromium (a screenshot and the DOM it
//! builds, with no script errors), and bad input refused with one line.
//!
//! The screenshot is kept as a CI artifact: `target/ci-artifacts/report.png`
//! in the workspace.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Output},
    time::{Duration, Instant},
};

use vmscope_tests::{read_json, root_or_skip, run_with_timeout, testchild, vmscope_bin};

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

/// The first of `names` found as an executable on PATH.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| {
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
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

    let Some(bin) = on_path(&["chromium", "chromium-browser"]) else {
        let required = std::env::var("VMSCOPE_REQUIRE_BPF").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{TEST}: no chromium or chromium-browser on PATH, and VMSCOPE_REQUIRE_BPF=1 forbids skipping; install Debian's chromium package"
        );
        eprintln!(
            "skipped {TEST} (Chromium part): no chromium or chromium-browser on PATH; apt-get install chromium"
        );
        return;
    };
    let url = format!("file://{}", html_path.display());
    let scratch = tempfile::tempdir().unwrap();

    let png_path = dir.path().join("report.png");
    let mut shot = chromium(&bin, scratch.path());
    shot.arg(format!("--screenshot={}", png_path.display()))
        .arg(format!("--window-size={},{}", WINDOW.0, WINDOW.1))
        .arg(&url);
    let o = run_with_timeout(shot, LIMIT);
    // Kept before any check, so a failing run leaves it to look at.
    if png_path.exists() {
        let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        std::fs::copy(&png_path, artifacts.join("report.png")).unwrap();
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

    let dom_path = dir.path().join("dom.html");
    let err_path = dir.path().join("dom.err");
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
