//! `vmscope workload rmap`: what reverse mapping costs reclaim.
//!
//! The parent maps `--size` bytes of anonymous memory and writes every page,
//! then forks `--sharers` children that keep it mapped (they never touch it,
//! so every page stays shared, mapped `sharers + 1` times). All of them live
//! in a memory cgroup of their own. Lowering the cgroup's limit to
//! `--memory-limit` (by default: three quarters of `--size` below the usage) then makes the writing task — this process, in the
//! write system call — reclaim the excess: each anonymous page swapped out
//! needs the reverse map to find and unmap it in every process that maps
//! it, so the time per reclaimed page grows with the number of sharers.
//!
//! Pages are filled with one repeated word each, which a zram swap device
//! stores without compressing, so the swap device's own cost stays small
//! next to the rmap walk.
//!
//! Needs root (it creates the memory cgroup) and an active swap device
//! (anonymous memory cannot be reclaimed otherwise). Prints a line for
//! people and a JSON line: `reclaim_per_page_ns` (the headline), the time of
//! the limit write, pages reclaimed (the cgroup's usage drop) and swapped
//! out (`pswpout`), and the fork and exit time per sharer, where the rmap
//! is built and torn down.

use std::{io::Write as _, os::fd::AsRawFd as _, time::Instant};

use anyhow::Context as _;

use super::{AnonMap, HeldSignals};
use crate::{
    cli::{RmapArgs, RmapWork},
    exit,
    experiments::pressure::{self, MemCgroup},
};

/// The shared memory: mapped without huge pages (reclaim would split them,
/// and the walk per base page is what is measured), every page written with
/// one repeated word of its own.
fn shared(len: usize, page: usize) -> anyhow::Result<AnonMap> {
    let m = AnonMap::new(len)?;
    // SAFETY: advice on the mapping just made.
    unsafe { libc::madvise(m.ptr.cast(), len, libc::MADV_NOHUGEPAGE) };
    let words = page / 8;
    for (i, pg) in (0..len / page).enumerate() {
        // SAFETY: page `pg` lies inside the mapping.
        let w =
            unsafe { std::slice::from_raw_parts_mut(m.ptr.add(pg * page).cast::<u64>(), words) };
        w.fill(0x5a5a_0000_0000_0000 | i as u64);
    }
    Ok(m)
}

/// Children that keep the mapping until the pipe closes, then exit.
struct Sharers {
    pids: Vec<libc::pid_t>,
    release: Option<std::os::fd::OwnedFd>,
}

impl Sharers {
    fn fork(n: usize) -> anyhow::Result<Self> {
        let (r, w) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).context("creating a pipe")?;
        let mut s = Self {
            pids: Vec::with_capacity(n),
            release: Some(w),
        };
        for _ in 0..n {
            // SAFETY: the child only makes async-signal-safe calls and ends
            // in _exit; it never touches the shared memory.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err(std::io::Error::last_os_error())
                    .context("forking a sharer (too many processes? lower --sharers)");
            }
            if pid == 0 {
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    if let Some(w) = &s.release {
                        libc::close(w.as_raw_fd());
                    }
                    let mut b = 0u8;
                    while libc::read(r.as_raw_fd(), (&raw mut b).cast(), 1) < 0 {}
                    libc::_exit(0);
                }
            }
            s.pids.push(pid);
        }
        Ok(s)
    }

    /// Lets the children exit and reaps them.
    fn end(&mut self) {
        self.release = None;
        for pid in self.pids.drain(..) {
            let mut st = 0;
            // SAFETY: waits for our own child.
            while unsafe { libc::waitpid(pid, &mut st, 0) } < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
        }
    }
}

impl Drop for Sharers {
    fn drop(&mut self) {
        self.end();
    }
}

/// The kernel's limit on process ids, which bounds how many sharers can
/// exist at once.
fn pid_max() -> u64 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 22)
}

/// Checks the settings (also `lab rmap`, before its runs): whole pages, at
/// least 16 of them and no more than this machine's memory, a limit below
/// the size, sharers the kernel can have, and a cgroup room that fits in 64
/// bits. Returns the size in bytes and the cgroup's first limit. Usage
/// errors (exit 2), one line naming the argument.
pub fn check(sharers: usize, work: &RmapWork) -> anyhow::Result<(usize, u64)> {
    let page = rustix::param::page_size();
    let size = usize::try_from(work.size).unwrap_or(usize::MAX);
    if size < 16 * page || size % page != 0 {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--size {} is too small or not a whole number of pages; give at least 16 pages",
                work.size
            ),
        ));
    }
    super::fits_memory(&[("--size", work.size)], work.size)?;
    if let Some(limit) = work.memory_limit
        && (limit == 0 || limit >= work.size)
    {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--memory-limit {limit} must be above 0 and below --size {}",
                work.size
            ),
        ));
    }
    let max = pid_max();
    let sharers_n = sharers as u64;
    if sharers_n >= max {
        return Err(exit::failure(
            exit::USAGE,
            format!("--sharers {sharers} is more processes than the kernel allows (pid_max {max})"),
        ));
    }
    // Room for the memory, and for the sharers' page tables and stacks.
    let room = super::product(&[("--size", work.size), ("", 2)])?.checked_add(super::product(&[
        ("--sharers", sharers_n.saturating_add(1)),
        ("", 1 << 20),
    ])?);
    let room = room.ok_or_else(|| {
        exit::failure(
            exit::USAGE,
            format!(
                "--size {} with --sharers {sharers} overflows 64 bits; give smaller values",
                work.size
            ),
        )
    })?;
    Ok((size, room))
}

pub fn run(args: &RmapArgs) -> anyhow::Result<u8> {
    let page = rustix::param::page_size();
    let (size, room) = check(args.sharers, &args.work)?;
    // SAFETY: no arguments, no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err(exit::failure(
            exit::NO_PRIVILEGE,
            "workload rmap creates a memory cgroup to put its memory under pressure: \
             run it as root (or through `sudo vmscope lab rmap`)",
        ));
    }
    if pressure::active_swaps()?.is_empty() {
        return Err(exit::failure(
            exit::FAILURE,
            "no swap device is active, and anonymous memory is only reclaimed by swapping it \
             out: add swap (`sudo vmscope lab rmap --setup-zram 1G` sets up a zram device for \
             the run)",
        ));
    }
    let held = HeldSignals::hold()?;
    let cg = MemCgroup::new("vmscope-rmap", room)?;
    let outcome = measure(args, &cg, size, page);
    // Back to where it came from before the cgroup goes.
    drop(cg);
    drop(held);
    let m = outcome?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "rmap: {} sharers of {} MiB, limit lowered to {} MiB: {} pages reclaimed in {:.3} s, \
         {:.0} ns per page; fork {:.1} us and exit {:.1} us per sharer",
        args.sharers,
        args.work.size >> 20,
        m.limit >> 20,
        m.reclaimed_pages,
        m.reclaim_s,
        m.per_page_ns,
        m.fork_us,
        m.exit_us
    )?;
    let doc = serde_json::json!({
        "workload": "rmap",
        "reclaim_per_page_ns": m.per_page_ns,
        "reclaim_s": m.reclaim_s,
        "reclaimed_pages": m.reclaimed_pages,
        "swapped_out_pages": m.swapped_out,
        "fork_per_sharer_us": m.fork_us,
        "exit_per_sharer_us": m.exit_us,
        "config": {
            "sharers": args.sharers,
            "size_bytes": args.work.size,
            "memory_limit_bytes": m.limit,
            "cgroup_version": m.cgroup_version,
        },
    });
    writeln!(out, "{doc}")?;
    Ok(0)
}

struct RmapFigures {
    limit: u64,
    per_page_ns: f64,
    reclaim_s: f64,
    reclaimed_pages: u64,
    swapped_out: u64,
    fork_us: f64,
    exit_us: f64,
    cgroup_version: u8,
}

fn measure(
    args: &RmapArgs,
    cg: &MemCgroup,
    size: usize,
    page: usize,
) -> anyhow::Result<RmapFigures> {
    cg.enter()?;
    let shared = shared(size, page)?;
    let t = Instant::now();
    let mut sharers = Sharers::fork(args.sharers)?;
    let fork_s = t.elapsed().as_secs_f64();
    let before = cg.usage()?;
    // By default, reclaim three quarters of the shared memory, whatever the
    // sharers' own page tables and stacks add to the usage.
    let limit = args
        .work
        .memory_limit
        .unwrap_or_else(|| before.saturating_sub(args.work.size / 4 * 3));
    let swp0 = pressure::vmstat()?.get("pswpout").copied().unwrap_or(0);
    let t = Instant::now();
    cg.set_limit(limit).with_context(|| {
        format!("lowering the memory limit to {limit} bytes (is the swap device big enough?)")
    })?;
    let reclaim_s = t.elapsed().as_secs_f64();
    let after = cg.usage()?;
    let swp1 = pressure::vmstat()?.get("pswpout").copied().unwrap_or(0);
    let reclaimed_pages = before.saturating_sub(after) / page as u64;
    if reclaimed_pages == 0 {
        anyhow::bail!("the memory cgroup reclaimed nothing (usage {before} -> {after} bytes)");
    }
    let t = Instant::now();
    sharers.end();
    let exit_s = t.elapsed().as_secs_f64();
    drop(shared);
    let per = |s: f64| s * 1e6 / args.sharers.max(1) as f64;
    Ok(RmapFigures {
        limit,
        per_page_ns: reclaim_s * 1e9 / reclaimed_pages as f64,
        reclaim_s,
        reclaimed_pages,
        swapped_out: swp1.saturating_sub(swp0),
        fork_us: per(fork_s),
        exit_us: per(exit_s),
        cgroup_version: cg.version(),
    })
}
