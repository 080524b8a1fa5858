//! The working set (`--working-set`, see `model::wss`): the run's figures
//! for compare and bench. Its samples, exporter families and summary are
//! `model::wss`'s and `serve`'s: they are gauges of a scan, not counters of
//! a probe.

use super::*;

/// Its figures of a recorded run: absent when it was not measured or no
/// window finished, never 0.
pub const RUN_ROWS: &[RunRow] = &[
    row(
        "working_set_bytes",
        "bytes",
        Neither,
        After,
        false,
        "The scope's working set (bytes touched within the window), the mean over the run's windows.",
        |r| r.working_set()?.scope.as_ref().map(|f| f.mean_bytes),
    ),
    row(
        "working_set_max_bytes",
        "bytes",
        Neither,
        After,
        false,
        "The scope's largest working set in one window.",
        |r| r.working_set()?.scope.as_ref().map(|f| f.max_bytes as f64),
    ),
];
