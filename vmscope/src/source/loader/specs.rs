//! The tracepoint hooks vmscope attaches, one [`Spec`] row each, the record
//! fields each reads, and the plan (event name and offsets) made for it.

use vmscope_common::off;

use crate::source::kernel::{format::EventFormat, tracefs};

use super::{
    DISABLE_ENV, LoadOptions, MMAP_LOCK_OFF, SYSCALL_LATENCY_OFF, THP_FAULTS_OFF, check_rss_layout,
};

/// A tracepoint program and the fields it reads.
pub(super) struct Spec {
    pub(super) category: &'static str,
    /// The current name first, then older names of the same event.
    pub(super) names: &'static [&'static str],
    pub(super) prog: &'static str,
    /// (`off::*` index, field name, accepted sizes).
    pub(super) fields: Fields,
    /// The same hook as a BTF tracepoint program, tried first.
    pub(super) btf_prog: Option<&'static str>,
    /// Fields read where the event's record has them (a kernel without
    /// one leaves its offset unset): the classic program then reports more
    /// than the BTF one, so it is tried first, the BTF one standing in
    /// where it cannot attach.
    pub(super) optional: Option<fn(&EventFormat) -> Offsets>,
    /// Why a hook without a BTF variant has none (its reason when it
    /// attaches as the classic tracepoint where tp_btf works).
    pub(super) classic_why: Option<&'static str>,
    /// Why a hook with only a BTF variant has no classic one (`prog` is
    /// then not in the object, and is never attached).
    pub(super) btf_only: Option<&'static str>,
}

impl Spec {
    pub(super) const fn classic_only(mut self, why: &'static str) -> Spec {
        self.classic_why = Some(why);
        self
    }

    pub(super) const fn btf(mut self, prog: &'static str) -> Spec {
        self.btf_prog = Some(prog);
        self
    }

    pub(super) const fn btf_only(mut self, prog: &'static str, why: &'static str) -> Spec {
        self.btf_prog = Some(prog);
        self.btf_only = Some(why);
        self
    }

    pub(super) const fn optional(mut self, fields: fn(&EventFormat) -> Offsets) -> Spec {
        self.optional = Some(fields);
        self
    }
}

pub(super) type Fields = &'static [(usize, &'static str, &'static [u32])];

pub(super) const fn spec(
    category: &'static str,
    name: &'static [&'static str],
    fields: Fields,
) -> Spec {
    Spec {
        category,
        names: name,
        prog: name[0],
        fields,
        btf_prog: None,
        optional: None,
        classic_why: None,
        btf_only: None,
    }
}

pub(super) const RET: Fields = &[(off::SYS_EXIT_RET, "ret", &[8])];

/// Every tracepoint beyond the page-fault pair, in attach order. The program
/// is named after the event's current name.
pub(super) const SPECS: &[Spec] = &[
    // System-wide too: a new task's fault books open at its fork.
    spec(
        "sched",
        &["sched_process_fork"],
        &[(off::FORK_CHILD_PID, "child_pid", &[4])],
    )
    .btf("sched_process_fork_btf"),
    spec("sched", &["sched_process_exec"], &[]).btf("sched_process_exec_btf"),
    spec("sched", &["sched_process_exit"], &[]).btf("sched_process_exit_btf"),
    spec(
        "syscalls",
        &["sys_enter_madvise"],
        &[
            (off::MADVISE_LEN, "len_in", &[8]),
            (off::MADVISE_BEHAVIOR, "behavior", &[8]),
        ],
    ),
    spec("syscalls", &["sys_exit_madvise"], RET),
    spec(
        "syscalls",
        &["sys_enter_process_madvise"],
        &[(off::PROCESS_MADVISE_BEHAVIOR, "behavior", &[8])],
    ),
    spec("syscalls", &["sys_exit_process_madvise"], RET),
    spec("syscalls", &["sys_enter_munmap"], &[]),
    spec("syscalls", &["sys_exit_munmap"], &[]),
    spec("syscalls", &["sys_enter_mprotect"], &[]),
    spec("syscalls", &["sys_exit_mprotect"], &[]),
    spec("vmscan", &["mm_vmscan_direct_reclaim_begin"], &[])
        .btf("mm_vmscan_direct_reclaim_begin_btf"),
    spec("vmscan", &["mm_vmscan_direct_reclaim_end"], &[]).btf("mm_vmscan_direct_reclaim_end_btf"),
    spec("vmscan", &["mm_vmscan_memcg_reclaim_begin"], &[])
        .btf("mm_vmscan_memcg_reclaim_begin_btf"),
    spec("vmscan", &["mm_vmscan_memcg_reclaim_end"], &[]).btf("mm_vmscan_memcg_reclaim_end_btf"),
    spec("vmscan", &["mm_vmscan_memcg_softlimit_reclaim_begin"], &[])
        .btf("mm_vmscan_memcg_softlimit_reclaim_begin_btf"),
    spec("vmscan", &["mm_vmscan_memcg_softlimit_reclaim_end"], &[])
        .btf("mm_vmscan_memcg_softlimit_reclaim_end_btf"),
    spec("vmscan", &["mm_vmscan_node_reclaim_begin"], &[]).btf("mm_vmscan_node_reclaim_begin_btf"),
    spec("vmscan", &["mm_vmscan_node_reclaim_end"], &[]).btf("mm_vmscan_node_reclaim_end_btf"),
    spec("vmscan", &["mm_shrink_slab_start"], &[]).btf("mm_shrink_slab_start_btf"),
    spec("vmscan", &["mm_shrink_slab_end"], &[]).btf("mm_shrink_slab_end_btf"),
    spec(
        "vmscan",
        &["mm_vmscan_kswapd_wake"],
        &[(off::KSWAPD_WAKE_NID, "nid", &[4])],
    )
    .btf("mm_vmscan_kswapd_wake_btf"),
    spec(
        "vmscan",
        &["mm_vmscan_kswapd_sleep"],
        &[(off::KSWAPD_SLEEP_NID, "nid", &[4])],
    )
    .btf("mm_vmscan_kswapd_sleep_btf"),
    spec(
        "vmscan",
        &["mm_vmscan_lru_shrink_inactive"],
        &[
            (off::LRU_INACTIVE_SCANNED, "nr_scanned", &[8]),
            (off::LRU_INACTIVE_RECLAIMED, "nr_reclaimed", &[8]),
            (off::LRU_INACTIVE_DIRTY, "nr_dirty", &[8]),
            (off::LRU_INACTIVE_WRITEBACK, "nr_writeback", &[8]),
            (off::LRU_INACTIVE_IMMEDIATE, "nr_immediate", &[8]),
            (off::LRU_INACTIVE_UNMAP_FAIL, "nr_unmap_fail", &[8]),
        ],
    )
    .btf("mm_vmscan_lru_shrink_inactive_btf"),
    spec(
        "vmscan",
        &["mm_vmscan_lru_shrink_active"],
        &[
            (off::LRU_ACTIVE_TAKEN, "nr_taken", &[8]),
            (off::LRU_ACTIVE_DEACTIVATED, "nr_deactivated", &[8]),
        ],
    )
    .btf("mm_vmscan_lru_shrink_active_btf"),
    spec(
        "vmscan",
        &["mm_vmscan_write_folio", "mm_vmscan_writepage"],
        &[(off::WRITE_FOLIO_FLAGS, "reclaim_flags", &[4])],
    )
    .btf("mm_vmscan_write_folio_btf"),
    spec(
        "kmem",
        &["rss_stat"],
        &[
            (off::RSS_MM_ID, "mm_id", &[4]),
            (off::RSS_CURR, "curr", &[4]),
            (off::RSS_MEMBER, "member", &[4]),
            (off::RSS_SIZE, "size", &[8]),
        ],
    ),
    spec(
        "tlb",
        &["tlb_flush"],
        &[
            (off::TLB_REASON, "reason", &[4]),
            (off::TLB_PAGES, "pages", &[8]),
        ],
    )
    .btf("tlb_flush_btf"),
    spec(
        "writeback",
        &["balance_dirty_pages"],
        &[(off::BDP_PAUSE, "pause", &[8])],
    )
    .classic_only(
        "classic tracepoint by design, not tp_btf: its record gives each pause in ms, the BTF \
         arguments in jiffies, whose length the kernel does not publish",
    ),
    spec(
        "compaction",
        &["mm_compaction_try_to_compact_pages"],
        &[(off::COMPACT_TRY_ORDER, "order", &[4])],
    )
    .classic_only(RARE_CLASSIC),
    spec("compaction", &["mm_compaction_begin"], &[]).classic_only(RARE_CLASSIC),
    spec("filemap", &["mm_filemap_add_to_page_cache"], &[])
        .optional(filemap_fields)
        .classic_only(
            "classic tracepoint by design, not tp_btf: its record gives the folio's order by \
             name where the kernel has it, where the BTF argument is a folio whose layout moves \
             between kernels",
        ),
    spec(
        "filemap",
        &["mm_filemap_get_pages"],
        &[
            (off::FILEMAP_READ_INO, "i_ino", &[8]),
            (off::FILEMAP_READ_DEV, "s_dev", &[4]),
            (off::FILEMAP_READ_INDEX, "index", &[8]),
            (off::FILEMAP_READ_LAST, "last_index", &[8]),
        ],
    )
    .classic_only(
        "classic tracepoint by design, not tp_btf: its record gives the file and page range \
         by name, where the BTF arguments are an address_space whose layout moves between \
         kernels",
    ),
    spec("filemap", &["mm_filemap_delete_from_page_cache"], &[]).btf_only(
        "mm_filemap_delete_from_page_cache_btf",
        "its record names the file and page but not the memory cgroup, which only the \
         folio (the BTF argument) gives",
    ),
    spec(
        "compaction",
        &["mm_compaction_end"],
        &[(off::COMPACT_END_STATUS, "status", &[4])],
    )
    .classic_only(RARE_CLASSIC),
    spec("compaction", &["mm_compaction_deferred"], &[]).classic_only(RARE_CLASSIC),
    spec("compaction", &["mm_compaction_defer_reset"], &[]).classic_only(RARE_CLASSIC),
    spec(
        "compaction",
        &["mm_compaction_kcompactd_wake"],
        &[(off::KCOMPACTD_WAKE_NID, "nid", &[4])],
    )
    .classic_only(RARE_CLASSIC),
    spec(
        "compaction",
        &["mm_compaction_kcompactd_sleep"],
        &[(off::KCOMPACTD_SLEEP_NID, "nid", &[4])],
    )
    .classic_only(RARE_CLASSIC),
    spec("migrate", &["mm_migrate_pages_start"], &[]).classic_only(RARE_CLASSIC),
    spec(
        "migrate",
        &["mm_migrate_pages"],
        &[
            (off::MIGRATE_SUCCEEDED, "succeeded", &[8]),
            (off::MIGRATE_FAILED, "failed", &[8]),
            (off::MIGRATE_REASON, "reason", &[4]),
        ],
    )
    .classic_only(RARE_CLASSIC),
    spec("huge_memory", &["mm_khugepaged_scan_pmd"], &[]).classic_only(RARE_CLASSIC),
    spec(
        "huge_memory",
        &["mm_collapse_huge_page"],
        &[(off::COLLAPSE_STATUS, "status", &[4])],
    )
    .classic_only(RARE_CLASSIC),
    spec(
        "mmap_lock",
        &["mmap_lock_start_locking"],
        &[(off::MMAP_START_WRITE, "write", &[1])],
    )
    .classic_only(MMAP_LOCK_CLASSIC),
    spec(
        "mmap_lock",
        &["mmap_lock_acquire_returned"],
        &[
            (off::MMAP_ACQ_WRITE, "write", &[1]),
            (off::MMAP_ACQ_SUCCESS, "success", &[1]),
            (off::MMAP_ACQ_MM, "mm", &[8]),
        ],
    )
    .classic_only(MMAP_LOCK_CLASSIC),
    spec(
        "mmap_lock",
        &["mmap_lock_released"],
        &[
            (off::MMAP_REL_WRITE, "write", &[1]),
            (off::MMAP_REL_MM, "mm", &[8]),
        ],
    )
    .classic_only(MMAP_LOCK_CLASSIC),
    // Opt-in (`--thp-faults`): it fires on every page fault.
    spec(
        "memcg",
        &["count_memcg_events"],
        &[
            (off::MEMCG_EVENT_ITEM, "item", &[4]),
            (off::MEMCG_EVENT_VAL, "val", &[8]),
        ],
    )
    .btf("count_memcg_events_btf"),
    spec("oom", &["mark_victim"], &[])
        .btf("mark_victim_btf")
        .optional(oom_fields),
    spec("cgroup", &["cgroup_attach_task"], &[])
        .btf("cgroup_attach_task_btf")
        .optional(attach_fields),
    spec("cgroup", &["cgroup_mkdir"], &[])
        .classic_only(RARE_CLASSIC)
        .optional(cgroup_dir_fields),
    spec("cgroup", &["cgroup_rmdir"], &[])
        .classic_only(RARE_CLASSIC)
        .optional(cgroup_dir_fields),
];

pub(super) const RARE_CLASSIC: &str = "classic tracepoint by design, not tp_btf: a rare event (a \
     compaction run, a migration batch, a collapse), and its record's fields are found by name on \
     every kernel while its BTF arguments moved between kernels";

/// The values the compaction-end and collapse records use for success
/// (plus one: 0 leaves the success counters unset).
pub(super) fn success_values(offsets: &mut [Option<u32>; off::COUNT]) {
    for (idx, category, event, symbol) in [
        (
            off::COMPACT_SUCCESS_VALUE,
            "compaction",
            "mm_compaction_end",
            "success",
        ),
        (
            off::COLLAPSE_SUCCESS_VALUE,
            "huge_memory",
            "mm_collapse_huge_page",
            "succeeded",
        ),
    ] {
        offsets[idx] = tracefs::event_symbol(category, event, "status", symbol)
            .and_then(|v| u32::try_from(v + 1).ok());
    }
}

/// The `enum vm_event_item` value huge-page faults are counted under,
/// from the kernel's BTF: without it, or without memory cgroups (whose
/// events the hook reports), the memcg-events hook would count nothing, so
/// it is not attached.
fn thp_fault_item(offsets: &mut [Option<u32>; off::COUNT], plan: &mut HookPlan) {
    if plan.event.is_err() {
        return;
    }
    let memcg = std::fs::read_to_string("/proc/cgroups")
        .is_ok_and(|t| crate::source::kernel::cgroupfs::memory_controller_on(&t));
    if !memcg {
        plan.event = Err(
            "memory cgroups are off in this kernel (no CONFIG_MEMCG, or \
             cgroup_disable=memory), and huge-page faults are counted per process only \
             through them"
                .into(),
        );
        return;
    }
    let item = crate::source::kernel::btf::Btf::vmlinux()
        .map_err(|e| format!("THP_FAULT_ALLOC's value is read from the kernel's BTF: {e}"))
        .and_then(|b| b.vm_event_item("THP_FAULT_ALLOC"));
    match item {
        Ok(v) => offsets[off::THP_FAULT_ALLOC_ITEM] = v.checked_add(1),
        Err(why) => plan.event = Err(why),
    }
}

pub(super) const MMAP_LOCK_CLASSIC: &str = "classic tracepoint by design, not tp_btf: its record's fields \
     are the same on every kernel, its BTF arguments are not (older kernels pass the memcg path)";

/// The `cgroup:cgroup_attach_task` fields by which a moved process's
/// cgroup key is set at the move, and a task moved into a followed cgroup
/// is followed (`record --cgroup`); without them the program still marks
/// every process's cgroup key stale.
pub(super) fn attach_fields(fmt: &EventFormat) -> Offsets {
    const FIELDS: Fields = &[
        (off::ATTACH_DST_ROOT, "dst_root", &[4]),
        (off::ATTACH_PID, "pid", &[4]),
        (off::ATTACH_DST_ID, "dst_id", &[8]),
    ];
    let mut offs = present_fields(fmt, FIELDS);
    offs.extend(data_loc(fmt, "dst_path").map(|at| (off::ATTACH_DST_PATH, at)));
    offs
}

/// `filemap:mm_filemap_add_to_page_cache`'s `order`, where the record has
/// it (6.4 on): without it each event counts one page.
pub(super) fn filemap_fields(fmt: &EventFormat) -> Offsets {
    present_fields(fmt, &[(off::FILEMAP_ADD_ORDER, "order", &[1])])
}

/// The offsets of those of `fields` this kernel's record has as integers
/// of an accepted size; each other one is absent (said at debug level).
pub(super) fn present_fields(fmt: &EventFormat, fields: Fields) -> Offsets {
    fields
        .iter()
        .filter_map(|&(idx, name, sizes)| match fmt.int_field(name, sizes) {
            Ok(f) => Some((idx, f.offset)),
            Err(e) => {
                log::debug!("{e}");
                None
            }
        })
        .collect()
}

/// The offset of `__data_loc` string field `name`'s word, when the record
/// has one.
pub(super) fn data_loc(fmt: &EventFormat, name: &str) -> Option<u32> {
    fmt.field(name)
        .filter(|f| f.data_loc && f.size == 4)
        .map(|f| f.offset)
}

/// The `cgroup:cgroup_mkdir`/`cgroup_rmdir` fields by which a cgroup
/// created or removed is reported; without them the programs report
/// nothing and names come from walking the hierarchy.
pub(super) fn cgroup_dir_fields(fmt: &EventFormat) -> Offsets {
    const FIELDS: Fields = &[
        (off::CGROUP_DIR_ROOT, "root", &[4]),
        (off::CGROUP_DIR_ID, "id", &[8]),
    ];
    let mut offs = present_fields(fmt, FIELDS);
    offs.extend(data_loc(fmt, "path").map(|at| (off::CGROUP_DIR_PATH, at)));
    offs
}

/// The `oom:mark_victim` record's scalar fields (older kernels have only
/// `pid`). The memory figures are in kB on every kernel that has them
/// (`total-vm=%lukB ...` in its print format).
pub(super) const OOM_FIELDS: Fields = &[
    (off::OOM_PID, "pid", &[4]),
    (off::OOM_TOTAL_VM, "total_vm", &[8]),
    (off::OOM_ANON_RSS, "anon_rss", &[8]),
    (off::OOM_FILE_RSS, "file_rss", &[8]),
    (off::OOM_SHMEM_RSS, "shmem_rss", &[8]),
    (off::OOM_UID, "uid", &[4]),
    (off::OOM_PGTABLES, "pgtables", &[8]),
    (off::OOM_SCORE_ADJ, "oom_score_adj", &[2]),
];

/// The offsets of the `oom:mark_victim` fields this kernel's record has
/// (a field of another shape counts as absent), `comm` as a `char[16]`
/// array or a `__data_loc` string.
pub(super) fn oom_fields(fmt: &EventFormat) -> Offsets {
    let mut offs = present_fields(fmt, OOM_FIELDS);
    match fmt.field("comm") {
        Some(f) if f.data_loc && f.size == 4 => {
            offs.extend([(off::OOM_COMM, f.offset), (off::OOM_COMM_DATA_LOC, 1)]);
        }
        Some(f) if f.array_len == Some(16) && f.size == 16 => offs.push((off::OOM_COMM, f.offset)),
        _ => {}
    }
    offs
}

/// `(off::* index, offset)` pairs a probe needs in `OFFSETS`.
pub(super) type Offsets = Vec<(usize, u32)>;

/// The event name a probe will attach to and the offsets it needs, or why
/// it cannot be used.
#[derive(Clone)]
pub(super) struct HookPlan {
    pub(super) probe: String,
    pub(super) event: Result<(&'static str, Offsets), String>,
    /// Why the classic tracepoint cannot be attached although the event
    /// exists (tracefs unreadable): only a BTF variant can be.
    pub(super) classic: Result<(), String>,
    /// Off because the user did not ask for it (an opt-in hook), rather
    /// than because the kernel lacks it.
    pub(super) opted_out: bool,
}

pub(super) fn plan(
    category: &'static str,
    names: &[&'static str],
    fields: Fields,
    optional: Option<fn(&EventFormat) -> Offsets>,
    disabled: &[String],
) -> HookPlan {
    let probe = format!("{category}:{}", names[0]);
    let refused = |why: String| HookPlan {
        probe: probe.clone(),
        event: Err(why.clone()),
        classic: Err(why),
        opted_out: false,
    };
    if names
        .iter()
        .any(|n| disabled.contains(&format!("{category}:{n}")))
    {
        return refused(format!("disabled by {DISABLE_ENV}"));
    }
    let mut unknown = None;
    let found = names
        .iter()
        .find(|n| match tracefs::event_found(category, n) {
            Ok(found) => found,
            Err(why) => {
                unknown.get_or_insert(why);
                false
            }
        });
    let Some(&name) = found else {
        return refused(match unknown {
            Some(why) => why,
            None => format!(
                "tracepoint {category}:{} not found in this kernel",
                names[0]
            ),
        });
    };
    let classic_off = disabled.contains(&format!("classic:{probe}"));
    if let Err(why) = tracefs::tracefs().map(drop).and_then(|()| {
        if classic_off {
            Err(format!(
                "the classic tracepoint is disabled by {DISABLE_ENV}"
            ))
        } else {
            Ok(())
        }
    }) {
        // Known from BTF: usable as a BTF tracepoint, not as a classic one.
        return HookPlan {
            probe,
            event: Ok((name, Vec::new())),
            classic: Err(why),
            opted_out: false,
        };
    }
    let event = (|| {
        if fields.is_empty() && optional.is_none() {
            return Ok((name, Vec::new()));
        }
        let fmt = tracefs::event_format(category, name)?;
        let mut offs = fields
            .iter()
            .map(|&(idx, field, sizes)| {
                fmt.int_field(field, sizes)
                    .map(|f| (idx, f.offset))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        offs.extend(optional.map(|f| f(&fmt)).unwrap_or_default());
        Ok((name, offs))
    })();
    let classic = event.as_ref().map(drop).map_err(Clone::clone);
    HookPlan {
        probe,
        event,
        classic,
        opted_out: false,
    }
}

/// Records a plan's offsets; a slot already holding a different offset makes
/// the plan unusable rather than corrupting another probe's reads.
pub(super) fn claim(offsets: &mut [Option<u32>; off::COUNT], plan: &mut HookPlan) {
    let Ok((_, fields)) = &plan.event else { return };
    for &(idx, o) in fields {
        if let Some(prev) = offsets[idx]
            && prev != o
        {
            plan.event = Err(format!(
                "field offset {o} conflicts with offset {prev} read for another probe"
            ));
            return;
        }
    }
    for &(idx, o) in fields {
        offsets[idx] = Some(o);
    }
}

/// The page-fault tracepoints' plans: they come first, and are attached
/// apart from [`SPECS`] because the perf event stands in when they fail.
pub(super) struct FaultPlans {
    pub(super) user: HookPlan,
    pub(super) kernel: HookPlan,
}

impl FaultPlans {
    pub(super) fn new(offsets: &mut [Option<u32>; off::COUNT], disabled: &[String]) -> Self {
        let ec: Fields = &[(off::PF_ERROR_CODE, "error_code", &[8, 4])];
        let mut user = plan("exceptions", &["page_fault_user"], ec, None, disabled);
        let mut kernel = plan("exceptions", &["page_fault_kernel"], ec, None, disabled);
        claim(offsets, &mut user);
        claim(offsets, &mut kernel);
        Self { user, kernel }
    }
}

/// Whether a syscall event serves only a latency histogram (munmap's and
/// mprotect's), which is opt-in: see [`SYSCALL_LATENCY_OFF`].
pub(super) fn latency_only(event: &str) -> bool {
    let call = event
        .strip_prefix("sys_enter_")
        .or_else(|| event.strip_prefix("sys_exit_"));
    matches!(call, Some("munmap" | "mprotect"))
}

/// A plan for every [`SPECS`] row this load needs, its offsets claimed.
pub(super) fn plan_specs(
    opts: &LoadOptions,
    offsets: &mut [Option<u32>; off::COUNT],
    disabled: &[String],
) -> Vec<(&'static Spec, HookPlan)> {
    let mut plans: Vec<(&Spec, HookPlan)> = SPECS
        .iter()
        .map(|s| {
            let opted_out = match s.category {
                "mmap_lock" if !opts.mmap_lock => Some(MMAP_LOCK_OFF),
                "memcg" if !opts.thp_faults => Some(THP_FAULTS_OFF),
                "syscalls" if !opts.syscall_latency && latency_only(s.names[0]) => {
                    Some(SYSCALL_LATENCY_OFF)
                }
                _ => None,
            };
            if let Some(why) = opted_out {
                let why = why.to_string();
                let off = HookPlan {
                    probe: format!("{}:{}", s.category, s.names[0]),
                    event: Err(why.clone()),
                    classic: Err(why),
                    opted_out: true,
                };
                return (s, off);
            }
            (s, plan(s.category, s.names, s.fields, s.optional, disabled))
        })
        .collect();
    for (s, p) in &mut plans {
        if s.category == "kmem" && s.prog == "rss_stat" {
            check_rss_layout(p);
        }
        if s.category == "memcg" {
            thp_fault_item(offsets, p);
        }
        claim(offsets, p);
    }
    plans
}
