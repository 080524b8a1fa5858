//! The flight recorder (`on_oom`: the recordings it writes at OOM kills).
//! This file: the last few minutes of samples, kept in memory so
//! that a recording of them can be written when something happens (an OOM
//! kill for `serve --on-oom`; `top` can keep one the same way).
//!
//! Samples are sparse (a process or histogram that did not change is left
//! out), so a window cut from a stream is not a recording by itself. The
//! window's first sample is therefore made self-contained from the state
//! that every sample before it adds up to (a [`Snapshot`]): every
//! histogram, the live processes' cgroups with their books, the system-wide
//! counters as they stood. Per-process counters are counted from the
//! window's start, as a `record` started then would count them (its maps
//! start empty), so a recording of the window says what each process and
//! cgroup did in the window, not since `serve` started.

pub mod on_oom;

use std::{
    collections::{BTreeMap, VecDeque},
    time::{Duration, SystemTime},
};

use crate::{
    document,
    model::{
        cgroup::CgroupSample,
        fold::Fold,
        probes::ProbeStatus,
        process::ProcSample,
        recording::{Header, Recording, TOP_PROCESSES},
        sample::Sample,
        snapshot::Snapshot,
    },
};

/// The most samples kept, whatever the window (the oldest go first).
pub const MAX_SAMPLES: usize = 3600;

/// The longest window accepted.
pub const MAX_WINDOW: Duration = Duration::from_secs(3600);

/// The last `window` of samples, and the state before them.
pub struct Flight {
    window: Duration,
    /// The samples in the window, oldest first, as they came.
    ring: VecDeque<Sample>,
    /// What every sample that left the window adds up to.
    base: Snapshot,
    /// The last sample that left the window (its system-wide fields are
    /// the state at the window's start).
    before: Option<Sample>,
}

impl Flight {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            ring: VecDeque::new(),
            base: Snapshot::default(),
            before: None,
        }
    }

    pub fn window(&self) -> Duration {
        self.window
    }

    /// How many samples the window holds now.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Takes the next sample; those older than the window (counted back
    /// from this one) leave it, folded into the state before it.
    pub fn push(&mut self, s: &Sample) {
        self.ring.push_back(s.clone());
        let window = u64::try_from(self.window.as_nanos()).unwrap_or(u64::MAX);
        let from = s.elapsed_ns.saturating_sub(window);
        while self.ring.len() > 1
            && (self.ring.len() > MAX_SAMPLES
                || self.ring.front().is_some_and(|f| f.elapsed_ns < from))
        {
            let Some(old) = self.ring.pop_front() else {
                break;
            };
            self.base.apply(&old);
            // Cgroups with no live process are not listed at the start
            // (and are forgotten here, so the state stays bounded).
            self.base.cgroups.retain(|_, c| c.live > 0);
            self.before = Some(old);
        }
    }

    /// The window's samples, the first self-contained, per-process
    /// counters counted from the window's start.
    pub fn samples(&self) -> Vec<Sample> {
        let mut out = Vec::with_capacity(self.ring.len() + 1);
        if let Some(b) = &self.before {
            out.push(self.start(b));
        }
        let mut base: BTreeMap<u32, &ProcSample> =
            self.base.procs.iter().map(|(k, v)| (*k, v)).collect();
        for s in &self.ring {
            for pid in &s.exited {
                base.remove(pid);
            }
            let mut s = s.clone();
            for p in &mut s.procs {
                if let Some(b) = base.get(&p.pid) {
                    *p = since(p, b);
                }
            }
            out.push(s);
        }
        out
    }

    /// The window's first sample: the state every sample before it added
    /// up to, with no process growth yet.
    fn start(&self, before: &Sample) -> Sample {
        let mut s = before.clone();
        s.procs = Vec::new();
        s.exited = Vec::new();
        s.oom_kills = Vec::new();
        s.hists = self.base.hists.values().cloned().collect();
        s.cgroups = self
            .base
            .cgroups
            .iter()
            .map(|(&id, c)| CgroupSample {
                id,
                path: c.path.clone(),
                books: c.books.clone(),
                container_name: c.container_name.clone(),
                page_cache_removed: c.page_cache_removed,
            })
            .collect();
        s
    }

    /// A complete recording of the window, as `record` writes one:
    /// `header` gives what is known of the source (its `start_time` is
    /// replaced by the window's), `probes` their status now.
    pub fn recording(&self, header: Header, probes: &[ProbeStatus]) -> Option<Recording> {
        let samples = self.samples();
        let (first, last) = (samples.first()?, samples.last()?);
        let mut fold = Fold::new(TOP_PROCESSES);
        for s in &samples {
            fold.push(s);
        }
        let duration = Duration::from_nanos(last.elapsed_ns.saturating_sub(first.elapsed_ns));
        let end_wall =
            humantime::parse_rfc3339(&last.timestamp).unwrap_or_else(|_| SystemTime::now());
        let header = Header {
            start_time: first.timestamp.clone(),
            ..header
        };
        Some(document::assemble(document::Parts {
            fold,
            samples,
            probes: probes.to_vec(),
            limit: TOP_PROCESSES,
            header,
            end_wall,
            duration,
            interrupted_by: None,
            incomplete: None,
            child: None,
        }))
    }
}

/// `p`'s growth since `base` (the same process earlier).
fn since(p: &ProcSample, base: &ProcSample) -> ProcSample {
    let mut out = ProcSample {
        pid: p.pid,
        comm: p.comm.clone(),
        cgroup: p.cgroup,
        ..Default::default()
    };
    out.add_growth(p, Some(base));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{catalogue::reclaim, cgroup::CgroupBooks, hist::HistSample, oom::OomKill};

    fn proc(pid: u32, cgroup: u64, faults: u64, memcg_ns: u64) -> ProcSample {
        let mut p = ProcSample {
            pid,
            comm: format!("p{pid}"),
            cgroup,
            ..Default::default()
        };
        reclaim::MEMCG.ns.set(&mut p, memcg_ns);
        p.faults.user[0] = faults;
        p
    }

    fn at(secs: u64) -> Sample {
        Sample {
            elapsed_ns: secs * 1_000_000_000,
            timestamp: format!("2025-01-01T00:00:{secs:02}Z"),
            ..Default::default()
        }
    }

    fn header() -> Header {
        let rec: Recording =
            crate::document::from_str(include_str!("../../../tests/fixtures/churn.recording.json"))
                .expect("the fixture is a recording");
        rec.header
    }

    /// A stream of sparse samples: pid 1 faults steadily in cgroup 10 and
    /// is listed only when it changes; a histogram changes once, before
    /// the window; pid 2 ends before the window and its pid is reused in
    /// it; an OOM kill comes at the end.
    fn stream() -> Vec<Sample> {
        let mut v = Vec::new();
        for t in 0..20u64 {
            let mut s = at(t);
            s.faults.user[0] = 1000 + 10 * t;
            if t % 2 == 0 {
                s.procs.push(proc(1, 10, 100 * t, 7 * t));
                s.cgroups.push(CgroupSample {
                    id: 10,
                    path: Some("/a".into()),
                    books: Some(CgroupBooks {
                        usage_bytes: Some(t),
                        ..Default::default()
                    }),
                    container_name: None,
                    page_cache_removed: None,
                });
            }
            match t {
                1 => {
                    s.hists.push(HistSample {
                        name: "reclaim_memcg".into(),
                        sum_ns: 5,
                        buckets: vec![[3, 2]],
                    });
                    s.procs.push(proc(2, 20, 50, 0));
                }
                3 => s.exited.push(2),
                15 => s.procs.push(proc(2, 20, 8, 0)),
                19 => s.oom_kills.push(OomKill {
                    pid: Some(2),
                    cgroup: Some("/b".into()),
                    ..Default::default()
                }),
                _ => {}
            }
            v.push(s);
        }
        v
    }

    /// The window replays to what a `record` started at its first sample
    /// would show: counts from there on, every histogram present at the
    /// start, the reused pid from zero, and the kill.
    #[test]
    fn a_window_replays_as_a_recording_started_at_its_first_sample() {
        let mut f = Flight::new(Duration::from_secs(10));
        for s in &stream() {
            f.push(s);
        }
        let samples = f.samples();
        assert_eq!(samples.len(), 12, "the sample before the window, then 11");
        assert_eq!(samples[0].elapsed_ns, 8_000_000_000);
        assert!(samples[0].procs.is_empty());
        assert_eq!(samples[0].hists.len(), 1, "the histogram from sample 1");
        assert_eq!(samples[0].cgroups.len(), 1, "cgroup 10 is live");
        let snap = Snapshot::replay(&samples);
        // Pid 1: 1800 at t=18 less 800 at t=8 (the last before the window).
        assert_eq!(snap.procs[&1].faults.total(), 1000);
        assert_eq!(reclaim::MEMCG.ns.get(&snap.procs[&1]), 7 * 18 - 7 * 8);
        assert_eq!(snap.procs[&2].faults.total(), 8, "a reused pid from zero");
        assert_eq!(snap.cgroups[&10].counts.faults.total(), 1000);
        let rec = f.recording(header(), &[]).expect("a recording");
        assert_eq!(rec.oom_kills.len(), 1);
        assert_eq!(rec.header.start_time, "2025-01-01T00:00:08Z");
        assert_eq!(rec.duration_ns, 11_000_000_000);
        assert_eq!(rec.totals.system_faults.total, Some(110));
        let row = rec.processes.iter().find(|p| p.pid == 1).expect("pid 1");
        assert_eq!(reclaim::MEMCG.ns.total(row), Some(70));
        let cg = rec.cgroups.iter().find(|c| c.id == 10).expect("cgroup 10");
        assert_eq!(cg.totals.faults.total, Some(1000));
        // It reads back as a recording.
        let text = serde_json::to_string(&rec).expect("encodes");
        crate::document::from_str(&text).expect("reads back");
    }

    /// Before the window has filled, it is the whole stream as it came.
    #[test]
    fn a_young_window_is_the_stream_itself() {
        let mut f = Flight::new(Duration::from_secs(60));
        let stream = stream();
        for s in &stream {
            f.push(s);
        }
        assert_eq!(f.samples(), stream);
        assert_eq!(f.len(), 20);
    }

    #[test]
    fn the_ring_is_bounded_by_the_sample_cap() {
        let mut f = Flight::new(MAX_WINDOW);
        for t in 0..(MAX_SAMPLES as u64 + 50) {
            let mut s = at(0);
            s.elapsed_ns = t * 1_000_000;
            f.push(&s);
        }
        assert_eq!(f.len(), MAX_SAMPLES);
    }
}
