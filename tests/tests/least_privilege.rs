//! vmscope as an ordinary user with exactly CAP_BPF+CAP_PERFMON: a copy of
//! the release binary given them by setcap (or as ambient capabilities, as
//! a systemd unit gives them), run as uid 65534 with no groups. It attaches
//! what those capabilities allow (BTF tracepoints and perf events need no
//! tracefs; dirty throttling, whose hook has no BTF variant, is the one
//! figure that needs it), counts faults like the kernel's books, and names
//! the true reason for each figure it cannot have. Without them: exit 77.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{os::unix::fs::MetadataExt as _, process::Command, time::Duration};

use vmscope_tests::{privilege::*, *};

/// The tests here see tracefs's mode, which one of them changes: they run
/// one at a time.
static TRACEFS_MODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn ready(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    (root_or_skip(test) && tools_or_skip(test))
        .then(|| TRACEFS_MODE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The one hook with no BTF variant: without tracefs it is unavailable.
const DIRTY: &str = "writeback:balance_dirty_pages";
/// The hooks that are classic tracepoints by design (no BTF variant), so
/// the only ones missing without tracefs.
const CLASSIC_ONLY: &[&str] = &[
    DIRTY,
    "compaction:mm_compaction_",
    "migrate:mm_migrate_pages",
    "huge_memory:mm_",
    "filemap:mm_filemap_add_to_page_cache",
    "filemap:mm_filemap_get_pages",
];

fn run(c: Command) -> std::process::Output {
    run_with_timeout(c, Duration::from_secs(120))
}

/// Whether uid 65534 can read tracefs here (root-only by default).
fn tracefs_readable_by_others() -> bool {
    std::fs::metadata("/sys/kernel/tracing").is_ok_and(|m| m.mode() & 0o005 == 0o005)
}

#[test]
fn doctor_tells_the_truth_about_tracefs_and_lists_what_runs() {
    const TEST: &str = "doctor_tells_the_truth_about_tracefs_and_lists_what_runs";
    let Some(_serial) = ready(TEST) else {
        return;
    };
    let u = Unprivileged::new();
    let mut c = u.as_nobody(&u.capped);
    c.args(["doctor", "--json"]);
    let o = run(c);
    ok(&o, "doctor --json as uid 65534 with CAP_BPF+CAP_PERFMON");
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &d["privileges"];
    assert_eq!(p["euid"], NOBODY);
    assert_eq!(
        (&p["cap_bpf"], &p["cap_perfmon"]),
        (&true.into(), &true.into())
    );
    assert_eq!(p["cap_sys_admin"], false);
    let kind = |k: &str| {
        d["attach_kinds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["kind"] == k)
            .unwrap_or_else(|| panic!("no attach kind {k}: {d:#}"))
            .clone()
    };
    assert_eq!(kind("tp_btf")["works"], true, "{:#}", kind("tp_btf"));
    assert_eq!(
        kind("perf_event")["works"],
        true,
        "{:#}",
        kind("perf_event")
    );
    let hook = |h: &str| {
        d["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["hook"] == h)
            .unwrap_or_else(|| panic!("no hook {h}"))
            .clone()
    };
    // Known from BTF whatever tracefs allows.
    for h in [
        "exceptions:page_fault_user",
        "sched:sched_switch",
        "tlb:tlb_flush",
    ] {
        assert_eq!(hook(h)["present"], true, "{h}: {:#}", hook(h));
    }
    if tracefs_readable_by_others() {
        eprintln!("{TEST}: tracefs is readable by all here; the unreadable case is not seen");
        return;
    }
    // The truth: mounted, but not readable by this user; not "not mounted".
    let why = d["tracefs"]["error"].as_str().unwrap();
    assert!(
        why.contains("is mounted at") && why.contains("uid 65534 cannot read it"),
        "{why}"
    );
    assert!(!why.contains("not mounted"), "{why}");
    let tp = kind("tracepoint");
    assert_eq!(tp["works"], false);
    assert!(
        tp["error"].as_str().unwrap().contains("cannot read"),
        "{tp:#}"
    );
    // The syscall events have no BTF type: unknown, not absent.
    let madvise = hook("syscalls:sys_enter_madvise");
    assert!(madvise["unknown"].as_str().is_some(), "{madvise:#}");
    // What more privilege would add, by name.
    let gaps = d["privilege_gaps"].as_array().unwrap();
    let tracefs_gap = gaps
        .iter()
        .find(|g| g["needs"].as_str().unwrap().contains("tracefs"))
        .unwrap_or_else(|| panic!("no tracefs gap in {gaps:#?}"));
    // Every hook but the syscall events has a BTF variant here; those are
    // followed through the raw syscall hooks instead.
    let adds = tracefs_gap["would_add"].as_str().unwrap();
    assert!(adds.contains("raw sys_enter/sys_exit"), "{adds}");
    assert!(!adds.contains("lru_shrink_inactive"), "{adds}");
    // The kernel log, which names each OOM kill's memcg, needs CAP_SYSLOG
    // while dmesg_restrict is 1.
    let restricted =
        std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict").is_ok_and(|v| v.trim() == "1");
    let log_gap = gaps
        .iter()
        .find(|g| g["would_add"].as_str().unwrap().contains("OOM summaries"));
    assert_eq!(log_gap.is_some(), restricted, "{gaps:#?}");
    if let Some(g) = log_gap {
        assert!(g["needs"].as_str().unwrap().contains("CAP_SYSLOG"), "{g}");
    }

    // The text report says the same in its privileges section.
    let mut c = u.as_nobody(&u.capped);
    c.arg("doctor");
    let o = run(c);
    ok(&o, "doctor as uid 65534");
    let s = text(&o.stdout);
    assert!(s.contains("privileges  uid=65534"), "{s}");
    assert!(s.contains("missing read access to tracefs"), "{s}");
    assert!(s.contains("tp_btf      works"), "{s}");
}

#[test]
fn record_as_nobody_counts_faults_like_rusage_and_names_what_is_missing() {
    const TEST: &str = "record_as_nobody_counts_faults_like_rusage_and_names_what_is_missing";
    let Some(_serial) = ready(TEST) else {
        return;
    };
    let u = Unprivileged::new();
    let out = u.out().join("rec.json");
    let ru = u.out().join("child.ru");
    let mut c = u.as_nobody(&u.capped);
    c.args(["record", "-i", "250ms", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&u.testchild)
        .arg("--report")
        .arg(&ru)
        .args(["touch", "20000"]);
    let o = run(c);
    ok(&o, "record as uid 65534 with CAP_BPF+CAP_PERFMON");
    // Written by, and owned by, the user it ran as.
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), NOBODY);
    assert_eq!(std::fs::metadata(&ru).unwrap().uid(), NOBODY);
    let rec = read_json(&out);
    let books = read_json(&ru);
    let kernel = books["minflt"].as_u64().unwrap() + books["majflt"].as_u64().unwrap();
    let pid = books["pid"].as_u64().unwrap();
    let row = rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("child {pid} not among {:#}", rec["processes"]));
    assert_within_pct(
        "child faults vs rusage",
        u64_at(&row["faults"], "/total"),
        kernel,
        2.0,
    );
    let unavailable = &rec["totals"]["unavailable"];
    // Nothing the capabilities allow is missing: the get_user_pages part
    // (a BTF tracepoint), major faults (a perf event), TLB flushes.
    for figure in ["gup_faults", "major_faults", "tlb_remote_shootdown"] {
        assert!(
            unavailable.get(figure).is_none(),
            "{figure}: {}",
            unavailable[figure]
        );
    }
    assert!(rec["totals"]["counters"]["tlb_remote_shootdown"].is_u64());
    // Nothing is missing for want of tracefs but the figures of hooks
    // without a BTF variant (dirty throttling: its BTF arguments give
    // jiffies; compaction, migration, collapses: rare events read by field
    // name; page-cache additions: the folio's order read by field name):
    // each says so.
    for (figure, why) in unavailable.as_object().unwrap() {
        let why = why.as_str().unwrap_or_default();
        if figure.contains("dirty_pause") {
            assert!(
                why.contains(DIRTY) && why.contains("tracefs"),
                "{figure}: {why}"
            );
            continue;
        }
        if why.contains("cannot read") {
            assert!(
                CLASSIC_ONLY.iter().any(|h| why.contains(h)) && why.contains("tracefs"),
                "{figure}: {why}"
            );
        }
    }
    // The rmap figures need CAP_SYSLOG unless kallsyms shows addresses to all.
    if let Some(why) = unavailable["rmap"].as_str()
        && why.contains("kallsyms")
    {
        assert!(why.contains("CAP_SYSLOG"), "rmap: {why}");
    }
    assert!(!text(&o.stderr).contains("tracefs is not mounted"));
}

#[test]
fn the_wrapped_command_gets_no_ambient_capabilities() {
    const TEST: &str = "the_wrapped_command_gets_no_ambient_capabilities";
    let Some(_serial) = ready(TEST) else {
        return;
    };
    let u = Unprivileged::new();
    let caps = u.out().join("caps");
    let mut c = u.with_ambient(&u.plain);
    c.args(["record", "-o"])
        .arg(u.out().join("rec.json"))
        .args(["--", "sh", "-c", "grep ^Cap /proc/self/status > \"$0\""])
        .arg(&caps);
    let o = run(c);
    ok(&o, "record with ambient CAP_BPF+CAP_PERFMON");
    let status = std::fs::read_to_string(&caps).unwrap();
    for field in ["CapEff", "CapPrm", "CapAmb"] {
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("{field} missing: {status}"));
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
}

#[test]
fn top_batch_runs_as_nobody() {
    const TEST: &str = "top_batch_runs_as_nobody";
    let Some(_serial) = ready(TEST) else {
        return;
    };
    let u = Unprivileged::new();
    let mut c = u.as_nobody(&u.capped);
    c.args(["top", "--batch", "-n", "2", "-i", "300ms"]);
    let o = run(c);
    ok(&o, "top --batch -n 2 as uid 65534");
    let s = text(&o.stdout);
    assert_eq!(s.matches("vmscope top").count(), 2, "{s}");
    let faults = s
        .lines()
        .find(|l| l.starts_with("faults user"))
        .unwrap_or_else(|| panic!("no faults row: {s}"));
    assert!(!faults.contains("n/a"), "{faults}");
    let madvise = s.lines().find(|l| l.starts_with("madvise")).unwrap();
    assert!(!madvise.contains("n/a"), "{madvise}");
    // One header line per reason, not one per refused hook; only the hooks
    // without a BTF variant miss tracefs.
    let header = s.lines().find(|l| l.starts_with("unavailable:")).unwrap();
    assert!(header.matches("cannot read").count() <= 1, "{header}");
    assert!(
        !header.contains("cannot read") || header.contains(DIRTY),
        "{header}"
    );
}

#[test]
fn without_capabilities_vmscope_exits_77_naming_them() {
    const TEST: &str = "without_capabilities_vmscope_exits_77_naming_them";
    let Some(_serial) = ready(TEST) else {
        return;
    };
    let u = Unprivileged::new();
    for args in [
        &["record", "-o", "x.json", "--", "true"][..],
        &["doctor"],
        &["top", "--batch", "-n", "1"],
        &["serve"],
    ] {
        let mut c = u.as_nobody(&u.plain);
        c.args(args);
        let o = run(c);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(77), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("CAP_BPF") && err.contains("CAP_PERFMON"),
            "{args:?}: {err}"
        );
        assert!(!u.out().join("x.json").exists());
    }
}

/// tracefs remounted with a group's gid and mode 0750 for the test's span;
/// the owner group and mode it had are put back when dropped.
struct TracefsGroup {
    gid: u32,
    mode: u32,
}

const TRACEFS: &str = "/sys/kernel/tracing";

impl TracefsGroup {
    fn grant(gid: u32) -> TracefsGroup {
        let m = std::fs::metadata(TRACEFS).unwrap();
        let old = TracefsGroup {
            gid: m.gid(),
            mode: m.mode() & 0o7777,
        };
        remount(gid, 0o750);
        old
    }
}

impl Drop for TracefsGroup {
    fn drop(&mut self) {
        remount(self.gid, self.mode);
    }
}

fn remount(gid: u32, mode: u32) {
    let o = Command::new("mount")
        .args(["-o", &format!("remount,gid={gid},mode={mode:04o}"), TRACEFS])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "remounting {TRACEFS} with gid={gid},mode={mode:04o}: {}",
        text(&o.stderr)
    );
}

#[test]
fn tracefs_group_access_adds_the_syscall_events() {
    const TEST: &str = "tracefs_group_access_adds_the_syscall_events";
    let Some(_serial) = ready(TEST) else {
        return;
    };
    if !std::path::Path::new(TRACEFS).join("events").is_dir() {
        eprintln!("{TEST}: tracefs is not mounted at {TRACEFS}; nothing to grant");
        return;
    }
    let u = Unprivileged::new();
    let out = u.out().join("rec.json");
    let before = std::fs::metadata(TRACEFS).unwrap().mode() & 0o7777;
    {
        let _granted = TracefsGroup::grant(NOBODY);
        let mut c = u.as_nobody(&u.capped);
        c.args(["record", "-o"])
            .arg(&out)
            .arg("--")
            .arg(&u.testchild)
            .args(["madvise", "500"]);
        let o = run(c);
        ok(&o, "record as uid 65534 in tracefs's group");
    }
    assert_eq!(
        std::fs::metadata(TRACEFS).unwrap().mode() & 0o7777,
        before,
        "tracefs mode restored"
    );
    let rec = read_json(&out);
    let probe = |name: &str| {
        rec["probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["probe"] == name)
            .unwrap_or_else(|| panic!("no probe {name}"))
            .clone()
    };
    // The syscall events in place of the raw hooks; the BTF ones stay BTF.
    for (name, method) in [
        ("syscalls:sys_exit_madvise", "tracepoint"),
        ("syscalls:sys_enter_process_madvise", "tracepoint"),
        ("vmscan:mm_vmscan_lru_shrink_inactive", "tp_btf"),
        ("tlb:tlb_flush", "tp_btf"),
    ] {
        let p = probe(name);
        assert_eq!(p["attached"], true, "{p:#}");
        assert_eq!(p["method"], method, "{p:#}");
    }
    // The child's 500 calls of each kind (the runtime makes none of
    // these: `vm_hooks` measures N against 0).
    for behavior in ["free", "dontneed", "cold"] {
        let calls = &rec["totals"]["madvise"][behavior]["calls"];
        assert_eq!(calls, 500, "{behavior}: {:#}", rec["totals"]["madvise"]);
    }
}

/// Without tracefs the syscall events cannot be attached; the raw
/// sys_enter/sys_exit BTF tracepoints stand in for them, and count the
/// child's madvise and munmap calls exactly, as the events do.
#[test]
fn raw_syscall_hooks_count_madvise_and_munmap_exactly_without_tracefs() {
    const TEST: &str = "raw_syscall_hooks_count_madvise_and_munmap_exactly_without_tracefs";
    let Some(_serial) = ready(TEST) else {
        return;
    };
    if tracefs_readable_by_others() {
        eprintln!("{TEST}: tracefs is readable by all here; the syscall events are used");
        return;
    }
    let u = Unprivileged::new();
    let rec_with = |name: &str, options: &[&str], args: &[&str]| {
        let out = u.out().join(format!("{name}.json"));
        let mut c = u.as_nobody(&u.capped);
        c.arg("record")
            .args(options)
            .arg("-o")
            .arg(&out)
            .arg("--")
            .arg(&u.testchild)
            .args(args);
        let o = run(c);
        ok(&o, &format!("record {args:?} as uid 65534"));
        read_json(&out)
    };
    let rec_of = |name: &str, args: &[&str]| rec_with(name, &["--syscall-latency"], args);
    // N against 0 cancels whatever the runtime does.
    let base = rec_of("m0", &["madvise", "0"]);
    let rec = rec_of("m300", &["madvise", "300"]);
    let p = probe(&rec, "syscalls:sys_exit_madvise");
    assert_eq!(p["attached"], true, "{p:#}");
    assert_eq!(p["method"], "tp_btf", "{p:#}");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("raw sys_enter/sys_exit"),
        "{p:#}"
    );
    let m = |r: &serde_json::Value, b: &str, f: &str| {
        r["totals"]["madvise"][b][f].as_u64().unwrap_or(0)
    };
    let page = 4096;
    for (behavior, pages) in [("free", 1), ("dontneed", 2), ("cold", 3)] {
        let calls = m(&rec, behavior, "calls") - m(&base, behavior, "calls");
        let bytes = m(&rec, behavior, "bytes") - m(&base, behavior, "bytes");
        assert_eq!(calls, 300, "{behavior}: {:#}", rec["totals"]["madvise"]);
        assert_eq!(bytes, 300 * pages * page, "{behavior} bytes");
    }
    let munmaps = |r: &serde_json::Value| {
        r["totals"]["histograms"]["munmap"]["count"]
            .as_u64()
            .unwrap_or(0)
    };
    let base = rec_of("u0", &["munmap", "0"]);
    let rec = rec_of("u200", &["munmap", "200"]);
    assert_eq!(
        munmaps(&rec) - munmaps(&base),
        200,
        "{:#}",
        rec["totals"]["histograms"]
    );
    // Without --syscall-latency munmap is not followed raw either: off,
    // with the reason, and no histogram.
    let untimed = rec_with("d200", &[], &["munmap", "200"]);
    let p = probe(&untimed, "syscalls:sys_exit_munmap");
    assert_eq!(p["attached"], false, "{p:#}");
    assert!(
        p["reason"].as_str().unwrap().contains("--syscall-latency"),
        "{p:#}"
    );
    assert!(untimed["totals"]["histograms"]["munmap"].is_null());
}
