//! The cgroup churn: the parent cgroup (removed with everything below it
//! when dropped), one child process placed in each cgroup and waited for,
//! the workers that run them K at a time, and the signals that stop them.

use std::{
    ffi::{CStr, CString},
    fs::File,
    io::{Read as _, Write as _},
    os::{
        fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd},
        unix::{ffi::OsStrExt as _, fs::MetadataExt as _},
    },
    path::{Path, PathBuf},
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::process::say;

/// The parent cgroup's name, below the hierarchy's root.
pub const PARENT: &str = "vmscope-soak";

/// The hierarchy vmscope keys processes by: the memory controller's v1
/// hierarchy where there is one, else cgroup v2 (vmscope's own rule, in
/// its cgroup filesystem source).
pub struct Hierarchy {
    pub mount: PathBuf,
    pub v1: bool,
}

impl Hierarchy {
    pub fn detect() -> Result<Hierarchy> {
        let cgroups = std::fs::read_to_string("/proc/cgroups").context("reading /proc/cgroups")?;
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .context("reading /proc/self/mountinfo")?;
        let v1 = cgroups.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 4 && f[0] == "memory" && f[1] != "0" && f[3] == "1"
        });
        let mut v2 = None;
        for l in mountinfo.lines() {
            let Some((pre, post)) = l.split_once(" - ") else {
                continue;
            };
            let Some(point) = pre.split_whitespace().nth(4) else {
                continue;
            };
            let mut post = post.split_whitespace();
            let fstype = post.next().unwrap_or_default();
            let opts = post.nth(1).unwrap_or_default();
            if v1 && fstype == "cgroup" && opts.split(',').any(|o| o == "memory") {
                return Ok(Hierarchy {
                    mount: point.into(),
                    v1: true,
                });
            }
            if fstype == "cgroup2" && v2.is_none() {
                v2 = Some(PathBuf::from(point));
            }
        }
        match v2 {
            Some(mount) if !v1 => Ok(Hierarchy { mount, v1: false }),
            _ => bail!(
                "bench soak --cgroups: no mounted hierarchy holds the memory controller \
                 (or cgroup v2); mount one (mount -t cgroup2 none /sys/fs/cgroup)"
            ),
        }
    }

    pub fn describe(&self) -> String {
        let kind = if self.v1 { "v1-memory" } else { "v2" };
        format!("{kind} at {}", self.mount.display())
    }
}

/// The parent cgroup the soak's cgroups are made in. Dropping it removes
/// every cgroup below it and then itself, after killing and reaping any
/// process of ours still in one.
pub struct SoakTree {
    pub dir: PathBuf,
}

impl SoakTree {
    /// Makes the parent, first removing one an interrupted run left.
    pub fn create(h: &Hierarchy) -> Result<SoakTree> {
        let tree = SoakTree {
            dir: h.mount.join(PARENT),
        };
        if tree.dir.exists() {
            say!(
                "bench soak: {} is left from an earlier run; removing it",
                tree.dir.display()
            );
            tree.sweep();
            rmdir(&tree.dir).with_context(|| {
                format!(
                    "removing {} (a process still in it? see its cgroup.procs)",
                    tree.dir.display()
                )
            })?;
        }
        std::fs::create_dir(&tree.dir)
            .with_context(|| format!("making cgroup {}", tree.dir.display()))?;
        if !h.v1 {
            // Its children's memory books (memory.current, memory.stat) need
            // the controller enabled here; they are a bonus, so best effort.
            let _ = std::fs::write(tree.dir.join("cgroup.subtree_control"), "+memory");
        }
        Ok(tree)
    }

    /// The path below the mount, as vmscope names cgroups.
    pub fn rel(&self) -> String {
        format!("/{PARENT}")
    }

    /// Cgroup `i`'s path below the mount and its directory.
    pub fn child(&self, i: u64) -> (String, PathBuf) {
        let name = format!("c{:05}", i + 1);
        (format!("/{PARENT}/{name}"), self.dir.join(name))
    }

    /// Removes every cgroup below the parent, killing our own processes
    /// still in one; returns what could not be removed.
    pub fn sweep(&self) -> Vec<String> {
        let mut left = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return left;
        };
        for e in entries.flatten() {
            let dir = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            left.extend(kill_ours_in(&dir));
            if let Err(e) = rmdir(&dir) {
                left.push(format!("{}: {e}", dir.display()));
            }
        }
        left
    }
}

impl Drop for SoakTree {
    fn drop(&mut self) {
        let mut left = self.sweep();
        if let Err(e) = rmdir(&self.dir) {
            left.push(format!("{}: {e}", self.dir.display()));
        }
        for l in left {
            say!("bench soak: not restored: {l}");
        }
    }
}

/// Kills (SIGKILL) and reaps the processes in cgroup `dir` that are our
/// children; names any other process found there.
fn kill_ours_in(dir: &Path) -> Vec<String> {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let me = std::process::id();
    let mut others = Vec::new();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        if parent_of(pid) != Some(me) {
            others.push(format!(
                "{} holds pid {pid}, which the bench did not start",
                dir.display()
            ));
            continue;
        }
        // SAFETY: a child of ours, not yet reaped (it is in the cgroup).
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
    others
}

fn parent_of(pid: i32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// rmdir, retried while the kernel still counts a process that just left
/// (EBUSY) for up to a second.
pub fn rmdir(dir: &Path) -> std::io::Result<()> {
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            other => return other,
        }
    }
}

/// How a child is put into its cgroup; the soak alternates them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The forked child writes "0" (itself) to `cgroup.procs` before exec.
    ItselfBeforeExec,
    /// The forked child waits on a pipe while the parent writes its pid to
    /// `cgroup.procs`, then execs (how container runtimes hold a child).
    HeldByParent,
}

impl Placement {
    pub fn of(i: u64) -> Placement {
        if i.is_multiple_of(2) {
            Placement::ItselfBeforeExec
        } else {
            Placement::HeldByParent
        }
    }
}

/// One cgroup's run: what its process did, by the kernel's books.
#[derive(Clone, Debug)]
pub struct ChildRun {
    pub path: String,
    /// The cgroup's id (its directory's inode number), as vmscope keys it.
    pub id: u64,
    pub placement: Placement,
    /// The child's faults (min_flt + maj_flt, from wait4) in all.
    pub faults: u64,
    /// Of those, the ones taken before it was in the cgroup (between fork
    /// and the move, by its own getrusage).
    pub before_move: u64,
    /// The cgroup's own `pgfault` (memory.stat) just before removal, where
    /// the memory controller is on its hierarchy.
    pub memcg_faults: Option<u64>,
    /// The raw wait status.
    pub status: i32,
}

/// What the workers share.
pub struct Churn<'a> {
    pub tree: &'a SoakTree,
    pub testchild: &'a Path,
    pub pages: u64,
    pub cgroups: u64,
    /// Cgroups started per second at most, from `start`.
    rate: Option<f64>,
    start: Instant,
    next: AtomicU64,
    pub runs: Mutex<Vec<ChildRun>>,
    pub errors: Mutex<Vec<String>>,
}

impl<'a> Churn<'a> {
    pub fn new(
        tree: &'a SoakTree,
        testchild: &'a Path,
        pages: u64,
        cgroups: u64,
        rate: Option<f64>,
    ) -> Self {
        Churn {
            tree,
            testchild,
            pages,
            cgroups,
            rate,
            start: Instant::now(),
            next: AtomicU64::new(0),
            runs: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
        }
    }

    pub fn note_error(&self, e: String) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(e);
        }
        request_stop();
    }

    /// One worker: cgroups one after the other until all are taken or the
    /// churn is stopped.
    pub fn work(&self) {
        while !stopped() {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.cgroups || !self.wait_turn(i) {
                break;
            }
            match self.run_one(i) {
                Ok(r) => {
                    if let Ok(mut runs) = self.runs.lock() {
                        runs.push(r);
                    }
                }
                Err(e) => self.note_error(format!("cgroup {}: {e:#}", self.tree.child(i).0)),
            }
        }
    }

    /// Waits until cgroup `i` is due at the rate asked for; false when the
    /// churn was stopped meanwhile.
    fn wait_turn(&self, i: u64) -> bool {
        let Some(rate) = self.rate else {
            return true;
        };
        let due = self.start + Duration::from_secs_f64(i as f64 / rate);
        while !stopped() {
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
        false
    }

    /// Makes cgroup `i`, runs one faulting child in it, waits for it and
    /// removes the cgroup.
    fn run_one(&self, i: u64) -> Result<ChildRun> {
        let (path, dir) = self.tree.child(i);
        std::fs::create_dir(&dir).with_context(|| format!("making {}", dir.display()))?;
        let made = Made(&dir);
        let id = std::fs::metadata(&dir)?.ino();
        let placement = Placement::of(i);
        let argv = Argv::new(&[
            self.testchild.as_os_str().as_bytes(),
            b"touch",
            self.pages.to_string().as_bytes(),
        ])?;
        let (mut child, before_move) = spawn_placed(&argv, &dir.join("cgroup.procs"), placement)?;
        let (status, faults) = child.wait()?;
        let memcg_faults = std::fs::read_to_string(dir.join("memory.stat"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("pgfault ")?.trim().parse().ok())
            });
        std::mem::forget(made);
        rmdir(&dir).with_context(|| format!("removing {}", dir.display()))?;
        Ok(ChildRun {
            path,
            id,
            placement,
            faults,
            before_move,
            memcg_faults,
            status,
        })
    }
}

/// A cgroup made by a worker: removed when an error unwinds past it.
struct Made<'a>(&'a Path);

impl Drop for Made<'_> {
    fn drop(&mut self) {
        let _ = rmdir(self.0);
    }
}

/// An argument vector ready for execv, built before fork (the child may
/// not allocate).
struct Argv {
    _strings: Vec<CString>,
    ptrs: Vec<*const libc::c_char>,
}

impl Argv {
    fn new(words: &[&[u8]]) -> Result<Argv> {
        let strings = words
            .iter()
            .map(|w| CString::new(*w))
            .collect::<Result<Vec<_>, _>>()
            .context("an argument holds a NUL byte")?;
        let mut ptrs: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        Ok(Argv {
            _strings: strings,
            ptrs,
        })
    }
}

/// A forked child: killed and reaped if dropped before [`Forked::wait`].
struct Forked {
    pid: libc::pid_t,
    reaped: bool,
}

impl Forked {
    /// Waits for it: its wait status and its faults (min_flt + maj_flt).
    fn wait(&mut self) -> Result<(i32, u64)> {
        let mut status = 0;
        // SAFETY: zeroed rusage is valid; wait4 fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: our own child.
            let r = unsafe { libc::wait4(self.pid, &mut status, 0, &mut ru) };
            if r == self.pid {
                self.reaped = true;
                return Ok((status, (ru.ru_minflt + ru.ru_majflt) as u64));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e).with_context(|| format!("waiting for pid {}", self.pid));
            }
        }
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        if !self.reaped {
            let mut status = 0;
            // SAFETY: our own child, not yet reaped.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, &mut status, 0);
            }
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    // SAFETY: both were just opened and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Forks a child that places itself in (or is placed by us into) the
/// cgroup whose `cgroup.procs` is `procs`, then execs `argv`. Returns it
/// and the faults it took before the move.
fn spawn_placed(argv: &Argv, procs: &Path, placement: Placement) -> Result<(Forked, u64)> {
    let procs_c = CString::new(procs.as_os_str().as_bytes())?;
    let (report_r, report_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    // SAFETY: the child runs only async-signal-safe calls before exec.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        // SAFETY: in the child; it never returns.
        unsafe {
            child_side(
                &argv.ptrs,
                &procs_c,
                placement,
                report_w.as_raw_fd(),
                go_r.as_raw_fd(),
            )
        }
    }
    let mut child = Forked { pid, reaped: false };
    drop((report_w, go_r));
    let mut buf = [0u8; 8];
    if let Err(e) = File::from(report_r).read_exact(&mut buf) {
        let (status, _) = child.wait()?;
        bail!(
            "the child did not reach exec ({e}; wait status {status:#x}: 126 could not \
             write {})",
            procs.display()
        );
    }
    if placement == Placement::HeldByParent {
        std::fs::write(procs, pid.to_string())
            .with_context(|| format!("writing pid {pid} to {}", procs.display()))?;
        File::from(go_w)
            .write_all(b"g")
            .context("releasing the held child")?;
    }
    Ok((child, u64::from_ne_bytes(buf)))
}

/// The forked child's side of [`spawn_placed`]. Only async-signal-safe
/// calls: nothing allocates.
unsafe fn child_side(
    argv: &[*const libc::c_char],
    procs: &CStr,
    placement: Placement,
    report: RawFd,
    go: RawFd,
) -> ! {
    // SAFETY: plain system calls on memory prepared before the fork.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        let before = ((ru.ru_minflt + ru.ru_majflt) as u64).to_ne_bytes();
        if placement == Placement::ItselfBeforeExec {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                libc::_exit(126);
            }
            libc::close(fd);
        }
        if libc::write(report, before.as_ptr().cast(), 8) != 8 {
            libc::_exit(126);
        }
        if placement == Placement::HeldByParent {
            let mut go_byte = 0u8;
            if libc::read(go, (&raw mut go_byte).cast(), 1) != 1 {
                libc::_exit(125);
            }
        }
        libc::execv(argv[0], argv.as_ptr());
        libc::_exit(127)
    }
}

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::Relaxed);
    STOP.store(true, Ordering::Relaxed);
}

/// SIGINT, SIGTERM and SIGHUP stop the churn (and the run, which then
/// cleans up) instead of killing xtask where it stands.
pub fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a handler that only stores to atomics.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

pub fn request_stop() {
    STOP.store(true, Ordering::Relaxed);
}

pub fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The signal that stopped the run, if one did.
pub fn signal() -> Option<i32> {
    Some(SIGNAL.load(Ordering::Relaxed)).filter(|s| *s != 0)
}

/// Stops the churn when dropped, so workers end when the main thread
/// leaves their scope early (an error or a panic).
pub struct StopOnDrop;

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        request_stop();
    }
}
