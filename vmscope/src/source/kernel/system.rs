//! Facts about the running system read from /proc and /sys.

use std::path::Path;

use crate::model::recording::KernelInfo;
use serde::Serialize;

pub fn kernel_info() -> KernelInfo {
    let u = rustix::system::uname();
    let s = |c: &std::ffi::CStr| c.to_string_lossy().into_owned();
    KernelInfo {
        release: s(u.release()),
        version: s(u.version()),
        machine: s(u.machine()),
        hostname: s(u.nodename()),
    }
}

pub fn btf_present() -> bool {
    Path::new("/sys/kernel/btf/vmlinux").exists()
}

/// The active lockdown mode (`none`, `integrity`, `confidentiality`), if the
/// kernel has the lockdown LSM.
pub fn lockdown() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/security/lockdown").ok()?;
    parse_lockdown(&text)
}

fn parse_lockdown(text: &str) -> Option<String> {
    // "none [integrity] confidentiality": the bracketed word is active.
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}

#[derive(Clone, Debug, Serialize)]
pub struct SwapDevice {
    pub name: String,
    pub kind: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
    pub priority: i64,
}

pub fn swap_devices() -> Vec<SwapDevice> {
    parse_swaps(&std::fs::read_to_string("/proc/swaps").unwrap_or_default())
}

fn parse_swaps(text: &str) -> Vec<SwapDevice> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 5 {
                return None;
            }
            Some(SwapDevice {
                name: f[0].to_string(),
                kind: f[1].to_string(),
                size_bytes: f[2].parse::<u64>().ok()? * 1024,
                used_bytes: f[3].parse::<u64>().ok()? * 1024,
                priority: f[4].parse().ok()?,
            })
        })
        .collect()
}

/// The swap tiers now: the zswap pool (module parameters and
/// `/proc/meminfo`), each swap device, and each zram device's `mm_stat`.
pub fn swap_tiers() -> crate::model::tiers::TierSample {
    use crate::model::tiers::{TierDevice, TierSample, ZswapPool, medium, parse_mm_stat};
    let param = |name: &str| {
        std::fs::read_to_string(format!("/sys/module/zswap/parameters/{name}"))
            .ok()
            .map(|t| t.trim().to_string())
    };
    let zswap = Path::new("/sys/module/zswap").is_dir().then(|| {
        let meminfo = crate::source::procfs::meminfo();
        ZswapPool {
            enabled: param("enabled").is_some_and(|v| v == "Y" || v == "1"),
            compressor: param("compressor"),
            max_pool_percent: param("max_pool_percent").and_then(|v| v.parse().ok()),
            pool_bytes: meminfo.get("Zswap").copied(),
            stored_bytes: meminfo.get("Zswapped").copied(),
        }
    });
    let devices = swap_devices()
        .into_iter()
        .map(|d| {
            let medium = medium(&d.name);
            let zram = (medium == "zram")
                .then(|| {
                    let base = d.name.rsplit('/').next().unwrap_or(&d.name);
                    std::fs::read_to_string(format!("/sys/block/{base}/mm_stat")).ok()
                })
                .flatten()
                .and_then(|t| parse_mm_stat(&t));
            TierDevice {
                name: d.name,
                kind: d.kind,
                medium: medium.to_string(),
                size_bytes: d.size_bytes,
                used_bytes: d.used_bytes,
                zram,
            }
        })
        .collect();
    TierSample { zswap, devices }
}

/// The per-size THP counts now; `None` when the kernel has none.
pub fn thp_sizes() -> Option<crate::model::hugepages::ThpSizes> {
    use crate::model::hugepages::{STATS, size_of_dir};
    let root = Path::new("/sys/kernel/mm/transparent_hugepage");
    let mut out = crate::model::hugepages::ThpSizes::new();
    for entry in std::fs::read_dir(root).ok()?.flatten() {
        let name = entry.file_name();
        let Some(size) = name.to_str().and_then(size_of_dir) else {
            continue;
        };
        let stats = entry.path().join("stats");
        let counts: std::collections::BTreeMap<String, u64> = STATS
            .iter()
            .filter_map(|k| {
                let v = std::fs::read_to_string(stats.join(k)).ok()?;
                Some((k.to_string(), v.trim().parse().ok()?))
            })
            .collect();
        if !counts.is_empty() {
            out.insert(size.to_string(), counts);
        }
    }
    (!out.is_empty()).then_some(out)
}

#[derive(Clone, Debug, Serialize)]
pub struct MemoryCgroup {
    /// "v1", "v2", or null when no hierarchy carries the memory controller.
    pub version: Option<&'static str>,
    pub path: Option<String>,
}

pub fn memory_cgroup() -> MemoryCgroup {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    memory_cgroup_from(&mounts, |p| {
        std::fs::read_to_string(Path::new(p).join("cgroup.controllers")).ok()
    })
}

fn memory_cgroup_from(mounts: &str, controllers: impl Fn(&str) -> Option<String>) -> MemoryCgroup {
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let (path, fstype, opts) = (f[1], f[2], f[3]);
        if fstype == "cgroup" && opts.split(',').any(|o| o == "memory") {
            return MemoryCgroup {
                version: Some("v1"),
                path: Some(path.to_string()),
            };
        }
        if fstype == "cgroup2"
            && controllers(path).is_some_and(|c| c.split_whitespace().any(|w| w == "memory"))
        {
            return MemoryCgroup {
                version: Some("v2"),
                path: Some(path.to_string()),
            };
        }
    }
    MemoryCgroup {
        version: None,
        path: None,
    }
}

pub fn psi_memory_available() -> Result<(), String> {
    std::fs::read_to_string("/proc/pressure/memory")
        .map(|_| ())
        .map_err(|e| {
            format!("/proc/pressure/memory unreadable ({e}); PSI needs CONFIG_PSI and psi=1")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockdown_mode_is_the_bracketed_word() {
        assert_eq!(
            parse_lockdown("none [integrity] confidentiality\n").as_deref(),
            Some("integrity")
        );
        assert_eq!(
            parse_lockdown("[none] integrity\n").as_deref(),
            Some("none")
        );
        assert_eq!(parse_lockdown("garbage"), None);
    }

    #[test]
    fn swaps_are_parsed_in_bytes() {
        let t = "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition 1048572 1024 100\n";
        let d = parse_swaps(t);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].size_bytes, 1048572 * 1024);
        assert_eq!(d[0].used_bytes, 1024 * 1024);
        assert_eq!(d[0].priority, 100);
    }

    #[test]
    fn memory_controller_found_on_v1_or_v2() {
        let v1 = "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n";
        assert_eq!(memory_cgroup_from(v1, |_| None).version, Some("v1"));
        let v2 = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n";
        let m = memory_cgroup_from(v2, |_| Some("cpu io memory pids".into()));
        assert_eq!(m.version, Some("v2"));
        let none = memory_cgroup_from(v2, |_| Some("cpu".into()));
        assert_eq!(none.version, None);
    }
}
