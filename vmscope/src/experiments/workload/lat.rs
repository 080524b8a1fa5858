//! `vmscope workload lat`: file and VM latencies in microseconds, in the
//! columns of the classic file & VM system latency table. Each figure is the
//! median over `--iterations` timed operations; the work is fixed, so runs
//! compare.
//!
//! - file create / delete at 0, 1 and 4 KiB: `open(O_CREAT)` + write +
//!   close, then `unlink`, in a fresh temporary directory;
//! - mmap: `mmap` + `munmap` of a `--file-size` file (read-only, shared);
//! - protection fault: a write to a read-only page, taken by a SIGSEGV
//!   handler that makes the page writable (the time includes the signal
//!   delivery and that `mprotect`; the page is made read-only again,
//!   untimed, before the next write);
//! - page fault: a read through a mapping of a page of a file dropped from
//!   the page cache (`posix_fadvise(DONTNEED)`, no readahead with
//!   `MADV_RANDOM`): a major fault that reads one page. (Kernels now map a
//!   whole cached folio per fault, so faults on cached pages are mostly
//!   hits and no longer a per-page figure.)

use std::{
    io::Write as _,
    os::fd::AsRawFd as _,
    sync::atomic::{AtomicUsize, Ordering},
    time::Instant,
};

use anyhow::Context as _;

use crate::{cli::LatArgs, exit, stats};

/// Column names, in table order, with their JSON keys.
pub const COLUMNS: [(&str, &str); 9] = [
    ("0K Create", "create_0k_us"),
    ("0K Delete", "delete_0k_us"),
    ("1K Create", "create_1k_us"),
    ("1K Delete", "delete_1k_us"),
    ("4K Create", "create_4k_us"),
    ("4K Delete", "delete_4k_us"),
    ("Mmap", "mmap_us"),
    ("Prot Fault", "prot_fault_us"),
    ("Page Fault", "page_fault_us"),
];

/// The upper median in microseconds (0 for no samples).
fn median_us(mut ns: Vec<u64>) -> f64 {
    stats::upper_median(&mut ns).unwrap_or(0) as f64 / 1e3
}

fn create_delete(dir: &std::path::Path, size: usize, n: usize) -> anyhow::Result<(f64, f64)> {
    let data = vec![0x5au8; size];
    let mut create = Vec::with_capacity(n);
    for i in 0..n {
        let path = dir.join(format!("f{size}-{i}"));
        let t = Instant::now();
        let mut f =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        f.write_all(&data).context("writing")?;
        drop(f);
        create.push(t.elapsed().as_nanos() as u64);
    }
    let mut delete = Vec::with_capacity(n);
    for i in 0..n {
        let path = dir.join(format!("f{size}-{i}"));
        let t = Instant::now();
        std::fs::remove_file(&path).with_context(|| format!("deleting {}", path.display()))?;
        delete.push(t.elapsed().as_nanos() as u64);
    }
    Ok((median_us(create), median_us(delete)))
}

fn page_size() -> usize {
    rustix::param::page_size()
}

/// A file of `size` bytes in `dir`, written and so in the page cache.
fn cached_file(dir: &std::path::Path, size: usize) -> anyhow::Result<std::fs::File> {
    let path = dir.join("mapped");
    let mut f = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(&vec![1u8; size])
        .context("writing the mapped file")?;
    f.sync_all().context("syncing the mapped file")?;
    Ok(f)
}

/// A shared read-only mapping of the first `size` bytes of `f`.
///
/// # Safety
/// The caller unmaps it and reads only within `size`.
unsafe fn map_shared_ro(f: &std::fs::File, size: usize) -> anyhow::Result<*mut libc::c_void> {
    // SAFETY: a new mapping; nothing else refers to its address range.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error()).context("mmap");
    }
    Ok(p)
}

fn mmap_latency(f: &std::fs::File, size: usize, n: usize) -> anyhow::Result<f64> {
    let mut ns = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        // SAFETY: a fresh shared read-only mapping of an open file, unmapped
        // right away and never dereferenced.
        unsafe {
            let p = map_shared_ro(f, size)?;
            libc::munmap(p, size);
        }
        ns.push(t.elapsed().as_nanos() as u64);
    }
    Ok(median_us(ns))
}

fn page_fault_latency(f: &std::fs::File, size: usize, n: usize) -> anyhow::Result<f64> {
    let ps = page_size();
    let pages = (size / ps).min(n);
    let mut ns = Vec::with_capacity(pages);
    // SAFETY: a shared read-only mapping of `size` bytes, read within
    // bounds, unmapped at the end.
    unsafe {
        // Out of the page cache (the file is clean: it was synced).
        if libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) != 0 {
            anyhow::bail!("posix_fadvise(DONTNEED) failed");
        }
        let p = map_shared_ro(f, size)?;
        // No readahead: each read brings in its own page.
        libc::madvise(p, size, libc::MADV_RANDOM);
        let base: *const u8 = p.cast();
        for i in 0..pages {
            let t = Instant::now();
            std::ptr::read_volatile(base.add(i * ps));
            ns.push(t.elapsed().as_nanos() as u64);
        }
        libc::munmap(p, size);
    }
    Ok(median_us(ns))
}

/// The page the SIGSEGV handler makes writable, and how often it ran.
static PROT_PAGE: AtomicUsize = AtomicUsize::new(0);
static PROT_FAULTS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_segv(_sig: libc::c_int) {
    let page = PROT_PAGE.load(Ordering::Relaxed);
    // SAFETY: mprotect is async-signal-safe; the page is ours.
    unsafe {
        libc::mprotect(
            page as *mut libc::c_void,
            page_size(),
            libc::PROT_READ | libc::PROT_WRITE,
        )
    };
    PROT_FAULTS.fetch_add(1, Ordering::Relaxed);
}

fn prot_fault_latency(n: usize) -> anyhow::Result<f64> {
    let ps = page_size();
    let mut ns = Vec::with_capacity(n);
    // SAFETY: one anonymous page; the handler only calls mprotect on it;
    // the old handler is put back before returning.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            ps,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("mmap");
        }
        std::ptr::write_volatile(p.cast::<u8>(), 1);
        PROT_PAGE.store(p as usize, Ordering::Relaxed);
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_segv as *const () as usize;
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGSEGV, &act, &mut old) != 0 {
            return Err(std::io::Error::last_os_error()).context("sigaction");
        }
        for _ in 0..n {
            libc::mprotect(p, ps, libc::PROT_READ);
            let t = Instant::now();
            std::ptr::write_volatile(p.cast::<u8>(), 2);
            ns.push(t.elapsed().as_nanos() as u64);
        }
        libc::sigaction(libc::SIGSEGV, &old, std::ptr::null_mut());
        libc::munmap(p, ps);
    }
    let faults = PROT_FAULTS.load(Ordering::Relaxed);
    if faults < n {
        anyhow::bail!("expected {n} protection faults, the handler ran {faults} times");
    }
    Ok(median_us(ns))
}

pub fn run(args: &LatArgs) -> anyhow::Result<u8> {
    if args.iterations == 0 || args.file_size < page_size() as u64 {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--iterations must be > 0 and --file-size at least one page ({} bytes)",
                page_size()
            ),
        ));
    }
    // The timings of a figure (two lists at most) and the mapped file's
    // contents are held in memory.
    let n_u64 = args.iterations as u64;
    let timings = super::product(&[("--iterations", n_u64), ("", 16)])?;
    super::fits_memory(&[("--iterations", n_u64)], timings)?;
    super::fits_memory(&[("--file-size", args.file_size)], args.file_size)?;
    let dir = tempfile::Builder::new()
        .prefix("vmscope-lat")
        .tempdir_in(args.dir.as_deref().unwrap_or(&std::env::temp_dir()))
        .context("creating a temporary directory (choose one with --dir)")?;
    let n = args.iterations;
    let size = usize::try_from(args.file_size).context("--file-size")?;
    let mut values = Vec::new();
    for s in [0, 1024, 4096] {
        let (c, d) = create_delete(dir.path(), s, n)?;
        values.push(c);
        values.push(d);
    }
    let f = cached_file(dir.path(), size)?;
    values.push(mmap_latency(&f, size, n)?);
    values.push(prot_fault_latency(n)?);
    values.push(page_fault_latency(&f, size, n)?);
    let mut out = std::io::stdout().lock();
    let header: Vec<String> = COLUMNS.iter().map(|(c, _)| format!("{c:>10}")).collect();
    writeln!(out, "File & VM latencies, microseconds (median of {n})")?;
    writeln!(out, "{}", header.join(" "))?;
    let row: Vec<String> = values.iter().map(|v| format!("{v:>10.2}")).collect();
    writeln!(out, "{}", row.join(" "))?;
    let json: serde_json::Map<String, serde_json::Value> = COLUMNS
        .iter()
        .zip(&values)
        .map(|((_, k), v)| ((*k).to_string(), serde_json::json!(v)))
        .collect();
    let doc = serde_json::json!({
        "workload": "lat",
        "iterations": n,
        "file_size_bytes": args.file_size,
        "latency": json,
    });
    writeln!(out, "{doc}")?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median_us(vec![3000, 1000, 2000]), 2.0);
        assert_eq!(median_us(vec![1000, 4000]), 4.0);
        assert_eq!(median_us(vec![]), 0.0);
    }
}
