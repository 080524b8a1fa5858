//! The stack-sampling method: a perf_event program on the cpu-clock event of
//! every CPU counts kernel stacks in the kernel; each interval this reads
//! the counts, symbolizes stacks it has not seen before (once each) and
//! sums the samples per category and context.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
    path::PathBuf,
};

use anyhow::Context as _;
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, StackTraceMap},
    programs::perf_event::{SamplePolicy, SoftwareEvent},
};
use vmscope_common::sample::{MAX_KEYS, MAX_STACKS, SampleKey, USER_STACK, stat};

use super::{
    RmapProc, RmapSample,
    categorize::{Category, Context, classify, within_walk},
    kallsyms::Symbols,
};
use crate::model::probes::ProbeStatus;

/// The probe name of the sampler.
pub const PROBE: &str = crate::model::catalogue::probe::RMAP_SAMPLER;

/// When set to a file name, every interval rewrites that file with each
/// symbolized stack and its count (for capturing test fixtures).
pub use crate::source::kernel::caps::DUMP_STACKS_ENV as DUMP_ENV;

/// Sizes the sampling maps before the object is loaded: full size when
/// sampling, one entry otherwise (the stack map alone is 16 MiB).
pub fn size_maps(loader: &mut EbpfLoader<'_>, hz: u32) {
    if hz > 0 {
        loader.map_max_entries("SAMPLE_STACKS", MAX_STACKS);
        loader.map_max_entries("SAMPLE_COUNTS", MAX_KEYS);
    }
}

/// Classification of one stored stack.
type Class = (Category, Context);

pub struct Sampler {
    counts: BpfHashMap<MapData, SampleKey, u64>,
    stacks: StackTraceMap<MapData>,
    stats: PerCpuArray<MapData, u64>,
    /// Read at the first stacks to symbolize, off the start-up path.
    symbols: Option<std::sync::Arc<Symbols>>,
    /// Each stored stack's class, and whether it is inside a walk.
    classes: HashMap<i32, (Class, bool)>,
    /// Samples inside a walk (see `categorize::within_walk`), cumulative.
    inside_walk: u64,
    /// Symbolized frames per stack, kept only when dumping.
    frames: HashMap<i32, Vec<String>>,
    comms: HashMap<u32, String>,
    /// The counts are drained from the kernel at every read (so its map
    /// never fills on a long run) and summed here: by category and
    /// context, per process, and per key while dumping.
    totals: BTreeMap<String, BTreeMap<String, u64>>,
    unresolved: u64,
    procs: HashMap<u32, RmapProc>,
    dumped: HashMap<SampleKey, u64>,
    /// Stored stacks are deleted once they fill most of their map (see
    /// `rotate`); how often that happened.
    rotations: u64,
    hz: u32,
    period_ns: u64,
    cpus: u32,
    /// Where the stacks are dumped (see [`DUMP_ENV`]): opened once, never
    /// through a symbolic link.
    dump: Option<(PathBuf, std::fs::File)>,
    /// The counts at the first read, which later reads count from. The
    /// first read is the start of a recording (taken before a wrapped
    /// command runs): it symbolizes nothing, so kallsyms is not read on
    /// the start-up path.
    baseline: Option<Baseline>,
}

struct Baseline {
    samples: u64,
    lost_stack: u64,
    lost_key: u64,
}

/// Attaches the sampler at `hz` per CPU. Without it, the status says why.
pub fn attach(
    ebpf: &mut Ebpf,
    hz: u32,
    disabled: &[String],
    note: &str,
) -> (Option<Sampler>, ProbeStatus) {
    let result = if hz == 0 {
        Err("not requested (sampling rate 0)".to_string())
    } else if disabled.iter().any(|d| d == PROBE) {
        Err(format!("disabled by {}", crate::source::ebpf::DISABLE_ENV))
    } else {
        try_attach(ebpf, hz)
    };
    // The method note follows the status after "; ", when there is one.
    let note = if note.is_empty() {
        String::new()
    } else {
        format!("; {note}")
    };
    match result {
        Ok(s) => {
            let status = ProbeStatus {
                probe: PROBE.into(),
                method: "perf_event".into(),
                attached: true,
                reason: Some(format!(
                    "rmap method: stack sampling at {hz} Hz per CPU on {} CPUs{note}",
                    s.cpus
                )),
                deferred: false,
            };
            (Some(s), status)
        }
        Err(e) => (
            None,
            ProbeStatus {
                probe: PROBE.into(),
                method: "perf_event".into(),
                attached: false,
                reason: Some(format!("rmap stack sampling unavailable: {e}{note}")),
                deferred: false,
            },
        ),
    }
}

fn try_attach(ebpf: &mut Ebpf, hz: u32) -> Result<Sampler, String> {
    super::kallsyms::visible()?;
    let period_ns = 1_000_000_000 / u64::from(hz);
    let cpus = crate::source::ebpf::attach_perf_sw(
        ebpf,
        "cpu_clock_sample",
        SoftwareEvent::CpuClock,
        SamplePolicy::Period(period_ns),
    )?;
    let take = |ebpf: &mut Ebpf, name: &str| {
        ebpf.take_map(name)
            .ok_or_else(|| format!("map {name} missing from the eBPF object"))
    };
    let counts = BpfHashMap::try_from(take(ebpf, "SAMPLE_COUNTS")?).map_err(|e| e.to_string())?;
    let stacks =
        StackTraceMap::try_from(take(ebpf, "SAMPLE_STACKS")?).map_err(|e| e.to_string())?;
    let stats = PerCpuArray::try_from(take(ebpf, "SAMPLE_STATS")?).map_err(|e| e.to_string())?;
    Ok(Sampler {
        counts,
        stacks,
        stats,
        symbols: None,
        classes: HashMap::new(),
        inside_walk: 0,
        frames: HashMap::new(),
        comms: HashMap::new(),
        totals: BTreeMap::new(),
        unresolved: 0,
        procs: HashMap::new(),
        dumped: HashMap::new(),
        rotations: 0,
        hz,
        period_ns,
        cpus: u32::try_from(cpus).unwrap_or(u32::MAX),
        dump: std::env::var_os(DUMP_ENV)
            .map(PathBuf::from)
            .and_then(|p| match open_dump(&p) {
                Ok(f) => Some((p, f)),
                Err(e) => {
                    log::warn!("{DUMP_ENV}: not dumping stacks to {}: {e}", p.display());
                    None
                }
            }),
        baseline: None,
    })
}

impl Sampler {
    /// The cumulative counts since the first read (which returns zeros).
    /// `procs` holds only processes whose counts changed since the
    /// previous read.
    pub fn read(&mut self) -> anyhow::Result<RmapSample> {
        let keys = self.drain()?;
        let mut out = RmapSample {
            rate_hz: self.hz,
            period_ns: self.period_ns,
            cpus: self.cpus,
            ..Default::default()
        };
        // The statistics slots, every CPU's, in one batch where the kernel
        // has batched lookups.
        let map = aya::maps::IterableMap::<u32, aya::maps::PerCpuValues<u64>>::map(&self.stats);
        let batched: Option<Vec<(u32, Vec<u64>)>> = crate::source::batch::lookup_all_percpu(map, 8)
            .context("reading the sampling statistics")?;
        let stat = |i: u32| -> anyhow::Result<u64> {
            if let Some(all) = &batched {
                return Ok(all
                    .iter()
                    .find(|(k, _)| *k == i)
                    .map_or(0, |(_, v)| v.iter().sum()));
            }
            Ok(self
                .stats
                .get(&i, 0)
                .context("reading the sampling statistics")?
                .iter()
                .sum())
        };
        let (samples, lost_stack, lost_key) = (
            stat(stat::SAMPLES)?,
            stat(stat::LOST_STACK)?,
            stat(stat::LOST_KEY)?,
        );
        let Some(base) = &self.baseline else {
            // What was counted before the first read is not the run's.
            self.baseline = Some(Baseline {
                samples,
                lost_stack,
                lost_key,
            });
            return Ok(out);
        };
        out.samples = samples.saturating_sub(base.samples);
        out.lost_stack = lost_stack.saturating_sub(base.lost_stack);
        out.lost_key = lost_key.saturating_sub(base.lost_key);
        let mut changed = std::collections::BTreeSet::new();
        for &(k, n) in &keys {
            if self.dump.is_some() {
                *self.dumped.entry(k).or_default() += n;
            }
            let Some(((cat, ctx), inside)) = self.class_of(k) else {
                self.unresolved += n;
                continue;
            };
            if inside {
                self.inside_walk += n;
            }
            *self
                .totals
                .entry(cat.name().to_string())
                .or_default()
                .entry(ctx.name().to_string())
                .or_default() += n;
            let comm = self.comm(k.tgid);
            let p = self.procs.entry(k.tgid).or_insert_with(|| RmapProc {
                pid: k.tgid,
                comm,
                ..Default::default()
            });
            p.samples += n;
            match cat {
                Category::RmapWalk => p.rmap_walk += n,
                Category::RmapMaintenance => p.rmap_maintenance += n,
                _ => {}
            }
            changed.insert(k.tgid);
        }
        out.counts = self.totals.clone();
        out.inside_walk = self.inside_walk;
        out.unresolved = self.unresolved;
        out.procs = changed
            .into_iter()
            .filter_map(|pid| self.procs.get(&pid).cloned())
            .collect();
        if self.dump.is_some() {
            let all: Vec<(SampleKey, u64)> = self.dumped.iter().map(|(&k, &n)| (k, n)).collect();
            let text = self.dump_text(&all);
            if let Some((path, f)) = &self.dump {
                use std::os::unix::fs::FileExt as _;
                if let Err(e) = f
                    .set_len(0)
                    .and_then(|()| f.write_all_at(text.as_bytes(), 0))
                {
                    log::warn!("writing stacks to {}: {e}", path.display());
                }
            }
        } else {
            self.rotate();
        }
        Ok(out)
    }

    /// Every (process, stack) count since the previous read, deleted from
    /// the kernel's map as it is read.
    fn drain(&mut self) -> anyhow::Result<Vec<(SampleKey, u64)>> {
        let map = aya::maps::IterableMap::<SampleKey, u64>::map(&self.counts);
        if let Some(keys) = crate::source::batch::take_all::<SampleKey, u64>(map, 256)
            .context("reading the sample counts")?
        {
            return Ok(keys);
        }
        // Without batched deletes: key by key (a sample landing between a
        // key's read and its delete is lost).
        let keys: Vec<SampleKey> = self
            .counts
            .keys()
            .collect::<Result<_, _>>()
            .context("reading the sample counts")?;
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            if let Ok(n) = self.counts.get(&k, 0) {
                let _ = self.counts.remove(&k);
                out.push((k, n));
            }
        }
        Ok(out)
    }

    /// Deletes the stored stacks once they fill three quarters of their
    /// map, so new stacks keep finding room on a long run; their
    /// classifications go too (a stack id can then name another stack).
    /// Counts drained but not yet read are lost as `unresolved`; there are
    /// none here, as this runs right after a read.
    fn rotate(&mut self) {
        if self.classes.len() < (MAX_STACKS as usize) * 3 / 4 {
            return;
        }
        for id in self.classes.keys() {
            if let Ok(id) = u32::try_from(*id) {
                let _ = self.stacks.remove(&id);
            }
        }
        self.classes.clear();
        self.rotations += 1;
        log::debug!("stack map rotated ({} times)", self.rotations);
    }

    /// Forgets processes that have ended (their pids may be reused).
    /// Reads kallsyms afresh: after direct timing has loaded its programs
    /// and trampolines, so that samples in them are named as such (an
    /// older copy names them after whatever symbol precedes them).
    pub fn reload_symbols(&mut self) {
        match Symbols::load() {
            Ok(s) => self.symbols = Some(std::sync::Arc::new(s)),
            Err(e) => log::warn!("re-reading kernel symbols: {e}"),
        }
    }

    pub fn forget(&mut self, pids: &[u32]) {
        for pid in pids {
            self.comms.remove(pid);
            self.procs.remove(pid);
        }
    }

    fn class_of(&mut self, k: SampleKey) -> Option<(Class, bool)> {
        if k.stack_id == USER_STACK {
            return Some((classify(&[], k.tgid), false));
        }
        if let Some(&(c, inside)) = self.classes.get(&k.stack_id) {
            // The stack is fixed once stored, but the idle task's context
            // depends on the tgid, not the stack.
            return Some((if k.tgid == 0 { (c.0, Context::Idle) } else { c }, inside));
        }
        let id = u32::try_from(k.stack_id).ok()?;
        let trace = self.stacks.get(&id, 0).ok()?;
        if self.symbols.is_none() {
            self.symbols = Symbols::shared().ok();
        }
        let symbols = self.symbols.as_deref();
        let names: Vec<String> = trace
            .frames()
            .iter()
            .map(|f| match symbols.and_then(|s| s.resolve(f.ip)) {
                Some(n) => n.to_string(),
                None => format!("0x{:x}", f.ip),
            })
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        // Classified as a non-idle task; the idle task's context is set above.
        let c = classify(&refs, u32::MAX);
        let inside = within_walk(&refs);
        self.classes.insert(k.stack_id, (c, inside));
        if self.dump.is_some() {
            self.frames.insert(k.stack_id, names);
        }
        Some((if k.tgid == 0 { (c.0, Context::Idle) } else { c }, inside))
    }

    fn comm(&mut self, tgid: u32) -> String {
        self.comms
            .entry(tgid)
            .or_insert_with(|| {
                if tgid == 0 {
                    return "swapper".into();
                }
                std::fs::read_to_string(format!("/proc/{tgid}/comm"))
                    .map(|s| s.trim_end().to_string())
                    .unwrap_or_default()
            })
            .clone()
    }

    fn dump_text(&mut self, keys: &[(SampleKey, u64)]) -> String {
        let mut sorted: Vec<_> = keys.to_vec();
        sorted.sort_by_key(|k| std::cmp::Reverse(k.1));
        let mut s = String::new();
        for (k, n) in sorted {
            let frames = self.frames.get(&k.stack_id).cloned().unwrap_or_default();
            if k.stack_id != USER_STACK && frames.is_empty() {
                continue;
            }
            let comm = self.comm(k.tgid);
            let _ = writeln!(s, "# {} {} {}", k.tgid, n, comm);
            for f in frames {
                let _ = writeln!(s, "{f}");
            }
            s.push('\n');
        }
        s
    }
}

/// The dump file, created (mode 0600) or truncated, but never reached
/// through a symbolic link: its stacks name kernel addresses.
fn open_dump(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// One stack of a dump (see [`DUMP_ENV`]).
#[derive(Debug)]
pub struct DumpedStack {
    pub tgid: u32,
    pub count: u64,
    pub comm: String,
    /// Innermost first; empty for user code.
    pub frames: Vec<String>,
}

/// Parses a dump: paragraphs of a `# TGID COUNT COMM` line and frames.
pub fn parse_dump(text: &str) -> Result<Vec<DumpedStack>, String> {
    let mut out = Vec::new();
    for (i, para) in text.split("\n\n").enumerate() {
        let mut lines = para.lines().filter(|l| !l.trim().is_empty());
        let Some(head) = lines.next() else { continue };
        let bad = || {
            format!(
                "stack {}: expected `# TGID COUNT COMM`, got {head:?}",
                i + 1
            )
        };
        let mut parts = head.strip_prefix("# ").ok_or_else(bad)?.splitn(3, ' ');
        let tgid = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let count = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let comm = parts.next().unwrap_or("").to_string();
        out.push(DumpedStack {
            tgid,
            count,
            comm,
            frames: lines.map(|l| l.trim().to_string()).collect(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dump_file_is_never_opened_through_a_symbolic_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep").expect("write");
        let link = dir.path().join("dump");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert!(open_dump(&link).is_err(), "opened through a link");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
        let plain = dir.path().join("plain");
        open_dump(&plain).expect("a new file");
        open_dump(&plain).expect("an existing file");
    }

    #[test]
    fn dump_round_trips_and_bad_headers_are_one_line_errors() {
        let text = "# 12 7 kswapd0\nshrink_folio_list\nkswapd\n\n# 40 3 my prog\n\n";
        let d = parse_dump(text).expect("parses");
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].tgid, d[0].count, d[0].comm.as_str()),
            (12, 7, "kswapd0")
        );
        assert_eq!(d[0].frames, ["shrink_folio_list", "kswapd"]);
        assert_eq!(d[1].comm, "my prog");
        assert!(d[1].frames.is_empty());
        let e = parse_dump("12 7 x\nf\n").expect_err("no #");
        assert!(
            e.contains("expected `# TGID COUNT COMM`") && !e.contains('\n'),
            "{e}"
        );
    }
}
