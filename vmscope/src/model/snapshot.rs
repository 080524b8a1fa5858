//! The one replay of sparse samples: a [`Sample`] carries only the
//! processes and histograms that changed (and the pids that ended); a
//! [`Snapshot`] is the full cumulative state they add up to at one instant.
//! `top`, `serve`, `record` and the totals all read snapshots, so there is
//! one place that knows how samples add up.

use crate::model::process::ProcSample;
use std::collections::BTreeMap;

use crate::{
    model::{
        cgroup::CgroupState,
        hist::HistSample,
        rmap::RmapSample,
        sample::{FaultCounters, MadviseCounts, Sample},
    },
    procstat::{Psi, Vmstat},
};

/// Everything known, cumulative, at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Monotonic time since the source started.
    pub elapsed_ns: u64,
    pub timestamp: String,
    /// System-wide counters.
    pub faults: FaultCounters,
    pub counters: BTreeMap<String, u64>,
    pub madvise: Vec<MadviseCounts>,
    pub vmstat: Vmstat,
    pub psi: Option<Psi>,
    pub cpu: Option<crate::procstat::CpuTimes>,
    pub stall_ns_by_cpu: Vec<u64>,
    /// The latest stack-sampling reading (its `counts` are cumulative; its
    /// `procs` are those of that sample only).
    pub rmap: Option<RmapSample>,
    /// Every histogram seen, by name, as it last was.
    pub hists: BTreeMap<String, HistSample>,
    /// Every live process, by pid.
    pub procs: BTreeMap<u32, ProcSample>,
    /// Every cgroup a process was seen in, by id.
    pub cgroups: BTreeMap<u64, CgroupState>,
    /// The pids whose processes ended at the latest sample applied. A pid
    /// here that is also in `procs` is a new process under a reused pid:
    /// its counters started from zero.
    pub ended: Vec<u32>,
    /// Processes seen without a cgroup (their entry read before its
    /// cgroup was known), by pid: what was charged of them when they were
    /// last seen with one (none: nothing). Their growth is charged from
    /// there once their cgroup is known.
    uncharged: BTreeMap<u32, Option<Box<ProcSample>>>,
    /// The last working-set window that finished (`--working-set`).
    pub wss: Option<crate::model::wss::WssSample>,
    /// The swap tiers as last reported.
    pub tiers: Option<crate::model::tiers::TierSample>,
}

impl Snapshot {
    /// The state after `samples`, from nothing.
    pub fn replay<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Self {
        let mut snap = Self::default();
        for s in samples {
            snap.apply(s);
        }
        snap
    }

    /// Moves on to `s`: system-wide figures are replaced, changed processes
    /// and histograms updated, absent ones kept. Ended processes are
    /// forgotten before `s.procs` is applied (a pid there may be reused)
    /// and returned with their final values.
    pub fn apply(&mut self, s: &Sample) -> Vec<ProcSample> {
        self.elapsed_ns = s.elapsed_ns;
        self.timestamp.clone_from(&s.timestamp);
        self.faults = s.faults;
        self.counters.clone_from(&s.counters);
        self.madvise.clone_from(&s.madvise);
        self.vmstat.clone_from(&s.vmstat);
        self.psi = s.psi;
        self.cpu.clone_from(&s.cpu);
        self.stall_ns_by_cpu.clone_from(&s.stall_ns_by_cpu);
        self.rmap.clone_from(&s.rmap);
        if let Some(w) = s.working_set.last() {
            self.wss = Some(w.clone());
        }
        if let Some(t) = &s.swap_tiers {
            self.tiers = Some(t.clone());
        }
        for h in &s.hists {
            self.hists.insert(h.name.clone(), h.clone());
        }
        self.ended.clone_from(&s.exited);
        let gone: Vec<ProcSample> = s
            .exited
            .iter()
            .filter_map(|pid| self.procs.remove(pid))
            .collect();
        for p in &gone {
            self.uncharged.remove(&p.pid);
            if let Some(c) = self.cgroups.get_mut(&p.cgroup) {
                c.live = c.live.saturating_sub(1);
            }
        }
        for p in &s.procs {
            self.charge(p);
            self.procs.insert(p.pid, p.clone());
        }
        for id in &s.cgroups_gone {
            if let Some(c) = self.cgroups.get_mut(id) {
                c.gone_ns = Some(s.elapsed_ns);
            }
        }
        for c in &s.cgroups {
            let state = self.cgroups.entry(c.id).or_default();
            if c.path.is_some() {
                state.path.clone_from(&c.path);
            }
            if c.books.is_some() {
                state.books.clone_from(&c.books);
            }
            if c.container_name.is_some() {
                state.container_name.clone_from(&c.container_name);
            }
            if c.page_cache_removed.is_some() {
                state.page_cache_removed = c.page_cache_removed;
            }
        }
        gone
    }

    /// Charges `p`'s growth since the last sample to the cgroup it is in
    /// now (a process that moved is charged to its new cgroup from there).
    fn charge(&mut self, p: &ProcSample) {
        let old = self.procs.get(&p.pid);
        if p.cgroup == 0 {
            self.uncharged
                .entry(p.pid)
                .or_insert_with(|| old.map(|o| Box::new(o.clone())));
        } else {
            let pending = self.uncharged.remove(&p.pid);
            let base = match &pending {
                Some(b) => b.as_deref(),
                None => old,
            };
            self.cgroups
                .entry(p.cgroup)
                .or_default()
                .counts
                .add_growth(p, base);
        }
        let was = old.map(|o| o.cgroup);
        if was != Some(p.cgroup) {
            if let Some(c) = was.and_then(|w| self.cgroups.get_mut(&w)) {
                c.live = c.live.saturating_sub(1);
            }
            if p.cgroup != 0 {
                self.cgroups.entry(p.cgroup).or_default().live += 1;
            }
        }
    }

    /// Takes out the cgroups removed at an earlier sample than the latest
    /// whose processes have all ended: their figures are final. (One
    /// sample's grace, for the counts of processes read after their
    /// cgroup went.)
    pub fn retire_gone_cgroups(&mut self) -> Vec<(u64, CgroupState)> {
        let now = self.elapsed_ns;
        let done: Vec<u64> = self
            .cgroups
            .iter()
            .filter(|(_, c)| c.live == 0 && c.gone_ns.is_some_and(|t| t < now))
            .map(|(&id, _)| id)
            .collect();
        done.into_iter()
            .filter_map(|id| Some((id, self.cgroups.remove(&id)?)))
            .collect()
    }

    /// Whether `pid`'s process started afresh at the latest sample (its
    /// pid's previous process ended there).
    pub fn reborn(&self, pid: u32) -> bool {
        self.ended.contains(&pid)
    }

    /// `pid`'s process as it was in `last`, the snapshot before this one;
    /// `None` when it is new (or a new process under a reused pid).
    pub fn before<'a>(&self, last: &'a Snapshot, pid: u32) -> Option<&'a ProcSample> {
        if self.reborn(pid) {
            return None;
        }
        last.procs.get(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, comm: &str, madvise_calls: u64) -> ProcSample {
        ProcSample {
            pid,
            comm: comm.into(),
            madvise_calls,
            ..Default::default()
        }
    }

    fn hist(name: &str, sum_ns: u64) -> HistSample {
        HistSample {
            name: name.into(),
            sum_ns,
            buckets: vec![[3, 1]],
        }
    }

    fn in_cgroup(pid: u32, cgroup: u64, madvise_calls: u64) -> ProcSample {
        ProcSample {
            cgroup,
            ..proc(pid, "p", madvise_calls)
        }
    }

    /// A cgroup is charged its processes' growth while they are in it: a
    /// process that moves takes none of its past along, an ended one's
    /// counts stay, and a reused pid starts from zero.
    #[test]
    fn cgroups_are_charged_the_growth_of_their_processes() {
        let mut snap = Snapshot::default();
        let calls = |snap: &Snapshot, id: u64| snap.cgroups[&id].counts.madvise_calls;
        snap.apply(&Sample {
            procs: vec![
                in_cgroup(1, 10, 4),
                in_cgroup(2, 10, 1),
                in_cgroup(3, 20, 2),
            ],
            ..Default::default()
        });
        assert_eq!((calls(&snap, 10), calls(&snap, 20)), (5, 2));
        assert_eq!((snap.cgroups[&10].live, snap.cgroups[&20].live), (2, 1));
        // Pid 1 moves to 20 and grows by 3 there; pid 2 ends.
        snap.apply(&Sample {
            procs: vec![in_cgroup(1, 20, 7)],
            exited: vec![2],
            ..Default::default()
        });
        assert_eq!((calls(&snap, 10), calls(&snap, 20)), (5, 5));
        assert_eq!((snap.cgroups[&10].live, snap.cgroups[&20].live), (0, 2));
        // Pid 3 ends and a new process takes its pid, in 10.
        snap.apply(&Sample {
            procs: vec![in_cgroup(3, 10, 1)],
            exited: vec![3],
            ..Default::default()
        });
        assert_eq!((calls(&snap, 10), calls(&snap, 20)), (6, 5));
        // A process whose cgroup is unknown is charged to none.
        snap.apply(&Sample {
            procs: vec![in_cgroup(9, 0, 100)],
            ..Default::default()
        });
        assert!(!snap.cgroups.contains_key(&0));
    }

    /// A process read before its cgroup was known (its entry's first
    /// counts, from a CPU's cache) is charged everything once it is, and a
    /// known one read once without loses nothing either.
    #[test]
    fn growth_seen_without_a_cgroup_is_charged_once_the_cgroup_is_known() {
        let mut snap = Snapshot::default();
        let calls = |snap: &Snapshot, id: u64| snap.cgroups[&id].counts.madvise_calls;
        snap.apply(&Sample {
            procs: vec![in_cgroup(1, 0, 34)],
            ..Default::default()
        });
        assert!(snap.cgroups.is_empty());
        snap.apply(&Sample {
            procs: vec![in_cgroup(1, 155, 8000)],
            ..Default::default()
        });
        assert_eq!(calls(&snap, 155), 8000);
        snap.apply(&Sample {
            procs: vec![in_cgroup(1, 0, 8100)],
            ..Default::default()
        });
        snap.apply(&Sample {
            procs: vec![in_cgroup(1, 155, 8200)],
            ..Default::default()
        });
        assert_eq!(calls(&snap, 155), 8200);
        // Ended while unknown: nothing is left waiting.
        snap.apply(&Sample {
            procs: vec![in_cgroup(2, 0, 5)],
            ..Default::default()
        });
        snap.apply(&Sample {
            exited: vec![2],
            ..Default::default()
        });
        assert!(snap.uncharged.is_empty());
    }

    #[test]
    fn absent_processes_and_histograms_keep_their_last_values() {
        let mut snap = Snapshot::default();
        snap.apply(&Sample {
            elapsed_ns: 1,
            procs: vec![proc(1, "a", 1), proc(2, "b", 5)],
            hists: vec![hist("reclaim_direct", 10), hist("madvise_free", 7)],
            ..Default::default()
        });
        let gone = snap.apply(&Sample {
            elapsed_ns: 2,
            procs: vec![proc(1, "a", 3)],
            hists: vec![hist("reclaim_direct", 30)],
            ..Default::default()
        });
        assert!(gone.is_empty());
        assert_eq!(snap.elapsed_ns, 2);
        assert_eq!(snap.procs[&1].madvise_calls, 3);
        assert_eq!(snap.procs[&2].madvise_calls, 5);
        assert_eq!(snap.hists["reclaim_direct"].sum_ns, 30);
        assert_eq!(snap.hists["madvise_free"].sum_ns, 7);
    }

    #[test]
    fn system_wide_figures_are_replaced_not_kept() {
        let mut snap = Snapshot::default();
        let mut first = Sample {
            counters: [("tlb_remote_send_ipi".to_string(), 4)].into(),
            psi: Some(Psi::default()),
            ..Default::default()
        };
        first.faults.gup = 9;
        snap.apply(&first);
        snap.apply(&Sample::default());
        assert_eq!(snap.faults.gup, 0);
        assert!(snap.counters.is_empty());
        assert_eq!(snap.psi, None);
    }

    #[test]
    fn an_ended_process_goes_before_a_reused_pid_arrives_in_the_same_sample() {
        let mut snap = Snapshot::default();
        snap.apply(&Sample {
            procs: vec![proc(5, "alpha", 9), proc(6, "other", 1)],
            ..Default::default()
        });
        let last = snap.clone();
        let gone = snap.apply(&Sample {
            exited: vec![5, 6],
            procs: vec![proc(5, "beta", 2)],
            ..Default::default()
        });
        assert_eq!(gone, [proc(5, "alpha", 9), proc(6, "other", 1)]);
        assert_eq!(snap.procs.keys().copied().collect::<Vec<_>>(), [5]);
        assert_eq!(snap.procs[&5].comm, "beta");
        // beta is not alpha grown: it has no earlier value.
        assert!(snap.reborn(5));
        assert_eq!(snap.before(&last, 5), None);
        // The next sample's ended list is its own.
        let last = snap.clone();
        let gone = snap.apply(&Sample {
            procs: vec![proc(5, "beta", 4)],
            ..Default::default()
        });
        assert!(gone.is_empty() && !snap.reborn(5));
        assert_eq!(snap.before(&last, 5).map(|p| p.madvise_calls), Some(2));
    }

    #[test]
    fn an_exited_pid_never_seen_is_ignored() {
        let mut snap = Snapshot::default();
        let gone = snap.apply(&Sample {
            exited: vec![42],
            ..Default::default()
        });
        assert!(gone.is_empty() && snap.procs.is_empty());
    }

    #[test]
    fn replay_is_applying_every_sample_in_turn() {
        let samples = [
            Sample {
                procs: vec![proc(1, "a", 1)],
                hists: vec![hist("x", 1)],
                ..Default::default()
            },
            Sample {
                exited: vec![1],
                elapsed_ns: 5,
                ..Default::default()
            },
        ];
        let snap = Snapshot::replay(&samples);
        assert!(snap.procs.is_empty());
        assert_eq!(snap.hists["x"].sum_ns, 1);
        assert_eq!((snap.elapsed_ns, snap.ended.as_slice()), (5, &[1][..]));
    }

    /// A removed cgroup is retired once none of its processes is alive and
    /// a sample has passed since it went; an alive one never is.
    #[test]
    fn a_removed_cgroup_is_retired_once_its_processes_have_ended() {
        let mut snap = Snapshot::default();
        let at = |t: u64, procs, exited, gone| Sample {
            elapsed_ns: t,
            procs,
            exited,
            cgroups_gone: gone,
            ..Default::default()
        };
        snap.apply(&at(
            1,
            vec![in_cgroup(1, 10, 5), in_cgroup(2, 20, 5)],
            vec![],
            vec![],
        ));
        // Cgroup 10 removed while pid 1 is still counted live.
        snap.apply(&at(2, vec![], vec![], vec![10]));
        assert!(snap.retire_gone_cgroups().is_empty(), "pid 1 not ended yet");
        snap.apply(&at(3, vec![], vec![1], vec![]));
        let retired = snap.retire_gone_cgroups();
        assert_eq!(retired.len(), 1);
        assert_eq!((retired[0].0, retired[0].1.counts.madvise_calls), (10, 5));
        assert_eq!(snap.cgroups.keys().copied().collect::<Vec<_>>(), [20]);
        // Removed and emptied at the same sample: one sample's grace.
        snap.apply(&at(4, vec![], vec![2], vec![20]));
        assert!(snap.retire_gone_cgroups().is_empty());
        snap.apply(&at(5, vec![], vec![], vec![]));
        assert_eq!(snap.retire_gone_cgroups().len(), 1);
        assert!(snap.cgroups.is_empty());
    }
}
