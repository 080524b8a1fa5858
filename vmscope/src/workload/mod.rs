//! `vmscope workload NAME`: built-in workloads whose work is fixed, so
//! their runs compare. Each prints its own figures and a final JSON line.

pub mod lat;
pub mod lazyfree;
pub mod rmap;

use crate::cli::Workload;

pub fn run(w: &Workload) -> anyhow::Result<u8> {
    match w {
        Workload::Lat(a) => lat::run(a),
        Workload::Lazyfree(a) => lazyfree::run(a),
        Workload::Rmap(a) => rmap::run(a),
    }
}
