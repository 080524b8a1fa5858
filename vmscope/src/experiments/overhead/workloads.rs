//! `vmscope overhead --workloads`: what vmscope costs four workloads, as
//! users run it, next to the peer. Workloads, measured in one process with
//! a zram swap device on (so the swap probe is attached, as it is on any
//! machine that swaps):
//!
//! - the fault loop: first touch of fresh private pages (CPU per fault);
//! - the syscall loops: map, touch and unmap 64 KiB; mprotect one page
//!   (CPU per iteration);
//! - a real program: redis-server driven by redis-benchmark over a unix
//!   socket, each on its own CPU (requests per second; where both are
//!   installed);
//! - a swap-heavy loop: a child in a memory cgroup limited to half of what
//!   it writes, writing all of it pass after pass, so every pass swaps half
//!   of it out and back in (the child's CPU per page written).
//!
//! Modes, interleaved and rotated round by round: nothing attached;
//! `vmscope record` and `vmscope serve` as users start them (default
//! options, system-wide, each its own process, started once per round and
//! stopped after it); the floor, an empty program on every tracepoint a
//! default load attaches, attached the same way (what any tool on those
//! hooks pays before its programs do anything); and, where installed, the
//! peer's nearest one-liner for each workload (bpftrace), attached for
//! that workload alone.

use std::{
    ffi::CString,
    io::{Read as _, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::{
    cli::OverheadArgs,
    experiments::{
        pressure,
        workload::{AnonMap, HeldSignals, unheld},
    },
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Watching {
    Nothing,
    Record,
    Serve,
    Floor,
    Bpftrace,
}

impl Watching {
    fn name(self) -> &'static str {
        match self {
            Watching::Nothing => "nothing",
            Watching::Record => "record",
            Watching::Serve => "serve",
            Watching::Floor => "floor",
            Watching::Bpftrace => "bpftrace",
        }
    }
}

/// What a figure measures.
#[derive(Clone, Copy)]
enum Work {
    Faults,
    MapTouchUnmap,
    Mprotect,
    Redis,
    Swap,
}

/// The figures, in table order: what is measured, its name, unit, whether
/// more is better, the goal against nothing, and the peer's one-liner.
struct Figure {
    work: Work,
    name: &'static str,
    unit: &'static str,
    throughput: bool,
    goal: f64,
    peer: &'static str,
}

const FAULTS: &str = "BEGIN { printf(\"ready\\n\"); } \
     tracepoint:exceptions:page_fault_user { @[pid] = count(); }";
const SYSCALLS: &str = "BEGIN { printf(\"ready\\n\"); } \
     tracepoint:syscalls:sys_enter_mmap, tracepoint:syscalls:sys_enter_munmap, \
     tracepoint:syscalls:sys_enter_mprotect { @[pid] = count(); }";
const SWAP: &str = "BEGIN { printf(\"ready\\n\"); } \
     tracepoint:exceptions:page_fault_user { @f[pid] = count(); } \
     tracepoint:vmscan:mm_vmscan_lru_shrink_inactive { @r[pid] = sum(args->nr_reclaimed); }";

const FIGURES: [Figure; 5] = [
    Figure {
        work: Work::Faults,
        name: "fault loop",
        unit: "ns/fault",
        throughput: false,
        goal: 1.05,
        peer: FAULTS,
    },
    Figure {
        work: Work::MapTouchUnmap,
        name: "mmap+touch+munmap 64K",
        unit: "ns/iter",
        throughput: false,
        goal: 1.10,
        peer: SYSCALLS,
    },
    Figure {
        work: Work::Mprotect,
        name: "mprotect loop",
        unit: "ns/call",
        throughput: false,
        goal: 1.10,
        peer: SYSCALLS,
    },
    Figure {
        work: Work::Redis,
        name: "redis set+get",
        unit: "req/s",
        throughput: true,
        goal: 0.97,
        peer: FAULTS,
    },
    Figure {
        work: Work::Swap,
        name: "swap loop (zram)",
        unit: "ns/page",
        throughput: false,
        goal: 1.05,
        peer: SWAP,
    },
];

impl Figure {
    /// Whether `ratio` (against nothing attached) meets the goal.
    fn meets(&self, ratio: f64) -> bool {
        if self.throughput {
            ratio >= self.goal
        } else {
            ratio <= self.goal
        }
    }
}

/// What the run needs for its workloads, made once and undone on drop.
struct Bench {
    dir: tempfile::TempDir,
    redis: Option<Redis>,
    swap: Result<(pressure::ZramSwap, pressure::MemCgroup), String>,
    pages: usize,
    /// The vmscope whose record and serve are measured.
    exe: PathBuf,
    /// The tracepoints a default load attaches here, for the floor.
    hooks: Vec<super::AttachedHook>,
    /// Last, so dropped last: a held signal takes effect once everything
    /// above is undone.
    held: HeldSignals,
}

pub fn run(args: &OverheadArgs) -> anyhow::Result<u8> {
    if let Some(p) = args.binary.as_ref().filter(|p| !p.is_file()) {
        return Err(crate::exit::failure(
            crate::exit::USAGE,
            format!(
                "--binary {}: no such file; give the path of a vmscope executable",
                p.display()
            ),
        ));
    }
    crate::source::kernel::tracefs::tracefs().map_err(|e| anyhow::anyhow!(e))?;
    // Ctrl-C (or SIGTERM, SIGHUP) is held while the swap device, the
    // cgroup and redis-server exist: the bench stops before its next
    // figure, removes them, and then the signal takes effect.
    let held = HeldSignals::hold()?;
    let dir = tempfile::Builder::new()
        .prefix("vmscope-overhead-")
        .tempdir()
        .context("creating a scratch directory")?;
    let redis = match Redis::start(dir.path()) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("redis: unavailable ({e:#}); apt-get install redis-server redis-tools");
            None
        }
    };
    let swap = pressure::ZramSwap::new(1 << 30)
        .and_then(|z| Ok((z, pressure::MemCgroup::new("vmscope-overhead", SWAP_LIMIT)?)))
        .map_err(|e| format!("{e:#}"));
    if let Err(e) = &swap {
        eprintln!("swap loop: unavailable ({e})");
    }
    // With the swap device on, as record and serve see it.
    let hooks = super::attached_hooks(crate::source::loader::SwapAttach::Auto)?;
    crate::source::kernel::btf::release();
    eprintln!(
        "floor: an empty program on each of the {} tracepoints a default load attaches here \
         ({} of them BTF-typed)",
        hooks.len(),
        hooks.iter().filter(|h| h.btf).count()
    );
    let bench = Bench {
        dir,
        redis,
        swap,
        hooks,
        pages: args.pages.min(1 << 18),
        exe: match &args.binary {
            Some(p) => p.clone(),
            None => std::env::current_exe().context("finding vmscope's own executable")?,
        },
        held,
    };
    let mut modes = vec![
        Watching::Nothing,
        Watching::Record,
        Watching::Serve,
        Watching::Floor,
    ];
    if super::bpftrace_installed() {
        modes.push(Watching::Bpftrace);
    } else {
        eprintln!("bpftrace is not installed: no peer column (apt-get install bpftrace)");
    }
    bench.all(Watching::Nothing)?; // warm-up
    let rounds = super::interleaved(
        &modes,
        args.rounds,
        |mode| bench.all(mode),
        |r| format!("{:.0} ns, {:.0} req/s, {:.0} ns/page", r[0], r[3], r[4]),
    )?;
    print(&modes, &super::medians(&rounds), args.rounds, &bench);
    Ok(0)
}

impl Bench {
    /// Every figure once, under `mode`; NaN for an unavailable workload.
    fn all(&self, mode: Watching) -> anyhow::Result<[f64; 5]> {
        let _watcher = match mode {
            Watching::Record => Some(Watcher::record(&self.exe, self.dir.path())?),
            Watching::Serve => Some(Watcher::serve(&self.exe)?),
            Watching::Nothing | Watching::Floor | Watching::Bpftrace => None,
        };
        // In this process, which has one thread (the swap loop forks).
        let _floor = if mode == Watching::Floor {
            Some(super::floor(&self.hooks)?)
        } else {
            None
        };
        let mut r = [f64::NAN; 5];
        for (i, fig) in FIGURES.iter().enumerate() {
            anyhow::ensure!(
                !self.held.pending(),
                "interrupted: stopped, swap device and cgroup removed"
            );
            let one = || self.one(fig.work);
            r[i] = if mode == Watching::Bpftrace && self.available(fig.work).is_ok() {
                super::with_bpftrace(fig.peer, one)?
            } else {
                one()?
            };
        }
        Ok(r)
    }

    /// Why `work` cannot be measured here, if it cannot.
    fn available(&self, work: Work) -> Result<(), String> {
        match work {
            Work::Redis if self.redis.is_none() => {
                Err("redis-server or redis-benchmark missing".into())
            }
            Work::Swap => self.swap.as_ref().map(|_| ()).map_err(Clone::clone),
            _ => Ok(()),
        }
    }

    fn one(&self, work: Work) -> anyhow::Result<f64> {
        if self.available(work).is_err() {
            return Ok(f64::NAN);
        }
        match work {
            Work::Faults => super::touch_pass(self.pages, 1 << 14),
            Work::MapTouchUnmap => Ok(super::syscalls::loops(100_000)?[0]),
            Work::Mprotect => Ok(super::syscalls::loops(100_000)?[1]),
            Work::Redis => self.redis.as_ref().map_or(Ok(f64::NAN), Redis::benchmark),
            Work::Swap => match &self.swap {
                Ok((_, cg)) => swap_loop_best(cg),
                Err(_) => Ok(f64::NAN),
            },
        }
    }
}

/// `vmscope record` or `serve`, running in the background; stopped (as
/// Ctrl-C or a service manager would stop it) when dropped.
struct Watcher {
    child: Child,
    signal: rustix::process::Signal,
}

impl Watcher {
    fn vmscope(exe: &Path) -> Command {
        let mut cmd = Command::new(exe);
        unheld(&mut cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    /// `record --format jsonl`, system-wide: ready once its header is out
    /// (written after every probe is attached).
    fn record(exe: &Path, dir: &Path) -> anyhow::Result<Watcher> {
        let out = dir.join("record.jsonl");
        let _ = std::fs::remove_file(&out);
        let child = Self::vmscope(exe)
            .args(["record", "--format", "jsonl", "-o"])
            .arg(&out)
            .spawn()
            .context("starting vmscope record")?;
        let mut w = Watcher {
            child,
            signal: rustix::process::Signal::INT,
        };
        w.wait_ready("record", || {
            std::fs::metadata(&out).is_ok_and(|m| m.len() > 0)
        })?;
        Ok(w)
    }

    /// `serve` on a free local port: ready once /healthz answers (it
    /// listens only after every probe is attached).
    fn serve(exe: &Path) -> anyhow::Result<Watcher> {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("finding a free local port")?;
        let child = Self::vmscope(exe)
            .args(["serve", "--listen", &addr.to_string()])
            .spawn()
            .context("starting vmscope serve")?;
        let mut w = Watcher {
            child,
            signal: rustix::process::Signal::TERM,
        };
        w.wait_ready("serve", || healthz(addr))?;
        Ok(w)
    }

    fn wait_ready(&mut self, what: &str, ready: impl Fn() -> bool) -> anyhow::Result<()> {
        let t = Instant::now();
        while !ready() {
            if let Ok(Some(st)) = self.child.try_wait() {
                anyhow::bail!("vmscope {what} exited before it was ready ({st})");
            }
            anyhow::ensure!(
                t.elapsed() < Duration::from_secs(60),
                "vmscope {what} was not ready after 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Its first two samples taken (the first at once, the second an
        // interval later, which symbolizes the stacks sampled meanwhile)
        // and the start-up's memory given back: the figures are what it
        // costs from then on, all the time. What starting costs is
        // `cargo xtask bench startup`'s.
        std::thread::sleep(SETTLE);
        Ok(())
    }
}

/// How long a watcher runs before its figures are taken: two of its
/// default intervals and a half.
const SETTLE: Duration = Duration::from_millis(2500);

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, self.signal);
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn healthz(addr: std::net::SocketAddr) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut answer = [0u8; 12];
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: vmscope\r\nConnection: close\r\n\r\n")
        .is_ok()
        && s.read_exact(&mut answer).is_ok()
        && answer.ends_with(b" 200")
}

/// A redis-server on a unix socket in the scratch directory, without
/// persistence; stopped when dropped.
struct Redis {
    server: Child,
    socket: PathBuf,
}

/// Requests per pass and kind (SET, then GET).
const REDIS_REQUESTS: u32 = 100_000;

impl Redis {
    fn start(dir: &Path) -> anyhow::Result<Redis> {
        crate::child::resolve("redis-benchmark")?;
        let socket = dir.join("redis.sock");
        let mut server = Command::new("redis-server");
        let server = on_cpu(unheld(&mut server), 0)
            .args([
                "--port",
                "0",
                "--save",
                "",
                "--appendonly",
                "no",
                "--unixsocket",
            ])
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-server")?;
        let r = Redis { server, socket };
        let t = Instant::now();
        while !r.socket.exists() {
            anyhow::ensure!(
                t.elapsed() < Duration::from_secs(10),
                "redis-server made no socket in 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(r)
    }

    /// One redis-benchmark pass: SET then GET; requests per second over
    /// both (all requests over the time both took).
    fn benchmark(&self) -> anyhow::Result<f64> {
        let mut bench = Command::new("redis-benchmark");
        let out = on_cpu(unheld(&mut bench), 1)
            .arg("-s")
            .arg(&self.socket)
            .args(["-n", &REDIS_REQUESTS.to_string(), "-t", "set,get", "--csv"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .context("running redis-benchmark")?;
        anyhow::ensure!(
            out.status.success(),
            "redis-benchmark failed ({})",
            out.status
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let rps = redis_rps(&text).context("redis-benchmark printed no SET and GET rates")?;
        Ok(2.0 / (1.0 / rps[0] + 1.0 / rps[1]))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Runs `cmd` on CPU `cpu` only, where the machine has it. Left to the
/// scheduler, redis-server and redis-benchmark sometimes share a CPU and
/// sometimes not, and the throughput jumps between two levels (95,000 and
/// 135,000 requests per second here) whatever is attached.
fn on_cpu(cmd: &mut Command, cpu: usize) -> &mut Command {
    use std::os::unix::process::CommandExt as _;
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 {
        return cmd;
    }
    // SAFETY: the closure makes one syscall on the child's own affinity.
    unsafe { cmd.pre_exec(move || pin_to(cpu)) }
}

/// Pins the calling thread to CPU `cpu`.
fn pin_to(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is valid; the call sets only the calling
    // thread's affinity.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The SET and GET requests per second from redis-benchmark's `--csv`
/// output (`"SET","98039.22",...`).
fn redis_rps(csv: &str) -> Option<[f64; 2]> {
    let rate = |test: &str| {
        csv.lines().find_map(|l| {
            let mut f = l.split(',').map(|c| c.trim().trim_matches('"'));
            (f.next()? == test).then(|| f.next()?.parse::<f64>().ok())?
        })
    };
    Some([rate("SET")?, rate("GET")?])
}

/// The swap loop's memory cgroup limit; the child writes twice this.
const SWAP_LIMIT: u64 = 32 << 20;
const SWAP_PASSES: usize = 4;

/// How many times the swap loop runs for one figure.
const SWAP_RUNS: usize = 3;

/// The swap loop's figure: the least CPU per page of `SWAP_RUNS` runs.
///
/// Some runs pay for interrupts between CPUs that have nothing to do with
/// what is attached: in those, the kernel does the same work (the same
/// swap-ins, swap-outs and pages scanned in /proc/vmstat) but sends tens
/// of thousands of TLB shootdowns (/proc/interrupts; a handful in the
/// other runs), and the CPU per page doubles or triples. They came in
/// every mode, nothing attached included, in about one run in five even
/// with the child made on CPU 0 (see `on_first_cpu`), so a median of 7
/// rounds said more about them than about what was attached. The least
/// of three runs is a run without them in almost every round.
fn swap_loop_best(cg: &pressure::MemCgroup) -> anyhow::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..SWAP_RUNS {
        best = best.min(swap_loop(cg)?);
    }
    Ok(best)
}

/// The swap loop: a child joins `cg`, writes twice its limit once, then
/// `SWAP_PASSES` times more; the child's CPU time (user and system, where
/// reclaim and the swap device's compression run) per page of those passes.
fn swap_loop(cg: &pressure::MemCgroup) -> anyhow::Result<f64> {
    let procs = CString::new(cg.procs_file().as_os_str().as_encoded_bytes())
        .context("the cgroup's path")?;
    let page = rustix::param::page_size();
    let pages = 2 * SWAP_LIMIT as usize / page;
    // The child is made on CPU 0 and stays there (see `on_first_cpu`).
    let pid = on_first_cpu(|| {
        // SAFETY: this process runs one thread (nothing else holds the
        // allocator's lock); the child makes syscalls on its own memory and
        // leaves with _exit.
        unsafe { libc::fork() }
    });
    anyhow::ensure!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: as above: raw syscalls on memory this child maps.
        unsafe { swap_child(&procs, pages, page) }
    }
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for the child just forked.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    anyhow::ensure!(rc == pid, "wait4: {}", std::io::Error::last_os_error());
    anyhow::ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the swap loop's child failed (status {status:#x}: 1 cgroup, 2 mmap)"
    );
    let ns = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    Ok((ns(ru.ru_utime) + ns(ru.ru_stime)) / (pages * SWAP_PASSES) as f64)
}

/// The swap loop's child. Its CPU time from the first write is what the
/// parent reads; the first pass (faulting the pages in) is part of it, a
/// fifth of the whole, alike in every mode.
unsafe fn swap_child(procs: &CString, pages: usize, page: usize) -> ! {
    // SAFETY (for the whole body): syscalls on our own fd and mapping.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
        if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
            libc::_exit(1);
        }
        libc::close(fd);
        let len = pages * page;
        // Single-threaded here, so even the error path's allocation is safe.
        let Ok(map) = AnonMap::new(len) else {
            libc::_exit(2);
        };
        libc::madvise(map.ptr.cast(), len, libc::MADV_NOHUGEPAGE);
        let base = map.ptr;
        for pass in 0..=SWAP_PASSES {
            for i in 0..pages {
                std::ptr::write_volatile(base.add(i * page), pass as u8 + 1);
            }
        }
        libc::_exit(0)
    }
}

/// Runs `f` (a fork) with the calling thread pinned to CPU 0, then puts
/// the thread's CPUs back; the child keeps CPU 0. Where CPU 0 is refused
/// (a cpuset without it), `f` runs unpinned.
///
/// Left to the scheduler, the swap loop's child (the same loop, run alone
/// from a shell) paid TLB shootdowns and ran slow in six runs of eight,
/// and ran fast in all sixteen runs started on one CPU: once its mm has
/// been on both CPUs, the pages reclaim unmaps are flushed from the other
/// CPU's TLB too, by interrupts between CPUs, which a virtual machine
/// makes dear. Pinning the child once it runs is not enough (it may start
/// on the other CPU), so it is made on CPU 0. Inside the bench that leaves
/// about one run in five with them, for a reason not found; see
/// `swap_loop_best`.
fn on_first_cpu<T>(f: impl FnOnce() -> T) -> T {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is valid; the calls read and set only the
    // calling thread's affinity.
    let mut before: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let saved = unsafe { libc::sched_getaffinity(0, size, &mut before) } == 0;
    let pinned = saved && pin_to(0).is_ok();
    let out = f();
    if pinned {
        // SAFETY: as above.
        unsafe { libc::sched_setaffinity(0, size, &before) };
    }
    out
}

fn print(modes: &[Watching], med: &[[f64; 5]], rounds: u32, bench: &Bench) {
    println!(
        "vmscope's cost on four workloads, {rounds} interleaved rounds (medians; a zram swap \
         device on; record and serve with default options, system-wide):"
    );
    let head: String = modes.iter().map(|m| format!("{:>12}", m.name())).collect();
    println!("  {:<24}{:>9}{head}", "workload", "unit");
    for (i, f) in FIGURES.iter().enumerate() {
        if let Err(why) = bench.available(f.work) {
            println!("  {:<24}{:>9}  unavailable: {why}", f.name, f.unit);
            continue;
        }
        let cells: String = med.iter().map(|m| format!("{:>12.0}", m[i])).collect();
        println!("  {:<24}{:>9}{cells}", f.name, f.unit);
    }
    println!("against nothing attached (cost; for redis, throughput):");
    let head: String = modes[1..]
        .iter()
        .map(|m| format!("{:>10}", m.name()))
        .collect();
    println!(
        "  {:<24}{head}                goal  vmscope/peer added (goal <= 0.5)",
        "workload"
    );
    let peer = modes.iter().position(|&m| m == Watching::Bpftrace);
    let floor = modes.iter().position(|&m| m == Watching::Floor);
    for (i, f) in FIGURES.iter().enumerate() {
        if bench.available(f.work).is_err() {
            continue;
        }
        let ratio = |m: &[f64; 5]| m[i] / med[0][i];
        let cells: String = med[1..]
            .iter()
            .map(|m| format!("{:>9.3}x", ratio(m)))
            .collect();
        // The worse of record and serve is judged.
        let met = f.meets(ratio(&med[1])) && f.meets(ratio(&med[2]));
        // Whether empty programs on the same hooks already miss the goal:
        // then only fewer hooks, not cheaper programs, could meet it.
        let floor_misses = floor.is_some_and(|k| !f.meets(ratio(&med[k])));
        let goal = format!(
            "{}{:.2} {}{}",
            if f.throughput { ">=" } else { "<=" },
            f.goal,
            if met { "met" } else { "NOT met" },
            if floor_misses { ", floor too" } else { "" }
        );
        let vs_peer = peer.map_or_else(|| "no peer".to_string(), |b| added_vs_peer(med, i, b));
        println!("  {:<24}{cells}  {goal:>22}  {vs_peer}", f.name);
    }
    println!(
        "floor: empty programs on the hooks record and serve attach; \"floor too\" marks a goal \
         the hooks alone miss"
    );
}

/// record's and serve's added cost over the peer's, for figure `i` (for
/// a throughput, the cost is what was lost).
fn added_vs_peer(med: &[[f64; 5]], i: usize, peer: usize) -> String {
    let sign = if FIGURES[i].throughput { -1.0 } else { 1.0 };
    let added = |m: &[f64; 5]| sign * (m[i] - med[0][i]);
    let p = added(&med[peer]);
    if p <= 0.0 {
        return "n/a (peer in noise)".into();
    }
    format!(
        "record {:.2}, serve {:.2}",
        added(&med[1]) / p,
        added(&med[2]) / p
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_meets_its_goal_at_or_below_it_and_a_throughput_at_or_above() {
        let [faults, _, _, redis, _] = &FIGURES;
        assert!(faults.meets(1.0) && faults.meets(1.05));
        assert!(!faults.meets(1.051) && !faults.meets(f64::NAN));
        assert!(redis.meets(0.97) && redis.meets(1.2));
        assert!(!redis.meets(0.969) && !redis.meets(f64::NAN));
    }

    #[test]
    fn redis_rates_come_from_the_csv_rows() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\"\n\"SET\",\"98039.22\",\"0.285\"\n\
                   \"GET\",\"100000.00\",\"0.270\"\n";
        assert_eq!(redis_rps(csv), Some([98039.22, 100000.0]));
        assert_eq!(redis_rps("\"SET\",\"1.0\"\n"), None);
        assert_eq!(redis_rps("garbage"), None);
    }
}
