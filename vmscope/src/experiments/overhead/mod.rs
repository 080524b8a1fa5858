//! `vmscope overhead`: what the probes cost on the page-fault path. Runs a
//! fault-heavy loop (first touch of fresh private pages) several ways in one
//! process, interleaved round by round so that machine noise hits all of
//! them alike: with nothing attached; with an empty program on the same
//! tracepoints (the floor any eBPF tool pays) and with every vmscope probe,
//! each without the swap probe, with it, and with it on the classic event;
//! and, where installed, with the peer's one-liner (bpftrace).
//! The perf-event programs (major faults) are not part of the floor: they
//! do not fire on the minor faults this loop takes.

pub mod mmap_lock;
pub mod pagecache;
pub mod sampling;
pub mod syscalls;
pub mod workloads;

use anyhow::Context as _;
use aya::{
    Ebpf,
    programs::{BtfTracePoint, TracePoint},
};

use crate::{
    cli::OverheadArgs,
    source::kernel::caps::Privileges,
    source::loader::{self, LoadOptions, SwapAttach},
    stats,
};

/// This thread's CPU time. Unlike wall time it leaves out time other
/// tasks (or, in a guest, the host) took the CPU away.
pub(super) fn thread_cpu_ns() -> u128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

/// CPU nanoseconds per fault for one pass over `pages` fresh pages, mapped
/// `chunk` pages at a time and unmapped after each chunk, so the same
/// physical pages are recycled rather than the whole of memory swept.
pub fn touch_pass(pages: usize, chunk: usize) -> anyhow::Result<f64> {
    let ps = rustix::param::page_size();
    let chunk = chunk.clamp(1, pages.max(1));
    let mut done = 0;
    let mut cpu_ns = 0u128;
    while done < pages {
        let n = chunk.min(pages - done);
        let len = n * ps;
        // SAFETY: a fresh anonymous mapping, written only within bounds,
        // then unmapped.
        unsafe {
            let p = rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
            .context("mmap")?;
            rustix::mm::madvise(p, len, rustix::mm::Advice::LinuxNoHugepage).context("madvise")?;
            let base = p.cast::<u8>();
            let start = thread_cpu_ns();
            for i in 0..n {
                std::ptr::write_volatile(base.add(i * ps), 1);
            }
            cpu_ns += thread_cpu_ns() - start;
            rustix::mm::munmap(p, len).context("munmap")?;
        }
        done += n;
    }
    Ok(cpu_ns as f64 / pages as f64)
}

/// vmscope as `record --all` loads it (swap probe when a device is
/// active), with the opt-in mmap_lock probes and syscall timing as asked.
pub(super) fn load_system_wide(
    mmap_lock: bool,
    syscall_latency: bool,
) -> anyhow::Result<loader::Loaded> {
    loader::load(&LoadOptions {
        mmap_lock,
        syscall_latency,
        ..system_wide(SwapAttach::Auto)
    })
}

/// Every default probe, system-wide, with this swap choice; nothing
/// opt-in, no stack sampling.
pub(super) fn system_wide(swap: SwapAttach) -> LoadOptions {
    LoadOptions {
        filtered: false,
        swap,
        sample_hz: 0,
        mmap_lock: false,
        rmap_maintenance: false,
        syscall_latency: false,
        thp_faults: false,
    }
}

/// A hook vmscope attached, and how.
pub(super) struct AttachedHook {
    category: String,
    event: String,
    btf: bool,
}

/// An empty program attached to every tracepoint vmscope attaches to, the
/// same way (classic or BTF-typed), so the kernel does the same work to fire
/// them (e.g. `kmem:rss_stat` sums its counter for each classic event) and
/// only the programs' bodies differ.
pub(super) fn floor(hooks: &[AttachedHook]) -> anyhow::Result<Vec<Ebpf>> {
    let mut loaded = Vec::new();
    let mut classic = load_small()?;
    let p: &mut TracePoint = classic
        .program_mut("probe_tracepoint")
        .context("program probe_tracepoint missing")?
        .try_into()?;
    p.load()?;
    for h in hooks.iter().filter(|h| !h.btf) {
        p.attach(&h.category, &h.event).with_context(|| {
            format!("attaching the empty program to {}:{}", h.category, h.event)
        })?;
    }
    loaded.push(classic);
    for h in hooks.iter().filter(|h| h.btf) {
        let btf = crate::source::kernel::btf::aya_vmlinux().map_err(|e| anyhow::anyhow!(e))?;
        // One object per hook: a BTF program is loaded for one event.
        let mut ebpf = load_small()?;
        let p: &mut BtfTracePoint = ebpf
            .program_mut("probe_tp_btf")
            .context("program probe_tp_btf missing")?
            .try_into()?;
        p.load(&h.event, &btf)?;
        p.attach()
            .with_context(|| format!("attaching the empty tp_btf program to {}", h.event))?;
        loaded.push(ebpf);
    }
    Ok(loaded)
}

/// The eBPF object with every map at one entry (the ring buffer, whose
/// size the kernel constrains, as it is). The empty programs use no map,
/// but loading the object makes them all: at full size, the floor's 25 or
/// so copies held about 540 MB of kernel memory here, which no tool with
/// empty programs would.
fn load_small() -> anyhow::Result<Ebpf> {
    /// `BPF_MAP_TYPE_RINGBUF`: a power of two of pages.
    const RINGBUF: u32 = 27;
    let object = loader::object()?;
    let parsed = aya_obj::Object::parse(object).context("parsing the eBPF object")?;
    let mut small = aya::EbpfLoader::new();
    for (name, map) in &parsed.maps {
        if map.map_type() != RINGBUF && map.max_entries() > 1 {
            small.map_max_entries(name, 1);
        }
    }
    small.load(object).context("loading the eBPF object")
}

/// The tracepoints a full load attaches (with or without the swap probe).
pub(super) fn attached_hooks(swap: SwapAttach) -> anyhow::Result<Vec<AttachedHook>> {
    let probes = loader::load(&system_wide(swap))?;
    Ok(probes
        .probes
        .iter()
        .filter(|p| p.attached && (p.method == "tracepoint" || p.method == "tp_btf"))
        .filter_map(|p| {
            let event = p
                .reason
                .as_deref()
                .and_then(|r| r.strip_prefix("attached as "))
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or(&p.probe);
            let (c, n) = event.split_once(':')?;
            Some(AttachedHook {
                category: c.to_string(),
                event: n.to_string(),
                btf: p.method == "tp_btf",
            })
        })
        .collect())
}

/// The measured configurations, in table order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Nothing,
    /// Empty programs on the hooks a load with this swap choice attaches.
    Floor(SwapAttach),
    Vmscope(SwapAttach),
    /// vmscope with `--thp-faults` too (no swap probe).
    VmscopeThp,
    /// vmscope following a process tree (as `record -- CMD` does) that the
    /// faulting process is not in: the cost others on the machine pay.
    OutsideTree,
    /// The peer: a bpftrace one-liner counting page faults per pid.
    Bpftrace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Nothing => "nothing attached",
            Mode::Floor(SwapAttach::Never) => "empty programs (floor)",
            Mode::Vmscope(SwapAttach::Never) => "vmscope, all probes",
            Mode::Floor(SwapAttach::AlwaysClassic) => "floor + classic swap probe",
            Mode::Vmscope(SwapAttach::AlwaysClassic) => "vmscope + classic swap probe",
            Mode::Floor(_) => "floor + swap probe",
            Mode::Vmscope(_) => "vmscope + swap probe",
            Mode::VmscopeThp => "vmscope + --thp-faults",
            Mode::OutsideTree => "vmscope, fault outside tree",
            Mode::Bpftrace => "bpftrace @[pid] = count()",
        }
    }

    fn hooks(self) -> usize {
        match self {
            Mode::Floor(SwapAttach::Always) => 1,
            Mode::Floor(SwapAttach::AlwaysClassic) => 2,
            _ => 0,
        }
    }
}

const SWAP_CHOICES: [SwapAttach; 3] = [
    SwapAttach::Never,
    SwapAttach::Always,
    SwapAttach::AlwaysClassic,
];

/// The peer's program: what a user would type to count page faults per
/// process. The BEGIN probe runs once every probe is attached.
const BPFTRACE_PROGRAM: &str = "BEGIN { printf(\"ready\\n\"); } \
     tracepoint:exceptions:page_fault_user { @[pid] = count(); }";

pub(super) fn bpftrace_installed() -> bool {
    std::process::Command::new("bpftrace")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// How long the peer has to attach and print its ready line.
const PEER_READY: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `f` while the bpftrace `program` is attached (it prints "ready" in
/// its BEGIN block).
pub(super) fn with_bpftrace<T>(
    program: &str,
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    use std::io::Read as _;
    let mut cmd = std::process::Command::new("bpftrace");
    // Started while `overhead --workloads` holds Ctrl-C: SIGINT must still
    // stop it.
    let mut child = crate::experiments::workload::unheld(&mut cmd)
        .args(["-e", program])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting bpftrace")?;
    let mut stdout = child.stdout.take().context("bpftrace's stdout")?;
    let result = match await_ready(&mut stdout, PEER_READY) {
        Ready::Said => f(),
        Ready::Exited => Err(anyhow::anyhow!("bpftrace exited before attaching")),
        Ready::Silent => {
            let _ = child.kill();
            Err(anyhow::anyhow!(
                "bpftrace printed no ready line in {} s; stopped it (run the bench without it: apt-get remove bpftrace)",
                PEER_READY.as_secs()
            ))
        }
    };
    if let Ok(pid) = i32::try_from(child.id()) {
        // SIGINT: bpftrace prints its map and detaches.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).context("bpftrace pid")?,
            rustix::process::Signal::INT,
        );
    }
    let _ = stdout.read_to_end(&mut Vec::new());
    let _ = child.wait();
    result
}

/// What the peer said before its deadline.
#[derive(Debug, PartialEq, Eq)]
enum Ready {
    Said,
    Exited,
    Silent,
}

/// Reads the peer's output until a whole line says "ready", it ends, or
/// `within` passes: a peer that attaches but never says so must not
/// hang the bench. Polled on this thread, not read on another: the swap
/// loop forks while the peer runs, and its child relies on this process
/// having one thread.
fn await_ready(out: &mut std::process::ChildStdout, within: std::time::Duration) -> Ready {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use std::io::Read as _;
    let deadline = std::time::Instant::now() + within;
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        // Whole lines only: the last piece has no newline yet.
        let mut lines: Vec<&[u8]> = seen.split(|&b| b == b'\n').collect();
        lines.pop();
        if lines.iter().any(|l| l.trim_ascii() == b"ready") {
            return Ready::Said;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ready::Silent;
        }
        let wait = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut pfd = [PollFd::new(&*out, PollFlags::IN)];
        if poll(&mut pfd, Some(&wait)).unwrap_or(0) == 0 {
            continue;
        }
        match out.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(0) | Err(_) => return Ready::Exited,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

fn measure(mode: Mode, hooks: &[Vec<AttachedHook>; 3], args: &OverheadArgs) -> anyhow::Result<f64> {
    let run = || touch_pass(args.pages, args.chunk);
    match mode {
        Mode::Nothing => run(),
        Mode::Floor(_) => {
            let _floor = floor(&hooks[mode.hooks()])?;
            run()
        }
        Mode::Vmscope(swap) => {
            let _probes = loader::load(&system_wide(swap))?;
            run()
        }
        Mode::VmscopeThp => {
            let _probes = loader::load(&LoadOptions {
                thp_faults: true,
                ..system_wide(SwapAttach::Never)
            })?;
            run()
        }
        Mode::OutsideTree => {
            let _probes = loader::load(&LoadOptions {
                filtered: true,
                ..system_wide(SwapAttach::Never)
            })?;
            run()
        }
        Mode::Bpftrace => with_bpftrace(BPFTRACE_PROGRAM, run),
    }
}

pub fn run(args: &OverheadArgs) -> anyhow::Result<u8> {
    Privileges::current().require_bpf()?;
    if args.sampling {
        return sampling::run(args);
    }
    if args.mmap_lock {
        return mmap_lock::run(args);
    }
    if args.page_cache {
        return pagecache::run(args);
    }
    if args.syscalls {
        return syscalls::run(args);
    }
    if args.workloads {
        return workloads::run(args);
    }
    crate::source::kernel::tracefs::tracefs().map_err(|e| anyhow::anyhow!(e))?;
    let hooks = SWAP_CHOICES.map(attached_hooks);
    let [never, always, classic] = hooks;
    let hooks = [never?, always?, classic?];
    eprintln!(
        "floor: an empty program on the same {} tracepoints ({} of them BTF-typed), \
         {} with the swap probe",
        hooks[0].len(),
        hooks[0].iter().filter(|h| h.btf).count(),
        hooks[1].len()
    );
    let modes = modes(args.thp_faults);
    let medians = measure_rounds(&modes, &hooks, args)?;
    print_costs(&modes, &medians, args);
    Ok(0)
}

/// Every mode to measure: nothing, then the floor and vmscope for each
/// swap choice (and vmscope with `--thp-faults` when asked), a process
/// outside the tree, and bpftrace when installed.
fn modes(thp_faults: bool) -> Vec<Mode> {
    let mut modes = vec![Mode::Nothing];
    for swap in SWAP_CHOICES {
        modes.extend([Mode::Floor(swap), Mode::Vmscope(swap)]);
    }
    if thp_faults {
        modes.push(Mode::VmscopeThp);
    }
    modes.push(Mode::OutsideTree);
    if bpftrace_installed() {
        modes.push(Mode::Bpftrace);
    } else {
        eprintln!("bpftrace is not installed: no peer column (apt-get install bpftrace)");
    }
    modes
}

/// Each mode's median cost per fault over `args.rounds` rounds.
fn measure_rounds(
    modes: &[Mode],
    hooks: &[Vec<AttachedHook>; 3],
    args: &OverheadArgs,
) -> anyhow::Result<Vec<f64>> {
    touch_pass(args.pages, args.chunk)?; // warm-up
    let mut times = interleaved(
        modes,
        args.rounds,
        |mode| measure(mode, hooks, args),
        |ns| format!("{ns:.0} ns per fault"),
    )?;
    Ok(times.iter_mut().map(|t| stats::median(t)).collect())
}

/// Runs `once` for every mode in each of `rounds` rounds and returns each
/// mode's results, round by round. The order rotates each round: whichever
/// mode runs first after a load or unload pays for it, and rotation spreads
/// that evenly; machine noise hits every mode alike. A line per round on
/// stderr shows each mode's result as `show` writes it.
pub(super) fn interleaved<M: Copy, R>(
    modes: &[M],
    rounds: u32,
    mut once: impl FnMut(M) -> anyhow::Result<R>,
    show: impl Fn(&R) -> String,
) -> anyhow::Result<Vec<Vec<R>>> {
    let mut results: Vec<Vec<R>> = (0..modes.len()).map(|_| Vec::new()).collect();
    for round in 0..rounds as usize {
        for k in 0..modes.len() {
            let i = (round + k) % modes.len();
            results[i].push(once(modes[i])?);
        }
        let line: Vec<String> = results.iter().map(|r| show(&r[round])).collect();
        eprintln!("round {}/{rounds}: {}", round + 1, line.join(" | "));
    }
    Ok(results)
}

/// Each mode's median of each of its `N` figures, from
/// [`interleaved`]'s results.
pub(super) fn medians<const N: usize>(rounds: &[Vec<[f64; N]>]) -> Vec<[f64; N]> {
    rounds
        .iter()
        .map(|r| {
            std::array::from_fn(|l| {
                let mut v: Vec<f64> = r.iter().map(|x| x[l]).collect();
                stats::median(&mut v)
            })
        })
        .collect()
}

/// The cost per fault of every mode, then vmscope's against nothing and
/// against the floor, with the goals.
fn print_costs(modes: &[Mode], m: &[f64], args: &OverheadArgs) {
    let at = |mode: Mode| modes.iter().position(|&x| x == mode).map(|i| m[i]);
    let swap_on = loader::swap_active();
    println!(
        "page-fault cost, {} fresh pages x {} rounds, CPU time (medians; swap device {}):",
        args.pages,
        args.rounds,
        if swap_on { "active" } else { "not active" }
    );
    for (mode, v) in modes.iter().zip(m) {
        println!(
            "  {:<30} {v:8.1} ns/fault  (+{:.1} ns)",
            mode.name(),
            v - m[0]
        );
    }
    let nothing = m[0];
    let vs_floor = |vm: f64, fl: f64| {
        if fl - nothing > 0.0 {
            format!("{:.2}", (vm - nothing) / (fl - nothing))
        } else {
            "n/a (floor below noise)".into()
        }
    };
    for (swap, title) in [
        (
            SwapAttach::Never,
            "without the swap probe (no swap device active, the default then):",
        ),
        (
            SwapAttach::Always,
            "with the swap probe (what runs while a swap device is active):",
        ),
        (
            SwapAttach::AlwaysClassic,
            "with the swap probe on the classic event (the fallback):",
        ),
    ] {
        let (Some(vm), Some(fl)) = (at(Mode::Vmscope(swap)), at(Mode::Floor(swap))) else {
            continue;
        };
        println!("{title}");
        println!(
            "  vmscope / nothing          {:.3}  (goal <= 1.05)",
            vm / nothing
        );
        println!(
            "  added cost vs floor        {}  (goal <= 1.5)",
            vs_floor(vm, fl)
        );
    }
    if let (Some(thp), Some(vm)) = (at(Mode::VmscopeThp), at(Mode::Vmscope(SwapAttach::Never))) {
        println!("with --thp-faults (its hook runs on every fault):");
        println!("  vmscope / nothing          {:.3}", thp / nothing);
        println!(
            "  added per fault            {:+.1} ns over the default load",
            thp - vm
        );
    }
    if let (Some(out), Some(fl)) = (at(Mode::OutsideTree), at(Mode::Floor(SwapAttach::Never))) {
        println!("a process outside the followed tree (while `record -- CMD` runs):");
        println!("  vmscope / nothing          {:.3}", out / nothing);
        println!(
            "  added cost vs floor        {}  (goal <= 1.0)",
            vs_floor(out, fl)
        );
    }
    if let Some(bt) = at(Mode::Bpftrace) {
        println!("peer:");
        println!("  bpftrace one-liner / nothing {:.3}", bt / nothing);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// What `await_ready` makes of a child printing `script`'s output.
    fn ready_of(script: &str, within: Duration) -> (Ready, Duration) {
        let mut child = std::process::Command::new("sh")
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        let mut out = child.stdout.take().expect("piped");
        let t = Instant::now();
        let r = await_ready(&mut out, within);
        let took = t.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        (r, took)
    }

    #[test]
    fn the_peer_is_ready_once_a_whole_line_says_so() {
        let (r, took) = ready_of(
            "printf 'attaching\\nready\\n'; sleep 5",
            Duration::from_secs(4),
        );
        assert_eq!(r, Ready::Said);
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }

    #[test]
    fn a_peer_that_ends_first_has_exited() {
        let (r, _) = ready_of("printf 'no probes\\n'", Duration::from_secs(4));
        assert_eq!(r, Ready::Exited);
    }

    #[test]
    fn a_silent_peer_is_given_up_at_the_deadline() {
        // "ready" without its newline is not yet a line.
        let (r, took) = ready_of("printf ready; sleep 5", Duration::from_millis(300));
        assert_eq!(r, Ready::Silent);
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }
}
