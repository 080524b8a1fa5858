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
mod totals;
pub use totals::{RmapReading, totals};

use self::categorize::{Category, Context};
use crate::model::probes::{ProbeStatus, names::RMAP_SAMPLER as PROBE};

/// Default sampling rate per CPU: 199 Hz, a prime, so the samples do not
/// beat against timer ticks and other periodic work. At 999 Hz the sampler
/// cost 1.2% of a CPU loop and 5% per page fault in a VM (nearly all of it
/// the cpu-clock interrupts themselves); at 199 Hz a fifth of that, for
/// errors on the shares √5 ≈ 2.2 times larger (`--sample-hz` trades back).
pub const DEFAULT_HZ: u32 = 199;

/// The direct-timing probe's name.
pub const DIRECT_PROBE: &str = crate::model::probes::names::RMAP_DIRECT;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "Kind")]
pub enum RmapFnKind {
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
    /// Samples with a walk anywhere on their stack, whatever the innermost
    /// frame: the TLB flushes a walk made and tracers that fired in it
    /// included (what direct timing's span holds).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inside_walk: u64,
    /// Direct timing: per function.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FnSample>,
    /// Direct timing: nanoseconds in outermost rmap walks (a walk inside
    /// another counted once), the instrumentation inside them included.
    #[serde(default)]
    pub outer_walk_ns: u64,
    /// Direct timing: nanoseconds in outermost maintenance calls (only when
    /// they were asked for).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outer_maintenance_ns: u64,
    /// Direct timing: what timing one call costs on this kernel, measured
    /// at start-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// What timing one call costs on the running kernel, measured when direct
/// timing attaches: the timing programs are loaded on a function of known,
/// tiny cost (`bpf_fentry_test1`, through test runs) and it is called in rounds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Calibration {
    /// The function the programs were loaded on.
    pub function: String,
    pub rounds: u32,
    pub calls_per_round: u64,
    /// Nanoseconds a timed call adds inside its own measured span: what
    /// the programs measured per call of the calibration function (its
    /// own few nanoseconds included). Median of the rounds, then the
    /// smallest and largest round.
    pub inside_ns: f64,
    pub inside_ns_min: f64,
    pub inside_ns_max: f64,
    /// Nanoseconds a timed call costs its caller in all (wall clock per
    /// call with the programs attached minus without, interleaved rounds):
    /// what a call nested inside a timed one adds to it, and what timing
    /// costs the workload. Median, smallest and largest round.
    pub call_ns: f64,
    pub call_ns_min: f64,
    pub call_ns_max: f64,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl Calibration {
    /// From each round's inside and whole cost per call.
    pub fn from_rounds(function: &str, calls: u64, inside: &[f64], whole: &[f64]) -> Calibration {
        let lo = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Calibration {
            function: function.to_string(),
            rounds: u32::try_from(inside.len()).unwrap_or(u32::MAX),
            calls_per_round: calls,
            inside_ns: median(inside),
            inside_ns_min: lo(inside),
            inside_ns_max: hi(inside),
            // A round can come out below zero on a noisy machine; the cost
            // is not negative.
            call_ns: median(whole).max(0.0),
            call_ns_min: lo(whole),
            call_ns_max: hi(whole),
        }
    }

    /// Nanoseconds of `outer` outermost calls with `nested` timed calls
    /// inside them that the instrumentation put into their measured time.
    pub fn bias_ns(&self, outer: u64, nested: u64) -> f64 {
        outer as f64 * self.inside_ns + nested as f64 * self.call_ns.max(self.inside_ns)
    }
}

/// One directly timed function's cumulative figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FnSample {
    pub function: String,
    pub kind: RmapFnKind,
    /// Every call, nested ones included.
    pub calls: u64,
    /// Calls that were the outermost timed call on their thread: the timed
    /// ones.
    #[serde(default)]
    pub outer_calls: u64,
    /// Timed calls (of any function) made inside this one's outermost
    /// calls: their time, and their instrumentation's, is in `ns`.
    #[serde(default)]
    pub nested: u64,
    /// CPU time inside its outermost calls: their wall time less
    /// `off_cpu_ns`.
    pub ns: u64,
    /// Time its outermost calls spent switched out (lock waits,
    /// preemption), seen through the context-switch hook.
    #[serde(default)]
    pub off_cpu_ns: u64,
    /// Log2-ns latency buckets `[bucket, count]` of its outermost calls'
    /// wall time.
    pub buckets: Vec<[u64; 2]>,
}

/// One directly timed function over the recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FnTotal {
    pub function: String,
    pub kind: RmapFnKind,
    pub calls: u64,
    /// Calls that were outermost, and timed calls nested inside them.
    #[serde(default)]
    pub outer_calls: u64,
    #[serde(default)]
    pub nested: u64,
    /// Latency of its outermost calls, as measured (not corrected).
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
    /// Direct timing: the walks' time as measured, before the
    /// instrumentation's own time (`calibration`) is taken out of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmap_walk_measured: Option<Share>,
    /// Direct timing: timed calls made inside other timed calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_calls: Option<u64>,
    /// Direct timing: seconds the walks spent switched out (lock waits,
    /// preemption); their latencies include it, their CPU time does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk_off_cpu_seconds: Option<f64>,
    /// Direct timing: what timing one call costs on this kernel, measured
    /// at start-up; null when it could not be measured (then nothing is
    /// corrected, and `method_reason` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// Direct timing: CPU-seconds the timing cost the workload (timed
    /// calls x the calibrated cost of one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing_cpu_seconds: Option<f64>,
    /// Direct timing with the stack sampler running beside it: the
    /// sampler's figures of the same run (its categories, contexts and
    /// processes fill the fields below).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledFigures>,
    /// Whether the two methods agree on the walks' share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<Agreement>,
    /// Every category, by name.
    pub categories: BTreeMap<String, Share>,
    /// Every context, by name.
    pub contexts: BTreeMap<String, Share>,
    /// context -> category -> samples.
    pub by_context: BTreeMap<String, BTreeMap<String, u64>>,
    /// At most `TOP_PROCESSES` rows, most samples first.
    pub processes: Vec<RmapProcTotal>,
}

/// The stack sampler's figures beside direct timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SampledFigures {
    pub rate_hz: u32,
    pub samples: u64,
    pub lost_samples: u64,
    /// Samples whose innermost categorised frame is a walk's.
    pub rmap_walk: Share,
    /// Samples with a walk anywhere on the stack (its TLB flushes and the
    /// tracers that fired in it included): what direct timing's span
    /// covers, so what the agreement compares.
    pub inside_walk: Share,
    pub rmap_maintenance: Share,
}

/// Direct timing (corrected) against stack sampling, on the walks' share
/// of all CPU time in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Agreement {
    pub direct_share: f64,
    pub sampled_share: f64,
    pub sampled_share_stderr: f64,
    /// The largest difference that counts as agreement: 5 points or a
    /// quarter of the sampled share, whichever is larger.
    pub tolerance: f64,
    pub agree: bool,
    /// One line for people.
    pub summary: String,
}

/// The tolerance of [`agreement`]: max(5 points, 25% of the sampled share).
pub fn tolerance(sampled: f64) -> f64 {
    (0.25 * sampled).max(0.05)
}

/// Whether a corrected direct share and a sampled share of the same
/// workload agree, in words.
pub fn agreement(direct: f64, sampled: f64, sampled_stderr: f64) -> Agreement {
    let tol = tolerance(sampled);
    let agree = (direct - sampled).abs() <= tol;
    let pct = |x: f64| 100.0 * x;
    let summary = if agree {
        format!(
            "rmap walks: {:.1}% of CPU timed directly (corrected), {:.1}% ± {:.1} sampled \
             inside walks: the methods agree (within {:.1} points)",
            pct(direct),
            pct(sampled),
            pct(sampled_stderr),
            pct(tol)
        )
    } else {
        format!(
            "rmap walks: {:.1}% of CPU timed directly (corrected) but {:.1}% ± {:.1} sampled \
             inside walks: the methods disagree by more than {:.1} points; the direct figure may still hold \
             instrumentation cost the calibration missed (cold caches, contention), or the \
             sampler too few samples: check `rmap.calibration` and the sample count",
            pct(direct),
            pct(sampled),
            pct(sampled_stderr),
            pct(tol)
        )
    };
    Agreement {
        direct_share: direct,
        sampled_share: sampled,
        sampled_share_stderr: sampled_stderr,
        tolerance: tol,
        agree,
        summary,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample::Sample;

    /// The totals of whole samples, as `model::totals` asks for them.
    fn totals(s: &[Sample], probes: &[ProbeStatus]) -> Result<RmapTotals, String> {
        super::totals(&s.iter().map(Into::into).collect::<Vec<_>>(), probes)
    }

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

    fn direct_probe() -> ProbeStatus {
        ProbeStatus {
            probe: DIRECT_PROBE.into(),
            method: "fentry".into(),
            attached: true,
            reason: Some("rmap method: direct timing: fentry/fexit on 2 rmap functions".into()),
            deferred: false,
        }
    }

    fn timed(
        t_s: u64,
        walk: (u64, u64, u64, u64),
        fork_calls: u64,
        calibration: Option<Calibration>,
    ) -> Sample {
        let (calls, outer, nested, ns) = walk;
        Sample {
            elapsed_ns: t_s * 1_000_000_000,
            rmap: Some(RmapSample {
                method: Method::DirectTiming,
                cpus: 2,
                outer_walk_ns: ns,
                calibration,
                functions: vec![
                    FnSample {
                        function: "rmap_walk".into(),
                        kind: RmapFnKind::Walk,
                        calls,
                        outer_calls: outer,
                        nested,
                        ns,
                        off_cpu_ns: 0,
                        buckets: vec![[12, outer]],
                    },
                    FnSample {
                        function: "anon_vma_fork".into(),
                        kind: RmapFnKind::Maintenance,
                        calls: fork_calls,
                        outer_calls: fork_calls,
                        nested: 0,
                        off_cpu_ns: 0,
                        ns: fork_calls * 1000,
                        buckets: vec![[10, fork_calls]],
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn direct_timing_totals_are_outermost_walk_time_and_calls() {
        let s = [
            timed(0, (5, 5, 0, 1_000_000), 1, None),
            timed(10, (1005, 1005, 0, 2_001_000_000), 65, None),
        ];
        let t = totals(&s, &[direct_probe()]).expect("totals");
        assert_eq!(t.method, Method::DirectTiming);
        assert!((t.rmap_walk.cpu_seconds - 2.0).abs() < 1e-9);
        // 2 s of 10 s x 2 CPUs.
        assert!((t.rmap_walk.share - 0.1).abs() < 1e-9);
        assert_eq!(t.walk_calls, Some(1000));
        assert_eq!(t.maintenance_calls, Some(64));
        // 64 calls of 1 us, timed because they were attached.
        let m = t.rmap_maintenance.expect("maintenance timed");
        assert!((m.cpu_seconds - 64e-6).abs() < 1e-12);
        assert_eq!(t.functions[0].latency.as_ref().map(|l| l.count), Some(1000));
        assert_eq!(t.calibration, None);
        assert_eq!(t.timing_cpu_seconds, None);
        assert!(t.agreement.is_none(), "no sampler ran beside it");
    }

    #[test]
    fn the_calibrated_cost_of_timing_is_taken_out_of_the_walks() {
        // 1,000 outermost walks with 500 timed calls inside them; timing
        // adds 300 ns inside each span and costs 800 ns per call.
        let cal = Calibration::from_rounds(
            "bpf_fentry_test1",
            4000,
            &[290.0, 300.0, 310.0],
            &[790.0, 800.0, 820.0],
        );
        assert_eq!((cal.inside_ns, cal.call_ns), (300.0, 800.0));
        assert_eq!((cal.inside_ns_min, cal.inside_ns_max), (290.0, 310.0));
        let s = [
            timed(0, (0, 0, 0, 0), 0, Some(cal.clone())),
            timed(10, (1500, 1000, 500, 2_000_000_000), 0, Some(cal)),
        ];
        let t = totals(&s, &[direct_probe()]).expect("totals");
        let bias = 1000.0 * 300.0 + 500.0 * 800.0;
        assert!(
            (t.rmap_walk.cpu_seconds - (2.0 - bias / 1e9)).abs() < 1e-12,
            "{:?}",
            t.rmap_walk
        );
        let measured = t.rmap_walk_measured.expect("measured");
        assert!((measured.cpu_seconds - 2.0).abs() < 1e-12);
        assert_eq!(t.nested_calls, Some(500));
        let cost = t.timing_cpu_seconds.expect("timing cost");
        assert!((cost - 1500.0 * 800.0 / 1e9).abs() < 1e-12);
    }

    #[test]
    fn a_sampler_beside_direct_timing_gives_the_agreement_in_words() {
        let with_counts = |mut s: Sample, walk: u64, other: u64| {
            let r = s.rmap.as_mut().expect("rmap");
            r.rate_hz = 100;
            r.period_ns = 10_000_000;
            r.counts
                .entry("rmap_walk".into())
                .or_default()
                .insert("direct_reclaim".into(), walk);
            r.counts
                .entry("user".into())
                .or_default()
                .insert("process".into(), other);
            r.inside_walk = walk;
            s
        };
        let probes = [direct_probe(), status(true)];
        // Direct: 2 s of 20 CPU-s = 10%. Sampled: 240 of 1000 = 24%.
        let far = [
            with_counts(timed(0, (0, 0, 0, 0), 0, None), 0, 0),
            with_counts(timed(10, (10, 10, 0, 2_000_000_000), 0, None), 240, 760),
        ];
        let t = totals(&far, &probes).expect("totals");
        let a = t.agreement.expect("agreement");
        assert!(!a.agree, "{a:?}");
        assert!(a.summary.contains("disagree"), "{}", a.summary);
        assert_eq!(t.sampled.as_ref().map(|s| s.samples), Some(1000));
        assert_eq!(t.method, Method::DirectTiming);
        assert_eq!(t.categories["rmap_walk"].samples, 240);
        // Sampled 11%: within 5 points.
        let near = [
            with_counts(timed(0, (0, 0, 0, 0), 0, None), 0, 0),
            with_counts(timed(10, (10, 10, 0, 2_000_000_000), 0, None), 110, 890),
        ];
        let a = totals(&near, &probes)
            .expect("totals")
            .agreement
            .expect("agreement");
        assert!(a.agree && a.summary.contains("agree"), "{a:?}");
        assert!((a.tolerance - 0.05).abs() < 1e-12);
    }

    #[test]
    fn counts_going_backwards_are_unknown() {
        let s = [sample(10, 0, 0, vec![]), sample(5, 0, 0, vec![])];
        assert!(totals(&s, &[status(true)]).is_err());
    }
}
