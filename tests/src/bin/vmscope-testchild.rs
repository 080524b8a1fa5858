//! Workloads with exactly known behaviour, used as ground truth by the
//! end-to-end tests. Each can write its own `getrusage(RUSAGE_SELF)` at the
//! end, so the test compares vmscope's counts with the kernel's own books.
//!
//! usage: vmscope-testchild [--report FILE] touch PAGES
//!        vmscope-testchild [--report FILE] idle MILLIS
//!        vmscope-testchild madvise N      N calls each of MADV_FREE (1 page),
//!                                         MADV_DONTNEED (2 pages), MADV_COLD (3 pages)
//!        vmscope-testchild munmap N       N munmap calls of one touched page
//!        vmscope-testchild shootdown N    2 threads; N munmaps of memory both touched
//!        vmscope-testchild lazyfree PAGES write PAGES, MADV_FREE them, then
//!                                         allocate and write 2*PAGES more
#![allow(clippy::unwrap_used, reason = "a test workload fails loudly")]

use std::{io::Write as _, time::Duration};

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Writes one byte to each of `pages` fresh private anonymous pages, with
/// THP disabled on the range so every page is its own fault.
fn touch(pages: usize) {
    let len = pages * page_size();
    let p = map(len);
    // SAFETY: the whole mapping, then unmapped.
    unsafe {
        assert_eq!(
            libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE),
            0,
            "madvise"
        )
    };
    write_pages(p, pages);
    unsafe { libc::munmap(p.cast(), len) };
}

fn map(len: usize) -> *mut u8 {
    // SAFETY: anonymous mapping; callers stay within `len`.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap failed");
    p.cast()
}

fn write_pages(p: *mut u8, pages: usize) {
    let ps = page_size();
    for i in 0..pages {
        // SAFETY: within the mapping.
        unsafe { std::ptr::write_volatile(p.add(i * ps), 1) };
    }
}

/// Exactly `n` calls of each behaviour, on 1, 2 and 3 pages.
fn madvise_calls(n: usize) {
    let ps = page_size();
    let p = map(8 * ps);
    for _ in 0..n {
        write_pages(p, 8);
        // SAFETY: ranges inside the mapping.
        unsafe {
            assert_eq!(libc::madvise(p.cast(), ps, libc::MADV_FREE), 0);
            assert_eq!(libc::madvise(p.cast(), 2 * ps, libc::MADV_DONTNEED), 0);
            assert_eq!(libc::madvise(p.cast(), 3 * ps, libc::MADV_COLD), 0);
        }
    }
}

fn munmap_calls(n: usize) {
    let ps = page_size();
    for _ in 0..n {
        let p = map(ps);
        write_pages(p, 1);
        // SAFETY: unmapping our own page.
        unsafe { libc::munmap(p.cast(), ps) };
    }
}

/// A second thread keeps running in the same mm (touching each region too),
/// so unmapping must shoot down its CPU's TLB.
fn shootdown(n: usize) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // The main thread publishes a region in REGION; the helper touches it and
    // echoes its address in DONE.
    static REGION: AtomicUsize = AtomicUsize::new(0);
    static DONE: AtomicUsize = AtomicUsize::new(0);
    static STOP: AtomicBool = AtomicBool::new(false);
    let ps = page_size();
    let helper = std::thread::spawn(move || {
        while !STOP.load(Ordering::Relaxed) {
            let r = REGION.load(Ordering::Acquire);
            if r != 0 && DONE.load(Ordering::Relaxed) != r {
                write_pages(r as *mut u8, 16);
                DONE.store(r, Ordering::Release);
            }
            std::hint::spin_loop();
        }
    });
    for _ in 0..n {
        let p = map(16 * ps);
        write_pages(p, 16);
        REGION.store(p as usize, Ordering::Release);
        while DONE.load(Ordering::Acquire) != p as usize {
            std::hint::spin_loop();
        }
        REGION.store(0, Ordering::Release);
        // SAFETY: the helper is done with it (it echoed the address).
        unsafe { libc::munmap(p.cast(), 16 * ps) };
    }
    STOP.store(true, Ordering::Relaxed);
    helper.join().unwrap();
}

/// Lazily freed memory, then pressure so reclaim frees it.
fn lazyfree(pages: usize) {
    let ps = page_size();
    let p = map(pages * ps);
    write_pages(p, pages);
    // SAFETY: the whole mapping.
    unsafe { assert_eq!(libc::madvise(p.cast(), pages * ps, libc::MADV_FREE), 0) };
    let q = map(2 * pages * ps);
    write_pages(q, 2 * pages);
}

fn report(path: &str) {
    // SAFETY: zeroed rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let mut f = std::fs::File::create(path).unwrap();
    writeln!(
        f,
        "{{\"minflt\":{},\"majflt\":{},\"pid\":{}}}",
        ru.ru_minflt,
        ru.ru_majflt,
        std::process::id()
    )
    .unwrap();
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut report_to = None;
    if args.first().map(String::as_str) == Some("--report") {
        report_to = Some(args.remove(1));
        args.remove(0);
    }
    let n: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        eprintln!("usage: vmscope-testchild [--report FILE] touch PAGES | idle MILLIS");
        std::process::exit(2)
    });
    match args[0].as_str() {
        "touch" => touch(n as usize),
        "idle" => std::thread::sleep(Duration::from_millis(n)),
        "madvise" => madvise_calls(n as usize),
        "munmap" => munmap_calls(n as usize),
        "shootdown" => shootdown(n as usize),
        "lazyfree" => lazyfree(n as usize),
        other => {
            eprintln!("unknown workload {other}");
            std::process::exit(2)
        }
    }
    if let Some(p) = report_to {
        report(&p);
    }
}
