//! `vmscope workload NAME`: built-in workloads whose work is fixed, so
//! their runs compare. Each prints its own figures and a final JSON line.

pub mod lat;
