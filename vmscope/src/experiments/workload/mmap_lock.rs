//! `vmscope workload mmap-lock`: mmap_lock contention between page faults
//! and a thread that changes the same mapping.
//!
//! One anonymous mapping holds a slice per faulting thread and, at its end,
//! one page no thread touches. Each faulting thread writes one byte to every
//! page of its slice (a fault per page), releases the slice with
//! `MADV_DONTNEED`, and goes round until it has faulted `--faults` pages.
//! Meanwhile the storm thread, until the faulting threads are done:
//!
//! - `--storm mprotect`: makes that last page read-only and writable again,
//!   which splits the mapping and merges it back, each under the write lock;
//! - `--storm mmap`: maps a fresh page over it (`MAP_FIXED`), which does the
//!   same;
//! - `--storm none`: nothing (the control).
//!
//! A fault normally takes only the lock of its own mapping (per-VMA locks),
//! not the mmap_lock; while the storm holds the mapping for writing the
//! fault falls back to the mmap_lock and waits behind it. So the faulting
//! threads' mmap_lock read waits grow with the storm, and their faults slow
//! down. The work is fixed (`--threads` × `--faults`), so runs compare; it
//! prints a line for people and a JSON line for `bench` and `compare`.

use std::{
    io::Write as _,
    sync::{
        Arc, Barrier,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use anyhow::Context as _;

use super::AnonMap;
use crate::{
    cli::{MmapLockArgs, MmapLockWork, Storm},
    exit,
};

impl Storm {
    pub fn name(self) -> &'static str {
        match self {
            Storm::Mprotect => "mprotect",
            Storm::Mmap => "mmap",
            Storm::None => "none",
        }
    }
}

/// The checked size of a run.
pub struct RunSize {
    pub threads: usize,
    /// Pages in one thread's slice.
    pub slice_pages: usize,
}

/// Refuses sizes that cannot run, before anything is mapped.
pub fn check(work: &MmapLockWork) -> anyhow::Result<RunSize> {
    let page = rustix::param::page_size() as u64;
    let threads = work.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    if threads == 0 {
        return Err(exit::failure(exit::USAGE, "--threads must be at least 1"));
    }
    if work.slice < page || !work.slice.is_multiple_of(page) {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--slice {} is not a whole number of pages; give a multiple of {page}",
                work.slice
            ),
        ));
    }
    let all = [("--threads", threads as u64), ("--slice", work.slice)];
    let bytes = super::product(&all)?.saturating_add(page);
    super::fits_memory(&all, bytes)?;
    Ok(RunSize {
        threads,
        slice_pages: usize::try_from(work.slice / page).unwrap_or(usize::MAX),
    })
}

/// One faulting thread: `faults` pages faulted in its slice at `base`.
/// Returns its own time in seconds.
fn fault(base: usize, pages: usize, faults: u64, start: &Barrier) -> anyhow::Result<f64> {
    let page = rustix::param::page_size();
    start.wait();
    let t = Instant::now();
    let mut left = faults;
    while left > 0 {
        let n = pages.min(usize::try_from(left).unwrap_or(usize::MAX));
        for i in 0..n {
            // SAFETY: page i of this thread's slice, inside the mapping that
            // outlives every thread; no other thread writes this slice.
            unsafe { std::ptr::write_volatile((base + i * page) as *mut u8, 1) };
        }
        // SAFETY: releases this thread's own slice of the mapping.
        let r = unsafe { libc::madvise(base as *mut libc::c_void, n * page, libc::MADV_DONTNEED) };
        if r != 0 {
            return Err(std::io::Error::last_os_error()).context("madvise(MADV_DONTNEED)");
        }
        left -= n as u64;
    }
    Ok(t.elapsed().as_secs_f64())
}

/// The storm: changes the page at `at` until `done`. Returns the calls made.
fn storm(kind: Storm, at: usize, done: &AtomicBool, start: &Barrier) -> anyhow::Result<u64> {
    let page = rustix::param::page_size();
    let p = at as *mut libc::c_void;
    start.wait();
    let mut calls = 0u64;
    while !done.load(Ordering::Relaxed) {
        // SAFETY: `at` is the mapping's last page, which no faulting thread
        // touches; both calls keep it an anonymous private page.
        let ok = unsafe {
            match kind {
                Storm::Mprotect => {
                    libc::mprotect(p, page, libc::PROT_READ) == 0
                        && libc::mprotect(p, page, libc::PROT_READ | libc::PROT_WRITE) == 0
                }
                Storm::Mmap => {
                    libc::mmap(
                        p,
                        page,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                        -1,
                        0,
                    ) == p
                }
                Storm::None => return Ok(0),
            }
        };
        if !ok {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("the {} storm", kind.name()));
        }
        calls += if kind == Storm::Mprotect { 2 } else { 1 };
    }
    Ok(calls)
}

/// One run's figures.
pub struct Outcome {
    pub threads: usize,
    pub slice_bytes: usize,
    /// Wall time of the faulting work.
    pub elapsed_s: f64,
    /// Each faulting thread's own time per fault, the median thread's.
    pub us_per_fault: f64,
    pub storm_calls: u64,
}

/// Runs the workload: `work.faults` per thread beside `storm`.
pub fn measure(work: &MmapLockWork, storm: Storm) -> anyhow::Result<Outcome> {
    let RunSize {
        threads,
        slice_pages,
    } = check(work)?;
    let page = rustix::param::page_size();
    let map = AnonMap::new((threads * slice_pages + 1) * page)?;
    let base = map.ptr as usize;
    let last = base + threads * slice_pages * page;
    let start = Arc::new(Barrier::new(threads + 2));
    let done = Arc::new(AtomicBool::new(false));
    let faults = work.faults;
    let workers = (0..threads)
        .map(|i| {
            let start = Arc::clone(&start);
            let at = base + i * slice_pages * page;
            std::thread::Builder::new()
                .spawn(move || fault(at, slice_pages, faults, &start))
                .with_context(|| format!("starting faulting thread {} (fewer --threads?)", i + 1))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let stormer = {
        let (start, done) = (Arc::clone(&start), Arc::clone(&done));
        std::thread::Builder::new()
            .spawn(move || self::storm(storm, last, &done, &start))
            .context("starting the storm thread")?
    };
    start.wait();
    let t = Instant::now();
    let mut secs = Vec::with_capacity(threads);
    let mut failed = None;
    for h in workers {
        match h.join() {
            Ok(Ok(s)) => secs.push(s),
            Ok(Err(e)) => failed = Some(e),
            Err(_) => failed = Some(anyhow::anyhow!("a faulting thread panicked")),
        }
    }
    let elapsed_s = t.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let storm_calls = match stormer.join() {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => return Err(e),
        Err(_) => anyhow::bail!("the storm thread panicked"),
    };
    if let Some(e) = failed {
        return Err(e);
    }
    secs.sort_by(f64::total_cmp);
    Ok(Outcome {
        threads,
        slice_bytes: slice_pages * page,
        elapsed_s,
        us_per_fault: secs[secs.len() / 2] * 1e6 / faults as f64,
        storm_calls,
    })
}

pub fn run(args: &MmapLockArgs) -> anyhow::Result<u8> {
    let o = measure(&args.work, args.storm)?;
    let (threads, faults) = (o.threads, args.work.faults);
    let total = faults * threads as u64;
    let rate = total as f64 / o.elapsed_s;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "mmap-lock: {threads} threads x {faults} faults, storm {}: {rate:.0} faults/s, \
         {:.2} us per fault per thread (median), {} storm calls ({:.0}/s) in {:.3} s",
        args.storm.name(),
        o.us_per_fault,
        o.storm_calls,
        o.storm_calls as f64 / o.elapsed_s,
        o.elapsed_s,
    )?;
    let doc = serde_json::json!({
        "workload": "mmap-lock",
        "faults_per_sec": rate,
        "us_per_fault": o.us_per_fault,
        "elapsed_s": o.elapsed_s,
        "faults": total,
        "storm_calls": o.storm_calls,
        "config": {
            "storm": args.storm.name(),
            "threads": threads,
            "faults_per_thread": faults,
            "slice_bytes": o.slice_bytes,
        },
    });
    writeln!(out, "{doc}")?;
    Ok(0)
}
