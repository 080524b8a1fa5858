//! `vmscope overhead --syscalls`: what vmscope costs programs that make
//! memory syscalls in a loop (allocators, runtimes, JITs). Four loops, CPU
//! time per iteration of one thread:
//!
//! - map 64 KiB, touch its 16 pages, unmap it (the shape of an
//!   allocator-heavy program: two syscalls, 16 faults, a TLB flush);
//! - mprotect one page back and forth;
//! - madvise(MADV_NORMAL) on one page (a call that does nothing: what
//!   vmscope's madvise hooks cost per call);
//! - getppid (a syscall vmscope does not follow: what any hooked syscall
//!   event costs every other syscall on the machine).
//!
//! Modes, interleaved and rotated round by round: nothing attached,
//! vmscope's default probes, vmscope with `--syscall-latency`, and, where
//! installed, the peer's one-liner counting the loop's three syscalls per
//! process (bpftrace).

use crate::{cli::OverheadArgs, experiments::workload::AnonMap, source::loader};

#[derive(Clone, Copy, PartialEq, Eq)]
enum SyscallMode {
    Nothing,
    Default,
    SyscallLatency,
    Bpftrace,
}

impl SyscallMode {
    fn name(self) -> &'static str {
        match self {
            SyscallMode::Nothing => "nothing attached",
            SyscallMode::Default => "vmscope, default probes",
            SyscallMode::SyscallLatency => "vmscope --syscall-latency",
            SyscallMode::Bpftrace => "bpftrace count per pid",
        }
    }
}

/// The peer: the loop's syscalls counted per process.
const BPFTRACE_PROGRAM: &str = "BEGIN { printf(\"ready\\n\"); } \
     tracepoint:syscalls:sys_enter_mmap, tracepoint:syscalls:sys_enter_munmap, \
     tracepoint:syscalls:sys_enter_mprotect { @[pid] = count(); }";

const LOOPS: [&str; 4] = [
    "mmap+touch+munmap 64 KiB",
    "mprotect",
    "madvise(NORMAL)",
    "getppid",
];

/// CPU nanoseconds per iteration of `f`, run `n` times.
fn per_call(n: u32, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let start = super::thread_cpu_ns();
    for _ in 0..n {
        f()?;
    }
    Ok((super::thread_cpu_ns() - start) as f64 / f64::from(n))
}

fn check(rc: libc::c_int, what: &str) -> anyhow::Result<()> {
    if rc != 0 {
        return Err(anyhow::Error::new(std::io::Error::last_os_error()).context(what.to_string()));
    }
    Ok(())
}

/// One pass of every loop; `scale` sizes them (iterations per loop).
pub(super) fn loops(scale: u32) -> anyhow::Result<[f64; 4]> {
    let page = rustix::param::page_size();
    let map_touch_unmap = per_call(scale / 10, || {
        let m = AnonMap::new(16 * page)?;
        for i in 0..16 {
            // SAFETY: within the mapping just made.
            unsafe { std::ptr::write_volatile(m.ptr.add(i * page), 1) };
        }
        Ok(()) // unmapped on drop
    })?;
    let one = AnonMap::new(2 * page)?;
    let p = one.ptr.cast::<libc::c_void>();
    let mut i = 0u32;
    let mprotect = per_call(scale, || {
        i += 1;
        let prot = if i.is_multiple_of(2) {
            libc::PROT_READ
        } else {
            libc::PROT_READ | libc::PROT_WRITE
        };
        // SAFETY: the first page of a mapping this function owns.
        check(unsafe { libc::mprotect(p, page, prot) }, "mprotect")
    })?;
    // SAFETY: advice that changes nothing, on a mapping this function owns.
    let madvise = per_call(scale, || {
        check(
            unsafe { libc::madvise(p, page, libc::MADV_NORMAL) },
            "madvise",
        )
    })?;
    let getppid = per_call(scale, || {
        // SAFETY: a syscall without arguments or effects.
        std::hint::black_box(unsafe { libc::getppid() });
        Ok(())
    })?;
    Ok([map_touch_unmap, mprotect, madvise, getppid])
}

fn once(mode: SyscallMode, scale: u32) -> anyhow::Result<[f64; 4]> {
    let load = |syscall_latency| super::load_system_wide(false, syscall_latency);
    match mode {
        SyscallMode::Nothing => loops(scale),
        SyscallMode::Default => {
            let _probes = load(false)?;
            loops(scale)
        }
        SyscallMode::SyscallLatency => {
            let _probes = load(true)?;
            loops(scale)
        }
        SyscallMode::Bpftrace => super::with_bpftrace(BPFTRACE_PROGRAM, || loops(scale)),
    }
}

pub fn run(args: &OverheadArgs) -> anyhow::Result<u8> {
    crate::source::kernel::tracefs::tracefs().map_err(|e| anyhow::anyhow!(e))?;
    // 200,000 calls of each one-page loop, 20,000 of the 64 KiB one.
    let scale = 200_000;
    let mut modes = vec![
        SyscallMode::Nothing,
        SyscallMode::Default,
        SyscallMode::SyscallLatency,
    ];
    if super::bpftrace_installed() {
        modes.push(SyscallMode::Bpftrace);
    } else {
        eprintln!("bpftrace is not installed: no peer column (apt-get install bpftrace)");
    }
    loops(scale / 10)?; // warm-up
    let rounds = super::interleaved(
        &modes,
        args.rounds,
        |mode| once(mode, scale),
        |r| format!("{:.0}/{:.0} ns", r[0], r[1]),
    )?;
    let med = super::medians(&rounds);
    print(&modes, &med, args.rounds);
    per_program(scale)?;
    Ok(0)
}

/// One more pass with `--syscall-latency`, under the kernel's run-time
/// statistics (which add two clock reads to every program run, so they
/// stay off while the loops are timed): each vmscope program that ran, its
/// runs and its mean time per run.
fn per_program(scale: u32) -> anyhow::Result<()> {
    use aya::programs::loaded_programs;
    let before: std::collections::HashSet<u32> = loaded_programs()
        .filter_map(Result::ok)
        .map(|p| p.id())
        .collect();
    let stats = match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
        Ok(fd) => fd,
        Err(e) => {
            println!("per-program cost: unavailable (the kernel's run-time statistics: {e})");
            return Ok(());
        }
    };
    let _probes = super::load_system_wide(false, true)?;
    loops(scale / 2)?;
    let mut rows: Vec<(String, u64, f64)> = loaded_programs()
        .filter_map(Result::ok)
        .filter(|p| !before.contains(&p.id()) && p.run_count() > 0)
        .map(|p| {
            let name = p.name_as_str().unwrap_or("?").to_string();
            let runs = p.run_count();
            (name, runs, p.run_time().as_nanos() as f64 / runs as f64)
        })
        .collect();
    drop(stats);
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    println!(
        "per-program cost in one more pass with --syscall-latency (the kernel's run-time \
         statistics; each run also pays two clock reads for them):"
    );
    for (name, runs, ns) in rows.iter().take(16) {
        println!("  {name:<28} {runs:>10} runs {ns:>8.0} ns/run");
    }
    Ok(())
}

fn print(modes: &[SyscallMode], med: &[[f64; 4]], rounds: u32) {
    let swap = if loader::swap_active() {
        "active"
    } else {
        "not active"
    };
    println!(
        "syscall-loop cost, {rounds} rounds (medians, CPU ns per iteration; swap device {swap}):"
    );
    println!("  {:<28}{}", "", LOOPS.map(|l| format!("{l:>26}")).join(""));
    for (mode, m) in modes.iter().zip(med) {
        let cells = [0, 1, 2, 3].map(|l| format!("{:>26.0}", m[l]));
        println!("  {:<28}{}", mode.name(), cells.join(""));
    }
    println!("against nothing attached:");
    for (mode, m) in modes.iter().zip(med).skip(1) {
        let cells = [0, 1, 2, 3].map(|l| format!("{:>25.3}x", m[l] / med[0][l]));
        println!("  {:<28}{}", mode.name(), cells.join(""));
    }
    let peer = modes.iter().position(|&m| m == SyscallMode::Bpftrace);
    if let Some(b) = peer {
        println!("vmscope's added cost / the peer's (goal <= 0.5):");
        for (mode, m) in modes.iter().zip(med).skip(1).take(2) {
            let cells = [0, 1, 2, 3].map(|l| {
                let peer = med[b][l] - med[0][l];
                if peer > 0.0 {
                    format!("{:>26.2}", (m[l] - med[0][l]) / peer)
                } else {
                    format!("{:>26}", "n/a (peer in noise)")
                }
            });
            println!("  {:<28}{}", mode.name(), cells.join(""));
        }
    }
}
