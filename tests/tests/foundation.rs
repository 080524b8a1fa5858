//! The foundation, end to end: doctor, the page-fault probe checked against
//! the kernel's own rusage books, the process-tree filter, exit codes, and
//! privilege errors.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{os::unix::process::CommandExt as _, process::Command, time::Duration};

use vmscope_tests::*;

const PAGES: u64 = 20_000;

fn record_child(
    dir: &std::path::Path,
    name: &str,
    extra_env: &[(&str, &str)],
    child: &[&str],
) -> (std::process::Output, serde_json::Value, serde_json::Value) {
    let out = dir.join(format!("{name}.json"));
    let rep = dir.join(format!("{name}.rusage.json"));
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "200ms", "-o"]).arg(&out).arg("--");
    c.arg(testchild()).arg("--report").arg(&rep).args(child);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let o = run_with_timeout(c, Duration::from_secs(120));
    assert!(
        o.status.success(),
        "vmscope record failed: {:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    (o, read_json(&out), read_json(&rep))
}

#[test]
fn doctor_json_reports_attach_kinds_found_by_loading() {
    if !root_or_skip("doctor_json_reports_attach_kinds_found_by_loading") {
        return;
    }
    let o = vmscope(&["doctor", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("doctor --json parses");
    let kind = |k: &str| {
        v["attach_kinds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["kind"] == k)
            .unwrap_or_else(|| panic!("no {k} in {v:#}"))
            .clone()
    };
    assert_eq!(kind("tracepoint")["works"], true, "{v:#}");
    assert_eq!(kind("tp_btf")["works"], true, "{v:#}");
    assert_eq!(kind("perf_event")["works"], true, "{v:#}");
    // Whatever the verdict on fentry, it must be explained and drive the
    // choice of function-timing method.
    let fentry = kind("fentry");
    if fentry["works"] == false {
        assert!(
            fentry["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{fentry}"
        );
        assert!(v["function_timing"].as_str().unwrap().contains("sampling"));
    } else {
        assert_eq!(v["function_timing"], "fentry/fexit");
    }
    eprintln!("fentry on this kernel: {fentry}");
    assert_eq!(v["privileges"]["root"], true);
    let hooks = v["hooks"].as_array().unwrap();
    let pf = hooks
        .iter()
        .find(|h| h["hook"] == "exceptions:page_fault_user")
        .unwrap();
    let on_x86 = std::env::consts::ARCH == "x86_64";
    assert_eq!(pf["present"], on_x86, "{pf}");
    assert!(v["tracefs"]["path"].is_string(), "{v:#}");
}

#[test]
fn doctor_text_names_every_attach_kind() {
    if !root_or_skip("doctor_text_names_every_attach_kind") {
        return;
    }
    let o = vmscope(&["doctor"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for k in [
        "tracepoint",
        "tp_btf",
        "fentry",
        "fexit",
        "kprobe",
        "perf_event",
    ] {
        assert!(text.contains(k), "doctor text lacks {k}:\n{text}");
    }
}

#[test]
fn recorded_faults_match_the_childs_rusage() {
    if !root_or_skip("recorded_faults_match_the_childs_rusage") {
        return;
    }
    // Both ways of attaching: BTF-typed raw tracepoints where the kernel
    // allows them (the default), and classic tracepoints.
    for (env, method) in [(None, None), (Some("tp_btf"), Some("tracepoint"))] {
        let dir = tempfile::tempdir().unwrap();
        let extra: Vec<(&str, &str)> = env
            .map(|e| ("VMSCOPE_DISABLE_PROBES", e))
            .into_iter()
            .collect();
        let (_, rec, ru) =
            record_child(dir.path(), "touch", &extra, &["touch", &PAGES.to_string()]);
        check_faults(&rec, &ru, method);
    }
}

fn check_faults(rec: &serde_json::Value, ru: &serde_json::Value, method: Option<&str>) {
    assert_eq!(rec["schema_version"], 1);
    assert_eq!(rec["fault_source"], "tracepoint");
    let pf = rec["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == "exceptions:page_fault_user")
        .unwrap();
    assert_eq!(pf["attached"], true, "{pf}");
    if let Some(m) = method {
        assert_eq!(pf["method"], m, "{pf}");
    }
    let user = u64_at(rec, "/totals/scope_faults/user/total");
    let minflt = u64_at(ru, "/minflt");
    assert!(
        user >= PAGES,
        "recorded {user} user faults for {PAGES} touched pages ({pf})"
    );
    assert_within_pct("user faults vs child's own minflt", user, minflt, 2.0);
    // The kernel's wait4 books agree too.
    let waited = u64_at(rec, "/child/rusage/minflt");
    assert_within_pct("user faults vs wait4 minflt", user, waited, 2.0);
    // First touches of anonymous memory are write faults on absent pages.
    let wnp = u64_at(rec, "/totals/scope_faults/user/by_class/write_not_present");
    assert!(wnp >= PAGES, "write_not_present {wnp} < {PAGES}");
    // The child shows up by name in the process table.
    let procs = rec["processes"].as_array().unwrap();
    assert!(
        procs.iter().any(|p| p["comm"] == "vmscope-testchi"),
        "child missing from processes: {procs:#?}"
    );
}

#[test]
fn filter_counts_only_the_wrapped_tree() {
    if !root_or_skip("filter_counts_only_the_wrapped_tree") {
        return;
    }
    // A fault-heavy process outside the tree runs at the same time.
    let mut noise = Command::new(testchild())
        .args(["touch", "200000"])
        .spawn()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (_, rec, _) = record_child(dir.path(), "idle", &[], &["idle", "500"]);
    noise.wait().unwrap();
    let user = u64_at(&rec, "/totals/scope_faults/user/total");
    assert!(
        user * 100 <= PAGES,
        "an idle child recorded {user} faults: the filter let others in"
    );
    let system = u64_at(&rec, "/totals/system_faults/user/total");
    assert!(
        system > user,
        "system-wide {system} should include the noise"
    );
}

#[test]
fn children_of_the_wrapped_command_are_followed() {
    if !root_or_skip("children_of_the_wrapped_command_are_followed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree.json");
    let rep = dir.path().join("grandchild.json");
    let script = format!(
        "{} --report {} touch {PAGES}; exit 0",
        testchild().display(),
        rep.display()
    );
    let o = vmscope(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rec = read_json(&out);
    let gc_pid = u64_at(&read_json(&rep), "/pid");
    let procs = rec["processes"].as_array().unwrap();
    let gc = procs
        .iter()
        .find(|p| p["pid"].as_u64() == Some(gc_pid))
        .unwrap_or_else(|| panic!("grandchild {gc_pid} not followed: {procs:#?}"));
    assert!(u64_at(gc, "/faults/user/total") >= PAGES);
}

#[test]
fn perf_fallback_counts_faults_without_classes() {
    if !root_or_skip("perf_fallback_counts_faults_without_classes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, rec, ru) = record_child(
        dir.path(),
        "perf",
        &[("VMSCOPE_DISABLE_PROBES", "exceptions:page_fault_user")],
        &["touch", &PAGES.to_string()],
    );
    assert_eq!(rec["fault_source"], "perf_software", "{:#}", rec["probes"]);
    let scope = &rec["totals"]["scope_faults"];
    assert!(
        scope["user"].is_null(),
        "classes must be unavailable, not zero: {scope}"
    );
    assert!(scope["unavailable_reason"].is_string());
    let total = u64_at(scope, "/total");
    let books = u64_at(&ru, "/minflt") + u64_at(&ru, "/majflt");
    assert_within_pct("perf fallback faults vs rusage", total, books, 2.0);
    let pf = rec["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == "exceptions:page_fault_user")
        .unwrap();
    assert_eq!(pf["attached"], false);
}

#[test]
fn exit_code_of_the_command_passes_through_with_a_complete_document() {
    if !root_or_skip("exit_code_of_the_command_passes_through_with_a_complete_document") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (script, code, signal) in [("exit 3", 3, None), ("kill -9 $$", 137, Some(9))] {
        let out = dir.path().join(format!("exit{code}.json"));
        let o = vmscope(&[
            "record",
            "-o",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ]);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let rec = read_json(&out);
        assert_eq!(rec["child"]["exit_code"], code);
        assert_eq!(rec["child"]["signal"].as_i64(), signal);
        assert!(rec["end_time"].is_string() && rec["samples"].as_array().unwrap().len() >= 2);
    }
}

#[test]
fn sigint_mid_run_leaves_a_complete_document() {
    if !root_or_skip("sigint_mid_run_leaves_a_complete_document") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("int.json");
    let mut c = Command::new(vmscope_bin());
    c.args([
        "record",
        "-i",
        "100ms",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sleep",
        "30",
    ]);
    // SIGINT's default disposition for the command, whatever the suite
    // inherited (a background job of a shell ignores it: that case is in
    // documents.rs).
    with_sigint(&mut c, libc::SIG_DFL);
    let child = c.stderr(std::process::Stdio::piped()).spawn().unwrap();
    // Once the command runs (vmscope releases it after its first sample,
    // with its signal handlers in place), then long enough for 5 samples:
    // a fixed sleep was too short on a loaded machine.
    let sleeping = || {
        std::fs::read_dir(format!("/proc/{}/task", child.id()))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .any(|pids| {
                pids.split_whitespace().any(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.trim() == "sleep")
                })
            })
    };
    let t = std::time::Instant::now();
    while !sleeping() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the command never ran"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rec = read_json(&out);
    assert_valid(
        &schema("recording.schema.json"),
        &rec,
        "a recording cut short by SIGINT",
    );
    assert_eq!(rec["interrupted_by"], "SIGINT");
    assert_eq!(rec["child"]["signal"], 2);
    assert!(rec["samples"].as_array().unwrap().len() >= 5);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(
        leftovers.len(),
        1,
        "temporary files left behind: {leftovers:?}"
    );
}

#[test]
fn missing_command_exits_127_without_a_document() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nf.json");
    let o = vmscope(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--",
        "vmscope-no-such-cmd",
    ]);
    assert_eq!(o.status.code(), Some(127));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("vmscope-no-such-cmd"), "{err}");
    assert!(!out.exists());
}

#[test]
fn output_in_a_missing_directory_fails_before_running_anything() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = dir.path().join("no/such/dir/x.json");
    let o = vmscope(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("does not exist"), "{err}");
    assert!(!marker.exists(), "the command ran despite the bad -o");
}

#[test]
fn usage_errors_exit_2() {
    let o = vmscope(&["record", "--interval", "banana"]);
    assert_eq!(o.status.code(), Some(2));
    let o = vmscope(&["no-such-subcommand"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Durations too large for the clock, or outside an argument's range, are
/// one usage error naming the argument and the range (they were a panic,
/// exit 101, or accepted: `-i 1ns`).
#[test]
fn out_of_range_durations_are_usage_errors() {
    let cases: [(&[&str], &str, &str); 5] = [
        (&["record", "-d", "1e20"], "--duration", "0 to 365days"),
        (&["serve", "--history", "1e20"], "--history", "1s to 1h"),
        (&["top", "-i", "1e30"], "--interval", "10ms to 1h"),
        (&["record", "-i", "1ns"], "--interval", "10ms to 1h"),
        (&["serve", "-i", "9ms"], "--interval", "10ms to 1h"),
    ];
    for (args, arg, range) in cases {
        let o = vmscope(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(arg), "{args:?}: {err}");
        assert!(
            first.contains(&format!("allowed is {range}")),
            "{args:?}: {err}"
        );
    }
}

/// Runs vmscope as an unprivileged user (nobody) when we are root, or as
/// ourselves when we are not.
fn run_unprivileged(args: &[&str]) -> std::process::Output {
    // As root: a copy nobody can reach, wherever the build tree lives, in a
    // directory removed when this returns.
    let dir = is_root().then(|| {
        let dir = tempfile::Builder::new()
            .prefix("vmscope-unpriv")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::fs::copy(vmscope_bin(), dir.path().join("vmscope")).unwrap();
        dir
    });
    let mut c = Command::new(match &dir {
        Some(d) => d.path().join("vmscope"),
        None => vmscope_bin(),
    });
    c.args(args).current_dir("/tmp");
    if is_root() {
        c.uid(65534).gid(65534);
    }
    run_with_timeout(c, Duration::from_secs(30))
}

#[test]
fn unprivileged_doctor_and_record_exit_77_with_one_line() {
    for args in [
        &["doctor"][..],
        &["doctor", "--json"],
        &["record", "-o", "-", "--", "true"],
    ] {
        let o = run_unprivileged(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(77), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("CAP_BPF+CAP_PERFMON"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
