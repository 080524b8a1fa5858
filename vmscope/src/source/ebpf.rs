//! The eBPF object vmscope is built with, and what every part that loads
//! programs from it shares (the loader and the rmap timers and sampler):
//! the object itself, the variable that disables probes by name, and
//! attaching a program to a software perf event on every CPU.

use anyhow::anyhow;
use aya::{
    Ebpf,
    programs::{
        PerfEvent, Program, ProgramError,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
};

use crate::source::kernel::errors::one_line;

/// The eBPF object built by build.rs (empty when built with AYA_BUILD_SKIP=1).
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/vmscope"));

/// Comma-separated probe names to treat as absent (for testing fallbacks).
pub const DISABLE_ENV: &str = "VMSCOPE_DISABLE_PROBES";

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

/// Program `prog` of the object, as its kind `T` (not loaded yet).
pub fn program<'a, T>(ebpf: &'a mut Ebpf, prog: &str) -> Result<&'a mut T, String>
where
    &'a mut T: TryFrom<&'a mut Program, Error = ProgramError>,
{
    ebpf.program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?
        .try_into()
        .map_err(|e: ProgramError| one_line(&e))
}

/// Loads `prog` and attaches it to a software perf event on every online
/// CPU with the given sampling (`Period(1)`: every occurrence). Returns how
/// many CPUs it is attached on.
pub fn attach_perf_sw(
    ebpf: &mut Ebpf,
    prog: &str,
    event: SoftwareEvent,
    policy: SamplePolicy,
) -> Result<usize, String> {
    let p: &mut PerfEvent = program(ebpf, prog)?;
    p.load()
        .map_err(|e| format!("loading {prog}: {}", one_line(&e)))?;
    let cpus = aya::util::online_cpus().map_err(|(what, e)| format!("{what}: {e}"))?;
    for &cpu in &cpus {
        p.attach(
            PerfEventConfig::Software(event),
            PerfEventScope::AllProcessesOneCpu { cpu },
            policy,
            false,
        )
        .map_err(|e| format!("perf {event:?} event on cpu {cpu}: {}", one_line(&e)))?;
    }
    Ok(cpus.len())
}
