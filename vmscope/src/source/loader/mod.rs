//! Loading vmscope's eBPF object and attaching its programs, with fallbacks.
//! A hook that cannot be attached is recorded as unavailable with the reason;
//! the others go on.

use anyhow::{Context as _, anyhow};
use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, PerCpuArray, RingBuf},
    programs::{
        BtfTracePoint, FEntry, FExit, PerfEvent, TracePoint,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
};

use vmscope_common::{FaultCache, MmSwap, ProcStats, off};

use crate::source::kernel::{cgroupfs, format::EventFormat, kmsg, tracefs};

/// The eBPF object built by build.rs (empty when built with AYA_BUILD_SKIP=1).
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/vmscope"));

/// Comma-separated probe names to treat as absent (for testing fallbacks).
pub const DISABLE_ENV: &str = "VMSCOPE_DISABLE_PROBES";

use crate::model::probes::{FaultSource, ProbeStatus};

/// The swap-attribution probe: on every RSS change, so it waits for a swap
/// device before attaching.
pub const SWAP_PROBE: &str = crate::model::catalogue::probe::SWAP;
pub const DIRTY_PROBE: &str = crate::model::catalogue::probe::DIRTY_THROTTLE;

pub struct LoadOptions {
    /// Restrict per-process statistics to followed pids and their children.
    pub filtered: bool,
    /// When to attach the swap-attribution probe.
    pub swap: SwapAttach,
    /// Kernel-stack samples per second per CPU for the rmap figures (0: no
    /// sampling).
    pub sample_hz: u32,
    /// Attach the mmap_lock probes (opt-in: see [`MMAP_LOCK_OFF`]).
    pub mmap_lock: bool,
    /// Where rmap functions are timed directly, time the maintenance
    /// functions too (they run on every fault, fork and unmap).
    pub rmap_maintenance: bool,
}

/// Why the mmap_lock probes are not attached unless asked for.
pub const MMAP_LOCK_OFF: &str =
    "off by default (it costs lock-heavy programs; docs/cost.md): --mmap-lock turns it on";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapAttach {
    /// When a swap device is active (now or later).
    Auto,
    /// Now, whatever the swap devices (benchmarks).
    Always,
    /// Never (benchmarks: the cost without it).
    Never,
    /// Now, as the classic tracepoint even where the BTF one would do
    /// (benchmarks: what the BTF variant saves).
    AlwaysClassic,
}

/// Loaded programs and the maps the collector reads.
pub struct Loaded {
    _ebpf: Ebpf,
    /// One entry: every counter.
    pub counters: PerCpuArray<MapData, vmscope_common::CounterSlots>,
    /// An entry per histogram: its buckets and sum.
    pub hists: PerCpuArray<MapData, vmscope_common::HistSlot>,
    pub procs: HashMap<MapData, u32, ProcStats>,
    /// Swap traffic per address space (see the eBPF `swap` module).
    pub mms: HashMap<MapData, u64, MmSwap>,
    /// Fault counts not yet moved into `procs`, per CPU.
    pub fault_cache: PerCpuArray<MapData, FaultCache>,
    tracked: HashMap<MapData, u32, u32>,
    /// Slot 1 is ours to bump after each addition to `tracked`.
    track_epoch: Array<MapData, u64>,
    pub probes: Vec<ProbeStatus>,
    pub fault_source: FaultSource,
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    /// The swap probe's plan while it waits for a swap device.
    pending_swap: Option<Plan>,
    /// Whether the swap probe can be a BTF tracepoint, or why not.
    swap_btf: Result<(), String>,
    /// The rmap figures' probes (stack sampling or direct timing), when
    /// attached.
    pub rmap: Option<crate::source::rmap::Rmap>,
    /// OOM victims' records (`OomVictim`), filled by the classic
    /// `oom:mark_victim` program.
    pub oom_victims: Option<RingBuf<MapData>>,
    /// The kernel log, which names the limit each OOM kill answered
    /// (`kmsg`), or why it cannot be read. Opened with the OOM probe.
    pub kernel_log: Result<kmsg::KernelLog, String>,
    /// The hierarchy processes are keyed by (see `cgroup_offsets`), or why
    /// there is no cgroup attribution.
    pub cgroups: Result<cgroupfs::Hierarchy, String>,
    /// The cgroup a `--cgroup` recording follows, by path (`cgroup.rs`).
    scope_path: Array<MapData, vmscope_common::ScopePath>,
    /// Cgroups created and removed (`CgroupEvent`), from the
    /// `cgroup_mkdir`/`cgroup_rmdir` programs.
    pub cgroup_events: Option<RingBuf<MapData>>,
}

impl Loaded {
    /// Follows `pid` (and, through the fork hook, its future children).
    pub fn track(&mut self, pid: u32) -> anyhow::Result<()> {
        self.tracked
            .insert(pid, 1, 0)
            .with_context(|| format!("adding pid {pid} to the followed set"))?;
        // The fault path rechecks a cached out-of-scope process only when
        // the epoch changes.
        let epoch = self.track_epoch.get(&1, 0).unwrap_or(0);
        self.track_epoch
            .set(1, epoch.wrapping_add(1), 0)
            .context("bumping the followed set's epoch")
    }

    /// Follows cgroup `path` (below the hierarchy's root) and every cgroup
    /// below it: a task moved into one joins the followed set.
    pub fn scope_path(&mut self, path: &str) -> anyhow::Result<()> {
        // As the kernel writes paths: no empty or `.` parts, no trailing
        // slash but the root's.
        let parts: Vec<&str> = path
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        let path = &format!("/{}", parts.join("/"));
        let bytes = path.as_bytes();
        if bytes.len() >= vmscope_common::SCOPE_PATH_BYTES {
            anyhow::bail!(
                "cgroup path {path} is longer than {} bytes",
                vmscope_common::SCOPE_PATH_BYTES - 1
            );
        }
        let mut v = vmscope_common::ScopePath {
            len: bytes.len() as u64,
            path: [0; vmscope_common::SCOPE_PATH_BYTES],
        };
        v.path[..bytes.len()].copy_from_slice(bytes);
        self.scope_path
            .set(0, v, 0)
            .with_context(|| format!("setting the followed cgroup to {path}"))
    }

    /// Tasks ever added to the followed set, by the fork hook and by
    /// [`Self::track`].
    pub fn tracked_added(&self) -> u64 {
        let slot = |i| self.track_epoch.get(&i, 0).unwrap_or(0);
        slot(0) + slot(1)
    }

    /// Attaches the deferred swap probe once a swap device is active.
    /// Returns whether it attached now.
    pub fn poll_swap(&mut self) -> bool {
        if self.pending_swap.is_none() || !swap_active() {
            return false;
        }
        let Some(plan) = self.pending_swap.take() else {
            return false;
        };
        let status = attach_swap(&mut self._ebpf, plan, &self.swap_btf);
        let attached = status.attached;
        if !attached {
            log::warn!(
                "{SWAP_PROBE} unavailable: {}",
                status.reason.as_deref().unwrap_or("unknown")
            );
        }
        if let Some(slot) = self.probes.iter_mut().find(|p| p.probe == SWAP_PROBE) {
            *slot = status;
        }
        attached
    }

    /// Forwards pending eBPF-side diagnostics to the `log` crate.
    pub fn flush_logs(&mut self) {
        if let Some(l) = self.logger.as_mut() {
            l.flush();
        }
    }
}

/// Whether any swap device is active.
pub fn swap_active() -> bool {
    !crate::source::kernel::system::swap_devices().is_empty()
}

/// The swap probe reads its fields with one copy; every kernel with the
/// event lays them out as `mm_id, curr, member, <pad>, size`.
fn check_rss_layout(plan: &mut Plan) {
    if plan.classic.is_err() {
        return;
    }
    let Ok((_, offs)) = &plan.event else { return };
    let at = |idx| offs.iter().find(|(i, _)| *i == idx).map(|&(_, o)| o);
    let base = at(off::RSS_MM_ID).unwrap_or(0);
    let expected = [
        (off::RSS_CURR, base + 4),
        (off::RSS_MEMBER, base + 8),
        (off::RSS_SIZE, base + 16),
    ];
    if expected.iter().any(|&(idx, o)| at(idx) != Some(o)) {
        plan.event = Err(format!(
            "unexpected field layout in kmem:rss_stat (mm_id at {base}, curr {:?}, member {:?}, size {:?})",
            at(off::RSS_CURR),
            at(off::RSS_MEMBER),
            at(off::RSS_SIZE)
        ));
    }
}

/// The swap program for a plan: plain context loads when `mm_id` sits right
/// after the 8-byte common header (the usual layout), else the copy helper.
fn swap_prog(plan: &Plan) -> &'static str {
    match &plan.event {
        Ok((_, offs)) if offs.iter().any(|&(i, o)| i == off::RSS_MM_ID && o == 8) => "rss_stat_std",
        _ => "rss_stat",
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

use crate::source::kernel::errors::one_line;

/// A tracepoint program and the fields it reads.
struct Spec {
    category: &'static str,
    /// The current name first, then older names of the same event.
    names: &'static [&'static str],
    prog: &'static str,
    /// (`off::*` index, field name, accepted sizes).
    fields: Fields,
    /// Only needed when following a process tree.
    filtered_only: bool,
    /// The same hook as a BTF tracepoint program, tried first.
    btf_prog: Option<&'static str>,
    /// Fields read where the event's record has them (a kernel without
    /// one leaves its offset unset): the classic program then reports more
    /// than the BTF one, so it is tried first, the BTF one standing in
    /// where it cannot attach.
    optional: Option<fn(&EventFormat) -> Offsets>,
    /// Why a hook without a BTF variant has none (its reason when it
    /// attaches as the classic tracepoint where tp_btf works).
    classic_why: Option<&'static str>,
}

impl Spec {
    const fn classic_only(mut self, why: &'static str) -> Spec {
        self.classic_why = Some(why);
        self
    }

    const fn btf(mut self, prog: &'static str) -> Spec {
        self.btf_prog = Some(prog);
        self
    }

    const fn optional(mut self, fields: fn(&EventFormat) -> Offsets) -> Spec {
        self.optional = Some(fields);
        self
    }
}

type Fields = &'static [(usize, &'static str, &'static [u32])];

const fn spec(category: &'static str, name: &'static [&'static str], fields: Fields) -> Spec {
    Spec {
        category,
        names: name,
        prog: name[0],
        fields,
        filtered_only: false,
        btf_prog: None,
        optional: None,
        classic_why: None,
    }
}

const RET: Fields = &[(off::SYS_EXIT_RET, "ret", &[8])];

/// Every tracepoint beyond the page-fault pair, in attach order. The program
/// is named after the event's current name.
const SPECS: &[Spec] = &[
    Spec {
        category: "sched",
        names: &["sched_process_fork"],
        prog: "sched_process_fork",
        fields: &[(off::FORK_CHILD_PID, "child_pid", &[4])],
        filtered_only: true,
        btf_prog: Some("sched_process_fork_btf"),
        optional: None,
        classic_why: None,
    },
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
    spec("syscalls", &["sys_enter_mremap"], &[]),
    spec("syscalls", &["sys_exit_mremap"], &[]),
    spec("syscalls", &["sys_enter_brk"], &[]),
    spec("syscalls", &["sys_exit_brk"], &[]),
    spec("syscalls", &["sys_enter_mmap"], &[]),
    spec("syscalls", &["sys_exit_mmap"], &[]),
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

const RARE_CLASSIC: &str = "classic tracepoint by design, not tp_btf: a rare event (a \
     compaction run, a migration batch, a collapse), and its record's fields are found by name on \
     every kernel while its BTF arguments moved between kernels";

/// The values the compaction-end and collapse records use for success
/// (plus one: 0 leaves the success counters unset).
fn success_values(offsets: &mut [Option<u32>; off::COUNT]) {
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

const MMAP_LOCK_CLASSIC: &str = "classic tracepoint by design, not tp_btf: its record's fields \
     are the same on every kernel, its BTF arguments are not (older kernels pass the memcg path)";

/// The `cgroup:cgroup_attach_task` fields by which a task moved into a
/// followed cgroup is followed (`record --cgroup`); without them the
/// program still marks every process's cgroup key stale.
fn attach_fields(fmt: &EventFormat) -> Offsets {
    const FIELDS: Fields = &[
        (off::ATTACH_DST_ROOT, "dst_root", &[4]),
        (off::ATTACH_PID, "pid", &[4]),
    ];
    let mut offs = present_fields(fmt, FIELDS);
    offs.extend(data_loc(fmt, "dst_path").map(|at| (off::ATTACH_DST_PATH, at)));
    offs
}

/// The offsets of those of `fields` this kernel's record has as integers
/// of an accepted size; each other one is absent (said at debug level).
fn present_fields(fmt: &EventFormat, fields: Fields) -> Offsets {
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
fn data_loc(fmt: &EventFormat, name: &str) -> Option<u32> {
    fmt.field(name)
        .filter(|f| f.data_loc && f.size == 4)
        .map(|f| f.offset)
}

/// The `cgroup:cgroup_mkdir`/`cgroup_rmdir` fields by which a cgroup
/// created or removed is reported; without them the programs report
/// nothing and names come from walking the hierarchy.
fn cgroup_dir_fields(fmt: &EventFormat) -> Offsets {
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
const OOM_FIELDS: Fields = &[
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
fn oom_fields(fmt: &EventFormat) -> Offsets {
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
type Offsets = Vec<(usize, u32)>;

/// The event name a probe will attach to and the offsets it needs, or why
/// it cannot be used.
#[derive(Clone)]
struct Plan {
    probe: String,
    event: Result<(&'static str, Offsets), String>,
    /// Why the classic tracepoint cannot be attached although the event
    /// exists (tracefs unreadable): only a BTF variant can be.
    classic: Result<(), String>,
}

fn plan(
    category: &'static str,
    names: &[&'static str],
    fields: Fields,
    optional: Option<fn(&EventFormat) -> Offsets>,
    disabled: &[String],
) -> Plan {
    let probe = format!("{category}:{}", names[0]);
    let refused = |why: String| Plan {
        probe: probe.clone(),
        event: Err(why.clone()),
        classic: Err(why),
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
        return Plan {
            probe,
            event: Ok((name, Vec::new())),
            classic: Err(why),
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
    Plan {
        probe,
        event,
        classic,
    }
}

/// The hooks that attach only as classic tracepoints here (no BTF variant,
/// or none this kernel allows), so they need tracefs; and whether the raw
/// syscall hooks stand in for the syscall events without it.
pub fn classic_only() -> (Vec<String>, bool) {
    let raw = cfg!(target_arch = "x86_64")
        && crate::source::kernel::btf::Btf::vmlinux()
            .is_ok_and(|b| b.has_tracepoint("sys_enter") && b.has_tracepoint("sys_exit"));
    let mut probes: Vec<String> = SPECS
        .iter()
        .filter(|s| s.btf_prog.is_none() && s.prog != "rss_stat")
        .filter(|s| !(raw && s.category == "syscalls"))
        .map(|s| format!("{}:{}", s.category, s.names[0]))
        .collect();
    if rss_btf_offsets(&[]).is_err() {
        probes.push(SWAP_PROBE.into());
    }
    (probes, raw)
}

/// `syscalls:sys_enter_x, syscalls:sys_exit_x, ...` as one
/// `syscalls (x, ...)` entry, the other probes as they are.
pub fn group_syscalls(probes: &[String]) -> String {
    let mut calls: Vec<&str> = Vec::new();
    let mut rest: Vec<&str> = Vec::new();
    for p in probes {
        match p
            .strip_prefix("syscalls:sys_enter_")
            .or_else(|| p.strip_prefix("syscalls:sys_exit_"))
        {
            Some(call) if !calls.contains(&call) => calls.push(call),
            Some(_) => {}
            None => rest.push(p),
        }
    }
    let mut out = Vec::new();
    if !calls.is_empty() {
        out.push(format!("syscalls ({})", calls.join(", ")));
    }
    out.extend(rest.iter().map(|r| r.to_string()));
    out.join(", ")
}

/// The probes that cannot be used, one entry per distinct reason: the
/// probes' names (the syscall events grouped) and the reason. What
/// `record` warns and `top`'s header shows, so 17 hooks refused for one
/// reason read as one line.
pub fn unusable_by_reason(probes: &[ProbeStatus]) -> Vec<(String, String)> {
    let mut by_reason: Vec<(&str, Vec<String>)> = Vec::new();
    // Opt-in probes left off are not "unavailable".
    let opted_out = |p: &ProbeStatus| p.reason.as_deref() == Some(MMAP_LOCK_OFF);
    for p in probes.iter().filter(|p| !p.usable() && !opted_out(p)) {
        let why = p.reason.as_deref().unwrap_or("not attached");
        match by_reason.iter_mut().find(|(r, _)| *r == why) {
            Some((_, names)) => names.push(p.probe.clone()),
            None => by_reason.push((why, vec![p.probe.clone()])),
        }
    }
    by_reason
        .into_iter()
        .map(|(why, names)| (group_syscalls(&names), why.to_string()))
        .collect()
}

/// Records a plan's offsets; a slot already holding a different offset makes
/// the plan unusable rather than corrupting another probe's reads.
fn claim(offsets: &mut [Option<u32>; off::COUNT], plan: &mut Plan) {
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

/// Attaches one planned tracepoint program.
fn attach_planned(ebpf: &mut Ebpf, category: &str, prog: &str, plan: Plan) -> ProbeStatus {
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

/// Whether the classic tracepoints' BTF variants can be tried, or why not.
fn btf_tracepoints_usable(disabled: &[String]) -> Result<(), String> {
    if disabled.iter().any(|d| d == "tp_btf") {
        return Err(format!("tp_btf disabled by {DISABLE_ENV}"));
    }
    crate::source::kernel::btf::aya_vmlinux().map(drop)
}

/// Attaches one planned hook: as a BTF tracepoint where it has such a
/// variant and the kernel allows it, else as the classic tracepoint with
/// the reason.
fn attach_spec(ebpf: &mut Ebpf, s: &Spec, plan: Plan, btf_ok: &Result<(), String>) -> ProbeStatus {
    if s.optional.is_some() {
        return attach_classic_first(ebpf, s, plan, btf_ok);
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

/// Attaches a hook whose classic program reports more than its BTF one
/// (the record's fields): as the classic tracepoint where it can be, else
/// as the BTF one, which only counts, with the reason the rest is missing.
fn attach_classic_first(
    ebpf: &mut Ebpf,
    s: &Spec,
    plan: Plan,
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

/// Loads the object with this kernel's field offsets and attaches every probe
/// it can.
pub fn load(opts: &LoadOptions) -> anyhow::Result<Loaded> {
    let object = object()?;
    let loader = parse_btf_at_once()?;
    // Not fatal: kernels >= 5.11 account BPF memory to the cgroup instead.
    if let Err(e) = raise_memlock() {
        log::debug!("could not raise RLIMIT_MEMLOCK ({e}); fine on kernels >= 5.11");
    }
    let disabled = disabled();
    let mut offsets: [Option<u32>; off::COUNT] = [None; off::COUNT];
    let faults = FaultPlans::new(&mut offsets, &disabled);
    let plans = plan_specs(opts, &mut offsets, &disabled);
    success_values(&mut offsets);
    let task = task_offsets(&disabled);
    task_struct_offsets(&mut offsets, &task);
    let cgroups = cgroup_offsets(&mut offsets, &disabled);
    let btf = BtfVariants::new(&mut offsets, &disabled, opts.swap);
    let raw = raw_syscalls(&plans, &disabled, &btf.tracepoints);
    offsets[off::RAW_SYSCALLS] = raw.as_ref().map(|r| r.mask).ok();
    let mut ebpf = load_object(loader, object, &offsets, opts)?;
    let logger = aya_log::EbpfLogger::init(&mut ebpf)
        .map_err(|e| log::debug!("eBPF logging unavailable: {e}"))
        .ok();

    let mut probes = Vec::new();
    let fault_source = attach_faults(&mut ebpf, &disabled, faults, &mut probes);
    let pending_swap = attach_tracepoints(&mut ebpf, plans, &raw, &btf, opts.swap, &mut probes);
    probes.push(attach_major_faults(&mut ebpf, &disabled));
    attach_fault_books(&mut ebpf, task, &disabled, &mut probes);
    let (rmap, statuses) =
        crate::source::rmap::attach(&mut ebpf, opts.sample_hz, opts.rmap_maintenance, &disabled);
    probes.extend(statuses);
    probes.push(cgroup_status(&cgroups));
    let mut loaded = Loaded::new(
        ebpf,
        probes,
        fault_source,
        logger,
        pending_swap,
        btf.swap,
        rmap,
    )?;
    loaded.cgroups = cgroups;
    loaded.kernel_log = kernel_log(loaded.oom_victims.is_some(), &disabled);
    Ok(loaded)
}

/// How processes are keyed by cgroup: by the cgroup id where the memory
/// controller is on cgroup v2 (or on no hierarchy: the unified one then
/// names the cgroups), by the memory controller's cgroup through this
/// kernel's BTF offsets where it is on a v1 hierarchy.
fn cgroup_offsets(
    offsets: &mut [Option<u32>; off::COUNT],
    disabled: &[String],
) -> Result<cgroupfs::Hierarchy, String> {
    if disabled.iter().any(|d| d == CGROUP_ATTRIBUTION) {
        return Err(format!("disabled with {DISABLE_ENV}={CGROUP_ATTRIBUTION}"));
    }
    let h = cgroupfs::detect()?;
    if h.kind == cgroupfs::Kind::V1Memory {
        let btf = crate::source::kernel::btf::Btf::vmlinux().map_err(|e| {
            format!("the memory controller is on cgroup v1, whose cgroup is read through BTF: {e}")
        })?;
        let field = |s: &str, f: &str| btf.field(s, f).map(|x| x.offset);
        let memory = btf.cgroup_subsys("memory_cgrp_id")?;
        let id = btf.field("kernfs_node", "id")?;
        if id.size != 8 {
            return Err(format!(
                "kernfs_node.id is {} bytes, not 8 (a kernel before 5.5)",
                id.size
            ));
        }
        offsets[off::TASK_CGROUPS] = Some(field("task_struct", "cgroups")?);
        offsets[off::CSS_SET_MEMORY] = Some(field("css_set", "subsys")? + 8 * memory);
        offsets[off::CSS_CGROUP] = Some(field("cgroup_subsys_state", "cgroup")?);
        offsets[off::CGROUP_KN] = Some(field("cgroup", "kn")?);
        offsets[off::KN_ID] = Some(id.offset);
        offsets[off::CGROUP_MODE] = Some(vmscope_common::cgroup_mode::V1_MEMCG);
    } else {
        offsets[off::CGROUP_MODE] = Some(vmscope_common::cgroup_mode::V2);
    }
    offsets[off::CGROUP_HIERARCHY] = u32::try_from(h.id + 1).ok();
    Ok(h)
}

/// The name the kernel log's reading goes by in `VMSCOPE_DISABLE_PROBES`.
pub const KERNEL_LOG: &str = "kernel log";

/// The kernel log, opened at its end, for the OOM kills' limits: only
/// with the OOM kill records it is joined to.
fn kernel_log(oom_records: bool, disabled: &[String]) -> Result<kmsg::KernelLog, String> {
    if disabled.iter().any(|d| d == KERNEL_LOG) {
        return Err(format!(
            "reading the kernel log is disabled with {DISABLE_ENV}={KERNEL_LOG}"
        ));
    }
    if !oom_records {
        return Err("no OOM kill records to join the kernel log to".into());
    }
    kmsg::KernelLog::open()
}

/// The name per-cgroup attribution goes by in the probe list and in
/// `VMSCOPE_DISABLE`.
pub const CGROUP_ATTRIBUTION: &str = crate::model::catalogue::probe::CGROUPS;

fn cgroup_status(h: &Result<cgroupfs::Hierarchy, String>) -> ProbeStatus {
    ProbeStatus {
        probe: CGROUP_ATTRIBUTION.into(),
        method: match h {
            Ok(h) if h.kind == cgroupfs::Kind::V1Memory => "BTF (v1 memcg)",
            Ok(_) => "cgroup id (v2)",
            Err(_) => "none",
        }
        .into(),
        attached: h.is_ok(),
        reason: h.as_ref().err().cloned(),
        deferred: false,
    }
}

/// aya's loader, with the kernel's BTF parsed. It is parsed three times
/// (aya's loader parses its own copy, which cannot be handed one; aya's for
/// BTF program loads; ours for field offsets): at once, on as many CPUs as
/// there are.
fn parse_btf_at_once() -> anyhow::Result<EbpfLoader<'static>> {
    std::thread::scope(|s| {
        let loader = s.spawn(EbpfLoader::new);
        let ours = s.spawn(|| drop(crate::source::kernel::btf::Btf::vmlinux()));
        drop(crate::source::kernel::btf::aya_vmlinux());
        let _ = ours.join();
        loader.join()
    })
    .map_err(|_| anyhow!("parsing the kernel's BTF panicked"))
}

/// The page-fault tracepoints' plans: they come first, and are attached
/// apart from [`SPECS`] because the perf event stands in when they fail.
struct FaultPlans {
    user: Plan,
    kernel: Plan,
}

impl FaultPlans {
    fn new(offsets: &mut [Option<u32>; off::COUNT], disabled: &[String]) -> Self {
        let ec: Fields = &[(off::PF_ERROR_CODE, "error_code", &[8, 4])];
        let mut user = plan("exceptions", &["page_fault_user"], ec, None, disabled);
        let mut kernel = plan("exceptions", &["page_fault_kernel"], ec, None, disabled);
        claim(offsets, &mut user);
        claim(offsets, &mut kernel);
        Self { user, kernel }
    }
}

/// A plan for every [`SPECS`] row this load needs, its offsets claimed.
fn plan_specs(
    opts: &LoadOptions,
    offsets: &mut [Option<u32>; off::COUNT],
    disabled: &[String],
) -> Vec<(&'static Spec, Plan)> {
    let mut plans: Vec<(&Spec, Plan)> = SPECS
        .iter()
        .filter(|s| opts.filtered || !s.filtered_only)
        .map(|s| {
            if s.category == "mmap_lock" && !opts.mmap_lock {
                let why = MMAP_LOCK_OFF.to_string();
                let off = Plan {
                    probe: format!("{}:{}", s.category, s.names[0]),
                    event: Err(why.clone()),
                    classic: Err(why),
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
        claim(offsets, p);
    }
    plans
}

/// The `task_struct` offsets the fault books, the exit hook and the pid
/// reuse check read, where this kernel's BTF has them.
fn task_struct_offsets(
    offsets: &mut [Option<u32>; off::COUNT],
    task: &Result<TaskOffsets, String>,
) {
    if let Ok(t) = task {
        offsets[off::TASK_FLT] = Some(t.flt);
        offsets[off::TASK_FLAGS] = Some(t.flags);
        offsets[off::VMA_FILE] = Some(t.vma_file);
    }
    // The exit hook tells a process's last thread by `signal->live`; both
    // of its programs read it from the current task (without BTF, the
    // leader's exit stands for the process's).
    if let Ok(btf) = crate::source::kernel::btf::Btf::vmlinux()
        && let (Ok(sig), Ok(live)) = (
            btf.field("task_struct", "signal"),
            btf.field("signal_struct", "live"),
        )
        && live.size == 4
    {
        offsets[off::TASK_SIGNAL] = Some(sig.offset);
        offsets[off::SIGNAL_LIVE] = Some(live.offset);
    }
    // And a reused pid's process by its start: after the old entry's birth.
    if let Ok(btf) = crate::source::kernel::btf::Btf::vmlinux()
        && let (Ok(leader), Ok(start)) = (
            btf.field("task_struct", "group_leader"),
            btf.field("task_struct", "start_time"),
        )
        && leader.size == 8
        && start.size == 8
    {
        offsets[off::TASK_GROUP_LEADER] = Some(leader.offset);
        offsets[off::TASK_START_TIME] = Some(start.offset);
    }
}

/// Whether each hook's BTF tracepoint variant can be tried, or why not.
/// Most need only BTF tracepoints allowed; a few also read kernel
/// structures, whose offsets are recorded here.
struct BtfVariants {
    tracepoints: Result<(), String>,
    fork: Result<(), String>,
    shrink: Result<(), String>,
    write: Result<(), String>,
    swap: Result<(), String>,
}

impl BtfVariants {
    fn new(offsets: &mut [Option<u32>; off::COUNT], disabled: &[String], swap: SwapAttach) -> Self {
        let tracepoints = btf_tracepoints_usable(disabled);
        // The BTF fork program reads the child's pid from its task_struct.
        let fork = tracepoints.clone().and_then(|()| {
            let pid = crate::source::kernel::btf::Btf::vmlinux()?.field("task_struct", "pid")?;
            offsets[off::TASK_PID] = Some(pid.offset);
            Ok(())
        });
        let shrink = tracepoints
            .clone()
            .and_then(|()| reclaim_stat_offsets(offsets));
        let write = tracepoints
            .clone()
            .and_then(|()| folio_flag_offsets(offsets));
        let swap = if swap == SwapAttach::AlwaysClassic {
            Err("the classic event was asked for (benchmark)".to_string())
        } else {
            rss_btf_offsets(disabled)
        }
        .map(|pairs| {
            for (idx, v) in pairs {
                offsets[idx] = Some(v);
            }
        });
        Self {
            tracepoints,
            fork,
            shrink,
            write,
            swap,
        }
    }

    /// What decides a [`SPECS`] row's BTF variant.
    fn for_spec(&self, s: &Spec) -> &Result<(), String> {
        match s.btf_prog {
            Some("sched_process_fork_btf") => &self.fork,
            Some("mm_vmscan_lru_shrink_inactive_btf") => &self.shrink,
            Some("mm_vmscan_write_folio_btf") => &self.write,
            _ => &self.tracepoints,
        }
    }
}

/// The BTF LRU program reads `struct reclaim_stat`'s counters.
fn reclaim_stat_offsets(offsets: &mut [Option<u32>; off::COUNT]) -> Result<(), String> {
    let btf = crate::source::kernel::btf::Btf::vmlinux()?;
    for (idx, name) in [
        (off::RSTAT_DIRTY, "nr_dirty"),
        (off::RSTAT_WRITEBACK, "nr_writeback"),
        (off::RSTAT_IMMEDIATE, "nr_immediate"),
        (off::RSTAT_UNMAP_FAIL, "nr_unmap_fail"),
    ] {
        let f = btf.field("reclaim_stat", name)?;
        if f.size != 4 || f.offset >= 128 {
            return Err(format!(
                "reclaim_stat.{name} is {} bytes at {} here, not a 4-byte counter \
                 in its first 128 bytes",
                f.size, f.offset
            ));
        }
        offsets[idx] = Some(f.offset);
    }
    Ok(())
}

/// The BTF write-back program reads a folio's flags.
fn folio_flag_offsets(offsets: &mut [Option<u32>; off::COUNT]) -> Result<(), String> {
    let btf = crate::source::kernel::btf::Btf::vmlinux()?;
    let flags = btf
        .field("folio", "flags")
        .or_else(|_| btf.field("page", "flags"))?;
    offsets[off::FOLIO_FLAGS] = Some(flags.offset);
    offsets[off::PG_SWAPBACKED] = Some(btf.page_flag("PG_swapbacked")?);
    Ok(())
}

/// Loads the object into the kernel with the offsets and settings as its
/// globals.
fn load_object(
    loader: EbpfLoader<'_>,
    object: &[u8],
    offsets: &[Option<u32>; off::COUNT],
    opts: &LoadOptions,
) -> anyhow::Result<Ebpf> {
    let globals: [u32; off::COUNT] = offsets.map(|o| o.unwrap_or(0));
    let filtered: u32 = opts.filtered.into();
    // Rebound so that it may borrow the globals above.
    let mut loader = loader;
    if let Ok(btf) = crate::source::kernel::btf::aya_vmlinux() {
        loader.btf(Some(btf));
    }
    loader
        .override_global("FILTER_ENABLED", &filtered, true)
        .override_global("OFFSETS", &globals, true);
    crate::source::rmap::size_maps(&mut loader, opts.sample_hz);
    loader
        .load(object)
        .context("loading the eBPF object into the kernel")
}

/// Attaches the page-fault hooks: as BTF tracepoints where allowed, else
/// as classic ones, else as the perf software event (counts without the
/// error-code classes). Returns which one counts faults.
fn attach_faults(
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
fn attach_tracepoints(
    ebpf: &mut Ebpf,
    plans: Vec<(&Spec, Plan)>,
    raw: &Result<RawSyscalls, String>,
    btf: &BtfVariants,
    swap: SwapAttach,
    probes: &mut Vec<ProbeStatus>,
) -> Option<Plan> {
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
fn attach_fault_books(
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

impl Loaded {
    /// Takes the maps the collector reads out of the loaded object.
    fn new(
        mut ebpf: Ebpf,
        probes: Vec<ProbeStatus>,
        fault_source: FaultSource,
        logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
        pending_swap: Option<Plan>,
        swap_btf: Result<(), String>,
        rmap: Option<crate::source::rmap::Rmap>,
    ) -> anyhow::Result<Self> {
        let counters = PerCpuArray::try_from(take(&mut ebpf, "COUNTERS")?)?;
        let hists = PerCpuArray::try_from(take(&mut ebpf, "HISTS")?)?;
        let procs = HashMap::try_from(take(&mut ebpf, "PROCS")?)?;
        let mms = HashMap::try_from(take(&mut ebpf, "MMS")?)?;
        let fault_cache = PerCpuArray::try_from(take(&mut ebpf, "FAULT_CACHE")?)?;
        let tracked = HashMap::try_from(take(&mut ebpf, "TRACKED")?)?;
        let track_epoch = Array::try_from(take(&mut ebpf, "TRACK_EPOCH")?)?;
        let scope_path = Array::try_from(take(&mut ebpf, "SCOPE_PATH")?)?;
        let oom_victims = ebpf
            .take_map("OOM_VICTIMS")
            .map(RingBuf::try_from)
            .transpose()?;
        let cgroup_events = ebpf
            .take_map("CGROUP_EVENTS")
            .map(RingBuf::try_from)
            .transpose()?;
        Ok(Self {
            oom_victims,
            cgroup_events,
            kernel_log: Err("not opened".into()),
            cgroups: Err("not set up".into()),
            scope_path,
            _ebpf: ebpf,
            counters,
            hists,
            procs,
            mms,
            fault_cache,
            tracked,
            track_epoch,
            probes,
            fault_source,
            logger,
            pending_swap,
            swap_btf,
            rmap,
        })
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

/// Attaches both page-fault programs as BTF-typed raw tracepoints, or
/// neither.
fn attach_btf_faults(ebpf: &mut Ebpf) -> Result<(), String> {
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
fn attach_swap(ebpf: &mut Ebpf, plan: Plan, btf_ok: &Result<(), String>) -> ProbeStatus {
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
struct RawSyscalls {
    /// `raw_syscall` bits.
    mask: u32,
    /// Why the syscall events cannot be used.
    why: String,
}

impl RawSyscalls {
    fn covers(&self, event: &str) -> bool {
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
fn raw_syscalls(
    plans: &[(&Spec, Plan)],
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
    for (s, _) in plans.iter().filter(|(s, _)| s.category == "syscalls") {
        let name = s.names[0];
        if disabled.contains(&format!("syscalls:{name}")) {
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
fn attach_raw_syscalls(
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

/// Loads one BTF tracepoint program for `event`.
fn load_btf<'a>(
    ebpf: &'a mut Ebpf,
    prog: &str,
    event: &str,
) -> Result<&'a mut BtfTracePoint, String> {
    let btf = crate::source::kernel::btf::aya_vmlinux()?;
    let p: &mut BtfTracePoint = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
    p.load(event, btf)
        .map_err(|e| format!("loading {prog}: {}", one_line(&e)))?;
    Ok(p)
}

/// Loads and attaches one BTF tracepoint program.
fn attach_btf(ebpf: &mut Ebpf, prog: &str, event: &str) -> Result<(), String> {
    load_btf(ebpf, prog, event)?
        .attach()
        .map(drop)
        .map_err(|e| format!("attaching {prog}: {}", one_line(&e)))
}

/// The offsets the BTF swap program reads, or why it cannot run here.
fn rss_btf_offsets(disabled: &[String]) -> Result<Vec<(usize, u32)>, String> {
    if disabled.iter().any(|d| d == "tp_btf") {
        return Err(format!("tp_btf disabled by {DISABLE_ENV}"));
    }
    let btf = crate::source::kernel::btf::Btf::vmlinux()?;
    if btf.field_type_name("mm_struct", "rss_stat").as_deref() != Some("percpu_counter") {
        return Err(
            "mm_struct.rss_stat is not per-CPU counters here (kernels before 6.2), \
                    and only the classic event reports its value"
                .into(),
        );
    }
    let rss = btf.field("mm_struct", "rss_stat")?;
    let pc = btf.struct_size("percpu_counter")?;
    if pc == 0 || rss.size < pc * 3 {
        return Err(format!("unexpected mm_struct.rss_stat size {}", rss.size));
    }
    // Possible CPUs: the per-CPU counters have a part for each.
    let cpus = aya::util::nr_cpus().map_err(|(what, e)| format!("{what}: {e}"))?;
    if cpus as u32 > vmscope_common::MAX_CPUS {
        return Err(format!(
            "{cpus} possible CPUs, more than the {} the BTF program sums over",
            vmscope_common::MAX_CPUS
        ));
    }
    let pptrs = btf.field("bpf_array", "pptrs")?.offset;
    if pptrs >= 1016 {
        return Err(format!(
            "bpf_array.pptrs at {pptrs}, beyond what the program reads"
        ));
    }
    let page = rustix::param::page_size() as u32;
    Ok(vec![
        (
            off::MM_SWAPENTS_COUNTER,
            rss.offset + pc * vmscope_common::MM_SWAPENTS as u32,
        ),
        (
            off::PCPU_COUNT,
            btf.field("percpu_counter", "count")?.offset,
        ),
        (
            off::PCPU_COUNTERS,
            btf.field("percpu_counter", "counters")?.offset,
        ),
        (off::MM_OWNER, btf.field("mm_struct", "owner")?.offset),
        (off::TASK_TGID, btf.field("task_struct", "tgid")?.offset),
        (off::TASK_MM, btf.field("task_struct", "mm")?.offset),
        (off::ARRAY_PPTRS, pptrs),
        (off::NR_CPUS, cpus as u32),
        (off::PAGE_SHIFT, page.trailing_zeros()),
    ])
}

/// The page-fault timing probe (fentry/fexit on `handle_mm_fault`).
pub const FAULT_TIMING_PROBE: &str = crate::model::catalogue::probe::FAULT_TIMING;

/// Times `handle_mm_fault` with fentry/fexit, both or neither, and gives
/// the program `vm_area_struct.vm_file`'s offset.
fn attach_fault_timing(ebpf: &mut Ebpf, disabled: &[String]) -> Result<(), String> {
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
        .load("handle_mm_fault", btf)
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
        p.load("handle_mm_fault", btf)
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

/// The probe that reads the kernel's fault books at context switch.
pub const ACCOUNT_PROBE: &str = crate::model::catalogue::probe::ACCOUNT;

/// Offsets in `task_struct` the programs read, from the kernel's BTF.
struct TaskOffsets {
    /// `min_flt`, with `maj_flt` right after it.
    flt: u32,
    flags: u32,
    /// `vm_area_struct.vm_file`, for the fault timing's anon/file split.
    vma_file: u32,
}

fn task_offsets(disabled: &[String]) -> Result<TaskOffsets, String> {
    if disabled.iter().any(|d| d == ACCOUNT_PROBE) {
        return Err(format!("disabled by {DISABLE_ENV}"));
    }
    let btf = crate::source::kernel::btf::Btf::vmlinux()?;
    let min = btf.field("task_struct", "min_flt")?;
    let maj = btf.field("task_struct", "maj_flt")?;
    if (min.size, maj.size, maj.offset) != (8, 8, min.offset + 8) {
        return Err(format!(
            "task_struct.min_flt/maj_flt are not two adjacent 8-byte counters here \
             (at {} and {}, sizes {} and {})",
            min.offset, maj.offset, min.size, maj.size
        ));
    }
    let flags = btf.field("task_struct", "flags")?;
    if flags.size != 4 {
        return Err(format!(
            "task_struct.flags is {} bytes here, not 4",
            flags.size
        ));
    }
    Ok(TaskOffsets {
        flt: min.offset,
        flags: flags.offset,
        vma_file: btf.field("vm_area_struct", "vm_file")?.offset,
    })
}

/// Attaches the context-switch reader of the kernel's fault books as a BTF
/// tracepoint (no classic fallback: it needs the task pointers).
fn attach_account(ebpf: &mut Ebpf, offsets: Result<(), String>) -> ProbeStatus {
    let result = offsets.and_then(|()| {
        let btf = crate::source::kernel::btf::aya_vmlinux()?;
        let prog = "sched_switch_btf";
        let p: &mut BtfTracePoint = ebpf
            .program_mut(prog)
            .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
        p.load("sched_switch", btf)
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

/// The probe name of the major-fault counter.
pub const MAJOR_FAULTS_PROBE: &str = crate::model::catalogue::probe::MAJOR_FAULTS;

fn attach_major_faults(ebpf: &mut Ebpf, disabled: &[String]) -> ProbeStatus {
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

fn attach_perf_faults(ebpf: &mut Ebpf) -> Result<(), String> {
    attach_perf_sw(
        ebpf,
        "page_fault_perf",
        SoftwareEvent::PageFaults,
        SamplePolicy::Period(1),
    )
    .map(drop)
}

/// Loads `prog` and attaches it to a software perf event on every online
/// CPU with the given sampling (`Period(1)`: every occurrence). Returns how
/// many CPUs it is attached on.
pub(crate) fn attach_perf_sw(
    ebpf: &mut Ebpf,
    prog: &str,
    event: SoftwareEvent,
    policy: SamplePolicy,
) -> Result<usize, String> {
    let p: &mut PerfEvent = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| one_line(&e))?;
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

#[cfg(test)]
mod tests {
    use crate::source::kernel::errors::summarize_verifier;

    use super::{EventFormat, oom_fields};
    use vmscope_common::off;

    const HEAD: &str = "name: mark_victim\nID: 609\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:int pid;\toffset:8;\tsize:4;\tsigned:1;\n";

    fn offsets(rest: &str) -> Vec<(usize, u32)> {
        let fmt = EventFormat::parse(&format!("{HEAD}{rest}")).expect("a format");
        let mut v = oom_fields(&fmt);
        v.sort_unstable();
        v
    }

    #[test]
    fn oom_fields_are_those_the_record_has() {
        // 6.18's record (comm a __data_loc string).
        let new = offsets(
            "\tfield:__data_loc char[] comm;\toffset:12;\tsize:4;\tsigned:0;\n\
             \tfield:unsigned long total_vm;\toffset:16;\tsize:8;\tsigned:0;\n\
             \tfield:unsigned long anon_rss;\toffset:24;\tsize:8;\tsigned:0;\n\
             \tfield:unsigned long file_rss;\toffset:32;\tsize:8;\tsigned:0;\n\
             \tfield:unsigned long shmem_rss;\toffset:40;\tsize:8;\tsigned:0;\n\
             \tfield:uid_t uid;\toffset:48;\tsize:4;\tsigned:0;\n\
             \tfield:unsigned long pgtables;\toffset:56;\tsize:8;\tsigned:0;\n\
             \tfield:short oom_score_adj;\toffset:64;\tsize:2;\tsigned:1;\n",
        );
        let mut want = vec![
            (off::OOM_PID, 8),
            (off::OOM_TOTAL_VM, 16),
            (off::OOM_ANON_RSS, 24),
            (off::OOM_FILE_RSS, 32),
            (off::OOM_SHMEM_RSS, 40),
            (off::OOM_UID, 48),
            (off::OOM_PGTABLES, 56),
            (off::OOM_SCORE_ADJ, 64),
            (off::OOM_COMM, 12),
            (off::OOM_COMM_DATA_LOC, 1),
        ];
        want.sort_unstable();
        assert_eq!(new, want);
        // Older kernels: only the pid; the rest stays unset (absent).
        assert_eq!(offsets(""), [(off::OOM_PID, 8)]);
        // A fixed comm array; a field of another size counts as absent.
        assert_eq!(
            offsets(
                "\tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;\n\
                 \tfield:unsigned int anon_rss;\toffset:28;\tsize:4;\tsigned:0;\n"
            ),
            [(off::OOM_PID, 8), (off::OOM_COMM, 12)]
        );
    }

    #[test]
    fn verifier_logs_are_summarized_by_the_line_that_refused() {
        // As a 6.1 kernel logs a program refused for a different reason.
        let log = "loading p: the BPF_PROG_LOAD syscall returned Invalid argument (os error 22). \
                   Verifier output: reg type unsupported for arg#0 function p#49\n\
                   0: R1=ctx(off=0,imm=0) R10=fp0\n\
                   0: (85) call bpf_get_current_task_btf#158\n\
                   unknown func bpf_get_current_task_btf#158\n\
                   processed 1 insns (limit 1000000) max_states_per_insn 0\n";
        let got = summarize_verifier(log);
        assert_eq!(
            got,
            "loading p: the BPF_PROG_LOAD syscall returned Invalid argument (os error 22). \
             verifier: unknown func bpf_get_current_task_btf#158"
        );
        assert_eq!(summarize_verifier("plain error\nmore"), "plain error");
        assert_eq!(
            summarize_verifier("returned Operation not permitted (os error 1). Verifier output: "),
            "returned Operation not permitted (os error 1)."
        );
    }
}
