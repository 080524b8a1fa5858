//! What the loader says about each probe, as every view reads it. Pure
//! types.

use serde::{Deserialize, Serialize};

/// What happened to one probe.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ProbeStatus {
    /// The hook, e.g. `exceptions:page_fault_user`, or `perf:page-faults`.
    pub probe: String,
    /// How it is attached: `tracepoint`, `perf_event`.
    pub method: String,
    pub attached: bool,
    /// Why it is not attached, or which fallback replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Not attached because nothing it counts could happen yet (the swap
    /// probe while no swap device is active): its figures are true zeros,
    /// not unavailable. It attaches as soon as that changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

impl ProbeStatus {
    /// Whether the probe's figures can be trusted (attached, or deferred
    /// while they are zero by construction).
    pub fn usable(&self) -> bool {
        self.attached || self.deferred
    }

    /// A classic tracepoint, attached or missing from the kernel (unit
    /// tests' probe lists).
    #[cfg(test)]
    pub fn tracepoint(name: &str, attached: bool) -> ProbeStatus {
        ProbeStatus {
            probe: name.into(),
            method: "tracepoint".into(),
            attached,
            reason: (!attached).then(|| "tracepoint not found in this kernel".into()),
            deferred: false,
        }
    }
}

/// Whether `probe` is usable in `probes` ("always" names figures that need
/// no probe). One answer for the recorder, totals, the exporter and top.
pub fn probe_usable(probes: &[ProbeStatus], probe: &str) -> bool {
    probe == crate::model::catalogue::probe::ALWAYS
        || probes.iter().any(|p| p.probe == probe && p.usable())
}

/// Where page-fault counts come from on this kernel.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FaultSource {
    /// `exceptions:page_fault_*`: counts with error-code classes.
    Tracepoint,
    /// The perf software page-faults event: counts only.
    PerfSoftware,
    /// Nothing could be attached.
    Unavailable,
}
