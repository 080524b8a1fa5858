//! Memory pressure with swap, for tests that check vmscope's reclaim, swap
//! and lazy-free counts against `/proc/vmstat`.
//!
//! - [`ZramSwap`] is a compressed RAM swap device that exists for as long as
//!   the value does.
//! - [`MemCgroup`] is a memory cgroup with a hard limit, so a workload that
//!   touches more than the limit is reclaimed and swapped without putting the
//!   whole machine under pressure.
//! - [`vmstat`] reads the kernel's global event counters.
//!
//! Swap devices are global state: a test that creates one, or that compares
//! swap counters, holds [`exclusive`] for its whole run.
//!
//! Everything panics with context on setup failure; the `Drop`
//! implementations never panic and report problems on stderr instead.

use std::{
    collections::BTreeMap,
    ffi::{CString, OsStr},
    fs,
    io::{self, ErrorKind},
    os::unix::{ffi::OsStrExt as _, process::CommandExt as _},
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicU32, Ordering},
    },
    thread,
    time::Duration,
};

static LOCK: Mutex<()> = Mutex::new(());

/// Serialises the tests of this process that touch swap. A test that failed
/// while holding the lock does not poison it for the others.
pub fn exclusive() -> MutexGuard<'static, ()> {
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `/proc/vmstat` as name → value.
pub fn vmstat() -> BTreeMap<String, u64> {
    let text =
        fs::read_to_string("/proc/vmstat").unwrap_or_else(|e| panic!("reading /proc/vmstat: {e}"));
    text.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let name = it.next()?;
            let value = it.next()?.parse().ok()?;
            Some((name.to_owned(), value))
        })
        .collect()
}

/// The device paths listed in `/proc/swaps`.
pub fn active_swaps() -> Vec<PathBuf> {
    let text =
        fs::read_to_string("/proc/swaps").unwrap_or_else(|e| panic!("reading /proc/swaps: {e}"));
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(|f| PathBuf::from(unescape_octal(f)))
        .collect()
}

/// Undoes the `\ooo` escapes the kernel uses for blanks in `/proc` paths.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && b.len() >= i + 4
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn write_file(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value)
}

fn must_write(path: &Path, value: &str) {
    write_file(path, value)
        .unwrap_or_else(|e| panic!("writing {value:?} to {}: {e}", path.display()));
}

fn must_read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Retries `op` while it fails with EBUSY (a device or cgroup that is still
/// being released), for about two seconds.
fn retry_busy(mut op: impl FnMut() -> io::Result<()>) -> io::Result<()> {
    let mut last = Ok(());
    for _ in 0..40 {
        last = op();
        match &last {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                thread::sleep(Duration::from_millis(50));
            }
            _ => return last,
        }
    }
    last
}

fn path_cstring(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes())
        .unwrap_or_else(|_| panic!("{} contains a NUL byte", p.display()))
}

const ZRAM_CONTROL: &str = "/sys/class/zram-control";
/// `SWAP_FLAG_PREFER` and `SWAP_FLAG_PRIO_MASK` from `<sys/swap.h>`.
const SWAP_FLAG_PREFER: libc::c_int = 0x8000;
const SWAP_FLAG_PRIO_MASK: libc::c_int = 0x7fff;

/// A zram swap device, active (at the highest priority, so it is used before
/// any other swap) for as long as the value lives.
#[derive(Debug)]
pub struct ZramSwap {
    index: u32,
    device: PathBuf,
    hot_added: bool,
    swapped_on: bool,
}

impl ZramSwap {
    /// Sets up a zram device of `size_bytes` as swap: `/dev/zram0` when it
    /// is unused (no disk size and not swapped on), else a hot-added device.
    /// Needs root. Panics with context on failure, after undoing what was
    /// already done.
    pub fn new(size_bytes: u64) -> ZramSwap {
        assert!(size_bytes > 0, "ZramSwap::new: size must be positive");
        let size = size_bytes.to_string();
        let mut swap = Self::claim_zram0(&size).unwrap_or_else(|| {
            let hot_add = Path::new(ZRAM_CONTROL).join("hot_add");
            let index: u32 = must_read(&hot_add)
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("{} gave no device index: {e}", hot_add.display()));
            // From here on, Drop removes the device again if a step fails.
            let swap = ZramSwap {
                index,
                device: PathBuf::from(format!("/dev/zram{index}")),
                hot_added: true,
                swapped_on: false,
            };
            must_write(&swap.sysfs("disksize"), &size);
            swap
        });

        swap.wait_for_node();
        let out = Command::new("mkswap")
            .arg(&swap.device)
            .output()
            .unwrap_or_else(|e| panic!("running mkswap: {e}"));
        assert!(
            out.status.success(),
            "mkswap {} failed ({}): {}",
            swap.device.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );

        let dev = path_cstring(&swap.device);
        let flags = SWAP_FLAG_PREFER | SWAP_FLAG_PRIO_MASK;
        // SAFETY: `dev` is a NUL-terminated path that outlives the call.
        if unsafe { libc::swapon(dev.as_ptr(), flags) } != 0 {
            let e = io::Error::last_os_error();
            panic!("swapon {}: {e}", swap.device.display());
        }
        swap.swapped_on = true;
        swap
    }

    /// `/dev/zram0` with `size` written as its disk size, if it was unused.
    /// Writing the disk size of an initialised device fails with EBUSY, so
    /// another process claiming it at the same time is noticed here.
    fn claim_zram0(size: &str) -> Option<ZramSwap> {
        let device = PathBuf::from("/dev/zram0");
        let disksize = Path::new("/sys/block/zram0/disksize");
        let unused = fs::read_to_string(disksize).is_ok_and(|s| s.trim() == "0")
            && !active_swaps().contains(&device);
        // On failure zram0 is someone else's: nothing to undo. (The value is
        // built only on success, as dropping it resets the device.)
        if !unused || write_file(disksize, size).is_err() {
            return None;
        }
        Some(ZramSwap {
            index: 0,
            device,
            hot_added: false,
            swapped_on: false,
        })
    }

    fn sysfs(&self, attr: &str) -> PathBuf {
        PathBuf::from(format!("/sys/block/zram{}/{attr}", self.index))
    }

    /// A hot-added device's node can appear a moment after its index.
    fn wait_for_node(&self) {
        for _ in 0..100 {
            if self.device.exists() {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!("{} did not appear", self.device.display());
    }

    /// The device node, e.g. `/dev/zram1`.
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// The zram device index (N in `/dev/zramN`).
    pub fn index(&self) -> u32 {
        self.index
    }
}

impl Drop for ZramSwap {
    fn drop(&mut self) {
        if self.swapped_on {
            let dev = path_cstring(&self.device);
            // SAFETY: `dev` is a NUL-terminated path that outlives the call.
            if unsafe { libc::swapoff(dev.as_ptr()) } != 0 {
                let e = io::Error::last_os_error();
                // The device may still hold swapped pages; leave it alone.
                eprintln!(
                    "ZramSwap: swapoff {}: {e}; leaving the device in place",
                    self.device.display()
                );
                return;
            }
        }
        if let Err(e) = retry_busy(|| write_file(&self.sysfs("reset"), "1")) {
            eprintln!("ZramSwap: resetting {}: {e}", self.device.display());
        }
        if self.hot_added {
            let hot_remove = Path::new(ZRAM_CONTROL).join("hot_remove");
            if let Err(e) = retry_busy(|| write_file(&hot_remove, &self.index.to_string())) {
                eprintln!("ZramSwap: hot_remove {}: {e}", self.index);
            }
        }
    }
}

/// A memory cgroup limited to a number of bytes, with swap allowed, removed
/// again when the value is dropped.
#[derive(Debug)]
pub struct MemCgroup {
    path: PathBuf,
    version: u8,
}

static CGROUP_SEQ: AtomicU32 = AtomicU32::new(0);

/// Where the memory controller is mounted: a v1 hierarchy with the `memory`
/// option, or else a cgroup2 mount whose root offers `memory`.
fn memory_controller() -> (PathBuf, u8) {
    let mounts = must_read(Path::new("/proc/self/mounts"));
    find_memory_controller(&mounts, |mnt| {
        fs::read_to_string(mnt.join("cgroup.controllers")).unwrap_or_default()
    })
    .unwrap_or_else(|| {
        panic!("no memory cgroup controller (v1 or v2) in /proc/self/mounts:\n{mounts}")
    })
}

/// [`memory_controller`] over `mounts` (the text of `/proc/self/mounts`),
/// with `controllers` reading a cgroup2 mount's `cgroup.controllers`.
fn find_memory_controller(
    mounts: &str,
    controllers: impl Fn(&Path) -> String,
) -> Option<(PathBuf, u8)> {
    let mut v2 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [_, mnt, fstype, opts, ..] = f[..] else {
            continue;
        };
        let mnt = PathBuf::from(unescape_octal(mnt));
        match fstype {
            "cgroup" if opts.split(',').any(|o| o == "memory") => return Some((mnt, 1)),
            "cgroup2"
                if v2.is_none() && controllers(&mnt).split_whitespace().any(|c| c == "memory") =>
            {
                v2 = Some(mnt);
            }
            _ => {}
        }
    }
    v2.map(|m| (m, 2))
}

impl MemCgroup {
    /// Creates `vmscope-test-<pid>-<n>` at the root of the memory hierarchy,
    /// limited to `limit_bytes` of memory with swap allowed: v1 sets
    /// `memory.limit_in_bytes` (and keeps `memory.swappiness` non-zero), v2
    /// sets `memory.max`, `memory.swap.max=max` and, where the kernel has
    /// it, `memory.zswap.max=0` so swap-outs reach the swap device and count
    /// in `pswpout`. Needs root. Panics with context on failure.
    pub fn new(limit_bytes: u64) -> MemCgroup {
        let (root, version) = memory_controller();
        if version == 2 {
            let ctl = root.join("cgroup.subtree_control");
            if !must_read(&ctl).split_whitespace().any(|c| c == "memory") {
                must_write(&ctl, "+memory");
            }
        }
        let path = loop {
            let n = CGROUP_SEQ.fetch_add(1, Ordering::Relaxed);
            let p = root.join(format!("vmscope-test-{}-{n}", std::process::id()));
            match fs::create_dir(&p) {
                Ok(()) => break p,
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("creating cgroup {}: {e}", p.display()),
            }
        };
        // From here on, Drop removes the directory if a step fails.
        let cg = MemCgroup { path, version };
        let limit = limit_bytes.to_string();
        if version == 1 {
            must_write(&cg.path.join("memory.limit_in_bytes"), &limit);
            let swappiness = cg.path.join("memory.swappiness");
            if swappiness.exists() && must_read(&swappiness).trim() == "0" {
                must_write(&swappiness, "60");
            }
        } else {
            must_write(&cg.path.join("memory.max"), &limit);
            let swap_max = cg.path.join("memory.swap.max");
            if swap_max.exists() {
                must_write(&swap_max, "max");
            }
            let zswap_max = cg.path.join("memory.zswap.max");
            if zswap_max.exists() {
                must_write(&zswap_max, "0");
            }
        }
        cg
    }

    /// Changes the limit. Lowering it below the usage makes the writing task
    /// (the caller, not the cgroup's members) reclaim the excess.
    pub fn set_limit(&self, limit_bytes: u64) {
        let file = if self.version == 1 {
            "memory.limit_in_bytes"
        } else {
            "memory.max"
        };
        must_write(&self.path.join(file), &limit_bytes.to_string());
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// 1 for a cgroup v1 memory hierarchy, 2 for the unified hierarchy.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// Absolute path of `cgroup.procs`: writing a pid there moves that
    /// process (all its threads) into the cgroup.
    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// The pids currently in the cgroup.
    pub fn pids(&self) -> Vec<u32> {
        fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// A `Command` for `program` whose process joins the cgroup between fork
    /// and exec, so everything it runs is charged here from the start.
    /// (Writing pid 0 to `cgroup.procs` means the writer itself, in v1 and
    /// v2 alike.)
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let procs = path_cstring(&self.procs_file());
        let mut cmd = Command::new(program);
        let hook = move || -> io::Result<()> {
            // Only async-signal-safe calls here: open, write, close.
            // SAFETY: `procs` is a NUL-terminated path owned by the closure;
            // the buffer is a static byte string.
            unsafe {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let err = io::Error::last_os_error();
                libc::close(fd);
                if n != 1 {
                    return Err(err);
                }
            }
            Ok(())
        };
        // SAFETY: the hook only makes async-signal-safe calls and touches no
        // state shared with the parent.
        unsafe {
            cmd.pre_exec(hook);
        }
        cmd
    }

    /// `argv` wrapped so that the process moves itself into the cgroup and
    /// then execs `argv[0]` with the rest as arguments:
    /// `["sh", "-c", "echo $$ > '<procs>' && exec \"$0\" \"$@\"", argv...]`.
    /// Useful when another program (such as `vmscope record -- CMD`) starts
    /// the command. If joining fails, the shell exits non-zero without
    /// running `argv`.
    pub fn in_cgroup_argv(&self, argv: &[&str]) -> Vec<String> {
        assert!(!argv.is_empty(), "in_cgroup_argv: empty argv");
        let procs = self.procs_file();
        let quoted = shell_quote(&procs.to_string_lossy());
        let mut out = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("echo $$ > {quoted} && exec \"$0\" \"$@\""),
        ];
        out.extend(argv.iter().map(|s| (*s).to_owned()));
        out
    }
}

/// `s` as one single-quoted shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        let Some(parent_procs) = self.path.parent().map(|p| p.join("cgroup.procs")) else {
            return;
        };
        let mut last = None;
        for _ in 0..40 {
            for pid in self.pids() {
                // A task that exits meanwhile makes this fail with ESRCH.
                let _ = write_file(&parent_procs, &pid.to_string());
            }
            match fs::remove_dir(&self.path) {
                Ok(()) => return,
                Err(e) if e.kind() == ErrorKind::NotFound => return,
                Err(e) => last = Some(e),
            }
            thread::sleep(Duration::from_millis(50));
        }
        if let Some(e) = last {
            eprintln!("MemCgroup: removing {}: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_proc_paths() {
        assert_eq!(unescape_octal(r"/a\040b"), "/a b");
        assert_eq!(unescape_octal(r"/a\04"), r"/a\04");
        assert_eq!(unescape_octal("/dev/zram0"), "/dev/zram0");
    }

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(shell_quote("/x/y"), "'/x/y'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn finds_the_memory_controller() {
        let hybrid = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n\
                      cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                      cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n";
        let none = |_: &Path| String::from("cpu io pids");
        assert_eq!(
            find_memory_controller(hybrid, none),
            Some((PathBuf::from("/sys/fs/cgroup/memory"), 1))
        );
        let unified = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        let with_memory = |_: &Path| String::from("cpuset cpu io memory pids");
        assert_eq!(
            find_memory_controller(unified, with_memory),
            Some((PathBuf::from("/sys/fs/cgroup"), 2))
        );
        assert_eq!(find_memory_controller(unified, none), None);
        assert_eq!(
            find_memory_controller(hybrid.lines().next().unwrap(), with_memory),
            None
        );
    }

    #[test]
    fn vmstat_has_swap_counters() {
        let v = vmstat();
        assert!(v.contains_key("pswpout"), "{v:?}");
        assert!(v.contains_key("pgfault"), "{v:?}");
    }
}
