//! Pure summaries of a recording's samples beyond page faults: named eBPF
//! counters, madvise per behaviour, latency histograms, vmstat and PSI.
//! A metric whose probe did not attach is listed as unavailable with the
//! reason, never reported as 0.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    model::{
        catalogue::{self, counter_probe},
        delta,
        hist::{self, Summary},
        probes::ProbeStatus,
        sample::Sample,
        snapshot::Snapshot,
    },
    procstat::{self, PsiSummary, VmstatDelta},
};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MadviseTotal {
    pub calls: u64,
    pub bytes: u64,
    pub errors: u64,
    pub latency: Summary,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VmTotals {
    /// Named eBPF counters over the recording; null when the counter went
    /// backwards.
    pub counters: BTreeMap<String, Option<u64>>,
    /// madvise per behaviour (followed processes only when scoped).
    pub madvise: BTreeMap<String, MadviseTotal>,
    /// Latency histograms by name.
    pub histograms: BTreeMap<String, Summary>,
    pub vmstat: VmstatDelta,
    pub psi: Option<PsiSummary>,
    /// Metric (or group) -> why it is unavailable on this kernel.
    pub unavailable: BTreeMap<String, String>,
    /// rmap walk and maintenance CPU (null when unavailable: see
    /// `unavailable.rmap`).
    #[serde(default)]
    pub rmap: Option<crate::model::rmap::RmapTotals>,
    /// Where memory stall time went: the timed causes next to PSI, and the
    /// share of PSI `some` they explain (see `docs/counting.md`).
    #[serde(default)]
    pub stall: Option<crate::model::stall::StallAccount>,
}

/// Why `probe` cannot be counted (not attached, with its reason), or
/// `None` when it can.
pub(crate) fn missing_probe(probes: &[ProbeStatus], probe: &str) -> Option<String> {
    if probe == crate::model::catalogue::probe::ALWAYS {
        return None;
    }
    match probes.iter().find(|p| p.probe == probe) {
        Some(p) if p.usable() => None,
        Some(p) => Some(format!(
            "{probe} not attached: {}",
            p.reason.as_deref().unwrap_or("unknown")
        )),
        None => Some(format!("{probe} not attached")),
    }
}

pub fn vm_totals(samples: &[Sample], probes: &[ProbeStatus], psi_error: Option<&str>) -> VmTotals {
    let mut t = VmTotals::default();
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return t;
    };
    for (name, &now) in &last.counters {
        if let Some(why) = missing_probe(probes, counter_probe(name)) {
            t.unavailable.insert(name.clone(), why);
            continue;
        }
        let then = first.counters.get(name).copied().unwrap_or(0);
        t.counters.insert(name.clone(), delta(then, now));
    }
    if let Some(why) = missing_probe(probes, crate::model::catalogue::probe::ACCOUNT) {
        t.unavailable.insert("gup_faults".into(), why);
    }
    // Histograms: each one's state at the first and the last sample.
    let at_first = Snapshot::replay([first]).hists;
    let at_last = Snapshot::replay(samples).hists;
    for id in 0..vmscope_common::hist::COUNT {
        let name = catalogue::hist_name(id);
        if let Some(why) = missing_probe(probes, catalogue::hist_probe(id)) {
            if !name.starts_with("madvise_") {
                t.unavailable.insert(format!("histogram {name}"), why);
            }
            continue;
        }
        let Some(l) = at_last.get(&name) else {
            continue;
        };
        if let Some(s) = hist::summarize(at_first.get(&name), l) {
            t.histograms.insert(name, s);
        }
    }
    if let Some(why) = missing_probe(probes, crate::model::catalogue::probe::MADVISE) {
        t.unavailable.insert("madvise".into(), why);
    } else {
        for m in &last.madvise {
            let f = first.madvise.iter().find(|x| x.behavior == m.behavior);
            let d = |a: u64, b: u64| b.saturating_sub(a);
            let calls = d(f.map_or(0, |x| x.calls), m.calls);
            if calls == 0 {
                continue;
            }
            t.madvise.insert(
                m.behavior.clone(),
                MadviseTotal {
                    calls,
                    bytes: d(f.map_or(0, |x| x.bytes), m.bytes),
                    errors: d(f.map_or(0, |x| x.errors), m.errors),
                    latency: t
                        .histograms
                        .get(&format!("madvise_{}", m.behavior))
                        .cloned()
                        .unwrap_or_default(),
                },
            );
        }
    }
    match crate::model::rmap::totals(&samples.iter().map(Into::into).collect::<Vec<_>>(), probes) {
        Ok(r) => t.rmap = Some(r),
        Err(why) => {
            t.unavailable.insert("rmap".into(), why);
        }
    }
    t.vmstat = procstat::vmstat_delta(&first.vmstat, &last.vmstat);
    match (&first.psi, &last.psi) {
        (Some(a), Some(b)) => t.psi = Some(procstat::psi_delta(a, b)),
        _ => {
            t.unavailable.insert(
                "psi".into(),
                psi_error
                    .unwrap_or("/proc/pressure/memory unreadable")
                    .to_string(),
            );
        }
    }
    t.stall = Some(crate::model::stall::account(
        &t.histograms,
        &t.unavailable,
        t.psi.as_ref(),
        crate::model::stall::weighted(samples),
    ));
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{hist::HistSample, sample::MadviseCounts};

    fn probe(name: &str, attached: bool) -> ProbeStatus {
        ProbeStatus::tracepoint(name, attached)
    }

    fn sample(tlb: u64, free_calls: u64, hists: Vec<HistSample>) -> Sample {
        Sample {
            counters: [("tlb_remote_send_ipi".to_string(), tlb)].into(),
            madvise: vec![MadviseCounts {
                behavior: "free".into(),
                calls: free_calls,
                bytes: free_calls * 4096,
                errors: 0,
            }],
            hists,
            ..Default::default()
        }
    }

    fn free_hist(n: u64) -> HistSample {
        HistSample {
            name: "madvise_free".into(),
            sum_ns: n * 1000,
            buckets: vec![[10, n]],
        }
    }

    #[test]
    fn deltas_per_behaviour_with_latency() {
        let probes = [
            probe("tlb:tlb_flush", true),
            probe("syscalls:sys_exit_madvise", true),
        ];
        let s = [
            sample(5, 1, vec![free_hist(1)]),
            sample(9, 4, vec![free_hist(4)]),
        ];
        let t = vm_totals(&s, &probes, None);
        assert_eq!(t.counters["tlb_remote_send_ipi"], Some(4));
        let free = &t.madvise["free"];
        assert_eq!((free.calls, free.bytes), (3, 3 * 4096));
        assert_eq!(free.latency.count, 3);
    }

    #[test]
    fn missing_probe_makes_metrics_unavailable_not_zero() {
        let probes = [
            probe("tlb:tlb_flush", false),
            probe("syscalls:sys_exit_madvise", false),
        ];
        let s = [sample(0, 0, vec![]), sample(0, 0, vec![])];
        let t = vm_totals(&s, &probes, Some("no PSI"));
        assert!(!t.counters.contains_key("tlb_remote_send_ipi"));
        assert!(t.unavailable["tlb_remote_send_ipi"].contains("tlb:tlb_flush"));
        assert!(t.unavailable.contains_key("madvise"));
        assert_eq!(t.unavailable["psi"], "no PSI");
        assert!(t.madvise.is_empty());
    }
}
