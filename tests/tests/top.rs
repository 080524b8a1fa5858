//! `vmscope top`: batch snapshots that show a faulting child, and the
//! interactive UI driven in a detached tmux session (a swapping child in its
//! table, the sort key moved with `s`, `q` quitting with status 0 and the
//! terminal back in cooked mode with echo; the cgroup table, `c`, showing
//! the swapping child's memory cgroup with its swap-out and limit, and
//! Enter on it listing the child).
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    os::unix::process::CommandExt as _,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use vmscope_tests::{pressure, root_or_skip, run_with_timeout, testchild, vmscope_bin};

/// The column titles of the process table, in order.
const COLUMNS: [&str; 9] = [
    "PID",
    "COMM",
    "FLT/s",
    "MAJ/s",
    "RCLM_ms/s",
    "SWIN/s",
    "SWOUT/s",
    "MADV/s",
    "SHOOT/s",
];

/// The test child's name as the kernel has it (15 characters).
const CHILD_COMM: &str = "vmscope-testchi";

/// One row of the process table: a value per column title after COMM,
/// `None` for `n/a`.
#[derive(Debug)]
struct Row {
    pid: u32,
    comm: String,
    values: Vec<(String, Option<f64>)>,
}

impl Row {
    fn get(&self, column: &str) -> Option<f64> {
        self.values
            .iter()
            .find(|(c, _)| c == column)
            .unwrap_or_else(|| panic!("no column {column} in {self:?}"))
            .1
    }

    /// The value of `column`, 0 when it is `n/a`.
    fn rate(&self, column: &str) -> f64 {
        self.get(column).unwrap_or(0.0)
    }
}

/// `line` with the UI's decoration (box drawing, arrows, geometric shapes
/// such as sort markers) turned into blanks, split on whitespace.
fn words(line: &str) -> Vec<&str> {
    line.split(|c: char| {
        c.is_whitespace()
            || ('\u{2190}'..='\u{21ff}').contains(&c)
            || ('\u{2500}'..='\u{25ff}').contains(&c)
    })
    .filter(|w| !w.is_empty())
    .collect()
}

/// Whether `line` is the table's header: its words hold [`COLUMNS`] in
/// order, PID and COMM first.
fn is_header(line: &str) -> bool {
    let w = words(line);
    let mut want = COLUMNS.iter().peekable();
    for word in &w {
        if want.peek() == Some(&word) {
            want.next();
        }
    }
    want.peek().is_none() && w.first() == Some(&"PID") && w.get(1) == Some(&"COMM")
}

/// A row under `header`. Words before COMM line up from the left, those
/// after it from the right, and COMM (which may hold blanks) is the rest.
/// `None` when the line does not start with a pid; an error when it does
/// but the rest does not fit the header.
fn parse_row(header: &[&str], line: &str) -> Option<Result<Row, String>> {
    let w = words(line);
    let pid: u32 = w.first()?.parse().ok()?;
    let after_comm = header.len() - 2;
    if w.len() < header.len() {
        return Some(Err(format!(
            "row {line:?} has fewer words than header {header:?}"
        )));
    }
    let comm = w[1..w.len() - after_comm].join(" ");
    let mut values = Vec::new();
    for (title, word) in header[2..].iter().zip(&w[w.len() - after_comm..]) {
        let v = if *word == "n/a" {
            None
        } else {
            match word.parse::<f64>() {
                Ok(v) if v.is_finite() => Some(v),
                _ => {
                    return Some(Err(format!(
                        "{title} is {word:?} (neither a number nor n/a) in row {line:?}"
                    )));
                }
            }
        };
        values.push(((*title).to_owned(), v));
    }
    Some(Ok(Row { pid, comm, values }))
}

/// The process table in `lines`: the header's words and the rows under it.
/// Strict (batch output): the rows are the lines after the header that start
/// with a pid, up to the first line that does not, and each must fit the
/// header. Lenient (a screen capture): every line after the header that
/// parses as a row is one; the others are passed over.
fn table<'a>(lines: &[&'a str], strict: bool) -> Result<(Vec<&'a str>, Vec<Row>), String> {
    let at = lines
        .iter()
        .position(|l| is_header(l))
        .ok_or_else(|| format!("no header line with {COLUMNS:?}"))?;
    let header = words(lines[at]);
    let mut rows = Vec::new();
    for line in &lines[at + 1..] {
        match parse_row(&header, line) {
            Some(Ok(row)) => rows.push(row),
            Some(Err(e)) if strict => return Err(e),
            None if strict => break,
            Some(Err(_)) | None => {}
        }
    }
    Ok((header, rows))
}

/// Batch output cut into snapshots: each starts with a line beginning
/// `vmscope top`, and each but the first follows a blank line.
fn snapshots(stdout: &str) -> Vec<Vec<&str>> {
    let lines: Vec<&str> = stdout.lines().collect();
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("vmscope top"))
        .collect();
    assert_eq!(
        starts.first(),
        Some(&0),
        "the output does not start with a `vmscope top` line:\n{stdout}"
    );
    for &s in &starts[1..] {
        assert!(
            lines[s - 1].trim().is_empty(),
            "no blank line before the snapshot at line {}:\n{stdout}",
            s + 1
        );
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &s)| lines[s..starts.get(i + 1).copied().unwrap_or(lines.len())].to_vec())
        .collect()
}

/// Kills (SIGKILL) the child's whole process group and reaps the child when
/// dropped, whatever happened before.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: plain syscall. The child leads its own process group
        // (`process_group(0)`), so this reaches what it started too.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_group(mut cmd: Command) -> KillOnDrop {
    cmd.process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    KillOnDrop(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("spawning {:?}: {e}", cmd.get_program())),
    )
}

#[test]
fn batch_mode_prints_snapshots_with_the_faulting_child() {
    if !root_or_skip("batch_mode_prints_snapshots_with_the_faulting_child") {
        return;
    }
    let mut churn = Command::new(testchild());
    churn.args(["churn", "6000"]);
    let child = spawn_group(churn);
    let pid = child.0.id();

    let mut top = Command::new(vmscope_bin());
    top.args(["top", "--batch", "-n", "3", "-i", "500ms"]);
    let out = run_with_timeout(top, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "vmscope top --batch: {:?}\nstderr: {stderr}\nstdout:\n{stdout}",
        out.status
    );

    let snaps = snapshots(&stdout);
    assert_eq!(snaps.len(), 3, "want 3 snapshots:\n{stdout}");
    let mut child_rates = Vec::new();
    for (i, snap) in snaps.iter().enumerate() {
        let (_, rows) =
            table(snap, true).unwrap_or_else(|e| panic!("snapshot {}: {e}:\n{stdout}", i + 1));
        if let Some(row) = rows.iter().find(|r| r.pid == pid) {
            assert_eq!(row.comm, CHILD_COMM, "{row:?}");
            child_rates.push(row.rate("FLT/s"));
        }
    }
    assert!(
        child_rates.iter().any(|&f| f > 0.0),
        "the churning child (pid {pid}) has no row with FLT/s > 0 \
         (its FLT/s per snapshot where listed: {child_rates:?}):\n{stdout}"
    );
}

/// A detached tmux session on a server of its own, and the workload, both
/// killed when dropped (also when an assertion fails).
struct Session {
    server: String,
    /// The server's socket, removed once the server is gone.
    socket: Option<std::path::PathBuf>,
    /// The pane's shell, leader of the process group vmscope runs in.
    pane_pid: Option<i32>,
    workload: Option<KillOnDrop>,
}

impl Session {
    fn tmux(&self, args: &[&str]) -> Output {
        let out = Command::new("tmux")
            .args(["-L", &self.server])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running tmux {args:?}: {e}"));
        assert!(
            out.status.success(),
            "tmux {args:?}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The visible pane, wrapped lines joined.
    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-J", "-t", "top"]).stdout)
            .into_owned()
    }

    /// Polls the pane until `done` holds, for up to `limit`; panics with
    /// `what` and the last capture otherwise.
    fn wait_for(&self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < limit,
                "{what}: not seen within {limit:?}; the pane shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // What still runs in the pane is killed first: a program that
        // outlives its terminal may not notice that the server is gone.
        if let Some(pgid) = self.pane_pid {
            // SAFETY: plain syscall on the pane's process group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        let _ = Command::new("tmux")
            .args(["-L", &self.server, "kill-server"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(socket) = &self.socket {
            let _ = std::fs::remove_file(socket);
        }
        drop(self.workload.take());
    }
}

/// Whether tmux can be run. Without it the test skips with a one-line
/// reason, except under VMSCOPE_REQUIRE_BPF=1 (CI), where it fails.
fn tmux_or_skip(test: &str) -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    vmscope_tests::skip_unless(test, found, "tmux is not installed", "apt-get install tmux")
}

/// `s` as one single-quoted shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Whether `screen` lists the test child with faults and swap traffic.
fn shows_swapping_child(screen: &str) -> bool {
    let lines: Vec<&str> = screen.lines().collect();
    table(&lines, false).is_ok_and(|(_, rows)| {
        rows.iter().any(|r| {
            r.comm == CHILD_COMM
                && r.rate("FLT/s") > 0.0
                && (r.rate("SWOUT/s") > 0.0 || r.rate("SWIN/s") > 0.0)
        })
    })
}

#[test]
fn interactive_top_in_tmux_shows_the_swapping_child_sorts_and_restores_the_terminal() {
    const TEST: &str =
        "interactive_top_in_tmux_shows_the_swapping_child_sorts_and_restores_the_terminal";
    if !root_or_skip(TEST) || !tmux_or_skip(TEST) {
        return;
    }
    // Dropped in reverse order: the session (tmux, then the workload) goes
    // first, then the cgroup, the swap device and the lock.
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(1 << 30);
    let cg = pressure::MemCgroup::new(64 << 20);
    let mut session = Session {
        server: format!("vmscope-test-{}", std::process::id()),
        socket: None,
        pane_pid: None,
        workload: None,
    };

    // The pane's shell reports vmscope's status and the terminal modes it
    // left behind, then stays open for the capture.
    let script = format!(
        "{} top -i 500ms; echo EXIT=$? ; stty -a; sleep 30",
        shell_quote(&vmscope_bin().to_string_lossy())
    );
    let out = Command::new("tmux")
        .args(["-L", &session.server, "-f", "/dev/null"])
        .args(["new-session", "-d", "-s", "top", "-x", "200", "-y", "50"])
        .arg(&script)
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("starting tmux: {e}"));
    assert!(
        out.status.success(),
        "tmux new-session: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let info = session.tmux(&["display-message", "-p", "#{pane_pid} #{socket_path}"]);
    let info = String::from_utf8_lossy(&info.stdout).trim().to_owned();
    if let Some((pid, socket)) = info.split_once(' ') {
        session.pane_pid = pid.parse().ok().filter(|&p: &i32| p > 1);
        session.socket = Some(socket.into());
    }
    session.wait_for("the process table", Duration::from_secs(20), |s| {
        s.lines().any(is_header)
    });

    // 256 MiB written twice under a 64 MiB limit, over and over: swap-out
    // in the first pass, swap-in in the second.
    let mut loop_cmd = cg.command("sh");
    loop_cmd
        .arg("-c")
        .arg(r#"i=0; while [ $i -lt 40 ]; do "$0" rewrite 65536 || exit; i=$((i+1)); done"#)
        .arg(testchild());
    session.workload = Some(spawn_group(loop_cmd));

    let screen = session.wait_for(
        "a vmscope-testchi row with FLT/s and SWOUT/s or SWIN/s above 0",
        Duration::from_secs(20),
        shows_swapping_child,
    );
    assert!(
        screen.contains("sort: FLT/s"),
        "the status line does not say `sort: FLT/s`:\n{screen}"
    );

    session.tmux(&["send-keys", "-t", "top", "s"]);
    session.wait_for(
        "`sort: MAJ/s` after pressing s",
        Duration::from_secs(5),
        |s| s.contains("sort: MAJ/s"),
    );

    session.tmux(&["send-keys", "-t", "top", "q"]);
    let screen = session.wait_for(
        "EXIT= and the stty -a output after pressing q",
        Duration::from_secs(10),
        |s| {
            s.split_once("EXIT=").is_some_and(|(_, after)| {
                words(after)
                    .iter()
                    .any(|w| *w == "icanon" || *w == "-icanon")
            })
        },
    );
    let (_, after) = screen.split_once("EXIT=").unwrap();
    let status = after.split_whitespace().next().unwrap_or("");
    assert_eq!(status, "0", "vmscope top exited with {status}:\n{screen}");
    let modes = words(after);
    for mode in ["icanon", "echo"] {
        assert!(
            modes.contains(&mode) && !modes.contains(&format!("-{mode}").as_str()),
            "the terminal was left without {mode}:\n{screen}"
        );
    }
}

/// The cgroup table's column titles, in order.
const CGROUP_COLUMNS: [&str; 12] = [
    "CGROUP",
    "PROCS",
    "FLT/s",
    "MAJ/s",
    "RCLM_ms/s",
    "SWIN/s",
    "SWOUT/s",
    "MADV/s",
    "SHOOT/s",
    "USAGE",
    "LIMIT",
    "PSI%",
];

/// The cgroup table's row for `path` in a screen capture: its words by
/// column title. The path is the first word (no blanks in the test's
/// path); the header must list every column (a terminal wide enough).
fn cgroup_row<'a>(screen: &'a str, path: &str) -> Option<Vec<(&'static str, &'a str)>> {
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines.iter().position(|l| words(l) == CGROUP_COLUMNS)?;
    lines[at + 1..].iter().find_map(|l| {
        let w = words(l);
        (w.first() == Some(&path) && w.len() == CGROUP_COLUMNS.len())
            .then(|| CGROUP_COLUMNS.iter().copied().zip(w).collect())
    })
}

/// The word under `column` in a cgroup row, as a number (`None` for `n/a`
/// or anything else).
fn cgroup_value(row: &[(&str, &str)], column: &str) -> Option<f64> {
    row.iter().find(|(c, _)| *c == column)?.1.parse().ok()
}

/// `top` started in a tmux pane of 200×50 with `vmscope top -i 500ms`; the
/// pane's shell then reports the exit status and the terminal modes.
fn start_top(session: &mut Session) {
    let script = format!(
        "{} top -i 500ms; echo EXIT=$? ; stty -a; sleep 30",
        shell_quote(&vmscope_bin().to_string_lossy())
    );
    let out = Command::new("tmux")
        .args(["-L", &session.server, "-f", "/dev/null"])
        .args(["new-session", "-d", "-s", "top", "-x", "200", "-y", "50"])
        .arg(&script)
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("starting tmux: {e}"));
    assert!(
        out.status.success(),
        "tmux new-session: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let info = session.tmux(&["display-message", "-p", "#{pane_pid} #{socket_path}"]);
    let info = String::from_utf8_lossy(&info.stdout).trim().to_owned();
    if let Some((pid, socket)) = info.split_once(' ') {
        session.pane_pid = pid.parse().ok().filter(|&p: &i32| p > 1);
        session.socket = Some(socket.into());
    }
}

#[test]
fn the_cgroup_view_shows_the_swapping_childs_memory_cgroup_and_its_processes() {
    const TEST: &str = "the_cgroup_view_shows_the_swapping_childs_memory_cgroup_and_its_processes";
    if !root_or_skip(TEST) || !tmux_or_skip(TEST) {
        return;
    }
    // Dropped in reverse order: the session (tmux, then the workload) goes
    // first, then the cgroup, the swap device and the lock.
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(1 << 30);
    let limit: u64 = 64 << 20;
    let cg = pressure::MemCgroup::new(limit);
    // Created at the hierarchy's root: its path below the mount.
    let path = format!("/{}", cg.path().file_name().unwrap().to_string_lossy());
    let mut session = Session {
        server: format!("vmscope-test-cg-{}", std::process::id()),
        socket: None,
        pane_pid: None,
        workload: None,
    };
    start_top(&mut session);
    session.wait_for("the process table", Duration::from_secs(20), |s| {
        s.lines().any(is_header)
    });

    // 256 MiB written twice under a 64 MiB limit, over and over.
    let mut loop_cmd = cg.command("sh");
    loop_cmd
        .arg("-c")
        .arg(r#"i=0; while [ $i -lt 40 ]; do "$0" rewrite 65536 || exit; i=$((i+1)); done"#)
        .arg(testchild());
    session.workload = Some(spawn_group(loop_cmd));

    session.tmux(&["send-keys", "-t", "top", "c"]);
    let screen = session.wait_for(
        &format!("the cgroup table with a row for {path} whose SWOUT/s is above 0"),
        Duration::from_secs(30),
        |s| cgroup_row(s, &path).is_some_and(|r| cgroup_value(&r, "SWOUT/s") > Some(0.0)),
    );
    eprintln!("{TEST}: the pane after `c`:\n{screen}");
    let row = cgroup_row(&screen, &path).unwrap();
    let cell = |c: &str| row.iter().find(|(t, _)| *t == c).unwrap().1;
    // The limit the kernel holds for it, in the table's units.
    assert_eq!(cell("LIMIT"), "64M", "{row:?}");
    assert!(cgroup_value(&row, "PROCS") >= Some(1.0), "{row:?}");
    assert!(cgroup_value(&row, "FLT/s") > Some(0.0), "{row:?}");
    let psi = cell("PSI%");
    if cg.version() == 1 {
        assert_eq!(psi, "n/a", "v1 keeps no per-cgroup PSI: {row:?}");
    } else {
        assert!(psi.parse::<f64>().is_ok(), "{row:?}");
    }

    // Filtered down to it, Enter lists its processes: the test child.
    session.tmux(&["send-keys", "-t", "top", "/"]);
    session.tmux(&["send-keys", "-t", "top", "-l", &path]);
    session.tmux(&["send-keys", "-t", "top", "Enter"]);
    session.tmux(&["send-keys", "-t", "top", "Enter"]);
    let screen = session.wait_for(
        &format!("`processes in {path}` with a vmscope-testchi row"),
        Duration::from_secs(20),
        |s| s.contains(&format!("processes in {path} (")) && shows_swapping_child(s),
    );
    let lines: Vec<&str> = screen.lines().collect();
    let (_, rows) = table(&lines, false).unwrap();
    let in_cgroup = cg.pids();
    for r in &rows {
        assert!(
            r.comm == CHILD_COMM || r.comm == "sh",
            "a process outside the cgroup is listed: {r:?}\n{screen}"
        );
        // A row may be a child that has just ended.
        if r.comm == CHILD_COMM && !in_cgroup.contains(&r.pid) {
            eprintln!("{TEST}: pid {} has left the cgroup since", r.pid);
        }
    }

    // Esc goes back to the cgroup table; q quits with status 0.
    session.tmux(&["send-keys", "-t", "top", "Escape"]);
    session.wait_for("the cgroup table after Esc", Duration::from_secs(5), |s| {
        s.lines().any(|l| words(l) == CGROUP_COLUMNS)
    });
    session.tmux(&["send-keys", "-t", "top", "q"]);
    let screen = session.wait_for("EXIT= after q", Duration::from_secs(10), |s| {
        s.contains("EXIT=")
    });
    let (_, after) = screen.split_once("EXIT=").unwrap();
    assert_eq!(after.split_whitespace().next(), Some("0"), "{screen}");
}

#[test]
fn cgroup_rows_are_read_by_column() {
    let screen = "│CGROUP  PROCS FLT/s MAJ/s RCLM_ms/s SWIN/s SWOUT/s MADV/s SHOOT/s USAGE LIMIT PSI% │\n\
                  │/vmscope-test-1-0 1 70000 3 0 0 2500 0 0 63M 64M n/a │";
    let row = cgroup_row(screen, "/vmscope-test-1-0").unwrap();
    assert_eq!(cgroup_value(&row, "SWOUT/s"), Some(2500.0));
    assert_eq!(cgroup_value(&row, "PSI%"), None);
    assert!(cgroup_row(screen, "/other").is_none());
}

#[test]
fn rows_parse_against_the_header() {
    let header =
        words("  PID COMM            FLT/s  MAJ/s RCLM_ms/s SWIN/s SWOUT/s MADV/s SHOOT/s");
    assert!(is_header(&header.join(" ")));
    assert!(is_header(
        "│ PID  COMM  FLT/s▼ MAJ/s RCLM_ms/s SWIN/s SWOUT/s MADV/s SHOOT/s │"
    ));
    assert!(!is_header("PID COMM FLT/s SWIN/s"));
    let row = parse_row(&header, "  42 Web Content 1200.5 0 n/a 3 4 0 0")
        .unwrap()
        .unwrap();
    assert_eq!((row.pid, row.comm.as_str()), (42, "Web Content"));
    assert_eq!(row.get("FLT/s"), Some(1200.5));
    assert_eq!(row.get("RCLM_ms/s"), None);
    assert_eq!(row.rate("SWOUT/s"), 4.0);
    assert!(parse_row(&header, "vmscope top 12:00:00").is_none());
    assert!(parse_row(&header, "42 x 1 2 3").unwrap().is_err());
    assert!(parse_row(&header, "42 x 1k 0 0 0 0 0 0").unwrap().is_err());
    let out = "vmscope top a\nPID COMM FLT/s MAJ/s RCLM_ms/s SWIN/s SWOUT/s MADV/s SHOOT/s\n\
               1 init 0 0 0 0 0 0 0\n\nvmscope top b\n\
               PID COMM FLT/s MAJ/s RCLM_ms/s SWIN/s SWOUT/s MADV/s SHOOT/s\n";
    let snaps = snapshots(out);
    assert_eq!(snaps.len(), 2);
    assert_eq!(table(&snaps[0], true).unwrap().1.len(), 1);
    assert!(table(&snaps[1], true).unwrap().1.is_empty());
}
