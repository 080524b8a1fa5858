//! `vmscope workload compaction`: direct compaction on demand.
//!
//! A machine with plenty of free memory never compacts: a huge page is
//! taken from a free block. So the workload first makes the free memory
//! fragmented, then takes every free block of huge-page size out of reach,
//! then asks for huge pages:
//!
//! 1. fill `--fill` of anonymous memory (MADV_NOHUGEPAGE), a byte per page;
//! 2. free the first half of every 128 KiB of it (MADV_DONTNEED): holes
//!    smaller than a huge page, half of `--fill` in all;
//! 3. raise the hugetlb pool (`vm.nr_hugepages`) by the number of free
//!    blocks of huge-page order and above in `/proc/buddyinfo`, less
//!    `--margin` (the kernel keeps some it will not hand out), until at most
//!    that many are left: the rest of free memory, in big blocks, now sits
//!    in the pool, untouched;
//! 4. fault `--huge` of MADV_HUGEPAGE memory, plus a huge page for each
//!    free block still left (on a small machine those can be most of what
//!    THP would take): the huge pages beyond them find no free block and
//!    compact directly (with the default `defrag` setting, `madvise`),
//!    migrating the filled pages out of the way.
//!
//! Then it unmaps everything and puts `vm.nr_hugepages` back, also when
//! interrupted (Ctrl-C is held until then). Prints a line for people and a
//! JSON line with the time of each step and the kernel's own counts
//! (`/proc/vmstat`) over the run.
//!
//! Needs root (the pool is system-wide) and transparent huge pages allowed
//! for MADV_HUGEPAGE memory, with direct compaction for it.

use std::{collections::BTreeMap, io::Write as _, path::Path, time::Instant};

use anyhow::Context as _;

use super::{AnonMap, HeldSignals, fmt_bytes};
use crate::{cli::CompactionArgs, exit};

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";
const THP: &str = "/sys/kernel/mm/transparent_hugepage";
/// The vmstat counts reported.
const COUNTS: [&str; 6] = [
    "compact_stall",
    "compact_success",
    "compact_fail",
    "pgmigrate_success",
    "thp_fault_alloc",
    "thp_fault_fallback",
];
/// The fragmenting stride: the first half of each is freed.
const STRIDE: usize = 128 << 10;

fn read_u64(path: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    text.trim()
        .parse()
        .with_context(|| format!("{path} is not a number: {text:?}"))
}

fn write_u64(path: &str, v: u64) -> anyhow::Result<()> {
    std::fs::write(path, v.to_string()).with_context(|| format!("writing {v} to {path}"))
}

/// The pool size as found, written back when dropped, and by a watcher
/// process when this one dies without dropping it (the OOM killer's
/// SIGKILL): a pool left raised takes most of a small machine's memory
/// from whatever runs next.
struct RestorePool {
    found: u64,
    /// The write end of the watcher's pipe; its closing without a byte
    /// written means this process died.
    watcher: Option<std::os::fd::OwnedFd>,
}

impl RestorePool {
    fn new(found: u64) -> Self {
        Self {
            found,
            watcher: spawn_watcher(found),
        }
    }
}

impl Drop for RestorePool {
    fn drop(&mut self) {
        match write_u64(NR_HUGEPAGES, self.found) {
            Ok(()) => {
                if let Some(fd) = self.watcher.take() {
                    let _ = rustix::io::write(&fd, b"k");
                }
            }
            Err(e) => eprintln!(
                "vmscope: putting vm.nr_hugepages back to {}: {e:#}",
                self.found
            ),
        }
    }
}

/// Forks the watcher: it waits on a pipe and, when the pipe closes with
/// nothing written, writes `found` back to the pool. Without it (fork or
/// pipe refused) the pool is still restored on every exit but a SIGKILL.
fn spawn_watcher(found: u64) -> Option<std::os::fd::OwnedFd> {
    let value = found.to_string();
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok()?;
    // SAFETY: this process has one thread (the workload's), so the child
    // may do anything; it only reads, writes two files and exits.
    match unsafe { libc::fork() } {
        0 => {
            drop(w);
            let _ = std::fs::write("/proc/self/oom_score_adj", "-1000");
            let mut b = [0u8; 1];
            let clean = matches!(rustix::io::read(&r, &mut b), Ok(1));
            if !clean {
                let _ = std::fs::write(NR_HUGEPAGES, &value);
            }
            // SAFETY: ends the watcher without running the parent's
            // destructors or flushing its buffers.
            unsafe { libc::_exit(0) }
        }
        pid if pid > 0 => Some(w),
        _ => None,
    }
}

/// The bracketed choice of a THP setting file (`always [madvise] never`).
fn thp_setting(name: &str) -> anyhow::Result<String> {
    let path = Path::new(THP).join(name);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.split_once('[')
        .and_then(|(_, r)| r.split_once(']'))
        .map(|(v, _)| v.to_string())
        .with_context(|| format!("{}: no [choice] in {text:?}", path.display()))
}

/// The huge page's order (9 for 2 MiB pages of 4 KiB).
fn huge_order() -> anyhow::Result<u32> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    let kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("Hugepagesize:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("/proc/meminfo has no Hugepagesize")?;
    let pages = kb * 1024 / rustix::param::page_size() as u64;
    Ok(pages.max(1).ilog2())
}

fn meminfo_bytes(key: &str) -> anyhow::Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .with_context(|| format!("/proc/meminfo has no {key}"))
}

/// Free blocks of order `order` and above over every zone, in blocks of
/// that order (an order+1 block counts twice).
fn free_blocks(buddyinfo: &str, order: u32) -> u64 {
    buddyinfo
        .lines()
        .filter_map(|l| l.split_once("zone").map(|(_, r)| r))
        .map(|r| {
            r.split_whitespace()
                .skip(1)
                .filter_map(|n| n.parse::<u64>().ok())
                .enumerate()
                .filter(|(o, _)| *o as u32 >= order)
                .map(|(o, n)| n << (o as u32 - order))
                .sum::<u64>()
        })
        .sum()
}

fn vmstat() -> anyhow::Result<BTreeMap<String, u64>> {
    let text = std::fs::read_to_string("/proc/vmstat").context("reading /proc/vmstat")?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            COUNTS
                .contains(&k)
                .then(|| Some((k.to_string(), v.trim().parse().ok()?)))?
        })
        .collect())
}

/// The arguments' and the system's errors, before anything is changed.
fn check(a: &CompactionArgs) -> anyhow::Result<u32> {
    let order = huge_order()?;
    let huge = (rustix::param::page_size() as u64) << order;
    if a.fill < 2 * STRIDE as u64 || a.huge < huge {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--fill {} or --huge {} is too small; give at least 256K and one huge page ({})",
                a.fill,
                a.huge,
                fmt_bytes(huge)
            ),
        ));
    }
    let wanted = a.fill.saturating_add(a.huge);
    let available = meminfo_bytes("MemAvailable")?;
    // Kept free beside them: an eighth of memory, at most 2 GiB.
    let spare = (meminfo_bytes("MemTotal")? / 8).min(2 << 30);
    if wanted.saturating_add(spare) > available {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--fill {} and --huge {} need {} with {} to spare, and {} is available; give \
                 smaller values",
                fmt_bytes(a.fill),
                fmt_bytes(a.huge),
                fmt_bytes(wanted),
                fmt_bytes(spare),
                fmt_bytes(available)
            ),
        ));
    }
    let enabled = thp_setting("enabled")?;
    let defrag = thp_setting("defrag")?;
    if enabled == "never" || !matches!(defrag.as_str(), "always" | "madvise" | "defer+madvise") {
        return Err(exit::failure(
            exit::FAILURE,
            format!(
                "transparent huge pages are {enabled:?} with defrag {defrag:?}: MADV_HUGEPAGE \
                 faults would not compact; set {THP}/enabled to madvise or always and defrag to \
                 madvise, defer+madvise or always"
            ),
        ));
    }
    Ok(order)
}

/// Steps 1 and 2: the filled mapping, half freed in small holes.
fn fragment(fill: u64) -> anyhow::Result<AnonMap> {
    let page = rustix::param::page_size();
    let len = usize::try_from(fill).unwrap_or(usize::MAX) / STRIDE * STRIDE;
    let map = AnonMap::new(len)?;
    // SAFETY: the whole of a mapping owned here.
    unsafe {
        libc::madvise(map.ptr.cast(), len, libc::MADV_NOHUGEPAGE);
        for i in (0..len).step_by(page) {
            std::ptr::write_volatile(map.ptr.add(i), 1);
        }
        for i in (0..len).step_by(STRIDE) {
            if libc::madvise(map.ptr.add(i).cast(), STRIDE / 2, libc::MADV_DONTNEED) != 0 {
                return Err(std::io::Error::last_os_error()).context("madvise(MADV_DONTNEED)");
            }
        }
    }
    Ok(map)
}

fn blocks_left(order: u32) -> anyhow::Result<u64> {
    let info = std::fs::read_to_string("/proc/buddyinfo").context("reading /proc/buddyinfo")?;
    Ok(free_blocks(&info, order))
}

/// Free memory outside the pool that step 4 must be able to count on: the
/// huge fault falls back to small pages, and the kernel and the recorder
/// go on allocating.
fn reserve() -> anyhow::Result<u64> {
    Ok((meminfo_bytes("MemTotal")? / 64).clamp(64 << 20, 256 << 20))
}

/// Step 3: the free blocks of huge-page order into the pool, all but
/// `margin`. Returns the pages added and the blocks left.
///
/// Filling the pool can compact the filled pages' holes into blocks and
/// take those too, leaving step 4 nothing to fall back on (an OOM kill on a
/// 2 GiB machine). So available memory outside the free blocks (small free
/// blocks and reclaimable cache) must stay at `huge` plus the reserve, and
/// the pool gives back what it took beyond that.
fn pad(order: u32, margin: u64, found: u64, huge: u64) -> anyhow::Result<(u64, u64)> {
    let huge_page = (rustix::param::page_size() as u64) << order;
    let floor = huge.saturating_add(reserve()?);
    // Six raises at most, each checked after.
    for raise in 0..=6 {
        let blocks = blocks_left(order)?;
        let small = meminfo_bytes("MemAvailable")?.saturating_sub(blocks * huge_page);
        let now = read_u64(NR_HUGEPAGES)?;
        if small < floor {
            let back = (floor - small)
                .div_ceil(huge_page)
                .min(now - found.min(now));
            write_u64(NR_HUGEPAGES, now - back)?;
            break;
        }
        if blocks <= margin || raise == 6 {
            break;
        }
        write_u64(NR_HUGEPAGES, now + (blocks - margin))?;
    }
    Ok((
        read_u64(NR_HUGEPAGES)?.saturating_sub(found),
        blocks_left(order)?,
    ))
}

/// Step 4: `huge` bytes of MADV_HUGEPAGE memory faulted, a byte per page.
fn fault_huge(huge: u64, order: u32) -> anyhow::Result<()> {
    let page = rustix::param::page_size();
    let align = page << order;
    let len = usize::try_from(huge).unwrap_or(usize::MAX) / align * align;
    let map = AnonMap::new(len + align)?;
    let start = (map.ptr as usize).next_multiple_of(align) as *mut u8;
    // SAFETY: `start..start + len` lies inside the mapping owned here.
    unsafe {
        if libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE) != 0 {
            return Err(std::io::Error::last_os_error()).context("madvise(MADV_HUGEPAGE)");
        }
        for i in (0..len).step_by(page) {
            std::ptr::write_volatile(start.add(i), 1);
        }
    }
    Ok(())
}

pub fn run(a: &CompactionArgs) -> anyhow::Result<u8> {
    let order = check(a)?;
    // SAFETY: no arguments, no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err(exit::failure(
            exit::NO_PRIVILEGE,
            "workload compaction resizes the hugetlb pool (vm.nr_hugepages), a system-wide \
             setting: run it as root",
        ));
    }
    let held = HeldSignals::hold()?;
    let before = vmstat()?;
    let found = read_u64(NR_HUGEPAGES)?;
    let restore = RestorePool::new(found);
    let t = Instant::now();
    let filled = fragment(a.fill)?;
    let fill_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (pooled, left) = pad(order, a.margin, found, a.huge)?;
    let pad_s = t.elapsed().as_secs_f64();
    let huge_page = (rustix::param::page_size() as u64) << order;
    let huge = a.huge.saturating_add(left.saturating_mul(huge_page));
    let t = Instant::now();
    let faulted = if held.pending() {
        Ok(())
    } else {
        fault_huge(huge, order)
    };
    let huge_s = t.elapsed().as_secs_f64();
    drop(filled);
    drop(restore);
    faulted?;
    let after = vmstat()?;
    drop(held);
    let delta: BTreeMap<&str, u64> = COUNTS
        .iter()
        .map(|k| {
            let d = after
                .get(*k)
                .zip(before.get(*k))
                .map_or(0, |(a, b)| a.saturating_sub(*b));
            (*k, d)
        })
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "compaction: {} filled and half freed in {fill_s:.2} s; {pooled} huge pages pooled in \
         {pad_s:.2} s ({left} free blocks left); {} of MADV_HUGEPAGE faulted in {huge_s:.2} s: \
         compact_stall +{}, \
         compact_success +{}, pgmigrate_success +{}, thp_fault_alloc +{}, thp_fault_fallback +{}",
        fmt_bytes(a.fill),
        fmt_bytes(huge),
        delta["compact_stall"],
        delta["compact_success"],
        delta["pgmigrate_success"],
        delta["thp_fault_alloc"],
        delta["thp_fault_fallback"],
    )?;
    let doc = serde_json::json!({
        "workload": "compaction",
        "huge_fault_s": huge_s,
        "fill_s": fill_s,
        "pad_s": pad_s,
        "pooled_huge_pages": pooled,
        "free_blocks_left": left,
        "huge_faulted_bytes": huge,
        "vmstat": delta,
        "config": {
            "fill_bytes": a.fill,
            "huge_bytes": a.huge,
            "margin": a.margin,
            "huge_order": order,
        },
    });
    writeln!(out, "{doc}")?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_blocks_count_orders_at_and_above_in_that_order() {
        let info = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3\n\
                    Node 0, zone   Normal  24864   9781  15309   9358   3088   1520    902    364    197    250   4051\n";
        // Order 9: 1 + 3×2 in DMA, 250 + 4051×2 in Normal.
        assert_eq!(free_blocks(info, 9), 1 + 6 + 250 + 8102);
        assert_eq!(free_blocks(info, 10), 3 + 4051);
        assert_eq!(free_blocks("", 9), 0);
    }
}
