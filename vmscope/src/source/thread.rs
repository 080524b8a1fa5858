//! The kernel-facing source on a thread of its own. It loads the eBPF
//! object, owns it for the whole run, reads it every interval and sends
//! owned [`Reading`]s over a channel; `record`, `top` and `serve` only
//! receive them. A slow read (a large map, a busy kernel) therefore never
//! holds up a key press, an HTTP request or a signal, and a slow view never
//! delays a sample.
//!
//! Each interval the thread does three separate things: the upkeep that
//! changes what is attached (the swap probe, once a swap device appears;
//! the eBPF log), the read ([`Collector::sample`], which only reads), and
//! the deletion of the entries of processes that have ended.

use crate::model::probes::FaultSource;
use std::{
    sync::mpsc as std_mpsc,
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow};
use tokio::sync::mpsc;

use crate::model::wss::WssSetup;
use crate::{
    model::{probes::ProbeStatus, sample::Sample},
    source::{
        collect::Collector,
        kernel::cgroupfs,
        loader::{self, LoadOptions, Loaded, Since},
        shed::{self, Shed},
        wss::{Scanner, Targets},
    },
};

/// The thread's name, as `/proc/PID/task/TID/comm` shows it.
pub const THREAD_NAME: &str = "vmscope-source";

/// One interval's read.
#[derive(Clone, Debug)]
pub struct Reading {
    pub sample: Sample,
    /// Every probe's status as of this read (the swap probe can attach
    /// after the start).
    pub probes: Vec<ProbeStatus>,
    /// The capabilities given up at this read: those kept for the deferred
    /// swap probe, once it has attached (after [`Source::shed`]).
    pub shed: Option<Shed>,
}

/// What the thread sends: a read, or the one asked for by
/// [`Source::finish`].
enum Out {
    Read(anyhow::Result<Reading>),
    Last(anyhow::Result<Reading>),
}

enum Cmd {
    Track(u32, Since, std_mpsc::Sender<anyhow::Result<()>>),
    /// Follows a cgroup subtree; answers with the processes in it now.
    Cgroup(String, std_mpsc::Sender<anyhow::Result<Vec<u32>>>),
    /// First read at once, then one every interval.
    Start(Instant, Duration),
    Interval(Duration),
    /// One more read now, marked last; no more after it.
    Finish,
    Shed(std_mpsc::Sender<Shed>),
    /// Measure the working set from the start on (see `wss`).
    WorkingSet(WssSetup),
}

/// The handle the views hold. Dropping it (or [`Source::release`]) ends the
/// thread, which detaches the probes without waiting (see `teardown`).
pub struct Source {
    cmds: std_mpsc::Sender<Cmd>,
    readings: mpsc::UnboundedReceiver<Out>,
    /// The probes' status once loaded.
    pub probes: Vec<ProbeStatus>,
    pub fault_source: FaultSource,
    /// How processes are keyed by cgroup; `None` without attribution (the
    /// probe list's `cgroup attribution` says why).
    pub cgroups: Option<crate::model::cgroup::CgroupScheme>,
    thread: Option<JoinHandle<()>>,
}

impl Source {
    /// Starts the thread, loads the probes on it and follows `pids` (and
    /// their descendants); returns once they are attached (or with the
    /// loader's error).
    pub fn open(opts: LoadOptions, pids: &[u32]) -> anyhow::Result<Source> {
        let source = Source::load(opts)?;
        for &pid in pids {
            source.track(pid, Since::Now)?;
        }
        Ok(source)
    }

    fn load(opts: LoadOptions) -> anyhow::Result<Source> {
        let (cmds, cmd_rx) = std_mpsc::channel();
        let (tx, readings) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                let probes = match loader::load(&opts) {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                // The programs are loaded: the session needs the kernel's
                // BTF again only for a deferred attach, which parses it anew.
                crate::source::kernel::btf::release();
                let scheme = probes.cgroups.as_ref().ok().map(|h| h.scheme());
                let _ = ready_tx.send(Ok((probes.probes.clone(), probes.fault_source, scheme)));
                Worker::new(probes, tx).run(&cmd_rx);
            })
            .context("starting the sampling thread")?;
        let (probes, fault_source, cgroups) = ready_rx
            .recv()
            .map_err(|_| anyhow!("the sampling thread ended while loading the probes"))??;
        Ok(Source {
            cmds,
            readings,
            probes,
            fault_source,
            cgroups,
            thread: Some(thread),
        })
    }

    fn ask<T>(&self, cmd: impl FnOnce(std_mpsc::Sender<T>) -> Cmd) -> anyhow::Result<T> {
        let (tx, rx) = std_mpsc::channel();
        self.cmds
            .send(cmd(tx))
            .map_err(|_| anyhow!("the sampling thread has ended"))?;
        rx.recv()
            .map_err(|_| anyhow!("the sampling thread ended without answering"))
    }

    /// Follows cgroup `path` and everything below it: the processes in
    /// it now, those moved into it later (by the kernel, as they move), and
    /// their children. Returns the processes in it now.
    pub fn track_cgroup(&self, path: &str) -> anyhow::Result<Vec<u32>> {
        self.ask(|tx| Cmd::Cgroup(path.to_owned(), tx))?
    }

    /// Adds `pid` (and, from then on, its new children) to the followed
    /// set, its counts starting as `since` says.
    pub fn track(&self, pid: u32, since: Since) -> anyhow::Result<()> {
        self.ask(|tx| Cmd::Track(pid, since, tx))?
    }

    /// Takes the first read now and one every `interval` after it; the
    /// samples' elapsed time counts from `start`.
    pub fn start(&self, start: Instant, interval: Duration) {
        let _ = self.cmds.send(Cmd::Start(start, interval));
    }

    /// Reads every `interval` from now on (the next read one interval
    /// from now).
    pub fn set_interval(&self, interval: Duration) {
        let _ = self.cmds.send(Cmd::Interval(interval));
    }

    /// The next read, in order. Cancel-safe: a read not yet taken stays
    /// in the channel.
    pub async fn next(&mut self) -> anyhow::Result<Reading> {
        match self.readings.recv().await {
            Some(Out::Read(r) | Out::Last(r)) => r,
            None => Err(anyhow!("the sampling thread has ended")),
        }
    }

    /// Every read not yet taken, then one more taken now (marked last):
    /// nothing that was read is lost. No read follows.
    pub async fn finish(&mut self) -> Vec<anyhow::Result<Reading>> {
        let mut out = Vec::new();
        let asked = self.cmds.send(Cmd::Finish).is_ok();
        loop {
            let next = if asked {
                self.readings.recv().await
            } else {
                self.readings.try_recv().ok()
            };
            match next {
                Some(Out::Read(r)) => out.push(r),
                Some(Out::Last(r)) => {
                    out.push(r);
                    return out;
                }
                None => return out,
            }
        }
    }

    /// Has the thread give up every capability that reading and its
    /// remaining attaching do not need (see [`shed`]).
    pub fn shed(&self) -> Shed {
        self.ask(Cmd::Shed)
            .unwrap_or_else(|e| Shed::kept(format!("{e:#}")))
    }

    /// Measures the working set of the followed processes (every process
    /// when `setup.all_processes`), one window after another from
    /// [`Source::start`] on; each finished window comes in the next read's
    /// sample.
    pub fn working_set(&self, setup: WssSetup) {
        let _ = self.cmds.send(Cmd::WorkingSet(setup));
    }

    /// Ends the thread, which detaches the probes in the background.
    pub fn release(self) {}
}

impl Drop for Source {
    fn drop(&mut self) {
        // A closed command channel ends the thread's loop; its worker then
        // hands the probes to `teardown`, which returns at once and leaves
        // the kernel's detaching to a short-lived child. Joined, so the
        // process does not end first: its exit would close the descriptors
        // itself and wait for the kernel (about 2 s).
        let (tx, _) = std_mpsc::channel();
        drop(std::mem::replace(&mut self.cmds, tx));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What runs on the thread.
struct Worker {
    probes: Loaded,
    collector: Option<Collector>,
    out: mpsc::UnboundedSender<Out>,
    interval: Duration,
    next: Option<Instant>,
    /// Capabilities kept for the deferred swap probe.
    held_for_swap: bool,
    /// The cgroup subtree followed, if any.
    scope: Option<CgroupScope>,
    /// The followed processes, which the working-set scan measures.
    roots: std::collections::BTreeSet<u32>,
    /// The working-set scan asked for, started with the reads.
    wss_setup: Option<WssSetup>,
    wss: Option<Scanner>,
}

/// A followed cgroup subtree. The kernel side follows a task moved into
/// the cgroup or any cgroup below it (by path, so cgroups created later
/// count too) and the children of followed tasks; the processes in it at
/// the start, and those that entered it without a move (started straight
/// into a cgroup), are found by the scan at each read. Only the processes
/// there now are kept: nothing grows with the cgroups and processes that
/// come and go.
struct CgroupScope {
    path: String,
    pids: std::collections::HashSet<u32>,
}

impl CgroupScope {
    /// Starts following `path` (the kernel side first, so that no move is
    /// missed between the two), then scans it.
    fn start(path: String, probes: &mut Loaded) -> anyhow::Result<(Self, Vec<u32>)> {
        probes.scope_path(&path)?;
        let mut scope = CgroupScope {
            path,
            pids: Default::default(),
        };
        let new = scope.scan(probes)?;
        Ok((scope, new))
    }

    /// The processes in the subtree now; returns those new to it.
    fn scan(&mut self, probes: &mut Loaded) -> anyhow::Result<Vec<u32>> {
        let h = probes
            .cgroups
            .clone()
            .map_err(|e| anyhow!("--cgroup needs cgroup attribution, which is unavailable: {e}"))?;
        let mut now = std::collections::HashSet::new();
        let mut new = Vec::new();
        for (_, path) in cgroupfs::below(&h, &self.path) {
            for pid in cgroupfs::procs(&h, &path) {
                if now.insert(pid) && !self.pids.contains(&pid) {
                    probes.track(pid, Since::Now)?;
                    new.push(pid);
                }
            }
        }
        self.pids = now;
        Ok(new)
    }
}

impl Worker {
    fn new(probes: Loaded, out: mpsc::UnboundedSender<Out>) -> Self {
        Worker {
            probes,
            collector: None,
            out,
            interval: Duration::from_secs(1),
            next: None,
            held_for_swap: false,
            scope: None,
            roots: Default::default(),
            wss_setup: None,
            wss: None,
        }
    }

    fn run(mut self, cmds: &std_mpsc::Receiver<Cmd>) {
        loop {
            let cmd = match self.next {
                None => cmds.recv().ok(),
                Some(at) => match cmds.recv_timeout(at.saturating_duration_since(Instant::now())) {
                    Ok(c) => Some(c),
                    Err(std_mpsc::RecvTimeoutError::Timeout) => {
                        self.tick();
                        continue;
                    }
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => None,
                },
            };
            let Some(cmd) = cmd else { break };
            if !self.on(cmd) {
                break;
            }
        }
        crate::source::teardown::release(self.probes);
    }

    /// Handles one command; false when the views want no more reads and
    /// the probes can go.
    fn on(&mut self, cmd: Cmd) -> bool {
        match cmd {
            Cmd::Track(pid, since, reply) => {
                self.follow([pid]);
                let _ = reply.send(self.probes.track(pid, since));
            }
            Cmd::Cgroup(path, reply) => {
                let r = CgroupScope::start(path, &mut self.probes).map(|(scope, new)| {
                    self.scope = Some(scope);
                    new
                });
                if let Ok(new) = &r {
                    self.follow(new.iter().copied());
                }
                let _ = reply.send(r);
            }
            Cmd::Start(start, interval) => {
                self.collector = Some(Collector::new(start));
                if let Some(setup) = self.wss_setup.take() {
                    let targets = Targets {
                        all: setup.all_processes,
                        roots: self.roots.clone(),
                    };
                    match Scanner::start(setup, targets, start) {
                        Ok(s) => self.wss = Some(s),
                        Err(e) => log::warn!("working set unavailable: {e:#}"),
                    }
                }
                self.interval = interval;
                self.next = Some(Instant::now());
            }
            Cmd::Interval(interval) => {
                self.interval = interval;
                if self.next.is_some() {
                    self.next = Some(Instant::now() + interval);
                }
            }
            Cmd::Finish => {
                let r = self.read();
                self.next = None;
                // No read follows; the probes go once the handle is dropped.
                return self.out.send(Out::Last(r)).is_ok();
            }
            Cmd::WorkingSet(setup) => self.wss_setup = Some(setup),
            Cmd::Shed(reply) => {
                let s = shed::shed(&self.probes);
                self.held_for_swap = s.held_for_swap;
                let _ = reply.send(s);
            }
        }
        true
    }

    /// One interval's read, sent on; a closed channel stops the reads
    /// (the views have gone).
    fn tick(&mut self) {
        let r = self.read();
        if self.out.send(Out::Read(r)).is_err() {
            self.next = None;
            return;
        }
        let now = Instant::now();
        self.next = Some(next_read(self.next.unwrap_or(now), now, self.interval));
    }

    fn read(&mut self) -> anyhow::Result<Reading> {
        self.upkeep();
        let collector = self
            .collector
            .get_or_insert_with(|| Collector::new(Instant::now()));
        let mut sample = collector.sample(&mut self.probes)?;
        if let Some(wss) = &self.wss {
            sample.working_set = wss.finished();
        }
        collector.prune(&mut self.probes);
        // What was kept for the swap probe goes once it has attached.
        let shed = (self.held_for_swap && !shed::swap_pending(&self.probes)).then(|| {
            let s = shed::shed(&self.probes);
            self.held_for_swap = s.held_for_swap;
            s
        });
        Ok(Reading {
            sample,
            probes: self.probes.probes.clone(),
            shed,
        })
    }

    /// Processes now followed, for the working-set scan.
    fn follow(&mut self, pids: impl IntoIterator<Item = u32>) {
        for pid in pids {
            self.roots.insert(pid);
            if let Some(w) = &self.wss {
                w.add_root(pid);
            }
        }
    }

    /// What changes the probes rather than reading them: the eBPF side's
    /// log lines, and the swap probe once a swap device is active.
    fn upkeep(&mut self) {
        self.probes.flush_logs();
        if let Some(scope) = self.scope.as_mut() {
            match scope.scan(&mut self.probes) {
                Ok(new) => self.follow(new),
                Err(e) => log::warn!("following cgroup {}: {e:#}", scope.path),
            }
        }
        if self.probes.poll_swap() {
            log::info!(
                "a swap device became active: attached {}",
                loader::SWAP_PROBE
            );
        }
    }
}

/// When the read after one due at `due` (and done by `now`) is due: an
/// interval later, or, when that is already past, an interval from now. A
/// late read pushes the next ones back rather than bunching them up, so no
/// interval is ever much shorter than asked for.
fn next_read(due: Instant, now: Instant, interval: Duration) -> Instant {
    let next = due + interval;
    if next <= now { now + interval } else { next }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_on_time_keep_their_schedule() {
        let t0 = Instant::now();
        let i = Duration::from_millis(100);
        // Done 30 ms after it was due: the next is still due at 200 ms.
        assert_eq!(
            next_read(t0 + i, t0 + i + Duration::from_millis(30), i),
            t0 + 2 * i
        );
    }

    #[test]
    fn a_late_read_pushes_the_next_back_instead_of_bunching_up() {
        let t0 = Instant::now();
        let i = Duration::from_millis(100);
        // Done 350 ms late: the next is a whole interval away, not at once.
        let now = t0 + Duration::from_millis(450);
        assert_eq!(next_read(t0 + i, now, i), now + i);
    }
}
