//! Hostile numbers and files: `report --svg` on a real lab bench file
//! (plot ids with `/` in them), a report that fails midway leaving nothing
//! behind, values near 1e308 and huge bucket counts that must neither hang
//! nor panic `report` and `compare`, workload sizes whose products
//! overflow, refused with one line, and `lab rmap --setup-zram` stopped by
//! SIGTERM, SIGHUP or a terminal's SIGINT leaving no swap device or cgroup.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

use serde_json::Value;
use vmscope_tests::{ok, path_str, pressure, root_or_skip, run_with_timeout, text, vmscope_bin};

/// The lab's files, made by `vmscope lab lazyfree -r 2 -t 1 --records 50
/// --chunk-size 4K --chunks 1` (paths and the host name scrubbed).
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/lab-lazyfree")
        .join(name)
}

/// `vmscope ARGS`, failing the test if it takes more than 20 s (a hang).
fn vmscope(args: &[&str]) -> Output {
    let mut c = Command::new(vmscope_bin());
    c.args(args);
    run_with_timeout(c, Duration::from_secs(20))
}

/// Every entry of `dir`, by name.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Exit 0, or one line on stderr with exit 1 or 2; never a panic.
fn finished_cleanly(o: &Output, what: &str) {
    let err = text(&o.stderr);
    assert!(!err.contains("panicked"), "{what}: {err}");
    match o.status.code() {
        Some(0) => {}
        Some(1 | 2) => {
            let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("vmscope:")).collect();
            assert_eq!(lines.len(), 1, "{what}: not one error line: {err}");
        }
        c => panic!("{what}: exit {c:?}: {err}"),
    }
}

#[test]
fn report_svg_on_a_lab_bench_file_writes_safe_names() {
    let dir = tempfile::tempdir().unwrap();
    let svgs = dir.path().join("svgs");
    std::fs::create_dir(&svgs).unwrap();
    let page = dir.path().join("dontneed.html");
    let o = vmscope(&[
        "report",
        path_str(&fixture("dontneed.json")),
        "-o",
        path_str(&page),
        "--svg",
        path_str(&svgs),
    ]);
    ok(&o, "report --svg on the lab's bench file");
    let html = std::fs::read_to_string(&page).unwrap();
    let names = entries(&svgs);
    // The workload's own figures (lazyfree/elapsed_s, ...) are there, with
    // the `/` made safe.
    assert!(
        names.contains(&"dist-lazyfree_elapsed_s.svg".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"run2-latency-madvise_dontneed.svg".to_string()),
        "{names:?}"
    );
    let plots: usize = html
        .split("data-plots=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(names.len(), plots, "one SVG per plot: {names:?}");
    for n in &names {
        let id = n.strip_suffix(".svg").unwrap_or_else(|| panic!("{n}"));
        assert!(
            !id.starts_with('.')
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
            "unsafe name {n}"
        );
        // The page's anchor is the file's name.
        assert!(html.contains(&format!("id=\"{id}\"")), "no anchor for {id}");
        let svg = std::fs::read_to_string(svgs.join(n)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{n}"
        );
    }
    // Nothing else was left beside the page.
    assert_eq!(entries(dir.path()), ["dontneed.html", "svgs"]);
}

#[test]
fn a_report_that_fails_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let svgs = dir.path().join("svgs");
    std::fs::create_dir(&svgs).unwrap();
    // A directory where one of the plots goes, with a file in it.
    let blocker = svgs.join("dist-lazyfree_elapsed_s.svg");
    std::fs::create_dir(&blocker).unwrap();
    std::fs::write(blocker.join("keep"), "x").unwrap();
    let page = dir.path().join("page.html");
    let bench = fixture("dontneed.json");
    for extra in [&[][..], &["--png", path_str(&svgs)]] {
        let mut args = vec![
            "report",
            path_str(&bench),
            "-o",
            path_str(&page),
            "--svg",
            path_str(&svgs),
        ];
        args.extend_from_slice(extra);
        let o = vmscope(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        if extra.is_empty() {
            assert!(
                err.contains("dist-lazyfree_elapsed_s.svg") && err.contains("nothing was written"),
                "{err}"
            );
        }
        assert_eq!(entries(dir.path()), ["svgs"], "{err}");
        assert_eq!(entries(&svgs), ["dist-lazyfree_elapsed_s.svg"], "{err}");
        assert_eq!(entries(&blocker), ["keep"]);
    }
}

#[test]
fn a_report_that_runs_out_of_space_midway_leaves_nothing_behind() {
    if !root_or_skip("a_report_that_runs_out_of_space_midway_leaves_nothing_behind") {
        return;
    }
    // A file system too small for all the plots: writing fails after the
    // first few, and none of them, nor the page (elsewhere), may remain.
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs", path_str(&small)])
        .status()
        .unwrap();
    assert!(st.success(), "mounting a small tmpfs");
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&small);
    let page = dir.path().join("page.html");
    // An old page stays as it was.
    std::fs::write(&page, "old").unwrap();
    let o = vmscope(&[
        "report",
        path_str(&fixture("dontneed.json")),
        "-o",
        path_str(&page),
        "--svg",
        path_str(&small),
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("No space left"), "{err}");
    assert!(
        entries(&small).is_empty(),
        "left in the svg dir: {:?}",
        entries(&small)
    );
    assert_eq!(entries(dir.path()), ["page.html", "small"]);
    assert_eq!(std::fs::read_to_string(&page).unwrap(), "old");
}

/// The lab's bench file with every run's workload figure `elapsed_s` and
/// the summary's values set to `v`, and every histogram bucket to `count`.
fn doctored(v: f64, count: u64) -> Value {
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("dontneed.json")).unwrap()).unwrap();
    let tail =
        format!("{{\"workload\":\"lazyfree\",\"records_per_sec\":{v:e},\"elapsed_s\":{v:e}}}\n");
    for run in doc["runs"].as_array_mut().unwrap() {
        run["child"]["output"]["tail"] = Value::String(tail.clone());
        for h in run["totals"]["histograms"]
            .as_object_mut()
            .unwrap()
            .values_mut()
        {
            h["count"] = count.into();
            for b in h["buckets"].as_array_mut().unwrap() {
                b["count"] = count.into();
            }
        }
    }
    for m in doc["metrics"].as_object_mut().unwrap().values_mut() {
        for k in ["trimmed_mean", "median", "min", "max", "stddev"] {
            m[k] = v.into();
        }
        for x in m["values"].as_array_mut().unwrap() {
            *x = v.into();
        }
    }
    doc
}

#[test]
fn huge_values_and_counts_never_hang_report_or_compare() {
    let dir = tempfile::tempdir().unwrap();
    let base = fixture("dontneed.json");
    for (name, v, count) in [
        ("near-max", 1.7e308, 3),
        ("negative", -1.7e308, 3),
        ("counts", 1.0, u64::MAX),
        ("both", f64::MAX, u64::MAX / 2),
    ] {
        let bench = dir.path().join(format!("{name}.json"));
        std::fs::write(&bench, doctored(v, count).to_string()).unwrap();
        let page = dir.path().join(format!("{name}.html"));
        let svgs = dir.path().join(format!("{name}-svgs"));
        std::fs::create_dir(&svgs).unwrap();
        // The bench page draws the file's own numbers: out-of-range ones
        // are left out and the plot says so.
        let o = vmscope(&[
            "report",
            path_str(&bench),
            "-o",
            path_str(&page),
            "--svg",
            path_str(&svgs),
        ]);
        finished_cleanly(&o, &format!("report {name}"));
        if v.abs() > 1e100 {
            ok(&o, &format!("report {name}"));
            let html = std::fs::read_to_string(&page).unwrap();
            assert!(html.contains("out of range, not drawn"), "{name}");
        }
        // compare and report BASE NEW: refused with one line when a run's
        // figure cannot be compared, or compared; in time either way.
        for args in [
            vec!["compare", path_str(&base), path_str(&bench)],
            vec![
                "compare",
                path_str(&bench),
                path_str(&bench),
                "--format",
                "json",
            ],
            vec![
                "report",
                path_str(&base),
                path_str(&bench),
                "-o",
                path_str(&dir.path().join(format!("{name}-vs.html"))),
            ],
        ] {
            let o = vmscope(&args);
            finished_cleanly(&o, &args.join(" "));
            if v.abs() > 1e100 {
                let err = text(&o.stderr);
                assert_eq!(o.status.code(), Some(2), "{err}");
                assert!(
                    err.contains("lazyfree/") && err.contains("damaged"),
                    "{err}"
                );
            } else {
                ok(&o, &args.join(" "));
            }
        }
    }
    // A recording (one run) with the same numbers, and compare's JSON with
    // means, intervals and bars near the limit of f64.
    let rec = dir.path().join("rec.json");
    std::fs::write(&rec, doctored(1.7e308, u64::MAX)["runs"][0].to_string()).unwrap();
    finished_cleanly(
        &vmscope(&[
            "report",
            path_str(&rec),
            "-o",
            path_str(&dir.path().join("rec.html")),
        ]),
        "report of a recording",
    );
    let mut cmp: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("compare.json")).unwrap()).unwrap();
    for r in cmp["rows"].as_array_mut().unwrap() {
        for side in ["base", "new"] {
            r[side]["mean"] = 1.7e308.into();
            r[side]["stddev"] = 1.7e308.into();
            for x in r[side]["values"].as_array_mut().unwrap() {
                *x = (-1.7e308).into();
            }
        }
    }
    for h in cmp["histograms"].as_object_mut().unwrap().values_mut() {
        for side in ["base", "new"] {
            for b in h[side]["buckets"].as_array_mut().unwrap() {
                b["count"] = u64::MAX.into();
            }
        }
    }
    let cmp_path = dir.path().join("compare.json");
    std::fs::write(&cmp_path, cmp.to_string()).unwrap();
    let o = vmscope(&[
        "report",
        path_str(&cmp_path),
        "-o",
        path_str(&dir.path().join("compare.html")),
    ]);
    ok(&o, "report of a doctored compare output");
    // A confidence level that is no probability is refused, not asserted on.
    cmp["confidence"] = 5.0.into();
    std::fs::write(&cmp_path, cmp.to_string()).unwrap();
    let o = vmscope(&["report", path_str(&cmp_path)]);
    finished_cleanly(&o, "confidence 5");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

#[test]
fn overflowing_workload_sizes_exit_2_with_one_line() {
    for (args, names) in [
        (
            &[
                "workload",
                "lazyfree",
                "--chunk-size",
                "4096",
                "--chunks",
                "4503599627370497",
            ][..],
            &[
                "--chunks 4503599627370497",
                "--chunk-size 4096",
                "overflows",
            ][..],
        ),
        (
            &[
                "workload",
                "lazyfree",
                "--chunk-size",
                "1G",
                "--chunks",
                "100000000",
            ],
            &["--chunks 100000000", "more than this machine's"],
        ),
        (
            &[
                "workload",
                "lazyfree",
                "--threads",
                "2",
                "--records",
                "18446744073709551615",
            ],
            &["--records", "overflows"],
        ),
        (
            &["workload", "rmap", "--size", "8E"],
            &["--size 9223372036854775808", "more than this machine's"],
        ),
        (
            &["workload", "rmap", "--sharers", "18446744073709551615"],
            &["--sharers 18446744073709551615"],
        ),
        (
            &["workload", "lat", "--file-size", "18446744073709551615"],
            &["--file-size", "more than this machine's"],
        ),
        (
            &["workload", "lat", "--iterations", "18446744073709551615"],
            &["--iterations", "overflows"],
        ),
        (
            &[
                "lab",
                "lazyfree",
                "--chunk-size",
                "4096",
                "--chunks",
                "4503599627370497",
            ],
            &["--chunks 4503599627370497", "overflows"],
        ),
    ] {
        let o = vmscope(args);
        let err = text(&o.stderr);
        let what = args.join(" ");
        if args[0] == "lab" && o.status.code() == Some(77) {
            // Not root: the lab asks for privilege before it looks further.
            continue;
        }
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{what}: not one line: {err}");
        for n in names {
            assert!(err.contains(n), "{what}: {n:?} not in {err}");
        }
        assert!(o.stdout.is_empty(), "{what}");
    }
}

/// The zram devices in /sys/block with their disk sizes.
fn zram_devices() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir("/sys/block")
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("zram"))
        .map(|n| {
            let size = std::fs::read_to_string(format!("/sys/block/{n}/disksize"))
                .unwrap_or_default()
                .trim()
                .to_owned();
            (n, size)
        })
        .collect();
    v.sort();
    v
}

/// The `workload rmap` cgroups at the root of the memory hierarchy.
fn rmap_cgroups() -> Vec<String> {
    let (root, _) = vmscope::experiments::pressure::memory_controller().unwrap();
    std::fs::read_dir(&root)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("vmscope-rmap"))
        .collect()
}

/// Starts `lab rmap --setup-zram` with small settings, waits until a run's
/// workload holds its cgroup (the zram device on), sends `sig` (to the lab,
/// or to its whole process group as a terminal's Ctrl-C does), and checks
/// that it exits 128+N leaving no swap device, zram disk or cgroup.
fn stop_lab_rmap(sig: libc::c_int, group: bool) {
    use std::os::unix::process::CommandExt as _;
    let _x = pressure::exclusive();
    let swaps = pressure::active_swaps();
    let zram = zram_devices();
    assert!(
        rmap_cgroups().is_empty(),
        "cgroups left before: {:?}",
        rmap_cgroups()
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lab");
    let mut c = Command::new(vmscope_bin());
    c.args([
        "lab",
        "rmap",
        "-r",
        "5",
        "--sharers",
        "16",
        "--size",
        "16M",
        "--setup-zram",
        "64M",
        "-o",
    ])
    .arg(&out)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .process_group(0);
    let mut child = c.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    // A workload's cgroup exists only while it measures: catch one.
    let t = std::time::Instant::now();
    let mut seen = false;
    while t.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none() {
        if !rmap_cgroups().is_empty() {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(seen, "no run of the lab was caught with its cgroup");
    assert_ne!(
        pressure::active_swaps(),
        swaps,
        "the lab's zram swap is not on"
    );
    // SAFETY: signals our own child (or its process group).
    unsafe { libc::kill(if group { -pid } else { pid }, sig) };
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the lab did not stop within 60 s of signal {sig}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(128 + sig), "{status:?}: {err}");
    assert!(err.contains("lab stopped by SIG"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(pressure::active_swaps(), swaps, "swap left on: {err}");
    assert_eq!(zram_devices(), zram, "zram devices changed: {err}");
    assert!(
        rmap_cgroups().is_empty(),
        "cgroups left: {:?}: {err}",
        rmap_cgroups()
    );
    // Nothing was written, and the directory it made is gone again.
    assert!(!out.exists(), "{} left: {err}", out.display());
}

#[test]
fn lab_rmap_stopped_by_sigterm_removes_its_zram_and_cgroups() {
    if !root_or_skip("lab_rmap_stopped_by_sigterm_removes_its_zram_and_cgroups") {
        return;
    }
    stop_lab_rmap(libc::SIGTERM, false);
}

#[test]
fn lab_rmap_stopped_by_sighup_removes_its_zram_and_cgroups() {
    if !root_or_skip("lab_rmap_stopped_by_sighup_removes_its_zram_and_cgroups") {
        return;
    }
    stop_lab_rmap(libc::SIGHUP, false);
}

#[test]
fn lab_rmap_stopped_by_ctrl_c_removes_its_zram_and_cgroups() {
    if !root_or_skip("lab_rmap_stopped_by_ctrl_c_removes_its_zram_and_cgroups") {
        return;
    }
    // The terminal sends SIGINT to every process of the foreground group:
    // the lab, its record and the workload at once.
    stop_lab_rmap(libc::SIGINT, true);
}

#[test]
fn a_page_on_a_closed_pipe_is_no_panic() {
    // `report FILE -o - | head -c 10`: the reader goes away early.
    let mut child = Command::new(vmscope_bin())
        .args(["report", path_str(&fixture("dontneed.json")), "-o", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
}

/// `mkfifo PATH`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path_str(path)).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// A FIFO that no process reads at `record -o`, JSON and jsonl: refused
/// at once in a line that says so, never waited on (the writer blocked
/// forever in open(2)). (`report -o` stages its files and renames them
/// over the path, so it replaces a FIFO and never waits.)
#[test]
fn a_fifo_nobody_reads_at_an_output_path_is_refused_not_waited_on() {
    if !root_or_skip("a_fifo_nobody_reads_at_an_output_path_is_refused_not_waited_on") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out");
    mkfifo(&fifo);
    let runs: [Vec<&str>; 2] = [
        vec!["record", "-d", "1", "-i", "200ms", "-o", path_str(&fifo)],
        vec![
            "record",
            "-d",
            "1",
            "-i",
            "200ms",
            "--format",
            "jsonl",
            "-o",
            path_str(&fifo),
        ],
    ];
    for args in runs {
        let started = std::time::Instant::now();
        let o = vmscope(&args);
        let err = text(&o.stderr);
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{args:?}: took {:?} (timed out: {:?}): {err}",
            started.elapsed(),
            o.status
        );
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "refusing to write {}: it is a FIFO that no process is reading",
                fifo.display()
            )),
            "{args:?}: {err}"
        );
    }
    assert!(
        std::os::unix::fs::FileTypeExt::is_fifo(
            &std::fs::symlink_metadata(&fifo).unwrap().file_type()
        ),
        "the FIFO is left as it was"
    );
}
