//! `vmscope workload dirty`: dirty throttling.
//!
//! With `vm.dirty_bytes` set low (`--dirty-bytes`, and
//! `vm.dirty_background_bytes` half of it), one thread writes `--size`
//! bytes to a new file in `--dir` in 1 MiB writes, faster than write-back
//! can clean them: `balance_dirty_pages` then puts it to sleep in its
//! writes. It fsyncs and deletes the file, and puts the four settings back
//! as they were, also when interrupted (Ctrl-C is held until then).
//!
//! Needs root (the settings are system-wide) and a directory on a disk
//! filesystem: tmpfs pages are never throttled. Prints a line for people
//! and a JSON line: the time in write() (the throttled part), the fsync,
//! and the throughput.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{HeldSignals, fmt_bytes};
use crate::{cli::DirtyArgs, exit};

const CHUNK: usize = 1 << 20;
const VM: &str = "/proc/sys/vm";
/// `statfs` magic numbers of filesystems without write-back.
const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// The four dirty-limit settings: a limit is in bytes or as a ratio, the
/// other one reading 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Settings {
    bytes: u64,
    ratio: u64,
    background_bytes: u64,
    background_ratio: u64,
}

fn read_vm(name: &str) -> anyhow::Result<u64> {
    let path = Path::new(VM).join(name);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("{} is not a number: {text:?}", path.display()))
}

fn write_vm(name: &str, value: u64) -> anyhow::Result<()> {
    let path = Path::new(VM).join(name);
    std::fs::write(&path, value.to_string())
        .with_context(|| format!("writing {value} to {}", path.display()))
}

impl Settings {
    fn read() -> anyhow::Result<Self> {
        Ok(Self {
            bytes: read_vm("dirty_bytes")?,
            ratio: read_vm("dirty_ratio")?,
            background_bytes: read_vm("dirty_background_bytes")?,
            background_ratio: read_vm("dirty_background_ratio")?,
        })
    }

    /// Writes these settings: each limit in whichever form it had (writing
    /// one form zeroes the other).
    fn write(&self) -> anyhow::Result<()> {
        if self.bytes != 0 {
            write_vm("dirty_bytes", self.bytes)?;
        } else {
            write_vm("dirty_ratio", self.ratio)?;
        }
        if self.background_bytes != 0 {
            write_vm("dirty_background_bytes", self.background_bytes)
        } else {
            write_vm("dirty_background_ratio", self.background_ratio)
        }
    }
}

/// The settings as found, written back when dropped.
struct Restore(Settings);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = self.0.write() {
            eprintln!("vmscope: restoring the dirty limits: {e:#}");
        }
    }
}

/// The arguments' errors, before anything is changed.
fn check(a: &DirtyArgs) -> anyhow::Result<()> {
    let page = rustix::param::page_size() as u64;
    if a.size < CHUNK as u64 {
        return Err(exit::failure(
            exit::USAGE,
            format!("--size {} is below 1 MiB; give at least 1M", a.size),
        ));
    }
    if a.dirty_bytes < 2 * page {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--dirty-bytes {} is below the kernel's minimum of two pages ({}); give at least 64K",
                a.dirty_bytes,
                2 * page
            ),
        ));
    }
    let dir = &a.dir;
    let meta = std::fs::metadata(dir).map_err(|e| {
        exit::failure(
            exit::USAGE,
            format!("--dir {}: {e}; give an existing directory", dir.display()),
        )
    })?;
    if !meta.is_dir() {
        return Err(exit::failure(
            exit::USAGE,
            format!("--dir {} is not a directory", dir.display()),
        ));
    }
    if let Ok(fs) = rustix::fs::statfs(dir)
        && matches!(fs.f_type, TMPFS_MAGIC | RAMFS_MAGIC)
    {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--dir {} is on a memory filesystem, whose pages are never written back or \
                 throttled; give a directory on a disk filesystem",
                dir.display()
            ),
        ));
    }
    Ok(())
}

struct DirtyFigures {
    written: u64,
    write_calls: Duration,
    fsync: Duration,
    total: Duration,
    interrupted: bool,
}

/// Writes the file, timing the writes and the fsync; stops early when a
/// held signal comes.
fn write_file(dir: &Path, size: u64, held: &HeldSignals) -> anyhow::Result<DirtyFigures> {
    let mut file = tempfile::Builder::new()
        .prefix("vmscope-dirty-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    let chunk: Vec<u8> = (0..CHUNK).map(|i| (i % 251) as u8 + 1).collect();
    let start = Instant::now();
    let (mut written, mut write_calls, mut interrupted) = (0u64, Duration::ZERO, false);
    while written < size {
        if held.pending() {
            interrupted = true;
            break;
        }
        let n = CHUNK.min((size - written) as usize);
        let t = Instant::now();
        file.write_all(&chunk[..n])
            .with_context(|| format!("writing {}", file.path().display()))?;
        write_calls += t.elapsed();
        written += n as u64;
    }
    let t = Instant::now();
    file.as_file()
        .sync_all()
        .with_context(|| format!("fsync of {}", file.path().display()))?;
    let fsync = t.elapsed();
    Ok(DirtyFigures {
        written,
        write_calls,
        fsync,
        total: start.elapsed(),
        interrupted,
    })
}

pub fn run(a: &DirtyArgs) -> anyhow::Result<u8> {
    check(a)?;
    // SAFETY: no arguments, no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err(exit::failure(
            exit::NO_PRIVILEGE,
            "workload dirty sets vm.dirty_bytes, a system-wide setting: run it as root",
        ));
    }
    let held = HeldSignals::hold()?;
    let found = Settings::read()?;
    let restore = Restore(found);
    Settings {
        bytes: a.dirty_bytes,
        ratio: 0,
        background_bytes: (a.dirty_bytes / 2).max(rustix::param::page_size() as u64),
        background_ratio: 0,
    }
    .write()?;
    let outcome = write_file(&a.dir, a.size, &held);
    drop(restore);
    drop(held);
    let m = outcome?;
    report(a, &m)?;
    Ok(if m.interrupted { exit::FAILURE } else { 0 })
}

fn report(a: &DirtyArgs, m: &DirtyFigures) -> anyhow::Result<()> {
    let secs = m.total.as_secs_f64();
    let mb_s = m.written as f64 / 1e6 / secs.max(1e-9);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "dirty: {} written to {} in {secs:.2} s ({mb_s:.0} MB/s) with vm.dirty_bytes {}: \
         {:.2} s in write(), fsync {:.2} s{}",
        fmt_bytes(m.written),
        a.dir.display(),
        fmt_bytes(a.dirty_bytes),
        m.write_calls.as_secs_f64(),
        m.fsync.as_secs_f64(),
        if m.interrupted { " (interrupted)" } else { "" }
    )?;
    let doc = serde_json::json!({
        "workload": "dirty",
        "bytes_written": m.written,
        "seconds": secs,
        "mb_s": mb_s,
        "write_call_s": m.write_calls.as_secs_f64(),
        "fsync_s": m.fsync.as_secs_f64(),
        "interrupted": m.interrupted,
        "config": {
            "size_bytes": a.size,
            "dirty_bytes": a.dirty_bytes,
            "dir": PathBuf::from(&a.dir),
        },
    });
    writeln!(out, "{doc}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(size: u64, dirty_bytes: u64, dir: &str) -> DirtyArgs {
        DirtyArgs {
            size,
            dirty_bytes,
            dir: dir.into(),
        }
    }

    #[test]
    fn bad_arguments_are_usage_errors_naming_them() {
        for (a, what) in [
            (args(4096, 4 << 20, "/var/tmp"), "--size 4096"),
            (args(1 << 30, 100, "/var/tmp"), "--dirty-bytes 100"),
            (args(1 << 30, 4 << 20, "/no/such/dir"), "--dir /no/such/dir"),
            (
                args(1 << 30, 4 << 20, "/etc/hostname"),
                "is not a directory",
            ),
        ] {
            let e = check(&a).expect_err(what);
            assert_eq!(exit::code_of(&e, 0), exit::USAGE, "{what}");
            let msg = exit::message_of(&e);
            assert!(msg.contains(what) && !msg.contains('\n'), "{msg}");
        }
        assert!(check(&args(1 << 30, 4 << 20, "/var/tmp")).is_ok());
    }

    #[test]
    fn a_memory_filesystem_is_refused() {
        if rustix::fs::statfs("/dev/shm").is_ok_and(|f| f.f_type == TMPFS_MAGIC) {
            let e = check(&args(1 << 30, 4 << 20, "/dev/shm")).expect_err("tmpfs");
            assert!(exit::message_of(&e).contains("memory filesystem"));
        }
    }
}
