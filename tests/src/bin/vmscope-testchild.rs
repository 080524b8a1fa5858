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
//!        vmscope-testchild rewrite PAGES  write PAGES, then write them all again
//!                                         (under a memcg limit: swap-out, then swap-in)
//!        vmscope-testchild rewrite-threads PAGES  the same three times, from
//!                                         two threads on two CPUs, a half each
//!        vmscope-testchild hold PAGES     write PAGES, wait until FILE (the --report
//!                                         path + ".go") exists, then write them again
//!        vmscope-testchild keep PAGES     write PAGES, create FILE (the --report path
//!                                         + ".held"), then wait in pause(2), allocating
//!                                         nothing, until killed (or 600 s pass)
//!        vmscope-testchild majfault PAGES write a PAGES-long file next to the
//!                                         report (or in /tmp), drop it from the page
//!                                         cache with posix_fadvise(DONTNEED), then
//!                                         read it through a MADV_RANDOM mapping
//!        vmscope-testchild readfile PAGES write a PAGES-long file (1 MiB writes), drop
//!                                         it from the page cache, read() it back
//!        vmscope-testchild churn MILLIS   for MILLIS ms: map 16 fresh pages, write one
//!                                         byte to each, unmap them, sleep 1 ms; again
//!                                         (steady faults at little CPU)
//!        vmscope-testchild sharers N PAGES  write PAGES of anonymous memory, fork N
//!                                         children that keep it mapped without
//!                                         touching it, then read it all 3 times
//!                                         (under a memcg limit below PAGES: every
//!                                         reclaim walks the rmap of N+1 mappings)
//!        vmscope-testchild spin MILLIS    a CPU loop with no memory traffic
//!        vmscope-testchild moveto PAGES PROCS  pinned to the CPU it runs on, map
//!                                         2*PAGES, write PAGES, write its pid to
//!                                         PROCS (a cgroup.procs: it moves itself),
//!                                         write the other PAGES; no other syscall
//!                                         between the faults
//!        vmscope-testchild populate PAGES with THP off: PAGES faulted in each through
//!                                         MADV_POPULATE_WRITE, MAP_POPULATE (in a second
//!                                         thread) and mlock, all get_user_pages faults,
//!                                         then PAGES more by touching them
//!        vmscope-testchild forkswap PAGES K MODE  write PAGES (under a memcg limit
//!                                         below PAGES: some go out to swap), fork K
//!                                         children that, without touching the
//!                                         memory, do MODE and exit, then bring all
//!                                         PAGES back (swap-in). MODE:
//!                                           exit      the children just exit
//!                                           munmap    munmap half the range
//!                                           mremap    mremap the range to half
//!                                           dontneed  MADV_DONTNEED half the range
//!                                           mapfixed  mmap MAP_FIXED anonymous
//!                                                     memory over half the range
//!                                         then the parent writes every page, but:
//!                                           populate  children exit; the parent
//!                                                     MADV_POPULATE_WRITEs the range
//!                                           mlock     children exit; the parent
//!                                                     mlocks (and munlocks) the range
//!                                         (both 1024 pages a call, each chunk then
//!                                         MADV_COLD, else the memcg OOM-kills it)
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
    // The two threads on two CPUs, so that each munmap has a CPU to
    // interrupt: left to the scheduler on a busy host, both may share one
    // CPU, and then the kernel needs no interrupt at all.
    let cpus = allowed_cpus();
    let pair = (cpus.len() >= 2).then(|| (cpus[0], cpus[1]));
    if let Some((main, _)) = pair {
        pin_to(main);
    }
    let helper = std::thread::spawn(move || {
        if let Some((_, other)) = pair {
            pin_to(other);
        }
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

/// The CPUs this thread may run on, lowest first.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid, and the kernel fills it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        set
    };
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: reads a bit of our own set, within its size.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Keeps the calling thread on `cpu` alone.
fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; the set is ours.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "sched_setaffinity to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
    }
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

/// Writes every page twice: under a memcg limit the first pass pushes the
/// early pages out to swap and the second brings them back.
fn rewrite(pages: usize) {
    let len = pages * page_size();
    let p = map(len);
    // SAFETY: the whole mapping.
    unsafe { assert_eq!(libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE), 0) };
    write_pages(p, pages);
    write_pages(p, pages);
}

/// `rewrite` from two threads at once, pinned to two CPUs (where there are
/// two), each writing its half of one mapping three times: one address
/// space whose swap entries change from both CPUs, interleaved.
fn rewrite_threads(pages: usize) {
    let len = pages * page_size();
    let p = map(len);
    // SAFETY: the whole mapping.
    unsafe { assert_eq!(libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE), 0) };
    let cpus = allowed_cpus();
    let half = pages / 2;
    let halves = [
        (p as usize, half),
        (p as usize + half * page_size(), pages - half),
    ];
    let threads: Vec<_> = halves
        .into_iter()
        .enumerate()
        .map(|(i, (at, n))| {
            let cpu = (cpus.len() >= 2).then(|| cpus[i]);
            std::thread::spawn(move || {
                if let Some(cpu) = cpu {
                    pin_to(cpu);
                }
                for _ in 0..3 {
                    write_pages(at as *mut u8, n);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Like `rewrite`, but every page is filled with pseudo-random bytes, which
/// do not compress: each page swapped to zswap takes a page of its pool.
fn rewrite_random(pages: usize) {
    let ps = page_size();
    let len = pages * ps;
    let p = map(len);
    // SAFETY: the whole mapping.
    unsafe { assert_eq!(libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE), 0) };
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _pass in 0..2 {
        for off in (0..len).step_by(8) {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // SAFETY: within the mapping, 8-byte aligned.
            unsafe { std::ptr::write_volatile(p.add(off).cast::<u64>(), x) };
        }
    }
}

/// Writes every page, waits for `go` to appear (meanwhile someone else may
/// push the pages out), then writes them again.
fn hold(pages: usize, go: &std::path::Path) {
    let len = pages * page_size();
    let p = map(len);
    // SAFETY: the whole mapping.
    unsafe { assert_eq!(libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE), 0) };
    write_pages(p, pages);
    std::fs::write(go.with_extension("held"), b"").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    while !go.exists() {
        assert!(std::time::Instant::now() < deadline, "no {}", go.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    write_pages(p, pages);
}

/// Holds `pages` and then waits without allocating anything, so that it
/// never invokes the OOM killer itself: only killed (an alarm ends it
/// after 600 s should nothing else).
fn keep(pages: usize, held: &std::path::Path) -> ! {
    let len = pages * page_size();
    let p = map(len);
    // SAFETY: the whole mapping.
    unsafe { assert_eq!(libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE), 0) };
    write_pages(p, pages);
    std::fs::write(held, b"").unwrap();
    // SAFETY: alarm and pause have no preconditions; SIGALRM's default
    // action ends the process.
    unsafe { libc::alarm(600) };
    loop {
        unsafe { libc::pause() };
    }
}

/// Major faults: a file's pages read through a mapping after the page cache
/// dropped them. Readahead makes some of them minor; rusage says which.
/// A new file in `dir`, open for reading and writing, already unlinked (it
/// goes with the process).
fn unlinked_file(dir: &std::path::Path, what: &str) -> std::fs::File {
    let path = dir.join(format!(".vmscope-{what}-{}", std::process::id()));
    let f = std::fs::File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    f
}

/// Writes a PAGES-long file in 1 MiB writes, drops it from the page
/// cache, then reads it back with read(): page cache only, no anonymous
/// memory beyond one buffer.
fn readfile(pages: usize, dir: &std::path::Path) {
    use std::{io::Read as _, os::fd::AsRawFd as _};
    let mut f = unlinked_file(dir, "readfile");
    let mut buf = vec![7u8; 1 << 20];
    let total = pages * page_size();
    let mut done = 0;
    while done < total {
        let n = buf.len().min(total - done);
        f.write_all(&buf[..n]).unwrap();
        done += n;
    }
    f.sync_all().unwrap();
    // SAFETY: a plain syscall on an open descriptor.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0, "posix_fadvise");
    let mut f = std::fs::File::open(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
    let mut read = 0;
    loop {
        match f.read(&mut buf).unwrap() {
            0 => break,
            n => read += n,
        }
    }
    assert_eq!(read, total);
}

/// Reads the first PAGES pages of `path` with 1 MiB read() calls, once
/// (exit status 3 if the file is shorter).
fn readpass(pages: usize, path: &std::path::Path) {
    use std::io::Read as _;
    let mut f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let total = pages * page_size();
    let mut read = 0;
    while read < total {
        let want = buf.len().min(total - read);
        match f.read(&mut buf[..want]).unwrap() {
            0 => std::process::exit(3),
            n => read += n,
        }
    }
}

/// Maps the first PAGES pages of `path` shared, touches each, and asks
/// the kernel to page them out (MADV_PAGEOUT): reclaim in this task,
/// which writes nothing back for clean file pages and evicts them. Prints
/// `pageout RESIDENT_BEFORE RESIDENT_AFTER` (`mincore`).
fn pageout(pages: usize, path: &std::path::Path) {
    use std::os::fd::AsRawFd as _;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let len = pages * page_size();
    // SAFETY: a fresh shared mapping of the file's first `len` bytes,
    // read one byte per page, advised and unmapped below. No readahead:
    // each fault brings one page, which MADV_PAGEOUT can take (it skips
    // a large folio it cannot split).
    unsafe {
        assert_eq!(
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM),
            0,
            "posix_fadvise"
        );
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        let mut sum = 0u64;
        for i in (0..len).step_by(page_size()) {
            sum += u64::from(std::ptr::read_volatile(p.cast::<u8>().add(i)));
        }
        std::hint::black_box(sum);
        let before = resident(p, len);
        assert_eq!(libc::madvise(p, len, libc::MADV_PAGEOUT), 0, "MADV_PAGEOUT");
        let after = resident(p, len);
        println!("pageout {before} {after}");
        libc::munmap(p, len);
    }
}

/// Pages of the mapping `p..p+len` in the page cache (`mincore`).
fn resident(p: *mut libc::c_void, len: usize) -> usize {
    let mut vec = vec![0u8; len.div_ceil(page_size())];
    // SAFETY: `p` is a mapping of `len` bytes; `vec` has a byte per page.
    let r = unsafe { libc::mincore(p, len, vec.as_mut_ptr()) };
    assert_eq!(r, 0, "mincore");
    vec.iter().filter(|b| **b & 1 != 0).count()
}

/// Brings a PAGES-long file (in `dir`, unlinked) into the page cache three
/// times: by writing it, by reading it with read() after dropping it from
/// the cache, and by touching its pages through a shared mapping from 4
/// threads after dropping it again. Each time `mincore` must find all of
/// it cached after and none of it before (the kernel's own count of what
/// was added), else exit status 3. Its page-cache additions are 3 x PAGES.
fn pagecache(pages: usize, dir: &std::path::Path) {
    use std::{io::Read as _, os::fd::AsRawFd as _};
    let ps = page_size();
    let len = pages * ps;
    let mut f = unlinked_file(dir, "pagecache");
    let buf = vec![7u8; 1 << 20];
    let mut done = 0;
    while done < len {
        let n = buf.len().min(len - done);
        f.write_all(&buf[..n]).unwrap();
        done += n;
    }
    f.sync_all().unwrap();
    let fd = f.as_raw_fd();
    // SAFETY: a shared read-only mapping of the whole file, read within its
    // length by the threads below and unmapped at the end.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap");
    let check = |what: &str, want: usize| {
        let got = resident(p, len);
        if got != want {
            eprintln!("pagecache: {what}: {got} of {pages} pages cached, expected {want}");
            std::process::exit(3);
        }
    };
    check("after writing", pages);
    let evict = || {
        // SAFETY: a plain syscall on an open descriptor.
        let r = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(r, 0, "posix_fadvise");
    };
    evict();
    check("after dropping it", 0);
    let mut r = std::fs::File::open(format!("/proc/self/fd/{fd}")).unwrap();
    let mut rbuf = vec![0u8; 1 << 20];
    let mut read = 0;
    loop {
        match r.read(&mut rbuf).unwrap() {
            0 => break,
            n => read += n,
        }
    }
    assert_eq!(read, len);
    check("after reading it", pages);
    evict();
    check("after dropping it again", 0);
    let base = p as usize;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut sum = 0u64;
                for i in (t..pages).step_by(4) {
                    // SAFETY: within the mapping.
                    sum +=
                        u64::from(unsafe { std::ptr::read_volatile((base + i * ps) as *const u8) });
                }
                sum
            })
        })
        .collect();
    let sum: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(sum, 7 * pages as u64);
    check("after touching it", pages);
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(p, len) };
}

fn majfault(pages: usize, dir: &std::path::Path) {
    use std::os::fd::AsRawFd as _;
    let ps = page_size();
    let mut f = unlinked_file(dir, "majfault");
    f.write_all(&vec![7u8; pages * ps]).unwrap();
    f.sync_all().unwrap();
    let fd = f.as_raw_fd();
    // SAFETY: plain syscalls on an open descriptor; the mapping is read
    // within its length and then unmapped.
    unsafe {
        assert_eq!(
            libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED),
            0,
            "posix_fadvise"
        );
        let len = pages * ps;
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            fd,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap failed");
        // No readahead: most pages are then read by a fault of their own.
        assert_eq!(libc::madvise(p, len, libc::MADV_RANDOM), 0, "madvise");
        let p: *const u8 = p.cast();
        let mut sum = 0u64;
        for i in 0..pages {
            sum += u64::from(std::ptr::read_volatile(p.add(i * ps)));
        }
        assert_eq!(sum, 7 * pages as u64);
        libc::munmap(p as *mut libc::c_void, len);
    }
}

/// Steady faulting at little CPU: 16 fresh pages mapped, written and
/// unmapped, then 1 ms of sleep, over and over for `millis` milliseconds.
fn churn(millis: u64) {
    let len = 16 * page_size();
    let end = std::time::Instant::now() + Duration::from_millis(millis);
    while std::time::Instant::now() < end {
        let p = map(len);
        write_pages(p, 16);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(p.cast(), len) };
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `pages` of anonymous memory shared by this process and `n` children that
/// keep it mapped (blocked on a pipe until the parent is done), read three
/// times over by the parent.
fn sharers(n: usize, pages: usize) {
    let len = pages * page_size();
    let p = map(len);
    // SAFETY: the whole mapping.
    unsafe { assert_eq!(libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE), 0) };
    write_pages(p, pages);
    let mut fds = [0; 2];
    // SAFETY: a fresh pipe into a local array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    let mut children = Vec::with_capacity(n);
    for _ in 0..n {
        // SAFETY: this program is single-threaded; the child only makes
        // async-signal-safe calls (close, read, _exit).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let mut b = 0u8;
            // SAFETY: plain syscalls on the pipe; returns at EOF.
            unsafe {
                libc::close(fds[1]);
                libc::read(fds[0], (&raw mut b).cast(), 1);
                libc::_exit(0);
            }
        }
        children.push(pid);
    }
    let ps = page_size();
    let mut sum = 0u64;
    for _ in 0..3 {
        for i in 0..pages {
            // SAFETY: within the mapping.
            sum += u64::from(unsafe { std::ptr::read_volatile(p.add(i * ps)) });
        }
    }
    assert_eq!(sum, 3 * pages as u64);
    // SAFETY: closing our pipe ends lets the children exit; reap them.
    unsafe {
        libc::close(fds[1]);
        libc::close(fds[0]);
        for pid in children {
            let mut st = 0;
            libc::waitpid(pid, &mut st, 0);
        }
    }
}

/// Arithmetic only: no memory beyond registers and the stack.
fn spin(millis: u64) {
    let end = std::time::Instant::now() + Duration::from_millis(millis);
    let mut x = 1u64;
    while std::time::Instant::now() < end {
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
    }
    std::hint::black_box(x);
}

/// `huge` huge pages' worth of memory faulted in small pages, then
/// collapsed into huge pages with MADV_COLLAPSE: the same collapse
/// khugepaged makes, in this task, `huge` times.
fn collapse(huge: usize) {
    const MADV_COLLAPSE: libc::c_int = 25;
    let hp = 2 << 20;
    let len = huge * hp;
    let raw = map(len + hp);
    let a = ((raw as usize).next_multiple_of(hp)) as *mut u8;
    // SAFETY: `a..a + len` lies inside the mapping; small pages first
    // (NOHUGEPAGE), then eligible again for the collapse.
    unsafe {
        assert_eq!(libc::madvise(a.cast(), len, libc::MADV_NOHUGEPAGE), 0);
        for i in (0..len).step_by(page_size()) {
            std::ptr::write_volatile(a.add(i), 1);
        }
        assert_eq!(libc::madvise(a.cast(), len, libc::MADV_HUGEPAGE), 0);
        let r = libc::madvise(a.cast(), len, MADV_COLLAPSE);
        assert_eq!(r, 0, "MADV_COLLAPSE: {}", std::io::Error::last_os_error());
    }
}

/// `huge` huge pages of MADV_HUGEPAGE memory, a byte written in each, then
/// held for 3 s (long enough for working-set windows of 1 s); prints the
/// kernel's own `AnonHugePages` of this process (smaps_rollup, kB) as
/// `anon_huge_kb N` before it exits.
/// How `hugefault` faults its huge pages.
#[derive(Clone, Copy, Default)]
struct HugeWay {
    /// Threads sharing the pages (1: the main thread alone).
    threads: usize,
    /// MADV_POPULATE_WRITE (through get_user_pages) instead of writes.
    populate: bool,
    /// Report at once and exit, without the 3 s pause.
    brief: bool,
}

impl HugeWay {
    fn parse(words: &[String]) -> HugeWay {
        let mut way = HugeWay {
            threads: 1,
            ..HugeWay::default()
        };
        let mut it = words.iter();
        while let Some(w) = it.next() {
            match w.as_str() {
                "populate" => way.populate = true,
                "brief" => way.brief = true,
                "threads" => {
                    way.threads = it.next().and_then(|t| t.parse().ok()).unwrap_or_else(|| {
                        eprintln!(
                            "usage: vmscope-testchild hugefault N [threads T] [populate] [brief]"
                        );
                        std::process::exit(2)
                    })
                }
                other => {
                    eprintln!("hugefault: unknown word {other}");
                    std::process::exit(2)
                }
            }
        }
        way
    }
}

/// Writes (or populates) `huge` huge pages of MADV_HUGEPAGE memory, split
/// among `way.threads` threads, then reports its `AnonHugePages` as
/// `anon_huge_kb KB` and `huge_pid PID KB`.
fn hugefault(huge: usize, way: HugeWay) {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    let hp = 2 << 20;
    let len = huge * hp;
    let raw = map(len + hp);
    let a = (raw as usize).next_multiple_of(hp);
    // SAFETY: `a..a + len` lies inside the mapping.
    unsafe {
        assert_eq!(libc::madvise(a as *mut _, len, libc::MADV_HUGEPAGE), 0);
    }
    let threads = way.threads.max(1);
    let share = huge.div_ceil(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (from, to) = ((t * share).min(huge), ((t + 1) * share).min(huge));
            s.spawn(move || {
                let start = (a + from * hp) as *mut u8;
                let n = (to - from) * hp;
                if n == 0 {
                    return;
                }
                // SAFETY: this thread's part of the mapping.
                unsafe {
                    if way.populate {
                        assert_eq!(libc::madvise(start.cast(), n, MADV_POPULATE_WRITE), 0);
                    } else {
                        for i in (0..n).step_by(hp) {
                            std::ptr::write_volatile(start.add(i), 1);
                        }
                    }
                }
            });
        }
    });
    if !way.brief {
        std::thread::sleep(Duration::from_secs(3));
    }
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap();
    let kb = rollup
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("0");
    println!("anon_huge_kb {kb}");
    println!("huge_pid {} {kb}", std::process::id());
}

/// Faults through get_user_pages, which the exception tracepoints never
/// see: populate, MAP_POPULATE (from another thread) and mlock, each over
/// `pages` fresh pages, then `pages` ordinary faults.
fn populate(pages: usize) {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    let len = pages * page_size();
    // SAFETY: plain prctl; THP off so every page is its own fault.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) },
        0
    );
    let a = map(len);
    // SAFETY: the whole mapping.
    assert_eq!(
        unsafe { libc::madvise(a.cast(), len, MADV_POPULATE_WRITE) },
        0,
        "populate"
    );
    std::thread::spawn(move || {
        // SAFETY: anonymous mapping, populated by the kernel.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap MAP_POPULATE");
    })
    .join()
    .unwrap();
    let c = map(len);
    // SAFETY: the whole mapping.
    assert_eq!(unsafe { libc::mlock(c.cast(), len) }, 0, "mlock");
    let d = map(len);
    write_pages(d, pages);
}

/// The modes of `forkswap`: what its children do to the swapped range (the
/// first five), or how the parent brings it back (the last two).
const FORKSWAP_MODES: [&str; 7] = [
    "exit", "munmap", "mremap", "dontneed", "mapfixed", "populate", "mlock",
];

/// Swap entries that change without swap traffic: fork copies them, and
/// the children drop them by exiting, munmap, mremap, MADV_DONTNEED or an
/// mmap(MAP_FIXED) over them; then the parent swaps the range back in.
fn forkswap(pages: usize, children: usize, mode: &str) {
    let len = pages * page_size();
    let p = map(len);
    // SAFETY: the whole mapping.
    unsafe { assert_eq!(libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE), 0) };
    write_pages(p, pages);
    let mut pids = Vec::new();
    for _ in 0..children {
        // SAFETY: the child only makes syscalls and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // SAFETY: within the inherited mapping; no allocation here.
            unsafe {
                match mode {
                    "munmap" => {
                        libc::munmap(p.cast(), len / 2);
                    }
                    "mremap" => {
                        libc::mremap(p.cast(), len, len / 2, 0);
                    }
                    "dontneed" => {
                        libc::madvise(p.cast(), len / 2, libc::MADV_DONTNEED);
                    }
                    "mapfixed" => {
                        libc::mmap(
                            p.cast(),
                            len / 2,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                            -1,
                            0,
                        );
                    }
                    _ => {}
                }
                libc::usleep(200_000);
                libc::_exit(0);
            }
        }
        pids.push(pid);
    }
    for pid in pids {
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
    swap_in(p, pages, mode);
}

/// Brings all `pages` at `p` back: through MADV_POPULATE_WRITE (`populate`),
/// through mlock and munlock (`mlock`), else by writing each page. The
/// syscalls go 1024 pages at a time, each chunk then marked MADV_COLD (its
/// place on the LRU only; no swap entry changes). Without that, under a
/// memcg limit below the range, the memcg OOM-kills the process once it is
/// full of pages get_user_pages swapped in (all on the active list), in one
/// call or in chunks. Locked memory stays within RLIMIT_MEMLOCK (its soft
/// limit raised to the hard one, usually 8 MiB).
fn swap_in(p: *mut u8, pages: usize, mode: &str) {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    const CHUNK: usize = 1024;
    let ps = page_size();
    if mode == "mlock" {
        // SAFETY: zeroed rlimit is valid; our own limit, read and set.
        unsafe {
            let mut rl: libc::rlimit = std::mem::zeroed();
            assert_eq!(libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl), 0);
            rl.rlim_cur = rl.rlim_max;
            assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &rl), 0);
        }
    }
    for start in (0..pages).step_by(CHUNK) {
        let n = CHUNK.min(pages - start);
        // SAFETY: `start..start + n` pages lie within the mapping.
        let c = unsafe { p.add(start * ps) };
        match mode {
            "populate" => {
                // SAFETY: a chunk within the mapping.
                let r = unsafe { libc::madvise(c.cast(), n * ps, MADV_POPULATE_WRITE) };
                let e = std::io::Error::last_os_error();
                assert!(
                    !(r != 0 && e.raw_os_error() == Some(libc::EINVAL)),
                    "madvise(MADV_POPULATE_WRITE): EINVAL: this kernel lacks it (Linux 5.14+)"
                );
                assert_eq!(r, 0, "madvise(MADV_POPULATE_WRITE): {e}");
            }
            "mlock" => {
                // SAFETY: a chunk within the mapping, locked then unlocked.
                unsafe {
                    let r = libc::mlock(c.cast(), n * ps);
                    let e = std::io::Error::last_os_error();
                    assert_eq!(r, 0, "mlock of {n} pages (RLIMIT_MEMLOCK?): {e}");
                    assert_eq!(libc::munlock(c.cast(), n * ps), 0, "munlock");
                }
            }
            _ => {
                write_pages(c, n);
                continue;
            }
        }
        // SAFETY: a chunk within the mapping; only its LRU place changes.
        let r = unsafe { libc::madvise(c.cast(), n * ps, libc::MADV_COLD) };
        assert_eq!(r, 0, "MADV_COLD: {}", std::io::Error::last_os_error());
    }
}

/// Faults on from one CPU across a move of its own to another cgroup:
/// what a process does that a runtime or a service manager moves while
/// it runs, with no syscall in between that would look its books up.
fn moveto(pages: usize, procs: &str) {
    // SAFETY: sched_getcpu has no preconditions.
    pin_to(unsafe { libc::sched_getcpu() } as usize);
    let len = 2 * pages * page_size();
    let p = map(len);
    // SAFETY: the whole mapping.
    unsafe { assert_eq!(libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE), 0) };
    let pid = format!("{}", std::process::id());
    write_pages(p, pages);
    std::fs::write(procs, pid).unwrap();
    // SAFETY: the second half of the mapping.
    write_pages(unsafe { p.add(pages * page_size()) }, pages);
}

/// `n` short-lived processes, one after another: each forks from here,
/// writes 16 fresh pages and exits (process churn; no exec, so thousands a
/// second).
fn forks(n: u64) {
    for _ in 0..n {
        // SAFETY: this program is single-threaded; the child only touches
        // its own fresh mapping and calls _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let p = map(16 * page_size());
            write_pages(p, 16);
            // SAFETY: plain exit, no unwinding in the child.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
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
        "madvise" => madvise_calls(n as usize),
        "munmap" => munmap_calls(n as usize),
        "shootdown" => shootdown(n as usize),
        "lazyfree" => lazyfree(n as usize),
        "rewrite" => rewrite(n as usize),
        "rewrite-random" => rewrite_random(n as usize),
        "rewrite-threads" => rewrite_threads(n as usize),
        "churn" => churn(n),
        "forks" => forks(n),
        "spin" => spin(n),
        "moveto" => {
            let Some(procs) = args.get(2) else {
                eprintln!("usage: vmscope-testchild moveto PAGES PROCS");
                std::process::exit(2)
            };
            moveto(n as usize, procs)
        }
        "populate" => populate(n as usize),
        "collapse" => collapse(n as usize),
        "hugefault" => hugefault(n as usize, HugeWay::parse(&args[2..])),
        "forkswap" => {
            let mode = args.get(3).filter(|m| FORKSWAP_MODES.contains(&m.as_str()));
            let (Some(k), Some(mode)) = (args.get(2).and_then(|s| s.parse().ok()), mode) else {
                let modes = FORKSWAP_MODES.join("|");
                eprintln!("usage: vmscope-testchild forkswap PAGES K {modes}");
                std::process::exit(2)
            };
            forkswap(n as usize, k, mode)
        }
        "sharers" => {
            let pages = args.get(2).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
                eprintln!("usage: vmscope-testchild sharers N PAGES");
                std::process::exit(2)
            });
            sharers(n as usize, pages)
        }
        "keep" => {
            let r = report_to.as_deref().expect("keep needs --report");
            keep(n as usize, &std::path::PathBuf::from(format!("{r}.held")))
        }
        "hold" => {
            let r = report_to.as_deref().expect("hold needs --report");
            hold(n as usize, &std::path::PathBuf::from(format!("{r}.go")))
        }
        "pagecache" => {
            let Some(dir) = args.get(2) else {
                eprintln!("usage: vmscope-testchild pagecache PAGES DIR");
                std::process::exit(2)
            };
            pagecache(n as usize, std::path::Path::new(dir))
        }
        "readpass" => {
            let Some(path) = args.get(2) else {
                eprintln!("usage: vmscope-testchild readpass PAGES FILE");
                std::process::exit(2)
            };
            readpass(n as usize, std::path::Path::new(path))
        }
        "pageout" => {
            let Some(path) = args.get(2) else {
                eprintln!("usage: vmscope-testchild pageout PAGES FILE");
                std::process::exit(2)
            };
            pageout(n as usize, std::path::Path::new(path))
        }
        "majfault" | "readfile" => {
            let dir = report_to
                .as_deref()
                .and_then(|r| std::path::Path::new(r).parent())
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("/tmp"))
                .to_path_buf();
            if args[0] == "majfault" {
                majfault(n as usize, &dir)
            } else {
                readfile(n as usize, &dir)
            }
        }
        other => {
            eprintln!("unknown workload {other}");
            std::process::exit(2)
        }
    }
    if let Some(p) = report_to {
        report(&p);
    }
}
