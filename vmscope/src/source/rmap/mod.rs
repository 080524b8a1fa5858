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

/// The attached methods: direct timing where the kernel permits fentry,
/// with the stack sampler beside it as a cross-check; else the sampler.
pub struct Rmap {
    sampler: Option<Box<Sampler>>,
    direct: Option<Box<direct::DirectTimer>>,
}

impl Rmap {
    /// One reading: the sampler's counts and the direct timer's functions
    /// in one sample, its method the primary one's.
    pub fn read(&mut self) -> anyhow::Result<RmapSample> {
        let sampled = self.sampler.as_mut().map(|s| s.read()).transpose()?;
        let Some(d) = &self.direct else {
            return sampled.ok_or_else(|| anyhow::anyhow!("no rmap method attached"));
        };
        let timed = d.read()?;
        Ok(match sampled {
            Some(s) => RmapSample {
                method: Method::DirectTiming,
                functions: timed.functions,
                outer_walk_ns: timed.outer_walk_ns,
                outer_maintenance_ns: timed.outer_maintenance_ns,
                calibration: timed.calibration,
                ..s
            },
            None => timed,
        })
    }

    /// Forgets processes that have ended (direct timing keeps nothing per
    /// process).
    pub fn forget(&mut self, pids: &[u32]) {
        if let Some(s) = self.sampler.as_mut() {
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
/// kernel permits fentry, with the stack sampler at `hz` beside it; else
/// the sampler alone) and says which and why in the statuses. `hz == 0`
/// attaches neither. `maintenance` also times the maintenance functions.
pub fn attach(
    ebpf: &mut aya::Ebpf,
    hz: u32,
    maintenance: bool,
    disabled: &[String],
) -> (Option<Rmap>, Vec<ProbeStatus>) {
    if hz == 0 {
        let (_, status) = sampler::attach(ebpf, 0, disabled, "");
        return (None, vec![status]);
    }
    let (method, note, plan) = choose_method(ebpf, disabled, maintenance);
    if let (Method::DirectTiming, Some((btf, plan))) = (method, plan) {
        match direct::attach_direct(ebpf, &btf, &plan) {
            Ok(d) => {
                let calibrated = match d.calibration() {
                    Some(c) => format!(
                        "; timing one call adds {:.0} ns inside its span and costs {:.0} ns in \
                         all (calibrated on {})",
                        c.inside_ns, c.call_ns, c.function
                    ),
                    None => "; the calibration failed, so walk times are as measured".into(),
                };
                let status = ProbeStatus {
                    probe: DIRECT_PROBE.into(),
                    method: "fentry".into(),
                    attached: true,
                    reason: Some(format!("rmap method: {note}{calibrated}")),
                    deferred: false,
                };
                let (s, beside) = sampler::attach(
                    ebpf,
                    hz,
                    disabled,
                    "a cross-check beside direct timing, which is primary",
                );
                let mut sampler = s.map(Box::new);
                if let Some(s) = sampler.as_mut() {
                    s.reload_symbols();
                }
                let rmap = Rmap {
                    sampler,
                    direct: Some(Box::new(d)),
                };
                return (Some(rmap), vec![status, beside]);
            }
            Err(e) => {
                let note = format!("direct timing failed ({e}); falling back to stack sampling");
                let (s, status) = sampler::attach(ebpf, hz, disabled, &note);
                return (sampled_only(s), vec![status]);
            }
        }
    }
    let (s, status) = sampler::attach(ebpf, hz, disabled, &note);
    (sampled_only(s), vec![status])
}

fn sampled_only(s: Option<Sampler>) -> Option<Rmap> {
    s.map(|s| Rmap {
        sampler: Some(Box::new(s)),
        direct: None,
    })
}

/// The method and why, in one line, with the plan when direct timing is
/// possible.
fn choose_method(
    ebpf: &mut aya::Ebpf,
    disabled: &[String],
    maintenance: bool,
) -> (
    Method,
    String,
    Option<(std::sync::Arc<aya::Btf>, direct::Plan)>,
) {
    if disabled.iter().any(|d| d == DIRECT_PROBE) {
        return (
            Method::StackSampling,
            format!(
                "direct timing disabled by {}; stack sampling",
                crate::source::ebpf::DISABLE_ENV
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
    match direct::can_attach(ebpf, &btf, crate::source::kernel::PROBE_FUNCTION) {
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
    let plan = direct::plan_here(&btf, &symbols, maintenance);
    // fentry attached above; its probe program is loaded now and cannot be
    // loaded for another function, so the verdict stands for the plan.
    let (method, why) = direct::choose(Ok("fentry"), &plan);
    (method, why, Some((btf, plan)))
}

/// Which method and why, in one line (for `doctor`).
pub(crate) fn method_note(ebpf: &mut aya::Ebpf) -> (Method, String) {
    let (m, why, _) = choose_method(ebpf, &[], false);
    (m, why)
}
