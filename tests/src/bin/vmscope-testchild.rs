//! Workloads with exactly known behaviour, used as ground truth by the
//! end-to-end tests. Each can write its own `getrusage(RUSAGE_SELF)` at the
//! end, so the test compares vmscope's counts with the kernel's own books.
//!
//! usage: vmscope-testchild [--report FILE] touch PAGES
//!        vmscope-testchild [--report FILE] idle MILLIS
#![allow(clippy::unwrap_used, reason = "a test workload fails loudly")]

use std::{io::Write as _, time::Duration};

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Writes one byte to each of `pages` fresh private anonymous pages, with
/// THP disabled on the range so every page is its own fault.
fn touch(pages: usize) {
    let ps = page_size();
    let len = pages * ps;
    // SAFETY: anonymous mapping of `len` bytes, used only within bounds.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap failed");
        assert_eq!(libc::madvise(p, len, libc::MADV_NOHUGEPAGE), 0, "madvise");
        let base = p.cast::<u8>();
        for i in 0..pages {
            std::ptr::write_volatile(base.add(i * ps), 1);
        }
        libc::munmap(p, len);
    }
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
        other => {
            eprintln!("unknown workload {other}");
            std::process::exit(2)
        }
    }
    if let Some(p) = report_to {
        report(&p);
    }
}
