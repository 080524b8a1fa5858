//! Running the wrapped command: fork it held at a gate until the probes
//! follow its pid, then release it, wait with rusage, and pass on signals.

use std::{
    ffi::CString,
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
}

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
}

/// Forks a child that waits for [`Gated::release`] and then execs `argv`
/// (resolved to `path`), optionally as `run_as = (uid, gid)`.
pub fn spawn_gated(
    path: &Path,
    argv: &[String],
    run_as: Option<(u32, u32)>,
    stdout: Option<OwnedFd>,
) -> anyhow::Result<Gated> {
    // Everything the child needs is allocated before fork: after fork in a
    // threaded process only async-signal-safe calls are allowed.
    let c_path =
        CString::new(path.as_os_str().as_bytes()).context("command path has a NUL byte")?;
    let c_argv: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .context("command argument has a NUL byte")?;
    let mut argv_ptrs: Vec<*const libc::c_char> = c_argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let c_env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut env_ptrs: Vec<*const libc::c_char> = c_env.iter().map(|a| a.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());

    // Capabilities vmscope holds as ambient ones (a service's
    // AmbientCapabilities=) would pass to the command through exec: it runs
    // as the caller, without them.
    let clear_ambient = !rustix::process::geteuid().is_root();
    let (gate_r, gate_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .context("creating the start gate pipe")?;
    // SAFETY: the child branch only calls async-signal-safe functions on
    // memory prepared above, and always ends in execve or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
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
            if let Some(fd) = &stdout
                && libc::dup2(fd.as_raw_fd(), 1) < 0
            {
                libc::_exit(exit::WRAPPER_FAILED.into());
            }
            if let Some((uid, gid)) = run_as
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0)
            {
                libc::_exit(exit::WRAPPER_FAILED.into());
            }
            if clear_ambient {
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
            libc::execve(c_path.as_ptr(), argv_ptrs.as_ptr(), env_ptrs.as_ptr());
            let code = if *libc::__errno_location() == libc::ENOENT {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            };
            libc::_exit(code.into());
        }
    }
    drop(gate_r);
    drop(stdout);
    Ok(Gated {
        pid: pid as u32,
        gate: gate_w,
    })
}

impl Gated {
    /// Lets the child exec. Returns the instant its wall clock starts.
    pub fn release(self) -> anyhow::Result<Instant> {
        let start = Instant::now();
        rustix::io::write(&self.gate, &[1]).context("releasing the wrapped command")?;
        Ok(start)
    }
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

/// Sends `sig` to `pid`; errors (already gone) are ignored.
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
        let start = g.release().expect("release");
        let r = wait(pid, start).expect("wait");
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
        let pid = g.pid;
        let r = wait(pid, g.release().expect("release")).expect("wait");
        assert_eq!((r.signal, r.exit_code), (Some(9), 137));
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
