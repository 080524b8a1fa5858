//! Swap by tier: where swapped pages went. A page swapped out is either
//! stored compressed in RAM by zswap (`zswpout`) or written to a swap
//! device (`pswpout`), and a device may itself be compressed RAM (zram)
//! or a disk; zswap also writes pages it holds back to the device when its
//! pool is full (`zswpwb`, counted in `pswpout` too). A swap-in is a zswap
//! load (`zswpin`) or a device read (`pswpin`).
//!
//! Pure: an instant's [`TierSample`] is read by `source::kernel::tiers`;
//! the run's [`SwapTiers`] is made here from the last one and the run's
//! `/proc/vmstat` deltas. A count this kernel does not keep is null with
//! its reason in `unavailable`, never 0.
//!
//! Per process the tier cannot be told: the kernel counts zswap stores and
//! loads only system-wide and per cgroup (v2 `memory.stat`), and a
//! process's swap-out is charged when its page leaves, whatever tier takes
//! it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::procstat::VmstatDelta;

/// Why a process's tier is not told, wherever a per-process figure would
/// be expected.
pub const PER_PROCESS: &str = "the kernel counts zswap stores and loads system-wide and per \
                               cgroup (v2 memory.stat), not per process";

/// The zswap pool at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ZswapPool {
    /// Its `enabled` module parameter.
    pub enabled: bool,
    pub compressor: Option<String>,
    pub max_pool_percent: Option<u64>,
    /// The compressed pool (`/proc/meminfo` Zswap); null where meminfo
    /// lacks it.
    pub pool_bytes: Option<u64>,
    /// What the pool holds, uncompressed (`/proc/meminfo` Zswapped).
    pub stored_bytes: Option<u64>,
}

impl ZswapPool {
    /// Stored over pool bytes; null with an empty pool.
    pub fn ratio(&self) -> Option<f64> {
        ratio(self.stored_bytes?, self.pool_bytes?)
    }
}

/// A zram device's own books (`/sys/block/zramN/mm_stat`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ZramStat {
    /// Data stored, uncompressed (`orig_data_size`).
    pub orig_data_bytes: u64,
    /// The same, compressed (`compr_data_size`).
    pub compr_data_bytes: u64,
    /// Memory the device takes, allocator overhead included
    /// (`mem_used_total`).
    pub mem_used_bytes: u64,
}

impl ZramStat {
    /// Original over compressed bytes; null when empty.
    pub fn ratio(&self) -> Option<f64> {
        ratio(self.orig_data_bytes, self.compr_data_bytes)
    }
}

/// One swap device at one instant (`/proc/swaps`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TierDevice {
    pub name: String,
    /// `file` or `partition`.
    pub kind: String,
    /// `zram` (compressed RAM) or `disk`.
    pub medium: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
    /// A zram device's own books; null for a disk or when unreadable.
    pub zram: Option<ZramStat>,
}

/// The swap tiers at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TierSample {
    /// Null when the kernel has no zswap (`/sys/module/zswap` absent).
    pub zswap: Option<ZswapPool>,
    pub devices: Vec<TierDevice>,
}

/// Pages swapped out over the run, by tier.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TierOut {
    /// Stored compressed in RAM by zswap (`zswpout`).
    pub zswap_stores: Option<u64>,
    /// Written to a swap device (`pswpout`), zswap's write-back included.
    pub device_writes: Option<u64>,
    /// Of those, written back from the zswap pool (`zswpwb`).
    pub zswap_writeback: Option<u64>,
}

/// Pages swapped in over the run, by tier.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TierIn {
    /// Loaded from the zswap pool (`zswpin`).
    pub zswap_loads: Option<u64>,
    /// Read from a swap device (`pswpin`).
    pub device_reads: Option<u64>,
}

/// The run's swap by tier, system-wide.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SwapTiers {
    pub out: TierOut,
    #[serde(rename = "in")]
    pub into: TierIn,
    /// The pool and the devices at the end of the run.
    pub end: TierSample,
    /// The zswap pool's stored over compressed bytes at the end.
    pub zswap_ratio: Option<f64>,
    /// Each null figure above, with the reason.
    pub unavailable: BTreeMap<String, String>,
    /// Why no figure is per process.
    pub per_process: String,
    /// One line for people.
    pub summary: String,
}

impl SwapTiers {
    /// Whether any page went out or came in by any tier.
    pub fn moved(&self) -> bool {
        [
            self.out.zswap_stores,
            self.out.device_writes,
            self.into.zswap_loads,
            self.into.device_reads,
        ]
        .into_iter()
        .any(|v| v.is_some_and(|v| v > 0))
    }
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// The run's tiers from its vmstat deltas and the last instant.
pub fn swap_tiers(vmstat: &VmstatDelta, end: TierSample) -> SwapTiers {
    let mut unavailable = BTreeMap::new();
    let mut get = |field: &str, key: &str| -> Option<u64> {
        let v = vmstat.counters.get(key).copied().flatten();
        if v.is_none() {
            let why = if vmstat.unavailable.iter().any(|k| k == key) {
                format!("this kernel's /proc/vmstat has no {key}")
            } else {
                format!("/proc/vmstat {key} went backwards or was missing at the start")
            };
            unavailable.insert(field.to_string(), why);
        }
        v
    };
    let out = TierOut {
        zswap_stores: get("out.zswap_stores", "zswpout"),
        device_writes: get("out.device_writes", "pswpout"),
        zswap_writeback: get("out.zswap_writeback", "zswpwb"),
    };
    let into = TierIn {
        zswap_loads: get("in.zswap_loads", "zswpin"),
        device_reads: get("in.device_reads", "pswpin"),
    };
    let zswap_ratio = end.zswap.as_ref().and_then(ZswapPool::ratio);
    let summary = summary(&out, &into, &end);
    SwapTiers {
        out,
        into,
        end,
        zswap_ratio,
        unavailable,
        per_process: PER_PROCESS.to_string(),
        summary,
    }
}

fn n(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| v.to_string())
}

/// What the devices are, for the summary: "zram0 (compressed RAM)",
/// "/swapfile (disk)".
fn devices(end: &TierSample) -> String {
    if end.devices.is_empty() {
        return "no swap device".to_string();
    }
    end.devices
        .iter()
        .map(|d| {
            let what = if d.medium == "zram" {
                "compressed RAM"
            } else {
                "disk"
            };
            format!("{} ({what})", d.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn summary(out: &TierOut, into: &TierIn, end: &TierSample) -> String {
    let zswap = match &end.zswap {
        None => "no zswap in this kernel".to_string(),
        Some(z) if !z.enabled => "zswap off".to_string(),
        Some(z) => match z.ratio() {
            Some(r) => format!("zswap pool {r:.2}:1"),
            None => "zswap pool empty".to_string(),
        },
    };
    format!(
        "swap by tier: out {} pages to zswap (compressed in RAM), {} to the device ({} written \
         back from zswap); in {} from zswap, {} from the device; {}; {zswap}",
        n(out.zswap_stores),
        n(out.device_writes),
        n(out.zswap_writeback),
        n(into.zswap_loads),
        n(into.device_reads),
        devices(end)
    )
}

/// `mm_stat`'s first three fields: orig_data_size, compr_data_size,
/// mem_used_total (bytes).
pub fn parse_mm_stat(text: &str) -> Option<ZramStat> {
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some(ZramStat {
        orig_data_bytes: f.next()??,
        compr_data_bytes: f.next()??,
        mem_used_bytes: f.next()??,
    })
}

/// The medium of a swap device by its name.
pub fn medium(name: &str) -> &'static str {
    let base = name.rsplit('/').next().unwrap_or(name);
    if base.starts_with("zram") {
        "zram"
    } else {
        "disk"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(pairs: &[(&str, Option<u64>)], missing: &[&str]) -> VmstatDelta {
        VmstatDelta {
            counters: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            gauges_last: BTreeMap::new(),
            unavailable: missing.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn the_split_takes_each_tier_from_its_counter_and_says_what_is_missing() {
        let d = delta(
            &[
                ("zswpout", Some(127_737)),
                ("pswpout", Some(0)),
                ("zswpin", Some(76_526)),
                ("pswpin", Some(0)),
            ],
            &["zswpwb"],
        );
        let end = TierSample {
            zswap: Some(ZswapPool {
                enabled: true,
                compressor: Some("lzo".into()),
                max_pool_percent: Some(20),
                pool_bytes: Some(100 << 20),
                stored_bytes: Some(300 << 20),
            }),
            devices: vec![TierDevice {
                name: "/swapfile".into(),
                kind: "file".into(),
                medium: "disk".into(),
                ..TierDevice::default()
            }],
        };
        let t = swap_tiers(&d, end);
        assert_eq!(t.out.zswap_stores, Some(127_737));
        assert_eq!(t.out.device_writes, Some(0));
        assert_eq!(t.out.zswap_writeback, None);
        assert_eq!(t.into.zswap_loads, Some(76_526));
        assert_eq!(t.zswap_ratio, Some(3.0));
        assert!(t.unavailable["out.zswap_writeback"].contains("no zswpwb"));
        assert_eq!(t.unavailable.len(), 1);
        assert!(
            t.summary.contains(
                "out 127737 pages to zswap (compressed in RAM), 0 to the device (n/a written back"
            ) && t.summary.contains("/swapfile (disk)")
                && t.summary.contains("zswap pool 3.00:1"),
            "{}",
            t.summary
        );
    }

    #[test]
    fn a_counter_that_went_backwards_is_null_with_its_reason() {
        let d = delta(&[("zswpout", None), ("pswpout", Some(5))], &[]);
        let t = swap_tiers(&d, TierSample::default());
        assert_eq!(t.out.zswap_stores, None);
        assert!(t.unavailable["out.zswap_stores"].contains("went backwards"));
        assert!(t.summary.contains("no zswap in this kernel"));
        assert!(t.summary.contains("no swap device"));
    }

    #[test]
    fn mm_stat_and_media_are_read() {
        let z = parse_mm_stat("  4096000  1024000  1200000        0  1200000        0\n");
        assert_eq!(z.as_ref().map(|z| z.orig_data_bytes), Some(4_096_000));
        assert_eq!(z.and_then(|z| z.ratio()), Some(4.0));
        assert_eq!(parse_mm_stat("12 x"), None);
        assert_eq!(ZramStat::default().ratio(), None);
        assert_eq!(medium("/dev/zram0"), "zram");
        assert_eq!(medium("/swapfile"), "disk");
        assert_eq!(medium("/dev/vdb1"), "disk");
    }
}
