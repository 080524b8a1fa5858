//! How much CPU the reverse map costs: rmap walks (folio_referenced,
//! try_to_unmap, rmap_walk*, folio_mkclean, page_vma_mapped_walk) and rmap
//! maintenance (adding and removing entries on fault, fork, munmap, exit).
//!
//! Mainline has no rmap tracepoint, so there are two methods:
//! - direct timing with fentry/fexit or kprobes where the kernel allows it
//!   (`direct`: which functions exist, what is missed, whether attaching is
//!   permitted);
//! - stack sampling on the cpu-clock perf event (`sampler`), attributed by
//!   the frames on each stack (`categorize`).
//!
//! The samples are cumulative and raw in each [`crate::model::sample::Sample`];
//! [`totals`] turns the first and last into CPU-seconds and shares with
//! their binomial standard errors. Pure: attaching lives in `crate::source::rmap`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod categorize;

use self::categorize::{Category, Context};
use crate::model::{catalogue::probe::RMAP_SAMPLER as PROBE, probes::ProbeStatus};

/// Default sampling rate per CPU: 199 Hz, a prime, so the samples do not
/// beat against timer ticks and other periodic work. At 999 Hz the sampler
/// cost 1.2% of a CPU loop and 5% per page fault in a VM (nearly all of it
/// the cpu-clock interrupts themselves); at 199 Hz a fifth of that, for
/// errors on the shares √5 ≈ 2.2 times larger (`--sample-hz` trades back).
pub const DEFAULT_HZ: u32 = 199;

/// The direct-timing probe's name.
pub const DIRECT_PROBE: &str = crate::model::catalogue::probe::RMAP_DIRECT;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Calls counted and timed (latency histogram).
    Walk,
    /// Calls counted.
    Maintenance,
}

/// How the rmap figures were obtained.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Kernel stacks sampled on cpu-clock: CPU-seconds and shares with a
    /// statistical error, and sample counts.
    #[default]
    StackSampling,
    /// fentry/fexit or kprobes on the rmap functions: call counts and
    /// latency histograms.
    DirectTiming,
}

/// The sampler's (or direct timer's) cumulative counts at one instant
/// (raw, for replay).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RmapSample {
    #[serde(default)]
    pub method: Method,
    /// Samples per second per CPU.
    pub rate_hz: u32,
    /// CPU time each sample stands for.
    pub period_ns: u64,
    pub cpus: u32,
    /// Times the sampling program ran.
    pub samples: u64,
    /// Samples whose stack could not be stored (stack map full or a hash
    /// collision in it).
    pub lost_stack: u64,
    /// Samples whose (process, stack) key did not fit in the count map.
    pub lost_key: u64,
    /// Samples whose stored stack could not be read back.
    pub unresolved: u64,
    /// category -> context -> samples.
    pub counts: BTreeMap<String, BTreeMap<String, u64>>,
    /// Processes whose counts changed since the previous sample.
    #[serde(default)]
    pub procs: Vec<RmapProc>,
    /// Direct timing: per function.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FnSample>,
    /// Direct timing: nanoseconds in outermost rmap walks (a walk inside
    /// another counted once).
    #[serde(default)]
    pub outer_walk_ns: u64,
}

/// One directly timed function's cumulative figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FnSample {
    pub function: String,
    pub kind: Kind,
    pub calls: u64,
    /// Time inside it (walks only; nested walks included).
    pub ns: u64,
    /// Log2-ns latency buckets `[bucket, count]` (walks only).
    pub buckets: Vec<[u64; 2]>,
}

/// One directly timed function over the recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FnTotal {
    pub function: String,
    pub kind: Kind,
    pub calls: u64,
    /// Walks only.
    pub latency: Option<crate::model::hist::Summary>,
}

/// One process's cumulative samples.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RmapProc {
    pub pid: u32,
    pub comm: String,
    /// Every sample taken while this process (or the idle task, pid 0) ran.
    pub samples: u64,
    pub rmap_walk: u64,
    pub rmap_maintenance: u64,
}

/// A part of the sampled CPU time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Share {
    pub samples: u64,
    /// `samples` times the sampling period.
    pub cpu_seconds: f64,
    /// Fraction of all sampled CPU time (every CPU, idle included).
    pub share: f64,
    /// Binomial standard error of `share`: sqrt(share (1 - share) / N).
    pub share_stderr: f64,
}

impl Share {
    fn of(samples: u64, total: u64, period_ns: u64) -> Share {
        let n = total as f64;
        let p = if total > 0 { samples as f64 / n } else { 0.0 };
        Share {
            samples,
            cpu_seconds: samples as f64 * period_ns as f64 / 1e9,
            share: p,
            share_stderr: if total > 0 {
                (p * (1.0 - p) / n).sqrt()
            } else {
                0.0
            },
        }
    }
}

/// One process over the recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RmapProcTotal {
    pub pid: u32,
    pub comm: String,
    pub samples: u64,
    /// Shares of this process's own samples.
    pub rmap_walk: Share,
    pub rmap_maintenance: Share,
}

/// How many processes `RmapTotals::processes` lists (most samples first).
pub const TOP_PROCESSES: usize = 20;

/// The rmap figures of a recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RmapTotals {
    pub method: Method,
    /// Why this method (and why not the other).
    pub method_reason: String,
    pub rate_hz: u32,
    pub cpus: u32,
    /// Samples attributed to a category: the denominator of every share
    /// (0 with direct timing, which counts calls instead).
    pub samples: u64,
    /// Samples that could not be attributed (see `RmapSample`); not in
    /// `samples`.
    pub lost_samples: u64,
    /// CPU time the samples stand for (every CPU, idle included).
    pub sampled_cpu_seconds: f64,
    /// With direct timing: CPU-seconds in outermost walks, share of
    /// elapsed time × CPUs, no error (nothing is sampled).
    pub rmap_walk: Share,
    /// Null with direct timing, which counts maintenance calls but does not
    /// time them.
    pub rmap_maintenance: Option<Share>,
    /// Direct timing: calls of the walk functions and of the maintenance
    /// functions (nested calls each count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk_calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_calls: Option<u64>,
    /// Direct timing: every attached function.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FnTotal>,
    /// Every category, by name.
    pub categories: BTreeMap<String, Share>,
    /// Every context, by name.
    pub contexts: BTreeMap<String, Share>,
    /// context -> category -> samples.
    pub by_context: BTreeMap<String, BTreeMap<String, u64>>,
    /// At most `TOP_PROCESSES` rows, most samples first.
    pub processes: Vec<RmapProcTotal>,
}

/// Samples in one interval: rmap walk, rmap maintenance, all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntervalCounts {
    pub walk: u64,
    pub maintenance: u64,
    pub total: u64,
}

impl IntervalCounts {
    /// `part` as a percentage of all samples with its binomial standard
    /// error, or `None` without samples.
    pub fn percent(&self, part: u64) -> Option<(f64, f64)> {
        (self.total > 0).then(|| {
            let s = Share::of(part, self.total, 0);
            (100.0 * s.share, 100.0 * s.share_stderr)
        })
    }
}

/// What happened between two cumulative samples; `None` when a count went
/// backwards.
pub fn interval(a: &RmapSample, b: &RmapSample) -> Option<IntervalCounts> {
    let sum = |s: &RmapSample, cat: Option<Category>| -> u64 {
        s.counts
            .iter()
            .filter(|(c, _)| cat.is_none_or(|want| want.name() == c.as_str()))
            .flat_map(|(_, m)| m.values())
            .sum()
    };
    let d = |cat| sum(b, cat).checked_sub(sum(a, cat));
    Some(IntervalCounts {
        walk: d(Some(Category::RmapWalk))?,
        maintenance: d(Some(Category::RmapMaintenance))?,
        total: d(None)?,
    })
}

/// Each process's latest counts, keyed by pid and how many processes had
/// ended under that pid before it (`Sample::exited`): a reused pid's
/// processes are told apart.
fn proc_map<'a>(
    samples: impl Iterator<Item = &'a crate::model::sample::Sample>,
) -> BTreeMap<(u32, u32), RmapProc> {
    let mut m = BTreeMap::new();
    let mut ended: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    for s in samples {
        for &pid in &s.exited {
            *ended.entry(pid).or_default() += 1;
        }
        for p in s.rmap.iter().flat_map(|r| &r.procs) {
            let n = ended.get(&p.pid).copied().unwrap_or(0);
            m.insert((p.pid, n), p.clone());
        }
    }
    m
}

/// The rmap totals between the first and last of `samples`, or why there
/// are none. The method and its reason come from the sampler's probe.
pub fn totals(
    samples: &[crate::model::sample::Sample],
    probes: &[ProbeStatus],
) -> Result<RmapTotals, String> {
    if let Some(d) = probes
        .iter()
        .find(|p| p.probe == DIRECT_PROBE && p.attached)
    {
        return direct_totals(samples, d.reason.clone().unwrap_or_default());
    }
    let status = probes.iter().find(|p| p.probe == PROBE);
    let reason = status.and_then(|p| p.reason.clone()).unwrap_or_default();
    match status {
        Some(p) if p.attached => {}
        Some(_) => return Err(reason),
        None => return Err(format!("{PROBE} not attached")),
    }
    sampled_totals(samples, reason)
}

/// Samples by context, then category, between two readings, and their sum.
type ByContext = BTreeMap<String, BTreeMap<String, u64>>;

fn by_context(first: &RmapSample, last: &RmapSample) -> Result<(ByContext, u64), String> {
    let count = |s: &RmapSample, cat: &str, ctx: &str| {
        s.counts
            .get(cat)
            .and_then(|m| m.get(ctx))
            .copied()
            .unwrap_or(0)
    };
    let mut by_context = ByContext::new();
    let mut total = 0u64;
    for cat in Category::ALL {
        for ctx in Context::ALL {
            let d = count(last, cat.name(), ctx.name())
                .checked_sub(count(first, cat.name(), ctx.name()))
                .ok_or("the sample counts went backwards")?;
            if d > 0 {
                by_context
                    .entry(ctx.name().into())
                    .or_default()
                    .insert(cat.name().into(), d);
                total += d;
            }
        }
    }
    Ok((by_context, total))
}

/// The processes with the most samples between the first and the last of
/// `samples` that have a reading.
fn process_totals(samples: &[crate::model::sample::Sample], period: u64) -> Vec<RmapProcTotal> {
    let with_rmap = samples.iter().filter(|s| s.rmap.is_some());
    let at_first = proc_map(with_rmap.clone().take(1));
    let at_last = proc_map(with_rmap);
    let mut processes: Vec<RmapProcTotal> = at_last
        .iter()
        .filter_map(|(key, p)| {
            let f = at_first.get(key).cloned().unwrap_or_default();
            let n = p.samples.checked_sub(f.samples)?;
            (n > 0).then(|| RmapProcTotal {
                pid: p.pid,
                comm: p.comm.clone(),
                samples: n,
                rmap_walk: Share::of(p.rmap_walk.saturating_sub(f.rmap_walk), n, period),
                rmap_maintenance: Share::of(
                    p.rmap_maintenance.saturating_sub(f.rmap_maintenance),
                    n,
                    period,
                ),
            })
        })
        .collect();
    processes.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.pid.cmp(&b.pid)));
    processes.truncate(TOP_PROCESSES);
    processes
}

/// Totals of a stack-sampling recording.
fn sampled_totals(
    samples: &[crate::model::sample::Sample],
    reason: String,
) -> Result<RmapTotals, String> {
    let with: Vec<&RmapSample> = samples.iter().filter_map(|s| s.rmap.as_ref()).collect();
    let (Some(first), Some(last)) = (with.first(), with.last()) else {
        return Err("no sample read from the sampler".into());
    };
    let (by_context, total) = by_context(first, last)?;
    let period = last.period_ns;
    let cat_sum = |cat: Category| -> u64 {
        by_context
            .values()
            .map(|m| m.get(cat.name()).copied().unwrap_or(0))
            .sum()
    };
    let categories = Category::ALL
        .iter()
        .map(|&c| (c.name().to_string(), Share::of(cat_sum(c), total, period)))
        .collect();
    let contexts = Context::ALL
        .iter()
        .map(|&c| {
            let n = by_context.get(c.name()).map_or(0, |m| m.values().sum());
            (c.name().to_string(), Share::of(n, total, period))
        })
        .collect();
    let lost = |s: &RmapSample| s.lost_stack + s.lost_key + s.unresolved;
    Ok(RmapTotals {
        method: Method::StackSampling,
        method_reason: reason,
        rate_hz: last.rate_hz,
        cpus: last.cpus,
        samples: total,
        lost_samples: lost(last).saturating_sub(lost(first)),
        sampled_cpu_seconds: total as f64 * period as f64 / 1e9,
        rmap_walk: Share::of(cat_sum(Category::RmapWalk), total, period),
        rmap_maintenance: Some(Share::of(cat_sum(Category::RmapMaintenance), total, period)),
        walk_calls: None,
        maintenance_calls: None,
        functions: Vec::new(),
        categories,
        contexts,
        processes: process_totals(samples, period),
        by_context,
    })
}

/// Totals of a direct-timing recording.
fn direct_totals(
    samples: &[crate::model::sample::Sample],
    reason: String,
) -> Result<RmapTotals, String> {
    let with: Vec<(u64, &RmapSample)> = samples
        .iter()
        .filter_map(|s| Some((s.elapsed_ns, s.rmap.as_ref()?)))
        .collect();
    let (Some(&(t0, first)), Some(&(t1, last))) = (with.first(), with.last()) else {
        return Err("no sample read from the direct timer".into());
    };
    let mut functions = Vec::new();
    let (mut walk_calls, mut maintenance_calls) = (0u64, 0u64);
    for f in &last.functions {
        let before = first.functions.iter().find(|x| x.function == f.function);
        let calls = f
            .calls
            .checked_sub(before.map_or(0, |b| b.calls))
            .ok_or("the call counts went backwards")?;
        let hist = |s: &FnSample| crate::model::hist::HistSample {
            name: s.function.clone(),
            sum_ns: s.ns,
            buckets: s.buckets.clone(),
        };
        let latency = match f.kind {
            Kind::Walk => {
                walk_calls += calls;
                crate::model::hist::summarize(before.map(hist).as_ref(), &hist(f))
            }
            Kind::Maintenance => {
                maintenance_calls += calls;
                None
            }
        };
        functions.push(FnTotal {
            function: f.function.clone(),
            kind: f.kind,
            calls,
            latency,
        });
    }
    let walk_ns = last
        .outer_walk_ns
        .checked_sub(first.outer_walk_ns)
        .ok_or("the walk time went backwards")?;
    let cpu_time_s = t1.saturating_sub(t0) as f64 / 1e9 * f64::from(last.cpus);
    let cpu_seconds = walk_ns as f64 / 1e9;
    Ok(RmapTotals {
        method: Method::DirectTiming,
        method_reason: reason,
        rate_hz: 0,
        cpus: last.cpus,
        samples: 0,
        lost_samples: 0,
        sampled_cpu_seconds: cpu_time_s,
        rmap_walk: Share {
            samples: 0,
            cpu_seconds,
            share: if cpu_time_s > 0.0 {
                cpu_seconds / cpu_time_s
            } else {
                0.0
            },
            share_stderr: 0.0,
        },
        rmap_maintenance: None,
        walk_calls: Some(walk_calls),
        maintenance_calls: Some(maintenance_calls),
        functions,
        categories: BTreeMap::new(),
        contexts: BTreeMap::new(),
        by_context: BTreeMap::new(),
        processes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample::Sample;

    fn status(attached: bool) -> ProbeStatus {
        ProbeStatus {
            probe: PROBE.into(),
            method: "perf_event".into(),
            attached,
            reason: Some(if attached {
                "rmap method: stack sampling at 199 Hz per CPU".into()
            } else {
                "rmap stack sampling unavailable: /proc/kallsyms shows no kernel addresses".into()
            }),
            deferred: false,
        }
    }

    fn sample(walk: u64, idle: u64, user: u64, procs: Vec<RmapProc>) -> Sample {
        let mut counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        counts
            .entry("rmap_walk".into())
            .or_default()
            .insert("direct_reclaim".into(), walk);
        counts
            .entry("idle".into())
            .or_default()
            .insert("idle".into(), idle);
        counts
            .entry("user".into())
            .or_default()
            .insert("process".into(), user);
        Sample {
            rmap: Some(RmapSample {
                rate_hz: 1000,
                period_ns: 1_000_000,
                cpus: 2,
                samples: walk + idle + user,
                counts,
                procs,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn shares_cpu_seconds_and_binomial_errors_from_first_to_last() {
        let p = |samples, walk| RmapProc {
            pid: 7,
            comm: "w".into(),
            samples,
            rmap_walk: walk,
            rmap_maintenance: 0,
        };
        let s = [
            sample(10, 100, 90, vec![p(20, 10)]),
            sample(210, 600, 390, vec![]),
            sample(410, 1100, 690, vec![p(420, 410)]),
        ];
        let t = totals(&s, &[status(true)]).expect("totals");
        // 400 walk + 1000 idle + 600 user.
        assert_eq!(t.samples, 2000);
        assert_eq!(t.rmap_walk.samples, 400);
        assert!((t.rmap_walk.share - 0.2).abs() < 1e-12);
        assert!((t.rmap_walk.cpu_seconds - 0.4).abs() < 1e-12);
        let se = (0.2f64 * 0.8 / 2000.0).sqrt();
        assert!((t.rmap_walk.share_stderr - se).abs() < 1e-12);
        assert_eq!(t.rmap_maintenance.as_ref().map(|m| m.samples), Some(0));
        assert_eq!(t.contexts["idle"].samples, 1000);
        assert_eq!(t.by_context["direct_reclaim"]["rmap_walk"], 400);
        assert_eq!(t.processes.len(), 1);
        assert_eq!(t.processes[0].samples, 400);
        assert_eq!(t.processes[0].rmap_walk.samples, 400);
        assert!((t.sampled_cpu_seconds - 2.0).abs() < 1e-12);
    }

    #[test]
    fn unavailable_sampling_is_an_error_with_the_reason_not_zero() {
        let s = [sample(0, 0, 0, vec![]), sample(0, 0, 0, vec![])];
        let e = totals(&s, &[status(false)]).expect_err("unavailable");
        assert!(e.contains("kallsyms"), "{e}");
        assert!(totals(&s, &[]).is_err());
    }

    #[test]
    fn direct_timing_totals_are_outermost_walk_time_and_calls() {
        let f = |function: &str, kind, calls, ns, buckets: Vec<[u64; 2]>| FnSample {
            function: function.into(),
            kind,
            calls,
            ns,
            buckets,
        };
        let at = |t_s: u64, walk_calls, outer_ns, fork_calls| Sample {
            elapsed_ns: t_s * 1_000_000_000,
            rmap: Some(RmapSample {
                method: Method::DirectTiming,
                cpus: 2,
                outer_walk_ns: outer_ns,
                functions: vec![
                    f(
                        "try_to_unmap",
                        Kind::Walk,
                        walk_calls,
                        outer_ns,
                        vec![[12, walk_calls]],
                    ),
                    f("anon_vma_fork", Kind::Maintenance, fork_calls, 0, vec![]),
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let probe = ProbeStatus {
            probe: DIRECT_PROBE.into(),
            method: "fentry".into(),
            attached: true,
            reason: Some("rmap method: direct timing: fentry/fexit on 20 rmap functions".into()),
            deferred: false,
        };
        let s = [at(0, 5, 1_000_000, 1), at(10, 1005, 2_001_000_000, 65)];
        let t = totals(&s, &[probe]).expect("totals");
        assert_eq!(t.method, Method::DirectTiming);
        assert!((t.rmap_walk.cpu_seconds - 2.0).abs() < 1e-9);
        // 2 s of 10 s x 2 CPUs.
        assert!((t.rmap_walk.share - 0.1).abs() < 1e-9);
        assert_eq!(t.walk_calls, Some(1000));
        assert_eq!(t.maintenance_calls, Some(64));
        assert_eq!(t.rmap_maintenance, None);
        let unmap = &t.functions[0];
        assert_eq!(unmap.latency.as_ref().map(|l| l.count), Some(1000));
        assert_eq!(t.functions[1].latency, None);
    }

    #[test]
    fn counts_going_backwards_are_unknown() {
        let s = [sample(10, 0, 0, vec![]), sample(5, 0, 0, vec![])];
        assert!(totals(&s, &[status(true)]).is_err());
    }
}
