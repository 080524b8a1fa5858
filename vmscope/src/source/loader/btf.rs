//! The BTF variants of the hooks: whether BTF tracepoints can be used, the
//! kernel-structure offsets some of them read, and loading and attaching
//! them.

use anyhow::anyhow;
use aya::{Ebpf, EbpfLoader, programs::BtfTracePoint};
use vmscope_common::off;

use crate::source::kernel::errors::one_line;

use super::specs::Spec;
use super::{ACCOUNT_PROBE, DISABLE_ENV, SwapAttach};

/// Whether the classic tracepoints' BTF variants can be tried, or why not.
pub(super) fn btf_tracepoints_usable(disabled: &[String]) -> Result<(), String> {
    if disabled.iter().any(|d| d == "tp_btf") {
        return Err(format!("tp_btf disabled by {DISABLE_ENV}"));
    }
    crate::source::kernel::btf::aya_vmlinux().map(drop)
}

/// aya's loader, with the kernel's BTF parsed. It is parsed twice, at
/// once: by aya's loader, which parses its own copy and cannot be handed
/// one, and by vmscope for field offsets and for the ids aya loads BTF
/// programs with ([`aya_vmlinux`](crate::source::kernel::btf::aya_vmlinux)).
pub(super) fn parse_btf_at_once() -> anyhow::Result<EbpfLoader<'static>> {
    std::thread::scope(|s| {
        let loader = s.spawn(EbpfLoader::new);
        drop(crate::source::kernel::btf::aya_vmlinux());
        loader.join()
    })
    .map_err(|_| anyhow!("parsing the kernel's BTF panicked"))
}

/// The `task_struct` offsets the fault books, the exit hook and the pid
/// reuse check read, where this kernel's BTF has them.
pub(super) fn task_struct_offsets(
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
pub(super) struct BtfVariants {
    pub(super) tracepoints: Result<(), String>,
    pub(super) fork: Result<(), String>,
    pub(super) shrink: Result<(), String>,
    pub(super) write: Result<(), String>,
    pub(super) swap: Result<(), String>,
    /// The page-cache removal program reads the folio, its memory cgroup
    /// and the current task's flags.
    pub(super) removal: Result<(), String>,
}

impl BtfVariants {
    pub(super) fn new(
        offsets: &mut [Option<u32>; off::COUNT],
        disabled: &[String],
        swap: SwapAttach,
    ) -> Self {
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
        let removal = tracepoints
            .clone()
            .and_then(|()| cache_removal_offsets(offsets));
        Self {
            tracepoints,
            fork,
            shrink,
            write,
            swap,
            removal,
        }
    }

    /// What decides a [`SPECS`] row's BTF variant.
    pub(super) fn for_spec(&self, s: &Spec) -> &Result<(), String> {
        match s.btf_prog {
            Some("sched_process_fork_btf") => &self.fork,
            Some("mm_vmscan_lru_shrink_inactive_btf") => &self.shrink,
            Some("mm_vmscan_write_folio_btf") => &self.write,
            Some("mm_filemap_delete_from_page_cache_btf") => &self.removal,
            _ => &self.tracepoints,
        }
    }
}

/// The BTF LRU program reads `struct reclaim_stat`'s counters.
pub(super) fn reclaim_stat_offsets(offsets: &mut [Option<u32>; off::COUNT]) -> Result<(), String> {
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
pub(super) fn folio_flag_offsets(offsets: &mut [Option<u32>; off::COUNT]) -> Result<(), String> {
    let btf = crate::source::kernel::btf::Btf::vmlinux()?;
    let flags = btf
        .field("folio", "flags")
        .or_else(|_| btf.field("page", "flags"))?;
    offsets[off::FOLIO_FLAGS] = Some(flags.offset);
    offsets[off::PG_SWAPBACKED] = Some(btf.page_flag("PG_swapbacked")?);
    Ok(())
}

/// The page-cache removal program reads a folio's flags, size and memory
/// cgroup (`memcg_data`, then the cgroup's id as v1 attribution reads it),
/// and the current task's flags (`PF_MEMALLOC`: an eviction).
pub(super) fn cache_removal_offsets(offsets: &mut [Option<u32>; off::COUNT]) -> Result<(), String> {
    let btf = crate::source::kernel::btf::Btf::vmlinux()?;
    folio_flag_offsets(offsets)?;
    let memcg = btf
        .field("folio", "memcg_data")
        .map_err(|e| format!("{e} (a kernel without memory cgroups)"))?;
    let nr = btf
        .field("folio", "_nr_pages")
        .or_else(|_| btf.field("folio", "_folio_nr_pages"))
        .map_err(|e| format!("{e}: a large folio's page count is not known"))?;
    if nr.size != 4 || memcg.size != 8 {
        return Err(format!(
            "folio's page count is {} bytes and memcg_data {} here, not 4 and 8",
            nr.size, memcg.size
        ));
    }
    let flags = btf.field("task_struct", "flags")?;
    offsets[off::TASK_FLAGS] = Some(flags.offset);
    offsets[off::FOLIO_MEMCG_DATA] = Some(memcg.offset);
    offsets[off::FOLIO_NR_PAGES] = Some(nr.offset);
    offsets[off::PG_HEAD] = Some(btf.page_flag("PG_head")?);
    offsets[off::MEMCG_CSS] = Some(btf.field("mem_cgroup", "css")?.offset);
    cgroup_id_chain(&btf, offsets)
}

/// `cgroup_subsys_state.cgroup->kn->id`: a memory cgroup's id, read by v1
/// attribution and by the page-cache removal program.
pub(super) fn cgroup_id_chain(
    btf: &crate::source::kernel::btf::Btf,
    offsets: &mut [Option<u32>; off::COUNT],
) -> Result<(), String> {
    let id = btf.field("kernfs_node", "id")?;
    if id.size != 8 {
        return Err(format!(
            "kernfs_node.id is {} bytes, not 8 (a kernel before 5.5)",
            id.size
        ));
    }
    offsets[off::CSS_CGROUP] = Some(btf.field("cgroup_subsys_state", "cgroup")?.offset);
    offsets[off::CGROUP_KN] = Some(btf.field("cgroup", "kn")?.offset);
    offsets[off::KN_ID] = Some(id.offset);
    Ok(())
}

/// Loads one BTF tracepoint program for `event`.
pub(super) fn load_btf<'a>(
    ebpf: &'a mut Ebpf,
    prog: &str,
    event: &str,
) -> Result<&'a mut BtfTracePoint, String> {
    let btf = crate::source::kernel::btf::aya_vmlinux()?;
    let p: &mut BtfTracePoint = crate::source::ebpf::program(ebpf, prog)?;
    p.load(event, &btf)
        .map_err(|e| format!("loading {prog}: {}", one_line(&e)))?;
    Ok(p)
}

/// Loads and attaches one BTF tracepoint program.
pub(super) fn attach_btf(ebpf: &mut Ebpf, prog: &str, event: &str) -> Result<(), String> {
    load_btf(ebpf, prog, event)?
        .attach()
        .map(drop)
        .map_err(|e| format!("attaching {prog}: {}", one_line(&e)))
}

/// The offsets the BTF swap program reads, or why it cannot run here.
pub(super) fn rss_btf_offsets(disabled: &[String]) -> Result<Vec<(usize, u32)>, String> {
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
        // Without it (not x86-64), the map is keyed by the mm's address,
        // which the collector's books handle when it is reused.
        (off::MM_CTX_ID, mm_ctx_id(&btf)),
    ])
}

/// `mm_struct.context.ctx_id` where it is a u64 (x86-64), else 0.
fn mm_ctx_id(btf: &crate::source::kernel::btf::Btf) -> u32 {
    btf.field("mm_struct", "context.ctx_id")
        .ok()
        .filter(|f| f.size == 8 && f.offset != 0)
        .map_or(0, |f| f.offset)
}

/// Offsets in `task_struct` the programs read, from the kernel's BTF.
pub(super) struct TaskOffsets {
    /// `min_flt`, with `maj_flt` right after it.
    pub(super) flt: u32,
    pub(super) flags: u32,
    /// `vm_area_struct.vm_file`, for the fault timing's anon/file split.
    pub(super) vma_file: u32,
}

pub(super) fn task_offsets(disabled: &[String]) -> Result<TaskOffsets, String> {
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
