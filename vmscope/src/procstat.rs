//! Raw cumulative samples of `/proc/vmstat` and `/proc/pressure/memory`, and
//! the pure functions that turn two samples into deltas.
//!
//! Pure: the files are read by `source::procfs`; everything here is a
//! function of its inputs, so it can be tested with canned text.
//!
//! Conventions:
//! - A counter that is absent on the running kernel is *unavailable*, never 0.
//! - A counter that went backwards between two samples (reset or wrap) has an
//!   unknown delta (`None`), never a huge wrapped number.
//! - Gauges (instantaneous levels such as free pages) have no meaningful delta;
//!   their last value is reported instead.

use std::collections::BTreeMap;
use std::io;

use serde::{Deserialize, Serialize};

/// Path of the kernel's VM event and state counters.
pub const VMSTAT_PATH: &str = "/proc/vmstat";

/// Path of the system-wide memory pressure-stall information.
pub const PSI_MEMORY_PATH: &str = "/proc/pressure/memory";

/// The `/proc/vmstat` entries vmscope records. Only those present on the
/// running kernel are kept; the rest are reported as unavailable.
pub const VMSTAT_KEYS: &[&str] = &[
    // Faults and swap traffic.
    "pgfault",
    "pgmajfault",
    "pswpin",
    "pswpout",
    // zswap: stores, loads and write-back to the device.
    "zswpout",
    "zswpin",
    "zswpwb",
    // Reclaim scanning and stealing.
    "pgscan_kswapd",
    "pgscan_direct",
    "pgscan_khugepaged",
    "pgscan_anon",
    "pgscan_file",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgsteal_khugepaged",
    "pgsteal_anon",
    "pgsteal_file",
    "pgrefill",
    "pglazyfree",
    "pglazyfreed",
    // Working-set detection.
    "workingset_refault_anon",
    "workingset_refault_file",
    "workingset_activate_anon",
    "workingset_activate_file",
    "workingset_restore_anon",
    "workingset_restore_file",
    // LRU movement and page allocator.
    "pgactivate",
    "pgdeactivate",
    "pgfree",
    "pgalloc_normal",
    "allocstall_normal",
    "allocstall_movable",
    // Transparent huge pages.
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "thp_split_page",
    "thp_swpout",
    "thp_swpout_fallback",
    // Compaction.
    "compact_stall",
    "compact_fail",
    "compact_success",
    "compact_migrate_scanned",
    "compact_free_scanned",
    "compact_daemon_wake",
    // Page migration.
    "pgmigrate_success",
    "pgmigrate_fail",
    // Background reclaim thread.
    "kswapd_low_wmark_hit_quickly",
    "kswapd_high_wmark_hit_quickly",
    "pageoutrun",
    // Swap readahead.
    "swap_ra",
    "swap_ra_hit",
    // TLB flushes (only on kernels built with TLB flush debugging).
    "nr_tlb_remote_flush",
    "nr_tlb_remote_flush_received",
    "nr_tlb_local_flush_all",
    "nr_tlb_local_flush_one",
    // Gauges: see VMSTAT_GAUGES.
    "nr_free_pages",
    "nr_anon_pages",
    "nr_file_pages",
    "nr_swapcached",
];

/// The subset of [`VMSTAT_KEYS`] that are instantaneous levels, not
/// monotonically increasing event counts.
pub const VMSTAT_GAUGES: &[&str] = &[
    "nr_free_pages",
    "nr_anon_pages",
    "nr_file_pages",
    "nr_swapcached",
];

/// The vmstat counters that get a column in a recording's series (when
/// this kernel has them).
pub const VMSTAT_COLUMNS: &[&str] = &[
    "pgfault",
    "pgmajfault",
    "pswpin",
    "pswpout",
    "zswpout",
    "zswpin",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pglazyfree",
    "pglazyfreed",
    "workingset_refault_anon",
    "workingset_refault_file",
    "thp_fault_alloc",
    "thp_fault_fallback",
    "compact_stall",
];

/// Whether `key` is a gauge (a level in pages) rather than a cumulative
/// counter. Deltas of gauges are meaningless; report their last value.
pub fn is_gauge(key: &str) -> bool {
    VMSTAT_GAUGES.contains(&key)
}

fn is_recorded(key: &str) -> bool {
    VMSTAT_KEYS.contains(&key)
}

/// One raw sample of the recorded `/proc/vmstat` entries, keyed by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Vmstat(pub BTreeMap<String, u64>);

impl Vmstat {
    /// Value of `key`, if the kernel reported it.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.0.get(key).copied()
    }
}

/// Parses `/proc/vmstat` text (`name value` per line), keeping only
/// [`VMSTAT_KEYS`]. Malformed lines (wrong token count, non-numeric or
/// negative value) are skipped. Never panics.
pub fn parse(text: &str) -> Vmstat {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let mut tokens = line.split_whitespace();
        let (Some(key), Some(value), None) = (tokens.next(), tokens.next(), tokens.next()) else {
            continue;
        };
        if !is_recorded(key) {
            continue;
        }
        if let Ok(value) = value.parse::<u64>() {
            map.insert(key.to_owned(), value);
        }
    }
    Vmstat(map)
}

/// Path of the kernel's CPU time accounting.
pub const STAT_PATH: &str = "/proc/stat";

/// All CPUs' time from `/proc/stat`'s `cpu` line, in clock ticks: how much
/// of it was busy (everything but `idle`; `iowait` counts as busy, as a
/// task waiting for I/O keeps its CPU non-idle to PSI), and how many CPUs;
/// and each CPU's busy ticks, by CPU number.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuTimes {
    pub busy_ticks: u64,
    pub total_ticks: u64,
    pub cpus: u32,
    #[serde(default)]
    pub per_cpu_busy: Vec<u64>,
    /// Nanoseconds per tick (`sysconf(_SC_CLK_TCK)`), 0 when unknown.
    #[serde(default)]
    pub tick_ns: u64,
}

impl CpuTimes {
    /// The average number of busy CPUs from `self` to `later`, if time
    /// passed.
    #[must_use]
    pub fn busy_cpus(&self, later: &CpuTimes) -> Option<f64> {
        let busy = later.busy_ticks.checked_sub(self.busy_ticks)?;
        let total = later.total_ticks.checked_sub(self.total_ticks)?;
        (total > 0 && later.cpus > 0).then(|| busy as f64 / (total as f64 / f64::from(later.cpus)))
    }
}

/// (busy, total) ticks of a `cpu` line's fields: the first eight (guest
/// time is already in user time), `idle` the fourth.
fn busy_total(fields: &str) -> Option<(u64, u64)> {
    let all: Vec<u64> = fields
        .split_whitespace()
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if all.len() < 4 {
        return None;
    }
    let total: u64 = all.iter().sum();
    Some((total - all[3], total))
}

/// Parses `/proc/stat`: the `cpu` line and the `cpuN` lines.
pub fn parse_stat(text: &str) -> Option<CpuTimes> {
    let mut lines = text.lines();
    let (busy_ticks, total_ticks) = busy_total(lines.next()?.strip_prefix("cpu ")?)?;
    let mut per_cpu_busy = Vec::new();
    let mut cpus = 0u32;
    for l in lines.take_while(|l| l.starts_with("cpu")) {
        let Some((n, rest)) = l[3..].split_once(' ') else {
            continue;
        };
        let (Ok(n), Some((busy, _))) = (n.parse::<usize>(), busy_total(rest)) else {
            continue;
        };
        if n >= 4096 {
            continue;
        }
        if per_cpu_busy.len() <= n {
            per_cpu_busy.resize(n + 1, 0);
        }
        per_cpu_busy[n] = busy;
        cpus += 1;
    }
    Some(CpuTimes {
        busy_ticks,
        total_ticks,
        cpus,
        per_cpu_busy,
        tick_ns: 0,
    })
}

/// One line of a pressure-stall file: running averages (percent of wall time)
/// and the cumulative stall time in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PsiLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total_us: u64,
}

/// Memory pressure-stall information. `full` is absent on old kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Psi {
    pub some: PsiLine,
    pub full: Option<PsiLine>,
}

fn parse_psi_line(fields: std::str::SplitWhitespace<'_>) -> Result<PsiLine, String> {
    let mut avg10 = None;
    let mut avg60 = None;
    let mut avg300 = None;
    let mut total = None;
    for field in fields {
        let Some((name, value)) = field.split_once('=') else {
            return Err(format!("field {field:?} is not name=value"));
        };
        let parse_avg = |v: &str| -> Result<f64, String> {
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
                _ => Err(format!("{name}={v:?} is not a non-negative number")),
            }
        };
        match name {
            "avg10" => avg10 = Some(parse_avg(value)?),
            "avg60" => avg60 = Some(parse_avg(value)?),
            "avg300" => avg300 = Some(parse_avg(value)?),
            "total" => {
                total = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("total={value:?} is not an integer"))?,
                );
            }
            // Tolerate fields a future kernel might add.
            _ => {}
        }
    }
    match (avg10, avg60, avg300, total) {
        (Some(avg10), Some(avg60), Some(avg300), Some(total_us)) => Ok(PsiLine {
            avg10,
            avg60,
            avg300,
            total_us,
        }),
        _ => Err("missing one of avg10, avg60, avg300, total".to_owned()),
    }
}

/// Parses a pressure-stall file:
///
/// ```text
/// some avg10=0.00 avg60=0.00 avg300=0.00 total=0
/// full avg10=0.00 avg60=0.00 avg300=0.00 total=0
/// ```
///
/// The `some` line is required; the `full` line may be absent. Blank lines
/// are ignored; any other line, or a repeated one, is an error.
pub fn parse_psi(text: &str) -> Result<Psi, String> {
    let mut some = None;
    let mut full = None;
    for (index, line) in text.lines().enumerate() {
        let mut fields = line.split_whitespace();
        let Some(kind) = fields.next() else {
            continue;
        };
        let slot = match kind {
            "some" => &mut some,
            "full" => &mut full,
            other => return Err(format!("line {}: unknown kind {other:?}", index + 1)),
        };
        if slot.is_some() {
            return Err(format!("line {}: repeated {kind:?} line", index + 1));
        }
        let parsed =
            parse_psi_line(fields).map_err(|e| format!("line {} ({kind}): {e}", index + 1))?;
        *slot = Some(parsed);
    }
    match some {
        Some(some) => Ok(Psi { some, full }),
        None => Err("no \"some\" line".to_owned()),
    }
}

/// `EOPNOTSUPP` on Linux: returned by pressure files when PSI is compiled in
/// but disabled.
const EOPNOTSUPP: i32 = 95;

/// Explains why a pressure file could not be read.
pub fn psi_unavailable_hint(err: &io::Error) -> &'static str {
    if err.kind() == io::ErrorKind::NotFound {
        "kernel without CONFIG_PSI or booted with psi=0"
    } else if err.kind() == io::ErrorKind::Unsupported || err.raw_os_error() == Some(EOPNOTSUPP) {
        "PSI is disabled on this kernel (psi=0)"
    } else if err.kind() == io::ErrorKind::PermissionDenied {
        "permission denied reading pressure information"
    } else {
        "pressure information unavailable"
    }
}

/// Difference between two [`Vmstat`] samples.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VmstatDelta {
    /// Counter increase over the interval, keyed by name. `None` means the
    /// delta is unknown: the counter went backwards (reset or wrap) or was
    /// missing from the first sample.
    pub counters: BTreeMap<String, Option<u64>>,
    /// Last value of each gauge present in the last sample.
    pub gauges_last: BTreeMap<String, u64>,
    /// [`VMSTAT_KEYS`] absent from the last sample (not provided by this
    /// kernel), in `VMSTAT_KEYS` order. Never reported as 0.
    pub unavailable: Vec<String>,
}

/// Computes counter deltas and gauge levels between two samples.
pub fn vmstat_delta(first: &Vmstat, last: &Vmstat) -> VmstatDelta {
    let mut delta = VmstatDelta::default();
    for &key in VMSTAT_KEYS {
        let Some(last_value) = last.get(key) else {
            delta.unavailable.push(key.to_owned());
            continue;
        };
        if is_gauge(key) {
            delta.gauges_last.insert(key.to_owned(), last_value);
        } else {
            let diff = first
                .get(key)
                .and_then(|first_value| last_value.checked_sub(first_value));
            delta.counters.insert(key.to_owned(), diff);
        }
    }
    delta
}

/// Summary of memory pressure over an interval.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
pub struct PsiSummary {
    /// `some` avg10 of the last sample (percent).
    pub some_avg10: f64,
    /// `full` avg10 of the last sample, if the kernel reports `full`.
    pub full_avg10: Option<f64>,
    /// Increase of `some` total stall time (µs); `None` if it went backwards.
    pub some_stall_us: Option<u64>,
    /// Increase of `full` total stall time (µs); `None` if it went backwards
    /// or `full` is absent from either sample.
    pub full_stall_us: Option<u64>,
}

/// Summarises pressure between two samples.
pub fn psi_delta(first: &Psi, last: &Psi) -> PsiSummary {
    let full_stall_us = match (first.full, last.full) {
        (Some(f), Some(l)) => l.total_us.checked_sub(f.total_us),
        _ => None,
    };
    PsiSummary {
        some_avg10: last.some.avg10,
        full_avg10: last.full.map(|l| l.avg10),
        some_stall_us: last.some.total_us.checked_sub(first.some.total_us),
        full_stall_us,
    }
}

/// Events per second for `delta` over `elapsed_ns` nanoseconds; `None` when
/// the delta is unknown or no time elapsed.
pub fn rate_per_sec(delta: Option<u64>, elapsed_ns: u64) -> Option<f64> {
    let delta = delta?;
    if elapsed_ns == 0 {
        return None;
    }
    Some(delta as f64 * 1e9 / elapsed_ns as f64)
}

/// The kernel's `PF_EXITING`: set once a task has begun to exit.
pub const PF_EXITING: u64 = 0x4;

/// The `flags` field (the 9th) of a `/proc/PID/stat` line. The command
/// name may hold spaces and parentheses: fields follow the last `)`.
pub fn stat_flags(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    // After ')': state(3) ppid(4) pgrp(5) session(6) tty(7) tpgid(8) flags(9).
    rest.split_whitespace().nth(6)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_of_a_stat_line_are_found_after_the_name() {
        let live = "4242 (a) b) c) S 1 4242 4242 0 -1 4194560 120 0 0 0";
        assert_eq!(stat_flags(live), Some(4194560));
        assert_eq!(stat_flags(live).map(|f| f & PF_EXITING), Some(0));
        let zombie = "4243 (vmscope-testchi) Z 4240 4240 4240 0 -1 4227340 0 0";
        assert_eq!(stat_flags(zombie).map(|f| f & PF_EXITING), Some(PF_EXITING));
        assert_eq!(stat_flags("4244 (x) S 1"), None);
    }

    /// Trimmed from /proc/vmstat of a 6.18 kernel; includes entries vmscope
    /// ignores (nr_free_pages_blocks, numa_hit, pgpgin, ...). The nr_tlb_*
    /// counters are absent, as on kernels without TLB flush debugging.
    const VMSTAT_SAMPLE: &str = "\
nr_free_pages 984595
nr_free_pages_blocks 841728
nr_zone_inactive_anon 1280
numa_hit 24400588
workingset_nodes 12221
workingset_refault_file 442767
nr_anon_pages 2410
nr_file_pages 859244
nr_swapcached 0
nr_dirty_threshold 1197621
pgpgin 3324113
pswpin 0
pswpout 0
pgalloc_normal 25503692
allocstall_normal 0
pgfree 26575013
pgactivate 723551
pgdeactivate 0
pgfault 26739252
pgmajfault 2758
pgrefill 0
pgsteal_kswapd 0
pgscan_kswapd 0
pgscan_direct 0
pgscan_anon 0
pgscan_file 0
pageoutrun 0
compact_stall 0
unevictable_pgs_culled 11942
thp_fault_alloc 0
swap_ra 0
";

    fn vm(pairs: &[(&str, u64)]) -> Vmstat {
        Vmstat(pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect())
    }

    fn psi_line(avg10: f64, total_us: u64) -> PsiLine {
        PsiLine {
            avg10,
            avg60: 0.0,
            avg300: 0.0,
            total_us,
        }
    }

    #[test]
    fn cpu_times_count_iowait_as_busy_and_average_busy_cpus() {
        let a = parse_stat(
            "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n\
             cpu1 50 0 25 400 25 0 0 0 0 0\nintr 1 2\n",
        )
        .expect("parses");
        assert_eq!(
            a,
            CpuTimes {
                busy_ticks: 200,
                total_ticks: 1000,
                cpus: 2,
                per_cpu_busy: vec![100, 100],
                tick_ns: 0,
            }
        );
        // 100 ticks of wall time per CPU; 150 of the 200 busy: 1.5 CPUs.
        let b = CpuTimes {
            busy_ticks: 350,
            total_ticks: 1200,
            cpus: 2,
            per_cpu_busy: Vec::new(),
            tick_ns: 0,
        };
        assert_eq!(a.busy_cpus(&b), Some(1.5));
        assert_eq!(b.busy_cpus(&a), None);
        assert!(parse_stat("garbage").is_none());
        assert!(parse_stat("cpu  1 2\n").is_none());
    }

    #[test]
    fn keys_are_unique_and_gauges_are_recorded() {
        let mut seen = std::collections::BTreeSet::new();
        for key in VMSTAT_KEYS {
            assert!(seen.insert(*key), "duplicate key {key}");
        }
        for gauge in VMSTAT_GAUGES.iter().chain(VMSTAT_COLUMNS) {
            assert!(VMSTAT_KEYS.contains(gauge), "{gauge} not in VMSTAT_KEYS");
        }
        assert_eq!(VMSTAT_KEYS.len(), 60);
    }

    #[test]
    fn is_gauge_classifies() {
        for gauge in [
            "nr_free_pages",
            "nr_anon_pages",
            "nr_file_pages",
            "nr_swapcached",
        ] {
            assert!(is_gauge(gauge));
        }
        assert!(!is_gauge("pgfault"));
        assert!(!is_gauge("nr_tlb_remote_flush"));
        assert!(!is_gauge("no_such_key"));
    }

    #[test]
    fn parse_real_vmstat() {
        let v = parse(VMSTAT_SAMPLE);
        assert_eq!(v.get("pgfault"), Some(26_739_252));
        assert_eq!(v.get("pgmajfault"), Some(2758));
        assert_eq!(v.get("workingset_refault_file"), Some(442_767));
        assert_eq!(v.get("nr_free_pages"), Some(984_595));
        assert_eq!(v.get("nr_swapcached"), Some(0));
        assert_eq!(v.get("pswpin"), Some(0));
        // Ignored entries are dropped, including a prefix-sharing one.
        for ignored in [
            "nr_free_pages_blocks",
            "numa_hit",
            "pgpgin",
            "nr_dirty_threshold",
            "unevictable_pgs_culled",
            "workingset_nodes",
        ] {
            assert_eq!(v.get(ignored), None, "{ignored} should be ignored");
        }
        assert!(v.0.keys().all(|k| VMSTAT_KEYS.contains(&k.as_str())));
        assert_eq!(v.0.len(), 24);
    }

    #[test]
    fn parse_skips_malformed_lines() {
        let text = "pgfault 10\n\
                    pgmajfault\n\
                    pswpin -3\n\
                    pswpout abc\n\
                    pgfree 1 2\n\
                    pgactivate 99999999999999999999999\n\
                    \n\
                    \u{0}\u{ff}garbage ===\n\
                       pgrefill   7   \n\
                    nr_free_pages 5";
        let v = parse(text);
        assert_eq!(
            v,
            vm(&[("pgfault", 10), ("pgrefill", 7), ("nr_free_pages", 5)])
        );
    }

    #[test]
    fn parse_garbage_never_panics() {
        for text in [
            "",
            "\n\n\n",
            " ",
            "pgfault",
            "=",
            "some avg10=",
            "\u{feff}pgfault 1",
            "pgfault 18446744073709551615",
            "pgfault 18446744073709551616",
            "\r\n\t\u{0}",
        ] {
            let _ = parse(text);
            let _ = parse_psi(text);
        }
        assert_eq!(
            parse("pgfault 18446744073709551615").get("pgfault"),
            Some(u64::MAX)
        );
    }

    #[test]
    fn parse_psi_with_full() {
        let text = "some avg10=1.50 avg60=0.25 avg300=0.05 total=123456\n\
                    full avg10=0.75 avg60=0.10 avg300=0.01 total=65432\n";
        let psi = parse_psi(text).expect("valid psi");
        assert_eq!(
            psi.some,
            PsiLine {
                avg10: 1.5,
                avg60: 0.25,
                avg300: 0.05,
                total_us: 123_456
            }
        );
        assert_eq!(
            psi.full,
            Some(PsiLine {
                avg10: 0.75,
                avg60: 0.10,
                avg300: 0.01,
                total_us: 65_432
            })
        );
    }

    #[test]
    fn parse_psi_without_full() {
        let psi = parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n").expect("valid psi");
        assert_eq!(psi.some, PsiLine::default());
        assert_eq!(psi.full, None);
    }

    #[test]
    fn parse_psi_rejects_bad_input() {
        let good_full = "full avg10=0.00 avg60=0.00 avg300=0.00 total=0";
        for bad in [
            "",
            good_full,
            "some avg10=0.00 avg60=0.00 avg300=0.00",
            "some avg10=x avg60=0.00 avg300=0.00 total=0",
            "some avg10=nan avg60=0.00 avg300=0.00 total=0",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=-1",
            "some avg10 avg60=0.00 avg300=0.00 total=0",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=0",
            "other avg10=0.00 avg60=0.00 avg300=0.00 total=0",
        ] {
            assert!(parse_psi(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn psi_hint_explains_missing_file() {
        let err = io::Error::from(io::ErrorKind::NotFound);
        assert!(psi_unavailable_hint(&err).contains("CONFIG_PSI"));
        let err = io::Error::from_raw_os_error(EOPNOTSUPP);
        assert!(psi_unavailable_hint(&err).contains("disabled"));
    }

    #[test]
    fn delta_of_counters() {
        let first = vm(&[("pgfault", 100), ("pgmajfault", 5)]);
        let last = vm(&[("pgfault", 160), ("pgmajfault", 5)]);
        let d = vmstat_delta(&first, &last);
        assert_eq!(d.counters.get("pgfault"), Some(&Some(60)));
        assert_eq!(d.counters.get("pgmajfault"), Some(&Some(0)));
    }

    #[test]
    fn backwards_counter_is_unknown() {
        let first = vm(&[("pgfault", 1000), ("pswpin", u64::MAX)]);
        let last = vm(&[("pgfault", 10), ("pswpin", 3)]);
        let d = vmstat_delta(&first, &last);
        assert_eq!(d.counters.get("pgfault"), Some(&None));
        assert_eq!(d.counters.get("pswpin"), Some(&None));
    }

    #[test]
    fn counter_missing_from_first_is_unknown() {
        let d = vmstat_delta(&vm(&[]), &vm(&[("pgfault", 7)]));
        assert_eq!(d.counters.get("pgfault"), Some(&None));
        assert!(!d.unavailable.contains(&"pgfault".to_owned()));
    }

    #[test]
    fn missing_key_is_unavailable_not_zero() {
        let first = parse(VMSTAT_SAMPLE);
        let last = parse(VMSTAT_SAMPLE);
        let d = vmstat_delta(&first, &last);
        for key in [
            "nr_tlb_remote_flush",
            "nr_tlb_local_flush_one",
            "pglazyfree",
        ] {
            assert!(d.unavailable.contains(&key.to_owned()), "{key}");
            assert!(!d.counters.contains_key(key), "{key} reported");
        }
        assert_eq!(d.counters.get("pgfault"), Some(&Some(0)));
        // Every recorded key lands in exactly one place.
        assert_eq!(
            d.counters.len() + d.gauges_last.len() + d.unavailable.len(),
            VMSTAT_KEYS.len()
        );
        // unavailable follows VMSTAT_KEYS order.
        let order: Vec<usize> = d
            .unavailable
            .iter()
            .filter_map(|k| VMSTAT_KEYS.iter().position(|x| x == k))
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn gauges_report_last_value() {
        let first = vm(&[("nr_free_pages", 900), ("nr_anon_pages", 10)]);
        let last = vm(&[("nr_free_pages", 100), ("nr_anon_pages", 20)]);
        let d = vmstat_delta(&first, &last);
        assert_eq!(d.gauges_last.get("nr_free_pages"), Some(&100));
        assert_eq!(d.gauges_last.get("nr_anon_pages"), Some(&20));
        assert!(!d.counters.contains_key("nr_free_pages"));
        assert!(d.unavailable.contains(&"nr_file_pages".to_owned()));
        assert!(!d.gauges_last.contains_key("nr_file_pages"));
    }

    #[test]
    fn psi_delta_with_full() {
        let first = Psi {
            some: psi_line(1.0, 1_000),
            full: Some(psi_line(0.5, 400)),
        };
        let last = Psi {
            some: psi_line(2.5, 4_000),
            full: Some(psi_line(1.25, 900)),
        };
        let s = psi_delta(&first, &last);
        assert_eq!(
            s,
            PsiSummary {
                some_avg10: 2.5,
                full_avg10: Some(1.25),
                some_stall_us: Some(3_000),
                full_stall_us: Some(500),
            }
        );
    }

    #[test]
    fn psi_delta_backwards_and_missing_full() {
        let first = Psi {
            some: psi_line(0.0, 5_000),
            full: None,
        };
        let last = Psi {
            some: psi_line(0.0, 10),
            full: Some(psi_line(0.0, 10)),
        };
        let s = psi_delta(&first, &last);
        assert_eq!(s.some_stall_us, None);
        assert_eq!(s.full_stall_us, None);
        assert_eq!(s.full_avg10, Some(0.0));

        let no_full = Psi {
            some: psi_line(0.0, 10),
            full: None,
        };
        let s = psi_delta(&no_full, &no_full);
        assert_eq!(s.some_stall_us, Some(0));
        assert_eq!(s.full_avg10, None);
        assert_eq!(s.full_stall_us, None);

        let backwards_full = Psi {
            some: psi_line(0.0, 10),
            full: Some(psi_line(0.0, 5)),
        };
        let ahead_full = Psi {
            some: psi_line(0.0, 10),
            full: Some(psi_line(0.0, 9)),
        };
        assert_eq!(psi_delta(&ahead_full, &backwards_full).full_stall_us, None);
    }

    #[test]
    fn rate_computation() {
        assert_eq!(rate_per_sec(Some(100), 1_000_000_000), Some(100.0));
        assert_eq!(rate_per_sec(Some(50), 500_000_000), Some(100.0));
        assert_eq!(rate_per_sec(Some(0), 2_000_000_000), Some(0.0));
        assert_eq!(rate_per_sec(Some(3), 2_000_000_000), Some(1.5));
        assert_eq!(rate_per_sec(None, 1_000_000_000), None);
        assert_eq!(rate_per_sec(Some(10), 0), None);
    }

    #[test]
    fn serde_round_trip() {
        let d = vmstat_delta(&vm(&[("pgfault", 1)]), &vm(&[("pgfault", 0)]));
        let json = serde_json::to_string(&d).expect("serialize");
        let back: VmstatDelta = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, d);
        let psi = parse_psi("some avg10=0.10 avg60=0.00 avg300=0.00 total=42").expect("valid");
        let json = serde_json::to_string(&psi).expect("serialize");
        let back: Psi = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, psi);
    }
}
