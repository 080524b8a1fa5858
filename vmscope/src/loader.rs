//! Loading vmscope's eBPF object and attaching its programs, with fallbacks.
//! A hook that cannot be attached is recorded as unavailable with the reason;
//! the others go on.

use std::fmt::Write as _;

use anyhow::{Context as _, anyhow};
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, MapData, PerCpuArray},
    programs::{
        PerfEvent, TracePoint,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
};
use serde::{Deserialize, Serialize};
use vmscope_common::ProcStats;

use crate::kernel::{hooks, tracefs};

/// The eBPF object built by build.rs (empty when built with AYA_BUILD_SKIP=1).
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/vmscope"));

/// Comma-separated probe names to treat as absent (for testing fallbacks).
pub const DISABLE_ENV: &str = "VMSCOPE_DISABLE_PROBES";

/// What happened to one probe.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProbeStatus {
    /// The hook, e.g. `exceptions:page_fault_user`, or `perf:page-faults`.
    pub probe: String,
    /// How it is attached: `tracepoint`, `perf_event`.
    pub method: String,
    pub attached: bool,
    /// Why it is not attached, or which fallback replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where page-fault counts come from on this kernel.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FaultSource {
    /// `exceptions:page_fault_*`: counts with error-code classes.
    Tracepoint,
    /// The perf software page-faults event: counts only.
    PerfSoftware,
    /// Nothing could be attached.
    Unavailable,
}

pub struct LoadOptions {
    /// Restrict per-process statistics to followed pids and their children.
    pub filtered: bool,
}

/// Loaded programs and the maps the collector reads.
pub struct Loaded {
    _ebpf: Ebpf,
    pub counters: PerCpuArray<MapData, u64>,
    pub procs: HashMap<MapData, u32, ProcStats>,
    tracked: HashMap<MapData, u32, u32>,
    pub probes: Vec<ProbeStatus>,
    pub fault_source: FaultSource,
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
}

impl Loaded {
    /// Follows `pid` (and, through the fork hook, its future children).
    pub fn track(&mut self, pid: u32) -> anyhow::Result<()> {
        self.tracked
            .insert(pid, 1, 0)
            .with_context(|| format!("adding pid {pid} to the followed set"))
    }

    /// Forwards pending eBPF-side diagnostics to the `log` crate.
    pub fn flush_logs(&mut self) {
        if let Some(l) = self.logger.as_mut() {
            l.flush();
        }
    }
}

fn disabled() -> Vec<String> {
    std::env::var(DISABLE_ENV)
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_default()
}

/// The raw object, or an error saying how to get one.
pub fn object() -> anyhow::Result<&'static [u8]> {
    if EBPF_OBJECT.is_empty() {
        return Err(anyhow!(
            "this vmscope was built without its eBPF programs (AYA_BUILD_SKIP); \
             rebuild with `cargo xtask build`"
        ));
    }
    Ok(EBPF_OBJECT)
}

/// Renders an error and its causes on one line.
pub fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(cause) = src {
        let _ = write!(s, ": {cause}");
        src = cause.source();
    }
    // Verifier logs are long and multi-line; keep the first line of each part.
    s.lines().next().unwrap_or_default().to_string()
}

struct Offsets {
    pf_error_code: Result<u32, String>,
    fork_child_pid: Result<u32, String>,
}

fn read_offsets(off: &[String]) -> Offsets {
    let field = |hook: &hooks::Hook, field: &str, sizes: &[u32]| -> Result<u32, String> {
        if off.contains(&hook.full_name()) {
            return Err(format!("disabled by {DISABLE_ENV}"));
        }
        let fmt = tracefs::event_format(hook.category, hook.name)?;
        fmt.int_field(field, sizes)
            .map(|f| f.offset)
            .map_err(|e| e.to_string())
    };
    let user = field(&hooks::PAGE_FAULT_USER, "error_code", &[8, 4]);
    let pf_error_code = match (
        &user,
        field(&hooks::PAGE_FAULT_KERNEL, "error_code", &[8, 4]),
    ) {
        (Ok(u), Ok(k)) if *u != k => Err(format!(
            "error_code offset differs between page_fault_user ({u}) and page_fault_kernel ({k})"
        )),
        _ => user,
    };
    Offsets {
        pf_error_code,
        fork_child_pid: field(&hooks::SCHED_PROCESS_FORK, "child_pid", &[4]),
    }
}

/// Loads the object with this kernel's field offsets and attaches every probe
/// it can.
pub fn load(opts: &LoadOptions) -> anyhow::Result<Loaded> {
    let object = object()?;
    tracefs::tracefs().map_err(|e| anyhow!(e))?;
    // Not fatal: kernels >= 5.11 account BPF memory to the cgroup instead.
    if let Err(e) = raise_memlock() {
        log::debug!("could not raise RLIMIT_MEMLOCK ({e}); fine on kernels >= 5.11");
    }
    let off = disabled();
    let offsets = read_offsets(&off);
    let filtered: u32 = opts.filtered.into();
    let pf_off = offsets.pf_error_code.as_ref().copied().unwrap_or(0);
    let fork_off = offsets.fork_child_pid.as_ref().copied().unwrap_or(0);
    let mut ebpf = EbpfLoader::new()
        .override_global("FILTER_ENABLED", &filtered, true)
        .override_global("PF_ERROR_CODE_OFF", &pf_off, true)
        .override_global("FORK_CHILD_PID_OFF", &fork_off, true)
        .load(object)
        .context("loading the eBPF object into the kernel")?;
    let logger = aya_log::EbpfLogger::init(&mut ebpf)
        .map_err(|e| log::debug!("eBPF logging unavailable: {e}"))
        .ok();

    let mut probes = Vec::new();
    let user = attach_tp(
        &mut ebpf,
        &off,
        &hooks::PAGE_FAULT_USER,
        "page_fault_user",
        &offsets.pf_error_code,
    );
    let user_ok = user.attached;
    probes.push(user);
    let fault_source = if user_ok {
        probes.push(attach_tp(
            &mut ebpf,
            &off,
            &hooks::PAGE_FAULT_KERNEL,
            "page_fault_kernel",
            &offsets.pf_error_code,
        ));
        FaultSource::Tracepoint
    } else {
        let result = attach_perf_faults(&mut ebpf);
        let ok = result.is_ok();
        probes.push(ProbeStatus {
            probe: "perf:page-faults".into(),
            method: "perf_event".into(),
            attached: ok,
            reason: Some(match result {
                Ok(()) => {
                    "fallback for exceptions:page_fault_user: counts without error-code classes"
                        .into()
                }
                Err(e) => e,
            }),
        });
        if ok {
            FaultSource::PerfSoftware
        } else {
            FaultSource::Unavailable
        }
    };
    if opts.filtered {
        probes.push(attach_tp(
            &mut ebpf,
            &off,
            &hooks::SCHED_PROCESS_FORK,
            "sched_process_fork",
            &offsets.fork_child_pid,
        ));
    }
    probes.push(attach_tp(
        &mut ebpf,
        &off,
        &hooks::SCHED_PROCESS_EXEC,
        "sched_process_exec",
        &Ok(0),
    ));

    let counters = PerCpuArray::try_from(take(&mut ebpf, "COUNTERS")?)?;
    let procs = HashMap::try_from(take(&mut ebpf, "PROCS")?)?;
    let tracked = HashMap::try_from(take(&mut ebpf, "TRACKED")?)?;
    Ok(Loaded {
        _ebpf: ebpf,
        counters,
        procs,
        tracked,
        probes,
        fault_source,
        logger,
    })
}

/// Attaches one tracepoint program, given the outcome of reading its offsets.
fn attach_tp(
    ebpf: &mut Ebpf,
    off: &[String],
    hook: &hooks::Hook,
    prog: &str,
    offsets: &Result<u32, String>,
) -> ProbeStatus {
    let result = (|| -> Result<(), String> {
        if off.contains(&hook.full_name()) {
            return Err(format!("disabled by {DISABLE_ENV}"));
        }
        offsets.as_ref().map_err(Clone::clone)?;
        attach_tracepoint(ebpf, prog, hook.category, hook.name)
    })();
    ProbeStatus {
        probe: hook.full_name(),
        method: "tracepoint".into(),
        attached: result.is_ok(),
        reason: result.err(),
    }
}

fn take(ebpf: &mut Ebpf, name: &str) -> anyhow::Result<aya::maps::Map> {
    ebpf.take_map(name)
        .ok_or_else(|| anyhow!("map {name} missing from the eBPF object"))
}

fn attach_tracepoint(
    ebpf: &mut Ebpf,
    prog: &str,
    category: &str,
    name: &str,
) -> Result<(), String> {
    let p: &mut TracePoint = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
    p.load()
        .map_err(|e| format!("loading {prog}: {}", one_line(&e)))?;
    p.attach(category, name)
        .map(|_| ())
        .map_err(|e| format!("attaching {category}:{name}: {}", one_line(&e)))
}

fn attach_perf_faults(ebpf: &mut Ebpf) -> Result<(), String> {
    let p: &mut PerfEvent = ebpf
        .program_mut("page_fault_perf")
        .ok_or("program page_fault_perf missing from the eBPF object")?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
    p.load()
        .map_err(|e| format!("loading page_fault_perf: {}", one_line(&e)))?;
    let cpus = aya::util::online_cpus().map_err(|(what, e)| format!("{what}: {e}"))?;
    for cpu in cpus {
        p.attach(
            PerfEventConfig::Software(SoftwareEvent::PageFaults),
            PerfEventScope::AllProcessesOneCpu { cpu },
            SamplePolicy::Period(1),
            false,
        )
        .map_err(|e| format!("perf page-faults event on cpu {cpu}: {}", one_line(&e)))?;
    }
    Ok(())
}

fn raise_memlock() -> std::io::Result<()> {
    let rlim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall with a valid pointer to a local.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &rlim) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
