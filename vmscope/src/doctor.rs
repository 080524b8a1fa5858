//! `vmscope doctor`: what this kernel lets vmscope do. Attach kinds are found
//! by loading and attaching tiny programs, not by reading kernel config.

use std::fmt::Write as _;

use aya::{
    Btf, Ebpf,
    programs::{
        BtfTracePoint, FEntry, FExit, KProbe, PerfEvent, TracePoint,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
};
use serde::Serialize;

use crate::{
    cli::DoctorArgs,
    exit,
    model::recording::Tool,
    source::kernel::{PROBE_FUNCTION, caps::Privileges, hooks, system, tracefs},
    source::loader,
};

#[derive(Debug, Serialize)]
pub struct HookReport {
    pub hook: String,
    pub present: bool,
    /// Why presence cannot be told (tracefs unreadable, for the syscall
    /// events, which have no BTF type).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// The older name found instead, if any (e.g. mm_vmscan_writepage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_as: Option<String>,
    pub used_for: &'static str,
    /// What vmscope does when the hook is absent (null when present).
    pub fallback: Option<&'static str>,
}

#[derive(Debug, Serialize)]
pub struct AttachKind {
    pub kind: &'static str,
    pub works: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct TracefsReport {
    pub path: Option<String>,
    pub mounted_by_vmscope: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A privilege vmscope runs without, and the figures it would add.
#[derive(Debug, Serialize)]
pub struct PrivilegeGap {
    pub needs: String,
    pub would_add: String,
}

#[derive(Debug, Serialize)]
pub struct Availability {
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Findings {
    pub tool: Tool,
    pub kernel: crate::model::recording::KernelInfo,
    pub btf: bool,
    /// Lockdown mode, or null when the kernel has no lockdown LSM.
    pub lockdown: Option<String>,
    pub tracefs: TracefsReport,
    pub privileges: Privileges,
    /// What each missing privilege would add (empty when nothing is missing).
    pub privilege_gaps: Vec<PrivilegeGap>,
    pub hooks: Vec<HookReport>,
    pub attach_kinds: Vec<AttachKind>,
    /// Which method times rmap/kernel functions: fentry when it works, else
    /// stack sampling through perf_event.
    pub function_timing: &'static str,
    /// Which method gives the rmap figures, and why.
    pub rmap: crate::source::rmap::doctor::RmapReport,
    pub swap_devices: Vec<system::SwapDevice>,
    /// The swap tiers: zswap (null without it in the kernel), each device's
    /// medium and a zram device's own books.
    pub swap_tiers: crate::model::tiers::TierSample,
    pub psi_memory: Availability,
    pub memory_cgroup: system::MemoryCgroup,
    /// The working-set methods (`--working-set`): which this kernel offers
    /// and which one measures.
    pub working_set: Vec<crate::model::wss::MethodStatus>,
}

pub fn run(args: &DoctorArgs) -> anyhow::Result<u8> {
    let privileges = Privileges::current();
    privileges.require_bpf()?;
    let report = collect(privileges);
    if !report.attach_kinds.iter().any(|k| k.works) {
        let why = report
            .attach_kinds
            .iter()
            .filter_map(|k| k.error.as_deref())
            .next()
            .unwrap_or("unknown");
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        return Err(exit::failure(
            exit::NO_PRIVILEGE,
            format!("no eBPF program kind can be loaded here: {why}"),
        ));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(0)
}

pub fn collect(privileges: Privileges) -> Findings {
    let tracefs = match tracefs::tracefs() {
        Ok(t) => TracefsReport {
            path: Some(t.path.display().to_string()),
            mounted_by_vmscope: t.mounted_by_vmscope,
            error: None,
        },
        Err(e) => TracefsReport {
            path: None,
            mounted_by_vmscope: false,
            error: Some(e),
        },
    };
    let hooks = hooks::ALL
        .iter()
        .map(|h| {
            let mut unknown = None;
            let found = std::iter::once(h.name)
                .chain(h.older_names.iter().copied())
                .find(|n| match tracefs::event_found(h.category, n) {
                    Ok(found) => found,
                    Err(why) => {
                        unknown.get_or_insert(why);
                        false
                    }
                });
            let unknown = unknown.filter(|_| found.is_none());
            HookReport {
                hook: h.full_name(),
                present: found.is_some(),
                unknown,
                found_as: found
                    .filter(|n| *n != h.name)
                    .map(|n| format!("{}:{n}", h.category)),
                used_for: h.used_for,
                fallback: found.is_none().then_some(h.fallback),
            }
        })
        .collect();
    let attach_kinds = probe_attach_kinds(&tracefs);
    let fentry_works = attach_kinds.iter().any(|k| k.kind == "fentry" && k.works);
    Findings {
        tool: Tool::this(),
        kernel: system::kernel_info(),
        btf: system::btf_present(),
        lockdown: system::lockdown(),
        privilege_gaps: privilege_gaps(&privileges, &tracefs),
        tracefs,
        privileges,
        hooks,
        attach_kinds,
        function_timing: if fentry_works {
            "fentry/fexit"
        } else {
            "stack sampling (perf_event); fentry refused"
        },
        rmap: crate::source::rmap::doctor::report(),
        swap_devices: system::swap_devices(),
        swap_tiers: system::swap_tiers(),
        psi_memory: match system::psi_memory_available() {
            Ok(()) => Availability {
                available: true,
                reason: None,
            },
            Err(e) => Availability {
                available: false,
                reason: Some(e),
            },
        },
        memory_cgroup: system::memory_cgroup(),
        working_set: crate::source::wss::methods(),
    }
}

/// What running with more privilege would add, from what is missing now.
fn privilege_gaps(p: &Privileges, tracefs: &TracefsReport) -> Vec<PrivilegeGap> {
    let mut gaps = Vec::new();
    if let Some(why) = &tracefs.error {
        let needs = if why.contains("cannot read") {
            "read access to tracefs (root, or tracefs mounted with gid= of a group \
             this user is in and mode=0750)"
        } else {
            "a tracefs mount (mount -t tracefs nodev /sys/kernel/tracing), or \
             CAP_SYS_ADMIN for vmscope to mount it"
        };
        let (classic, raw) = loader::classic_only();
        let mut adds = Vec::new();
        if !classic.is_empty() {
            adds.push(format!(
                "the classic tracepoints {}",
                crate::model::probes::group_syscalls(&classic)
            ));
        }
        if raw {
            adds.push(
                "the syscall events in place of the raw sys_enter/sys_exit hooks that \
                 stand in for them (those run on every syscall)"
                    .to_string(),
            );
        }
        if !adds.is_empty() {
            gaps.push(PrivilegeGap {
                needs: needs.into(),
                would_add: adds.join("; "),
            });
        }
    }
    if crate::source::rmap::kallsyms::visible().is_err() && !p.cap_syslog {
        gaps.push(PrivilegeGap {
            needs: "CAP_SYSLOG".into(),
            would_add: "kernel addresses in /proc/kallsyms: the rmap figures from stack samples"
                .into(),
        });
    }
    if let Err(why) = crate::source::kernel::kmsg::KernelLog::open() {
        gaps.push(PrivilegeGap {
            needs: if why.contains("CAP_SYSLOG") {
                "CAP_SYSLOG (kernel.dmesg_restrict is 1)".into()
            } else {
                why
            },
            would_add: "the kernel log's OOM summaries: the memcg each OOM kill answered, \
                        exactly (without them, from the cgroups' limit-hit counters)"
                .into(),
        });
    }
    gaps
}

fn probe_attach_kinds(tracefs: &TracefsReport) -> Vec<AttachKind> {
    let kinds = [
        "tracepoint",
        "tp_btf",
        "fentry",
        "fexit",
        "kprobe",
        "perf_event",
    ];
    let mut ebpf = match loader::object().and_then(|o| Ok(Ebpf::load(o)?)) {
        Ok(e) => e,
        Err(e) => {
            let msg = format!("loading the eBPF object: {e:#}");
            return kinds
                .iter()
                .map(|&kind| AttachKind {
                    kind,
                    works: false,
                    error: Some(msg.clone()),
                })
                .collect();
        }
    };
    let btf = crate::source::kernel::btf::aya_vmlinux().map_err(|e| format!("{e} unavailable"));
    kinds
        .iter()
        .map(|&kind| {
            let result = match (kind, &tracefs.error) {
                ("tracepoint", Some(why)) => Err(why.clone()),
                _ => try_kind(&mut ebpf, kind, &btf),
            };
            AttachKind {
                kind,
                works: result.is_ok(),
                error: result.err(),
            }
        })
        .collect()
}

fn try_kind(
    ebpf: &mut Ebpf,
    kind: &str,
    btf: &Result<std::sync::Arc<Btf>, String>,
) -> Result<(), String> {
    let e = |err: aya::programs::ProgramError| crate::source::kernel::errors::one_line(&err);
    fn prog<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut aya::programs::Program, String> {
        ebpf.program_mut(name)
            .ok_or_else(|| format!("program {name} missing from the eBPF object"))
    }
    match kind {
        "tracepoint" => {
            let p: &mut TracePoint = prog(ebpf, "probe_tracepoint")?.try_into().map_err(e)?;
            p.load().map_err(e)?;
            p.attach("sched", "sched_process_exit").map_err(e)?;
        }
        "tp_btf" => {
            let btf = btf.as_ref().map_err(Clone::clone)?;
            let p: &mut BtfTracePoint = prog(ebpf, "probe_tp_btf")?.try_into().map_err(e)?;
            p.load("sched_process_exit", btf).map_err(e)?;
            p.attach().map_err(e)?;
        }
        "fentry" => {
            let btf = btf.as_ref().map_err(Clone::clone)?;
            let p: &mut FEntry = prog(ebpf, "probe_fentry")?.try_into().map_err(e)?;
            p.load(PROBE_FUNCTION, btf).map_err(e)?;
            p.attach().map_err(e)?;
        }
        "fexit" => {
            let btf = btf.as_ref().map_err(Clone::clone)?;
            let p: &mut FExit = prog(ebpf, "probe_fexit")?.try_into().map_err(e)?;
            p.load(PROBE_FUNCTION, btf).map_err(e)?;
            p.attach().map_err(e)?;
        }
        "kprobe" => {
            let p: &mut KProbe = prog(ebpf, "probe_kprobe")?.try_into().map_err(e)?;
            p.load().map_err(e)?;
            p.attach(PROBE_FUNCTION, 0).map_err(e)?;
        }
        "perf_event" => {
            let p: &mut PerfEvent = prog(ebpf, "probe_perf_event")?.try_into().map_err(e)?;
            p.load().map_err(e)?;
            p.attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu: 0 },
                SamplePolicy::Frequency(1),
                false,
            )
            .map_err(e)?;
        }
        other => return Err(format!("unknown attach kind {other}")),
    }
    Ok(())
}

/// The human-readable report.
pub fn render(r: &Findings) -> String {
    let mut s = String::new();
    render_system(&mut s, r);
    render_privileges(&mut s, r);
    render_attach_kinds(&mut s, r);
    s.push_str(&crate::source::rmap::doctor::render(&r.rmap));
    render_hooks(&mut s, r);
    render_memory(&mut s, r);
    render_working_set(&mut s, r);
    s
}

fn render_working_set(s: &mut String, r: &Findings) {
    let _ = writeln!(s, "\nworking set (--working-set):");
    for m in &r.working_set {
        let state = match (m.offered, m.used) {
            (_, true) => "used",
            (true, false) => "offered",
            (false, false) => "unavailable",
        };
        let _ = writeln!(s, "  {:<16} {:<12} {}", m.method.name(), state, m.detail);
    }
    let mglru = r
        .working_set
        .iter()
        .any(|m| m.method == crate::model::wss::WssMethod::Mglru && m.offered);
    let _ = writeln!(
        s,
        "  --wss-method auto uses {}",
        if mglru {
            "mglru for a cgroup (--cgroup) or the whole system, referenced_scan for processes"
        } else {
            "referenced_scan"
        }
    );
}

fn yn(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The version, the kernel and what the kernel offers to read it with.
fn render_system(s: &mut String, r: &Findings) {
    let _ = writeln!(s, "vmscope {} doctor", r.tool.version);
    let _ = writeln!(s, "kernel      {} ({})", r.kernel.release, r.kernel.machine);
    let _ = writeln!(s, "btf         {}", yn(r.btf));
    let _ = writeln!(
        s,
        "lockdown    {}",
        r.lockdown.as_deref().unwrap_or("no lockdown LSM")
    );
    match (&r.tracefs.path, &r.tracefs.error) {
        (Some(p), _) => {
            let how = if r.tracefs.mounted_by_vmscope {
                " (mounted by vmscope)"
            } else {
                ""
            };
            let _ = writeln!(s, "tracefs     {p}{how}");
        }
        (None, e) => {
            let _ = writeln!(
                s,
                "tracefs     unavailable: {}",
                e.as_deref().unwrap_or("unknown")
            );
        }
    }
}

/// Who we run as, and what each missing privilege would add.
fn render_privileges(s: &mut String, r: &Findings) {
    let p = &r.privileges;
    let _ = writeln!(
        s,
        "privileges  uid={} root={} CAP_BPF={} CAP_PERFMON={} CAP_SYSLOG={} CAP_SYS_ADMIN={}",
        p.euid,
        yn(p.root),
        yn(p.cap_bpf),
        yn(p.cap_perfmon),
        yn(p.cap_syslog),
        yn(p.cap_sys_admin)
    );
    if r.privilege_gaps.is_empty() {
        let _ = writeln!(
            s,
            "  nothing missing: every figure this kernel offers can run"
        );
    }
    for g in &r.privilege_gaps {
        let _ = writeln!(s, "  missing {}\n    would add {}", g.needs, g.would_add);
    }
}

fn render_attach_kinds(s: &mut String, r: &Findings) {
    let _ = writeln!(s, "\nattach kinds (loaded and attached for real):");
    for k in &r.attach_kinds {
        match &k.error {
            None => {
                let _ = writeln!(s, "  {:<11} works", k.kind);
            }
            Some(err) => {
                let _ = writeln!(s, "  {:<11} refused: {err}", k.kind);
            }
        }
    }
    let _ = writeln!(s, "function timing: {}", r.function_timing);
}

fn render_hooks(s: &mut String, r: &Findings) {
    let _ = writeln!(s, "\nhooks:");
    for h in &r.hooks {
        if let Some(why) = &h.unknown {
            let why = if r.tracefs.error.as_ref() == Some(why) {
                "tracefs unreadable (see above), and syscall events have no BTF type; \
                 on x86-64 the raw sys_enter/sys_exit hooks stand in"
            } else {
                why
            };
            let _ = writeln!(s, "  unknown  {}: {why}", h.hook);
        } else if h.present {
            let alias = h
                .found_as
                .as_deref()
                .map(|a| format!(" (as {a})"))
                .unwrap_or_default();
            let _ = writeln!(s, "  present  {}{alias}: {}", h.hook, h.used_for);
        } else {
            let _ = writeln!(
                s,
                "  absent   {}: {}",
                h.hook,
                h.fallback.unwrap_or("no fallback")
            );
        }
    }
}

/// Swap devices, PSI and the memory cgroup: what the figures that do not
/// come from probes need.
fn render_memory(s: &mut String, r: &Findings) {
    let _ = writeln!(s, "\nswap devices:");
    if r.swap_devices.is_empty() {
        let _ = writeln!(
            s,
            "  none (swap figures will be zero because nothing can swap)"
        );
    }
    for d in &r.swap_devices {
        let medium = crate::model::tiers::medium(&d.name);
        let _ = writeln!(
            s,
            "  {} {} ({}) {} MiB, {} MiB used, priority {}",
            d.name,
            d.kind,
            if medium == "zram" {
                "compressed RAM"
            } else {
                "disk"
            },
            d.size_bytes >> 20,
            d.used_bytes >> 20,
            d.priority
        );
    }
    let _ = writeln!(
        s,
        "zswap       {}",
        match &r.swap_tiers.zswap {
            None => "not in this kernel (CONFIG_ZSWAP): zswap figures unavailable".to_string(),
            Some(z) => format!(
                "{}, compressor {}, pool at most {}% of memory{}",
                if z.enabled {
                    "on: pages swapped out are compressed in RAM first"
                } else {
                    "off (/sys/module/zswap/parameters/enabled)"
                },
                z.compressor.as_deref().unwrap_or("?"),
                z.max_pool_percent
                    .map_or_else(|| "?".to_string(), |p| p.to_string()),
                match z.ratio() {
                    Some(r) => format!("; pool {r:.2}:1 now"),
                    None => String::new(),
                }
            ),
        }
    );
    let _ = writeln!(
        s,
        "PSI memory  {}",
        match &r.psi_memory.reason {
            None => "available".to_string(),
            Some(e) => format!("unavailable: {e}"),
        }
    );
    let _ = writeln!(
        s,
        "memory cgroup {}",
        match (&r.memory_cgroup.version, &r.memory_cgroup.path) {
            (Some(v), Some(p)) => format!("{v} at {p}"),
            _ => "controller not mounted".to_string(),
        }
    );
}

#[cfg(test)]
mod tests {
    use crate::model::probes::group_syscalls;

    #[test]
    fn syscall_events_are_listed_once_per_call() {
        let probes = [
            "syscalls:sys_enter_madvise",
            "syscalls:sys_exit_madvise",
            "vmscan:mm_vmscan_write_folio",
            "syscalls:sys_enter_brk",
            "syscalls:sys_exit_brk",
        ]
        .map(String::from);
        assert_eq!(
            group_syscalls(&probes),
            "syscalls (madvise, brk), vmscan:mm_vmscan_write_folio"
        );
        assert_eq!(group_syscalls(&[]), "");
    }
}
