//! The live model behind `vmscope top`: raw samples in, one [`Model`] per
//! interval out. `Live` only holds state: the snapshots the samples add up
//! to (the baseline of the latency histograms, the last and the current),
//! and the sparkline history; [`Model::new`] computes what is drawn.

use std::collections::{HashMap, VecDeque};

use crate::model::view::Unavailable;
use crate::model::{sample::Sample, snapshot::Snapshot, view::Model};

/// How many intervals the sparklines cover.
pub const HISTORY: usize = 60;

#[derive(Default)]
pub struct Live {
    /// Where the latencies and elapsed time count from; zero when `None`.
    baseline: Option<Snapshot>,
    last: Option<Snapshot>,
    now: Option<Snapshot>,
    history: HashMap<&'static str, VecDeque<f64>>,
    unavailable: Unavailable,
    /// The working set's window, when it is measured (`--working-set`).
    wss_edges_ns: Option<Vec<u64>>,
}

impl Live {
    pub fn new(unavailable: Unavailable) -> Self {
        Self {
            unavailable,
            ..Default::default()
        }
    }

    /// Probes can attach late (the swap probe): refreshes what is missing.
    pub fn set_unavailable(&mut self, unavailable: Unavailable) {
        self.unavailable = unavailable;
    }

    /// Shows the working set (measured with idle-age edges `edges_ns`, the
    /// window last) as a row of the rates panel.
    pub fn show_working_set(&mut self, edges_ns: Vec<u64>) {
        self.wss_edges_ns = Some(edges_ns);
    }

    /// Starts the latency histograms and elapsed time afresh (`r`).
    pub fn reset(&mut self) {
        self.baseline.clone_from(&self.now);
    }

    /// Takes the next sample; the first one only sets the baseline.
    pub fn push(&mut self, s: Sample) -> Option<Model> {
        let mut next = self.now.clone().unwrap_or_default();
        next.apply(&s);
        // A removed cgroup whose processes have all ended shows nothing
        // more.
        next.retire_gone_cgroups();
        self.last = self.now.replace(next);
        let (now, last) = (self.now.as_ref()?, self.last.as_ref()?);
        let mut model = Model::new(now, Some(last), self.baseline.as_ref(), &self.unavailable);
        if let Some(edges) = &self.wss_edges_ns {
            model.rates.push(working_set_line(now, edges));
            model.working_set = true;
        }
        for r in &mut model.rates {
            let h = self.history.entry(r.name).or_default();
            h.push_back(r.value.unwrap_or(0.0));
            while h.len() > HISTORY {
                h.pop_front();
            }
            r.history = h.iter().copied().collect();
        }
        Some(model)
    }
}

/// The working set's row: the last window's figure in MiB (none until the
/// first window ends: shown as n/a, not 0), its idle ages as the detail.
fn working_set_line(now: &Snapshot, edges_ns: &[u64]) -> crate::model::view::RateLine {
    use crate::model::wss::{idle_bucket_names, window_label};
    const MIB: f64 = 1024.0 * 1024.0;
    let detail = now.wss.as_ref().map(|w| {
        let ages: Vec<String> = idle_bucket_names(edges_ns, "<")
            .into_iter()
            .zip(w.idle_ages())
            .map(|(n, b)| format!("{n} {:.0}M", b as f64 / MIB))
            .collect();
        let window = edges_ns.last().copied().unwrap_or_default();
        format!("{} window; {}", window_label(window), ages.join(", "))
    });
    crate::model::view::RateLine {
        name: "working set",
        unit: "MiB",
        value: now.wss.as_ref().map(|w| w.total_bytes() as f64 / MIB),
        history: Vec::new(),
        unavailable: None,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::catalogue::{faults, swap};
    use crate::model::process::ProcSample;
    use crate::model::sample::FaultCounters;

    fn sample(t_s: u64, procs: Vec<(u32, u64, u64)>, pswpout: u64) -> Sample {
        let faults = |n| {
            let mut f = FaultCounters::default();
            f.user[2] = n;
            f
        };
        Sample {
            elapsed_ns: t_s * 1_000_000_000,
            faults: faults(procs.iter().map(|p| p.1).sum()),
            procs: procs
                .into_iter()
                .map(|(pid, n, out)| ProcSample {
                    pid,
                    comm: format!("p{pid}"),
                    faults: faults(n),
                    swap_out_pages: out,
                    ..Default::default()
                })
                .collect(),
            vmstat: crate::procstat::Vmstat([("pswpout".to_string(), pswpout)].into()),
            ..Default::default()
        }
    }

    #[test]
    fn rates_per_process_and_system_from_changed_only_samples() {
        let mut live = Live::new(Unavailable::new());
        assert!(
            live.push(sample(0, vec![(1, 100, 0), (2, 50, 0)], 10))
                .is_none()
        );
        // pid 2 unchanged (absent from the sample).
        let v = live.push(sample(2, vec![(1, 300, 40)], 50)).expect("view");
        assert_eq!(v.interval_s, 2.0);
        let row = |pid| v.procs.iter().find(|r| r.pid == pid).expect("row").clone();
        assert_eq!(row(1).rates.of(&faults::PROC_FAULTS), Some(100.0));
        assert_eq!(row(1).rates.of(&swap::PROC_OUT), Some(20.0));
        // pid 2 did nothing this interval: not listed.
        assert!(v.procs.iter().all(|r| r.pid != 2));
        let rate = |name| {
            v.rates
                .iter()
                .find(|r| r.name == name)
                .expect("rate")
                .clone()
        };
        assert_eq!(rate("swap-out").value, Some(20.0));
        assert_eq!(rate("swap-out").history, [20.0]);
    }

    #[test]
    fn unavailable_metrics_have_no_value_and_say_why() {
        let mut why = Unavailable::new();
        why.insert(
            "major faults".into(),
            "perf:major-faults not attached".into(),
        );
        why.insert("major".into(), "perf:major-faults not attached".into());
        let mut live = Live::new(why);
        live.push(sample(0, vec![(1, 1, 0)], 0));
        let v = live.push(sample(1, vec![(1, 2, 0)], 0)).expect("view");
        let major = v
            .rates
            .iter()
            .find(|r| r.name == "major faults")
            .expect("rate");
        assert_eq!(major.value, None);
        assert!(major.unavailable.is_some());
        assert_eq!(v.procs[0].rates.of(&faults::PROC_MAJOR), None);
        assert_eq!(v.procs[0].rates.of(&swap::PROC_IN), Some(0.0));
    }

    #[test]
    fn rmap_rates_are_interval_shares_with_their_sample_counts() {
        let with_rmap = |t, walk: u64, other: u64| {
            let mut s = sample(t, vec![(1, t, 0)], 0);
            let mut counts = std::collections::BTreeMap::new();
            counts.insert(
                "rmap_walk".to_string(),
                [("kswapd".to_string(), walk)].into(),
            );
            counts.insert("user".to_string(), [("process".to_string(), other)].into());
            s.rmap = Some(crate::model::rmap::RmapSample {
                counts,
                ..Default::default()
            });
            s
        };
        let mut live = Live::new(Unavailable::new());
        live.push(with_rmap(0, 10, 90));
        let v = live.push(with_rmap(1, 60, 1040)).expect("view");
        let walk = v
            .rates
            .iter()
            .find(|r| r.name == "rmap walk CPU")
            .expect("rate");
        // 50 of 1000 samples this interval.
        assert_eq!(walk.value, Some(5.0));
        assert_eq!(walk.unit, "%");
        let d = walk.detail.as_deref().expect("detail");
        assert!(d.starts_with("sampled: 50 of 1000 samples, ±0.69%"), "{d}");
        let maint = v
            .rates
            .iter()
            .find(|r| r.name == "rmap maintenance CPU")
            .expect("rate");
        assert_eq!(maint.value, Some(0.0));
        // Without the sampler the rows are unknown, not 0.
        let mut live = Live::new(Unavailable::new());
        live.push(sample(0, vec![(1, 1, 0)], 0));
        let v = live.push(sample(1, vec![(1, 2, 0)], 0)).expect("view");
        let walk = v
            .rates
            .iter()
            .find(|r| r.name == "rmap walk CPU")
            .expect("rate");
        assert_eq!(walk.value, None);
    }

    #[test]
    fn history_is_bounded() {
        let mut live = Live::new(Unavailable::new());
        for t in 0..(HISTORY as u64 + 10) {
            live.push(sample(t, vec![(1, t * 10, 0)], 0));
        }
        let v = live.push(sample(100, vec![], 0)).expect("view");
        assert!(v.rates.iter().all(|r| r.history.len() == HISTORY));
    }
}
