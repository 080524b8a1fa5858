//! The flight recorder: `serve --history 30s --on-oom DIR` while a child
//! in a 64 MiB memory cgroup that may not swap touches 256 MiB and is
//! OOM-killed. Within 2 s of the kill (measured from the moment the test
//! reaps the child) `DIR/oom-TIME-PID.json` appears, whole; it validates
//! against the recording schema, lists the kill with the child's pid, name
//! and cgroup, and shows the memcg reclaim stall the child took before the
//! kill (the kernel's own `failcnt`/`memory.events` say the limit was hit).
//! `vmscope_cgroup_oom_kills_total{cgroup=…}` grows by the kill. Bad
//! `--history`/`--on-oom` get one line and the documented exit code.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    net::TcpStream,
    os::unix::{fs::PermissionsExt as _, process::ExitStatusExt as _},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use serde_json::Value;
use vmscope_tests::serve_fixture::tool_or_skip;
use vmscope_tests::{
    assert_valid, pages, path_str, pressure, root_or_skip, schema, serve_fixture, testchild, text,
    vmscope_within,
};

const LIMIT: u64 = 64 << 20;
const TOUCHED: u64 = 256 << 20;

fn metrics(addr: std::net::SocketAddr) -> String {
    let s = TcpStream::connect(addr).unwrap();
    let a = serve_fixture::get_over(s, "/metrics", Duration::from_secs(15)).unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    a.body
}

fn oom_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("oom-") && n.ends_with(".json"))
        })
        .collect()
}

#[test]
fn an_oom_kill_writes_the_window_as_a_recording_within_2_s() {
    if !root_or_skip("an_oom_kill_writes_the_window_as_a_recording_within_2_s") {
        return;
    }
    let _lock = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let serve = serve_fixture::Serve::start(&[
        "--listen",
        "127.0.0.1:0",
        "--history",
        "30s",
        "--on-oom",
        path_str(dir.path()),
    ]);
    let cg = pressure::MemCgroup::no_swap(LIMIT);
    let label = format!("/{}", cg.path().file_name().unwrap().to_str().unwrap());
    let family = format!("vmscope_cgroup_oom_kills_total{{cgroup=\"{label}\"}}");
    assert_eq!(serve_fixture::metric(&metrics(serve.addr), &family), None);
    // A few seconds of history before the kill.
    std::thread::sleep(Duration::from_secs(3));

    let before = pressure::vmstat()["oom_kill"];
    let mut c = cg.command(testchild());
    c.args(["touch", pages(TOUCHED).as_str()]);
    let mut child = c.spawn().unwrap();
    let pid = child.id();
    let status = child.wait().unwrap();
    let reaped = Instant::now();
    assert_eq!(status.signal(), Some(9), "{status:?}");
    let books = pressure::vmstat()["oom_kill"] - before;
    assert!(books >= 1);

    let file = loop {
        if let Some(f) = oom_files(dir.path()).into_iter().next() {
            break f;
        }
        assert!(
            reaped.elapsed() < Duration::from_secs(10),
            "no oom-*.json in {} 10 s after the kill; serve said:\n{}",
            dir.path().display(),
            serve.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let delay = reaped.elapsed();
    assert!(
        file.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .ends_with(&format!("-{pid}.json")),
        "{}",
        file.display()
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
        .unwrap_or_else(|e| panic!("{}: not whole JSON: {e}", file.display()));
    assert_valid(&schema("recording.schema.json"), &doc, "the OOM recording");

    let kills = doc["oom_kills"].as_array().unwrap();
    let k = kills
        .iter()
        .find(|k| k["pid"] == pid)
        .unwrap_or_else(|| panic!("no kill of {pid}: {kills:#?}"));
    assert_eq!(k["comm"], "vmscope-testchi", "{k}");
    assert_eq!(k["cgroup"], label.as_str(), "{k}");
    let window = doc["duration_ns"].as_u64().unwrap() as f64 / 1e9;
    assert!((2.0..=31.0).contains(&window), "window {window} s");
    let proc_stall = doc["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .and_then(|p| p["memcg_reclaim_ns"].as_u64())
        .unwrap_or(0);
    let cg_row = doc["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == label.as_str())
        .unwrap_or_else(|| panic!("no cgroup {label} in {:#}", doc["cgroups"]));
    let cg_stall = cg_row["totals"]["memcg_reclaim_ns"].as_u64().unwrap_or(0);
    assert!(
        proc_stall > 0 || cg_stall > 0,
        "no memcg reclaim stall before the kill: process {proc_stall} ns, cgroup {cg_stall} ns"
    );
    let failcnt = cg_row["books_last"]["events"]
        .as_object()
        .map(|e| e.get("failcnt").or_else(|| e.get("max")))
        .and_then(|v| v?.as_u64())
        .unwrap_or(0);
    assert!(
        failcnt > 0,
        "the cgroup's books show no limit hit: {cg_row:#}"
    );
    eprintln!(
        "flight: {} appeared {} ms after the child was reaped; {:.1} s window, {} samples; \
         victim {pid} stalled {:.1} ms in memcg reclaim (its cgroup {:.1} ms), cgroup \
         failcnt/max {failcnt}",
        file.file_name().unwrap().to_string_lossy(),
        delay.as_millis(),
        window,
        doc["samples"].as_array().unwrap().len(),
        proc_stall as f64 / 1e6,
        cg_stall as f64 / 1e6
    );
    assert!(delay < Duration::from_secs(2), "took {delay:?}");

    let deadline = Instant::now() + Duration::from_secs(5);
    let mut now = None;
    while now != Some(books as f64) && Instant::now() < deadline {
        now = serve_fixture::metric(&metrics(serve.addr), &family);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(now, Some(books as f64), "{family} vs /proc/vmstat oom_kill");
    assert!(
        serve
            .stderr()
            .contains(&format!("wrote {}", file.display()))
    );
}

/// One line each, exit 2 for usage errors and 1 for a directory that
/// cannot be written.
#[test]
fn bad_history_and_on_oom_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, "").unwrap();
    let d = path_str(dir.path());
    let cases: [(&[&str], i32, &str); 6] = [
        (&["--on-oom", d], 2, "--on-oom needs --history"),
        (&["--history", "0"], 2, "out of range: allowed is 1s to 1h"),
        (&["--history", "soon"], 2, "invalid duration 'soon'"),
        (&["--history", "2h"], 2, "out of range: allowed is 1s to 1h"),
        (
            &["--history", "5s", "--on-oom", "/nonexistent/oom"],
            1,
            "not a directory",
        ),
        (
            &["--history", "5s", "--on-oom", path_str(&file)],
            1,
            "not a directory",
        ),
    ];
    for (args, code, says) in cases {
        let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let o = vmscope_within(&all, Duration::from_secs(60));
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(says), "{args:?}: {err}");
        assert!(
            err.lines().filter(|l| !l.trim().is_empty()).count() <= 2,
            "{args:?}: more than the error (and clap's --help hint): {err}"
        );
    }
}

/// A directory root can write only through CAP_DAC_OVERRIDE: refused once
/// serve has given its privileges up, before it listens.
#[test]
fn an_on_oom_directory_unwritable_without_privileges_is_refused() {
    if !root_or_skip("an_on_oom_directory_unwritable_without_privileges_is_refused") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let o = vmscope_within(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--history",
            "5s",
            "--on-oom",
            path_str(&ro),
        ],
        Duration::from_secs(60),
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("cannot create a file there once privileges are given up")),
        "{err}"
    );
    assert!(!err.contains("listening on"), "{err}");
}

/// `top --batch --history 30s --on-oom DIR` keeps the same flight recorder:
/// while top runs, the OOM-killed child's window is written, whole, names
/// the child and its cgroup, and validates against the schema; top says so
/// on stderr and ends normally.
#[test]
fn top_keeps_a_flight_recorder_too() {
    if !root_or_skip("top_keeps_a_flight_recorder_too") {
        return;
    }
    // OOM kills are system-wide: another test's kill would be recorded too.
    let _lock = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("oom");
    std::fs::create_dir(&out).unwrap();
    let top = std::process::Command::new(vmscope_tests::vmscope_bin())
        .args(["top", "--batch", "-n", "6", "--history", "30s", "--on-oom"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let cg = pressure::MemCgroup::no_swap(LIMIT);
    let n = pages(TOUCHED);
    let status = cg
        .command(testchild())
        .args(["touch", n.as_str()])
        .status()
        .unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the child was not OOM-killed"
    );
    let o = top.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{:?}: {err}", o.status);
    let files = oom_files(&out);
    assert_eq!(files.len(), 1, "{files:?}: {err}");
    assert!(err.contains("vmscope top: OOM kill of"), "{err}");
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_valid(
        &schema("recording.schema.json"),
        &rec,
        "top's OOM recording",
    );
    let kills = rec["oom_kills"].as_array().unwrap();
    let name = format!("/{}", cg.path().file_name().unwrap().to_str().unwrap());
    assert!(
        kills
            .iter()
            .any(|k| k["comm"] == "vmscope-testchi" && k["cgroup"] == name.as_str()),
        "{kills:#?}"
    );
    eprintln!(
        "top wrote {} with {} samples",
        files[0].display(),
        rec["samples"].as_array().unwrap().len()
    );
}

/// Under sudo (`SUDO_UID`/`SUDO_GID`, here uid and gid 65534) serve writes
/// its OOM recordings as the invoking user, after it has given up every
/// capability: in a directory that user owns (mode 0755, which root
/// without CAP_DAC_OVERRIDE cannot write), the kill's recording appears,
/// owned by uid 65534, whole, and `vmscope report` reads it.
#[test]
fn under_sudo_an_oom_recording_is_written_as_the_invoking_user() {
    if !root_or_skip("under_sudo_an_oom_recording_is_written_as_the_invoking_user") {
        return;
    }
    const USER: u32 = 65534;
    let _lock = pressure::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let dir = users_dir(tmp.path(), USER);
    let mut cmd = std::process::Command::new(vmscope_tests::vmscope_bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--history", "30s"])
        .arg("--on-oom")
        .arg(&dir)
        .env("SUDO_UID", USER.to_string())
        .env("SUDO_GID", USER.to_string());
    let serve = serve_fixture::Serve::start_cmd(cmd);
    std::thread::sleep(Duration::from_secs(2));
    // No thread keeps CAP_CHOWN (bit 0); the writer holds nothing and
    // writes as the user.
    let mut writer = false;
    for task in std::fs::read_dir(format!("/proc/{}/task", serve.pid())).unwrap() {
        let task = task.unwrap().path();
        let comm = std::fs::read_to_string(task.join("comm")).unwrap();
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        let field = |name: &str| -> Vec<String> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap()
                .split_whitespace()
                .map(String::from)
                .collect()
        };
        let prm = u64::from_str_radix(&field("CapPrm:")[0], 16).unwrap();
        assert_eq!(
            prm & 1,
            0,
            "{} ({comm}) keeps CAP_CHOWN: {status}",
            task.display()
        );
        if comm.trim() == "vmscope-oom" {
            writer = true;
            assert_eq!(prm, 0, "the writer keeps capabilities: {status}");
            // Uid: real effective saved fs.
            assert_eq!(field("Uid:")[3], USER.to_string(), "{status}");
            assert_eq!(field("Gid:")[3], USER.to_string(), "{status}");
        }
    }
    assert!(writer, "no vmscope-oom thread");
    oom_recording_is_the_users(&serve, tmp.path(), &dir, USER);
}

/// `tmp/oom`, owned by `user` (uid and gid) with mode 0755, which root
/// without CAP_DAC_OVERRIDE cannot write; `tmp` opened for the user to
/// reach it.
fn users_dir(tmp: &Path, user: u32) -> PathBuf {
    std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tmp.join("oom");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(user), Some(user)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A memcg OOM kill while `serve` runs with `--on-oom dir`: its recording
/// appears within 15 s, owned by `user`, whole and valid, and `vmscope
/// report` reads it.
fn oom_recording_is_the_users(serve: &serve_fixture::Serve, tmp: &Path, dir: &Path, user: u32) {
    use std::os::unix::fs::MetadataExt as _;
    let cg = pressure::MemCgroup::no_swap(LIMIT);
    let status = cg
        .command(testchild())
        .args(["touch", pages(TOUCHED).as_str()])
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(9), "{status:?}");
    let reaped = Instant::now();
    let file = loop {
        if let Some(f) = oom_files(dir).into_iter().next() {
            break f;
        }
        assert!(
            reaped.elapsed() < Duration::from_secs(15),
            "no oom-*.json in {} 15 s after the kill; serve said:\n{}",
            dir.display(),
            serve.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (user, user),
        "{}: owner; serve said:\n{}",
        file.display(),
        serve.stderr()
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
        .unwrap_or_else(|e| panic!("{}: not whole JSON: {e}", file.display()));
    assert_valid(&schema("recording.schema.json"), &doc, "the OOM recording");
    let html = tmp.join("oom.html");
    let o = vmscope_within(
        &["report", path_str(&file), "-o", path_str(&html)],
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "report: {}", text(&o.stderr));
    assert!(std::fs::metadata(&html).unwrap().len() > 0);
    assert!(
        !serve.stderr().contains("not written"),
        "{}",
        serve.stderr()
    );
    eprintln!(
        "as uid {user}: {} owned by {}:{}, {} samples",
        file.display(),
        meta.uid(),
        meta.gid(),
        doc["samples"].as_array().unwrap().len()
    );
}

/// A sudoers rule letting `nobody` run one program as root without a
/// password, removed when dropped.
struct SudoRule(PathBuf);

impl SudoRule {
    fn new(program: &Path) -> SudoRule {
        let path = PathBuf::from(format!(
            "/etc/sudoers.d/vmscope-test-{}",
            std::process::id()
        ));
        std::fs::write(
            &path,
            format!("nobody ALL=(root) NOPASSWD: {}\n", program.display()),
        )
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o440)).unwrap();
        SudoRule(path)
    }
}

impl Drop for SudoRule {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The same through the real `sudo`, started by the user `nobody` (a
/// sudoers rule for the test's binary, removed afterwards): sudo sets
/// SUDO_UID/SUDO_GID and its own environment, and the OOM recording is
/// written as `nobody`.
#[test]
fn under_real_sudo_an_oom_recording_is_written_as_the_invoking_user() {
    const TEST: &str = "under_real_sudo_an_oom_recording_is_written_as_the_invoking_user";
    // (setpriv is util-linux's, on every Debian system.)
    if !root_or_skip(TEST) || !tool_or_skip(TEST, "sudo") {
        return;
    }
    const USER: u32 = 65534;
    let _lock = pressure::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let dir = users_dir(tmp.path(), USER);
    let bin = std::fs::canonicalize(vmscope_tests::vmscope_bin()).unwrap();
    let _rule = SudoRule::new(&bin);
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        "sudo",
        "-n",
    ])
    .arg(&bin)
    .args(["serve", "--listen", "127.0.0.1:0", "--history", "30s"])
    .arg("--on-oom")
    .arg(&dir)
    // Where nobody's sudo starts from: not the test's directory, which
    // it may not reach.
    .current_dir("/");
    let serve = serve_fixture::Serve::start_cmd(cmd);
    std::thread::sleep(Duration::from_secs(2));
    oom_recording_is_the_users(&serve, tmp.path(), &dir, USER);
}

/// serve's resident set size, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb << 10
}

/// An OOM storm: a child in a 16 MiB memory cgroup that touches 64 MiB,
/// re-run by a shell loop 200 times (60 s at most), each run OOM-killed,
/// while `serve --history 30s --on-oom DIR --on-oom-keep 3` runs. DIR held
/// five older recordings and a file of the user's. Throughout, /metrics
/// (asked every 200 ms) answers within 1 s and serve's RSS stays within
/// 10 MB of its value at the storm's start; at the end DIR holds at most 3
/// recordings (the storm's one episode among them, listing many kills),
/// the oldest were removed (logged, counted in
/// `vmscope_flight_recordings_removed_total`), the user's file is still
/// there.
#[test]
fn an_oom_storm_writes_one_recording_per_episode_within_the_budget() {
    if !root_or_skip("an_oom_storm_writes_one_recording_per_episode_within_the_budget") {
        return;
    }
    const KILLS: u32 = 200;
    let _lock = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    for day in 1..=5 {
        let old = dir
            .path()
            .join(format!("oom-2020010{day}T000000.000Z-{day}.json"));
        std::fs::write(old, "{}\n").unwrap();
    }
    std::fs::write(dir.path().join("oom-notes.json"), "mine\n").unwrap();
    let serve = serve_fixture::Serve::start(&[
        "--listen",
        "127.0.0.1:0",
        "--history",
        "30s",
        "--on-oom",
        path_str(dir.path()),
        "--on-oom-keep",
        "3",
    ]);
    std::thread::sleep(Duration::from_secs(2));
    let cg = pressure::MemCgroup::no_swap(16 << 20);
    let before = pressure::vmstat()["oom_kill"];
    let start_rss = rss(serve.pid());
    let mut storm = serve_fixture::KillOnDrop::spawn({
        let mut c = cg.command("/bin/sh");
        c.args([
            "-c",
            &format!("i=0; while [ $i -lt {KILLS} ]; do \"$0\" touch \"$1\"; i=$((i+1)); done"),
        ])
        .arg(testchild())
        .arg(pages(64 << 20));
        c.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    });
    let began = Instant::now();
    let (mut slowest, mut asked, mut max_rss) = (Duration::ZERO, 0u32, start_rss);
    loop {
        let t = Instant::now();
        let answer = TcpStream::connect(serve.addr)
            .map_err(|e| e.to_string())
            .and_then(|s| serve_fixture::get_over(s, "/metrics", Duration::from_secs(1)));
        let took = t.elapsed();
        asked += 1;
        slowest = slowest.max(took);
        assert!(
            answer.as_ref().is_ok_and(|a| a.status == 200) && took < Duration::from_secs(1),
            "/metrics during the storm: {took:?}: {:?}",
            answer.map(|a| a.status)
        );
        max_rss = max_rss.max(rss(serve.pid()));
        if storm.child().try_wait().unwrap().is_some() || began.elapsed() > Duration::from_secs(60)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(200).saturating_sub(took));
    }
    let lasted = began.elapsed();
    drop(storm);
    let kills = pressure::vmstat()["oom_kill"] - before;
    // The episode closes once quiet (5 s), and its file is written again.
    let quiet_until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < quiet_until {
        let t = Instant::now();
        let m = metrics(serve.addr);
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert!(m.contains("vmscope_flight_recordings_removed_total"));
        max_rss = max_rss.max(rss(serve.pid()));
        std::thread::sleep(Duration::from_millis(200));
    }
    let err = serve.stderr();
    let files = oom_files(dir.path());
    let recordings: Vec<_> = files
        .iter()
        .filter(|p| !p.ends_with("oom-notes.json"))
        .collect();
    let bytes: u64 = recordings
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    eprintln!(
        "storm: {kills} kills in {:.1} s; {asked} scrapes, slowest {} ms; RSS {} -> max {} KiB; \
         {} recordings, {bytes} bytes: {recordings:?}",
        lasted.as_secs_f64(),
        slowest.as_millis(),
        start_rss >> 10,
        max_rss >> 10,
        recordings.len()
    );
    assert!(kills >= 50, "only {kills} OOM kills in {lasted:?}");
    assert!(
        (1..=3).contains(&recordings.len()),
        "{recordings:?}; serve said:\n{err}"
    );
    assert!(bytes <= 256 << 20, "{bytes} bytes");
    assert!(dir.path().join("oom-notes.json").exists(), "{files:?}");
    assert!(
        !dir.path().join("oom-20200101T000000.000Z-1.json").exists(),
        "the oldest recording stayed: {files:?}"
    );
    let m = metrics(serve.addr);
    let removed = serve_fixture::metric(&m, "vmscope_flight_recordings_removed_total");
    assert!(removed >= Some(3.0), "removed {removed:?}\n{err}");
    assert!(err.contains("the oldest recording"), "{err}");
    let newest = recordings.iter().max().unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(newest).unwrap()).unwrap();
    let listed = doc["oom_kills"].as_array().unwrap().len();
    assert!(listed > 1, "the episode's file lists {listed} kills\n{err}");
    assert!(
        max_rss <= start_rss + 10_000_000,
        "RSS grew from {start_rss} to {max_rss} bytes"
    );
}

/// `top` under sudo too: its writer drops every capability and writes as
/// the invoking user, so the recording, in a directory that user owns, is
/// theirs.
#[test]
fn top_under_sudo_writes_as_the_invoking_user() {
    use std::os::unix::fs::MetadataExt as _;
    if !root_or_skip("top_under_sudo_writes_as_the_invoking_user") {
        return;
    }
    const USER: u32 = 65534;
    let _lock = pressure::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let out = users_dir(tmp.path(), USER);
    let top = std::process::Command::new(vmscope_tests::vmscope_bin())
        .args(["top", "--batch", "-n", "6", "--history", "30s", "--on-oom"])
        .arg(&out)
        .env("SUDO_UID", USER.to_string())
        .env("SUDO_GID", USER.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let cg = pressure::MemCgroup::no_swap(LIMIT);
    let status = cg
        .command(testchild())
        .args(["touch", pages(TOUCHED).as_str()])
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "not OOM-killed");
    let o = top.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{:?}: {err}", o.status);
    let files = oom_files(&out);
    assert_eq!(files.len(), 1, "{files:?}: {err}");
    let meta = std::fs::metadata(&files[0]).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (USER, USER), "{err}");
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_valid(&schema("recording.schema.json"), &rec, "top's recording");
}
