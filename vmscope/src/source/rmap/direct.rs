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

use crate::source::kernel::errors::one_line;

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

/// Functions that add or remove rmap entries, each with the names it had
/// on older kernels (tried in order when the current name is absent): the
/// folio conversion renamed them around 6.3-6.8, and 6.1 has the `page_*`
/// functions, which handle PTE and PMD mappings alike.
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

/// Every name direct timing may attach to.
pub fn all_names() -> impl Iterator<Item = &'static str> {
    WALK.iter().copied().chain(
        MAINTENANCE
            .iter()
            .flat_map(|(f, older)| std::iter::once(*f).chain(older.iter().copied())),
    )
}

use crate::model::rmap::Kind;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missed {
    pub function: &'static str,
    pub reason: String,
}

/// What direct timing would attach to on one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub attach: Vec<(&'static str, Kind)>,
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

/// The functions to attach to, and the ones missed with the reason. A walk
/// that is inlined is still counted inside its callers (the outer walks are
/// timed whole), but its own call count is missing.
pub fn plan(k: &KernelFunctions<'_>) -> Plan {
    let mut p = Plan::default();
    let all = WALK.iter().map(|f| (*f, &[][..], Kind::Walk)).chain(
        MAINTENANCE
            .iter()
            .map(|(f, older)| (*f, *older, Kind::Maintenance)),
    );
    let usable = |f: &str| (k.symbol)(f) && (k.in_btf)(f);
    for (f, older, kind) in all {
        if !usable(f)
            && let Some(&name) = older.iter().find(|n| usable(n))
        {
            if p.attach.iter().any(|(a, _)| *a == name) {
                p.missed.push(Missed {
                    function: f,
                    reason: format!(
                        "this kernel has no separate function for it: {name}, which is \
                         attached, does its work"
                    ),
                });
            } else {
                p.attach.push((name, kind));
            }
            continue;
        }
        let reason = if usable(f) {
            None
        } else if (k.symbol)(f) {
            Some("no BTF entry, so fentry cannot attach (a kprobe could)".to_string())
        } else if (k.only_clones)(f) {
            Some(
                "only compiler clones (e.g. .isra/.constprop) exist: the function was \
                 specialised and cannot be attached by name"
                    .to_string(),
            )
        } else if (k.in_btf)(f) {
            Some(
                "inlined into every caller (BTF lists it, kallsyms does not): its time \
                 counts in the callers that are attached"
                    .to_string(),
            )
        } else {
            Some(if f == "rmap_walk" {
                "not in this kernel: inlined into its callers (as on about 5.19-6.8); its \
                 time counts in the callers that are attached"
                    .to_string()
            } else {
                "not in this kernel under this name or an older one; work it did counts in \
                 the callers that are attached"
                    .to_string()
            })
        };
        match reason {
            None => p.attach.push((f, kind)),
            Some(reason) => p.missed.push(Missed {
                function: f,
                reason,
            }),
        }
    }
    p
}

/// The plan for the running kernel.
pub fn plan_here(btf: &Btf, symbols: &super::kallsyms::Symbols) -> Plan {
    let in_btf = |f: &str| {
        btf.id_by_type_name_kind(f, aya_obj::btf::BtfKind::Func)
            .is_ok()
    };
    let symbol = |f: &str| symbols.has(f);
    let only_clones = |f: &str| !symbols.has(f) && symbols.has_clone(f);
    plan(&KernelFunctions {
        in_btf: &in_btf,
        symbol: &symbol,
        only_clones: &only_clones,
    })
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

/// The direct timer: fentry (and fexit for walks) on every planned function.
pub struct DirectTimer {
    calls: PerCpuArray<MapData, u64>,
    ns: PerCpuArray<MapData, u64>,
    hist: PerCpuArray<MapData, u64>,
    functions: Vec<(&'static str, Kind)>,
}

/// Attaches slot N's programs to the Nth planned function; all or nothing
/// (a failure detaches what was attached and says which function failed).
pub fn attach_direct(ebpf: &mut Ebpf, btf: &Btf, plan: &Plan) -> Result<DirectTimer, String> {
    let functions: Vec<(&'static str, Kind)> = plan
        .attach
        .iter()
        .copied()
        .take(timing::SLOTS as usize)
        .collect();
    let mut attached: Vec<String> = Vec::new();
    let result = (|| -> Result<(), String> {
        for (i, &(f, kind)) in functions.iter().enumerate() {
            let names = match kind {
                Kind::Walk => vec![format!("rmap_fentry_{i}"), format!("rmap_fexit_{i}")],
                Kind::Maintenance => vec![format!("rmap_count_{i}")],
            };
            for name in names {
                let prog = ebpf
                    .program_mut(&name)
                    .ok_or_else(|| format!("program {name} missing from the eBPF object"))?;
                let e = |e: aya::programs::ProgramError| format!("{name} on {f}: {}", one_line(&e));
                match prog {
                    aya::programs::Program::FEntry(p) => {
                        p.load(f, btf).map_err(e)?;
                        p.attach().map_err(e)?;
                    }
                    aya::programs::Program::FExit(p) => {
                        p.load(f, btf).map_err(e)?;
                        p.attach().map_err(e)?;
                    }
                    _ => return Err(format!("program {name} is not fentry/fexit")),
                }
                attached.push(name);
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        // Unloading detaches: nothing keeps counting into unread maps.
        for name in attached {
            match ebpf.program_mut(&name) {
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
    let take = |ebpf: &mut Ebpf, name: &str| -> Result<PerCpuArray<MapData, u64>, String> {
        let m = ebpf
            .take_map(name)
            .ok_or_else(|| format!("map {name} missing from the eBPF object"))?;
        PerCpuArray::try_from(m).map_err(|e| e.to_string())
    };
    Ok(DirectTimer {
        calls: take(ebpf, "RMAP_CALLS")?,
        ns: take(ebpf, "RMAP_NS")?,
        hist: take(ebpf, "RMAP_HIST")?,
        functions,
    })
}

fn sum(arr: &PerCpuArray<MapData, u64>, i: u32) -> anyhow::Result<u64> {
    Ok(arr
        .get(&i, 0)
        .with_context(|| format!("reading slot {i}"))?
        .iter()
        .fold(0u64, |a, v| a.wrapping_add(*v)))
}

impl DirectTimer {
    /// The cumulative calls and times so far.
    pub fn read(&self) -> anyhow::Result<super::RmapSample> {
        let mut out = super::RmapSample {
            method: super::Method::DirectTiming,
            cpus: crate::source::rmap::online_cpus(),
            outer_walk_ns: sum(&self.ns, timing::OUTER_NS)?,
            ..Default::default()
        };
        for (i, &(f, kind)) in self.functions.iter().enumerate() {
            let slot = i as u32;
            let mut buckets = Vec::new();
            if kind == Kind::Walk {
                for b in 0..HIST_BUCKETS {
                    let v = sum(&self.hist, slot * HIST_BUCKETS + b)?;
                    if v > 0 {
                        buckets.push([u64::from(b), v]);
                    }
                }
            }
            out.functions.push(super::FnSample {
                function: f.to_string(),
                kind,
                calls: sum(&self.calls, slot)?,
                ns: sum(&self.ns, slot)?,
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
        format!(" (direct timing would miss: {})", names.join(", "))
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
                "direct timing: fentry/fexit on {} rmap functions{missed}",
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

    fn kernel(btf: &[&str], syms: &[&str], clones: &[&str]) -> Plan {
        let in_btf = |f: &str| btf.contains(&f);
        let symbol = |f: &str| syms.contains(&f);
        let only_clones = |f: &str| clones.contains(&f);
        plan(&KernelFunctions {
            in_btf: &in_btf,
            symbol: &symbol,
            only_clones: &only_clones,
        })
    }

    /// The current name of every function (a kernel as new as the list).
    fn everything() -> Vec<&'static str> {
        WALK.iter()
            .copied()
            .chain(MAINTENANCE.iter().map(|(f, _)| *f))
            .collect()
    }

    #[test]
    fn a_61_kernel_gets_the_page_functions_under_their_old_names() {
        // 6.1-rc BTF/kallsyms names of the rmap maintenance functions (the
        // walks already had their folio names).
        let mut k61: Vec<&str> = WALK.to_vec();
        k61.retain(|f| *f != "rmap_walk");
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
        let p = kernel(&k61, &k61, &[]);
        for f in [
            "page_add_new_anon_rmap",
            "page_add_anon_rmap",
            "page_add_file_rmap",
            "page_remove_rmap",
        ] {
            assert!(p.attach.contains(&(f, Kind::Maintenance)), "{f}: {p:?}");
        }
        let attached: Vec<&str> = p.attach.iter().map(|(f, _)| *f).collect();
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
        assert!(
            !p.missed
                .iter()
                .any(|m| m.function != "rmap_walk" && m.reason.contains("rmap_walk")),
            "{p:?}"
        );
    }

    #[test]
    fn every_function_attaches_when_the_kernel_has_them_all() {
        let all = everything();
        let p = kernel(&all, &all, &[]);
        assert!(p.missed.is_empty(), "{:?}", p.missed);
        assert_eq!(p.attach.len(), all.len());
        assert!(p.attach.contains(&("folio_referenced", Kind::Walk)));
        assert!(p.attach.contains(&("anon_vma_fork", Kind::Maintenance)));
    }

    #[test]
    fn inlined_rmap_walk_is_missed_with_the_reason_and_the_rest_attach() {
        // 5.19-6.8: rmap_walk is inlined into its callers, absent from both.
        let present: Vec<&str> = everything()
            .into_iter()
            .filter(|f| *f != "rmap_walk")
            .collect();
        let p = kernel(&present, &present, &[]);
        assert_eq!(p.missed.len(), 1);
        assert_eq!(p.missed[0].function, "rmap_walk");
        assert!(p.missed[0].reason.contains("inlined"), "{:?}", p.missed);
        assert!(p.attach.iter().any(|(f, _)| *f == "rmap_walk_anon"));
    }

    #[test]
    fn btf_without_symbol_clone_only_and_symbol_without_btf_each_say_why() {
        let all = everything();
        let btf: Vec<&str> = all
            .iter()
            .copied()
            .filter(|f| *f != "folio_mkclean")
            .collect();
        let syms: Vec<&str> = all
            .iter()
            .copied()
            .filter(|f| *f != "rmap_walk_locked" && *f != "page_vma_mapped_walk")
            .collect();
        let p = kernel(&btf, &syms, &["page_vma_mapped_walk"]);
        let why = |f: &str| {
            p.missed
                .iter()
                .find(|m| m.function == f)
                .map(|m| m.reason.clone())
                .unwrap_or_else(|| panic!("{f} not missed: {p:?}"))
        };
        assert!(why("folio_mkclean").contains("no BTF entry"));
        assert!(why("rmap_walk_locked").contains("inlined into every caller"));
        assert!(why("page_vma_mapped_walk").contains("compiler clones"));
        assert_eq!(p.attach.len() + p.missed.len(), all.len());
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
    fn fentry_that_works_chooses_direct_timing_and_names_what_it_misses() {
        let all = everything();
        let present: Vec<&str> = all.iter().copied().filter(|f| *f != "rmap_walk").collect();
        let p = kernel(&present, &present, &[]);
        let (m, why) = choose(Ok("fentry"), &p);
        assert_eq!(m, super::super::Method::DirectTiming);
        assert!(why.contains("would miss: rmap_walk"), "{why}");
        let (m, why) = choose(Ok("kprobe"), &p);
        assert_eq!(m, super::super::Method::StackSampling, "{why}");
        let (m, _) = choose(Ok("fentry"), &Plan::default());
        assert_eq!(m, super::super::Method::StackSampling);
    }

    #[test]
    fn the_plan_fits_the_program_slots() {
        assert!(WALK.len() + MAINTENANCE.len() <= timing::SLOTS as usize);
        assert!(all_names().count() > WALK.len() + MAINTENANCE.len());
    }
}
