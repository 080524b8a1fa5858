//! Loading vmscope's eBPF object and attaching its programs, with fallbacks.
//! A hook that cannot be attached is recorded as unavailable with the reason;
//! the others go on. Here: the load options, the loaded maps and the load
//! itself; the hook table is in `specs`, the BTF variants in `btf`, the
//! attaching in `attach`.

mod attach;
mod btf;
mod specs;

use attach::{
    attach_fault_books, attach_faults, attach_major_faults, attach_swap, attach_tracepoints,
    raw_syscalls, take,
};
use btf::{BtfVariants, parse_btf_at_once, rss_btf_offsets, task_offsets, task_struct_offsets};
use specs::{FaultPlans, HookPlan, SPECS, plan_specs, success_values};

use anyhow::Context as _;
use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, PerCpuArray, RingBuf},
};

use vmscope_common::{FaultCache, MmSwap, ProcStats, off};

use crate::source::kernel::{cgroupfs, kmsg};

pub use crate::source::ebpf::{DISABLE_ENV, object};

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
    /// Time munmap and mprotect calls (opt-in: see [`SYSCALL_LATENCY_OFF`]).
    pub syscall_latency: bool,
    /// Count huge-page faults per process (opt-in: see [`THP_FAULTS_OFF`]).
    pub thp_faults: bool,
}

pub use crate::model::probes::{MMAP_LOCK_OFF, SYSCALL_LATENCY_OFF, THP_FAULTS_OFF};

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
    /// Per thread, the faults the context-switch probe has credited (the
    /// eBPF `account` module's `BOOKS`).
    books: HashMap<MapData, u32, u64>,
    /// Slot 1 is ours to bump after each addition to `tracked`.
    track_epoch: Array<MapData, u64>,
    pub probes: Vec<ProbeStatus>,
    pub fault_source: FaultSource,
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    /// The swap probe's plan while it waits for a swap device.
    pending_swap: Option<HookPlan>,
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
    /// Page-cache pages removed per memory cgroup (the eBPF `pagecache`
    /// module's `CACHE_REMOVALS`).
    pub cache_removals: HashMap<MapData, u64, vmscope_common::CacheRemovals>,
}

/// Where a followed process's counts start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Since {
    /// When it is followed: a process already running.
    Now,
    /// At its fork: a child vmscope forked and holds before its exec.
    Fork,
}

impl Loaded {
    /// Follows `pid` (and, through the fork hook, its future children).
    /// `Since::Fork` for a child vmscope forked and holds before its exec:
    /// its faults since that fork are its own (its rusage counts them), so
    /// its fault books open at 0, as the fork hook opens a followed
    /// child's; a process already running is counted from now.
    pub fn track(&mut self, pid: u32, since: Since) -> anyhow::Result<()> {
        if since == Since::Fork {
            // BPF_NOEXIST: books already open (its context switch counted
            // it as followed) are right as they stand.
            match self.books.insert(pid, 0, 1) {
                Ok(()) => {}
                Err(aya::maps::MapError::SyscallError(e))
                    if e.io_error.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("opening pid {pid}'s fault books"));
                }
            }
        }
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
        let v = vmscope_common::ScopePath::new(bytes);
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
        crate::source::kernel::btf::release();
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
fn check_rss_layout(plan: &mut HookPlan) {
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
fn swap_prog(plan: &HookPlan) -> &'static str {
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
    if opts.sample_hz > 0 && !disabled.iter().any(|d| d == crate::source::rmap::PROBE) {
        crate::source::rmap::kallsyms::Symbols::prefetch();
    }
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
    syscall_registers(&mut offsets);
    let globals: [u32; off::COUNT] = offsets.map(|o| o.unwrap_or(0));
    let filtered: u32 = opts.filtered.into();
    let (mut ebpf, loader) = load_object(loader, object, &globals, &filtered, opts.sample_hz)?;
    std::thread::scope(|s| {
        // aya's loader keeps its parse of the kernel's BTF, hundreds of
        // thousands of allocations: freed on a thread of its own while the
        // programs load, not in front of them (4 ms here).
        s.spawn(move || drop(loader));
        let logger = aya_log::EbpfLogger::init(&mut ebpf)
            .map_err(|e| log::debug!("eBPF logging unavailable: {e}"))
            .ok();

        let mut probes = Vec::new();
        let fault_source = attach_faults(&mut ebpf, &disabled, faults, &mut probes);
        let pending_swap = attach_tracepoints(&mut ebpf, plans, &raw, &btf, opts.swap, &mut probes);
        probes.push(attach_major_faults(&mut ebpf, &disabled));
        attach_fault_books(&mut ebpf, task, &disabled, &mut probes);
        let (rmap, statuses) = crate::source::rmap::attach(
            &mut ebpf,
            opts.sample_hz,
            opts.rmap_maintenance,
            &disabled,
        );
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
    })
}

/// Where the swap probe finds the syscall a task is in (its saved user
/// registers, through BTF-typed helpers): x86-64's `orig_ax` and `dx`.
/// Elsewhere, or without the kernel's BTF, unset: the program then never
/// calls those helpers (the verifier drops the branch) and takes no drop
/// of swap entries for a zap (docs/counting.md).
fn syscall_registers(offsets: &mut [Option<u32>; off::COUNT]) {
    if cfg!(target_arch = "x86_64") && crate::source::kernel::btf::Btf::vmlinux().is_ok() {
        offsets[off::PT_REGS_SYSCALL_NR] = Some(15 * 8);
        offsets[off::PT_REGS_ARG3] = Some(12 * 8);
    }
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
    if h.kind == cgroupfs::CgroupVersion::V1Memory {
        let btf = crate::source::kernel::btf::Btf::vmlinux().map_err(|e| {
            format!("the memory controller is on cgroup v1, whose cgroup is read through BTF: {e}")
        })?;
        let field = |s: &str, f: &str| btf.field(s, f).map(|x| x.offset);
        let memory = btf.cgroup_subsys("memory_cgrp_id")?;
        self::btf::cgroup_id_chain(&btf, offsets)?;
        offsets[off::TASK_CGROUPS] = Some(field("task_struct", "cgroups")?);
        offsets[off::CSS_SET_MEMORY] = Some(field("css_set", "subsys")? + 8 * memory);
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
            Ok(h) if h.kind == cgroupfs::CgroupVersion::V1Memory => "BTF (v1 memcg)",
            Ok(_) => "cgroup id (v2)",
            Err(_) => "none",
        }
        .into(),
        attached: h.is_ok(),
        reason: h.as_ref().err().cloned(),
        deferred: false,
    }
}

/// Loads the object into the kernel with the offsets and settings as its
/// globals. Returns the loader too, for the caller to free.
fn load_object<'a>(
    mut loader: EbpfLoader<'a>,
    object: &[u8],
    globals: &'a [u32; off::COUNT],
    filtered: &'a u32,
    sample_hz: u32,
) -> anyhow::Result<(Ebpf, EbpfLoader<'a>)> {
    // It relocates with its own parse of the kernel's BTF.
    loader
        .override_global("FILTER_ENABLED", filtered, true)
        .override_global("OFFSETS", globals, true);
    crate::source::rmap::size_maps(&mut loader, sample_hz);
    let ebpf = loader
        .load(object)
        .context("loading the eBPF object into the kernel")?;
    Ok((ebpf, loader))
}

impl Loaded {
    /// Takes the maps the collector reads out of the loaded object.
    fn new(
        mut ebpf: Ebpf,
        probes: Vec<ProbeStatus>,
        fault_source: FaultSource,
        logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
        pending_swap: Option<HookPlan>,
        swap_btf: Result<(), String>,
        rmap: Option<crate::source::rmap::Rmap>,
    ) -> anyhow::Result<Self> {
        let counters = PerCpuArray::try_from(take(&mut ebpf, "COUNTERS")?)?;
        let hists = PerCpuArray::try_from(take(&mut ebpf, "HISTS")?)?;
        let procs = HashMap::try_from(take(&mut ebpf, "PROCS")?)?;
        let mms = HashMap::try_from(take(&mut ebpf, "MMS")?)?;
        let fault_cache = PerCpuArray::try_from(take(&mut ebpf, "FAULT_CACHE")?)?;
        let tracked = HashMap::try_from(take(&mut ebpf, "TRACKED")?)?;
        let books = HashMap::try_from(take(&mut ebpf, "BOOKS")?)?;
        let track_epoch = Array::try_from(take(&mut ebpf, "TRACK_EPOCH")?)?;
        let scope_path = Array::try_from(take(&mut ebpf, "SCOPE_PATH")?)?;
        let cache_removals = HashMap::try_from(take(&mut ebpf, "CACHE_REMOVALS")?)?;
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
            cache_removals,
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
            books,
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

/// The page-fault timing probe (fentry/fexit on `handle_mm_fault`).
pub const FAULT_TIMING_PROBE: &str = crate::model::catalogue::probe::FAULT_TIMING;

/// The probe that reads the kernel's fault books at context switch.
pub const ACCOUNT_PROBE: &str = crate::model::catalogue::probe::ACCOUNT;

/// The probe name of the major-fault counter.
pub const MAJOR_FAULTS_PROBE: &str = crate::model::catalogue::probe::MAJOR_FAULTS;

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

    use super::specs::oom_fields;
    use crate::source::kernel::format::EventFormat;
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
