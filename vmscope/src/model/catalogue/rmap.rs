//! Reverse mapping: `top`'s rmap CPU rows and the run's rmap figures.

use super::*;

/// The recording's rmap figures, if it measured them.
fn rmap(rec: &dyn Run) -> Option<&crate::model::rmap::RmapTotals> {
    rec.rmap()
}

/// Its rows of `top`'s rates panel.
pub const RATES: &[Rate] = &[
    Rate {
        label: "rmap walk CPU",
        unit: "%",
        needs: &[Need::Probe(probe::RMAP_SAMPLER)],
        value: RateValue::RmapWalk,
        detail: Detail::RmapSamples,
        help: "Share of CPU time in reverse-mapping walks (sampled).",
    },
    Rate {
        label: "rmap maintenance CPU",
        unit: "%",
        needs: &[Need::Probe(probe::RMAP_SAMPLER)],
        value: RateValue::RmapMaintenance,
        detail: Detail::RmapSamples,
        help: "Share of CPU time maintaining reverse mappings (sampled).",
    },
];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "rmap_walk_cpu",
        "s",
        Lower,
        Rest,
        false,
        "CPU time in reverse-mapping walks.",
        |r| rmap(r).map(|x| x.rmap_walk.cpu_seconds),
    ),
    row(
        "rmap_walk_share",
        "%",
        Lower,
        Rest,
        false,
        "Share of CPU time in reverse-mapping walks.",
        |r| rmap(r).map(|x| 100.0 * x.rmap_walk.share),
    ),
    row(
        "rmap_walk_share_sampled",
        "%",
        Lower,
        Rest,
        false,
        "Share of CPU time inside reverse-mapping walks by the stack sampler running beside direct timing (a walk anywhere on the stack), to set beside rmap_walk_share.",
        |r| {
            rmap(r)?
                .sampled
                .as_ref()
                .map(|s| 100.0 * s.inside_walk.share)
        },
    ),
    row(
        "rmap_maint_cpu",
        "s",
        Lower,
        Rest,
        false,
        "CPU time maintaining reverse mappings.",
        |r| rmap(r)?.rmap_maintenance.as_ref().map(|m| m.cpu_seconds),
    ),
    row(
        "rmap_maint_share",
        "%",
        Lower,
        Rest,
        false,
        "Share of CPU time maintaining reverse mappings.",
        |r| rmap(r)?.rmap_maintenance.as_ref().map(|m| 100.0 * m.share),
    ),
    row(
        "rmap_walk_calls",
        "calls",
        Neither,
        Rest,
        false,
        "rmap walks timed (direct timing only).",
        |r| rmap(r)?.walk_calls.map(|v| v as f64),
    ),
    row(
        "rmap_maint_calls",
        "calls",
        Neither,
        Rest,
        false,
        "rmap maintenance calls timed (direct timing only).",
        |r| rmap(r)?.maintenance_calls.map(|v| v as f64),
    ),
    row(
        "rmap_samples",
        "samples",
        Neither,
        Rest,
        false,
        "Stack samples behind the rmap shares (sampling only).",
        |r| {
            let x = rmap(r)?;
            (x.method == crate::model::rmap::Method::StackSampling).then_some(x.samples as f64)
        },
    ),
];
