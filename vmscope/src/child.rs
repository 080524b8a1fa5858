//! Running the wrapped command: fork it held at a gate until the probes
//! follow its pid, then release it, wait with rusage, and pass on signals.

use std::{
    ffi::{CString, OsString},
    os::{
        fd::{AsRawFd as _, OwnedFd},
        unix::ffi::OsStrExt as _,
    },
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::exit;

/// The command's resource usage, like `/usr/bin/time -v`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rusage {
    pub wall_ns: u64,
    pub user_ns: u64,
    pub sys_ns: u64,
    /// (user + sys) / wall, in percent; may exceed 100 with several threads.
    pub cpu_percent: f64,
    pub maxrss_bytes: u64,
    pub minflt: u64,
    pub majflt: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
}

/// How the command ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChildReport {
    pub pid: u32,
    /// What vmscope exits with: the command's code, or 128+N for signal N.
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub rusage: Rusage,
    /// With `record --keep-output` (and in `bench` runs): the end of what
    /// the command wrote to its standard output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<CapturedOutput>,
    /// The signals vmscope sent the command, in order: forwarded ones, and
    /// its own when `-d` ran out or vmscope failed (SIGTERM, then SIGKILL to
    /// the command's tree if it still runs 2 s later).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals_sent: Vec<SignalSent>,
}

/// One signal vmscope sent the wrapped command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SignalSent {
    /// For example "SIGTERM".
    pub signal: String,
    /// "forwarded" (vmscope received it), "duration" (`-d` ran out),
    /// "error" (vmscope failed mid-run) or "grace" (still running 2 s
    /// after vmscope's SIGTERM).
    pub reason: String,
    /// When, since the command was released.
    pub after_ns: u64,
}

/// How long a command has to exit after vmscope's own SIGTERM before its
/// tree is sent SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// The last [`TAIL_MAX`] bytes of the command's standard output.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CapturedOutput {
    /// Whole lines only (lossy UTF-8).
    pub tail: String,
    /// Earlier output was dropped.
    pub truncated: bool,
}

/// How much of the command's output a recording keeps.
pub const TAIL_MAX: usize = 64 << 10;

/// A pipe between the command's standard output and vmscope's own stdout
/// (or stderr), keeping the end of what passes.
pub struct Tap {
    tail: std::sync::Arc<std::sync::Mutex<(Vec<u8>, bool)>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Tap {
    /// Starts the copying thread. Returns the write end, for the command.
    pub fn start(to_stderr: bool) -> anyhow::Result<(OwnedFd, Tap)> {
        use std::io::{Read as _, Write as _};
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .context("creating the output pipe")?;
        let tail = std::sync::Arc::new(std::sync::Mutex::new((Vec::new(), false)));
        let (tx, done) = std::sync::mpsc::channel();
        let keep = std::sync::Arc::clone(&tail);
        std::thread::Builder::new()
            .name("output".into())
            .spawn(move || {
                let mut r = std::fs::File::from(r);
                let mut buf = vec![0u8; 16 << 10];
                loop {
                    let n = match r.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    };
                    // Passing through is best effort: a closed stdout does
                    // not stop the keeping.
                    let _ = if to_stderr {
                        std::io::stderr().write_all(&buf[..n])
                    } else {
                        std::io::stdout().write_all(&buf[..n])
                    };
                    let mut t = keep
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    t.0.extend_from_slice(&buf[..n]);
                    if t.0.len() > TAIL_MAX {
                        let cut = t.0.len() - TAIL_MAX;
                        t.0.drain(..cut);
                        t.1 = true;
                    }
                }
                let _ = tx.send(());
            })
            .context("starting the output thread")?;
        Ok((w, Tap { tail, done }))
    }

    /// What was kept, once the pipe has closed or `grace` has passed (a
    /// background process may hold the pipe open forever).
    pub fn finish(self, grace: Duration) -> CapturedOutput {
        let _ = self.done.recv_timeout(grace);
        let t = self
            .tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut bytes: &[u8] = &t.0;
        if t.1 {
            // Drop the partial first line.
            if let Some(i) = bytes.iter().position(|&b| b == b'\n') {
                bytes = &bytes[i + 1..];
            }
        }
        CapturedOutput {
            tail: String::from_utf8_lossy(bytes).into_owned(),
            truncated: t.1,
        }
    }
}

/// Finds `name` like a shell would: as a path if it has a slash, else in PATH.
/// Fails with exit code 127 (not found) or 126 (not executable).
pub fn resolve(name: &str) -> anyhow::Result<PathBuf> {
    let candidates: Vec<PathBuf> = if name.contains('/') {
        vec![PathBuf::from(name)]
    } else {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join(name)).collect())
            .unwrap_or_default()
    };
    let mut found_not_exec = None;
    for c in candidates {
        if c.is_file() {
            if rustix::fs::access(&c, rustix::fs::Access::EXEC_OK).is_ok() {
                return Ok(c);
            }
            found_not_exec.get_or_insert(c);
        }
    }
    match found_not_exec {
        Some(p) => Err(exit::failure(
            exit::CANNOT_EXECUTE,
            format!("{}: permission denied (not executable)", p.display()),
        )),
        None if name.is_empty() => Err(exit::failure(exit::NOT_FOUND, "empty command")),
        None => Err(exit::failure(
            exit::NOT_FOUND,
            format!("{name}: command not found"),
        )),
    }
}

/// A forked child waiting at the gate, not yet exec'd.
pub struct Gated {
    pub pid: u32,
    gate: OwnedFd,
    handle: Handle,
}

/// Forks a child that waits for [`Gated::release`] and then execs `argv`
/// (resolved to `path`), optionally as `run_as = (uid, gid)`.
pub fn spawn_gated(
    path: &Path,
    argv: &[String],
    run_as: Option<(u32, u32)>,
    stdout: Option<OwnedFd>,
) -> anyhow::Result<Gated> {
    let plan = ExecPlan::new(path, argv, run_as)?;
    let (gate_r, gate_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .context("creating the start gate pipe")?;
    // SAFETY: the child branch only calls async-signal-safe functions on
    // memory prepared above, and always ends in execve or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        // SAFETY: this is the child of the fork above.
        unsafe { exec_child(&plan, &gate_r, &gate_w, stdout.as_ref()) }
    }
    drop(gate_r);
    drop(stdout);
    // Our own unreaped child: its pid cannot be reused yet, so the pidfd
    // is certainly this process. Kernels before 5.3 have none.
    let pidfd = rustix::process::Pid::from_raw(pid)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    Ok(Gated {
        pid: pid as u32,
        gate: gate_w,
        handle: Handle {
            pid: pid as u32,
            pidfd: pidfd.map(std::sync::Arc::new),
            gone: std::sync::Arc::new(std::sync::Mutex::new(false)),
        },
    })
}

/// Everything the child needs between fork and exec, allocated before
/// fork: after fork in a threaded process only async-signal-safe calls are
/// allowed.
struct ExecPlan {
    path: CString,
    /// Owns the strings `argv` points into.
    _args: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    /// Owns the strings `envp` points into.
    _env: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    /// Capabilities vmscope holds as ambient ones (a service's
    /// AmbientCapabilities=) would pass to the command through exec: it
    /// runs as the caller, without them.
    clear_ambient: bool,
    /// The caller's own limits (vmscope raised RLIMIT_MEMLOCK for its maps).
    limits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    run_as: Option<(u32, u32)>,
    /// When dropping to the sudo caller, that user's groups as a login
    /// shell would have them.
    groups: Vec<libc::gid_t>,
}

impl ExecPlan {
    fn new(path: &Path, argv: &[String], run_as: Option<(u32, u32)>) -> anyhow::Result<Self> {
        let c_path =
            CString::new(path.as_os_str().as_bytes()).context("command path has a NUL byte")?;
        let c_argv: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .context("command argument has a NUL byte")?;
        let env = match run_as {
            Some((uid, _)) => caller_env(std::env::vars_os().collect(), user_of(uid)),
            None => std::env::vars_os().collect(),
        };
        let c_env: Vec<CString> = env
            .into_iter()
            .filter_map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).ok()
            })
            .collect();
        let null_terminated = |strings: &[CString]| {
            let mut ptrs: Vec<*const libc::c_char> = strings.iter().map(|a| a.as_ptr()).collect();
            ptrs.push(std::ptr::null());
            ptrs
        };
        Ok(Self {
            path: c_path,
            argv: null_terminated(&c_argv),
            _args: c_argv,
            envp: null_terminated(&c_env),
            _env: c_env,
            clear_ambient: !rustix::process::geteuid().is_root(),
            limits: ORIGINAL_LIMITS.get().cloned().unwrap_or_default(),
            run_as,
            groups: match run_as {
                Some((uid, gid)) => groups_of(uid, gid),
                None => Vec::new(),
            },
        })
    }
}

/// The forked child: waits at the gate, takes the caller's limits,
/// identity and signal defaults, and execs the command. Never returns.
///
/// # Safety
///
/// Only in the child of `fork`, which may call only async-signal-safe
/// functions: this one allocates nothing.
unsafe fn exec_child(
    plan: &ExecPlan,
    gate_r: &OwnedFd,
    gate_w: &OwnedFd,
    stdout: Option<&OwnedFd>,
) -> ! {
    // SAFETY: libc calls on memory prepared before fork (see above).
    unsafe {
        libc::close(gate_w.as_raw_fd());
        let mut b = 0u8;
        loop {
            let n = libc::read(gate_r.as_raw_fd(), (&raw mut b).cast(), 1);
            if n == 1 {
                break;
            }
            // EOF: vmscope died before releasing us; do not run unobserved.
            if n == 0 || *libc::__errno_location() != libc::EINTR {
                libc::_exit(exit::WRAPPER_FAILED.into());
            }
        }
        libc::close(gate_r.as_raw_fd());
        if let Some(fd) = stdout
            && libc::dup2(fd.as_raw_fd(), 1) < 0
        {
            libc::_exit(exit::WRAPPER_FAILED.into());
        }
        // Rust ignores SIGPIPE in vmscope; the command gets the default,
        // and no signal blocked.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        become_caller(plan);
        libc::execve(plan.path.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
        let code = if *libc::__errno_location() == libc::ENOENT {
            exit::NOT_FOUND
        } else {
            exit::CANNOT_EXECUTE
        };
        libc::_exit(code.into())
    }
}

/// Gives the child the caller's limits and identity and drops ambient
/// capabilities; exits the child when it cannot.
///
/// # Safety
///
/// As [`exec_child`]: only in the forked child.
unsafe fn become_caller(plan: &ExecPlan) {
    // SAFETY: libc calls on memory prepared before fork.
    unsafe {
        for (resource, lim) in &plan.limits {
            if libc::setrlimit(*resource, lim) != 0 {
                libc::_exit(exit::WRAPPER_FAILED.into());
            }
        }
        if let Some((uid, gid)) = plan.run_as
            && (libc::setgroups(plan.groups.len(), plan.groups.as_ptr()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0)
        {
            libc::_exit(exit::WRAPPER_FAILED.into());
        }
        if plan.clear_ambient {
            // Fails only on kernels without ambient capabilities (< 4.3),
            // which have none to pass on.
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
        }
    }
}

impl Gated {
    /// Lets the child exec. Returns the instant its wall clock starts and
    /// the handle to signal and wait for it.
    pub fn release(self) -> anyhow::Result<(Instant, Handle)> {
        let start = Instant::now();
        rustix::io::write(&self.gate, &[1]).context("releasing the wrapped command")?;
        Ok((start, self.handle))
    }

    /// The handle, for a child that may still be waiting at the gate.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }
}

/// Signals and waits for the wrapped command. Signals go through a pidfd
/// (or, before Linux 5.3, by pid while the process is known unreaped), so
/// a reused pid never receives one.
#[derive(Clone)]
pub struct Handle {
    pub pid: u32,
    pidfd: Option<std::sync::Arc<OwnedFd>>,
    /// Set, under the lock, once the child has exited and is about to be
    /// reaped: no signal is sent by pid after that.
    gone: std::sync::Arc<std::sync::Mutex<bool>>,
}

impl Handle {
    /// Sends `sig`. False when the command is already gone.
    pub fn signal(&self, sig: i32) -> bool {
        let gone = self
            .gone
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *gone {
            return false;
        }
        match &self.pidfd {
            Some(fd) => pidfd_signal(fd, sig),
            // SAFETY: plain syscall; the pid is our unreaped child (`gone`
            // is false under the lock), so it cannot have been reused.
            None => unsafe { libc::kill(self.pid as i32, sig) == 0 },
        }
    }

    /// SIGKILL to the command and every descendant it has now, each
    /// through its own pidfd (checked to be the process listed), then to
    /// the command. Returns how many descendants were killed.
    pub fn kill_tree(&self) -> usize {
        // The descendants are found and held (pidfds) first, then the
        // command is killed, then they are: killed first, they could let a
        // command waiting for them exit on its own before its SIGKILL.
        let mut held = Vec::new();
        for (pid, start) in descendants(self.pid) {
            let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
                continue;
            };
            let Ok(fd) = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())
            else {
                continue;
            };
            // The pid could have been reused between the listing and the
            // open: the pidfd is the listed process only if it started then.
            if proc_stat(pid).map(|s| s.2) != Some(start) {
                continue;
            }
            held.push(fd);
        }
        self.signal(libc::SIGKILL);
        held.iter()
            .filter(|fd| pidfd_signal(fd, libc::SIGKILL))
            .count()
    }

    /// Waits for the command (blocking) and collects its rusage.
    pub fn wait(&self, started: Instant) -> anyhow::Result<ChildReport> {
        let pid = self.pid;
        // First wait without reaping: the pid stays ours while `gone` is set.
        loop {
            // SAFETY: zeroed siginfo is a valid value for waitid to fill.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointer to a local.
            let r =
                unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
            if r == 0 {
                break;
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err).with_context(|| format!("waiting for pid {pid}"));
            }
        }
        *self
            .gone
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        wait(pid, started)
    }
}

fn pidfd_signal(fd: &OwnedFd, sig: i32) -> bool {
    // SAFETY: plain syscall on a pidfd we own, with no siginfo.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        ) == 0
    }
}

/// The original limits the wrapped command gets back.
static ORIGINAL_LIMITS: std::sync::OnceLock<Vec<(libc::__rlimit_resource_t, libc::rlimit)>> =
    std::sync::OnceLock::new();

/// Saves vmscope's limits as the caller gave them (RLIMIT_MEMLOCK, which
/// loading raises, and RLIMIT_NOFILE), so the wrapped command runs with
/// those. Call it before anything raises them; later calls keep the first.
pub fn save_original_limits() {
    ORIGINAL_LIMITS.get_or_init(|| {
        [libc::RLIMIT_MEMLOCK, libc::RLIMIT_NOFILE]
            .into_iter()
            .filter_map(|r| {
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                // SAFETY: valid pointer to a local.
                (unsafe { libc::getrlimit(r, &mut lim) } == 0).then_some((r, lim))
            })
            .collect()
    });
}

/// A user's name and home directory, from the passwd database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: OsString,
    pub home: OsString,
}

/// `uid`'s passwd entry, if it has one.
pub fn user_of(uid: u32) -> Option<User> {
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: zeroed passwd is a valid value for getpwuid_r to fill.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid pointers to locals; buf outlives the use of pw's fields.
    let r = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
    if r != 0 || found.is_null() || pw.pw_name.is_null() || pw.pw_dir.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated strings in buf, which is alive here.
    let (name, home) = unsafe {
        (
            std::ffi::CStr::from_ptr(pw.pw_name),
            std::ffi::CStr::from_ptr(pw.pw_dir),
        )
    };
    Some(User {
        name: std::ffi::OsStr::from_bytes(name.to_bytes()).to_owned(),
        home: std::ffi::OsStr::from_bytes(home.to_bytes()).to_owned(),
    })
}

/// The environment of a command run as the sudo caller: sudo left root's
/// `HOME`, `USER` and `LOGNAME` (sudo's defaults), so they are set to the
/// caller's, as a login would set them. A caller with no passwd entry gets
/// `USER` and `LOGNAME` from `SUDO_USER` (which sudo sets), and no `HOME`
/// rather than root's.
pub fn caller_env(env: Vec<(OsString, OsString)>, user: Option<User>) -> Vec<(OsString, OsString)> {
    const SET: [&str; 3] = ["HOME", "USER", "LOGNAME"];
    let sudo_user = env
        .iter()
        .find(|(k, _)| k == "SUDO_USER")
        .map(|(_, v)| v.clone());
    let mut out: Vec<(OsString, OsString)> = env
        .into_iter()
        .filter(|(k, _)| !SET.iter().any(|s| k == s))
        .collect();
    let (name, home) = match user {
        Some(u) => (Some(u.name), Some(u.home)),
        None => (sudo_user, None),
    };
    if let Some(home) = home {
        out.push(("HOME".into(), home));
    }
    if let Some(name) = name {
        out.push(("USER".into(), name.clone()));
        out.push(("LOGNAME".into(), name));
    }
    out
}

/// The groups `uid` has at login (its supplementary groups and `gid`), as
/// `initgroups` would set them; just `gid` for a uid with no passwd entry.
pub fn groups_of(uid: u32, gid: u32) -> Vec<libc::gid_t> {
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: zeroed passwd is a valid value for getpwuid_r to fill.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid pointers to locals; buf outlives the use of pw's fields.
    let r = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
    if r != 0 || found.is_null() {
        return vec![gid];
    }
    let mut n: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let want = n;
        // SAFETY: pw_name is a NUL-terminated string in buf; groups holds n.
        let r = unsafe { libc::getgrouplist(pw.pw_name, gid, groups.as_mut_ptr(), &mut n) };
        if r >= 0 {
            groups.truncate(n.max(0) as usize);
            return groups;
        }
        if n <= want {
            n = want.saturating_mul(2);
        }
        if n > 1 << 16 {
            return vec![gid];
        }
    }
}

/// `(pid, ppid, start time)` from /proc/PID/stat.
fn proc_stat(pid: u32) -> Option<(u32, u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the
    // last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state(3) ppid(4) ... starttime(22), so indices 0, 1, 19.
    Some((pid, f.get(1)?.parse().ok()?, f.get(19)?.parse().ok()?))
}

/// Every live descendant of `root`, with its start time.
fn descendants(root: u32) -> Vec<(u32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let all: Vec<(u32, u32, u64)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(proc_stat)
        .collect();
    let mut out: Vec<(u32, u64)> = Vec::new();
    let mut parents = vec![root];
    while let Some(p) = parents.pop() {
        for &(pid, ppid, start) in &all {
            if ppid == p && pid != root && !out.iter().any(|&(q, _)| q == pid) {
                out.push((pid, start));
                parents.push(pid);
            }
        }
    }
    out
}

/// A signal's name ("SIGTERM"), or "signal N".
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {sig}"),
    };
    name.into()
}

/// Waits for `pid` (blocking) and collects its rusage.
pub fn wait(pid: u32, started: Instant) -> anyhow::Result<ChildReport> {
    let mut status = 0i32;
    // SAFETY: zeroed rusage is a valid value to be overwritten by wait4.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to locals.
        let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
        if r == pid as i32 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).with_context(|| format!("waiting for pid {pid}"));
        }
    }
    let wall = started.elapsed();
    let (exit_status, signal, exit_code) = if libc::WIFEXITED(status) {
        let c = libc::WEXITSTATUS(status);
        (Some(c), None, c)
    } else if libc::WIFSIGNALED(status) {
        let s = libc::WTERMSIG(status);
        (None, Some(s), 128 + s)
    } else {
        (None, None, exit::WRAPPER_FAILED.into())
    };
    Ok(ChildReport {
        pid,
        exit_code,
        exit_status,
        signal,
        rusage: rusage_from(&ru, wall),
        output: None,
        signals_sent: Vec::new(),
    })
}

fn timeval_ns(t: libc::timeval) -> u64 {
    (t.tv_sec.max(0) as u64) * 1_000_000_000 + (t.tv_usec.max(0) as u64) * 1_000
}

fn rusage_from(ru: &libc::rusage, wall: Duration) -> Rusage {
    let user_ns = timeval_ns(ru.ru_utime);
    let sys_ns = timeval_ns(ru.ru_stime);
    let wall_ns = u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX);
    Rusage {
        wall_ns,
        user_ns,
        sys_ns,
        cpu_percent: if wall_ns == 0 {
            0.0
        } else {
            (user_ns + sys_ns) as f64 * 100.0 / wall_ns as f64
        },
        // Linux reports ru_maxrss in KiB.
        maxrss_bytes: (ru.ru_maxrss.max(0) as u64) * 1024,
        minflt: ru.ru_minflt.max(0) as u64,
        majflt: ru.ru_majflt.max(0) as u64,
        nvcsw: ru.ru_nvcsw.max(0) as u64,
        nivcsw: ru.ru_nivcsw.max(0) as u64,
    }
}

/// Sends `sig` to `pid` by number; errors (already gone) are ignored. Only
/// for a process known not to be reaped yet: the wrapped command is
/// signalled through [`Handle::signal`], which cannot reach a reused pid.
pub fn forward_signal(pid: u32, sig: i32) {
    // SAFETY: plain syscall.
    unsafe { libc::kill(pid as i32, sig) };
}

/// The user a wrapped command runs as: the sudo caller, unless `as_root`.
pub fn run_as_from_sudo(as_root: bool) -> Option<(u32, u32)> {
    if as_root || !rustix::process::geteuid().is_root() {
        return None;
    }
    let uid = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    (uid != 0).then_some((uid, gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    /// Under sudo the command had root's HOME, USER and LOGNAME: they are
    /// the caller's, the rest of the environment as it was.
    #[test]
    fn the_callers_home_user_and_logname_replace_roots() {
        let root = env(&[
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/root"),
            ("USER", "root"),
            ("LOGNAME", "root"),
            ("SUDO_USER", "alice"),
        ]);
        let alice = User {
            name: "alice".into(),
            home: "/home/alice".into(),
        };
        let mut got = caller_env(root.clone(), Some(alice));
        got.sort();
        let mut want = env(&[
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/alice"),
            ("USER", "alice"),
            ("LOGNAME", "alice"),
            ("SUDO_USER", "alice"),
        ]);
        want.sort();
        assert_eq!(got, want);
        // No passwd entry: SUDO_USER's name, and no HOME rather than root's.
        let mut got = caller_env(root, None);
        got.sort();
        let mut want = env(&[
            ("PATH", "/usr/bin:/bin"),
            ("USER", "alice"),
            ("LOGNAME", "alice"),
            ("SUDO_USER", "alice"),
        ]);
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn users_come_from_the_passwd_database() {
        let root = user_of(0).expect("root has a passwd entry");
        assert_eq!(root.name, "root");
        assert_eq!(user_of(u32::MAX - 7), None);
    }

    #[test]
    fn missing_command_exits_127() {
        let e = resolve("vmscope-no-such-command-xyz").expect_err("missing");
        assert_eq!(exit::code_of(&e, 0), exit::NOT_FOUND);
        assert!(exit::message_of(&e).contains("command not found"));
    }

    #[test]
    fn commands_resolve_through_path_and_by_path() {
        assert!(resolve("sh").expect("sh").is_absolute());
        assert_eq!(resolve("/bin/sh").expect("path"), PathBuf::from("/bin/sh"));
    }

    #[test]
    fn non_executable_file_exits_126() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("plain");
        std::fs::write(&f, "x").expect("write");
        let e = resolve(f.to_str().expect("utf8")).expect_err("not exec");
        assert_eq!(exit::code_of(&e, 0), exit::CANNOT_EXECUTE);
    }

    #[test]
    fn gated_child_runs_only_after_release_and_reports_status() {
        let sh = resolve("sh").expect("sh");
        let g = spawn_gated(
            &sh,
            &["sh".into(), "-c".into(), "exit 3".into()],
            None,
            None,
        )
        .expect("fork");
        let pid = g.pid;
        // Still held at the gate: not exited.
        std::thread::sleep(Duration::from_millis(50));
        let mut st = 0;
        // SAFETY: non-blocking wait on our own child.
        assert_eq!(
            unsafe { libc::waitpid(pid as i32, &mut st, libc::WNOHANG) },
            0
        );
        let (start, h) = g.release().expect("release");
        let r = h.wait(start).expect("wait");
        assert_eq!((r.exit_status, r.exit_code), (Some(3), 3));
    }

    #[test]
    fn killed_child_reports_128_plus_signal() {
        let sh = resolve("sh").expect("sh");
        let g = spawn_gated(
            &sh,
            &["sh".into(), "-c".into(), "kill -9 $$".into()],
            None,
            None,
        )
        .expect("fork");
        let (start, h) = g.release().expect("release");
        let r = h.wait(start).expect("wait");
        assert_eq!((r.signal, r.exit_code), (Some(9), 137));
    }

    #[test]
    fn no_signal_reaches_a_reaped_pid() {
        let sh = resolve("sh").expect("sh");
        let g = spawn_gated(
            &sh,
            &["sh".into(), "-c".into(), "exit 0".into()],
            None,
            None,
        )
        .expect("fork");
        let (start, h) = g.release().expect("release");
        assert_eq!(h.wait(start).expect("wait").exit_code, 0);
        assert!(!h.signal(libc::SIGTERM), "signal sent after the reap");
    }

    #[test]
    fn kill_tree_takes_descendants_that_ignore_term() {
        let sh = resolve("sh").expect("sh");
        let g = spawn_gated(
            &sh,
            &[
                "sh".into(),
                "-c".into(),
                "trap '' TERM; sleep 60 & sleep 60 & wait".into(),
            ],
            None,
            None,
        )
        .expect("fork");
        let (start, h) = g.release().expect("release");
        let t0 = Instant::now();
        while descendants(h.pid).len() < 2 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let kids = descendants(h.pid);
        assert_eq!(kids.len(), 2, "{kids:?}");
        assert!(h.signal(libc::SIGTERM));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(h.kill_tree(), 2);
        let r = h.wait(start).expect("wait");
        assert_eq!(r.signal, Some(libc::SIGKILL));
        // Each is gone, or a zombie about to be reaped by init.
        let alive = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|t| !t.contains(") Z "))
        };
        let t0 = Instant::now();
        while kids.iter().any(|&(p, _)| alive(p)) && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !kids.iter().any(|&(p, _)| alive(p)),
            "{kids:?} still running"
        );
    }

    #[test]
    fn root_has_its_own_groups() {
        let g = groups_of(0, 0);
        assert!(g.contains(&0), "{g:?}");
        assert_eq!(groups_of(4_000_000_000, 7), vec![7]);
    }

    #[test]
    fn dropped_gate_never_runs_the_command() {
        let sh = resolve("sh").expect("sh");
        let g = spawn_gated(
            &sh,
            &["sh".into(), "-c".into(), "exit 0".into()],
            None,
            None,
        )
        .expect("fork");
        let pid = g.pid;
        drop(g);
        let r = wait(pid, Instant::now()).expect("wait");
        assert_eq!(r.exit_code, i32::from(exit::WRAPPER_FAILED));
    }
}
