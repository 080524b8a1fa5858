//! `vmscope workload lazyfree`: the lazy-free experiment, after the classic
//! allocator benchmark that showed MADV_FREE's gain.
//!
//! N threads each own a pool of chunks of anonymous memory. A record is:
//! take a chunk (chosen by a fixed pseudo-random sequence per thread), fill
//! it by copying a source buffer into it, search it for a key, then release
//! it with `madvise(MADV_DONTNEED)` or `madvise(MADV_FREE)` (`--free`).
//!
//! After DONTNEED the next fill faults in fresh zeroed pages; after FREE the
//! pages stay mapped and the fill only re-dirties them, unless reclaim took
//! them meanwhile. So without memory pressure FREE should cost no faults per
//! record after the first use of each chunk, and DONTNEED one per page.
//!
//! The work is fixed (`--threads` × `--records` records, each one
//! `madvise`), so runs compare; it prints a line for people and a JSON line
//! with records/s for `bench` and `compare`.

use std::{
    io::Write as _,
    sync::{Arc, Barrier},
    time::Instant,
};

use anyhow::Context as _;

use super::AnonMap;
use crate::{
    cli::{FreeMode, LazyfreeArgs, LazyfreeWork},
    exit,
};

impl FreeMode {
    fn advice(self) -> libc::c_int {
        match self {
            FreeMode::Dontneed => libc::MADV_DONTNEED,
            FreeMode::Free => libc::MADV_FREE,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FreeMode::Dontneed => "dontneed",
            FreeMode::Free => "free",
        }
    }
}

/// A fixed pseudo-random sequence (xorshift64), seeded per thread.
struct Seq(u64);

impl Seq {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// One thread's records. Returns how many words matched the keys (so the
/// search is not optimised away, and the same for every run).
fn worker(index: usize, args: &LazyfreeArgs, chunk: usize, start: &Barrier) -> anyhow::Result<u64> {
    // `check` made sure this fits (and memory holds it).
    let len = chunk
        .checked_mul(args.work.chunks)
        .context("--chunks × --chunk-size overflows")?;
    let pool = AnonMap::new(len)?;
    let mut seq = Seq(0x9e37_79b9_7f4a_7c15 ^ (index as u64 + 1));
    let words = chunk / 8;
    let source: Vec<u64> = (0..words).map(|_| seq.next() % 1024).collect();
    let advice = args.free.advice();
    let mut matched = 0u64;
    start.wait();
    for _ in 0..args.work.records {
        let c = (seq.next() % args.work.chunks as u64) as usize;
        let key = seq.next() % 1024;
        // SAFETY: chunk `c` lies inside `pool` (c < chunks); the slice is
        // used only within this iteration and nothing else aliases it.
        let mem =
            unsafe { std::slice::from_raw_parts_mut(pool.ptr.add(c * chunk).cast::<u64>(), words) };
        mem.copy_from_slice(&source);
        matched += mem.iter().filter(|&&w| w == key).count() as u64;
        // SAFETY: the range is this thread's own chunk, no longer used.
        if unsafe { libc::madvise(mem.as_mut_ptr().cast(), chunk, advice) } != 0 {
            let e = std::io::Error::last_os_error();
            let hint = if e.raw_os_error() == Some(libc::EINVAL) && advice == libc::MADV_FREE {
                " (this kernel has no MADV_FREE; it needs Linux 4.5)"
            } else {
                ""
            };
            return Err(e).with_context(|| format!("madvise({}){hint}", args.free.name()));
        }
    }
    Ok(std::hint::black_box(matched))
}

/// What `workload lazyfree` runs with, checked.
pub struct CheckedArgs {
    pub threads: usize,
    /// Bytes of one chunk.
    pub chunk: usize,
    /// Records in all.
    pub records: u64,
}

/// Checks the settings (also `lab lazyfree`, before its runs): every count
/// at least 1, whole pages, and a pool per thread (plus its source buffer)
/// that fits in 64 bits and, over all threads, in this machine's memory.
/// Usage errors (exit 2), one line naming the arguments.
pub fn check(work: &LazyfreeWork) -> anyhow::Result<CheckedArgs> {
    let page = rustix::param::page_size();
    let threads = work.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    if threads == 0 || work.records == 0 || work.chunks == 0 {
        return Err(exit::failure(
            exit::USAGE,
            "--threads, --records and --chunks must be at least 1",
        ));
    }
    let chunk = usize::try_from(work.chunk_size).unwrap_or(usize::MAX);
    if chunk < page || chunk % page != 0 {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--chunk-size {} is not a whole number of pages; give a multiple of {page}",
                work.chunk_size
            ),
        ));
    }
    let (threads_n, chunks_n) = (threads as u64, work.chunks as u64);
    let pool = [("--chunks", chunks_n), ("--chunk-size", work.chunk_size)];
    super::product(&pool)?;
    let all = [
        ("--threads", threads_n),
        ("--chunks", chunks_n),
        ("--chunk-size", work.chunk_size),
    ];
    // Each thread also holds one chunk's worth of source buffer.
    let bytes = super::product(&all)?.saturating_add(threads_n.saturating_mul(work.chunk_size));
    super::fits_memory(&all, bytes)?;
    let records = super::product(&[("--threads", threads_n), ("--records", work.records)])?;
    Ok(CheckedArgs {
        threads,
        chunk,
        records,
    })
}

pub fn run(args: &LazyfreeArgs) -> anyhow::Result<u8> {
    let CheckedArgs {
        threads,
        chunk,
        records,
    } = check(&args.work)?;
    let start = Arc::new(Barrier::new(threads + 1));
    let handles = (0..threads)
        .map(|i| {
            let (args, start) = (args.clone(), Arc::clone(&start));
            std::thread::Builder::new()
                .spawn(move || worker(i, &args, chunk, &start))
                .with_context(|| format!("starting worker thread {} (fewer --threads?)", i + 1))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    start.wait();
    let t = Instant::now();
    let mut matched = 0;
    let mut failed = None;
    for h in handles {
        match h.join() {
            Ok(Ok(m)) => matched += m,
            Ok(Err(e)) => failed = Some(e),
            Err(_) => failed = Some(anyhow::anyhow!("a worker thread panicked")),
        }
    }
    let elapsed = t.elapsed().as_secs_f64();
    if let Some(e) = failed {
        return Err(e);
    }
    let rate = records as f64 / elapsed;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "lazyfree: {threads} threads x {} records of {} KiB, released with MADV_{}: \
         {rate:.0} records/s ({elapsed:.3} s)",
        args.work.records,
        chunk / 1024,
        args.free.name().to_uppercase(),
    )?;
    let doc = serde_json::json!({
        "workload": "lazyfree",
        "records_per_sec": rate,
        "elapsed_s": elapsed,
        "records": records,
        "madvise_calls": records,
        "config": {
            "free": args.free.name(),
            "threads": threads,
            "records_per_thread": args.work.records,
            "chunk_bytes": chunk,
            "chunks_per_thread": args.work.chunks,
            "matched": matched,
        },
    });
    writeln!(out, "{doc}")?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_fixed_and_not_constant() {
        let mut a = Seq(7);
        let mut b = Seq(7);
        let xs: Vec<u64> = (0..4).map(|_| a.next()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next()).collect();
        assert_eq!(xs, ys);
        assert!(xs.windows(2).all(|w| w[0] != w[1]));
    }
}
