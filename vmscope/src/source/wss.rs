//! The working-set scan (see `model::wss`): on a thread of its own, it
//! clears the referenced bits of the processes it measures at the start of
//! each window, reads how many are set again at each idle-age edge and at
//! the window's end, and hands each finished window to the sampling thread,
//! which puts it in the next sample. A slow scan (a process of many
//! gigabytes) never holds up a read of the probes.
//!
//! What the kernel offers for the other methods is read here too, for
//! `doctor` and the recording's header.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    sync::{Arc, Mutex, mpsc},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::model::{
    damon::AccessMap,
    wss::{MethodStatus, WssMethod, WssProc, WssSample, WssSetup, WssUnread, age_edges},
};

/// The thread's name, as `/proc/PID/task/TID/comm` shows it.
pub const THREAD_NAME: &str = "vmscope-wss";

/// A scan costlier than this share of one CPU is said once.
const COSTLY_SHARE: f64 = 0.05;

/// What the scan of one process reads from `/proc/PID/smaps_rollup`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rollup {
    pub rss_bytes: u64,
    pub referenced_bytes: u64,
    /// `AnonHugePages:` (0 where the kernel lacks the line).
    pub anon_huge_bytes: u64,
    /// `ShmemPmdMapped:` (0 where the kernel lacks the line).
    pub shmem_huge_bytes: u64,
}

/// Parses `smaps_rollup`: its `Rss:` and `Referenced:` lines, and the
/// huge-page lines, in kB.
pub fn parse_rollup(text: &str) -> Option<Rollup> {
    let mut rss = None;
    let mut referenced = None;
    let (mut anon_huge, mut shmem_huge) = (None, None);
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let kb = || v.split_whitespace().next()?.parse::<u64>().ok();
        match k {
            "Rss" => rss = kb(),
            "Referenced" => referenced = kb(),
            "AnonHugePages" => anon_huge = kb(),
            "ShmemPmdMapped" => shmem_huge = kb(),
            _ => {}
        }
    }
    Some(Rollup {
        rss_bytes: rss? * 1024,
        referenced_bytes: referenced? * 1024,
        anon_huge_bytes: anon_huge.unwrap_or(0) * 1024,
        shmem_huge_bytes: shmem_huge.unwrap_or(0) * 1024,
    })
}

/// One process's rollup; an error names the file.
pub fn read_rollup(pid: u32) -> Result<Rollup, String> {
    let path = format!("/proc/{pid}/smaps_rollup");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    // A process that has ended, or a kernel thread, has an empty rollup.
    if text.is_empty() {
        return Ok(Rollup::default());
    }
    parse_rollup(&text).ok_or_else(|| format!("{path}: no Rss and Referenced lines"))
}

/// Clears the referenced bits of every page `pid` maps.
pub fn clear_refs(pid: u32) -> Result<(), String> {
    let path = format!("/proc/{pid}/clear_refs");
    std::fs::write(&path, b"1").map_err(|e| format!("{path}: {e}"))
}

/// The memory cgroup's path from `/proc/PID/cgroup`'s text: the v1 memory
/// controller's line, else the unified hierarchy's.
pub fn memory_cgroup(text: &str) -> Option<String> {
    let mut unified = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        if ctrls.split(',').any(|c| c == "memory") {
            return Some(path.to_string());
        }
        if ctrls.is_empty() {
            unified = Some(path.to_string());
        }
    }
    unified
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

/// Every process's pid (the numbered entries of /proc).
fn all_processes() -> BTreeSet<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return BTreeSet::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// A process's children, from each of its threads' `children` file; None
/// when it is gone.
fn children(pid: u32) -> Option<Vec<u32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    for t in tasks.flatten() {
        let mut path = t.path();
        path.push("children");
        if let Ok(text) = std::fs::read_to_string(&path) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    Some(out)
}

/// `roots` that are still there, and their descendants, as `children`
/// (None: gone) has them.
pub fn descendants(
    roots: &BTreeSet<u32>,
    children: impl Fn(u32) -> Option<Vec<u32>>,
) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let mut todo: Vec<u32> = roots.iter().copied().collect();
    while let Some(pid) = todo.pop() {
        if out.contains(&pid) {
            continue;
        }
        if let Some(kids) = children(pid) {
            out.insert(pid);
            todo.extend(kids);
        }
    }
    out
}

/// The working-set methods and how this kernel stands with each.
pub fn methods() -> Vec<MethodStatus> {
    let scan = match (
        Path::new("/proc/self/clear_refs").exists(),
        read_rollup(std::process::id()),
    ) {
        (true, Ok(_)) => MethodStatus {
            method: WssMethod::ReferencedScan,
            offered: true,
            used: false,
            detail: "clears referenced bits (/proc/PID/clear_refs) and counts them again \
                     (/proc/PID/smaps_rollup), per process"
                .into(),
        },
        (false, _) => MethodStatus {
            method: WssMethod::ReferencedScan,
            offered: false,
            used: false,
            detail: "no /proc/self/clear_refs (kernel without CONFIG_PROC_PAGE_MONITOR)".into(),
        },
        (true, Err(e)) => MethodStatus {
            method: WssMethod::ReferencedScan,
            offered: false,
            used: false,
            detail: e,
        },
    };
    vec![scan, super::damon::status(), super::mglru::status()]
}

/// Whom the scan measures: the followed processes and their descendants,
/// or every process.
#[derive(Clone, Debug, Default)]
pub struct Targets {
    pub all: bool,
    pub roots: BTreeSet<u32>,
}

/// The running scan. Dropping it stops the thread at once.
pub struct Scanner {
    targets: Arc<Mutex<Targets>>,
    done: mpsc::Receiver<WssSample>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Scanner {
    /// Starts scanning at once; the samples' times count from `start`.
    pub fn start(setup: WssSetup, targets: Targets, start: Instant) -> anyhow::Result<Scanner> {
        let targets = Arc::new(Mutex::new(targets));
        let (tx, done) = mpsc::channel();
        let (stop, stopped) = mpsc::channel();
        let shared = Arc::clone(&targets);
        let window = Duration::from_nanos(setup.window_ns);
        let edges: Vec<Duration> = age_edges(setup.window_ns)
            .into_iter()
            .map(Duration::from_nanos)
            .collect();
        let method = setup.method;
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                keep_only_reading_caps();
                let mut warned = false;
                let mut mglru = MglruState::default();
                let mut damon = DamonState::default();
                loop {
                    let w = match method {
                        WssMethod::Mglru => mglru.window(&shared, &edges, window, start, &stopped),
                        WssMethod::Damon => damon.window(&shared, &edges, window, start, &stopped),
                        _ => window_once(&shared, &edges, window, start, &stopped),
                    };
                    let Some(w) = w else {
                        return;
                    };
                    let share =
                        w.scan_cpu_ns as f64 / w.end_ns.saturating_sub(w.start_ns).max(1) as f64;
                    if share > COSTLY_SHARE && !warned {
                        warned = true;
                        log::warn!(
                            "the working-set scan took {:.1}% of one CPU over its last window \
                             ({} processes, {} MiB resident); a longer --wss-window costs less",
                            share * 100.0,
                            w.procs.len(),
                            w.rss_bytes() >> 20
                        );
                    }
                    if tx.send(w).is_err() {
                        return;
                    }
                }
            })
            .context("starting the working-set scan")?;
        Ok(Scanner {
            targets,
            done,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Adds a process (and its descendants) to those measured, from the
    /// next window on.
    pub fn add_root(&self, pid: u32) {
        if let Ok(mut t) = self.targets.lock() {
            t.roots.insert(pid);
        }
    }

    /// The windows finished since the last call, oldest first.
    pub fn finished(&self) -> Vec<WssSample> {
        self.done.try_iter().collect()
    }
}

impl Drop for Scanner {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Gives up, on this thread, every capability but those that reading and
/// clearing other users' processes' pages need: the scan never loads or
/// attaches anything.
fn keep_only_reading_caps() {
    use ::caps::{CapSet, Capability};
    let keep: ::caps::CapsHashSet = [
        Capability::CAP_SYS_PTRACE,
        Capability::CAP_DAC_OVERRIDE,
        Capability::CAP_DAC_READ_SEARCH,
    ]
    .into_iter()
    .collect();
    for set in [CapSet::Effective, CapSet::Permitted] {
        if let Ok(now) = ::caps::read(None, set) {
            let _ = ::caps::set(None, set, &now.intersection(&keep).copied().collect());
        }
    }
}

/// The multi-generational LRU's windows (see `source::mglru`): when the
/// last aging ran, and whether a failed read was said.
#[derive(Default)]
struct MglruState {
    aged: bool,
    warned: bool,
}

impl MglruState {
    /// One window: ages the measured memory cgroups at each inner edge and
    /// at the end, then reads their generations (None when told to stop).
    /// A window whose reads failed is skipped, said once: never a 0.
    fn window(
        &mut self,
        targets: &Mutex<Targets>,
        edges: &[Duration],
        window: Duration,
        start: Instant,
        stop: &mpsc::Receiver<()>,
    ) -> Option<WssSample> {
        loop {
            let t0 = Instant::now();
            let cpu0 = thread_cpu();
            let mut failed = None;
            // The first window starts with an aging of its own; the later
            // ones start at the last one's closing aging.
            if !self.aged {
                failed = self.age(targets).err();
                self.aged = true;
            }
            let mut cpu = thread_cpu().saturating_sub(cpu0);
            let inner = edges.split_last().map(|(_, rest)| rest).unwrap_or(&[]);
            let at = inner
                .iter()
                .rev()
                .map(|&e| window.saturating_sub(e))
                .chain(std::iter::once(window));
            let mut last = Vec::new();
            for t in at {
                match stop.recv_timeout((t0 + t).saturating_duration_since(Instant::now())) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return None,
                }
                let c = thread_cpu();
                match self.age(targets) {
                    Ok(chosen) => last = chosen,
                    Err(e) => failed = Some(e),
                }
                cpu += thread_cpu().saturating_sub(c);
            }
            let end = Instant::now();
            let c = thread_cpu();
            let read = super::mglru::read();
            cpu += thread_cpu().saturating_sub(c);
            let memcgs = match (read, failed) {
                (Ok(m), None) => m,
                (Err(e), _) | (_, Some(e)) => {
                    if !std::mem::replace(&mut self.warned, true) {
                        log::warn!("working set (mglru): {e}; the window is left out");
                    }
                    continue;
                }
            };
            let chosen: Vec<&super::mglru::Memcg> =
                memcgs.iter().filter(|m| last.contains(&m.id)).collect();
            let edges_ns: Vec<u64> = edges.iter().map(|e| e.as_nanos() as u64).collect();
            return Some(WssSample {
                start_ns: t0.saturating_duration_since(start).as_nanos() as u64,
                end_ns: end.saturating_duration_since(start).as_nanos() as u64,
                procs: Vec::new(),
                cgroups: super::mglru::window(&chosen, &edges_ns, page_size()),
                unread: Vec::new(),
                scan_cpu_ns: cpu.as_nanos() as u64,
            });
        }
    }

    /// Ages the memory cgroups measured now; their ids.
    fn age(&self, targets: &Mutex<Targets>) -> Result<Vec<u32>, String> {
        let wanted = targets.lock().map(|t| t.clone()).unwrap_or_default();
        let memcgs = super::mglru::read()?;
        let paths: BTreeSet<String> = if wanted.all {
            BTreeSet::new()
        } else {
            descendants(&wanted.roots, children)
                .into_iter()
                .filter_map(|pid| {
                    let t = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
                    memory_cgroup(&t)
                })
                .map(|p| nearest_memcg(&memcgs, &p))
                .collect()
        };
        let chosen: Vec<&super::mglru::Memcg> =
            super::mglru::chosen(&memcgs, wanted.all, &paths).collect();
        for m in &chosen {
            super::mglru::age(m)?;
        }
        Ok(chosen.iter().map(|m| m.id).collect())
    }
}

/// DAMON's windows (see `source::damon`): the kdamonds running, and when
/// each process's address ranges were last seen accessed.
#[derive(Default)]
struct DamonState {
    kdamonds: Option<super::damon::Kdamonds>,
    maps: BTreeMap<u32, AccessMap>,
    warned: bool,
}

impl DamonState {
    /// The processes to watch: the followed ones and their descendants
    /// that have memory of their own, at most `MAX_TARGETS`; the rest are
    /// said in `unread`.
    fn pids(targets: &Mutex<Targets>) -> (Vec<u32>, Vec<WssUnread>) {
        use super::damon::MAX_TARGETS;
        let wanted = targets.lock().map(|t| t.clone()).unwrap_or_default();
        let mut pids: Vec<u32> = descendants(&wanted.roots, children)
            .into_iter()
            .filter(|&p| read_rollup(p).is_ok_and(|r| r != Rollup::default()))
            .collect();
        let rest = pids.split_off(pids.len().min(MAX_TARGETS));
        let unread = rest
            .into_iter()
            .map(|pid| WssUnread {
                pid,
                reason: format!("DAMON watches at most {MAX_TARGETS} processes (one kdamond each)"),
            })
            .collect();
        (pids, unread)
    }

    /// One window: (re)starts the kdamonds when the processes changed,
    /// reads every kdamond's regions once per aggregation interval until
    /// the window ends, then counts (None when told to stop). A window
    /// whose kdamonds could not start is skipped, said once: never a 0.
    fn window(
        &mut self,
        targets: &Mutex<Targets>,
        edges: &[Duration],
        window: Duration,
        start: Instant,
        stop: &mpsc::Receiver<()>,
    ) -> Option<WssSample> {
        use super::damon::Kdamonds;
        let (attrs, settle) = super::damon::attrs();
        let aggr = Duration::from_micros(attrs.aggr_us);
        loop {
            let t0 = Instant::now();
            let cpu0 = thread_cpu();
            let (pids, unread) = Self::pids(targets);
            let started = self.kdamonds.as_ref().map(Kdamonds::pids) != Some(pids.as_slice());
            if started {
                // The old ones off first: nr_kdamonds must be 0 to start.
                self.kdamonds = None;
                if !pids.is_empty() {
                    match Kdamonds::start(&pids, attrs) {
                        Ok(k) => self.kdamonds = Some(k),
                        Err(e) => {
                            if !std::mem::replace(&mut self.warned, true) {
                                log::warn!("working set (damon): {e}; the window is left out");
                            }
                        }
                    }
                }
            }
            if started && self.kdamonds.is_some() {
                // The regions settle first; nothing is counted before.
                match stop.recv_timeout(settle) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return None,
                }
            }
            self.maps.retain(|p, _| pids.contains(p));
            let t0 = if started { Instant::now() } else { t0 };
            let kd_cpu0 = self.kdamonds.as_ref().map(|k| k.cpu()).unwrap_or_default();
            let end_at = t0 + window;
            while Instant::now() < end_at {
                let round = Instant::now();
                if let Some(k) = &self.kdamonds {
                    for (i, &pid) in k.pids().iter().enumerate() {
                        if let Ok(r) = k.regions(i) {
                            let now = Instant::now().saturating_duration_since(start);
                            self.maps
                                .entry(pid)
                                .or_default()
                                .mark(&r, now.as_nanos() as u64);
                        }
                    }
                }
                let next = (round + aggr).min(end_at);
                match stop.recv_timeout(next.saturating_duration_since(Instant::now())) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return None,
                }
            }
            let Some(k) = &self.kdamonds else {
                continue;
            };
            let end = Instant::now();
            let now_ns = end.saturating_duration_since(start).as_nanos() as u64;
            let edges_ns: Vec<u64> = edges.iter().map(|e| e.as_nanos() as u64).collect();
            let slack = aggr.as_nanos() as u64;
            let procs = self.count(k, now_ns, &edges_ns, slack);
            for m in self.maps.values_mut() {
                m.forget_before(now_ns.saturating_sub(slack));
            }
            // The kdamonds' own CPU time is the method's cost, with ours.
            let cpu = thread_cpu().saturating_sub(cpu0) + k.cpu().saturating_sub(kd_cpu0);
            return Some(WssSample {
                start_ns: t0.saturating_duration_since(start).as_nanos() as u64,
                end_ns: now_ns,
                procs,
                cgroups: Vec::new(),
                unread,
                scan_cpu_ns: cpu.as_nanos() as u64,
            });
        }
    }

    /// Each watched process's figure at `now_ns`, from when its address
    /// ranges were last seen accessed; an ended process is left out.
    fn count(
        &self,
        k: &super::damon::Kdamonds,
        now_ns: u64,
        edges_ns: &[u64],
        slack: u64,
    ) -> Vec<WssProc> {
        k.pids()
            .iter()
            .filter_map(|&pid| {
                let map = self.maps.get(&pid)?;
                let roll = read_rollup(pid).ok().filter(|r| *r != Rollup::default())?;
                let by_edge = map.by_edge(now_ns, edges_ns, slack, roll.rss_bytes);
                Some(WssProc {
                    pid,
                    comm: comm(pid),
                    cgroup: std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                        .ok()
                        .and_then(|t| memory_cgroup(&t)),
                    working_set_bytes: by_edge.last().copied().unwrap_or(0),
                    rss_bytes: roll.rss_bytes,
                    anon_huge_bytes: roll.anon_huge_bytes,
                    shmem_huge_bytes: roll.shmem_huge_bytes,
                    referenced_by_edge: by_edge,
                })
            })
            .collect()
    }
}

/// The memory cgroup that charges a process in cgroup `path`: the cgroup
/// itself, or its nearest ancestor with the memory controller on.
fn nearest_memcg(memcgs: &[super::mglru::Memcg], path: &str) -> String {
    let mut p = path;
    loop {
        if memcgs.iter().any(|m| m.path == p) {
            return p.to_string();
        }
        match p.rfind('/') {
            Some(0) | None => return "/".into(),
            Some(i) => p = &p[..i],
        }
    }
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime)
        .try_into()
        .unwrap_or_default()
}

/// One window: clears, reads at each edge, returns the window (None when
/// told to stop).
fn window_once(
    targets: &Mutex<Targets>,
    edges: &[Duration],
    window: Duration,
    start: Instant,
    stop: &mpsc::Receiver<()>,
) -> Option<WssSample> {
    let t0 = Instant::now();
    let cpu0 = thread_cpu();
    let wanted = targets.lock().map(|t| t.clone()).unwrap_or_default();
    let pids: BTreeSet<u32> = if wanted.all {
        all_processes()
    } else {
        descendants(&wanted.roots, children)
    };
    let mut unread = Vec::new();
    let mut measured = Vec::new();
    for pid in pids {
        match clear_refs(pid) {
            Ok(()) => measured.push(pid),
            // A process that ended meanwhile is no longer there to measure.
            Err(_) if !Path::new(&format!("/proc/{pid}")).exists() => {}
            Err(reason) => unread.push(WssUnread { pid, reason }),
        }
    }
    let mut by_edge: Vec<Vec<Option<Rollup>>> = Vec::with_capacity(edges.len());
    let mut cpu = thread_cpu().saturating_sub(cpu0);
    for &edge in edges {
        match stop.recv_timeout((t0 + edge).saturating_duration_since(Instant::now())) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return None,
        }
        let c = thread_cpu();
        by_edge.push(measured.iter().map(|&p| read_rollup(p).ok()).collect());
        cpu += thread_cpu().saturating_sub(c);
    }
    let end = Instant::now();
    debug_assert!(end >= t0 + window);
    let c = thread_cpu();
    let procs: Vec<WssProc> = measured
        .iter()
        .enumerate()
        .filter_map(|(i, &pid)| {
            let reads: Vec<Rollup> = by_edge.iter().map(|e| e[i]).collect::<Option<_>>()?;
            let last = *reads.last()?;
            // An ended process, and a kernel thread (no memory of its own
            // to measure), read empty: they are left out, not counted as 0.
            if last == Rollup::default() {
                return None;
            }
            Some(WssProc {
                pid,
                comm: comm(pid),
                cgroup: std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .ok()
                    .and_then(|t| memory_cgroup(&t)),
                working_set_bytes: last.referenced_bytes,
                rss_bytes: last.rss_bytes,
                anon_huge_bytes: last.anon_huge_bytes,
                shmem_huge_bytes: last.shmem_huge_bytes,
                referenced_by_edge: reads.iter().map(|r| r.referenced_bytes).collect(),
            })
        })
        .collect();
    cpu += thread_cpu().saturating_sub(c);
    Some(WssSample {
        start_ns: t0.saturating_duration_since(start).as_nanos() as u64,
        end_ns: end.saturating_duration_since(start).as_nanos() as u64,
        procs,
        cgroups: Vec::new(),
        unread,
        scan_cpu_ns: cpu.as_nanos() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollup_lines_in_kb() {
        let t = "55fc-7ffd ---p 00000000 00:00 0  [rollup]\nRss:  1632 kB\nPss: 636 kB\n\
                 Referenced:   1024 kB\nAnonymous: 112 kB\n";
        assert_eq!(
            parse_rollup(t),
            Some(Rollup {
                rss_bytes: 1632 * 1024,
                referenced_bytes: 1024 * 1024,
                ..Rollup::default()
            })
        );
        let huge = format!("{t}AnonHugePages:  2048 kB\nShmemPmdMapped:     0 kB\n");
        assert_eq!(
            parse_rollup(&huge).map(|r| r.anon_huge_bytes),
            Some(2048 * 1024)
        );
        assert_eq!(parse_rollup("Rss: 4 kB\n"), None);
    }

    #[test]
    fn memory_cgroup_from_v1_and_v2_lines() {
        let v1 = "9:name=systemd:/\n4:memory:/a/b\n0::/\n";
        assert_eq!(memory_cgroup(v1).as_deref(), Some("/a/b"));
        assert_eq!(
            memory_cgroup("0::/user.slice/x\n").as_deref(),
            Some("/user.slice/x")
        );
        assert_eq!(memory_cgroup("3:cpu,memory:/m\n").as_deref(), Some("/m"));
    }

    #[test]
    fn descendants_follow_the_tree_and_drop_gone_roots() {
        let tree = |pid: u32| match pid {
            1 => Some(vec![10, 20]),
            10 => Some(vec![11]),
            11 => Some(vec![12]),
            12 | 20 => Some(vec![]),
            _ => None,
        };
        let roots = BTreeSet::from([10, 99]);
        assert_eq!(descendants(&roots, tree), BTreeSet::from([10, 11, 12]));
    }

    #[test]
    fn this_process_is_scanned() {
        let r = read_rollup(std::process::id()).expect("own rollup");
        assert!(
            r.rss_bytes > 0 && r.referenced_bytes <= r.rss_bytes,
            "{r:?}"
        );
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let tree = descendants(&BTreeSet::from([me]), children);
        let _ = child.kill();
        let _ = child.wait();
        assert!(tree.contains(&me) && tree.contains(&child.id()), "{tree:?}");
        assert!(all_processes().contains(&me));
        assert_eq!(methods().len(), 3);
        assert!(
            methods().iter().all(|m| !m.used),
            "the setup says which is used"
        );
    }
}
