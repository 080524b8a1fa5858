//! The values as text: rates, sizes, limits, sparklines, and the cells of
//! a process or cgroup row.

use crate::model::view::{CgroupRow, Limit, ProcRow, RowRates};

/// A rate for display: `n/a` when unknown, never 0.
pub fn fmt_rate(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if v.abs() < 10.0 && v.fract() != 0.0 => format!("{v:.1}"),
        Some(v) if v >= 1e7 => format!("{:.1}M", v / 1e6),
        Some(v) => format!("{v:.0}"),
    }
}

pub(super) fn fmt_bytes(b: Option<u64>) -> String {
    match b {
        None => "n/a".into(),
        Some(b) if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30)),
        Some(b) => format!("{:.0} MiB", b as f64 / f64::from(1u32 << 20)),
    }
}

/// A size in a table cell, short and without blanks (`512K`, `64M`,
/// `1.5G`); `–` when unknown.
pub fn fmt_size(b: Option<u64>) -> String {
    const K: f64 = 1024.0;
    match b {
        None => "–".into(),
        Some(b) if b as f64 >= K * K * K => format!("{:.1}G", b as f64 / (K * K * K)),
        Some(b) if b as f64 >= K * K => format!("{:.0}M", b as f64 / (K * K)),
        Some(b) => format!("{:.0}K", b as f64 / K),
    }
}

pub(super) fn fmt_limit(l: Limit) -> String {
    match l {
        Limit::Unknown => "–".into(),
        Limit::Unlimited => "max".into(),
        Limit::Bytes(b) => fmt_size(Some(b)),
    }
}

/// A sparkline as text, scaled to the largest value shown.
pub fn sparkline(values: &[f64], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let tail = &values[values.len().saturating_sub(width)..];
    let max = tail.iter().copied().fold(0.0, f64::max);
    tail.iter()
        .map(|&v| {
            if v <= 0.0 || max <= 0.0 {
                ' '
            } else {
                BARS[((v / max) * 7.0).round().clamp(0.0, 7.0) as usize]
            }
        })
        .collect()
}

fn rate_cells(a: &RowRates) -> impl Iterator<Item = String> {
    a.values().into_iter().map(fmt_rate)
}

/// A process row's cells, in `COLUMNS` order.
pub(super) fn proc_cells(r: &ProcRow) -> Vec<String> {
    [r.pid.to_string(), r.comm.clone()]
        .into_iter()
        .chain(rate_cells(&r.rates))
        .chain([fmt_size(r.wss_bytes)])
        .collect()
}

/// A cgroup row's cells, in `CGROUP_COLUMNS` order.
pub(super) fn cgroup_cells(r: &CgroupRow) -> Vec<String> {
    // The workload its path names where known (the path is in the title
    // of its processes' table), else the path.
    [
        r.workload.clone().unwrap_or_else(|| r.path.clone()),
        r.live.to_string(),
    ]
    .into_iter()
    .chain(rate_cells(&r.rates))
    .chain([
        fmt_size(r.usage_bytes),
        fmt_limit(r.limit),
        r.psi_some.map_or("n/a".into(), |p| format!("{p:.2}")),
        fmt_size(r.wss_bytes),
    ])
    .collect()
}
