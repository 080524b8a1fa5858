//! Turns eBPF maps into raw cumulative [`Sample`]s. No formatting here.

use std::{
    collections::HashMap,
    time::{Instant, SystemTime},
};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use vmscope_common::{FAULT_CLASSES, ProcStats, counter};

use crate::{loader::Loaded, timefmt};

/// Cumulative page-fault counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounters {
    /// By class, in the order of `Recording::fault_classes`.
    pub user: [u64; FAULT_CLASSES],
    pub kernel: [u64; FAULT_CLASSES],
    /// From the perf fallback, which has no classes.
    pub unclassified: u64,
}

/// One process's cumulative counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcSample {
    pub pid: u32,
    pub comm: String,
    pub faults: FaultCounters,
}

/// Raw cumulative state at one instant. `procs` holds only the processes
/// whose counters changed since the previous sample (an absent process kept
/// its last value), which keeps long recordings small.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Monotonic time since the recording started.
    pub elapsed_ns: u64,
    pub timestamp: String,
    /// System-wide counters.
    pub faults: FaultCounters,
    pub procs: Vec<ProcSample>,
    /// Live entries in the per-process map.
    pub proc_entries: u64,
    /// Entries ever created in it; `proc_inserts - proc_entries` were evicted.
    pub proc_inserts: u64,
    /// Children not followed because the followed set was full.
    pub tracked_full: u64,
}

/// Reads samples from loaded probes.
pub struct Collector {
    start: Instant,
    last: HashMap<u32, ProcStats>,
}

impl Collector {
    pub fn new(start: Instant) -> Self {
        Self {
            start,
            last: HashMap::new(),
        }
    }

    pub fn sample(&mut self, probes: &mut Loaded) -> anyhow::Result<Sample> {
        probes.flush_logs();
        let counters = read_counters(probes)?;
        let mut procs = Vec::new();
        let mut entries = 0u64;
        for item in probes.procs.iter() {
            let (pid, stats) = item.context("reading the per-process map")?;
            entries += 1;
            if self
                .last
                .get(&pid)
                .is_some_and(|prev| same_counts(prev, &stats))
            {
                continue;
            }
            self.last.insert(pid, stats);
            procs.push(ProcSample {
                pid,
                comm: comm_string(&stats.comm),
                faults: FaultCounters {
                    user: stats.user_faults,
                    kernel: stats.kernel_faults,
                    unclassified: stats.unclassified_faults,
                },
            });
        }
        procs.sort_by_key(|p| p.pid);
        let c = |i: u32| counters.get(i as usize).copied().unwrap_or(0);
        let mut faults = FaultCounters {
            unclassified: c(counter::FAULT_UNCLASSIFIED),
            ..Default::default()
        };
        for k in 0..FAULT_CLASSES {
            faults.user[k] = c(counter::USER_FAULT_BASE + k as u32);
            faults.kernel[k] = c(counter::KERNEL_FAULT_BASE + k as u32);
        }
        Ok(Sample {
            elapsed_ns: u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            timestamp: timefmt::rfc3339(SystemTime::now()),
            faults,
            procs,
            proc_entries: entries,
            proc_inserts: c(counter::PROC_INSERTS),
            tracked_full: c(counter::TRACKED_FULL),
        })
    }
}

fn same_counts(a: &ProcStats, b: &ProcStats) -> bool {
    a.user_faults == b.user_faults
        && a.kernel_faults == b.kernel_faults
        && a.unclassified_faults == b.unclassified_faults
        && a.comm == b.comm
}

fn read_counters(probes: &Loaded) -> anyhow::Result<Vec<u64>> {
    (0..vmscope_common::counter::COUNT)
        .map(|i| {
            let per_cpu = probes
                .counters
                .get(&i, 0)
                .with_context(|| format!("reading counter {i}"))?;
            Ok(per_cpu.iter().fold(0u64, |a, v| a.wrapping_add(*v)))
        })
        .collect()
}

/// A kernel `comm` (NUL-padded, not necessarily UTF-8) as a string.
pub fn comm_string(raw: &[u8; 16]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_stops_at_nul_and_tolerates_bad_utf8() {
        let mut raw = [0u8; 16];
        raw[..4].copy_from_slice(b"bash");
        assert_eq!(comm_string(&raw), "bash");
        let full = [b'x'; 16];
        assert_eq!(comm_string(&full), "x".repeat(16));
        let mut bad = [0u8; 16];
        bad[0] = 0xff;
        assert_eq!(comm_string(&bad), "\u{fffd}");
    }
}
