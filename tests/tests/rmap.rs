//! rmap CPU by stack sampling, against workloads whose rmap cost is known in
//! direction: anonymous memory shared by 64 processes, reclaimed under a
//! memcg limit with zram swap, costs far more rmap walking than the same
//! memory mapped once; a CPU loop costs none.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{process::Command, time::Duration};

use vmscope_tests::{pressure, *};

fn record(dir: &std::path::Path, name: &str, argv: &[String]) -> serde_json::Value {
    let out = dir.join(format!("{name}.json"));
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "500ms", "-o"])
        .arg(&out)
        .arg("--")
        .args(argv);
    let o = run_with_timeout(c, Duration::from_secs(600));
    assert!(
        o.status.success(),
        "vmscope record {argv:?}: {:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let rec = read_json(&out);
    assert_valid(&schema("recording.schema.json"), &rec, name);
    rec
}

fn child(args: &[&str]) -> Vec<String> {
    std::iter::once(testchild().display().to_string())
        .chain(args.iter().map(|s| s.to_string()))
        .collect()
}

fn f(v: &serde_json::Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("{pointer} missing in {v:#}"))
}

/// Records `sharers N` (256 MiB shared by N+1 processes, read 3 times
/// under a 128 MiB memcg limit) and returns (walk share, its error).
fn sharers(dir: &std::path::Path, n: usize) -> (f64, f64, serde_json::Value) {
    let cg = pressure::MemCgroup::new(128 << 20);
    let argv = child(&["sharers", &n.to_string(), &(65536).to_string()]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let before = pressure::vmstat();
    let rec = record(dir, &format!("sharers{n}"), &cg.in_cgroup_argv(&argv));
    let after = pressure::vmstat();
    assert!(
        after["pswpout"] - before["pswpout"] > 16384,
        "the limit did not force reclaim with swap-out"
    );
    let r = &rec["totals"]["rmap"];
    assert_eq!(r["method"], "stack_sampling", "{r:#}");
    eprintln!(
        "{n} sharers: rmap walk {:.4} ± {:.4} of {} samples ({:.3} CPU-s), maintenance {:.4}, lost {}",
        f(r, "/rmap_walk/share"),
        f(r, "/rmap_walk/share_stderr"),
        r["samples"],
        f(r, "/rmap_walk/cpu_seconds"),
        f(r, "/rmap_maintenance/share"),
        r["lost_samples"],
    );
    (
        f(r, "/rmap_walk/share"),
        f(r, "/rmap_walk/share_stderr"),
        rec,
    )
}

#[test]
fn sixty_four_sharers_cost_more_rmap_walking_than_one_beyond_the_error() {
    if !root_or_skip("sixty_four_sharers_cost_more_rmap_walking_than_one_beyond_the_error") {
        return;
    }
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let (one, one_err, _) = sharers(dir.path(), 1);
    let (many, many_err, rec) = sharers(dir.path(), 64);
    assert!(
        many > 5.0 * many_err && many > 0.0,
        "64 sharers: rmap walk share {many} is not clearly above 0 (error {many_err})"
    );
    let margin = 3.0 * (one_err.powi(2) + many_err.powi(2)).sqrt();
    assert!(
        many - one > margin,
        "64 sharers {many} vs 1 sharer {one}: difference within 3 standard errors ({margin})"
    );
    // The walks ran in the process's own memcg reclaim, not elsewhere.
    let by = &rec["totals"]["rmap"]["by_context"];
    let direct = by["direct_reclaim"]["rmap_walk"].as_u64().unwrap_or(0);
    let all = rec["totals"]["rmap"]["rmap_walk"]["samples"]
        .as_u64()
        .unwrap();
    assert!(direct * 2 > all, "rmap walks by context: {by:#}");
    // compare shows the rmap rows and says how they were measured.
    let o = vmscope(&[
        "compare",
        dir.path().join("sharers1.json").to_str().unwrap(),
        dir.path().join("sharers64.json").to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for row in [
        "rmap_walk_cpu",
        "rmap_maint_cpu",
        "rmap_walk_share",
        "rmap_samples",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(row)),
            "no {row} row:\n{text}"
        );
    }
    let at = format!(
        "[rmap: stack sampling at {} Hz]",
        vmscope::model::rmap::DEFAULT_HZ
    );
    assert!(text.contains(&at), "{text}");
    let probe = rec["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == "perf:cpu-clock")
        .unwrap();
    assert!(
        probe["reason"]
            .as_str()
            .unwrap()
            .contains("rmap method: stack sampling"),
        "{probe}"
    );
}

/// A CPU loop: its own samples match its CPU time, and none of them is an
/// rmap walk or rmap maintenance.
#[test]
fn a_cpu_loop_has_no_rmap_share_and_its_samples_match_its_cpu_time() {
    if !root_or_skip("a_cpu_loop_has_no_rmap_share_and_its_samples_match_its_cpu_time") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("spin-rusage.json");
    let rec = record(
        dir.path(),
        "spin",
        &child(&["--report", report.to_str().unwrap(), "spin", "3000"]),
    );
    let pid = u64_at(&read_json(&report), "/pid");
    let procs = rec["totals"]["rmap"]["processes"].as_array().unwrap();
    let row = procs
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not among {procs:#?}"));
    let samples = u64_at(row, "/samples");
    let cpu_s =
        (u64_at(&rec, "/child/rusage/user_ns") + u64_at(&rec, "/child/rusage/sys_ns")) as f64 / 1e9;
    let sampled_s = samples as f64 / f64::from(crate_hz(&rec));
    assert!(
        (sampled_s - cpu_s).abs() < 0.2 * cpu_s,
        "{samples} samples ({sampled_s:.2} s) vs {cpu_s:.2} s of CPU"
    );
    for what in ["rmap_walk", "rmap_maintenance"] {
        let share = f(row, &format!("/{what}/share"));
        let err = f(row, &format!("/{what}/share_stderr"));
        // Indistinguishable from 0: within 2 standard errors, and below
        // the rule-of-three bound when no sample was seen at all.
        assert!(
            share <= 2.0 * err && share < 3.0 / samples as f64 + 1e-12,
            "{what}: {share} ± {err} over {samples} samples"
        );
    }
}

fn crate_hz(rec: &serde_json::Value) -> u32 {
    u32::try_from(u64_at(rec, "/totals/rmap/rate_hz")).unwrap()
}

/// Without the sampler the rmap figures are unavailable with the reason,
/// never zero, and the bench rows are absent.
#[test]
fn rmap_figures_without_the_sampler_are_unavailable_not_zero() {
    if !root_or_skip("rmap_figures_without_the_sampler_are_unavailable_not_zero") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("off.json");
    let mut c = Command::new(vmscope_bin());
    c.env("VMSCOPE_DISABLE_PROBES", "perf:cpu-clock")
        .args(["record", "-i", "250ms", "-o"])
        .arg(&out)
        .arg("--")
        .args(child(&["spin", "300"]));
    let o = run_with_timeout(c, Duration::from_secs(120));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rec = read_json(&out);
    assert!(
        rec["totals"]["rmap"].is_null(),
        "{:#}",
        rec["totals"]["rmap"]
    );
    let why = rec["totals"]["unavailable"]["rmap"].as_str().unwrap();
    assert!(why.contains("disabled by VMSCOPE_DISABLE_PROBES"), "{why}");
    assert!(rec["samples"][0].get("rmap").is_none());
    // `--sample-hz 0` turns it off the same way, and bad input is one line.
    let o = vmscope(&["record", "--sample-hz", "20000", "-d", "1", "-o", "-"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--sample-hz"), "{err}");
}
