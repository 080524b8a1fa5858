//! The rmap totals of a recording, from its samples' rmap readings:
//! direct timing's per-function figures, or the stack sampler's shares,
//! and both side by side when both ran.

use std::collections::BTreeMap;

use super::*;

/// What the totals read of one sample: when it was taken, the pids whose
/// processes ended at it, and its rmap reading (a sample converts into
/// one).
#[derive(Clone, Copy, Debug)]
pub struct RmapReading<'a> {
    pub elapsed_ns: u64,
    pub exited: &'a [u32],
    pub rmap: Option<&'a RmapSample>,
}

/// Each process's latest counts, keyed by pid and how many processes had
/// ended under that pid before it (`Sample::exited`): a reused pid's
/// processes are told apart.
fn proc_map<'a>(
    samples: impl Iterator<Item = &'a RmapReading<'a>>,
) -> BTreeMap<(u32, u32), RmapProc> {
    let mut m = BTreeMap::new();
    let mut ended: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    for s in samples {
        for &pid in s.exited {
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
pub fn totals(samples: &[RmapReading<'_>], probes: &[ProbeStatus]) -> Result<RmapTotals, String> {
    let status = probes.iter().find(|p| p.probe == PROBE);
    if let Some(d) = probes
        .iter()
        .find(|p| p.probe == DIRECT_PROBE && p.attached)
    {
        let mut t = direct_totals(samples, d.reason.clone().unwrap_or_default())?;
        if status.is_some_and(|p| p.attached)
            && let Ok(sampled) = sampled_totals(samples, String::new())
            && sampled.samples > 0
        {
            let with: Vec<&RmapSample> = samples.iter().filter_map(|s| s.rmap).collect();
            let inside = match (with.first(), with.last()) {
                (Some(a), Some(b)) => b.inside_walk.saturating_sub(a.inside_walk),
                _ => 0,
            };
            beside(&mut t, sampled, inside);
        }
        return Ok(t);
    }
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
fn process_totals(samples: &[RmapReading<'_>], period: u64) -> Vec<RmapProcTotal> {
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
fn sampled_totals(samples: &[RmapReading<'_>], reason: String) -> Result<RmapTotals, String> {
    let with: Vec<&RmapSample> = samples.iter().filter_map(|s| s.rmap).collect();
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
        rmap_walk_measured: None,
        nested_calls: None,
        walk_off_cpu_seconds: None,
        calibration: None,
        timing_cpu_seconds: None,
        sampled: None,
        agreement: None,
        categories,
        contexts,
        processes: process_totals(samples, period),
        by_context,
    })
}

/// The sampler's figures of the same run into direct timing's totals.
fn beside(t: &mut RmapTotals, s: RmapTotals, inside_walk: u64) {
    let maintenance = s.rmap_maintenance.clone().unwrap_or_default();
    let period_ns = if s.samples > 0 {
        (s.sampled_cpu_seconds * 1e9 / s.samples as f64).round() as u64
    } else {
        0
    };
    let inside = Share::of(inside_walk, s.samples, period_ns);
    t.agreement = Some(agreement(
        t.rmap_walk.share,
        inside.share,
        inside.share_stderr,
    ));
    t.sampled = Some(SampledFigures {
        rate_hz: s.rate_hz,
        samples: s.samples,
        lost_samples: s.lost_samples,
        rmap_walk: s.rmap_walk,
        inside_walk: inside,
        rmap_maintenance: maintenance,
    });
    t.categories = s.categories;
    t.contexts = s.contexts;
    t.by_context = s.by_context;
    t.processes = s.processes;
}

/// Calls, outermost calls, nested calls, CPU and off-CPU time of one kind
/// of function between two readings.
#[derive(Default)]
struct Sums {
    calls: u64,
    outer: u64,
    nested: u64,
    ns: u64,
    off: u64,
}

/// Each timed function between two readings, and the sums of walks and of
/// maintenance.
fn function_totals(
    first: &RmapSample,
    last: &RmapSample,
) -> Result<(Vec<FnTotal>, Sums, Sums), String> {
    let mut functions = Vec::new();
    let (mut walks, mut maint) = (Sums::default(), Sums::default());
    for f in &last.functions {
        let before = first.functions.iter().find(|x| x.function == f.function);
        let d = |get: fn(&FnSample) -> u64| {
            get(f)
                .checked_sub(before.map_or(0, get))
                .ok_or("the call counts went backwards")
        };
        let (calls, outer, nested, ns, off) = (
            d(|x| x.calls)?,
            d(|x| x.outer_calls)?,
            d(|x| x.nested)?,
            d(|x| x.ns)?,
            d(|x| x.off_cpu_ns)?,
        );
        let hist = |s: &FnSample| crate::model::hist::HistSample {
            name: s.function.clone(),
            sum_ns: s.ns,
            buckets: s.buckets.clone(),
        };
        let sums = match f.kind {
            RmapFnKind::Walk => &mut walks,
            RmapFnKind::Maintenance => &mut maint,
        };
        sums.calls += calls;
        sums.outer += outer;
        sums.nested += nested;
        sums.ns += ns;
        sums.off += off;
        functions.push(FnTotal {
            function: f.function.clone(),
            kind: f.kind,
            calls,
            outer_calls: outer,
            nested,
            latency: crate::model::hist::summarize(before.map(hist).as_ref(), &hist(f)),
        });
    }
    Ok((functions, walks, maint))
}

/// Totals of a direct-timing recording.
fn direct_totals(samples: &[RmapReading<'_>], reason: String) -> Result<RmapTotals, String> {
    let with: Vec<(u64, &RmapSample)> = samples
        .iter()
        .filter_map(|s| Some((s.elapsed_ns, s.rmap?)))
        .collect();
    let (Some(&(t0, first)), Some(&(t1, last))) = (with.first(), with.last()) else {
        return Err("no sample read from the direct timer".into());
    };
    let (functions, walks, maint) = function_totals(first, last)?;
    let cpu_time_s = t1.saturating_sub(t0) as f64 / 1e9 * f64::from(last.cpus);
    let share = |ns: f64| Share {
        samples: 0,
        cpu_seconds: ns / 1e9,
        share: if cpu_time_s > 0.0 {
            ns / 1e9 / cpu_time_s
        } else {
            0.0
        },
        share_stderr: 0.0,
    };
    let calibration = last.calibration.clone();
    let corrected = |s: &Sums| match &calibration {
        Some(c) => (s.ns as f64 - c.bias_ns(s.outer, s.nested)).max(0.0),
        None => s.ns as f64,
    };
    let has_maintenance = last
        .functions
        .iter()
        .any(|f| f.kind == RmapFnKind::Maintenance);
    Ok(RmapTotals {
        method: Method::DirectTiming,
        method_reason: reason,
        rate_hz: 0,
        cpus: last.cpus,
        samples: 0,
        lost_samples: 0,
        sampled_cpu_seconds: cpu_time_s,
        rmap_walk: share(corrected(&walks)),
        rmap_maintenance: has_maintenance.then(|| share(corrected(&maint))),
        walk_calls: Some(walks.calls),
        maintenance_calls: Some(maint.calls),
        functions,
        rmap_walk_measured: Some(share(walks.ns as f64)),
        nested_calls: Some(walks.nested + maint.nested),
        walk_off_cpu_seconds: Some(walks.off as f64 / 1e9),
        timing_cpu_seconds: calibration
            .as_ref()
            .map(|c| (walks.calls + maint.calls) as f64 * c.call_ns / 1e9),
        calibration,
        sampled: None,
        agreement: None,
        categories: BTreeMap::new(),
        contexts: BTreeMap::new(),
        by_context: BTreeMap::new(),
        processes: Vec::new(),
    })
}
