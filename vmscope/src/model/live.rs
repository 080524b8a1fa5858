//! The live model behind `vmscope top`: raw samples in, per-interval rates
//! out (system-wide and per process), with a short history for sparklines
//! and the latency histograms since the start (or the last reset). Pure: it
//! never touches the kernel, so it is tested with hand-made samples.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::{
    model::{
        catalogue::{self, Detail, RateValue},
        hist::{self, HistSample, Summary},
        sample::{ProcSample, Sample},
    },
    procstat::Psi,
};

/// How many intervals the sparklines cover.
pub const HISTORY: usize = 60;

/// One system-wide rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Rate {
    pub name: &'static str,
    pub unit: &'static str,
    /// This interval's value; `None` when unknown for this interval.
    pub value: Option<f64>,
    /// Oldest first, at most `HISTORY` values.
    pub history: Vec<f64>,
    /// Why the metric is not available on this kernel at all.
    pub unavailable: Option<String>,
    /// The largest parts this interval (TLB flushes by reason, madvise by
    /// behaviour), e.g. `dontneed 300, free 120`.
    pub detail: Option<String>,
}

/// The non-zero parts, largest first, at most three.
fn breakdown(mut parts: Vec<(String, f64)>) -> Option<String> {
    parts.retain(|(_, v)| *v > 0.0);
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    let text: Vec<String> = parts
        .iter()
        .take(3)
        .map(|(k, v)| {
            format!(
                "{k} {}",
                if *v < 10.0 {
                    format!("{v:.1}")
                } else {
                    format!("{v:.0}")
                }
            )
        })
        .collect();
    (!text.is_empty()).then(|| text.join(", "))
}

/// One process over the last interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcRow {
    pub pid: u32,
    pub comm: String,
    pub faults: f64,
    pub major: Option<f64>,
    /// Direct plus memcg reclaim stall, milliseconds per second.
    pub reclaim_ms: f64,
    pub swap_in: Option<f64>,
    pub swap_out: Option<f64>,
    pub madvise: f64,
    pub shootdowns: f64,
}

/// A latency histogram since the start or the last reset.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    pub name: String,
    pub summary: Summary,
}

/// What the views draw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    pub interval_s: f64,
    pub rates: Vec<Rate>,
    pub procs: Vec<ProcRow>,
    pub latencies: Vec<Latency>,
    pub psi: Option<Psi>,
    /// Seconds since the start (or the last reset).
    pub elapsed_s: f64,
}

/// Which optional metrics this kernel provides: metric name -> reason it
/// does not. Names are those of `Rate::name`, or `major`/`swap` for the
/// per-process columns.
pub type Unavailable = BTreeMap<String, String>;

/// Accumulates samples (which carry only changed processes and histograms)
/// into full state and derives each interval's view.
#[derive(Default)]
pub struct Live {
    procs: HashMap<u32, ProcSample>,
    hists: HashMap<String, HistSample>,
    baseline_hists: HashMap<String, HistSample>,
    baseline_ns: u64,
    prev: Option<Sample>,
    prev_procs: HashMap<u32, ProcSample>,
    prev_hist_sums: HashMap<String, u64>,
    history: HashMap<&'static str, VecDeque<f64>>,
    unavailable: Unavailable,
}

fn per_s(then: u64, now: u64, dt: f64) -> Option<f64> {
    let d = now.checked_sub(then)?;
    (dt > 0.0).then(|| d as f64 / dt)
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

    /// Starts the latency histograms and elapsed time afresh (`r`).
    pub fn reset(&mut self) {
        self.baseline_hists = self.hists.clone();
        self.baseline_ns = self.prev.as_ref().map_or(0, |s| s.elapsed_ns);
    }

    /// Takes the next sample; the first one only sets the baseline.
    pub fn push(&mut self, s: Sample) -> Option<View> {
        // Ended processes go (a pid's next process then counts from zero).
        for pid in &s.exited {
            self.procs.remove(pid);
            self.prev_procs.remove(pid);
        }
        for p in &s.procs {
            self.procs.insert(p.pid, p.clone());
        }
        for h in &s.hists {
            self.hists.insert(h.name.clone(), h.clone());
        }
        let hist_sums: HashMap<String, u64> = self
            .hists
            .iter()
            .map(|(k, h)| (k.clone(), h.sum_ns))
            .collect();
        let view = self.prev.as_ref().map(|prev| {
            let dt = s.elapsed_ns.saturating_sub(prev.elapsed_ns) as f64 / 1e9;
            View {
                interval_s: dt,
                rates: Vec::new(),
                procs: self.proc_rows(dt),
                latencies: self.latencies(),
                psi: s.psi,
                elapsed_s: s.elapsed_ns.saturating_sub(self.baseline_ns) as f64 / 1e9,
            }
        });
        let prev = self.prev.take();
        let view = view.map(|mut v| {
            v.rates = self.rates(prev.as_ref(), &s, &hist_sums, v.interval_s);
            v
        });
        self.prev_procs = self.procs.clone();
        self.prev_hist_sums = hist_sums;
        self.prev = Some(s);
        view
    }

    fn latencies(&self) -> Vec<Latency> {
        let mut out: Vec<Latency> = self
            .hists
            .iter()
            .filter_map(|(name, h)| {
                let summary = hist::summarize(self.baseline_hists.get(name), h)?;
                (summary.count > 0).then(|| Latency {
                    name: name.clone(),
                    summary,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    fn proc_rows(&self, dt: f64) -> Vec<ProcRow> {
        let avail_major = !self.unavailable.contains_key("major");
        let avail_swap = !self.unavailable.contains_key("swap");
        let mut rows = Vec::new();
        for (pid, now) in &self.procs {
            let then = self.prev_procs.get(pid).cloned().unwrap_or_default();
            let r = |a: u64, b: u64| per_s(a, b, dt).unwrap_or(0.0);
            let faults = |p: &ProcSample| p.faults.total();
            let reclaim_ns = |p: &ProcSample| p.direct_reclaim_ns + p.memcg_reclaim_ns;
            let row = ProcRow {
                pid: *pid,
                comm: now.comm.clone(),
                faults: r(faults(&then), faults(now)),
                major: avail_major.then(|| r(then.major_faults, now.major_faults)),
                reclaim_ms: r(reclaim_ns(&then), reclaim_ns(now)) / 1e6,
                swap_in: avail_swap.then(|| r(then.swap_in_pages, now.swap_in_pages)),
                swap_out: avail_swap.then(|| r(then.swap_out_pages, now.swap_out_pages)),
                madvise: r(then.madvise_calls, now.madvise_calls),
                shootdowns: r(then.tlb_shootdowns, now.tlb_shootdowns),
            };
            // An activity view: a process that did nothing this interval
            // (or has exited) is left out.
            let active = row.faults > 0.0
                || row.major.unwrap_or(0.0) > 0.0
                || row.reclaim_ms > 0.0
                || row.swap_in.unwrap_or(0.0) > 0.0
                || row.swap_out.unwrap_or(0.0) > 0.0
                || row.madvise > 0.0
                || row.shootdowns > 0.0;
            if active {
                rows.push(row);
            }
        }
        rows
    }

    fn rates(
        &mut self,
        prev: Option<&Sample>,
        s: &Sample,
        hist_sums: &HashMap<String, u64>,
        dt: f64,
    ) -> Vec<Rate> {
        let Some(a) = prev else { return Vec::new() };
        let counter = |name: &str| per_s(*a.counters.get(name)?, *s.counters.get(name)?, dt);
        let vmstat = |k: &str| per_s(a.vmstat.get(k)?, s.vmstat.get(k)?, dt);
        let hist_ms = |name: &str| {
            let now = hist_sums.get(name).copied().unwrap_or(0);
            let then = self.prev_hist_sums.get(name).copied().unwrap_or(0);
            per_s(then, now, dt).map(|v| v / 1e6)
        };
        // With the perf fallback every fault is unclassified: show it as user.
        let user = per_s(
            a.faults.user.iter().sum::<u64>() + a.faults.unclassified,
            s.faults.user.iter().sum::<u64>() + s.faults.unclassified,
            dt,
        );
        let kernel = per_s(
            a.faults.kernel.iter().sum(),
            s.faults.kernel.iter().sum(),
            dt,
        );
        let counters = |names: &[&str]| names.iter().map(|n| counter(n)).sum::<Option<f64>>();
        let madvise = per_s(
            a.madvise.iter().map(|m| m.calls).sum(),
            s.madvise.iter().map(|m| m.calls).sum(),
            dt,
        );
        let madvise_detail = || {
            breakdown(
                s.madvise
                    .iter()
                    .filter_map(|m| {
                        let then = a
                            .madvise
                            .iter()
                            .find(|x| x.behavior == m.behavior)
                            .map_or(0, |x| x.calls);
                        Some((m.behavior.clone(), per_s(then, m.calls, dt)?))
                    })
                    .collect(),
            )
        };
        let rmap = match (&a.rmap, &s.rmap) {
            (Some(x), Some(y)) => crate::model::rmap::interval(x, y),
            _ => None,
        };
        let rmap_part = |v: RateValue| -> Option<u64> {
            let r = rmap?;
            match v {
                RateValue::RmapWalk => Some(r.walk),
                RateValue::RmapMaintenance => Some(r.maintenance),
                _ => None,
            }
        };
        let rmap_detail = |v: RateValue| {
            let (r, part) = (rmap?, rmap_part(v)?);
            let (_, err) = r.percent(part)?;
            Some(format!(
                "sampled: {part} of {} samples, ±{err:.2}%",
                r.total
            ))
        };
        let mut out = Vec::with_capacity(catalogue::RATES.len());
        for row in catalogue::RATES {
            let value = match row.value {
                RateValue::FaultsUser => user,
                RateValue::FaultsKernel => kernel,
                RateValue::FaultsGup => per_s(a.faults.gup, s.faults.gup, dt),
                RateValue::Counters(names) => counters(names),
                RateValue::Vmstat(key) => vmstat(key),
                RateValue::HistMs(name) => hist_ms(name),
                RateValue::MadviseCalls => madvise,
                v @ (RateValue::RmapWalk | RateValue::RmapMaintenance) => {
                    rmap.and_then(|r| r.percent(rmap_part(v)?)).map(|(p, _)| p)
                }
            };
            let unavailable = self.unavailable.get(row.label).cloned();
            let value = if unavailable.is_some() { None } else { value };
            let h = self.history.entry(row.label).or_default();
            h.push_back(value.unwrap_or(0.0));
            while h.len() > HISTORY {
                h.pop_front();
            }
            let detail = match row.detail {
                Detail::None => None,
                Detail::Breakdown(parts) => breakdown(
                    parts
                        .iter()
                        .filter_map(|(k, n)| Some((k.to_string(), counter(n)?)))
                        .collect(),
                ),
                Detail::MadviseBehaviours => madvise_detail(),
                Detail::RmapSamples => rmap_detail(row.value),
            };
            out.push(Rate {
                name: row.label,
                unit: row.unit,
                value,
                history: h.iter().copied().collect(),
                unavailable,
                detail,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(row(1).faults, 100.0);
        assert_eq!(row(1).swap_out, Some(20.0));
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
        assert_eq!(v.procs[0].major, None);
        assert_eq!(v.procs[0].swap_in, Some(0.0));
    }

    #[test]
    fn breakdown_lists_the_largest_non_zero_parts() {
        let parts = vec![
            ("free".to_string(), 120.0),
            ("cold".to_string(), 0.0),
            ("dontneed".to_string(), 300.0),
            ("willneed".to_string(), 2.5),
            ("pageout".to_string(), 1.0),
        ];
        assert_eq!(
            breakdown(parts).as_deref(),
            Some("dontneed 300, free 120, willneed 2.5")
        );
        assert_eq!(breakdown(vec![("x".into(), 0.0)]), None);
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
