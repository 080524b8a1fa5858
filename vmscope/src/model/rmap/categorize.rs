//! Which kind of kernel work a sampled stack was doing, and on whose behalf.
//!
//! The rules are a table: each names a category and the functions that
//! mark it. A stack is read from its innermost frame outwards, and the first
//! frame named by any rule decides the category. Innermost-first is what
//! makes the outer rules mean "other than": a sample in `try_to_unmap`
//! under `shrink_folio_list` is an rmap walk, a sample in the zram
//! compressor under the same `shrink_folio_list` is "reclaim other", and a
//! TLB flush sent from inside an rmap walk is a TLB flush.
//!
//! One exception: rmap entries removed by a walk (`folio_remove_rmap_ptes`
//! under `try_to_unmap_one`, as reclaim unmaps a page) are the walk's cost,
//! not maintenance; maintenance is what faults, fork, munmap and exit do.
//!
//! Names are matched exactly, after dropping compiler suffixes such as
//! `.isra.0` or `.cold`, so `try_to_unmap_flush_dirty` (a TLB flush) is not
//! mistaken for `try_to_unmap` (an rmap walk).

use serde::{Deserialize, Serialize};

/// What a sample was doing.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Walking the reverse map: folio_referenced, try_to_unmap, rmap_walk*,
    /// folio_mkclean, page_vma_mapped_walk, migration's walks.
    RmapWalk,
    /// Adding and removing rmap entries: folio_add_*rmap*,
    /// folio_remove_rmap*, anon_vma_fork/clone, unlink_anon_vmas, the
    /// anon_vma and file interval trees.
    RmapMaintenance,
    /// Flushing TLBs, locally or by sending or receiving shootdown IPIs.
    TlbFlush,
    /// Page reclaim (LRU scanning, swap-out, compression, slab shrinking)
    /// other than the above.
    ReclaimOther,
    /// Page-fault handling other than the above.
    FaultOther,
    /// Tracing: tracepoint handlers and eBPF programs (vmscope's own probes
    /// included, e.g. `kmem:rss_stat` firing inside try_to_unmap_one).
    Tracing,
    /// Any other kernel code.
    KernelOther,
    /// User code (no kernel frames).
    User,
    /// The idle loop.
    Idle,
}

impl Category {
    pub const ALL: [Category; 9] = [
        Category::RmapWalk,
        Category::RmapMaintenance,
        Category::TlbFlush,
        Category::Tracing,
        Category::ReclaimOther,
        Category::FaultOther,
        Category::KernelOther,
        Category::User,
        Category::Idle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::RmapWalk => "rmap_walk",
            Category::RmapMaintenance => "rmap_maintenance",
            Category::TlbFlush => "tlb_flush",
            Category::ReclaimOther => "reclaim_other",
            Category::FaultOther => "fault_other",
            Category::Tracing => "tracing",
            Category::KernelOther => "kernel_other",
            Category::User => "user",
            Category::Idle => "idle",
        }
    }

    pub fn from_name(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// On whose behalf the CPU was working.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Context {
    /// The kswapd thread (background reclaim).
    Kswapd,
    /// Reclaim entered by a process itself: global direct reclaim or memcg
    /// reclaim (over a limit, or a writer lowering one).
    DirectReclaim,
    /// Other kernel threads (kcompactd, kworkers, ...).
    KernelThread,
    /// A process's own code, syscalls and faults.
    Process,
    /// The idle task.
    Idle,
}

impl Context {
    pub const ALL: [Context; 5] = [
        Context::Kswapd,
        Context::DirectReclaim,
        Context::KernelThread,
        Context::Process,
        Context::Idle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Context::Kswapd => "kswapd",
            Context::DirectReclaim => "direct_reclaim",
            Context::KernelThread => "kernel_thread",
            Context::Process => "process",
            Context::Idle => "idle",
        }
    }

    pub fn from_name(name: &str) -> Option<Context> {
        Context::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// One rule: the functions whose presence on a stack marks a category.
pub struct Rule {
    pub category: Category,
    pub functions: &'static [&'static str],
}

/// The category rules. Order does not matter: the innermost frame named by
/// any rule wins (so no function may appear in two rules; a test checks).
pub const RULES: &[Rule] = &[
    Rule {
        category: Category::RmapWalk,
        functions: &[
            "folio_referenced",
            "folio_referenced_one",
            "try_to_unmap",
            "try_to_unmap_one",
            "try_to_migrate",
            "try_to_migrate_one",
            "rmap_walk",
            "rmap_walk_anon",
            "rmap_walk_file",
            "rmap_walk_locked",
            "rmap_walk_ksm",
            "folio_mkclean",
            "page_mkclean_one",
            "page_vma_mapped_walk",
            "folio_lock_anon_vma_read",
            "remove_migration_ptes",
            "remove_migration_pte",
            "make_device_exclusive",
            // Before folios (kernels up to about 5.16).
            "page_referenced",
            "page_referenced_one",
            "page_mkclean",
            "page_lock_anon_vma_read",
        ],
    },
    Rule {
        category: Category::RmapMaintenance,
        functions: &[
            "folio_add_anon_rmap_ptes",
            "folio_add_anon_rmap_pte",
            "folio_add_anon_rmap_pmd",
            "__folio_add_anon_rmap",
            "folio_add_new_anon_rmap",
            "folio_add_file_rmap_ptes",
            "folio_add_file_rmap_pte",
            "folio_add_file_rmap_pmd",
            "folio_add_file_rmap_pud",
            "__folio_add_file_rmap",
            "__folio_add_rmap",
            "folio_remove_rmap_ptes",
            "folio_remove_rmap_pte",
            "folio_remove_rmap_pmd",
            "folio_remove_rmap_pud",
            "__folio_remove_rmap",
            "folio_try_dup_anon_rmap_ptes",
            "__folio_try_dup_anon_rmap",
            "anon_vma_fork",
            "anon_vma_clone",
            "unlink_anon_vmas",
            "anon_vma_prepare",
            "__anon_vma_prepare",
            "anon_vma_interval_tree_insert",
            "anon_vma_interval_tree_remove",
            "vma_interval_tree_insert",
            "vma_interval_tree_insert_after",
            "vma_interval_tree_remove",
            // Before folios.
            "page_add_anon_rmap",
            "page_add_new_anon_rmap",
            "page_add_file_rmap",
            "page_remove_rmap",
        ],
    },
    Rule {
        category: Category::TlbFlush,
        functions: &[
            "flush_tlb_mm_range",
            "flush_tlb_func",
            "flush_tlb_multi",
            "native_flush_tlb_multi",
            "native_flush_tlb_one_user",
            "native_flush_tlb_local",
            "native_flush_tlb_global",
            "flush_tlb_kernel_range",
            "flush_tlb_all",
            "flush_tlb_one_kernel",
            "arch_tlbbatch_flush",
            "try_to_unmap_flush",
            "try_to_unmap_flush_dirty",
            "flush_tlb_batched_pending",
            "tlb_flush_mmu_tlbonly",
            "ptep_clear_flush",
            "flush_tlb_page",
        ],
    },
    Rule {
        category: Category::ReclaimOther,
        functions: &[
            "shrink_folio_list",
            "shrink_inactive_list",
            "shrink_active_list",
            "shrink_lruvec",
            "shrink_node",
            "shrink_node_memcgs",
            "shrink_zones",
            "shrink_slab",
            "shrink_slab_memcg",
            "shrink_many",
            "shrink_one",
            "isolate_lru_folios",
            "move_folios_to_lru",
            "reclaim_folio_list",
            "reclaim_pages",
            "pageout",
            "do_try_to_free_pages",
            "try_to_free_pages",
            "try_to_free_mem_cgroup_pages",
            "balance_pgdat",
            "kswapd",
            "node_reclaim",
            "__node_reclaim",
            "evict_folios",
            "try_to_shrink_lruvec",
            "lru_gen_shrink_lruvec",
            "lru_gen_shrink_node",
            // Before folios.
            "shrink_page_list",
            "isolate_lru_pages",
        ],
    },
    Rule {
        category: Category::FaultOther,
        functions: &[
            "handle_mm_fault",
            "__handle_mm_fault",
            "handle_pte_fault",
            "do_anonymous_page",
            "do_swap_page",
            "do_wp_page",
            "wp_page_copy",
            "do_fault",
            "do_read_fault",
            "do_cow_fault",
            "do_shared_fault",
            "do_huge_pmd_anonymous_page",
            "do_user_addr_fault",
            "exc_page_fault",
            "asm_exc_page_fault",
        ],
    },
    Rule {
        category: Category::Idle,
        functions: &[
            "do_idle",
            "cpu_idle_poll",
            "default_idle",
            "default_idle_call",
            "cpuidle_idle_call",
            "cpuidle_enter_state",
            "arch_cpu_idle",
            "pv_native_safe_halt",
            "native_safe_halt",
            "cpu_startup_entry",
        ],
    },
];

/// Functions whose presence marks the context, checked in this order.
const KSWAPD: &[&str] = &["kswapd", "balance_pgdat"];
const DIRECT_RECLAIM: &[&str] = &[
    "try_to_free_pages",
    "try_to_free_mem_cgroup_pages",
    "__alloc_pages_direct_reclaim",
    "__perform_reclaim",
    "reclaim_high",
    "node_reclaim",
];
const KTHREAD: &[&str] = &["kthread"];

/// A kernel function name without the suffixes compilers add to clones
/// (`.isra.0`, `.constprop.0`, `.part.0`, `.cold`) and without a module
/// name.
pub fn base_name(symbol: &str) -> &str {
    let s = symbol.split(['\t', ' ']).next().unwrap_or(symbol);
    s.split('.').next().unwrap_or(s)
}

/// Name prefixes of tracing code: a tracepoint's perf/eBPF handler, and
/// eBPF programs themselves (kallsyms names them `bpf_prog_<tag>_<name>`).
const TRACING_PREFIXES: &[&str] = &["perf_trace_", "bpf_prog_", "__bpf_trace_", "trace_call_bpf"];

fn rule_of(frame: &str) -> Option<Category> {
    let f = base_name(frame);
    if TRACING_PREFIXES.iter().any(|p| f.starts_with(p)) {
        return Some(Category::Tracing);
    }
    RULES
        .iter()
        .find(|r| r.functions.contains(&f))
        .map(|r| r.category)
}

/// Whether a sample ran inside an rmap walk: a frame of its stack is a
/// walk's, whatever the innermost frame (a TLB flush the walk made, a
/// tracer that fired in it, a maintenance call). That is what direct
/// timing's span covers, less direct timing's own instrumentation: a
/// sample executing vmscope's rmap timing programs (or a helper they
/// called) inside the walk, or executing a trampoline, is the
/// calibration's cost, not the walk's. A trampoline frame further out (a
/// function with fexit attached runs below its trampoline) is no reason
/// to leave a sample out.
pub fn within_walk(frames: &[&str]) -> bool {
    let Some(w) = frames
        .iter()
        .position(|f| rule_of(f) == Some(Category::RmapWalk))
    else {
        return false;
    };
    let timing_program = |f: &&str| {
        let f = base_name(f);
        f.starts_with("bpf_prog_") && (f.contains("_rmap_fentry_") || f.contains("_rmap_fexit_"))
    };
    let trampoline = |f: &str| {
        let f = base_name(f);
        f.starts_with("bpf_trampoline_")
            || f.starts_with("__bpf_prog_enter")
            || f.starts_with("__bpf_prog_exit")
            || f.starts_with("__bpf_tramp_")
    };
    !frames[..w].iter().any(timing_program) && !frames.first().is_some_and(|f| trampoline(f))
}

/// The category and context of one sample: `frames` are the symbolized
/// kernel frames, innermost first (empty for a sample in user code);
/// `tgid` is the sampled process (0 for the idle task).
pub fn classify(frames: &[&str], tgid: u32) -> (Category, Context) {
    if frames.is_empty() {
        return (Category::User, Context::Process);
    }
    let decided = frames
        .iter()
        .enumerate()
        .find_map(|(i, f)| Some((i, rule_of(f)?)));
    let category = match decided {
        Some((i, Category::RmapMaintenance))
            if frames[i + 1..]
                .iter()
                .any(|f| rule_of(f) == Some(Category::RmapWalk)) =>
        {
            Category::RmapWalk
        }
        Some((_, c)) => c,
        None => Category::KernelOther,
    };
    let has = |names: &[&str]| frames.iter().any(|f| names.contains(&base_name(f)));
    let context = if tgid == 0 {
        Context::Idle
    } else if has(KSWAPD) {
        Context::Kswapd
    } else if has(DIRECT_RECLAIM) {
        Context::DirectReclaim
    } else if has(KTHREAD) {
        Context::KernelThread
    } else {
        Context::Process
    };
    (category, context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_a_walk_counts_its_flushes_and_tracers_but_not_the_timing() {
        let walk = ["try_to_unmap_one", "rmap_walk_anon", "try_to_unmap"];
        let flush = ["smp_call_function_many_cond", "flush_tlb_mm_range"];
        let tracer = [
            "bpf_prog_6d2d2f6ac1b3c3a1_rss_stat_btf",
            "__bpf_trace_rss_stat",
        ];
        let with = |inner: &[&'static str]| -> Vec<&'static str> {
            inner.iter().chain(walk.iter()).copied().collect()
        };
        assert!(within_walk(&walk));
        assert!(within_walk(&with(&flush)));
        assert!(within_walk(&with(&tracer)));
        // Direct timing's own programs and trampolines on a timed walk.
        assert!(!within_walk(&[
            "bpf_prog_0123456789abcdef_rmap_fentry_1",
            "bpf_trampoline_6442453466",
            "try_to_unmap",
        ]));
        assert!(!within_walk(&[
            "bpf_trampoline_6442453466",
            "folio_referenced"
        ]));
        assert!(!within_walk(&["shrink_folio_list", "shrink_lruvec"]));
        assert!(!within_walk(&[]));
    }

    /// Stacks captured on the development VM (kernel 6.18) with
    /// `VMSCOPE_DUMP_STACKS`, one per paragraph: a `# tgid comm count` line,
    /// then frames innermost first.
    fn fixture(name: &str) -> Vec<(u32, String, Vec<String>)> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/stacks")
            .join(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        crate::source::rmap::sampler::parse_dump(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .into_iter()
            .map(|s| (s.tgid, s.comm, s.frames))
            .collect()
    }

    fn classify_all(name: &str) -> Vec<(Category, Context, Vec<String>)> {
        fixture(name)
            .into_iter()
            .map(|(tgid, _, frames)| {
                let f: Vec<&str> = frames.iter().map(String::as_str).collect();
                let (cat, ctx) = classify(&f, tgid);
                (cat, ctx, frames)
            })
            .collect()
    }

    #[test]
    fn no_function_is_in_two_rules() {
        let mut seen = std::collections::BTreeMap::new();
        for r in RULES {
            for f in r.functions {
                if let Some(prev) = seen.insert(*f, r.category) {
                    panic!("{f} is in both {prev:?} and {:?}", r.category);
                }
            }
        }
    }

    #[test]
    fn compiler_suffixes_and_module_names_are_dropped() {
        assert_eq!(base_name("shrink_folio_list.isra.0"), "shrink_folio_list");
        assert_eq!(base_name("zram_write_page\t[zram]"), "zram_write_page");
        assert_eq!(base_name("folio_referenced"), "folio_referenced");
    }

    #[test]
    fn try_to_unmap_flush_dirty_is_a_tlb_flush_not_an_rmap_walk() {
        let f = [
            "smp_call_function_many_cond",
            "on_each_cpu_cond_mask",
            "native_flush_tlb_multi",
            "arch_tlbbatch_flush",
            "try_to_unmap_flush_dirty",
            "shrink_folio_list",
            "try_to_free_mem_cgroup_pages",
        ];
        assert_eq!(
            classify(&f, 42),
            (Category::TlbFlush, Context::DirectReclaim)
        );
    }

    #[test]
    fn rmap_entries_removed_by_a_walk_are_the_walk() {
        let f = [
            "folio_remove_rmap_ptes",
            "try_to_unmap_one",
            "rmap_walk_anon",
            "try_to_unmap",
            "shrink_folio_list",
            "kswapd",
        ];
        assert_eq!(classify(&f, 42), (Category::RmapWalk, Context::Kswapd));
        let zap = [
            "folio_remove_rmap_ptes",
            "zap_pte_range",
            "unmap_vmas",
            "exit_mmap",
        ];
        assert_eq!(classify(&zap, 42).0, Category::RmapMaintenance);
    }

    #[test]
    fn user_and_idle_samples() {
        assert_eq!(classify(&[], 42), (Category::User, Context::Process));
        assert_eq!(
            classify(&["pv_native_safe_halt", "default_idle", "do_idle"], 0),
            (Category::Idle, Context::Idle)
        );
    }

    /// Every rule has at least one captured stack it decides, and each such
    /// stack is classified as the rule says (checked against hand-labelled
    /// fixtures: the file name says the expected category).
    #[test]
    fn each_rule_decides_a_real_stack() {
        for (file, want) in [
            ("rmap_walk.txt", Category::RmapWalk),
            ("rmap_maintenance.txt", Category::RmapMaintenance),
            ("tlb_flush.txt", Category::TlbFlush),
            ("reclaim_other.txt", Category::ReclaimOther),
            ("fault_other.txt", Category::FaultOther),
            ("idle.txt", Category::Idle),
            ("tracing.txt", Category::Tracing),
            ("kernel_other.txt", Category::KernelOther),
        ] {
            let all = classify_all(file);
            assert!(!all.is_empty(), "{file} has no stacks");
            for (cat, _, frames) in &all {
                assert_eq!(*cat, want, "{file}: {frames:#?}");
            }
        }
    }

    #[test]
    fn memcg_reclaim_under_a_fault_is_direct_reclaim_context() {
        let all = classify_all("rmap_walk.txt");
        let direct = all
            .iter()
            .filter(|(_, ctx, f)| {
                f.iter()
                    .any(|x| base_name(x) == "try_to_free_mem_cgroup_pages")
                    && *ctx == Context::DirectReclaim
            })
            .count();
        assert!(direct > 0, "no memcg reclaim stack among {all:#?}");
        for (_, ctx, f) in &all {
            if f.iter()
                .any(|x| base_name(x) == "try_to_free_mem_cgroup_pages")
            {
                assert_eq!(*ctx, Context::DirectReclaim, "{f:#?}");
            }
        }
    }

    /// The whole dump of a 64-sharer run under a memcg limit with zram
    /// (stacks seen at least 3 times).
    #[test]
    fn memcg_zram_reclaim_dump_sorts_walks_flushes_and_reclaim_apart() {
        let stacks = fixture("memcg_zram_sharers64.txt");
        let mut weight: std::collections::BTreeMap<Category, u64> = Default::default();
        let counts: std::collections::HashMap<String, u64> = {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/stacks/memcg_zram_sharers64.txt");
            let text = std::fs::read_to_string(path).expect("fixture");
            crate::source::rmap::sampler::parse_dump(&text)
                .expect("parses")
                .into_iter()
                .map(|d| (d.frames.join("/"), d.count))
                .collect()
        };
        for (tgid, _, frames) in &stacks {
            let f: Vec<&str> = frames.iter().map(String::as_str).collect();
            let (cat, ctx) = classify(&f, *tgid);
            *weight.entry(cat).or_default() += counts[&frames.join("/")];
            let has = |n: &str| f.iter().any(|x| base_name(x) == n);
            if has("try_to_free_mem_cgroup_pages") {
                assert_eq!(ctx, Context::DirectReclaim, "{f:#?}");
            }
            // A walk on the stack is never "reclaim other" or "fault other":
            // only the walk itself, a flush it sent, or a tracer inside it.
            if has("folio_referenced") || has("try_to_unmap") {
                assert!(
                    matches!(
                        cat,
                        Category::RmapWalk | Category::TlbFlush | Category::Tracing
                    ),
                    "{cat:?}: {f:#?}"
                );
            }
        }
        for cat in [
            Category::RmapWalk,
            Category::TlbFlush,
            Category::ReclaimOther,
            Category::FaultOther,
        ] {
            assert!(weight.get(&cat).copied().unwrap_or(0) > 0, "{weight:?}");
        }
    }

    #[test]
    fn tlb_fixture_has_the_ipi_sending_path_from_reclaim() {
        let all = classify_all("tlb_flush.txt");
        assert!(
            all.iter().any(|(_, _, f)| {
                let has = |n: &str| f.iter().any(|x| base_name(x) == n);
                has("smp_call_function_many_cond")
                    && has("arch_tlbbatch_flush")
                    && has("try_to_unmap_flush_dirty")
                    && has("shrink_folio_list")
            }),
            "{all:#?}"
        );
    }
}
