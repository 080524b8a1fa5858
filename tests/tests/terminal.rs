//! `vmscope top` puts the terminal back on every way out, not only `q`:
//! SIGTERM, SIGHUP, a panic and a terminal that goes away. Each runs `top`
//! in a pane of a detached tmux server of its own; the pane's shell then
//! reports the exit status and the terminal's modes, and tmux tells whether
//! the pane is still on the alternate screen, the cursor hidden or a mouse
//! mode on. Every program `top` loaded must be gone from the kernel once it
//! has exited.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use vmscope_tests::{root_or_skip, vmscope_bin};

/// A detached tmux server of its own with one pane, `top`, killed with
/// whatever still runs in the pane when dropped.
struct Session {
    server: String,
    socket: Option<PathBuf>,
    /// The pane's shell, leader of the process group vmscope runs in.
    pane_pid: Option<i32>,
    dir: tempfile::TempDir,
}

impl Session {
    /// Starts `script` (run by /bin/sh) in a 200x50 pane.
    fn start(test: &str, script: impl FnOnce(&Path) -> String) -> Session {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Session {
            server: format!("vmscope-{test}-{}", std::process::id()),
            socket: None,
            pane_pid: None,
            dir,
        };
        let script = script(s.dir.path());
        let out = Command::new("tmux")
            .args(["-L", &s.server, "-f", "/dev/null"])
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
        let info = s.tmux(&["display-message", "-p", "#{pane_pid} #{socket_path}"]);
        let info = String::from_utf8_lossy(&info.stdout).trim().to_owned();
        if let Some((pid, socket)) = info.split_once(' ') {
            s.pane_pid = pid.parse().ok().filter(|&p: &i32| p > 1);
            s.socket = Some(socket.into());
        }
        s
    }

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

    /// A pane format such as `#{alternate_on}`.
    fn format(&self, f: &str) -> String {
        String::from_utf8_lossy(&self.tmux(&["display-message", "-p", "-t", "top", f]).stdout)
            .trim()
            .to_owned()
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

    /// Waits for `top`'s header, then returns vmscope's pid (written by the
    /// shell that exec'd it) and the ids of the eBPF programs it holds.
    fn wait_for_top(&self) -> (i32, Vec<u32>) {
        self.wait_for("top's header", Duration::from_secs(30), |s| {
            s.contains("vmscope top") && s.contains("attached")
        });
        let pid: i32 = std::fs::read_to_string(self.dir.path().join("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let progs = prog_ids(pid);
        assert!(
            !progs.is_empty(),
            "vmscope (pid {pid}) holds no eBPF program"
        );
        (pid, progs)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
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
    }
}

/// Whether tmux can be run; without it the test skips with a one-line
/// reason, except under VMSCOPE_REQUIRE_BPF=1, where it fails.
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

/// A shell command that runs `vmscope top -i 1s`, its pid written to
/// `dir/pid` (the shell that writes it execs vmscope).
fn top_command(dir: &Path) -> String {
    format!(
        "sh -c 'echo $$ >\"$1\"; exec \"$0\" top -i 1s' {} {}",
        shell_quote(&vmscope_bin().to_string_lossy()),
        shell_quote(&dir.join("pid").to_string_lossy()),
    )
}

/// The pane's script: `setup`, a marker line, `top`, then its status, the
/// terminal's modes and a closing marker; the pane then stays open for the
/// capture.
fn reporting_script(dir: &Path, setup: &str) -> String {
    format!(
        "{setup}echo BEFORE-TOP; {}; echo EXIT=$?; stty -a; echo END-OF-REPORT; sleep 60",
        top_command(dir)
    )
}

/// The ids of the eBPF programs among `pid`'s descriptors (from fdinfo:
/// program descriptors and links both name theirs).
fn prog_ids(pid: i32) -> Vec<u32> {
    let mut ids = Vec::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return ids;
    };
    for fd in fds.flatten() {
        let Ok(info) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        for line in info.lines() {
            if let Some(id) = line.strip_prefix("prog_id:")
                && let Ok(id) = id.trim().parse()
            {
                ids.push(id);
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Whether the kernel still has a program with this id.
fn prog_exists(id: u32) -> bool {
    // union bpf_attr for BPF_PROG_GET_FD_BY_ID: prog_id, next_id, open_flags.
    let attr: [u32; 3] = [id, 0, 0];
    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    // SAFETY: the attribute is a valid, fully initialized buffer of the
    // size passed; a returned descriptor is ours and closed at once.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_GET_FD_BY_ID,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if fd >= 0 {
        // SAFETY: the descriptor just returned, closed once.
        unsafe { libc::close(fd as i32) };
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT)
}

/// Fails unless every program in `ids` is gone from the kernel within 10 s
/// (the background detach keeps them about 2 s).
fn assert_programs_gone(ids: &[u32]) {
    let start = Instant::now();
    loop {
        let left: Vec<u32> = ids.iter().copied().filter(|&id| prog_exists(id)).collect();
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "eBPF programs {left:?} still loaded 10 s after vmscope top exited"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether `pid` is gone (or a zombie nobody has reaped yet).
fn gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))
    })
}

/// Waits for the shell's report after `top` ended, and checks it: the exit
/// status, cooked mode with echo, the main screen, the cursor shown and no
/// mouse mode. Returns the screen.
fn assert_restored(session: &Session, want_status: &str) -> String {
    let screen = session.wait_for(
        "EXIT= and the stty -a output after top ended",
        Duration::from_secs(15),
        |s| s.contains("END-OF-REPORT"),
    );
    let (_, after) = screen
        .split_once("EXIT=")
        .unwrap_or_else(|| panic!("no EXIT= line:\n{screen}"));
    let status = after.split_whitespace().next().unwrap_or("");
    assert_eq!(
        status, want_status,
        "vmscope top exited with {status}, not {want_status}:\n{screen}"
    );
    let modes: Vec<&str> = after.split_whitespace().collect();
    for mode in ["icanon", "echo", "isig", "icrnl", "opost"] {
        assert!(
            modes.contains(&mode) && !modes.contains(&format!("-{mode}").as_str()),
            "the terminal was left without {mode} (raw mode still on):\n{screen}"
        );
    }
    for (flag, want) in [
        ("alternate_on", "0"),
        ("cursor_flag", "1"),
        ("mouse_any_flag", "0"),
        ("mouse_sgr_flag", "0"),
    ] {
        let got = session.format(&format!("#{{{flag}}}"));
        assert_eq!(
            got, want,
            "tmux says {flag}={got} after top ended:\n{screen}"
        );
    }
    screen
}

/// `top` signalled with `sig` by pid: the shell that ran it sees `status`.
fn signalled(test: &str, sig: libc::c_int, status: &str) {
    if !root_or_skip(test) || !tmux_or_skip(test) {
        return;
    }
    let session = Session::start(test, |dir| reporting_script(dir, ""));
    let (pid, progs) = session.wait_for_top();
    // SAFETY: plain syscall to the vmscope process this test started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    let screen = assert_restored(&session, status);
    assert!(
        !screen.contains("panicked"),
        "vmscope panicked on the signal:\n{screen}"
    );
    assert_programs_gone(&progs);
}

#[test]
fn sigterm_restores_the_terminal_and_exits_143() {
    signalled(
        "sigterm_restores_the_terminal_and_exits_143",
        libc::SIGTERM,
        "143",
    );
}

#[test]
fn sighup_restores_the_terminal_and_exits_129() {
    signalled(
        "sighup_restores_the_terminal_and_exits_129",
        libc::SIGHUP,
        "129",
    );
}

#[test]
fn a_panic_restores_the_terminal_first_then_shows_its_message() {
    const TEST: &str = "a_panic_restores_the_terminal_first_then_shows_its_message";
    if !root_or_skip(TEST) || !tmux_or_skip(TEST) {
        return;
    }
    // The test hook: panic on the third sample, so the screen is up first.
    let session = Session::start(TEST, |dir| {
        reporting_script(dir, "export VMSCOPE_TEST_PANIC=3; ")
    });
    let (_, progs) = session.wait_for_top();
    let screen = assert_restored(&session, "101");
    // In order on the main screen: the marker printed before top, the
    // panic's location and message, then the shell's report. A second
    // "leave the alternate screen" after the message would move the cursor
    // back to where top started and the report would overwrite it.
    let lines: Vec<&str> = screen.lines().collect();
    let at = |what: &str| {
        lines
            .iter()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no line with {what:?} on the main screen:\n{screen}"))
    };
    let before = at("BEFORE-TOP");
    let panicked = at("panicked at");
    let message = at("VMSCOPE_TEST_PANIC");
    let exit = at("EXIT=");
    assert!(
        before < panicked && panicked <= message && message < exit,
        "the panic message is not intact between the marker and the report \
         (lines {before}, {panicked}, {message}, {exit}):\n{screen}"
    );
    assert_programs_gone(&progs);
}

#[test]
fn a_terminal_that_goes_away_ends_top_without_a_hang_or_a_panic() {
    const TEST: &str = "a_terminal_that_goes_away_ends_top_without_a_hang_or_a_panic";
    if !root_or_skip(TEST) || !tmux_or_skip(TEST) {
        return;
    }
    // The pane's shell dies of the hangup; the inner one ignores it, so it
    // outlives the terminal and writes top's status to a file. vmscope
    // installs its own SIGHUP handler, and gets the hangup (from the kernel,
    // as the terminal's foreground group) together with a terminal whose
    // reads and writes fail.
    let session = Session::start(TEST, |dir| {
        let status = shell_quote(&dir.join("status").to_string_lossy());
        format!(
            "sh -c {}",
            shell_quote(&format!(
                "trap \"\" HUP; {}; echo $? >{status}.tmp; mv {status}.tmp {status}",
                top_command(dir)
            ))
        )
    });
    let (pid, progs) = session.wait_for_top();
    session.tmux(&["kill-pane", "-t", "top"]);
    let status_file = session.dir.path().join("status");
    let start = Instant::now();
    while !status_file.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "vmscope top (pid {pid}, gone: {}) has not exited 15 s after its terminal went away",
            gone(pid)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = std::fs::read_to_string(&status_file).unwrap();
    assert_eq!(
        status.trim(),
        "129",
        "vmscope top exited with {} after its terminal went away (101 is a panic)",
        status.trim()
    );
    assert_programs_gone(&progs);
}
