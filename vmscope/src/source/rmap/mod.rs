//! The rmap probes: attaching the stack sampler or direct timing, and the
//! kernel-facing parts of each method. The figures they produce are in
//! [`crate::model::rmap`], re-exported here.

pub mod direct;
pub mod doctor;
pub mod kallsyms;
pub mod sampler;

pub use self::sampler::{PROBE, Sampler, size_maps};
use crate::model::probes::ProbeStatus;
use crate::model::rmap::*;

/// Whichever method is attached.
pub enum Rmap {
    Sampling(Box<Sampler>),
    Direct(Box<direct::DirectTimer>),
}

impl Rmap {
    pub fn read(&mut self) -> anyhow::Result<RmapSample> {
        match self {
            Rmap::Sampling(s) => s.read(),
            Rmap::Direct(d) => d.read(),
        }
    }

    /// Forgets processes that have ended (direct timing keeps nothing per
    /// process).
    pub fn forget(&mut self, pids: &[u32]) {
        if let Rmap::Sampling(s) = self {
            s.forget(pids);
        }
    }
}

pub fn online_cpus() -> u32 {
    aya::util::online_cpus()
        .map(|c| u32::try_from(c.len()).unwrap_or(u32::MAX))
        .unwrap_or(0)
}

/// Attaches the rmap probes: decides the method (direct timing where the
/// kernel permits fentry, else stack sampling at `hz`) and says which and
/// why in the status. `hz == 0` attaches neither.
pub fn attach(ebpf: &mut aya::Ebpf, hz: u32, disabled: &[String]) -> (Option<Rmap>, ProbeStatus) {
    if hz == 0 {
        let (_, status) = sampler::attach(ebpf, 0, disabled, "");
        return (None, status);
    }
    let (method, note, plan) = choose_method(ebpf, disabled);
    if let (Method::DirectTiming, Some((btf, plan))) = (method, plan) {
        match direct::attach_direct(ebpf, btf, &plan) {
            Ok(d) => {
                let status = ProbeStatus {
                    probe: DIRECT_PROBE.into(),
                    method: "fentry".into(),
                    attached: true,
                    reason: Some(format!("rmap method: {note}")),
                    deferred: false,
                };
                return (Some(Rmap::Direct(Box::new(d))), status);
            }
            Err(e) => {
                let note = format!("direct timing failed ({e}); falling back to stack sampling");
                let (s, status) = sampler::attach(ebpf, hz, disabled, &note);
                return (s.map(|s| Rmap::Sampling(Box::new(s))), status);
            }
        }
    }
    let (s, status) = sampler::attach(ebpf, hz, disabled, &note);
    (s.map(|s| Rmap::Sampling(Box::new(s))), status)
}

/// The method and why, in one line, with the plan when direct timing is
/// possible.
fn choose_method(
    ebpf: &mut aya::Ebpf,
    disabled: &[String],
) -> (Method, String, Option<(&'static aya::Btf, direct::Plan)>) {
    if disabled.iter().any(|d| d == DIRECT_PROBE) {
        return (
            Method::StackSampling,
            format!(
                "direct timing disabled by {}; stack sampling",
                crate::source::loader::DISABLE_ENV
            ),
            None,
        );
    }
    let btf = match crate::source::kernel::btf::aya_vmlinux() {
        Ok(b) => b,
        Err(e) => {
            return (
                Method::StackSampling,
                format!("direct timing unavailable: no {e}; falling back to stack sampling"),
                None,
            );
        }
    };
    // Whether fentry attaches at all, tried on a function every kernel
    // has, before reading kallsyms (0.1-0.2 s) to plan which rmap
    // functions to time.
    match direct::can_attach(ebpf, btf, crate::source::kernel::PROBE_FUNCTION) {
        Err(why) => {
            return (
                Method::StackSampling,
                format!("direct timing unavailable: {why}; falling back to stack sampling"),
                None,
            );
        }
        Ok(kind) if kind != "fentry" => {
            return (
                Method::StackSampling,
                format!(
                    "{kind} works but only fentry/fexit timing is built; falling back to stack \
                     sampling"
                ),
                None,
            );
        }
        Ok(_) => {}
    }
    let symbols = match kallsyms::Symbols::shared() {
        Ok(s) => s,
        Err(e) => {
            return (
                Method::StackSampling,
                format!("direct timing unavailable: {e}"),
                None,
            );
        }
    };
    let plan = direct::plan_here(btf, &symbols);
    // fentry attached above; its probe program is loaded now and cannot be
    // loaded for another function, so the verdict stands for the plan.
    let (method, why) = direct::choose(Ok("fentry"), &plan);
    (method, why, Some((btf, plan)))
}

/// Which method and why, in one line (for `doctor`).
pub(crate) fn method_note(ebpf: &mut aya::Ebpf) -> (Method, String) {
    let (m, why, _) = choose_method(ebpf, &[]);
    (m, why)
}
