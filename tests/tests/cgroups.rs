//! Per-cgroup figures against the kernel's own books. Children in two
//! memory cgroups A and B fault known numbers of pages: each cgroup's count
//! is within 2% of its child's rusage and of the cgroup's own
//! `memory.stat` pgfault, and a third cgroup C, with an idle child, is
//! charged none of it. Hundreds of short-lived processes, populate (get_user_pages)
//! faults from a second thread and mlock are charged to their cgroup like
//! the kernel's books say. `record --cgroup` follows exactly the processes
//! in the cgroup, including one moved in after the start, and cgroups
//! created below it during the run, named though they live shorter than a
//! read. Under a memcg
//! limit with zram swap, the cgroup's swap-out is within 10% of pswpout
//! (it is the only one swapping). madvise calls are charged to their
//! cgroup by behaviour, exactly as many as the children made.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{path::Path, time::Duration};

use serde_json::Value;
use vmscope_tests::{pressure, *};

/// Large enough never to be reached: these cgroups only label.
const NO_LIMIT: u64 = 4 << 30;

fn record_ok(dir: &Path, name: &str, argv: &[String], env: &[(&str, &str)]) -> Value {
    let (o, rec) = record_to(dir, name, argv, env, Duration::from_secs(300));
    assert!(
        o.status.success(),
        "vmscope record {argv:?}: {:?} {}",
        o.status,
        text(&o.stderr)
    );
    rec
}

/// The cgroup's path as the recording names it: relative to the mount of
/// the hierarchy the recording keyed processes by.
fn rel(rec: &Value, cg: &pressure::MemCgroup) -> String {
    let mount = rec["cgroup_scheme"]["mount"]
        .as_str()
        .unwrap_or_else(|| panic!("no cgroup scheme: {:#}", rec["probes"]));
    let p = cg.path().strip_prefix(mount).unwrap_or_else(|_| {
        panic!("{} is not under {mount}", cg.path().display());
    });
    format!("/{}", p.display())
}

/// The recording's row for cgroup `path`, if any.
fn cgroup_row<'a>(rec: &'a Value, path: &str) -> Option<&'a Value> {
    rec["cgroups"]
        .as_array()
        .unwrap_or_else(|| panic!("no cgroups list: {rec:#}"))
        .iter()
        .find(|c| c["path"] == path)
}

fn faults_of(rec: &Value, path: &str) -> u64 {
    cgroup_row(rec, path).map_or(0, |c| u64_at(c, "/totals/faults/total"))
}

/// `minflt + majflt` from a testchild's `--report` file.
fn rusage_faults(report: &Path) -> u64 {
    let r = read_json(report);
    r["minflt"].as_u64().unwrap() + r["majflt"].as_u64().unwrap()
}

/// memory.stat's `pgfault` of `cg` now.
fn memcg_pgfault(cg: &pressure::MemCgroup) -> u64 {
    std::fs::read_to_string(cg.path().join("memory.stat"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("pgfault ")?.trim().parse().ok())
        .expect("memory.stat has pgfault")
}

/// A shell line that joins `cg` and runs the test child with `args`,
/// writing its rusage to `report`.
fn in_cg(cg: &pressure::MemCgroup, report: &Path, args: &str) -> String {
    format!(
        "sh -c 'echo $$ > {} && exec {} --report {} {args}'",
        cg.procs_file().display(),
        testchild().display(),
        report.display()
    )
}

/// Cgroups A, B and C, which only label (no limit is reached).
fn three_cgroups() -> (
    pressure::MemCgroup,
    pressure::MemCgroup,
    pressure::MemCgroup,
) {
    (
        pressure::MemCgroup::new(NO_LIMIT),
        pressure::MemCgroup::new(NO_LIMIT),
        pressure::MemCgroup::new(NO_LIMIT),
    )
}

#[test]
fn two_cgroups_are_charged_their_own_faults_and_a_third_none() {
    if !root_or_skip("two_cgroups_are_charged_their_own_faults_and_a_third_none") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = three_cgroups();
    let (ra, rb, rc) = (
        dir.path().join("a.ru"),
        dir.path().join("b.ru"),
        dir.path().join("c.ru"),
    );
    let (pa, pb) = (memcg_pgfault(&a), memcg_pgfault(&b));
    let script = format!(
        "{} & {} & {} & wait",
        in_cg(&a, &ra, "touch 30000"),
        in_cg(&b, &rb, "touch 10000"),
        in_cg(&c, &rc, "idle 300"),
    );
    let rec = record_ok(dir.path(), "ab", &["sh".into(), "-c".into(), script], &[]);
    let (na, nb, nc) = (rel(&rec, &a), rel(&rec, &b), rel(&rec, &c));
    let (fa, fb, fc) = (
        faults_of(&rec, &na),
        faults_of(&rec, &nb),
        faults_of(&rec, &nc),
    );
    eprintln!(
        "A {fa} (rusage {}, memory.stat {}), B {fb} (rusage {}, memory.stat {}), C {fc} (rusage {})",
        rusage_faults(&ra),
        memcg_pgfault(&a) - pa,
        rusage_faults(&rb),
        memcg_pgfault(&b) - pb,
        rusage_faults(&rc)
    );
    assert_within_pct(
        "cgroup A vs its child's rusage",
        fa,
        rusage_faults(&ra),
        2.0,
    );
    assert_within_pct(
        "cgroup B vs its child's rusage",
        fb,
        rusage_faults(&rb),
        2.0,
    );
    assert_within_pct(
        "cgroup A vs its memory.stat pgfault",
        fa,
        memcg_pgfault(&a) - pa,
        2.0,
    );
    assert_within_pct(
        "cgroup B vs its memory.stat pgfault",
        fb,
        memcg_pgfault(&b) - pb,
        2.0,
    );
    // C's idle child took its own few hundred start-up faults, and
    // nothing of A's or B's.
    assert!(
        fc <= rusage_faults(&rc) + 100 && fc < fb / 20,
        "C was charged {fc} faults; its child took {}",
        rusage_faults(&rc)
    );
    // Each cgroup's books came along: usage and limit, and its stat.
    let books = &cgroup_row(&rec, &na).unwrap()["books_last"];
    assert!(books["usage_bytes"].as_u64().is_some(), "{books}");
    assert_eq!(books["limit_bytes"].as_u64(), Some(NO_LIMIT), "{books}");
    assert!(books["stat"]["pgfault"].as_u64().unwrap() > 0, "{books}");
    // Each process names its cgroup by the id the cgroups list uses.
    let id_a = cgroup_row(&rec, &na).unwrap()["id"].clone();
    let child_a = read_json(&ra)["pid"].clone();
    let row = rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == child_a)
        .unwrap();
    assert_eq!(row["cgroup"], id_a, "{row}");
}

/// A process that moves itself from A to B while it faults from one CPU
/// (its books held in that CPU's fault cache, no syscall between that
/// would look them up): its faults are B's, as its key says at the read,
/// and A is charged none of them.
#[test]
fn a_process_moved_while_it_faults_is_charged_where_it_went() {
    if !root_or_skip("a_process_moved_while_it_faults_is_charged_where_it_went") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b, _c) = three_cgroups();
    let ru = dir.path().join("m.ru");
    let script = format!(
        "echo $$ > {} && exec {} --report {} moveto 20000 {}",
        a.procs_file().display(),
        testchild().display(),
        ru.display(),
        b.procs_file().display()
    );
    let rec = record_ok(dir.path(), "move", &["sh".into(), "-c".into(), script], &[]);
    let (na, nb) = (rel(&rec, &a), rel(&rec, &b));
    let (fa, fb) = (faults_of(&rec, &na), faults_of(&rec, &nb));
    let kernel = rusage_faults(&ru);
    eprintln!("moved: A {fa}, B {fb}, rusage {kernel}");
    assert_within_pct("B (moved into) vs the process's rusage", fb, kernel, 2.0);
    assert!(fa < kernel / 50, "A was charged {fa} of {kernel} faults");
    let pid = read_json(&ru)["pid"].clone();
    let row = rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap();
    assert_eq!(row["cgroup"], cgroup_row(&rec, &nb).unwrap()["id"], "{row}");
}

/// Children in A and B make exactly N calls each of MADV_FREE,
/// MADV_DONTNEED and MADV_COLD (700 in A, 300 in B): each cgroup's calls
/// by behaviour are exactly those, and C's idle child made none.
#[test]
fn madvise_calls_are_charged_to_their_cgroup_by_behaviour() {
    if !root_or_skip("madvise_calls_are_charged_to_their_cgroup_by_behaviour") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = three_cgroups();
    let ru = |n: &str| dir.path().join(n);
    let script = format!(
        "{} & {} & {} & wait",
        in_cg(&a, &ru("a.ru"), "madvise 700"),
        in_cg(&b, &ru("b.ru"), "madvise 300"),
        in_cg(&c, &ru("c.ru"), "idle 300"),
    );
    let rec = record_ok(dir.path(), "madv", &["sh".into(), "-c".into(), script], &[]);
    let by_behaviour = |cg: &pressure::MemCgroup| {
        cgroup_row(&rec, &rel(&rec, cg)).map_or(Value::Null, |r| r["totals"]["madvise"].clone())
    };
    let (ma, mb, mc) = (by_behaviour(&a), by_behaviour(&b), by_behaviour(&c));
    eprintln!("madvise by behaviour: A {ma}, B {mb}, C {mc}");
    for (m, n) in [(&ma, 700), (&mb, 300)] {
        assert_eq!(
            *m,
            serde_json::json!({"free": n, "dontneed": n, "cold": n}),
            "each behaviour exactly {n} times"
        );
    }
    assert!(
        mc.is_null() || mc == serde_json::json!({}),
        "C's idle child made no madvise call: {mc}"
    );
}

/// 300 short-lived processes, each populating memory through
/// get_user_pages (a second thread's MAP_POPULATE, MADV_POPULATE_WRITE,
/// mlock) and touching it, all in one cgroup: the cgroup's count against
/// the wrapped shell's rusage, which includes every child it waited for.
#[test]
fn short_lived_processes_threads_and_populate_are_charged_to_their_cgroup() {
    if !root_or_skip("short_lived_processes_threads_and_populate_are_charged_to_their_cgroup") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a = pressure::MemCgroup::new(NO_LIMIT);
    let script = format!(
        "echo $$ > {} && i=0; while [ $i -lt 300 ]; do {} populate 64 || exit 1; i=$((i+1)); done",
        a.procs_file().display(),
        testchild().display()
    );
    let rec = record_ok(
        dir.path(),
        "churn",
        &["sh".into(), "-c".into(), script],
        &[],
    );
    let ru = &rec["child"]["rusage"];
    let kernel = u64_at(ru, "/minflt") + u64_at(ru, "/majflt");
    let got = faults_of(&rec, &rel(&rec, &a));
    eprintln!("cgroup {got}, rusage of the tree {kernel}");
    assert_within_pct("short-lived processes' cgroup vs rusage", got, kernel, 2.0);
}

/// `record --cgroup A`: only A's processes, one of them moved into A after
/// the recording started; B's child, running meanwhile, is left out.
#[test]
fn record_cgroup_follows_exactly_the_cgroups_processes() {
    if !root_or_skip("record_cgroup_follows_exactly_the_cgroups_processes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        pressure::MemCgroup::new(NO_LIMIT),
        pressure::MemCgroup::new(NO_LIMIT),
    );
    let (ra, rb) = (dir.path().join("a.ru"), dir.path().join("b.ru"));
    let mount = vmscope::experiments::pressure::memory_controller()
        .unwrap()
        .0;
    let path = format!("/{}", a.path().strip_prefix(&mount).unwrap().display());
    // The command only sets the length: it runs outside A, and starts A's
    // child (which moves itself in) and B's after the first sample.
    let script = format!(
        "sleep 0.5; {} & {} & wait",
        in_cg(&a, &ra, "touch 20000"),
        in_cg(&b, &rb, "touch 20000"),
    );
    let out = dir.path().join("scoped.json");
    let mut cmd = std::process::Command::new(vmscope_bin());
    cmd.args(["record", "-i", "250ms", "--cgroup", &path, "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script]);
    let o = run_with_timeout(cmd, Duration::from_secs(120));
    assert!(o.status.success(), "{:?}: {}", o.status, text(&o.stderr));
    let rec = read_json(&out);
    assert_eq!(rec["scope"]["kind"], "cgroup", "{:#}", rec["scope"]);
    assert_eq!(rec["scope"]["cgroup"], path.as_str());
    let pids: Vec<u64> = rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    let (child_a, child_b) = (
        read_json(&ra)["pid"].as_u64().unwrap(),
        read_json(&rb)["pid"].as_u64().unwrap(),
    );
    assert_eq!(pids, vec![child_a], "only A's child: {pids:?}");
    assert!(!pids.contains(&child_b));
    let scope = u64_at(&rec["totals"]["scope_faults"], "/total");
    assert_within_pct(
        "the scope's faults vs A's child",
        scope,
        rusage_faults(&ra),
        2.0,
    );
    // A bad path is a usage error that names it.
    let o = vmscope(&["record", "--cgroup", "/no/such/cgroup", "-d", "1s"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("/no/such/cgroup") && err.lines().count() == 1,
        "{err}"
    );
}

/// `record --cgroup` on a parent while 40 cgroups are created below it,
/// each given one short-lived process (which moves itself in) and removed
/// within a sampling interval: each one is followed from its first fault,
/// named by its path though it lived shorter than a read, charged what
/// its process's rusage says, and reported gone.
#[test]
fn record_cgroup_follows_and_names_cgroups_created_below_it_during_the_run() {
    const TEST: &str = "record_cgroup_follows_and_names_cgroups_created_below_it_during_the_run";
    if !root_or_skip(TEST) {
        return;
    }
    const SUBS: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let parent = pressure::MemCgroup::new(NO_LIMIT);
    let mount = vmscope::experiments::pressure::memory_controller()
        .unwrap()
        .0;
    let path = format!("/{}", parent.path().strip_prefix(&mount).unwrap().display());
    let mut script = String::from("sleep 0.5");
    for i in 0..SUBS {
        let sub = parent.path().join(format!("sub{i}"));
        script.push_str(&format!(
            "; mkdir {sub} && sh -c 'echo $$ > {sub}/cgroup.procs && exec {child} --report {report} touch 20000'; rmdir {sub}",
            sub = sub.display(),
            child = testchild().display(),
            report = dir.path().join(format!("{i}.ru")).display(),
        ));
    }
    let out = dir.path().join("subs.json");
    let mut cmd = std::process::Command::new(vmscope_bin());
    cmd.args(["record", "-i", "1s", "--cgroup", &path, "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script]);
    let o = run_with_timeout(cmd, Duration::from_secs(120));
    // (The shell's faults before it moves itself in are its rusage's, not
    // the cgroup's: about 70, well within 2% of 20,000.)
    // Whatever happened, no cgroup is left below the parent (which goes
    // when dropped).
    for i in 0..SUBS {
        let _ = std::fs::remove_dir(parent.path().join(format!("sub{i}")));
    }
    assert!(o.status.success(), "{:?}: {}", o.status, text(&o.stderr));
    let rec = read_json(&out);
    let gone: Vec<u64> = rec["samples"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["cgroups_gone"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_u64())
        .collect();
    for i in 0..SUBS {
        let name = format!("{path}/sub{i}");
        let row = cgroup_row(&rec, &name).unwrap_or_else(|| {
            let named: Vec<&Value> = rec["cgroups"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| &c["path"])
                .collect();
            panic!("{name} is not in the recording, which names {named:?}")
        });
        assert_within_pct(
            &format!("{name}'s faults vs its process's rusage"),
            u64_at(row, "/totals/faults/total"),
            rusage_faults(&dir.path().join(format!("{i}.ru"))),
            2.0,
        );
        let id = row["id"].as_u64().unwrap();
        assert!(
            gone.contains(&id),
            "{name} ({id}) not reported gone: {gone:?}"
        );
    }
}

/// Under a 64 MiB memcg limit with zram swap active, a child writes 156 MiB
/// twice: its cgroup's swap-out and swap-in against pswpout and pswpin
/// (nothing else swaps on this machine).
#[test]
fn a_swapping_cgroups_swap_matches_the_kernels_books() {
    if !root_or_skip("a_swapping_cgroups_swap_matches_the_kernels_books") {
        return;
    }
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let cg = pressure::MemCgroup::new(64 << 20);
    let argv = cg.in_cgroup_argv(&[path_str(&testchild()), "rewrite", "40000"]);
    let before = pressure::vmstat();
    let rec = record_ok(dir.path(), "swap", &argv, &[]);
    let after = pressure::vmstat();
    let books = |k: &str| after[k] - before[k];
    let row = cgroup_row(&rec, &rel(&rec, &cg))
        .unwrap_or_else(|| panic!("no row for the cgroup: {:#}", rec["cgroups"]));
    let (out, inn) = (
        u64_at(row, "/totals/swap_out_pages"),
        u64_at(row, "/totals/swap_in_pages"),
    );
    eprintln!(
        "cgroup swap-out {out} (pswpout {}), swap-in {inn} (pswpin {})",
        books("pswpout"),
        books("pswpin")
    );
    assert!(books("pswpout") > 20_000, "too little swapped out");
    assert_within_pct("cgroup swap-out vs pswpout", out, books("pswpout"), 10.0);
    assert_within_pct("cgroup swap-in vs pswpin", inn, books("pswpin"), 10.0);
    let reclaim = u64_at(row, "/totals/memcg_reclaims");
    assert!(reclaim > 0, "no memcg reclaim charged to the cgroup: {row}");
}

/// Cgroups laid out as a container runtime, the kubelet and systemd lay
/// them out: each row of the recording names its workload from its path,
/// and the container's faults are its process's own (within 2% of its
/// rusage).
#[test]
fn containers_pods_and_units_are_named_from_their_cgroup_paths() {
    if !root_or_skip("containers_pods_and_units_are_named_from_their_cgroup_paths") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let id = "4c2e".repeat(16);
    let uid = "1f0e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    let top = pressure::MemCgroup::new(NO_LIMIT);
    let docker = top.nested(&format!("docker-{id}.scope"));
    let kubepods = top.nested("kubepods.slice");
    let qos = kubepods.nested("kubepods-burstable.slice");
    let pod = qos.nested(&format!(
        "kubepods-burstable-pod{}.slice",
        uid.replace('-', "_")
    ));
    let pod_container = pod.nested(&format!("cri-containerd-{id}.scope"));
    let unit = top.nested("vmscope-identity.service");
    let (rd, rk, ru) = (
        dir.path().join("d.ru"),
        dir.path().join("k.ru"),
        dir.path().join("u.ru"),
    );
    let script = format!(
        "{} & {} & {} & wait",
        in_cg(&docker, &rd, "touch 20000"),
        in_cg(&pod_container, &rk, "touch 10000"),
        in_cg(&unit, &ru, "touch 5000"),
    );
    let rec = record_ok(dir.path(), "ids", &["sh".into(), "-c".into(), script], &[]);
    let row = |cg: &pressure::MemCgroup| {
        let path = rel(&rec, cg);
        cgroup_row(&rec, &path)
            .unwrap_or_else(|| panic!("no row for {path}: {:#}", rec["cgroups"]))
            .clone()
    };
    let d = row(&docker);
    assert_eq!(
        d["workload"],
        serde_json::json!({"runtime": "docker", "container": id}),
        "{d}"
    );
    assert_within_pct(
        "the container's faults vs its process's rusage",
        u64_at(&d, "/totals/faults/total"),
        rusage_faults(&rd),
        2.0,
    );
    let k = row(&pod_container);
    assert_eq!(
        k["workload"],
        serde_json::json!({
            "runtime": "containerd",
            "container": id,
            "pod_uid": uid,
            "qos": "burstable",
        }),
        "{k}"
    );
    let u = row(&unit);
    assert_eq!(
        u["workload"],
        serde_json::json!({"unit": "vmscope-identity.service"}),
        "{u}"
    );
    // The cgroup above them all follows no layout: it has no workload.
    if let Some(t) = cgroup_row(&rec, &rel(&rec, &top)) {
        assert!(t.get("workload").is_none(), "{t}");
    }
    drop((docker, pod_container, unit));
    drop((pod, qos, kubepods));
}
