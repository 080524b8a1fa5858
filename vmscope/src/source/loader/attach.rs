//! Attaching the planned programs: the tracepoints (BTF variant or
//! classic), the page-fault hooks and their perf-event fallback, the raw
//! syscall hooks, swap, accounting, major faults and fault timing.

use anyhow::anyhow;
use aya::{
    Ebpf,
    programs::{
        BtfTracePoint, FEntry, FExit, TracePoint,
        perf_event::{SamplePolicy, SoftwareEvent},
    },
};

use crate::model::probes::{FaultSource, ProbeStatus};
use crate::source::ebpf::attach_perf_sw;
use crate::source::kernel::errors::one_line;
use crate::source::kernel::tracefs;

use super::btf::{BtfVariants, TaskOffsets, attach_btf, load_btf};
use super::specs::{FaultPlans, HookPlan, Spec};
use super::{
    ACCOUNT_PROBE, DISABLE_ENV, FAULT_TIMING_PROBE, MAJOR_FAULTS_PROBE, SWAP_PROBE, SwapAttach,
    swap_active, swap_prog,
};

/// Attaches one planned tracepoint program.
pub(super) fn attach_planned(
    ebpf: &mut Ebpf,
    category: &str,
    prog: &str,
    plan: HookPlan,
) -> ProbeStatus {
    let result = plan
        .classic
        .and(plan.event)
        .and_then(|(name, _)| attach_tracepoint(ebpf, prog, category, name).map(|()| name));
    let (attached, reason) = match result {
        Ok(name) if format!("{category}:{name}") != plan.probe => (
            true,
            Some(format!("attached as {category}:{name} (older kernel name)")),
        ),
        Ok(_) => (true, None),
        Err(e) => (false, Some(e)),
    };
    ProbeStatus {
        probe: plan.probe,
        method: "tracepoint".into(),
        attached,
        reason,
        deferred: false,
    }
}

/// Attaches one planned hook: as a BTF tracepoint where it has such a
/// variant and the kernel allows it, else as the classic tracepoint with
/// the reason.
pub(super) fn attach_spec(
    ebpf: &mut Ebpf,
    s: &Spec,
    plan: HookPlan,
    btf_ok: &Result<(), String>,
) -> ProbeStatus {
    if s.optional.is_some() {
        return attach_classic_first(ebpf, s, plan, btf_ok);
    }
    if let (Some(why), Some(prog)) = (s.btf_only, s.btf_prog) {
        return attach_btf_only(ebpf, prog, plan, btf_ok, why);
    }
    let (Some(prog), Ok((event, _))) = (s.btf_prog, &plan.event) else {
        let mut status = attach_planned(ebpf, s.category, s.prog, plan);
        if status.attached && status.reason.is_none() {
            status.reason = s.classic_why.map(String::from);
        }
        return status;
    };
    let why_classic = match btf_ok {
        Ok(()) => match attach_btf(ebpf, prog, event) {
            Ok(()) => {
                let reason = (format!("{}:{event}", s.category) != plan.probe)
                    .then(|| format!("attached as {}:{event} (older kernel name)", s.category));
                return ProbeStatus {
                    probe: plan.probe,
                    method: "tp_btf".into(),
                    attached: true,
                    reason,
                    deferred: false,
                };
            }
            Err(e) => e,
        },
        Err(e) => e.clone(),
    };
    let mut status = attach_planned(ebpf, s.category, s.prog, plan);
    if status.attached && status.reason.is_none() {
        status.reason = Some(format!("classic tracepoint, not tp_btf: {why_classic}"));
    }
    status
}

/// Attaches a hook that has only a BTF tracepoint program, or says why it
/// could not, and why there is no classic one to stand in.
fn attach_btf_only(
    ebpf: &mut Ebpf,
    prog: &str,
    plan: HookPlan,
    btf_ok: &Result<(), String>,
    why: &str,
) -> ProbeStatus {
    let attached = plan
        .event
        .and_then(|(event, _)| btf_ok.clone().and_then(|()| attach_btf(ebpf, prog, event)));
    ProbeStatus {
        probe: plan.probe,
        method: "tp_btf".into(),
        attached: attached.is_ok(),
        reason: attached
            .err()
            .map(|e| format!("{e} (no classic tracepoint stands in: {why})")),
        deferred: false,
    }
}

/// Attaches a hook whose classic program reports more than its BTF one
/// (the record's fields): as the classic tracepoint where it can be, else
/// as the BTF one, which only counts, with the reason the rest is missing.
pub(super) fn attach_classic_first(
    ebpf: &mut Ebpf,
    s: &Spec,
    plan: HookPlan,
    btf_ok: &Result<(), String>,
) -> ProbeStatus {
    let (Some(prog), Ok((event, _))) = (s.btf_prog, &plan.event) else {
        let mut status = attach_planned(ebpf, s.category, s.prog, plan);
        if status.attached && status.reason.is_none() {
            status.reason = s.classic_why.map(String::from);
        }
        return status;
    };
    let (event, probe) = (*event, plan.probe.clone());
    let why = match &plan.classic {
        Ok(()) => {
            let mut status = attach_planned(ebpf, s.category, s.prog, plan.clone());
            if status.attached {
                status.reason.get_or_insert_with(|| {
                    "classic tracepoint by design, not tp_btf: only its record carries each \
                     event's details (the BTF program counts only)"
                        .into()
                });
                return status;
            }
            status.reason.unwrap_or_default()
        }
        Err(e) => e.clone(),
    };
    let btf = btf_ok.clone().and_then(|()| attach_btf(ebpf, prog, event));
    let (attached, reason) = match btf {
        Ok(()) => (
            true,
            format!(
                "counts only: the details of each event come from the classic \
                 tracepoint's record, which is unavailable: {why}"
            ),
        ),
        Err(e) => (false, format!("{why}; as tp_btf: {e}")),
    };
    ProbeStatus {
        probe,
        method: if attached { "tp_btf" } else { "tracepoint" }.into(),
        attached,
        reason: Some(reason),
        deferred: false,
    }
}

/// Attaches the page-fault hooks: as BTF tracepoints where allowed, else
/// as classic ones, else as the perf software event (counts without the
/// error-code classes). Returns which one counts faults.
pub(super) fn attach_faults(
    ebpf: &mut Ebpf,
    disabled: &[String],
    faults: FaultPlans,
    probes: &mut Vec<ProbeStatus>,
) -> FaultSource {
    let btf_faults = if disabled.iter().any(|d| d == "tp_btf") {
        Err(format!("tp_btf disabled by {DISABLE_ENV}"))
    } else if faults.user.event.is_err() {
        Err("page_fault_user is unavailable".to_string())
    } else {
        attach_btf_faults(ebpf)
    };
    let user_ok = match btf_faults {
        Ok(()) => {
            for which in ["page_fault_user", "page_fault_kernel"] {
                probes.push(ProbeStatus {
                    probe: format!("exceptions:{which}"),
                    method: "tp_btf".into(),
                    attached: true,
                    reason: None,
                    deferred: false,
                });
            }
            true
        }
        Err(why) => {
            log::debug!("page faults through classic tracepoints: {why}");
            let user = attach_planned(ebpf, "exceptions", "page_fault_user", faults.user);
            let ok = user.attached;
            probes.push(user);
            if ok {
                probes.push(attach_planned(
                    ebpf,
                    "exceptions",
                    "page_fault_kernel",
                    faults.kernel,
                ));
            }
            ok
        }
    };
    if user_ok {
        return FaultSource::Tracepoint;
    }
    let result = attach_perf_faults(ebpf);
    let ok = result.is_ok();
    probes.push(ProbeStatus {
        probe: "perf:page-faults".into(),
        method: "perf_event".into(),
        attached: ok,
        deferred: false,
        reason: Some(match result {
            Ok(()) => {
                "fallback for exceptions:page_fault_user: counts without error-code classes".into()
            }
            Err(e) => e,
        }),
    });
    if ok {
        FaultSource::PerfSoftware
    } else {
        FaultSource::Unavailable
    }
}

/// Attaches the [`SPECS`] tracepoints in their order, then the raw syscall
/// hooks standing in for the syscall events they cover. Returns the swap
/// probe's plan when it waits for a swap device.
pub(super) fn attach_tracepoints(
    ebpf: &mut Ebpf,
    plans: Vec<(&Spec, HookPlan)>,
    raw: &Result<RawSyscalls, String>,
    btf: &BtfVariants,
    swap: SwapAttach,
    probes: &mut Vec<ProbeStatus>,
) -> Option<HookPlan> {
    let mut pending_swap = None;
    let mut through_raw = Vec::new();
    for (s, p) in plans {
        if let Ok(r) = raw
            && s.category == "syscalls"
            && r.covers(s.names[0])
        {
            through_raw.push(p.probe);
            continue;
        }
        let probe = format!("{}:{}", s.category, s.names[0]);
        let defer = match swap {
            SwapAttach::Auto => !swap_active(),
            SwapAttach::Always | SwapAttach::AlwaysClassic => false,
            SwapAttach::Never => true,
        };
        if probe == SWAP_PROBE && p.event.is_ok() && defer {
            probes.push(ProbeStatus {
                probe,
                method: "tracepoint".into(),
                attached: false,
                reason: Some(
                    "deferred: no swap device is active, so nothing can be swapped; \
                     attaches when one is"
                        .into(),
                ),
                deferred: true,
            });
            pending_swap = Some(p);
            continue;
        }
        if probe == SWAP_PROBE {
            probes.push(attach_swap(ebpf, p, &btf.swap));
        } else {
            probes.push(attach_spec(ebpf, s, p, btf.for_spec(s)));
        }
    }
    if let Ok(r) = raw {
        probes.extend(attach_raw_syscalls(ebpf, r, through_raw));
    }
    pending_swap
}

/// Attaches the reader of the kernel's fault books and, when it attached,
/// the fault timing that needs it.
pub(super) fn attach_fault_books(
    ebpf: &mut Ebpf,
    task: Result<TaskOffsets, String>,
    disabled: &[String],
    probes: &mut Vec<ProbeStatus>,
) {
    let account = attach_account(ebpf, task.map(|_| ()));
    let timing = if account.attached {
        attach_fault_timing(ebpf, disabled)
    } else {
        Err(format!(
            "needs {ACCOUNT_PROBE} to follow faults that sleep: {}",
            account.reason.as_deref().unwrap_or("not attached")
        ))
    };
    probes.push(account);
    probes.push(ProbeStatus {
        probe: FAULT_TIMING_PROBE.into(),
        method: "fentry".into(),
        attached: timing.is_ok(),
        reason: timing.err(),
        deferred: false,
    });
}

pub(super) fn take(ebpf: &mut Ebpf, name: &str) -> anyhow::Result<aya::maps::Map> {
    ebpf.take_map(name)
        .ok_or_else(|| anyhow!("map {name} missing from the eBPF object"))
}

pub(super) fn attach_tracepoint(
    ebpf: &mut Ebpf,
    prog: &str,
    category: &str,
    name: &str,
) -> Result<(), String> {
    let p: &mut TracePoint = crate::source::ebpf::program(ebpf, prog)?;
    p.load()
        .map_err(|e| format!("loading {prog}: {}", one_line(&e)))?;
    p.attach(category, name)
        .map(|_| ())
        .map_err(|e| format!("attaching {category}:{name}: {}", one_line(&e)))
}

/// Attaches both page-fault programs as BTF-typed raw tracepoints, or
/// neither.
pub(super) fn attach_btf_faults(ebpf: &mut Ebpf) -> Result<(), String> {
    let mut links = Vec::new();
    for (prog, event) in [
        ("page_fault_user_btf", "page_fault_user"),
        ("page_fault_kernel_btf", "page_fault_kernel"),
    ] {
        let p = load_btf(ebpf, prog, event)?;
        match p.attach() {
            Ok(link) => links.push((prog, link)),
            Err(e) => {
                // Not half attached: undo the first if the second fails.
                for (prog, link) in links {
                    if let Some(Ok(p)) = ebpf.program_mut(prog).map(<&mut BtfTracePoint>::try_from)
                    {
                        let _ = p.detach(link);
                    }
                }
                return Err(format!("attaching {prog}: {}", one_line(&e)));
            }
        }
    }
    Ok(())
}

/// Attaches the swap probe: as a BTF tracepoint where the kernel allows
/// (no trace record, so the kernel does not sum the mm's RSS counter on
/// every RSS change), else as the classic tracepoint, saying why.
pub(super) fn attach_swap(
    ebpf: &mut Ebpf,
    plan: HookPlan,
    btf_ok: &Result<(), String>,
) -> ProbeStatus {
    if plan.event.is_err() {
        // Absent or disabled: the plan says why, whatever the method.
        return attach_planned(ebpf, "kmem", "rss_stat", plan);
    }
    let why_classic = match btf_ok {
        Ok(()) => match attach_btf(ebpf, "rss_stat_btf", "rss_stat") {
            Ok(()) => {
                return ProbeStatus {
                    probe: plan.probe,
                    method: "tp_btf".into(),
                    attached: true,
                    reason: None,
                    deferred: false,
                };
            }
            Err(e) => e,
        },
        Err(e) => e.clone(),
    };
    let prog = swap_prog(&plan);
    let mut status = attach_planned(ebpf, "kmem", prog, plan);
    if status.attached {
        status.reason = Some(format!(
            "classic tracepoint (the kernel sums the mm's counter on every RSS change), \
             not tp_btf: {why_classic}"
        ));
    }
    status
}

/// The syscalls to follow through the raw `sys_enter`/`sys_exit` BTF
/// tracepoints because their own events cannot be used.
pub(super) struct RawSyscalls {
    /// `raw_syscall` bits.
    pub(super) mask: u32,
    /// Why the syscall events cannot be used.
    pub(super) why: String,
}

impl RawSyscalls {
    pub(super) fn covers(&self, event: &str) -> bool {
        let call = event
            .strip_prefix("sys_enter_")
            .or_else(|| event.strip_prefix("sys_exit_"));
        call.and_then(vmscope_common::raw_syscall::of)
            .is_some_and(|bit| self.mask & bit != 0)
    }
}

/// Whether the raw syscall hooks stand in for the syscall events: only
/// when tracefs (which the events need) is unusable, on x86-64, with BTF
/// tracepoints allowed; for each call not disabled by name.
pub(super) fn raw_syscalls(
    plans: &[(&Spec, HookPlan)],
    disabled: &[String],
    btf_ok: &Result<(), String>,
) -> Result<RawSyscalls, String> {
    let why = match tracefs::tracefs() {
        Ok(_) => return Err("the syscall events are usable".into()),
        Err(why) => why,
    };
    if !cfg!(target_arch = "x86_64") {
        return Err(format!(
            "{why}; the raw syscall hooks stand in only on x86-64"
        ));
    }
    btf_ok.clone().map_err(|e| format!("{why}; {e}"))?;
    let btf = crate::source::kernel::btf::Btf::vmlinux()?;
    if !(btf.has_tracepoint("sys_enter") && btf.has_tracepoint("sys_exit")) {
        return Err(format!("{why}; and no raw syscall tracepoints here"));
    }
    let mut mask = 0;
    for (s, p) in plans.iter().filter(|(s, _)| s.category == "syscalls") {
        let name = s.names[0];
        // Off unless asked for (`--syscall-latency`): not followed raw either.
        if p.opted_out || disabled.contains(&format!("syscalls:{name}")) {
            continue;
        }
        let call = name
            .strip_prefix("sys_enter_")
            .or_else(|| name.strip_prefix("sys_exit_"));
        mask |= call.and_then(vmscope_common::raw_syscall::of).unwrap_or(0);
    }
    Ok(RawSyscalls { mask, why })
}

/// Attaches the raw syscall hooks, both or neither; `probes` (the syscall
/// events they stand in for) are attached or not with them.
pub(super) fn attach_raw_syscalls(
    ebpf: &mut Ebpf,
    raw: &RawSyscalls,
    probes: Vec<String>,
) -> Vec<ProbeStatus> {
    let result = (|| {
        let enter = load_btf(ebpf, "sys_enter_raw_btf", "sys_enter")?;
        let link = enter
            .attach()
            .map_err(|e| format!("attaching sys_enter_raw_btf: {}", one_line(&e)))?;
        let exit = attach_btf(ebpf, "sys_exit_raw_btf", "sys_exit");
        if exit.is_err()
            && let Some(Ok(p)) = ebpf
                .program_mut("sys_enter_raw_btf")
                .map(<&mut BtfTracePoint>::try_from)
        {
            let _ = p.detach(link);
        }
        exit
    })();
    probes
        .into_iter()
        .map(|probe| ProbeStatus {
            probe,
            method: "tp_btf".into(),
            attached: result.is_ok(),
            reason: Some(match &result {
                Ok(()) => format!(
                    "through the raw sys_enter/sys_exit tracepoints, which run on every \
                     syscall: the syscall events need tracefs ({})",
                    raw.why
                ),
                Err(e) => format!("{}; the raw syscall tracepoints failed too: {e}", raw.why),
            }),
            deferred: false,
        })
        .collect()
}

/// Times `handle_mm_fault` with fentry/fexit, both or neither, and gives
/// the program `vm_area_struct.vm_file`'s offset.
pub(super) fn attach_fault_timing(ebpf: &mut Ebpf, disabled: &[String]) -> Result<(), String> {
    if disabled.iter().any(|d| d == FAULT_TIMING_PROBE) {
        return Err(format!("disabled by {DISABLE_ENV}"));
    }
    let btf = crate::source::kernel::btf::aya_vmlinux()?;
    let entry: &mut FEntry = ebpf
        .program_mut("fault_enter")
        .ok_or("program fault_enter missing from the eBPF object")?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
    entry
        .load("handle_mm_fault", &btf)
        .map_err(|e| format!("fentry on handle_mm_fault refused: {}", one_line(&e)))?;
    let link = entry
        .attach()
        .map_err(|e| format!("fentry on handle_mm_fault refused: {}", one_line(&e)))?;
    let exit = (|| {
        let p: &mut FExit = ebpf
            .program_mut("fault_exit")
            .ok_or("program fault_exit missing from the eBPF object")?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
        p.load("handle_mm_fault", &btf)
            .map_err(|e| format!("fexit on handle_mm_fault refused: {}", one_line(&e)))?;
        p.attach()
            .map(drop)
            .map_err(|e| format!("fexit on handle_mm_fault refused: {}", one_line(&e)))
    })();
    if exit.is_err()
        && let Some(Ok(p)) = ebpf.program_mut("fault_enter").map(<&mut FEntry>::try_from)
    {
        let _ = p.detach(link);
    }
    exit
}

/// Attaches the context-switch reader of the kernel's fault books as a BTF
/// tracepoint (no classic fallback: it needs the task pointers).
pub(super) fn attach_account(ebpf: &mut Ebpf, offsets: Result<(), String>) -> ProbeStatus {
    let result = offsets.and_then(|()| {
        let btf = crate::source::kernel::btf::aya_vmlinux()?;
        let prog = "sched_switch_btf";
        let p: &mut BtfTracePoint = ebpf
            .program_mut(prog)
            .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
        p.load("sched_switch", &btf)
            .map_err(|e| format!("loading {prog}: {}", one_line(&e)))?;
        p.attach()
            .map(drop)
            .map_err(|e| format!("attaching {prog}: {}", one_line(&e)))
    });
    ProbeStatus {
        probe: ACCOUNT_PROBE.into(),
        method: "tp_btf".into(),
        attached: result.is_ok(),
        reason: result.err(),
        deferred: false,
    }
}

pub(super) fn attach_major_faults(ebpf: &mut Ebpf, disabled: &[String]) -> ProbeStatus {
    let result = if disabled.iter().any(|d| d == MAJOR_FAULTS_PROBE) {
        Err(format!("disabled by {DISABLE_ENV}"))
    } else {
        attach_perf_sw(
            ebpf,
            "major_fault_perf",
            SoftwareEvent::PageFaultsMaj,
            SamplePolicy::Period(1),
        )
        .map(drop)
    };
    ProbeStatus {
        probe: MAJOR_FAULTS_PROBE.into(),
        method: "perf_event".into(),
        attached: result.is_ok(),
        reason: result.err(),
        deferred: false,
    }
}

pub(super) fn attach_perf_faults(ebpf: &mut Ebpf) -> Result<(), String> {
    attach_perf_sw(
        ebpf,
        "page_fault_perf",
        SoftwareEvent::PageFaults,
        SamplePolicy::Period(1),
    )
    .map(drop)
}
