//! What `vmscope doctor` says about the rmap figures: which method is
//! active and why, what direct timing would attach to and miss, and
//! whether stack sampling works (found by attaching it for real).

use serde::Serialize;

use super::{Method, direct, kallsyms::Symbols, sampler};
use crate::source::ebpf;

#[derive(Debug, Serialize)]
pub struct MissedFunction {
    pub function: &'static str,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub struct RmapReport {
    /// The method `record` and `top` will use; null when neither works.
    pub method: Option<Method>,
    /// Why, in one line.
    pub reason: String,
    /// Direct timing: the functions this kernel offers, and those missed.
    pub direct_attach: Vec<&'static str>,
    pub direct_missed: Vec<MissedFunction>,
    /// Stack sampling: null when it works, else why not.
    pub sampling_error: Option<String>,
}

pub fn report() -> RmapReport {
    let mut ebpf = match ebpf::object().and_then(|o| Ok(aya::Ebpf::load(o)?)) {
        Ok(e) => e,
        Err(e) => {
            return RmapReport {
                method: None,
                reason: format!("loading the eBPF object: {e:#}"),
                direct_attach: Vec::new(),
                direct_missed: Vec::new(),
                sampling_error: Some(format!("loading the eBPF object: {e:#}")),
            };
        }
    };
    let plan = match (crate::source::kernel::btf::aya_vmlinux(), Symbols::shared()) {
        (Ok(btf), Ok(syms)) => Some((direct::plan_here(&btf, &syms, false), btf)),
        _ => None,
    };
    let (chosen, why) = super::method_note(&mut ebpf);
    let (_, status) = sampler::attach(&mut ebpf, crate::model::rmap::DEFAULT_HZ, &[], &why);
    let (method, reason) = match chosen {
        Method::DirectTiming => (Some(Method::DirectTiming), why),
        Method::StackSampling if status.attached => (Some(Method::StackSampling), why),
        Method::StackSampling => (None, status.reason.clone().unwrap_or_default()),
    };
    let (direct_attach, direct_missed) = match plan {
        Some((p, _)) => (
            p.attach.iter().map(|(f, _)| *f).collect(),
            p.missed
                .into_iter()
                .map(|m| MissedFunction {
                    function: m.function,
                    reason: m.reason,
                })
                .collect(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    RmapReport {
        method,
        reason,
        direct_attach,
        direct_missed,
        sampling_error: (!status.attached).then(|| status.reason.unwrap_or_default()),
    }
}

/// The doctor's text lines.
pub fn render(r: &RmapReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let m = match r.method {
        Some(Method::StackSampling) => "stack sampling",
        Some(Method::DirectTiming) => "direct timing",
        None => "unavailable",
    };
    // The reason usually names the method already.
    let reason = r
        .reason
        .strip_prefix(&format!("{m}: "))
        .unwrap_or(&r.reason);
    let _ = writeln!(s, "rmap method: {m}: {reason}");
    if r.method == Some(Method::DirectTiming) {
        let _ = writeln!(
            s,
            "  primary: direct timing (exact calls and latencies, its own cost measured at \
             start-up and taken out); stack sampling runs beside it, and record says in words \
             when the two disagree by more than max(5 points, 25%)"
        );
    }
    let _ = writeln!(
        s,
        "  direct timing would attach to {} functions (walk entries; --rmap-maintenance adds \
         the maintenance functions){}",
        r.direct_attach.len(),
        if r.direct_missed.is_empty() {
            String::new()
        } else {
            ", not attachable:".into()
        }
    );
    for f in &r.direct_missed {
        let _ = writeln!(s, "    {}: {}", f.function, f.reason);
    }
    if let Some(e) = &r.sampling_error {
        let _ = writeln!(s, "  stack sampling: {e}");
    }
    s
}
