//! Turns eBPF maps into raw cumulative [`Sample`]s. No formatting here.

use crate::model::process::{MadviseByBehavior, ProcSample};
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::{Instant, SystemTime},
};

use anyhow::Context as _;

use vmscope_common::{
    CacheRemovals, FAULT_CLASSES, FaultCache, HIST_BUCKETS, ProcStats, cache_flags, counter, hist,
    madvise,
};

use crate::{
    model::{
        cgroup::CgroupSample,
        hist::{HistSample, behavior_name},
    },
    procstat,
    source::{
        kernel::{cgroupfs, limits},
        loader::Loaded,
        procfs,
    },
    timefmt,
};

use crate::model::sample::{
    FaultCounters, MM_SWAP_COPIED, MM_SWAP_FREED, MM_SWAP_IN, MM_SWAP_OUT, MM_SWAP_OUT_UNOWNED,
    MadviseCounts, Sample,
};

mod cgroups;
mod levels;
mod oom;
mod swap;

use swap::{MmBooks, SwapSums};

/// Reads samples from loaded probes.
pub struct Collector {
    /// Where `/proc/vmstat` is read (see `sample`).
    vmstat_buf: Vec<u8>,
    start: Instant,
    page_size: u64,
    last: HashMap<u32, ProcSample>,
    /// Each pid's entry's creation time, which tells a reused pid's new
    /// process from the old one.
    born: HashMap<u32, u64>,
    /// Pids whose entries were read a last time and deleted: the next
    /// sample's `exited`.
    ended: Vec<u32>,
    /// Pids whose entries were marked exited at the previous read (with
    /// the entry's birth): pruned at this one.
    exiting: HashMap<u32, u64>,
    /// The cgroup of each process whose entry was deleted lately, with
    /// when: an OOM victim's record can come after its entry is gone, and
    /// its `/proc` files then no longer name its cgroup (see `oom_kill`).
    gone_cgroups: HashMap<u32, (u64, Instant)>,
    proc_pruned: u64,
    /// The largest get_user_pages fault count derived so far, per process
    /// and (key `u32::MAX`) system-wide: see `gup_faults`.
    gup_floor: HashMap<u32, u64>,
    /// The per-mm swap map as last read, and what entries that have since
    /// gone (evicted, or deleted at their owner's exit) had counted: the
    /// sums stay monotonic whatever the map drops.
    mm: MmBooks,
    /// `/proc/vmstat` pgfault and the exception path's system-wide count at
    /// the first sample.
    system_base: Option<(u64, u64)>,
    last_hists: HashMap<u32, HistSample>,
    /// Cgroup names (None: no cgroup attribution).
    names: Option<cgroupfs::Names>,
    /// The cgroups samples listed that are not known to be gone yet, with
    /// when each was first listed.
    listed: HashMap<u64, Instant>,
    /// `CGROUP_EVENTS_LOST` at the last read.
    cgroup_events_lost: u64,
    /// Each memory cgroup's page-cache removals as last read.
    cache_removed: HashMap<u64, CacheRemovals>,
    /// Limit-hit counters, to tell which limit an OOM kill answered.
    limits: limits::LimitWatch,
    /// Container names from the runtimes' state on the host.
    containers: crate::source::containers::ContainerNames,
    /// The swap tiers as last reported.
    tiers: Option<crate::model::tiers::TierSample>,
    /// The THP counts by size as last reported.
    thp_sizes: Option<crate::model::hugepages::ThpSizes>,
    /// Entries read for the last time, for [`Collector::prune`].
    doomed_procs: Vec<u32>,
    doomed_mms: Vec<u64>,
}

/// How often the cgroup hierarchy is walked for removals: where the kernel
/// reports them, only as a safety net.
const WALK_REPORTED: std::time::Duration = std::time::Duration::from_secs(60);
const WALK_UNREPORTED: std::time::Duration = std::time::Duration::from_secs(10);
/// The probes that report cgroups created and removed.
const CGROUP_MKDIR: &str = "cgroup:cgroup_mkdir";
const CGROUP_RMDIR: &str = "cgroup:cgroup_rmdir";

/// Room for `/proc/vmstat` (about 5 KiB on 6.18).
const VMSTAT_BUF: usize = 64 * 1024;

impl Collector {
    pub fn new(start: Instant) -> Self {
        Self {
            vmstat_buf: Vec::new(),
            start,
            page_size: page_size(),
            last: HashMap::new(),
            born: HashMap::new(),
            ended: Vec::new(),
            exiting: HashMap::new(),
            gone_cgroups: HashMap::new(),
            proc_pruned: 0,
            gup_floor: HashMap::new(),
            mm: MmBooks::default(),
            system_base: None,
            last_hists: HashMap::new(),
            doomed_procs: Vec::new(),
            doomed_mms: Vec::new(),
            names: None,
            listed: HashMap::new(),
            cache_removed: HashMap::new(),
            cgroup_events_lost: 0,
            limits: limits::LimitWatch::default(),
            containers: Default::default(),
            tiers: None,
            thp_sizes: None,
        }
    }

    /// Reads the maps, /proc/vmstat and PSI into a sample. Only reads:
    /// attaching is the sampling thread's upkeep, and the entries of
    /// processes that have ended are deleted by [`Collector::prune`]
    /// afterwards. (The stack sampler's counts are drained as they are
    /// read: draining is how that map is read.)
    pub fn sample(&mut self, probes: &mut Loaded) -> anyhow::Result<Sample> {
        let (counters, vmstat) = self.read_instant(probes)?;
        let ProcRead {
            table,
            entries,
            mut cached,
            unsettled,
        } = read_procs(probes)?;
        if self.names.is_none()
            && let Ok(h) = &probes.cgroups
        {
            self.names = Some(cgroupfs::Names::new(h.clone()));
            let all = cgroupfs::below(h, "/");
            self.limits.one_per_kill = h.kind == cgroupfs::CgroupVersion::V2;
            self.limits
                .seed(all.iter().map(|(_, p)| p.as_str()), |p| limits::hits(h, p));
        }
        self.gone_cgroups
            .retain(|_, (_, when)| when.elapsed() < GONE_CGROUP_KEPT);
        let cgroup_of: HashMap<u32, u64> = self
            .gone_cgroups
            .iter()
            .map(|(p, (c, _))| (*p, *c))
            .chain(table.iter().map(|(p, s)| (*p, s.cgroup)))
            .collect();
        let mut exited = std::mem::take(&mut self.ended);
        // A process whose figures this read cannot give is read again
        // before it is let go.
        cached.extend(&unsettled);
        let ending = self.ending(&table, &cached);
        let swap = self.read_mms(probes, &ending)?;
        let accounted = crate::model::probes::probe_usable(
            &probes.probes,
            crate::source::loader::ACCOUNT_PROBE,
        );
        let procs = self.procs(table, &ending, &unsettled, &swap, accounted, &mut exited);
        if let Some(s) = probes.rmap.as_mut() {
            s.forget(&exited);
        }
        let c = |i: u32| counters.get(i as usize).copied().unwrap_or(0);
        let faults = self.system_faults(&c, &vmstat);
        let (hists, stall_ns_by_cpu) = self.changed_hists(probes)?;
        let rmap = probes.rmap.as_mut().map(|s| s.read()).transpose()?;
        let mut oom_kills = self.oom_kills(probes, &cgroup_of);
        // Read before the upkeep forgets the cgroups removed since the
        // last read: their last removals are reported with them.
        let removed = self.cache_removals(probes);
        let mut cgroups_gone = self.cgroup_upkeep(probes, c(counter::CGROUP_EVENTS_LOST));
        let cgroups = self.cgroups(&procs, removed.as_ref(), &mut cgroups_gone);
        self.blame_limits(&mut oom_kills, &cgroups, &mut probes.kernel_log);
        for k in &mut oom_kills {
            k.workload = k
                .cgroup
                .as_deref()
                .and_then(crate::model::identity::Identity::from_path)
                .map(|w| {
                    let name = self.container_name(&w);
                    w.named(name.as_deref())
                });
        }
        Ok(Sample {
            oom_kills,
            cgroups,
            oom_kill_records_lost: c(counter::OOM_RECORDS_LOST),
            working_set: Vec::new(),
            swap_tiers: self.swap_tiers(),
            thp_sizes: self.thp_sizes(),
            rmap,
            counters: named_counters(&c, &swap),
            madvise: madvise_counts(&c),
            hists,
            vmstat,
            psi: procfs::read_psi().ok(),
            cpu: procfs::read_stat(),
            stall_ns_by_cpu,
            elapsed_ns: u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            timestamp: timefmt::rfc3339(SystemTime::now()),
            faults,
            procs,
            // After this read's deletions, like `proc_pruned`.
            proc_entries: entries - ending.len() as u64,
            proc_inserts: c(counter::PROC_INSERTS),
            tracked_full: c(counter::TRACKED_FULL),
            tracked_entries: probes
                .tracked_added()
                .saturating_sub(c(counter::TRACKED_REMOVED)),
            mm_entries: swap.entries,
            mm_inserts: c(counter::MM_INSERTS),
            exited,
            cgroups_gone,
            proc_pruned: self.proc_pruned,
            mm_pruned: self.mm.pruned,
        })
    }

    /// The counters and /proc/vmstat as of one instant, as far as faults
    /// go: the fault-timing counters and pgfault are compared exactly, so
    /// no fault may end between the two reads. The two are read back to
    /// back, and the counters once more after; a fault that ended in
    /// between, on any CPU (ours: a page of code run for the first time;
    /// another process's), shows in the second read, and the pair is taken
    /// again (a few times at most, then the last pair is kept). Both reads
    /// are made once before the first sample, so that their code and
    /// buffers are mapped by then.
    fn read_instant(&mut self, probes: &Loaded) -> anyhow::Result<(Vec<u64>, procstat::Vmstat)> {
        const FAULT_ENDS: [u32; 3] = [
            counter::FAULT_TIMED,
            counter::FAULT_RETRIES,
            counter::FAULT_UNTIMED,
        ];
        if self.vmstat_buf.is_empty() {
            self.vmstat_buf = vec![b' '; VMSTAT_BUF];
            let _ = read_counters(probes)?;
            let _ = procfs::read_vmstat_into(&mut self.vmstat_buf);
        }
        let ends = |c: &[u64]| FAULT_ENDS.map(|i| c.get(i as usize).copied().unwrap_or(0));
        let mut tries = 0;
        loop {
            let counters = read_counters(probes)?;
            let vmstat = procfs::read_vmstat_into(&mut self.vmstat_buf).unwrap_or_default();
            let after = read_counters(probes)?;
            tries += 1;
            if ends(&counters) == ends(&after) || tries == 4 {
                return Ok((counters, vmstat));
            }
        }
    }

    /// Exited processes whose last counts are in `table`: read a last time
    /// at this sample, then deleted. One still held in a CPU's fault cache
    /// waits for the next read (a dead process takes no faults, so no cache
    /// can take it up again). Only those that exited a while ago (or were
    /// already exited at the previous read): the exit hook runs before the
    /// task's last context switch, whose fault books still land in the
    /// entry, microseconds later unless the task is preempted.
    fn ending(&mut self, table: &BTreeMap<u32, ProcStats>, cached: &HashSet<u32>) -> HashSet<u32> {
        let settled = monotonic_ns().saturating_sub(EXIT_SETTLE_NS);
        let ending: HashSet<u32> = table
            .iter()
            .filter(|(pid, st)| {
                st.exited_ns != 0
                    && !cached.contains(pid)
                    && (st.exited_ns < settled || self.exiting.get(pid) == Some(&st.born_ns))
            })
            .map(|(&pid, _)| pid)
            .collect();
        self.exiting = table
            .iter()
            .filter(|(pid, st)| st.exited_ns != 0 && !ending.contains(pid))
            .map(|(&pid, st)| (pid, st.born_ns))
            .collect();
        ending
    }

    /// The processes whose counters changed since the last sample, by pid;
    /// `exited` gains the pids whose process was replaced by a new one.
    /// Those `unsettled` keep their last figures (a process not yet
    /// sampled waits for the next read).
    fn procs(
        &mut self,
        table: BTreeMap<u32, ProcStats>,
        ending: &HashSet<u32>,
        unsettled: &HashSet<u32>,
        swap: &SwapSums,
        accounted: bool,
        exited: &mut Vec<u32>,
    ) -> Vec<ProcSample> {
        let mut procs = Vec::new();
        let mut seen = HashSet::new();
        for (pid, stats) in table {
            seen.insert(pid);
            if self.reused(pid, stats.born_ns) && !exited.contains(&pid) {
                exited.push(pid);
            }
            if unsettled.contains(&pid) {
                continue;
            }
            let (out, inn) = swap.by_tgid.get(&pid).copied().unwrap_or_default();
            let mut p = proc_sample(pid, comm_string(&stats.comm), &stats, out, inn);
            if accounted {
                p.faults.gup = self.gup_faults(pid, stats.accounted_faults, p.faults.exception());
            }
            self.push_changed(&mut procs, p);
            if ending.contains(&pid) {
                if stats.cgroup != 0 {
                    self.gone_cgroups
                        .insert(pid, (stats.cgroup, Instant::now()));
                }
                self.doomed_procs.push(pid);
                self.proc_pruned += 1;
                self.forget(pid);
                self.ended.push(pid);
            }
        }
        // Processes with swap traffic but no other activity while recorded.
        for (&pid, &(out, inn)) in &swap.by_tgid {
            if !seen.contains(&pid) {
                seen.insert(pid);
                let comm = proc_comm(pid);
                let p = proc_sample(pid, comm, &ProcStats::default(), out, inn);
                self.push_changed(&mut procs, p);
            }
        }
        self.vanished(&seen, exited);
        procs.sort_by_key(|p| p.pid);
        procs
    }

    /// Processes whose entries left the map without a last read (evicted
    /// to make room): once the process is gone too, it has ended, and
    /// nothing more is kept of it (else a host's every short-lived process
    /// would stay here, and in the views, for good). One still alive is
    /// kept: its next entry is a new one (see `reused`).
    fn vanished(&mut self, seen: &HashSet<u32>, exited: &mut Vec<u32>) {
        let gone: Vec<u32> = self
            .last
            .keys()
            .filter(|pid| !seen.contains(pid))
            .filter(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
            .copied()
            .collect();
        for pid in gone {
            self.forget(pid);
            if !exited.contains(&pid) {
                exited.push(pid);
            }
        }
    }

    /// Whether `pid`'s entry now belongs to another process than before:
    /// the pid's process exited and another took the pid before its entry
    /// was pruned. The old one's values are final, the new one starts from
    /// zero.
    fn reused(&mut self, pid: u32, born_ns: u64) -> bool {
        if born_ns == 0 {
            return false;
        }
        match self.born.insert(pid, born_ns) {
            Some(b) if b != born_ns => {
                self.forget(pid);
                self.born.insert(pid, born_ns);
                true
            }
            _ => false,
        }
    }

    /// The system-wide fault counters; the get_user_pages part comes from
    /// /proc/vmstat's pgfault, counted from the first sample like the
    /// exception path's counters.
    fn system_faults(
        &mut self,
        c: &impl Fn(u32) -> u64,
        vmstat: &procstat::Vmstat,
    ) -> FaultCounters {
        let mut faults = FaultCounters {
            unclassified: c(counter::FAULT_UNCLASSIFIED),
            ..Default::default()
        };
        for k in 0..FAULT_CLASSES {
            faults.user[k] = c(counter::USER_FAULT_BASE + k as u32);
            faults.kernel[k] = c(counter::KERNEL_FAULT_BASE + k as u32);
        }
        if let Some(pgfault) = vmstat.get("pgfault") {
            let (pg0, exc0) = *self
                .system_base
                .get_or_insert((pgfault, faults.exception()));
            faults.gup = self.gup_faults(
                u32::MAX,
                pgfault.saturating_sub(pg0),
                faults.exception().saturating_sub(exc0),
            );
        }
        faults
    }

    /// Deletes the entries that the last sample read for the last time:
    /// those of processes that have ended, and their per-mm swap entries.
    pub fn prune(&mut self, probes: &mut Loaded) {
        for pid in self.doomed_procs.drain(..) {
            // Gone already is fine: evicted meanwhile.
            let _ = probes.procs.remove(&pid);
        }
        for key in self.doomed_mms.drain(..) {
            let _ = probes.mms.remove(&key);
        }
    }

    /// Drops what is kept about `pid`'s process, which has ended.
    fn forget(&mut self, pid: u32) {
        self.last.remove(&pid);
        self.born.remove(&pid);
        self.gup_floor.remove(&pid);
        self.mm.gone.by_tgid.remove(&pid);
    }
}

/// The catalogue's counters by key, and the per-mm swap sums named like
/// them.
fn named_counters(c: &impl Fn(u32) -> u64, swap: &SwapSums) -> BTreeMap<String, u64> {
    let mut named: BTreeMap<String, u64> = crate::model::catalogue::COUNTERS
        .iter()
        .filter_map(|k| Some((k.key.to_string(), c(k.slot?))))
        .collect();
    named.insert(MM_SWAP_OUT.into(), swap.out);
    named.insert(MM_SWAP_IN.into(), swap.inn);
    named.insert(MM_SWAP_FREED.into(), swap.freed);
    named.insert(MM_SWAP_COPIED.into(), swap.copied);
    named.insert(MM_SWAP_OUT_UNOWNED.into(), swap.unowned_out);
    named
}

/// madvise per behaviour, the ones called at least once.
fn madvise_counts(c: &impl Fn(u32) -> u64) -> Vec<MadviseCounts> {
    (0..madvise::SLOTS)
        .map(|slot| MadviseCounts {
            behavior: behavior_name(slot),
            calls: c(counter::MADVISE_CALLS_BASE + slot),
            bytes: c(counter::MADVISE_BYTES_BASE + slot),
            errors: c(counter::MADVISE_ERRORS_BASE + slot),
        })
        .filter(|m| m.calls > 0)
        .collect()
}

/// One read of the per-process map, caches merged ([`read_procs`]).
struct ProcRead {
    table: BTreeMap<u32, ProcStats>,
    /// Entries in the map, before any cache's were added.
    entries: u64,
    /// Processes a CPU's cache still holds counts of.
    cached: HashSet<u32>,
    /// Processes whose counts this read cannot give exactly: a CPU was
    /// moving their cached counts into the map while it was read, so the
    /// map may or may not hold them. Their previous figures stand.
    unsettled: HashSet<u32>,
}

/// The per-process map with each CPU's not-yet-moved fault counts added,
/// and its number of entries. The eBPF side moves a CPU's counts into the
/// map when another process faults there; reading the caches before and
/// after the map and comparing their generations tells whether a move
/// happened meanwhile (then the read is retried: a few times at once, then
/// a few more after a millisecond's pause each, for a CPU held up in the
/// middle of a move, as a virtual CPU can be for milliseconds).
fn read_procs(probes: &Loaded) -> anyhow::Result<ProcRead> {
    const AT_ONCE: u32 = 4;
    const PAUSED: u32 = 6;
    let read_cache = || -> anyhow::Result<Vec<FaultCache>> {
        Ok(probes
            .fault_cache
            .get(&0, 0)
            .context("reading the fault cache")?
            .iter()
            .copied()
            .collect())
    };
    let mut attempt = 0;
    loop {
        let before = read_cache()?;
        let mut table = BTreeMap::new();
        let map = aya::maps::IterableMap::<u32, ProcStats>::map(&probes.procs);
        match crate::source::batch::lookup_all::<u32, ProcStats>(map, 256)
            .context("reading the per-process map")?
        {
            Some(all) => table.extend(all),
            None => {
                for item in probes.procs.iter() {
                    let (pid, stats) = item.context("reading the per-process map")?;
                    table.insert(pid, stats);
                }
            }
        }
        let after = read_cache()?;
        let unsettled = unsettled_caches(&before, &after);
        attempt += 1;
        if unsettled.is_empty() || attempt == AT_ONCE + PAUSED {
            if !unsettled.is_empty() {
                log::debug!(
                    "fault caches kept moving; {} processes keep their last figures this once",
                    unsettled.len()
                );
            }
            let entries = table.len() as u64;
            let settled: Vec<FaultCache> = after
                .iter()
                .filter(|c| !unsettled.contains(&c.tgid))
                .copied()
                .collect();
            merge_fault_caches(&mut table, &settled);
            let cached = after
                .iter()
                .filter(|c| c.flags & cache_flags::VALID != 0 && c.counts.iter().any(|&v| v > 0))
                .map(|c| c.tgid)
                .collect();
            return Ok(ProcRead {
                table,
                entries,
                cached,
                unsettled,
            });
        }
        if attempt >= AT_ONCE {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// The processes whose cached counts a CPU moved, or was moving, between
/// two reads of every CPU's cache (`before` and `after`, by CPU): the
/// cache's generation changed or is odd. Both the process the cache held
/// and the one it holds now.
fn unsettled_caches(before: &[FaultCache], after: &[FaultCache]) -> HashSet<u32> {
    before
        .iter()
        .zip(after)
        .filter(|(a, b)| a.generation != b.generation || b.generation % 2 == 1)
        .flat_map(|(a, b)| [a, b])
        .filter(|c| c.flags & cache_flags::VALID != 0)
        .map(|c| c.tgid)
        .collect()
}

/// Adds each CPU's cached fault counts to its process's entry.
pub fn merge_fault_caches(table: &mut BTreeMap<u32, ProcStats>, caches: &[FaultCache]) {
    let n = FAULT_CLASSES;
    for c in caches {
        let want = cache_flags::VALID | cache_flags::IN_SCOPE;
        if c.flags & want != want || c.counts.iter().all(|&v| v == 0) {
            continue;
        }
        let e = table.entry(c.tgid).or_default();
        for k in 0..n {
            e.user_faults[k] += c.counts[k];
            e.kernel_faults[k] += c.counts[n + k];
        }
        e.unclassified_faults += c.counts[2 * n];
    }
}

impl Collector {
    /// The faults the kernel accounted beyond the exception path's:
    /// `accounted - exception`, never below what was derived before. The
    /// kernel's books are read when a task leaves a CPU, the exception
    /// path's counts at once, so while a task runs the difference can dip;
    /// the floor keeps the cumulative count from going backwards, and the
    /// next context switch (at the latest the task's exit) catches it up.
    fn gup_faults(&mut self, key: u32, accounted: u64, exception: u64) -> u64 {
        let floor = self.gup_floor.entry(key).or_default();
        *floor = (*floor).max(accounted.saturating_sub(exception));
        *floor
    }

    /// Adds `p` to `out` unless it is unchanged since the last sample.
    fn push_changed(&mut self, out: &mut Vec<ProcSample>, p: ProcSample) {
        if self.last.get(&p.pid) == Some(&p) {
            return;
        }
        self.last.insert(p.pid, p.clone());
        out.push(p);
    }

    /// The histograms that changed, and the memory stalls' time per CPU.
    fn changed_hists(&mut self, probes: &Loaded) -> anyhow::Result<(Vec<HistSample>, Vec<u64>)> {
        let mut out = Vec::new();
        let mut stall_by_cpu: Vec<u64> = Vec::new();
        // Every histogram, every CPU's buckets and sum, in one batch where
        // the kernel has batched lookups; else a lookup per histogram.
        let map =
            aya::maps::IterableMap::<u32, aya::maps::PerCpuValues<vmscope_common::HistSlot>>::map(
                &probes.hists,
            );
        let all: Vec<(u32, Vec<vmscope_common::HistSlot>)> =
            match crate::source::batch::lookup_all_percpu(map, hist::COUNT as usize)
                .context("reading the histograms")?
            {
                Some(all) => all,
                None => (0..hist::COUNT)
                    .map(|id| {
                        let per_cpu = probes
                            .hists
                            .get(&id, 0)
                            .with_context(|| format!("reading histogram {id}"))?;
                        Ok((id, per_cpu.iter().copied().collect()))
                    })
                    .collect::<anyhow::Result<_>>()?,
            };
        for (id, per_cpu) in all {
            if id >= hist::COUNT {
                continue;
            }
            let name = crate::model::catalogue::hist_name(id);
            if crate::model::stall::MEMORY_STALLS
                .iter()
                .any(|(_, h)| *h == name)
            {
                stall_by_cpu.resize(stall_by_cpu.len().max(per_cpu.len()), 0);
                for (sum, cpu) in stall_by_cpu.iter_mut().zip(&per_cpu) {
                    *sum = sum.wrapping_add(cpu[vmscope_common::HIST_SUM]);
                }
            }
            let mut slot = [0u64; HIST_BUCKETS as usize + 1];
            for cpu in &per_cpu {
                for (s, v) in slot.iter_mut().zip(cpu.iter()) {
                    *s = s.wrapping_add(*v);
                }
            }
            let buckets: Vec<[u64; 2]> = (0..HIST_BUCKETS)
                .filter(|&b| slot[b as usize] > 0)
                .map(|b| [u64::from(b), slot[b as usize]])
                .collect();
            let h = HistSample {
                name,
                sum_ns: slot[vmscope_common::HIST_SUM],
                buckets,
            };
            if h.buckets.is_empty() || self.last_hists.get(&id) == Some(&h) {
                continue;
            }
            self.last_hists.insert(id, h.clone());
            out.push(h);
        }
        Ok((out, stall_by_cpu))
    }
}

fn proc_sample(pid: u32, comm: String, st: &ProcStats, swap_out: u64, swap_in: u64) -> ProcSample {
    let mut p = ProcSample {
        pid,
        comm,
        cgroup: st.cgroup,
        faults: FaultCounters {
            user: st.user_faults,
            kernel: st.kernel_faults,
            unclassified: st.unclassified_faults,
            gup: 0,
        },
        madvise: MadviseByBehavior::from_groups(st.madvise),
        swap_out_pages: swap_out,
        swap_in_pages: swap_in,
        ..Default::default()
    };
    p.copy_counters(st);
    p
}

/// A process's name from /proc, or empty once it has gone.
fn proc_comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

/// How long the cgroup of a process whose entry was deleted is kept for
/// an OOM record that comes after it.
const GONE_CGROUP_KEPT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long after its exit hook a process's entry is left for its last
/// context switch before it is read a last time and deleted.
const EXIT_SETTLE_NS: u64 = 100_000_000;

/// CLOCK_MONOTONIC, the clock of the eBPF side's `bpf_ktime_get_ns`.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Every counter, summed over CPUs, in one lookup.
fn read_counters(probes: &Loaded) -> anyhow::Result<Vec<u64>> {
    let per_cpu = probes.counters.get(&0, 0).context("reading the counters")?;
    let mut sums = vec![0u64; counter::COUNT as usize];
    for cpu in per_cpu.iter() {
        for (s, v) in sums.iter_mut().zip(cpu.iter()) {
            *s = s.wrapping_add(*v);
        }
    }
    Ok(sums)
}

/// A kernel `comm` (NUL-padded, not necessarily UTF-8) as a string.
pub fn comm_string(raw: &[u8; 16]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use vmscope_common::MmSwap;

    use super::*;

    #[test]
    fn cached_faults_are_added_to_their_process_only_when_in_scope() {
        let mut table = BTreeMap::new();
        let mut known = ProcStats::default();
        known.user_faults[2] = 10;
        table.insert(7, known);
        let mut c = FaultCache {
            tgid: 7,
            flags: cache_flags::VALID | cache_flags::IN_SCOPE,
            ..Default::default()
        };
        c.counts[2] = 5; // user write_not_present
        c.counts[FAULT_CLASSES] = 1; // kernel read_not_present
        c.counts[2 * FAULT_CLASSES] = 3; // unclassified
        let out_of_scope = FaultCache {
            tgid: 8,
            flags: cache_flags::VALID,
            counts: [9; 2 * FAULT_CLASSES + 1],
            ..Default::default()
        };
        let mut fresh = c;
        fresh.tgid = 9;
        merge_fault_caches(&mut table, &[c, out_of_scope, fresh]);
        assert_eq!(table[&7].user_faults[2], 15);
        assert_eq!(table[&7].kernel_faults[0], 1);
        assert_eq!(table[&7].unclassified_faults, 3);
        assert!(!table.contains_key(&8));
        assert_eq!(table[&9].user_faults[2], 5);
    }

    /// The 6.1 guest's miscount: a CPU held up half-way through moving a
    /// process's 6,318 cached faults (odd generation) through every
    /// retry; the map already held them and the cache still showed them.
    #[test]
    fn a_cache_caught_moving_leaves_its_processes_unsettled() {
        let cache = |tgid, generation| FaultCache {
            tgid,
            flags: cache_flags::VALID | cache_flags::IN_SCOPE,
            generation,
            ..Default::default()
        };
        let still = cache(5, 8);
        let (moving, moved) = (cache(7, 12), cache(7, 13));
        let (was, now) = (cache(9, 20), cache(11, 22));
        let idle = FaultCache::default();
        let got = unsettled_caches(&[still, moving, was, idle], &[still, moved, now, idle]);
        assert_eq!(got, HashSet::from([7, 9, 11]));
        assert!(unsettled_caches(&[still, was], &[still, was]).is_empty());
    }

    /// A process left unsettled by a read keeps its last figures: no
    /// sample for it then (not the double count the read holds), and the
    /// next settled read goes on from them.
    #[test]
    fn an_unsettled_process_keeps_its_last_figures() {
        let mut c = Collector::new(Instant::now());
        let none = HashSet::new();
        let read = |faults: u64| {
            let mut st = ProcStats {
                born_ns: 1,
                ..Default::default()
            };
            st.user_faults[2] = faults;
            BTreeMap::from([(7, st)])
        };
        let swap = SwapSums::default();
        let mut exited = Vec::new();
        let totals = |ps: &[ProcSample]| {
            ps.iter()
                .map(|p| (p.pid, p.faults.total()))
                .collect::<Vec<_>>()
        };
        let first = c.procs(read(100), &none, &none, &swap, false, &mut exited);
        assert_eq!(totals(&first), [(7, 100)]);
        let unsettled = HashSet::from([7]);
        let held = c.procs(read(163), &none, &unsettled, &swap, false, &mut exited);
        assert!(held.is_empty(), "{:?}", totals(&held));
        assert_eq!(c.last[&7].faults.total(), 100);
        let next = c.procs(read(150), &none, &none, &swap, false, &mut exited);
        assert_eq!(totals(&next), [(7, 150)]);
        assert!(exited.is_empty());
    }

    fn mm(tgid: u32, out_pages: u64, in_pages: u64) -> MmSwap {
        MmSwap {
            tgid,
            sized: 1,
            out_bytes: out_pages * 4096,
            in_bytes: in_pages * 4096,
            ..Default::default()
        }
    }

    #[test]
    fn swap_sums_never_decrease_when_entries_go() {
        let none = std::collections::HashSet::new();
        let mut b = MmBooks::default();
        let (s, _) = b.update(vec![(1, mm(10, 100, 5)), (2, mm(11, 50, 0))], &none, 4096);
        assert_eq!((s.out, s.inn, s.entries), (150, 5, 2));
        // Entry 2 evicted: its counts stay, system-wide and per process.
        let (s, _) = b.update(vec![(1, mm(10, 120, 5))], &none, 4096);
        assert_eq!((s.out, s.entries), (170, 1));
        assert_eq!(s.by_tgid[&11], (50, 0));
        // Address 1 reused by another process's mm, its entry made afresh
        // (counts lower): the old one's counts stay, the new one's add.
        let (s, _) = b.update(vec![(1, mm(12, 3, 0))], &none, 4096);
        assert_eq!(s.out, 173);
        assert_eq!(s.by_tgid[&10], (120, 5));
        assert_eq!(s.by_tgid[&12], (3, 0));
    }

    #[test]
    fn a_reused_address_whose_entry_counts_on_charges_each_owner_its_own() {
        let none = std::collections::HashSet::new();
        let mut b = MmBooks::default();
        let (s, _) = b.update(vec![(1, mm(10, 100, 5))], &none, 4096);
        assert_eq!((s.out, s.inn), (100, 5));
        // Process 10 died; process 11's mm took its address and its
        // entry, which counted on from 100 out, 5 in.
        let (s, _) = b.update(vec![(1, mm(11, 130, 25))], &none, 4096);
        assert_eq!((s.out, s.inn), (130, 25));
        assert_eq!(s.by_tgid[&10], (100, 5));
        assert_eq!(s.by_tgid[&11], (30, 20));
        // Read again: 11 is charged what follows its base only.
        let (s, _) = b.update(vec![(1, mm(11, 140, 25))], &none, 4096);
        assert_eq!((s.out, s.inn), (140, 25));
        assert_eq!(s.by_tgid[&11], (40, 20));
        // And a third owner in a row, then the entry evicted: nothing
        // counted twice, nothing lost.
        let (s, _) = b.update(vec![(1, mm(12, 150, 30))], &none, 4096);
        assert_eq!((s.out, s.inn), (150, 30));
        assert_eq!(s.by_tgid[&11], (40, 20));
        assert_eq!(s.by_tgid[&12], (10, 5));
        let (s, _) = b.update(vec![], &none, 4096);
        assert_eq!((s.out, s.inn), (150, 30));
        assert_eq!(s.by_tgid[&12], (10, 5));
        assert!(b.base.is_empty());
    }

    #[test]
    fn an_ended_owners_mms_are_deleted_and_still_counted_system_wide() {
        let mut b = MmBooks::default();
        let ending: std::collections::HashSet<u32> = [10].into();
        let (s, doomed) = b.update(vec![(1, mm(10, 100, 5)), (2, mm(0, 7, 0))], &ending, 4096);
        assert_eq!(doomed, vec![1]);
        assert_eq!(b.pruned, 1);
        // This read still shows the owner's final figures.
        assert_eq!(s.by_tgid[&10], (100, 5));
        assert_eq!((s.out, s.entries, s.unowned_out), (107, 1, 7));
        // The next read (entry 1 deleted): same sums, no per-process left
        // for pid 10 (a new process under it starts from zero).
        let none = std::collections::HashSet::new();
        let (s, doomed) = b.update(vec![(2, mm(0, 7, 0))], &none, 4096);
        assert!(doomed.is_empty());
        assert_eq!((s.out, s.inn), (107, 5));
        assert!(!s.by_tgid.contains_key(&10));
    }

    #[test]
    fn comm_stops_at_nul_and_tolerates_bad_utf8() {
        let mut raw = [0u8; 16];
        raw[..4].copy_from_slice(b"bash");
        assert_eq!(comm_string(&raw), "bash");
        let full = [b'x'; 16];
        assert_eq!(comm_string(&full), "x".repeat(16));
        let mut bad = [0u8; 16];
        bad[0] = 0xff;
        assert_eq!(comm_string(&bad), "\u{fffd}");
    }
}
