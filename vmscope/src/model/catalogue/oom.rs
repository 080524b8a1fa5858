//! OOM kills: the victims the kernel marked, system-wide.

use super::*;

/// Its system-wide counters.
pub const COUNTERS: &[Counter] = &[c(
    "oom_kills",
    counter::OOM_KILLS,
    probe::OOM_VICTIM,
    "victims",
    "OOM victims the kernel marked, system-wide (memory-cgroup OOMs included).",
    Export::Plain("vmscope_oom_kills_total", "OOM victims the kernel marked."),
)];

/// Its figures of a recorded run.
pub const RUN_ROWS: &[RunRow] = &[row(
    "oom_kills",
    "victims",
    Lower,
    Before,
    false,
    "OOM victims the kernel marked (system-wide).",
    |r| vm_counter(r, "oom_kills"),
)];
