//! Files vmscope writes as root, and the command it wraps: planted symbolic
//! links, ownership under sudo, the command's limits and groups, and how
//! vmscope stops the command when it fails mid-run or `-d` runs out.
//!
//! Every test runs the release binary against the live kernel, as root.
#![allow(clippy::unwrap_used, reason = "tests fail loudly by design")]

use std::{
    io::{BufRead as _, BufReader},
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use vmscope_tests::{path_str, root_or_skip, run_with_timeout, text, vmscope_bin};

/// vmscope with the test's environment minus any sudo caller (the suite
/// itself may run under sudo), so only the tests that set one get one.
fn vmscope_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(vmscope_bin());
    c.args(args)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .env_remove("SUDO_COMMAND");
    c
}

/// What vmscope says on stderr besides its log lines (`[WARN ] ...` for
/// probes this kernel refuses).
fn error_lines(stderr: &[u8]) -> Vec<String> {
    text(stderr)
        .lines()
        .filter(|l| !l.starts_with('['))
        .map(str::to_string)
        .collect()
}

fn one_error_line(stderr: &[u8], what: &str) -> String {
    let lines = error_lines(stderr);
    assert_eq!(lines.len(), 1, "{what}: not one error line: {lines:#?}");
    assert!(lines[0].starts_with("vmscope: "), "{what}: {lines:?}");
    lines[0].clone()
}

fn root_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap()
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A process's start time (field 22 of /proc/PID/stat), while it exists
/// and is not a zombie.
fn running(pid: u32) -> Option<u64> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &t[t.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    (f.first() != Some(&"Z")).then(|| f[19].parse().unwrap())
}

/// Waits until `file` holds one pid per line, `n` of them.
fn pids_from(file: &Path, n: usize) -> Vec<u32> {
    let t0 = Instant::now();
    loop {
        if let Ok(t) = std::fs::read_to_string(file) {
            let v: Vec<u32> = t.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if v.len() >= n && t.ends_with('\n') {
                return v;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{} never held {n} pids",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn planted_symlink_at_the_output_leaves_its_target_alone() {
    if !root_or_skip("planted_symlink_at_the_output_leaves_its_target_alone") {
        return;
    }
    let dir = root_dir("vmscope-symlink");
    let target = dir.path().join("precious");
    std::fs::write(&target, "precious contents\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let unchanged = |what: &str| {
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "precious contents\n",
            "{what}: the link's target was written"
        );
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640, "{what}: the target's mode changed");
    };

    // The jsonl stream is written in place: a link there is refused.
    let link = dir.path().join("out.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = run_with_timeout(
        vmscope_cmd(&[
            "record",
            "--format",
            "jsonl",
            "-o",
            path_str(&link),
            "--",
            "true",
        ]),
        Duration::from_secs(60),
    );
    assert!(!o.status.success(), "jsonl through a symlink succeeded");
    let line = one_error_line(&o.stderr, "jsonl through a symlink");
    assert!(line.contains("symbolic link"), "{line}");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    unchanged("jsonl");

    // A dangling link is not followed to create its target either.
    let missing = dir.path().join("would-be-created");
    let dangling = dir.path().join("dangling.jsonl");
    std::os::unix::fs::symlink(&missing, &dangling).unwrap();
    let o = run_with_timeout(
        vmscope_cmd(&[
            "record",
            "--format",
            "jsonl",
            "-o",
            path_str(&dangling),
            "--",
            "true",
        ]),
        Duration::from_secs(60),
    );
    assert!(
        !o.status.success(),
        "jsonl through a dangling symlink succeeded"
    );
    one_error_line(&o.stderr, "jsonl through a dangling symlink");
    assert!(!missing.exists(), "the dangling link's target was created");

    // The JSON document is renamed into place: the link itself is replaced.
    let link = dir.path().join("out.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = run_with_timeout(
        vmscope_cmd(&["record", "-o", path_str(&link), "--", "true"]),
        Duration::from_secs(60),
    );
    vmscope_tests::ok(&o, "record -o SYMLINK");
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.is_file(), "the link was not replaced by the document");
    vmscope::document::read(&link).unwrap();
    unchanged("json");
    let left: Vec<String> = names(dir.path())
        .into_iter()
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn outputs_belong_to_the_sudo_caller() {
    if !root_or_skip("outputs_belong_to_the_sudo_caller") {
        return;
    }
    const NOBODY: u32 = 65534;
    let dir = root_dir("vmscope-owner");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let json = dir.path().join("run.json");
    let jsonl = dir.path().join("run.jsonl");
    // One that already exists, root's: truncated, rewritten, handed over.
    let old = dir.path().join("old.jsonl");
    std::fs::write(&old, "stale\n".repeat(1000)).unwrap();
    let sudo = |args: &[&str]| {
        let mut c = vmscope_cmd(args);
        c.env("SUDO_UID", NOBODY.to_string())
            .env("SUDO_GID", NOBODY.to_string())
            .current_dir(dir.path());
        let o = run_with_timeout(c, Duration::from_secs(60));
        vmscope_tests::ok(&o, &format!("{args:?}"));
    };
    sudo(&["record", "-o", path_str(&json), "--", "true"]);
    sudo(&[
        "record",
        "--format",
        "jsonl",
        "-o",
        path_str(&jsonl),
        "--",
        "true",
    ]);
    sudo(&[
        "record",
        "--format",
        "jsonl",
        "-o",
        path_str(&old),
        "--",
        "true",
    ]);
    for p in [&json, &jsonl, &old] {
        let m = std::fs::metadata(p).unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            (NOBODY, NOBODY),
            "{} is not the sudo caller's",
            p.display()
        );
        vmscope::document::read(p).unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
    }
    assert!(!text(&std::fs::read(&old).unwrap()).contains("stale"));
    assert_eq!(
        names(dir.path()),
        ["old.jsonl", "run.json", "run.jsonl"],
        "temporary files left behind"
    );
    // Without sudo, root's own.
    let mine = dir.path().join("mine.json");
    let o = run_with_timeout(
        vmscope_cmd(&["record", "-o", path_str(&mine), "--", "true"]),
        Duration::from_secs(60),
    );
    vmscope_tests::ok(&o, "record as root");
    assert_eq!(std::fs::metadata(&mine).unwrap().uid(), 0);
}

/// A user with a supplementary group, for the time of a test.
struct TempUser {
    name: String,
    groups: [String; 2],
}

impl TempUser {
    fn new() -> TempUser {
        let name = format!("vmsw{}", std::process::id() % 100_000);
        let groups = [format!("{name}p"), format!("{name}s")];
        let t = TempUser { name, groups };
        t.remove();
        for g in &t.groups {
            run_ok(Command::new("groupadd").arg(g));
        }
        run_ok(
            Command::new("useradd")
                .args(["-M", "-N", "-s", "/bin/sh", "-g", &t.groups[0], "-G"])
                .arg(&t.groups[1])
                .arg(&t.name),
        );
        t
    }

    fn ids(&self) -> (u32, u32) {
        let out = |args: &[&str]| -> u32 {
            let o = Command::new("id")
                .args(args)
                .arg(&self.name)
                .output()
                .unwrap();
            text(&o.stdout).trim().parse().unwrap()
        };
        (out(&["-u"]), out(&["-g"]))
    }

    fn remove(&self) {
        let _ = Command::new("userdel").arg(&self.name).output();
        for g in &self.groups {
            let _ = Command::new("groupdel").arg(g).output();
        }
    }
}

impl Drop for TempUser {
    fn drop(&mut self) {
        self.remove();
    }
}

fn run_ok(c: &mut Command) {
    let o = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(o.status.success(), "{c:?}: {}", text(&o.stderr));
}

/// Sets distinctive limits for what runs next (so "the same as the caller"
/// cannot pass by accident): RLIMIT_MEMLOCK 1 MiB soft, 2 MiB hard.
fn with_caller_limits(c: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 1 << 20,
                rlim_max: 2 << 20,
            };
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

const PROBE: &str = "ulimit -l; ulimit -Hl; ulimit -n; ulimit -Hn; id -u; id -g; id -G; \
                     grep -E '^Sig(Blk|Ign)' /proc/self/status";

#[test]
fn the_command_gets_the_callers_limits_and_groups() {
    if !root_or_skip("the_command_gets_the_callers_limits_and_groups") {
        return;
    }
    let dir = root_dir("vmscope-limits");
    let rec = dir.path().join("r.json");

    // As root (no sudo caller): root's groups, the caller's limits.
    let mut direct = Command::new("sh");
    direct.args(["-c", PROBE]);
    with_caller_limits(&mut direct);
    let want = run_with_timeout(direct, Duration::from_secs(10));
    let mut wrapped = vmscope_cmd(&["record", "-o", path_str(&rec), "--", "sh", "-c", PROBE]);
    with_caller_limits(&mut wrapped);
    let got = run_with_timeout(wrapped, Duration::from_secs(60));
    vmscope_tests::ok(&got, "record -- sh");
    eprintln!("plain shell:\n{}", text(&want.stdout));
    assert!(
        text(&want.stdout).starts_with("1024\n2048\n"),
        "{}",
        text(&want.stdout)
    );
    assert_eq!(text(&got.stdout), text(&want.stdout), "as root");

    // Under sudo: the invoking user's login groups, as `setpriv
    // --init-groups` (initgroups) gives them to a shell.
    let user = TempUser::new();
    let (uid, gid) = user.ids();
    let mut direct = Command::new("setpriv");
    direct
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--init-groups")
        .args(["sh", "-c", PROBE]);
    with_caller_limits(&mut direct);
    let want = run_with_timeout(direct, Duration::from_secs(10));
    assert!(want.status.success(), "setpriv: {}", text(&want.stderr));
    let mut wrapped = vmscope_cmd(&["record", "-o", path_str(&rec), "--", "sh", "-c", PROBE]);
    wrapped
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string());
    with_caller_limits(&mut wrapped);
    let got = run_with_timeout(wrapped, Duration::from_secs(60));
    vmscope_tests::ok(&got, "record -- sh under sudo");
    eprintln!("login shell of {}:\n{}", user.name, text(&want.stdout));
    let groups_line = text(&want.stdout).lines().nth(6).unwrap().to_string();
    assert_eq!(
        groups_line.split_whitespace().count(),
        2,
        "the user should have a primary and a supplementary group: {groups_line}"
    );
    assert_eq!(text(&got.stdout), text(&want.stdout), "under sudo");
}

/// `record --format jsonl -o -` read until the command is running, then its
/// stdout closed: vmscope must stop the command and exit 125.
#[test]
fn broken_stdout_mid_run_stops_the_command_and_exits_125() {
    if !root_or_skip("broken_stdout_mid_run_stops_the_command_and_exits_125") {
        return;
    }
    let dir = root_dir("vmscope-epipe");
    let pidfile = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut c = vmscope_cmd(&[
        "record", "--format", "jsonl", "-o", "-", "-i", "100ms", "--", "sh", "-c", &script,
    ]);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut vm = c.spawn().unwrap();
    let mut out = BufReader::new(vm.stdout.take().unwrap());
    let pid = pids_from(&pidfile, 1)[0];
    let started = running(pid).expect("the command is running");
    // Two lines read: the stream was flowing while the command ran.
    let mut l = String::new();
    for _ in 0..2 {
        l.clear();
        out.read_line(&mut l).unwrap();
        assert!(l.starts_with("{\"type\":"), "{l}");
    }
    drop(out);
    let closed = Instant::now();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = vm.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "vmscope still running 10 s after its stdout closed"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = closed.elapsed();
    let o = vm.wait_with_output().unwrap();
    eprintln!("exited {took:?} after stdout closed: {status:?}");
    assert_eq!(status.code(), Some(125), "{}", text(&o.stderr));
    let line = one_error_line(&o.stderr, "broken stdout");
    assert!(
        line.contains("Broken pipe") && line.contains("stopped with SIGTERM"),
        "{line}"
    );
    assert_ne!(
        running(pid),
        Some(started),
        "the command (pid {pid}) still runs"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// A small tmpfs, unmounted when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn new(size: &str) -> SmallFs {
        let dir = root_dir("vmscope-enospc");
        run_ok(
            Command::new("mount")
                .args([
                    "-t",
                    "tmpfs",
                    "-o",
                    &format!("size={size},mode=0755"),
                    "tmpfs",
                ])
                .arg(dir.path()),
        );
        SmallFs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).output();
    }
}

/// The command fills the file system the stream is on, and frees the space
/// when told to stop: the stream ends in whole lines, the last one the
/// recording marked incomplete with the reason.
#[test]
fn full_disk_mid_run_leaves_an_incomplete_recording() {
    if !root_or_skip("full_disk_mid_run_leaves_an_incomplete_recording") {
        return;
    }
    let fs = SmallFs::new("512k");
    let aside = root_dir("vmscope-enospc-pid");
    let pidfile = aside.path().join("pid");
    let out = fs.path().join("run.jsonl");
    let fill = fs.path().join("fill");
    let script = format!(
        "trap 'kill $!; rm -f {fill}; exit 7' TERM; echo $$ > {pid}; sleep 0.5; \
         cat /dev/zero > {fill} 2>/dev/null; sleep 30 & wait",
        fill = fill.display(),
        pid = pidfile.display()
    );
    let t0 = Instant::now();
    let o = run_with_timeout(
        vmscope_cmd(&[
            "record",
            "--format",
            "jsonl",
            "-o",
            path_str(&out),
            "-i",
            "100ms",
            "--",
            "sh",
            "-c",
            &script,
        ]),
        Duration::from_secs(60),
    );
    let took = t0.elapsed();
    eprintln!("took {took:?}; stderr: {}", text(&o.stderr));
    assert_eq!(o.status.code(), Some(125), "{}", text(&o.stderr));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let line = one_error_line(&o.stderr, "full disk");
    assert!(
        line.contains("No space left on device") && line.contains("an incomplete recording is in"),
        "{line}"
    );
    let pid = pids_from(&pidfile, 1)[0];
    assert_eq!(running(pid), None, "the command (pid {pid}) still runs");
    let body = std::fs::read_to_string(&out).unwrap();
    assert!(body.ends_with('\n'), "a partial line was left");
    let lines: Vec<serde_json::Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a whole line ({e}): {l}")))
        .collect();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    eprintln!("{} lines: {types:?}", lines.len());
    assert!(
        types.iter().filter(|t| **t == "sample").count() >= 2,
        "{types:?}"
    );
    let rec = lines.last().unwrap();
    assert_eq!(rec["type"], "recording");
    let why = rec["incomplete"].as_str().expect("marked incomplete");
    assert!(why.contains("No space left on device"), "{why}");
    assert_eq!(
        rec["child"]["exit_code"], 7,
        "the command's own TERM handler ran"
    );
    assert_eq!(rec["child"]["signals_sent"][0]["signal"], "SIGTERM");
    assert_eq!(rec["child"]["signals_sent"][0]["reason"], "error");
    let r = vmscope::document::read(&out).unwrap();
    assert!(r.incomplete.is_some());
    vmscope_tests::assert_valid(
        &vmscope_tests::schema("jsonl-line.schema.json"),
        rec,
        "the incomplete recording line",
    );
    assert_eq!(names(fs.path()), ["run.jsonl"]);
}

/// The JSON document is written at the end: on a full disk it is not
/// written at all, and no temporary file is left.
#[test]
fn full_disk_at_the_end_leaves_no_file() {
    if !root_or_skip("full_disk_at_the_end_leaves_no_file") {
        return;
    }
    let fs = SmallFs::new("256k");
    let out = fs.path().join("run.json");
    let fill = fs.path().join("fill");
    let script = format!("cat /dev/zero > {} 2>/dev/null; exit 0", fill.display());
    let o = run_with_timeout(
        vmscope_cmd(&["record", "-o", path_str(&out), "--", "sh", "-c", &script]),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(125), "{}", text(&o.stderr));
    let line = one_error_line(&o.stderr, "full disk at the end");
    assert!(line.contains("No space left on device"), "{line}");
    assert_eq!(
        names(fs.path()),
        ["fill"],
        "a document or temporary file was left"
    );
}

/// `-d` sends SIGTERM; a command that ignores it, and its child, get SIGKILL
/// after the grace period, and the document says which signals went when.
#[test]
fn duration_escalates_to_sigkill_for_a_command_that_ignores_sigterm() {
    if !root_or_skip("duration_escalates_to_sigkill_for_a_command_that_ignores_sigterm") {
        return;
    }
    let dir = root_dir("vmscope-grace");
    let pidfile = dir.path().join("pids");
    let rec_path = dir.path().join("run.json");
    let script = format!(
        "trap '' TERM; sleep 60 & echo $$ > {p}; echo $! >> {p}; wait",
        p = pidfile.display()
    );
    let t0 = Instant::now();
    let o = run_with_timeout(
        vmscope_cmd(&[
            "record",
            "-o",
            path_str(&rec_path),
            "-d",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ]),
        Duration::from_secs(60),
    );
    let took = t0.elapsed();
    eprintln!("took {took:?}");
    assert_eq!(o.status.code(), Some(137), "{}", text(&o.stderr));
    let pids = pids_from(&pidfile, 2);
    for pid in &pids {
        assert_eq!(running(*pid), None, "pid {pid} still runs");
    }
    // 1 s of -d, 2 s of grace, plus start-up and tear-down.
    assert!(took < Duration::from_secs(6), "took {took:?}");
    let rec = vmscope_tests::read_json(&rec_path);
    let child = &rec["child"];
    assert_eq!(child["signal"], 9);
    let sent = child["signals_sent"].as_array().unwrap();
    let sent_list: Vec<(&str, &str)> = sent
        .iter()
        .map(|s| (s["signal"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(sent_list, [("SIGTERM", "duration"), ("SIGKILL", "grace")]);
    let at = |i: usize| sent[i]["after_ns"].as_u64().unwrap();
    let grace = Duration::from_nanos(at(1) - at(0));
    eprintln!(
        "SIGTERM at {:?}, SIGKILL {grace:?} later",
        Duration::from_nanos(at(0))
    );
    assert!(
        grace >= Duration::from_millis(1900) && grace < Duration::from_millis(2500),
        "{grace:?}"
    );
    assert!(rec.get("incomplete").is_none());
    vmscope_tests::assert_valid(
        &vmscope_tests::schema("recording.schema.json"),
        &rec,
        "the recording",
    );
}

/// Under sudo the command runs as the caller with the caller's HOME, USER
/// and LOGNAME, not root's (sudo leaves root's; vmscope drops to the
/// caller): nobody's from its passwd entry; a uid without one gets
/// SUDO_USER's name and no HOME.
#[test]
fn the_command_gets_the_callers_home_user_and_logname() {
    if !root_or_skip("the_command_gets_the_callers_home_user_and_logname") {
        return;
    }
    let dir = root_dir("vmscope-home");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let rec = dir.path().join("r.json");
    let probe = "echo \"${HOME-unset} ${USER-unset} ${LOGNAME-unset}\"; id -u";
    for (uid, want) in [
        ("65534", "/nonexistent nobody nobody\n65534\n"),
        ("4000007", "unset someone someone\n4000007\n"),
    ] {
        let mut c = vmscope_cmd(&["record", "-o", path_str(&rec), "--", "sh", "-c", probe]);
        c.env("SUDO_UID", uid)
            .env("SUDO_GID", uid)
            .env("SUDO_USER", "someone")
            .env("HOME", "/root")
            .env("USER", "root")
            .env("LOGNAME", "root");
        let o = run_with_timeout(c, Duration::from_secs(60));
        vmscope_tests::ok(&o, &format!("record under sudo from uid {uid}"));
        assert_eq!(text(&o.stdout), want, "uid {uid}");
    }
}
