//! Experiments: the built-in workloads that reproduce the classic VM
//! experiments, the labs that run them A/B with statistics, `bench` (a
//! command's runs, each recorded), the probes' own cost (`overhead`) and
//! the memory pressure they set up (zram swap, memory cgroups).

pub mod bench;
pub mod lab;
pub mod lab_wss;
pub mod overhead;
pub mod pressure;
pub mod workload;
