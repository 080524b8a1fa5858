//! Memory pressure with swap, for tests that check vmscope's reclaim, swap
//! and lazy-free counts against `/proc/vmstat`: vmscope's own
//! [`vmscope::experiments::pressure`] types (the ones `workload rmap` and `lab` use), set
//! up so that a failure panics with context, pointing at the test.
//!
//! Swap devices are global state: a test that creates one, or that compares
//! swap counters, holds [`exclusive`] for its whole run.

use std::{
    collections::BTreeMap,
    ffi::OsStr,
    ops::Deref,
    path::PathBuf,
    process::Command,
    sync::{Mutex, MutexGuard},
};

use vmscope::experiments::pressure;

static LOCK: Mutex<()> = Mutex::new(());

/// Serialises the tests of this process that touch swap. A test that failed
/// while holding the lock does not poison it for the others.
pub fn exclusive() -> MutexGuard<'static, ()> {
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits until the kernel's rate limit on its OOM reports (10 per 5 s) has
/// started over since the last OOM kill in its log, so that the next kills
/// get their `oom-kill:` summary lines (which name the memcg whose limit
/// was hit). Reads `/dev/kmsg` (root); returns at once when it cannot.
pub fn oom_reports_ready() {
    use std::{io::Read as _, os::unix::fs::OpenOptionsExt as _};
    use vmscope::source::kernel::kmsg;
    let Ok(mut log) = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(kmsg::PATH)
    else {
        return;
    };
    let mut buf = vec![0u8; 16 << 10];
    let mut last_us = None;
    loop {
        match log.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let rec = String::from_utf8_lossy(&buf[..n]);
                if kmsg::message(&rec).and_then(kmsg::parse).is_some() {
                    // `PRIO,SEQ,USEC,...;`: the record's time.
                    last_us = rec.split(',').nth(2).and_then(|t| t.parse::<u64>().ok());
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
            Err(_) => break,
        }
    }
    let Some(last_us) = last_us else { return };
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let now_us = ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000;
    // The window began at or before the last kill; 6 s leaves a margin
    // between the log's clock and this one.
    let wait_us = (last_us + 6_000_000).saturating_sub(now_us);
    if wait_us > 0 {
        std::thread::sleep(std::time::Duration::from_micros(wait_us.min(6_000_000)));
    }
}

/// `/proc/vmstat` as name → value.
pub fn vmstat() -> BTreeMap<String, u64> {
    pressure::vmstat().unwrap_or_else(|e| panic!("{e:#}"))
}

/// The device paths listed in `/proc/swaps`.
pub fn active_swaps() -> Vec<PathBuf> {
    pressure::active_swaps().unwrap_or_else(|e| panic!("{e:#}"))
}

/// A zram swap device, active at the highest priority for as long as the
/// value lives (see [`pressure::ZramSwap`]).
#[derive(Debug)]
pub struct ZramSwap(pressure::ZramSwap);

impl ZramSwap {
    /// Needs root. Panics with context on failure, after undoing what was
    /// already done.
    pub fn new(size_bytes: u64) -> ZramSwap {
        ZramSwap(
            pressure::ZramSwap::new(size_bytes)
                .unwrap_or_else(|e| panic!("setting up zram swap: {e:#}")),
        )
    }
}

impl Deref for ZramSwap {
    type Target = pressure::ZramSwap;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// A memory cgroup `vmscope-test-<pid>-<n>` with a hard limit and swap
/// allowed, removed when dropped (see [`pressure::MemCgroup`]).
#[derive(Debug)]
pub struct MemCgroup(pressure::MemCgroup);

impl MemCgroup {
    /// A memory cgroup of `limit_bytes` whose memory cannot go to swap,
    /// even with a swap device active (v1: `memory.swappiness` 0; v2:
    /// `memory.swap.max` 0): past its limit, a child is OOM-killed, and
    /// reclaim takes file pages only.
    pub fn no_swap(limit_bytes: u64) -> MemCgroup {
        let cg = MemCgroup::new(limit_bytes);
        let (file, value) = if cg.version() == 1 {
            ("memory.swappiness", "0")
        } else {
            ("memory.swap.max", "0")
        };
        let path = cg.path().join(file);
        std::fs::write(&path, value).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        cg
    }

    /// Needs root. Panics with context on failure.
    pub fn new(limit_bytes: u64) -> MemCgroup {
        MemCgroup(
            pressure::MemCgroup::new("vmscope-test", limit_bytes)
                .unwrap_or_else(|e| panic!("setting up a memory cgroup: {e:#}")),
        )
    }

    /// A cgroup inside this one, without a limit of its own; drop it
    /// before this one.
    pub fn nested(&self, name: &str) -> MemCgroup {
        MemCgroup(
            self.0
                .nested(name)
                .unwrap_or_else(|e| panic!("setting up a nested memory cgroup: {e:#}")),
        )
    }

    /// Changes the limit. Lowering it below the usage makes the writing task
    /// (the caller, not the cgroup's members) reclaim the excess.
    pub fn set_limit(&self, limit_bytes: u64) {
        self.0
            .set_limit(limit_bytes)
            .unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// A `Command` for `program` whose process joins the cgroup between fork
    /// and exec.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        self.0.command(program).unwrap_or_else(|e| panic!("{e:#}"))
    }
}

impl Deref for MemCgroup {
    type Target = pressure::MemCgroup;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}
