//! `cargo xtask bench top`: what `vmscope top` costs in CPU while 500
//! processes fault steadily (`vmscope-testchild churn`).
//!
//! It measures `vmscope top --batch`, which needs no terminal: batch mode
//! runs the same collector and model as the interactive UI and only prints
//! its snapshots as text instead of drawing them, so its CPU time is the
//! UI's minus the drawing.

use std::{
    ffi::OsString,
    os::unix::process::{CommandExt as _, ExitStatusExt as _},
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    process::{self, Exit, say},
    tasks,
    workspace::Workspace,
};

/// Exit code when not root (as `run` uses when it cannot get root).
const EXIT_NEED_ROOT: u8 = 77;
/// Faulting processes running while vmscope top is measured.
const PROCESSES: usize = 500;
/// How long the workload runs before vmscope starts.
const SETTLE: Duration = Duration::from_secs(2);
/// Snapshots taken, one per second.
const SNAPSHOTS: u32 = 30;
/// The interval between snapshots.
const INTERVAL: Duration = Duration::from_secs(1);
/// How long each churn process would run: far longer than the measurement
/// even on a starved machine. They are killed at the end, and die with this
/// process (PR_SET_PDEATHSIG) if it is killed first.
const CHURN_MILLIS: u64 = 3_600_000;
/// Wall time beyond the snapshots' nominal duration (start-up included)
/// past which vmscope is taken to have waited for a CPU.
const STARVED: f64 = 1.25;

pub fn bench_top(ws: &mut Workspace, args: &[OsString]) -> Result<()> {
    if !args.is_empty() {
        bail!("bench top takes no arguments (got {args:?})");
    }
    if process::effective_uid()? != 0 {
        say!(
            "bench top: vmscope top and its 500 workload processes must run as root; run `cargo xtask bench top` as root"
        );
        return Err(Exit(EXIT_NEED_ROOT).into());
    }
    tasks::build(ws)?;
    let mut cmd = ws.cargo([
        "build",
        "--release",
        "-p",
        "vmscope-tests",
        "--bin",
        "vmscope-testchild",
    ]);
    say!("bench top: {}", process::show(&cmd));
    process::run(&mut cmd)?;
    let release = ws.target_dir()?.join("release");
    let vmscope = release.join("vmscope");
    let testchild = release.join("vmscope-testchild");

    let mut workload = Workload(Vec::with_capacity(PROCESSES));
    workload.start(&testchild)?;
    say!(
        "bench top: {PROCESSES} `vmscope-testchild churn {CHURN_MILLIS}` started; measuring in {} s",
        SETTLE.as_secs()
    );
    std::thread::sleep(SETTLE);
    workload.check_alive()?;

    let m = measure(&vmscope)?;
    let cpu = m.user + m.sys;
    let wall = m.wall.as_secs_f64();
    let nominal = f64::from(SNAPSHOTS) * INTERVAL.as_secs_f64();
    println!(
        "vmscope top: {:.2}% of one core over {wall:.1} s with {PROCESSES} faulting processes (goal < 2%)",
        100.0 * cpu / wall
    );
    println!(
        "  user {:.3} s, sys {:.3} s (`vmscope top --batch -n {SNAPSHOTS} -i {}s`)",
        m.user,
        m.sys,
        INTERVAL.as_secs()
    );
    if wall > nominal * STARVED {
        // On a saturated machine vmscope waits for a CPU between its slices,
        // so its wall time stretches and CPU/wall understates what it costs.
        println!(
            "  warning: {SNAPSHOTS} snapshots at {}s took {wall:.1} s: the machine is saturated \
             and vmscope was kept waiting; per {}s of snapshots it used {:.2}% of one core",
            INTERVAL.as_secs(),
            INTERVAL.as_secs(),
            100.0 * cpu / nominal
        );
    }
    workload.check_alive()?;
    Ok(())
}

/// The churn processes; all killed and reaped when dropped, on success and
/// on error alike.
struct Workload(Vec<Child>);

impl Workload {
    fn start(&mut self, testchild: &Path) -> Result<()> {
        for i in 0..PROCESSES {
            let mut cmd = Command::new(testchild);
            cmd.args(["churn", &CHURN_MILLIS.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            die_with_parent(&mut cmd, libc::SIGKILL);
            let child = cmd
                .spawn()
                .with_context(|| format!("starting workload process {} of {PROCESSES}", i + 1))?;
            self.0.push(child);
        }
        Ok(())
    }

    /// Fails if any churn process has already ended.
    fn check_alive(&mut self) -> Result<()> {
        for c in &mut self.0 {
            if let Some(st) = c.try_wait()? {
                bail!(
                    "workload process {} ended early ({})",
                    c.id(),
                    process::describe(st)
                );
            }
        }
        Ok(())
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// Has the kernel send `sig` to the process `cmd` starts when this process
/// dies, so nothing is left running if xtask is killed.
fn die_with_parent(cmd: &mut Command, sig: libc::c_int) {
    // SAFETY: the hook makes one async-signal-safe call and touches nothing
    // shared with the parent.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

struct Measurement {
    wall: Duration,
    user: f64,
    sys: f64,
}

/// Runs `vmscope top --batch` to the end and returns its wall time and its
/// own CPU time, from the rusage `wait4` reports for it.
fn measure(vmscope: &Path) -> Result<Measurement> {
    let mut cmd = Command::new(vmscope);
    let interval = format!("{}s", INTERVAL.as_secs());
    cmd.args([
        "top",
        "--batch",
        "-n",
        &SNAPSHOTS.to_string(),
        "-i",
        &interval,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    die_with_parent(&mut cmd, libc::SIGTERM);
    say!("bench top: {} >/dev/null", process::show(&cmd));
    let start = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("could not start `{}`", process::show(&cmd)))?;
    let pid = child.id() as libc::pid_t;
    // Reaped here rather than through `child`, to get its rusage.
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child; the pointers are to live locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("wait4 for vmscope top");
        }
    }
    let wall = start.elapsed();
    let st = ExitStatus::from_raw(status);
    if !st.success() {
        bail!(
            "`{}` failed ({})",
            process::show(&cmd),
            process::describe(st)
        );
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Measurement {
        wall,
        user: secs(ru.ru_utime),
        sys: secs(ru.ru_stime),
    })
}
