//! `vmscope workload NAME`: built-in workloads whose work is fixed, so
//! their runs compare. Each prints its own figures and a final JSON line.

pub mod compaction;
pub mod dirty;
pub mod hotset;
pub mod lat;
pub mod lazyfree;
pub mod mmap_lock;
pub mod rmap;

use anyhow::Context as _;

use crate::{cli::Workload, exit};

/// Signals held back while a workload has changed the system (a cgroup,
/// children, a sysctl), so that Ctrl-C cleans up first and then takes
/// effect: dropping the value delivers any that came meanwhile.
const HELD: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

pub struct HeldSignals(libc::sigset_t);

impl HeldSignals {
    pub fn hold() -> anyhow::Result<Self> {
        // SAFETY: sigset operations on a local set; sigprocmask on this
        // (only) thread.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in HELD {
                libc::sigaddset(&mut set, s);
            }
            if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error()).context("blocking signals");
            }
            Ok(Self(set))
        }
    }

    /// Whether one of the held signals has come (and waits).
    pub fn pending(&self) -> bool {
        // SAFETY: sigpending fills a local set; sigismember reads it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut set) == 0 && HELD.iter().any(|s| libc::sigismember(&set, *s) == 1)
        }
    }
}

impl HeldSignals {
    /// Waits up to `timeout` (none: only looks) for one of the held
    /// signals and takes it, so that it is not delivered on drop. Returns
    /// its number; `None` when the time is up or another signal came.
    pub fn wait(&self, timeout: std::time::Duration) -> Option<libc::c_int> {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: waits on the set blocked in `hold`; no siginfo asked for.
        let r = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &ts) };
        (r > 0).then_some(r)
    }
}

/// Has `cmd`'s process start with the held signals unblocked. A blocked
/// signal mask is inherited across fork and exec, so a program started
/// while signals are held would ignore the SIGINT or SIGTERM that is meant
/// to stop it (and would wait for it forever).
pub fn unheld(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure only makes async-signal-safe calls on a local
    // set and the child's own mask.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in HELD {
                libc::sigaddset(&mut set, s);
            }
            if libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

impl Drop for HeldSignals {
    fn drop(&mut self) {
        // A signal that came meanwhile is delivered here, after cleanup.
        // SAFETY: unblocks the set blocked in `hold`.
        unsafe { libc::sigprocmask(libc::SIG_UNBLOCK, &self.0, std::ptr::null_mut()) };
    }
}

/// An anonymous private read-write mapping, unmapped on drop.
pub struct AnonMap {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: the mapping is plain memory; its users hand it to one thread at a
// time.
unsafe impl Send for AnonMap {}

impl AnonMap {
    pub fn new(len: usize) -> anyhow::Result<Self> {
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
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
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("mapping {len} bytes"));
        }
        Ok(Self { ptr: p.cast(), len })
    }
}

impl Drop for AnonMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Bytes of physical memory, or `u64::MAX` when the system does not say.
pub fn physical_memory() -> u64 {
    // SAFETY: sysconf has no side effects.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    u64::try_from(pages)
        .ok()
        .and_then(|p| p.checked_mul(rustix::param::page_size() as u64))
        .unwrap_or(u64::MAX)
}

/// A size in binary units, e.g. `3.8 GiB`.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// How named arguments multiply, for messages: `--chunks 4 × --chunk-size 4096`.
fn named(args: &[(&str, u64)]) -> String {
    args.iter()
        .map(|(name, v)| format!("{name} {v}"))
        .collect::<Vec<_>>()
        .join(" × ")
}

/// The product of argument values (and plain factors named ""), or a usage
/// error naming the arguments when it does not fit in 64 bits.
pub fn product(args: &[(&str, u64)]) -> anyhow::Result<u64> {
    args.iter()
        .try_fold(1u64, |acc, (_, v)| acc.checked_mul(*v))
        .ok_or_else(|| {
            let shown: Vec<(&str, u64)> =
                args.iter().copied().filter(|a| !a.0.is_empty()).collect();
            exit::failure(
                exit::USAGE,
                format!("{} overflows 64 bits; give smaller values", named(&shown)),
            )
        })
}

/// A usage error when `bytes`, what the named arguments ask for, is more
/// than this machine's memory.
pub fn fits_memory(args: &[(&str, u64)], bytes: u64) -> anyhow::Result<()> {
    let have = physical_memory();
    if bytes <= have {
        return Ok(());
    }
    Err(exit::failure(
        exit::USAGE,
        format!(
            "{} needs {} of memory, more than this machine's {}; give smaller values",
            named(args),
            fmt_bytes(bytes),
            fmt_bytes(have)
        ),
    ))
}

pub fn run(w: &Workload) -> anyhow::Result<u8> {
    match w {
        Workload::Lat(a) => lat::run(a),
        Workload::Lazyfree(a) => lazyfree::run(a),
        Workload::Rmap(a) => rmap::run(a),
        Workload::Dirty(a) => dirty::run(a),
        Workload::MmapLock(a) => mmap_lock::run(a),
        Workload::Compaction(a) => compaction::run(a),
        Workload::Hotset(a) => hotset::run(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_that_overflow_are_usage_errors_naming_the_arguments() {
        assert_eq!(
            product(&[("--chunks", 4), ("--chunk-size", 4096)]).ok(),
            Some(16384)
        );
        let e = product(&[("--chunks", 4_503_599_627_370_497), ("--chunk-size", 4096)])
            .expect_err("2^64 + 4096");
        assert_eq!(exit::code_of(&e, 0), exit::USAGE);
        let msg = exit::message_of(&e);
        assert!(
            msg.starts_with("--chunks 4503599627370497 × --chunk-size 4096 overflows")
                && !msg.contains('\n'),
            "{msg}"
        );
        // Plain factors are not named.
        let e = product(&[("--threads", 2), ("", u64::MAX)]).expect_err("overflows");
        assert!(exit::message_of(&e).starts_with("--threads 2 overflows"));
    }

    #[test]
    fn more_than_physical_memory_is_a_usage_error() {
        assert!(fits_memory(&[("--size", 4096)], 4096).is_ok());
        let e = fits_memory(&[("--size", u64::MAX)], u64::MAX - 1).expect_err("too much");
        assert_eq!(exit::code_of(&e, 0), exit::USAGE);
        let msg = exit::message_of(&e);
        assert!(msg.contains("--size") && msg.contains("16.0 EiB"), "{msg}");
        assert_eq!(fmt_bytes(1023), "1023 B");
        assert_eq!(fmt_bytes(3 << 29), "1.5 GiB");
    }
}
