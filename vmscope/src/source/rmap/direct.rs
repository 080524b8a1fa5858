//! The direct-timing method: fentry/fexit (or kprobes) on the rmap
//! functions themselves, where the kernel allows it. This module decides
//! which functions a kernel offers to attach to, what is missed and why,
//! and whether the kernel lets vmscope attach at all; when it does not, the
//! reason is kept and stack sampling is used instead.

use anyhow::Context as _;
use aya::{
    Btf, Ebpf,
    maps::{MapData, PerCpuArray},
    programs::{FEntry, FExit, KProbe},
};
use vmscope_common::{HIST_BUCKETS, sample::timing};

use crate::{model::rmap::Calibration, source::kernel::errors::one_line};

/// The rmap walks, outermost first.
pub const WALK: &[&str] = &[
    "folio_referenced",
    "try_to_unmap",
    "try_to_migrate",
    "folio_mkclean",
    "rmap_walk",
    "rmap_walk_locked",
    "rmap_walk_anon",
    "rmap_walk_file",
    "page_vma_mapped_walk",
];

/// The walks that carry the figure. Every walk starts in one of the
/// callers, which the rest of mm calls from other files (so no kernel
/// inlines them), or in `rmap_walk`/`rmap_walk_locked` called from other
/// files (migration, idle-page tracking, DAMON). Inside rmap.c the
/// compiler may inline `rmap_walk` into the callers (6.1 and 6.12 do,
/// while keeping an out-of-line copy), so timing it alone would miss
/// reclaim's walks: both are timed, and where the entry is out of line
/// under a caller the call is counted as nested and its timing cost taken
/// out. Where a caller is missing, the anon, file and KSM branches stand
/// in for it. Nothing is timed per mapping (`page_vma_mapped_walk` runs
/// once per VMA inside every walk: timing it cost more than the walk).
pub const CALLERS: &[&str] = &[
    "folio_referenced",
    "try_to_unmap",
    "try_to_migrate",
    "folio_mkclean",
];
pub const ENTRIES: &[&str] = &["rmap_walk", "rmap_walk_locked"];
pub const BRANCHES: &[&str] = &["rmap_walk_anon", "rmap_walk_file"];
/// KSM's branch: timed beside the others where the kernel has it (KSM is
/// not built everywhere, so its absence is no miss).
pub const KSM_BRANCH: &str = "rmap_walk_ksm";

/// Functions that add or remove rmap entries, each with the names it had
/// on older kernels (tried in order when the current name is absent): the
/// folio conversion renamed them around 6.3-6.8, and 6.1 has the `page_*`
/// functions, which handle PTE and PMD mappings alike. Timed only when
/// asked (`--rmap-maintenance`): they run on every fault, fork and unmap.
pub const MAINTENANCE: &[(&str, &[&str])] = &[
    ("folio_add_new_anon_rmap", &["page_add_new_anon_rmap"]),
    ("folio_add_anon_rmap_ptes", &["page_add_anon_rmap"]),
    ("folio_add_anon_rmap_pmd", &["page_add_anon_rmap"]),
    (
        "folio_add_file_rmap_ptes",
        &["folio_add_file_rmap_range", "page_add_file_rmap"],
    ),
    (
        "folio_add_file_rmap_pmd",
        &["folio_add_file_rmap_range", "page_add_file_rmap"],
    ),
    (
        "folio_remove_rmap_ptes",
        &["folio_remove_rmap_range", "page_remove_rmap"],
    ),
    (
        "folio_remove_rmap_pmd",
        &["folio_remove_rmap_range", "page_remove_rmap"],
    ),
    ("anon_vma_fork", &[]),
    ("anon_vma_clone", &[]),
    ("unlink_anon_vmas", &[]),
    ("__anon_vma_prepare", &[]),
];

use crate::model::rmap::RmapFnKind;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missed {
    pub function: &'static str,
    pub reason: String,
}

/// What direct timing would attach to on one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub attach: Vec<(&'static str, RmapFnKind)>,
    pub missed: Vec<Missed>,
}

/// What a kernel says about one function.
pub struct KernelFunctions<'a> {
    /// Has a BTF `FUNC` entry (fentry needs one).
    pub in_btf: &'a dyn Fn(&str) -> bool,
    /// Text symbols of kallsyms with this exact name.
    pub symbol: &'a dyn Fn(&str) -> bool,
    /// Only compiler clones (`name.isra.0`, `name.constprop.0`) exist.
    pub only_clones: &'a dyn Fn(&str) -> bool,
}

/// Why `f` cannot be attached, or `None` when it can.
fn unusable(k: &KernelFunctions<'_>, f: &str) -> Option<String> {
    if (k.symbol)(f) && (k.in_btf)(f) {
        return None;
    }
    Some(if (k.symbol)(f) {
        "no BTF entry, so fentry cannot attach (a kprobe could)".to_string()
    } else if (k.only_clones)(f) {
        "only compiler clones (e.g. .isra/.constprop) exist: the function was specialised \
         and cannot be attached by name"
            .to_string()
    } else if (k.in_btf)(f) {
        "inlined into every caller (BTF lists it, kallsyms does not): its walks are timed \
         in the callers that are attached"
            .to_string()
    } else if f == "rmap_walk" {
        "not in this kernel: inlined into its callers (as on about 5.19-6.8); its walks are \
         timed in the functions it would have called"
            .to_string()
    } else {
        "not in this kernel under this name or an older one; its walks are timed in the \
         callers that are attached"
            .to_string()
    })
}

/// The functions to attach to, and the ones missed with the reason. Walks
/// are timed at their entry (see [`ENTRIES`]); maintenance only when
/// `maintenance` asks for it.
pub fn plan(k: &KernelFunctions<'_>, maintenance: bool) -> Plan {
    let mut p = Plan::default();
    // Each tier is needed only for the entries the tier above lacks.
    let tier = |names: &[&'static str], p: &mut Plan| -> bool {
        let mut complete = true;
        for &f in names {
            match unusable(k, f) {
                None => p.attach.push((f, RmapFnKind::Walk)),
                Some(reason) => {
                    complete = false;
                    p.missed.push(Missed {
                        function: f,
                        reason,
                    });
                }
            }
        }
        complete
    };
    let callers = tier(CALLERS, &mut p);
    tier(ENTRIES, &mut p);
    if !callers {
        tier(BRANCHES, &mut p);
        if unusable(k, KSM_BRANCH).is_none() {
            p.attach.push((KSM_BRANCH, RmapFnKind::Walk));
        }
    }
    if !maintenance {
        return p;
    }
    for &(f, older) in MAINTENANCE {
        let usable = |n: &str| unusable(k, n).is_none();
        let name = if usable(f) {
            Some(f)
        } else {
            older.iter().copied().find(|n| usable(n))
        };
        match name {
            Some(name) if p.attach.iter().any(|(a, _)| *a == name) => p.missed.push(Missed {
                function: f,
                reason: format!(
                    "this kernel has no separate function for it: {name}, which is \
                     attached, does its work"
                ),
            }),
            Some(name) => p.attach.push((name, RmapFnKind::Maintenance)),
            None => p.missed.push(Missed {
                function: f,
                reason: unusable(k, f).unwrap_or_default(),
            }),
        }
    }
    p
}

/// The plan for the running kernel.
pub fn plan_here(btf: &Btf, symbols: &super::kallsyms::Symbols, maintenance: bool) -> Plan {
    let in_btf = |f: &str| {
        btf.id_by_type_name_kind(f, aya_obj::btf::BtfKind::Func)
            .is_ok()
    };
    let symbol = |f: &str| symbols.has(f);
    let only_clones = |f: &str| !symbols.has(f) && symbols.has_clone(f);
    plan(
        &KernelFunctions {
            in_btf: &in_btf,
            symbol: &symbol,
            only_clones: &only_clones,
        },
        maintenance,
    )
}

/// Whether this kernel lets vmscope attach a tracing program to `function`:
/// fentry first, then a kprobe. Both refusals are reported.
pub fn can_attach(ebpf: &mut Ebpf, btf: &Btf, function: &str) -> Result<&'static str, String> {
    let fentry = (|| -> Result<(), String> {
        let p: &mut FEntry = ebpf
            .program_mut("probe_fentry")
            .ok_or("program probe_fentry missing from the eBPF object")?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
        p.load(function, btf).map_err(|e| one_line(&e))?;
        let link = p.attach().map_err(|e| one_line(&e))?;
        let _ = p.detach(link);
        Ok(())
    })();
    let fentry = match fentry {
        Ok(()) => return Ok("fentry"),
        Err(e) => e,
    };
    let kprobe = (|| -> Result<(), String> {
        let p: &mut KProbe = ebpf
            .program_mut("probe_kprobe")
            .ok_or("program probe_kprobe missing from the eBPF object")?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
        p.load().map_err(|e| one_line(&e))?;
        let link = p.attach(function, 0).map_err(|e| one_line(&e))?;
        let _ = p.detach(link);
        Ok(())
    })();
    match kprobe {
        Ok(()) => Ok("kprobe"),
        Err(k) => Err(format!(
            "fentry on {function} refused ({fentry}); kprobe refused ({k})"
        )),
    }
}

/// The direct timer: fentry and fexit on every planned function.
pub struct DirectTimer {
    /// Kept so the context-switch hook keeps taking off-CPU time out.
    _on: aya::maps::Array<MapData, u32>,
    stats: PerCpuArray<MapData, u64>,
    hist: PerCpuArray<MapData, u64>,
    functions: Vec<(&'static str, RmapFnKind)>,
    calibration: Option<Calibration>,
}

/// Loads slot `slot`'s fentry and fexit programs on `f`.
fn load_slot(ebpf: &mut Ebpf, btf: &Btf, slot: u32, f: &str) -> Result<(), String> {
    for name in [format!("rmap_fexit_{slot}"), format!("rmap_fentry_{slot}")] {
        let e = |e: aya::programs::ProgramError| format!("{name} on {f}: {}", one_line(&e));
        match ebpf.program_mut(&name) {
            Some(aya::programs::Program::FEntry(p)) => p.load(f, btf).map_err(e)?,
            Some(aya::programs::Program::FExit(p)) => p.load(f, btf).map_err(e)?,
            Some(_) => return Err(format!("program {name} is not fentry/fexit")),
            None => return Err(format!("program {name} missing from the eBPF object")),
        }
    }
    Ok(())
}

/// Attaches one loaded program (`fentry` or `fexit` of `slot`).
fn attach_one(ebpf: &mut Ebpf, name: &str) -> Result<AttachedLink, String> {
    let e = |e: aya::programs::ProgramError| format!("{name}: {}", one_line(&e));
    match ebpf.program_mut(name) {
        Some(aya::programs::Program::FEntry(p)) => p.attach().map(AttachedLink::Entry).map_err(e),
        Some(aya::programs::Program::FExit(p)) => p.attach().map(AttachedLink::Exit).map_err(e),
        _ => Err(format!("program {name} missing or not fentry/fexit")),
    }
}

enum AttachedLink {
    Entry(aya::programs::fentry::FEntryLinkId),
    Exit(aya::programs::fexit::FExitLinkId),
}

fn detach_one(ebpf: &mut Ebpf, name: &str, link: AttachedLink) {
    match (ebpf.program_mut(name), link) {
        (Some(aya::programs::Program::FEntry(p)), AttachedLink::Entry(l)) => {
            let _ = p.detach(l);
        }
        (Some(aya::programs::Program::FExit(p)), AttachedLink::Exit(l)) => {
            let _ = p.detach(l);
        }
        _ => {}
    }
}

fn take_array(ebpf: &mut Ebpf, name: &str) -> Result<PerCpuArray<MapData, u64>, String> {
    let m = ebpf
        .take_map(name)
        .ok_or_else(|| format!("map {name} missing from the eBPF object"))?;
    PerCpuArray::try_from(m).map_err(|e| e.to_string())
}

/// Attaches slot N's programs to the Nth planned function, after measuring
/// what timing one call costs on this kernel (`calibrate`); all or nothing
/// (a failure unloads what was attached and says which function failed).
/// Every fexit is attached before any fentry, so no call is started that
/// could not end.
pub fn attach_direct(ebpf: &mut Ebpf, btf: &Btf, plan: &Plan) -> Result<DirectTimer, String> {
    let functions: Vec<(&'static str, RmapFnKind)> = plan
        .attach
        .iter()
        .copied()
        .take(timing::CALIBRATION_SLOT as usize)
        .collect();
    let stats = take_array(ebpf, "RMAP_STATS")?;
    let calibration = match calibrate(ebpf, btf, &stats) {
        Ok(c) => Some(c),
        Err(e) => {
            log::warn!("rmap timing calibration failed ({e}); walk times are not corrected");
            None
        }
    };
    let mut attached: Vec<String> = Vec::new();
    let result = (|| -> Result<(), String> {
        for (i, &(f, _)) in functions.iter().enumerate() {
            load_slot(ebpf, btf, i as u32, f)?;
        }
        for kind in ["fexit", "fentry"] {
            for i in 0..functions.len() {
                let name = format!("rmap_{kind}_{i}");
                let _link = attach_one(ebpf, &name)?;
                attached.push(name);
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        // Unloading detaches: nothing keeps counting into unread maps.
        for name in attached.iter().rev() {
            match ebpf.program_mut(name) {
                Some(aya::programs::Program::FEntry(p)) => {
                    let _ = FEntry::unload(p);
                }
                Some(aya::programs::Program::FExit(p)) => {
                    let _ = FExit::unload(p);
                }
                _ => {}
            }
        }
        return Err(e);
    }
    // From now on the context-switch hook takes the time a thread spends
    // switched out inside a walk out of the walk's CPU time.
    let mut on: aya::maps::Array<MapData, u32> = ebpf
        .take_map("RMAP_ON")
        .ok_or("map RMAP_ON missing from the eBPF object")?
        .try_into()
        .map_err(|e: aya::maps::MapError| one_line(&e))?;
    on.set(0, 1, 0).map_err(|e| one_line(&e))?;
    Ok(DirectTimer {
        _on: on,
        stats,
        hist: take_array(ebpf, "RMAP_HIST")?,
        functions,
        calibration,
    })
}

/// The function the calibration times: `bpf_fentry_test1`, which the
/// kernel keeps for testing tracing programs (`noinline`, in BTF, its body
/// `return a + 1`), and which nothing calls but a test run of a tracing
/// program (`BPF_PROG_TEST_RUN`), once per run.
pub const CALIBRATION_FUNCTION: &str = "bpf_fentry_test1";

/// Rounds and test runs per round of the calibration.
const CAL_ROUNDS: usize = 9;
const CAL_CALLS: u64 = 4000;

/// `union bpf_attr` for `BPF_PROG_TEST_RUN` (the `test` member).
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// `n` test runs of the tracing program `fd` (each calls the test
/// functions once), and the wall time they took.
fn test_runs(fd: std::os::fd::RawFd, n: u64) -> Result<u64, String> {
    let mut attr = TestRunAttr {
        prog_fd: u32::try_from(fd).map_err(|_| "a negative program fd".to_string())?,
        ..Default::default()
    };
    let t = std::time::Instant::now();
    for _ in 0..n {
        // SAFETY: `attr` is a valid `bpf_attr` prefix of the size given.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_TEST_RUN,
                std::ptr::from_mut(&mut attr),
                std::mem::size_of::<TestRunAttr>(),
            )
        };
        if r != 0 {
            return Err(format!(
                "a test run of the calibration program failed: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// What timing one call costs on the running kernel, learnt by loading the
/// calibration slot's fentry/fexit (the very programs that time the walks)
/// on [`CALIBRATION_FUNCTION`] and making the kernel call it: the time the
/// programs measure per call is what they add inside a timed span (the
/// function's own nanosecond included), and the caller's wall clock with
/// and without them, in interleaved rounds, is the whole cost of a call.
fn calibrate(
    ebpf: &mut Ebpf,
    btf: &Btf,
    stats: &PerCpuArray<MapData, u64>,
) -> Result<Calibration, String> {
    use std::os::fd::{AsFd as _, AsRawFd as _};
    let f = CALIBRATION_FUNCTION;
    let slot = timing::CALIBRATION_SLOT;
    load_slot(ebpf, btf, slot, f)?;
    let read = |field: u32| sum(stats, field * timing::SLOTS + slot).map_err(|e| format!("{e:#}"));
    let (entry, exit) = (format!("rmap_fentry_{slot}"), format!("rmap_fexit_{slot}"));
    let fd = match ebpf.program(&entry) {
        Some(aya::programs::Program::FEntry(p)) => {
            p.fd().map_err(|e| one_line(&e))?.as_fd().as_raw_fd()
        }
        _ => return Err(format!("program {entry} missing or not fentry")),
    };
    let mut inside = Vec::new();
    let mut whole = Vec::new();
    test_runs(fd, CAL_CALLS)?; // warm up
    for _ in 0..CAL_ROUNDS {
        let bare = test_runs(fd, CAL_CALLS)?;
        let x = attach_one(ebpf, &exit)?;
        let n = match attach_one(ebpf, &entry) {
            Ok(n) => n,
            Err(e) => {
                detach_one(ebpf, &exit, x);
                return Err(e);
            }
        };
        let (c0, ns0) = (read(timing::OUTER)?, read(timing::NS)?);
        let timed = test_runs(fd, CAL_CALLS);
        let (c1, ns1) = (read(timing::OUTER)?, read(timing::NS)?);
        detach_one(ebpf, &entry, n);
        detach_one(ebpf, &exit, x);
        let timed = timed?;
        let calls = c1.saturating_sub(c0);
        if calls < CAL_CALLS {
            return Err(format!(
                "{f} was timed {calls} times in {CAL_CALLS} test runs"
            ));
        }
        inside.push(ns1.saturating_sub(ns0) as f64 / calls as f64);
        whole.push((timed as f64 - bare as f64) / CAL_CALLS as f64);
    }
    Ok(Calibration::from_rounds(f, CAL_CALLS, &inside, &whole))
}

fn sum(arr: &PerCpuArray<MapData, u64>, i: u32) -> anyhow::Result<u64> {
    Ok(arr
        .get(&i, 0)
        .with_context(|| format!("reading slot {i}"))?
        .iter()
        .fold(0u64, |a, v| a.wrapping_add(*v)))
}

impl DirectTimer {
    pub fn calibration(&self) -> Option<&Calibration> {
        self.calibration.as_ref()
    }

    /// The cumulative calls and times so far.
    pub fn read(&self) -> anyhow::Result<super::RmapSample> {
        let field = |f: u32, slot: u32| sum(&self.stats, f * timing::SLOTS + slot);
        let mut out = super::RmapSample {
            method: super::Method::DirectTiming,
            cpus: crate::source::rmap::online_cpus(),
            calibration: self.calibration.clone(),
            ..Default::default()
        };
        for (i, &(f, kind)) in self.functions.iter().enumerate() {
            let slot = i as u32;
            let mut buckets = Vec::new();
            for b in 0..HIST_BUCKETS {
                let v = sum(&self.hist, slot * HIST_BUCKETS + b)?;
                if v > 0 {
                    buckets.push([u64::from(b), v]);
                }
            }
            let ns = field(timing::NS, slot)?;
            match kind {
                RmapFnKind::Walk => out.outer_walk_ns += ns,
                RmapFnKind::Maintenance => out.outer_maintenance_ns += ns,
            }
            out.functions.push(super::FnSample {
                function: f.to_string(),
                kind,
                calls: field(timing::CALLS, slot)?,
                outer_calls: field(timing::OUTER, slot)?,
                nested: field(timing::NESTED, slot)?,
                off_cpu_ns: field(timing::OFF_CPU, slot)?,
                ns,
                buckets,
            });
        }
        Ok(out)
    }
}

/// The method used for rmap figures and why, given whether a tracing
/// program could be attached here.
pub fn choose(attach: Result<&'static str, String>, plan: &Plan) -> (super::Method, String) {
    let missed = if plan.missed.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = plan.missed.iter().map(|m| m.function).collect();
        format!(" (not attachable here: {})", names.join(", "))
    };
    match attach {
        Err(why) => (
            super::Method::StackSampling,
            format!("direct timing unavailable: {why}; falling back to stack sampling{missed}"),
        ),
        Ok(kind) if plan.attach.is_empty() => (
            super::Method::StackSampling,
            format!("{kind} works, but none of the rmap functions can be attached{missed}"),
        ),
        Ok("fentry") => (
            super::Method::DirectTiming,
            format!(
                "direct timing: fentry/fexit on {} rmap functions, corrected by a start-up \
                 calibration of what timing a call costs, with stack sampling beside it as a \
                 cross-check{missed}",
                plan.attach.len()
            ),
        ),
        Ok(kind) => (
            super::Method::StackSampling,
            format!(
                "{kind} works but only fentry/fexit timing is built; falling back to stack \
                 sampling{missed}"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_with(btf: &[&str], syms: &[&str], clones: &[&str], maintenance: bool) -> Plan {
        let in_btf = |f: &str| btf.contains(&f);
        let symbol = |f: &str| syms.contains(&f);
        let only_clones = |f: &str| clones.contains(&f);
        plan(
            &KernelFunctions {
                in_btf: &in_btf,
                symbol: &symbol,
                only_clones: &only_clones,
            },
            maintenance,
        )
    }

    fn kernel(btf: &[&str], syms: &[&str], clones: &[&str]) -> Plan {
        kernel_with(btf, syms, clones, false)
    }

    /// The current name of every function (a kernel as new as the list).
    fn everything() -> Vec<&'static str> {
        WALK.iter()
            .copied()
            .chain([KSM_BRANCH])
            .chain(MAINTENANCE.iter().map(|(f, _)| *f))
            .collect()
    }

    fn names(p: &Plan) -> Vec<&'static str> {
        p.attach.iter().map(|(f, _)| *f).collect()
    }

    #[test]
    fn a_kernel_with_every_function_times_the_callers_and_the_entries() {
        let all = everything();
        let p = kernel(&all, &all, &[]);
        assert_eq!(
            names(&p),
            [
                "folio_referenced",
                "try_to_unmap",
                "try_to_migrate",
                "folio_mkclean",
                "rmap_walk",
                "rmap_walk_locked"
            ]
        );
        assert!(p.missed.is_empty(), "{:?}", p.missed);
        assert!(
            !names(&p).contains(&"page_vma_mapped_walk"),
            "nothing is timed per mapping"
        );
    }

    #[test]
    fn absent_entries_are_named_and_the_callers_still_carry_the_walks() {
        // rmap_walk and rmap_walk_locked inlined everywhere.
        let present: Vec<&str> = everything()
            .into_iter()
            .filter(|f| !ENTRIES.contains(f))
            .collect();
        let p = kernel(&present, &present, &[]);
        assert_eq!(names(&p), CALLERS);
        let why: Vec<&str> = p.missed.iter().map(|m| m.function).collect();
        assert_eq!(why, ENTRIES);
        assert!(p.missed[0].reason.contains("inlined"), "{:?}", p.missed);
    }

    #[test]
    fn a_missing_caller_brings_in_the_branches() {
        let present: Vec<&str> = everything()
            .into_iter()
            .filter(|f| *f != "folio_mkclean")
            .collect();
        let p = kernel(&present, &present, &[]);
        for f in ["rmap_walk_anon", "rmap_walk_file", "rmap_walk_ksm"] {
            assert!(names(&p).contains(&f), "{f}: {p:?}");
        }
        assert!(p.attach.iter().all(|(_, k)| *k == RmapFnKind::Walk));
    }

    #[test]
    fn maintenance_is_timed_only_when_asked_under_its_6_1_names() {
        // 6.1 names of the rmap maintenance functions; rmap_walk inlined.
        let mut k61: Vec<&str> = WALK.to_vec();
        k61.retain(|f| !ENTRIES.contains(f));
        k61.extend([
            "page_add_new_anon_rmap",
            "page_add_anon_rmap",
            "page_add_file_rmap",
            "page_remove_rmap",
            "anon_vma_fork",
            "anon_vma_clone",
            "unlink_anon_vmas",
            "__anon_vma_prepare",
        ]);
        let without = kernel(&k61, &k61, &[]);
        assert!(
            without.attach.iter().all(|(_, k)| *k == RmapFnKind::Walk),
            "{without:?}"
        );
        let p = kernel_with(&k61, &k61, &[], true);
        for f in [
            "page_add_new_anon_rmap",
            "page_add_anon_rmap",
            "page_add_file_rmap",
            "page_remove_rmap",
        ] {
            assert!(
                p.attach.contains(&(f, RmapFnKind::Maintenance)),
                "{f}: {p:?}"
            );
        }
        let attached = names(&p);
        let mut unique = attached.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), attached.len(), "attached twice: {attached:?}");
        let why = |f: &str| {
            p.missed
                .iter()
                .find(|m| m.function == f)
                .map(|m| m.reason.clone())
                .unwrap_or_else(|| panic!("{f} not missed: {p:?}"))
        };
        assert!(why("folio_add_anon_rmap_pmd").contains("page_add_anon_rmap, which is attached"));
        assert!(why("folio_remove_rmap_pmd").contains("page_remove_rmap"));
        assert!(why("rmap_walk").contains("inlined"));
    }

    #[test]
    fn btf_without_symbol_clone_only_and_symbol_without_btf_each_say_why() {
        let all = everything();
        let btf: Vec<&str> = all.iter().copied().filter(|f| *f != "rmap_walk").collect();
        let syms: Vec<&str> = all
            .iter()
            .copied()
            .filter(|f| *f != "rmap_walk_locked" && *f != "rmap_walk_anon")
            .collect();
        // folio_mkclean missing brings in the branches, where the anon
        // one is only a clone.
        let btf: Vec<&str> = btf.into_iter().filter(|f| *f != "folio_mkclean").collect();
        let p = kernel(&btf, &syms, &["rmap_walk_anon"]);
        let why = |f: &str| {
            p.missed
                .iter()
                .find(|m| m.function == f)
                .map(|m| m.reason.clone())
                .unwrap_or_else(|| panic!("{f} not missed: {p:?}"))
        };
        assert!(why("rmap_walk").contains("no BTF entry"));
        assert!(why("rmap_walk_locked").contains("inlined into every caller"));
        assert!(why("rmap_walk_anon").contains("compiler clones"));
        assert!(names(&p).contains(&"folio_referenced"), "{p:?}");
    }

    #[test]
    fn refusal_falls_back_to_sampling_with_a_clear_reason() {
        let all = everything();
        let p = kernel(&all, &all, &[]);
        let (m, why) = choose(
            Err("fentry on folio_referenced refused (Operation not permitted (os error 1))".into()),
            &p,
        );
        assert_eq!(m, super::super::Method::StackSampling);
        assert!(
            why.starts_with("direct timing unavailable: fentry"),
            "{why}"
        );
        assert!(why.contains("falling back to stack sampling"), "{why}");
        assert!(!why.contains('\n'));
    }

    #[test]
    fn fentry_that_works_chooses_direct_timing_and_names_what_it_cannot_attach() {
        let all = everything();
        let present: Vec<&str> = all.iter().copied().filter(|f| *f != "rmap_walk").collect();
        let p = kernel(&present, &present, &[]);
        let (m, why) = choose(Ok("fentry"), &p);
        assert_eq!(m, super::super::Method::DirectTiming);
        assert!(why.contains("not attachable here: rmap_walk"), "{why}");
        assert!(
            why.contains("calibration") && why.contains("cross-check"),
            "{why}"
        );
        let (m, why) = choose(Ok("kprobe"), &p);
        assert_eq!(m, super::super::Method::StackSampling, "{why}");
        let (m, _) = choose(Ok("fentry"), &Plan::default());
        assert_eq!(m, super::super::Method::StackSampling);
    }

    #[test]
    fn the_largest_plan_fits_the_program_slots_beside_the_calibration() {
        let all = everything();
        let none: Vec<&str> = Vec::new();
        // A caller missing: callers, entries, branches, plus every
        // maintenance function.
        let p = kernel_with(
            &all.iter()
                .copied()
                .filter(|f| *f != "folio_mkclean")
                .collect::<Vec<_>>(),
            &all,
            &none,
            true,
        );
        assert!(p.attach.len() <= timing::CALIBRATION_SLOT as usize, "{p:?}");
    }
}
