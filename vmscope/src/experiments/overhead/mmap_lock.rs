//! `vmscope overhead --mmap-lock`: what the mmap_lock probes cost where
//! they cost most. Modes, interleaved round by round: nothing attached,
//! vmscope's default probes, vmscope with `--mmap-lock`, and, where
//! installed, the peer's one-liner timing the same waits (bpftrace). Two
//! figures per mode:
//!
//! - a lock-heavy loop: one thread calling mprotect on one page back and
//!   forth, CPU time per call (each call takes and releases the write lock:
//!   three probe hits), alone so that no contention blurs it;
//! - `workload mmap-lock` beside an mprotect storm: each faulting thread's
//!   time per fault (faults that fall back to the mmap_lock fire them too).

use crate::{
    cli::{MmapLockWork, OverheadArgs, Storm},
    experiments::workload::mmap_lock::{Outcome, measure},
    stats,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum LockConfig {
    Nothing,
    Default,
    MmapLock,
    Bpftrace,
}

impl LockConfig {
    fn name(self) -> &'static str {
        match self {
            LockConfig::Nothing => "nothing attached",
            LockConfig::Default => "vmscope, default probes",
            LockConfig::MmapLock => "vmscope --mmap-lock",
            LockConfig::Bpftrace => "bpftrace wait histogram",
        }
    }
}

/// The peer: the same wait, as a histogram keyed by nothing.
const BPFTRACE_PROGRAM: &str = "BEGIN { printf(\"ready\\n\"); } \
     tracepoint:mmap_lock:mmap_lock_start_locking { @s[tid] = nsecs; } \
     tracepoint:mmap_lock:mmap_lock_acquire_returned /@s[tid]/ \
     { @w = hist(nsecs - @s[tid]); delete(@s[tid]); }";

/// CPU nanoseconds per mprotect call, over `calls` calls on one page.
fn mprotect_loop(calls: u32) -> anyhow::Result<f64> {
    let page = rustix::param::page_size();
    let map = crate::experiments::workload::AnonMap::new(2 * page)?;
    let p = map.ptr.cast::<libc::c_void>();
    let start = super::thread_cpu_ns();
    for i in 0..calls {
        let prot = if i % 2 == 0 {
            libc::PROT_READ
        } else {
            libc::PROT_READ | libc::PROT_WRITE
        };
        // SAFETY: the first page of a mapping this function owns.
        if unsafe { libc::mprotect(p, page, prot) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
    }
    Ok((super::thread_cpu_ns() - start) as f64 / f64::from(calls))
}

/// One mode's two figures: ns per mprotect call, µs per fault.
fn once(mode: LockConfig, work: &MmapLockWork) -> anyhow::Result<(f64, Outcome)> {
    let load = |mmap_lock| super::load_system_wide(mmap_lock, false);
    let run = || Ok((mprotect_loop(200_000)?, measure(work, Storm::Mprotect)?));
    match mode {
        LockConfig::Nothing => run(),
        LockConfig::Default => {
            let _probes = load(false)?;
            run()
        }
        LockConfig::MmapLock => {
            let _probes = load(true)?;
            run()
        }
        LockConfig::Bpftrace => super::with_bpftrace(BPFTRACE_PROGRAM, run),
    }
}

pub fn run(args: &OverheadArgs) -> anyhow::Result<u8> {
    let work = MmapLockWork {
        threads: None,
        faults: 200_000,
        slice: 16 << 20,
    };
    let mut modes = vec![
        LockConfig::Nothing,
        LockConfig::Default,
        LockConfig::MmapLock,
    ];
    if super::bpftrace_installed() {
        modes.push(LockConfig::Bpftrace);
    } else {
        eprintln!("bpftrace is not installed: no peer column (apt-get install bpftrace)");
    }
    once(LockConfig::Nothing, &work)?; // warm-up
    let rounds = super::interleaved(
        &modes,
        args.rounds,
        |mode| once(mode, &work),
        |(ns, o)| format!("{ns:.0} ns, {:.2} us", o.us_per_fault),
    )?;
    let mut per_call: Vec<Vec<f64>> = rounds
        .iter()
        .map(|r| r.iter().map(|(ns, _)| *ns).collect())
        .collect();
    let mut per_fault: Vec<Vec<f64>> = rounds
        .iter()
        .map(|r| r.iter().map(|(_, o)| o.us_per_fault).collect())
        .collect();
    let pc: Vec<f64> = per_call.iter_mut().map(|t| stats::median(t)).collect();
    let pf: Vec<f64> = per_fault.iter_mut().map(|t| stats::median(t)).collect();
    println!(
        "mmap_lock probe cost, {} rounds (medians): an mprotect loop (CPU per call, one \
         thread) and workload mmap-lock --storm mprotect ({} faults per thread; time per \
         fault per thread)",
        args.rounds, work.faults
    );
    for (i, mode) in modes.iter().enumerate() {
        println!(
            "  {:<26} {:7.0} ns/mprotect  {:6.2} us/fault",
            mode.name(),
            pc[i],
            pf[i]
        );
    }
    println!("against nothing attached:");
    for (i, mode) in modes.iter().enumerate().skip(1) {
        println!(
            "  {:<26} mprotect {:.3}x  fault under the storm {:.3}x",
            mode.name(),
            pc[i] / pc[0],
            pf[i] / pf[0]
        );
    }
    Ok(0)
}
