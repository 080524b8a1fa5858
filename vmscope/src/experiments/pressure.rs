//! Memory pressure with swap, for the workloads and labs that need reclaim
//! (and for the end-to-end tests, which wrap these types):
//!
//! - [`ZramSwap`] is a compressed RAM swap device that exists for as long as
//!   the value does;
//! - [`SwapFile`] is a swap file on disk and [`Zswap`] turns zswap on in
//!   front of it, for as long as each value lives;
//! - [`MemCgroup`] is a memory cgroup with a hard limit, so a workload that
//!   touches more than the limit is reclaimed and swapped without putting the
//!   whole machine under pressure;
//! - [`vmstat`] and [`active_swaps`] read the kernel's books.
//!
//! Setup returns errors with context, after undoing what was already done;
//! the `Drop` implementations never panic and report problems on stderr
//! (removing a swap device or a cgroup is the user's system state).

use std::{
    collections::BTreeMap,
    ffi::{CString, OsStr},
    fs,
    io::{self, ErrorKind},
    os::unix::{ffi::OsStrExt as _, process::CommandExt as _},
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicU32, Ordering},
    thread,
    time::Duration,
};

use anyhow::{Context as _, bail};

/// `/proc/vmstat` as name → value.
pub fn vmstat() -> anyhow::Result<BTreeMap<String, u64>> {
    let text = fs::read_to_string("/proc/vmstat").context("reading /proc/vmstat")?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let name = it.next()?;
            let value = it.next()?.parse().ok()?;
            Some((name.to_owned(), value))
        })
        .collect())
}

/// The device paths listed in `/proc/swaps`.
pub fn active_swaps() -> anyhow::Result<Vec<PathBuf>> {
    let text = fs::read_to_string("/proc/swaps").context("reading /proc/swaps")?;
    Ok(text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(|f| PathBuf::from(unescape_octal(f)))
        .collect())
}

use crate::source::kernel::cgroupfs::unescape_octal;

fn write(path: &Path, value: &str) -> anyhow::Result<()> {
    fs::write(path, value).with_context(|| format!("writing {value:?} to {}", path.display()))
}

fn read(path: &Path) -> anyhow::Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
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

fn path_cstring(p: &Path) -> anyhow::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .with_context(|| format!("{} contains a NUL byte", p.display()))
}

/// Swaps off `path`; on failure says so on stderr (naming it the `what`
/// left in place) and returns false.
fn swap_off(path: &Path, what: &str) -> bool {
    let Ok(p) = path_cstring(path) else {
        return false;
    };
    // SAFETY: `p` is a NUL-terminated path that outlives the call.
    if unsafe { libc::swapoff(p.as_ptr()) } != 0 {
        let e = io::Error::last_os_error();
        eprintln!(
            "vmscope: swapoff {}: {e}; leaving the {what} in place",
            path.display()
        );
        return false;
    }
    true
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
    /// Needs root and the zram module. On failure, what was already done is
    /// undone.
    pub fn new(size_bytes: u64) -> anyhow::Result<ZramSwap> {
        if size_bytes == 0 {
            bail!("a zram swap device needs a size above 0");
        }
        let size = size_bytes.to_string();
        let mut swap = match Self::claim_zram0(&size)? {
            Some(s) => s,
            None => {
                let hot_add = Path::new(ZRAM_CONTROL).join("hot_add");
                let index: u32 = read(&hot_add)
                    .context("adding a zram device (is the zram module loaded? `modprobe zram`)")?
                    .trim()
                    .parse()
                    .with_context(|| format!("{} gave no device index", hot_add.display()))?;
                // From here on, Drop removes the device again if a step fails.
                let swap = ZramSwap {
                    index,
                    device: PathBuf::from(format!("/dev/zram{index}")),
                    hot_added: true,
                    swapped_on: false,
                };
                write(&swap.sysfs("disksize"), &size)?;
                swap
            }
        };
        swap.wait_for_node()?;
        let out = Command::new("mkswap")
            .arg(&swap.device)
            .output()
            .context("running mkswap (Debian package util-linux)")?;
        if !out.status.success() {
            bail!(
                "mkswap {} failed ({}): {}",
                swap.device.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let dev = path_cstring(&swap.device)?;
        let flags = SWAP_FLAG_PREFER | SWAP_FLAG_PRIO_MASK;
        // SAFETY: `dev` is a NUL-terminated path that outlives the call.
        if unsafe { libc::swapon(dev.as_ptr(), flags) } != 0 {
            let e = io::Error::last_os_error();
            return Err(e).with_context(|| format!("swapon {}", swap.device.display()));
        }
        swap.swapped_on = true;
        Ok(swap)
    }

    /// `/dev/zram0` with `size` written as its disk size, if it was unused.
    /// Writing the disk size of an initialised device fails with EBUSY, so
    /// another process claiming it at the same time is noticed here.
    fn claim_zram0(size: &str) -> anyhow::Result<Option<ZramSwap>> {
        let device = PathBuf::from("/dev/zram0");
        let disksize = Path::new("/sys/block/zram0/disksize");
        let unused = fs::read_to_string(disksize).is_ok_and(|s| s.trim() == "0")
            && !active_swaps()?.contains(&device);
        // On failure zram0 is someone else's: nothing to undo. (The value is
        // built only on success, as dropping it resets the device.)
        if !unused || fs::write(disksize, size).is_err() {
            return Ok(None);
        }
        Ok(Some(ZramSwap {
            index: 0,
            device,
            hot_added: false,
            swapped_on: false,
        }))
    }

    fn sysfs(&self, attr: &str) -> PathBuf {
        PathBuf::from(format!("/sys/block/zram{}/{attr}", self.index))
    }

    /// A hot-added device's node can appear a moment after its index.
    fn wait_for_node(&self) -> anyhow::Result<()> {
        for _ in 0..100 {
            if self.device.exists() {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(10));
        }
        bail!("{} did not appear", self.device.display())
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
        // A device that may still hold swapped pages is left alone.
        if self.swapped_on && !swap_off(&self.device, "device") {
            return;
        }
        if let Err(e) = retry_busy(|| fs::write(self.sysfs("reset"), "1")) {
            eprintln!("vmscope: resetting {}: {e}", self.device.display());
        }
        if self.hot_added {
            let hot_remove = Path::new(ZRAM_CONTROL).join("hot_remove");
            if let Err(e) = retry_busy(|| fs::write(&hot_remove, self.index.to_string())) {
                eprintln!("vmscope: removing zram device {}: {e}", self.index);
            }
        }
    }
}

/// A swap file, active at the highest priority for as long as the value
/// lives; swapped off and deleted when dropped.
#[derive(Debug)]
pub struct SwapFile {
    path: PathBuf,
    swapped_on: bool,
}

impl SwapFile {
    /// Creates `path` (which must not exist) of `size_bytes`, allocated (a
    /// swap file may have no holes), and swaps on it. Needs root and a
    /// file system that takes swap files (ext4, xfs; not tmpfs).
    pub fn new(path: &Path, size_bytes: u64) -> anyhow::Result<SwapFile> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("creating swap file {}", path.display()))?;
        // From here on, Drop deletes the file again if a step fails.
        let mut swap = SwapFile {
            path: path.to_path_buf(),
            swapped_on: false,
        };
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, size_bytes)
            .with_context(|| format!("allocating {size_bytes} bytes for {}", path.display()))?;
        drop(file);
        let out = Command::new("mkswap")
            .arg(path)
            .output()
            .context("running mkswap (Debian package util-linux)")?;
        if !out.status.success() {
            bail!(
                "mkswap {} failed ({}): {}",
                path.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let p = path_cstring(path)?;
        // SAFETY: `p` is a NUL-terminated path that outlives the call.
        if unsafe { libc::swapon(p.as_ptr(), SWAP_FLAG_PREFER | SWAP_FLAG_PRIO_MASK) } != 0 {
            let e = io::Error::last_os_error();
            return Err(e).with_context(|| format!("swapon {}", path.display()));
        }
        swap.swapped_on = true;
        Ok(swap)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SwapFile {
    fn drop(&mut self) {
        if self.swapped_on && !swap_off(&self.path, "file") {
            return;
        }
        if let Err(e) = fs::remove_file(&self.path) {
            eprintln!("vmscope: removing {}: {e}", self.path.display());
        }
    }
}

const ZSWAP_PARAMETERS: &str = "/sys/module/zswap/parameters";

/// zswap turned on, with its pool limited to a share of memory, for as long
/// as the value lives; its parameters as found are put back when dropped.
#[derive(Debug)]
pub struct Zswap {
    found: Vec<(&'static str, String)>,
}

impl Zswap {
    /// Needs root and a kernel with zswap.
    pub fn enable(max_pool_percent: u32) -> anyhow::Result<Zswap> {
        let param = |name: &str| Path::new(ZSWAP_PARAMETERS).join(name);
        let mut z = Zswap { found: Vec::new() };
        for name in ["max_pool_percent", "shrinker_enabled", "enabled"] {
            // 6.1 has no shrinker parameter.
            let Ok(was) = read(&param(name)) else {
                if name == "enabled" {
                    bail!("this kernel has no zswap (CONFIG_ZSWAP)");
                }
                continue;
            };
            z.found.push((name, was.trim().to_string()));
        }
        z.set_pool_percent(max_pool_percent)?;
        write(&param("enabled"), "Y")?;
        Ok(z)
    }

    /// Turns zswap's shrinker on or off: on, reclaim writes cold pages of
    /// the pool back to the device (6.8 and later).
    pub fn set_shrinker(&self, on: bool) -> anyhow::Result<()> {
        write(
            &Path::new(ZSWAP_PARAMETERS).join("shrinker_enabled"),
            if on { "Y" } else { "N" },
        )
    }

    /// Limits the pool to `percent` of memory (0 makes every store fail).
    pub fn set_pool_percent(&self, percent: u32) -> anyhow::Result<()> {
        write(
            &Path::new(ZSWAP_PARAMETERS).join("max_pool_percent"),
            &percent.to_string(),
        )
    }
}

impl Drop for Zswap {
    fn drop(&mut self) {
        for (name, was) in self.found.iter().rev() {
            let path = Path::new(ZSWAP_PARAMETERS).join(name);
            if let Err(e) = fs::write(&path, was) {
                eprintln!("vmscope: putting {} back to {was}: {e}", path.display());
            }
        }
    }
}

/// A memory cgroup limited to a number of bytes, with swap allowed, removed
/// again when the value is dropped (its tasks are moved to the parent).
#[derive(Debug)]
pub struct MemCgroup {
    path: PathBuf,
    version: u8,
}

static CGROUP_SEQ: AtomicU32 = AtomicU32::new(0);

/// Where the memory controller is mounted: a v1 hierarchy with the `memory`
/// option, or else a cgroup2 mount whose root offers `memory`.
pub fn memory_controller() -> anyhow::Result<(PathBuf, u8)> {
    let mounts = read(Path::new("/proc/self/mounts"))?;
    find_memory_controller(&mounts, |mnt| {
        fs::read_to_string(mnt.join("cgroup.controllers")).unwrap_or_default()
    })
    .context("no memory cgroup controller (v1 or v2) is mounted")
}

/// [`memory_controller`] over `mounts` (the text of `/proc/self/mounts`),
/// with `controllers` reading a cgroup2 mount's `cgroup.controllers`.
pub fn find_memory_controller(
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
    /// Creates `<prefix>-<pid>-<n>` at the root of the memory hierarchy,
    /// limited to `limit_bytes` of memory with swap allowed: v1 sets
    /// `memory.limit_in_bytes` (and keeps `memory.swappiness` non-zero), v2
    /// sets `memory.max`, `memory.swap.max=max` and, where the kernel has
    /// it, `memory.zswap.max=0` so swap-outs reach the swap device and count
    /// in `pswpout`. Needs root.
    pub fn new(prefix: &str, limit_bytes: u64) -> anyhow::Result<MemCgroup> {
        let (root, version) = memory_controller()?;
        if version == 2 {
            let ctl = root.join("cgroup.subtree_control");
            if !read(&ctl)?.split_whitespace().any(|c| c == "memory") {
                write(&ctl, "+memory")?;
            }
        }
        let path = loop {
            let n = CGROUP_SEQ.fetch_add(1, Ordering::Relaxed);
            let p = root.join(format!("{prefix}-{}-{n}", std::process::id()));
            match fs::create_dir(&p) {
                Ok(()) => break p,
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("creating cgroup {}", p.display()));
                }
            }
        };
        // From here on, Drop removes the directory if a step fails.
        let cg = MemCgroup { path, version };
        cg.set_limit(limit_bytes)?;
        if version == 1 {
            let swappiness = cg.path.join("memory.swappiness");
            if swappiness.exists() && read(&swappiness)?.trim() == "0" {
                write(&swappiness, "60")?;
            }
        } else {
            let swap_max = cg.path.join("memory.swap.max");
            if swap_max.exists() {
                write(&swap_max, "max")?;
            }
            let zswap_max = cg.path.join("memory.zswap.max");
            if zswap_max.exists() {
                write(&zswap_max, "0")?;
            }
        }
        Ok(cg)
    }

    /// A cgroup `name` inside this one, with no limit of its own (it
    /// lives under this one's), removed when dropped: drop it first. On v2
    /// this one's children get the memory controller first.
    pub fn nested(&self, name: &str) -> anyhow::Result<MemCgroup> {
        if self.version == 2 {
            write(&self.path.join("cgroup.subtree_control"), "+memory")?;
        }
        let path = self.path.join(name);
        fs::create_dir(&path).with_context(|| format!("creating cgroup {}", path.display()))?;
        Ok(MemCgroup {
            path,
            version: self.version,
        })
    }

    fn limit_file(&self) -> PathBuf {
        self.path.join(if self.version == 1 {
            "memory.limit_in_bytes"
        } else {
            "memory.max"
        })
    }

    /// Changes the limit. Lowering it below the usage makes the writing task
    /// (the caller, not the cgroup's members) reclaim the excess.
    pub fn set_limit(&self, limit_bytes: u64) -> anyhow::Result<()> {
        write(&self.limit_file(), &limit_bytes.to_string())
    }

    /// Bytes charged to the cgroup now.
    pub fn usage(&self) -> anyhow::Result<u64> {
        let file = self.path.join(if self.version == 1 {
            "memory.usage_in_bytes"
        } else {
            "memory.current"
        });
        let text = read(&file)?;
        text.trim()
            .parse()
            .with_context(|| format!("{} is not a number: {text:?}", file.display()))
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

    /// Moves the calling process (all its threads) into the cgroup.
    pub fn enter(&self) -> anyhow::Result<()> {
        write(&self.procs_file(), "0")
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
    pub fn command(&self, program: impl AsRef<OsStr>) -> anyhow::Result<Command> {
        let procs = path_cstring(&self.procs_file())?;
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
        Ok(cmd)
    }

    /// `argv` wrapped so that the process moves itself into the cgroup and
    /// then execs `argv[0]` with the rest as arguments:
    /// `["sh", "-c", "echo $$ > '<procs>' && exec \"$0\" \"$@\"", argv...]`.
    /// Useful when another program (such as `vmscope record -- CMD`) starts
    /// the command. If joining fails, the shell exits non-zero without
    /// running `argv`.
    pub fn in_cgroup_argv(&self, argv: &[&str]) -> Vec<String> {
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
pub fn shell_quote(s: &str) -> String {
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
                let _ = fs::write(&parent_procs, pid.to_string());
            }
            match fs::remove_dir(&self.path) {
                Ok(()) => return,
                Err(e) if e.kind() == ErrorKind::NotFound => return,
                Err(e) => last = Some(e),
            }
            thread::sleep(Duration::from_millis(50));
        }
        if let Some(e) = last {
            eprintln!("vmscope: removing cgroup {}: {e}", self.path.display());
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
        assert_eq!(find_memory_controller("", with_memory), None);
    }

    #[test]
    fn vmstat_has_swap_counters() {
        let v = vmstat().expect("readable");
        assert!(v.contains_key("pswpout"), "{v:?}");
        assert!(v.contains_key("pgfault"), "{v:?}");
    }
}
